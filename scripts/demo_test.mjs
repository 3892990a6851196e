// End-to-end test of the demo page (www/index.html + www/demo.js + www/train_worker.js) in
// headless Chromium (playwright-core on /usr/bin/chromium, WebGPU on a software adapter). Needs
// the package built (bash scripts/build_web.sh) and the data (bash scripts/data.sh).
//
//   node scripts/demo_test.mjs [--steps=N] [--bs=N] [--model=mlp|cnn] [--shots=DIR] [--verbose]
//   node scripts/demo_test.mjs --runahead [--modes=ring,sync,ring0,...] [--steps=N] [--bs=N] [--model=mlp|cnn]
//   node scripts/demo_test.mjs --beam
//   node scripts/demo_test.mjs --gpt [--gpt-steps=N]     (only the GPT tab; --mnist: only MNIST)
//
// The test: the page loads; training runs in the worker while the main thread's longest task
// stays under 100 ms (from start() on, the capture and the first compiles included); the charts get points; every step's loss arrives; predict() is right for
// most of 20 real test images; the inspector lists every kernel of the captured step with a time
// > 0; model.safetensors downloaded from the page loads back (through the file input, into a
// fresh model) to identical predictions; a corrupt upload shows an error while training goes on;
// a reload resumes at the checkpointed step; the GPU device lost mid-training (`loseDevice()`)
// is re-initialised in the worker and training resumes from the last checkpoint (a page call in
// flight at the loss fails with it, and the worker's live tensors, counted once everything has
// settled, are as many after the recovery as before). Screenshots before and after training go to
// --shots (default target/demo-shots). --runahead instead times the same training with
// stall-free metrics and with a readback every step, and prints both. --beam trains 6 steps with
// BEAM=2 (the search runs in the worker), then reloads: every tuned kernel must come from
// IndexedDB (0 searched) and the losses must be identical (about 80 s on SwiftShader, so it is
// not part of the default run).
//
// The GPT tab (`?task=gpt`, run after the MNIST test): a tiny GPT trains on Shakespeare in the
// worker; its loss falls, validation losses arrive on the chart, samples stream in and
// `generate()` writes text of the asked length from the vocabulary with the replayed
// decode step; the inspector times the step's kernels; gpt.safetensors downloads with the Rust
// model's tensor names; a corrupt upload is an error; a reload resumes at the checkpoint; pasted
// text that is empty, one character or too large is an error on the page, and a short text of
// one's own trains.

import { existsSync, mkdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { serve } from "./serve.mjs";

const ROOT = fileURLToPath(new URL("..", import.meta.url));
const CHROMIUM = process.env.CHROMIUM ?? "/usr/bin/chromium";
const ARGS = ["--no-sandbox", "--enable-unsafe-webgpu", "--enable-features=Vulkan", "--disable-gpu-sandbox"];
const flags = new Map(process.argv.slice(2).map((a) => {
  const m = /^--([^=]+)(?:=(.*))?$/.exec(a);
  if (!m) fail(`unknown argument ${a}`);
  return [m[1], m[2] ?? true];
}));
const STEPS = Number(flags.get("steps") ?? 120);
const BS = Number(flags.get("bs") ?? 64);
const MODEL = flags.get("model") ?? "mlp";
const SHOTS = flags.get("shots") ?? join(ROOT, "target/demo-shots");
const VERBOSE = flags.has("verbose");

function fail(msg) {
  console.error(`demo_test: FAIL: ${msg}`);
  process.exit(1);
}
const check = (ok, msg) => {
  if (!ok) fail(msg);
};
const argmax = (p) => p.indexOf(Math.max(...p));

for (const f of ["pkg/web/wgrad_bg.wasm", "node_modules/uplot/dist/uPlot.iife.min.js", "data/mnist/t10k-images-idx3-ubyte.gz", "data/shakespeare/val.txt"]) {
  check(existsSync(join(ROOT, f)), `${f} is missing (bash scripts/build_web.sh; bash scripts/data.sh; npm install)`);
}

const { chromium } = await import("playwright-core");
const browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: ARGS });
// Cross-origin isolated, as scripts/run_web.sh serves the demo (WebAssembly kernels on every core).
const srv = await serve({ port: 0, root: ROOT, isolated: true });
const context = await browser.newContext({ viewport: { width: 1280, height: 1180 }, acceptDownloads: true });
const problems = [];

async function openPage(query, { startEarly = false } = {}) {
  const page = await context.newPage();
  page.on("pageerror", (e) => problems.push(`page error: ${e.message}`));
  page.on("console", (m) => {
    if (m.type() === "error") problems.push(`console error: ${m.text()}`);
    if (VERBOSE || m.type() === "warning") console.log(`  [page ${m.type()}] ${m.text()}`);
  });
  page.on("response", (r) => r.status() >= 400 && problems.push(`HTTP ${r.status()} for ${r.url()}`));
  page.on("crash", () => problems.push("the page crashed"));
  // The main thread's long tasks (over 50 ms), from page load on.
  await page.addInitScript(() => {
    window.__longTasks = [];
    new PerformanceObserver((l) => l.getEntries().forEach((e) => window.__longTasks.push([e.startTime, e.duration])))
      .observe({ type: "longtask", buffered: true });
  });
  await page.goto(`${srv.url}www/index.html?${new URLSearchParams(query)}`, { waitUntil: "load" });
  // `start()` before the engine is ready: queued until it is.
  if (startEarly) page.wasReady = await page.evaluate(() => { const r = window.wgradDemo.ready; window.wgradDemo.start(); return r; });
  await waitFor(page, () => window.wgradDemo?.ready || window.wgradDemo?.errors.length, 300, "the demo to get ready");
  const errs = await page.evaluate(() => window.wgradDemo.errors);
  check(errs.length === 0, `the page reported: ${errs.join("; ")}`);
  return page;
}

async function waitFor(page, fn, seconds, what, arg) {
  const end = Date.now() + seconds * 1000;
  for (;;) {
    if (problems.length) fail(`while waiting for ${what}: ${problems.join("; ")}`);
    if (await page.evaluate(fn, arg)) return;
    if (Date.now() > end) {
      const st = await page.evaluate(() => ({ status: window.wgradDemo?.lastStatus, step: window.wgradDemo?.step, errors: window.wgradDemo?.errors })).catch(() => ({}));
      fail(`timed out after ${seconds} s waiting for ${what} (page: ${JSON.stringify(st)})`);
    }
    await new Promise((r) => setTimeout(r, 200));
  }
}

/**
 * Live tensors in the worker once training has stopped and no call of the page's is in flight
 * (a call's tensors live until it replies; the strip refreshes when training stops).
 */
async function settledTensors(page) {
  await waitFor(page, () => !window.wgradDemo.running && window.wgradDemo.callsInFlight() === 0, 60, "the page's calls to reply");
  return (await page.evaluate(() => window.wgradDemo.info())).liveTensors;
}

const trainQuery = (extra = {}) => ({ model: MODEL, bs: BS, steps: STEPS, lr: MODEL === "mlp" ? 0.003 : 0.001,
  readEvery: 10, evalEvery: 40, ckptEvery: 40, ...extra });

async function train(page, { until, stopOnError = false } = {}) {
  const t0 = await page.evaluate(() => {
    window.wgradDemo.start();
    return performance.now();
  });
  const target = until ?? STEPS;
  await waitFor(page, ([n, stop]) => (window.wgradDemo.step >= n && !window.wgradDemo.running) || (stop && window.wgradDemo.errors.length > 0),
    900, `training to step ${target}`, [target, stopOnError]);
  if (stopOnError) {
    const errs = await page.evaluate(() => window.wgradDemo.errors);
    check(errs.length === 0, `training to step ${target}: ${errs.join("; ")}`);
  }
  return t0;
}

async function predictions(page, images) {
  return page.evaluate(async (imgs) => {
    const out = [];
    for (let i = 0; i < imgs.labels.length; i++) out.push(await window.wgradDemo.predict(imgs.pixels.slice(i * 784, (i + 1) * 784)));
    return out;
  }, images);
}

async function runahead() {
  const out = {};
  // Alternated, so that load from other processes falls on both alike.
  const modes = String(flags.get("modes") ?? "ring,sync,ring,sync").split(",");
  for (const mode of modes) {
    // "ring" keeps one chunk queued beyond the one being read, "ringN" N chunks.
    const [metrics, ahead] = mode.startsWith("ring") ? ["ring", Number(mode.slice(4) || 1)] : [mode, 1];
    const page = await openPage(trainQuery({ fresh: 1, metrics, ahead, evalEvery: 0, ckptEvery: 0 }));
    await train(page);
    const r = await page.evaluate(() => ({ timed: window.wgradDemo.timed, losses: window.wgradDemo.losses, device: window.wgradDemo.device, adapter: window.wgradDemo.adapter?.name }));
    if (out[mode]) out[mode].timed.all.push(r.timed.msPerStep);
    else out[mode] = { ...r, timed: { ...r.timed, all: [r.timed.msPerStep] } };
    console.log(`RUNAHEAD ${metrics === "ring" ? `stall-free (ring, read every 10, ${ahead} chunk(s) ahead)` : "readback every step"}: ${r.timed.msPerStep.toFixed(2)} ms/step over ${r.timed.steps} steps (${MODEL}, batch ${BS}, ${r.device}${r.adapter ? ` "${r.adapter}"` : ""})`);
    await page.close();
  }
  const median = (v) => {
    const s = [...v].sort((a, b) => a - b), m = s.length >> 1;
    return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
  };
  const ref = out.sync ?? Object.values(out)[0];
  for (const [mode, r] of Object.entries(out)) {
    const same = r.losses.length === ref.losses.length && r.losses.every((v, i) => v === ref.losses[i]);
    console.log(`RUNAHEAD ${mode}: median ${median(r.timed.all).toFixed(2)} ms/step over ${r.timed.all.length} run(s) ` +
      `(${r.timed.all.map((v) => v.toFixed(1)).join(", ")}); losses ${same ? "identical to" : "differ from"} ${out.sync ? "sync" : "the first mode"}`);
  }
}

async function endToEnd() {
  mkdirSync(SHOTS, { recursive: true });
  // 1. Load fresh, train in the worker.
  let page = await openPage(trainQuery({ fresh: 1 }));
  const dev = await page.evaluate(() => ({ device: window.wgradDemo.device, adapter: window.wgradDemo.adapter?.name }));
  console.log(`demo: ready on ${dev.device}${dev.adapter ? ` ("${dev.adapter}")` : ""}`);
  await page.waitForTimeout(1000); // the strip of test images comes in
  await page.screenshot({ path: join(SHOTS, "before.png") });
  const t0 = await train(page);
  // The charts redraw at most four times a second, so the last steps reach them a frame later.
  await waitFor(page, (n) => window.wgradDemo.chartPoints().loss >= n, 10, "the charts to draw the last step", STEPS);
  const r = await page.evaluate((t) => ({
    step: window.wgradDemo.step,
    losses: window.wgradDemo.losses,
    accuracies: window.wgradDemo.accuracies,
    kernels: window.wgradDemo.kernels,
    timer: window.wgradDemo.timer,
    rows: document.querySelectorAll("#kernels tr").length - 1,
    points: window.wgradDemo.chartPoints(),
    // Also from the capture on (the first two steps compile every pipeline).
    longest: Math.max(0, ...window.__longTasks.filter(([s]) => s >= window.wgradDemo.capturedAt).map(([, d]) => d)),
    longestAll: Math.max(0, ...window.__longTasks.filter(([s]) => s >= t).map(([, d]) => d)),
    capturedAt: window.wgradDemo.capturedAt - t,
    tasks: window.__longTasks.map(([s, d]) => [Math.round(s - t), Math.round(d)]),
    ckpt: window.wgradDemo.checkpointStep,
  }), t0);
  check(r.step === STEPS, `trained ${r.step} steps, expected ${STEPS}`);
  check(r.losses.length === STEPS && r.losses.every(Number.isFinite), `losses: ${r.losses.length} of ${STEPS}, finite: ${r.losses.every(Number.isFinite)}`);
  const mean = (v) => v.reduce((a, b) => a + b, 0) / v.length;
  const [early, late] = [mean(r.losses.slice(0, 10)), mean(r.losses.slice(-10))];
  check(late < early * 0.6, `the loss did not fall: ${early.toFixed(3)} -> ${late.toFixed(3)}`);
  // Memory: live tensors on the memory chart do not trend upward. They vary with the readbacks
  // in flight, so compare the floors: the fewest in the second half of training is at most the
  // fewest in the first half after warm-up (an evaluation or checkpoint that kept one tensor
  // more each time would raise it).
  const mem = await page.evaluate(() => window.wgradDemo.memorySeries());
  const fewest = (lo, hi) => Math.min(...mem[1].filter((_, i) => mem[0][i] >= lo && mem[0][i] < hi));
  const [firstHalf, secondHalf] = [fewest(10, STEPS / 2), fewest(STEPS / 2, STEPS + 1)];
  check(secondHalf <= firstHalf, `live tensors grew: at least ${firstHalf} in steps 10-${STEPS / 2}, ${secondHalf} after`);
  console.log(`ok: live tensors at least ${firstHalf} in steps 10-${STEPS / 2} and ${secondHalf} after, at most ${Math.max(...mem[1])} ` +
    `(${mem[1].length} points)`);
  check(r.points.loss === STEPS && r.points.acc >= 2 && r.points.speed > 0 && r.points.mem > 0, `chart points: ${JSON.stringify(r.points)}`);
  check(r.longestAll < 100, `the main thread's longest task while training (from start(), capture included) was ${r.longestAll.toFixed(0)} ms (${JSON.stringify(r.tasks)})`);
  check(r.kernels.length > 0 && r.rows === r.kernels.length, `inspector: ${r.kernels.length} kernels, ${r.rows} rows`);
  const untimed = r.kernels.filter((k) => k.name !== "copy" && !(k.ms > 0));
  check(untimed.length === 0, `kernels without a time > 0: ${untimed.map((k) => k.name).join(", ")}`);
  check(r.kernels.every((k) => k.name === "copy" || (k.source.includes("@compute") || r.kernels[0].source === "")), "a kernel without its WGSL");
  console.log(`ok: ${STEPS} steps in the worker, loss ${early.toFixed(3)} -> ${late.toFixed(3)}, accuracy ${r.accuracies.map((a) => a.acc.toFixed(1)).join(" → ")}%, ` +
    `longest main-thread task from start() on ${r.longestAll.toFixed(0)} ms (capture included; ${r.longest.toFixed(0)} ms after the capture at ` +
    `+${r.capturedAt.toFixed(0)} ms; long tasks [start ms, duration ms] relative to start(): ${JSON.stringify(r.tasks)}), chart points ${JSON.stringify(r.points)}`);
  console.log(`ok: inspector: ${r.kernels.length} launches timed by ${r.timer}, total ${r.kernels.reduce((a, k) => a + k.ms, 0).toFixed(2)} ms`);

  // 2. Predictions on 20 real test images.
  const imgs = await page.evaluate(() => window.wgradDemo.testImages(20, 0));
  const p1 = await predictions(page, imgs);
  const right = p1.filter((p, i) => argmax(p) === imgs.labels[i]).length;
  check(p1.every((p) => p.length === 10 && Math.abs(p.reduce((a, b) => a + b, 0) - 1) < 1e-4), "predict() does not return 10 probabilities");
  check(right >= 14, `predict() right for ${right} of 20 test images`);
  console.log(`ok: predict() right for ${right} of 20 test images`);
  // A digit drawn on the pad, for the screenshot: a "7".
  const box = await page.locator("#pad").boundingBox();
  const pt = (x, y) => [box.x + (x * box.width) / 280, box.y + (y * box.height) / 280];
  await page.mouse.move(...pt(70, 60));
  await page.mouse.down();
  for (const [x, y] of [[140, 58], [210, 60], [180, 130], [150, 200], [135, 240]]) await page.mouse.move(...pt(x, y), { steps: 6 });
  await page.mouse.up();
  await page.waitForTimeout(1500);
  await page.screenshot({ path: join(SHOTS, "after.png") });

  // 3. Save through the page's button (a download).
  const [download] = await Promise.all([page.waitForEvent("download"), page.click("#save")]);
  check(download.suggestedFilename() === "model.safetensors", `download named ${download.suggestedFilename()}`);
  const saved = readFileSync(await download.path());
  console.log(`ok: model.safetensors downloaded (${saved.length} bytes)`);

  // 4. A corrupt upload while training goes on.
  const more = STEPS + 40;
  await page.fill("#steps", String(more));
  await page.dispatchEvent("#steps", "change");
  await page.evaluate(() => window.wgradDemo.start());
  await waitFor(page, (n) => window.wgradDemo.step > n, 300, "training to continue", STEPS + 5);
  const before = await page.evaluate(() => window.wgradDemo.step);
  await page.setInputFiles("#load", { name: "broken.safetensors", mimeType: "application/octet-stream", buffer: Buffer.from("this is not a safetensors file") });
  await waitFor(page, () => getComputedStyle(document.getElementById("error")).display !== "none", 120, "an error message on the page");
  const msg = await page.textContent("#error");
  await train(page, { until: more });
  const after = await page.evaluate(() => ({ step: window.wgradDemo.step, running: window.wgradDemo.running, errors: window.wgradDemo.errors, ckpt: window.wgradDemo.checkpointStep }));
  check(after.step === more, `training stopped at ${after.step} after the corrupt upload`);
  check(after.errors.length === 1 && /broken\.safetensors/.test(msg), `errors: ${JSON.stringify(after.errors)}`);
  console.log(`ok: a corrupt upload at step ${before} shows "${msg.trim()}"; training went on to step ${after.step}`);
  check(after.ckpt === more, `the last checkpoint is at step ${after.ckpt}, expected ${more}`);
  const query = Object.fromEntries(new URL(page.url()).searchParams);
  delete query.fresh;
  await page.close();

  // 5. A reload resumes at the checkpoint.
  page = await openPage(query);
  const resumed = await page.evaluate(() => ({ step: window.wgradDemo.step, losses: window.wgradDemo.losses.length }));
  check(resumed.step === more && resumed.losses === more, `the reload resumed at step ${resumed.step} (${resumed.losses} losses), expected ${more}`);
  await page.fill("#steps", String(more + 10));
  await page.dispatchEvent("#steps", "change");
  await train(page, { until: more + 10 });
  console.log(`ok: the reload resumed at step ${resumed.step} and trained on to ${more + 10}`);

  // 6. The GPU device is lost mid-training (GPUDevice.destroy(), as a driver reset would): the
  // worker starts WebGPU again and resumes from the last checkpoint, in the same page.
  if ((await page.evaluate(() => window.wgradDemo.device)) === "webgpu") {
    const end = more + 90;
    const idle = await settledTensors(page);
    await page.fill("#steps", String(end));
    await page.dispatchEvent("#steps", "change");
    await page.evaluate(() => window.wgradDemo.start());
    await waitFor(page, (n) => window.wgradDemo.checkpointStep > n && window.wgradDemo.step > window.wgradDemo.checkpointStep + 5,
      300, "a checkpoint during training", more + 10);
    // A call of the page's (test images, as the strip's refresh makes) is in flight at the loss.
    const atLoss = await page.evaluate(async () => {
      window.wgradInFlight = window.wgradDemo.testImages(20, 0).then(() => "replied", (e) => `failed: ${e.message}`);
      return { ckpt: window.wgradDemo.checkpointStep, ...(await window.wgradDemo.loseDevice()) };
    });
    await waitFor(page, () => window.wgradDemo.recovered, 300, "the recovery from the device loss");
    await train(page, { until: end });
    const rec = await page.evaluate(() => ({
      recovered: window.wgradDemo.recovered, step: window.wgradDemo.step, losses: window.wgradDemo.losses,
      errors: window.wgradDemo.errors, notice: document.getElementById("notice").textContent,
    }));
    const inFlight = await page.evaluate(() => Promise.race([window.wgradInFlight, new Promise((ok) => setTimeout(() => ok("pending"), 10000))]));
    rec.tensors = await settledTensors(page);
    check(/device lost/i.test(rec.recovered.error), `the recovery's error does not name the device loss: ${rec.recovered.error}`);
    check(rec.recovered.resumedAt === atLoss.ckpt, `resumed at step ${rec.recovered.resumedAt}, the last checkpoint was at ${atLoss.ckpt}`);
    check(rec.step === end && rec.losses.length === end && rec.losses.every(Number.isFinite), `after the recovery: step ${rec.step}, ${rec.losses.length} losses`);
    check(rec.errors.length === 0, `errors on the page after the recovery: ${JSON.stringify(rec.errors)}`);
    check(/lost at step/.test(rec.notice), `the page's notice: ${rec.notice}`);
    check(/device lost/i.test(inFlight), `the call in flight at the loss: ${inFlight}`);
    check(rec.tensors === idle, `live tensors ${idle} before the loss, ${rec.tensors} after the recovery`);
    console.log(`ok: device lost at step ${atLoss.step} ("${rec.recovered.error}"); WebGPU re-initialised in the worker, resumed from the ` +
      `checkpoint at step ${rec.recovered.resumedAt} and trained on to ${rec.step}; live tensors ${idle} before, ${rec.tensors} after; the call in flight failed with the loss`);
    await page.screenshot({ path: join(SHOTS, "recovered.png") });
  }

  // 7. Start fresh, then load the saved file: identical predictions again.
  await page.evaluate(() => window.wgradDemo.reset());
  await waitFor(page, () => window.wgradDemo.ready && window.wgradDemo.step === 0, 300, "a fresh start");
  const fresh = await predictions(page, imgs);
  check(fresh.some((p, i) => p.some((v, j) => v !== p1[i][j])), "a fresh model predicts exactly like the trained one");
  await page.setInputFiles("#load", { name: "model.safetensors", mimeType: "application/octet-stream", buffer: saved });
  await waitFor(page, () => /loaded model\.safetensors/.test(window.wgradDemo.lastStatus) || window.wgradDemo.errors.length, 120, "the upload to load");
  const p2 = await predictions(page, imgs);
  const same = p2.every((p, i) => p.every((v, j) => v === p1[i][j]));
  check(same, "the loaded model.safetensors does not predict exactly like the model that saved it");
  console.log("ok: model.safetensors loaded into a fresh model gives identical predictions on the 20 images");
  await page.close();

  // 8. `wgradDemo.start()` called as the page loads, before the engine is ready, trains once it is.
  page = await openPage(trainQuery({ fresh: 1, steps: 3, evalEvery: 0, ckptEvery: 0 }), { startEarly: true });
  check(page.wasReady === false, "the demo was ready at page load: start() before ready was not exercised");
  await waitFor(page, () => window.wgradDemo.step >= 3 && !window.wgradDemo.running, 300, "a start() called before ready to train");
  console.log("ok: start() called before the engine was ready trained 3 steps once it was");
  await page.close();

  // 9. WebAssembly kernels (the device picker's "wasm"): the page is cross-origin isolated, so
  // the worker runs them on every core, says so, and trains.
  page = await openPage(trainQuery({ fresh: 1, device: "wasm", steps: 20, evalEvery: 0, ckptEvery: 0 }));
  await train(page, { until: 20, stopOnError: true });
  const w = await page.evaluate(() => ({ device: window.wgradDemo.device, losses: window.wgradDemo.losses, notice: document.getElementById("notice").textContent }));
  check(w.device === "wasm", `device ${w.device}, expected wasm`);
  check(/WebAssembly kernels on [2-9] CPU threads/.test(w.notice), `the notice on WebAssembly: ${w.notice}`);
  check(w.losses.length > 0 && w.losses.at(-1) < w.losses[0], `losses on WebAssembly: ${w.losses}`);
  console.log(`ok: device wasm: "${w.notice}"; loss ${w.losses[0].toFixed(3)} -> ${w.losses.at(-1).toFixed(3)}`);
  await page.close();
}

/** BEAM in the demo: a search, then a reload that finds every choice in IndexedDB. */
async function beam() {
  // 30 steps: the page reports ms/step per chunk of 10 steps once warm (from step 10 on).
  const q = trainQuery({ fresh: 1, beam: 2, steps: 30, bs: 16, evalEvery: 0, ckptEvery: 0 });
  const runs = [];
  for (let i = 0; i < 2; i++) {
    const page = await openPage(q);
    await train(page, { until: 30 });
    runs.push(await page.evaluate(() => ({ beam: window.wgradDemo.beam, losses: window.wgradDemo.losses.slice(0, 6), ms: window.wgradDemo.msPerStep })));
    await page.close();
  }
  // The same steps with the default kernels, for the speed of the tuned ones.
  const plain = await openPage(trainQuery({ fresh: 1, beam: 0, steps: 30, bs: 16, evalEvery: 0, ckptEvery: 0 }));
  await train(plain, { until: 30 });
  const base = await plain.evaluate(() => window.wgradDemo.msPerStep);
  await plain.close();
  const [a, b] = runs;
  const ms = (v) => (typeof v === "number" ? `${v.toFixed(1)} ms/step` : "no timing");
  console.log(`BEAM=2 (cached, after the reload): ${ms(b.ms)}; default kernels: ${ms(base)}`);
  check(a.beam && a.beam.searched > 0, `the first BEAM run searched nothing: ${JSON.stringify(a.beam)}`);
  check(b.beam && b.beam.searched === 0 && b.beam.imported > 0, `the reload did not find the IndexedDB cache: ${JSON.stringify(b.beam)}`);
  // The first run's step 1 ran the default kernels (the search follows it), the reload's the
  // tuned ones, whose reductions may round differently: equal to a float tolerance.
  const close = a.losses.length === 6 && a.losses.every((v, i) => Math.abs(v - b.losses[i]) <= 1e-3 * Math.max(1, Math.abs(v)));
  check(close, `the cached plans train differently: ${a.losses} vs ${b.losses}`);
  console.log(`ok: BEAM=2 searched ${a.beam.searched} kernels in ${a.beam.seconds.toFixed(1)} s; after a reload ${b.beam.imported} ` +
    `tuned kernels came from IndexedDB and ${b.beam.searched} were searched (${b.beam.seconds.toFixed(1)} s); losses ${a.losses.map((v) => v.toFixed(4))} vs ${b.losses.map((v) => v.toFixed(4))}`);
}

/** The GPT tab end to end. */
async function gptTab() {
  const steps = Number(flags.get("gpt-steps") ?? 30);
  const query = { task: "gpt", fresh: 1, steps, lr: 0.01, readEvery: 10, evalEvery: 10, ckptEvery: 10, sampleMs: 100, sampleLen: 40 };
  let page = await openPage(query);
  const info = await page.evaluate(() => ({ vocab: window.wgradDemo.vocab, device: window.wgradDemo.device, note: document.getElementById("sample-note").textContent }));
  check(typeof info.vocab === "string" && info.vocab.length > 50 && info.vocab.includes("\n"), `the vocabulary: ${JSON.stringify(info.vocab)}`);
  console.log(`gpt: ready on ${info.device} ${info.note}`);
  await train(page, { until: steps, stopOnError: true });
  await waitFor(page, (n) => window.wgradDemo.chartPoints().loss >= n, 10, "the loss chart to draw the last step", steps);
  const r = await page.evaluate(() => ({
    losses: window.wgradDemo.losses, val: window.wgradDemo.valLosses, samples: window.wgradDemo.samples,
    kernels: window.wgradDemo.kernels, timed: window.wgradDemo.timed, ckpt: window.wgradDemo.checkpointStep,
    shown: document.getElementById("sample").textContent,
  }));
  const mean = (v) => v.reduce((a, b) => a + b, 0) / v.length;
  check(r.losses.length === steps && r.losses.every(Number.isFinite), `gpt losses: ${r.losses.length} of ${steps}`);
  const [early, late] = [mean(r.losses.slice(0, 3)), mean(r.losses.slice(-5))];
  check(early > 4 && late < early - 0.5, `the GPT's loss did not fall: ${early.toFixed(3)} -> ${late.toFixed(3)}`);
  check(r.val.length >= 2 && r.val.every((v) => Number.isFinite(v.loss) && v.step > 0), `validation losses: ${JSON.stringify(r.val)}`);
  // Below the first steps' loss (about ln(vocabulary), a uniform guess) by far; not compared
  // with each other: the streamed samples draw from the same random stream as the batches, as
  // many as time allows, so the batches after the first sample differ from run to run.
  check(r.val.every((v) => v.loss < early - 0.5), `the validation loss did not fall: ${JSON.stringify(r.val)} (first steps ${early})`);
  const inVocab = (t) => [...t].every((ch) => info.vocab.includes(ch));
  const streamed = r.samples.map((x) => x.text).join("");
  check(r.samples.length >= 1 && streamed.length > 0 && inVocab(streamed), `samples while training: ${JSON.stringify(r.samples)}`);
  check(r.shown.includes(r.samples.at(-1).text), "the page does not show the latest sample");
  const untimed = r.kernels.filter((k) => k.name !== "copy" && !(k.ms > 0));
  check(r.kernels.length > 0 && untimed.length === 0, `gpt inspector: ${r.kernels.length} kernels, untimed ${untimed.map((k) => k.name)}`);
  const sps = r.timed ? 1000 / r.timed.msPerStep : NaN;
  console.log(`ok: gpt: ${steps} steps, loss ${early.toFixed(3)} -> ${late.toFixed(3)}, validation ${r.val.map((v) => `${v.loss.toFixed(3)}@${v.step}`).join(" → ")}; ` +
    `${r.timed ? `${r.timed.msPerStep.toFixed(0)} ms/step (${sps.toFixed(2)} steps/s) over ${r.timed.steps} steps` : "untimed"}; ` +
    `${r.samples.length} sample(s) streamed (${streamed.length} characters: ${JSON.stringify(streamed.slice(0, 40))}); inspector ${r.kernels.length} launches`);
  const g0 = Date.now();
  const gen = await page.evaluate(() => window.wgradDemo.generate({ prompt: "ROMEO:", n: 50, temperature: 0.8, topK: 10 }));
  const gs = (Date.now() - g0) / 1000;
  check([...gen.text].length === 50 && inVocab(gen.text) && gen.prompt === "ROMEO:" && gen.launches > 0, `generate(): ${JSON.stringify(gen)}`);
  let bad = null;
  await page.evaluate(() => window.wgradDemo.generate({ prompt: "\u00e9\u00e9" })).catch((e) => (bad = /generate: [^\n]*/.exec(e.message)?.[0] ?? e.message));
  check(/not in the vocabulary/.test(bad ?? ""), `generate() with an unknown character: ${bad}`);
  await page.waitForTimeout(500);
  await page.screenshot({ path: join(SHOTS, "gpt.png") });
  console.log(`ok: generate(): 50 characters in ${gs.toFixed(1)} s (decode step of ${gen.launches} launches, replayed): ${JSON.stringify("ROMEO:" + gen.text)}; an unknown character: "${bad}"`);

  // Save, a corrupt upload, resume after a reload.
  const [download] = await Promise.all([page.waitForEvent("download"), page.click("#save")]);
  check(download.suggestedFilename() === "gpt.safetensors", `download named ${download.suggestedFilename()}`);
  const saved = readFileSync(await download.path());
  const header = saved.subarray(8, 8 + Number(saved.readBigUInt64LE(0))).toString();
  check(["wte.weight", "wpe.weight", "h.0.attn.c_attn.weight", "h.1.mlp.c_proj.weight", "ln_f.weight"].every((k) => header.includes(`"${k}"`)), `gpt.safetensors names: ${header.slice(0, 200)}`);
  await page.setInputFiles("#load", { name: "broken.safetensors", mimeType: "application/octet-stream", buffer: Buffer.from("not safetensors") });
  await waitFor(page, () => window.wgradDemo.errors.length > 0, 60, "the corrupt upload's error");
  await page.setInputFiles("#load", { name: "gpt.safetensors", mimeType: "application/octet-stream", buffer: saved });
  await waitFor(page, () => /loaded gpt\.safetensors/.test(window.wgradDemo.lastStatus), 60, "gpt.safetensors to load back");
  console.log(`ok: gpt.safetensors downloaded (${saved.length} bytes, the Rust model's names), a corrupt upload shows an error, the file loads back`);
  check(r.ckpt === steps, `the GPT's last checkpoint is at step ${r.ckpt}, expected ${steps}`);
  const resumeQuery = { ...query };
  delete resumeQuery.fresh;
  await page.close();
  page = await openPage(resumeQuery);
  const resumed = await page.evaluate(() => ({ step: window.wgradDemo.step, losses: window.wgradDemo.losses.length, val: window.wgradDemo.valLosses.length }));
  check(resumed.step === steps && resumed.losses === steps && resumed.val === r.val.length, `the GPT reload resumed at ${JSON.stringify(resumed)}, expected step ${steps}`);
  await page.fill("#steps", String(steps + 10));
  await page.dispatchEvent("#steps", "change");
  await train(page, { until: steps + 10, stopOnError: true });
  const after = await page.evaluate(() => window.wgradDemo.losses);
  check(after.length === steps + 10 && after.every(Number.isFinite), `after resuming: ${after.length} losses`);
  console.log(`ok: gpt: the reload resumed at step ${resumed.step} and trained on to ${steps + 10} (loss ${after.at(-1).toFixed(3)})`);

  // Text of one's own: bad ones are errors on the page, a short one trains.
  const own = async (text, what) => {
    await page.evaluate((t) => {
      window.wgradDemo.errors.length = 0;
      const el = document.getElementById("text");
      el.value = t;
      el.dispatchEvent(new Event("input"));
      document.getElementById("source").value = "own";
      return window.wgradDemo.reset();
    }, text);
    await waitFor(page, () => window.wgradDemo.errors.length > 0 || window.wgradDemo.ready, 120, `the page to take ${what}`);
    return page.evaluate(() => ({ errors: window.wgradDemo.errors.slice(), shown: document.getElementById("error").textContent, ready: window.wgradDemo.ready }));
  };
  for (const [text, what, want] of [["", "empty text", /text box is empty/], ["a", "one character", /1 character is too short/],
    ["x".repeat(10_000_001), "10,000,001 characters", /more than the 10,000,000/]]) {
    const e = await own(text, what);
    check(!e.ready && e.errors.length === 1 && want.test(e.shown), `${what}: ${JSON.stringify({ ...e, shown: e.shown.slice(0, 200) })}`);
    console.log(`ok: gpt: ${what} shows "${e.shown}"`);
  }
  const poem = "Shall I compare thee to a summer's day?\nThou art more lovely and more temperate:\n".repeat(12);
  const ok = await own(poem, "a short text of one's own");
  check(ok.ready && ok.errors.length === 0, `a short text: ${JSON.stringify(ok)}`);
  await page.fill("#steps", "3");
  await page.dispatchEvent("#steps", "change");
  await train(page, { until: 3, stopOnError: true });
  const mine = await page.evaluate(() => ({ vocab: window.wgradDemo.vocab, losses: window.wgradDemo.losses }));
  check(mine.vocab === [...new Set(poem)].sort().join("") && mine.losses.length === 3 && mine.losses.every(Number.isFinite),
    `own text: vocabulary ${JSON.stringify(mine.vocab)}, losses ${mine.losses}`);
  console.log(`ok: gpt: a text of one's own (${poem.length} characters, vocabulary ${mine.vocab.length}) trains: ${mine.losses.map((v) => v.toFixed(3)).join(", ")}`);
  await page.close();
}

try {
  if (flags.has("beam")) await beam();
  else if (flags.has("runahead")) await runahead();
  else {
    if (!flags.has("gpt")) await endToEnd();
    if (!flags.has("mnist")) await gptTab();
  }
  check(problems.length === 0, problems.join("\n  "));
} finally {
  await context.close();
  await browser.close();
  await srv.close();
}
console.log("demo_test: all passed");

// Browser test of the npm package (Node 20 + playwright-core driving /usr/bin/chromium headless
// with --enable-unsafe-webgpu; it never downloads a browser). The package must be built first
// (bash scripts/build_web.sh).
//
//   node scripts/page_test.mjs [--bench] [--bench-tfjs] [--demo] [--no-package] [--bs=N] [--steps=N]
//                              [--eval-every=N] [--device=webgpu|cpu] [--timeout=SECONDS] [--verbose]
//
// (a) unless --no-package: `npm pack`s the repository into a temp dir, unpacks it, writes a page
//     next to it that imports ./package/js/wgrad.js and trains a tiny MLP (Linear(4,16) → relu →
//     Linear(16,3), Adam, 30 jitted steps) on a synthetic 3-class set, and checks in Node that
//     the loss fell, that the weights survive safeSave/safeLoad/loadStateDict, that live buffers
//     stayed flat over the replays and that no page error, failed request or console error
//     occurred; on WebGPU (`init()`) and on the interpreter (`init({ device: "cpu" })`).
// (b) --bench: opens www/bench.html?bs=..&steps=..&device=.. from the repository and prints its
//     BENCH line (defaults bs 128, steps 5).
// (b') --bench-tfjs: the same for www/bench_tfjs.html?bs=..&steps=.. (the step in TensorFlow.js on
//     its WebGPU backend; needs the tfjs devDependencies from `npm install`).
// (c) --demo: opens www/index.html?steps=..&bs=..&evalEvery=..&device=.. and prints the demo's
//     final line (defaults steps 20, bs 32).
// Exits non-zero with a message on any failure.

import { execFileSync } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { serve } from "./serve.mjs";

const ROOT = fileURLToPath(new URL("..", import.meta.url));
const CHROMIUM = process.env.CHROMIUM ?? "/usr/bin/chromium";
const ARGS = ["--no-sandbox", "--enable-unsafe-webgpu", "--enable-features=Vulkan", "--disable-gpu-sandbox"];

const flags = new Map(
  process.argv.slice(2).map((a) => {
    const m = /^--([^=]+)(?:=(.*))?$/.exec(a);
    if (!m) fail(`unknown argument ${a}`);
    return [m[1], m[2] ?? true];
  }),
);
const known = ["bench", "bench-tfjs", "demo", "no-package", "bs", "steps", "eval-every", "device", "timeout", "verbose"];
for (const k of flags.keys()) if (!known.includes(k)) fail(`unknown flag --${k} (known: ${known.join(", ")})`);
const VERBOSE = flags.has("verbose");
const TIMEOUT_MS = Number(flags.get("timeout") ?? 1800) * 1000;

function fail(msg) {
  console.error(`page_test: FAIL: ${msg}`);
  process.exit(1);
}

// The page of part (a): trains a tiny MLP from JavaScript with the packed package.
const PACKAGE_PAGE = `<!doctype html>
<meta charset="utf-8"><title>wgrad package test</title><link rel="icon" href="data:,">
<script type="module">
import { init, Tensor, nn, optim, jit, withContext, getParameters, tidy, globalCounters,
  getStateDict, loadStateDict, safeSave, safeLoad } from "./package/js/wgrad.js";
try {
  const device = new URLSearchParams(location.search).get("device");
  const info = await init(device ? { device } : {});
  Tensor.manualSeed(1);
  // 96 points in 4-D around three class centres (a fixed pseudo-random sequence).
  let seed = 7;
  const rnd = () => ((seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648) - 0.5;
  const centres = [[1, 0, 0, 1], [0, 1, 1, 0], [-1, -1, 0, 0]];
  const N = 96, xs = new Float32Array(N * 4), ys = new Int32Array(N);
  for (let i = 0; i < N; i++) {
    ys[i] = i % 3;
    for (let j = 0; j < 4; j++) xs[i * 4 + j] = centres[i % 3][j] + rnd();
  }
  const X = new Tensor(xs, [N, 4]), Y = new Tensor(ys, [N]);
  const l1 = new nn.Linear(4, 16), l2 = new nn.Linear(16, 3);
  const model = (x) => l2.forward(l1.forward(x).relu());
  const opt = new optim.Adam(getParameters([l1, l2]), { lr: 0.05 });
  const evalLoss = async () => {
    const l = tidy(() => withContext({ NO_GRAD: 1 }, () => model(X).sparseCategoricalCrossentropy(Y)));
    const v = await l.item();
    l.dispose();
    return v;
  };
  const before = await evalLoss();
  const step = jit((x, y) => withContext({ TRAINING: 1 }, () => {
    opt.zeroGrad();
    const loss = model(x).sparseCategoricalCrossentropy(y);
    loss.backward();
    opt.step();
    return loss.realize();
  }));
  const losses = [], live = [];
  for (let i = 0; i < 30; i++) {
    const l = tidy(() => step(X, Y));
    losses.push(await l.item());
    l.dispose();
    const c = globalCounters();
    live.push([c.liveTensors, c.liveBuffers, c.liveBytes]);
  }
  const after = await evalLoss();
  // Save the trained weights as safetensors and load them into fresh layers.
  const bytes = await safeSave(getStateDict({ l1, l2 }));
  const fresh = { l1: new nn.Linear(4, 16), l2: new nn.Linear(16, 3) };
  loadStateDict(fresh, safeLoad(bytes));
  const r = withContext({ NO_GRAD: 1 }, () =>
    fresh.l2.forward(fresh.l1.forward(X).relu()).sparseCategoricalCrossentropy(Y));
  const reloaded = await r.item();
  window.testResult = { device: info.device, adapter: info.adapter && info.adapter.name, before, after,
    losses, live, launches: step.launches, tensorDevice: X.device, reloaded,
    stateNames: Object.keys(getStateDict({ l1, l2 })).join(","), savedBytes: bytes.length };
} catch (e) {
  console.error(e);
  window.testResult = { error: String((e && e.message) || e) };
}
</script>`;

async function launch() {
  let chromium;
  try {
    ({ chromium } = await import("playwright-core"));
  } catch {
    fail("playwright-core is missing: run `npm install` in the repository root");
  }
  if (!existsSync(CHROMIUM)) fail(`no browser at ${CHROMIUM} (apt-get install chromium, or set CHROMIUM)`);
  return chromium.launch({ executablePath: CHROMIUM, headless: true, args: ARGS });
}

/**
 * Open `url`, wait until `window[key]` is set, and return it with the problems seen: page errors,
 * console errors and failed requests. `echo` prints the page's console lines as they come.
 */
async function runPage(browser, url, key, { timeoutMs, echo }) {
  const page = await browser.newPage();
  const problems = [];
  page.on("pageerror", (e) => problems.push(`page error: ${e.message}`));
  page.on("console", (m) => {
    if (m.type() === "error") problems.push(`console error: ${m.text()}`);
    if (echo || VERBOSE || m.type() === "warning") console.log(`  [page ${m.type()}] ${m.text()}`);
  });
  // Chromium reports net::ERR_ABORTED for a fetch whose body the page streams while it still
  // loads (datasets.mnist through DecompressionStream), though every byte arrives: not a failure.
  page.on("requestfailed", (r) => {
    const why = r.failure()?.errorText;
    if (why !== "net::ERR_ABORTED") problems.push(`request failed: ${r.url()} (${why})`);
  });
  page.on("response", (r) => {
    if (r.status() >= 400) problems.push(`HTTP ${r.status()} for ${r.url()}`);
  });
  page.on("crash", () => problems.push("the page crashed"));
  const t0 = Date.now();
  try {
    await page.goto(url, { waitUntil: "load", timeout: 120_000 });
    await page.waitForFunction((k) => window[k] !== undefined, key, { timeout: timeoutMs, polling: 500 });
  } catch (e) {
    problems.push(`no window.${key} after ${((Date.now() - t0) / 1000).toFixed(0)} s: ${e.message.split("\n")[0]}`);
    await page.close().catch(() => {});
    return { result: null, problems, seconds: (Date.now() - t0) / 1000 };
  }
  const result = await page.evaluate((k) => window[k], key);
  await page.close();
  return { result, problems, seconds: (Date.now() - t0) / 1000 };
}

async function packageTest(browser) {
  for (const f of ["pkg/web/wgrad.js", "pkg/web/wgrad_bg.wasm"]) {
    if (!existsSync(join(ROOT, f))) fail(`${f} is missing: build the package first (bash scripts/build_web.sh)`);
  }
  if (existsSync(join(ROOT, "pkg/web/.gitignore"))) {
    fail("pkg/web/.gitignore (wasm-pack writes one holding `*`) makes `npm pack` leave out pkg/web: " +
      "delete it after the build (scripts/build_web.sh should `rm -f pkg/*/.gitignore`)");
  }
  const dir = mkdtempSync(join(tmpdir(), "wgrad-pack-"));
  try {
    execFileSync("npm", ["pack", "--silent", "--pack-destination", dir], { cwd: ROOT, stdio: ["ignore", "pipe", "inherit"] });
    const tgz = readdirSync(dir).find((f) => f.endsWith(".tgz"));
    if (!tgz) fail("npm pack made no tarball");
    execFileSync("tar", ["-xzf", tgz], { cwd: dir });
    const files = execFileSync("tar", ["-tzf", tgz], { cwd: dir, encoding: "utf8" }).trim().split("\n");
    console.log(`package: ${tgz}, ${files.length} files: ${files.map((f) => f.replace(/^package\//, "")).join(", ")}`);
    for (const f of ["js/wgrad.js", "js/wgrad.d.ts", "pkg/web/wgrad.js", "pkg/web/wgrad.d.ts", "pkg/web/wgrad_bg.wasm"]) {
      if (!files.includes(`package/${f}`)) fail(`npm pack left out ${f} (check "files" in package.json)`);
    }
    writeFileSync(join(dir, "index.html"), PACKAGE_PAGE);
    const srv = await serve({ port: 0, root: dir });
    try {
      for (const device of ["webgpu", "cpu"]) {
        const url = `${srv.url}index.html${device === "cpu" ? "?device=cpu" : ""}`;
        const { result: r, problems, seconds } = await runPage(browser, url, "testResult", { timeoutMs: Math.min(TIMEOUT_MS, 600_000) });
        const what = `package test on ${device === "cpu" ? 'init({ device: "cpu" })' : "init()"}`;
        if (r?.error) problems.push(`the page threw: ${r.error}`);
        if (r && !r.error) {
          if (r.device !== device || r.tensorDevice !== device) {
            problems.push(`init gave device ${r.device} (tensors on ${r.tensorDevice}), expected ${device}`);
          }
          if (!(r.launches > 0)) problems.push(`the jit replays no kernels (launches ${r.launches})`);
          if (!(r.after < r.before * 0.5)) problems.push(`loss did not fall enough: ${r.before} -> ${r.after}`);
          if (r.reloaded !== r.after) problems.push(`weights saved and loaded give loss ${r.reloaded}, not ${r.after}`);
          if (r.stateNames !== "l1.weight,l1.bias,l2.weight,l2.bias") problems.push(`state dict names: ${r.stateNames}`);
          if (!r.losses.every(Number.isFinite)) problems.push(`non-finite training loss: ${r.losses}`);
          // Memory stays flat once the step is captured: same live tensors and buffers.
          const [a, b] = [r.live[4], r.live[r.live.length - 1]];
          if (a[0] !== b[0] || a[1] !== b[1]) problems.push(`live tensors/buffers grew over the replays: ${a} -> ${b}`);
        }
        if (problems.length) fail(`${what}:\n  ${problems.join("\n  ")}`);
        // The first step's loss is taken at the initial weights, so it should equal `before`.
        if (Math.abs(r.losses[0] - r.before) > 1e-4 * Math.max(1, r.before)) {
          console.log(`  WARNING: the first jitted step returned loss ${r.losses[0]}, but the loss at the initial ` +
            `weights is ${r.before} (the loss realized after opt.step() reads updated weights: an engine bug)`);
        }
        console.log(
          `ok: ${what}${r.adapter ? ` (adapter "${r.adapter}")` : ""}: loss ${r.before.toPrecision(4)} -> ${r.after.toPrecision(4)} ` +
            `after ${r.losses.length} jitted steps (${r.launches} kernels per replay; live tensors/buffers ` +
            `${r.live.at(-1)[0]}/${r.live.at(-1)[1]}), ${seconds.toFixed(1)} s`,
        );
      }
    } finally {
      await srv.close();
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

async function repoPage(browser, srv, page, query, key) {
  const url = `${srv.url}www/${page}?${new URLSearchParams(query)}`;
  console.log(`opening ${url}`);
  const { result, problems, seconds } = await runPage(browser, url, key, { timeoutMs: TIMEOUT_MS, echo: true });
  if (result?.error) problems.push(`the page failed: ${result.error}`);
  if (problems.length) fail(`${page}:\n  ${problems.join("\n  ")}`);
  return { result, seconds };
}

async function main() {
  const browser = await launch();
  try {
    console.log(`browser: ${CHROMIUM} ${browser.version()} (${ARGS.join(" ")})`);
    if (!flags.has("no-package")) await packageTest(browser);
    if (flags.has("bench") || flags.has("bench-tfjs") || flags.has("demo")) {
      const srv = await serve({ port: 0, root: ROOT });
      try {
        const device = flags.get("device");
        const dev = device ? { device } : {};
        if (flags.has("bench")) {
          const q = { bs: flags.get("bs") ?? 128, steps: flags.get("steps") ?? 5, ...dev };
          const { result, seconds } = await repoPage(browser, srv, "bench.html", q, "benchResult");
          console.log(`BENCH ${JSON.stringify(result)}`);
          console.log(`bench page took ${seconds.toFixed(0)} s`);
        }
        if (flags.has("bench-tfjs")) {
          for (const f of ["tfjs/dist/tf.fesm.min.js", "tfjs-backend-webgpu/dist/tf-backend-webgpu.fesm.min.js"]) {
            if (!existsSync(join(ROOT, "node_modules/@tensorflow", f))) fail(`node_modules/@tensorflow/${f} is missing: run \`npm install\``);
          }
          const q = { bs: flags.get("bs") ?? 128, steps: flags.get("steps") ?? 5 };
          const { result, seconds } = await repoPage(browser, srv, "bench_tfjs.html", q, "benchResult");
          console.log(`BENCH ${JSON.stringify(result)}`);
          console.log(`tfjs bench page took ${seconds.toFixed(0)} s`);
        }
        if (flags.has("demo")) {
          if (!existsSync(join(ROOT, "data/mnist/train-images-idx3-ubyte.gz"))) fail("data/mnist is missing: run bash scripts/data.sh");
          const q = { steps: flags.get("steps") ?? 20, bs: flags.get("bs") ?? 32, ...dev };
          if (flags.has("eval-every")) q.evalEvery = flags.get("eval-every");
          const { result: r, seconds } = await repoPage(browser, srv, "index.html", q, "demoResult");
          console.log(
            `DEMO ${r.steps} steps, batch ${r.bs}, on ${r.device}: loss ${r.loss.toFixed(4)}, test accuracy ` +
              `${r.acc.toFixed(2)}%, median ${r.msPerStep.toFixed(1)} ms/step (page took ${seconds.toFixed(0)} s)`,
          );
        }
      } finally {
        await srv.close();
      }
    }
  } finally {
    await browser.close();
  }
  console.log("page_test: all passed");
}

main().catch((e) => fail(e?.stack ?? String(e)));

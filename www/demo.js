// The demo page's script (main thread): controls, live charts (uPlot, loaded as a plain script
// from node_modules), save/load and the kernel inspector, and per tab (`?task=`): for MNIST the
// drawing pad with per-class bars and a strip of test images, for the GPT the validation-loss
// line and the samples streaming in. All engine work happens in www/train_worker.js; this thread
// only draws, so the page stays responsive while training. `window.wgradDemo` exposes the state
// and `start()` (queued until the engine is ready), `pause()`, `predict(pixels)` (784 numbers
// 0..255 → 10 probabilities; MNIST), `generate({ prompt, n, temperature, topK })` (GPT), `info()`
// (the worker's step, kernels and live tensors) and `callsInFlight()` for tests.

const $ = (id) => document.getElementById(id);
const q = new URLSearchParams(location.search);
const TASK = q.get("task") === "gpt" ? "gpt" : "mnist";
document.body.dataset.task = TASK;
document.title = TASK === "gpt" ? "wgrad: train a tiny GPT in your browser" : document.title;
/** Where each tab keeps its checkpoint in IndexedDB (www/store.js). */
const CHECKPOINT = TASK === "gpt" ? "checkpoint-gpt" : "checkpoint";
const CLASSES = {
  digits: ["0", "1", "2", "3", "4", "5", "6", "7", "8", "9"],
  fashion: ["T-shirt", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker", "Bag", "Boot"],
};

// ------------------------------------------------------------------------------ config

const FIELDS = ["lr", "bs", "steps", "device", "beam", "metrics",
  ...(TASK === "gpt" ? ["source", "nLayer", "nHead", "nEmbd", "block", "temperature", "topK"] : ["dataset", "model", "optimizer"])];
const numeric = new Set(["lr", "bs", "steps", "beam", "nLayer", "nHead", "nEmbd", "block", "temperature", "topK"]);
// The GPT's defaults (2 layers, 4 heads, width 48, context 32, batch 8): about three steps a
// second even on a software adapter (SwiftShader on 2 cores).
if (TASK === "gpt") for (const [k, v] of [["lr", "0.005"], ["bs", "8"], ["steps", "2000"]]) $(k).value = v;
for (const k of FIELDS) if (q.has(k)) $(k).value = q.get(k);
const qnum = (k, d) => (q.has(k) && Number.isFinite(Number(q.get(k))) ? Number(q.get(k)) : d);
const EXTRA = {
  readEvery: Math.max(1, qnum("readEvery", 10)),
  evalEvery: qnum("evalEvery", 50),
  ckptEvery: qnum("ckptEvery", 50),
  seed: qnum("seed", 42),
  ahead: Math.max(0, qnum("ahead", 1)),
  ...(TASK === "gpt" ? { sampleMs: qnum("sampleMs", 100), sampleLen: qnum("sampleLen", 200) } : {}),
};
$("ckpt-every").textContent = EXTRA.ckptEvery;

function config() {
  const c = { ...EXTRA, task: TASK };
  for (const k of FIELDS) c[k] = numeric.has(k) ? Number($(k).value) : $(k).value;
  if (TASK === "gpt" && c.source === "own") c.text = $("text").value;
  return c;
}
// Pasting text picks it as the source.
$("text").addEventListener("input", () => ($("source").value = $("text").value ? "own" : "shakespeare"));

// ------------------------------------------------------------------------------ state

const demo = {
  ready: false,
  running: false,
  step: 0,
  losses: [],
  accuracies: [],
  valLosses: [],
  samples: [],
  vocab: null,
  device: null,
  adapter: null,
  notice: null,
  kernels: [],
  timer: null,
  msPerStep: null,
  checkpointStep: null,
  errors: [],
  lastStatus: "",
};
window.wgradDemo = demo;

let worker = null;
let calls = new Map();
let nextId = 1;

function call(op, ...args) {
  if (!worker) return Promise.reject(new Error("no worker"));
  const id = nextId++;
  return new Promise((ok, fail) => {
    calls.set(id, { ok, fail });
    worker.postMessage({ type: "call", id, op, args });
  });
}

/** Whether a background call (a drawing's prediction, the strip's refresh) failed for a reason
 * the page reports otherwise: the worker was restarted, or the GPU device was lost (the worker
 * recovers from the last checkpoint by itself and the notice says so; the next call runs on the
 * new device). */
function reportedElsewhere(e) {
  return /restarted|device lost/i.test(String(e?.message ?? e));
}

function showError(msg) {
  demo.errors.push(msg);
  const e = $("error");
  e.textContent = msg;
  e.style.display = msg ? "block" : "none";
}

function setStatus(s) {
  demo.lastStatus = s;
  $("status").textContent = s;
}

function buttons() {
  $("start").disabled = !demo.ready || demo.running;
  $("pause").disabled = !demo.running;
  for (const id of ["save", "load", "refresh-strip", "profile", "generate"]) $(id).disabled = !demo.ready;
}

// ------------------------------------------------------------------------------ charts

const width = (id) => Math.max(260, $(id).clientWidth || 400);
function chart(id, series, opts = {}) {
  const u = new uPlot({
    width: width(id), height: 160, legend: { show: true }, cursor: { drag: { x: true, y: false } },
    scales: { x: { time: false }, ...(opts.scales ?? {}) },
    axes: opts.axes ?? [{}, {}],
    series: [{ label: "step" }, ...series],
  }, [[], ...series.map(() => [])], $(id));
  return u;
}
const charts = {
  loss: chart("c-loss", [
    { label: "loss", stroke: "#2d6cdf", width: 1, points: { show: false } },
    ...(TASK === "gpt" ? [{ label: "validation", stroke: "#d0342c", width: 2, spanGaps: true, points: { show: true, size: 5 } }] : []),
  ]),
  acc: chart("c-acc", [{ label: "accuracy %", stroke: "#2a9d4b", width: 2 }]),
  speed: chart("c-speed", [
    { label: "ms/step", stroke: "#c2410c", scale: "ms", width: 1.5, points: { show: false } },
    { label: "steps/s", stroke: "#7c3aed", scale: "sps", width: 1.5, points: { show: false } },
  ], { scales: { ms: {}, sps: {} }, axes: [{}, { scale: "ms" }, { scale: "sps", side: 1, grid: { show: false } }] }),
  mem: chart("c-mem", [
    { label: "live tensors", stroke: "#0f766e", scale: "n", width: 1.5, points: { show: false } },
    { label: "GPU MiB", stroke: "#b45309", scale: "mib", width: 1.5, points: { show: false } },
  ], { scales: { n: {}, mib: {} }, axes: [{}, { scale: "n" }, { scale: "mib", side: 1, grid: { show: false } }] }),
};
const series = { speed: [[], [], []], mem: [[], [], []] };
// One draw with data while the page loads, so the charts' first real draw (code the browser has
// not compiled yet) does not land in the middle of training.
for (const u of Object.values(charts)) {
  u.setData(u.data.map((_, i) => (i === 0 ? [1, 2] : [1, 2])));
  u.setData(u.data.map(() => []));
}
// At most four redraws a second: each is a few milliseconds of main-thread work, whatever the
// number of messages in between.
let drawQueued = false, lastDraw = 0;
function redraw() {
  if (drawQueued) return;
  drawQueued = true;
  setTimeout(() => requestAnimationFrame(draw), Math.max(0, lastDraw + 250 - performance.now()));
}
function draw() {
  {
    drawQueued = false;
    lastDraw = performance.now();
    const xs = demo.losses.map((_, i) => i + 1);
    if (TASK === "gpt") {
      // The validation points on the training loss's steps (null between them).
      const val = xs.map(() => null);
      for (const v of demo.valLosses) if (v.step >= 1 && v.step <= xs.length) val[v.step - 1] = v.loss;
      charts.loss.setData([xs, demo.losses, val]);
    } else {
      charts.loss.setData([xs, demo.losses]);
    }
    charts.acc.setData([demo.accuracies.map((a) => a.step), demo.accuracies.map((a) => a.acc)]);
    charts.speed.setData(series.speed);
    charts.mem.setData(series.mem);
    $("s-step").textContent = demo.step;
    const last = demo.losses.at(-1);
    $("s-loss").textContent = last === undefined ? "–" : last.toFixed(3);
    const acc = demo.accuracies.at(-1), val = demo.valLosses.at(-1);
    $("s-acc").textContent = TASK === "gpt" ? (val ? val.loss.toFixed(3) : "–") : acc ? `${acc.acc.toFixed(1)}%` : "–";
    $("s-speed").textContent = demo.msPerStep ? `${demo.msPerStep.toFixed(1)} ms/step` : "–";
  }
}
addEventListener("resize", () => {
  for (const [k, u] of Object.entries(charts)) u.setSize({ width: width(`c-${k}`), height: 160 });
});

// ------------------------------------------------------------------------------ worker

function onMessage(ev) {
  const m = ev.data;
  switch (m.type) {
    case "ready": {
      demo.ready = true;
      demo.device = m.device;
      demo.adapter = m.adapter;
      demo.notice = m.notice;
      demo.step = m.step;
      demo.losses = m.losses.slice();
      setEvals(m.evals);
      demo.classes = CLASSES[config().dataset] ?? CLASSES.digits;
      if (TASK === "gpt") {
        demo.vocab = m.vocab;
        $("sample-note").textContent = `(${m.text}: ${m.nTrain.toLocaleString("en")} characters, vocabulary ${m.vocab.length}, ${m.params.toLocaleString("en")} parameters)`;
      }
      const a = m.adapter;
      $("s-device").textContent = m.device === "webgpu" ? `WebGPU${a?.name ? ` · ${a.name}` : ""}` : m.device === "wasm" ? "WebAssembly" : "CPU interpreter";
      const r = m.recovered;
      demo.recovered = r;
      // The engine's reason, without its advice ("…: webgpu: device lost (Destroyed); …").
      const why = r && (/device lost[^;]*/i.exec(r.error)?.[0] ?? "device lost");
      const notice = r
        ? `The GPU device was lost at step ${r.lostAt} (${why}). WebGPU was started again and ` +
          `training resumed from the checkpoint at step ${r.resumedAt}.`
        : m.notice;
      const n = $("notice");
      n.textContent = notice ?? "";
      n.style.display = notice ? "block" : "none";
      if (r) {
        // The worker trains on by itself; only the charts are cut back to the checkpoint.
        for (const k of ["speed", "mem"]) {
          const keep = series[k][0].findIndex((step) => step > r.resumedAt);
          if (keep >= 0) series[k] = series[k].map((col) => col.slice(0, keep));
        }
        demo.ready = true;
        buttons();
        redraw();
        break;
      }
      setStatus(m.step > 0 ? `resumed at step ${m.step}: press Start to continue` : "ready: press Start");
      buttons();
      redraw();
      if (TASK === "mnist") {
        refreshStrip();
        predictPad();
      }
      if (q.get("autostart") === "1" || demo.startQueued) demo.start();
      break;
    }
    case "lost":
      demo.ready = false;
      demo.lost = { step: m.step, error: m.error };
      buttons();
      break;
    case "metrics": {
      demo.step = m.step;
      // When the step was captured (its kernels compiled): tests time the page from here.
      if (m.step >= 3 && demo.capturedAt === undefined) demo.capturedAt = performance.now();
      if (m.newLosses) {
        const { from, values } = m.newLosses;
        for (let i = 0; i < values.length; i++) demo.losses[from + i] = values[i];
      }
      if (m.evals) setEvals(m.evals);
      for (const [step, ms] of m.speed ?? []) {
        demo.msPerStep = ms;
        series.speed[0].push(step);
        series.speed[1].push(ms);
        series.speed[2].push(1000 / ms);
      }
      demo.liveTensors = m.liveTensors;
      series.mem[0].push(m.step);
      series.mem[1].push(m.liveTensors);
      series.mem[2].push(m.liveBytes / 2 ** 20);
      redraw();
      if (!predicting && strokes) predictPad();
      break;
    }
    case "kernels":
      demo.kernels = m.kernels;
      demo.timer = m.timer;
      renderKernels();
      break;
    case "beam":
      demo.beam = { searched: m.searched, seconds: m.seconds, imported: m.imported };
      break;
    case "checkpoint":
      demo.checkpointStep = m.step;
      break;
    case "state":
      demo.running = m.running;
      if (m.timed) demo.timed = m.timed;
      if (m.error) showError(`training stopped: ${m.error}`);
      buttons();
      if (!m.running && demo.ready && TASK === "mnist") refreshStrip();
      break;
    case "sample":
      onSample(m);
      break;
    case "status":
      setStatus(m.text);
      break;
    case "reply": {
      const c = calls.get(m.id);
      calls.delete(m.id);
      if (c) m.error !== undefined ? c.fail(new Error(m.error)) : c.ok(m.result);
      break;
    }
    case "error":
      showError(m.error);
      setStatus("error");
      break;
  }
}

function startWorker({ resume }) {
  if (worker) worker.terminate();
  for (const c of calls.values()) c.fail(new Error("the worker was restarted"));
  calls = new Map();
  Object.assign(demo, { ready: false, startQueued: false, running: false, step: 0, losses: [], accuracies: [], valLosses: [], samples: [], kernels: [], msPerStep: null });
  renderSamples();
  series.speed = [[], [], []];
  series.mem = [[], [], []];
  renderKernels();
  buttons();
  redraw();
  $("error").style.display = "none"; // a new session: the last one's error is history (demo.errors keeps it)
  worker = new Worker(new URL("./train_worker.js", import.meta.url), { type: "module" });
  worker.onmessage = onMessage;
  worker.onerror = (e) => showError(`worker error: ${e.message}`);
  worker.postMessage({ type: "init", config: config(), resume });
}

demo.start = () => {
  if (!worker) throw new Error("wgradDemo.start: the training worker is not running");
  // Before the engine is ready the worker cannot train yet: start as soon as it is.
  if (!demo.ready) {
    demo.startQueued = true;
    return;
  }
  demo.startQueued = false;
  worker.postMessage({ type: "set", lr: Number($("lr").value), steps: Number($("steps").value) });
  worker.postMessage({ type: "start" });
  demo.running = true;
  buttons();
};
demo.pause = () => {
  worker?.postMessage({ type: "pause" });
  return new Promise((ok) => {
    const t = setInterval(() => {
      if (!demo.running) {
        clearInterval(t);
        ok(demo.step);
      }
    }, 50);
  });
};
demo.chartPoints = () => Object.fromEntries(Object.entries(charts).map(([k, u]) => [k, u.data[0].length]));
// The memory chart's points: [steps, live tensors, live MiB] (for tests).
demo.memorySeries = () => series.mem.map((col) => col.slice());
demo.predict = (pixels) => call("predict", Array.from(pixels));
demo.testImages = (n, start) => call("testImages", n, start);
demo.save = () => call("save");
demo.profile = () => call("profile");
demo.loseDevice = () => call("loseDevice");
demo.info = () => call("info");
demo.callsInFlight = () => calls.size;
demo.generate = (opts = {}) => call("generate", opts);
// Resolves once the new worker is starting (not yet ready).
demo.reset = () =>
  import("./store.js").then((s) => s.del(CHECKPOINT)).catch(() => {}).then(() => startWorker({ resume: false }));

if (TASK === "gpt") $("save").textContent = "Save gpt.safetensors";
$("start").onclick = () => demo.start();
$("pause").onclick = () => demo.pause();
$("reset").onclick = () => demo.reset();
$("lr").onchange = () => worker?.postMessage({ type: "set", lr: Number($("lr").value) });
$("steps").onchange = () => worker?.postMessage({ type: "set", steps: Number($("steps").value) });

// ------------------------------------------------------------------------------ save / load

$("save").onclick = async () => {
  try {
    const bytes = await demo.save();
    const url = URL.createObjectURL(new Blob([bytes], { type: "application/octet-stream" }));
    const a = Object.assign(document.createElement("a"), { href: url, download: TASK === "gpt" ? "gpt.safetensors" : "model.safetensors" });
    document.body.append(a);
    a.click();
    a.remove();
    setTimeout(() => URL.revokeObjectURL(url), 10_000);
  } catch (e) {
    showError(`save failed: ${e.message}`);
  }
};
$("load").onchange = async (ev) => {
  const file = ev.target.files?.[0];
  ev.target.value = "";
  if (!file) return;
  try {
    const bytes = new Uint8Array(await file.arrayBuffer());
    const r = await call("load", bytes);
    showError("");
    setStatus(`loaded ${file.name} (${r.tensors} tensors)`);
    if (TASK === "mnist") {
      refreshStrip();
      predictPad();
    }
  } catch (e) {
    showError(`could not load ${file.name}: ${e.message}`);
  }
};

// ------------------------------------------------------------------------------ drawing pad

const pad = $("pad");
const bars = $("bars");
const ctx = pad.getContext("2d", { willReadFrequently: true });
let strokes = false, drawing = false, predicting = false, again = false;
function clearPad() {
  ctx.fillStyle = "#000";
  ctx.fillRect(0, 0, pad.width, pad.height);
  strokes = false;
  renderBars(null);
}
clearPad();
const at = (e) => {
  const r = pad.getBoundingClientRect();
  return [((e.clientX - r.left) * pad.width) / r.width, ((e.clientY - r.top) * pad.height) / r.height];
};
pad.addEventListener("pointerdown", (e) => {
  drawing = true;
  pad.setPointerCapture(e.pointerId);
  const [x, y] = at(e);
  ctx.strokeStyle = "#fff";
  ctx.lineWidth = 20;
  ctx.lineCap = ctx.lineJoin = "round";
  ctx.beginPath();
  ctx.moveTo(x, y);
  ctx.lineTo(x + 0.1, y);
  ctx.stroke();
  strokes = true;
});
pad.addEventListener("pointermove", (e) => {
  if (!drawing) return;
  const [x, y] = at(e);
  ctx.lineTo(x, y);
  ctx.stroke();
  predictPad();
});
pad.addEventListener("pointerup", () => {
  drawing = false;
  predictPad();
});
$("clear").onclick = clearPad;

/** The pad as MNIST does it: the ink's bounding box scaled into 20×20, centred by mass in 28×28. */
function padPixels() {
  const { width: W, height: H } = pad;
  const img = ctx.getImageData(0, 0, W, H).data;
  let x0 = W, y0 = H, x1 = -1, y1 = -1;
  for (let y = 0; y < H; y++) {
    for (let x = 0; x < W; x++) {
      if (img[(y * W + x) * 4] > 20) {
        x0 = Math.min(x0, x); x1 = Math.max(x1, x); y0 = Math.min(y0, y); y1 = Math.max(y1, y);
      }
    }
  }
  const out = new Float32Array(784);
  if (x1 < 0) return out;
  const side = Math.max(x1 - x0, y1 - y0) + 1, s = 20 / side;
  const small = new OffscreenCanvas(28, 28);
  const sc = small.getContext("2d", { willReadFrequently: true });
  sc.fillStyle = "#000";
  sc.fillRect(0, 0, 28, 28);
  sc.imageSmoothingQuality = "high";
  const w = (x1 - x0 + 1) * s, h = (y1 - y0 + 1) * s;
  sc.drawImage(pad, x0, y0, x1 - x0 + 1, y1 - y0 + 1, (28 - w) / 2, (28 - h) / 2, w, h);
  const d = sc.getImageData(0, 0, 28, 28).data;
  let m = 0, mx = 0, my = 0;
  for (let i = 0; i < 784; i++) {
    const v = d[i * 4];
    m += v; mx += v * (i % 28); my += v * Math.floor(i / 28);
  }
  const dx = Math.round(14 - mx / m), dy = Math.round(14 - my / m);
  for (let y = 0; y < 28; y++) {
    for (let x = 0; x < 28; x++) {
      const sx = x - dx, sy = y - dy;
      out[y * 28 + x] = sx >= 0 && sx < 28 && sy >= 0 && sy < 28 ? d[(sy * 28 + sx) * 4] : 0;
    }
  }
  return out;
}

// One prediction in flight at a time; the latest drawing wins.
async function predictPad() {
  if (!demo.ready || !strokes) return;
  if (predicting) {
    again = true;
    return;
  }
  predicting = true;
  try {
    renderBars(await demo.predict(padPixels()));
  } catch (e) {
    if (!reportedElsewhere(e)) showError(`predict failed: ${e.message}`);
  } finally {
    predicting = false;
    if (again) {
      again = false;
      predictPad();
    }
  }
}

function renderBars(p) {
  const names = demo.classes ?? CLASSES.digits;
  const best = p ? p.indexOf(Math.max(...p)) : -1;
  bars.innerHTML = names.map((n, i) => `<div class="bar${i === best ? " top" : ""}"><span>${n}</span><div><i style="width:${p ? (100 * p[i]).toFixed(1) : 0}%"></i></div><span>${p ? (100 * p[i]).toFixed(0) + "%" : ""}</span></div>`).join("");
}
renderBars(null);

// ------------------------------------------------------------------------------ test strip

let stripBusy = false;
async function refreshStrip() {
  if (!demo.ready || stripBusy) return;
  stripBusy = true;
  try {
    const n = 12;
    const { pixels, labels, preds } = await call("strip", n);
    const names = demo.classes ?? CLASSES.digits;
    const strip = $("strip");
    strip.innerHTML = "";
    for (let i = 0; i < n; i++) {
      const cell = document.createElement("div");
      cell.className = "cell" + (preds[i] !== labels[i] ? " wrong" : "");
      const c = document.createElement("canvas");
      c.width = c.height = 28;
      const g = c.getContext("2d");
      const img = g.createImageData(28, 28);
      for (let j = 0; j < 784; j++) {
        const v = pixels[i * 784 + j];
        img.data.set([v, v, v, 255], j * 4);
      }
      g.putImageData(img, 0, 0);
      const label = document.createElement("div");
      label.textContent = preds[i] === labels[i] ? names[preds[i]] : `${names[preds[i]]} ≠ ${names[labels[i]]}`;
      label.title = `predicted ${names[preds[i]]}, true ${names[labels[i]]}`;
      cell.append(c, label);
      strip.append(cell);
    }
  } catch (e) {
    if (!reportedElsewhere(e)) showError(`test images: ${e.message}`);
  } finally {
    stripBusy = false;
  }
}
$("refresh-strip").onclick = refreshStrip;
setInterval(() => demo.running && TASK === "mnist" && refreshStrip(), 5000);

// ------------------------------------------------------------------------------ GPT samples

/** The worker's evaluation points: test accuracies (MNIST) or validation losses (GPT). */
function setEvals(evals) {
  if (TASK === "gpt") demo.valLosses = evals.slice();
  else demo.accuracies = evals.slice();
}

/** A sample's text arrives in pieces as it is generated; the newest few are shown. */
function onSample(m) {
  let s = demo.samples.find((x) => x.id === m.id);
  if (!s) {
    s = { id: m.id, step: m.step, prompt: m.prompt, text: "", done: false };
    demo.samples = demo.samples.filter((x) => x.id !== m.id).concat([s]).slice(-20);
  }
  s.text += m.text;
  s.done = m.done;
  renderSamples();
}

let samplesQueued = false;
function renderSamples() {
  if (samplesQueued) return;
  samplesQueued = true;
  requestAnimationFrame(() => {
    samplesQueued = false;
    const box = $("sample");
    box.innerHTML = "";
    for (const s of demo.samples.slice(-3).reverse()) {
      const head = document.createElement("b");
      head.textContent = `step ${s.step}${s.done ? "" : " …"}\n`;
      box.append(head, document.createTextNode(s.prompt + s.text + "\n\n"));
    }
  });
}

$("generate").onclick = async () => {
  try {
    const n = Number($("gen-n").value);
    await demo.generate({ prompt: $("prompt").value, n, temperature: Number($("temperature").value), topK: Number($("topK").value) });
  } catch (e) {
    showError(e.message);
  }
};

// ------------------------------------------------------------------------------ inspector

const esc = (s) => s.replace(/[&<>]/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;" })[c]);
function renderKernels() {
  const ks = demo.kernels ?? [];
  const note = $("inspector-note");
  if (!ks.length) {
    note.textContent = "The kernels of the captured training step appear here once it is captured.";
    $("kernels").innerHTML = "";
    return;
  }
  const total = ks.reduce((a, k) => a + (k.ms ?? 0), 0);
  note.textContent = demo.timer === "timestamp-query"
    ? `${ks.length} launches in the captured step; GPU time per kernel from timestamp queries (total ${total.toFixed(2)} ms).`
    : `${ks.length} launches in the captured step. This adapter has no timestamp-query: each kernel was run alone and timed ` +
      `on the host clock from its launch until a readback of its output finished (an upper bound including submit and ` +
      `readback latency; total ${total.toFixed(1)} ms).`;
  const max = Math.max(...ks.map((k) => k.ms ?? 0), 1e-9);
  $("kernels").innerHTML = `<tr><th>#</th><th>kernel</th><th class="num">threads × workgroup</th><th class="num">bytes</th><th class="num">time, ms</th><th style="width:18%"></th></tr>` +
    ks.map((k, i) => `<tr><td>${i + 1}</td><td>${k.source ? `<details data-i="${i}"><summary><code>${esc(k.name)}</code></summary><pre></pre></details>` : `<code>${esc(k.name)}</code>`}</td>` +
      `<td class="num">${k.globalSize} × ${k.localSize}</td><td class="num">${(k.bytes / 1024).toFixed(1)} KiB</td>` +
      `<td class="num">${k.ms === undefined ? "–" : k.ms.toFixed(3)}</td><td><div class="timebar" style="width:${(100 * (k.ms ?? 0)) / max}%"></div></td></tr>`).join("");
}
// The WGSL is put in when a row is opened (32 kernels of source would make one long task).
$("kernels").addEventListener("toggle", (e) => {
  const d = e.target, pre = d.querySelector?.("pre");
  if (d.open && pre && !pre.textContent) pre.textContent = demo.kernels[Number(d.dataset.i)]?.source ?? "";
}, true);
$("profile").onclick = async () => {
  try {
    await demo.profile();
  } catch (e) {
    showError(e.message);
  }
};

// ------------------------------------------------------------------------------ go

// A checkpoint's run settings win over the defaults, so a reload resumes the run it saved.
const resume = q.get("fresh") !== "1";
(resume ? import("./store.js").then((s) => s.get(CHECKPOINT)).catch(() => null) : Promise.resolve(null))
  .then((ck) => {
    if (ck?.config) {
      for (const k of FIELDS) if (ck.config[k] !== undefined) $(k).value = ck.config[k];
      if (typeof ck.config.text === "string") $("text").value = ck.config.text;
      for (const k of Object.keys(EXTRA)) if (ck.config[k] !== undefined) EXTRA[k] = ck.config[k];
    }
    startWorker({ resume });
  });

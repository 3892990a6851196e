// The demo's training worker: the whole engine runs here, off the page's main thread (www/demo.js
// talks to it with messages). It trains the page's task (`config.task`: "mnist", a model on
// MNIST digits or Fashion-MNIST, defined here; "gpt", a tiny GPT on Shakespeare or the user's
// text, in www/gpt_task.js) with a jitted step, keeps every step's loss on the device (a ring
// the step itself shifts) and reads it back asynchronously every `readEvery` steps, evaluates
// (test accuracy, or validation loss), saves and loads safetensors, checkpoints model +
// optimizer to IndexedDB, keeps the BEAM cache there, and profiles the captured step's kernels.
// When the GPU device is lost mid-training (a driver reset, or `loseDevice()` in a test), it
// initialises WebGPU again, rebuilds the session from the last checkpoint and trains on.
//
// A task is an object: `checkpointKey`, `runKeys` (the config that a checkpoint must share),
// `setup(config)` → `{ data, model, opt, ready }` (`model.layers` is what the state dict is
// made of), `loss(S)` (the step's loss, backward done, inside the captured step),
// `evaluate(S)` → a tensor read back later and `evalPoint(step, values)`, `afterChunk(S)`
// (work between chunks of steps), `ops` (its calls from the page) and `dispose(S)`.
//
// Messages in:  {type:"init", config, resume} {type:"start"} {type:"pause"} {type:"set", lr, steps}
//               {type:"call", id, op, args}  (op: save, load, profile, loseDevice, info, and the
//               task's: predict, strip, testImages for MNIST; generate for the GPT)
// Messages out: {type:"ready", recovered?} {type:"metrics"} {type:"kernels"} {type:"status"}
//               {type:"state"} {type:"checkpoint"} {type:"lost"} {type:"sample"} (the GPT's text
//               as it is generated) {type:"reply", id, result | error}

import {
  init, Tensor, nn, optim, datasets, jit, tidy, withContext, getParameters, getStateDict,
  loadStateDict, safeSave, safeLoad, globalCounters, beamTune, beamCacheExport, beamCacheImport,
  loseDevice,
} from "../js/wgrad.js";
import * as store from "./store.js";
import { gptTask } from "./gpt_task.js";

const post = (m, transfer) => self.postMessage(m, transfer ?? []);
const status = (text) => post({ type: "status", text });
const nextTask = () => new Promise((r) => setTimeout(r, 0));

let S = null; // the session: engine, data, model, optimizer, step function, history
let running = false;
let loopDone = Promise.resolve();
let recoveries = 0; // device losses recovered from in this worker
const MAX_RECOVERIES = 3;

const MNIST_DATA = { digits: "../data/mnist/", fashion: "../data/fashion-mnist/" };
const EVAL_N = 500; // test images per accuracy point (a fixed slice of the test set)

/** The models: the tinygrad tutorial's CNN, and a small MLP (fast on a software adapter). */
function makeModel(kind) {
  if (kind === "mlp") {
    const l1 = new nn.Linear(784, 128), l2 = new nn.Linear(128, 10);
    const layers = { l1, l2 };
    // Pixels come in 0..255 as [N, 1, 28, 28].
    const forward = (x) => l2.forward(l1.forward(x.flatten(1).div(255)).relu());
    return { layers, forward };
  }
  const l1 = new nn.Conv2d(1, 32, 3), l2 = new nn.Conv2d(32, 64, 3), l3 = new nn.Linear(1600, 10);
  const layers = { l1, l2, l3 };
  const forward = (x) =>
    l3.forward(l2.forward(l1.forward(x.div(255)).relu().maxPool2d(2)).relu().maxPool2d(2).flatten(1).dropout(0.5));
  return { layers, forward };
}

function makeOptim(name, params, lr) {
  switch (name) {
    case "sgd": return new optim.SGD(params, { lr, momentum: 0.9 });
    case "muon": return new optim.Muon(params, { lr });
    case "adamw": return new optim.AdamW(params, { lr, weightDecay: 0.01 });
    default: return new optim.Adam(params, { lr });
  }
}

/** MNIST digits or Fashion-MNIST: a CNN or an MLP, test accuracy, predictions of drawn digits. */
const mnistTask = {
  checkpointKey: "checkpoint",
  runKeys: ["dataset", "model", "optimizer"],
  small: "use the MLP and small batches",
  async setup(config) {
    status(`loading ${config.dataset === "fashion" ? "Fashion-MNIST" : "MNIST digits"}…`);
    const data = await datasets.mnist({ baseUrl: MNIST_DATA[config.dataset] ?? MNIST_DATA.digits });
    Tensor.manualSeed(config.seed);
    const model = makeModel(config.model);
    const params = getParameters(model.layers);
    const opt = makeOptim(config.optimizer, params, config.lr);
    disposeAll(params); // the optimizer holds the parameters itself
    const nEval = Math.min(EVAL_N, data.xTest.shape[0]);
    [data.xEval, data.yEval] = tidy(() => [
      data.xTest.slice(0, 0, nEval).cast("float32").realize(),
      data.yTest.slice(0, 0, nEval).realize(),
    ]);
    return { data, model, opt, ready: { nTrain: data.xTrain.shape[0], nTest: data.xTest.shape[0] } };
  },
  loss(S) {
    const { data, model, opt, config } = S;
    const s = Tensor.randint([config.bs], 0, data.xTrain.shape[0]);
    const x = data.xTrain.index(s).cast("float32"), y = data.yTrain.index(s);
    opt.zeroGrad();
    const loss = model.forward(x).sparseCategoricalCrossentropy(y);
    loss.backward();
    return loss;
  },
  evaluate: (S) => accuracyTensor(S),
  evalPoint: (step, v) => ({ step, acc: (100 * v[0]) / S.data.xEval.shape[0] }),
  ops: {
    async predict(_, pixels) {
      if (!(pixels?.length === 784)) throw new Error("predict: expected 784 pixel values (0..255)");
      const x = new Tensor(Float32Array.from(pixels), [1, 1, 28, 28]);
      const p = tidy(() => withContext({ NO_GRAD: 1 }, () => S.model.forward(x).softmax(1)));
      x.dispose();
      const [v] = await readBack(p);
      return Array.from(v);
    },
    /** `n` test images from `start` (pixels 0..255 and labels). */
    async testImages(_, n, start = 0) {
      const total = S.data.xTest.shape[0];
      n = Math.max(1, Math.min(n | 0, 64));
      start = Math.max(0, Math.min(start | 0, total - n));
      const [xs, ys] = tidy(() => [S.data.xTest.slice(0, start, start + n), S.data.yTest.slice(0, start, start + n)]);
      const [pix, lab] = await readBack(xs, ys);
      return { pixels: Array.from(pix), labels: Array.from(lab), start };
    },
    /** A strip of random test images with the model's predictions. */
    async strip(_, n) {
      const total = S.data.xTest.shape[0];
      const idx = Int32Array.from({ length: n }, () => Math.floor(Math.random() * total));
      const [xs, ys, pred] = tidy(() => withContext({ NO_GRAD: 1 }, () => {
        const i = new Tensor(idx, [n], "int32");
        const x = S.data.xTest.index(i), y = S.data.yTest.index(i);
        return [x, y, S.model.forward(x.cast("float32")).argmax(1)];
      }));
      const [pix, lab, pr] = await readBack(xs, ys, pred);
      return { pixels: pix, labels: Array.from(lab), preds: Array.from(pr) };
    },
  },
  dispose(S) {
    const d = S.data;
    for (const t of [d.xTrain, d.yTrain, d.xTest, d.yTest, d.xEval, d.yEval]) t.dispose();
    // The layers hold the rest.
    for (const l of Object.values(S.model.layers)) l.free();
  },
};

/** Test accuracy on the fixed evaluation slice, as a tensor (read it back later). */
function accuracyTensor(S) {
  return tidy(() => withContext({ NO_GRAD: 1 }, () => {
    let hits = null;
    for (let i = 0; i < S.data.xEval.shape[0]; i += 250) {
      const end = Math.min(i + 250, S.data.xEval.shape[0]);
      const h = S.model.forward(S.data.xEval.slice(0, i, end)).argmax(1).eq(S.data.yEval.slice(0, i, end)).sum();
      hits = hits ? hits.add(h) : h;
    }
    return hits.realize();
  }));
}

const TASKS = { mnist: mnistTask, gpt: gptTask };

/**
 * The model's state dict as handles of its own, disposable after use: the wasm layers' getters
 * make new handles, but a model of plain objects (the GPT) holds its tensors itself, so those
 * get a new handle each (`realize` of a realized tensor).
 */
function modelState() {
  const state = getStateDict(S.model.layers);
  if (S.model.plain) for (const k of Object.keys(state)) state[k] = state[k].realize();
  return state;
}

/**
 * The checkpoint's tensors: the model's state dict plus the optimizer's state as optim.N. The
 * layers' getters and `state()` make new handles: `disposeAll` them when done.
 */
function checkpointState() {
  const state = modelState();
  S.opt.state().forEach((t, i) => (state[`optim.${i}`] = t));
  return state;
}

/** Shapes and dtypes of `state` must match `own` exactly before anything is assigned. */
function checkMatches(own, state, what) {
  const names = Object.keys(own);
  const missing = names.filter((k) => !(k in state));
  const extra = Object.keys(state).filter((k) => !(k in own));
  if (missing.length) throw new Error(`${what}: missing ${missing.join(", ")}`);
  if (extra.length) throw new Error(`${what}: unexpected tensors ${extra.join(", ")}`);
  for (const k of names) {
    const a = own[k], b = state[k];
    if (a.dtype !== b.dtype || a.shape.join() !== b.shape.join()) {
      throw new Error(`${what}: ${k} is [${b.shape}] ${b.dtype}, the model has [${a.shape}] ${a.dtype}`);
    }
  }
}

/** Parse safetensors bytes and check them against `own`; returns the loaded tensors. */
function parseState(bytes, own, what) {
  let state;
  try {
    state = safeLoad(bytes);
  } catch (e) {
    throw new Error(`${what}: not a readable safetensors file (${e.message})`);
  }
  try {
    checkMatches(own, state, what);
  } catch (e) {
    Object.values(state).forEach((t) => t.dispose());
    throw e;
  }
  return state;
}

function assignAll(own, state) {
  tidy(() => Tensor.realizeAll(Object.keys(own).map((k) => own[k].assign(state[k]))));
  disposeAll(state);
  disposeAll(own);
}

const disposeAll = (tensors) => Object.values(tensors).forEach((t) => t.dispose());

/** `f(tensors)`, then the tensors disposed. */
async function using(tensors, f) {
  try {
    return await f(tensors);
  } finally {
    disposeAll(tensors);
  }
}

async function setup(config, resume, recovered = null) {
  const t0 = performance.now();
  const task = TASKS[config.task] ?? TASKS.mnist;
  let beamImported = 0;
  status("starting the engine…");
  const want = config.device === "auto" ? {} : { device: config.device };
  const info = await init(want);
  let notice = null;
  if (info.device === "cpu") {
    notice = `Running on the CPU interpreter (chosen). It is slow: ${task.small}.`;
  } else if (info.device === "wasm") {
    const on = `WebAssembly kernels on ${info.threads > 1 ? `${info.threads} CPU threads` : "the CPU (one thread: the page is not cross-origin isolated)"}`;
    notice = config.device === "wasm"
      ? `Running on ${on} (chosen).`
      : `WebGPU is not available in this browser: running on ${on}.`;
  }
  if (config.beam > 0) {
    const cached = await store.get("beam").catch(() => null);
    if (typeof cached === "string") {
      const n = beamCacheImport(cached);
      status(`BEAM cache: ${n} tuned kernels from IndexedDB`);
      beamImported = n;
    }
  }
  const { data, model, opt, ready } = await task.setup(config);
  const R = config.readEvery;
  // The loss ring: each step shifts it left by one and writes its loss last, on the device.
  const ring = tidy(() => new Tensor(new Float32Array(R), [R]).realize());
  S = {
    config, task, info, notice, data, model, opt, ring, step: 0, losses: [], evals: [], kernels: null,
    profiled: false, beamDone: false, lastCheckpoint: 0, beamImported, reading: new Set(),
  };
  S.trainStep = makeStep();
  S.fresh = true;
  if (resume) {
    const ck = await store.get(task.checkpointKey).catch(() => null);
    if (ck && sameRun(task, ck.config, config)) {
      try {
        const own = checkpointState();
        let loaded;
        try {
          loaded = parseState(ck.bytes, own, "checkpoint");
        } catch (e) {
          disposeAll(own);
          throw e;
        }
        assignAll(own, loaded);
        S.step = ck.step;
        S.losses = ck.losses ?? [];
        S.evals = ck.evals ?? ck.accuracies ?? [];
        S.lastCheckpoint = ck.step;
        sentLosses = Math.min(sentLosses, S.losses.length);
        status(`resumed from the checkpoint at step ${ck.step}`);
      } catch (e) {
        status(`the checkpoint could not be used (${e.message}); starting fresh`);
      }
    }
  }
  if (recovered) {
    S.recovered = { ...recovered, resumedAt: S.step, recoveries };
    status(`the GPU device was lost at step ${recovered.lostAt}; WebGPU started again and training resumed from the checkpoint at step ${S.step}`);
  }
  post({
    type: "ready", device: info.device, adapter: info.adapter, notice, step: S.step,
    losses: S.losses, evals: S.evals, ...ready,
    seconds: (performance.now() - t0) / 1000, recovered: S.recovered ?? null,
  });
  sendMetrics({});
}

/** A checkpoint applies to the same run: the task's model, data, optimizer and batch. */
const sameRun = (task, a, b) => a && ["bs", "readEvery", ...task.runKeys].every((k) => a[k] === b[k]);

function makeStep() {
  const { config, opt, ring, task } = S;
  const R = config.readEvery;
  const ctx = config.beam > 0 ? { TRAINING: 1, BEAM: config.beam } : { TRAINING: 1 };
  // Call 1 runs this function, call 2 captures its kernels, later calls replay them.
  return jit(() => withContext(ctx, () => {
    const loss = task.loss(S);
    const update = opt.scheduleStep();
    // Materialized first: the ring is read shifted, so it must not be written while read.
    const shifted = Tensor.cat([ring.slice(0, 1, R), loss.reshape([1])]).contiguous();
    Tensor.realizeAll([loss, ...update, ring.assign(shifted)]);
    return loss;
  }));
}

/** Queue one replayed step (nothing is read back). */
function queueStep() {
  const l = tidy(() => S.trainStep());
  l.dispose();
  S.step++;
}

/**
 * The step that runs the jitted function (the first after `makeStep` or `reset`), awaited: its
 * WebGPU pipelines compile all at once on the browser's threads (`callAsync`), so training
 * starts sooner; it resolves to the loss.
 */
async function firstStep() {
  S.fresh = false;
  return S.trainStep.callAsync();
}

let lastMetricsAt = 0;
function sendMetrics(extra) {
  const c = globalCounters();
  post({
    type: "metrics", step: S.step, ...extra, liveTensors: c.liveTensors, liveBytes: c.liveBytes,
    liveBuffers: c.liveBuffers,
  });
  lastMetricsAt = performance.now();
}

async function checkpoint() {
  const bytes = await using(checkpointState(), safeSave);
  const c = S.config;
  await store.put(S.task.checkpointKey, {
    config: c, step: S.step, losses: S.losses, evals: S.evals, bytes, savedAt: Date.now(),
  });
  S.lastCheckpoint = S.step;
  post({ type: "checkpoint", step: S.step });
}

/** BEAM: search the kernels the first (eager) run queued, cache them, capture again. */
async function beamSearch() {
  status(`BEAM=${S.config.beam}: searching kernels on this device…`);
  const t0 = performance.now();
  const n = await beamTune();
  const json = beamCacheExport();
  await store.put("beam", json).catch(() => {});
  S.trainStep.reset();
  S.fresh = true;
  S.beamDone = true;
  post({ type: "beam", searched: n, seconds: (performance.now() - t0) / 1000, imported: S.beamImported ?? 0 });
  status(`BEAM=${S.config.beam}: ${n} kernels searched in ${((performance.now() - t0) / 1000).toFixed(1)} s ` +
    `(${n === 0 ? "all from the cache" : "cached in IndexedDB"})`);
}

/** Profile one replay of the captured step (it trains, so it counts as a step). */
async function profile() {
  if (!(S.trainStep.launches > 0)) throw new Error("profile: the step is not captured yet (train 3 steps first)");
  const kernels = S.trainStep.kernels();
  const p = await S.trainStep.profile();
  S.step++;
  const v = await S.ring.data();
  S.losses.push(v[v.length - 1]);
  S.kernels = kernels.map((k, i) => ({ ...k, ms: p.ms[i] }));
  post({ type: "kernels", step: S.step, timer: p.timer, kernels: S.kernels });
  return { timer: p.timer, kernels: S.kernels };
}

async function train() {
  const pending = [];
  try {
    await trainLoop(pending);
  } finally {
    // After a failure the other readbacks fail too: they are not waited for.
    pending.forEach((p) => p.catch(() => {}));
  }
}

async function trainLoop(pending) {
  const { config } = S;
  const R = config.readEvery;
  speedBase = null;
  status("training");
  post({ type: "state", running: true });
  while (running && S.step < config.steps) {
    if (config.beam > 0 && !S.beamDone && S.step > 0 && S.trainStep.launches === 0) await beamSearch();
    const first = S.step;
    if (config.metrics === "sync") {
      // The old way, for comparison: read every step's loss before queueing the next.
      const l = S.fresh ? await firstStep() : tidy(() => S.trainStep());
      const v = await l.item().finally(() => l.dispose());
      S.step++;
      S.losses.push(v);
      done(S.step);
    } else {
      const n = Math.min(R, config.steps - S.step, S.step < 2 ? 1 : R);
      for (let k = 0; k < n; k++) {
        if (!S.fresh) queueStep();
        else {
          (await firstStep()).dispose();
          S.step++;
        }
      }
      // A copy of the ring, taken now in queue order; read back while later steps run.
      const snap = tidy(() => S.ring.contiguous().realize());
      pending.push(snap.data().then((v) => {
        for (let k = 0; k < n; k++) S.losses[first + k] = v[R - n + k];
        done(first + n);
      }).finally(reading(snap)));
      // Keep `ahead` chunks queued beyond the one being read (default 1).
      if (pending.length > (config.ahead ?? 1)) await pending.shift();
      else await nextTask();
    }
    if (config.evalEvery > 0 && Math.floor(S.step / config.evalEvery) > Math.floor(first / config.evalEvery)) {
      const t = S.task.evaluate(S);
      const at = S.step;
      pending.push(t.data().then((v) => S.evals.push(S.task.evalPoint(at, v))).finally(reading(t)));
    }
    if (!S.profiled && S.trainStep.launches > 0 && config.metrics !== "sync" && S.step < config.steps) {
      await Promise.all(pending.splice(0));
      S.profiled = true;
      const p = await profile().catch((e) => status(`kernel profile failed: ${e.message}`));
      S.onProfiled?.(p);
      S.onProfiled = null;
      speedBase = null;
    }
    if (config.ckptEvery > 0 && S.step - S.lastCheckpoint >= config.ckptEvery) {
      // Drained first, so the saved weights and losses are those of one step.
      await Promise.all(pending.splice(0));
      await checkpoint().catch((e) => status(`checkpoint failed: ${e.message}`));
      speedBase = null;
    }
    if (S.task.afterChunk && running) await S.task.afterChunk(S);
    sendMetrics({ speed: speedSince(), newLosses: lossesSince(), evals: S.evals });
  }
  await Promise.all(pending);
  const end = performance.now();
  if (S.task.idle) await S.task.idle(S).catch((e) => status(`${e.message}`));
  // Paused or done: checkpoint where it stopped, so a reload resumes exactly here.
  if (config.ckptEvery > 0 && S.step > S.lastCheckpoint) {
    await checkpoint().catch((e) => status(`checkpoint failed: ${e.message}`));
  }
  sendMetrics({ newLosses: lossesSince(), evals: S.evals });
  running = false;
  // ms/step over this run's steps after the 10th (capture, profile and first compiles excluded).
  const timed = S.warm ? { msPerStep: (end - S.warm.t) / (S.step - S.warm.step), steps: S.step - S.warm.step } : null;
  S.warm = null;
  post({ type: "state", running: false, done: S.step >= config.steps, timed });
  status(S.step >= config.steps ? `done: ${S.step} steps` : `paused at step ${S.step}`);
}

// Throughput, from when steps' losses arrive (that is when the device finished them): a point
// per `readEvery` steps. Pauses for checkpoints and profiling reset the baseline.
let speedBase = null, speedPoints = [];
function done(step) {
  const t = performance.now();
  // The timed run starts when a step after the 10th is known finished (its loss arrived), in
  // both modes alike: from when steps are queued, stall-free mode would count the device time
  // of the steps still queued without counting the steps.
  if (!S.warm && step >= 10 && (S.profiled || S.config.metrics === "sync")) S.warm = { t, step };
  if (!speedBase) speedBase = { t, step };
  else if (step - speedBase.step >= S.config.readEvery) {
    speedPoints.push([step, (t - speedBase.t) / (step - speedBase.step)]);
    speedBase = { t, step };
  }
}
function speedSince() {
  const out = speedPoints;
  speedPoints = [];
  return out;
}

// The losses the page has not seen yet (it keeps its own copy for the chart).
let sentLosses = 0;
function lossesSince() {
  let end = sentLosses;
  while (end < S.losses.length && S.losses[end] !== undefined) end++;
  const out = { from: sentLosses, values: S.losses.slice(sentLosses, end) };
  sentLosses = end;
  return out;
}

const ops = {
  save: () => using(modelState(), safeSave),
  async load(bytes) {
    const own = modelState();
    const n = Object.keys(own).length;
    let state;
    try {
      state = parseState(bytes, own, "load");
    } catch (e) {
      disposeAll(own);
      throw e;
    }
    assignAll(own, state);
    return { tensors: n };
  },
  // While training, the loop profiles at its next chunk boundary (it owns the ring and the step).
  profile: () => (running ? new Promise((ok) => { S.profiled = false; S.onProfiled = ok; }) : profile()),
  /** Destroy the GPU device, as a driver reset would (tests the recovery). */
  loseDevice() {
    if (S.info.device !== "webgpu") throw new Error("loseDevice: the demo is not running on WebGPU");
    loseDevice();
    return { step: S.step };
  },
  info: () => ({
    step: S.step, kernels: S.kernels, launches: S.trainStep.launches, liveTensors: globalCounters().liveTensors,
  }),
};

let pauseWanted = false;
function startTraining() {
  running = true;
  loopDone = train().catch(async (e) => {
    running = false;
    const msg = String(e?.message ?? e);
    if (/device lost/i.test(msg) && S?.info.device === "webgpu" && recoveries < MAX_RECOVERIES) {
      try {
        await recover(msg);
        if (!pauseWanted) startTraining();
        await loopDone;
        return;
      } catch (e2) {
        post({ type: "state", running: false, error: `${msg}; recovering failed: ${e2?.message ?? e2}` });
        status(`training stopped: the device was lost and recovering failed (${e2?.message ?? e2})`);
        return;
      }
    }
    post({ type: "state", running: false, error: msg });
    status(`training stopped: ${msg}`);
  });
}

/**
 * The GPU device was lost: WebGPU again (a new device), the data, model, optimizer and step
 * function made again, and the last checkpoint (IndexedDB) restored. The old session's tensors
 * are disposed (their buffers went with the device).
 */
async function recover(msg) {
  recoveries++;
  const lostAt = S.step, config = S.config, checkpointed = S.lastCheckpoint;
  status(`the GPU device was lost at step ${lostAt}: initialising WebGPU again…`);
  post({ type: "lost", step: lostAt, error: msg });
  disposeSession();
  await setup(config, true, { lostAt, error: msg });
  if (S.step !== checkpointed) status(`recovered, but the checkpoint was at step ${S.step}, not ${checkpointed}`);
}

/**
 * `t`, being read back, kept with the session: the returned function disposes it once read (or
 * once its read failed). The session disposes what is still being read when it is made again.
 */
function reading(t) {
  const set = S.reading;
  set.add(t);
  return () => {
    set.delete(t);
    t.dispose();
  };
}

/**
 * The values of `tensors`, which are disposed once read (the page's calls read this way: a call
 * in flight when the device is lost must not keep its tensors live).
 */
async function readBack(...tensors) {
  const release = tensors.map(reading);
  try {
    return await Promise.all(tensors.map((t) => t.data()));
  } finally {
    release.forEach((f) => f());
  }
}

/** Dispose every tensor of the session (before it is made again). */
function disposeSession() {
  const old = S;
  S = null;
  for (const t of old.reading) t.dispose();
  old.ring.dispose();
  old.task.dispose(old);
  old.opt.free();
  old.trainStep.dispose();
}

self.onmessage = async (ev) => {
  const m = ev.data;
  try {
    if (m.type === "init") {
      await setup(m.config, m.resume);
    } else if (m.type === "start") {
      if (!running && S) {
        pauseWanted = false;
        startTraining();
      }
    } else if (m.type === "pause") {
      pauseWanted = true;
      running = false;
      await loopDone;
    } else if (m.type === "set") {
      if (m.lr !== undefined && S) {
        S.opt.lr = m.lr;
        S.config.lr = m.lr;
      }
      if (m.steps !== undefined && S) S.config.steps = m.steps;
    } else if (m.type === "call") {
      if (!S) throw new Error(`${m.op}: the engine is not ready yet`);
      // The task's calls get the session first.
      const own = Object.hasOwn(S.task.ops, m.op) ? S.task.ops[m.op] : null;
      const f = Object.hasOwn(ops, m.op) ? ops[m.op] : own && ((...a) => own({ S, running }, ...a));
      if (!f) throw new Error(`unknown op ${m.op}`);
      // Wait for the queued chunk rather than interleave with a capture.
      const result = await f(...(m.args ?? []));
      post({ type: "reply", id: m.id, result });
    }
  } catch (e) {
    const error = String(e?.message ?? e);
    if (m.type === "call") post({ type: "reply", id: m.id, error });
    else post({ type: "error", error });
  }
};

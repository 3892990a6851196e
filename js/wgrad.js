// wgrad for JavaScript: the WebAssembly engine (pkg/web, built by wasm-pack from src/web/)
// plus the pieces that are plain JavaScript: `init` (loads the module, then picks the device),
// the `nn` / `optim` / `datasets` namespaces, `jit`, `tidy`, `getParameters` and the state-dict
// helpers, and the receiver checks of the engine's classes. The GPT (`GPT`, `Generator`,
// `CharTokenizer`) is in js/gpt.js, written with this API.

import wasmInit, * as raw from "../pkg/web/wgrad.js";

export {
  Tensor,
  TinyJitJs,
  withContext,
  beamTune,
  beamCacheExport,
  beamCacheImport,
  setDebug,
  globalCounters,
  resetGlobalCounters,
  defaultDevice,
  loseDevice,
  safeSave,
  safeLoad,
  safeLoadMetadata,
  torchLoad,
} from "../pkg/web/wgrad.js";
export { GPT, Generator, CharTokenizer } from "./gpt.js";

// ------------------------------------------------------------------------------ receivers

const describe = (v) =>
  v === null || v === undefined ? String(v) : typeof v !== "object" ? `a ${typeof v}` : `a ${v.constructor?.name ?? "object"}`;

/**
 * Make every method, getter and setter of the engine's class `cls` check its receiver before
 * wasm sees it. wasm-bindgen hands `this.__wbg_ptr` to the engine as it is: with a receiver of
 * another class (`nn.LayerNorm.prototype.free.call(embedding)`) the engine would take one type's
 * memory for another's, and a freed handle (after `free()` or `[Symbol.dispose]()`) reaches it
 * as a null pointer. Both now throw an Error naming the method; freeing twice does nothing.
 */
function guardReceivers(cls) {
  const kind = cls.name;
  const proto = cls.prototype;
  const live = (self, op) => {
    if (!(self instanceof cls)) throw new Error(`${op}: called on ${describe(self)}, not a ${kind}`);
    return typeof self.__wbg_ptr === "number" && self.__wbg_ptr !== 0;
  };
  // What a freed handle answers instead of an error.
  const whenFreed = { free: () => undefined, dispose: () => undefined, isDisposed: () => true, toString: () => `${kind}(disposed)` };
  whenFreed[Symbol.dispose] = whenFreed.free;
  for (const key of Reflect.ownKeys(proto)) {
    if (key === "constructor" || (typeof key === "string" && key.startsWith("__"))) continue;
    const d = Object.getOwnPropertyDescriptor(proto, key);
    const name = typeof key === "symbol" ? `[${key.description}]` : key;
    // Tensor methods are named as the engine names its ops ("relu: ..."), others with the class.
    const op = kind === "Tensor" ? name : `${kind}.${name}`;
    const freed = () => {
      if (Object.hasOwn(whenFreed, key)) return whenFreed[key]();
      throw new Error(`${op}: this ${kind} was disposed`);
    };
    if (typeof d.value === "function") {
      const f = d.value;
      d.value = { [f.name]: function (...args) { return live(this, op) ? f.apply(this, args) : freed(); } }[f.name];
    }
    if (d.get) {
      const g = d.get;
      d.get = function () { return live(this, op) ? g.call(this) : freed(); };
    }
    if (d.set) {
      const set = d.set;
      d.set = function (v) { return live(this, op) ? set.call(this, v) : freed(); };
    }
    Object.defineProperty(proto, key, d);
  }
}

// The engine's classes are those with a wasm-bindgen `free` (Tensor, the layers, Optim, TinyJitJs).
for (const cls of Object.values(raw)) {
  if (typeof cls === "function" && typeof cls.prototype?.free === "function") guardReceivers(cls);
}

// ------------------------------------------------------------------------------ Tensor in JS

/** `x.sequential([f, g])` is `g(f(x))`: apply functions (layers' `forward`s) in order. */
raw.Tensor.prototype.sequential = function sequential(fns) {
  if (!Array.isArray(fns)) throw new Error(`sequential: expected an array of functions, got ${describe(fns)}`);
  return fns.reduce((x, f, i) => {
    if (typeof f !== "function") throw new Error(`sequential: element ${i} is ${describe(f)}, not a function`);
    return f(x);
  }, this);
};

/**
 * The bytes at `url` as a 1-D "uint8" tensor, gunzipped first with `{ gunzip: true }`
 * (tinygrad's `from_url`).
 */
raw.Tensor.fromUrl = async function fromUrl(url, options = {}) {
  const op = "fromUrl";
  if (typeof url !== "string" && !(url instanceof URL)) throw new Error(`${op}: url must be a string, got ${describe(url)}`);
  if (options === null || typeof options !== "object") throw new Error(`${op}: options must be an object, got ${describe(options)}`);
  const res = await fetch(url);
  if (!res.ok) throw new Error(`${op}: ${url}: HTTP ${res.status}`);
  const buf = options.gunzip
    ? await new Response(res.body.pipeThrough(new DecompressionStream("gzip"))).arrayBuffer()
    : await res.arrayBuffer();
  return new raw.Tensor(new Uint8Array(buf), [buf.byteLength], "uint8");
};

let ready = null;

/** Whether this is Node.js (which `fetch`es no `file:` URLs: the .wasm is read from disk). */
const isNode = () => typeof process !== "undefined" && !!(process.versions && process.versions.node);

async function loadEngine(wasm) {
  let source = wasm;
  if (source === undefined && isNode()) {
    // A computed specifier: bundlers for the browser leave it alone.
    const fsName = "node:fs/promises";
    const { readFile } = await import(/* @vite-ignore */ /* webpackIgnore: true */ fsName);
    source = await readFile(new URL("../pkg/web/wgrad_bg.wasm", import.meta.url));
  }
  return wasmInit(source === undefined ? undefined : { module_or_path: source });
}

/**
 * Load the engine and pick its device: WebGPU when the browser has it (with the adapter's
 * limits), else kernels compiled to WebAssembly ("wasm") with a console note. `device:
 * "webgpu"` makes a missing WebGPU an error; `device: "wasm"` skips WebGPU; `device: "cpu"` runs
 * the interpreter (the reference, slow). `wasm` overrides where the .wasm file is
 * fetched from (a URL, a `Response`, the bytes or a `WebAssembly.Module`); in Node.js it is read
 * from the package's files. Where WebGPU is missing (Node.js, a browser with it off) the
 * default falls back to WebAssembly kernels. Resolves to `{ device, adapter }`.
 */
export async function init(options = {}) {
  if (options === null || typeof options !== "object") {
    throw new Error(`init: options must be an object, got ${describe(options)}`);
  }
  const { wasm, planCache = true, threads, ...engine } = options;
  if (typeof planCache !== "boolean") {
    throw new Error(`init: planCache must be a boolean, got ${describe(planCache)}`);
  }
  if (threads !== undefined && !(Number.isInteger(threads) && threads >= 1 && threads <= 64)) {
    throw new Error(`init: threads must be an integer from 1 to 64, got ${describe(threads)}`);
  }
  if (!ready) {
    ready = loadEngine(wasm);
  }
  try {
    await ready;
  } catch (e) {
    ready = null;
    throw new Error(`init: cannot load the engine's WebAssembly (${e && e.message ? e.message : e})`);
  }
  const info = await raw.initEngine(engine);
  info.threads = info.device === "wasm" ? await startThreads(threads) : 1;
  info.plansFromCache = planCache ? await loadPlanCache() : 0;
  // wgpu reports only the adapter's description, which browsers often leave empty: name it from
  // GPUAdapterInfo's vendor and architecture instead.
  if (info.adapter && !info.adapter.name && typeof navigator !== "undefined" && navigator.gpu) {
    try {
      const a = await navigator.gpu.requestAdapter();
      const i = a && a.info;
      if (i) info.adapter.name = [i.vendor, i.architecture, i.device].filter(Boolean).join(" ");
    } catch {
      // Only a label: keep the empty name.
    }
  }
  return info;
}

// ------------------------------------------------------------------------------ threads

// WebAssembly kernels on several threads: where shared memory exists (a cross-origin isolated
// page, a worker of one, Node.js, Deno) tensors live in a shared WebAssembly.Memory of their own,
// every kernel module is instantiated on each of `threads - 1` workers too, and a launch's
// range of invocations is split into chunks that the threads claim in turn (Atomics on a small
// shared control block). Workers wait with Atomics.waitAsync, so they still take the modules
// posted to them between launches; a worker that has not got a launch's module yet claims no
// chunk and the others run them all.

// The control block's words.
const GEN = 0, ID = 1, TOTAL = 2, CHUNKS = 3, NEXT = 4, DONE = 5, ERR = 6, NARGS = 7, ARGS = 8, MAX_ARGS = 1024;

const WORKER_SRC = `
const port = typeof require === "function" ? require("node:worker_threads").parentPort : self;
const on = (f) => (port.on ? port.on("message", f) : port.addEventListener("message", (e) => f(e.data)));
const [GEN, ID, TOTAL, CHUNKS, NEXT, DONE, ERR, NARGS, ARGS] = [0, 1, 2, 3, 4, 5, 6, 7, 8];
let ctl = null, env = null;
const kernels = [];
function work() {
  const f = kernels[ctl[ID]];
  if (f) {
    const total = ctl[TOTAL], chunks = ctl[CHUNKS], args = Array.from(ctl.subarray(ARGS, ARGS + ctl[NARGS]));
    try {
      for (let c; (c = Atomics.add(ctl, NEXT, 1)) < chunks;) {
        f(...args, Math.floor((c * total) / chunks), Math.floor(((c + 1) * total) / chunks));
      }
    } catch (e) {
      Atomics.store(ctl, ERR, 1);
    }
  }
  Atomics.add(ctl, DONE, 1);
  Atomics.notify(ctl, DONE);
}
async function loop() {
  for (let gen = 0; ;) {
    const w = Atomics.waitAsync(ctl, GEN, gen);
    if (w.async) await w.value;
    gen = Atomics.load(ctl, GEN);
    work();
  }
}
on((m) => {
  if (m.type === "init") {
    ctl = new Int32Array(m.ctl);
    env = { env: { memory: m.memory, log2: Math.log2, sin: Math.sin, fmod: (a, b) => a % b } };
    port.postMessage("ready");
    loop();
  } else {
    kernels[m.id] = new WebAssembly.Instance(m.module, env).exports.kernel;
  }
});
`;

/** Whether this thread may block in Atomics.wait (not a page's main thread). */
const canBlock = () => typeof window === "undefined" || typeof document === "undefined";

class WasmPool {
  constructor(memory, workers) {
    this.memory = memory;
    this.workers = workers;
    this.ctl = new Int32Array(new SharedArrayBuffer(4 * (ARGS + MAX_ARGS)));
    this.kernels = [];
    this.imports = { env: { memory, log2: Math.log2, sin: Math.sin, fmod: (a, b) => a % b } };
  }

  /** Instantiate `module` here and on every worker; its number for `run`. */
  addModule(module) {
    const id = this.kernels.length;
    this.kernels.push(new WebAssembly.Instance(module, this.imports).exports.kernel);
    for (const w of this.workers) w.postMessage({ type: "module", id, module });
    return id;
  }

  /** Run kernel `id` over invocations [0, total) in `chunks` chunks on every thread; throws on a trap. */
  run(id, args, total, chunks) {
    const f = this.kernels[id];
    if (chunks <= 1 || this.workers.length === 0) {
      f(...args, 0, total);
      return;
    }
    if (args.length > MAX_ARGS) throw new Error(`a kernel with ${args.length} buffers`);
    const ctl = this.ctl;
    ctl[ID] = id;
    ctl[TOTAL] = total;
    ctl[CHUNKS] = chunks;
    ctl[NARGS] = args.length;
    ctl.set(args, ARGS);
    Atomics.store(ctl, NEXT, 0);
    Atomics.store(ctl, DONE, 0);
    Atomics.store(ctl, ERR, 0);
    Atomics.add(ctl, GEN, 1);
    Atomics.notify(ctl, GEN);
    let trapped = null;
    try {
      for (let c; (c = Atomics.add(ctl, NEXT, 1)) < chunks;) {
        f(...args, Math.floor((c * total) / chunks), Math.floor(((c + 1) * total) / chunks));
      }
    } catch (e) {
      trapped = e;
    }
    // Every worker checks in before the control block is written again.
    const n = this.workers.length, block = canBlock();
    for (let d; (d = Atomics.load(ctl, DONE)) < n;) if (block) Atomics.wait(ctl, DONE, d, 1);
    if (trapped) throw trapped;
    if (ctl[ERR]) throw new Error("a WebAssembly kernel trapped on a worker thread");
  }
}

let threadCount = 1;

/** Start the worker pool (once) where shared memory and Atomics.waitAsync exist; the threads in use. */
async function startThreads(want) {
  if (threadCount > 1 || want === 1) return threadCount;
  const node = isNode();
  const shared = typeof SharedArrayBuffer !== "undefined" && typeof Atomics.waitAsync === "function" &&
    (node || globalThis.crossOriginIsolated === true);
  if (!shared) return 1;
  let cores = 1;
  if (typeof navigator !== "undefined" && navigator.hardwareConcurrency) cores = navigator.hardwareConcurrency;
  else if (node) cores = (await import(/* @vite-ignore */ /* webpackIgnore: true */ "node:os")).availableParallelism();
  const count = want ?? Math.min(cores, 8);
  if (count <= 1) return 1;
  const workers = [];
  const ready = [];
  let url = null;
  try {
    // A shared memory reserves its whole 4 GiB maximum of address space up front: where the
    // engine cannot (a 32-bit or memory-starved device) kernels stay on one thread.
    const memory = new WebAssembly.Memory({ initial: 1, maximum: 65536, shared: true });
    for (let i = 1; i < count; i++) {
      let w;
      // Node.js's (and Deno's, whose web Workers would keep the process alive) worker_threads.
      if (node) {
        const { Worker: NodeWorker } = await import(/* @vite-ignore */ /* webpackIgnore: true */ "node:worker_threads");
        w = new NodeWorker(WORKER_SRC, { eval: true });
        w.unref();
      } else {
        url ??= URL.createObjectURL(new Blob([WORKER_SRC], { type: "text/javascript" }));
        w = new Worker(url, { type: "module" });
      }
      workers.push(w);
      ready.push(new Promise((ok, fail) => {
        const onMsg = (m) => ((m && m.data !== undefined ? m.data : m) === "ready" ? ok() : null);
        if (w.on) w.once("message", onMsg), w.once("error", fail);
        else w.addEventListener("message", onMsg, { once: true }), w.addEventListener("error", fail, { once: true });
      }));
    }
    const pool = new WasmPool(memory, workers);
    for (const w of workers) w.postMessage({ type: "init", ctl: pool.ctl.buffer, memory });
    // A worker that never starts (a policy that blocks blob: workers, say) must not hang init.
    let timer;
    const late = new Promise((_, fail) => (timer = setTimeout(() => fail(new Error("the workers did not start in 10 s")), 10_000)));
    try {
      await Promise.race([Promise.all(ready), late]);
    } finally {
      clearTimeout(timer);
    }
    if (!raw.useWasmThreads(memory, pool, count)) throw new Error("WASM tensors exist already");
    threadCount = count;
  } catch (e) {
    workers.forEach((w) => w.terminate());
    console.warn(`wgrad: WebAssembly kernels stay on one thread (${e && e.message ? e.message : e})`);
  }
  if (url) URL.revokeObjectURL(url);
  return threadCount;
}

// ------------------------------------------------------------------------------ plan cache

// The kernel plans a page makes (the optimizer's choices: most of a first step's time, on the
// CPU's WebAssembly kernels above all) are kept in IndexedDB, database "wgrad", store "plans",
// one record per engine build (`planCacheFingerprint`: another build's plans never apply), so a
// page loaded again plans nothing it planned before. Saved a moment after the count of known
// plans grows, and by `savePlanCache()`.

const PLAN_DB = "wgrad", PLAN_STORE = "plans", PLAN_SAVE_MS = 1000;
let planDb = null, savedPlans = -1, planSaving = null, planTimer = null;

function planStore(mode, f) {
  if (!planDb) {
    planDb = new Promise((ok, fail) => {
      const req = indexedDB.open(PLAN_DB, 1);
      req.onupgradeneeded = () => req.result.createObjectStore(PLAN_STORE);
      req.onsuccess = () => ok(req.result);
      req.onerror = () => fail(req.error);
    });
    planDb.catch(() => (planDb = null));
  }
  return planDb.then((db) => new Promise((ok, fail) => {
    const tx = db.transaction(PLAN_STORE, mode);
    const req = f(tx.objectStore(PLAN_STORE));
    tx.oncomplete = () => ok(req.result);
    tx.onerror = () => fail(tx.error);
    tx.onabort = () => fail(tx.error);
  }));
}

async function loadPlanCache() {
  if (typeof indexedDB === "undefined") return 0;
  const key = raw.planCacheFingerprint();
  let n = 0;
  try {
    const json = await planStore("readonly", (s) => s.get(key));
    if (typeof json === "string") n = raw.beamCacheImport(json);
    // Records of other builds: their plans never match again.
    await planStore("readwrite", (s) => {
      const req = s.getAllKeys();
      req.onsuccess = () => req.result.filter((k) => k !== key).forEach((k) => s.delete(k));
      return req;
    });
  } catch (e) {
    console.warn(`wgrad: the plan cache in IndexedDB is not readable (${e && e.message ? e.message : e}); planning afresh`);
  }
  savedPlans = raw.planCacheSize();
  if (!planTimer) {
    planTimer = setInterval(() => {
      if (!planSaving && raw.planCacheSize() !== savedPlans) savePlanCache().catch(() => {});
    }, PLAN_SAVE_MS);
    if (planTimer.unref) planTimer.unref();
  }
  return n;
}

/**
 * Save the kernel plans this page knows to IndexedDB now (`init` saves them a moment after
 * they change anyway); resolves to how many were saved (0 where there is no IndexedDB, as in
 * Node.js, or with `init({ planCache: false })`).
 */
export async function savePlanCache() {
  if (typeof indexedDB === "undefined" || savedPlans < 0) return 0;
  while (planSaving) await planSaving;
  const n = raw.planCacheSize(), json = raw.beamCacheExport(), key = raw.planCacheFingerprint();
  planSaving = planStore("readwrite", (s) => s.put(json, key));
  try {
    await planSaving;
    savedPlans = n;
  } finally {
    planSaving = null;
  }
  return n;
}

/** Layers. Each has `forward(x)`, `parameters()` and its tensors as properties. */
export const nn = {
  Conv2d: raw.Conv2d,
  Linear: raw.Linear,
  BatchNorm: raw.BatchNorm,
  LayerNorm: raw.LayerNorm,
  GroupNorm: raw.GroupNorm,
  Embedding: raw.Embedding,
  Conv1d: raw.Conv1d,
  ConvTranspose1d: raw.ConvTranspose1d,
  ConvTranspose2d: raw.ConvTranspose2d,
  InstanceNorm: raw.InstanceNorm,
  LayerNorm2d: raw.LayerNorm2d,
  RMSNorm: raw.RMSNorm,
  LSTMCell: raw.LSTMCell,
};

/**
 * Optimizers: `new optim.Adam(getParameters(model), { lr, schedule })`, then `zeroGrad()` /
 * `step()`; `optim.OptimizerGroup([a, b])` steps several as one; `optim.clipGradNorm(params,
 * maxNorm)` clips the gradients before a step.
 */
export const optim = {
  SGD: raw.SGD,
  Adam: raw.Adam,
  AdamW: raw.AdamW,
  Muon: raw.Muon,
  LAMB: raw.LAMB,
  LARS: raw.LARS,
  OptimizerGroup: raw.OptimizerGroup,
  GradScaler: raw.GradScaler,
  clipGradNorm: raw.clipGradNorm,
};

const isLayer = (v) => Object.values(nn).some((cls) => v instanceof cls);

/** How deep `getParameters` / `getStateDict` follow a model's objects and arrays. */
const MAX_DEPTH = 100;

/**
 * Walk `model` depth first through object keys and array indices, calling `onTensor(t, name)` and
 * `onLayer(layer, name)` with dotted names. Each object is visited once, under the first name it
 * is reached by: a cycle or a second reference (back-references to a parent, shared sub-models)
 * is skipped, and loses nothing, since everything under it was already reached. Nesting deeper
 * than MAX_DEPTH (e.g. getters that make a new object on each read) is an error naming `op`.
 */
function walk(model, op, onTensor, onLayer) {
  const seen = new Set();
  const stack = [[model, "", 0]];
  while (stack.length) {
    const [v, prefix, depth] = stack.pop();
    if (v === null || typeof v !== "object" || seen.has(v)) continue;
    seen.add(v);
    if (v instanceof raw.Tensor) {
      onTensor(v, prefix);
      continue;
    }
    if (isLayer(v)) {
      onLayer(v, prefix);
      continue;
    }
    if (ArrayBuffer.isView(v) || v instanceof ArrayBuffer) continue;
    if (depth >= MAX_DEPTH) throw new Error(`${op}: the model nests deeper than ${MAX_DEPTH} levels (at ${prefix})`);
    // Own entries, arrays included: a sparse array's holes are not visited.
    const entries = Object.entries(v);
    for (let i = entries.length - 1; i >= 0; i--) {
      const [k, x] = entries[i];
      stack.push([x, prefix ? `${prefix}.${k}` : String(k), depth + 1]);
    }
  }
}

/**
 * Every trainable tensor reachable from `model`: a layer, a Tensor, or plain objects and arrays
 * holding them (each object once, up to MAX_DEPTH levels). Each parameter appears once.
 */
export function getParameters(model) {
  const out = [];
  const add = (t) => {
    if (!t.isDisposed && t.requiresGrad && !out.some((q) => raw.sameTensor(q, t))) out.push(t);
  };
  walk(model, "getParameters", add, (layer) => layer.parameters().forEach(add));
  return out;
}

// The tensors a layer holds, by the names the Rust state dict uses.
function layerTensors(v) {
  const out = [];
  const names = {
    runningMean: "running_mean",
    runningVar: "running_var",
    numBatchesTracked: "num_batches_tracked",
    weightIh: "weight_ih",
    weightHh: "weight_hh",
    biasIh: "bias_ih",
    biasHh: "bias_hh",
  };
  const keys = ["weight", "bias", "runningMean", "runningVar", "numBatchesTracked", "weightIh", "weightHh", "biasIh", "biasHh"];
  for (const k of keys) {
    if (!(k in v)) continue;
    const t = v[k];
    if (t) out.push([names[k] ?? k, t]);
  }
  return out;
}

/**
 * `{ "path.to.weight": Tensor }` for every layer and Tensor reachable from `model` through
 * object keys and array indices (the names PyTorch and tinygrad state dicts use). Each object is
 * visited once, under the first name that reaches it, so cycles and back-references are fine.
 */
export function getStateDict(model) {
  const out = {};
  walk(
    model,
    "getStateDict",
    (t, name) => (out[name] = t),
    (layer, name) => {
      for (const [k, t] of layerTensors(layer)) out[name ? `${name}.${k}` : k] = t;
    },
  );
  return out;
}

/**
 * Copy `state` (`{ name: Tensor }`, e.g. from `safeLoad`) into the model's tensors in place.
 * Every tensor of the model must be present with its shape and dtype (`strict: false` skips
 * missing ones).
 */
export function loadStateDict(model, state, options = {}) {
  const op = "loadStateDict";
  if (state === null || typeof state !== "object" || Array.isArray(state)) {
    throw new Error(`${op}: state must be an object of named Tensors (e.g. from safeLoad), got ${describe(state)}`);
  }
  if (options === null || typeof options !== "object") throw new Error(`${op}: options must be an object, got ${describe(options)}`);
  const { strict = true } = options;
  // The layers' getters make new handles: disposed with the assigns' results when done.
  tidy(() => assignState(op, model, state, strict));
}

function assignState(op, model, state, strict) {
  const own = getStateDict(model);
  const missing = Object.keys(own).filter((k) => !(k in state));
  if (strict && missing.length) throw new Error(`${op}: missing ${missing.join(", ")}`);
  const unexpected = Object.keys(state).filter((k) => !(k in own));
  if (strict && unexpected.length) throw new Error(`${op}: unexpected ${unexpected.join(", ")}`);
  const written = [];
  for (const [k, t] of Object.entries(own)) {
    if (!(k in state)) continue;
    const v = state[k];
    if (!(v instanceof raw.Tensor)) throw new Error(`${op}: ${k} must be a Tensor, got ${describe(v)}`);
    const same = (a, b) => a.length === b.length && a.every((x, i) => x === b[i]);
    if (!same(t.shape, v.shape) || t.dtype !== v.dtype) {
      throw new Error(`${op}: ${k} is [${v.shape}] ${v.dtype}, the model has [${t.shape}] ${t.dtype}`);
    }
    written.push(t.assign(v));
  }
  raw.Tensor.realizeAll(written);
}

/**
 * The TinyJit: returns a function that runs `fn` on its first call, captures the kernels it
 * launches on the second, and afterwards replays them without running `fn`. `fn` takes tensors
 * and returns a Tensor or an array of them, synchronously; inputs must keep their shapes and
 * dtypes (call `reset()` to capture again). `await f.callAsync(...inputs)` is a call that never
 * blocks the page: the first one compiles the step's WebGPU pipelines all at once on the
 * browser's threads (the first call of a GPT then starts sooner); the tensors `fn` makes are
 * disposed when it returns, as in `tidy`, except the outputs. Await it before the next call.
 */
export function jit(fn) {
  const j = new raw.TinyJitJs(fn);
  const call = (...inputs) => j.call(inputs);
  // A call that never blocks (the first one's WebGPU pipelines compile all at once,
  // asynchronously). Tensors the function makes are disposed as in `tidy`; the outputs are
  // registered when the promise resolves, after this scope.
  call.callAsync = (...inputs) => {
    raw.startScope();
    try {
      return j.callAsync(inputs);
    } finally {
      raw.endScope(undefined);
    }
  };
  call.reset = () => j.reset();
  call.kernels = () => j.kernels();
  call.profile = (...inputs) => j.profile(inputs);
  // Releases the captured step (its buffers and kernels) now rather than when collected.
  call.dispose = () => j.free();
  Object.defineProperty(call, "launches", { get: () => j.launches });
  return call;
}

/**
 * Run `fn` and dispose every tensor it created except those it returns (a Tensor, or an array
 * or object holding Tensors). `fn` must be synchronous.
 */
export function tidy(fn) {
  if (typeof fn !== "function") throw new Error(`tidy: expected a function, got ${typeof fn}`);
  raw.startScope();
  let result;
  try {
    result = fn();
  } catch (e) {
    raw.endScope(undefined);
    throw e;
  }
  if (result instanceof Promise) {
    raw.endScope(undefined);
    throw new Error("tidy: the function returned a Promise; it must be synchronous");
  }
  raw.endScope(result);
  return result;
}

async function fetchBytes(url) {
  const res = await fetch(url);
  if (!res.ok) throw new Error(`datasets.mnist: fetching ${url} failed: HTTP ${res.status}`);
  let body = res.body;
  // Gzip is undone by the browser's DecompressionStream; the engine also reads raw IDX.
  if (url.endsWith(".gz") && typeof DecompressionStream !== "undefined") {
    body = body.pipeThrough(new DecompressionStream("gzip"));
  }
  return new Uint8Array(await new Response(body).arrayBuffer());
}

const asBytes = (b, name) => {
  if (b instanceof Uint8Array) return b;
  if (b instanceof ArrayBuffer) return new Uint8Array(b);
  if (ArrayBuffer.isView(b)) return new Uint8Array(b.buffer, b.byteOffset, b.byteLength);
  throw new Error(`datasets.mnist: buffers.${name} must be an ArrayBuffer or Uint8Array`);
};

/** Datasets. */
export const datasets = {
  /**
   * MNIST (or Fashion-MNIST: same format) as `{ xTrain, yTrain, xTest, yTest }`, from
   * `baseUrl` (the four IDX files, .gz or not, under their usual names: `fashion` only picks
   * the log label) or from `buffers: { trainImages, trainLabels, testImages, testLabels }`.
   */
  async mnist(options = {}) {
    if (options === null || typeof options !== "object") {
      throw new Error(`datasets.mnist: options must be an object, got ${describe(options)}`);
    }
    const { baseUrl, buffers } = options;
    let parts;
    if (buffers !== undefined) {
      if (buffers === null || typeof buffers !== "object") {
        throw new Error(`datasets.mnist: buffers must be an object, got ${describe(buffers)}`);
      }
      const names = ["trainImages", "trainLabels", "testImages", "testLabels"];
      parts = names.map((n) => asBytes(buffers[n], n));
    } else if (typeof baseUrl === "string") {
      const base = baseUrl.endsWith("/") ? baseUrl : baseUrl + "/";
      parts = await Promise.all(raw.mnistFiles().map((f) => fetchBytes(base + f)));
    } else {
      throw new Error("datasets.mnist: pass { baseUrl } or { buffers }");
    }
    return raw.mnistFromBytes(parts[0], parts[1], parts[2], parts[3]);
  },
};

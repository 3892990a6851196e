// wgrad for JavaScript: the WebAssembly engine (pkg/web, built by wasm-pack from src/web.rs)
// plus the pieces that are plain JavaScript: `init` (loads the module, then picks the device),
// the `nn` / `optim` / `datasets` namespaces, `jit`, `tidy` and `getParameters`.

import wasmInit, * as raw from "../pkg/web/wgrad.js";

export {
  Tensor,
  TinyJitJs,
  withContext,
  setDebug,
  globalCounters,
  resetGlobalCounters,
  defaultDevice,
  safeSave,
  safeLoad,
} from "../pkg/web/wgrad.js";

let ready = null;

/**
 * Load the engine and pick its device: WebGPU when the browser has it (with the adapter's
 * limits), else the CPU interpreter with a console warning. `device: "webgpu"` makes a missing
 * WebGPU an error; `device: "cpu"` skips WebGPU. `wasm` overrides where the .wasm file is
 * fetched from. Resolves to `{ device, adapter }`.
 */
export async function init(options = {}) {
  if (options === null || typeof options !== "object") {
    throw new Error(`init: options must be an object, got ${typeof options}`);
  }
  const { wasm, ...engine } = options;
  if (!ready) {
    ready = wasmInit(wasm === undefined ? undefined : { module_or_path: wasm });
  }
  try {
    await ready;
  } catch (e) {
    ready = null;
    throw e;
  }
  const info = await raw.initEngine(engine);
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

/** Layers. Each has `forward(x)`, `parameters()` and its tensors as properties. */
export const nn = {
  Conv2d: raw.Conv2d,
  Linear: raw.Linear,
  BatchNorm: raw.BatchNorm,
  LayerNorm: raw.LayerNorm,
  GroupNorm: raw.GroupNorm,
  Embedding: raw.Embedding,
};

/** Optimizers: `new optim.Adam(getParameters(model), { lr })`, then `zeroGrad()` / `step()`. */
export const optim = {
  SGD: raw.SGD,
  Adam: raw.Adam,
  AdamW: raw.AdamW,
  Muon: raw.Muon,
  LAMB: raw.LAMB,
  LARS: raw.LARS,
};

const isLayer = (v) =>
  v instanceof raw.Conv2d ||
  v instanceof raw.Linear ||
  v instanceof raw.BatchNorm ||
  v instanceof raw.LayerNorm ||
  v instanceof raw.GroupNorm ||
  v instanceof raw.Embedding;

/**
 * Every trainable tensor reachable from `model`: a layer, a Tensor, or plain objects and arrays
 * holding them (any depth). Each parameter appears once.
 */
export function getParameters(model) {
  const out = [];
  const seen = new Set();
  const add = (t) => {
    if (!t.isDisposed && t.requiresGrad && !out.some((q) => raw.sameTensor(q, t))) out.push(t);
  };
  const visit = (v) => {
    if (v === null || typeof v !== "object" || seen.has(v)) return;
    seen.add(v);
    if (v instanceof raw.Tensor) return add(v);
    if (isLayer(v)) return v.parameters().forEach(add);
    for (const x of Array.isArray(v) ? v : Object.values(v)) visit(x);
  };
  visit(model);
  return out;
}

// The tensors a layer holds, by the names the Rust state dict uses.
function layerTensors(v) {
  const out = [];
  for (const k of ["weight", "bias", "runningMean", "runningVar"]) {
    if (!(k in v)) continue;
    const t = v[k];
    if (t) out.push([k === "runningMean" ? "running_mean" : k === "runningVar" ? "running_var" : k, t]);
  }
  return out;
}

/**
 * `{ "path.to.weight": Tensor }` for every layer and Tensor reachable from `model` through
 * object keys and array indices (the names PyTorch and tinygrad state dicts use).
 */
export function getStateDict(model) {
  const out = {};
  const seen = new Set();
  const visit = (v, prefix) => {
    if (v === null || typeof v !== "object" || seen.has(v)) return;
    seen.add(v);
    const name = (k) => (prefix ? `${prefix}.${k}` : String(k));
    if (v instanceof raw.Tensor) {
      out[prefix] = v;
      return;
    }
    if (isLayer(v)) {
      for (const [k, t] of layerTensors(v)) out[name(k)] = t;
      return;
    }
    const entries = Array.isArray(v) ? v.map((x, i) => [i, x]) : Object.entries(v);
    for (const [k, x] of entries) visit(x, name(k));
  };
  visit(model, "");
  return out;
}

/**
 * Copy `state` (`{ name: Tensor }`, e.g. from `safeLoad`) into the model's tensors in place.
 * Every tensor of the model must be present with its shape and dtype (`strict: false` skips
 * missing ones).
 */
export function loadStateDict(model, state, { strict = true } = {}) {
  const own = getStateDict(model);
  const missing = Object.keys(own).filter((k) => !(k in state));
  if (strict && missing.length) throw new Error(`loadStateDict: missing ${missing.join(", ")}`);
  const unexpected = Object.keys(state).filter((k) => !(k in own));
  if (strict && unexpected.length) throw new Error(`loadStateDict: unexpected ${unexpected.join(", ")}`);
  const written = [];
  for (const [k, t] of Object.entries(own)) {
    if (!(k in state)) continue;
    const v = state[k];
    const same = (a, b) => a.length === b.length && a.every((x, i) => x === b[i]);
    if (!same(t.shape, v.shape) || t.dtype !== v.dtype) {
      throw new Error(`loadStateDict: ${k} is [${v.shape}] ${v.dtype}, the model has [${t.shape}] ${t.dtype}`);
    }
    written.push(t.assign(v));
  }
  raw.Tensor.realizeAll(written);
}

/**
 * The TinyJit: returns a function that runs `fn` on its first call, captures the kernels it
 * launches on the second, and afterwards replays them without running `fn`. `fn` takes tensors
 * and returns a Tensor or an array of them, synchronously; inputs must keep their shapes and
 * dtypes (call `reset()` to capture again).
 */
export function jit(fn) {
  const j = new raw.TinyJitJs(fn);
  const call = (...inputs) => j.call(inputs);
  call.reset = () => j.reset();
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
    const { baseUrl, buffers } = options;
    let parts;
    if (buffers) {
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

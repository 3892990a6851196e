// Types of the wgrad package (what `import ... from "wgrad"` gives): the engine's classes and
// functions, declared in pkg/web/wgrad.d.ts, which wasm-bindgen generates from src/web/ with the
// Rust doc comments as their TSDoc, re-exported here; and the JavaScript layer of js/wgrad.js,
// declared and documented below. Every export here has a TSDoc comment (tests/readme.rs checks).

import {
  LrScheduleOptions,
  Tensor,
  Conv2d,
  Linear,
  BatchNorm,
  LayerNorm,
  GroupNorm,
  Embedding,
  Conv1d,
  ConvTranspose1d,
  ConvTranspose2d,
  InstanceNorm,
  LayerNorm2d,
  RMSNorm,
  LSTMCell,
  Optim,
  InitInfo,
  InitOptions,
  MnistData,
  KernelInfo,
  KernelProfile,
} from "../pkg/web/wgrad.js";

/**
 * The engine's classes and functions (documented in pkg/web/wgrad.d.ts): `Tensor` and its ops,
 * the layer classes (also under `nn`), `Optim`, the TinyJit's class (`jit` wraps it),
 * `withContext`, BEAM search (`beamTune`, the cache's export and import), debugging and
 * counters (`setDebug`, `globalCounters`), devices (`defaultDevice`, `loseDevice`), state files
 * (`safeSave`, `safeLoad`, `safeLoadMetadata`, `torchLoad`) and the option and result types.
 */
export {
  Tensor,
  Conv2d,
  Linear,
  BatchNorm,
  LayerNorm,
  GroupNorm,
  Embedding,
  Conv1d,
  ConvTranspose1d,
  ConvTranspose2d,
  InstanceNorm,
  LayerNorm2d,
  RMSNorm,
  LSTMCell,
  Optim,
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
  DType,
  Reduction,
  Conv2dOptions,
  Conv1dOptions,
  ConvTranspose2dOptions,
  ConvTranspose1dOptions,
  Pool2dOptions,
  PadMode,
  InterpolateMode,
  CrossEntropyOptions,
  LrScheduleOptions,
  InitOptions,
  InitInfo,
  AdapterInfo,
  ContextOptions,
  GlobalCounters,
  MnistData,
  KernelInfo,
  KernelProfile,
} from "../pkg/web/wgrad.js";

/** Load the engine and pick its device (WebGPU, else the CPU interpreter with a warning). */
export function init(options?: InitOptions & { wasm?: string | URL | Request | BufferSource | WebAssembly.Module }): Promise<InitInfo>;

/**
 * Options of `optim.SGD`, `optim.LARS` and `optim.Muon`. Defaults: SGD `lr` 0.001, `momentum` 0,
 * `weightDecay` 0; LARS 0.001, 0.9, 0.0001; Muon 0.02, 0.95, 0 with `nesterov` on.
 */
export interface SgdOptions {
  /** The learning rate. */
  lr?: number;
  /** The momentum factor (0: none). */
  momentum?: number;
  /** L2 penalty added to the gradient. */
  weightDecay?: number;
  /** Nesterov momentum. */
  nesterov?: boolean;
  /** A learning-rate schedule followed from the first step. */
  schedule?: LrScheduleOptions;
}
/** Options of `optim.Adam` (defaults: `lr` 0.001, `b1` 0.9, `b2` 0.999, `eps` 1e-8). */
export interface AdamOptions {
  /** The learning rate. */
  lr?: number;
  /** Decay of the first moment's running average. */
  b1?: number;
  /** Decay of the second moment's running average. */
  b2?: number;
  /** Added to the denominator for stability. */
  eps?: number;
  /** A learning-rate schedule followed from the first step. */
  schedule?: LrScheduleOptions;
}
/** Options of `optim.AdamW`: Adam's, and decoupled weight decay (default 0.01). */
export interface AdamWOptions extends AdamOptions {
  /** Decoupled weight decay. */
  weightDecay?: number;
}
/** Options of `optim.LAMB` (defaults: `lr` 0.001, `eps` 1e-6, `weightDecay` 0). */
export interface LambOptions {
  /** The learning rate. */
  lr?: number;
  /** Added to the denominator for stability. */
  eps?: number;
  /** Decoupled weight decay. */
  weightDecay?: number;
  /** A learning-rate schedule followed from the first step. */
  schedule?: LrScheduleOptions;
}

type OptimCtor<O> = { new (params: Tensor[], options?: O): Optim; (params: Tensor[], options?: O): Optim };

/**
 * The layers: `new nn.Linear(4, 16)`, then `layer.forward(x)`; each has `parameters()` and its
 * tensors as properties (`weight`, `bias`, ...), named as in PyTorch.
 */
export const nn: {
  Conv2d: typeof Conv2d;
  Linear: typeof Linear;
  BatchNorm: typeof BatchNorm;
  LayerNorm: typeof LayerNorm;
  GroupNorm: typeof GroupNorm;
  Embedding: typeof Embedding;
  Conv1d: typeof Conv1d;
  ConvTranspose1d: typeof ConvTranspose1d;
  ConvTranspose2d: typeof ConvTranspose2d;
  InstanceNorm: typeof InstanceNorm;
  LayerNorm2d: typeof LayerNorm2d;
  RMSNorm: typeof RMSNorm;
  LSTMCell: typeof LSTMCell;
};

/**
 * The optimizers: `new optim.Adam(getParameters(model), { lr })`, then `zeroGrad()`,
 * `loss.backward()`, `step()` (in training mode).
 */
export const optim: {
  /** Stochastic gradient descent, with momentum and Nesterov momentum. */
  SGD: OptimCtor<SgdOptions>;
  /** Adam. */
  Adam: OptimCtor<AdamOptions>;
  /** Adam with decoupled weight decay. */
  AdamW: OptimCtor<AdamWOptions>;
  /** Momentum orthogonalised by Newton-Schulz iterations (for 2-D weights). */
  Muon: OptimCtor<SgdOptions>;
  /** Adam with a per-layer trust ratio. */
  LAMB: OptimCtor<LambOptions>;
  /** SGD with a per-layer trust ratio. */
  LARS: OptimCtor<SgdOptions>;
  /** Several optimizers stepped as one (each parameter in one of them); the members stay usable. */
  OptimizerGroup: { new (optimizers: Optim[]): Optim; (optimizers: Optim[]): Optim };
  /** Scale the gradients to a global norm of at most `maxNorm` (lazily); returns the norm before. */
  clipGradNorm(params: Tensor[], maxNorm: number, normType?: number): Tensor;
};

/**
 * `{ "path.to.weight": Tensor }` for every layer tensor reachable from `model` (each object once,
 * under the first name that reaches it: cycles are fine; deeper than 100 levels is an error).
 */
export function getStateDict(model: unknown): Record<string, Tensor>;

/** Copy named tensors (e.g. from `safeLoad`) into the model's tensors in place. */
export function loadStateDict(model: unknown, state: Record<string, Tensor>, options?: { strict?: boolean }): void;

/** Every trainable tensor reachable from a layer, a Tensor, or objects/arrays holding them. */
export function getParameters(model: unknown): Tensor[];

/** What `jit(fn)` returns: call it with the inputs of `fn`. */
export interface JittedFunction<R extends Tensor | Tensor[]> {
  /** Run (call 1), capture (call 2) or replay (later calls) the step with these inputs. */
  (...inputs: Tensor[]): R;
  /** Forget the capture: the next call runs, the one after captures again. */
  reset(): void;
  /** Launches replayed per call (0 before capture). */
  readonly launches: number;
  /** The captured step's launches in order (name, launch size, WGSL source, bytes). */
  kernels(): KernelInfo[];
  /**
   * Replay the captured step once with every launch timed (timestamp queries where the adapter
   * has them, else the host clock around each launch and a readback); await it before the next call.
   */
  profile(...inputs: Tensor[]): Promise<KernelProfile>;
  /** Release the captured step (its buffers and kernels) now rather than when collected. */
  dispose(): void;
}

/** The TinyJit: call 1 runs `fn`, call 2 captures its kernels, later calls replay them. */
export function jit<R extends Tensor | Tensor[]>(fn: (...inputs: Tensor[]) => R): JittedFunction<R>;

/** Run `fn` and dispose every tensor it created except those it returns. */
export function tidy<R>(fn: () => R): R;

/** Where `datasets.mnist` reads the four IDX files from: `baseUrl` or `buffers`. */
export interface MnistOptions {
  /** The folder URL holding the IDX files (.gz or not) under their usual names. */
  baseUrl?: string;
  /** The files' contents, already in memory. */
  buffers?: { trainImages: BufferSource; trainLabels: BufferSource; testImages: BufferSource; testLabels: BufferSource };
  /** Fashion-MNIST (the same format): only names the data in messages. */
  fashion?: boolean;
}

/** Dataset loaders. */
export const datasets: {
  /**
   * MNIST (or Fashion-MNIST) as `{ xTrain, yTrain, xTest, yTest }`: "uint8" images
   * `[N, 1, 28, 28]` and labels `[N]`. Rejects with an Error naming the file that is missing
   * or malformed.
   */
  mnist(options: MnistOptions): Promise<MnistData>;
};

// Tensor methods written in JavaScript (js/wgrad.js).
declare module "../pkg/web/wgrad.js" {
  interface Tensor {
    /** `x.sequential([f, g])` is `g(f(x))`: apply functions (layers' `forward`s) in order. */
    sequential(fns: ((x: Tensor) => Tensor)[]): Tensor;
  }
  namespace Tensor {
    /** The bytes at `url` as a 1-D "uint8" tensor, gunzipped first with `{ gunzip: true }`. */
    function fromUrl(url: string | URL, options?: { gunzip?: boolean }): Promise<Tensor>;
  }
}

// Types of the wgrad package: the engine's classes and functions (generated from src/web/ by
// wasm-bindgen) and the JavaScript layer of js/wgrad.js.

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

export interface SgdOptions { lr?: number; momentum?: number; weightDecay?: number; nesterov?: boolean; schedule?: LrScheduleOptions; }
export interface AdamOptions { lr?: number; b1?: number; b2?: number; eps?: number; schedule?: LrScheduleOptions; }
export interface AdamWOptions extends AdamOptions { weightDecay?: number; }
export interface LambOptions { lr?: number; eps?: number; weightDecay?: number; schedule?: LrScheduleOptions; }

type OptimCtor<O> = { new (params: Tensor[], options?: O): Optim; (params: Tensor[], options?: O): Optim };

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

export const optim: {
  SGD: OptimCtor<SgdOptions>;
  Adam: OptimCtor<AdamOptions>;
  AdamW: OptimCtor<AdamWOptions>;
  Muon: OptimCtor<SgdOptions>;
  LAMB: OptimCtor<LambOptions>;
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

export interface JittedFunction<R extends Tensor | Tensor[]> {
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

export interface MnistOptions {
  baseUrl?: string;
  buffers?: { trainImages: BufferSource; trainLabels: BufferSource; testImages: BufferSource; testLabels: BufferSource };
  fashion?: boolean;
}

export const datasets: {
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

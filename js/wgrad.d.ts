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
  GradScaler,
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

/**
 * Load the engine and pick its device (WebGPU, else WebAssembly kernels: "wasm"). `wasm`: where
 * the engine's .wasm comes from (default: beside the package's files). `planCache` (default
 * true): keep the kernel plans this page makes in IndexedDB and use those of earlier visits, so
 * a page loaded again skips the optimizer's search (`plansFromCache` in the result says how
 * many it found). `threads`: how many threads WebAssembly kernels run on where shared memory
 * exists (a cross-origin isolated page or its workers, Node.js, Deno); default the cores, at
 * most 8; 1 keeps them on the calling thread. The result's `threads` says how many run.
 */
export function init(
  options?: InitOptions & {
    wasm?: string | URL | Request | BufferSource | WebAssembly.Module;
    planCache?: boolean;
    threads?: number;
  },
): Promise<InitInfo & { plansFromCache: number; threads: number }>;

/**
 * Save the kernel plans this page knows to IndexedDB now (`init` saves them a moment after they
 * change anyway); resolves to how many were saved (0 without IndexedDB or with `planCache: false`).
 */
export function savePlanCache(): Promise<number>;

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
  /** Dynamic loss scaling for mixed precision: `scale(loss).backward()`, then `step(opt)`. */
  GradScaler: typeof GradScaler;
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
  /**
   * A call that never blocks the page: the first one (which compiles the step) creates its
   * WebGPU pipelines all at once through the asynchronous path, compiled on the browser's
   * threads; later calls resolve to what a plain call returns. Await it before the next call.
   */
  callAsync(...inputs: Tensor[]): Promise<R>;
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

/** The sizes of a {@link GPT} (Rust's `GptConfig`). */
export interface GPTConfig {
  /** Tokens (characters, for a char-level model). */
  vocabSize: number;
  /** The longest context: the position embedding's rows and the key/value cache's length. */
  blockSize: number;
  /** Blocks (default 2). */
  nLayer?: number;
  /** Attention heads (default 4); `nEmbd` must be a multiple. */
  nHead?: number;
  /** The width of the residual stream (default 64). */
  nEmbd?: number;
  /** Biases in the Linear layers and LayerNorms (GPT-2's; default false, as nanoGPT trains). */
  bias?: boolean;
}

/** How the next token is drawn from the logits (Rust's `Sampling`). */
export interface SamplingOptions {
  /** Logits are divided by it; 0 takes the most likely token (greedy). Default 1. */
  temperature?: number;
  /** Keep only the `topK` most likely tokens (null: all). */
  topK?: number | null;
  /** Keep the most likely tokens whose probabilities sum to `topP` (nucleus sampling; null: all). */
  topP?: number | null;
}

/** Per layer, the keys and values decoded so far: `[batch, nHead, blockSize, headDim]` each. */
export interface KvCache {
  keys: Tensor[];
  values: Tensor[];
}

/** A Linear layer of the GPT: `x @ weight.T + bias`, `weight` `[out, in]`. */
export interface GPTLinear { weight: Tensor; bias?: Tensor; forward(x: Tensor): Tensor; }
/** A LayerNorm of the GPT over the last axis (eps 1e-5). */
export interface GPTLayerNorm { weight: Tensor; bias?: Tensor; forward(x: Tensor): Tensor; }
/** A pre-LayerNorm block: `x + attn(ln_1(x))`, then `x + mlp(ln_2(x))`. */
export interface GPTBlock {
  ln_1: GPTLayerNorm;
  attn: { c_attn: GPTLinear; c_proj: GPTLinear };
  ln_2: GPTLayerNorm;
  mlp: { c_fc: GPTLinear; c_proj: GPTLinear };
  forward(x: Tensor): Tensor;
}

/**
 * A GPT in nanoGPT's shape, the model of Rust's `wgrad::nn::gpt::Gpt` written with this API:
 * token and position embeddings, `nLayer` pre-LayerNorm blocks (causal self-attention, a
 * tanh-GELU MLP), a final LayerNorm and the output layer tied to the token embedding. It is
 * initialised as nanoGPT does from the seeded generator (`Tensor.manualSeed`). Its tensors are
 * named as the Rust state dict names them (`wte.weight`, `h.0.attn.c_attn.weight`, ...), so
 * `getStateDict` / `safeSave` / `loadStateDict` work on it and its checkpoints load in
 * `examples/gpt.rs --load` and back.
 *
 * @example
 * const gpt = new GPT({ vocabSize: 65, blockSize: 64, nLayer: 2, nHead: 4, nEmbd: 64 });
 * const opt = gpt.configureOptimizers({ lr: 1e-2, schedule: GPT.cosineSchedule(1e-2, 100, 2000) });
 * const step = jit(() => gpt.trainStep(opt, data, 16));
 */
export class GPT {
  constructor(config: GPTConfig);
  /** The sizes, defaults filled in. */
  readonly config: Required<GPTConfig>;
  wte: { weight: Tensor; forward(idx: Tensor): Tensor };
  wpe: { weight: Tensor; forward(idx: Tensor): Tensor };
  h: GPTBlock[];
  ln_f: GPTLayerNorm;
  /** The learned tensors in state-dict order. */
  parameters(): Tensor[];
  /** Free every parameter now (rather than when collected). */
  dispose(): void;
  /** Logits `[B, T, vocabSize]` of the integer tokens `idx` `[B, T]` (T ≤ blockSize); each position sees itself and those before. */
  forward(idx: Tensor): Tensor;
  /** The mean cross-entropy of predicting each token of `windows` `[B, T + 1]` from the ones before it. */
  loss(windows: Tensor): Tensor;
  /**
   * nanoGPT's optimizer: AdamW (eps 1e-8; defaults lr 1e-3, betas [0.9, 0.99]) with
   * `weightDecay` (default 0.1) on the matrices and none on biases and LayerNorms, as one
   * OptimizerGroup; `schedule` sets the learning rate per step on the device.
   */
  configureOptimizers(options?: { weightDecay?: number; lr?: number; betas?: [number, number]; schedule?: LrScheduleOptions }): Optim;
  /**
   * One training step (what `jit` captures): `batch` random windows of `data` (1-D token ids)
   * drawn on the device, the loss, backward and the update, in training mode. Returns the loss
   * (realized) of the weights the step started from.
   */
  trainStep(opt: Optim, data: Tensor, batch: number): Tensor;
  /** An empty key/value cache for `batch` sequences (zeros). */
  kvCache(batch: number): KvCache;
  /**
   * One decode step: the logits `[B, vocabSize]` of the token after `tokens` `[B, 1]` at
   * position `pos` (an integer Tensor `[1]`), whose key and value are written into `cache`.
   * The position is a tensor, so every position runs the same kernels.
   */
  decode(cache: KvCache, tokens: Tensor, pos: Tensor): Tensor;
  /** A {@link Generator} of `batch` sequences (default 1). */
  generator(batch?: number, sampling?: SamplingOptions): Generator;
  /** `batch` windows of `len` consecutive tokens of `data` (1-D) at random offsets, drawn on the device: `[batch, len]`. */
  static randomWindows(data: Tensor, batch: number, len: number): Tensor;
  /** The windows of `len` tokens of `data` (1-D) starting at `starts` (integers `[batch]`): `[batch, len]`. */
  static windows(data: Tensor, starts: Tensor, len: number): Tensor;
  /** nanoGPT's learning-rate schedule: linear warmup over `warmup` steps, then a cosine decay to `lr / 10` at `steps`. */
  static cosineSchedule(lr: number, warmup: number, steps: number): LrScheduleOptions;
  /** One token per row of `logits` `[B, V]` drawn on the device (temperature, top-k, top-p): `[B, 1]` int32. */
  static sample(logits: Tensor, sampling?: SamplingOptions): Tensor;
}

/**
 * Generation with a key/value cache: the decode step (`GPT.decode`, then `GPT.sample`) is a
 * `jit` of the tokens and the position, so from the third token on each token replays the same
 * launches. A full context slides: the cache restarts from the last `blockSize / 2` tokens.
 */
export class Generator {
  constructor(gpt: GPT, batch?: number, sampling?: SamplingOptions);
  /** The sequences decoded side by side. */
  readonly batch: number;
  /** The next position to write (the tokens in the context). */
  readonly pos: number;
  /** Launches one replayed decode step makes (0 before it is captured). */
  readonly launches: number;
  /** The captured decode step's launches (name, sizes, WGSL source). */
  kernels(): KernelInfo[];
  /** Forget the context. */
  reset(): void;
  /** Free the cache and the captured step now. */
  dispose(): void;
  /**
   * Decode one token per row; returns `[next tokens [B, 1] int32, logits [B, vocabSize]]` in the
   * step's output buffers: read them before the next step, then dispose the handles.
   */
  step(tokens: number[]): [Tensor, Tensor];
  /**
   * Feed `prompt` (token ids, at least one) and generate `n` tokens per row, calling `onToken`
   * with each step's tokens (one per row) as they arrive. Resolves to the tokens per row.
   */
  generate(prompt: number[], n: number, onToken?: (tokens: number[]) => void): Promise<number[][]>;
}

/** A character-level tokenizer: the vocabulary is every character of `text`, in code-point order. */
export class CharTokenizer {
  constructor(text: string);
  /** The characters in token-id order. */
  readonly chars: string[];
  readonly vocabSize: number;
  /** Token ids of `text` (a Uint8Array for up to 256 characters, else an Int32Array); throws on an unknown character. */
  encode(text: string): Uint8Array | Int32Array;
  /** The text of token ids. */
  decode(ids: ArrayLike<number>): string;
}

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

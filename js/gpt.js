// A GPT for JavaScript, written with the package's public tensor API: the model of Rust's
// `wgrad::nn::gpt` (nanoGPT's shape: token and position embeddings, pre-LayerNorm blocks of
// causal self-attention and a tanh-GELU MLP, a final LayerNorm, the output layer tied to the
// token embedding), with the same initialisation scheme (not the same draws for a seed), the
// same ops in the same order and the same state-dict names (`wte.weight`,
// `h.0.attn.c_attn.weight`, ...), so a checkpoint saved here loads in `examples/gpt.rs --load`
// and back. Also the pieces to train it (`randomWindows`, `configureOptimizers`,
// `cosineSchedule`), to sample it on the device (`sample`: temperature, top-k, top-p) and to
// generate with a key/value cache through a decode step that `jit` captures once and replays
// per token (`Generator`), and a character tokenizer.

import { Tensor, withContext } from "../pkg/web/wgrad.js";
import { optim, jit, tidy } from "./wgrad.js";

const describe = (v) =>
  v === null || v === undefined ? String(v) : typeof v !== "object" ? `a ${typeof v}` : `a ${v.constructor?.name ?? "object"}`;
const isCount = (v, min = 1) => Number.isSafeInteger(v) && v >= min;

/** A learned parameter: realized, with gradients on (Rust's `param`). */
function param(t) {
  const c = t.contiguous();
  const p = c.realize();
  c.dispose();
  t.dispose();
  p.requiresGrad = true;
  return p;
}

/** `x @ weight.T + bias` with `weight` `[out, in]` from N(0, std) and `bias` zeros (nn.Linear's layout). */
class Linear {
  constructor(cin, cout, std, bias) {
    this.weight = param(Tensor.normal([cout, cin], 0, std));
    if (bias) this.bias = param(Tensor.zeros([cout]));
  }
  forward(x) {
    return x.linear(this.weight.T, this.bias ?? null);
  }
}

/** LayerNorm over the last axis (eps 1e-5): weight ones, bias zeros when `bias`. */
class LayerNorm {
  constructor(c, bias) {
    this.weight = param(Tensor.ones([c]));
    if (bias) this.bias = param(Tensor.zeros([c]));
  }
  forward(x) {
    const y = x.layernorm(-1, 1e-5).mul(this.weight);
    return this.bias ? y.add(this.bias) : y;
  }
}

/** A lookup table `[rows, width]` from N(0, 0.02). */
class Embedding {
  constructor(rows, width) {
    this.weight = param(Tensor.normal([rows, width], 0, 0.02));
  }
  forward(idx) {
    return this.weight.index(idx);
  }
}

/** Causal self-attention: `c_attn` makes queries, keys and values, `c_proj` mixes the heads. */
class Attention {
  constructor(c, nHead, projStd, bias) {
    this.c_attn = new Linear(c, 3 * c, 0.02, bias);
    this.c_proj = new Linear(c, c, projStd, bias);
    Object.defineProperty(this, "nHead", { value: nHead });
  }
  /** `[B, T, C]` → `[B, nHead, T, C / nHead]`. */
  heads(z) {
    const [b, t, c] = z.shape;
    return z.reshape([b, t, this.nHead, c / this.nHead]).transpose(1, 2);
  }
  qkv(x) {
    const c = x.shape[2];
    return this.c_attn.forward(x).split([c, c, c], -1).map((z) => this.heads(z));
  }
  merge(y) {
    const [b, h, t, d] = y.shape;
    return this.c_proj.forward(y.transpose(1, 2).reshape([b, t, h * d]));
  }
  forward(x) {
    const [q, k, v] = this.qkv(x);
    return this.merge(q.scaledDotProductAttention(k, v, null, 0, true));
  }
  /** One position: its key and value written into the caches at `pos`, attending to `keep`. */
  decode(x, kc, vc, pos, keep) {
    const [q, k, v] = this.qkv(x);
    kc.set([":", ":", pos], k);
    vc.set([":", ":", pos], v);
    return this.merge(q.scaledDotProductAttention(kc, vc, keep, 0, false));
  }
}

class Mlp {
  constructor(c, projStd, bias) {
    this.c_fc = new Linear(c, 4 * c, 0.02, bias);
    this.c_proj = new Linear(4 * c, c, projStd, bias);
  }
  forward(x) {
    return this.c_proj.forward(this.c_fc.forward(x).gelu());
  }
}

class Block {
  constructor(c, nHead, projStd, bias) {
    this.ln_1 = new LayerNorm(c, bias);
    this.attn = new Attention(c, nHead, projStd, bias);
    this.ln_2 = new LayerNorm(c, bias);
    this.mlp = new Mlp(c, projStd, bias);
  }
  forward(x) {
    const y = x.add(this.attn.forward(this.ln_1.forward(x)));
    return y.add(this.mlp.forward(this.ln_2.forward(y)));
  }
}

/**
 * The GPT. `new GPT({ vocabSize, blockSize, nLayer, nHead, nEmbd, bias })` initialises it as
 * nanoGPT (and Rust's `Gpt::new`) does, from the seeded generator (`Tensor.manualSeed`).
 * Its tensors are properties named as the Rust state dict names them, so `getStateDict`,
 * `getParameters`, `safeSave` and `loadStateDict` work on it directly.
 */
export class GPT {
  constructor(config) {
    const op = "GPT";
    if (config === null || typeof config !== "object") throw new Error(`${op}: expected a config object, got ${describe(config)}`);
    const { vocabSize, blockSize, nLayer = 2, nHead = 4, nEmbd = 64, bias = false } = config;
    for (const [k, v] of Object.entries({ vocabSize, blockSize, nLayer, nHead, nEmbd })) {
      if (!isCount(v)) throw new Error(`${op}: ${k} must be an integer >= 1, got ${v}`);
    }
    if (nEmbd % nHead !== 0) throw new Error(`${op}: nEmbd ${nEmbd} must be a multiple of nHead ${nHead}`);
    // Not enumerable: the state dict walk sees only the layers.
    Object.defineProperty(this, "config", { value: Object.freeze({ vocabSize, blockSize, nLayer, nHead, nEmbd, bias: !!bias }) });
    const projStd = 0.02 / Math.sqrt(2 * nLayer);
    this.wte = new Embedding(vocabSize, nEmbd);
    this.wpe = new Embedding(blockSize, nEmbd);
    this.h = Array.from({ length: nLayer }, () => new Block(nEmbd, nHead, projStd, !!bias));
    this.ln_f = new LayerNorm(nEmbd, !!bias);
  }

  /** The learned tensors in state-dict order. */
  parameters() {
    const out = [];
    const visit = (v) => {
      if (v instanceof Tensor) out.push(v);
      else if (v && typeof v === "object") Object.values(v).forEach(visit);
    };
    visit(this);
    return out;
  }

  /** Free every parameter now (rather than when collected). */
  dispose() {
    this.parameters().forEach((t) => t.dispose());
  }

  checkTokens(op, idx, tMax) {
    if (!(idx instanceof Tensor)) throw new Error(`GPT.${op}: tokens must be a Tensor, got ${describe(idx)}`);
    const s = idx.shape;
    if (s.length !== 2 || s[1] === 0 || s[1] > tMax || !/int/.test(idx.dtype)) {
      throw new Error(`GPT.${op}: tokens must be integer [batch, time] with time at most ${tMax}, got [${s}] ${idx.dtype}`);
    }
    return s;
  }

  logits(x) {
    return this.ln_f.forward(x).matmul(this.wte.weight.T);
  }

  /** Logits `[B, T, vocabSize]` of the integer tokens `idx` `[B, T]` (T ≤ blockSize), causally. */
  forward(idx) {
    const [, t] = this.checkTokens("forward", idx, this.config.blockSize);
    let x = this.wte.forward(idx).add(this.wpe.weight.slice(0, 0, t));
    for (const b of this.h) x = b.forward(x);
    return this.logits(x);
  }

  /** Mean cross-entropy of each token of `windows` `[B, T + 1]` given the ones before it. */
  loss(windows) {
    const [, t1] = this.checkTokens("loss", windows, this.config.blockSize + 1);
    if (t1 < 2) throw new Error(`GPT.loss: windows [${windows.shape}] need at least 2 tokens`);
    const x = windows.slice(1, 0, t1 - 1).cast("int32");
    const y = windows.slice(1, 1, t1).cast("int32");
    return this.forward(x).sparseCategoricalCrossentropy(y);
  }

  /**
   * nanoGPT's optimizer: AdamW (eps 1e-8) with `weightDecay` on the matrices and none on the
   * biases and LayerNorms, as one `OptimizerGroup`; `schedule` (e.g. `GPT.cosineSchedule`)
   * sets the learning rate per step on the device.
   */
  configureOptimizers({ weightDecay = 0.1, lr = 1e-3, betas = [0.9, 0.99], schedule } = {}) {
    const ps = this.parameters();
    const mats = ps.filter((p) => p.ndim >= 2), rest = ps.filter((p) => p.ndim < 2);
    const adamw = (params, wd) => new optim.AdamW(params, { lr, b1: betas[0], b2: betas[1], eps: 1e-8, weightDecay: wd });
    const group = new optim.OptimizerGroup([adamw(mats, weightDecay), adamw(rest, 0)]);
    if (schedule) group.setSchedule(schedule);
    return group;
  }

  /**
   * One training step (what `jit` captures): `batch` random windows of `data` (1-D token ids)
   * drawn on the device, the loss, backward and `opt`'s update, in training mode. Returns the
   * loss (realized), computed with the weights the step started from.
   */
  trainStep(opt, data, batch) {
    return withContext({ TRAINING: 1 }, () => tidy(() => {
      const w = randomWindows(data, batch, this.config.blockSize + 1);
      opt.zeroGrad();
      const loss = this.loss(w);
      loss.backward();
      opt.step();
      return loss.realize();
    }));
  }

  /** An empty key/value cache for `batch` sequences: per layer `[batch, nHead, blockSize, headDim]` zeros. */
  kvCache(batch) {
    if (!isCount(batch)) throw new Error(`GPT.kvCache: batch must be an integer >= 1, got ${batch}`);
    const c = this.config;
    const shape = [batch, c.nHead, c.blockSize, c.nEmbd / c.nHead];
    const zeros = () => tidy(() => Tensor.zeros(shape).contiguous().realize());
    return { keys: this.h.map(zeros), values: this.h.map(zeros) };
  }

  /**
   * One decode step: the logits `[B, vocabSize]` of the token after `tokens` `[B, 1]` at
   * position `pos` (an integer Tensor `[1]`), whose key and value go into `cache` at `pos`.
   * The position is a tensor, so every position runs the same kernels (a `jit` replays them).
   */
  decode(cache, tokens, pos) {
    const [b] = this.checkTokens("decode", tokens, 1);
    const c = this.config;
    if (!(pos instanceof Tensor) || pos.shape.length !== 1 || pos.shape[0] !== 1 || !/int/.test(pos.dtype)) {
      throw new Error(`GPT.decode: the position must be an integer Tensor of shape [1], got ${pos instanceof Tensor ? `[${pos.shape}] ${pos.dtype}` : describe(pos)}`);
    }
    const want = [b, c.nHead, c.blockSize, c.nEmbd / c.nHead].join();
    const layers = [...(cache?.keys ?? []), ...(cache?.values ?? [])];
    if (cache?.keys?.length !== c.nLayer || cache?.values?.length !== c.nLayer || layers.some((t) => !(t instanceof Tensor) || t.shape.join() !== want)) {
      throw new Error(`GPT.decode: the cache must hold ${c.nLayer} layers of keys and values [${want}] (kvCache(${b}))`);
    }
    const p = pos.cast("int32");
    let x = this.wte.forward(tokens).add(this.wpe.weight.get([p]));
    const keep = Tensor.arange(0, c.blockSize, 1, "int32").le(p);
    this.h.forEach((blk, i) => {
      x = x.add(blk.attn.decode(blk.ln_1.forward(x), cache.keys[i], cache.values[i], p, keep));
      x = x.add(blk.mlp.forward(blk.ln_2.forward(x)));
    });
    return this.logits(x).reshape([b, c.vocabSize]);
  }

  /** A `Generator` of `batch` sequences drawing tokens as `sampling` says. */
  generator(batch = 1, sampling = {}) {
    return new Generator(this, batch, sampling);
  }

  /** `batch` windows of `len` consecutive tokens of `data` (1-D) at random offsets, on the device. */
  static randomWindows(data, batch, len) {
    return randomWindows(data, batch, len);
  }

  /** The windows of `len` tokens of `data` (1-D) starting at `starts` (integers `[batch]`). */
  static windows(data, starts, len) {
    return windows(data, starts, len);
  }

  /** nanoGPT's schedule: linear warmup over `warmup` steps, then cosine decay to `lr / 10` at `steps`. */
  static cosineSchedule(lr, warmup, steps) {
    return { kind: "cosine", totalSteps: steps, warmupSteps: warmup, startFactor: 1 / (warmup + 1), minLr: lr / 10 };
  }

  /** One token per row of `logits` `[B, V]`, drawn on the device: `[B, 1]` int32. */
  static sample(logits, sampling = {}) {
    return sample(logits, sampling);
  }
}

function randomWindows(data, batch, len) {
  const op = "GPT.randomWindows";
  if (!(data instanceof Tensor) || data.ndim !== 1 || !isCount(len) || data.numel < len) {
    throw new Error(`${op}: data ${data instanceof Tensor ? `[${data.shape}]` : describe(data)} must be a 1-D Tensor of at least ${len} tokens`);
  }
  if (!isCount(batch)) throw new Error(`${op}: batch must be an integer >= 1, got ${batch}`);
  return windows(data, Tensor.randint([batch], 0, data.numel - len + 1), len);
}

/** Above this many index elements a gather from all of `data` would overflow wasm's 32-bit sizes. */
const DIRECT_GATHER_MAX = 2 ** 31;

function windows(data, starts, len) {
  const offsets = Tensor.arange(0, len, 1, "int32").unsqueeze(0);
  const s = starts.cast("int32");
  const n = data.numel, b = starts.shape[0];
  if (b * len * n < DIRECT_GATHER_MAX) return data.get([s.unsqueeze(1).add(offsets)]);
  // A long text (Shakespeare's 4.5M characters at batch 16): the gather's index would have
  // b·len·n elements, more than a 32-bit size. View the text as rows of c tokens, take each
  // window's row and the row after it (b·n elements), then the window from those 2c tokens:
  // the same windows as the direct gather.
  const c = Math.max(len, Math.ceil(Math.sqrt(n)));
  const rows = Math.ceil(n / c);
  const padded = data.pad([[0, (rows + 1) * c - n]]);
  const r = s.idiv(c), o = s.sub(r.mul(c));
  const here = padded.slice(0, 0, rows * c).reshape([rows, c]).index(r);
  const next = padded.slice(0, c, (rows + 1) * c).reshape([rows, c]).index(r);
  return Tensor.cat([here, next], 1).gather(1, o.unsqueeze(1).add(offsets));
}

function checkSampling(s, op) {
  if (s === null || typeof s !== "object") throw new Error(`${op}: sampling must be an object, got ${describe(s)}`);
  const { temperature = 1, topK = null, topP = null } = s;
  if (!(typeof temperature === "number" && Number.isFinite(temperature) && temperature >= 0)) {
    throw new Error(`${op}: temperature must be a finite number >= 0, got ${temperature}`);
  }
  if (topK !== null && !isCount(topK)) throw new Error(`${op}: topK must be an integer >= 1 or null, got ${topK}`);
  if (topP !== null && !(typeof topP === "number" && topP > 0 && topP <= 1)) throw new Error(`${op}: topP must be in (0, 1] or null, got ${topP}`);
  return { temperature, topK, topP };
}

function sample(logits, sampling) {
  const op = "GPT.sample";
  const { temperature, topK, topP } = checkSampling(sampling, op);
  if (!(logits instanceof Tensor) || logits.ndim !== 2 || !logits.isFloatingPoint()) {
    throw new Error(`${op}: logits must be a float Tensor [batch, vocab], got ${logits instanceof Tensor ? `[${logits.shape}] ${logits.dtype}` : describe(logits)}`);
  }
  const v = logits.shape[1];
  if (temperature === 0) return logits.argmax(-1, true).cast("int32");
  let l = logits.div(temperature);
  if (topK !== null && topK < v) {
    const kth = l.topk(topK, -1, true)[0].slice(-1, topK - 1, topK);
    l = l.lt(kth).where(-Infinity, l);
  }
  const probs = l.softmax(-1);
  if (topP !== null && topP < 1) {
    const [sorted, order] = probs.sort(-1, true);
    const before = sorted.cumsum(-1).sub(sorted);
    const kept = before.lt(topP).where(sorted, 0);
    return order.gather(-1, kept.multinomial(1, true));
  }
  return probs.multinomial(1, true);
}

/**
 * Autoregressive generation with a key/value cache: the decode step (`GPT.decode`, then
 * `GPT.sample`) is a `jit` whose inputs are the tokens `[B, 1]` and the position `[1]`, so from
 * the third token on every token replays the same launches. When the context is full the
 * window slides as in Rust's `Generator`: the cache restarts from the last `blockSize / 2`
 * tokens, decoded again at positions `0..`.
 */
export class Generator {
  constructor(gpt, batch = 1, sampling = {}) {
    const op = "Generator";
    if (!(gpt instanceof GPT)) throw new Error(`${op}: expected a GPT, got ${describe(gpt)}`);
    if (!isCount(batch)) throw new Error(`${op}: batch must be an integer >= 1, got ${batch}`);
    const s = checkSampling(sampling, op);
    this.batch = batch;
    this.blockSize = gpt.config.blockSize;
    this.vocabSize = gpt.config.vocabSize;
    this.cache = gpt.kvCache(batch);
    this.stepFn = jit((tokens, pos) => withContext({ NO_GRAD: 1 }, () => tidy(() => {
      const logits = gpt.decode(this.cache, tokens, pos);
      return [sample(logits, s), logits];
    })));
    /** The next position to write (the tokens in the context). */
    this.pos = 0;
    this.context = Array.from({ length: batch }, () => []);
  }

  /** Launches one replayed step makes (0 before the step is captured). */
  get launches() {
    return this.stepFn.launches;
  }

  /** The captured decode step's kernels (for an inspector). */
  kernels() {
    return this.stepFn.kernels();
  }

  /** Forget the context. */
  reset() {
    this.pos = 0;
    this.context.forEach((r) => (r.length = 0));
  }

  /** Free the cache and the captured step now. */
  dispose() {
    [...this.cache.keys, ...this.cache.values].forEach((t) => t.dispose());
    this.stepFn.dispose();
  }

  /**
   * Decode one token per row at the current position (sliding the window first if the context
   * is full). Returns `[next tokens [B, 1] int32, logits [B, vocab]]`, in the step's output
   * buffers: read them before the next step (and dispose the handles).
   */
  step(tokens) {
    const ok = (t) => Number.isInteger(t) && t >= 0 && t < this.vocabSize;
    if (!Array.isArray(tokens) || tokens.length !== this.batch || !tokens.every(ok)) {
      throw new Error(`Generator.step: expected ${this.batch} token ids in 0..${this.vocabSize - 1}, got ${Array.isArray(tokens) ? `[${tokens.slice(0, 8)}${tokens.length > 8 ? ", ..." : ""}]` : describe(tokens)}`);
    }
    if (this.pos === this.blockSize) {
      const keep = this.blockSize >> 1;
      const old = this.context;
      this.context = Array.from({ length: this.batch }, () => []);
      this.pos = 0;
      for (let j = this.blockSize - keep; j < this.blockSize; j++) this.rawStep(old.map((r) => r[j])).forEach((t) => t.dispose());
    }
    return this.rawStep(tokens);
  }

  rawStep(tokens) {
    const t = new Tensor(Int32Array.from(tokens), [this.batch, 1], "int32");
    const p = new Tensor(Int32Array.of(this.pos), [1], "int32");
    try {
      const out = this.stepFn(t, p);
      this.context.forEach((r, i) => r.push(tokens[i]));
      this.pos++;
      return out;
    } finally {
      t.dispose();
      p.dispose();
    }
  }

  /**
   * Feed `prompt` (token ids, the same for every row; at least one) and generate `n` tokens per
   * row, calling `onToken(tokens)` with each step's tokens (one per row) as they arrive.
   * Resolves to the generated tokens per row.
   */
  async generate(prompt, n, onToken = () => {}) {
    if (!Array.isArray(prompt) || prompt.length === 0) throw new Error("Generator.generate: the prompt must be a non-empty array of token ids");
    if (!isCount(n, 0)) throw new Error(`Generator.generate: n must be an integer >= 0, got ${n}`);
    for (const tok of prompt.slice(0, -1)) this.step(Array(this.batch).fill(tok)).forEach((t) => t.dispose());
    let next = Array(this.batch).fill(prompt.at(-1));
    const out = Array.from({ length: this.batch }, () => []);
    for (let i = 0; i < n; i++) {
      const [tokens, logits] = this.step(next);
      logits.dispose();
      try {
        next = Array.from(await tokens.data());
      } finally {
        tokens.dispose();
      }
      next.forEach((t, r) => out[r].push(t));
      onToken(next);
    }
    return out;
  }
}

/**
 * A character-level tokenizer: the vocabulary is every character (code point) of `text`, in
 * code-point order (for ASCII text the order of Rust's `examples/gpt.rs`).
 */
export class CharTokenizer {
  constructor(text) {
    if (typeof text !== "string") throw new Error(`CharTokenizer: expected a string, got ${describe(text)}`);
    const set = new Set();
    for (const ch of text) set.add(ch);
    if (set.size === 0) throw new Error("CharTokenizer: the text is empty");
    /** The characters, token id order. */
    this.chars = [...set].sort((a, b) => a.codePointAt(0) - b.codePointAt(0));
    this.ids = new Map(this.chars.map((c, i) => [c, i]));
  }
  get vocabSize() {
    return this.chars.length;
  }
  /** Token ids of `text` (a Uint8Array for vocabularies up to 256, else an Int32Array). */
  encode(text) {
    if (typeof text !== "string") throw new Error(`CharTokenizer.encode: expected a string, got ${describe(text)}`);
    const out = [];
    for (const ch of text) {
      const id = this.ids.get(ch);
      if (id === undefined) throw new Error(`CharTokenizer.encode: the character ${JSON.stringify(ch)} is not in the vocabulary`);
      out.push(id);
    }
    return this.vocabSize <= 256 ? Uint8Array.from(out) : Int32Array.from(out);
  }
  /** The text of token ids. */
  decode(ids) {
    let s = "";
    for (const id of ids) s += this.chars[id] ?? "\uFFFD";
    return s;
  }
}

// The demo's GPT task (www/train_worker.js runs it): a tiny character-level GPT (the package's
// `GPT`, the model of Rust's `nn::gpt`) trained on Shakespeare (data/shakespeare, made by
// scripts/data.sh) or on text the user pastes (split 90/10 into training and validation), with
// nanoGPT's optimizer (AdamW, weight decay 0.1 on the matrices, betas 0.9/0.99) after a linear
// warmup. Its validation loss is the mean loss over fixed windows of the validation text (a
// captured no-grad step), and samples stream while it trains: after each chunk of steps the
// worker decodes tokens for `sampleMs` milliseconds (after the first, which waits for the
// queued steps) with the key/value-cache decode step that `jit` replays (temperature and top-k
// applied on the device), posting the text as it grows. Bad text (empty, too short for the context, too large, too many distinct characters)
// is an error that names the problem, shown on the page.

import { Tensor, GPT, CharTokenizer, jit, tidy, withContext } from "../js/wgrad.js";

const TEXT = "../data/shakespeare/";
/** The largest text the page trains on, in characters. */
export const MAX_CHARS = 10_000_000;
/** The most distinct characters: the model's vocabulary (a character model, not a word model). */
export const MAX_VOCAB = 1024;
/** Windows of the validation text in each validation loss. */
const EVAL_WINDOWS = 32;
/** Steps of linear warmup of the learning rate (from a tenth). */
const WARMUP = 20;

const post = (m) => self.postMessage(m);
const status = (text) => post({ type: "status", text });

async function fetchText(name) {
  const res = await fetch(TEXT + name);
  if (!res.ok) throw new Error(`${TEXT}${name}: HTTP ${res.status} (run bash scripts/data.sh)`);
  return res.text();
}

/** The training and validation text: Shakespeare's, or the user's split 90/10. */
async function texts(config) {
  const block = config.block;
  if (config.source !== "own") {
    status("loading Shakespeare…");
    const [train, val] = await Promise.all([fetchText("train.txt"), fetchText("val.txt")]);
    return { train: [...train], val: [...val], what: "Shakespeare" };
  }
  const text = config.text;
  if (typeof text !== "string" || text.length === 0) throw new Error("your text: the text box is empty: paste some text to train on");
  if (text.length > MAX_CHARS) {
    throw new Error(`your text: ${text.length.toLocaleString("en")} characters is more than the ${MAX_CHARS.toLocaleString("en")} this page trains on`);
  }
  const chars = [...text];
  const need = 2 * (block + 1);
  if (chars.length < need) {
    throw new Error(`your text: ${chars.length} character${chars.length === 1 ? "" : "s"} is too short for a context of ${block}: ` +
      `at least ${need} are needed (a tenth, at least ${block + 1}, is kept to validate)`);
  }
  const nVal = Math.max(block + 1, Math.floor(chars.length / 10));
  return { train: chars.slice(0, chars.length - nVal), val: chars.slice(chars.length - nVal), what: "your text" };
}

export const gptTask = {
  checkpointKey: "checkpoint-gpt",
  runKeys: ["source", "text", "nLayer", "nHead", "nEmbd", "block"],
  small: "use a small model and batch",
  async setup(config) {
    const t = await texts(config);
    const tok = new CharTokenizer(t.train.join("") + t.val.join(""));
    if (tok.vocabSize > MAX_VOCAB) {
      throw new Error(`${t.what}: ${tok.vocabSize} distinct characters; a character model here takes at most ${MAX_VOCAB}`);
    }
    const encode = (chars) => {
      const ids = tok.vocabSize <= 256 ? new Uint8Array(chars.length) : new Int32Array(chars.length);
      chars.forEach((c, i) => (ids[i] = tok.ids.get(c)));
      return new Tensor(ids, [ids.length], tok.vocabSize <= 256 ? "uint8" : "int32");
    };
    const train = encode(t.train), val = encode(t.val);
    Tensor.manualSeed(config.seed);
    const gpt = new GPT({ vocabSize: tok.vocabSize, blockSize: config.block, nLayer: config.nLayer, nHead: config.nHead, nEmbd: config.nEmbd });
    const opt = gpt.configureOptimizers({
      weightDecay: 0.1, lr: config.lr, betas: [0.9, 0.99],
      schedule: { kind: "linear", startFactor: 0.1, endFactor: 1, totalSteps: WARMUP },
    });
    // Windows spread evenly over the validation text, the same at every evaluation.
    const m = t.val.length, len = config.block + 1, w = Math.min(EVAL_WINDOWS, m - len + 1);
    const starts = new Tensor(Int32Array.from({ length: w }, (_, i) => (w === 1 ? 0 : Math.floor((i * (m - len)) / (w - 1)))), [w], "int32");
    const evalStep = jit(() => withContext({ NO_GRAD: 1 }, () => tidy(() => gpt.loss(GPT.windows(val, starts, len)).realize())));
    const params = gpt.parameters().reduce((a, p) => a + p.numel, 0);
    const data = { train, val, starts, tok, evalStep, gen: null, sample: null, samples: 0, request: null };
    status(`${t.what}: ${t.train.length.toLocaleString("en")} characters to train on, ${m.toLocaleString("en")} to validate, ` +
      `vocabulary ${tok.vocabSize}; GPT of ${params.toLocaleString("en")} parameters`);
    return {
      data, model: { layers: gpt, gpt, plain: true }, opt,
      ready: { nTrain: t.train.length, nVal: m, vocab: tok.chars.join(""), params, text: t.what },
    };
  },
  loss(S) {
    const { data, model, opt, config } = S;
    const w = GPT.randomWindows(data.train, config.bs, config.block + 1);
    opt.zeroGrad();
    const loss = model.gpt.loss(w);
    loss.backward();
    return loss;
  },
  evaluate: (S) => tidy(() => S.data.evalStep().contiguous().realize()),
  evalPoint: (step, v) => ({ step, loss: v[0] }),
  /**
   * Between chunks of training: a waiting `generate` request is served, else the streaming
   * sample grows for up to `sampleMs`.
   */
  async afterChunk(S) {
    const d = S.data;
    if (d.request || d.serving) return serve(S);
    if (!(S.config.sampleMs > 0)) return;
    if (!d.sample || d.sample.left === 0) startSample(S, {});
    await grow(S, S.config.sampleMs);
  },
  /** When training stops: a `generate` request still waiting is served. */
  idle: (S) => serve(S),
  ops: {
    /**
     * Generate `n` characters after `prompt` (default a newline) with `temperature` and `topK`
     * (defaults: the page's). While training, the loop serves it between chunks; resolves to
     * `{ text, prompt, step, launches }` when the last character is there. The text streams
     * meanwhile as "sample" messages.
     */
    generate({ S, running }, opts = {}) {
      if (opts === null || typeof opts !== "object") throw new Error("generate: expected { prompt, n, temperature, topK }");
      return new Promise((ok, fail) => {
        const req = { opts, ok, fail };
        if (S.data.request) S.data.request.fail(new Error("generate: replaced by a newer request"));
        S.data.request = req;
        if (!running) serve(S);
      });
    },
  },
  dispose(S) {
    const d = S.data;
    d.request?.fail(new Error("generate: the session ended"));
    for (const t of [d.train, d.val, d.starts]) t.dispose();
    d.evalStep.dispose();
    d.gen?.dispose();
    S.model.gpt.dispose();
  },
};

/** Serve the waiting `generate` requests, one at a time (a newer request ends an older one). */
async function serve(S) {
  const d = S.data;
  if (d.serving) return;
  d.serving = true;
  try {
    while (d.request) {
      const req = d.request;
      try {
        startSample(S, req.opts);
        while (d.sample.left > 0 && d.request === req) await grow(S, Infinity);
        if (d.request !== req) continue;
        d.request = null;
        const s = d.sample;
        req.ok({ text: s.text, prompt: s.prompt, step: s.step, launches: d.gen.launches });
      } catch (e) {
        if (d.request === req) d.request = null;
        req.fail(e);
      }
    }
  } finally {
    d.serving = false;
  }
}

/** Begin a sample: a generator for these settings (captured once per setting), the prompt fed. */
function startSample(S, opts) {
  const d = S.data, c = S.config;
  const temperature = opts.temperature ?? c.temperature;
  const topK = (opts.topK ?? c.topK) > 0 ? (opts.topK ?? c.topK) : null;
  const n = opts.n ?? c.sampleLen;
  if (!(Number.isInteger(n) && n >= 1 && n <= 5000)) throw new Error(`generate: n must be an integer from 1 to 5000, got ${n}`);
  const nl = d.tok.ids.has("\n") ? "\n" : d.tok.chars[0];
  const prompt = typeof opts.prompt === "string" && opts.prompt.length > 0 ? opts.prompt : nl;
  if (prompt.length > 10_000) throw new Error(`generate: the prompt has ${prompt.length} characters; at most 10,000`);
  const unknown = [...prompt].find((ch) => !d.tok.ids.has(ch));
  if (unknown !== undefined) throw new Error(`generate: the character ${JSON.stringify(unknown)} is not in the vocabulary of this text`);
  const key = `${temperature}/${topK}`;
  if (!d.gen || d.genKey !== key) {
    d.gen?.dispose();
    d.gen = null;
    d.gen = S.model.gpt.generator(1, { temperature, topK });
    d.genKey = key;
  }
  d.gen.reset();
  // A streaming sample cut short by a request ends here.
  if (d.sample?.left > 0) post({ type: "sample", id: d.sample.id, step: d.sample.step, prompt: d.sample.prompt, text: " [cut short]", done: true });
  const ids = [...d.tok.encode(prompt)];
  d.sample = { id: ++d.samples, step: S.step, prompt, text: "", left: n, next: ids.at(-1), feed: ids.slice(0, -1) };
  post({ type: "sample", id: d.sample.id, step: S.step, prompt, text: "", done: false });
}

/**
 * Decode tokens of the sample in progress for `ms` after the first one arrives (that one waits
 * for the steps still queued on the device; the rest decode at the replayed step's speed).
 */
async function grow(S, ms) {
  const d = S.data, s = d.sample;
  let t0 = null;
  // The prompt's tokens before the last only fill the cache.
  while (s.feed.length) d.gen.step([s.feed.shift()]).forEach((t) => t.dispose());
  let text = "";
  do {
    const [tok, logits] = d.gen.step([s.next]);
    logits.dispose();
    try {
      s.next = (await tok.data())[0];
    } finally {
      tok.dispose();
    }
    t0 ??= performance.now();
    text += d.tok.decode([s.next]);
    s.left--;
  } while (s.left > 0 && performance.now() - t0 < ms);
  s.text += text;
  post({ type: "sample", id: s.id, step: s.step, prompt: s.prompt, text, done: s.left === 0 });
}

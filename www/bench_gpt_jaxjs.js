// The jax-js GPT benchmark page's script: the training step of www/bench_gpt.js (js/gpt.js's GPT:
// token and position embeddings, pre-LayerNorm blocks of causal self-attention and a tanh-GELU
// MLP, no biases, a final LayerNorm, the output layer tied to the token embedding; AdamW with
// betas (0.9, 0.99), eps 1e-8, weight decay 0.1 on the matrices, a constant learning rate) on
// windows drawn at random offsets of the same random token stream, written as a jax-js user
// would: the whole step (drawing the batch, forward, backward, AdamW) is one `jit`-ted function
// of (params, moments, data, key, bias corrections), attention is `nn.dotProductAttention` with
// `isCausal`. 3 warm-up steps, then `steps` timed steps, each timed until `await loss.data()`.
// Prints the device and median and min ms/step, sets `window.benchResult` and logs
// "BENCH {json}" (or "BENCH_ERROR message"). Knobs in the URL: www/bench_gpt_common.js's, and
// `backend` ("webgpu", or "wasm": jax-js's WebAssembly backend).

import { init, defaultDevice, jit, nn, numpy as np, random, tree, valueAndGrad } from "@jax-js/jax";
import { adapterName, log, median, report, runBench } from "./bench_common.js";
import { knobs as k, randomTokens, describeModel } from "./bench_gpt_common.js";

const BACKEND = new URLSearchParams(location.search).get("backend") ?? "webgpu";
const N = 1 << 16, B1 = 0.9, B2 = 0.99, EPS = 1e-8, WD = 0.1;
const C = k.nEmbd, H = k.nHead, D = C / H, T = k.block, V = k.vocab;

/** The parameters' names, shapes and initial standard deviations (0: ones, a LayerNorm's weight). */
function layout() {
  const proj = 0.02 / Math.sqrt(2 * k.nLayer);
  const out = [["wte", [V, C], 0.02], ["wpe", [T, C], 0.02]];
  for (let i = 0; i < k.nLayer; i++) {
    out.push([`h${i}.ln1`, [C], 0], [`h${i}.attn`, [C, 3 * C], 0.02], [`h${i}.proj`, [C, C], proj],
      [`h${i}.ln2`, [C], 0], [`h${i}.fc`, [C, 4 * C], 0.02], [`h${i}.fcProj`, [4 * C, C], proj]);
  }
  out.push(["lnf", [C], 0]);
  return out;
}

const layerNorm = (x, w) => nn.standardize(x, -1, { epsilon: 1e-5 }).mul(w);

/** Logits [B, T, V] of tokens [B, T] (every array argument is consumed, as jax-js wants). */
function forward(p, idx) {
  const b = idx.shape[0];
  let x = np.take(p.wte.ref, idx, 0).add(p.wpe);
  for (let i = 0; i < k.nLayer; i++) {
    const qkv = np.matmul(layerNorm(x.ref, p[`h${i}.ln1`]), p[`h${i}.attn`]);
    const [q, kk, v] = np.split(qkv, 3, -1).map((z) => z.reshape([b, T, H, D]));
    const y = nn.dotProductAttention(q, kk, v, { isCausal: true }).reshape([b, T, C]);
    x = x.add(np.matmul(y, p[`h${i}.proj`]));
    const m = nn.gelu(np.matmul(layerNorm(x.ref, p[`h${i}.ln2`]), p[`h${i}.fc`]), { approximate: true });
    x = x.add(np.matmul(m, p[`h${i}.fcProj`]));
  }
  return np.matmul(layerNorm(x, p.lnf), p.wte.transpose());
}

function lossFn(p, x, y) {
  const logp = nn.logSoftmax(forward(p, x), -1);
  return logp.mul(nn.oneHot(y, V)).sum().mul(-1 / (k.bs * T));
}

/** AdamW (decoupled weight decay, as torch.optim.AdamW) on one tensor: [weight, m, v]. */
function adamw(w, g, m, v, c1, c2, wd) {
  const m2 = m.mul(B1).add(g.ref.mul(1 - B1));
  const v2 = v.mul(B2).add(g.ref.mul(g).mul(1 - B2));
  const upd = m2.ref.mul(c1).div(np.sqrt(v2.ref.mul(c2)).add(EPS));
  return [w.mul(1 - k.lr * wd).sub(upd.mul(k.lr)), m2, v2];
}

async function main() {
  if (BACKEND === "webgpu" && !navigator.gpu) throw new Error("navigator.gpu is missing: no WebGPU in this browser");
  const devices = await init(BACKEND);
  if (!devices.includes(BACKEND)) throw new Error(`jax-js could not start its ${BACKEND} device (devices: ${devices})`);
  defaultDevice(BACKEND);
  const adapter = BACKEND === "webgpu" ? await adapterName() : null;
  log(`jax-js, device ${defaultDevice()}${adapter ? `, adapter ${adapter}` : ""}; ${describeModel(k)}; ${k.steps} timed steps`);

  const specs = layout();
  const ks = random.split(random.key(42), specs.length);
  let params = {}, mom = {}, vel = {};
  specs.forEach(([name, shape, std], i) => {
    const key = ks.ref.slice(i);
    params[name] = std === 0 ? (key.dispose(), np.ones(shape)) : random.normal(key, shape).mul(std);
    mom[name] = np.zeros(shape);
    vel[name] = np.zeros(shape);
  });
  ks.dispose();
  const decay = Object.fromEntries(specs.map(([name, shape]) => [name, shape.length >= 2 ? WD : 0]));
  const data = np.array(Int32Array.from(randomTokens(N, V)), { dtype: np.int32 });

  const step = jit((p, m, v, tokens, key, c1, c2) => {
    const starts = random.randint(key, { minval: 0, maxval: N - T, shape: [k.bs, 1], dtype: np.int32 });
    const w = np.take(tokens, starts.add(np.arange(0, T + 1, 1, { dtype: np.int32 })), 0);
    const [loss, g] = valueAndGrad(lossFn)(tree.ref(p), w.ref.slice([], [0, T]), w.slice([], [1, T + 1]));
    const out = [{}, {}, {}];
    for (const name of Object.keys(p)) {
      const r = adamw(p[name], g[name], m[name], v[name], c1.ref, c2.ref, decay[name]);
      r.forEach((t, j) => (out[j][name] = t));
    }
    c1.dispose();
    c2.dispose();
    return [loss, ...out];
  });

  let key = random.key(7);
  const times = [];
  const result = { engine: "jax-js", backend: defaultDevice(), adapter, ...k };
  for (let i = 0; i < k.steps + k.warmup; i++) {
    const t0 = performance.now();
    const ks2 = random.split(key, 2);
    key = ks2.ref.slice(0);
    const c1 = np.array(1 / (1 - B1 ** (i + 1))), c2 = np.array(1 / (1 - B2 ** (i + 1)));
    const [loss, p2, m2, v2] = step(params, mom, vel, data.ref, ks2.slice(1), c1, c2);
    [params, mom, vel] = [p2, m2, v2];
    const val = (await loss.data())[0];
    const ms = performance.now() - t0;
    if (i === 0) result.firstStepMs = +ms.toFixed(1);
    if (i >= k.warmup) times.push(ms);
    log(`step ${i}: loss ${val.toFixed(4)}, ${ms.toFixed(1)} ms`);
    if (!Number.isFinite(val)) throw new Error(`the loss is ${val} at step ${i}`);
  }
  result.msPerStep = +median(times).toFixed(1);
  result.minMs = +Math.min(...times).toFixed(1);
  log(`jax-js ${defaultDevice()}: median ${result.msPerStep} ms/step, min ${result.minMs} ms`);
  report(result);
}

runBench(main);

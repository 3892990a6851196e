// The jax-js benchmark page's script: the same training step as www/bench.js (the tutorial's CNN
// Conv2d(1,32,3) → relu → maxPool2d(2) → Conv2d(32,64,3) → relu → maxPool2d(2) → flatten →
// dropout(0.5) → Linear(1600,10), sparse categorical cross-entropy, SGD lr 0.01; a batch sampled
// with random indices from 1024 random uint8 images) in jax-js on its WebGPU (or Wasm) device. The whole
// step (sampling, forward, backward, update) is one `jit`-ted function of (params, key), as a
// jax user would write it; the key is split outside, like `jax.random.split` in a training loop.
// 3 warm-up steps (the first traces and compiles), then `steps` timed steps, each timed until
// `await loss.data()`. Prints the adapter and median and min ms/step, sets `window.benchResult`
// and logs "BENCH {json}" (or "BENCH_ERROR message"). Query knobs: bs (128), steps (5), backend
// ("webgpu", or "wasm": jax-js's WebAssembly backend, multi-threaded where the page is
// cross-origin isolated).

import { init, defaultDevice, jit, lax, nn, numpy as np, random, tree, valueAndGrad } from "@jax-js/jax";
import { adapterName, log, median, report, runBench } from "./bench_common.js";

const q = new URLSearchParams(location.search);
const BS = Number(q.get("bs") ?? 128), STEPS = Number(q.get("steps") ?? 5), WARMUP = 3;
const BACKEND = q.get("backend") ?? "webgpu";
const N = 1024, LR = 0.01;

const maxPool2 = (x) => lax.reduceWindow(x, np.max, [2, 2], [2, 2]);

/** The model's logits for a batch [B,1,28,28] (jax-js takes ownership of every argument). */
function forward(p, x, keep) {
  let h = lax.conv(x, p.w1, [1, 1], "VALID").add(p.b1);
  h = maxPool2(nn.relu(h));
  h = lax.conv(h, p.w2, [1, 1], "VALID").add(p.b2);
  h = maxPool2(nn.relu(h)).reshape([-1, 1600]);
  h = h.mul(keep).mul(2); // dropout 0.5
  return np.dot(h, p.w3).add(p.b3);
}

function lossFn(p, x, y, keep) {
  const logp = nn.logSoftmax(forward(p, x, keep), -1);
  return logp.mul(nn.oneHot(y, 10)).sum().mul(-1 / BS);
}

async function main() {
  if (BACKEND === "webgpu" && !navigator.gpu) throw new Error("navigator.gpu is missing: no WebGPU in this browser");
  const devices = await init(BACKEND);
  if (!devices.includes(BACKEND)) throw new Error(`jax-js could not start its ${BACKEND} device (devices: ${devices})`);
  defaultDevice(BACKEND);
  const adapter = await adapterName();
  log(`jax-js, device ${defaultDevice()}${adapter ? `, adapter ${adapter}` : ""}, batch ${BS}, ${STEPS} timed steps`);

  // Uniform(-1/sqrt(fan_in), 1/sqrt(fan_in)) weights and biases, as tinygrad's layers.
  const ks = random.split(random.key(42), 8);
  const [k1, k2, k3, k4, k5, k6, kx, ky] = Array.from({ length: 8 }, (_, i) => ks.ref.slice(i));
  ks.dispose();
  const uni = (k, shape, fanIn) => random.uniform(k, shape, { minval: -1 / Math.sqrt(fanIn), maxval: 1 / Math.sqrt(fanIn) });
  let params = {
    w1: uni(k1, [32, 1, 3, 3], 9), b1: uni(k2, [32, 1, 1], 9),
    w2: uni(k3, [64, 32, 3, 3], 288), b2: uni(k4, [64, 1, 1], 288),
    w3: uni(k5, [1600, 10], 1600), b3: uni(k6, [10], 1600),
  };
  // The dataset: random uint8 images and labels.
  const xAll = random.randint(kx, { minval: 0, maxval: 256, shape: [N, 1, 28, 28], dtype: np.uint8 });
  const yAll = random.randint(ky, { minval: 0, maxval: 10, shape: [N], dtype: np.int32 });

  const step = jit((p, xs, ys, key) => {
    const [ki, kd] = [key.ref.slice(0), key.slice(1)];
    const s = random.randint(ki, { minval: 0, maxval: N, shape: [BS], dtype: np.int32 });
    const x = np.take(xs, s.ref, 0).astype(np.float32), y = np.take(ys, s, 0);
    const keep = random.bernoulli(kd, 0.5, [BS, 1600]).astype(np.float32);
    const [loss, g] = valueAndGrad(lossFn)(tree.ref(p), x, y, keep);
    return [loss, tree.map((w, dw) => w.sub(dw.mul(LR)), p, g)];
  });

  let key = random.key(7);
  const times = [];
  for (let i = 0; i < STEPS + WARMUP; i++) {
    const t0 = performance.now();
    const ks2 = random.split(key, 2);
    key = ks2.ref.slice(0);
    const [loss, next] = step(params, xAll.ref, yAll.ref, random.split(ks2.slice(1), 2));
    params = next;
    const v = (await loss.data())[0];
    const ms = performance.now() - t0;
    if (i >= WARMUP) times.push(ms);
    log(`step ${i}: loss ${v.toFixed(4)}, ${ms.toFixed(1)} ms`);
    if (!Number.isFinite(v)) throw new Error(`the loss is ${v} at step ${i}`);
  }
  const result = {
    engine: "jax-js", backend: defaultDevice(), adapter, bs: BS, steps: STEPS,
    msPerStep: +median(times).toFixed(1), minMs: +Math.min(...times).toFixed(1),
  };
  log(`jax-js webgpu: median ${result.msPerStep} ms/step, min ${result.minMs} ms`);
  report(result);
}

runBench(main);

// The tfjs benchmark page's script: the same training step as www/bench.js (the tutorial's CNN
// Conv2d(1,32,3) → relu → maxPool2d(2) → Conv2d(32,64,3) → relu → maxPool2d(2) → flatten →
// dropout(0.5) → Linear(1600,10), sparse categorical cross-entropy, SGD lr 0.01; a batch sampled
// with random indices from 1024 random uint8 images) in TensorFlow.js on its WebGPU backend.
// tfjs convolutions are NHWC, so images are [N,28,28,1]; shapes and FLOPs are otherwise the
// same. 3 warm-up steps, then `steps` timed steps, each timed until `await loss.data()`. Prints
// the adapter and median and min ms/step, sets `window.benchResult` and logs "BENCH {json}" (or
// "BENCH_ERROR message"). Query knobs: bs (128), steps (5).

import * as tf from "@tensorflow/tfjs-core";
import "../node_modules/@tensorflow/tfjs-backend-webgpu/dist/tf-backend-webgpu.fesm.min.js";
import { adapterName, log, median, report, runBench } from "./bench_common.js";

const q = new URLSearchParams(location.search);
const BS = Number(q.get("bs") ?? 128), STEPS = Number(q.get("steps") ?? 5), WARMUP = 3;
const N = 1024;

async function main() {
  if (!navigator.gpu) throw new Error("navigator.gpu is missing: no WebGPU in this browser");
  if (!(await tf.setBackend("webgpu"))) throw new Error("tfjs could not initialise its WebGPU backend");
  await tf.ready();
  if (tf.getBackend() !== "webgpu") throw new Error(`tfjs runs on ${tf.getBackend()}, not webgpu`);
  const adapter = await adapterName();
  log(`tfjs ${tf.version_core}, backend ${tf.getBackend()}${adapter ? `, adapter ${adapter}` : ""}, batch ${BS}, ${STEPS} timed steps`);

  // Uniform(-1/sqrt(fan_in), 1/sqrt(fan_in)) weights and biases, as tinygrad's layers.
  const uni = (shape, fanIn) => tf.variable(tf.randomUniform(shape, -1 / Math.sqrt(fanIn), 1 / Math.sqrt(fanIn), "float32"));
  const w1 = uni([3, 3, 1, 32], 9), b1 = uni([32], 9);
  const w2 = uni([3, 3, 32, 64], 288), b2 = uni([64], 288);
  const w3 = uni([1600, 10], 1600), b3 = uni([10], 1600);
  const model = (x) => {
    let h = tf.maxPool(tf.relu(tf.add(tf.conv2d(x, w1, 1, "valid"), b1)), 2, 2, "valid");
    h = tf.maxPool(tf.relu(tf.add(tf.conv2d(h, w2, 1, "valid"), b2)), 2, 2, "valid");
    h = tf.dropout(tf.reshape(h, [-1, 1600]), 0.5);
    return tf.add(tf.matMul(h, w3), b3);
  };
  const opt = tf.train.sgd(0.01);

  // The dataset: random uint8 images (held as int32, tfjs has no uint8 tensors) and labels.
  const px = new Int32Array(N * 28 * 28), lb = new Int32Array(N);
  for (let i = 0; i < px.length; i++) px[i] = (Math.random() * 256) | 0;
  for (let i = 0; i < N; i++) lb[i] = (Math.random() * 10) | 0;
  const xAll = tf.tensor4d(px, [N, 28, 28, 1], "int32"), yAll = tf.tensor1d(lb, "int32");

  const step = () => opt.minimize(() => {
    const s = tf.randomUniform([BS], 0, N, "int32");
    const x = tf.cast(tf.gather(xAll, s), "float32"), y = tf.gather(yAll, s);
    return tf.losses.softmaxCrossEntropy(tf.oneHot(y, 10), model(x));
  }, true, [w1, b1, w2, b2, w3, b3]);

  const times = [];
  for (let i = 0; i < STEPS + WARMUP; i++) {
    const t0 = performance.now();
    const loss = step();
    const v = (await loss.data())[0];
    loss.dispose();
    const ms = performance.now() - t0;
    if (i >= WARMUP) times.push(ms);
    log(`step ${i}: loss ${v.toFixed(4)}, ${ms.toFixed(1)} ms, ${tf.memory().numTensors} live tensors`);
  }
  const result = {
    engine: "tfjs", version: tf.version_core, backend: tf.getBackend(), adapter, bs: BS, steps: STEPS,
    msPerStep: +median(times).toFixed(1), minMs: +Math.min(...times).toFixed(1), liveTensors: tf.memory().numTensors,
  };
  log(`tfjs webgpu: median ${result.msPerStep} ms/step, min ${result.minMs} ms`);
  report(result);
}

runBench(main);

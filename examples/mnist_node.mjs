// The tutorial in Node.js: the MNIST CNN of examples/mnist.rs (Conv2d(1,32,3) → relu → maxPool2d
// → Conv2d(32,64,3) → relu → maxPool2d → flatten → dropout(0.5) → Linear(1600,10)), Adam, a
// jitted step at batch 128, then test accuracy. Node has no WebGPU, so `init()` runs it on
// WebAssembly kernels ("wasm"). Needs the package built (bash scripts/build_web.sh) and the data
// (bash scripts/data.sh: data/mnist, 8,000 train / 2,000 test digits).
//
//   node examples/mnist_node.mjs            # 1500 steps (the tutorial's recipe)
//   STEPS=60 MIN_ACC=88 node examples/mnist_node.mjs   # a short run that fails below 88%
//
// Knobs: STEPS (1500), BS (128), SEED (42), DEVICE ("wasm"; "cpu" is the interpreter), MIN_ACC
// (exit 1 when the test accuracy ends below it).

import { readFileSync } from "node:fs";
import { init, Tensor, nn, optim, jit, tidy, withContext, getParameters, datasets } from "../js/wgrad.js";

const env = (k, d) => Number(process.env[k] ?? d);
const STEPS = env("STEPS", 1500), BS = env("BS", 128), MIN_ACC = env("MIN_ACC", 0);
const dir = new URL("../data/mnist/", import.meta.url);
const file = (f) => readFileSync(new URL(f, dir));

const { device } = await init({ device: process.env.DEVICE ?? "wasm" });
const data = await datasets.mnist({
  buffers: {
    trainImages: file("train-images-idx3-ubyte.gz"),
    trainLabels: file("train-labels-idx1-ubyte.gz"),
    testImages: file("t10k-images-idx3-ubyte.gz"),
    testLabels: file("t10k-labels-idx1-ubyte.gz"),
  },
});
const [n] = data.xTrain.shape;
console.log(`${device}: ${n} training and ${data.xTest.shape[0]} test digits, batch ${BS}, ${STEPS} steps`);

Tensor.manualSeed(env("SEED", 42));
const l1 = new nn.Conv2d(1, 32, 3), l2 = new nn.Conv2d(32, 64, 3), l3 = new nn.Linear(1600, 10);
const forward = (x) =>
  l3.forward(l2.forward(l1.forward(x).relu().maxPool2d(2)).relu().maxPool2d(2).flatten(1).dropout(0.5));
const opt = optim.Adam(getParameters([l1, l2, l3]));

const step = jit(() => withContext({ TRAINING: 1 }, () => {
  const s = Tensor.randint([BS], 0, n);
  const x = data.xTrain.index(s).cast("float32"), y = data.yTrain.index(s);
  opt.zeroGrad();
  const loss = forward(x).sparseCategoricalCrossentropy(y);
  loss.backward();
  opt.step();
  return loss.realize();
}));

const t0 = performance.now();
for (let i = 0; i < STEPS; i++) {
  const loss = tidy(() => step());
  if (i % 100 === 99 || i === STEPS - 1) {
    const ms = (performance.now() - t0) / (i + 1);
    console.log(`step ${i + 1}: loss ${(await loss.item()).toFixed(3)} (${ms.toFixed(0)} ms/step)`);
  }
  loss.dispose();
}

// Test accuracy, 250 digits at a time.
let hits = 0;
const total = data.xTest.shape[0];
for (let i = 0; i < total; i += 250) {
  const h = tidy(() => withContext({ NO_GRAD: 1 }, () => {
    const end = Math.min(i + 250, total);
    const x = data.xTest.slice(0, i, end).cast("float32"), y = data.yTest.slice(0, i, end);
    return forward(x).argmax(1).eq(y).sum();
  }));
  hits += await h.item();
  h.dispose();
}
const acc = (100 * hits) / total;
console.log(`test accuracy ${acc.toFixed(2)}% after ${STEPS} steps (${((performance.now() - t0) / 1000).toFixed(0)} s)`);
if (acc < MIN_ACC) {
  console.error(`test accuracy ${acc.toFixed(2)}% is below MIN_ACC=${MIN_ACC}`);
  process.exit(1);
}

// The benchmark page's training step (www/bench.js: the tutorial's CNN, SGD lr 0.01, a batch
// sampled from 1024 random uint8 images) in Node.js, on WebAssembly kernels by default: prints
// ms per jitted step (median of the timed steps, after 3 warm-up steps) and a BENCH line. Needs
// the package built (bash scripts/build_web.sh). Knobs: BS (128), STEPS (5), DEVICE ("wasm"; "cpu"
// is the interpreter), THREADS (init's `threads`: default the cores, at most 8), DEBUG=2 (the
// last step's kernels with their times).
//
//   node scripts/bench_node.mjs

import { init, Tensor, nn, optim, jit, tidy, withContext, getParameters, setDebug } from "../js/wgrad.js";

const BS = Number(process.env.BS ?? 128), STEPS = Number(process.env.STEPS ?? 5), WARMUP = 3;
const info = await init({ device: process.env.DEVICE ?? "wasm", ...(process.env.THREADS ? { threads: Number(process.env.THREADS) } : {}) });
console.log(`Node.js ${process.version}, device ${info.device}, ${info.threads} thread(s), batch ${BS}, ${STEPS} timed steps`);

Tensor.manualSeed(42);
const l1 = new nn.Conv2d(1, 32, 3), l2 = new nn.Conv2d(32, 64, 3), l3 = new nn.Linear(1600, 10);
const model = (x) =>
  l3.forward(l2.forward(l1.forward(x).relu().maxPool2d(2)).relu().maxPool2d(2).flatten(1).dropout(0.5));
const opt = optim.SGD(getParameters([l1, l2, l3]), { lr: 0.01 });
const xAll = Tensor.randint([1024, 1, 28, 28], 0, 256).cast("uint8").realize();
const yAll = Tensor.randint([1024], 0, 10).realize();
const step = jit(() => withContext({ TRAINING: 1 }, () => {
  const s = Tensor.randint([BS], 0, 1024);
  const x = xAll.index(s).cast("float32"), y = yAll.index(s);
  opt.zeroGrad();
  const loss = model(x).sparseCategoricalCrossentropy(y);
  loss.backward();
  opt.step();
  return loss.realize();
}));

const times = [];
for (let i = 0; i < WARMUP + STEPS; i++) {
  if (i === WARMUP + STEPS - 1 && Number(process.env.DEBUG ?? 0) >= 2) setDebug(2);
  const t0 = performance.now();
  const loss = tidy(() => step());
  await loss.item();
  loss.dispose();
  if (i >= WARMUP) times.push(performance.now() - t0);
}
setDebug(0);
times.sort((a, b) => a - b);
const median = times[Math.floor(times.length / 2)];
console.log(`jitted: median ${median.toFixed(1)} ms/step, min ${times[0].toFixed(1)} ms`);
console.log(`BENCH ${JSON.stringify({ device: info.device, bs: BS, steps: STEPS, msPerStep: median, minMs: times[0] })}`);

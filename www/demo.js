// The demo page's script: trains the tinygrad tutorial's MNIST CNN with Adam in the browser, a
// jitted training step (batch sampling, forward, backward and the update are all replayed), then
// evaluates test accuracy in chunks. Shows the device, loss and ms per step, accuracy and live
// memory; logs each line to the console too and ends with a line starting "DONE" (or "ERROR"),
// also left in `window.demoResult`. Query knobs: steps (100), bs (128), evalEvery (0: only at
// the end), device ("webgpu" | "cpu"; default: WebGPU when present), seed (42).

import { init, Tensor, nn, optim, datasets, jit, tidy, withContext, getParameters, globalCounters }
  from "../js/wgrad.js";

const q = new URLSearchParams(location.search);
const num = (k, d) => (q.has(k) ? Number(q.get(k)) : d);
const STEPS = num("steps", 100), BS = num("bs", 128), EVAL_EVERY = num("evalEvery", 0);
const SEED = num("seed", 42), DEVICE = q.get("device") ?? undefined;

const logEl = document.getElementById("log"), statusEl = document.getElementById("status");
const log = (s) => { console.log(s); logEl.textContent += s + "\n"; logEl.scrollTop = logEl.scrollHeight; };
const status = (s) => { statusEl.textContent = s; };
const mem = () => { const c = globalCounters(); return `${c.liveTensors} tensors, ${(c.liveBytes / 2 ** 20).toFixed(1)} MiB in ${c.liveBuffers} buffers`; };
const median = (v) => [...v].sort((a, b) => a - b)[Math.floor(v.length / 2)];

async function main() {
  status("starting the engine…");
  const info = await init(DEVICE ? { device: DEVICE } : {});
  const a = info.adapter;
  log(`device: ${info.device}` + (a ? ` (adapter "${a.name || "unnamed"}", ${a.backend}, ${a.deviceType}, driver "${a.driver}")` : ""));

  status("loading MNIST…");
  const { xTrain, yTrain, xTest, yTest } = await datasets.mnist({ baseUrl: "../data/mnist/" });
  const nTrain = xTrain.shape[0];
  log(`data: ${nTrain} train, ${xTest.shape[0]} test images; batch ${BS}, ${STEPS} steps`);

  Tensor.manualSeed(SEED);
  const l1 = new nn.Conv2d(1, 32, 3), l2 = new nn.Conv2d(32, 64, 3), l3 = new nn.Linear(1600, 10);
  const model = (x) =>
    l3.forward(l2.forward(l1.forward(x).relu().maxPool2d(2)).relu().maxPool2d(2).flatten(1).dropout(0.5));
  const opt = new optim.Adam(getParameters([l1, l2, l3]));

  // Call 1 runs this function, call 2 captures its kernels, later calls replay them.
  const trainStep = jit(() => withContext({ TRAINING: 1 }, () => {
    const s = Tensor.randint([BS], 0, nTrain);
    const x = xTrain.index(s).cast("float32"), y = yTrain.index(s);
    opt.zeroGrad();
    const loss = model(x).sparseCategoricalCrossentropy(y);
    loss.backward();
    opt.step();
    return loss.realize();
  }));

  // Test accuracy in percent, in chunks of 250 images (dropout is off outside training).
  async function evaluate() {
    const n = xTest.shape[0];
    let correct = 0;
    for (let i = 0; i < n; i += 250) {
      const end = Math.min(i + 250, n);
      const hits = tidy(() => withContext({ NO_GRAD: 1 }, () =>
        model(xTest.slice(0, i, end).cast("float32")).argmax(1).eq(yTest.slice(0, i, end)).sum()));
      correct += await hits.item();
      hits.dispose();
    }
    return (100 * correct) / n;
  }

  const times = [];
  let loss = NaN, acc = null;
  for (let i = 0; i < STEPS; i++) {
    const t0 = performance.now();
    const l = tidy(() => trainStep()); // frees the handles made while running or capturing
    loss = await l.item();
    l.dispose();
    const ms = performance.now() - t0;
    times.push(ms);
    const line = `step ${String(i + 1).padStart(4)}/${STEPS}  loss ${loss.toFixed(4)}  ${ms.toFixed(1)} ms`;
    status(line);
    if (EVAL_EVERY > 0 && (i + 1) % EVAL_EVERY === 0 && i + 1 < STEPS) {
      acc = await evaluate();
      log(`${line}  test acc ${acc.toFixed(2)}%  (${mem()})`);
    } else {
      log(line);
    }
  }
  acc = await evaluate();
  // Steps 1 and 2 run and capture the function; the median is over the replays when there are some.
  const msStep = median(times.length > 2 ? times.slice(2) : times);
  window.demoResult = { device: info.device, adapter: a?.name ?? null, steps: STEPS, bs: BS, loss, acc, msPerStep: msStep, launches: trainStep.launches };
  log(`memory: ${mem()}`);
  const done = `DONE ${STEPS} steps, batch ${BS}, on ${info.device}: loss ${loss.toFixed(4)}, test accuracy ${acc.toFixed(2)}%, median ${msStep.toFixed(1)} ms/step (${trainStep.launches} kernels per replayed step)`;
  log(done);
  status(done);
}

main().catch((e) => {
  const msg = `ERROR ${e?.message ?? e}`;
  window.demoResult = { error: String(e?.message ?? e) };
  console.error(e);
  log(msg);
  status(msg);
});

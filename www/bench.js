// The benchmark page's script, the browser twin of examples/bench_step.rs: one training step of
// the tutorial's CNN (random uint8 images and labels, batch sampled with randint, forward,
// backward, an SGD update), timed not jitted and then jitted; each step is timed until
// `await loss.item()`, so GPU work is timed to completion. Prints the adapter, median and min
// ms/step and kernels per step and the first step's time (`firstStepMs`), sets `window.benchResult` and logs "BENCH {json}" (or
// "BENCH_ERROR message"). Query knobs: bs (128), steps (5 timed, after 3 warm-up steps),
// device ("webgpu" | "cpu"; default: WebGPU when present). `long=N` instead runs N jitted steps
// with Adam, reading every loss, and checks that live tensors, buffers and bytes stay exactly flat
// after 5 warm-up steps ("LONG {json}").

import { init, Tensor, nn, optim, jit, tidy, withContext, getParameters, globalCounters }
  from "../js/wgrad.js";
import { log, median, report, runBench } from "./bench_common.js";

const q = new URLSearchParams(location.search);
const BS = Number(q.get("bs") ?? 128), STEPS = Number(q.get("steps") ?? 5), WARMUP = 3;
const DEVICE = q.get("device") ?? undefined;
const LONG = Number(q.get("long") ?? 0);

async function main() {
  const info = await init(DEVICE ? { device: DEVICE } : {});
  const adapter = info.adapter ? `${info.adapter.name || "unnamed adapter"} (${info.adapter.backend}, ${info.adapter.deviceType})` : null;
  log(`device ${info.device}${adapter ? `, adapter ${adapter}` : ""}, batch ${BS}, ${STEPS} timed steps`);

  Tensor.manualSeed(42);
  const l1 = new nn.Conv2d(1, 32, 3), l2 = new nn.Conv2d(32, 64, 3), l3 = new nn.Linear(1600, 10);
  const model = (x) =>
    l3.forward(l2.forward(l1.forward(x).relu().maxPool2d(2)).relu().maxPool2d(2).flatten(1).dropout(0.5));
  const params = getParameters([l1, l2, l3]);
  const opt = LONG > 0 ? optim.Adam(params, { lr: 0.001 }) : optim.SGD(params, { lr: 0.01 });
  const xAll = Tensor.randint([1024, 1, 28, 28], 0, 256).cast("uint8").realize();
  const yAll = Tensor.randint([1024], 0, 10).realize();

  const step = () => withContext({ TRAINING: 1 }, () => {
    const s = Tensor.randint([BS], 0, 1024);
    const x = xAll.index(s).cast("float32"), y = yAll.index(s);
    opt.zeroGrad();
    const loss = model(x).sparseCategoricalCrossentropy(y);
    loss.backward();
    opt.step();
    return loss.realize();
  });
  const jitted = jit(step);
  if (LONG > 0) return longRun(jitted, info, adapter);

  const result = { device: info.device, threads: info.threads, adapter, bs: BS, steps: STEPS };
  for (const [name, fn] of [["notJitted", step], ["jitted", jitted]]) {
    const times = [];
    let kernels = 0;
    for (let i = 0; i < STEPS + WARMUP; i++) {
      const t0 = performance.now();
      const k0 = globalCounters().kernelCount;
      const loss = tidy(() => fn());
      kernels = globalCounters().kernelCount - k0;
      const v = await loss.item();
      loss.dispose();
      const ms = performance.now() - t0;
      if (i >= WARMUP) times.push(ms);
      // The first step plans, compiles and runs every kernel: the wait before training starts.
      if (i === 0 && name === "notJitted") result.firstStepMs = +ms.toFixed(1);
      log(`${name} step ${i}: loss ${v.toFixed(4)}, ${ms.toFixed(1)} ms, ${kernels} kernels`);
    }
    result[name] = { msPerStep: +median(times).toFixed(1), minMs: +Math.min(...times).toFixed(1), kernelsPerStep: kernels };
  }
  const c = globalCounters();
  result.liveTensors = c.liveTensors;
  result.liveBytes = c.liveBytes;
  log(`not jitted: median ${result.notJitted.msPerStep} ms/step, ${result.notJitted.kernelsPerStep} kernels/step`);
  log(`jitted:     median ${result.jitted.msPerStep} ms/step, ${result.jitted.kernelsPerStep} kernels/step`);
  report(result);
}

/** `long=N`: memory after every step of a long jitted run. */
async function longRun(jitted, info, adapter) {
  const t0 = performance.now();
  let flat = null, first = null, last = null, changed = null;
  for (let i = 0; i < LONG; i++) {
    const loss = tidy(() => jitted());
    last = await loss.item();
    loss.dispose();
    if (i === 0) first = last;
    if (!Number.isFinite(last)) throw new Error(`step ${i}: loss ${last}`);
    const c = globalCounters();
    const now = [c.liveTensors, c.liveBuffers, c.liveBytes];
    if (i === 4) flat = now;
    else if (flat && !changed && now.some((v, k) => v !== flat[k])) changed = { step: i, was: flat, now };
    if (i % 100 === 0 || i === LONG - 1) log(`long step ${i}: loss ${last.toFixed(4)}, live tensors/buffers/bytes ${now.join("/")}, ${((performance.now() - t0) / 1000).toFixed(0)} s`);
  }
  const result = { device: info.device, adapter, bs: BS, steps: LONG, seconds: (performance.now() - t0) / 1000, first, last,
    live: flat, changed, msPerStep: (performance.now() - t0) / LONG };
  report(result, "LONG");
}

runBench(main);

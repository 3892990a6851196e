// The GPT benchmark page's script, the browser twin of examples/bench_gpt.rs: the training step of
// the package's GPT (js/gpt.js; no biases, tied output layer, AdamW with betas (0.9, 0.99),
// weight decay 0.1 on the matrices, a constant learning rate) on windows drawn at random offsets
// of a random token stream, captured by `jit`. 3 warm-up steps (the first schedules and compiles,
// the second captures), then `steps` timed steps, each timed until `await loss.item()`. Prints the
// device, median and min ms/step, launches per step and the first step's time, sets
// `window.benchResult` and logs "BENCH {json}" (or "BENCH_ERROR message"). Knobs in the URL:
// www/bench_gpt_common.js's, `device` ("webgpu" | "wasm" | "cpu"; default: init's choice) and
// `first` ("async", the default: the first step is `await step.callAsync()`, whose WebGPU
// pipelines compile all at once asynchronously; "sync": a plain call, pipelines made one by one).

import { init, Tensor, GPT, jit, globalCounters } from "../js/wgrad.js";
import { log, median, report, runBench } from "./bench_common.js";
import { knobs as k, randomTokens, describeModel } from "./bench_gpt_common.js";

const params = new URLSearchParams(location.search);
const DEVICE = params.get("device") ?? undefined;
const FIRST = params.get("first") ?? "async";

async function main() {
  const info = await init(DEVICE ? { device: DEVICE } : {});
  const adapter = info.adapter ? `${info.adapter.name || "unnamed adapter"} (${info.adapter.backend}, ${info.adapter.deviceType})` : null;
  log(`wgrad, device ${info.device}${adapter ? `, adapter ${adapter}` : ""}; ${describeModel(k)}; ${k.steps} timed steps`);

  Tensor.manualSeed(42);
  const data = new Tensor(randomTokens(1 << 16, k.vocab), [1 << 16], "uint8").realize();
  const gpt = new GPT({ vocabSize: k.vocab, blockSize: k.block, nLayer: k.nLayer, nHead: k.nHead, nEmbd: k.nEmbd });
  const opt = gpt.configureOptimizers({ lr: k.lr });
  const step = jit(() => gpt.trainStep(opt, data, k.bs));

  const times = [];
  if (!["async", "sync"].includes(FIRST)) throw new Error(`first must be async or sync, got ${FIRST}`);
  const result = { engine: "wgrad", first: FIRST, device: info.device, threads: info.threads, adapter, plansFromCache: info.plansFromCache, ...k };
  for (let i = 0; i < k.steps + k.warmup; i++) {
    const t0 = performance.now();
    const k0 = globalCounters().kernelCount;
    const loss = i === 0 && FIRST === "async" ? await step.callAsync() : step();
    const v = await loss.item();
    loss.dispose();
    const ms = performance.now() - t0;
    if (i === 0) {
      result.firstStepMs = +ms.toFixed(1);
      const c = globalCounters();
      result.firstStepStagesMs = Object.fromEntries(["scheduleMs", "planMs", "lowerMs", "compileMs"].map((s) => [s, +c[s].toFixed(1)]));
    }
    if (i >= k.warmup) times.push(ms);
    (result.losses ??= []).push(v);
    log(`step ${i}: loss ${v.toFixed(4)}, ${ms.toFixed(1)} ms, ${globalCounters().kernelCount - k0} kernels`);
    if (!Number.isFinite(v)) throw new Error(`the loss is ${v} at step ${i}`);
  }
  result.msPerStep = +median(times).toFixed(1);
  result.minMs = +Math.min(...times).toFixed(1);
  result.launchesPerStep = step.launches;
  log(`wgrad ${info.device}: median ${result.msPerStep} ms/step, min ${result.minMs} ms, ${step.launches} launches/step`);
  report(result);
}

runBench(main);

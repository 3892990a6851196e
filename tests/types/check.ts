// Type check of the package's declarations (js/wgrad.d.ts and the generated pkg/web/wgrad.d.ts):
// compiled with `tsc --noEmit --strict` by scripts/test_web.sh, never run. It uses the API the
// way the README and the demo do, so a declaration that breaks user code fails the tests.

import {
  init,
  Tensor,
  nn,
  optim,
  jit,
  tidy,
  withContext,
  getParameters,
  datasets,
  setDebug,
  globalCounters,
  loseDevice,
  GPT,
  CharTokenizer,
  type DType,
  type InitInfo,
} from "../../js/wgrad.js";

export async function main(): Promise<number> {
  const info: InitInfo = await init({ device: "webgpu" });
  const dev: "webgpu" | "wasm" | "cpu" = info.device;
  setDebug(0);
  const lose: () => void = loseDevice;
  const x = new Tensor(new Float32Array([1, 2, 3, 4]), [2, 2]);
  const y = Tensor.randint([2], 0, 3);
  const dt: DType = x.dtype;
  const shape: number[] = x.shape;
  const l1 = new nn.Linear(2, 3);
  const conv = new nn.Conv2d(1, 4, 3, { stride: 1, padding: "same" });
  const model = { l1, conv };
  const opt = new optim.Adam(getParameters(model), { lr: 1e-3 });
  const step = jit(() =>
    withContext({ TRAINING: 1 }, () => {
      opt.zeroGrad();
      const loss = l1.forward(x).relu().sparseCategoricalCrossentropy(y);
      loss.backward();
      opt.step();
      return loss.realize();
    }) as Tensor,
  );
  const loss: Tensor = step();
  step.dispose();
  const value: number | boolean = await loss.item();
  const data = await x.add(1).mul(x).sum(1, true).data();
  const kept = tidy(() => x.matmul(x.T).softmax(-1));
  kept.dispose();
  const counters = globalCounters();
  const mnist = await datasets.mnist({ baseUrl: "data/mnist/" });
  const xs: Tensor = mnist.xTrain;
  const tok = new CharTokenizer("to be or not to be");
  const text = new Tensor(tok.encode("to be or not"), [12], "uint8");
  const gpt = new GPT({ vocabSize: tok.vocabSize, blockSize: 8, nLayer: 1, nHead: 2, nEmbd: 16 });
  const gopt = gpt.configureOptimizers({ lr: 1e-2, schedule: GPT.cosineSchedule(1e-2, 2, 10) });
  const gstep = jit(() => gpt.trainStep(gopt, text, 4));
  const gloss: Tensor = gstep();
  const sampled: number[][] = await gpt.generator(1, { temperature: 0.8, topK: 3 }).generate(Array.from(tok.encode("t")), 5);
  const said: string = tok.decode(sampled[0]);
  return said.length + Number(await gloss.item()) + Number(value) + data.length + counters.liveBuffers + shape.length + xs.numel + dt.length + dev.length + lose.length;
}

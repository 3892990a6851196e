// Node.js test of the npm package: `npm pack`s the repository into a temp dir, imports the
// unpacked package's js/wgrad.js in this Node process and checks that
//   - `init()` loads the engine's .wasm from the package's files (Node's fetch reads no file:
//     URLs) and, Node having no WebGPU, falls back to WebAssembly kernels ("wasm") with one
//     console warning;
//   - `init({ device: "webgpu" })` throws an Error naming `init` and why, never a trap;
//   - WebAssembly kernels run on every core (at most 8: shared memory and worker threads);
//   - a small MLP (Linear(4,16) → relu → Linear(16,3), Adam, 20 jitted steps) trains there: the
//     loss falls below half its start; and again in mixed precision (made under
//     `withContext({ HALF: 1 })`: float16 weights, float16 inputs, a GradScaler backing off);
//   - the package's GPT (js/gpt.js) trains as PyTorch does: 10 jitted AdamW steps from the
//     fixture's weights and batches (tests/fixtures/gpt_steps.json, the one tests/gpt.rs uses)
//     give PyTorch's losses and final weights to 1e-5; its key/value-cache decode step, replayed
//     by the jit, gives the full forward's logits position by position; bad input to it throws;
//   - a wrong argument throws an Error naming its op, and the engine works afterwards;
//   - `init({ half: true })` makes float16 the default float (zeros, rand, layer weights), and
//     `init({ half: false })` float32 again.
// Deno runs the same script (its Node.js compatibility gives node:fs and npm's `process`): there
// `init()` may pick WebGPU (Deno has it built in; on this machine through lavapipe), so the test
// takes WebAssembly kernels with `init({ device: "wasm" })` for the checks that follow.
// The package must be built first (bash scripts/build_web.sh). Exits non-zero on any failure.
//
//   node scripts/node_test.mjs
//   deno run -A scripts/node_test.mjs

import { execFileSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const ROOT = fileURLToPath(new URL("..", import.meta.url));
const RUNTIME = typeof Deno !== "undefined" ? "Deno" : "Node.js";
const fail = (msg) => {
  console.error(`node test: FAIL: ${msg}`);
  process.exit(1);
};

for (const f of ["pkg/web/wgrad.js", "pkg/web/wgrad_bg.wasm"]) {
  if (!existsSync(join(ROOT, f))) fail(`${f} is missing: build the package first (bash scripts/build_web.sh)`);
}
const dir = mkdtempSync(join(tmpdir(), "wgrad-node-"));
try {
  execFileSync("npm", ["pack", "--silent", "--pack-destination", dir], { cwd: ROOT, stdio: ["ignore", "pipe", "inherit"] });
  const tgz = readdirSync(dir).find((f) => f.endsWith(".tgz"));
  if (!tgz) fail("npm pack made no tarball");
  execFileSync("tar", ["-xzf", tgz], { cwd: dir });
  const wg = await import(pathToFileURL(join(dir, "package/js/wgrad.js")).href);
  const { init, Tensor, nn, optim, jit, tidy, withContext, getParameters } = wg;

  const warnings = [];
  const warn = console.warn;
  console.warn = (...a) => warnings.push(a.join(" "));
  let info;
  try {
    info = await init();
  } catch (e) {
    fail(`init() threw: ${e && e.message}`);
  } finally {
    console.warn = warn;
  }
  let err = null;
  if (info.device === "webgpu" && RUNTIME === "Deno") {
    const a = info.adapter;
    console.log(`init(): webgpu (Deno's own WebGPU, adapter ${a && a.name}, subgroups of ${a && a.subgroupSize})`);
    const t = await new Tensor([1, 2, 3]).mul(2).sum().item();
    if (t !== 12) fail(`on Deno's WebGPU [1,2,3]*2 sums to ${t}`);
    info = await init({ device: "wasm" });
    if (info.device !== "wasm") fail(`init({ device: "wasm" }) picked ${info.device}`);
  } else {
    if (info.device !== "wasm") fail(`init() picked ${info.device}, expected WebAssembly kernels ("wasm")`);
    if (warnings.length !== 1 || !/WebGPU unavailable/.test(warnings[0])) {
      fail(`init() should warn once that WebGPU is unavailable, warned: ${JSON.stringify(warnings)}`);
    }
    console.log(`init(): ${info.device} (${warnings[0]})`);
    try {
      await init({ device: "webgpu" });
    } catch (e) {
      err = e;
    }
    if (!(err instanceof Error) || !/^init: /.test(err.message) || !/webgpu/i.test(err.message)) {
      fail(`init({ device: "webgpu" }) should throw an Error naming init and WebGPU, got ${err && err.message}`);
    }
    console.log(`init({ device: "webgpu" }) throws: ${err.message}`);
  }

  // Shared memory exists here: WebAssembly kernels run on every core (at most 8).
  const cores = Math.min((await import("node:os")).availableParallelism(), 8);
  if (info.threads !== cores) fail(`init() runs WebAssembly kernels on ${info.threads} thread(s); this machine has ${cores} cores`);
  console.log(`WebAssembly kernels on ${info.threads} thread(s)`);

  await trainMlp(wg, info, false);
  // Mixed precision: layers made under HALF hold float16 weights (Adam keeps float32 masters).
  await trainMlp(wg, info, true);

  await gptMatchesPytorch(wg);

  err = null;
  try {
    new nn.Linear(4, "x");
  } catch (e) {
    err = e;
  }
  if (!(err instanceof Error) || !/Linear/.test(err.message)) fail(`new nn.Linear(4, "x") should throw an Error naming Linear, got ${err && err.message}`);
  const after = await Tensor.ones([3]).sum().item();
  if (after !== 3) fail(`the engine after an error: ones(3).sum() = ${after}`);
  // init({ half }) switches the default float for the whole engine (and says so), and back.
  const halfInfo = await init({ device: info.device, half: true });
  const halfDtypes = [Tensor.zeros([2]).dtype, Tensor.rand([2]).dtype, new nn.Linear(2, 2).weight.dtype];
  const fullInfo = await init({ device: info.device, half: false });
  const fullDtype = Tensor.zeros([2]).dtype;
  if (halfInfo.half !== true || fullInfo.half !== false || halfDtypes.some((d) => d !== "float16") || fullDtype !== "float32") {
    fail(`init({ half }): half ${halfInfo.half} made ${halfDtypes}; then half ${fullInfo.half} made ${fullDtype}`);
  }
  console.log(`init({ half: true }): zeros, rand and Linear weights are float16; init({ half: false }): float32 again`);
  console.log(`node test: ok (${RUNTIME} ${RUNTIME === "Deno" ? Deno.version.deno : process.version})`);
} finally {
  rmSync(dir, { recursive: true, force: true });
}

/** A small MLP (Linear(4,16) → relu → Linear(16,3), Adam, 20 jitted steps) must train; with
 * `half` its layers are made under `withContext({ HALF: 1 })` and take float16 inputs. */
async function trainMlp({ Tensor, nn, optim, jit, tidy, withContext, getParameters }, info, half) {
  Tensor.manualSeed(1);
  let seed = 7;
  const rnd = () => ((seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648) - 0.5;
  const centres = [[1, 0, 0, 1], [0, 1, 1, 0], [-1, -1, 0, 0]];
  const N = 96, xs = new Float32Array(N * 4), ys = new Int32Array(N);
  for (let i = 0; i < N; i++) {
    ys[i] = i % 3;
    for (let j = 0; j < 4; j++) xs[i * 4 + j] = centres[i % 3][j] + rnd();
  }
  const float = half ? "float16" : "float32";
  const X = new Tensor(xs, [N, 4]).cast(float).realize(), Y = new Tensor(ys, [N]);
  const [l1, l2] = withContext({ HALF: half }, () => [new nn.Linear(4, 16), new nn.Linear(16, 3)]);
  if (l1.weight.dtype !== float) fail(`Linear made with HALF=${half} has ${l1.weight.dtype} weights`);
  const model = (x) => l2.forward(l1.forward(x).relu());
  const opt = new optim.Adam(getParameters([l1, l2]), { lr: 0.05 });
  // In half precision through a GradScaler started at 2^24: the float16 gradients of 2^24 times
  // the loss overflow, so the first steps are skipped and back the scale off until they fit.
  const scaler = half ? new optim.GradScaler(l1.weight, { initScale: 2 ** 24 }) : null;
  const step = jit((x, y) => withContext({ TRAINING: 1 }, () => {
    opt.zeroGrad();
    const loss = model(x).sparseCategoricalCrossentropy(y);
    if (scaler) {
      scaler.scale(loss).backward();
      scaler.step(opt);
    } else {
      loss.backward();
      opt.step();
    }
    return loss.realize();
  }));
  const losses = [];
  const t0 = performance.now();
  for (let i = 0; i < 20; i++) {
    const l = tidy(() => step(X, Y));
    losses.push(await l.item());
    l.dispose();
  }
  const ms = (performance.now() - t0) / 20;
  if (!losses.every(Number.isFinite) || !(losses.at(-1) < losses[0] / 2)) {
    fail(`the ${float} MLP did not train: losses ${losses.map((v) => v.toFixed(4)).join(" ")}`);
  }
  if (scaler) {
    const scale = await scaler.scaleTensor.item();
    if (!(scale >= 1 && scale < 2 ** 24)) fail(`the GradScaler's scale is ${scale}: float16 overflow should have backed it off from 2^24`);
    console.log(`GradScaler: scale backed off to ${scale}`);
  }
  console.log(`${float} MLP on ${info.device}: loss ${losses[0].toFixed(4)} -> ${losses.at(-1).toFixed(4)} in 20 jitted steps (${ms.toFixed(1)} ms/step)`);
}

/** scripts/gen_gpt_fixture.py's initial weights (tests/gpt.rs's `det_weights`). */
function detWeights(k, name, n) {
  const ln = name.split(".").some((p) => p.startsWith("ln_")) && name.endsWith("weight");
  const out = new Float32Array(n);
  for (let i = 0; i < n; i++) {
    const u = Number((BigInt(i + k * 1000003) * 2654435761n) % (1n << 32n)) / 4294967296;
    out[i] = (ln ? 1 : 0) + 0.1 * (2 * u - 1);
  }
  return out;
}

async function gptMatchesPytorch({ Tensor, GPT, jit, tidy, withContext, getStateDict }) {
  const fx = JSON.parse(readFileSync(join(ROOT, "tests/fixtures/gpt_steps.json"), "utf8"));
  const c = fx.config;
  const gpt = new GPT({ vocabSize: c.vocab_size, blockSize: c.block_size, nLayer: c.n_layer, nHead: c.n_head, nEmbd: c.n_embd, bias: c.bias });
  const names = Object.keys(fx.weights);
  const sd = getStateDict(gpt);
  if (Object.keys(sd).join() !== names.join()) fail(`GPT state dict names ${Object.keys(sd)} differ from PyTorch's ${names}`);
  Object.entries(sd).forEach(([name, t], k) => tidy(() => t.assign(new Tensor(detWeights(k, name, t.numel), t.shape)).realize()));
  const opt = gpt.configureOptimizers({ weightDecay: 0.1, lr: 1e-2, betas: [0.9, 0.99], schedule: GPT.cosineSchedule(1e-2, 2, 10) });
  const step = jit((w) => withContext({ TRAINING: 1 }, () => {
    opt.zeroGrad();
    const loss = gpt.loss(w);
    loss.backward();
    opt.step();
    return loss.realize();
  }));
  let worst = 0;
  for (let k = 0; k < fx.losses.length; k++) {
    const rows = fx.windows[k];
    const w = new Tensor(Int32Array.from(rows.flat()), [rows.length, rows[0].length], "int32");
    const l = tidy(() => step(w));
    const got = await l.item();
    [w, l].forEach((t) => t.dispose());
    const want = fx.losses[k];
    worst = Math.max(worst, Math.abs(got - want));
    if (!(Math.abs(got - want) <= 1e-5 * Math.max(1, Math.abs(want)))) fail(`GPT step ${k}: loss ${got}, PyTorch ${want}`);
  }
  let worstW = 0;
  for (const [name, t] of Object.entries(getStateDict(gpt))) {
    const got = await t.data(), want = fx.weights[name];
    got.forEach((g, i) => {
      const d = Math.abs(g - want[i]);
      worstW = Math.max(worstW, d);
      if (!(d <= 1e-5 * Math.max(1, Math.abs(want[i])))) fail(`GPT ${name}[${i}] is ${g} after 10 steps, PyTorch ${want[i]}`);
    });
  }
  console.log(`GPT: 10 jitted AdamW steps equal PyTorch's (largest difference: loss ${worst.toExponential(1)}, weight ${worstW.toExponential(1)})`);

  // The cached decode, one token at a time, equals the full forward at each position.
  const seq = [3, 1, 4, 1, 5, 9, 2, 6];
  const full = await tidy(() => withContext({ NO_GRAD: 1 }, () => gpt.forward(new Tensor(Int32Array.from(seq), [1, seq.length], "int32")))).data();
  const g = gpt.generator(1, { temperature: 0 });
  let worstD = 0;
  for (let i = 0; i < seq.length; i++) {
    const [tok, logits] = g.step([seq[i]]);
    const got = await logits.data();
    const next = (await tok.data())[0];
    [tok, logits].forEach((t) => t.dispose());
    const want = full.slice(i * c.vocab_size, (i + 1) * c.vocab_size);
    got.forEach((v, j) => (worstD = Math.max(worstD, Math.abs(v - want[j]))));
    const best = want.indexOf(Math.max(...want));
    if (next !== best) fail(`GPT decode at ${i}: greedy token ${next}, the full forward's argmax ${best}`);
  }
  if (!(worstD < 1e-4)) fail(`GPT decode differs from the full forward by ${worstD}`);
  if (!(g.launches > 0)) fail("GPT decode: the step was not captured");
  for (const bad of [() => g.step([c.vocab_size]), () => g.step([1, 2]), () => gpt.generator(1, { topK: 0 }), () => new GPT({ vocabSize: 0, blockSize: 8 })]) {
    let e = null;
    try {
      bad();
    } catch (x) {
      e = x;
    }
    if (!(e instanceof Error) || !/^(Generator|GPT)/.test(e.message)) fail(`GPT: bad input gave ${e && e.message}`);
  }
  // Windows of a long text (gathered in two steps: one index over all of it would overflow a
  // 32-bit size) equal the text's; a jitted trainStep on random windows of it trains.
  const n = 2_200_000;
  const host = new Uint8Array(n).map((_, i) => (i * 7 + (i >> 9)) % c.vocab_size);
  const text = new Tensor(host, [n], "uint8");
  // Windows of 1000 tokens: rows of 1484 (√n), so some windows span two rows.
  const L = 1000, st = [0, 5, 483, 484, 485, 1483, 1484, 2967, 999_999, n - L, 77, 77, 77, 77, 77, 77];
  const w = await tidy(() => GPT.windows(text, new Tensor(Int32Array.from(st), [16], "int32"), L)).data();
  let wrong = 0;
  st.forEach((s0, i) => host.subarray(s0, s0 + L).forEach((v, j) => (wrong += w[i * L + j] !== v)));
  if (w.length !== 16 * L || wrong) fail(`GPT.windows of a long text: ${wrong} wrong tokens`);
  const topt = gpt.configureOptimizers({ lr: 1e-3 });
  const tstep = jit(() => gpt.trainStep(topt, text, 16));
  const tl = [];
  for (let i = 0; i < 3; i++) {
    const l = tstep();
    tl.push(await l.item());
    l.dispose();
  }
  if (!tl.every(Number.isFinite) || !(tstep.launches > 0)) fail(`GPT.trainStep on random windows: losses ${tl}, ${tstep.launches} launches`);
  console.log(`GPT: windows of ${L} tokens of a ${n}-token text equal the text's; jitted trainStep losses ${tl.map((v) => v.toFixed(3)).join(", ")}`);
  // With GPT-2's biases: every Linear and LayerNorm has `.bias` after `.weight`, as in Rust.
  const gb = new GPT({ vocabSize: 13, blockSize: 8, nLayer: 1, nHead: 2, nEmbd: 16, bias: true });
  const bnames = Object.keys(getStateDict(gb)).join(" ");
  const want = "wte.weight wpe.weight h.0.ln_1.weight h.0.ln_1.bias h.0.attn.c_attn.weight h.0.attn.c_attn.bias " +
    "h.0.attn.c_proj.weight h.0.attn.c_proj.bias h.0.ln_2.weight h.0.ln_2.bias h.0.mlp.c_fc.weight h.0.mlp.c_fc.bias " +
    "h.0.mlp.c_proj.weight h.0.mlp.c_proj.bias ln_f.weight ln_f.bias";
  if (bnames !== want) fail(`GPT with biases: state dict ${bnames}`);
  const bl = await tidy(() => gb.loss(new Tensor(Int32Array.from({ length: 18 }, (_, i) => i % 13), [2, 9], "int32"))).item();
  if (!(Math.abs(bl - Math.log(13)) < 0.5)) fail(`GPT with biases: initial loss ${bl}, expected about ln 13`);
  gb.dispose();
  const launches = g.launches;
  g.dispose();
  console.log(`GPT: the jitted decode step (${launches} launches) equals the full forward to ${worstD.toExponential(1)} at each of ${seq.length} positions`);
}

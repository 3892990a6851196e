// Browser test of the npm package (Node 20 + playwright-core driving /usr/bin/chromium headless
// with --enable-unsafe-webgpu; it never downloads a browser). The package must be built first
// (bash scripts/build_web.sh).
//
//   node scripts/page_test.mjs [--bench] [--bench-tfjs] [--bench-jaxjs] [--bench-gpt] [--bench-gpt-jaxjs] [--long=N]
//                              [--no-package] [--bs=N] [--steps=N] [--size=small|medium]
//                              [--device=webgpu|wasm|cpu] [--backend=webgpu|wasm] [--no-webgpu]
//                              [--first=async|sync]
//                              [--timeout=SECONDS] [--verbose]
//
// (a) unless --no-package: `npm pack`s the repository into a temp dir, unpacks it, writes a page
//     next to it that imports ./package/js/wgrad.js and trains a tiny MLP (Linear(4,16) → relu →
//     Linear(16,3), Adam, 30 jitted steps) on a synthetic 3-class set, and checks in Node that
//     the loss fell, that the weights survive safeSave/safeLoad/loadStateDict, that live buffers
//     stayed flat over the replays and that no page error, failed request or console error
//     occurred, and that the same MLP made under `withContext({ HALF: 1 })` (float16 weights and
//     inputs; natively stored where the adapter has shader-f16) trains too; then an error page: the calls that once trapped the wasm instance throw Errors
//     naming their op, and every exported function and method called with wrong arguments throws
//     Errors, never a trap (nor a panic on the console); on WebGPU (`init()`) and on the
//     interpreter (`init({ device: "cpu" })`); the WebGPU page is loaded a second time in the same
//     browser context, where `init` finds the first load's kernel plans in IndexedDB and the
//     training gives the same losses.
// (b) --bench: opens www/bench.html?bs=..&steps=..&device=.. from the repository and prints its
//     BENCH line (defaults bs 128, steps 5).
// (b') --bench-tfjs: the same for www/bench_tfjs.html?bs=..&steps=.. (the step in TensorFlow.js on
//     its WebGPU backend; needs the tfjs devDependencies from `npm install`), and --bench-jaxjs
//     for www/bench_jaxjs.html (the step in jax-js, jitted whole, on its WebGPU device, or on its
//     Wasm one with --backend=wasm). --no-webgpu starts Chromium with WebGPU switched off.
// (b'''') --bench-gpt: www/bench_gpt.html, the GPT's jitted training step (js/gpt.js) in wgrad
//     on --device; --bench-gpt-jaxjs: www/bench_gpt_jaxjs.html, the same step in jax-js on
//     --backend. --size=medium: 4 layers, width 128, context 128, batch 32 (default small: 2
//     layers, width 64, context 64, batch 16; --bs overrides the batch). --reload loads the page
//     twice in one browser context: the second load starts with the first's plans (IndexedDB).
//     --first=sync makes wgrad's first step a plain call (default async: `await step.callAsync()`).
//     --isolated serves the pages cross-origin isolated (COOP/COEP): wgrad's WebAssembly kernels
//     then run on every core (and jax-js's Wasm backend may use threads too). --threads-test: the
//     small GPT's WebAssembly step on a page that is not isolated (one thread) and on one that is
//     (every core) must give the same losses.
// (b''') --bench-matmul: www/bench_matmul.html?sizes=..&chain=..&steps=.. (defaults 64,128 / 2 / 1):
//     GFLOP/s of square matmuls and the tutorial's conv2 forward in wgrad, jax-js and tfjs; fails
//     unless every library gives a positive figure for every row (the page's own smoke test).
// (b'') --long=N: www/bench.html?long=N&bs=.. (default 32): N jitted steps of the tutorial CNN
//     with Adam; fails unless live tensors, buffers and bytes stay flat after 5 warm-up steps.
// (The demo page has its own end-to-end test: scripts/demo_test.mjs.)
// Exits non-zero with a message on any failure.

import { execFileSync } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { serve } from "./serve.mjs";

const ROOT = fileURLToPath(new URL("..", import.meta.url));
const CHROMIUM = process.env.CHROMIUM ?? "/usr/bin/chromium";
const flags = new Map(
  process.argv.slice(2).map((a) => {
    const m = /^--([^=]+)(?:=(.*))?$/.exec(a);
    if (!m) fail(`unknown argument ${a}`);
    return [m[1], m[2] ?? true];
  }),
);
// --no-webgpu: a browser without WebGPU (as Firefox on Linux, or Chromium with it switched off).
const ARGS = flags.has("no-webgpu")
  ? ["--no-sandbox", "--disable-features=WebGPU", "--disable-gpu-sandbox"]
  : ["--no-sandbox", "--enable-unsafe-webgpu", "--enable-features=Vulkan", "--disable-gpu-sandbox"];
const known = ["bench", "bench-tfjs", "bench-jaxjs", "bench-gpt", "bench-gpt-jaxjs", "reload", "isolated", "threads-test", "size", "bench-matmul", "sizes", "chain", "long", "no-package", "bs", "steps", "device", "backend", "no-webgpu", "timeout", "verbose", "first"];
for (const k of flags.keys()) if (!known.includes(k)) fail(`unknown flag --${k} (known: ${known.join(", ")})`);
const VERBOSE = flags.has("verbose");
const TIMEOUT_MS = Number(flags.get("timeout") ?? 1800) * 1000;

function fail(msg) {
  console.error(`page_test: FAIL: ${msg}`);
  process.exit(1);
}

// The page of part (a): trains a tiny MLP from JavaScript with the packed package.
const PACKAGE_PAGE = `<!doctype html>
<meta charset="utf-8"><title>wgrad package test</title><link rel="icon" href="data:,">
<script type="module">
import { init, Tensor, nn, optim, jit, withContext, getParameters, tidy, globalCounters,
  getStateDict, loadStateDict, safeSave, safeLoad, savePlanCache } from "./package/js/wgrad.js";
try {
  const device = new URLSearchParams(location.search).get("device");
  const info = await init(device ? { device } : {});
  Tensor.manualSeed(1);
  // 96 points in 4-D around three class centres (a fixed pseudo-random sequence).
  let seed = 7;
  const rnd = () => ((seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648) - 0.5;
  const centres = [[1, 0, 0, 1], [0, 1, 1, 0], [-1, -1, 0, 0]];
  const N = 96, xs = new Float32Array(N * 4), ys = new Int32Array(N);
  for (let i = 0; i < N; i++) {
    ys[i] = i % 3;
    for (let j = 0; j < 4; j++) xs[i * 4 + j] = centres[i % 3][j] + rnd();
  }
  const X = new Tensor(xs, [N, 4]), Y = new Tensor(ys, [N]);
  const l1 = new nn.Linear(4, 16), l2 = new nn.Linear(16, 3);
  const model = (x) => l2.forward(l1.forward(x).relu());
  const opt = new optim.Adam(getParameters([l1, l2]), { lr: 0.05 });
  const evalLoss = async () => {
    const l = tidy(() => withContext({ NO_GRAD: 1 }, () => model(X).sparseCategoricalCrossentropy(Y)));
    const v = await l.item();
    l.dispose();
    return v;
  };
  const before = await evalLoss();
  const step = jit((x, y) => withContext({ TRAINING: 1 }, () => {
    opt.zeroGrad();
    const loss = model(x).sparseCategoricalCrossentropy(y);
    loss.backward();
    opt.step();
    return loss.realize();
  }));
  const losses = [], live = [];
  for (let i = 0; i < 30; i++) {
    const l = tidy(() => step(X, Y));
    losses.push(await l.item());
    l.dispose();
    const c = globalCounters();
    live.push([c.liveTensors, c.liveBuffers, c.liveBytes]);
  }
  const after = await evalLoss();
  // Mixed precision: the same MLP made under HALF (float16 weights, Adam's float32 masters), on
  // float16 inputs; stored natively where the adapter has shader-f16.
  Tensor.manualSeed(1);
  const [h1, h2] = withContext({ HALF: 1 }, () => [new nn.Linear(4, 16), new nn.Linear(16, 3)]);
  const hopt = new optim.Adam(getParameters([h1, h2]), { lr: 0.05 });
  const Xh = X.cast("float16").realize();
  const hstep = jit((x, y) => withContext({ TRAINING: 1 }, () => {
    hopt.zeroGrad();
    const loss = h2.forward(h1.forward(x).relu()).sparseCategoricalCrossentropy(y);
    loss.backward();
    hopt.step();
    return loss.realize();
  }));
  const halfLosses = [];
  for (let i = 0; i < 30; i++) {
    const l = tidy(() => hstep(Xh, Y));
    halfLosses.push(await l.item());
    l.dispose();
  }
  const half = { losses: halfLosses, dtype: h1.weight.dtype, native: !!(info.adapter && info.adapter.shaderF16) };
  // Save the trained weights as safetensors and load them into fresh layers.
  const bytes = await safeSave(getStateDict({ l1, l2 }));
  const fresh = { l1: new nn.Linear(4, 16), l2: new nn.Linear(16, 3) };
  loadStateDict(fresh, safeLoad(bytes));
  const r = withContext({ NO_GRAD: 1 }, () =>
    fresh.l2.forward(fresh.l1.forward(X).relu()).sparseCategoricalCrossentropy(Y));
  const reloaded = await r.item();
  // The Tensor functions js/wgrad.js adds: sequential, and fromUrl on a file of this server.
  const seq = await Tensor.ones([2]).sequential([(x) => x.mul(2), (x) => x.add(1)]).data();
  const pkgJson = await Tensor.fromUrl("./package/package.json");
  const fetched = [pkgJson.dtype, pkgJson.shape[0], (await pkgJson.data())[0]];
  // DEBUG=2: a line per kernel with its time (on WebGPU from timestamp queries read back later).
  const debugLines = [], log = console.log;
  console.log = (...a) => { debugLines.push(a.join(" ")); log(...a); };
  try {
    const d = tidy(() => withContext({ DEBUG: 2, NO_GRAD: 1 }, () => model(X).softmax(1).realize()));
    await d.data();
    d.dispose();
    for (let i = 0; i < 50 && !debugLines.some((l) => / ms$/.test(l)); i++) await new Promise((ok) => setTimeout(ok, 20));
    await new Promise((ok) => setTimeout(ok, 200));
  } finally {
    console.log = log;
  }
  const debugMs = debugLines.filter((l) => / ms$/.test(l)).map((l) => Number(l.trim().split(/\\s+/).at(-2)));
  window.testResult = { device: info.device, adapter: info.adapter && info.adapter.name, before, after, half,
    plansFromCache: info.plansFromCache, plansSaved: await savePlanCache(),
    losses, live, launches: step.launches, tensorDevice: X.device, reloaded, debugMs,
    stages: (({ scheduleMs, planMs, lowerMs, compileMs }) => ({ scheduleMs, planMs, lowerMs, compileMs }))(globalCounters()),
    stateNames: Object.keys(getStateDict({ l1, l2 })).join(","), savedBytes: bytes.length,
    seq: Array.from(seq).join(","), fetched };
} catch (e) {
  console.error(e);
  window.testResult = { error: String((e && e.message) || e) };
}
</script>`;

// The page of part (a'): bad calls, as a fuzzer would make them, on the packed package (the
// receiver checks of js/wgrad.js included). Each reproduction of a former wasm trap must throw an
// Error (not a WebAssembly.RuntimeError) naming the op, then every exported function and method
// is called with wrong arguments in each position; the engine must still compute afterwards.
const ERRORS_PAGE = `<!doctype html>
<meta charset="utf-8"><title>wgrad error test</title><link rel="icon" href="data:,">
<script type="module">
import * as w from "./package/js/wgrad.js";
import * as raw from "./package/pkg/web/wgrad.js";
const { init, Tensor, nn, optim, jit, tidy, withContext, getStateDict, getParameters, loadStateDict,
  safeLoad, safeSave } = w;
const problems = [], seen = [];
let calls = 0, threw = 0;
// A call's outcome: a value, or an Error that is not a wasm trap (a trap kills the instance).
// With \`realize\`, a Tensor result is also computed (its kernels compiled and run).
async function outcome(what, f, realize = false) {
  calls++;
  try {
    let v = f();
    if (v instanceof Promise) v = await v;
    // Results are released at once: the fuzzing below makes thousands.
    for (const t of v instanceof Tensor ? [v] : Array.isArray(v) ? v : []) {
      if (!(t instanceof Tensor)) continue;
      try {
        if (realize) t.realize().dispose();
      } finally {
        t.dispose();
      }
    }
    return null;
  } catch (e) {
    threw++;
    if (e instanceof WebAssembly.RuntimeError || !(e instanceof Error)) {
      problems.push(what + ": " + (e && e.constructor && e.constructor.name) + ": " + (e && e.message || e));
      return null;
    }
    return e;
  }
}
// \`f\` must throw an Error whose message names \`op\`.
async function expectError(what, op, f) {
  const e = await outcome(what, f);
  if (!e) {
    if (!problems.some((p) => p.startsWith(what + ":"))) problems.push(what + ": no error");
  } else if (!e.message.includes(op)) {
    problems.push(what + ": the error does not name " + op + ": " + e.message);
  } else {
    seen.push(what + " -> " + e.message);
  }
}
async function works(when) {
  try {
    const t = tidy(() => new Tensor([[1, 2], [3, 4]]).matmul(new Tensor([[1], [1]])).sum());
    const v = await t.item();
    t.dispose();
    if (v !== 10) problems.push("after " + when + ": 1+2+3+4 gave " + v);
  } catch (e) {
    problems.push("after " + when + ": the engine no longer works: " + e.message);
  }
}
try {
  const device = new URLSearchParams(location.search).get("device");
  await init(device ? { device } : {});
  const scalar = Tensor.randn([]);
  // Axes of a 0-d tensor.
  await expectError("randn([]).var(0)", "var", () => scalar.var(0));
  await expectError("randn([]).split([2, 3, 4])", "split", () => scalar.split([2, 3, 4]));
  await expectError("randn([]).slice(0)", "slice", () => scalar.slice(0));
  await expectError("randn([]).softmax()", "softmax", () => scalar.softmax());
  await expectError("cat of 0-d tensors", "cat", () => Tensor.cat([scalar, scalar]));
  // Integers that do not fit 32 bits are errors, not truncated.
  const x = Tensor.ones([2, 3]);
  for (const [what, op, f] of [
    ["sum(2**32 + 1)", "sum", () => x.sum(2 ** 32 + 1)],
    ["slice(2**32 + 1)", "slice", () => x.slice(2 ** 32 + 1)],
    ["transpose(2**32 + 1, 0)", "transpose", () => x.transpose(2 ** 32 + 1, 0)],
    ["split([1, 1], 2**32 + 1)", "split", () => x.split([1, 1], 2 ** 32 + 1)],
    ["reshape([2**32 + 6])", "reshape", () => x.reshape([2 ** 32 + 6])],
    ["zeros([2**32 + 1])", "zeros", () => Tensor.zeros([2 ** 32 + 1])],
    ["setDebug(2**32 + 1)", "setDebug", () => w.setDebug(2 ** 32 + 1)],
    ["manualSeed(1.5)", "manualSeed", () => Tensor.manualSeed(1.5)],
  ]) await expectError(what, op, f);
  // A revoked Proxy as an argument (Array.isArray throws on one): Errors naming the op.
  const { proxy: revoked, revoke } = Proxy.revocable({}, {});
  revoke();
  for (const [what, op, f] of [
    ["new nn.Conv2d(3, revokedProxy, 3)", "Conv2d", () => new nn.Conv2d(3, revoked, 3)],
    ["leakyRelu(revokedProxy)", "leakyRelu", () => x.leakyRelu(revoked)],
    ["hardtanh(revokedProxy)", "hardtanh", () => x.hardtanh(revoked)],
    ["new optim.Adam(revokedProxy)", "Adam", () => new optim.Adam(revoked)],
    ["new nn.LayerNorm(revokedProxy)", "LayerNorm", () => new nn.LayerNorm(revoked)],
    ["reshape(revokedProxy)", "reshape", () => x.reshape(revoked)],
  ]) await expectError(what, op, f);
  // Malformed IDX headers.
  const idx = (...b) => new Uint8Array(b);
  const ok = idx(0, 0, 8, 1, 0, 0, 0, 1, 0);
  await expectError("mnistFromBytes: dtype 0x0d", "mnist", () => raw.mnistFromBytes(idx(0, 0, 0x0d, 1, 0, 0, 0, 1, 0), ok, ok, ok));
  await expectError("mnistFromBytes: a dimension of 2^32 - 1", "mnist", () => raw.mnistFromBytes(idx(0, 0, 8, 3, 255, 255, 255, 255, 0, 0, 0, 28, 0, 0, 0, 28), ok, ok, ok));
  await expectError("mnistFromBytes: labels claiming 2^31", "mnist", () => raw.mnistFromBytes(ok, idx(0, 0, 8, 1, 128, 0, 0, 0), ok, ok));
  await expectError("mnistFromBytes: an array claiming length 2^31", "mnist", () => raw.mnistFromBytes(ok, { length: 2 ** 31 }, ok, ok));
  await expectError("mnistFromBytes: a sparse array of length 2^31", "mnist", () => raw.mnistFromBytes(ok, new Array(2 ** 31), ok, ok));
  await expectError("mnistFromBytes()", "mnist", () => raw.mnistFromBytes());
  // Deep and cyclic models.
  const lin = new nn.Linear(2, 2);
  const cyclic = { lin };
  cyclic.self = cyclic;
  cyclic.parts = [cyclic, { back: cyclic, lin }];
  const names = Object.keys(getStateDict(cyclic)).join(",");
  if (names !== "lin.weight,lin.bias") problems.push("getStateDict of a cyclic model: " + names);
  if (getParameters(cyclic).length !== 2) problems.push("getParameters of a cyclic model: " + getParameters(cyclic).length);
  // BatchNorm's state dict has PyTorch's names, num_batches_tracked included, and round-trips.
  const bn = new nn.BatchNorm(2);
  const bnNames = Object.keys(getStateDict({ bn })).join(",");
  if (bnNames !== "bn.weight,bn.bias,bn.running_mean,bn.running_var,bn.num_batches_tracked") problems.push("BatchNorm state dict: " + bnNames);
  const bnBytes = await safeSave(getStateDict({ bn }));
  loadStateDict({ bn: new nn.BatchNorm(2) }, safeLoad(bnBytes));
  let deep = { lin };
  for (let i = 0; i < 100000; i++) deep = { deep };
  await expectError("getStateDict(100000 levels)", "getStateDict", () => getStateDict(deep));
  await expectError("getParameters(100000 levels)", "getParameters", () => getParameters(deep));
  const endless = () => ({ get next() { return endless(); } });
  await expectError("getStateDict(endless getters)", "getStateDict", () => getStateDict(endless()));
  // Wrong receivers.
  const emb = new nn.Embedding(4, 2), ln = new nn.LayerNorm(2);
  const rawJit = new raw.TinyJitJs(() => Tensor.ones([1]));
  const opt = new optim.SGD(lin.parameters());
  await expectError("LayerNorm.prototype.free.call(embedding)", "LayerNorm.free", () => nn.LayerNorm.prototype.free.call(emb));
  await expectError("TinyJitJs [Symbol.dispose] on a layer", "TinyJitJs", () => raw.TinyJitJs.prototype[Symbol.dispose].call(ln));
  await expectError("Optim.prototype.step.call(jit)", "Optim.step", () => raw.Optim.prototype.step.call(rawJit));
  await expectError("Linear.forward on a Tensor", "Linear.forward", () => nn.Linear.prototype.forward.call(x, x));
  await expectError("Tensor.relu on a layer", "relu", () => Tensor.prototype.relu.call(lin));
  await expectError("Tensor.shape getter on {}", "shape", () => Object.getOwnPropertyDescriptor(Tensor.prototype, "shape").get.call({}));
  await expectError("Tensor.add on undefined", "add", () => Tensor.prototype.add.call(undefined, 1));
  const e0 = await emb.forward(new Tensor([1, 3], [2], "int32")).data();
  if (e0.length !== 4) problems.push("the embedding after the bad calls gave " + e0.length + " values");
  // Disposed and freed tensors.
  const d = new Tensor([1, 2]);
  d.dispose();
  await expectError("a disposed tensor's shape", "shape", () => d.shape);
  const f = new Tensor([1, 2]);
  f[Symbol.dispose]();
  await expectError("a freed tensor's shape", "shape", () => f.shape);
  await expectError("a freed tensor's relu", "relu", () => f.relu());
  await expectError("a freed tensor as an argument", "add", () => x.add(f));
  if (!seen.at(-1).includes("disposed")) problems.push("the freed tensor's error does not say it was disposed: " + seen.at(-1));
  if (f.isDisposed !== true || String(f) !== "Tensor(disposed)") problems.push("a freed tensor: isDisposed " + f.isDisposed + ", " + String(f));
  f.free();
  f.dispose();
  await expectError("requiresGrad = 'yes'", "requiresGrad", () => { x.requiresGrad = "yes"; });
  await expectError("opt.lr = NaN", "lr", () => { opt.lr = NaN; });
  // Missing arguments.
  await expectError("safeLoad()", "safeLoad", () => safeLoad());
  await expectError("safeSave()", "safeSave", () => safeSave());
  await expectError("loadStateDict()", "loadStateDict", () => loadStateDict());
  await expectError("loadStateDict(model)", "loadStateDict", () => loadStateDict({ lin }));
  await expectError("loadStateDict(model, state, null)", "loadStateDict", () => loadStateDict({ lin }, {}, null));
  await expectError("jit()", "jit", () => jit());
  await expectError("init(5)", "init", () => init(5));
  await expectError("init({ device: 'tpu' })", "init", () => init({ device: "tpu" }));
  await expectError("datasets.mnist(null)", "datasets.mnist", () => w.datasets.mnist(null));
  await works("the reproductions");

  // Every exported function and method, with a wrong value in each argument position.
  const freed = new Tensor([1]);
  freed.free();
  const disposed = new Tensor([1]);
  disposed.dispose();
  const bad = [undefined, null, NaN, Infinity, -1, 0, 1.5, 2 ** 31, 2 ** 32 - 1, 2 ** 32 + 1, 2 ** 53 + 2,
    -(2 ** 31) - 1, "x", "float64", true, {}, [], [[1, 2], 3], [-1], [2 ** 32 + 1], new Array(2 ** 31),
    cyclic, Tensor.randn([]), freed, disposed, lin, () => 1, Symbol("s"), 10n, new Uint8Array(3)];
  // fromUrl fetches: wrong URLs are requests the server answers 404, which this page counts as
  // failures; its argument checks are tested in the package page.
  const skip = new Set(["constructor", "free", "dispose", "__destroy_into_raw", "__wrap", "__unwrap", "fromUrl"]);
  const methods = (obj) => Reflect.ownKeys(obj).filter((k) => typeof k === "string" && !skip.has(k) &&
    typeof Object.getOwnPropertyDescriptor(obj, k).value === "function");
  // The other arguments are left out, or 1 (a plausible number, size, axis or shape).
  const targets = [];
  async function fuzz(what, target, name, arity) {
    targets.push({ what, target, name, arity });
    const t0 = performance.now(), c0 = calls;
    for (const filler of [undefined, 1]) {
      for (let pos = 0; pos < arity; pos++) {
        for (const b of bad) {
          const args = Array.from({ length: arity }, (_, i) => (i === pos ? b : filler));
          const e = await outcome(what + " arg " + pos, () => target[name](...args));
          if (e && /null pointer|unreachable|recursive use/.test(e.message)) problems.push(what + ": " + e.message);
        }
      }
    }
    console.log("fuzz " + what + ": " + (calls - c0) + " calls, " + (performance.now() - t0).toFixed(0) + " ms");
  }
  const receivers = { "a [2, 3] tensor": Tensor.ones([2, 3]), "a 0-d tensor": Tensor.randn([]),
    "an int32 tensor": new Tensor([1, 2, 3], [3], "int32") };
  for (const [rname, r] of Object.entries(receivers)) {
    for (const m of methods(Tensor.prototype)) await fuzz("Tensor." + m + " on " + rname, r, m, 3);
  }
  for (const m of methods(Tensor)) await fuzz("Tensor." + m, Tensor, m, 4);
  for (const [name, cls] of Object.entries(nn)) {
    await fuzz("new nn." + name, { make: (...a) => new cls(...a) }, "make", 4);
    const made = { Embedding: () => emb, LayerNorm: () => ln, Linear: () => lin, GroupNorm: () => new cls(1, 2),
      LSTMCell: () => new cls(2, 2) };
    const convolution = /^Conv/.test(name);
    const layer = (made[name] ?? (() => (convolution ? new cls(1, 1, 1) : new cls(2))))();
    for (const m of methods(cls.prototype)) await fuzz("nn." + name + "." + m, layer, m, 2);
  }
  for (const name of Object.keys(optim)) await fuzz("optim." + name, optim, name, 2);
  for (const m of methods(raw.Optim.prototype)) await fuzz("Optim." + m, opt, m, 1);
  for (const m of methods(raw.TinyJitJs.prototype)) await fuzz("TinyJitJs." + m, rawJit, m, 1);
  for (const name of ["withContext", "safeSave", "safeLoad", "safeLoadMetadata", "torchLoad",
    "getStateDict", "getParameters", "loadStateDict", "tidy", "jit", "globalCounters", "defaultDevice",
    "resetGlobalCounters"]) {
    await fuzz(name, w, name, 3);
  }
  await fuzz("setDebug", w, "setDebug", 1);
  w.setDebug(0);
  for (const name of ["mnistFromBytes", "sameTensor", "mnistFiles", "endScope"]) await fuzz("raw." + name, raw, name, 4);
  await fuzz("datasets.mnist", w.datasets, "mnist", 1);
  await works("the fuzzing");

  // Random calls: a seeded generator picks one of the functions and methods above, how many
  // arguments it gets and each argument, from the wrong values and from plausible ones (which
  // get past the first checks and reach deeper code), for at most RANDOM_MS; results are
  // computed, so scheduling, code generation and the kernels run too.
  let state = 0x5eed;
  const rnd = (n) => {
    state = (state + 0x6d2b79f5) | 0;
    let t = Math.imul(state ^ (state >>> 15), 1 | state);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) % n;
  };
  const plausible = [Tensor.ones([2, 3]), Tensor.randn([3]), new Tensor([1, 2, 3], [3], "int32"), Tensor.zeros([2, 1, 3]),
    Tensor.randn([3, 2]), 0, 1, 2, -1, 3, 0.5, [2, 3], [3, 2], [1, 0], [0, 1], [-1], [[1, 2], [3, 4]], "float32", "int32",
    "bool", { lr: 0.1 }, { keepdim: true }, { TRAINING: 1 }, () => Tensor.ones([1]), new Float32Array([1, 2, 3])];
  const RANDOM_MS = 30_000;
  const r0 = performance.now(), rc0 = calls;
  while (performance.now() - r0 < RANDOM_MS) {
    const { what, target, name, arity } = targets[rnd(targets.length)];
    const pick = () => (rnd(2) ? bad[rnd(bad.length)] : plausible[rnd(plausible.length)]);
    const args = Array.from({ length: rnd(arity + 2) }, pick);
    const e = await outcome(what + " (random)", () => target[name](...args), true);
    if (e && /null pointer|unreachable|recursive use/.test(e.message)) problems.push(what + " (random): " + e.message);
  }
  const randomCalls = calls - rc0;
  console.log("fuzz random: " + randomCalls + " calls, " + (performance.now() - r0).toFixed(0) + " ms");
  await works("the random calls");
  window.errorResult = { problems, seen, calls, threw, randomCalls };
} catch (e) {
  console.error(e);
  window.errorResult = { error: String((e && e.stack) || e) };
}
</script>`;

async function launch() {
  let chromium;
  try {
    ({ chromium } = await import("playwright-core"));
  } catch {
    fail("playwright-core is missing: run `npm install` in the repository root");
  }
  if (!existsSync(CHROMIUM)) fail(`no browser at ${CHROMIUM} (apt-get install chromium, or set CHROMIUM)`);
  return chromium.launch({ executablePath: CHROMIUM, headless: true, args: ARGS });
}

/**
 * Open `url`, wait until `window[key]` is set, and return it with the problems seen: page errors,
 * console errors and failed requests. `echo` prints the page's console lines as they come.
 */
async function runPage(browser, url, key, { timeoutMs, echo, context }) {
  // A page of its own context (fresh storage), or of `context` (its IndexedDB kept between pages).
  const page = await (context ?? browser).newPage();
  const problems = [];
  page.on("pageerror", (e) => problems.push(`page error: ${e.message}`));
  page.on("console", (m) => {
    if (m.type() === "error") problems.push(`console error: ${m.text()}`);
    if (echo || VERBOSE || m.type() === "warning") console.log(`  [page ${m.type()}] ${m.text()}`);
  });
  // Chromium reports net::ERR_ABORTED for a fetch whose body the page streams while it still
  // loads (datasets.mnist through DecompressionStream), though every byte arrives: not a failure.
  page.on("requestfailed", (r) => {
    const why = r.failure()?.errorText;
    if (why !== "net::ERR_ABORTED") problems.push(`request failed: ${r.url()} (${why})`);
  });
  page.on("response", (r) => {
    if (r.status() >= 400) problems.push(`HTTP ${r.status()} for ${r.url()}`);
  });
  page.on("crash", () => problems.push("the page crashed"));
  const t0 = Date.now();
  // A page error (a syntax error, say) fails the page anyway: stop waiting at once.
  const broken = new Promise((_, reject) => page.once("pageerror", () => reject(new Error("a page error"))));
  broken.catch(() => {});
  try {
    await page.goto(url, { waitUntil: "load", timeout: 120_000 });
    await Promise.race([
      page.waitForFunction((k) => window[k] !== undefined, key, { timeout: timeoutMs, polling: 500 }),
      broken,
    ]);
  } catch (e) {
    problems.push(`no window.${key} after ${((Date.now() - t0) / 1000).toFixed(0)} s: ${e.message.split("\n")[0]}`);
    await page.close().catch(() => {});
    return { result: null, problems, seconds: (Date.now() - t0) / 1000 };
  }
  const result = await page.evaluate((k) => window[k], key);
  await page.close();
  return { result, problems, seconds: (Date.now() - t0) / 1000 };
}

async function packageTest(browser) {
  for (const f of ["pkg/web/wgrad.js", "pkg/web/wgrad_bg.wasm"]) {
    if (!existsSync(join(ROOT, f))) fail(`${f} is missing: build the package first (bash scripts/build_web.sh)`);
  }
  if (existsSync(join(ROOT, "pkg/web/.gitignore"))) {
    fail("pkg/web/.gitignore (wasm-pack writes one holding `*`) makes `npm pack` leave out pkg/web: " +
      "delete it after the build (scripts/build_web.sh should `rm -f pkg/*/.gitignore`)");
  }
  const dir = mkdtempSync(join(tmpdir(), "wgrad-pack-"));
  try {
    execFileSync("npm", ["pack", "--silent", "--pack-destination", dir], { cwd: ROOT, stdio: ["ignore", "pipe", "inherit"] });
    const tgz = readdirSync(dir).find((f) => f.endsWith(".tgz"));
    if (!tgz) fail("npm pack made no tarball");
    execFileSync("tar", ["-xzf", tgz], { cwd: dir });
    const files = execFileSync("tar", ["-tzf", tgz], { cwd: dir, encoding: "utf8" }).trim().split("\n");
    console.log(`package: ${tgz}, ${files.length} files: ${files.map((f) => f.replace(/^package\//, "")).join(", ")}`);
    for (const f of ["js/wgrad.js", "js/wgrad.d.ts", "pkg/web/wgrad.js", "pkg/web/wgrad.d.ts", "pkg/web/wgrad_bg.wasm"]) {
      if (!files.includes(`package/${f}`)) fail(`npm pack left out ${f} (check "files" in package.json)`);
    }
    writeFileSync(join(dir, "index.html"), PACKAGE_PAGE);
    writeFileSync(join(dir, "errors.html"), ERRORS_PAGE);
    const srv = await serve({ port: 0, root: dir });
    try {
      // One browser context: the second load of the WebGPU page finds the first one's plans in
      // IndexedDB (init's plan cache) and must train to the same losses with them.
      const context = await browser.newContext();
      let first = null;
      for (const device of ["webgpu", "webgpu", "cpu"]) {
        const url = `${srv.url}index.html${device === "cpu" ? "?device=cpu" : ""}`;
        const { result: r, problems, seconds } = await runPage(browser, url, "testResult", { timeoutMs: Math.min(TIMEOUT_MS, 600_000), context });
        const what = `package test on ${device === "cpu" ? 'init({ device: "cpu" })' : "init()"}`;
        if (r?.error) problems.push(`the page threw: ${r.error}`);
        if (r && !r.error) {
          if (r.device !== device || r.tensorDevice !== device) {
            problems.push(`init gave device ${r.device} (tensors on ${r.tensorDevice}), expected ${device}`);
          }
          if (!(r.launches > 0)) problems.push(`the jit replays no kernels (launches ${r.launches})`);
          if (!(r.plansSaved > 0)) problems.push(`savePlanCache() saved ${r.plansSaved} plans`);
          if (device === "webgpu" && first) {
            if (!(r.plansFromCache >= first.plansSaved)) {
              problems.push(`the reloaded page found ${r.plansFromCache} plans in IndexedDB; the first saved ${first.plansSaved}`);
            }
            if (r.losses.join() !== first.losses.join()) problems.push(`with remembered plans the losses differ: ${r.losses} vs ${first.losses}`);
          }
          if (!(r.after < r.before * 0.5)) problems.push(`loss did not fall enough: ${r.before} -> ${r.after}`);
          if (r.reloaded !== r.after) problems.push(`weights saved and loaded give loss ${r.reloaded}, not ${r.after}`);
          if (r.stateNames !== "l1.weight,l1.bias,l2.weight,l2.bias") problems.push(`state dict names: ${r.stateNames}`);
          if (r.seq !== "3,3") problems.push(`sequential gave ${r.seq}, not 3,3`);
          // package.json starts with "{" (123).
          if (r.fetched[0] !== "uint8" || !(r.fetched[1] > 100) || r.fetched[2] !== 123) {
            problems.push(`Tensor.fromUrl(package.json) gave ${JSON.stringify(r.fetched)}`);
          }
          // WebGPU times every kernel on the device; the interpreter on the host clock. Both clocks
          // are coarsened by the browser (Chromium quantizes timestamp queries), so a fast kernel
          // can read 0: every kernel must print a time, and most of them a positive one.
          const positive = r.debugMs.filter((ms) => ms > 0).length;
          const timedOk = r.debugMs.every((ms) => ms >= 0) &&
            (device === "webgpu" ? positive * 2 > r.debugMs.length : positive > 0);
          if (!(r.debugMs.length > 0 && timedOk)) problems.push(`DEBUG=2 printed kernel times ${JSON.stringify(r.debugMs)}`);
          if (!r.losses.every(Number.isFinite)) problems.push(`non-finite training loss: ${r.losses}`);
          // Memory stays flat once the step is captured: no more live tensors and buffers (fewer
          // when the garbage collector frees handles the page dropped: weak references).
          // The stages before the kernels ran were timed (the page compiled every kernel).
          for (const [k, v] of Object.entries(r.stages)) if (!(v > 0)) problems.push(`globalCounters().${k} is ${v}, expected > 0`);
          const [a, b] = [r.live[4], r.live[r.live.length - 1]];
          if (b[0] > a[0] || b[1] > a[1]) problems.push(`live tensors/buffers grew over the replays: ${a} -> ${b}`);
        }
        const hl = r.half.losses;
        if (r.half.dtype !== "float16" || !hl.every(Number.isFinite) || !(hl.at(-1) < hl[0] / 2)) {
          problems.push(`the float16 MLP (${r.half.dtype} weights) did not train: ${hl.map((v) => v.toFixed(4)).join(" ")}`);
        }
        if (problems.length) fail(`${what}:\n  ${problems.join("\n  ")}`);
        console.log(`ok: ${what}: float16 MLP ${hl[0].toPrecision(4)} -> ${hl.at(-1).toPrecision(4)} in ${hl.length} jitted steps` +
          (device === "webgpu" ? ` (shader-f16: ${r.half.native ? "float16 stored natively" : "not offered, float16 packed in words"})` : ""));
        // The first step's loss is taken at the initial weights, so it should equal `before`.
        if (Math.abs(r.losses[0] - r.before) > 1e-4 * Math.max(1, r.before)) {
          console.log(`  WARNING: the first jitted step returned loss ${r.losses[0]}, but the loss at the initial ` +
            `weights is ${r.before} (the loss realized after opt.step() reads updated weights: an engine bug)`);
        }
        console.log(
          `ok: ${what}${r.adapter ? ` (adapter "${r.adapter}")` : ""}: loss ${r.before.toPrecision(4)} -> ${r.after.toPrecision(4)} ` +
            `after ${r.losses.length} jitted steps (${r.launches} kernels per replay; live tensors/buffers ` +
            `${r.live.at(-1)[0]}/${r.live.at(-1)[1]}); ${Object.entries(r.stages).map(([k, v]) => `${k} ${v.toFixed(0)}`).join(", ")}; DEBUG=2 timed ${r.debugMs.length} kernels: ${r.debugMs.map((v) => v.toFixed(3)).join(", ")} ms; ${seconds.toFixed(1)} s`,
        );
        if (device === "webgpu" && first) {
          console.log(`ok: the page loaded again found ${r.plansFromCache} kernel plans in IndexedDB and trained to the same losses`);
          continue;
        }
        if (device === "webgpu") first = r;
        await errorsTest(browser, `${srv.url}errors.html${device === "cpu" ? "?device=cpu" : ""}`, device);
      }
      await context.close();
    } finally {
      await srv.close();
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** The error page on one device: every reproduction throws an Error naming its op, no call traps. */
async function errorsTest(browser, url, device) {
  const { result: r, problems, seconds } = await runPage(browser, url, "errorResult", { timeoutMs: Math.min(TIMEOUT_MS, 600_000) });
  if (r?.error) problems.push(`the page threw: ${r.error}`);
  if (r && !r.error) problems.push(...r.problems);
  const what = `error test on ${device}`;
  if (problems.length) fail(`${what}:\n  ${problems.join("\n  ")}`);
  if (VERBOSE) for (const line of r.seen) console.log(`  ${line}`);
  console.log(`ok: ${what}: ${r.seen.length} reproductions throw an Error naming the op; ${r.calls} calls with bad ` +
    `arguments (${r.randomCalls} of them random), ${r.threw} errors, no wasm trap; the engine still computes, ${seconds.toFixed(1)} s`);
}

async function repoPage(browser, srv, page, query, key, timeoutMs = TIMEOUT_MS, context = undefined) {
  const url = `${srv.url}www/${page}?${new URLSearchParams(query)}`;
  console.log(`opening ${url}`);
  const { result, problems, seconds } = await runPage(browser, url, key, { timeoutMs, echo: true, context });
  if (result?.error) problems.push(`the page failed: ${result.error}`);
  if (problems.length) fail(`${page}:\n  ${problems.join("\n  ")}`);
  return { result, seconds };
}

async function main() {
  const browser = await launch();
  try {
    console.log(`browser: ${CHROMIUM} ${browser.version()} (${ARGS.join(" ")})`);
    if (!flags.has("no-package")) await packageTest(browser);
    if (["bench", "bench-tfjs", "bench-jaxjs", "bench-gpt", "bench-gpt-jaxjs", "bench-matmul", "long", "threads-test"].some((f) => flags.has(f))) {
      const srv = await serve({ port: 0, root: ROOT, isolated: flags.has("isolated") });
      try {
        const device = flags.get("device");
        const dev = device ? { device } : {};
        if (flags.has("bench")) {
          const q = { bs: flags.get("bs") ?? 128, steps: flags.get("steps") ?? 5, ...dev };
          const { result, seconds } = await repoPage(browser, srv, "bench.html", q, "benchResult");
          console.log(`BENCH ${JSON.stringify(result)}`);
          console.log(`bench page took ${seconds.toFixed(0)} s`);
        }
        if (flags.has("long")) {
          const q = { long: flags.get("long"), bs: flags.get("bs") ?? 32, ...dev };
          // Up to 5 s a step on a software adapter, unless --timeout says more.
          const timeout = Math.max(TIMEOUT_MS, Number(q.long) * 5000);
          const { result: r, seconds } = await repoPage(browser, srv, "bench.html", q, "benchResult", timeout);
          console.log(`LONG ${JSON.stringify(r)}`);
          if (r.changed) fail(`live tensors/buffers/bytes changed at step ${r.changed.step}: ${r.changed.was} -> ${r.changed.now}`);
          if (!(r.last < r.first)) fail(`the loss did not fall: ${r.first} -> ${r.last}`);
          console.log(`ok: ${r.steps} jitted steps (Adam, batch ${r.bs}) in ${seconds.toFixed(0)} s, ${r.msPerStep.toFixed(1)} ms/step, loss ` +
            `${r.first.toFixed(3)} -> ${r.last.toFixed(3)}; live tensors/buffers/bytes ${r.live.join("/")} from step 5 on, flat`);
        }
        if (flags.has("bench-tfjs")) {
          for (const f of ["tfjs/dist/tf.fesm.min.js", "tfjs-backend-webgpu/dist/tf-backend-webgpu.fesm.min.js"]) {
            if (!existsSync(join(ROOT, "node_modules/@tensorflow", f))) fail(`node_modules/@tensorflow/${f} is missing: run \`npm install\``);
          }
          const q = { bs: flags.get("bs") ?? 128, steps: flags.get("steps") ?? 5 };
          const { result, seconds } = await repoPage(browser, srv, "bench_tfjs.html", q, "benchResult");
          console.log(`BENCH ${JSON.stringify(result)}`);
          console.log(`tfjs bench page took ${seconds.toFixed(0)} s`);
        }
        for (const [flag, page, lib] of [["bench-gpt", "bench_gpt.html", "wgrad"], ["bench-gpt-jaxjs", "bench_gpt_jaxjs.html", "jax-js"]]) {
          if (!flags.has(flag)) continue;
          if (lib === "jax-js" && !existsSync(join(ROOT, "node_modules/@jax-js/jax/dist/index.js"))) fail("node_modules/@jax-js/jax is missing: run `npm install`");
          const size = flags.get("size") ?? "small";
          const sizes = { small: { nLayer: 2, nHead: 4, nEmbd: 64, block: 64, bs: 16 }, medium: { nLayer: 4, nHead: 4, nEmbd: 128, block: 128, bs: 32 } };
          if (!sizes[size]) fail(`--size must be small or medium, got ${size}`);
          const q = { ...sizes[size], steps: flags.get("steps") ?? 5 };
          if (flags.has("bs")) q.bs = flags.get("bs");
          if (lib === "wgrad" && flags.has("device")) q.device = flags.get("device");
          if (lib === "wgrad" && flags.has("first")) q.first = flags.get("first");
          if (lib === "jax-js") q.backend = flags.get("backend") ?? "webgpu";
          // --reload: the page twice in one browser context (the second load has the first's
          // IndexedDB: wgrad's plan cache), both BENCH lines printed.
          const context = flags.has("reload") ? await browser.newContext() : undefined;
          for (let load = 0; load < (context ? 2 : 1); load++) {
            const { result, seconds } = await repoPage(browser, srv, page, q, "benchResult", TIMEOUT_MS, context);
            console.log(`BENCH ${JSON.stringify(result)}`);
            console.log(`${lib} GPT bench page took ${seconds.toFixed(0)} s`);
          }
          await context?.close();
        }
        if (flags.has("threads-test")) {
          // WebAssembly kernels on one thread (this page is not cross-origin isolated) and on
          // every core (a second server sends COOP/COEP): the same GPT losses, bit for bit.
          const q = { nLayer: 2, nHead: 4, nEmbd: 64, block: 64, bs: 16, steps: 2, device: "wasm" };
          const iso = await serve({ port: 0, root: ROOT, isolated: true });
          try {
            const { result: one } = await repoPage(browser, srv, "bench_gpt.html", q, "benchResult");
            const { result: many } = await repoPage(browser, iso, "bench_gpt.html", q, "benchResult");
            if (one.threads !== 1) fail(`threads-test: a page that is not isolated ran ${one.threads} threads`);
            if (!(many.threads >= 2)) fail(`threads-test: the isolated page ran ${many.threads} thread(s)`);
            if (one.losses.join() !== many.losses.join()) fail(`threads-test: losses ${one.losses} on 1 thread, ${many.losses} on ${many.threads}`);
            console.log(`ok: threads: the GPT's losses on ${many.threads} threads equal one thread's (${one.msPerStep} -> ${many.msPerStep} ms/step)`);
          } finally {
            await iso.close();
          }
        }
        if (flags.has("bench-matmul")) {
          const q = { sizes: flags.get("sizes") ?? "64,128", chain: flags.get("chain") ?? 2, steps: flags.get("steps") ?? 1 };
          const { result: r, seconds } = await repoPage(browser, srv, "bench_matmul.html", q, "benchResult");
          console.log(`BENCH ${JSON.stringify(r)}`);
          const libs = ["wgrad", "jax-js", "tfjs"];
          const sizes = String(q.sizes).split(",").length;
          for (const lib of libs) {
            const rows = r.rows.filter((x) => x.lib === lib);
            if (rows.length !== sizes + 1 || rows.some((x) => !(x.gflops > 0))) {
              fail(`bench_matmul: ${lib} gave ${JSON.stringify(rows)} (errors: ${JSON.stringify(r.errors)})`);
            }
          }
          console.log(`ok: matmul page, ${r.rows.length} rows from ${libs.join(", ")} in ${seconds.toFixed(0)} s`);
        }
        if (flags.has("bench-jaxjs")) {
          if (!existsSync(join(ROOT, "node_modules/@jax-js/jax/dist/index.js"))) fail("node_modules/@jax-js/jax is missing: run `npm install`");
          const q = { bs: flags.get("bs") ?? 128, steps: flags.get("steps") ?? 5, backend: flags.get("backend") ?? "webgpu" };
          const { result, seconds } = await repoPage(browser, srv, "bench_jaxjs.html", q, "benchResult");
          console.log(`BENCH ${JSON.stringify(result)}`);
          console.log(`jax-js bench page took ${seconds.toFixed(0)} s`);
        }
      } finally {
        await srv.close();
      }
    }
  } finally {
    await browser.close();
  }
  console.log("page_test: all passed");
}

main().catch((e) => fail(e?.stack ?? String(e)));

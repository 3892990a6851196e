// Node.js test of the npm package: `npm pack`s the repository into a temp dir, imports the
// unpacked package's js/wgrad.js in this Node process and checks that
//   - `init()` loads the engine's .wasm from the package's files (Node's fetch reads no file:
//     URLs) and, Node having no WebGPU, falls back to the interpreter with one console warning;
//   - `init({ device: "webgpu" })` throws an Error naming `init` and why, never a trap;
//   - a small MLP (Linear(4,16) → relu → Linear(16,3), Adam, 20 jitted steps) trains there: the
//     loss falls below half its start;
//   - a wrong argument throws an Error naming its op, and the engine works afterwards.
// The package must be built first (bash scripts/build_web.sh). Exits non-zero on any failure.
//
//   node scripts/node_test.mjs

import { execFileSync } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const ROOT = fileURLToPath(new URL("..", import.meta.url));
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
  if (info.device !== "cpu") fail(`init() picked ${info.device}, expected the interpreter ("cpu")`);
  if (warnings.length !== 1 || !/WebGPU unavailable/.test(warnings[0])) {
    fail(`init() should warn once that WebGPU is unavailable, warned: ${JSON.stringify(warnings)}`);
  }
  console.log(`init(): ${info.device} (${warnings[0]})`);

  let err = null;
  try {
    await init({ device: "webgpu" });
  } catch (e) {
    err = e;
  }
  if (!(err instanceof Error) || !/^init: /.test(err.message) || !/webgpu/i.test(err.message)) {
    fail(`init({ device: "webgpu" }) should throw an Error naming init and WebGPU, got ${err && err.message}`);
  }
  console.log(`init({ device: "webgpu" }) throws: ${err.message}`);

  Tensor.manualSeed(1);
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
  const step = jit((x, y) => withContext({ TRAINING: 1 }, () => {
    opt.zeroGrad();
    const loss = model(x).sparseCategoricalCrossentropy(y);
    loss.backward();
    opt.step();
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
    fail(`the MLP did not train: losses ${losses.map((v) => v.toFixed(4)).join(" ")}`);
  }
  console.log(`MLP on ${info.device}: loss ${losses[0].toFixed(4)} -> ${losses.at(-1).toFixed(4)} in 20 jitted steps (${ms.toFixed(1)} ms/step)`);

  err = null;
  try {
    new nn.Linear(4, "x");
  } catch (e) {
    err = e;
  }
  if (!(err instanceof Error) || !/Linear/.test(err.message)) fail(`new nn.Linear(4, "x") should throw an Error naming Linear, got ${err && err.message}`);
  const after = await Tensor.ones([3]).sum().item();
  if (after !== 3) fail(`the engine after an error: ones(3).sum() = ${after}`);
  console.log("node test: ok");
} finally {
  rmSync(dir, { recursive: true, force: true });
}

// The matmul and convolution benchmark page's script, the browser twin of
// examples/bench_matmul.rs: for each library (wgrad, jax-js, TensorFlow.js) on the WebGPU adapter
// the page finds, square f32 products x·w of each size N, `chain` of them in a row (w scaled by
// 1/√N so values stay O(1)) and summed, as one jitted function (tfjs: one `tidy`), timed until
// the sum is read back; and the tutorial's conv2 forward at batch 128 ([128,32,13,13] with
// [64,32,3,3] weights, valid padding: 571 MFLOP), `chain` times on shifted inputs. GFLOP/s from
// the median of `steps` timed calls after 2 warm-up calls (the first compiles). Prints a table,
// sets `window.benchResult` and logs "BENCH {json}" (or "BENCH_ERROR message"). Query knobs:
// sizes (256,512,1024,2048), chain (8), steps (5), libs (wgrad,jaxjs,tfjs), conv (1).

import { init, Tensor, jit, tidy } from "../js/wgrad.js";
import { adapterName, log, median, report, runBench } from "./bench_common.js";

const q = new URLSearchParams(location.search);
const SIZES = (q.get("sizes") ?? "256,512,1024,2048").split(",").map(Number).filter((n) => n > 0);
const CHAIN = Math.max(1, Number(q.get("chain") ?? 8));
const STEPS = Math.max(1, Number(q.get("steps") ?? 5)), WARMUP = 2;
const LIBS = (q.get("libs") ?? "wgrad,jaxjs,tfjs").split(",");
const CONV = q.get("conv") !== "0";
// The tutorial's conv2 forward: batch, in and out channels, input side, kernel side.
const [CB, CI, CO, CS, CK] = [128, 32, 64, 13, 3];
const CONV_FLOP = 2 * CB * CO * (CS - CK + 1) ** 2 * CI * CK * CK;

/** Median seconds of `STEPS` calls of `call` (an async function returning the read-back sum). */
async function time(what, call) {
  const times = [];
  for (let i = 0; i < STEPS + WARMUP; i++) {
    const t0 = performance.now();
    const v = await call();
    const s = (performance.now() - t0) / 1e3;
    if (!Number.isFinite(v)) throw new Error(`${what}: the sum ${v} is not finite`);
    if (i >= WARMUP) times.push(s);
  }
  return median(times);
}

/** One library's rows: { lib, op, n, gflops, msPerOp }. */
const LIBRARIES = {
  async wgrad() {
    const info = await init({ device: "webgpu" });
    if (info.device !== "webgpu") throw new Error(`wgrad runs on ${info.device}, not webgpu`);
    Tensor.manualSeed(0);
    const rows = [];
    for (const n of SIZES) {
      const x = Tensor.randn([n, n]).realize(), w = Tensor.randn([n, n]).mul(1 / Math.sqrt(n)).realize();
      const f = jit(() => {
        let y = x;
        for (let i = 0; i < CHAIN; i++) y = y.matmul(w);
        return y.sum().realize();
      });
      const t = await time(`wgrad matmul ${n}`, async () => {
        const s = tidy(() => f());
        const v = await s.item();
        s.dispose();
        return v;
      });
      rows.push(row("wgrad", "matmul", n, (2 * n ** 3 * CHAIN) / t, t));
      x.dispose();
      w.dispose();
    }
    if (CONV) {
      const x = Tensor.randn([CB, CI, CS, CS]).realize(), w = Tensor.randn([CO, CI, CK, CK]).mul(0.06).realize();
      const f = jit(() => {
        let s = null;
        for (let i = 0; i < CHAIN; i++) {
          const c = x.add(i).conv2d(w).sum();
          s = s ? s.add(c) : c;
        }
        return s.realize();
      });
      const t = await time("wgrad conv2", async () => {
        const s = tidy(() => f());
        const v = await s.item();
        s.dispose();
        return v;
      });
      rows.push(row("wgrad", "conv2 forward", CB, (CONV_FLOP * CHAIN) / t, t));
    }
    return rows;
  },

  async jaxjs() {
    const { init: jinit, defaultDevice, jit: jjit, lax, numpy: np, random } = await import("@jax-js/jax");
    const devices = await jinit("webgpu");
    if (!devices.includes("webgpu")) throw new Error(`jax-js could not start its WebGPU device (devices: ${devices})`);
    defaultDevice("webgpu");
    const rows = [];
    let key = random.key(0);
    const next = () => {
      const ks = random.split(key, 2);
      key = ks.ref.slice(0);
      return ks.slice(1);
    };
    for (const n of SIZES) {
      const x = random.normal(next(), [n, n]), w = random.normal(next(), [n, n]).mul(1 / Math.sqrt(n));
      // jax-js arrays are consumed by each use: `.ref` keeps one for later.
      const f = jjit((x, w) => {
        let y = x;
        for (let i = 0; i < CHAIN; i++) y = np.dot(y, i < CHAIN - 1 ? w.ref : w);
        return y.sum();
      });
      const t = await time(`jax-js matmul ${n}`, async () => (await f(x.ref, w.ref).data())[0]);
      rows.push(row("jax-js", "matmul", n, (2 * n ** 3 * CHAIN) / t, t));
      x.dispose();
      w.dispose();
    }
    if (CONV) {
      const x = random.normal(next(), [CB, CI, CS, CS]), w = random.normal(next(), [CO, CI, CK, CK]).mul(0.06);
      const f = jjit((x, w) => {
        let s = null;
        for (let i = 0; i < CHAIN; i++) {
          const last = i === CHAIN - 1;
          const c = lax.conv((last ? x : x.ref).add(i), last ? w : w.ref, [1, 1], "VALID").sum();
          s = s ? s.add(c) : c;
        }
        return s;
      });
      const t = await time("jax-js conv2", async () => (await f(x.ref, w.ref).data())[0]);
      rows.push(row("jax-js", "conv2 forward", CB, (CONV_FLOP * CHAIN) / t, t));
    }
    return rows;
  },

  async tfjs() {
    const tf = await import("@tensorflow/tfjs-core");
    await import("../node_modules/@tensorflow/tfjs-backend-webgpu/dist/tf-backend-webgpu.fesm.min.js");
    if (!(await tf.setBackend("webgpu"))) throw new Error("tfjs could not initialise its WebGPU backend");
    await tf.ready();
    const rows = [];
    for (const n of SIZES) {
      const x = tf.randomNormal([n, n]), w = tf.mul(tf.randomNormal([n, n]), 1 / Math.sqrt(n));
      const t = await time(`tfjs matmul ${n}`, async () => {
        const s = tf.tidy(() => {
          let y = x;
          for (let i = 0; i < CHAIN; i++) y = tf.matMul(y, w);
          return tf.sum(y);
        });
        const v = (await s.data())[0];
        s.dispose();
        return v;
      });
      rows.push(row("tfjs", "matmul", n, (2 * n ** 3 * CHAIN) / t, t));
      tf.dispose([x, w]);
    }
    if (CONV) {
      // tfjs convolutions are NHWC with HWIO filters: the same FLOPs.
      const x = tf.randomNormal([CB, CS, CS, CI]), w = tf.mul(tf.randomNormal([CK, CK, CI, CO]), 0.06);
      const t = await time("tfjs conv2", async () => {
        const s = tf.tidy(() => {
          let s = null;
          for (let i = 0; i < CHAIN; i++) {
            const c = tf.sum(tf.conv2d(tf.add(x, i), w, 1, "valid"));
            s = s ? tf.add(s, c) : c;
          }
          return s;
        });
        const v = (await s.data())[0];
        s.dispose();
        return v;
      });
      rows.push(row("tfjs", "conv2 forward", CB, (CONV_FLOP * CHAIN) / t, t));
      tf.dispose([x, w]);
    }
    return rows;
  },
};

function row(lib, op, n, flops, seconds) {
  // Three significant digits: a small product on a software adapter runs at a few hundredths of
  // a GFLOP/s, which one decimal rounded to 0.
  const r = { lib, op, n, gflops: +(flops / 1e9).toPrecision(3), msPerOp: +((seconds * 1e3) / CHAIN).toFixed(3) };
  log(`${lib.padEnd(7)} ${op.padEnd(14)} ${String(n).padStart(5)}: ${String(r.gflops).padStart(8)} GFLOP/s (${r.msPerOp} ms per ${op === "matmul" ? "product" : "convolution"})`);
  return r;
}

async function main() {
  if (!navigator.gpu) throw new Error("navigator.gpu is missing: no WebGPU in this browser");
  const adapter = await adapterName();
  log(`adapter ${adapter}; sizes ${SIZES.join(", ")}, chain ${CHAIN}, ${STEPS} timed calls`);
  const result = { adapter, chain: CHAIN, steps: STEPS, rows: [], errors: {} };
  for (const lib of LIBS) {
    const run = LIBRARIES[lib];
    if (!run) throw new Error(`unknown library ${lib} (known: ${Object.keys(LIBRARIES).join(", ")})`);
    try {
      result.rows.push(...(await run()));
    } catch (e) {
      // One library failing (a missing package, an unsupported op) leaves the others' rows.
      result.errors[lib] = String(e?.message ?? e);
      log(`${lib}: ${result.errors[lib]}`);
    }
  }
  report(result);
}

runBench(main);

//! The JavaScript API (wasm-bindgen), the only module that names wasm_bindgen. It mirrors the
//! Rust API in camelCase: `Tensor` with its ops, nn layers, optimizers, the TinyJit, contexts,
//! datasets and counters; `js/wgrad.js` adds the namespaces (`nn`, `optim`, `datasets`),
//! `init`, `jit`, `tidy`, `getParameters` and the state-dict helpers on top.
//!
//! * here: tensor handles and their registry, errors that name the op;
//! * `args.rs`: argument conversion, one `FromJs` trait for every argument type;
//! * `tensor.rs`: the `Tensor` class (its ops come from the op table, `crate::for_each_op!`);
//! * `nn.rs`, `optim.rs`, `jit.rs`: layers, optimizers, the TinyJit;
//! * `engine.rs`: init, devices, contexts, `tidy` scopes, counters, datasets, safetensors.
//!
//! A JS `Tensor` is a handle: the engine's tensor lives in a registry keyed by the handle's id,
//! so `dispose()` (or `tidy`, or the handle being garbage-collected: the package is built with
//! weak references) releases its buffers at once, and every argument is looked up there, which
//! turns a disposed tensor or a non-tensor into an error naming the op. No function here
//! panics on bad input: every failure is a thrown JS `Error`.

mod args;
mod engine;
mod jit;
mod nn;
mod optim;
mod tensor;

pub use engine::*;
pub use jit::TinyJitJs;
pub use nn::{
    BatchNorm, Conv1d, Conv2d, ConvTranspose1d, ConvTranspose2d, Embedding, GroupNorm,
    InstanceNorm, LSTMCell, LayerNorm, LayerNorm2d, Linear, RMSNorm,
};
pub use optim::{adam, adamw, clip_grad_norm_js, lamb, lars, muon, optimizer_group, sgd, Optim};

use crate::Tensor;
use js_sys::Array;
use std::cell::RefCell;
use std::collections::HashMap;
use wasm_bindgen::prelude::*;

type JsResult<T> = std::result::Result<T, JsError>;

#[wasm_bindgen(typescript_custom_section)]
const TS_TYPES: &str = r#"
/** A tensor's element type. */
export type DType = "float32" | "float16" | "bfloat16" | "int32" | "uint32" | "uint8" | "bool";
/** How a loss combines its per-element values: their mean, their sum, or none (kept). */
export type Reduction = "mean" | "sum" | "none";
/** One index of `get`/`set`: a number, a slice ("1:-1", "::-1", or an object), null (a new
 * axis), "...", an integer Tensor or an array of integers. */
export type Index = number | string | null | number[] | Tensor | { start?: number | null; stop?: number | null; step?: number };
/** Options of `conv2d` and `nn.Conv2d` (defaults: stride 1, "valid" padding, dilation 1, 1 group). */
export interface Conv2dOptions {
  stride?: number | [number, number];
  padding?: number | [number, number] | "valid" | "same";
  dilation?: number | [number, number];
  groups?: number;
}
/** Options of `conv1d` and `nn.Conv1d` (defaults: stride 1, "valid" padding, dilation 1, 1 group). */
export interface Conv1dOptions {
  stride?: number;
  padding?: number | "valid" | "same";
  dilation?: number;
  groups?: number;
}
/**
 * Options of `convTranspose2d` and `nn.ConvTranspose2d`, as PyTorch's: the output size is
 * `(in - 1) * stride - 2 * padding + dilation * (kernel - 1) + outputPadding + 1`.
 */
export interface ConvTranspose2dOptions {
  stride?: number | [number, number];
  padding?: number | [number, number];
  outputPadding?: number | [number, number];
  dilation?: number | [number, number];
  groups?: number;
}
/** Options of `convTranspose1d` and `nn.ConvTranspose1d`, as `ConvTranspose2dOptions` in one dimension. */
export interface ConvTranspose1dOptions {
  stride?: number;
  padding?: number;
  outputPadding?: number;
  dilation?: number;
  groups?: number;
}
/**
 * Options of `maxPool2d` and `avgPool2d`: `padding` on each side, `dilation` between window taps,
 * `ceilMode` (the output size rounds up), `countIncludePad` (the average divides by the whole
 * window, padding included).
 */
export interface Pool2dOptions {
  padding?: number | [number, number];
  dilation?: number | [number, number];
  ceilMode?: boolean;
  countIncludePad?: boolean;
}
/** How `pad` fills: with a constant, or from the tensor's own values (mirrored, edge, wrapped). */
export type PadMode = "constant" | "reflect" | "replicate" | "circular";
/** How `interpolate` resamples. */
export type InterpolateMode = "linear" | "bilinear" | "trilinear" | "nearest" | "nearest-exact";
/**
 * Options of `sparseCategoricalCrossentropy`: labels equal to `ignoreIndex` count for nothing;
 * `labelSmoothing` mixes the target with the uniform distribution (default 0).
 */
export interface CrossEntropyOptions {
  ignoreIndex?: number;
  labelSmoothing?: number;
  reduction?: Reduction;
}
/**
 * A learning-rate schedule (`Optim.setSchedule`, an optimizer's `schedule` option), as
 * PyTorch's schedulers: constant, `LinearLR`, `StepLR`, `ExponentialLR`, a linear warmup then
 * cosine decay, `OneCycleLR`. It runs on the device, so a jitted step follows it.
 */
export type LrScheduleOptions =
  | { kind: "constant" }
  | { kind: "linear"; startFactor?: number; endFactor?: number; totalSteps?: number }
  | { kind: "step"; stepSize: number; gamma?: number }
  | { kind: "exponential"; gamma: number }
  | { kind: "cosine"; totalSteps: number; warmupSteps?: number; startFactor?: number; minLr?: number }
  | { kind: "onecycle"; totalSteps: number; pctStart?: number; divFactor?: number; finalDivFactor?: number };
/**
 * Options of `init`: `device` forces WebGPU (an error without it), WebAssembly kernels
 * (`"wasm"`) or the CPU interpreter (`"cpu"`).
 */
/**
 * `device`: where tensors live (default WebGPU, else "wasm"). `half`: mixed precision (tinygrad's
 * `HALF=1`): float tensors made without a dtype (`zeros`, `rand`, layer weights) are float16,
 * computed and accumulated in float32, with float32 master weights in the optimizers.
 */
export interface InitOptions { device?: "webgpu" | "wasm" | "cpu"; half?: boolean; }
/** The WebGPU adapter the engine runs on, with the limits that shape its kernels. */
export interface AdapterInfo {
  name: string;
  backend: string;
  deviceType: string;
  driver: string;
  maxStorageBuffersPerStage: number;
  maxStorageBindingBytes: number;
  /** Whether kernels store float16 natively (the adapter's `shader-f16`). */
  shaderF16: boolean;
  /** The subgroup size long GPU sums combine through first (the adapter's `subgroups`, of one
   * size), else 0. */
  subgroupSize: number;
}
/** Options of `optim.GradScaler` (PyTorch's defaults: 65536, 2, 0.5, 2000). */
export interface GradScalerOptions { initScale?: number; growthFactor?: number; backoffFactor?: number; growthInterval?: number; }
/** What `init` picked: the device, the adapter where it is WebGPU, and whether float tensors
 * default to float16 (`half`). */
export interface InitInfo { device: "webgpu" | "wasm" | "cpu"; adapter: AdapterInfo | null; half: boolean; }
/**
 * Settings for `withContext(options, fn)`, in tinygrad's spelling or camelCase: training mode,
 * no gradient tracking, the debug level, the device new tensors go to, BEAM search width, and
 * how often a jitted replay is verified against an eager run (0: never), and mixed precision
 * (`HALF`: float tensors made without a dtype are float16).
 */
export interface ContextOptions {
  TRAINING?: boolean | number;
  NO_GRAD?: boolean | number;
  DEBUG?: number;
  DEVICE?: "webgpu" | "wasm" | "cpu";
  BEAM?: number;
  JIT_VERIFY?: number;
  HALF?: boolean | number;
  training?: boolean | number;
  noGrad?: boolean | number;
  debug?: number;
  device?: "webgpu" | "wasm" | "cpu";
  beam?: number;
  jitVerify?: number;
  half?: boolean | number;
}
/**
 * `globalCounters()`: kernels launched, scalar ops, bytes bound and kernel time (ms) since the
 * last reset; live tensors, buffers and their bytes now.
 */
export interface GlobalCounters {
  kernelCount: number;
  globalOps: number;
  globalMem: number;
  timeMs: number;
  liveTensors: number;
  liveBuffers: number;
  liveBytes: number;
  /** Host time spent scheduling, planning, lowering and compiling kernels (ms). */
  scheduleMs: number;
  planMs: number;
  lowerMs: number;
  compileMs: number;
}
/**
 * One launch of a captured step (`jit(fn).kernels()`): its name, invocations launched and per
 * workgroup, WGSL source, bytes bound and scalar ops.
 */
export interface KernelInfo {
  name: string;
  globalSize: number;
  localSize: number;
  source: string;
  bytes: number;
  ops: number;
}
/** `jit(fn).profile(...)`: each launch's time in ms, and whether the GPU or the host clock measured it. */
export interface KernelProfile { timer: "timestamp-query" | "host"; ms: number[]; }
/** MNIST-layout data: "uint8" images `[N, 1, 28, 28]` and labels `[N]`. */
export interface MnistData { xTrain: Tensor; yTrain: Tensor; xTest: Tensor; yTest: Tensor; }
"#;

/// An error that names the JS op (unless the engine's message already starts with it).
fn fail(op: &str, msg: impl std::fmt::Display) -> JsError {
    let msg = msg.to_string();
    let snake: String = op
        .chars()
        .flat_map(|c| {
            if c.is_ascii_uppercase() {
                vec!['_', c.to_ascii_lowercase()]
            } else {
                vec![c]
            }
        })
        .collect();
    if msg.starts_with(&format!("{op}:")) {
        JsError::new(&msg)
    } else if let Some(rest) = msg.strip_prefix(&format!("{snake}:")) {
        // The engine names the op in Rust's spelling; use the JS one.
        JsError::new(&format!("{op}:{rest}"))
    } else {
        JsError::new(&format!("{op}: {msg}"))
    }
}

trait OrFail<T> {
    fn or_fail(self, op: &str) -> JsResult<T>;
}

impl<T> OrFail<T> for crate::Result<T> {
    fn or_fail(self, op: &str) -> JsResult<T> {
        self.map_err(|e| fail(op, e))
    }
}

/// The message of a thrown JS value.
fn js_error_message(e: &JsValue) -> String {
    e.dyn_ref::<js_sys::Error>()
        .map(|e| String::from(e.message()))
        .or_else(|| e.as_string())
        .unwrap_or_else(|| format!("{e:?}"))
}

/// Runs when the module is instantiated: a Rust panic prints its message to the console, and
/// the engine's debug output (`setDebug`) goes to the console too.
#[wasm_bindgen(start)]
fn start() {
    console_error_panic_hook::set_once();
    crate::context::set_log_sink(|m| web_sys::console::log_1(&m.into()));
}

// ------------------------------------------------------------------------------ registry

#[derive(Default)]
struct Registry {
    next: u32,
    live: HashMap<u32, Tensor>,
    /// Open `tidy` scopes: the ids created inside each.
    scopes: Vec<Vec<u32>>,
}

thread_local! {
    static REG: RefCell<Registry> = RefCell::new(Registry::default());
}

fn register(t: Tensor) -> JsTensor {
    REG.with(|r| {
        let mut r = r.borrow_mut();
        r.next = r.next.wrapping_add(1).max(1);
        let id = r.next;
        r.live.insert(id, t);
        if let Some(s) = r.scopes.last_mut() {
            s.push(id);
        }
        JsTensor { id }
    })
}

fn release(id: u32) {
    // Dropped outside the borrow: freeing buffers must not run while the registry is borrowed.
    let t = REG.with(|r| r.try_borrow_mut().ok().and_then(|mut r| r.live.remove(&id)));
    drop(t);
}

fn lookup(id: u32) -> Option<Tensor> {
    REG.with(|r| r.borrow().live.get(&id).cloned())
}

/// Handles for tensors, as a JS array.
fn tensor_array(ts: Vec<Tensor>) -> Array {
    ts.into_iter().map(|t| JsValue::from(register(t))).collect()
}

/// A tensor: a lazy node of the engine's graph, realized when its value is needed.
#[wasm_bindgen(js_name = Tensor)]
pub struct JsTensor {
    id: u32,
}

impl Drop for JsTensor {
    fn drop(&mut self) {
        release(self.id);
    }
}

//! The engine's functions for JavaScript: picking the device (`initEngine`, behind js/wgrad.js's
//! `init`), settings for a function (`withContext`), `tidy` scopes, debug output and counters,
//! MNIST from IDX bytes, safetensors bytes.

use super::args::{arg, describe, device_name, elements, handle_id, is_array, Opts};
use super::{fail, js_error_message, register, release, JsResult, OrFail, REG};
use crate::context::Stage;
use crate::{Context, Device, GlobalCounters, Tensor};
use js_sys::{Array, Function, Object, Reflect};
use std::collections::{BTreeMap, HashSet};
use wasm_bindgen::prelude::*;

/// Pick the device: WebGPU when available (requesting the adapter's limits), else kernels
/// compiled to WebAssembly (`"wasm"`, with a console note; the interpreter in a build without
/// them). `device: "webgpu"` makes a missing WebGPU an error; `"wasm"` and `"cpu"` (the
/// interpreter) are used as asked. Resolves to `{ device, adapter }`.
#[wasm_bindgen(js_name = initEngine, unchecked_return_type = "Promise<InitInfo>")]
pub fn init_engine(
    #[wasm_bindgen(unchecked_optional_param_type = "InitOptions")] opts: Option<JsValue>,
) -> js_sys::Promise {
    let opts = opts.unwrap_or(JsValue::UNDEFINED);
    wasm_bindgen_futures::future_to_promise(async move {
        const OP: &str = "init";
        let want = get_device_option(&opts, OP)?;
        let half = Opts::new(&opts, OP)?.get::<bool>("half")?;
        let info = Object::new();
        let set = |k: &str, v: JsValue| Reflect::set(&info, &k.into(), &v).map(|_| ());
        if let Some(h) = half {
            let dt = if h {
                crate::DType::F16
            } else {
                crate::DType::F32
            };
            crate::context::set_default_float(Some(dt)).or_fail(OP)?;
        }
        set(
            "half",
            (crate::context::default_float() == crate::DType::F16).into(),
        )?;
        match want.as_deref() {
            Some("cpu") | Some("interp") => {
                crate::context::set_default_device(Some(Device::Interp));
                set("device", "cpu".into())?;
                set("adapter", JsValue::NULL)?;
            }
            #[cfg(feature = "wasm")]
            Some("wasm") => {
                crate::context::set_default_device(Some(Device::Wasm));
                set("device", "wasm".into())?;
                set("adapter", JsValue::NULL)?;
            }
            None | Some("webgpu") => {
                #[cfg(feature = "wgpu")]
                let got = crate::runtime::wgpu::init().await;
                #[cfg(not(feature = "wgpu"))]
                let got: crate::Result<()> = Err(crate::Error::new(
                    crate::ErrorKind::Device,
                    "this build has no WebGPU backend",
                ));
                match got {
                    #[allow(unused_variables)]
                    Ok(a) => {
                        #[cfg(feature = "wgpu")]
                        {
                            crate::context::set_default_device(Some(Device::Wgpu));
                            set("device", "webgpu".into())?;
                            let ad = Object::new();
                            for (k, v) in [
                                ("name", JsValue::from(a.name.as_str())),
                                ("backend", a.backend.as_str().into()),
                                ("deviceType", a.device_type.as_str().into()),
                                ("driver", a.driver.as_str().into()),
                                (
                                    "maxStorageBuffersPerStage",
                                    a.max_storage_buffers_per_stage.into(),
                                ),
                                (
                                    "maxStorageBindingBytes",
                                    (a.max_storage_binding_bytes as f64).into(),
                                ),
                                ("shaderF16", a.shader_f16.into()),
                                ("subgroupSize", a.subgroup_size.into()),
                            ] {
                                Reflect::set(&ad, &k.into(), &v)?;
                            }
                            set("adapter", ad.into())?;
                        }
                    }
                    Err(e) if want.is_some() => return Err(fail(OP, e).into()),
                    Err(e) => {
                        let fallback = no_webgpu_fallback();
                        let what = if fallback == Device::Interp {
                            "the CPU interpreter"
                        } else {
                            "WebAssembly kernels"
                        };
                        web_sys::console::warn_1(
                            &format!("wgrad: WebGPU unavailable ({e}); running on {what}").into(),
                        );
                        crate::context::set_default_device(Some(fallback));
                        set("device", device_name(fallback).into())?;
                        set("adapter", JsValue::NULL)?;
                    }
                }
            }
            Some(other) => {
                return Err(fail(
                    OP,
                    format!(
                        "unsupported device {other:?} (expected \"webgpu\", \"wasm\" or \"cpu\")"
                    ),
                )
                .into())
            }
        }
        Ok(info.into())
    })
}

/// Where a page without WebGPU runs: WebAssembly kernels where the build has them.
fn no_webgpu_fallback() -> Device {
    #[cfg(feature = "wasm")]
    return Device::Wasm;
    #[cfg(not(feature = "wasm"))]
    return Device::Interp;
}

/// `opts.device` as a string, if given.
fn get_device_option(opts: &JsValue, op: &str) -> JsResult<Option<String>> {
    let want = Opts::new(opts, op)?.raw("device");
    if want.is_undefined() || want.is_null() {
        return Ok(None);
    }
    want.as_string().map(Some).ok_or_else(|| {
        fail(
            op,
            format!(
                "device must be \"webgpu\", \"wasm\" or \"cpu\", got {}",
                describe(&want)
            ),
        )
    })
}

/// The device new tensors go to: "webgpu", "wasm" or "cpu".
#[wasm_bindgen(js_name = defaultDevice)]
pub fn default_device() -> String {
    device_name(Device::default())
}

/// Run `f` with settings in force: `{ TRAINING, DEBUG, NO_GRAD, DEVICE, BEAM, JIT_VERIFY, HALF }`
/// (camelCase works too). `f` must be synchronous. With `BEAM`, kernels the tuning cache does not know run
/// with the default plans and are queued for `beamTune()`.
#[wasm_bindgen(js_name = withContext)]
pub fn with_context(
    #[wasm_bindgen(unchecked_param_type = "ContextOptions")] opts: JsValue,
    f: JsValue,
) -> JsResult<JsValue> {
    const OP: &str = "withContext";
    let opts = Opts::new(&opts, OP)?;
    let f: Function = f
        .dyn_into()
        .map_err(|v| fail(OP, format!("expected a function, got {}", describe(&v))))?;
    let pick = |a: &'static str, b: &'static str| {
        let v = opts.raw(a);
        if v.is_undefined() {
            (opts.raw(b), a)
        } else {
            (v, a)
        }
    };
    // A flag is a boolean or a number (0 is off).
    let flag = |(v, k): (JsValue, &str)| -> JsResult<Option<bool>> {
        match v.as_bool() {
            Some(b) => Ok(Some(b)),
            None => Ok(arg::<Option<f64>>(&v, OP, k)?.map(|n| n != 0.0)),
        }
    };
    let mut ctx = Context::new();
    if let Some(t) = flag(pick("TRAINING", "training"))? {
        ctx = ctx.training(t);
    }
    if let Some(t) = flag(pick("NO_GRAD", "noGrad"))? {
        ctx = ctx.no_grad(t);
    }
    let (dbg, k) = pick("DEBUG", "debug");
    if let Some(level) = arg::<Option<u32>>(&dbg, OP, k)? {
        ctx = ctx.debug(level);
    }
    let (beam, k) = pick("BEAM", "beam");
    if let Some(width) = arg::<Option<u32>>(&beam, OP, k)? {
        ctx = ctx.beam(width);
    }
    let (verify, k) = pick("JIT_VERIFY", "jitVerify");
    if let Some(n) = arg::<Option<u32>>(&verify, OP, k)? {
        ctx = ctx.jit_verify(n);
    }
    if let Some(h) = flag(pick("HALF", "half"))? {
        ctx = ctx.half(h);
    }
    let (dev, k) = pick("DEVICE", "device");
    if let Some(d) = arg::<Option<Device>>(&dev, OP, k)? {
        ctx = ctx.dev(d);
    }
    let out = ctx
        .run(|| f.call0(&JsValue::NULL))
        .map_err(|e| fail(OP, js_error_message(&e)))?;
    if out.is_instance_of::<js_sys::Promise>() {
        return Err(fail(OP, "the function returned a Promise: it must be synchronous (settings end when it returns)"));
    }
    Ok(out)
}

/// Open a `tidy` scope (js/wgrad.js pairs it with `endScope`).
#[wasm_bindgen(js_name = startScope)]
pub fn start_scope() {
    REG.with(|r| r.borrow_mut().scopes.push(vec![]));
}

/// Close the innermost scope: dispose every tensor created in it except those in `keep` (a
/// Tensor, or an array or object holding Tensors), which move to the enclosing scope.
#[wasm_bindgen(js_name = endScope)]
pub fn end_scope(keep: JsValue) {
    let mut kept: HashSet<u32> = HashSet::new();
    let mut note = |v: &JsValue| kept.extend(handle_id(v));
    if keep.is_object() {
        note(&keep);
        // Own keys, arrays included: a sparse array claiming a huge length has few.
        if let Ok(vals) = Reflect::own_keys(&keep) {
            for k in vals.iter() {
                if let Ok(v) = Reflect::get(&keep, &k) {
                    note(&v);
                }
            }
        }
    }
    let ids = REG
        .with(|r| r.borrow_mut().scopes.pop())
        .unwrap_or_default();
    let mut moved = vec![];
    for id in ids {
        if kept.contains(&id) {
            moved.push(id);
        } else {
            release(id);
        }
    }
    REG.with(|r| {
        if let Some(s) = r.borrow_mut().scopes.last_mut() {
            s.extend(moved);
        }
    });
}

/// Print kernels as they run (1: devices and captures, 2: each kernel with its time, 3: the
/// schedule, 4: kernel sources) to the console.
#[wasm_bindgen(js_name = setDebug)]
pub fn set_debug(#[wasm_bindgen(unchecked_param_type = "number")] level: JsValue) -> JsResult<()> {
    crate::context::set_debug(Some(arg(&level, "setDebug", "level")?));
    Ok(())
}

/// Destroy the WebGPU device, as a driver reset or `GPUDevice.destroy()` would (to test
/// recovery). Every later call on it throws an Error naming the device loss; `await init()`
/// again creates a new device, and training goes on from a snapshot taken before (for example
/// `safeSave` bytes of the state dict and the optimizer's `state()`).
#[wasm_bindgen(js_name = loseDevice)]
pub fn lose_device() -> JsResult<()> {
    const OP: &str = "loseDevice";
    #[cfg(feature = "wgpu")]
    {
        if Device::default().kind != crate::device::DeviceKind::Wgpu {
            return Err(fail(OP, "the engine is not running on WebGPU"));
        }
        crate::runtime::wgpu::lose_device().or_fail(OP)
    }
    #[cfg(not(feature = "wgpu"))]
    Err(fail(OP, "this build has no WebGPU backend"))
}

/// `{ kernelCount, globalOps, globalMem, timeMs, liveTensors, liveBuffers, liveBytes }`, where
/// live buffers count every device buffer the engine holds.
#[wasm_bindgen(js_name = globalCounters, unchecked_return_type = "GlobalCounters")]
pub fn global_counters() -> JsValue {
    let (bufs, bytes) = crate::runtime::live_buffers();
    let tensors = REG.with(|r| r.borrow().live.len());
    let ms = |s: Stage| GlobalCounters::stage_ns(s) as f64 / 1e6;
    let o = Object::new();
    for (k, v) in [
        ("kernelCount", GlobalCounters::kernel_count() as f64),
        ("globalOps", GlobalCounters::global_ops() as f64),
        ("globalMem", GlobalCounters::global_mem() as f64),
        ("timeMs", GlobalCounters::time_ns() as f64 / 1e6),
        ("liveTensors", tensors as f64),
        ("liveBuffers", bufs as f64),
        ("liveBytes", bytes as f64),
        ("scheduleMs", ms(Stage::Schedule)),
        ("planMs", ms(Stage::Plan)),
        ("lowerMs", ms(Stage::Lower)),
        ("compileMs", ms(Stage::Compile)),
    ] {
        let _ = Reflect::set(&o, &k.into(), &v.into());
    }
    o.into()
}

#[wasm_bindgen(js_name = resetGlobalCounters)]
/// Set every counter of `globalCounters()` to zero.
pub fn reset_global_counters() {
    GlobalCounters::reset();
}

/// The bytes of a `Uint8Array` (or another typed array, an `ArrayBuffer`, or an array of
/// numbers 0..=255), copied into wasm memory; too large for it is an error, not an abort.
fn bytes_arg(v: &JsValue, op: &str, what: &str) -> JsResult<Vec<u8>> {
    let view = if let Some(b) = v.dyn_ref::<js_sys::ArrayBuffer>() {
        Some(js_sys::Uint8Array::new(b))
    } else if js_sys::ArrayBuffer::is_view(v) {
        let buf = Reflect::get(v, &"buffer".into()).unwrap_or(JsValue::UNDEFINED);
        let at = |k: &str| Reflect::get(v, &k.into()).ok().and_then(|x| x.as_f64());
        match (at("byteOffset"), at("byteLength")) {
            (Some(off), Some(len)) => Some(js_sys::Uint8Array::new_with_byte_offset_and_length(
                &buf, off as u32, len as u32,
            )),
            _ => None,
        }
    } else {
        None
    };
    if let Some(view) = view {
        let n = view.length() as usize;
        let mut out = Vec::new();
        out.try_reserve_exact(n)
            .map_err(|_| fail(op, format!("{what} ({n} bytes) does not fit in memory")))?;
        out.resize(n, 0);
        view.copy_to(&mut out);
        return Ok(out);
    }
    if !is_array(v) {
        return Err(fail(
            op,
            format!("{what} must be a Uint8Array, got {}", describe(v)),
        ));
    }
    elements(v)
        .enumerate()
        .map(|(i, x)| {
            let b: u32 = arg(&x, op, &format!("{what}[{i}]"))?;
            u8::try_from(b).map_err(|_| fail(op, format!("{what}[{i}] is not a byte, got {b}")))
        })
        .collect()
}

/// MNIST from the four IDX files' bytes (gzipped or not), in `MNIST_FILES` order:
/// train images, train labels, test images, test labels. Resolves to
/// `{ xTrain, yTrain, xTest, yTest }` (uint8 images `[N, 1, 28, 28]`, int32 labels).
#[wasm_bindgen(js_name = mnistFromBytes, unchecked_return_type = "MnistData")]
pub fn mnist_from_bytes(
    #[wasm_bindgen(unchecked_param_type = "Uint8Array | number[]")] train_images: JsValue,
    #[wasm_bindgen(unchecked_param_type = "Uint8Array | number[]")] train_labels: JsValue,
    #[wasm_bindgen(unchecked_param_type = "Uint8Array | number[]")] test_images: JsValue,
    #[wasm_bindgen(unchecked_param_type = "Uint8Array | number[]")] test_labels: JsValue,
) -> JsResult<JsValue> {
    const OP: &str = "mnist";
    let files = [
        bytes_arg(&train_images, OP, "the train images")?,
        bytes_arg(&train_labels, OP, "the train labels")?,
        bytes_arg(&test_images, OP, "the test images")?,
        bytes_arg(&test_labels, OP, "the test labels")?,
    ];
    let m = crate::nn::datasets::mnist_from_bytes(&files[0], &files[1], &files[2], &files[3])
        .or_fail(OP)?;
    let o = Object::new();
    for (k, t) in [
        ("xTrain", m.x_train),
        ("yTrain", m.y_train),
        ("xTest", m.x_test),
        ("yTest", m.y_test),
    ] {
        Reflect::set(&o, &k.into(), &register(t).into())
            .map_err(|e| fail(OP, js_error_message(&e)))?;
    }
    Ok(o.into())
}

/// Serialize `{ name: Tensor }` as safetensors bytes (resolves to a Uint8Array). `metadata`, a
/// `{ key: string }` object, is written as the header's `__metadata__` (read it back with
/// `safeLoadMetadata`).
#[wasm_bindgen(js_name = safeSave, unchecked_return_type = "Promise<Uint8Array>")]
pub fn safe_save(
    #[wasm_bindgen(unchecked_param_type = "Record<string, Tensor>")] state: JsValue,
    #[wasm_bindgen(unchecked_optional_param_type = "Record<string, string>")] metadata: Option<
        JsValue,
    >,
) -> JsResult<js_sys::Promise> {
    const OP: &str = "safeSave";
    let mut named = vec![];
    for (name, v) in entries(&state, OP, "an object of named Tensors")? {
        let t: Tensor = arg(&v, OP, &format!("\"{name}\""))?;
        named.push((name, t));
    }
    let mut meta = BTreeMap::new();
    if let Some(m) = metadata.filter(|m| !m.is_undefined() && !m.is_null()) {
        for (k, v) in entries(&m, OP, "metadata as an object of strings")? {
            let Some(v) = v.as_string() else {
                return Err(fail(
                    OP,
                    format!("metadata \"{k}\" must be a string, got {}", describe(&v)),
                ));
            };
            meta.insert(k, v);
        }
    }
    crate::realize::check_readback().or_fail(OP)?;
    Ok(wasm_bindgen_futures::future_to_promise(async move {
        let bytes = crate::nn::state::safe_save_bytes_with_metadata_async(&named, &meta)
            .await
            .or_fail(OP)?;
        Ok(js_sys::Uint8Array::from(bytes.as_slice()).into())
    }))
}

/// The string-keyed own properties of a plain object (not an array).
fn entries(v: &JsValue, op: &str, want: &str) -> JsResult<Vec<(String, JsValue)>> {
    if !v.is_object() || is_array(v) {
        return Err(fail(op, format!("expected {want}, got {}", describe(v))));
    }
    let keys = Reflect::own_keys(v).map_err(|e| fail(op, js_error_message(&e)))?;
    let mut out = vec![];
    for k in keys.iter() {
        let Some(name) = k.as_string() else { continue };
        let x = Reflect::get(v, &k).map_err(|e| fail(op, js_error_message(&e)))?;
        out.push((name, x));
    }
    Ok(out)
}

/// `{ name: Tensor }` as an object, in the given order.
fn named_object(state: Vec<(String, Tensor)>, op: &str) -> JsResult<JsValue> {
    let o = Object::new();
    for (name, t) in state {
        Reflect::set(&o, &name.as_str().into(), &register(t).into())
            .map_err(|e| fail(op, js_error_message(&e)))?;
    }
    Ok(o.into())
}

/// Parse safetensors bytes into `{ name: Tensor }` (on the default device).
#[wasm_bindgen(js_name = safeLoad, unchecked_return_type = "Record<string, Tensor>")]
pub fn safe_load(
    #[wasm_bindgen(unchecked_param_type = "Uint8Array | number[]")] bytes: JsValue,
) -> JsResult<JsValue> {
    const OP: &str = "safeLoad";
    let bytes = bytes_arg(&bytes, OP, "the bytes")?;
    named_object(crate::nn::state::safe_load_bytes(&bytes).or_fail(OP)?, OP)
}

/// The `__metadata__` of safetensors bytes as `{ key: string }` (empty when there is none),
/// without loading any tensor.
#[wasm_bindgen(js_name = safeLoadMetadata, unchecked_return_type = "Record<string, string>")]
pub fn safe_load_metadata(
    #[wasm_bindgen(unchecked_param_type = "Uint8Array | number[]")] bytes: JsValue,
) -> JsResult<JsValue> {
    const OP: &str = "safeLoadMetadata";
    let bytes = bytes_arg(&bytes, OP, "the bytes")?;
    let o = Object::new();
    for (k, v) in crate::nn::state::safe_load_metadata_bytes(&bytes).or_fail(OP)? {
        Reflect::set(&o, &k.as_str().into(), &v.as_str().into())
            .map_err(|e| fail(OP, js_error_message(&e)))?;
    }
    Ok(o.into())
}

/// Parse a PyTorch checkpoint (the bytes of a `.pt` / `.pth` file written by `torch.save`,
/// PyTorch 1.6 or later) into `{ name: Tensor }` on the default device. Nested dicts and lists
/// give dotted names (`"model.fc.weight"`); values that are not tensors are left out. int64
/// loads as int32 (an error if a value does not fit), float64 as float32.
#[wasm_bindgen(js_name = torchLoad, unchecked_return_type = "Record<string, Tensor>")]
pub fn torch_load(
    #[wasm_bindgen(unchecked_param_type = "Uint8Array | number[]")] bytes: JsValue,
) -> JsResult<JsValue> {
    const OP: &str = "torchLoad";
    let bytes = bytes_arg(&bytes, OP, "the bytes")?;
    named_object(crate::nn::state::torch_load_bytes(&bytes).or_fail(OP)?, OP)
}

/// Whether two handles refer to the same engine tensor.
#[wasm_bindgen(js_name = sameTensor)]
pub fn same_tensor(
    #[wasm_bindgen(unchecked_param_type = "Tensor")] a: JsValue,
    #[wasm_bindgen(unchecked_param_type = "Tensor")] b: JsValue,
) -> JsResult<bool> {
    let a: Tensor = arg(&a, "sameTensor", "a")?;
    let b: Tensor = arg(&b, "sameTensor", "b")?;
    Ok(a.same(&b))
}

/// File names of the four MNIST files under a base URL.
#[wasm_bindgen(js_name = mnistFiles, unchecked_return_type = "string[]")]
pub fn mnist_files() -> Array {
    crate::nn::datasets::MNIST_FILES
        .iter()
        .map(|s| JsValue::from(*s))
        .collect()
}

/// Search every kernel queued by runs under `BEAM` (timing candidates on the device, awaiting
/// its results between them, so the page keeps responding) and cache the winners; resolves to
/// the number of kernels searched. Recompiles pick the tuned plans (reset a TinyJit to capture
/// them).
#[wasm_bindgen(js_name = beamTune, unchecked_return_type = "Promise<number>")]
pub fn beam_tune() -> js_sys::Promise {
    wasm_bindgen_futures::future_to_promise(async move {
        let n = crate::search::tune().await.or_fail("beamTune")?;
        Ok(JsValue::from(n as f64))
    })
}

/// The tuned plans known to this page, as JSON (for IndexedDB).
#[wasm_bindgen(js_name = beamCacheExport)]
pub fn beam_cache_export() -> String {
    crate::search::export_cache()
}

/// Run WASM kernels on `count` threads: `pool` is js/wgrad.js's worker pool (`addModule`,
/// `run`), `memory` the shared `WebAssembly.Memory` (4 GiB maximum) tensors then live in.
/// False where refused (WASM tensors exist already, or threads are set).
#[cfg(feature = "wasm")]
#[wasm_bindgen(js_name = useWasmThreads)]
pub fn use_wasm_threads(memory: js_sys::WebAssembly::Memory, pool: JsValue, count: u32) -> bool {
    crate::runtime::wasm::use_threads(memory, pool, count)
}

/// How many kernel plans this page knows (planned, tuned or imported): `beamCacheExport`
/// writes them all. js/wgrad.js saves them to IndexedDB when this grows.
#[wasm_bindgen(js_name = planCacheSize)]
pub fn plan_cache_size() -> u32 {
    crate::search::cache_len() as u32
}

/// The engine build's plan fingerprint: plans exported by another build are never used, so
/// js/wgrad.js keeps one IndexedDB record per fingerprint.
#[wasm_bindgen(js_name = planCacheFingerprint)]
pub fn plan_cache_fingerprint() -> String {
    crate::search::plans_fingerprint().to_string()
}

/// Take plans exported before (from IndexedDB); returns how many applied.
#[wasm_bindgen(js_name = beamCacheImport)]
pub fn beam_cache_import(json: JsValue) -> JsResult<u32> {
    let s = json.as_string().ok_or_else(|| {
        fail(
            "beamCacheImport",
            format!("json must be a string, got {}", describe(&json)),
        )
    })?;
    Ok(crate::search::import_cache(&s) as u32)
}

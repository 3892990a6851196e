//! The JS API in a real browser (`wasm-pack test --headless --chrome`, run by
//! scripts/test_web.sh in Debian's chromium with WebGPU on): every call goes through the same
//! exported functions and methods JavaScript uses, looked up by name on the JS objects.
//!
//! On WebGPU (a software adapter here) and on the interpreter fallback: the op suite (forward and
//! backward) against the PyTorch fixtures, every case of every op in the op table
//! (`wgrad::for_each_op!`) through the method it makes, autograd, jitted training steps of a
//! small CNN with the loss falling and replays equal to eager steps, the JIT's errors, bad
//! inputs throwing errors that name the op (and the engine working afterwards), and a jitted
//! loop whose live buffers stay flat.

#![cfg(target_arch = "wasm32")]

use js_sys::{Array, Function, Object, Reflect};
use serde_json::Value;
use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;
use wasm_bindgen_futures::JsFuture;
use wasm_bindgen_test::*;
use wgrad::web;
use wgrad::{
    Axes, Conv1dOpts, Conv2dOpts, ConvTranspose1dOpts, ConvTranspose2dOpts, CrossEntropyOpts,
    DType, Index, Interpolation, Operand, PadMode, Pool2dOpts, Reduction, Tensor,
};

wasm_bindgen_test_configure!(run_in_browser);

const FIXTURE: &str = include_str!("fixtures/ops.json");

// ------------------------------------------------------------------------------ JS helpers

fn msg(e: &JsValue) -> String {
    e.dyn_ref::<js_sys::Error>()
        .map(|e| String::from(e.message()))
        .or_else(|| e.as_string())
        .unwrap_or_else(|| format!("{e:?}"))
}

/// `obj[method](...args)`, as JavaScript would call it.
fn call(obj: &JsValue, method: &str, args: &[JsValue]) -> Result<JsValue, String> {
    let f = Reflect::get(obj, &method.into()).map_err(|e| msg(&e))?;
    let f: Function = f
        .dyn_into()
        .map_err(|_| format!("{method} is not a method"))?;
    f.apply(obj, &args.iter().collect::<Array>())
        .map_err(|e| msg(&e))
}

fn prop(obj: &JsValue, key: &str) -> JsValue {
    Reflect::get(obj, &key.into()).unwrap_or(JsValue::UNDEFINED)
}

async fn await_promise(p: JsValue) -> Result<JsValue, String> {
    JsFuture::from(js_sys::Promise::from(p))
        .await
        .map_err(|e| msg(&e))
}

/// `await t.data()` as f64s.
async fn data(t: &JsValue) -> Result<Vec<f64>, String> {
    let d = await_promise(call(t, "data", &[])?).await?;
    Ok(Array::from(&d)
        .iter()
        .map(|v| v.as_f64().unwrap_or(f64::NAN))
        .collect())
}

async fn item(t: &JsValue) -> Result<f64, String> {
    let v = await_promise(call(t, "item", &[])?).await?;
    v.as_f64()
        .or_else(|| v.as_bool().map(|b| b as u8 as f64))
        .ok_or_else(|| format!("item returned {v:?}"))
}

fn nums(v: &[f64]) -> JsValue {
    v.iter()
        .map(|&x| JsValue::from(x))
        .collect::<Array>()
        .into()
}

fn json_to_js(v: &Value) -> JsValue {
    match v {
        Value::Null => JsValue::UNDEFINED,
        Value::Bool(b) => (*b).into(),
        Value::Number(n) => n.as_f64().unwrap_or(f64::NAN).into(),
        Value::String(s) => s.as_str().into(),
        Value::Array(a) => a.iter().map(json_to_js).collect::<Array>().into(),
        Value::Object(o) => {
            let obj = Object::new();
            for (k, x) in o {
                let _ = Reflect::set(&obj, &k.as_str().into(), &json_to_js(x));
            }
            obj.into()
        }
    }
}

fn tensor(values: &[f64], shape: &[usize], dtype: &str) -> Result<JsValue, String> {
    let shape: Vec<f64> = shape.iter().map(|&d| d as f64).collect();
    web::JsTensor::new(nums(values), Some(nums(&shape)), Some(dtype.into()))
        .map(JsValue::from)
        .map_err(|e| msg(&e.into()))
}

fn js_dtype(fixture: &str) -> &'static str {
    match fixture {
        "f32" => "float32",
        "f16" => "float16",
        "bf16" => "bfloat16",
        "i32" => "int32",
        "u32" => "uint32",
        "u8" => "uint8",
        _ => "bool",
    }
}

fn compare(what: &str, got: &[f64], want: &[f64], atol: f64, rtol: f64) -> Result<(), String> {
    if got.len() != want.len() {
        return Err(format!("{what}: {} values, want {}", got.len(), want.len()));
    }
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        if g.is_nan() || (g - w).abs() > atol + rtol * w.abs() {
            return Err(format!("{what}: index {i}: got {g}, want {w}"));
        }
    }
    Ok(())
}

// ------------------------------------------------------------------------------ setup

/// Initialise once with the default choice (WebGPU when the browser has it).
async fn engine() -> String {
    let info = await_promise(web::init_engine(None).into())
        .await
        .expect("init");
    prop(&info, "device").as_string().unwrap_or_default()
}

/// The devices to test: WebGPU (the browser here is started with it on, so it must be there),
/// WebAssembly kernels (the fallback where WebGPU is missing) and the interpreter.
async fn devices() -> Vec<&'static str> {
    let dev = engine().await;
    assert_eq!(
        dev, "webgpu",
        "init() did not get WebGPU (is chromium started with --enable-unsafe-webgpu?)"
    );
    vec!["webgpu", "wasm", "cpu"]
}

/// Run `f` (which builds graphs synchronously) with `device` as the default device.
fn on<R>(device: &str, f: impl FnOnce() -> R) -> R {
    let d = match device {
        "webgpu" => wgrad::Device::Wgpu,
        "wasm" => wgrad::Device::Wasm,
        _ => wgrad::Device::Interp,
    };
    wgrad::Context::new().dev(d).run(f)
}

// ------------------------------------------------------------------------------ op subset

struct Built {
    inputs: Vec<JsValue>,
    out: JsValue,
}

fn apply_case(c: &Value) -> Result<Built, String> {
    let op = c["op"].as_str().unwrap_or_default();
    let a = &c["args"];
    let mut inputs = vec![];
    for inp in c["inputs"].as_array().into_iter().flatten() {
        let shape: Vec<usize> = inp["shape"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|d| d.as_u64().unwrap_or(0) as usize)
            .collect();
        let vals: Vec<f64> = inp["data"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|v| {
                v.as_f64()
                    .or_else(|| v.as_bool().map(|b| b as u8 as f64))
                    // "nan", "inf", "-inf": JSON has no non-finite numbers.
                    .or_else(|| v.as_str().and_then(|s| s.parse().ok()))
                    .unwrap_or(0.0)
            })
            .collect();
        let t = tensor(
            &vals,
            &shape,
            js_dtype(inp["dtype"].as_str().unwrap_or("f32")),
        )?;
        if inp["grad"].as_bool() == Some(true) {
            Reflect::set(&t, &"requiresGrad".into(), &true.into()).map_err(|e| msg(&e))?;
        }
        inputs.push(t);
    }
    let out = call_op(op, a, &inputs)?;
    Ok(Built { inputs, out })
}

/// The inputs of a case not yet used by the op's arguments.
type Inputs<'a> = std::slice::Iter<'a, JsValue>;

/// An argument of an op-table row as JavaScript passes it, from a fixture case (tests/ops.rs
/// reads the same cases into Rust values): tensors are the case's inputs in order, other values
/// come from its `args` under the row's key. `None` when the case does not give it: the call
/// passes `undefined` and the JS default applies.
trait JsCase {
    fn js_case(args: &Value, key: &str, inputs: &mut Inputs) -> Option<JsValue>;
}

impl<T: JsCase> JsCase for Option<T> {
    fn js_case(args: &Value, key: &str, inputs: &mut Inputs) -> Option<JsValue> {
        T::js_case(args, key, inputs)
    }
}

impl JsCase for Tensor {
    fn js_case(_: &Value, _: &str, inputs: &mut Inputs) -> Option<JsValue> {
        inputs.next().cloned()
    }
}

impl JsCase for Vec<Tensor> {
    fn js_case(_: &Value, _: &str, inputs: &mut Inputs) -> Option<JsValue> {
        Some(inputs.cloned().collect::<Array>().into())
    }
}

/// The scalar under the key, else the next input.
impl JsCase for Operand {
    fn js_case(args: &Value, key: &str, inputs: &mut Inputs) -> Option<JsValue> {
        match &args[key] {
            Value::Null => inputs.next().cloned(),
            v => Some(json_to_js(v)),
        }
    }
}

impl JsCase for DType {
    fn js_case(args: &Value, key: &str, _: &mut Inputs) -> Option<JsValue> {
        args[key].as_str().map(|d| js_dtype(d).into())
    }
}

/// Options objects are made from the case's `args` themselves, with the JS key names.
fn options(args: &Value, keys: &[(&str, &str)]) -> Option<JsValue> {
    let o = Object::new();
    for (k, js) in keys {
        if !args[k].is_null() {
            let _ = Reflect::set(&o, &(*js).into(), &json_to_js(&args[k]));
        }
    }
    Some(o.into())
}

impl JsCase for Conv2dOpts {
    fn js_case(args: &Value, _: &str, _: &mut Inputs) -> Option<JsValue> {
        let keys = ["stride", "padding", "dilation", "groups"].map(|k| (k, k));
        options(args, &keys)
    }
}

impl JsCase for CrossEntropyOpts {
    fn js_case(args: &Value, _: &str, _: &mut Inputs) -> Option<JsValue> {
        let keys = [
            ("ignore_index", "ignoreIndex"),
            ("label_smoothing", "labelSmoothing"),
            ("reduction", "reduction"),
        ];
        options(args, &keys)
    }
}

// ---- The convolution block's options objects (keys as in JS).

impl JsCase for Pool2dOpts {
    fn js_case(args: &Value, _: &str, _: &mut Inputs) -> Option<JsValue> {
        let keys = [
            ("padding", "padding"),
            ("dilation", "dilation"),
            ("ceil_mode", "ceilMode"),
            ("count_include_pad", "countIncludePad"),
        ];
        options(args, &keys)
    }
}

impl JsCase for Conv1dOpts {
    fn js_case(args: &Value, _: &str, _: &mut Inputs) -> Option<JsValue> {
        let keys = ["stride", "padding", "dilation", "groups"].map(|k| (k, k));
        options(args, &keys)
    }
}

fn conv_transpose_options(args: &Value) -> Option<JsValue> {
    let keys = [
        ("stride", "stride"),
        ("padding", "padding"),
        ("output_padding", "outputPadding"),
        ("dilation", "dilation"),
        ("groups", "groups"),
    ];
    options(args, &keys)
}

impl JsCase for ConvTranspose2dOpts {
    fn js_case(args: &Value, _: &str, _: &mut Inputs) -> Option<JsValue> {
        conv_transpose_options(args)
    }
}

impl JsCase for ConvTranspose1dOpts {
    fn js_case(args: &Value, _: &str, _: &mut Inputs) -> Option<JsValue> {
        conv_transpose_options(args)
    }
}

/// Numbers, booleans, lists, pairs and strings pass as the case's JSON has them.
macro_rules! json_case {
    ($($t:ty),*) => {
        $(impl JsCase for $t {
            fn js_case(args: &Value, key: &str, _: &mut Inputs) -> Option<JsValue> {
                (!args[key].is_null()).then(|| json_to_js(&args[key]))
            }
        })*
    };
}

/// An index as JavaScript writes it: the fixture's entries as they are (numbers, null, "...",
/// slice strings, arrays of integers), its "T" entries the next inputs.
impl JsCase for Vec<Index> {
    fn js_case(args: &Value, key: &str, inputs: &mut Inputs) -> Option<JsValue> {
        let entries = args[key].as_array()?;
        Some(
            entries
                .iter()
                .map(|e| match e.as_str() {
                    Some("T") => inputs.next().cloned().unwrap_or(JsValue::UNDEFINED),
                    _ => json_to_js(e),
                })
                .collect::<Array>()
                .into(),
        )
    }
}

json_case!(
    f64,
    Vec<f64>,
    bool,
    isize,
    i64,
    String,
    usize,
    Vec<isize>,
    Vec<usize>,
    Axes,
    (usize, usize),
    Vec<(usize, usize)>,
    Reduction,
    Vec<(isize, isize)>,
    PadMode,
    Interpolation
);

/// The fixture key of a table argument: its `@ "key"`, else its name.
macro_rules! key {
    ($p:ident) => {
        stringify!($p)
    };
    ($p:ident $key:literal) => {
        $key
    };
}

/// Call the JS method that the op table makes for `op` (static ones on the `Tensor` class), by
/// name, with the case's arguments; an op returning several tensors gives piece `args.piece`.
fn call_op(op: &str, a: &Value, x: &[JsValue]) -> Result<JsValue, String> {
    macro_rules! js_row {
        ($(#[$doc:meta])* static $js:literal $rs:ident (
            $($p:ident $(@ $key:literal)? $($what:literal)? : $ty:ty as $ts:literal),*
            $(; $($o:ident $(@ $okey:literal)? $($owhat:literal)? : $oty:ty as $ots:literal = $def:expr),*)?
        ) => $call:expr) => {
            js_row!(@run static $js $rs ($($p $(@ $key)? : $ty),*) ($($($o $(@ $okey)? : $oty),*)?))
        };
        ($(#[$doc:meta])* $js:literal $rs:ident ($x:ident
            $(, $p:ident $(@ $key:literal)? $($what:literal)? : $ty:ty as $ts:literal)*
            $(; $($o:ident $(@ $okey:literal)? $($owhat:literal)? : $oty:ty as $ots:literal = $def:expr),*)?
        ) $(-> $ret:literal)? => $call:expr) => {
            js_row!(@run method $js $rs ($($p $(@ $key)? : $ty),*) ($($($o $(@ $okey)? : $oty),*)?))
        };
        (@run $kind:ident $js:literal $rs:ident ($($p:ident $(@ $key:literal)? : $ty:ty),*)
            ($($o:ident $(@ $okey:literal)? : $oty:ty),*)) => {
            if op == stringify!($rs) {
                let inputs = &mut x.iter();
                let this = js_row!(@this $kind inputs);
                let args: Vec<JsValue> = vec![
                    $(<$ty as JsCase>::js_case(a, key!($p $($key)?), inputs).ok_or_else(|| {
                        format!("fixture: {op} needs {} in {a}", key!($p $($key)?))
                    })?,)*
                    $(<$oty as JsCase>::js_case(a, key!($o $($okey)?), inputs)
                        .unwrap_or(JsValue::UNDEFINED),)*
                ];
                let out = call(&this, $js, &args)?;
                if !Array::is_array(&out) {
                    return Ok(out);
                }
                let piece = a["piece"].as_u64().ok_or("fixture: no piece")?;
                return Ok(Array::from(&out).get(piece as u32));
            }
        };
        (@this static $inputs:ident) => {
            // The Tensor class, from any tensor (a creation function has no inputs).
            match x.first() {
                Some(t) => prop(t, "constructor"),
                None => prop(&tensor(&[0.0], &[1], "float32")?, "constructor"),
            }
        };
        (@this method $inputs:ident) => {
            $inputs.next().cloned().ok_or("fixture: no inputs")?
        };
    }
    wgrad::for_each_op!(js_row);
    Err(format!("the op table has no op {op:?}"))
}

async fn check_case(dev: &'static str, c: &'static Value) -> Result<(), String> {
    // Build forward and backward on `dev`, then read everything back.
    let b = on(dev, || -> Result<Built, String> {
        let b = apply_case(c)?;
        if let Some(up) = c["upstream"].as_array() {
            let up: Vec<f64> = up.iter().map(|v| v.as_f64().unwrap_or(0.0)).collect();
            let shape: Vec<usize> = c["output"]["shape"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|d| d.as_u64().unwrap_or(0) as usize)
                .collect();
            let u = tensor(&up, &shape, "float32")?;
            let loss = call(&call(&b.out, "mul", &[u])?, "sum", &[])?;
            call(&loss, "backward", &[])?;
        }
        Ok(b)
    })?;
    let want: Vec<f64> = c["output"]["data"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|v| {
            v.as_f64()
                .or_else(|| v.as_bool().map(|b| b as u8 as f64))
                .unwrap_or(f64::NAN)
        })
        .collect();
    let is_float = matches!(c["output"]["dtype"].as_str(), Some("f32" | "bf16"));
    let atol = c["atol"].as_f64().unwrap_or(1e-6);
    let (atol, rtol) = if is_float {
        (atol.max(1e-5), 1e-3)
    } else {
        (0.0, 0.0)
    };
    compare("forward", &data(&b.out).await?, &want, atol, rtol)?;
    for (k, g) in c["grads"].as_array().into_iter().flatten().enumerate() {
        let Some(g) = g.as_array() else { continue };
        let want: Vec<f64> = g.iter().map(|v| v.as_f64().unwrap_or(f64::NAN)).collect();
        let grad = prop(&b.inputs[k], "grad");
        if grad.is_undefined() || grad.is_null() {
            return Err(format!("input {k}: no gradient"));
        }
        compare(&format!("grad {k}"), &data(&grad).await?, &want, 1e-4, 1e-3)?;
    }
    Ok(())
}

fn cases() -> &'static Vec<Value> {
    static C: std::sync::OnceLock<Vec<Value>> = std::sync::OnceLock::new();
    C.get_or_init(|| {
        let v: Value = serde_json::from_str(FIXTURE).expect("fixture");
        v["cases"].as_array().cloned().unwrap_or_default()
    })
}

/// The Rust names of the op table's ops (the fixture cases' `op`).
fn table_ops() -> Vec<&'static str> {
    let mut names = vec![];
    macro_rules! name {
        ($(#[$doc:meta])* $(static)? $js:literal $rs:ident $($rest:tt)*) => {
            names.push(stringify!($rs));
        };
    }
    wgrad::for_each_op!(name);
    names
}

/// Every fixture case of every op in the op table, through the JS method the table makes.
#[wasm_bindgen_test]
async fn op_suite_matches_pytorch() {
    let mut failures = vec![];
    let mut ran = 0;
    let ops = table_ops();
    for dev in devices().await {
        for op in &ops {
            for c in cases().iter().filter(|c| c["op"].as_str() == Some(op)) {
                let name = c["name"].as_str().unwrap_or_default();
                if let Err(e) = check_case(dev, c).await {
                    failures.push(format!("{name} ({op}) on {dev}: {e}"));
                }
                ran += 1;
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {ran} cases failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
    // Every case's op is in the table (tests/ops.rs checks that too), so all of them ran.
    assert_eq!(
        ran,
        devices().await.len() * cases().len(),
        "cases whose op is not in the op table"
    );
}

// ------------------------------------------------------------------------------ training

/// The tutorial's CNN, shrunk: Conv2d(1,4,3) → relu → maxPool2d(2) → flatten → Linear(4*5*5, 3),
/// trained with Adam on a fixed synthetic set by a jitted step.
struct Cnn {
    conv: JsValue,
    lin: JsValue,
    opt: JsValue,
    x: JsValue,
    y: JsValue,
}

fn cnn() -> Result<Cnn, String> {
    web::JsTensor::manual_seed(7.into()).expect("seed");
    let conv: JsValue = web::Conv2d::new(1.into(), 4.into(), 3.into(), None)
        .map_err(|e| msg(&e.into()))?
        .into();
    let lin: JsValue = web::Linear::new(100.into(), 3.into(), None)
        .map_err(|e| msg(&e.into()))?
        .into();
    let params: Array = Array::new();
    for l in [&conv, &lin] {
        for p in Array::from(&call(l, "parameters", &[])?).iter() {
            params.push(&p);
        }
    }
    let opts = Object::new();
    let _ = Reflect::set(&opts, &"lr".into(), &0.01.into());
    let opt: JsValue = web::adam(params.into(), Some(opts.into()))
        .map_err(|e| msg(&e.into()))?
        .into();
    // Class k: a bright k-th third of the image.
    let n = 24;
    let mut xs = vec![0.0; n * 12 * 12];
    let mut ys = vec![0.0; n];
    for i in 0..n {
        let k = i % 3;
        ys[i] = k as f64;
        for r in 0..12 {
            for c in 0..12 {
                let v = if c / 4 == k { 1.0 } else { 0.1 };
                xs[i * 144 + r * 12 + c] = v + 0.05 * (((i * 7 + r * 3 + c) % 5) as f64);
            }
        }
    }
    let x = tensor(&xs, &[n, 1, 12, 12], "float32")?;
    let y = tensor(&ys, &[n], "int32")?;
    Ok(Cnn {
        conv,
        lin,
        opt,
        x,
        y,
    })
}

fn cnn_step(m: &Cnn) -> Result<JsValue, String> {
    let s =
        web::JsTensor::randint(nums(&[8.0]), 0.into(), 24.into()).map_err(|e| msg(&e.into()))?;
    let s: JsValue = s.into();
    let x = call(&m.x, "index", std::slice::from_ref(&s))?;
    let y = call(&m.y, "index", &[s])?;
    call(&m.opt, "zeroGrad", &[])?;
    let h = call(&m.conv, "forward", &[x])?;
    let h = call(
        &call(&call(&h, "relu", &[])?, "maxPool2d", &[2.into()])?,
        "flatten",
        &[1.into()],
    )?;
    let logits = call(&m.lin, "forward", &[h])?;
    let loss = call(&logits, "sparseCategoricalCrossentropy", &[y])?;
    call(&loss, "backward", &[])?;
    call(&m.opt, "step", &[])?;
    call(&loss, "realize", &[])
}

fn training(f: impl FnOnce() -> Result<JsValue, String> + 'static) -> Result<JsValue, String> {
    let opts = Object::new();
    let _ = Reflect::set(&opts, &"TRAINING".into(), &1.into());
    let cell = std::rc::Rc::new(std::cell::RefCell::new(Some(f)));
    let cb = Closure::<dyn FnMut() -> Result<JsValue, JsValue>>::new(move || {
        let f = cell
            .borrow_mut()
            .take()
            .ok_or_else(|| JsValue::from("called twice"))?;
        f().map_err(|e| JsValue::from(js_sys::Error::new(&e)))
    });
    web::with_context(opts.into(), cb.as_ref().clone()).map_err(|e| msg(&e.into()))
}

/// A JS function for `jit`, running `step` in training mode.
fn jit_fn(m: std::rc::Rc<Cnn>) -> Closure<dyn FnMut() -> Result<JsValue, JsValue>> {
    Closure::new(move || {
        let m = m.clone();
        training(move || cnn_step(&m)).map_err(|e| JsValue::from(js_sys::Error::new(&e)))
    })
}

/// The CNN's losses over `steps` steps: eager, or jitted (with the first call awaited through
/// `callAsync` where `first_async`).
async fn losses(
    dev: &'static str,
    jitted: bool,
    first_async: bool,
    steps: usize,
) -> Result<Vec<f64>, String> {
    let m = std::rc::Rc::new(on(dev, cnn)?);
    let f = jit_fn(m.clone());
    let mut j = web::TinyJitJs::new(f.as_ref().clone()).map_err(|e| msg(&e.into()))?;
    let mut out = vec![];
    for i in 0..steps {
        if jitted && first_async && i == 0 {
            let p =
                on(dev, || j.call_async(Some(Array::new().into()))).map_err(|e| msg(&e.into()))?;
            out.push(item(&await_promise(p.into()).await?).await?);
            continue;
        }
        let loss = on(dev, || {
            if jitted {
                j.call(Some(Array::new().into()))
                    .map_err(|e| msg(&e.into()))
            } else {
                let m = m.clone();
                training(move || cnn_step(&m))
            }
        })?;
        out.push(item(&loss).await?);
    }
    drop(f);
    Ok(out)
}

#[wasm_bindgen_test]
async fn jitted_cnn_training_matches_eager_and_learns() {
    for dev in devices().await {
        let eager = losses(dev, false, false, 12)
            .await
            .unwrap_or_else(|e| panic!("{dev} eager: {e}"));
        let jitted = losses(dev, true, false, 12)
            .await
            .unwrap_or_else(|e| panic!("{dev} jit: {e}"));
        // The first call awaited (on WebGPU its launches wait for all its pipelines): the same
        // kernels, the same losses.
        let awaited = losses(dev, true, true, 12)
            .await
            .unwrap_or_else(|e| panic!("{dev} jit, first call awaited: {e}"));
        assert_eq!(awaited, jitted, "{dev}");
        for (i, (a, b)) in eager.iter().zip(&jitted).enumerate() {
            assert!(
                (a - b).abs() <= 1e-4 * a.abs().max(1.0),
                "{dev} step {i}: eager {a} vs jit {b}"
            );
        }
        let first = jitted[..3].iter().sum::<f64>();
        let last = jitted[9..].iter().sum::<f64>();
        assert!(last < first * 0.8, "{dev}: loss did not fall: {jitted:?}");
    }
}

#[wasm_bindgen_test]
async fn jitted_loop_keeps_live_buffers_flat() {
    devices().await;
    let m = std::rc::Rc::new(cnn().expect("model"));
    let f = jit_fn(m.clone());
    let mut j = web::TinyJitJs::new(f.as_ref().clone()).expect("jit");
    let counters = || {
        let c = web::global_counters();
        (
            prop(&c, "liveBuffers").as_f64().unwrap_or(-1.0),
            prop(&c, "liveBytes").as_f64().unwrap_or(-1.0),
            prop(&c, "liveTensors").as_f64().unwrap_or(-1.0),
        )
    };
    let mut at_500 = None;
    let mut last_loss = f64::NAN;
    for i in 1..=2000 {
        let loss = j
            .call(Some(Array::new().into()))
            .map_err(|e| msg(&e.into()))
            .expect("step");
        if i % 250 == 0 {
            last_loss = item(&loss).await.expect("loss");
        }
        call(&loss, "dispose", &[]).expect("dispose");
        if i == 500 {
            at_500 = Some(counters());
        }
    }
    // Handles the step's JS code dropped are freed when the garbage collector gets to them
    // (weak references), so the counts may only go down.
    let (end, mid) = (counters(), at_500.expect("step 500"));
    assert!(
        end.0 <= mid.0 && end.1 <= mid.1 && end.2 <= mid.2,
        "live (buffers, bytes, tensors) grew from step 500 {mid:?} to step 2000 {end:?}"
    );
    assert!(
        last_loss.is_finite() && last_loss < 0.5,
        "loss after 2000 steps: {last_loss}"
    );
    drop(f);
}

// ------------------------------------------------------------------------------ errors

fn expect_err(r: Result<JsValue, String>, parts: &[&str]) {
    match r {
        Ok(v) => panic!("expected an error mentioning {parts:?}, got {v:?}"),
        Err(m) => {
            for p in parts {
                assert!(m.contains(p), "error {m:?} does not mention {p:?}");
            }
        }
    }
}

#[wasm_bindgen_test]
async fn bad_inputs_throw_errors_naming_the_op() {
    devices().await;
    let a = tensor(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3], "float32").unwrap();
    let b = tensor(&[1.0, 2.0, 3.0, 4.0], &[4], "float32").unwrap();
    expect_err(
        call(&a, "add", std::slice::from_ref(&b)),
        &["add", "[2, 3]", "[4]"],
    );
    expect_err(call(&a, "matmul", std::slice::from_ref(&a)), &["matmul"]);
    expect_err(
        call(&a, "matmul", &["nope".into()]),
        &["matmul", "must be a Tensor", "string"],
    );
    expect_err(
        call(&a, "add", &[Object::new().into()]),
        &["add", "Tensor or a number"],
    );
    expect_err(call(&a, "reshape", &[nums(&[4.0, 4.0])]), &["reshape"]);
    expect_err(call(&a, "reshape", &["3".into()]), &["reshape", "array"]);
    expect_err(call(&a, "cast", &["float64".into()]), &["cast", "float64"]);
    expect_err(call(&a, "sum", &[5.into()]), &["sum"]);
    expect_err(call(&a, "softmax", &[1.5.into()]), &["softmax", "integer"]);
    let labels = tensor(&[0.0, 1.0, 2.0], &[3], "int32").unwrap();
    expect_err(
        call(&a, "sparseCategoricalCrossentropy", &[labels]),
        &["sparseCategoricalCrossentropy"],
    );
    expect_err(
        web::JsTensor::new(nums(&[1.0, 2.0, 3.0]), Some(nums(&[2.0, 2.0])), None)
            .map(JsValue::from)
            .map_err(|e| msg(&e.into())),
        &["Tensor", "4 values", "3"],
    );
    expect_err(
        web::JsTensor::new("text".into(), None, None)
            .map(JsValue::from)
            .map_err(|e| msg(&e.into())),
        &["Tensor", "string"],
    );
    let ragged: JsValue = json_to_js(&serde_json::json!([[1, 2], [3]]));
    expect_err(
        web::JsTensor::new(ragged, None, None)
            .map(JsValue::from)
            .map_err(|e| msg(&e.into())),
        &["ragged"],
    );
    // Disposed tensors.
    call(&b, "dispose", &[]).unwrap();
    assert_eq!(prop(&b, "isDisposed").as_bool(), Some(true));
    expect_err(
        call(&a, "mul", std::slice::from_ref(&b)),
        &["mul", "disposed"],
    );
    expect_err(call(&b, "relu", &[]), &["relu", "disposed"]);
    // Unsupported device.
    let o = Object::new();
    let _ = Reflect::set(&o, &"device".into(), &"tpu".into());
    expect_err(
        await_promise(web::init_engine(Some(o.into())).into()).await,
        &["init", "tpu"],
    );
    // Layers and optimizers.
    expect_err(
        web::Conv2d::new((-1).into(), 4.into(), 3.into(), None)
            .map(JsValue::from)
            .map_err(|e| msg(&e.into())),
        &["Conv2d", "inChannels"],
    );
    expect_err(
        web::adam(Array::new().into(), None)
            .map(JsValue::from)
            .map_err(|e| msg(&e.into())),
        &["Adam", "no parameters"],
    );
    // Still working.
    let c = call(&a, "mul", &[2.into()]).unwrap();
    assert_eq!(
        data(&c).await.unwrap(),
        vec![2.0, 4.0, 6.0, 8.0, 10.0, 12.0]
    );
    assert_eq!(item(&call(&c, "sum", &[]).unwrap()).await.unwrap(), 42.0);
}

/// Calls that used to kill the wasm instance (a Rust panic, or an abort on a failed allocation)
/// throw errors naming the op; the engine computes afterwards. (The receiver checks live in
/// js/wgrad.js: scripts/page_test.mjs tests them, and all of these again, on the packed package.)
#[wasm_bindgen_test]
async fn former_traps_throw_errors_naming_the_op() {
    devices().await;
    let scalar = web::JsTensor::randn(nums(&[])).map(JsValue::from).unwrap();
    expect_err(call(&scalar, "var", &[0.into()]), &["var", "0 dimensions"]);
    expect_err(
        call(&scalar, "split", &[nums(&[2.0, 3.0, 4.0])]),
        &["split", "0 dimensions"],
    );
    expect_err(
        call(&scalar, "slice", &[0.into()]),
        &["slice", "0 dimensions"],
    );
    let x = tensor(&[1.0; 6], &[2, 3], "float32").unwrap();
    let big = JsValue::from(2f64.powi(32) + 1.0);
    for op in [
        "sum",
        "slice",
        "softmax",
        "unsqueeze",
        "flatten",
        "squeeze",
        "argmax",
    ] {
        expect_err(
            call(&x, op, std::slice::from_ref(&big)),
            &[op, "out of range"],
        );
    }
    expect_err(
        call(&x, "transpose", &[big.clone(), 0.into()]),
        &["transpose", "out of range"],
    );
    expect_err(
        call(&x, "reshape", &[nums(&[2f64.powi(32) + 6.0])]),
        &["reshape", "out of range"],
    );
    expect_err(
        web::JsTensor::zeros(nums(&[2f64.powi(32) + 1.0]), None)
            .map(JsValue::from)
            .map_err(|e| msg(&e.into())),
        &["zeros", "out of range"],
    );
    expect_err(
        web::set_debug(big.clone())
            .map(|_| JsValue::UNDEFINED)
            .map_err(|e| msg(&e.into())),
        &["setDebug", "out of range"],
    );
    // Malformed IDX files, and arrays claiming a length they do not hold.
    let bytes = |b: &[u8]| JsValue::from(js_sys::Uint8Array::from(b));
    let ok = bytes(&[0, 0, 8, 1, 0, 0, 0, 1, 0]);
    let huge_array: JsValue = Array::new_with_length(1 << 31).into();
    let claims = Object::new();
    let _ = Reflect::set(&claims, &"length".into(), &2f64.powi(31).into());
    for (files, parts) in [
        (
            [
                bytes(&[0, 0, 0x0d, 1, 0, 0, 0, 1, 0]),
                ok.clone(),
                ok.clone(),
                ok.clone(),
            ],
            &["mnist", "dtype 0x0d"][..],
        ),
        (
            [
                bytes(&[0, 0, 8, 3, 255, 255, 255, 255, 0, 0, 0, 28, 0, 0, 0, 28]),
                ok.clone(),
                ok.clone(),
                ok.clone(),
            ],
            &["mnist", "limit"],
        ),
        (
            [
                ok.clone(),
                bytes(&[0, 0, 8, 1, 128, 0, 0, 0]),
                ok.clone(),
                ok.clone(),
            ],
            &["mnist", "limit"],
        ),
        (
            [ok.clone(), huge_array.clone(), ok.clone(), ok.clone()],
            &["mnist", "labels"],
        ),
        (
            [ok.clone(), claims.into(), ok.clone(), ok.clone()],
            &["mnist", "labels"],
        ),
        (
            [JsValue::UNDEFINED, ok.clone(), ok.clone(), ok.clone()],
            &["mnist", "Uint8Array"],
        ),
    ] {
        let [a, b, c, d] = files;
        expect_err(
            web::mnist_from_bytes(a, b, c, d).map_err(|e| msg(&e.into())),
            parts,
        );
    }
    expect_err(
        web::safe_load(JsValue::UNDEFINED).map_err(|e| msg(&e.into())),
        &["safeLoad", "Uint8Array"],
    );
    expect_err(
        web::JsTensor::new(huge_array, None, None)
            .map(JsValue::from)
            .map_err(|e| msg(&e.into())),
        &["Tensor", "undefined"],
    );
    // Still working.
    let y = call(&x, "sum", &[1.into()]).unwrap();
    assert_eq!(data(&y).await.unwrap(), vec![3.0, 3.0]);
}

#[wasm_bindgen_test]
async fn jit_errors_are_thrown() {
    devices().await;
    let a = tensor(&[1.0, 2.0, 3.0, 4.0], &[4], "float32").unwrap();
    let make = |f: Closure<dyn FnMut(JsValue) -> Result<JsValue, JsValue>>| {
        let j = web::TinyJitJs::new(f.as_ref().clone()).unwrap();
        (j, f)
    };
    // Reading a value during capture.
    let (mut j, _f) = make(Closure::new(|x: JsValue| {
        let _ = call(&x, "data", &[]).map_err(|e| JsValue::from(js_sys::Error::new(&e)))?;
        call(&x, "mul", &[2.into()]).map_err(|e| JsValue::from(js_sys::Error::new(&e)))
    }));
    let args: JsValue = Array::of1(&a).into();
    j.call(Some(args.clone())).expect("call 1 runs");
    expect_err(
        j.call(Some(args.clone())).map_err(|e| msg(&e.into())),
        &["jit", "reading"],
    );
    // Input shapes must match the capture.
    let (mut j, _f) = make(Closure::new(|x: JsValue| {
        call(&x, "add", &[1.into()]).map_err(|e| JsValue::from(js_sys::Error::new(&e)))
    }));
    for _ in 0..3 {
        let out = j.call(Some(args.clone())).unwrap();
        assert_eq!(data(&out).await.unwrap(), vec![2.0, 3.0, 4.0, 5.0]);
    }
    let other = tensor(&[1.0, 2.0], &[2], "float32").unwrap();
    expect_err(
        j.call(Some(Array::of1(&other).into()))
            .map_err(|e| msg(&e.into())),
        &["jit", "input 0", "[2]"],
    );
    expect_err(
        j.call(Some(Array::of1(&"x".into()).into()))
            .map_err(|e| msg(&e.into())),
        &["jit", "must be a Tensor"],
    );
    // A new input of the captured shape is read by the replay.
    let b = tensor(&[10.0, 20.0, 30.0, 40.0], &[4], "float32").unwrap();
    let out = j.call(Some(Array::of1(&b).into())).unwrap();
    assert_eq!(data(&out).await.unwrap(), vec![11.0, 21.0, 31.0, 41.0]);
    // Not a function; a function that throws; one that returns a non-tensor.
    expect_err(
        web::TinyJitJs::new(3.into())
            .map(JsValue::from)
            .map_err(|e| msg(&e.into())),
        &["jit", "function"],
    );
    let (mut j, _f) = make(Closure::new(|_x: JsValue| {
        Err(js_sys::Error::new("boom").into())
    }));
    expect_err(
        j.call(Some(args.clone())).map_err(|e| msg(&e.into())),
        &["jit", "boom"],
    );
    let (mut j, _f) = make(Closure::new(|_x: JsValue| Ok(5.into())));
    expect_err(
        j.call(Some(args.clone())).map_err(|e| msg(&e.into())),
        &["jit", "Tensor"],
    );
}

#[wasm_bindgen_test]
async fn tidy_scopes_release_tensors() {
    devices().await;
    let before = prop(&web::global_counters(), "liveTensors")
        .as_f64()
        .unwrap();
    web::start_scope();
    let a = tensor(&[1.0, 2.0], &[2], "float32").unwrap();
    let b = call(&a, "mul", &[3.into()]).unwrap();
    let c = call(&b, "add", &[1.into()]).unwrap();
    web::end_scope(c.clone());
    assert_eq!(prop(&a, "isDisposed").as_bool(), Some(true));
    assert_eq!(prop(&b, "isDisposed").as_bool(), Some(true));
    assert_eq!(prop(&c, "isDisposed").as_bool(), Some(false));
    assert_eq!(data(&c).await.unwrap(), vec![4.0, 7.0]);
    call(&c, "dispose", &[]).unwrap();
    let after = prop(&web::global_counters(), "liveTensors")
        .as_f64()
        .unwrap();
    assert_eq!(before, after);
}

#[wasm_bindgen_test]
async fn tensors_from_typed_and_nested_arrays() {
    devices().await;
    let make = |data: JsValue| -> JsValue {
        web::JsTensor::new(data, None, None)
            .map(JsValue::from)
            .unwrap_or_else(|e| panic!("{}", msg(&e.into())))
    };
    let cases: Vec<(JsValue, &str, Vec<f64>, Vec<f64>)> = vec![
        (
            js_sys::Int32Array::from(&[-1, 2, 3][..]).into(),
            "int32",
            vec![3.0],
            vec![-1.0, 2.0, 3.0],
        ),
        (
            js_sys::Uint32Array::from(&[7u32, 8][..]).into(),
            "uint32",
            vec![2.0],
            vec![7.0, 8.0],
        ),
        (
            js_sys::Uint8Array::from(&[255u8, 0, 9][..]).into(),
            "uint8",
            vec![3.0],
            vec![255.0, 0.0, 9.0],
        ),
        (
            js_sys::Float64Array::from(&[0.5, -2.25][..]).into(),
            "float32",
            vec![2.0],
            vec![0.5, -2.25],
        ),
        (
            json_to_js(&serde_json::json!([[1, 2, 3], [4, 5, 6]])),
            "float32",
            vec![2.0, 3.0],
            vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0],
        ),
        (
            json_to_js(&serde_json::json!([true, false])),
            "bool",
            vec![2.0],
            vec![1.0, 0.0],
        ),
        (JsValue::from(4.5), "float32", vec![], vec![4.5]),
    ];
    for (input, dtype, shape, values) in cases {
        let t = make(input);
        assert_eq!(prop(&t, "dtype").as_string().as_deref(), Some(dtype));
        let got: Vec<f64> = Array::from(&prop(&t, "shape"))
            .iter()
            .filter_map(|v| v.as_f64())
            .collect();
        assert_eq!(got, shape, "{dtype}");
        assert_eq!(data(&t).await.unwrap(), values, "{dtype}");
    }
}

/// bfloat16 tensors: numbers round to the nearest bf16 (ties to even), read back as a
/// Float32Array, keep their dtype through arithmetic and cast both ways, on every device.
#[wasm_bindgen_test]
async fn bfloat16_tensors_round_and_read_back_as_float32() {
    for dev in devices().await {
        let t = on(dev, || {
            tensor(
                &[1.0, 1.00390625, 1.01171875, 0.1, -65504.0],
                &[5],
                "bfloat16",
            )
        })
        .unwrap();
        assert_eq!(prop(&t, "dtype").as_string().as_deref(), Some("bfloat16"));
        let d = await_promise(call(&t, "data", &[]).unwrap()).await.unwrap();
        assert!(d.is_instance_of::<js_sys::Float32Array>(), "{dev}");
        let want = [1.0, 1.0, 1.015625, 0.10009765625, -65536.0];
        assert_eq!(data(&t).await.unwrap(), want, "{dev}");
        let sq = on(dev, || call(&t, "mul", std::slice::from_ref(&t))).unwrap();
        assert_eq!(prop(&sq, "dtype").as_string().as_deref(), Some("bfloat16"));
        // 1.015625^2 = 1.031494140625 rounds to 1.03125; 65536^2 is a power of two.
        let want = [1.0, 1.0, 1.03125, 0.010009765625, 4294967296.0];
        assert_eq!(data(&sq).await.unwrap(), want, "{dev}");
        let f = on(dev, || call(&t, "cast", &["float32".into()])).unwrap();
        assert_eq!(prop(&f, "dtype").as_string().as_deref(), Some("float32"));
        let back = on(dev, || call(&f, "cast", &["bfloat16".into()])).unwrap();
        assert_eq!(data(&back).await.unwrap(), data(&t).await.unwrap(), "{dev}");
    }
}

#[wasm_bindgen_test]
async fn tensors_move_between_webgpu_and_the_interpreter() {
    devices().await;
    let g = on("webgpu", || tensor(&[1.0, -2.0, 3.5], &[3], "float32")).unwrap();
    assert_eq!(prop(&g, "device").as_string().as_deref(), Some("webgpu"));
    let c = await_promise(call(&g, "to", &["cpu".into()]).unwrap())
        .await
        .unwrap();
    assert_eq!(prop(&c, "device").as_string().as_deref(), Some("cpu"));
    let back = await_promise(
        call(
            &call(&c, "mul", &[2.into()]).unwrap(),
            "to",
            &["webgpu".into()],
        )
        .unwrap(),
    )
    .await
    .unwrap();
    assert_eq!(prop(&back, "device").as_string().as_deref(), Some("webgpu"));
    assert_eq!(data(&back).await.unwrap(), vec![2.0, -4.0, 7.0]);
    expect_err(call(&g, "to", &["tpu".into()]), &["to", "tpu"]);
    // Mixing devices in one op is an error naming both.
    expect_err(call(&g, "add", std::slice::from_ref(&c)), &["add"]);
}

#[wasm_bindgen_test]
async fn tensors_shard_over_numbered_cpu_devices() {
    devices().await;
    let devs = || Array::of2(&"cpu:0".into(), &"cpu:1".into()).into();
    let x = on("cpu", || {
        tensor(
            &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0],
            &[4, 2],
            "float32",
        )
    })
    .unwrap();
    let s = call(&x, "shard", &[devs(), 0.into()]).unwrap();
    let names: Vec<String> = Array::from(&prop(&s, "devices"))
        .iter()
        .filter_map(|v| v.as_string())
        .collect();
    assert_eq!(names, vec!["cpu", "cpu:1"]);
    // Per-shard elementwise op, then a sum over the split axis (all-reduced).
    let y = call(&call(&s, "mul", &[2.into()]).unwrap(), "sum", &[0.into()]).unwrap();
    assert_eq!(data(&y).await.unwrap(), vec![32.0, 40.0]);
    let r = call(&x, "shard", &[devs()]).unwrap();
    assert_eq!(
        data(&call(&r, "add", &[1.into()]).unwrap()).await.unwrap(),
        vec![2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0]
    );
    expect_err(call(&x, "shard", &[devs(), 2.into()]), &["shard", "axis 2"]);
    let three = Array::of3(&"cpu:0".into(), &"cpu:1".into(), &"cpu:2".into()).into();
    expect_err(
        call(&x, "shard", &[three, 0.into()]),
        &["shard", "3 devices"],
    );
    let bad = Array::of1(&"tpu:0".into()).into();
    expect_err(call(&x, "shard", &[bad]), &["shard", "tpu:0"]);
    expect_err(call(&x, "shard", &["cpu".into()]), &["shard", "array"]);
}

/// A PyTorch checkpoint and safetensors metadata from bytes, as a page loads them.
#[wasm_bindgen_test]
async fn torch_load_and_safetensors_metadata() {
    devices().await;
    let err = |r: Result<JsValue, JsError>| r.map_err(|e| msg(&e.into()));
    let ckpt = js_sys::Uint8Array::from(&include_bytes!("fixtures/torch/views.pt")[..]);
    let st = err(web::torch_load(ckpt.into())).unwrap();
    let t = prop(&st, "t");
    let shape: Vec<f64> = Array::from(&prop(&t, "shape"))
        .iter()
        .filter_map(|v| v.as_f64())
        .collect();
    assert_eq!(shape, [6.0, 4.0]);
    assert_eq!(data(&t).await.unwrap()[..4], [0.0, 6.0, 12.0, 18.0]);
    let tail = prop(&st, "tail");
    assert_eq!(prop(&tail, "dtype").as_string().as_deref(), Some("int32"));
    assert_eq!(
        data(&tail).await.unwrap(),
        [1000.0, 2000.0, 3000.0, 4000.0, 5000.0, 6000.0]
    );
    expect_err(
        err(web::torch_load(JsValue::UNDEFINED)),
        &["torchLoad", "Uint8Array"],
    );
    let junk = js_sys::Uint8Array::from(&b"not a checkpoint"[..]);
    expect_err(
        err(web::torch_load(junk.into())),
        &["torchLoad", "not a zip archive"],
    );

    let state = Object::new();
    let w = tensor(&[1.0, 2.0], &[2], "float32").unwrap();
    Reflect::set(&state, &"w".into(), &w).unwrap();
    let meta = Object::new();
    Reflect::set(&meta, &"step".into(), &"7".into()).unwrap();
    let saved =
        err(web::safe_save(state.clone().into(), Some(meta.into())).map(JsValue::from)).unwrap();
    let bytes = await_promise(saved).await.unwrap();
    let back = err(web::safe_load_metadata(bytes)).unwrap();
    assert_eq!(prop(&back, "step").as_string().as_deref(), Some("7"));
    let bad = Object::new();
    Reflect::set(&bad, &"n".into(), &3.into()).unwrap();
    expect_err(
        err(web::safe_save(state.into(), Some(bad.into())).map(JsValue::from)),
        &["safeSave", "metadata \"n\" must be a string"],
    );
}

#[path = "common/api_map.rs"]
mod api_map;

/// The JavaScript names of tinygrad's Tensor API that tests/common/api_map.rs claims exist on
/// the engine's `Tensor` class (as methods, getters or static functions). The two that
/// js/wgrad.js adds (`sequential`, `Tensor.fromUrl`) are checked by scripts/page_test.mjs on
/// the packed npm package.
#[wasm_bindgen_test]
async fn tinygrad_names_exist_on_the_js_tensor() {
    engine().await;
    let t = tensor(&[1.0, 2.0], &[2], "float32").expect("tensor");
    let class = prop(&t, "constructor");
    let proto = prop(&class, "prototype");
    let missing: Vec<&str> = api_map::API
        .iter()
        .map(|e| e.2)
        .filter(|js| !js.is_empty() && !matches!(*js, "sequential" | "fromUrl"))
        .filter(|js| {
            let on = |o: &JsValue| Reflect::has(o, &(*js).into()).unwrap_or(false);
            !on(&proto) && !on(&class)
        })
        .collect();
    assert!(
        missing.is_empty(),
        "not on Tensor or its prototype: {missing:?}"
    );
}

/// Python's indexing from JavaScript: slice strings, null, "...", arrays of integers and
/// tensors; `set` writes in place; `maskedSelect` resolves with the selection.
#[wasm_bindgen_test]
async fn indexing_from_javascript() {
    let arr = |v: Vec<JsValue>| -> JsValue { v.into_iter().collect::<Array>().into() };
    for dev in devices().await {
        let got = async {
            let vals: Vec<f64> = (0..12).map(f64::from).collect();
            let x = on(dev, || tensor(&vals, &[3, 4], "float32"))?;
            let idx = on(dev, || tensor(&[2.0, 0.0], &[2], "int32"))?;
            let range = arr(vec!["::-1".into(), JsValue::NULL, "1::2".into()]);
            let sliced = on(dev, || call(&x, "get", &[range]))?;
            let picked = on(dev, || {
                call(&x, "get", &[arr(vec!["...".into(), idx.clone()])])
            })?;
            let single = on(dev, || call(&x, "get", &[JsValue::from(1)]))?;
            let at = arr(vec![0.into(), nums(&[1.0, 3.0])]);
            on(dev, || call(&x, "set", &[at, (-1).into()]))?;
            let mask = on(dev, || call(&x, "lt", &[JsValue::from(3)]))?;
            let selected = await_promise(on(dev, || call(&x, "maskedSelect", &[mask]))?).await?;
            Ok::<_, String>((
                data(&sliced).await?,
                data(&picked).await?,
                data(&single).await?,
                data(&x).await?,
                data(&selected).await?,
            ))
        }
        .await
        .unwrap_or_else(|e| panic!("on {dev}: {e}"));
        assert_eq!(
            got.0,
            [9.0, 11.0, 5.0, 7.0, 1.0, 3.0],
            "{dev}: x[::-1, None, 1::2]"
        );
        assert_eq!(
            got.1,
            [2.0, 0.0, 6.0, 4.0, 10.0, 8.0],
            "{dev}: x[..., [2, 0]]"
        );
        assert_eq!(got.2, [4.0, 5.0, 6.0, 7.0], "{dev}: x[1]");
        let mut want: Vec<f64> = (0..12).map(f64::from).collect();
        want[1] = -1.0;
        want[3] = -1.0;
        assert_eq!(got.3, want, "{dev}: x[0, [1, 3]] = -1");
        assert_eq!(got.4, [0.0, -1.0, 2.0, -1.0], "{dev}: x[x < 3]");
    }
}

/// Empty tensors from JavaScript: an empty slice, a sum over it (its identity), `maskedSelect`
/// selecting nothing and `new Tensor([])` all work and read back as empty arrays.
#[wasm_bindgen_test]
async fn empty_tensors_from_javascript() {
    let arr = |v: Vec<JsValue>| -> JsValue { v.into_iter().collect::<Array>().into() };
    for dev in devices().await {
        let got = async {
            let vals: Vec<f64> = (0..12).map(f64::from).collect();
            let x = on(dev, || tensor(&vals, &[3, 4], "float32"))?;
            let e = on(dev, || call(&x, "get", &[arr(vec!["2:2".into()])]))?;
            let sum = on(dev, || call(&e, "sum", &[JsValue::from(0)]))?;
            let mask = on(dev, || call(&x, "gt", &[JsValue::from(100)]))?;
            let none = await_promise(on(dev, || call(&x, "maskedSelect", &[mask]))?).await?;
            let made = on(dev, || tensor(&[], &[0, 3], "float32"))?;
            let shape = |t: &JsValue| -> Vec<f64> {
                Array::from(&prop(t, "shape"))
                    .iter()
                    .map(|d| d.as_f64().unwrap_or(-1.0))
                    .collect()
            };
            Ok::<_, String>((
                shape(&e),
                data(&e).await?,
                data(&sum).await?,
                shape(&none),
                shape(&made),
            ))
        }
        .await
        .unwrap_or_else(|e| panic!("on {dev}: {e}"));
        assert_eq!(got.0, [0.0, 4.0], "{dev}: x[2:2].shape");
        assert!(got.1.is_empty(), "{dev}: x[2:2] data");
        assert_eq!(got.2, [0.0; 4], "{dev}: x[2:2].sum(0)");
        assert_eq!(got.3, [0.0], "{dev}: x[x > 100].shape");
        assert_eq!(got.4, [0.0, 3.0], "{dev}: new Tensor([], [0, 3]).shape");
    }
}

/// The layers and init helpers of the convolution block, as JavaScript makes and calls them:
/// shapes through the layers, the LSTM cell's state, the init bounds, errors naming the layer.
#[wasm_bindgen_test]
async fn conv_block_layers_and_init_helpers() {
    devices().await;
    let shape = |t: &JsValue| -> Vec<f64> {
        Array::from(&prop(t, "shape"))
            .iter()
            .map(|d| d.as_f64().unwrap_or(-1.0))
            .collect()
    };
    let err = |e: JsError| msg(&e.into());
    let x = web::JsTensor::randn(nums(&[2.0, 3.0]))
        .map(JsValue::from)
        .unwrap();
    let cell: JsValue = web::LSTMCell::new(3.into(), 4.into(), None)
        .map_err(err)
        .unwrap()
        .into();
    let hc = call(&cell, "forward", std::slice::from_ref(&x)).unwrap();
    assert_eq!(shape(&Array::from(&hc).get(1)), [2.0, 4.0]);
    let hc2 = call(&cell, "forward", &[x.clone(), hc.clone()]).unwrap();
    assert_eq!(shape(&Array::from(&hc2).get(0)), [2.0, 4.0]);
    assert_eq!(
        Array::from(&call(&cell, "parameters", &[]).unwrap()).length(),
        4
    );
    assert_eq!(shape(&prop(&cell, "weightHh")), [16.0, 4.0]);
    expect_err(
        call(&cell, "forward", &[x.clone(), nums(&[])]),
        &["LSTMCell.forward", "[h, c]"],
    );
    let img = web::JsTensor::randn(nums(&[1.0, 2.0, 3.0, 3.0]))
        .map(JsValue::from)
        .unwrap();
    let opts = json_to_js(&serde_json::json!({"stride": 2, "padding": 1, "outputPadding": 1}));
    let up: JsValue = web::ConvTranspose2d::new(2.into(), 5.into(), 3.into(), Some(opts))
        .map_err(err)
        .unwrap()
        .into();
    assert_eq!(
        shape(&call(&up, "forward", std::slice::from_ref(&img)).unwrap()),
        [1.0, 5.0, 6.0, 6.0]
    );
    let rms: JsValue = web::RMSNorm::new(4.into(), None)
        .map_err(err)
        .unwrap()
        .into();
    expect_err(
        call(&rms, "forward", std::slice::from_ref(&img)),
        &["RMSNorm", "[1, 2, 3, 3]"],
    );
    let k = web::JsTensor::kaiming_uniform(nums(&[64.0, 16.0]), Some(0.0.into()))
        .map(JsValue::from)
        .unwrap();
    let b = (6.0f64 / 16.0).sqrt();
    assert!(data(&k).await.unwrap().iter().all(|v| v.abs() <= b));
    expect_err(
        web::JsTensor::glorot_uniform(nums(&[]))
            .map(JsValue::from)
            .map_err(err),
        &["glorotUniform"],
    );
    // Options objects and modes of the op table's rows.
    let pooled = call(
        &img,
        "maxPool2d",
        &[
            3.into(),
            2.into(),
            json_to_js(&serde_json::json!({"padding": 1, "ceilMode": true})),
        ],
    )
    .unwrap();
    assert_eq!(shape(&pooled), [1.0, 2.0, 2.0, 2.0]);
    let padded = call(
        &img,
        "pad",
        &[
            json_to_js(&serde_json::json!([[0, 0], [0, 0], [1, 1], [2, 0]])),
            "reflect".into(),
        ],
    )
    .unwrap();
    assert_eq!(shape(&padded), [1.0, 2.0, 5.0, 5.0]);
    expect_err(
        call(
            &img,
            "pad",
            &[
                json_to_js(&serde_json::json!([[0, 0], [0, 0], [0, 0], [0, 0]])),
                "wrap".into(),
            ],
        ),
        &["pad", "wrap"],
    );
    expect_err(
        call(&img, "interpolate", &[nums(&[4.0, 4.0]), "bicubic".into()]),
        &["interpolate", "bicubic"],
    );
}

/// Optimizer groups, schedules and clipping from JavaScript: a group of SGD and Adam steps both
/// (the members stay usable), a schedule given as an option runs on the device, `clipGradNorm`
/// returns the norm, and bad schedules throw errors naming the optimizer.
#[wasm_bindgen_test]
async fn optimizer_groups_schedules_and_clipping() {
    devices().await;
    let err = |e: JsError| msg(&e.into());
    let param = |v: &[f64]| -> JsValue {
        let t = tensor(v, &[v.len()], "float32").unwrap();
        Reflect::set(&t, &"requiresGrad".into(), &true.into()).unwrap();
        t
    };
    let (a, b) = (param(&[1.0, 2.0]), param(&[3.0]));
    let arr = |v: &[&JsValue]| -> JsValue { v.iter().copied().collect::<Array>().into() };
    let opts = json_to_js(&serde_json::json!({
        "lr": 0.5, "schedule": {"kind": "step", "stepSize": 1, "gamma": 0.5}
    }));
    let sgd: JsValue = web::sgd(arr(&[&a]), Some(opts))
        .map_err(err)
        .unwrap()
        .into();
    let adam: JsValue = web::adam(arr(&[&b]), None).map_err(err).unwrap().into();
    let group: JsValue = web::optimizer_group(arr(&[&sgd, &adam]))
        .map_err(err)
        .unwrap()
        .into();
    let ones = |n: usize| tensor(&vec![1.0; n], &[n], "float32").unwrap();
    for _ in 0..2 {
        call(&a, "setGrad", &[ones(2)]).unwrap();
        call(&b, "setGrad", &[ones(1)]).unwrap();
        let norm = web::clip_grad_norm_js(arr(&[&a, &b]), 1.0.into(), None)
            .map(JsValue::from)
            .map_err(err)
            .unwrap();
        let g = group.clone();
        training(move || call(&g, "step", &[])).unwrap();
        assert!((item(&norm).await.unwrap() - 3f64.sqrt()).abs() < 1e-5);
    }
    // SGD's rates were 0.5 then 0.25, on gradients clipped to 1/sqrt(3).
    let g = 1.0 / 3f64.sqrt();
    let got = data(&a).await.unwrap();
    assert!((got[0] - (1.0 - 0.75 * g)).abs() < 1e-5, "{got:?}");
    assert_eq!(
        item(&call(&sgd, "currentLr", &[]).unwrap()).await.unwrap(),
        0.25
    );
    assert!(data(&b).await.unwrap()[0] < 3.0, "Adam did not step");
    expect_err(
        call(
            &sgd,
            "setSchedule",
            &[json_to_js(&serde_json::json!({"kind": "step"}))],
        ),
        &["SGD.setSchedule", "stepSize"],
    );
    expect_err(
        call(
            &adam,
            "setSchedule",
            &[json_to_js(
                &serde_json::json!({"kind": "cosine", "totalSteps": 0}),
            )],
        ),
        &["Adam", "schedule"],
    );
    expect_err(
        web::optimizer_group(arr(&[&sgd, &sgd]))
            .map(JsValue::from)
            .map_err(err),
        &["OptimizerGroup", "also in"],
    );
    expect_err(
        web::optimizer_group(arr(&[&a]))
            .map(JsValue::from)
            .map_err(err),
        &["OptimizerGroup", "element 0"],
    );
}

/// Kernels as a hardware GPU gets them (operand tiles staged in workgroup memory, with barriers
/// inside loops; grouped reduces summing through subgroups, `enable subgroups;`) compile in
/// Chromium, whose WGSL compiler checks uniformity more strictly than naga, and compute what
/// the interpreter does. (SwiftShader gets a software adapter's plans unless asked; its
/// subgroups have 4 invocations.)
#[wasm_bindgen_test]
async fn gpu_plans_compile_and_compute_in_the_browser() {
    devices().await;
    let build = || -> wgrad::Result<Vec<Tensor>> {
        let vals = |n: usize, k: usize| -> Vec<f32> {
            (0..n)
                .map(|i| ((i * k) % 101) as f32 / 50.0 - 1.0)
                .collect()
        };
        let a = Tensor::from_slice(&vals(128 * 64, 37), &[128, 64])?;
        let b = Tensor::from_slice(&vals(64 * 128, 53), &[64, 128])?;
        let c = Tensor::from_slice(&vals(4 * 64 * 48, 29), &[4, 64, 48])?;
        let d = Tensor::from_slice(&vals(8 * 4096, 31), &[8, 4096])?;
        Ok(vec![
            a.matmul(&b)?.relu()?,
            c.transpose(1, 2)?.matmul(&c)?,
            a.sum(1, false)?,
            d.sum(1, false)?,
        ])
    };
    let subgroup = wgrad::runtime::wgpu::adapter_info().map_or(0, |a| a.subgroup_size as usize);
    assert_eq!(
        subgroup, 4,
        "Chromium's SwiftShader sums through subgroups of 4"
    );
    let staged = wgrad::Context::new()
        .dev(wgrad::Device::Wgpu)
        .opt_target(wgrad::codegen::OptTarget::Gpu)
        .run(|| {
            let items = build().and_then(|t| Tensor::schedule_all(&t.iter().collect::<Vec<_>>()));
            items.map(|items| {
                items
                    .iter()
                    .map(|it| match it {
                        wgrad::schedule::ScheduleItem::Kernel { ast, .. } => {
                            let t = wgrad::codegen::Target {
                                subgroup,
                                ..wgrad::codegen::Target::new(wgrad::codegen::OptTarget::Gpu)
                            };
                            let plan = wgrad::codegen::default_plan(ast, &t);
                            let opts = plan.opts();
                            let staged = opts.iter().any(|o| o.stage.is_some());
                            let subgroups =
                                opts.iter().any(|o| o.for_target(&t).subgroup.is_some());
                            (staged, subgroups)
                        }
                        _ => (false, false),
                    })
                    .fold((false, false), |a, b| (a.0 || b.0, a.1 || b.1))
            })
        })
        .unwrap();
    assert!(staged.0, "the matmuls stage their tiles with GPU plans");
    assert!(staged.1, "the long sums combine through subgroups");
    let gpu = wgrad::Context::new()
        .dev(wgrad::Device::Wgpu)
        .opt_target(wgrad::codegen::OptTarget::Gpu)
        .run(build)
        .unwrap();
    let want = wgrad::Context::new()
        .dev(wgrad::Device::Interp)
        .run(build)
        .unwrap();
    for (i, (g, w)) in gpu.iter().zip(&want).enumerate() {
        let (g, w) = (f64s(g).await, f64s(w).await);
        compare(&format!("output {i}"), &g, &w, 1e-4, 1e-4).unwrap();
    }
}

/// A float tensor's values, read back.
async fn f64s(t: &Tensor) -> Vec<f64> {
    let v = t.to_vec_async::<f32>().await.unwrap();
    v.into_iter().map(f64::from).collect()
}

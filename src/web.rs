//! The JavaScript API (wasm-bindgen), the only module that names wasm_bindgen. It mirrors the
//! Rust API in camelCase: `Tensor` with its ops, nn layers, optimizers, the TinyJit, contexts,
//! datasets and counters; `js/wgrad.js` adds the namespaces (`nn`, `optim`, `datasets`),
//! `init`, `jit`, `tidy` and `getParameters` on top.
//!
//! A JS `Tensor` is a handle: the engine's tensor lives in a registry keyed by the handle's id,
//! so `dispose()` (or `tidy`, or the handle being garbage-collected: the package is built with
//! weak references) releases its buffers at once, and every argument is looked up there, which
//! turns a disposed tensor or a non-tensor into an error naming the op. No function here
//! panics on bad input: every failure is a thrown JS `Error`.

use crate::nn::optim::{Adam, AdamW, Lamb, Lars, Muon, Optimizer, Sgd};
use crate::{
    Axes, Context, Conv2dOpts, CrossEntropyOpts, DType, Device, Error, GlobalCounters, Operand,
    Padding, Reduction, Tensor, TinyJit,
};
use js_sys::{Array, Function, Object, Reflect};
use std::cell::RefCell;
use std::collections::{HashMap, HashSet};
use wasm_bindgen::prelude::*;

type JsResult<T> = std::result::Result<T, JsError>;

#[wasm_bindgen(typescript_custom_section)]
const TS_TYPES: &str = r#"
export type DType = "float32" | "float16" | "int32" | "uint32" | "uint8" | "bool";
export type Reduction = "mean" | "sum" | "none";
export interface Conv2dOptions {
  stride?: number | [number, number];
  padding?: number | [number, number] | "valid" | "same";
  dilation?: number | [number, number];
  groups?: number;
}
export interface CrossEntropyOptions {
  ignoreIndex?: number;
  labelSmoothing?: number;
  reduction?: Reduction;
}
export interface InitOptions { device?: "webgpu" | "cpu"; }
export interface AdapterInfo {
  name: string;
  backend: string;
  deviceType: string;
  driver: string;
  maxStorageBuffersPerStage: number;
  maxStorageBindingBytes: number;
}
export interface InitInfo { device: "webgpu" | "cpu"; adapter: AdapterInfo | null; }
export interface ContextOptions {
  TRAINING?: boolean | number;
  NO_GRAD?: boolean | number;
  DEBUG?: number;
  DEVICE?: "webgpu" | "cpu";
  training?: boolean | number;
  noGrad?: boolean | number;
  debug?: number;
  device?: "webgpu" | "cpu";
}
export interface GlobalCounters {
  kernelCount: number;
  globalOps: number;
  globalMem: number;
  timeMs: number;
  liveTensors: number;
  liveBuffers: number;
  liveBytes: number;
}
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

/// Describe a JS value for an error message.
fn describe(v: &JsValue) -> String {
    if v.is_undefined() {
        return "undefined".into();
    }
    if v.is_null() {
        return "null".into();
    }
    if let Some(n) = v.as_f64() {
        return format!("the number {n}");
    }
    if let Some(s) = v.as_string() {
        return format!("the string {s:?}");
    }
    if Array::is_array(v) {
        return "an array".into();
    }
    let ctor = Reflect::get(v, &"constructor".into())
        .ok()
        .and_then(|c| Reflect::get(&c, &"name".into()).ok())
        .and_then(|n| n.as_string());
    match ctor {
        Some(name) => format!("a {name}"),
        None => v.js_typeof().as_string().unwrap_or_default(),
    }
}

const ID_KEY: &str = "_wgradId";

enum TensorRef {
    Live(Tensor),
    Disposed,
    NotATensor,
}

fn tensor_ref(v: &JsValue) -> TensorRef {
    if !v.is_object() {
        return TensorRef::NotATensor;
    }
    match Reflect::get(v, &ID_KEY.into()) {
        // The getter throws on a handle whose memory wasm-bindgen already freed.
        Err(_) => TensorRef::Disposed,
        Ok(id) => match id.as_f64() {
            Some(id) => lookup(id as u32).map_or(TensorRef::Disposed, TensorRef::Live),
            None => TensorRef::NotATensor,
        },
    }
}

/// Resolve an argument that must be a tensor.
fn tensor_arg(v: &JsValue, op: &str, what: &str) -> JsResult<Tensor> {
    match tensor_ref(v) {
        TensorRef::Live(t) => Ok(t),
        TensorRef::Disposed => Err(fail(op, format!("{what} is a disposed Tensor"))),
        TensorRef::NotATensor => Err(fail(
            op,
            format!("{what} must be a Tensor, got {}", describe(v)),
        )),
    }
}

/// Resolve an argument that may be a tensor or a number (or a boolean).
fn operand_arg(v: &JsValue, op: &str, what: &str) -> JsResult<Operand> {
    if let Some(b) = v.as_bool() {
        return Ok(Operand::Int(b as i64));
    }
    if let Some(n) = v.as_f64() {
        // Whole numbers adopt the tensor's dtype (like Python ints); others are floats.
        return Ok(if n.fract() == 0.0 && n.abs() < 9.0e15 {
            Operand::Int(n as i64)
        } else {
            Operand::Float(n)
        });
    }
    match tensor_ref(v) {
        TensorRef::Live(t) => Ok(Operand::Tensor(t)),
        TensorRef::Disposed => Err(fail(op, format!("{what} is a disposed Tensor"))),
        TensorRef::NotATensor => Err(fail(
            op,
            format!("{what} must be a Tensor or a number, got {}", describe(v)),
        )),
    }
}

fn opt_tensor_arg(v: &JsValue, op: &str, what: &str) -> JsResult<Option<Tensor>> {
    if v.is_undefined() || v.is_null() {
        Ok(None)
    } else {
        tensor_arg(v, op, what).map(Some)
    }
}

fn number_arg(v: &JsValue, op: &str, what: &str) -> JsResult<f64> {
    v.as_f64()
        .ok_or_else(|| fail(op, format!("{what} must be a number, got {}", describe(v))))
}

fn opt_number(v: &JsValue, op: &str, what: &str, default: f64) -> JsResult<f64> {
    if v.is_undefined() || v.is_null() {
        Ok(default)
    } else {
        number_arg(v, op, what)
    }
}

fn int_arg(v: &JsValue, op: &str, what: &str) -> JsResult<i64> {
    let n = number_arg(v, op, what)?;
    if n.fract() != 0.0 || n.abs() > 9.0e15 {
        return Err(fail(op, format!("{what} must be an integer, got {n}")));
    }
    Ok(n as i64)
}

fn opt_int(v: &JsValue, op: &str, what: &str, default: i64) -> JsResult<i64> {
    if v.is_undefined() || v.is_null() {
        Ok(default)
    } else {
        int_arg(v, op, what)
    }
}

fn size_arg(v: &JsValue, op: &str, what: &str) -> JsResult<usize> {
    let n = int_arg(v, op, what)?;
    usize::try_from(n).map_err(|_| fail(op, format!("{what} must not be negative, got {n}")))
}

fn opt_bool(v: &JsValue, op: &str, what: &str, default: bool) -> JsResult<bool> {
    if v.is_undefined() || v.is_null() {
        return Ok(default);
    }
    v.as_bool()
        .ok_or_else(|| fail(op, format!("{what} must be a boolean, got {}", describe(v))))
}

/// A list of integers: an array, a typed array, or one number.
fn ints_arg(v: &JsValue, op: &str, what: &str) -> JsResult<Vec<i64>> {
    if v.as_f64().is_some() {
        return Ok(vec![int_arg(v, op, what)?]);
    }
    if !Array::is_array(v) && !js_sys::ArrayBuffer::is_view(v) {
        return Err(fail(
            op,
            format!("{what} must be an array of integers, got {}", describe(v)),
        ));
    }
    Array::from(v)
        .iter()
        .enumerate()
        .map(|(i, x)| int_arg(&x, op, &format!("{what}[{i}]")))
        .collect()
}

fn shape_arg(v: &JsValue, op: &str) -> JsResult<Vec<usize>> {
    ints_arg(v, op, "shape")?
        .into_iter()
        .map(|d| usize::try_from(d).map_err(|_| fail(op, format!("shape has a negative size {d}"))))
        .collect()
}

fn isizes_arg(v: &JsValue, op: &str, what: &str) -> JsResult<Vec<isize>> {
    Ok(ints_arg(v, op, what)?
        .into_iter()
        .map(|d| d as isize)
        .collect())
}

fn axes_arg(v: &JsValue, op: &str) -> JsResult<Axes> {
    if v.is_undefined() || v.is_null() {
        Ok(Axes::All)
    } else {
        Ok(Axes::Some(isizes_arg(v, op, "axis")?))
    }
}

fn dtype_arg(v: &JsValue, op: &str) -> JsResult<Option<DType>> {
    if v.is_undefined() || v.is_null() {
        return Ok(None);
    }
    let s = v.as_string().ok_or_else(|| {
        fail(
            op,
            format!(
                "dtype must be a string such as \"float32\", got {}",
                describe(v)
            ),
        )
    })?;
    s.parse::<DType>().map(Some).or_fail(op)
}

fn js_dtype(dt: DType) -> &'static str {
    match dt {
        DType::F32 => "float32",
        DType::F16 => "float16",
        DType::I32 => "int32",
        DType::U32 => "uint32",
        DType::U8 => "uint8",
        DType::Bool => "bool",
    }
}

fn get(obj: &JsValue, key: &str) -> JsValue {
    if obj.is_object() {
        Reflect::get(obj, &key.into()).unwrap_or(JsValue::UNDEFINED)
    } else {
        JsValue::UNDEFINED
    }
}

/// An options argument: undefined or an object.
fn opts_arg(v: &JsValue, op: &str) -> JsResult<JsValue> {
    if v.is_undefined() || v.is_null() || (v.is_object() && !Array::is_array(v)) {
        Ok(v.clone())
    } else {
        Err(fail(
            op,
            format!("options must be an object, got {}", describe(v)),
        ))
    }
}

fn pair_arg(v: &JsValue, op: &str, what: &str) -> JsResult<(usize, usize)> {
    let xs = ints_arg(v, op, what)?;
    let ok = |x: i64| usize::try_from(x).map_err(|_| fail(op, format!("{what} is negative")));
    match xs.as_slice() {
        [a] => Ok((ok(*a)?, ok(*a)?)),
        [a, b] => Ok((ok(*a)?, ok(*b)?)),
        _ => Err(fail(
            op,
            format!("{what} must be a number or two numbers, got {xs:?}"),
        )),
    }
}

fn tensors_arg(v: &JsValue, op: &str) -> JsResult<Vec<Tensor>> {
    if !Array::is_array(v) {
        return Err(fail(
            op,
            format!("expected an array of Tensors, got {}", describe(v)),
        ));
    }
    Array::from(v)
        .iter()
        .enumerate()
        .map(|(i, x)| tensor_arg(&x, op, &format!("element {i}")))
        .collect()
}

fn tensor_array(ts: Vec<Tensor>) -> Array {
    ts.into_iter().map(|t| JsValue::from(register(t))).collect()
}

// ------------------------------------------------------------------------------ data

/// Flatten nested arrays of numbers/booleans, returning values, shape and whether all were
/// booleans.
fn flatten(v: &JsValue, op: &str) -> JsResult<(Vec<f64>, Vec<usize>, bool)> {
    fn walk(
        v: &JsValue,
        depth: usize,
        shape: &mut Vec<usize>,
        out: &mut Vec<f64>,
        bools: &mut bool,
        op: &str,
    ) -> JsResult<()> {
        if Array::is_array(v) {
            let a = Array::from(v);
            let n = a.length() as usize;
            if shape.len() == depth {
                shape.push(n);
            } else if shape.get(depth) != Some(&n) {
                return Err(fail(
                    op,
                    "nested arrays are ragged (rows of different lengths)",
                ));
            }
            for x in a.iter() {
                walk(&x, depth + 1, shape, out, bools, op)?;
            }
            return Ok(());
        }
        if js_sys::ArrayBuffer::is_view(v) && !v.is_instance_of::<js_sys::DataView>() {
            let a = Array::from(v);
            return walk(&a.into(), depth, shape, out, bools, op);
        }
        if depth < shape.len() {
            return Err(fail(
                op,
                "nested arrays are ragged (a number where a row was expected)",
            ));
        }
        if let Some(b) = v.as_bool() {
            out.push(b as u8 as f64);
            return Ok(());
        }
        *bools = false;
        match v.as_f64() {
            Some(x) => {
                out.push(x);
                Ok(())
            }
            None => Err(fail(
                op,
                format!("data must hold numbers or booleans, found {}", describe(v)),
            )),
        }
    }
    let (mut out, mut shape, mut bools) = (vec![], vec![], true);
    walk(v, 0, &mut shape, &mut out, &mut bools, op)?;
    if out.is_empty() {
        bools = false;
    }
    Ok((out, shape, bools))
}

fn encode(values: &[f64], dt: DType) -> Vec<u8> {
    let mut b = Vec::with_capacity(values.len() * dt.size());
    for &v in values {
        match dt {
            DType::F32 => b.extend((v as f32).to_le_bytes()),
            DType::F16 => b.extend(half::f16::from_f64(v).to_le_bytes()),
            DType::I32 => b.extend((v as i32).to_le_bytes()),
            DType::U32 => b.extend((v as u32).to_le_bytes()),
            DType::U8 => b.push(v as u8),
            DType::Bool => b.push((v != 0.0) as u8),
        }
    }
    b
}

/// The natural dtype of a typed array, if it has one.
fn typed_array_dtype(v: &JsValue) -> Option<DType> {
    if v.is_instance_of::<js_sys::Float32Array>() || v.is_instance_of::<js_sys::Float64Array>() {
        Some(DType::F32)
    } else if v.is_instance_of::<js_sys::Int32Array>()
        || v.is_instance_of::<js_sys::Int16Array>()
        || v.is_instance_of::<js_sys::Int8Array>()
        || v.is_instance_of::<js_sys::Uint16Array>()
    {
        Some(DType::I32)
    } else if v.is_instance_of::<js_sys::Uint32Array>() {
        Some(DType::U32)
    } else if v.is_instance_of::<js_sys::Uint8Array>()
        || v.is_instance_of::<js_sys::Uint8ClampedArray>()
    {
        Some(DType::U8)
    } else {
        None
    }
}

fn tensor_from_js(data: &JsValue, shape: &JsValue, dtype: &JsValue) -> JsResult<Tensor> {
    const OP: &str = "Tensor";
    let dtype = dtype_arg(dtype, OP)?;
    let (values, inferred, natural) = if typed_array_dtype(data).is_some() {
        let n = Reflect::get(data, &"length".into())
            .ok()
            .and_then(|l| l.as_f64())
            .unwrap_or(0.0) as usize;
        let vals = if data.is_instance_of::<js_sys::Float32Array>() {
            js_sys::Float32Array::from(data.clone())
                .to_vec()
                .into_iter()
                .map(f64::from)
                .collect()
        } else if data.is_instance_of::<js_sys::Int32Array>() {
            js_sys::Int32Array::from(data.clone())
                .to_vec()
                .into_iter()
                .map(f64::from)
                .collect()
        } else if data.is_instance_of::<js_sys::Uint32Array>() {
            js_sys::Uint32Array::from(data.clone())
                .to_vec()
                .into_iter()
                .map(f64::from)
                .collect()
        } else if data.is_instance_of::<js_sys::Float64Array>() {
            js_sys::Float64Array::from(data.clone()).to_vec()
        } else if data.is_instance_of::<js_sys::Uint8Array>() {
            js_sys::Uint8Array::from(data.clone())
                .to_vec()
                .into_iter()
                .map(f64::from)
                .collect()
        } else {
            flatten(data, OP)?.0
        };
        (vals, vec![n], typed_array_dtype(data).unwrap_or(DType::F32))
    } else if let Some(b) = data.as_bool() {
        (vec![b as u8 as f64], vec![], DType::Bool)
    } else if let Some(x) = data.as_f64() {
        (vec![x], vec![], DType::F32)
    } else if Array::is_array(data) {
        let (v, s, bools) = flatten(data, OP)?;
        (v, s, if bools { DType::Bool } else { DType::F32 })
    } else {
        return Err(fail(
            OP,
            format!(
                "data must be a number, a boolean, an array or a typed array, got {}",
                describe(data)
            ),
        ));
    };
    let shape = if shape.is_undefined() || shape.is_null() {
        inferred
    } else {
        shape_arg(shape, OP)?
    };
    let numel: usize = shape.iter().product();
    if numel != values.len() {
        return Err(fail(
            OP,
            format!(
                "shape {shape:?} holds {numel} values but the data has {}",
                values.len()
            ),
        ));
    }
    let dt = dtype.unwrap_or(natural);
    Tensor::from_raw(&encode(&values, dt), dt, &shape).or_fail(OP)
}

/// The values of a tensor as the matching typed array (float16 reads as Float32Array, bool as
/// Uint8Array).
async fn data_of(t: Tensor) -> JsResult<JsValue> {
    let op = "data";
    Ok(match t.dtype() {
        DType::F32 | DType::F16 => {
            let v = t.to_f32_vec_async().await.or_fail(op)?;
            js_sys::Float32Array::from(v.as_slice()).into()
        }
        DType::I32 => {
            let v = t.to_vec_async::<i32>().await.or_fail(op)?;
            js_sys::Int32Array::from(v.as_slice()).into()
        }
        DType::U32 => {
            let v = t.to_vec_async::<u32>().await.or_fail(op)?;
            js_sys::Uint32Array::from(v.as_slice()).into()
        }
        DType::U8 | DType::Bool => {
            let v = t.bytes_async().await.or_fail(op)?;
            js_sys::Uint8Array::from(v.as_slice()).into()
        }
    })
}

// ------------------------------------------------------------------------------ Tensor

macro_rules! unary_ops {
    ($($js:literal => $rs:ident),* $(,)?) => {
        #[wasm_bindgen(js_class = Tensor)]
        impl JsTensor {
            $(
                #[wasm_bindgen(js_name = $js)]
                pub fn $rs(&self) -> JsResult<JsTensor> {
                    Ok(register(self.get($js)?.$rs().or_fail($js)?))
                }
            )*
        }
    };
}

unary_ops! {
    "neg" => neg, "exp" => exp, "exp2" => exp2, "log" => log, "log2" => log2, "sqrt" => sqrt,
    "rsqrt" => rsqrt, "reciprocal" => reciprocal, "sin" => sin, "cos" => cos, "tan" => tan,
    "trunc" => trunc, "floor" => floor, "ceil" => ceil, "round" => round, "square" => square,
    "abs" => abs, "sign" => sign, "relu" => relu, "relu6" => relu6, "sigmoid" => sigmoid,
    "tanh" => tanh, "gelu" => gelu, "silu" => silu, "swish" => swish, "softplus" => softplus,
    "mish" => mish, "hardsigmoid" => hardsigmoid, "hardswish" => hardswish,
    "logicalNot" => logical_not,
}

macro_rules! binary_ops {
    ($($js:literal => $rs:ident),* $(,)?) => {
        #[wasm_bindgen(js_class = Tensor)]
        impl JsTensor {
            $(
                #[wasm_bindgen(js_name = $js)]
                pub fn $rs(
                    &self,
                    #[wasm_bindgen(unchecked_param_type = "Tensor | number | boolean")] other: JsValue,
                ) -> JsResult<JsTensor> {
                    let o = operand_arg(&other, $js, "the other operand")?;
                    Ok(register(self.get($js)?.$rs(o).or_fail($js)?))
                }
            )*
        }
    };
}

binary_ops! {
    "add" => add, "sub" => sub, "mul" => mul, "div" => div, "idiv" => idiv, "mod" => rem,
    "pow" => pow, "maximum" => maximum, "minimum" => minimum, "lt" => lt, "gt" => gt,
    "le" => le, "ge" => ge, "eq" => eq, "ne" => ne, "xor" => xor, "bitwiseAnd" => bitand,
    "bitwiseOr" => bitor, "lshift" => shl, "rshift" => shr,
}

macro_rules! reduce_ops {
    ($($js:literal => $rs:ident),* $(,)?) => {
        #[wasm_bindgen(js_class = Tensor)]
        impl JsTensor {
            $(
                /// Reduce over `axis` (a number or an array; all axes when omitted).
                #[wasm_bindgen(js_name = $js)]
                pub fn $rs(
                    &self,
                    #[wasm_bindgen(unchecked_optional_param_type = "number | number[] | null")] axis: Option<JsValue>,
                    #[wasm_bindgen(unchecked_optional_param_type = "boolean")] keepdim: Option<JsValue>,
                ) -> JsResult<JsTensor> {
                    let (axis, keepdim) = (axis.unwrap_or_default(), keepdim.unwrap_or_default());
                    let axes = axes_arg(&axis, $js)?;
                    let keep = opt_bool(&keepdim, $js, "keepdim", false)?;
                    Ok(register(self.get($js)?.$rs(axes, keep).or_fail($js)?))
                }
            )*
        }
    };
}

reduce_ops! { "sum" => sum, "mean" => mean, "max" => max, "min" => min, "logsumexp" => logsumexp }

#[wasm_bindgen(js_class = Tensor)]
impl JsTensor {
    fn get(&self, op: &str) -> JsResult<Tensor> {
        lookup(self.id).ok_or_else(|| fail(op, "this Tensor was disposed"))
    }

    /// `new Tensor(data, shape?, dtype?)`: data is a number, a boolean, a (nested) array or a
    /// typed array; the shape defaults to the data's; the dtype to the typed array's, "bool" for
    /// booleans, else "float32".
    #[wasm_bindgen(constructor)]
    pub fn new(
        #[wasm_bindgen(unchecked_param_type = "number | boolean | ArrayLike<number> | any[]")]
        data: JsValue,
        #[wasm_bindgen(unchecked_optional_param_type = "number[] | null")] shape: Option<JsValue>,
        #[wasm_bindgen(unchecked_optional_param_type = "DType | null")] dtype: Option<JsValue>,
    ) -> JsResult<JsTensor> {
        let shape = shape.unwrap_or(JsValue::UNDEFINED);
        let dtype = dtype.unwrap_or(JsValue::UNDEFINED);
        Ok(register(tensor_from_js(&data, &shape, &dtype)?))
    }

    /// The handle's id (how the engine recognises its tensors among JS values).
    #[wasm_bindgen(getter, js_name = "_wgradId")]
    pub fn wgrad_id(&self) -> u32 {
        self.id
    }

    #[wasm_bindgen(getter, unchecked_return_type = "number[]")]
    pub fn shape(&self) -> JsResult<JsValue> {
        let s = self.get("shape")?.shape();
        Ok(s.into_iter()
            .map(|d| JsValue::from(d as f64))
            .collect::<Array>()
            .into())
    }

    #[wasm_bindgen(getter, unchecked_return_type = "DType")]
    pub fn dtype(&self) -> JsResult<String> {
        Ok(js_dtype(self.get("dtype")?.dtype()).into())
    }

    /// "webgpu" or "cpu" (the interpreter).
    #[wasm_bindgen(getter)]
    pub fn device(&self) -> JsResult<String> {
        Ok(device_name(self.get("device")?.device()).into())
    }

    #[wasm_bindgen(getter)]
    pub fn numel(&self) -> JsResult<f64> {
        Ok(self.get("numel")?.numel() as f64)
    }

    #[wasm_bindgen(getter)]
    pub fn ndim(&self) -> JsResult<u32> {
        Ok(self.get("ndim")?.ndim() as u32)
    }

    /// Whether `dispose()` was called (or a `tidy` released it).
    #[wasm_bindgen(getter, js_name = isDisposed)]
    pub fn is_disposed(&self) -> bool {
        lookup(self.id).is_none()
    }

    /// Release this tensor's buffers now (the handle becomes unusable).
    pub fn dispose(&self) {
        release(self.id);
    }

    #[wasm_bindgen(js_name = toString)]
    pub fn to_string_js(&self) -> String {
        match lookup(self.id) {
            Some(t) => format!(
                "Tensor(shape=[{}], dtype={}, device={})",
                t.shape()
                    .iter()
                    .map(|d| d.to_string())
                    .collect::<Vec<_>>()
                    .join(", "),
                js_dtype(t.dtype()),
                device_name(t.device())
            ),
            None => "Tensor(disposed)".into(),
        }
    }

    /// Compute the value now (launches the kernels; the result stays on the device).
    pub fn realize(&self) -> JsResult<JsTensor> {
        let t = self.get("realize")?;
        t.realize().or_fail("realize")?;
        Ok(register(t))
    }

    /// A copy on another device ("webgpu" or "cpu"), once the values are read back.
    #[wasm_bindgen(unchecked_return_type = "Promise<Tensor>")]
    pub fn to(
        &self,
        #[wasm_bindgen(unchecked_param_type = "\"webgpu\" | \"cpu\"")] device: JsValue,
    ) -> JsResult<js_sys::Promise> {
        let t = self.get("to")?;
        let d = device_arg(&device, "to")?;
        crate::realize::check_readback().or_fail("to")?;
        Ok(wasm_bindgen_futures::future_to_promise(async move {
            if t.device() == d {
                return Ok(register(t).into());
            }
            d.available().map_err(|e| fail("to", e))?;
            let bytes = t.bytes_async().await.or_fail("to")?;
            let (dt, shape) = (t.dtype(), t.shape());
            let moved = Context::new()
                .dev(d)
                .run(|| Tensor::from_raw(&bytes, dt, &shape))
                .or_fail("to")?;
            Ok(register(moved).into())
        }))
    }

    /// Realize several tensors in one schedule (e.g. the loss with `opt.scheduleStep()`).
    #[wasm_bindgen(js_name = realizeAll)]
    pub fn realize_all(
        #[wasm_bindgen(unchecked_param_type = "Tensor[]")] tensors: JsValue,
    ) -> JsResult<()> {
        let ts = tensors_arg(&tensors, "realizeAll")?;
        Tensor::realize_all(&ts.iter().collect::<Vec<_>>()).or_fail("realizeAll")
    }

    /// The values, as a typed array (awaits the GPU).
    #[wasm_bindgen(
        unchecked_return_type = "Promise<Float32Array | Int32Array | Uint32Array | Uint8Array>"
    )]
    pub fn data(&self) -> JsResult<js_sys::Promise> {
        let t = self.get("data")?;
        crate::realize::check_readback().or_fail("data")?;
        Ok(wasm_bindgen_futures::future_to_promise(async move {
            data_of(t).await.map_err(JsValue::from)
        }))
    }

    /// The single value of a one-element tensor (a boolean for "bool").
    #[wasm_bindgen(unchecked_return_type = "Promise<number | boolean>")]
    pub fn item(&self) -> JsResult<js_sys::Promise> {
        let t = self.get("item")?;
        if t.numel() != 1 {
            return Err(fail(
                "item",
                format!(
                    "tensor of shape {:?} has {} elements, not 1",
                    t.shape(),
                    t.numel()
                ),
            ));
        }
        crate::realize::check_readback().or_fail("item")?;
        let dt = t.dtype();
        Ok(wasm_bindgen_futures::future_to_promise(async move {
            let v = t.to_f32_vec_async().await.or_fail("item")?;
            Ok(match dt {
                DType::Bool => JsValue::from(v[0] != 0.0),
                DType::I32 | DType::U32 | DType::U8 => JsValue::from(v[0] as f64),
                _ => JsValue::from(v[0]),
            })
        }))
    }

    // -------------------------------------------------------------- autograd

    pub fn backward(&self) -> JsResult<()> {
        self.get("backward")?.backward().or_fail("backward")?;
        Ok(())
    }

    #[wasm_bindgen(getter)]
    pub fn grad(&self) -> JsResult<Option<JsTensor>> {
        Ok(self.get("grad")?.grad().map(register))
    }

    #[wasm_bindgen(getter, js_name = requiresGrad)]
    pub fn requires_grad(&self) -> JsResult<bool> {
        Ok(self.get("requiresGrad")?.requires_grad())
    }

    #[wasm_bindgen(setter, js_name = requiresGrad)]
    pub fn set_requires_grad(&self, on: bool) -> JsResult<()> {
        self.get("requiresGrad")?.set_requires_grad(on);
        Ok(())
    }

    /// Set (or clear, with `null`) the gradient.
    #[wasm_bindgen(js_name = setGrad)]
    pub fn set_grad(
        &self,
        #[wasm_bindgen(unchecked_param_type = "Tensor | null")] g: JsValue,
    ) -> JsResult<()> {
        let g = opt_tensor_arg(&g, "setGrad", "the gradient")?;
        self.get("setGrad")?.set_grad(g);
        Ok(())
    }

    pub fn detach(&self) -> JsResult<JsTensor> {
        Ok(register(self.get("detach")?.detach()))
    }

    pub fn contiguous(&self) -> JsResult<JsTensor> {
        Ok(register(self.get("contiguous")?.contiguous()))
    }

    /// Write `value` into this tensor's buffer (in place, like an optimizer update).
    pub fn assign(
        &self,
        #[wasm_bindgen(unchecked_param_type = "Tensor")] value: JsValue,
    ) -> JsResult<JsTensor> {
        let v = tensor_arg(&value, "assign", "the value")?;
        Ok(register(self.get("assign")?.assign(&v).or_fail("assign")?))
    }

    // -------------------------------------------------------------- creation

    pub fn zeros(
        #[wasm_bindgen(unchecked_param_type = "number[]")] shape: JsValue,
        #[wasm_bindgen(unchecked_optional_param_type = "DType")] dtype: Option<JsValue>,
    ) -> JsResult<JsTensor> {
        let dtype = dtype.unwrap_or(JsValue::UNDEFINED);
        full("zeros", &shape, 0.0, &dtype)
    }

    pub fn ones(
        #[wasm_bindgen(unchecked_param_type = "number[]")] shape: JsValue,
        #[wasm_bindgen(unchecked_optional_param_type = "DType")] dtype: Option<JsValue>,
    ) -> JsResult<JsTensor> {
        let dtype = dtype.unwrap_or(JsValue::UNDEFINED);
        full("ones", &shape, 1.0, &dtype)
    }

    pub fn full(
        #[wasm_bindgen(unchecked_param_type = "number[]")] shape: JsValue,
        #[wasm_bindgen(unchecked_param_type = "number | boolean")] value: JsValue,
        #[wasm_bindgen(unchecked_optional_param_type = "DType")] dtype: Option<JsValue>,
    ) -> JsResult<JsTensor> {
        let dtype = dtype.unwrap_or(JsValue::UNDEFINED);
        let v = match value.as_bool() {
            Some(b) => b as u8 as f64,
            None => number_arg(&value, "full", "value")?,
        };
        full("full", &shape, v, &dtype)
    }

    /// Uniform in [0, 1).
    pub fn rand(
        #[wasm_bindgen(unchecked_param_type = "number[]")] shape: JsValue,
    ) -> JsResult<JsTensor> {
        let s = shape_arg(&shape, "rand")?;
        Ok(register(Tensor::rand(&s).or_fail("rand")?))
    }

    /// Standard normal.
    pub fn randn(
        #[wasm_bindgen(unchecked_param_type = "number[]")] shape: JsValue,
    ) -> JsResult<JsTensor> {
        let s = shape_arg(&shape, "randn")?;
        Ok(register(Tensor::randn(&s).or_fail("randn")?))
    }

    /// Integers in [low, high), int32.
    pub fn randint(
        #[wasm_bindgen(unchecked_param_type = "number[]")] shape: JsValue,
        #[wasm_bindgen(unchecked_param_type = "number")] low: JsValue,
        #[wasm_bindgen(unchecked_param_type = "number")] high: JsValue,
    ) -> JsResult<JsTensor> {
        let op = "randint";
        let s = shape_arg(&shape, op)?;
        let (lo, hi) = (int_arg(&low, op, "low")?, int_arg(&high, op, "high")?);
        Ok(register(Tensor::randint(&s, lo, hi).or_fail(op)?))
    }

    /// Uniform in [low, high).
    pub fn uniform(
        #[wasm_bindgen(unchecked_param_type = "number[]")] shape: JsValue,
        #[wasm_bindgen(unchecked_optional_param_type = "number")] low: Option<JsValue>,
        #[wasm_bindgen(unchecked_optional_param_type = "number")] high: Option<JsValue>,
    ) -> JsResult<JsTensor> {
        let low = low.unwrap_or(JsValue::UNDEFINED);
        let high = high.unwrap_or(JsValue::UNDEFINED);
        let op = "uniform";
        let s = shape_arg(&shape, op)?;
        let lo = opt_number(&low, op, "low", 0.0)?;
        let hi = opt_number(&high, op, "high", 1.0)?;
        Ok(register(Tensor::uniform(&s, lo, hi).or_fail(op)?))
    }

    /// `arange(stop)` or `arange(start, stop, step?, dtype?)`; int32 unless a value or the
    /// dtype says otherwise.
    pub fn arange(
        #[wasm_bindgen(unchecked_param_type = "number")] start: JsValue,
        #[wasm_bindgen(unchecked_optional_param_type = "number")] stop: Option<JsValue>,
        #[wasm_bindgen(unchecked_optional_param_type = "number")] step: Option<JsValue>,
        #[wasm_bindgen(unchecked_optional_param_type = "DType")] dtype: Option<JsValue>,
    ) -> JsResult<JsTensor> {
        let stop = stop.unwrap_or(JsValue::UNDEFINED);
        let step = step.unwrap_or(JsValue::UNDEFINED);
        let dtype = dtype.unwrap_or(JsValue::UNDEFINED);
        let op = "arange";
        let (a, b) = if stop.is_undefined() || stop.is_null() {
            (0.0, number_arg(&start, op, "stop")?)
        } else {
            (
                number_arg(&start, op, "start")?,
                number_arg(&stop, op, "stop")?,
            )
        };
        let s = opt_number(&step, op, "step", 1.0)?;
        let all_int = [a, b, s].iter().all(|v| v.fract() == 0.0);
        let dt = dtype_arg(&dtype, op)?.unwrap_or(if all_int { DType::I32 } else { DType::F32 });
        Ok(register(Tensor::arange(a, b, s, dt).or_fail(op)?))
    }

    pub fn eye(#[wasm_bindgen(unchecked_param_type = "number")] n: JsValue) -> JsResult<JsTensor> {
        let n = size_arg(&n, "eye", "n")?;
        Ok(register(Tensor::eye(n).or_fail("eye")?))
    }

    #[wasm_bindgen(js_name = manualSeed)]
    pub fn manual_seed(seed: f64) {
        Tensor::manual_seed(seed as u64);
    }

    #[wasm_bindgen(js_name = zerosLike)]
    pub fn zeros_like(&self) -> JsResult<JsTensor> {
        Ok(register(self.get("zerosLike")?.zeros_like()))
    }

    #[wasm_bindgen(js_name = onesLike)]
    pub fn ones_like(&self) -> JsResult<JsTensor> {
        Ok(register(self.get("onesLike")?.ones_like()))
    }

    #[wasm_bindgen(js_name = fullLike)]
    pub fn full_like(&self, value: f64) -> JsResult<JsTensor> {
        Ok(register(self.get("fullLike")?.full_like(value)))
    }

    // -------------------------------------------------------------- elementwise with arguments

    pub fn cast(
        &self,
        #[wasm_bindgen(unchecked_param_type = "DType")] dtype: JsValue,
    ) -> JsResult<JsTensor> {
        let dt = dtype_arg(&dtype, "cast")?
            .ok_or_else(|| fail("cast", "a dtype is required, e.g. \"float32\""))?;
        Ok(register(self.get("cast")?.cast(dt).or_fail("cast")?))
    }

    /// `cond.where(a, b)`: `a` where the condition holds, else `b`.
    #[wasm_bindgen(js_name = "where")]
    pub fn where_js(
        &self,
        #[wasm_bindgen(unchecked_param_type = "Tensor | number")] a: JsValue,
        #[wasm_bindgen(unchecked_param_type = "Tensor | number")] b: JsValue,
    ) -> JsResult<JsTensor> {
        let op = "where";
        let (a, b) = (operand_arg(&a, op, "a")?, operand_arg(&b, op, "b")?);
        Ok(register(self.get(op)?.where_(a, b).or_fail(op)?))
    }

    #[wasm_bindgen(js_name = logicalAnd)]
    pub fn logical_and(
        &self,
        #[wasm_bindgen(unchecked_param_type = "Tensor")] other: JsValue,
    ) -> JsResult<JsTensor> {
        let o = tensor_arg(&other, "logicalAnd", "the other operand")?;
        Ok(register(
            self.get("logicalAnd")?
                .logical_and(&o)
                .or_fail("logicalAnd")?,
        ))
    }

    #[wasm_bindgen(js_name = logicalOr)]
    pub fn logical_or(
        &self,
        #[wasm_bindgen(unchecked_param_type = "Tensor")] other: JsValue,
    ) -> JsResult<JsTensor> {
        let o = tensor_arg(&other, "logicalOr", "the other operand")?;
        Ok(register(
            self.get("logicalOr")?.logical_or(&o).or_fail("logicalOr")?,
        ))
    }

    #[wasm_bindgen(js_name = leakyRelu)]
    pub fn leaky_relu(
        &self,
        #[wasm_bindgen(unchecked_optional_param_type = "number")] slope: Option<JsValue>,
    ) -> JsResult<JsTensor> {
        let slope = slope.unwrap_or(JsValue::UNDEFINED);
        let s = opt_number(&slope, "leakyRelu", "slope", 0.01)?;
        Ok(register(
            self.get("leakyRelu")?.leaky_relu(s).or_fail("leakyRelu")?,
        ))
    }

    pub fn elu(
        &self,
        #[wasm_bindgen(unchecked_optional_param_type = "number")] alpha: Option<JsValue>,
    ) -> JsResult<JsTensor> {
        let alpha = alpha.unwrap_or(JsValue::UNDEFINED);
        let a = opt_number(&alpha, "elu", "alpha", 1.0)?;
        Ok(register(self.get("elu")?.elu(a).or_fail("elu")?))
    }

    pub fn hardtanh(
        &self,
        #[wasm_bindgen(unchecked_optional_param_type = "number")] min: Option<JsValue>,
        #[wasm_bindgen(unchecked_optional_param_type = "number")] max: Option<JsValue>,
    ) -> JsResult<JsTensor> {
        let min = min.unwrap_or(JsValue::UNDEFINED);
        let max = max.unwrap_or(JsValue::UNDEFINED);
        let op = "hardtanh";
        let (lo, hi) = (
            opt_number(&min, op, "min", -1.0)?,
            opt_number(&max, op, "max", 1.0)?,
        );
        Ok(register(self.get(op)?.hardtanh(lo, hi).or_fail(op)?))
    }

    pub fn clip(
        &self,
        #[wasm_bindgen(unchecked_param_type = "number")] min: JsValue,
        #[wasm_bindgen(unchecked_param_type = "number")] max: JsValue,
    ) -> JsResult<JsTensor> {
        let op = "clip";
        let (lo, hi) = (number_arg(&min, op, "min")?, number_arg(&max, op, "max")?);
        Ok(register(self.get(op)?.clip(lo, hi).or_fail(op)?))
    }

    // -------------------------------------------------------------- reductions

    /// Index of the largest value along `axis` (of the flattened tensor when omitted).
    pub fn argmax(
        &self,
        #[wasm_bindgen(unchecked_optional_param_type = "number | null")] axis: Option<JsValue>,
        #[wasm_bindgen(unchecked_optional_param_type = "boolean")] keepdim: Option<JsValue>,
    ) -> JsResult<JsTensor> {
        let axis = axis.unwrap_or(JsValue::UNDEFINED);
        let keepdim = keepdim.unwrap_or(JsValue::UNDEFINED);
        self.arg_reduce("argmax", axis, keepdim, true)
    }

    pub fn argmin(
        &self,
        #[wasm_bindgen(unchecked_optional_param_type = "number | null")] axis: Option<JsValue>,
        #[wasm_bindgen(unchecked_optional_param_type = "boolean")] keepdim: Option<JsValue>,
    ) -> JsResult<JsTensor> {
        let axis = axis.unwrap_or(JsValue::UNDEFINED);
        let keepdim = keepdim.unwrap_or(JsValue::UNDEFINED);
        self.arg_reduce("argmin", axis, keepdim, false)
    }

    fn arg_reduce(
        &self,
        op: &str,
        axis: JsValue,
        keepdim: JsValue,
        max: bool,
    ) -> JsResult<JsTensor> {
        let axis = if axis.is_undefined() || axis.is_null() {
            None
        } else {
            Some(int_arg(&axis, op, "axis")? as isize)
        };
        let keep = opt_bool(&keepdim, op, "keepdim", false)?;
        let t = self.get(op)?;
        let r = if max {
            t.argmax(axis, keep)
        } else {
            t.argmin(axis, keep)
        };
        Ok(register(r.or_fail(op)?))
    }

    /// Variance with `correction` (1: unbiased, the default).
    pub fn var(
        &self,
        #[wasm_bindgen(unchecked_optional_param_type = "number | number[] | null")] axis: Option<
            JsValue,
        >,
        #[wasm_bindgen(unchecked_optional_param_type = "boolean")] keepdim: Option<JsValue>,
        #[wasm_bindgen(unchecked_optional_param_type = "number")] correction: Option<JsValue>,
    ) -> JsResult<JsTensor> {
        let axis = axis.unwrap_or(JsValue::UNDEFINED);
        let keepdim = keepdim.unwrap_or(JsValue::UNDEFINED);
        let correction = correction.unwrap_or(JsValue::UNDEFINED);
        let op = "var";
        let (a, k) = (
            axes_arg(&axis, op)?,
            opt_bool(&keepdim, op, "keepdim", false)?,
        );
        let c = opt_number(&correction, op, "correction", 1.0)?;
        Ok(register(self.get(op)?.var(a, k, c).or_fail(op)?))
    }

    pub fn std(
        &self,
        #[wasm_bindgen(unchecked_optional_param_type = "number | number[] | null")] axis: Option<
            JsValue,
        >,
        #[wasm_bindgen(unchecked_optional_param_type = "boolean")] keepdim: Option<JsValue>,
        #[wasm_bindgen(unchecked_optional_param_type = "number")] correction: Option<JsValue>,
    ) -> JsResult<JsTensor> {
        let axis = axis.unwrap_or(JsValue::UNDEFINED);
        let keepdim = keepdim.unwrap_or(JsValue::UNDEFINED);
        let correction = correction.unwrap_or(JsValue::UNDEFINED);
        let op = "std";
        let (a, k) = (
            axes_arg(&axis, op)?,
            opt_bool(&keepdim, op, "keepdim", false)?,
        );
        let c = opt_number(&correction, op, "correction", 1.0)?;
        Ok(register(self.get(op)?.std(a, k, c).or_fail(op)?))
    }

    /// Softmax along `axis` (default -1).
    pub fn softmax(
        &self,
        #[wasm_bindgen(unchecked_optional_param_type = "number")] axis: Option<JsValue>,
    ) -> JsResult<JsTensor> {
        let axis = axis.unwrap_or(JsValue::UNDEFINED);
        let a = opt_int(&axis, "softmax", "axis", -1)? as isize;
        Ok(register(
            self.get("softmax")?.softmax(a).or_fail("softmax")?,
        ))
    }

    #[wasm_bindgen(js_name = logSoftmax)]
    pub fn log_softmax(
        &self,
        #[wasm_bindgen(unchecked_optional_param_type = "number")] axis: Option<JsValue>,
    ) -> JsResult<JsTensor> {
        let axis = axis.unwrap_or(JsValue::UNDEFINED);
        let a = opt_int(&axis, "logSoftmax", "axis", -1)? as isize;
        Ok(register(
            self.get("logSoftmax")?
                .log_softmax(a)
                .or_fail("logSoftmax")?,
        ))
    }

    // -------------------------------------------------------------- movement

    /// New shape (one entry may be -1).
    pub fn reshape(
        &self,
        #[wasm_bindgen(unchecked_param_type = "number[]")] shape: JsValue,
    ) -> JsResult<JsTensor> {
        let s = isizes_arg(&shape, "reshape", "shape")?;
        Ok(register(
            self.get("reshape")?.reshape(&s).or_fail("reshape")?,
        ))
    }

    pub fn permute(
        &self,
        #[wasm_bindgen(unchecked_param_type = "number[]")] order: JsValue,
    ) -> JsResult<JsTensor> {
        let o = isizes_arg(&order, "permute", "order")?;
        Ok(register(
            self.get("permute")?.permute(&o).or_fail("permute")?,
        ))
    }

    /// Swap two axes (default the last two... as in tinygrad: 1 and 0).
    pub fn transpose(
        &self,
        #[wasm_bindgen(unchecked_optional_param_type = "number")] a: Option<JsValue>,
        #[wasm_bindgen(unchecked_optional_param_type = "number")] b: Option<JsValue>,
    ) -> JsResult<JsTensor> {
        let a = a.unwrap_or(JsValue::UNDEFINED);
        let b = b.unwrap_or(JsValue::UNDEFINED);
        let op = "transpose";
        let (a, b) = (
            opt_int(&a, op, "a", 1)? as isize,
            opt_int(&b, op, "b", 0)? as isize,
        );
        Ok(register(self.get(op)?.transpose(a, b).or_fail(op)?))
    }

    #[wasm_bindgen(getter, js_name = T)]
    pub fn t(&self) -> JsResult<JsTensor> {
        Ok(register(self.get("T")?.t().or_fail("T")?))
    }

    pub fn expand(
        &self,
        #[wasm_bindgen(unchecked_param_type = "number[]")] shape: JsValue,
    ) -> JsResult<JsTensor> {
        let s = isizes_arg(&shape, "expand", "shape")?;
        Ok(register(self.get("expand")?.expand(&s).or_fail("expand")?))
    }

    pub fn flatten(
        &self,
        #[wasm_bindgen(unchecked_optional_param_type = "number")] start_dim: Option<JsValue>,
    ) -> JsResult<JsTensor> {
        let start_dim = start_dim.unwrap_or(JsValue::UNDEFINED);
        let d = opt_int(&start_dim, "flatten", "startDim", 0)? as isize;
        Ok(register(
            self.get("flatten")?.flatten(d).or_fail("flatten")?,
        ))
    }

    pub fn squeeze(
        &self,
        #[wasm_bindgen(unchecked_optional_param_type = "number | null")] axis: Option<JsValue>,
    ) -> JsResult<JsTensor> {
        let axis = axis.unwrap_or(JsValue::UNDEFINED);
        let a = if axis.is_undefined() || axis.is_null() {
            None
        } else {
            Some(int_arg(&axis, "squeeze", "axis")? as isize)
        };
        Ok(register(
            self.get("squeeze")?.squeeze(a).or_fail("squeeze")?,
        ))
    }

    pub fn unsqueeze(
        &self,
        #[wasm_bindgen(unchecked_param_type = "number")] axis: JsValue,
    ) -> JsResult<JsTensor> {
        let a = int_arg(&axis, "unsqueeze", "axis")? as isize;
        Ok(register(
            self.get("unsqueeze")?.unsqueeze(a).or_fail("unsqueeze")?,
        ))
    }

    /// `pads`: one `[before, after]` pair per axis.
    pub fn pad(
        &self,
        #[wasm_bindgen(unchecked_param_type = "[number, number][]")] pads: JsValue,
        #[wasm_bindgen(unchecked_optional_param_type = "number")] value: Option<JsValue>,
    ) -> JsResult<JsTensor> {
        let value = value.unwrap_or(JsValue::UNDEFINED);
        let op = "pad";
        let p = pairs_arg(&pads, op, "pads")?;
        let v = opt_number(&value, op, "value", 0.0)?;
        Ok(register(self.get(op)?.pad(&p, v).or_fail(op)?))
    }

    /// `arg`: one `[start, end]` pair per axis.
    pub fn shrink(
        &self,
        #[wasm_bindgen(unchecked_param_type = "[number, number][]")] arg: JsValue,
    ) -> JsResult<JsTensor> {
        let p = pairs_arg(&arg, "shrink", "arg")?;
        Ok(register(self.get("shrink")?.shrink(&p).or_fail("shrink")?))
    }

    /// Elements `start..end` (negative counts from the end) every `step` along `axis`.
    pub fn slice(
        &self,
        #[wasm_bindgen(unchecked_param_type = "number")] axis: JsValue,
        #[wasm_bindgen(unchecked_optional_param_type = "number")] start: Option<JsValue>,
        #[wasm_bindgen(unchecked_optional_param_type = "number")] end: Option<JsValue>,
        #[wasm_bindgen(unchecked_optional_param_type = "number")] step: Option<JsValue>,
    ) -> JsResult<JsTensor> {
        let start = start.unwrap_or(JsValue::UNDEFINED);
        let end = end.unwrap_or(JsValue::UNDEFINED);
        let step = step.unwrap_or(JsValue::UNDEFINED);
        let op = "slice";
        let t = self.get(op)?;
        let a = int_arg(&axis, op, "axis")? as isize;
        let s = opt_int(&start, op, "start", 0)? as isize;
        let e = opt_int(&end, op, "end", isize::MAX as i64)? as isize;
        let st = size_arg(
            &if step.is_undefined() { 1.into() } else { step },
            op,
            "step",
        )?;
        Ok(register(t.slice(a, s, e, st).or_fail(op)?))
    }

    pub fn flip(
        &self,
        #[wasm_bindgen(unchecked_param_type = "number | number[]")] axes: JsValue,
    ) -> JsResult<JsTensor> {
        let a = isizes_arg(&axes, "flip", "axes")?;
        Ok(register(self.get("flip")?.flip(&a).or_fail("flip")?))
    }

    pub fn repeat(
        &self,
        #[wasm_bindgen(unchecked_param_type = "number[]")] reps: JsValue,
    ) -> JsResult<JsTensor> {
        let r = shape_arg(&reps, "repeat")?;
        Ok(register(self.get("repeat")?.repeat(&r).or_fail("repeat")?))
    }

    /// Rows selected by an integer tensor (`x[idx]`).
    pub fn index(
        &self,
        #[wasm_bindgen(unchecked_param_type = "Tensor")] idx: JsValue,
    ) -> JsResult<JsTensor> {
        let i = tensor_arg(&idx, "index", "the index")?;
        Ok(register(self.get("index")?.index(&i).or_fail("index")?))
    }

    pub fn gather(
        &self,
        #[wasm_bindgen(unchecked_param_type = "number")] axis: JsValue,
        #[wasm_bindgen(unchecked_param_type = "Tensor")] index: JsValue,
    ) -> JsResult<JsTensor> {
        let a = int_arg(&axis, "gather", "axis")? as isize;
        let i = tensor_arg(&index, "gather", "the index")?;
        Ok(register(
            self.get("gather")?.gather(a, &i).or_fail("gather")?,
        ))
    }

    /// Split into pieces of the given sizes along `axis`.
    #[wasm_bindgen(unchecked_return_type = "Tensor[]")]
    pub fn split(
        &self,
        #[wasm_bindgen(unchecked_param_type = "number[]")] sizes: JsValue,
        #[wasm_bindgen(unchecked_optional_param_type = "number")] axis: Option<JsValue>,
    ) -> JsResult<Array> {
        let axis = axis.unwrap_or(JsValue::UNDEFINED);
        let s = shape_arg(&sizes, "split")?;
        let a = opt_int(&axis, "split", "axis", 0)? as isize;
        Ok(tensor_array(
            self.get("split")?.split(&s, a).or_fail("split")?,
        ))
    }

    #[wasm_bindgen(unchecked_return_type = "Tensor[]")]
    pub fn chunk(
        &self,
        #[wasm_bindgen(unchecked_param_type = "number")] n: JsValue,
        #[wasm_bindgen(unchecked_optional_param_type = "number")] axis: Option<JsValue>,
    ) -> JsResult<Array> {
        let axis = axis.unwrap_or(JsValue::UNDEFINED);
        let n = size_arg(&n, "chunk", "n")?;
        let a = opt_int(&axis, "chunk", "axis", 0)? as isize;
        Ok(tensor_array(
            self.get("chunk")?.chunk(n, a).or_fail("chunk")?,
        ))
    }

    pub fn cat(
        #[wasm_bindgen(unchecked_param_type = "Tensor[]")] tensors: JsValue,
        #[wasm_bindgen(unchecked_optional_param_type = "number")] axis: Option<JsValue>,
    ) -> JsResult<JsTensor> {
        let axis = axis.unwrap_or(JsValue::UNDEFINED);
        let ts = tensors_arg(&tensors, "cat")?;
        let a = opt_int(&axis, "cat", "axis", 0)? as isize;
        Ok(register(
            Tensor::cat(&ts.iter().collect::<Vec<_>>(), a).or_fail("cat")?,
        ))
    }

    pub fn stack(
        #[wasm_bindgen(unchecked_param_type = "Tensor[]")] tensors: JsValue,
        #[wasm_bindgen(unchecked_optional_param_type = "number")] axis: Option<JsValue>,
    ) -> JsResult<JsTensor> {
        let axis = axis.unwrap_or(JsValue::UNDEFINED);
        let ts = tensors_arg(&tensors, "stack")?;
        let a = opt_int(&axis, "stack", "axis", 0)? as isize;
        Ok(register(
            Tensor::stack(&ts.iter().collect::<Vec<_>>(), a).or_fail("stack")?,
        ))
    }

    // -------------------------------------------------------------- nn functions

    pub fn matmul(
        &self,
        #[wasm_bindgen(unchecked_param_type = "Tensor")] other: JsValue,
    ) -> JsResult<JsTensor> {
        let o = tensor_arg(&other, "matmul", "the other operand")?;
        Ok(register(self.get("matmul")?.matmul(&o).or_fail("matmul")?))
    }

    pub fn dot(
        &self,
        #[wasm_bindgen(unchecked_param_type = "Tensor")] other: JsValue,
    ) -> JsResult<JsTensor> {
        let o = tensor_arg(&other, "dot", "the other operand")?;
        Ok(register(self.get("dot")?.dot(&o).or_fail("dot")?))
    }

    /// `x @ weight.T + bias` (weight is `[out, in]`).
    pub fn linear(
        &self,
        #[wasm_bindgen(unchecked_param_type = "Tensor")] weight: JsValue,
        #[wasm_bindgen(unchecked_optional_param_type = "Tensor | null")] bias: Option<JsValue>,
    ) -> JsResult<JsTensor> {
        let bias = bias.unwrap_or(JsValue::UNDEFINED);
        let w = tensor_arg(&weight, "linear", "the weight")?;
        let b = opt_tensor_arg(&bias, "linear", "the bias")?;
        Ok(register(
            self.get("linear")?
                .linear(&w, b.as_ref())
                .or_fail("linear")?,
        ))
    }

    /// 2-D convolution of `[N, C, H, W]` by `weight` `[out, C/groups, kh, kw]`;
    /// opts: `{ stride, padding: number | [ph, pw] | "valid" | "same", dilation, groups }`.
    pub fn conv2d(
        &self,
        #[wasm_bindgen(unchecked_param_type = "Tensor")] weight: JsValue,
        #[wasm_bindgen(unchecked_optional_param_type = "Tensor | null")] bias: Option<JsValue>,
        #[wasm_bindgen(unchecked_optional_param_type = "Conv2dOptions")] opts: Option<JsValue>,
    ) -> JsResult<JsTensor> {
        let bias = bias.unwrap_or(JsValue::UNDEFINED);
        let opts = opts.unwrap_or(JsValue::UNDEFINED);
        let op = "conv2d";
        let w = tensor_arg(&weight, op, "the weight")?;
        let b = opt_tensor_arg(&bias, op, "the bias")?;
        let o = conv_opts(&opts, op)?;
        Ok(register(
            self.get(op)?.conv2d(&w, b.as_ref(), &o).or_fail(op)?,
        ))
    }

    #[wasm_bindgen(js_name = maxPool2d)]
    pub fn max_pool2d(
        &self,
        #[wasm_bindgen(unchecked_optional_param_type = "number | [number, number]")] kernel: Option<
            JsValue,
        >,
        #[wasm_bindgen(unchecked_optional_param_type = "number | [number, number] | null")] stride: Option<
            JsValue,
        >,
    ) -> JsResult<JsTensor> {
        let kernel = kernel.unwrap_or(JsValue::UNDEFINED);
        let stride = stride.unwrap_or(JsValue::UNDEFINED);
        self.pool("maxPool2d", kernel, stride, true)
    }

    #[wasm_bindgen(js_name = avgPool2d)]
    pub fn avg_pool2d(
        &self,
        #[wasm_bindgen(unchecked_optional_param_type = "number | [number, number]")] kernel: Option<
            JsValue,
        >,
        #[wasm_bindgen(unchecked_optional_param_type = "number | [number, number] | null")] stride: Option<
            JsValue,
        >,
    ) -> JsResult<JsTensor> {
        let kernel = kernel.unwrap_or(JsValue::UNDEFINED);
        let stride = stride.unwrap_or(JsValue::UNDEFINED);
        self.pool("avgPool2d", kernel, stride, false)
    }

    fn pool(&self, op: &str, kernel: JsValue, stride: JsValue, max: bool) -> JsResult<JsTensor> {
        let k = if kernel.is_undefined() {
            (2, 2)
        } else {
            pair_arg(&kernel, op, "kernel")?
        };
        let s = if stride.is_undefined() || stride.is_null() {
            None
        } else {
            Some(pair_arg(&stride, op, "stride")?)
        };
        let t = self.get(op)?;
        let r = if max {
            t.max_pool2d(k, s)
        } else {
            t.avg_pool2d(k, s)
        };
        Ok(register(r.or_fail(op)?))
    }

    /// Zero elements with probability `p` (default 0.5) and scale the rest, in training mode.
    pub fn dropout(
        &self,
        #[wasm_bindgen(unchecked_optional_param_type = "number")] p: Option<JsValue>,
    ) -> JsResult<JsTensor> {
        let p = p.unwrap_or(JsValue::UNDEFINED);
        let p = opt_number(&p, "dropout", "p", 0.5)?;
        Ok(register(
            self.get("dropout")?.dropout(p).or_fail("dropout")?,
        ))
    }

    /// Cross-entropy of logits (classes last) against integer labels;
    /// opts: `{ ignoreIndex, labelSmoothing, reduction: "mean" | "sum" | "none" }`.
    #[wasm_bindgen(js_name = sparseCategoricalCrossentropy)]
    pub fn sparse_categorical_crossentropy(
        &self,
        #[wasm_bindgen(unchecked_param_type = "Tensor")] labels: JsValue,
        #[wasm_bindgen(unchecked_optional_param_type = "CrossEntropyOptions")] opts: Option<
            JsValue,
        >,
    ) -> JsResult<JsTensor> {
        let opts = opts.unwrap_or(JsValue::UNDEFINED);
        let op = "sparseCategoricalCrossentropy";
        let y = tensor_arg(&labels, op, "the labels")?;
        let opts = opts_arg(&opts, op)?;
        let ignore = get(&opts, "ignoreIndex");
        let o = CrossEntropyOpts {
            ignore_index: if ignore.is_undefined() || ignore.is_null() {
                None
            } else {
                Some(int_arg(&ignore, op, "ignoreIndex")?)
            },
            label_smoothing: opt_number(&get(&opts, "labelSmoothing"), op, "labelSmoothing", 0.0)?,
            reduction: reduction_arg(&get(&opts, "reduction"), op)?,
        };
        Ok(register(
            self.get(op)?
                .sparse_categorical_crossentropy(&y, &o)
                .or_fail(op)?,
        ))
    }

    #[wasm_bindgen(js_name = binaryCrossentropy)]
    pub fn binary_crossentropy(
        &self,
        #[wasm_bindgen(unchecked_param_type = "Tensor")] y: JsValue,
        #[wasm_bindgen(unchecked_optional_param_type = "Reduction")] reduction: Option<JsValue>,
    ) -> JsResult<JsTensor> {
        let reduction = reduction.unwrap_or(JsValue::UNDEFINED);
        let op = "binaryCrossentropy";
        let (y, r) = (
            tensor_arg(&y, op, "the target")?,
            reduction_arg(&reduction, op)?,
        );
        Ok(register(
            self.get(op)?.binary_crossentropy(&y, r).or_fail(op)?,
        ))
    }

    #[wasm_bindgen(js_name = binaryCrossentropyLogits)]
    pub fn binary_crossentropy_logits(
        &self,
        #[wasm_bindgen(unchecked_param_type = "Tensor")] y: JsValue,
        #[wasm_bindgen(unchecked_optional_param_type = "Reduction")] reduction: Option<JsValue>,
    ) -> JsResult<JsTensor> {
        let reduction = reduction.unwrap_or(JsValue::UNDEFINED);
        let op = "binaryCrossentropyLogits";
        let (y, r) = (
            tensor_arg(&y, op, "the target")?,
            reduction_arg(&reduction, op)?,
        );
        Ok(register(
            self.get(op)?
                .binary_crossentropy_logits(&y, r)
                .or_fail(op)?,
        ))
    }

    pub fn mse(
        &self,
        #[wasm_bindgen(unchecked_param_type = "Tensor")] y: JsValue,
        #[wasm_bindgen(unchecked_optional_param_type = "Reduction")] reduction: Option<JsValue>,
    ) -> JsResult<JsTensor> {
        let reduction = reduction.unwrap_or(JsValue::UNDEFINED);
        let (y, r) = (
            tensor_arg(&y, "mse", "the target")?,
            reduction_arg(&reduction, "mse")?,
        );
        Ok(register(self.get("mse")?.mse(&y, r).or_fail("mse")?))
    }
}

fn full(op: &str, shape: &JsValue, v: f64, dtype: &JsValue) -> JsResult<JsTensor> {
    let s = shape_arg(shape, op)?;
    let dt = dtype_arg(dtype, op)?.unwrap_or(DType::F32);
    Ok(register(Tensor::full_dtype(&s, v, dt).or_fail(op)?))
}

fn pairs_arg(v: &JsValue, op: &str, what: &str) -> JsResult<Vec<(usize, usize)>> {
    if !Array::is_array(v) {
        return Err(fail(
            op,
            format!(
                "{what} must be an array of [a, b] pairs, got {}",
                describe(v)
            ),
        ));
    }
    Array::from(v)
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let xs = ints_arg(&p, op, &format!("{what}[{i}]"))?;
            match xs.as_slice() {
                [a, b] if *a >= 0 && *b >= 0 => Ok((*a as usize, *b as usize)),
                _ => Err(fail(
                    op,
                    format!("{what}[{i}] must be a pair of non-negative integers, got {xs:?}"),
                )),
            }
        })
        .collect()
}

fn reduction_arg(v: &JsValue, op: &str) -> JsResult<Reduction> {
    if v.is_undefined() || v.is_null() {
        return Ok(Reduction::Mean);
    }
    match v.as_string().as_deref() {
        Some("mean") => Ok(Reduction::Mean),
        Some("sum") => Ok(Reduction::Sum),
        Some("none") => Ok(Reduction::None),
        _ => Err(fail(
            op,
            format!(
                "reduction must be \"mean\", \"sum\" or \"none\", got {}",
                describe(v)
            ),
        )),
    }
}

fn conv_opts(opts: &JsValue, op: &str) -> JsResult<Conv2dOpts> {
    let opts = opts_arg(opts, op)?;
    let mut o = Conv2dOpts::default();
    let stride = get(&opts, "stride");
    if !stride.is_undefined() {
        o.stride = pair_arg(&stride, op, "stride")?;
    }
    let dil = get(&opts, "dilation");
    if !dil.is_undefined() {
        o.dilation = pair_arg(&dil, op, "dilation")?;
    }
    let groups = get(&opts, "groups");
    if !groups.is_undefined() {
        o.groups = size_arg(&groups, op, "groups")?;
    }
    let pad = get(&opts, "padding");
    o.padding = match pad.as_string().as_deref() {
        _ if pad.is_undefined() => Padding::Valid,
        Some("valid") => Padding::Valid,
        Some("same") => Padding::Same,
        Some(other) => {
            return Err(fail(
                op,
                format!("padding must be a number, a pair, \"valid\" or \"same\", got {other:?}"),
            ))
        }
        None => {
            let (a, b) = pair_arg(&pad, op, "padding")?;
            Padding::Explicit(a, b)
        }
    };
    Ok(o)
}

// ------------------------------------------------------------------------------ nn layers

fn layer_tensors(ts: &[Option<&Tensor>]) -> Array {
    ts.iter()
        .flatten()
        .map(|t| JsValue::from(register((*t).clone())))
        .collect()
}

fn opt_register(t: &Option<Tensor>) -> Option<JsTensor> {
    t.as_ref().map(|t| register(t.clone()))
}

/// `new nn.Conv2d(inChannels, outChannels, kernel, { stride, padding, dilation, groups, bias })`.
#[wasm_bindgen]
pub struct Conv2d(crate::nn::Conv2d);

#[wasm_bindgen]
impl Conv2d {
    #[wasm_bindgen(constructor)]
    pub fn new(
        in_channels: JsValue,
        out_channels: JsValue,
        #[wasm_bindgen(unchecked_param_type = "number | [number, number]")] kernel: JsValue,
        #[wasm_bindgen(unchecked_optional_param_type = "Conv2dOptions & { bias?: boolean }")] opts: Option<
            JsValue,
        >,
    ) -> JsResult<Conv2d> {
        let opts = opts.unwrap_or(JsValue::UNDEFINED);
        let op = "Conv2d";
        let cin = size_arg(&in_channels, op, "inChannels")?;
        let cout = size_arg(&out_channels, op, "outChannels")?;
        let k = pair_arg(&kernel, op, "kernel")?;
        let o = conv_opts(&opts, op)?;
        let bias = opt_bool(&get(&opts, "bias"), op, "bias", true)?;
        Ok(Conv2d(
            crate::nn::Conv2d::with(cin, cout, k, o, bias).or_fail(op)?,
        ))
    }
    pub fn forward(
        &self,
        #[wasm_bindgen(unchecked_param_type = "Tensor")] x: JsValue,
    ) -> JsResult<JsTensor> {
        let x = tensor_arg(&x, "Conv2d.forward", "the input")?;
        Ok(register(self.0.forward(&x).or_fail("Conv2d.forward")?))
    }
    #[wasm_bindgen(getter)]
    pub fn weight(&self) -> JsTensor {
        register(self.0.weight.clone())
    }
    #[wasm_bindgen(getter)]
    pub fn bias(&self) -> Option<JsTensor> {
        opt_register(&self.0.bias)
    }
    #[wasm_bindgen(unchecked_return_type = "Tensor[]")]
    pub fn parameters(&self) -> Array {
        layer_tensors(&[Some(&self.0.weight), self.0.bias.as_ref()])
    }
}

/// `new nn.Linear(inFeatures, outFeatures, bias = true)`.
#[wasm_bindgen]
pub struct Linear(crate::nn::Linear);

#[wasm_bindgen]
impl Linear {
    #[wasm_bindgen(constructor)]
    pub fn new(
        in_features: JsValue,
        out_features: JsValue,
        bias: Option<JsValue>,
    ) -> JsResult<Linear> {
        let bias = bias.unwrap_or(JsValue::UNDEFINED);
        let op = "Linear";
        let cin = size_arg(&in_features, op, "inFeatures")?;
        let cout = size_arg(&out_features, op, "outFeatures")?;
        let b = opt_bool(&bias, op, "bias", true)?;
        Ok(Linear(crate::nn::Linear::with(cin, cout, b).or_fail(op)?))
    }
    pub fn forward(
        &self,
        #[wasm_bindgen(unchecked_param_type = "Tensor")] x: JsValue,
    ) -> JsResult<JsTensor> {
        let x = tensor_arg(&x, "Linear.forward", "the input")?;
        Ok(register(self.0.forward(&x).or_fail("Linear.forward")?))
    }
    #[wasm_bindgen(getter)]
    pub fn weight(&self) -> JsTensor {
        register(self.0.weight.clone())
    }
    #[wasm_bindgen(getter)]
    pub fn bias(&self) -> Option<JsTensor> {
        opt_register(&self.0.bias)
    }
    #[wasm_bindgen(unchecked_return_type = "Tensor[]")]
    pub fn parameters(&self) -> Array {
        layer_tensors(&[Some(&self.0.weight), self.0.bias.as_ref()])
    }
}

/// `new nn.BatchNorm(numFeatures, { eps, momentum, affine })` (2-D or 4-D input, channels on
/// axis 1). Running statistics update in training mode.
#[wasm_bindgen]
pub struct BatchNorm(crate::nn::BatchNorm);

#[wasm_bindgen]
impl BatchNorm {
    #[wasm_bindgen(constructor)]
    pub fn new(
        num_features: JsValue,
        #[wasm_bindgen(
            unchecked_param_type = "{ eps?: number, momentum?: number, affine?: boolean }"
        )]
        opts: Option<JsValue>,
    ) -> JsResult<BatchNorm> {
        let opts = opts.unwrap_or(JsValue::UNDEFINED);
        let op = "BatchNorm";
        let n = size_arg(&num_features, op, "numFeatures")?;
        let opts = opts_arg(&opts, op)?;
        let eps = opt_number(&get(&opts, "eps"), op, "eps", 1e-5)?;
        let m = opt_number(&get(&opts, "momentum"), op, "momentum", 0.1)?;
        let affine = opt_bool(&get(&opts, "affine"), op, "affine", true)?;
        Ok(BatchNorm(
            crate::nn::BatchNorm::with(n, eps, m, affine).or_fail(op)?,
        ))
    }
    pub fn forward(
        &self,
        #[wasm_bindgen(unchecked_param_type = "Tensor")] x: JsValue,
    ) -> JsResult<JsTensor> {
        let x = tensor_arg(&x, "BatchNorm.forward", "the input")?;
        Ok(register(self.0.forward(&x).or_fail("BatchNorm.forward")?))
    }
    #[wasm_bindgen(getter)]
    pub fn weight(&self) -> Option<JsTensor> {
        opt_register(&self.0.weight)
    }
    #[wasm_bindgen(getter)]
    pub fn bias(&self) -> Option<JsTensor> {
        opt_register(&self.0.bias)
    }
    #[wasm_bindgen(getter, js_name = runningMean)]
    pub fn running_mean(&self) -> JsTensor {
        register(self.0.running_mean.clone())
    }
    #[wasm_bindgen(getter, js_name = runningVar)]
    pub fn running_var(&self) -> JsTensor {
        register(self.0.running_var.clone())
    }
    #[wasm_bindgen(unchecked_return_type = "Tensor[]")]
    pub fn parameters(&self) -> Array {
        layer_tensors(&[self.0.weight.as_ref(), self.0.bias.as_ref()])
    }
}

/// `new nn.LayerNorm(normalizedShape, { eps, affine })`.
#[wasm_bindgen]
pub struct LayerNorm(crate::nn::LayerNorm);

#[wasm_bindgen]
impl LayerNorm {
    #[wasm_bindgen(constructor)]
    pub fn new(
        #[wasm_bindgen(unchecked_param_type = "number | number[]")] normalized_shape: JsValue,
        #[wasm_bindgen(unchecked_optional_param_type = "{ eps?: number, affine?: boolean }")] opts: Option<
            JsValue,
        >,
    ) -> JsResult<LayerNorm> {
        let opts = opts.unwrap_or(JsValue::UNDEFINED);
        let op = "LayerNorm";
        let s = shape_arg(&normalized_shape, op)?;
        let opts = opts_arg(&opts, op)?;
        let eps = opt_number(&get(&opts, "eps"), op, "eps", 1e-5)?;
        let affine = opt_bool(&get(&opts, "affine"), op, "affine", true)?;
        Ok(LayerNorm(
            crate::nn::LayerNorm::with(&s, eps, affine).or_fail(op)?,
        ))
    }
    pub fn forward(
        &self,
        #[wasm_bindgen(unchecked_param_type = "Tensor")] x: JsValue,
    ) -> JsResult<JsTensor> {
        let x = tensor_arg(&x, "LayerNorm.forward", "the input")?;
        Ok(register(self.0.forward(&x).or_fail("LayerNorm.forward")?))
    }
    #[wasm_bindgen(getter)]
    pub fn weight(&self) -> Option<JsTensor> {
        opt_register(&self.0.weight)
    }
    #[wasm_bindgen(getter)]
    pub fn bias(&self) -> Option<JsTensor> {
        opt_register(&self.0.bias)
    }
    #[wasm_bindgen(unchecked_return_type = "Tensor[]")]
    pub fn parameters(&self) -> Array {
        layer_tensors(&[self.0.weight.as_ref(), self.0.bias.as_ref()])
    }
}

/// `new nn.GroupNorm(numGroups, numChannels, { eps, affine })`.
#[wasm_bindgen]
pub struct GroupNorm(crate::nn::GroupNorm);

#[wasm_bindgen]
impl GroupNorm {
    #[wasm_bindgen(constructor)]
    pub fn new(
        num_groups: JsValue,
        num_channels: JsValue,
        #[wasm_bindgen(unchecked_optional_param_type = "{ eps?: number, affine?: boolean }")] opts: Option<
            JsValue,
        >,
    ) -> JsResult<GroupNorm> {
        let opts = opts.unwrap_or(JsValue::UNDEFINED);
        let op = "GroupNorm";
        let g = size_arg(&num_groups, op, "numGroups")?;
        let c = size_arg(&num_channels, op, "numChannels")?;
        let opts = opts_arg(&opts, op)?;
        let eps = opt_number(&get(&opts, "eps"), op, "eps", 1e-5)?;
        let affine = opt_bool(&get(&opts, "affine"), op, "affine", true)?;
        Ok(GroupNorm(
            crate::nn::GroupNorm::with(g, c, eps, affine).or_fail(op)?,
        ))
    }
    pub fn forward(
        &self,
        #[wasm_bindgen(unchecked_param_type = "Tensor")] x: JsValue,
    ) -> JsResult<JsTensor> {
        let x = tensor_arg(&x, "GroupNorm.forward", "the input")?;
        Ok(register(self.0.forward(&x).or_fail("GroupNorm.forward")?))
    }
    #[wasm_bindgen(unchecked_return_type = "Tensor[]")]
    pub fn parameters(&self) -> Array {
        layer_tensors(&[self.0.weight.as_ref(), self.0.bias.as_ref()])
    }
}

/// `new nn.Embedding(vocabSize, embedSize)`.
#[wasm_bindgen]
pub struct Embedding(crate::nn::Embedding);

#[wasm_bindgen]
impl Embedding {
    #[wasm_bindgen(constructor)]
    pub fn new(vocab_size: JsValue, embed_size: JsValue) -> JsResult<Embedding> {
        let op = "Embedding";
        let v = size_arg(&vocab_size, op, "vocabSize")?;
        let e = size_arg(&embed_size, op, "embedSize")?;
        Ok(Embedding(crate::nn::Embedding::new(v, e).or_fail(op)?))
    }
    pub fn forward(
        &self,
        #[wasm_bindgen(unchecked_param_type = "Tensor")] idx: JsValue,
    ) -> JsResult<JsTensor> {
        let i = tensor_arg(&idx, "Embedding.forward", "the indices")?;
        Ok(register(self.0.forward(&i).or_fail("Embedding.forward")?))
    }
    #[wasm_bindgen(getter)]
    pub fn weight(&self) -> JsTensor {
        register(self.0.weight.clone())
    }
    #[wasm_bindgen(unchecked_return_type = "Tensor[]")]
    pub fn parameters(&self) -> Array {
        layer_tensors(&[Some(&self.0.weight)])
    }
}

// ------------------------------------------------------------------------------ optimizers

/// Parameters from a JS array of tensors (`getParameters(model)` makes one).
fn params_arg(v: &JsValue, op: &str) -> JsResult<Vec<Tensor>> {
    let ts = tensors_arg(v, op)?;
    if ts.is_empty() {
        return Err(fail(op, "no parameters (pass getParameters(model))"));
    }
    Ok(ts)
}

/// An optimizer; `opts` is `{ lr, momentum, weightDecay, nesterov, b1, b2, eps }` as it applies.
#[wasm_bindgen]
pub struct Optim {
    inner: Box<dyn Optimizer>,
    name: &'static str,
}

fn optim(
    name: &'static str,
    params: JsValue,
    opts: JsValue,
    make: impl FnOnce(
        Vec<Tensor>,
        &dyn Fn(&str, f64) -> JsResult<f64>,
        &dyn Fn(&str) -> JsResult<Option<bool>>,
    ) -> JsResult<Box<dyn Optimizer>>,
) -> JsResult<Optim> {
    let ps = params_arg(&params, name)?;
    let opts = opts_arg(&opts, name)?;
    let num = |k: &str, d: f64| opt_number(&get(&opts, k), name, k, d);
    let flag = |k: &str| {
        let v = get(&opts, k);
        if v.is_undefined() {
            Ok(None)
        } else {
            opt_bool(&v, name, k, false).map(Some)
        }
    };
    Ok(Optim {
        inner: make(ps, &num, &flag)?,
        name,
    })
}

#[wasm_bindgen]
impl Optim {
    /// Forget every parameter's gradient.
    #[wasm_bindgen(js_name = zeroGrad)]
    pub fn zero_grad(&self) {
        self.inner.zero_grad();
    }
    /// Update the parameters from their gradients now (in training mode).
    pub fn step(&mut self) -> JsResult<()> {
        let name = self.name;
        self.inner.step().or_fail(&format!("{name}.step"))
    }
    /// The update as tensors to realize together with the loss (one schedule).
    #[wasm_bindgen(js_name = scheduleStep, unchecked_return_type = "Tensor[]")]
    pub fn schedule_step(&mut self) -> JsResult<Array> {
        let name = self.name;
        Ok(tensor_array(
            self.inner
                .schedule_step()
                .or_fail(&format!("{name}.scheduleStep"))?,
        ))
    }
    #[wasm_bindgen(getter)]
    pub fn lr(&self) -> f64 {
        self.inner.learning_rate()
    }
    #[wasm_bindgen(setter)]
    pub fn set_lr(&mut self, lr: f64) -> JsResult<()> {
        let name = self.name;
        self.inner.set_lr(lr).or_fail(&format!("{name}.lr"))
    }
    #[wasm_bindgen(unchecked_return_type = "Tensor[]")]
    pub fn params(&self) -> Array {
        tensor_array(self.inner.params().to_vec())
    }
}

/// `SGD(params, { lr = 0.001, momentum = 0, weightDecay = 0, nesterov = false })`.
#[wasm_bindgen(js_name = SGD)]
pub fn sgd(
    #[wasm_bindgen(unchecked_param_type = "Tensor[]")] params: JsValue,
    opts: Option<JsValue>,
) -> JsResult<Optim> {
    let opts = opts.unwrap_or(JsValue::UNDEFINED);
    optim("SGD", params, opts, |ps, num, flag| {
        let mut o = Sgd::new(ps).or_fail("SGD")?;
        o = o
            .lr(num("lr", 0.001)?)
            .momentum(num("momentum", 0.0)?)
            .weight_decay(num("weightDecay", 0.0)?);
        if let Some(n) = flag("nesterov")? {
            o = o.nesterov(n);
        }
        Ok(Box::new(o))
    })
}

/// `LARS(params, { lr = 0.001, momentum = 0.9, weightDecay = 0.0001, nesterov })`.
#[wasm_bindgen(js_name = LARS)]
pub fn lars(
    #[wasm_bindgen(unchecked_param_type = "Tensor[]")] params: JsValue,
    opts: Option<JsValue>,
) -> JsResult<Optim> {
    let opts = opts.unwrap_or(JsValue::UNDEFINED);
    optim("LARS", params, opts, |ps, num, flag| {
        let mut o = Lars::new(ps).or_fail("LARS")?;
        o = o
            .lr(num("lr", 0.001)?)
            .momentum(num("momentum", 0.9)?)
            .weight_decay(num("weightDecay", 1e-4)?);
        if let Some(n) = flag("nesterov")? {
            o = o.nesterov(n);
        }
        Ok(Box::new(o))
    })
}

/// `Muon(params, { lr = 0.02, momentum = 0.95, weightDecay = 0, nesterov = true })`.
#[wasm_bindgen(js_name = Muon)]
pub fn muon(
    #[wasm_bindgen(unchecked_param_type = "Tensor[]")] params: JsValue,
    opts: Option<JsValue>,
) -> JsResult<Optim> {
    let opts = opts.unwrap_or(JsValue::UNDEFINED);
    optim("Muon", params, opts, |ps, num, flag| {
        let mut o = Muon::new(ps).or_fail("Muon")?;
        o = o
            .lr(num("lr", 0.02)?)
            .momentum(num("momentum", 0.95)?)
            .weight_decay(num("weightDecay", 0.0)?);
        if let Some(n) = flag("nesterov")? {
            o = o.nesterov(n);
        }
        Ok(Box::new(o))
    })
}

/// `Adam(params, { lr = 0.001, b1 = 0.9, b2 = 0.999, eps = 1e-8 })`.
#[wasm_bindgen(js_name = Adam)]
pub fn adam(
    #[wasm_bindgen(unchecked_param_type = "Tensor[]")] params: JsValue,
    opts: Option<JsValue>,
) -> JsResult<Optim> {
    let opts = opts.unwrap_or(JsValue::UNDEFINED);
    optim("Adam", params, opts, |ps, num, _| {
        let o = Adam::new(ps).or_fail("Adam")?;
        Ok(Box::new(
            o.lr(num("lr", 0.001)?)
                .b1(num("b1", 0.9)?)
                .b2(num("b2", 0.999)?)
                .eps(num("eps", 1e-8)?),
        ))
    })
}

/// `AdamW(params, { lr = 0.001, b1 = 0.9, b2 = 0.999, eps = 1e-8, weightDecay = 0.01 })`.
#[wasm_bindgen(js_name = AdamW)]
pub fn adamw(
    #[wasm_bindgen(unchecked_param_type = "Tensor[]")] params: JsValue,
    opts: Option<JsValue>,
) -> JsResult<Optim> {
    let opts = opts.unwrap_or(JsValue::UNDEFINED);
    optim("AdamW", params, opts, |ps, num, _| {
        let o = AdamW::new(ps).or_fail("AdamW")?;
        Ok(Box::new(
            o.lr(num("lr", 0.001)?)
                .b1(num("b1", 0.9)?)
                .b2(num("b2", 0.999)?)
                .eps(num("eps", 1e-8)?)
                .weight_decay(num("weightDecay", 0.01)?),
        ))
    })
}

/// `LAMB(params, { lr = 0.001, eps = 1e-6, weightDecay = 0 })`.
#[wasm_bindgen(js_name = LAMB)]
pub fn lamb(
    #[wasm_bindgen(unchecked_param_type = "Tensor[]")] params: JsValue,
    opts: Option<JsValue>,
) -> JsResult<Optim> {
    let opts = opts.unwrap_or(JsValue::UNDEFINED);
    optim("LAMB", params, opts, |ps, num, _| {
        let o = Lamb::new(ps).or_fail("LAMB")?;
        Ok(Box::new(
            o.lr(num("lr", 0.001)?)
                .eps(num("eps", 1e-6)?)
                .weight_decay(num("weightDecay", 0.0)?),
        ))
    })
}

// ------------------------------------------------------------------------------ JIT

/// Tensors in a function's result: a Tensor, or an array of them.
fn results(v: &JsValue, op: &str) -> JsResult<(Vec<Tensor>, bool)> {
    if Array::is_array(v) {
        Ok((tensors_arg(v, op)?, false))
    } else {
        Ok((vec![tensor_arg(v, op, "the function's result")?], true))
    }
}

fn js_error_message(e: &JsValue) -> String {
    e.dyn_ref::<js_sys::Error>()
        .map(|e| String::from(e.message()))
        .or_else(|| e.as_string())
        .unwrap_or_else(|| format!("{e:?}"))
}

type JitFn = Box<dyn FnMut(&[Tensor]) -> crate::Result<Vec<Tensor>>>;

/// The TinyJit: `call` 1 runs the function, call 2 captures its launches, later calls replay
/// them without running it. Made by `jit(fn)` in js/wgrad.js.
#[wasm_bindgen]
pub struct TinyJitJs {
    jit: TinyJit<JitFn>,
    single: std::rc::Rc<std::cell::Cell<Option<bool>>>,
}

#[wasm_bindgen]
impl TinyJitJs {
    #[wasm_bindgen(constructor)]
    pub fn new(f: JsValue) -> JsResult<TinyJitJs> {
        let f: Function = f
            .dyn_into()
            .map_err(|v| fail("jit", format!("expected a function, got {}", describe(&v))))?;
        let single = std::rc::Rc::new(std::cell::Cell::new(None));
        let s2 = single.clone();
        let run: JitFn = Box::new(move |inputs: &[Tensor]| {
            let args: Array = inputs
                .iter()
                .map(|t| JsValue::from(register(t.clone())))
                .collect();
            let out = f.apply(&JsValue::NULL, &args).map_err(|e| {
                Error::new(
                    crate::ErrorKind::Jit,
                    format!("the jitted function threw: {}", js_error_message(&e)),
                )
            })?;
            if out.is_instance_of::<js_sys::Promise>() {
                return Err(Error::new(
                    crate::ErrorKind::Jit,
                    "the jitted function returned a Promise: it must be synchronous (await nothing inside it)",
                ));
            }
            let (ts, one) = results(&out, "jit").map_err(|e| {
                Error::new(crate::ErrorKind::Jit, js_error_message(&JsValue::from(e)))
            })?;
            s2.set(Some(one));
            Ok(ts)
        });
        Ok(TinyJitJs {
            jit: TinyJit::new(run),
            single,
        })
    }

    /// Run (or capture, or replay) with these input tensors; returns what the function returns.
    #[wasm_bindgen(unchecked_return_type = "Tensor | Tensor[]")]
    pub fn call(
        &mut self,
        #[wasm_bindgen(unchecked_optional_param_type = "Tensor[]")] inputs: Option<JsValue>,
    ) -> JsResult<JsValue> {
        let inputs = inputs.unwrap_or(JsValue::UNDEFINED);
        let ins = if inputs.is_undefined() {
            vec![]
        } else {
            tensors_arg(&inputs, "jit")?
        };
        let refs: Vec<&Tensor> = ins.iter().collect();
        let out = self.jit.call(&refs).or_fail("jit")?;
        match (self.single.get(), <[Tensor; 1]>::try_from(out)) {
            (Some(true), Ok([t])) => Ok(register(t).into()),
            (_, Ok(one)) => Ok(tensor_array(one.to_vec()).into()),
            (_, Err(many)) => Ok(tensor_array(many).into()),
        }
    }

    /// Forget the capture: the next call runs, the one after captures again.
    pub fn reset(&mut self) {
        self.jit.reset();
    }

    /// Launches replayed per call (0 before capture).
    #[wasm_bindgen(getter)]
    pub fn launches(&self) -> u32 {
        self.jit.launches() as u32
    }
}

// ------------------------------------------------------------------------------ engine

fn device_arg(v: &JsValue, op: &str) -> JsResult<Device> {
    match v.as_string().as_deref() {
        Some("cpu") => Ok(Device::Interp),
        #[cfg(feature = "wgpu")]
        Some("webgpu") => Ok(Device::Wgpu),
        _ => Err(fail(
            op,
            format!("device must be \"webgpu\" or \"cpu\", got {}", describe(v)),
        )),
    }
}

fn device_name(d: Device) -> &'static str {
    match d {
        #[cfg(feature = "wgpu")]
        Device::Wgpu => "webgpu",
        _ => "cpu",
    }
}

/// Pick the device: WebGPU when available (requesting the adapter's limits), else the
/// interpreter with a console warning. `device: "webgpu"` makes a missing WebGPU an error;
/// `"cpu"` always uses the interpreter. Resolves to `{ device, adapter }`.
#[wasm_bindgen(js_name = initEngine, unchecked_return_type = "Promise<InitInfo>")]
pub fn init_engine(
    #[wasm_bindgen(unchecked_optional_param_type = "InitOptions")] opts: Option<JsValue>,
) -> js_sys::Promise {
    let opts = opts.unwrap_or(JsValue::UNDEFINED);
    wasm_bindgen_futures::future_to_promise(async move {
        let op = "init";
        let opts = opts_arg(&opts, op)?;
        let want = get(&opts, "device");
        let want = if want.is_undefined() || want.is_null() {
            None
        } else {
            Some(want.as_string().ok_or_else(|| {
                fail(
                    op,
                    format!(
                        "device must be \"webgpu\" or \"cpu\", got {}",
                        describe(&want)
                    ),
                )
            })?)
        };
        let info = Object::new();
        let set = |k: &str, v: JsValue| Reflect::set(&info, &k.into(), &v).map(|_| ());
        match want.as_deref() {
            Some("cpu") | Some("interp") => {
                crate::context::set_default_device(Some(Device::Interp));
                set("device", "cpu".into())?;
                set("adapter", JsValue::NULL)?;
            }
            None | Some("webgpu") => {
                #[cfg(feature = "wgpu")]
                let got = crate::runtime::wgpu::init().await;
                #[cfg(not(feature = "wgpu"))]
                let got: crate::Result<()> = Err(Error::new(
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
                            ] {
                                Reflect::set(&ad, &k.into(), &v)?;
                            }
                            set("adapter", ad.into())?;
                        }
                    }
                    Err(e) if want.is_some() => return Err(fail(op, e).into()),
                    Err(e) => {
                        web_sys::console::warn_1(&format!("wgrad: WebGPU unavailable ({e}); falling back to the CPU interpreter").into());
                        crate::context::set_default_device(Some(Device::Interp));
                        set("device", "cpu".into())?;
                        set("adapter", JsValue::NULL)?;
                    }
                }
            }
            Some(other) => {
                return Err(fail(
                    op,
                    format!("unsupported device {other:?} (expected \"webgpu\" or \"cpu\")"),
                )
                .into())
            }
        }
        Ok(info.into())
    })
}

/// The device new tensors go to: "webgpu" or "cpu".
#[wasm_bindgen(js_name = defaultDevice)]
pub fn default_device() -> String {
    device_name(Device::default()).into()
}

/// Run `f` with settings in force: `{ TRAINING, DEBUG, NO_GRAD, DEVICE }` (camelCase works
/// too). `f` must be synchronous.
#[wasm_bindgen(js_name = withContext)]
pub fn with_context(
    #[wasm_bindgen(unchecked_param_type = "ContextOptions")] opts: JsValue,
    f: JsValue,
) -> JsResult<JsValue> {
    let op = "withContext";
    let opts = opts_arg(&opts, op)?;
    let f: Function = f
        .dyn_into()
        .map_err(|v| fail(op, format!("expected a function, got {}", describe(&v))))?;
    let pick = |a: &str, b: &str| {
        let v = get(&opts, a);
        if v.is_undefined() {
            get(&opts, b)
        } else {
            v
        }
    };
    let flag = |v: JsValue, k: &str| -> JsResult<Option<bool>> {
        if v.is_undefined() || v.is_null() {
            Ok(None)
        } else if let Some(b) = v.as_bool() {
            Ok(Some(b))
        } else {
            Ok(Some(number_arg(&v, op, k)? != 0.0))
        }
    };
    let mut ctx = Context::new();
    if let Some(t) = flag(pick("TRAINING", "training"), "TRAINING")? {
        ctx = ctx.training(t);
    }
    if let Some(t) = flag(pick("NO_GRAD", "noGrad"), "NO_GRAD")? {
        ctx = ctx.no_grad(t);
    }
    let dbg = pick("DEBUG", "debug");
    if !dbg.is_undefined() {
        ctx = ctx.debug(size_arg(&dbg, op, "DEBUG")? as u32);
    }
    let dev = pick("DEVICE", "device");
    if !dev.is_undefined() {
        ctx = ctx.dev(device_arg(&dev, op)?);
    }
    let out = ctx
        .run(|| f.call0(&JsValue::NULL))
        .map_err(|e| fail(op, js_error_message(&e)))?;
    if out.is_instance_of::<js_sys::Promise>() {
        return Err(fail(op, "the function returned a Promise: it must be synchronous (settings end when it returns)"));
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
    let mut note = |v: &JsValue| {
        if let Some(id) = Reflect::get(v, &ID_KEY.into())
            .ok()
            .and_then(|i| i.as_f64())
        {
            kept.insert(id as u32);
        }
    };
    if keep.is_object() {
        note(&keep);
        if Array::is_array(&keep) {
            Array::from(&keep).iter().for_each(|v| note(&v));
        } else if let Ok(vals) = Reflect::own_keys(&keep) {
            for k in vals.iter() {
                if let Ok(v) = Reflect::get(&keep, &k) {
                    if v.is_object() {
                        note(&v);
                    }
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
pub fn set_debug(level: u32) {
    crate::context::set_debug(Some(level));
}

/// `{ kernelCount, globalOps, globalMem, timeMs, liveTensors, liveBuffers, liveBytes }`, where
/// live buffers count every device buffer the engine holds.
#[wasm_bindgen(js_name = globalCounters, unchecked_return_type = "GlobalCounters")]
pub fn global_counters() -> JsValue {
    let (bufs, bytes) = crate::runtime::live_buffers();
    let tensors = REG.with(|r| r.borrow().live.len());
    let o = Object::new();
    for (k, v) in [
        ("kernelCount", GlobalCounters::kernel_count() as f64),
        ("globalOps", GlobalCounters::global_ops() as f64),
        ("globalMem", GlobalCounters::global_mem() as f64),
        ("timeMs", GlobalCounters::time_ns() as f64 / 1e6),
        ("liveTensors", tensors as f64),
        ("liveBuffers", bufs as f64),
        ("liveBytes", bytes as f64),
    ] {
        let _ = Reflect::set(&o, &k.into(), &v.into());
    }
    o.into()
}

#[wasm_bindgen(js_name = resetGlobalCounters)]
pub fn reset_global_counters() {
    GlobalCounters::reset();
}

/// MNIST from the four IDX files' bytes (gzipped or not), in `MNIST_FILES` order:
/// train images, train labels, test images, test labels. Resolves to
/// `{ xTrain, yTrain, xTest, yTest }` (uint8 images `[N, 1, 28, 28]`, int32 labels).
#[wasm_bindgen(js_name = mnistFromBytes, unchecked_return_type = "MnistData")]
pub fn mnist_from_bytes(
    train_images: &[u8],
    train_labels: &[u8],
    test_images: &[u8],
    test_labels: &[u8],
) -> JsResult<JsValue> {
    let m =
        crate::nn::datasets::mnist_from_bytes(train_images, train_labels, test_images, test_labels)
            .or_fail("mnist")?;
    let o = Object::new();
    for (k, t) in [
        ("xTrain", m.x_train),
        ("yTrain", m.y_train),
        ("xTest", m.x_test),
        ("yTest", m.y_test),
    ] {
        Reflect::set(&o, &k.into(), &register(t).into())
            .map_err(|e| fail("mnist", js_error_message(&e)))?;
    }
    Ok(o.into())
}

/// Serialize `{ name: Tensor }` as safetensors bytes (resolves to a Uint8Array).
#[wasm_bindgen(js_name = safeSave, unchecked_return_type = "Promise<Uint8Array>")]
pub fn safe_save(
    #[wasm_bindgen(unchecked_param_type = "Record<string, Tensor>")] state: JsValue,
) -> JsResult<js_sys::Promise> {
    let op = "safeSave";
    if !state.is_object() || Array::is_array(&state) {
        return Err(fail(
            op,
            format!(
                "expected an object of named Tensors, got {}",
                describe(&state)
            ),
        ));
    }
    let mut named = vec![];
    let keys = Reflect::own_keys(&state).map_err(|e| fail(op, js_error_message(&e)))?;
    for k in keys.iter() {
        let Some(name) = k.as_string() else { continue };
        let v = Reflect::get(&state, &k).map_err(|e| fail(op, js_error_message(&e)))?;
        named.push((name.clone(), tensor_arg(&v, op, &format!("\"{name}\""))?));
    }
    crate::realize::check_readback().or_fail(op)?;
    Ok(wasm_bindgen_futures::future_to_promise(async move {
        let bytes = crate::nn::state::safe_save_bytes_async(&named)
            .await
            .or_fail(op)?;
        Ok(js_sys::Uint8Array::from(bytes.as_slice()).into())
    }))
}

/// Parse safetensors bytes into `{ name: Tensor }` (on the default device).
#[wasm_bindgen(js_name = safeLoad, unchecked_return_type = "Record<string, Tensor>")]
pub fn safe_load(bytes: &[u8]) -> JsResult<JsValue> {
    let op = "safeLoad";
    let o = Object::new();
    for (name, t) in crate::nn::state::safe_load_bytes(bytes).or_fail(op)? {
        Reflect::set(&o, &name.as_str().into(), &register(t).into())
            .map_err(|e| fail(op, js_error_message(&e)))?;
    }
    Ok(o.into())
}

/// Whether two handles refer to the same engine tensor.
#[wasm_bindgen(js_name = sameTensor)]
pub fn same_tensor(
    #[wasm_bindgen(unchecked_param_type = "Tensor")] a: JsValue,
    #[wasm_bindgen(unchecked_param_type = "Tensor")] b: JsValue,
) -> JsResult<bool> {
    let a = tensor_arg(&a, "sameTensor", "a")?;
    let b = tensor_arg(&b, "sameTensor", "b")?;
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

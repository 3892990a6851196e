//! Arguments from JavaScript: one trait, `FromJs`, converts a `JsValue` into each Rust argument
//! type (numbers, integers that must fit, tensors looked up in the registry, shapes, axes,
//! dtypes, option objects), and `Option<T>` means "undefined or null: the default". Every
//! failure is an error naming the op and the argument.

use super::{fail, lookup, JsResult, OrFail};
use crate::{
    Axes, Conv1dOpts, Conv2dOpts, ConvTranspose1dOpts, ConvTranspose2dOpts, CrossEntropyOpts,
    DType, Device, Index, Interpolation, Operand, PadMode, Padding, Padding1d, Pool2dOpts,
    Reduction, Tensor,
};
use js_sys::Reflect;
use wasm_bindgen::prelude::*;

#[wasm_bindgen]
extern "C" {
    /// `Array.isArray`, which throws a bare `TypeError` on a revoked `Proxy`.
    #[wasm_bindgen(catch, js_namespace = Array, js_name = isArray)]
    fn array_is_array(v: &JsValue) -> Result<bool, JsValue>;
}

/// Whether `v` is an array: false for what `Array.isArray` throws on (a revoked `Proxy`), so
/// the caller's error names its op and argument instead.
pub fn is_array(v: &JsValue) -> bool {
    array_is_array(v).unwrap_or(false)
}

/// A Rust argument from a JS value; `what` names the argument in error messages.
pub(crate) trait FromJs: Sized {
    fn from_js(v: &JsValue, op: &str, what: &str) -> JsResult<Self>;
}

/// `T::from_js`, with the type inferred.
pub(crate) fn arg<T: FromJs>(v: &JsValue, op: &str, what: &str) -> JsResult<T> {
    T::from_js(v, op, what)
}

fn absent(v: &JsValue) -> bool {
    v.is_undefined() || v.is_null()
}

impl<T: FromJs> FromJs for Option<T> {
    fn from_js(v: &JsValue, op: &str, what: &str) -> JsResult<Self> {
        if absent(v) {
            Ok(None)
        } else {
            T::from_js(v, op, what).map(Some)
        }
    }
}

/// Describe a JS value for an error message.
pub(crate) fn describe(v: &JsValue) -> String {
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
    if is_array(v) {
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

/// `obj[key]`, or undefined when `obj` is not an object.
pub(crate) fn get(obj: &JsValue, key: &str) -> JsValue {
    if obj.is_object() {
        Reflect::get(obj, &key.into()).unwrap_or(JsValue::UNDEFINED)
    } else {
        JsValue::UNDEFINED
    }
}

/// The elements of an array or a typed array, read one at a time (so that a sparse array
/// claiming a huge length is not copied first; a throwing getter reads as `undefined`).
pub(crate) fn elements(v: &JsValue) -> impl Iterator<Item = JsValue> + '_ {
    let n = get(v, "length").as_f64().unwrap_or(0.0);
    let n = if n.is_finite() && n > 0.0 {
        n.min(u32::MAX as f64) as u32
    } else {
        0
    };
    (0..n).map(move |i| Reflect::get_u32(v, i).unwrap_or(JsValue::UNDEFINED))
}

/// An options argument (`undefined`, `null` or an object) and the op it belongs to.
pub(crate) struct Opts<'a> {
    obj: JsValue,
    op: &'a str,
}

impl<'a> Opts<'a> {
    pub(crate) fn new(v: &JsValue, op: &'a str) -> JsResult<Opts<'a>> {
        if absent(v) || (v.is_object() && !is_array(v)) {
            Ok(Opts { obj: v.clone(), op })
        } else {
            Err(fail(
                op,
                format!("options must be an object, got {}", describe(v)),
            ))
        }
    }
    /// The option `key` (`None` when absent), named by its key in errors.
    pub(crate) fn get<T: FromJs>(&self, key: &str) -> JsResult<Option<T>> {
        arg(&get(&self.obj, key), self.op, key)
    }
    /// The option `key`, or `default` when absent.
    pub(crate) fn or<T: FromJs>(&self, key: &str, default: T) -> JsResult<T> {
        Ok(self.get(key)?.unwrap_or(default))
    }
    pub(crate) fn raw(&self, key: &str) -> JsValue {
        get(&self.obj, key)
    }
}

// ------------------------------------------------------------------------------ tensors

/// The property through which the engine recognises its handles among JS values.
pub(crate) const ID_KEY: &str = "_wgradId";

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

/// The id of a live handle, if `v` is one.
pub(crate) fn handle_id(v: &JsValue) -> Option<u32> {
    if !v.is_object() {
        return None;
    }
    Reflect::get(v, &ID_KEY.into())
        .ok()
        .and_then(|i| i.as_f64())
        .map(|i| i as u32)
}

impl FromJs for Tensor {
    fn from_js(v: &JsValue, op: &str, what: &str) -> JsResult<Self> {
        match tensor_ref(v) {
            TensorRef::Live(t) => Ok(t),
            TensorRef::Disposed => Err(fail(op, format!("{what} is a disposed Tensor"))),
            TensorRef::NotATensor => Err(fail(
                op,
                format!("{what} must be a Tensor, got {}", describe(v)),
            )),
        }
    }
}

/// A tensor, or a number (or a boolean) that takes the other operand's dtype.
impl FromJs for Operand {
    fn from_js(v: &JsValue, op: &str, what: &str) -> JsResult<Self> {
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
}

/// An array of tensors.
impl FromJs for Vec<Tensor> {
    fn from_js(v: &JsValue, op: &str, _what: &str) -> JsResult<Self> {
        if !is_array(v) {
            return Err(fail(
                op,
                format!("expected an array of Tensors, got {}", describe(v)),
            ));
        }
        elements(v)
            .enumerate()
            .map(|(i, x)| arg(&x, op, &format!("element {i}")))
            .collect()
    }
}

// ------------------------------------------------------------------------------ numbers

impl FromJs for f64 {
    fn from_js(v: &JsValue, op: &str, what: &str) -> JsResult<Self> {
        v.as_f64()
            .ok_or_else(|| fail(op, format!("{what} must be a number, got {}", describe(v))))
    }
}

impl FromJs for bool {
    fn from_js(v: &JsValue, op: &str, what: &str) -> JsResult<Self> {
        v.as_bool()
            .ok_or_else(|| fail(op, format!("{what} must be a boolean, got {}", describe(v))))
    }
}

/// Integers: whole numbers within ±2^53 (beyond, a JS number no longer holds every integer).
impl FromJs for i64 {
    fn from_js(v: &JsValue, op: &str, what: &str) -> JsResult<Self> {
        const SAFE: f64 = 9_007_199_254_740_991.0;
        let n = f64::from_js(v, op, what)?;
        if n.fract() != 0.0 || !n.is_finite() {
            return Err(fail(op, format!("{what} must be an integer, got {n}")));
        }
        if n.abs() > SAFE {
            return Err(fail(op, format!("{what} is out of range, got {n}")));
        }
        Ok(n as i64)
    }
}

/// An integer that must fit the target type (`isize` and `usize` are 32 bits on wasm32: 2^32+1
/// is an error, not 1).
fn fitting<T: TryFrom<i64>>(v: &JsValue, op: &str, what: &str) -> JsResult<T> {
    let n = i64::from_js(v, op, what)?;
    T::try_from(n).map_err(|_| fail(op, format!("{what} is out of range, got {n}")))
}

impl FromJs for isize {
    fn from_js(v: &JsValue, op: &str, what: &str) -> JsResult<Self> {
        fitting(v, op, what)
    }
}

impl FromJs for u32 {
    fn from_js(v: &JsValue, op: &str, what: &str) -> JsResult<Self> {
        let n = i64::from_js(v, op, what)?;
        if n < 0 {
            return Err(fail(op, format!("{what} must not be negative, got {n}")));
        }
        fitting(v, op, what)
    }
}

impl FromJs for usize {
    fn from_js(v: &JsValue, op: &str, what: &str) -> JsResult<Self> {
        let n = i64::from_js(v, op, what)?;
        if n < 0 {
            return Err(fail(op, format!("{what} must not be negative, got {n}")));
        }
        fitting(v, op, what)
    }
}

/// The longest list of integers taken (shapes, axes, sizes, pads are far shorter).
const MAX_LIST: f64 = 65536.0;

/// A list: an array, a typed array, or one value; elements are named `what[i]`.
fn list<T: FromJs>(v: &JsValue, op: &str, what: &str) -> JsResult<Vec<T>> {
    if v.as_f64().is_some() {
        return Ok(vec![T::from_js(v, op, what)?]);
    }
    if !is_array(v) && !js_sys::ArrayBuffer::is_view(v) {
        return Err(fail(
            op,
            format!("{what} must be an array of integers, got {}", describe(v)),
        ));
    }
    let n = get(v, "length").as_f64().unwrap_or(0.0);
    if n > MAX_LIST {
        return Err(fail(
            op,
            format!("{what} has {n} entries, more than {MAX_LIST}"),
        ));
    }
    elements(v)
        .enumerate()
        .map(|(i, x)| T::from_js(&x, op, &format!("{what}[{i}]")))
        .collect()
}

impl FromJs for Vec<i64> {
    fn from_js(v: &JsValue, op: &str, what: &str) -> JsResult<Self> {
        list(v, op, what)
    }
}

impl FromJs for Vec<f64> {
    fn from_js(v: &JsValue, op: &str, what: &str) -> JsResult<Self> {
        list(v, op, what)
    }
}

impl FromJs for Vec<isize> {
    fn from_js(v: &JsValue, op: &str, what: &str) -> JsResult<Self> {
        list(v, op, what)
    }
}

/// Sizes (a shape, split sizes, repeat counts).
impl FromJs for Vec<usize> {
    fn from_js(v: &JsValue, op: &str, what: &str) -> JsResult<Self> {
        list::<i64>(v, op, what)?
            .into_iter()
            .map(|d| {
                usize::try_from(d).map_err(|_| {
                    if d < 0 {
                        fail(op, format!("{what} has a negative size {d}"))
                    } else {
                        fail(op, format!("{what} has a size {d} that is out of range"))
                    }
                })
            })
            .collect()
    }
}

/// A number or a pair of numbers (kernel sizes, strides, paddings).
impl FromJs for (usize, usize) {
    fn from_js(v: &JsValue, op: &str, what: &str) -> JsResult<Self> {
        let xs: Vec<i64> = list(v, op, what)?;
        let ok = |x: i64| {
            usize::try_from(x).map_err(|_| {
                if x < 0 {
                    fail(op, format!("{what} is negative"))
                } else {
                    fail(op, format!("{what} is out of range, got {x}"))
                }
            })
        };
        match xs.as_slice() {
            [a] => Ok((ok(*a)?, ok(*a)?)),
            [a, b] => Ok((ok(*a)?, ok(*b)?)),
            _ => Err(fail(
                op,
                format!("{what} must be a number or two numbers, got {xs:?}"),
            )),
        }
    }
}

/// One `[a, b]` pair per axis.
impl FromJs for Vec<(usize, usize)> {
    fn from_js(v: &JsValue, op: &str, what: &str) -> JsResult<Self> {
        if !is_array(v) {
            return Err(fail(
                op,
                format!(
                    "{what} must be an array of [a, b] pairs, got {}",
                    describe(v)
                ),
            ));
        }
        elements(v)
            .enumerate()
            .map(|(i, p)| {
                let what = format!("{what}[{i}]");
                let xs: Vec<i64> = list(&p, op, &what)?;
                match xs.as_slice() {
                    [a, b] => match (usize::try_from(*a), usize::try_from(*b)) {
                        (Ok(a), Ok(b)) => Ok((a, b)),
                        _ => Err(fail(
                            op,
                            format!("{what} must be a pair of non-negative integers, got {xs:?}"),
                        )),
                    },
                    _ => Err(fail(
                        op,
                        format!("{what} must be a pair of non-negative integers, got {xs:?}"),
                    )),
                }
            })
            .collect()
    }
}

impl FromJs for String {
    fn from_js(v: &JsValue, op: &str, what: &str) -> JsResult<Self> {
        v.as_string()
            .ok_or_else(|| fail(op, format!("{what} must be a string, got {}", describe(v))))
    }
}

// ------------------------------------------------------------------------------ indices

/// One index of `get`/`set`: a number, `null` (a new axis), `"..."`, a slice string
/// (`"1:-1"`, `"::-1"`) or object (`{ start, stop, step }`), an integer Tensor or an array of
/// integers.
fn index_entry(v: &JsValue, op: &str, what: &str) -> JsResult<Index> {
    if absent(v) {
        return Ok(Index::NewAxis);
    }
    if v.as_f64().is_some() {
        return Ok(Index::Int(arg(v, op, what)?));
    }
    if let Some(s) = v.as_string() {
        return s
            .parse::<Index>()
            .map_err(|e| fail(op, format!("{what}: {}", e.msg)));
    }
    if is_array(v) || js_sys::ArrayBuffer::is_view(v) {
        return Ok(Index::List(list(v, op, what)?));
    }
    match tensor_ref(v) {
        TensorRef::Live(t) => return Ok(Index::Tensor(t)),
        TensorRef::Disposed => return Err(fail(op, format!("{what} is a disposed Tensor"))),
        TensorRef::NotATensor => {}
    }
    if v.is_object() {
        let o = Opts::new(v, op)?;
        return Ok(Index::slice(
            o.get("start")?,
            o.get("stop")?,
            o.or("step", 1)?,
        ));
    }
    Err(fail(
        op,
        format!(
            "{what} must be a number, null, \"...\", a slice such as \"1:-1\", a Tensor or an array of integers, got {}",
            describe(v)
        ),
    ))
}

/// An index: one entry, or an array of entries (one per axis; an array inside it is a list of
/// integer indices).
impl FromJs for Vec<Index> {
    fn from_js(v: &JsValue, op: &str, what: &str) -> JsResult<Self> {
        if !is_array(v) {
            return Ok(vec![index_entry(v, op, what)?]);
        }
        if get(v, "length").as_f64().unwrap_or(0.0) > MAX_LIST {
            return Err(fail(op, format!("{what} has more than {MAX_LIST} entries")));
        }
        elements(v)
            .enumerate()
            .map(|(i, x)| index_entry(&x, op, &format!("{what}[{i}]")))
            .collect()
    }
}

// ------------------------------------------------------------------------------ named values

/// Axes of a reduction: a number or an array (all axes is `Option<Axes>` absent).
impl FromJs for Axes {
    fn from_js(v: &JsValue, op: &str, what: &str) -> JsResult<Self> {
        Ok(Axes::Some(arg(v, op, what)?))
    }
}

impl FromJs for DType {
    fn from_js(v: &JsValue, op: &str, what: &str) -> JsResult<Self> {
        if absent(v) {
            return Err(fail(op, format!("a {what} is required, e.g. \"float32\"")));
        }
        let s = v.as_string().ok_or_else(|| {
            fail(
                op,
                format!(
                    "{what} must be a string such as \"float32\", got {}",
                    describe(v)
                ),
            )
        })?;
        s.parse::<DType>().or_fail(op)
    }
}

/// The dtype's name in JavaScript.
pub(crate) fn js_dtype(dt: DType) -> &'static str {
    match dt {
        DType::F32 => "float32",
        DType::F16 => "float16",
        DType::BF16 => "bfloat16",
        DType::I32 => "int32",
        DType::U32 => "uint32",
        DType::U8 => "uint8",
        DType::Bool => "bool",
    }
}

impl FromJs for Reduction {
    fn from_js(v: &JsValue, op: &str, what: &str) -> JsResult<Self> {
        match v.as_string().as_deref() {
            Some("mean") => Ok(Reduction::Mean),
            Some("sum") => Ok(Reduction::Sum),
            Some("none") => Ok(Reduction::None),
            _ => Err(fail(
                op,
                format!(
                    "{what} must be \"mean\", \"sum\" or \"none\", got {}",
                    describe(v)
                ),
            )),
        }
    }
}

/// "webgpu", "wasm" (kernels compiled to WebAssembly) or "cpu" (the interpreter), numbered
/// like "cpu:1" for another instance ("cpu" is "cpu:0").
impl FromJs for Device {
    fn from_js(v: &JsValue, op: &str, what: &str) -> JsResult<Self> {
        let bad = || {
            fail(
                op,
                format!(
                    "{what} must be \"webgpu\", \"wasm\" or \"cpu\" (numbered like \"cpu:1\"), \
                     got {}",
                    describe(v)
                ),
            )
        };
        let s = v.as_string().ok_or_else(bad)?;
        let (name, index) = match s.split_once(':') {
            Some((n, i)) => (n, i.parse::<u8>().map_err(|_| bad())?),
            None => (s.as_str(), 0),
        };
        let d = match name {
            "cpu" => Device::Interp,
            #[cfg(feature = "wgpu")]
            "webgpu" => Device::Wgpu,
            #[cfg(feature = "wasm")]
            "wasm" => Device::Wasm,
            _ => return Err(bad()),
        };
        Ok(d.with_index(index))
    }
}

/// A list of devices (`shard`).
impl FromJs for Vec<Device> {
    fn from_js(v: &JsValue, op: &str, what: &str) -> JsResult<Self> {
        if !is_array(v) {
            return Err(fail(
                op,
                format!(
                    "{what} must be an array of device names, got {}",
                    describe(v)
                ),
            ));
        }
        if get(v, "length").as_f64().unwrap_or(0.0) > 256.0 {
            return Err(fail(op, format!("{what} lists more than 256 devices")));
        }
        elements(v)
            .enumerate()
            .map(|(i, x)| arg(&x, op, &format!("{what}[{i}]")))
            .collect()
    }
}

/// The device's name in JavaScript ("webgpu", "wasm", "cpu", "cpu:1").
pub(crate) fn device_name(d: Device) -> String {
    let name = match d.kind {
        #[cfg(feature = "wgpu")]
        crate::device::DeviceKind::Wgpu => "webgpu",
        #[cfg(feature = "wasm")]
        crate::device::DeviceKind::Wasm => "wasm",
        _ => "cpu",
    };
    match d.index {
        0 => name.to_string(),
        i => format!("{name}:{i}"),
    }
}

/// `{ stride, padding: number | [ph, pw] | "valid" | "same", dilation, groups }`.
impl FromJs for Conv2dOpts {
    fn from_js(v: &JsValue, op: &str, _what: &str) -> JsResult<Self> {
        let opts = Opts::new(v, op)?;
        let d = Conv2dOpts::default();
        let pad = opts.raw("padding");
        let padding = match pad.as_string().as_deref() {
            _ if absent(&pad) => Padding::Valid,
            Some("valid") => Padding::Valid,
            Some("same") => Padding::Same,
            Some(other) => {
                return Err(fail(
                    op,
                    format!(
                        "padding must be a number, a pair, \"valid\" or \"same\", got {other:?}"
                    ),
                ))
            }
            None => {
                let (a, b) = arg(&pad, op, "padding")?;
                Padding::Explicit(a, b)
            }
        };
        Ok(Conv2dOpts {
            stride: opts.or("stride", d.stride)?,
            padding,
            dilation: opts.or("dilation", d.dilation)?,
            groups: opts.or("groups", d.groups)?,
        })
    }
}

/// `{ ignoreIndex, labelSmoothing, reduction }`.
impl FromJs for CrossEntropyOpts {
    fn from_js(v: &JsValue, op: &str, _what: &str) -> JsResult<Self> {
        let opts = Opts::new(v, op)?;
        Ok(CrossEntropyOpts {
            ignore_index: opts.get("ignoreIndex")?,
            label_smoothing: opts.or("labelSmoothing", 0.0)?,
            reduction: opts.or("reduction", Reduction::Mean)?,
        })
    }
}

// ------------------------------------------------------------------------------ convolutions

/// One `[before, after]` pair per axis; negative pads crop.
impl FromJs for Vec<(isize, isize)> {
    fn from_js(v: &JsValue, op: &str, what: &str) -> JsResult<Self> {
        if !is_array(v) {
            return Err(fail(
                op,
                format!(
                    "{what} must be an array of [before, after] pairs, got {}",
                    describe(v)
                ),
            ));
        }
        elements(v)
            .enumerate()
            .map(|(i, p)| {
                let what = format!("{what}[{i}]");
                match list::<isize>(&p, op, &what)?.as_slice() {
                    [a, b] => Ok((*a, *b)),
                    xs => Err(fail(
                        op,
                        format!("{what} must be a pair of integers, got {xs:?}"),
                    )),
                }
            })
            .collect()
    }
}

/// A number (the fill value) or a mode name.
impl FromJs for PadMode {
    fn from_js(v: &JsValue, op: &str, what: &str) -> JsResult<Self> {
        if let Some(x) = v.as_f64() {
            return Ok(PadMode::Constant(x));
        }
        match v.as_string() {
            Some(s) => s.parse().or_fail(op),
            None => Err(fail(
                op,
                format!(
                    "{what} must be a number or \"constant\", \"reflect\", \"replicate\", \
                     \"circular\", got {}",
                    describe(v)
                ),
            )),
        }
    }
}

impl FromJs for Interpolation {
    fn from_js(v: &JsValue, op: &str, what: &str) -> JsResult<Self> {
        match v.as_string() {
            Some(s) => s.parse().or_fail(op),
            None => Err(fail(
                op,
                format!(
                    "{what} must be \"linear\", \"nearest\" or \"nearest-exact\", got {}",
                    describe(v)
                ),
            )),
        }
    }
}

/// `{ padding: number | [ph, pw], dilation, ceilMode, countIncludePad }` (the stride is an
/// argument of its own).
impl FromJs for Pool2dOpts {
    fn from_js(v: &JsValue, op: &str, _what: &str) -> JsResult<Self> {
        let opts = Opts::new(v, op)?;
        let d = Pool2dOpts::default();
        Ok(Pool2dOpts {
            stride: None,
            padding: opts.or("padding", d.padding)?,
            dilation: opts.or("dilation", d.dilation)?,
            ceil_mode: opts.or("ceilMode", d.ceil_mode)?,
            count_include_pad: opts.or("countIncludePad", d.count_include_pad)?,
        })
    }
}

/// `{ stride, padding: number | "valid" | "same", dilation, groups }`.
impl FromJs for Conv1dOpts {
    fn from_js(v: &JsValue, op: &str, _what: &str) -> JsResult<Self> {
        let opts = Opts::new(v, op)?;
        let d = Conv1dOpts::default();
        let pad = opts.raw("padding");
        let padding = match pad.as_string().as_deref() {
            _ if absent(&pad) => Padding1d::Valid,
            Some("valid") => Padding1d::Valid,
            Some("same") => Padding1d::Same,
            Some(other) => {
                return Err(fail(
                    op,
                    format!("padding must be a number, \"valid\" or \"same\", got {other:?}"),
                ))
            }
            None => Padding1d::Explicit(arg(&pad, op, "padding")?),
        };
        Ok(Conv1dOpts {
            stride: opts.or("stride", d.stride)?,
            padding,
            dilation: opts.or("dilation", d.dilation)?,
            groups: opts.or("groups", d.groups)?,
        })
    }
}

/// `{ stride, padding, outputPadding, dilation, groups }` (numbers or pairs).
impl FromJs for ConvTranspose2dOpts {
    fn from_js(v: &JsValue, op: &str, _what: &str) -> JsResult<Self> {
        let opts = Opts::new(v, op)?;
        let d = ConvTranspose2dOpts::default();
        Ok(ConvTranspose2dOpts {
            stride: opts.or("stride", d.stride)?,
            padding: opts.or("padding", d.padding)?,
            output_padding: opts.or("outputPadding", d.output_padding)?,
            dilation: opts.or("dilation", d.dilation)?,
            groups: opts.or("groups", d.groups)?,
        })
    }
}

/// `{ stride, padding, outputPadding, dilation, groups }` (numbers).
impl FromJs for ConvTranspose1dOpts {
    fn from_js(v: &JsValue, op: &str, _what: &str) -> JsResult<Self> {
        let opts = Opts::new(v, op)?;
        let d = ConvTranspose1dOpts::default();
        Ok(ConvTranspose1dOpts {
            stride: opts.or("stride", d.stride)?,
            padding: opts.or("padding", d.padding)?,
            output_padding: opts.or("outputPadding", d.output_padding)?,
            dilation: opts.or("dilation", d.dilation)?,
            groups: opts.or("groups", d.groups)?,
        })
    }
}

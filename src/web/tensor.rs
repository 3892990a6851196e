//! The JS `Tensor` class: its ops, one method per row of the op table (`crate::for_each_op!`,
//! src/tensor/table.rs), and by hand what is not an op: the constructor and creation functions,
//! properties, reading values back, autograd.

use super::args::{arg, describe, device_name, elements, is_array, js_dtype, FromJs};
use super::{fail, lookup, register, release, tensor_array, JsResult, JsTensor, OrFail};
use crate::{
    Axes, Context, Conv1dOpts, Conv2dOpts, ConvTranspose1dOpts, ConvTranspose2dOpts,
    CrossEntropyOpts, DType, Device, Index, Interpolation, Operand, PadMode, Pool2dOpts, Reduction,
    Tensor,
};
use js_sys::{Array, Reflect};
use wasm_bindgen::prelude::*;

/// How errors name an argument: its `"what"` in the table, else its name.
macro_rules! what {
    ($p:ident) => {
        stringify!($p)
    };
    ($p:ident $what:literal) => {
        $what
    };
}

/// An optional argument: `undefined` (or `null`) is the default.
fn opt_arg<T: FromJs>(v: Option<JsValue>, op: &str, what: &str) -> JsResult<Option<T>> {
    arg(&v.unwrap_or(JsValue::UNDEFINED), op, what)
}

/// One row of the op table as a method (or a static function) of the JS `Tensor` class: each
/// argument is a `JsValue` typed for TypeScript by the row, converted by `FromJs`.
macro_rules! js_op {
    ($(#[$doc:meta])* static $js:literal $rs:ident (
        $($p:ident $(@ $key:literal)? $($what:literal)? : $ty:ty as $ts:literal),*
        $(; $($o:ident $(@ $okey:literal)? $($owhat:literal)? : $oty:ty as $ots:literal = $def:expr),*)?
    ) => $call:expr) => {
        #[wasm_bindgen(js_class = Tensor)]
        impl JsTensor {
            $(#[$doc])*
            #[wasm_bindgen(js_name = $js)]
            pub fn $rs(
                $(#[wasm_bindgen(unchecked_param_type = $ts)] $p: JsValue,)*
                $($(#[wasm_bindgen(unchecked_optional_param_type = $ots)] $o: Option<JsValue>,)*)?
            ) -> JsResult<JsTensor> {
                const OP: &str = $js;
                $(let $p: $ty = arg(&$p, OP, what!($p $($what)?))?;)*
                $($(let $o: $oty = match opt_arg($o, OP, what!($o $($owhat)?))? {
                    Some(v) => v,
                    None => $def,
                };)*)?
                let out: crate::Result<_> = $call;
                Ok(register(out.or_fail(OP)?))
            }
        }
    };
    ($(#[$doc:meta])* $js:literal $rs:ident $args:tt -> $ret:literal => $call:expr) => {
        js_op!(@method [$(#[$doc])*] [$js, unchecked_return_type = $ret] $rs $args
            Array tensor_array => $call);
    };
    ($(#[$doc:meta])* $js:literal $rs:ident $args:tt => $call:expr) => {
        js_op!(@method [$(#[$doc])*] [$js] $rs $args JsTensor register => $call);
    };
    (@method [$(#[$doc:meta])*] [$($name:tt)*] $rs:ident ($x:ident
        $(, $p:ident $(@ $key:literal)? $($what:literal)? : $ty:ty as $ts:literal)*
        $(; $($o:ident $(@ $okey:literal)? $($owhat:literal)? : $oty:ty as $ots:literal = $def:expr),*)?
    ) $out:ident $wrap:ident => $call:expr) => {
        #[wasm_bindgen(js_class = Tensor)]
        impl JsTensor {
            $(#[$doc])*
            #[wasm_bindgen(js_name = $($name)*)]
            pub fn $rs(
                &self,
                $(#[wasm_bindgen(unchecked_param_type = $ts)] $p: JsValue,)*
                $($(#[wasm_bindgen(unchecked_optional_param_type = $ots)] $o: Option<JsValue>,)*)?
            ) -> JsResult<$out> {
                const OP: &str = js_op!(@first $($name)*);
                let $x = self.this(OP)?;
                $(let $p: $ty = arg(&$p, OP, what!($p $($what)?))?;)*
                $($(let $o: $oty = match opt_arg($o, OP, what!($o $($owhat)?))? {
                    Some(v) => v,
                    None => $def,
                };)*)?
                let out: crate::Result<_> = $call;
                Ok($wrap(out.or_fail(OP)?))
            }
        }
    };
    (@first $js:literal $($rest:tt)*) => {
        $js
    };
}

crate::for_each_op!(js_op);

#[wasm_bindgen(js_class = Tensor)]
impl JsTensor {
    fn this(&self, op: &str) -> JsResult<Tensor> {
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
        const OP: &str = "Tensor";
        let shape: Option<Vec<usize>> = opt_arg(shape, OP, "shape")?;
        let dtype: Option<DType> = opt_arg(dtype, OP, "dtype")?;
        Ok(register(tensor_from_js(&data, shape, dtype)?))
    }

    /// The handle's id (how the engine recognises its tensors among JS values).
    #[wasm_bindgen(getter, js_name = "_wgradId")]
    pub fn wgrad_id(&self) -> u32 {
        self.id
    }

    #[wasm_bindgen(getter, unchecked_return_type = "number[]")]
    /// The size of each axis (`[]` for a scalar).
    pub fn shape(&self) -> JsResult<JsValue> {
        let s = self.this("shape")?.shape();
        Ok(s.into_iter()
            .map(|d| JsValue::from(d as f64))
            .collect::<Array>()
            .into())
    }

    #[wasm_bindgen(getter, unchecked_return_type = "DType")]
    /// The element type: "float32", "float16", "bfloat16", "int32", "uint32", "uint8" or "bool".
    pub fn dtype(&self) -> JsResult<String> {
        Ok(js_dtype(self.this("dtype")?.dtype()).into())
    }

    /// "webgpu", "wasm" or "cpu" (the interpreter), "cpu:1" for another instance; the first device of
    /// a sharded tensor (see `devices`).
    #[wasm_bindgen(getter)]
    pub fn device(&self) -> JsResult<String> {
        Ok(device_name(self.this("device")?.device()))
    }

    #[wasm_bindgen(getter)]
    /// The number of elements.
    pub fn numel(&self) -> JsResult<f64> {
        Ok(self.this("numel")?.numel() as f64)
    }

    #[wasm_bindgen(getter)]
    /// The number of axes.
    pub fn ndim(&self) -> JsResult<u32> {
        Ok(self.this("ndim")?.ndim() as u32)
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
    /// `Tensor(shape=[…], dtype=…, device=…)`, or a note that it was disposed (the values are not
    /// read: that would need an `await`).
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
        let t = self.this("realize")?;
        t.realize().or_fail("realize")?;
        Ok(register(t))
    }

    /// `realize`, awaiting: on WebGPU the kernels it needs compile first, all at once on the
    /// browser's threads, while the page waits without blocking. Resolves to this tensor.
    #[wasm_bindgen(js_name = realizeAsync, unchecked_return_type = "Promise<Tensor>")]
    pub fn realize_async(&self) -> JsResult<js_sys::Promise> {
        let t = self.this("realizeAsync")?;
        Ok(wasm_bindgen_futures::future_to_promise(async move {
            t.realize_async().await.or_fail("realizeAsync")?;
            Ok(register(t).into())
        }))
    }

    /// A copy on another device ("webgpu", "wasm" or "cpu"), once the values are read back.
    #[wasm_bindgen(unchecked_return_type = "Promise<Tensor>")]
    pub fn to(
        &self,
        #[wasm_bindgen(unchecked_param_type = "\"webgpu\" | \"cpu\"")] device: JsValue,
    ) -> JsResult<js_sys::Promise> {
        const OP: &str = "to";
        let t = self.this(OP)?;
        let d: Device = arg(&device, OP, "device")?;
        crate::realize::check_readback().or_fail(OP)?;
        Ok(wasm_bindgen_futures::future_to_promise(async move {
            if t.devices() == [d] {
                return Ok(register(t).into());
            }
            d.available().map_err(|e| fail(OP, e))?;
            let bytes = t.bytes_async().await.or_fail(OP)?;
            let (dt, shape) = (t.dtype(), t.shape());
            let moved = Context::new()
                .dev(d)
                .run(|| Tensor::from_raw(&bytes, dt, &shape))
                .or_fail(OP)?;
            Ok(register(moved).into())
        }))
    }

    /// This tensor on several devices ("cpu:0", "cpu:1", "webgpu"): split along `axis` into
    /// equal parts, part `i` on `devices[i]`, or without an axis a whole copy on each. Ops run
    /// on every device, reductions over the split axis combine the parts, `data()` gathers.
    pub fn shard(
        &self,
        #[wasm_bindgen(unchecked_param_type = "string[]")] devices: JsValue,
        #[wasm_bindgen(unchecked_param_type = "number | undefined")] axis: JsValue,
    ) -> JsResult<JsTensor> {
        const OP: &str = "shard";
        let t = self.this(OP)?;
        let devices: Vec<Device> = arg(&devices, OP, "devices")?;
        let axis: Option<isize> = arg(&axis, OP, "axis")?;
        Ok(register(t.shard(&devices, axis).or_fail(OP)?))
    }

    /// `shard` in place: this handle (the same object) moves to the devices.
    #[wasm_bindgen(js_name = "shard_")]
    pub fn shard_in_place(
        &self,
        #[wasm_bindgen(unchecked_param_type = "string[]")] devices: JsValue,
        #[wasm_bindgen(unchecked_param_type = "number | undefined")] axis: JsValue,
    ) -> JsResult<()> {
        const OP: &str = "shard_";
        let t = self.this(OP)?;
        let devices: Vec<Device> = arg(&devices, OP, "devices")?;
        let axis: Option<isize> = arg(&axis, OP, "axis")?;
        t.shard_(&devices, axis).or_fail(OP)?;
        Ok(())
    }

    /// Every device this tensor lives on, in shard order (one unless it was sharded).
    #[wasm_bindgen(getter, unchecked_return_type = "string[]")]
    pub fn devices(&self) -> JsResult<JsValue> {
        Ok(self
            .this("devices")?
            .devices()
            .into_iter()
            .map(|d| JsValue::from(device_name(d)))
            .collect::<Array>()
            .into())
    }

    /// Realize several tensors in one schedule (e.g. the loss with `opt.scheduleStep()`).
    #[wasm_bindgen(js_name = realizeAll)]
    pub fn realize_all(
        #[wasm_bindgen(unchecked_param_type = "Tensor[]")] tensors: JsValue,
    ) -> JsResult<()> {
        let ts: Vec<Tensor> = arg(&tensors, "realizeAll", "tensors")?;
        Tensor::realize_all(&ts.iter().collect::<Vec<_>>()).or_fail("realizeAll")
    }

    /// The values, as a typed array (awaits the GPU).
    #[wasm_bindgen(
        unchecked_return_type = "Promise<Float32Array | Int32Array | Uint32Array | Uint8Array>"
    )]
    pub fn data(&self) -> JsResult<js_sys::Promise> {
        let t = self.this("data")?;
        crate::realize::check_readback().or_fail("data")?;
        Ok(wasm_bindgen_futures::future_to_promise(async move {
            data_of(t).await.map_err(JsValue::from)
        }))
    }

    /// The single value of a one-element tensor (a boolean for "bool").
    #[wasm_bindgen(unchecked_return_type = "Promise<number | boolean>")]
    pub fn item(&self) -> JsResult<js_sys::Promise> {
        let t = self.this("item")?;
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

    /// Gradients into `.grad` of every tensor that requires one; from a scalar, or from any
    /// shape given `gradient` (the gradient flowing into this tensor).
    pub fn backward(
        &self,
        #[wasm_bindgen(unchecked_optional_param_type = "Tensor | null")] gradient: Option<JsValue>,
    ) -> JsResult<()> {
        let t = self.this("backward")?;
        match opt_arg::<Tensor>(gradient, "backward", "gradient")? {
            Some(g) => t.backward_with(&g),
            None => t.backward(),
        }
        .or_fail("backward")?;
        Ok(())
    }

    #[wasm_bindgen(getter)]
    /// The accumulated gradient after `backward()` (null before, or without `requiresGrad`).
    pub fn grad(&self) -> JsResult<Option<JsTensor>> {
        Ok(self.this("grad")?.grad().map(register))
    }

    #[wasm_bindgen(getter, js_name = requiresGrad)]
    /// Whether gradients are tracked for this tensor (parameters of layers are).
    pub fn requires_grad(&self) -> JsResult<bool> {
        Ok(self.this("requiresGrad")?.requires_grad())
    }

    /// `true` or `false` only (a string or a number is an error, not coerced).
    #[wasm_bindgen(setter, js_name = requiresGrad)]
    pub fn set_requires_grad(
        &self,
        #[wasm_bindgen(unchecked_param_type = "boolean")] on: JsValue,
    ) -> JsResult<()> {
        const OP: &str = "requiresGrad";
        let t = self.this(OP)?;
        let Some(on) = on.as_bool() else {
            return Err(fail(
                OP,
                format!("expected true or false, got {}", describe(&on)),
            ));
        };
        t.set_requires_grad(on);
        Ok(())
    }

    /// Set (or clear, with `null`) the gradient.
    #[wasm_bindgen(js_name = setGrad)]
    pub fn set_grad(
        &self,
        #[wasm_bindgen(unchecked_param_type = "Tensor | null")] g: JsValue,
    ) -> JsResult<()> {
        let t = self.this("setGrad")?;
        t.set_grad(arg(&g, "setGrad", "the gradient")?);
        Ok(())
    }

    /// Axes 0 and 1 swapped (the transpose of a matrix), as tinygrad's `T`.
    #[wasm_bindgen(getter, js_name = T)]
    pub fn t(&self) -> JsResult<JsTensor> {
        Ok(register(self.this("T")?.T().or_fail("T")?))
    }

    /// The gradients of this tensor (a scalar, or any shape given `gradient`) with respect to
    /// `targets`, without touching `.grad` (tinygrad's `gradient`).
    #[wasm_bindgen(unchecked_return_type = "Tensor[]")]
    pub fn gradient(
        &self,
        #[wasm_bindgen(unchecked_param_type = "Tensor[]")] targets: JsValue,
        #[wasm_bindgen(unchecked_optional_param_type = "Tensor | null")] gradient: Option<JsValue>,
    ) -> JsResult<Array> {
        const OP: &str = "gradient";
        let t = self.this(OP)?;
        let targets: Vec<Tensor> = arg(&targets, OP, "targets")?;
        let seed: Option<Tensor> = opt_arg(gradient, OP, "gradient")?;
        let gs = t
            .gradient(&targets.iter().collect::<Vec<_>>(), seed.as_ref())
            .or_fail(OP)?;
        Ok(tensor_array(gs))
    }

    // -------------------------------------------------------------- sizes

    /// The size of `axis`, or the shape without one.
    #[wasm_bindgen(unchecked_return_type = "number | number[]")]
    pub fn size(
        &self,
        #[wasm_bindgen(unchecked_optional_param_type = "number | null")] axis: Option<JsValue>,
    ) -> JsResult<JsValue> {
        let t = self.this("size")?;
        let axis: Option<isize> = opt_arg(axis, "size", "axis")?;
        Ok(match axis {
            Some(a) => JsValue::from(t.size(a).or_fail("size")? as f64),
            None => self.shape()?,
        })
    }

    /// Bytes per element.
    #[wasm_bindgen(js_name = elementSize)]
    pub fn element_size(&self) -> JsResult<u32> {
        Ok(self.this("elementSize")?.element_size() as u32)
    }

    /// Bytes of the whole tensor.
    pub fn nbytes(&self) -> JsResult<f64> {
        Ok(self.this("nbytes")?.nbytes() as f64)
    }

    #[wasm_bindgen(js_name = isFloatingPoint)]
    /// Whether the dtype is a float ("float32", "float16", "bfloat16").
    pub fn is_floating_point(&self) -> JsResult<bool> {
        Ok(self.this("isFloatingPoint")?.is_floating_point())
    }

    // -------------------------------------------------------------- data-dependent shapes

    /// The elements where `mask` holds, as a 1-D tensor: with `size`, the first `size` of them
    /// then `fillValue` (lazy); without, as many as there are (their count is read back first,
    /// so it resolves asynchronously). Always a Promise.
    #[wasm_bindgen(js_name = maskedSelect, unchecked_return_type = "Promise<Tensor>")]
    pub fn masked_select(
        &self,
        #[wasm_bindgen(unchecked_param_type = "Tensor")] mask: JsValue,
        #[wasm_bindgen(unchecked_optional_param_type = "number | null")] size: Option<JsValue>,
        #[wasm_bindgen(unchecked_optional_param_type = "number")] fill_value: Option<JsValue>,
    ) -> JsResult<js_sys::Promise> {
        const OP: &str = "maskedSelect";
        let t = self.this(OP)?;
        let mask: Tensor = arg(&mask, OP, "mask")?;
        let size: Option<usize> = opt_arg(size, OP, "size")?;
        let fill: f64 = opt_arg(fill_value, OP, "fillValue")?.unwrap_or(0.0);
        if let Some(n) = size {
            let out = t.masked_select_sized(&mask, n, fill).or_fail(OP)?;
            return Ok(js_sys::Promise::resolve(&JsValue::from(register(out))));
        }
        crate::realize::check_readback().or_fail(OP)?;
        Ok(wasm_bindgen_futures::future_to_promise(async move {
            let out = t.masked_select_async(&mask).await.or_fail(OP)?;
            Ok(register(out).into())
        }))
    }

    /// The int32 coordinates `[count, ndim]` of the non-zero elements (with `size`: the first
    /// `size`, then rows of `fillValue`). Always a Promise.
    #[wasm_bindgen(unchecked_return_type = "Promise<Tensor>")]
    pub fn nonzero(
        &self,
        #[wasm_bindgen(unchecked_optional_param_type = "number | null")] size: Option<JsValue>,
        #[wasm_bindgen(unchecked_optional_param_type = "number")] fill_value: Option<JsValue>,
    ) -> JsResult<js_sys::Promise> {
        const OP: &str = "nonzero";
        let t = self.this(OP)?;
        let size: Option<usize> = opt_arg(size, OP, "size")?;
        let fill: i64 = opt_arg(fill_value, OP, "fillValue")?.unwrap_or(0);
        if let Some(n) = size {
            let out = t.nonzero_sized(n, fill).or_fail(OP)?;
            return Ok(js_sys::Promise::resolve(&JsValue::from(register(out))));
        }
        crate::realize::check_readback().or_fail(OP)?;
        Ok(wasm_bindgen_futures::future_to_promise(async move {
            let out = t.nonzero_async().await.or_fail(OP)?;
            Ok(register(out).into())
        }))
    }

    /// The values as nested arrays (numbers, or booleans for "bool"), like tinygrad's `tolist`.
    #[wasm_bindgen(unchecked_return_type = "Promise<any>")]
    pub fn tolist(&self) -> JsResult<js_sys::Promise> {
        let t = self.this("tolist")?;
        crate::realize::check_readback().or_fail("tolist")?;
        Ok(wasm_bindgen_futures::future_to_promise(async move {
            let shape = t.shape();
            let dt = t.dtype();
            let v = t.to_f32_vec_async().await.or_fail("tolist")?;
            fn nest(v: &[f32], shape: &[usize], dt: DType) -> JsValue {
                match shape.split_first() {
                    None if dt == DType::Bool => JsValue::from(v[0] != 0.0),
                    None => JsValue::from(v[0]),
                    Some((&n, rest)) => {
                        let inner: usize = rest.iter().product();
                        (0..n)
                            .map(|i| nest(&v[i * inner..(i + 1) * inner], rest, dt))
                            .collect::<Array>()
                            .into()
                    }
                }
            }
            Ok(nest(&v, &shape, dt))
        }))
    }

    /// `to` in place: this handle (the same object) moves to `device`.
    #[wasm_bindgen(js_name = "to_")]
    pub fn to_in_place(
        &self,
        #[wasm_bindgen(unchecked_param_type = "string")] device: JsValue,
    ) -> JsResult<()> {
        let t = self.this("to_")?;
        let d: Device = arg(&device, "to_", "device")?;
        t.to_(d).or_fail("to_")?;
        Ok(())
    }

    /// This tensor placed like `other` (on its devices, split the same way).
    #[wasm_bindgen(js_name = shardLike)]
    pub fn shard_like(
        &self,
        #[wasm_bindgen(unchecked_param_type = "Tensor")] other: JsValue,
    ) -> JsResult<JsTensor> {
        let t = self.this("shardLike")?;
        let o: Tensor = arg(&other, "shardLike", "other")?;
        Ok(register(t.shard_like(&o).or_fail("shardLike")?))
    }

    /// Uniform in [0, 1) shaped like this tensor.
    #[wasm_bindgen(js_name = randLike)]
    pub fn rand_like(&self) -> JsResult<JsTensor> {
        Ok(register(
            self.this("randLike")?.rand_like().or_fail("randLike")?,
        ))
    }

    /// Standard normal shaped like this tensor.
    #[wasm_bindgen(js_name = randnLike)]
    pub fn randn_like(&self) -> JsResult<JsTensor> {
        Ok(register(
            self.this("randnLike")?.randn_like().or_fail("randnLike")?,
        ))
    }

    /// A tensor shaped like this one whose contents are unspecified (allocated, not written).
    #[wasm_bindgen(js_name = emptyLike)]
    pub fn empty_like(&self) -> JsResult<JsTensor> {
        Ok(register(
            self.this("emptyLike")?.empty_like().or_fail("emptyLike")?,
        ))
    }

    // -------------------------------------------------------------- creation

    /// Zeros of `shape` (the default float, "float32" or with `half` "float16", unless `dtype` says otherwise).
    pub fn zeros(
        #[wasm_bindgen(unchecked_param_type = "number[]")] shape: JsValue,
        #[wasm_bindgen(unchecked_optional_param_type = "DType")] dtype: Option<JsValue>,
    ) -> JsResult<JsTensor> {
        full("zeros", &shape, 0.0, dtype)
    }

    /// Ones of `shape` (the default float unless `dtype` says otherwise).
    pub fn ones(
        #[wasm_bindgen(unchecked_param_type = "number[]")] shape: JsValue,
        #[wasm_bindgen(unchecked_optional_param_type = "DType")] dtype: Option<JsValue>,
    ) -> JsResult<JsTensor> {
        full("ones", &shape, 1.0, dtype)
    }

    /// `value` in every element of `shape` (the default float unless `dtype` says otherwise; `true` and
    /// `false` are 1 and 0).
    pub fn full(
        #[wasm_bindgen(unchecked_param_type = "number[]")] shape: JsValue,
        #[wasm_bindgen(unchecked_param_type = "number | boolean")] value: JsValue,
        #[wasm_bindgen(unchecked_optional_param_type = "DType")] dtype: Option<JsValue>,
    ) -> JsResult<JsTensor> {
        let v = match value.as_bool() {
            Some(b) => b as u8 as f64,
            None => arg(&value, "full", "value")?,
        };
        full("full", &shape, v, dtype)
    }

    /// Uniform in [0, 1).
    pub fn rand(
        #[wasm_bindgen(unchecked_param_type = "number[]")] shape: JsValue,
    ) -> JsResult<JsTensor> {
        let s: Vec<usize> = arg(&shape, "rand", "shape")?;
        Ok(register(Tensor::rand(&s).or_fail("rand")?))
    }

    /// Normal with mean `mean` (default 0) and standard deviation `std` (default 1).
    pub fn normal(
        #[wasm_bindgen(unchecked_param_type = "number[]")] shape: JsValue,
        #[wasm_bindgen(unchecked_optional_param_type = "number")] mean: Option<JsValue>,
        #[wasm_bindgen(unchecked_optional_param_type = "number")] std: Option<JsValue>,
    ) -> JsResult<JsTensor> {
        let s: Vec<usize> = arg(&shape, "normal", "shape")?;
        let mean: f64 = opt_arg(mean, "normal", "mean")?.unwrap_or(0.0);
        let std: f64 = opt_arg(std, "normal", "std")?.unwrap_or(1.0);
        Ok(register(Tensor::normal(&s, mean, std).or_fail("normal")?))
    }

    /// A tensor whose contents are unspecified (allocated, not written).
    pub fn empty(
        #[wasm_bindgen(unchecked_param_type = "number[]")] shape: JsValue,
        #[wasm_bindgen(unchecked_optional_param_type = "DType")] dtype: Option<JsValue>,
    ) -> JsResult<JsTensor> {
        let s: Vec<usize> = arg(&shape, "empty", "shape")?;
        let dt: DType =
            opt_arg(dtype, "empty", "dtype")?.unwrap_or(crate::context::default_float());
        Ok(register(Tensor::empty(&s, dt).or_fail("empty")?))
    }

    /// Standard normal.
    pub fn randn(
        #[wasm_bindgen(unchecked_param_type = "number[]")] shape: JsValue,
    ) -> JsResult<JsTensor> {
        let s: Vec<usize> = arg(&shape, "randn", "shape")?;
        Ok(register(Tensor::randn(&s).or_fail("randn")?))
    }

    /// Integers in [low, high), int32.
    pub fn randint(
        #[wasm_bindgen(unchecked_param_type = "number[]")] shape: JsValue,
        #[wasm_bindgen(unchecked_param_type = "number")] low: JsValue,
        #[wasm_bindgen(unchecked_param_type = "number")] high: JsValue,
    ) -> JsResult<JsTensor> {
        const OP: &str = "randint";
        let s: Vec<usize> = arg(&shape, OP, "shape")?;
        let (lo, hi) = (arg(&low, OP, "low")?, arg(&high, OP, "high")?);
        Ok(register(Tensor::randint(&s, lo, hi).or_fail(OP)?))
    }

    /// Uniform in [low, high).
    pub fn uniform(
        #[wasm_bindgen(unchecked_param_type = "number[]")] shape: JsValue,
        #[wasm_bindgen(unchecked_optional_param_type = "number")] low: Option<JsValue>,
        #[wasm_bindgen(unchecked_optional_param_type = "number")] high: Option<JsValue>,
    ) -> JsResult<JsTensor> {
        const OP: &str = "uniform";
        let s: Vec<usize> = arg(&shape, OP, "shape")?;
        let lo = opt_arg(low, OP, "low")?.unwrap_or(0.0);
        let hi = opt_arg(high, OP, "high")?.unwrap_or(1.0);
        Ok(register(Tensor::uniform(&s, lo, hi).or_fail(OP)?))
    }

    /// `arange(stop)` or `arange(start, stop, step?, dtype?)`; int32 unless a value or the
    /// dtype says otherwise.
    pub fn arange(
        #[wasm_bindgen(unchecked_param_type = "number")] start: JsValue,
        #[wasm_bindgen(unchecked_optional_param_type = "number")] stop: Option<JsValue>,
        #[wasm_bindgen(unchecked_optional_param_type = "number")] step: Option<JsValue>,
        #[wasm_bindgen(unchecked_optional_param_type = "DType")] dtype: Option<JsValue>,
    ) -> JsResult<JsTensor> {
        const OP: &str = "arange";
        let (a, b) = match opt_arg(stop, OP, "stop")? {
            None => (0.0, arg(&start, OP, "stop")?),
            Some(stop) => (arg(&start, OP, "start")?, stop),
        };
        let s = opt_arg(step, OP, "step")?.unwrap_or(1.0);
        let all_int = [a, b, s].iter().all(|v| v.fract() == 0.0);
        let dt = opt_arg(dtype, OP, "dtype")?.unwrap_or(if all_int {
            DType::I32
        } else {
            crate::context::default_float()
        });
        Ok(register(Tensor::arange(a, b, s, dt).or_fail(OP)?))
    }

    /// The `n` by `n` identity matrix (the default float).
    pub fn eye(#[wasm_bindgen(unchecked_param_type = "number")] n: JsValue) -> JsResult<JsTensor> {
        let n = arg(&n, "eye", "n")?;
        Ok(register(Tensor::eye(n).or_fail("eye")?))
    }

    #[wasm_bindgen(js_name = manualSeed)]
    /// Seed the random number generator: the same seed gives the same `rand`, `randn`, `randint`,
    /// dropout masks and initial weights again.
    pub fn manual_seed(
        #[wasm_bindgen(unchecked_param_type = "number")] seed: JsValue,
    ) -> JsResult<()> {
        let seed: i64 = arg(&seed, "manualSeed", "seed")?;
        Tensor::manual_seed(seed as u64);
        Ok(())
    }
}

fn full(op: &str, shape: &JsValue, v: f64, dtype: Option<JsValue>) -> JsResult<JsTensor> {
    let s: Vec<usize> = arg(shape, op, "shape")?;
    let dt = opt_arg(dtype, op, "dtype")?.unwrap_or(crate::context::default_float());
    Ok(register(Tensor::full_dtype(&s, v, dt).or_fail(op)?))
}

// ------------------------------------------------------------------------------ data

/// How deeply data arrays may nest (far more dimensions than any tensor has).
const MAX_NESTING: usize = 64;

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
        if is_array(v) {
            let n = v.unchecked_ref::<Array>().length() as usize;
            if shape.len() == depth {
                shape.push(n);
            } else if shape.get(depth) != Some(&n) {
                return Err(fail(
                    op,
                    "nested arrays are ragged (rows of different lengths)",
                ));
            }
            if depth >= MAX_NESTING {
                return Err(fail(
                    op,
                    format!("data nests deeper than {MAX_NESTING} arrays"),
                ));
            }
            for x in elements(v) {
                walk(&x, depth + 1, shape, out, bools, op)?;
            }
            return Ok(());
        }
        if js_sys::ArrayBuffer::is_view(v) && !v.is_instance_of::<js_sys::DataView>() {
            let a: Array = elements(v).collect();
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
            DType::BF16 => b.extend(half::bf16::from_f32(v as f32).to_le_bytes()),
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

fn tensor_from_js(
    data: &JsValue,
    shape: Option<Vec<usize>>,
    dtype: Option<DType>,
) -> JsResult<Tensor> {
    const OP: &str = "Tensor";
    let (values, inferred, natural) = if let Some(natural) = typed_array_dtype(data) {
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
        (vals, vec![n], natural)
    } else if let Some(b) = data.as_bool() {
        (vec![b as u8 as f64], vec![], DType::Bool)
    } else if let Some(x) = data.as_f64() {
        (vec![x], vec![], DType::F32)
    } else if is_array(data) {
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
    let shape = shape.unwrap_or(inferred);
    let numel = shape.iter().try_fold(1usize, |n, &d| n.checked_mul(d));
    if numel != Some(values.len()) {
        return Err(fail(
            OP,
            format!(
                "shape {shape:?} holds {} values but the data has {}",
                numel.map_or("too many".to_string(), |n| n.to_string()),
                values.len()
            ),
        ));
    }
    let dt = dtype.unwrap_or(natural);
    Tensor::from_raw(&encode(&values, dt), dt, &shape).or_fail(OP)
}

/// The values of a tensor as the matching typed array (float16 and bfloat16 read as
/// Float32Array, bool as Uint8Array).
async fn data_of(t: Tensor) -> JsResult<JsValue> {
    let op = "data";
    Ok(match t.dtype() {
        DType::F32 | DType::F16 | DType::BF16 => {
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

//! The nn layers for JavaScript (`nn.Conv2d`, …): one macro makes each layer's class with
//! `forward`, its tensors as getters and `parameters()` (from `nn::state`, the same walk the
//! Rust optimizers use); the constructors, which read their options, are written out.

use super::args::{arg, Opts};
use super::{register, tensor_array, JsResult, JsTensor, OrFail};
use crate::{Conv2dOpts, Tensor};
use js_sys::Array;
use wasm_bindgen::prelude::*;

/// A layer tensor as a getter's value: a handle, or `undefined` for an absent optional one.
trait Handle<T> {
    fn handle(&self) -> T;
}

impl Handle<JsTensor> for Tensor {
    fn handle(&self) -> JsTensor {
        register(self.clone())
    }
}

impl Handle<Option<JsTensor>> for Option<Tensor> {
    fn handle(&self) -> Option<JsTensor> {
        self.as_ref().map(|t| register(t.clone()))
    }
}

/// The methods of layer `$name` (which wraps `crate::nn::$name`): `forward($x)` (`$what` in
/// errors), a getter per listed field, and `parameters()`.
macro_rules! js_layer {
    ($name:ident, forward($x:ident $what:literal) $(, $field:ident $(as $js:literal)? : $out:ty)* $(,)?) => {
        #[wasm_bindgen]
        impl $name {
            pub fn forward(
                &self,
                #[wasm_bindgen(unchecked_param_type = "Tensor")] $x: JsValue,
            ) -> JsResult<JsTensor> {
                const OP: &str = concat!(stringify!($name), ".forward");
                let $x: Tensor = arg(&$x, OP, $what)?;
                Ok(register(self.0.forward(&$x).or_fail(OP)?))
            }
            $(
                #[wasm_bindgen(getter $(, js_name = $js)?)]
                pub fn $field(&self) -> $out {
                    Handle::handle(&self.0.$field)
                }
            )*
            // The tensors that require gradients, in state-dict order.
            #[wasm_bindgen(unchecked_return_type = "Tensor[]")]
            pub fn parameters(&self) -> Array {
                tensor_array(crate::nn::state::get_parameters(&self.0))
            }
        }
    };
}

/// `new nn.Conv2d(inChannels, outChannels, kernel, { stride, padding, dilation, groups, bias })`.
#[wasm_bindgen]
pub struct Conv2d(crate::nn::Conv2d);
js_layer!(Conv2d, forward(x "the input"), weight: JsTensor, bias: Option<JsTensor>);

/// `new nn.Linear(inFeatures, outFeatures, bias = true)`.
#[wasm_bindgen]
pub struct Linear(crate::nn::Linear);
js_layer!(Linear, forward(x "the input"), weight: JsTensor, bias: Option<JsTensor>);

/// `new nn.BatchNorm(numFeatures, { eps, momentum, affine })` (2-D or 4-D input, channels on
/// axis 1). Running statistics update in training mode.
#[wasm_bindgen]
pub struct BatchNorm(crate::nn::BatchNorm);
js_layer!(
    BatchNorm,
    forward(x "the input"),
    weight: Option<JsTensor>,
    bias: Option<JsTensor>,
    running_mean as "runningMean": JsTensor,
    running_var as "runningVar": JsTensor,
    num_batches_tracked as "numBatchesTracked": JsTensor,
);

/// `new nn.LayerNorm(normalizedShape, { eps, affine })`.
#[wasm_bindgen]
pub struct LayerNorm(crate::nn::LayerNorm);
js_layer!(LayerNorm, forward(x "the input"), weight: Option<JsTensor>, bias: Option<JsTensor>);

/// `new nn.GroupNorm(numGroups, numChannels, { eps, affine })`.
#[wasm_bindgen]
pub struct GroupNorm(crate::nn::GroupNorm);
js_layer!(GroupNorm, forward(x "the input"));

/// `new nn.Embedding(vocabSize, embedSize)`.
#[wasm_bindgen]
pub struct Embedding(crate::nn::Embedding);
js_layer!(Embedding, forward(idx "the indices"), weight: JsTensor);

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
        const OP: &str = "Conv2d";
        let opts = opts.unwrap_or(JsValue::UNDEFINED);
        let cin = arg(&in_channels, OP, "inChannels")?;
        let cout = arg(&out_channels, OP, "outChannels")?;
        let k = arg(&kernel, OP, "kernel")?;
        let o: Conv2dOpts = arg(&opts, OP, "opts")?;
        let bias = Opts::new(&opts, OP)?.or("bias", true)?;
        Ok(Conv2d(
            crate::nn::Conv2d::with(cin, cout, k, o, bias).or_fail(OP)?,
        ))
    }
}

#[wasm_bindgen]
impl Linear {
    #[wasm_bindgen(constructor)]
    pub fn new(
        in_features: JsValue,
        out_features: JsValue,
        bias: Option<JsValue>,
    ) -> JsResult<Linear> {
        const OP: &str = "Linear";
        let cin = arg(&in_features, OP, "inFeatures")?;
        let cout = arg(&out_features, OP, "outFeatures")?;
        let b: Option<bool> = arg(&bias.unwrap_or(JsValue::UNDEFINED), OP, "bias")?;
        Ok(Linear(
            crate::nn::Linear::with(cin, cout, b.unwrap_or(true)).or_fail(OP)?,
        ))
    }
}

#[wasm_bindgen]
impl BatchNorm {
    #[wasm_bindgen(constructor)]
    pub fn new(
        num_features: JsValue,
        #[wasm_bindgen(
            unchecked_optional_param_type = "{ eps?: number, momentum?: number, affine?: boolean }"
        )]
        opts: Option<JsValue>,
    ) -> JsResult<BatchNorm> {
        const OP: &str = "BatchNorm";
        let n = arg(&num_features, OP, "numFeatures")?;
        let opts = Opts::new(&opts.unwrap_or(JsValue::UNDEFINED), OP)?;
        let eps = opts.or("eps", 1e-5)?;
        let m = opts.or("momentum", 0.1)?;
        let affine = opts.or("affine", true)?;
        Ok(BatchNorm(
            crate::nn::BatchNorm::with(n, eps, m, affine).or_fail(OP)?,
        ))
    }
}

#[wasm_bindgen]
impl LayerNorm {
    #[wasm_bindgen(constructor)]
    pub fn new(
        #[wasm_bindgen(unchecked_param_type = "number | number[]")] normalized_shape: JsValue,
        #[wasm_bindgen(unchecked_optional_param_type = "{ eps?: number, affine?: boolean }")] opts: Option<
            JsValue,
        >,
    ) -> JsResult<LayerNorm> {
        const OP: &str = "LayerNorm";
        let s: Vec<usize> = arg(&normalized_shape, OP, "shape")?;
        let opts = Opts::new(&opts.unwrap_or(JsValue::UNDEFINED), OP)?;
        let eps = opts.or("eps", 1e-5)?;
        let affine = opts.or("affine", true)?;
        Ok(LayerNorm(
            crate::nn::LayerNorm::with(&s, eps, affine).or_fail(OP)?,
        ))
    }
}

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
        const OP: &str = "GroupNorm";
        let g = arg(&num_groups, OP, "numGroups")?;
        let c = arg(&num_channels, OP, "numChannels")?;
        let opts = Opts::new(&opts.unwrap_or(JsValue::UNDEFINED), OP)?;
        let eps = opts.or("eps", 1e-5)?;
        let affine = opts.or("affine", true)?;
        Ok(GroupNorm(
            crate::nn::GroupNorm::with(g, c, eps, affine).or_fail(OP)?,
        ))
    }
}

#[wasm_bindgen]
impl Embedding {
    #[wasm_bindgen(constructor)]
    pub fn new(vocab_size: JsValue, embed_size: JsValue) -> JsResult<Embedding> {
        const OP: &str = "Embedding";
        let v = arg(&vocab_size, OP, "vocabSize")?;
        let e = arg(&embed_size, OP, "embedSize")?;
        Ok(Embedding(crate::nn::Embedding::new(v, e).or_fail(OP)?))
    }
}

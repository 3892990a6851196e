//! The nn layers for JavaScript (`nn.Conv2d`, …): one macro makes each layer's class with
//! `forward`, its tensors as getters and `parameters()` (from `nn::state`, the same walk the
//! Rust optimizers use); the constructors, which read their options, are written out, and so is
//! `LSTMCell`, whose `forward` takes and returns a state. The init helpers
//! (`Tensor.kaimingUniform` & co) are static methods of `Tensor` made here too.

use super::args::{arg, Opts};
use super::{fail, register, tensor_array, JsResult, JsTensor, OrFail};
use crate::{Conv1dOpts, Conv2dOpts, ConvTranspose1dOpts, ConvTranspose2dOpts, Tensor};
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
            /// The layer applied to `x` (see the class for the shapes it takes); throws an Error
            /// naming the layer and the shapes on a mismatch.
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
                /// The layer's tensor of this name: a handle to the live parameter or buffer, which
                /// optimizers update in place (null where the layer has none).
                pub fn $field(&self) -> $out {
                    Handle::handle(&self.0.$field)
                }
            )*
            /// The tensors that require gradients, in state-dict order (what an optimizer takes).
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
    /// A layer from `inChannels` to `outChannels` with a `kernel` (a number or `[kh, kw]`) window;
    /// throws when `groups` does not divide both channel counts or a "same" padding has a stride.
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
    /// A layer from `inFeatures` to `outFeatures`, with a bias unless `bias` is false.
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
    /// A layer over `numFeatures` channels (eps 1e-5, momentum 0.1 and affine unless `opts` say
    /// otherwise).
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
    /// A layer over the trailing `normalizedShape` axes (eps 1e-5, affine unless `opts` say
    /// otherwise); throws on an empty shape.
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
    /// A layer over `numChannels` channels in `numGroups` groups; throws when the groups do not
    /// divide the channels.
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
    /// A table of `vocabSize` rows of `embedSize` values (Glorot-uniform initialised).
    pub fn new(vocab_size: JsValue, embed_size: JsValue) -> JsResult<Embedding> {
        const OP: &str = "Embedding";
        let v = arg(&vocab_size, OP, "vocabSize")?;
        let e = arg(&embed_size, OP, "embedSize")?;
        Ok(Embedding(crate::nn::Embedding::new(v, e).or_fail(OP)?))
    }
}

// ---------------------------------------------------------------- h-conv: more layers, init

/// `new nn.Conv1d(inChannels, outChannels, kernel, { stride, padding, dilation, groups, bias })`.
#[wasm_bindgen]
pub struct Conv1d(crate::nn::Conv1d);
js_layer!(Conv1d, forward(x "the input"), weight: JsTensor, bias: Option<JsTensor>);

/// `new nn.ConvTranspose2d(inChannels, outChannels, kernel, { stride, padding, outputPadding,
/// dilation, groups, bias })`: weight `[in, out/groups, kh, kw]`.
#[wasm_bindgen]
pub struct ConvTranspose2d(crate::nn::ConvTranspose2d);
js_layer!(ConvTranspose2d, forward(x "the input"), weight: JsTensor, bias: Option<JsTensor>);

/// `new nn.ConvTranspose1d(inChannels, outChannels, kernel, { stride, padding, outputPadding,
/// dilation, groups, bias })`: weight `[in, out/groups, k]`.
#[wasm_bindgen]
pub struct ConvTranspose1d(crate::nn::ConvTranspose1d);
js_layer!(ConvTranspose1d, forward(x "the input"), weight: JsTensor, bias: Option<JsTensor>);

/// `new nn.InstanceNorm(numFeatures, { eps, affine })` (affine by default, as tinygrad).
#[wasm_bindgen]
pub struct InstanceNorm(crate::nn::InstanceNorm);
js_layer!(InstanceNorm, forward(x "the input"), weight: Option<JsTensor>, bias: Option<JsTensor>);

/// `new nn.LayerNorm2d(numChannels, { eps, affine })`: LayerNorm over axis 1.
#[wasm_bindgen]
pub struct LayerNorm2d(crate::nn::LayerNorm2d);
js_layer!(LayerNorm2d, forward(x "the input"), weight: Option<JsTensor>, bias: Option<JsTensor>);

/// `new nn.RMSNorm(dim, { eps = 1e-6, affine })`.
#[wasm_bindgen]
pub struct RMSNorm(crate::nn::RmsNorm);
js_layer!(RMSNorm, forward(x "the input"), weight: Option<JsTensor>);

/// `new nn.LSTMCell(inputSize, hiddenSize, bias = true)`; `forward(x, [h, c]?)` gives `[h, c]`.
#[wasm_bindgen]
pub struct LSTMCell(crate::nn::LstmCell);

/// The options object of a layer constructor (`undefined` when absent).
fn layer_opts(opts: Option<JsValue>) -> JsValue {
    opts.unwrap_or(JsValue::UNDEFINED)
}

#[wasm_bindgen]
impl Conv1d {
    #[wasm_bindgen(constructor)]
    /// A layer from `inChannels` to `outChannels` with a window of `kernel`; throws when `groups`
    /// does not divide both channel counts or a "same" padding has a stride.
    pub fn new(
        in_channels: JsValue,
        out_channels: JsValue,
        #[wasm_bindgen(unchecked_param_type = "number")] kernel: JsValue,
        #[wasm_bindgen(unchecked_optional_param_type = "Conv1dOptions & { bias?: boolean }")] opts: Option<
            JsValue,
        >,
    ) -> JsResult<Conv1d> {
        const OP: &str = "Conv1d";
        let opts = layer_opts(opts);
        let cin = arg(&in_channels, OP, "inChannels")?;
        let cout = arg(&out_channels, OP, "outChannels")?;
        let k = arg(&kernel, OP, "kernel")?;
        let o: Conv1dOpts = arg(&opts, OP, "opts")?;
        let bias = Opts::new(&opts, OP)?.or("bias", true)?;
        Ok(Conv1d(
            crate::nn::Conv1d::with(cin, cout, k, o, bias).or_fail(OP)?,
        ))
    }
}

#[wasm_bindgen]
impl ConvTranspose2d {
    #[wasm_bindgen(constructor)]
    /// A layer from `inChannels` to `outChannels` with a `kernel` (a number or `[kh, kw]`) window;
    /// throws when `groups` does not divide both channel counts.
    pub fn new(
        in_channels: JsValue,
        out_channels: JsValue,
        #[wasm_bindgen(unchecked_param_type = "number | [number, number]")] kernel: JsValue,
        #[wasm_bindgen(
            unchecked_optional_param_type = "ConvTranspose2dOptions & { bias?: boolean }"
        )]
        opts: Option<JsValue>,
    ) -> JsResult<ConvTranspose2d> {
        const OP: &str = "ConvTranspose2d";
        let opts = layer_opts(opts);
        let cin = arg(&in_channels, OP, "inChannels")?;
        let cout = arg(&out_channels, OP, "outChannels")?;
        let k = arg(&kernel, OP, "kernel")?;
        let o: ConvTranspose2dOpts = arg(&opts, OP, "opts")?;
        let bias = Opts::new(&opts, OP)?.or("bias", true)?;
        Ok(ConvTranspose2d(
            crate::nn::ConvTranspose2d::with(cin, cout, k, o, bias).or_fail(OP)?,
        ))
    }
}

#[wasm_bindgen]
impl ConvTranspose1d {
    #[wasm_bindgen(constructor)]
    /// A layer from `inChannels` to `outChannels` with a window of `kernel`; throws when `groups`
    /// does not divide both channel counts.
    pub fn new(
        in_channels: JsValue,
        out_channels: JsValue,
        #[wasm_bindgen(unchecked_param_type = "number")] kernel: JsValue,
        #[wasm_bindgen(
            unchecked_optional_param_type = "ConvTranspose1dOptions & { bias?: boolean }"
        )]
        opts: Option<JsValue>,
    ) -> JsResult<ConvTranspose1d> {
        const OP: &str = "ConvTranspose1d";
        let opts = layer_opts(opts);
        let cin = arg(&in_channels, OP, "inChannels")?;
        let cout = arg(&out_channels, OP, "outChannels")?;
        let k = arg(&kernel, OP, "kernel")?;
        let o: ConvTranspose1dOpts = arg(&opts, OP, "opts")?;
        let bias = Opts::new(&opts, OP)?.or("bias", true)?;
        Ok(ConvTranspose1d(
            crate::nn::ConvTranspose1d::with(cin, cout, k, o, bias).or_fail(OP)?,
        ))
    }
}

/// `(eps, affine)` from `{ eps, affine }`.
fn norm_opts(opts: Option<JsValue>, op: &str, eps: f64) -> JsResult<(f64, bool)> {
    let opts = Opts::new(&layer_opts(opts), op)?;
    Ok((opts.or("eps", eps)?, opts.or("affine", true)?))
}

#[wasm_bindgen]
impl InstanceNorm {
    #[wasm_bindgen(constructor)]
    /// A layer over `numFeatures` channels (eps 1e-5, affine unless `opts` say otherwise).
    pub fn new(
        num_features: JsValue,
        #[wasm_bindgen(unchecked_optional_param_type = "{ eps?: number, affine?: boolean }")] opts: Option<
            JsValue,
        >,
    ) -> JsResult<InstanceNorm> {
        const OP: &str = "InstanceNorm";
        let n = arg(&num_features, OP, "numFeatures")?;
        let (eps, affine) = norm_opts(opts, OP, 1e-5)?;
        Ok(InstanceNorm(
            crate::nn::InstanceNorm::with(n, eps, affine).or_fail(OP)?,
        ))
    }
}

#[wasm_bindgen]
impl LayerNorm2d {
    #[wasm_bindgen(constructor)]
    /// A layer over `numChannels` channels (eps 1e-5, affine unless `opts` say otherwise).
    pub fn new(
        num_channels: JsValue,
        #[wasm_bindgen(unchecked_optional_param_type = "{ eps?: number, affine?: boolean }")] opts: Option<
            JsValue,
        >,
    ) -> JsResult<LayerNorm2d> {
        const OP: &str = "LayerNorm2d";
        let n = arg(&num_channels, OP, "numChannels")?;
        let (eps, affine) = norm_opts(opts, OP, 1e-5)?;
        Ok(LayerNorm2d(
            crate::nn::LayerNorm2d::with(n, eps, affine).or_fail(OP)?,
        ))
    }
}

#[wasm_bindgen]
impl RMSNorm {
    #[wasm_bindgen(constructor)]
    /// A layer over a last axis of `dim` (eps 1e-6, affine unless `opts` say otherwise).
    pub fn new(
        dim: JsValue,
        #[wasm_bindgen(unchecked_optional_param_type = "{ eps?: number, affine?: boolean }")] opts: Option<
            JsValue,
        >,
    ) -> JsResult<RMSNorm> {
        const OP: &str = "RMSNorm";
        let n = arg(&dim, OP, "dim")?;
        let (eps, affine) = norm_opts(opts, OP, 1e-6)?;
        Ok(RMSNorm(
            crate::nn::RmsNorm::with(n, eps, affine).or_fail(OP)?,
        ))
    }
}

#[wasm_bindgen]
impl LSTMCell {
    #[wasm_bindgen(constructor)]
    /// A cell from `inputSize` to `hiddenSize` features, with biases unless `bias` is false.
    pub fn new(
        input_size: JsValue,
        hidden_size: JsValue,
        bias: Option<JsValue>,
    ) -> JsResult<LSTMCell> {
        const OP: &str = "LSTMCell";
        let i = arg(&input_size, OP, "inputSize")?;
        let h = arg(&hidden_size, OP, "hiddenSize")?;
        let b: Option<bool> = arg(&layer_opts(bias), OP, "bias")?;
        Ok(LSTMCell(
            crate::nn::LstmCell::with(i, h, b.unwrap_or(true)).or_fail(OP)?,
        ))
    }
    /// `[h, c]` after one step from `x` `[N, inputSize]` and the state `[h, c]` (zeros when
    /// absent).
    #[wasm_bindgen(unchecked_return_type = "[Tensor, Tensor]")]
    pub fn forward(
        &self,
        #[wasm_bindgen(unchecked_param_type = "Tensor")] x: JsValue,
        #[wasm_bindgen(unchecked_optional_param_type = "[Tensor, Tensor] | null")] hc: Option<
            JsValue,
        >,
    ) -> JsResult<Array> {
        const OP: &str = "LSTMCell.forward";
        let x: Tensor = arg(&x, OP, "the input")?;
        let hc: Option<Vec<Tensor>> = arg(&layer_opts(hc), OP, "the state")?;
        let hc = match hc.as_deref() {
            None => None,
            Some([h, c]) => Some((h, c)),
            Some(other) => {
                return Err(fail(
                    OP,
                    format!("the state must be [h, c], got {} tensors", other.len()),
                ))
            }
        };
        let (h, c) = self.0.forward(&x, hc).or_fail(OP)?;
        Ok(tensor_array(vec![h, c]))
    }
    #[wasm_bindgen(getter, js_name = weightIh)]
    /// The input weight `[4 * hidden, input]`.
    pub fn weight_ih(&self) -> JsTensor {
        self.0.weight_ih.handle()
    }
    #[wasm_bindgen(getter, js_name = weightHh)]
    /// The state weight `[4 * hidden, hidden]`.
    pub fn weight_hh(&self) -> JsTensor {
        self.0.weight_hh.handle()
    }
    #[wasm_bindgen(getter, js_name = biasIh)]
    /// The input bias `[4 * hidden]` (null without biases).
    pub fn bias_ih(&self) -> Option<JsTensor> {
        self.0.bias_ih.handle()
    }
    #[wasm_bindgen(getter, js_name = biasHh)]
    /// The state bias `[4 * hidden]` (null without biases).
    pub fn bias_hh(&self) -> Option<JsTensor> {
        self.0.bias_hh.handle()
    }
    /// The tensors that require gradients, in state-dict order.
    #[wasm_bindgen(unchecked_return_type = "Tensor[]")]
    pub fn parameters(&self) -> Array {
        tensor_array(crate::nn::state::get_parameters(&self.0))
    }
}

/// An init helper's shape and leaky-ReLU slope (tinygrad's default 0.01).
fn init_args(op: &str, shape: &JsValue, a: Option<JsValue>) -> JsResult<(Vec<usize>, f64)> {
    let s = arg(shape, op, "shape")?;
    let a: Option<f64> = arg(&layer_opts(a), op, "a")?;
    Ok((s, a.unwrap_or(0.01)))
}

#[wasm_bindgen(js_class = Tensor)]
impl JsTensor {
    /// Kaiming uniform: in ±sqrt(6 / ((1 + a²) · fanIn)), fanIn the product of the dims after
    /// the first (tinygrad's; `a` defaults to 0.01).
    #[wasm_bindgen(js_name = kaimingUniform)]
    pub fn kaiming_uniform(
        #[wasm_bindgen(unchecked_param_type = "number[]")] shape: JsValue,
        #[wasm_bindgen(unchecked_optional_param_type = "number")] a: Option<JsValue>,
    ) -> JsResult<JsTensor> {
        const OP: &str = "kaimingUniform";
        let (s, a) = init_args(OP, &shape, a)?;
        Ok(register(Tensor::kaiming_uniform(&s, a).or_fail(OP)?))
    }
    /// Kaiming normal: standard deviation sqrt(2 / ((1 + a²) · fanIn)) (`a` defaults to 0.01).
    #[wasm_bindgen(js_name = kaimingNormal)]
    pub fn kaiming_normal(
        #[wasm_bindgen(unchecked_param_type = "number[]")] shape: JsValue,
        #[wasm_bindgen(unchecked_optional_param_type = "number")] a: Option<JsValue>,
    ) -> JsResult<JsTensor> {
        const OP: &str = "kaimingNormal";
        let (s, a) = init_args(OP, &shape, a)?;
        Ok(register(Tensor::kaiming_normal(&s, a).or_fail(OP)?))
    }
    /// Glorot uniform: in ±sqrt(6 / (shape[0] + fanIn)).
    #[wasm_bindgen(js_name = glorotUniform)]
    pub fn glorot_uniform(
        #[wasm_bindgen(unchecked_param_type = "number[]")] shape: JsValue,
    ) -> JsResult<JsTensor> {
        const OP: &str = "glorotUniform";
        let s: Vec<usize> = arg(&shape, OP, "shape")?;
        Ok(register(Tensor::glorot_uniform(&s).or_fail(OP)?))
    }
    /// Uniform in ±1/sqrt(numel).
    #[wasm_bindgen(js_name = scaledUniform)]
    pub fn scaled_uniform(
        #[wasm_bindgen(unchecked_param_type = "number[]")] shape: JsValue,
    ) -> JsResult<JsTensor> {
        const OP: &str = "scaledUniform";
        let s: Vec<usize> = arg(&shape, OP, "shape")?;
        Ok(register(Tensor::scaled_uniform(&s).or_fail(OP)?))
    }
}

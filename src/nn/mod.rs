//! Layers: plain structs holding their parameters as Tensors, initialised like tinygrad
//! (uniform in ±1/sqrt(fan_in)).
//!
//! `Conv1d`, `Conv2d`, `ConvTranspose1d`, `ConvTranspose2d` and `Linear` hold learned weights;
//! `BatchNorm`, `LayerNorm`, `LayerNorm2d`, `GroupNorm`, `InstanceNorm` and `RmsNorm` normalise
//! (affine weight 1 and bias 0 at start); `Embedding` looks rows up by integer index; `LstmCell`
//! is one step of an LSTM. Parameter names and shapes are PyTorch's, so a PyTorch state dict
//! loads with `state::load_state_dict`.
//! Every layer has `forward(&self, x) -> Result<Tensor>`, and every learned parameter is a
//! realized buffer with `requires_grad` on. `state` collects the tensors of a model by name
//! (state dicts, parameters, safetensors files, PyTorch checkpoints). `gpt` builds a GPT from
//! these layers, with KV-cache generation.

pub mod datasets;
pub mod gpt;
mod init;
pub mod optim;
mod pickle;
pub mod state;
mod torch_load;
mod zip;

use crate::context::default_float;
use crate::dtype::DType;
use crate::error::{bail, Result};
use crate::tensor::conv::{Conv1dOpts, ConvTranspose1dOpts, ConvTranspose2dOpts, Padding1d};
use crate::tensor::functional::{Conv2dOpts, Padding};
use crate::tensor::Tensor;

fn init(shape: &[usize], fan_in: usize) -> Result<Tensor> {
    let t = if fan_in == 0 {
        // No inputs (an empty weight): the bias starts at 0, as in PyTorch.
        Tensor::zeros(shape)?.contiguous().realize()?
    } else {
        let b = 1.0 / (fan_in as f64).sqrt();
        Tensor::uniform(shape, -b, b)?.realize()?
    };
    t.set_requires_grad(true);
    Ok(t)
}

/// A 2-D convolution layer: weight (out, in/groups, kh, kw) and optional bias (out).
pub struct Conv2d {
    /// (out, in/groups, kh, kw), learned.
    pub weight: Tensor,
    /// (out), learned; `None` without bias.
    pub bias: Option<Tensor>,
    /// Stride, padding, dilation and groups.
    pub opts: Conv2dOpts,
}

impl Conv2d {
    /// `cin` to `cout` channels with a `kernel` (rows, columns) window, stride 1, no padding, with
    /// bias.
    ///
    /// ```
    /// # wgrad::context::set_default_device(Some(wgrad::Device::Interp));
    /// use wgrad::{nn::Conv2d, Tensor};
    /// let conv = Conv2d::new(1, 4, (3, 3))?;
    /// let y = conv.forward(&Tensor::randn(&[2, 1, 8, 8])?)?; // (N, C, H, W)
    /// assert_eq!(y.shape(), vec![2, 4, 6, 6]);
    /// assert!(conv.forward(&Tensor::randn(&[2, 3, 8, 8])?).is_err()); // 3 channels, not 1
    /// # Ok::<(), wgrad::Error>(())
    /// ```
    pub fn new(cin: usize, cout: usize, kernel: (usize, usize)) -> Result<Conv2d> {
        Conv2d::with(cin, cout, kernel, Conv2dOpts::default(), true)
    }
    /// A layer with explicit options; errors when `groups` does not divide both channel counts or
    /// when `Padding::Same` is asked with a stride other than 1.
    pub fn with(
        cin: usize,
        cout: usize,
        kernel: (usize, usize),
        opts: Conv2dOpts,
        bias: bool,
    ) -> Result<Conv2d> {
        if opts.groups == 0 || cin % opts.groups != 0 || cout % opts.groups != 0 {
            bail!(
                Shape,
                "Conv2d: {cin} in and {cout} out channels are not divisible by groups={}",
                opts.groups
            );
        }
        if opts.padding == Padding::Same && opts.stride != (1, 1) {
            bail!(
                Shape,
                "Conv2d: padding \"same\" requires stride 1, got {:?}",
                opts.stride
            );
        }
        let fan_in = cin / opts.groups * kernel.0 * kernel.1;
        let weight = init(&[cout, cin / opts.groups, kernel.0, kernel.1], fan_in)?;
        let bias = if bias {
            Some(init(&[cout], fan_in)?)
        } else {
            None
        };
        Ok(Conv2d { weight, bias, opts })
    }
    /// Convolve an `(N, in, H, W)` input; errors when its channels are not `in`.
    pub fn forward(&self, x: &Tensor) -> Result<Tensor> {
        x.conv2d(&self.weight, self.bias.as_ref(), &self.opts)
    }
}

/// A fully connected layer: weight (out, in), bias (out); `y = x W^T + b`.
pub struct Linear {
    /// (out, in), learned.
    pub weight: Tensor,
    /// (out), learned; `None` without bias.
    pub bias: Option<Tensor>,
}

impl Linear {
    /// `cin` inputs to `cout` outputs, with bias.
    ///
    /// ```
    /// # wgrad::context::set_default_device(Some(wgrad::Device::Interp));
    /// use wgrad::{nn::Linear, Tensor};
    /// let l = Linear::new(4, 3)?;
    /// assert_eq!(l.forward(&Tensor::ones(&[8, 4])?)?.shape(), vec![8, 3]);
    /// // The fields are PyTorch's: weight (out, in), bias (out).
    /// let l = Linear {
    ///     weight: Tensor::from_slice(&[1.0f32, 2.0], &[1, 2])?,
    ///     bias: Some(Tensor::from_slice(&[0.5f32], &[1])?),
    /// };
    /// let x = Tensor::from_slice(&[1.0f32, 1.0, 2.0, 0.0], &[2, 2])?;
    /// assert_eq!(l.forward(&x)?.to_vec::<f32>()?, vec![3.5, 2.5]);
    /// # Ok::<(), wgrad::Error>(())
    /// ```
    pub fn new(cin: usize, cout: usize) -> Result<Linear> {
        Linear::with(cin, cout, true)
    }
    /// `cin` inputs to `cout` outputs, with or without bias.
    pub fn with(cin: usize, cout: usize, bias: bool) -> Result<Linear> {
        let weight = init(&[cout, cin], cin)?;
        let bias = if bias {
            Some(init(&[cout], cin)?)
        } else {
            None
        };
        Ok(Linear { weight, bias })
    }
    /// `x Wᵀ + b` over the last axis of `x` (`(..., in)` to `(..., out)`); errors when it is not
    /// `in`.
    pub fn forward(&self, x: &Tensor) -> Result<Tensor> {
        x.linear(&self.weight.t()?, self.bias.as_ref())
    }
}

/// A realized buffer filled with `value` (a learned parameter when `learn`).
fn filled(shape: &[usize], value: f64, dtype: DType, learn: bool) -> Result<Tensor> {
    let t = Tensor::full_dtype(shape, value, dtype)?
        .contiguous()
        .realize()?;
    if learn {
        t.set_requires_grad(true);
    }
    Ok(t)
}

/// `v` (shape `(C,)`) reshaped to broadcast over axis 1 of an `ndim`-dimensional input.
fn per_channel(v: &Tensor, ndim: usize) -> Result<Tensor> {
    let mut shape = vec![1usize; ndim.max(2)];
    shape[1] = v.numel();
    v.reshape_u(&shape)
}

/// `(x - mean(x)) / sqrt(var(x) + eps)` over `axes` (biased variance, like tinygrad's
/// `layernorm`).
fn normalize(x: &Tensor, axes: &[isize], eps: f64) -> Result<Tensor> {
    let y = x.sub(&x.mean(axes.to_vec(), true)?)?;
    let var = y.square()?.mean(axes.to_vec(), true)?;
    y.mul(&var.add(eps)?.rsqrt()?)
}

/// Batch normalisation over axis 1 of an `(N, C, ...)` input (torch's `BatchNorm1d/2d/3d`).
///
/// In training mode (`wgrad::context::training()`) the output uses the batch statistics (mean
/// and biased variance over every axis but 1) and the running statistics are updated in place
/// with `Tensor::assign`: `running = (1 - momentum) * running + momentum * batch`, where the
/// variance folded in is the unbiased one (like torch), and `num_batches_tracked` grows by one.
/// That update is lazy like everything else: it runs when the running statistics are realized
/// (read them, or realize `state::get_buffers(&model)` together with the training step).
/// In eval mode the output uses the running statistics.
///
/// `weight` (ones) and `bias` (zeros) are learned when `affine`; `running_mean` (zeros),
/// `running_var` (ones), both f32, and `num_batches_tracked` (i32, shape `[]`) are realized
/// buffers that do not require gradients.
pub struct BatchNorm {
    /// Per-channel scale (ones), learned; `None` unless affine.
    pub weight: Option<Tensor>,
    /// Per-channel shift (zeros), learned; `None` unless affine.
    pub bias: Option<Tensor>,
    /// The running mean per channel, updated in training mode.
    pub running_mean: Tensor,
    /// The running (unbiased) variance per channel, updated in training mode.
    pub running_var: Tensor,
    /// Training batches seen (i32 scalar).
    pub num_batches_tracked: Tensor,
    /// Added to the variance before the square root.
    pub eps: f64,
    /// Weight of each batch's statistics in the running ones.
    pub momentum: f64,
}

impl BatchNorm {
    /// `num_features` channels, eps 1e-5, momentum 0.1, affine.
    pub fn new(num_features: usize) -> Result<BatchNorm> {
        BatchNorm::with(num_features, 1e-5, 0.1, true)
    }
    /// A layer with explicit `eps`, `momentum` and whether it has learned `weight` and `bias`.
    pub fn with(num_features: usize, eps: f64, momentum: f64, affine: bool) -> Result<BatchNorm> {
        let c = [num_features];
        let (weight, bias) = if affine {
            (
                Some(filled(&c, 1.0, default_float(), true)?),
                Some(filled(&c, 0.0, default_float(), true)?),
            )
        } else {
            (None, None)
        };
        Ok(BatchNorm {
            weight,
            bias,
            running_mean: filled(&c, 0.0, default_float(), false)?,
            running_var: filled(&c, 1.0, default_float(), false)?,
            num_batches_tracked: filled(&[], 0.0, DType::I32, false)?,
            eps,
            momentum,
        })
    }
    /// Normalise an `(N, C, ...)` input per channel: with the batch's statistics in training mode
    /// (updating the running ones), the running statistics otherwise. Errors when axis 1 is not
    /// `C`, or in training with a single value per channel.
    pub fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let s = x.shape();
        let c = self.running_mean.numel();
        if s.len() < 2 || s[1] != c {
            bail!(
                Shape,
                "BatchNorm: input {s:?} must be (N, {c}, ...) for {c} channels"
            );
        }
        let nd = s.len();
        let x = x.to_float("BatchNorm")?;
        let (mean, invstd) = if crate::context::training() {
            let n = x.numel() / c;
            if n < 2 {
                bail!(
                    Shape,
                    "BatchNorm: training needs more than one value per channel, input is {s:?}"
                );
            }
            let axes: Vec<isize> = (0..nd as isize).filter(|&a| a != 1).collect();
            let mean = x.mean(axes.clone(), false)?;
            // d(var)/d(mean) = 0, so the mean inside the variance needs no gradient.
            let y = x.sub(&per_channel(&mean.detach(), nd)?)?;
            let var = y.square()?.mean(axes, false)?;
            let m = self.momentum;
            let (rm, rv) = (&self.running_mean, &self.running_var);
            let new_mean = rm
                .mul(1.0 - m)?
                .add(&mean.detach().cast(rm.dtype())?.mul(m)?)?;
            let unbiased = var
                .detach()
                .cast(rv.dtype())?
                .mul(n as f64 / (n - 1) as f64)?;
            let new_var = rv.mul(1.0 - m)?.add(&unbiased.mul(m)?)?;
            rm.assign(&new_mean)?;
            rv.assign(&new_var)?;
            let nbt = &self.num_batches_tracked;
            nbt.assign(&nbt.add(1i64)?)?;
            (mean, var.add(self.eps)?.rsqrt()?)
        } else {
            (
                self.running_mean.clone(),
                self.running_var.add(self.eps)?.rsqrt()?,
            )
        };
        let mut out = x.sub(&per_channel(&mean, nd)?)?;
        if let Some(w) = &self.weight {
            out = out.mul(&per_channel(w, nd)?)?;
        }
        out = out.mul(&per_channel(&invstd, nd)?)?;
        if let Some(b) = &self.bias {
            out = out.add(&per_channel(b, nd)?)?;
        }
        Ok(out)
    }
}

/// Layer normalisation over the trailing `normalized_shape` dims: `(x - mean) / sqrt(var + eps)`
/// (biased variance), then `* weight + bias` (ones and zeros of `normalized_shape`, learned)
/// when `elementwise_affine`.
pub struct LayerNorm {
    /// Scale (ones of `normalized_shape`), learned; `None` without affine.
    pub weight: Option<Tensor>,
    /// Shift (zeros of `normalized_shape`), learned; `None` without affine.
    pub bias: Option<Tensor>,
    /// The trailing dims normalised over.
    pub normalized_shape: Vec<usize>,
    /// Added to the variance before the square root.
    pub eps: f64,
}

impl LayerNorm {
    /// eps 1e-5, elementwise affine.
    pub fn new(normalized_shape: &[usize]) -> Result<LayerNorm> {
        LayerNorm::with(normalized_shape, 1e-5, true)
    }
    /// A layer with explicit `eps` and affine choice; errors on an empty `normalized_shape`.
    pub fn with(
        normalized_shape: &[usize],
        eps: f64,
        elementwise_affine: bool,
    ) -> Result<LayerNorm> {
        if normalized_shape.is_empty() {
            bail!(Shape, "LayerNorm: normalized_shape must not be empty");
        }
        let (weight, bias) = if elementwise_affine {
            (
                Some(filled(normalized_shape, 1.0, default_float(), true)?),
                Some(filled(normalized_shape, 0.0, default_float(), true)?),
            )
        } else {
            (None, None)
        };
        Ok(LayerNorm {
            weight,
            bias,
            normalized_shape: normalized_shape.to_vec(),
            eps,
        })
    }
    /// Normalise `x` over its trailing dims; errors when they are not `normalized_shape`.
    pub fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let s = x.shape();
        let k = self.normalized_shape.len();
        if s.len() < k || s[s.len() - k..] != self.normalized_shape[..] {
            bail!(
                Shape,
                "LayerNorm: the last dims of input {s:?} must be {:?}",
                self.normalized_shape
            );
        }
        let axes: Vec<isize> = (1..=k as isize).map(|i| -i).collect();
        let mut out = normalize(&x.to_float("LayerNorm")?, &axes, self.eps)?;
        if let Some(w) = &self.weight {
            out = out.mul(w)?;
        }
        if let Some(b) = &self.bias {
            out = out.add(b)?;
        }
        Ok(out)
    }
}

/// Group normalisation of an `(N, C, ...)` input: the channels are split into `num_groups`
/// groups, each normalised over its channels and the spatial dims, then `* weight + bias` per
/// channel (ones and zeros, learned) when `affine`.
pub struct GroupNorm {
    /// Per-channel scale (ones), learned; `None` without affine.
    pub weight: Option<Tensor>,
    /// Per-channel shift (zeros), learned; `None` without affine.
    pub bias: Option<Tensor>,
    /// Groups the channels are split into.
    pub num_groups: usize,
    /// Channels of the input (axis 1).
    pub num_channels: usize,
    /// Added to the variance before the square root.
    pub eps: f64,
}

impl GroupNorm {
    /// eps 1e-5, affine.
    pub fn new(num_groups: usize, num_channels: usize) -> Result<GroupNorm> {
        GroupNorm::with(num_groups, num_channels, 1e-5, true)
    }
    /// A layer with explicit `eps` and affine choice; errors when `num_groups` does not divide
    /// `num_channels`.
    pub fn with(
        num_groups: usize,
        num_channels: usize,
        eps: f64,
        affine: bool,
    ) -> Result<GroupNorm> {
        if num_groups == 0 || num_channels % num_groups != 0 {
            bail!(
                Shape,
                "GroupNorm: {num_channels} channels are not divisible into {num_groups} groups"
            );
        }
        let c = [num_channels];
        let (weight, bias) = if affine {
            (
                Some(filled(&c, 1.0, default_float(), true)?),
                Some(filled(&c, 0.0, default_float(), true)?),
            )
        } else {
            (None, None)
        };
        Ok(GroupNorm {
            weight,
            bias,
            num_groups,
            num_channels,
            eps,
        })
    }
    /// Normalise an `(N, C, ...)` input per group; errors when axis 1 is not `num_channels`.
    pub fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let s = x.shape();
        if s.len() < 2 || s[1] != self.num_channels {
            bail!(
                Shape,
                "GroupNorm: input {s:?} must be (N, {}, ...)",
                self.num_channels
            );
        }
        let g = self.num_groups;
        let grouped = x
            .to_float("GroupNorm")?
            .reshape_u(&[s[0], g, x.numel() / (s[0] * g)])?;
        let mut out = normalize(&grouped, &[-1], self.eps)?.reshape_u(&s)?;
        if let Some(w) = &self.weight {
            out = out.mul(&per_channel(w, s.len())?)?;
        }
        if let Some(b) = &self.bias {
            out = out.add(&per_channel(b, s.len())?)?;
        }
        Ok(out)
    }
}

/// A lookup table of `vocab_size` rows of `embed_size` values: `forward(idx)` maps an integer
/// tensor of any shape to `idx.shape ++ [embed_size]`. Indices outside `0..vocab_size` give
/// rows of zeros (the lookup is a one-hot reduction; nothing checks them on the host).
///
/// The weight `(vocab_size, embed_size)` is initialised like tinygrad (Glorot uniform: in
/// ±sqrt(6 / (vocab_size + embed_size))), not like torch (standard normal), and is learned.
pub struct Embedding {
    /// (vocab_size, embed_size), learned.
    pub weight: Tensor,
    /// Rows of the table.
    pub vocab_size: usize,
    /// Values per row.
    pub embed_size: usize,
}

impl Embedding {
    /// A table of `vocab_size` rows of `embed_size` values.
    pub fn new(vocab_size: usize, embed_size: usize) -> Result<Embedding> {
        let weight = Tensor::glorot_uniform(&[vocab_size, embed_size])?.realize()?;
        weight.set_requires_grad(true);
        Ok(Embedding {
            weight,
            vocab_size,
            embed_size,
        })
    }
    /// The rows `idx` names: shape `idx.shape ++ [embed_size]`. Errors when `idx` is not an integer
    /// tensor.
    pub fn forward(&self, idx: &Tensor) -> Result<Tensor> {
        if !idx.dtype().is_int() {
            bail!(
                DType,
                "Embedding: indices must be integers, got {}",
                idx.dtype()
            );
        }
        self.weight.index(idx)
    }
}

// ---------------------------------------------------------------- conv-transpose, norms, LSTM

/// Check the groups of a convolution layer.
fn check_groups(op: &str, cin: usize, cout: usize, groups: usize) -> Result<()> {
    if groups == 0 || cin % groups != 0 || cout % groups != 0 {
        bail!(
            Shape,
            "{op}: {cin} in and {cout} out channels are not divisible by groups={groups}"
        );
    }
    Ok(())
}

/// A learned bias of `n` elements initialised like the weight (`Some` when `on`).
fn bias_init(on: bool, n: usize, fan_in: usize) -> Result<Option<Tensor>> {
    on.then(|| init(&[n], fan_in)).transpose()
}

/// Learned affine weight (ones) and bias (zeros) of `shape`, when `affine`.
type Affine = (Option<Tensor>, Option<Tensor>);
fn affine(shape: &[usize], on: bool) -> Result<Affine> {
    if !on {
        return Ok((None, None));
    }
    Ok((
        Some(filled(shape, 1.0, default_float(), true)?),
        Some(filled(shape, 0.0, default_float(), true)?),
    ))
}

/// `x * weight + bias` per channel (axis 1), for those present.
fn affine_per_channel(x: Tensor, w: &Option<Tensor>, b: &Option<Tensor>) -> Result<Tensor> {
    let nd = x.ndim();
    let x = match w {
        Some(w) => x.mul(&per_channel(w, nd)?)?,
        None => x,
    };
    match b {
        Some(b) => x.add(&per_channel(b, nd)?),
        None => Ok(x),
    }
}

/// A 1-D convolution layer: weight (out, in/groups, k) and optional bias (out), initialised like
/// `Conv2d` (uniform in ±1/sqrt(in/groups · k)).
pub struct Conv1d {
    /// (out, in/groups, k), learned.
    pub weight: Tensor,
    /// (out), learned; `None` without bias.
    pub bias: Option<Tensor>,
    /// Stride, padding, dilation and groups.
    pub opts: Conv1dOpts,
}

impl Conv1d {
    /// `cin` to `cout` channels with a window of `kernel`, stride 1, no padding, with bias.
    pub fn new(cin: usize, cout: usize, kernel: usize) -> Result<Conv1d> {
        Conv1d::with(cin, cout, kernel, Conv1dOpts::default(), true)
    }
    /// A layer with explicit options; errors when `groups` does not divide both channel counts or
    /// when `Padding1d::Same` is asked with a stride other than 1.
    pub fn with(
        cin: usize,
        cout: usize,
        kernel: usize,
        opts: Conv1dOpts,
        bias: bool,
    ) -> Result<Conv1d> {
        check_groups("Conv1d", cin, cout, opts.groups)?;
        if opts.padding == Padding1d::Same && opts.stride != 1 {
            bail!(
                Shape,
                "Conv1d: padding \"same\" requires stride 1, got {}",
                opts.stride
            );
        }
        let fan_in = cin / opts.groups * kernel;
        Ok(Conv1d {
            weight: init(&[cout, cin / opts.groups, kernel], fan_in)?,
            bias: bias_init(bias, cout, fan_in)?,
            opts,
        })
    }
    /// Convolve an `(N, in, L)` input; errors when its channels are not `in`.
    pub fn forward(&self, x: &Tensor) -> Result<Tensor> {
        x.conv1d(&self.weight, self.bias.as_ref(), &self.opts)
    }
}

/// A 2-D transposed convolution layer: weight (in, out/groups, kh, kw) and optional bias (out),
/// PyTorch's layout. Initialised uniform in ±1/sqrt(in/groups · kh · kw): tinygrad's bound for
/// groups = 1 (PyTorch counts out/groups instead of in/groups).
pub struct ConvTranspose2d {
    /// (in, out/groups, kh, kw), learned.
    pub weight: Tensor,
    /// (out), learned; `None` without bias.
    pub bias: Option<Tensor>,
    /// Stride, padding, output padding, dilation and groups.
    pub opts: ConvTranspose2dOpts,
}

impl ConvTranspose2d {
    /// `cin` to `cout` channels with a `kernel` (rows, columns) window, stride 1, with bias.
    pub fn new(cin: usize, cout: usize, kernel: (usize, usize)) -> Result<ConvTranspose2d> {
        ConvTranspose2d::with(cin, cout, kernel, ConvTranspose2dOpts::default(), true)
    }
    /// A layer with explicit options; errors when `groups` does not divide both channel counts.
    pub fn with(
        cin: usize,
        cout: usize,
        kernel: (usize, usize),
        opts: ConvTranspose2dOpts,
        bias: bool,
    ) -> Result<ConvTranspose2d> {
        check_groups("ConvTranspose2d", cin, cout, opts.groups)?;
        let fan_in = cin / opts.groups * kernel.0 * kernel.1;
        Ok(ConvTranspose2d {
            weight: init(&[cin, cout / opts.groups, kernel.0, kernel.1], fan_in)?,
            bias: bias_init(bias, cout, fan_in)?,
            opts,
        })
    }
    /// The transposed convolution of an `(N, in, H, W)` input; errors when its channels are not
    /// `in`.
    pub fn forward(&self, x: &Tensor) -> Result<Tensor> {
        x.conv_transpose2d(&self.weight, self.bias.as_ref(), &self.opts)
    }
}

/// A 1-D transposed convolution layer: weight (in, out/groups, k) and optional bias (out),
/// initialised like `ConvTranspose2d`.
pub struct ConvTranspose1d {
    /// (in, out/groups, k), learned.
    pub weight: Tensor,
    /// (out), learned; `None` without bias.
    pub bias: Option<Tensor>,
    /// Stride, padding, output padding, dilation and groups.
    pub opts: ConvTranspose1dOpts,
}

impl ConvTranspose1d {
    /// `cin` to `cout` channels with a window of `kernel`, stride 1, with bias.
    pub fn new(cin: usize, cout: usize, kernel: usize) -> Result<ConvTranspose1d> {
        ConvTranspose1d::with(cin, cout, kernel, ConvTranspose1dOpts::default(), true)
    }
    /// A layer with explicit options; errors when `groups` does not divide both channel counts.
    pub fn with(
        cin: usize,
        cout: usize,
        kernel: usize,
        opts: ConvTranspose1dOpts,
        bias: bool,
    ) -> Result<ConvTranspose1d> {
        check_groups("ConvTranspose1d", cin, cout, opts.groups)?;
        let fan_in = cin / opts.groups * kernel;
        Ok(ConvTranspose1d {
            weight: init(&[cin, cout / opts.groups, kernel], fan_in)?,
            bias: bias_init(bias, cout, fan_in)?,
            opts,
        })
    }
    /// The transposed convolution of an `(N, in, L)` input; errors when its channels are not `in`.
    pub fn forward(&self, x: &Tensor) -> Result<Tensor> {
        x.conv_transpose1d(&self.weight, self.bias.as_ref(), &self.opts)
    }
}

/// Instance normalisation of an `(N, C, ...)` input (at least one dim after the channels):
/// each sample's channel is normalised over its other dims (biased variance), then
/// `* weight + bias` per channel (ones and zeros, learned) when `affine`. As tinygrad, `affine`
/// is on by default and there are no running statistics (PyTorch's `InstanceNorm2d` defaults
/// to neither).
pub struct InstanceNorm {
    /// Per-channel scale (ones), learned; `None` without affine.
    pub weight: Option<Tensor>,
    /// Per-channel shift (zeros), learned; `None` without affine.
    pub bias: Option<Tensor>,
    /// Channels of the input (axis 1).
    pub num_features: usize,
    /// Added to the variance before the square root.
    pub eps: f64,
}

impl InstanceNorm {
    /// eps 1e-5, affine.
    pub fn new(num_features: usize) -> Result<InstanceNorm> {
        InstanceNorm::with(num_features, 1e-5, true)
    }
    /// A layer with explicit `eps` and affine choice.
    pub fn with(num_features: usize, eps: f64, affine_on: bool) -> Result<InstanceNorm> {
        let (weight, bias) = affine(&[num_features], affine_on)?;
        Ok(InstanceNorm {
            weight,
            bias,
            num_features,
            eps,
        })
    }
    /// Normalise each sample's channels of an `(N, C, ...)` input; errors when axis 1 is not `C` or
    /// there is no axis after it.
    pub fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let s = x.shape();
        let c = self.num_features;
        if s.len() < 3 || s[1] != c {
            bail!(
                Shape,
                "InstanceNorm: input {s:?} must be (N, {c}, ...) with at least one dim after                  the channels"
            );
        }
        let rows = x
            .to_float("InstanceNorm")?
            .reshape_u(&[s[0], c, x.numel() / (s[0] * c)])?;
        let out = normalize(&rows, &[-1], self.eps)?.reshape_u(&s)?;
        affine_per_channel(out, &self.weight, &self.bias)
    }
}

/// Layer normalisation over the channels (axis 1) of an `(N, C, ...)` input, e.g. each pixel
/// of an image (tinygrad's `LayerNorm2d`, a `LayerNorm(C)` applied channels-last), then
/// `* weight + bias` per channel when `elementwise_affine`.
pub struct LayerNorm2d {
    /// Per-channel scale (ones), learned; `None` without affine.
    pub weight: Option<Tensor>,
    /// Per-channel shift (zeros), learned; `None` without affine.
    pub bias: Option<Tensor>,
    /// Channels of the input (axis 1).
    pub num_channels: usize,
    /// Added to the variance before the square root.
    pub eps: f64,
}

impl LayerNorm2d {
    /// eps 1e-5, elementwise affine.
    pub fn new(num_channels: usize) -> Result<LayerNorm2d> {
        LayerNorm2d::with(num_channels, 1e-5, true)
    }
    /// A layer with explicit `eps` and affine choice.
    pub fn with(num_channels: usize, eps: f64, elementwise_affine: bool) -> Result<LayerNorm2d> {
        let (weight, bias) = affine(&[num_channels], elementwise_affine)?;
        Ok(LayerNorm2d {
            weight,
            bias,
            num_channels,
            eps,
        })
    }
    /// Normalise an `(N, C, ...)` input over axis 1; errors when axis 1 is not `C`.
    pub fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let s = x.shape();
        let c = self.num_channels;
        if s.len() < 2 || s[1] != c {
            bail!(Shape, "LayerNorm2d: input {s:?} must be (N, {c}, ...)");
        }
        let out = normalize(&x.to_float("LayerNorm2d")?, &[1], self.eps)?;
        affine_per_channel(out, &self.weight, &self.bias)
    }
}

/// Root-mean-square normalisation over the last dim: `x / sqrt(mean(x²) + eps)`, then
/// `* weight` (ones, learned) when `elementwise_affine`. f16 inputs are normalised in f32 and
/// cast back. As tinygrad, eps defaults to 1e-6 (PyTorch's `RMSNorm` takes the dtype's machine
/// epsilon).
pub struct RmsNorm {
    /// Scale (ones of `dim`), learned; `None` without affine.
    pub weight: Option<Tensor>,
    /// Size of the last axis.
    pub dim: usize,
    /// Added to the mean square before the square root.
    pub eps: f64,
}

impl RmsNorm {
    /// eps 1e-6, elementwise affine.
    pub fn new(dim: usize) -> Result<RmsNorm> {
        RmsNorm::with(dim, 1e-6, true)
    }
    /// A layer with explicit `eps` and affine choice.
    pub fn with(dim: usize, eps: f64, elementwise_affine: bool) -> Result<RmsNorm> {
        let weight = elementwise_affine
            .then(|| filled(&[dim], 1.0, default_float(), true))
            .transpose()?;
        Ok(RmsNorm { weight, dim, eps })
    }
    /// Normalise `x` over its last axis; errors when it is not `dim`.
    pub fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let s = x.shape();
        if s.last() != Some(&self.dim) {
            bail!(
                Shape,
                "RMSNorm: the last dim of input {s:?} must be {}",
                self.dim
            );
        }
        let xf = x.to_float("RMSNorm")?;
        let mut out = xf.mul(&xf.square()?.mean(-1, true)?.add(self.eps)?.rsqrt()?)?;
        if x.dtype().is_float() {
            out = out.cast(x.dtype())?;
        }
        match &self.weight {
            Some(w) => out.mul(w),
            None => Ok(out),
        }
    }
}

/// One step of a long short-term memory: from the input `x` (N, input_size) and the state
/// `(h, c)` (each (N, hidden_size); zeros when absent), the gates
/// `i, f, g, o = split4(x Wᵢₕᵀ + bᵢₕ + h Wₕₕᵀ + bₕₕ)` give `c' = σ(f)·c + σ(i)·tanh(g)` and
/// `h' = σ(o)·tanh(c')`. Weights `weight_ih` (4·hidden, input) and `weight_hh` (4·hidden,
/// hidden) are uniform in ±1/sqrt(hidden); the biases (4·hidden) start at zero, as tinygrad
/// (PyTorch draws them like the weights).
pub struct LstmCell {
    /// (4·hidden, input), learned.
    pub weight_ih: Tensor,
    /// (4·hidden, hidden), learned.
    pub weight_hh: Tensor,
    /// (4·hidden), learned; `None` without bias.
    pub bias_ih: Option<Tensor>,
    /// (4·hidden), learned; `None` without bias.
    pub bias_hh: Option<Tensor>,
    /// Features of the input.
    pub input_size: usize,
    /// Features of the state.
    pub hidden_size: usize,
}

impl LstmCell {
    /// A cell from `input_size` to `hidden_size` features, with biases.
    pub fn new(input_size: usize, hidden_size: usize) -> Result<LstmCell> {
        LstmCell::with(input_size, hidden_size, true)
    }
    /// A cell with or without biases.
    pub fn with(input_size: usize, hidden_size: usize, bias: bool) -> Result<LstmCell> {
        let (i, h) = (input_size, hidden_size);
        let zeros = || filled(&[4 * h], 0.0, default_float(), true);
        Ok(LstmCell {
            weight_ih: init(&[4 * h, i], h)?,
            weight_hh: init(&[4 * h, h], h)?,
            bias_ih: bias.then(zeros).transpose()?,
            bias_hh: bias.then(zeros).transpose()?,
            input_size,
            hidden_size,
        })
    }
    /// `(h', c')` from `x` and the state `(h, c)`.
    pub fn forward(&self, x: &Tensor, hc: Option<(&Tensor, &Tensor)>) -> Result<(Tensor, Tensor)> {
        let s = x.shape();
        let (i, h) = (self.input_size, self.hidden_size);
        if s.len() != 2 || s[1] != i {
            bail!(Shape, "LSTMCell: input {s:?} must be (N, {i})");
        }
        let x = x.to_float("LSTMCell")?;
        let zeros;
        let (h0, c0) = match hc {
            Some((h0, c0)) => {
                if h0.shape() != [s[0], h] || c0.shape() != [s[0], h] {
                    bail!(
                        Shape,
                        "LSTMCell: state {:?} and {:?} must both be ({}, {h}) for input {s:?}",
                        h0.shape(),
                        c0.shape(),
                        s[0]
                    );
                }
                (h0.clone(), c0.clone())
            }
            None => {
                zeros = x.const_shaped(0.0, x.dtype(), &[s[0], h]);
                (zeros.clone(), zeros)
            }
        };
        let gates = x
            .linear(&self.weight_ih.t()?, self.bias_ih.as_ref())?
            .add(&h0.linear(&self.weight_hh.t()?, self.bias_hh.as_ref())?)?;
        let g = gates.chunk(4, 1)?;
        let c = g[1]
            .sigmoid()?
            .mul(&c0)?
            .add(&g[0].sigmoid()?.mul(&g[2].tanh()?)?)?;
        let h = g[3].sigmoid()?.mul(&c.tanh()?)?;
        Ok((h, c))
    }
}

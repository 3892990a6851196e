//! Layers: plain structs holding their parameters as Tensors, initialised like tinygrad
//! (uniform in ±1/sqrt(fan_in)).
//!
//! `Conv2d` and `Linear` hold learned weights; `BatchNorm`, `LayerNorm` and `GroupNorm`
//! normalise (affine weight 1 and bias 0 at start); `Embedding` looks rows up by integer index.
//! Every layer has `forward(&self, x) -> Result<Tensor>`, and every learned parameter is a
//! realized buffer with `requires_grad` on. `state` collects the tensors of a model by name
//! (state dicts, parameters, safetensors files, PyTorch checkpoints). `gpt` builds a GPT from
//! these layers, with KV-cache generation.

pub mod datasets;
pub mod gpt;
pub mod optim;
mod pickle;
pub mod state;
mod torch_load;
mod zip;

use crate::dtype::DType;
use crate::error::{bail, Result};
use crate::tensor::functional::{Conv2dOpts, Padding};
use crate::tensor::Tensor;

fn init(shape: &[usize], fan_in: usize) -> Result<Tensor> {
    let b = 1.0 / (fan_in as f64).sqrt();
    let t = Tensor::uniform(shape, -b, b)?.realize()?;
    t.set_requires_grad(true);
    Ok(t)
}

/// A 2-D convolution layer: weight (out, in/groups, kh, kw) and optional bias (out).
pub struct Conv2d {
    pub weight: Tensor,
    pub bias: Option<Tensor>,
    pub opts: Conv2dOpts,
}

impl Conv2d {
    pub fn new(cin: usize, cout: usize, kernel: (usize, usize)) -> Result<Conv2d> {
        Conv2d::with(cin, cout, kernel, Conv2dOpts::default(), true)
    }
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
    pub fn forward(&self, x: &Tensor) -> Result<Tensor> {
        x.conv2d(&self.weight, self.bias.as_ref(), &self.opts)
    }
}

/// A fully connected layer: weight (out, in), bias (out); `y = x W^T + b`.
pub struct Linear {
    pub weight: Tensor,
    pub bias: Option<Tensor>,
}

impl Linear {
    pub fn new(cin: usize, cout: usize) -> Result<Linear> {
        Linear::with(cin, cout, true)
    }
    pub fn with(cin: usize, cout: usize, bias: bool) -> Result<Linear> {
        let weight = init(&[cout, cin], cin)?;
        let bias = if bias {
            Some(init(&[cout], cin)?)
        } else {
            None
        };
        Ok(Linear { weight, bias })
    }
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
    pub weight: Option<Tensor>,
    pub bias: Option<Tensor>,
    pub running_mean: Tensor,
    pub running_var: Tensor,
    pub num_batches_tracked: Tensor,
    pub eps: f64,
    pub momentum: f64,
}

impl BatchNorm {
    /// `num_features` channels, eps 1e-5, momentum 0.1, affine.
    pub fn new(num_features: usize) -> Result<BatchNorm> {
        BatchNorm::with(num_features, 1e-5, 0.1, true)
    }
    pub fn with(num_features: usize, eps: f64, momentum: f64, affine: bool) -> Result<BatchNorm> {
        let c = [num_features];
        let (weight, bias) = if affine {
            (
                Some(filled(&c, 1.0, DType::F32, true)?),
                Some(filled(&c, 0.0, DType::F32, true)?),
            )
        } else {
            (None, None)
        };
        Ok(BatchNorm {
            weight,
            bias,
            running_mean: filled(&c, 0.0, DType::F32, false)?,
            running_var: filled(&c, 1.0, DType::F32, false)?,
            num_batches_tracked: filled(&[], 0.0, DType::I32, false)?,
            eps,
            momentum,
        })
    }
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
    pub weight: Option<Tensor>,
    pub bias: Option<Tensor>,
    pub normalized_shape: Vec<usize>,
    pub eps: f64,
}

impl LayerNorm {
    /// eps 1e-5, elementwise affine.
    pub fn new(normalized_shape: &[usize]) -> Result<LayerNorm> {
        LayerNorm::with(normalized_shape, 1e-5, true)
    }
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
                Some(filled(normalized_shape, 1.0, DType::F32, true)?),
                Some(filled(normalized_shape, 0.0, DType::F32, true)?),
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
    pub weight: Option<Tensor>,
    pub bias: Option<Tensor>,
    pub num_groups: usize,
    pub num_channels: usize,
    pub eps: f64,
}

impl GroupNorm {
    /// eps 1e-5, affine.
    pub fn new(num_groups: usize, num_channels: usize) -> Result<GroupNorm> {
        GroupNorm::with(num_groups, num_channels, 1e-5, true)
    }
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
                Some(filled(&c, 1.0, DType::F32, true)?),
                Some(filled(&c, 0.0, DType::F32, true)?),
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
    pub weight: Tensor,
    pub vocab_size: usize,
    pub embed_size: usize,
}

impl Embedding {
    pub fn new(vocab_size: usize, embed_size: usize) -> Result<Embedding> {
        let b = (6.0 / (vocab_size as f64 + embed_size as f64)).sqrt();
        let weight = Tensor::uniform(&[vocab_size, embed_size], -b, b)?.realize()?;
        weight.set_requires_grad(true);
        Ok(Embedding {
            weight,
            vocab_size,
            embed_size,
        })
    }
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

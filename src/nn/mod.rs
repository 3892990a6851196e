//! Layers: plain structs holding their parameters as Tensors, initialised like tinygrad
//! (uniform in ±1/sqrt(fan_in)).

use crate::error::{bail, Result};
use crate::functional::{Conv2dOpts, Padding};
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

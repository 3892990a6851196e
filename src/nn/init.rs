//! Initialisers as `Tensor` constructors, tinygrad's `Tensor.kaiming_uniform`, `kaiming_normal`,
//! `glorot_uniform` and `scaled_uniform` (f32, drawn on the device like `Tensor::rand`). As
//! tinygrad, the fan-in of a shape is the product of all its dims but the first (a `Linear`
//! weight `(out, in)`: `in`; a conv weight `(out, in/groups, kh, kw)`: `in/groups · kh · kw`).

use crate::error::{bail, Result};
use crate::tensor::Tensor;

/// The product of the dims after the first (1 for a 1-D shape); an error for a 0-d one.
fn fan_in(op: &str, shape: &[usize]) -> Result<f64> {
    if shape.is_empty() {
        bail!(Shape, "{op}: the shape needs at least one dim, got []");
    }
    Ok(shape[1..].iter().map(|&d| d as f64).product())
}

/// The negative slope `a` of a leaky ReLU must be a finite number.
fn gain(op: &str, a: f64) -> Result<f64> {
    if !a.is_finite() {
        bail!(Other, "{op}: the slope a must be a finite number, got {a}");
    }
    Ok(1.0 + a * a)
}

impl Tensor {
    /// Uniform in ±`1/sqrt(numel)` (tinygrad's `scaled_uniform`: the bound uses every dim).
    pub fn scaled_uniform(shape: &[usize]) -> Result<Tensor> {
        let n: f64 = shape.iter().map(|&d| d as f64).product();
        Tensor::uniform(shape, -1.0, 1.0)?.mul(n.powf(-0.5))
    }
    /// Glorot (Xavier) uniform: in ±`sqrt(6 / (shape[0] + fan_in))`. As tinygrad (and Keras
    /// for 2-D shapes); PyTorch's `xavier_uniform_` counts the receptive field in both fans.
    pub fn glorot_uniform(shape: &[usize]) -> Result<Tensor> {
        let fan = fan_in("glorot_uniform", shape)?;
        let b = (6.0 / (shape[0] as f64 + fan)).sqrt();
        Tensor::uniform(shape, -b, b)
    }
    /// Kaiming (He) uniform for a leaky ReLU of slope `a`: in ±`sqrt(6 / ((1 + a²) · fan_in))`.
    /// tinygrad's default `a` is 0.01 (PyTorch's `kaiming_uniform_` has 0).
    pub fn kaiming_uniform(shape: &[usize], a: f64) -> Result<Tensor> {
        let op = "kaiming_uniform";
        let b = (6.0 / gain(op, a)? / fan_in(op, shape)?).sqrt();
        Tensor::uniform(shape, -b, b)
    }
    /// Kaiming (He) normal for a leaky ReLU of slope `a`: mean 0, standard deviation
    /// `sqrt(2 / ((1 + a²) · fan_in))` (tinygrad's default `a` is 0.01).
    pub fn kaiming_normal(shape: &[usize], a: f64) -> Result<Tensor> {
        let op = "kaiming_normal";
        let std = (2.0 / gain(op, a)? / fan_in(op, shape)?).sqrt();
        Tensor::randn(shape)?.mul(std)
    }
}

//! Elementwise math beyond the primitives, built from them as tinygrad builds it: the error
//! function and exact GELU, inverse trigonometric and hyperbolic functions, `copysign`,
//! `logaddexp`, `lerp`, the smaller activations, and the float predicates (`isnan`, `isinf`,
//! `isfinite`, `isclose`). Each is a composition, so its gradient comes from the primitives'.

use super::{Operand, Tensor};
use crate::error::{bail, Result};
use std::f64::consts::{FRAC_PI_2, FRAC_PI_4, LOG10_2};

/// `c0 + c1 x + c2 x^2 + ...` by Horner's rule (`coeffs` from the highest degree down).
fn poly(x: &Tensor, coeffs: &[f64]) -> Result<Tensor> {
    let mut acc = x.mul(0.0)?.add(coeffs[0])?;
    for &c in &coeffs[1..] {
        acc = acc.mul(x)?.add(c)?;
    }
    Ok(acc)
}

impl Tensor {
    /// The error function, with Abramowitz and Stegun's formula 7.1.26 (absolute error below
    /// 1.5e-7, as tinygrad's).
    pub fn erf(&self) -> Result<Tensor> {
        let x = self.to_float("erf")?;
        // |x| by selection, so that the derivative at 0 is the x branch's (abs's is 0 there).
        let neg = x.lt(0.0)?;
        let a = neg.where_(&x.neg()?, &x)?;
        let t = a.mul(0.3275911)?.add(1.0)?.reciprocal()?;
        let p = poly(
            &t,
            &[
                1.061405429,
                -1.453152027,
                1.421413741,
                -0.284496736,
                0.254829592,
            ],
        )?;
        let y = t
            .mul(&p)?
            .mul(&x.square()?.neg()?.exp()?)?
            .neg()?
            .add(1.0)?;
        neg.where_(&y.neg()?, &y)
    }
    /// GELU with the error function, `x * (1 + erf(x / sqrt 2)) / 2` (PyTorch's default; `gelu`
    /// is the tanh approximation, as tinygrad's).
    pub fn gelu_erf(&self) -> Result<Tensor> {
        let x = self.to_float("gelu_erf")?;
        let e = x.mul(std::f64::consts::FRAC_1_SQRT_2)?.erf()?;
        x.mul(0.5)?.mul(&e.add(1.0)?)
    }
    /// `x * sigmoid(1.702 x)` (CLIP's GELU).
    pub fn quick_gelu(&self) -> Result<Tensor> {
        self.mul(&self.mul(1.702)?.sigmoid()?)
    }
    /// The base-10 logarithm, elementwise.
    pub fn log10(&self) -> Result<Tensor> {
        self.log2()?.mul(LOG10_2)
    }
    /// Arc tangent: reduced to `[0, tan(pi/8)]` (through `1/x` above 1 and `(x-1)/(x+1)` above
    /// tan(pi/8)), then Cephes' single-precision polynomial (relative error about 1e-7).
    pub fn atan(&self) -> Result<Tensor> {
        let x = self.to_float("atan")?;
        let neg = x.lt(0.0)?;
        let a = neg.where_(&x.neg()?, &x)?;
        let big = a.gt(1.0)?;
        // The branch not taken must stay finite: 1/0 there would poison the gradient.
        let a1 = big.where_(&big.where_(&a, 1.0)?.reciprocal()?, &a)?;
        let mid = a1.gt(std::f64::consts::SQRT_2 - 1.0)?;
        let r = mid.where_(&a1.sub(1.0)?.div(&a1.add(1.0)?)?, &a1)?;
        let z = r.square()?;
        let p = poly(
            &z,
            &[
                8.05374449538e-2,
                -1.38776856032e-1,
                1.99777106478e-1,
                -3.33329491539e-1,
            ],
        )?;
        let p = p.mul(&z)?.mul(&r)?.add(&r)?;
        let p = mid.where_(&p.add(FRAC_PI_4)?, &p)?;
        let p = big.where_(&p.neg()?.add(FRAC_PI_2)?, &p)?;
        neg.where_(&p.neg()?, &p)
    }
    /// Arc sine, `atan(x / sqrt((1 - x)(1 + x)))`; NaN outside [-1, 1].
    pub fn asin(&self) -> Result<Tensor> {
        let x = self.to_float("asin")?;
        let c = x.neg()?.add(1.0)?.mul(&x.add(1.0)?)?.sqrt()?;
        x.div(&c)?.atan()
    }
    /// Arc cosine, `pi/2 - asin(x)`.
    pub fn acos(&self) -> Result<Tensor> {
        self.asin()?.neg()?.add(FRAC_PI_2)
    }
    /// The hyperbolic sine, elementwise.
    pub fn sinh(&self) -> Result<Tensor> {
        let x = self.to_float("sinh")?;
        x.exp()?.sub(&x.neg()?.exp()?)?.mul(0.5)
    }
    /// The hyperbolic cosine, elementwise.
    pub fn cosh(&self) -> Result<Tensor> {
        let x = self.to_float("cosh")?;
        x.exp()?.add(&x.neg()?.exp()?)?.mul(0.5)
    }
    /// `log(x + sqrt(x^2 + 1))`, computed on `|x|` and given the sign of `x` (no cancellation
    /// for negative x).
    pub fn asinh(&self) -> Result<Tensor> {
        let x = self.to_float("asinh")?;
        let neg = x.lt(0.0)?;
        let a = neg.where_(&x.neg()?, &x)?;
        let y = a.add(&a.square()?.add(1.0)?.sqrt()?)?.log()?;
        neg.where_(&y.neg()?, &y)
    }
    /// `log(x + sqrt(x^2 - 1))`; NaN below 1.
    pub fn acosh(&self) -> Result<Tensor> {
        let x = self.to_float("acosh")?;
        x.add(&x.square()?.sub(1.0)?.sqrt()?)?.log()
    }
    /// `log((1 + x) / (1 - x)) / 2`; ±inf at ±1, NaN beyond.
    pub fn atanh(&self) -> Result<Tensor> {
        let x = self.to_float("atanh")?;
        x.add(1.0)?.div(&x.neg()?.add(1.0)?)?.log()?.mul(0.5)
    }
    /// `|self|` with the sign of `other` (a negative zero counts as negative).
    pub fn copysign(&self, other: impl Into<Operand>) -> Result<Tensor> {
        let (a, b) = self.broadcast_pair("copysign", other)?;
        let a = a.to_float("copysign")?;
        let b = b.to_float("copysign")?;
        let neg = b
            .lt(0.0)?
            .logical_or(&b.eq(0.0)?.logical_and(&b.reciprocal()?.lt(0.0)?)?)?;
        let mag = a.abs()?;
        neg.where_(&mag.neg()?, &mag)
    }
    /// `log(exp(self) + exp(other))` without overflow.
    pub fn logaddexp(&self, other: impl Into<Operand>) -> Result<Tensor> {
        let (a, b) = self.broadcast_pair("logaddexp", other)?;
        let (a, b) = (a.to_float("logaddexp")?, b.to_float("logaddexp")?);
        let m = a.maximum(&b)?.detach();
        // Both infinite with the same sign: their difference is NaN, the answer is m.
        let m_safe = m.abs()?.eq(f64::INFINITY)?.where_(0.0, &m)?;
        let s = a.sub(&m_safe)?.exp()?.add(&b.sub(&m_safe)?.exp()?)?.log()?;
        s.add(&m_safe)
    }
    /// `self + (end - self) * weight`.
    pub fn lerp(&self, end: &Tensor, weight: impl Into<Operand>) -> Result<Tensor> {
        let d = end.sub(self)?;
        self.add(&d.mul(weight)?)
    }
    /// `max(0, x) + min(0, alpha (exp(x / alpha) - 1))`.
    pub fn celu(&self, alpha: f64) -> Result<Tensor> {
        if alpha == 0.0 || !alpha.is_finite() {
            bail!(
                Shape,
                "celu: alpha must be finite and non-zero, got {alpha}"
            );
        }
        let x = self.to_float("celu")?;
        let pos = x.gt(0.0)?;
        let e = pos
            .where_(0.0, &x)?
            .div(alpha)?
            .exp()?
            .sub(1.0)?
            .mul(alpha)?;
        pos.where_(&x, &e)
    }
    /// Scaled ELU with the constants of Klambauer et al. (PyTorch's and tinygrad's).
    pub fn selu(&self) -> Result<Tensor> {
        const ALPHA: f64 = 1.673_263_242_354_377_3;
        const SCALE: f64 = 1.050_700_987_355_480_5;
        self.elu(ALPHA)?.mul(SCALE)
    }
    /// `log(sigmoid(x)) = -softplus(-x)`.
    pub fn logsigmoid(&self) -> Result<Tensor> {
        self.neg()?.softplus()?.neg()
    }
    /// `x / (1 + |x|)`.
    pub fn softsign(&self) -> Result<Tensor> {
        self.div(&self.abs()?.add(1.0)?)
    }

    // ---- float predicates --------------------------------------------------------------

    /// True where the value is NaN (never for integer tensors).
    pub fn isnan(&self) -> Result<Tensor> {
        self.ne(self)
    }
    /// True where the value is +inf or -inf (or only one of them with `pos`/`neg` false).
    pub fn isinf(&self, detect_positive: bool, detect_negative: bool) -> Result<Tensor> {
        let pos = self.eq(f64::INFINITY)?;
        let neg = self.eq(f64::NEG_INFINITY)?;
        match (detect_positive, detect_negative) {
            (true, true) => pos.logical_or(&neg),
            (true, false) => Ok(pos),
            (false, true) => Ok(neg),
            (false, false) => Ok(self.const_shaped(0.0, crate::DType::Bool, &self.shape())),
        }
    }
    /// True where the value is neither infinite nor NaN.
    pub fn isfinite(&self) -> Result<Tensor> {
        self.isinf(true, true)?
            .logical_or(&self.isnan()?)?
            .logical_not()
    }
    /// `|self - other| <= atol + rtol * |other|` elementwise (equal infinities are close; NaNs
    /// only with `equal_nan`), as numpy's and tinygrad's `isclose`.
    pub fn isclose(
        &self,
        other: impl Into<Operand>,
        rtol: f64,
        atol: f64,
        equal_nan: bool,
    ) -> Result<Tensor> {
        let (a, b) = self.broadcast_pair("isclose", other)?;
        let within =
            a.sub(&b)?
                .abs()?
                .le(&b.abs()?.to_float("isclose")?.mul(rtol)?.add(atol)?)?;
        let close = within.logical_or(&a.eq(&b)?)?;
        if equal_nan {
            close.logical_or(&a.isnan()?.logical_and(&b.isnan()?)?)
        } else {
            Ok(close)
        }
    }
    /// Whether every element is close (`isclose`), as a 0-d bool tensor.
    pub fn allclose(
        &self,
        other: impl Into<Operand>,
        rtol: f64,
        atol: f64,
        equal_nan: bool,
    ) -> Result<Tensor> {
        self.isclose(other, rtol, atol, equal_nan)?.all((), false)
    }
}

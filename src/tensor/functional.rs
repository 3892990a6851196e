//! Neural-network functions on `Tensor`: matmul/linear, dropout, and the losses (convolutions
//! and pooling are in `conv.rs`).

use super::Tensor;
use crate::dtype::DType;
use crate::error::{bail, Result};

pub use super::conv::{Conv2dOpts, Padding};

/// How a loss reduces over the batch.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Reduction {
    None,
    Sum,
    #[default]
    Mean,
}

/// Options of `sparse_categorical_crossentropy`.
#[derive(Clone, Copy, Debug, PartialEq, Default)]
pub struct CrossEntropyOpts {
    /// Labels equal to this contribute nothing (and are not counted by the mean).
    pub ignore_index: Option<i64>,
    pub label_smoothing: f64,
    pub reduction: Reduction,
}

fn reduce_loss(x: &Tensor, r: Reduction) -> Result<Tensor> {
    match r {
        Reduction::None => Ok(x.clone()),
        Reduction::Sum => x.sum((), false),
        Reduction::Mean => x.mean((), false),
    }
}

impl Tensor {
    /// Matrix product with numpy semantics (1-D operands, broadcast batch dims).
    pub fn matmul(&self, rhs: &Tensor) -> Result<Tensor> {
        let (sa, sb) = (self.shape(), rhs.shape());
        if sa.is_empty() || sb.is_empty() {
            bail!(
                Shape,
                "matmul: operands must have at least one dim, got {sa:?} and {sb:?}"
            );
        }
        let a = if sa.len() == 1 {
            self.unsqueeze(0)?
        } else {
            self.clone()
        };
        let b = if sb.len() == 1 {
            rhs.unsqueeze(1)?
        } else {
            rhs.clone()
        };
        let (ash, bsh) = (a.shape(), b.shape());
        let k = ash[ash.len() - 1];
        if bsh[bsh.len() - 2] != k {
            bail!(
                Shape,
                "matmul: shapes {sa:?} and {sb:?} do not match (inner dims {k} and {})",
                bsh[bsh.len() - 2]
            );
        }
        if a.dtype() != b.dtype() {
            bail!(
                DType,
                "matmul: dtypes {} and {} differ",
                a.dtype(),
                b.dtype()
            );
        }
        // (..., n, 1, k) * (..., 1, m, k) summed over k.
        let a = a.unsqueeze(-2)?;
        let b = b.transpose(-1, -2)?.unsqueeze(-3)?;
        let mut out = a.mul(&b)?.sum(-1, false)?;
        if sa.len() == 1 {
            out = out.squeeze(Some(-2))?;
        }
        if sb.len() == 1 {
            out = out.squeeze(Some(-1))?;
        }
        Ok(out)
    }
    pub fn dot(&self, rhs: &Tensor) -> Result<Tensor> {
        self.matmul(rhs)
    }
    /// `self @ weight + bias` with weight (in, out).
    pub fn linear(&self, weight: &Tensor, bias: Option<&Tensor>) -> Result<Tensor> {
        let x = self.matmul(weight)?;
        match bias {
            Some(b) => x.add(b),
            None => Ok(x),
        }
    }

    /// Zero elements with probability `p` and scale the rest by 1/(1-p), in training mode only.
    pub fn dropout(&self, p: f64) -> Result<Tensor> {
        if !(0.0..=1.0).contains(&p) {
            bail!(Shape, "dropout: probability {p} is outside [0, 1]");
        }
        if !crate::context::training() || p == 0.0 {
            return Ok(self.clone());
        }
        if p == 1.0 {
            return Ok(self.zeros_like());
        }
        // Drawn on one device and split like `self`, so the mask is the one the same draw
        // gives an unsharded tensor. The mask is its own buffer (one byte an element, as
        // tinygrad's `contiguous` mask): the backward reads it where it would otherwise run the
        // random generator again inside the input gradient's reduce, scalar code there (the
        // elementwise kernel that draws it vectorizes).
        let keep = self
            .placed_like(Tensor::rand_on(&self.shape(), self.device())?)?
            .ge(p)?
            .contiguous();
        keep.where_(&self.mul(1.0 / (1.0 - p))?, 0.0)
    }

    /// Cross-entropy of logits (last axis = classes) against integer labels.
    pub fn sparse_categorical_crossentropy(
        &self,
        labels: &Tensor,
        opts: &CrossEntropyOpts,
    ) -> Result<Tensor> {
        let s = self.shape();
        let ls = labels.shape();
        if s.is_empty() || ls != s[..s.len() - 1] {
            bail!(Shape, "sparse_categorical_crossentropy: labels {ls:?} do not match logits {s:?} (classes on the last axis)");
        }
        if labels.dtype().is_float() {
            bail!(
                DType,
                "sparse_categorical_crossentropy: labels must be integers, got {}",
                labels.dtype()
            );
        }
        let c = s[s.len() - 1];
        let y = labels.cast(DType::I32)?;
        let logp = self.log_softmax(-1)?;
        let mut ar_shape = vec![1usize; ls.len()];
        ar_shape.push(c);
        let onehot = Tensor::iota(c, self.device())
            .reshape_u(&ar_shape)?
            .eq(&y.unsqueeze(-1)?)?;
        let picked = onehot.where_(&logp, 0.0)?.sum(-1, false)?;
        let eps = opts.label_smoothing;
        let per = if eps == 0.0 {
            picked
        } else {
            picked
                .mul(1.0 - eps)?
                .add(&logp.mean(-1, false)?.mul(eps)?)?
        };
        let Some(ii) = opts.ignore_index else {
            return reduce_loss(&per.neg()?, opts.reduction);
        };
        let mask = y.ne(ii)?;
        let per = mask.where_(&per, 0.0)?.neg()?;
        match opts.reduction {
            Reduction::None => Ok(per),
            Reduction::Sum => per.sum((), false),
            Reduction::Mean => per
                .sum((), false)?
                .div(&mask.sum((), false)?.cast(DType::F32)?),
        }
    }
    /// `max(log(x), -100)` for `x >= 0`, with a finite derivative everywhere: the log is taken
    /// of 1 where `x == 0`, so that the branch the clamp does not take cannot turn its zero
    /// gradient into 0·inf = NaN.
    fn clamped_log(&self) -> Result<Tensor> {
        let pos = self.gt(0.0)?;
        pos.where_(&pos.where_(self, 1.0)?.log()?, -100.0)?
            .maximum(-100.0)
    }
    /// Binary cross-entropy of probabilities (logs clamped at -100, like PyTorch). Where a
    /// probability is exactly 0 or 1 the gradient is that of the clamped terms (finite, 0
    /// through a saturated clamp); PyTorch divides by `max(p (1 - p), 1e-12)` instead.
    pub fn binary_crossentropy(&self, y: &Tensor, reduction: Reduction) -> Result<Tensor> {
        if self.shape() != y.shape() {
            bail!(
                Shape,
                "binary_crossentropy: prediction {:?} and target {:?} differ",
                self.shape(),
                y.shape()
            );
        }
        let lp = self.clamped_log()?;
        let lq = self.neg()?.add(1.0)?.clamped_log()?;
        let l = y.mul(&lp)?.add(&y.neg()?.add(1.0)?.mul(&lq)?)?.neg()?;
        reduce_loss(&l, reduction)
    }
    /// Binary cross-entropy on logits, computed stably.
    pub fn binary_crossentropy_logits(&self, y: &Tensor, reduction: Reduction) -> Result<Tensor> {
        if self.shape() != y.shape() {
            bail!(
                Shape,
                "binary_crossentropy_logits: logits {:?} and target {:?} differ",
                self.shape(),
                y.shape()
            );
        }
        // max(x, 0) rather than relu: its tie at 0 gives sigmoid(0) - y there, as PyTorch.
        let l = self
            .maximum(0.0)?
            .sub(&self.mul(y)?)?
            .add(&self.log1p_exp_neg_abs()?)?;
        reduce_loss(&l, reduction)
    }
    /// Mean squared error.
    pub fn mse(&self, y: &Tensor, reduction: Reduction) -> Result<Tensor> {
        if self.shape() != y.shape() {
            bail!(
                Shape,
                "mse: prediction {:?} and target {:?} differ",
                self.shape(),
                y.shape()
            );
        }
        reduce_loss(&self.sub(y)?.square()?, reduction)
    }
}

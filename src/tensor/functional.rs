//! Neural-network functions on `Tensor`: matmul/linear, dropout, and the losses (convolutions
//! and pooling are in `conv.rs`).

use super::{Axes, Tensor};
use crate::dtype::DType;
use crate::error::{bail, Result};

pub use super::conv::{Conv2dOpts, Padding};

/// How a loss reduces over the batch.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Reduction {
    /// Keep one loss per element.
    None,
    /// Sum the losses.
    Sum,
    #[default]
    /// Average the losses (the default).
    Mean,
}

/// Options of `sparse_categorical_crossentropy`.
#[derive(Clone, Copy, Debug, PartialEq, Default)]
pub struct CrossEntropyOpts {
    /// Labels equal to this contribute nothing (and are not counted by the mean).
    pub ignore_index: Option<i64>,
    /// Mix the one-hot target with the uniform distribution by this much (0: none).
    pub label_smoothing: f64,
    /// How the per-sample losses are combined.
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
    /// ```
    /// # wgrad::context::set_default_device(Some(wgrad::Device::Interp));
    /// use wgrad::Tensor;
    /// let a = Tensor::from_slice(&[1.0f32, 2.0, 3.0, 4.0], &[2, 2])?;
    /// let b = Tensor::from_slice(&[1.0f32, 0.0, 0.0, 2.0], &[2, 2])?;
    /// assert_eq!(a.matmul(&b)?.to_vec::<f32>()?, vec![1.0, 4.0, 3.0, 8.0]);
    /// let v = Tensor::from_slice(&[1.0f32, 1.0], &[2])?;
    /// assert_eq!(a.matmul(&v)?.to_vec::<f32>()?, vec![3.0, 7.0]); // [2, 2] @ [2] is [2]
    /// assert!(a.matmul(&Tensor::ones(&[3, 2])?).is_err()); // inner sizes 2 and 3 differ
    /// # Ok::<(), wgrad::Error>(())
    /// ```
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
        let by_columns = columns_in_memory(&b);
        let b = if rows_apart(&b, ash[ash.len() - 2]) {
            b.contiguous()
        } else {
            b
        };
        // The product's axes follow b's order in memory, and so does b's gradient (a reduce
        // over the rows of a, written in the order of the product's axes): a row-major b, such
        // as attention's values, gets its gradient in rows, not transposed for the kernel that
        // reads it next.
        let mut out = if by_columns {
            // (..., n, 1, k) * (..., 1, m, k) summed over k.
            let b = b.transpose(-1, -2)?.unsqueeze(-3)?;
            a.unsqueeze(-2)?.mul(&b)?.sum(-1, false)?
        } else {
            // (..., n, k, 1) * (..., 1, k, m) summed over k.
            a.unsqueeze(-1)?.mul(&b.unsqueeze(-3)?)?.sum(-2, false)?
        };
        if sa.len() == 1 {
            out = out.squeeze(Some(-2))?;
        }
        if sb.len() == 1 {
            out = out.squeeze(Some(-1))?;
        }
        Ok(out)
    }
    /// `matmul` under numpy's other name.
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
            // The count in the loss's own dtype (a float16 loss stays float16).
            Reduction::Mean => per
                .sum((), false)?
                .div(&mask.sum((), false)?.cast(per.dtype())?),
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

    /// Cross-entropy of logits (classes on axis 1, or axis 0 for a 1-D input, as PyTorch's
    /// `F.cross_entropy` and tinygrad's) against class indices (the shape without the class
    /// axis) or class probabilities (the logits' shape), with label smoothing.
    pub fn cross_entropy(
        &self,
        target: &Tensor,
        reduction: Reduction,
        label_smoothing: f64,
    ) -> Result<Tensor> {
        const OP: &str = "cross_entropy";
        let s = self.shape();
        if s.is_empty() {
            bail!(Shape, "{OP}: logits must have a class axis, got a scalar");
        }
        if !(0.0..=1.0).contains(&label_smoothing) {
            bail!(
                Shape,
                "{OP}: label_smoothing {label_smoothing} is outside [0, 1]"
            );
        }
        let c = if s.len() == 1 { 0 } else { 1 };
        let mut without = s.clone();
        without.remove(c);
        let ts = target.shape();
        let y = if ts == s && target.dtype().is_float() {
            target.clone()
        } else if ts == without && !target.dtype().is_float() {
            target.unsqueeze(c as isize)?.one_hot_along(s[c], c)?
        } else {
            bail!(
                Shape,
                "{OP}: target {ts:?} {} is neither class indices {without:?} (integers) nor probabilities {s:?} (floats) for logits {s:?}",
                target.dtype()
            );
        };
        let y = y
            .to_float(OP)?
            .mul(1.0 - label_smoothing)?
            .add(label_smoothing / s[c] as f64)?;
        let per = self
            .log_softmax(c as isize)?
            .mul(&y)?
            .sum(c as isize, false)?
            .neg()?;
        reduce_loss(&per, reduction)
    }

    /// Negative log-likelihood of log-probabilities (classes on axis 1, or 0 for a 1-D input)
    /// at integer `target` classes, each weighted by `weight[class]` if given; `ignore_index`
    /// classes count nothing, and the mean divides by the total weight (PyTorch's `nll_loss`).
    pub fn nll_loss(
        &self,
        target: &Tensor,
        weight: Option<&Tensor>,
        ignore_index: Option<i64>,
        reduction: Reduction,
    ) -> Result<Tensor> {
        const OP: &str = "nll_loss";
        let s = self.shape();
        if s.is_empty() {
            bail!(Shape, "{OP}: input must have a class axis, got a scalar");
        }
        let c = if s.len() == 1 { 0 } else { 1 };
        let mut without = s.clone();
        without.remove(c);
        if target.shape() != without || target.dtype().is_float() {
            bail!(
                Shape,
                "{OP}: target {:?} {} must be integer classes of shape {without:?} for input {s:?}",
                target.shape(),
                target.dtype()
            );
        }
        let y = target.cast(DType::I32)?;
        let picked = self
            .gather(c as isize, &y.unsqueeze(c as isize)?)?
            .squeeze(Some(c as isize))?;
        let mut w = match weight {
            Some(w) => {
                if w.shape() != [s[c]] {
                    bail!(
                        Shape,
                        "{OP}: weight {:?} must have one value per class ({})",
                        w.shape(),
                        s[c]
                    );
                }
                w.gather(0, &y.flatten(0)?)?.reshape_u(&without)?
            }
            None => picked.ones_like(),
        };
        if let Some(ii) = ignore_index {
            w = y.ne(ii)?.where_(&w, 0.0)?;
        }
        let per = picked.mul(&w)?.neg()?;
        match reduction {
            Reduction::Mean => per.sum((), false)?.div(&w.sum((), false)?),
            r => reduce_loss(&per, r),
        }
    }

    /// One-hot of integer indices along `axis` (which has size 1 here and becomes `n`), as
    /// f32.
    fn one_hot_along(&self, n: usize, axis: usize) -> Result<Tensor> {
        let mut ar = vec![1; self.ndim()];
        ar[axis] = n;
        let classes = Tensor::iota(n, self.device()).reshape_u(&ar)?;
        self.cast(DType::I32)?.eq(&classes)?.cast(DType::F32)
    }

    /// Attention: `softmax(q k^T / sqrt(d) + mask) v` with `self` the queries `[.., L, d]`,
    /// `key` `[.., S, d]` and `value` `[.., S, dv]`. `attn_mask` is added to the scores (a bool
    /// mask keeps where true: -inf elsewhere); `is_causal` masks future positions (then no
    /// `attn_mask`); `dropout_p` drops attention weights in training. With `enable_gqa` the
    /// key and value heads (axis -3) repeat to match the query heads. As PyTorch's
    /// `F.scaled_dot_product_attention` and tinygrad's.
    pub fn scaled_dot_product_attention(
        &self,
        key: &Tensor,
        value: &Tensor,
        attn_mask: Option<&Tensor>,
        dropout_p: f64,
        is_causal: bool,
        enable_gqa: bool,
    ) -> Result<Tensor> {
        const OP: &str = "scaled_dot_product_attention";
        let (qs, ks, vs) = (self.shape(), key.shape(), value.shape());
        if qs.len() < 2 || ks.len() < 2 || vs.len() < 2 {
            bail!(
                Shape,
                "{OP}: query {qs:?}, key {ks:?} and value {vs:?} need at least 2 dimensions"
            );
        }
        let d = qs[qs.len() - 1];
        if ks[ks.len() - 1] != d || ks[ks.len() - 2] != vs[vs.len() - 2] {
            bail!(
                Shape,
                "{OP}: query {qs:?}, key {ks:?} and value {vs:?} do not fit ([.., L, d], [.., S, d], [.., S, dv])"
            );
        }
        let (mut key, mut value) = (key.clone(), value.clone());
        if enable_gqa {
            if qs.len() < 3 || ks.len() < 3 || qs[qs.len() - 3] % ks[ks.len() - 3] != 0 {
                bail!(
                    Shape,
                    "{OP}: with enable_gqa the query heads of {qs:?} must be a multiple of the key heads of {ks:?}"
                );
            }
            let r = qs[qs.len() - 3] / ks[ks.len() - 3];
            key = key.repeat_interleave(r, Some(-3))?;
            value = value.repeat_interleave(r, Some(-3))?;
        }
        let scores = self
            .matmul(&key.transpose(-2, -1)?)?
            .mul(1.0 / (d as f64).sqrt())?;
        let (l, s) = (qs[qs.len() - 2], ks[ks.len() - 2]);
        let scores = match (is_causal, attn_mask) {
            (true, Some(_)) => bail!(Shape, "{OP}: give attn_mask or is_causal, not both"),
            (true, None) => {
                let keep = self.const_shaped(1.0, DType::Bool, &[l, s]).tril(0)?;
                keep.where_(&scores, f64::NEG_INFINITY)?
            }
            (false, Some(m)) if m.dtype() == DType::Bool => m.where_(&scores, f64::NEG_INFINITY)?,
            (false, Some(m)) => scores.add(m)?,
            (false, None) => scores,
        };
        scores.softmax(-1)?.dropout(dropout_p)?.matmul(&value)
    }

    /// Layer normalization over `axes` without parameters: `(x - mean) / sqrt(var + eps)`,
    /// the variance biased (tinygrad's and PyTorch's `layer_norm` core).
    pub fn layernorm(&self, axes: impl Into<Axes>, eps: f64) -> Result<Tensor> {
        let axes = axes.into();
        let x = self.to_float("layernorm")?;
        let y = x.sub(&x.mean(axes.clone(), true)?)?;
        y.mul(&y.square()?.mean(axes, true)?.add(eps)?.rsqrt()?)
    }
    /// Batch normalization with given statistics along `axis` (the channels): `(x - mean) *
    /// weight * invstd + bias`, where `mean`, `invstd`, `weight` and `bias` are 1-D over the
    /// channels (tinygrad's `batchnorm`).
    pub fn batchnorm(
        &self,
        weight: Option<&Tensor>,
        bias: Option<&Tensor>,
        mean: &Tensor,
        invstd: &Tensor,
        axis: isize,
    ) -> Result<Tensor> {
        let s = self.shape();
        let a = super::norm_axis("batchnorm", axis, s.len())?;
        let mut cs = vec![1; s.len()];
        cs[a] = s[a];
        let per_channel = |t: &Tensor, what: &str| -> Result<Tensor> {
            if t.shape() != [s[a]] {
                bail!(
                    Shape,
                    "batchnorm: {what} {:?} must have one value per channel ({} on axis {a} of {s:?})",
                    t.shape(),
                    s[a]
                );
            }
            t.reshape_u(&cs)
        };
        let mut x = self.sub(&per_channel(mean, "mean")?)?;
        if let Some(w) = weight {
            x = x.mul(&per_channel(w, "weight")?)?;
        }
        x = x.mul(&per_channel(invstd, "invstd")?)?;
        match bias {
            Some(b) => x.add(&per_channel(b, "bias")?),
            None => Ok(x),
        }
    }
    /// Newton–Schulz iteration of an odd matrix polynomial on the last two axes: `X` scaled to
    /// Frobenius norm 1 (plus `eps`), then `steps` times `X <- p0 X + (p1 A + p2 A^2 + ...) X`
    /// with `A = X X^T` (transposed while taller than wide). Muon's orthogonalisation is
    /// `params = [3.4445, -4.7750, 2.0315]` (tinygrad's `newton_schulz`).
    pub fn newton_schulz(&self, steps: usize, params: &[f64], eps: f64) -> Result<Tensor> {
        let s = self.shape();
        if s.len() < 2 || params.is_empty() {
            bail!(
                Shape,
                "newton_schulz: needs a tensor of at least 2 dimensions and at least one parameter, got {s:?} and {params:?}"
            );
        }
        // Each step adds a few nodes to the lazy graph: a bound keeps a wrong argument (a step
        // count of 2^31 from JavaScript) from filling memory with graph nodes.
        const MAX_STEPS: usize = 1000;
        if steps > MAX_STEPS {
            bail!(
                Shape,
                "newton_schulz: {steps} steps is more than {MAX_STEPS} (each one is a node of the lazy graph)"
            );
        }
        if s[s.len() - 2] > s[s.len() - 1] {
            return self
                .transpose(-2, -1)?
                .newton_schulz(steps, params, eps)?
                .transpose(-2, -1);
        }
        let x = self.to_float("newton_schulz")?;
        let norm = x.square()?.sum([-2, -1], true)?.sqrt()?;
        let mut x = x.div(&norm.add(eps)?)?;
        for _ in 0..steps {
            let gram = x.matmul(&x.transpose(-2, -1)?)?;
            let mut power = gram.clone();
            let mut poly: Option<Tensor> = None;
            for (i, &p) in params[1..].iter().enumerate() {
                if i > 0 {
                    power = gram.matmul(&power)?;
                }
                let term = power.mul(p)?;
                poly = Some(match poly {
                    Some(acc) => acc.add(&term)?,
                    None => term,
                });
            }
            x = match poly {
                Some(poly) => x.mul(params[0])?.add(&poly.matmul(&x)?)?,
                None => x.mul(params[0])?,
            };
        }
        Ok(x)
    }
}

/// Whether `b` (..., k, m) is a view that is contiguous along k, not m: the transpose of a
/// row-major matrix (`x @ W.T` with W stored (out, in), as `nn::Linear` keeps it; attention's
/// `k.T`).
fn columns_in_memory(b: &Tensor) -> bool {
    let (_, st) = crate::schedule::chain(&b.node());
    let [v] = st.views.as_slice() else {
        return false;
    };
    let d = v.shape.len();
    d >= 2 && v.strides[d - 2] != 0 && v.strides[d - 2].abs() < v.strides[d - 1].abs()
}

/// Whether a CPU matmul (kernels shaped for a CPU-kind target: `schedule::register_tiles`)
/// should copy its right operand `b` (..., k, m), read by `n` rows, into (k, m) order first:
/// where it is a view of a buffer in memory or of a reduce (attention's `q @ k.T`, `k` a slice
/// of a projection's output) whose columns are strided and whose k axis is contiguous
/// (`x @ W.T` with W stored (out, in), as `nn::Linear` keeps it), no vector of consecutive
/// outputs loads consecutive elements of it, and each multiply-add's operand is gathered lane
/// by lane. A copy reads and writes it once; the matmul then reads it `n` times with vector
/// loads.
fn rows_apart(b: &Tensor, n: usize) -> bool {
    let node = b.node();
    if !crate::schedule::register_tiles(node.device) || n < 16 || node.is_realized() {
        return false;
    }
    // Only a view of what is read without computing it again (a weight, a projection's output):
    // the backward pass reads it through the copy (`grad::through_copies`).
    let (_, st) = crate::schedule::chain(&node);
    let [v] = st.views.as_slice() else {
        return false;
    };
    let d = v.shape.len();
    // A batch axis broadcast over (stride 0) would be copied once per batch: left alone.
    let batch_broadcast = (0..d.saturating_sub(2)).any(|a| v.strides[a] == 0 && v.shape[a] > 1);
    crate::schedule::read_not_recomputed(&node)
        && !batch_broadcast
        && d >= 2
        && v.shape[d - 1] > 1
        && v.shape[d - 2] > 1
        && v.strides[d - 2] == 1
        && v.strides[d - 1] != 0
}

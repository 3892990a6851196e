//! Reductions on `Tensor`: sum, max and prod are primitives; mean, min, any/all,
//! argmax/argmin, var/std (and with the mean), normalize, softmax, softmin, log_softmax and
//! logsumexp are built from them.

use super::{norm_axis, Axes, Tensor};
use crate::dtype::DType;
use crate::error::{bail, Result};
use crate::ops::{Op, ReduceOp};

impl Tensor {
    fn axes_list(&self, op: &str, axes: Axes) -> Result<Vec<usize>> {
        let n = self.ndim();
        let mut out = match axes {
            Axes::All => (0..n).collect(),
            Axes::Some(v) => v
                .iter()
                .map(|&a| norm_axis(op, a, n))
                .collect::<Result<Vec<_>>>()?,
        };
        out.sort();
        let len = out.len();
        out.dedup();
        if out.len() != len {
            bail!(
                Shape,
                "{op}: repeated axis in reduction over {:?}",
                self.shape()
            );
        }
        Ok(out)
    }

    /// The primitive: reduce `axes` to size 1 (keepdim shape).
    pub(crate) fn reduce_op(&self, op: ReduceOp, axes: &[usize]) -> Tensor {
        let s = self.shape();
        let axes: Vec<usize> = axes.iter().copied().filter(|&a| s[a] != 1).collect();
        if axes.is_empty() {
            return self.clone();
        }
        let mut shape = s.clone();
        for &a in &axes {
            shape[a] = 1;
        }
        let l = self.lazy();
        if l.is_multi() {
            return Tensor::from_lazy(super::multi::reduce(&l, op, &axes, self.dtype()));
        }
        let n = &l.shards[0];
        Tensor::from_node(crate::uop::UOp::new(
            Op::Reduce(op, axes),
            n.dtype,
            shape,
            n.device,
            vec![n.clone()],
        ))
    }

    fn reduce(&self, op: ReduceOp, name: &str, axes: Axes, keepdim: bool) -> Result<Tensor> {
        let ax = self.axes_list(name, axes)?;
        if self.ndim() == 0 {
            return Ok(self.clone());
        }
        let r = self.reduce_op(op, &ax);
        if keepdim {
            return Ok(r);
        }
        let shape: Vec<usize> = r
            .shape()
            .iter()
            .enumerate()
            .filter(|(i, _)| !ax.contains(i))
            .map(|(_, &d)| d)
            .collect();
        r.reshape_u(&shape)
    }

    /// Sum over `axes`; bool and u8 sum as i32.
    /// ```
    /// # wgrad::context::set_default_device(Some(wgrad::Device::Interp));
    /// use wgrad::Tensor;
    /// let x = Tensor::from_slice(&[1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3])?;
    /// assert_eq!(x.sum((), false)?.item::<f32>()?, 21.0);
    /// assert_eq!(x.sum(1, false)?.to_vec::<f32>()?, vec![6.0, 15.0]);
    /// assert_eq!(x.sum(0, true)?.shape(), vec![1, 3]);
    /// assert_eq!(x.mean(-1, false)?.to_vec::<f32>()?, vec![2.0, 5.0]);
    /// assert_eq!(x.max((), false)?.item::<f32>()?, 6.0);
    /// # Ok::<(), wgrad::Error>(())
    /// ```
    pub fn sum(&self, axes: impl Into<Axes>, keepdim: bool) -> Result<Tensor> {
        let x = match self.dtype() {
            DType::Bool | DType::U8 => self.cast(DType::I32)?,
            _ => self.clone(),
        };
        x.reduce(ReduceOp::Sum, "sum", axes.into(), keepdim)
    }
    /// Product over `axes`; bool and u8 multiply as i32. Its gradient is the product of the
    /// other elements, zeros included (PyTorch's).
    pub fn prod(&self, axes: impl Into<Axes>, keepdim: bool) -> Result<Tensor> {
        let x = match self.dtype() {
            DType::Bool | DType::U8 => self.cast(DType::I32)?,
            _ => self.clone(),
        };
        x.reduce(ReduceOp::Prod, "prod", axes.into(), keepdim)
    }
    /// Whether any element is non-zero (true), over `axes`, as bool.
    pub fn any(&self, axes: impl Into<Axes>, keepdim: bool) -> Result<Tensor> {
        self.ne(0)?
            .reduce(ReduceOp::Max, "any", axes.into(), keepdim)
    }
    /// Whether every element is non-zero (true), over `axes`, as bool.
    pub fn all(&self, axes: impl Into<Axes>, keepdim: bool) -> Result<Tensor> {
        self.eq(0)?
            .reduce(ReduceOp::Max, "all", axes.into(), keepdim)?
            .logical_not()
    }
    /// Sum over one axis (removed), keeping the dtype (used by one-hot indexing).
    pub(crate) fn sum_keep_dtype(&self, axis: usize) -> Result<Tensor> {
        self.reduce(ReduceOp::Sum, "sum", Axes::Some(vec![axis as isize]), false)
    }
    /// The mean over `axes` (removed unless `keepdim`), as a float (integers promote to f32).
    pub fn mean(&self, axes: impl Into<Axes>, keepdim: bool) -> Result<Tensor> {
        let axes = axes.into();
        let ax = self.axes_list("mean", axes.clone())?;
        let n: usize = ax.iter().map(|&a| self.shape()[a]).product();
        self.to_float("mean")?.sum(axes, keepdim)?.div(n as f64)
    }
    /// The largest element over `axes` (removed unless `keepdim`).
    pub fn max(&self, axes: impl Into<Axes>, keepdim: bool) -> Result<Tensor> {
        self.reduce(ReduceOp::Max, "max", axes.into(), keepdim)
    }
    /// The smallest element over `axes` (removed unless `keepdim`).
    pub fn min(&self, axes: impl Into<Axes>, keepdim: bool) -> Result<Tensor> {
        if self.dtype().is_unsigned() {
            let dt = self.dtype();
            return self
                .cast(DType::I32)?
                .neg()?
                .max(axes, keepdim)?
                .neg()?
                .cast(dt);
        }
        self.neg()?.max(axes, keepdim)?.neg()
    }
    /// Index of the first maximum along `axis` (the flattened tensor with `None`), as i32.
    pub fn argmax(&self, axis: Option<isize>, keepdim: bool) -> Result<Tensor> {
        let Some(axis) = axis else {
            let r = self.flatten(0)?.argmax(Some(0), false)?;
            return if keepdim {
                r.reshape_u(&vec![1; self.ndim()])
            } else {
                Ok(r)
            };
        };
        let s = self.shape();
        let a = norm_axis("argmax", axis, s.len())?;
        let n = s[a];
        if n == 0 {
            // No element to point at (PyTorch's error; min and max give their identity).
            bail!(
                Shape,
                "argmax: axis {a} of shape {s:?} is empty (argmax and argmin need at least one element)"
            );
        }
        // Compared with its own max: the same bits in both kernels (see `pinned`).
        let x = self.pinned();
        let m = x.max(a as isize, true)?;
        let hit = x.eq(&m)?;
        let mut ar_shape = vec![1usize; s.len()];
        ar_shape[a] = n;
        // n - i is largest for the first hit.
        let rev = Tensor::iota(n, self.device())
            .neg()?
            .add(n as i64)?
            .reshape_u(&ar_shape)?;
        let score = hit.where_(&rev, 0)?;
        let best = score.max(a as isize, keepdim)?;
        best.neg()?.add(n as i64)
    }
    /// The index (i32) of the smallest element along `axis` (of the flattened tensor for `None`);
    /// the first one on ties.
    pub fn argmin(&self, axis: Option<isize>, keepdim: bool) -> Result<Tensor> {
        if let Some(a) = axis {
            norm_axis("argmin", a, self.ndim())?;
        }
        let x = if self.dtype().is_unsigned() {
            self.cast(DType::I32)?
        } else {
            self.clone()
        };
        x.neg()?.argmax(axis, keepdim)
    }
    /// Variance with `correction` (1 = unbiased).
    pub fn var(&self, axes: impl Into<Axes>, keepdim: bool, correction: f64) -> Result<Tensor> {
        let axes = axes.into();
        let ax = self.axes_list("var", axes.clone())?;
        let n: usize = ax.iter().map(|&a| self.shape()[a]).product();
        let x = self.to_float("var")?;
        let d = x.sub(&x.mean(axes.clone(), true)?)?;
        d.square()?
            .sum(axes, keepdim)?
            .div((n as f64 - correction).max(0.0))
    }
    /// `(var, mean)` over `axes`, sharing the mean.
    pub fn var_mean(
        &self,
        axes: impl Into<Axes>,
        keepdim: bool,
        correction: f64,
    ) -> Result<(Tensor, Tensor)> {
        let axes = axes.into();
        Ok((
            self.var(axes.clone(), keepdim, correction)?,
            self.mean(axes, keepdim)?,
        ))
    }
    /// `(std, mean)` over `axes`.
    pub fn std_mean(
        &self,
        axes: impl Into<Axes>,
        keepdim: bool,
        correction: f64,
    ) -> Result<(Tensor, Tensor)> {
        let axes = axes.into();
        Ok((
            self.std(axes.clone(), keepdim, correction)?,
            self.mean(axes, keepdim)?,
        ))
    }
    /// `self / max(||self||_p, eps)` along `axis` (PyTorch's `F.normalize`; p = 2 by default).
    pub fn normalize(&self, p: f64, axis: isize, eps: f64) -> Result<Tensor> {
        norm_axis("normalize", axis, self.ndim())?;
        if p <= 0.0 || p.is_nan() {
            bail!(Shape, "normalize: p must be positive, got {p}");
        }
        let x = self.to_float("normalize")?;
        let norm = if p == f64::INFINITY {
            x.abs()?.max(axis, true)?
        } else {
            x.abs()?.pow(p)?.sum(axis, true)?.pow(1.0 / p)?
        };
        x.div(&norm.maximum(eps)?)
    }
    /// The square root of `var`. Where the variance is 0 the gradient is 0, as in PyTorch (the
    /// chain rule would give var' · sqrt'(0) = 0 · inf).
    pub fn std(&self, axes: impl Into<Axes>, keepdim: bool, correction: f64) -> Result<Tensor> {
        let v = self.var(axes, keepdim, correction)?;
        let zero = v.eq(0.0)?;
        zero.where_(0.0, &zero.where_(1.0, &v)?.sqrt()?)
    }
    /// `exp(x) / sum(exp(x))` along `axis`, computed stably (the maximum subtracted first).
    /// ```
    /// # wgrad::context::set_default_device(Some(wgrad::Device::Interp));
    /// use wgrad::Tensor;
    /// let x = Tensor::from_slice(&[1.0f32, 2.0, 3.0], &[1, 3])?;
    /// let p = x.softmax(-1)?.to_vec::<f32>()?;
    /// assert!((p.iter().sum::<f32>() - 1.0).abs() < 1e-6);
    /// assert!((p[2] - 0.665_240_9).abs() < 1e-6);
    /// # Ok::<(), wgrad::Error>(())
    /// ```
    pub fn softmax(&self, axis: isize) -> Result<Tensor> {
        norm_axis("softmax", axis, self.ndim())?;
        let x = self.to_float("softmax")?;
        let m = x.sub(x.max(axis, true)?.detach())?;
        let e = m.exp()?;
        e.mul(&e.sum(axis, true)?.reciprocal()?)
    }
    /// `softmax(-x)`.
    pub fn softmin(&self, axis: isize) -> Result<Tensor> {
        norm_axis("softmin", axis, self.ndim())?;
        self.to_float("softmin")?.neg()?.softmax(axis)
    }
    /// `log(softmax(x))` along `axis`, computed stably.
    pub fn log_softmax(&self, axis: isize) -> Result<Tensor> {
        norm_axis("log_softmax", axis, self.ndim())?;
        let x = self.to_float("log_softmax")?;
        let m = x.sub(x.max(axis, true)?.detach())?;
        m.sub(&m.exp()?.sum(axis, true)?.log()?)
    }
    /// `log(sum(exp(x)))` over `axes` (removed unless `keepdim`), computed stably.
    pub fn logsumexp(&self, axes: impl Into<Axes>, keepdim: bool) -> Result<Tensor> {
        let axes = axes.into();
        self.axes_list("logsumexp", axes.clone())?;
        let x = self.to_float("logsumexp")?;
        let m = x.max(axes.clone(), true)?.detach();
        let r = x.sub(&m)?.exp()?.sum(axes.clone(), keepdim)?.log()?;
        let m = if keepdim { m } else { m.reshape_u(&r.shape())? };
        r.add(&m)
    }
}

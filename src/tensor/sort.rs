//! Sorting and sampling: `sort`, `argsort`, `topk`, `multinomial`, `randperm`. A sort is a
//! rank count, stable by construction: element `i` goes to place `#{j : x_j before x_i}`, where
//! `j` comes before `i` when it is smaller (larger, descending) or equal and earlier; NaN sorts
//! as the largest value, as in PyTorch. The ranks are one reduce over an `n x n` comparison and
//! the sorted order another, so a row of `n` costs `O(n^2)` comparisons (in two kernels; no
//! `n x n` buffer is stored): meant for rows up to tens of thousands (a vocabulary), as
//! tinygrad's (whose index step is `O(n^2)` too).

use super::{norm_axis, Tensor};
use crate::device::Device;
use crate::dtype::DType;
use crate::error::{bail, Result};
use crate::ops::ReduceOp;

impl Tensor {
    /// Indices of the first `k` places of the stable sort of the last axis, as i32.
    fn sorted_places(&self, descending: bool, k: usize) -> Result<Tensor> {
        let s = self.shape();
        let n = s[s.len() - 1];
        let dev = self.device();
        let xi = self.unsqueeze(-1)?; // [.., i, 1]
        let xj = self.unsqueeze(-2)?; // [.., 1, j]
        let (mut first, mut tie) = if descending {
            (xj.gt(&xi)?, xj.eq(&xi)?)
        } else {
            (xj.lt(&xi)?, xj.eq(&xi)?)
        };
        if self.dtype().is_float() {
            // NaN is the largest value, and NaNs tie.
            let (ni, nj) = (xi.isnan()?, xj.isnan()?);
            let nan_first = if descending {
                nj.logical_and(&ni.logical_not()?)?
            } else {
                ni.logical_and(&nj.logical_not()?)?
            };
            let not_nan = ni.logical_or(&nj)?.logical_not()?;
            first = first.logical_and(&not_nan)?.logical_or(&nan_first)?;
            tie = tie.logical_or(&ni.logical_and(&nj)?)?;
        }
        let i = Tensor::iota(n, dev).reshape_u(&[n, 1])?;
        let j = Tensor::iota(n, dev).reshape_u(&[1, n])?;
        let before = first.logical_or(&tie.logical_and(&j.lt(&i)?)?)?;
        let rank = before.sum(-1, false)?; // [.., i]: the place of element i
                                           // Place p holds the element whose rank is p.
        let places = Tensor::iota(k, dev).reshape_u(&[k, 1])?;
        let hit = rank.unsqueeze(-2)?.eq(&places)?; // [.., p, i]
        let src = Tensor::iota(n, dev).reshape_u(&[1, n])?;
        let idx = hit.where_(&src, 0)?;
        let last = idx.ndim() - 1;
        idx.reduce_op(ReduceOp::Sum, &[last]).squeeze(Some(-1))
    }

    /// The `k` first of a stable sort along `axis`: (values, i32 indices).
    fn sort_first(
        &self,
        op: &str,
        axis: isize,
        descending: bool,
        k: usize,
    ) -> Result<(Tensor, Tensor)> {
        if self.ndim() == 0 {
            return Ok((self.clone(), self.const_like(0.0).cast(DType::I32)?));
        }
        let a = norm_axis(op, axis, self.ndim())? as isize;
        let x = self.transpose(a, -1)?;
        let idx = x.detach().sorted_places(descending, k)?;
        let values = x.gather(-1, &idx)?;
        Ok((values.transpose(a, -1)?, idx.transpose(a, -1)?))
    }

    /// Sort along `axis` (ascending, or descending): (values, i32 indices into `self`). Stable:
    /// equal values keep their order; NaN is the largest value.
    pub fn sort(&self, axis: isize, descending: bool) -> Result<(Tensor, Tensor)> {
        let n = if self.ndim() == 0 {
            1
        } else {
            self.shape()[norm_axis("sort", axis, self.ndim())?]
        };
        self.sort_first("sort", axis, descending, n)
    }
    /// The indices that sort along `axis` (stable), as i32.
    pub fn argsort(&self, axis: isize, descending: bool) -> Result<Tensor> {
        Ok(self.sort(axis, descending)?.1)
    }
    /// The `k` largest (or smallest) values along `axis`, in order, and their i32 indices; equal
    /// values keep their order (as PyTorch's and tinygrad's).
    pub fn topk(&self, k: usize, axis: isize, largest: bool) -> Result<(Tensor, Tensor)> {
        let n = if self.ndim() == 0 {
            1
        } else {
            self.shape()[norm_axis("topk", axis, self.ndim())?]
        };
        if k > n {
            bail!(
                Shape,
                "topk: k = {k} is out of range for {n} elements along axis {axis} of {:?}",
                self.shape()
            );
        }
        self.sort_first("topk", axis, largest, k)
    }

    /// `num_samples` category indices (i32) per row of the weights `self` (1-D `[n]` or 2-D
    /// `[rows, n]`, non-negative, not necessarily normalized), drawn with probability
    /// proportional to the weights, with or without replacement. With replacement each draw
    /// inverts the cumulative weights; without, the categories with the largest
    /// `log(w) + Gumbel` keys are taken (the same distribution as drawing one at a time);
    /// `num_samples` must not exceed the categories of non-zero weight, which is not checked.
    pub fn multinomial(&self, num_samples: usize, replacement: bool) -> Result<Tensor> {
        let s = self.shape();
        if s.is_empty() || s.len() > 2 {
            bail!(
                Shape,
                "multinomial: weights must be 1-D or 2-D, got shape {s:?}"
            );
        }
        let n = s[s.len() - 1];
        if num_samples == 0 {
            bail!(Shape, "multinomial: num_samples must be at least 1");
        }
        if !replacement && num_samples > n {
            bail!(
                Shape,
                "multinomial: cannot draw {num_samples} samples without replacement from {n} categories"
            );
        }
        let w = self.to_float("multinomial")?.detach();
        let w = if s.len() == 1 { w.unsqueeze(0)? } else { w };
        let rows = w.shape()[0];
        let out = if replacement {
            let u = w.placed_like(Tensor::rand_on(&[rows, num_samples], self.device())?)?;
            let cdf = w.cumsum(-1)?;
            let total = cdf.slice(-1, -1, isize::MAX, 1)?;
            let target = u.mul(&total)?.unsqueeze(-1)?; // [rows, samples, 1]
            let below = cdf.unsqueeze(1)?.le(&target)?; // [rows, samples, n]
            below.sum(-1, false)?.minimum((n - 1) as i64)?
        } else {
            let g = w.placed_like(Tensor::rand_on(&[rows, n], self.device())?)?;
            let gumbel = g.log()?.neg()?.log()?.neg()?;
            let keys = w.log()?.add(&gumbel)?;
            keys.topk(num_samples, -1, true)?.1
        };
        if s.len() == 1 {
            out.squeeze(Some(0))
        } else {
            Ok(out)
        }
    }

    /// A random permutation of `0..n` (i32) on the default device.
    pub fn randperm(n: usize) -> Result<Tensor> {
        Tensor::rand_on(&[n], Device::default())?.argsort(0, false)
    }
}

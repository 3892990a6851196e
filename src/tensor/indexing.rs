//! Indexing as Python's `t[...]` (`get`) and assignment into an index (`set`), the scatter
//! family (`scatter`, `scatter_reduce`), masks (`tril`, `triu`, `one_hot`, `masked_fill`) and
//! the selections whose size depends on the data (`masked_select`, `nonzero`).
//!
//! Integers, slices and new axes are views (shrink, pad, reshape, flip: no copy). Tensor
//! indices select by a one-hot mask summed over the indexed axis, which the rewrite rules fold
//! into a direct load, so `x[idx]` reads one element per output as a gather does. Writes are
//! the same masks used the other way: `set` builds the new value of the whole tensor as one
//! elementwise `where` and assigns it in place.

use super::{broadcast_shape, norm_axis, Operand, Tensor};
use crate::dtype::DType;
use crate::error::{bail, Error, ErrorKind, Result};
use crate::ops::{Op, ReduceOp};
use std::ops::{Range, RangeFrom, RangeFull, RangeInclusive, RangeTo, RangeToInclusive};

/// One entry of an index, as in Python's `t[...]`: see [`Tensor::get`] and the [`s!`] macro.
///
/// [`s!`]: crate::s
#[derive(Clone, Debug)]
pub enum Index {
    /// One element along the axis (negative counts from the end); the axis goes away.
    Int(isize),
    /// `start:stop:step`; a missing start or stop is the end the step starts (or stops) at, as
    /// in Python (`::-1` reverses).
    Slice {
        /// First index (negative counts from the end); `None`: the start the step begins at.
        start: Option<isize>,
        /// One past the last index (negative counts from the end); `None`: through the end.
        stop: Option<isize>,
        /// Distance between indices (negative goes backward; not 0).
        step: isize,
    },
    /// A new axis of size 1 (Python's `None`).
    NewAxis,
    /// As many full slices as the axes not indexed otherwise (Python's `...`).
    Ellipsis,
    /// Integer indices along the axis (advanced indexing: the tensors of one index broadcast
    /// together; negative values count from the end; values out of range read 0, as tinygrad).
    Tensor(Tensor),
    /// A list of integer indices, as a tensor index.
    List(Vec<isize>),
}

impl Index {
    /// `start:stop:step`.
    pub fn slice(start: Option<isize>, stop: Option<isize>, step: isize) -> Index {
        Index::Slice { start, stop, step }
    }
    /// A range with a step: `Index::step(1..7, 2)` is `1:7:2`, `Index::step(.., -1)` is `::-1`.
    pub fn step(range: impl Into<Index>, step: isize) -> Index {
        match range.into() {
            Index::Slice { start, stop, .. } => Index::Slice { start, stop, step },
            other => other,
        }
    }
}

/// Python's slice notation `"start:stop:step"` (each part optional: `":"`, `"1:"`, `"::-1"`),
/// `"..."` for the ellipsis, or an integer.
impl std::str::FromStr for Index {
    type Err = Error;
    fn from_str(s: &str) -> Result<Index> {
        let t = s.trim();
        if t == "..." {
            return Ok(Index::Ellipsis);
        }
        let bad = || {
            Error::new(
                ErrorKind::Shape,
                format!("index {s:?} is not an integer, \"...\" or a slice \"start:stop:step\""),
            )
        };
        let part = |p: &str| -> Result<Option<isize>> {
            let p = p.trim();
            if p.is_empty() {
                Ok(None)
            } else {
                p.parse::<isize>().map(Some).map_err(|_| bad())
            }
        };
        let parts: Vec<&str> = t.split(':').collect();
        match parts.as_slice() {
            [i] => part(i)?.map(Index::Int).ok_or_else(bad),
            [a, b] => Ok(Index::slice(part(a)?, part(b)?, 1)),
            [a, b, c] => Ok(Index::slice(part(a)?, part(b)?, part(c)?.unwrap_or(1))),
            _ => Err(bad()),
        }
    }
}

macro_rules! index_from_int {
    ($($t:ty),*) => {$(
        impl From<$t> for Index {
            fn from(i: $t) -> Index {
                Index::Int(i as isize)
            }
        }
        impl From<Range<$t>> for Index {
            fn from(r: Range<$t>) -> Index {
                Index::slice(Some(r.start as isize), Some(r.end as isize), 1)
            }
        }
        impl From<RangeFrom<$t>> for Index {
            fn from(r: RangeFrom<$t>) -> Index {
                Index::slice(Some(r.start as isize), None, 1)
            }
        }
        impl From<RangeTo<$t>> for Index {
            fn from(r: RangeTo<$t>) -> Index {
                Index::slice(None, Some(r.end as isize), 1)
            }
        }
        impl From<RangeInclusive<$t>> for Index {
            fn from(r: RangeInclusive<$t>) -> Index {
                let end = *r.end() as isize;
                // `..=-1` is the end of the axis.
                Index::slice(Some(*r.start() as isize), (end != -1).then_some(end + 1), 1)
            }
        }
        impl From<RangeToInclusive<$t>> for Index {
            fn from(r: RangeToInclusive<$t>) -> Index {
                let end = r.end as isize;
                Index::slice(None, (end != -1).then_some(end + 1), 1)
            }
        }
    )*};
}
index_from_int!(isize, i32, i64, usize);

impl From<RangeFull> for Index {
    fn from(_: RangeFull) -> Index {
        Index::slice(None, None, 1)
    }
}
impl From<Tensor> for Index {
    fn from(t: Tensor) -> Index {
        Index::Tensor(t)
    }
}
impl From<&Tensor> for Index {
    fn from(t: &Tensor) -> Index {
        Index::Tensor(t.clone())
    }
}
impl From<Vec<isize>> for Index {
    fn from(v: Vec<isize>) -> Index {
        Index::List(v)
    }
}
impl From<&[isize]> for Index {
    fn from(v: &[isize]) -> Index {
        Index::List(v.to_vec())
    }
}
impl<const N: usize> From<[i32; N]> for Index {
    fn from(v: [i32; N]) -> Index {
        Index::List(v.iter().map(|&i| i as isize).collect())
    }
}

/// An index for [`Tensor::get`] and [`Tensor::set`], written as in Python: integers, ranges
/// (`1..3`, `..`, `2..`, with a step after a semicolon: `..;-1`, `1..7;2`), `None` (a new axis),
/// `...` and tensors.
///
/// ```
/// use wgrad::{s, Tensor};
/// let t = Tensor::arange(0.0, 12.0, 1.0, wgrad::DType::F32)?.reshape(&[3, 4])?;
/// let row = t.get(&s![1])?; // [4, 5, 6, 7]
/// let rev = t.get(&s![.., ..;-1])?; // columns reversed
/// let col = t.get(&s![..., 0, None])?; // shape [3, 1]
/// assert_eq!(row.to_vec::<f32>()?, [4.0, 5.0, 6.0, 7.0]);
/// assert_eq!(rev.get(&s![0])?.to_vec::<f32>()?, [3.0, 2.0, 1.0, 0.0]);
/// assert_eq!(col.shape(), [3, 1]);
/// # Ok::<(), wgrad::Error>(())
/// ```
#[macro_export]
macro_rules! s {
    (@acc [$($out:expr),*]) => { [$($out),*] };
    (@acc [$($out:expr),*] None $(, $($rest:tt)*)?) => {
        $crate::s!(@acc [$($out,)* $crate::Index::NewAxis] $($($rest)*)?)
    };
    (@acc [$($out:expr),*] ... $(, $($rest:tt)*)?) => {
        $crate::s!(@acc [$($out,)* $crate::Index::Ellipsis] $($($rest)*)?)
    };
    (@acc [$($out:expr),*] $e:expr ; $step:expr $(, $($rest:tt)*)?) => {
        $crate::s!(@acc [$($out,)* $crate::Index::step($e, $step)] $($($rest)*)?)
    };
    (@acc [$($out:expr),*] $e:expr $(, $($rest:tt)*)?) => {
        $crate::s!(@acc [$($out,)* $crate::Index::from($e)] $($($rest)*)?)
    };
    ($($t:tt)*) => { $crate::s!(@acc [] $($t)*) };
}

/// What an index does to one axis of the tensor, once resolved against its size.
#[derive(Clone)]
enum Axis {
    /// Element `i`; the axis goes away.
    Int(usize),
    /// Elements `start, start + step, ...` (`len` of them; a negative step walks down).
    Slice {
        start: usize,
        len: usize,
        step: isize,
    },
    /// A new axis of size 1 (consumes no axis of the tensor).
    New,
    /// Integer indices (i32, non-negative where in range).
    Tensor(Tensor),
}

/// The resolved index: one entry per axis of the tensor, plus the new axes, in order.
struct Parsed {
    axes: Vec<Axis>,
}

fn slice_range(
    op: &str,
    (start, stop, step): (Option<isize>, Option<isize>, isize),
    axis: usize,
    n: usize,
) -> Result<(usize, usize)> {
    if step == 0 {
        bail!(Shape, "{op}: slice step of axis {axis} is 0");
    }
    // In i128: any isize start, stop and step (isize::MIN included) without overflow.
    let (n, st) = (n as i128, step as i128);
    let (s, _, len) = if st > 0 {
        let clamp = |v: isize| {
            let v = v as i128;
            if v < 0 {
                (v + n).max(0)
            } else {
                v.min(n)
            }
        };
        let (s, e) = (start.map_or(0, clamp), stop.map_or(n, clamp));
        (s, e, if e > s { (e - s + st - 1) / st } else { 0 })
    } else {
        let clamp = |v: isize| {
            let v = v as i128;
            if v < 0 {
                (v + n).max(-1)
            } else {
                v.min(n - 1)
            }
        };
        let (s, e) = (start.map_or(n - 1, clamp), stop.map_or(-1, clamp));
        (s, e, if s > e { (s - e - st - 1) / -st } else { 0 })
    };
    // An empty slice (Python's rule) starts at 0 of an empty axis.
    if len == 0 {
        return Ok((0, 0));
    }
    Ok((s as usize, len as usize))
}

impl Tensor {
    fn parse_index(&self, op: &str, index: &[Index]) -> Result<Parsed> {
        let shape = self.shape();
        let consuming = index
            .iter()
            .filter(|i| !matches!(i, Index::NewAxis | Index::Ellipsis))
            .count();
        let ellipses = index
            .iter()
            .filter(|i| matches!(i, Index::Ellipsis))
            .count();
        if ellipses > 1 {
            bail!(Shape, "{op}: an index can have only one ellipsis (...)");
        }
        if consuming > shape.len() {
            bail!(
                Shape,
                "{op}: {consuming} indices for a tensor of shape {shape:?} ({} dimensions)",
                shape.len()
            );
        }
        let mut axes = vec![];
        let mut d = 0;
        let full = || Index::slice(None, None, 1);
        let mut entries: Vec<Index> = vec![];
        for i in index {
            if matches!(i, Index::Ellipsis) {
                entries.extend((0..shape.len() - consuming).map(|_| full()));
            } else {
                entries.push(i.clone());
            }
        }
        while entries
            .iter()
            .filter(|i| !matches!(i, Index::NewAxis))
            .count()
            < shape.len()
        {
            entries.push(full());
        }
        for e in entries {
            let a = match e {
                Index::NewAxis => {
                    axes.push(Axis::New);
                    continue;
                }
                Index::Ellipsis => unreachable!("ellipsis expanded above"),
                Index::Int(i) => {
                    let n = shape[d] as isize;
                    let j = if i < 0 { i + n } else { i };
                    if j < 0 || j >= n {
                        bail!(
                            Shape,
                            "{op}: index {i} is out of range for axis {d} of size {n} (shape {shape:?})"
                        );
                    }
                    Axis::Int(j as usize)
                }
                Index::Slice { start, stop, step } => {
                    let (start, len) = slice_range(op, (start, stop, step), d, shape[d])?;
                    Axis::Slice { start, len, step }
                }
                Index::List(v) => {
                    let v: Vec<i32> = v
                        .iter()
                        .map(|&x| {
                            i32::try_from(x).map_err(|_| {
                                Error::new(
                                    ErrorKind::Shape,
                                    format!("{op}: index {x} does not fit in i32"),
                                )
                            })
                        })
                        .collect::<Result<_>>()?;
                    let t = crate::context::Context::new()
                        .dev(self.device())
                        .run(|| Tensor::from_slice(&v, &[v.len()]))?;
                    Axis::Tensor(wrap_negative(&t, shape[d])?)
                }
                Index::Tensor(t) => {
                    if t.dtype().is_float() {
                        bail!(
                            DType,
                            "{op}: a tensor index must hold integers, got {} (axis {d})",
                            t.dtype()
                        );
                    }
                    if t.device() != self.device() {
                        bail!(
                            Device,
                            "{op}: the index of axis {d} is on {}, the tensor on {}",
                            t.device(),
                            self.device()
                        );
                    }
                    Axis::Tensor(wrap_negative(&t.cast(DType::I32)?, shape[d])?)
                }
            };
            axes.push(a);
            d += 1;
        }
        Ok(Parsed { axes })
    }

    /// The basic part of an index (integers, slices, new axes) as views; tensor-indexed axes
    /// stay whole. Returns the view and, for each of its axes, the tensor indexing it (if any).
    fn basic_view(&self, p: &Parsed) -> Result<(Tensor, Vec<Option<Tensor>>)> {
        let mut x = self.clone();
        let mut d = 0isize;
        for a in &p.axes {
            match a {
                Axis::New => continue,
                Axis::Int(i) => x = x.slice(d, *i as isize, *i as isize + 1, 1)?,
                &Axis::Slice { len: 0, .. } => x = x.slice(d, 0, 0, 1)?,
                &Axis::Slice { start, len, step } => {
                    let st = step.unsigned_abs();
                    let lo = if step > 0 {
                        start
                    } else {
                        start - (len - 1) * st
                    };
                    x = x.slice(d, lo as isize, (lo + (len - 1) * st + 1) as isize, st)?;
                    if step < 0 {
                        x = x.flip(&[d])?;
                    }
                }
                Axis::Tensor(_) => {}
            }
            d += 1;
        }
        let mut shape = vec![];
        let mut tensors = vec![];
        let xs = x.shape();
        let mut d = 0;
        for a in &p.axes {
            match a {
                Axis::New => {
                    shape.push(1);
                    tensors.push(None);
                    continue;
                }
                Axis::Int(_) => {}
                Axis::Slice { .. } => {
                    shape.push(xs[d]);
                    tensors.push(None);
                }
                Axis::Tensor(t) => {
                    shape.push(xs[d]);
                    tensors.push(Some(t.clone()));
                }
            }
            d += 1;
        }
        Ok((x.reshape_u(&shape)?, tensors))
    }

    /// `self[index]`, as Python's indexing (see [`Index`] and the [`s!`](crate::s) macro):
    /// integers remove an axis, slices (with steps, negative too) keep it, `None` adds one,
    /// `...` stands for the axes not named, and integer tensors (or lists) select along their
    /// axes, broadcast together; their axes go where the first one was if they are adjacent,
    /// else in front (numpy's rule). Slices and integers are views; tensor indices read one
    /// element per output (a gather). Out-of-range tensor indices read 0 (tinygrad's rule);
    /// out-of-range integers are errors; empty slices and index lists give empty tensors.
    pub fn get(&self, index: &[Index]) -> Result<Tensor> {
        let p = self.parse_index("get", index)?;
        let (x, tensors) = self.basic_view(&p)?;
        let dims: Vec<usize> = (0..tensors.len())
            .filter(|&d| tensors[d].is_some())
            .collect();
        if dims.is_empty() {
            return Ok(x);
        }
        let adv = Advanced::new("get", &x, &tensors, &dims)?;
        let picked = adv.spread(&x)?.keep_where(&adv.hit()?)?;
        let out = picked.reduce_op(ReduceOp::Sum, &adv.summed);
        let out = out.reshape_u(&adv.result_shape(&x))?;
        adv.layout_to_numpy(&out)
    }

    /// `self[index] = value` in place (an `assign`, ordered like an optimizer's update, so a
    /// captured step writes its KV cache on every replay): `value` (a tensor or a number)
    /// broadcasts to the shape `get(index)` has. With tensor indices that repeat a position,
    /// the last write wins.
    pub fn set(&self, index: &[Index], value: impl Into<Operand>) -> Result<Tensor> {
        let new = self.with_set("set", index, value)?;
        if new.same(self) {
            return Ok(self.clone());
        }
        self.assign(&new)
    }

    /// What `set` writes: this tensor with `index` replaced by `value` (no assignment).
    fn with_set(&self, op: &str, index: &[Index], value: impl Into<Operand>) -> Result<Tensor> {
        let p = self.parse_index(op, index)?;
        let (x, tensors) = self.basic_view(&p)?;
        let value = self.operand(value)?.cast(self.dtype())?;
        let dims: Vec<usize> = (0..tensors.len())
            .filter(|&d| tensors[d].is_some())
            .collect();
        // The new contents of the basic view `x`.
        let xv = if dims.is_empty() {
            value
                .broadcast_to(&x.shape())
                .map_err(|e| set_shape_err(op, &value, &x.shape(), e))?
        } else {
            let adv = Advanced::new(op, &x, &tensors, &dims)?;
            let r = adv.result_shape(&x);
            let r = adv.numpy_shape(&r);
            let v = value
                .broadcast_to(&r)
                .map_err(|e| set_shape_err(op, &value, &r, e))?;
            adv.merge(&x, &adv.numpy_to_layout(&v)?)?
        };
        if xv.numel() == 0 {
            // An empty region: nothing is written.
            return Ok(self.clone());
        }
        // Back to the tensor's own axes: drop the new axes, restore the integer ones.
        let mut shape = vec![];
        let xs = xv.shape();
        let mut k = 0;
        for a in &p.axes {
            match a {
                Axis::New => k += 1,
                Axis::Int(_) => shape.push(1),
                _ => {
                    shape.push(xs[k]);
                    k += 1;
                }
            }
        }
        let mut v = xv.reshape_u(&shape)?;
        let full = self.shape();
        let mut mask: Option<Tensor> = None;
        let mut d = 0usize;
        for a in &p.axes {
            let (lo, len, step) = match *a {
                Axis::New => continue,
                Axis::Int(i) => (i, 1, 1),
                Axis::Slice { start, len, step } => {
                    let st = step.unsigned_abs();
                    let lo = if step > 0 {
                        start
                    } else {
                        start - (len - 1) * st
                    };
                    if step < 0 {
                        v = v.flip(&[d as isize])?;
                    }
                    (lo, len, st)
                }
                Axis::Tensor(_) => (0, full[d], 1),
            };
            let span = (len - 1) * step + 1;
            if step > 1 {
                // Spread the values `step` apart: (len, 1) padded to (len, step), flattened.
                let mut s = v.shape();
                let u = v.unsqueeze(d as isize + 1)?;
                let mut pads = vec![(0, 0); u.ndim()];
                pads[d + 1] = (0, step - 1);
                s[d] = len * step;
                v = u.pad(&pads, 0.0)?.reshape_u(&s)?;
                let mut keep: Vec<(usize, usize)> = s.iter().map(|&n| (0, n)).collect();
                keep[d] = (0, span);
                v = v.shrink(&keep)?;
            }
            let mut pads = vec![(0, 0); v.ndim()];
            pads[d] = (lo, full[d] - lo - span);
            v = v.pad(&pads, 0.0)?;
            if (lo, span) != (0, full[d]) || step > 1 {
                let mut ar = vec![1; full.len()];
                ar[d] = full[d];
                let i = Tensor::iota(full[d], self.device()).reshape_u(&ar)?;
                let mut m = i.ge(lo as i64)?.logical_and(&i.lt((lo + span) as i64)?)?;
                if step > 1 {
                    m = m.logical_and(&i.sub(lo as i64)?.fmod(step as i64)?.eq(0)?)?;
                }
                mask = Some(match mask {
                    Some(prev) => prev.logical_and(&m)?,
                    None => m,
                });
            }
            d += 1;
        }
        match mask {
            Some(m) => m.where_(&v, self),
            None => Ok(v),
        }
    }

    /// This tensor where `cond` holds (broadcast to this shape), else zero of its dtype.
    pub(crate) fn keep_where(&self, cond: &Tensor) -> Result<Tensor> {
        let shape = broadcast_shape("where", &cond.shape(), &self.shape())?;
        let (c, x) = (cond.broadcast_to(&shape)?, self.broadcast_to(&shape)?);
        let z = x.zeros_like();
        Tensor::mk(Op::Where, x.dtype(), shape, &[&c, &x, &z])
    }

    /// The lower triangle of the last two axes (elements with `col <= row + diagonal`); the
    /// rest is 0.
    pub fn tril(&self, diagonal: isize) -> Result<Tensor> {
        self.triangle("tril", diagonal, false)
    }
    /// The upper triangle of the last two axes (elements with `col >= row + diagonal`); the
    /// rest is 0.
    pub fn triu(&self, diagonal: isize) -> Result<Tensor> {
        self.triangle("triu", diagonal, true)
    }
    fn triangle(&self, op: &str, diagonal: isize, upper: bool) -> Result<Tensor> {
        let s = self.shape();
        if s.len() < 2 {
            bail!(Shape, "{op}: needs at least 2 dimensions, got shape {s:?}");
        }
        let (r, c) = (s[s.len() - 2], s[s.len() - 1]);
        let dev = self.device();
        let row = Tensor::iota(r, dev)
            .reshape_u(&[r, 1])?
            .add(diagonal as i64)?;
        let col = Tensor::iota(c, dev).reshape_u(&[1, c])?;
        let keep = if upper { col.ge(&row)? } else { col.le(&row)? };
        self.keep_where(&keep)
    }
    /// One-hot vectors of `num_classes` (a new last axis) from integer class indices, as i32.
    /// Indices outside `0..num_classes` give a row of zeros.
    pub fn one_hot(&self, num_classes: usize) -> Result<Tensor> {
        if self.dtype().is_float() {
            bail!(
                DType,
                "one_hot: needs integer class indices, got {}",
                self.dtype()
            );
        }
        if num_classes == 0 {
            bail!(Shape, "one_hot: num_classes must be at least 1");
        }
        let mut ar = vec![1; self.ndim()];
        ar.push(num_classes);
        let classes = Tensor::iota(num_classes, self.device()).reshape_u(&ar)?;
        self.cast(DType::I32)?
            .unsqueeze(-1)?
            .eq(&classes)?
            .cast(DType::I32)
    }
    /// `value` where `mask` holds, else this tensor (`mask` broadcasts to this shape).
    pub fn masked_fill(&self, mask: &Tensor, value: impl Into<Operand>) -> Result<Tensor> {
        if mask.dtype() != DType::Bool {
            bail!(
                DType,
                "masked_fill: the mask must be bool, got {}",
                mask.dtype()
            );
        }
        let s = self.shape();
        if broadcast_shape("masked_fill", &mask.shape(), &s)? != s {
            bail!(
                Shape,
                "masked_fill: mask {:?} does not broadcast to the tensor's shape {s:?}",
                mask.shape()
            );
        }
        let v = self.operand(value)?.cast(self.dtype())?;
        mask.where_(&v, self)
    }

    /// The elements where `mask` (bool, broadcast to this shape) holds, in order, as a 1-D
    /// tensor of `size` elements: the first `size` selected, then `fill_value` if fewer are
    /// (tinygrad's `masked_select(mask, size, fill_value)`; lazy, so it can be captured by a
    /// JIT). Costs `size x numel` comparisons.
    pub fn masked_select_sized(
        &self,
        mask: &Tensor,
        size: usize,
        fill_value: f64,
    ) -> Result<Tensor> {
        const OP: &str = "masked_select";
        if mask.dtype() != DType::Bool {
            bail!(DType, "{OP}: the mask must be bool, got {}", mask.dtype());
        }
        let s = self.shape();
        let m = mask.broadcast_to(&s).map_err(|_| {
            Error::new(
                ErrorKind::Shape,
                format!(
                    "{OP}: mask {:?} does not broadcast to the tensor's shape {s:?}",
                    mask.shape()
                ),
            )
        })?;
        if size == 0 {
            return Ok(self.const_shaped(0.0, self.dtype(), &[0]));
        }
        let n = self.numel();
        let x = self.reshape_u(&[1, n])?;
        let m = m.reshape_u(&[1, n])?;
        // Selected element j is output number cumsum(mask)[j] - 1.
        let place = m.cumsum(1)?.sub(1)?;
        let k = Tensor::iota(size, self.device()).reshape_u(&[size, 1])?;
        let hit = m.logical_and(&place.eq(&k)?)?;
        let picked = x
            .keep_where(&hit)?
            .reduce_op(ReduceOp::Sum, &[1])
            .reshape_u(&[size])?;
        let count = m.cast(DType::I32)?.sum((), false)?;
        let k = Tensor::iota(size, self.device());
        k.lt(&count)?.where_(&picked, picked.const_like(fill_value))
    }
    /// The elements where `mask` holds, in order, as a 1-D tensor as long as there are such
    /// elements: their count is read back first (awaiting the device; see
    /// `masked_select_sized` for the lazy form). None selected gives an empty tensor.
    pub async fn masked_select_async(&self, mask: &Tensor) -> Result<Tensor> {
        let count = mask
            .broadcast_to(&self.shape())
            .and_then(|m| m.cast(DType::I32)?.sum((), false))?
            .item_async::<i32>()
            .await?;
        self.masked_select_sized(mask, count.max(0) as usize, 0.0)
    }
    /// Blocking form of `masked_select_async` (native only).
    #[cfg(not(target_arch = "wasm32"))]
    pub fn masked_select(&self, mask: &Tensor) -> Result<Tensor> {
        crate::runtime::block_on(self.masked_select_async(mask))
    }
    /// The i32 coordinates `[size, ndim]` of the first `size` non-zero elements, in order, then
    /// rows of `fill_value` (tinygrad's `nonzero(size, fill_value)`; lazy).
    pub fn nonzero_sized(&self, size: usize, fill_value: i64) -> Result<Tensor> {
        let s = self.shape();
        if s.is_empty() {
            bail!(Shape, "nonzero: a 0-dimensional tensor has no coordinates");
        }
        let mask = self.ne(0)?;
        let coords: Vec<Tensor> = (0..s.len())
            .map(|d| {
                let mut ar = vec![1; s.len()];
                ar[d] = s[d];
                Tensor::iota(s[d], self.device())
                    .reshape_u(&ar)?
                    .broadcast_to(&s)?
                    .masked_select_sized(&mask, size, fill_value as f64)
            })
            .collect::<Result<_>>()?;
        Tensor::stack(&coords.iter().collect::<Vec<_>>(), 1)
    }
    /// The i32 coordinates `[count, ndim]` of the non-zero elements, in order (the count read
    /// back first).
    pub async fn nonzero_async(&self) -> Result<Tensor> {
        let count = self
            .ne(0)?
            .cast(DType::I32)?
            .sum((), false)?
            .item_async::<i32>()
            .await?;
        self.nonzero_sized(count.max(0) as usize, 0)
    }
    /// Blocking form of `nonzero_async` (native only).
    #[cfg(not(target_arch = "wasm32"))]
    pub fn nonzero(&self) -> Result<Tensor> {
        crate::runtime::block_on(self.nonzero_async())
    }

    /// Scatter `src` into a copy of this tensor along `axis` at `index`: `out[.., index[i, j], ..]
    /// = src[i, j]` (for `axis` 0 of 2-D tensors; likewise for any rank). `index` and `src` have
    /// this tensor's rank, `index` no larger than `src` and, off `axis`, than this tensor. Where
    /// an index repeats the last write wins (tinygrad's rule). `reduce` "add" or "multiply"
    /// combines instead (as `scatter_reduce` with "sum" or "prod", including this tensor).
    pub fn scatter(
        &self,
        axis: isize,
        index: &Tensor,
        src: impl Into<Operand>,
        reduce: Option<&str>,
    ) -> Result<Tensor> {
        let src = match src.into() {
            Operand::Tensor(t) => t,
            v => self
                .operand(v)?
                .cast(self.dtype())?
                .broadcast_to(&index.shape())?,
        };
        match reduce {
            None => {}
            Some("add") => return self.scatter_reduce(axis, index, &src, "sum", true),
            Some("multiply") => return self.scatter_reduce(axis, index, &src, "prod", true),
            Some(r) => bail!(
                Shape,
                "scatter: reduce must be \"add\" or \"multiply\", got {r:?}"
            ),
        }
        let (src, mask, n) = self.pre_scatter("scatter", axis, index, &src)?;
        // The last source position that writes each element (-1: none), then its value.
        let last = mask.ndim() - 1;
        let mut ar = vec![1; mask.ndim()];
        ar[last] = n;
        let k = Tensor::iota(n, self.device()).reshape_u(&ar)?;
        let kstar = mask.where_(&k, -1)?.reduce_op(ReduceOp::Max, &[last]);
        let pick = mask.logical_and(&k.eq(&kstar)?)?;
        let value = src.keep_where(&pick)?.reduce_op(ReduceOp::Sum, &[last]);
        let s = self.shape();
        kstar
            .ge(0)?
            .reshape_u(&s)?
            .where_(&value.reshape_u(&s)?, self)
    }

    /// Reduce `src` into a copy of this tensor along `axis` at `index`: `reduce` is "sum",
    /// "prod", "mean", "amax" or "amin"; with `include_self` false the tensor's own values
    /// take no part where anything is scattered.
    pub fn scatter_reduce(
        &self,
        axis: isize,
        index: &Tensor,
        src: &Tensor,
        reduce: &str,
        include_self: bool,
    ) -> Result<Tensor> {
        const OP: &str = "scatter_reduce";
        let (src, mask, _) = self.pre_scatter(OP, axis, index, src)?;
        let last = mask.ndim() - 1;
        let s = self.shape();
        let dt = self.dtype();
        let hit = mask.reduce_op(ReduceOp::Max, &[last]).reshape_u(&s)?;
        // This tensor, or the identity where something is scattered and it is left out.
        let own = |ident: f64| -> Result<Tensor> {
            if include_self {
                Ok(self.clone())
            } else {
                hit.where_(ident, self)?.cast(dt)
            }
        };
        let red = |ident: f64, op: ReduceOp| -> Result<Tensor> {
            mask.where_(&src, ident)?
                .cast(dt)?
                .reduce_op(op, &[last])
                .reshape_u(&s)
        };
        let (lo, hi) = (dt.min_value(), max_value(dt));
        match reduce {
            "sum" => red(0.0, ReduceOp::Sum)?.add(&own(0.0)?),
            "prod" => red(1.0, ReduceOp::Prod)?.mul(&own(1.0)?),
            "amax" => red(lo, ReduceOp::Max)?.maximum(&own(lo)?),
            "amin" => mask
                .where_(&src, hi)?
                .cast(dt)?
                .min(last as isize, false)?
                .reshape_u(&s)?
                .minimum(&own(hi)?),
            "mean" => {
                let count = mask
                    .cast(DType::I32)?
                    .reduce_op(ReduceOp::Sum, &[last])
                    .reshape_u(&s)?;
                let count = if include_self {
                    count.add(1)?
                } else {
                    count.add(&hit.logical_not()?.cast(DType::I32)?)?
                };
                let total = red(0.0, ReduceOp::Sum)?.add(&own(0.0)?)?;
                if dt.is_float() {
                    total.div(&count.cast(dt)?)
                } else {
                    total.div(&count)?.floor()?.cast(dt)
                }
            }
            r => bail!(
                Shape,
                "{OP}: reduce must be \"sum\", \"prod\", \"mean\", \"amax\" or \"amin\", got {r:?}"
            ),
        }
    }

    /// `src` and the one-hot mask of `index` laid out as `self.shape() ++ [index.shape[axis]]`
    /// (the source positions along `axis` last), and that last size.
    fn pre_scatter(
        &self,
        op: &str,
        axis: isize,
        index: &Tensor,
        src: &Tensor,
    ) -> Result<(Tensor, Tensor, usize)> {
        let s = self.shape();
        let a = norm_axis(op, axis, s.len())?;
        let (is, ss) = (index.shape(), src.shape());
        if is.len() != s.len() || ss.len() != s.len() {
            bail!(
                Shape,
                "{op}: index {is:?} and src {ss:?} must have the rank of the tensor {s:?}"
            );
        }
        if (0..s.len()).any(|d| is[d] > ss[d] || (d != a && is[d] > s[d])) {
            bail!(
                Shape,
                "{op}: index {is:?} must be no larger than src {ss:?} and, off axis {a}, than the tensor {s:?}"
            );
        }
        if index.dtype().is_float() {
            bail!(
                DType,
                "{op}: index must hold integers, got {}",
                index.dtype()
            );
        }
        if src.dtype() != self.dtype() {
            bail!(
                DType,
                "{op}: src has dtype {}, the tensor {}",
                src.dtype(),
                self.dtype()
            );
        }
        let fit: Vec<(usize, usize)> = is.iter().map(|&d| (0, d)).collect();
        let src = src.shrink(&fit)?;
        let n = is[a];
        // [.., target position along axis (s[a]), .., source position along axis (n)]
        let mut shape = is.clone();
        shape[a] = s[a];
        shape.push(n);
        let mut t_ar = vec![1; s.len() + 1];
        t_ar[a] = s[a];
        let targets = Tensor::iota(s[a], self.device()).reshape_u(&t_ar)?;
        let moved = |t: &Tensor| -> Result<Tensor> {
            let mut order: Vec<isize> = (0..s.len() as isize).collect();
            order[a] = s.len() as isize;
            order.push(a as isize);
            t.unsqueeze(s.len() as isize)?.permute(&order)
        };
        let mask = moved(&index.cast(DType::I32)?)?.eq(&targets)?;
        let src = moved(&src)?.broadcast_to(&shape)?;
        let mask = mask.broadcast_to(&shape)?;
        // Off `axis`, positions beyond the index's extent take no part.
        let mut pads: Vec<(usize, usize)> = (0..s.len()).map(|d| (0, s[d] - shape[d])).collect();
        pads.push((0, 0));
        Ok((src.pad(&pads, 0.0)?, mask.pad(&pads, 0.0)?, n))
    }
}

/// The largest value of `dt` (the identity of a minimum).
fn max_value(dt: DType) -> f64 {
    match dt {
        DType::Bool => 1.0,
        DType::U8 => u8::MAX as f64,
        DType::I32 => i32::MAX as f64,
        DType::U32 => u32::MAX as f64,
        _ => f64::INFINITY,
    }
}

/// Negative indices count from the end of an axis of `n`.
fn wrap_negative(t: &Tensor, n: usize) -> Result<Tensor> {
    t.lt(0)?.where_(&t.add(n as i64)?, t)
}

fn set_shape_err(op: &str, value: &Tensor, shape: &[usize], e: Error) -> Error {
    Error::new(
        e.kind,
        format!(
            "{op}: value of shape {:?} does not broadcast to the indexed shape {shape:?}",
            value.shape()
        ),
    )
}

/// Tensor indices over a basic view `x`: `dims` are the indexed axes of `x`, `tensors` their
/// indices. Work happens in the layout `x.shape[..d0] ++ B ++ x.shape[d0..]` (B the indices'
/// broadcast shape, d0 the first indexed axis): an index selects along its axis there.
struct Advanced {
    dims: Vec<usize>,
    big: Vec<usize>,
    /// One-hot masks of the indices, one per indexed axis (broadcastable to the layout).
    masks: Vec<Tensor>,
    /// The layout's axes that hold the indexed axes (summed away by `get`).
    summed: Vec<usize>,
    /// Whether numpy puts the index axes first (indexed axes not adjacent).
    front: bool,
}

impl Advanced {
    fn new(op: &str, x: &Tensor, tensors: &[Option<Tensor>], dims: &[usize]) -> Result<Advanced> {
        let xs = x.shape();
        let mut big: Vec<usize> = vec![];
        for &d in dims {
            let t = tensors[d].as_ref().expect("an indexed axis");
            big = broadcast_shape(op, &big, &t.shape()).map_err(|_| {
                Error::new(
                    ErrorKind::Shape,
                    format!(
                        "{op}: the tensor indices' shapes do not broadcast together ({})",
                        dims.iter()
                            .map(|&d| format!("{:?}", tensors[d].as_ref().map(|t| t.shape())))
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                )
            })?;
        }
        let (d0, nb) = (dims[0], big.len());
        let mut masks = vec![];
        for &d in dims {
            let t = tensors[d].as_ref().expect("an indexed axis");
            let mut ts = vec![1; d0];
            ts.extend(&big);
            ts.extend(std::iter::repeat_n(1, xs.len() - d0));
            let t = t.broadcast_to(&big)?.reshape_u(&ts)?;
            let mut ar = vec![1; d0 + nb + xs.len() - d0];
            ar[nb + d] = xs[d];
            let i = Tensor::iota(xs[d], x.device()).reshape_u(&ar)?;
            masks.push(t.eq(&i)?);
        }
        let front = d0 != 0 && dims.windows(2).any(|w| w[1] != w[0] + 1);
        Ok(Advanced {
            dims: dims.to_vec(),
            summed: dims.iter().map(|&d| nb + d).collect(),
            big,
            masks,
            front,
        })
    }
    fn layout(&self, x: &Tensor) -> Vec<usize> {
        let xs = x.shape();
        let d0 = self.dims[0];
        let mut l = xs[..d0].to_vec();
        l.extend(&self.big);
        l.extend(&xs[d0..]);
        l
    }
    /// `x` broadcast over the index axes of the layout.
    fn spread(&self, x: &Tensor) -> Result<Tensor> {
        let xs = x.shape();
        let d0 = self.dims[0];
        let mut s = xs[..d0].to_vec();
        s.extend(std::iter::repeat_n(1, self.big.len()));
        s.extend(&xs[d0..]);
        x.reshape_u(&s)?.broadcast_to(&self.layout(x))
    }
    /// The shape `get` gives, index axes where the first indexed axis was.
    fn result_shape(&self, x: &Tensor) -> Vec<usize> {
        let l = self.layout(x);
        (0..l.len())
            .filter(|i| !self.summed.contains(i))
            .map(|i| l[i])
            .collect()
    }
    fn front_order(&self, ndim: usize) -> Vec<isize> {
        let (d0, nb) = (self.dims[0], self.big.len());
        (d0..d0 + nb)
            .chain(0..d0)
            .chain(d0 + nb..ndim)
            .map(|i| i as isize)
            .collect()
    }
    /// `result_shape` in numpy's order.
    fn numpy_shape(&self, s: &[usize]) -> Vec<usize> {
        if !self.front {
            return s.to_vec();
        }
        self.front_order(s.len())
            .iter()
            .map(|&i| s[i as usize])
            .collect()
    }
    fn layout_to_numpy(&self, t: &Tensor) -> Result<Tensor> {
        if !self.front {
            return Ok(t.clone());
        }
        t.permute(&self.front_order(t.ndim()))
    }
    fn numpy_to_layout(&self, t: &Tensor) -> Result<Tensor> {
        if !self.front {
            return Ok(t.clone());
        }
        let order = self.front_order(t.ndim());
        let mut inv = vec![0isize; order.len()];
        for (i, &o) in order.iter().enumerate() {
            inv[o as usize] = i as isize;
        }
        t.permute(&inv)
    }
    /// Where every index names the element: the masks and-ed.
    fn hit(&self) -> Result<Tensor> {
        self.masks[1..]
            .iter()
            .try_fold(self.masks[0].clone(), |a, m| a.logical_and(m))
    }
    /// `x` with the indexed elements replaced by `v` (shaped as `result_shape`); where several
    /// index positions name one element, the last one's value.
    fn merge(&self, x: &Tensor, v: &Tensor) -> Result<Tensor> {
        let l = self.layout(x);
        let d0 = self.dims[0];
        let nb = self.big.len();
        let hit = self.hit()?.broadcast_to(&l)?;
        let count: usize = self.big.iter().product();
        let mut bs = vec![1; d0];
        bs.extend(&self.big);
        bs.extend(std::iter::repeat_n(1, l.len() - d0 - nb));
        let b = Tensor::iota(count, x.device()).reshape_u(&bs)?;
        let index_axes: Vec<usize> = (d0..d0 + nb).collect();
        let last = hit.where_(&b, -1)?.reduce_op(ReduceOp::Max, &index_axes);
        // v back in the layout: a size-1 axis for each indexed axis.
        let mut vs = v.shape();
        for &s in &self.summed {
            vs.insert(s, 1);
        }
        let v = v.reshape_u(&vs)?;
        let pick = hit.logical_and(&b.eq(&last)?)?;
        let value = v.keep_where(&pick)?.reduce_op(ReduceOp::Sum, &index_axes);
        let xs = x.shape();
        let got = last.ge(0)?.reshape_u(&xs)?;
        got.where_(&value.reshape_u(&xs)?, x)
    }
}

//! Movement ops on `Tensor` (views: no copy until a kernel boundary) and integer indexing.
//! The primitives are reshape, permute, expand, pad, shrink and flip; everything else
//! (transpose, squeeze, slicing, cat, stack, split, repeat) is built from them.

use super::{check_shape, check_shape_below, norm_axis, Tensor, MAX_VIEW_NUMEL};
use crate::dtype::DType;
use crate::error::{bail, Result};
use crate::ops::Op;

impl Tensor {
    pub(crate) fn reshape_u(&self, shape: &[usize]) -> Result<Tensor> {
        let s = self.shape();
        if s == shape {
            return Ok(self.clone());
        }
        check_shape("reshape", shape)?;
        if s.iter().product::<usize>() != shape.iter().product::<usize>() {
            bail!(Shape, "reshape: cannot reshape {s:?} into {shape:?}");
        }
        Tensor::mk(Op::Reshape, self.dtype(), shape.to_vec(), &[self])
    }
    pub(crate) fn expand_u(&self, shape: &[usize]) -> Result<Tensor> {
        let s = self.shape();
        if s == shape {
            return Ok(self.clone());
        }
        check_shape_below("expand", shape, MAX_VIEW_NUMEL)?;
        if s.len() != shape.len() || s.iter().zip(shape).any(|(&a, &b)| a != b && a != 1) {
            bail!(Shape, "expand: cannot expand {s:?} to {shape:?}");
        }
        Tensor::mk(Op::Expand, self.dtype(), shape.to_vec(), &[self])
    }

    /// Reshape; one dimension may be -1 (inferred).
    /// ```
    /// # wgrad::context::set_default_device(Some(wgrad::Device::Interp));
    /// use wgrad::Tensor;
    /// let t = Tensor::arange(0.0, 6.0, 1.0, wgrad::DType::F32)?;
    /// let m = t.reshape(&[2, -1])?; // -1 becomes 3
    /// assert_eq!(m.shape(), vec![2, 3]);
    /// assert_eq!(m.t()?.to_vec::<f32>()?, vec![0.0, 3.0, 1.0, 4.0, 2.0, 5.0]);
    /// assert!(t.reshape(&[4, -1]).is_err()); // 6 elements do not fill 4 rows
    /// # Ok::<(), wgrad::Error>(())
    /// ```
    pub fn reshape(&self, shape: &[isize]) -> Result<Tensor> {
        let s = self.shape();
        let n: usize = s.iter().product();
        let infer = shape.iter().filter(|&&d| d == -1).count();
        if infer > 1 || shape.iter().any(|&d| d < -1) {
            bail!(Shape, "reshape: invalid target shape {shape:?} for {s:?}");
        }
        let known = shape
            .iter()
            .filter(|&&d| d >= 0)
            .try_fold(1usize, |a, &d| a.checked_mul(d as usize));
        if infer == 1 && known == Some(0) {
            bail!(
                Shape,
                "reshape: -1 in {shape:?} could be any size (the other sizes multiply to 0; {s:?})"
            );
        }
        let Some(known) = known.filter(|&k| k <= n || n == 0) else {
            bail!(
                Shape,
                "reshape: cannot reshape {s:?} ({n} elements) into {shape:?}"
            );
        };
        let out: Vec<usize> = shape
            .iter()
            .map(|&d| {
                if d == -1 {
                    n.checked_div(known).unwrap_or(0)
                } else {
                    d as usize
                }
            })
            .collect();
        if out.iter().product::<usize>() != n {
            bail!(
                Shape,
                "reshape: cannot reshape {s:?} ({n} elements) into {shape:?}"
            );
        }
        self.reshape_u(&out)
    }
    /// Reorder the axes: axis `i` of the result is axis `order[i]` of `self` (negative counts from
    /// the end). A view: nothing is copied. Errors when `order` is not a permutation of the axes.
    pub fn permute(&self, order: &[isize]) -> Result<Tensor> {
        let s = self.shape();
        if order.len() != s.len() {
            bail!(
                Shape,
                "permute: order {order:?} does not match {} dimensions of {s:?}",
                s.len()
            );
        }
        let mut p = vec![];
        for &o in order {
            p.push(norm_axis("permute", o, s.len())?);
        }
        let mut seen = p.clone();
        seen.sort();
        seen.dedup();
        if seen.len() != p.len() {
            bail!(Shape, "permute: order {order:?} repeats an axis");
        }
        if p.iter().enumerate().all(|(i, &x)| i == x) {
            return Ok(self.clone());
        }
        let shape = p.iter().map(|&i| s[i]).collect();
        Tensor::mk(Op::Permute(p), self.dtype(), shape, &[self])
    }
    /// Swap axes `a` and `b` (negative counts from the end).
    pub fn transpose(&self, a: isize, b: isize) -> Result<Tensor> {
        let n = self.ndim();
        let (a, b) = (norm_axis("transpose", a, n)?, norm_axis("transpose", b, n)?);
        let mut order: Vec<isize> = (0..n as isize).collect();
        order.swap(a, b);
        self.permute(&order)
    }
    /// Matrix transpose of the last two dims.
    pub fn t(&self) -> Result<Tensor> {
        self.transpose(-2, -1)
    }
    /// Expand size-1 dims (and prepend new ones); -1 keeps a dimension.
    pub fn expand(&self, shape: &[isize]) -> Result<Tensor> {
        let s = self.shape();
        if shape.len() < s.len() {
            bail!(Shape, "expand: target {shape:?} has fewer dims than {s:?}");
        }
        let off = shape.len() - s.len();
        let mut out = vec![];
        for (i, &d) in shape.iter().enumerate() {
            if d == -1 {
                if i < off {
                    bail!(
                        Shape,
                        "expand: -1 not allowed for a new dimension in {shape:?}"
                    );
                }
                out.push(s[i - off]);
            } else if d < 0 {
                bail!(Shape, "expand: invalid size {d} in {shape:?}");
            } else {
                out.push(d as usize);
            }
        }
        self.broadcast_to(&out)
    }
    /// Merge the axes from `start_dim` to the last into one (a 0-d tensor becomes `[1]`).
    pub fn flatten(&self, start_dim: isize) -> Result<Tensor> {
        let s = self.shape();
        if s.is_empty() {
            // As in PyTorch: a 0-d tensor flattens (from axis 0 or -1) to one element.
            norm_axis("flatten", start_dim, 1)?;
            return self.reshape_u(&[1]);
        }
        let a = norm_axis("flatten", start_dim, s.len())?;
        let mut out = s[..a].to_vec();
        out.push(s[a..].iter().product());
        self.reshape_u(&out)
    }
    /// Remove a size-1 dim (or all of them with `None`).
    pub fn squeeze(&self, axis: Option<isize>) -> Result<Tensor> {
        let s = self.shape();
        match axis {
            None => {
                let out: Vec<usize> = s.iter().copied().filter(|&d| d != 1).collect();
                self.reshape_u(&out)
            }
            Some(a) => {
                let a = norm_axis("squeeze", a, s.len())?;
                if s[a] != 1 {
                    return Ok(self.clone());
                }
                let mut out = s.clone();
                out.remove(a);
                self.reshape_u(&out)
            }
        }
    }
    /// Insert a size-1 axis at `axis` (negative counts from the end of the result).
    pub fn unsqueeze(&self, axis: isize) -> Result<Tensor> {
        let s = self.shape();
        let a = norm_axis("unsqueeze", axis, s.len() + 1)?;
        let mut out = s.clone();
        out.insert(a, 1);
        self.reshape_u(&out)
    }
    /// Pad every dim by (before, after) with `value`.
    pub fn pad(&self, pads: &[(usize, usize)], value: f64) -> Result<Tensor> {
        let s = self.shape();
        if pads.len() != s.len() {
            bail!(
                Shape,
                "pad: {} (before, after) pairs for {} dims of {s:?}",
                pads.len(),
                s.len()
            );
        }
        if pads.iter().all(|&(a, b)| a == 0 && b == 0) {
            return Ok(self.clone());
        }
        let shape: Option<Vec<usize>> = s
            .iter()
            .zip(pads)
            .map(|(&d, &(a, b))| d.checked_add(a)?.checked_add(b))
            .collect();
        let Some(shape) = shape else {
            bail!(Shape, "pad: padding {pads:?} of {s:?} overflows");
        };
        check_shape("pad", &shape)?;
        let p = Tensor::mk(Op::Pad(pads.to_vec()), self.dtype(), shape.clone(), &[self])?;
        if value == 0.0 {
            return Ok(p);
        }
        // Padding is zero-filled; other values go through a mask (in this tensor's dtype).
        let ones = Tensor::from_node(crate::uop::UOp::new(
            Op::Const(1.0),
            DType::Bool,
            s.clone(),
            self.device(),
            vec![],
        ));
        let mask = Tensor::mk(Op::Pad(pads.to_vec()), DType::Bool, shape, &[&ones])?;
        mask.where_(&p, p.const_like(value))
    }
    /// Keep [start, end) of every dim.
    pub fn shrink(&self, arg: &[(usize, usize)]) -> Result<Tensor> {
        let s = self.shape();
        if arg.len() != s.len() || arg.iter().zip(&s).any(|(&(a, b), &d)| a > b || b > d) {
            bail!(Shape, "shrink: ranges {arg:?} do not fit shape {s:?}");
        }
        if arg.iter().zip(&s).all(|(&(a, b), &d)| a == 0 && b == d) {
            return Ok(self.clone());
        }
        let shape = arg.iter().map(|&(a, b)| b - a).collect();
        Tensor::mk(Op::Shrink(arg.to_vec()), self.dtype(), shape, &[self])
    }
    /// Python slicing `[start:end:step]` along one axis (negative start/end count from the end).
    pub fn slice(&self, axis: isize, start: isize, end: isize, step: usize) -> Result<Tensor> {
        let s = self.shape();
        let a = norm_axis("slice", axis, s.len())?;
        if step == 0 {
            bail!(Shape, "slice: step must be at least 1");
        }
        let n = s[a] as isize;
        let clampi = |v: isize| if v < 0 { (v + n).max(0) } else { v.min(n) } as usize;
        let (lo, hi) = (clampi(start), clampi(end));
        // An empty range gives an empty axis (Python's rule).
        let hi = hi.max(lo);
        let mut arg: Vec<(usize, usize)> = s.iter().map(|&d| (0, d)).collect();
        arg[a] = (lo, hi);
        let t = self.shrink(&arg)?;
        if step == 1 || hi == lo {
            return Ok(t);
        }
        // Pad to a multiple of step, split into (count, step), keep column 0.
        let len = hi - lo;
        let count = len.div_ceil(step);
        let mut pads = vec![(0, 0); s.len()];
        pads[a] = (0, count * step - len);
        let t = t.pad(&pads, 0.0)?;
        let mut shape = t.shape();
        shape[a] = count;
        shape.insert(a + 1, step);
        let t = t.reshape_u(&shape)?;
        let mut arg: Vec<(usize, usize)> = shape.iter().map(|&d| (0, d)).collect();
        arg[a + 1] = (0, 1);
        let t = t.shrink(&arg)?;
        shape.remove(a + 1);
        t.reshape_u(&shape)
    }
    /// Reverse the order of elements along `axes` (a view).
    pub fn flip(&self, axes: &[isize]) -> Result<Tensor> {
        let s = self.shape();
        let mut f = vec![false; s.len()];
        for &a in axes {
            let a = norm_axis("flip", a, s.len())?;
            f[a] = !f[a];
        }
        if !f.iter().any(|&x| x) {
            return Ok(self.clone());
        }
        Tensor::mk(Op::Flip(f), self.dtype(), s, &[self])
    }
    /// Concatenate along `axis`. As in PyTorch, a 1-D empty tensor (shape `[0]`) is skipped
    /// whatever the other shapes.
    pub fn cat(ts: &[&Tensor], axis: isize) -> Result<Tensor> {
        let all = ts;
        let kept: Vec<&Tensor> = ts.iter().copied().filter(|t| t.shape() != [0]).collect();
        let ts = if kept.is_empty() { all } else { &kept[..] };
        let Some(first) = ts.first() else {
            bail!(Shape, "cat: no tensors")
        };
        let s0 = first.shape();
        let a = norm_axis("cat", axis, s0.len())?;
        for t in ts {
            let s = t.shape();
            if s.len() != s0.len()
                || s.iter()
                    .zip(&s0)
                    .enumerate()
                    .any(|(i, (x, y))| i != a && x != y)
            {
                bail!(
                    Shape,
                    "cat: shape {s:?} does not match {s0:?} outside axis {a}"
                );
            }
        }
        if let Some(t) = all.iter().find(|t| t.dtype() != first.dtype()) {
            bail!(
                DType,
                "cat: dtypes {} and {} differ",
                t.dtype(),
                first.dtype()
            );
        }
        // Empty operands add nothing.
        let ts: Vec<&Tensor> = ts.iter().copied().filter(|t| t.shape()[a] > 0).collect();
        if ts.len() <= 1 {
            return Ok((*ts.first().unwrap_or(first)).clone());
        }
        let total: usize = ts.iter().map(|t| t.shape()[a]).sum();
        let mut off = 0;
        let mut acc: Option<Tensor> = None;
        for t in &ts {
            let d = t.shape()[a];
            let mut pads = vec![(0, 0); s0.len()];
            pads[a] = (off, total - off - d);
            off += d;
            let p = t.pad(&pads, 0.0)?;
            acc = Some(match acc {
                None => p,
                Some(x) if x.dtype() == DType::Bool => x.logical_or(&p)?,
                Some(x) => x.add(&p)?,
            });
        }
        acc.ok_or_else(|| crate::Error::new(crate::ErrorKind::Shape, "cat: no tensors"))
    }
    /// Join tensors of one shape and dtype along a new axis at `axis`; errors when the list is
    /// empty or the shapes differ.
    pub fn stack(ts: &[&Tensor], axis: isize) -> Result<Tensor> {
        let Some(first) = ts.first() else {
            bail!(Shape, "stack: no tensors")
        };
        let a = norm_axis("stack", axis, first.ndim() + 1)? as isize;
        let us: Vec<Tensor> = ts.iter().map(|t| t.unsqueeze(a)).collect::<Result<_>>()?;
        Tensor::cat(&us.iter().collect::<Vec<_>>(), a)
    }
    /// Split into pieces of the given sizes along `axis`.
    pub fn split(&self, sizes: &[usize], axis: isize) -> Result<Vec<Tensor>> {
        let s = self.shape();
        let a = norm_axis("split", axis, s.len())?;
        if sizes.iter().try_fold(0usize, |a, &n| a.checked_add(n)) != Some(s[a]) {
            bail!(
                Shape,
                "split: sizes {sizes:?} do not add up to {} (axis {a} of {s:?})",
                s[a]
            );
        }
        let mut off = 0;
        let mut out = vec![];
        for &n in sizes {
            let mut arg: Vec<(usize, usize)> = s.iter().map(|&d| (0, d)).collect();
            arg[a] = (off, off + n);
            out.push(self.shrink(&arg)?);
            off += n;
        }
        Ok(out)
    }
    /// Split into `n` pieces of (at most) equal size, like torch.chunk.
    pub fn chunk(&self, n: usize, axis: isize) -> Result<Vec<Tensor>> {
        let s = self.shape();
        let a = norm_axis("chunk", axis, s.len())?;
        if n == 0 {
            bail!(Shape, "chunk: cannot split into 0 pieces");
        }
        if s[a] == 0 {
            // PyTorch: `n` empty pieces.
            return Ok(vec![self.clone(); n]);
        }
        let size = s[a].div_ceil(n);
        let mut sizes = vec![];
        let mut left = s[a];
        while left > 0 {
            let k = size.min(left);
            sizes.push(k);
            left -= k;
        }
        self.split(&sizes, a as isize)
    }
    /// Tile the tensor: repeat each dim `reps[i]` times (like torch.Tensor.repeat).
    pub fn repeat(&self, reps: &[usize]) -> Result<Tensor> {
        let s = self.shape();
        if reps.len() < s.len() {
            bail!(
                Shape,
                "repeat: {reps:?} must have a count for each of the {} dims",
                s.len()
            );
        }
        let mut base = vec![1usize; reps.len() - s.len()];
        base.extend_from_slice(&s);
        let out: Option<Vec<usize>> = base
            .iter()
            .zip(reps)
            .map(|(&d, &r)| d.checked_mul(r))
            .collect();
        let Some(out) = out else {
            bail!(Shape, "repeat: {reps:?} of {s:?} overflows");
        };
        check_shape_below("repeat", &out, MAX_VIEW_NUMEL)?;
        let t = self.reshape_u(&base)?;
        // (d0, d1, ..) -> (1, d0, 1, d1, ..) -> (r0, d0, r1, d1, ..) -> (r0*d0, r1*d1, ..)
        let mut inter = vec![];
        let mut exp = vec![];
        for (i, &d) in base.iter().enumerate() {
            inter.extend([1, d]);
            exp.extend([reps[i], d]);
        }
        t.reshape_u(&inter)?.expand_u(&exp)?.reshape_u(&out)
    }

    /// `self[idx]` along the first axis: the result has shape `idx.shape ++ self.shape[1..]`.
    /// Built as a one-hot reduction, which the rewrite rules fold into a direct load.
    pub fn index(&self, idx: &Tensor) -> Result<Tensor> {
        let s = self.shape();
        if s.is_empty() {
            bail!(Shape, "index: cannot index a 0-dimensional tensor");
        }
        if idx.dtype().is_float() {
            bail!(
                DType,
                "index: indices must be integers, got {}",
                idx.dtype()
            );
        }
        let ish = idx.shape();
        let n = s[0];
        let rest: Vec<usize> = s[1..].to_vec();
        // one_hot: idx.shape ++ (n,) ++ (1,)*rest
        let mut oh_shape = ish.clone();
        oh_shape.push(n);
        oh_shape.extend(std::iter::repeat_n(1, rest.len()));
        let ar_shape: Vec<usize> = std::iter::repeat_n(1, ish.len())
            .chain([n])
            .chain(std::iter::repeat_n(1, rest.len()))
            .collect();
        let ar = Tensor::iota(n, self.device()).reshape_u(&ar_shape)?;
        let mut ix_shape = ish.clone();
        ix_shape.push(1);
        ix_shape.extend(std::iter::repeat_n(1, rest.len()));
        let ix = idx.cast(DType::I32)?.reshape_u(&ix_shape)?;
        let mut full = ish.clone();
        full.push(n);
        full.extend(&rest);
        let onehot = ar.broadcast_to(&full)?.eq(&ix.broadcast_to(&full)?)?;
        let mut x_shape: Vec<usize> = std::iter::repeat_n(1, ish.len()).collect();
        x_shape.extend(&s);
        let x = self.reshape_u(&x_shape)?.broadcast_to(&full)?;
        let z = x.zeros_like();
        let picked = Tensor::mk(Op::Where, x.dtype(), full, &[&onehot, &x, &z])?;
        picked.sum_keep_dtype(ish.len())
    }
    /// torch.gather: `out[i][j] = self[i][index[i][j]]` along `axis` (any rank).
    pub fn gather(&self, axis: isize, index: &Tensor) -> Result<Tensor> {
        let s = self.shape();
        let a = norm_axis("gather", axis, s.len())?;
        let ish = index.shape();
        if ish.len() != s.len()
            || ish
                .iter()
                .zip(&s)
                .enumerate()
                .any(|(i, (x, y))| i != a && x > y)
        {
            bail!(
                Shape,
                "gather: index shape {ish:?} does not fit {s:?} along axis {a}"
            );
        }
        if index.dtype().is_float() {
            bail!(
                DType,
                "gather: indices must be integers, got {}",
                index.dtype()
            );
        }
        let n = s[a];
        // Work in shape ish ++ (n,): out[.., j, .., k] = self'[.., k, ..] where k == index[..].
        let mut full = ish.clone();
        full.push(n);
        let mut x_arg: Vec<(usize, usize)> = ish.iter().map(|&d| (0, d)).collect();
        x_arg[a] = (0, n);
        let x = self.shrink(&x_arg)?; // shape ish with axis a = n
        let mut order: Vec<isize> = (0..s.len() as isize).collect();
        order.push(a as isize);
        order[a] = s.len() as isize;
        let x = x.unsqueeze(s.len() as isize)?.permute(&order)?; // axis a -> last
        let x = x.broadcast_to(&full)?;
        let mut ar_shape = vec![1usize; ish.len()];
        ar_shape.push(n);
        let ar = Tensor::iota(n, self.device())
            .reshape_u(&ar_shape)?
            .broadcast_to(&full)?;
        let ix = index.cast(DType::I32)?.unsqueeze(-1)?.broadcast_to(&full)?;
        let onehot = ar.eq(&ix)?;
        let z = x.zeros_like();
        let picked = Tensor::mk(Op::Where, x.dtype(), full, &[&onehot, &x, &z])?;
        picked.sum_keep_dtype(ish.len())
    }
}

impl Tensor {
    /// Roll along `axes` by `shifts` (elements leaving one end come back at the other); with no
    /// axes, the flattened tensor rolls and keeps its shape.
    pub fn roll(&self, shifts: &[isize], axes: &[isize]) -> Result<Tensor> {
        if axes.is_empty() {
            let [shift] = shifts else {
                bail!(
                    Shape,
                    "roll: without axes, one shift is needed, got {shifts:?}"
                );
            };
            let s: Vec<isize> = self.shape().iter().map(|&d| d as isize).collect();
            return self.flatten(0)?.roll(&[*shift], &[0])?.reshape(&s);
        }
        if shifts.len() != axes.len() {
            bail!(
                Shape,
                "roll: {} shifts for {} axes",
                shifts.len(),
                axes.len()
            );
        }
        let s = self.shape();
        let mut x = self.clone();
        for (&shift, &axis) in shifts.iter().zip(axes) {
            let a = norm_axis("roll", axis, s.len())?;
            let n = s[a] as isize;
            if n == 0 {
                continue;
            }
            let k = shift.rem_euclid(n);
            if k == 0 {
                continue;
            }
            let tail = x.slice(a as isize, n - k, n, 1)?;
            let head = x.slice(a as isize, 0, n - k, 1)?;
            x = Tensor::cat(&[&tail, &head], a as isize)?;
        }
        Ok(x)
    }
    /// Each element repeated `repeats` times along `axis` (of the flattened tensor with none).
    pub fn repeat_interleave(&self, repeats: usize, axis: Option<isize>) -> Result<Tensor> {
        let (x, a) = match axis {
            None => (self.flatten(0)?, 0),
            Some(a) => (
                self.clone(),
                norm_axis("repeat_interleave", a, self.ndim())?,
            ),
        };
        let s = x.shape();
        let mut wide = s.clone();
        wide.insert(a + 1, repeats);
        let mut out = s.clone();
        out[a] = s[a].checked_mul(repeats).ok_or_else(|| {
            crate::Error::new(
                crate::ErrorKind::Shape,
                format!("repeat_interleave: {repeats} repeats of {s:?} overflow"),
            )
        })?;
        x.unsqueeze(a as isize + 1)?
            .expand_u(&wide)?
            .reshape_u(&out)
    }
    /// Axis `axis` split into `sizes` (one may be -1); the inverse of `flatten`.
    pub fn unflatten(&self, axis: isize, sizes: &[isize]) -> Result<Tensor> {
        let s = self.shape();
        let a = norm_axis("unflatten", axis, s.len())?;
        let mut out: Vec<isize> = s[..a].iter().map(|&d| d as isize).collect();
        out.extend(sizes);
        out.extend(s[a + 1..].iter().map(|&d| d as isize));
        let t = self.reshape(&out)?;
        let ts = t.shape();
        if ts[a..a + sizes.len()].iter().product::<usize>() != s[a] {
            bail!(
                Shape,
                "unflatten: sizes {sizes:?} do not multiply to {} (axis {a} of {s:?})",
                s[a]
            );
        }
        Ok(t)
    }
    /// Flatten axes `start..=end` into one (negative counts from the end).
    pub fn flatten_range(&self, start: isize, end: isize) -> Result<Tensor> {
        let s = self.shape();
        if s.is_empty() {
            return self.flatten(start);
        }
        let (a, b) = (
            norm_axis("flatten", start, s.len())?,
            norm_axis("flatten", end, s.len())?,
        );
        if a > b {
            bail!(
                Shape,
                "flatten: start axis {start} comes after end axis {end} of {s:?}"
            );
        }
        let mut out = s[..a].to_vec();
        out.push(s[a..=b].iter().product());
        out.extend(&s[b + 1..]);
        self.reshape_u(&out)
    }
    /// Coordinate grids from 1-D tensors: `"ij"` (matrix) or `"xy"` (Cartesian: the first two
    /// swapped) indexing.
    pub fn meshgrid(ts: &[&Tensor], indexing: &str) -> Result<Vec<Tensor>> {
        if indexing != "ij" && indexing != "xy" {
            bail!(
                Shape,
                "meshgrid: indexing must be \"ij\" or \"xy\", got {indexing:?}"
            );
        }
        if ts.iter().any(|t| t.ndim() > 1) {
            bail!(
                Shape,
                "meshgrid: needs 0-D or 1-D tensors, got shapes {:?}",
                ts.iter().map(|t| t.shape()).collect::<Vec<_>>()
            );
        }
        let n = ts.len();
        let mut sizes: Vec<usize> = ts.iter().map(|t| t.numel()).collect();
        if indexing == "xy" && n > 1 {
            sizes.swap(0, 1);
        }
        ts.iter()
            .enumerate()
            .map(|(i, t)| {
                let p = if indexing == "xy" && n > 1 && i < 2 {
                    1 - i
                } else {
                    i
                };
                let mut s = vec![1; n];
                s[p] = t.numel();
                t.reshape_u(&s)?.broadcast_to(&sizes)
            })
            .collect()
    }
    /// A square matrix with this 1-D tensor on its diagonal.
    pub fn diag(&self) -> Result<Tensor> {
        let s = self.shape();
        if s.len() != 1 {
            bail!(Shape, "diag: needs a 1-D tensor, got shape {s:?}");
        }
        let n = s[0];
        // [n, 1] padded to [n, n + 1], flattened and cut to n * n: row i holds x[i] at column i.
        self.reshape_u(&[n, 1])?
            .pad(&[(0, 0), (0, n)], 0.0)?
            .reshape_u(&[n * (n + 1)])?
            .shrink(&[(0, n * n)])?
            .reshape_u(&[n, n])
    }
    /// The diagonal of axes `a` and `b` (moved to the end, as one axis), `offset` above (or,
    /// negative, below) the main one; a view.
    pub fn diagonal(&self, offset: isize, a: isize, b: isize) -> Result<Tensor> {
        let s = self.shape();
        let (d1, d2) = (
            norm_axis("diagonal", a, s.len())?,
            norm_axis("diagonal", b, s.len())?,
        );
        if d1 == d2 {
            bail!(Shape, "diagonal: the two axes are both {d1}");
        }
        let mut order: Vec<isize> = (0..s.len())
            .filter(|&i| i != d1 && i != d2)
            .map(|i| i as isize)
            .collect();
        order.extend([d1 as isize, d2 as isize]);
        let x = self.permute(&order)?;
        let xs = x.shape();
        let nd = xs.len();
        let (rows, cols) = (xs[nd - 2] as isize, xs[nd - 1] as isize);
        let (r0, c0) = if offset >= 0 {
            (0, offset)
        } else {
            (-offset, 0)
        };
        // An offset past the matrix leaves an empty diagonal (PyTorch's rule).
        let d = (rows - r0).min(cols - c0).max(0) as usize;
        if d == 0 {
            let mut out = xs[..nd - 2].to_vec();
            out.push(0);
            let mut keep: Vec<(usize, usize)> = xs.iter().map(|&n| (0, n)).collect();
            keep[nd - 2] = (0, 0);
            return x.shrink(&keep)?.reshape_u(&out);
        }
        let mut keep: Vec<(usize, usize)> = xs.iter().map(|&n| (0, n)).collect();
        keep[nd - 2] = (r0 as usize, r0 as usize + d);
        keep[nd - 1] = (c0 as usize, c0 as usize + d);
        let x = x.shrink(&keep)?;
        // [.., d, d] flattened, padded to d * (d + 1), as [.., d, d + 1]: column 0 is the diagonal.
        let lead = xs[..nd - 2].to_vec();
        let mut flat = lead.clone();
        flat.push(d * d);
        let mut pads = vec![(0, 0); lead.len()];
        pads.push((0, d));
        let mut wide = lead.clone();
        wide.extend([d, d + 1]);
        let x = x.reshape_u(&flat)?.pad(&pads, 0.0)?.reshape_u(&wide)?;
        let mut col: Vec<(usize, usize)> = wide.iter().map(|&n| (0, n)).collect();
        col[lead.len() + 1] = (0, 1);
        let mut out = lead;
        out.push(d);
        x.shrink(&col)?.reshape_u(&out)
    }
    /// Reshape (tinygrad's and PyTorch's `view`: the same, as every reshape here is a view).
    pub fn view(&self, shape: &[isize]) -> Result<Tensor> {
        self.reshape(shape)
    }
    /// Zero-pad (at the end of each axis) up to `shape`; -1 keeps an axis.
    pub fn pad_to(&self, shape: &[isize]) -> Result<Tensor> {
        let s = self.shape();
        if shape.len() != s.len() {
            bail!(
                Shape,
                "pad_to: target {shape:?} does not have the rank of {s:?}"
            );
        }
        let mut pads = vec![];
        for (&want, &have) in shape.iter().zip(&s) {
            let want = if want == -1 { have as isize } else { want };
            if want < have as isize {
                bail!(Shape, "pad_to: target {shape:?} is smaller than {s:?}");
            }
            pads.push((0, want as usize - have));
        }
        self.pad(&pads, 0.0)
    }
}

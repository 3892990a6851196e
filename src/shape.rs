//! Views: how a movement op (reshape, permute, expand, pad, shrink, flip) re-addresses memory
//! without copying. A `View` is (shape, strides, offset, mask); a `ShapeTracker` is a stack of
//! views for the cases one view cannot express. The scheduler folds chains of movement ops into a
//! `ShapeTracker`, and lowering turns it into index and validity expressions.

use crate::codegen::{KGraph, Ref};
use crate::dtype::DType;

/// Row-major strides of a contiguous tensor; size-1 dims get stride 0.
pub fn strides_for(shape: &[usize]) -> Vec<isize> {
    let mut st = vec![0isize; shape.len()];
    let mut acc = 1isize;
    for i in (0..shape.len()).rev() {
        st[i] = if shape[i] == 1 { 0 } else { acc };
        acc *= shape[i] as isize;
    }
    st
}

pub fn prod(shape: &[usize]) -> usize {
    shape.iter().product()
}

/// One affine addressing of a buffer: element `i` lives at `offset + Σ i_k * strides_k`, and is
/// only valid (otherwise reads as 0) when `mask_lo_k <= i_k < mask_hi_k` for every k.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct View {
    pub shape: Vec<usize>,
    pub strides: Vec<isize>,
    pub offset: isize,
    pub mask: Option<Vec<(usize, usize)>>,
}

impl View {
    pub fn contiguous(shape: &[usize]) -> View {
        View {
            shape: shape.to_vec(),
            strides: strides_for(shape),
            offset: 0,
            mask: None,
        }
    }

    pub fn is_contiguous(&self) -> bool {
        self.offset == 0 && self.mask.is_none() && self.strides == strides_for(&self.shape)
    }

    fn canonical(mut self) -> View {
        for (i, &s) in self.shape.iter().enumerate() {
            if s == 1 {
                self.strides[i] = 0;
            }
        }
        if let Some(m) = &self.mask {
            let full = m
                .iter()
                .zip(&self.shape)
                .all(|(&(lo, hi), &s)| lo == 0 && hi == s);
            if full {
                self.mask = None;
            }
        }
        self
    }

    fn permute(&self, order: &[usize]) -> View {
        View {
            shape: order.iter().map(|&i| self.shape[i]).collect(),
            strides: order.iter().map(|&i| self.strides[i]).collect(),
            offset: self.offset,
            mask: self
                .mask
                .as_ref()
                .map(|m| order.iter().map(|&i| m[i]).collect()),
        }
    }

    fn expand(&self, new_shape: &[usize]) -> View {
        let mut v = self.clone();
        for (i, &ns) in new_shape.iter().enumerate() {
            if self.shape[i] != ns {
                v.strides[i] = 0;
                if let Some(m) = &mut v.mask {
                    m[i] = if m[i].1 > m[i].0 { (0, ns) } else { (0, 0) };
                }
            }
        }
        v.shape = new_shape.to_vec();
        v.canonical()
    }

    fn shrink(&self, arg: &[(usize, usize)]) -> View {
        let mut v = self.clone();
        for (i, &(lo, hi)) in arg.iter().enumerate() {
            v.offset += lo as isize * self.strides[i];
            v.shape[i] = hi - lo;
            if let Some(m) = &mut v.mask {
                let (mlo, mhi) = m[i];
                let nlo = mlo.max(lo).min(hi) - lo;
                let nhi = mhi.min(hi).max(lo) - lo;
                m[i] = if nhi > nlo { (nlo, nhi) } else { (0, 0) };
            }
        }
        v.canonical()
    }

    fn pad(&self, arg: &[(usize, usize)]) -> View {
        let mut v = self.clone();
        let mut mask = self
            .mask
            .clone()
            .unwrap_or_else(|| self.shape.iter().map(|&s| (0, s)).collect());
        for (i, &(lo, hi)) in arg.iter().enumerate() {
            v.offset -= lo as isize * self.strides[i];
            v.shape[i] = self.shape[i] + lo + hi;
            mask[i] = if mask[i].1 > mask[i].0 {
                (mask[i].0 + lo, mask[i].1 + lo)
            } else {
                (0, 0)
            };
        }
        v.mask = Some(mask);
        v.canonical()
    }

    fn flip(&self, axes: &[bool]) -> View {
        let mut v = self.clone();
        for (i, &f) in axes.iter().enumerate() {
            if f && self.shape[i] > 0 {
                let s = self.shape[i];
                v.offset += (s as isize - 1) * self.strides[i];
                v.strides[i] = -self.strides[i];
                if let Some(m) = &mut v.mask {
                    m[i] = if m[i].1 > m[i].0 {
                        (s - m[i].1, s - m[i].0)
                    } else {
                        (0, 0)
                    };
                }
            }
        }
        v
    }

    /// Reshape within this view when the strides allow it; `None` means a new view is needed.
    fn reshape(&self, new_shape: &[usize]) -> Option<View> {
        if self.shape == new_shape {
            return Some(self.clone());
        }
        if self.mask.is_none() && self.strides == strides_for(&self.shape) {
            let mut v = View::contiguous(new_shape);
            v.offset = self.offset;
            return Some(v);
        }
        // Only size-1 dims added or removed: keep every real dim's stride and mask.
        let old: Vec<usize> = (0..self.shape.len())
            .filter(|&i| self.shape[i] != 1)
            .collect();
        let new_real: Vec<usize> = new_shape.iter().copied().filter(|&s| s != 1).collect();
        if old
            .iter()
            .map(|&i| self.shape[i])
            .eq(new_real.iter().copied())
        {
            let size1_masked_out = self.mask.as_ref().is_some_and(|m| {
                (0..self.shape.len()).any(|i| self.shape[i] == 1 && m[i].1 <= m[i].0)
            });
            if !size1_masked_out {
                let mut strides = vec![0isize; new_shape.len()];
                let mut mask: Option<Vec<(usize, usize)>> = self
                    .mask
                    .as_ref()
                    .map(|_| new_shape.iter().map(|&s| (0, s)).collect());
                let mut k = 0;
                for (j, &s) in new_shape.iter().enumerate() {
                    if s != 1 {
                        strides[j] = self.strides[old[k]];
                        if let (Some(m), Some(om)) = (&mut mask, &self.mask) {
                            m[j] = om[old[k]];
                        }
                        k += 1;
                    }
                }
                return Some(
                    View {
                        shape: new_shape.to_vec(),
                        strides,
                        offset: self.offset,
                        mask,
                    }
                    .canonical(),
                );
            }
        }
        if self.mask.is_some() {
            return None;
        }
        // Merge the old dims into runs that are contiguous among themselves, then split each run
        // into the new dims that exactly cover it.
        let dims: Vec<(usize, isize)> = (0..self.shape.len())
            .filter(|&i| self.shape[i] != 1)
            .map(|i| (self.shape[i], self.strides[i]))
            .collect();
        let mut runs: Vec<(usize, isize)> = vec![]; // (size, stride of the innermost element)
        for &(s, st) in &dims {
            match runs.last_mut() {
                Some(last) if last.1 == st * s as isize => {
                    last.0 *= s;
                    last.1 = st;
                }
                _ => runs.push((s, st)),
            }
        }
        let mut strides = vec![0isize; new_shape.len()];
        let mut j = 0;
        for &(size, inner) in &runs {
            let mut covered = 1usize;
            let mut members = vec![];
            while covered < size {
                if j >= new_shape.len() {
                    return None;
                }
                if new_shape[j] != 1 {
                    covered *= new_shape[j];
                    members.push(j);
                }
                j += 1;
            }
            if covered != size {
                return None;
            }
            let mut acc = inner;
            for &k in members.iter().rev() {
                strides[k] = acc;
                acc *= new_shape[k] as isize;
            }
        }
        if new_shape[j..].iter().any(|&s| s != 1) {
            return None;
        }
        Some(
            View {
                shape: new_shape.to_vec(),
                strides,
                offset: self.offset,
                mask: None,
            }
            .canonical(),
        )
    }

    /// (index, valid) of this view for the multi-index `idx`.
    fn index(&self, g: &mut KGraph, idx: &[Ref]) -> (Ref, Ref) {
        let mut lin = g.int(self.offset as i64);
        for (i, &ix) in idx.iter().enumerate() {
            if self.strides[i] != 0 && self.shape[i] != 1 {
                let st = g.int(self.strides[i] as i64);
                let term = g.mul(ix, st);
                lin = g.add(lin, term);
            }
        }
        let mut valid = g.bool_const(true);
        if let Some(m) = &self.mask {
            for (i, &(lo, hi)) in m.iter().enumerate() {
                if lo > 0 {
                    let c = g.int(lo as i64);
                    let ok = g.le(c, idx[i]);
                    valid = g.and(valid, ok);
                }
                if hi < self.shape[i] {
                    let c = g.int(hi as i64);
                    let ok = g.lt(idx[i], c);
                    valid = g.and(valid, ok);
                }
            }
        }
        (lin, valid)
    }
}

/// Unravel a linear index into a multi-index of a contiguous `shape`.
pub fn unravel(g: &mut KGraph, lin: Ref, shape: &[usize]) -> Vec<Ref> {
    let mut out = vec![g.int(0); shape.len()];
    let mut acc = 1usize;
    for i in (0..shape.len()).rev() {
        if shape[i] != 1 {
            let a = g.int(acc as i64);
            let d = g.div(lin, a);
            let s = g.int(shape[i] as i64);
            out[i] = g.modulo(d, s);
        }
        acc *= shape[i];
    }
    out
}

/// A stack of views, outermost last: the last view maps the consumer's indices, each earlier view
/// re-addresses the contiguous shape of the one after it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ShapeTracker {
    pub views: Vec<View>,
}

impl ShapeTracker {
    pub fn contiguous(shape: &[usize]) -> Self {
        ShapeTracker {
            views: vec![View::contiguous(shape)],
        }
    }
    pub fn shape(&self) -> &[usize] {
        &self.views.last().expect("views").shape
    }
    /// True when every element of the source is read exactly once (a permutation, flip or
    /// reshape of it: no padding, no broadcasting, nothing dropped).
    pub fn is_bijective(&self, source_numel: usize) -> bool {
        let v = &self.views[0];
        self.views.len() == 1
            && v.mask.is_none()
            && prod(&v.shape) == source_numel
            && v.shape
                .iter()
                .zip(&v.strides)
                .all(|(&d, &s)| d == 1 || s != 0)
    }
    /// True when the tracker reads its source in order: index i of the result is element i.
    pub fn is_identity(&self) -> bool {
        self.views.len() == 1 && self.views[0].is_contiguous()
    }
    fn map_last(mut self, f: impl FnOnce(&View) -> View) -> Self {
        let v = f(self.views.last().expect("views"));
        *self.views.last_mut().expect("views") = v;
        self
    }
    pub fn permute(self, order: &[usize]) -> Self {
        self.map_last(|v| v.permute(order))
    }
    pub fn expand(self, shape: &[usize]) -> Self {
        self.map_last(|v| v.expand(shape))
    }
    pub fn shrink(self, arg: &[(usize, usize)]) -> Self {
        self.map_last(|v| v.shrink(arg))
    }
    pub fn pad(self, arg: &[(usize, usize)]) -> Self {
        self.map_last(|v| v.pad(arg))
    }
    pub fn flip(self, axes: &[bool]) -> Self {
        self.map_last(|v| v.flip(axes))
    }
    pub fn reshape(mut self, shape: &[usize]) -> Self {
        match self.views.last().expect("views").reshape(shape) {
            Some(v) => {
                *self.views.last_mut().expect("views") = v;
                // A contiguous top view over a single earlier view can be dropped when the
                // earlier one reshapes cleanly to the new shape.
                if self.views.len() > 1 && self.views.last().is_some_and(|v| v.is_contiguous()) {
                    let below = &self.views[self.views.len() - 2];
                    if let Some(nv) = below.reshape(shape) {
                        self.views.pop();
                        *self.views.last_mut().expect("views") = nv;
                    }
                }
            }
            None => self.views.push(View::contiguous(shape)),
        }
        self
    }

    /// (linear index into the source buffer, validity) for the multi-index `idx` of `shape()`.
    pub fn to_index(&self, g: &mut KGraph, idx: &[Ref]) -> (Ref, Ref) {
        let mut idx = idx.to_vec();
        let mut valid = g.bool_const(true);
        for (k, v) in self.views.iter().enumerate().rev() {
            let (lin, ok) = v.index(g, &idx);
            valid = g.and(valid, ok);
            if k == 0 {
                return (lin, valid);
            }
            idx = unravel(g, lin, &self.views[k - 1].shape);
        }
        unreachable!("a ShapeTracker has at least one view")
    }
}

/// The type index arithmetic is done in everywhere (WGSL has no 64-bit integers).
pub const INDEX: DType = DType::I32;

#[cfg(test)]
mod tests {
    use super::*;

    fn eval(st: &ShapeTracker) -> Vec<Option<i64>> {
        // Evaluate the tracker for every index with the kernel-graph evaluator.
        let shape = st.shape().to_vec();
        let n = prod(&shape);
        (0..n)
            .map(|i| {
                let mut g = KGraph::new();
                let lin = g.int(i as i64);
                let idx = unravel(&mut g, lin, &shape);
                let (ix, ok) = st.to_index(&mut g, &idx);
                let ok = g.const_value(ok).expect("constant");
                (ok != 0.0).then(|| g.const_value(ix).expect("constant") as i64)
            })
            .collect()
    }

    #[test]
    fn permute_then_reshape_is_two_views_or_one() {
        let st = ShapeTracker::contiguous(&[2, 3])
            .permute(&[1, 0])
            .reshape(&[6]);
        assert_eq!(eval(&st), [0, 3, 1, 4, 2, 5].map(Some));
        let merged = ShapeTracker::contiguous(&[2, 3, 4])
            .reshape(&[6, 4])
            .reshape(&[24]);
        assert_eq!(merged.views.len(), 1);
    }

    #[test]
    fn pad_shrink_flip_expand() {
        let st = ShapeTracker::contiguous(&[3]).pad(&[(1, 2)]);
        assert_eq!(eval(&st), vec![None, Some(0), Some(1), Some(2), None, None]);
        let st = ShapeTracker::contiguous(&[4])
            .shrink(&[(1, 3)])
            .flip(&[true]);
        assert_eq!(eval(&st), vec![Some(2), Some(1)]);
        let st = ShapeTracker::contiguous(&[1, 3]).expand(&[2, 3]);
        assert_eq!(eval(&st), [0, 1, 2, 0, 1, 2].map(Some));
    }

    #[test]
    fn strided_reshape_merges_runs() {
        // (2,3,4) permuted to (3,2,4) then merging the last two dims stays one view.
        let st = ShapeTracker::contiguous(&[2, 3, 4])
            .permute(&[1, 0, 2])
            .reshape(&[3, 2, 2, 2]);
        assert_eq!(st.views.len(), 1);
        let reference: Vec<Option<i64>> = (0..24)
            .map(|i| Some(((i / 8) * 4 + ((i / 4) % 2) * 12 + i % 4) as i64))
            .collect();
        assert_eq!(eval(&st), reference);
    }
}

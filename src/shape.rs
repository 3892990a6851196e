//! Views: how a movement op (reshape, permute, expand, pad, shrink, flip) re-addresses memory
//! without copying. A `View` is (shape, strides, offset, mask); a `ShapeTracker` is a stack of
//! views for the cases one view cannot express. The scheduler folds chains of movement ops into a
//! `ShapeTracker`; the kernel IR (`kernel::st_index`) turns it into index and validity expressions.

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

/// The number of elements of a shape (1 for the scalar shape `[]`).
pub fn prod(shape: &[usize]) -> usize {
    shape.iter().product()
}

/// One affine addressing of a buffer: element `i` lives at `offset + Σ i_k * strides_k`, and is
/// only valid (otherwise reads as 0) when `mask_lo_k <= i_k < mask_hi_k` for every k.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct View {
    /// Size of each axis.
    pub shape: Vec<usize>,
    /// Elements to step in the buffer per step along each axis (0 for broadcast axes).
    pub strides: Vec<isize>,
    /// Buffer index of element `[0, 0, …]`.
    pub offset: isize,
    /// The valid `(lo, hi)` range of each axis, if any axis is padded; `None` when all are valid.
    pub mask: Option<Vec<(usize, usize)>>,
}

impl View {
    /// The row-major view of a buffer of this shape.
    pub fn contiguous(shape: &[usize]) -> View {
        View {
            shape: shape.to_vec(),
            strides: strides_for(shape),
            offset: 0,
            mask: None,
        }
    }

    /// Whether the view reads a buffer in order from its start, with nothing masked.
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
}

/// A stack of views, outermost last: the last view maps the consumer's indices, each earlier view
/// re-addresses the contiguous shape of the one after it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ShapeTracker {
    /// The views, outermost last.
    pub views: Vec<View>,
}

impl ShapeTracker {
    /// One contiguous view of this shape.
    pub fn contiguous(shape: &[usize]) -> Self {
        ShapeTracker {
            views: vec![View::contiguous(shape)],
        }
    }
    /// The shape the consumer sees (the last view's).
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
    /// Reorder the axes (see `Op::Permute`).
    pub fn permute(self, order: &[usize]) -> Self {
        self.map_last(|v| v.permute(order))
    }
    /// Broadcast size-1 axes to `shape`.
    pub fn expand(self, shape: &[usize]) -> Self {
        self.map_last(|v| v.expand(shape))
    }
    /// Keep `start..end` of each axis.
    pub fn shrink(self, arg: &[(usize, usize)]) -> Self {
        self.map_last(|v| v.shrink(arg))
    }
    /// Pad each axis with `(before, after)` masked elements.
    pub fn pad(self, arg: &[(usize, usize)]) -> Self {
        self.map_last(|v| v.pad(arg))
    }
    /// Reverse the axes marked `true`.
    pub fn flip(self, axes: &[bool]) -> Self {
        self.map_last(|v| v.flip(axes))
    }
    /// View the same elements under `shape` (same element count); pushes a new view when the last
    /// one cannot express it.
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
}

/// The type index arithmetic is done in everywhere (WGSL has no 64-bit integers).
pub const INDEX: DType = DType::I32;

/// Largest number of elements a buffer may hold: index arithmetic is 32-bit (`INDEX`).
pub const MAX_NUMEL: usize = i32::MAX as usize;

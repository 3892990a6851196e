//! Cumulative ops along an axis (inclusive scans): `cumsum`, `cumprod`, `cummax`, `cummin`,
//! `logcumsumexp`. A scan of `n` elements is a reduce of an `n x n` lower-triangular view (each
//! output reads the elements up to it), so for long axes it runs in two levels, as tinygrad's:
//! chunks of `CHUNK` are scanned each, the chunks' totals are scanned (recursively), and each
//! chunk is combined with the total of the chunks before it. The work is `O(n * CHUNK)`, and an
//! output of a sum adds at most `CHUNK` terms per level, which keeps float sums accurate.

use super::{norm_axis, Tensor};
use crate::dtype::DType;
use crate::error::Result;
use crate::ops::ReduceOp;

/// Elements per chunk of a two-level scan (axes up to twice this are scanned directly).
const CHUNK: usize = 256;

/// Which scan: its reduce over the triangle and how two partial results combine.
#[derive(Clone, Copy, PartialEq)]
enum Scan {
    Sum,
    Prod,
    Max,
    LogSumExp,
}

impl Scan {
    fn identity(self, dtype: DType) -> f64 {
        match self {
            Scan::Sum => 0.0,
            Scan::Prod => 1.0,
            Scan::Max | Scan::LogSumExp => dtype.min_value(),
        }
    }

    fn combine(self, a: &Tensor, b: &Tensor) -> Result<Tensor> {
        match self {
            Scan::Sum => a.add(b),
            Scan::Prod => a.mul(b),
            Scan::Max => a.maximum(b),
            Scan::LogSumExp => a.logaddexp(b),
        }
    }

    /// The scan of the last axis directly: the reduce of the triangle `j <= i`.
    fn direct(self, x: &Tensor) -> Result<Tensor> {
        let mut s = x.shape();
        let n = s[s.len() - 1];
        let dev = x.device();
        let i = Tensor::iota(n, dev).reshape_u(&[n, 1])?;
        let j = Tensor::iota(n, dev).reshape_u(&[1, n])?;
        let below = j.le(&i)?; // [i, j]: element j counts for output i
        s.insert(s.len() - 1, n);
        let rows = x.unsqueeze(-2)?.broadcast_to(&s)?; // [.., i, j] = x[.., j]
        let ident = rows.const_like(self.identity(x.dtype()));
        let tri = |v: &Tensor| below.where_(v, &ident);
        match self {
            Scan::Sum => Ok(tri(&rows)?.reduce_op(ReduceOp::Sum, &[s.len() - 1])),
            Scan::Prod => Ok(tri(&rows)?.reduce_op(ReduceOp::Prod, &[s.len() - 1])),
            Scan::Max => Ok(tri(&rows)?.reduce_op(ReduceOp::Max, &[s.len() - 1])),
            Scan::LogSumExp => {
                // Shifted by each output's own running max, so no exp overflows and none of the
                // terms that matter underflows.
                let m = Scan::Max.direct(x)?.detach();
                let m = m.abs()?.eq(f64::INFINITY)?.where_(0.0, &m)?.unsqueeze(-1)?;
                let e = below.where_(&rows.sub(&m)?.exp()?, 0.0)?;
                e.reduce_op(ReduceOp::Sum, &[s.len() - 1]).log()?.add(&m)
            }
        }
        .and_then(|r| r.reshape_u(&x.shape()))
    }

    /// The scan of the last axis, in two levels when it is long.
    fn last_axis(self, x: &Tensor) -> Result<Tensor> {
        let s = x.shape();
        let n = s[s.len() - 1];
        if n <= 2 * CHUNK {
            return self.direct(x);
        }
        let ident = self.identity(x.dtype());
        // Identity elements in front, so the chunks end where the axis ends.
        let m = n.div_ceil(CHUNK);
        let mut pads = vec![(0, 0); s.len()];
        pads[s.len() - 1] = (m * CHUNK - n, 0);
        let mut cs = s[..s.len() - 1].to_vec();
        cs.extend([m, CHUNK]);
        let chunks = self.direct(&x.pad(&pads, ident)?.reshape_u(&cs)?)?;
        // Each chunk's total, scanned over the chunks and shifted by one: what comes before it.
        let mut last: Vec<(usize, usize)> = cs.iter().map(|&d| (0, d)).collect();
        last[cs.len() - 1] = (CHUNK - 1, CHUNK);
        let totals = chunks.shrink(&last)?.reshape_u(&cs[..cs.len() - 1])?;
        let before = self.last_axis(&totals)?;
        let mut shift = vec![(0, 0); cs.len() - 1];
        shift[cs.len() - 2] = (1, 0);
        let mut keep: Vec<(usize, usize)> = cs[..cs.len() - 1].iter().map(|&d| (0, d)).collect();
        keep[cs.len() - 2] = (0, m);
        let before = before.pad(&shift, ident)?.shrink(&keep)?.unsqueeze(-1)?;
        let all = self.combine(&chunks, &before)?;
        let mut flat = s[..s.len() - 1].to_vec();
        flat.push(m * CHUNK);
        let all = all.reshape_u(&flat)?;
        let mut tail: Vec<(usize, usize)> = flat.iter().map(|&d| (0, d)).collect();
        tail[flat.len() - 1] = (m * CHUNK - n, m * CHUNK);
        all.shrink(&tail)
    }
}

impl Tensor {
    /// `scan` along `axis` (moved last and back).
    fn scan(&self, op: &str, axis: isize, scan: Scan) -> Result<Tensor> {
        if self.ndim() == 0 {
            return Ok(self.clone());
        }
        let a = norm_axis(op, axis, self.ndim())? as isize;
        let x = self.transpose(a, -1)?;
        scan.last_axis(&x)?.transpose(a, -1)
    }

    /// Cumulative sum along `axis` (bool and u8 sum as i32, as `sum`).
    pub fn cumsum(&self, axis: isize) -> Result<Tensor> {
        let x = match self.dtype() {
            DType::Bool | DType::U8 => self.cast(DType::I32)?,
            _ => self.clone(),
        };
        x.scan("cumsum", axis, Scan::Sum)
    }
    /// Cumulative product along `axis` (bool and u8 multiply as i32).
    pub fn cumprod(&self, axis: isize) -> Result<Tensor> {
        let x = match self.dtype() {
            DType::Bool | DType::U8 => self.cast(DType::I32)?,
            _ => self.clone(),
        };
        x.scan("cumprod", axis, Scan::Prod)
    }
    /// Running maximum along `axis` and, as i32, the index where it was reached: the first
    /// index of a tied maximum (tinygrad's choice; PyTorch gives the last).
    pub fn cummax(&self, axis: isize) -> Result<(Tensor, Tensor)> {
        let values = self.scan("cummax", axis, Scan::Max)?;
        if self.ndim() == 0 {
            return Ok((values, self.const_like(0.0).cast(DType::I32)?));
        }
        let a = norm_axis("cummax", axis, self.ndim())? as isize;
        let (x, v) = (self.transpose(a, -1)?, values.transpose(a, -1)?);
        // Element j starts a new maximum when it exceeds the running maximum before it; the
        // index of the maximum at i is the last such j up to i.
        let s = x.shape();
        let n = s[s.len() - 1];
        let mut shift = vec![(0, 0); s.len()];
        shift[s.len() - 1] = (1, 0);
        let mut keep: Vec<(usize, usize)> = s.iter().map(|&d| (0, d)).collect();
        keep[s.len() - 1] = (0, n);
        let prev = v.pad(&shift, x.dtype().min_value())?.shrink(&keep)?;
        let mut pos_shape = vec![1; s.len()];
        pos_shape[s.len() - 1] = n;
        let pos = Tensor::iota(n, self.device()).reshape_u(&pos_shape)?;
        let first = pos.eq(0)?;
        let starts = x.gt(&prev)?.logical_or(&first)?.where_(&pos, 0)?;
        let idx = starts.scan("cummax", -1, Scan::Max)?;
        Ok((values, idx.transpose(a, -1)?))
    }
    /// Running minimum along `axis` and the index where it was reached (the first of ties).
    pub fn cummin(&self, axis: isize) -> Result<(Tensor, Tensor)> {
        let x = if self.dtype().is_unsigned() {
            self.cast(DType::I32)?
        } else {
            self.clone()
        };
        let (v, i) = x.neg()?.cummax(axis)?;
        Ok((v.neg()?.cast(self.dtype())?, i))
    }
    /// `log(cumsum(exp(x)))` along `axis`, without overflow or loss of small terms.
    pub fn logcumsumexp(&self, axis: isize) -> Result<Tensor> {
        self.to_float("logcumsumexp")?
            .scan("logcumsumexp", axis, Scan::LogSumExp)
    }
}

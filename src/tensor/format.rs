//! Printing tensors like PyTorch's `repr`: `Display` gives `tensor([[1.0000, 2.5000], ...])`
//! with the values read back (natively; in the browser, where nothing may block, the shape and
//! dtype only), long axes summarized with `...`; `Debug` adds the shape, dtype and device.

use super::Tensor;
use std::fmt;

#[cfg(not(target_arch = "wasm32"))]
use values::repr_of;

/// Reading values back blocks: only natively.
#[cfg(not(target_arch = "wasm32"))]
mod values {
    use super::Tensor;
    use crate::dtype::DType;

    /// Above this many elements, each axis shows its first and last `EDGE` entries.
    const SUMMARIZE_ABOVE: usize = 1000;
    const EDGE: usize = 3;

    /// How every element is written (one format for the whole tensor, as PyTorch does).
    enum Style {
        Int,
        Bool,
        /// Whole floats: `1.`, `-3.`.
        Whole,
        Fixed,
        Sci,
    }

    fn style(dtype: DType, vals: &[f64]) -> Style {
        if dtype == DType::Bool {
            return Style::Bool;
        }
        if !dtype.is_float() {
            return Style::Int;
        }
        let finite: Vec<f64> = vals.iter().copied().filter(|v| v.is_finite()).collect();
        if finite.iter().all(|v| v.fract() == 0.0) && finite.iter().all(|v| v.abs() < 1e8) {
            return Style::Whole;
        }
        let nonzero = finite.iter().filter(|v| **v != 0.0).map(|v| v.abs());
        let (lo, hi) = nonzero.fold((f64::INFINITY, 0.0f64), |(l, h), v| (l.min(v), h.max(v)));
        if hi >= 1e8 || lo < 1e-4 || hi / lo > 1e3 && lo < 1e-2 {
            Style::Sci
        } else {
            Style::Fixed
        }
    }

    fn number(v: f64, s: &Style) -> String {
        if v.is_nan() {
            return "nan".into();
        }
        if v.is_infinite() {
            return if v > 0.0 { "inf".into() } else { "-inf".into() };
        }
        match s {
            Style::Bool => if v != 0.0 { "True" } else { "False" }.into(),
            Style::Int => format!("{}", v as i64),
            Style::Whole => format!("{v:.0}."),
            Style::Fixed => format!("{v:.4}"),
            Style::Sci => {
                let e = format!("{v:.4e}");
                // Rust writes 1.2340e8; PyTorch 1.2340e+08.
                match e.split_once('e') {
                    Some((m, x)) => {
                        let (sign, digits) = x.strip_prefix('-').map_or(("+", x), |d| ("-", d));
                        format!("{m}e{sign}{digits:0>2}")
                    }
                    None => e,
                }
            }
        }
    }

    /// Nested brackets over `shape`, the strings of `vals` padded to one width.
    fn nested(
        out: &mut String,
        vals: &[String],
        shape: &[usize],
        width: usize,
        summarize: bool,
        indent: usize,
    ) {
        if shape.is_empty() {
            out.push_str(&format!("{:>width$}", vals[0]));
            return;
        }
        let n = shape[0];
        let inner: usize = shape[1..].iter().product();
        out.push('[');
        let show: Vec<Option<usize>> = if summarize && n > 2 * EDGE {
            (0..EDGE)
                .map(Some)
                .chain([None])
                .chain((n - EDGE..n).map(Some))
                .collect()
        } else {
            (0..n).map(Some).collect()
        };
        for (k, i) in show.iter().enumerate() {
            if k > 0 {
                out.push(',');
                if shape.len() > 1 {
                    out.push_str(&"\n".repeat(shape.len() - 1));
                    out.push_str(&" ".repeat(indent + 1));
                } else {
                    out.push(' ');
                }
            }
            match i {
                Some(i) => nested(
                    out,
                    &vals[i * inner..(i + 1) * inner],
                    &shape[1..],
                    width,
                    summarize,
                    indent + 1,
                ),
                None => out.push_str("..."),
            }
        }
        out.push(']');
    }

    /// The values as PyTorch's `repr` writes them (`tensor([...])`); reads them back.
    pub(super) fn repr_of(t: &Tensor) -> crate::Result<String> {
        let dtype = t.dtype();
        let shape = t.shape();
        let dt = if dtype != DType::F32 {
            format!(", dtype={dtype}")
        } else {
            String::new()
        };
        if t.numel() == 0 {
            // PyTorch: `tensor([])` for shape (0,), else `tensor([], size=(2, 0))`.
            if shape == [0] {
                return Ok(format!("tensor([]{dt})"));
            }
            let dims: Vec<String> = shape.iter().map(|d| d.to_string()).collect();
            return Ok(format!("tensor([], size=({}){dt})", dims.join(", ")));
        }
        // Every dtype exactly (i32 and u32 beyond 2^24 included).
        let bytes = crate::runtime::block_on(t.bytes_async())?;
        let vals: Vec<f64> = bytes
            .chunks_exact(dtype.size())
            .map(|c| crate::dtype::read_f64(dtype, c))
            .collect();
        let st = style(dtype, &vals);
        let strs: Vec<String> = vals.iter().map(|&v| number(v, &st)).collect();
        let width = strs.iter().map(|s| s.len()).max().unwrap_or(0);
        let mut out = String::from("tensor(");
        let summarize = t.numel() > SUMMARIZE_ABOVE;
        nested(&mut out, &strs, &shape, width, summarize, "tensor(".len());
        out.push_str(&dt);
        out.push(')');
        Ok(out)
    }
}

impl fmt::Display for Tensor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        #[cfg(not(target_arch = "wasm32"))]
        match repr_of(self) {
            Ok(s) => f.write_str(&s),
            Err(e) => write!(f, "tensor(<{e}>, shape={:?})", self.shape()),
        }
        #[cfg(target_arch = "wasm32")]
        write!(
            f,
            "tensor(<not read back>, shape={:?}, dtype={})",
            self.shape(),
            self.dtype()
        )
    }
}

impl fmt::Debug for Tensor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let l = self.lazy();
        let s = self.to_string();
        let body = s.strip_suffix(')').unwrap_or(&s);
        write!(
            f,
            "{body}, shape={:?}, dtype={}, device={})",
            l.shape,
            l.shards[0].dtype,
            l.placement()
        )
    }
}

#[cfg(all(test, not(target_arch = "wasm32")))]
mod tests {
    use crate::{Context, DType, Device, Tensor};

    #[test]
    fn prints_like_pytorch() -> crate::Result<()> {
        Context::new().dev(Device::Interp).run(|| {
            let a = Tensor::from_slice(&[1.0f32, 2.5, -3.0, 0.125], &[2, 2])?;
            assert_eq!(
                a.to_string(),
                "tensor([[ 1.0000,  2.5000],\n        [-3.0000,  0.1250]])"
            );
            let w = Tensor::from_slice(&[1.0f32, -2.0, 3.0], &[3])?;
            assert_eq!(w.to_string(), "tensor([ 1., -2.,  3.])");
            let i = Tensor::from_slice(&[7i32, -12], &[2])?;
            assert_eq!(i.to_string(), "tensor([  7, -12], dtype=i32)");
            let b = Tensor::from_slice(&[true, false], &[2])?;
            assert_eq!(b.to_string(), "tensor([ True, False], dtype=bool)");
            let s = Tensor::from_slice(&[1e-6f32, 2.0], &[2])?;
            assert_eq!(s.to_string(), "tensor([1.0000e-06, 2.0000e+00])");
            let big = Tensor::arange(0.0, 2000.0, 1.0, DType::F32)?;
            assert_eq!(
                big.to_string(),
                "tensor([   0.,    1.,    2., ..., 1997., 1998., 1999.])"
            );
            assert_eq!(Tensor::scalar(0.5).to_string(), "tensor(0.5000)");
            let d = format!("{a:?}");
            assert!(
                d.ends_with(", shape=[2, 2], dtype=f32, device=INTERP:0)"),
                "{d}"
            );
            Ok(())
        })
    }
}

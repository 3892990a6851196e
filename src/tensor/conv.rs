//! Convolutions, pooling and resampling on `Tensor`, as in tinygrad: a convolution or a pool is
//! a windowed view of its (padded) input (`pool`: movement ops only, no copy) followed by a
//! product and a reduction; a transposed convolution is the convolution of its input spread out
//! by the stride with the flipped weight; the padding modes, `unfold` and `interpolate` are
//! movement ops and gathers. Every shape and option is checked here, so a bad kernel size or a
//! stride of 0 is an error naming the op, never a panic.

use super::{norm_axis, Tensor};
use crate::dtype::DType;
use crate::error::{bail, Error, ErrorKind, Result};

/// Padding of a 2-D convolution.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Padding {
    #[default]
    /// No padding: the output shrinks by the dilated kernel size less one (the default).
    Valid,
    /// Output as large as the input; requires stride 1.
    Same,
    /// (rows, columns) of zeros on each side.
    Explicit(usize, usize),
}

/// Options of `conv2d`: stride, padding, dilation, groups.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Conv2dOpts {
    /// (rows, columns) between windows.
    pub stride: (usize, usize),
    /// Zeros added around the input.
    pub padding: Padding,
    /// (rows, columns) between kernel taps.
    pub dilation: (usize, usize),
    /// Input and output channels split into this many groups (channels must divide by it).
    pub groups: usize,
}

impl Default for Conv2dOpts {
    fn default() -> Self {
        Conv2dOpts {
            stride: (1, 1),
            padding: Padding::Valid,
            dilation: (1, 1),
            groups: 1,
        }
    }
}

/// Padding of a 1-D convolution.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Padding1d {
    #[default]
    /// No padding: the output shrinks by the dilated kernel size less one (the default).
    Valid,
    /// Output as long as the input; requires stride 1.
    Same,
    /// Zeros on each side.
    Explicit(usize),
}

/// Options of `conv1d`: stride, padding, dilation, groups.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Conv1dOpts {
    /// Elements between windows.
    pub stride: usize,
    /// Zeros added around the input.
    pub padding: Padding1d,
    /// Elements between kernel taps.
    pub dilation: usize,
    /// Input and output channels split into this many groups (channels must divide by it).
    pub groups: usize,
}

impl Default for Conv1dOpts {
    fn default() -> Self {
        Conv1dOpts {
            stride: 1,
            padding: Padding1d::Valid,
            dilation: 1,
            groups: 1,
        }
    }
}

/// Options of `conv_transpose2d` (PyTorch's meaning): the output is
/// `(in - 1)·stride − 2·padding + dilation·(kernel − 1) + output_padding + 1` per spatial dim.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConvTranspose2dOpts {
    /// (rows, columns) the input is spread out by.
    pub stride: (usize, usize),
    /// (rows, columns) removed from each side of the output.
    pub padding: (usize, usize),
    /// (rows, columns) added to one side of the output (below the stride).
    pub output_padding: (usize, usize),
    /// (rows, columns) between kernel taps.
    pub dilation: (usize, usize),
    /// Channels split into this many groups.
    pub groups: usize,
}

impl Default for ConvTranspose2dOpts {
    fn default() -> Self {
        ConvTranspose2dOpts {
            stride: (1, 1),
            padding: (0, 0),
            output_padding: (0, 0),
            dilation: (1, 1),
            groups: 1,
        }
    }
}

/// Options of `conv_transpose1d`, as `ConvTranspose2dOpts` for one spatial dim.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConvTranspose1dOpts {
    /// Elements the input is spread out by.
    pub stride: usize,
    /// Elements removed from each side of the output.
    pub padding: usize,
    /// Elements added to one side of the output (below the stride).
    pub output_padding: usize,
    /// Elements between kernel taps.
    pub dilation: usize,
    /// Channels split into this many groups.
    pub groups: usize,
}

impl Default for ConvTranspose1dOpts {
    fn default() -> Self {
        ConvTranspose1dOpts {
            stride: 1,
            padding: 0,
            output_padding: 0,
            dilation: 1,
            groups: 1,
        }
    }
}

/// Options of `max_pool2d_with` / `avg_pool2d_with` / `max_unpool2d`: the stride (the kernel
/// size when `None`), `padding` on each side of (rows, columns), `dilation`, `ceil_mode` (the
/// output size rounds up: a last window may hang off the edge, as long as it starts inside the
/// input or the left padding) and `count_include_pad` (average pooling divides by the whole
/// window, padding included, rather than by the input elements it covers).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pool2dOpts {
    /// (rows, columns) between windows; `None`: the kernel size.
    pub stride: Option<(usize, usize)>,
    /// (rows, columns) of padding on each side.
    pub padding: (usize, usize),
    /// (rows, columns) between window taps.
    pub dilation: (usize, usize),
    /// Round the output size up instead of down.
    pub ceil_mode: bool,
    /// Average pooling divides by the whole window, padding included.
    pub count_include_pad: bool,
}

impl Default for Pool2dOpts {
    fn default() -> Self {
        Pool2dOpts {
            stride: None,
            padding: (0, 0),
            dilation: (1, 1),
            ceil_mode: false,
            count_include_pad: true,
        }
    }
}

/// How `pad_with` fills the new elements (tinygrad's `mode`s).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum PadMode {
    /// This value.
    Constant(f64),
    /// The elements mirrored about the edge, the edge itself excluded (pads < the dim's size).
    Reflect,
    /// The edge element repeated.
    Replicate,
    /// The elements from the other end, wrapping around (pads <= the dim's size).
    Circular,
}

impl std::str::FromStr for PadMode {
    type Err = Error;
    /// "constant" (with 0), "reflect", "replicate" or "circular".
    fn from_str(s: &str) -> Result<PadMode> {
        Ok(match s {
            "constant" => PadMode::Constant(0.0),
            "reflect" => PadMode::Reflect,
            "replicate" => PadMode::Replicate,
            "circular" => PadMode::Circular,
            _ => bail!(
                Other,
                "pad: mode must be \"constant\", \"reflect\", \"replicate\" or \"circular\", got {s:?}"
            ),
        })
    }
}

/// How `interpolate` computes each output element.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Interpolation {
    /// The input element at `floor(i · in/out)` (PyTorch's "nearest").
    Nearest,
    /// The input element at `floor((i + 0.5) · in/out)`.
    NearestExact,
    /// Linear in each resized dim (bilinear for two, trilinear for three).
    #[default]
    Linear,
}

impl std::str::FromStr for Interpolation {
    type Err = Error;
    /// "nearest", "nearest-exact", "linear" (also "bilinear" and "trilinear": the dims resized
    /// are those `size` names, whatever the mode's name says).
    fn from_str(s: &str) -> Result<Interpolation> {
        Ok(match s {
            "nearest" => Interpolation::Nearest,
            "nearest-exact" => Interpolation::NearestExact,
            "linear" | "bilinear" | "trilinear" => Interpolation::Linear,
            _ => bail!(
                Other,
                "interpolate: mode must be \"nearest\", \"nearest-exact\" or \"linear\" \
                 (\"bilinear\", \"trilinear\"), got {s:?}"
            ),
        })
    }
}

/// The resolved kernel, stride, dilation and (before, after) pads of a 2-D pool.
struct PoolArgs {
    k: [usize; 2],
    s: [usize; 2],
    d: [usize; 2],
    pads: Vec<(usize, usize)>,
}

/// `(before, after)` as signed pads.
fn signed(p: (usize, usize)) -> Result<(isize, isize)> {
    match (isize::try_from(p.0), isize::try_from(p.1)) {
        (Ok(a), Ok(b)) => Ok((a, b)),
        _ => bail!(Shape, "padding {p:?} is out of range"),
    }
}

impl Tensor {
    /// Sliding windows over the last `k.len()` dims: shape `(..., o_0, o_1, .., k_0, k_1, ..)`.
    pub(crate) fn pool(&self, k: &[usize], stride: &[usize], dilation: &[usize]) -> Result<Tensor> {
        let s = self.shape();
        let nd = k.len();
        if s.len() < nd {
            bail!(Shape, "pool: {nd} window dims for a tensor of shape {s:?}");
        }
        let lead = s.len() - nd;
        let noop = s[..lead].to_vec();
        let i = s[lead..].to_vec();
        let mut o = vec![];
        for d in 0..nd {
            // Checked: a zero or huge window size comes from the caller (the JS API too).
            let span = k[d]
                .checked_sub(1)
                .and_then(|x| x.checked_mul(dilation[d]))
                .and_then(|x| x.checked_add(1));
            let Some(span) = span.filter(|&n| n <= i[d] && stride[d] > 0 && dilation[d] > 0) else {
                bail!(
                    Shape,
                    "pool: window {k:?} (dilation {dilation:?}) does not fit input {i:?}"
                );
            };
            o.push((i[d] - span) / stride[d] + 1);
        }
        let full =
            |x: &Tensor| -> Vec<(usize, usize)> { x.shape().iter().map(|&d| (0, d)).collect() };
        // Fit dim `lead + j` (of `x`) to exactly `n` elements by shrinking or zero padding.
        let fit = |x: Tensor, dim: usize, n: usize| -> Result<Tensor> {
            let cur = x.shape()[dim];
            if n <= cur {
                let mut a = full(&x);
                a[dim] = (0, n);
                x.shrink(&a)
            } else {
                let mut p = vec![(0, 0); x.ndim()];
                p[dim] = (0, n - cur);
                x.pad(&p, 0.0)
            }
        };
        let mut order: Vec<isize> = (0..lead as isize).collect();
        if (0..nd).all(|d| k[d] <= stride[d] && dilation[d] == 1) {
            // Non-overlapping windows: (o*s) -> (o, s) -> keep the first k of each s.
            let mut x = self.clone();
            for d in 0..nd {
                x = fit(x, lead + d, o[d] * stride[d])?;
            }
            let mut sh = noop.clone();
            for d in 0..nd {
                sh.extend([o[d], stride[d]]);
            }
            let x = x.reshape_u(&sh)?;
            let mut a = full(&x);
            for d in 0..nd {
                a[lead + 2 * d + 1] = (0, k[d]);
            }
            let x = x.shrink(&a)?;
            order.extend((0..nd).map(|d| (lead + 2 * d) as isize));
            order.extend((0..nd).map(|d| (lead + 2 * d + 1) as isize));
            return x.permute(&order);
        }
        // Overlapping or dilated windows: repeat the input k times and zero pad it to k*(i+d),
        // so that row kk, column m of a (k, i+d) reshape is element kk*d + m (the windows only
        // read columns m <= i - 1 - kk*d, which lie in the repeats), then take columns o*s.
        // Repeating k times, not ceil(k*(i+d)/i) times and shrinking, keeps the gradient's
        // sum over the repeats at k terms (col2im: 3x3 terms per input, not 4x4).
        let mut reps = vec![1usize; lead];
        reps.extend(k);
        let mut x = self.repeat(&reps)?;
        for d in 0..nd {
            x = fit(x, lead + d, k[d] * (i[d] + dilation[d]))?;
        }
        let mut sh = noop.clone();
        for d in 0..nd {
            sh.extend([k[d], i[d] + dilation[d]]);
        }
        let mut x = x.reshape_u(&sh)?;
        for d in 0..nd {
            x = fit(x, lead + 2 * d + 1, o[d] * stride[d])?;
        }
        let mut sh = noop.clone();
        for d in 0..nd {
            sh.extend([k[d], o[d], stride[d]]);
        }
        let x = x.reshape_u(&sh)?;
        let mut a = full(&x);
        for d in 0..nd {
            a[lead + 3 * d + 2] = (0, 1);
        }
        let x = x.shrink(&a)?;
        let mut sh = noop.clone();
        for d in 0..nd {
            sh.extend([k[d], o[d]]);
        }
        let x = x.reshape_u(&sh)?;
        order.extend((0..nd).map(|d| (lead + 2 * d + 1) as isize));
        order.extend((0..nd).map(|d| (lead + 2 * d) as isize));
        x.permute(&order)
    }

    // ------------------------------------------------------------------------- padding modes

    /// Pad every dim by `(before, after)` (tinygrad's `pad(padding, mode, value)`): a negative
    /// pad crops that many elements instead. `Constant` and `Circular` crop first (a circular
    /// pad wraps the cropped tensor), `Reflect` and `Replicate` pad the whole tensor first, then
    /// crop, as tinygrad does.
    pub fn pad_with(&self, pads: &[(isize, isize)], mode: PadMode) -> Result<Tensor> {
        let s = self.shape();
        if pads.len() != s.len() {
            bail!(
                Shape,
                "pad: {} (before, after) pairs for {} dims of {s:?}",
                pads.len(),
                s.len()
            );
        }
        let grow: Vec<(usize, usize)> = pads
            .iter()
            .map(|&(a, b)| (a.max(0) as usize, b.max(0) as usize))
            .collect();
        let crop = |x: &Tensor| -> Result<Tensor> {
            let xs = x.shape();
            let mut arg = vec![];
            for (d, &(a, b)) in pads.iter().enumerate() {
                let (lo, hi) = (
                    if a < 0 { a.unsigned_abs() } else { 0 },
                    if b < 0 { b.unsigned_abs() } else { 0 },
                );
                if lo.saturating_add(hi) > xs[d] {
                    bail!(
                        Shape,
                        "pad: padding {pads:?} crops dim {d} of {s:?} by more than its size"
                    );
                }
                arg.push((lo, xs[d] - hi));
            }
            x.shrink(&arg)
        };
        match mode {
            PadMode::Constant(v) => crop(self)?.pad_keeping_dtype(&grow, v),
            PadMode::Circular => {
                let mut x = crop(self)?;
                for (d, &(a, b)) in grow.iter().enumerate() {
                    let n = x.shape()[d];
                    if a > n || b > n {
                        bail!(
                            Shape,
                            "pad: circular padding {pads:?} of {s:?} wraps dim {d} more than once"
                        );
                    }
                    let before = (a > 0).then(|| x.narrow(d, n - a, n)).transpose()?;
                    let after = (b > 0).then(|| x.narrow(d, 0, b)).transpose()?;
                    x = x.between(d, before, after)?;
                }
                Ok(x)
            }
            PadMode::Reflect | PadMode::Replicate => {
                let mut x = self.clone();
                for (d, &(a, b)) in grow.iter().enumerate() {
                    let n = s[d];
                    let (before, after) = if mode == PadMode::Reflect {
                        if a >= n || b >= n {
                            bail!(
                                Shape,
                                "pad: reflect padding {pads:?} must be less than each dim of {s:?}"
                            );
                        }
                        let f = [d as isize];
                        (
                            (a > 0)
                                .then(|| x.narrow(d, 1, a + 1)?.flip(&f))
                                .transpose()?,
                            (b > 0)
                                .then(|| x.narrow(d, n - 1 - b, n - 1)?.flip(&f))
                                .transpose()?,
                        )
                    } else {
                        if n == 0 && a + b > 0 {
                            bail!(
                                Shape,
                                "pad: replicate padding {pads:?} of {s:?} has no edge to repeat in dim {d}"
                            );
                        }
                        let edge = |lo: usize, len: usize| -> Result<Tensor> {
                            let mut sh = x.shape();
                            sh[d] = len;
                            x.narrow(d, lo, lo + 1)?.broadcast_to(&sh)
                        };
                        (
                            (a > 0).then(|| edge(0, a)).transpose()?,
                            (b > 0).then(|| edge(n - 1, b)).transpose()?,
                        )
                    };
                    x = x.between(d, before, after)?;
                }
                crop(&x)
            }
        }
    }

    /// Elements `lo..hi` of dim `d`.
    fn narrow(&self, d: usize, lo: usize, hi: usize) -> Result<Tensor> {
        let mut arg: Vec<(usize, usize)> = self.shape().iter().map(|&n| (0, n)).collect();
        arg[d] = (lo, hi);
        self.shrink(&arg)
    }

    /// `[before, self, after]` concatenated along dim `d` (the absent ones left out).
    fn between(&self, d: usize, before: Option<Tensor>, after: Option<Tensor>) -> Result<Tensor> {
        let parts: Vec<&Tensor> = before.iter().chain([self]).chain(after.iter()).collect();
        if parts.len() == 1 {
            return Ok(self.clone());
        }
        Tensor::cat(&parts, d as isize)
    }

    /// Windows of `size` elements every `step` elements along `dim` (tinygrad's and PyTorch's
    /// `unfold`): `dim` becomes the window count `(n - size) / step + 1` and a new last dim
    /// holds each window.
    pub fn unfold(&self, dim: isize, size: usize, step: usize) -> Result<Tensor> {
        let s = self.shape();
        let d = norm_axis("unfold", dim, s.len())?;
        if size == 0 || step == 0 || size > s[d] {
            bail!(
                Shape,
                "unfold: size {size} and step {step} must be at least 1, and the size at most \
                 dim {d} of {s:?}"
            );
        }
        let n = s.len();
        let mut to_last: Vec<isize> = (0..n as isize).filter(|&i| i != d as isize).collect();
        to_last.push(d as isize);
        let mut back = vec![0isize; n + 1];
        for (pos, &axis) in to_last.iter().enumerate() {
            back[axis as usize] = pos as isize;
        }
        back[n] = n as isize;
        self.permute(&to_last)?
            .pool(&[size], &[step], &[1])?
            .permute(&back)
    }

    // ------------------------------------------------------------------------- convolutions

    /// The convolution every public one reduces to, over `pads.len()` spatial dims: input
    /// `(N, C, *spatial)`, weight `(O, C/groups, *kernel)`, `pads` (before, after) per spatial
    /// dim (negative ones crop), named `op` in errors.
    #[allow(clippy::too_many_arguments)]
    fn conv_nd(
        &self,
        op: &str,
        weight: &Tensor,
        bias: Option<&Tensor>,
        groups: usize,
        stride: &[usize],
        dilation: &[usize],
        pads: &[(isize, isize)],
    ) -> Result<Tensor> {
        let (xs, ws) = (self.shape(), weight.shape());
        let nd = pads.len();
        if xs.len() != nd + 2 || ws.len() != nd + 2 {
            let dims = ["L", "H, W", "D, H, W"]
                .get(nd.wrapping_sub(1))
                .unwrap_or(&"...");
            let kdims = ["k", "kh, kw", "kd, kh, kw"]
                .get(nd.wrapping_sub(1))
                .unwrap_or(&"...");
            bail!(
                Shape,
                "{op}: input {xs:?} must be (N, C, {dims}) and weight {ws:?} (O, C/groups, {kdims})"
            );
        }
        let g = groups;
        let (n, cin, cout) = (xs[0], xs[1], ws[0]);
        if g == 0 || cin % g != 0 || cout % g != 0 || ws[1] != cin / g {
            bail!(
                Shape,
                "{op}: input {xs:?} and weight {ws:?} do not match for groups={g}"
            );
        }
        if stride.contains(&0) || dilation.contains(&0) {
            bail!(
                Shape,
                "{op}: stride {stride:?} and dilation {dilation:?} must be at least 1"
            );
        }
        let k = &ws[2..];
        if k.contains(&0) {
            bail!(Shape, "{op}: weight {ws:?} has an empty kernel {k:?}");
        }
        let mut padded = vec![];
        for d in 0..nd {
            let len = xs[2 + d] as i128 + pads[d].0 as i128 + pads[d].1 as i128;
            let span = dilation[d] as i128 * (k[d] as i128 - 1) + 1;
            if len < span {
                bail!(
                    Shape,
                    "{op}: kernel {k:?} (dilation {dilation:?}) does not fit input {xs:?} \
                     padded by {pads:?}"
                );
            }
            padded.push(len);
        }
        if let Some(b) = bias {
            if b.shape() != [cout] {
                bail!(Shape, "{op}: bias {:?} must be ({cout},)", b.shape());
            }
        }
        let mut all = vec![(0, 0); 2];
        all.extend(pads);
        let x = self.pad_with(&all, PadMode::Constant(0.0))?;
        let win = x.pool(k, stride, dilation)?; // (N, C, *o, *k)
        let o = win.shape()[2..2 + nd].to_vec();
        let (cg, rc) = (cin / g, cout / g);
        let mut sh = vec![n, g, cg, 1];
        sh.extend(&o);
        sh.extend(k);
        let mut ex = vec![n, g, cg, rc];
        ex.extend(&o);
        ex.extend(k);
        // (N, g, rc, *o, cg, *k)
        let mut order: Vec<isize> = vec![0, 1, 3];
        order.extend((4..4 + nd as isize).collect::<Vec<_>>());
        order.push(2);
        order.extend((4 + nd as isize..4 + 2 * nd as isize).collect::<Vec<_>>());
        let win = win.reshape_u(&sh)?.expand_u(&ex)?.permute(&order)?;
        let mut wsh = vec![1, g, rc];
        wsh.extend(std::iter::repeat_n(1, nd));
        wsh.push(cg);
        wsh.extend(k);
        let w = weight.reshape_u(&wsh)?;
        let axes: Vec<isize> = (1..=1 + nd as isize).map(|a| -a).collect();
        let mut out_shape = vec![n, cout];
        out_shape.extend(&o);
        let out = win.mul(&w)?.sum(axes, false)?.reshape_u(&out_shape)?;
        match bias {
            Some(b) => {
                let mut bsh = vec![1, cout];
                bsh.extend(std::iter::repeat_n(1, nd));
                out.add(&b.reshape_u(&bsh)?)
            }
            None => Ok(out),
        }
    }

    /// 2-D convolution of (N, C, H, W) with weight (O, C/groups, kh, kw).
    pub fn conv2d(
        &self,
        weight: &Tensor,
        bias: Option<&Tensor>,
        opts: &Conv2dOpts,
    ) -> Result<Tensor> {
        let (xs, ws) = (self.shape(), weight.shape());
        if xs.len() != 4 || ws.len() != 4 {
            bail!(
                Shape,
                "conv2d: input {xs:?} must be (N, C, H, W) and weight {ws:?} (O, C/groups, kh, kw)"
            );
        }
        let (kh, kw) = (ws[2], ws[3]);
        let (dh, dw) = opts.dilation;
        let (ph, pw) = match opts.padding {
            Padding::Valid => ((0, 0), (0, 0)),
            Padding::Explicit(a, b) => (signed((a, a))?, signed((b, b))?),
            Padding::Same => {
                if opts.stride != (1, 1) {
                    bail!(
                        Shape,
                        "conv2d: padding \"same\" requires stride 1, got {:?}",
                        opts.stride
                    );
                }
                (same_pads("conv2d", kh, dh)?, same_pads("conv2d", kw, dw)?)
            }
        };
        self.conv_nd(
            "conv2d",
            weight,
            bias,
            opts.groups,
            &[opts.stride.0, opts.stride.1],
            &[dh, dw],
            &[ph, pw],
        )
    }

    /// 1-D convolution of (N, C, L) with weight (O, C/groups, k).
    pub fn conv1d(
        &self,
        weight: &Tensor,
        bias: Option<&Tensor>,
        opts: &Conv1dOpts,
    ) -> Result<Tensor> {
        let (xs, ws) = (self.shape(), weight.shape());
        if xs.len() != 3 || ws.len() != 3 {
            bail!(
                Shape,
                "conv1d: input {xs:?} must be (N, C, L) and weight {ws:?} (O, C/groups, k)"
            );
        }
        let p = match opts.padding {
            Padding1d::Valid => (0, 0),
            Padding1d::Explicit(a) => signed((a, a))?,
            Padding1d::Same => {
                if opts.stride != 1 {
                    bail!(
                        Shape,
                        "conv1d: padding \"same\" requires stride 1, got {}",
                        opts.stride
                    );
                }
                same_pads("conv1d", ws[2], opts.dilation)?
            }
        };
        self.conv_nd(
            "conv1d",
            weight,
            bias,
            opts.groups,
            &[opts.stride],
            &[opts.dilation],
            &[p],
        )
    }

    /// The transposed convolution (the gradient of a convolution with respect to its input)
    /// over `stride.len()` spatial dims: input `(N, C_in, *spatial)`, weight
    /// `(C_in, C_out/groups, *kernel)` as PyTorch lays it out.
    #[allow(clippy::too_many_arguments)]
    fn conv_transpose_nd(
        &self,
        op: &str,
        weight: &Tensor,
        bias: Option<&Tensor>,
        groups: usize,
        stride: &[usize],
        padding: &[usize],
        output_padding: &[usize],
        dilation: &[usize],
    ) -> Result<Tensor> {
        let (xs, ws) = (self.shape(), weight.shape());
        let nd = stride.len();
        if xs.len() != nd + 2 || ws.len() != nd + 2 {
            let (dims, kdims) = if nd == 1 {
                ("L", "k")
            } else {
                ("H, W", "kh, kw")
            };
            bail!(
                Shape,
                "{op}: input {xs:?} must be (N, C_in, {dims}) and weight {ws:?} \
                 (C_in, C_out/groups, {kdims})"
            );
        }
        let g = groups;
        let (n, cin, rc) = (xs[0], xs[1], ws[1]);
        if g == 0 || ws[0] != cin || cin % g != 0 {
            bail!(
                Shape,
                "{op}: input {xs:?} and weight {ws:?} do not match for groups={g}"
            );
        }
        if stride.contains(&0) || dilation.contains(&0) {
            bail!(
                Shape,
                "{op}: stride {stride:?} and dilation {dilation:?} must be at least 1"
            );
        }
        let k = ws[2..].to_vec();
        let mut pads = vec![];
        for d in 0..nd {
            // The output length (in - 1)·s + d·(k - 1) + op + 1 - 2p must be at least 1.
            let (i, s, di) = (xs[2 + d] as i128, stride[d] as i128, dilation[d] as i128);
            let full = (i - 1) * s + di * (k[d] as i128 - 1) + output_padding[d] as i128 + 1;
            if full <= 2 * padding[d] as i128 {
                bail!(
                    Shape,
                    "{op}: padding {padding:?} leaves no output for input {xs:?} and weight {ws:?}"
                );
            }
            let edge = di * (k[d] as i128 - 1) - padding[d] as i128;
            let (a, b) = (edge, edge + output_padding[d] as i128);
            match (isize::try_from(a), isize::try_from(b)) {
                (Ok(a), Ok(b)) => pads.push((a, b)),
                _ => bail!(Shape, "{op}: padding {padding:?} is out of range"),
            }
        }
        // (C_in, C_out/g, *k) -> (g, C_out/g, C_in/g, *k), flipped -> (C_out, C_in/g, *k).
        let cg = cin / g;
        let mut sh = vec![g, cg, rc];
        sh.extend(&k);
        let flip: Vec<isize> = (3..3 + nd as isize).collect();
        let mut wsh = vec![g * rc, cg];
        wsh.extend(&k);
        let w = weight
            .reshape_u(&sh)?
            .transpose(1, 2)?
            .flip(&flip)?
            .reshape_u(&wsh)?;
        // Spread the input by the stride: (.., i) -> (.., i, 1) -> (.., i, s) -> (.., i·s - (s-1)).
        let mut x = self.clone();
        if stride.iter().any(|&s| s > 1) {
            let mut sh = vec![n, cin];
            let mut pad = vec![(0, 0); 2];
            let mut spread = vec![n, cin];
            let mut keep = vec![(0, n), (0, cin)];
            for d in 0..nd {
                sh.extend([xs[2 + d], 1]);
                pad.extend([(0, 0), (0, stride[d] - 1)]);
                spread.push(xs[2 + d] * stride[d]);
                keep.push((0, xs[2 + d] * stride[d] - (stride[d] - 1)));
            }
            x = x
                .reshape_u(&sh)?
                .pad(&pad, 0.0)?
                .reshape_u(&spread)?
                .shrink(&keep)?;
        }
        let ones = vec![1; nd];
        x.conv_nd(op, &w, bias, g, &ones, dilation, &pads)
    }

    /// 2-D transposed convolution of (N, C_in, H, W) with weight (C_in, C_out/groups, kh, kw)
    /// (PyTorch's layout). As tinygrad (PyTorch refuses these), an `output_padding` of at least
    /// the stride and the dilation is allowed: it adds rows and columns of bias only.
    pub fn conv_transpose2d(
        &self,
        weight: &Tensor,
        bias: Option<&Tensor>,
        opts: &ConvTranspose2dOpts,
    ) -> Result<Tensor> {
        let o = opts;
        self.conv_transpose_nd(
            "conv_transpose2d",
            weight,
            bias,
            o.groups,
            &[o.stride.0, o.stride.1],
            &[o.padding.0, o.padding.1],
            &[o.output_padding.0, o.output_padding.1],
            &[o.dilation.0, o.dilation.1],
        )
    }

    /// 1-D transposed convolution of (N, C_in, L) with weight (C_in, C_out/groups, k).
    pub fn conv_transpose1d(
        &self,
        weight: &Tensor,
        bias: Option<&Tensor>,
        opts: &ConvTranspose1dOpts,
    ) -> Result<Tensor> {
        let o = opts;
        self.conv_transpose_nd(
            "conv_transpose1d",
            weight,
            bias,
            o.groups,
            &[o.stride],
            &[o.padding],
            &[o.output_padding],
            &[o.dilation],
        )
    }

    // ------------------------------------------------------------------------- pooling

    /// Kernel, stride, dilation and the (before, after) pads of the last two dims of a 2-D pool
    /// (ceil mode adds what the last window needs after the input).
    fn pool2d_args(&self, op: &str, kernel: (usize, usize), opts: &Pool2dOpts) -> Result<PoolArgs> {
        let s = self.shape();
        if s.len() < 2 {
            bail!(Shape, "{op}: input {s:?} needs at least 2 dims");
        }
        let k = [kernel.0, kernel.1];
        let st = opts.stride.unwrap_or(kernel);
        let st = [st.0, st.1];
        let d = [opts.dilation.0, opts.dilation.1];
        let p = [opts.padding.0, opts.padding.1];
        if k.contains(&0) || st.contains(&0) || d.contains(&0) {
            bail!(
                Shape,
                "{op}: kernel {k:?}, stride {st:?} and dilation {d:?} must be at least 1"
            );
        }
        let i = &s[s.len() - 2..];
        let mut pads = vec![];
        for a in 0..2 {
            let span = (k[a] - 1).checked_mul(d[a]).and_then(|x| x.checked_add(1));
            let len = p[a].checked_mul(2).and_then(|x| x.checked_add(i[a]));
            let (Some(span), Some(len)) = (span, len) else {
                bail!(Shape, "{op}: kernel {k:?} or padding {p:?} is out of range");
            };
            if span > len {
                bail!(
                    Shape,
                    "{op}: kernel {k:?} (dilation {d:?}) does not fit input {s:?} padded by {p:?}"
                );
            }
            if !opts.ceil_mode {
                pads.push((p[a], p[a]));
                continue;
            }
            // tinygrad's `_apply_ceil_mode`: pad after the input so that the last window, which
            // ceil mode adds, exists, but drop it when it would start in the right padding.
            let o = (len - span).div_ceil(st[a]) + 1;
            let last = st[a] * (o - 1);
            let extra = last + span - len;
            let drop = last.saturating_sub(p[a] + i[a] - 1);
            pads.push((p[a], p[a] + extra - drop));
        }
        Ok(PoolArgs { k, s: st, d, pads })
    }

    /// Windows `(..., oh, ow, kh, kw)` of the input padded by `pads` (last two dims) with `v`.
    fn windows2d(
        &self,
        k: &[usize; 2],
        s: &[usize; 2],
        d: &[usize; 2],
        pads: &[(usize, usize)],
        v: f64,
    ) -> Result<Tensor> {
        let mut all = vec![(0, 0); self.ndim() - 2];
        all.extend(pads);
        self.pad_keeping_dtype(&all, v)?.pool(k, s, d)
    }

    /// `pad` with a fill of this tensor's own dtype (an integer tensor padded with `v` stays
    /// integer; `pad` would promote it to f32 for a value other than 0).
    fn pad_keeping_dtype(&self, pads: &[(usize, usize)], v: f64) -> Result<Tensor> {
        let dt = self.dtype();
        if v == 0.0 || dt.is_float() || pads.iter().all(|&p| p == (0, 0)) {
            return self.pad(pads, v);
        }
        let inside = self.const_like(1.0).cast(DType::Bool)?.pad(pads, 0.0)?;
        inside.where_(&self.pad(pads, 0.0)?, self.const_shaped(v, dt, &[]))
    }

    /// Max over each window; tied maxima share the gradient equally (PyTorch gives all of it
    /// to one of them).
    pub fn max_pool2d(
        &self,
        kernel: (usize, usize),
        stride: Option<(usize, usize)>,
    ) -> Result<Tensor> {
        self.max_pool2d_with(
            kernel,
            &Pool2dOpts {
                stride,
                ..Default::default()
            },
        )
    }
    /// `max_pool2d` with padding (the smallest value of the dtype, -inf for floats), dilation
    /// and ceil mode. As tinygrad, any padding is allowed (PyTorch wants at most half the
    /// kernel): a window entirely in the padding gives -inf.
    pub fn max_pool2d_with(&self, kernel: (usize, usize), opts: &Pool2dOpts) -> Result<Tensor> {
        let PoolArgs { k, s, d, pads } = self.pool2d_args("max_pool2d", kernel, opts)?;
        self.windows2d(&k, &s, &d, &pads, self.dtype().min_value())?
            .max([-1, -2], false)
    }
    /// `max_pool2d_with`, and where each maximum is: the flat index `row · W + column` in the
    /// input's last two dims (i32; the first position of tied maxima), as `max_unpool2d` takes.
    pub fn max_pool2d_with_indices(
        &self,
        kernel: (usize, usize),
        opts: &Pool2dOpts,
    ) -> Result<(Tensor, Tensor)> {
        let PoolArgs { k, s, d, pads } = self.pool2d_args("max_pool2d", kernel, opts)?;
        let win = self.windows2d(&k, &s, &d, &pads, self.dtype().min_value())?;
        let values = win.max([-1, -2], false)?;
        let sh = self.shape();
        let (h, w) = (sh[sh.len() - 2], sh[sh.len() - 1]);
        let Some(n) = h.checked_mul(w).filter(|&n| n < i32::MAX as usize) else {
            bail!(
                Shape,
                "max_pool2d: input {sh:?} is too large for i32 indices"
            );
        };
        // Positions counted down (n .. 1) so that the largest marks the first maximum.
        let down = Tensor::iota(n, self.device())
            .neg()?
            .add(n as i64)?
            .reshape_u(&[h, w])?;
        let down = down.windows2d(&k, &s, &d, &pads, DType::I32.min_value())?;
        let at_max = win.eq(&win.max([-1, -2], true)?)?;
        let first = at_max.where_(&down, 0)?.max([-1, -2], false)?;
        Ok((values, first.neg()?.add(n as i64)?))
    }
    /// Mean over each window.
    pub fn avg_pool2d(
        &self,
        kernel: (usize, usize),
        stride: Option<(usize, usize)>,
    ) -> Result<Tensor> {
        self.avg_pool2d_with(
            kernel,
            &Pool2dOpts {
                stride,
                ..Default::default()
            },
        )
    }
    /// `avg_pool2d` with zero padding, dilation, ceil mode and `count_include_pad`. With ceil
    /// mode, the part of a last window past the input and its padding never counts (as
    /// PyTorch and tinygrad).
    pub fn avg_pool2d_with(&self, kernel: (usize, usize), opts: &Pool2dOpts) -> Result<Tensor> {
        let op = "avg_pool2d";
        let PoolArgs { k, s, d, pads } = self.pool2d_args(op, kernel, opts)?;
        let x = self.to_float(op)?;
        let reg: Vec<(usize, usize)> = pads.iter().map(|&(a, _)| (a, a)).collect();
        let ceil = pads != reg;
        if opts.count_include_pad && !ceil {
            return x.windows2d(&k, &s, &d, &pads, 0.0)?.mean([-1, -2], false);
        }
        let sum = x.windows2d(&k, &s, &d, &pads, 0.0)?.sum([-1, -2], false)?;
        // How many elements each window divides by: the input's (and with count_include_pad its
        // padding's) ones, the ceil mode extension zeros.
        let count = if opts.count_include_pad {
            let mut all = vec![(0, 0); x.ndim() - 2];
            all.extend(&reg);
            let ones = x.pad(&all, 0.0)?.const_like(1.0);
            let extra: Vec<(usize, usize)> = pads
                .iter()
                .zip(&reg)
                .map(|(&(_, b), &(_, r))| (0, b - r))
                .collect();
            ones.windows2d(&k, &s, &d, &extra, 0.0)?
        } else {
            x.const_like(1.0).windows2d(&k, &s, &d, &pads, 0.0)?
        };
        sum.div(&count.sum([-1, -2], false)?)
    }

    /// The partial inverse of `max_pool2d_with_indices`: each value goes to the flat position
    /// (`row · W + column` of the output's last two dims) its index names, zeros elsewhere.
    /// The output is `output_size`, or `(in - 1)·stride − 2·padding + dilation·(kernel − 1) + 1`
    /// per dim. An index outside the output drops its value (PyTorch errors). As tinygrad, a
    /// position named by several indices (overlapping windows sharing a maximum) gets the sum
    /// of their values, where PyTorch writes the value once; the gradient is PyTorch's (each
    /// input gets the output gradient at its index).
    pub fn max_unpool2d(
        &self,
        indices: &Tensor,
        kernel: (usize, usize),
        opts: &Pool2dOpts,
        output_size: Option<(usize, usize)>,
    ) -> Result<Tensor> {
        let op = "max_unpool2d";
        let s = self.shape();
        if s.len() < 2 || indices.shape() != s {
            bail!(
                Shape,
                "{op}: input {s:?} (at least 2 dims) and indices {:?} must have the same shape",
                indices.shape()
            );
        }
        if indices.dtype().is_float() {
            bail!(
                DType,
                "{op}: indices must be integers, got {}",
                indices.dtype()
            );
        }
        let k = [kernel.0, kernel.1];
        let st = opts.stride.unwrap_or(kernel);
        let (st, d, p) = (
            [st.0, st.1],
            [opts.dilation.0, opts.dilation.1],
            [opts.padding.0, opts.padding.1],
        );
        if k.contains(&0) || st.contains(&0) || d.contains(&0) {
            bail!(
                Shape,
                "{op}: kernel {k:?}, stride {st:?} and dilation {d:?} must be at least 1"
            );
        }
        let lead = s.len() - 2;
        let out = match output_size {
            Some((h, w)) => [h, w],
            None => {
                let mut o = [0; 2];
                for a in 0..2 {
                    let full = (s[lead + a] as i128 - 1) * st[a] as i128
                        + d[a] as i128 * (k[a] as i128 - 1)
                        + 1;
                    let v = full - 2 * p[a] as i128;
                    if v < 1 || v > i32::MAX as i128 {
                        bail!(
                            Shape,
                            "{op}: kernel {k:?}, stride {st:?} and padding {p:?} give no output \
                             size for input {s:?}"
                        );
                    }
                    o[a] = v as usize;
                }
                o
            }
        };
        let Some(n) = out[0].checked_mul(out[1]).filter(|&n| n > 0) else {
            bail!(Shape, "{op}: output size {out:?} is empty or too large");
        };
        let l = s[lead] * s[lead + 1];
        let mut flat = s[..lead].to_vec();
        flat.extend([1, l]);
        let mut at = vec![1; lead];
        at.extend([n, 1]);
        let hit = Tensor::iota(n, self.device())
            .reshape_u(&at)?
            .eq(&indices.cast(DType::I32)?.reshape_u(&flat)?)?;
        let mut shape = s[..lead].to_vec();
        shape.extend(out);
        hit.where_(&self.reshape_u(&flat)?, 0)?
            .sum(-1, false)?
            .reshape_u(&shape)
    }

    // ------------------------------------------------------------------------- resampling

    /// Resize the last `size.len()` dims to `size` (tinygrad's `interpolate`; PyTorch's
    /// `F.interpolate` with a size, on any number of leading dims). `Linear` interpolates
    /// between the two nearest inputs along each resized dim: with `align_corners` the corner
    /// elements of input and output coincide, otherwise their edges do (input positions
    /// `(i + 0.5)·in/out − 0.5`, clamped to the input). Integer inputs are interpolated in f32
    /// and cast back (truncating).
    pub fn interpolate(
        &self,
        size: &[usize],
        mode: Interpolation,
        align_corners: bool,
    ) -> Result<Tensor> {
        let op = "interpolate";
        let s = self.shape();
        if size.is_empty() || size.len() > s.len() || size.contains(&0) {
            bail!(
                Shape,
                "{op}: size {size:?} must give 1 to {} sizes of at least 1 for input {s:?}",
                s.len()
            );
        }
        if align_corners && mode != Interpolation::Linear {
            bail!(Other, "{op}: align_corners only applies to mode linear");
        }
        if s[s.len() - size.len()..].contains(&0) {
            // Nothing to resample from (PyTorch's error).
            bail!(
                Shape,
                "{op}: input {s:?} is empty along a resized axis (resizing to {size:?})"
            );
        }
        let nd = s.len();
        let dev = self.device();
        let mut x = self.clone();
        let mut expand = s.clone();
        for j in (0..size.len()).rev() {
            let i = nd - size.len() + j;
            let (n_in, n_out) = (s[i], size[j]);
            if n_in == n_out {
                // Every mode maps output i to input i.
                continue;
            }
            let mut at = vec![1; nd];
            at[i] = n_out;
            expand[i] = n_out;
            let along = |t: Tensor| -> Result<Tensor> { t.reshape_u(&at)?.broadcast_to(&expand) };
            let ar = Tensor::iota(n_out, dev);
            x = match mode {
                Interpolation::Linear => {
                    // Input position num/den, in exact integer arithmetic as tinygrad.
                    let (num, den) = if align_corners {
                        (ar.mul((n_in - 1) as i64)?, (n_out - 1).max(1))
                    } else {
                        let num = ar.mul(2i64)?.add(1i64)?.mul(n_in as i64)?;
                        (num.sub(n_out as i64)?, 2 * n_out)
                    };
                    let top = (n_in - 1) as i128 * den as i128;
                    if (2 * n_out as i128 + 1) * n_in as i128 > i32::MAX as i128 {
                        bail!(Shape, "{op}: sizes {n_in} -> {n_out} are too large");
                    }
                    let num = num.maximum(0i64)?.minimum(top as i64)?;
                    let low = num.idiv(den as i64)?;
                    let high = num.add((den - 1) as i64)?.idiv(den as i64)?;
                    let frac = num.fmod(den as i64)?.cast(DType::F32)?.div(den as f64)?;
                    let a = x.gather(i as isize, &along(low)?)?;
                    let b = x.gather(i as isize, &along(high)?)?;
                    a.add(&b.sub(&a)?.mul(&frac.reshape_u(&at)?)?)?
                }
                Interpolation::Nearest | Interpolation::NearestExact => {
                    let scale = n_in as f64 / n_out as f64;
                    let pos = ar.cast(DType::F32)?;
                    let pos = if mode == Interpolation::NearestExact {
                        pos.add(0.5)?
                    } else {
                        pos
                    };
                    let idx = pos
                        .mul(scale)?
                        .cast(DType::I32)?
                        .minimum((n_in - 1) as i64)?;
                    x.gather(i as isize, &along(idx)?)?
                }
            };
        }
        x.cast(self.dtype())
    }
}

/// The (before, after) pads of "same" padding: `dilation·(k − 1)` split, the larger half after.
fn same_pads(op: &str, k: usize, dilation: usize) -> Result<(isize, isize)> {
    let Some(t) = k.checked_sub(1).and_then(|x| x.checked_mul(dilation)) else {
        return Err(Error::new(
            ErrorKind::Shape,
            format!("{op}: kernel {k} with dilation {dilation} is out of range"),
        ));
    };
    signed((t / 2, t - t / 2))
}

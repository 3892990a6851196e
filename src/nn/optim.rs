//! Optimizers, as in tinygrad's `nn/optim.py`: `Sgd`, `Lars` and `Muon` share one LARS core
//! (trust ratio, weight decay, classic or popular momentum, optional Newton–Schulz
//! orthogonalisation); `Adam`, `AdamW` and `Lamb` share one LAMB core (bias-corrected moments,
//! weight decay, optional trust ratio); `OptimizerGroup` steps several of them as one.
//!
//! It sits on top of the tensor API: a step is an ordinary lazy graph ending in `Tensor::assign`
//! on every parameter and on every piece of optimizer state, realized together with whatever
//! else the caller realizes (loss, metrics), so the scheduler fuses each update into the kernel
//! that computes its gradient where it can. All state (learning rate, momentum buffers, moments,
//! the running powers b1^t and b2^t) lives in realized device buffers created by `new` and is
//! only ever changed by `assign` inside `schedule_step`: a step captured by a JIT and replayed
//! without running this Rust code still advances it correctly. (Chainable setters cannot fail,
//! so what they change on the device, a new learning rate or momentum buffers turned on, is
//! written or allocated at the next step: capture a step after the first one, or use `set_lr`.)

use crate::context::training;
use crate::dtype::DType;
use crate::error::{bail, Result};
use crate::tensor::Tensor;

/// Something that updates parameters from their gradients.
pub trait Optimizer {
    /// The parameters this optimizer updates (each `requires_grad`, no duplicates).
    fn params(&self) -> &[Tensor];

    /// Forget every parameter's gradient (before the next `backward()`).
    fn zero_grad(&self) {
        for p in self.params() {
            p.set_grad(None);
        }
    }

    /// Build the update lazily (assigns on the parameters and on the optimizer's state) and
    /// return every tensor that must be realized to perform it. Realize them together with the
    /// loss to run forward, backward and update as one schedule.
    ///
    /// Errors outside training mode (`Context::new().training(true)` or `TRAINING=1`) and when
    /// a parameter has no gradient.
    fn schedule_step(&mut self) -> Result<Vec<Tensor>>;

    /// Perform one optimization step now.
    fn step(&mut self) -> Result<()> {
        let ts = self.schedule_step()?;
        let refs: Vec<&Tensor> = ts.iter().collect();
        Tensor::realize_all(&refs)
    }

    /// The optimizer's device state: the learning rate tensor first, then momentum buffers or
    /// moments (for checkpointing, or for a JIT that needs to know which buffers a step touches).
    fn state(&self) -> Vec<Tensor>;

    /// The current learning rate.
    fn learning_rate(&self) -> f64;

    /// Change the learning rate now: the value is written into the learning-rate tensor at once,
    /// so a replayed (JIT-captured) step sees it too.
    fn set_lr(&mut self, lr: f64) -> Result<()>;
}

// ---------------------------------------------------------------------------------- helpers

/// `t` (a constant) placed like `like`: on its devices, split the same way when it has its
/// shape (a momentum buffer of a split parameter), else whole on each (the learning rate).
fn placed_like(t: Tensor, like: &Tensor) -> Result<Tensor> {
    let axis = like
        .shard_axis()
        .filter(|_| t.shape() == like.shape())
        .map(|a| a as isize);
    t.shard(&like.devices(), axis)
}

/// A learning rate must be a finite number >= 0 (a NaN would silently ruin every parameter).
fn check_lr(name: &str, lr: f64) -> Result<()> {
    if !(lr.is_finite() && lr >= 0.0) {
        bail!(
            Other,
            "{name}: the learning rate must be a finite number >= 0, got {lr}"
        );
    }
    Ok(())
}

/// A realized f32 buffer of `shape` filled with `v`, placed like `like`.
fn filled(like: &Tensor, shape: &[usize], v: f64) -> Result<Tensor> {
    placed_like(Tensor::full_dtype(shape, v, DType::F32)?, like)?
        .contiguous()
        .realize()
}

/// Euclidean (Frobenius) norm of all elements, as a 0-d tensor.
fn norm(t: &Tensor) -> Result<Tensor> {
    t.square()?.sum((), false)?.sqrt()
}

/// tinygrad's trust-ratio guard: `ratio(‖t‖, ‖u‖)` where both norms are positive, else 1.
/// The norms are broadcast to `shape` first, so that the scheduler computes the ratio inside
/// the update kernel instead of materializing it as a kernel of its own.
fn trust_ratio(
    r1: &Tensor,
    r2: &Tensor,
    shape: &[usize],
    ratio: impl Fn(&Tensor, &Tensor) -> Result<Tensor>,
) -> Result<Tensor> {
    let (r1, r2) = (r1.broadcast_to(shape)?, r2.broadcast_to(shape)?);
    let inner = r2.gt(0.0)?.where_(&ratio(&r1, &r2)?, 1.0)?;
    r1.gt(0.0)?.where_(&inner, 1.0)
}

/// What every optimizer holds: its parameters and the learning rate (as a device tensor).
struct Common {
    name: &'static str,
    params: Vec<Tensor>,
    lr: f64,
    /// `(1,)` f32 buffer holding the learning rate the step kernels read.
    lr_t: Tensor,
    /// The value last written into `lr_t`.
    lr_written: f64,
}

impl Common {
    fn new(name: &'static str, params: Vec<Tensor>, lr: f64) -> Result<Common> {
        let mut kept: Vec<Tensor> = vec![];
        for p in params {
            if p.requires_grad() && !kept.iter().any(|k| k.same(&p)) {
                kept.push(p);
            }
        }
        let Some(first) = kept.first() else {
            bail!(
                Other,
                "{name}: no parameters to optimize (pass tensors with set_requires_grad(true))"
            )
        };
        let devices = first.devices();
        for (i, p) in kept.iter().enumerate() {
            if p.devices() != devices {
                bail!(
                    Device,
                    "{name}: parameter {i} is on {:?} but parameter 0 is on {devices:?}; all \
                     parameters must be on the same devices",
                    p.devices()
                );
            }
            if !p.dtype().is_float() {
                bail!(
                    DType,
                    "{name}: parameter {i} has dtype {}; only float parameters can be optimized",
                    p.dtype()
                );
            }
        }
        let lr_t = filled(first, &[1], lr)?;
        Ok(Common {
            name,
            params: kept,
            lr,
            lr_t,
            lr_written: lr,
        })
    }

    /// Write `lr` into the learning-rate buffer if it changed (realized now, not in the step).
    fn sync_lr(&mut self) -> Result<()> {
        if self.lr_written.to_bits() != self.lr.to_bits() {
            let v = self.lr_t.const_like(self.lr);
            self.lr_t.assign(&v)?.realize()?;
            self.lr_written = self.lr;
        }
        Ok(())
    }

    fn set_lr(&mut self, lr: f64) -> Result<()> {
        check_lr(self.name, lr)?;
        self.lr = lr;
        self.sync_lr()
    }

    /// The learning rate as a 0-d tensor (broadcasts against any parameter shape).
    fn lr(&self) -> Result<Tensor> {
        self.lr_t.reshape(&[])
    }

    /// Check that a step may run and collect each parameter's gradient, detached and as f32.
    fn begin_step(&mut self) -> Result<Vec<Tensor>> {
        let name = self.name;
        if !training() {
            bail!(
                Other,
                "{name}.step: training mode is off; optimizers only step in training mode: enable \
                 training with `Context::new().training(true).run(|| ...)` (or TRAINING=1)"
            );
        }
        check_lr(name, self.lr)?;
        let mut grads = Vec::with_capacity(self.params.len());
        for (i, p) in self.params.iter().enumerate() {
            let Some(g) = p.grad() else {
                bail!(
                    Other,
                    "{name}.step: parameter {i} (shape {:?}) has no gradient: call backward() on \
                     the loss before stepping",
                    p.shape()
                )
            };
            if g.shape() != p.shape()
                || g.devices() != p.devices()
                || g.shard_axis() != p.shard_axis()
            {
                bail!(
                    Shape,
                    "{name}.step: gradient {:?} on {:?} does not match parameter {i} {:?} on {:?}",
                    g.shape(),
                    g.devices(),
                    p.shape(),
                    p.devices()
                );
            }
            grads.push(g.detach().cast(DType::F32)?);
        }
        self.sync_lr()?;
        Ok(grads)
    }
}

// ---------------------------------------------------------------------------------- LARS core

/// Newton–Schulz settings of Muon.
#[derive(Clone, Copy, Debug)]
struct NewtonSchulz {
    steps: usize,
    coeffs: (f64, f64, f64),
}

/// Quintic Newton–Schulz orthogonalisation of `g` viewed as `(rows, -1)`: normalised by its
/// Frobenius norm (+1e-7), transposed when taller than wide, then `X ← aX + (bA + cA²)X` with
/// `A = XXᵀ`; the result is scaled by `sqrt(max(1, rows/cols))` and has `g`'s shape.
fn newton_schulz(g: &Tensor, ns: NewtonSchulz) -> Result<Tensor> {
    let shape = g.shape();
    let rows = shape[0];
    let cols = g.numel() / rows;
    let (a, b, c) = ns.coeffs;
    let x =
        g.reshape(&[rows as isize, cols as isize])?
            .newton_schulz(ns.steps, &[a, b, c], 1e-7)?;
    let scale = (rows as f64 / cols as f64).max(1.0).sqrt();
    let dims: Vec<isize> = shape.iter().map(|&d| d as isize).collect();
    x.mul(scale)?.reshape(&dims)
}

/// LARS (Layer-wise Adaptive Rate Scaling) with optional momentum and weight decay; with a trust
/// coefficient of 0 it is SGD, and with Newton–Schulz orthogonalisation it is Muon.
///
/// Per parameter `t` with gradient `g`:
/// `r = tcoef·‖t‖ / (‖g‖ + wd·‖t‖)` (1 if either norm is 0, or if `tcoef` is 0);
/// `g ← g + wd·t`; classic momentum scales `g ← g·r·lr` before the momentum buffer
/// `b ← momentum·b + g` (then `g ← b`, or `g + momentum·b` with Nesterov), the popular form
/// scales after it; `t ← t − g`.
pub struct Lars {
    c: Common,
    momentum: f64,
    weight_decay: f64,
    nesterov: bool,
    classic: bool,
    tcoef: f64,
    ns: Option<NewtonSchulz>,
    /// Momentum buffers (f32, one per parameter), empty while momentum is 0.
    bufs: Vec<Tensor>,
}

impl Lars {
    /// LARS with tinygrad's defaults: lr 0.001, momentum 0.9, weight decay 1e-4, no Nesterov,
    /// classic momentum, trust coefficient 0.001.
    pub fn new(params: Vec<Tensor>) -> Result<Lars> {
        Lars::with_defaults("LARS", params, 0.001, 0.9, 1e-4, false, true, 0.001, None)
    }

    #[allow(clippy::too_many_arguments)]
    fn with_defaults(
        name: &'static str,
        params: Vec<Tensor>,
        lr: f64,
        momentum: f64,
        weight_decay: f64,
        nesterov: bool,
        classic: bool,
        tcoef: f64,
        ns: Option<NewtonSchulz>,
    ) -> Result<Lars> {
        let mut o = Lars {
            c: Common::new(name, params, lr)?,
            momentum,
            weight_decay,
            nesterov,
            classic,
            tcoef,
            ns,
            bufs: vec![],
        };
        o.alloc_state()?;
        Ok(o)
    }

    /// Create the momentum buffers if momentum is on and they do not exist yet (in `new`, or at
    /// the first step after a setter turned momentum on); drop them if momentum is off.
    fn alloc_state(&mut self) -> Result<()> {
        if self.momentum == 0.0 {
            self.bufs.clear();
        } else if self.bufs.is_empty() {
            self.bufs = self
                .c
                .params
                .iter()
                .map(|p| filled(p, &p.shape(), 0.0))
                .collect::<Result<_>>()?;
        }
        Ok(())
    }

    /// Learning rate (written to the device at the next step; `Optimizer::set_lr` writes now).
    pub fn lr(mut self, lr: f64) -> Self {
        self.c.lr = lr;
        self
    }
    /// Momentum factor (0 turns momentum off; buffers turned on here are allocated at the next
    /// step).
    pub fn momentum(mut self, momentum: f64) -> Self {
        self.momentum = momentum;
        self
    }
    /// L2 weight decay added to the gradient.
    pub fn weight_decay(mut self, weight_decay: f64) -> Self {
        self.weight_decay = weight_decay;
        self
    }
    /// Nesterov momentum.
    pub fn nesterov(mut self, nesterov: bool) -> Self {
        self.nesterov = nesterov;
        self
    }
    /// Classic momentum (learning rate applied before the momentum buffer) instead of the
    /// popular form (after it).
    pub fn classic(mut self, classic: bool) -> Self {
        self.classic = classic;
        self
    }
    /// Trust coefficient of the layer-wise trust ratio (0: plain SGD).
    pub fn tcoef(mut self, tcoef: f64) -> Self {
        self.tcoef = tcoef;
        self
    }

    fn schedule(&mut self) -> Result<Vec<Tensor>> {
        let grads = self.c.begin_step()?;
        self.alloc_state()?;
        let lr = self.c.lr()?;
        let wd = self.weight_decay;
        for (i, (p, g)) in self.c.params.iter().zip(grads).enumerate() {
            let t = p.detach().cast(DType::F32)?;
            let mut g = g;
            let r = if self.tcoef != 0.0 {
                let (tcoef, shape) = (self.tcoef, p.shape());
                Some(trust_ratio(&norm(&t)?, &norm(&g)?, &shape, |r1, r2| {
                    r1.mul(tcoef)?.div(&r2.add(&r1.mul(wd)?)?)
                })?)
            } else {
                None
            };
            let scale = |g: Tensor| -> Result<Tensor> {
                let g = match &r {
                    Some(r) => g.mul(r)?,
                    None => g,
                };
                g.mul(&lr)
            };
            if wd > 0.0 {
                g = g.add(&t.mul(wd)?)?;
            }
            if self.classic {
                g = scale(g)?;
            }
            if let Some(b) = self.bufs.get(i) {
                b.assign(&b.mul(self.momentum)?.add(&g)?)?;
                g = if self.nesterov {
                    g.add(&b.mul(self.momentum)?)?
                } else {
                    b.clone()
                };
            }
            if let Some(ns) = self.ns {
                if p.ndim() >= 2 {
                    g = newton_schulz(&g, ns)?;
                }
            }
            if !self.classic {
                g = scale(g)?;
            }
            p.assign(&t.sub(&g)?.cast(p.dtype())?)?;
        }
        let mut out = self.c.params.clone();
        out.extend(self.bufs.iter().cloned());
        Ok(out)
    }

    fn state_tensors(&self) -> Vec<Tensor> {
        let mut s = vec![self.c.lr_t.clone()];
        s.extend(self.bufs.iter().cloned());
        s
    }
}

/// Stochastic gradient descent with optional momentum (Nesterov or not) and L2 weight decay:
/// the LARS core with a trust coefficient of 0 (tinygrad's `SGD`).
pub struct Sgd(Lars);

impl Sgd {
    /// SGD with tinygrad's defaults: lr 0.001, no momentum, no weight decay, no Nesterov.
    pub fn new(params: Vec<Tensor>) -> Result<Sgd> {
        Ok(Sgd(Lars::with_defaults(
            "SGD", params, 0.001, 0.0, 0.0, false, false, 0.0, None,
        )?))
    }
    /// Learning rate.
    pub fn lr(self, lr: f64) -> Self {
        Sgd(self.0.lr(lr))
    }
    /// Momentum factor (0 turns momentum off).
    pub fn momentum(self, momentum: f64) -> Self {
        Sgd(self.0.momentum(momentum))
    }
    /// L2 weight decay added to the gradient.
    pub fn weight_decay(self, weight_decay: f64) -> Self {
        Sgd(self.0.weight_decay(weight_decay))
    }
    /// Nesterov momentum.
    pub fn nesterov(self, nesterov: bool) -> Self {
        Sgd(self.0.nesterov(nesterov))
    }
    /// Classic momentum (learning rate applied before the momentum buffer; default false).
    pub fn classic(self, classic: bool) -> Self {
        Sgd(self.0.classic(classic))
    }
}

/// Muon: momentum SGD (Nesterov by default) whose update for every parameter of two or more
/// dimensions is orthogonalised by 5 quintic Newton–Schulz steps (coefficients 3.4445, −4.775,
/// 2.0315) on the update viewed as `(rows, -1)` and scaled by `sqrt(max(1, rows/cols))`;
/// 1-D parameters get plain momentum SGD. The LARS core in its popular-momentum form.
pub struct Muon(Lars);

impl Muon {
    /// Muon with lr 0.02, momentum 0.95, Nesterov, no weight decay, 5 Newton–Schulz steps.
    pub fn new(params: Vec<Tensor>) -> Result<Muon> {
        let ns = NewtonSchulz {
            steps: 5,
            coeffs: (3.4445, -4.775, 2.0315),
        };
        Ok(Muon(Lars::with_defaults(
            "Muon",
            params,
            0.02,
            0.95,
            0.0,
            true,
            false,
            0.0,
            Some(ns),
        )?))
    }
    /// Learning rate.
    pub fn lr(self, lr: f64) -> Self {
        Muon(self.0.lr(lr))
    }
    /// Momentum factor.
    pub fn momentum(self, momentum: f64) -> Self {
        Muon(self.0.momentum(momentum))
    }
    /// L2 weight decay added to the gradient (before momentum, as tinygrad).
    pub fn weight_decay(self, weight_decay: f64) -> Self {
        Muon(self.0.weight_decay(weight_decay))
    }
    /// Nesterov momentum.
    pub fn nesterov(self, nesterov: bool) -> Self {
        Muon(self.0.nesterov(nesterov))
    }
    /// Number of Newton–Schulz steps.
    pub fn ns_steps(mut self, steps: usize) -> Self {
        if let Some(ns) = &mut self.0.ns {
            ns.steps = steps;
        }
        self
    }
    /// Coefficients `(a, b, c)` of the quintic Newton–Schulz step.
    pub fn ns_coefficients(mut self, a: f64, b: f64, c: f64) -> Self {
        if let Some(ns) = &mut self.0.ns {
            ns.coeffs = (a, b, c);
        }
        self
    }
}

// ---------------------------------------------------------------------------------- LAMB core

/// LAMB: Adam moments with weight decay and a layer-wise trust ratio; without the trust ratio
/// it is Adam (no weight decay) or AdamW (decoupled weight decay).
///
/// Per parameter `t` with gradient `g`, at step `k`:
/// `m ← b1·m + (1−b1)·g`, `v ← b2·v + (1−b2)·g²`,
/// `up = (m / (1−b1^k)) / (sqrt(v / (1−b2^k)) + eps) + wd·t`,
/// `r = ‖t‖ / ‖up‖` (1 if either is 0; always 1 for Adam/AdamW), `t ← t − lr·r·up`.
///
/// The state of each parameter is one f32 buffer of shape `(2, numel + 1)`: row 0 is `m`
/// followed by `b1^k`, row 1 is `v` followed by `b2^k`, so that one kernel advances all of it
/// (`state·[b1; b2] + [(1−b1)·g, 0; (1−b2)·g², 0]`) and a second one updates the parameter.
pub struct Lamb {
    c: Common,
    b1: f64,
    b2: f64,
    eps: f64,
    weight_decay: f64,
    adam: bool,
    state: Vec<Tensor>,
}

impl Lamb {
    /// LAMB with tinygrad's defaults: lr 0.001, b1 0.9, b2 0.999, eps 1e-6, no weight decay.
    pub fn new(params: Vec<Tensor>) -> Result<Lamb> {
        Lamb::with_defaults("LAMB", params, 0.001, 0.9, 0.999, 1e-6, 0.0, false)
    }

    #[allow(clippy::too_many_arguments)]
    fn with_defaults(
        name: &'static str,
        params: Vec<Tensor>,
        lr: f64,
        b1: f64,
        b2: f64,
        eps: f64,
        weight_decay: f64,
        adam: bool,
    ) -> Result<Lamb> {
        let c = Common::new(name, params, lr)?;
        let state = c
            .params
            .iter()
            .map(|p| {
                // Moments 0, powers b1^0 = b2^0 = 1.
                placed_like(
                    Tensor::zeros(&[2, p.numel()])?.pad(&[(0, 0), (0, 1)], 1.0)?,
                    p,
                )?
                .contiguous()
                .realize()
            })
            .collect::<Result<_>>()?;
        Ok(Lamb {
            c,
            b1,
            b2,
            eps,
            weight_decay,
            adam,
            state,
        })
    }

    /// Learning rate (written to the device at the next step; `Optimizer::set_lr` writes now).
    pub fn lr(mut self, lr: f64) -> Self {
        self.c.lr = lr;
        self
    }
    /// Decay rate of the first moment.
    pub fn b1(mut self, b1: f64) -> Self {
        self.b1 = b1;
        self
    }
    /// Decay rate of the second moment.
    pub fn b2(mut self, b2: f64) -> Self {
        self.b2 = b2;
        self
    }
    /// Added to the denominator for numerical stability.
    pub fn eps(mut self, eps: f64) -> Self {
        self.eps = eps;
        self
    }
    /// Weight decay, added to the update (decoupled from the moments).
    pub fn weight_decay(mut self, weight_decay: f64) -> Self {
        self.weight_decay = weight_decay;
        self
    }

    fn schedule(&mut self) -> Result<Vec<Tensor>> {
        let grads = self.c.begin_step()?;
        let lr = self.c.lr()?;
        let (b1, b2) = (self.b1, self.b2);
        for ((p, g), s) in self.c.params.iter().zip(grads).zip(&self.state) {
            let n = p.numel();
            let shape = p.shape();
            // Advance m, v and the powers in one kernel: state·[b1; b2] + g'·([1-b1; 0] +
            // [0; 1-b2]·g') with g' the gradient laid out like the state (0 in the last column).
            // Every broadcast or padded operand is a buffer or a constant, so the scheduler
            // inlines it all instead of materializing padded subexpressions.
            let wide = [2, n + 1];
            let rows = |top: f64, bottom: f64| -> Result<Tensor> {
                let (t, b) = (
                    s.const_shaped(top, DType::F32, &[1, n + 1]),
                    s.const_shaped(bottom, DType::F32, &[1, n + 1]),
                );
                Tensor::cat(&[&t, &b], 0)
            };
            let g_wide = g
                .reshape(&[1, n as isize])?
                .pad(&[(0, 0), (0, 1)], 0.0)?
                .broadcast_to(&wide)?;
            let grad_term =
                g_wide.mul(&rows(1.0 - b1, 0.0)?.add(&rows(0.0, 1.0 - b2)?.mul(&g_wide)?)?)?;
            s.assign(&s.mul(&rows(b1, b2)?)?.add(&grad_term)?)?;
            // Read the new state back as m, v, b1^k, b2^k (views of its buffer).
            let dims: Vec<isize> = shape.iter().map(|&d| d as isize).collect();
            let part = |row: usize, a: usize, b: usize| -> Result<Tensor> {
                let x = s.shrink(&[(row, row + 1), (a, b)])?;
                if b - a == n {
                    x.reshape(&dims)
                } else {
                    x.reshape(&[])?.broadcast_to(&shape)
                }
            };
            let (m, v) = (part(0, 0, n)?, part(1, 0, n)?);
            let (b1_t, b2_t) = (part(0, n, n + 1)?, part(1, n, n + 1)?);
            let m_hat = m.div(&b1_t.neg()?.add(1.0)?)?;
            let v_hat = v.div(&b2_t.neg()?.add(1.0)?)?;
            let t = p.detach().cast(DType::F32)?;
            let mut up = m_hat.div(&v_hat.sqrt()?.add(self.eps)?)?;
            if self.weight_decay != 0.0 {
                up = up.add(&t.mul(self.weight_decay)?)?;
            }
            if !self.adam {
                let r = trust_ratio(&norm(&t)?, &norm(&up)?, &shape, |r1, r2| r1.div(r2))?;
                up = up.mul(&r)?;
            }
            p.assign(&t.sub(&up.mul(&lr)?)?.cast(p.dtype())?)?;
        }
        let mut out = self.c.params.clone();
        out.extend(self.state.iter().cloned());
        Ok(out)
    }

    fn state_tensors(&self) -> Vec<Tensor> {
        let mut s = vec![self.c.lr_t.clone()];
        s.extend(self.state.iter().cloned());
        s
    }
}

/// Adam: the LAMB core without trust ratio or weight decay.
pub struct Adam(Lamb);

impl Adam {
    /// Adam with lr 0.001, b1 0.9, b2 0.999, eps 1e-8.
    pub fn new(params: Vec<Tensor>) -> Result<Adam> {
        Ok(Adam(Lamb::with_defaults(
            "Adam", params, 0.001, 0.9, 0.999, 1e-8, 0.0, true,
        )?))
    }
    /// Learning rate.
    pub fn lr(self, lr: f64) -> Self {
        Adam(self.0.lr(lr))
    }
    /// Decay rate of the first moment.
    pub fn b1(self, b1: f64) -> Self {
        Adam(self.0.b1(b1))
    }
    /// Decay rate of the second moment.
    pub fn b2(self, b2: f64) -> Self {
        Adam(self.0.b2(b2))
    }
    /// Added to the denominator for numerical stability.
    pub fn eps(self, eps: f64) -> Self {
        Adam(self.0.eps(eps))
    }
}

/// AdamW: Adam with decoupled weight decay (`t ← t − lr·(adam update + wd·t)`), the LAMB core
/// without trust ratio.
pub struct AdamW(Lamb);

impl AdamW {
    /// AdamW with lr 0.001, b1 0.9, b2 0.999, eps 1e-8, weight decay 0.01.
    pub fn new(params: Vec<Tensor>) -> Result<AdamW> {
        Ok(AdamW(Lamb::with_defaults(
            "AdamW", params, 0.001, 0.9, 0.999, 1e-8, 0.01, true,
        )?))
    }
    /// Learning rate.
    pub fn lr(self, lr: f64) -> Self {
        AdamW(self.0.lr(lr))
    }
    /// Decay rate of the first moment.
    pub fn b1(self, b1: f64) -> Self {
        AdamW(self.0.b1(b1))
    }
    /// Decay rate of the second moment.
    pub fn b2(self, b2: f64) -> Self {
        AdamW(self.0.b2(b2))
    }
    /// Added to the denominator for numerical stability.
    pub fn eps(self, eps: f64) -> Self {
        AdamW(self.0.eps(eps))
    }
    /// Decoupled weight decay.
    pub fn weight_decay(self, weight_decay: f64) -> Self {
        AdamW(self.0.weight_decay(weight_decay))
    }
}

/// Several optimizers stepped as one (tinygrad's `OptimizerGroup`): for example AdamW with
/// weight decay on the matrices and another without it on biases and norms, as nanoGPT
/// configures it. Its parameters are theirs in order; `set_lr` sets every member's learning
/// rate and `learning_rate` is the first one's; `state` is every member's state in order.
pub struct OptimizerGroup {
    members: Vec<Box<dyn Optimizer>>,
    params: Vec<Tensor>,
}

impl OptimizerGroup {
    /// Errors when there is no member or a parameter belongs to two members.
    pub fn new(members: Vec<Box<dyn Optimizer>>) -> Result<OptimizerGroup> {
        if members.is_empty() {
            bail!(Other, "OptimizerGroup: no optimizers given");
        }
        let mut params: Vec<Tensor> = vec![];
        for (i, m) in members.iter().enumerate() {
            for p in m.params() {
                if params.iter().any(|q| q.same(p)) {
                    bail!(
                        Other,
                        "OptimizerGroup: a parameter of shape {:?} of optimizer {i} belongs to an \
                         earlier optimizer too",
                        p.shape()
                    );
                }
                params.push(p.clone());
            }
        }
        Ok(OptimizerGroup { members, params })
    }
}

impl Optimizer for OptimizerGroup {
    fn params(&self) -> &[Tensor] {
        &self.params
    }
    fn schedule_step(&mut self) -> Result<Vec<Tensor>> {
        let mut out = vec![];
        for m in &mut self.members {
            out.extend(m.schedule_step()?);
        }
        Ok(out)
    }
    fn state(&self) -> Vec<Tensor> {
        self.members.iter().flat_map(|m| m.state()).collect()
    }
    fn learning_rate(&self) -> f64 {
        self.members[0].learning_rate()
    }
    fn set_lr(&mut self, lr: f64) -> Result<()> {
        for m in &mut self.members {
            m.set_lr(lr)?;
        }
        Ok(())
    }
}

// ---------------------------------------------------------------------------------- trait impls

macro_rules! impl_core {
    ($t:ty) => {
        impl Optimizer for $t {
            fn params(&self) -> &[Tensor] {
                &self.c.params
            }
            fn schedule_step(&mut self) -> Result<Vec<Tensor>> {
                self.schedule()
            }
            fn state(&self) -> Vec<Tensor> {
                self.state_tensors()
            }
            fn learning_rate(&self) -> f64 {
                self.c.lr
            }
            fn set_lr(&mut self, lr: f64) -> Result<()> {
                self.c.set_lr(lr)
            }
        }
    };
}

/// The optimizers defined as a core with other defaults delegate to it.
macro_rules! impl_delegate {
    ($t:ty) => {
        impl Optimizer for $t {
            fn params(&self) -> &[Tensor] {
                self.0.params()
            }
            fn schedule_step(&mut self) -> Result<Vec<Tensor>> {
                self.0.schedule_step()
            }
            fn state(&self) -> Vec<Tensor> {
                self.0.state()
            }
            fn learning_rate(&self) -> f64 {
                self.0.learning_rate()
            }
            fn set_lr(&mut self, lr: f64) -> Result<()> {
                self.0.set_lr(lr)
            }
        }
    };
}

impl_core!(Lars);
impl_core!(Lamb);
impl_delegate!(Sgd);
impl_delegate!(Muon);
impl_delegate!(Adam);
impl_delegate!(AdamW);

//! Optimizers, as in tinygrad's `nn/optim.py`: `Sgd`, `Lars` and `Muon` share one LARS core
//! (trust ratio, weight decay, classic or popular momentum, optional Newton–Schulz
//! orthogonalisation); `Adam`, `AdamW` and `Lamb` share one LAMB core (bias-corrected moments,
//! weight decay, optional trust ratio).
//!
//! It sits on top of the tensor API: a step is an ordinary lazy graph ending in `Tensor::assign`
//! on every parameter and on every piece of optimizer state, realized together with whatever
//! else the caller realizes (loss, metrics), so the scheduler fuses each update into the kernel
//! that computes its gradient where it can. All state (learning rate, momentum buffers, moments,
//! the bias corrections 1 - b1^t and 1 - b2^t) lives in realized device buffers created by `new` and is
//! only ever changed by `assign` inside `schedule_step`: a step captured by a JIT and replayed
//! without running this Rust code still advances it correctly. (Chainable setters cannot fail,
//! so what they change on the device, a new learning rate or momentum buffers turned on, is
//! written or allocated at the next step: capture a step after the first one, or use `set_lr`.)
//!
//! On top: learning-rate schedules (`LrSchedule`, set with `Optimizer::set_schedule`) computed
//! on the device from a step counter inside the step, `OptimizerGroup` (several optimizers
//! stepped as one, tinygrad's) and `clip_grad_norm` (global-norm gradient clipping, lazily on
//! the device like the step it joins).

use crate::context::training;
use crate::dtype::DType;
use crate::error::{bail, Result};
use crate::tensor::Tensor;

/// Something that updates parameters from their gradients.
/// One training step: zero the gradients, `backward()`, then `step()`, in training mode.
///
/// ```
/// # wgrad::context::set_default_device(Some(wgrad::Device::Interp));
/// use wgrad::nn::optim::{Optimizer, Sgd};
/// use wgrad::{Context, Tensor};
/// let w = Tensor::from_slice(&[1.0f32, 2.0], &[2])?;
/// w.set_requires_grad(true);
/// let mut opt = Sgd::new(vec![w.clone()])?.lr(0.1);
/// Context::new().training(true).run(|| {
///     opt.zero_grad();
///     w.square()?.sum((), false)?.backward()?; // d/dw sum(w^2) = 2w
///     opt.step() // w - 0.1 * 2w
/// })?;
/// let v = w.to_vec::<f32>()?;
/// assert!((v[0] - 0.8).abs() < 1e-6 && (v[1] - 1.6).abs() < 1e-6);
/// assert!(opt.step().is_err()); // outside training mode
/// # Ok::<(), wgrad::Error>(())
/// ```
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

    /// `schedule_step` for gradients of a loss multiplied by `scale` (a `(1,)` f32 device
    /// tensor): each gradient is divided by it first, and where `skip` (a `(1,)` bool device
    /// tensor) holds, nothing changes (parameters, moments, counters keep their values). What
    /// `GradScaler` steps with.
    fn schedule_scaled_step(&mut self, scale: &Tensor, skip: &Tensor) -> Result<Vec<Tensor>> {
        let _ = (scale, skip);
        bail!(
            Other,
            "schedule_scaled_step: this optimizer has no loss scaling"
        )
    }

    /// Perform one optimization step now.
    fn step(&mut self) -> Result<()> {
        let ts = self.schedule_step()?;
        let refs: Vec<&Tensor> = ts.iter().collect();
        Tensor::realize_all(&refs)
    }

    /// The optimizer's device state: the learning rate tensor first, then momentum buffers or
    /// moments, the schedule's counters, and last the f32 master copies of f16/bf16 parameters
    /// (for checkpointing, or for a JIT that needs to know which buffers a step touches).
    fn state(&self) -> Vec<Tensor>;

    /// The current learning rate.
    fn learning_rate(&self) -> f64;

    /// Change the learning rate now: the value is written into the learning-rate tensor at once,
    /// so a replayed (JIT-captured) step sees it too. With a schedule, this is its base.
    fn set_lr(&mut self, lr: f64) -> Result<()>;

    /// Follow `schedule` from the next step on, counting steps from 0, with the learning rate
    /// (`lr`, `set_lr`) as its base. The step count and the learning rate each step uses are
    /// computed on the device inside the step, so a step captured by `TinyJit` follows the
    /// schedule on replay with no host work. `LrSchedule::Constant` turns scheduling off.
    fn set_schedule(&mut self, schedule: LrSchedule) -> Result<()> {
        let _ = schedule;
        bail!(
            Other,
            "set_schedule: this optimizer has no learning-rate schedules"
        )
    }

    /// The learning rate of the last step as a 0-d f32 device tensor (before the first step of a
    /// schedule: the first step's; without one: the learning rate), to log a schedule without
    /// reading it back every step.
    fn current_lr(&self) -> Result<Tensor> {
        bail!(
            Other,
            "current_lr: this optimizer has no learning-rate tensor"
        )
    }
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

/// A realized `(1,)` f32 tensor holding `v`, placed like `like`: copied in, not computed (a
/// constant in a kernel's source makes a new kernel, a compiler run, for every value).
fn value_in(like: &Tensor, v: f64) -> Result<Tensor> {
    let t = crate::context::Context::new()
        .dev(like.device())
        .run(|| Tensor::from_slice(&[v as f32], &[1]))?;
    placed_like(t, like)?.contiguous().realize()
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

/// A learning-rate schedule and its device state.
struct Sched {
    schedule: LrSchedule,
    /// Steps taken, `(1,)` f32 (whole numbers are exact in f32 up to 2^24 steps).
    count: Tensor,
    /// The learning rate of the last step (before the first: of the first), `(1,)` f32.
    used: Tensor,
}

/// What every optimizer holds: its parameters and the learning rate (as a device tensor).
struct Common {
    name: &'static str,
    params: Vec<Tensor>,
    /// An f32 master copy of each f16/bf16 parameter (mixed precision, `HALF=1`): updates are
    /// computed and accumulated in it and rounded into the parameter, so steps smaller than
    /// the parameter's precision are not lost.
    masters: Vec<Option<Tensor>>,
    /// During a scaled step (`Optimizer::schedule_scaled_step`): the loss scale and the flag
    /// that skips the step.
    scaled: Option<(Tensor, Tensor)>,
    lr: f64,
    /// `(1,)` f32 buffer holding the learning rate the step kernels read.
    lr_t: Tensor,
    /// The value last written into `lr_t`.
    lr_written: f64,
    /// The schedule and its device state: `(1,)` f32 buffers holding the steps taken and the
    /// learning rate of the last step. (Two buffers, not one `(2,)` advanced by one kernel:
    /// such a kernel would read element 0 while writing it, which the scheduler does not see
    /// as a hazard when the read is a 0-d load broadcast by a view.)
    sched: Option<Sched>,
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
        let lr_t = value_in(first, lr)?;
        let masters = kept
            .iter()
            .map(|p| match p.dtype() {
                DType::F16 | DType::BF16 => {
                    Some(p.detach().cast(DType::F32)?.contiguous().realize()).transpose()
                }
                _ => Ok(None),
            })
            .collect::<Result<_>>()?;
        Ok(Common {
            name,
            params: kept,
            masters,
            scaled: None,
            lr,
            lr_t,
            lr_written: lr,
            sched: None,
        })
    }

    /// Write `lr` into the learning-rate buffer if it changed (realized now, not in the step).
    fn sync_lr(&mut self) -> Result<()> {
        if self.lr_written.to_bits() != self.lr.to_bits() {
            let v = value_in(&self.lr_t, self.lr)?;
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

    /// The learning rate this step uses: the schedule's at the step count `t` (the counter then
    /// advances by one, and the rate is kept as the last step's), else the learning rate.
    fn step_lr(&mut self) -> Result<Tensor> {
        let Some(s) = &self.sched else {
            return self.lr();
        };
        // The rate reads the count before the count's own update (the scheduler orders an
        // assign after every kernel reading the previous value).
        let t = s.count.reshape(&[])?;
        let used = s.schedule.lr_tensor(&self.lr()?, &t)?.reshape(&[1])?;
        s.used.assign(&self.gated(&s.used, used)?)?;
        s.count.assign(&self.gated(&s.count, s.count.add(1.0)?)?)?;
        s.used.reshape(&[])
    }

    fn set_schedule(&mut self, schedule: LrSchedule) -> Result<()> {
        schedule.check(self.name)?;
        check_lr(self.name, self.lr)?;
        self.sync_lr()?;
        self.sched = match schedule {
            LrSchedule::Constant => None,
            _ => {
                let first = &self.params[0];
                Some(Sched {
                    schedule,
                    count: filled(first, &[1], 0.0)?,
                    used: filled(first, &[1], schedule.lr_at(self.lr, 0))?,
                })
            }
        };
        Ok(())
    }

    fn current_lr(&self) -> Result<Tensor> {
        match &self.sched {
            Some(s) => s.used.reshape(&[]),
            None => self.lr(),
        }
    }

    /// The f32 value the update of parameter `i` starts from: its master copy where it has one,
    /// unless the parameter was changed outside the optimizer since (loaded, assigned: it no
    /// longer equals the master copy rounded), else the parameter.
    fn weight(&self, i: usize) -> Result<Tensor> {
        let p = self.params[i].detach();
        match &self.masters[i] {
            None => p.cast(DType::F32),
            Some(m) => m.cast(p.dtype())?.eq(&p)?.where_(m, &p.cast(DType::F32)?),
        }
    }

    /// Write parameter `i`'s updated f32 value: into its master copy, then that rounded into
    /// the parameter (a cast of the written copy: the update is computed once).
    fn write(&self, i: usize, t: &Tensor) -> Result<()> {
        let p = &self.params[i];
        let t = match &self.masters[i] {
            Some(m) => m.assign(&self.gated(m, t.clone())?)?,
            None => t.clone(),
        };
        p.assign(&self.gated(p, t.cast(p.dtype())?)?)?;
        Ok(())
    }

    /// `new`, or `old` where a scaled step is skipped.
    fn gated(&self, old: &Tensor, new: Tensor) -> Result<Tensor> {
        match &self.scaled {
            Some((_, skip)) => skip
                .reshape(&[])?
                .broadcast_to(&old.shape())?
                .where_(old, &new),
            None => Ok(new),
        }
    }

    /// The master copies (none without f16/bf16 parameters).
    fn master_state(&self) -> Vec<Tensor> {
        self.masters.iter().flatten().cloned().collect()
    }

    /// The schedule's state tensors (none without one).
    fn sched_state(&self) -> Vec<Tensor> {
        self.sched
            .iter()
            .flat_map(|s| [s.count.clone(), s.used.clone()])
            .collect()
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
            let g = g.detach().cast(DType::F32)?;
            grads.push(match &self.scaled {
                Some((scale, _)) => g.div(&scale.reshape(&[])?)?,
                None => g,
            });
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
        let lr = self.c.step_lr()?;
        let wd = self.weight_decay;
        for (i, (p, g)) in self.c.params.iter().zip(grads).enumerate() {
            let t = self.c.weight(i)?;
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
                b.assign(&self.c.gated(b, b.mul(self.momentum)?.add(&g)?)?)?;
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
            self.c.write(i, &t.sub(&g)?)?;
        }
        let mut out = self.c.params.clone();
        out.extend(self.bufs.iter().cloned());
        out.extend(self.c.sched_state());
        out.extend(self.c.master_state());
        Ok(out)
    }

    fn state_tensors(&self) -> Vec<Tensor> {
        let mut s = vec![self.c.lr_t.clone()];
        s.extend(self.bufs.iter().cloned());
        s.extend(self.c.sched_state());
        s.extend(self.c.master_state());
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
/// followed by `1−b1^k`, row 1 is `v` followed by `1−b2^k`, so that one kernel advances all of
/// it (`state·[b1; b2] + [(1−b1)·g, 1−b1; (1−b2)·g², 1−b2]`) and a second one updates the
/// parameter. The corrections are the moments of a constant gradient of 1, computed with the
/// same float32 operations as the moments: `1−b^k` is never formed by a subtraction that
/// cancels (`1 − f32(0.999)` is 1.3e-5 off), and with a constant gradient `m / (1−b1^k)` is
/// exactly it.
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
                // Moments 0, corrections 1 - b^0 = 0.
                placed_like(Tensor::full_dtype(&[2, p.numel() + 1], 0.0, DType::F32)?, p)?
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
        let lr = self.c.step_lr()?;
        let (b1, b2) = (self.b1, self.b2);
        for (i, ((p, g), s)) in self.c.params.iter().zip(grads).zip(&self.state).enumerate() {
            let n = p.numel();
            let shape = p.shape();
            // Advance m, v and the corrections in one kernel: state·[b1; b2] + g'·([1-b1; 0] +
            // [0; 1-b2]·g') with g' the gradient laid out like the state (1 in the last column:
            // the corrections are moments of a gradient of 1).
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
                .pad(&[(0, 0), (0, 1)], 1.0)?
                .broadcast_to(&wide)?;
            let grad_term =
                g_wide.mul(&rows(1.0 - b1, 0.0)?.add(&rows(0.0, 1.0 - b2)?.mul(&g_wide)?)?)?;
            s.assign(&self.c.gated(s, s.mul(&rows(b1, b2)?)?.add(&grad_term)?)?)?;
            // Read the new state back as m, v, 1-b1^k, 1-b2^k (views of its buffer).
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
            let (c1, c2) = (part(0, n, n + 1)?, part(1, n, n + 1)?);
            let m_hat = m.div(&c1)?;
            let v_hat = v.div(&c2)?;
            let t = self.c.weight(i)?;
            let mut up = m_hat.div(&v_hat.sqrt()?.add(self.eps)?)?;
            if self.weight_decay != 0.0 {
                up = up.add(&t.mul(self.weight_decay)?)?;
            }
            if !self.adam {
                let r = trust_ratio(&norm(&t)?, &norm(&up)?, &shape, |r1, r2| r1.div(r2))?;
                up = up.mul(&r)?;
            }
            self.c.write(i, &t.sub(&up.mul(&lr)?)?)?;
        }
        let mut out = self.c.params.clone();
        out.extend(self.state.iter().cloned());
        out.extend(self.c.sched_state());
        out.extend(self.c.master_state());
        Ok(out)
    }

    fn state_tensors(&self) -> Vec<Tensor> {
        let mut s = vec![self.c.lr_t.clone()];
        s.extend(self.state.iter().cloned());
        s.extend(self.c.sched_state());
        s.extend(self.c.master_state());
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
            fn schedule_scaled_step(
                &mut self,
                scale: &Tensor,
                skip: &Tensor,
            ) -> Result<Vec<Tensor>> {
                self.c.scaled = Some((scale.clone(), skip.clone()));
                let out = self.schedule();
                self.c.scaled = None;
                out
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
            fn set_schedule(&mut self, schedule: LrSchedule) -> Result<()> {
                self.c.set_schedule(schedule)
            }
            fn current_lr(&self) -> Result<Tensor> {
                self.c.current_lr()
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
            fn schedule_scaled_step(
                &mut self,
                scale: &Tensor,
                skip: &Tensor,
            ) -> Result<Vec<Tensor>> {
                self.0.schedule_scaled_step(scale, skip)
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
            fn set_schedule(&mut self, schedule: LrSchedule) -> Result<()> {
                self.0.set_schedule(schedule)
            }
            fn current_lr(&self) -> Result<Tensor> {
                self.0.current_lr()
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

// ---------------------------------------------------------------------------------- loss scaling

/// Dynamic loss scaling for mixed precision (PyTorch's `GradScaler`), on the device: the loss
/// is multiplied by a scale before `backward()` so that small f16 gradients do not flush to 0;
/// `step` divides the gradients by it, and where any of them is inf or NaN it skips the update
/// (parameters and optimizer state unchanged) and multiplies the scale by `backoff` (0.5);
/// after `growth_interval` (2000) steps without one it multiplies the scale by `growth` (2).
/// The scale, the step count and the decision live in device buffers, so a step captured by
/// `TinyJit` scales, skips and grows on replay with no host work.
///
/// ```
/// # wgrad::context::set_default_device(Some(wgrad::Device::Interp));
/// use wgrad::nn::optim::{Adam, GradScaler, Optimizer};
/// use wgrad::{Context, Tensor};
/// let w = Tensor::from_slice(&[1.0f32, 2.0], &[2])?;
/// w.set_requires_grad(true);
/// let mut opt = Adam::new(vec![w.clone()])?;
/// let mut scaler = GradScaler::new(&w)?;
/// Context::new().training(true).run(|| {
///     opt.zero_grad();
///     let loss = w.square()?.sum((), false)?;
///     scaler.scale(&loss)?.backward()?; // gradients of 65536 * loss
///     scaler.step(&mut opt) // unscaled, checked, applied
/// })?;
/// assert_eq!(scaler.current_scale()?, 65536.0);
/// # Ok::<(), wgrad::Error>(())
/// ```
pub struct GradScaler {
    /// `(1,)` f32: the scale.
    scale: Tensor,
    /// `(1,)` f32: steps since the scale last changed.
    good: Tensor,
    growth: f64,
    backoff: f64,
    interval: usize,
}

impl GradScaler {
    /// A scaler starting at 2^16, placed like `like` (a parameter of the model).
    pub fn new(like: &Tensor) -> Result<GradScaler> {
        Ok(GradScaler {
            scale: filled(like, &[1], 65536.0)?,
            good: filled(like, &[1], 0.0)?,
            growth: 2.0,
            backoff: 0.5,
            interval: 2000,
        })
    }
    /// The starting scale (written now).
    pub fn init_scale(self, s: f64) -> Result<GradScaler> {
        if !(s.is_finite() && s > 0.0) {
            bail!(
                Other,
                "GradScaler: the scale must be a finite number > 0, got {s}"
            );
        }
        let v = value_in(&self.scale, s)?;
        self.scale.assign(&v)?.realize()?;
        Ok(self)
    }
    /// The factor the scale grows by after `growth_interval` good steps (> 1).
    pub fn growth_factor(mut self, f: f64) -> Result<GradScaler> {
        if !(f.is_finite() && f > 1.0) {
            bail!(
                Other,
                "GradScaler: the growth factor must be a finite number > 1, got {f}"
            );
        }
        self.growth = f;
        Ok(self)
    }
    /// The factor the scale shrinks by after a step with inf or NaN gradients (in (0, 1)).
    pub fn backoff_factor(mut self, f: f64) -> Result<GradScaler> {
        if !(f > 0.0 && f < 1.0) {
            bail!(
                Other,
                "GradScaler: the backoff factor must be in (0, 1), got {f}"
            );
        }
        self.backoff = f;
        Ok(self)
    }
    /// Good steps before the scale grows (at least 1).
    pub fn growth_interval(mut self, n: usize) -> Result<GradScaler> {
        if n == 0 {
            bail!(Other, "GradScaler: the growth interval must be at least 1");
        }
        self.interval = n;
        Ok(self)
    }
    /// `loss` times the scale (call `backward()` on this).
    pub fn scale(&self, loss: &Tensor) -> Result<Tensor> {
        loss.mul(&self.scale.reshape(&[])?)
    }
    /// The scale now (read back from the device).
    #[cfg(not(target_arch = "wasm32"))]
    pub fn current_scale(&self) -> Result<f64> {
        Ok(self.scale.to_vec::<f32>()?[0] as f64)
    }
    /// The scale and the good-step count (for checkpointing, or a JIT that needs to know which
    /// buffers a step touches).
    pub fn state(&self) -> Vec<Tensor> {
        vec![self.scale.clone(), self.good.clone()]
    }
    /// Build `opt`'s step on the unscaled gradients, skipped if any is inf or NaN, and the
    /// scale's update; return every tensor to realize (with the loss).
    pub fn schedule_step(&mut self, opt: &mut dyn Optimizer) -> Result<Vec<Tensor>> {
        // inf * 0 and NaN * 0 are NaN, the only values unequal to 0.
        let mut bad: Option<Tensor> = None;
        for p in opt.params() {
            let Some(g) = p.grad() else {
                bail!(
                    Other,
                    "GradScaler.step: a parameter (shape {:?}) has no gradient: call backward()                      on the scaled loss first",
                    p.shape()
                )
            };
            let b = g.detach().mul(0.0)?.ne(0.0)?.any((), false)?;
            bad = Some(match bad {
                Some(a) => a.logical_or(&b)?,
                None => b,
            });
        }
        let Some(bad) = bad else {
            bail!(Other, "GradScaler.step: the optimizer has no parameters")
        };
        let skip = bad.reshape(&[1])?;
        let mut out = opt.schedule_scaled_step(&self.scale, &skip)?;
        let next = self.good.add(1.0)?;
        let grow = next.ge(self.interval as f64)?;
        let scale = skip.where_(
            &self.scale.mul(self.backoff)?,
            &grow.where_(&self.scale.mul(self.growth)?, &self.scale)?,
        )?;
        let good = skip.logical_or(&grow)?.where_(0.0, &next)?;
        self.scale.assign(&scale)?;
        self.good.assign(&good)?;
        out.extend(self.state());
        Ok(out)
    }
    /// One scaled step now: `schedule_step`, realized.
    pub fn step(&mut self, opt: &mut dyn Optimizer) -> Result<()> {
        let ts = self.schedule_step(opt)?;
        let refs: Vec<&Tensor> = ts.iter().collect();
        Tensor::realize_all(&refs)
    }
}

// ---------------------------------------------------------------------------------- schedules

/// A learning-rate schedule: the rate of step `k` (0 for the first step) from the optimizer's
/// learning rate `lr`, as PyTorch's schedulers give it when `scheduler.step()` follows each
/// `optimizer.step()`. Set it with `Optimizer::set_schedule`; it runs on the device.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum LrSchedule {
    /// `lr` at every step.
    Constant,
    /// `lr · (start + (end − start) · min(k, total_steps) / total_steps)` (PyTorch's
    /// `LinearLR`; a linear warmup has `end_factor` 1).
    Linear {
        /// The factor at step 0.
        start_factor: f64,
        /// The factor from `total_steps` on.
        end_factor: f64,
        /// Steps of the ramp.
        total_steps: usize,
    },
    /// `lr · gamma^⌊k / step_size⌋` (PyTorch's `StepLR`).
    Step {
        /// Steps between decays.
        step_size: usize,
        /// The factor of each decay.
        gamma: f64,
    },
    /// `lr · gamma^k` (PyTorch's `ExponentialLR`).
    Exponential {
        /// The factor per step.
        gamma: f64,
    },
    /// A linear warmup from `lr · start_factor` over `warmup_steps` steps, then a cosine decay
    /// from `lr` to `min_lr` at `total_steps`, held after: PyTorch's `CosineAnnealingLR(T_max =
    /// total_steps − warmup_steps, eta_min = min_lr)` after a `LinearLR(start_factor,
    /// total_iters = warmup_steps)` in a `SequentialLR`. (PyTorch's cosine goes back up after
    /// `T_max`; this one stays at `min_lr`.)
    Cosine {
        /// Steps of the linear warmup.
        warmup_steps: usize,
        /// The factor of `lr` at step 0.
        start_factor: f64,
        /// The step at which the rate reaches `min_lr`.
        total_steps: usize,
        /// The rate at and after `total_steps`.
        min_lr: f64,
    },
    /// One cycle (PyTorch's `OneCycleLR`, two phases, cosine annealing, no momentum cycling):
    /// from `lr / div_factor` up to `lr` (the peak) at step `pct_start · total_steps − 1`, then
    /// down to `lr / (div_factor · final_div_factor)` at step `total_steps − 1`, held after.
    OneCycle {
        /// Steps of the whole cycle.
        total_steps: usize,
        /// The fraction of them spent rising.
        pct_start: f64,
        /// The starting rate is `lr / div_factor`.
        div_factor: f64,
        /// The final rate is `lr / (div_factor · final_div_factor)`.
        final_div_factor: f64,
    },
}

/// `g^x` for a constant `g >= 0` and a tensor `x >= 0`.
fn pow_of(g: f64, x: &Tensor) -> Result<Tensor> {
    if g == 0.0 {
        return x.eq(0.0)?.where_(1.0, 0.0);
    }
    x.mul(g.ln())?.exp()
}

/// PyTorch's cosine annealing from `a` to `b` at fraction `pct`.
fn cos_anneal(a: &Tensor, b: &Tensor, pct: &Tensor) -> Result<Tensor> {
    let c = pct.mul(std::f64::consts::PI)?.cos()?.add(1.0)?.mul(0.5)?;
    b.add(&a.sub(b)?.mul(&c)?)
}

impl LrSchedule {
    /// Check the schedule's numbers (`op` names the optimizer in the error).
    pub fn check(&self, op: &str) -> Result<()> {
        let ok = |v: f64| v.is_finite() && v >= 0.0;
        let bad = match *self {
            LrSchedule::Constant => None,
            LrSchedule::Linear {
                start_factor,
                end_factor,
                total_steps,
            } => (!(ok(start_factor) && ok(end_factor)) || total_steps == 0)
                .then_some("the factors must be finite numbers >= 0 and total_steps at least 1"),
            LrSchedule::Step { step_size, gamma } => (!ok(gamma) || step_size == 0)
                .then_some("gamma must be a finite number >= 0 and step_size at least 1"),
            LrSchedule::Exponential { gamma } => {
                (!ok(gamma)).then_some("gamma must be a finite number >= 0")
            }
            LrSchedule::Cosine {
                warmup_steps,
                start_factor,
                total_steps,
                min_lr,
            } => (!(ok(start_factor) && ok(min_lr)) || total_steps <= warmup_steps).then_some(
                "start_factor and min_lr must be finite numbers >= 0, and total_steps more than \
                 warmup_steps",
            ),
            LrSchedule::OneCycle {
                total_steps,
                pct_start,
                div_factor,
                final_div_factor,
            } => {
                let peak = pct_start * total_steps as f64 - 1.0;
                let good = pct_start.is_finite()
                    && peak > 0.0
                    && peak < total_steps as f64 - 1.0
                    && div_factor.is_finite()
                    && div_factor > 0.0
                    && final_div_factor.is_finite()
                    && final_div_factor > 0.0;
                (!good).then_some(
                    "the peak step pct_start · total_steps − 1 must lie strictly between 0 and \
                     total_steps − 1, and the div factors must be finite numbers > 0",
                )
            }
        };
        match bad {
            Some(why) => bail!(Other, "{op}: schedule {self:?}: {why}"),
            None => Ok(()),
        }
    }

    /// The learning rate of step `k` from the base rate `lr`, in f64 on the host (the device
    /// computes the same in f32).
    pub fn lr_at(&self, lr: f64, k: usize) -> f64 {
        let k = k as f64;
        let anneal = |a: f64, b: f64, pct: f64| {
            b + (a - b) * ((std::f64::consts::PI * pct).cos() + 1.0) / 2.0
        };
        match *self {
            LrSchedule::Constant => lr,
            LrSchedule::Linear {
                start_factor: s,
                end_factor: e,
                total_steps: n,
            } => lr * (s + (e - s) * k.min(n as f64) / n as f64),
            LrSchedule::Step { step_size, gamma } => {
                lr * gamma.powi((k as usize / step_size) as i32)
            }
            LrSchedule::Exponential { gamma } => lr * gamma.powf(k),
            LrSchedule::Cosine {
                warmup_steps: w,
                start_factor: s,
                total_steps: n,
                min_lr: m,
            } => {
                let w = w as f64;
                if k < w {
                    lr * (s + (1.0 - s) * k / w)
                } else {
                    anneal(lr, m, (k - w).min(n as f64 - w) / (n as f64 - w))
                }
            }
            LrSchedule::OneCycle {
                total_steps: n,
                pct_start,
                div_factor,
                final_div_factor,
            } => {
                let (start, low) = (lr / div_factor, lr / div_factor / final_div_factor);
                let (peak, end) = (pct_start * n as f64 - 1.0, n as f64 - 1.0);
                if k <= peak {
                    anneal(start, lr, k / peak)
                } else {
                    anneal(lr, low, ((k - peak) / (end - peak)).min(1.0))
                }
            }
        }
    }

    /// `lr_at` on the device: the learning rate for the base rate `lr` and the step count `t`
    /// (0-d f32 tensors).
    fn lr_tensor(&self, lr: &Tensor, t: &Tensor) -> Result<Tensor> {
        match *self {
            LrSchedule::Constant => Ok(lr.clone()),
            LrSchedule::Linear {
                start_factor: s,
                end_factor: e,
                total_steps: n,
            } => {
                let n = n as f64;
                lr.mul(&t.minimum(n)?.mul((e - s) / n)?.add(s)?)
            }
            LrSchedule::Step { step_size, gamma } => {
                // ⌊(t + ½) / s⌋ is ⌊t / s⌋ for whole t, whatever the division rounds to.
                let q = t.add(0.5)?.div(step_size as f64)?.floor()?;
                lr.mul(&pow_of(gamma, &q)?)
            }
            LrSchedule::Exponential { gamma } => lr.mul(&pow_of(gamma, t)?),
            LrSchedule::Cosine {
                warmup_steps: w,
                start_factor: s,
                total_steps: n,
                min_lr: m,
            } => {
                let (w, n) = (w as f64, n as f64);
                let pct = t.sub(w)?.maximum(0.0)?.minimum(n - w)?.div(n - w)?;
                let decay = cos_anneal(lr, &lr.const_like(m), &pct)?;
                if w == 0.0 {
                    return Ok(decay);
                }
                let warm = lr.mul(&t.mul((1.0 - s) / w)?.add(s)?)?;
                t.lt(w)?.where_(&warm, &decay)
            }
            LrSchedule::OneCycle {
                total_steps: n,
                pct_start,
                div_factor,
                final_div_factor,
            } => {
                let start = lr.div(div_factor)?;
                let low = start.div(final_div_factor)?;
                let (peak, end) = (pct_start * n as f64 - 1.0, n as f64 - 1.0);
                let up = cos_anneal(&start, lr, &t.div(peak)?)?;
                let pct = t.sub(peak)?.div(end - peak)?.minimum(1.0)?;
                let down = cos_anneal(lr, &low, &pct)?;
                t.le(peak)?.where_(&up, &down)
            }
        }
    }
}

// ---------------------------------------------------------------------------------- groups

/// Several optimizers stepped as one (tinygrad's `OptimizerGroup`), e.g. Muon for the matrices
/// and AdamW for the rest: `schedule_step` gathers every member's update, so one realize (or
/// one captured step) runs them all. A parameter may belong to one member only.
///
/// `learning_rate` is the first member's; `set_lr` and `set_schedule` apply to every member
/// (a schedule scales each member's own learning rate); `current_lr` is the first member's.
pub struct OptimizerGroup {
    members: Vec<Box<dyn Optimizer>>,
    params: Vec<Tensor>,
}

impl OptimizerGroup {
    /// A group of `members`; errors when it is empty or a parameter belongs to two members.
    pub fn new(members: Vec<Box<dyn Optimizer>>) -> Result<OptimizerGroup> {
        if members.is_empty() {
            bail!(Other, "OptimizerGroup: no optimizers");
        }
        let mut params: Vec<Tensor> = vec![];
        for (j, m) in members.iter().enumerate() {
            for (i, p) in m.params().iter().enumerate() {
                if params.iter().any(|q| q.same(p)) {
                    bail!(
                        Other,
                        "OptimizerGroup: parameter {i} (shape {:?}) of optimizer {j} is also in \
                         an earlier optimizer; a parameter is updated by one optimizer only",
                        p.shape()
                    );
                }
                params.push(p.clone());
            }
        }
        Ok(OptimizerGroup { members, params })
    }
    /// Member `i`.
    pub fn get(&self, i: usize) -> Option<&dyn Optimizer> {
        self.members.get(i).map(|m| m.as_ref())
    }
    /// Member `i`, to change its settings.
    pub fn get_mut(&mut self, i: usize) -> Option<&mut (dyn Optimizer + 'static)> {
        self.members.get_mut(i).map(|m| m.as_mut())
    }
    /// The number of members.
    pub fn len(&self) -> usize {
        self.members.len()
    }
    /// Whether there are no members (never, once built).
    pub fn is_empty(&self) -> bool {
        self.members.is_empty()
    }
}

impl Optimizer for OptimizerGroup {
    fn params(&self) -> &[Tensor] {
        &self.params
    }
    fn schedule_step(&mut self) -> Result<Vec<Tensor>> {
        // What a member's step refuses is checked for all of them first, so that no member has
        // built its (lazy, in-place) update when another one fails.
        if !training() {
            bail!(
                Other,
                "OptimizerGroup.step: training mode is off; optimizers only step in training \
                 mode: enable training with `Context::new().training(true).run(|| ...)` (or \
                 TRAINING=1)"
            );
        }
        for (i, p) in self.params.iter().enumerate() {
            if p.grad().is_none_or(|g| g.shape() != p.shape()) {
                bail!(
                    Other,
                    "OptimizerGroup.step: parameter {i} (shape {:?}) has no gradient of its \
                     shape: call backward() on the loss before stepping",
                    p.shape()
                );
            }
        }
        for m in &self.members {
            check_lr("OptimizerGroup", m.learning_rate())?;
        }
        let mut out = vec![];
        for m in &mut self.members {
            out.extend(m.schedule_step()?);
        }
        Ok(out)
    }
    fn schedule_scaled_step(&mut self, scale: &Tensor, skip: &Tensor) -> Result<Vec<Tensor>> {
        let mut out = vec![];
        for m in &mut self.members {
            out.extend(m.schedule_scaled_step(scale, skip)?);
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
        check_lr("OptimizerGroup", lr)?;
        self.members.iter_mut().try_for_each(|m| m.set_lr(lr))
    }
    fn set_schedule(&mut self, schedule: LrSchedule) -> Result<()> {
        schedule.check("OptimizerGroup")?;
        self.members
            .iter_mut()
            .try_for_each(|m| m.set_schedule(schedule))
    }
    fn current_lr(&self) -> Result<Tensor> {
        self.members[0].current_lr()
    }
}

// ---------------------------------------------------------------------------------- clipping

/// Scale the gradients of `params` so that their global `norm_type`-norm (2: Euclidean; also
/// any p > 0, and `f64::INFINITY`: the largest magnitude) is at most `max_norm`, as PyTorch's
/// `clip_grad_norm_`: every gradient is multiplied by `min(1, max_norm / (norm + 1e-6))`.
/// Returns the norm before clipping, a 0-d f32 tensor. Lazy, like the gradients: it joins the
/// step that realizes them, so a captured step clips on the device with no host work.
/// Parameters without a gradient are skipped; without any, the norm is 0.
pub fn clip_grad_norm(params: &[Tensor], max_norm: f64, norm_type: f64) -> Result<Tensor> {
    let op = "clip_grad_norm";
    if !(max_norm.is_finite() && max_norm >= 0.0) {
        bail!(
            Other,
            "{op}: max_norm must be a finite number >= 0, got {max_norm}"
        );
    }
    if norm_type.is_nan() || norm_type <= 0.0 {
        bail!(
            Other,
            "{op}: norm_type must be > 0 (or infinity), got {norm_type}"
        );
    }
    let with_grad: Vec<(&Tensor, Tensor)> = params
        .iter()
        .filter_map(|p| p.grad().map(|g| (p, g)))
        .collect();
    let mut total: Option<Tensor> = None;
    for (_, g) in &with_grad {
        let a = g.detach().cast(DType::F32)?.abs()?;
        let part = if norm_type.is_infinite() {
            a.max((), false)?
        } else if norm_type == 2.0 {
            a.square()?.sum((), false)?
        } else {
            a.pow(norm_type)?.sum((), false)?
        };
        total = Some(match total {
            None => part,
            Some(t) if norm_type.is_infinite() => t.maximum(&part)?,
            Some(t) => t.add(&part)?,
        });
    }
    let Some(total) = total else {
        return Tensor::full_dtype(&[], 0.0, DType::F32);
    };
    let norm = if norm_type.is_infinite() {
        total
    } else if norm_type == 2.0 {
        total.sqrt()?
    } else {
        total.pow(1.0 / norm_type)?
    };
    let coef = norm.add(1e-6)?.reciprocal()?.mul(max_norm)?.minimum(1.0)?;
    for (p, g) in with_grad {
        p.set_grad(Some(g.mul(&coef.cast(g.dtype())?)?));
    }
    Ok(norm)
}

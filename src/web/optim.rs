//! Optimizers for JavaScript: `SGD`, `LARS`, `Muon`, `Adam`, `AdamW` and `LAMB` make an `Optim`
//! over an array of parameters (`getParameters(model)` in js/wgrad.js makes one), with their
//! hyper-parameters from an options object; `OptimizerGroup` steps several as one (its members
//! stay usable: they are shared, found through a registry of live optimizers like the tensors'),
//! `setSchedule` gives one a learning-rate schedule, `clipGradNorm` clips gradients.

use super::args::{arg, describe, get, is_array, FromJs, Opts};
use super::{fail, register, tensor_array, JsResult, JsTensor, OrFail};
use crate::nn::optim::{
    clip_grad_norm, Adam, AdamW, GradScaler, Lamb, Lars, LrSchedule, Muon, Optimizer,
    OptimizerGroup, Sgd,
};
use crate::Tensor;
use js_sys::Array;
use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::{Rc, Weak};
use wasm_bindgen::prelude::*;

type SharedOpt = Rc<RefCell<Box<dyn Optimizer>>>;

/// Every live `Optim` by id (and the last id given), so that `OptimizerGroup` can find the
/// optimizers it is given.
type Live = (u32, HashMap<u32, Weak<RefCell<Box<dyn Optimizer>>>>);

thread_local! {
    static LIVE: RefCell<Live> = RefCell::new((0, HashMap::new()));
}

/// An optimizer; `opts` is `{ lr, momentum, weightDecay, nesterov, b1, b2, eps, schedule }` as
/// it applies.
#[wasm_bindgen]
pub struct Optim {
    inner: SharedOpt,
    id: u32,
    name: &'static str,
}

impl Optim {
    fn wrap(inner: Box<dyn Optimizer>, name: &'static str) -> Optim {
        let inner = Rc::new(RefCell::new(inner));
        let id = LIVE.with(|l| {
            let mut l = l.borrow_mut();
            l.0 = l.0.wrapping_add(1).max(1);
            let id = l.0;
            l.1.insert(id, Rc::downgrade(&inner));
            id
        });
        Optim { inner, id, name }
    }
    /// The optimizer, mutably (an error, not a panic, if a step of it is already running).
    fn with<T>(&self, op: &str, f: impl FnOnce(&mut dyn Optimizer) -> T) -> JsResult<T> {
        let mut o = self
            .inner
            .try_borrow_mut()
            .map_err(|_| fail(op, "the optimizer is in use"))?;
        Ok(f(o.as_mut()))
    }
}

impl Drop for Optim {
    fn drop(&mut self) {
        let id = self.id;
        let _ = LIVE.try_with(|l| l.try_borrow_mut().map(|mut l| l.1.remove(&id)));
    }
}

/// A member of an `OptimizerGroup` shared with its JS `Optim` (which stays usable).
struct Shared {
    inner: SharedOpt,
    params: Vec<Tensor>,
}

impl Shared {
    fn get(&self) -> crate::Result<std::cell::RefMut<'_, Box<dyn Optimizer>>> {
        self.inner.try_borrow_mut().map_err(|_| {
            crate::Error::new(
                crate::ErrorKind::Other,
                "OptimizerGroup: a member optimizer is in use",
            )
        })
    }
}

impl Optimizer for Shared {
    fn params(&self) -> &[Tensor] {
        &self.params
    }
    fn schedule_step(&mut self) -> crate::Result<Vec<Tensor>> {
        self.get()?.schedule_step()
    }
    fn schedule_scaled_step(
        &mut self,
        scale: &Tensor,
        skip: &Tensor,
    ) -> crate::Result<Vec<Tensor>> {
        self.get()?.schedule_scaled_step(scale, skip)
    }
    fn state(&self) -> Vec<Tensor> {
        self.get().map(|o| o.state()).unwrap_or_default()
    }
    fn learning_rate(&self) -> f64 {
        self.get().map_or(f64::NAN, |o| o.learning_rate())
    }
    fn set_lr(&mut self, lr: f64) -> crate::Result<()> {
        self.get()?.set_lr(lr)
    }
    fn set_schedule(&mut self, schedule: LrSchedule) -> crate::Result<()> {
        self.get()?.set_schedule(schedule)
    }
    fn current_lr(&self) -> crate::Result<Tensor> {
        self.get()?.current_lr()
    }
}

/// The parameters (a non-empty array of tensors) and the options of optimizer `name`.
fn optim(
    name: &'static str,
    params: JsValue,
    opts: Option<JsValue>,
    make: impl FnOnce(Vec<Tensor>, &Opts) -> JsResult<Box<dyn Optimizer>>,
) -> JsResult<Optim> {
    let ps: Vec<Tensor> = arg(&params, name, "params")?;
    if ps.is_empty() {
        return Err(fail(name, "no parameters (pass getParameters(model))"));
    }
    let opts = Opts::new(&opts.unwrap_or(JsValue::UNDEFINED), name)?;
    let mut inner = make(ps, &opts)?;
    if let Some(schedule) = opts.get::<LrSchedule>("schedule")? {
        inner.set_schedule(schedule).or_fail(name)?;
    }
    Ok(Optim::wrap(inner, name))
}

#[wasm_bindgen]
impl Optim {
    /// Forget every parameter's gradient.
    #[wasm_bindgen(js_name = zeroGrad)]
    pub fn zero_grad(&self) -> JsResult<()> {
        let op = format!("{}.zeroGrad", self.name);
        self.with(&op, |o| o.zero_grad())
    }
    /// Update the parameters from their gradients now (in training mode).
    pub fn step(&mut self) -> JsResult<()> {
        let op = format!("{}.step", self.name);
        self.with(&op, |o| o.step())?.or_fail(&op)
    }
    /// The update as tensors to realize together with the loss (one schedule).
    #[wasm_bindgen(js_name = scheduleStep, unchecked_return_type = "Tensor[]")]
    pub fn schedule_step(&mut self) -> JsResult<Array> {
        let op = format!("{}.scheduleStep", self.name);
        Ok(tensor_array(
            self.with(&op, |o| o.schedule_step())?.or_fail(&op)?,
        ))
    }
    #[wasm_bindgen(getter)]
    /// The learning rate (the base of a schedule, if one is set).
    pub fn lr(&self) -> JsResult<f64> {
        self.with(&format!("{}.lr", self.name), |o| o.learning_rate())
    }
    #[wasm_bindgen(setter)]
    /// Change the learning rate now: it is written into the device's learning-rate tensor, so a
    /// jitted step sees it at its next replay.
    pub fn set_lr(&mut self, lr: f64) -> JsResult<()> {
        let op = format!("{}.lr", self.name);
        self.with(&op, |o| o.set_lr(lr))?.or_fail(&op)
    }
    /// Follow a learning-rate schedule from the next step on (counting from 0, on the device,
    /// so a jitted step follows it): `{ kind: "constant" | "linear" | "step" | "exponential" |
    /// "cosine" | "onecycle", ... }` (see `LrScheduleOptions`).
    #[wasm_bindgen(js_name = setSchedule)]
    pub fn set_schedule(
        &mut self,
        #[wasm_bindgen(unchecked_param_type = "LrScheduleOptions")] schedule: JsValue,
    ) -> JsResult<()> {
        let op = format!("{}.setSchedule", self.name);
        let s: LrSchedule = arg(&schedule, &op, "schedule")?;
        self.with(&op, |o| o.set_schedule(s))?.or_fail(&op)
    }
    /// The learning rate of the last step, as a 0-d tensor on the device.
    #[wasm_bindgen(js_name = currentLr)]
    pub fn current_lr(&self) -> JsResult<JsTensor> {
        let op = format!("{}.currentLr", self.name);
        Ok(register(self.with(&op, |o| o.current_lr())?.or_fail(&op)?))
    }
    /// The optimizer's device state: the learning-rate tensor first, then its momentum buffers
    /// or moments, then a schedule's step counter (save them with the weights to resume
    /// training; `assign` to restore).
    #[wasm_bindgen(unchecked_return_type = "Tensor[]")]
    pub fn state(&self) -> JsResult<Array> {
        Ok(tensor_array(
            self.with(&format!("{}.state", self.name), |o| o.state())?,
        ))
    }
    #[wasm_bindgen(unchecked_return_type = "Tensor[]")]
    /// The tensors this optimizer updates.
    pub fn params(&self) -> JsResult<Array> {
        let op = format!("{}.params", self.name);
        Ok(tensor_array(self.with(&op, |o| o.params().to_vec())?))
    }
    /// The id through which `OptimizerGroup` finds this optimizer.
    #[wasm_bindgen(getter, js_name = "_wgradOptimId")]
    pub fn optim_id(&self) -> u32 {
        self.id
    }
}

/// Dynamic loss scaling for mixed precision (`new optim.GradScaler(param, { initScale,
/// growthFactor, backoffFactor, growthInterval })`, PyTorch's defaults 2^16, 2, 0.5, 2000):
/// `scaler.scale(loss).backward()`, then `scaler.step(opt)` divides the gradients back and
/// applies the step, or skips it where a gradient is inf or NaN (halving the scale). The
/// decision is made on the device, so a jitted step does the same on replay.
#[wasm_bindgen(js_name = GradScaler)]
pub struct JsGradScaler {
    inner: GradScaler,
}

#[wasm_bindgen(js_class = GradScaler)]
impl JsGradScaler {
    #[wasm_bindgen(constructor)]
    /// A scaler placed like `param` (a parameter of the model).
    pub fn new(
        #[wasm_bindgen(unchecked_param_type = "Tensor")] param: JsValue,
        #[wasm_bindgen(unchecked_optional_param_type = "GradScalerOptions")] opts: Option<JsValue>,
    ) -> JsResult<JsGradScaler> {
        const OP: &str = "GradScaler";
        let like: Tensor = arg(&param, OP, "param")?;
        let o = Opts::new(&opts.unwrap_or(JsValue::UNDEFINED), OP)?;
        let mut s = GradScaler::new(&like).or_fail(OP)?;
        if let Some(v) = o.get::<f64>("initScale")? {
            s = s.init_scale(v).or_fail(OP)?;
        }
        if let Some(v) = o.get::<f64>("growthFactor")? {
            s = s.growth_factor(v).or_fail(OP)?;
        }
        if let Some(v) = o.get::<f64>("backoffFactor")? {
            s = s.backoff_factor(v).or_fail(OP)?;
        }
        if let Some(v) = o.get::<usize>("growthInterval")? {
            s = s.growth_interval(v).or_fail(OP)?;
        }
        Ok(JsGradScaler { inner: s })
    }
    /// `loss` times the scale (call `backward()` on this).
    pub fn scale(
        &self,
        #[wasm_bindgen(unchecked_param_type = "Tensor")] loss: JsValue,
    ) -> JsResult<JsTensor> {
        const OP: &str = "GradScaler.scale";
        let loss: Tensor = arg(&loss, OP, "loss")?;
        Ok(register(self.inner.scale(&loss).or_fail(OP)?))
    }
    /// `opt`'s step on the unscaled gradients (skipped if any is inf or NaN), and the scale's
    /// update, now.
    pub fn step(&mut self, opt: &Optim) -> JsResult<()> {
        const OP: &str = "GradScaler.step";
        let inner = &mut self.inner;
        opt.with(OP, |o| inner.step(o))?.or_fail(OP)
    }
    /// The scale, a `[1]` float32 tensor on the device (read it with `await ... .item()`).
    #[wasm_bindgen(getter, js_name = scaleTensor)]
    pub fn scale_tensor(&self) -> JsTensor {
        register(self.inner.state()[0].clone())
    }
}

/// `OptimizerGroup([muon, adamw])`: the optimizers stepped as one (each parameter in one of
/// them); the members stay usable on their own.
#[wasm_bindgen(js_name = OptimizerGroup)]
pub fn optimizer_group(
    #[wasm_bindgen(unchecked_param_type = "Optim[]")] optimizers: JsValue,
) -> JsResult<Optim> {
    const OP: &str = "OptimizerGroup";
    if !is_array(&optimizers) {
        return Err(fail(
            OP,
            format!(
                "expected an array of optimizers, got {}",
                describe(&optimizers)
            ),
        ));
    }
    let mut members: Vec<Box<dyn Optimizer>> = vec![];
    for (i, v) in Array::from(&optimizers).iter().enumerate() {
        let id = get(&v, "_wgradOptimId").as_f64();
        let inner =
            id.and_then(|id| LIVE.with(|l| l.borrow().1.get(&(id as u32)).and_then(Weak::upgrade)));
        let Some(inner) = inner else {
            return Err(fail(
                OP,
                format!("element {i} must be a live optimizer, got {}", describe(&v)),
            ));
        };
        let params = inner
            .try_borrow()
            .map_err(|_| fail(OP, "an optimizer is in use"))?
            .params()
            .to_vec();
        members.push(Box::new(Shared { inner, params }));
    }
    Ok(Optim::wrap(
        Box::new(OptimizerGroup::new(members).or_fail(OP)?),
        OP,
    ))
}

/// `clipGradNorm(params, maxNorm, normType = 2)`: scale the gradients so that their global
/// norm is at most `maxNorm` (on the device, lazily: it joins the step) and return the norm
/// before clipping as a 0-d tensor (PyTorch's `clip_grad_norm_`; `normType` may be Infinity).
#[wasm_bindgen(js_name = clipGradNorm)]
pub fn clip_grad_norm_js(
    #[wasm_bindgen(unchecked_param_type = "Tensor[]")] params: JsValue,
    #[wasm_bindgen(unchecked_param_type = "number")] max_norm: JsValue,
    #[wasm_bindgen(unchecked_optional_param_type = "number")] norm_type: Option<JsValue>,
) -> JsResult<JsTensor> {
    const OP: &str = "clipGradNorm";
    let ps: Vec<Tensor> = arg(&params, OP, "params")?;
    let max_norm: f64 = arg(&max_norm, OP, "maxNorm")?;
    let norm_type: Option<f64> = arg(&norm_type.unwrap_or(JsValue::UNDEFINED), OP, "normType")?;
    Ok(register(
        clip_grad_norm(&ps, max_norm, norm_type.unwrap_or(2.0)).or_fail(OP)?,
    ))
}

/// `{ kind, ... }`: "constant"; "linear" `{ startFactor = 1/3, endFactor = 1, totalSteps = 5 }`;
/// "step" `{ stepSize, gamma = 0.1 }`; "exponential" `{ gamma }`; "cosine" `{ totalSteps,
/// warmupSteps = 0, startFactor = 1/3, minLr = 0 }`; "onecycle" `{ totalSteps, pctStart = 0.3,
/// divFactor = 25, finalDivFactor = 1e4 }` (PyTorch's defaults).
impl FromJs for LrSchedule {
    fn from_js(v: &JsValue, op: &str, what: &str) -> JsResult<Self> {
        let o = Opts::new(v, op)?;
        let need = |key: &str| -> JsResult<f64> {
            o.get::<f64>(key)?
                .ok_or_else(|| fail(op, format!("{what}: {key} is required")))
        };
        let steps = |key: &str, default: Option<usize>| -> JsResult<usize> {
            match (o.get::<usize>(key)?, default) {
                (Some(n), _) | (None, Some(n)) => Ok(n),
                (None, None) => Err(fail(op, format!("{what}: {key} is required"))),
            }
        };
        let kind: Option<String> = o.raw("kind").as_string();
        Ok(match kind.as_deref() {
            Some("constant") => LrSchedule::Constant,
            Some("linear") => LrSchedule::Linear {
                start_factor: o.or("startFactor", 1.0 / 3.0)?,
                end_factor: o.or("endFactor", 1.0)?,
                total_steps: steps("totalSteps", Some(5))?,
            },
            Some("step") => LrSchedule::Step {
                step_size: steps("stepSize", None)?,
                gamma: o.or("gamma", 0.1)?,
            },
            Some("exponential") => LrSchedule::Exponential {
                gamma: need("gamma")?,
            },
            Some("cosine") => LrSchedule::Cosine {
                warmup_steps: steps("warmupSteps", Some(0))?,
                start_factor: o.or("startFactor", 1.0 / 3.0)?,
                total_steps: steps("totalSteps", None)?,
                min_lr: o.or("minLr", 0.0)?,
            },
            Some("onecycle") => LrSchedule::OneCycle {
                total_steps: steps("totalSteps", None)?,
                pct_start: o.or("pctStart", 0.3)?,
                div_factor: o.or("divFactor", 25.0)?,
                final_div_factor: o.or("finalDivFactor", 1e4)?,
            },
            _ => {
                return Err(fail(
                    op,
                    format!(
                        "{what}: kind must be \"constant\", \"linear\", \"step\", \
                         \"exponential\", \"cosine\" or \"onecycle\", got {}",
                        describe(&o.raw("kind"))
                    ),
                ))
            }
        })
    }
}

/// `SGD(params, { lr = 0.001, momentum = 0, weightDecay = 0, nesterov = false })`.
#[wasm_bindgen(js_name = SGD)]
pub fn sgd(
    #[wasm_bindgen(unchecked_param_type = "Tensor[]")] params: JsValue,
    opts: Option<JsValue>,
) -> JsResult<Optim> {
    optim("SGD", params, opts, |ps, o| {
        let mut s = Sgd::new(ps).or_fail("SGD")?;
        s = s
            .lr(o.or("lr", 0.001)?)
            .momentum(o.or("momentum", 0.0)?)
            .weight_decay(o.or("weightDecay", 0.0)?);
        if let Some(n) = o.get("nesterov")? {
            s = s.nesterov(n);
        }
        Ok(Box::new(s))
    })
}

/// `LARS(params, { lr = 0.001, momentum = 0.9, weightDecay = 0.0001, nesterov })`.
#[wasm_bindgen(js_name = LARS)]
pub fn lars(
    #[wasm_bindgen(unchecked_param_type = "Tensor[]")] params: JsValue,
    opts: Option<JsValue>,
) -> JsResult<Optim> {
    optim("LARS", params, opts, |ps, o| {
        let mut s = Lars::new(ps).or_fail("LARS")?;
        s = s
            .lr(o.or("lr", 0.001)?)
            .momentum(o.or("momentum", 0.9)?)
            .weight_decay(o.or("weightDecay", 1e-4)?);
        if let Some(n) = o.get("nesterov")? {
            s = s.nesterov(n);
        }
        Ok(Box::new(s))
    })
}

/// `Muon(params, { lr = 0.02, momentum = 0.95, weightDecay = 0, nesterov = true })`.
#[wasm_bindgen(js_name = Muon)]
pub fn muon(
    #[wasm_bindgen(unchecked_param_type = "Tensor[]")] params: JsValue,
    opts: Option<JsValue>,
) -> JsResult<Optim> {
    optim("Muon", params, opts, |ps, o| {
        let mut s = Muon::new(ps).or_fail("Muon")?;
        s = s
            .lr(o.or("lr", 0.02)?)
            .momentum(o.or("momentum", 0.95)?)
            .weight_decay(o.or("weightDecay", 0.0)?);
        if let Some(n) = o.get("nesterov")? {
            s = s.nesterov(n);
        }
        Ok(Box::new(s))
    })
}

/// `Adam(params, { lr = 0.001, b1 = 0.9, b2 = 0.999, eps = 1e-8 })`.
#[wasm_bindgen(js_name = Adam)]
pub fn adam(
    #[wasm_bindgen(unchecked_param_type = "Tensor[]")] params: JsValue,
    opts: Option<JsValue>,
) -> JsResult<Optim> {
    optim("Adam", params, opts, |ps, o| {
        let a = Adam::new(ps).or_fail("Adam")?;
        Ok(Box::new(
            a.lr(o.or("lr", 0.001)?)
                .b1(o.or("b1", 0.9)?)
                .b2(o.or("b2", 0.999)?)
                .eps(o.or("eps", 1e-8)?),
        ))
    })
}

/// `AdamW(params, { lr = 0.001, b1 = 0.9, b2 = 0.999, eps = 1e-8, weightDecay = 0.01 })`.
#[wasm_bindgen(js_name = AdamW)]
pub fn adamw(
    #[wasm_bindgen(unchecked_param_type = "Tensor[]")] params: JsValue,
    opts: Option<JsValue>,
) -> JsResult<Optim> {
    optim("AdamW", params, opts, |ps, o| {
        let a = AdamW::new(ps).or_fail("AdamW")?;
        Ok(Box::new(
            a.lr(o.or("lr", 0.001)?)
                .b1(o.or("b1", 0.9)?)
                .b2(o.or("b2", 0.999)?)
                .eps(o.or("eps", 1e-8)?)
                .weight_decay(o.or("weightDecay", 0.01)?),
        ))
    })
}

/// `LAMB(params, { lr = 0.001, eps = 1e-6, weightDecay = 0 })`.
#[wasm_bindgen(js_name = LAMB)]
pub fn lamb(
    #[wasm_bindgen(unchecked_param_type = "Tensor[]")] params: JsValue,
    opts: Option<JsValue>,
) -> JsResult<Optim> {
    optim("LAMB", params, opts, |ps, o| {
        let l = Lamb::new(ps).or_fail("LAMB")?;
        Ok(Box::new(
            l.lr(o.or("lr", 0.001)?)
                .eps(o.or("eps", 1e-6)?)
                .weight_decay(o.or("weightDecay", 0.0)?),
        ))
    })
}

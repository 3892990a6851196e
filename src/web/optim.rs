//! Optimizers for JavaScript: `SGD`, `LARS`, `Muon`, `Adam`, `AdamW` and `LAMB` make an `Optim`
//! over an array of parameters (`getParameters(model)` in js/wgrad.js makes one), with their
//! hyper-parameters from an options object.

use super::args::{arg, Opts};
use super::{fail, tensor_array, JsResult, OrFail};
use crate::nn::optim::{Adam, AdamW, Lamb, Lars, Muon, Optimizer, Sgd};
use crate::Tensor;
use js_sys::Array;
use wasm_bindgen::prelude::*;

/// An optimizer; `opts` is `{ lr, momentum, weightDecay, nesterov, b1, b2, eps }` as it applies.
#[wasm_bindgen]
pub struct Optim {
    inner: Box<dyn Optimizer>,
    name: &'static str,
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
    Ok(Optim {
        inner: make(ps, &opts)?,
        name,
    })
}

#[wasm_bindgen]
impl Optim {
    /// Forget every parameter's gradient.
    #[wasm_bindgen(js_name = zeroGrad)]
    pub fn zero_grad(&self) {
        self.inner.zero_grad();
    }
    /// Update the parameters from their gradients now (in training mode).
    pub fn step(&mut self) -> JsResult<()> {
        let name = self.name;
        self.inner.step().or_fail(&format!("{name}.step"))
    }
    /// The update as tensors to realize together with the loss (one schedule).
    #[wasm_bindgen(js_name = scheduleStep, unchecked_return_type = "Tensor[]")]
    pub fn schedule_step(&mut self) -> JsResult<Array> {
        let name = self.name;
        Ok(tensor_array(
            self.inner
                .schedule_step()
                .or_fail(&format!("{name}.scheduleStep"))?,
        ))
    }
    #[wasm_bindgen(getter)]
    pub fn lr(&self) -> f64 {
        self.inner.learning_rate()
    }
    #[wasm_bindgen(setter)]
    pub fn set_lr(&mut self, lr: f64) -> JsResult<()> {
        let name = self.name;
        self.inner.set_lr(lr).or_fail(&format!("{name}.lr"))
    }
    #[wasm_bindgen(unchecked_return_type = "Tensor[]")]
    pub fn params(&self) -> Array {
        tensor_array(self.inner.params().to_vec())
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

//! The TinyJit for JavaScript: `TinyJitJs` wraps a JS function of tensors (js/wgrad.js's
//! `jit(fn)` makes one and hides it behind a plain function).

use super::args::{arg, describe, is_array};
use super::{fail, js_error_message, register, tensor_array, JsResult, OrFail};
use crate::{Error, ErrorKind, Tensor, Timer, TinyJit};
use js_sys::{Array, Function, Object, Reflect};
use std::cell::Cell;
use std::rc::Rc;
use wasm_bindgen::prelude::*;

type JitFn = Box<dyn FnMut(&[Tensor]) -> crate::Result<Vec<Tensor>>>;

/// The TinyJit: `call` 1 runs the function, call 2 captures its launches, later calls replay
/// them without running it. Made by `jit(fn)` in js/wgrad.js.
#[wasm_bindgen]
pub struct TinyJitJs {
    jit: TinyJit<JitFn>,
    /// Whether the function returned one Tensor (not an array), once it has run.
    single: Rc<Cell<Option<bool>>>,
}

#[wasm_bindgen]
impl TinyJitJs {
    #[wasm_bindgen(constructor)]
    /// A TinyJit of `f`, a function of tensors returning a Tensor or an array of them; throws if
    /// `f` is not a function.
    pub fn new(f: JsValue) -> JsResult<TinyJitJs> {
        let f: Function = f
            .dyn_into()
            .map_err(|v| fail("jit", format!("expected a function, got {}", describe(&v))))?;
        let single = Rc::new(Cell::new(None));
        let s2 = single.clone();
        let jit_err = |msg: String| Error::new(ErrorKind::Jit, msg);
        let run: JitFn = Box::new(move |inputs: &[Tensor]| {
            let args = tensor_array(inputs.to_vec());
            let out = f.apply(&JsValue::NULL, &args).map_err(|e| {
                jit_err(format!(
                    "the jitted function threw: {}",
                    js_error_message(&e)
                ))
            })?;
            if out.is_instance_of::<js_sys::Promise>() {
                return Err(jit_err(
                    "the jitted function returned a Promise: it must be synchronous (await nothing inside it)".into(),
                ));
            }
            // A Tensor, or an array of them.
            let (ts, one) = if is_array(&out) {
                (arg(&out, "jit", "the function's result"), false)
            } else {
                (
                    arg::<Tensor>(&out, "jit", "the function's result").map(|t| vec![t]),
                    true,
                )
            };
            let ts = ts.map_err(|e| jit_err(js_error_message(&JsValue::from(e))))?;
            s2.set(Some(one));
            Ok(ts)
        });
        Ok(TinyJitJs {
            jit: TinyJit::new(run),
            single,
        })
    }

    /// Run (or capture, or replay) with these input tensors; returns what the function returns.
    #[wasm_bindgen(unchecked_return_type = "Tensor | Tensor[]")]
    pub fn call(
        &mut self,
        #[wasm_bindgen(unchecked_optional_param_type = "Tensor[]")] inputs: Option<JsValue>,
    ) -> JsResult<JsValue> {
        let ins = tensors(inputs, "jit")?;
        let refs: Vec<&Tensor> = ins.iter().collect();
        let out = self.jit.call(&refs).or_fail("jit")?;
        Ok(outputs(out, self.single.get() == Some(true)))
    }

    /// `call`, awaiting: the call that runs the function (the first) holds its launches back
    /// until its WebGPU pipelines are compiled, all at once on the browser's threads, without
    /// blocking the page; later calls resolve to what `call` returns. (js/wgrad.js's
    /// `callAsync` disposes the tensors the function made, as `tidy` does: the outputs are
    /// registered when the promise resolves.) Await it before the next call.
    #[wasm_bindgen(js_name = callAsync, unchecked_return_type = "Promise<Tensor | Tensor[]>")]
    pub fn call_async(
        &mut self,
        #[wasm_bindgen(unchecked_optional_param_type = "Tensor[]")] inputs: Option<JsValue>,
    ) -> JsResult<js_sys::Promise> {
        let ins = tensors(inputs, "jit")?;
        let refs: Vec<&Tensor> = ins.iter().collect();
        let (out, held) = match self.jit.run_deferred(&refs).or_fail("jit")? {
            Some(out) => (out, true),
            None => (self.jit.call(&refs).or_fail("jit")?, false),
        };
        let single = self.single.get() == Some(true);
        Ok(wasm_bindgen_futures::future_to_promise(async move {
            if held {
                crate::realize::launch_deferred().await.or_fail("jit")?;
            }
            Ok(outputs(out, single))
        }))
    }

    /// Forget the capture: the next call runs, the one after captures again.
    pub fn reset(&mut self) {
        self.jit.reset();
    }

    /// The captured step's launches in order: `{ name, globalSize, localSize, source, bytes,
    /// ops }` each (a copy is named "copy"); empty before capture.
    #[wasm_bindgen(unchecked_return_type = "KernelInfo[]")]
    pub fn kernels(&self) -> Array {
        self.jit
            .kernels()
            .into_iter()
            .map(|k| {
                let o = Object::new();
                for (key, v) in [
                    ("name", JsValue::from(k.name.as_str())),
                    ("globalSize", (k.global_size as f64).into()),
                    ("localSize", (k.local_size as f64).into()),
                    ("source", k.source.as_str().into()),
                    ("bytes", (k.bytes as f64).into()),
                    ("ops", (k.ops as f64).into()),
                ] {
                    let _ = Reflect::set(&o, &key.into(), &v);
                }
                JsValue::from(o)
            })
            .collect()
    }

    /// Replay the captured step once with each launch timed; resolves to `{ timer, ms }`:
    /// `timer` is "timestamp-query" (the device's timestamps around each kernel) or "host"
    /// (each launch alone, from its launch until a readback of its output completed: an upper
    /// bound), `ms` the time per launch in `kernels()` order. Await it before the next call.
    #[wasm_bindgen(unchecked_return_type = "Promise<KernelProfile>")]
    pub fn profile(
        &self,
        #[wasm_bindgen(unchecked_optional_param_type = "Tensor[]")] inputs: Option<JsValue>,
    ) -> JsResult<js_sys::Promise> {
        const OP: &str = "jit.profile";
        let ins = tensors(inputs, OP)?;
        let refs: Vec<&Tensor> = ins.iter().collect();
        let (_outputs, fut) = self.jit.replay_profiled(&refs).or_fail(OP)?;
        Ok(wasm_bindgen_futures::future_to_promise(async move {
            let (timer, ns) = fut.await.or_fail(OP)?;
            let o = Object::new();
            let timer = match timer {
                Timer::Device => "timestamp-query",
                Timer::Host => "host",
            };
            let ms: Array = ns.iter().map(|&n| JsValue::from(n as f64 / 1e6)).collect();
            Reflect::set(&o, &"timer".into(), &timer.into())?;
            Reflect::set(&o, &"ms".into(), &ms)?;
            Ok(o.into())
        }))
    }

    /// Launches replayed per call (0 before capture).
    #[wasm_bindgen(getter)]
    pub fn launches(&self) -> u32 {
        self.jit.launches() as u32
    }
}

/// What a call returns to JS: one Tensor where the function returned one, else an array.
fn outputs(out: Vec<Tensor>, single: bool) -> JsValue {
    match <[Tensor; 1]>::try_from(out) {
        Ok([t]) if single => register(t).into(),
        Ok(one) => tensor_array(one.to_vec()).into(),
        Err(many) => tensor_array(many).into(),
    }
}

/// The input tensors a call is given (none where `inputs` is missing).
fn tensors(inputs: Option<JsValue>, op: &str) -> JsResult<Vec<Tensor>> {
    let ins: Option<Vec<Tensor>> = arg(&inputs.unwrap_or(JsValue::UNDEFINED), op, "inputs")?;
    Ok(ins.unwrap_or_default())
}

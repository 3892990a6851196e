//! Optimizers against reference values.
//!
//! `tests/fixtures/optim.json` (written once by hand with `python3 scripts/gen_optim_fixtures.py`)
//! holds, per optimizer config, initial parameters, three gradient sets and the parameters after
//! each of the three steps (torch.optim for SGD / Adam / AdamW, numpy ports of tinygrad for LAMB,
//! LARS and Muon). Every config runs on `Device::Interp` and `Device::Cpu`; the state tensors
//! (momentum, moments, b1^t / b2^t) must carry over between steps for steps 2 and 3 to match.
//! Tolerance: `|got - want| <= 1e-5 + 1e-4 * |want|`.
//!
//! Also: stepping outside training mode and without gradients are errors with helpful messages,
//! the parameter list is filtered and deduplicated, the state stays in realized buffers, the
//! learning rate can change between steps (by one kernel for every value), f16 parameters stay f16, steps replayed by TinyJit
//! equal eager steps, and the update takes few kernels (Adam: 2 per parameter; an MLP training
//! step with SGD fuses each update into its gradient kernel).
//!
//! Learning-rate schedules against torch's schedulers (the `schedules` of the fixture: the rate of
//! every step, on the device and on the host), gradient clipping against
//! `torch.nn.utils.clip_grad_norm_` (`clipping`), `OptimizerGroup` against its members stepped
//! one by one, and jitted steps with a schedule, a group and clipping equal to eager ones.

// Native only: the browser tests are tests/web.rs.
#![cfg(not(target_arch = "wasm32"))]

mod common;

use serde_json::Value;
use wgrad::nn::optim::{
    clip_grad_norm, Adam, AdamW, Lamb, Lars, LrSchedule, Muon, Optimizer, OptimizerGroup, Sgd,
};
use wgrad::{Context, DType, Device, GlobalCounters, Tensor, TinyJit};

const FIXTURE: &str = include_str!("fixtures/optim.json");
const ATOL: f64 = 1e-5;
const RTOL: f64 = 1e-4;

type R<T> = std::result::Result<T, String>;

/// Builds an optimizer over the given parameters.
type Make = fn(Vec<Tensor>) -> Box<dyn Optimizer>;

fn err<T>(what: &str) -> impl FnOnce(wgrad::Error) -> R<T> + '_ {
    move |e| Err(format!("{what}: {e}"))
}

fn floats(v: &Value) -> Vec<f32> {
    v.as_array()
        .expect("fixture: not an array")
        .iter()
        .map(|x| x.as_f64().expect("fixture: not a number") as f32)
        .collect()
}

fn configs() -> Vec<Value> {
    let v: Value = serde_json::from_str(FIXTURE).expect("fixture: bad JSON");
    v["configs"]
        .as_array()
        .expect("fixture: no configs")
        .clone()
}

/// The optimizer a config names, with its hyperparameters applied through the setters.
fn build(opt: &str, hp: &Value, params: Vec<Tensor>) -> wgrad::Result<Box<dyn Optimizer>> {
    let f = |k: &str| hp.get(k).and_then(Value::as_f64);
    let b = |k: &str| hp.get(k).and_then(Value::as_bool);
    macro_rules! apply {
        ($o:expr, [$($num:ident),*], [$($flag:ident),*]) => {{
            let mut o = $o;
            $(if let Some(v) = f(stringify!($num)) { o = o.$num(v); })*
            $(if let Some(v) = b(stringify!($flag)) { o = o.$flag(v); })*
            Box::new(o) as Box<dyn Optimizer>
        }};
    }
    Ok(match opt {
        "sgd" => apply!(
            Sgd::new(params)?,
            [lr, momentum, weight_decay],
            [nesterov, classic]
        ),
        "lars" => apply!(
            Lars::new(params)?,
            [lr, momentum, weight_decay, tcoef],
            [nesterov, classic]
        ),
        "muon" => apply!(Muon::new(params)?, [lr, momentum, weight_decay], [nesterov]),
        "adam" => apply!(Adam::new(params)?, [lr, b1, b2, eps], []),
        "adamw" => apply!(AdamW::new(params)?, [lr, b1, b2, eps, weight_decay], []),
        "lamb" => apply!(Lamb::new(params)?, [lr, b1, b2, eps, weight_decay], []),
        other => panic!("fixture: unknown optimizer {other}"),
    })
}

fn check(what: &str, got: &[f32], want: &[f32]) -> R<()> {
    if got.len() != want.len() {
        return Err(format!("{what}: {} values, want {}", got.len(), want.len()));
    }
    // The element exceeding the tolerance the most (NaN counts as the worst).
    let mut worst: Option<(f64, usize)> = None;
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        let (g, w) = (g as f64, w as f64);
        let excess = (g - w).abs() - (ATOL + RTOL * w.abs());
        let excess = if excess.is_nan() {
            f64::INFINITY
        } else {
            excess
        };
        if excess > 0.0 && worst.is_none_or(|(e, _)| excess > e) {
            worst = Some((excess, i));
        }
    }
    if let Some((_, i)) = worst {
        return Err(format!(
            "{what}: element {i} is {} but want {} (got {got:?}, want {want:?})",
            got[i], want[i]
        ));
    }
    Ok(())
}

/// Run one fixture config on `dev`: every step's parameters must match.
fn run_config(cfg: &Value, dev: Device) -> R<()> {
    let name = cfg["name"].as_str().unwrap_or("?");
    Context::new().dev(dev).training(true).run(|| {
        let specs = cfg["params"].as_array().expect("fixture: params");
        let shapes: Vec<Vec<usize>> = specs
            .iter()
            .map(|p| {
                p["shape"]
                    .as_array()
                    .expect("fixture: shape")
                    .iter()
                    .map(|d| d.as_u64().expect("fixture: dim") as usize)
                    .collect()
            })
            .collect();
        let mut params = vec![];
        for (spec, shape) in specs.iter().zip(&shapes) {
            let p = Tensor::from_slice(&floats(&spec["data"]), shape).or_else(err("param"))?;
            p.set_requires_grad(true);
            params.push(p);
        }
        let mut opt =
            build(cfg["opt"].as_str().unwrap(), &cfg["hp"], params.clone()).or_else(err(name))?;
        let grads = cfg["grads"].as_array().expect("fixture: grads");
        let expected = cfg["expected"].as_array().expect("fixture: expected");
        for (step, (gs, want)) in grads.iter().zip(expected).enumerate() {
            opt.zero_grad();
            for ((p, g), shape) in params.iter().zip(gs.as_array().unwrap()).zip(&shapes) {
                let g = Tensor::from_slice(&floats(g), shape).or_else(err("grad"))?;
                p.set_grad(Some(g));
            }
            opt.step()
                .or_else(err(&format!("{name} on {dev}, step {}", step + 1)))?;
            for (i, (p, w)) in params.iter().zip(want.as_array().unwrap()).enumerate() {
                let got = p.to_vec::<f32>().or_else(err("read param"))?;
                check(
                    &format!("{name} on {dev}, step {}, param {i}", step + 1),
                    &got,
                    &floats(w),
                )?;
            }
        }
        Ok(())
    })
}

fn fixture_suite(dev: Device) {
    let cfgs = configs();
    assert!(cfgs.len() >= 7, "fixture has only {} configs", cfgs.len());
    let failures: Vec<String> = cfgs
        .iter()
        .filter_map(|c| run_config(c, dev).err())
        .collect();
    assert!(
        failures.is_empty(),
        "{} of {} configs failed:\n{}",
        failures.len(),
        cfgs.len(),
        failures.join("\n")
    );
}

#[test]
fn fixtures_interp() {
    fixture_suite(Device::Interp);
}

#[test]
fn fixtures_cpu() {
    fixture_suite(Device::Cpu);
}

/// A (4,3) and a (3,) parameter with gradients set, on the interpreter.
fn params_with_grads() -> Vec<Tensor> {
    let p = [
        Tensor::from_vec((0..12).map(|i| i as f32 / 10.0 - 0.5).collect(), &[4, 3]).unwrap(),
        Tensor::from_vec(vec![0.5f32, -1.0, 2.0], &[3]).unwrap(),
    ];
    for t in &p {
        t.set_requires_grad(true);
        t.set_grad(Some(
            t.mul(0.5).unwrap().add(0.25).unwrap().realize().unwrap(),
        ));
    }
    p.to_vec()
}

#[test]
fn step_outside_training_mode_errors() {
    Context::new().dev(Device::Interp).training(false).run(|| {
        let params = params_with_grads();
        let before = params[0].to_vec::<f32>().unwrap();
        let mut opts: Vec<Box<dyn Optimizer>> = vec![
            Box::new(Sgd::new(params.clone()).unwrap()),
            Box::new(Adam::new(params.clone()).unwrap()),
            Box::new(Muon::new(params.clone()).unwrap()),
        ];
        for o in &mut opts {
            let e = o.step().unwrap_err().to_string();
            assert!(
                e.contains("training"),
                "message does not mention training: {e}"
            );
            assert!(e.contains("Context::new().training(true)"), "no hint: {e}");
            assert!(o.schedule_step().is_err());
        }
        assert_eq!(params[0].to_vec::<f32>().unwrap(), before);
    });
}

#[test]
fn step_without_gradient_errors() {
    Context::new().dev(Device::Interp).training(true).run(|| {
        let params = params_with_grads();
        let mut opt = AdamW::new(params.clone()).unwrap();
        opt.zero_grad();
        assert!(params.iter().all(|p| p.grad().is_none()));
        let e = opt.step().unwrap_err().to_string();
        assert!(
            e.contains("backward()"),
            "message does not say to call backward(): {e}"
        );
        // A wrongly shaped gradient is an error too, not a panic.
        params[1].set_grad(Some(Tensor::zeros(&[4]).unwrap()));
        params[0].set_grad(Some(Tensor::zeros(&[4, 3]).unwrap()));
        assert!(opt.step().is_err());
    });
}

#[test]
fn params_are_filtered_and_deduplicated() {
    Context::new().dev(Device::Interp).training(true).run(|| {
        let params = params_with_grads();
        let frozen = Tensor::from_vec(vec![1.0f32, 2.0], &[2]).unwrap();
        let list = vec![
            params[0].clone(),
            frozen.clone(),
            params[1].clone(),
            params[0].clone(),
        ];
        let opt = Sgd::new(list).unwrap();
        assert_eq!(opt.params().len(), 2);
        assert!(opt.params()[0].same(&params[0]) && opt.params()[1].same(&params[1]));
        assert!(Sgd::new(vec![]).is_err());
        assert!(Adam::new(vec![frozen]).is_err());
    });
}

/// The state tensors are the same handles, realized, after every step; their values carry over
/// (the fixtures check that numerically).
#[test]
fn state_stays_in_realized_buffers() {
    Context::new().dev(Device::Interp).training(true).run(|| {
        let params = params_with_grads();
        let mut opts: Vec<Box<dyn Optimizer>> = vec![
            Box::new(Sgd::new(params.clone()).unwrap().momentum(0.9)),
            Box::new(Lars::new(params.clone()).unwrap()),
            Box::new(Adam::new(params.clone()).unwrap()),
            Box::new(Lamb::new(params.clone()).unwrap()),
        ];
        for o in &mut opts {
            let before = o.state();
            for s in &before {
                assert!(s.is_realized(), "{s:?}");
            }
            for _ in 0..2 {
                o.step().unwrap();
                let after = o.state();
                assert!(after.len() > 1, "no state besides the learning rate");
                for s in &after {
                    assert!(s.is_realized(), "{s:?}");
                }
            }
        }
        // Adam's moments after two steps of a constant gradient g: m = (1 - 0.9^2) g.
        let s = opts[2].state()[2].to_vec::<f32>().unwrap();
        let g = params[1].grad().unwrap().to_vec::<f32>().unwrap();
        for i in 0..3 {
            assert!((s[i] - 0.19 * g[i]).abs() < 1e-6, "m = {s:?}, g = {g:?}");
        }
        // The corrections 1 - b1^2 and 1 - b2^2 sit after m and v.
        assert!(
            (s[3] - 0.19).abs() < 1e-6 && (s[7] - 0.001999).abs() < 1e-9,
            "{s:?}"
        );
    });
}

#[test]
fn learning_rate_can_change_between_steps() {
    Context::new().dev(Device::Interp).training(true).run(|| {
        let p = Tensor::from_vec(vec![1.0f32, 2.0], &[2]).unwrap();
        p.set_requires_grad(true);
        let mut opt = Sgd::new(vec![p.clone()]).unwrap().lr(0.5);
        assert_eq!(opt.learning_rate(), 0.5);
        p.set_grad(Some(Tensor::from_vec(vec![1.0f32, 1.0], &[2]).unwrap()));
        opt.step().unwrap();
        assert_eq!(p.to_vec::<f32>().unwrap(), vec![0.5, 1.5]);
        opt.set_lr(0.25).unwrap();
        assert_eq!(opt.state()[0].to_vec::<f32>().unwrap(), vec![0.25]);
        opt.step().unwrap();
        assert_eq!(p.to_vec::<f32>().unwrap(), vec![0.25, 1.25]);
        // Each new rate is copied in, not a constant in a kernel's source: one compiled kernel
        // writes every rate (a new one each would cost a compiler run per change).
        let writes: Vec<_> = [0.125, 0.0625]
            .iter()
            .map(|&lr| {
                wgrad::realize::record_kernels(true);
                opt.set_lr(lr).unwrap();
                wgrad::realize::record_kernels(false)
            })
            .collect();
        assert!(!writes[0].is_empty());
        assert_eq!(writes[0], writes[1]);
        assert_eq!(opt.state()[0].to_vec::<f32>().unwrap(), vec![0.0625]);
    });
}

#[test]
fn a_learning_rate_that_is_not_a_finite_number_at_least_zero_is_an_error() {
    Context::new().dev(Device::Interp).training(true).run(|| {
        let p = Tensor::from_vec(vec![1.0f32, 2.0], &[2]).unwrap();
        p.set_requires_grad(true);
        let mut opt = Sgd::new(vec![p.clone()]).unwrap().lr(0.5);
        for bad in [f64::NAN, f64::INFINITY, -0.1] {
            let e = opt.set_lr(bad).unwrap_err();
            assert!(e.msg.contains("SGD: the learning rate"), "{}", e.msg);
        }
        assert_eq!(opt.learning_rate(), 0.5);
        // Through the builder it is refused when the step runs, before any parameter changes.
        let mut opt = Sgd::new(vec![p.clone()]).unwrap().lr(f64::NAN);
        p.set_grad(Some(Tensor::from_vec(vec![1.0f32, 1.0], &[2]).unwrap()));
        assert!(opt.step().unwrap_err().msg.contains("learning rate"));
        assert_eq!(p.to_vec::<f32>().unwrap(), vec![1.0, 2.0]);
    });
}

/// f16 and bf16 parameters keep their dtype (the update is computed in f32 and cast back).
#[test]
fn half_parameters_keep_their_dtype() {
    Context::new().dev(Device::Interp).training(true).run(|| {
        for dt in [DType::F16, DType::BF16] {
            let p = Tensor::from_vec(vec![1.0f32, -2.0, 0.5], &[3])
                .unwrap()
                .cast(dt)
                .unwrap()
                .realize()
                .unwrap();
            p.set_requires_grad(true);
            let mut opt = Adam::new(vec![p.clone()]).unwrap().lr(0.125);
            p.set_grad(Some(p.ones_like()));
            opt.step().unwrap();
            assert_eq!(p.dtype(), dt);
            let got = p.cast(DType::F32).unwrap().to_vec::<f32>().unwrap();
            for (g, w) in got.iter().zip([0.875f32, -2.125, 0.375]) {
                assert!((g - w).abs() < 1e-3, "{dt}: {got:?}");
            }
        }
    });
}

/// f16 and bf16 parameters are updated through f32 master copies: steps far below the
/// parameter's precision accumulate (rounding each step into the parameter would lose every
/// one), and a parameter changed outside the optimizer is where the next step starts from.
#[test]
fn half_parameters_accumulate_small_steps_in_master_copies() {
    for dev in common::devices() {
        Context::new().dev(dev).training(true).run(|| {
            let value = |p: &Tensor| p.cast(DType::F32).unwrap().to_vec::<f32>().unwrap()[0];
            for (dt, ulp) in [(DType::F16, 2f32.powi(-11)), (DType::BF16, 2f32.powi(-8))] {
                let p = Tensor::from_vec(vec![1.0f32], &[1])
                    .unwrap()
                    .cast(dt)
                    .unwrap();
                let p = p.realize().unwrap();
                p.set_requires_grad(true);
                let mut opt = Sgd::new(vec![p.clone()]).unwrap().lr(1.0);
                // A step of ulp/4: rounded into the parameter alone it would never move.
                let steps = 40;
                for _ in 0..steps {
                    p.set_grad(Some(p.full_like((ulp / 4.0) as f64)));
                    opt.step().unwrap();
                }
                assert_eq!(p.dtype(), dt);
                let want = 1.0 - steps as f32 * ulp / 4.0;
                let master = opt.state().last().unwrap().to_vec::<f32>().unwrap()[0];
                assert!((master - want).abs() < 1e-6, "{dev} {dt}: master {master}");
                assert!((value(&p) - want).abs() <= ulp, "{dev} {dt}: {}", value(&p));
                // Loaded from elsewhere: the next step starts from the new value.
                p.assign(&p.full_like(0.25)).unwrap().realize().unwrap();
                p.set_grad(Some(p.full_like(1.0 / 64.0)));
                opt.step().unwrap();
                assert_eq!(value(&p), 0.25 - 1.0 / 64.0, "{dev} {dt}");
            }
        });
    }
}

/// `GradScaler`: without an overflow, steps on a scaled loss equal plain steps bit for bit (the
/// scale is a power of two); a step whose gradients overflow is skipped (weights and moments
/// unchanged) and halves the scale; good steps grow it; and a step captured by `TinyJit` does
/// all of it on replay.
#[test]
fn grad_scaler_unscales_skips_and_grows() {
    use wgrad::nn::optim::GradScaler;
    let loss_of = |w: &Tensor| w.square().unwrap().sum((), false).unwrap();
    for dev in common::devices() {
        Context::new().dev(dev).training(true).run(|| {
            let init = [1.0f32, -2.0, 0.5];
            let run = |scaled: bool| -> (Vec<f32>, f64) {
                let w = Tensor::from_slice(&init, &[3]).unwrap();
                w.set_requires_grad(true);
                let mut opt = Adam::new(vec![w.clone()]).unwrap().lr(0.1);
                let mut scaler = GradScaler::new(&w).unwrap().init_scale(1024.0).unwrap();
                for _ in 0..3 {
                    opt.zero_grad();
                    if scaled {
                        scaler.scale(&loss_of(&w)).unwrap().backward().unwrap();
                        scaler.step(&mut opt).unwrap();
                    } else {
                        loss_of(&w).backward().unwrap();
                        opt.step().unwrap();
                    }
                }
                (w.to_vec::<f32>().unwrap(), scaler.current_scale().unwrap())
            };
            let (plain, _) = run(false);
            let (scaled, scale) = run(true);
            assert_eq!(plain, scaled, "{dev}");
            assert_eq!(scale, 1024.0, "{dev}");
        });
    }
    Context::new().dev(Device::Interp).training(true).run(|| {
        let w = Tensor::from_slice(&[1.0f32, -2.0, 0.5], &[3]).unwrap();
        w.set_requires_grad(true);
        let mut opt = Adam::new(vec![w.clone()]).unwrap().lr(0.1);
        // 1e38 * d(w^2)/dw overflows f32: skipped, the scale halves.
        let mut scaler = GradScaler::new(&w)
            .unwrap()
            .init_scale(1e38)
            .unwrap()
            .growth_interval(2)
            .unwrap();
        let moments = opt.state()[1].clone();
        let mut step = TinyJit::new(|_: &[Tensor]| {
            opt.zero_grad();
            scaler.scale(&loss_of(&w))?.backward()?;
            scaler.step(&mut opt)?;
            Ok(vec![scaler.state()[0].clone()])
        });
        let mut scales = vec![];
        let mut call = |scales: &mut Vec<f32>| {
            let out = step.call(&[]).unwrap();
            scales.push(out[0].to_vec::<f32>().unwrap()[0]);
        };
        call(&mut scales);
        assert_eq!(w.to_vec::<f32>().unwrap(), vec![1.0, -2.0, 0.5]);
        let moments = moments.to_vec::<f32>().unwrap();
        assert!(moments.iter().all(|&v| v == 0.0), "{moments:?}");
        // 5e37 * 4 = 2e38 fits: the step is taken (Adam's first step moves each weight by lr).
        call(&mut scales);
        let after: Vec<f32> = w.to_vec::<f32>().unwrap();
        for (a, b) in after.iter().zip([0.9f32, -1.9, 0.4]) {
            assert!((a - b).abs() < 1e-5, "{after:?}");
        }
        // Replays: the second good step grows the scale back to 1e38, at which the gradient of
        // w[1] (about -3.6e38) overflows again: skipped and halved; two good steps grow it.
        for _ in 0..4 {
            call(&mut scales);
        }
        assert_eq!(scales, [5e37, 5e37, 1e38, 5e37, 5e37, 1e38]);
    });
}

/// An Adam step with realized gradients: one kernel advances each parameter's state (m, v and
/// the powers of b1, b2 share one buffer), one updates the parameter.
#[test]
fn adam_step_kernel_count() {
    Context::new().dev(Device::Interp).training(true).run(|| {
        let params = params_with_grads();
        let mut opt = Adam::new(params.clone()).unwrap().lr(0.01);
        opt.step().unwrap(); // the first step also writes the learning rate set above
        let before = GlobalCounters::kernel_count();
        opt.step().unwrap();
        let n = GlobalCounters::kernel_count() - before;
        println!(
            "Adam step: {n} kernels for {} parameters",
            opt.params().len()
        );
        assert!(
            n <= 2 * opt.params().len() as u64,
            "Adam step took {n} kernels"
        );
    });
}

/// The update can join the forward/backward schedule: loss and step realized together.
#[test]
fn step_realizes_with_the_loss() {
    Context::new().dev(Device::Interp).training(true).run(|| {
        let w = Tensor::from_vec(vec![0.5f32, -0.5, 1.0, 2.0], &[2, 2]).unwrap();
        w.set_requires_grad(true);
        let x = Tensor::from_vec(vec![1.0f32, 2.0], &[1, 2]).unwrap();
        let mut opt = AdamW::new(vec![w.clone()]).unwrap().lr(0.1);
        let mut losses = vec![];
        for _ in 0..5 {
            opt.zero_grad();
            let loss = x
                .matmul(&w)
                .unwrap()
                .square()
                .unwrap()
                .sum((), false)
                .unwrap();
            loss.backward().unwrap();
            let mut ts = opt.schedule_step().unwrap();
            ts.push(loss.clone());
            Tensor::realize_all(&ts.iter().collect::<Vec<_>>()).unwrap();
            losses.push(loss.item::<f32>().unwrap());
        }
        assert!(
            losses.windows(2).all(|w| w[1] < w[0]),
            "loss does not fall: {losses:?}"
        );
    });
}

/// A 2-layer MLP training step (forward, backward, update as one schedule): Sgd's update fuses
/// into each weight's gradient kernel exactly as the hand-written update of tests/fusion.rs does;
/// momentum and Adam add a bounded number of kernels per weight.
#[test]
fn mlp_step_kernel_counts() {
    /// Kernels of the second training step; `None`: the hand-written update `w -= 0.1 * grad`.
    fn count(make: Option<Make>) -> usize {
        Context::new().dev(Device::Interp).training(true).run(|| {
            Tensor::manual_seed(1);
            let w1 = Tensor::uniform(&[16, 32], -0.3, 0.3)
                .unwrap()
                .realize()
                .unwrap();
            let w2 = Tensor::uniform(&[32, 10], -0.3, 0.3)
                .unwrap()
                .realize()
                .unwrap();
            let x = Tensor::from_vec((0..128).map(|i| (i % 7) as f32 / 7.0).collect(), &[8, 16])
                .unwrap();
            let y = Tensor::from_vec((0..8).collect::<Vec<i32>>(), &[8]).unwrap();
            for w in [&w1, &w2] {
                w.set_requires_grad(true);
            }
            let mut opt = make.map(|m| m(vec![w1.clone(), w2.clone()]));
            let mut n = 0;
            for _ in 0..2 {
                for w in [&w1, &w2] {
                    w.set_grad(None);
                }
                let loss = x
                    .matmul(&w1)
                    .unwrap()
                    .relu()
                    .unwrap()
                    .matmul(&w2)
                    .unwrap()
                    .sparse_categorical_crossentropy(&y, &Default::default())
                    .unwrap();
                loss.backward().unwrap();
                let mut ts = match &mut opt {
                    Some(o) => o.schedule_step().unwrap(),
                    None => [&w1, &w2]
                        .map(|w| {
                            let g = w.grad().unwrap().detach();
                            w.assign(&w.detach().sub(g.mul(0.1).unwrap()).unwrap())
                                .unwrap()
                        })
                        .to_vec(),
                };
                ts.push(loss);
                let refs: Vec<&Tensor> = ts.iter().collect();
                n = wgrad::Tensor::schedule_all(&refs).unwrap().len();
                Tensor::realize_all(&refs).unwrap();
            }
            n
        })
    }
    let manual = count(None);
    let sgd = count(Some(|p| Box::new(Sgd::new(p).unwrap().lr(0.1))));
    let momentum = count(Some(|p| Box::new(Sgd::new(p).unwrap().momentum(0.9))));
    let adam = count(Some(|p| Box::new(Adam::new(p).unwrap())));
    println!(
        "MLP training step kernels: hand-written SGD {manual}, Sgd {sgd}, Sgd+momentum \
         {momentum}, Adam {adam}"
    );
    assert_eq!(
        sgd, manual,
        "Sgd's step does not fuse like the hand-written update"
    );
    // One more kernel per weight for the momentum buffer; two for Adam (its state, and the
    // gradient, which the state update reads twice).
    assert!(
        momentum <= manual + 2,
        "Sgd+momentum step took {momentum} kernels"
    );
    assert!(adam <= manual + 4, "Adam step took {adam} kernels");
}

/// Optimizer steps captured by TinyJit and replayed (without running the Rust step code) give the
/// same parameters as eager steps: every piece of state lives in device buffers advanced by the
/// recorded kernels. A learning-rate change between replays is seen by the replay.
#[test]
fn jitted_steps_equal_eager() {
    let makers: [(&str, Make); 4] = [
        ("SGD+momentum", |p| {
            Box::new(Sgd::new(p).unwrap().lr(0.05).momentum(0.9).nesterov(true))
        }),
        ("Adam", |p| Box::new(Adam::new(p).unwrap().lr(0.01))),
        ("LAMB", |p| Box::new(Lamb::new(p).unwrap().lr(0.01))),
        ("Muon", |p| Box::new(Muon::new(p).unwrap())),
    ];
    fn train(make: Make, jit: bool) -> Vec<Vec<f32>> {
        Context::new().dev(Device::Interp).training(true).run(|| {
            let w1 = Tensor::from_vec(
                (0..24).map(|i| (i % 5) as f32 / 5.0 - 0.4).collect(),
                &[4, 6],
            )
            .unwrap();
            let w2 = Tensor::from_vec((0..6).map(|i| i as f32 / 10.0).collect(), &[6]).unwrap();
            for w in [&w1, &w2] {
                w.set_requires_grad(true);
            }
            let x =
                Tensor::from_vec((0..12).map(|i| (i % 3) as f32 - 1.0).collect(), &[3, 4]).unwrap();
            let mut opt = make(vec![w1.clone(), w2.clone()]);
            let step = |opt: &mut Box<dyn Optimizer>| -> wgrad::Result<Vec<Tensor>> {
                opt.zero_grad();
                let loss = x.matmul(&w1)?.tanh()?.add(&w2)?.square()?.sum((), false)?;
                loss.backward()?;
                let mut ts = opt.schedule_step()?;
                ts.push(loss.clone());
                Tensor::realize_all(&ts.iter().collect::<Vec<_>>())?;
                Ok(vec![loss])
            };
            let mut out = vec![];
            if jit {
                let opt_cell = std::cell::RefCell::new(opt);
                let mut f = TinyJit::new(|_: &[Tensor]| step(&mut opt_cell.borrow_mut()));
                for i in 0..8 {
                    if i == 5 {
                        opt_cell.borrow_mut().set_lr(0.003).unwrap();
                    }
                    f.call(&[]).unwrap();
                    out.push(w1.to_vec::<f32>().unwrap());
                }
                assert!(f.launches() > 0, "nothing captured");
            } else {
                for i in 0..8 {
                    if i == 5 {
                        opt.set_lr(0.003).unwrap();
                    }
                    step(&mut opt).unwrap();
                    out.push(w1.to_vec::<f32>().unwrap());
                }
            }
            out
        })
    }
    for (name, make) in makers {
        let (eager, jitted) = (train(make, false), train(make, true));
        for (i, (e, j)) in eager.iter().zip(&jitted).enumerate() {
            for (a, b) in e.iter().zip(j) {
                assert!(
                    (a - b).abs() <= 1e-6,
                    "{name} step {i}: eager {e:?} vs jit {j:?}"
                );
            }
        }
        assert_ne!(eager[4], eager[7], "{name}: parameters stopped changing");
    }
}

/// `opt.step()` writes the parameters in place; a loss built before it and read afterwards is
/// still the loss of the weights the step started from (it is realized in the step's schedule,
/// before the write), as in the tutorial's `optim.step(); return loss`.
#[test]
fn loss_read_after_step_sees_the_old_weights() {
    for dev in [Device::Interp, Device::Cpu] {
        Context::new().dev(dev).training(true).run(|| {
            let w = Tensor::from_vec(vec![1.0f32, 2.0, 3.0], &[3]).unwrap();
            w.set_requires_grad(true);
            let mut opt = Sgd::new(vec![w.clone()]).unwrap().lr(0.1);
            for (want_loss, want_w) in [(14.0, 0.8f32), (8.96, 0.64)] {
                opt.zero_grad();
                let loss = w.mul(&w).unwrap().sum((), false).unwrap();
                loss.backward().unwrap();
                opt.step().unwrap();
                let l = loss.item::<f32>().unwrap();
                assert!(
                    (l - want_loss).abs() < 1e-4,
                    "{dev}: loss {l}, want {want_loss}"
                );
                let got = w.to_vec::<f32>().unwrap()[0];
                assert!(
                    (got - want_w).abs() < 1e-6,
                    "{dev}: w[0] {got}, want {want_w}"
                );
            }
        });
    }
}

/// Two parameters whose updates read each other (each gradient uses the other parameter): the
/// in-place writes cannot both go first, so the values are computed before either write.
#[test]
fn updates_that_read_each_other() {
    for dev in [Device::Interp, Device::Cpu] {
        Context::new().dev(dev).training(true).run(|| {
            let a = Tensor::from_vec(vec![1.0f32, 2.0, 3.0], &[3]).unwrap();
            let b = Tensor::from_vec(vec![1.0f32, 1.0, 1.0], &[3]).unwrap();
            a.set_requires_grad(true);
            b.set_requires_grad(true);
            let x = Tensor::from_vec(vec![1.0f32, -1.0, 2.0], &[3]).unwrap();
            let mut opt = Sgd::new(vec![a.clone(), b.clone()]).unwrap().lr(0.1);
            opt.zero_grad();
            let l = x
                .mul(&a)
                .unwrap()
                .relu()
                .unwrap()
                .mul(&b)
                .unwrap()
                .sum((), false)
                .unwrap();
            l.backward().unwrap();
            opt.step().unwrap();
            // dl/da = x * (x*a > 0) * b = [1, 0, 2]; dl/db = relu(x*a) = [1, 0, 6].
            let close = |got: Vec<f32>, want: [f32; 3]| {
                got.iter().zip(want).all(|(g, w)| (g - w).abs() < 1e-6)
            };
            let (ga, gb) = (a.to_vec::<f32>().unwrap(), b.to_vec::<f32>().unwrap());
            assert!(close(ga.clone(), [0.9, 2.0, 2.8]), "{dev}: a = {ga:?}");
            assert!(close(gb.clone(), [0.9, 1.0, 0.4]), "{dev}: b = {gb:?}");
            assert_eq!(l.item::<f32>().unwrap(), 7.0, "{dev}");
        });
    }
}

// ------------------------------------------------------------------------------------ h-conv:
// schedules, groups, clipping

fn fixture() -> Value {
    serde_json::from_str(FIXTURE).expect("fixture: bad JSON")
}

fn schedule_of(v: &Value) -> LrSchedule {
    let f = |k: &str| {
        v[k].as_f64()
            .unwrap_or_else(|| panic!("fixture: schedule {k}"))
    };
    let n = |k: &str| f(k) as usize;
    match v["kind"].as_str().expect("fixture: schedule kind") {
        "linear" => LrSchedule::Linear {
            start_factor: f("start_factor"),
            end_factor: f("end_factor"),
            total_steps: n("total_steps"),
        },
        "step" => LrSchedule::Step {
            step_size: n("step_size"),
            gamma: f("gamma"),
        },
        "exponential" => LrSchedule::Exponential { gamma: f("gamma") },
        "cosine" => LrSchedule::Cosine {
            warmup_steps: n("warmup_steps"),
            start_factor: f("start_factor"),
            total_steps: n("total_steps"),
            min_lr: f("min_lr"),
        },
        "onecycle" => LrSchedule::OneCycle {
            total_steps: n("total_steps"),
            pct_start: f("pct_start"),
            div_factor: f("div_factor"),
            final_div_factor: f("final_div_factor"),
        },
        other => panic!("fixture: unknown schedule {other}"),
    }
}

/// SGD on a parameter with gradient 1 under each schedule: the learning rate of every step (read
/// from the device after it) is torch's, so the parameter is minus their running sum; the host
/// formula gives the same rates.
#[test]
fn schedules_match_pytorch() {
    let root = fixture();
    let cases = root["schedules"].as_array().expect("fixture: schedules");
    assert!(cases.len() >= 6);
    for dev in [Device::Interp, Device::Cpu] {
        for c in cases {
            let name = c["name"].as_str().unwrap();
            let (base, schedule) = (c["lr"].as_f64().unwrap(), schedule_of(&c["schedule"]));
            let lrs: Vec<f64> = c["lrs"]
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_f64().unwrap())
                .collect();
            Context::new().dev(dev).training(true).run(|| {
                let p = Tensor::zeros(&[3]).unwrap().contiguous().realize().unwrap();
                p.set_requires_grad(true);
                let mut opt = Sgd::new(vec![p.clone()]).unwrap().lr(base);
                opt.set_schedule(schedule).unwrap();
                let mut sum = 0.0;
                for (k, &want) in lrs.iter().enumerate() {
                    let host = schedule.lr_at(base, k);
                    assert!(
                        (host - want).abs() <= 1e-12 + 1e-9 * want,
                        "{name}: host lr of step {k} is {host}, torch {want}"
                    );
                    p.set_grad(Some(Tensor::ones(&[3]).unwrap()));
                    opt.step().unwrap();
                    let got = opt.current_lr().unwrap().item::<f32>().unwrap() as f64;
                    assert!(
                        (got - want).abs() <= 1e-7 + 2e-6 * want,
                        "{name} on {dev}: lr of step {k} is {got}, torch {want}"
                    );
                    sum += want;
                    let v = p.to_vec::<f32>().unwrap()[0] as f64;
                    assert!(
                        (v + sum).abs() <= 1e-6 + 1e-5 * sum,
                        "{name} on {dev}: step {k}: parameter {v}, want {}",
                        -sum
                    );
                }
            });
        }
    }
}

#[test]
fn clipping_matches_pytorch() {
    let root = fixture();
    let cases = root["clipping"].as_array().expect("fixture: clipping");
    for dev in [Device::Interp, Device::Cpu] {
        for c in cases {
            let name = c["name"].as_str().unwrap();
            let norm_type = c["norm_type"].as_f64().unwrap_or(f64::INFINITY);
            Context::new().dev(dev).run(|| {
                let mut params = vec![];
                for (shape, g) in c["shapes"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .zip(c["grads"].as_array().unwrap())
                {
                    let shape: Vec<usize> = shape
                        .as_array()
                        .unwrap()
                        .iter()
                        .map(|d| d.as_u64().unwrap() as usize)
                        .collect();
                    let p = Tensor::zeros(&shape).unwrap();
                    p.set_requires_grad(true);
                    p.set_grad(Some(Tensor::from_slice(&floats(g), &shape).unwrap()));
                    params.push(p);
                }
                // A parameter without a gradient is skipped.
                let frozen = Tensor::zeros(&[2]).unwrap();
                frozen.set_requires_grad(true);
                params.push(frozen);
                let norm =
                    clip_grad_norm(&params, c["max_norm"].as_f64().unwrap(), norm_type).unwrap();
                let got = norm.item::<f32>().unwrap();
                check(
                    &format!("{name} on {dev}: norm"),
                    &[got],
                    &[c["norm"].as_f64().unwrap() as f32],
                )
                .unwrap();
                for (i, want) in c["clipped"].as_array().unwrap().iter().enumerate() {
                    let g = params[i].grad().unwrap().to_vec::<f32>().unwrap();
                    check(&format!("{name} on {dev}: gradient {i}"), &g, &floats(want)).unwrap();
                }
                assert!(params[3].grad().is_none());
            });
        }
    }
    Context::new().dev(Device::Interp).run(|| {
        assert_eq!(
            clip_grad_norm(&[], 1.0, 2.0)
                .unwrap()
                .item::<f32>()
                .unwrap(),
            0.0
        );
        for (max, p) in [(f64::NAN, 2.0), (-1.0, 2.0), (1.0, 0.0), (1.0, f64::NAN)] {
            let e = clip_grad_norm(&[], max, p).unwrap_err();
            assert!(e.msg.contains("clip_grad_norm"), "{e}");
        }
    });
}

/// Muon for the matrix and AdamW for the vector, stepped as a group, give what the two give
/// stepped one after the other; a parameter in two members, or a member's parameter without a
/// gradient, is an error before anything is updated.
#[test]
fn optimizer_group_steps_its_members() {
    Context::new().dev(Device::Interp).training(true).run(|| {
        let run = |grouped: bool| -> Vec<Vec<f32>> {
            let ps = params_with_grads();
            let muon: Box<dyn Optimizer> = Box::new(Muon::new(vec![ps[0].clone()]).unwrap());
            let adamw: Box<dyn Optimizer> =
                Box::new(AdamW::new(vec![ps[1].clone()]).unwrap().lr(0.01));
            if grouped {
                let mut g = OptimizerGroup::new(vec![muon, adamw]).unwrap();
                assert_eq!((g.len(), g.params().len()), (2, 2));
                assert_eq!(g.learning_rate(), 0.02);
                for _ in 0..3 {
                    g.step().unwrap();
                }
                assert!(g.get(1).unwrap().params()[0].same(&ps[1]));
                assert_eq!(g.state().len(), 4);
            } else {
                let (mut a, mut b) = (muon, adamw);
                for _ in 0..3 {
                    a.step().unwrap();
                    b.step().unwrap();
                }
            }
            ps.iter().map(|p| p.to_vec::<f32>().unwrap()).collect()
        };
        assert_eq!(run(true), run(false));

        let ps = params_with_grads();
        let twice = OptimizerGroup::new(vec![
            Box::new(Sgd::new(ps.clone()).unwrap()),
            Box::new(Adam::new(vec![ps[1].clone()]).unwrap()),
        ]);
        assert!(twice.err().unwrap().msg.contains("also in"));
        assert!(OptimizerGroup::new(vec![]).is_err());
        let before: Vec<Vec<f32>> = ps.iter().map(|p| p.to_vec::<f32>().unwrap()).collect();
        let mut g = OptimizerGroup::new(vec![
            Box::new(Sgd::new(vec![ps[0].clone()]).unwrap().lr(0.1)),
            Box::new(Adam::new(vec![ps[1].clone()]).unwrap()),
        ])
        .unwrap();
        ps[1].set_grad(None);
        let e = g.step().unwrap_err();
        assert!(
            e.msg.contains("OptimizerGroup") && e.msg.contains("backward()"),
            "{e}"
        );
        let after: Vec<Vec<f32>> = ps.iter().map(|p| p.to_vec::<f32>().unwrap()).collect();
        assert_eq!(before, after, "a member stepped although the group failed");
        // A schedule for the group applies to each member's own learning rate.
        ps[1].set_grad(Some(ps[1].ones_like()));
        g.set_schedule(LrSchedule::Exponential { gamma: 0.5 })
            .unwrap();
        g.step().unwrap();
        g.step().unwrap();
        let lr1 = g
            .get(1)
            .unwrap()
            .current_lr()
            .unwrap()
            .item::<f32>()
            .unwrap();
        assert_eq!(
            (g.current_lr().unwrap().item::<f32>().unwrap(), lr1),
            (0.05, 0.0005)
        );
    });
}

#[test]
fn schedules_are_checked_and_can_be_switched() {
    Context::new().dev(Device::Interp).training(true).run(|| {
        let ps = params_with_grads();
        let mut opt = Adam::new(ps.clone()).unwrap();
        let bad = [
            LrSchedule::Step {
                step_size: 0,
                gamma: 0.5,
            },
            LrSchedule::Exponential { gamma: f64::NAN },
            LrSchedule::Linear {
                start_factor: 0.1,
                end_factor: 1.0,
                total_steps: 0,
            },
            LrSchedule::Cosine {
                warmup_steps: 5,
                start_factor: 0.1,
                total_steps: 5,
                min_lr: 0.0,
            },
            LrSchedule::OneCycle {
                total_steps: 10,
                pct_start: 0.1,
                div_factor: 25.0,
                final_div_factor: 1e4,
            },
            LrSchedule::OneCycle {
                total_steps: 10,
                pct_start: 0.5,
                div_factor: 0.0,
                final_div_factor: 1e4,
            },
        ];
        for s in bad {
            let e = opt.set_schedule(s).unwrap_err();
            assert!(e.msg.contains("Adam: schedule"), "{e}");
        }
        let n = opt.state().len();
        opt.set_schedule(LrSchedule::Step {
            step_size: 2,
            gamma: 0.1,
        })
        .unwrap();
        assert_eq!(
            opt.state().len(),
            n + 2,
            "the schedule's state is part of the optimizer's"
        );
        assert!((opt.current_lr().unwrap().item::<f32>().unwrap() - 0.001).abs() < 1e-9);
        for _ in 0..3 {
            opt.step().unwrap();
        }
        assert!((opt.current_lr().unwrap().item::<f32>().unwrap() - 1e-4).abs() < 1e-10);
        // A new base rate scales the schedule; a new schedule restarts its count; Constant ends it.
        opt.set_lr(0.01).unwrap();
        opt.step().unwrap();
        assert!((opt.current_lr().unwrap().item::<f32>().unwrap() - 1e-3).abs() < 1e-9);
        opt.set_schedule(LrSchedule::Exponential { gamma: 0.5 })
            .unwrap();
        opt.step().unwrap();
        assert_eq!(opt.current_lr().unwrap().item::<f32>().unwrap(), 0.01);
        opt.set_schedule(LrSchedule::Constant).unwrap();
        assert_eq!(opt.state().len(), n);
        opt.step().unwrap();
        assert_eq!(opt.current_lr().unwrap().item::<f32>().unwrap(), 0.01);
    });
}

/// Steps with a schedule, with a group and with gradient clipping, captured by TinyJit and
/// replayed, give the eager steps' parameters, and the replayed learning rates follow the
/// schedule: the step counter, the rate and the clipping live on the device.
#[test]
fn jitted_schedules_groups_and_clipping_equal_eager() {
    type MakeGroup = fn(&Tensor, &Tensor) -> Box<dyn Optimizer>;
    let setups: [(&str, MakeGroup, LrSchedule, Option<f64>); 3] = [
        (
            "Adam, one cycle, clipped",
            |a, b| Box::new(Adam::new(vec![a.clone(), b.clone()]).unwrap().lr(0.05)),
            LrSchedule::OneCycle {
                total_steps: 12,
                pct_start: 0.3,
                div_factor: 25.0,
                final_div_factor: 1e4,
            },
            Some(0.5),
        ),
        (
            "SGD+momentum, cosine with warmup",
            |a, b| {
                Box::new(
                    Sgd::new(vec![a.clone(), b.clone()])
                        .unwrap()
                        .lr(0.05)
                        .momentum(0.9),
                )
            },
            LrSchedule::Cosine {
                warmup_steps: 3,
                start_factor: 0.2,
                total_steps: 10,
                min_lr: 1e-3,
            },
            None,
        ),
        (
            "Muon + AdamW group, step decay, clipped",
            |a, b| {
                Box::new(
                    OptimizerGroup::new(vec![
                        Box::new(Muon::new(vec![a.clone()]).unwrap()),
                        Box::new(AdamW::new(vec![b.clone()]).unwrap().lr(0.01)),
                    ])
                    .unwrap(),
                )
            },
            LrSchedule::Step {
                step_size: 3,
                gamma: 0.5,
            },
            Some(1.0),
        ),
    ];
    type Trace = Vec<(Vec<f32>, Vec<f32>, f32, f32)>;
    fn train(make: MakeGroup, schedule: LrSchedule, clip: Option<f64>, jit: bool) -> Trace {
        Context::new().dev(Device::Interp).training(true).run(|| {
            let w1 = Tensor::from_vec(
                (0..24).map(|i| (i % 5) as f32 / 5.0 - 0.4).collect(),
                &[4, 6],
            )
            .unwrap();
            let w2 = Tensor::from_vec((0..6).map(|i| i as f32 / 10.0).collect(), &[6]).unwrap();
            for w in [&w1, &w2] {
                w.set_requires_grad(true);
            }
            let x =
                Tensor::from_vec((0..12).map(|i| (i % 3) as f32 - 1.0).collect(), &[3, 4]).unwrap();
            let mut opt = make(&w1, &w2);
            opt.set_schedule(schedule).unwrap();
            let step = |opt: &mut Box<dyn Optimizer>| -> wgrad::Result<Vec<Tensor>> {
                opt.zero_grad();
                let loss = x.matmul(&w1)?.tanh()?.add(&w2)?.square()?.sum((), false)?;
                loss.backward()?;
                let norm = match clip {
                    Some(m) => clip_grad_norm(opt.params(), m, 2.0)?,
                    None => loss.clone(),
                };
                let mut ts = opt.schedule_step()?;
                ts.extend([loss, norm.clone()]);
                Tensor::realize_all(&ts.iter().collect::<Vec<_>>())?;
                Ok(vec![norm])
            };
            let mut out = vec![];
            let record = |opt: &dyn Optimizer, norm: &Tensor, out: &mut Trace| {
                out.push((
                    w1.to_vec::<f32>().unwrap(),
                    w2.to_vec::<f32>().unwrap(),
                    opt.current_lr().unwrap().item::<f32>().unwrap(),
                    norm.item::<f32>().unwrap(),
                ));
            };
            if jit {
                let cell = std::cell::RefCell::new(opt);
                let mut f = TinyJit::new(|_: &[Tensor]| step(&mut cell.borrow_mut()));
                for _ in 0..10 {
                    let norm = f.call(&[]).unwrap().remove(0);
                    record(cell.borrow().as_ref(), &norm, &mut out);
                }
                assert!(f.launches() > 0, "nothing captured");
            } else {
                for _ in 0..10 {
                    let norm = step(&mut opt).unwrap().remove(0);
                    record(opt.as_ref(), &norm, &mut out);
                }
            }
            out
        })
    }
    for (name, make, schedule, clip) in setups {
        let (eager, jitted) = (
            train(make, schedule, clip, false),
            train(make, schedule, clip, true),
        );
        for (k, (e, j)) in eager.iter().zip(&jitted).enumerate() {
            let close = |a: &[f32], b: &[f32]| a.iter().zip(b).all(|(x, y)| (x - y).abs() <= 1e-6);
            assert!(
                close(&e.0, &j.0) && close(&e.1, &j.1),
                "{name} step {k}: eager {e:?} vs jit {j:?}"
            );
            assert!(
                (e.2 - j.2).abs() <= 1e-9 && (e.3 - j.3).abs() <= 1e-5,
                "{name} step {k}: {e:?} vs {j:?}"
            );
            // The first member's base rate is the optimizer's (Adam 0.05, SGD 0.05, Muon 0.02).
            let base = if name.starts_with("Muon") { 0.02 } else { 0.05 };
            let want = schedule.lr_at(base, k) as f32;
            assert!(
                (j.2 - want).abs() <= 1e-7 + 1e-5 * want,
                "{name} step {k}: lr {} want {want}",
                j.2
            );
        }
        if clip.is_some() {
            assert!(
                jitted.iter().any(|s| s.3 > clip.unwrap() as f32),
                "{name}: the clipping never bit"
            );
        }
        assert_ne!(
            eager[6].0, eager[9].0,
            "{name}: parameters stopped changing"
        );
    }
}

/// With one parameter and a constant gradient of 1, Adam's bias-corrected moments are exactly
/// 1, so every step moves the parameter by `lr / (1 + eps)`. The corrections `1 - b^t` kept
/// as products `b^t` and subtracted from 1 in float32 made the steps short by 6.6e-6, 1.0e-5,
/// 1.4e-5 ... (relative); PyTorch's are within 2e-7.
#[test]
fn adam_steps_are_exact_for_a_constant_gradient() {
    for dev in common::devices() {
        Context::new().dev(dev).training(true).run(|| {
            let lr = 1.0 / 1024.0; // positions k * lr are exact floats: only the moves are measured
            let p = Tensor::zeros(&[1]).unwrap().contiguous().realize().unwrap();
            p.set_requires_grad(true);
            let mut opt = Adam::new(vec![p.clone()]).unwrap().lr(lr);
            let exact = lr / (1.0 + 1e-8);
            let mut prev = 0.0f64;
            for k in 1..=10 {
                opt.zero_grad();
                p.sum((), false).unwrap().backward().unwrap();
                opt.step().unwrap();
                let now = p.to_vec::<f32>().unwrap()[0] as f64;
                let rel = ((prev - now) - exact).abs() / exact;
                assert!(
                    rel < 5e-7,
                    "{dev}: step {k} moved {} (relative error {rel:e})",
                    prev - now
                );
                prev = now;
            }
        });
    }
}

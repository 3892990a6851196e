//! Benchmark: one training step of the tutorial's CNN at batch 128 (forward, backward and an SGD
//! update, realized as one schedule) on random data, not jitted and jitted. A step is timed until
//! its loss is read back, so asynchronous backends (WebGPU, CUDA) are timed to completion. Prints
//! ms per step and kernels per step; on WEBGPU also dispatches, submits and host encoding time per
//! replayed step, on CUDA kernel and graph launches per step. `DEV` picks the device, `BS` the
//! batch, `STEPS` the timed steps.

use std::cell::RefCell;
use std::time::Instant;
use wgrad::nn::optim::{Optimizer, Sgd};
use wgrad::{Context, CrossEntropyOpts, DType, Device, GlobalCounters, Result, Tensor, TinyJit};

#[path = "common/model.rs"]
mod model;
use model::Model;

fn env(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

/// GPU counters where the device has them: (what is counted, its value now), and the host
/// time spent encoding the last graph replay (ns).
fn gpu_counters() -> Option<(Vec<(&'static str, u64)>, u64)> {
    #[cfg(feature = "wgpu")]
    if Device::default() == Device::Wgpu {
        let s = wgrad::runtime::wgpu::stats();
        return Some((
            vec![("dispatches", s.dispatches), ("submits", s.submits)],
            s.last_replay_encode_ns,
        ));
    }
    #[cfg(feature = "cuda")]
    if Device::default() == Device::Cuda {
        let s = wgrad::runtime::cuda::stats();
        return Some((
            vec![
                ("kernel launches", s.launches),
                ("graph launches", s.graph_launches),
                ("allocations", s.allocs),
            ],
            0,
        ));
    }
    None
}

fn main() -> Result<()> {
    let bs = env("BS", 128);
    let steps = env("STEPS", 10);
    Tensor::manual_seed(42);
    let model = Model::new()?;
    let opt = RefCell::new(Sgd::new(wgrad::nn::state::get_parameters(&model))?.lr(0.01));
    let x_all = Tensor::randint(&[1024, 1, 28, 28], 0, 256)?
        .cast(DType::U8)?
        .realize()?;
    let y_all = Tensor::randint(&[1024], 0, 10)?.realize()?;
    let step = || -> Result<Tensor> {
        Context::new().training(true).run(|| {
            let samples = Tensor::randint(&[bs], 0, 1024)?;
            let x = x_all.index(&samples)?.cast(DType::F32)?;
            let y = y_all.index(&samples)?;
            let mut opt = opt.borrow_mut();
            opt.zero_grad();
            let loss = model
                .forward(&x)?
                .sparse_categorical_crossentropy(&y, &CrossEntropyOpts::default())?;
            loss.backward()?;
            let mut all = opt.schedule_step()?;
            all.push(loss.clone());
            Tensor::realize_all(&all.iter().collect::<Vec<_>>())?;
            Ok(loss)
        })
    };
    let mut jit = TinyJit::new(|_: &[Tensor]| Ok(vec![step()?]));
    let mut report = vec![];
    let mut first = None;
    for jitted in [false, true] {
        let mut times = vec![];
        let mut kernels = 0;
        let mut gpu = vec![];
        for i in 0..steps + 3 {
            let t0 = Instant::now();
            let k0 = GlobalCounters::kernel_count();
            let g0 = gpu_counters();
            let loss = if jitted {
                jit.call(&[])?.remove(0)
            } else {
                step()?
            };
            kernels = GlobalCounters::kernel_count() - k0;
            let g1 = gpu_counters();
            let loss = loss.item::<f32>()?;
            let ms = t0.elapsed().as_secs_f64() * 1e3;
            if i == 0 {
                // The CPU backend compiled this step's new kernels quickly; the timed steps
                // run their optimized build (made on a background thread).
                wgrad::runtime::finish_compiles();
                first.get_or_insert((ms / 1e3, t0.elapsed().as_secs_f64()));
            }
            if i >= 3 {
                times.push(ms);
                if let (Some(a), Some(b)) = (&g0, &g1) {
                    let per_step: Vec<(&str, u64)> =
                        b.0.iter()
                            .zip(&a.0)
                            .map(|(b, a)| (b.0, b.1 - a.1))
                            .collect();
                    gpu.push((per_step, b.1));
                }
            }
            eprintln!(
                "{} step {i:3} loss {loss:.4} {ms:9.3} ms {kernels} kernels",
                if jitted { "jit" } else { "eager" }
            );
        }
        let mut line = format!(
            "{}: median {:.3} ms/step, min {:.3} ms, {kernels} kernels/step",
            if jitted { "jitted" } else { "not jitted" },
            median(times.clone()),
            times.iter().cloned().fold(f64::INFINITY, f64::min)
        );
        if let Some((counts, _)) = gpu.last() {
            let counts: Vec<String> = counts.iter().map(|(k, v)| format!("{v} {k}")).collect();
            line += &format!(", {} per step (before the loss is read)", counts.join(", "));
            let enc = median(gpu.iter().map(|g| g.1 as f64 / 1e6).collect());
            if jitted && enc > 0.0 {
                line += &format!(", host encode {enc:.3} ms per replay");
            }
        }
        report.push(line);
    }
    println!("device {} batch {bs}", Device::default());
    if let Some((step, optimized)) = first {
        println!("  first step {step:.2} s (schedule, plan, compile, run), optimized code at {optimized:.2} s");
    }
    for r in report {
        println!("  {r}");
    }
    Ok(())
}

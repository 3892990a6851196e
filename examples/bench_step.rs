//! Benchmark: one training step of the tutorial's CNN at batch 128 (forward, backward and an SGD
//! update, realized as one schedule) on random data, not jitted and jitted. A step is timed until
//! its loss is read back, so asynchronous backends (WebGPU) are timed to completion. Prints ms per
//! step and kernels per step; on WEBGPU also dispatches, submits and host encoding time per
//! replayed step. `DEV` picks the device, `BS` the batch, `STEPS` the timed steps.

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

/// GPU object counters where the device has them: (submits, dispatches, last replay encode ns).
fn gpu_counters() -> Option<(u64, u64, u64)> {
    #[cfg(feature = "wgpu")]
    if Device::default() == Device::Wgpu {
        let s = wgrad::runtime::wgpu::stats();
        return Some((s.submits, s.dispatches, s.last_replay_encode_ns));
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
            if i >= 3 {
                times.push(ms);
                if let (Some(a), Some(b)) = (g0, g1) {
                    gpu.push((b.0 - a.0, b.1 - a.1, b.2));
                }
            }
            eprintln!(
                "{} step {i:3} loss {loss:.4} {ms:8.1} ms {kernels} kernels",
                if jitted { "jit" } else { "eager" }
            );
        }
        let mut line = format!(
            "{}: median {:.1} ms/step, min {:.1} ms, {kernels} kernels/step",
            if jitted { "jitted" } else { "not jitted" },
            median(times.clone()),
            times.iter().cloned().fold(f64::INFINITY, f64::min)
        );
        if let Some(&(submits, dispatches, _)) = gpu.last() {
            line += &format!(", {dispatches} dispatches and {submits} submits per step (before the loss is read)");
            if jitted {
                let enc = median(gpu.iter().map(|g| g.2 as f64 / 1e6).collect());
                line += &format!(", host encode {enc:.3} ms per replay");
            }
        }
        report.push(line);
    }
    println!("device {} batch {bs}", Device::default());
    for r in report {
        println!("  {r}");
    }
    Ok(())
}

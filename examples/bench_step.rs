//! Benchmark: one training step of the tutorial's CNN at batch 128 (forward, backward and a
//! plain SGD update, realized as one schedule) on random data, not jitted and jitted. Prints ms
//! per step and kernels per step. `DEV` picks the device, `BS` the batch, `STEPS` the timed steps.

use std::time::Instant;
use wgrad::{Context, CrossEntropyOpts, DType, GlobalCounters, Result, Tensor, TinyJit};

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

fn main() -> Result<()> {
    let bs = env("BS", 128);
    let steps = env("STEPS", 10);
    Tensor::manual_seed(42);
    let model = Model::new()?;
    let params = wgrad::nn::state::get_parameters(&model);
    let x_all = Tensor::randint(&[1024, 1, 28, 28], 0, 256)?
        .cast(DType::U8)?
        .realize()?;
    let y_all = Tensor::randint(&[1024], 0, 10)?.realize()?;
    let step = || -> Result<Tensor> {
        Context::new().training(true).run(|| {
            let samples = Tensor::randint(&[bs], 0, 1024)?;
            let x = x_all.index(&samples)?.cast(DType::F32)?;
            let y = y_all.index(&samples)?;
            for p in &params {
                p.set_grad(None);
            }
            let loss = model
                .forward(&x)?
                .sparse_categorical_crossentropy(&y, &CrossEntropyOpts::default())?;
            loss.backward()?;
            for p in &params {
                let g = p.grad().expect("gradient").detach();
                p.assign(&p.detach().sub(&g.mul(0.01)?)?)?;
            }
            let mut all: Vec<&Tensor> = params.iter().collect();
            all.push(&loss);
            Tensor::realize_all(&all)?;
            Ok(loss)
        })
    };
    let mut jit = TinyJit::new(|_: &[Tensor]| Ok(vec![step()?]));
    let mut report = vec![];
    for jitted in [false, true] {
        let mut times = vec![];
        let mut kernels = 0;
        for i in 0..steps + 3 {
            let t0 = Instant::now();
            let k0 = GlobalCounters::kernel_count();
            let loss = if jitted {
                jit.call(&[])?.remove(0)
            } else {
                step()?
            };
            kernels = GlobalCounters::kernel_count() - k0;
            let ms = t0.elapsed().as_secs_f64() * 1e3;
            let loss = loss.item::<f32>()?;
            if i >= 3 {
                times.push(ms);
            }
            eprintln!(
                "{} step {i:3} loss {loss:.4} {ms:8.1} ms {kernels} kernels",
                if jitted { "jit" } else { "eager" }
            );
        }
        report.push(format!(
            "{}: median {:.1} ms/step, min {:.1} ms, {kernels} kernels/step",
            if jitted { "jitted" } else { "not jitted" },
            median(times.clone()),
            times.iter().cloned().fold(f64::INFINITY, f64::min)
        ));
    }
    println!("device {} batch {bs}", wgrad::Device::default());
    for r in report {
        println!("  {r}");
    }
    Ok(())
}

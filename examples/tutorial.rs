//! The tutorial's model (Conv2d(1,32,3) → relu → max_pool2d(2) → Conv2d(32,64,3) → relu →
//! max_pool2d(2) → flatten → dropout(0.5) → Linear(1600,10)) trained for a few steps of
//! `nn::optim::Sgd` on one fixed batch of random images with random labels: the loss falls as
//! the model memorizes it. A quick check that training works on a device, without the data
//! (`examples/mnist.rs` is the tutorial on the real digits). `DEV` picks the device (CPU,
//! INTERP, WEBGPU), `STEPS` the number of steps, `BS` the batch size.

use std::time::Instant;
use wgrad::nn::optim::{Optimizer, Sgd};
use wgrad::{Context, CrossEntropyOpts, DType, Device, Result, Tensor};

#[path = "common/model.rs"]
mod model;
use model::Model;

fn env(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn main() -> Result<()> {
    let (steps, bs) = (env("STEPS", 20), env("BS", 64));
    println!("wgrad on {}", Device::default());
    Tensor::manual_seed(1337);
    let model = Model::new()?;
    let mut opt = Sgd::new(wgrad::nn::state::get_parameters(&model))?.lr(0.05);
    let x = Tensor::rand(&[bs, 1, 28, 28])?.realize()?;
    let y = Tensor::randint(&[bs], 0, 10)?.realize()?;
    let mut first = None;
    let mut last = 0.0;
    for step in 0..steps {
        let t0 = Instant::now();
        let loss = Context::new().training(true).run(|| -> Result<Tensor> {
            opt.zero_grad();
            let loss = model
                .forward(&x)?
                .sparse_categorical_crossentropy(&y, &CrossEntropyOpts::default())?;
            loss.backward()?;
            // The update and the loss realized together: one schedule for the whole step.
            let mut all = opt.schedule_step()?;
            all.push(loss.clone());
            Tensor::realize_all(&all.iter().collect::<Vec<_>>())?;
            Ok(loss)
        })?;
        last = loss.cast(DType::F32)?.item::<f32>()?;
        first.get_or_insert(last);
        println!(
            "step {step:3}  loss {last:.4}  {:7.1} ms",
            t0.elapsed().as_secs_f64() * 1e3
        );
    }
    let first = first.unwrap_or(last);
    println!(
        "loss {first:.4} -> {last:.4} ({})",
        if last < first {
            "falling"
        } else {
            "NOT falling"
        }
    );
    if last >= first {
        std::process::exit(1);
    }
    Ok(())
}

//! The tutorial's model (Conv2d(1,32,3) → relu → max_pool2d(2) → Conv2d(32,64,3) → relu →
//! max_pool2d(2) → flatten → dropout(0.5) → Linear(1600,10)) trained for a few SGD steps on one
//! fixed batch of random images with random labels: the loss falls as the model memorizes it.
//! `DEV` picks the device (CPU, INTERP), `STEPS` the number of steps, `BS` the batch size.

use std::time::Instant;
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
    let params = wgrad::nn::state::get_parameters(&model);
    let x = Tensor::rand(&[bs, 1, 28, 28])?.realize()?;
    let y = Tensor::randint(&[bs], 0, 10)?.realize()?;
    let mut first = None;
    let mut last = 0.0;
    for step in 0..steps {
        let t0 = Instant::now();
        let loss = Context::new().training(true).run(|| -> Result<Tensor> {
            for p in &params {
                p.set_grad(None);
            }
            let loss = model
                .forward(&x)?
                .sparse_categorical_crossentropy(&y, &CrossEntropyOpts::default())?;
            loss.backward()?;
            for p in &params {
                let g = p.grad().expect("every parameter gets a gradient").detach();
                p.assign(&p.detach().sub(&g.mul(0.05)?)?)?;
            }
            let mut all: Vec<&Tensor> = params.iter().collect();
            all.push(&loss);
            Tensor::realize_all(&all)?;
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

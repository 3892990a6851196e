//! The tinygrad MNIST tutorial as a program (like tinygrad's beautiful_mnist): the tutorial's
//! CNN trained with Adam on batches drawn by `randint` inside a jitted step, then evaluated on
//! the test set. Knobs: `BS` (128), `STEPS` (1000), `FASHION=1`, `SGD=1`, `MUON=1`, `DEV`,
//! `JIT` (on unless `JIT=0`), `TARGET_EVAL_ACC_PCT` (exit non-zero below it), `EVAL_EVERY`
//! (200), `WGRAD_DATA` (data directory, default ./data: see scripts/data.sh), `SHARD=N` or
//! `DEVICES=CPU:0,CPU:1` (data-parallel training on several devices);
//! `--save model.safetensors` writes the trained weights.

use std::io::Write;
use std::time::Instant;
use wgrad::nn::datasets::mnist;
use wgrad::nn::optim::{Adam, Muon, Optimizer, Sgd};
use wgrad::nn::state::{get_parameters, get_state_dict, safe_save};
use wgrad::{Device, Result, Tensor, TinyJit};

#[path = "common/model.rs"]
mod model;
use model::{accuracy, train_step_sharded, Model};

fn env(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(default)
}

/// `DEVICES=CPU:0,CPU:1`, or `SHARD=N`: N instances of the default device (none: one device).
fn shard_devices() -> Result<Vec<Device>> {
    if let Ok(list) = std::env::var("DEVICES") {
        return Device::parse_list(&list);
    }
    let n = env("SHARD", 1).min(256) as u8;
    Ok((0..n).map(|i| Device::default().with_index(i)).collect())
}

fn main() -> Result<()> {
    let save = {
        let args: Vec<String> = std::env::args().collect();
        args.iter()
            .position(|a| a == "--save")
            .and_then(|i| args.get(i + 1).cloned())
    };
    let (bs, steps, eval_every) = (
        env("BS", 128),
        env("STEPS", 1000),
        env("EVAL_EVERY", 200).max(1),
    );
    let fashion = env("FASHION", 0) != 0;
    let data = mnist(fashion)?;
    let ntrain = data.x_train.shape()[0];
    eprintln!(
        "wgrad MNIST on {}: {} ({} train, {} test), batch {bs}, {steps} steps",
        Device::default(),
        if fashion { "Fashion-MNIST" } else { "digits" },
        ntrain,
        data.x_test.shape()[0]
    );
    Tensor::manual_seed(env("SEED", 42) as u64);
    let model = Model::new()?;
    let params = get_parameters(&model);
    let devices = shard_devices()?;
    if devices.len() > 1 {
        eprintln!("sharded over {devices:?}: parameters replicated, batch split on axis 0");
        // The tutorial's first line of multi-device training (the second is in the step).
        for p in &params {
            p.shard_(&devices, None)?;
        }
    }
    let mut opt: Box<dyn Optimizer> = if env("SGD", 0) != 0 {
        Box::new(Sgd::new(params)?)
    } else if env("MUON", 0) != 0 {
        Box::new(Muon::new(params)?)
    } else {
        Box::new(Adam::new(params)?)
    };
    let (x_train, y_train) = (&data.x_train, &data.y_train);
    let mut step = TinyJit::new(|_: &[Tensor]| {
        Ok(vec![train_step_sharded(
            &model,
            opt.as_mut(),
            x_train,
            y_train,
            bs,
            &devices,
        )?])
    });
    let mut times = vec![];
    let mut acc = f64::NAN;
    for i in 0..steps {
        let t0 = Instant::now();
        let loss = step.call(&[])?.remove(0).item::<f32>()?;
        let ms = t0.elapsed().as_secs_f64() * 1e3;
        times.push(ms);
        if (i + 1) % eval_every == 0 && i + 1 < steps {
            acc = accuracy(&model, &data.x_test, &data.y_test)?;
        }
        eprint!(
            "\rstep {:5}/{steps}  loss {loss:6.3}  test acc {acc:6.2}%  {ms:7.1} ms/step   ",
            i + 1
        );
        let _ = std::io::stderr().flush();
    }
    eprintln!();
    let acc = accuracy(&model, &data.x_test, &data.y_test)?;
    times.sort_by(|a, b| a.total_cmp(b));
    let median = times.get(times.len() / 2).copied().unwrap_or(f64::NAN);
    if let Some(path) = save {
        safe_save(&get_state_dict(&model), std::path::Path::new(&path))?;
        eprintln!("saved {path}");
    }
    println!("test accuracy {acc:.2}% after {steps} steps, median {median:.1} ms/step");
    if let Ok(t) = std::env::var("TARGET_EVAL_ACC_PCT") {
        if let Ok(target) = t.trim().parse::<f64>() {
            if acc < target {
                eprintln!("test accuracy {acc:.2}% is below the target {target}%");
                std::process::exit(1);
            }
        }
    }
    Ok(())
}

//! The tinygrad MNIST tutorial as a program, and the project's main job (`bash scripts/run.sh`),
//! like tinygrad's beautiful_mnist: the tutorial's CNN trained with Adam on batches drawn by
//! `randint` inside a `TinyJit`-captured step, with a progress bar (loss, ms/step), the test
//! accuracy every `EVAL_EVERY` steps, and the final test accuracy.
//!
//! Knobs: `BS` (128), `STEPS` (1500), `SEED` (42), `FASHION=1`, `SGD=1`, `MUON=1`, `DEV`, `JIT`
//! (on unless `JIT=0`), `EVAL_EVERY` (100), `TARGET_EVAL_ACC_PCT` (exit non-zero below it),
//! `WGRAD_DATA` (data directory, default ./data: see scripts/data.sh), `SHARD=N` or
//! `DEVICES=CPU:0,CPU:1` (data-parallel training on several devices: the tutorial's two lines);
//! `--save model.safetensors` writes the trained weights.

use std::io::{IsTerminal, Write};
use std::time::{Duration, Instant};
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

/// Reading the loss back waits for the step to finish. On the CPU backend a replayed step has
/// finished when `call` returns and the read costs about 10 µs; on WebGPU `call` only queues the
/// step (well under a millisecond), and the read waits for the GPU. So the loop reads the loss
/// only after this much time or this many queued steps (and at every evaluation), and ms/step is
/// the average over each such window.
const SHOW_EVERY: (Duration, usize) = (Duration::from_millis(250), 10);

/// The progress line, redrawn in place on a terminal (and left out when stderr is a file).
fn bar(done: usize, steps: usize, loss: f32, acc: f64, ms: f64) {
    let width = 30;
    let filled = done * width / steps.max(1);
    let eta = (steps - done) as f64 * ms / 1e3;
    let acc = if acc.is_nan() {
        "   -   ".to_string()
    } else {
        format!("{acc:6.2}%")
    };
    eprint!(
        "\r{done:5}/{steps} [{}{}] loss {loss:6.3}  test {acc}  {ms:6.1} ms/step  \
         {:2}:{:02} left ",
        "#".repeat(filled),
        "-".repeat(width - filled),
        eta as u64 / 60,
        eta as u64 % 60
    );
    let _ = std::io::stderr().flush();
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
        env("STEPS", 1500),
        env("EVAL_EVERY", 100).max(1),
    );
    let fashion = env("FASHION", 0) != 0;
    let data = mnist(fashion)?;
    let ntrain = data.x_train.shape()[0];
    let tty = std::io::stderr().is_terminal();
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
    let start = Instant::now();
    let mut acc = f64::NAN;
    // The current window of steps whose time ms/step averages, and the replayed steps' total
    // (the first two calls run and capture the step; evaluations are not counted).
    let (mut window, mut window_start) = (0usize, Instant::now());
    let mut replay = (0usize, Duration::ZERO);
    for i in 1..=steps {
        let out = step.call(&[])?.remove(0);
        window += 1;
        let eval = i % eval_every == 0 || i == steps;
        if eval || i <= 2 || window_start.elapsed() >= SHOW_EVERY.0 || window >= SHOW_EVERY.1 {
            let loss = out.item::<f32>()?;
            let dt = window_start.elapsed();
            let ms = dt.as_secs_f64() * 1e3 / window as f64;
            if i > 2 {
                replay = (replay.0 + window, replay.1 + dt);
            }
            if eval {
                acc = accuracy(&model, &data.x_test, &data.y_test)?;
                if tty {
                    eprint!("\r\x1b[2K");
                }
                eprintln!(
                    "step {i:5}  loss {loss:6.3}  test accuracy {acc:6.2}%  {ms:6.1} ms/step"
                );
            }
            if tty && i < steps {
                bar(i, steps, loss, acc, ms);
            }
            (window, window_start) = (0, Instant::now());
        }
    }
    let per_step = replay.1.as_secs_f64() * 1e3 / replay.0.max(1) as f64;
    if let Some(path) = save {
        safe_save(&get_state_dict(&model), std::path::Path::new(&path))?;
        eprintln!("saved {path}");
    }
    println!(
        "test accuracy {acc:.2}% after {steps} steps ({:.0} s, {per_step:.1} ms per jitted step)",
        start.elapsed().as_secs_f64()
    );
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

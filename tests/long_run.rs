//! Long runs: the tutorial's jitted training step (CNN, Adam, batch 32) on every compiled
//! backend; after warm-up, live tensors, live buffers and their bytes stay exactly flat, and the
//! loss falls. `WGRAD_LONG_STEPS=n` runs more steps and `WGRAD_LONG_DEV=cpu` (or `webgpu`)
//! only one backend (the figures in the README's reliability section); the test command runs
//! the default, shorter run.

#![cfg(not(target_arch = "wasm32"))]

mod common;
#[path = "../examples/common/model.rs"]
mod model;

use model::{train_step, Model};
use wgrad::nn::optim::Adam;
use wgrad::nn::state::get_parameters;
use wgrad::runtime::live_buffers;
use wgrad::tensor::live_tensors;
use wgrad::{Context, Device, Tensor, TinyJit};

const WARMUP: usize = 5;

fn steps(dev: Device) -> usize {
    let default = if dev == Device::Wgpu { 15 } else { 30 };
    std::env::var("WGRAD_LONG_STEPS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

#[test]
fn jitted_training_keeps_memory_flat() {
    // WASM natively is an interpreter of WebAssembly (seconds per step): not here.
    for dev in common::devices()
        .into_iter()
        .filter(|&d| d != Device::Interp && d.name() != "WASM")
        .filter(|d| {
            std::env::var("WGRAD_LONG_DEV").map_or(true, |v| v.eq_ignore_ascii_case(d.name()))
        })
    {
        let n = steps(dev);
        Context::new().dev(dev).run(|| {
            Tensor::manual_seed(21);
            let model = Model::new().unwrap();
            let mut opt = Adam::new(get_parameters(&model)).unwrap();
            let x = Tensor::rand(&[64, 1, 28, 28]).unwrap().realize().unwrap();
            let y = Tensor::randint(&[64], 0, 10).unwrap().realize().unwrap();
            let mut step =
                TinyJit::new(|_: &[Tensor]| Ok(vec![train_step(&model, &mut opt, &x, &y, 32)?]));
            let t0 = std::time::Instant::now();
            let (mut first, mut last, mut flat) = (0.0, 0.0, None);
            for i in 0..n {
                let loss = step.call(&[]).unwrap()[0].item::<f32>().unwrap();
                assert!(loss.is_finite(), "{dev} step {i}: loss {loss}");
                if i == 0 {
                    first = loss;
                }
                last = loss;
                let now = (live_tensors(), live_buffers());
                if n >= 2000 && (i + 1) % 1000 == 0 {
                    eprintln!(
                        "{dev}: step {}: loss {loss:.4}, {now:?} (tensors, (buffers, bytes)), {:.0} s",
                        i + 1,
                        t0.elapsed().as_secs_f64()
                    );
                }
                match flat {
                    None if i + 1 == WARMUP => flat = Some(now),
                    Some(f) => assert_eq!(now, f, "{dev} step {i}: (tensors, (buffers, bytes))"),
                    None => {}
                }
            }
            let (tensors, (buffers, bytes)) = flat.unwrap();
            eprintln!(
                "{dev}: {n} jitted steps at batch 32 in {:.1} s, loss {first:.3} -> {last:.3}; \
                 after warm-up {tensors} live tensors, {buffers} buffers, {bytes} bytes, flat",
                t0.elapsed().as_secs_f64()
            );
            assert!(last < first, "{dev}: loss {first} -> {last}");
        });
    }
}

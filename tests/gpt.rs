//! The GPT of `wgrad::nn::gpt`: 10 AdamW steps (nanoGPT's recipe, its learning-rate schedule
//! on the device, through `TinyJit`) equal PyTorch's losses and final weights
//! (tests/fixtures/gpt_steps.json, made by scripts/gen_gpt_fixture.py); the key/value-cache
//! decode step equals the full forward token by token, across a slide of the window too; a
//! captured decode step replays without running the function again or creating anything on
//! the device; the sampler draws from the distribution top-k and top-p leave.

// Native only: the browser tests are tests/web.rs.
#![cfg(not(target_arch = "wasm32"))]

mod common;

use std::cell::{Cell, RefCell};
use wgrad::nn::gpt::{cosine_schedule, sample, Generator, Gpt, GptConfig, Sampling};
use wgrad::nn::optim::Optimizer;
use wgrad::nn::state::get_state_dict;
use wgrad::{s, Context, Device, GlobalCounters, Tensor, TinyJit};

/// The tests run one at a time: `decode_step_replays_with_no_new_kernels` counts the WebGPU
/// objects created process-wide, which another test running beside it would add to.
fn serial() -> std::sync::MutexGuard<'static, ()> {
    static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

fn fixture() -> serde_json::Value {
    serde_json::from_str(include_str!("fixtures/gpt_steps.json")).unwrap()
}

fn config(fx: &serde_json::Value) -> GptConfig {
    let c = &fx["config"];
    let get = |k: &str| c[k].as_u64().unwrap() as usize;
    GptConfig {
        vocab_size: get("vocab_size"),
        block_size: get("block_size"),
        n_layer: get("n_layer"),
        n_head: get("n_head"),
        n_embd: get("n_embd"),
        bias: c["bias"].as_bool().unwrap(),
    }
}

/// scripts/gen_gpt_fixture.py's initial weights: for the k-th tensor of the state dict, a
/// multiplicative hash of the flat index in +-0.1 (around 1 for LayerNorm weights).
fn det_weights(k: u64, name: &str, n: usize) -> Vec<f32> {
    let ln_weight = name.split('.').any(|p| p.starts_with("ln_")) && name.ends_with("weight");
    let base = if ln_weight { 1.0 } else { 0.0 };
    (0..n as u64)
        .map(|i| {
            let u = ((i + k * 1000003).wrapping_mul(2654435761) % (1 << 32)) as f64 / 4294967296.0;
            (base + 0.1 * (2.0 * u - 1.0)) as f32
        })
        .collect()
}

/// A GPT of `cfg` on the current device with the fixture's initial weights.
fn det_gpt(cfg: GptConfig) -> Gpt {
    let gpt = Gpt::new(cfg).unwrap();
    for (k, (name, t)) in get_state_dict(&gpt).iter().enumerate() {
        let w = Tensor::from_vec(det_weights(k as u64, name, t.numel()), &t.shape()).unwrap();
        t.assign(&w).unwrap().realize().unwrap();
    }
    gpt
}

fn tokens(rows: &[Vec<i32>]) -> Tensor {
    let flat: Vec<i32> = rows.iter().flatten().copied().collect();
    Tensor::from_vec(flat, &[rows.len(), rows[0].len()]).unwrap()
}

#[test]
fn training_steps_equal_pytorch() {
    let _serial = serial();
    let fx = fixture();
    let cfg = config(&fx);
    let floats = |v: &serde_json::Value| -> Vec<f64> {
        v.as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_f64().unwrap())
            .collect()
    };
    let (want_losses, lrs) = (floats(&fx["losses"]), floats(&fx["lr"]));
    for dev in common::devices() {
        Context::new().dev(dev).run(|| {
            let gpt = det_gpt(cfg);
            let mut opt = gpt.configure_optimizers(0.1, 1e-2, (0.9, 0.99)).unwrap();
            // The fixture's learning rates are gpt_torch.lr_at(k, 1e-2, 2, 10).
            opt.set_schedule(cosine_schedule(1e-2, 2, 10)).unwrap();
            let opt = RefCell::new(opt);
            // The step as the example captures it, with the batch as the input.
            let mut step = TinyJit::new(|inputs: &[Tensor]| {
                Context::new().training(true).run(|| {
                    let mut opt = opt.borrow_mut();
                    opt.zero_grad();
                    let loss = gpt.loss(&inputs[0])?;
                    loss.backward()?;
                    opt.step()?;
                    Ok(vec![loss.realize()?])
                })
            });
            let mut worst = 0.0f64;
            for (k, &want) in want_losses.iter().enumerate() {
                let rows: Vec<Vec<i32>> = fx["windows"][k]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|r| floats(r).iter().map(|&t| t as i32).collect())
                    .collect();
                let got = step.call(&[&tokens(&rows)]).unwrap()[0]
                    .item::<f32>()
                    .unwrap() as f64;
                worst = worst.max((got - want).abs());
                let lr = opt.borrow().current_lr().unwrap().item::<f32>().unwrap() as f64;
                assert!(
                    (lr - lrs[k]).abs() <= 1e-6 * lrs[k],
                    "{dev}: step {k}: learning rate {lr}, PyTorch {}",
                    lrs[k]
                );
                assert!(
                    (got - want).abs() <= 1e-5 * want.abs().max(1.0),
                    "{dev}: step {k}: loss {got}, PyTorch {want}"
                );
            }
            let mut worst_w = 0.0f64;
            for (name, t) in get_state_dict(&gpt) {
                let want = floats(&fx["weights"][&name]);
                let got = t.to_vec::<f32>().unwrap();
                assert_eq!(got.len(), want.len(), "{dev}: {name}");
                for (i, (&g, &w)) in got.iter().zip(&want).enumerate() {
                    let d = (g as f64 - w).abs();
                    worst_w = worst_w.max(d);
                    assert!(
                        d <= 1e-5 * w.abs().max(1.0),
                        "{dev}: {name}[{i}] is {g} after 10 steps, PyTorch {w}"
                    );
                }
            }
            eprintln!(
                "{dev}: largest difference from PyTorch: loss {worst:.2e}, weight {worst_w:.2e}"
            );
        });
    }
}

/// Generated token by token with the cache, the logits equal those of the full forward over
/// the context the cache holds: the whole sequence so far, and after the window slides (at
/// `block_size` positions) the last `block_size / 2` tokens before it and what follows.
#[test]
fn kv_cache_decode_equals_the_full_forward() {
    let _serial = serial();
    let cfg = GptConfig {
        bias: true,
        ..config(&fixture())
    };
    let (block, v) = (cfg.block_size, cfg.vocab_size);
    let n = block + block / 2;
    let rows: Vec<Vec<i32>> = (0..2)
        .map(|r| {
            (0..n)
                .map(|i| ((i * 5 + r * 3 + i / 3) % v) as i32)
                .collect()
        })
        .collect();
    for dev in common::devices() {
        Context::new().dev(dev).run(|| {
            let gpt = det_gpt(cfg);
            let mut gen = Generator::new(&gpt, 2, Sampling::default()).unwrap();
            for t in 0..n {
                let (next, logits) = gen.step(&[rows[0][t], rows[1][t]]).unwrap();
                let got = logits.to_vec::<f32>().unwrap();
                let start = if t < block { 0 } else { block - block / 2 };
                assert_eq!(gen.pos(), t + 1 - start, "{dev}: position after token {t}");
                let context: Vec<Vec<i32>> = rows.iter().map(|r| r[start..=t].to_vec()).collect();
                let want = gpt
                    .forward(&tokens(&context))
                    .unwrap()
                    .get(&s![.., -1, ..])
                    .unwrap()
                    .to_vec::<f32>()
                    .unwrap();
                assert_eq!(got.len(), want.len());
                for (i, (g, w)) in got.iter().zip(&want).enumerate() {
                    assert!(
                        (g - w).abs() <= 1e-5 * w.abs().max(1.0),
                        "{dev}: token {t}, logit {i}: decode {g}, forward {w}"
                    );
                }
                for tok in next.to_vec::<i32>().unwrap() {
                    assert!((0..v as i32).contains(&tok), "{dev}: sampled {tok}");
                }
            }
        });
    }
}

/// From the third token on, a decode step (with temperature, top-k and top-p sampling) is a
/// replay: the function does not run (nothing is scheduled or compiled), each token launches
/// the captured kernels and nothing else, and on WebGPU no pipeline, bind group or buffer is
/// created.
#[test]
fn decode_step_replays_with_no_new_kernels() {
    let _serial = serial();
    let cfg = config(&fixture());
    for dev in common::devices() {
        Context::new().dev(dev).run(|| {
            let gpt = det_gpt(cfg);
            let cache = gpt.kv_cache(1).unwrap();
            let runs = Cell::new(0);
            let sampling = Sampling {
                temperature: 0.8,
                top_k: Some(5),
                top_p: Some(0.9),
            };
            let mut step = TinyJit::new(|inputs: &[Tensor]| {
                runs.set(runs.get() + 1);
                Context::new().no_grad(true).run(|| {
                    let logits = gpt.decode(&cache, &inputs[0], &inputs[1])?;
                    Ok(vec![sample(&logits, &sampling)?])
                })
            });
            let mut tok = 1i32;
            let mut seen = vec![];
            for pos in 0..cfg.block_size {
                let t = Tensor::from_vec(vec![tok], &[1, 1]).unwrap();
                let p = Tensor::from_vec(vec![pos as i32], &[1]).unwrap();
                #[cfg(feature = "wgpu")]
                let objects = wgrad::runtime::wgpu::stats();
                let k0 = GlobalCounters::kernel_count();
                let out = step.call(&[&t, &p]).unwrap().remove(0);
                tok = out.to_vec::<i32>().unwrap()[0];
                seen.push(tok);
                if pos >= 2 {
                    assert_eq!(
                        GlobalCounters::kernel_count() - k0,
                        step.launches() as u64,
                        "{dev}: kernels launched by the decode step at position {pos}"
                    );
                    #[cfg(feature = "wgpu")]
                    if dev == Device::Wgpu {
                        let now = wgrad::runtime::wgpu::stats();
                        assert_eq!(
                            (now.pipelines, now.bind_groups, now.buffers),
                            (objects.pipelines, objects.bind_groups, objects.buffers),
                            "{dev}: objects created by the replay at position {pos}"
                        );
                    }
                }
            }
            assert_eq!(runs.get(), 2, "{dev}: the decode function ran again");
            assert!(step.launches() > 0);
            assert!(
                seen.iter()
                    .all(|&t| (0..cfg.vocab_size as i32).contains(&t)),
                "{dev}: {seen:?}"
            );
            eprintln!(
                "{dev}: {} launches per decode step; tokens {seen:?}",
                step.launches()
            );
        });
    }
}

/// `sample` draws from the softmax of the logits over temperature, restricted by top-k and
/// top-p and renormalised; temperature 0 takes the most likely token.
#[test]
fn sampling_draws_from_what_top_k_and_top_p_keep() {
    let _serial = serial();
    let probs = [0.05f64, 0.5, 0.15, 0.3];
    let logits: Vec<f32> = probs.iter().map(|p| p.ln() as f32).collect();
    let rows = 4000;
    let cases = [
        // (sampling, the kept distribution)
        (Sampling::default(), vec![0.05, 0.5, 0.15, 0.3]),
        (
            Sampling {
                top_k: Some(2),
                ..Sampling::default()
            },
            vec![0.0, 0.625, 0.0, 0.375],
        ),
        (
            // The tokens more likely than token 2 sum to 0.8 < 0.9: kept; token 0's to 0.95.
            Sampling {
                top_p: Some(0.9),
                ..Sampling::default()
            },
            vec![0.0, 0.5 / 0.95, 0.15 / 0.95, 0.3 / 0.95],
        ),
        (
            Sampling {
                temperature: 0.5,
                ..Sampling::default()
            },
            {
                let z: f64 = probs.iter().map(|p| p * p).sum();
                probs.iter().map(|p| p * p / z).collect()
            },
        ),
        (
            Sampling {
                temperature: 0.0,
                ..Sampling::default()
            },
            vec![0.0, 1.0, 0.0, 0.0],
        ),
    ];
    for dev in [Device::Interp, Device::Cpu] {
        if !common::usable(dev) {
            continue;
        }
        Context::new().dev(dev).run(|| {
            let l = Tensor::from_vec(logits.repeat(rows), &[rows, 4]).unwrap();
            for (s, want) in &cases {
                let got = sample(&l, s).unwrap();
                assert_eq!(got.shape(), [rows, 1]);
                let mut count = [0usize; 4];
                for t in got.to_vec::<i32>().unwrap() {
                    count[t as usize] += 1;
                }
                for (i, (&c, &w)) in count.iter().zip(want).enumerate() {
                    let f = c as f64 / rows as f64;
                    assert!(
                        (f - w).abs() < 0.03 && (w > 0.0 || c == 0),
                        "{dev}: {s:?}: token {i} drawn {f}, want {w} ({count:?})"
                    );
                }
            }
            for bad in [
                Sampling {
                    temperature: -1.0,
                    ..Sampling::default()
                },
                Sampling {
                    top_k: Some(0),
                    ..Sampling::default()
                },
                Sampling {
                    top_p: Some(0.0),
                    ..Sampling::default()
                },
            ] {
                let e = sample(&l, &bad).unwrap_err().to_string();
                assert!(e.starts_with("sample:"), "{e}");
            }
        });
    }
}

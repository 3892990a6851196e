//! Benchmark: the training step of `wgrad::nn::gpt`'s GPT (nanoGPT's AdamW recipe) on random
//! tokens, captured by `TinyJit`. Prints the time of the first call (it schedules, plans and
//! compiles every kernel: the wait before training starts), of the second (the capture), the
//! median of the replayed steps (each read back), and kernels per step. The PyTorch twin is
//! `scripts/bench_gpt_torch.py`.
//!
//! Knobs: `N_LAYER` (2), `N_HEAD` (4), `N_EMBD` (64), `BLOCK` (64), `BS` (16), `VOCAB` (65),
//! `STEPS` (20 timed replays), `DEV`. The medium size of the benchmarks is `N_LAYER=4
//! N_EMBD=128 BLOCK=128 BS=32`. `WGRAD_CACHE_DIR` pointed at an empty directory makes the first
//! call cold (nothing compiled or planned on disk).

use std::time::Instant;
use wgrad::nn::gpt::{Gpt, GptConfig};
use wgrad::{DType, GlobalCounters, Result, Tensor, TinyJit};

fn env(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(default)
}

fn main() -> Result<()> {
    let cfg = GptConfig {
        vocab_size: env("VOCAB", 65),
        block_size: env("BLOCK", 64),
        n_layer: env("N_LAYER", 2),
        n_head: env("N_HEAD", 4),
        n_embd: env("N_EMBD", 64),
        bias: false,
    };
    let (bs, steps) = (env("BS", 16), env("STEPS", 20).max(1));
    Tensor::manual_seed(42);
    let gpt = Gpt::new(cfg)?;
    let mut opt = gpt.configure_optimizers(0.1, 1e-3, (0.9, 0.99))?;
    let data = Tensor::randint(&[100_000], 0, cfg.vocab_size as i64)?
        .cast(DType::I32)?
        .realize()?;
    let mut step = TinyJit::new(|_: &[Tensor]| Ok(vec![gpt.train_step(&mut opt, &data, bs)?]));
    let mut call = || -> Result<f64> {
        let t = Instant::now();
        step.call(&[])?[0].item::<f32>()?;
        Ok(t.elapsed().as_secs_f64())
    };
    let first = call()?;
    let capture = call()?;
    // The CPU backend compiled the first call's kernels quickly; wait for their optimized
    // build (on a background thread) before timing steady steps.
    let t = Instant::now();
    wgrad::runtime::finish_compiles();
    let optimized = first + capture + t.elapsed().as_secs_f64();
    let k0 = GlobalCounters::kernel_count();
    let mut times: Vec<f64> = (0..steps).map(|_| call()).collect::<Result<_>>()?;
    let kernels = (GlobalCounters::kernel_count() - k0) / steps as u64;
    times.sort_by(|a, b| a.total_cmp(b));
    println!(
        "GPT {}L {}H C={} T={} B={} on {}: first call {first:.2} s, capture {capture:.2} s, optimized code at {optimized:.2} s, step {:.1} ms (median of {steps}), {kernels} kernels/step",
        cfg.n_layer,
        cfg.n_head,
        cfg.n_embd,
        cfg.block_size,
        bs,
        wgrad::Device::default(),
        times[steps / 2] * 1e3,
    );
    Ok(())
}

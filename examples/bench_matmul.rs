//! Benchmark: square f32 matrix products on one device. For each size N in `SIZES` (default
//! 256,512,1024,2048) a `TinyJit` step multiplies `CHAIN` (8) times in a row, `x = x·w` with `w`
//! scaled by 1/√N so values stay O(1), and reads back the sum of the last product (one small
//! reduce: N² reads against 2·N³·CHAIN flops). Prints GFLOP/s from the median of `STEPS` (10)
//! replays and the kernels per step. The PyTorch twin is `scripts/bench_matmul_torch.py`.
//!
//! `DEV` picks the device (as every example); `DEBUG=2` prints each kernel's own time.

use std::time::Instant;
use wgrad::{Device, GlobalCounters, Result, Tensor, TinyJit};

fn env(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(default)
}

fn main() -> Result<()> {
    let sizes: Vec<usize> = std::env::var("SIZES")
        .unwrap_or_else(|_| "256,512,1024,2048".into())
        .split(',')
        .filter_map(|s| s.trim().parse().ok())
        .collect();
    let (chain, steps) = (env("CHAIN", 8).max(1), env("STEPS", 10).max(1));
    Tensor::manual_seed(0);
    for n in sizes {
        let x = Tensor::randn(&[n, n])?.realize()?;
        let w = Tensor::randn(&[n, n])?
            .mul(1.0 / (n as f32).sqrt())?
            .realize()?;
        let mut step = TinyJit::new(|_: &[Tensor]| {
            let mut y = x.clone();
            for _ in 0..chain {
                y = y.matmul(&w)?;
            }
            Ok(vec![y.sum((), false)?])
        });
        let mut call = || -> Result<f64> {
            let t = Instant::now();
            let s = step.call(&[])?[0].item::<f32>()?;
            if !s.is_finite() {
                let msg = format!("matmul {n}: the sum {s} is not finite");
                return Err(wgrad::Error::new(wgrad::ErrorKind::Other, msg));
            }
            Ok(t.elapsed().as_secs_f64())
        };
        let first = call()?;
        call()?;
        let k0 = GlobalCounters::kernel_count();
        let mut times: Vec<f64> = (0..steps).map(|_| call()).collect::<Result<_>>()?;
        let kernels = (GlobalCounters::kernel_count() - k0) / steps as u64;
        times.sort_by(|a, b| a.total_cmp(b));
        let t = times[steps / 2];
        let gflops = 2.0 * (n as f64).powi(3) * chain as f64 / t / 1e9;
        println!(
            "matmul {n}x{n}x{n} f32 on {}: {gflops:.0} GFLOP/s ({:.3} ms per product, median of {steps} steps of {chain}; {kernels} kernels/step; first call {first:.2} s)",
            Device::default(),
            t * 1e3 / chain as f64,
        );
    }
    Ok(())
}

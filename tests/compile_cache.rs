//! The C backend's compile cache across processes: a schedule's new kernels are compiled
//! together (one compiler process for many, `Backend::compile_batch`), each is found again on
//! disk by its own source by a later process (simulated: `realize::forget_compiled`), and a
//! batch object removed since is compiled again; and the two tiers of a large batch (`TIERED`:
//! quick `-O1` code first, the `-O3` build swapped in when ready) compute the same bits. Alone
//! in its binary: it owns `WGRAD_CACHE_DIR`.

#![cfg(not(target_arch = "wasm32"))]

mod common;

use wgrad::nn::gpt::{Gpt, GptConfig};
use wgrad::{Context, DType, Device, GlobalCounters, Tensor, TinyJit};

fn files(dir: &std::path::Path, ext: &str) -> Vec<std::path::PathBuf> {
    let mut v: Vec<_> = std::fs::read_dir(dir)
        .map(|r| r.map(|e| e.unwrap().path()).collect())
        .unwrap_or_default();
    v.retain(|p| p.extension().is_some_and(|e| e == ext));
    v.sort();
    v
}

#[test]
fn kernels_compiled_in_a_batch_are_found_again_by_a_new_process() {
    if !common::usable(Device::Cpu) {
        return common::skip(&["cpu"], "compile cache", "no C compiler");
    }
    let dir = std::env::temp_dir().join(format!("wgrad-compile-cache-{}", std::process::id()));
    std::env::set_var("WGRAD_CACHE_DIR", &dir);
    let build = || -> wgrad::Result<Vec<f32>> {
        let v: Vec<f32> = (0..37 * 53)
            .map(|i| ((i * 7919) % 101) as f32 / 50.0 - 1.0)
            .collect();
        let x = Tensor::from_vec(v, &[37, 53])?;
        let h = x.matmul(&x.t()?)?.tanh()?.softmax(-1)?;
        let y = h.matmul(&x)?.relu()?.sum(0, false)?;
        y.to_vec_f32()
    };
    let want = Context::new().dev(Device::Interp).run(build).unwrap();
    let run = || {
        let got = Context::new().dev(Device::Cpu).run(build).unwrap();
        for (g, w) in got.iter().zip(&want) {
            assert!((g - w).abs() <= 1e-4 + 1e-4 * w.abs(), "{g} != {w}");
        }
    };
    run();
    let (objects, refs) = (files(&dir, "so"), files(&dir, "ref"));
    assert!(refs.len() >= 4, "kernels compiled in batches: {refs:?}");
    assert!(
        objects.len() < refs.len(),
        "{} objects for {} kernels",
        objects.len(),
        refs.len()
    );
    // A new process: every kernel from disk, nothing compiled.
    wgrad::realize::forget_compiled();
    run();
    assert_eq!(files(&dir, "so"), objects, "a kernel was compiled again");
    // Batch objects removed: their references are misses, and the kernels compile again.
    for o in &objects {
        std::fs::remove_file(o).unwrap();
    }
    wgrad::realize::forget_compiled();
    run();
    assert!(!files(&dir, "so").is_empty());
    let _ = std::fs::remove_dir_all(&dir);
}

/// A process of its own (`tier_child`), with `TIERED` and an empty cache: its losses' bits, and
/// the optimized builds still pending after the first step.
fn tier_run(tiered: &str) -> (Vec<String>, usize) {
    let dir = std::env::temp_dir().join(format!("wgrad-tiers-{}-{tiered}", std::process::id()));
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "tier_child", "--nocapture", "--test-threads=1"])
        .env("WGRAD_TIER_CHILD", "1")
        .env("TIERED", tiered)
        .env("WGRAD_CACHE_DIR", &dir)
        .output()
        .unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "child failed: {text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let field = |name: &str| -> Vec<String> {
        // (The test harness prints its own words before the first line.)
        let at = text
            .find(name)
            .unwrap_or_else(|| panic!("no {name} in {text}"));
        let line = text[at + name.len()..].lines().next().unwrap_or_default();
        line.split_whitespace().map(String::from).collect()
    };
    let background: u64 = field("BACKGROUND")[0].parse().unwrap();
    let pending: usize = field("PENDING")[0].parse().unwrap();
    // The background builds are counted, and only where there were some.
    assert_eq!(background > 0, pending > 0, "{text}");
    (field("LOSSES"), pending)
}

#[test]
fn quick_and_optimized_builds_compute_the_same_bits() {
    if !common::usable(Device::Cpu) {
        return common::skip(&["cpu"], "compile tiers", "no C compiler");
    }
    let (optimized, _) = tier_run("0");
    let (tiered, pending) = tier_run("1");
    assert!(pending > 0, "the first step ran the quick build");
    assert_eq!(
        tiered, optimized,
        "losses (f32 bits) of -O1 then -O3 code against -O3 only"
    );
}

/// The process `tier_run` starts: four training steps of a small GPT, the first two on the code
/// the first step compiled (quick where tiered), the last two after `finish_compiles`.
#[test]
fn tier_child() {
    if std::env::var("WGRAD_TIER_CHILD").is_err() {
        return;
    }
    Context::new()
        .dev(Device::Cpu)
        .run(|| -> wgrad::Result<()> {
            Tensor::manual_seed(7);
            let cfg = GptConfig {
                vocab_size: 65,
                block_size: 32,
                n_layer: 2,
                n_head: 4,
                n_embd: 64,
                bias: false,
            };
            let gpt = Gpt::new(cfg)?;
            let mut opt = gpt.configure_optimizers(0.1, 1e-3, (0.9, 0.99))?;
            let data = Tensor::randint(&[4096], 0, 65)?
                .cast(DType::I32)?
                .realize()?;
            let mut step =
                TinyJit::new(|_: &[Tensor]| Ok(vec![gpt.train_step(&mut opt, &data, 8)?]));
            let mut losses = vec![];
            let mut loss = || -> wgrad::Result<String> {
                Ok(format!(
                    "{:08x}",
                    step.call(&[])?[0].item::<f32>()?.to_bits()
                ))
            };
            losses.push(loss()?);
            let pending = wgrad::runtime::cpu::pending_compiles();
            losses.push(loss()?);
            wgrad::runtime::finish_compiles();
            losses.push(loss()?);
            losses.push(loss()?);
            println!("\nLOSSES {}", losses.join(" "));
            println!("PENDING {pending}");
            println!("BACKGROUND {}", GlobalCounters::background_compile_ns());
            Ok(())
        })
        .unwrap();
}

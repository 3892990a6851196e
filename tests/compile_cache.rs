//! The C backend's compile cache across processes: a schedule's new kernels are compiled
//! together (one compiler process for many, `Backend::compile_batch`), each is found again on
//! disk by its own source by a later process (simulated: `realize::forget_compiled`), and a
//! batch object removed since is compiled again. Alone in its binary: it owns
//! `WGRAD_CACHE_DIR`.

#![cfg(not(target_arch = "wasm32"))]

mod common;

use wgrad::{Context, Device, Tensor};

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

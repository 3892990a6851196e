//! The WGSL dialect (`codegen::wgsl`), checked without a GPU: the kernels real workloads lower
//! to (tests/common/kernels.rs) are rendered and every one must pass naga's WGSL front end and
//! validator; and a few small kernels are compared with their blessed renderings in
//! `shaders/golden/` (`BLESS=1` rewrites them).
//!
//! `WGSL_DUMP=dir` writes every recorded kernel's rendering there.

// Native only: the browser tests are tests/web.rs.
#![cfg(not(target_arch = "wasm32"))]

mod common;
#[path = "common/kernels.rs"]
mod kernels;

use std::fmt::Write;

use common::validate_wgsl as validate;
use wgrad::codegen::wgsl::{render_wgsl, render_wgsl_for, Features};
use wgrad::DType;

#[test]
fn every_recorded_kernel_validates() {
    let kernels = kernels::workloads();
    let mut failures = String::new();
    let mut failed = 0;
    let mut max_bufs = 0;
    // WGSL_DUMP=dir writes every rendering there, for reading.
    let dump = std::env::var("WGSL_DUMP").ok();
    for (i, k) in kernels.iter().enumerate() {
        max_bufs = max_bufs.max(k.bufs.len());
        let src = render_wgsl(k);
        if let Some(dir) = &dump {
            std::fs::create_dir_all(dir).unwrap();
            std::fs::write(format!("{dir}/{i:04}_{}.wgsl", k.name), &src).unwrap();
        }
        if let Err(e) = validate(&src) {
            failed += 1;
            if failed <= 5 {
                let _ = writeln!(failures, "---- {} ----\n{src}\n{e}\n", k.name);
            }
        }
    }
    println!(
        "wgsl: {} kernels rendered, {} validated by naga, at most {max_bufs} buffers per kernel",
        kernels.len(),
        kernels.len() - failed
    );
    assert!(
        failed == 0,
        "{failed} kernels failed to validate; the first:\n{failures}"
    );
    assert!(
        kernels.len() >= 300,
        "only {} kernels recorded",
        kernels.len()
    );
    let sources: Vec<String> = kernels.iter().map(render_wgsl).collect();
    assert!(
        sources.iter().any(|s| s.contains("atomicLoad(")),
        "no kernel reads a packed output"
    );
    // Every dtype's storage and register paths were exercised.
    for dt in [
        DType::F32,
        DType::F16,
        DType::BF16,
        DType::I32,
        DType::U32,
        DType::U8,
        DType::Bool,
    ] {
        assert!(
            kernels.iter().any(|k| k.bufs[0].dtype == dt),
            "no kernel stores {dt}"
        );
        assert!(
            kernels
                .iter()
                .any(|k| k.bufs[1..].iter().any(|b| b.dtype == dt)),
            "no kernel loads {dt}"
        );
    }
}

/// Rendered for a device with `shader-f16`, every workload kernel validates with that capability,
/// f16 buffers are `array<f16>` read and written an element at a time (no packing helpers, no
/// atomics), and no kernel without f16 changes.
#[test]
fn shader_f16_kernels_store_f16_natively() {
    let native = Features {
        shader_f16: true,
        ..Features::default()
    };
    let mut f16_kernels = 0;
    for k in kernels::workloads() {
        let src = render_wgsl_for(&k, native);
        let caps = naga::valid::Capabilities::SHADER_FLOAT16 | naga::valid::Capabilities::SUBGROUP;
        common::validate_wgsl_with(&src, caps)
            .unwrap_or_else(|e| panic!("{}:\n{src}\n{e}", k.name));
        let has_f16 = k.bufs.iter().any(|b| b.dtype == DType::F16);
        if !has_f16 {
            if !src.contains("enable f16;") {
                assert_eq!(src, render_wgsl(&k), "{}", k.name);
            }
            continue;
        }
        f16_kernels += 1;
        assert!(
            src.starts_with("// ") && src.contains("\nenable f16;\n"),
            "{src}"
        );
        assert!(
            !src.contains("fn f16_to_f32") && !src.contains("fn f32_to_f16("),
            "{src}"
        );
        for (i, b) in k.bufs.iter().enumerate() {
            if b.dtype == DType::F16 {
                let access = if b.writes { "read_write" } else { "read" };
                let decl = format!("var<storage, {access}> b{i}: array<f16>;");
                assert!(src.contains(&decl), "{}: no `{decl}`:\n{src}", k.name);
                assert!(!src.contains(&format!("st_b{i}(")), "{src}");
            }
        }
    }
    assert!(f16_kernels >= 5, "only {f16_kernels} f16 kernels recorded");
}

#[test]
fn golden_kernels() {
    kernels::check_golden("wgsl", render_wgsl, &|_, src| validate(src));
}

/// No rendered kernel defines a value nothing reads: a product that only a fused multiply-add
/// step consumes is not emitted beside its `fma` (a dead `let v = a * b;` that WGSL compilers
/// keep). Checked on the registers of every workload kernel.
#[test]
fn no_kernel_emits_a_value_nothing_reads() {
    let mut with_fma = 0;
    for k in kernels::workloads() {
        let src = render_wgsl(&k);
        with_fma += usize::from(src.contains("fma("));
        for line in src.lines() {
            let Some(rest) = line.trim_start().strip_prefix("let ") else {
                continue;
            };
            let name = rest.split([':', ' ']).next().unwrap_or("");
            // The kernel's registers (`vN`; the prologue's ids are another matter).
            if !name.starts_with('v') || !name[1..].chars().all(|c| c.is_ascii_digit()) {
                continue;
            }
            let uses = src
                .match_indices(name)
                .filter(|(i, _)| {
                    let after = src[i + name.len()..].chars().next().unwrap_or(' ');
                    let before = src[..*i].chars().last().unwrap_or(' ');
                    !(after.is_alphanumeric()
                        || after == '_'
                        || before.is_alphanumeric()
                        || before == '_')
                })
                .count();
            assert!(
                uses > 1,
                "{}: `{name}` is defined and never read:\n{src}",
                k.name
            );
        }
    }
    assert!(
        with_fma > 10,
        "only {with_fma} kernels with a fused multiply-add"
    );
}

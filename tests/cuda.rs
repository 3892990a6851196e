//! The CUDA backend. Without a GPU: every kernel the workloads of tests/common/kernels.rs and
//! the tutorial's training step lower to is rendered as CUDA and compiled to a CUBIN for sm_80
//! and sm_90 by NVRTC (which needs no GPU or driver; `bash scripts/setup_nvrtc.sh` installs it
//! into .nvrtc/, which .cargo/config.toml points `WGRAD_NVRTC` at), golden kernels are compared
//! with `shaders/golden/*.cu` (`BLESS=1` rewrites them), `WGRAD_DUMP_AS=cuda` is checked, and a
//! missing driver is an error, not a panic. With a GPU: a jitted step replays as one CUDA graph
//! launch that allocates nothing. (The op suite, JIT and MNIST tests run on CUDA through
//! `common::devices()` where a GPU exists.)
//!
//! NVRTC missing is a skip, a failure under `WGRAD_REQUIRE=nvrtc`; no GPU is a skip, a failure
//! under `WGRAD_REQUIRE=cuda`.

// Native only: the browser tests are tests/web.rs.
#![cfg(all(not(target_arch = "wasm32"), feature = "cuda"))]

mod common;
#[path = "common/kernels.rs"]
mod kernels;
#[path = "../examples/common/model.rs"]
mod model;

use wgrad::codegen::cuda::render_cuda;
use wgrad::nn::optim::Adam;
use wgrad::nn::state::get_parameters;
use wgrad::runtime::cuda::{self, nvrtc};
use wgrad::{Context, DType, Device, Result, Tensor, TinyJit};

const ARCHS: [&str; 2] = ["sm_80", "sm_90"];

/// The kernels of two steps of the tutorial's training loop (its CNN, Adam, a jitted step) at a
/// small batch, on the interpreter.
fn tutorial_step_kernels() -> Vec<wgrad::codegen::LinearKernel> {
    kernels::record(|| {
        Context::new().dev(Device::Interp).run(|| {
            Tensor::manual_seed(7);
            let x = Tensor::randint(&[16, 1, 28, 28], 0, 256)?
                .cast(DType::U8)?
                .realize()?;
            let y = Tensor::randint(&[16], 0, 10)?.realize()?;
            let m = model::Model::new()?;
            let mut opt = Adam::new(get_parameters(&m))?;
            let mut step =
                TinyJit::new(|_: &[Tensor]| Ok(vec![model::train_step(&m, &mut opt, &x, &y, 4)?]));
            for _ in 0..2 {
                let loss = step.call(&[])?[0].item::<f32>()?;
                assert!(loss.is_finite(), "loss {loss}");
            }
            Ok(())
        })
    })
}

#[test]
fn every_kernel_compiles_with_nvrtc_for_sm80_and_sm90() {
    let mut ks = kernels::workloads();
    let n_workloads = ks.len();
    let tutorial = tutorial_step_kernels();
    assert!(tutorial.len() >= 20, "{} tutorial kernels", tutorial.len());
    ks.extend(tutorial.iter().cloned());
    let Some(distinct) = common::compile_cuda(&ks, &ARCHS) else {
        return;
    };
    let ((major, minor), path) = nvrtc::version().unwrap();
    eprintln!(
        "cuda: {} kernels ({n_workloads} from the workloads, {} from the tutorial's step), {distinct} distinct sources, each compiled to CUBIN for {} by NVRTC {major}.{minor} ({path})",
        ks.len(),
        tutorial.len(),
        ARCHS.join(" and ")
    );
}

#[test]
fn golden_kernels() {
    let nvrtc = nvrtc::available().is_ok();
    if !nvrtc {
        common::skip(
            &["nvrtc"],
            "compiling the golden CUDA kernels",
            &nvrtc::available().unwrap_err(),
        );
    }
    kernels::check_golden("cu", render_cuda, &|name, src| {
        if !nvrtc {
            return Ok(());
        }
        nvrtc::compile(name, src, "sm_90")
            .map(|_| ())
            .map_err(|e| e.msg)
    });
}

#[test]
fn nvrtc_errors_quote_the_source_line() {
    if nvrtc::available().is_err() {
        return common::skip(
            &["nvrtc"],
            "the NVRTC error test",
            &nvrtc::available().unwrap_err(),
        );
    }
    let src = "extern \"C\" __global__ void k(float *b0) {\n  b0[0] = undefined_name;\n}\n";
    let e = nvrtc::compile("k", src, "sm_90").expect_err("does not compile");
    assert!(e.msg.contains("undefined_name"), "{}", e.msg);
    assert!(
        e.msg.contains("  2 |   b0[0] = undefined_name;"),
        "{}",
        e.msg
    );
}

/// The child half of `dump_as_cuda_writes_every_kernel` (run by it in a process of its own,
/// with the environment it needs).
#[test]
#[ignore]
fn dump_as_child() {
    Context::new().dev(Device::Cpu).run(|| {
        let a = Tensor::from_vec(vec![1.0f32, -2.0, 3.0, 4.5], &[2, 2]).unwrap();
        let h = a.cast(DType::F16).unwrap();
        let out = h.exp().unwrap().sum(1, false).unwrap().neg().unwrap();
        let out = out.cast(DType::F32).unwrap().to_vec::<f32>().unwrap();
        assert!(
            (out[0] + 1.0f32.exp() + (-2.0f32).exp()).abs() < 1e-2,
            "{out:?}"
        );
        let i = a
            .cast(DType::I32)
            .unwrap()
            .idiv(Tensor::full_dtype(&[2, 2], 0.0, DType::I32).unwrap());
        assert_eq!(i.unwrap().to_vec::<i32>().unwrap(), vec![0; 4]);
    });
}

#[test]
fn dump_as_cuda_writes_every_kernel() {
    if Device::Cpu.available().is_err() {
        return common::skip(&["cpu"], "the WGRAD_DUMP_AS test", "no C compiler");
    }
    let dir = std::env::temp_dir().join(format!("wgrad-dump-as-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "dump_as_child", "--ignored", "--nocapture"])
        .env("WGRAD_DUMP", &dir)
        .env("WGRAD_DUMP_AS", "cuda")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "child failed:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let files: Vec<std::path::PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    // Only CUDA sources, though the CPU ran the kernels.
    assert!(files.len() >= 2, "{files:?}");
    assert!(
        files
            .iter()
            .all(|p| p.extension().is_some_and(|e| e == "cu")),
        "{files:?}"
    );
    let srcs: Vec<String> = files
        .iter()
        .map(|p| std::fs::read_to_string(p).unwrap())
        .collect();
    assert!(srcs.iter().all(|s| s.contains("extern \"C\" __global__")));
    assert!(srcs.iter().any(|s| s.contains("f2h(")), "an f16 kernel");
    if nvrtc::available().is_ok() {
        for s in &srcs {
            let name = s
                .split("__launch_bounds__")
                .nth(1)
                .and_then(|r| r.split(['(', ')']).nth(2))
                .map(|n| n.trim().to_string())
                .unwrap();
            nvrtc::compile(&name, s, "sm_90").unwrap_or_else(|e| panic!("{e}"));
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// Without a driver the device is unavailable with the reason, and using it is an `Err`
/// (never a panic); with one, a round trip through device memory.
#[test]
fn without_a_driver_cuda_is_an_error_not_a_panic() {
    let r: Result<Vec<f32>> = Context::new().dev(Device::Cuda).run(|| {
        Tensor::from_vec(vec![1.0f32, 2.0, 3.0], &[3])?
            .mul(2.0)?
            .to_vec::<f32>()
    });
    match Device::Cuda.available() {
        Err(why) => {
            eprintln!("SKIPPED on CUDA: {why}");
            let e = r.expect_err("no device, so an error");
            assert!(e.msg.contains(&why), "{} vs {why}", e.msg);
            if !std::path::Path::new("/proc/driver/nvidia").exists() {
                assert!(why.contains("no CUDA driver found"), "{why}");
            }
            assert!(wgrad::runtime::cuda::device_info().is_none());
            assert_ne!(Device::best(), Device::Cuda);
        }
        Ok(()) => {
            assert_eq!(r.unwrap(), vec![2.0, 4.0, 6.0]);
            let info = cuda::device_info().unwrap();
            eprintln!("cuda: {info:?}");
            assert!(info.arch.starts_with("sm_"));
            assert_eq!(Device::best(), Device::Cuda);
        }
    }
}

/// A replayed step is one graph launch: no kernel launched one by one, nothing allocated.
#[test]
fn jit_replay_is_one_graph_launch_without_allocations() {
    if !common::usable(Device::Cuda) {
        return;
    }
    Context::new().dev(Device::Cuda).run(|| {
        Tensor::manual_seed(11);
        let w = Tensor::uniform(&[16, 8], -0.5, 0.5)
            .unwrap()
            .realize()
            .unwrap();
        w.set_requires_grad(true);
        let step = |x: &Tensor| -> Result<Tensor> {
            Context::new().training(true).run(|| {
                w.set_grad(None);
                let loss = x
                    .matmul(&w)?
                    .relu()?
                    .dropout(0.1)?
                    .square()?
                    .mean((), false)?;
                loss.backward()?;
                let g = w.grad().expect("grad").detach();
                w.assign(&w.detach().sub(&g.mul(0.1)?)?)?;
                Tensor::realize_all(&[&w, &loss])?;
                Ok(loss)
            })
        };
        let mut jit = TinyJit::new(|xs: &[Tensor]| Ok(vec![step(&xs[0])?]));
        let xs: Vec<Tensor> = (0..6)
            .map(|i| {
                Tensor::from_vec(
                    (0..64)
                        .map(|v| ((v * 7 + i) % 13) as f32 / 6.0 - 1.0)
                        .collect(),
                    &[4, 16],
                )
                .unwrap()
                .realize()
                .unwrap()
            })
            .collect();
        let mut losses = vec![];
        for (i, x) in xs.iter().enumerate() {
            let s0 = cuda::stats();
            let loss = jit.call(&[x]).unwrap().remove(0);
            let s1 = cuda::stats();
            if i >= 2 {
                assert_eq!(s1.graph_launches - s0.graph_launches, 1, "replay {i}");
                assert_eq!(s1.launches, s0.launches, "replay {i} launched kernels");
                assert_eq!(s1.allocs, s0.allocs, "replay {i} allocated");
            }
            losses.push(loss.item::<f32>().unwrap());
        }
        assert!(jit.launches() > 3, "{} launches", jit.launches());
        eprintln!(
            "cuda: {} launches per step replayed as one graph; losses {losses:?}",
            jit.launches()
        );
        // The replays computed with the new inputs: different batches, different losses.
        assert!(losses.windows(2).all(|w| w[0] != w[1]), "{losses:?}");
    });
}

// ------------------------------------------------------------------ CUDA semantics on the host

/// What CUDA provides that the host's C++ lacks, for running the CUDA renderings on the CPU:
/// the built-in indices (set by the driver loop below), the qualifiers, the bit casts.
const HOST_SHIM: &str = r#"#include <cmath>
#include <cstdio>
#include <cstring>
#include <vector>
struct Dim3 { unsigned int x, y, z; };
static Dim3 blockIdx, threadIdx;
#define __global__
#define __device__
#define __forceinline__ inline
#define __restrict__ __restrict
#define __launch_bounds__(n)
static inline float __int_as_float(int x) { float f; memcpy(&f, &x, 4); return f; }
static inline float __uint_as_float(unsigned int x) { float f; memcpy(&f, &x, 4); return f; }
static inline unsigned int __float_as_uint(float f) { unsigned int x; memcpy(&x, &f, 4); return x; }
struct float4 { float x, y, z, w; };
struct int4 { int x, y, z, w; };
struct uint4 { unsigned int x, y, z, w; };
"#;

fn storage_ty(dt: DType) -> &'static str {
    match dt {
        DType::F32 => "float",
        DType::F16 | DType::BF16 => "unsigned short",
        DType::I32 => "int",
        DType::U32 => "unsigned int",
        DType::U8 | DType::Bool => "unsigned char",
    }
}

/// One C++ program holding every kernel (each in a namespace of its own) and a driver that
/// reads each launch's buffers from stdin, runs the kernel over its whole grid, thread by
/// thread, and writes the output buffer to stdout.
fn host_program(ks: &[&wgrad::codegen::LinearKernel]) -> String {
    use std::fmt::Write;
    let mut p = String::from(HOST_SHIM);
    let mut cases = String::new();
    for (i, k) in ks.iter().enumerate() {
        let src = render_cuda(k).replace(
            &format!(
                "extern \"C\" __global__ void __launch_bounds__(256) {}(",
                k.name
            ),
            "__global__ void kernel(",
        );
        assert!(src.contains("void kernel("), "{src}");
        let _ = writeln!(p, "namespace k{i} {{\n{src}}}");
        let args: Vec<String> = k
            .bufs
            .iter()
            .enumerate()
            .map(|(j, b)| {
                let c = if b.writes { "" } else { "const " };
                format!("({c}{} *)b[{j}].data()", storage_ty(b.dtype))
            })
            .collect();
        let _ = writeln!(
            cases,
            "    case {i}: for (unsigned int bl = 0; bl < blocks; bl++) for (unsigned int t = 0; t < 256; t++) {{ blockIdx.x = bl; threadIdx.x = t; k{i}::kernel({}); }} break;",
            args.join(", ")
        );
    }
    let _ = write!(
        p,
        r#"static bool rd(void *p, size_t n) {{ return fread(p, 1, n, stdin) == n; }}
int main() {{
  unsigned int head[3];
  while (rd(head, sizeof head)) {{
    unsigned int which = head[0], blocks = head[1], nbufs = head[2];
    std::vector<std::vector<unsigned char>> b(nbufs);
    for (auto &v : b) {{
      unsigned long long n;
      if (!rd(&n, 8)) return 2;
      v.resize(n + 16);
      if (!rd(v.data(), n)) return 2;
    }}
    switch (which) {{
{cases}    default: return 3;
    }}
    fwrite(b[0].data(), 1, b[0].size() - 16, stdout);
  }}
  return 0;
}}
"#
    );
    p
}

/// Whether two output buffers agree: exactly for integers and bools, within rounding for
/// floats (the host's libm and the interpreter's f64 math differ in the last bits).
fn same_values(dt: DType, got: &[u8], want: &[u8]) -> std::result::Result<(), String> {
    if got.len() != want.len() {
        return Err(format!("{} bytes, want {}", got.len(), want.len()));
    }
    let close = |a: f32, b: f32, rtol: f32| {
        (a.is_nan() && b.is_nan()) || a == b || (a - b).abs() <= rtol * a.abs().max(b.abs()) + 1e-6
    };
    let bad = match dt {
        DType::F32 => got
            .chunks_exact(4)
            .zip(want.chunks_exact(4))
            .map(|(g, w)| {
                let f = |c: &[u8]| f32::from_le_bytes([c[0], c[1], c[2], c[3]]);
                (f(g), f(w))
            })
            .position(|(g, w)| !close(g, w, 1e-5)),
        DType::F16 => got
            .chunks_exact(2)
            .zip(want.chunks_exact(2))
            .map(|(g, w)| {
                let f = |c: &[u8]| half::f16::from_le_bytes([c[0], c[1]]).to_f32();
                (f(g), f(w))
            })
            .position(|(g, w)| !close(g, w, 2e-3)),
        DType::BF16 => got
            .chunks_exact(2)
            .zip(want.chunks_exact(2))
            .map(|(g, w)| {
                let f = |c: &[u8]| half::bf16::from_le_bytes([c[0], c[1]]).to_f32();
                (f(g), f(w))
            })
            .position(|(g, w)| !close(g, w, 1e-2)),
        _ => got.iter().zip(want).position(|(g, w)| g != w),
    };
    match bad {
        None => Ok(()),
        Some(i) => Err(format!("element {i} differs")),
    }
}

/// The CUDA renderings of the workloads' kernels (every dtype, integer division by zero,
/// shifts, wrapping u8, f16 and bf16 rounding, casts) compiled as C++ for the host and run thread by
/// thread: each output must equal the interpreter's. This checks the dialect's semantics on a
/// machine without a GPU; NVRTC's code generation is checked where one exists.
#[test]
fn cuda_kernels_compute_what_the_interpreter_does_on_the_host() {
    let cxx = std::env::var("CXX").unwrap_or_else(|_| "c++".into());
    if std::process::Command::new(&cxx)
        .arg("--version")
        .output()
        .is_err()
    {
        return common::skip(
            &["cpu"],
            "running CUDA kernels on the host",
            "no C++ compiler",
        );
    }
    let launches = kernels::workload_launches();
    // A launch can be replayed from what its buffers hold at the end only if no later launch
    // wrote any of them and it did not update its output in place.
    let mut written_later = std::collections::HashSet::new();
    let mut checkable = vec![];
    for (k, bufs) in launches.iter().rev() {
        let ptr = |b: &std::sync::Arc<wgrad::runtime::Buffer>| std::sync::Arc::as_ptr(b) as usize;
        let in_place = bufs[1..].iter().any(|b| ptr(b) == ptr(&bufs[0]))
            || k.insts
                .iter()
                .any(|i| matches!(i, wgrad::codegen::Inst::Load { slot: 0, .. }));
        // Threads run one after another here, so kernels whose threads wait for each other
        // (workgroup memory, barriers) are left to NVRTC's compile check.
        let threads_wait = k.local_size > 1;
        if !in_place && !threads_wait && bufs.iter().all(|b| !written_later.contains(&ptr(b))) {
            checkable.push((k, bufs));
        }
        written_later.insert(ptr(&bufs[0]));
    }
    checkable.reverse();
    assert!(
        checkable.len() * 2 > launches.len(),
        "{} of {} launches checkable",
        checkable.len(),
        launches.len()
    );
    let dir = std::env::temp_dir().join(format!("wgrad-cuda-host-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let kernels: Vec<&wgrad::codegen::LinearKernel> = checkable.iter().map(|(k, _)| *k).collect();
    std::fs::write(dir.join("k.cpp"), host_program(&kernels)).unwrap();
    let out = std::process::Command::new(&cxx)
        .args(["-std=c++17", "-O1", "-fwrapv", "-w", "-o"])
        .arg(dir.join("k"))
        .arg(dir.join("k.cpp"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let be = Device::Interp.backend();
    let read = |b: &wgrad::runtime::Buffer| wgrad::runtime::block_on(be.copy_out(b)).unwrap();
    let mut input = vec![];
    let mut want = vec![];
    for (i, (k, bufs)) in checkable.iter().enumerate() {
        let blocks = wgrad::codegen::cuda::launch_dims(k).0;
        for v in [i as u32, blocks, bufs.len() as u32] {
            input.extend(v.to_le_bytes());
        }
        for (j, b) in bufs.iter().enumerate() {
            let data = if j == 0 { vec![0u8; b.size] } else { read(b) };
            input.extend((data.len() as u64).to_le_bytes());
            input.extend(data);
        }
        want.push(read(&bufs[0]));
    }
    std::fs::write(dir.join("in.bin"), &input).unwrap();
    let run = std::process::Command::new(dir.join("k"))
        .stdin(std::fs::File::open(dir.join("in.bin")).unwrap())
        .output()
        .unwrap();
    assert!(run.status.success(), "host run failed: {:?}", run.status);
    let mut got = &run.stdout[..];
    let mut bad = vec![];
    for ((k, _), want) in checkable.iter().zip(&want) {
        let (g, rest) = got.split_at(want.len().min(got.len()));
        got = rest;
        if let Err(e) = same_values(k.bufs[0].dtype, g, want) {
            bad.push(format!(
                "{} ({}): {e}\n{}",
                k.name,
                k.bufs[0].dtype,
                render_cuda(k)
            ));
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    assert!(
        bad.is_empty(),
        "{} of {} kernels differ from the interpreter; the first:\n{}",
        bad.len(),
        checkable.len(),
        bad[..bad.len().min(3)].join("\n")
    );
    eprintln!(
        "cuda: {} of {} workload kernels run on the host as C++ equal the interpreter",
        checkable.len(),
        launches.len()
    );
}

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

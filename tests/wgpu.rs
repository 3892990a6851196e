//! The WebGPU backend natively (wgpu on Vulkan; lavapipe on machines without a GPU): what the op
//! suite does not cover. JIT replay as one submit with no new GPU objects, the storage-buffer
//! limit forced to 4, a tensor larger than a binding, the kernel dump, GPU timing at DEBUG=2, and
//! moving data between backends. Skipped (with the reason) without an adapter, unless
//! `WGRAD_REQUIRE=wgpu`.

// Native only: the browser tests are tests/web.rs.
#![cfg(not(target_arch = "wasm32"))]

mod common;

use std::sync::Mutex;
use wgrad::nn::optim::{Adam, Optimizer};
use wgrad::nn::state::get_parameters;
use wgrad::nn::{Conv2d, Linear};
use wgrad::runtime::wgpu::stats;
use wgrad::schedule::ScheduleItem;
use wgrad::{Context, CrossEntropyOpts, DType, Device, ErrorKind, GlobalCounters, Tensor, TinyJit};

/// The GPU object counters are process-wide: tests that read them run one at a time.
static SERIAL: Mutex<()> = Mutex::new(());

fn on_gpu<R>(f: impl FnOnce() -> R) -> Option<R> {
    if !common::usable(Device::Wgpu) {
        return None;
    }
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    Some(Context::new().dev(Device::Wgpu).run(f))
}

#[test]
fn jit_replay_is_one_submit_without_new_gpu_objects() {
    on_gpu(|| {
        Tensor::manual_seed(3);
        let conv = Conv2d::new(1, 8, (3, 3)).unwrap();
        let lin = Linear::new(8 * 13 * 13, 10).unwrap();
        let mut params = get_parameters(&conv);
        params.extend(get_parameters(&lin));
        let mut opt = Adam::new(params).unwrap();
        let x_all = Tensor::rand(&[64, 1, 28, 28]).unwrap().realize().unwrap();
        let y_all = Tensor::randint(&[64], 0, 10).unwrap().realize().unwrap();
        let mut step = TinyJit::new(|_: &[Tensor]| {
            Context::new().training(true).run(|| {
                let s = Tensor::randint(&[16], 0, 64)?;
                let (x, y) = (x_all.index(&s)?, y_all.index(&s)?);
                opt.zero_grad();
                let h = conv.forward(&x)?.relu()?.max_pool2d((2, 2), None)?;
                let loss = lin
                    .forward(&h.flatten(1)?)?
                    .sparse_categorical_crossentropy(&y, &CrossEntropyOpts::default())?;
                loss.backward()?;
                opt.step()?;
                Ok(vec![loss.realize()?])
            })
        });
        let mut losses = vec![];
        for _ in 0..3 {
            losses.push(step.call(&[]).unwrap()[0].item::<f32>().unwrap());
        }
        let launches = step.launches() as u64;
        assert!(launches > 10, "captured {launches} launches");
        let before = stats();
        GlobalCounters::reset();
        const REPLAYS: u64 = 20;
        let mut outs = vec![];
        for _ in 0..REPLAYS {
            outs.push(step.call(&[]).unwrap().remove(0));
        }
        // The last replay is submitted with the readback that needs it.
        outs.last().unwrap().item::<f32>().unwrap();
        let after = stats();
        assert_eq!(
            after.submits - before.submits,
            REPLAYS,
            "one submit per replay (the last shared with the readback)"
        );
        assert_eq!(
            after.pipelines, before.pipelines,
            "pipelines created by replays"
        );
        assert_eq!(
            after.bind_groups, before.bind_groups,
            "bind groups created by replays"
        );
        assert_eq!(
            after.buffers, before.buffers,
            "buffers allocated by replays"
        );
        assert_eq!(after.dispatches - before.dispatches, REPLAYS * launches);
        assert_eq!(GlobalCounters::kernel_count(), REPLAYS * launches);
        assert!(after.last_replay_encode_ns > 0);
        for o in &outs {
            losses.push(o.item::<f32>().unwrap());
        }
        let n = losses.len();
        let first = losses[..4].iter().sum::<f32>();
        let last = losses[n - 4..].iter().sum::<f32>();
        assert!(last < first, "loss did not fall: {losses:?}");
    });
}

/// An awaiting realize holds its launches back (`realize::defer`) until `launch_deferred` has
/// made every pipeline they need (in the browser all at once through WebGPU's async path);
/// anything that needs a held-back result first launches them in order: a realize outside
/// `defer`, a readback, a kernel launched at once inside it. A TinyJit's `call_async` trains
/// exactly as `call` does.
#[test]
fn async_realizes_launch_once_their_pipelines_are_made() {
    use wgrad::realize::{defer, launch_deferred};
    use wgrad::runtime::block_on;
    on_gpu(|| {
        let a = Tensor::arange(0.0, 64.0, 1.0, DType::F32)
            .unwrap()
            .realize()
            .unwrap();
        // A kernel no other test compiles: x * 3.25 - 1.
        let b = a.mul(3.25).unwrap().sub(1.0).unwrap();
        let before = stats();
        defer(|| b.realize()).unwrap();
        let held = stats();
        assert_eq!(held.dispatches, before.dispatches, "nothing launched yet");
        assert_eq!(held.pipelines, before.pipelines, "nothing compiled yet");
        block_on(launch_deferred()).unwrap();
        let after = stats();
        assert_eq!(after.pipelines, before.pipelines + 1);
        assert_eq!(after.dispatches, before.dispatches + 1);
        let want: Vec<f32> = (0..64).map(|i| i as f32 * 3.25 - 1.0).collect();
        assert_eq!(b.to_vec::<f32>().unwrap(), want);

        // A realize outside `defer` runs what was held back first, then itself.
        let c = a.mul(-0.5).unwrap();
        defer(|| c.realize()).unwrap();
        let d = c.add(&a).unwrap().realize().unwrap();
        let half: Vec<f32> = (0..64).map(|i| i as f32 * 0.5).collect();
        assert_eq!(d.to_vec::<f32>().unwrap(), half);
        block_on(launch_deferred()).unwrap(); // nothing left: a no-op
                                              // A readback, too.
        let e = a.mul(-0.75).unwrap();
        defer(|| e.realize()).unwrap();
        let quarter: Vec<f32> = (0..64).map(|i| i as f32 * -0.75).collect();
        assert_eq!(e.to_vec::<f32>().unwrap(), quarter);

        // Inside `defer`, a kernel launched at once (under BEAM, never held back) runs after
        // what is held back, which it reads.
        let f = a.mul(2.0).unwrap();
        let g = defer(|| -> wgrad::Result<Tensor> {
            f.realize()?;
            Context::new().beam(1).run(|| f.add(1.0)?.realize())
        })
        .unwrap();
        let odd: Vec<f32> = (0..64).map(|i| i as f32 * 2.0 + 1.0).collect();
        assert_eq!(g.to_vec::<f32>().unwrap(), odd);

        // Training: the first call awaited, the rest plain; the same losses as plain calls.
        let losses = |first_async: bool| -> Vec<f32> {
            Tensor::manual_seed(11);
            let lin = Linear::new(16, 4).unwrap();
            let mut opt = Adam::new(get_parameters(&lin)).unwrap();
            let x = Tensor::randn(&[32, 16]).unwrap().realize().unwrap();
            let y = Tensor::randint(&[32], 0, 4).unwrap().realize().unwrap();
            let mut step = TinyJit::new(|_: &[Tensor]| {
                Context::new().training(true).run(|| {
                    opt.zero_grad();
                    let loss = lin
                        .forward(&x)?
                        .sparse_categorical_crossentropy(&y, &CrossEntropyOpts::default())?;
                    loss.backward()?;
                    opt.step()?;
                    Ok(vec![loss.realize()?])
                })
            });
            (0..4)
                .map(|i| {
                    let out = if i == 0 && first_async {
                        block_on(step.call_async(&[])).unwrap()
                    } else {
                        step.call(&[]).unwrap()
                    };
                    out[0].item::<f32>().unwrap()
                })
                .collect()
        };
        let plain = losses(false);
        assert_eq!(losses(true), plain);
        assert!(plain[3] < plain[0], "{plain:?}");
    });
}

#[test]
fn jit_replay_reads_new_inputs_and_writes_back_assigned_ones() {
    on_gpu(|| {
        let w = Tensor::zeros(&[4]).unwrap().realize().unwrap();
        // Input 0 is read; input 1 is updated in place by the step.
        let mut f = TinyJit::new(|xs: &[Tensor]| {
            xs[1].assign(&xs[1].add(&xs[0])?)?;
            Ok(vec![xs[0].mul(2.0)?.realize()?, xs[1].realize()?])
        });
        let acc = Tensor::zeros(&[4]).unwrap().realize().unwrap();
        for i in 1..=5 {
            let x = Tensor::full(&[4], i as f64).unwrap().realize().unwrap();
            let out = f.call(&[&x, &acc]).unwrap();
            assert_eq!(out[0].to_vec::<f32>().unwrap(), vec![2.0 * i as f32; 4]);
            let want = (1..=i).sum::<i32>() as f32;
            assert_eq!(acc.to_vec::<f32>().unwrap(), vec![want; 4], "call {i}");
        }
        drop(w);
    });
}

#[test]
fn buffer_limit_of_four_splits_kernels() {
    on_gpu(|| {
        let ts: Vec<Tensor> = (0..7)
            .map(|i| {
                Tensor::arange(0.0, 12.0, 1.0, DType::F32)
                    .unwrap()
                    .reshape(&[3, 4])
                    .unwrap()
                    .add(i as f64)
                    .unwrap()
                    .realize()
                    .unwrap()
            })
            .collect();
        let sum = |ts: &[Tensor]| {
            let mut acc = ts[0].clone();
            for t in &ts[1..] {
                acc = acc.mul(t).unwrap().add(t).unwrap();
            }
            acc
        };
        let want = sum(&ts)
            .to(Device::Interp)
            .unwrap()
            .to_vec::<f32>()
            .unwrap();
        Context::new().max_buffers(4).run(|| {
            let t = sum(&ts);
            let items = wgrad::Tensor::schedule_all(&[&t]).unwrap();
            assert!(items.len() > 1);
            for it in &items {
                if let ScheduleItem::Kernel { ast, .. } = it {
                    assert!(
                        ast.bufs.len() <= 4,
                        "kernel binds {} buffers",
                        ast.bufs.len()
                    );
                }
            }
            let got = t.to_vec::<f32>().unwrap();
            for (g, w) in got.iter().zip(&want) {
                assert!((g - w).abs() <= 1e-6 * w.abs(), "{got:?} != {want:?}");
            }
        });
    });
}

#[test]
fn tensor_larger_than_a_binding_is_an_error() {
    on_gpu(|| {
        let max = wgrad::runtime::wgpu::adapter_info()
            .unwrap()
            .max_storage_binding_bytes;
        let n = (max / 4 + 1) as usize;
        if n > i32::MAX as usize {
            eprintln!("skipped: the binding limit ({max} bytes) exceeds the largest tensor");
            return;
        }
        let e = Tensor::full(&[n], 1.0)
            .unwrap()
            .contiguous()
            .realize()
            .unwrap_err();
        assert_eq!(e.kind, ErrorKind::Device, "{e}");
        // Found before anything is allocated (the device's binding limit bounds its buffers).
        assert!(
            e.msg.contains("largest buffer") && e.msg.contains("nothing was run"),
            "{e}"
        );
        // The engine keeps working.
        let t = Tensor::from_vec(vec![1.0f32, 2.0, 3.0], &[3]).unwrap();
        assert_eq!(
            t.mul(2.0).unwrap().to_vec::<f32>().unwrap(),
            vec![2.0, 4.0, 6.0]
        );
    });
}

#[test]
fn kernel_dump_writes_wgsl_and_c() {
    let dir = std::env::temp_dir().join(format!("wgrad-dump-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::env::set_var("WGRAD_DUMP", &dir);
    // A constant no other test uses, so the kernel is compiled here and not taken from a cache.
    let run = |dev: Device| {
        Context::new().dev(dev).run(|| {
            Tensor::from_vec(vec![1.0f32, 2.0], &[2])
                .unwrap()
                .mul(0.123456)
                .unwrap()
                .to_vec::<f32>()
                .unwrap()
        })
    };
    let mut want = vec![];
    if common::usable(Device::Cpu) {
        run(Device::Cpu);
        want.push("c");
    }
    if common::usable(Device::Wgpu) {
        let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
        run(Device::Wgpu);
        want.push("wgsl");
    }
    std::env::remove_var("WGRAD_DUMP");
    let files: Vec<_> = std::fs::read_dir(&dir)
        .map(|d| d.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    for ext in want {
        let hit = files.iter().any(|p| {
            p.extension().is_some_and(|e| e == ext)
                && std::fs::read_to_string(p).is_ok_and(|s| s.contains("0.123456"))
        });
        assert!(
            hit,
            "no .{ext} kernel with the constant in {}: {files:?}",
            dir.display()
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn debug_2_times_kernels_on_the_gpu() {
    on_gpu(|| {
        Context::new().debug(2).run(|| {
            GlobalCounters::reset();
            let t = Tensor::rand(&[256, 256]).unwrap();
            let s = t.matmul(&t).unwrap().sum((), false).unwrap();
            s.realize().unwrap();
            assert!(GlobalCounters::kernel_count() >= 1);
            assert!(GlobalCounters::time_ns() > 0);
        });
    });
}

#[test]
fn data_moves_between_backends() {
    on_gpu(|| {
        let x: Vec<f32> = (0..1001).map(|i| i as f32 * 0.5 - 7.0).collect();
        let g = Tensor::from_vec(x.clone(), &[7, 11, 13]).unwrap();
        assert_eq!(g.device(), Device::Wgpu);
        // Odd byte counts (u8, f16, bf16) round to whole words on the GPU.
        let u = g.cast(DType::U8).unwrap();
        let back = u.to(Device::Interp).unwrap();
        let want: Vec<u8> = x.iter().map(|&v| v as u8).collect();
        assert_eq!(back.to_vec::<u8>().unwrap(), want);
        let h = Tensor::from_vec(x.clone(), &[1001])
            .unwrap()
            .to(Device::Interp)
            .unwrap()
            .cast(DType::F16)
            .unwrap()
            .to(Device::Wgpu)
            .unwrap()
            .cast(DType::F32)
            .unwrap();
        assert_eq!(h.to_vec::<f32>().unwrap(), x);
        // bf16 (rounded on the interpreter, widened on the GPU).
        let b = Tensor::from_vec(x.clone(), &[1001])
            .unwrap()
            .to(Device::Interp)
            .unwrap()
            .cast(DType::BF16)
            .unwrap()
            .to(Device::Wgpu)
            .unwrap()
            .cast(DType::F32)
            .unwrap();
        let want: Vec<f32> = x
            .iter()
            .map(|&v| half::bf16::from_f32(v).to_f32())
            .collect();
        assert_eq!(b.to_vec::<f32>().unwrap(), want);
    });
}

/// Long reductions on every target a WebGPU adapter can be given: lavapipe's llvmpipe stops an
/// invocation's loops after 65,535 iterations, so no kernel may loop that long (issue: sums came
/// out short, silently). The defaults split long reduces; OPT_TARGET=gpu groups and splits them.
#[test]
fn long_reductions_are_exact() {
    on_gpu(|| {
        for target in [None, Some(wgrad::codegen::OptTarget::Gpu)] {
            let ctx = || match target {
                Some(t) => Context::new().opt_target(t),
                None => Context::new(),
            };
            ctx().run(|| {
                // 65,536 values, all 0 but the last.
                let mut v = vec![0.0f32; 65536];
                v[65535] = 1.0;
                let s = Tensor::from_vec(v, &[65536])
                    .unwrap()
                    .sum((), false)
                    .unwrap();
                assert_eq!(s.item::<f32>().unwrap(), 1.0, "{target:?}: last of 65536");
                // A 300 x 300 array of ones.
                let ones = Tensor::ones(&[300, 300]).unwrap().contiguous();
                let s = ones.sum((), false).unwrap().item::<f32>().unwrap();
                assert_eq!(s, 90000.0, "{target:?}: 300x300 ones");
                // One million values.
                let m = Tensor::ones(&[1_000_000]).unwrap().contiguous();
                let s = m.sum((), false).unwrap().item::<f32>().unwrap();
                assert_eq!(s, 1_000_000.0, "{target:?}: a million ones");
                // A 70,000-term gradient: d/dw sum(x * w) = sum(x) for a scalar w.
                let x = Tensor::ones(&[70000]).unwrap().realize().unwrap();
                let w = Tensor::from_vec(vec![2.0f32], &[1]).unwrap();
                w.set_requires_grad(true);
                x.mul(&w)
                    .unwrap()
                    .sum((), false)
                    .unwrap()
                    .backward()
                    .unwrap();
                let g = w.grad().unwrap().to_vec::<f32>().unwrap();
                assert_eq!(g, vec![70000.0], "{target:?}: 70,000-term gradient");
                // An in-place update from a long reduce (an SGD step on a weight whose
                // gradient sums 86,528 terms, as the tutorial's first convolution's does): split,
                // its second kernel reads and writes the weight through one binding.
                let p = Tensor::from_vec(vec![1.0f32, 2.0, 3.0], &[3]).unwrap();
                let g = Tensor::ones(&[3, 86528]).unwrap().contiguous();
                let upd = p
                    .sub(g.sum(1, false).unwrap().mul(1e-5f32).unwrap())
                    .unwrap();
                p.assign(&upd).unwrap().realize().unwrap();
                let got = p.to_vec::<f32>().unwrap();
                for (a, b) in got.iter().zip([1.0f32, 2.0, 3.0]) {
                    assert!(
                        (a - (b - 0.86528)).abs() < 1e-5,
                        "{target:?}: in place {got:?}"
                    );
                }
            });
        }
    });
}

/// A jitted step queued without readbacks does strictly less host work than an eager step read
/// back every time: per step, as many submits (one), fewer compute passes, bind groups and buffer copies
/// (host encode time is printed, not asserted: timing belongs to benchmarks).
#[test]
fn queued_replay_does_less_host_work_than_eager_steps() {
    on_gpu(|| {
        Tensor::manual_seed(5);
        let conv = Conv2d::new(1, 4, (3, 3)).unwrap();
        let lin = Linear::new(4 * 13 * 13, 10).unwrap();
        let mut params = get_parameters(&conv);
        params.extend(get_parameters(&lin));
        let opt = std::cell::RefCell::new(Adam::new(params).unwrap());
        let x_all = Tensor::rand(&[32, 1, 28, 28]).unwrap().realize().unwrap();
        let y_all = Tensor::randint(&[32], 0, 10).unwrap().realize().unwrap();
        let step = || -> wgrad::Result<Tensor> {
            Context::new().training(true).run(|| {
                let s = Tensor::randint(&[8], 0, 32)?;
                let (x, y) = (x_all.index(&s)?, y_all.index(&s)?);
                let mut opt = opt.borrow_mut();
                opt.zero_grad();
                let h = conv.forward(&x)?.relu()?.max_pool2d((2, 2), None)?;
                let loss = lin
                    .forward(&h.flatten(1)?)?
                    .sparse_categorical_crossentropy(&y, &CrossEntropyOpts::default())?;
                loss.backward()?;
                opt.step()?;
                loss.realize()
            })
        };
        let per_step = |n: u64, a: wgrad::runtime::wgpu::Stats, b: wgrad::runtime::wgpu::Stats| {
            [
                (b.submits - a.submits) as f64 / n as f64,
                (b.passes - a.passes) as f64 / n as f64,
                (b.bind_groups - a.bind_groups) as f64 / n as f64,
                (b.copies - a.copies) as f64 / n as f64,
                (b.encode_ns - a.encode_ns) as f64 / n as f64 / 1e6,
                (b.submit_ns - a.submit_ns) as f64 / n as f64 / 1e6,
            ]
        };
        let n = 6;
        for _ in 0..2 {
            step().unwrap().item::<f32>().unwrap();
        }
        let a = stats();
        for _ in 0..n {
            step().unwrap().item::<f32>().unwrap();
        }
        let eager = per_step(n, a, stats());
        let mut jit = TinyJit::new(|_: &[Tensor]| Ok(vec![step()?]));
        for _ in 0..3 {
            jit.call(&[]).unwrap()[0].item::<f32>().unwrap();
        }
        let a = stats();
        for _ in 0..n {
            jit.call(&[]).unwrap()[0].item::<f32>().unwrap();
        }
        let synced = per_step(n, a, stats());
        let a = stats();
        let mut last = None;
        for _ in 0..n {
            last = Some(jit.call(&[]).unwrap().remove(0));
        }
        last.unwrap().item::<f32>().unwrap();
        let queued = per_step(n, a, stats());
        eprintln!(
            "per step [submits, passes, bind groups, copies, encode ms, submit ms]: eager synced {eager:?}, jitted synced {synced:?}, jitted queued {queued:?}"
        );
        for (i, what) in ["passes", "bind groups", "copies"].iter().enumerate() {
            let i = i + 1;
            assert!(
                queued[i] < eager[i],
                "{what}: jitted queued {} per step, eager {}",
                queued[i],
                eager[i]
            );
        }
        // A replay is submitted when the next one starts (or a readback needs it): one submit
        // per step, like an eager step, whether the loss is read or not.
        assert_eq!(synced[0], 1.0, "jitted synced: one submit per step");
        assert_eq!(queued[0], 1.0, "jitted queued: one submit per step");
        assert_eq!(
            queued[1], 1.0,
            "every dispatch of a replay in one compute pass"
        );
        assert_eq!(queued[2], 0.0, "no bind groups made after capture");
    });
}

/// Opening the device on a machine without a desktop session (no `XDG_RUNTIME_DIR`, as on a
/// fresh server or in CI) prints nothing: Mesa's device-select layer, asked for a Wayland
/// compositor, would print "error: XDG_RUNTIME_DIR is invalid or not set" twice. The test runs
/// itself again as a child process with that environment and reads the child's stderr.
#[test]
fn opening_the_device_without_a_session_prints_nothing() {
    const NAME: &str = "opening_the_device_without_a_session_prints_nothing";
    if std::env::var_os("WGRAD_TEST_CHILD").is_some() {
        let _ = Device::Wgpu.available();
        return;
    }
    if !common::usable(Device::Wgpu) {
        return;
    }
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([NAME, "--exact", "--nocapture", "--test-threads=1"])
        .env("WGRAD_TEST_CHILD", "1")
        .env_remove("XDG_RUNTIME_DIR")
        .env_remove("NODEVICE_SELECT")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "child failed: {stderr}");
    let noise: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains("error") || l.contains("XDG_RUNTIME_DIR"))
        .collect();
    assert!(noise.is_empty(), "stderr: {noise:?}");
}

//! Resource limits: a shape whose element count (or byte size) overflows, and a tensor larger
//! than a device's buffers, are errors raised before anything is allocated or run; running out of
//! host memory is an error too (never an abort), and the engine keeps working once memory is
//! freed. The out-of-memory case runs in a child process whose address space is capped with
//! `ulimit -v`, so it fails for real without touching the machine's memory.

#![cfg(not(target_arch = "wasm32"))]

mod common;

use wgrad::{Context, DType, Device, ErrorKind, GlobalCounters, Tensor};

fn sum(t: &Tensor) -> f32 {
    t.sum((), false).unwrap().item::<f32>().unwrap()
}

#[test]
fn overflowing_shapes_are_errors() {
    Context::new().dev(Device::Interp).run(|| {
        let x = Tensor::from_slice(&[1f32, 2.0], &[2]).unwrap();
        let row = x.reshape(&[1, 2]).unwrap();
        let huge = usize::MAX;
        let cases = vec![
            ("from_slice", Tensor::from_slice(&[1f32], &[huge, 2])),
            (
                "from_slice",
                Tensor::from_slice(&[1f32], &[1 << 33, 1 << 31]),
            ),
            (
                "from_raw",
                Tensor::from_raw(&[0; 4], DType::F32, &[huge / 2 + 1, 2]),
            ),
            (
                "from_raw",
                Tensor::from_raw(&[0; 4], DType::F32, &[1 << 62]),
            ),
            ("full", Tensor::zeros(&[1 << 40, 1 << 40])),
            ("reshape", x.reshape(&[isize::MAX, 4])),
            ("reshape", x.reshape(&[isize::MAX, isize::MAX, -1])),
            ("pad", x.pad(&[(huge, 1)], 0.0)),
            ("pad", x.pad(&[(1 << 31, 0)], 0.0)),
            ("repeat", x.repeat(&[huge])),
            ("repeat", x.repeat(&[huge / 2, 4])),
            ("expand", row.expand(&[isize::MAX, 2])),
            ("rand", Tensor::rand(&[huge])),
            ("rand", Tensor::rand(&[1 << 32, 1 << 32])),
            ("eye", Tensor::eye(1 << 33)),
            ("arange", Tensor::arange(0.0, 1e30, 1.0, DType::F32)),
        ];
        for (op, r) in cases {
            let e = r
                .err()
                .unwrap_or_else(|| panic!("{op}: an overflowing shape was accepted"));
            assert_eq!(e.kind, ErrorKind::Shape, "{op}: {}", e.msg);
            assert!(e.msg.starts_with(op), "{op}: {}", e.msg);
        }
        // The engine still works.
        assert_eq!(sum(&x.mul(2.0).unwrap()), 6.0);
    });
}

#[test]
fn a_tensor_larger_than_the_devices_buffers_fails_before_anything_runs() {
    if !common::usable(Device::Wgpu) {
        return;
    }
    Context::new().dev(Device::Wgpu).run(|| {
        let max = Device::Wgpu.backend().max_buffer_bytes();
        let x = Tensor::from_slice(&[1f32, 2.0], &[2]).unwrap();
        let small = x.exp().unwrap();
        // Rows of two f32, one row more than the largest buffer holds.
        let rows = (max / 8 + 1) as isize;
        let big = small
            .reshape(&[1, 2])
            .unwrap()
            .expand(&[rows, 2])
            .unwrap()
            .contiguous();
        let (bufs, _) = wgrad::runtime::live_buffers();
        GlobalCounters::reset();
        let e = Tensor::realize_all(&[&small, &big]).expect_err("too large for a buffer");
        assert_eq!(e.kind, ErrorKind::Device, "{}", e.msg);
        assert!(
            e.msg.contains("largest buffer WEBGPU:0 allows"),
            "{}",
            e.msg
        );
        assert!(e.msg.contains("nothing was run"), "{}", e.msg);
        assert_eq!(GlobalCounters::kernel_count(), 0, "a kernel ran");
        eprintln!("{} (live buffers before {bufs})", e.msg);
        // The small tensor was not realized by the failed schedule, and realizes now.
        let want = 1f32.exp() + 2f32.exp();
        assert!((sum(&small) - want).abs() < 1e-4);
    });
}

/// The child half of `running_out_of_host_memory_is_an_error`: runs only inside that test's
/// child process (with its address space capped).
#[test]
#[ignore]
fn oom_child() {
    if std::env::var_os("WGRAD_OOM_CHILD").is_none() {
        return;
    }
    let block = 4 << 20; // elements: 16 MiB of f32
    for dev in [Device::Interp, Device::Cpu] {
        if !common::usable(dev) {
            continue;
        }
        Context::new().dev(dev).run(|| {
            // One tensor larger than the whole address space left.
            let e = Tensor::full(&[1 << 30], 1.0)
                .unwrap()
                .contiguous()
                .realize()
                .expect_err("a 4 GiB tensor under a 384 MiB cap");
            assert!(e.msg.contains("out of memory"), "{dev}: {}", e.msg);
            // Fill memory with live tensors until an allocation fails.
            let mut held = vec![];
            let e = loop {
                match Tensor::full(&[block], 1.0).unwrap().contiguous().realize() {
                    Ok(t) => held.push(t),
                    Err(e) => break e,
                }
                assert!(
                    held.len() < 128,
                    "{dev}: the address-space cap did not hold"
                );
            };
            assert!(e.msg.contains("out of memory"), "{dev}: {}", e.msg);
            assert!(!held.is_empty(), "{dev}: nothing fit");
            eprintln!("{dev}: {} blocks of 16 MiB, then: {}", held.len(), e.msg);
            let n = held.len();
            drop(held);
            // Freed: as many blocks fit again (less one, room for the new kernels' code), and
            // compute on them is right.
            let n = n - 1;
            let again: Vec<Tensor> = (0..n)
                .map(|i| {
                    Tensor::full(&[block], i as f64)
                        .unwrap()
                        .contiguous()
                        .realize()
                        .unwrap()
                })
                .collect();
            let last = &again[n - 1];
            assert_eq!(
                sum(&last.slice(0, 0, 1000, 1).unwrap()),
                1000.0 * (n - 1) as f32
            );
        });
    }
    println!("OOM CHILD OK");
}

#[test]
fn running_out_of_host_memory_is_an_error() {
    let exe = std::env::current_exe().expect("test binary");
    let out = std::process::Command::new("sh")
        .arg("-c")
        .arg("ulimit -v 393216 && exec \"$0\" --exact oom_child --ignored --nocapture")
        .arg(&exe)
        .env("WGRAD_OOM_CHILD", "1")
        // glibc's heuristics made the count of blocks that fit again after freeing depend on
        // timing (2 failures in 6 CI runs, none in dozens of runs by hand): a thread's first
        // allocation reserves a 64 MiB arena of the capped address space whenever the
        // background compiler or a worker starts, and freeing a large block raises the size
        // above which blocks are mapped (and unmapped on free) to that block's size, so later
        // blocks come from heaps that keep their address space. One arena and a fixed mapping
        // threshold make the child's address space a function of what it holds.
        .env("MALLOC_ARENA_MAX", "1")
        .env("MALLOC_MMAP_THRESHOLD_", "1048576")
        .output()
        .expect("run the child");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    eprintln!("{stderr}");
    assert!(
        out.status.success() && stdout.contains("OOM CHILD OK"),
        "child failed ({}):\n{stdout}\n{stderr}",
        out.status
    );
}

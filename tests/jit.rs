//! TinyJit: replay equals eager execution over many steps (the JIT must not change results),
//! the error cases, memory planning, and fresh random numbers on every replay.

// Native only: the browser tests are tests/web.rs.
#![cfg(not(target_arch = "wasm32"))]

mod common;

use wgrad::{
    Context, CrossEntropyOpts, DType, Device, ErrorKind, GlobalCounters, Result, Tensor, TinyJit,
};

struct Mlp {
    w1: Tensor,
    w2: Tensor,
}

fn mlp() -> Mlp {
    let w1 = Tensor::uniform(&[16, 32], -0.3, 0.3)
        .unwrap()
        .realize()
        .unwrap();
    let w2 = Tensor::uniform(&[32, 10], -0.3, 0.3)
        .unwrap()
        .realize()
        .unwrap();
    w1.set_requires_grad(true);
    w2.set_requires_grad(true);
    Mlp { w1, w2 }
}

/// One SGD step on a batch drawn with randint from a fixed dataset, with dropout.
fn step(m: &Mlp, x_all: &Tensor, y_all: &Tensor) -> Result<Tensor> {
    Context::new().training(true).run(|| {
        let s = Tensor::randint(&[8], 0, 64)?;
        let (x, y) = (x_all.index(&s)?, y_all.index(&s)?);
        m.w1.set_grad(None);
        m.w2.set_grad(None);
        let h = x.matmul(&m.w1)?.relu()?.dropout(0.2)?;
        let loss = h
            .matmul(&m.w2)?
            .sparse_categorical_crossentropy(&y, &CrossEntropyOpts::default())?;
        loss.backward()?;
        for w in [&m.w1, &m.w2] {
            let g = w.grad().expect("grad").detach();
            w.assign(&w.detach().sub(&g.mul(0.1)?)?)?;
        }
        Tensor::realize_all(&[&m.w1, &m.w2, &loss])?;
        Ok(loss)
    })
}

fn dataset() -> (Tensor, Tensor) {
    let x: Vec<f32> = (0..64 * 16)
        .map(|i| ((i * 37) % 17) as f32 / 8.0 - 1.0)
        .collect();
    let y: Vec<i32> = (0..64).map(|i| (i * 3) % 10).collect();
    (
        Tensor::from_vec(x, &[64, 16]).unwrap().realize().unwrap(),
        Tensor::from_vec(y, &[64]).unwrap().realize().unwrap(),
    )
}

fn losses(dev: Device, jit: bool) -> Vec<f32> {
    Context::new().dev(dev).run(|| {
        Tensor::manual_seed(3);
        let m = mlp();
        let (x, y) = dataset();
        let mut f = TinyJit::new(|_: &[Tensor]| Ok(vec![step(&m, &x, &y)?]));
        let mut out = vec![];
        for _ in 0..25 {
            let loss = if jit {
                f.call(&[])
                    .unwrap_or_else(|e| panic!("{dev}: {e}"))
                    .remove(0)
            } else {
                step(&m, &x, &y).unwrap()
            };
            out.push(loss.item::<f32>().unwrap());
        }
        out
    })
}

#[test]
fn replay_equals_eager() {
    for dev in common::devices() {
        let eager = losses(dev, false);
        let jitted = losses(dev, true);
        assert_eq!(eager.len(), 25);
        for (i, (a, b)) in eager.iter().zip(&jitted).enumerate() {
            assert!(
                (a - b).abs() <= 1e-6 * a.abs().max(1.0),
                "{dev} step {i}: eager {a} vs jit {b}"
            );
        }
        // Random batches and dropout differ every step, so the losses do too.
        let distinct = jitted.windows(2).filter(|w| w[0] != w[1]).count();
        assert!(distinct > 20, "{dev}: losses barely change: {jitted:?}");
        assert!(jitted[24] < jitted[0] * 1.5);
    }
}

fn err_kind<T>(r: Result<T>) -> (ErrorKind, String) {
    match r {
        Ok(_) => panic!("expected an error"),
        Err(e) => (e.kind, e.msg),
    }
}

#[test]
fn input_mismatch_and_duplicates_are_errors() {
    for dev in common::devices() {
        Context::new().dev(dev).run(|| {
            let mut f = TinyJit::new(|xs: &[Tensor]| Ok(vec![xs[0].add(&xs[1])?.mul(2.0)?]));
            let a = Tensor::from_vec(vec![1.0f32; 4], &[4]).unwrap();
            let b = Tensor::from_vec(vec![2.0f32; 4], &[4]).unwrap();
            for _ in 0..3 {
                assert_eq!(
                    f.call(&[&a, &b]).unwrap()[0].to_vec::<f32>().unwrap(),
                    vec![6.0; 4]
                );
            }
            // New values are used by the replay.
            let c = Tensor::from_vec(vec![5.0f32; 4], &[4]).unwrap();
            assert_eq!(
                f.call(&[&a, &c]).unwrap()[0].to_vec::<f32>().unwrap(),
                vec![12.0; 4]
            );
            let wrong = Tensor::from_vec(vec![1.0f32; 5], &[5]).unwrap();
            let (k, m) = err_kind(f.call(&[&a, &wrong]));
            assert_eq!(k, ErrorKind::Jit);
            assert!(
                m.contains("input 1") && m.contains("[5]") && m.contains("[4]"),
                "{m}"
            );
            let ints = Tensor::from_vec(vec![1i32; 4], &[4]).unwrap();
            assert!(err_kind(f.call(&[&a, &ints])).1.contains("i32"));
            let (k, m) = err_kind(f.call(&[&a, &a]));
            assert_eq!(k, ErrorKind::Jit);
            assert!(m.contains("duplicate"), "{m}");
            // reset() captures again, with the new shapes.
            f.reset();
            for _ in 0..3 {
                assert_eq!(
                    f.call(&[&wrong, &wrong.add(1.0).unwrap()]).unwrap()[0]
                        .to_vec::<f32>()
                        .unwrap(),
                    vec![6.0; 5]
                );
            }
        });
    }
}

#[test]
fn readback_nesting_and_empty_capture_are_errors() {
    for dev in common::devices() {
        Context::new().dev(dev).run(|| {
            let a = Tensor::from_vec(vec![1.0f32; 4], &[4]).unwrap();
            let mut reads = TinyJit::new(|xs: &[Tensor]| {
                let s = xs[0].sum((), false)?;
                let v = s.item::<f32>()?;
                Ok(vec![xs[0].mul(v)?])
            });
            reads.call(&[&a]).unwrap();
            let (k, m) = err_kind(reads.call(&[&a]));
            assert_eq!(k, ErrorKind::Jit);
            assert!(m.contains("reading"), "{m}");

            let mut empty = TinyJit::new(|xs: &[Tensor]| Ok(vec![xs[0].clone()]));
            empty.call(&[&a]).unwrap();
            let (k, m) = err_kind(empty.call(&[&a]));
            assert_eq!(k, ErrorKind::Jit);
            assert!(m.contains("no kernel"), "{m}");

            let inner =
                std::cell::RefCell::new(TinyJit::new(|xs: &[Tensor]| Ok(vec![xs[0].add(1.0)?])));
            let mut outer = TinyJit::new(|xs: &[Tensor]| inner.borrow_mut().call(&[&xs[0]]));
            outer.call(&[&a]).unwrap();
            let (k, m) = err_kind(outer.call(&[&a]));
            assert_eq!(k, ErrorKind::Jit);
            assert!(m.contains("nested"), "{m}");
        });
    }
}

#[test]
fn memory_planning_shares_intermediate_buffers() {
    Context::new().dev(Device::Interp).run(|| {
        Tensor::manual_seed(5);
        let m = mlp();
        let (x, y) = dataset();
        let mut f = TinyJit::new(|_: &[Tensor]| Ok(vec![step(&m, &x, &y)?]));
        for _ in 0..3 {
            f.call(&[]).unwrap();
        }
        let (before, after) = f.planned_bytes().unwrap();
        // Intermediates whose lifetimes do not overlap (index results, random bits, softmax
        // pieces, backward temporaries) share buffers; forward activations read by the
        // backward pass live long. Pinned: a change in scheduling or planning shows up here.
        assert!(after < before, "planned {before} -> {after} bytes");
        assert_eq!(
            (before, after),
            (4712, 4288),
            "bytes of intermediates before/after planning"
        );
        eprintln!(
            "memory planning: {before} -> {after} bytes, {} launches",
            f.launches()
        );
    });
}

#[test]
fn rand_differs_on_every_replay() {
    for dev in common::devices() {
        Context::new().dev(dev).run(|| {
            let mut f = TinyJit::new(|_: &[Tensor]| {
                Ok(vec![Tensor::rand(&[6])?.mul(10.0)?.cast(DType::I32)?])
            });
            let draws: Vec<Vec<i32>> = (0..5)
                .map(|_| f.call(&[]).unwrap()[0].to_vec::<i32>().unwrap())
                .collect();
            for i in 0..draws.len() {
                for j in 0..i {
                    assert_ne!(draws[i], draws[j]);
                }
            }
        });
    }
}

/// A profiled replay (`replay_profiled`) runs the same step as a plain replay, and times every
/// launch that `kernels()` lists: the device's timestamps on WebGPU where the adapter has them,
/// the host clock elsewhere.
#[test]
fn profiled_replay_trains_like_a_replay_and_times_every_kernel() {
    for dev in common::devices() {
        let plain = losses(dev, true);
        let (profiled, kernels, timer, ns) = Context::new().dev(dev).run(|| {
            Tensor::manual_seed(3);
            let m = mlp();
            let (x, y) = dataset();
            let mut f = TinyJit::new(|_: &[Tensor]| Ok(vec![step(&m, &x, &y)?]));
            assert!(f.kernels().is_empty(), "{dev}: kernels before capture");
            let mut out = vec![];
            let mut timing = None;
            for i in 0..25 {
                let loss = if i == 4 {
                    let (o, fut) = f.replay_profiled(&[]).unwrap();
                    timing = Some(wgrad::runtime::block_on(fut).unwrap());
                    o[0].clone()
                } else {
                    f.call(&[])
                        .unwrap_or_else(|e| panic!("{dev}: {e}"))
                        .remove(0)
                };
                out.push(loss.item::<f32>().unwrap());
            }
            let (timer, ns) = timing.expect("profiled");
            (out, f.kernels(), timer, ns)
        });
        assert_eq!(
            plain, profiled,
            "{dev}: a profiled replay changed the training"
        );
        assert!(!kernels.is_empty(), "{dev}: no kernels listed");
        assert_eq!(ns.len(), kernels.len(), "{dev}: one time per launch");
        for k in &kernels {
            assert!(
                !k.name.is_empty() && k.global_size > 0 && k.local_size > 0,
                "{dev}: {k:?}"
            );
            match dev {
                Device::Wgpu => assert!(k.source.contains("@compute"), "{dev}: {}", k.source),
                Device::Interp => assert!(k.source.is_empty()),
                _ => assert!(!k.source.is_empty(), "{dev}: {} has no source", k.name),
            }
        }
        let total: u64 = ns.iter().sum();
        assert!(total > 0, "{dev}: the profile measured nothing: {ns:?}");
        match timer {
            // The host clock around a launch and a readback always sees time pass.
            wgrad::Timer::Host => assert!(ns.iter().all(|&t| t > 0), "{dev}: {ns:?}"),
            wgrad::Timer::Device => assert_eq!(dev, Device::Wgpu),
        }
        println!(
            "{dev}: {} kernels profiled by {timer:?}, {total} ns in all",
            kernels.len()
        );
    }
}

/// `JIT_VERIFY=1` on a correct step (random batches, dropout, SGD): every replay is checked and
/// passes, and the losses are bit for bit those of the unverified JIT, so verification puts
/// back what it ran (the weights, the random counter).
#[test]
fn verified_replays_pass_and_change_nothing() {
    for dev in common::devices() {
        let plain = losses(dev, true);
        let verified = Context::new().jit_verify(1).run(|| losses(dev, true));
        assert_eq!(plain, verified, "{dev}");
    }
}

fn ones(v: f32) -> Tensor {
    Tensor::from_vec(vec![v; 4], &[4])
        .unwrap()
        .realize()
        .unwrap()
}

fn values(t: &Tensor) -> Vec<f32> {
    t.to_vec::<f32>().unwrap()
}

/// Footgun: a learning rate held on the host is baked into the captured kernel. The replay keeps
/// the old one silently; `JIT_VERIFY=3` reports it at the third replay, naming the launch.
#[test]
fn verify_reports_a_host_learning_rate_changed_between_calls() {
    for dev in common::devices() {
        Context::new().dev(dev).jit_verify(3).run(|| {
            let w = ones(1.0);
            let lr = std::cell::Cell::new(0.5f32);
            let mut f = TinyJit::new(|xs: &[Tensor]| {
                w.assign(&w.detach().sub(&xs[0].mul(lr.get())?)?)?;
                Tensor::realize_all(&[&w])?;
                Ok(vec![w.clone()])
            });
            let x = ones(1.0);
            for want in [0.5, 0.0, -0.5] {
                assert_eq!(values(&f.call(&[&x]).unwrap()[0]), vec![want; 4], "{dev}");
            }
            lr.set(0.25);
            // Replay 2 is not verified: the old rate, where an eager step would give -0.75.
            assert_eq!(values(&f.call(&[&x]).unwrap()[0]), vec![-1.0; 4], "{dev}");
            let (k, m) = err_kind(f.call(&[&x]));
            assert_eq!(k, ErrorKind::Jit);
            assert!(
                m.starts_with("JIT_VERIFY: launch 0: the function now runs kernel")
                    && m.contains("host value"),
                "{dev}: {m}"
            );
            // The eager run's update stands; a new capture uses the new rate.
            assert_eq!(values(&w), vec![-1.25; 4], "{dev}");
            f.reset();
            for want in [-1.5, -1.75, -2.0, -2.25] {
                assert_eq!(values(&f.call(&[&x]).unwrap()[0]), vec![want; 4], "{dev}");
            }
        });
    }
}

/// Footgun: the step reads its batch from a variable outside the function instead of its
/// inputs, and the loop swaps in the next batch, a tensor of the same shape. The replay keeps
/// reading the first batch; verify names the launch and argument that now bind another buffer.
#[test]
fn verify_reports_a_batch_swapped_for_another_tensor_of_the_same_shape() {
    for dev in common::devices() {
        Context::new().dev(dev).run(|| {
            let w = ones(0.0);
            let batch = std::cell::RefCell::new(ones(1.0));
            let mut f = TinyJit::new(|_: &[Tensor]| {
                w.assign(&w.detach().add(&*batch.borrow())?)?;
                Tensor::realize_all(&[&w])?;
                Ok(vec![w.clone()])
            });
            for _ in 0..3 {
                f.call(&[]).unwrap();
            }
            *batch.borrow_mut() = ones(10.0);
            assert_eq!(values(&f.call(&[]).unwrap()[0]), vec![4.0; 4], "stale batch");
            let (k, m) = Context::new().jit_verify(1).run(|| err_kind(f.call(&[])));
            assert_eq!(k, ErrorKind::Jit);
            assert!(
                m.contains("argument")
                    && m.contains("now binds a tensor from outside the function where the capture bound a tensor from outside"),
                "{dev}: {m}"
            );
            assert_eq!(values(&w), vec![14.0; 4], "{dev}: the eager step read the new batch");
        });
    }
}

/// Footgun: a tensor captured from outside the function gets an update that is not realized
/// before the call (a lazy `assign`). An eager step would run it first; the replay reads the old
/// buffer. Verify reports the extra launch of the eager run.
#[test]
fn verify_reports_a_pending_update_of_a_tensor_captured_from_outside() {
    for dev in common::devices() {
        Context::new().dev(dev).run(|| {
            let scale = ones(2.0);
            let mut f = TinyJit::new(|xs: &[Tensor]| Ok(vec![xs[0].mul(&scale)?]));
            let x = ones(3.0);
            for _ in 0..3 {
                assert_eq!(values(&f.call(&[&x]).unwrap()[0]), vec![6.0; 4]);
            }
            scale.assign(&scale.add(1.0).unwrap()).unwrap();
            assert_eq!(
                values(&f.call(&[&x]).unwrap()[0]),
                vec![6.0; 4],
                "stale scale"
            );
            let (k, m) = Context::new().jit_verify(1).run(|| err_kind(f.call(&[&x])));
            assert_eq!(k, ErrorKind::Jit);
            assert!(m.starts_with("JIT_VERIFY: launch 0"), "{dev}: {m}");
            assert_eq!(values(&scale), vec![3.0; 4], "{dev}");
        });
    }
}

/// A step that updates its input and an outside tensor in place: verified replays leave both
/// with the values of plain replays (the eager run works on copies of the inputs, and the
/// replay's writes are put back).
#[test]
fn verified_replays_keep_in_place_updates_of_inputs() {
    for dev in common::devices() {
        let run = |verify: u32| -> Vec<Vec<f32>> {
            Context::new().dev(dev).jit_verify(verify).run(|| {
                let w = ones(1.0);
                let mut f = TinyJit::new(|xs: &[Tensor]| {
                    xs[0].assign(&xs[0].mul(2.0)?.add(&w)?)?;
                    w.assign(&w.add(1.0)?)?;
                    let s = xs[0].sum((), false)?;
                    Tensor::realize_all(&[&xs[0], &w, &s])?;
                    Ok(vec![s])
                });
                let x = ones(0.5);
                let mut seen = vec![];
                for _ in 0..5 {
                    let s = f.call(&[&x]).unwrap().remove(0);
                    seen.push(vec![values(&x)[0], values(&w)[0], s.item::<f32>().unwrap()]);
                }
                seen
            })
        };
        let plain = run(0);
        assert_eq!(plain[4], vec![73.0, 6.0, 292.0], "{dev}");
        assert_eq!(run(1), plain, "{dev}");
    }
}

/// `GlobalCounters::stage_ns`: a realize of a new kernel times its schedule, plan, lowering and
/// compile; the same kernel again only schedules (its program is cached).
#[test]
fn the_stages_before_a_kernel_runs_are_timed() {
    use wgrad::context::Stage;
    for dev in common::devices() {
        Context::new().dev(dev).run(|| {
            GlobalCounters::reset();
            // A constant no other test uses: a kernel this process has not compiled.
            let x = Tensor::from_vec(vec![1.0f32, 2.0, 3.0], &[3]).unwrap();
            let y = x.mul(1.234_567_8f32).unwrap().exp2().unwrap();
            y.realize().unwrap();
            let first = Stage::ALL.map(GlobalCounters::stage_ns);
            for s in Stage::ALL {
                assert!(first[s as usize] > 0, "{dev}: {} took 0 ns", s.name());
            }
            let z = x.mul(1.234_567_8f32).unwrap().exp2().unwrap();
            z.realize().unwrap();
            let again = Stage::ALL.map(GlobalCounters::stage_ns);
            assert!(again[Stage::Schedule as usize] > first[Stage::Schedule as usize]);
            for s in [Stage::Plan, Stage::Lower, Stage::Compile] {
                assert_eq!(
                    again[s as usize],
                    first[s as usize],
                    "{dev}: {} again",
                    s.name()
                );
            }
        });
    }
}

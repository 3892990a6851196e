//! Several devices: numbered instances of a backend (`INTERP:1`, `CPU:1`, `WEBGPU:1`), tensors
//! sharded over them (split along an axis or replicated), ops, autograd, optimizers and TinyJit
//! on sharded tensors, checked against the same computation on one device; the tutorial's CNN
//! trained data-parallel for 20 jitted steps on `CPU:0,CPU:1` and on `WEBGPU:0,CPU:0`.

// Native only: the browser tests are tests/web.rs.
#![cfg(not(target_arch = "wasm32"))]

mod common;

#[path = "../examples/common/model.rs"]
mod model;

use wgrad::nn::optim::{Adam, Optimizer, Sgd};
use wgrad::nn::state::get_parameters;
use wgrad::nn::Linear;
use wgrad::{Context, Device, ErrorKind, Tensor, TinyJit};

fn interp(i: u8) -> Device {
    Device::Interp.with_index(i)
}

fn two() -> Vec<Device> {
    vec![interp(0), interp(1)]
}

/// Values `0, 1, ...` scaled, on INTERP:0.
fn ramp(shape: &[usize], scale: f32) -> Tensor {
    let n: usize = shape.iter().product();
    let v: Vec<f32> = (0..n).map(|i| (i as f32 * 0.37).sin() * scale).collect();
    Context::new()
        .dev(interp(0))
        .run(|| Tensor::from_vec(v, shape).unwrap())
}

fn close(a: &[f32], b: &[f32], tol: f32, what: &str) {
    assert_eq!(a.len(), b.len(), "{what}: lengths");
    for (i, (x, y)) in a.iter().zip(b).enumerate() {
        assert!(
            (x - y).abs() <= tol * (1.0 + y.abs()),
            "{what}[{i}]: {x} vs {y} (tolerance {tol})"
        );
    }
}

#[test]
fn numbered_devices_are_separate_instances() {
    let d1: Device = "interp:1".parse().unwrap();
    assert_eq!(d1, interp(1));
    assert_eq!(d1.to_string(), "INTERP:1");
    assert_eq!("INTERP".parse::<Device>().unwrap(), interp(0));
    let a = Context::new()
        .dev(d1)
        .run(|| Tensor::from_vec(vec![1.0f32, 2.0, 3.0], &[3]).unwrap());
    assert_eq!(a.device(), d1);
    assert_eq!(a.node().buffer().unwrap().device, d1);
    // Moving between instances copies through the host.
    let b = a.to(interp(0)).unwrap().mul(2.0).unwrap();
    assert_eq!(b.device(), interp(0));
    assert_eq!(b.to_vec::<f32>().unwrap(), vec![2.0, 4.0, 6.0]);
    // Instances do not mix without a copy.
    let e = a.add(&b).unwrap_err();
    assert_eq!(e.kind, ErrorKind::Device);
    assert!(
        e.msg.contains("INTERP:1") && e.msg.contains("INTERP:0"),
        "{e}"
    );
    #[cfg(feature = "cpu")]
    if common::usable(Device::Cpu) {
        let c = a.to(Device::Cpu.with_index(1)).unwrap();
        assert_eq!(
            c.add(1.0).unwrap().to_vec::<f32>().unwrap(),
            vec![2.0, 3.0, 4.0]
        );
        assert_eq!(c.device().to_string(), "CPU:1");
    }
}

#[test]
fn sharding_splits_or_replicates_and_gathers_back() {
    let x = ramp(&[4, 3], 1.0);
    let want = x.to_vec::<f32>().unwrap();
    let s = x.shard(&two(), Some(0)).unwrap();
    assert_eq!(
        (s.shape(), s.devices(), s.shard_axis()),
        (vec![4, 3], two(), Some(0))
    );
    let parts = s.shards();
    assert_eq!(parts[0].shape(), vec![2, 3]);
    assert_eq!(parts[1].device(), interp(1));
    assert_eq!(parts[1].to_vec::<f32>().unwrap(), want[6..].to_vec());
    assert_eq!(s.to_vec::<f32>().unwrap(), want);
    let r = x.shard(&two(), None).unwrap();
    assert_eq!(r.shard_axis(), None);
    for p in r.shards() {
        assert_eq!(p.to_vec::<f32>().unwrap(), want);
    }
    // A negative axis counts from the end; the gathered copy lands where asked.
    let c = x.shard(&two(), Some(-1)).unwrap_err();
    assert!(c.msg.contains("shard") && c.msg.contains("[4, 3]"), "{c}");
    let cols = ramp(&[3, 4], 1.0).shard(&two(), Some(-1)).unwrap();
    assert_eq!(cols.shard_axis(), Some(1));
    let back = cols.to(interp(1)).unwrap();
    assert_eq!(back.device(), interp(1));
    assert_eq!(
        back.to_vec::<f32>().unwrap(),
        ramp(&[3, 4], 1.0).to_vec::<f32>().unwrap()
    );
}

#[test]
fn sharding_errors_name_the_op() {
    let x = ramp(&[5, 4], 1.0);
    let e = x.shard(&two(), Some(0)).unwrap_err();
    assert_eq!(e.kind, ErrorKind::Shape);
    assert!(
        e.msg.starts_with("shard:") && e.msg.contains("[5, 4]") && e.msg.contains("2 devices"),
        "{e}"
    );
    let e = x.shard(&two(), Some(2)).unwrap_err();
    assert!(
        e.msg.starts_with("shard:") && e.msg.contains("axis 2"),
        "{e}"
    );
    let e = x.shard(&[interp(0), interp(0)], None).unwrap_err();
    assert!(
        e.msg.starts_with("shard:") && e.msg.contains("twice"),
        "{e}"
    );
    let e = "TPU:0".parse::<Device>().unwrap_err();
    assert!(e.msg.contains("unknown device 'TPU:0'"), "{e}");
    let e = Device::parse_list("INTERP:0,FOO:1").unwrap_err();
    assert!(e.msg.contains("FOO:1"), "{e}");
    #[cfg(feature = "cuda")]
    {
        // A GPU this machine does not have (or no CUDA at all).
        let e = x
            .shard(&[interp(0), Device::Cuda.with_index(200)], None)
            .unwrap_err();
        assert_eq!(e.kind, ErrorKind::Device);
        assert!(
            e.msg.starts_with("shard:") && e.msg.contains("CUDA:200"),
            "{e}"
        );
    }
    // Mixing a sharded tensor with an unsharded one on another device.
    let s = ramp(&[4, 4], 1.0).shard(&two(), Some(0)).unwrap();
    let other = Context::new().dev(interp(2)).run(|| {
        Tensor::ones(&[4, 4])
            .unwrap()
            .contiguous()
            .realize()
            .unwrap()
    });
    let e = s.add(&other).unwrap_err();
    assert_eq!(e.kind, ErrorKind::Device);
    assert!(
        e.msg.starts_with("add:") && e.msg.contains("INTERP:2") && e.msg.contains("split"),
        "{e}"
    );
    // ... even on one of its devices.
    let e = s.mul(ramp(&[4, 4], 1.0)).unwrap_err();
    assert!(
        e.msg.starts_with("mul:") && e.msg.contains("unsharded"),
        "{e}"
    );
    // Different device lists.
    let t = ramp(&[4, 4], 1.0)
        .shard(&[interp(0), interp(2)], Some(0))
        .unwrap();
    let e = s.add(&t).unwrap_err();
    assert!(e.msg.contains("INTERP:2"), "{e}");
    // Moving elements between devices is refused, naming the op.
    let e = s.shrink(&[(1, 3), (0, 4)]).unwrap_err();
    assert!(
        e.msg.starts_with("shrink:") && e.msg.contains("split"),
        "{e}"
    );
    let e = s
        .reshape(&[16])
        .map(|_| ())
        .and_then(|_| s.flip(&[0]).map(|_| ()));
    let e = e.unwrap_err();
    assert!(e.msg.starts_with("flip:"), "{e}");
    // Constants join a sharded tensor on every device.
    let c = s.add(Tensor::ones(&[4]).unwrap()).unwrap();
    assert_eq!(c.devices(), two());
}

/// `f` on one device and with `x` split over two (and `w` replicated): the same values.
fn same_sharded(what: &str, x: &Tensor, w: &Tensor, f: impl Fn(&Tensor, &Tensor) -> Tensor) {
    let want = f(x, w).to_vec::<f32>().unwrap();
    let (xs, ws) = (
        x.shard(&two(), Some(0)).unwrap(),
        w.shard(&two(), None).unwrap(),
    );
    let got = f(&xs, &ws);
    assert_eq!(got.devices(), two(), "{what}");
    close(&got.to_vec::<f32>().unwrap(), &want, 1e-5, what);
}

#[test]
fn ops_on_sharded_tensors_match_one_device() {
    let x = ramp(&[4, 6], 1.0);
    let w = ramp(&[6, 5], 0.5);
    same_sharded("matmul", &x, &w, |x, w| x.matmul(w).unwrap());
    same_sharded("elementwise and broadcast", &x, &w, |x, w| {
        x.relu()
            .unwrap()
            .add(w.sum(1, false).unwrap())
            .unwrap()
            .mul(3.0)
            .unwrap()
    });
    same_sharded("reduce over the split axis", &x, &w, |x, _| {
        x.exp().unwrap().sum(0, true).unwrap()
    });
    same_sharded("max and argmax over the split axis", &x, &w, |x, _| {
        x.max(0, false)
            .unwrap()
            .add(
                x.argmax(Some(0), false)
                    .unwrap()
                    .cast(wgrad::DType::F32)
                    .unwrap(),
            )
            .unwrap()
    });
    same_sharded("softmax, mean, transpose", &x, &w, |x, _| {
        x.softmax(-1).unwrap().t().unwrap().mean(1, false).unwrap()
    });
    let img = ramp(&[4, 2, 6, 6], 1.0);
    let k = ramp(&[3, 2, 3, 3], 0.3);
    same_sharded("conv2d, max_pool2d, flatten", &img, &k, |x, k| {
        x.conv2d(k, None, &Default::default())
            .unwrap()
            .relu()
            .unwrap()
            .max_pool2d((2, 2), None)
            .unwrap()
            .flatten(1)
            .unwrap()
    });
    let labels = Context::new()
        .dev(interp(0))
        .run(|| Tensor::from_vec(vec![1i32, 4, 0, 2], &[4]).unwrap());
    let want = x
        .sparse_categorical_crossentropy(&labels, &Default::default())
        .unwrap()
        .item::<f32>()
        .unwrap();
    let got = x
        .shard(&two(), Some(0))
        .unwrap()
        .sparse_categorical_crossentropy(
            &labels.shard(&two(), Some(0)).unwrap(),
            &Default::default(),
        )
        .unwrap();
    assert_eq!(
        got.shard_axis(),
        None,
        "a loss over the split batch is replicated"
    );
    close(
        &[got.item::<f32>().unwrap()],
        &[want],
        1e-6,
        "cross-entropy",
    );
}

#[test]
fn gradients_are_placed_like_their_parameters() {
    // loss = mean((x @ w) * p): w replicated (its gradient sums both halves of the batch), p
    // split along the batch like x (each device keeps its part's gradient).
    let run = |devices: Option<Vec<Device>>| {
        let x = ramp(&[4, 6], 1.0);
        let w = ramp(&[6, 5], 0.5).contiguous().realize().unwrap();
        let p = ramp(&[4, 5], 2.0).contiguous().realize().unwrap();
        w.set_requires_grad(true);
        p.set_requires_grad(true);
        let x = match &devices {
            Some(d) => {
                w.shard_(d, None).unwrap();
                p.shard_(d, Some(0)).unwrap();
                x.shard(d, Some(0)).unwrap()
            }
            None => x,
        };
        let loss = x
            .matmul(&w)
            .unwrap()
            .mul(&p)
            .unwrap()
            .mean((), false)
            .unwrap();
        loss.backward().unwrap();
        let (gw, gp) = (w.grad().unwrap(), p.grad().unwrap());
        if devices.is_some() {
            assert!(w.requires_grad() && p.requires_grad());
            assert_eq!((gw.devices(), gw.shard_axis()), (two(), None));
            assert_eq!((gp.devices(), gp.shard_axis()), (two(), Some(0)));
            // The replicas of w's gradient are the same bits on both devices.
            let r = gw.shards();
            assert_eq!(r[0].to_vec::<f32>().unwrap(), r[1].to_vec::<f32>().unwrap());
        }
        (
            loss.item::<f32>().unwrap(),
            gw.to_vec::<f32>().unwrap(),
            gp.to_vec::<f32>().unwrap(),
        )
    };
    let (l1, gw1, gp1) = run(None);
    let (l2, gw2, gp2) = run(Some(two()));
    close(&[l2], &[l1], 1e-6, "loss");
    close(&gw2, &gw1, 1e-5, "replicated parameter's gradient");
    close(&gp2, &gp1, 1e-6, "split parameter's gradient");
}

#[test]
fn a_jitted_sgd_step_on_two_devices_replays_on_both() {
    let run = |devices: Option<Vec<Device>>| -> Vec<f32> {
        Context::new().dev(interp(0)).run(|| {
            Tensor::manual_seed(7);
            let l1 = Linear::new(6, 8).unwrap();
            let l2 = Linear::new(8, 3).unwrap();
            let params = vec![
                l1.weight.clone(),
                l1.bias.clone().unwrap(),
                l2.weight.clone(),
                l2.bias.clone().unwrap(),
            ];
            if let Some(d) = &devices {
                for p in &params {
                    p.shard_(d, None).unwrap();
                }
            }
            let mut opt = Sgd::new(params).unwrap().lr(0.1).momentum(0.9);
            let x_all = ramp(&[8, 6], 1.0).realize().unwrap();
            let mut step = TinyJit::new(|_: &[Tensor]| {
                Context::new().training(true).run(|| {
                    let x = match &devices {
                        Some(d) => x_all.shard(d, Some(0))?,
                        None => x_all.clone(),
                    };
                    opt.zero_grad();
                    let loss = l2
                        .forward(&l1.forward(&x)?.relu()?)?
                        .square()?
                        .mean((), false)?;
                    loss.backward()?;
                    opt.step()?;
                    Ok(vec![loss.realize()?])
                })
            });
            let losses = (0..6)
                .map(|_| step.call(&[]).unwrap()[0].item::<f32>().unwrap())
                .collect();
            if devices.is_some() {
                assert!(step.launches() > 0);
                assert_eq!(l1.weight.devices(), two());
            }
            losses
        })
    };
    let one = run(None);
    let sharded = run(Some(two()));
    assert!(one[5] < one[0], "it learns: {one:?}");
    close(&sharded, &one, 1e-5, "losses");
}

/// Losses of `STEPS` jitted training steps of the tutorial's CNN (Adam, batch 64, seed 42),
/// data-parallel over `devices` (parameters replicated, batch split on axis 0) or on
/// `devices[0]` alone; the data and the random draws live on `devices[0]`.
fn train_cnn(devices: &[Device]) -> Vec<f32> {
    const STEPS: usize = 20;
    const BS: usize = 64;
    Context::new().dev(devices[0]).run(|| {
        let data = wgrad::nn::datasets::mnist(false).expect("data/ (bash scripts/data.sh)");
        Tensor::manual_seed(42);
        let model = model::Model::new().unwrap();
        let params = get_parameters(&model);
        if devices.len() > 1 {
            for p in &params {
                p.shard_(devices, None).unwrap();
            }
        }
        let mut opt = Adam::new(params).unwrap();
        let (xt, yt) = (&data.x_train, &data.y_train);
        let mut step = TinyJit::new(|_: &[Tensor]| {
            let loss = model::train_step_sharded(&model, &mut opt, xt, yt, BS, devices)?;
            Ok(vec![loss])
        });
        let losses: Vec<f32> = (0..STEPS)
            .map(|_| step.call(&[]).unwrap()[0].item::<f32>().unwrap())
            .collect();
        if devices.len() > 1 {
            // Every device's replica took every update (replays ran on all of them).
            let w = model.l3.weight.shards();
            assert_eq!(w.len(), devices.len());
            let w0 = w[0].to_vec::<f32>().unwrap();
            for wi in &w[1..] {
                close(
                    &wi.to_vec::<f32>().unwrap(),
                    &w0,
                    1e-5,
                    "replicas of l3.weight",
                );
            }
        }
        losses
    })
}

/// The same losses within `tol` (relative), and the model learned.
fn same_losses(got: &[f32], want: &[f32], tol: f32, what: &str) {
    eprintln!("{what}: {got:?}\n  one device: {want:?}");
    close(got, want, tol, what);
    assert!(want[19] < want[0] * 0.6, "it learns: {want:?}");
}

#[cfg(feature = "cpu")]
#[test]
fn the_tutorial_cnn_trains_the_same_on_two_cpus() {
    if !common::usable(Device::Cpu) {
        return;
    }
    let cpu = |i| Device::Cpu.with_index(i);
    let one = train_cnn(&[cpu(0)]);
    let two = train_cnn(&[cpu(0), cpu(1)]);
    // Only the order of float additions differs (the batch's gradient is summed in two halves,
    // then across the devices).
    same_losses(&two, &one, 1e-4, "CPU:0,CPU:1");
}

#[cfg(all(feature = "cpu", feature = "wgpu"))]
#[test]
fn the_tutorial_cnn_trains_the_same_on_webgpu_and_cpu() {
    if !common::usable(Device::Cpu) || !common::usable(Device::Wgpu) {
        return;
    }
    let one = train_cnn(&[Device::Cpu]);
    let mixed = train_cnn(&[Device::Wgpu, Device::Cpu]);
    // Two backends: WGSL and C round differently (exp, log, fused multiply-adds).
    same_losses(&mixed, &one, 1e-3, "WEBGPU:0,CPU:0");
}

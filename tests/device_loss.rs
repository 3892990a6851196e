//! Device loss natively: the WebGPU device is destroyed mid-training (as a driver reset or
//! `GPUDevice.destroy()` would); every later call on the lost device is an error naming the loss.
//! WebGPU is then initialised again in the same process (`runtime::wgpu::init`): tensors, kernels
//! and captured steps of the lost device stay errors, and training resumes on the new device from
//! the last host snapshot (`nn::state::Snapshots`) with the losses of an uninterrupted run.

#![cfg(not(target_arch = "wasm32"))]

mod common;

use wgrad::nn::optim::{Adam, Optimizer};
use wgrad::nn::state::{get_parameters, Snapshots};
use wgrad::{Context, CrossEntropyOpts, Device, ErrorKind, Result, Tensor, TinyJit};

struct Mlp {
    w1: Tensor,
    w2: Tensor,
}
wgrad::state!(Mlp { w1, w2 });

fn values(n: usize, k: usize) -> Vec<f32> {
    (0..n).map(|i| ((i * k) % 23) as f32 / 23.0 - 0.5).collect()
}

fn mlp() -> Mlp {
    let t = |shape: &[usize], k| {
        let t = Tensor::from_vec(values(shape.iter().product(), k), shape)
            .unwrap()
            .realize()
            .unwrap();
        t.set_requires_grad(true);
        t
    };
    Mlp {
        w1: t(&[16, 32], 7),
        w2: t(&[32, 10], 11),
    }
}

/// A full-batch Adam step (no randomness, so runs on different devices can be compared).
fn step(m: &Mlp, opt: &mut Adam, x: &Tensor, y: &Tensor) -> Result<Tensor> {
    Context::new().training(true).run(|| {
        opt.zero_grad();
        let loss = x
            .matmul(&m.w1)?
            .relu()?
            .matmul(&m.w2)?
            .sparse_categorical_crossentropy(y, &CrossEntropyOpts::default())?;
        loss.backward()?;
        opt.step()?;
        loss.realize()
    })
}

fn data() -> (Tensor, Tensor) {
    let x = Tensor::from_vec(values(32 * 16, 5), &[32, 16]).unwrap();
    let y = Tensor::from_vec((0..32).map(|i: i32| i * 3 % 10).collect(), &[32]).unwrap();
    (x.realize().unwrap(), y.realize().unwrap())
}

/// Losses of `steps` jitted steps on `dev` from the start.
fn reference(dev: Device, steps: usize) -> Vec<f32> {
    Context::new().dev(dev).run(|| {
        let m = mlp();
        let mut opt = Adam::new(get_parameters(&m)).unwrap();
        let (x, y) = data();
        let mut jit = TinyJit::new(|_: &[Tensor]| Ok(vec![step(&m, &mut opt, &x, &y)?]));
        (0..steps)
            .map(|_| jit.call(&[]).unwrap()[0].item::<f32>().unwrap())
            .collect()
    })
}

#[test]
fn training_resumes_on_a_new_webgpu_device_after_the_old_one_is_lost() {
    if !common::usable(Device::Wgpu) {
        return;
    }
    let resume_on = if common::usable(Device::Cpu) {
        Device::Cpu
    } else {
        Device::Interp
    };
    let want = reference(resume_on, 20);
    let mut snaps = Snapshots::every(5);
    Context::new().dev(Device::Wgpu).run(|| {
        let m = mlp();
        // Shared with the snapshots (the jitted step borrows it while it lives).
        let opt = std::cell::RefCell::new(Adam::new(get_parameters(&m)).unwrap());
        let (x, y) = data();
        let mut jit =
            TinyJit::new(|_: &[Tensor]| Ok(vec![step(&m, &mut opt.borrow_mut(), &x, &y)?]));
        for i in 1..=12u64 {
            let loss = jit.call(&[]).unwrap()[0].item::<f32>().unwrap();
            let w = want[i as usize - 1];
            assert!(
                (loss - w).abs() <= 1e-4 * w.abs().max(1.0),
                "step {i}: {loss} vs {w}"
            );
            snaps.after_step(i, &m, &*opt.borrow()).unwrap();
        }
        // The generator's counter now lives on this device.
        Tensor::rand(&[8]).unwrap().realize().unwrap();
        wgrad::runtime::wgpu::lose_device().unwrap();
        let lost = |what: &str, r: Result<()>| {
            let e = r.expect_err(what);
            assert!(e.msg.contains("device lost"), "{what}: {}", e.msg);
            assert_eq!(e.kind, ErrorKind::DeviceLost, "{what}: {}", e.msg);
            eprintln!("{what}: {}", e.msg);
        };
        lost("a replay", jit.call(&[]).map(|_| ()));
        lost("a read", m.w1.to_vec::<f32>().map(|_| ()));
        lost(
            "a new tensor",
            Tensor::ones(&[4]).and_then(|t| t.realize()).map(|_| ()),
        );
        lost(
            "an eager step",
            step(&m, &mut opt.borrow_mut(), &x, &y).map(|_| ()),
        );
        lost(
            "a snapshot",
            wgrad::nn::state::Snapshot::take(13, &m, &*opt.borrow()).map(|_| ()),
        );

        // WebGPU again, in this process: a new device in the lost one's place.
        let info = wgrad::runtime::block_on(wgrad::runtime::wgpu::init()).unwrap();
        eprintln!("re-initialised on {}", info.name);
        // What was made on the lost device stays an error naming the loss.
        lost("a read after re-init", m.w1.to_vec::<f32>().map(|_| ()));
        lost("an old replay after re-init", jit.call(&[]).map(|_| ()));
        lost(
            "an op on an old tensor after re-init",
            m.w1.add(&m.w1).and_then(|t| t.realize()).map(|_| ()),
        );

        // Random draws start a new counter on the new device.
        let r = Tensor::rand(&[1000]).unwrap().to_vec::<f32>().unwrap();
        assert!(r.iter().all(|v| (0.0..1.0).contains(v)) && r[0] != r[1]);

        let snap = snaps.last().expect("a snapshot");
        assert_eq!(snap.step, 10);
        let m = mlp();
        let mut opt = Adam::new(get_parameters(&m)).unwrap();
        snap.restore(&m, &opt).unwrap();
        let (x, y) = data();
        let mut jit = TinyJit::new(|_: &[Tensor]| Ok(vec![step(&m, &mut opt, &x, &y)?]));
        for i in 11..=20 {
            let loss = jit.call(&[]).unwrap()[0].item::<f32>().unwrap();
            let w = want[i - 1];
            assert!(
                (loss - w).abs() <= 1e-4 * w.abs().max(1.0),
                "resumed step {i} on the new device: {loss} vs {w}"
            );
        }
    });
}

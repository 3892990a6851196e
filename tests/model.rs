//! The tutorial's CNN (Conv2d(1,32,3) → relu → max_pool2d(2) → Conv2d(32,64,3) → relu →
//! max_pool2d(2) → flatten → dropout(0.5) → Linear(1600,10)), forward and backward at batch 128
//! on random data: `cpu` must give the same loss and gradients as the reference `interp`.

// Native only: the browser tests are tests/web.rs.
#![cfg(not(target_arch = "wasm32"))]

use wgrad::{Context, Conv2dOpts, CrossEntropyOpts, DType, Device, Tensor};

struct Params {
    w1: Vec<f32>,
    b1: Vec<f32>,
    w2: Vec<f32>,
    b2: Vec<f32>,
    w3: Vec<f32>,
    b3: Vec<f32>,
}

fn lcg(n: usize, seed: u64, scale: f32) -> Vec<f32> {
    let mut s = seed;
    (0..n)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((s >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0) * scale
        })
        .collect()
}

/// Loss and the gradients of all parameters on `dev`.
fn run(dev: Device, p: &Params, x: &[u8], y: &[i32], bs: usize) -> Vec<Vec<f32>> {
    Context::new().dev(dev).training(true).run(|| {
        Tensor::manual_seed(7);
        let t = |v: &[f32], s: &[usize]| {
            let t = Tensor::from_slice(v, s).unwrap();
            t.set_requires_grad(true);
            t
        };
        let (w1, b1) = (t(&p.w1, &[32, 1, 3, 3]), t(&p.b1, &[32]));
        let (w2, b2) = (t(&p.w2, &[64, 32, 3, 3]), t(&p.b2, &[64]));
        let (w3, b3) = (t(&p.w3, &[10, 1600]), t(&p.b3, &[10]));
        let x = Tensor::from_slice(x, &[bs, 1, 28, 28])
            .unwrap()
            .cast(DType::F32)
            .unwrap();
        let y = Tensor::from_slice(y, &[bs]).unwrap();
        let o = Conv2dOpts::default();
        let h = x
            .conv2d(&w1, Some(&b1), &o)
            .unwrap()
            .relu()
            .unwrap()
            .max_pool2d((2, 2), None)
            .unwrap();
        let h = h
            .conv2d(&w2, Some(&b2), &o)
            .unwrap()
            .relu()
            .unwrap()
            .max_pool2d((2, 2), None)
            .unwrap();
        let h = h.flatten(1).unwrap().dropout(0.5).unwrap();
        let logits = h.linear(&w3.t().unwrap(), Some(&b3)).unwrap();
        let loss = logits
            .sparse_categorical_crossentropy(&y, &CrossEntropyOpts::default())
            .unwrap();
        loss.backward().unwrap();
        let mut out = vec![loss.to_vec_f32().unwrap()];
        for w in [&w1, &b1, &w2, &b2, &w3, &b3] {
            out.push(w.grad().unwrap().to_vec_f32().unwrap());
        }
        out
    })
}

#[test]
fn tutorial_model_cpu_matches_interp() {
    if let Err(e) = Device::Cpu.available() {
        eprintln!("skipped: cpu backend unavailable: {e}");
        return;
    }
    let bs = 128;
    let p = Params {
        w1: lcg(32 * 9, 1, 1.0 / 3.0),
        b1: lcg(32, 2, 1.0 / 3.0),
        w2: lcg(64 * 32 * 9, 3, 1.0 / (288f32).sqrt()),
        b2: lcg(64, 4, 1.0 / (288f32).sqrt()),
        w3: lcg(10 * 1600, 5, 1.0 / 40.0),
        b3: lcg(10, 6, 1.0 / 40.0),
    };
    let x: Vec<u8> = lcg(bs * 784, 8, 1.0)
        .iter()
        .map(|v| ((v + 1.0) * 127.0) as u8)
        .collect();
    let y: Vec<i32> = (0..bs as i32).map(|i| (i * 7) % 10).collect();
    let want = run(Device::Interp, &p, &x, &y, bs);
    let got = run(Device::Cpu, &p, &x, &y, bs);
    let names = ["loss", "w1", "b1", "w2", "b2", "w3", "b3"];
    assert!(want[0][0].is_finite() && want[0][0] > 0.0);
    for ((name, g), w) in names.iter().zip(&got).zip(&want) {
        assert_eq!(g.len(), w.len());
        let scale = w.iter().fold(0f32, |m, v| m.max(v.abs())).max(1.0);
        for (i, (a, b)) in g.iter().zip(w).enumerate() {
            assert!(
                (a - b).abs() <= 1e-4 * scale,
                "{name}[{i}]: cpu {a} vs interp {b} (scale {scale})"
            );
        }
    }
}

//! Fusion and scheduling: kernel counts of common patterns, and the per-kernel buffer limit.

// Native only: the browser tests are tests/web.rs.
#![cfg(not(target_arch = "wasm32"))]

mod common;

use wgrad::codegen::OptTarget;
use wgrad::schedule::ScheduleItem;
use wgrad::{Context, CrossEntropyOpts, Device, GlobalCounters, Result, Tensor};

/// Kernels launched while realizing `f()`'s result (inputs are realized first).
fn kernels(f: impl Fn() -> Result<Tensor>) -> usize {
    Context::new().dev(Device::Interp).run(|| {
        let t = f().unwrap();
        let n = wgrad::Tensor::schedule_all(&[&t]).unwrap().len();
        let before = GlobalCounters::kernel_count();
        t.realize().unwrap();
        assert_eq!(GlobalCounters::kernel_count() - before, n as u64);
        n
    })
}

fn data(shape: &[usize]) -> Tensor {
    let n: usize = shape.iter().product();
    let v: Vec<f32> = (0..n)
        .map(|i| ((i * 7919) % 23) as f32 / 7.0 - 1.5)
        .collect();
    Tensor::from_vec(v, shape).unwrap()
}

#[test]
fn elementwise_chain_is_one_kernel() {
    let (a, b, c) = (data(&[4, 5]), data(&[4, 5]), data(&[5]));
    assert_eq!(kernels(|| a.add(&b)?.mul(&c)), 1);
    assert_eq!(kernels(|| a.add(&b)?.mul(&c)?.exp()?.sqrt()?.neg()), 1);
}

#[test]
fn reduce_fuses_its_input_and_epilogue() {
    let x = data(&[8, 16]);
    assert_eq!(kernels(|| x.relu()?.sum((), false)), 1);
    assert_eq!(kernels(|| x.mean(1, false)?.mul(3.0)), 1);
    // matmul: the broadcast multiply fuses into the reduce.
    let y = data(&[16, 4]);
    assert_eq!(kernels(|| x.matmul(&y)), 1);
}

#[test]
fn softmax_is_at_most_three_kernels() {
    let x = data(&[6, 10]);
    let n = kernels(|| x.softmax(-1));
    assert!(n <= 3, "softmax took {n} kernels");
    let v = Context::new()
        .dev(Device::Interp)
        .run(|| x.softmax(-1).unwrap().to_vec::<f32>().unwrap());
    for row in v.chunks(10) {
        assert!((row.iter().sum::<f32>() - 1.0).abs() < 1e-5);
    }
}

/// A layer norm's `x̂ · γ` feeding a matmul is one multiply that the matmul would compute again
/// for every tile of its output columns. Where kernels keep operands in registers only (a
/// CPU-kind optimizer target, the interpreter's) it gets a kernel of its own; shaped for a GPU,
/// whose kernels stage it in workgroup memory, it stays inlined. An operation of one buffer
/// (`2 · x̂`) costs no second load and stays inlined everywhere.
#[test]
fn a_product_of_two_buffers_broadcast_into_a_matmul_is_kept_in_memory_on_the_cpu() {
    let (xhat, gamma, w) = (data(&[64, 64]), data(&[64]), data(&[64, 48]));
    let count = |target: OptTarget, f: &dyn Fn() -> Result<Tensor>| {
        Context::new().opt_target(target).run(|| kernels(f))
    };
    let normed = || xhat.mul(&gamma)?.matmul(&w);
    assert_eq!(count(OptTarget::Cpu, &normed), 2, "x̂ · γ, then the matmul");
    assert_eq!(
        count(OptTarget::Gpu, &normed),
        1,
        "the matmul, x̂ · γ inlined"
    );
    let scaled = || xhat.mul(2.0)?.matmul(&w);
    assert_eq!(count(OptTarget::Cpu, &scaled), 1);
    // The same values either way (to rounding: the two targets' plans sum in other orders).
    let values = |target: OptTarget| {
        Context::new()
            .dev(Device::Interp)
            .opt_target(target)
            .run(|| normed().unwrap().to_vec::<f32>().unwrap())
    };
    let (cpu, gpu) = (values(OptTarget::Cpu), values(OptTarget::Gpu));
    assert_eq!(cpu.len(), 64 * 48);
    let worst = cpu
        .iter()
        .zip(&gpu)
        .map(|(a, b)| (a - b).abs() / (1.0 + b.abs()))
        .fold(0.0f32, f32::max);
    assert!(worst < 1e-5, "largest difference {worst}");
}

/// One SGD step of a 2-layer MLP (forward, backward, update) realized as one schedule.
#[test]
fn mlp_training_step_kernel_count() {
    Context::new().dev(Device::Interp).training(true).run(|| {
        Tensor::manual_seed(1);
        let w1 = Tensor::uniform(&[16, 32], -0.3, 0.3)
            .unwrap()
            .realize()
            .unwrap();
        let w2 = Tensor::uniform(&[32, 10], -0.3, 0.3)
            .unwrap()
            .realize()
            .unwrap();
        let (x, y) = (
            data(&[8, 16]),
            Tensor::from_vec((0..8).map(|i| i % 10).collect::<Vec<i32>>(), &[8]).unwrap(),
        );
        for w in [&w1, &w2] {
            w.set_requires_grad(true);
        }
        let loss = x
            .matmul(&w1)
            .unwrap()
            .relu()
            .unwrap()
            .matmul(&w2)
            .unwrap()
            .sparse_categorical_crossentropy(&y, &CrossEntropyOpts::default())
            .unwrap();
        loss.backward().unwrap();
        for w in [&w1, &w2] {
            let g = w.grad().unwrap().detach();
            w.assign(&w.detach().sub(g.mul(0.1).unwrap()).unwrap())
                .unwrap();
        }
        let items = wgrad::Tensor::schedule_all(&[&w1, &w2, &loss]).unwrap();
        let n = items.len();
        // forward: hidden, relu, logits, max, sum-exp and log of log_softmax, picked log-prob
        // (the one-hot mask from `iota` inline), loss (8); backward: the picked log-prob's,
        // d_logits, d_relu (3); each weight update fuses with its gradient reduce and writes in
        // place (2).
        assert_eq!(n, 13, "kernels for one MLP training step");
        let before = loss.item::<f32>().unwrap();
        Tensor::realize_all(&[&w1, &w2]).unwrap();
        assert!(before.is_finite());
    });
}

/// A pre-LayerNorm block's input (`x`, read by the norm and by the residual add) through a
/// layer norm, its gain and a matmul, forward and backward. The centred input `x - mean` is
/// read by the variance, the normalized output and the gradients, but reading it inline costs
/// one read of `x` (the row's mean, broadcast, stays in cache): no kernel of its own.
#[test]
fn a_layer_norm_step_computes_its_centred_input_inline() {
    Context::new().dev(Device::Interp).training(true).run(|| {
        let x = data(&[8, 32, 64]);
        let (g, w) = (data(&[64]), data(&[64, 48]));
        for t in [&x, &g, &w] {
            t.set_requires_grad(true);
        }
        let y = x.layernorm(-1, 1e-5).unwrap().mul(&g).unwrap();
        let loss = y
            .matmul(&w)
            .unwrap()
            .square()
            .unwrap()
            .mean((), false)
            .unwrap();
        loss.backward().unwrap();
        let grads: Vec<Tensor> = [&x, &g, &w].iter().map(|t| t.grad().unwrap()).collect();
        let mut all: Vec<&Tensor> = grads.iter().collect();
        all.push(&loss);
        let items = Tensor::schedule_all(&all).unwrap();
        let centred = items
            .iter()
            .filter(|it| match it {
                ScheduleItem::Kernel { ast, .. } => {
                    let text = format!("{ast}");
                    ast.root.shape == [8, 32, 64]
                        && !text.contains("Reduce")
                        && text.contains("Neg")
                        && text.lines().filter(|l| l.contains("= Load")).count() == 2
                }
                _ => false,
            })
            .count();
        assert_eq!(centred, 0, "kernels computing x - mean alone");
        // (15 with it in memory.)
        assert!(items.len() <= 13, "{} kernels", items.len());
    });
}

#[test]
fn kernels_respect_the_buffer_limit() {
    let ts: Vec<Tensor> = (0..7)
        .map(|i| data(&[3, 4]).add(i as f64).unwrap().realize().unwrap())
        .collect();
    let sum = |ts: &[Tensor]| -> Result<Tensor> {
        let mut acc = ts[0].clone();
        for t in &ts[1..] {
            acc = acc.mul(t)?.add(t)?;
        }
        Ok(acc)
    };
    Context::new().dev(Device::Interp).run(|| {
        let want = sum(&ts).unwrap().to_vec::<f32>().unwrap();
        let free = wgrad::Tensor::schedule_all(&[&sum(&ts).unwrap()]).unwrap();
        assert_eq!(free.len(), 1);
        Context::new().max_buffers(4).run(|| {
            let t = sum(&ts).unwrap();
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

/// A gather along a long axis (`data[idx]` with tensor indices: batches of token windows drawn
/// from a text, an embedding lookup) loads each output directly, in a kernel without a loop
/// (`get` first wraps negative indices in a small kernel of its own): the
/// optimizer must not split, group or unroll the one-hot reduce that the rewrite rules fold,
/// which would keep a loop over the whole indexed axis per output (1.2 s instead of 10 µs for
/// 16 windows of a 4.5M-character text on the CPU).
#[test]
fn a_gather_along_a_long_axis_loads_directly_on_every_device() {
    let n = 100_000usize;
    let v: Vec<f32> = (0..n).map(|i| (i % 1000) as f32).collect();
    for dev in common::devices() {
        Context::new().dev(dev).run(|| {
            let x = Tensor::from_vec(v.clone(), &[n]).unwrap();
            let idx = Tensor::from_vec(vec![0i32, 7, 99_999, 50_123, 98_002, 3], &[2, 3]).unwrap();
            for out in [x.get(&wgrad::s![&idx]).unwrap(), x.index(&idx).unwrap()] {
                let (k0, ops0) = (GlobalCounters::kernel_count(), GlobalCounters::global_ops());
                out.realize().unwrap();
                let (k, ops) = (
                    GlobalCounters::kernel_count() - k0,
                    GlobalCounters::global_ops() - ops0,
                );
                assert!(k <= 2, "{dev}: {k} kernels");
                assert!(ops < 1000, "{dev}: {ops} ops for 6 loads");
                assert_eq!(
                    out.to_vec::<f32>().unwrap(),
                    [0.0, 7.0, 999.0, 123.0, 2.0, 3.0],
                    "{dev}"
                );
            }
        });
    }
}

/// A reduce read through one view by two kernels (a row sum of it, and an elementwise use) is
/// computed once, in a kernel of its own that both read, not fused again into the second
/// (a GPT's attention backward computed `dO @ vᵀ` twice so).
#[test]
fn a_reduce_read_through_a_shared_view_is_computed_once() {
    fn reduces(n: &wgrad::kernel::AstNode) -> usize {
        let own = matches!(n.op, wgrad::kernel::AstOp::Reduce(..)) as usize;
        own + n.src.iter().map(|s| reduces(s)).sum::<usize>()
    }
    let (x, y) = (data(&[16, 8]), data(&[8, 12]));
    Context::new().dev(Device::Interp).run(|| {
        let p = x.matmul(&y).unwrap().reshape(&[4, 4, 12]).unwrap();
        let out = p.mul(p.sum(2, true).unwrap()).unwrap();
        let items = Tensor::schedule_all(&[&out]).unwrap();
        let total: usize = items
            .iter()
            .map(|it| match it {
                ScheduleItem::Kernel { ast, .. } => reduces(&ast.root),
                _ => 0,
            })
            .sum();
        assert_eq!(total, 2, "the matmul once, its row sum once");
        let want: Vec<f32> = {
            let (xv, yv) = (x.to_vec::<f32>().unwrap(), y.to_vec::<f32>().unwrap());
            let mut p = vec![0f32; 16 * 12];
            for i in 0..16 {
                for j in 0..12 {
                    p[i * 12 + j] = (0..8).map(|k| xv[i * 8 + k] * yv[k * 12 + j]).sum();
                }
            }
            let mut out = p.clone();
            for (r, row) in p.chunks(12).enumerate() {
                let s: f32 = row.iter().sum();
                for j in 0..12 {
                    out[r * 12 + j] = row[j] * s;
                }
            }
            out
        };
        let got = out.to_vec::<f32>().unwrap();
        for (g, w) in got.iter().zip(&want) {
            assert!((g - w).abs() <= 1e-4 * (1.0 + w.abs()), "{g} vs {w}");
        }
    });
}

/// The divisions (`Div`, `Recip`) over at least as many elements as `x` has, in the graph of
/// `f(x)` and of x's gradient: each is a vector division for every element, in every kernel
/// that computes it (several times the cost of a multiply). A division over rows (a softmax's
/// sums, broadcast) is not counted: a kernel computes it once per row.
fn divisions_per_element(shape: &[usize], f: impl Fn(&Tensor) -> Result<Tensor>) -> usize {
    use std::collections::HashSet;
    use wgrad::ops::{BinaryOp, Op, UnaryOp};
    Context::new().dev(Device::Interp).run(|| {
        let x = data(shape);
        x.set_requires_grad(true);
        let y = f(&x).unwrap();
        y.mul(data(shape))
            .unwrap()
            .sum((), false)
            .unwrap()
            .backward()
            .unwrap();
        let g = x.grad().expect("gradient");
        let (mut seen, mut stack, mut n) = (HashSet::new(), vec![y.node(), g.node()], 0);
        while let Some(u) = stack.pop() {
            if !seen.insert(u.id) {
                continue;
            }
            let divides = matches!(u.op, Op::Binary(BinaryOp::Div) | Op::Unary(UnaryOp::Recip));
            n += usize::from(divides && u.numel() >= x.numel());
            stack.extend(u.src());
        }
        n
    })
}

/// Sigmoid (and tanh, GELU, SiLU built on it) divides once per element, forward and backward
/// together: the backward reuses the forward's reciprocal (a quotient's rule would divide twice
/// more). Softmax divides once per row, and attention's scale is a product.
#[test]
fn activations_and_softmax_divide_once_per_element_at_most() {
    let s = [6, 16];
    assert_eq!(divisions_per_element(&s, |x| x.sigmoid()), 1);
    assert_eq!(divisions_per_element(&s, |x| x.tanh()), 1);
    assert_eq!(divisions_per_element(&s, |x| x.gelu()), 1);
    assert_eq!(divisions_per_element(&s, |x| x.silu()), 1);
    assert_eq!(divisions_per_element(&s, |x| x.softmax(-1)), 0);
    let qk = [2, 16, 8];
    let sdpa = |x: &Tensor| x.scaled_dot_product_attention(x, x, None, 0.0, true, false);
    assert_eq!(divisions_per_element(&qk, sdpa), 0);
}

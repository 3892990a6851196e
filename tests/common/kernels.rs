//! The kernels real workloads lower to, for the tests that check a dialect's rendering of every
//! one without a GPU (tests/wgsl.rs with naga, tests/cuda.rs with NVRTC): elementwise ops, every
//! dtype's storage and register paths, reductions, nn ops, random numbers, losses with their
//! gradients, an Adam step and the tutorial CNN's SGD step, recorded with
//! `realize::record_kernels` while they run on the interpreter; and the small golden kernels
//! whose renderings are kept in `shaders/golden/` (`BLESS=1` rewrites them).
//!
//! The kernel log is per thread, and while it records every kernel is lowered again even when
//! its program is cached, so what a test records does not depend on the tests before it.

#![allow(dead_code)]

use std::fmt::Write;

use std::sync::Arc;

use wgrad::codegen::{LinearKernel, OptTarget};
use wgrad::nn::optim::{Adam, Optimizer};
use wgrad::nn::Linear;
use wgrad::realize::record_kernels;
use wgrad::runtime::Buffer;
use wgrad::{
    Axes, Context, Conv2dOpts, CrossEntropyOpts, DType, Device, Padding, Reduction, Result, Tensor,
};

/// The kernels lowered while `f` runs.
pub fn record(f: impl FnOnce() -> Result<()>) -> Vec<LinearKernel> {
    record_kernels(true);
    let r = f();
    let ks = record_kernels(false);
    if let Err(e) = r {
        panic!("workload failed: {e}");
    }
    ks
}

fn lcg(n: usize, seed: u64, lo: f32, hi: f32) -> Vec<f32> {
    let mut s = seed;
    (0..n)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            lo + (s >> 40) as f32 / (1u64 << 24) as f32 * (hi - lo)
        })
        .collect()
}

pub fn f32s(shape: &[usize], seed: u64, lo: f32, hi: f32) -> Result<Tensor> {
    Tensor::from_vec(lcg(shape.iter().product(), seed, lo, hi), shape)
}

/// Realize every tensor (one schedule each, so more distinct kernels).
fn go(ts: &[Result<Tensor>]) -> Result<()> {
    for t in ts {
        match t {
            Ok(t) => {
                t.realize()?;
            }
            Err(e) => return Err(e.clone()),
        }
    }
    Ok(())
}

fn elementwise() -> Result<()> {
    let a = f32s(&[4, 6], 1, -3.0, 3.0)?;
    let b = f32s(&[4, 6], 2, 0.5, 2.0)?;
    let c = f32s(&[6], 3, -1.0, 1.0)?;
    go(&[
        a.add(&b)?.mul(&c),
        a.sub(&b)?.div(&b),
        a.neg(),
        a.exp(),
        b.log(),
        a.exp2(),
        b.log2(),
        b.sqrt(),
        b.rsqrt(),
        a.sin(),
        a.cos(),
        a.tan(),
        a.reciprocal(),
        a.trunc(),
        a.floor(),
        a.ceil(),
        a.round(),
        a.abs(),
        a.sign(),
        a.square(),
        b.pow(&a),
        a.pow(2.5),
        a.maximum(&b),
        a.minimum(0.5),
        a.fmod(&b),
        a.relu(),
        a.relu6(),
        a.leaky_relu(0.1),
        a.elu(1.0),
        a.sigmoid(),
        a.tanh(),
        a.gelu(),
        a.silu(),
        a.softplus(),
        a.mish(),
        a.hardtanh(-1.0, 1.0),
        a.hardsigmoid(),
        a.hardswish(),
        a.clip(-0.5, 0.5),
        a.lt(&b)?.where_(&a, &b),
        a.ge(&c)?.where_(&a, 0.0),
        a.eq(&b)?.logical_not(),
        a.ne(0.0)?.logical_and(&b.gt(1.0)?),
        a.le(0.0)?.logical_or(&b.gt(1.0)?),
        // Constants WGSL has no literals for.
        a.maximum(f64::NEG_INFINITY),
        a.mul(f64::INFINITY),
        a.add(f64::NAN),
        a.mul(1e-40),
        Tensor::full(&[5], f64::NEG_INFINITY),
        Tensor::full_dtype(&[5], i32::MIN as f64, DType::I32),
        Tensor::arange(0.0, 10.0, 1.5, DType::F32),
        Tensor::arange(-5.0, 5.0, 1.0, DType::I32),
        Tensor::eye(5),
    ])
}

fn dtypes() -> Result<()> {
    let a = f32s(&[4, 6], 4, -300.0, 300.0)?;
    let b = f32s(&[4, 6], 5, 1.0, 9.0)?;
    // f16: loads, stores, casts both ways, math computed as f32.
    let h = a.cast(DType::F16)?.realize()?;
    let hb = b.cast(DType::F16)?.realize()?;
    // bf16 likewise, and meeting f16 (in f32).
    let g = a.cast(DType::BF16)?.realize()?;
    let gb = b.cast(DType::BF16)?.realize()?;
    // i32 with negatives and zeros (guarded division).
    let i = Tensor::from_vec(
        (0..24).map(|v| (v * 37 % 23) - 11).collect::<Vec<i32>>(),
        &[4, 6],
    )?;
    let j = Tensor::from_vec((0..24).map(|v| v % 5).collect::<Vec<i32>>(), &[4, 6])?;
    let u = Tensor::from_vec(
        (0..24u32)
            .map(|v| v.wrapping_mul(2654435761))
            .collect::<Vec<u32>>(),
        &[4, 6],
    )?;
    let u8a = Tensor::from_vec(
        (0..24u32).map(|v| (v * 41) as u8).collect::<Vec<u8>>(),
        &[4, 6],
    )?;
    let u8b = Tensor::from_vec(
        (0..24u32).map(|v| (v * 7) as u8).collect::<Vec<u8>>(),
        &[4, 6],
    )?;
    let bl = a.gt(0.0)?.realize()?;
    let bl2 = b.gt(5.0)?.realize()?;
    let idx = Tensor::from_vec(vec![3i32, 0, 2, 2, 1], &[5])?;
    // In place on packed buffers: the kernel reads its own (atomic) output.
    let hh = h.contiguous().realize()?;
    hh.assign(&hh.mul(2.0)?)?.realize()?;
    let gg = g.contiguous().realize()?;
    gg.assign(&gg.mul(2.0)?)?.realize()?;
    let uu = u8a.contiguous().realize()?;
    uu.assign(&uu.add(200)?)?.realize()?;
    let bb = bl.contiguous().realize()?;
    bb.assign(&bb.logical_not()?)?.realize()?;
    go(&[
        h.add(&hb),
        h.mul(&hb)?.exp(),
        h.cast(DType::F32),
        h.sum(1, false),
        h.max((), false),
        h.softmax(-1),
        h.relu()?.cast(DType::F16),
        h.cast(DType::I32),
        h.cast(DType::U8),
        h.cast(DType::Bool),
        a.cast(DType::F16)?.cast(DType::F32),
        i.cast(DType::F16),
        h.index(&idx),
        // bf16
        g.add(&gb),
        g.mul(&gb)?.exp(),
        g.cast(DType::F32),
        g.sum(1, false),
        g.max((), false),
        g.softmax(-1),
        g.relu()?.cast(DType::BF16),
        g.cast(DType::I32),
        g.cast(DType::U8),
        g.cast(DType::Bool),
        a.cast(DType::BF16)?.cast(DType::F32),
        i.cast(DType::BF16),
        g.index(&idx),
        g.cast(DType::F16),
        h.cast(DType::BF16),
        g.add(&h),
        // i32
        i.add(&j),
        i.mul(&j)?.sub(3),
        i.idiv(&j),
        i.fmod(&j),
        i.idiv(4),
        i.fmod(3),
        i.neg(),
        i.maximum(&j),
        i.minimum(&j),
        i.lt(&j),
        i.eq(&j),
        i.lshift(&j),
        i.rshift(&j),
        i.rshift(2),
        i.bitwise_xor(&j),
        i.bitwise_and(&j),
        i.bitwise_or(&j),
        i.abs(),
        i.cast(DType::F32),
        i.cast(DType::U32),
        i.cast(DType::U8),
        i.cast(DType::Bool),
        i.sum((), false),
        i.max(0, false),
        i.argmax(Some(1), false),
        i.argmin(None, false),
        i.index(&idx),
        // u32
        u.add(&u),
        u.mul(2654435761u32 as i64),
        u.bitwise_xor(&u.rshift(16)?),
        u.lshift(13),
        u.rshift(&j.cast(DType::U32)?),
        u.bitwise_or(7),
        u.bitwise_and(0xffff),
        u.idiv(&j.cast(DType::U32)?),
        u.fmod(7),
        u.cast(DType::F32),
        u.cast(DType::I32),
        u.cast(DType::U8),
        u.max(1, false),
        u.min(1, false),
        a.cast(DType::U32),
        // u8 (wrapping arithmetic)
        u8a.add(&u8b),
        u8a.mul(&u8b),
        u8a.neg(),
        u8a.idiv(&u8b),
        u8a.fmod(&u8b),
        u8a.lshift(3),
        u8a.bitwise_xor(&u8b),
        u8a.maximum(&u8b),
        u8a.lt(&u8b),
        u8a.cast(DType::F32),
        u8a.cast(DType::I32),
        u8a.cast(DType::Bool),
        u8a.sum(1, false),
        u8a.max(0, false),
        u8a.min(0, false),
        u8a.argmax(Some(0), false),
        u8a.index(&idx),
        a.cast(DType::U8),
        u8a.cast(DType::F32)?.div(255.0),
        // bool
        bl.logical_not(),
        bl.logical_and(&bl2),
        bl.logical_or(&bl2),
        bl.bitwise_xor(&bl2),
        bl.eq(&bl2),
        bl.ne(&bl2),
        bl.lt(&bl2),
        bl.where_(&i, &j),
        bl.where_(&h, 0.0),
        bl.cast(DType::F32),
        bl.cast(DType::I32),
        bl.cast(DType::U8),
        bl.cast(DType::F16),
        bl.cast(DType::BF16),
        bl.where_(&g, 0.0),
        bl.sum((), false),
        bl.max(1, false),
        bl.index(&idx),
        bl.gather(1, &j),
    ])
}

fn reductions_and_nn() -> Result<()> {
    let a = f32s(&[3, 5, 7], 6, -2.0, 2.0)?;
    let m = f32s(&[6, 9], 7, -1.0, 1.0)?;
    let w = f32s(&[9, 4], 8, -1.0, 1.0)?;
    let bias = f32s(&[4], 9, -1.0, 1.0)?;
    let img = f32s(&[2, 4, 9, 9], 10, -1.0, 1.0)?;
    let k = f32s(&[6, 2, 3, 3], 11, -0.5, 0.5)?;
    let kb = f32s(&[6], 12, -0.5, 0.5)?;
    let gi = Tensor::from_vec(
        (0..15).map(|v| (v * 3) % 7).collect::<Vec<i32>>(),
        &[3, 5, 1],
    )?;
    let rows = Tensor::from_vec(vec![2i32, 0, 1, 2], &[2, 2])?;
    go(&[
        a.sum((), false),
        a.sum(1, true),
        a.sum(Axes::Some(vec![0, 2]), false),
        a.mean(2, false),
        a.max(1, false),
        a.min(0, true),
        a.var(2, false, 1.0),
        a.std((), false, 0.0),
        a.logsumexp(1, false),
        a.argmax(Some(2), false),
        a.argmax(None, true),
        a.argmin(Some(0), false),
        a.softmax(-1),
        a.log_softmax(1),
        m.matmul(&w),
        m.matmul(&w)?.relu()?.sum((), false),
        w.t()?.matmul(&m.t()?),
        m.linear(&w, Some(&bias)),
        bias.dot(&bias),
        img.conv2d(&k, Some(&kb), &conv((1, 1), Padding::Valid, (1, 1), 2)),
        img.conv2d(&k, None, &conv((2, 2), Padding::Explicit(1, 1), (1, 1), 2)),
        img.conv2d(
            &k,
            Some(&kb),
            &conv((1, 1), Padding::Explicit(2, 1), (2, 2), 2),
        ),
        img.conv2d(&k, None, &conv((1, 1), Padding::Same, (1, 1), 2)),
        img.conv2d(
            &f32s(&[3, 4, 1, 1], 13, -1.0, 1.0)?,
            None,
            &Conv2dOpts::default(),
        ),
        img.max_pool2d((2, 2), None),
        img.max_pool2d((3, 3), Some((2, 2))),
        img.avg_pool2d((2, 2), None),
        img.avg_pool2d((3, 3), Some((1, 1))),
        a.index(&rows),
        a.gather(2, &gi),
        // movement
        a.pad(&[(1, 0), (0, 2), (1, 1)], -1.0),
        a.flip(&[0, 2]),
        a.permute(&[2, 0, 1])?.contiguous().add(1.0),
        a.slice(2, 1, 7, 2)?.contiguous().mul(2.0),
        Tensor::cat(&[&a, &a.neg()?], 1),
        Tensor::stack(&[&m, &m.exp()?], 0),
        m.repeat(&[2, 1]),
        bias.reshape(&[4, 1])?.expand(&[4, 3])?.contiguous().sqrt(),
    ])
}

fn conv(
    stride: (usize, usize),
    padding: Padding,
    dilation: (usize, usize),
    g: usize,
) -> Conv2dOpts {
    Conv2dOpts {
        stride,
        padding,
        dilation,
        groups: g,
    }
}

fn random_and_losses() -> Result<()> {
    Tensor::manual_seed(42);
    let logits = f32s(&[6, 5], 14, -2.0, 2.0)?;
    let labels = Tensor::from_vec(vec![0i32, 4, 2, 1, 3, 2], &[6])?;
    let p = f32s(&[6, 5], 15, 0.05, 0.95)?;
    let y = f32s(&[6, 5], 16, 0.0, 1.0)?.gt(0.5)?.cast(DType::F32)?;
    go(&[
        Tensor::rand(&[3, 7]),
        Tensor::randn(&[5, 3]),
        Tensor::randint(&[10], 0, 10),
        Tensor::uniform(&[4], -2.0, 3.0),
        logits.dropout(0.5),
        logits.sparse_categorical_crossentropy(&labels, &CrossEntropyOpts::default()),
        logits.sparse_categorical_crossentropy(
            &labels,
            &CrossEntropyOpts {
                ignore_index: Some(2),
                label_smoothing: 0.1,
                reduction: Reduction::Sum,
            },
        ),
        p.binary_crossentropy(&y, Reduction::Mean),
        logits.binary_crossentropy_logits(&y, Reduction::None),
        logits.mse(&p, Reduction::Sum),
    ])?;
    // Gradients through the losses, a matmul and a conv.
    let w = f32s(&[5, 5], 17, -0.5, 0.5)?;
    w.set_requires_grad(true);
    let k = f32s(&[2, 1, 3, 3], 18, -0.5, 0.5)?;
    k.set_requires_grad(true);
    let loss = logits
        .matmul(&w)?
        .sparse_categorical_crossentropy(&labels, &CrossEntropyOpts::default())?
        .add(
            &p.sigmoid()?
                .binary_crossentropy_logits(&y, Reduction::Mean)?,
        )?;
    loss.backward()?;
    let img = f32s(&[2, 1, 8, 8], 19, -1.0, 1.0)?;
    let o = img
        .conv2d(&k, None, &conv((2, 2), Padding::Explicit(1, 1), (1, 1), 1))?
        .avg_pool2d((2, 2), None)?
        .mse(&Tensor::zeros(&[2, 2, 2, 2])?, Reduction::Mean)?;
    o.backward()?;
    go(&[
        Ok(loss),
        w.grad().ok_or_else(unreachable_err),
        k.grad().ok_or_else(unreachable_err),
    ])?;
    // An Adam step on a small layer (optimizer state updated with assign).
    let lin = Linear::new(5, 3)?;
    let params = wgrad::nn::state::get_parameters(&lin);
    let mut opt = Adam::new(params)?;
    let l = lin.forward(&logits)?.square()?.mean((), false)?;
    l.backward()?;
    opt.step()
}

fn unreachable_err() -> wgrad::Error {
    wgrad::Error::new(wgrad::ErrorKind::Other, "no gradient")
}

/// One SGD step of the tutorial CNN.
pub fn cnn_step(bs: usize) -> Result<()> {
    use wgrad::nn::Conv2d;
    Tensor::manual_seed(1337);
    let l1 = Conv2d::new(1, 32, (3, 3))?;
    let l2 = Conv2d::new(32, 64, (3, 3))?;
    let l3 = Linear::new(1600, 10)?;
    let mut params = wgrad::nn::state::get_parameters(&l1);
    params.extend(wgrad::nn::state::get_parameters(&l2));
    params.extend(wgrad::nn::state::get_parameters(&l3));
    let x = Tensor::rand(&[bs, 1, 28, 28])?.realize()?;
    let y = Tensor::randint(&[bs], 0, 10)?.realize()?;
    let h = l1.forward(&x)?.relu()?.max_pool2d((2, 2), None)?;
    let h = l2.forward(&h)?.relu()?.max_pool2d((2, 2), None)?;
    let loss = l3
        .forward(&h.flatten(1)?.dropout(0.5)?)?
        .sparse_categorical_crossentropy(&y, &CrossEntropyOpts::default())?;
    loss.backward()?;
    for p in &params {
        let g = p.grad().ok_or_else(unreachable_err)?.detach();
        p.assign(&p.detach().sub(&g.mul(0.05)?)?)?;
    }
    let mut all: Vec<&Tensor> = params.iter().collect();
    all.push(&loss);
    Tensor::realize_all(&all)?;
    let l = loss.item::<f32>()?;
    assert!(l.is_finite() && l > 0.0, "loss {l}");
    Ok(())
}

/// The workloads that read no value back while they run (so a capture can record them).
fn run_workloads_without_readback() -> Result<()> {
    let interp = || Context::new().dev(Device::Interp);
    interp().run(elementwise)?;
    interp().run(dtypes)?;
    interp().run(reductions_and_nn)?;
    interp().training(true).run(random_and_losses)?;
    // Shaped for a GPU (workgroups, grouped and split reduces, vector accesses) and for a
    // software adapter.
    for t in [OptTarget::Gpu, OptTarget::SoftGpu] {
        let shaped = || interp().opt_target(t);
        shaped().run(reductions_and_nn)?;
        shaped().training(true).run(random_and_losses)?;
    }
    Ok(())
}

fn run_workloads() -> Result<()> {
    let interp = || Context::new().dev(Device::Interp);
    run_workloads_without_readback()?;
    interp().training(true).run(|| cnn_step(2))?;
    // As a WebGPU device with 8 storage buffers will schedule it.
    interp().training(true).max_buffers(8).run(|| cnn_step(3))?;
    interp()
        .training(true)
        .opt_target(OptTarget::Gpu)
        .run(|| cnn_step(2))
}

/// Every kernel of the workloads above (over 300), on the interpreter.
pub fn workloads() -> Vec<LinearKernel> {
    record(run_workloads)
}

/// The kernels of the workloads that read nothing back (all but the CNN steps) with the buffers
/// each launch bound (output first), on the interpreter. A buffer holds what the last launch
/// that wrote it left there.
pub fn workload_launches() -> Vec<(LinearKernel, Vec<Arc<Buffer>>)> {
    use wgrad::realize::{end_capture, start_capture};
    use wgrad::runtime::Launch;
    record_kernels(true);
    start_capture().unwrap();
    let r = run_workloads_without_readback();
    let cap = end_capture();
    let ks = record_kernels(false);
    if let Err(e) = r {
        panic!("workload failed: {e}");
    }
    let launches: Vec<Vec<Arc<Buffer>>> = cap
        .launches
        .into_iter()
        .filter_map(|l| match l {
            Launch::Kernel { bufs, .. } => Some(bufs),
            Launch::Copy { .. } => None,
        })
        .collect();
    assert_eq!(ks.len(), launches.len(), "one kernel recorded per launch");
    ks.into_iter().zip(launches).collect()
}

// ---------------------------------------------------------------------------------- golden

/// Small fixed kernels (shapes used nowhere else in these tests), rendered into
/// `shaders/golden/NAME.EXT` by each dialect.
pub type Build = fn() -> Result<Tensor>;

pub fn golden_cases() -> Vec<(&'static str, Build)> {
    fn v(n: usize, seed: u64) -> Result<Tensor> {
        f32s(&[n], seed, -2.0, 2.0)
    }
    vec![
        ("add_mul_f32", || v(37, 1)?.add(&v(37, 2)?)?.mul(&v(37, 3)?)),
        ("sum_reduce_f32", || {
            f32s(&[5, 37], 4, -1.0, 1.0)?.sum(1, false)
        }),
        ("u8_to_f32", || {
            Tensor::from_vec((0..37u8).collect::<Vec<u8>>(), &[37])?.cast(DType::F32)
        }),
        ("f16_load_store", || {
            let h = v(41, 5)?.cast(DType::F16)?.realize()?;
            h.mul(&h)?.add(1.0)
        }),
        ("bf16_load_store", || {
            let h = v(41, 5)?.cast(DType::BF16)?.realize()?;
            h.mul(&h)?.add(1.0)
        }),
        ("bool_store", || v(43, 6)?.lt(&v(43, 7)?)),
        // A reduce shaped for a GPU: split across workgroups, each split grouped.
        ("sum_grouped_gpu", || {
            Context::new()
                .opt_target(OptTarget::Gpu)
                .run(|| f32s(&[3, 8192], 8, -1.0, 1.0)?.sum(1, false)?.realize())
        }),
        ("matmul_staged_gpu", || {
            // Operand tiles staged in workgroup memory: 16x16 invocations of 2x2 outputs, the
            // product split in two along its reduce (the parts the first kernel's outer axis).
            Context::new().opt_target(OptTarget::Gpu).run(|| {
                let a = f32s(&[128, 64], 9, -1.0, 1.0)?;
                let b = f32s(&[64, 128], 10, -1.0, 1.0)?;
                a.matmul(&b)?.realize()
            })
        }),
        ("u8_add_store", || {
            let a = Tensor::from_vec(
                (0..43u8).map(|x| x.wrapping_mul(7)).collect::<Vec<u8>>(),
                &[43],
            )?;
            a.add(&a)
        }),
    ]
}

/// Render each golden case's kernels with `render` (each must pass `check`) and compare them
/// with `shaders/golden/NAME.ext`; `BLESS=1` rewrites the files instead. Panics listing every
/// difference.
pub fn check_golden(
    ext: &str,
    render: fn(&LinearKernel) -> String,
    check: &dyn Fn(&str, &str) -> std::result::Result<(), String>,
) {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("shaders/golden");
    let bless = std::env::var("BLESS").is_ok_and(|v| v == "1");
    let mut problems = String::new();
    for (name, build) in golden_cases() {
        let kernels = record(|| {
            Context::new().dev(Device::Interp).run(|| {
                build()?.realize()?;
                Ok(())
            })
        });
        assert!(!kernels.is_empty(), "{name}: no kernel recorded");
        let mut got = String::new();
        for k in &kernels {
            let src = render(k);
            if let Err(e) = check(&k.name, &src) {
                panic!("{name}: kernel {} does not compile:\n{src}\n{e}", k.name);
            }
            got.push_str(&src);
        }
        let path = dir.join(format!("{name}.{ext}"));
        if bless {
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(&path, &got).unwrap();
            continue;
        }
        let want = std::fs::read_to_string(&path).unwrap_or_default();
        if got != want {
            let _ = writeln!(
                problems,
                "{} differs from the rendering (BLESS=1 rewrites it):",
                path.display()
            );
            for (i, (w, g)) in want
                .lines()
                .chain(std::iter::repeat(""))
                .zip(got.lines().chain(std::iter::repeat("")))
                .take(want.lines().count().max(got.lines().count()))
                .enumerate()
            {
                if w != g {
                    let _ = writeln!(problems, "  line {}:\n    - {w}\n    + {g}", i + 1);
                }
            }
        }
    }
    assert!(problems.is_empty(), "{problems}");
}

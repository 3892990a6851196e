//! The WebAssembly dialect's own arithmetic against the interpreter, bit for bit: its scalar
//! reduce steps of products (a multiply and an add, each rounded: WebAssembly has no scalar
//! fused multiply-add), its vector steps (fused with relaxed SIMD, which wasmi has), the
//! f16/bf16 conversions and the exp2 polynomial it carries, and the integer
//! edge cases WebAssembly traps on. Run natively by
//! wasmi; the browser and Node.js run the same modules (tests/web.rs, scripts/node_test.mjs).

#![cfg(all(feature = "wasm", not(target_arch = "wasm32")))]

use wgrad::{Context, DType, Device, Tensor};

fn on(dev: Device, f: impl FnOnce() -> wgrad::Result<Vec<u32>>) -> Vec<u32> {
    Context::new()
        .dev(dev)
        .run(f)
        .unwrap_or_else(|e| panic!("{dev}: {e}"))
}

fn bits(t: &Tensor) -> wgrad::Result<Vec<u32>> {
    Ok(t.to_vec_f32()?.iter().map(|v| v.to_bits()).collect())
}

/// WASM and the interpreter give the same bits (NaNs compared as NaNs).
fn same(what: &str, f: impl Fn() -> wgrad::Result<Vec<u32>>) {
    same_as(Device::Interp, what, f)
}

fn same_as(reference: Device, what: &str, f: impl Fn() -> wgrad::Result<Vec<u32>>) {
    let want = on(reference, &f);
    let got = on(Device::Wasm, &f);
    assert_eq!(got.len(), want.len(), "{what}: lengths");
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        let nan = |b: u32| f32::from_bits(b).is_nan();
        assert!(
            g == w || (nan(*g) && nan(*w)),
            "{what}[{i}]: WASM {:e} ({g:#010x}), {reference} {:e} ({w:#010x})",
            f32::from_bits(*g),
            f32::from_bits(*w)
        );
    }
}

/// Awkward f32 values: zeros, subnormals, the edges of f16's and bf16's ranges, ties of both,
/// huge, infinite and NaN, and a spread of ordinary ones.
fn awkward() -> Vec<f32> {
    let mut v = vec![
        0.0,
        -0.0,
        1e-45,
        -3e-42,
        1.1754942e-38,
        5.9604645e-8,
        2.9802322e-8,
        8.940697e-8,
        6.1035156e-5,
        6.097555e-5,
        65504.0,
        65519.99,
        65520.0,
        -70000.0,
        1.0 + 2f32.powi(-11),
        1.0 + 3.0 * 2f32.powi(-11),
        1.0 + 2f32.powi(-8),
        3.3895314e38,
        f32::MAX,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
        -126.7,
        -150.2,
        128.9,
        200.0,
    ];
    let mut x = 0x1234_5678u32;
    for _ in 0..200 {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        v.push((x as f32 / u32::MAX as f32 - 0.5) * 2f32.powi((x % 40) as i32 - 20));
    }
    v
}

#[test]
fn sums_of_products_round_each_product() {
    // x * y + c where the exact sum is just below a midpoint between two f32 (a fused
    // multiply-add gives c), and the rounded product lands on it (ties to even: 1 + 2^-22).
    let x = 2f32.powi(-24) * (1.0 + 2f32.powi(-18));
    let y = 1.0 - 2f32.powi(-18);
    let c = 1.0 + 2f32.powi(-23);
    let mut a = vec![c, x, -c, -x];
    let mut b = vec![1.0, y, 1.0, y];
    let w = awkward();
    for (i, p) in w.chunks(2).enumerate() {
        a.extend([w[(i * 7) % w.len()], p[0]]);
        b.extend([1.0, *p.get(1).unwrap_or(&1.5)]);
    }
    let n = a.len() / 2;
    let got = on(Device::Wasm, || {
        let ta = Tensor::from_slice(&a, &[n, 2])?;
        let tb = Tensor::from_slice(&b, &[n, 2])?;
        bits(&ta.mul(&tb)?.sum(1, false)?)
    });
    for i in 0..n {
        let want = (0.0 + a[2 * i] * b[2 * i]) + a[2 * i + 1] * b[2 * i + 1];
        let g = f32::from_bits(got[i]);
        assert!(
            g.to_bits() == want.to_bits() || (g.is_nan() && want.is_nan()),
            "row {i}: WASM {g:e}, each product rounded {want:e}"
        );
    }
    assert_eq!(
        f32::from_bits(got[0]),
        1.0 + 2f32.powi(-22),
        "the midpoint case"
    );
}

/// A matmul's vector steps are relaxed fused multiply-adds (wasmi fuses them, as V8 does on
/// CPUs with FMA): the interpreter's bits, which rounding each product would not give.
#[test]
fn vector_steps_of_a_matmul_are_fused() {
    if !wgrad::context::relaxed_simd() {
        return; // RELAXED_SIMD=0: the steps are a multiply and an add by request.
    }
    let (m, k, n) = (4, 96, 64);
    let draw = |seed: u32, len: usize| -> Vec<f32> {
        let mut x = seed;
        (0..len)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 17;
                x ^= x << 5;
                // Full 24-bit mantissas, so most products are inexact.
                (x >> 8) as f32 / (1 << 24) as f32 * 2.0 - 1.0
            })
            .collect()
    };
    let (a, b) = (draw(0x9e37_79b9, m * k), draw(0x85eb_ca6b, k * n));
    let f = || {
        let ta = Tensor::from_slice(&a, &[m, k])?;
        let tb = Tensor::from_slice(&b, &[k, n])?;
        bits(&ta.matmul(&tb)?)
    };
    same("matmul", f);
    // Rounding each product (in the same order) gives other bits for most outputs: the
    // comparison above tells fused steps from unfused ones.
    let fused = on(Device::Interp, f);
    let differ = (0..m * n)
        .filter(|&o| {
            let (i, j) = (o / n, o % n);
            let s = (0..k).fold(0f32, |s, t| s + a[i * k + t] * b[t * n + j]);
            s.to_bits() != fused[o]
        })
        .count();
    assert!(differ > m * n / 4, "only {differ} outputs differ");
}

/// The operators of `bytes`' innermost loop bodies (the last function: the kernel), by name.
fn inner_loop_ops(bytes: &[u8]) -> Vec<String> {
    let mut bodies = vec![];
    for payload in wasmparser::Parser::new(0).parse_all(bytes) {
        if let Ok(wasmparser::Payload::CodeSectionEntry(body)) = payload {
            bodies.push(body);
        }
    }
    let body = bodies.pop().expect("a kernel function");
    // Per open block: whether it is a loop, and its operators so far.
    let mut stack: Vec<(bool, Vec<String>, bool)> = vec![(false, vec![], false)];
    let mut inner = vec![];
    let mut ops = body.get_operators_reader().expect("operators");
    while !ops.eof() {
        let op = ops.read().expect("an operator");
        let name = format!("{op:?}");
        let name = name.split([' ', '{', '(']).next().unwrap_or("").to_string();
        match name.as_str() {
            "Loop" | "Block" | "If" => stack.push((name == "Loop", vec![], false)),
            "End" => {
                let Some((is_loop, body, has_inner)) = stack.pop() else {
                    break;
                };
                if is_loop && !has_inner {
                    inner.extend(body);
                }
                if let Some(outer) = stack.last_mut() {
                    outer.2 |= is_loop || has_inner;
                }
            }
            _ => stack.last_mut().expect("a block").1.push(name),
        }
    }
    inner
}

/// A matmul's inner loop steps a block of accumulators from operands each loaded once: per
/// fused vector step at most half a load (vector loads of one operand plus splats of the
/// other's elements; a 4x4 block of f32x4 needs 8 for 16 steps), and no scalar load a vector
/// load replaced is left in the code (the engine would still run it: a load may trap).
#[test]
fn a_matmuls_steps_share_their_operand_loads() {
    use wgrad::codegen::{linear_kernel, wasm};
    use wgrad::schedule::ScheduleItem;
    let target = Device::Wasm.backend().target();
    let modules: Vec<Vec<u8>> = Context::new().dev(Device::Interp).run(|| {
        let a = Tensor::from_slice(&vec![0.5f32; 256 * 128], &[256, 128]).unwrap();
        let b = Tensor::from_slice(&vec![0.25f32; 128 * 256], &[128, 256]).unwrap();
        let y = a.matmul(&b).unwrap();
        Tensor::schedule_all(&[&y])
            .unwrap()
            .iter()
            .filter_map(|item| match item {
                ScheduleItem::Kernel { ast, .. } => {
                    let k = linear_kernel(ast, &target);
                    Some(
                        wasm::module(
                            &k,
                            wasm::Features {
                                relaxed_simd: true,
                                shared_memory: false,
                            },
                        )
                        .unwrap(),
                    )
                }
                _ => None,
            })
            .collect()
    });
    assert_eq!(modules.len(), 1);
    let ops = inner_loop_ops(&modules[0]);
    let count = |name: &str| ops.iter().filter(|o| o.as_str() == name).count();
    let (madds, vloads, splats) = (
        count("F32x4RelaxedMadd"),
        count("V128Load"),
        count("F32x4Splat"),
    );
    assert!(madds >= 8, "{madds} fused steps per iteration: {ops:?}");
    assert!(
        2 * (vloads + splats) <= madds,
        "{vloads} vector loads and {splats} splats for {madds} fused steps"
    );
    assert!(
        count("F32Load") <= splats,
        "{} scalar loads for {splats} splats: {ops:?}",
        count("F32Load")
    );
}

#[test]
fn half_conversions_and_exp2_match() {
    let v = awkward();
    let n = v.len();
    for dt in [DType::F16, DType::BF16] {
        same(&format!("f32 -> {dt:?} -> f32"), || {
            bits(&Tensor::from_slice(&v, &[n])?.cast(dt)?.cast(DType::F32)?)
        });
    }
    // exp2 is the C dialect's polynomial (within 1.3 ulp of the interpreter's): the same bits
    // as the CPU backend's.
    #[cfg(feature = "cpu")]
    same_as(Device::Cpu, "exp2", || {
        bits(&Tensor::from_slice(&v, &[n])?.exp2()?)
    });
    same("log2, sin, sqrt", || {
        let t = Tensor::from_slice(&v, &[n])?;
        bits(&t.log2()?.add(&t.sin()?)?.add(&t.abs()?.sqrt()?)?)
    });
}

#[test]
fn integer_edges_do_not_trap() {
    let a = [i32::MIN, -7, 7, 0, 5, i32::MAX, -1, 9];
    let b = [-1, 0, -2, 0, 3, -1, 1, -4];
    let f = || {
        let x = Tensor::from_slice(&a, &[8])?;
        let y = Tensor::from_slice(&b, &[8])?;
        let q = x.idiv(&y)?.cast(DType::F32)?;
        let r = x.fmod(&y)?.cast(DType::F32)?;
        let u = Tensor::from_slice(
            &[-3.5f32, 300.0, f32::NAN, 255.9, 0.5, -0.0, 1e10, 7.0],
            &[8],
        )?
        .cast(DType::U8)?
        .cast(DType::F32)?;
        bits(&Tensor::cat(&[&q, &r, &u], 0)?)
    };
    same("i32 division, remainder and f32 -> u8", f);
}

/// A buffer past the 4 GiB a 32-bit memory addresses is an error before anything runs.
#[test]
fn a_tensor_past_the_32_bit_memory_is_an_error() {
    let r: wgrad::Result<()> = Context::new().dev(Device::Wasm).run(|| {
        Tensor::zeros(&[1 << 30])?.realize()?;
        Ok(())
    });
    let e = r.expect_err("4 GiB of f32 in a 4 GiB memory");
    assert!(
        e.to_string().contains("largest buffer WASM:0 allows"),
        "{e}"
    );
}

/// Elementwise kernels are upcast into rows of 16 outputs for WebAssembly (V8 vectorizes no
/// loop by itself), which the dialect computes and stores as f32x4 vectors: a tanh-GELU
/// (exponentials, selects, a division) gives the C backend's bits.
#[test]
fn elementwise_rows_are_vectors_with_the_c_backends_bits() {
    use wgrad::codegen::{default_plan, OptTarget, Plan, Target};
    use wgrad::schedule::ScheduleItem;
    let x: Vec<f32> = (0..64 * 256)
        .map(|i| ((i * 37 % 1001) as f32 - 500.0) / 97.0)
        .collect();
    let gelu = || Tensor::from_slice(&x, &[64, 256])?.gelu();
    let target = Target {
        loop_vectorizer: false,
        ..Target::new(OptTarget::Cpu)
    };
    let rows: Vec<Vec<(usize, usize)>> = Context::new().dev(Device::Interp).run(|| {
        let y = gelu().unwrap();
        Tensor::schedule_all(&[&y])
            .unwrap()
            .iter()
            .filter_map(|item| match item {
                ScheduleItem::Kernel { ast, .. } => match default_plan(ast, &target) {
                    Plan::One(o) => Some(o.upcast),
                    Plan::Split { .. } => None,
                },
                _ => None,
            })
            .collect()
    });
    assert!(rows.contains(&vec![(1, 16)]), "the GELU's plans: {rows:?}");
    #[cfg(feature = "cpu")]
    same_as(Device::Cpu, "tanh-GELU in rows", || bits(&gelu()?));
}

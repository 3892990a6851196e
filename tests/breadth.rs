//! The breadth ops where a PyTorch fixture cannot say everything (tests/ops.rs checks their
//! values and gradients against PyTorch): assignment into an index (also inside a TinyJit, as
//! a KV cache writes), scatter with repeated indices, data-dependent shapes, sampling
//! statistics, long scans, stable sorting with ties and NaN, the functional `gradient`, and the
//! errors users hit. Each on every backend present, against the interpreter or exact values.

#![cfg(not(target_arch = "wasm32"))]

mod common;

use wgrad::{s, Context, DType, Device, ErrorKind, Index, Tensor, TinyJit};

fn on<T>(dev: Device, f: impl FnOnce() -> wgrad::Result<T>) -> T {
    Context::new()
        .dev(dev)
        .run(f)
        .unwrap_or_else(|e| panic!("on {dev}: {e}"))
}

fn arange(n: usize, shape: &[isize]) -> wgrad::Result<Tensor> {
    Tensor::arange(0.0, n as f64, 1.0, DType::F32)?.reshape(shape)
}

#[test]
fn set_writes_slices_steps_and_tensor_indices_in_place() {
    for dev in common::devices() {
        on(dev, || {
            let t = arange(12, &[3, 4])?.contiguous().realize()?;
            let id = t
                .node()
                .buffer()
                .map(|b| std::sync::Arc::as_ptr(&b) as usize);
            t.set(&s![1, 1..3], -1.0)?.realize()?;
            t.set(
                &s![.., ..;-3],
                Tensor::from_slice(&[100.0f32, 200.0], &[2])?,
            )?;
            t.set(&s![[2, 0], 2], 7.0)?.realize()?;
            let want = [
                200.0, 1.0, 7.0, 100.0, //
                200.0, -1.0, -1.0, 100.0, //
                200.0, 9.0, 7.0, 100.0,
            ];
            assert_eq!(t.to_vec::<f32>()?, want, "{dev}");
            // In place: the same buffer.
            let id2 = t
                .node()
                .buffer()
                .map(|b| std::sync::Arc::as_ptr(&b) as usize);
            assert_eq!(id, id2, "{dev}: set must write the tensor's own buffer");
            // A repeated position: the last write wins.
            let u = Tensor::zeros(&[4])?.contiguous().realize()?;
            let idx = Tensor::from_slice(&[1i32, 3, 1], &[3])?;
            u.set(
                &[Index::Tensor(idx)],
                Tensor::from_slice(&[5.0f32, 6.0, 7.0], &[3])?,
            )?;
            assert_eq!(u.to_vec::<f32>()?, [0.0, 7.0, 0.0, 6.0], "{dev}");
            Ok(())
        });
    }
}

/// A KV cache: a fixed buffer written at a position given as a tensor, inside a jitted step, so
/// every replay writes the next slot and reads everything written so far.
#[test]
fn a_jitted_step_writes_its_cache_at_a_position_tensor() {
    for dev in common::devices() {
        on(dev, || {
            let cache = Tensor::zeros(&[5, 2])?.contiguous().realize()?;
            let c = cache.clone();
            let mut step = TinyJit::new(move |xs: &[Tensor]| {
                let (pos, kv) = (&xs[0], &xs[1]);
                c.set(&[Index::Tensor(pos.clone())], kv)?;
                Ok(vec![c.sum(0, false)?])
            });
            let mut sums = vec![];
            for p in 0..5i32 {
                let pos = Tensor::from_slice(&[p], &[])?;
                let kv = Tensor::from_slice(&[p as f32 + 1.0, 10.0 * (p as f32 + 1.0)], &[2])?;
                sums.push(step.call(&[&pos, &kv])?[0].to_vec::<f32>()?);
            }
            let want: Vec<Vec<f32>> = (1..=5)
                .map(|n| {
                    let s = (n * (n + 1) / 2) as f32;
                    vec![s, 10.0 * s]
                })
                .collect();
            assert_eq!(sums, want, "{dev}");
            assert_eq!(
                cache.get(&s![4])?.to_vec::<f32>()?,
                [5.0, 50.0],
                "{dev}: the replays wrote the cache"
            );
            Ok(())
        });
    }
}

#[test]
fn get_matches_the_interpreter_and_reads_zero_out_of_range() {
    let run = |dev: Device| -> Vec<f32> {
        on(dev, || {
            let x = arange(60, &[3, 4, 5])?;
            let i = Tensor::from_slice(&[2i32, -1, 0, 7], &[2, 2])?;
            let j = Tensor::from_slice(&[1i32, 4], &[2])?;
            let parts = [
                x.get(&s![.., i.clone(), 1..;2])?,
                x.get(&[
                    Index::Tensor(j.clone()),
                    Index::slice(None, None, -1),
                    Index::Tensor(j),
                ])?,
                x.get(&s![None, 1, ..., -2])?,
            ];
            let mut out = vec![];
            for p in parts {
                out.extend(p.flatten(0)?.to_vec::<f32>()?);
            }
            Ok(out)
        })
    };
    let want = run(Device::Interp);
    // x[:, [[2, -1], [0, 7]], 1::2]: index 7 is out of range for an axis of 4 and reads 0.
    assert_eq!(&want[..4], &[11.0, 13.0, 16.0, 18.0]);
    assert_eq!(&want[6..8], &[0.0, 0.0]);
    for dev in common::devices() {
        assert_eq!(run(dev), want, "{dev}");
    }
}

#[test]
fn scatter_keeps_the_last_of_repeated_indices() {
    for dev in common::devices() {
        on(dev, || {
            let x = Tensor::zeros(&[2, 4])?;
            let idx = Tensor::from_slice(&[1i32, 1, 3, 1, 0, 0], &[1, 6])?;
            let src = Tensor::from_slice(&[1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0], &[1, 6])?;
            let out = x.scatter(1, &idx, &src, None)?;
            assert_eq!(
                out.to_vec::<f32>()?,
                [6.0, 4.0, 0.0, 3.0, 0.0, 0.0, 0.0, 0.0],
                "{dev}"
            );
            let add = x.scatter(1, &idx, &src, Some("add"))?;
            assert_eq!(
                add.get(&s![0])?.to_vec::<f32>()?,
                [11.0, 7.0, 0.0, 3.0],
                "{dev}"
            );
            let amax = x.scatter_reduce(1, &idx, &src, "amax", false)?;
            assert_eq!(
                amax.get(&s![0])?.to_vec::<f32>()?,
                [6.0, 4.0, 0.0, 3.0],
                "{dev}"
            );
            Ok(())
        });
    }
}

#[test]
fn selections_of_data_dependent_size() {
    for dev in common::devices() {
        on(dev, || {
            let x = Tensor::from_slice(&[3.0f32, -1.0, 0.0, 5.0, 0.0, -2.0], &[2, 3])?;
            let m = x.gt(0.0)?;
            assert_eq!(x.masked_select(&m)?.to_vec::<f32>()?, [3.0, 5.0], "{dev}");
            assert_eq!(
                x.masked_select_sized(&m, 4, -9.0)?.to_vec::<f32>()?,
                [3.0, 5.0, -9.0, -9.0],
                "{dev}"
            );
            assert_eq!(
                x.nonzero()?.to_vec::<i32>()?,
                [0, 0, 0, 1, 1, 0, 1, 2],
                "{dev}"
            );
            let none = x.masked_select(&x.gt(10.0)?)?;
            assert_eq!(none.shape(), [0], "{dev}");
            Ok(())
        });
    }
}

/// Draws against their probabilities with a chi-squared test (critical values at p = 0.001,
/// so a correct sampler fails about once in a thousand runs of a seed; the seed is fixed).
#[test]
fn multinomial_draws_follow_the_weights() {
    let w = [0.1f32, 0.0, 0.3, 0.6];
    for dev in common::devices() {
        on(dev, || {
            Tensor::manual_seed(7);
            let weights = Tensor::from_slice(&w, &[1, 4])?.mul(5.0)?; // not normalized
            let n = 20_000;
            let draws = weights.multinomial(n, true)?.to_vec::<i32>()?;
            let mut counts = [0f64; 4];
            for d in draws {
                counts[d as usize] += 1.0;
            }
            assert_eq!(counts[1], 0.0, "{dev}: a zero weight was drawn");
            let chi2: f64 = [0, 2, 3]
                .iter()
                .map(|&k| {
                    let e = w[k] as f64 * n as f64;
                    (counts[k] - e).powi(2) / e
                })
                .sum();
            assert!(chi2 < 13.82, "{dev}: chi2 {chi2} for counts {counts:?}");
            // Without replacement: every category at most once per row, and the first draw
            // follows the weights.
            let rows = 4000;
            let wr = Tensor::from_slice(&w, &[1, 4])?.expand(&[rows as isize, 4])?;
            let draws = wr.multinomial(3, false)?.to_vec::<i32>()?;
            let mut first = [0f64; 4];
            for row in draws.chunks(3) {
                let mut r = row.to_vec();
                r.sort();
                r.dedup();
                assert_eq!(
                    r.len(),
                    3,
                    "{dev}: repeated draw without replacement {row:?}"
                );
                assert!(!row.contains(&1), "{dev}: drew a zero weight {row:?}");
                first[row[0] as usize] += 1.0;
            }
            let chi2: f64 = [0, 2, 3]
                .iter()
                .map(|&k| {
                    let e = w[k] as f64 * rows as f64;
                    (first[k] - e).powi(2) / e
                })
                .sum();
            assert!(chi2 < 13.82, "{dev}: chi2 {chi2} for first draws {first:?}");
            let p = Tensor::randperm(50)?.to_vec::<i32>()?;
            let mut sorted = p.clone();
            sorted.sort();
            assert_eq!(sorted, (0..50).collect::<Vec<i32>>(), "{dev}");
            assert_ne!(p, sorted, "{dev}: randperm returned the identity");
            Ok(())
        });
    }
}

/// A long scan adds at most a few hundred terms per output: float sums stay close to the exact
/// running sum (a naive sequential float32 sum of 100,000 values drifts by far more).
#[test]
fn cumsum_of_a_long_axis_is_accurate() {
    let n = 100_000;
    let vals: Vec<f32> = (0..n).map(|i| ((i * 7919) % 1000) as f32 / 997.0).collect();
    let mut exact = 0f64;
    let want: Vec<f64> = vals
        .iter()
        .map(|&v| {
            exact += v as f64;
            exact
        })
        .collect();
    for dev in common::devices() {
        on(dev, || {
            let got = Tensor::from_slice(&vals, &[n])?
                .cumsum(0)?
                .to_vec::<f32>()?;
            let worst = got
                .iter()
                .zip(&want)
                .map(|(&g, &w)| ((g as f64 - w) / w.max(1.0)).abs())
                .fold(0.0, f64::max);
            assert!(worst < 2e-6, "{dev}: relative error {worst}");
            let (m, i) = Tensor::from_slice(&vals, &[n])?.cummax(0)?;
            let top = 999.0f32 / 997.0;
            let first = vals.iter().position(|&v| v == top).expect("the maximum") as i32;
            assert_eq!(m.get(&s![-1])?.item::<f32>()?, top, "{dev}");
            assert_eq!(i.get(&s![-1])?.item::<i32>()?, first, "{dev}");
            Ok(())
        });
    }
}

#[test]
fn sort_is_stable_and_puts_nan_last() {
    for dev in common::devices() {
        on(dev, || {
            let x = Tensor::from_slice(&[2.0f32, f32::NAN, 1.0, 2.0, -1.0, 1.0], &[6])?;
            let (v, i) = x.sort(0, false)?;
            assert_eq!(i.to_vec::<i32>()?, [4, 2, 5, 0, 3, 1], "{dev}");
            let v = v.to_vec::<f32>()?;
            assert_eq!(&v[..5], &[-1.0, 1.0, 1.0, 2.0, 2.0], "{dev}");
            assert!(v[5].is_nan(), "{dev}");
            let (_, d) = x.sort(0, true)?;
            assert_eq!(d.to_vec::<i32>()?, [1, 0, 3, 2, 5, 4], "{dev}");
            let (tv, ti) = x.topk(2, 0, false)?;
            assert_eq!(tv.to_vec::<f32>()?, [-1.0, 1.0], "{dev}");
            assert_eq!(ti.to_vec::<i32>()?, [4, 2], "{dev}");
            Ok(())
        });
    }
}

#[test]
fn gradient_returns_gradients_without_storing_them() {
    on(Device::Interp, || {
        let x = Tensor::from_slice(&[1.0f32, 2.0, 3.0], &[3])?;
        let w = Tensor::from_slice(&[0.5f32, -1.0, 2.0], &[3])?;
        let y = x.mul(&w)?.square()?.sum((), false)?;
        let g = y.gradient(&[&x, &w], None)?;
        assert_eq!(g[0].to_vec::<f32>()?, [0.5, 4.0, 24.0]);
        assert_eq!(g[1].to_vec::<f32>()?, [1.0, -8.0, 36.0]);
        assert!(x.grad().is_none() && w.grad().is_none());
        // From a non-scalar, given the gradient flowing in.
        let z = x.mul(3.0)?;
        let seed = Tensor::from_slice(&[1.0f32, 0.0, -1.0], &[3])?;
        assert_eq!(
            z.gradient(&[&x], Some(&seed))?[0].to_vec::<f32>()?,
            [3.0, 0.0, -3.0]
        );
        let e = z.gradient(&[&x], None).unwrap_err();
        assert!(e.msg.contains("gradient: needs a scalar"), "{e}");
        Ok(())
    });
}

#[test]
fn index_errors_name_the_op_and_the_operands() {
    on(Device::Interp, || {
        let x = arange(12, &[3, 4])?;
        let cases: Vec<(wgrad::Result<Tensor>, &str)> = vec![
            (
                x.get(&s![3]),
                "get: index 3 is out of range for axis 0 of size 3",
            ),
            (
                x.get(&s![0, 0, 0]),
                "get: 3 indices for a tensor of shape [3, 4]",
            ),
            (x.get(&s![..., 0, ...]), "only one ellipsis"),
            (
                x.get(&[Index::Tensor(x.clone())]),
                "get: a tensor index must hold integers, got f32",
            ),
            (x.get(&s![..;0]), "get: slice step of axis 0 is 0"),
            (
                x.set(&s![0], Tensor::ones(&[3])?),
                "set: value of shape [3] does not broadcast to the indexed shape [4]",
            ),
            (
                Tensor::einsum("ij,jk->ik", &[&x, &x]),
                "einsum: axis 'j' has sizes 4 and 3",
            ),
            (
                x.topk(5, -1, true).map(|p| p.0),
                "topk: k = 5 is out of range for 4 elements",
            ),
            (
                x.multinomial(5, false),
                "multinomial: cannot draw 5 samples without replacement from 4",
            ),
            (
                x.tril(0)?.reshape(&[12])?.tril(0),
                "tril: needs at least 2 dimensions, got shape [12]",
            ),
        ];
        for (got, want) in cases {
            match got {
                Ok(t) => panic!(
                    "expected an error containing {want:?}, got a tensor {:?}",
                    t.shape()
                ),
                Err(e) => {
                    assert!(
                        e.msg.contains(want),
                        "{:?} does not contain {want:?}",
                        e.msg
                    );
                    assert!(matches!(e.kind, ErrorKind::Shape | ErrorKind::DType), "{e}");
                }
            }
        }
        Ok(())
    });
}

/// A value that reads one element of the assigned buffer and broadcasts it to others must not
/// see that element already overwritten (the scheduler computes such a value into its own
/// buffer first).
#[test]
fn an_assign_reading_one_of_its_own_elements_sees_the_old_value() {
    for dev in common::devices() {
        on(dev, || {
            let s = Tensor::from_slice(&[5.0f32, 0.0], &[2])?.realize()?;
            let t = s.get(&s![0])?;
            let v = Tensor::cat(
                &[&t.add(1.0)?.reshape(&[1])?, &t.mul(10.0)?.reshape(&[1])?],
                0,
            )?;
            s.assign(&v)?.realize()?;
            assert_eq!(s.to_vec::<f32>()?, [6.0, 50.0], "{dev}");
            // The same through set: every element from the first one.
            let x = Tensor::from_slice(&[2.0f32, 3.0, 4.0, 5.0], &[4])?.realize()?;
            x.set(&s![..], x.get(&s![0])?.add(&x)?)?.realize()?;
            assert_eq!(x.to_vec::<f32>()?, [4.0, 5.0, 6.0, 7.0], "{dev}");
            Ok(())
        });
    }
}

//! Empty (zero-size) tensors, with NumPy/PyTorch semantics, on every backend present: creation,
//! views and elementwise ops keep the empty shape, reductions over an empty axis give their
//! identity (a NaN mean), matmul over an empty inner axis gives zeros, `cat` skips empty
//! operands, indexing may select nothing, gradients flow, a TinyJit step may hold an empty
//! intermediate, and no kernel ever binds a zero-size buffer.

#![cfg(not(target_arch = "wasm32"))]

mod common;

use wgrad::schedule::ScheduleItem;
use wgrad::{s, Context, Conv2dOpts, DType, Device, Index, Tensor, TinyJit};

fn on<T>(dev: Device, f: impl FnOnce() -> wgrad::Result<T>) -> T {
    Context::new()
        .dev(dev)
        .run(f)
        .unwrap_or_else(|e| panic!("on {dev}: {e}"))
}

fn arange(n: usize, shape: &[isize]) -> wgrad::Result<Tensor> {
    Tensor::arange(0.0, n as f64, 1.0, DType::F32)?.reshape(shape)
}

fn vals(t: &Tensor) -> wgrad::Result<Vec<f32>> {
    t.to_vec_f32()
}

/// Equal as f32, NaN equal to NaN.
fn same(got: &[f32], want: &[f32]) -> bool {
    got.len() == want.len()
        && got
            .iter()
            .zip(want)
            .all(|(a, b)| a == b || (a.is_nan() && b.is_nan()))
}

#[test]
fn creation_gives_empty_tensors_without_buffers() {
    for dev in common::devices() {
        on(dev, || {
            for t in [
                Tensor::zeros(&[0, 3])?,
                Tensor::from_vec(Vec::<f32>::new(), &[0])?,
                Tensor::from_slice::<f32>(&[], &[2, 0, 4])?,
                Tensor::empty(&[0], DType::I32)?,
                Tensor::arange(2.0, 2.0, 1.0, DType::F32)?,
                Tensor::linspace(0.0, 1.0, 0, DType::F32)?,
                Tensor::eye(0)?,
                Tensor::randn(&[3, 0])?,
            ] {
                assert_eq!(t.numel(), 0, "{:?}", t.shape());
                t.realize()?;
                assert!(t.node().buffer().is_none());
                assert_eq!(t.to_vec_f32()?, Vec::<f32>::new());
            }
            assert_eq!(Tensor::zeros(&[0, 3])?.shape(), vec![0, 3]);
            assert_eq!(Tensor::eye(0)?.shape(), vec![0, 0]);
            assert_eq!(
                Tensor::from_vec(Vec::<i32>::new(), &[0])?.to_vec::<i32>()?,
                Vec::<i32>::new()
            );
            // A wrong number of values is still an error.
            assert!(Tensor::from_slice(&[1.0f32], &[0]).is_err());
            assert!(Tensor::arange(2.0, 0.0, 1.0, DType::F32).is_err());
            Ok(())
        });
    }
}

#[test]
fn views_and_elementwise_ops_keep_the_empty_shape() {
    for dev in common::devices() {
        on(dev, || {
            let x = Tensor::zeros(&[2, 0, 3])?;
            assert_eq!(x.reshape(&[0, 6])?.shape(), vec![0, 6]);
            assert_eq!(x.reshape(&[-1, 3])?.shape(), vec![0, 3]);
            assert!(
                x.reshape(&[0, -1]).is_err(),
                "-1 is ambiguous with 0 elements"
            );
            assert_eq!(x.permute(&[2, 0, 1])?.shape(), vec![3, 2, 0]);
            assert_eq!(x.flatten(0)?.shape(), vec![0]);
            assert_eq!(x.flip(&[1])?.shape(), vec![2, 0, 3]);
            assert_eq!(Tensor::zeros(&[1, 0])?.expand(&[4, 0])?.shape(), vec![4, 0]);
            assert_eq!(Tensor::zeros(&[1, 3])?.expand(&[0, 3])?.shape(), vec![0, 3]);
            let y = x.add(1.0)?.mul(&x.exp()?)?.relu()?.sigmoid()?;
            assert_eq!(y.shape(), vec![2, 0, 3]);
            assert_eq!(vals(&y)?, Vec::<f32>::new());
            // Broadcasting a size-0 axis against size 1.
            let z = Tensor::zeros(&[0, 1])?.add(&Tensor::ones(&[1, 4])?)?;
            assert_eq!(z.shape(), vec![0, 4]);
            assert_eq!(vals(&z.contiguous())?, Vec::<f32>::new());
            assert!(Tensor::zeros(&[0])?.add(&Tensor::ones(&[2])?).is_err());
            Ok(())
        });
    }
}

#[test]
fn reductions_over_an_empty_axis_give_their_identity() {
    for dev in common::devices() {
        on(dev, || {
            let x = Tensor::zeros(&[0, 3])?;
            let inf = f32::INFINITY;
            assert_eq!(vals(&x.sum(0, false)?)?, vec![0.0; 3]);
            assert_eq!(vals(&x.sum((), false)?)?, vec![0.0]);
            assert_eq!(vals(&x.prod(0, false)?)?, vec![1.0; 3]);
            assert_eq!(vals(&x.max(0, false)?)?, vec![-inf; 3]);
            assert_eq!(vals(&x.min(0, true)?)?, vec![inf; 3]);
            assert!(same(&vals(&x.mean(0, false)?)?, &[f32::NAN; 3]));
            assert_eq!(x.any(0, false)?.to_vec::<bool>()?, vec![false; 3]);
            assert_eq!(x.all(0, false)?.to_vec::<bool>()?, vec![true; 3]);
            assert_eq!(vals(&x.logsumexp(0, false)?)?, vec![-inf; 3]);
            // Over the non-empty axis: still empty.
            assert_eq!(x.sum(1, false)?.shape(), vec![0]);
            assert_eq!(x.sum(1, true)?.shape(), vec![0, 1]);
            // Integer sums, fused into a larger expression.
            let i = Tensor::zeros(&[3, 0])?.int()?;
            let r = i
                .sum(1, false)?
                .add(&Tensor::from_slice(&[1i32, 2, 3], &[3])?)?;
            assert_eq!(r.to_vec::<i32>()?, vec![1, 2, 3]);
            // argmax over an empty axis is an error (PyTorch).
            let e = x
                .argmax(Some(0), false)
                .expect_err("argmax over an empty axis");
            assert!(e.to_string().contains("argmax"), "{e}");
            assert!(x.argmax(None, false).is_err());
            assert_eq!(x.argmax(Some(1), false)?.shape(), vec![0]);
            Ok(())
        });
    }
}

#[test]
fn matmul_over_an_empty_inner_axis_is_zeros() {
    for dev in common::devices() {
        on(dev, || {
            let a = Tensor::zeros(&[2, 0])?;
            let b = Tensor::ones(&[0, 3])?;
            let c = a.matmul(&b)?;
            assert_eq!(c.shape(), vec![2, 3]);
            assert_eq!(vals(&c)?, vec![0.0; 6]);
            let d = b.matmul(&Tensor::ones(&[3, 4])?)?;
            assert_eq!(d.shape(), vec![0, 4]);
            assert_eq!(vals(&d)?, Vec::<f32>::new());
            // Used in a larger graph (with a bias), and linear layers over an empty batch.
            let bias = Tensor::from_slice(&[1.0f32, 2.0, 3.0], &[3])?;
            assert_eq!(vals(&c.add(&bias)?)?, vec![1.0, 2.0, 3.0, 1.0, 2.0, 3.0]);
            Ok(())
        });
    }
}

#[test]
fn cat_and_stack_skip_or_keep_empty_operands() {
    for dev in common::devices() {
        on(dev, || {
            let a = arange(6, &[2, 3])?;
            let e = Tensor::zeros(&[0, 3])?;
            let c = Tensor::cat(&[&e, &a, &e], 0)?;
            assert_eq!(c.shape(), vec![2, 3]);
            assert_eq!(vals(&c)?, vals(&a)?);
            // PyTorch's rule: a 1-D empty tensor is skipped whatever the other shapes.
            let legacy = Tensor::zeros(&[0])?;
            assert_eq!(vals(&Tensor::cat(&[&a, &legacy], 1)?)?, vals(&a)?);
            let w = Tensor::cat(&[&a, &Tensor::zeros(&[2, 0])?], 1)?;
            assert_eq!(w.shape(), vec![2, 3]);
            let ee = Tensor::cat(&[&e, &e], 0)?;
            assert_eq!(ee.shape(), vec![0, 3]);
            assert!(Tensor::cat(&[&a, &Tensor::zeros(&[0, 2])?], 0).is_err());
            let st = Tensor::stack(&[&e, &e], 0)?;
            assert_eq!(st.shape(), vec![2, 0, 3]);
            // pad of an empty tensor is the pad value.
            let p = Tensor::zeros(&[0, 2])?.pad(&[(1, 1), (0, 1)], 7.0)?;
            assert_eq!(p.shape(), vec![2, 3]);
            assert_eq!(vals(&p)?, vec![7.0; 6]);
            Ok(())
        });
    }
}

#[test]
fn indexing_can_select_nothing() {
    for dev in common::devices() {
        on(dev, || {
            let x = arange(12, &[4, 3])?;
            let e = x.get(&s![2..2])?;
            assert_eq!(e.shape(), vec![0, 3]);
            assert_eq!(vals(&e)?, Vec::<f32>::new());
            assert_eq!(x.get(&s![.., 3..])?.shape(), vec![4, 0]);
            assert_eq!(
                x.get(&[Index::slice(Some(3), Some(1), 1)])?.shape(),
                vec![0, 3]
            );
            assert_eq!(x.slice(0, 2, 2, 1)?.shape(), vec![0, 3]);
            // Reversed and stepped slices of an empty axis.
            assert_eq!(e.get(&s![..;-1])?.shape(), vec![0, 3]);
            assert_eq!(e.get(&s![..;2, ..;-1])?.shape(), vec![0, 3]);
            assert_eq!(e.get(&s![.., 1])?.shape(), vec![0]);
            // An empty index list.
            let none = Tensor::from_vec(Vec::<i32>::new(), &[0])?;
            assert_eq!(x.index(&none)?.shape(), vec![0, 3]);
            assert_eq!(
                x.gather(0, &Tensor::zeros(&[0, 3])?.int()?)?.shape(),
                vec![0, 3]
            );
            // masked_select selecting nothing, nonzero of all zeros.
            let m = x.gt(100.0)?;
            assert_eq!(x.masked_select(&m)?.shape(), vec![0]);
            let nz = Tensor::zeros(&[2, 3])?.nonzero()?;
            assert_eq!(nz.shape(), vec![0, 2]);
            assert_eq!(nz.to_vec::<i32>()?, Vec::<i32>::new());
            // Writing into an empty slice does nothing.
            let t = x.contiguous().realize()?;
            t.set(&s![1..1], 5.0)?.realize()?;
            assert_eq!(vals(&t)?, vals(&x)?);
            // Integer indexing into an empty axis is still out of range.
            assert!(e.get(&s![0]).is_err());
            Ok(())
        });
    }
}

#[test]
fn backward_through_empty_tensors_gives_empty_and_zero_gradients() {
    for dev in common::devices() {
        on(dev, || {
            let w = Tensor::from_slice(&[1.0f32, 2.0, 3.0], &[3])?;
            w.set_requires_grad(true);
            let x = Tensor::zeros(&[0, 3])?;
            x.set_requires_grad(true);
            // An empty batch: the loss is 0 and the weights' gradient is zeros.
            let loss = x.mul(&w)?.sum((), false)?;
            assert_eq!(loss.item::<f32>()?, 0.0);
            loss.backward()?;
            let gw = w.grad().expect("w has a gradient");
            assert_eq!(vals(&gw)?, vec![0.0; 3]);
            let gx = x.grad().expect("x has a gradient");
            assert_eq!(gx.shape(), vec![0, 3]);
            assert_eq!(vals(&gx)?, Vec::<f32>::new());
            // An empty slice inside a larger graph.
            let v = arange(4, &[4])?;
            v.set_requires_grad(true);
            let y = v
                .get(&s![1..1])?
                .sum((), false)?
                .add(&v.square()?.sum((), false)?)?;
            y.backward()?;
            assert_eq!(vals(&v.grad().expect("v grad"))?, vec![0.0, 2.0, 4.0, 6.0]);
            Ok(())
        });
    }
}

#[test]
fn a_jitted_step_may_hold_an_empty_intermediate() {
    for dev in common::devices() {
        on(dev, || {
            let mut jit = TinyJit::new(|xs: &[Tensor]| {
                let e = xs[0].get(&s![.., 0..0])?; // [3, 0]
                let s = e.sum(1, false)?; // zeros [3]
                let m = e.max(1, false)?.maximum(0.0)?; // zeros [3]
                Ok(vec![xs[0].sum(1, false)?.add(&s)?.add(&m)?.realize()?])
            });
            for k in 0..4 {
                let x = arange(6, &[3, 2])?.add(k as f64)?.contiguous().realize()?;
                let out = jit.call(&[&x])?;
                let k = k as f32;
                assert_eq!(
                    vals(&out[0])?,
                    vec![1.0 + 2.0 * k, 5.0 + 2.0 * k, 9.0 + 2.0 * k]
                );
            }
            Ok(())
        });
    }
}

#[test]
fn empty_tensors_display_like_pytorch() {
    let t = Tensor::zeros(&[0, 3]).unwrap();
    assert_eq!(format!("{t}"), "tensor([], size=(0, 3))");
    let t = Tensor::zeros(&[0]).unwrap();
    assert_eq!(format!("{t}"), "tensor([])");
    let t = Tensor::zeros(&[2, 0]).unwrap();
    assert_eq!(format!("{t}"), "tensor([], size=(2, 0))");
}

#[test]
fn composite_ops_handle_empty_axes() {
    for dev in common::devices() {
        on(dev, || {
            let e = Tensor::zeros(&[2, 0])?;
            let (v, i) = e.sort(-1, false)?;
            assert_eq!((v.shape(), i.shape()), (vec![2, 0], vec![2, 0]));
            assert_eq!(e.topk(0, -1, true)?.0.shape(), vec![2, 0]);
            assert!(e.topk(1, -1, true).is_err());
            assert_eq!(e.cumsum(-1)?.shape(), vec![2, 0]);
            assert_eq!(
                vals(&Tensor::zeros(&[0, 2])?.cumsum(0)?)?,
                Vec::<f32>::new()
            );
            let m = Tensor::einsum("ij,jk->ik", &[&e, &Tensor::ones(&[0, 3])?])?;
            assert_eq!(vals(&m)?, vec![0.0; 6]);
            let g = Tensor::meshgrid(&[&Tensor::zeros(&[0])?, &Tensor::ones(&[3])?], "ij")?;
            assert_eq!(g[1].shape(), vec![0, 3]);
            let parts = arange(6, &[2, 3])?.split(&[0, 3, 0], 1)?;
            assert_eq!(parts[0].shape(), vec![2, 0]);
            assert_eq!(vals(&parts[1])?, vec![0.0, 1.0, 2.0, 3.0, 4.0, 5.0]);
            assert_eq!(e.chunk(3, 1)?.len(), 3);
            assert_eq!(arange(3, &[3])?.repeat(&[0])?.shape(), vec![0]);
            assert_eq!(
                arange(3, &[3])?.repeat_interleave(0, None)?.shape(),
                vec![0]
            );
            assert_eq!(e.roll(&[1], &[1])?.shape(), vec![2, 0]);
            assert_eq!(arange(6, &[2, 3])?.diagonal(5, 0, 1)?.shape(), vec![0]);
            assert_eq!(e.flip(&[0, 1])?.get(&s![..;-1, ..;-2])?.shape(), vec![2, 0]);
            // A batch of 0 images through a convolution and a linear layer.
            let x = Tensor::zeros(&[0, 3, 5, 5])?;
            let w = Tensor::ones(&[4, 3, 3, 3])?;
            let y = x.conv2d(&w, None, &Conv2dOpts::default())?;
            assert_eq!(y.shape(), vec![0, 4, 3, 3]);
            let lin = wgrad::nn::Linear::new(3, 2)?;
            assert_eq!(lin.forward(&Tensor::zeros(&[0, 3])?)?.shape(), vec![0, 2]);
            // A layer with no input features is its bias, which starts at 0 (PyTorch).
            let none = wgrad::nn::Linear::new(0, 2)?;
            assert_eq!(
                vals(&none.forward(&Tensor::zeros(&[4, 0])?)?)?,
                vec![0.0; 8]
            );
            // An empty kernel stays an error naming the op.
            let k = x.conv2d(&Tensor::ones(&[4, 3, 0, 3])?, None, &Conv2dOpts::default());
            assert!(k.expect_err("empty kernel").to_string().contains("conv2d"));
            Ok(())
        });
    }
}

/// What the scheduler makes of a graph full of empty tensors: kernels only for the non-empty
/// results, none binding a zero-size buffer.
#[test]
fn no_kernel_binds_a_zero_size_buffer() {
    on(Device::Interp, || {
        let e = Tensor::zeros(&[0, 3])?.add(1.0)?.exp()?;
        let outs = [
            e.sum(0, false)?.add(&arange(3, &[3])?)?,
            e.max(0, true)?.maximum(0.0)?,
            e.pad(&[(1, 0), (0, 0)], 2.0)?,
            Tensor::cat(&[&e, &arange(3, &[1, 3])?], 0)?,
            e.contiguous(),
        ];
        let items = Tensor::schedule_all(&outs.iter().collect::<Vec<_>>())?;
        assert_eq!(items.len(), 4, "one kernel per non-empty output");
        for it in &items {
            let ScheduleItem::Kernel { ast, .. } = it else {
                panic!("unexpected copy");
            };
            assert!(ast.bufs.iter().all(|&(_, n)| n > 0), "{:?}", ast.bufs);
        }
        assert_eq!(vals(&outs[0])?, vec![0.0, 1.0, 2.0]);
        assert_eq!(vals(&outs[1])?, vec![0.0; 3]);
        assert_eq!(vals(&outs[2])?, vec![2.0; 3]);
        assert_eq!(vals(&outs[3])?, vec![0.0, 1.0, 2.0]);
        Ok(())
    });
}

//! Bad input is an `Err` whose message names the op and the shapes / dtypes / devices; nothing
//! panics, and the engine keeps working afterwards.

// Native only: the browser tests are tests/web.rs.
#![cfg(not(target_arch = "wasm32"))]

use std::panic::{catch_unwind, AssertUnwindSafe};

use wgrad::{
    Axes, Context, Conv1dOpts, Conv2dOpts, ConvTranspose1dOpts, ConvTranspose2dOpts,
    CrossEntropyOpts, DType, Device, ErrorKind, Index, Interpolation, Operand, PadMode, Padding,
    Padding1d, Pool2dOpts, Reduction, Tensor,
};

fn t(shape: &[usize]) -> Tensor {
    let n: usize = shape.iter().product();
    Tensor::from_vec(vec![1.0f32; n], shape).unwrap()
}

fn err_contains<T: std::fmt::Debug>(r: wgrad::Result<T>, kind: ErrorKind, parts: &[&str]) {
    let e = r.expect_err("expected an error");
    assert_eq!(e.kind, kind, "{e}");
    for p in parts {
        assert!(
            e.msg.contains(p),
            "message {:?} should mention {p:?}",
            e.msg
        );
    }
}

#[test]
fn shape_mismatches_name_op_and_shapes() {
    err_contains(
        t(&[2, 3]).add(t(&[4, 3])),
        ErrorKind::Shape,
        &["add", "[2, 3]", "[4, 3]"],
    );
    err_contains(
        t(&[2, 3]).matmul(&t(&[4, 5])),
        ErrorKind::Shape,
        &["matmul", "[2, 3]", "[4, 5]"],
    );
    err_contains(
        t(&[2, 3]).reshape(&[4, 2]),
        ErrorKind::Shape,
        &["reshape", "[2, 3]"],
    );
    err_contains(t(&[2, 3]).expand(&[4, 4]), ErrorKind::Shape, &["expand"]);
    err_contains(
        Tensor::from_vec(vec![1.0f32; 5], &[2, 3]),
        ErrorKind::Shape,
        &["from_slice", "[2, 3]"],
    );
    err_contains(
        Tensor::cat(&[&t(&[2, 3]), &t(&[2, 4])], 0),
        ErrorKind::Shape,
        &["cat"],
    );
    err_contains(
        t(&[2, 3]).assign(&t(&[3, 2])),
        ErrorKind::Shape,
        &["assign"],
    );
}

#[test]
fn bad_axes() {
    err_contains(
        t(&[2, 3]).sum(2, false),
        ErrorKind::Shape,
        &["sum", "axis 2"],
    );
    err_contains(t(&[2, 3]).softmax(-3), ErrorKind::Shape, &["axis -3"]);
    err_contains(t(&[2, 3]).permute(&[0, 0]), ErrorKind::Shape, &["permute"]);
    err_contains(t(&[2, 3]).transpose(0, 5), ErrorKind::Shape, &["transpose"]);
}

#[test]
fn dtype_mismatches() {
    let i = Tensor::from_vec(vec![1i32, 2], &[2]).unwrap();
    err_contains(i.to_vec::<f32>(), ErrorKind::DType, &["i32", "f32"]);
    err_contains(t(&[2]).idiv(2), ErrorKind::DType, &["idiv", "f32"]);
    err_contains(t(&[2]).logical_not(), ErrorKind::DType, &["logical_not"]);
    err_contains(t(&[3]).index(&t(&[2])), ErrorKind::DType, &["index"]);
    err_contains(
        i.sum((), false).unwrap().backward(),
        ErrorKind::DType,
        &["backward"],
    );
}

#[test]
fn empty_and_oversized_shapes() {
    // Empty shapes are tensors (tests/empty.rs); the zero-size errors that stay name the op.
    assert_eq!(Tensor::zeros(&[2, 0]).unwrap().shape(), vec![2, 0]);
    assert_eq!(t(&[4]).slice(0, 3, 1, 1).unwrap().shape(), vec![0]);
    err_contains(
        Tensor::zeros(&[0, 3]).unwrap().argmax(Some(0), false),
        ErrorKind::Shape,
        &["argmax", "[0, 3]", "empty"],
    );
    err_contains(
        Tensor::zeros(&[0, 3]).unwrap().reshape(&[0, -1]),
        ErrorKind::Shape,
        &["reshape", "[0, -1]"],
    );
    err_contains(
        Tensor::zeros(&[1 << 20, 1 << 20]),
        ErrorKind::Shape,
        &["more than"],
    );
}

#[test]
fn unknown_device_and_bad_options() {
    err_contains(
        "TPU".parse::<Device>(),
        ErrorKind::Device,
        &["unknown device", "TPU"],
    );
    let x = t(&[1, 1, 8, 8]);
    let w = t(&[2, 1, 3, 3]);
    let same_strided = Conv2dOpts {
        stride: (2, 2),
        padding: Padding::Same,
        ..Default::default()
    };
    err_contains(
        x.conv2d(&w, None, &same_strided),
        ErrorKind::Shape,
        &["same", "stride"],
    );
    err_contains(
        x.conv2d(&t(&[2, 3, 3, 3]), None, &Conv2dOpts::default()),
        ErrorKind::Shape,
        &["conv2d"],
    );
    err_contains(x.dropout(1.5), ErrorKind::Shape, &["dropout"]);
    err_contains(
        t(&[4]).item::<f32>(),
        ErrorKind::Shape,
        &["item", "4 elements"],
    );
}

#[test]
fn engine_keeps_working_after_errors() {
    let _ = t(&[2, 3]).add(t(&[4, 3]));
    let r = t(&[2, 3])
        .add(1.0)
        .unwrap()
        .sum((), false)
        .unwrap()
        .item::<f32>()
        .unwrap();
    assert_eq!(r, 12.0);
}

#[test]
fn a_0d_tensor_has_no_axis() {
    let s = Tensor::randn(&[]).unwrap();
    let msg = "out of range for a tensor of 0 dimensions";
    err_contains(
        s.var(0, false, 1.0),
        ErrorKind::Shape,
        &["var", "axis 0", msg],
    );
    err_contains(s.split(&[2, 3, 4], 0), ErrorKind::Shape, &["split", msg]);
    err_contains(s.slice(0, 0, 1, 1), ErrorKind::Shape, &["slice", msg]);
    err_contains(s.sum(0, false), ErrorKind::Shape, &["sum", msg]);
    err_contains(
        s.mean(-1, true),
        ErrorKind::Shape,
        &["mean", "axis -1", msg],
    );
    err_contains(s.max(0, false), ErrorKind::Shape, &["max", msg]);
    err_contains(s.min(0, false), ErrorKind::Shape, &["max", msg]);
    err_contains(s.std(0, false, 0.0), ErrorKind::Shape, &["var", msg]);
    err_contains(s.logsumexp(0, false), ErrorKind::Shape, &["logsumexp", msg]);
    err_contains(s.argmax(Some(0), false), ErrorKind::Shape, &["argmax", msg]);
    err_contains(
        s.argmin(Some(-1), false),
        ErrorKind::Shape,
        &["argmin", msg],
    );
    err_contains(s.softmax(-1), ErrorKind::Shape, &["softmax", msg]);
    err_contains(s.log_softmax(0), ErrorKind::Shape, &["log_softmax", msg]);
    err_contains(s.squeeze(Some(0)), ErrorKind::Shape, &["squeeze", msg]);
    err_contains(s.transpose(0, 0), ErrorKind::Shape, &["transpose", msg]);
    err_contains(s.flip(&[0]), ErrorKind::Shape, &["flip", msg]);
    err_contains(s.chunk(2, 0), ErrorKind::Shape, &["chunk", msg]);
    err_contains(s.gather(0, &s), ErrorKind::Shape, &["gather", msg]);
    err_contains(Tensor::cat(&[&s, &s], 0), ErrorKind::Shape, &["cat", msg]);
    err_contains(s.flatten(1), ErrorKind::Shape, &["flatten", "axis 1"]);
    err_contains(s.unsqueeze(2), ErrorKind::Shape, &["unsqueeze", "axis 2"]);
    // What needs no axis still works on a 0-d tensor.
    let v = Tensor::from_vec(vec![2.5f32], &[]).unwrap();
    assert_eq!(v.sum((), false).unwrap().to_vec::<f32>().unwrap(), [2.5]);
    assert_eq!(
        v.var((), false, 0.0).unwrap().to_vec::<f32>().unwrap(),
        [0.0]
    );
    assert_eq!(v.argmax(None, false).unwrap().to_vec::<i32>().unwrap(), [0]);
    assert_eq!(v.flatten(-1).unwrap().shape(), [1]);
    assert_eq!(v.unsqueeze(-1).unwrap().shape(), [1]);
    assert_eq!(
        Tensor::stack(&[&v, &v], 0)
            .unwrap()
            .to_vec::<f32>()
            .unwrap(),
        [2.5, 2.5]
    );
}

#[test]
fn out_of_range_axes_name_the_op() {
    let x = t(&[2, 3]);
    for a in [2, -3, isize::MAX, isize::MIN] {
        err_contains(x.sum(a, false), ErrorKind::Shape, &["sum", "out of range"]);
        err_contains(
            x.split(&[1, 1], a),
            ErrorKind::Shape,
            &["split", "out of range"],
        );
        err_contains(
            x.slice(a, 0, 1, 1),
            ErrorKind::Shape,
            &["slice", "out of range"],
        );
        err_contains(x.softmax(a), ErrorKind::Shape, &["softmax", "out of range"]);
        err_contains(x.argmin(Some(a), false), ErrorKind::Shape, &["argmin"]);
        err_contains(
            x.unsqueeze(a.saturating_mul(2)),
            ErrorKind::Shape,
            &["unsqueeze"],
        );
        err_contains(
            Tensor::stack(&[&x], a.saturating_mul(2)),
            ErrorKind::Shape,
            &["stack"],
        );
    }
}

// ---------------------------------------------------------------- every op of the op table

/// Values to try for an argument of an op-table row, given the receiver; the first is a
/// plausible one, the others are wrong in the ways a caller gets axes wrong (out of range,
/// negative, on a 0-d tensor, repeated, empty lists).
trait Probe: Sized {
    fn probes(x: &Tensor) -> Vec<Self>;
}

fn zero_d() -> Tensor {
    Tensor::from_vec(vec![1.5f32], &[]).unwrap()
}

impl Probe for Tensor {
    fn probes(x: &Tensor) -> Vec<Self> {
        let ints = Tensor::from_vec(vec![0i32, 1], &[2]).unwrap();
        vec![x.clone(), zero_d(), ints]
    }
}

impl<T: Probe> Probe for Option<T> {
    fn probes(x: &Tensor) -> Vec<Self> {
        let mut v: Vec<Self> = T::probes(x).into_iter().map(Some).collect();
        v.insert(1, None);
        v
    }
}

impl Probe for Vec<Tensor> {
    fn probes(x: &Tensor) -> Vec<Self> {
        vec![
            vec![x.clone(), x.clone()],
            vec![],
            vec![zero_d(), zero_d()],
            vec![x.clone(), zero_d()],
        ]
    }
}

impl Probe for Operand {
    fn probes(x: &Tensor) -> Vec<Self> {
        vec![
            Operand::Float(0.5),
            Operand::Int(2),
            Operand::from(x),
            Operand::from(zero_d()),
        ]
    }
}

impl Probe for isize {
    fn probes(_: &Tensor) -> Vec<Self> {
        vec![0, -1, 1, 2, 3, -3, -4, isize::MAX, isize::MIN]
    }
}

impl Probe for Vec<isize> {
    fn probes(_: &Tensor) -> Vec<Self> {
        vec![
            vec![0],
            vec![],
            vec![-1],
            vec![1, 0],
            vec![0, 0],
            vec![5],
            vec![isize::MIN],
            vec![-1, -1],
        ]
    }
}

impl Probe for Axes {
    fn probes(x: &Tensor) -> Vec<Self> {
        let mut v = vec![Axes::All];
        v.extend(Vec::<isize>::probes(x).into_iter().map(Axes::Some));
        v
    }
}

// The other argument types are not axes: one plausible value and one edge each.
impl Probe for f64 {
    fn probes(_: &Tensor) -> Vec<Self> {
        vec![0.5, f64::NAN]
    }
}

impl Probe for Vec<f64> {
    fn probes(_: &Tensor) -> Vec<Self> {
        vec![vec![1.0, 0.5], vec![], vec![f64::NAN]]
    }
}

impl Probe for i64 {
    fn probes(_: &Tensor) -> Vec<Self> {
        vec![0, -1, i64::MAX, i64::MIN]
    }
}

impl Probe for String {
    fn probes(_: &Tensor) -> Vec<Self> {
        [
            "sum", "ij", "xy", "mean", "amin", "", "nonsense", "i,i->", "...",
        ]
        .map(String::from)
        .to_vec()
    }
}

impl Probe for Vec<Index> {
    fn probes(x: &Tensor) -> Vec<Self> {
        vec![
            vec![Index::Int(0)],
            vec![],
            vec![Index::Int(5)],
            vec![Index::Int(isize::MIN)],
            vec![Index::step(.., 0)],
            vec![Index::step(.., isize::MIN)],
            vec![Index::slice(Some(isize::MAX), Some(isize::MIN), -1)],
            vec![Index::Ellipsis, Index::Ellipsis],
            vec![
                Index::NewAxis,
                Index::NewAxis,
                Index::Ellipsis,
                Index::NewAxis,
            ],
            vec![Index::List(vec![isize::MAX])],
            vec![Index::List(vec![])],
            vec![Index::Tensor(x.clone())],
            vec![Index::Tensor(zero_d().cast(DType::I32).expect("cast"))],
            vec![Index::Int(0); 5],
        ]
    }
}

impl Probe for bool {
    fn probes(_: &Tensor) -> Vec<Self> {
        vec![false, true]
    }
}

impl Probe for usize {
    fn probes(_: &Tensor) -> Vec<Self> {
        vec![1, 0, 2]
    }
}

impl Probe for Vec<usize> {
    fn probes(x: &Tensor) -> Vec<Self> {
        vec![vec![1; x.ndim().max(1)], vec![], vec![0], vec![1, 2, 3]]
    }
}

impl Probe for (usize, usize) {
    fn probes(_: &Tensor) -> Vec<Self> {
        vec![(1, 1), (0, 0), (2, 3)]
    }
}

impl Probe for Vec<(usize, usize)> {
    fn probes(x: &Tensor) -> Vec<Self> {
        vec![
            vec![(0, 1); x.ndim()],
            vec![],
            vec![(1, 1)],
            vec![(0, 0); x.ndim() + 1],
        ]
    }
}

impl Probe for DType {
    fn probes(_: &Tensor) -> Vec<Self> {
        vec![DType::F32, DType::I32, DType::Bool]
    }
}

impl Probe for Reduction {
    fn probes(_: &Tensor) -> Vec<Self> {
        vec![Reduction::Mean, Reduction::None]
    }
}

impl Probe for Conv2dOpts {
    fn probes(_: &Tensor) -> Vec<Self> {
        let d = Conv2dOpts::default();
        vec![
            d,
            Conv2dOpts { groups: 0, ..d },
            Conv2dOpts {
                stride: (0, 0),
                ..d
            },
        ]
    }
}

impl Probe for CrossEntropyOpts {
    fn probes(_: &Tensor) -> Vec<Self> {
        let d = CrossEntropyOpts::default();
        vec![
            d,
            CrossEntropyOpts {
                ignore_index: Some(-1),
                ..d
            },
        ]
    }
}

// ---- The convolution block's argument types: a plausible value, then zeros, huge values and
// options that do not fit.

impl Probe for Vec<(isize, isize)> {
    fn probes(x: &Tensor) -> Vec<Self> {
        let n = x.ndim();
        vec![
            vec![(0, 1); n],
            vec![],
            vec![(-1, -1); n],
            vec![(isize::MIN, isize::MAX); n],
            vec![(5, 5); n],
            vec![(0, 0); n + 1],
        ]
    }
}

impl Probe for PadMode {
    fn probes(_: &Tensor) -> Vec<Self> {
        vec![
            PadMode::Constant(0.5),
            PadMode::Reflect,
            PadMode::Replicate,
            PadMode::Circular,
            PadMode::Constant(f64::NAN),
        ]
    }
}

impl Probe for Interpolation {
    fn probes(_: &Tensor) -> Vec<Self> {
        vec![
            Interpolation::Linear,
            Interpolation::Nearest,
            Interpolation::NearestExact,
        ]
    }
}

impl Probe for Pool2dOpts {
    fn probes(_: &Tensor) -> Vec<Self> {
        let d = Pool2dOpts::default();
        vec![
            d,
            Pool2dOpts {
                padding: (5, 5),
                ..d
            },
            Pool2dOpts {
                dilation: (0, 0),
                ..d
            },
            Pool2dOpts {
                stride: Some((0, 1)),
                ..d
            },
            Pool2dOpts {
                padding: (1, 1),
                ceil_mode: true,
                count_include_pad: false,
                ..d
            },
            Pool2dOpts {
                padding: (usize::MAX, usize::MAX),
                dilation: (usize::MAX, 1),
                ..d
            },
        ]
    }
}

impl Probe for Conv1dOpts {
    fn probes(_: &Tensor) -> Vec<Self> {
        let d = Conv1dOpts::default();
        vec![
            d,
            Conv1dOpts { groups: 0, ..d },
            Conv1dOpts { stride: 0, ..d },
            Conv1dOpts {
                padding: Padding1d::Same,
                dilation: usize::MAX,
                ..d
            },
            Conv1dOpts {
                padding: Padding1d::Explicit(usize::MAX),
                ..d
            },
        ]
    }
}

impl Probe for ConvTranspose2dOpts {
    fn probes(_: &Tensor) -> Vec<Self> {
        let d = ConvTranspose2dOpts::default();
        vec![
            d,
            ConvTranspose2dOpts { groups: 0, ..d },
            ConvTranspose2dOpts {
                stride: (0, 2),
                ..d
            },
            ConvTranspose2dOpts {
                padding: (usize::MAX, 0),
                output_padding: (usize::MAX, 3),
                ..d
            },
            ConvTranspose2dOpts {
                stride: (usize::MAX, 1),
                dilation: (usize::MAX, 1),
                ..d
            },
        ]
    }
}

impl Probe for ConvTranspose1dOpts {
    fn probes(_: &Tensor) -> Vec<Self> {
        let d = ConvTranspose1dOpts::default();
        vec![
            d,
            ConvTranspose1dOpts { groups: 0, ..d },
            ConvTranspose1dOpts { stride: 0, ..d },
            ConvTranspose1dOpts {
                padding: 9,
                output_padding: 2,
                ..d
            },
        ]
    }
}

/// Argument number `*at` (counting up) of the call being made: probe `k` if it is argument
/// `target`, else the plausible one. `*past` is set when `k` is beyond its probes.
fn probe<T: Probe>(x: &Tensor, at: &mut usize, target: usize, k: usize, past: &mut bool) -> T {
    let mut probes = T::probes(x);
    let me = *at;
    *at += 1;
    if me == target && k < probes.len() {
        return probes.swap_remove(k);
    }
    if me == target {
        *past = true;
    }
    probes.swap_remove(0)
}

/// Every op of the op table, on 0-d, 1-d and 2-d receivers, with each argument in turn taking
/// each of its probes (the others plausible): the result is `Ok` or an `Err`, never a panic (a
/// panic in the JS API kills the wasm instance); what succeeds also realizes (on the
/// interpreter).
#[test]
fn no_op_of_the_table_panics_on_bad_axes() {
    Context::new()
        .dev(Device::Interp)
        .run(|| table_ops_never_panic(&[zero_d(), t(&[3]), t(&[2, 3])]));
}

/// The same on the inputs of convolutions and pools ((N, C, L) and (N, C, H, W)).
#[test]
fn no_op_of_the_table_panics_on_image_inputs() {
    Context::new()
        .dev(Device::Interp)
        .run(|| table_ops_never_panic(&[t(&[2, 2, 5]), t(&[1, 2, 4, 4])]));
}

fn table_ops_never_panic(receivers: &[Tensor]) {
    let mut failures = vec![];
    let mut calls = 0;
    macro_rules! row {
        ($(#[$doc:meta])* static $js:literal $rs:ident (
            $($p:ident $(@ $key:literal)? $($what:literal)? : $ty:ty as $ts:literal),*
            $(; $($o:ident $(@ $okey:literal)? $($owhat:literal)? : $oty:ty as $ots:literal = $def:expr),*)?
        ) => $call:expr) => {
            row!(@run $rs [_x] ($($p: $ty,)* $($($o: $oty,)*)?) => $call)
        };
        ($(#[$doc:meta])* $js:literal $rs:ident ($x:ident
            $(, $p:ident $(@ $key:literal)? $($what:literal)? : $ty:ty as $ts:literal)*
            $(; $($o:ident $(@ $okey:literal)? $($owhat:literal)? : $oty:ty as $ots:literal = $def:expr),*)?
        ) $(-> $ret:literal)? => $call:expr) => {
            row!(@run $rs [$x] ($($p: $ty,)* $($($o: $oty,)*)?) => $call)
        };
        (@run $rs:ident [$x:tt] ($($p:ident: $ty:ty,)*) => $call:expr) => {
            for recv in receivers {
                for target in 0..8 {
                    for k in 0.. {
                        #[allow(unused_mut)]
                        let (mut at, mut past) = (0, false);
                        #[allow(unused_variables)]
                        let $x = recv.clone();
                        $(let $p: $ty = probe(recv, &mut at, target, k, &mut past);)*
                        if past || target > at {
                            break;
                        }
                        let what = format!("{} on {:?} (argument {target}, probe {k})",
                            stringify!($rs), recv.shape());
                        calls += 1;
                        let run = || {
                            let out: wgrad::Result<_> = $call;
                            out.and_then(|o| Realize::realize(&o))
                        };
                        if catch_unwind(AssertUnwindSafe(run)).is_err() {
                            failures.push(format!("{what}: panicked"));
                        }
                        if target >= at {
                            break;
                        }
                    }
                }
            }
        };
    }
    wgrad::for_each_op!(row);
    assert!(calls > 1000, "only {calls} calls");
    assert!(
        failures.is_empty(),
        "{} of {calls} calls failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// Realize an op's result (one tensor or several).
trait Realize {
    fn realize(&self) -> wgrad::Result<()>;
}

impl Realize for Tensor {
    fn realize(&self) -> wgrad::Result<()> {
        Tensor::realize(self).map(|_| ())
    }
}

impl Realize for Vec<Tensor> {
    fn realize(&self) -> wgrad::Result<()> {
        Tensor::realize_all(&self.iter().collect::<Vec<_>>())
    }
}

/// The convolution block's errors name the op and the operands.
#[test]
fn conv_pool_and_resampling_errors_name_the_op() {
    let x = t(&[1, 2, 4, 4]);
    err_contains(
        x.conv_transpose2d(&t(&[3, 2, 3, 3]), None, &Default::default()),
        ErrorKind::Shape,
        &["conv_transpose2d", "[1, 2, 4, 4]", "[3, 2, 3, 3]"],
    );
    let huge_pad = ConvTranspose2dOpts {
        padding: (5, 5),
        ..Default::default()
    };
    err_contains(
        x.conv_transpose2d(&t(&[2, 1, 3, 3]), None, &huge_pad),
        ErrorKind::Shape,
        &["conv_transpose2d", "leaves no output"],
    );
    err_contains(
        t(&[1, 2, 5]).conv1d(
            &t(&[1, 2, 3]),
            None,
            &Conv1dOpts {
                stride: 0,
                ..Default::default()
            },
        ),
        ErrorKind::Shape,
        &["conv1d", "stride"],
    );
    err_contains(
        t(&[1, 2, 5]).conv_transpose1d(&t(&[2, 1, 3]), Some(&t(&[3])), &Default::default()),
        ErrorKind::Shape,
        &["conv_transpose1d", "bias", "[3]"],
    );
    err_contains(
        x.max_pool2d_with((5, 5), &Pool2dOpts::default()),
        ErrorKind::Shape,
        &["max_pool2d", "[5, 5]", "[1, 2, 4, 4]"],
    );
    err_contains(
        x.avg_pool2d_with(
            (2, 2),
            &Pool2dOpts {
                stride: Some((0, 1)),
                ..Default::default()
            },
        ),
        ErrorKind::Shape,
        &["avg_pool2d", "stride"],
    );
    err_contains(
        x.max_unpool2d(&t(&[1, 2, 4, 4]), (2, 2), &Pool2dOpts::default(), None),
        ErrorKind::DType,
        &["max_unpool2d", "f32"],
    );
    err_contains(
        x.pad_with(&[(0, 0), (0, 0), (4, 0), (0, 0)], PadMode::Reflect),
        ErrorKind::Shape,
        &["pad", "reflect", "[1, 2, 4, 4]"],
    );
    // Cropping to nothing gives an empty tensor (PyTorch); cropping past it is an error.
    let cropped = x.pad_with(&[(0, 0), (0, 0), (-2, -2), (0, 0)], PadMode::Constant(0.0));
    assert_eq!(cropped.unwrap().shape(), [1, 2, 0, 4]);
    err_contains(
        x.pad_with(&[(0, 0), (0, 0), (-3, -2), (0, 0)], PadMode::Constant(0.0)),
        ErrorKind::Shape,
        &["pad", "crops dim 2"],
    );
    err_contains(
        x.interpolate(&[3, 0], Interpolation::Linear, false),
        ErrorKind::Shape,
        &["interpolate", "[3, 0]", "[1, 2, 4, 4]"],
    );
    err_contains(
        x.interpolate(&[3, 3], Interpolation::Nearest, true),
        ErrorKind::Other,
        &["interpolate", "align_corners"],
    );
    err_contains(x.unfold(2, 5, 1), ErrorKind::Shape, &["unfold", "size 5"]);
    err_contains(
        "bicubic".parse::<Interpolation>(),
        ErrorKind::Other,
        &["interpolate", "bicubic"],
    );
}

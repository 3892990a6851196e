//! Bad input is an `Err` whose message names the op and the shapes / dtypes / devices; nothing
//! panics, and the engine keeps working afterwards.

// Native only: the browser tests are tests/web.rs.
#![cfg(not(target_arch = "wasm32"))]

use wgrad::{Conv2dOpts, Device, ErrorKind, Padding, Tensor};

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
    err_contains(
        Tensor::zeros(&[2, 0]),
        ErrorKind::Shape,
        &["full", "[2, 0]"],
    );
    err_contains(
        Tensor::zeros(&[1 << 20, 1 << 20]),
        ErrorKind::Shape,
        &["more than"],
    );
    err_contains(
        t(&[4]).slice(0, 3, 1, 1),
        ErrorKind::Shape,
        &["slice", "empty"],
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

//! Op suite: every tensor operation checked against torch reference values.
//!
//! The cases live in `tests/fixtures/ops.json`, written once by hand with
//! `python3 scripts/gen_fixtures.py` (see that script for the case format and the `args` convention).
//! For each case the inputs are built (differentiable ones get `set_requires_grad(true)`), the op
//! named by the case's `op` field runs with the case's `args`, the forward output is compared with
//! the reference, then `loss = sum(out * upstream)` is backpropagated and every input gradient is
//! compared with the reference gradient.
//!
//! * `op_suite_interp` / `op_suite_cpu` / `op_suite_wgpu`: all cases on each backend; every failure
//!   is collected and reported (case name + worst mismatch) at the end. The interpreter run also
//!   validates the WGSL rendering of every kernel with naga.
//! * `finite_difference_grads_interp`: autograd against central finite differences of the forward.
//! * `f16_ops` / `bf16_ops`: a few cases with inputs cast to f16 (bf16), compared with the f32
//!   reference loosely; `bf16_rounding_is_pytorchs_bit_for_bit`: the f32 -> bf16 conversion on
//!   every backend against PyTorch's.
//!
//! Tolerances (tinygrad-like): `|got - want| <= atol + rtol * |want|`, forward atol 1e-6 (or the
//! case's `atol`, 1e-5 for sums of many products) and rtol 1e-3; gradients atol 1e-4, rtol 1e-3.
//! Integer and bool outputs must match exactly.

// Native only: the browser tests are tests/web.rs.
#![cfg(not(target_arch = "wasm32"))]

mod common;

use std::panic::{catch_unwind, AssertUnwindSafe};

use serde_json::Value;
use wgrad::{
    Axes, Context, Conv1dOpts, Conv2dOpts, ConvTranspose1dOpts, ConvTranspose2dOpts,
    CrossEntropyOpts, DType, Device, Index, Interpolation, Operand, PadMode, Padding, Padding1d,
    Pool2dOpts, Reduction, Tensor,
};

const FIXTURE: &str = include_str!("fixtures/ops.json");

const FWD_ATOL: f64 = 1e-6;
const FWD_RTOL: f64 = 1e-3;
const GRAD_ATOL: f64 = 1e-4;
const GRAD_RTOL: f64 = 1e-3;
const MIN_CASES: usize = 80;

/// Test-side result: errors are human-readable messages.
type R<T> = std::result::Result<T, String>;

/// Attach a description to a wgrad error.
trait Ctx<T> {
    fn ctx(self, what: &str) -> R<T>;
}

impl<T> Ctx<T> for wgrad::Result<T> {
    fn ctx(self, what: &str) -> R<T> {
        self.map_err(|e| format!("{what}: {e}"))
    }
}

// ------------------------------------------------------------------------------------ fixture

struct Input {
    shape: Vec<usize>,
    dtype: String,
    data: Vec<f64>,
    grad: bool,
}

struct Case {
    name: String,
    op: String,
    args: Value,
    atol: f64,
    inputs: Vec<Input>,
    out_shape: Vec<usize>,
    out_dtype: String,
    out_data: Vec<f64>,
    upstream: Option<Vec<f32>>,
    grads: Vec<Option<Vec<f64>>>,
}

fn num(v: &Value) -> f64 {
    match v {
        Value::Bool(b) => f64::from(u8::from(*b)),
        // "nan", "inf", "-inf": JSON has no non-finite numbers.
        Value::String(s) => s
            .parse()
            .unwrap_or_else(|_| panic!("fixture: not a number: {s}")),
        _ => v
            .as_f64()
            .unwrap_or_else(|| panic!("fixture: not a number: {v}")),
    }
}

fn nums(v: &Value) -> Vec<f64> {
    v.as_array()
        .unwrap_or_else(|| panic!("fixture: not an array: {v}"))
        .iter()
        .map(num)
        .collect()
}

fn usizes(v: &Value) -> Vec<usize> {
    v.as_array()
        .unwrap_or_else(|| panic!("fixture: not an array: {v}"))
        .iter()
        .map(|x| {
            x.as_u64()
                .unwrap_or_else(|| panic!("fixture: not a usize: {x}")) as usize
        })
        .collect()
}

fn isizes(v: &Value) -> Vec<isize> {
    v.as_array()
        .unwrap_or_else(|| panic!("fixture: not an array: {v}"))
        .iter()
        .map(|x| {
            x.as_i64()
                .unwrap_or_else(|| panic!("fixture: not an integer: {x}")) as isize
        })
        .collect()
}

fn load_cases() -> Vec<Case> {
    let root: Value = serde_json::from_str(FIXTURE).expect("tests/fixtures/ops.json parses");
    let cases = root["cases"]
        .as_array()
        .expect("fixture has a \"cases\" array");
    cases
        .iter()
        .map(|c| {
            let inputs = c["inputs"]
                .as_array()
                .expect("inputs")
                .iter()
                .map(|i| Input {
                    shape: usizes(&i["shape"]),
                    dtype: i["dtype"].as_str().expect("input dtype").to_string(),
                    data: nums(&i["data"]),
                    grad: i["grad"].as_bool().unwrap_or(false),
                })
                .collect();
            let out = &c["output"];
            Case {
                name: c["name"].as_str().expect("name").to_string(),
                op: c["op"].as_str().expect("op").to_string(),
                args: c["args"].clone(),
                atol: c["atol"].as_f64().unwrap_or(FWD_ATOL),
                inputs,
                out_shape: usizes(&out["shape"]),
                out_dtype: out["dtype"].as_str().expect("output dtype").to_string(),
                out_data: nums(&out["data"]),
                upstream: c
                    .get("upstream")
                    .filter(|u| !u.is_null())
                    .map(|u| nums(u).into_iter().map(|v| v as f32).collect()),
                grads: c["grads"]
                    .as_array()
                    .expect("grads")
                    .iter()
                    .map(|g| if g.is_null() { None } else { Some(nums(g)) })
                    .collect(),
            }
        })
        .collect()
}

fn case_by_name<'a>(cases: &'a [Case], name: &str) -> &'a Case {
    cases
        .iter()
        .find(|c| c.name == name)
        .unwrap_or_else(|| panic!("no fixture case named {name}"))
}

fn dtype_of(name: &str) -> DType {
    match name {
        "f32" => DType::F32,
        "f16" => DType::F16,
        "bf16" => DType::BF16,
        "i32" => DType::I32,
        "u32" => DType::U32,
        "u8" => DType::U8,
        "bool" => DType::Bool,
        other => panic!("fixture: unknown dtype {other}"),
    }
}

/// Build a tensor of the given fixture dtype from flat values (on the context's device).
fn make_tensor(shape: &[usize], dtype: &str, data: &[f64]) -> wgrad::Result<Tensor> {
    match dtype {
        "f32" => Tensor::from_vec(data.iter().map(|&v| v as f32).collect::<Vec<f32>>(), shape),
        "i32" => Tensor::from_vec(data.iter().map(|&v| v as i32).collect::<Vec<i32>>(), shape),
        "u8" => Tensor::from_vec(data.iter().map(|&v| v as u8).collect::<Vec<u8>>(), shape),
        "bool" => Tensor::from_vec(data.iter().map(|&v| v != 0.0).collect::<Vec<bool>>(), shape),
        other => panic!("fixture: unknown input dtype {other}"),
    }
}

// ------------------------------------------------------------------------------------ op table

/// The inputs of a case not yet used by the op's arguments.
type Inputs<'a> = std::slice::Iter<'a, Tensor>;

/// An argument of an op-table row, read from a fixture case: tensors from the case's inputs (in
/// order), other values from its `args` under the row's key. `None` when the case does not give
/// it (absent or null), so that an optional argument takes the table's default.
trait FromCase: Sized {
    fn from_case(args: &Value, key: &str, inputs: &mut Inputs) -> Option<Self>;
}

impl<T: FromCase> FromCase for Option<T> {
    fn from_case(args: &Value, key: &str, inputs: &mut Inputs) -> Option<Self> {
        Some(T::from_case(args, key, inputs))
    }
}

impl FromCase for Tensor {
    fn from_case(_: &Value, _: &str, inputs: &mut Inputs) -> Option<Self> {
        inputs.next().cloned()
    }
}

/// All the remaining inputs (cat, stack).
impl FromCase for Vec<Tensor> {
    fn from_case(_: &Value, _: &str, inputs: &mut Inputs) -> Option<Self> {
        Some(inputs.cloned().collect())
    }
}

/// The scalar under the key, or else the next input. Whole numbers are `Operand::Int` (they
/// take the tensor's dtype), as the JS API makes them.
impl FromCase for Operand {
    fn from_case(args: &Value, key: &str, inputs: &mut Inputs) -> Option<Self> {
        match &args[key] {
            Value::Null => inputs.next().map(Operand::from),
            v => {
                let x = num(v);
                Some(if x.fract() == 0.0 {
                    Operand::Int(x as i64)
                } else {
                    Operand::Float(x)
                })
            }
        }
    }
}

impl FromCase for f64 {
    fn from_case(args: &Value, key: &str, _: &mut Inputs) -> Option<Self> {
        args[key].as_f64()
    }
}

impl FromCase for bool {
    fn from_case(args: &Value, key: &str, _: &mut Inputs) -> Option<Self> {
        args[key].as_bool()
    }
}

impl FromCase for isize {
    fn from_case(args: &Value, key: &str, _: &mut Inputs) -> Option<Self> {
        args[key].as_i64().map(|v| v as isize)
    }
}

impl FromCase for i64 {
    fn from_case(args: &Value, key: &str, _: &mut Inputs) -> Option<Self> {
        args[key].as_i64()
    }
}

impl FromCase for String {
    fn from_case(args: &Value, key: &str, _: &mut Inputs) -> Option<Self> {
        args[key].as_str().map(str::to_string)
    }
}

/// An index as the fixture writes it: integers, null (a new axis), "..." and slice strings as
/// in Python, lists of integers, and "T" for the next input tensor.
impl FromCase for Vec<Index> {
    fn from_case(args: &Value, key: &str, inputs: &mut Inputs) -> Option<Self> {
        let entries = args[key].as_array()?;
        Some(
            entries
                .iter()
                .map(|e| match e {
                    Value::Null => Index::NewAxis,
                    Value::Number(n) => {
                        Index::Int(n.as_i64().expect("fixture: integer index") as isize)
                    }
                    Value::String(s) if s == "T" => {
                        Index::Tensor(inputs.next().expect("fixture: index tensor").clone())
                    }
                    Value::String(s) => s.parse().expect("fixture: slice"),
                    Value::Array(_) => Index::List(isizes(e)),
                    other => panic!("fixture: bad index entry {other}"),
                })
                .collect(),
        )
    }
}

impl FromCase for usize {
    fn from_case(args: &Value, key: &str, _: &mut Inputs) -> Option<Self> {
        args[key].as_u64().map(|v| v as usize)
    }
}

impl FromCase for Vec<isize> {
    fn from_case(args: &Value, key: &str, _: &mut Inputs) -> Option<Self> {
        (!args[key].is_null()).then(|| isizes(&args[key]))
    }
}

impl FromCase for Vec<f64> {
    fn from_case(args: &Value, key: &str, _: &mut Inputs) -> Option<Self> {
        (!args[key].is_null()).then(|| nums(&args[key]))
    }
}

impl FromCase for Vec<usize> {
    fn from_case(args: &Value, key: &str, _: &mut Inputs) -> Option<Self> {
        (!args[key].is_null()).then(|| usizes(&args[key]))
    }
}

impl FromCase for Axes {
    fn from_case(args: &Value, key: &str, inputs: &mut Inputs) -> Option<Self> {
        Vec::<isize>::from_case(args, key, inputs).map(Axes::Some)
    }
}

fn pair(v: &Value) -> (usize, usize) {
    let p = usizes(v);
    assert_eq!(p.len(), 2, "fixture: expected a pair, got {v}");
    (p[0], p[1])
}

impl FromCase for (usize, usize) {
    fn from_case(args: &Value, key: &str, _: &mut Inputs) -> Option<Self> {
        (!args[key].is_null()).then(|| pair(&args[key]))
    }
}

impl FromCase for Vec<(usize, usize)> {
    fn from_case(args: &Value, key: &str, _: &mut Inputs) -> Option<Self> {
        let v = args[key].as_array()?;
        Some(v.iter().map(pair).collect())
    }
}

impl FromCase for DType {
    fn from_case(args: &Value, key: &str, _: &mut Inputs) -> Option<Self> {
        args[key].as_str().map(dtype_of)
    }
}

impl FromCase for Reduction {
    fn from_case(args: &Value, key: &str, _: &mut Inputs) -> Option<Self> {
        Some(match args[key].as_str()? {
            "mean" => Reduction::Mean,
            "sum" => Reduction::Sum,
            "none" => Reduction::None,
            other => panic!("fixture: bad reduction {other:?}"),
        })
    }
}

/// An options object: the case's `args` themselves.
impl FromCase for Conv2dOpts {
    fn from_case(a: &Value, _: &str, _: &mut Inputs) -> Option<Self> {
        let padding = match &a["padding"] {
            Value::String(s) if s == "valid" => Padding::Valid,
            Value::String(s) if s == "same" => Padding::Same,
            v => {
                let (ph, pw) = pair(v);
                Padding::Explicit(ph, pw)
            }
        };
        Some(Conv2dOpts {
            stride: pair(&a["stride"]),
            padding,
            dilation: pair(&a["dilation"]),
            groups: a["groups"].as_u64().expect("fixture: conv2d groups") as usize,
        })
    }
}

impl FromCase for CrossEntropyOpts {
    fn from_case(a: &Value, _: &str, inputs: &mut Inputs) -> Option<Self> {
        Some(CrossEntropyOpts {
            ignore_index: a["ignore_index"].as_i64(),
            label_smoothing: f64::from_case(a, "label_smoothing", inputs)?,
            reduction: Reduction::from_case(a, "reduction", inputs)?,
        })
    }
}

// ---- The convolution block's arguments (conv1d, conv_transpose, pooling options, pad modes,
// interpolate). Options objects are the case's `args`, keys as the Python names.

impl FromCase for Vec<(isize, isize)> {
    fn from_case(args: &Value, key: &str, _: &mut Inputs) -> Option<Self> {
        let v = args[key].as_array()?;
        Some(
            v.iter()
                .map(|p| {
                    let p = isizes(p);
                    assert_eq!(p.len(), 2, "fixture: expected a pair, got {p:?}");
                    (p[0], p[1])
                })
                .collect(),
        )
    }
}

/// A mode name, or a number (the fill value).
impl FromCase for PadMode {
    fn from_case(args: &Value, key: &str, _: &mut Inputs) -> Option<Self> {
        match &args[key] {
            Value::Null => None,
            Value::String(s) => Some(s.parse().expect("fixture: pad mode")),
            v => Some(PadMode::Constant(num(v))),
        }
    }
}

impl FromCase for Interpolation {
    fn from_case(args: &Value, key: &str, _: &mut Inputs) -> Option<Self> {
        args[key]
            .as_str()
            .map(|s| s.parse().expect("fixture: interpolate mode"))
    }
}

/// A number or a pair under `key`, else `default`.
fn pair_or(a: &Value, key: &str, default: (usize, usize)) -> (usize, usize) {
    match &a[key] {
        Value::Null => default,
        Value::Number(n) => {
            let n = n.as_u64().expect("fixture: not a usize") as usize;
            (n, n)
        }
        v => pair(v),
    }
}

fn usize_or(a: &Value, key: &str, default: usize) -> usize {
    a[key].as_u64().map_or(default, |v| v as usize)
}

impl FromCase for Pool2dOpts {
    fn from_case(a: &Value, _: &str, _: &mut Inputs) -> Option<Self> {
        let d = Pool2dOpts::default();
        Some(Pool2dOpts {
            stride: None,
            padding: pair_or(a, "padding", d.padding),
            dilation: pair_or(a, "dilation", d.dilation),
            ceil_mode: a["ceil_mode"].as_bool().unwrap_or(d.ceil_mode),
            count_include_pad: a["count_include_pad"]
                .as_bool()
                .unwrap_or(d.count_include_pad),
        })
    }
}

impl FromCase for Conv1dOpts {
    fn from_case(a: &Value, _: &str, _: &mut Inputs) -> Option<Self> {
        let padding = match &a["padding"] {
            Value::String(s) if s == "valid" => Padding1d::Valid,
            Value::String(s) if s == "same" => Padding1d::Same,
            Value::Null => Padding1d::Valid,
            v => Padding1d::Explicit(v.as_u64().expect("fixture: conv1d padding") as usize),
        };
        Some(Conv1dOpts {
            stride: usize_or(a, "stride", 1),
            padding,
            dilation: usize_or(a, "dilation", 1),
            groups: usize_or(a, "groups", 1),
        })
    }
}

impl FromCase for ConvTranspose2dOpts {
    fn from_case(a: &Value, _: &str, _: &mut Inputs) -> Option<Self> {
        let d = ConvTranspose2dOpts::default();
        Some(ConvTranspose2dOpts {
            stride: pair_or(a, "stride", d.stride),
            padding: pair_or(a, "padding", d.padding),
            output_padding: pair_or(a, "output_padding", d.output_padding),
            dilation: pair_or(a, "dilation", d.dilation),
            groups: usize_or(a, "groups", d.groups),
        })
    }
}

impl FromCase for ConvTranspose1dOpts {
    fn from_case(a: &Value, _: &str, _: &mut Inputs) -> Option<Self> {
        Some(ConvTranspose1dOpts {
            stride: usize_or(a, "stride", 1),
            padding: usize_or(a, "padding", 0),
            output_padding: usize_or(a, "output_padding", 0),
            dilation: usize_or(a, "dilation", 1),
            groups: usize_or(a, "groups", 1),
        })
    }
}

/// An op's result as the case's output: ops returning several tensors give piece `args.piece`.
trait CaseOutput {
    fn output(self, args: &Value) -> wgrad::Result<Tensor>;
}

impl CaseOutput for wgrad::Result<Tensor> {
    fn output(self, _: &Value) -> wgrad::Result<Tensor> {
        self
    }
}

impl CaseOutput for wgrad::Result<Vec<Tensor>> {
    fn output(self, args: &Value) -> wgrad::Result<Tensor> {
        let piece = args["piece"].as_u64().expect("fixture: piece") as usize;
        let n = self?.into_iter().nth(piece);
        n.ok_or_else(|| wgrad::Error::new(wgrad::ErrorKind::Shape, "too few pieces"))
    }
}

/// The fixture key of a table argument: its `@ "key"`, else its name.
macro_rules! key {
    ($p:ident) => {
        stringify!($p)
    };
    ($p:ident $key:literal) => {
        $key
    };
}

/// Run the case's op on `x` (inputs in fixture order; `x[0]` is `self`) through its row of the
/// op table.
fn apply(op: &str, a: &Value, x: &[Tensor]) -> wgrad::Result<Tensor> {
    /// One row of the op table: when `op` is the row's Rust name, run it on `x` with `a`.
    macro_rules! run_row {
        ($(#[$doc:meta])* static $js:literal $rs:ident (
            $($p:ident $(@ $key:literal)? $($what:literal)? : $ty:ty as $ts:literal),*
            $(; $($o:ident $(@ $okey:literal)? $($owhat:literal)? : $oty:ty as $ots:literal = $def:expr),*)?
        ) => $call:expr) => {
            run_row!(@run [] $rs ($($p $(@ $key)? : $ty),*) ($($($o $(@ $okey)? : $oty = $def),*)?) => $call)
        };
        ($(#[$doc:meta])* $js:literal $rs:ident ($x:ident
            $(, $p:ident $(@ $key:literal)? $($what:literal)? : $ty:ty as $ts:literal)*
            $(; $($o:ident $(@ $okey:literal)? $($owhat:literal)? : $oty:ty as $ots:literal = $def:expr),*)?
        ) $(-> $ret:literal)? => $call:expr) => {
            run_row!(@run [$x] $rs ($($p $(@ $key)? : $ty),*) ($($($o $(@ $okey)? : $oty = $def),*)?) => $call)
        };
        (@run [$($x:ident)?] $rs:ident ($($p:ident $(@ $key:literal)? : $ty:ty),*)
            ($($o:ident $(@ $okey:literal)? : $oty:ty = $def:expr),*) => $call:expr) => {
            if op == stringify!($rs) {
                let inputs = &mut x.iter();
                $(let $x: Tensor = inputs.next().expect("fixture: no inputs").clone();)?
                $(
                    let key = key!($p $($key)?);
                    let $p: $ty = FromCase::from_case(a, key, inputs)
                        .unwrap_or_else(|| panic!("fixture: {} needs {key} in {a}", op));
                )*
                $(
                    let $o: $oty = match FromCase::from_case(a, key!($o $($okey)?), inputs) {
                        Some(v) => v,
                        None => $def,
                    };
                )*
                let out: wgrad::Result<_> = $call;
                return out.output(a);
            }
        };
    }
    wgrad::for_each_op!(run_row);
    panic!("op suite: the op table has no op {op:?}")
}

/// The Rust names of the table's ops.
fn table_ops() -> Vec<&'static str> {
    let mut names = vec![];
    macro_rules! name {
        ($(#[$doc:meta])* $(static)? $js:literal $rs:ident $($rest:tt)*) => {
            names.push(stringify!($rs));
        };
    }
    wgrad::for_each_op!(name);
    names
}

#[test]
fn every_fixture_op_is_in_the_op_table() {
    let ops = table_ops();
    let cases = load_cases();
    let missing: Vec<&str> = cases
        .iter()
        .map(|c| c.op.as_str())
        .filter(|op| !ops.contains(op))
        .collect();
    assert!(
        missing.is_empty(),
        "fixture ops not in the op table: {missing:?}"
    );
    let untested: Vec<&str> = ops
        .iter()
        .copied()
        .filter(|op| !cases.iter().any(|c| c.op == *op))
        .collect();
    eprintln!(
        "{} ops in the table; {} without a fixture case: {}",
        ops.len(),
        untested.len(),
        untested.join(", ")
    );
}

// ------------------------------------------------------------------------------------ checking

/// Err describing the worst element when any `|got - want| > atol + rtol * |want|` (NaN fails).
fn compare(what: &str, got: &[f32], want: &[f64], atol: f64, rtol: f64) -> R<()> {
    if got.len() != want.len() {
        return Err(format!("{what}: {} values, want {}", got.len(), want.len()));
    }
    let mut worst: Option<(usize, f64)> = None;
    let mut bad = 0usize;
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        let g = f64::from(g);
        let excess = if g.is_nan() {
            f64::INFINITY
        } else {
            (g - w).abs() - (atol + rtol * w.abs())
        };
        if excess > 0.0 {
            bad += 1;
            match worst {
                Some((_, e)) if e >= excess => {}
                _ => worst = Some((i, excess)),
            }
        }
    }
    match worst {
        None => Ok(()),
        Some((i, _)) => Err(format!(
            "{what}: {bad}/{} values out of tolerance (atol {atol:e}, rtol {rtol:e}); worst at flat index {i}: \
             got {} want {} (|diff| {:.3e})",
            want.len(),
            got[i],
            want[i],
            (f64::from(got[i]) - want[i]).abs()
        )),
    }
}

/// Build the case's inputs, marking the differentiable ones.
fn build_inputs(c: &Case) -> R<Vec<Tensor>> {
    let mut xs = Vec::with_capacity(c.inputs.len());
    for (k, inp) in c.inputs.iter().enumerate() {
        xs.push(
            make_tensor(&inp.shape, &inp.dtype, &inp.data).ctx(&format!("creating input {k}"))?,
        );
        if inp.grad {
            xs[k].set_requires_grad(true);
        }
    }
    Ok(xs)
}

/// Forward against the reference; then backward of sum(out * upstream) against the reference grads.
fn check_case(c: &Case) -> R<()> {
    let xs = build_inputs(c)?;
    let out = apply(&c.op, &c.args, &xs).ctx("forward")?;
    if out.shape() != c.out_shape {
        return Err(format!(
            "forward: shape {:?}, want {:?}",
            out.shape(),
            c.out_shape
        ));
    }
    let want_dtype = dtype_of(&c.out_dtype);
    if out.dtype() != want_dtype {
        return Err(format!(
            "forward: dtype {:?}, want {:?}",
            out.dtype(),
            want_dtype
        ));
    }
    let got = out.to_vec_f32().ctx("reading forward output")?;
    let (atol, rtol) = if matches!(c.out_dtype.as_str(), "f32" | "bf16") {
        (c.atol, FWD_RTOL)
    } else {
        (0.0, 0.0)
    };
    compare("forward", &got, &c.out_data, atol, rtol)?;

    let Some(up) = &c.upstream else { return Ok(()) };
    let up = Tensor::from_vec(up.clone(), &c.out_shape).ctx("creating upstream")?;
    out.mul(&up)
        .ctx("loss mul")?
        .sum(Axes::All, false)
        .ctx("loss sum")?
        .backward()
        .ctx("backward")?;
    for (k, want) in c.grads.iter().enumerate() {
        let Some(want) = want else { continue };
        let g = xs[k]
            .grad()
            .ok_or_else(|| format!("input {k}: no gradient after backward"))?;
        if g.shape() != c.inputs[k].shape {
            return Err(format!(
                "grad of input {k}: shape {:?}, want {:?}",
                g.shape(),
                c.inputs[k].shape
            ));
        }
        let got = g.to_vec_f32().ctx(&format!("reading grad of input {k}"))?;
        compare(
            &format!("grad of input {k}"),
            &got,
            want,
            GRAD_ATOL,
            GRAD_RTOL,
        )?;
    }
    Ok(())
}

fn panic_message(p: Box<dyn std::any::Any + Send>) -> String {
    if let Some(s) = p.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = p.downcast_ref::<String>() {
        s.clone()
    } else {
        "non-string panic payload".to_string()
    }
}

/// Run `f` on `dev`, turning a panic into an Err so one broken case cannot hide the others.
fn on_device(dev: Device, f: impl FnOnce() -> R<()>) -> R<()> {
    match catch_unwind(AssertUnwindSafe(|| Context::new().dev(dev).run(f))) {
        Ok(r) => r,
        Err(p) => Err(format!("panicked: {}", panic_message(p))),
    }
}

fn run_suite(dev: Device) {
    let cases = load_cases();
    assert!(
        cases.len() >= MIN_CASES,
        "only {} fixture cases, want >= {MIN_CASES}",
        cases.len()
    );
    let failures: Vec<String> = cases
        .iter()
        .filter_map(|c| {
            on_device(dev, || check_case(c))
                .err()
                .map(|e| format!("  {} ({}): {e}", c.name, c.op))
        })
        .collect();
    if !failures.is_empty() {
        panic!(
            "{} of {} op-suite cases failed on {dev:?}:\n{}",
            failures.len(),
            cases.len(),
            failures.join("\n")
        );
    }
}

/// Every case again with one axis of every input emptied (the first, then the last): each op
/// either works (its output reads back, and `backward` runs through it) or returns an error,
/// and never panics. Nothing reachable from JS may panic, whatever shape it is given.
fn check_empty_case(c: &Case, axis_of: fn(usize) -> usize) -> R<bool> {
    let mut xs = vec![];
    for inp in &c.inputs {
        let mut shape = inp.shape.clone();
        if !shape.is_empty() {
            let a = axis_of(shape.len());
            shape[a] = 0;
        }
        let x = make_tensor(&shape, &inp.dtype, &[]).ctx("creating an empty input")?;
        if inp.grad && shape.contains(&0) {
            x.set_requires_grad(true);
        }
        xs.push(x);
    }
    let out = match apply(&c.op, &c.args, &xs) {
        Ok(out) => out,
        Err(e) if std::env::var("EMPTY_ERRORS").is_ok() => {
            eprintln!("{} ({}): {e}", c.name, c.op);
            return Ok(false);
        }
        Err(_) => return Ok(false),
    };
    let got = out.to_vec_f32().ctx("reading the output")?;
    if got.len() != out.numel() {
        return Err(format!("{} values for shape {:?}", got.len(), out.shape()));
    }
    if out.dtype().is_float() && xs.iter().any(|x| x.requires_grad()) {
        out.sum(Axes::All, false)
            .ctx("loss")?
            .backward()
            .ctx("backward")?;
        for x in xs.iter().filter(|x| x.requires_grad()) {
            if let Some(g) = x.grad() {
                if g.shape() != x.shape() || g.to_vec_f32().ctx("grad")?.len() != x.numel() {
                    return Err(format!("grad {:?} of input {:?}", g.shape(), x.shape()));
                }
            }
        }
    }
    Ok(true)
}

#[test]
fn empty_inputs_never_panic() {
    let cases = load_cases();
    let mut failures = vec![];
    let mut worked = 0;
    for (which, axis_of) in [
        ("first", (|_| 0) as fn(usize) -> usize),
        ("last", |n| n - 1),
    ] {
        for c in &cases {
            let mut ran = false;
            let r = on_device(Device::Interp, || {
                ran = check_empty_case(c, axis_of)?;
                Ok(())
            });
            if let Err(e) = r {
                failures.push(format!("  {} ({}), {which} axis empty: {e}", c.name, c.op));
            }
            worked += ran as usize;
        }
    }
    eprintln!(
        "{worked} of {} runs with empty inputs gave a result (the others an error)",
        2 * cases.len()
    );
    assert!(
        failures.is_empty(),
        "{} cases failed with empty inputs:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// Also renders every kernel the suite lowers (forward and backward) as WGSL and validates it
/// with naga, and as CUDA and compiles it to CUBIN for sm_80 and sm_90 with NVRTC, so the GPU
/// code for every op is checked even where no GPU exists.
#[test]
fn op_suite_interp() {
    wgrad::realize::record_kernels(true);
    run_suite(Device::Interp);
    let kernels = wgrad::realize::record_kernels(false);
    assert!(kernels.len() > 300, "recorded {} kernels", kernels.len());
    let bad: Vec<String> = kernels
        .iter()
        .filter_map(|k| {
            let src = wgrad::codegen::wgsl::render_wgsl(k);
            common::validate_wgsl(&src)
                .err()
                .map(|e| format!("{}:\n{e}\n{src}", k.name))
        })
        .collect();
    assert!(
        bad.is_empty(),
        "{} of {} WGSL kernels fail naga validation:\n{}",
        bad.len(),
        kernels.len(),
        bad.join("\n")
    );
    eprintln!("{} op-suite kernels validated as WGSL", kernels.len());
    #[cfg(feature = "cuda")]
    if let Some(n) = common::compile_cuda(&kernels, &["sm_80", "sm_90"]) {
        eprintln!(
            "{} op-suite kernels ({n} distinct) compiled by NVRTC for sm_80 and sm_90",
            kernels.len()
        );
    }
}

#[test]
fn op_suite_cpu() {
    run_suite(Device::Cpu);
}

/// The WebAssembly dialect, run by wasmi.
#[cfg(feature = "wasm")]
#[test]
fn op_suite_wasm() {
    run_suite(Device::Wasm);
}

#[cfg(feature = "cuda")]
#[test]
fn op_suite_cuda() {
    if common::usable(Device::Cuda) {
        run_suite(Device::Cuda);
    }
}

#[test]
fn op_suite_wgpu() {
    if common::usable(Device::Wgpu) {
        run_suite(Device::Wgpu);
    }
}

/// The op suite again with kernels shaped for a hardware GPU (operand tiles staged in workgroup
/// memory, grouped and split reduces), which a software adapter runs too: what an NVIDIA or
/// Apple GPU would run, checked here.
#[test]
fn op_suite_wgpu_gpu_plans() {
    if common::usable(Device::Wgpu) {
        Context::new()
            .opt_target(wgrad::codegen::OptTarget::Gpu)
            .run(|| run_suite(Device::Wgpu));
    }
}

// ------------------------------------------------------------------------------------ finite differences

const FD_CASES: [&str; 10] = [
    "exp",
    "sigmoid",
    "tanh",
    "log_softmax_axis1",
    "matmul_2d",
    "conv2d_bias",
    "softplus",
    "div",
    "mean_axis1",
    "logsumexp_axis1",
];
const FD_EPS: f32 = 1e-2;
const FD_TOL: f64 = 2e-2;

/// `sum(op(inputs) * upstream)`, forward only, accumulated on the host in f64.
fn host_loss(c: &Case, data: &[Vec<f64>]) -> R<f64> {
    let xs = c
        .inputs
        .iter()
        .zip(data)
        .map(|(inp, d)| make_tensor(&inp.shape, &inp.dtype, d))
        .collect::<wgrad::Result<Vec<Tensor>>>()
        .ctx("creating inputs")?;
    let out = apply(&c.op, &c.args, &xs)
        .ctx("forward")?
        .to_vec_f32()
        .ctx("reading output")?;
    let up = c.upstream.as_ref().ok_or("case has no upstream")?;
    Ok(out
        .iter()
        .zip(up)
        .map(|(&o, &u)| f64::from(o) * f64::from(u))
        .sum())
}

fn check_finite_differences(c: &Case) -> R<()> {
    let xs = build_inputs(c)?;
    let out = apply(&c.op, &c.args, &xs).ctx("forward")?;
    let up = Tensor::from_vec(
        c.upstream.clone().ok_or("case has no upstream")?,
        &c.out_shape,
    )
    .ctx("upstream")?;
    out.mul(&up)
        .ctx("loss mul")?
        .sum(Axes::All, false)
        .ctx("loss sum")?
        .backward()
        .ctx("backward")?;
    let base: Vec<Vec<f64>> = c.inputs.iter().map(|i| i.data.clone()).collect();
    for (k, inp) in c.inputs.iter().enumerate() {
        if !inp.grad {
            continue;
        }
        let g = xs[k]
            .grad()
            .ok_or_else(|| format!("input {k}: no gradient"))?;
        let g = g.to_vec_f32().ctx("reading grad")?;
        let n = inp.data.len();
        let mut picks = vec![0, n / 3, (2 * n) / 3, n - 1];
        picks.dedup();
        for j in picks {
            let x0 = inp.data[j] as f32;
            let (xp, xm) = (x0 + FD_EPS, x0 - FD_EPS);
            let mut plus = base.clone();
            plus[k][j] = f64::from(xp);
            let mut minus = base.clone();
            minus[k][j] = f64::from(xm);
            let fd =
                (host_loss(c, &plus)? - host_loss(c, &minus)?) / (f64::from(xp) - f64::from(xm));
            let ag = f64::from(g[j]);
            let ok = (fd - ag).abs() <= FD_TOL + FD_TOL * ag.abs(); // false for NaN
            if !ok {
                return Err(format!(
                    "input {k} element {j}: autograd {ag} vs finite difference {fd}"
                ));
            }
        }
    }
    Ok(())
}

#[test]
fn finite_difference_grads_interp() {
    let cases = load_cases();
    let failures: Vec<String> = FD_CASES
        .iter()
        .filter_map(|name| {
            let c = case_by_name(&cases, name);
            on_device(Device::Interp, || check_finite_differences(c))
                .err()
                .map(|e| format!("  {name}: {e}"))
        })
        .collect();
    if !failures.is_empty() {
        panic!(
            "finite-difference gradient checks failed:\n{}",
            failures.join("\n")
        );
    }
}

// ------------------------------------------------------------------------------ f16, bf16

const HALF_CASES: [&str; 6] = [
    "add",
    "mul",
    "exp",
    "sum_axis1",
    "matmul_2d",
    "softmax_axis1",
];
const F16_TOL: f64 = 1e-2;
/// bf16 keeps 8 significant bits to f16's 11: the inputs and the output are each rounded by up
/// to 2^-9 of their size.
const BF16_TOL: f64 = 3e-2;

/// The case with its float inputs cast to `dt` (f16 or bf16); the output must be `dt` and match
/// the f32 reference loosely.
fn check_half(c: &Case, dt: DType, tol: f64) -> R<()> {
    let xs = build_inputs(c)?
        .iter()
        .map(|x| x.detach().cast(dt))
        .collect::<wgrad::Result<Vec<Tensor>>>()
        .ctx(&format!("cast to {dt}"))?;
    let out = apply(&c.op, &c.args, &xs).ctx("forward")?;
    if out.dtype() != dt {
        return Err(format!("output dtype {:?}, want {dt}", out.dtype()));
    }
    if out.shape() != c.out_shape {
        return Err(format!("shape {:?}, want {:?}", out.shape(), c.out_shape));
    }
    let got = out
        .cast(DType::F32)
        .ctx("cast back to f32")?
        .to_vec_f32()
        .ctx("reading output")?;
    compare(&format!("{dt} forward"), &got, &c.out_data, tol, tol)
}

/// Tensors of `T` (`half::f16` or `half::bf16`) built directly from its values: `a * b + 1.0`
/// stays `T`, and its values are exact.
fn check_half_direct<T: wgrad::Element>() -> R<()> {
    let dt = T::DTYPE;
    let vals = |v: [f64; 4]| v.map(T::from_f64).to_vec();
    let a = vals([0.5, -1.25, 2.0, 3.5]);
    let b = vals([1.5, 0.25, -2.0, 0.5]);
    let ta = Tensor::from_vec(a, &[2, 2]).ctx(&format!("from_vec {dt}"))?;
    let tb = Tensor::from_slice(&b, &[2, 2]).ctx(&format!("from_slice {dt}"))?;
    let s = ta.mul(&tb).ctx("mul")?.add(1.0f32).ctx("add")?;
    if s.dtype() != dt {
        return Err(format!("{dt} * {dt} + 1.0 has dtype {:?}", s.dtype()));
    }
    let got: Vec<f32> = s
        .to_vec::<T>()
        .ctx(&format!("to_vec {dt}"))?
        .iter()
        .map(|v| v.to_f64() as f32)
        .collect();
    compare(
        &format!("{dt} direct"),
        &got,
        &[1.75, 0.6875, -3.0, 2.75],
        0.0,
        0.0,
    )
}

fn half_ops(dt: DType, tol: f64, direct: fn() -> R<()>) {
    let cases = load_cases();
    let mut failures = Vec::new();
    for dev in common::devices() {
        for name in HALF_CASES {
            let c = case_by_name(&cases, name);
            if let Err(e) = on_device(dev, || check_half(c, dt, tol)) {
                failures.push(format!("  {name} on {dev:?}: {e}"));
            }
        }
        if let Err(e) = on_device(dev, direct) {
            failures.push(format!("  direct {dt} on {dev:?}: {e}"));
        }
    }
    if !failures.is_empty() {
        panic!("{dt} checks failed:\n{}", failures.join("\n"));
    }
}

#[test]
fn f16_ops() {
    half_ops(DType::F16, F16_TOL, check_half_direct::<half::f16>);
}

#[test]
fn bf16_ops() {
    half_ops(DType::BF16, BF16_TOL, check_half_direct::<half::bf16>);
}

/// f32 -> bf16 -> f32 on every backend, bit for bit: PyTorch's rounding of the edge values of
/// tests/fixtures/bf16.json (`scripts/gen_bf16_fixture.py`: zeros, subnormals, ties to even at
/// every scale, overflow to inf) and `half::bf16::from_f32`'s of NaNs (a NaN stays a NaN of its
/// sign, even one whose payload is all in the low half: truncated, that would be inf).
#[test]
fn bf16_rounding_is_pytorchs_bit_for_bit() {
    let fx: Value = serde_json::from_str(include_str!("fixtures/bf16.json")).expect("bf16.json");
    let bits = |k: &str| -> Vec<u32> {
        fx[k]
            .as_array()
            .expect(k)
            .iter()
            .map(|v| v.as_u64().expect(k) as u32)
            .collect()
    };
    let (mut xs, mut want) = (bits("f32_bits"), bits("bf16_bits"));
    assert!(xs.len() > 3000 && xs.len() == want.len());
    let nans = [
        0x7fc0_0000u32,
        0xffc0_0000,
        0x7f80_0001,
        0xff80_0001,
        0x7fa0_1234,
        0x7fff_ffff,
    ];
    for x in nans {
        xs.push(x);
        want.push(half::bf16::from_f32(f32::from_bits(x)).to_bits() as u32);
    }
    let is_nan = |b: u32| b & 0x7f80 == 0x7f80 && b & 0x7f != 0;
    let mut failures = Vec::new();
    for dev in common::devices() {
        let r = on_device(dev, || {
            let x: Vec<f32> = xs.iter().map(|&b| f32::from_bits(b)).collect();
            let n = x.len();
            let h = Tensor::from_vec(x, &[n])
                .ctx("from_vec")?
                .cast(DType::BF16)
                .ctx("cast")?;
            let got = h.to_vec::<half::bf16>().ctx("to_vec bf16")?;
            // Widening back is exact: the bits shifted up.
            let back = h
                .cast(DType::F32)
                .ctx("cast back")?
                .to_vec::<f32>()
                .ctx("to_vec")?;
            for (i, (&x, &w)) in xs.iter().zip(&want).enumerate() {
                let (g, b) = (got[i].to_bits() as u32, back[i].to_bits());
                // A NaN's payload may be the device's; it stays a NaN of its sign.
                let ok = if is_nan(w) {
                    is_nan(g) && g >> 15 == w >> 15 && back[i].is_nan()
                } else {
                    g == w && b == w << 16
                };
                if !ok {
                    return Err(format!(
                        "f32 {x:08x} ({:e}): bf16 {g:04x}, back {b:08x}; want {w:04x}",
                        f32::from_bits(x)
                    ));
                }
            }
            Ok(())
        });
        if let Err(e) = r {
            failures.push(format!("  {dev:?}: {e}"));
        }
    }
    assert!(
        failures.is_empty(),
        "bf16 rounding:\n{}",
        failures.join("\n")
    );
}

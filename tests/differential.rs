//! Differential check: random composite programs (chains of movement ops, broadcasting binary
//! ops, reductions and activations, on inputs that mix ordinary values with exact zeros, ties and
//! saturating magnitudes such as ±100 and ±1e4), generated from a fixed seed, run on the
//! interpreter and on every other backend present; values and gradients must agree, and the
//! interpreter's must be finite (every program keeps its values far from overflow, so a NaN or an
//! infinity is an autograd bug such as 0·inf).
//!
//! Max-like ops (max/min reductions, maximum/minimum, argmax) are only applied to values whose
//! ties are the same on every backend: values computed from the inputs without saturating
//! functions, whose outputs could be distinct on one backend and equal on another.
//!
//! A second, wider generator (`random_wider_programs_agree_across_backends`) adds large axes
//! (hundreds to thousands of elements), reductions over several axes at once, f16 round trips,
//! casts to integers, `where` on a condition input, and in-place `assign`s into realized
//! buffers that read themselves; a mismatch is minimized (steps dropped while it persists) and
//! printed as the program to keep as a regression test.
//!
//! A third (`random_programs_over_long_prime_axes_agree_across_backends`) starts from an input
//! with an axis of 65,537, 98,305 or 131,071 elements, lengths no useful part count divides.
//!
//! `WGRAD_DIFF_PROGRAMS` (`WGRAD_DIFF_LONG_PROGRAMS` for the third) and `WGRAD_DIFF_SEED` run
//! more programs or other ones (to hunt; the test command runs the default 40, 150 and 24 from
//! the fixed seeds); `WGRAD_DIFF_DEVICES=cpu,webgpu`
//! compares the interpreter with those backends only.

#![cfg(not(target_arch = "wasm32"))]

mod common;

use wgrad::{Context, DType, Device, Tensor};

const SEED: u64 = 0x5eed_0009;
const PROGRAMS: usize = 40;

fn knob(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}
/// The backends compared with the interpreter: every other one present, or those named in
/// `WGRAD_DIFF_DEVICES`.
fn compared() -> Vec<Device> {
    let only = std::env::var("WGRAD_DIFF_DEVICES").ok();
    common::devices()
        .into_iter()
        .filter(|&d| d != Device::Interp)
        .filter(|d| {
            only.as_deref().is_none_or(|o| {
                o.split(',')
                    .any(|n| n.trim().eq_ignore_ascii_case(d.name()))
            })
        })
        .collect()
}

/// Values are kept below this (f32 overflows at 3.4e38; gradients multiply bounds further).
const MAX_BOUND: f64 = 1e12;

/// splitmix64.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
    fn pick<T: Copy>(&mut self, xs: &[T]) -> T {
        xs[self.below(xs.len())]
    }
}

/// An input's values: ordinary ones, exact zeros, saturating magnitudes, and repeats (ties).
fn input_data(rng: &mut Rng, n: usize) -> Vec<f32> {
    let mut v: Vec<f32> = Vec::with_capacity(n);
    for _ in 0..n {
        let r = rng.unit();
        let x = if r < 0.55 || v.is_empty() {
            (rng.unit() * 6.0 - 3.0) as f32
        } else if r < 0.65 {
            0.0
        } else if r < 0.75 {
            rng.pick(&[100.0, -100.0, 11.0, -11.0, 50.0, -50.0])
        } else if r < 0.82 {
            rng.pick(&[1e4, -1e4])
        } else {
            v[rng.below(v.len())]
        };
        v.push(x);
    }
    v
}

#[derive(Clone, Copy, Debug)]
enum Act {
    Relu,
    LeakyRelu,
    Elu,
    Sigmoid,
    Tanh,
    Gelu,
    Silu,
    Softplus,
    Mish,
    Abs,
    Neg,
    Hardswish,
    Hardsigmoid,
    Hardtanh,
    Relu6,
    Clip,
    Square,
    Cube,
    Exp,
    Log1pAbs,
    Hypot1,
}

const ACTS: [Act; 21] = [
    Act::Relu,
    Act::LeakyRelu,
    Act::Elu,
    Act::Sigmoid,
    Act::Tanh,
    Act::Gelu,
    Act::Silu,
    Act::Softplus,
    Act::Mish,
    Act::Abs,
    Act::Neg,
    Act::Hardswish,
    Act::Hardsigmoid,
    Act::Hardtanh,
    Act::Relu6,
    Act::Clip,
    Act::Square,
    Act::Cube,
    Act::Exp,
    Act::Log1pAbs,
    Act::Hypot1,
];

#[derive(Clone, Copy, Debug)]
enum Red {
    Sum,
    Mean,
    Max,
    Min,
    Logsumexp,
    Softmax,
    LogSoftmax,
    Std,
}

#[derive(Clone, Copy, Debug)]
enum Bin {
    Add,
    Sub,
    Mul,
    Maximum,
    Minimum,
}

/// The second operand of a binary op.
#[derive(Clone, Debug)]
enum Rhs {
    /// A new input (index into the program's inputs), broadcast against the value.
    Input(usize),
    /// The value shifted by one along an axis (shrink, then zero padding on the other side).
    Shifted(usize, bool),
    /// The value flipped along an axis.
    Flipped(usize),
}

#[derive(Clone, Debug)]
enum Step {
    Act(Act),
    Reshape(Vec<isize>),
    Permute(Vec<isize>),
    /// Insert a size-1 axis at the position, then expand it.
    Broadcast(usize, usize),
    Pad(usize, (usize, usize), f64),
    Shrink(usize, (usize, usize)),
    Flip(Vec<isize>),
    Slice(usize, usize),
    Repeat(Vec<usize>),
    CatFlipped(usize),
    Reduce(Red, usize, bool),
    Bin(Bin, Rhs),
    /// A side output: argmax along the axis (compared exactly), the value unchanged.
    Argmax(usize),
    /// The value times a new input matrix (index into the inputs) over its last axis.
    Matmul(usize),
    /// A reduction over several axes at once.
    ReduceAxes(Red, Vec<isize>, bool),
    /// Through f16 and back.
    F16,
    /// A side output: the value cast to i32 (compared exactly), the value unchanged.
    ToInt,
    /// `input > 0 ? value : value flipped along the axis` (the input is a condition, no grad).
    Where(usize, usize),
    /// A side output: the input (realized, no grad, the value's shape) assigned
    /// `input * 0.5 + value`, read back after the program; the value unchanged.
    Assign(usize),
}

#[derive(Clone)]
struct Program {
    inputs: Vec<(Vec<usize>, Vec<f32>)>,
    /// Inputs that do not track gradients (conditions, assign targets).
    no_grad: Vec<usize>,
    steps: Vec<Step>,
    upstream: Vec<f32>,
}

/// Evaluated program: the output, the argmax side outputs and the input gradients.
struct Run {
    out: Vec<f32>,
    /// Side outputs: integers compared exactly, floats within the tolerance.
    side: Vec<Side>,
    grads: Vec<Vec<f32>>,
}

#[derive(Debug, PartialEq)]
enum Side {
    Int(Vec<i32>),
    Float(Vec<f32>),
}

fn act(x: &Tensor, a: Act) -> wgrad::Result<Tensor> {
    match a {
        Act::Relu => x.relu(),
        Act::LeakyRelu => x.leaky_relu(0.1),
        Act::Elu => x.elu(1.0),
        Act::Sigmoid => x.sigmoid(),
        Act::Tanh => x.tanh(),
        Act::Gelu => x.gelu(),
        Act::Silu => x.silu(),
        Act::Softplus => x.softplus(),
        Act::Mish => x.mish(),
        Act::Abs => x.abs(),
        Act::Neg => x.neg(),
        Act::Hardswish => x.hardswish(),
        Act::Hardsigmoid => x.hardsigmoid(),
        Act::Hardtanh => x.hardtanh(-1.0, 1.0),
        Act::Relu6 => x.relu6(),
        Act::Clip => x.clip(-0.5, 2.0),
        Act::Square => x.pow(2.0),
        Act::Cube => x.pow(3.0),
        Act::Exp => x.exp(),
        Act::Log1pAbs => x.abs()?.add(1.0)?.log(),
        Act::Hypot1 => x.square()?.add(1.0)?.sqrt(),
    }
}

fn shifted(x: &Tensor, axis: usize, forward: bool) -> wgrad::Result<Tensor> {
    let s = x.shape();
    let mut keep: Vec<(usize, usize)> = s.iter().map(|&d| (0, d)).collect();
    let mut pad = vec![(0, 0); s.len()];
    if forward {
        keep[axis] = (0, s[axis] - 1);
        pad[axis] = (1, 0);
    } else {
        keep[axis] = (1, s[axis]);
        pad[axis] = (0, 1);
    }
    x.shrink(&keep)?.pad(&pad, 0.0)
}

fn apply(x: &Tensor, step: &Step, ins: &[Tensor], side: &mut Vec<Tensor>) -> wgrad::Result<Tensor> {
    Ok(match step {
        Step::Act(a) => act(x, *a)?,
        Step::Reshape(s) => x.reshape(s)?,
        Step::Permute(p) => x.permute(p)?,
        Step::Broadcast(at, n) => {
            let x = x.unsqueeze(*at as isize)?;
            let mut s: Vec<isize> = x.shape().iter().map(|&d| d as isize).collect();
            s[*at] = *n as isize;
            x.expand(&s)?
        }
        Step::Pad(axis, p, v) => {
            let mut pads = vec![(0, 0); x.ndim()];
            pads[*axis] = *p;
            x.pad(&pads, *v)?
        }
        Step::Shrink(axis, r) => {
            let mut a: Vec<(usize, usize)> = x.shape().iter().map(|&d| (0, d)).collect();
            a[*axis] = *r;
            x.shrink(&a)?
        }
        Step::Flip(axes) => x.flip(axes)?,
        Step::Slice(axis, start) => x.slice(*axis as isize, *start as isize, isize::MAX, 2)?,
        Step::Repeat(r) => x.repeat(r)?,
        Step::CatFlipped(axis) => Tensor::cat(&[x, &x.flip(&[*axis as isize])?], *axis as isize)?,
        Step::Reduce(r, axis, keep) => {
            let a = *axis as isize;
            match r {
                Red::Sum => x.sum(a, *keep)?,
                Red::Mean => x.mean(a, *keep)?,
                Red::Max => x.max(a, *keep)?,
                Red::Min => x.min(a, *keep)?,
                Red::Logsumexp => x.logsumexp(a, *keep)?,
                Red::Softmax => x.softmax(a)?,
                Red::LogSoftmax => x.log_softmax(a)?,
                Red::Std => x.std(a, *keep, 1.0)?,
            }
        }
        Step::Bin(b, rhs) => {
            let y = match rhs {
                Rhs::Input(i) => ins[*i].clone(),
                Rhs::Shifted(axis, fwd) => shifted(x, *axis, *fwd)?,
                Rhs::Flipped(axis) => x.flip(&[*axis as isize])?,
            };
            match b {
                Bin::Add => x.add(&y)?,
                Bin::Sub => x.sub(&y)?,
                Bin::Mul => x.mul(&y)?,
                Bin::Maximum => x.maximum(&y)?,
                Bin::Minimum => x.minimum(&y)?,
            }
        }
        Step::Argmax(axis) => {
            side.push(x.argmax(Some(*axis as isize), false)?);
            x.clone()
        }
        Step::Matmul(i) => x.matmul(&ins[*i])?,
        Step::ReduceAxes(r, axes, keep) => match r {
            Red::Sum => x.sum(axes.clone(), *keep)?,
            Red::Mean => x.mean(axes.clone(), *keep)?,
            Red::Max => x.max(axes.clone(), *keep)?,
            _ => x.min(axes.clone(), *keep)?,
        },
        Step::F16 => x.cast(DType::F16)?.cast(DType::F32)?,
        Step::ToInt => {
            side.push(x.cast(DType::I32)?);
            x.clone()
        }
        Step::Where(i, axis) => ins[*i].gt(0.0)?.where_(x, &x.flip(&[*axis as isize])?)?,
        Step::Assign(i) => {
            let acc = &ins[*i];
            acc.assign(&acc.mul(0.5)?.add(x.detach())?)?;
            side.push(acc.clone());
            x.clone()
        }
    })
}

/// What the generator knows about the current value.
struct Val {
    t: Tensor,
    /// An upper bound of |value|.
    bound: f64,
    /// Whether its ties are the same on every backend (see the header).
    tie_safe: bool,
}

fn random_shape(rng: &mut Rng) -> Vec<usize> {
    let rank = 1 + rng.below(4);
    (0..rank).map(|_| 1 + rng.below(5)).collect()
}

/// A shape with one large axis (100 to 2,000) and at most one small one.
fn large_shape(rng: &mut Rng) -> Vec<usize> {
    let big = 100 + rng.below(1900);
    match rng.below(3) {
        0 => vec![big],
        1 => vec![big, 1 + rng.below(3)],
        _ => vec![1 + rng.below(3), big],
    }
}

/// How a program is generated: the wider step set, and its largest intermediate.
#[derive(Clone, Copy)]
struct Gen {
    wide: bool,
    cap: usize,
}

/// A new input of `shape` (random values), returning its index.
fn new_input(
    rng: &mut Rng,
    prog: &mut Program,
    ins: &mut Vec<Tensor>,
    shape: Vec<usize>,
    grad: bool,
) -> Option<usize> {
    let n = shape.iter().product();
    let data = input_data(rng, n);
    let t = Tensor::from_slice(&data, &shape).ok()?;
    t.set_requires_grad(grad);
    ins.push(t);
    prog.inputs.push((shape, data));
    if !grad {
        prog.no_grad.push(ins.len() - 1);
    }
    Some(ins.len() - 1)
}

/// A random step valid for the value (or None to try again), updating what is known about it.
fn random_step(
    rng: &mut Rng,
    v: &mut Val,
    prog: &mut Program,
    ins: &mut Vec<Tensor>,
    g: Gen,
) -> Option<Step> {
    let n = ins.len();
    let step = try_step(rng, v, prog, ins, g);
    if step.is_none() {
        // Forget an input added for a step not taken.
        ins.truncate(n);
        prog.inputs.truncate(n);
        prog.no_grad.retain(|&i| i < n);
    }
    step
}

/// Whether some slice of `t` along `axis` holds one value only (`None` if it cannot be told).
fn has_equal_slice(t: &Tensor, axis: usize) -> Option<bool> {
    let a = axis as isize;
    let spread = t.max(a, false).ok()?.sub(&t.min(a, false).ok()?).ok()?;
    let least = spread.min((), false).ok()?.to_vec_f32().ok()?;
    Some(least.first().is_none_or(|&v| v == 0.0))
}

fn try_step(
    rng: &mut Rng,
    v: &mut Val,
    prog: &mut Program,
    ins: &mut Vec<Tensor>,
    g: Gen,
) -> Option<Step> {
    let s = v.t.shape();
    let nd = s.len();
    let numel: usize = s.iter().product();
    if nd == 0 {
        let t = v.t.reshape(&[1]).ok()?;
        v.t = t;
        return Some(Step::Reshape(vec![1]));
    }
    let axis = rng.below(nd);
    let (mut bound, mut tie_safe) = (v.bound, v.tie_safe);
    let step = match rng.below(if g.wide { 21 } else { 16 }) {
        0..=3 => {
            let a = rng.pick(&ACTS);
            match a {
                Act::Square if bound * bound > MAX_BOUND => return None,
                Act::Cube if bound.powi(3) > MAX_BOUND => return None,
                Act::Exp if bound > 20.0 => return None,
                Act::Hypot1 if bound * bound > MAX_BOUND => return None,
                _ => {}
            }
            bound = match a {
                Act::Sigmoid | Act::Tanh | Act::Hardsigmoid | Act::Hardtanh => 1.0,
                Act::Relu6 => 6.0,
                Act::Clip => 2.0,
                Act::Square => bound * bound,
                Act::Cube => bound.powi(3),
                Act::Exp => bound.exp(),
                Act::Log1pAbs => (1.0 + bound).ln(),
                Act::Hypot1 => bound + 1.0,
                Act::Elu | Act::Gelu | Act::Silu | Act::Softplus | Act::Mish => bound + 1.0,
                _ => bound,
            };
            if matches!(
                a,
                Act::Sigmoid
                    | Act::Tanh
                    | Act::Elu
                    | Act::Gelu
                    | Act::Silu
                    | Act::Softplus
                    | Act::Mish
                    | Act::Exp
                    | Act::Log1pAbs
                    | Act::Hypot1
            ) {
                tie_safe = false;
            }
            Step::Act(a)
        }
        4 => {
            // Merge two adjacent axes, split one, or add a size-1 axis.
            let mut t: Vec<isize> = s.iter().map(|&d| d as isize).collect();
            match rng.below(3) {
                0 if nd >= 2 => {
                    let i = rng.below(nd - 1);
                    let m = t[i] * t[i + 1];
                    t.splice(i..i + 2, [m]);
                }
                1 if nd < 4 && (s[axis] == 4 || s[axis] == 6) => {
                    t.splice(axis..axis + 1, [2, t[axis] / 2]);
                }
                _ if nd < 4 => t.insert(rng.below(nd + 1), 1),
                _ => return None,
            }
            Step::Reshape(t)
        }
        5 if nd >= 2 => {
            let mut p: Vec<isize> = (0..nd as isize).collect();
            for i in (1..nd).rev() {
                p.swap(i, rng.below(i + 1));
            }
            Step::Permute(p)
        }
        6 if nd < 4 && numel <= 60 => Step::Broadcast(rng.below(nd + 1), 2 + rng.below(3)),
        7 => Step::Pad(
            axis,
            (rng.below(3), rng.below(3)),
            rng.pick(&[0.0, -1.5, 2.0]),
        ),
        8 if s[axis] >= 2 => {
            let lo = rng.below(s[axis] - 1);
            Step::Shrink(axis, (lo, lo + 1 + rng.below(s[axis] - lo - 1)))
        }
        9 => Step::Flip((0..nd as isize).filter(|_| rng.below(2) == 0).collect()),
        10 if s[axis] >= 3 => Step::Slice(axis, rng.below(2)),
        11 if numel <= 60 => Step::Repeat((0..nd).map(|_| 1 + rng.below(2)).collect()),
        12 if numel <= 60 => Step::CatFlipped(axis),
        13 => {
            let r = rng.pick(&[
                Red::Sum,
                Red::Mean,
                Red::Max,
                Red::Min,
                Red::Logsumexp,
                Red::Softmax,
                Red::LogSoftmax,
                Red::Std,
            ]);
            let n = s[axis] as f64;
            match r {
                Red::Max | Red::Min if !tie_safe => return None,
                // With one element and correction 1 the variance is 0/0 (NaN, as in PyTorch).
                Red::Std if s[axis] < 2 => return None,
                Red::Sum => bound *= n,
                Red::Logsumexp => {
                    bound += n.ln();
                    tie_safe = false;
                }
                // Not over a slice of equal values (an axis of one element, a broadcast): the
                // gradient `g - softmax · sum(g)` summed back over such a slice is 0 by
                // cancellation of large terms, so every backend's value is their rounding, which
                // an FMA a GPU compiler contracts changes (WGSL allows it). tests/numerics.rs
                // checks that case against the rounding of its terms instead.
                Red::Softmax | Red::LogSoftmax if has_equal_slice(&v.t, axis)? => return None,
                Red::Softmax => {
                    bound = 1.0;
                    tie_safe = false;
                }
                Red::LogSoftmax => {
                    bound = 2.0 * bound + n.ln();
                    tie_safe = false;
                }
                Red::Std => {
                    bound *= 2.0;
                    tie_safe = false;
                }
                _ => {}
            }
            Step::Reduce(r, axis, rng.below(2) == 0)
        }
        14 => {
            let b = rng.pick(&[Bin::Add, Bin::Sub, Bin::Mul, Bin::Maximum, Bin::Minimum]);
            if matches!(b, Bin::Maximum | Bin::Minimum) && !tie_safe {
                return None;
            }
            let rhs = match rng.below(3) {
                0 if s[axis] >= 2 => Rhs::Shifted(axis, rng.below(2) == 0),
                1 => Rhs::Flipped(axis),
                _ => {
                    // A new input broadcast against the value: some axes 1, maybe fewer axes.
                    let drop = rng.below(nd);
                    let shape: Vec<usize> = s[drop..]
                        .iter()
                        .map(|&d| if rng.below(3) == 0 { 1 } else { d })
                        .collect();
                    let n = shape.iter().product();
                    let data = input_data(rng, n);
                    let t = Tensor::from_slice(&data, &shape).ok()?;
                    t.set_requires_grad(true);
                    ins.push(t);
                    prog.inputs.push((shape, data));
                    Rhs::Input(ins.len() - 1)
                }
            };
            let other = if matches!(rhs, Rhs::Input(_)) {
                1e4
            } else {
                bound
            };
            bound = match b {
                Bin::Mul => bound * other,
                Bin::Add | Bin::Sub => bound + other,
                _ => bound.max(other),
            };
            Step::Bin(b, rhs)
        }
        15 if tie_safe && rng.below(2) == 0 => Step::Argmax(axis),
        15 => {
            let (n, k) = (s[nd - 1], 1 + rng.below(4));
            bound *= 1e4 * n as f64;
            if bound > MAX_BOUND {
                return None;
            }
            let data = input_data(rng, n * k);
            let t = Tensor::from_slice(&data, &[n, k]).ok()?;
            t.set_requires_grad(true);
            ins.push(t);
            prog.inputs.push((vec![n, k], data));
            Step::Matmul(ins.len() - 1)
        }
        16 if nd >= 2 => {
            let axes: Vec<isize> = (0..nd as isize).filter(|_| rng.below(2) == 0).collect();
            let r = rng.pick(&[Red::Sum, Red::Mean, Red::Max, Red::Min]);
            if axes.len() < 2 || (matches!(r, Red::Max | Red::Min) && !tie_safe) {
                return None;
            }
            if matches!(r, Red::Sum) {
                bound *= axes.iter().map(|&a| s[a as usize] as f64).product::<f64>();
            }
            Step::ReduceAxes(r, axes, rng.below(2) == 0)
        }
        // Rounding to f16 is the same everywhere only for values equal everywhere.
        17 if tie_safe && bound < 3e4 => Step::F16,
        18 if tie_safe && bound < 1e9 => Step::ToInt,
        19 => {
            let drop = rng.below(nd);
            let shape: Vec<usize> = s[drop..]
                .iter()
                .map(|&d| if rng.below(3) == 0 { 1 } else { d })
                .collect();
            Step::Where(new_input(rng, prog, ins, shape, false)?, axis)
        }
        20 => Step::Assign(new_input(rng, prog, ins, s.clone(), false)?),
        _ => return None,
    };
    if bound > MAX_BOUND {
        return None;
    }
    let t = apply(&v.t, &step, ins, &mut vec![]).ok()?;
    if t.numel() > g.cap {
        return None;
    }
    *v = Val { t, bound, tie_safe };
    Some(step)
}

/// A shape with one long axis of a length no useful number divides (65,537 and 131,071 are
/// prime, 98,305 = 5 x 19,661): the optimizer splits it into parts that do not divide it.
fn long_shape(rng: &mut Rng) -> Vec<usize> {
    let big = rng.pick(&[65_537, 131_071, 98_305]);
    match rng.below(3) {
        0 => vec![big],
        1 => vec![big, 2],
        _ => vec![2, big],
    }
}

/// A random program; with `long`, its first input has a long axis of a prime length
/// (`long_shape`); with `empty`, an axis of size 0 (so does much of the program: what is
/// computed from an empty tensor is never computed, see tests/empty.rs).
fn generate(rng: &mut Rng, wide: bool, long: bool, empty: bool) -> Program {
    Context::new().dev(Device::Interp).run(|| {
        let large = wide && !long && rng.below(4) == 0;
        let g = Gen {
            wide,
            cap: if long {
                1 << 19
            } else if large {
                8192
            } else {
                400
            },
        };
        let mut shape = if long {
            long_shape(rng)
        } else if large {
            large_shape(rng)
        } else {
            random_shape(rng)
        };
        if empty {
            let a = rng.below(shape.len());
            shape[a] = 0;
        }
        let data = input_data(rng, shape.iter().product());
        let x = Tensor::from_slice(&data, &shape).expect("input");
        x.set_requires_grad(true);
        let mut prog = Program {
            inputs: vec![(shape, data)],
            no_grad: vec![],
            steps: vec![],
            upstream: vec![],
        };
        let mut ins = vec![x.clone()];
        let mut v = Val {
            t: x,
            bound: 1e4,
            tie_safe: true,
        };
        let len = 3 + rng.below(6);
        while prog.steps.len() < len {
            if let Some(s) = random_step(rng, &mut v, &mut prog, &mut ins, g) {
                prog.steps.push(s);
            }
        }
        let n = v.t.numel();
        prog.upstream = (0..n).map(|_| (rng.unit() * 2.0 - 1.0) as f32).collect();
        prog
    })
}

/// A random program whose output and gradients are finite on the interpreter. The generator
/// bounds forward values; a gradient can still overflow (through an f16 round trip, whose
/// backward casts the gradient to f16: `x³` at x = 200 has a gradient past f16's 65,504), and
/// such a program tests nothing, so another is drawn.
fn finite_program(rng: &mut Rng, wide: bool, empty: bool) -> Program {
    loop {
        let p = generate(rng, wide, false, empty);
        // (One that fails on the interpreter is kept: `problems` reports it.)
        let ok = run(&p, Device::Interp).map_or(true, |r| {
            let mut all = r.out.iter().chain(r.grads.iter().flatten());
            all.all(|v| v.is_finite())
        });
        if ok {
            return p;
        }
    }
}

fn run(p: &Program, dev: Device) -> wgrad::Result<Run> {
    Context::new().dev(dev).run(|| {
        let ins: Vec<Tensor> = p
            .inputs
            .iter()
            .enumerate()
            .map(|(i, (s, d))| {
                let t = Tensor::from_slice(d, s)?;
                t.set_requires_grad(!p.no_grad.contains(&i));
                Ok(t)
            })
            .collect::<wgrad::Result<_>>()?;
        let mut side = vec![];
        let mut x = ins[0].clone();
        for s in &p.steps {
            x = apply(&x, s, &ins, &mut side)?;
        }
        // Cycled, so that a program with steps removed (minimizing) still has one.
        let up: Vec<f32> = (0..x.numel())
            .map(|i| p.upstream[i % p.upstream.len().max(1)])
            .collect();
        let up = Tensor::from_slice(&up, &x.shape())?;
        x.mul(&up)?.sum((), false)?.backward()?;
        let mut targets: Vec<&Tensor> = vec![&x];
        // An input that no step reads any more (minimizing) has no gradient.
        let grads: Vec<Option<Tensor>> = ins
            .iter()
            .enumerate()
            .filter(|(i, _)| !p.no_grad.contains(i))
            .map(|(_, t)| t.grad())
            .collect();
        targets.extend(grads.iter().flatten());
        targets.extend(side.iter());
        Tensor::realize_all(&targets)?;
        Ok(Run {
            out: x.to_vec_f32()?,
            side: side
                .iter()
                .map(|t| match t.dtype() {
                    DType::I32 => t.to_vec::<i32>().map(Side::Int),
                    _ => t.to_vec_f32().map(Side::Float),
                })
                .collect::<wgrad::Result<_>>()?,
            grads: grads
                .iter()
                .map(|g| g.as_ref().map_or(Ok(vec![]), |g| g.to_vec_f32()))
                .collect::<wgrad::Result<_>>()?,
        })
    })
}

/// Err naming the worst element when `got` and `want` differ by more than the tolerance, which
/// scales with the largest magnitude in `want` (cancellation in sums of large terms).
fn close(what: &str, got: &[f32], want: &[f32]) -> Result<(), String> {
    if got.len() != want.len() {
        return Err(format!("{what}: {} values, want {}", got.len(), want.len()));
    }
    let scale = want.iter().fold(0f64, |m, &w| m.max(f64::from(w).abs()));
    let atol = 1e-5 + 2e-5 * scale;
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        let (g, w) = (f64::from(g), f64::from(w));
        if !g.is_finite() || (g - w).abs() > atol + 2e-3 * w.abs() {
            return Err(format!("{what}[{i}]: got {g}, want {w} (atol {atol:.2e})"));
        }
    }
    Ok(())
}

fn finite(what: &str, v: &[f32]) -> Result<(), String> {
    match v.iter().position(|x| !x.is_finite()) {
        Some(i) => Err(format!("{what}[{i}] is {} on the interpreter", v[i])),
        None => Ok(()),
    }
}

fn check(p: &Program, want: &Run, dev: Device) -> Result<(), String> {
    let got = run(p, dev).map_err(|e| format!("{e}"))?;
    close("output", &got.out, &want.out)?;
    for (k, (g, w)) in got.grads.iter().zip(&want.grads).enumerate() {
        close(&format!("grad of input {k}"), g, w)?;
    }
    if got.side.len() != want.side.len() {
        return Err(format!(
            "{} side outputs, want {}",
            got.side.len(),
            want.side.len()
        ));
    }
    for (k, (g, w)) in got.side.iter().zip(&want.side).enumerate() {
        match (g, w) {
            (Side::Float(g), Side::Float(w)) => close(&format!("side output {k}"), g, w)?,
            _ if g != w => return Err(format!("side output {k}: {g:?}, want {w:?}")),
            _ => {}
        }
    }
    Ok(())
}

/// What is wrong with a program on `devices` against the interpreter, if anything.
fn problems(p: &Program, devices: &[Device]) -> Vec<String> {
    let want = match run(p, Device::Interp) {
        Ok(r) => r,
        Err(e) => return vec![format!("on the interpreter: {e}")],
    };
    let mut errs = vec![];
    if let Err(e) = finite("output", &want.out) {
        errs.push(e);
    }
    for (k, g) in want.grads.iter().enumerate() {
        if let Err(e) = finite(&format!("grad of input {k}"), g) {
            errs.push(e);
        }
    }
    for &dev in devices {
        if let Err(e) = check(p, &want, dev) {
            errs.push(format!("{dev}: {e}"));
        }
    }
    errs
}

/// Drop steps while the program still fails (and still runs on the interpreter).
fn minimize(p: &Program, devices: &[Device]) -> Program {
    let mut p = p.clone();
    'again: loop {
        for i in 0..p.steps.len() {
            let mut q = p.clone();
            q.steps.remove(i);
            let errs = problems(&q, devices);
            if !errs.is_empty() && !errs[0].starts_with("on the interpreter") {
                p = q;
                continue 'again;
            }
        }
        return p;
    }
}

#[test]
fn random_wider_programs_agree_across_backends() {
    let devices = compared();
    let programs = knob("WGRAD_DIFF_PROGRAMS", 150) as usize;
    let mut rng = Rng(knob("WGRAD_DIFF_SEED", 0x5eed_0015));
    let (t0, mut failures, mut large) = (std::time::Instant::now(), vec![], 0);
    let mut kinds = std::collections::BTreeMap::new();
    for i in 0..programs {
        let p = finite_program(&mut rng, true, false);
        large += usize::from(p.inputs[0].1.len() >= 100);
        for st in &p.steps {
            let name = format!("{st:?}");
            let name = name.split(['(', ' ']).next().unwrap_or("").to_string();
            *kinds.entry(name).or_insert(0usize) += 1;
        }
        let errs = problems(&p, &devices);
        if !errs.is_empty() {
            let m = minimize(&p, &devices);
            let shapes: Vec<&Vec<usize>> = m.inputs.iter().map(|(s, _)| s).collect();
            failures.push(format!(
                "program {i}: {}\n  minimized (inputs {shapes:?}, no grad {:?}): steps {:?}\n  now: {}",
                errs.join("; "),
                m.no_grad,
                m.steps,
                problems(&m, &devices).join("; ")
            ));
        }
    }
    eprintln!(
        "{programs} wider random programs ({large} with a large axis) on INTERP and {devices:?} in {:.1} s, {} disagree; steps {kinds:?}",
        t0.elapsed().as_secs_f64(),
        failures.len()
    );
    assert!(
        failures.is_empty(),
        "{} of {programs} random programs disagree:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// Programs whose first input has a long axis of a prime (or nearly prime) length, with the
/// wider step set: reductions over it are split into padded parts on every target.
#[test]
fn random_programs_over_long_prime_axes_agree_across_backends() {
    let devices = compared();
    let programs = knob("WGRAD_DIFF_LONG_PROGRAMS", 24) as usize;
    let mut rng = Rng(knob("WGRAD_DIFF_SEED", 0x5eed_0033));
    let t0 = std::time::Instant::now();
    let mut failures = vec![];
    for i in 0..programs {
        let p = generate(&mut rng, true, true, false);
        let errs = problems(&p, &devices);
        if !errs.is_empty() {
            failures.push(format!(
                "program {i} (steps {:?}): {}",
                p.steps,
                errs.join("; ")
            ));
        }
    }
    eprintln!(
        "{programs} random programs over long prime axes on INTERP and {devices:?} in {:.1} s, {} disagree",
        t0.elapsed().as_secs_f64(),
        failures.len()
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn random_programs_agree_across_backends() {
    let devices = compared();
    let programs = knob("WGRAD_DIFF_PROGRAMS", PROGRAMS as u64) as usize;
    let mut rng = Rng(knob("WGRAD_DIFF_SEED", SEED));
    let mut failures = vec![];
    let t0 = std::time::Instant::now();
    let mut spent = 0.0;
    for i in 0..programs {
        let p = finite_program(&mut rng, false, false);
        let t = std::time::Instant::now();
        let errs = problems(&p, &devices);
        spent += t.elapsed().as_secs_f64();
        if !errs.is_empty() {
            let m = minimize(&p, &devices);
            let shapes: Vec<&Vec<usize>> = m.inputs.iter().map(|(s, _)| s).collect();
            failures.push(format!(
                "program {i}: {}\n  minimized (inputs {shapes:?}): steps {:?}\n  now: {}",
                errs.join("; "),
                m.steps,
                problems(&m, &devices).join("; ")
            ));
        }
    }
    eprintln!(
        "{programs} random programs on INTERP and {devices:?} in {:.1} s ({spent:.1} s checking), {} disagree",
        t0.elapsed().as_secs_f64(),
        failures.len()
    );
    assert!(
        failures.is_empty(),
        "{} of {programs} random programs disagree:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// Programs whose input has an empty axis: reductions over it give their identities, slices,
/// pads and broadcasts of it, and the gradients back to it, on every backend as on the
/// interpreter.
#[test]
fn random_programs_with_an_empty_axis_agree_across_backends() {
    let devices = compared();
    let programs = knob("WGRAD_DIFF_PROGRAMS", PROGRAMS as u64) as usize;
    let mut rng = Rng(knob("WGRAD_DIFF_SEED", 0x5eed_00e0));
    let (mut failures, mut nonempty) = (vec![], 0);
    for i in 0..programs {
        let p = finite_program(&mut rng, true, true);
        let errs = problems(&p, &devices);
        nonempty += run(&p, Device::Interp).map_or(0, |r| usize::from(!r.out.is_empty()));
        if !errs.is_empty() {
            failures.push(format!(
                "program {i} (inputs {:?}): {}\n  steps {:?}",
                p.inputs.iter().map(|(s, _)| s).collect::<Vec<_>>(),
                errs.join("; "),
                p.steps
            ));
        }
    }
    eprintln!("{programs} programs with an empty axis ({nonempty} with a non-empty output)");
    assert!(
        failures.is_empty(),
        "{} of {programs} programs with an empty axis disagree:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

//! The op vocabulary and its semantics. `Op` is what a node of the lazy graph (`uop.rs`) does;
//! every Tensor op is built from these, and movement ops become views (`shape::ShapeTracker`)
//! when the scheduler folds them. `UnaryOp`, `BinaryOp` and `ReduceOp` are also the ops of the
//! kernel IR, and `exec_*` define what they compute: constant folding and the interpreter both
//! use them, so they are the specification every backend is checked against.

use crate::dtype::DType;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
/// An elementwise op of one operand; the rest (exp, log, cos, tanh, …) are built from these.
pub enum UnaryOp {
    /// `-a` (wrapping for integers).
    Neg,
    /// `2^a`.
    Exp2,
    /// `log2(a)`: NaN below 0, `-inf` at 0.
    Log2,
    /// `sin(a)`, `a` in radians.
    Sin,
    /// `sqrt(a)`: NaN below 0.
    Sqrt,
    /// `1 / a`.
    Recip,
    /// `a` rounded toward zero.
    Trunc,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
/// An elementwise op of two operands of one dtype (the Tensor ops promote and broadcast first).
pub enum BinaryOp {
    /// `a + b` (wrapping for integers).
    Add,
    /// `a * b` (wrapping for integers).
    Mul,
    /// True division for floats, truncating division for integers.
    Div,
    /// `a % b` with the sign of `a` (C's `%`, `fmod` for floats); integer `a % 0` is 0.
    Mod,
    /// The larger of `a` and `b`.
    Max,
    /// `a < b`, as a `Bool`.
    CmpLt,
    /// `a == b`, as a `Bool`.
    CmpEq,
    /// `a != b`, as a `Bool`.
    CmpNe,
    /// Bitwise and (logical and on `Bool`).
    And,
    /// Bitwise or (logical or on `Bool`).
    Or,
    /// Bitwise exclusive or.
    Xor,
    /// `a << (b & 31)`.
    Shl,
    /// `a >> (b & 31)`, logical (zero-filling) on the 32-bit pattern.
    Shr,
}

impl BinaryOp {
    /// Whether the op is a comparison (its result is `Bool`, whatever the operands' dtype).
    pub fn is_cmp(self) -> bool {
        matches!(self, BinaryOp::CmpLt | BinaryOp::CmpEq | BinaryOp::CmpNe)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
/// How a reduce combines the elements of the reduced axes.
pub enum ReduceOp {
    /// Sum (`sum`, `mean`, matmul's inner axis).
    Sum,
    /// Maximum (`max`; `min` is `-max(-x)`).
    Max,
    /// Product (tinygrad's `MUL` reduce): `prod`, `cumprod`, `scatter_reduce(prod)`.
    Prod,
}

impl ReduceOp {
    /// The value a reduce starts from: 0 for sums, 1 for products, the dtype's smallest value
    /// for maxima. An empty reduce yields it.
    pub fn identity(self, dtype: DType) -> f64 {
        match self {
            ReduceOp::Sum => 0.0,
            ReduceOp::Max => dtype.min_value(),
            ReduceOp::Prod => 1.0,
        }
    }
    /// The binary op that combines two partial results (split reduces, sharded reduces).
    pub fn combine(self) -> BinaryOp {
        match self {
            ReduceOp::Sum => BinaryOp::Add,
            ReduceOp::Max => BinaryOp::Max,
            ReduceOp::Prod => BinaryOp::Mul,
        }
    }
}

/// One node kind of the lazy graph.
#[derive(Clone, Debug, PartialEq)]
pub enum Op {
    /// A realized buffer (a leaf).
    Buffer,
    /// A scalar broadcast to the node's shape.
    Const(f64),
    /// `0, 1, 2, ...` along a 1-D shape (i32): the only index-valued leaf, used by arange,
    /// one-hot indexing and argmax so that the rewrite rules can see through them.
    Iota,
    /// An elementwise op of one source.
    Unary(UnaryOp),
    /// An elementwise op of two sources of one dtype and shape.
    Binary(BinaryOp),
    /// `src[0] ? src[1] : src[2]`, elementwise.
    Where,
    /// Convert to the dtype (`exec_cast` gives the rules).
    Cast(DType),
    /// Reduce the given axes to size 1 (keepdim shape).
    Reduce(ReduceOp, Vec<usize>),
    /// The same elements in row-major order under the node's shape.
    Reshape,
    /// Reorder the axes: axis `i` of the result is axis `order[i]` of the source.
    Permute(Vec<usize>),
    /// Broadcast size-1 axes to the node's shape (no copy).
    Expand,
    /// Pad each axis with `(before, after)` zeros.
    Pad(Vec<(usize, usize)>),
    /// Keep `start..end` of each axis.
    Shrink(Vec<(usize, usize)>),
    /// Reverse the axes marked `true`.
    Flip(Vec<bool>),
    /// Force the source into its own buffer.
    Contiguous,
    /// Identity that stops gradients.
    Detach,
    /// Write `src[1]` into `src[0]`'s buffer in place; the node's value is the written buffer.
    Assign,
    /// Move `src[0]` to this node's device.
    Copy,
}

impl Op {
    /// Whether the op only re-addresses its source (reshape, permute, expand, pad, shrink, flip):
    /// the scheduler folds these into views.
    pub fn is_movement(&self) -> bool {
        matches!(
            self,
            Op::Reshape | Op::Permute(_) | Op::Expand | Op::Pad(_) | Op::Shrink(_) | Op::Flip(_)
        )
    }
    /// Whether the op computes each output element from the same element of its sources (unary,
    /// binary, where, cast): these fuse into one kernel.
    pub fn is_elementwise(&self) -> bool {
        matches!(self, Op::Unary(_) | Op::Binary(_) | Op::Where | Op::Cast(_))
    }
}

/// The dtype arithmetic is carried out in: f16 and bf16 values compute as f32 and round on
/// store/cast.
pub fn compute_dtype(dt: DType) -> DType {
    match dt {
        DType::F16 | DType::BF16 => DType::F32,
        _ => dt,
    }
}

fn wrap_int(dtype: DType, x: u64) -> f64 {
    match dtype {
        DType::I32 => x as u32 as i32 as f64,
        DType::U32 => x as u32 as f64,
        DType::U8 => x as u8 as f64,
        DType::Bool => (x != 0) as u8 as f64,
        _ => x as i64 as f64,
    }
}

fn as_bits(v: f64) -> u64 {
    v as i64 as u64
}

/// Round an arithmetic result to its dtype: f32 precision for floats (f16 and bf16 included,
/// see `compute_dtype`), wrapping for integers.
pub fn round_result(dtype: DType, v: f64) -> f64 {
    match dtype {
        DType::F32 | DType::F16 | DType::BF16 => v as f32 as f64,
        _ => wrap_int(dtype, as_bits(v)),
    }
}

/// The semantics of every unary op, shared by constant folding and the interpreter.
pub fn exec_unary(op: UnaryOp, dtype: DType, a: f64) -> f64 {
    let v = match op {
        UnaryOp::Neg => return wrap_or_round(dtype, -a),
        UnaryOp::Exp2 => a.exp2(),
        UnaryOp::Log2 => a.log2(),
        UnaryOp::Sin => a.sin(),
        UnaryOp::Sqrt => a.sqrt(),
        UnaryOp::Recip => 1.0 / a,
        UnaryOp::Trunc => a.trunc(),
    };
    round_result(dtype, v)
}

fn wrap_or_round(dtype: DType, v: f64) -> f64 {
    if dtype.is_float() {
        v as f32 as f64
    } else {
        wrap_int(dtype, as_bits(v))
    }
}

/// The semantics of every binary op; `dtype` is the operands' dtype.
pub fn exec_binary(op: BinaryOp, dtype: DType, a: f64, b: f64) -> f64 {
    let float = dtype.is_float();
    match op {
        BinaryOp::Add => wrap_or_round(dtype, a + b),
        BinaryOp::Mul if float => (a * b) as f32 as f64,
        BinaryOp::Mul => wrap_int(dtype, as_bits(a).wrapping_mul(as_bits(b))),
        BinaryOp::Div if float => (a / b) as f32 as f64,
        BinaryOp::Div => {
            if b == 0.0 {
                0.0
            } else {
                wrap_int(dtype, ((a as i64) / (b as i64)) as u64)
            }
        }
        BinaryOp::Mod if float => (a % b) as f32 as f64,
        BinaryOp::Mod => {
            if b == 0.0 {
                0.0
            } else {
                wrap_int(dtype, ((a as i64) % (b as i64)) as u64)
            }
        }
        BinaryOp::Max => a.max(b),
        BinaryOp::CmpLt => (a < b) as u8 as f64,
        BinaryOp::CmpEq => (a == b) as u8 as f64,
        BinaryOp::CmpNe => (a != b) as u8 as f64,
        BinaryOp::And => wrap_int(dtype, as_bits(a) & as_bits(b)),
        BinaryOp::Or => wrap_int(dtype, as_bits(a) | as_bits(b)),
        BinaryOp::Xor => wrap_int(dtype, as_bits(a) ^ as_bits(b)),
        BinaryOp::Shl => wrap_int(dtype, as_bits(a) << (as_bits(b) & 31)),
        BinaryOp::Shr => wrap_int(dtype, (as_bits(a) & 0xffff_ffff) >> (as_bits(b) & 31)),
    }
}

/// Cast semantics: float to integer truncates toward zero and saturates at the integer type's
/// range, NaN giving 0 (as Rust's `as`, JAX and WGSL; C leaves it undefined and PyTorch follows
/// the hardware); integer to integer wraps; to bool tests non-zero.
pub fn exec_cast(from: DType, to: DType, a: f64) -> f64 {
    if from.is_float() {
        match to {
            DType::I32 => return a as i32 as f64,
            DType::U32 => return a as u32 as f64,
            DType::U8 => return a as u8 as f64,
            _ => {}
        }
    }
    match to {
        DType::F32 => a as f32 as f64,
        // Round to nearest even (`DType::normalize`); NaN stays NaN, values past the largest
        // finite one round to inf.
        DType::F16 | DType::BF16 => to.normalize(a),
        DType::Bool => (a != 0.0) as u8 as f64,
        _ if a.is_nan() => 0.0,
        _ => wrap_int(to, a.trunc() as i64 as u64),
    }
}

//! Code generation: a scheduled kernel (`schedule::KernelAst`) is lowered into a `KGraph` (an
//! SSA graph of scalar ops with index arithmetic, simplified on construction by
//! `rewrite.rs`), optimized (`opt.rs`: upcasting), linearized into a flat instruction list (`linearize.rs`), and rendered to
//! source text by a dialect of the shared C-like printer (`render.rs`, `c.rs`). The interpreter
//! runs the linear instructions directly.

pub mod c;
pub mod linearize;
pub mod lower;
pub mod opt;
pub mod render;
pub mod wgsl;

pub use linearize::{Inst, LinearKernel};

use crate::dtype::DType;
use crate::ops::{BinaryOp, ReduceOp, UnaryOp};
use std::collections::HashMap;

pub type Ref = u32;

/// An op of the kernel graph.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum KOp {
    /// The global index: which output element this invocation computes.
    Gidx,
    /// A reduce loop variable, `0..size`.
    Range {
        id: u32,
        size: u32,
    },
    /// A constant, as the bits of an f64.
    Const(u64),
    Unary(UnaryOp),
    Binary(BinaryOp),
    /// src: [cond, a, b]
    Where,
    /// src: [x]; the node's dtype is the target.
    Cast,
    /// src: [idx] or [idx, gate]; a load whose gate is false reads 0.
    Load(u32),
    /// src: [value, range...]
    Reduce(ReduceOp),
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Node {
    pub op: KOp,
    pub dtype: DType,
    pub src: Vec<Ref>,
}

/// A kernel under construction: hash-consed nodes (so equal subexpressions are shared) plus
/// value bounds of integer nodes, which the rewrite rules use to drop needless `/`, `%` and
/// comparisons.
#[derive(Clone, Debug, Default)]
pub struct KGraph {
    pub nodes: Vec<Node>,
    pub bounds: Vec<(f64, f64)>,
    /// Bit i set: the node depends on range id i.
    pub ranges: Vec<u64>,
    map: HashMap<Node, Ref>,
    next_range: u32,
}

impl KGraph {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn node(&self, r: Ref) -> &Node {
        &self.nodes[r as usize]
    }

    pub fn const_value(&self, r: Ref) -> Option<f64> {
        match self.node(r).op {
            KOp::Const(bits) => Some(f64::from_bits(bits)),
            _ => None,
        }
    }

    /// Insert a node, first offering it to the rewrite rules.
    pub fn make(&mut self, op: KOp, dtype: DType, src: Vec<Ref>) -> Ref {
        if let Some(r) = crate::rewrite::simplify(self, &op, dtype, &src) {
            return r;
        }
        self.intern(Node { op, dtype, src })
    }

    /// Insert a node as is (no rewriting).
    pub fn intern(&mut self, n: Node) -> Ref {
        if let Some(&r) = self.map.get(&n) {
            return r;
        }
        let bounds = crate::rewrite::bounds(self, &n);
        let mut ranges = n
            .src
            .iter()
            .fold(0u64, |acc, &s| acc | self.ranges[s as usize]);
        if let KOp::Range { id, .. } = n.op {
            ranges |= 1u64 << id;
        }
        if let KOp::Reduce(_) = n.op {
            for &s in &n.src[1..] {
                if let KOp::Range { id, .. } = self.node(s).op {
                    ranges &= !(1u64 << id);
                }
            }
        }
        let r = self.nodes.len() as Ref;
        self.nodes.push(n.clone());
        self.bounds.push(bounds);
        self.ranges.push(ranges);
        self.map.insert(n, r);
        r
    }

    pub fn konst(&mut self, v: f64, dtype: DType) -> Ref {
        let v = dtype.normalize(v);
        self.intern(Node {
            op: KOp::Const(v.to_bits()),
            dtype,
            src: vec![],
        })
    }
    pub fn int(&mut self, v: i64) -> Ref {
        self.konst(v as f64, crate::shape::INDEX)
    }
    pub fn bool_const(&mut self, v: bool) -> Ref {
        self.konst(v as u8 as f64, DType::Bool)
    }
    pub fn gidx(&mut self, size: usize) -> Ref {
        let r = self.intern(Node {
            op: KOp::Gidx,
            dtype: crate::shape::INDEX,
            src: vec![],
        });
        self.bounds[r as usize] = (0.0, size.saturating_sub(1) as f64);
        r
    }
    pub fn range(&mut self, size: usize) -> Ref {
        let id = self.next_range;
        assert!(id < 64, "a kernel has at most 64 reduce loops");
        self.next_range += 1;
        self.intern(Node {
            op: KOp::Range {
                id,
                size: size as u32,
            },
            dtype: crate::shape::INDEX,
            src: vec![],
        })
    }
    pub fn binary(&mut self, op: BinaryOp, a: Ref, b: Ref) -> Ref {
        let dt = if op.is_cmp() {
            DType::Bool
        } else {
            self.node(a).dtype
        };
        self.make(KOp::Binary(op), dt, vec![a, b])
    }
    pub fn unary(&mut self, op: UnaryOp, a: Ref) -> Ref {
        let dt = self.node(a).dtype;
        self.make(KOp::Unary(op), dt, vec![a])
    }
    pub fn add(&mut self, a: Ref, b: Ref) -> Ref {
        self.binary(BinaryOp::Add, a, b)
    }
    pub fn mul(&mut self, a: Ref, b: Ref) -> Ref {
        self.binary(BinaryOp::Mul, a, b)
    }
    pub fn div(&mut self, a: Ref, b: Ref) -> Ref {
        self.binary(BinaryOp::Div, a, b)
    }
    pub fn modulo(&mut self, a: Ref, b: Ref) -> Ref {
        self.binary(BinaryOp::Mod, a, b)
    }
    pub fn lt(&mut self, a: Ref, b: Ref) -> Ref {
        self.binary(BinaryOp::CmpLt, a, b)
    }
    /// a <= b, for integers: a < b + 1.
    pub fn le(&mut self, a: Ref, b: Ref) -> Ref {
        let one = self.int(1);
        let b1 = self.add(b, one);
        self.lt(a, b1)
    }
    pub fn and(&mut self, a: Ref, b: Ref) -> Ref {
        self.binary(BinaryOp::And, a, b)
    }
    pub fn where_(&mut self, c: Ref, a: Ref, b: Ref) -> Ref {
        let dt = self.node(a).dtype;
        self.make(KOp::Where, dt, vec![c, a, b])
    }
    pub fn cast(&mut self, a: Ref, dtype: DType) -> Ref {
        self.make(KOp::Cast, dtype, vec![a])
    }
    pub fn load(&mut self, slot: u32, dtype: DType, idx: Ref, gate: Ref) -> Ref {
        self.make(KOp::Load(slot), dtype, vec![idx, gate])
    }
    pub fn reduce(&mut self, op: ReduceOp, value: Ref, ranges: &[Ref]) -> Ref {
        let dt = self.node(value).dtype;
        let mut src = vec![value];
        src.extend_from_slice(ranges);
        self.make(KOp::Reduce(op), dt, src)
    }
    pub fn depends_on(&self, r: Ref, range: Ref) -> bool {
        match self.node(range).op {
            KOp::Range { id, .. } => self.ranges[r as usize] & (1u64 << id) != 0,
            _ => false,
        }
    }
    /// Rebuild `r` with `from` replaced by `to` (rules run again on the rebuilt nodes).
    pub fn substitute(&mut self, r: Ref, from: Ref, to: Ref) -> Ref {
        let mut memo = HashMap::new();
        self.subst_rec(r, from, to, &mut memo)
    }
    fn subst_rec(&mut self, r: Ref, from: Ref, to: Ref, memo: &mut HashMap<Ref, Ref>) -> Ref {
        if r == from {
            return to;
        }
        if !self.depends_on(r, from) {
            return r;
        }
        if let Some(&m) = memo.get(&r) {
            return m;
        }
        let n = self.node(r).clone();
        let src: Vec<Ref> = n
            .src
            .iter()
            .map(|&s| self.subst_rec(s, from, to, memo))
            .collect();
        let out = self.make(n.op, n.dtype, src);
        memo.insert(r, out);
        out
    }
}

/// The dtype arithmetic is carried out in: f16 values compute as f32 and round on store/cast.
pub fn compute_dtype(dt: DType) -> DType {
    if dt == DType::F16 {
        DType::F32
    } else {
        dt
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

/// Round an arithmetic result to its dtype: f32 precision for floats (f16 included, see
/// `compute_dtype`), wrapping for integers.
pub fn round_result(dtype: DType, v: f64) -> f64 {
    match dtype {
        DType::F32 | DType::F16 => v as f32 as f64,
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

/// Cast semantics: float to integer truncates (and wraps), to bool tests non-zero.
pub fn exec_cast(to: DType, a: f64) -> f64 {
    match to {
        DType::F32 => a as f32 as f64,
        DType::F16 => half::f16::from_f64(a).to_f64(),
        DType::Bool => (a != 0.0) as u8 as f64,
        _ if a.is_nan() => 0.0,
        _ => wrap_int(to, a.trunc() as i64 as u64),
    }
}

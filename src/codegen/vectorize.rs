//! Vector accumulators: the renderer's last shaping step, for dialects with vector types (C).
//! An upcast leaves one accumulator per output in a reduce loop, each summing the same
//! expression over its own elements. Where a run of `width` such accumulators sums one
//! expression over consecutive elements of a buffer (an upcast along an axis that is
//! contiguous in an operand), the loop keeps them in one vector and computes the expression
//! once as a vector: contiguous loads become one vector load (every other element, a pooling
//! window's columns, two loads and a shuffle; a run that one condition gates, loaded under
//! it), a value shared by every lane is broadcast, and anything else is gathered lane by lane.
//! Sums and maxes pack; the expression may add, multiply, divide, negate, take maxima,
//! reciprocals and exponentials, compare (f32 values, or bytes with a constant: a causal mask),
//! negate masks, select and turn comparisons into 1.0 or 0.0 (a ReLU inside a max-pool, and its
//! tie count), each lane as the scalar code computes it. After the loop nest the lanes are
//! written back into the scalar accumulators. Every lane still sums its own
//! terms in the same order, so the results are bit-identical to the scalar kernel.
//!
//! Stores pack the same way (`store_packs`): a run of stores to consecutive elements whose
//! values are one vector expression — a reduce's epilogue over an upcast's outputs, such as a
//! GELU's backward after the matmul feeding it — is one vector store, its exponentials and
//! divisions computed once per vector.
//!
//! This is found on the linear instructions (`linearize.rs`), not in the lowering, so the
//! interpreter and the other dialects run the kernel as it is; the scalar instructions a vector
//! replaces are left in place for the compiler to drop as dead code.

use super::linearize::{Inst, LinearKernel, Reg};
use crate::dtype::DType;
use crate::kernel::{FastMap, FastSet};
use crate::ops::{BinaryOp, ReduceOp, UnaryOp};
use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::rc::Rc;

/// One lane-wise vector expression.
#[derive(Clone, Debug, PartialEq)]
pub enum VExpr {
    /// The same scalar in every lane.
    Splat(Reg),
    /// The pack's `width` elements of a buffer from `base + offset`, `stride` apart (1, or 2
    /// for f32: a pooling window's columns), of `dtype` (f32, or u8 converted to f32 lane by
    /// lane, exactly as a scalar cast does).
    Load {
        /// The buffer slot.
        slot: u32,
        /// Its element dtype.
        dtype: DType,
        /// The register holding lane 0's index, less `offset`.
        base: Reg,
        /// Added to `base` for lane 0.
        offset: i64,
        /// Elements between lanes.
        stride: i64,
        /// The bool register every lane's load is gated by, if any: the vector is loaded where it
        /// holds and is 0 where it does not (a padded view's run of lanes inside one region).
        gate: Option<Reg>,
    },
    /// One scalar per lane (0 in spare lanes).
    Gather(Vec<Reg>),
    /// Add, Mul, Div or Max (with the scalar max's NaN rule) of f32 lanes.
    Binary(BinaryOp, Rc<VExpr>, Rc<VExpr>),
    /// A lane-wise unary op of f32 lanes: `Neg`, or `Exp2` (the C dialect's `exp2v*`, lane
    /// by lane the scalar `wexp2f`).
    Unary(UnaryOp, Rc<VExpr>),
    /// A comparison of f32 lanes (`CmpLt`, `CmpEq`, `CmpNe`): a mask, read only by `Select`
    /// and `Mask`.
    Cmp(BinaryOp, Rc<VExpr>, Rc<VExpr>),
    /// Per lane, the second operand where the mask (the first) holds, else the third.
    Select(Rc<VExpr>, Rc<VExpr>, Rc<VExpr>),
    /// A mask as f32 lanes: 1 where it holds, 0 elsewhere (a bool cast to f32).
    Mask(Rc<VExpr>),
    /// The negation of a mask (`logical_not`, spelled `int(m) != 1`).
    Not(Rc<VExpr>),
    /// An f32 constant in every lane (the operand a byte is compared with).
    Const(f64),
    /// The same bool (a register) as every lane of a mask.
    SplatMask(Reg),
    /// A comparison of i32 lanes (`CmpLt`, `CmpEq`, `CmpNe`), each side one register per lane
    /// (indices: a causal mask's row against its column).
    IntCmp(BinaryOp, Vec<Reg>, Vec<Reg>),
}

impl VExpr {
    /// The scalar registers this expression names (broadcast, gathered, compared, or a
    /// load's index), each as often as it is named.
    pub fn regs(&self) -> Vec<Reg> {
        let mut out = match self {
            VExpr::Splat(r) | VExpr::SplatMask(r) => vec![*r],
            VExpr::Load { base, gate, .. } => std::iter::once(*base).chain(*gate).collect(),
            VExpr::Gather(l) => l.clone(),
            VExpr::IntCmp(_, a, b) => a.iter().chain(b).copied().collect(),
            _ => vec![],
        };
        for c in self.children() {
            out.extend(c.regs());
        }
        out
    }

    /// The operands of this expression.
    pub fn children(&self) -> Vec<&VExpr> {
        match self {
            VExpr::Splat(_)
            | VExpr::Load { .. }
            | VExpr::Gather(_)
            | VExpr::Const(_)
            | VExpr::SplatMask(_)
            | VExpr::IntCmp(..) => vec![],
            VExpr::Binary(_, a, b) | VExpr::Cmp(_, a, b) => vec![a, b],
            VExpr::Unary(_, a) | VExpr::Mask(a) | VExpr::Not(a) => vec![a],
            VExpr::Select(m, a, b) => vec![m, a, b],
        }
    }
}

/// A run of accumulators computed as one vector.
#[derive(Clone, Debug, PartialEq)]
pub struct Pack {
    /// The scalar accumulators, lane 0 first (fewer than `width`: the last lanes are spare).
    pub accs: Vec<Reg>,
    /// Lanes of the vector.
    pub width: usize,
    /// What every iteration adds.
    pub expr: VExpr,
    /// The reduce: a sum, or a max (with the scalar max's NaN rule).
    pub op: ReduceOp,
    /// Whether the steps are fused multiply-adds (`Inst::Acc::fused`): `expr` is then the
    /// product, and the vector step is one fused multiply-add per lane too.
    pub fused: bool,
    /// The scalar steps (`Acc` instructions) the vector step replaces.
    pub steps: Vec<usize>,
    /// The last of them, in whose place the vector step is emitted.
    pub at: usize,
    /// The `EndLoop` closing the reduce's loop nest, after which the lanes are written back.
    pub end: usize,
}

/// An integer register as a sum of leaf registers times coefficients plus a constant.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Affine {
    terms: BTreeMap<Reg, i64>,
    konst: i64,
}

impl Affine {
    fn leaf(r: Reg) -> Affine {
        Affine {
            terms: BTreeMap::from([(r, 1)]),
            konst: 0,
        }
    }
    fn add(&self, o: &Affine) -> Affine {
        let mut terms = self.terms.clone();
        for (&r, &c) in &o.terms {
            *terms.entry(r).or_insert(0) += c;
        }
        terms.retain(|_, c| *c != 0);
        Affine {
            terms,
            konst: self.konst + o.konst,
        }
    }
    fn scale(&self, by: i64) -> Affine {
        let terms = self.terms.iter().map(|(&r, &c)| (r, c * by)).collect();
        Affine {
            terms,
            konst: self.konst * by,
        }
    }
}

/// What defines a register, as far as packing cares.
#[derive(Clone, Debug)]
enum Def {
    /// An f32 load at `index`, which is register `reg` plus `offset` (a `LoadVec` lane
    /// included), gated by `gate` or not, or an ungated u8 load cast to f32 (`dtype` U8: an
    /// image's pixels).
    Load {
        slot: u32,
        dtype: DType,
        index: Affine,
        reg: Reg,
        offset: i64,
        gate: Option<Reg>,
    },
    Binary(BinaryOp, Reg, Reg),
    /// A comparison of f32 registers.
    Cmp(BinaryOp, Reg, Reg),
    /// An f32 `where`: (condition, then, else).
    Where(Reg, Reg, Reg),
    /// A bool cast to f32.
    FromBool(Reg),
    /// `Neg` or `Exp2` of an f32 register.
    Unary(UnaryOp, Reg),
    /// A bool cast to i32.
    BoolInt(Reg),
    /// A bool mask, negated (`int(m) != 1`, `int(m) == 0`) or not (`int(m) == 1`,
    /// `int(m) != 0`).
    MaskOf(Reg, bool),
    /// A comparison of a u8 load (its register) with a constant.
    ByteCmp(BinaryOp, Reg, f64),
    /// A comparison of i32 registers.
    IntCmp(BinaryOp, Reg, Reg),
    Other,
}

struct Analysis {
    defs: FastMap<Reg, Def>,
    ints: FastMap<Reg, Affine>,
    /// Ungated u8 loads: (slot, index register).
    bytes: FastMap<Reg, (u32, Reg)>,
    /// u8 constants.
    u8s: FastMap<Reg, f64>,
    /// Bool constants.
    bools: FastMap<Reg, bool>,
    /// Nodes the current `pack_top` may still build.
    budget: Cell<usize>,
    /// What `pack` and `pack_mask` built for each run of lanes (a value the scalar code
    /// shares is packed once, and the vector expression shares it too).
    memo: RefCell<FastMap<PackKey, Option<VExpr>>>,
}

/// A run of lanes packed as a value (`false`) or as a mask (`true`).
type PackKey = (Lanes, bool);

/// The registers of a run of lanes, inline up to 16 (a memo key the search builds for every
/// run of every candidate).
type Lanes = smallvec::SmallVec<[Reg; 16]>;

/// How deep a packed expression goes (a GELU's backward through its tanh is about 20 deep).
const PACK_DEPTH: u32 = 32;
/// How many nodes one packed expression may have.
const PACK_NODES: usize = 256;

impl Analysis {
    fn new(k: &LinearKernel) -> Analysis {
        let mut a = Analysis {
            defs: FastMap::default(),
            ints: FastMap::default(),
            bytes: FastMap::default(),
            u8s: FastMap::default(),
            bools: FastMap::default(),
            budget: Cell::new(0),
            memo: RefCell::new(FastMap::default()),
        };
        for inst in &k.insts {
            a.record(inst);
        }
        a
    }

    fn int(&self, r: Reg) -> Affine {
        self.ints
            .get(&r)
            .cloned()
            .unwrap_or_else(|| Affine::leaf(r))
    }

    fn record(&mut self, inst: &Inst) {
        match *inst {
            Inst::Const { dst, bits, dtype } => {
                let v = f64::from_bits(bits);
                if dtype == DType::U8 {
                    self.u8s.insert(dst, v);
                }
                if dtype == DType::Bool {
                    self.bools.insert(dst, v != 0.0);
                }
                if dtype == DType::I32 {
                    self.ints.insert(
                        dst,
                        Affine {
                            terms: BTreeMap::new(),
                            konst: v as i64,
                        },
                    );
                }
                self.defs.insert(dst, Def::Other);
            }
            Inst::Binary {
                dst,
                op,
                dtype,
                a,
                b,
            } => {
                if dtype == DType::I32 {
                    let (x, y) = (self.int(a), self.int(b));
                    let konst = |v: &Affine| v.terms.is_empty().then_some(v.konst);
                    let aff = match op {
                        BinaryOp::Add => Some(x.add(&y)),
                        BinaryOp::Mul => match (konst(&x), konst(&y)) {
                            (Some(c), _) => Some(y.scale(c)),
                            (_, Some(c)) => Some(x.scale(c)),
                            _ => None,
                        },
                        _ => None,
                    };
                    if let Some(aff) = aff {
                        self.ints.insert(dst, aff);
                    }
                }
                let konst = |r: Reg| {
                    self.ints
                        .get(&r)
                        .filter(|v| v.terms.is_empty())
                        .map(|v| v.konst)
                };
                let def = match (dtype, op.is_cmp()) {
                    (DType::F32, false) => Def::Binary(op, a, b),
                    (DType::F32, true) => Def::Cmp(op, a, b),
                    (DType::I32, true) => match (self.defs.get(&a), konst(b), op) {
                        (Some(Def::BoolInt(m)), Some(v @ (0 | 1)), BinaryOp::CmpNe) => {
                            Def::MaskOf(*m, v == 1)
                        }
                        (Some(Def::BoolInt(m)), Some(v @ (0 | 1)), BinaryOp::CmpEq) => {
                            Def::MaskOf(*m, v == 0)
                        }
                        _ => Def::IntCmp(op, a, b),
                    },
                    (DType::U8, true) => match (self.bytes.contains_key(&a), self.u8s.get(&b)) {
                        (true, Some(&v)) => Def::ByteCmp(op, a, v),
                        _ => Def::Other,
                    },
                    _ => Def::Other,
                };
                self.defs.insert(dst, def);
            }
            Inst::Unary {
                dst,
                op: op @ (UnaryOp::Neg | UnaryOp::Exp2 | UnaryOp::Recip),
                dtype: DType::F32,
                a,
            } => {
                self.defs.insert(dst, Def::Unary(op, a));
            }
            Inst::Where {
                dst,
                dtype: DType::F32,
                c,
                a,
                b,
            } => {
                self.defs.insert(dst, Def::Where(c, a, b));
            }
            // `where(m, true, false)` is `m`, and `where(m, false, true)` its negation.
            Inst::Where {
                dst,
                dtype: DType::Bool,
                c,
                a,
                b,
            } => {
                let def = match (self.bools.get(&a), self.bools.get(&b)) {
                    (Some(true), Some(false)) => Def::MaskOf(c, false),
                    (Some(false), Some(true)) => Def::MaskOf(c, true),
                    _ => Def::Other,
                };
                self.defs.insert(dst, def);
            }
            Inst::Cast {
                dst,
                from: DType::Bool,
                to: DType::F32,
                a,
            } => {
                self.defs.insert(dst, Def::FromBool(a));
            }
            Inst::Cast {
                dst,
                from: DType::Bool,
                to: DType::I32,
                a,
            } => {
                self.defs.insert(dst, Def::BoolInt(a));
            }
            Inst::Load {
                dst,
                slot,
                dtype: DType::F32,
                idx,
                gate,
            } => {
                let index = self.int(idx);
                self.defs.insert(
                    dst,
                    Def::Load {
                        slot,
                        dtype: DType::F32,
                        index,
                        reg: idx,
                        offset: 0,
                        gate,
                    },
                );
            }
            Inst::Load {
                dst,
                slot,
                dtype: DType::U8,
                idx,
                gate: None,
            } => {
                self.bytes.insert(dst, (slot, idx));
                self.defs.insert(dst, Def::Other);
            }
            Inst::Cast {
                dst,
                from: DType::U8,
                to: DType::F32,
                a,
            } if self.bytes.contains_key(&a) => {
                let (slot, idx) = self.bytes[&a];
                let index = self.int(idx);
                self.defs.insert(
                    dst,
                    Def::Load {
                        slot,
                        dtype: DType::U8,
                        index,
                        reg: idx,
                        offset: 0,
                        gate: None,
                    },
                );
            }
            Inst::LoadVec {
                dsts,
                slot,
                dtype: DType::F32,
                idx,
            } => {
                for (j, d) in dsts.iter().enumerate() {
                    let mut index = self.int(idx);
                    index.konst += j as i64;
                    let offset = j as i64;
                    let def = Def::Load {
                        slot,
                        dtype: DType::F32,
                        index,
                        reg: idx,
                        offset,
                        gate: None,
                    };
                    self.defs.insert(*d, def);
                }
            }
            _ => {
                for d in defined(inst) {
                    self.defs.insert(d, Def::Other);
                }
            }
        }
    }

    /// `pack` from the top of an expression, with a fresh node budget.
    fn pack_top(&self, lanes: &[Reg]) -> VExpr {
        self.budget.set(PACK_NODES);
        self.memo.borrow_mut().clear();
        self.pack(lanes, 0)
    }

    /// The vector expression whose lane `j` is `lanes[j]`: gathered where the lanes are not
    /// one op over packable operands, or past the depth or node budget (values a scalar
    /// expression shares are packed again at each use: the budget keeps that linear).
    fn pack(&self, lanes: &[Reg], depth: u32) -> VExpr {
        let key = (Lanes::from_slice(lanes), false);
        if let Some(Some(e)) = self.memo.borrow().get(&key) {
            return e.clone();
        }
        let e = self.pack_new(lanes, depth);
        self.memo.borrow_mut().insert(key, Some(e.clone()));
        e
    }

    fn pack_new(&self, lanes: &[Reg], depth: u32) -> VExpr {
        let gather = || VExpr::Gather(lanes.to_vec());
        if lanes.iter().all(|&r| r == lanes[0]) {
            return VExpr::Splat(lanes[0]);
        }
        if depth > PACK_DEPTH || self.budget.get() == 0 {
            return gather();
        }
        self.budget.set(self.budget.get() - 1);
        let defs: Vec<&Def> = lanes
            .iter()
            .map(|r| self.defs.get(r).unwrap_or(&Def::Other))
            .collect();
        match defs[0] {
            Def::Load {
                slot,
                dtype,
                index,
                reg,
                offset,
                gate,
            } => {
                // Lanes one element apart, or (f32) two: a window's columns; gated loads only
                // where one register gates every lane (the vector is loaded or not as a whole).
                let stride = match defs[1] {
                    Def::Load { index: i, .. } => i.konst - index.konst,
                    _ => 0,
                };
                let strided = stride == 1 || (stride == 2 && *dtype == DType::F32);
                let regular = defs.iter().enumerate().all(|(j, d)| match d {
                    Def::Load {
                        slot: s,
                        index: i,
                        gate: g,
                        ..
                    } => {
                        s == slot
                            && g == gate
                            && i.terms == index.terms
                            && i.konst == index.konst + j as i64 * stride
                    }
                    _ => false,
                });
                if !strided || !regular {
                    return gather();
                }
                // Lane 0's own index register: defined before, and in scope at, every step.
                let (slot, dtype, base, offset, gate) = (*slot, *dtype, *reg, *offset, *gate);
                VExpr::Load {
                    slot,
                    dtype,
                    base,
                    offset,
                    stride,
                    gate,
                }
            }
            Def::Binary(op, _, _) => {
                let same = defs
                    .iter()
                    .all(|d| matches!(d, Def::Binary(o, _, _) if o == op));
                let lanewise = matches!(
                    op,
                    BinaryOp::Add | BinaryOp::Mul | BinaryOp::Div | BinaryOp::Max
                );
                if !same || !lanewise {
                    return gather();
                }
                let side = |first: bool| -> Vec<Reg> {
                    defs.iter()
                        .map(|d| match d {
                            Def::Binary(_, a, b) => {
                                if first {
                                    *a
                                } else {
                                    *b
                                }
                            }
                            _ => unreachable!("checked: every lane is this binary op"),
                        })
                        .collect()
                };
                let a = self.pack(&side(true), depth + 1);
                let b = self.pack(&side(false), depth + 1);
                if matches!((&a, &b), (VExpr::Gather(_), VExpr::Gather(_))) {
                    // Two gathers for one vector op: no better than gathering the results.
                    return gather();
                }
                VExpr::Binary(*op, Rc::new(a), Rc::new(b))
            }
            Def::Unary(op, _) => {
                let inner: Option<Vec<Reg>> = defs
                    .iter()
                    .map(|d| match d {
                        Def::Unary(o, a) if o == op => Some(*a),
                        _ => None,
                    })
                    .collect();
                let Some(inner) = inner else { return gather() };
                match (op, self.pack(&inner, depth + 1)) {
                    // A negation of gathered lanes is no better than gathering the results;
                    // an exponential is (one vector polynomial for `width` scalar ones).
                    (UnaryOp::Neg, VExpr::Gather(_)) => gather(),
                    (_, e) => VExpr::Unary(*op, Rc::new(e)),
                }
            }
            Def::Where(..) => {
                let parts: Option<Vec<(Reg, Reg, Reg)>> = defs
                    .iter()
                    .map(|d| match d {
                        Def::Where(c, a, b) => Some((*c, *a, *b)),
                        _ => None,
                    })
                    .collect();
                let Some(parts) = parts else { return gather() };
                let side = |f: fn(&(Reg, Reg, Reg)) -> Reg| parts.iter().map(f).collect::<Vec<_>>();
                let (Some(m), a, b) = (
                    self.pack_mask(&side(|p| p.0), depth + 1),
                    self.pack(&side(|p| p.1), depth + 1),
                    self.pack(&side(|p| p.2), depth + 1),
                ) else {
                    return gather();
                };
                if matches!(a, VExpr::Gather(_)) && matches!(b, VExpr::Gather(_)) {
                    return gather();
                }
                VExpr::Select(Rc::new(m), Rc::new(a), Rc::new(b))
            }
            Def::FromBool(_) => {
                let inner: Option<Vec<Reg>> = defs
                    .iter()
                    .map(|d| match d {
                        Def::FromBool(a) => Some(*a),
                        _ => None,
                    })
                    .collect();
                match inner.and_then(|i| self.pack_mask(&i, depth + 1)) {
                    Some(m) => VExpr::Mask(Rc::new(m)),
                    None => gather(),
                }
            }
            Def::Cmp(..)
            | Def::BoolInt(_)
            | Def::MaskOf(..)
            | Def::ByteCmp(..)
            | Def::IntCmp(..)
            | Def::Other => gather(),
        }
    }

    /// The mask whose lane `j` is bool `lanes[j]`, where every lane is one comparison of f32
    /// operands that pack (not both gathered).
    fn pack_mask(&self, lanes: &[Reg], depth: u32) -> Option<VExpr> {
        let key = (Lanes::from_slice(lanes), true);
        if let Some(e) = self.memo.borrow().get(&key) {
            return e.clone();
        }
        let e = self.pack_mask_new(lanes, depth);
        self.memo.borrow_mut().insert(key, e.clone());
        e
    }

    fn pack_mask_new(&self, lanes: &[Reg], depth: u32) -> Option<VExpr> {
        if lanes.iter().all(|&r| r == lanes[0]) {
            return Some(VExpr::SplatMask(lanes[0]));
        }
        if depth > PACK_DEPTH || self.budget.get() == 0 {
            return None;
        }
        self.budget.set(self.budget.get() - 1);
        let defs: Vec<&Def> = lanes
            .iter()
            .map(|r| self.defs.get(r).unwrap_or(&Def::Other))
            .collect();
        match defs[0] {
            Def::MaskOf(_, negated) => {
                let inner: Vec<Reg> = defs
                    .iter()
                    .map(|d| match d {
                        Def::MaskOf(m, n) if n == negated => Some(*m),
                        _ => None,
                    })
                    .collect::<Option<_>>()?;
                let m = self.pack_mask(&inner, depth + 1)?;
                Some(if *negated { VExpr::Not(Rc::new(m)) } else { m })
            }
            Def::ByteCmp(op, _, v) => {
                let loads: Vec<Reg> = defs
                    .iter()
                    .map(|d| match d {
                        Def::ByteCmp(o, l, w) if o == op && w == v => Some(*l),
                        _ => None,
                    })
                    .collect::<Option<_>>()?;
                // The bytes as f32 lanes (exactly), compared with the constant as f32.
                let a = self.pack_bytes(&loads)?;
                Some(VExpr::Cmp(*op, Rc::new(a), Rc::new(VExpr::Const(*v))))
            }
            Def::IntCmp(op, ..) | Def::Cmp(op, ..) => {
                // Every lane the same comparison, of i32 or of f32 operands: (a, b) per lane.
                let int = matches!(defs[0], Def::IntCmp(..));
                let (a, b): (Vec<Reg>, Vec<Reg>) = defs
                    .iter()
                    .map(|d| match d {
                        Def::IntCmp(o, a, b) if int && o == op => Some((*a, *b)),
                        Def::Cmp(o, a, b) if !int && o == op => Some((*a, *b)),
                        _ => None,
                    })
                    .collect::<Option<Vec<_>>>()?
                    .into_iter()
                    .unzip();
                if int {
                    return Some(VExpr::IntCmp(*op, a, b));
                }
                let (a, b) = (self.pack(&a, depth), self.pack(&b, depth));
                if matches!(a, VExpr::Gather(_)) && matches!(b, VExpr::Gather(_)) {
                    return None;
                }
                Some(VExpr::Cmp(*op, Rc::new(a), Rc::new(b)))
            }
            _ => None,
        }
    }

    /// The u8 loads `lanes` (registers of ungated u8 loads) as one vector load converted to
    /// f32 lanes, where they read consecutive bytes (or one byte, broadcast: converted to f32
    /// as a vector's initializer converts it).
    fn pack_bytes(&self, lanes: &[Reg]) -> Option<VExpr> {
        let (slot, reg) = *self.bytes.get(&lanes[0])?;
        let index = self.int(reg);
        // Each lane's element relative to lane 0's, in one buffer at the same index terms.
        let offsets: Vec<i64> = lanes
            .iter()
            .map(|l| {
                let (s, r) = *self.bytes.get(l)?;
                let i = self.int(r);
                (s == slot && i.terms == index.terms).then_some(i.konst - index.konst)
            })
            .collect::<Option<_>>()?;
        let stride = offsets.get(1).copied().unwrap_or(0);
        if offsets
            .iter()
            .enumerate()
            .any(|(j, &o)| o != stride * j as i64)
        {
            return None;
        }
        match stride {
            // One byte for every lane, broadcast.
            0 => Some(VExpr::Splat(lanes[0])),
            1 => Some(VExpr::Load {
                slot,
                dtype: DType::U8,
                base: reg,
                offset: 0,
                stride: 1,
                gate: None,
            }),
            _ => None,
        }
    }
}

/// The registers an instruction defines.
pub(crate) fn defined(inst: &Inst) -> Vec<Reg> {
    match inst {
        Inst::Const { dst, .. }
        | Inst::Gidx { dst }
        | Inst::Lidx { dst }
        | Inst::Wgid { dst }
        | Inst::Unary { dst, .. }
        | Inst::Binary { dst, .. }
        | Inst::Where { dst, .. }
        | Inst::Cast { dst, .. }
        | Inst::Load { dst, .. }
        | Inst::DefAcc { dst, .. }
        | Inst::Loop { dst, .. }
        | Inst::LoadShared { dst, .. }
        | Inst::SubgroupSum { dst, .. } => vec![*dst],
        Inst::LoadVec { dsts, .. } => dsts.to_vec(),
        _ => vec![],
    }
}

/// How often each register is read by the instructions a dialect emits: all of `k`'s but those
/// in `dropped` (the scalar steps and stores vectors replace).
pub(crate) fn readers(k: &LinearKernel, dropped: &FastSet<usize>) -> FastMap<Reg, i64> {
    let mut readers: FastMap<Reg, i64> = FastMap::default();
    for (i, inst) in k.insts.iter().enumerate() {
        if !dropped.contains(&i) {
            for r in reads(inst) {
                *readers.entry(r).or_default() += 1;
            }
        }
    }
    readers
}

/// The values nothing reads, given `readers` (which this updates): each value instruction
/// whose register has no reader, found last to first so that dropping one frees its operands.
pub(crate) fn unread(k: &LinearKernel, readers: &mut FastMap<Reg, i64>) -> FastSet<usize> {
    let mut dead = FastSet::default();
    for (i, inst) in k.insts.iter().enumerate().rev() {
        if let Inst::Binary { dst, .. }
        | Inst::Unary { dst, .. }
        | Inst::Cast { dst, .. }
        | Inst::Where { dst, .. }
        | Inst::Load { dst, .. } = inst
        {
            if readers.get(dst).copied().unwrap_or(0) <= 0 {
                dead.insert(i);
                for r in reads(inst) {
                    *readers.entry(r).or_default() -= 1;
                }
            }
        }
        // A run of loads none of whose values is read (a vector load replaced them): in
        // WebAssembly a load may trap, so the engine would still run it.
        if let Inst::LoadVec { dsts, idx, .. } = inst {
            if dsts
                .iter()
                .all(|d| readers.get(d).copied().unwrap_or(0) <= 0)
            {
                dead.insert(i);
                *readers.entry(*idx).or_default() -= 1;
            }
        }
    }
    dead
}

/// The registers an instruction reads (an accumulator's own step excluded).
pub(crate) fn reads(inst: &Inst) -> Vec<Reg> {
    match inst {
        Inst::Unary { a, .. } | Inst::Cast { a, .. } | Inst::SubgroupSum { a, .. } => vec![*a],
        Inst::Binary { a, b, .. } => vec![*a, *b],
        Inst::Where { c, a, b, .. } => vec![*c, *a, *b],
        Inst::Load { idx, gate, .. } => std::iter::once(*idx).chain(*gate).collect(),
        Inst::Acc { val, fused, .. } => std::iter::once(*val)
            .chain(fused.iter().flat_map(|&(a, b)| [a, b]))
            .collect(),
        Inst::Store { idx, val, gate, .. } => [*idx, *val].into_iter().chain(*gate).collect(),
        Inst::LoadShared { idx, .. } | Inst::LoadVec { idx, .. } => vec![*idx],
        Inst::StoreShared { idx, val, .. } => vec![*idx, *val],
        Inst::StoreVec { idx, vals, .. } => std::iter::once(*idx).chain(*vals).collect(),
        _ => vec![],
    }
}

/// The most lanes a vector with gathered operands has: a 512-bit vector built from scalars
/// inserts its upper halves across 128-bit lanes, one shuffle at a time, and measured slower
/// than two 256-bit ones (the forward matmuls and row sums of a GPT step, 1.2-2x).
const GATHER_LANES: usize = 8;

/// The packs of `k` for vectors of `width` (and fewer) f32 lanes: runs of f32 sum or max
/// accumulators stepped in one innermost loop body whose steps are one vector expression (not
/// a mere gather).
pub fn packs(k: &LinearKernel, width: usize) -> Vec<Pack> {
    if width < 2 {
        return vec![];
    }
    let an = Analysis::new(k);
    let mut out = vec![];
    // The instructions reading each register.
    let mut readers: FastMap<Reg, Vec<usize>> = FastMap::default();
    for (i, inst) in k.insts.iter().enumerate() {
        for r in reads(inst) {
            readers.entry(r).or_default().push(i);
        }
    }
    // Depth of the loop nest before each instruction, and where each accumulator is defined.
    let mut depth_at = Vec::with_capacity(k.insts.len());
    let mut defacc: FastMap<Reg, usize> = FastMap::default();
    let mut d = 0usize;
    for (i, inst) in k.insts.iter().enumerate() {
        depth_at.push(d);
        match inst {
            Inst::Loop { .. } => d += 1,
            Inst::EndLoop => d -= 1,
            Inst::DefAcc { dst, .. } => {
                defacc.insert(*dst, i);
            }
            _ => {}
        }
    }
    // The f32 sum and max steps of each innermost loop body, in order: (instruction, acc,
    // value).
    let mut bodies: Vec<Vec<(usize, Reg, Reg)>> = vec![];
    let mut cur: Option<Vec<(usize, Reg, Reg)>> = None;
    for (i, inst) in k.insts.iter().enumerate() {
        match inst {
            Inst::Loop { .. } => cur = Some(vec![]),
            Inst::EndLoop => bodies.extend(cur.take()),
            Inst::Acc {
                acc,
                dtype: DType::F32,
                val,
                ..
            } => {
                if let Some(c) = cur.as_mut() {
                    c.push((i, *acc, *val));
                }
            }
            _ => {}
        }
    }
    // Full vectors of contiguous terms first (at each width above `GATHER_LANES`, then at
    // it), then full ones with gathered operands, then half-width vectors of what is left:
    // four lanes, or three and a spare one whose loads read up to one element past the last
    // real lane's (three for every other element; into the slack every host buffer has:
    // `runtime::HOST_SLACK`), so the short rows of an upcast (11 = 8 + 3) are vectors too;
    // and last, half-width ones with gathered operands where they take an exponential (one
    // vector polynomial in place of four).
    let mut passes = vec![];
    let mut w = width;
    while w > GATHER_LANES {
        passes.push((w, w, Gathers::No));
        w /= 2;
    }
    let half = w / 2;
    passes.extend([
        (w, w, Gathers::No),
        (w, w, Gathers::Any),
        (half, half, Gathers::No),
        (half, half.saturating_sub(1), Gathers::No),
        (half, half, Gathers::WithExp2),
    ]);
    let memo = RefCell::new(FastMap::default());
    let ends = RefCell::new(FastMap::default());
    let ctx = (&an, &readers, &defacc, depth_at.as_slice(), &memo, &ends);
    for steps in bodies {
        let mut used = vec![false; steps.len()];
        for &(w, real, gathers) in &passes {
            if real < 2 {
                continue;
            }
            // Lanes are the steps `s, s + t, s + 2t, …`: an upcast along an outer axis of
            // several interleaves its lanes with the inner axes' (t = 1 first, then wider).
            // Gathered lanes go widest stride first: lanes along the outermost upcast axis
            // gather one operand that every pack of the inner axes shares (built once).
            let strides: Vec<usize> = if gathers != Gathers::No {
                (1..=steps.len() / real).rev().collect()
            } else {
                (1..=steps.len() / real).collect()
            };
            for t in strides {
                for s in 0..steps.len() {
                    if (0..real).any(|j| s + j * t >= steps.len() || used[s + j * t]) {
                        continue;
                    }
                    let lanes: Vec<usize> = (0..real).map(|j| s + j * t).collect();
                    let run: Vec<(usize, Reg, Reg)> = lanes.iter().map(|&l| steps[l]).collect();
                    if let Some(p) = pack_run(k, ctx, &run, w, gathers) {
                        out.push(p);
                        for l in lanes {
                            used[l] = true;
                        }
                    }
                }
            }
        }
    }
    out
}

/// A run of f32 stores to consecutive elements of one buffer whose values are one vector
/// expression (a reduce's epilogue over an upcast's outputs: its loads, arithmetic and
/// exponentials once per vector): one vector store in place of the scalar ones.
#[derive(Clone, Debug, PartialEq)]
pub struct StorePack {
    /// The buffer slot stored to.
    pub slot: u32,
    /// The register holding lane 0's index, less `offset`.
    pub base: Reg,
    /// Added to `base` for lane 0.
    pub offset: i64,
    /// Lanes (all real).
    pub width: usize,
    /// The stored values.
    pub expr: VExpr,
    /// The store instructions it replaces (whole: a `StoreVec`'s four lanes are all in it).
    pub insts: Vec<usize>,
    /// The last of them, in whose place the vector store is emitted.
    pub at: usize,
}

/// The store packs of `k` for vectors of `width` f32 lanes, then fewer: runs of ungated
/// stores at consecutive indices of one buffer, in one straight stretch of instructions (no
/// loop bound, barrier or load of that buffer between them), whose values pack into more than
/// a gather.
pub fn store_packs(k: &LinearKernel, width: usize) -> Vec<StorePack> {
    if width < 2 {
        return vec![];
    }
    let an = Analysis::new(k);
    // Every stored lane: (instruction, slot, index, base register, offset, value).
    let mut lanes: Vec<(usize, u32, Affine, Reg, i64, Reg)> = vec![];
    for (i, inst) in k.insts.iter().enumerate() {
        match *inst {
            Inst::Store {
                slot,
                dtype: DType::F32,
                idx,
                val,
                gate: None,
            } => lanes.push((i, slot, an.int(idx), idx, 0, val)),
            Inst::StoreVec {
                slot,
                dtype: DType::F32,
                idx,
                vals,
            } => {
                for (j, &v) in vals.iter().enumerate() {
                    let mut index = an.int(idx);
                    index.konst += j as i64;
                    lanes.push((i, slot, index, idx, j as i64, v));
                }
            }
            _ => {}
        }
    }
    // Whether instructions `a..=b` are one straight stretch that never reads `slot`.
    let straight = |a: usize, b: usize, slot: u32| {
        k.insts[a..=b].iter().all(|inst| match inst {
            Inst::Loop { .. } | Inst::EndLoop | Inst::Barrier => false,
            Inst::Load { slot: s, .. } | Inst::LoadVec { slot: s, .. } => *s != slot,
            _ => true,
        })
    };
    let mut used = vec![false; lanes.len()];
    let mut out = vec![];
    // The lanes at each (slot, constant part of the index), in order: a run's next lane is
    // looked up, not searched for among all (a tile of 128 outputs has 128 lanes).
    let mut at_konst: FastMap<(u32, i64), Vec<usize>> = FastMap::default();
    for (l, lane) in lanes.iter().enumerate() {
        at_konst.entry((lane.1, lane.2.konst)).or_default().push(l);
    }
    // Each width from `width` down to half of `GATHER_LANES` (or of `width`, if less).
    let widths = std::iter::successors(Some(width), |&w| Some(w / 2))
        .take_while(|&w| w >= 2 && w >= width.min(GATHER_LANES) / 2);
    for w in widths {
        for s in 0..lanes.len() {
            let (_, slot, ref index, base, offset, _) = lanes[s];
            if used[s] {
                continue;
            }
            let mut run = vec![s];
            for j in 1..w as i64 {
                let next = at_konst.get(&(slot, index.konst + j)).and_then(|ls| {
                    ls.iter()
                        .copied()
                        .find(|&l| !used[l] && lanes[l].2.terms == index.terms)
                });
                match next {
                    Some(l) => run.push(l),
                    None => break,
                }
            }
            if run.len() < w {
                continue;
            }
            let mut insts: Vec<usize> = run.iter().map(|&l| lanes[l].0).collect();
            insts.sort_unstable();
            insts.dedup();
            let (first, at) = (insts[0], insts[insts.len() - 1]);
            // A store instruction is replaced whole or not at all.
            let whole = insts.iter().all(|&i| {
                lanes
                    .iter()
                    .enumerate()
                    .filter(|(_, l)| l.0 == i)
                    .all(|(n, _)| run.contains(&n))
            });
            if !whole || !straight(first, at, slot) {
                continue;
            }
            let vals: Vec<Reg> = run.iter().map(|&l| lanes[l].5).collect();
            let expr = an.pack_top(&vals);
            // A gather of f32 loads is a tile of a transpose (each lane from another row of the
            // input): one vector store of lanes inserted from the loads beats a scattered
            // store per lane (a 1024x1024 transpose in 8x8 tiles: 1.0 ms, 5-7 ms in rows of
            // scalar stores). Any other gather is scalar work either way.
            let loads = |regs: &[Reg]| {
                w <= GATHER_LANES
                    && regs.iter().all(|r| {
                        matches!(
                            an.defs.get(r),
                            Some(Def::Load {
                                dtype: DType::F32,
                                gate: None,
                                ..
                            })
                        )
                    })
            };
            match &expr {
                VExpr::Splat(_) => continue,
                VExpr::Gather(regs) if !loads(regs) => continue,
                _ => {}
            }
            for &l in &run {
                used[l] = true;
            }
            out.push(StorePack {
                slot,
                base,
                offset,
                width: w,
                expr,
                insts,
                at,
            });
        }
    }
    out
}

/// How the lanes of `packs`' vector accumulators are stored, where they are stored as they are
/// (no epilogue): for each store instruction writing such lanes, whether every lane it writes
/// lies next to the one its neighbouring lane in the vector writes. Lanes stored in order to
/// consecutive elements are written back as vector stores by the C compiler (GCC's SLP
/// vectorizer); lanes along another axis of the output (a weight gradient vectorized along its
/// rows) are transposed through shuffles first.
pub fn acc_lane_stores(k: &LinearKernel, packs: &[Pack]) -> FastMap<usize, bool> {
    let an = Analysis::new(k);
    let lane_of: FastMap<Reg, (usize, usize)> = packs
        .iter()
        .enumerate()
        .flat_map(|(p, pack)| pack.accs.iter().enumerate().map(move |(j, &r)| (r, (p, j))))
        .collect();
    // (pack, lane) -> (store instruction, slot, index).
    let mut stored: FastMap<(usize, usize), (usize, u32, Affine)> = FastMap::default();
    for (i, inst) in k.insts.iter().enumerate() {
        let (slot, idx, vals) = match inst {
            Inst::Store {
                slot,
                idx,
                val,
                gate: None,
                ..
            } => (*slot, *idx, std::slice::from_ref(val)),
            Inst::StoreVec {
                slot, idx, vals, ..
            } => (*slot, *idx, &vals[..]),
            _ => continue,
        };
        for (j, v) in vals.iter().enumerate() {
            if let Some(&lane) = lane_of.get(v) {
                let mut index = an.int(idx);
                index.konst += j as i64;
                stored.insert(lane, (i, slot, index));
            }
        }
    }
    let mut out: FastMap<usize, bool> = FastMap::default();
    for (&(p, j), st) in &stored {
        let beside = |l: Option<usize>, d: i64| {
            l.and_then(|l| stored.get(&(p, l))).is_some_and(|o| {
                o.1 == st.1 && o.2.terms == st.2.terms && o.2.konst == st.2.konst + d
            })
        };
        let in_order = beside(j.checked_add(1), 1) || beside(j.checked_sub(1), -1);
        *out.entry(st.0).or_insert(true) &= in_order;
    }
    out
}

/// What `pack_run` consults: the analysis, each register's readers, each accumulator's
/// definition, the loop depth before each instruction, and the expressions packed so far for
/// runs of values.
type Ctx<'a> = (
    &'a Analysis,
    &'a FastMap<Reg, Vec<usize>>,
    &'a FastMap<Reg, usize>,
    &'a [usize],
    &'a RefCell<FastMap<Lanes, VExpr>>,
    &'a RefCell<FastMap<(usize, usize), Option<usize>>>,
);

fn pack_run(
    k: &LinearKernel,
    (an, readers, defacc, depth_at, memo, ends): Ctx,
    run: &[(usize, Reg, Reg)],
    width: usize,
    gathers: Gathers,
) -> Option<Pack> {
    let accs: Vec<Reg> = run.iter().map(|r| r.1).collect();
    let starts: Vec<usize> = accs
        .iter()
        .map(|a| defacc.get(a).copied())
        .collect::<Option<_>>()?;
    let depth = depth_at[starts[0]];
    if starts.iter().any(|&s| depth_at[s] != depth) {
        return None;
    }
    let at = run.iter().map(|r| r.0).max()?;
    // The loop nest ends where the depth falls back to the accumulators' own (found once for
    // each last step: the passes of `packs` try thousands of runs of a large upcast).
    let end = (*ends.borrow_mut().entry((at, depth)).or_insert_with(|| {
        (at..k.insts.len())
            .find(|&i| matches!(k.insts[i], Inst::EndLoop) && depth_at[i] == depth + 1)
    }))?;
    // Nothing but its own step may read an accumulator inside the loop.
    let first = *starts.iter().min()?;
    let steps: Vec<usize> = run.iter().map(|r| r.0).collect();
    let touched = accs.iter().any(|a| {
        readers.get(a).is_some_and(|rs| {
            rs.iter()
                .any(|i| (first..=end).contains(i) && !steps.contains(i))
        })
    });
    if touched {
        return None;
    }
    // Every step of one kind: sums or maxes, fused multiply-adds or not.
    let kind = |i: usize| match k.insts[i] {
        Inst::Acc { op, fused, .. } => Some((op, fused.is_some())),
        _ => None,
    };
    let (op, fused) = kind(steps[0])?;
    if steps.iter().any(|&i| kind(i) != Some((op, fused))) {
        return None;
    }
    let vals: Lanes = run.iter().map(|r| r.2).collect();
    // The passes of `packs` try one run of values at several widths of gathers: packed once.
    let expr = memo
        .borrow_mut()
        .entry(vals)
        .or_insert_with_key(|vals| an.pack_top(vals))
        .clone();
    // Fused steps stay fused as a vector: the sum of a gathered or broadcast product would
    // round it first.
    let as_steps = !fused || matches!(expr, VExpr::Binary(BinaryOp::Mul, ..));
    // A gathered sum is no faster than the scalar steps.
    let gathers_ok = match gathers {
        Gathers::No => !has_gather(&expr),
        Gathers::Any => true,
        Gathers::WithExp2 => has_exp2(&expr),
    };
    let ok = !matches!(expr, VExpr::Gather(_)) && gathers_ok && as_steps;
    ok.then_some(Pack {
        accs,
        steps,
        width,
        expr,
        op,
        fused,
        at,
        end,
    })
}

fn has_gather(e: &VExpr) -> bool {
    matches!(e, VExpr::Gather(_)) || e.children().into_iter().any(has_gather)
}

/// Whether `e` takes an exponential.
pub fn has_exp2(e: &VExpr) -> bool {
    matches!(e, VExpr::Unary(UnaryOp::Exp2, _)) || e.children().into_iter().any(has_exp2)
}

/// Which packs a pass of `packs` may form with gathered operands.
#[derive(Clone, Copy, PartialEq)]
enum Gathers {
    No,
    Any,
    /// Only those that take an exponential.
    WithExp2,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codegen::linearize::{linearize, BufArg};
    use crate::codegen::lower::{Effect, Lowered};
    use crate::kernel::KGraph;

    /// `out[8i + j] = sum_r x[64r + j * lane] * y[r]` for j in 0..8, as an upcast of 8
    /// lowers it: one accumulator per j.
    fn kernel(lane: i64) -> LinearKernel {
        kernel_of(lane, 8)
    }

    /// The same with `n` outputs per invocation.
    fn kernel_of(lane: i64, n: i64) -> LinearKernel {
        kernel_with(lane, n, DType::F32)
    }

    /// The same with `x` of `xdt` (u8: cast to f32 after the load, as an image's pixels are).
    fn kernel_with(lane: i64, n: i64, xdt: DType) -> LinearKernel {
        let mut g = KGraph::new();
        let i = g.gidx(4);
        let r = g.range(16);
        let yes = g.bool_const(true);
        let stride = g.int(64);
        let row = g.mul(r, stride);
        let y = g.load(2, DType::F32, r, yes);
        let eight = g.int(8);
        let base = g.mul(i, eight);
        let mut effects = vec![];
        for j in 0..n {
            let off = g.int(j * lane);
            let at = g.add(row, off);
            let mut x = g.load(1, xdt, at, yes);
            if xdt != DType::F32 {
                x = g.cast(x, DType::F32);
            }
            let p = g.mul(x, y);
            let s = g.reduce(ReduceOp::Sum, p, &[r]);
            let oj = g.int(j);
            let idx = g.add(base, oj);
            effects.push(Effect::Store {
                slot: 0,
                idx,
                val: s,
                gate: None,
            });
        }
        linearized(g, effects, xdt)
    }

    /// The kernel of `g` and `effects` over 4 invocations: writes f32 buffer 0, reads buffer 1
    /// of `xdt` and f32 buffer 2.
    fn linearized(g: KGraph, effects: Vec<Effect>, xdt: DType) -> LinearKernel {
        let l = Lowered {
            graph: g,
            effects,
            global_size: 4,
            local_size: 1,
            shared: vec![],
        };
        let buf = |dtype, writes| BufArg { dtype, writes };
        let bufs = vec![
            buf(DType::F32, true),
            buf(xdt, false),
            buf(DType::F32, false),
        ];
        linearize(&l, bufs, "k")
    }

    #[test]
    fn contiguous_loads_times_a_shared_value_become_one_vector_step() {
        let k = kernel(1);
        let p = packs(&k, 8);
        assert_eq!(p.len(), 1, "{k}");
        let VExpr::Binary(BinaryOp::Mul, a, b) = &p[0].expr else {
            panic!("{:?}", p[0].expr)
        };
        assert!(matches!(**a, VExpr::Load { slot: 1, .. }), "{a:?}");
        assert!(matches!(**b, VExpr::Splat(_)), "{b:?}");
        assert_eq!(p[0].accs.len(), 8);
        // The vector is written back after the loop, before the stores read it.
        assert!(matches!(k.insts[p[0].end], Inst::EndLoop));
        let src = crate::codegen::c::render_c(&k);
        assert!(src.contains("vacc") && src.contains("ld8(b1 + "), "{src}");
    }

    /// `out[8i + j] = (8i + j < edge ? x[8i + j] : 0)`, j in 0..8, each lane's gate built as
    /// the lowering builds a padded view's: the rewrite rules make it `i < 2` for every lane
    /// of the row at edge 16, and leave two conditions at 13 (an edge inside the row).
    fn padded_row(edge: i64) -> LinearKernel {
        let mut g = KGraph::new();
        let i = g.gidx(4);
        let eight = g.int(8);
        let base = g.mul(i, eight);
        let e = g.int(edge);
        let mut effects = vec![];
        for j in 0..8 {
            let oj = g.int(j);
            let idx = g.add(base, oj);
            let gate = g.lt(idx, e);
            let x = g.load(1, DType::F32, idx, gate);
            effects.push(Effect::Store {
                slot: 0,
                idx,
                val: x,
                gate: None,
            });
        }
        linearized(g, effects, DType::F32)
    }

    #[test]
    fn a_row_of_loads_under_one_gate_is_one_gated_vector_load() {
        let k = padded_row(16);
        let p = store_packs(&k, 8);
        assert_eq!(p.len(), 1, "{k}");
        assert_eq!(p[0].width, 8);
        assert!(
            matches!(
                p[0].expr,
                VExpr::Load {
                    gate: Some(_),
                    stride: 1,
                    ..
                }
            ),
            "{:?}",
            p[0].expr
        );
        let src = crate::codegen::c::render_c(&k);
        assert!(src.contains(" ? ld8(b1 + "), "{src}");
        // An edge inside the row: lanes 0-4 are `i < 2`, lanes 5-7 `i < 1`. No vector spans
        // both; the first four lanes (a 4-lane store of the lowering) share one gate.
        let k = padded_row(13);
        let p = store_packs(&k, 8);
        assert!(p.iter().all(|p| p.width <= 4), "{p:?}");
        assert!(
            p.iter()
                .any(|p| p.offset == 0 && matches!(p.expr, VExpr::Load { gate: Some(_), .. })),
            "{p:?}"
        );
    }

    #[test]
    fn strided_loads_are_gathered_and_a_gathered_sum_is_left_scalar() {
        // x strided by 3: gathered, but the product with the shared y[r] is one vector op.
        let p = packs(&kernel(3), 8);
        assert_eq!(p.len(), 1);
        assert!(
            matches!(&p[0].expr, VExpr::Binary(_, a, _) if matches!(**a, VExpr::Gather(_))),
            "{:?}",
            p[0].expr
        );
        // Without vector types nothing is packed.
        assert!(packs(&kernel(1), 1).is_empty());
    }

    #[test]
    fn a_short_run_is_a_half_width_vector_with_a_spare_lane() {
        // 11 outputs (an upcast of a whole axis of 11): 8 lanes, then 3 in a vector of 4.
        let k = kernel_of(1, 11);
        let p = packs(&k, 8);
        let shape: Vec<(usize, usize)> = p.iter().map(|p| (p.width, p.accs.len())).collect();
        assert_eq!(shape, [(8, 8), (4, 3)], "{k}");
        let src = crate::codegen::c::render_c(&k);
        assert!(src.contains("ld4(b1 + "), "{src}");
        // Strided terms: no gathered half-width vector.
        let p = packs(&kernel_of(3, 11), 8);
        assert!(p.iter().all(|p| p.width == 8), "{p:?}");
    }

    #[test]
    fn contiguous_bytes_cast_to_f32_are_one_vector_load() {
        // u8 pixels: the cast lanes pack as one load of 8 bytes converted together.
        let k = kernel_with(1, 8, DType::U8);
        let p = packs(&k, 8);
        assert_eq!(p.len(), 1, "{k}");
        let VExpr::Binary(BinaryOp::Mul, a, _) = &p[0].expr else {
            panic!("{:?}", p[0].expr)
        };
        assert!(
            matches!(
                **a,
                VExpr::Load {
                    slot: 1,
                    dtype: DType::U8,
                    ..
                }
            ),
            "{a:?}"
        );
        let src = crate::codegen::c::render_c(&k);
        assert!(src.contains("ldb8(b1 + "), "{src}");
        // Strided bytes are gathered lane by lane, each cast as a scalar.
        let p = packs(&kernel_with(3, 8, DType::U8), 8);
        assert!(
            matches!(&p[0].expr, VExpr::Binary(_, a, _) if matches!(**a, VExpr::Gather(_))),
            "{:?}",
            p[0].expr
        );
    }

    /// `out[16i + 8c + j] = sum_r x[64r + j] * y[2r + c]` for c in 0..2, j in 0..8: two packs
    /// that read the same eight elements of x.
    fn two_channels() -> LinearKernel {
        let mut g = KGraph::new();
        let i = g.gidx(4);
        let r = g.range(16);
        let yes = g.bool_const(true);
        let (stride, two, sixteen) = (g.int(64), g.int(2), g.int(16));
        let row = g.mul(r, stride);
        let yrow = g.mul(r, two);
        let base = g.mul(i, sixteen);
        let mut effects = vec![];
        for c in 0..2 {
            let ci = g.int(c);
            let yat = g.add(yrow, ci);
            let y = g.load(2, DType::F32, yat, yes);
            for j in 0..8 {
                let off = g.int(j);
                let at = g.add(row, off);
                let x = g.load(1, DType::F32, at, yes);
                let p = g.mul(x, y);
                let s = g.reduce(ReduceOp::Sum, p, &[r]);
                let o = g.int(8 * c + j);
                let idx = g.add(base, o);
                effects.push(Effect::Store {
                    slot: 0,
                    idx,
                    val: s,
                    gate: None,
                });
            }
        }
        linearized(g, effects, DType::F32)
    }

    #[test]
    fn a_vector_load_two_packs_read_is_made_once_and_pinned() {
        let k = two_channels();
        assert_eq!(packs(&k, 8).len(), 2, "{k}");
        let src = crate::codegen::c::render_c(&k);
        assert_eq!(src.matches("ld8(b1 + ").count(), 1, "{src}");
        assert!(src.contains("PIN(vl0);"), "{src}");
        // Each pack steps as one fused multiply-add of the shared load and its broadcast y.
        assert_eq!(src.matches("= fma8(vl0, ((v8f){").count(), 2, "{src}");
    }

    #[test]
    fn wide_vectors_take_contiguous_runs_and_gathers_stay_at_eight_lanes() {
        // 16 lanes (AVX-512): 16 contiguous outputs are one vector, 27 are 16 + 8 + 3.
        let widths =
            |k: &LinearKernel| -> Vec<usize> { packs(k, 16).iter().map(|p| p.width).collect() };
        assert_eq!(widths(&kernel_of(1, 16)), [16]);
        assert_eq!(widths(&kernel_of(1, 27)), [16, 8, 4]);
        // Strided terms are gathered 8 lanes at a time (a 512-bit gather costs more than two).
        assert_eq!(widths(&kernel_of(3, 16)), [8, 8]);
        let k = kernel_of(1, 16);
        let src = crate::codegen::render::render(&k, &crate::codegen::c::CRenderer { lanes: 16 });
        assert!(
            src.contains("ld16(b1 + ") && src.contains("fma16("),
            "{src}"
        );
    }
}

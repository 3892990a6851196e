//! Linearize: order a lowered kernel graph into a flat instruction list with explicit reduce
//! loops. Work that does not depend on a loop's range is emitted before the loop. Phases of a
//! kernel with workgroup memory are separated by `Barrier`s, and nothing computed before a
//! barrier is used after it (each phase recomputes what it needs), so a renderer without real
//! workgroups (C) can run each phase as a loop over the workgroup's invocations. This list is
//! what the renderers print and what the interpreter executes.
//!
//! Four loads (or stores) of one buffer at consecutive indices whose first is a multiple of 4
//! (provably: every term of the index has a coefficient divisible by 4) become one vector
//! access, `LoadVec` / `StoreVec`: an upcast along a contiguous axis produces them. Renderers
//! with vector types use them (WGSL `vec4`); the others spell four scalar accesses.
//!
//! A reduce step that adds an f32 product to an f32 sum is a fused multiply-add (`Acc` with
//! `fused`: rounded once), in the interpreter and in every dialect, as a matmul's or a
//! convolution's inner step is in PyTorch's and cuBLAS's kernels; every other multiply and add
//! rounds on its own.

use super::lower::{Effect, Lowered};
use crate::dtype::DType;
use crate::kernel::{FastMap, FastSet};
use crate::kernel::{KGraph, KOp, Ref};
use crate::ops::{exec_binary, exec_unary, BinaryOp, ReduceOp, UnaryOp};

/// A register: each instruction that defines one writes a new number (SSA), except
/// accumulators, which reduce steps update.
pub type Reg = u32;

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
/// One instruction of a linear kernel. Registers are defined before use.
pub enum Inst {
    /// `dst = ` a constant.
    Const {
        /// The register defined.
        dst: Reg,
        /// The value, as the bits of an f64.
        bits: u64,
        /// Its dtype.
        dtype: DType,
    },
    /// `dst = ` the invocation's global index.
    Gidx {
        /// The register defined.
        dst: Reg,
    },
    /// The invocation's index within its workgroup.
    Lidx {
        /// The register defined.
        dst: Reg,
    },
    /// The workgroup's index.
    Wgid {
        /// The register defined.
        dst: Reg,
    },
    /// `dst = op a`.
    Unary {
        /// The register defined.
        dst: Reg,
        /// The op.
        op: UnaryOp,
        /// The dtype of `a` and of the result.
        dtype: DType,
        /// The operand.
        a: Reg,
    },
    /// `dtype` is the operands' dtype (comparisons produce bool).
    Binary {
        /// The register defined.
        dst: Reg,
        /// The op.
        op: BinaryOp,
        /// The operands' dtype.
        dtype: DType,
        /// The first operand.
        a: Reg,
        /// The second operand.
        b: Reg,
    },
    /// `dst = c ? a : b`.
    Where {
        /// The register defined.
        dst: Reg,
        /// The dtype of `a`, `b` and the result.
        dtype: DType,
        /// The condition (`Bool`).
        c: Reg,
        /// The value where `c` holds.
        a: Reg,
        /// The value elsewhere.
        b: Reg,
    },
    /// `dst = a` converted from `from` to `to`.
    Cast {
        /// The register defined.
        dst: Reg,
        /// The dtype of `a`.
        from: DType,
        /// The dtype of the result.
        to: DType,
        /// The operand.
        a: Reg,
    },
    /// `dst = buffer[idx]`, or 0 where `gate` is false.
    Load {
        /// The register defined.
        dst: Reg,
        /// The buffer slot.
        slot: u32,
        /// Its element dtype.
        dtype: DType,
        /// The element index.
        idx: Reg,
        /// Read only where this holds.
        gate: Option<Reg>,
    },
    /// Declare accumulator `dst`, set to `op`'s identity.
    DefAcc {
        /// The accumulator.
        dst: Reg,
        /// The reduce it accumulates.
        op: ReduceOp,
        /// Its dtype.
        dtype: DType,
    },
    /// Open a loop: `dst` runs over `0..size` until the matching `EndLoop`.
    Loop {
        /// The loop variable.
        dst: Reg,
        /// The trip count.
        size: u32,
    },
    /// Close the innermost open loop.
    EndLoop,
    /// One step of a reduce: `acc = acc (op) val`. Where `val` is an f32 product summed into an
    /// f32 accumulator, `fused` holds its factors and the step is one fused multiply-add
    /// (`acc + a * b` rounded once), on every backend and in the interpreter alike: a
    /// convolution's or matmul's inner step is then one instruction where the hardware has it.
    Acc {
        /// The accumulator updated.
        acc: Reg,
        /// The reduce.
        op: ReduceOp,
        /// The accumulator's dtype.
        dtype: DType,
        /// The value folded in.
        val: Reg,
        /// The factors of `val`, when the step is a fused multiply-add.
        fused: Option<(Reg, Reg)>,
    },
    /// A store into a global buffer, skipped where `gate` is false.
    Store {
        /// The buffer slot.
        slot: u32,
        /// Its element dtype.
        dtype: DType,
        /// The element index.
        idx: Reg,
        /// The value stored.
        val: Reg,
        /// Store only where this holds.
        gate: Option<Reg>,
    },
    /// `dst = shared[idx]` of workgroup array `id`.
    LoadShared {
        /// The register defined.
        dst: Reg,
        /// The workgroup array.
        id: u32,
        /// Its element dtype.
        dtype: DType,
        /// The element index.
        idx: Reg,
    },
    /// `shared[idx] = val` of workgroup array `id`.
    StoreShared {
        /// The workgroup array.
        id: u32,
        /// Its element dtype.
        dtype: DType,
        /// The element index.
        idx: Reg,
        /// The value stored.
        val: Reg,
    },
    /// Every invocation of the workgroup gets here before any goes on; workgroup memory
    /// written before is visible after.
    Barrier,
    /// `dst` = the sum of `a` over the `size` invocations of this one's subgroup (consecutive
    /// local indices), in each of them. Reached by every invocation of the workgroup.
    SubgroupSum {
        /// The register defined.
        dst: Reg,
        /// The dtype of `a` and of the result (f32, i32 or u32 as computed).
        dtype: DType,
        /// The subgroup size.
        size: u32,
        /// The value summed.
        a: Reg,
    },
    /// `dsts[j] = buffer[idx + j]` for j in 0..4; `idx` is a multiple of 4.
    LoadVec {
        /// The four registers defined.
        dsts: [Reg; 4],
        /// The buffer slot.
        slot: u32,
        /// Its element dtype.
        dtype: DType,
        /// The first element's index.
        idx: Reg,
    },
    /// `buffer[idx + j] = vals[j]` for j in 0..4; `idx` is a multiple of 4.
    StoreVec {
        /// The buffer slot.
        slot: u32,
        /// Its element dtype.
        dtype: DType,
        /// The first element's index.
        idx: Reg,
        /// The four values stored.
        vals: [Reg; 4],
    },
}

/// Whether a dtype has vector loads and stores (the 4-byte ones).
pub fn vectorizable(dt: DType) -> bool {
    matches!(dt, DType::F32 | DType::I32 | DType::U32)
}

/// An index as (slot-independent) terms and a constant, when every term's coefficient is a
/// multiple of 4: then `konst % 4` is the index's position within its aligned group of 4.
fn aligned_terms(g: &KGraph, idx: Ref) -> Option<(Vec<(Ref, i64)>, i64)> {
    let (mut ts, mut k) = (vec![], 0i64);
    crate::kernel::rewrite::terms(g, idx, 1, &mut ts, &mut k);
    if ts.iter().any(|&(_, c)| c % 4 != 0) {
        return None;
    }
    ts.sort();
    Some((ts, k))
}

/// An index's terms: (node, coefficient), sorted.
type Terms = Vec<(Ref, i64)>;

type VecKey = (u32, DType, Terms, i64);

/// Ungated loads of vectorizable dtypes, by (slot, dtype, aligned terms, constant).
fn vector_candidates(g: &KGraph) -> FastMap<VecKey, Ref> {
    let mut m = FastMap::default();
    for (i, n) in g.nodes.iter().enumerate() {
        let KOp::Load(slot) = n.op else { continue };
        if !vectorizable(n.dtype) || g.const_value(n.src[1]) != Some(1.0) {
            continue;
        }
        if let Some((ts, k)) = aligned_terms(g, n.src[0]) {
            m.insert((slot, n.dtype, ts, k), i as Ref);
        }
    }
    m
}

/// A small test kernel: `out[i] = sum_r in[i*4 + r]` over an f16 input, 3 outputs, with
/// `local_size` invocations per workgroup (the dialects' tests render it).
#[cfg(test)]
pub(crate) fn f16_row_sums(local_size: usize) -> LinearKernel {
    let mut g = KGraph::new();
    let i = g.gidx(3);
    let r = g.range(4);
    let four = g.int(4);
    let base = g.mul(i, four);
    let idx = g.add(base, r);
    let yes = g.bool_const(true);
    let v = g.load(1, DType::F16, idx, yes);
    let s = g.reduce(ReduceOp::Sum, v, &[r]);
    let l = Lowered {
        graph: g,
        effects: vec![Effect::Store {
            slot: 0,
            idx: i,
            val: s,
            gate: None,
        }],
        global_size: 3,
        local_size,
        shared: vec![],
    };
    let bufs = vec![
        BufArg {
            dtype: DType::F32,
            writes: true,
        },
        BufArg {
            dtype: DType::F16,
            writes: false,
        },
    ];
    linearize(&l, bufs, "r_3")
}

/// A buffer argument of a kernel: element dtype and whether the kernel writes it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct BufArg {
    /// Element dtype.
    pub dtype: DType,
    /// Whether the kernel writes it (slot 0 always does).
    pub writes: bool,
}

/// A kernel ready to render or interpret.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct LinearKernel {
    /// The kernel's name, as tinygrad spells it: `r_` (with a reduce) or `E_` (elementwise) and
    /// the output shape (`r_128_10`); renderers print it and `DEBUG=2` shows it.
    pub name: String,
    /// The instructions, in order.
    pub insts: Vec<Inst>,
    /// Per buffer slot, its dtype and whether it is written.
    pub bufs: Vec<BufArg>,
    /// Invocations launched.
    pub global_size: usize,
    /// Invocations per workgroup; 1 for a flat kernel, whose workgroup size the renderer picks.
    pub local_size: usize,
    /// Workgroup arrays: (dtype, elements).
    pub shared: Vec<(DType, usize)>,
    /// Registers used (`Reg`s are below this).
    pub nregs: usize,
}

impl LinearKernel {
    /// Whether the kernel stores, loads or casts to values of `dt` (a dialect includes that
    /// dtype's conversions, or enables its type, only then).
    pub fn uses_dtype(&self, dt: DType) -> bool {
        self.bufs.iter().any(|b| b.dtype == dt)
            || self
                .insts
                .iter()
                .any(|i| matches!(i, Inst::Cast { to, .. } if *to == dt))
    }
    /// Loop iterations one invocation runs: for every innermost loop, the product of its trip
    /// count and those of the loops around it, summed over the kernel. (A kernel's serial depth:
    /// a GPU hides little of it, however many invocations run in parallel.)
    pub fn loop_iterations(&self) -> u64 {
        let mut mult = vec![1u64];
        let (mut total, mut innermost) = (0u64, false);
        for i in &self.insts {
            match i {
                Inst::Loop { size, .. } => {
                    let m = *mult.last().unwrap_or(&1) * *size as u64;
                    mult.push(m);
                    innermost = true;
                }
                Inst::EndLoop => {
                    if innermost {
                        total += *mult.last().unwrap_or(&1);
                    }
                    innermost = false;
                    mult.pop();
                }
                _ => {}
            }
        }
        total
    }
    /// Elements one invocation reads from global buffers per fused multiply-add, loop bodies
    /// counted by their trip counts (a vector load reads four): how much a matmul's or a
    /// convolution's operands are reused from registers and workgroup memory. (1/2 for 4x4
    /// outputs per invocation; a tile staged in workgroup memory divides it by the workgroup's
    /// share.) Infinite for a kernel without multiply-adds.
    ///
    /// A load whose gate follows from the invocation's place in its workgroup alone (a staged
    /// tile's last round, which only the invocations still inside the tile load) counts for
    /// the share of invocations it holds for: the others read nothing (CUDA) or one address
    /// the whole warp shares (WGSL's `select` reads element 0).
    pub fn global_loads_per_fma(&self) -> f64 {
        // Where the registers an index-and-constant gate may use are defined.
        let def: FastMap<Reg, usize> = self
            .insts
            .iter()
            .enumerate()
            .filter_map(|(p, i)| match i {
                Inst::Const { dst, .. }
                | Inst::Lidx { dst }
                | Inst::Unary { dst, .. }
                | Inst::Binary { dst, .. }
                | Inst::Where { dst, .. } => Some((*dst, p)),
                _ => None,
            })
            .collect();
        let loads = self.per_trip(|i| match i {
            Inst::Load { gate, .. } => gate.map_or(1.0, |g| self.lidx_share(g, &def)),
            Inst::LoadVec { .. } => 4.0,
            _ => 0.0,
        });
        loads / self.fmas_per_item() as f64
    }
    /// The share of a workgroup's invocations for which `gate` holds where that follows from
    /// their index in the workgroup and constants alone (the smallest share of such terms of a
    /// conjunction); 1 where it does not.
    fn lidx_share(&self, gate: Reg, def: &FastMap<Reg, usize>) -> f64 {
        if self.local_size > 1 {
            let held: Option<usize> = (0..self.local_size)
                .map(|l| {
                    self.eval_lidx(gate, l as f64, def)
                        .map(|v| usize::from(v != 0.0))
                })
                .sum();
            if let Some(n) = held {
                return n as f64 / self.local_size as f64;
            }
        }
        match def.get(&gate).map(|&p| &self.insts[p]) {
            Some(Inst::Binary {
                op: BinaryOp::And,
                a,
                b,
                ..
            }) => self.lidx_share(*a, def).min(self.lidx_share(*b, def)),
            _ => 1.0,
        }
    }
    /// The value of register `r` for the invocation at `lidx` in its workgroup, if it is
    /// computed from that index and constants alone.
    fn eval_lidx(&self, r: Reg, lidx: f64, def: &FastMap<Reg, usize>) -> Option<f64> {
        Some(match &self.insts[*def.get(&r)?] {
            Inst::Const { bits, .. } => f64::from_bits(*bits),
            Inst::Lidx { .. } => lidx,
            Inst::Unary { op, dtype, a, .. } => {
                exec_unary(*op, *dtype, self.eval_lidx(*a, lidx, def)?)
            }
            Inst::Binary {
                op, dtype, a, b, ..
            } => exec_binary(
                *op,
                *dtype,
                self.eval_lidx(*a, lidx, def)?,
                self.eval_lidx(*b, lidx, def)?,
            ),
            Inst::Where { c, a, b, .. } => {
                if self.eval_lidx(*c, lidx, def)? != 0.0 {
                    self.eval_lidx(*a, lidx, def)?
                } else {
                    self.eval_lidx(*b, lidx, def)?
                }
            }
            _ => return None,
        })
    }
    /// Fused multiply-adds per invocation, loop bodies counted by their trip counts.
    pub fn fmas_per_item(&self) -> u64 {
        self.per_trip(|i| f64::from(u8::from(matches!(i, Inst::Acc { fused: Some(_), .. })))) as u64
    }
    /// The sum of `count` over the instructions one invocation runs, each counted as often as
    /// the loops around it run (whole counts stay exact: f64 holds integers up to 2^53).
    fn per_trip(&self, count: impl Fn(&Inst) -> f64) -> f64 {
        let mut mult = vec![1f64];
        let mut total = 0f64;
        for i in &self.insts {
            let m = *mult.last().unwrap_or(&1.0);
            match i {
                Inst::Loop { size, .. } => mult.push(m * *size as f64),
                Inst::EndLoop => {
                    mult.pop();
                }
                i => total += count(i) * m,
            }
        }
        total
    }
    /// Whether invocations of a workgroup share memory (and wait at barriers).
    pub fn uses_workgroups(&self) -> bool {
        self.insts.iter().any(|i| matches!(i, Inst::Barrier))
    }
    /// Scalar ops per invocation, counting loop bodies by their trip counts (for FLOP counters
    /// and for deciding whether to split work across threads).
    pub fn ops_per_item(&self) -> u64 {
        let op = |i: &Inst| {
            matches!(
                i,
                Inst::Unary { .. } | Inst::Binary { .. } | Inst::Where { .. } | Inst::Acc { .. }
            )
        };
        self.per_trip(|i| f64::from(u8::from(op(i)))) as u64
    }
}

/// The instruction list, indented by loop depth.
impl std::fmt::Display for LinearKernel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(
            f,
            "{}: {} invocations, {} buffers",
            self.name,
            self.global_size,
            self.bufs.len()
        )?;
        let mut depth = 1;
        for i in &self.insts {
            if matches!(i, Inst::EndLoop) {
                depth -= 1;
            }
            writeln!(f, "{}{i:?}", "  ".repeat(depth))?;
            if matches!(i, Inst::Loop { .. }) {
                depth += 1;
            }
        }
        Ok(())
    }
}

struct Lin<'a> {
    g: &'a KGraph,
    out: Vec<Inst>,
    done: FastSet<Ref>,
    needed: FastSet<Ref>,
    vec_loads: FastMap<VecKey, Ref>,
}

impl Lin<'_> {
    fn emit(&mut self, r: Ref) {
        if self.done.contains(&r) {
            return;
        }
        let n = self.g.node(r).clone();
        if let KOp::Reduce(_) = n.op {
            self.emit_reduce_group(&n.src[1..]);
            return;
        }
        if n.op == KOp::Sync {
            // Wait until every invocation is done with the previous step's tiles, compute
            // this step's elements (all of them first: their loads overlap), store them, and
            // wait until every invocation has.
            self.out.push(Inst::Barrier);
            for &st in &n.src {
                for v in self.g.node(st).src.clone() {
                    self.emit(v);
                }
            }
            for &st in &n.src {
                let sn = self.g.node(st);
                let KOp::StoreShared(id) = sn.op else {
                    unreachable!("a staging step holds stores")
                };
                self.out.push(Inst::StoreShared {
                    id,
                    dtype: self.g.node(sn.src[1]).dtype,
                    idx: sn.src[0],
                    val: sn.src[1],
                });
                self.done.insert(st);
            }
            self.out.push(Inst::Barrier);
            self.done.insert(r);
            return;
        }
        if let Some(lanes) = self.load_quad(r) {
            self.emit(self.g.node(lanes[0]).src[0]);
            self.out.push(Inst::LoadVec {
                dsts: lanes,
                slot: match n.op {
                    KOp::Load(s) => s,
                    _ => unreachable!("a quad of loads"),
                },
                dtype: n.dtype,
                idx: self.g.node(lanes[0]).src[0],
            });
            self.done.extend(lanes);
            return;
        }
        for &s in &n.src {
            self.emit(s);
        }
        let src_dt = |i: usize| self.g.node(n.src[i]).dtype;
        let inst = match n.op {
            KOp::Gidx => Inst::Gidx { dst: r },
            KOp::Lidx => Inst::Lidx { dst: r },
            KOp::Wgid => Inst::Wgid { dst: r },
            KOp::SubgroupSum(size) => Inst::SubgroupSum {
                dst: r,
                dtype: n.dtype,
                size,
                a: n.src[0],
            },
            KOp::LoadShared(id) => Inst::LoadShared {
                dst: r,
                id,
                dtype: n.dtype,
                idx: n.src[0],
            },
            KOp::Const(bits) => Inst::Const {
                dst: r,
                bits,
                dtype: n.dtype,
            },
            KOp::Unary(op) => Inst::Unary {
                dst: r,
                op,
                dtype: n.dtype,
                a: n.src[0],
            },
            KOp::Binary(op) => Inst::Binary {
                dst: r,
                op,
                dtype: src_dt(0),
                a: n.src[0],
                b: n.src[1],
            },
            KOp::Where => Inst::Where {
                dst: r,
                dtype: n.dtype,
                c: n.src[0],
                a: n.src[1],
                b: n.src[2],
            },
            KOp::Cast => Inst::Cast {
                dst: r,
                from: src_dt(0),
                to: n.dtype,
                a: n.src[0],
            },
            KOp::Load(slot) => {
                let gate = (self.g.const_value(n.src[1]) != Some(1.0)).then_some(n.src[1]);
                Inst::Load {
                    dst: r,
                    slot,
                    dtype: n.dtype,
                    idx: n.src[0],
                    gate,
                }
            }
            KOp::Range { .. } => unreachable!("ranges are emitted by their reduce"),
            KOp::StoreShared(_) | KOp::Sync => unreachable!("stores are emitted by their sync"),
            KOp::Reduce(_) => unreachable!(),
        };
        self.out.push(inst);
        self.done.insert(r);
    }

    /// The four loads (lane 0 first) of the aligned group `r` belongs to, when all four exist
    /// and this phase needs them all.
    fn load_quad(&self, r: Ref) -> Option<[Ref; 4]> {
        let n = self.g.node(r);
        let KOp::Load(slot) = n.op else { return None };
        if !vectorizable(n.dtype) || self.g.const_value(n.src[1]) != Some(1.0) {
            return None;
        }
        let (ts, k) = aligned_terms(self.g, n.src[0])?;
        let base = k - k.rem_euclid(4);
        let mut lanes = [0; 4];
        for (j, lane) in lanes.iter_mut().enumerate() {
            let key = (slot, n.dtype, ts.clone(), base + j as i64);
            *lane = *self.vec_loads.get(&key)?;
            if !self.needed.contains(lane) || self.done.contains(lane) {
                return None;
            }
        }
        // Two loads of one element through differently associated indices share a key; the
        // other one is loaded on its own.
        lanes.contains(&r).then_some(lanes)
    }

    /// Emit everything `r` needs that does not depend on `mask` ranges (hoisting).
    fn hoist(&mut self, r: Ref, mask: u64, seen: &mut FastSet<Ref>) {
        if !seen.insert(r) || self.done.contains(&r) {
            return;
        }
        if self.g.ranges[r as usize] & mask == 0 {
            self.emit(r);
            return;
        }
        // A reduce inside the loop (a staged reduce's step): what its value needs from outside
        // both loops.
        if let KOp::Reduce(_) = self.g.node(r).op {
            let n = self.g.node(r).clone();
            let mut inner = mask;
            for &rg in &n.src[1..] {
                if let KOp::Range { id, .. } = self.g.node(rg).op {
                    inner |= 1 << id;
                }
            }
            self.hoist(n.src[0], inner, seen);
            return;
        }
        for s in self.g.node(r).src.clone() {
            self.hoist(s, mask, seen);
        }
    }

    /// Emit every reduce over exactly these ranges in one loop nest.
    fn emit_reduce_group(&mut self, ranges: &[Ref]) {
        let members: Vec<Ref> = (0..self.g.nodes.len() as Ref)
            .filter(|&i| {
                let n = self.g.node(i);
                matches!(n.op, KOp::Reduce(_)) && n.src[1..] == *ranges && self.needed.contains(&i)
            })
            .collect();
        let mut mask = 0u64;
        for &rg in ranges {
            if let KOp::Range { id, .. } = self.g.node(rg).op {
                mask |= 1 << id;
            }
        }
        let mut seen = FastSet::default();
        for &m in &members {
            let v = self.g.node(m).src[0];
            self.hoist(v, mask, &mut seen);
        }
        for &m in &members {
            let n = self.g.node(m);
            let KOp::Reduce(op) = n.op else { continue };
            self.out.push(Inst::DefAcc {
                dst: m,
                op,
                dtype: n.dtype,
            });
        }
        // Nothing first computed inside the loop is visible after it.
        let before = self.done.clone();
        for &rg in ranges {
            if let KOp::Range { size, .. } = self.g.node(rg).op {
                self.out.push(Inst::Loop { dst: rg, size });
                self.done.insert(rg);
            }
        }
        for &m in &members {
            let n = self.g.node(m).clone();
            let KOp::Reduce(op) = n.op else { continue };
            self.emit(n.src[0]);
            let v = self.g.node(n.src[0]);
            let product = op == ReduceOp::Sum
                && n.dtype == DType::F32
                && v.dtype == DType::F32
                && v.op == KOp::Binary(BinaryOp::Mul);
            self.out.push(Inst::Acc {
                acc: m,
                op,
                dtype: n.dtype,
                val: n.src[0],
                fused: product.then(|| (v.src[0], v.src[1])),
            });
        }
        for _ in ranges {
            self.out.push(Inst::EndLoop);
        }
        self.done = before;
        self.done.extend(members);
    }
}

/// The values of four ungated stores at the head of `effects` into one buffer at consecutive
/// indices, the first a multiple of 4.
fn store_quad(g: &KGraph, effects: &[Effect], bufs: &[BufArg]) -> Option<[Ref; 4]> {
    let mut vals = [0; 4];
    // (slot, terms, constant) of the first store.
    let mut first: Option<(u32, Terms, i64)> = None;
    for (j, e) in effects.iter().take(4).enumerate() {
        let Effect::Store {
            slot,
            idx,
            val,
            gate: None,
        } = *e
        else {
            return None;
        };
        if !vectorizable(bufs[slot as usize].dtype) {
            return None;
        }
        let (ts, k) = aligned_terms(g, idx)?;
        match &first {
            None if k.rem_euclid(4) == 0 => first = Some((slot, ts, k)),
            None => return None,
            Some((s, t0, k0)) if *s == slot && *t0 == ts && k == k0 + j as i64 => {}
            Some(_) => return None,
        }
        vals[j] = val;
    }
    (effects.len() >= 4 && first.is_some()).then_some(vals)
}

/// Order a lowered kernel into instructions, hoisting loop-invariant work out of loops, and
/// name it `name`.
pub fn linearize(l: &Lowered, bufs: Vec<BufArg>, name: &str) -> LinearKernel {
    let mut lin = Lin {
        g: &l.graph,
        out: vec![],
        done: FastSet::default(),
        needed: FastSet::default(),
        vec_loads: vector_candidates(&l.graph),
    };
    for (i, phase) in l.effects.split(|e| *e == Effect::Barrier).enumerate() {
        if i > 0 {
            lin.out.push(Inst::Barrier);
            lin.done.clear();
        }
        let roots: Vec<Ref> = phase
            .iter()
            .flat_map(|e| match e {
                Effect::Store { idx, val, gate, .. } => {
                    let mut v = vec![*idx, *val];
                    v.extend(gate);
                    v
                }
                Effect::StoreShared { idx, val, .. } => vec![*idx, *val],
                Effect::Barrier => vec![],
            })
            .collect();
        lin.needed = l.graph.reachable(&roots);
        let mut skip = 0;
        for (ei, e) in phase.iter().enumerate() {
            if skip > 0 {
                skip -= 1;
                continue;
            }
            if let Some(q) = store_quad(&l.graph, &phase[ei..], &bufs) {
                let Effect::Store { slot, idx, .. } = phase[ei] else {
                    unreachable!("a quad of stores")
                };
                lin.emit(idx);
                for &v in &q {
                    lin.emit(v);
                }
                lin.out.push(Inst::StoreVec {
                    slot,
                    dtype: bufs[slot as usize].dtype,
                    idx,
                    vals: q,
                });
                skip = 3;
                continue;
            }
            match *e {
                Effect::Store {
                    slot,
                    idx,
                    val,
                    gate,
                } => {
                    lin.emit(idx);
                    lin.emit(val);
                    if let Some(g) = gate {
                        lin.emit(g);
                    }
                    let gate = gate.filter(|&g| l.graph.const_value(g) != Some(1.0));
                    lin.out.push(Inst::Store {
                        slot,
                        dtype: bufs[slot as usize].dtype,
                        idx,
                        val,
                        gate,
                    });
                }
                Effect::StoreShared { id, idx, val } => {
                    lin.emit(idx);
                    lin.emit(val);
                    lin.out.push(Inst::StoreShared {
                        id,
                        dtype: l.shared[id as usize].0,
                        idx,
                        val,
                    });
                }
                Effect::Barrier => {}
            }
        }
    }
    LinearKernel {
        name: name.to_string(),
        insts: lin.out,
        bufs,
        global_size: l.global_size,
        local_size: l.local_size,
        shared: l.shared.clone(),
        nregs: l.graph.nodes.len(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn buf(writes: bool) -> BufArg {
        BufArg {
            dtype: DType::F32,
            writes,
        }
    }

    /// out[i] = sum_r x[i] * y[r]: the load of x[i] does not depend on the loop.
    fn kernel() -> LinearKernel {
        let mut g = KGraph::new();
        let i = g.gidx(4);
        let r = g.range(16);
        let yes = g.bool_const(true);
        let x = g.load(1, DType::F32, i, yes);
        let y = g.load(2, DType::F32, r, yes);
        let p = g.mul(x, y);
        let s = g.reduce(ReduceOp::Sum, p, &[r]);
        let l = Lowered {
            graph: g,
            effects: vec![Effect::Store {
                slot: 0,
                idx: i,
                val: s,
                gate: None,
            }],
            global_size: 4,
            local_size: 1,
            shared: vec![],
        };
        linearize(&l, vec![buf(true), buf(false), buf(false)], "k")
    }

    #[test]
    fn loop_invariant_work_is_hoisted_out_of_the_loop() {
        let k = kernel();
        let pos = |f: &dyn Fn(&Inst) -> bool| k.insts.iter().position(f).expect("instruction");
        let lx = pos(&|i| matches!(i, Inst::Load { slot: 1, .. }));
        let ly = pos(&|i| matches!(i, Inst::Load { slot: 2, .. }));
        let lp = pos(&|i| matches!(i, Inst::Loop { size: 16, .. }));
        let end = pos(&|i| matches!(i, Inst::EndLoop));
        let st = pos(&|i| matches!(i, Inst::Store { .. }));
        assert!(lx < lp, "x[i] is loaded before the loop:\n{k}");
        assert!(lp < ly && ly < end, "y[r] is loaded inside it:\n{k}");
        assert!(end < st, "the store follows the loop");
    }

    #[test]
    fn ops_are_counted_by_trip_count() {
        // Inside the loop: one mul and one accumulate, 16 times.
        assert_eq!(kernel().ops_per_item(), 32);
    }

    #[test]
    fn accumulators_are_defined_before_their_loop() {
        let k = kernel();
        let def = k
            .insts
            .iter()
            .position(|i| matches!(i, Inst::DefAcc { .. }));
        let lp = k.insts.iter().position(|i| matches!(i, Inst::Loop { .. }));
        assert!(def.is_some() && def < lp, "{k}");
    }

    #[test]
    fn a_load_sharing_its_element_with_a_vector_lane_is_still_defined() {
        // sum_r (x[a] + x[a'] + x[a' + 1] + x[a' + 2] + x[a' + 3]) where a = (16r + 4i) + 8
        // and a' = 16r + (4i + 8): the same element through differently associated indices.
        let mut g = KGraph::new();
        let i = g.gidx(2);
        let r = g.range(3);
        let yes = g.bool_const(true);
        let (c16, c4, c8) = (g.int(16), g.int(4), g.int(8));
        let (x, y) = (g.mul(r, c16), g.mul(i, c4));
        let xy = g.add(x, y);
        let a = g.add(xy, c8);
        let y8 = g.add(y, c8);
        let a2 = g.add(x, y8);
        let mut v = g.load(1, DType::F32, a, yes);
        for j in 0..4 {
            let cj = g.int(j);
            let at = g.add(a2, cj);
            let l = g.load(1, DType::F32, at, yes);
            v = g.add(v, l);
        }
        let s = g.reduce(ReduceOp::Sum, v, &[r]);
        let l = Lowered {
            graph: g,
            effects: vec![Effect::Store {
                slot: 0,
                idx: i,
                val: s,
                gate: None,
            }],
            global_size: 2,
            local_size: 1,
            shared: vec![],
        };
        let k = linearize(&l, vec![buf(true), buf(false)], "k");
        let mut defined = FastSet::default();
        for inst in &k.insts {
            let reads = match inst {
                Inst::Binary { a, b, .. } => vec![*a, *b],
                Inst::Acc { val, .. } => vec![*val],
                _ => vec![],
            };
            for r in reads {
                assert!(defined.contains(&r), "v{r} used before it is defined:\n{k}");
            }
            match inst {
                Inst::LoadVec { dsts, .. } => defined.extend(dsts),
                Inst::Const { dst, .. }
                | Inst::Gidx { dst }
                | Inst::Binary { dst, .. }
                | Inst::Load { dst, .. }
                | Inst::DefAcc { dst, .. }
                | Inst::Loop { dst, .. } => {
                    defined.insert(*dst);
                }
                _ => {}
            }
        }
    }
}

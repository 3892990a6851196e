//! Linearize: order a lowered kernel graph into a flat instruction list with explicit reduce
//! loops. Work that does not depend on a loop's range is emitted before the loop. This list is
//! what the renderers print and what the interpreter executes.

use super::lower::Lowered;
use crate::dtype::DType;
use crate::kernel::{KGraph, KOp, Ref};
use crate::ops::{BinaryOp, ReduceOp, UnaryOp};
use std::collections::HashSet;

pub type Reg = u32;

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Inst {
    Const {
        dst: Reg,
        bits: u64,
        dtype: DType,
    },
    Gidx {
        dst: Reg,
    },
    Unary {
        dst: Reg,
        op: UnaryOp,
        dtype: DType,
        a: Reg,
    },
    /// `dtype` is the operands' dtype (comparisons produce bool).
    Binary {
        dst: Reg,
        op: BinaryOp,
        dtype: DType,
        a: Reg,
        b: Reg,
    },
    Where {
        dst: Reg,
        dtype: DType,
        c: Reg,
        a: Reg,
        b: Reg,
    },
    Cast {
        dst: Reg,
        from: DType,
        to: DType,
        a: Reg,
    },
    Load {
        dst: Reg,
        slot: u32,
        dtype: DType,
        idx: Reg,
        gate: Option<Reg>,
    },
    DefAcc {
        dst: Reg,
        op: ReduceOp,
        dtype: DType,
    },
    Loop {
        dst: Reg,
        size: u32,
    },
    EndLoop,
    Acc {
        acc: Reg,
        op: ReduceOp,
        dtype: DType,
        val: Reg,
    },
    Store {
        slot: u32,
        dtype: DType,
        idx: Reg,
        val: Reg,
    },
}

/// A buffer argument of a kernel: element dtype and whether the kernel writes it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct BufArg {
    pub dtype: DType,
    pub writes: bool,
}

/// A kernel ready to render or interpret.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct LinearKernel {
    pub name: String,
    pub insts: Vec<Inst>,
    pub bufs: Vec<BufArg>,
    /// Number of output elements (invocations of the body).
    pub global_size: usize,
    pub nregs: usize,
}

impl LinearKernel {
    /// Scalar ops per invocation, counting loop bodies by their trip counts (for FLOP counters
    /// and for deciding whether to split work across threads).
    pub fn ops_per_item(&self) -> u64 {
        let mut mult = vec![1u64];
        let mut total = 0u64;
        for i in &self.insts {
            match i {
                Inst::Loop { size, .. } => {
                    let m = *mult.last().unwrap_or(&1) * *size as u64;
                    mult.push(m);
                }
                Inst::EndLoop => {
                    mult.pop();
                }
                Inst::Unary { .. }
                | Inst::Binary { .. }
                | Inst::Where { .. }
                | Inst::Acc { .. } => total += *mult.last().unwrap_or(&1),
                _ => {}
            }
        }
        total
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
    done: HashSet<Ref>,
    needed: HashSet<Ref>,
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
        for &s in &n.src {
            self.emit(s);
        }
        let src_dt = |i: usize| self.g.node(n.src[i]).dtype;
        let inst = match n.op {
            KOp::Gidx => Inst::Gidx { dst: r },
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
            KOp::Reduce(_) => unreachable!(),
        };
        self.out.push(inst);
        self.done.insert(r);
    }

    /// Emit everything `r` needs that does not depend on `mask` ranges (hoisting).
    fn hoist(&mut self, r: Ref, mask: u64, seen: &mut HashSet<Ref>) {
        if !seen.insert(r) || self.done.contains(&r) {
            return;
        }
        if self.g.ranges[r as usize] & mask == 0 {
            self.emit(r);
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
        let mut seen = HashSet::new();
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
            self.out.push(Inst::Acc {
                acc: m,
                op,
                dtype: n.dtype,
                val: n.src[0],
            });
        }
        for _ in ranges {
            self.out.push(Inst::EndLoop);
        }
        // Values computed inside the loop are not visible after it.
        let inner: Vec<Ref> = self
            .done
            .iter()
            .copied()
            .filter(|&d| self.g.ranges[d as usize] & mask != 0)
            .collect();
        for d in inner {
            self.done.remove(&d);
        }
        self.done.extend(members);
    }
}

/// Every node reachable from the stores.
fn reachable(g: &KGraph, roots: &[Ref]) -> HashSet<Ref> {
    let mut seen = HashSet::new();
    let mut stack = roots.to_vec();
    while let Some(r) = stack.pop() {
        if seen.insert(r) {
            stack.extend(g.node(r).src.iter().copied());
        }
    }
    seen
}

pub fn linearize(l: &Lowered, bufs: Vec<BufArg>, name: &str) -> LinearKernel {
    let roots: Vec<Ref> = l.stores.iter().flat_map(|&(_, i, v)| [i, v]).collect();
    let needed = reachable(&l.graph, &roots);
    let mut lin = Lin {
        g: &l.graph,
        out: vec![],
        done: HashSet::new(),
        needed,
    };
    for &(slot, idx, val) in &l.stores {
        lin.emit(idx);
        lin.emit(val);
        lin.out.push(Inst::Store {
            slot,
            dtype: bufs[slot as usize].dtype,
            idx,
            val,
        });
    }
    LinearKernel {
        name: name.to_string(),
        insts: lin.out,
        bufs,
        global_size: l.global_size,
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
            stores: vec![(0, i, s)],
            global_size: 4,
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
}

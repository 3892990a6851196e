//! Lowering: a scheduled kernel's AST (loads through views, elementwise ops, at most one fused
//! reduce) becomes a `KGraph` in which every load has an explicit index and gate. The output
//! element is chosen by the global index; reduces become loops over fresh ranges.

use crate::kernel::{st_index, unravel, AstNode, AstOp, KGraph, KOp, KernelAst, Ref};
use std::collections::HashMap;

/// The lowered kernel: its graph and the (slot, index, value) stores it performs.
pub struct Lowered {
    pub graph: KGraph,
    pub stores: Vec<(u32, Ref, Ref)>,
    pub global_size: usize,
}

struct Memo {
    values: HashMap<(usize, Vec<Ref>, Ref), Ref>,
    /// Reduce loops are shared by every copy of a reduce (see `Upcast`), so one loop
    /// accumulates all of them.
    ranges: HashMap<usize, Vec<Ref>>,
}

/// Compute `amount` consecutive outputs along output `axis` per invocation (several upcasts
/// multiply): loads that do not depend on that axis are shared, and the reduce loop carries one
/// accumulator per output.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Upcast {
    pub axis: usize,
    pub amount: usize,
}

pub fn lower(k: &KernelAst, ups: &[Upcast]) -> Lowered {
    let mut g = KGraph::new();
    let root = &k.root;
    let n = root.numel();
    let mut grid = root.shape.clone();
    let mut ups: Vec<Upcast> = ups.to_vec();
    ups.retain(|u| u.amount > 1 && u.axis < grid.len() && grid[u.axis] % u.amount == 0);
    ups.dedup_by_key(|u| u.axis);
    for u in &ups {
        grid[u.axis] /= u.amount;
    }
    let copies: usize = ups.iter().map(|u| u.amount).product();
    let gsize = n / copies;
    let gidx = g.gidx(gsize);
    let base = unravel(&mut g, gidx, &grid);
    let yes = g.bool_const(true);
    let mut memo = Memo {
        values: HashMap::new(),
        ranges: HashMap::new(),
    };
    let out_dtype = k.bufs[0].0;
    let strides = crate::shape::strides_for(&root.shape);
    let mut stores = vec![];
    for c in 0..copies {
        let mut idx = base.clone();
        let mut rest = c;
        for up in &ups {
            let a = g.int(up.amount as i64);
            let scaled = g.mul(base[up.axis], a);
            let off = g.int((rest % up.amount) as i64);
            rest /= up.amount;
            idx[up.axis] = g.add(scaled, off);
        }
        let v = lower_node(&mut g, root, &idx, yes, &mut memo);
        let v = g.cast(v, out_dtype);
        let mut lin = g.int(0);
        for (i, &ix) in idx.iter().enumerate() {
            if strides[i] != 0 {
                let st = g.int(strides[i] as i64);
                let t = g.mul(ix, st);
                lin = g.add(lin, t);
            }
        }
        stores.push((0, lin, v));
    }
    Lowered {
        graph: g,
        stores,
        global_size: gsize,
    }
}

/// Memory accesses inside reduce loops per output element, to compare upcast choices. Loads
/// from one buffer whose indices differ only by a small constant (consecutive elements, as an
/// upcast along a contiguous axis produces) count once: they share cache lines and vectorize.
pub fn loads_per_output(l: &Lowered) -> f64 {
    use std::collections::HashSet;
    let g = &l.graph;
    // (buffer slot, index terms without the constant, constant / 16)
    type Group = (u32, Vec<(Ref, i64)>, i64);
    let mut groups: HashSet<Group> = HashSet::new();
    for (i, n) in g.nodes.iter().enumerate() {
        let KOp::Load(slot) = n.op else { continue };
        if g.ranges[i] == 0 {
            continue;
        }
        let (mut ts, mut k) = (vec![], 0i64);
        crate::kernel::rewrite::terms(g, n.src[0], 1, &mut ts, &mut k);
        ts.sort();
        groups.insert((slot, ts, k.div_euclid(16)));
    }
    groups.len() as f64 / l.stores.len() as f64
}

fn lower_node(g: &mut KGraph, n: &AstNode, idx: &[Ref], gate: Ref, memo: &mut Memo) -> Ref {
    let key = (n as *const AstNode as usize, idx.to_vec(), gate);
    if let Some(&r) = memo.values.get(&key) {
        return r;
    }
    let r = match &n.op {
        AstOp::Load { slot, st } => {
            let (i, valid) = st_index(g, st, idx);
            let ok = g.and(gate, valid);
            g.load(*slot, n.dtype, i, ok)
        }
        AstOp::Const(v) => g.konst(*v, n.dtype),
        AstOp::Iota => idx[0],
        AstOp::View(st) => {
            let (i, valid) = st_index(g, st, idx);
            let inner = unravel(g, i, &n.src[0].shape);
            let ok = g.and(gate, valid);
            let v = lower_node(g, &n.src[0], &inner, ok, memo);
            let z = g.konst(0.0, n.dtype);
            g.where_(valid, v, z)
        }
        AstOp::Unary(op) => {
            let a = lower_node(g, &n.src[0], idx, gate, memo);
            g.unary(*op, a)
        }
        AstOp::Binary(op) => {
            let a = lower_node(g, &n.src[0], idx, gate, memo);
            let b = lower_node(g, &n.src[1], idx, gate, memo);
            g.binary(*op, a, b)
        }
        AstOp::Where => {
            let c = lower_node(g, &n.src[0], idx, gate, memo);
            let a = lower_node(g, &n.src[1], idx, gate, memo);
            let b = lower_node(g, &n.src[2], idx, gate, memo);
            g.where_(c, a, b)
        }
        AstOp::Cast(dt) => {
            let a = lower_node(g, &n.src[0], idx, gate, memo);
            g.cast(a, *dt)
        }
        AstOp::Reduce(op, axes) => {
            let src = &n.src[0];
            let ptr = n as *const AstNode as usize;
            let ranges = match memo.ranges.get(&ptr) {
                Some(r) => r.clone(),
                None => {
                    let r: Vec<Ref> = axes.iter().map(|&ax| g.range(src.shape[ax])).collect();
                    memo.ranges.insert(ptr, r.clone());
                    r
                }
            };
            let mut inner = idx.to_vec();
            for (&ax, &r) in axes.iter().zip(&ranges) {
                inner[ax] = r;
            }
            let v = lower_node(g, src, &inner, gate, memo);
            g.reduce(*op, v, &ranges)
        }
    };
    memo.values.insert(key, r);
    r
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dtype::DType;
    use crate::kernel::{AstNode, AstOp};
    use crate::ops::{BinaryOp, ReduceOp};
    use crate::shape::ShapeTracker;
    use std::sync::Arc;

    /// out[i, k] = sum_j a[i, j] * b[j, k] for a (M, K) x (K, N) matmul, as the scheduler
    /// would build it: both operands read through broadcast views of shape (M, K, N).
    fn matmul(m: usize, k: usize, n: usize) -> KernelAst {
        let load = |slot: u32, st: ShapeTracker| {
            Arc::new(AstNode {
                op: AstOp::Load { slot, st },
                dtype: DType::F32,
                shape: vec![m, k, n],
                src: vec![],
            })
        };
        let a = ShapeTracker::contiguous(&[m, k])
            .reshape(&[m, k, 1])
            .expand(&[m, k, n]);
        let b = ShapeTracker::contiguous(&[k, n])
            .reshape(&[1, k, n])
            .expand(&[m, k, n]);
        let prod = Arc::new(AstNode {
            op: AstOp::Binary(BinaryOp::Mul),
            dtype: DType::F32,
            shape: vec![m, k, n],
            src: vec![load(1, a), load(2, b)],
        });
        let sum = Arc::new(AstNode {
            op: AstOp::Reduce(ReduceOp::Sum, vec![1]),
            dtype: DType::F32,
            shape: vec![m, 1, n],
            src: vec![prod],
        });
        KernelAst {
            root: sum,
            bufs: vec![
                (DType::F32, m * n),
                (DType::F32, m * k),
                (DType::F32, k * n),
            ],
        }
    }

    fn count(l: &Lowered, f: impl Fn(&KOp) -> bool) -> usize {
        l.graph.nodes.iter().filter(|n| f(&n.op)).count()
    }

    #[test]
    fn a_reduce_becomes_one_loop_with_one_store_per_output() {
        let l = lower(&matmul(4, 8, 6), &[]);
        assert_eq!(l.global_size, 24);
        assert_eq!(l.stores.len(), 1);
        assert_eq!(count(&l, |o| matches!(o, KOp::Range { size: 8, .. })), 1);
        assert_eq!(count(&l, |o| matches!(o, KOp::Load(_))), 2);
        assert_eq!(loads_per_output(&l), 2.0);
    }

    #[test]
    fn upcasting_shares_loads_that_do_not_depend_on_the_axis() {
        // Four outputs along n per invocation: a[i, j] is loaded once for all four.
        let l = lower(&matmul(4, 8, 6 * 4), &[Upcast { axis: 2, amount: 4 }]);
        assert_eq!(l.global_size, 24);
        assert_eq!(l.stores.len(), 4);
        assert_eq!(count(&l, |o| matches!(o, KOp::Reduce(_))), 4);
        // The loop is shared by the four reduces.
        assert_eq!(count(&l, |o| matches!(o, KOp::Range { .. })), 1);
        assert!(loads_per_output(&l) < 2.0, "{}", loads_per_output(&l));
    }

    #[test]
    fn an_upcast_that_does_not_divide_the_axis_is_ignored() {
        let l = lower(&matmul(4, 8, 6), &[Upcast { axis: 2, amount: 4 }]);
        assert_eq!((l.global_size, l.stores.len()), (24, 1));
    }
}

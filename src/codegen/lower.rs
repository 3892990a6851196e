//! Lowering: a scheduled kernel's AST (loads through views, elementwise ops, at most one fused
//! reduce) becomes a `KGraph` in which every load has an explicit index and gate. The output
//! element is chosen by the global index; reduces become loops over fresh ranges.

use super::{KGraph, Ref};
use crate::schedule::{AstNode, AstOp, KernelAst};
use crate::shape::unravel;
use std::collections::HashMap;

/// The lowered kernel: its graph and the (slot, index, value) stores it performs.
pub struct Lowered {
    pub graph: KGraph,
    pub stores: Vec<(u32, Ref, Ref)>,
    pub global_size: usize,
}

type Memo = HashMap<(usize, Vec<Ref>, Ref), Ref>;

pub fn lower(k: &KernelAst) -> Lowered {
    let mut g = KGraph::new();
    let root = &k.root;
    let n = root.numel();
    let gidx = g.gidx(n);
    let idx = unravel(&mut g, gidx, &root.shape);
    let yes = g.bool_const(true);
    let mut memo = Memo::new();
    let v = lower_node(&mut g, root, &idx, yes, &mut memo);
    let out_dtype = k.bufs[0].0;
    let v = g.cast(v, out_dtype);
    Lowered { graph: g, stores: vec![(0, gidx, v)], global_size: n }
}

fn lower_node(g: &mut KGraph, n: &AstNode, idx: &[Ref], gate: Ref, memo: &mut Memo) -> Ref {
    let key = (n as *const AstNode as usize, idx.to_vec(), gate);
    if let Some(&r) = memo.get(&key) {
        return r;
    }
    let r = match &n.op {
        AstOp::Load { slot, st } => {
            let (i, valid) = st.to_index(g, idx);
            let ok = g.and(gate, valid);
            g.load(*slot, n.dtype, i, ok)
        }
        AstOp::Const(v) => g.konst(*v, n.dtype),
        AstOp::Iota => idx[0],
        AstOp::View(st) => {
            let (i, valid) = st.to_index(g, idx);
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
            let mut inner = idx.to_vec();
            let mut ranges = vec![];
            for &ax in axes {
                let r = g.range(src.shape[ax]);
                inner[ax] = r;
                ranges.push(r);
            }
            let v = lower_node(g, src, &inner, gate, memo);
            g.reduce(*op, v, &ranges)
        }
    };
    memo.insert(key, r);
    r
}

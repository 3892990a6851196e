//! Autograd: `backward()` walks the lazy graph from a scalar back to every tensor that requires
//! gradients, applying one derivative rule per primitive. The gradients are themselves lazy
//! graphs, so forward, backward and the optimizer update realize as one schedule.

use super::{grad_tensors, Tensor};
use crate::error::{bail, Result};
use crate::ops::{BinaryOp, Op, ReduceOp, UnaryOp};
use crate::uop::UOp;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

fn t(n: &Arc<UOp>) -> Tensor {
    Tensor::from_node(n.clone())
}

/// `n` read through the contiguous copies of views of buffers in memory (or of reduces) below its
/// own views: the same values, in the order of the view the copy was made from. A copy that gives
/// the forward pass a layout (a CPU matmul's weight or attention's keys, copied so that their
/// columns are contiguous: `matmul`) would give the backward pass's products the transposed
/// layout again; reading the original there keeps both in the order that vectorizes.
fn through_copies(n: &Arc<UOp>) -> Arc<UOp> {
    if n.is_realized() {
        return n.clone();
    }
    let src = n.src();
    if n.op.is_movement() {
        let s = through_copies(&src[0]);
        if s.id == src[0].id {
            return n.clone();
        }
        return UOp::new(n.op.clone(), n.dtype, n.shape.clone(), n.device, vec![s]);
    }
    // A view of a buffer in memory or of a reduce: reading it computes nothing again (a view of
    // an elementwise expression could be fused into the copy and computed again here).
    let view = |s: &Arc<UOp>| {
        s.op.is_movement() && !s.is_realized() && crate::schedule::read_not_recomputed(s)
    };
    if n.op == Op::Contiguous && view(&src[0]) {
        return src[0].clone();
    }
    n.clone()
}

/// Gradients of a node's sources given the gradient `g` of its output (`None`: no gradient).
fn rule(n: &Arc<UOp>, g: &Tensor) -> Result<Vec<Option<Tensor>>> {
    let src = n.src();
    let out = t(n);
    let x = |i: usize| t(&src[i]);
    Ok(match &n.op {
        Op::Unary(u) => vec![Some(match u {
            UnaryOp::Neg => g.neg()?,
            UnaryOp::Exp2 => g.mul(&out)?.mul(std::f64::consts::LN_2)?,
            UnaryOp::Log2 => g.div(&x(0).mul(std::f64::consts::LN_2)?)?,
            UnaryOp::Sin => g.mul(&x(0).cos()?)?,
            UnaryOp::Sqrt => g.div(&out.mul(2.0)?)?,
            UnaryOp::Recip => g.mul(&out.square()?)?.neg()?,
            UnaryOp::Trunc => return Ok(vec![None]),
        })],
        Op::Binary(b) => match b {
            BinaryOp::Add => vec![Some(g.clone()), Some(g.clone())],
            BinaryOp::Mul => vec![
                Some(g.mul(t(&through_copies(&src[1])))?),
                Some(g.mul(t(&through_copies(&src[0])))?),
            ],
            BinaryOp::Div if n.dtype.is_float() => {
                vec![
                    Some(g.div(x(1))?),
                    Some(g.mul(x(0))?.div(&x(1).square()?)?.neg()?),
                ]
            }
            // fmod(a, b) = a - b * trunc(a / b).
            BinaryOp::Mod if n.dtype.is_float() => vec![
                Some(g.clone()),
                Some(g.mul(&x(0).div(x(1))?.trunc()?)?.neg()?),
            ],
            BinaryOp::Max => {
                // Ties share the gradient equally.
                let (a, c) = (x(0), x(1));
                let half = g.mul(0.5)?;
                let eq = a.eq(&c)?;
                let ga = eq.where_(&half, &a.gt(&c)?.where_(g, 0.0)?)?;
                let gc = eq.where_(&half, &c.gt(&a)?.where_(g, 0.0)?)?;
                vec![Some(ga), Some(gc)]
            }
            _ => vec![None, None],
        },
        Op::Where => vec![None, Some(x(0).where_(g, 0.0)?), Some(x(0).where_(0.0, g)?)],
        Op::Cast(_) => vec![src[0]
            .dtype
            .is_float()
            .then(|| g.cast(src[0].dtype))
            .transpose()?],
        Op::Reduce(ReduceOp::Sum, _) => vec![Some(g.expand_u(&src[0].shape)?)],
        Op::Reduce(ReduceOp::Max, axes) => {
            // Ties share the gradient equally (PyTorch's amax). The input is compared with its
            // max, so both must come from the same bits: when recomputing the input in another
            // kernel may round differently, compare a materialized copy with its own max.
            let xs = x(0).pinned();
            let m = if xs.node().id == src[0].id {
                out
            } else {
                xs.reduce_op(ReduceOp::Max, axes)
            };
            let hit = xs.eq(&m.expand_u(&src[0].shape)?)?.cast(g.dtype())?;
            let count = hit.reduce_op(ReduceOp::Sum, axes);
            vec![Some(hit.mul(&g.div(&count)?.expand_u(&src[0].shape)?)?)]
        }
        Op::Reduce(ReduceOp::Prod, axes) => {
            // The product of the other elements: prod / x without zeros; with one zero, the
            // product of the rest at the zero and 0 elsewhere; with two or more, 0 (PyTorch).
            let (x, shape) = (x(0), &src[0].shape);
            let zero = x.eq(0.0)?;
            let nz = zero.where_(1.0, &x)?;
            let rest = nz.reduce_op(ReduceOp::Prod, axes).expand_u(shape)?;
            let zeros = zero
                .cast(x.dtype())?
                .reduce_op(ReduceOp::Sum, axes)
                .expand_u(shape)?;
            let one_zero = zeros.eq(1.0)?.logical_and(&zero)?.where_(&rest, 0.0)?;
            let others = zeros.eq(0.0)?.where_(&rest.div(&nz)?, &one_zero)?;
            vec![Some(others.mul(&g.expand_u(shape)?)?)]
        }
        Op::Reshape => vec![Some(g.reshape_u(&src[0].shape)?)],
        Op::Permute(p) => {
            let mut inv = vec![0isize; p.len()];
            for (i, &a) in p.iter().enumerate() {
                inv[a] = i as isize;
            }
            vec![Some(g.permute(&inv)?)]
        }
        Op::Expand => {
            let axes: Vec<usize> = (0..n.shape.len())
                .filter(|&i| src[0].shape[i] != n.shape[i])
                .collect();
            vec![Some(g.reduce_op(ReduceOp::Sum, &axes))]
        }
        Op::Pad(p) => {
            let arg: Vec<(usize, usize)> = p
                .iter()
                .zip(&src[0].shape)
                .map(|(&(lo, _), &d)| (lo, lo + d))
                .collect();
            vec![Some(g.shrink(&arg)?)]
        }
        Op::Shrink(a) => {
            let pads: Vec<(usize, usize)> = a
                .iter()
                .zip(&src[0].shape)
                .map(|(&(lo, hi), &d)| (lo, d - hi))
                .collect();
            vec![Some(g.pad(&pads, 0.0)?)]
        }
        Op::Flip(f) => {
            let axes: Vec<isize> = f
                .iter()
                .enumerate()
                .filter(|(_, &b)| b)
                .map(|(i, _)| i as isize)
                .collect();
            vec![Some(g.flip(&axes)?)]
        }
        Op::Contiguous => vec![Some(g.clone())],
        Op::Copy => vec![Some(g.to(src[0].device)?)],
        Op::Detach | Op::Assign => vec![None; src.len()],
        Op::Buffer | Op::Const(_) | Op::Iota => vec![],
    })
}

/// Accumulate into `.grad` the gradients of `root` (a scalar, or any shape with `seed`, the
/// gradient flowing into it) for every tensor that requires one.
pub fn backward(root: &Tensor, seed: Option<&Tensor>) -> Result<()> {
    let order = topo(root, "backward", seed)?;
    let seen: HashSet<u64> = order.iter().map(|n| n.id).collect();
    let targets: Vec<Tensor> = grad_tensors()
        .into_iter()
        .filter(|t| t.lazy().shards.iter().any(|n| seen.contains(&n.id)))
        .collect();
    if targets.is_empty() {
        bail!(Other, "backward: no tensor in this graph requires a gradient (call set_requires_grad(true) on the parameters, before realizing the loss)");
    }
    let grads = gradients(root, &order, &targets, seed)?;
    for (p, g) in targets.iter().zip(grads) {
        let new = match p.grad() {
            Some(prev) => prev.add(&g)?,
            None => g,
        };
        p.set_grad(Some(new));
    }
    Ok(())
}

/// The gradients of `root` with respect to `targets` (tinygrad's `gradient`): lazy tensors
/// shaped like the targets, zero for a target `root` does not depend on. Nothing is stored in
/// `.grad`, and the targets need not require gradients.
pub fn gradient(root: &Tensor, targets: &[&Tensor], seed: Option<&Tensor>) -> Result<Vec<Tensor>> {
    let order = topo(root, "gradient", seed)?;
    let targets: Vec<Tensor> = targets.iter().map(|&t| t.clone()).collect();
    gradients(root, &order, &targets, seed)
}

/// The graph under `root` in topological order (sources first), not through Detach; checks
/// that `root` can start a backward pass.
fn topo(root: &Tensor, op: &str, seed: Option<&Tensor>) -> Result<Vec<Arc<UOp>>> {
    // A scalar on several devices is replicated: differentiate one replica (the all-reduce
    // that made it connects it to every device's graph).
    let rn = root.node();
    match seed {
        None if rn.numel() != 1 => bail!(
            Shape,
            "{op}: needs a scalar (one element) or the gradient of the output, got shape {:?}",
            rn.shape
        ),
        Some(s) if s.shape() != root.shape() => bail!(
            Shape,
            "{op}: the gradient {:?} does not match the output {:?}",
            s.shape(),
            root.shape()
        ),
        _ => {}
    }
    if !rn.dtype.is_float() {
        bail!(DType, "{op}: needs a float tensor, got {}", rn.dtype);
    }
    let mut order: Vec<Arc<UOp>> = vec![];
    let mut seen: HashSet<u64> = HashSet::new();
    let mut stack = vec![(rn.clone(), false)];
    while let Some((n, done)) = stack.pop() {
        if done {
            order.push(n);
            continue;
        }
        if !seen.insert(n.id) {
            continue;
        }
        stack.push((n.clone(), true));
        if n.op != Op::Detach {
            for s in n.src() {
                stack.push((s, false));
            }
        }
    }
    Ok(order)
}

/// The chain rule from `root` back to `targets` over the graph `order`.
fn gradients(
    root: &Tensor,
    order: &[Arc<UOp>],
    targets: &[Tensor],
    seed: Option<&Tensor>,
) -> Result<Vec<Tensor>> {
    let rn = root.node();
    let target_ids: HashSet<u64> = targets
        .iter()
        .flat_map(|t| t.lazy().shards.iter().map(|n| n.id).collect::<Vec<_>>())
        .collect();
    // Nodes from which a target is reachable.
    let mut reaches: HashSet<u64> = HashSet::new();
    for n in order {
        if target_ids.contains(&n.id)
            || (n.op != Op::Detach && n.src().iter().any(|s| reaches.contains(&s.id)))
        {
            reaches.insert(n.id);
        }
    }
    let mut grads: HashMap<u64, Tensor> = HashMap::new();
    let start = match seed {
        Some(s) => s.cast(rn.dtype)?,
        None => t(&rn).const_like(1.0),
    };
    grads.insert(rn.id, start);
    for n in order.iter().rev() {
        let Some(g) = grads.get(&n.id).cloned() else {
            continue;
        };
        if target_ids.contains(&n.id) && n.src().is_empty() {
            continue;
        }
        let src = n.src();
        if src.iter().all(|s| !reaches.contains(&s.id)) {
            continue;
        }
        let gs = rule(n, &g)?;
        for (s, gs) in src.iter().zip(gs) {
            let Some(gs) = gs else { continue };
            if !reaches.contains(&s.id) {
                continue;
            }
            let acc = match grads.remove(&s.id) {
                Some(prev) => prev.add(&gs)?,
                None => gs,
            };
            grads.insert(s.id, acc);
        }
    }
    let mut out = vec![];
    for p in targets {
        // Per shard; in the graph but with no differentiable path (e.g. only through
        // comparisons): zero.
        let l = p.lazy();
        let mut parts = vec![];
        for n in &l.shards {
            let g = match grads.get(&n.id) {
                Some(g) => g.clone(),
                None => t(n).zeros_like(),
            };
            parts.push(g.cast(n.dtype)?.node());
        }
        out.push(Tensor::from_lazy(super::multi::leaf_grad(&l, parts)));
    }
    Ok(out)
}

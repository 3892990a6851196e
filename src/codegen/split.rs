//! Split reductions across workgroups: one kernel's long reduce becomes two kernels. The first
//! reduces each of `parts` slices of a reduce axis into a scratch buffer, the parts its outermost
//! axis (so it launches `parts` times as many invocations, each looping `parts` times less); the
//! second reduces the partial results and computes the rest of the original kernel (its epilogue).
//! Both are ordinary `KernelAst`s, optimized and lowered like any other. An axis that `parts` does
//! not divide (a prime length) is padded up to a multiple of it, the padding reading the reduce's
//! identity: no loop is ever left longer than a split meant it to be.

use crate::dtype::DType;
use crate::kernel::{AstNode, AstOp, KernelAst};
use crate::ops::{compute_dtype, ReduceOp};
use crate::shape::ShapeTracker;
use std::collections::HashMap;
use std::sync::Arc;

/// The two kernels of a split, and where their buffer slots come from: `first_args[i]` is the
/// original slot bound at slot `i + 1` of the first kernel (its slot 0 is the scratch buffer),
/// and `second_args[i]` the original slot at slot `i + 2` of the second (slot 0 is the original
/// output, slot 1 the scratch buffer).
pub struct Split {
    /// Reduces each slice into the scratch buffer (its slot 0).
    pub first: KernelAst,
    /// Combines the partial results and computes the rest of the original kernel.
    pub second: KernelAst,
    /// The original slot bound at each slot of the first kernel from 1 on.
    pub first_args: Vec<usize>,
    /// The original slot bound at each slot of the second kernel from 2 on.
    pub second_args: Vec<usize>,
}

/// Split the reduce of `k` (its single reduce, wherever it is) over `axis` into `parts`, or
/// `None` when that reduce has no such axis or `parts` exceeds its length (as many parts as
/// the axis is long: each index a part, whose first kernel reduces the other axes). Where `parts`
/// does not divide the axis, the first kernel's view pads it to `parts * ceil(len / parts)`
/// with the reduce's identity (0 for a sum, through the padded view itself; for max and prod, a
/// `where` of the pad's validity).
pub fn split(k: &KernelAst, axis: usize, parts: usize) -> Option<Split> {
    let r = find_reduce(&k.root)?;
    let r = &r;
    let AstOp::Reduce(op, axes) = &r.op else {
        return None;
    };
    let src = &r.src[0];
    let full = &src.shape;
    if !axes.contains(&axis) || parts < 2 || parts > full[axis] {
        return None;
    }
    // First kernel: view the source with the axis (padded to a multiple of `parts`) split into
    // (parts, rest), `parts` moved in front, and reduce `rest` (and the other reduce axes),
    // keeping `parts`. In front, the parts are the outermost axis of the first kernel's
    // invocations: consecutive invocations (a CPU thread's run of them, a GPU's neighbouring
    // workgroups) work on one part, whose inputs they share from cache. (Where the reduce axis
    // was last, a matmul's `K`, its parts were the innermost: consecutive invocations read
    // rows a part apart and shared nothing, and a weight gradient `dyᵀ @ x` written with
    // `matmul` took 14 ms on the CPU, against 4.4 for the same product from a Linear's
    // backward.)
    let rest = full[axis].div_ceil(parts);
    let mut padded = full.clone();
    padded[axis] = rest * parts;
    let mut unmoved = full.clone();
    unmoved[axis] = rest;
    unmoved.insert(axis, parts);
    let mut order: Vec<usize> = (0..unmoved.len()).collect();
    order.remove(axis);
    order.insert(0, axis);
    let split_shape: Vec<usize> = order.iter().map(|&a| unmoved[a]).collect();
    let shifted: Vec<usize> = axes.iter().map(|&a| a + 1).collect();
    let mut partial_shape = split_shape.clone();
    for &a in &shifted {
        partial_shape[a] = 1;
    }
    let mut first_slots = SlotMap::new(1, false);
    let first_src = first_slots.renumber(src);
    let mut pad = vec![(0, 0); full.len()];
    pad[axis].1 = padded[axis] - full[axis];
    let st = ShapeTracker::contiguous(full)
        .pad(&pad)
        .reshape(&unmoved)
        .permute(&order);
    let node = |op: AstOp, dtype, src: Vec<Arc<AstNode>>| {
        Arc::new(AstNode {
            op,
            dtype,
            shape: split_shape.clone(),
            src,
        })
    };
    // An exact split is a reshape: pushed down to the loads (their views composed with it),
    // the first kernel's operands stay visible to the optimizer (staging them in workgroup
    // memory needs each operand's own axes, not those of a view over their product).
    let pushed = (padded[axis] == full[axis])
        .then(|| push_view(&first_src, &st))
        .flatten();
    let mut view =
        pushed.unwrap_or_else(|| node(AstOp::View(st.clone()), src.dtype, vec![first_src]));
    if padded[axis] != full[axis] && *op != ReduceOp::Sum {
        // The padded view reads 0 outside; max and prod need their identity there.
        let one = Arc::new(AstNode {
            op: AstOp::Const(1.0),
            dtype: DType::Bool,
            shape: full.clone(),
            src: vec![],
        });
        let valid = node(AstOp::View(st), DType::Bool, vec![one]);
        let identity = node(AstOp::Const(op.identity(src.dtype)), src.dtype, vec![]);
        view = node(AstOp::Where, src.dtype, vec![valid, view, identity]);
    }
    // Partial results pass between the kernels as computed (f32 for an f16 or bf16 reduce): a
    // partial sum rounded to f16 loses bits and overflows where the whole does not.
    let wide = compute_dtype(r.dtype);
    let partial = Arc::new(AstNode {
        op: AstOp::Reduce(*op, shifted),
        dtype: wide,
        shape: partial_shape.clone(),
        src: vec![view],
    });
    let numel: usize = partial_shape.iter().product();
    let mut first_bufs = vec![(wide, numel)];
    first_bufs.extend(first_slots.order.iter().map(|&s| k.bufs[s]));
    // Second kernel: the original AST with the reduce replaced by a reduce of the partials,
    // read as the reduce's own shape with `parts` in place of its size-1 axis (the partials
    // with their front axis moved there), so the new reduce is at the kernel's output shape
    // and can be optimized like any other.
    let mut parts_shape = r.shape.clone();
    parts_shape[axis] = parts;
    let mut stored = r.shape.clone();
    stored.remove(axis);
    stored.insert(0, parts);
    let mut back: Vec<usize> = (1..stored.len()).collect();
    back.insert(axis, 0);
    let load = Arc::new(AstNode {
        op: AstOp::Load {
            slot: 1,
            st: ShapeTracker::contiguous(&stored).permute(&back),
        },
        dtype: wide,
        shape: parts_shape,
        src: vec![],
    });
    let replacement = Arc::new(AstNode {
        op: AstOp::Reduce(*op, vec![axis]),
        dtype: r.dtype,
        shape: r.shape.clone(),
        src: vec![load],
    });
    let mut second_slots = SlotMap::new(2, true);
    let root = second_slots.replace(&k.root, r, &replacement);
    let mut second_bufs = vec![k.bufs[0], (wide, numel)];
    second_bufs.extend(second_slots.order.iter().map(|&s| k.bufs[s]));
    Some(Split {
        first: KernelAst {
            root: partial,
            bufs: first_bufs,
        },
        second: KernelAst {
            root,
            bufs: second_bufs,
        },
        first_args: first_slots.order,
        second_args: second_slots.order,
    })
}

/// `n` read through `st` (a view without padding, whose first view reads `n`'s shape in
/// order), with `st` pushed down to the loads and views under `n`'s elementwise ops; `None`
/// where something under them (an iota, a reduce) reads its own index.
fn push_view(n: &Arc<AstNode>, st: &ShapeTracker) -> Option<Arc<AstNode>> {
    let compose = |inner: &ShapeTracker| ShapeTracker {
        views: inner.views.iter().chain(&st.views).cloned().collect(),
    };
    let (op, src) = match &n.op {
        AstOp::Load { slot, st: inner } => (
            AstOp::Load {
                slot: *slot,
                st: compose(inner),
            },
            vec![],
        ),
        AstOp::View(inner) => (AstOp::View(compose(inner)), n.src.clone()),
        AstOp::Const(v) => (AstOp::Const(*v), vec![]),
        AstOp::Unary(_) | AstOp::Binary(_) | AstOp::Where | AstOp::Cast(_) => {
            let src = n
                .src
                .iter()
                .map(|s| push_view(s, st))
                .collect::<Option<Vec<_>>>()?;
            (n.op.clone(), src)
        }
        AstOp::Iota | AstOp::Reduce(..) => return None,
    };
    Some(Arc::new(AstNode {
        op,
        dtype: n.dtype,
        shape: st.shape().to_vec(),
        src,
    }))
}

/// The reduce of a kernel (the scheduler fuses at most one), as the `Arc` its parent holds.
fn find_reduce(root: &Arc<AstNode>) -> Option<Arc<AstNode>> {
    if matches!(root.op, AstOp::Reduce(..)) {
        return Some(root.clone());
    }
    let parent = root.find(
        &|n| n.src.iter().any(|s| matches!(s.op, AstOp::Reduce(..))),
        &|_| false,
    )?;
    parent
        .src
        .iter()
        .find(|s| matches!(s.op, AstOp::Reduce(..)))
        .cloned()
}

/// New slot numbers, from `first` on, for the input slots a subtree loads, in order of use.
/// With `output` set, loads of the original output (an in-place update reading what it
/// writes) keep slot 0: binding that buffer a second time, read-only, beside its written slot
/// is invalid in WebGPU (a usage conflict within one dispatch).
struct SlotMap {
    first: u32,
    output: bool,
    order: Vec<usize>,
}

impl SlotMap {
    fn new(first: u32, output: bool) -> Self {
        SlotMap {
            first,
            output,
            order: vec![],
        }
    }
    fn slot(&mut self, old: u32) -> u32 {
        if self.output && old == 0 {
            return 0;
        }
        let pos = match self.order.iter().position(|&s| s == old as usize) {
            Some(p) => p,
            None => {
                self.order.push(old as usize);
                self.order.len() - 1
            }
        };
        self.first + pos as u32
    }
    /// `n` with its loads renumbered (shared subtrees stay shared).
    fn renumber(&mut self, n: &Arc<AstNode>) -> Arc<AstNode> {
        self.rebuild(n, None, &mut HashMap::new())
    }
    /// `n` with the node `target` replaced by `with` and every other load renumbered.
    fn replace(
        &mut self,
        n: &Arc<AstNode>,
        target: &Arc<AstNode>,
        with: &Arc<AstNode>,
    ) -> Arc<AstNode> {
        self.rebuild(n, Some((target, with)), &mut HashMap::new())
    }
    fn rebuild(
        &mut self,
        n: &Arc<AstNode>,
        swap: Option<(&Arc<AstNode>, &Arc<AstNode>)>,
        memo: &mut HashMap<usize, Arc<AstNode>>,
    ) -> Arc<AstNode> {
        if let Some((target, with)) = swap {
            if Arc::ptr_eq(n, target) {
                return with.clone();
            }
        }
        let key = Arc::as_ptr(n) as usize;
        if let Some(m) = memo.get(&key) {
            return m.clone();
        }
        let op = match &n.op {
            AstOp::Load { slot, st } => AstOp::Load {
                slot: self.slot(*slot),
                st: st.clone(),
            },
            other => other.clone(),
        };
        let out = Arc::new(AstNode {
            op,
            dtype: n.dtype,
            shape: n.shape.clone(),
            src: n.src.iter().map(|s| self.rebuild(s, swap, memo)).collect(),
        });
        memo.insert(key, out.clone());
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::BinaryOp;

    /// out[i] = sum_j x[i, j] * 2 + y[i]: a reduce with an epilogue reading another buffer.
    fn kernel(rows: usize, cols: usize) -> KernelAst {
        let leaf = |op: AstOp, shape: Vec<usize>| {
            Arc::new(AstNode {
                op,
                dtype: DType::F32,
                shape,
                src: vec![],
            })
        };
        let node = |op: AstOp, shape: Vec<usize>, src: Vec<Arc<AstNode>>| {
            Arc::new(AstNode {
                op,
                dtype: DType::F32,
                shape,
                src,
            })
        };
        let x = leaf(
            AstOp::Load {
                slot: 1,
                st: ShapeTracker::contiguous(&[rows, cols]),
            },
            vec![rows, cols],
        );
        let two = leaf(AstOp::Const(2.0), vec![rows, cols]);
        let prod = node(AstOp::Binary(BinaryOp::Mul), vec![rows, cols], vec![x, two]);
        let sum = node(
            AstOp::Reduce(ReduceOp::Sum, vec![1]),
            vec![rows, 1],
            vec![prod],
        );
        let y = leaf(
            AstOp::Load {
                slot: 2,
                st: ShapeTracker::contiguous(&[rows, 1]),
            },
            vec![rows, 1],
        );
        KernelAst {
            root: node(AstOp::Binary(BinaryOp::Add), vec![rows, 1], vec![sum, y]),
            bufs: vec![
                (DType::F32, rows),
                (DType::F32, rows * cols),
                (DType::F32, rows),
            ],
        }
    }

    #[test]
    fn the_first_kernel_keeps_the_parts_and_the_second_has_the_epilogue() {
        let s = split(&kernel(3, 64), 1, 8).expect("splits");
        assert_eq!(s.first.root.shape, vec![8, 3, 1], "the parts in front");
        assert_eq!(s.first.bufs[0], (DType::F32, 24), "the scratch buffer");
        assert_eq!(s.first_args, vec![1], "the first kernel reads only x");
        assert_eq!(s.second.root.shape, vec![3, 1]);
        assert_eq!(
            s.second_args,
            vec![2],
            "the second reads y for the epilogue"
        );
        assert_eq!(s.second.bufs.len(), 3);
    }

    /// `out += sum(x)` in place: the second kernel reads its own output at slot 0, never from
    /// a second binding of the same buffer.
    #[test]
    fn an_in_place_epilogue_reads_the_output_slot() {
        let k = kernel(3, 64);
        let (sum, y) = (k.root.src[0].clone(), &k.root.src[1]);
        let out = Arc::new(AstNode {
            op: AstOp::Load {
                slot: 0,
                st: ShapeTracker::contiguous(&[3, 1]),
            },
            dtype: y.dtype,
            shape: y.shape.clone(),
            src: vec![],
        });
        let k = KernelAst {
            root: Arc::new(AstNode {
                op: k.root.op.clone(),
                dtype: k.root.dtype,
                shape: k.root.shape.clone(),
                src: vec![sum, out],
            }),
            bufs: k.bufs[..2].to_vec(),
        };
        let s = split(&k, 1, 8).expect("splits");
        assert_eq!(s.first_args, vec![1]);
        assert_eq!(
            s.second_args,
            Vec::<usize>::new(),
            "no second binding of the output"
        );
        let loads = |want: u32| {
            s.second
                .root
                .find(
                    &|n| matches!(n.op, AstOp::Load { slot, .. } if slot == want),
                    &|_| false,
                )
                .is_some()
        };
        assert!(
            loads(0) && loads(1),
            "the output and the partial sums are read"
        );
        assert_eq!(s.second.bufs.len(), 2);
    }

    #[test]
    fn parts_that_do_not_divide_the_axis_pad_it() {
        let s = split(&kernel(3, 67), 1, 8).expect("splits");
        // 67 padded to 72 = 8 x 9: the partials are [8, 3, 1].
        assert_eq!(s.first.root.shape, vec![8, 3, 1]);
        assert_eq!(s.first.root.src[0].shape, vec![8, 3, 9]);
        assert!(
            split(&kernel(3, 64), 1, 65).is_none(),
            "parts at most the length"
        );
        // As many parts as the axis is long: each element a part.
        let s = split(&kernel(3, 64), 1, 64).expect("splits");
        assert_eq!(s.first.root.shape, vec![64, 3, 1]);
        assert!(
            split(&kernel(3, 64), 0, 3).is_none(),
            "axis 0 is not reduced"
        );
    }
}

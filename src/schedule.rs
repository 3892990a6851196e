//! The scheduler: turns the lazy graph behind some target nodes into kernels. Elementwise chains
//! are inlined into their consumers (through any view), a reduce is fused into the kernel that
//! consumes it when the consumer reads it element for element, and everything else that must
//! exist in memory gets its own kernel. A kernel never binds more buffers than the backend
//! allows: when it would, an inlined subexpression is materialized instead.

use crate::dtype::DType;
use crate::error::{bail, Result};
use crate::kernel::{AstNode, AstOp, KernelAst};
use crate::ops::{Op, UnaryOp};
use crate::runtime::Buffer;
use crate::shape::{ShapeTracker, MAX_NUMEL};
use crate::uop::UOp;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

/// The elements below which an expression read by several kernels is recomputed by each, however
/// many buffers it reads (a buffer and a launch cost more than a small recomputation).
const SHARED_MIN_ELEMENTS: usize = 4096;

/// One step of a schedule.
#[derive(Debug)]
pub enum ScheduleItem {
    /// Run a kernel writing `out`'s buffer (for an `Assign`, its target's buffer).
    Kernel {
        /// The kernel.
        ast: KernelAst,
        /// The node whose value it computes.
        out: Arc<UOp>,
        /// The realized nodes bound to its input slots, in slot order (slot 1 on).
        inputs: Vec<Arc<UOp>>,
    },
    /// Move a realized buffer to another device.
    Copy {
        /// The node on the destination device.
        out: Arc<UOp>,
        /// The realized node copied from.
        src: Arc<UOp>,
    },
}

impl ScheduleItem {
    /// The node whose value the step produces.
    pub fn out(&self) -> &Arc<UOp> {
        match self {
            ScheduleItem::Kernel { out, .. } | ScheduleItem::Copy { out, .. } => out,
        }
    }
}

/// The unrealized graph below the targets, in topological order.
struct Dag {
    nodes: HashMap<u64, Arc<UOp>>,
    placed: HashSet<u64>,
    order: Vec<u64>,
    /// Number of edges into each node (from unrealized nodes), plus one per target.
    uses: HashMap<u64, usize>,
}

fn toposort(targets: &[Arc<UOp>]) -> Dag {
    let mut g = Dag {
        nodes: HashMap::new(),
        placed: HashSet::new(),
        order: vec![],
        uses: HashMap::new(),
    };
    let mut stack: Vec<(Arc<UOp>, bool)> = targets.iter().map(|t| (t.clone(), false)).collect();
    for t in targets {
        *g.uses.entry(t.id).or_default() += 1;
    }
    while let Some((n, expanded)) = stack.pop() {
        if expanded {
            if g.placed.insert(n.id) {
                g.order.push(n.id);
            }
            continue;
        }
        if g.nodes.contains_key(&n.id) {
            continue;
        }
        g.nodes.insert(n.id, n.clone());
        stack.push((n.clone(), true));
        // An empty node is a constant (see `empty_below`): nothing under it is computed.
        if n.is_realized() || n.numel() == 0 {
            continue;
        }
        for s in n.src() {
            *g.uses.entry(s.id).or_default() += 1;
            if !g.nodes.contains_key(&s.id) {
                stack.push((s, false));
            }
        }
    }
    g
}

/// Whether `n` is, or views, a node with no elements. Such a node is never computed (no kernel
/// ever binds a zero-size buffer): it reads as zeros, which is also the value of any padding
/// around it, and a reduction over it is the reduction's identity.
fn empty_below(n: &Arc<UOp>) -> bool {
    let mut cur = n.clone();
    loop {
        if cur.numel() == 0 {
            return true;
        }
        if cur.is_realized() || !cur.op.is_movement() {
            return false;
        }
        let src = cur.src()[0].clone();
        cur = src;
    }
}

/// Whether reading `n` (through views) never computes anything again: it is a buffer in memory,
/// or a reduce, which the scheduler computes once and keeps in a buffer of its own for every
/// kernel that reads it other than element for element (a matmul's output read transposed).
pub(crate) fn read_not_recomputed(n: &Arc<UOp>) -> bool {
    let base = chain(n).0;
    base.is_realized() || matches!(base.op, Op::Reduce(..))
}

/// Follow movement ops down to the node they view, returning it and the view from it.
pub(crate) fn chain(n: &Arc<UOp>) -> (Arc<UOp>, ShapeTracker) {
    let mut ops = vec![];
    let mut cur = n.clone();
    while cur.op.is_movement() && !cur.is_realized() {
        let src = cur.src()[0].clone();
        ops.push(cur);
        cur = src;
    }
    let mut st = ShapeTracker::contiguous(&cur.shape);
    for m in ops.iter().rev() {
        st = match &m.op {
            Op::Reshape => st.reshape(&m.shape),
            Op::Permute(p) => st.permute(p),
            Op::Expand => st.expand(&m.shape),
            Op::Pad(p) => st.pad(p),
            Op::Shrink(s) => st.shrink(s),
            Op::Flip(f) => st.flip(f),
            _ => unreachable!("not a movement op"),
        };
    }
    (cur, st)
}

struct Builder<'a> {
    g: &'a Dag,
    materialize: &'a mut HashSet<u64>,
    root: u64,
    /// Buffer identity -> slot; slot 0 is the output.
    slots: Vec<(BufKey, Arc<UOp>)>,
    has_reduce: bool,
    /// The reduces below the root this kernel computes (fused into it).
    fused: Vec<u64>,
    /// Inlined nodes of this kernel with the slots they (transitively) read.
    inlined: Vec<(u64, HashSet<usize>)>,
    memo: HashMap<(u64, bool), (Arc<AstNode>, HashSet<usize>)>,
    costs: HashMap<u64, usize>,
    /// Reads of the output buffer through a non-identity view, its own or one above it (a
    /// hazard for in-place writes).
    reads_out_shifted: bool,
    /// The device's kernels keep operands in registers only (`register_tiles`).
    register_tiles: bool,
}

/// Whether kernels for `device` keep their operands in registers only, with no workgroup memory
/// to stage them in: a CPU-kind optimizer target (the CPU and WASM backends, the interpreter),
/// unless a `Context` or `OPT_TARGET` asks for another kind.
pub(crate) fn register_tiles(device: crate::device::Device) -> bool {
    let kind = crate::context::opt_target().unwrap_or_else(|| device.backend().target().kind);
    kind == crate::codegen::OptTarget::Cpu
}

/// How many times a view reads each element it broadcasts (the product of its stride-0 axes),
/// the most over its views.
fn broadcast_factor(st: &ShapeTracker) -> usize {
    st.views
        .iter()
        .map(|v| {
            v.shape
                .iter()
                .zip(&v.strides)
                .filter(|&(&d, &s)| d > 1 && s == 0)
                .map(|(&d, _)| d)
                .product()
        })
        .max()
        .unwrap_or(1)
}

#[derive(Clone, PartialEq, Eq, Debug)]
enum BufKey {
    Ptr(usize),
    Node(u64),
}

fn buf_key(n: &Arc<UOp>) -> BufKey {
    match n.buffer() {
        Some(b) => BufKey::Ptr(Arc::as_ptr(&b) as usize),
        None => BufKey::Node(n.id),
    }
}

impl Builder<'_> {
    fn slot(&mut self, n: &Arc<UOp>) -> u32 {
        let key = buf_key(n);
        if let Some(i) = self.slots.iter().position(|(k, _)| *k == key) {
            return i as u32;
        }
        self.slots.push((key, n.clone()));
        (self.slots.len() - 1) as u32
    }

    /// Build the AST of `n` as read by a consumer. `exact` is true while every step from the
    /// kernel root reads each element of its source once (for exactly one output element),
    /// through nodes used once: then a reduce found below can run in this kernel.
    fn build(&mut self, n: &Arc<UOp>, exact: bool) -> (Arc<AstNode>, HashSet<usize>) {
        if empty_below(n) {
            let node = AstNode {
                op: AstOp::Const(0.0),
                dtype: n.dtype,
                shape: n.shape.clone(),
                src: vec![],
            };
            return (Arc::new(node), HashSet::new());
        }
        let (base, st) = if n.is_realized() {
            (n.clone(), ShapeTracker::contiguous(&n.shape))
        } else {
            chain(n)
        };
        let mut exact = exact && st.is_bijective(base.numel());
        // A reduce this kernel computes already, read again element for element through a node
        // that other parts of this kernel read too (a GELU's input, used three times by its
        // epilogue): the same value, not a second reduce.
        if !exact && st.is_identity() && self.fused.contains(&base.id) {
            exact = true;
        }
        let leaf =
            base.is_realized() || (self.materialize.contains(&base.id) && base.id != self.root);
        if leaf {
            let slot = self.slot(&base);
            if slot == 0 && !st.is_identity() {
                self.reads_out_shifted = true;
            }
            let node = AstNode {
                op: AstOp::Load {
                    slot,
                    st: st.clone(),
                },
                dtype: base.dtype,
                shape: st.shape().to_vec(),
                src: vec![],
            };
            return (Arc::new(node), HashSet::from([slot as usize]));
        }
        if base.op.is_elementwise() && base.id != self.root {
            // Recomputing an expression for every element of a broadcast view (inside a reduce
            // that means once per loop iteration) costs more than a buffer: materialize it.
            // Padded views read each element at most once, and a short scalar expression is
            // cheaper to recompute than to launch.
            let broadcast = st.views.iter().any(|v| {
                v.shape
                    .iter()
                    .zip(&v.strides)
                    .any(|(&d, &s)| d > 1 && s == 0)
            });
            let cost = self.cost(&base);
            // An expression of indices alone (a causal mask: `col <= row` from `iota`s) reads
            // no memory: a few integer operations beat a buffer, and inlined the C compiler
            // vectorizes it where it cannot vectorize bytes loaded at a computed index.
            let indices = cost <= 8 && self.reads_nothing(&base);
            // A single operation of several buffers under a broadcast of 16 or more (a layer
            // norm's `x̂ · γ` as a matmul's operand) is computed again for every tile of the
            // consumer's other axis where operands live in registers only: a CPU matmul reads
            // its left operand once per tile of 16-32 output columns, loading two values and
            // multiplying each time where a buffer is one load (the medium GPT's q/k/v
            // projection: 10.3 ms with `x̂ · γ` inlined, 7.3 ms with it in memory). GPU kernels
            // stage such operands in workgroup memory, computing them once per workgroup.
            let recomputed_per_tile = cost == 1
                && self.register_tiles
                && broadcast_factor(&st) >= 16
                && base.numel() >= SHARED_MIN_ELEMENTS
                && self.reads(&base, &mut HashSet::new()) >= 2;
            if broadcast
                && (cost > 1 || recomputed_per_tile)
                && !(base.numel() == 1 && cost <= 8)
                && !indices
            {
                self.materialize.insert(base.id);
                return self.build(n, exact);
            }
            // An expression read by several consumers, each inlining it, reads all its buffers
            // once per consumer: a GPT's residual stream (the embedding plus every block's
            // output so far) was summed again from up to eight buffers by each layer norm,
            // forward and backward. In a buffer of its own it is read once, written once, and
            // read once per consumer: fewer bytes where (uses - 1) * (reads - 1) > 2.
            let uses = self.g.uses.get(&base.id).copied().unwrap_or(0);
            if uses >= 2 && base.numel() >= SHARED_MIN_ELEMENTS {
                // Small operands (a row's mean broadcast over it) read next to nothing, unless
                // each consumer would compute an exponential again for every element (a
                // softmax's numerator, which its row sum, its product and their gradients
                // read: recomputed, the medium GPT's step ran 12 ms slower on the CPU).
                let full = if self.transcendental(&base, &mut HashSet::new()) {
                    0
                } else {
                    base.numel()
                };
                let reads = self.reads_of(&base, &mut HashSet::new(), full);
                if (uses - 1) * reads.saturating_sub(1) > 2 {
                    self.materialize.insert(base.id);
                    return self.build(n, exact);
                }
            }
        }
        let (inner, slots) = self.build_base(&base, exact);
        if st.is_identity() && st.shape() == base.shape.as_slice() {
            return (inner, slots);
        }
        // A view above a read of the output buffer moves that read to other elements too (a
        // 0-d load broadcast by an expand reads one element for every output).
        if slots.contains(&0) {
            self.reads_out_shifted = true;
        }
        let node = AstNode {
            op: AstOp::View(st.clone()),
            dtype: base.dtype,
            shape: st.shape().to_vec(),
            src: vec![inner],
        };
        (Arc::new(node), slots)
    }

    /// Whether `b` is computed from constants and `iota`s alone, through elementwise ops and
    /// views (no buffer, no reduce).
    fn reads_nothing(&self, b: &Arc<UOp>) -> bool {
        match b.op {
            _ if b.is_realized() => false,
            Op::Const(_) | Op::Iota => true,
            _ if b.op.is_elementwise() && !self.materialize.contains(&b.id) => {
                b.src().iter().all(|s| self.reads_nothing(&chain(s).0))
            }
            _ => false,
        }
    }

    /// The buffers (realized or materialized nodes, or kernels of their own) an inlined `b`
    /// reads, counted once each (`seen`: the nodes visited), up to 16.
    fn reads(&self, b: &Arc<UOp>, seen: &mut HashSet<u64>) -> usize {
        self.reads_of(b, seen, 0)
    }

    /// `reads`, leaving out buffers of at most an eighth of `full` elements (a row's max or
    /// mean broadcast over the row: cached, it costs a fraction of a read of the whole).
    fn reads_of(&self, b: &Arc<UOp>, seen: &mut HashSet<u64>, full: usize) -> usize {
        if !seen.insert(b.id) {
            return 0;
        }
        if b.is_realized() || !b.op.is_elementwise() || self.materialize.contains(&b.id) {
            return usize::from(b.numel() * 8 > full);
        }
        let mut n = 0;
        for s in b.src().iter().filter(|s| !empty_below(s)) {
            let (sb, _) = chain(s);
            if matches!(sb.op, Op::Const(_) | Op::Iota) {
                continue;
            }
            n += self.reads_of(&sb, seen, full);
            if n >= 16 {
                break;
            }
        }
        n
    }

    /// Whether an inlined `b` computes an exponential, a logarithm or a sine.
    fn transcendental(&self, b: &Arc<UOp>, seen: &mut HashSet<u64>) -> bool {
        if !seen.insert(b.id)
            || b.is_realized()
            || !b.op.is_elementwise()
            || self.materialize.contains(&b.id)
        {
            return false;
        }
        matches!(
            b.op,
            Op::Unary(UnaryOp::Exp2 | UnaryOp::Log2 | UnaryOp::Sin)
        ) || b
            .src()
            .iter()
            .any(|s| self.transcendental(&chain(s).0, seen))
    }

    /// Elementwise ops an inlined `b` would compute (capped; shared subexpressions counted once
    /// per path, which is what recomputation costs).
    fn cost(&mut self, b: &Arc<UOp>) -> usize {
        if let Some(&c) = self.costs.get(&b.id) {
            return c;
        }
        let c = if b.is_realized() || !b.op.is_elementwise() || self.materialize.contains(&b.id) {
            0
        } else {
            let srcs = b.src();
            let mut c = 1usize;
            for s in srcs.iter().filter(|s| !empty_below(s)) {
                let (sb, _) = chain(s);
                c = (c + self.cost(&sb)).min(1 << 20);
            }
            c
        };
        self.costs.insert(b.id, c);
        c
    }

    fn build_base(&mut self, b: &Arc<UOp>, exact: bool) -> (Arc<AstNode>, HashSet<usize>) {
        if let Some(r) = self.memo.get(&(b.id, exact)) {
            return r.clone();
        }
        let single = self.g.uses.get(&b.id).copied().unwrap_or(0) <= 1 || b.id == self.root;
        let src = b.src();
        let mk = |op: AstOp, src: Vec<Arc<AstNode>>| {
            Arc::new(AstNode {
                op,
                dtype: b.dtype,
                shape: b.shape.clone(),
                src,
            })
        };
        let mut slots = HashSet::new();
        let mut sub = |me: &mut Self, s: &Arc<UOp>, exact: bool| {
            let (a, sl) = me.build(s, exact);
            slots.extend(sl);
            a
        };
        let node = match &b.op {
            Op::Const(v) => mk(AstOp::Const(*v), vec![]),
            Op::Iota => mk(AstOp::Iota, vec![]),
            Op::Unary(u) => mk(AstOp::Unary(*u), vec![sub(self, &src[0], exact && single)]),
            Op::Binary(o) => {
                let a = sub(self, &src[0], exact && single);
                let c = sub(self, &src[1], exact && single);
                mk(AstOp::Binary(*o), vec![a, c])
            }
            Op::Where => {
                let v: Vec<_> = src.iter().map(|s| sub(self, s, exact && single)).collect();
                mk(AstOp::Where, v)
            }
            Op::Cast(d) => mk(AstOp::Cast(*d), vec![sub(self, &src[0], exact && single)]),
            Op::Detach | Op::Contiguous => return self.build(&src[0], exact),
            Op::Assign => return self.build(&src[1], exact),
            Op::Reduce(r, _) if src[0].numel() == 0 => {
                mk(AstOp::Const(r.identity(b.dtype)), vec![])
            }
            Op::Reduce(r, axes) => {
                let fuse = b.id == self.root || (exact && single && !self.has_reduce);
                if !fuse {
                    self.materialize.insert(b.id);
                    return self.build(b, exact);
                }
                self.has_reduce = true;
                if b.id != self.root {
                    self.fused.push(b.id);
                }
                mk(
                    AstOp::Reduce(*r, axes.clone()),
                    vec![sub(self, &src[0], false)],
                )
            }
            Op::Buffer
            | Op::Copy
            | Op::Reshape
            | Op::Permute(_)
            | Op::Expand
            | Op::Pad(_)
            | Op::Shrink(_)
            | Op::Flip(_) => {
                unreachable!("handled by build")
            }
        };
        if b.id != self.root && b.op.is_elementwise() {
            self.inlined.push((b.id, slots.clone()));
        }
        self.memo
            .insert((b.id, exact), (node.clone(), slots.clone()));
        (node, slots)
    }
}

/// Schedule the computation of `targets`, binding at most `max_bufs` buffers per kernel.
pub fn schedule(targets: &[Arc<UOp>], max_bufs: usize) -> Result<Vec<ScheduleItem>> {
    let g = toposort(targets);
    let mut materialize: HashSet<u64> = HashSet::new();
    for t in targets {
        if !t.is_realized() && t.numel() > 0 {
            materialize.insert(t.id);
        }
    }
    for id in &g.order {
        let n = &g.nodes[id];
        if n.is_realized() || n.numel() == 0 {
            continue;
        }
        match n.op {
            Op::Assign | Op::Contiguous => {
                materialize.insert(n.id);
            }
            Op::Copy => {
                materialize.insert(n.id);
                let src = &n.src()[0];
                if !src.is_realized() {
                    materialize.insert(src.id);
                }
            }
            _ => {}
        }
    }
    loop {
        let mut items: HashMap<u64, ScheduleItem> = HashMap::new();
        let mut fused_by: HashMap<u64, Vec<u64>> = HashMap::new();
        loop {
            // A kernel that fused a reduce which a later kernel found it needs in memory (a
            // reduce read by two kernels through one view, whose uses count that view once:
            // a GPT's `dO @ vᵀ` in the attention backward) would compute it a second time:
            // built again, it reads the reduce's buffer.
            let stale: Vec<u64> = fused_by
                .iter()
                .filter(|(_, f)| f.iter().any(|r| materialize.contains(r)))
                .map(|(id, _)| *id)
                .collect();
            for id in stale {
                items.remove(&id);
                fused_by.remove(&id);
            }
            let pending: Vec<u64> = g
                .order
                .iter()
                .copied()
                .filter(|id| materialize.contains(id) && !items.contains_key(id))
                .collect();
            if pending.is_empty() {
                break;
            }
            for id in pending {
                let n = g.nodes[&id].clone();
                if n.op == Op::Copy {
                    items.insert(
                        id,
                        ScheduleItem::Copy {
                            out: n.clone(),
                            src: n.src()[0].clone(),
                        },
                    );
                    continue;
                }
                let (item, fused) = build_kernel(&g, &n, &mut materialize, max_bufs)?;
                items.insert(id, item);
                fused_by.insert(id, fused);
            }
        }
        if let Some(ids) = order(&g, &items) {
            return Ok(ids.into_iter().filter_map(|id| items.remove(&id)).collect());
        }
        // In-place writes that read each other's buffers (two parameters whose updates use
        // both): compute such values into their own buffers first, then the writes are copies.
        let assigned: Vec<Arc<Buffer>> = items
            .values()
            .filter_map(|it| {
                let out = it.out();
                (out.op == Op::Assign)
                    .then(|| out.src()[0].buffer())
                    .flatten()
            })
            .collect();
        let mut more = false;
        for it in items.values() {
            let (out, ScheduleItem::Kernel { inputs, .. }) = (it.out(), it) else {
                continue;
            };
            if out.op != Op::Assign {
                continue;
            }
            let own = out.src()[0].buffer();
            let reads_other = inputs.iter().filter_map(|i| i.buffer()).any(|b| {
                assigned.iter().any(|a| Arc::ptr_eq(a, &b))
                    && !own.as_ref().is_some_and(|o| Arc::ptr_eq(o, &b))
            });
            if reads_other {
                let v = out.src()[1].clone();
                let (vb, _) = chain(&v);
                let id = if vb.is_realized() { v.id } else { vb.id };
                more |= g.nodes.contains_key(&id) && materialize.insert(id);
            }
        }
        if !more {
            bail!(
                Other,
                "schedule: an in-place assign is both read and written by the same step in a cycle"
            );
        }
    }
}

fn build_kernel(
    g: &Dag,
    n: &Arc<UOp>,
    materialize: &mut HashSet<u64>,
    max_bufs: usize,
) -> Result<(ScheduleItem, Vec<u64>)> {
    if n.numel() > MAX_NUMEL {
        bail!(
            Shape,
            "schedule: {:?} of shape {:?} would need a buffer of more than {} elements",
            n.op,
            n.shape,
            MAX_NUMEL
        );
    }
    let tiles_in_registers = register_tiles(n.device);
    loop {
        let mut b = Builder {
            g,
            materialize,
            root: n.id,
            slots: vec![],
            has_reduce: false,
            fused: vec![],
            inlined: vec![],
            memo: HashMap::new(),
            costs: HashMap::new(),
            reads_out_shifted: false,
            register_tiles: tiles_in_registers,
        };
        // Slot 0: the output, which for an assign is the target's buffer.
        let out_key = if n.op == Op::Assign {
            buf_key(&n.src()[0])
        } else {
            BufKey::Node(n.id)
        };
        let out_node = if n.op == Op::Assign {
            n.src()[0].clone()
        } else {
            n.clone()
        };
        b.slots.push((out_key, out_node));
        let (root, _) = if n.op.is_movement() {
            b.build(n, true)
        } else {
            b.build_base(n, true)
        };
        // A reshape of a reduce's result (`sum(axis)` without keepdim: every matmul) stores
        // the same elements in the same order: the kernel keeps the reduce's shape, so the
        // optimizer finds the reduce at the kernel's output shape (group, unroll and stage
        // act on that reduce only).
        let root = match &root.op {
            AstOp::View(st) if st.is_identity() && matches!(root.src[0].op, AstOp::Reduce(..)) => {
                root.src[0].clone()
            }
            _ => root,
        };
        let root = crate::kernel::push_views(&root);
        if n.op == Op::Assign && b.reads_out_shifted {
            // Writing in place while reading other elements of the same buffer would race:
            // compute the value into its own buffer first.
            let v = n.src()[1].clone();
            let (vb, _) = chain(&v);
            materialize.insert(if vb.is_realized() { v.id } else { vb.id });
            if !g.nodes.contains_key(&vb.id) || vb.is_realized() {
                bail!(Other, "assign: cannot schedule a copy of the value");
            }
            continue;
        }
        if b.slots.len() > max_bufs {
            let total = b.slots.len();
            let best = b
                .inlined
                .iter()
                .filter(|(_, s)| s.len() > 1 && s.len() < total)
                .max_by_key(|(_, s)| s.len())
                .map(|(id, _)| *id);
            match best {
                Some(id) => {
                    materialize.insert(id);
                    continue;
                }
                None => bail!(
                    Other,
                    "schedule: a kernel for shape {:?} needs {total} buffers but the device allows {max_bufs}",
                    n.shape
                ),
            }
        }
        let bufs: Vec<(DType, usize)> = b.slots.iter().map(|(_, u)| (u.dtype, u.numel())).collect();
        let mut bufs = bufs;
        bufs[0] = (n.dtype, n.numel());
        let inputs: Vec<Arc<UOp>> = b.slots.iter().skip(1).map(|(_, u)| u.clone()).collect();
        let item = ScheduleItem::Kernel {
            ast: KernelAst { root, bufs },
            out: n.clone(),
            inputs,
        };
        return Ok((item, b.fused));
    }
}

/// Order the kernels so that every kernel runs after the ones producing its inputs, and a
/// kernel writing a buffer in place runs after every kernel reading its old contents.
/// `None` when the in-place writes form a cycle.
fn order(g: &Dag, items: &HashMap<u64, ScheduleItem>) -> Option<Vec<u64>> {
    let ids: Vec<u64> = g
        .order
        .iter()
        .copied()
        .filter(|id| items.contains_key(id))
        .collect();
    let mut deps: HashMap<u64, Vec<u64>> = HashMap::new();
    let reads = |item: &ScheduleItem, prev: &Arc<UOp>| -> bool {
        let inputs = match item {
            ScheduleItem::Kernel { inputs, .. } => inputs.clone(),
            ScheduleItem::Copy { src, .. } => vec![src.clone()],
        };
        match prev.buffer() {
            Some(pb) => inputs
                .iter()
                .any(|i| i.buffer().is_some_and(|b| Arc::ptr_eq(&b, &pb))),
            None => inputs.iter().any(|i| i.id == prev.id),
        }
    };
    for id in &ids {
        let d = deps.entry(*id).or_default();
        match &items[id] {
            ScheduleItem::Kernel { inputs, .. } => {
                d.extend(
                    inputs
                        .iter()
                        .filter(|i| items.contains_key(&i.id) && !i.is_realized())
                        .map(|i| i.id),
                );
            }
            ScheduleItem::Copy { src, .. } => {
                if items.contains_key(&src.id) {
                    d.push(src.id);
                }
            }
        }
        let out = items[id].out().clone();
        if out.op == Op::Assign {
            // Runs after the previous version of the buffer exists and after every other
            // kernel that reads that previous version.
            let Some(prev) = out.src().first().cloned() else {
                continue;
            };
            let mut after: Vec<u64> = ids
                .iter()
                .copied()
                .filter(|r| r != id && reads(&items[r], &prev))
                .collect();
            if items.contains_key(&prev.id) {
                after.push(prev.id);
            }
            let v = &out.src()[1];
            let (vb, _) = chain(v);
            after.extend(
                [v.id, vb.id]
                    .into_iter()
                    .filter(|c| items.contains_key(c) && c != id),
            );
            deps.entry(*id).or_default().extend(after);
        }
    }
    let mut out = vec![];
    let mut done: HashSet<u64> = HashSet::new();
    let mut visiting: HashSet<u64> = HashSet::new();
    fn visit(
        id: u64,
        deps: &HashMap<u64, Vec<u64>>,
        done: &mut HashSet<u64>,
        visiting: &mut HashSet<u64>,
        out: &mut Vec<u64>,
    ) -> Option<()> {
        if done.contains(&id) {
            return Some(());
        }
        if !visiting.insert(id) {
            return None;
        }
        for &d in deps.get(&id).map(|v| v.as_slice()).unwrap_or(&[]) {
            visit(d, deps, done, visiting, out)?;
        }
        visiting.remove(&id);
        done.insert(id);
        out.push(id);
        Some(())
    }
    for id in &ids {
        visit(*id, &deps, &mut done, &mut visiting, &mut out)?;
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    //! Fusion decisions on hand-built graphs (no tensors): which nodes get kernels, and what
    //! each kernel binds.
    use super::*;
    use crate::device::Device;
    use crate::ops::{BinaryOp, ReduceOp, UnaryOp};

    fn leaf(shape: &[usize]) -> Arc<UOp> {
        let n: usize = shape.iter().product();
        let buf = Device::Interp.backend().alloc(n * 4).expect("alloc");
        UOp::from_buffer(Arc::new(buf), DType::F32, shape.to_vec())
    }
    fn node(op: Op, shape: &[usize], src: Vec<Arc<UOp>>) -> Arc<UOp> {
        UOp::new(op, DType::F32, shape.to_vec(), Device::Interp, src)
    }
    fn binary(op: BinaryOp, a: &Arc<UOp>, b: &Arc<UOp>) -> Arc<UOp> {
        node(Op::Binary(op), &a.shape, vec![a.clone(), b.clone()])
    }
    fn kernels(items: &[ScheduleItem]) -> Vec<&KernelAst> {
        items
            .iter()
            .filter_map(|i| match i {
                ScheduleItem::Kernel { ast, .. } => Some(ast),
                ScheduleItem::Copy { .. } => None,
            })
            .collect()
    }

    #[test]
    fn elementwise_ops_inline_into_the_reduce_that_reads_them() {
        let (a, b) = (leaf(&[4, 8]), leaf(&[4, 8]));
        let prod = binary(BinaryOp::Mul, &a, &b);
        let e = node(Op::Unary(UnaryOp::Exp2), &[4, 8], vec![prod]);
        let s = node(Op::Reduce(ReduceOp::Sum, vec![1]), &[4, 1], vec![e]);
        let items = schedule(&[s], usize::MAX).expect("schedule");
        let ks = kernels(&items);
        assert_eq!(ks.len(), 1);
        assert!(matches!(ks[0].root.op, AstOp::Reduce(ReduceOp::Sum, _)));
        assert_eq!(ks[0].bufs.len(), 3, "output, a and b");
    }

    #[test]
    fn a_reduce_read_through_a_broadcast_gets_its_own_kernel() {
        // x - max(x, axis=1): the max is read by every element of its row.
        let x = leaf(&[4, 8]);
        let m = node(Op::Reduce(ReduceOp::Max, vec![1]), &[4, 1], vec![x.clone()]);
        let mb = node(Op::Expand, &[4, 8], vec![m]);
        let neg = node(Op::Unary(UnaryOp::Neg), &[4, 8], vec![mb]);
        let d = binary(BinaryOp::Add, &x, &neg);
        let items = schedule(&[d], usize::MAX).expect("schedule");
        let ks = kernels(&items);
        assert_eq!(ks.len(), 2);
        assert!(matches!(ks[0].root.op, AstOp::Reduce(ReduceOp::Max, _)));
        assert_eq!(
            ks[0].bufs[0],
            (DType::F32, 4),
            "the max has a buffer of its own"
        );
        assert_eq!(ks[1].bufs.len(), 3, "output, x and the max");
    }

    #[test]
    fn a_kernel_over_the_buffer_limit_is_split() {
        let xs: Vec<Arc<UOp>> = (0..6).map(|_| leaf(&[16])).collect();
        let mut acc = xs[0].clone();
        for x in &xs[1..] {
            acc = binary(BinaryOp::Add, &acc, x);
        }
        let one = schedule(std::slice::from_ref(&acc), usize::MAX).expect("schedule");
        assert_eq!(kernels(&one).len(), 1);
        assert_eq!(kernels(&one)[0].bufs.len(), 7);
        let split = schedule(&[acc], 4).expect("schedule");
        let ks = kernels(&split);
        assert!(ks.len() > 1, "split into {} kernels", ks.len());
        assert!(
            ks.iter().all(|k| k.bufs.len() <= 4),
            "every kernel within the limit"
        );
    }

    #[test]
    fn an_assign_reading_other_elements_of_its_target_computes_the_value_first() {
        // x.assign(flip(x) + 1): writing in place while reading x reversed would race.
        let x = leaf(&[8]);
        let f = node(Op::Flip(vec![true]), &[8], vec![x.clone()]);
        let one = node(Op::Const(1.0), &[8], vec![]);
        let v = binary(BinaryOp::Add, &f, &one);
        let a = node(Op::Assign, &[8], vec![x, v]);
        let items = schedule(&[a], usize::MAX).expect("schedule");
        assert_eq!(kernels(&items).len(), 2, "the value, then the copy into x");
        let plain_read = {
            let y = leaf(&[8]);
            let v = binary(BinaryOp::Add, &y, &one);
            node(Op::Assign, &[8], vec![y, v])
        };
        let items = schedule(&[plain_read], usize::MAX).expect("schedule");
        assert_eq!(kernels(&items).len(), 1, "y += 1 writes in place directly");
    }
}

//! The kernel IR, handed from the scheduler to codegen. `KernelAst` is one scheduled kernel: a
//! tree of loads through views, elementwise ops and at most one fused reduce, plus its buffer
//! slots. Lowering turns it into a `KGraph`: an SSA graph of scalar ops with explicit index
//! arithmetic, hash-consed and simplified on construction by the rules of `rewrite.rs`. The
//! index of a view (`st_index`) is built here too, so the views of `shape.rs` stay plain data.

pub mod rewrite;

use crate::dtype::DType;
use crate::ops::{BinaryOp, ReduceOp, UnaryOp};
use crate::shape::{ShapeTracker, View, INDEX};
use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

/// Range ids from here up stand in for guarded index terms (`rewrite::simplify_given`).
pub(crate) const GIVEN_IDS: u32 = 60;
/// The bits of `KGraph::ranges` that are loops (not stand-ins).
pub const LOOP_BITS: u64 = (1u64 << GIVEN_IDS) - 1;

/// A node of a kernel's AST.
#[derive(Debug, Clone)]
pub struct AstNode {
    /// What the node computes.
    pub op: AstOp,
    /// The element type of its value.
    pub dtype: DType,
    /// Its shape (a reduce's keeps the reduced axes as size 1).
    pub shape: Vec<usize>,
    /// Its operands.
    pub src: Vec<Arc<AstNode>>,
}

#[derive(Debug, Clone)]
/// What a node of a kernel's AST computes.
pub enum AstOp {
    /// Read buffer `slot` through a view whose shape is this node's shape.
    Load {
        /// The buffer slot read.
        slot: u32,
        /// The view it is read through.
        st: ShapeTracker,
    },
    /// A scalar broadcast to the node's shape.
    Const(f64),
    /// `0, 1, 2, …` along the node's 1-D shape (i32).
    Iota,
    /// Re-address an inlined subexpression (`src[0]`, contiguous in its own shape).
    View(ShapeTracker),
    /// An elementwise op of `src[0]`.
    Unary(UnaryOp),
    /// An elementwise op of `src[0]` and `src[1]`.
    Binary(BinaryOp),
    /// `src[0] ? src[1] : src[2]`.
    Where,
    /// Convert `src[0]` to the dtype.
    Cast(DType),
    /// Reduce `src[0]` over the listed axes (kept as size 1).
    Reduce(ReduceOp, Vec<usize>),
}

impl AstNode {
    /// The number of elements of the node's shape.
    pub fn numel(&self) -> usize {
        self.shape.iter().product()
    }
    /// The first node below (or at) this one that satisfies `f`, not looking below nodes
    /// where `stop` holds. Shared subtrees are visited once (ASTs are DAGs: a plain recursion
    /// would be exponential).
    pub fn find(
        &self,
        f: &dyn Fn(&AstNode) -> bool,
        stop: &dyn Fn(&AstNode) -> bool,
    ) -> Option<&AstNode> {
        let mut seen = std::collections::HashSet::new();
        let mut stack = vec![self];
        while let Some(n) = stack.pop() {
            if !seen.insert(n as *const AstNode) {
                continue;
            }
            if f(n) {
                return Some(n);
            }
            if !stop(n) {
                stack.extend(n.src.iter().rev().map(|s| s.as_ref()));
            }
        }
        None
    }
}

/// `n` with every view that only reorders a computed value (a permutation or reshape of an
/// elementwise expression of loads: a convolution's input gradient permutes the product
/// `dy * w` before summing it) moved onto the loads below it. The expression's operands are
/// then loads of the kernel's own shape, which the optimizer sees one by one (a staged reduce
/// tiles each; a view of a computed value is a single operand it can only read as a whole).
/// Views that pad, broadcast, flip or drop elements stay, as do those above reduces or
/// `iota`s.
pub fn push_views(n: &Arc<AstNode>) -> Arc<AstNode> {
    fn walk(n: &Arc<AstNode>, memo: &mut HashMap<usize, Arc<AstNode>>) -> Arc<AstNode> {
        let key = Arc::as_ptr(n) as usize;
        if let Some(r) = memo.get(&key) {
            return r.clone();
        }
        let src: Vec<Arc<AstNode>> = n.src.iter().map(|s| walk(s, memo)).collect();
        let moved = match &n.op {
            AstOp::View(st) => reorder_of(st, &src[0].shape)
                .and_then(|m| move_into(&src[0], &m, &mut HashMap::new())),
            _ => None,
        };
        let r = moved.unwrap_or_else(|| {
            if src.iter().zip(&n.src).all(|(a, b)| Arc::ptr_eq(a, b)) {
                n.clone()
            } else {
                Arc::new(AstNode {
                    src,
                    ..(**n).clone()
                })
            }
        });
        memo.insert(key, r.clone());
        r
    }
    walk(n, &mut HashMap::new())
}

/// A view of a contiguous value of shape `base` that only reorders it, as a reshape to the
/// view's axes in memory order followed by a permutation to its own order: (reshaped shape,
/// permutation). `None` for any other view.
fn reorder_of(st: &ShapeTracker, base: &[usize]) -> Option<(Vec<usize>, Vec<usize>)> {
    let [v] = st.views.as_slice() else {
        return None;
    };
    if v.mask.is_some()
        || v.offset != 0
        || v.shape.iter().product::<usize>() != base.iter().product::<usize>()
    {
        return None;
    }
    let mut order: Vec<usize> = (0..v.shape.len()).collect();
    // Size-1 axes (stride 0) last: where they go does not change the order of elements.
    order.sort_by_key(|&a| (v.shape[a] == 1, std::cmp::Reverse(v.strides[a])));
    let shape: Vec<usize> = order.iter().map(|&a| v.shape[a]).collect();
    let contiguous = crate::shape::strides_for(&shape);
    let reorders = order
        .iter()
        .zip(&contiguous)
        .all(|(&a, &c)| v.shape[a] == 1 || v.strides[a] == c);
    if !reorders || order.iter().enumerate().all(|(i, &a)| i == a) {
        return None;
    }
    let mut back = vec![0; order.len()];
    for (i, &a) in order.iter().enumerate() {
        back[a] = i;
    }
    Some((shape, back))
}

/// `n` (an elementwise expression of loads, constants and views) reshaped to `m.0` and
/// permuted by `m.1`, the movement applied to its leaves; `None` if a reduce or `iota` is
/// below it.
fn move_into(
    n: &Arc<AstNode>,
    m: &(Vec<usize>, Vec<usize>),
    memo: &mut HashMap<usize, Option<Arc<AstNode>>>,
) -> Option<Arc<AstNode>> {
    let key = Arc::as_ptr(n) as usize;
    if let Some(r) = memo.get(&key) {
        return r.clone();
    }
    let moved = |st: &ShapeTracker| st.clone().reshape(&m.0).permute(&m.1);
    let op = match &n.op {
        AstOp::Load { slot, st } => Some(AstOp::Load {
            slot: *slot,
            st: moved(st),
        }),
        AstOp::View(st) => Some(AstOp::View(moved(st))),
        AstOp::Const(_) | AstOp::Unary(_) | AstOp::Binary(_) | AstOp::Where | AstOp::Cast(_) => {
            Some(n.op.clone())
        }
        AstOp::Iota | AstOp::Reduce(..) => None,
    };
    let r = op.and_then(|op| {
        let src = match &n.op {
            // A view's source stays: the view re-addresses it.
            AstOp::View(_) => n.src.clone(),
            _ => n
                .src
                .iter()
                .map(|s| move_into(s, m, memo))
                .collect::<Option<Vec<_>>>()?,
        };
        let shape = m.1.iter().map(|&a| m.0[a]).collect();
        Some(Arc::new(AstNode {
            op,
            dtype: n.dtype,
            shape,
            src,
        }))
    });
    memo.insert(key, r.clone());
    r
}

/// One kernel: its AST and the (dtype, element count) of each buffer slot; slot 0 is written.
#[derive(Clone, Debug)]
pub struct KernelAst {
    /// The value written to slot 0.
    pub root: Arc<AstNode>,
    /// (dtype, elements) of each buffer slot.
    pub bufs: Vec<(DType, usize)>,
}

/// One line per node, sources first; a subtree shared by several parents is printed once and
/// referred to by its number.
impl fmt::Display for KernelAst {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fn visit(
            n: &AstNode,
            ids: &mut HashMap<usize, usize>,
            f: &mut fmt::Formatter<'_>,
        ) -> std::result::Result<usize, fmt::Error> {
            let p = n as *const AstNode as usize;
            if let Some(&i) = ids.get(&p) {
                return Ok(i);
            }
            let srcs = n
                .src
                .iter()
                .map(|s| visit(s, ids, f))
                .collect::<std::result::Result<Vec<_>, _>>()?;
            let i = ids.len();
            ids.insert(p, i);
            let op = match &n.op {
                AstOp::Load { slot, st } => format!("Load b{slot} {:?}", st.views),
                AstOp::View(st) => format!("View {:?}", st.views),
                other => format!("{other:?}"),
            };
            writeln!(f, "  %{i} {} {:?} = {op} {srcs:?}", n.dtype, n.shape)?;
            Ok(i)
        }
        let bufs: Vec<String> = self
            .bufs
            .iter()
            .enumerate()
            .map(|(i, (dt, n))| format!("b{i}: {dt}[{n}]"))
            .collect();
        writeln!(f, "kernel ({})", bufs.join(", "))?;
        visit(&self.root, &mut HashMap::new(), f).map(|_| ())
    }
}

impl KernelAst {
    /// A structural key of the AST (shared subtrees numbered once), for program caches: equal
    /// keys lower to the same program, so a repeated step skips lowering.
    pub fn key(&self) -> String {
        use std::fmt::Write;
        // Written straight into `out` (no string per node): eager steps build it per kernel.
        fn visit(n: &AstNode, ids: &mut FastMap<usize, usize>, out: &mut String) -> usize {
            let p = n as *const AstNode as usize;
            if let Some(&i) = ids.get(&p) {
                return i;
            }
            let srcs: Vec<usize> = n.src.iter().map(|s| visit(s, ids, out)).collect();
            let i = ids.len();
            ids.insert(p, i);
            let _ = match &n.op {
                AstOp::Const(v) => write!(out, "{i}=C{}", v.to_bits()),
                other => write!(out, "{i}={other:?}"),
            };
            let _ = write!(out, ":{}:{:?}:{srcs:?};", n.dtype, n.shape);
            i
        }
        let mut out = String::with_capacity(1024);
        let _ = write!(
            out,
            "{:?}|",
            self.bufs.iter().map(|b| b.0).collect::<Vec<_>>()
        );
        visit(&self.root, &mut FastMap::default(), &mut out);
        out
    }
}

/// A node of a `KGraph`: its index in `KGraph::nodes`.
pub type Ref = u32;

/// An op of the kernel graph.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum KOp {
    /// The global index: which output element this invocation computes.
    Gidx,
    /// The index of this invocation within its workgroup (`0..local_size`).
    Lidx,
    /// The index of this invocation's workgroup.
    Wgid,
    /// src: `[idx]`, or `[idx, sync]`: a read of workgroup array `id` (shared by the
    /// invocations of a workgroup); with a `Sync`, of what that staging step wrote.
    LoadShared(u32),
    /// src: `[idx, val]`; `shared[idx] = val` of workgroup array `id`, inside a loop (a staging
    /// step of `Sync`). Its value is a `Bool` token.
    StoreShared(u32),
    /// src: the `StoreShared`s of one staging step: the workgroup waits, every invocation
    /// stores its share of a tile, the workgroup waits again; loads that name it read the tile.
    /// Its value is a `Bool` token.
    Sync,
    /// A reduce loop variable, `0..size`.
    Range {
        /// Which loop (ids are unique within a kernel).
        id: u32,
        /// Its trip count.
        size: u32,
    },
    /// A constant, as the bits of an f64.
    Const(u64),
    /// src: `[a]`.
    Unary(UnaryOp),
    /// src: `[a, b]`; a comparison's dtype is `Bool`.
    Binary(BinaryOp),
    /// src: [cond, a, b]
    Where,
    /// src: `[x]`; the node's dtype is the target.
    Cast,
    /// src: `[idx]` or `[idx, gate]`; a load whose gate is false reads 0.
    Load(u32),
    /// src: [value, range...]
    Reduce(ReduceOp),
    /// src: `[a]`; the sum of `a` over the `size` invocations of this one's subgroup (the
    /// consecutive local indices `lidx / size * size ..`), in every one of them.
    SubgroupSum(u32),
}

#[derive(Clone, Debug, Eq)]
/// A node of a `KGraph`: an op, the dtype of its value and its operands. Equal nodes are
/// stored once.
pub struct Node {
    /// What it computes.
    pub op: KOp,
    /// The dtype of its value.
    pub dtype: DType,
    /// Its operands, earlier nodes of the graph.
    pub src: Srcs,
}

/// A node's operands, inline up to three (every op but a reduce's and a staging step's): the
/// optimizer's search builds millions of nodes, and a heap allocation each was a third of it.
pub type Srcs = smallvec::SmallVec<[Ref; 3]>;

/// Equal op, dtype and operands. The operands are compared one by one: a derived comparison
/// calls `memcmp` for these few words, and the optimizer's search, which interns every
/// candidate's nodes, spent 30% of its time in that call.
impl PartialEq for Node {
    fn eq(&self, o: &Node) -> bool {
        self.op == o.op
            && self.dtype == o.dtype
            && self.src.len() == o.src.len()
            && self.src.iter().zip(&o.src).all(|(a, b)| a == b)
    }
}

/// What the derived hash would be (equal nodes hash alike: they have equal fields).
impl std::hash::Hash for Node {
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        self.op.hash(h);
        self.dtype.hash(h);
        self.src.hash(h);
    }
}

/// A hash map for the kernel graphs' small integer keys: a multiply-rotate hash (FxHash's),
/// many times faster than the default SipHash, which the optimizer's search spent most of its
/// time in. (No untrusted keys reach these maps.)
pub type FastMap<K, V> = HashMap<K, V, std::hash::BuildHasherDefault<FastHasher>>;

/// A hash set with `FastMap`'s hasher.
pub type FastSet<K> = std::collections::HashSet<K, std::hash::BuildHasherDefault<FastHasher>>;

/// The hasher of `FastMap`.
#[derive(Clone, Copy, Default)]
pub struct FastHasher(u64);

impl std::hash::Hasher for FastHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut b = [0u8; 8];
            b[..chunk.len()].copy_from_slice(chunk);
            self.write_u64(u64::from_le_bytes(b));
        }
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = (self.0.rotate_left(5) ^ v).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
    fn write_u32(&mut self, v: u32) {
        self.write_u64(u64::from(v));
    }
    fn write_usize(&mut self, v: usize) {
        self.write_u64(v as u64);
    }
}

/// A kernel under construction: hash-consed nodes (so equal subexpressions are shared) plus
/// value bounds of integer nodes, which the rewrite rules use to drop needless `/`, `%` and
/// comparisons.
#[derive(Clone, Debug, Default)]
pub struct KGraph {
    /// Every node, operands before users.
    pub nodes: Vec<Node>,
    /// Per node, the `(lo, hi)` range its value is known to lie in (integers; ±inf when unknown).
    pub bounds: Vec<(f64, f64)>,
    /// Bit i set: the node depends on range id i.
    pub ranges: Vec<u64>,
    map: FastMap<Node, Ref>,
    /// What `make` returned for each node it was offered (the rules are a function of the
    /// node and of the nodes and bounds before it, which never change).
    made: FastMap<Node, Ref>,
    next_range: u32,
}

impl KGraph {
    /// An empty graph.
    pub fn new() -> Self {
        Self::default()
    }

    /// The node `r`.
    pub fn node(&self, r: Ref) -> &Node {
        &self.nodes[r as usize]
    }

    /// The value of `r` if it is a constant.
    pub fn const_value(&self, r: Ref) -> Option<f64> {
        match self.node(r).op {
            KOp::Const(bits) => Some(f64::from_bits(bits)),
            _ => None,
        }
    }

    /// Insert a node, first offering it to the rewrite rules.
    pub fn make(&mut self, op: KOp, dtype: DType, src: &[Ref]) -> Ref {
        let n = Node {
            op,
            dtype,
            src: Srcs::from_slice(src),
        };
        if let Some(&r) = self.made.get(&n) {
            return r;
        }
        let r = match rewrite::simplify(self, &n.op, n.dtype, &n.src) {
            Some(r) => r,
            None => self.intern(n.clone()),
        };
        self.made.insert(n, r);
        r
    }

    /// Insert a node as is (no rewriting).
    pub fn intern(&mut self, n: Node) -> Ref {
        if let Some(&r) = self.map.get(&n) {
            return r;
        }
        let bounds = rewrite::bounds(self, &n);
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

    /// The constant `v` of `dtype` (rounded to it).
    pub fn konst(&mut self, v: f64, dtype: DType) -> Ref {
        let v = dtype.normalize(v);
        self.intern(Node {
            op: KOp::Const(v.to_bits()),
            dtype,
            src: Srcs::new(),
        })
    }
    /// The index constant `v` (i32).
    pub fn int(&mut self, v: i64) -> Ref {
        self.konst(v as f64, INDEX)
    }
    /// The `Bool` constant `v`.
    pub fn bool_const(&mut self, v: bool) -> Ref {
        self.konst(v as u8 as f64, DType::Bool)
    }
    /// The global index of a launch of `size` invocations (bounded to `0..size`).
    pub fn gidx(&mut self, size: usize) -> Ref {
        let r = self.intern(Node {
            op: KOp::Gidx,
            dtype: INDEX,
            src: Srcs::new(),
        });
        self.bounds[r as usize] = (0.0, size.saturating_sub(1) as f64);
        r
    }
    /// The local index of a workgroup of `size` invocations.
    pub fn lidx(&mut self, size: usize) -> Ref {
        let r = self.intern(Node {
            op: KOp::Lidx,
            dtype: INDEX,
            src: Srcs::new(),
        });
        self.bounds[r as usize] = (0.0, size.saturating_sub(1) as f64);
        r
    }
    /// The workgroup index of a grid of `count` workgroups.
    pub fn wgid(&mut self, count: usize) -> Ref {
        let r = self.intern(Node {
            op: KOp::Wgid,
            dtype: INDEX,
            src: Srcs::new(),
        });
        self.bounds[r as usize] = (0.0, count.saturating_sub(1) as f64);
        r
    }
    /// The sum of `a` over this invocation's subgroup of `size` invocations.
    pub fn subgroup_sum(&mut self, a: Ref, size: u32) -> Ref {
        let dt = self.node(a).dtype;
        self.make(KOp::SubgroupSum(size), dt, &[a])
    }
    /// Element `idx` of workgroup array `id`.
    pub fn load_shared(&mut self, id: u32, dtype: DType, idx: Ref) -> Ref {
        self.make(KOp::LoadShared(id), dtype, &[idx])
    }
    /// Element `idx` of workgroup array `id` as the staging step `sync` left it.
    pub fn load_staged(&mut self, id: u32, dtype: DType, idx: Ref, sync: Ref) -> Ref {
        self.make(KOp::LoadShared(id), dtype, &[idx, sync])
    }
    /// A staging step: `stores` are `(array id, idx, val)`, written between two barriers.
    pub fn sync(&mut self, stores: &[(u32, Ref, Ref)]) -> Ref {
        let src = stores
            .iter()
            .map(|&(id, idx, val)| self.make(KOp::StoreShared(id), DType::Bool, &[idx, val]))
            .collect::<Srcs>();
        self.make(KOp::Sync, DType::Bool, &src)
    }
    /// A new reduce loop variable `0..size`.
    pub fn range(&mut self, size: usize) -> Ref {
        let id = self.next_range;
        assert!(
            id < GIVEN_IDS,
            "a kernel has at most {GIVEN_IDS} reduce loops"
        );
        self.next_range += 1;
        self.intern(Node {
            op: KOp::Range {
                id,
                size: size as u32,
            },
            dtype: INDEX,
            src: Srcs::new(),
        })
    }
    /// `a op b`, simplified by the rewrite rules.
    pub fn binary(&mut self, op: BinaryOp, a: Ref, b: Ref) -> Ref {
        let dt = if op.is_cmp() {
            DType::Bool
        } else {
            self.node(a).dtype
        };
        self.make(KOp::Binary(op), dt, &[a, b])
    }
    /// `op a`, simplified by the rewrite rules.
    pub fn unary(&mut self, op: UnaryOp, a: Ref) -> Ref {
        let dt = self.node(a).dtype;
        self.make(KOp::Unary(op), dt, &[a])
    }
    /// `a + b`.
    pub fn add(&mut self, a: Ref, b: Ref) -> Ref {
        self.binary(BinaryOp::Add, a, b)
    }
    /// `a * b`.
    pub fn mul(&mut self, a: Ref, b: Ref) -> Ref {
        self.binary(BinaryOp::Mul, a, b)
    }
    /// `a / b`.
    pub fn div(&mut self, a: Ref, b: Ref) -> Ref {
        self.binary(BinaryOp::Div, a, b)
    }
    /// `a % b`.
    pub fn modulo(&mut self, a: Ref, b: Ref) -> Ref {
        self.binary(BinaryOp::Mod, a, b)
    }
    /// `a < b`.
    pub fn lt(&mut self, a: Ref, b: Ref) -> Ref {
        self.binary(BinaryOp::CmpLt, a, b)
    }
    /// a <= b, for integers: a < b + 1.
    pub fn le(&mut self, a: Ref, b: Ref) -> Ref {
        let one = self.int(1);
        let b1 = self.add(b, one);
        self.lt(a, b1)
    }
    /// `a & b`.
    pub fn and(&mut self, a: Ref, b: Ref) -> Ref {
        self.binary(BinaryOp::And, a, b)
    }
    /// `c ? a : b`.
    pub fn where_(&mut self, c: Ref, a: Ref, b: Ref) -> Ref {
        let dt = self.node(a).dtype;
        self.make(KOp::Where, dt, &[c, a, b])
    }
    /// `a` converted to `dtype`.
    pub fn cast(&mut self, a: Ref, dtype: DType) -> Ref {
        self.make(KOp::Cast, dtype, &[a])
    }
    /// Element `idx` of buffer `slot`, or 0 where `gate` is false.
    pub fn load(&mut self, slot: u32, dtype: DType, idx: Ref, gate: Ref) -> Ref {
        self.make(KOp::Load(slot), dtype, &[idx, gate])
    }
    /// Reduce `value` over the loops `ranges`.
    pub fn reduce(&mut self, op: ReduceOp, value: Ref, ranges: &[Ref]) -> Ref {
        let dt = self.node(value).dtype;
        let mut src = Srcs::from_slice(&[value]);
        src.extend_from_slice(ranges);
        self.make(KOp::Reduce(op), dt, &src)
    }
    /// Whether `r`'s value changes with loop variable `range` (inside a reduce over it).
    pub fn depends_on(&self, r: Ref, range: Ref) -> bool {
        match self.node(range).op {
            KOp::Range { id, .. } => self.ranges[r as usize] & (1u64 << id) != 0,
            _ => false,
        }
    }
    /// Every node `roots` are computed from, themselves included.
    pub fn reachable(&self, roots: &[Ref]) -> FastSet<Ref> {
        let mut seen = FastSet::default();
        let mut stack = roots.to_vec();
        while let Some(r) = stack.pop() {
            if seen.insert(r) {
                stack.extend(self.node(r).src.iter().copied());
            }
        }
        seen
    }
    /// Rebuild `r` with every key of `map` replaced by its value (rules run again on the
    /// rebuilt nodes). Unlike `substitute` the keys need not be ranges.
    pub fn replace(&mut self, r: Ref, map: &FastMap<Ref, Ref>) -> Ref {
        self.replace_rec(r, map, &mut FastMap::default())
    }
    fn replace_rec(
        &mut self,
        r: Ref,
        map: &FastMap<Ref, Ref>,
        memo: &mut FastMap<Ref, Ref>,
    ) -> Ref {
        if let Some(&t) = map.get(&r).or_else(|| memo.get(&r)) {
            return t;
        }
        let n = self.node(r).clone();
        let src: Srcs = n
            .src
            .iter()
            .map(|&s| self.replace_rec(s, map, memo))
            .collect();
        let out = if src == n.src {
            r
        } else {
            self.make(n.op, n.dtype, &src)
        };
        memo.insert(r, out);
        out
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
        let src: Srcs = n
            .src
            .iter()
            .map(|&s| self.subst_rec(s, from, to, memo))
            .collect();
        let out = self.make(n.op, n.dtype, &src);
        memo.insert(r, out);
        out
    }
}

/// One line per node: `%ref dtype = op [sources] (bounds)`.
impl fmt::Display for KGraph {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, n) in self.nodes.iter().enumerate() {
            let op = match n.op {
                KOp::Const(bits) => format!("Const({})", f64::from_bits(bits)),
                ref other => format!("{other:?}"),
            };
            writeln!(f, "  %{i} {} = {op} {:?}", n.dtype, n.src)?;
        }
        Ok(())
    }
}

// ---- index arithmetic of views

/// (index, valid) of this view for the multi-index `idx`.
pub fn view_index(g: &mut KGraph, v: &View, idx: &[Ref]) -> (Ref, Ref) {
    let mut lin = g.int(v.offset as i64);
    for (i, &ix) in idx.iter().enumerate() {
        if v.strides[i] != 0 && v.shape[i] != 1 {
            let st = g.int(v.strides[i] as i64);
            let term = g.mul(ix, st);
            lin = g.add(lin, term);
        }
    }
    let mut valid = g.bool_const(true);
    if let Some(m) = &v.mask {
        for (i, &(lo, hi)) in m.iter().enumerate() {
            if lo > 0 {
                let c = g.int(lo as i64);
                let ok = g.le(c, idx[i]);
                valid = g.and(valid, ok);
            }
            if hi < v.shape[i] {
                let c = g.int(hi as i64);
                let ok = g.lt(idx[i], c);
                valid = g.and(valid, ok);
            }
        }
    }
    (lin, valid)
}

/// Unravel a linear index into a multi-index of a contiguous `shape`.
pub fn unravel(g: &mut KGraph, lin: Ref, shape: &[usize]) -> Vec<Ref> {
    let mut out = vec![g.int(0); shape.len()];
    let mut acc = 1usize;
    for i in (0..shape.len()).rev() {
        if shape[i] != 1 {
            let a = g.int(acc as i64);
            let d = g.div(lin, a);
            let s = g.int(shape[i] as i64);
            out[i] = g.modulo(d, s);
        }
        acc *= shape[i];
    }
    out
}

/// (linear index into the source buffer, validity) of the multi-index `idx` of `st.shape()`.
pub fn st_index(g: &mut KGraph, st: &ShapeTracker, idx: &[Ref]) -> (Ref, Ref) {
    let mut idx = idx.to_vec();
    let mut valid = g.bool_const(true);
    for (k, v) in st.views.iter().enumerate().rev() {
        let (lin, ok) = view_index(g, v, &idx);
        valid = g.and(valid, ok);
        if k == 0 {
            return (lin, valid);
        }
        idx = unravel(g, lin, &st.views[k - 1].shape);
    }
    unreachable!("a ShapeTracker has at least one view")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shape::{prod, ShapeTracker};

    fn eval(st: &ShapeTracker) -> Vec<Option<i64>> {
        // Evaluate the tracker for every index with the kernel-graph evaluator.
        let shape = st.shape().to_vec();
        let n = prod(&shape);
        (0..n)
            .map(|i| {
                let mut g = KGraph::new();
                let lin = g.int(i as i64);
                let idx = unravel(&mut g, lin, &shape);
                let (ix, ok) = st_index(&mut g, st, &idx);
                let ok = g.const_value(ok).expect("constant");
                (ok != 0.0).then(|| g.const_value(ix).expect("constant") as i64)
            })
            .collect()
    }

    #[test]
    fn permute_then_reshape_is_two_views_or_one() {
        let st = ShapeTracker::contiguous(&[2, 3])
            .permute(&[1, 0])
            .reshape(&[6]);
        assert_eq!(eval(&st), [0, 3, 1, 4, 2, 5].map(Some));
        let merged = ShapeTracker::contiguous(&[2, 3, 4])
            .reshape(&[6, 4])
            .reshape(&[24]);
        assert_eq!(merged.views.len(), 1);
    }

    #[test]
    fn pad_shrink_flip_expand() {
        let st = ShapeTracker::contiguous(&[3]).pad(&[(1, 2)]);
        assert_eq!(eval(&st), vec![None, Some(0), Some(1), Some(2), None, None]);
        let st = ShapeTracker::contiguous(&[4])
            .shrink(&[(1, 3)])
            .flip(&[true]);
        assert_eq!(eval(&st), vec![Some(2), Some(1)]);
        let st = ShapeTracker::contiguous(&[1, 3]).expand(&[2, 3]);
        assert_eq!(eval(&st), [0, 1, 2, 0, 1, 2].map(Some));
    }

    #[test]
    fn strided_reshape_merges_runs() {
        // (2,3,4) permuted to (3,2,4) then merging the last two dims stays one view.
        let st = ShapeTracker::contiguous(&[2, 3, 4])
            .permute(&[1, 0, 2])
            .reshape(&[3, 2, 2, 2]);
        assert_eq!(st.views.len(), 1);
        let reference: Vec<Option<i64>> = (0..24)
            .map(|i| Some(((i / 8) * 4 + ((i / 4) % 2) * 12 + i % 4) as i64))
            .collect();
        assert_eq!(eval(&st), reference);
    }

    fn load(slot: u32, st: ShapeTracker) -> Arc<AstNode> {
        Arc::new(AstNode {
            shape: st.shape().to_vec(),
            op: AstOp::Load { slot, st },
            dtype: DType::F32,
            src: vec![],
        })
    }

    fn node(op: AstOp, shape: &[usize], src: Vec<Arc<AstNode>>) -> Arc<AstNode> {
        Arc::new(AstNode {
            op,
            dtype: DType::F32,
            shape: shape.to_vec(),
            src,
        })
    }

    #[test]
    fn reordering_views_move_onto_the_loads() {
        // (a * b) for a [2, 3, 4] (b broadcast along the middle axis), permuted and reshaped.
        let a = ShapeTracker::contiguous(&[2, 3, 4]);
        let b = ShapeTracker::contiguous(&[2, 1, 4]).expand(&[2, 3, 4]);
        let mul = node(
            AstOp::Binary(BinaryOp::Mul),
            &[2, 3, 4],
            vec![load(1, a.clone()), load(2, b.clone())],
        );
        let view = ShapeTracker::contiguous(&[2, 3, 4])
            .permute(&[2, 0, 1])
            .reshape(&[4, 6]);
        let root = node(AstOp::View(view.clone()), &[4, 6], vec![mul]);
        let pushed = push_views(&root);
        assert!(
            matches!(pushed.op, AstOp::Binary(BinaryOp::Mul)),
            "{pushed:?}"
        );
        assert_eq!(pushed.shape, [4, 6]);
        // Each load reads, for every output, the element the view of the product read.
        let through = |inner: &ShapeTracker| -> Vec<Option<i64>> {
            let base = eval(inner);
            eval(&view)
                .iter()
                .map(|j| base[j.unwrap() as usize])
                .collect()
        };
        for (src, want) in pushed.src.iter().zip([&a, &b]) {
            let AstOp::Load { st, .. } = &src.op else {
                panic!("{src:?}");
            };
            assert_eq!(src.shape, [4, 6]);
            assert_eq!(eval(st), through(want));
        }
        // A view that pads, or one above an iota, stays.
        let padded = ShapeTracker::contiguous(&[2, 3, 4]).pad(&[(0, 1), (0, 0), (0, 0)]);
        let mul = node(AstOp::Unary(UnaryOp::Exp2), &[2, 3, 4], vec![load(1, a)]);
        let kept = node(AstOp::View(padded), &[3, 3, 4], vec![mul]);
        assert!(matches!(push_views(&kept).op, AstOp::View(_)));
        let iota = node(AstOp::Iota, &[6], vec![]);
        let st = ShapeTracker::contiguous(&[6])
            .reshape(&[2, 3])
            .permute(&[1, 0]);
        let kept = node(AstOp::View(st), &[3, 2], vec![iota]);
        assert!(matches!(push_views(&kept).op, AstOp::View(_)));
    }
}

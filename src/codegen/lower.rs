//! Lowering: a scheduled kernel's AST (loads through views, elementwise ops, at most one fused
//! reduce) becomes a `KGraph` in which every load has an explicit index and gate, shaped by the
//! optimizer's actions (`Opts`):
//!
//! - **upcast**: several consecutive outputs along an output axis per invocation; loads that do
//!   not depend on that axis are shared, and the reduce loop carries one accumulator per output;
//! - **local**: several invocations of one workgroup along an output axis (the workgroup covers
//!   a block of neighbouring outputs);
//! - **group**: the reduce over one axis split across the invocations of a workgroup; each keeps
//!   a partial result in workgroup memory, and after a barrier one invocation per output
//!   combines them;
//! - **unroll**: the loop over a reduce axis unrolled, its body repeated in one iteration;
//! - **lanes**: the reduce over one axis kept in several partial results, element `i` of each
//!   step into partial `i`, combined pairwise after the loop (halves first: `p[i] + p[i + n/2]`,
//!   as a vector is folded). On the CPU the partials of a row contiguous in memory are one
//!   vector (`vectorize.rs`): a row's sum or max without gathering lanes across rows;
//! - **stage**: the loop over a reduce axis tiled: per step of `amount` elements along it, the
//!   workgroup loads the tile of every load of the reduce that depends on that axis (all the
//!   elements its invocations' outputs need for the step) into workgroup memory once,
//!   cooperatively (neighbouring invocations read neighbouring elements), waits, and each
//!   invocation reduces the step from there. A load whose tile would be read in runs of fewer
//!   than `MIN_RUN` consecutive elements (a convolution's weights, stepped along the input
//!   channels: one element per channel and window position) is read directly instead; one that
//!   reads the sum of an output axis and the staged one (a convolution's output column plus its
//!   window column) keeps the `n + step - 1` sums its `n` outputs need, not `n x step`. A tiled
//!   matmul: with 16x16 invocations of 4x4 outputs each and steps of 16, 1/32 global loads per
//!   multiply-add instead of 1/2.
//!
//! Without local or group actions a kernel is *flat*: invocation `gidx` computes output (block)
//! `gidx`, and the renderer picks the workgroup size. With them it is *structured*: invocation
//! `lidx` of workgroup `wgid` has its place in the workgroup fixed here, and every workgroup is
//! full (the amounts divide the axes), so barriers are reached by every invocation.

use crate::dtype::DType;
use crate::kernel::rewrite::simplify_given;
use crate::kernel::{
    st_index, unravel, AstNode, AstOp, FastMap, KGraph, KOp, KernelAst, Ref, LOOP_BITS,
};
use crate::ops::{compute_dtype, BinaryOp, ReduceOp};
use std::cmp::Reverse;

/// The optimizer's actions for one kernel. Axes of `upcast` and `local` are output axes (of the
/// kernel's root shape); axes of `group` and `unroll` are reduce axes of its reduce.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Opts {
    /// (axis, amount): `amount` consecutive outputs along output `axis` per invocation.
    pub upcast: Vec<(usize, usize)>,
    /// (axis, amount): `amount` invocations of a workgroup along output `axis`.
    pub local: Vec<(usize, usize)>,
    /// (axis, amount): the reduce over reduce `axis` split across `amount` invocations of a
    /// workgroup.
    pub group: Option<(usize, usize)>,
    /// (axis, amount): the loop over reduce `axis` unrolled `amount` times.
    pub unroll: Option<(usize, usize)>,
    /// (axis, amount): the reduce over reduce `axis` kept in `amount` (a power of two) partial
    /// results, element `i` of each step of `amount` into partial `i`, combined pairwise after
    /// the loop (excludes `group`, `unroll` and `stage`).
    pub lanes: Option<(usize, usize)>,
    /// (axis, amount): the loop over reduce `axis` in steps of `amount` whose operand tiles are
    /// staged in workgroup memory (needs `local`; excludes `group` and `unroll`).
    pub stage: Option<(usize, usize)>,
    /// The subgroup size a grouped sum combines its partial results in first (each subgroup's
    /// lanes, consecutive members of one group, sum theirs in registers; the combine then reads
    /// one result per subgroup from workgroup memory). Set from the target (`for_target`), not
    /// searched.
    pub subgroup: Option<usize>,
}

impl Opts {
    /// These actions on `t`: a group whose size is a multiple of the target's subgroup size
    /// combines through subgroups.
    pub fn for_target(&self, t: &super::Target) -> Opts {
        let s = t.subgroup;
        let subgroup = self
            .group
            .filter(|g| s > 1 && g.1 >= s && g.1 % s == 0)
            .map(|_| s);
        Opts {
            subgroup,
            ..self.clone()
        }
    }
    /// Invocations per workgroup the actions ask for (1: a flat kernel).
    pub fn local_size(&self) -> usize {
        let l: usize = self.local.iter().map(|l| l.1).product();
        l * self.group.map_or(1, |g| g.1)
    }
}

/// One write of a lowered kernel. Phases are separated by `Barrier`s: a phase sees the
/// workgroup memory every invocation wrote in the phases before.
#[derive(Clone, Debug, PartialEq)]
pub enum Effect {
    /// `buffer[idx] = val` where `gate` (if any) holds.
    Store {
        /// The buffer slot written.
        slot: u32,
        /// The element index.
        idx: Ref,
        /// The value stored.
        val: Ref,
        /// Store only where this holds.
        gate: Option<Ref>,
    },
    /// `shared[idx] = val` of workgroup array `id`.
    StoreShared {
        /// Which workgroup array.
        id: u32,
        /// The element index.
        idx: Ref,
        /// The value stored.
        val: Ref,
    },
    /// Wait for every invocation of the workgroup (ends a phase).
    Barrier,
}

/// The lowered kernel: its graph, its writes in order, and its launch size.
pub struct Lowered {
    /// The computation.
    pub graph: KGraph,
    /// Its writes, in order.
    pub effects: Vec<Effect>,
    /// Invocations launched.
    pub global_size: usize,
    /// Invocations per workgroup; 1 for a flat kernel (the renderer chooses).
    pub local_size: usize,
    /// The workgroup arrays: (dtype, elements).
    pub shared: Vec<(DType, usize)>,
}

impl Lowered {
    /// Stores into global buffers (the kernel's outputs).
    pub fn stores(&self) -> usize {
        self.effects
            .iter()
            .filter(|e| matches!(e, Effect::Store { .. }))
            .count()
    }
}

/// Why a set of actions does not apply to a kernel.
pub type Invalid = String;

/// The reduce of a kernel whose output shape is the root's (only elementwise ops above it), the
/// one group and unroll can act on.
pub fn aligned_reduce(k: &KernelAst) -> Option<&AstNode> {
    let shape = &k.root.shape;
    let r = k.root.find(&|n| matches!(n.op, AstOp::Reduce(..)), &|n| {
        matches!(n.op, AstOp::View(_))
    })?;
    (r.shape == *shape).then_some(r)
}

/// The reduce axes of `k` that lowering folds away: a one-hot reduce (`x[idx]`, a gather, an
/// embedding lookup) becomes a direct load (`kernel::rewrite`), so it costs no loop at all,
/// as long as no action splits, groups or unrolls that axis (which would keep the loop over
/// the whole indexed axis). Found by lowering `k` without actions, where the reduce's loop
/// variables are the first ranges made, in axis order; only a reduce that compares with an
/// iota can fold, so no other kernel is lowered.
pub fn folded_reduce_axes(k: &KernelAst) -> Vec<usize> {
    let Some(r) = k
        .root
        .find(&|n| matches!(n.op, AstOp::Reduce(..)), &|_| false)
    else {
        return vec![];
    };
    let AstOp::Reduce(_, axes) = &r.op else {
        unreachable!("find returns a reduce")
    };
    let has = |f: &dyn Fn(&AstNode) -> bool| r.src[0].find(f, &|_| false).is_some();
    if !has(&|n| matches!(n.op, AstOp::Binary(BinaryOp::CmpEq)))
        || !has(&|n| matches!(n.op, AstOp::Iota))
    {
        return vec![];
    }
    let l = lower(k, &Opts::default());
    let g = &l.graph;
    let mut looped = vec![false; axes.len()];
    for n in &g.nodes {
        if let KOp::Reduce(_) = n.op {
            for &s in &n.src[1..] {
                if let KOp::Range { id, .. } = g.node(s).op {
                    if let Some(f) = looped.get_mut(id as usize) {
                        *f = true;
                    }
                }
            }
        }
    }
    axes.iter()
        .zip(looped)
        .filter(|(_, l)| !l)
        .map(|(&a, _)| a)
        .collect()
}

/// Check that `o` applies to `k`: amounts divide their axes, group, unroll, stage and lanes name
/// reduce axes.
pub fn check(k: &KernelAst, o: &Opts) -> Result<(), Invalid> {
    let shape = &k.root.shape;
    let mut per_axis = vec![1usize; shape.len()];
    for &(axis, amount) in o.upcast.iter().chain(&o.local) {
        if axis >= shape.len() || amount == 0 {
            return Err(format!("axis {axis} x{amount} is not an output axis"));
        }
        per_axis[axis] *= amount;
        if shape[axis] % per_axis[axis] != 0 {
            return Err(format!(
                "axis {axis} of size {} is not a multiple of {}",
                shape[axis], per_axis[axis]
            ));
        }
    }
    if o.group.is_some() || o.unroll.is_some() || o.stage.is_some() || o.lanes.is_some() {
        let Some(r) = aligned_reduce(k) else {
            return Err(
                "group/unroll/stage/lanes need a reduce at the kernel's output shape".into(),
            );
        };
        let AstOp::Reduce(_, axes) = &r.op else {
            unreachable!("aligned_reduce returns a reduce")
        };
        let full = &r.src[0].shape;
        let mut per_red = vec![1usize; full.len()];
        for &(axis, amount) in o
            .group
            .iter()
            .chain(&o.unroll)
            .chain(&o.stage)
            .chain(&o.lanes)
        {
            if !axes.contains(&axis) || amount == 0 {
                return Err(format!("axis {axis} is not a reduce axis"));
            }
            per_red[axis] *= amount;
            if full[axis] % per_red[axis] != 0 {
                return Err(format!(
                    "reduce axis {axis} of size {} is not a multiple of {}",
                    full[axis], per_red[axis]
                ));
            }
        }
    }
    if let Some((_, n)) = o.lanes {
        if !n.is_power_of_two() || n < 2 {
            return Err(format!(
                "lanes of {n} partial results (not a power of two above 1)"
            ));
        }
        if o.group.is_some() || o.unroll.is_some() || o.stage.is_some() {
            return Err("lanes excludes group, unroll and stage".into());
        }
    }
    if o.unroll.is_some() && sums_products(k) {
        // Unrolled, the copies' products would be added together before the accumulator and
        // each rounded: a reduce step that adds a product is one fused multiply-add everywhere.
        return Err("a sum of products is not unrolled (its steps are fused multiply-adds)".into());
    }
    if o.stage.is_some() {
        if o.group.is_some() || o.unroll.is_some() || o.local_size() < 2 {
            return Err("stage needs local invocations and no group or unroll".into());
        }
        let tiles = tiles(k, o);
        if tiles.is_empty() {
            return Err("no load of the reduce depends on the staged axis".into());
        }
    }
    Ok(())
}

/// Whether the aligned reduce of `k` sums products (its steps are fused multiply-adds).
fn sums_products(k: &KernelAst) -> bool {
    aligned_reduce(k).is_some_and(|r| {
        matches!(r.op, AstOp::Reduce(ReduceOp::Sum, _))
            && matches!(r.src[0].op, AstOp::Binary(BinaryOp::Mul))
    })
}

/// An operand of a reduce (a load, or a view of a computed value) and the axes (of the
/// reduce's input shape) its index depends on.
#[derive(Clone)]
pub struct Operand<'a> {
    /// The load or view.
    pub node: &'a AstNode,
    /// Per axis, whether the load's index or gate varies along it.
    pub deps: Vec<bool>,
    /// The axes along which it reads consecutive elements (a convolution's input: along the
    /// output's column and the window's).
    pub contiguous: Vec<usize>,
    /// Per axis, the index's stride along it where the index depends on it through that one
    /// linear term only and the gate not at all; `None` otherwise. Two axes with one stride
    /// (a convolution's output column and window column) read the element at their sum.
    pub stride: Vec<Option<i64>>,
}

impl Operand<'_> {
    /// Whether the operand reads the same element at `a + 1, b` as at `a, b + 1`.
    fn sums(&self, a: usize, b: usize) -> bool {
        a != b && self.stride[a].is_some_and(|s| s != 0) && self.stride[a] == self.stride[b]
    }
}

/// The operands `stage` can act on: the loads and views of the aligned reduce's input reached
/// through elementwise ops (a view with everything under it: a tile can hold any value computed
/// from its element's index), with the axes each depends on. Those that depend on no reduce
/// axis are left out.
pub fn stageable_operands(k: &KernelAst) -> Vec<Operand<'_>> {
    let Some(r) = aligned_reduce(k) else {
        return vec![];
    };
    let AstOp::Reduce(_, axes) = &r.op else {
        unreachable!("aligned_reduce returns a reduce")
    };
    fn walk<'a>(n: &'a AstNode, out: &mut Vec<&'a AstNode>) {
        match n.op {
            AstOp::Load { .. } | AstOp::View(_) if !out.iter().any(|o| std::ptr::eq(*o, n)) => {
                out.push(n)
            }
            AstOp::Unary(_) | AstOp::Binary(_) | AstOp::Where | AstOp::Cast(_) => {
                for s in &n.src {
                    walk(s, out);
                }
            }
            _ => {}
        }
    }
    // An operand worth staging reads memory (an expression of indices alone, a causal mask,
    // is cheaper to compute again) and is a 16- or 32-bit number (workgroup arrays of bool,
    // which a GPU's Vulkan driver mishandled, or of bytes stay out).
    fn reads_memory(n: &AstNode) -> bool {
        matches!(n.op, AstOp::Load { .. }) || n.src.iter().any(|s| reads_memory(s))
    }
    let mut loads = vec![];
    walk(&r.src[0], &mut loads);
    loads.retain(|n| {
        reads_memory(n)
            && matches!(
                n.dtype,
                DType::F32 | DType::F16 | DType::BF16 | DType::I32 | DType::U32
            )
    });
    let full = &r.src[0].shape;
    loads
        .into_iter()
        .filter_map(|n| {
            let (AstOp::Load { st, .. } | AstOp::View(st)) = &n.op else {
                return None;
            };
            let mut g = KGraph::new();
            let idx: Vec<Ref> = full.iter().map(|&d| g.range(d)).collect();
            let (i, ok) = st_index(&mut g, st, &idx);
            let bits = g.ranges[i as usize] | g.ranges[ok as usize];
            let deps: Vec<bool> = (0..full.len()).map(|a| bits & (1 << a) != 0).collect();
            let (mut ts, mut konst) = (vec![], 0);
            crate::kernel::rewrite::terms(&g, i, 1, &mut ts, &mut konst);
            let contiguous = ts
                .iter()
                .filter(|t| t.1 == 1)
                .filter_map(|t| idx.iter().position(|&r| r == t.0))
                .collect();
            let stride = (0..full.len())
                .map(|a| {
                    let bit = 1 << a;
                    let other = ts
                        .iter()
                        .any(|t| t.0 != idx[a] && g.ranges[t.0 as usize] & bit != 0);
                    let own = ts.iter().filter(|t| t.0 == idx[a]).map(|t| t.1).sum();
                    (!other && g.ranges[ok as usize] & bit == 0).then_some(own)
                })
                .collect();
            axes.iter().any(|&a| deps[a]).then_some(Operand {
                node: n,
                deps,
                contiguous,
                stride,
            })
        })
        .collect()
}

/// The tile extents (per axis of the reduce's input shape) of every load `o.stage` stages:
/// along an output axis, the workgroup's outputs where the load depends on it; along the staged
/// axis, the step; 1 elsewhere (a tile that reads the staged axis summed with an output axis
/// holds their sums: `Tile::merged`). Loads that do not depend on the staged axis, or would be
/// read in runs shorter than `MIN_RUN`, are not staged.
pub fn tiles(k: &KernelAst, o: &Opts) -> Vec<Vec<usize>> {
    tiles_of(k, &stageable_operands(k), o)
        .into_iter()
        .map(|t| t.1.ext)
        .collect()
}

/// The fewest consecutive elements a staged tile is read in (a whole memory transaction's
/// worth: 16 bytes of f32): a tile read one scattered element at a time costs a transaction
/// per element, staged or not (conv2's forward staged over 4 batches x 4 channels, its input
/// read one element per batch, ran 1.2x slower on an H200).
pub const MIN_RUN: usize = 4;

/// A staged load's tile in workgroup memory.
#[derive(Clone, Debug)]
pub struct Tile {
    /// Extent per axis of the reduce's input shape.
    pub ext: Vec<usize>,
    /// The axis its elements are numbered along last (the contiguous one where the tile is
    /// longest).
    pub along: Option<usize>,
    /// The output axis whose sum with the staged axis the load reads (a convolution's output
    /// column and window column): the tile holds the `n + step - 1` elements the workgroup's
    /// `n` outputs along it need for a step, not `n * step`; its extent along the staged axis
    /// is 1.
    pub merged: Option<usize>,
}

/// `tiles` for loads found by `stageable_operands`. Loads whose tile along the axis they read
/// consecutive elements on is shorter than `MIN_RUN` are not staged.
pub fn tiles_of<'a>(k: &KernelAst, loads: &[Operand<'a>], o: &Opts) -> Vec<(&'a AstNode, Tile)> {
    let Some((axis, step)) = o.stage else {
        return vec![];
    };
    let Some(AstOp::Reduce(_, axes)) = aligned_reduce(k).map(|r| &r.op) else {
        return vec![];
    };
    let mut per = vec![1usize; k.root.shape.len()];
    for &(a, n) in o.upcast.iter().chain(&o.local) {
        per[a] *= n;
    }
    loads
        .iter()
        .filter(|l| l.deps.get(axis) == Some(&true))
        .map(|l| {
            let mut ext: Vec<usize> = (0..l.deps.len())
                .map(|a| {
                    if a == axis {
                        step
                    } else if axes.contains(&a) || !l.deps[a] {
                        1
                    } else {
                        per[a]
                    }
                })
                .collect();
            let merged = (0..ext.len()).find(|&a| ext[a] > 1 && a != axis && l.sums(a, axis));
            if let Some(a) = merged {
                ext[a] += step - 1;
                ext[axis] = 1;
            }
            let along = l
                .contiguous
                .iter()
                .copied()
                .max_by_key(|&a| (ext[a], Reverse(a)));
            let tile = Tile { ext, along, merged };
            (l.node, tile)
        })
        .filter(|(_, t)| t.along.is_none_or(|a| t.ext[a] >= MIN_RUN))
        .collect()
}

/// The position in workgroup memory of the tile element at `coord` (per axis; axes where the
/// tile has one element are ignored): the staged axis outermost, so that invocations reading
/// one step's elements for neighbouring outputs read neighbouring words.
fn tile_pos(g: &mut KGraph, ext: &[usize], axis: usize, coord: &[Ref]) -> Ref {
    let mut pos = g.int(0);
    let mut stride = 1;
    for a in (0..ext.len()).rev().filter(|&a| a != axis).chain([axis]) {
        if ext[a] > 1 {
            let st = g.int(stride as i64);
            let term = g.mul(coord[a], st);
            pos = g.add(pos, term);
        }
        stride *= ext[a];
    }
    pos
}

struct Ctx {
    /// What each AST node lowered to, by node, index and gate (the index inline: a search
    /// looks these up for every node of every upcast copy).
    values: FastMap<(usize, smallvec::SmallVec<[Ref; 8]>, Ref), Ref>,
    /// Reduce loops are shared by every copy of a reduce (upcasting), so one loop nest
    /// accumulates all of them; likewise the loop combining a group's partial results.
    ranges: FastMap<usize, Vec<Ref>>,
    combine: FastMap<usize, Ref>,
    group: Option<Group>,
    unroll: Option<(usize, usize)>,
    lanes: Option<(usize, usize)>,
    subgroup: Option<usize>,
    /// Writes of partial results to workgroup memory (the phase before the barrier).
    partials: Vec<Effect>,
    shared: Vec<(DType, usize)>,
    stage: Option<Staging>,
    /// While lowering a staged reduce's body: the tile coordinate along every axis, and the
    /// staging step its tiles come from.
    in_tile: Option<(Vec<Ref>, Ref)>,
}

/// What lowering a staged reduce needs (`Opts::stage`).
struct Staging {
    axis: usize,
    step: usize,
    /// Per staged load: its address (to recognize it), the load and its tile.
    tiles: Vec<(usize, AstNode, Tile)>,
    /// The workgroup array of each tile (once made).
    ids: Vec<u32>,
    /// The first output of the workgroup along every output axis.
    origin: Vec<Ref>,
    /// The invocation's place in the workgroup along every output axis.
    lid_at: Vec<Ref>,
    /// The current output's coordinate within the workgroup's tile along every output axis.
    at: Vec<Ref>,
    lidx: Ref,
    local_size: usize,
    /// The loop over one step, and the staging step (made by the first copy of the reduce).
    inner: Option<(Ref, Ref)>,
}

/// Where an invocation sits in its group: its index in the group, and the first local index of
/// its group (the group's partial results are `shared[base .. base + size]`).
#[derive(Clone, Copy)]
struct Group {
    axis: usize,
    size: usize,
    gi: Ref,
    lidx: Ref,
    base: Ref,
    local_size: usize,
}

/// Lower `k` with the actions `o` (checked with `check` first; invalid actions are ignored).
pub fn lower(k: &KernelAst, o: &Opts) -> Lowered {
    let o = if check(k, o).is_ok() {
        o.clone()
    } else {
        Opts::default()
    };
    let mut g = KGraph::new();
    let root = &k.root;
    let rank = root.shape.len();
    let mut up = vec![1usize; rank];
    let mut loc = vec![1usize; rank];
    for &(a, n) in &o.upcast {
        up[a] *= n;
    }
    for &(a, n) in &o.local {
        loc[a] *= n;
    }
    let grid: Vec<usize> = (0..rank)
        .map(|i| root.shape[i] / (up[i] * loc[i]))
        .collect();
    let groups: usize = grid.iter().product();
    let gsize = o.group.map_or(1, |g| g.1);
    let local_size = o.local_size();
    // The index of each invocation's first output along every axis (before upcasting), and
    // the group it belongs to.
    let mut stage = o.stage.map(|(axis, step)| Staging {
        axis,
        step,
        tiles: tiles_of(k, &stageable_operands(k), &o)
            .into_iter()
            .map(|(n, t)| (n as *const AstNode as usize, n.clone(), t))
            .collect(),
        ids: vec![],
        origin: vec![],
        lid_at: vec![],
        at: vec![],
        lidx: 0,
        local_size,
        inner: None,
    });
    let (base, group, global_size) = if local_size > 1 {
        let wg = g.wgid(groups);
        let lid = g.lidx(local_size);
        let outer = unravel(&mut g, wg, &grid);
        let mut lshape = loc.clone();
        lshape.push(gsize);
        let inner = unravel(&mut g, lid, &lshape);
        if let Some(s) = &mut stage {
            s.lidx = lid;
            s.origin = (0..rank)
                .map(|i| {
                    let span = g.int((loc[i] * up[i]) as i64);
                    g.mul(outer[i], span)
                })
                .collect();
            s.lid_at = inner[..rank].to_vec();
        }
        let base: Vec<Ref> = (0..rank)
            .map(|i| {
                let l = g.int(loc[i] as i64);
                let scaled = g.mul(outer[i], l);
                g.add(scaled, inner[i])
            })
            .collect();
        let group = o.group.map(|(axis, size)| {
            let gi = inner[rank];
            let neg = g.int(-1);
            let back = g.mul(gi, neg);
            Group {
                axis,
                size,
                gi,
                lidx: lid,
                base: g.add(lid, back),
                local_size,
            }
        });
        (base, group, groups * local_size)
    } else {
        let gidx = g.gidx(groups);
        (unravel(&mut g, gidx, &grid), None, groups)
    };
    let yes = g.bool_const(true);
    let mut ctx = Ctx {
        values: FastMap::default(),
        ranges: FastMap::default(),
        combine: FastMap::default(),
        group,
        unroll: o.unroll,
        lanes: o.lanes,
        subgroup: o.subgroup,
        partials: vec![],
        shared: vec![],
        stage,
        in_tile: None,
    };
    let out_dtype = k.bufs[0].0;
    let strides = crate::shape::strides_for(&root.shape);
    let copies: usize = up.iter().product();
    let mut stores = vec![];
    // The group's first invocation writes the combined result.
    let gate = group.map(|gr| {
        let zero = g.int(0);
        g.binary(BinaryOp::CmpEq, gr.gi, zero)
    });
    for c in 0..copies {
        let mut idx = base.clone();
        let mut rest = c;
        if let Some(s) = &mut ctx.stage {
            s.at = s.lid_at.clone();
        }
        for i in (0..rank).rev() {
            if up[i] > 1 {
                let a = g.int(up[i] as i64);
                let scaled = g.mul(base[i], a);
                let off = g.int((rest % up[i]) as i64);
                rest /= up[i];
                idx[i] = g.add(scaled, off);
                if let Some(s) = &mut ctx.stage {
                    // idx = origin + (lid * up + off): the output's place in the tile.
                    let scaled = g.mul(s.lid_at[i], a);
                    s.at[i] = g.add(scaled, off);
                }
            }
        }
        // Storing rounds the root to its dtype anyway.
        let v = if root.dtype == out_dtype {
            lower_exact(&mut g, root, &idx, yes, &mut ctx)
        } else {
            lower_node(&mut g, root, &idx, yes, &mut ctx)
        };
        let v = g.cast(v, out_dtype);
        let mut lin = g.int(0);
        for (i, &ix) in idx.iter().enumerate() {
            if strides[i] != 0 {
                let st = g.int(strides[i] as i64);
                let t = g.mul(ix, st);
                lin = g.add(lin, t);
            }
        }
        stores.push(Effect::Store {
            slot: 0,
            idx: lin,
            val: v,
            gate,
        });
    }
    let mut effects = std::mem::take(&mut ctx.partials);
    if !effects.is_empty() {
        effects.push(Effect::Barrier);
    }
    effects.extend(stores);
    Lowered {
        graph: g,
        effects,
        global_size,
        local_size,
        shared: ctx.shared,
    }
}

/// Distinct loads inside reduce loops per output element, consecutive ones not merged: on a
/// software GPU adapter each is a gather of its own across the SIMD lanes that run
/// neighbouring invocations.
pub fn gathers_per_output(l: &Lowered) -> f64 {
    let g = &l.graph;
    let loads = g
        .nodes
        .iter()
        .enumerate()
        .filter(|(i, n)| matches!(n.op, KOp::Load(_)) && g.ranges[*i] != 0)
        .count();
    loads as f64 / l.stores().max(1) as f64
}

/// A group of loads that share cache lines: (buffer slot, index terms without the constant,
/// constant / 16).
type LineKey = (u32, Vec<(Ref, i64)>, i64);

/// The groups of loads inside reduce loops, each with the range bits its indices depend on.
fn load_groups(g: &KGraph) -> FastMap<LineKey, u64> {
    let mut groups: FastMap<LineKey, u64> = FastMap::default();
    for (i, n) in g.nodes.iter().enumerate() {
        let KOp::Load(slot) = n.op else { continue };
        if g.ranges[i] == 0 {
            continue;
        }
        let (mut ts, mut k) = (vec![], 0i64);
        crate::kernel::rewrite::terms(g, n.src[0], 1, &mut ts, &mut k);
        ts.sort();
        *groups.entry((slot, ts, k.div_euclid(16))).or_default() |= g.ranges[i];
    }
    groups
}

/// Memory accesses inside reduce loops per output element, to compare upcast choices. Loads
/// from one buffer whose indices differ only by a small constant (consecutive elements, as an
/// upcast along a contiguous axis produces) count once: they share cache lines and vectorize.
pub fn loads_per_output(l: &Lowered) -> f64 {
    load_groups(&l.graph).len() as f64 / l.stores().max(1) as f64
}

/// Cache lines the reduce loops read per output element over all their trips: the groups of
/// `loads_per_output`, each counted once per iteration of the loops its index depends on.
pub fn lines_per_output(l: &Lowered) -> f64 {
    let g = &l.graph;
    let trips = |bits: u64| -> f64 {
        g.nodes
            .iter()
            .filter_map(|n| match n.op {
                KOp::Range { id, size } if bits & (1u64 << id) != 0 => Some(size as f64),
                _ => None,
            })
            .product()
    };
    let lines: f64 = load_groups(g)
        .values()
        .map(|&b| b & LOOP_BITS)
        .filter(|&b| b != 0)
        .map(trips)
        .sum();
    lines / l.stores().max(1) as f64
}

fn combine(g: &mut KGraph, op: ReduceOp, a: Ref, b: Ref) -> Ref {
    match op {
        ReduceOp::Sum => g.add(a, b),
        op => g.binary(op.combine(), a, b),
    }
}

fn lower_node(g: &mut KGraph, n: &AstNode, idx: &[Ref], gate: Ref, ctx: &mut Ctx) -> Ref {
    let r = lower_exact(g, n, idx, gate, ctx);
    rounded(g, n, r)
}

/// An f16 or bf16 op's result rounded to its dtype (computed in f32 registers): the value of a
/// node is then the same whether a kernel stores it or another kernel recomputes it inline (a
/// max pool's backward compares recomputed inputs with the stored maximum), as each op of
/// PyTorch rounds. Loads, constants and casts are values of their dtype already.
fn rounded(g: &mut KGraph, n: &AstNode, r: Ref) -> Ref {
    let op = matches!(
        n.op,
        AstOp::Unary(_) | AstOp::Binary(_) | AstOp::Where | AstOp::Reduce(..)
    );
    if op && matches!(n.dtype, DType::F16 | DType::BF16) {
        let wide = g.cast(r, DType::F32);
        g.cast(wide, n.dtype)
    } else {
        r
    }
}

/// The source of a sum as a reduce step consumes it: a product's terms are accumulated exactly
/// (one fused multiply-add each, as a half-precision matmul accumulates in f32), not rounded to
/// the product's dtype first.
fn lower_summand(
    g: &mut KGraph,
    n: &AstNode,
    op: ReduceOp,
    idx: &[Ref],
    gate: Ref,
    ctx: &mut Ctx,
) -> Ref {
    if op == ReduceOp::Sum && matches!(n.op, AstOp::Binary(BinaryOp::Mul)) {
        lower_exact(g, n, idx, gate, ctx)
    } else {
        lower_node(g, n, idx, gate, ctx)
    }
}

/// `lower_node` without rounding its result.
fn lower_exact(g: &mut KGraph, n: &AstNode, idx: &[Ref], gate: Ref, ctx: &mut Ctx) -> Ref {
    let key = (
        n as *const AstNode as usize,
        smallvec::SmallVec::from_slice(idx),
        gate,
    );
    if let Some(&r) = ctx.values.get(&key) {
        return r;
    }
    let r = match &n.op {
        AstOp::Load { .. } | AstOp::View(_)
            if ctx.in_tile.is_some() && staged(n, ctx).is_some() =>
        {
            let (ti, id) = staged(n, ctx).unwrap_or_default();
            let (mut at, sync) = ctx.in_tile.clone().unwrap_or_default();
            let Some(s) = ctx.stage.as_ref() else {
                unreachable!("staged loads are lowered in a staged reduce")
            };
            let (tile, axis) = (&s.tiles[ti].2, s.axis);
            if let Some(m) = tile.merged {
                // The element at the sum of the output's place and the step's.
                at[m] = g.add(at[m], at[axis]);
            }
            let pos = tile_pos(g, &tile.ext, axis, &at);
            g.load_staged(id, n.dtype, pos, sync)
        }
        AstOp::Load { slot, st } => {
            let (i, valid) = st_index(g, st, idx);
            let ok = g.and(gate, valid);
            let i = simplify_given(g, i, ok);
            g.load(*slot, n.dtype, i, ok)
        }
        AstOp::Const(v) => g.konst(*v, n.dtype),
        AstOp::Iota => idx[0],
        AstOp::View(st) => {
            let (i, valid) = st_index(g, st, idx);
            let ok = g.and(gate, valid);
            let i = simplify_given(g, i, ok);
            let inner = unravel(g, i, &n.src[0].shape);
            // Staged operands are those above every view: one seen again under a view is read
            // at another index, from memory.
            let tile = ctx.in_tile.take();
            let v = lower_node(g, &n.src[0], &inner, ok, ctx);
            ctx.in_tile = tile;
            let z = g.konst(0.0, n.dtype);
            g.where_(valid, v, z)
        }
        AstOp::Unary(op) => {
            let a = lower_node(g, &n.src[0], idx, gate, ctx);
            g.unary(*op, a)
        }
        AstOp::Binary(op) => {
            let a = lower_node(g, &n.src[0], idx, gate, ctx);
            let b = lower_node(g, &n.src[1], idx, gate, ctx);
            g.binary(*op, a, b)
        }
        AstOp::Where => {
            let c = lower_node(g, &n.src[0], idx, gate, ctx);
            let a = lower_node(g, &n.src[1], idx, gate, ctx);
            let b = lower_node(g, &n.src[2], idx, gate, ctx);
            g.where_(c, a, b)
        }
        AstOp::Cast(dt) => {
            let a = lower_node(g, &n.src[0], idx, gate, ctx);
            g.cast(a, *dt)
        }
        AstOp::Reduce(op, axes) => lower_reduce(g, n, *op, axes, idx, gate, ctx),
    };
    ctx.values.insert(key, r);
    r
}

#[allow(clippy::too_many_arguments)]
fn lower_reduce(
    g: &mut KGraph,
    n: &AstNode,
    op: ReduceOp,
    axes: &[usize],
    idx: &[Ref],
    gate: Ref,
    ctx: &mut Ctx,
) -> Ref {
    let src = &n.src[0];
    let ptr = n as *const AstNode as usize;
    // A kernel has at most one reduce (the scheduler fuses no more), so group and unroll
    // (checked against the aligned reduce by `check`) act on this one.
    let (group, unroll) = (ctx.group, ctx.unroll);
    let ranges = match ctx.ranges.get(&ptr) {
        Some(r) => r.clone(),
        None => {
            let r: Vec<Ref> = axes
                .iter()
                .map(|&ax| {
                    let mut size = src.shape[ax];
                    if let Some(gr) = group.filter(|gr| gr.axis == ax) {
                        size /= gr.size;
                    }
                    if let Some((_, u)) = unroll.filter(|u| u.0 == ax) {
                        size /= u;
                    }
                    if let Some((_, n)) = ctx.lanes.filter(|l| l.0 == ax) {
                        size /= n;
                    }
                    if let Some(s) = ctx.stage.as_ref().filter(|s| s.axis == ax) {
                        size /= s.step;
                    }
                    g.range(size)
                })
                .collect();
            ctx.ranges.insert(ptr, r.clone());
            r
        }
    };
    if ctx.stage.is_some() {
        return lower_staged(g, n, op, axes, &ranges, idx, gate, ctx);
    }
    if let Some((axis, lanes)) = ctx.lanes {
        // One reduce per lane over the shortened loop; `check` excludes group and unroll.
        let mut partials: Vec<Ref> = (0..lanes)
            .map(|c| {
                let mut inner = idx.to_vec();
                for (&ax, &r) in axes.iter().zip(&ranges) {
                    inner[ax] = if ax == axis {
                        let n = g.int(lanes as i64);
                        let scaled = g.mul(r, n);
                        let off = g.int(c as i64);
                        g.add(scaled, off)
                    } else {
                        r
                    };
                }
                let v = lower_summand(g, src, op, &inner, gate, ctx);
                g.reduce(op, v, &ranges)
            })
            .collect();
        while partials.len() > 1 {
            let half = partials.len() / 2;
            let (lo, hi) = partials.split_at(half);
            partials = lo
                .iter()
                .zip(hi)
                .map(|(&a, &b)| combine(g, op, a, b))
                .collect();
        }
        return partials[0];
    }
    // The source index along each reduce axis: loop variable, unrolled copy, group member.
    let copies = unroll.map_or(1, |u| u.1);
    let mut value: Option<Ref> = None;
    for c in 0..copies {
        let mut inner = idx.to_vec();
        for (&ax, &r) in axes.iter().zip(&ranges) {
            let mut i = r;
            if let Some((_, u)) = unroll.filter(|u| u.0 == ax) {
                let un = g.int(u as i64);
                let scaled = g.mul(i, un);
                let off = g.int(c as i64);
                i = g.add(scaled, off);
            }
            if let Some(gr) = group.filter(|gr| gr.axis == ax) {
                // Neighbouring invocations read neighbouring elements.
                let gs = g.int(gr.size as i64);
                let scaled = g.mul(i, gs);
                i = g.add(scaled, gr.gi);
            }
            inner[ax] = i;
        }
        let v = lower_summand(g, src, op, &inner, gate, ctx);
        value = Some(match value {
            Some(acc) => combine(g, op, acc, v),
            None => v,
        });
    }
    let value = value.unwrap_or_else(|| g.konst(op.identity(n.dtype), n.dtype));
    let partial = g.reduce(op, value, &ranges);
    let Some(gr) = group else {
        return partial;
    };
    // Each invocation leaves its partial result in workgroup memory; after the barrier the
    // group's results are combined (by every member; only the first one stores).
    // With subgroups (a sum of 32-bit values), each subgroup sums its lanes' partial results
    // first; every lane then holds its subgroup's, and the combine reads one per subgroup.
    let sg = ctx
        .subgroup
        .filter(|_| op == ReduceOp::Sum)
        .filter(|_| matches!(compute_dtype(n.dtype), DType::F32 | DType::I32 | DType::U32));
    let partial = match sg {
        Some(s) => g.subgroup_sum(partial, s as u32),
        None => partial,
    };
    let id = ctx.shared.len() as u32;
    ctx.shared.push((n.dtype, gr.local_size));
    ctx.partials.push(Effect::StoreShared {
        id,
        idx: gr.lidx,
        val: partial,
    });
    let k = match ctx.combine.get(&ptr) {
        Some(&k) => k,
        None => {
            let k = g.range(gr.size / sg.unwrap_or(1));
            ctx.combine.insert(ptr, k);
            k
        }
    };
    let at = match sg {
        Some(s) => {
            let stride = g.int(s as i64);
            let first = g.mul(k, stride);
            g.add(gr.base, first)
        }
        None => g.add(gr.base, k),
    };
    let v = g.load_shared(id, n.dtype, at);
    g.reduce(op, v, &[k])
}

/// (tile index, workgroup array) of `n` if it is a staged load.
fn staged(n: &AstNode, ctx: &Ctx) -> Option<(usize, u32)> {
    let s = ctx.stage.as_ref()?;
    let p = n as *const AstNode as usize;
    let ti = s.tiles.iter().position(|t| t.0 == p)?;
    Some((ti, *s.ids.get(ti)?))
}

/// A staged reduce (`Opts::stage`): an outer loop over the steps (and the other reduce axes),
/// each step staging the tiles in workgroup memory, then an inner loop over the step reading
/// them (`ranges` are the outer loops).
#[allow(clippy::too_many_arguments)]
fn lower_staged(
    g: &mut KGraph,
    n: &AstNode,
    op: ReduceOp,
    axes: &[usize],
    ranges: &[Ref],
    idx: &[Ref],
    gate: Ref,
    ctx: &mut Ctx,
) -> Ref {
    let Some(s) = ctx.stage.as_ref() else {
        unreachable!("called for a staged reduce")
    };
    let (axis, step, rank) = (s.axis, s.step, idx.len());
    let range_of = |a: usize| axes.iter().position(|&x| x == a).map(|p| ranges[p]);
    let (inner, sync) = match s.inner {
        Some(v) => v,
        None => {
            let inner = g.range(step);
            let (tiles, origin, lidx, local) =
                (s.tiles.clone(), s.origin.clone(), s.lidx, s.local_size);
            let mut stores = vec![];
            let mut ids = vec![];
            for (_, load, tile) in &tiles {
                let (ext, contiguous) = (&tile.ext, &tile.along);
                let len: usize = ext.iter().product();
                // Each invocation stores `len / local` elements (rounded up), `local` apart, so
                // that neighbouring invocations read neighbouring elements of global memory:
                // the tile's elements are numbered along the axis the load reads consecutive
                // elements on last, in runs of 4 where it allows (vector loads). Where `local`
                // does not divide the tile (a row of 11), the last round's invocations past its
                // end read nothing and store into padding after it.
                let per = len.div_ceil(local);
                let id = ctx.shared.len() as u32;
                ctx.shared.push((load.dtype, per * local));
                ids.push(id);
                let mut order: Vec<usize> = (0..rank)
                    .filter(|&a| ext[a] > 1 && Some(a) != *contiguous)
                    .collect();
                order.extend(contiguous.filter(|&a| ext[a] > 1));
                let last = order.last().copied();
                let v = match last {
                    Some(a) if ext[a] % 4 == 0 && per % 4 == 0 && len % local == 0 => 4,
                    _ => 1,
                };
                let mut vshape: Vec<usize> = order.iter().map(|&a| ext[a]).collect();
                if let Some(l) = vshape.last_mut() {
                    *l /= v;
                }
                let zero = g.int(0);
                for j in 0..per / v {
                    let first = g.int((j * local) as i64);
                    let tv = g.add(first, lidx);
                    // In the tile (a gate) only in a last round that passes its end.
                    let inside = ((j + 1) * local > len).then(|| {
                        let end = g.int(len as i64);
                        g.lt(tv, end)
                    });
                    let numbered = unravel(g, tv, &vshape);
                    let mut c = vec![zero; rank];
                    for (&a, &x) in order.iter().zip(&numbered) {
                        c[a] = x;
                    }
                    for lane in 0..v {
                        let mut coord = c.clone();
                        if let (Some(a), true) = (last, v > 1) {
                            let (vv, l) = (g.int(v as i64), g.int(lane as i64));
                            let scaled = g.mul(c[a], vv);
                            coord[a] = g.add(scaled, l);
                        }
                        let pos = tile_pos(g, ext, axis, &coord);
                        let mut at = coord.clone();
                        if let Some(m) = tile.merged {
                            // Element `u` of a merged tile: output `u` at the step's start
                            // for the workgroup's outputs, then the last output further on in
                            // the step (both coordinates within their axes).
                            let (u, n) = (coord[m], (ext[m] - step) as i64);
                            let (last, neg) = (g.int(n), g.int(-n));
                            let past = g.lt(last, u);
                            let over = g.add(u, neg);
                            at[axis] = g.where_(past, over, zero);
                            at[m] = g.where_(past, last, u);
                        }
                        let full: Vec<Ref> = (0..rank)
                            .map(|a| {
                                if a == axis {
                                    let r = range_of(a).unwrap_or(at[a]);
                                    let st = g.int(step as i64);
                                    let scaled = g.mul(r, st);
                                    g.add(scaled, at[a])
                                } else if let Some(r) = range_of(a) {
                                    r
                                } else {
                                    g.add(origin[a], at[a])
                                }
                            })
                            .collect();
                        let (val, pos) = match inside {
                            Some(inside) => {
                                let ok = g.and(gate, inside);
                                let val = lower_node(g, load, &full, ok, ctx);
                                (val, g.where_(inside, pos, tv))
                            }
                            None => (lower_node(g, load, &full, gate, ctx), pos),
                        };
                        stores.push((id, pos, val));
                    }
                }
            }
            let sync = g.sync(&stores);
            if let Some(s) = &mut ctx.stage {
                s.ids = ids;
                s.inner = Some((inner, sync));
            }
            (inner, sync)
        }
    };
    let at = ctx.stage.as_ref().map_or(vec![], |s| s.at.clone());
    let mut body_idx = idx.to_vec();
    let mut tile_at = vec![g.int(0); rank];
    for a in 0..rank {
        if a == axis {
            let st = g.int(step as i64);
            let scaled = g.mul(range_of(a).unwrap_or(inner), st);
            body_idx[a] = g.add(scaled, inner);
            tile_at[a] = inner;
        } else if let Some(r) = range_of(a) {
            body_idx[a] = r;
        } else {
            tile_at[a] = at[a];
        }
    }
    ctx.in_tile = Some((tile_at, sync));
    let v = lower_summand(g, &n.src[0], op, &body_idx, gate, ctx);
    ctx.in_tile = None;
    let part = g.reduce(op, v, &[inner]);
    g.reduce(op, part, ranges)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codegen::Inst;
    use crate::shape::ShapeTracker;
    use std::sync::Arc;

    /// out[i, k] = sum_j a[i, j] * b[j, k] for a (M, K) x (K, N) matmul, as the scheduler
    /// would build it: both operands read through broadcast views of shape (M, K, N).
    pub(crate) fn matmul(m: usize, k: usize, n: usize) -> KernelAst {
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

    fn up(axis: usize, amount: usize) -> Opts {
        Opts {
            upcast: vec![(axis, amount)],
            ..Opts::default()
        }
    }

    #[test]
    fn a_reduce_becomes_one_loop_with_one_store_per_output() {
        let l = lower(&matmul(4, 8, 6), &Opts::default());
        assert_eq!((l.global_size, l.local_size), (24, 1));
        assert_eq!(l.stores(), 1);
        assert_eq!(count(&l, |o| matches!(o, KOp::Range { size: 8, .. })), 1);
        assert_eq!(count(&l, |o| matches!(o, KOp::Load(_))), 2);
        assert_eq!(loads_per_output(&l), 2.0);
    }

    #[test]
    fn upcasting_shares_loads_that_do_not_depend_on_the_axis() {
        // Four outputs along n per invocation: a[i, j] is loaded once for all four.
        let l = lower(&matmul(4, 8, 6 * 4), &up(2, 4));
        assert_eq!(l.global_size, 24);
        assert_eq!(l.stores(), 4);
        assert_eq!(count(&l, |o| matches!(o, KOp::Reduce(_))), 4);
        // The loop is shared by the four reduces.
        assert_eq!(count(&l, |o| matches!(o, KOp::Range { .. })), 1);
        assert!(loads_per_output(&l) < 2.0, "{}", loads_per_output(&l));
    }

    #[test]
    fn actions_that_do_not_divide_their_axis_are_refused() {
        let k = matmul(4, 8, 6);
        assert!(check(&k, &up(2, 4)).is_err());
        let l = lower(&k, &up(2, 4));
        assert_eq!((l.global_size, l.stores()), (24, 1), "lowered plainly");
        let not_reduce = Opts {
            group: Some((0, 2)),
            ..Opts::default()
        };
        assert!(check(&k, &not_reduce).is_err());
    }

    #[test]
    fn a_grouped_reduce_combines_partials_after_a_barrier() {
        // 8 invocations per output split the 8-long reduce; 2 outputs per workgroup.
        let o = Opts {
            local: vec![(2, 2)],
            group: Some((1, 8)),
            ..Opts::default()
        };
        let l = lower(&matmul(4, 16, 6), &o);
        assert_eq!(l.local_size, 16);
        assert_eq!(l.global_size, 24 * 8);
        assert_eq!(l.shared, vec![(DType::F32, 16)]);
        let kinds: Vec<&str> = l
            .effects
            .iter()
            .map(|e| match e {
                Effect::StoreShared { .. } => "shared",
                Effect::Barrier => "barrier",
                Effect::Store { gate, .. } => {
                    assert!(gate.is_some(), "only the group's first invocation stores");
                    "store"
                }
            })
            .collect();
        assert_eq!(kinds, ["shared", "barrier", "store"]);
        // The partial loop runs 16 / 8 = 2 times, the combine loop 8.
        assert_eq!(count(&l, |o| matches!(o, KOp::Range { size: 2, .. })), 1);
        assert_eq!(count(&l, |o| matches!(o, KOp::Range { size: 8, .. })), 1);
    }

    #[test]
    fn a_grouped_sum_combines_one_partial_per_subgroup() {
        // Groups of 16 over subgroups of 4: each subgroup sums its lanes' partials in registers,
        // and the combine reads 16 / 4 = 4 of them instead of 16.
        let grouped = Opts {
            local: vec![(2, 2)],
            group: Some((1, 16)),
            ..Opts::default()
        };
        let t = |subgroup| super::super::Target {
            subgroup,
            ..super::super::Target::new(crate::context::OptTarget::Gpu)
        };
        let o = grouped.for_target(&t(4));
        assert_eq!(o.subgroup, Some(4));
        let l = lower(&matmul(4, 32, 6), &o);
        assert_eq!(count(&l, |o| matches!(o, KOp::SubgroupSum(4))), 1);
        assert_eq!(count(&l, |o| matches!(o, KOp::Range { size: 4, .. })), 1);
        assert_eq!(count(&l, |o| matches!(o, KOp::Range { size: 16, .. })), 0);
        // A group smaller than the subgroup, or not a multiple of it, or no subgroups: none.
        for (size, sg) in [(16, 32), (16, 3), (16, 0)] {
            let o = Opts {
                group: Some((1, size)),
                ..grouped.clone()
            };
            assert_eq!(o.for_target(&t(sg)).subgroup, None, "{size} {sg}");
        }
        // A grouped max combines through workgroup memory only.
        let mut k = matmul(4, 32, 6);
        let mut root = (*k.root).clone();
        root.op = AstOp::Reduce(ReduceOp::Max, vec![1]);
        k.root = Arc::new(root);
        let l = lower(&k, &o);
        assert_eq!(count(&l, |o| matches!(o, KOp::SubgroupSum(_))), 0);
    }

    #[test]
    fn a_staged_matmul_reads_each_operand_tile_once_per_workgroup() {
        // 4x4 invocations of 4x4 outputs: a 16x16 tile of outputs per workgroup, steps of 8.
        let o = Opts {
            upcast: vec![(0, 4), (2, 4)],
            local: vec![(0, 4), (2, 4)],
            stage: Some((1, 8)),
            ..Opts::default()
        };
        let k = matmul(32, 64, 48);
        check(&k, &o).unwrap();
        assert_eq!(tiles(&k, &o), [vec![16, 8, 1], vec![1, 8, 16]]);
        let l = lower(&k, &o);
        assert_eq!((l.global_size, l.local_size), (32 * 48 / 16, 16));
        assert_eq!(l.shared, [(DType::F32, 128), (DType::F32, 128)]);
        let lk = crate::codegen::linear_kernel_of(&k, &l);
        // Per step: 2 x 128 / 16 elements loaded, 16 outputs x 8 multiply-adds.
        assert_eq!(lk.global_loads_per_fma(), 16.0 / 128.0, "{lk}");
        let unstaged = crate::codegen::linear_kernel_with(
            &k,
            &Opts {
                upcast: o.upcast.clone(),
                ..Opts::default()
            },
        );
        assert_eq!(unstaged.global_loads_per_fma(), 0.5, "{unstaged}");
        // Two barriers per step, inside the loop over steps.
        let loops: Vec<usize> = lk
            .insts
            .iter()
            .enumerate()
            .filter(|(_, i)| matches!(i, Inst::Loop { .. }))
            .map(|(p, _)| p)
            .collect();
        let barriers: Vec<usize> = lk
            .insts
            .iter()
            .enumerate()
            .filter(|(_, i)| matches!(i, Inst::Barrier))
            .map(|(p, _)| p)
            .collect();
        assert_eq!(barriers.len(), 2, "{lk}");
        assert!(loops[0] < barriers[0] && barriers[1] < loops[1], "{lk}");
    }

    #[test]
    fn a_tiles_last_round_counts_the_invocations_that_load() {
        // 4x4 invocations, steps of 5: tiles of 20 elements load in a round of 16 and one of
        // 4 (the other 12 invocations gated off by their index alone).
        let o = Opts {
            local: vec![(0, 4), (2, 4)],
            stage: Some((1, 5)),
            ..Opts::default()
        };
        let k = matmul(8, 10, 8);
        assert_eq!(tiles(&k, &o), [vec![4, 5, 1], vec![1, 5, 4]]);
        let lk = crate::codegen::linear_kernel_with(&k, &o);
        assert_eq!(lk.shared, [(DType::F32, 32), (DType::F32, 32)]);
        // Per step and invocation: 2 x 20 / 16 elements loaded, 5 multiply-adds.
        assert_eq!(lk.global_loads_per_fma(), 40.0 / 16.0 / 5.0, "{lk}");
    }

    #[test]
    fn stage_needs_a_workgroup_and_no_group() {
        let k = matmul(32, 64, 48);
        let no_local = Opts {
            stage: Some((1, 8)),
            ..Opts::default()
        };
        assert!(check(&k, &no_local).is_err());
        let with_group = Opts {
            local: vec![(0, 4), (2, 4)],
            group: Some((1, 2)),
            stage: Some((1, 8)),
            ..Opts::default()
        };
        assert!(check(&k, &with_group).is_err());
    }

    #[test]
    fn a_sum_of_products_is_not_unrolled() {
        let o = Opts {
            unroll: Some((1, 4)),
            ..Opts::default()
        };
        assert!(check(&matmul(4, 8, 6), &o).is_err());
    }

    #[test]
    fn unrolling_repeats_the_body_in_a_shorter_loop() {
        let o = Opts {
            unroll: Some((1, 4)),
            ..Opts::default()
        };
        // A max of products (a sum of them is not unrolled).
        let mut k = matmul(4, 8, 6);
        let r = k.root.clone();
        k.root = Arc::new(AstNode {
            op: AstOp::Reduce(ReduceOp::Max, vec![1]),
            dtype: r.dtype,
            shape: r.shape.clone(),
            src: r.src.clone(),
        });
        let l = lower(&k, &o);
        assert_eq!(count(&l, |o| matches!(o, KOp::Range { size: 2, .. })), 1);
        assert_eq!(count(&l, |o| matches!(o, KOp::Load(_))), 8);
    }
}

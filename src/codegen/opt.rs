//! The kernel optimizer's default choices, per target (hand-coded heuristics; `BEAM` search
//! would time alternatives instead). Between scheduling and lowering it picks the actions of
//! `lower::Opts` and whether to split a reduce into two kernels (`split.rs`):
//!
//! - **GPU**: enough invocations to fill the device and short loops per invocation. A
//!   matmul-like reduce stages its operand tiles in workgroup memory (`stage_opts`: a register
//!   block, a workgroup and a step chosen for the fewest loads per multiply-add), split into
//!   parts first where it is too long or too narrow to stage whole; smaller workgroups where
//!   only those stage (an output axis of 65 takes a register block of 13). Any other reduce with few
//!   outputs or a long loop is grouped (split across a workgroup's invocations) and, when that is
//!   not enough, split across workgroups, choosing by a simple time model: a kernel takes its
//!   loop length times the waves of invocations the device runs one after another. Register
//!   blocking (upcast) only where parallelism stays high.
//! - **software GPU adapters** (lavapipe, SwiftShader): no barriers; a long reduce is split as
//!   on the CPU (which also keeps loops far below the 65,535 iterations after which llvmpipe
//!   silently stops an invocation's loops); upcasts chosen by the distinct loads and cache
//!   lines per output of the reduce loop, up to large blocks, and an elementwise kernel's row
//!   of outputs per invocation (each invocation costs them more than a few operations).
//! - **CPU** (C, and the interpreter): the upcasts a cycle model of the C dialect's vector code
//!   (`vectorize.rs`) and of the cache lines read finds cheapest, every combination of up to
//!   three axes tried, a window's short loop unrolled or not; an elementwise kernel's row of
//!   outputs per invocation (its indices computed once a row); a whole short axis upcast and a
//!   short reduce loop unrolled where that folds most of the index divisions to constants; a
//!   long reduce split into parts whose inputs stay in L2 and whose sums run as independent
//!   chains on every core.

use super::linearize::Inst;
use super::lower::{
    aligned_reduce, check, folded_reduce_axes, gathers_per_output, lines_per_output,
    loads_per_output, lower, stageable_operands, tiles_of, Lowered, Operand, Opts,
};
use super::vectorize::{self, VExpr};
use super::{c, OptTarget, Target};
use crate::dtype::DType;
use crate::kernel::{AstNode, AstOp, KernelAst, LOOP_BITS};
use crate::ops::{BinaryOp, UnaryOp};

/// Outputs one CPU invocation may compute per 16 vector registers (`Target::registers`): 72 lets
/// a weight gradient keep 8 output channels of a 3x3 window (nine vectors, one gathered operand
/// shared by all). The C compiler keeps the accumulators that fit in registers and spills the
/// rest to L1, which still beats re-streaming the reduce's inputs. With AVX-512's 32 registers,
/// twice that made the training step 1.10x faster (the weight gradient keeps 16 input channels
/// of 8 output channels, sixteen multiply-adds per gather); with 16, 1.05x slower (the same
/// machine, its kernels compiled without AVX-512).
const MAX_UPCAST: usize = 72;
/// Outputs one CPU invocation may compute for a window's reduce (`WINDOW`): its accumulators
/// live for a few iterations only. 104 lets conv1's forward keep a row of 13 outputs for 8
/// channels, 2x faster than 8 channels of 8 batches, whose input bytes are gathered (the
/// same 104 made conv2's forward, 288 iterations long, 1.3x slower).
const MAX_UPCAST_WINDOW: usize = 104;
/// Outputs one invocation may compute on software GPU adapters. Each invocation costs them more
/// than its arithmetic, so large blocks pay: on SwiftShader (Chromium), 192 against 96 made the
/// small GPT's step 222 -> 185 ms and the medium's 5.4 -> 4.4 s, the tutorial CNN's 5% faster,
/// and every first step about 1 s longer (larger kernels compile longer); 384 was no faster
/// and doubled the first step, 32 was 1.4x slower. On lavapipe, 88 let a convolution keep a row
/// of 11 outputs for 8 channels, 2x faster than 22 outputs.
const MAX_UPCAST_SOFT: usize = 192;
/// Outputs of a row one invocation of an elementwise kernel computes on software GPU adapters:
/// they run a workgroup at a time, and each costs more than a few elements (SwiftShader took
/// 1.6 ms for 1,024 workgroups of 64 products each).
const SOFT_ROW: usize = 8;
/// Outputs `fold_indices` lets one CPU invocation compute.
const MAX_UPCAST_FOLD: usize = 36;
/// Operations of one exponential (`exp2`: the C dialect's polynomial, a clamp, a rounding and
/// two scalings), for the CPU cost model.
const EXP2_OPS: f64 = 16.0;
/// Cycles from one add to the next on one accumulator (a floating-point add's latency).
const ACC_LATENCY: f64 = 4.0;
/// Choices the CPU upcast search extends per round: the 16 cheapest (1 would be greedy).
/// Extending all of them costed every combination of up to three axes and chose the same plan
/// for each of the 299 distinct kernels of the tutorial's step and the two GPT sizes (4 chose
/// another for one), with 15-30% more planning time.
const CPU_BEAM: usize = 16;
/// How far above the cheapest choice so far a choice of the upcast search may cost and still be
/// extended by another axis: its extensions would have to cut its cost to a third to win. With
/// 3, every kernel of the tutorial's step and of both GPT sizes renders the same source as with
/// no limit, for 16 and for 32 vector registers, and the search lowers a quarter fewer
/// candidates (plan time with 32 registers: CNN 3.7 -> 2.8 s, small GPT 3.0 -> 2.4 s); 2 changed
/// conv2's weight gradient with 16 registers (`tests/gpu_shape.rs` pins it).
const EXTEND_WITHIN: f64 = 3.0;
/// The upcast amounts the search tries on an axis they divide (largest first).
const UPCASTS: [usize; 6] = [16, 9, 8, 4, 3, 2];
/// Outputs one GPU invocation may compute (registers are scarcer per invocation).
const MAX_UPCAST_GPU: usize = 16;
/// Invocations a kernel with real work should launch on a GPU: a quarter of those it runs at
/// once (`Target::parallel`; ~100k–270k on a large one, and fewer than a quarter leaves most
/// of it idle: on an H200, weight gradients with 16,384 invocations ran at 1.4 TFLOP/s).
pub fn gpu_parallel(t: &Target) -> usize {
    (t.parallel / 4).max(1)
}
/// Work (output elements times reduce length) above which a GPU kernel must be parallel (each
/// element costs several scalar ops: index arithmetic, a load, a multiply-add).
const GPU_BIG_WORK: usize = 1 << 16;
/// Loop iterations per invocation a GPU kernel should stay under.
pub const GPU_MAX_LOOP: usize = 2048;
/// The longest reduce loop even `OptTarget::None` keeps: lavapipe's llvmpipe stops a loop
/// after 65,535 iterations, silently (a reduce over a prime length of 65,537 came out short).
const NOOPT_MAX_LOOP: usize = 1 << 15;
/// The largest group (invocations sharing one reduce).
const MAX_GROUP: usize = 256;
/// The cost of launching one more kernel, in loop iterations of the time model.
const LAUNCH: f64 = 256.0;
/// A CPU reduce at least this long is split into parts of at most `CPU_PART` elements: an
/// invocation of one long reduce streams its whole inputs (a weight gradient's reduce over the
/// batch reads megabytes, from L3 or memory, once per invocation), while the invocations of one
/// part share that part's inputs from L2; and a long serial sum is one chain of dependent adds
/// where a split one runs as independent chains, on every core.
const CPU_LONG: usize = 8192;
/// The longest loop each part of a split CPU reduce keeps.
const CPU_PART: usize = 2048;
/// Bytes of a CPU reduce's operand read again for every tile of an outer output axis, above
/// which those reads come from L3 or memory rather than L2 (`restream_split`).
const CPU_RESTREAM: usize = 1 << 20;
/// The input bytes each part of a reduce split by `restream_split` reads at most. On the medium
/// GPT's weight gradients (inputs 10 MiB; 2-vCPU Xeon, 2 MiB L2), parts reading 320 KiB ran
/// 3.0x faster than the unsplit kernel, parts reading 2.5 MiB 1.9x.
const CPU_PART_BYTES: usize = 512 << 10;
/// The shortest loop a part of `restream_split` keeps (shorter, the partial sums written and
/// read again would cost more than the reads they save).
const CPU_MIN_PART: usize = 64;
/// The longest reduce loop `fold_indices` unrolls whole.
const FOLD_UNROLL: usize = 4;
/// The share of the divisions per output an unroll must leave at most to be taken.
const FOLD_GAIN: f64 = 0.5;
/// Divisions per output below which `fold_indices` tries nothing.
const FOLD_MIN: f64 = 4.0;
/// The share of a kernel's operations per output its divisions must make for `fold_indices` to
/// try anything. Where a body is mostly other work (a softmax's exponential: 4 divisions among
/// about 40 operations) the copies save little, and GCC's loop vectorizer, widening 16 copies
/// of the exp2 polynomial, took 1.4 s to compile such a kernel instead of 0.17 s (the RTL
/// combiner): a third of a small GPT's first call. The tutorial's pooling gradients (5 and 7
/// among 18 and 27) still fold.
const FOLD_SHARE: f64 = 0.2;
/// The operations one transcendental unary op costs (the C dialect's exp2 polynomial: about 22;
/// `log2f`, `sinf` are library calls of at least as many).
const TRANSCENDENTAL_OPS: u64 = 22;
/// The longest reduce the CPU search also tries with a loop unrolled (`window_unrolls`).
const WINDOW: usize = 16;
/// Shuffle cycles a CPU kernel spends per output whose lane of a vector accumulator runs along
/// another axis of the output than its neighbours': GCC transposes the vectors (a weight
/// gradient's 32x4 register tile: about 220 shuffles for 128 outputs).
const TRANSPOSE_CYCLES: f64 = 1.75;
/// Costs within this share of each other, of upcasts of as many outputs, are a tie the CPU's
/// store cost decides (`best_upcast`).
const TIE: f64 = 1e-3;
/// Cycles the CPU cost adds per cache line a kernel's reduce loops read for one output
/// (`lines_per_output`): small, so that it decides between choices the cycle model finds
/// alike (rows read whole against many rows far apart: a max-pooling window's 16 batches at
/// once run 2.4x slower than a row of 13 outputs).
const LINE_CYCLES: f64 = 0.25;

/// The kernel's reduce: (its output elements, its reduce axes with their sizes), leaving out
/// the axes lowering folds into a direct load (`folded_reduce_axes`: no loop to split, group
/// or unroll); `None` when no reduce loop remains.
fn reduce_of(ast: &KernelAst) -> Option<(usize, Vec<(usize, usize)>)> {
    let r = ast
        .root
        .find(&|n| matches!(n.op, AstOp::Reduce(..)), &|_| false)?;
    let AstOp::Reduce(_, axes) = &r.op else {
        return None;
    };
    let folded = folded_reduce_axes(ast);
    let sizes: Vec<(usize, usize)> = axes
        .iter()
        .filter(|a| !folded.contains(a))
        .map(|&a| (a, r.src[0].shape[a]))
        .collect();
    (!sizes.is_empty()).then(|| (r.shape.iter().product(), sizes))
}

fn divisors(n: usize) -> impl Iterator<Item = usize> {
    (2..=n).filter(move |d| n % d == 0)
}

/// The time model of one GPU kernel with `out` outputs reducing `rlen` elements, grouped by
/// `g`: (time, invocations, loop iterations per invocation). A wave is the invocations `t`
/// runs at once.
fn gpu_time(out: usize, rlen: usize, g: usize, t: &Target) -> (f64, usize, usize) {
    let lp = rlen / g + if g > 1 { g } else { 0 };
    let inv = out * g;
    let waves = inv.div_ceil(t.parallel.max(1)).max(1);
    let mut time = (lp * waves) as f64;
    if out * rlen > GPU_BIG_WORK && inv < gpu_parallel(t) {
        time *= 4.0;
    }
    (time, inv, lp)
}

/// The best group for a GPU reduce: (group, its time).
fn gpu_group(
    out: usize,
    axes: &[(usize, usize)],
    aligned: bool,
    t: &Target,
) -> (usize, usize, f64) {
    let rlen: usize = axes.iter().map(|a| a.1).product();
    let mut best = (usize::MAX, 1, gpu_time(out, rlen, 1, t).0);
    // Plenty of outputs and a short loop: barriers would buy nothing.
    if !aligned || (out >= 4 * gpu_parallel(t) && rlen <= GPU_MAX_LOOP / 2) {
        return best;
    }
    let max = MAX_GROUP.min(t.max_local).min(t.max_shared / 4);
    for &(axis, size) in axes {
        for g in divisors(size).filter(|&g| g <= max) {
            let (time, ..) = gpu_time(out, rlen, g, t);
            if time < best.2 {
                best = (axis, g, time);
            }
        }
    }
    best
}

/// Whether (and how) to split this kernel's reduce into two kernels: (reduce axis, parts).
/// `nested`: `ast` is a kernel of a split already (on the CPU only a reduce still too long is
/// split again: its parts were sized for L2).
pub fn split_for(ast: &KernelAst, t: &Target, nested: bool) -> Option<(usize, usize)> {
    let (out, axes) = reduce_of(ast)?;
    let rlen: usize = axes.iter().map(|a| a.1).product();
    match t.kind {
        // No optimization, but no loop so long that a software adapter cuts it short.
        OptTarget::None => {
            let fits = |&(a, p): &(usize, usize)| part_len(&axes, a, p) <= NOOPT_MAX_LOOP;
            if rlen <= NOOPT_MAX_LOOP {
                return None;
            }
            candidates(&axes)
                .chain(padded_candidates(&axes))
                .filter(fits)
                .min_by_key(|&(_, p)| p)
        }
        // A software adapter runs its invocations on the CPU's cores, so its long reduces are
        // split as the CPU's are (a weight gradient's few invocations leave cores idle).
        OptTarget::Cpu | OptTarget::SoftGpu => {
            if rlen < CPU_LONG {
                // (Software adapters keep their plans: measured on the CPU kind only, whose
                // kernels the C and WebAssembly backends both run.)
                return if nested || t.kind != OptTarget::Cpu {
                    None
                } else {
                    restream_split(ast, &axes)
                };
            }
            // The fewest parts that bring each part's loop under `CPU_PART` and give every
            // core several of them.
            let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
            let want = (4 * cores).div_ceil(out);
            // Exact parts first; padded ones where no divisor will do (a prime length).
            let fits = |&(a, p): &(usize, usize)| p >= want && part_len(&axes, a, p) <= CPU_PART;
            candidates(&axes)
                .filter(fits)
                .min_by_key(|&(_, p)| p)
                .or_else(|| {
                    padded_candidates(&axes)
                        .filter(fits)
                        .min_by_key(|&(_, p)| p)
                })
                .or_else(|| {
                    candidates(&axes)
                        .chain(padded_candidates(&axes))
                        .filter(|&(_, p)| p >= want)
                        .min_by_key(|&(a, p)| p.max(part_len(&axes, a, p)))
                })
        }
        OptTarget::Gpu => {
            // A reduce staged in workgroup memory with full workgroups stays one kernel (a
            // part of a split, with any); one too long, or with too few outputs, to stage is
            // split into the fewest parts whose first kernel stages (a weight gradient: a matmul
            // over every row of the batch).
            if stage_plan(ast, t, false).is_some() {
                return None;
            }
            let whole = stage_plan(ast, t, true).map(|p| p.0);
            if nested && whole.is_some() {
                return None;
            }
            // With full workgroups, unless smaller ones stage for a fraction of the cost (the
            // GPT's output layer's weight gradient: a vocabulary of 65 blocked by 13), whole or
            // split (the whole kernel where that costs no more).
            let full = split_to_stage(ast, &axes, t, false);
            let small = split_to_stage(ast, &axes, t, true);
            let cost = |c: Option<((usize, usize), f64)>| c.map_or(f64::INFINITY, |c| c.1);
            let least = whole.unwrap_or(f64::INFINITY).min(cost(small));
            if full.is_some() && cost(full) <= SMALL_WORKGROUP_GAIN * least {
                return full.map(|c| c.0);
            }
            if whole.is_some_and(|w| w <= cost(small)) {
                return None;
            }
            if small.is_some() {
                return small.map(|c| c.0);
            }
            let aligned = aligned_reduce(ast).is_some();
            let (_, g0, t0) = gpu_group(out, &axes, aligned, t);
            let loop0 = gpu_time(out, rlen, g0, t).2;
            // The best split by the time model: (choice, time, its first kernel's loop).
            let best_of = |cands: &mut dyn Iterator<Item = (usize, usize)>| {
                let mut best: Option<((usize, usize), f64, usize)> = None;
                for (axis, p) in cands {
                    let first: Vec<(usize, usize)> = axes
                        .iter()
                        .map(|&(a, s)| {
                            if a == axis {
                                (a, s.div_ceil(p))
                            } else {
                                (a, s)
                            }
                        })
                        .collect();
                    let (_, g1, t1) = gpu_group(out * p, &first, true, t);
                    let (_, _, t2) = gpu_group(out, &[(axis, p)], true, t);
                    let time = t1 + t2 + LAUNCH;
                    if best.is_none_or(|b| time < b.1) {
                        let lp = gpu_time(out * p, part_len(&axes, axis, p), g1, t).2;
                        best = Some(((axis, p), time, lp));
                    }
                }
                best
            };
            // Exact parts first; padded ones where no divisor leaves a short enough loop.
            let mut best = best_of(&mut candidates(&axes));
            if best.is_none_or(|b| b.2 > GPU_MAX_LOOP) {
                best = best_of(&mut padded_candidates(&axes)).or(best);
            }
            let (choice, time, _) = best?;
            (time < t0 || loop0 > GPU_MAX_LOOP).then_some(choice)
        }
    }
}

/// A CPU split for a reduce that reads an operand again for every tile of an outer output axis
/// it does not depend on, when that operand is larger than L2 keeps: a weight gradient
/// `dW[o, c] = sum over rows of dY[row, o] * X[row, c]` sweeps the tiles of `c` inside those of
/// `o`, reading all of `X` once per tile row of `o` (the forward `X @ W` reads its own large
/// operand once: its rows belong to the outer axis). Split into parts whose inputs fit in
/// `CPU_PART_BYTES`, the tiles of one part share them from L2; the second kernel adds the
/// partial sums. `None` when no operand is read again, or it fits (`CPU_RESTREAM`).
fn restream_split(ast: &KernelAst, axes: &[(usize, usize)]) -> Option<(usize, usize)> {
    let ops = stageable_operands(ast);
    let full = &ops.first()?.node.shape;
    let reduce: Vec<usize> = axes.iter().map(|a| a.0).collect();
    let outs: Vec<usize> = (0..full.len())
        .filter(|a| !reduce.contains(a) && full[*a] > 1)
        .collect();
    // Its bytes over the axes it depends on that pass `from` (the reduce's and those inside).
    let bytes = |o: &Operand, from: usize| -> usize {
        let n: usize = (0..full.len())
            .filter(|&a| o.deps[a] && (a >= from || reduce.contains(&a)))
            .map(|a| full[a])
            .product();
        n * o.node.dtype.size()
    };
    // Read again for every step of the outermost output axis it skips while depending on one
    // inside it; between two reads of an element the sweep reads the operand's part inside.
    let again = |o: &Operand| {
        outs.iter()
            .find(|&&n| !o.deps[n] && outs.iter().any(|&d| d > n && o.deps[d]))
            .map(|&n| bytes(o, n))
    };
    let restreamed: usize = ops.iter().filter_map(again).sum();
    if restreamed <= CPU_RESTREAM {
        return None;
    }
    let total: usize = ops.iter().map(|o| bytes(o, 0)).sum();
    // Each index of a reduce axis outside another a part too, first among equals: a part is
    // then a run of whole rows, contiguous in memory (the medium GPT's MLP weight gradients,
    // split 32 ways: the 32 batches, not a stride of 4 of each batch's 128 positions, whose
    // rows lie 64 KiB apart; the pair of kernels 6% faster).
    let whole = axes
        .iter()
        .filter(|&&(a, s)| s > 1 && axes.iter().any(|&(b, t)| b > a && t > 1))
        .copied();
    let cands: Vec<(usize, usize)> = whole
        .chain(candidates(axes))
        .filter(|&(a, p)| part_len(axes, a, p) >= CPU_MIN_PART)
        .collect();
    cands
        .iter()
        .copied()
        .filter(|&(_, p)| total.div_ceil(p) <= CPU_PART_BYTES)
        .min_by_key(|&(_, p)| p)
        .or_else(|| cands.iter().copied().max_by_key(|&(_, p)| p))
}

/// How many times cheaper (`stage_opts`' cost) a plan with smaller workgroups than
/// `STAGE_LOCALS[0]` must be to replace a split that stages with full ones: the cost counts
/// loads, not the latency fewer invocations in flight hide less of (on the GPT, only the output
/// layer's weight gradient, 5.6 against 0.85, and the CNN's dense layer's, 5.5 against 1.05,
/// take smaller workgroups; the MLP's weight gradients, 1.5 against 0.69-1.25, keep theirs).
const SMALL_WORKGROUP_GAIN: f64 = 3.0;

/// Parts splits try to make a reduce stageable (`split_to_stage`).
const STAGE_SPLITS: [usize; 5] = [2, 4, 8, 16, 32];

/// The fewest parts (of `STAGE_SPLITS`, dividing a reduce axis) a split of `ast`'s reduce needs
/// for its first kernel to be staged in workgroup memory (`stage_plan`, with full workgroups or
/// `small` ones), with that kernel's cost.
fn split_to_stage(
    ast: &KernelAst,
    axes: &[(usize, usize)],
    t: &Target,
    small: bool,
) -> Option<((usize, usize), f64)> {
    if !t.tiles {
        return None;
    }
    STAGE_SPLITS.into_iter().find_map(|p| {
        axes.iter()
            .filter(|&&(_, size)| size % p == 0 && size > p)
            .find_map(|&(axis, _)| {
                let s = super::split::split(ast, axis, p)?;
                stage_plan(&s.first, t, small).map(|c| ((axis, p), c.0))
            })
    })
}

/// Every (reduce axis, parts) a split could use: parts dividing the axis, the axis left with
/// more than one element.
fn candidates(axes: &[(usize, usize)]) -> impl Iterator<Item = (usize, usize)> + '_ {
    axes.iter()
        .flat_map(|&(a, s)| divisors(s).filter(move |&p| p < s).map(move |p| (a, p)))
}

/// Splits of an axis into parts that do not divide it (`split` pads the axis with the reduce's
/// identity): powers of two up to an eighth of its length, so the padding stays under 1/8.
fn padded_candidates(axes: &[(usize, usize)]) -> impl Iterator<Item = (usize, usize)> + '_ {
    axes.iter().flat_map(|&(a, s)| {
        (1..usize::BITS)
            .map(|k| 1usize << k)
            .take_while(move |&p| p <= s / 8)
            .filter(move |&p| s % p != 0)
            .map(move |p| (a, p))
    })
}

/// The reduce length each part of a split of `axis` into `p` keeps (padded where `p` does not
/// divide it).
fn part_len(axes: &[(usize, usize)], axis: usize, p: usize) -> usize {
    axes.iter()
        .map(|&(a, s)| if a == axis { s.div_ceil(p) } else { s })
        .product()
}

/// The target's default actions for a kernel.
pub fn default_opts(ast: &KernelAst, t: &Target) -> Opts {
    match t.kind {
        OptTarget::None => Opts::default(),
        OptTarget::Cpu | OptTarget::SoftGpu => {
            // Upcast as far as loads shrink, leaving every core a few invocations.
            let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
            let base = Opts::default();
            if t.kind == OptTarget::Cpu {
                let cost = |l: &Lowered| cpu_cycles_per_output(ast, l, t.lanes);
                let stores = |l: &Lowered| cpu_store_cycles_per_output(ast, l, t.lanes);
                let ties: Option<&dyn Fn(&Lowered) -> f64> = Some(&stores);
                let max = if is_window(ast) {
                    MAX_UPCAST_WINDOW
                } else {
                    MAX_UPCAST * t.registers / 16
                };
                if reduce_of(ast).is_none() {
                    if let Some(o) = transposed_rows(ast, 4 * cores) {
                        return fold_indices(ast, o, 4 * cores);
                    }
                    let rows = if t.loop_vectorizer { 4 * t.lanes } else { 16 };
                    if let Some(o) = elementwise_rows(ast, max.min(rows), 4 * cores) {
                        return o;
                    }
                }
                // With 512-bit vectors, two of them along one axis too (32 outputs: a matmul's
                // block of 2 vectors by 4 rows loads 6 values per 8 multiply-adds, where 1 by 8
                // loads 9).
                let pair = (t.lanes > c::VECTOR_LANES).then_some(2 * t.lanes);
                let plain = window_unrolls(ast, base.clone()).into_iter().map(|b| {
                    let (o, l) =
                        best_upcast(ast, b, max, 4 * cores, 1, &cost, ties, CPU_BEAM, pair);
                    (cost(&l), o)
                });
                // A reduce whose rows lie along the loop (a softmax's max and sum, a layer
                // norm's mean) in vector lanes: each output's partials are a whole vector, so
                // fewer outputs fit the registers, and folding them costs about a cycle each.
                let lanes = row_lanes(ast, base, t).into_iter().map(|b| {
                    let n = b.lanes.map_or(1, |l| l.1);
                    let folded = |l: &Lowered| cost(l) + n as f64;
                    let (o, l) =
                        best_upcast(ast, b, max / n, 4 * cores, 1, &folded, ties, CPU_BEAM, None);
                    (folded(&l), o)
                });
                let o = plain
                    .chain(lanes)
                    .min_by(|a, b| a.0.total_cmp(&b.0))
                    .map_or_else(Opts::default, |c| c.1);
                fold_indices(ast, o, 4 * cores)
            } else {
                if reduce_of(ast).is_none() {
                    if let Some(o) = elementwise_rows(ast, SOFT_ROW, 4 * cores) {
                        return o;
                    }
                }
                best_upcast(
                    ast,
                    base,
                    MAX_UPCAST_SOFT,
                    4 * cores,
                    1,
                    &soft_gpu_cost,
                    None,
                    1,
                    None,
                )
                .0
            }
        }
        OptTarget::Gpu => gpu_opts(ast, t),
    }
}

/// An elementwise kernel's upcast: a row of up to `max` outputs of its last axis (64, 32, 16, 8
/// or 4: the largest that divides it and leaves every core a few invocations), which the C
/// dialect computes as SIMD vectors, its index arithmetic done once per row. WebAssembly's
/// compiler vectorizes no loop by itself (V8's scalar loop over a GELU took 14 ns an element);
/// GCC vectorizes the invocation loop, but recomputes each element's indices (a causal mask's
/// `row % 16384 / 128`) in vector integer code: rows of 64 made the medium GPT's attention
/// softmax kernels 17.8 -> 7.6 ms a step and the step 184 -> 158-165 ms (2-vCPU AVX-512 Xeon;
/// rows of 16 and 32 measured within noise of 64, the tutorial's CNN unchanged). `None` where no
/// such row divides the axis (the other heuristics then apply: `fold_indices`).
fn elementwise_rows(ast: &KernelAst, max: usize, min_inv: usize) -> Option<Opts> {
    let out: usize = ast.root.shape.iter().product();
    let (axis, &size) = ast.root.shape.iter().enumerate().rev().find(|a| *a.1 > 1)?;
    [64, 32, 16, 8, 4]
        .into_iter()
        .filter(|&n| size % n == 0 && n <= max && out / n >= min_inv)
        .map(|n| Opts {
            upcast: vec![(axis, n)],
            ..Opts::default()
        })
        .find(|o| check(ast, o).is_ok())
}

/// For an elementwise kernel that reads a buffer across its rows (a transpose: consecutive
/// outputs read elements a row apart, each from another cache line), outputs along the axis
/// the buffer is contiguous in, so that each invocation reads a run of consecutive elements
/// and consecutive invocations fill the rows they write together (the GPT's q/k/v gradient,
/// which reads v's gradient transposed: 10 -> 4 ms a medium step).
fn transposed_rows(ast: &KernelAst, min_inv: usize) -> Option<Opts> {
    let shape = &ast.root.shape;
    let out: usize = shape.iter().product();
    let last = shape.iter().rposition(|&n| n > 1)?;
    // The strides a node reads a buffer with, for a load in the kernel's shape, or a view of a
    // load of a whole buffer in order.
    let strides = |n: &AstNode| -> Option<Vec<isize>> {
        let [v] = (match &n.op {
            AstOp::Load { st, .. } => st,
            AstOp::View(st) => match &n.src[0].op {
                AstOp::Load { st: inner, .. } if inner.views.len() == 1 => {
                    let i = &inner.views[0];
                    let whole = i.offset == 0 && i.mask.is_none();
                    (whole && i.strides == crate::shape::strides_for(&i.shape)).then_some(st)?
                }
                _ => return None,
            },
            _ => return None,
        })
        .views
        .as_slice() else {
            return None;
        };
        (n.shape == *shape).then(|| v.strides.clone())
    };
    let read = ast.root.find(
        &|n| strides(n).is_some_and(|s| s[last].unsigned_abs() > 1),
        &|n| matches!(n.op, AstOp::View(_)),
    )?;
    let st = strides(read)?;
    let axis = (0..last)
        .rev()
        .find(|&a| st[a].unsigned_abs() == 1 && shape[a] >= 4)?;
    // And a run along the output's rows too where it has one: a tile whose outputs are stored
    // as vectors, each built from the loads of one column of the tile (8 lanes: a gather),
    // not one scattered store per output.
    let rows = [8, 4]
        .into_iter()
        .filter(|&m| shape[last] % m == 0)
        .map(Some)
        .chain([None]);
    rows.flat_map(|m| {
        [16, 8, 4].into_iter().map(move |n| {
            let mut upcast = vec![(axis, n)];
            upcast.extend(m.map(|m| (last, m)));
            upcast
        })
    })
    .filter(|u| {
        let per: usize = u.iter().map(|a| a.1).product();
        u.iter().all(|&(a, n)| shape[a] % n == 0) && out / per >= min_inv
    })
    .map(|upcast| Opts {
        upcast,
        ..Opts::default()
    })
    .find(|o| check(ast, o).is_ok())
}

/// The bases a CPU upcast search starts from: none, and for a window's reduce (at most
/// `WINDOW` elements: pooling and its gradient, a few loads and operations per output, where
/// the order they read memory in decides the time) each short loop of it unrolled, so that a
/// row of outputs can read its input rows whole (max-pooling's forward through a ReLU: a row
/// of 13 outputs with the window's inner loop unrolled reads two rows of 26 inputs, 2.4x faster
/// than 16 batches' windows at once).
fn window_unrolls(ast: &KernelAst, base: Opts) -> Vec<Opts> {
    let mut v = vec![base.clone()];
    if let (Some((_, axes)), Some(_), true) = (reduce_of(ast), aligned_reduce(ast), is_window(ast))
    {
        for &(r, size) in axes.iter().filter(|a| a.1 > 1 && a.1 <= FOLD_UNROLL) {
            let mut c = base.clone();
            c.unroll = Some((r, size));
            if check(ast, &c).is_ok() {
                v.push(c);
            }
        }
    }
    v
}

/// The bases with `lanes` a CPU upcast search also starts from: the reduce kept in vector lanes
/// (`t.lanes`, and 8 where that is more) along each reduce axis an operand reads consecutive
/// elements on (a row's elements), where the lanes divide it.
fn row_lanes(ast: &KernelAst, base: Opts, t: &Target) -> Vec<Opts> {
    let Some((_, axes)) = reduce_of(ast) else {
        return vec![];
    };
    let rows: Vec<usize> = stageable_operands(ast)
        .iter()
        .flat_map(|op| op.contiguous.clone())
        .collect();
    let mut v = vec![];
    for &(axis, size) in axes.iter().filter(|a| rows.contains(&a.0)) {
        for n in [t.lanes, c::VECTOR_LANES] {
            let mut o = base.clone();
            o.lanes = Some((axis, n));
            if size > n && !v.contains(&o) && check(ast, &o).is_ok() {
                v.push(o);
            }
        }
    }
    v
}

/// Whether the kernel's reduce is a window's: at most `WINDOW` elements.
fn is_window(ast: &KernelAst) -> bool {
    reduce_of(ast).is_some_and(|(_, axes)| axes.iter().map(|a| a.1).product::<usize>() <= WINDOW)
}

/// How much searching the CPU optimizer's plan of `ast` takes, roughly (0: nothing to search,
/// an elementwise kernel): the bases it starts from times the output axes it can upcast. A
/// first step plans the largest first, so that a long search (a pooling gradient's: three bases,
/// four axes, most of a second) does not start last.
pub fn search_size(ast: &KernelAst) -> usize {
    if reduce_of(ast).is_none() {
        return 0;
    }
    let axes = ast.root.shape.iter().filter(|&&n| n > 1).count();
    window_unrolls(ast, Opts::default()).len() * axes
}

/// Lower a kernel with the target's default actions.
pub fn optimize(ast: &KernelAst, t: &Target) -> Lowered {
    lower(ast, &default_opts(ast, t))
}

/// The GPU actions: a group for reduces that need it, upcasts that keep enough invocations,
/// and a workgroup of neighbouring outputs around a group.
pub fn gpu_opts(ast: &KernelAst, t: &Target) -> Opts {
    if let Some(o) = staged_gpu_opts(ast, t) {
        return o;
    }
    let mut o = Opts::default();
    let out: usize = ast.root.shape.iter().product();
    let reduce = reduce_of(ast);
    let aligned = aligned_reduce(ast).is_some();
    let mut g = 1;
    if let Some((rout, axes)) = &reduce {
        let (axis, gs, _) = gpu_group(*rout, axes, aligned, t);
        if gs > 1 {
            o.group = Some((axis, gs));
            g = gs;
        }
    }
    let work = out
        * reduce
            .as_ref()
            .map_or(1, |(_, a)| a.iter().map(|x| x.1).product());
    // Upcast while the kernel stays parallel enough (and its partials fit in workgroup memory).
    let min_inv = if work > GPU_BIG_WORK {
        gpu_parallel(t)
    } else {
        1
    };
    let max_up = MAX_UPCAST_GPU.min((t.max_shared / 4 / g.max(1)).max(1));
    if reduce.is_some() {
        let (opts, _) = best_upcast(
            ast,
            o.clone(),
            max_up,
            min_inv,
            g,
            &loads_per_output,
            None,
            1,
            None,
        );
        o = opts;
    } else if let Some(&last) = ast.root.shape.last() {
        // Four consecutive outputs per invocation: vector stores (and loads where the inputs
        // are contiguous too), as long as the kernel stays parallel.
        if last % 4 == 0 && out / 4 >= gpu_parallel(t) {
            o.upcast.push((ast.root.shape.len() - 1, 4));
        }
    }
    if g > 1 {
        // Neighbouring outputs in one workgroup: along the innermost output axis that divides.
        let up: Vec<usize> = (0..ast.root.shape.len())
            .map(|i| o.upcast.iter().filter(|u| u.0 == i).map(|u| u.1).product())
            .collect();
        let max_l = (t.max_local.min(MAX_GROUP) / g).max(1);
        for axis in (0..ast.root.shape.len()).rev() {
            let left = ast.root.shape[axis] / up[axis];
            if left == 1 {
                continue;
            }
            if let Some(l) = (2..=max_l.min(left)).rev().find(|l| left % l == 0) {
                o.local.push((axis, l));
            }
            break;
        }
    }
    debug_assert!(check(ast, &o).is_ok(), "{o:?}");
    o
}

/// A reduce with outputs enough to fill the GPU and a loop short enough, staged in workgroup
/// memory where `stage_opts` finds that it cuts global loads (grouping it instead would
/// shorten its loop but read every operand from global memory).
///
/// A staged kernel hides memory latency with its register block's independent multiply-adds
/// rather than with many invocations in flight: it asks for a full workgroup per multiprocessor
/// (`Target::parallel / 8`), not `gpu_parallel`'s quarter of what the GPU keeps. (On an H200,
/// 1024x1024x1024 with 4x4 outputs per invocation, 65,536 invocations: 25 TFLOP/s; with 2x4
/// for 131,072, as `gpu_parallel` asks: 15.)
///
/// Where no plan with full workgroups stages (too few outputs for the register block it needs:
/// the GPT's output layer, whose vocabulary of 65 takes a block of 13), smaller workgroups may,
/// counting workgroup-memory reads every invocation shares as broadcasts (`small`).
fn staged_gpu_opts(ast: &KernelAst, t: &Target) -> Option<Opts> {
    stage_plan(ast, t, false)
        .or_else(|| stage_plan(ast, t, true))
        .map(|p| p.1)
}

/// `staged_gpu_opts` with full workgroups, or (`small`) down to the smallest of `STAGE_LOCALS`,
/// with its cost (`stage_opts`).
fn stage_plan(ast: &KernelAst, t: &Target, small: bool) -> Option<(f64, Opts)> {
    let (out, axes) = reduce_of(ast)?;
    let rlen: usize = axes.iter().map(|a| a.1).product();
    let min_inv = (t.parallel / SM_THREADS).max(1) * STAGE_LOCALS[0];
    if !t.tiles || out < min_inv || rlen > GPU_MAX_LOOP {
        return None;
    }
    let max_up = MAX_UPCAST_GPU.min(t.max_shared / 4);
    let (o, _) = best_upcast(
        ast,
        Opts::default(),
        max_up,
        min_inv,
        1,
        &loads_per_output,
        None,
        1,
        None,
    );
    if small {
        let least = min_inv / STAGE_LOCALS[0] * STAGE_LOCALS[STAGE_LOCALS.len() - 1];
        stage_opts(ast, &o, t, least, true)
    } else {
        stage_opts(ast, &o, t, min_inv, false)
    }
}

/// The amount of an axis a staged kernel's register block or step may take where no power of
/// two divides it usefully: its largest divisor up to 16 when that is not a power of two (a
/// convolution's row of 11 whole, 13 of a row of 26, a window of 3, 13 of a vocabulary of 65).
fn short_axis(size: usize) -> Option<usize> {
    (1..=16)
        .rev()
        .find(|d| size % d == 0)
        .filter(|d| !d.is_power_of_two())
}

/// The workgroups of about `wg` invocations a staged kernel tries over the output axes `free`
/// (`left`: the outputs per axis the register block leaves): `wg` along one axis, or split
/// between two in powers of two; or the whole of a short axis (`short_local`) times a power of
/// two split between up to two others.
fn workgroups(free: &[usize], left: &[usize], wg: usize) -> Vec<Vec<(usize, usize)>> {
    let fits = |l: &[(usize, usize)]| l.iter().all(|&(a, n)| left[a] % n == 0);
    let pow2 = |n: usize| {
        std::iter::successors(Some(1usize), |l| Some(l * 2)).take_while(move |&l| l <= n)
    };
    let mut out: Vec<Vec<(usize, usize)>> = vec![];
    let mut add = |l: Vec<(usize, usize)>| {
        let mut l: Vec<(usize, usize)> = l.into_iter().filter(|x| x.1 > 1).collect();
        l.sort_unstable();
        if fits(&l) && !out.contains(&l) {
            out.push(l);
        }
    };
    for (i, &a1) in free.iter().enumerate() {
        add(vec![(a1, wg)]);
        for &a2 in &free[i + 1..] {
            for l1 in pow2(wg) {
                add(vec![(a1, l1), (a2, wg / l1)]);
            }
        }
    }
    for &a in free {
        let Some((s, p)) = short_local(left[a], wg) else {
            continue;
        };
        let others: Vec<usize> = free.iter().copied().filter(|&b| b != a).collect();
        for (i, &b) in others.iter().enumerate() {
            for &c in &others[i..] {
                for lb in pow2(p) {
                    let lc = if b == c { 1 } else { p / lb };
                    let lb = if b == c { p } else { lb };
                    add(vec![(a, s), (b, lb), (c, lc)]);
                }
            }
        }
    }
    out
}

/// A workgroup's split that takes the whole of a short axis of `size` (`short_axis`: a
/// convolution's window of 3) times the largest power of two keeping it within `max`
/// invocations, where that fills whole warps of 32: (3, 64) for a window of 3.
fn short_local(size: usize, max: usize) -> Option<(usize, usize)> {
    let s = short_axis(size).filter(|&s| s == size)?;
    let p = (max / s).checked_ilog2().map(|k| 1usize << k)?;
    (s * p % 32 == 0).then_some((s, p))
}

/// The amounts a staged kernel's register block tries along an axis of `size`.
fn block_sizes(size: usize) -> impl Iterator<Item = usize> {
    [1, 2, 4, 8, 16].into_iter().chain(short_axis(size))
}

/// Workgroup sizes a staged kernel tries (invocations).
const STAGE_LOCALS: [usize; 3] = [256, 128, 64];
/// Steps of a staged reduce tried (elements of the reduce axis per tile).
const STAGE_STEPS: [usize; 3] = [16, 8, 4];
/// Invocations one GPU multiprocessor keeps (NVIDIA's since Volta: 2,048; AMD's and Apple's
/// are alike), to count multiprocessors from `Target::parallel`.
const SM_THREADS: usize = 2048;

/// Global loads per multiply-add of a reduce's stageable loads without staging: per step of
/// the reduce, each load once per distinct element among the invocation's outputs.
fn unstaged_loads_per_fma(loads: &[Operand], up: &[usize]) -> f64 {
    let outs: usize = up.iter().product();
    let per: usize = loads
        .iter()
        .map(|l| {
            (0..up.len())
                .filter(|&a| l.deps[a])
                .map(|a| up[a])
                .product::<usize>()
        })
        .sum();
    per as f64 / outs as f64
}

/// Global memory's cost per element read against workgroup memory's, for choosing a staged
/// kernel's register block and workgroup (a tile's element is read from global memory once
/// and from workgroup memory by every invocation that needs it).
const GLOBAL_PER_SHARED: f64 = 8.0;

/// `o` (the heuristic's upcasts for an unstaged kernel) staged in workgroup memory
/// (`Opts::stage`) where that costs less than it: a workgroup of up to `STAGE_LOCALS`
/// invocations over output axes (`workgroups`), a step of `STAGE_STEPS` (or a whole short
/// axis), and a register block of up to `MAX_UPCAST_GPU` outputs over up to two axes keeping
/// `min_inv` invocations; chosen for the fewest loads per multiply-add (global ones: tile
/// elements over the workgroup's outputs times the step, and the loads read directly where
/// their tiles would be scattered, weighted by `GLOBAL_PER_SHARED`; plus workgroup-memory ones,
/// the register block's), within the target's workgroup memory and keeping a workgroup per
/// multiprocessor.
/// `broadcasts`: a workgroup-memory read whose address no invocation of the workgroup varies
/// (an operand that depends on none of its axes) costs nothing (one read serves them all).
/// Returns the plan with its cost (weighted loads per multiply-add, broadcasts free, so that
/// plans of both kinds compare).
fn stage_opts(
    ast: &KernelAst,
    o: &Opts,
    t: &Target,
    min_inv: usize,
    broadcasts: bool,
) -> Option<(f64, Opts)> {
    if !o.local.is_empty() || o.group.is_some() || o.unroll.is_some() {
        return None;
    }
    let loads = stageable_operands(ast);
    let (_, raxes) = reduce_of(ast)?;
    let shape = &ast.root.shape;
    let rank = shape.len();
    let per_axis = |ups: &[(usize, usize)]| {
        let mut up = vec![1usize; rank];
        for &(a, n) in ups {
            up[a] *= n;
        }
        up
    };
    let up0 = per_axis(&o.upcast);
    let total: usize = shape.iter().product();
    let free: Vec<usize> = (0..rank)
        .filter(|&a| shape[a] > 1 && !raxes.iter().any(|r| r.0 == a))
        .collect();
    // The register blocks: the heuristic's, and blocks of up to `MAX_UPCAST_GPU` outputs over
    // one or two axes that keep `min_inv` invocations.
    let max_outs = (total / min_inv.max(1)).min(MAX_UPCAST_GPU);
    let mut blocks = vec![o.upcast.clone()];
    for (i, &a1) in free.iter().enumerate() {
        for &a2 in &free[i + 1..] {
            for u1 in block_sizes(shape[a1]) {
                for u2 in block_sizes(shape[a2]) {
                    let n = u1 * u2;
                    if (2..=max_outs).contains(&n) && shape[a1] % u1 == 0 && shape[a2] % u2 == 0 {
                        let b: Vec<(usize, usize)> = [(a1, u1), (a2, u2)]
                            .into_iter()
                            .filter(|u| u.1 > 1)
                            .collect();
                        if !blocks.contains(&b) {
                            blocks.push(b);
                        }
                    }
                }
            }
        }
    }
    let workgroups_min = (t.parallel / SM_THREADS).max(1);
    let mut best: Option<(f64, f64, Opts)> = None;
    let mut consider = |c: Opts, step: usize, up: &[usize]| {
        let wg = c.local_size();
        let outs: usize = up.iter().product();
        if total / (outs * wg) < workgroups_min {
            return;
        }
        // The loads staged, and those read directly (from global memory, once per distinct
        // element among the register block's outputs).
        let tiles = tiles_of(ast, &loads, &c);
        let (staged, direct): (Vec<Operand>, Vec<Operand>) = loads
            .iter()
            .cloned()
            .partition(|l| tiles.iter().any(|t| std::ptr::eq(t.0, l.node)));
        // Each multiply-add reads at most one element from workgroup memory: a register block
        // that shares no operand (a row of a convolution's outputs, whose inputs overlap only
        // in the window) gains nothing there that the caches do not give it already. (On an
        // H200 conv2's forward with a row of 11 outputs per invocation ran 1.8x slower staged.)
        let varying: Vec<Operand> = staged
            .iter()
            .filter(|l| c.local.iter().any(|&(a, _)| l.deps[a]))
            .cloned()
            .collect();
        let spread = unstaged_loads_per_fma(&varying, up);
        let shared = if broadcasts {
            spread
        } else {
            unstaged_loads_per_fma(&staged, up)
        };
        if shared > 1.0 {
            return;
        }
        // A tile is loaded in rounds of the whole workgroup (the last one padded), and its
        // array padded to match.
        let lens: Vec<usize> = tiles
            .iter()
            .map(|t| t.1.ext.iter().product::<usize>().next_multiple_of(wg))
            .collect();
        let bytes: usize = lens.iter().sum::<usize>() * 4;
        if tiles.is_empty() || bytes > t.max_shared {
            return;
        }
        // A load read directly costs a global read per distinct element of the block: worth
        // it only where the block shares it so widely that this costs no more than one
        // workgroup-memory read per multiply-add (a convolution's weights, shared by a row of
        // 11 outputs times 4 channels); otherwise a split that stages everything does better.
        let direct = unstaged_loads_per_fma(&direct, up);
        if GLOBAL_PER_SHARED * direct > 1.0 {
            return;
        }
        let global = lens.iter().sum::<usize>() as f64 / (outs * wg * step) as f64 + direct;
        let cost = GLOBAL_PER_SHARED * global + shared;
        if best.as_ref().is_none_or(|b| cost < b.0) && check(ast, &c).is_ok() {
            best = Some((cost, GLOBAL_PER_SHARED * global + spread, c));
        }
    };
    for block in &blocks {
        let up = per_axis(block);
        let left: Vec<usize> = (0..rank).map(|a| shape[a] / up[a]).collect();
        for &(axis, size) in &raxes {
            let steps = STAGE_STEPS.into_iter().chain(short_axis(size));
            for step in steps.filter(|s| size % s == 0) {
                for wg in STAGE_LOCALS.into_iter().filter(|&w| w <= t.max_local) {
                    for local in workgroups(&free, &left, wg) {
                        let c = Opts {
                            upcast: block.clone(),
                            local,
                            stage: Some((axis, step)),
                            ..Opts::default()
                        };
                        consider(c, step, &up);
                    }
                }
            }
        }
    }
    let unstaged = unstaged_loads_per_fma(&loads, &up0);
    let (cost, comparable, c) = best?;
    (cost < GLOBAL_PER_SHARED * unstaged).then_some((comparable, c))
}

/// The cost per output of a kernel on a software GPU adapter: its loads inside reduce loops,
/// each distinct load once (`gathers_per_output`: consecutive elements in one invocation do
/// not merge into a vector there), plus twice the cache lines they touch (`loads_per_output`'s groups of 16 elements). The weight
/// follows lavapipe's timings of conv2's forward: 16 batches x 2 channels (18 gathers from 18
/// lines) ran slower than 11 outputs x 2 batches (23 gathers from 3 lines).
fn soft_gpu_cost(l: &Lowered) -> f64 {
    gathers_per_output(l) + 2.0 * loads_per_output(l)
}

/// Integer divisions and remainders one invocation computes per output it stores (index
/// arithmetic through reshaped views; each costs tens of cycles), and all its operations per
/// output (loads, stores and arithmetic; a transcendental as `TRANSCENDENTAL_OPS`), loop
/// bodies counted by their trip counts.
fn divisions_and_ops(ast: &KernelAst, o: &Opts) -> (f64, f64) {
    let k = super::linear_kernel_with(ast, o);
    let mut mult = vec![1u64];
    let (mut divs, mut ops, mut stores) = (0u64, 0u64, 0u64);
    for i in &k.insts {
        let m = *mult.last().unwrap_or(&1);
        match i {
            Inst::Loop { size, .. } => mult.push(m * *size as u64),
            Inst::EndLoop => {
                mult.pop();
            }
            Inst::Binary {
                op: BinaryOp::Div | BinaryOp::Mod,
                dtype,
                ..
            } if !dtype.is_float() => divs += m,
            Inst::Store { .. } => stores += m,
            Inst::StoreVec { .. } => stores += 4 * m,
            _ => {}
        }
        ops += m * match i {
            Inst::Unary {
                op: UnaryOp::Exp2 | UnaryOp::Log2 | UnaryOp::Sin,
                ..
            } => TRANSCENDENTAL_OPS,
            Inst::Unary { .. }
            | Inst::Binary { .. }
            | Inst::Where { .. }
            | Inst::Cast { .. }
            | Inst::Load { .. }
            | Inst::Store { .. }
            | Inst::Acc { .. } => 1,
            _ => 0,
        };
    }
    let per = |n: u64| n as f64 / stores.max(1) as f64;
    (per(divs), per(ops))
}

/// Unroll a short reduce loop and upcast a whole short output axis where that leaves far fewer
/// integer divisions per output: the index arithmetic of a window's gradient (a convolution's
/// backward through its pooling view) divides and takes remainders of sums of both, which fold
/// to constants once both are constants in each copy. (The copies of an unrolled loop are
/// summed before they are added to the accumulator: another rounding order, the same on every
/// backend, as the interpreter runs these same actions.)
fn fold_indices(ast: &KernelAst, base: Opts, min_inv: usize) -> Opts {
    if base.unroll.is_some() {
        return base;
    }
    let out: usize = ast.root.shape.iter().product();
    let used: usize = base.upcast.iter().map(|u| u.1).product();
    let upcasts = |o: &Opts| -> Vec<Opts> {
        let mut v = vec![];
        for (axis, &n) in ast.root.shape.iter().enumerate() {
            let free = base.upcast.iter().all(|u| u.0 != axis);
            if free && n > 1 && used * n <= MAX_UPCAST_FOLD && out / (used * n) >= min_inv {
                let mut c = o.clone();
                c.upcast.push((axis, n));
                v.push(c);
            }
        }
        v
    };
    // A whole output axis alone (an elementwise kernel's row), or with a short reduce loop
    // unrolled.
    let mut cands = upcasts(&base);
    if let (Some((_, axes)), Some(_)) = (reduce_of(ast), aligned_reduce(ast)) {
        for &(r, size) in axes.iter().filter(|a| a.1 > 1 && a.1 <= FOLD_UNROLL) {
            let mut c = base.clone();
            c.unroll = Some((r, size));
            cands.extend(upcasts(&c));
            cands.push(c);
        }
    }
    let (divs, ops) = divisions_and_ops(ast, &base);
    let mut best = (divs, base.clone());
    if divs < FOLD_MIN || divs < FOLD_SHARE * ops {
        return best.1;
    }
    for c in cands.into_iter().filter(|c| check(ast, c).is_ok()) {
        let w = divisions_and_ops(ast, &c).0;
        if w < best.0 * FOLD_GAIN {
            best = (w, c);
        }
    }
    best.1
}

/// Estimated cycles per output of a CPU kernel's reduce loops as the C dialect renders them,
/// with vector accumulators of up to `lanes` where `vectorize::packs` finds them. A core
/// issues about two loads and two arithmetic operations (scalar or vector) per cycle but one
/// shuffle, and a gathered operand costs a shuffle per lane; a body takes as long as its
/// busiest kind. A vector load replaces the scalar loads of its lanes (an identical vector load
/// or gather in one loop body is made once), and each cache line the loops read adds
/// `LINE_CYCLES`. An accumulating add counts with its multiply as one operation: it is one
/// fused multiply-add (`Inst::Acc::fused`); a max step counts as one operation, as the scalar
/// one does.
/// Every accumulator is a chain of dependent adds, so a body takes at least an add's latency
/// however little it does. Bodies count by their trip counts.
fn cpu_cycles_per_output(ast: &KernelAst, l: &Lowered, lanes: usize) -> f64 {
    use crate::kernel::{FastMap, FastSet};
    #[derive(Default)]
    struct Body {
        weight: f64,
        loads: f64,
        arith: f64,
        gathers: FastSet<Vec<u32>>,
        vloads: FastSet<(u32, u32, i64, i64)>,
        splats: FastSet<u32>,
        /// Arithmetic already counted: the compiler computes an identical expression once.
        exprs: Vec<VExpr>,
        shuffles: f64,
    }
    /// What `walk` reads of the kernel: the registers loads define, and those each body
    /// defines (a vector load whose index is made outside its body reads the same lanes every
    /// iteration: the compiler hoists it).
    struct Regs {
        loaded: FastSet<u32>,
        varying: FastSet<u32>,
    }
    fn walk(e: &VExpr, b: &mut Body, lanes: usize, regs: &Regs) {
        let loaded = &regs.loaded;
        match e {
            // A loaded scalar is broadcast by the load itself (`vbroadcastss` from memory); a
            // computed one (a product of two loads) by a shuffle, after the scalar operation
            // that computes it (not counted where its lanes are packed).
            VExpr::Splat(r) => {
                if !loaded.contains(r) && b.splats.insert(*r) {
                    b.shuffles += 1.0;
                    b.arith += 1.0;
                }
            }
            VExpr::Load {
                slot,
                dtype,
                base,
                offset,
                stride,
                ..
            } => {
                let varies = regs.varying.contains(base);
                if varies && b.vloads.insert((*slot, *base, *offset, *stride)) {
                    // A strided load is two vector loads and a shuffle of their halves. A
                    // 512-bit load spans two cache lines unless aligned, which nothing
                    // arranges, and costs two (a convolution's gradient vectorized along
                    // its 121 positions, one such load per multiply-add, ran 1.4x slower
                    // than with 256-bit ones shared by eight).
                    let split = if lanes > 8 { 2.0 } else { 1.0 };
                    b.loads += *stride as f64 * split - lanes as f64;
                    b.shuffles += (*stride - 1) as f64;
                    // u8 lanes widen to f32 (the scalar casts it replaces are not counted).
                    if *dtype != DType::F32 {
                        b.arith += 1.0;
                    }
                }
            }
            VExpr::Gather(regs) => {
                if b.gathers.insert(regs.clone()) {
                    b.shuffles += regs.len() as f64;
                }
            }
            // A vector exponential is a polynomial like the scalar ones it replaces.
            VExpr::Unary(UnaryOp::Exp2, _) if !b.exprs.contains(e) => {
                b.exprs.push(e.clone());
                b.arith += EXP2_OPS * (1.0 - lanes as f64)
            }
            VExpr::Binary(..) | VExpr::Unary(..) => {
                if b.exprs.contains(e) {
                    return;
                }
                b.exprs.push(e.clone());
                b.arith += 1.0
            }
            // Not counted, as the scalar comparisons, selects and casts they replace are not:
            // the cost follows the loads and the multiply-adds.
            VExpr::Cmp(..)
            | VExpr::Select(..)
            | VExpr::Mask(_)
            | VExpr::Not(_)
            | VExpr::Const(_)
            | VExpr::SplatMask(_)
            | VExpr::IntCmp(..) => {}
        }
        for c in e.children() {
            walk(c, b, lanes, regs);
        }
    }
    let k = super::linear_kernel_of(ast, l);
    // (A run of four consecutive scalars the lowering loads together, `LoadVec`, is four
    // loads: a broadcast of one is a broadcast load too.)
    let loaded: FastSet<u32> = k
        .insts
        .iter()
        .flat_map(|i| match i {
            Inst::Load { dst, .. } => vec![*dst],
            Inst::LoadVec { dsts, .. } => dsts.to_vec(),
            _ => vec![],
        })
        .collect();
    let mut regs = Regs {
        loaded,
        varying: FastSet::default(),
    };
    let packs = vectorize::packs(&k, lanes);
    let packed: FastSet<usize> = packs.iter().flat_map(|p| p.steps.iter().copied()).collect();
    // The innermost loop body of every instruction inside one.
    let mut bodies: Vec<Body> = vec![];
    let mut body_of: FastMap<usize, usize> = FastMap::default();
    let (mut mult, mut cur, mut stores) = (vec![1.0f64], None, 0.0f64);
    for (i, inst) in k.insts.iter().enumerate() {
        let m = *mult.last().unwrap_or(&1.0);
        match inst {
            Inst::Loop { size, .. } => {
                mult.push(m * *size as f64);
                bodies.push(Body {
                    weight: m * *size as f64,
                    ..Body::default()
                });
                cur = Some(bodies.len() - 1);
            }
            Inst::EndLoop => {
                mult.pop();
                cur = None;
            }
            Inst::Store { .. } => stores += m,
            Inst::StoreVec { .. } => stores += 4.0 * m,
            _ => {}
        }
        let Some(b) = cur else { continue };
        body_of.insert(i, b);
        regs.varying.extend(vectorize::defined(inst));
        match inst {
            Inst::Load { .. } => bodies[b].loads += 1.0,
            Inst::LoadVec { .. } => bodies[b].loads += 4.0,
            Inst::Acc { .. } if !packed.contains(&i) => bodies[b].arith += 1.0,
            Inst::Unary {
                op: UnaryOp::Exp2, ..
            } => bodies[b].arith += EXP2_OPS,
            _ => {}
        }
    }
    for p in &packs {
        if let Some(&b) = body_of.get(&p.at) {
            let body = &mut bodies[b];
            // The accumulating add, counted with a multiply it follows (see above).
            if !matches!(p.expr, VExpr::Binary(BinaryOp::Mul, ..)) {
                body.arith += 1.0;
            }
            walk(&p.expr, body, p.accs.len(), &regs);
        }
    }
    let cycles: f64 = bodies
        .iter()
        .map(|b| {
            let busiest = (b.loads.max(0.0) / 2.0)
                .max(b.arith / 2.0)
                .max(b.shuffles)
                .max(if b.arith > 0.0 { ACC_LATENCY } else { 0.0 });
            b.weight * busiest
        })
        .sum();
    cycles / stores.max(1.0) + LINE_CYCLES * lines_per_output(l)
}

/// Estimated cycles per output a CPU kernel spends after its loops, storing its outputs and
/// computing their epilogue: a store writes one lane, a vector store (the vectorizer's packed
/// run, or a vector accumulator's lanes in order, which GCC writes back whole) `width` at once
/// and computes the epilogue once per vector; a vector accumulator's lanes along another axis
/// of the output are transposed first (`TRANSPOSE_CYCLES`). It breaks the upcast search's ties
/// (`best_upcast`): mirror-image plans whose loops cost the same, with the vector lanes on one
/// output axis or the other. (Added to the loop cost in full, it outweighed differences that
/// model sees too faintly: conv1's row of 13 outputs for 8 channels, 5 of them transposed,
/// lost to 4 channels of 2 batches, which ran 1.75x slower.)
fn cpu_store_cycles_per_output(ast: &KernelAst, l: &Lowered, lanes: usize) -> f64 {
    use crate::kernel::FastMap;
    let k = super::linear_kernel_of(ast, l);
    let packs = vectorize::packs(&k, lanes);
    let mut store_lanes: FastMap<usize, f64> = FastMap::default();
    for p in vectorize::store_packs(&k, lanes) {
        for &i in &p.insts {
            store_lanes.insert(i, p.width as f64);
        }
    }
    let acc_stores = vectorize::acc_lane_stores(&k, &packs);
    // Stores (lanes), those written lane by lane, transposed, and vector stores; the epilogue's
    // scalar operations; each by the trip counts of the loops around it.
    let (mut stores, mut scalar, mut transposed, mut vector) = (0.0f64, 0.0, 0.0, 0.0);
    let (mut epilogue, mut after_loops, mut mult) = (0.0f64, false, vec![1.0f64]);
    for (i, inst) in k.insts.iter().enumerate() {
        let m = *mult.last().unwrap_or(&1.0);
        match inst {
            Inst::Loop { size, .. } => mult.push(m * *size as f64),
            Inst::EndLoop => {
                mult.pop();
                after_loops = true;
            }
            Inst::Store { .. } | Inst::StoreVec { .. } => {
                let n = if matches!(inst, Inst::Store { .. }) {
                    m
                } else {
                    4.0 * m
                };
                stores += n;
                match (store_lanes.get(&i), acc_stores.get(&i)) {
                    (Some(&w), _) => vector += n / w,
                    (None, Some(true)) => vector += n / lanes as f64,
                    (None, Some(false)) => transposed += n,
                    (None, None) => scalar += n,
                }
            }
            Inst::Unary { op, dtype, .. } if after_loops && dtype.is_float() => {
                epilogue += m * if *op == UnaryOp::Exp2 { EXP2_OPS } else { 1.0 }
            }
            Inst::Binary { dtype, .. } | Inst::Where { dtype, .. }
                if after_loops && dtype.is_float() =>
            {
                epilogue += m
            }
            _ => {}
        }
    }
    let epilogue_share = (scalar + transposed + vector) / stores.max(1.0);
    let cycles = scalar + transposed * TRANSPOSE_CYCLES + vector + epilogue / 2.0 * epilogue_share;
    cycles / stores.max(1.0)
}

/// Each of `cands` lowered and costed, in order: on every core where there are several (the
/// search of one large kernel is often the last work of a first step, the other cores idle).
fn lower_all(
    ast: &KernelAst,
    cands: &[Opts],
    cost: &(dyn Fn(&Lowered) -> f64 + Sync),
) -> Vec<(f64, Lowered)> {
    let eval = |o: &Opts| {
        let l = lower(ast, o);
        (cost(&l), l)
    };
    #[cfg(not(target_arch = "wasm32"))]
    {
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
        if threads > 1 && cands.len() >= 4 {
            let slots: Vec<std::sync::Mutex<Option<(f64, Lowered)>>> =
                cands.iter().map(|_| Default::default()).collect();
            crate::context::on_threads(threads, cands.len(), |i| {
                let r = eval(&cands[i]);
                *slots[i].lock().unwrap_or_else(|e| e.into_inner()) = Some(r);
            });
            let done: Option<Vec<_>> = slots
                .into_iter()
                .map(|m| m.into_inner().unwrap_or_else(|e| e.into_inner()))
                .collect();
            if let Some(done) = done {
                return done;
            }
        }
    }
    cands.iter().map(eval).collect()
}

/// Choose upcasts on top of `base` (up to three output axes, at most `max` outputs per
/// invocation, keeping at least `min_inv` invocations of `per_out` each) that cost least per
/// output by `cost` (loads per output, or the CPU's cycle model). Only kernels with a reduce
/// loop benefit; elementwise kernels are lowered as they are. `pair`: one more amount to try
/// (two vectors of a wide target).
#[allow(clippy::too_many_arguments)]
fn best_upcast(
    ast: &KernelAst,
    base: Opts,
    max: usize,
    min_inv: usize,
    per_out: usize,
    cost: &(dyn Fn(&Lowered) -> f64 + Sync),
    ties: Option<&dyn Fn(&Lowered) -> f64>,
    beam: usize,
    pair: Option<usize>,
) -> (Opts, Lowered) {
    let plain = lower(ast, &base);
    let has_loop = plain.graph.ranges.iter().any(|&r| r & LOOP_BITS != 0);
    if !has_loop {
        return (base, plain);
    }
    let out: usize = ast.root.shape.iter().product();
    let options = |chosen: &Opts| -> Vec<Opts> {
        let used: usize = chosen.upcast.iter().map(|u| u.1).product();
        let mut v = vec![];
        for (axis, &size) in ast.root.shape.iter().enumerate() {
            if chosen.upcast.iter().any(|u| u.0 == axis) {
                continue;
            }
            // A whole short axis too (11, 13 in the tutorial's convolutions): a row of
            // outputs that reads a contiguous row of its input, which the C compiler turns into
            // vector loads and arithmetic without reordering any one output's sum.
            let whole = (size > 1 && size <= 16 && !UPCASTS.contains(&size)).then_some(size);
            // And a row of a longer axis (13 of conv1's 26): a vector and a leftover.
            let rows = (9..=16).filter(move |d| size % d == 0 && d < &size && !UPCASTS.contains(d));
            for amount in pair.into_iter().chain(UPCASTS).chain(whole).chain(rows) {
                let total = used * amount;
                if size % amount == 0 && total <= max && out / total * per_out >= min_inv {
                    let mut c = chosen.clone();
                    c.upcast.push((axis, amount));
                    if check(ast, &c).is_ok() {
                        v.push(c);
                    }
                }
            }
        }
        v
    };
    let mut best = (cost(&plain), plain, base.clone());
    // `ties` of the best, once a tie needs it.
    let mut best_tie: Option<f64> = None;
    // Each round extends the `beam` cheapest choices of the last by one more axis; a choice
    // replaces the best only where it is 5% cheaper (fewer upcasts otherwise), or where it
    // costs the same (`TIE`) for as many outputs and `ties` finds it cheaper.
    let mut frontier = vec![base];
    for _round in 0..3 {
        let mut next: Vec<(f64, Opts)> = vec![];
        let mut seen = crate::kernel::FastSet::default();
        let mut cands = vec![];
        for f in &frontier {
            for cand in options(f) {
                let mut key = cand.upcast.clone();
                key.sort();
                if seen.insert(key) {
                    cands.push(cand);
                }
            }
        }
        for (cand, (c, l)) in cands.iter().zip(lower_all(ast, &cands, cost)) {
            next.push((c, cand.clone()));
            if c < best.0 * 0.95 {
                best = (c, l, cand.clone());
                best_tie = None;
                continue;
            }
            let outputs = |o: &Opts| o.upcast.iter().map(|u| u.1).product::<usize>();
            let Some(ties) = ties else { continue };
            if (c - best.0).abs() <= best.0 * TIE && outputs(cand) == outputs(&best.2) {
                let theirs = *best_tie.get_or_insert_with(|| ties(&best.1));
                let mine = ties(&l);
                if mine < theirs {
                    best = (c, l, cand.clone());
                    best_tie = Some(mine);
                }
            }
        }
        if beam == 1 {
            // Greedy: go on from the best only, while it improves.
            if frontier.first() == Some(&best.2) {
                break;
            }
            frontier = vec![best.2.clone()];
            continue;
        }
        next.sort_by(|a, b| a.0.total_cmp(&b.0));
        frontier = next
            .into_iter()
            .take(beam)
            .filter(|c| c.0 <= best.0 * EXTEND_WITHIN)
            .map(|c| c.1)
            .collect();
    }
    (best.2, best.1)
}

//! The shared C-like printer: walks a `LinearKernel` and asks a `Renderer` (one per language:
//! C, WGSL, CUDA) for the spelling of types, constants, ops, loads and stores. Registers are SSA
//! constants, accumulators are mutable, constants are inlined. Renderers need no device, so any
//! target's source can be generated and checked on any machine.

use super::linearize::{Inst, LinearKernel, Reg};
use super::vectorize::{self, Pack, VExpr};
use crate::dtype::DType;
use crate::ops::{BinaryOp, ReduceOp, UnaryOp};
use std::collections::HashMap;
use std::fmt::Write;

/// How one target language spells the pieces of a kernel (a dialect of the shared printer).
pub trait Renderer {
    /// The register type that holds values of `dt` (f16 computes as f32).
    fn ty(&self, dt: DType) -> &'static str;
    /// Everything before the body: helpers, signature, buffer bindings, opening of the
    /// global loop (or the global-id computation on GPUs); defines `gidx`.
    fn prologue(&self, k: &LinearKernel) -> String;
    /// Everything after the body: closes the loops and functions the prologue opened.
    fn epilogue(&self, k: &LinearKernel) -> String;
    /// A literal of `dt` with value `v`.
    fn constant(&self, v: f64, dt: DType) -> String;
    /// `op` applied to the expression `a` of `dt`.
    fn unary(&self, op: UnaryOp, dt: DType, a: &str) -> String;
    /// `op` applied to the expressions `a` and `b` of `dt`.
    fn binary(&self, op: BinaryOp, dt: DType, a: &str, b: &str) -> String;
    /// The expression `a` converted from `from` to `to` with `ops::exec_cast`'s semantics.
    fn cast(&self, from: DType, to: DType, a: &str) -> String;
    /// An expression reading element `idx` of buffer `slot`.
    fn load(&self, slot: u32, dt: DType, idx: &str) -> String;
    /// A statement writing `val` to element `idx` of buffer `slot`.
    fn store(&self, slot: u32, dt: DType, idx: &str, val: &str) -> String;
    /// Wait for the workgroup (C, which runs a workgroup's invocations one after another,
    /// ends the loop over them and starts the next phase's).
    fn barrier(&self, k: &LinearKernel) -> String;
    /// Wait for the workgroup inside a loop, every value computed before still live.
    fn loop_barrier(&self) -> String;
    /// An expression for the sum of `a` over the `size` invocations of this one's subgroup.
    fn subgroup_sum(&self, dt: DType, a: &str, size: u32) -> String;
    /// An expression reading element `idx` of workgroup array `id`.
    fn load_shared(&self, id: u32, _dt: DType, idx: &str) -> String {
        format!("s{id}[{idx}]")
    }
    /// A statement writing `val` to element `idx` of workgroup array `id`.
    fn store_shared(&self, id: u32, _dt: DType, idx: &str, val: &str) -> String {
        format!("s{id}[{idx}] = {val};")
    }
    /// Four consecutive elements from `idx` (a multiple of 4) as one value of the vector type
    /// (its type, the expression), or `None` to load them one by one.
    fn load_vec(&self, _slot: u32, _dt: DType, _idx: &str) -> Option<(String, String)> {
        None
    }
    /// Lane `j` of a vector value.
    fn lane(&self, v: &str, j: usize) -> String {
        format!("{v}[{j}]")
    }
    /// Store four values at `idx` (a multiple of 4) at once, or `None` for four stores.
    fn store_vec(&self, _slot: u32, _dt: DType, _idx: &str, _vals: &[String; 4]) -> Option<String> {
        None
    }
    /// A statement run only where `cond` holds.
    fn gated(&self, cond: &str, stmt: &str) -> String {
        format!("if ({cond}) {{ {stmt} }}")
    }
    /// `c ? a : b`.
    fn select(&self, c: &str, a: &str, b: &str) -> String {
        format!("({c} ? {a} : {b})")
    }
    /// A statement declaring the constant `name` of type `ty`.
    fn let_(&self, ty: &str, name: &str, expr: &str) -> String {
        format!("const {ty} {name} = {expr};")
    }
    /// A statement declaring the mutable variable `name` of type `ty` (accumulators).
    fn var(&self, ty: &str, name: &str, expr: &str) -> String {
        format!("{ty} {name} = {expr};")
    }
    /// The opening of a loop of `name` over `0..size`.
    fn loop_open(&self, name: &str, size: u32) -> String {
        format!("for (int {name} = 0; {name} < {size}; {name}++) {{")
    }
    /// The larger of `a` and `b`, with `BinaryOp::Max`'s semantics.
    fn max(&self, dt: DType, a: &str, b: &str) -> String {
        self.binary(BinaryOp::Max, dt, a, b)
    }
    /// Lanes of the f32 vector type accumulators can be kept in (`vectorize.rs`); 1: none.
    fn vector_width(&self) -> usize {
        1
    }
    /// The f32 vector type of `width` lanes (`vector_width` or half of it).
    fn vec_ty(&self, width: usize) -> String {
        format!("float{width}")
    }
    /// `width` consecutive elements of buffer `slot` from `idx` (any alignment) as f32 lanes:
    /// f32 elements, or u8 ones converted (`dt`; a dialect with vector types renders both).
    /// With `stride` 2, the even elements of `2 * width` from `idx` (the last one read is one
    /// past the last lane's).
    fn vec_load(&self, slot: u32, _dt: DType, idx: &str, width: usize, _stride: i64) -> String {
        format!("{}(b{slot} + {idx})", self.vec_ty(width))
    }
    /// Vector load `load` where bool `gate` holds, else 0 in every lane; the load must not run
    /// where it does not (its elements may lie outside the buffer).
    fn vec_gated(&self, gate: &str, load: &str, width: usize) -> String {
        let zero = self.vec_gather(&[], width);
        format!("({gate} ? {load} : {zero})")
    }
    /// The lane-wise max of two f32 vectors, each lane as `binary(Max)` computes one (NaN
    /// included).
    fn vec_max(&self, a: &str, b: &str, _width: usize) -> String {
        format!("max({a}, {b})")
    }
    /// Per lane, `a` where mask `m` (a comparison of vectors) holds, else `b`.
    fn vec_select(&self, m: &str, a: &str, b: &str, _width: usize) -> String {
        format!("select({b}, {a}, {m})")
    }
    /// A statement binding `name` to vector (or mask) expression `expr`.
    fn vec_let(&self, name: &str, expr: &str) -> String {
        format!("let {name} = {expr};")
    }
    /// A mask comparing i32 lanes `a` with `b` (one scalar each per lane).
    fn vec_int_cmp(&self, op: BinaryOp, a: &[String], b: &[String], width: usize) -> String {
        let v = |l: &[String]| format!("vec{width}<i32>({})", l.join(", "));
        self.binary(op, DType::I32, &v(a), &v(b))
    }
    /// A mask whose every lane is bool `m`.
    fn vec_splat_mask(&self, m: &str, width: usize) -> String {
        format!("vec{width}<bool>({m})")
    }
    /// The negation of mask `m`.
    fn vec_not(&self, m: &str, _width: usize) -> String {
        format!("!({m})")
    }
    /// Mask `m` as f32 lanes, 1 or 0.
    fn vec_mask(&self, m: &str, width: usize) -> String {
        format!("{}({m})", self.vec_ty(width))
    }
    /// A statement that keeps vector `name` in a register (an empty asm that claims to change
    /// it), where a compiler would otherwise reload it from memory at every use.
    fn vec_pin(&self, _name: &str) -> Option<String> {
        None
    }
    /// A vector of `width` lanes, these first and zeros after them.
    fn vec_gather(&self, lanes: &[String], width: usize) -> String {
        let zero = self.constant(0.0, DType::F32);
        let mut l = lanes.to_vec();
        l.resize(width, zero);
        format!("{}({})", self.vec_ty(width), l.join(", "))
    }
    /// Store f32 vector `val` of `width` lanes into buffer `slot` from `idx` (any alignment);
    /// `None` where the dialect has no vector stores (store packs are then not formed).
    fn vec_store(&self, _slot: u32, _idx: &str, _val: &str, _width: usize) -> Option<String> {
        None
    }
    /// A unary op (`Neg`, `Exp2`) lane by lane on a vector of `width` f32 lanes, each lane as
    /// `unary` computes it.
    fn vec_unary(&self, op: UnaryOp, a: &str, _width: usize) -> String {
        self.unary(op, DType::F32, a)
    }
    /// `a * b + c` rounded once (a fused multiply-add), for f32 operands.
    fn fma(&self, a: &str, b: &str, c: &str) -> String {
        format!("fma({a}, {b}, {c})")
    }
    /// `a * b + c` lane by lane, each lane rounded once, for vectors of `width` f32 lanes.
    fn vec_fma(&self, a: &str, b: &str, c: &str, _width: usize) -> String {
        self.fma(a, b, c)
    }
    /// One step of a reduce loop, `acc = acc (op) val` (WGSL overrides it: u8 sums wrap, bool
    /// sums are `||`).
    fn acc(&self, op: ReduceOp, dt: DType, acc: &str, val: &str) -> String {
        match op {
            ReduceOp::Sum => format!("{acc} = {acc} + {val};"),
            ReduceOp::Max => format!("{acc} = {};", self.max(dt, acc, val)),
            ReduceOp::Prod => format!("{acc} = {acc} * {val};"),
        }
    }
}

/// The index of lane `j` of a vector access at `idx`.
fn lane_index(idx: &str, j: usize) -> String {
    match (idx.parse::<i64>(), j) {
        (Ok(v), _) => (v + j as i64).to_string(),
        (_, 0) => idx.to_string(),
        _ => format!("({idx} + {j})"),
    }
}

fn name(names: &HashMap<Reg, String>, r: Reg) -> String {
    names.get(&r).cloned().unwrap_or_else(|| format!("v{r}"))
}

/// A vector load as the packs of a loop body share it: (slot, dtype, base, offset, width,
/// stride, gate).
type VLoadKey = (u32, DType, Reg, i64, usize, i64, Option<Reg>);

/// Every vector load of `e`, outermost first.
fn vloads(e: &VExpr, w: usize, out: &mut Vec<VLoadKey>) {
    if let VExpr::Load {
        slot,
        dtype,
        base,
        offset,
        stride,
        gate,
    } = *e
    {
        out.push((slot, dtype, base, offset, w, stride, gate));
    }
    for c in e.children() {
        vloads(c, w, out);
    }
}

/// A vector load, spelled.
fn vec_load(key: VLoadKey, names: &HashMap<Reg, String>, d: &dyn Renderer) -> String {
    let (slot, dtype, base, offset, w, stride, gate) = key;
    let load = d.vec_load(
        slot,
        dtype,
        &lane_index(&name(names, base), offset as usize),
        w,
        stride,
    );
    match gate {
        Some(g) => d.vec_gated(&name(names, g), &load, w),
        None => load,
    }
}

/// Spells vector expressions of `w` lanes, each operation once: an operation is bound to a
/// named vector (`Renderer::vec_let`) the first time it is spelled, and later uses of the same
/// operation read the name (a packed expression shares what the scalar code shared; spelled
/// as a tree, a GELU's backward grows exponentially). Loads named in `shared` read the name.
struct VecWriter<'a> {
    w: usize,
    names: &'a HashMap<Reg, String>,
    shared: &'a HashMap<VLoadKey, (String, usize)>,
    d: &'a dyn Renderer,
    /// The bindings made, in order, to be written before the statement that uses them.
    lets: Vec<String>,
    bound: HashMap<String, String>,
    /// The kernel's count of names made (names stay unique across statements).
    next: &'a mut usize,
}

impl<'a> VecWriter<'a> {
    fn new(
        w: usize,
        names: &'a HashMap<Reg, String>,
        shared: &'a HashMap<VLoadKey, (String, usize)>,
        d: &'a dyn Renderer,
        next: &'a mut usize,
    ) -> Self {
        VecWriter {
            w,
            names,
            shared,
            d,
            lets: vec![],
            bound: HashMap::new(),
            next,
        }
    }

    /// `e` spelled: a scalar leaf as a scalar (operators broadcast it), anything else as a
    /// vector.
    fn expr(&mut self, e: &VExpr) -> String {
        let (w, d) = (self.w, self.d);
        let s = match e {
            VExpr::Splat(r) => return name(self.names, *r),
            VExpr::Const(v) => return d.constant(*v, DType::F32),
            VExpr::Load {
                slot,
                dtype,
                base,
                offset,
                stride,
                gate,
            } => {
                let key = (*slot, *dtype, *base, *offset, w, *stride, *gate);
                return match self.shared.get(&key) {
                    Some((n, _)) => n.clone(),
                    None => vec_load(key, self.names, d),
                };
            }
            VExpr::Gather(lanes) => {
                let l: Vec<String> = lanes.iter().map(|&r| name(self.names, r)).collect();
                return d.vec_gather(&l, w);
            }
            VExpr::SplatMask(r) => return d.vec_splat_mask(&name(self.names, *r), w),
            VExpr::IntCmp(op, a, b) => {
                let ints =
                    |l: &[Reg]| -> Vec<String> { l.iter().map(|&r| name(self.names, r)).collect() };
                d.vec_int_cmp(*op, &ints(a), &ints(b), w)
            }
            VExpr::Binary(BinaryOp::Max, a, b) => {
                let (a, b) = (self.operand(a), self.operand(b));
                d.vec_max(&a, &b, w)
            }
            VExpr::Binary(op, a, b) => {
                let (a, b) = (self.expr(a), self.expr(b));
                d.binary(*op, DType::F32, &a, &b)
            }
            VExpr::Unary(op, a) => {
                let a = self.operand(a);
                d.vec_unary(*op, &a, w)
            }
            VExpr::Cmp(op, a, b) => {
                let (a, b) = (self.operand(a), self.operand(b));
                d.binary(*op, DType::F32, &a, &b)
            }
            VExpr::Select(m, a, b) => {
                let (m, a, b) = (self.expr(m), self.operand(a), self.operand(b));
                d.vec_select(&m, &a, &b, w)
            }
            VExpr::Mask(m) => {
                let m = self.expr(m);
                d.vec_mask(&m, w)
            }
            VExpr::Not(m) => {
                let m = self.expr(m);
                d.vec_not(&m, w)
            }
        };
        if let Some(n) = self.bound.get(&s) {
            return n.clone();
        }
        let n = format!("t{}", *self.next);
        *self.next += 1;
        self.lets.push(d.vec_let(&n, &s));
        self.bound.insert(s, n.clone());
        n
    }

    /// `e` spelled as the operand of a function of vectors: a scalar is broadcast.
    fn operand(&mut self, e: &VExpr) -> String {
        match e {
            VExpr::Splat(r) => self
                .d
                .vec_gather(&vec![name(self.names, *r); self.w], self.w),
            VExpr::Const(v) => {
                let c = self.d.constant(*v, DType::F32);
                self.d.vec_gather(&vec![c; self.w], self.w)
            }
            e => self.expr(e),
        }
    }
}

/// Print `k` as source text in dialect `d`.
pub fn render(k: &LinearKernel, d: &dyn Renderer) -> String {
    let mut out = d.prologue(k);
    let mut names: HashMap<Reg, String> = HashMap::new();
    let mut depth = 2usize;
    // Accumulators kept in vectors: each pack's vector is declared with its lane 0, stepped in
    // place of its last scalar step (the other steps are dropped), and written back into the
    // scalar accumulators after its loop nest.
    let packs = vectorize::packs(k, d.vector_width());
    let vname = |p: &Pack| format!("vacc{}", p.accs[0]);
    let dropped: std::collections::HashSet<usize> =
        packs.iter().flat_map(|p| p.steps.iter().copied()).collect();
    // Runs of stores whose values are one vector: one vector store in place of the last, the
    // others dropped.
    let store_packs = if d.vec_store(0, "0", "v", 2).is_some() {
        vectorize::store_packs(k, d.vector_width())
    } else {
        vec![]
    };
    let stores_dropped: std::collections::HashSet<usize> = store_packs
        .iter()
        .flat_map(|p| p.insts.iter().copied())
        .collect();
    // A vector load that several packs read is made once, into a named vector the dialect may
    // pin to a register (GCC otherwise folds it into every multiply as a memory operand, and
    // the loads, not the arithmetic, bound a convolution's loop). Names live in their loop body.
    let loads: Vec<Vec<VLoadKey>> = packs
        .iter()
        .map(|p| {
            let mut ks = vec![];
            vloads(&p.expr, p.width, &mut ks);
            ks
        })
        .collect();
    let mut uses: HashMap<VLoadKey, usize> = HashMap::new();
    for &k in loads.iter().flatten() {
        *uses.entry(k).or_default() += 1;
    }
    let mut shared: HashMap<VLoadKey, (String, usize)> = HashMap::new();
    let mut named = 0usize;
    let mut lets_made = 0usize;
    // Readers of each register in the emitted code: every instruction's reads, less those of
    // the steps and stores vectors replace, plus the scalars the vector expressions name. A
    // product only a fused step reads (rendered as one `fma` of its operands) is read by
    // nothing. What nothing reads is not emitted (WGSL compilers keep a dead `let`, and the C
    // compiler's time grows with the scalar code a vector replaced).
    let skipped: crate::kernel::FastSet<usize> = dropped.union(&stores_dropped).copied().collect();
    let mut readers = vectorize::readers(k, &skipped);
    for (i, inst) in k.insts.iter().enumerate() {
        if let Inst::Acc {
            val,
            fused: Some(_),
            ..
        } = inst
        {
            if !skipped.contains(&i) {
                *readers.entry(*val).or_default() -= 1;
            }
        }
    }
    let exprs = packs.iter().map(|p| &p.expr);
    for e in exprs.chain(store_packs.iter().map(|p| &p.expr)) {
        for r in e.regs() {
            *readers.entry(r).or_default() += 1;
        }
    }
    for sp in &store_packs {
        *readers.entry(sp.base).or_default() += 1;
    }
    let dead = vectorize::unread(k, &mut readers);
    for (i, inst) in k.insts.iter().enumerate() {
        let pad = "  ".repeat(depth);
        if dead.contains(&i) {
            continue;
        }
        if let Some(pi) = packs.iter().position(|p| p.at == i) {
            let p = &packs[pi];
            for &key in &loads[pi] {
                if uses[&key] < 2 || shared.contains_key(&key) {
                    continue;
                }
                let n = format!("vl{named}");
                named += 1;
                let e = vec_load(key, &names, d);
                let _ = writeln!(out, "{pad}{}", d.var(&d.vec_ty(key.4), &n, &e));
                if let Some(pin) = d.vec_pin(&n) {
                    let _ = writeln!(out, "{pad}{pin}");
                }
                shared.insert(key, (n, depth));
            }
            let v = vname(p);
            let mut vw = VecWriter::new(p.width, &names, &shared, d, &mut lets_made);
            let step = match (&p.expr, p.op) {
                (VExpr::Binary(BinaryOp::Mul, x, y), _) if p.fused => {
                    let (x, y) = (vw.operand(x), vw.operand(y));
                    d.vec_fma(&x, &y, &v, p.width)
                }
                (e, ReduceOp::Max) => d.vec_max(&v, &vw.operand(e), p.width),
                (e, ReduceOp::Sum) => format!("{v} + {}", vw.operand(e)),
                (e, ReduceOp::Prod) => format!("{v} * {}", vw.operand(e)),
            };
            for l in &vw.lets {
                let _ = writeln!(out, "{pad}{l}");
            }
            let _ = writeln!(out, "{pad}{v} = {step};");
            continue;
        }
        if let Some(sp) = store_packs.iter().find(|p| p.at == i) {
            let idx = lane_index(&name(&names, sp.base), sp.offset as usize);
            let mut vw = VecWriter::new(sp.width, &names, &shared, d, &mut lets_made);
            let val = vw.operand(&sp.expr);
            if let Some(st) = d.vec_store(sp.slot, &idx, &val, sp.width) {
                for l in &vw.lets {
                    let _ = writeln!(out, "{pad}{l}");
                }
                let _ = writeln!(out, "{pad}{st}");
            }
            continue;
        }
        if dropped.contains(&i) || stores_dropped.contains(&i) {
            continue;
        }
        let line = match inst {
            Inst::Const { dst, bits, dtype } => {
                names.insert(*dst, d.constant(f64::from_bits(*bits), *dtype));
                continue;
            }
            Inst::Gidx { dst } => {
                names.insert(*dst, "gidx".into());
                continue;
            }
            Inst::Lidx { dst } => {
                names.insert(*dst, "lidx".into());
                continue;
            }
            Inst::Wgid { dst } => {
                names.insert(*dst, "wgid".into());
                continue;
            }
            Inst::LoadShared {
                dst,
                id,
                dtype,
                idx,
            } => d.let_(
                d.ty(*dtype),
                &format!("v{dst}"),
                &d.load_shared(*id, *dtype, &name(&names, *idx)),
            ),
            Inst::SubgroupSum {
                dst,
                dtype,
                size,
                a,
            } => d.let_(
                d.ty(*dtype),
                &format!("v{dst}"),
                &d.subgroup_sum(*dtype, &name(&names, *a), *size),
            ),
            Inst::StoreShared {
                id,
                dtype,
                idx,
                val,
            } => d.store_shared(*id, *dtype, &name(&names, *idx), &name(&names, *val)),
            // A barrier inside a loop (a staged reduce's) is a statement of the loop's body.
            Inst::Barrier if depth > 2 => d.loop_barrier(),
            Inst::Barrier => d.barrier(k),
            Inst::LoadVec {
                dsts,
                slot,
                dtype,
                idx,
            } => {
                let i = name(&names, *idx);
                let lines: Vec<String> = match d.load_vec(*slot, *dtype, &i) {
                    Some((ty, e)) => {
                        let v = format!("v{}_4", dsts[0]);
                        let mut l = vec![d.let_(&ty, &v, &e)];
                        for (j, dst) in dsts.iter().enumerate() {
                            l.push(d.let_(d.ty(*dtype), &format!("v{dst}"), &d.lane(&v, j)));
                        }
                        l
                    }
                    None => dsts
                        .iter()
                        .enumerate()
                        .map(|(j, dst)| {
                            let at = lane_index(&i, j);
                            d.let_(
                                d.ty(*dtype),
                                &format!("v{dst}"),
                                &d.load(*slot, *dtype, &at),
                            )
                        })
                        .collect(),
                };
                lines.join(&format!("\n{pad}"))
            }
            Inst::StoreVec {
                slot,
                dtype,
                idx,
                vals,
            } => {
                let i = name(&names, *idx);
                let vs = vals.map(|v| name(&names, v));
                match d.store_vec(*slot, *dtype, &i, &vs) {
                    Some(s) => s,
                    None => (0..4)
                        .map(|j| d.store(*slot, *dtype, &lane_index(&i, j), &vs[j]))
                        .collect::<Vec<_>>()
                        .join(&format!("\n{pad}")),
                }
            }
            Inst::Unary { dst, op, dtype, a } => d.let_(
                d.ty(*dtype),
                &format!("v{dst}"),
                &d.unary(*op, *dtype, &name(&names, *a)),
            ),
            Inst::Binary {
                dst,
                op,
                dtype,
                a,
                b,
            } => {
                let out_dt = if op.is_cmp() { DType::Bool } else { *dtype };
                let e = d.binary(*op, *dtype, &name(&names, *a), &name(&names, *b));
                d.let_(d.ty(out_dt), &format!("v{dst}"), &e)
            }
            Inst::Where {
                dst,
                dtype,
                c,
                a,
                b,
            } => {
                let e = d.select(&name(&names, *c), &name(&names, *a), &name(&names, *b));
                d.let_(d.ty(*dtype), &format!("v{dst}"), &e)
            }
            Inst::Cast { dst, from, to, a } => d.let_(
                d.ty(*to),
                &format!("v{dst}"),
                &d.cast(*from, *to, &name(&names, *a)),
            ),
            Inst::Load {
                dst,
                slot,
                dtype,
                idx,
                gate,
            } => {
                let e = match gate {
                    None => d.load(*slot, *dtype, &name(&names, *idx)),
                    Some(g) => {
                        let gi = d.select(&name(&names, *g), &name(&names, *idx), "0");
                        let ld = d.load(*slot, *dtype, &gi);
                        d.select(&name(&names, *g), &ld, &d.constant(0.0, *dtype))
                    }
                };
                d.let_(d.ty(*dtype), &format!("v{dst}"), &e)
            }
            Inst::DefAcc { dst, op, dtype } => {
                names.insert(*dst, format!("acc{dst}"));
                let mut s = d.var(
                    d.ty(*dtype),
                    &format!("acc{dst}"),
                    &d.constant(op.identity(*dtype), *dtype),
                );
                if let Some(p) = packs.iter().find(|p| p.accs[0] == *dst) {
                    let ident = d.constant(op.identity(*dtype), *dtype);
                    let init = d.vec_gather(&vec![ident; p.width], p.width);
                    let ty = d.vec_ty(p.width);
                    let _ = write!(s, "\n{pad}{}", d.var(&ty, &vname(p), &init));
                }
                s
            }
            Inst::Loop { dst, size } => {
                names.insert(*dst, format!("r{dst}"));
                let l = d.loop_open(&format!("r{dst}"), *size);
                depth += 1;
                l
            }
            Inst::EndLoop => {
                depth -= 1;
                shared.retain(|_, (_, at)| *at <= depth);
                let pad = "  ".repeat(depth);
                let _ = writeln!(out, "{pad}}}");
                for p in packs.iter().filter(|p| p.end == i) {
                    for (j, a) in p.accs.iter().enumerate() {
                        let _ = writeln!(out, "{pad}acc{a} = {};", d.lane(&vname(p), j));
                    }
                }
                continue;
            }
            Inst::Acc {
                acc,
                fused: Some((x, y)),
                ..
            } => {
                let a = format!("acc{acc}");
                format!("{a} = {};", d.fma(&name(&names, *x), &name(&names, *y), &a))
            }
            Inst::Acc {
                acc,
                op,
                dtype,
                val,
                fused: None,
            } => d.acc(*op, *dtype, &format!("acc{acc}"), &name(&names, *val)),
            Inst::Store {
                slot,
                dtype,
                idx,
                val,
                gate,
            } => {
                let st = d.store(*slot, *dtype, &name(&names, *idx), &name(&names, *val));
                match gate {
                    Some(g) => d.gated(&name(&names, *g), &st),
                    None => st,
                }
            }
        };
        let _ = writeln!(out, "{pad}{line}");
    }
    out.push_str(&d.epilogue(k));
    out
}

/// A float-to-integer cast in the C-family dialects (C, CUDA), where out-of-range conversions
/// are undefined: truncate toward zero, saturating at the range of `to`, NaN giving 0 (the
/// interpreter's `exec_cast`). `a` is a register name (read several times); `ty` is `to`'s
/// C type. `None` when `to` is not an integer type.
pub fn c_float_to_int(to: DType, ty: &str, a: &str) -> Option<String> {
    Some(match to {
        DType::I32 => format!(
            "({a} == {a} ? ({a} >= 2147483648.0 ? 2147483647 : {a} <= -2147483648.0 ? (-2147483647 - 1) : ({ty}){a}) : 0)"
        ),
        DType::U32 => format!("({a} > -1.0 ? ({a} >= 4294967296.0 ? 4294967295u : ({ty}){a}) : 0u)"),
        DType::U8 => format!("({a} > -1.0 ? ({a} >= 255.0 ? 255 : ({ty}){a}) : 0)"),
        _ => return None,
    })
}

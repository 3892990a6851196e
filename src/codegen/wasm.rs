//! The WebAssembly dialect: a linear kernel as the bytes of a WebAssembly module (built with
//! `wasm-encoder`, no text assembler), for the `WASM` backend. The module imports the memory
//! the tensors live in (`env.memory`: the engine's own linear memory in a browser or Node.js,
//! the runtime's memory natively) and three functions WebAssembly lacks (`env.log2`, `env.sin`,
//! `env.fmod`: the host's f64 functions, rounded to f32 on return, as the interpreter rounds
//! them), and exports `kernel(buf0, .., bufN, gstart, gend)`: the body for `gidx` in
//! `[gstart, gend)`, each buffer a byte address in that memory. Registers are locals; the
//! module carries its own `exp2` (the C dialect's polynomial, so both compute the same values)
//! and the f16/bf16 conversions. A scalar reduce step the IR fuses (`Inst::Acc::fused`) is a
//! multiply then an add here, each rounded: WebAssembly has no scalar fused multiply-add, and
//! emulating one exactly (the f64 sum of the exact product, rounded to odd) put ten dependent
//! operations on every accumulator's chain: the tutorial's step ran 7x slower in V8 (Node.js
//! 20, 2026-12-04). Runs of four accumulators that the C dialect would keep in a vector
//! (`vectorize::packs`) step as one f32x4 (SIMD128), lane by lane the scalar operations, and
//! the scalar code they replace is not emitted; where the engine has relaxed SIMD
//! (`Features::relaxed_simd`) a fused vector step is one `f32x4.relaxed_madd`, which engines
//! compile to the CPU's fused multiply-add where it has one (x86-64 with FMA3, ARM64): the C
//! dialect's bits there, and one instruction instead of two on the accumulator's chain.
//! Workgroups are not rendered: the backend's target never asks for them (`Target::max_local`
//! 1).

use super::linearize::{Inst, LinearKernel, Reg};
use super::vectorize::{self, Pack, StorePack, VExpr};
use crate::dtype::DType;
use crate::error::{bail, Result};
use crate::kernel::FastSet;
use crate::ops::{BinaryOp, UnaryOp};
use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use wasm_encoder::{
    BlockType, CodeSection, EntityType, ExportKind, ExportSection, Function, FunctionSection,
    ImportSection, InstructionSink, MemArg, MemoryType, Module, TypeSection, ValType,
};

/// The name the kernel's function is exported under.
pub const EXPORT: &str = "kernel";

// Function indices: the imports first, then the module's own helpers, then the kernel.
const LOG2: u32 = 0;
const SIN: u32 = 1;
const FMOD: u32 = 2;
const EXP2: u32 = 3;
const H2F: u32 = 4;
const F2H: u32 = 5;
const F2B: u32 = 6;
const KERNEL: u32 = 7;

/// The WebAssembly value type registers of `dt` live in (f16 and bf16 compute as f32).
fn val_ty(dt: DType) -> ValType {
    if dt.is_float() {
        ValType::F32
    } else {
        ValType::I32
    }
}

fn mem(offset: u64, align: u32) -> MemArg {
    MemArg {
        offset,
        align,
        memory_index: 0,
    }
}

/// What the engine that runs the modules supports beyond WebAssembly 2.0's SIMD128.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Features {
    /// The relaxed-SIMD proposal (in V8 by default since Chrome 114, so Node.js 22 and later
    /// but not Node.js 20; in wasmi): fused vector steps become `f32x4.relaxed_madd`.
    pub relaxed_simd: bool,
    /// The memory the module imports is shared (`shared`, with the 4 GiB maximum): the
    /// tensors' memory when kernels run on several threads.
    pub shared_memory: bool,
}

/// A module that validates only where the engine has relaxed SIMD (one function computing an
/// `f32x4.relaxed_madd`): engines are probed with it (`WebAssembly.validate`).
pub fn relaxed_simd_probe() -> Vec<u8> {
    let mut types = TypeSection::new();
    types.ty().function([ValType::V128; 3], [ValType::V128]);
    let mut funcs = FunctionSection::new();
    funcs.function(0);
    let mut f = Function::new([]);
    f.instructions()
        .local_get(0)
        .local_get(1)
        .local_get(2)
        .f32x4_relaxed_madd()
        .end();
    let mut code = CodeSection::new();
    code.function(&f);
    let mut m = Module::new();
    m.section(&types).section(&funcs).section(&code);
    m.finish()
}

/// Render `k` as a WebAssembly module for an engine with `features`; errors for what the
/// dialect does not run (workgroups).
pub fn module(k: &LinearKernel, features: Features) -> Result<Vec<u8>> {
    if k.local_size > 1 || !k.shared.is_empty() {
        bail!(
            Backend,
            "wasm: kernel {} uses workgroups ({} invocations, {} workgroup arrays), which the \
             WebAssembly dialect does not run",
            k.name,
            k.local_size,
            k.shared.len()
        );
    }
    let mut types = TypeSection::new();
    let f = ValType::F32;
    let i = ValType::I32;
    types.ty().function([f], [f]); // 0: log2, sin, exp2
    types.ty().function([f, f], [f]); // 1: fmod
    types.ty().function([i], [f]); // 2: h2f
    types.ty().function([f], [i]); // 3: f2h, f2b
    let params: Vec<ValType> = vec![i; k.bufs.len() + 2];
    types.ty().function(params, []); // 4: the kernel

    let mut imports = ImportSection::new();
    // A shared memory must declare its maximum (and the one given must be at most this).
    let memory = MemoryType {
        minimum: 0,
        maximum: features.shared_memory.then_some(65536),
        memory64: false,
        shared: features.shared_memory,
        page_size_log2: None,
    };
    imports.import("env", "memory", EntityType::Memory(memory));
    imports.import("env", "log2", EntityType::Function(0));
    imports.import("env", "sin", EntityType::Function(0));
    imports.import("env", "fmod", EntityType::Function(1));

    let mut funcs = FunctionSection::new();
    for ty in [0, 2, 3, 3, 4] {
        funcs.function(ty);
    }
    let mut exports = ExportSection::new();
    exports.export(EXPORT, ExportKind::Func, KERNEL);

    let mut code = CodeSection::new();
    code.function(&exp2_fn());
    code.function(&h2f_fn());
    code.function(&f2h_fn());
    code.function(&f2b_fn());
    code.function(&Emitter::new(k, features).kernel()?);

    let mut m = Module::new();
    m.section(&types)
        .section(&imports)
        .section(&funcs)
        .section(&exports)
        .section(&code);
    Ok(m.finish())
}

/// Emits the kernel's function: locals `0..nbufs` are the buffers' addresses, then `gstart`,
/// `gend`, the global index, then one local per register.
struct Emitter<'a> {
    k: &'a LinearKernel,
    /// Each register's dtype (from the instruction that defines it).
    dtypes: Vec<DType>,
    /// Registers holding constants, with their values (for divisions by a known divisor).
    consts: HashMap<Reg, f64>,
    /// Runs of four accumulators stepped as one f32x4 (`vectorize::packs`).
    packs: Vec<Pack>,
    /// Runs of four f32 stores to consecutive elements, stored as one f32x4
    /// (`vectorize::store_packs`: an elementwise kernel's row of outputs).
    store_packs: Vec<StorePack>,
    /// Instructions not emitted: the scalar steps and stores packs replace, and values nothing
    /// reads.
    skip: FastSet<usize>,
    /// The next free v128 scratch local (each vector exp2 or max takes fresh ones).
    scratch: Cell<u32>,
    /// The local holding each vector subexpression already computed (by its spelling), since
    /// the last point where memory or a value read may have changed (a loop's start or end, a
    /// store, a scalar accumulator's step). An epilogue's expression tree repeats its shared
    /// values (a GELU's backward reads its input a dozen times), which emitted as a tree ran
    /// 10x slower; a matmul's block of packs reads each operand vector for several packs (a
    /// 4x4 block: four loads and four splats for 16 steps, not 16 of each).
    memo: RefCell<HashMap<String, u32>>,
    /// What the engine supports (a fused vector step's instruction).
    features: Features,
}

impl<'a> Emitter<'a> {
    fn new(k: &'a LinearKernel, features: Features) -> Self {
        let mut dtypes = vec![DType::I32; k.nregs];
        let mut consts = HashMap::new();
        let mut set = |r: Reg, dt: DType| {
            if let Some(d) = dtypes.get_mut(r as usize) {
                *d = dt;
            }
        };
        for inst in &k.insts {
            match *inst {
                Inst::Const { dst, bits, dtype } => {
                    set(dst, dtype);
                    consts.insert(dst, f64::from_bits(bits));
                }
                Inst::Gidx { dst } | Inst::Lidx { dst } | Inst::Wgid { dst } => {
                    set(dst, DType::I32)
                }
                Inst::Loop { dst, .. } => set(dst, DType::I32),
                Inst::Unary { dst, dtype, .. } | Inst::Where { dst, dtype, .. } => set(dst, dtype),
                Inst::Binary { dst, op, dtype, .. } => {
                    set(dst, if op.is_cmp() { DType::Bool } else { dtype })
                }
                Inst::Cast { dst, to, .. } => set(dst, to),
                Inst::Load { dst, dtype, .. } | Inst::LoadShared { dst, dtype, .. } => {
                    set(dst, dtype)
                }
                Inst::DefAcc { dst, dtype, .. } => set(dst, dtype),
                Inst::LoadVec { dsts, dtype, .. } => dsts.iter().for_each(|&d| set(d, dtype)),
                _ => {}
            }
        }
        // Packs of exactly four lanes whose every node WebAssembly's SIMD has (spare lanes
        // would read past a buffer's end).
        let packs: Vec<Pack> = vectorize::packs(k, 4)
            .into_iter()
            .filter(|p| p.width == 4 && p.accs.len() == 4)
            .collect();
        let store_packs: Vec<StorePack> = vectorize::store_packs(k, 4)
            .into_iter()
            .filter(|p| p.width == 4)
            .collect();
        let mut skip: FastSet<usize> = packs.iter().flat_map(|p| p.steps.clone()).collect();
        skip.extend(store_packs.iter().flat_map(|p| p.insts.iter().copied()));
        // What nothing reads is not emitted: a load stays in the code V8 compiles (it may
        // trap), so the scalar loads a vector load replaced would still run.
        let mut readers = vectorize::readers(k, &skip);
        let exprs = packs.iter().map(|p| &p.expr);
        for e in exprs.chain(store_packs.iter().map(|p| &p.expr)) {
            for r in e.regs() {
                *readers.entry(r).or_default() += 1;
            }
        }
        for p in &store_packs {
            *readers.entry(p.base).or_default() += 1;
        }
        skip.extend(vectorize::unread(k, &mut readers));
        Emitter {
            k,
            dtypes,
            consts,
            packs,
            store_packs,
            skip,
            scratch: Cell::new(0),
            memo: RefCell::new(HashMap::new()),
            features,
        }
    }

    /// The v128 local of pack `i`.
    fn vacc(&self, i: usize) -> u32 {
        self.reg(self.k.nregs as Reg) + i as u32
    }

    /// A fresh v128 scratch local.
    fn fresh(&self) -> u32 {
        let n = self.scratch.get();
        self.scratch.set(n + 1);
        self.reg(self.k.nregs as Reg) + (self.packs.len() as u32) + n
    }

    /// v128 scratch locals the packs need: seven per vector exp2, two per max.
    fn scratch_needed(&self) -> u32 {
        fn count(e: &VExpr) -> u32 {
            let own = match e {
                VExpr::Unary(UnaryOp::Exp2, _) => 7,
                VExpr::Binary(BinaryOp::Max, ..) => 2,
                _ => 0,
            };
            own + e.children().into_iter().map(count).sum::<u32>()
        }
        // Each distinct subexpression may also take a local (`memo`).
        fn distinct(e: &VExpr, seen: &mut std::collections::HashSet<String>) {
            if !matches!(e, VExpr::Const(_)) {
                seen.insert(format!("{e:?}"));
            }
            for c in e.children() {
                distinct(c, seen);
            }
        }
        let locals = |e: &VExpr| {
            let mut seen = std::collections::HashSet::new();
            distinct(e, &mut seen);
            count(e) + seen.len() as u32
        };
        let packs: u32 = self.packs.iter().map(|p| locals(&p.expr) + 2).sum();
        packs
            + self
                .store_packs
                .iter()
                .map(|p| locals(&p.expr))
                .sum::<u32>()
    }

    fn nbufs(&self) -> u32 {
        self.k.bufs.len() as u32
    }
    fn gidx(&self) -> u32 {
        self.nbufs() + 2
    }
    fn reg(&self, r: Reg) -> u32 {
        self.nbufs() + 3 + r
    }

    fn kernel(&self) -> Result<Function> {
        let mut locals = vec![(1, ValType::I32)];
        locals.extend(self.dtypes.iter().map(|&d| (1, val_ty(d))));
        let vectors = self.packs.len() as u32 + self.scratch_needed();
        if vectors > 0 {
            locals.push((vectors, ValType::V128));
        }
        let mut func = Function::new(locals);
        let (gstart, gend, gidx) = (self.nbufs(), self.nbufs() + 1, self.gidx());
        let mut s = func.instructions();
        s.local_get(gstart).local_set(gidx);
        s.block(BlockType::Empty);
        s.local_get(gidx).local_get(gend).i32_ge_s().br_if(0);
        s.loop_(BlockType::Empty);
        let mut loops: Vec<(Reg, u32)> = vec![];
        for (i, inst) in self.k.insts.iter().enumerate() {
            let pure = match inst {
                Inst::Acc { .. } => self.skip.contains(&i),
                Inst::Loop { .. }
                | Inst::EndLoop
                | Inst::Store { .. }
                | Inst::StoreVec { .. }
                | Inst::StoreShared { .. }
                | Inst::Barrier => false,
                _ => true,
            };
            if !pure {
                self.memo.borrow_mut().clear();
            }
            if let Some(pi) = self.packs.iter().position(|p| p.at == i) {
                self.vector_step(&mut s, pi);
            }
            if let Some(p) = self.store_packs.iter().find(|p| p.at == i) {
                // The address of lane 0, then the vector, stored in place of the last store.
                s.local_get(p.slot);
                self.get(&mut s, p.base);
                s.i32_const(p.offset as i32)
                    .i32_add()
                    .i32_const(2)
                    .i32_shl()
                    .i32_add();
                self.vexpr(&mut s, &p.expr);
                s.v128_store(mem(0, 0));
                // The store may change what a memoized load read.
                self.memo.borrow_mut().clear();
            }
            if !self.skip.contains(&i) {
                self.inst(&mut s, inst, &mut loops)?;
            }
            for (pi, p) in self.packs.iter().enumerate() {
                if let Inst::DefAcc { dst, op, .. } = inst {
                    if p.accs[0] == *dst {
                        s.f32_const((op.identity(DType::F32) as f32).into())
                            .f32x4_splat();
                        s.local_set(self.vacc(pi));
                    }
                }
                // After the reduce's loop nest, the lanes go back to the scalar accumulators.
                if p.end == i {
                    for (j, &a) in p.accs.iter().enumerate() {
                        s.local_get(self.vacc(pi)).f32x4_extract_lane(j as u8);
                        s.local_set(self.reg(a));
                    }
                }
            }
        }
        if !loops.is_empty() {
            bail!(Backend, "wasm: kernel {} leaves a loop open", self.k.name);
        }
        s.local_get(gidx).i32_const(1).i32_add().local_tee(gidx);
        s.local_get(gend).i32_lt_s().br_if(0);
        s.end().end().end();
        Ok(func)
    }

    /// Push register `r`.
    fn get(&self, s: &mut InstructionSink, r: Reg) {
        s.local_get(self.reg(r));
    }

    /// The byte address of element `idx` of buffer `slot` (`dt`'s elements).
    fn addr(&self, s: &mut InstructionSink, slot: u32, dt: DType, idx: Reg) {
        s.local_get(slot);
        self.get(s, idx);
        match dt.size() {
            1 => {}
            n => {
                s.i32_const(n.trailing_zeros() as i32).i32_shl();
            }
        }
        s.i32_add();
    }

    /// Load element at the address on the stack (plus `offset` bytes) as a register of `dt`.
    fn load(s: &mut InstructionSink, dt: DType, offset: u64) {
        match dt {
            DType::F32 => s.f32_load(mem(offset, 2)),
            DType::I32 | DType::U32 => s.i32_load(mem(offset, 2)),
            DType::U8 => s.i32_load8_u(mem(offset, 0)),
            DType::Bool => s.i32_load8_u(mem(offset, 0)).i32_const(0).i32_ne(),
            DType::F16 => s.i32_load16_u(mem(offset, 1)).call(H2F),
            DType::BF16 => s
                .i32_load16_u(mem(offset, 1))
                .i32_const(16)
                .i32_shl()
                .f32_reinterpret_i32(),
        };
    }

    /// Store the value on the stack (a register of `dt`) at the address below it.
    fn store(s: &mut InstructionSink, dt: DType, offset: u64) {
        match dt {
            DType::F32 => s.f32_store(mem(offset, 2)),
            DType::I32 | DType::U32 => s.i32_store(mem(offset, 2)),
            DType::U8 | DType::Bool => s.i32_store8(mem(offset, 0)),
            DType::F16 => s.call(F2H).i32_store16(mem(offset, 1)),
            DType::BF16 => s.call(F2B).i32_store16(mem(offset, 1)),
        };
    }

    /// Keep an integer result in its dtype's range (u8 wraps, bool is 0 or 1).
    fn wrap(s: &mut InstructionSink, dt: DType) {
        match dt {
            DType::U8 => {
                s.i32_const(255).i32_and();
            }
            DType::Bool => {
                s.i32_const(0).i32_ne();
            }
            _ => {}
        }
    }

    fn constant(s: &mut InstructionSink, v: f64, dt: DType) {
        match dt {
            DType::F32 | DType::F16 | DType::BF16 => s.f32_const((v as f32).into()),
            DType::I32 => s.i32_const(v as i32),
            DType::U32 => s.i32_const(v as u32 as i32),
            DType::U8 => s.i32_const(v as u8 as i32),
            DType::Bool => s.i32_const((v != 0.0) as i32),
        };
    }

    fn inst(
        &self,
        s: &mut InstructionSink,
        inst: &Inst,
        loops: &mut Vec<(Reg, u32)>,
    ) -> Result<()> {
        match *inst {
            Inst::Const { dst, bits, dtype } => {
                Self::constant(s, f64::from_bits(bits), dtype);
                s.local_set(self.reg(dst));
            }
            Inst::Gidx { dst } | Inst::Wgid { dst } => {
                s.local_get(self.gidx()).local_set(self.reg(dst));
            }
            Inst::Lidx { dst } => {
                s.i32_const(0).local_set(self.reg(dst));
            }
            Inst::Unary { dst, op, dtype, a } => {
                self.unary(s, op, dtype, a);
                s.local_set(self.reg(dst));
            }
            Inst::Binary {
                dst,
                op,
                dtype,
                a,
                b,
            } => {
                self.binary(s, op, dtype, a, b);
                s.local_set(self.reg(dst));
            }
            Inst::Where { dst, c, a, b, .. } => {
                self.get(s, a);
                self.get(s, b);
                self.get(s, c);
                s.select().local_set(self.reg(dst));
            }
            Inst::Cast { dst, from, to, a } => {
                self.get(s, a);
                Self::cast(s, from, to, self.reg(dst));
                s.local_set(self.reg(dst));
            }
            Inst::Load {
                dst,
                slot,
                dtype,
                idx,
                gate,
            } => {
                // A gated load reads nothing where its gate is false: its index may be out of
                // the buffer there, which WebAssembly would trap on.
                if let Some(g) = gate {
                    self.get(s, g);
                    s.if_(BlockType::Result(val_ty(dtype)));
                }
                self.addr(s, slot, dtype, idx);
                Self::load(s, dtype, 0);
                if gate.is_some() {
                    s.else_();
                    Self::constant(s, 0.0, dtype);
                    s.end();
                }
                s.local_set(self.reg(dst));
            }
            Inst::LoadVec {
                dsts,
                slot,
                dtype,
                idx,
            } => {
                for (j, &d) in dsts.iter().enumerate() {
                    self.addr(s, slot, dtype, idx);
                    Self::load(s, dtype, (j * dtype.size()) as u64);
                    s.local_set(self.reg(d));
                }
            }
            Inst::Store {
                slot,
                dtype,
                idx,
                val,
                gate,
            } => {
                if let Some(g) = gate {
                    self.get(s, g);
                    s.if_(BlockType::Empty);
                }
                self.addr(s, slot, dtype, idx);
                self.get(s, val);
                Self::store(s, dtype, 0);
                if gate.is_some() {
                    s.end();
                }
            }
            Inst::StoreVec {
                slot,
                dtype,
                idx,
                vals,
            } => {
                for (j, &v) in vals.iter().enumerate() {
                    self.addr(s, slot, dtype, idx);
                    self.get(s, v);
                    Self::store(s, dtype, (j * dtype.size()) as u64);
                }
            }
            Inst::DefAcc { dst, op, dtype } => {
                Self::constant(s, op.identity(dtype), dtype);
                s.local_set(self.reg(dst));
            }
            // A fused step adds its product (`val`, computed before) rounded: see the header.
            Inst::Acc {
                acc,
                op,
                dtype,
                val,
                ..
            } => {
                self.binary(s, op.combine(), dtype, acc, val);
                s.local_set(self.reg(acc));
            }
            Inst::Loop { dst, size } => {
                s.i32_const(0).local_set(self.reg(dst));
                s.block(BlockType::Empty);
                if size == 0 {
                    s.br(0);
                }
                s.loop_(BlockType::Empty);
                loops.push((dst, size));
            }
            Inst::EndLoop => {
                let Some((dst, size)) = loops.pop() else {
                    bail!(
                        Backend,
                        "wasm: kernel {} closes a loop it never opened",
                        self.k.name
                    );
                };
                let r = self.reg(dst);
                s.local_get(r).i32_const(1).i32_add().local_tee(r);
                s.i32_const(size as i32).i32_lt_s().br_if(0);
                s.end().end();
            }
            Inst::LoadShared { .. }
            | Inst::StoreShared { .. }
            | Inst::Barrier
            | Inst::SubgroupSum { .. } => {
                bail!(
                    Backend,
                    "wasm: kernel {} uses workgroup memory",
                    self.k.name
                )
            }
        }
        Ok(())
    }

    /// Pack `pi`'s step: its vector accumulator combined with the expression, lane by lane as
    /// the scalar steps (a product is multiplied, then added), or one relaxed fused
    /// multiply-add where the engine has it.
    fn vector_step(&self, s: &mut InstructionSink, pi: usize) {
        let p = &self.packs[pi];
        let v = self.vacc(pi);
        match p.op {
            crate::ops::ReduceOp::Max => {
                let (a, b) = (self.fresh(), self.fresh());
                s.local_get(v).local_set(a);
                self.vexpr(s, &p.expr);
                s.local_set(b);
                self.vmax(s, a, b);
            }
            crate::ops::ReduceOp::Sum => match &p.expr {
                VExpr::Binary(BinaryOp::Mul, a, b) if p.fused && self.features.relaxed_simd => {
                    self.vexpr(s, a);
                    self.vexpr(s, b);
                    s.local_get(v).f32x4_relaxed_madd();
                }
                _ => {
                    s.local_get(v);
                    self.vexpr(s, &p.expr);
                    s.f32x4_add();
                }
            },
            crate::ops::ReduceOp::Prod => {
                s.local_get(v);
                self.vexpr(s, &p.expr);
                s.f32x4_mul();
            }
        }
        s.local_set(v);
    }

    /// The scalar max's rule per lane: a where a > b or b is NaN, else b (locals a and b).
    fn vmax(&self, s: &mut InstructionSink, a: u32, b: u32) {
        s.local_get(a).local_get(b);
        s.local_get(a).local_get(b).f32x4_gt();
        s.local_get(b).local_get(b).f32x4_ne().v128_or();
        s.v128_bitselect();
    }

    /// Four lanes from registers (0 in spare lanes), as f32 or i32.
    fn lanes(&self, s: &mut InstructionSink, regs: &[Reg], float: bool) {
        if float {
            s.f32_const(0.0.into()).f32x4_splat();
        } else {
            s.i32_const(0).i32x4_splat();
        }
        for (j, &r) in regs.iter().enumerate().take(4) {
            self.get(s, r);
            if float {
                s.f32x4_replace_lane(j as u8);
            } else {
                s.i32x4_replace_lane(j as u8);
            }
        }
    }

    /// Push `e` as a v128 (f32 lanes, or a mask of all-ones and zero lanes): each distinct
    /// subexpression is computed once and kept in a local (`memo`).
    fn vexpr(&self, s: &mut InstructionSink, e: &VExpr) {
        if matches!(e, VExpr::Const(_)) {
            return self.vexpr_tree(s, e);
        }
        let key = format!("{e:?}");
        if let Some(&l) = self.memo.borrow().get(&key) {
            s.local_get(l);
            return;
        }
        self.vexpr_tree(s, e);
        let l = self.fresh();
        s.local_tee(l);
        self.memo.borrow_mut().insert(key, l);
    }

    /// `vexpr` without the memo at this node (its operands go through `vexpr`).
    fn vexpr_tree(&self, s: &mut InstructionSink, e: &VExpr) {
        match e {
            VExpr::Splat(r) => {
                self.get(s, *r);
                s.f32x4_splat();
            }
            VExpr::Const(v) => {
                s.f32_const((*v as f32).into()).f32x4_splat();
            }
            VExpr::Load {
                slot,
                dtype,
                base,
                offset,
                stride,
                gate,
            } => {
                // A gated load runs only where its gate holds (its elements may lie outside
                // the memory), 0 in every lane elsewhere.
                if let Some(g) = gate {
                    self.get(s, *g);
                    s.if_(BlockType::Result(ValType::V128));
                }
                let addr = |s: &mut InstructionSink| {
                    s.local_get(*slot);
                    self.get(s, *base);
                    s.i32_const(*offset as i32).i32_add();
                    if dtype.size() == 4 {
                        s.i32_const(2).i32_shl();
                    }
                    s.i32_add();
                };
                addr(s);
                match (dtype, stride) {
                    (DType::U8, _) => {
                        s.v128_load32_zero(mem(0, 0));
                        s.i16x8_extend_low_i8x16_u().i32x4_extend_low_i16x8_u();
                        s.f32x4_convert_i32x4_u();
                    }
                    (_, 2) => {
                        // Lanes 0 and 2 of two vectors: every other element.
                        s.v128_load(mem(0, 0));
                        addr(s);
                        s.v128_load(mem(16, 0));
                        s.i8x16_shuffle([0, 1, 2, 3, 8, 9, 10, 11, 16, 17, 18, 19, 24, 25, 26, 27]);
                    }
                    _ => {
                        s.v128_load(mem(0, 0));
                    }
                }
                if gate.is_some() {
                    s.else_();
                    s.f32_const(0.0f32.into()).f32x4_splat();
                    s.end();
                }
            }
            VExpr::Gather(regs) => self.lanes(s, regs, true),
            VExpr::Binary(op, a, b) if *op == BinaryOp::Max => {
                let (x, y) = (self.fresh(), self.fresh());
                self.vexpr(s, a);
                s.local_set(x);
                self.vexpr(s, b);
                s.local_set(y);
                self.vmax(s, x, y);
            }
            VExpr::Binary(op, a, b) => {
                self.vexpr(s, a);
                self.vexpr(s, b);
                match op {
                    BinaryOp::Add => s.f32x4_add(),
                    BinaryOp::Mul => s.f32x4_mul(),
                    _ => s.f32x4_div(),
                };
            }
            VExpr::Unary(UnaryOp::Exp2, a) => {
                self.vexpr(s, a);
                self.vexp2(s);
            }
            VExpr::Unary(UnaryOp::Recip, a) => {
                s.f32_const(1.0f32.into()).f32x4_splat();
                self.vexpr(s, a);
                s.f32x4_div();
            }
            VExpr::Unary(_, a) => {
                self.vexpr(s, a);
                s.f32x4_neg();
            }
            VExpr::Cmp(op, a, b) => {
                self.vexpr(s, a);
                self.vexpr(s, b);
                match op {
                    BinaryOp::CmpLt => s.f32x4_lt(),
                    BinaryOp::CmpEq => s.f32x4_eq(),
                    _ => s.f32x4_ne(),
                };
            }
            VExpr::Select(m, a, b) => {
                self.vexpr(s, a);
                self.vexpr(s, b);
                self.vexpr(s, m);
                s.v128_bitselect();
            }
            VExpr::Mask(m) => {
                self.vexpr(s, m);
                s.f32_const(1.0.into()).f32x4_splat().v128_and();
            }
            VExpr::Not(m) => {
                self.vexpr(s, m);
                s.v128_not();
            }
            VExpr::SplatMask(r) => {
                s.i32_const(0);
                self.get(s, *r);
                s.i32_sub().i32x4_splat();
            }
            VExpr::IntCmp(op, a, b) => {
                self.lanes(s, a, false);
                self.lanes(s, b, false);
                match op {
                    BinaryOp::CmpLt => s.i32x4_lt_s(),
                    BinaryOp::CmpEq => s.i32x4_eq(),
                    _ => s.i32x4_ne(),
                };
            }
        }
    }

    /// 2^x of the f32x4 on the stack, lane by lane the scalar `exp2` helper's operations.
    fn vexp2(&self, s: &mut InstructionSink) {
        let [x, c, n, f, p, i, h] = [(); 7].map(|_| self.fresh());
        let k = |s: &mut InstructionSink, v: f32| {
            s.f32_const(v.into()).f32x4_splat();
        };
        s.local_set(x);
        s.local_get(x);
        k(s, 0.0);
        s.local_get(x);
        k(s, EXP2_MIN);
        s.f32x4_gt().v128_bitselect().local_set(c);
        s.local_get(c);
        k(s, EXP2_MAX);
        s.local_get(c);
        k(s, EXP2_MAX);
        s.f32x4_lt().v128_bitselect().local_set(c);
        s.local_get(c);
        k(s, ROUND);
        s.f32x4_add();
        k(s, ROUND);
        s.f32x4_sub().local_set(n);
        s.local_get(c).local_get(n).f32x4_sub().local_set(f);
        k(s, EXP2_POLY[0]);
        s.local_set(p);
        for &v in &EXP2_POLY[1..] {
            s.local_get(p).local_get(f).f32x4_mul();
            k(s, v);
            s.f32x4_add().local_set(p);
        }
        s.local_get(n).i32x4_trunc_sat_f32x4_s().local_tee(i);
        s.i32_const(1).i32x4_shr_s().local_set(h);
        s.local_get(p);
        s.local_get(h).i32_const(127).i32x4_splat().i32x4_add();
        s.i32_const(23).i32x4_shl().f32x4_mul();
        s.local_get(i)
            .local_get(h)
            .i32x4_sub()
            .i32_const(127)
            .i32x4_splat()
            .i32x4_add();
        s.i32_const(23).i32x4_shl().f32x4_mul();
        k(s, 0.0);
        s.local_get(x)
            .local_get(x)
            .local_get(x)
            .f32x4_eq()
            .v128_bitselect();
        s.local_get(x);
        k(s, EXP2_MIN);
        s.f32x4_gt().v128_bitselect();
    }

    fn unary(&self, s: &mut InstructionSink, op: UnaryOp, dt: DType, a: Reg) {
        let f = dt.is_float();
        match op {
            UnaryOp::Neg if f => {
                self.get(s, a);
                s.f32_neg();
            }
            UnaryOp::Neg => {
                s.i32_const(0);
                self.get(s, a);
                s.i32_sub();
                Self::wrap(s, dt);
            }
            UnaryOp::Exp2 => {
                self.get(s, a);
                s.call(EXP2);
            }
            UnaryOp::Log2 => {
                self.get(s, a);
                s.call(LOG2);
            }
            UnaryOp::Sin => {
                self.get(s, a);
                s.call(SIN);
            }
            UnaryOp::Sqrt => {
                self.get(s, a);
                s.f32_sqrt();
            }
            UnaryOp::Recip if f => {
                s.f32_const(1.0.into());
                self.get(s, a);
                s.f32_div();
            }
            UnaryOp::Recip => {
                // 1 / a, or 0 where a is 0 (as integer division by 0 is everywhere here).
                self.get(s, a);
                s.i32_eqz().if_(BlockType::Result(ValType::I32));
                s.i32_const(0).else_().i32_const(1);
                self.get(s, a);
                if dt == DType::I32 {
                    s.i32_div_s();
                } else {
                    s.i32_div_u();
                }
                s.end();
            }
            UnaryOp::Trunc if f => {
                self.get(s, a);
                s.f32_trunc();
            }
            UnaryOp::Trunc => self.get(s, a),
        }
    }

    fn binary(&self, s: &mut InstructionSink, op: BinaryOp, dt: DType, a: Reg, b: Reg) {
        let f = dt.is_float();
        let signed = dt == DType::I32;
        let positive_divisor = self.consts.get(&b).is_some_and(|&v| v > 0.0) && !f;
        if matches!(op, BinaryOp::Div | BinaryOp::Mod) && !f && !positive_divisor {
            // b == 0 gives 0, and a signed a / -1 is -a (wrapping): WebAssembly traps on both
            // (its i32.rem_s of -1 is 0 already).
            self.get(s, b);
            s.i32_eqz()
                .if_(BlockType::Result(ValType::I32))
                .i32_const(0)
                .else_();
            if signed && op == BinaryOp::Div {
                self.get(s, b);
                s.i32_const(-1)
                    .i32_eq()
                    .if_(BlockType::Result(ValType::I32));
                s.i32_const(0);
                self.get(s, a);
                s.i32_sub().else_();
            }
            self.get(s, a);
            self.get(s, b);
            match (op, signed) {
                (BinaryOp::Div, true) => s.i32_div_s().end(),
                (BinaryOp::Div, false) => s.i32_div_u(),
                (_, true) => s.i32_rem_s(),
                (_, false) => s.i32_rem_u(),
            };
            s.end();
            return;
        }
        self.get(s, a);
        self.get(s, b);
        match op {
            BinaryOp::Add if f => s.f32_add(),
            BinaryOp::Add => s.i32_add(),
            BinaryOp::Mul if f => s.f32_mul(),
            BinaryOp::Mul => s.i32_mul(),
            BinaryOp::Div if f => s.f32_div(),
            BinaryOp::Div if signed => s.i32_div_s(),
            BinaryOp::Div => s.i32_div_u(),
            BinaryOp::Mod if f => s.call(FMOD),
            BinaryOp::Mod if signed => s.i32_rem_s(),
            BinaryOp::Mod => s.i32_rem_u(),
            BinaryOp::Max if f => {
                // a where a > b or b is NaN, else b (a NaN operand gives the other).
                self.get(s, a);
                self.get(s, b);
                s.f32_gt();
                self.get(s, b);
                self.get(s, b);
                s.f32_ne().i32_or().select()
            }
            BinaryOp::Max => {
                self.get(s, a);
                self.get(s, b);
                if signed {
                    s.i32_gt_s();
                } else {
                    s.i32_gt_u();
                }
                s.select()
            }
            BinaryOp::CmpLt if f => s.f32_lt(),
            BinaryOp::CmpLt if signed => s.i32_lt_s(),
            BinaryOp::CmpLt => s.i32_lt_u(),
            BinaryOp::CmpEq if f => s.f32_eq(),
            BinaryOp::CmpEq => s.i32_eq(),
            BinaryOp::CmpNe if f => s.f32_ne(),
            BinaryOp::CmpNe => s.i32_ne(),
            BinaryOp::And => s.i32_and(),
            BinaryOp::Or => s.i32_or(),
            BinaryOp::Xor => s.i32_xor(),
            // WebAssembly takes the shift count modulo 32, as the interpreter does.
            BinaryOp::Shl => s.i32_shl(),
            BinaryOp::Shr => s.i32_shr_u(),
        };
        if !f && !op.is_cmp() {
            Self::wrap(s, dt);
        }
    }

    /// Convert the value on the stack from `from` to `to` with `ops::exec_cast`'s semantics.
    fn cast(s: &mut InstructionSink, from: DType, to: DType, scratch: u32) {
        let to_f32 = |s: &mut InstructionSink| {
            match from {
                _ if from.is_float() => s,
                DType::I32 => s.f32_convert_i32_s(),
                _ => s.f32_convert_i32_u(),
            };
        };
        match to {
            DType::F32 => to_f32(s),
            DType::F16 => {
                to_f32(s);
                s.call(F2H).call(H2F);
            }
            DType::BF16 => {
                to_f32(s);
                s.call(F2B).i32_const(16).i32_shl().f32_reinterpret_i32();
            }
            DType::Bool if from.is_float() => {
                s.f32_const(0.0.into()).f32_ne();
            }
            DType::Bool => {
                s.i32_const(0).i32_ne();
            }
            // Truncation toward zero, saturating, NaN giving 0 (the non-trapping conversions).
            DType::I32 if from.is_float() => {
                s.i32_trunc_sat_f32_s();
            }
            DType::U32 if from.is_float() => {
                s.i32_trunc_sat_f32_u();
            }
            DType::U8 if from.is_float() => {
                // min(x, 255), through the destination register as scratch.
                s.i32_trunc_sat_f32_u().local_tee(scratch).i32_const(255);
                s.local_get(scratch).i32_const(255).i32_lt_u().select();
            }
            DType::U8 => {
                s.i32_const(255).i32_and();
            }
            // Between 32-bit integers the bits stay; u8 and bool are already in range.
            DType::I32 | DType::U32 => {}
        }
    }
}

// 2^x as the C dialect computes it (its `EXP2_FN`), shared by the scalar helper and the vector
// step: x at most EXP2_MAX, n = x rounded by adding and subtracting ROUND, 2^(x - n) by Cephes
// exp2f's polynomial (highest degree first; the C dialect's digits, so that both parse to the
// same f32 coefficients), then 2^n as two exact powers of two. At or below EXP2_MIN (2^x rounds
// to 0) and for a NaN the polynomial runs on 0 and the result is selected: a product that
// underflows is slow on x86 cores (a microcode assist).
const EXP2_MIN: f32 = -150.0;
const EXP2_MAX: f32 = 129.0;
const ROUND: f32 = 12582912.0;
#[allow(clippy::excessive_precision)]
const EXP2_POLY: [f32; 7] = [
    1.535336188319500e-4,
    1.339887440266574e-3,
    9.618437357674640e-3,
    5.550332471162809e-2,
    2.402264791363012e-1,
    6.931472028550421e-1,
    1.0,
];

// The module's own functions. Each takes its operands as parameters; the extra locals follow.

fn exp2_fn() -> Function {
    // Locals: 0 x, 1 c, 2 n, 3 f, 4 p (f32), 5 i, 6 h (i32).
    let mut func = Function::new([(4, ValType::F32), (2, ValType::I32)]);
    let mut s = func.instructions();
    let c = |s: &mut InstructionSink, v: f32| {
        s.f32_const(v.into());
    };
    // c = x > -150 ? min(x, 129) : 0; a NaN or a result that rounds to 0 is selected at the end.
    s.local_get(0);
    c(&mut s, 0.0);
    s.local_get(0);
    c(&mut s, EXP2_MIN);
    s.f32_gt().select().local_set(1);
    s.local_get(1);
    c(&mut s, EXP2_MAX);
    s.local_get(1);
    c(&mut s, EXP2_MAX);
    s.f32_lt().select().local_set(1);
    // n = round(c), f = c - n.
    s.local_get(1);
    c(&mut s, ROUND);
    s.f32_add();
    c(&mut s, ROUND);
    s.f32_sub().local_set(2);
    s.local_get(1).local_get(2).f32_sub().local_set(3);
    // p: the polynomial, the same operations as the C dialect's.
    c(&mut s, EXP2_POLY[0]);
    s.local_set(4);
    for &k in &EXP2_POLY[1..] {
        s.local_get(4).local_get(3).f32_mul();
        c(&mut s, k);
        s.f32_add().local_set(4);
    }
    // 2^n as two exact powers of two, so subnormal results round once.
    s.local_get(2).i32_trunc_f32_s().local_tee(5);
    s.i32_const(1).i32_shr_s().local_set(6);
    s.local_get(4);
    s.local_get(6)
        .i32_const(127)
        .i32_add()
        .i32_const(23)
        .i32_shl()
        .f32_reinterpret_i32();
    s.f32_mul();
    s.local_get(5)
        .local_get(6)
        .i32_sub()
        .i32_const(127)
        .i32_add();
    s.i32_const(23).i32_shl().f32_reinterpret_i32().f32_mul();
    // x > -150 ? result : (x == x ? 0 : x).
    c(&mut s, 0.0);
    s.local_get(0).local_get(0).local_get(0).f32_eq().select();
    s.local_get(0);
    c(&mut s, EXP2_MIN);
    s.f32_gt().select();
    s.end();
    func
}

fn h2f_fn() -> Function {
    // Locals: 0 h, 1 sign, 2 e, 3 m (i32).
    let mut func = Function::new([(3, ValType::I32)]);
    let mut s = func.instructions();
    s.local_get(0)
        .i32_const(0x8000)
        .i32_and()
        .i32_const(16)
        .i32_shl()
        .local_set(1);
    s.local_get(0)
        .i32_const(10)
        .i32_shr_u()
        .i32_const(0x1f)
        .i32_and()
        .local_set(2);
    s.local_get(0).i32_const(0x3ff).i32_and().local_set(3);
    // Subnormal: m * 2^-24, with the sign.
    s.local_get(2)
        .i32_eqz()
        .if_(BlockType::Result(ValType::F32));
    s.local_get(3)
        .f32_convert_i32_u()
        .f32_const(5.960_464_5e-8.into())
        .f32_mul();
    s.f32_const((-0.0f32).into())
        .f32_const(0.0.into())
        .local_get(1)
        .select()
        .f32_copysign();
    s.else_();
    // Inf/NaN keep their payload; normal numbers rebias the exponent.
    s.local_get(1).local_get(3).i32_const(13).i32_shl().i32_or();
    s.i32_const(0x7f80_0000)
        .local_get(2)
        .i32_const(112)
        .i32_add()
        .i32_const(23)
        .i32_shl();
    s.local_get(2)
        .i32_const(31)
        .i32_eq()
        .select()
        .i32_or()
        .f32_reinterpret_i32();
    s.end();
    s.end();
    func
}

fn f2h_fn() -> Function {
    // Round to nearest even, as the C dialect's f2h. Locals: 0 f (f32); 1 x, 2 sign, 3 mant,
    // 4 exp, 5 e, 6 shift, 7 h, 8 rem, 9 half (i32).
    let mut func = Function::new([(9, ValType::I32)]);
    let mut s = func.instructions();
    s.local_get(0).i32_reinterpret_f32().local_set(1);
    s.local_get(1)
        .i32_const(16)
        .i32_shr_u()
        .i32_const(0x8000)
        .i32_and()
        .local_set(2);
    s.local_get(1).i32_const(0x7f_ffff).i32_and().local_set(3);
    s.local_get(1)
        .i32_const(23)
        .i32_shr_u()
        .i32_const(0xff)
        .i32_and()
        .local_set(4);
    // Inf and NaN (a NaN stays quiet).
    s.local_get(4).i32_const(255).i32_eq().if_(BlockType::Empty);
    s.local_get(2).i32_const(0x7c00).i32_or();
    s.i32_const(0x200)
        .i32_const(0)
        .local_get(3)
        .select()
        .i32_or()
        .return_();
    s.end();
    s.local_get(4).i32_const(112).i32_sub().local_set(5);
    // Overflow to inf.
    s.local_get(5)
        .i32_const(31)
        .i32_ge_s()
        .if_(BlockType::Empty);
    s.local_get(2).i32_const(0x7c00).i32_or().return_();
    s.end();
    // Subnormal halves (or zero).
    s.local_get(5).i32_const(0).i32_le_s().if_(BlockType::Empty);
    s.local_get(5)
        .i32_const(-10)
        .i32_lt_s()
        .if_(BlockType::Empty);
    s.local_get(2).return_();
    s.end();
    s.local_get(3).i32_const(0x80_0000).i32_or().local_set(3);
    s.i32_const(14).local_get(5).i32_sub().local_set(6);
    s.local_get(3).local_get(6).i32_shr_u().local_set(7);
    s.local_get(3)
        .i32_const(1)
        .local_get(6)
        .i32_shl()
        .i32_const(1)
        .i32_sub()
        .i32_and()
        .local_set(8);
    s.i32_const(1)
        .local_get(6)
        .i32_const(1)
        .i32_sub()
        .i32_shl()
        .local_set(9);
    round_half_even(&mut s, 7, 8, 9);
    s.local_get(2).local_get(7).i32_or().return_();
    s.end();
    // Normal halves: the carry of rounding may reach the exponent (and inf), as it should.
    s.local_get(5)
        .i32_const(10)
        .i32_shl()
        .local_get(3)
        .i32_const(13)
        .i32_shr_u()
        .i32_or()
        .local_set(7);
    s.local_get(3).i32_const(0x1fff).i32_and().local_set(8);
    s.i32_const(0x1000).local_set(9);
    round_half_even(&mut s, 7, 8, 9);
    s.local_get(2).local_get(7).i32_or();
    s.end();
    func
}

/// `h += rem > half || (rem == half && h & 1)` on locals.
fn round_half_even(s: &mut InstructionSink, h: u32, rem: u32, half: u32) {
    s.local_get(h);
    s.local_get(rem).local_get(half).i32_gt_u();
    s.local_get(rem)
        .local_get(half)
        .i32_eq()
        .local_get(h)
        .i32_const(1)
        .i32_and()
        .i32_and();
    s.i32_or().i32_add().local_set(h);
}

fn f2b_fn() -> Function {
    // bf16 is the top half of an f32: round to nearest even; a NaN keeps its top bits, made
    // quiet. Locals: 0 f (f32), 1 x (i32).
    let mut func = Function::new([(1, ValType::I32)]);
    let mut s = func.instructions();
    s.local_get(0).i32_reinterpret_f32().local_set(1);
    s.local_get(1)
        .i32_const(16)
        .i32_shr_u()
        .i32_const(0x40)
        .i32_or();
    s.local_get(1).i32_const(0x7fff).i32_add();
    s.local_get(1)
        .i32_const(16)
        .i32_shr_u()
        .i32_const(1)
        .i32_and()
        .i32_add();
    s.i32_const(16).i32_shr_u();
    s.local_get(1)
        .i32_const(0x7fff_ffff)
        .i32_and()
        .i32_const(0x7f80_0000)
        .i32_gt_u();
    s.select();
    s.end();
    func
}

#[cfg(all(test, not(target_arch = "wasm32")))]
mod tests {
    use super::*;
    use crate::codegen::linearize::f16_row_sums;

    #[test]
    fn a_reduce_kernel_is_a_valid_module_exporting_the_kernel() {
        let bytes = module(&f16_row_sums(1), Features::default()).expect("renders");
        assert_eq!(&bytes[..4], b"\0asm");
        let engine = wasmi::Engine::default();
        let m = wasmi::Module::new(&engine, &bytes[..]).expect("validates");
        let names: Vec<&str> = m.exports().map(|e| e.name()).collect();
        assert_eq!(names, vec![EXPORT]);
        let mut imports: Vec<&str> = m.imports().map(|i| i.name()).collect();
        imports.sort();
        assert_eq!(imports, vec!["fmod", "log2", "memory", "sin"]);
    }

    #[test]
    fn the_relaxed_simd_probe_validates_only_with_relaxed_simd() {
        let probe = relaxed_simd_probe();
        let with = wasmi::Engine::default();
        assert!(wasmi::Module::new(&with, &probe[..]).is_ok());
        let mut config = wasmi::Config::default();
        config.wasm_relaxed_simd(false);
        let without = wasmi::Engine::new(&config);
        assert!(wasmi::Module::new(&without, &probe[..]).is_err());
    }

    #[test]
    fn workgroups_are_an_error_naming_the_kernel() {
        let e = module(&f16_row_sums(2), Features::default()).expect_err("no workgroups");
        assert!(
            e.to_string().contains("r_3") && e.to_string().contains("workgroups"),
            "{e}"
        );
    }
}

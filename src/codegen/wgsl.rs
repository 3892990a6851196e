//! The WGSL dialect of the shared printer, for WebGPU (in the browser and natively through
//! wgpu). Planned for what the browser guarantees: no 64-bit integers, few storage buffers, and
//! `shader-f16` only where the adapter has it (`render_wgsl_for`).
//!
//! A kernel is one compute entry point `main`. A flat kernel has `@workgroup_size(WORKGROUP_SIZE)`
//! and each invocation computes output element `gidx = x + y * (num_workgroups.x *
//! WORKGROUP_SIZE)` of its global id, so grids of more than 65535 workgroups fold into y
//! (`dispatch_size`), and invocations past the end return at once. A kernel with workgroups
//! (`LinearKernel::local_size` > 1) has that workgroup size, `wgid` from the workgroup id (folded
//! the same way; surplus workgroups return, which keeps barriers in uniform control flow) and
//! `lidx` from the local invocation index; its workgroup arrays are `var<workgroup>`. Index math
//! is `i32`.
//!
//! Buffer `i` is `@group(0) @binding(i) var<storage, ...> b{i}: array<T>`, `read_write` for the
//! output (slot 0, `BufArg::writes`). f32, i32 and u32 are stored natively. The others are packed
//! into `u32` words in the host's little-endian byte layout (so buffers are byte-for-byte those
//! of the other backends, their sizes rounded up to whole words, see `storage_bytes`): bool and u8
//! four per word, f16 two per word (as bits, converted bit-exactly by `f16_to_f32` and the
//! round-to-nearest-even `f32_to_f16` of shaders/f16.wgsl, which need no capability, unlike
//! `unpack2x16float`), bf16 two per word likewise (shaders/bf16.wgsl). A packed output is `array<atomic<u32>>`, written with `atomicAnd` +
//! `atomicOr` on its own lane so neighbours writing the same word cannot race. Packed buffers
//! are accessed through per-buffer helpers `ld_b{i}` / `st_b{i}`. Where the device has
//! `shader-f16` (`Features::shader_f16`), f16 buffers are `array<f16>` instead (`enable f16;`):
//! read and written an element at a time with the GPU's conversions, no atomics, and an f16
//! rounding is `f32(f16(x))`. Arithmetic stays f32 either way.
//!
//! Registers: f16 and bf16 compute as f32 (`compute_dtype`), u8 as u32 masked to 8 bits after every op
//! that can leave the range (the interpreter's wrapping), bool as `bool`. Integer division and
//! modulo by zero give 0 like the interpreter; float constants WGSL cannot spell (inf, NaN,
//! subnormals) are bit casts.

use super::linearize::{Inst, LinearKernel};
use super::render::Renderer;
use crate::dtype::DType;
use crate::ops::compute_dtype;
use crate::ops::{BinaryOp, ReduceOp, UnaryOp};
use std::fmt::Write;

/// Invocations per workgroup (WebGPU guarantees 256).
pub const WORKGROUP_SIZE: u32 = 64;

/// Workgroups per grid dimension WebGPU guarantees (`maxComputeWorkgroupsPerDimension`).
pub const MAX_WORKGROUPS_PER_DIM: u32 = 65535;

/// The f16 conversion helpers, included in kernels that need them.
const F16_HELPERS: &str = include_str!("../../shaders/f16.wgsl");

/// The bf16 conversion helpers, likewise.
const BF16_HELPERS: &str = include_str!("../../shaders/bf16.wgsl");

/// The WGSL renderer for one kernel: it knows which buffers are declared as arrays of `vec4`
/// (those the kernel accesses four elements at a time; single elements of them are read and
/// written as components).
#[derive(Default)]
pub struct WgslRenderer {
    vec: Vec<bool>,
    features: Features,
}

/// What the device's WGSL may use beyond the baseline.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Features {
    /// `shader-f16`: f16 buffers are `array<f16>` (no packing, no atomics).
    pub shader_f16: bool,
    /// Kernels that sum through subgroups start with `enable subgroups;` (browsers want it;
    /// naga, the WGSL front end of native wgpu and Deno, rejects it).
    pub subgroups_directive: bool,
}

impl WgslRenderer {
    /// The renderer for `k`: buffers it reads or writes with `LoadVec`/`StoreVec` are declared as
    /// arrays of `vec4`.
    pub fn for_kernel(k: &LinearKernel) -> Self {
        WgslRenderer::with_features(k, Features::default())
    }
    /// `for_kernel` for a device with `features`.
    pub fn with_features(k: &LinearKernel, features: Features) -> Self {
        let mut vec = vec![false; k.bufs.len()];
        for i in &k.insts {
            if let Inst::LoadVec { slot, .. } | Inst::StoreVec { slot, .. } = i {
                vec[*slot as usize] = true;
            }
        }
        WgslRenderer { vec, features }
    }
    /// Whether f16 values are stored natively.
    fn native_f16(&self) -> bool {
        self.features.shader_f16
    }
    /// How `dt` packs into words here (f16 does not where it is native).
    fn packing(&self, dt: DType) -> Option<Packing> {
        if dt == DType::F16 && self.native_f16() {
            return None;
        }
        Packing::of(dt)
    }
    /// The WGSL type a buffer of `dt` is declared as an array of.
    fn storage_ty(&self, dt: DType, writes: bool) -> &'static str {
        match (self.packing(dt), dt) {
            (Some(_), _) if writes => "atomic<u32>",
            (Some(_), _) => "u32",
            (None, DType::I32) => "i32",
            (None, DType::U32) => "u32",
            (None, DType::F16) => "f16",
            (None, _) => "f32",
        }
    }
    fn is_vec(&self, slot: u32) -> bool {
        self.vec.get(slot as usize).copied().unwrap_or(false)
    }
}

/// The WGSL dialect by name (`wgsl`, files `.wgsl`).
pub const DIALECT: super::Dialect = super::Dialect {
    name: "wgsl",
    ext: "wgsl",
    render: render_wgsl,
};

/// Render a kernel as a WGSL compute shader that any WebGPU device runs.
pub fn render_wgsl(k: &LinearKernel) -> String {
    render_wgsl_for(k, Features::default())
}

/// Render a kernel for a device with `features`.
pub fn render_wgsl_for(k: &LinearKernel, features: Features) -> String {
    let src = super::render::render(k, &WgslRenderer::with_features(k, features));
    if src.contains("f32_bits(") {
        format!("{src}\nfn f32_bits(b: u32) -> f32 {{\n    return bitcast<f32>(b);\n}}\n")
    } else {
        src
    }
}

/// Invocations per workgroup of a kernel: its own, or `WORKGROUP_SIZE` for a flat kernel.
pub fn workgroup_size(k: &LinearKernel) -> u32 {
    if k.local_size > 1 {
        k.local_size as u32
    } else {
        WORKGROUP_SIZE
    }
}

/// Workgroup counts `(x, y, z)` for `global_size` invocations in workgroups of `wg_size`: one
/// dimension while it fits in `MAX_WORKGROUPS_PER_DIM`, else folded into y (the shader
/// recombines `x + y * num_workgroups.x` and skips the surplus).
pub fn dispatch_size(global_size: usize, wg_size: u32) -> (u32, u32, u32) {
    let groups = global_size.div_ceil(wg_size as usize);
    let max = MAX_WORKGROUPS_PER_DIM as usize;
    if groups <= max {
        return (groups as u32, 1, 1);
    }
    // Kernels have at most i32::MAX invocations (the scheduler's limit), well within max * max
    // workgroups; the runtime checks it again before dispatching.
    let y = groups.div_ceil(max).min(max);
    (groups.div_ceil(y).min(max) as u32, y as u32, 1)
}

/// How a dtype packs into `u32` words: `lanes` values of `bits` bits, value `i` in word
/// `i / lanes` at bit `(i % lanes) * bits` (the little-endian byte layout of the host).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Packing {
    /// Values per `u32` word (4 for u8 and bool, 2 for f16 and bf16).
    pub lanes: u32,
    /// Bits per value.
    pub bits: u32,
}

impl Packing {
    /// `None` for the dtypes WGSL stores natively (f32, i32, u32).
    pub fn of(dt: DType) -> Option<Packing> {
        match dt {
            DType::Bool | DType::U8 => Some(Packing { lanes: 4, bits: 8 }),
            DType::F16 | DType::BF16 => Some(Packing { lanes: 2, bits: 16 }),
            DType::F32 | DType::I32 | DType::U32 => None,
        }
    }
    /// The word holding value `i`.
    pub fn word(self, i: usize) -> usize {
        i / self.lanes as usize
    }
    /// The bit offset of value `i` within its word.
    pub fn shift(self, i: usize) -> u32 {
        (i % self.lanes as usize) as u32 * self.bits
    }
    /// The mask of one value, unshifted.
    pub fn mask(self) -> u32 {
        u32::MAX >> (32 - self.bits)
    }
}

/// Bytes a WGSL storage buffer of `numel` values of `dt` needs: whole `u32` words (at least one,
/// WebGPU bindings may not be empty).
pub fn storage_bytes(dt: DType, numel: usize) -> usize {
    (numel * dt.size()).div_ceil(4).max(1) * 4
}

fn float_lit(f: f32) -> String {
    if !f.is_finite() || (f != 0.0 && f.abs() < f32::MIN_POSITIVE) {
        // WGSL has no inf/NaN literals, and may reject subnormal ones. A call to `f32_bits`,
        // not a bare bitcast: a bitcast of a literal is a constant expression, and browsers
        // (Tint) reject constant expressions whose value is inf or NaN.
        return format!("f32_bits(0x{:08x}u)", f.to_bits());
    }
    let s = format!("{f:?}f");
    if s.starts_with('-') {
        format!("({s})")
    } else {
        s
    }
}

/// The value of an integer literal as this dialect prints it (`5i`, `(-5i)`, `7u`).
fn int_lit(s: &str) -> Option<i64> {
    let s = s.trim_start_matches('(').trim_end_matches(')');
    s.strip_suffix(['i', 'u'])?.parse().ok()
}

fn zero(dt: DType) -> &'static str {
    match dt {
        DType::F32 | DType::F16 | DType::BF16 => "0.0f",
        DType::I32 => "0i",
        DType::U32 | DType::U8 => "0u",
        DType::Bool => "false",
    }
}

/// Wrap a u8 result to 8 bits.
fn wrap(dt: DType, e: String) -> String {
    if dt == DType::U8 {
        format!("({e} & 0xffu)")
    } else {
        e
    }
}

/// A float register converted to u32 the interpreter's way: negative values wrap (WGSL's own
/// conversion clamps them to 0).
/// A float cast to u32 by the interpreter's rule (truncate, saturate, NaN gives 0). WGSL's
/// conversion clamps to the largest f32 below 2^32 (4294967040) and leaves NaN unspecified (tested
/// by its bits: compilers may fold `a != a`).
fn float_to_u32(a: &str) -> String {
    format!(
        "select(select(u32({a}), 4294967295u, {a} >= 4294967296.0f), 0u, {})",
        nan_bits(a)
    )
}

/// A float cast to i32 likewise (WGSL clamps at 2147483520, the largest f32 below 2^31).
fn float_to_i32(a: &str) -> String {
    format!(
        "select(select(i32({a}), 2147483647i, {a} >= 2147483648.0f), 0i, {})",
        nan_bits(a)
    )
}

/// Whether the f32 `a` is NaN, by its bits.
fn nan_bits(a: &str) -> String {
    format!("((bitcast<u32>({a}) & 0x7fffffffu) > 0x7f800000u)")
}

impl WgslRenderer {
    /// Integer division or modulo: by zero gives 0 (WGSL's rule gives the dividend).
    fn int_divmod(&self, sym: &str, dt: DType, a: &str, b: &str) -> String {
        let z = zero(dt);
        match int_lit(b) {
            Some(0) => z.to_string(),
            Some(_) => format!("({a} {sym} {b})"),
            None => format!("select({z}, {a} {sym} {b}, {b} != {z})"),
        }
    }
    /// The right operand of a shift: u32, taken mod 32 like the interpreter.
    fn shift_amount(dt: DType, b: &str) -> String {
        if let Some(v) = int_lit(b) {
            return format!("{}u", v & 31);
        }
        match dt {
            DType::I32 => format!("(u32({b}) & 31u)"),
            _ => format!("({b} & 31u)"),
        }
    }
    fn bool_binary(op: BinaryOp, a: &str, b: &str) -> String {
        match op {
            BinaryOp::Add | BinaryOp::Or | BinaryOp::Max => format!("({a} || {b})"),
            BinaryOp::Mul | BinaryOp::And | BinaryOp::Div => format!("({a} && {b})"),
            BinaryOp::Mod => "false".into(),
            BinaryOp::Xor | BinaryOp::CmpNe => format!("({a} != {b})"),
            BinaryOp::CmpEq => format!("({a} == {b})"),
            BinaryOp::CmpLt => format!("(!{a} && {b})"),
            BinaryOp::Shl => a.to_string(),
            BinaryOp::Shr => format!("({a} && !{b})"),
        }
    }
    fn helpers(&self, k: &LinearKernel) -> String {
        let mut s = String::new();
        for (dt, helpers) in [(DType::F16, F16_HELPERS), (DType::BF16, BF16_HELPERS)] {
            if self.packing(dt).is_none() {
                continue;
            }
            if k.uses_dtype(dt) {
                s.push('\n');
                s.push_str(helpers);
            }
        }
        for (i, b) in k.bufs.iter().enumerate() {
            let Some(p) = self.packing(b.dtype) else {
                continue;
            };
            let slot = i as u32;
            let lane_bits = p.lanes.trailing_zeros();
            let lane = p.lanes - 1;
            let loads = k
                .insts
                .iter()
                .any(|i| matches!(i, Inst::Load { slot: s, .. } if *s == slot));
            let stores = k
                .insts
                .iter()
                .any(|i| matches!(i, Inst::Store { slot: s, .. } if *s == slot));
            let word = if b.writes {
                format!("atomicLoad(&b{i}[i >> {lane_bits}u])")
            } else {
                format!("b{i}[i >> {lane_bits}u]")
            };
            if loads {
                let bits = format!(
                    "({word} >> (u32(i & {lane}) * {}u)) & 0x{:x}u",
                    p.bits,
                    p.mask()
                );
                let (ty, val) = match b.dtype {
                    DType::F16 => ("f32", format!("f16_to_f32({bits})")),
                    DType::BF16 => ("f32", format!("bf16_to_f32({bits})")),
                    _ => ("u32", bits),
                };
                let _ = write!(
                    s,
                    "\nfn ld_b{i}(i: i32) -> {ty} {{\n    return {val};\n}}\n"
                );
            }
            if stores && b.writes {
                let _ = write!(
                    s,
                    "\n// Only this lane's bits change, so neighbours storing into the same word cannot race.\n\
                     fn st_b{i}(i: i32, v: u32) {{\n    \
                     let sh = u32(i & {lane}) * {bits}u;\n    \
                     atomicAnd(&b{i}[i >> {lane_bits}u], ~(0x{mask:x}u << sh));\n    \
                     atomicOr(&b{i}[i >> {lane_bits}u], (v & 0x{mask:x}u) << sh);\n}}\n",
                    bits = p.bits,
                    mask = p.mask()
                );
            }
        }
        s
    }
}

impl Renderer for WgslRenderer {
    fn ty(&self, dt: DType) -> &'static str {
        match dt {
            DType::F32 | DType::F16 | DType::BF16 => "f32",
            DType::I32 => "i32",
            DType::U32 | DType::U8 => "u32",
            DType::Bool => "bool",
        }
    }
    fn prologue(&self, k: &LinearKernel) -> String {
        let n = k.global_size;
        let ws = workgroup_size(k);
        let (x, y, z) = dispatch_size(n, ws);
        let mut s = format!(
            "// {}: {n} invocations, workgroups ({x}, {y}, {z}) of {ws}\n",
            k.name
        );
        if self.native_f16() && k.uses_dtype(DType::F16) {
            s.push_str("enable f16;\n");
        }
        let subgroups = |i: &Inst| matches!(i, Inst::SubgroupSum { .. });
        if self.features.subgroups_directive && k.insts.iter().any(subgroups) {
            s.push_str("enable subgroups;\n");
        }
        for (i, b) in k.bufs.iter().enumerate() {
            let access = if b.writes { "read_write" } else { "read" };
            let ty = self.storage_ty(b.dtype, b.writes);
            let ty = if self.is_vec(i as u32) {
                format!("vec4<{ty}>")
            } else {
                ty.to_string()
            };
            let _ = writeln!(
                s,
                "@group(0) @binding({i}) var<storage, {access}> b{i}: array<{ty}>;"
            );
        }
        s.push_str(&self.helpers(k));
        if k.local_size > 1 {
            for (i, (dt, len)) in k.shared.iter().enumerate() {
                let _ = write!(s, "\nvar<workgroup> s{i}: array<{}, {len}>;", self.ty(*dt));
            }
            let nwg = n / k.local_size;
            let _ = write!(
                s,
                "\n\n@compute @workgroup_size({ws})\n\
                 fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) li: u32, @builtin(num_workgroups) nwg: vec3<u32>) {{\n    \
                 let w = wid.x + wid.y * nwg.x;\n    \
                 if (w >= {nwg}u) {{\n        return;\n    }}\n    \
                 let wgid = i32(w);\n    \
                 let lidx = i32(li);\n    \
                 {{\n"
            );
            return s;
        }
        let _ = write!(
            s,
            "\n@compute @workgroup_size({WORKGROUP_SIZE})\n\
             fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {{\n    \
             let g = gid.x + gid.y * (nwg.x * {WORKGROUP_SIZE}u);\n    \
             if (g >= {n}u) {{\n        return;\n    }}\n    \
             let gidx = i32(g);\n"
        );
        s
    }
    fn epilogue(&self, k: &LinearKernel) -> String {
        if k.local_size > 1 {
            "    }\n}\n".into()
        } else {
            "}\n".into()
        }
    }
    /// Each phase is a block of its own: it recomputes (and renames) what it needs.
    fn subgroup_sum(&self, _dt: DType, a: &str, _size: u32) -> String {
        format!("subgroupAdd({a})")
    }
    fn loop_barrier(&self) -> String {
        "workgroupBarrier();".into()
    }
    fn barrier(&self, _k: &LinearKernel) -> String {
        "}\n    workgroupBarrier();\n    {".into()
    }
    fn constant(&self, v: f64, dt: DType) -> String {
        match dt {
            DType::F32 | DType::F16 | DType::BF16 => float_lit(v as f32),
            // 2147483648i is out of range, so the minimum cannot be a negated literal.
            DType::I32 if v == i32::MIN as f64 => "(-2147483647i - 1i)".into(),
            DType::I32 if v < 0.0 => format!("({}i)", v as i32),
            DType::I32 => format!("{}i", v as i32),
            DType::U32 => format!("{}u", v as u32),
            DType::U8 => format!("{}u", v as u8),
            DType::Bool => (v != 0.0).to_string(),
        }
    }
    fn unary(&self, op: UnaryOp, dt: DType, a: &str) -> String {
        let dt = compute_dtype(dt);
        let float_fn = |f: &str| {
            if dt.is_float() {
                format!("{f}({a})")
            } else {
                // Integer transcendentals (not produced by the frontend): through f32.
                let x = self.cast(dt, DType::F32, a);
                self.cast(DType::F32, dt, &format!("{f}({x})"))
            }
        };
        match op {
            UnaryOp::Neg => match dt {
                DType::U32 => format!("(0u - {a})"),
                DType::U8 => format!("((0u - {a}) & 0xffu)"),
                DType::Bool => a.to_string(),
                _ => format!("(-{a})"),
            },
            UnaryOp::Exp2 => float_fn("exp2"),
            UnaryOp::Log2 => float_fn("log2"),
            UnaryOp::Sin => float_fn("sin"),
            UnaryOp::Sqrt => float_fn("sqrt"),
            UnaryOp::Recip if dt.is_float() => format!("(1.0f / {a})"),
            UnaryOp::Recip if dt == DType::Bool => a.to_string(),
            UnaryOp::Recip => {
                let one = if dt == DType::I32 { "1i" } else { "1u" };
                self.int_divmod("/", dt, one, a)
            }
            UnaryOp::Trunc if dt.is_float() => format!("trunc({a})"),
            UnaryOp::Trunc => a.to_string(),
        }
    }
    fn binary(&self, op: BinaryOp, dt: DType, a: &str, b: &str) -> String {
        let dt = compute_dtype(dt);
        if dt == DType::Bool {
            return Self::bool_binary(op, a, b);
        }
        let f = dt.is_float();
        match op {
            BinaryOp::Add => wrap(dt, format!("({a} + {b})")),
            BinaryOp::Mul => wrap(dt, format!("({a} * {b})")),
            BinaryOp::Div if f => format!("({a} / {b})"),
            BinaryOp::Div => self.int_divmod("/", dt, a, b),
            BinaryOp::Mod if f => format!("({a} % {b})"),
            BinaryOp::Mod => self.int_divmod("%", dt, a, b),
            BinaryOp::Max => format!("max({a}, {b})"),
            // A float compared with itself is a NaN test (`isnan`), which WGSL compilers may
            // fold away (they can assume no NaNs): test the bits instead.
            BinaryOp::CmpNe | BinaryOp::CmpEq if f && a == b => {
                let nan = nan_bits(a);
                if op == BinaryOp::CmpNe {
                    nan
                } else {
                    format!("!{nan}")
                }
            }
            BinaryOp::CmpLt => format!("({a} < {b})"),
            BinaryOp::CmpEq => format!("({a} == {b})"),
            BinaryOp::CmpNe => format!("({a} != {b})"),
            BinaryOp::And => format!("({a} & {b})"),
            BinaryOp::Or => format!("({a} | {b})"),
            BinaryOp::Xor => format!("({a} ^ {b})"),
            BinaryOp::Shl => wrap(dt, format!("({a} << {})", Self::shift_amount(dt, b))),
            // The interpreter shifts the 32-bit pattern: logical even for i32.
            BinaryOp::Shr if dt == DType::I32 => {
                format!("i32(u32({a}) >> {})", Self::shift_amount(dt, b))
            }
            BinaryOp::Shr => format!("({a} >> {})", Self::shift_amount(dt, b)),
        }
    }
    fn cast(&self, from: DType, to: DType, a: &str) -> String {
        let from = compute_dtype(from);
        match to {
            DType::F32 if from.is_float() => a.to_string(),
            DType::F32 => format!("f32({a})"),
            DType::F16 if self.native_f16() => format!("f32(f16({a}))"),
            DType::F16 if from.is_float() => format!("f16_round({a})"),
            DType::F16 => format!("f16_round(f32({a}))"),
            DType::BF16 if from.is_float() => format!("bf16_round({a})"),
            DType::BF16 => format!("bf16_round(f32({a}))"),
            DType::I32 if from == DType::I32 => a.to_string(),
            DType::I32 if from.is_float() => float_to_i32(a),
            DType::I32 => format!("i32({a})"),
            DType::U32 => match from {
                DType::U32 | DType::U8 => a.to_string(),
                DType::F32 | DType::F16 | DType::BF16 => float_to_u32(a),
                _ => format!("u32({a})"),
            },
            DType::U8 => match from {
                DType::U8 => a.to_string(),
                DType::Bool => format!("u32({a})"),
                DType::U32 => format!("({a} & 0xffu)"),
                DType::I32 => format!("(u32({a}) & 0xffu)"),
                DType::F32 | DType::F16 | DType::BF16 => format!("min({}, 255u)", float_to_u32(a)),
            },
            DType::Bool if from == DType::Bool => a.to_string(),
            DType::Bool => format!("({a} != {})", zero(from)),
        }
    }
    fn load(&self, slot: u32, dt: DType, idx: &str) -> String {
        match dt {
            DType::F16 if self.native_f16() => format!("f32(b{slot}[{idx}])"),
            DType::U8 | DType::F16 | DType::BF16 => format!("ld_b{slot}({idx})"),
            DType::Bool => format!("(ld_b{slot}({idx}) != 0u)"),
            _ if self.is_vec(slot) => format!("b{slot}[({idx}) >> 2u][({idx}) & 3i]"),
            _ => format!("b{slot}[{idx}]"),
        }
    }
    fn store(&self, slot: u32, dt: DType, idx: &str, val: &str) -> String {
        match dt {
            DType::U8 => format!("st_b{slot}({idx}, {val});"),
            DType::Bool => format!("st_b{slot}({idx}, u32({val}));"),
            DType::F16 if self.native_f16() => format!("b{slot}[{idx}] = f16({val});"),
            DType::F16 => format!("st_b{slot}({idx}, f32_to_f16({val}));"),
            DType::BF16 => format!("st_b{slot}({idx}, f32_to_bf16({val}));"),
            _ if self.is_vec(slot) => format!("b{slot}[({idx}) >> 2u][({idx}) & 3i] = {val};"),
            _ => format!("b{slot}[{idx}] = {val};"),
        }
    }
    fn load_vec(&self, slot: u32, dt: DType, idx: &str) -> Option<(String, String)> {
        Some((
            format!("vec4<{}>", self.ty(dt)),
            format!("b{slot}[({idx}) >> 2u]"),
        ))
    }
    fn store_vec(&self, slot: u32, dt: DType, idx: &str, vals: &[String; 4]) -> Option<String> {
        Some(format!(
            "b{slot}[({idx}) >> 2u] = vec4<{}>({});",
            self.ty(dt),
            vals.join(", ")
        ))
    }
    fn select(&self, c: &str, a: &str, b: &str) -> String {
        format!("select({b}, {a}, {c})")
    }
    fn let_(&self, ty: &str, name: &str, expr: &str) -> String {
        format!("let {name}: {ty} = {expr};")
    }
    fn var(&self, ty: &str, name: &str, expr: &str) -> String {
        format!("var {name}: {ty} = {expr};")
    }
    fn loop_open(&self, name: &str, size: u32) -> String {
        format!("for (var {name}: i32 = 0i; {name} < {size}i; {name}++) {{")
    }
    fn acc(&self, op: ReduceOp, dt: DType, acc: &str, val: &str) -> String {
        let e = match op {
            ReduceOp::Sum => self.binary(BinaryOp::Add, dt, acc, val),
            op => self.binary(op.combine(), dt, acc, val),
        };
        format!("{acc} = {e};")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Rust transliteration of `f32_to_f16` in shaders/f16.wgsl.
    fn f32_to_f16(f: f32) -> u32 {
        let x = f.to_bits();
        let sign = (x >> 16) & 0x8000;
        let mant = x & 0x7fffff;
        let ex = ((x >> 23) & 0xff) as i32;
        if ex == 255 {
            return sign | 0x7c00 | if mant != 0 { 0x200 } else { 0 };
        }
        let e = ex - 112;
        if e >= 31 {
            return sign | 0x7c00;
        }
        if e <= 0 {
            if e < -10 {
                return sign;
            }
            let m = mant | 0x800000;
            let shift = (14 - e) as u32;
            let h = m >> shift;
            let rem = m & ((1 << shift) - 1);
            let half = 1 << (shift - 1);
            let up = rem > half || (rem == half && (h & 1) != 0);
            return sign | (h + up as u32);
        }
        let h = ((e as u32) << 10) | (mant >> 13);
        let rem = mant & 0x1fff;
        let up = rem > 0x1000 || (rem == 0x1000 && (h & 1) != 0);
        sign | (h + up as u32)
    }

    /// Rust transliteration of `f16_to_f32` in shaders/f16.wgsl.
    fn f16_to_f32(h: u32) -> f32 {
        let sign = (h & 0x8000) << 16;
        let e = (h >> 10) & 0x1f;
        let m = h & 0x3ff;
        if e == 0 {
            let f = m as f32 * 5.960_464_5e-8;
            return if sign != 0 { -f } else { f };
        }
        if e == 31 {
            return f32::from_bits(sign | 0x7f80_0000 | (m << 13));
        }
        f32::from_bits(sign | ((e + 112) << 23) | (m << 13))
    }

    #[test]
    fn f16_widening_matches_half() {
        for h in 0..=0xffffu32 {
            let want = half::f16::from_bits(h as u16).to_f32();
            let got = f16_to_f32(h);
            if want.is_nan() {
                assert!(got.is_nan(), "{h:04x}");
            } else {
                assert_eq!(got.to_bits(), want.to_bits(), "{h:04x}");
            }
        }
    }

    #[test]
    fn f16_rounding_matches_half() {
        let mut s = 0x1234_5678u32;
        let check = |x: f32| {
            let got = f32_to_f16(x);
            let want = half::f16::from_f32(x);
            if want.is_nan() {
                assert!(half::f16::from_bits(got as u16).is_nan(), "{x:e}");
            } else {
                assert_eq!(got, want.to_bits() as u32, "{x:e} ({:08x})", x.to_bits());
            }
        };
        for v in [
            0.0,
            -0.0,
            1.0,
            65504.0,
            65519.99,
            65520.0,
            1e-8,
            2.9802322e-8,
            6e-8,
        ] {
            check(v);
            check(-v);
        }
        for v in [
            f32::INFINITY,
            f32::NEG_INFINITY,
            f32::NAN,
            f32::MAX,
            f32::MIN_POSITIVE,
        ] {
            check(v);
        }
        for _ in 0..200_000 {
            s ^= s << 13;
            s ^= s >> 17;
            s ^= s << 5;
            check(f32::from_bits(s));
            // Concentrate on the f16 range (exponents 100..=143) too.
            check(f32::from_bits(
                (s & 0x807f_ffff) | ((100 + (s >> 8) % 44) << 23),
            ));
        }
    }

    /// Rust transliteration of `f32_to_bf16` in shaders/bf16.wgsl (the C and CUDA `f2b` too).
    fn f32_to_bf16(f: f32) -> u32 {
        let x = f.to_bits();
        if x & 0x7fff_ffff > 0x7f80_0000 {
            return (x >> 16) | 0x40;
        }
        (x + 0x7fff + ((x >> 16) & 1)) >> 16
    }

    #[test]
    fn bf16_conversions_match_half() {
        for h in 0..=0xffffu32 {
            // Widening is the bits shifted up; half agrees except that it quiets NaNs.
            let want = half::bf16::from_bits(h as u16).to_f32();
            let got = f32::from_bits(h << 16);
            if want.is_nan() {
                assert!(got.is_nan(), "{h:04x}");
            } else {
                assert_eq!(got.to_bits(), want.to_bits(), "{h:04x}");
            }
            // Rounding, bit for bit (NaN payloads included): every bf16 with low halves below,
            // at and above the tie, and the extremes.
            for low in [0, 1, 0x3fff, 0x7fff, 0x8000, 0x8001, 0xc000, 0xffff] {
                let x = f32::from_bits(h << 16 | low);
                let want = half::bf16::from_f32(x).to_bits() as u32;
                assert_eq!(f32_to_bf16(x), want, "{:08x}", x.to_bits());
            }
        }
    }

    /// The WGSL packed load and store, on a host word array.
    fn load(p: Packing, words: &[u32], i: usize) -> u32 {
        (words[p.word(i)] >> p.shift(i)) & p.mask()
    }
    fn store(p: Packing, words: &mut [u32], i: usize, v: u32) {
        let sh = p.shift(i);
        words[p.word(i)] &= !(p.mask() << sh);
        words[p.word(i)] |= (v & p.mask()) << sh;
    }

    #[test]
    fn packing_is_the_host_byte_layout() {
        for dt in [DType::U8, DType::Bool, DType::F16, DType::BF16] {
            let p = Packing::of(dt).unwrap();
            let n = 23usize;
            let bytes: Vec<u8> = (0..n * dt.size()).map(|b| (b * 37 + 11) as u8).collect();
            let mut padded = bytes.clone();
            padded.resize(storage_bytes(dt, n), 0);
            let words: Vec<u32> = padded
                .chunks(4)
                .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                .collect();
            assert_eq!(words.len() * 4, storage_bytes(dt, n));
            let mut built = vec![0xdead_beefu32; words.len()];
            // Stores in a scrambled order must not disturb neighbours.
            for j in 0..n {
                let i = (j * 7) % n;
                let v = match dt {
                    DType::F16 | DType::BF16 => {
                        u16::from_le_bytes([bytes[2 * i], bytes[2 * i + 1]]) as u32
                    }
                    _ => bytes[i] as u32,
                };
                assert_eq!(load(p, &words, i), v, "{dt} element {i}");
                store(p, &mut built, i, v | 0xffff_0000);
            }
            for i in 0..n {
                assert_eq!(load(p, &built, i), load(p, &words, i), "{dt} element {i}");
            }
        }
        assert_eq!(Packing::of(DType::F32), None);
        assert_eq!(storage_bytes(DType::Bool, 0), 4);
        assert_eq!(storage_bytes(DType::F16, 3), 8);
        assert_eq!(storage_bytes(DType::F32, 3), 12);
    }

    #[test]
    fn dispatch_folds_into_y() {
        let wg = WORKGROUP_SIZE as usize;
        let max = MAX_WORKGROUPS_PER_DIM as usize;
        assert_eq!(dispatch_size(0, WORKGROUP_SIZE), (0, 1, 1));
        assert_eq!(dispatch_size(1, WORKGROUP_SIZE), (1, 1, 1));
        assert_eq!(dispatch_size(wg, WORKGROUP_SIZE), (1, 1, 1));
        assert_eq!(dispatch_size(wg + 1, WORKGROUP_SIZE), (2, 1, 1));
        assert_eq!(dispatch_size(max * wg, WORKGROUP_SIZE), (max as u32, 1, 1));
        assert_eq!(dispatch_size(max * wg + 1, WORKGROUP_SIZE), (32768, 2, 1));
        for n in [
            max * wg + 1,
            3 * max * wg,
            3 * max * wg + 5,
            60_000 * 784,
            i32::MAX as usize,
        ] {
            let (x, y, z) = dispatch_size(n, WORKGROUP_SIZE);
            assert!(x as usize <= max && y as usize <= max && z == 1, "{n}");
            // Invocation ids x + y * (nx * wg) cover 0..n, and little more.
            let total = x as usize * y as usize * wg;
            assert!(
                total >= n && total - n <= (y as usize + 1) * wg,
                "{n}: {x}x{y}"
            );
        }
    }

    #[test]
    fn constants_are_valid_wgsl_literals() {
        let d = WgslRenderer::default();
        assert_eq!(d.constant(1.0, DType::F32), "1.0f");
        assert_eq!(d.constant(-0.5, DType::F16), "(-0.5f)");
        assert_eq!(d.constant(1e-7, DType::F32), "1e-7f");
        assert_eq!(
            d.constant(f64::INFINITY, DType::F32),
            "f32_bits(0x7f800000u)"
        );
        assert_eq!(
            d.constant(f64::NEG_INFINITY, DType::F32),
            "f32_bits(0xff800000u)"
        );
        assert!(d
            .constant(f64::NAN, DType::F32)
            .starts_with("f32_bits(0x7fc"));
        assert_eq!(d.constant(1e-40, DType::F32), "f32_bits(0x000116c2u)");
        assert_eq!(
            d.constant(i32::MIN as f64, DType::I32),
            "(-2147483647i - 1i)"
        );
        assert_eq!(d.constant(-3.0, DType::I32), "(-3i)");
        assert_eq!(d.constant(200.0, DType::U8), "200u");
        assert_eq!(d.constant(1.0, DType::Bool), "true");
        assert_eq!(int_lit("(-3i)"), Some(-3));
        assert_eq!(int_lit("7u"), Some(7));
        assert_eq!(int_lit("v7"), None);
    }
}

//! The CUDA dialect of the shared printer, for the `cuda` backend (compiled by NVRTC at run time,
//! `runtime::cuda`). Renderers need no device, so this source can be generated and compiled to
//! machine code on a machine without a GPU (tests/cuda.rs does, for every kernel).
//!
//! A kernel is `extern "C" __global__ void NAME(T *b0, const T *b1, ...)`, launched on a 1-D
//! grid of `BLOCK_SIZE`-thread blocks (`launch_dims`); each thread computes output element
//! `gidx = blockIdx.x * BLOCK_SIZE + threadIdx.x`, and threads past the end return at once.
//! A kernel with workgroups (`LinearKernel::local_size` > 1) is launched in blocks of that
//! size, one block per workgroup: `wgid = blockIdx.x`, `lidx = threadIdx.x`, its workgroup
//! arrays `__shared__`, a barrier `__syncthreads()` (every block is full, so all its threads
//! reach it), each phase in a block of its own. Four aligned elements move as one `float4`
//! (`int4`, `uint4`).
//!
//! Index math is `int`. The source is self-contained: NVRTC has no system headers, so there is
//! no `<math.h>` or `cuda_fp16.h`; it uses only the builtins NVRTC declares itself (`exp2f`,
//! `fmodf`, `__int_as_float`, ...).
//!
//! Storage is the host's layout, so buffers are byte-for-byte those of the other backends: f16
//! as its 16 bits (`unsigned short`, converted by `h2f` and the round-to-nearest-even `f2h`, one
//! PTX `cvt` each), bf16 likewise (`b2f`, `f2b`, on the bits), bool and u8 as bytes.
//! Registers: f16 and bf16 compute as f32, u8 is
//! an `unsigned char` (C's conversions wrap every result to 8 bits), bool a `bool`. Where C's
//! rules differ from the interpreter's (`ops::exec_*`), the rendering spells the interpreter's:
//! integer division and modulo by zero give 0, shifts take the amount mod 32 and shift the
//! 32-bit pattern (logical even for i32), float-to-integer casts truncate and saturate (NaN
//! gives 0, `render::c_float_to_int`).

use super::linearize::{Inst, LinearKernel};
use super::render::Renderer;
use crate::dtype::DType;
use crate::ops::{compute_dtype, BinaryOp, UnaryOp};
use std::fmt::Write;

/// Threads per block.
pub const BLOCK_SIZE: u32 = 256;

/// Blocks and threads per block of a kernel (one grid dimension: x holds 2^31 - 1 blocks, more
/// than a kernel's `i32` indexing can address): its workgroups, or blocks of `BLOCK_SIZE`.
pub fn launch_dims(k: &LinearKernel) -> (u32, u32) {
    let threads = if k.local_size > 1 {
        k.local_size as u32
    } else {
        BLOCK_SIZE
    };
    (k.global_size.div_ceil(threads as usize) as u32, threads)
}

/// The CUDA vector type of four elements of `dt`.
fn vec4(dt: DType) -> &'static str {
    match dt {
        DType::I32 => "int4",
        DType::U32 => "uint4",
        _ => "float4",
    }
}

/// f16 bits <-> f32 with the GPU's conversion instructions (what `cuda_fp16.h`'s `__half2float`
/// and `__float2half_rn` compile to: round to nearest even, inf past the largest f16), a NaN
/// made the quiet NaN the other backends give (`cvt` would give 0x7fff). Compiled for the host
/// (tests/cuda.rs runs kernels there), the C dialect's bit-exact helpers.
const F16_HELPERS: &str = r#"#ifdef __CUDA_ARCH__
__device__ __forceinline__ float h2f(unsigned short h) {
  float f; asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h)); return f;
}
__device__ __forceinline__ unsigned short f2h(float f) {
  unsigned short h; asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
  return f != f ? (unsigned short)(((__float_as_uint(f) >> 16) & 0x8000u) | 0x7e00u) : h;
}
#else
__device__ __forceinline__ float h2f(unsigned short h) {
  unsigned int sign = ((unsigned int)h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  if (e == 0) { float f = (float)m * 5.9604644775390625e-8f; return sign ? -f : f; }
  if (e == 31) return __uint_as_float(sign | 0x7f800000u | (m << 13));
  return __uint_as_float(sign | ((e + 112u) << 23) | (m << 13));
}
__device__ __forceinline__ unsigned short f2h(float f) {
  unsigned int x = __float_as_uint(f);
  unsigned int sign = (x >> 16) & 0x8000u, mant = x & 0x7fffffu;
  int exp = (int)((x >> 23) & 0xffu);
  if (exp == 255) return (unsigned short)(sign | 0x7c00u | (mant ? 0x200u : 0u));
  int e = exp - 112;
  if (e >= 31) return (unsigned short)(sign | 0x7c00u);
  if (e <= 0) {
    if (e < -10) return (unsigned short)sign;
    mant |= 0x800000u;
    unsigned int shift = (unsigned int)(14 - e), h = mant >> shift;
    unsigned int rem = mant & ((1u << shift) - 1u), half = 1u << (shift - 1u);
    if (rem > half || (rem == half && (h & 1u))) h++;
    return (unsigned short)(sign | h);
  }
  unsigned int h = ((unsigned int)e << 10) | (mant >> 13), rem = mant & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) h++;
  return (unsigned short)(sign | h);
}
#endif
"#;

/// The sum over aligned groups of `size` lanes of a warp (`size` a power of two up to 32): a
/// butterfly of register shuffles, every lane ending with its group's sum. Device code only.
const SUBGROUP_HELPERS: &str = r#"#ifdef __CUDA_ARCH__
template <typename T> __device__ __forceinline__ T sg_sum(T v, int size) {
  for (int o = size >> 1; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
#endif
"#;

/// bf16 bits <-> f32, bit-exact with the interpreter (`half`); the C dialect's helpers with the
/// bit casts CUDA provides (NVRTC has no `cuda_bf16.h`).
const BF16_HELPERS: &str = r#"__device__ __forceinline__ float b2f(unsigned short h) { return __uint_as_float((unsigned int)h << 16); }
__device__ __forceinline__ unsigned short f2b(float f) {
  unsigned int x = __float_as_uint(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return (unsigned short)((x >> 16) | 0x40u);
  return (unsigned short)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}
"#;

/// The CUDA dialect: self-contained CUDA C (NVRTC has no system headers) with `__shared__`
/// arrays and `__syncthreads` for workgroup memory.
pub struct CudaRenderer;

/// The CUDA dialect by name (`cuda`, files `.cu`).
pub const DIALECT: super::Dialect = super::Dialect {
    name: "cuda",
    ext: "cu",
    render: render_cuda,
};

/// Render a kernel as CUDA C++ for NVRTC.
pub fn render_cuda(k: &LinearKernel) -> String {
    super::render::render(k, &CudaRenderer)
}

fn storage(dt: DType) -> &'static str {
    match dt {
        DType::F32 => "float",
        DType::F16 | DType::BF16 => "unsigned short",
        DType::I32 => "int",
        DType::U32 => "unsigned int",
        DType::U8 | DType::Bool => "unsigned char",
    }
}

/// The value of an integer literal as this dialect prints it (`5`, `(-5)`, `7u`,
/// `(unsigned char)7`).
fn int_lit(s: &str) -> Option<i64> {
    let s = s.strip_prefix("(unsigned char)").unwrap_or(s);
    let s = s.trim_start_matches('(').trim_end_matches(')');
    s.strip_suffix('u').unwrap_or(s).parse().ok()
}

fn zero(dt: DType) -> &'static str {
    match dt {
        DType::F32 | DType::F16 | DType::BF16 => "0.0f",
        DType::U32 => "0u",
        DType::Bool => "false",
        DType::I32 | DType::U8 => "0",
    }
}

impl CudaRenderer {
    /// Integer division or modulo: by zero gives 0 (C leaves it undefined).
    fn int_divmod(sym: &str, dt: DType, a: &str, b: &str) -> String {
        match int_lit(b) {
            Some(0) => zero(dt).to_string(),
            Some(_) => format!("({a} {sym} {b})"),
            None => format!("({b} != 0 ? {a} {sym} {b} : {})", zero(dt)),
        }
    }
    /// The right operand of a shift, mod 32 like the interpreter.
    fn shift_amount(b: &str) -> String {
        match int_lit(b) {
            Some(v) => format!("{}", v & 31),
            None => format!("({b} & 31)"),
        }
    }
}

impl Renderer for CudaRenderer {
    fn fma(&self, a: &str, b: &str, c: &str) -> String {
        format!("fmaf({a}, {b}, {c})")
    }
    fn ty(&self, dt: DType) -> &'static str {
        match dt {
            DType::F32 | DType::F16 | DType::BF16 => "float",
            DType::I32 => "int",
            DType::U32 => "unsigned int",
            DType::U8 => "unsigned char",
            DType::Bool => "bool",
        }
    }
    fn prologue(&self, k: &LinearKernel) -> String {
        let n = k.global_size;
        let (blocks, threads) = launch_dims(k);
        let mut s = format!("// {}: {n} threads, {blocks} blocks of {threads}\n", k.name);
        for (dt, helpers) in [(DType::F16, F16_HELPERS), (DType::BF16, BF16_HELPERS)] {
            if k.uses_dtype(dt) {
                s.push_str(helpers);
            }
        }
        if k.insts
            .iter()
            .any(|i| matches!(i, Inst::SubgroupSum { .. }))
        {
            s.push_str(SUBGROUP_HELPERS);
        }
        let params: Vec<String> = k
            .bufs
            .iter()
            .enumerate()
            .map(|(i, b)| {
                let c = if b.writes { "" } else { "const " };
                format!("{c}{} *__restrict__ b{i}", storage(b.dtype))
            })
            .collect();
        if k.local_size > 1 {
            let _ = writeln!(
                s,
                "extern \"C\" __global__ void __launch_bounds__({threads}) {}({}) {{",
                k.name,
                params.join(", ")
            );
            for (i, (dt, len)) in k.shared.iter().enumerate() {
                let _ = writeln!(s, "    __shared__ {} s{i}[{len}];", self.ty(*dt));
            }
            s.push_str("    const int wgid = (int)blockIdx.x;\n    const int lidx = (int)threadIdx.x;\n    {\n");
            return s;
        }
        let _ = write!(
            s,
            "extern \"C\" __global__ void __launch_bounds__({BLOCK_SIZE}) {}({}) {{\n    \
             const unsigned int g = blockIdx.x * {BLOCK_SIZE}u + threadIdx.x;\n    \
             if (g >= {n}u) return;\n    \
             const int gidx = (int)g;\n",
            k.name,
            params.join(", ")
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
    fn subgroup_sum(&self, _dt: DType, a: &str, size: u32) -> String {
        format!("sg_sum({a}, {size})")
    }
    fn loop_barrier(&self) -> String {
        "__syncthreads();".into()
    }
    fn barrier(&self, _k: &LinearKernel) -> String {
        "}\n    __syncthreads();\n    {".into()
    }
    fn load_vec(&self, slot: u32, dt: DType, idx: &str) -> Option<(String, String)> {
        let v = vec4(dt);
        Some((v.into(), format!("*(const {v} *)(b{slot} + {idx})")))
    }
    fn lane(&self, v: &str, j: usize) -> String {
        format!("{v}.{}", ["x", "y", "z", "w"][j])
    }
    fn store_vec(&self, slot: u32, dt: DType, idx: &str, vals: &[String; 4]) -> Option<String> {
        let v = vec4(dt);
        Some(format!(
            "*({v} *)(b{slot} + {idx}) = {v}{{{}}};",
            vals.join(", ")
        ))
    }
    fn constant(&self, v: f64, dt: DType) -> String {
        match dt {
            DType::F32 | DType::F16 | DType::BF16 => {
                let f = v as f32;
                if !f.is_finite() {
                    // No INFINITY/NAN macros without <math.h>.
                    format!("__int_as_float(0x{:08x})", f.to_bits())
                } else if f.is_sign_negative() {
                    format!("({f:?}f)")
                } else {
                    format!("{f:?}f")
                }
            }
            // 2147483648 is out of range, so the minimum cannot be a negated literal.
            DType::I32 if v == i32::MIN as f64 => "(-2147483647 - 1)".into(),
            DType::I32 if v < 0.0 => format!("({})", v as i32),
            DType::I32 => format!("{}", v as i32),
            DType::U32 => format!("{}u", v as u32),
            DType::U8 => format!("(unsigned char){}", v as u8),
            DType::Bool => (v != 0.0).to_string(),
        }
    }
    fn unary(&self, op: UnaryOp, dt: DType, a: &str) -> String {
        let dt = compute_dtype(dt);
        match op {
            UnaryOp::Neg if dt == DType::Bool => a.to_string(),
            UnaryOp::Neg => format!("(-{a})"),
            // Integer transcendentals (not produced by the frontend) go through float and back
            // by the register's conversion.
            UnaryOp::Exp2 => format!("exp2f({a})"),
            UnaryOp::Log2 => format!("log2f({a})"),
            UnaryOp::Sin => format!("sinf({a})"),
            UnaryOp::Sqrt => format!("sqrtf({a})"),
            UnaryOp::Recip if dt.is_float() => format!("(1.0f / {a})"),
            UnaryOp::Recip if dt == DType::Bool => a.to_string(),
            UnaryOp::Recip => Self::int_divmod("/", dt, "1", a),
            UnaryOp::Trunc if dt.is_float() => format!("truncf({a})"),
            UnaryOp::Trunc => a.to_string(),
        }
    }
    fn binary(&self, op: BinaryOp, dt: DType, a: &str, b: &str) -> String {
        let dt = compute_dtype(dt);
        let f = dt.is_float();
        match op {
            BinaryOp::Add => format!("({a} + {b})"),
            BinaryOp::Mul => format!("({a} * {b})"),
            BinaryOp::Div if f => format!("({a} / {b})"),
            BinaryOp::Div => Self::int_divmod("/", dt, a, b),
            BinaryOp::Mod if f => format!("fmodf({a}, {b})"),
            BinaryOp::Mod => Self::int_divmod("%", dt, a, b),
            BinaryOp::Max if f => format!("fmaxf({a}, {b})"),
            BinaryOp::Max => format!("({a} > {b} ? {a} : {b})"),
            BinaryOp::CmpLt => format!("({a} < {b})"),
            BinaryOp::CmpEq => format!("({a} == {b})"),
            BinaryOp::CmpNe => format!("({a} != {b})"),
            BinaryOp::And => format!("({a} & {b})"),
            BinaryOp::Or => format!("({a} | {b})"),
            BinaryOp::Xor => format!("({a} ^ {b})"),
            // Shifted as unsigned: a signed left shift into the sign bit is undefined in C++17.
            BinaryOp::Shl if dt == DType::U32 => format!("({a} << {})", Self::shift_amount(b)),
            BinaryOp::Shl if dt == DType::I32 => {
                format!("(int)((unsigned int){a} << {})", Self::shift_amount(b))
            }
            BinaryOp::Shl => format!("((unsigned int){a} << {})", Self::shift_amount(b)),
            // The interpreter shifts the 32-bit pattern: logical even for i32.
            BinaryOp::Shr if dt == DType::I32 => {
                format!("(int)((unsigned int){a} >> {})", Self::shift_amount(b))
            }
            BinaryOp::Shr => format!("({a} >> {})", Self::shift_amount(b)),
        }
    }
    fn cast(&self, from: DType, to: DType, a: &str) -> String {
        let from = compute_dtype(from);
        match to {
            DType::F32 if from.is_float() => a.to_string(),
            DType::F16 => format!("h2f(f2h((float){a}))"),
            DType::BF16 => format!("b2f(f2b((float){a}))"),
            DType::Bool if from == DType::Bool => a.to_string(),
            DType::Bool => format!("({a} != {})", zero(from)),
            _ if from.is_float() => super::render::c_float_to_int(to, self.ty(to), a)
                .unwrap_or_else(|| format!("({}){a}", self.ty(to))),
            _ if from == to => a.to_string(),
            _ => format!("({}){a}", self.ty(to)),
        }
    }
    fn load(&self, slot: u32, dt: DType, idx: &str) -> String {
        match dt {
            DType::F16 => format!("h2f(b{slot}[{idx}])"),
            DType::BF16 => format!("b2f(b{slot}[{idx}])"),
            DType::Bool => format!("(b{slot}[{idx}] != 0)"),
            _ => format!("b{slot}[{idx}]"),
        }
    }
    fn store(&self, slot: u32, dt: DType, idx: &str, val: &str) -> String {
        match dt {
            DType::F16 => format!("b{slot}[{idx}] = f2h({val});"),
            DType::BF16 => format!("b{slot}[{idx}] = f2b({val});"),
            _ => format!("b{slot}[{idx}] = {val};"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sized(global_size: usize, local_size: usize) -> LinearKernel {
        LinearKernel {
            name: "k".into(),
            insts: vec![],
            bufs: vec![],
            global_size,
            local_size,
            shared: vec![],
            nregs: 0,
        }
    }

    #[test]
    fn launch_dims_cover_the_range() {
        let dims = |n| launch_dims(&sized(n, 1));
        assert_eq!(dims(0), (0, BLOCK_SIZE));
        assert_eq!(dims(1), (1, BLOCK_SIZE));
        assert_eq!(dims(256), (1, BLOCK_SIZE));
        assert_eq!(dims(257), (2, BLOCK_SIZE));
        let (b, t) = dims(i32::MAX as usize);
        assert!(b as u64 * t as u64 >= i32::MAX as u64 && b < i32::MAX as u32);
        // A kernel with workgroups: one block per workgroup.
        assert_eq!(launch_dims(&sized(96 * 64, 64)), (96, 64));
    }

    #[test]
    fn constants_are_valid_cuda_literals() {
        let d = CudaRenderer;
        assert_eq!(d.constant(1.0, DType::F32), "1.0f");
        assert_eq!(d.constant(-0.5, DType::F16), "(-0.5f)");
        assert_eq!(d.constant(-0.0, DType::F32), "(-0.0f)");
        assert_eq!(d.constant(1e-40, DType::F32), "1e-40f");
        assert_eq!(
            d.constant(f64::INFINITY, DType::F32),
            "__int_as_float(0x7f800000)"
        );
        assert_eq!(
            d.constant(f64::NEG_INFINITY, DType::F32),
            "__int_as_float(0xff800000)"
        );
        assert!(d
            .constant(f64::NAN, DType::F32)
            .starts_with("__int_as_float(0x7fc"));
        assert_eq!(d.constant(i32::MIN as f64, DType::I32), "(-2147483647 - 1)");
        assert_eq!(d.constant(-3.0, DType::I32), "(-3)");
        assert_eq!(d.constant(7.0, DType::U32), "7u");
        assert_eq!(d.constant(200.0, DType::U8), "(unsigned char)200");
        assert_eq!(d.constant(1.0, DType::Bool), "true");
        for (s, v) in [
            ("(-3)", Some(-3)),
            ("7u", Some(7)),
            ("(unsigned char)9", Some(9)),
        ] {
            assert_eq!(int_lit(s), v, "{s}");
        }
        assert_eq!(int_lit("v7"), None);
        assert_eq!(int_lit("1.0f"), None);
    }

    #[test]
    fn integer_edge_cases_spell_the_interpreters_rules() {
        let d = CudaRenderer;
        assert_eq!(
            d.binary(BinaryOp::Div, DType::I32, "a", "b"),
            "(b != 0 ? a / b : 0)"
        );
        assert_eq!(d.binary(BinaryOp::Mod, DType::U32, "a", "0u"), "0u");
        assert_eq!(
            d.binary(BinaryOp::Div, DType::I32, "a", "(-4)"),
            "(a / (-4))"
        );
        assert_eq!(
            d.binary(BinaryOp::Shr, DType::I32, "a", "b"),
            "(int)((unsigned int)a >> (b & 31))"
        );
        assert_eq!(d.binary(BinaryOp::Shl, DType::U32, "a", "33u"), "(a << 1)");
        assert_eq!(
            d.cast(DType::F32, DType::U32, "x"),
            "(x > -1.0 ? (x >= 4294967296.0 ? 4294967295u : (unsigned int)x) : 0u)"
        );
        assert_eq!(d.cast(DType::F16, DType::F32, "x"), "x");
        assert_eq!(d.cast(DType::I32, DType::Bool, "x"), "(x != 0)");
    }
}

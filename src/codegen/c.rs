//! The C dialect of the shared printer, for the `cpu` backend. A kernel is
//! `void NAME(void **bufs, int gstart, int gend)` running the body for `gidx` in
//! `[gstart, gend)`, so the runtime can split the global range across threads. A kernel with
//! workgroups runs workgroups `wgid` in `[gstart, gend)`, each as a loop over its invocations
//! `lidx` per phase: a barrier ends one loop and starts the next, and the workgroup arrays are
//! locals of the workgroup's iteration.

use super::linearize::LinearKernel;
use super::render::Renderer;
use crate::dtype::DType;
use crate::ops::{BinaryOp, UnaryOp};

/// The C dialect: kernels as plain C functions over pointers for the system C compiler, with
/// the outer loop over invocations (run on worker threads) and GCC vector types of up to
/// `lanes` f32 lanes (`VECTOR_LANES`, or 16 where the machine has AVX-512: `Target::lanes`).
#[derive(Clone, Copy, Debug)]
pub struct CRenderer {
    /// The f32 lanes of the widest vectors (8 or 16).
    pub lanes: usize,
}

impl Default for CRenderer {
    fn default() -> Self {
        CRenderer {
            lanes: VECTOR_LANES,
        }
    }
}

/// The C dialect by name (`c`, files `.c`).
pub const DIALECT: super::Dialect = super::Dialect {
    name: "c",
    ext: "c",
    render: render_c,
};

/// Render a kernel as C for the system compiler, with vectors of `VECTOR_LANES` (the `cpu`
/// backend renders for its machine's `Target::lanes`).
pub fn render_c(k: &LinearKernel) -> String {
    super::render::render(k, &CRenderer::default())
}

/// Lanes of the vectors accumulators are kept in (`vectorize.rs`) by default: 256-bit, which
/// AVX2 and AVX-512 machines run natively and the compiler splits elsewhere (and 128-bit for
/// the leftover runs). Machines with AVX-512 get 512-bit ones too (`Target::lanes`): their two
/// 512-bit FMA units do twice the multiply-adds per cycle.
pub const VECTOR_LANES: usize = 8;

/// The helpers every C kernel starts with (a batch of kernels compiled together has them
/// once).
pub const PRELUDE: &str = r#"#include <math.h>
#include <string.h>
/* 512-bit vectors serve machines with AVX-512 (`Target::lanes` 16); elsewhere none is used. */
typedef float v16f __attribute__((vector_size(64)));
typedef float v8f __attribute__((vector_size(32)));
typedef float v4f __attribute__((vector_size(16)));
static inline v16f ld16(const float *p) { v16f v; memcpy(&v, p, sizeof v); return v; }
static inline void st16(float *p, v16f v) { memcpy(p, &v, sizeof v); }
static inline v8f ld8(const float *p) { v8f v; memcpy(&v, p, sizeof v); return v; }
static inline v4f ld4(const float *p) { v4f v; memcpy(&v, p, sizeof v); return v; }
static inline void st8(float *p, v8f v) { memcpy(p, &v, sizeof v); }
static inline void st4(float *p, v4f v) { memcpy(p, &v, sizeof v); }
typedef unsigned char v16b __attribute__((vector_size(16)));
typedef unsigned char v8b __attribute__((vector_size(8)));
typedef unsigned char v4b __attribute__((vector_size(4)));
static inline v16f ldb16(const unsigned char *p) { v16b v; memcpy(&v, p, sizeof v); return __builtin_convertvector(v, v16f); }
static inline v8f ldb8(const unsigned char *p) { v8b v; memcpy(&v, p, sizeof v); return __builtin_convertvector(v, v8f); }
static inline v4f ldb4(const unsigned char *p) { v4b v; memcpy(&v, p, sizeof v); return __builtin_convertvector(v, v4f); }
/* Fused multiply-adds, each lane rounded once (as fmaf): the target's instruction where it has
   one (a builtin: <immintrin.h> would add 0.15 s to every kernel's compile), fmaf lane by lane
   elsewhere. */
#if defined(__AVX512F__)
static inline v16f fma16(v16f a, v16f b, v16f c) { return __builtin_ia32_vfmaddps512_mask(a, b, c, (unsigned short)-1, 4); }
#else
static inline v16f fma16(v16f a, v16f b, v16f c) { for (int i = 0; i < 16; i++) c[i] = fmaf(a[i], b[i], c[i]); return c; }
#endif
#if defined(__FMA__)
static inline v8f fma8(v8f a, v8f b, v8f c) { return __builtin_ia32_vfmaddps256(a, b, c); }
static inline v4f fma4(v4f a, v4f b, v4f c) { return __builtin_ia32_vfmaddps(a, b, c); }
#else
static inline v8f fma8(v8f a, v8f b, v8f c) { for (int i = 0; i < 8; i++) c[i] = fmaf(a[i], b[i], c[i]); return c; }
static inline v4f fma4(v4f a, v4f b, v4f c) { for (int i = 0; i < 4; i++) c[i] = fmaf(a[i], b[i], c[i]); return c; }
#endif
typedef int v16i __attribute__((vector_size(64)));
typedef int v8i __attribute__((vector_size(32)));
typedef int v4i __attribute__((vector_size(16)));
/* Every other element (a pooling window's columns), from two vector loads (GCC before 12 has
   only its own spelling of the shuffle). */
#if defined(__clang__) || __GNUC__ >= 12
static inline v16f lds16(const float *p) { return __builtin_shufflevector(ld16(p), ld16(p + 16), 0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30); }
static inline v8f lds8(const float *p) { return __builtin_shufflevector(ld8(p), ld8(p + 8), 0, 2, 4, 6, 8, 10, 12, 14); }
static inline v4f lds4(const float *p) { return __builtin_shufflevector(ld4(p), ld4(p + 4), 0, 2, 4, 6); }
#else
static inline v16f lds16(const float *p) { return __builtin_shuffle(ld16(p), ld16(p + 16), (v16i){0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30}); }
static inline v8f lds8(const float *p) { return __builtin_shuffle(ld8(p), ld8(p + 8), (v8i){0, 2, 4, 6, 8, 10, 12, 14}); }
static inline v4f lds4(const float *p) { return __builtin_shuffle(ld4(p), ld4(p + 4), (v4i){0, 2, 4, 6}); }
#endif
/* Comparisons of float vectors give int vectors of all-ones or zero lanes: selects by bits,
   1.0f or 0.0f from a mask, and fmx lane by lane. */
static inline v16f sel16(v16i m, v16f a, v16f b) { return (v16f)((m & (v16i)a) | (~m & (v16i)b)); }
static inline v8f sel8(v8i m, v8f a, v8f b) { return (v8f)((m & (v8i)a) | (~m & (v8i)b)); }
static inline v4f sel4(v4i m, v4f a, v4f b) { return (v4f)((m & (v4i)a) | (~m & (v4i)b)); }
static inline v16f msk16(v16i m) { return __builtin_convertvector(-m, v16f); }
static inline v8f msk8(v8i m) { return __builtin_convertvector(-m, v8f); }
static inline v4f msk4(v4i m) { return __builtin_convertvector(-m, v4f); }
static inline v16f vmx16(v16f a, v16f b) { return sel16((a > b) | (b != b), a, b); }
static inline v8f vmx8(v8f a, v8f b) { return sel8((a > b) | (b != b), a, b); }
static inline v4f vmx4(v4f a, v4f b) { return sel4((a > b) | (b != b), a, b); }
#if defined(__AVX512F__)
#define PIN(v) __asm__("" : "+v"(v))
#elif defined(__AVX__)
#define PIN(v) __asm__("" : "+x"(v))
#else
#define PIN(v) ((void)0)
#endif
static inline float fmx(float a, float b) { return (a > b || b != b) ? a : b; }
/* 2^x without a library call, so that loops over it vectorize (GCC vectorizes no libm call
   under these flags), as a scalar and on vectors, lane by lane the same operations (so a
   vectorized accumulator sums what the scalar code would): x at most 129 (beyond, 2^x is inf
   anyway), n = x rounded to an integer (adding and subtracting 1.5 * 2^23), 2^(x - n) for
   x - n in [-0.5, 0.5] by a degree-6 polynomial (Cephes exp2f's; within 1.3 ulp of 2^x), then
   2^n applied as two exact powers of two, so subnormal results round once. At or below -150
   (2^x rounds to 0; a masked softmax's -inf) and for a NaN, the polynomial runs on 0 and the
   result is selected: a product that underflows costs Intel cores a microcode assist of about
   a hundred cycles, which made half of a causal softmax's lanes 4x slower. */
static inline float bitsf(int b) { float f; memcpy(&f, &b, 4); return f; }
#define EXP2_FN(NAME, T, I, SPL, SEL, CVT, BITS) \
static inline T NAME(T x) { \
  T c = SEL(x > SPL(-150.0f), x, SPL(0.0f)); c = SEL(c < SPL(129.0f), c, SPL(129.0f)); \
  T n = (c + SPL(12582912.0f)) - SPL(12582912.0f), f = c - n, p = SPL(1.535336188319500e-4f); \
  p = p * f + SPL(1.339887440266574e-3f); p = p * f + SPL(9.618437357674640e-3f); \
  p = p * f + SPL(5.550332471162809e-2f); p = p * f + SPL(2.402264791363012e-1f); \
  p = p * f + SPL(6.931472028550421e-1f); p = p * f + SPL(1.0f); \
  I i = CVT(n), h = i >> 1; \
  T y = p * BITS((h + 127) << 23) * BITS((i - h + 127) << 23); \
  return SEL(x > SPL(-150.0f), y, SEL(x == x, SPL(0.0f), x)); \
}
#define SPL1(a) (a)
#define SEL1(m, a, b) ((m) ? (a) : (b))
#define SPL16(a) ((v16f){0} + (a))
#define SPL8(a) ((v8f){0} + (a))
#define SPL4(a) ((v4f){0} + (a))
#define CVT16(v) __builtin_convertvector(v, v16i)
#define CVT8(v) __builtin_convertvector(v, v8i)
#define CVT4(v) __builtin_convertvector(v, v4i)
EXP2_FN(wexp2f, float, int, SPL1, SEL1, (int), bitsf)
EXP2_FN(exp2v16, v16f, v16i, SPL16, sel16, CVT16, (v16f))
EXP2_FN(exp2v8, v8f, v8i, SPL8, sel8, CVT8, (v8f))
EXP2_FN(exp2v4, v4f, v4i, SPL4, sel4, CVT4, (v4f))
/* f16 <-> f32: the F16C instructions where the target has them (branch-free, one instruction
   each, round to nearest even), else bit by bit. */
#if defined(__F16C__)
typedef short v8s __attribute__((vector_size(16)));
static inline float h2f(unsigned short h) { return __builtin_ia32_vcvtph2ps((v8s){(short)h})[0]; }
static inline unsigned short f2h(float f) { return (unsigned short)__builtin_ia32_vcvtps2ph((v4f){f}, 0)[0]; }
#else
static inline float h2f(unsigned short h) {
  unsigned int sign = ((unsigned int)h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu, x;
  if (e == 0) { float f = (float)m * 5.9604644775390625e-8f; return sign ? -f : f; }
  if (e == 31) x = sign | 0x7f800000u | (m << 13); else x = sign | ((e + 112u) << 23) | (m << 13);
  float f; memcpy(&f, &x, 4); return f;
}
static inline unsigned short f2h(float f) {
  unsigned int x; memcpy(&x, &f, 4);
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
/* bf16 is the top half of an f32. Rounding to nearest even adds just under half an ulp, plus
   the kept lowest bit (a carry reaches the exponent: past the largest bf16 gives inf); a NaN
   keeps its top bits, made quiet so that it cannot truncate to inf. */
static inline float b2f(unsigned short h) { unsigned int x = (unsigned int)h << 16; float f; memcpy(&f, &x, 4); return f; }
static inline unsigned short f2b(float f) {
  unsigned int x; memcpy(&x, &f, 4);
  if ((x & 0x7fffffffu) > 0x7f800000u) return (unsigned short)((x >> 16) | 0x40u);
  return (unsigned short)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}
"#;

/// `const ` for a buffer the kernel only reads.
fn buf_const(writes: bool) -> &'static str {
    if writes {
        ""
    } else {
        "const "
    }
}

fn signed(dt: DType) -> bool {
    dt == DType::I32
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

impl Renderer for CRenderer {
    fn ty(&self, dt: DType) -> &'static str {
        match dt {
            DType::F32 | DType::F16 | DType::BF16 => "float",
            DType::I32 => "int",
            DType::U32 => "unsigned int",
            DType::U8 => "unsigned char",
            DType::Bool => "_Bool",
        }
    }
    fn prologue(&self, k: &LinearKernel) -> String {
        // The body is a static function of restrict-qualified parameters, which GCC trusts
        // (restrict locals copied from `bufs` it does not, for gathered loads: it versions the
        // loop for aliasing, and a loop loading `x[i / 64]` then is not vectorized at all).
        let mut s = String::from(PRELUDE);
        let params: Vec<String> = k
            .bufs
            .iter()
            .enumerate()
            .map(|(i, b)| format!("{}{} *restrict b{i}", buf_const(b.writes), storage(b.dtype)))
            .chain(["int gstart".into(), "int gend".into()])
            .collect();
        s.push_str(&format!(
            "static void {}_body({}) {{\n",
            k.name,
            params.join(", ")
        ));
        if k.local_size > 1 {
            s.push_str("  for (int wgid = gstart; wgid < gend; wgid++) {\n");
            for (i, (dt, n)) in k.shared.iter().enumerate() {
                s.push_str(&format!("    {} s{i}[{n}];\n", self.ty(*dt)));
            }
            s.push_str(&format!(
                "    for (int lidx = 0; lidx < {}; lidx++) {{\n",
                k.local_size
            ));
        } else {
            s.push_str("  for (int gidx = gstart; gidx < gend; gidx++) {\n");
        }
        s
    }
    fn epilogue(&self, k: &LinearKernel) -> String {
        let close = if k.local_size > 1 {
            "    }\n  }\n}\n"
        } else {
            "  }\n}\n"
        };
        let args: Vec<String> = k
            .bufs
            .iter()
            .enumerate()
            .map(|(i, b)| format!("({}{} *)bufs[{i}]", buf_const(b.writes), storage(b.dtype)))
            .chain(["gstart".into(), "gend".into()])
            .collect();
        format!(
            "{close}void {0}(void **bufs, int gstart, int gend) {{\n  {0}_body({1});\n}}\n",
            k.name,
            args.join(", ")
        )
    }
    /// C runs a workgroup's invocations one after another: no subgroups (its target has none;
    /// source given one fails to compile, saying why).
    fn subgroup_sum(&self, _dt: DType, a: &str, _size: u32) -> String {
        format!(
            "(__extension__ ({{ _Static_assert(0, \"the C dialect has no subgroups\"); {a}; }}))"
        )
    }
    /// C runs a workgroup's invocations one after another, phase by phase, which a barrier
    /// inside a loop cannot split: the optimizer stages tiles only for targets with
    /// `Target::tiles`, and C source given one fails to compile, saying why.
    fn loop_barrier(&self) -> String {
        "\n#error \"the C dialect has no barrier inside a loop (a staged reduce)\"\n".into()
    }
    fn barrier(&self, k: &LinearKernel) -> String {
        format!(
            "}}\n    for (int lidx = 0; lidx < {}; lidx++) {{",
            k.local_size
        )
    }
    fn constant(&self, v: f64, dt: DType) -> String {
        match dt {
            DType::F32 | DType::F16 | DType::BF16 => {
                if v.is_nan() {
                    "NAN".into()
                } else if v.is_infinite() {
                    if v > 0.0 {
                        "INFINITY".into()
                    } else {
                        "(-INFINITY)".into()
                    }
                } else {
                    format!("{:?}f", v as f32)
                }
            }
            DType::I32 if v == i32::MIN as f64 => "(-2147483647-1)".into(),
            DType::I32 => format!("{}", v as i32),
            DType::U32 => format!("{}u", v as u32),
            DType::U8 => format!("(unsigned char){}", v as u8),
            DType::Bool => format!("{}", (v != 0.0) as u8),
        }
    }
    fn unary(&self, op: UnaryOp, dt: DType, a: &str) -> String {
        match op {
            UnaryOp::Neg => format!("(-{a})"),
            UnaryOp::Exp2 => format!("wexp2f({a})"),
            UnaryOp::Log2 => format!("log2f({a})"),
            UnaryOp::Sin => format!("sinf({a})"),
            UnaryOp::Sqrt => format!("sqrtf({a})"),
            UnaryOp::Recip if dt.is_float() => format!("(1.0f / {a})"),
            UnaryOp::Recip => format!("({a} != 0 ? 1 / {a} : 0)"),
            UnaryOp::Trunc if dt.is_float() => format!("truncf({a})"),
            UnaryOp::Trunc => a.to_string(),
        }
    }
    fn binary(&self, op: BinaryOp, dt: DType, a: &str, b: &str) -> String {
        let f = dt.is_float();
        match op {
            BinaryOp::Add => format!("({a} + {b})"),
            BinaryOp::Mul => format!("({a} * {b})"),
            BinaryOp::Div if f => format!("({a} / {b})"),
            // Integer division by 0 gives 0, and INT_MIN / -1 wraps (in C both are undefined,
            // and on x86 they trap: SIGFPE).
            BinaryOp::Div if b.parse::<i64>().is_ok_and(|v| v > 0) => format!("({a} / {b})"),
            BinaryOp::Div if signed(dt) => {
                format!("({b} == -1 ? (int)(0u - (unsigned int){a}) : {b} != 0 ? {a} / {b} : 0)")
            }
            BinaryOp::Div => format!("({b} != 0 ? {a} / {b} : 0)"),
            BinaryOp::Mod if f => format!("fmodf({a}, {b})"),
            BinaryOp::Mod if b.parse::<i64>().is_ok_and(|v| v > 0) => format!("({a} % {b})"),
            BinaryOp::Mod if signed(dt) => format!("({b} != 0 && {b} != -1 ? {a} % {b} : 0)"),
            BinaryOp::Mod => format!("({b} != 0 ? {a} % {b} : 0)"),
            // fmaxf's NaN rule (a NaN operand gives the other) inline: GCC makes fmaxf a
            // library call, which made the max-pooling kernel 2x slower.
            BinaryOp::Max if f => format!("fmx({a}, {b})"),
            BinaryOp::Max => format!("({a} > {b} ? {a} : {b})"),
            BinaryOp::CmpLt => format!("({a} < {b})"),
            BinaryOp::CmpEq => format!("({a} == {b})"),
            BinaryOp::CmpNe => format!("({a} != {b})"),
            BinaryOp::And => format!("({a} & {b})"),
            BinaryOp::Or => format!("({a} | {b})"),
            BinaryOp::Xor => format!("({a} ^ {b})"),
            // The interpreter shifts the 32-bit pattern: logical even for signed integers (and
            // in C a left shift of a negative value is undefined).
            BinaryOp::Shl if signed(dt) => format!("(int)((unsigned int){a} << ({b} & 31))"),
            BinaryOp::Shl => format!("({a} << ({b} & 31))"),
            BinaryOp::Shr if signed(dt) => format!("(int)((unsigned int){a} >> ({b} & 31))"),
            BinaryOp::Shr => format!("({a} >> ({b} & 31))"),
        }
    }
    fn vector_width(&self) -> usize {
        self.lanes
    }
    fn vec_ty(&self, width: usize) -> String {
        format!("v{width}f")
    }
    fn fma(&self, a: &str, b: &str, c: &str) -> String {
        format!("fmaf({a}, {b}, {c})")
    }
    fn vec_fma(&self, a: &str, b: &str, c: &str, width: usize) -> String {
        format!("fma{width}({a}, {b}, {c})")
    }
    fn vec_store(&self, slot: u32, idx: &str, val: &str, width: usize) -> Option<String> {
        Some(format!("st{width}(b{slot} + {idx}, {val});"))
    }
    fn vec_unary(&self, op: UnaryOp, a: &str, width: usize) -> String {
        match op {
            UnaryOp::Exp2 => format!("exp2v{width}({a})"),
            _ => self.unary(op, DType::F32, a),
        }
    }
    fn vec_max(&self, a: &str, b: &str, width: usize) -> String {
        format!("vmx{width}({a}, {b})")
    }
    fn vec_select(&self, m: &str, a: &str, b: &str, width: usize) -> String {
        format!("sel{width}({m}, {a}, {b})")
    }
    fn vec_let(&self, name: &str, expr: &str) -> String {
        format!("const __typeof__({expr}) {name} = {expr};")
    }
    fn vec_int_cmp(&self, op: BinaryOp, a: &[String], b: &[String], width: usize) -> String {
        let v = |l: &[String]| {
            let mut l = l.to_vec();
            l.resize(width, "0".into());
            format!("((v{width}i){{{}}})", l.join(", "))
        };
        self.binary(op, DType::I32, &v(a), &v(b))
    }
    fn vec_splat_mask(&self, m: &str, width: usize) -> String {
        // All ones where `m` holds, as a comparison's lanes are.
        format!("((v{width}i){{0}} - (int)({m}))")
    }
    fn vec_not(&self, m: &str, _width: usize) -> String {
        format!("(~{m})")
    }
    fn vec_mask(&self, m: &str, width: usize) -> String {
        format!("msk{width}({m})")
    }
    fn vec_load(&self, slot: u32, dt: DType, idx: &str, width: usize, stride: i64) -> String {
        match (dt, stride) {
            (DType::U8, _) => format!("ldb{width}(b{slot} + {idx})"),
            (_, 2) => format!("lds{width}(b{slot} + {idx})"),
            _ => format!("ld{width}(b{slot} + {idx})"),
        }
    }
    fn vec_pin(&self, name: &str) -> Option<String> {
        Some(format!("PIN({name});"))
    }
    fn vec_gather(&self, lanes: &[String], width: usize) -> String {
        let mut l = lanes.to_vec();
        l.resize(width, "0.0f".into());
        format!("((v{width}f){{{}}})", l.join(", "))
    }
    fn cast(&self, from: DType, to: DType, a: &str) -> String {
        match to {
            DType::F16 => format!("h2f(f2h((float){a}))"),
            DType::BF16 => format!("b2f(f2b((float){a}))"),
            DType::Bool => format!("({a} != 0)"),
            _ if from.is_float() => super::render::c_float_to_int(to, self.ty(to), a)
                .unwrap_or_else(|| format!("({}){a}", self.ty(to))),
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

    #[test]
    fn renders_a_reduce_kernel() {
        // out[i] = sum_r in[i*4 + r] for an f16 input.
        let k = crate::codegen::linearize::f16_row_sums(1);
        let src = crate::codegen::render::render(&k, &CRenderer::default());
        assert!(
            src.contains("void r_3(void **bufs, int gstart, int gend)"),
            "{src}"
        );
        assert!(src.contains("const unsigned short *restrict b1"), "{src}");
        assert!(src.contains("for (int r"), "{src}");
        assert!(src.contains("h2f(b1["), "{src}");
        assert!(src.contains("b0[gidx] = acc"), "{src}");
    }
}

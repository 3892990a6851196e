//! Data types of tensors and the host-side element conversions used by `from_vec` / `to_vec`.

use half::{bf16, f16};
use std::fmt;

/// The element type of a tensor. `Bool` and `U8` take one byte, `F16` and `BF16` two, the rest
/// four. The 16-bit floats are storage types: arithmetic on them is carried out in f32
/// (`ops::compute_dtype`) and rounded when stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DType {
    /// True or false, one byte (packed four to a u32 word on WebGPU).
    Bool,
    /// Unsigned 8-bit integer (MNIST pixels), one byte.
    U8,
    /// Signed 32-bit integer: indices, labels, `arange`.
    I32,
    /// Unsigned 32-bit integer: random bits, bitwise ops.
    U32,
    /// IEEE half precision, stored in two bytes, computed in f32.
    F16,
    /// bfloat16 (f32's exponent, 7 mantissa bits), stored in two bytes, computed in f32.
    BF16,
    /// IEEE single precision: the default dtype of floating tensors.
    F32,
}

impl DType {
    /// Bytes per element: 1, 2 or 4.
    pub fn size(self) -> usize {
        match self {
            DType::Bool | DType::U8 => 1,
            DType::F16 | DType::BF16 => 2,
            DType::I32 | DType::U32 | DType::F32 => 4,
        }
    }
    /// `F16`, `BF16` or `F32`.
    pub fn is_float(self) -> bool {
        matches!(self, DType::F16 | DType::BF16 | DType::F32)
    }
    /// `U8`, `I32` or `U32` (not `Bool`).
    pub fn is_int(self) -> bool {
        matches!(self, DType::U8 | DType::I32 | DType::U32)
    }
    /// `U8`, `U32` and `Bool`: the types with no negative values.
    pub fn is_unsigned(self) -> bool {
        matches!(self, DType::U8 | DType::U32 | DType::Bool)
    }
    /// The short name (`"f32"`, `"u8"`, …), which `Display` prints and `FromStr` parses.
    pub fn name(self) -> &'static str {
        match self {
            DType::Bool => "bool",
            DType::U8 => "u8",
            DType::I32 => "i32",
            DType::U32 => "u32",
            DType::F16 => "f16",
            DType::BF16 => "bf16",
            DType::F32 => "f32",
        }
    }
    /// The dtype two operands are promoted to (numpy-like, restricted to our types): two
    /// different floats meet in f32 (f16 with bf16 too, as in PyTorch).
    pub fn promote(a: DType, b: DType) -> DType {
        if a == b {
            return a;
        }
        match (a.is_float(), b.is_float()) {
            (true, true) => DType::F32,
            (true, false) => a,
            (false, true) => b,
            _ => a.max(b),
        }
    }
    /// Round a value held as f64 to what this dtype can hold (wrapping for integers).
    pub fn normalize(self, v: f64) -> f64 {
        match self {
            DType::Bool => (v != 0.0) as u8 as f64,
            DType::U8 => (trunc_i64(v) as u8) as f64,
            DType::I32 => (trunc_i64(v) as i32) as f64,
            DType::U32 => (trunc_i64(v) as u32) as f64,
            DType::F16 => f16::from_f64(v).to_f64(),
            DType::BF16 => to_bf16(v).to_f64(),
            DType::F32 => v as f32 as f64,
        }
    }
    /// Smallest value representable (used as the identity of max reductions).
    pub fn min_value(self) -> f64 {
        match self {
            DType::Bool | DType::U8 | DType::U32 => 0.0,
            DType::I32 => i32::MIN as f64,
            DType::F16 | DType::BF16 | DType::F32 => f64::NEG_INFINITY,
        }
    }
}

/// An f64 rounded to bf16 through f32 (as PyTorch converts a double): `half`'s direct f64
/// conversion ignores the low 32 bits of the mantissa when it breaks ties, which rounds some
/// f32 values the wrong way.
fn to_bf16(v: f64) -> bf16 {
    bf16::from_f32(v as f32)
}

fn trunc_i64(v: f64) -> i64 {
    if v.is_nan() {
        0
    } else {
        v.trunc().clamp(i64::MIN as f64, i64::MAX as f64) as i64
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for DType {
    type Err = crate::Error;
    fn from_str(s: &str) -> crate::Result<DType> {
        Ok(match s.to_ascii_lowercase().as_str() {
            "bool" => DType::Bool,
            "u8" | "uint8" | "uchar" => DType::U8,
            "i32" | "int32" | "int" => DType::I32,
            "u32" | "uint32" => DType::U32,
            "f16" | "float16" | "half" => DType::F16,
            "bf16" | "bfloat16" => DType::BF16,
            "f32" | "float32" | "float" => DType::F32,
            _ => crate::error::bail!(
                DType,
                "unknown dtype '{s}' (expected f32, f16, bf16, i32, u32, u8 or bool)"
            ),
        })
    }
}

/// A Rust scalar type that maps to a `DType`.
pub trait Element: Copy + Send + Sync + 'static {
    /// The tensor dtype this Rust type is stored as.
    const DTYPE: DType;
    /// The value as f64 (exact for every supported type).
    fn to_f64(self) -> f64;
    /// The value `v` rounded (floats) or wrapped (integers) to this type.
    fn from_f64(v: f64) -> Self;
    /// Append the little-endian bytes of the value, as a buffer holds it.
    fn write_le(self, out: &mut Vec<u8>);
    /// Read one value from the first `DType::size` little-endian bytes of `bytes`.
    fn read_le(bytes: &[u8]) -> Self;
}

macro_rules! element {
    ($t:ty, $d:ident) => {
        impl Element for $t {
            const DTYPE: DType = DType::$d;
            fn to_f64(self) -> f64 {
                self as f64
            }
            fn from_f64(v: f64) -> Self {
                DType::$d.normalize(v) as $t
            }
            fn write_le(self, out: &mut Vec<u8>) {
                out.extend_from_slice(&self.to_le_bytes())
            }
            fn read_le(b: &[u8]) -> Self {
                <$t>::from_le_bytes(b.try_into().expect("element width"))
            }
        }
    };
}
element!(f32, F32);
element!(i32, I32);
element!(u32, U32);
element!(u8, U8);

impl Element for f16 {
    const DTYPE: DType = DType::F16;
    fn to_f64(self) -> f64 {
        self.to_f64()
    }
    fn from_f64(v: f64) -> Self {
        f16::from_f64(v)
    }
    fn write_le(self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.to_le_bytes())
    }
    fn read_le(b: &[u8]) -> Self {
        f16::from_le_bytes([b[0], b[1]])
    }
}

impl Element for bf16 {
    const DTYPE: DType = DType::BF16;
    fn to_f64(self) -> f64 {
        self.to_f64()
    }
    fn from_f64(v: f64) -> Self {
        to_bf16(v)
    }
    fn write_le(self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.to_le_bytes())
    }
    fn read_le(b: &[u8]) -> Self {
        bf16::from_le_bytes([b[0], b[1]])
    }
}

impl Element for bool {
    const DTYPE: DType = DType::Bool;
    fn to_f64(self) -> f64 {
        self as u8 as f64
    }
    fn from_f64(v: f64) -> Self {
        v != 0.0
    }
    fn write_le(self, out: &mut Vec<u8>) {
        out.push(self as u8)
    }
    fn read_le(b: &[u8]) -> Self {
        b[0] != 0
    }
}

/// Decode one element of `dtype` from little-endian bytes into an f64.
pub fn read_f64(dtype: DType, b: &[u8]) -> f64 {
    match dtype {
        DType::Bool => (b[0] != 0) as u8 as f64,
        DType::U8 => b[0] as f64,
        DType::I32 => i32::read_le(&b[..4]) as f64,
        DType::U32 => u32::read_le(&b[..4]) as f64,
        DType::F16 => f16::read_le(&b[..2]).to_f64(),
        DType::BF16 => bf16::read_le(&b[..2]).to_f64(),
        DType::F32 => f32::read_le(&b[..4]) as f64,
    }
}

/// Encode an f64 as one element of `dtype` into little-endian bytes.
pub fn write_f64(dtype: DType, v: f64, out: &mut [u8]) {
    match dtype {
        DType::Bool => out[0] = (v != 0.0) as u8,
        DType::U8 => out[0] = DType::U8.normalize(v) as u8,
        DType::I32 => out[..4].copy_from_slice(&(DType::I32.normalize(v) as i32).to_le_bytes()),
        DType::U32 => out[..4].copy_from_slice(&(DType::U32.normalize(v) as u32).to_le_bytes()),
        DType::F16 => out[..2].copy_from_slice(&f16::from_f64(v).to_le_bytes()),
        DType::BF16 => out[..2].copy_from_slice(&to_bf16(v).to_le_bytes()),
        DType::F32 => out[..4].copy_from_slice(&(v as f32).to_le_bytes()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bf16_promotes_and_parses_as_in_pytorch() {
        assert_eq!(DType::promote(DType::BF16, DType::BF16), DType::BF16);
        assert_eq!(DType::promote(DType::BF16, DType::F16), DType::F32);
        assert_eq!(DType::promote(DType::F32, DType::BF16), DType::F32);
        assert_eq!(DType::promote(DType::I32, DType::BF16), DType::BF16);
        assert_eq!(DType::promote(DType::BF16, DType::Bool), DType::BF16);
        for s in ["bf16", "bfloat16", "BFloat16"] {
            assert_eq!(s.parse::<DType>().unwrap(), DType::BF16);
        }
        assert_eq!(DType::BF16.name(), "bf16");
        assert_eq!(DType::BF16.size(), 2);
        assert!(DType::BF16.is_float());
    }

    #[test]
    fn bf16_rounds_f64_through_f32() {
        let tie = 1.0 + 2f64.powi(-8);
        // An f32 just above a tie rounds up (half's direct f64 conversion would not).
        let above = tie + 2f64.powi(-23);
        assert_eq!(DType::BF16.normalize(above), 1.0078125);
        // A double just above a tie is the tie in f32, then even (PyTorch gives 1.0 too).
        assert_eq!(DType::BF16.normalize(tie + 2f64.powi(-30)), 1.0);
        assert_eq!(DType::BF16.normalize(tie), 1.0);
        assert_eq!(DType::BF16.normalize(1.0 + 3.0 * 2f64.powi(-8)), 1.015625);
        assert_eq!(DType::BF16.normalize(f64::MAX), f64::INFINITY);
        assert!(DType::BF16.normalize(f64::NAN).is_nan());
        let mut b = [0u8; 2];
        write_f64(DType::BF16, above, &mut b);
        assert_eq!(u16::from_le_bytes(b), 0x3f81);
        assert_eq!(read_f64(DType::BF16, &b), 1.0078125);
        assert_eq!(<bf16 as Element>::from_f64(above).to_bits(), 0x3f81);
    }
}

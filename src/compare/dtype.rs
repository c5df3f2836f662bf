//! Element types, byte orders and storage orders, and how each element becomes an f64.

use std::fmt;

/// Element type of a tensor.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DType {
    F64,
    F32,
    F16,
    BF16,
    I64,
    I32,
    I16,
    I8,
    U64,
    U32,
    U16,
    U8,
    Bool,
}

impl DType {
    /// Bytes per element.
    pub fn size(self) -> usize {
        match self {
            DType::F64 | DType::I64 | DType::U64 => 8,
            DType::F32 | DType::I32 | DType::U32 => 4,
            DType::F16 | DType::BF16 | DType::I16 | DType::U16 => 2,
            DType::I8 | DType::U8 | DType::Bool => 1,
        }
    }

    /// Whether values can be NaN or infinite.
    pub fn is_float(self) -> bool {
        matches!(self, DType::F64 | DType::F32 | DType::F16 | DType::BF16)
    }

    /// Lower-case name used in plans (`f32`, `bf16`, `bool`...).
    pub fn name(self) -> &'static str {
        match self {
            DType::F64 => "f64",
            DType::F32 => "f32",
            DType::F16 => "f16",
            DType::BF16 => "bf16",
            DType::I64 => "i64",
            DType::I32 => "i32",
            DType::I16 => "i16",
            DType::I8 => "i8",
            DType::U64 => "u64",
            DType::U32 => "u32",
            DType::U16 => "u16",
            DType::U8 => "u8",
            DType::Bool => "bool",
        }
    }

    /// Parses a plan name (`f32`, `float32`, `bf16`, `int64`, `bool`...).
    pub fn from_name(s: &str) -> Option<DType> {
        Some(match s.trim().to_ascii_lowercase().as_str() {
            "f64" | "float64" | "double" => DType::F64,
            "f32" | "float32" | "float" => DType::F32,
            "f16" | "float16" | "half" => DType::F16,
            "bf16" | "bfloat16" => DType::BF16,
            "i64" | "int64" => DType::I64,
            "i32" | "int32" => DType::I32,
            "i16" | "int16" => DType::I16,
            "i8" | "int8" => DType::I8,
            "u64" | "uint64" => DType::U64,
            "u32" | "uint32" => DType::U32,
            "u16" | "uint16" => DType::U16,
            "u8" | "uint8" => DType::U8,
            "bool" => DType::Bool,
            _ => return None,
        })
    }

    /// Parses a safetensors dtype string (`F32`, `BF16`, `I64`, `BOOL`...).
    pub fn from_safetensors(s: &str) -> Option<DType> {
        Some(match s {
            "F64" => DType::F64,
            "F32" => DType::F32,
            "F16" => DType::F16,
            "BF16" => DType::BF16,
            "I64" => DType::I64,
            "I32" => DType::I32,
            "I16" => DType::I16,
            "I8" => DType::I8,
            "U64" => DType::U64,
            "U32" => DType::U32,
            "U16" => DType::U16,
            "U8" => DType::U8,
            "BOOL" => DType::Bool,
            _ => return None,
        })
    }

    /// Parses an npy `descr` such as `<f4`, `>i8`, `|b1`. bf16 has no standard npy
    /// code, so it is not accepted here.
    pub fn from_npy_descr(s: &str) -> Option<(DType, ByteOrder)> {
        let mut chars = s.chars();
        let order_char = chars.next()?;
        let code = chars.as_str();
        let order = match order_char {
            '<' => ByteOrder::Little,
            '>' => ByteOrder::Big,
            '|' => ByteOrder::NotApplicable,
            '=' => ByteOrder::native(),
            _ => return None,
        };
        let dtype = match code {
            "f8" => DType::F64,
            "f4" => DType::F32,
            "f2" => DType::F16,
            "i8" => DType::I64,
            "i4" => DType::I32,
            "i2" => DType::I16,
            "i1" => DType::I8,
            "u8" => DType::U64,
            "u4" => DType::U32,
            "u2" => DType::U16,
            "u1" => DType::U8,
            "b1" => DType::Bool,
            _ => return None,
        };
        // A byte order on a multi-byte type is required; on a one-byte type it is moot.
        let order = if dtype.size() == 1 {
            ByteOrder::NotApplicable
        } else if order == ByteOrder::NotApplicable {
            return None;
        } else {
            order
        };
        Some((dtype, order))
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Byte order of multi-byte elements as stored in the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ByteOrder {
    Little,
    Big,
    /// One-byte elements.
    NotApplicable,
}

impl ByteOrder {
    /// The byte order of this machine.
    pub fn native() -> ByteOrder {
        if cfg!(target_endian = "little") {
            ByteOrder::Little
        } else {
            ByteOrder::Big
        }
    }
}

/// Storage order of a multi-dimensional tensor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Order {
    /// Row-major: the last index varies fastest.
    C,
    /// Column-major: the first index varies fastest.
    Fortran,
}

/// Decodes `bytes` (whole elements of `dtype` in `order`) into f64 values.
/// `out.len()` elements are written; callers pass exactly that many elements.
pub(crate) fn decode_f64(dtype: DType, order: ByteOrder, bytes: &[u8], out: &mut [f64]) {
    macro_rules! conv {
        ($t:ty, $n:expr, $f:expr) => {{
            let big = order == ByteOrder::Big;
            for (o, c) in out.iter_mut().zip(bytes.chunks_exact($n)) {
                let mut arr = [0u8; $n];
                arr.copy_from_slice(c);
                let v = if big {
                    <$t>::from_be_bytes(arr)
                } else {
                    <$t>::from_le_bytes(arr)
                };
                *o = $f(v);
            }
        }};
    }
    match dtype {
        DType::F64 => conv!(f64, 8, |v: f64| v),
        DType::F32 => conv!(f32, 4, |v: f32| v as f64),
        DType::F16 => conv!(u16, 2, |v: u16| half::f16::from_bits(v).to_f64()),
        DType::BF16 => conv!(u16, 2, |v: u16| half::bf16::from_bits(v).to_f64()),
        DType::I64 => conv!(i64, 8, |v: i64| v as f64),
        DType::I32 => conv!(i32, 4, |v: i32| v as f64),
        DType::I16 => conv!(i16, 2, |v: i16| v as f64),
        DType::I8 => conv!(i8, 1, |v: i8| v as f64),
        DType::U64 => conv!(u64, 8, |v: u64| v as f64),
        DType::U32 => conv!(u32, 4, |v: u32| v as f64),
        DType::U16 => conv!(u16, 2, |v: u16| v as f64),
        DType::U8 => conv!(u8, 1, |v: u8| v as f64),
        DType::Bool => conv!(u8, 1, |v: u8| if v != 0 { 1.0 } else { 0.0 }),
    }
}

/// Decodes elements into their bit patterns in native order (zero-extended), so two
/// tensors stored with different byte orders compare equal when their values' bits do.
pub(crate) fn decode_bits(dtype: DType, order: ByteOrder, bytes: &[u8], out: &mut [u64]) {
    let size = dtype.size();
    let big = order == ByteOrder::Big;
    for (o, c) in out.iter_mut().zip(bytes.chunks_exact(size)) {
        let mut v: u64 = 0;
        if big {
            for &b in c {
                v = (v << 8) | u64::from(b);
            }
        } else {
            for &b in c.iter().rev() {
                v = (v << 8) | u64::from(b);
            }
        }
        *o = v;
    }
}

/// Decodes elements as exact integers (token ids). Integral floats map to their
/// value, so `1.0` equals `1`; other floats map below every integer, by bit pattern.
pub(crate) fn decode_i128(dtype: DType, order: ByteOrder, bytes: &[u8], out: &mut [i128]) {
    match dtype {
        DType::I64 | DType::I32 | DType::I16 | DType::I8 => {
            let size = dtype.size();
            let mut bits = vec![0u64; out.len()];
            decode_bits(dtype, order, bytes, &mut bits);
            let shift = 64 - 8 * size as u32;
            for (o, b) in out.iter_mut().zip(bits) {
                // Sign-extend from the element width.
                *o = i128::from(((b << shift) as i64) >> shift);
            }
        }
        DType::U64 | DType::U32 | DType::U16 | DType::U8 | DType::Bool => {
            let mut bits = vec![0u64; out.len()];
            decode_bits(dtype, order, bytes, &mut bits);
            for (o, b) in out.iter_mut().zip(bits) {
                *o = i128::from(b);
            }
        }
        _ => {
            let mut vals = vec![0f64; out.len()];
            decode_f64(dtype, order, bytes, &mut vals);
            for (o, v) in out.iter_mut().zip(vals) {
                *o = if v.is_finite() && v.fract() == 0.0 {
                    v as i128
                } else {
                    i128::MIN + i128::from(v.to_bits())
                };
            }
        }
    }
}

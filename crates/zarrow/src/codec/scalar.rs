//! One numeric element of a zarr data type as a value, and back: what the element-wise
//! array-to-array codecs (`scale_offset`, `cast_value`) compute with. Booleans, integers
//! (sub-byte ones included), float16/32/64 and the low-precision floats.

use crate::data_type::{DataType, Endian, LowFloat};
use crate::error::ChunkError;

/// A numeric value on its way between two types.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Scalar {
    /// An integer (or boolean) value.
    Int(i128),
    /// A floating-point value.
    Float(f64),
}

impl Scalar {
    /// As a float.
    pub(crate) fn to_f64(self) -> f64 {
        match self {
            Scalar::Int(i) => i as f64,
            Scalar::Float(f) => f,
        }
    }

    /// The same value (NaN matches NaN).
    pub(crate) fn same(self, other: Scalar) -> bool {
        match (self, other) {
            (Scalar::Int(a), Scalar::Int(b)) => a == b,
            (a, b) => {
                let (x, y) = (a.to_f64(), b.to_f64());
                x == y || (x.is_nan() && y.is_nan())
            }
        }
    }
}

/// The range of an integer type (booleans: 0..=1); `None` for other types.
pub(crate) fn int_range(dt: &DataType) -> Option<(i128, i128)> {
    let bits = |n: u32| (-(1i128 << (n - 1)), (1i128 << (n - 1)) - 1);
    let ubits = |n: u32| (0, (1i128 << n) - 1);
    Some(match dt {
        DataType::Bool => (0, 1),
        DataType::Int8 => bits(8),
        DataType::Int16 => bits(16),
        DataType::Int32 => bits(32),
        DataType::Int64 => bits(64),
        DataType::UInt8 => ubits(8),
        DataType::UInt16 => ubits(16),
        DataType::UInt32 => ubits(32),
        DataType::UInt64 => ubits(64),
        DataType::SubByteInt(i) => i.range(),
        _ => return None,
    })
}

/// Whether elements of `dt` are numbers these codecs compute with.
pub(crate) fn is_numeric(dt: &DataType) -> bool {
    int_range(dt).is_some()
        || matches!(
            dt,
            DataType::Float16 | DataType::Float32 | DataType::Float64 | DataType::LowFloat(_)
        )
}

fn little(b: &[u8], endian: Endian) -> u64 {
    let mut le = [0u8; 8];
    le[..b.len()].copy_from_slice(b);
    if endian == Endian::Big {
        le[..b.len()].reverse();
    }
    u64::from_le_bytes(le)
}

/// The value of one stored element `b` (its type's size, in `endian`) of the numeric `dt`.
pub(crate) fn read(dt: &DataType, endian: Endian, b: &[u8]) -> Scalar {
    let raw = little(b, endian);
    match dt {
        DataType::Float16 => Scalar::Float(half::f16::from_bits(raw as u16).to_f64()),
        DataType::Float32 => Scalar::Float(f64::from(f32::from_bits(raw as u32))),
        DataType::Float64 => Scalar::Float(f64::from_bits(raw)),
        DataType::LowFloat(f) => Scalar::Float(f.value(raw as u16)),
        DataType::SubByteInt(i) if i.signed => Scalar::Int(i128::from(i.widen(raw as u8) as i8)),
        DataType::SubByteInt(i) => Scalar::Int(i128::from(i.widen(raw as u8))),
        DataType::Bool => Scalar::Int(i128::from(raw != 0)),
        other => {
            let (min, _) = int_range(other).unwrap_or((0, 0));
            let n = 8 * b.len() as u32;
            if min < 0 && n < 64 && raw >> (n - 1) & 1 == 1 {
                Scalar::Int(i128::from(raw) - (1i128 << n))
            } else if min < 0 && n == 64 {
                Scalar::Int(i128::from(raw as i64))
            } else {
                Scalar::Int(i128::from(raw))
            }
        }
    }
}

/// Each element of `input` (`from` bytes) mapped by `f` to the bits of an element of `to`
/// bytes, written in `endian` order into at most `max_size` bytes; errors name `codec`.
pub(crate) fn map_elements(
    codec: &'static str,
    input: &[u8],
    (from, to): (usize, usize),
    max_size: usize,
    endian: Endian,
    mut f: impl FnMut(&[u8]) -> Result<u64, String>,
) -> Result<Vec<u8>, ChunkError> {
    if from == 0 || !input.len().is_multiple_of(from) {
        return Err(ChunkError::Invalid(format!(
            "{codec}: {} bytes are not whole {from}-byte elements",
            input.len()
        )));
    }
    let size = (input.len() / from).saturating_mul(to);
    if size > max_size {
        return Err(super::support::too_large(codec, size, max_size));
    }
    let mut out = super::support::buffer(size, codec)?;
    for b in input.chunks_exact(from) {
        let bits = f(b).map_err(|m| ChunkError::codec(codec, m))?;
        write_bits(bits, to, endian, &mut out);
    }
    Ok(out)
}

/// Append the bits `bits` of one element of `size` bytes in `endian`.
pub(crate) fn write_bits(bits: u64, size: usize, endian: Endian, out: &mut Vec<u8>) {
    let le = bits.to_le_bytes();
    let start = out.len();
    out.extend_from_slice(&le[..size]);
    if endian == Endian::Big {
        out[start..].reverse();
    }
}

/// The bits of the float `v` in the float type `dt`, rounded to nearest (ties to even); `None`
/// for a type that is not a float.
pub(crate) fn float_bits(dt: &DataType, v: f64) -> Option<u64> {
    Some(match dt {
        DataType::Float16 => u64::from(half::f16::from_f64(v).to_bits()),
        DataType::Float32 => u64::from((v as f32).to_bits()),
        DataType::Float64 => v.to_bits(),
        DataType::LowFloat(LowFloat::BFloat16) => u64::from(half::bf16::from_f64(v).to_bits()),
        DataType::LowFloat(f) => u64::from(nearest_code(*f, v)),
        _ => return None,
    })
}

/// The code of a one-byte low-precision float nearest `v` (ties to the even code); NaN to the
/// type's NaN, or code 0 where it has none (the caller checks NaN first).
fn nearest_code(f: LowFloat, v: f64) -> u16 {
    let codes = 1u16 << f.bits();
    let mut best: Option<(u16, f64)> = None;
    for c in 0..codes {
        let x = f.value(c);
        if v.is_nan() {
            if x.is_nan() {
                return c;
            }
            continue;
        }
        if x.is_nan() {
            continue;
        }
        let d = (x - v).abs();
        let better = match best {
            None => true,
            Some((b, bd)) => d < bd || (d == bd && c % 2 == 0 && b % 2 == 1),
        };
        if better && !(d.is_nan()) {
            best = Some((c, d));
        }
    }
    best.map_or(0, |(c, _)| c)
}

/// The largest finite value of the float type `dt`.
pub(crate) fn float_max(dt: &DataType) -> f64 {
    match dt {
        DataType::Float16 => half::f16::MAX.to_f64(),
        DataType::Float32 => f64::from(f32::MAX),
        DataType::LowFloat(LowFloat::BFloat16) => half::bf16::MAX.to_f64(),
        DataType::LowFloat(f) => (0..1u16 << f.bits())
            .map(|c| f.value(c))
            .filter(|x| x.is_finite())
            .fold(0.0, f64::max),
        _ => f64::MAX,
    }
}

/// Whether the float type `dt` has infinities and NaN.
pub(crate) fn float_has(dt: &DataType) -> (bool, bool) {
    match dt {
        DataType::LowFloat(f) => {
            let values: Vec<f64> = (0..1u16 << f.bits()).map(|c| f.value(c)).collect();
            (
                values.iter().any(|x| x.is_infinite()),
                values.iter().any(|x| x.is_nan()),
            )
        }
        _ => (true, true),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data_type::SubByteInt;

    #[test]
    fn elements_read_and_round() {
        assert_eq!(
            read(&DataType::Int16, Endian::Big, &[0xff, 0xfe]),
            Scalar::Int(-2)
        );
        assert_eq!(
            read(&DataType::Int64, Endian::Little, &[0xff; 8]),
            Scalar::Int(-1)
        );
        assert_eq!(
            read(&DataType::UInt64, Endian::Little, &[0xff; 8]),
            Scalar::Int(u64::MAX.into())
        );
        let int4 = DataType::SubByteInt(SubByteInt {
            bits: 4,
            signed: true,
        });
        assert_eq!(read(&int4, Endian::Little, &[0x0f]), Scalar::Int(-1));
        assert_eq!(
            read(&DataType::Float32, Endian::Little, &1.5f32.to_le_bytes()),
            Scalar::Float(1.5)
        );
        let e4m3fn = DataType::LowFloat(LowFloat::Float8E4M3FN);
        // 17 lies between 16 (0x58) and 18 (0x59): ties go to the even code.
        assert_eq!(float_bits(&e4m3fn, 17.0), Some(0x58));
        assert_eq!(float_bits(&e4m3fn, 17.5), Some(0x59));
        assert_eq!(float_max(&e4m3fn), 448.0);
        assert_eq!(float_has(&e4m3fn), (false, true));
        assert!(Scalar::Float(f64::NAN).same(Scalar::Float(f64::NAN)));
    }
}

//! Low-precision numbers (the zarr-extensions data types `bfloat16`, `float8_*`, `float6_*`,
//! `float4_e2m1fn`, `int2`, `int4`, `uint2`, `uint4`), widened losslessly to an Arrow type
//! that exists:
//!
//! | zarr type | stored (`bytes`) | Arrow | why |
//! |---|---|---|---|
//! | `bfloat16` | 2 bytes | Float32 | bfloat16 is float32's upper half |
//! | `float8_e4m3`, `float8_e4m3fn`, `float8_e4m3fnuz`, `float8_e4m3b11fnuz`, `float8_e5m2`, `float8_e5m2fnuz` | 1 byte | Float16 | at most 57344 and at least 2^-17 in magnitude: within float16, every value exact |
//! | `float8_e8m0fnu` | 1 byte | Float32 | powers of two 2^-127 … 2^127 |
//! | `float6_e2m3fn`, `float6_e3m2fn`, `float4_e2m1fn` | 1 byte, low bits | Float16 | |
//! | `int2`, `int4` | 1 byte, low bits | Int8 | sign-extended |
//! | `uint2`, `uint4` | 1 byte, low bits | UInt8 | |
//!
//! NaN and infinities become float16/float32 NaN and infinities where the format has them
//! (`fn` formats have no infinity, `fnuz` ones one NaN, `0x80`, and no negative zero;
//! `e8m0fnu` has no sign and no zero, `0xff` is NaN; the float6/float4 types have neither NaN
//! nor infinity). Under the `bytes` codec the sub-byte types keep their value in the low bits
//! of a byte, the high bits ignored; the `packbits` codec packs them.

use half::f16;

/// How a low-precision float marks its special values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Special {
    /// IEEE 754: all-ones exponent is infinity (zero mantissa) or NaN.
    Ieee,
    /// Finite, NaN where exponent and mantissa are all ones (`e4m3fn`).
    FiniteNan,
    /// Finite, the single NaN `1000…0` (no negative zero).
    Fnuz,
    /// Finite, no NaN (`float6`, `float4`).
    Finite,
    /// Unsigned powers of two, all ones is NaN (`e8m0fnu`).
    E8m0,
}

/// A low-precision float type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum LowFloat {
    /// `bfloat16`.
    BFloat16,
    /// `float8_e4m3` (IEEE-like, bias 7).
    Float8E4M3,
    /// `float8_e4m3fn`.
    Float8E4M3FN,
    /// `float8_e4m3fnuz`.
    Float8E4M3FNUZ,
    /// `float8_e4m3b11fnuz` (bias 11).
    Float8E4M3B11FNUZ,
    /// `float8_e5m2`.
    Float8E5M2,
    /// `float8_e5m2fnuz`.
    Float8E5M2FNUZ,
    /// `float8_e8m0fnu`.
    Float8E8M0FNU,
    /// `float6_e2m3fn`.
    Float6E2M3FN,
    /// `float6_e3m2fn`.
    Float6E3M2FN,
    /// `float4_e2m1fn`.
    Float4E2M1FN,
}

/// Every low-precision float, for lookups by name.
const ALL: [LowFloat; 11] = [
    LowFloat::BFloat16,
    LowFloat::Float8E4M3,
    LowFloat::Float8E4M3FN,
    LowFloat::Float8E4M3FNUZ,
    LowFloat::Float8E4M3B11FNUZ,
    LowFloat::Float8E5M2,
    LowFloat::Float8E5M2FNUZ,
    LowFloat::Float8E8M0FNU,
    LowFloat::Float6E2M3FN,
    LowFloat::Float6E3M2FN,
    LowFloat::Float4E2M1FN,
];

impl LowFloat {
    /// The type the zarr-extensions name `name` names.
    pub fn from_name(name: &str) -> Option<Self> {
        ALL.into_iter().find(|f| f.name() == name)
    }

    /// The zarr v3 name.
    pub fn name(self) -> &'static str {
        match self {
            LowFloat::BFloat16 => "bfloat16",
            LowFloat::Float8E4M3 => "float8_e4m3",
            LowFloat::Float8E4M3FN => "float8_e4m3fn",
            LowFloat::Float8E4M3FNUZ => "float8_e4m3fnuz",
            LowFloat::Float8E4M3B11FNUZ => "float8_e4m3b11fnuz",
            LowFloat::Float8E5M2 => "float8_e5m2",
            LowFloat::Float8E5M2FNUZ => "float8_e5m2fnuz",
            LowFloat::Float8E8M0FNU => "float8_e8m0fnu",
            LowFloat::Float6E2M3FN => "float6_e2m3fn",
            LowFloat::Float6E3M2FN => "float6_e3m2fn",
            LowFloat::Float4E2M1FN => "float4_e2m1fn",
        }
    }

    /// (exponent bits, mantissa bits, bias, special values).
    fn layout(self) -> (u32, u32, i32, Special) {
        match self {
            LowFloat::BFloat16 => (8, 7, 127, Special::Ieee),
            LowFloat::Float8E4M3 => (4, 3, 7, Special::Ieee),
            LowFloat::Float8E4M3FN => (4, 3, 7, Special::FiniteNan),
            LowFloat::Float8E4M3FNUZ => (4, 3, 8, Special::Fnuz),
            LowFloat::Float8E4M3B11FNUZ => (4, 3, 11, Special::Fnuz),
            LowFloat::Float8E5M2 => (5, 2, 15, Special::Ieee),
            LowFloat::Float8E5M2FNUZ => (5, 2, 16, Special::Fnuz),
            LowFloat::Float8E8M0FNU => (8, 0, 127, Special::E8m0),
            LowFloat::Float6E2M3FN => (2, 3, 1, Special::Finite),
            LowFloat::Float6E3M2FN => (3, 2, 3, Special::Finite),
            LowFloat::Float4E2M1FN => (2, 1, 1, Special::Finite),
        }
    }

    /// Bits of one value (what `packbits` packs).
    pub fn bits(self) -> u32 {
        let (e, m, _, special) = self.layout();
        e + m + u32::from(special != Special::E8m0)
    }

    /// Bytes of one stored element under the `bytes` codec.
    pub fn stored_size(self) -> usize {
        if self == LowFloat::BFloat16 {
            2
        } else {
            1
        }
    }

    /// Whether the value widens to Float32 (else Float16).
    pub fn widens_to_f32(self) -> bool {
        matches!(self, LowFloat::BFloat16 | LowFloat::Float8E8M0FNU)
    }

    /// The value of the stored bits `raw` (bits above [`Self::bits`] ignored), exactly.
    pub fn value(self, raw: u16) -> f64 {
        let (e, m, bias, special) = self.layout();
        let width = self.bits();
        let bits = u32::from(raw) & ((1u32 << width) - 1);
        let sign_bit = if special == Special::E8m0 {
            0
        } else {
            bits >> (e + m)
        };
        let exp = (bits >> m) & ((1 << e) - 1);
        let man = bits & ((1 << m) - 1);
        let all_exp = (1 << e) - 1;
        match special {
            Special::E8m0 if exp == all_exp => return f64::NAN,
            Special::E8m0 => return 2f64.powi(exp as i32 - bias),
            Special::Ieee if exp == all_exp && man == 0 => {
                return if sign_bit == 1 {
                    f64::NEG_INFINITY
                } else {
                    f64::INFINITY
                }
            }
            Special::Ieee if exp == all_exp => return f64::NAN,
            Special::FiniteNan if exp == all_exp && man == (1 << m) - 1 => return f64::NAN,
            Special::Fnuz if sign_bit == 1 && exp == 0 && man == 0 => return f64::NAN,
            _ => {}
        }
        let scale = 2f64.powi(-(m as i32));
        let magnitude = if exp == 0 {
            2f64.powi(1 - bias) * f64::from(man) * scale
        } else {
            2f64.powi(exp as i32 - bias) * (1.0 + f64::from(man) * scale)
        };
        if sign_bit == 1 {
            -magnitude
        } else {
            magnitude
        }
    }

    /// The float16 of each of the 256 one-byte codes (for the one-byte types that widen to
    /// Float16).
    pub(crate) fn f16_table(self) -> [f16; 256] {
        std::array::from_fn(|b| f16::from_f64(self.value(b as u16)))
    }

    /// The float32 of each of the 256 one-byte codes.
    pub(crate) fn f32_table(self) -> [f32; 256] {
        std::array::from_fn(|b| self.value(b as u16) as f32)
    }

    /// The stored bits of `v`, when the type holds it exactly (NaN: the type's NaN, if any).
    pub fn encode(self, v: f64) -> Option<u16> {
        if self == LowFloat::BFloat16 {
            let b = half::bf16::from_f64(v);
            return (b.to_f64() == v || v.is_nan()).then(|| b.to_bits());
        }
        let codes = 1u16 << self.bits();
        (0..codes)
            .find(|&c| {
                let x = self.value(c);
                if v.is_nan() {
                    x.is_nan()
                } else {
                    x == v && x.is_sign_negative() == v.is_sign_negative()
                }
            })
            // -0.0 where the type has no negative zero: plain zero.
            .or_else(|| (v == 0.0 && self.layout().3 == Special::Fnuz).then_some(0))
    }
}

/// A sub-byte integer type: `int2`, `int4`, `uint2`, `uint4`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SubByteInt {
    /// Bits of one value: 2 or 4.
    pub bits: u8,
    /// Whether it is signed (two's complement).
    pub signed: bool,
}

impl SubByteInt {
    /// The type named `name`.
    pub fn from_name(name: &str) -> Option<Self> {
        let (signed, bits) = match name {
            "int2" => (true, 2),
            "int4" => (true, 4),
            "uint2" => (false, 2),
            "uint4" => (false, 4),
            _ => return None,
        };
        Some(SubByteInt { bits, signed })
    }

    /// The zarr v3 name.
    pub fn name(self) -> &'static str {
        match (self.signed, self.bits) {
            (true, 2) => "int2",
            (true, _) => "int4",
            (false, 2) => "uint2",
            (false, _) => "uint4",
        }
    }

    /// The smallest and largest value.
    pub fn range(self) -> (i128, i128) {
        let n = i128::from(self.bits);
        if self.signed {
            (-(1 << (n - 1)), (1 << (n - 1)) - 1)
        } else {
            (0, (1 << n) - 1)
        }
    }

    /// The value of a stored byte (its low [`Self::bits`] bits), as the byte of the Arrow
    /// Int8 or UInt8 it widens to.
    pub fn widen(self, byte: u8) -> u8 {
        let unused = 8 - u32::from(self.bits);
        if self.signed {
            (((byte << unused) as i8) >> unused) as u8
        } else {
            (byte << unused) >> unused
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_match_the_formats_definitions() {
        // (type, code, value): ml_dtypes' decodings.
        let cases: &[(LowFloat, u16, f64)] = &[
            (LowFloat::BFloat16, 0x3f80, 1.0),
            (LowFloat::BFloat16, 0xbf80, -1.0),
            (LowFloat::BFloat16, 0x0001, 2f64.powi(-133)),
            (LowFloat::Float8E4M3, 0x38, 1.0),
            (LowFloat::Float8E4M3, 0x77, 240.0),
            (LowFloat::Float8E4M3, 0x78, f64::INFINITY),
            (LowFloat::Float8E4M3, 0x01, 2f64.powi(-9)),
            (LowFloat::Float8E4M3FN, 0x7e, 448.0),
            (LowFloat::Float8E4M3FN, 0x78, 256.0),
            (LowFloat::Float8E4M3FNUZ, 0x40, 1.0),
            (LowFloat::Float8E4M3FNUZ, 0x7f, 240.0),
            (LowFloat::Float8E4M3B11FNUZ, 0x58, 1.0),
            (LowFloat::Float8E5M2, 0x3c, 1.0),
            (LowFloat::Float8E5M2, 0x7b, 57344.0),
            (LowFloat::Float8E5M2, 0xfc, f64::NEG_INFINITY),
            (LowFloat::Float8E5M2FNUZ, 0x40, 1.0),
            (LowFloat::Float8E5M2FNUZ, 0x7f, 57344.0),
            (LowFloat::Float8E5M2FNUZ, 0x01, 2f64.powi(-17)),
            (LowFloat::Float8E8M0FNU, 0x7f, 1.0),
            (LowFloat::Float8E8M0FNU, 0x00, 2f64.powi(-127)),
            (LowFloat::Float8E8M0FNU, 0xfe, 2f64.powi(127)),
            (LowFloat::Float6E2M3FN, 0x1f, 7.5),
            (LowFloat::Float6E2M3FN, 0x01, 0.125),
            (LowFloat::Float6E3M2FN, 0x1f, 28.0),
            (LowFloat::Float6E3M2FN, 0x21, -0.0625),
            (LowFloat::Float4E2M1FN, 0x7, 6.0),
            (LowFloat::Float4E2M1FN, 0xf, -6.0),
            (LowFloat::Float4E2M1FN, 0x1, 0.5),
            // The ignored high bits of a sub-byte float.
            (LowFloat::Float4E2M1FN, 0xf2, 1.0),
        ];
        for &(t, code, want) in cases {
            assert_eq!(t.value(code), want, "{} {code:#x}", t.name());
        }
        for (t, nan) in [
            (LowFloat::Float8E4M3, 0x7c),
            (LowFloat::Float8E4M3FN, 0x7f),
            (LowFloat::Float8E4M3FN, 0xff),
            (LowFloat::Float8E4M3FNUZ, 0x80),
            (LowFloat::Float8E5M2FNUZ, 0x80),
            (LowFloat::Float8E8M0FNU, 0xff),
            (LowFloat::BFloat16, 0x7fc0),
        ] {
            assert!(t.value(nan).is_nan(), "{}", t.name());
        }
    }

    #[test]
    fn widening_is_exact_for_every_code() {
        for t in ALL {
            let codes: u32 = if t == LowFloat::BFloat16 {
                1 << 16
            } else {
                256
            };
            for c in 0..codes {
                let v = t.value(c as u16);
                let widened = if t.widens_to_f32() {
                    f64::from(v as f32)
                } else {
                    f16::from_f64(v).to_f64()
                };
                assert!(
                    widened == v || (v.is_nan() && widened.is_nan()),
                    "{} {c:#x}: {v} became {widened}",
                    t.name()
                );
            }
        }
    }

    #[test]
    fn fill_values_encode_exactly_or_not_at_all() {
        assert_eq!(LowFloat::Float8E4M3FN.encode(1.0), Some(0x38));
        assert_eq!(LowFloat::Float8E4M3FNUZ.encode(f64::NAN), Some(0x80));
        assert_eq!(LowFloat::Float8E4M3FNUZ.encode(-0.0), Some(0));
        assert_eq!(LowFloat::Float4E2M1FN.encode(f64::NAN), None);
        assert_eq!(LowFloat::Float4E2M1FN.encode(1.1), None);
        assert_eq!(LowFloat::Float8E5M2.encode(f64::INFINITY), Some(0x7c));
        assert_eq!(LowFloat::BFloat16.encode(1.0), Some(0x3f80));
        assert_eq!(LowFloat::BFloat16.encode(1.0 + 1e-9), None);
        assert_eq!(LowFloat::Float8E8M0FNU.encode(0.0), None);
    }

    #[test]
    fn sub_byte_integers() {
        let int4 = SubByteInt::from_name("int4").unwrap();
        assert_eq!(int4.widen(0x0f) as i8, -1);
        assert_eq!(int4.widen(0xf7) as i8, 7);
        assert_eq!(int4.range(), (-8, 7));
        let uint2 = SubByteInt::from_name("uint2").unwrap();
        assert_eq!(uint2.widen(0xff), 3);
        assert_eq!(uint2.range(), (0, 3));
        assert_eq!(
            SubByteInt::from_name("int2").unwrap().widen(0b10),
            (-2i8) as u8
        );
        for n in ["int2", "int4", "uint2", "uint4"] {
            assert_eq!(SubByteInt::from_name(n).unwrap().name(), n);
        }
    }
}

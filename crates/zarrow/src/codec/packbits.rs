//! `packbits` (zarr-extensions): an array-to-bytes codec that stores `last_bit - first_bit + 1`
//! bits of each element, back to back, least significant bit first; optionally a byte
//! counting the padding bits of the last byte, first or last. It is the codec of the sub-byte
//! types (`int2`, `int4`, `uint2`, `uint4`, `float4_e2m1fn`, `float6_*`, and `bool` as one
//! bit); for the other fixed-size numbers it keeps their low bits.
//!
//! Decoding gives each element's `bytes`-codec representation (little-endian): the stored
//! bits shifted to `first_bit`, sign-extended for signed integers.

use serde_json::Value;

use super::config::{Config, ConfigError};
use super::registry::{Codec, Context};
use super::{config_error, unsupported, ArrayToBytes, ChainError};
use crate::data_type::DataType;
use crate::error::ChunkError;

/// Where the count of padding bits is stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Padding {
    /// Not stored.
    None,
    /// In a byte before the data.
    FirstByte,
    /// In a byte after the data.
    LastByte,
}

/// The `packbits` codec, resolved for its data type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PackBits {
    /// Where the padding count is.
    pub padding: Padding,
    /// The lowest bit of an element that is stored.
    pub first_bit: u32,
    /// The highest bit of an element that is stored (inclusive).
    pub last_bit: u32,
    /// Bits of one element of the data type.
    pub width: u32,
    /// Whether the decoded value is sign-extended.
    pub signed: bool,
    /// Bytes of one decoded element.
    pub size: usize,
}

/// The bits of one element of `data_type` and whether it is a signed integer; `None` for a
/// type `packbits` does not carry.
fn component(data_type: &DataType) -> Option<(u32, bool)> {
    Some(match data_type {
        DataType::Bool => (1, false),
        DataType::SubByteInt(i) => (u32::from(i.bits), i.signed),
        DataType::LowFloat(f) => (f.bits(), false),
        DataType::Int8 | DataType::Int16 | DataType::Int32 | DataType::Int64 => {
            (8 * data_type.fixed_size()? as u32, true)
        }
        DataType::UInt8
        | DataType::UInt16
        | DataType::UInt32
        | DataType::UInt64
        | DataType::Float16
        | DataType::Float32
        | DataType::Float64 => (8 * data_type.fixed_size()? as u32, false),
        _ => return None,
    })
}

fn bit_key(c: &Config<'_>, key: &str) -> Result<Option<u32>, ConfigError> {
    match c.int(key)? {
        None => Ok(None),
        Some(b) => u32::try_from(b)
            .map(Some)
            .map_err(|_| ConfigError::bad_value(key, b, "a bit index (0 or more)")),
    }
}

/// `packbits`.
pub(super) fn v3(
    name: &str,
    config: Option<&Value>,
    cx: &Context<'_>,
) -> Result<Codec, ChainError> {
    let c = Config::from_value(config).map_err(|e| config_error(name, e))?;
    c.only(&["padding_encoding", "first_bit", "last_bit"])
        .map_err(|e| config_error(name, e))?;
    let padding = match c
        .str("padding_encoding")
        .map_err(|e| config_error(name, e))?
    {
        None | Some("none") => Padding::None,
        Some("first_byte") | Some("start_byte") => Padding::FirstByte,
        Some("last_byte") | Some("end_byte") => Padding::LastByte,
        Some(other) => {
            return Err(config_error(
                name,
                ConfigError::bad_value(
                    "padding_encoding",
                    format!("'{other}'"),
                    "\"none\", \"first_byte\" or \"last_byte\"",
                ),
            ))
        }
    };
    let (width, signed) = component(cx.data_type).ok_or_else(|| {
        unsupported(
            name,
            format!("cannot encode data type {}", cx.data_type.name()),
        )
    })?;
    let first_bit = bit_key(&c, "first_bit").map_err(|e| config_error(name, e))?;
    let last_bit = bit_key(&c, "last_bit").map_err(|e| config_error(name, e))?;
    let first_bit = first_bit.unwrap_or(0);
    let last_bit = last_bit.unwrap_or(width - 1);
    if last_bit < first_bit || last_bit >= width {
        return Err(config_error(
            name,
            ConfigError::bad_value(
                "last_bit",
                last_bit,
                format!("at least first_bit ({first_bit}) and below {width}"),
            ),
        ));
    }
    Ok(Codec::ArrayToBytes(ArrayToBytes::PackBits(PackBits {
        padding,
        first_bit,
        last_bit,
        width,
        signed,
        size: cx.data_type.fixed_size().unwrap_or(1),
    })))
}

impl PackBits {
    /// Bits stored per element.
    fn stored_bits(&self) -> u32 {
        self.last_bit - self.first_bit + 1
    }

    /// The most bytes `n` elements take stored.
    pub(crate) fn stored_bound(&self, n: usize) -> usize {
        n.saturating_mul(self.stored_bits() as usize)
            .div_ceil(8)
            .saturating_add(1)
    }

    /// Unpack `n` elements to their little-endian `bytes` representation.
    pub(crate) fn decode(&self, stored: &[u8], n: usize) -> Result<Vec<u8>, ChunkError> {
        let k = self.stored_bits();
        let total_bits = n
            .checked_mul(k as usize)
            .ok_or_else(|| ChunkError::TooLarge("packbits: chunk size overflows".into()))?;
        let data_len = total_bits.div_ceil(8);
        let pad = (data_len * 8 - total_bits) as u8;
        let data = match self.padding {
            Padding::None => Some(stored),
            // zarrs (zarrista 0.1.0) leaves the padding byte out for types of whole bytes
            // (float8, int8, ...): with no padding bits the length alone tells, as a chunk
            // with the byte is one byte longer.
            _ if pad == 0 && stored.len() == data_len => Some(stored),
            Padding::FirstByte => stored
                .split_first()
                .filter(|(p, _)| **p == pad)
                .map(|(_, d)| d),
            Padding::LastByte => stored
                .split_last()
                .filter(|(p, _)| **p == pad)
                .map(|(_, d)| d),
        };
        let data = data.filter(|d| d.len() == data_len).ok_or_else(|| {
            ChunkError::codec(
                "packbits",
                format!(
                    "{} bytes do not hold {n} elements of {k} bits (padding {:?}, {pad} bits)",
                    stored.len(),
                    self.padding
                ),
            )
        })?;
        let mut out = super::support::buffer(n.saturating_mul(self.size), "packbits")?;
        let value_mask = if self.width == 64 {
            u64::MAX
        } else {
            (1u64 << self.width) - 1
        };
        for i in 0..n {
            let mut v = bits_at(data, i * k as usize, k) << self.first_bit;
            if self.signed && (v >> self.last_bit) & 1 == 1 {
                // ones above last_bit, up to the element's width
                v |= value_mask & !((2u128 << self.last_bit) - 1) as u64;
            }
            out.extend_from_slice(&v.to_le_bytes()[..self.size]);
        }
        Ok(out)
    }
}

/// `k` (at most 64) bits of `data` from bit `bit` on, least significant first.
fn bits_at(data: &[u8], bit: usize, k: u32) -> u64 {
    let start = bit / 8;
    let end = (start + 9).min(data.len());
    let mut word = [0u8; 16];
    word[..end - start].copy_from_slice(&data[start..end]);
    let v = u128::from_le_bytes(word) >> (bit % 8);
    (v & ((1u128 << k) - 1)) as u64
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data_type::SubByteInt;
    use serde_json::json;

    fn codec(dt: &DataType, config: Value) -> Result<PackBits, ChainError> {
        match v3(
            "packbits",
            Some(&config),
            &Context {
                data_type: dt,
                ndim: 1,
            },
        )? {
            Codec::ArrayToBytes(ArrayToBytes::PackBits(p)) => Ok(p),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn int4_with_a_first_padding_byte() {
        let int4 = DataType::SubByteInt(SubByteInt {
            bits: 4,
            signed: true,
        });
        let p = codec(&int4, json!({"padding_encoding": "first_byte"})).unwrap();
        // -1, 7, -8 as 4-bit values, least significant first: 0x7f, 0x08; 4 padding bits.
        // Sign extension goes up to the 4 bits of int4 (the high bits are ignored).
        let out = p.decode(&[4, 0x7f, 0x08], 3).unwrap();
        assert_eq!(out, [0x0f, 0x07, 0x08]);
        // A wrong padding count or length is a chunk error.
        assert!(p.decode(&[3, 0x7f, 0x08], 3).is_err());
        assert!(p.decode(&[4, 0x7f], 3).is_err());
    }

    #[test]
    fn a_whole_byte_type_may_leave_the_padding_byte_out() {
        // zarrs writes float8 / int8 chunks under `first_byte` without the (zero) count.
        let p = codec(&DataType::UInt8, json!({"padding_encoding": "first_byte"})).unwrap();
        assert_eq!(p.decode(&[0, 5, 10], 3).unwrap(), [0, 5, 10]);
        assert_eq!(p.decode(&[0, 0, 5, 10], 3).unwrap(), [0, 5, 10]);
        let p = codec(&DataType::UInt8, json!({"padding_encoding": "last_byte"})).unwrap();
        assert_eq!(p.decode(&[7, 9], 2).unwrap(), [7, 9]);
        // Only where no padding bits are needed: a sub-byte chunk must hold its count.
        let bool4 = codec(&DataType::Bool, json!({"padding_encoding": "first_byte"})).unwrap();
        assert!(bool4.decode(&[0b0101], 4).is_err());
        assert!(p.decode(&[7], 2).is_err());
    }

    #[test]
    fn bools_as_bits_and_bit_ranges_of_wider_types() {
        let p = codec(&DataType::Bool, json!({})).unwrap();
        assert_eq!(
            p.decode(&[0b0000_0101, 0b1], 9).unwrap(),
            [1, 0, 1, 0, 0, 0, 0, 0, 1]
        );
        // Bits 4..=11 of int16: stored 0xff is -16 (sign-extended from bit 11).
        let p = codec(&DataType::Int16, json!({"first_bit": 4, "last_bit": 11})).unwrap();
        assert_eq!(
            p.decode(&[0xff, 0x01], 2).unwrap(),
            [0xf0, 0xff, 0x10, 0x00]
        );
        let p = codec(&DataType::UInt64, json!({"padding_encoding": "last_byte"})).unwrap();
        assert_eq!(
            p.decode(&[1, 0, 0, 0, 0, 0, 0, 0x80, 0], 1).unwrap(),
            [1, 0, 0, 0, 0, 0, 0, 0x80]
        );
    }

    #[test]
    fn configurations_are_checked() {
        for bad in [
            json!({"first_bit": 3, "last_bit": 2}),
            json!({"last_bit": 8}),
            json!({"padding_encoding": "middle"}),
            json!({"bits": 2}),
        ] {
            assert!(
                matches!(
                    codec(&DataType::UInt8, bad.clone()),
                    Err(ChainError::Config { .. })
                ),
                "{bad}"
            );
        }
        assert!(matches!(
            codec(&DataType::String, json!({})),
            Err(ChainError::Unsupported { .. })
        ));
    }
}

//! numcodecs' 32-bit checksums: `crc32` and `adler32` (zlib's, 4 little-endian bytes before
//! the data unless `location` is `end`) and `fletcher32` (HDF5's Fletcher-32 over big-endian
//! 16-bit words, 4 little-endian bytes after the data). Decoding checks the sum and returns a
//! zero-copy slice of the input.

use bytes::Bytes;
use serde_json::{json, Value};

use super::config::{Config, ConfigError};
use super::support::too_large;
use super::{BytesToBytes, IndexLocation};
use crate::error::ChunkError;

/// Which checksum.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Checksum32 {
    /// zlib's CRC-32.
    Crc32,
    /// zlib's Adler-32.
    Adler32,
    /// HDF5's Fletcher-32.
    Fletcher32,
}

impl Checksum32 {
    /// numcodecs' codec id.
    pub fn id(self) -> &'static str {
        match self {
            Checksum32::Crc32 => "crc32",
            Checksum32::Adler32 => "adler32",
            Checksum32::Fletcher32 => "fletcher32",
        }
    }

    fn sum(self, data: &[u8]) -> u32 {
        match self {
            Checksum32::Crc32 => {
                let mut crc = flate2::Crc::new();
                crc.update(data);
                crc.sum()
            }
            Checksum32::Adler32 => adler32(data),
            Checksum32::Fletcher32 => fletcher32(data),
        }
    }
}

/// numcodecs `crc32` / `adler32` (`location`: `start`, numcodecs' default, or `end`) and
/// `fletcher32` (no configuration; the sum at the end).
pub(super) fn numcodecs(kind: Checksum32, c: &Config<'_>) -> Result<BytesToBytes, ConfigError> {
    if kind == Checksum32::Fletcher32 {
        c.only(&["id"])?;
        return Ok(BytesToBytes::Checksum32 {
            kind,
            location: IndexLocation::End,
        });
    }
    c.only(&["id", "location"])?;
    let location = match c.str("location")? {
        None | Some("start") => IndexLocation::Start,
        Some("end") => IndexLocation::End,
        Some(other) => {
            return Err(ConfigError::bad_value(
                "location",
                format!("'{other}'"),
                "'start' or 'end'",
            ))
        }
    };
    Ok(BytesToBytes::Checksum32 { kind, location })
}

fn location_json(kind: Checksum32, location: IndexLocation) -> Option<&'static str> {
    match (kind, location) {
        (Checksum32::Fletcher32, _) | (_, IndexLocation::Start) => None,
        (_, IndexLocation::End) => Some("end"),
    }
}

pub(super) fn v3_json(kind: Checksum32, location: IndexLocation) -> Value {
    match location_json(kind, location) {
        Some(l) => {
            json!({"name": format!("numcodecs.{}", kind.id()), "configuration": {"location": l}})
        }
        None => json!({"name": format!("numcodecs.{}", kind.id()), "configuration": {}}),
    }
}

pub(super) fn v2_json(kind: Checksum32, location: IndexLocation) -> Value {
    match location_json(kind, location) {
        Some(l) => json!({"id": kind.id(), "location": l}),
        None => json!({"id": kind.id()}),
    }
}

pub(super) fn decode(
    kind: Checksum32,
    location: IndexLocation,
    input: &Bytes,
    max_size: usize,
) -> Result<Bytes, ChunkError> {
    let Some(data_len) = input.len().checked_sub(4) else {
        return Err(ChunkError::Truncated(format!(
            "{}: {} bytes is shorter than the 4-byte checksum",
            kind.id(),
            input.len()
        )));
    };
    if data_len > max_size {
        return Err(too_large(kind.id(), data_len, max_size));
    }
    let (sum_at, data) = match location {
        IndexLocation::Start => (0, input.slice(4..)),
        IndexLocation::End => (data_len, input.slice(..data_len)),
    };
    let mut word = [0u8; 4];
    word.copy_from_slice(&input[sum_at..sum_at + 4]);
    let stored = u32::from_le_bytes(word);
    let computed = kind.sum(&data);
    if stored != computed {
        return Err(ChunkError::Checksum { stored, computed });
    }
    Ok(data)
}

pub(super) fn encode(kind: Checksum32, location: IndexLocation, input: &[u8]) -> Vec<u8> {
    let sum = kind.sum(input).to_le_bytes();
    let mut out = Vec::with_capacity(input.len() + 4);
    if location == IndexLocation::Start {
        out.extend_from_slice(&sum);
    }
    out.extend_from_slice(input);
    if location == IndexLocation::End {
        out.extend_from_slice(&sum);
    }
    out
}

/// zlib's Adler-32.
fn adler32(data: &[u8]) -> u32 {
    const MOD: u32 = 65_521;
    // 5552 bytes is the most that can be summed before `b` could overflow a u32.
    let (mut a, mut b) = (1u32, 0u32);
    for block in data.chunks(5552) {
        for &x in block {
            a += u32::from(x);
            b += a;
        }
        a %= MOD;
        b %= MOD;
    }
    (b << 16) | a
}

/// HDF5's Fletcher-32 (`H5_checksum_fletcher32`), as numcodecs computes it: big-endian 16-bit
/// words, an odd last byte as the high byte of a word, sums folded every 360 words.
fn fletcher32(data: &[u8]) -> u32 {
    let (mut sum1, mut sum2) = (0u32, 0u32);
    let fold = |s: u32| (s & 0xffff) + (s >> 16);
    let words = data.chunks_exact(2);
    let odd = words.remainder().first().copied();
    let words: Vec<u32> = words
        .map(|w| (u32::from(w[0]) << 8) | u32::from(w[1]))
        .collect();
    for block in words.chunks(360) {
        for &w in block {
            sum1 += w;
            sum2 += sum1;
        }
        sum1 = fold(sum1);
        sum2 = fold(sum2);
    }
    if let Some(last) = odd {
        sum1 += u32::from(last) << 8;
        sum2 += sum1;
        sum1 = fold(sum1);
        sum2 = fold(sum2);
    }
    sum1 = fold(sum1);
    sum2 = fold(sum2);
    (sum2 << 16) | sum1
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sums_match_zlib_and_hdf5() {
        // Values from Python: zlib.crc32, zlib.adler32, numcodecs' Fletcher32.
        assert_eq!(Checksum32::Crc32.sum(b"hello world"), 0x0d4a_1185);
        assert_eq!(Checksum32::Adler32.sum(b"hello world"), 0x1a0b_045d);
        assert_eq!(Checksum32::Adler32.sum(b""), 1);
        assert_eq!(Checksum32::Fletcher32.sum(b"hello world"), 0xfc27_91ce);
        assert_eq!(Checksum32::Fletcher32.sum(b"abcd"), 0x2629_c4c6);
        let bytes: Vec<u8> = (0..5).flat_map(|_| 0..=255u8).collect();
        assert_eq!(Checksum32::Fletcher32.sum(&bytes), 0xea0b_c13e);
        let long = vec![0xffu8; 100_000];
        assert_eq!(Checksum32::Adler32.sum(&long), adler32_naive(&long));
    }

    fn adler32_naive(data: &[u8]) -> u32 {
        let (mut a, mut b) = (1u64, 0u64);
        for &x in data {
            a = (a + u64::from(x)) % 65_521;
            b = (b + a) % 65_521;
        }
        ((b << 16) | a) as u32
    }

    #[test]
    fn checked_at_either_end_and_zero_copy() {
        for kind in [
            Checksum32::Crc32,
            Checksum32::Adler32,
            Checksum32::Fletcher32,
        ] {
            for location in [IndexLocation::Start, IndexLocation::End] {
                let encoded = Bytes::from(encode(kind, location, b"hello!"));
                let decoded = decode(kind, location, &encoded, 6).unwrap();
                assert_eq!(&decoded[..], b"hello!");
                let at = if location == IndexLocation::Start {
                    4
                } else {
                    0
                };
                assert_eq!(decoded.as_ptr(), encoded[at..].as_ptr());
                let mut bad = encoded.to_vec();
                bad[at + 2] ^= 1;
                assert!(matches!(
                    decode(kind, location, &Bytes::from(bad), 6),
                    Err(ChunkError::Checksum { .. })
                ));
                assert!(matches!(
                    decode(kind, location, &encoded, 5),
                    Err(ChunkError::TooLarge(_))
                ));
            }
            assert!(matches!(
                decode(kind, IndexLocation::End, &Bytes::from_static(b"abc"), 9),
                Err(ChunkError::Truncated(_))
            ));
        }
    }
}

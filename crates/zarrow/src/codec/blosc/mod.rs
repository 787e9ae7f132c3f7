//! Blosc (c-blosc 1 format; `ffi.rs` calls c-blosc): zarr v3 `blosc` (shuffle by name,
//! default zstd, bit shuffle) and numcodecs `blosc` (shuffle by number, default lz4, byte
//! shuffle; AUTOSHUFFLE −1).

mod ffi;

use std::ffi::CStr;

use bytes::Bytes;
use serde_json::{json, Value};

use super::config::{Config, ConfigError};
use super::BytesToBytes;
use crate::error::ChunkError;

#[cfg(test)]
pub(crate) use ffi::read_header;

/// The compressor inside a blosc buffer: those c-blosc 1 is built with here.
///
/// c-blosc 1 also knows `snappy`, but blosc-src is built without it; metadata naming it is
/// rejected when parsed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BloscCompressor {
    /// `blosclz`, blosc's own LZ77 variant.
    BloscLz,
    /// `lz4`.
    Lz4,
    /// `lz4hc`, LZ4 high compression (decodes as LZ4).
    Lz4hc,
    /// `zlib`.
    Zlib,
    /// `zstd`.
    Zstd,
}

impl BloscCompressor {
    /// All compressors, in c-blosc's code order.
    pub const ALL: [BloscCompressor; 5] = [
        BloscCompressor::BloscLz,
        BloscCompressor::Lz4,
        BloscCompressor::Lz4hc,
        BloscCompressor::Zlib,
        BloscCompressor::Zstd,
    ];

    /// The name as written in metadata (`cname`) and understood by c-blosc.
    pub fn name(self) -> &'static str {
        match self {
            BloscCompressor::BloscLz => "blosclz",
            BloscCompressor::Lz4 => "lz4",
            BloscCompressor::Lz4hc => "lz4hc",
            BloscCompressor::Zlib => "zlib",
            BloscCompressor::Zstd => "zstd",
        }
    }

    /// Parse a `cname`.
    pub fn from_name(name: &str) -> Option<Self> {
        BloscCompressor::ALL.into_iter().find(|c| c.name() == name)
    }

    pub(crate) fn c_name(self) -> &'static CStr {
        match self {
            BloscCompressor::BloscLz => c"blosclz",
            BloscCompressor::Lz4 => c"lz4",
            BloscCompressor::Lz4hc => c"lz4hc",
            BloscCompressor::Zlib => c"zlib",
            BloscCompressor::Zstd => c"zstd",
        }
    }
}

/// The blosc shuffle filter.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BloscShuffle {
    /// No shuffle (`"noshuffle"`, numcodecs `0`).
    NoShuffle,
    /// Byte shuffle (`"shuffle"`, numcodecs `1`).
    Shuffle,
    /// Bit shuffle (`"bitshuffle"`, numcodecs `2`).
    BitShuffle,
}

impl BloscShuffle {
    /// The zarr v3 name.
    pub fn name(self) -> &'static str {
        match self {
            BloscShuffle::NoShuffle => "noshuffle",
            BloscShuffle::Shuffle => "shuffle",
            BloscShuffle::BitShuffle => "bitshuffle",
        }
    }

    /// The numcodecs / c-blosc code: 0, 1 or 2.
    pub fn code(self) -> u8 {
        match self {
            BloscShuffle::NoShuffle => 0,
            BloscShuffle::Shuffle => 1,
            BloscShuffle::BitShuffle => 2,
        }
    }

    /// Parse a zarr v3 name.
    pub fn from_name(name: &str) -> Option<Self> {
        match name {
            "noshuffle" => Some(BloscShuffle::NoShuffle),
            "shuffle" => Some(BloscShuffle::Shuffle),
            "bitshuffle" => Some(BloscShuffle::BitShuffle),
            _ => None,
        }
    }

    /// Parse a numcodecs code. `-1` (AUTOSHUFFLE) is bit shuffle for one-byte elements and byte
    /// shuffle otherwise; with `typesize` unknown (0) it is byte shuffle.
    pub fn from_numcodecs(code: i64, typesize: usize) -> Option<Self> {
        match code {
            -1 if typesize == 1 => Some(BloscShuffle::BitShuffle),
            -1 => Some(BloscShuffle::Shuffle),
            0 => Some(BloscShuffle::NoShuffle),
            1 => Some(BloscShuffle::Shuffle),
            2 => Some(BloscShuffle::BitShuffle),
            _ => None,
        }
    }
}

/// zarr v3 `blosc`.
pub(super) fn v3(c: &Config<'_>) -> Result<BytesToBytes, ConfigError> {
    c.only(&["cname", "clevel", "shuffle", "typesize", "blocksize"])?;
    let shuffle = match c.str("shuffle")? {
        None => BloscShuffle::BitShuffle,
        Some(s) => BloscShuffle::from_name(s).ok_or_else(|| {
            ConfigError::bad_value(
                "shuffle",
                format!("'{s}'"),
                "noshuffle, shuffle or bitshuffle",
            )
        })?,
    };
    Ok(BytesToBytes::Blosc {
        cname: cname(c, BloscCompressor::Zstd)?,
        clevel: clevel(c, 5)?,
        shuffle,
        typesize: typesize(c)?.unwrap_or(1),
        blocksize: blocksize(c)?,
    })
}

/// numcodecs `blosc`.
pub(super) fn numcodecs(c: &Config<'_>) -> Result<BytesToBytes, ConfigError> {
    c.only(&["id", "cname", "clevel", "shuffle", "blocksize", "typesize"])?;
    let typesize = typesize(c)?.unwrap_or(0);
    let shuffle = match c.int("shuffle")? {
        None => BloscShuffle::Shuffle,
        Some(code) => BloscShuffle::from_numcodecs(code, typesize)
            .ok_or_else(|| ConfigError::bad_value("shuffle", code, "-1, 0, 1 or 2"))?,
    };
    Ok(BytesToBytes::Blosc {
        cname: cname(c, BloscCompressor::Lz4)?,
        clevel: clevel(c, 5)?,
        shuffle,
        typesize,
        blocksize: blocksize(c)?,
    })
}

fn cname(c: &Config<'_>, default: BloscCompressor) -> Result<BloscCompressor, ConfigError> {
    match c.str("cname")? {
        None => Ok(default),
        Some("snappy") => Err(ConfigError::unsupported(
            Some("cname"),
            "blosc compressor 'snappy' is not supported (c-blosc is built without it)",
        )),
        Some(name) => BloscCompressor::from_name(name).ok_or_else(|| {
            ConfigError::bad_value(
                "cname",
                format!("'{name}'"),
                "a blosc compressor (blosclz, lz4, lz4hc, zlib, zstd)",
            )
        }),
    }
}

fn clevel(c: &Config<'_>, default: u8) -> Result<u8, ConfigError> {
    match c.int("clevel")? {
        None => Ok(default),
        Some(l @ 0..=9) => Ok(l as u8),
        Some(l) => Err(ConfigError::bad_value("clevel", l, "in 0..=9")),
    }
}

fn blocksize(c: &Config<'_>) -> Result<usize, ConfigError> {
    match c.int("blocksize")? {
        None => Ok(0),
        Some(b) => usize::try_from(b)
            .ok()
            .filter(|&b| b <= i32::MAX as usize)
            .ok_or_else(|| ConfigError::bad_value("blocksize", b, "in 0..=2147483647")),
    }
}

/// A typesize: a positive integer (`None` when absent).
fn typesize(c: &Config<'_>) -> Result<Option<usize>, ConfigError> {
    match c.int("typesize")? {
        None => Ok(None),
        Some(t) => usize::try_from(t)
            .ok()
            .filter(|&t| t > 0)
            .map(Some)
            .ok_or_else(|| ConfigError::bad_value("typesize", t, "a positive integer")),
    }
}

pub(super) fn v3_json(
    cname: BloscCompressor,
    clevel: u8,
    shuffle: BloscShuffle,
    typesize: usize,
    blocksize: usize,
) -> Value {
    json!({
        "name": "blosc",
        "configuration": {
            "typesize": typesize.max(1),
            "cname": cname.name(),
            "clevel": clevel,
            "shuffle": shuffle.name(),
            "blocksize": blocksize,
        }
    })
}

/// numcodecs' `get_config()`; `typesize` is left out: numcodecs before 0.16 does not accept it.
pub(super) fn v2_json(
    cname: BloscCompressor,
    clevel: u8,
    shuffle: BloscShuffle,
    blocksize: usize,
) -> Value {
    json!({
        "id": "blosc",
        "cname": cname.name(),
        "clevel": clevel,
        "shuffle": shuffle.code(),
        "blocksize": blocksize,
    })
}

pub(super) fn decode(input: &Bytes, max_size: usize) -> Result<Bytes, ChunkError> {
    ffi::decompress(input, max_size).map(Bytes::from)
}

pub(super) fn encode(
    cname: BloscCompressor,
    clevel: u8,
    shuffle: BloscShuffle,
    typesize: usize,
    blocksize: usize,
    input: &[u8],
) -> Result<Vec<u8>, ChunkError> {
    ffi::compress(
        input,
        cname.c_name(),
        clevel,
        shuffle.code(),
        typesize,
        blocksize,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::conformance::{noise, sample};

    #[test]
    fn blosc_header_claiming_more_than_its_data_can_hold_is_refused() {
        let codec = BytesToBytes::Blosc {
            cname: BloscCompressor::Lz4,
            clevel: 5,
            shuffle: BloscShuffle::NoShuffle,
            typesize: 1,
            blocksize: 0,
        };
        let mut chunk = codec.encode(&sample().repeat(8)).unwrap();
        assert_eq!(
            codec.decode(Bytes::from(chunk.clone()), 1 << 31).unwrap(),
            sample().repeat(8)
        );
        // 1 GiB from a few hundred bytes of LZ4: corrupt, refused before allocating.
        chunk[4..8].copy_from_slice(&(1u32 << 30).to_le_bytes());
        let e = codec
            .decode(Bytes::from(chunk), 1 << 31)
            .unwrap_err()
            .to_string();
        assert!(e.contains("can hold"), "{e}");
    }

    #[test]
    fn blosc_multi_block_round_trip() {
        let input: Vec<u8> = sample().repeat(64);
        let codec = BytesToBytes::Blosc {
            cname: BloscCompressor::Lz4,
            clevel: 5,
            shuffle: BloscShuffle::Shuffle,
            typesize: 4,
            blocksize: 16 * 1024,
        };
        let encoded = codec.encode(&input).unwrap();
        let header = read_header(&encoded).unwrap();
        assert_eq!(header.nbytes, input.len());
        // c-blosc scales a forced block size by the typesize for codecs that split blocks.
        assert_eq!(header.blocksize, 4 * 16 * 1024);
        assert!(header.blocksize < header.nbytes);
        assert_eq!(header.typesize, 4);
        assert!(encoded.len() < input.len() / 4);
        assert_eq!(
            codec.decode(Bytes::from(encoded), input.len()).unwrap(),
            input
        );
    }

    /// Random multi-byte damage to multi-block blosc buffers (block offsets, split sizes,
    /// flags): errors or bounded output, never a crash.
    #[test]
    fn blosc_random_mutations() {
        let input: Vec<u8> = sample().repeat(24);
        let mut rng = noise(100_000).into_iter();
        let mut next = || rng.next().map_or(0, usize::from);
        for cname in BloscCompressor::ALL {
            for shuffle in [BloscShuffle::Shuffle, BloscShuffle::BitShuffle] {
                let codec = BytesToBytes::Blosc {
                    cname,
                    clevel: 5,
                    shuffle,
                    typesize: 4,
                    blocksize: 4096,
                };
                let encoded = codec.encode(&input).unwrap();
                for _ in 0..200 {
                    let mut bad = encoded.clone();
                    for _ in 0..1 + next() % 4 {
                        // Bias towards the header and the block offsets after it.
                        let at = if next() % 2 == 0 {
                            next() % 64.min(bad.len())
                        } else {
                            (next() * 256 + next()) % bad.len()
                        };
                        bad[at] = next() as u8;
                    }
                    if let Ok(out) = codec.decode(Bytes::from(bad), input.len()) {
                        assert!(out.len() <= input.len());
                        // Touch every byte (valgrind flags any c-blosc left uninitialized).
                        let marks = out.iter().filter(|&&b| b == 0xAB).count();
                        assert!(marks <= out.len());
                    }
                }
            }
        }
    }

    #[test]
    fn blosc_names() {
        for c in BloscCompressor::ALL {
            assert_eq!(BloscCompressor::from_name(c.name()), Some(c));
            assert_eq!(c.c_name().to_str().unwrap(), c.name());
        }
        for s in [
            BloscShuffle::NoShuffle,
            BloscShuffle::Shuffle,
            BloscShuffle::BitShuffle,
        ] {
            assert_eq!(BloscShuffle::from_name(s.name()), Some(s));
            assert_eq!(
                BloscShuffle::from_numcodecs(i64::from(s.code()), 4),
                Some(s)
            );
        }
    }

    #[test]
    fn headers_claiming_huge_sizes() {
        // blosc: a valid header announcing 2 GB.
        let blosc = BytesToBytes::Blosc {
            cname: BloscCompressor::Lz4,
            clevel: 5,
            shuffle: BloscShuffle::Shuffle,
            typesize: 4,
            blocksize: 0,
        };
        let mut encoded = blosc.encode(&sample()).unwrap();
        encoded[4..8].copy_from_slice(&2_000_000_000u32.to_le_bytes());
        assert!(matches!(
            blosc.decode(Bytes::from(encoded.clone()), 1 << 20),
            Err(ChunkError::TooLarge(_))
        ));
        // Over blosc's own maximum.
        encoded[4..8].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(matches!(
            blosc.decode(Bytes::from(encoded.clone()), usize::MAX),
            Err(ChunkError::Codec { codec: "blosc", .. })
        ));
        // Compressed size larger than the chunk, or smaller.
        let mut encoded = blosc.encode(&sample()).unwrap();
        let len = encoded.len() as u32;
        encoded[12..16].copy_from_slice(&(len + 1000).to_le_bytes());
        assert!(matches!(
            blosc.decode(Bytes::from(encoded.clone()), usize::MAX),
            Err(ChunkError::Truncated(_))
        ));
        encoded[12..16].copy_from_slice(&(len - 1).to_le_bytes());
        assert!(blosc
            .decode(Bytes::from(encoded.clone()), usize::MAX)
            .is_err());
        // A blosc2 / unknown version.
        let mut encoded = blosc.encode(&sample()).unwrap();
        encoded[0] = 5;
        assert!(blosc.decode(Bytes::from(encoded), usize::MAX).is_err());
    }
}

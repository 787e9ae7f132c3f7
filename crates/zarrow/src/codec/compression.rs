//! Bytes-to-bytes codecs: compression (gzip, zlib, zstd, blosc, lz4, bz2) and the crc32c checksum.
//!
//! [`BytesToBytes`] parses the zarr v3 codec entries (`gzip`, `zstd`, `blosc`, `crc32c` and the
//! `numcodecs.*` names zarr-python writes) and the zarr v2 numcodecs compressor/filter objects,
//! and decodes chunk bytes with a bound on the decoded size: no codec allocates by a size read
//! from the chunk before checking it against the caller's limit, and streams that decode to more
//! than the limit stop with [`ChunkError::TooLarge`].
//!
//! Byte formats (all as numcodecs / zarr-python write them):
//!
//! | codec  | stored bytes                                                              |
//! |--------|---------------------------------------------------------------------------|
//! | gzip   | gzip stream (several members are concatenated)                            |
//! | zlib   | zlib stream (bytes after its end are ignored, as Python's `zlib` does)    |
//! | zstd   | zstd frame(s), with or without the content size                           |
//! | blosc  | c-blosc 1 buffer (16-byte header)                                         |
//! | lz4    | 4-byte little-endian decoded size, then one LZ4 block                     |
//! | bz2    | bzip2 stream(s)                                                           |
//! | crc32c | the data, then its CRC-32C as 4 little-endian bytes                       |

use std::ffi::CStr;
use std::io::{Read, Write};

use bytes::Bytes;
use serde_json::{json, Map, Value};

use super::blosc;
use crate::error::ChunkError;

/// A bytes-to-bytes codec with its configuration.
#[derive(Debug, Clone, PartialEq)]
pub enum BytesToBytes {
    /// gzip (RFC 1952).
    Gzip {
        /// Compression level, 0–9.
        level: u32,
    },
    /// zlib (RFC 1950), numcodecs `zlib`.
    Zlib {
        /// Compression level, 0–9.
        level: u32,
    },
    /// Zstandard.
    Zstd {
        /// Compression level (negative levels are the fast modes).
        level: i32,
        /// Whether encoding writes the frame checksum (decoding always checks one that is
        /// present).
        checksum: bool,
    },
    /// Blosc (c-blosc 1 format).
    Blosc {
        /// The internal compressor.
        cname: BloscCompressor,
        /// Compression level, 0–9.
        clevel: u8,
        /// The shuffle filter.
        shuffle: BloscShuffle,
        /// Element size in bytes for the shuffle filters. `0` when the metadata does not say
        /// (numcodecs v2 configurations usually omit it); encoding then uses 1.
        typesize: usize,
        /// Requested block size in bytes, `0` for automatic.
        blocksize: usize,
    },
    /// numcodecs `lz4`: 4-byte little-endian decoded size, then one LZ4 block.
    Lz4 {
        /// numcodecs' acceleration parameter. Recorded for the metadata; the encoder
        /// (`lz4_flex`) has a single speed setting, and the stored format does not depend on it.
        acceleration: i32,
    },
    /// bzip2.
    Bz2 {
        /// Compression level (block size in 100 kB units), 1–9.
        level: u32,
    },
    /// CRC-32C checksum appended to the data as 4 little-endian bytes.
    Crc32c,
}

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

    fn c_name(self) -> &'static CStr {
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

/// zlib's `Z_DEFAULT_COMPRESSION` (-1) means level 6.
const DEFLATE_DEFAULT_LEVEL: u32 = 6;

/// A configuration object, looked at key by key.
struct Config<'a> {
    map: Option<&'a Map<String, Value>>,
}

impl<'a> Config<'a> {
    fn from_value(configuration: Option<&'a Value>) -> Result<Self, String> {
        match configuration {
            None | Some(Value::Null) => Ok(Config { map: None }),
            Some(Value::Object(map)) => Ok(Config { map: Some(map) }),
            Some(other) => Err(format!("configuration must be a JSON object, got {other}")),
        }
    }

    /// Reject keys outside `allowed` (an unknown key may change the meaning).
    fn only(&self, allowed: &[&str]) -> Result<(), String> {
        if let Some(map) = self.map {
            if let Some(key) = map.keys().find(|k| !allowed.contains(&k.as_str())) {
                return Err(if allowed.is_empty() {
                    format!("unexpected configuration key '{key}' (takes none)")
                } else {
                    format!(
                        "unexpected configuration key '{key}' (known: {})",
                        allowed.join(", ")
                    )
                });
            }
        }
        Ok(())
    }

    /// A value; `null` counts as absent.
    fn get(&self, key: &str) -> Option<&'a Value> {
        self.map.and_then(|m| m.get(key)).filter(|v| !v.is_null())
    }

    fn int(&self, key: &str) -> Result<Option<i64>, String> {
        match self.get(key) {
            None => Ok(None),
            Some(v) => v
                .as_i64()
                .map(Some)
                .ok_or_else(|| format!("{key} must be an integer, got {v}")),
        }
    }

    fn bool(&self, key: &str) -> Result<Option<bool>, String> {
        match self.get(key) {
            None => Ok(None),
            Some(v) => v
                .as_bool()
                .map(Some)
                .ok_or_else(|| format!("{key} must be true or false, got {v}")),
        }
    }

    fn str(&self, key: &str) -> Result<Option<&'a str>, String> {
        match self.get(key) {
            None => Ok(None),
            Some(v) => v
                .as_str()
                .map(Some)
                .ok_or_else(|| format!("{key} must be a string, got {v}")),
        }
    }

    /// A gzip/zlib level: 0–9, or -1 for zlib's default (6).
    fn deflate_level(&self, key: &str, default: u32) -> Result<u32, String> {
        match self.int(key)? {
            None => Ok(default),
            Some(-1) => Ok(DEFLATE_DEFAULT_LEVEL),
            Some(l @ 0..=9) => Ok(l as u32),
            Some(l) => Err(format!("{key} must be in 0..=9, got {l}")),
        }
    }

    fn i32(&self, key: &str, default: i32) -> Result<i32, String> {
        match self.int(key)? {
            None => Ok(default),
            Some(l) => i32::try_from(l).map_err(|_| format!("{key} {l} is out of range")),
        }
    }

    fn cname(&self, default: BloscCompressor) -> Result<BloscCompressor, String> {
        match self.str("cname")? {
            None => Ok(default),
            Some("snappy") => Err(
                "blosc compressor 'snappy' is not supported (c-blosc is built without it)".into(),
            ),
            Some(name) => BloscCompressor::from_name(name).ok_or_else(|| {
                format!(
                    "unknown blosc compressor '{name}' (known: blosclz, lz4, lz4hc, zlib, zstd)"
                )
            }),
        }
    }

    fn clevel(&self, default: u8) -> Result<u8, String> {
        match self.int("clevel")? {
            None => Ok(default),
            Some(l @ 0..=9) => Ok(l as u8),
            Some(l) => Err(format!("clevel must be in 0..=9, got {l}")),
        }
    }

    fn blocksize(&self) -> Result<usize, String> {
        match self.int("blocksize")? {
            None => Ok(0),
            Some(b) => usize::try_from(b)
                .ok()
                .filter(|&b| b <= i32::MAX as usize)
                .ok_or_else(|| format!("blocksize must be in 0..=2147483647, got {b}")),
        }
    }

    /// A typesize: a positive integer (`None` when absent).
    fn typesize(&self) -> Result<Option<usize>, String> {
        match self.int("typesize")? {
            None => Ok(None),
            Some(t) => usize::try_from(t)
                .ok()
                .filter(|&t| t > 0)
                .map(Some)
                .ok_or_else(|| format!("typesize must be a positive integer, got {t}")),
        }
    }
}

impl BytesToBytes {
    /// Parse a zarr v3 codec entry. `Ok(None)` if `name` is not a bytes-to-bytes codec this
    /// module knows; `Err` for a known codec with a bad configuration.
    ///
    /// Names: `gzip`, `zstd`, `blosc`, `crc32c` (zarr v3 core), and the numcodecs names
    /// zarr-python writes: `numcodecs.zlib`, `numcodecs.gzip`, `numcodecs.zstd`,
    /// `numcodecs.blosc`, `numcodecs.lz4`, `numcodecs.bz2`, `numcodecs.crc32c`, also plain
    /// `zlib`, `lz4`, `bz2`. The `numcodecs.*` (and plain) forms take numcodecs' configuration
    /// and defaults (e.g. blosc `shuffle` as an integer), the core forms zarr-python's.
    pub fn from_v3(name: &str, configuration: Option<&Value>) -> Result<Option<Self>, String> {
        if let Some(id) = name.strip_prefix("numcodecs.") {
            return match id {
                "zlib" | "gzip" | "zstd" | "blosc" | "lz4" | "bz2" | "crc32c" => {
                    Self::from_numcodecs(id, &Config::from_value(configuration)?).map(Some)
                }
                _ => Ok(None),
            };
        }
        let config = || Config::from_value(configuration);
        let codec = match name {
            "gzip" => {
                let c = config()?;
                c.only(&["level"])?;
                BytesToBytes::Gzip {
                    level: c.deflate_level("level", 5)?,
                }
            }
            "zstd" => {
                let c = config()?;
                c.only(&["level", "checksum"])?;
                BytesToBytes::Zstd {
                    level: c.i32("level", 0)?,
                    checksum: c.bool("checksum")?.unwrap_or(false),
                }
            }
            "blosc" => {
                let c = config()?;
                c.only(&["cname", "clevel", "shuffle", "typesize", "blocksize"])?;
                let shuffle = match c.str("shuffle")? {
                    None => BloscShuffle::BitShuffle,
                    Some(s) => BloscShuffle::from_name(s).ok_or_else(|| {
                        format!("shuffle must be noshuffle, shuffle or bitshuffle, got '{s}'")
                    })?,
                };
                BytesToBytes::Blosc {
                    cname: c.cname(BloscCompressor::Zstd)?,
                    clevel: c.clevel(5)?,
                    shuffle,
                    typesize: c.typesize()?.unwrap_or(1),
                    blocksize: c.blocksize()?,
                }
            }
            "crc32c" => {
                let c = config()?;
                c.only(&[])?;
                BytesToBytes::Crc32c
            }
            "zlib" | "lz4" | "bz2" => Self::from_numcodecs(name, &config()?)?,
            _ => return Ok(None),
        };
        Ok(Some(codec))
    }

    /// Parse a zarr v2 compressor or filter object (numcodecs form, `{"id": "zstd", "level": 1,
    /// ...}`). `Ok(None)` if the id is not one of this module's codecs.
    pub fn from_v2(config: &Map<String, Value>) -> Result<Option<Self>, String> {
        let id = match config.get("id") {
            Some(Value::String(id)) => id.as_str(),
            Some(other) => return Err(format!("codec id must be a string, got {other}")),
            None => return Err("codec object has no 'id'".into()),
        };
        match id {
            "zlib" | "gzip" | "zstd" | "blosc" | "lz4" | "bz2" | "crc32c" => {
                Self::from_numcodecs(id, &Config { map: Some(config) }).map(Some)
            }
            _ => Ok(None),
        }
    }

    /// Parse numcodecs' configuration of codec `id`, with numcodecs' defaults. An `id` key, if
    /// present, must match.
    fn from_numcodecs(id: &str, c: &Config<'_>) -> Result<Self, String> {
        if let Some(found) = c.str("id")? {
            if found != id {
                return Err(format!(
                    "configuration id '{found}' does not match codec '{id}'"
                ));
            }
        }
        let codec = match id {
            "zlib" => {
                c.only(&["id", "level"])?;
                BytesToBytes::Zlib {
                    level: c.deflate_level("level", 1)?,
                }
            }
            "gzip" => {
                c.only(&["id", "level"])?;
                BytesToBytes::Gzip {
                    level: c.deflate_level("level", 1)?,
                }
            }
            "zstd" => {
                c.only(&["id", "level", "checksum"])?;
                BytesToBytes::Zstd {
                    level: c.i32("level", 0)?,
                    checksum: c.bool("checksum")?.unwrap_or(false),
                }
            }
            "lz4" => {
                c.only(&["id", "acceleration"])?;
                BytesToBytes::Lz4 {
                    acceleration: c.i32("acceleration", 1)?,
                }
            }
            "bz2" => {
                c.only(&["id", "level"])?;
                BytesToBytes::Bz2 {
                    level: match c.int("level")? {
                        None => 1,
                        Some(l @ 1..=9) => l as u32,
                        Some(l) => return Err(format!("level must be in 1..=9, got {l}")),
                    },
                }
            }
            "crc32c" => {
                c.only(&["id", "location"])?;
                match c.str("location")? {
                    None | Some("end") => BytesToBytes::Crc32c,
                    Some("start") => {
                        return Err("crc32c with location 'start' is not supported".into())
                    }
                    Some(other) => {
                        return Err(format!("location must be 'start' or 'end', got '{other}'"))
                    }
                }
            }
            "blosc" => {
                c.only(&["id", "cname", "clevel", "shuffle", "blocksize", "typesize"])?;
                let typesize = c.typesize()?.unwrap_or(0);
                let shuffle = match c.int("shuffle")? {
                    None => BloscShuffle::Shuffle,
                    Some(code) => BloscShuffle::from_numcodecs(code, typesize)
                        .ok_or_else(|| format!("shuffle must be -1, 0, 1 or 2, got {code}"))?,
                };
                BytesToBytes::Blosc {
                    cname: c.cname(BloscCompressor::Lz4)?,
                    clevel: c.clevel(5)?,
                    shuffle,
                    typesize,
                    blocksize: c.blocksize()?,
                }
            }
            other => return Err(format!("unknown numcodecs codec '{other}'")),
        };
        Ok(codec)
    }

    /// The v3 metadata JSON (`{"name": ..., "configuration": {...}}`) — what zarr-python 3
    /// writes for this codec: core names for gzip, zstd, blosc and crc32c, `numcodecs.*` names
    /// for zlib, lz4 and bz2.
    pub fn to_v3_json(&self) -> Value {
        match self {
            BytesToBytes::Gzip { level } => {
                json!({"name": "gzip", "configuration": {"level": level}})
            }
            BytesToBytes::Zlib { level } => {
                json!({"name": "numcodecs.zlib", "configuration": {"level": level}})
            }
            BytesToBytes::Zstd { level, checksum } => json!({
                "name": "zstd",
                "configuration": {"level": level, "checksum": checksum}
            }),
            BytesToBytes::Blosc {
                cname,
                clevel,
                shuffle,
                typesize,
                blocksize,
            } => json!({
                "name": "blosc",
                "configuration": {
                    "typesize": (*typesize).max(1),
                    "cname": cname.name(),
                    "clevel": clevel,
                    "shuffle": shuffle.name(),
                    "blocksize": blocksize,
                }
            }),
            BytesToBytes::Lz4 { acceleration } => json!({
                "name": "numcodecs.lz4",
                "configuration": {"acceleration": acceleration}
            }),
            BytesToBytes::Bz2 { level } => {
                json!({"name": "numcodecs.bz2", "configuration": {"level": level}})
            }
            BytesToBytes::Crc32c => json!({"name": "crc32c"}),
        }
    }

    /// The v2 (numcodecs) compressor/filter JSON — what numcodecs' `get_config()` returns.
    /// Blosc's `typesize` is left out: numcodecs before 0.16 does not accept it.
    pub fn to_v2_json(&self) -> Value {
        match self {
            BytesToBytes::Gzip { level } => json!({"id": "gzip", "level": level}),
            BytesToBytes::Zlib { level } => json!({"id": "zlib", "level": level}),
            BytesToBytes::Zstd { level, checksum } => {
                json!({"id": "zstd", "level": level, "checksum": checksum})
            }
            BytesToBytes::Blosc {
                cname,
                clevel,
                shuffle,
                blocksize,
                ..
            } => json!({
                "id": "blosc",
                "cname": cname.name(),
                "clevel": clevel,
                "shuffle": shuffle.code(),
                "blocksize": blocksize,
            }),
            BytesToBytes::Lz4 { acceleration } => {
                json!({"id": "lz4", "acceleration": acceleration})
            }
            BytesToBytes::Bz2 { level } => json!({"id": "bz2", "level": level}),
            BytesToBytes::Crc32c => json!({"id": "crc32c"}),
        }
    }

    /// The codec's short name (`gzip`, `zlib`, `zstd`, `blosc`, `lz4`, `bz2`, `crc32c`), used in
    /// errors and descriptions.
    pub fn name(&self) -> &'static str {
        match self {
            BytesToBytes::Gzip { .. } => "gzip",
            BytesToBytes::Zlib { .. } => "zlib",
            BytesToBytes::Zstd { .. } => "zstd",
            BytesToBytes::Blosc { .. } => "blosc",
            BytesToBytes::Lz4 { .. } => "lz4",
            BytesToBytes::Bz2 { .. } => "bz2",
            BytesToBytes::Crc32c => "crc32c",
        }
    }

    /// Decode. `max_size` bounds the decoded size (the caller passes the exact size when it
    /// knows it, else a limit): a header announcing more, or a stream producing more, fails
    /// with [`ChunkError::TooLarge`]; no buffer is sized by an unchecked header value. The
    /// caller checks an exact size itself.
    ///
    /// crc32c verifies the trailing 4-byte little-endian checksum ([`ChunkError::Checksum`] on
    /// mismatch) and returns a zero-copy slice of `input`.
    pub fn decode(&self, input: Bytes, max_size: usize) -> Result<Bytes, ChunkError> {
        let name = self.name();
        match self {
            BytesToBytes::Gzip { .. } => {
                let hint = gzip_size_hint(&input);
                let decoder = flate2::bufread::MultiGzDecoder::new(&input[..]);
                read_bounded(decoder, max_size, hint, name).map(Bytes::from)
            }
            BytesToBytes::Zlib { .. } => {
                let hint = input.len().saturating_mul(4);
                let decoder = flate2::bufread::ZlibDecoder::new(&input[..]);
                read_bounded(decoder, max_size, hint, name).map(Bytes::from)
            }
            BytesToBytes::Zstd { .. } => zstd_decode(&input, max_size).map(Bytes::from),
            BytesToBytes::Blosc { .. } => blosc::decompress(&input, max_size).map(Bytes::from),
            BytesToBytes::Lz4 { .. } => lz4_decode(&input, max_size).map(Bytes::from),
            BytesToBytes::Bz2 { .. } => {
                let hint = input.len().saturating_mul(4);
                let decoder = bzip2::bufread::MultiBzDecoder::new(&input[..]);
                read_bounded(decoder, max_size, hint, name).map(Bytes::from)
            }
            BytesToBytes::Crc32c => {
                let Some(data_len) = input.len().checked_sub(4) else {
                    return Err(ChunkError::Truncated(format!(
                        "crc32c: {} bytes is shorter than the 4-byte checksum",
                        input.len()
                    )));
                };
                if data_len > max_size {
                    return Err(too_large(name, data_len, max_size));
                }
                let mut word = [0u8; 4];
                word.copy_from_slice(&input[data_len..]);
                let stored = u32::from_le_bytes(word);
                let computed = crc32c::crc32c(&input[..data_len]);
                if stored != computed {
                    return Err(ChunkError::Checksum { stored, computed });
                }
                Ok(input.slice(..data_len))
            }
        }
    }

    /// Whether [`Self::stream_decoder`] has a reader for this codec.
    pub(crate) fn streams(&self) -> bool {
        matches!(
            self,
            BytesToBytes::Gzip { .. } | BytesToBytes::Zlib { .. } | BytesToBytes::Zstd { .. }
        )
    }

    /// The decoded size `input` announces, for the codecs whose format says it (zstd's frame
    /// header, gzip's trailer): only an estimate for sizing buffers, never trusted.
    pub(crate) fn announced_size(&self, input: &[u8]) -> Option<usize> {
        match self {
            // No more than a zstd frame can expand to (see `zstd_decode`).
            BytesToBytes::Zstd { .. } => zstd::zstd_safe::get_frame_content_size(input)
                .ok()
                .flatten()
                .and_then(|s| usize::try_from(s).ok())
                .filter(|&s| {
                    s <= input
                        .len()
                        .saturating_mul(32 * 1024)
                        .saturating_add(128 * 1024)
                }),
            BytesToBytes::Gzip { .. } => Some(gzip_size_hint(input)),
            _ => None,
        }
    }

    /// A reader that decodes `input` as it is read, for the codecs that decode as a stream
    /// (gzip, zlib, zstd); `None` for the others. Errors surface from `read`. The caller
    /// bounds how much it reads.
    pub(crate) fn stream_decoder(&self, input: &Bytes) -> Option<Box<dyn Read + Send>> {
        if !self.streams() {
            return None;
        }
        let input = std::io::Cursor::new(input.clone());
        match self {
            BytesToBytes::Gzip { .. } => {
                Some(Box::new(flate2::bufread::MultiGzDecoder::new(input)))
            }
            BytesToBytes::Zlib { .. } => Some(Box::new(flate2::bufread::ZlibDecoder::new(input))),
            BytesToBytes::Zstd { .. } => zstd::stream::read::Decoder::with_buffer(input)
                .ok()
                .map(|d| Box::new(d) as Box<dyn Read + Send>),
            _ => None,
        }
    }

    /// Encode (used by the writer and tests).
    pub fn encode(&self, input: &[u8]) -> Result<Vec<u8>, ChunkError> {
        let name = self.name();
        let io_err = |e: std::io::Error| ChunkError::codec(name, e);
        match self {
            BytesToBytes::Gzip { level } => {
                let level = deflate_compression(*level, name)?;
                let out = Vec::with_capacity(input.len() / 2 + 64);
                let mut encoder = flate2::write::GzEncoder::new(out, level);
                encoder.write_all(input).map_err(io_err)?;
                encoder.finish().map_err(io_err)
            }
            BytesToBytes::Zlib { level } => {
                let level = deflate_compression(*level, name)?;
                let out = Vec::with_capacity(input.len() / 2 + 64);
                let mut encoder = flate2::write::ZlibEncoder::new(out, level);
                encoder.write_all(input).map_err(io_err)?;
                encoder.finish().map_err(io_err)
            }
            BytesToBytes::Zstd { level, checksum } => {
                let mut compressor = zstd::bulk::Compressor::new(*level).map_err(io_err)?;
                compressor
                    .set_parameter(zstd::zstd_safe::CParameter::ChecksumFlag(*checksum))
                    .map_err(io_err)?;
                // The one-shot API writes the content size into the frame header.
                compressor.compress(input).map_err(io_err)
            }
            BytesToBytes::Blosc {
                cname,
                clevel,
                shuffle,
                typesize,
                blocksize,
            } => blosc::compress(
                input,
                cname.c_name(),
                *clevel,
                shuffle.code(),
                *typesize,
                *blocksize,
            ),
            BytesToBytes::Lz4 { .. } => {
                // numcodecs reads the size as a signed 32-bit integer.
                let size = i32::try_from(input.len()).map_err(|_| {
                    ChunkError::TooLarge(format!(
                        "lz4: cannot encode {} bytes, the format's limit is {}",
                        input.len(),
                        i32::MAX
                    ))
                })?;
                let bound = lz4_flex::block::get_maximum_output_size(input.len());
                let mut out = vec![0u8; 4 + bound];
                out[..4].copy_from_slice(&size.to_le_bytes());
                let n = lz4_flex::block::compress_into(input, &mut out[4..])
                    .map_err(|e| ChunkError::codec(name, e))?;
                out.truncate(4 + n);
                Ok(out)
            }
            BytesToBytes::Bz2 { level } => {
                let level = bzip2::Compression::try_new(*level).ok_or_else(|| {
                    ChunkError::codec(name, format!("level {level} is not in 1..=9"))
                })?;
                let out = Vec::with_capacity(input.len() / 2 + 64);
                let mut encoder = bzip2::write::BzEncoder::new(out, level);
                encoder.write_all(input).map_err(io_err)?;
                encoder.finish().map_err(io_err)
            }
            BytesToBytes::Crc32c => {
                let mut out = Vec::with_capacity(input.len() + 4);
                out.extend_from_slice(input);
                out.extend_from_slice(&crc32c::crc32c(input).to_le_bytes());
                Ok(out)
            }
        }
    }
}

/// An empty buffer with room for `capacity` bytes; an allocation failure is an error (the size
/// comes from, or is bounded by, the chunk), not an abort.
fn buffer(capacity: usize, codec: &str) -> Result<Vec<u8>, ChunkError> {
    let mut out = Vec::new();
    out.try_reserve_exact(capacity)
        .map_err(|_| ChunkError::TooLarge(format!("{codec}: cannot allocate {capacity} bytes")))?;
    Ok(out)
}

fn too_large(codec: &str, size: usize, max_size: usize) -> ChunkError {
    ChunkError::TooLarge(format!(
        "{codec}: chunk decodes to {size} bytes, more than the limit of {max_size}"
    ))
}

fn deflate_compression(level: u32, codec: &'static str) -> Result<flate2::Compression, ChunkError> {
    if level > 9 {
        return Err(ChunkError::codec(
            codec,
            format!("level {level} is not in 0..=9"),
        ));
    }
    Ok(flate2::Compression::new(level))
}

/// Read a decoder to its end, failing with [`ChunkError::TooLarge`] once it produces more than
/// `max_size` bytes. `hint` is a guess of the decoded size for the first allocation.
fn read_bounded<R: Read>(
    reader: R,
    max_size: usize,
    hint: usize,
    codec: &'static str,
) -> Result<Vec<u8>, ChunkError> {
    let mut out = buffer(hint.min(max_size), codec)?;
    let limit = u64::try_from(max_size)
        .unwrap_or(u64::MAX)
        .saturating_add(1);
    reader
        .take(limit)
        .read_to_end(&mut out)
        .map_err(|e| ChunkError::codec(codec, e))?;
    if out.len() > max_size {
        return Err(ChunkError::TooLarge(format!(
            "{codec}: chunk decodes to more than the limit of {max_size} bytes"
        )));
    }
    Ok(out)
}

/// The decoded size a single-member gzip stream announces in its trailer (ISIZE, the size
/// modulo 2^32) — only a first-allocation guess, never trusted: ignored when more than deflate's
/// maximum ratio (1032:1) allows, and bounded by the caller's limit in [`read_bounded`].
fn gzip_size_hint(input: &[u8]) -> usize {
    let fallback = input.len().saturating_mul(4);
    match input.len().checked_sub(4).and_then(|at| input.get(at..)) {
        Some(tail) if input.len() >= 18 => {
            let mut word = [0u8; 4];
            word.copy_from_slice(tail);
            let isize = u32::from_le_bytes(word) as usize;
            if isize <= input.len().saturating_mul(1032) {
                isize
            } else {
                fallback
            }
        }
        _ => fallback,
    }
}

fn zstd_decode(input: &[u8], max_size: usize) -> Result<Vec<u8>, ChunkError> {
    const NAME: &str = "zstd";
    let content_size = zstd::zstd_safe::get_frame_content_size(input)
        .map_err(|_| ChunkError::codec(NAME, "not a zstd frame (bad magic or header)"))?;
    let Some(size) = content_size else {
        // No content size in the frame header: stream, bounded.
        return zstd_stream(input, max_size, input.len().saturating_mul(4));
    };
    let size = usize::try_from(size)
        .ok()
        .filter(|&s| s <= max_size)
        .ok_or_else(|| {
            ChunkError::TooLarge(format!(
                "zstd: frame header announces {size} bytes, more than the limit of {max_size}"
            ))
        })?;
    // A zstd block expands at most to 128 KiB (an RLE block: 3-byte header and 1 byte), so a
    // frame header announcing more than that ratio is corrupt; do not allocate for it.
    if size
        > input
            .len()
            .saturating_mul(32 * 1024)
            .saturating_add(128 * 1024)
    {
        return Err(ChunkError::codec(
            NAME,
            format!(
                "frame header announces {size} bytes, more than {} compressed bytes can hold",
                input.len()
            ),
        ));
    }
    let single_frame = zstd::zstd_safe::find_frame_compressed_size(input).ok() == Some(input.len());
    if !single_frame {
        // Several frames (or trailing bytes): the first frame's size is only a lower bound.
        return zstd_stream(input, max_size, size);
    }
    let mut out = buffer(size, NAME)?;
    let mut decompressor =
        zstd::bulk::Decompressor::new().map_err(|e| ChunkError::codec(NAME, e))?;
    let written = decompressor
        .decompress_to_buffer(input, &mut out)
        .map_err(|e| ChunkError::codec(NAME, e))?;
    if written != size {
        return Err(ChunkError::codec(
            NAME,
            format!("frame decoded to {written} bytes, its header announces {size}"),
        ));
    }
    Ok(out)
}

fn zstd_stream(input: &[u8], max_size: usize, hint: usize) -> Result<Vec<u8>, ChunkError> {
    let decoder = zstd::stream::read::Decoder::with_buffer(input)
        .map_err(|e| ChunkError::codec("zstd", e))?;
    read_bounded(decoder, max_size, hint, "zstd")
}

fn lz4_decode(input: &[u8], max_size: usize) -> Result<Vec<u8>, ChunkError> {
    const NAME: &str = "lz4";
    let Some((head, block)) = input.split_first_chunk::<4>() else {
        return Err(ChunkError::Truncated(format!(
            "lz4: {} bytes is shorter than the 4-byte size header",
            input.len()
        )));
    };
    let size = u32::from_le_bytes(*head) as usize;
    if size > max_size {
        return Err(ChunkError::TooLarge(format!(
            "lz4: header announces {size} bytes, more than the limit of {max_size}"
        )));
    }
    if size == 0 && block.is_empty() {
        return Ok(Vec::new());
    }
    // One LZ4 sequence expands at most 255-fold (a match length byte of 255), so a header
    // announcing more than that is corrupt; do not allocate for it.
    if size > block.len().saturating_mul(255).saturating_add(64) {
        return Err(ChunkError::codec(
            NAME,
            format!(
                "header announces {size} bytes, more than an LZ4 block of {} bytes can hold",
                block.len()
            ),
        ));
    }
    let mut out = buffer(size, NAME)?;
    out.resize(size, 0);
    let written = lz4_flex::block::decompress_into(block, &mut out)
        .map_err(|e| ChunkError::codec(NAME, e))?;
    if written != size {
        return Err(ChunkError::codec(
            NAME,
            format!("block decoded to {written} bytes, the header announces {size}"),
        ));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    // Produced by Python numcodecs 0.16.6 from `sample()`: see `python_vectors_decode`.
    const PY_BLOSC_LZ4_SHUFFLE: &str = "02012101001000000010000075000000140000005d0000001f000100081f010400081f020400081f030400081f040400081f050400081f060400081f070400081f080400081f090400081f0a0400081f0b0400081f0c0400080f0200090f6c01ffffffffffffffffffffffffffff6e500003000000";
    const PY_BLOSC_ZSTD_BITSHUFFLE: &str = "0201940100100000001000007c000000140000006400000028b52ffd60000fd5020088000000101111111111110111110000111126a0a05dd6e0821ada0da6fb2de9b0113deae4f06c594b29f30c8850cf70e7559f8f03747c7a360bdab4cb3fee836bf1e9ad3a06f7a4f2eef86a0dc4913751af555ddf07a09e9302";
    const PY_BLOSC_BLOSCLZ_NOSHUFFLE: &str = "0201000100100000001000008000000014000000680000002300000000e00e03010001e01103010002e01103010003e01103010004e01103010005e01103010006e01103010007e01103010008e01103010009e0110301000ae0110301000be0110301000ce01103e01301e1ffffffffffffffffffffffffffff7b6b02000000";
    const PY_BLOSC_ZLIB_SHUFFLE: &str = "020161010010000000100000600000001400000048000000785eedd0b911c02010c0c0e33160e3feeb25264009a934a30636e25c82335ce00a3f70833b3ce017fee009ff30a5b5d65a6badb5d65aef69adb5d65a6badb5d67bb7d60b371e1792";
    const PY_BLOSC_LZ4HC_AUTOSHUFFLE: &str = "0201240100100000001000009000000014000000780000007f000000101111110700130001004f111111010700130f5b00ff93060f000001000f0e00100347000a78000f0e00050f5b00ff90060f000740000301000d1c00076a00069b00032d000e1c000f5b00ff950e01000f4700030f39000c0aa2000e78000f5b00ff7b0f0100fffffffffffffff9500000000000";
    const PY_ZSTD_L3: &str = "28b52ffd60000f05040082c8118b1222111111116ee259d148dc4d3c2b1a89bb896745237137f1ac6824ee269e158dc4ddc4b3a291b89b785634127713cf8a46e26ee259d148dc4d3c2b1a89bb89674523711720809da850fcf085dd11508415c26f1110fe0a5264a8db7e920687baf5272931d45d3f498343ddfa939418eaaee7d39a5076fba1069b02";
    const PY_ZSTD_CHECKSUM: &str = "28b52ffd64000f05040082c8118b1222111111116ee259d148dc4d3c2b1a89bb896745237137f1ac6824ee269e158dc4ddc4b3a291b89b785634127713cf8a46e26ee259d148dc4d3c2b1a89bb89674523711720809da850fcf085dd11508415c26f1110fe0a5264a8db7e920687baf5272931d45d3f498343ddfa939418eaaee7d39a5076fba1069b025b162f7b";
    const PY_LZ4: &str = "001000001f000100081f010400081f020400081f030400081f040400081f050400081f060400081f070400081f080400081f090400081f0a0400081f0b0400081f0c0400080f0200090f6c01ffffffffffffffffffffffffffff6e500003000000";
    const PY_ZLIB_L6: &str = "789cedd0c70d00200080407bdf7f5e27909f3f4858e0427817e10467b8c0156e7087073ce1056ff8c094d65a6badb5d65a6badb5d65a6badb5d65affb4be371e1792";
    const PY_GZIP_L5: &str = "1f8b0800e955036b00ffedd0b911c02010c0c0e33160e3feeb25264009a934a30636e25c82335ce00a3f70833b3ce017fee009ff30a5b5d65a6badb5d65aef69adb5d65a6badb5d67bb7d60b7d86f2fe00100000";
    const PY_BZ2_L9: &str = "425a6839314159265359652dae64000001e0007ffc004820007053000014a909a64f226f8b54dc93811c60b128f928e651f651d4a3b947e946651a419418a688a57b4f76292bf8bb9229c28483296d7320";
    const PY_CRC32C: &str = "7a6172726f7720637263333263207465737460de404c";

    /// `((np.arange(1024) // 7) % 13).astype('<u4').tobytes()`.
    fn sample() -> Vec<u8> {
        (0..1024u32)
            .flat_map(|i| ((i / 7) % 13).to_le_bytes())
            .collect()
    }

    /// Pseudo-random, incompressible bytes.
    fn noise(len: usize) -> Vec<u8> {
        let mut state: u64 = 0x9E37_79B9_7F4A_7C15;
        (0..len)
            .map(|_| {
                state = state
                    .wrapping_mul(6_364_136_223_846_793_005)
                    .wrapping_add(1_442_695_040_888_963_407);
                (state >> 56) as u8
            })
            .collect()
    }

    fn hex(s: &str) -> Vec<u8> {
        assert!(s.len().is_multiple_of(2));
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex"))
            .collect()
    }

    fn all_codecs() -> Vec<BytesToBytes> {
        let mut codecs = vec![BytesToBytes::Crc32c];
        for level in [0, 1, 5, 9] {
            codecs.push(BytesToBytes::Gzip { level });
            codecs.push(BytesToBytes::Zlib { level });
        }
        for level in [-5, 0, 1, 3, 19] {
            for checksum in [false, true] {
                codecs.push(BytesToBytes::Zstd { level, checksum });
            }
        }
        for acceleration in [1, 10] {
            codecs.push(BytesToBytes::Lz4 { acceleration });
        }
        for level in [1, 9] {
            codecs.push(BytesToBytes::Bz2 { level });
        }
        for cname in BloscCompressor::ALL {
            for shuffle in [
                BloscShuffle::NoShuffle,
                BloscShuffle::Shuffle,
                BloscShuffle::BitShuffle,
            ] {
                for (typesize, blocksize, clevel) in
                    [(4, 0, 5), (1, 0, 9), (0, 0, 1), (8, 1024, 5), (300, 0, 0)]
                {
                    codecs.push(BytesToBytes::Blosc {
                        cname,
                        clevel,
                        shuffle,
                        typesize,
                        blocksize,
                    });
                }
            }
        }
        codecs
    }

    fn inputs() -> Vec<Vec<u8>> {
        let mut big = sample();
        big.extend(noise(70_000));
        big.extend(vec![0u8; 200_000]);
        vec![Vec::new(), vec![42], sample(), noise(5000), big]
    }

    #[test]
    fn round_trip_every_codec_and_config() {
        for codec in all_codecs() {
            for input in inputs() {
                let encoded = codec
                    .encode(&input)
                    .unwrap_or_else(|e| panic!("{codec:?} encode: {e}"));
                let exact = codec
                    .decode(Bytes::from(encoded.clone()), input.len())
                    .unwrap_or_else(|e| panic!("{codec:?} decode {}: {e}", input.len()));
                assert_eq!(exact, input, "{codec:?}");
                let loose = codec
                    .decode(Bytes::from(encoded.clone()), usize::MAX)
                    .unwrap_or_else(|e| panic!("{codec:?} decode loose: {e}"));
                assert_eq!(loose, input, "{codec:?}");
                if !input.is_empty() {
                    let err = codec.decode(Bytes::from(encoded), input.len() - 1);
                    assert!(
                        matches!(err, Err(ChunkError::TooLarge(_))),
                        "{codec:?}: {err:?}"
                    );
                }
            }
        }
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
        let header = blosc::read_header(&encoded).unwrap();
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

    #[test]
    fn python_vectors_decode() {
        let expected = sample();
        let cases: [(&str, &str); 11] = [
            ("blosc", PY_BLOSC_LZ4_SHUFFLE),
            ("blosc", PY_BLOSC_ZSTD_BITSHUFFLE),
            ("blosc", PY_BLOSC_BLOSCLZ_NOSHUFFLE),
            ("blosc", PY_BLOSC_ZLIB_SHUFFLE),
            ("blosc", PY_BLOSC_LZ4HC_AUTOSHUFFLE),
            ("zstd", PY_ZSTD_L3),
            ("zstd", PY_ZSTD_CHECKSUM),
            ("lz4", PY_LZ4),
            ("zlib", PY_ZLIB_L6),
            ("gzip", PY_GZIP_L5),
            ("bz2", PY_BZ2_L9),
        ];
        for (id, data) in cases {
            let mut config = Map::new();
            config.insert("id".into(), Value::from(id));
            let codec = BytesToBytes::from_v2(&config).unwrap().unwrap();
            let decoded = codec.decode(Bytes::from(hex(data)), expected.len());
            assert_eq!(decoded.unwrap(), expected, "{id} {data}");
        }
        let crc = BytesToBytes::Crc32c
            .decode(Bytes::from(hex(PY_CRC32C)), 100)
            .unwrap();
        assert_eq!(&crc[..], b"zarrow crc32c test");
        // Our crc32c encoder agrees with numcodecs byte for byte.
        assert_eq!(
            BytesToBytes::Crc32c.encode(b"zarrow crc32c test").unwrap(),
            hex(PY_CRC32C)
        );
        // numcodecs' empty buffers.
        let blosc = BytesToBytes::Blosc {
            cname: BloscCompressor::Lz4,
            clevel: 5,
            shuffle: BloscShuffle::Shuffle,
            typesize: 1,
            blocksize: 0,
        };
        let empty = blosc.decode(Bytes::from(hex("02013301000000000100000010000000")), 0);
        assert!(empty.unwrap().is_empty());
        let lz4 = BytesToBytes::Lz4 { acceleration: 1 };
        assert!(lz4
            .decode(Bytes::from(hex("0000000000")), 0)
            .unwrap()
            .is_empty());
    }

    #[test]
    fn crc32c_is_zero_copy_and_checked() {
        let encoded = Bytes::from(BytesToBytes::Crc32c.encode(b"hello").unwrap());
        let decoded = BytesToBytes::Crc32c.decode(encoded.clone(), 5).unwrap();
        assert_eq!(decoded.as_ptr(), encoded.as_ptr());
        assert_eq!(&decoded[..], b"hello");

        let mut bad = encoded.to_vec();
        bad[1] ^= 0x40;
        match BytesToBytes::Crc32c.decode(Bytes::from(bad), 5) {
            Err(ChunkError::Checksum { stored, computed }) => {
                assert_eq!(stored, crc32c::crc32c(b"hello"));
                assert_ne!(stored, computed);
            }
            other => panic!("{other:?}"),
        }
        let mut bad_sum = encoded.to_vec();
        bad_sum[6] ^= 1;
        assert!(matches!(
            BytesToBytes::Crc32c.decode(Bytes::from(bad_sum), 5),
            Err(ChunkError::Checksum { .. })
        ));
        assert!(matches!(
            BytesToBytes::Crc32c.decode(Bytes::from_static(b"abc"), 5),
            Err(ChunkError::Truncated(_))
        ));
        // Only the checksum: empty data.
        let empty = BytesToBytes::Crc32c.encode(b"").unwrap();
        assert!(BytesToBytes::Crc32c
            .decode(Bytes::from(empty), 0)
            .unwrap()
            .is_empty());
    }

    #[test]
    fn zstd_without_content_size_and_multiple_frames() {
        let input = sample();
        let mut encoder = zstd::stream::write::Encoder::new(Vec::new(), 3).unwrap();
        encoder.include_contentsize(false).unwrap();
        encoder.write_all(&input).unwrap();
        let frame = encoder.finish().unwrap();
        assert_eq!(
            zstd::zstd_safe::get_frame_content_size(&frame).unwrap(),
            None
        );
        let codec = BytesToBytes::Zstd {
            level: 3,
            checksum: false,
        };
        assert_eq!(
            codec
                .decode(Bytes::from(frame.clone()), input.len())
                .unwrap(),
            input
        );
        assert_eq!(
            codec
                .decode(Bytes::from(frame.clone()), usize::MAX)
                .unwrap(),
            input
        );
        assert!(matches!(
            codec.decode(Bytes::from(frame.clone()), 100),
            Err(ChunkError::TooLarge(_))
        ));
        // Truncated streaming frame.
        assert!(codec
            .decode(Bytes::from(frame[..frame.len() - 3].to_vec()), usize::MAX)
            .is_err());

        // Two frames with content sizes, concatenated (numcodecs decodes them as one buffer).
        let mut two = codec.encode(b"hello ").unwrap();
        two.extend(codec.encode(b"world").unwrap());
        assert_eq!(
            &codec.decode(Bytes::from(two.clone()), 11).unwrap()[..],
            b"hello world"
        );
        assert!(matches!(
            codec.decode(Bytes::from(two), 10),
            Err(ChunkError::TooLarge(_))
        ));

        // A corrupted checksum is detected.
        let mut sum = BytesToBytes::Zstd {
            level: 1,
            checksum: true,
        }
        .encode(&input)
        .unwrap();
        let last = sum.len() - 1;
        sum[last] ^= 0xff;
        assert!(codec.decode(Bytes::from(sum), input.len()).is_err());
    }

    #[test]
    fn concatenated_gzip_and_bz2_members() {
        for codec in [
            BytesToBytes::Gzip { level: 5 },
            BytesToBytes::Bz2 { level: 9 },
        ] {
            let mut two = codec.encode(b"hello ").unwrap();
            two.extend(codec.encode(b"world").unwrap());
            assert_eq!(
                &codec.decode(Bytes::from(two), 11).unwrap()[..],
                b"hello world"
            );
        }
        // zlib: bytes after the end of the stream are ignored, as Python's zlib does.
        let zlib = BytesToBytes::Zlib { level: 1 };
        let mut trailing = zlib.encode(b"hello").unwrap();
        trailing.extend_from_slice(b"garbage");
        assert_eq!(
            &zlib.decode(Bytes::from(trailing), 5).unwrap()[..],
            b"hello"
        );
    }

    /// Truncated, garbage, empty and bit-flipped inputs never panic; the first three fail.
    #[test]
    fn corrupt_input_fails_without_panicking() {
        let input = sample();
        let codecs = [
            BytesToBytes::Gzip { level: 5 },
            BytesToBytes::Zlib { level: 5 },
            BytesToBytes::Zstd {
                level: 3,
                checksum: false,
            },
            BytesToBytes::Zstd {
                level: 3,
                checksum: true,
            },
            BytesToBytes::Blosc {
                cname: BloscCompressor::Lz4,
                clevel: 5,
                shuffle: BloscShuffle::Shuffle,
                typesize: 4,
                blocksize: 0,
            },
            BytesToBytes::Blosc {
                cname: BloscCompressor::Zstd,
                clevel: 5,
                shuffle: BloscShuffle::BitShuffle,
                typesize: 4,
                blocksize: 0,
            },
            BytesToBytes::Blosc {
                cname: BloscCompressor::BloscLz,
                clevel: 5,
                shuffle: BloscShuffle::NoShuffle,
                typesize: 4,
                blocksize: 0,
            },
            BytesToBytes::Blosc {
                cname: BloscCompressor::Zlib,
                clevel: 5,
                shuffle: BloscShuffle::Shuffle,
                typesize: 4,
                blocksize: 0,
            },
            BytesToBytes::Lz4 { acceleration: 1 },
            BytesToBytes::Bz2 { level: 9 },
            BytesToBytes::Crc32c,
        ];
        let garbage: Vec<u8> = noise(300);
        for codec in &codecs {
            let encoded = codec.encode(&input).unwrap();
            for cut in [1, 2, 3, 5, 17, encoded.len() / 2, encoded.len() - 1] {
                let truncated = Bytes::from(encoded[..cut].to_vec());
                let result = codec.decode(truncated, usize::MAX);
                assert!(result.is_err(), "{codec:?} truncated to {cut}: {result:?}");
            }
            let result = codec.decode(Bytes::from(garbage.clone()), 1 << 20);
            assert!(result.is_err(), "{codec:?} garbage: {result:?}");
            if !matches!(codec, BytesToBytes::Bz2 { .. }) {
                let result = codec.decode(Bytes::new(), 1 << 20);
                assert!(result.is_err(), "{codec:?} empty: {result:?}");
            }
            // Flip every byte in turn: any outcome but a panic, and never more than the limit.
            for i in 0..encoded.len() {
                for mask in [0x01u8, 0x80, 0xff] {
                    let mut bad = encoded.clone();
                    bad[i] ^= mask;
                    if let Ok(out) = codec.decode(Bytes::from(bad), input.len() * 2) {
                        assert!(out.len() <= input.len() * 2);
                    }
                }
            }
        }
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
    fn headers_claiming_huge_sizes() {
        // lz4: 4 GiB announced.
        let lz4 = BytesToBytes::Lz4 { acceleration: 1 };
        let mut claim = vec![0xff, 0xff, 0xff, 0xff];
        claim.extend(noise(64));
        assert!(matches!(
            lz4.decode(Bytes::from(claim.clone()), 1 << 20),
            Err(ChunkError::TooLarge(_))
        ));
        // With no limit the ratio check stops it before any allocation.
        assert!(matches!(
            lz4.decode(Bytes::from(claim), usize::MAX),
            Err(ChunkError::Codec { codec: "lz4", .. })
        ));

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

        // zstd: frame header with an 8-byte content size of 2^40, then junk.
        let zstd = BytesToBytes::Zstd {
            level: 0,
            checksum: false,
        };
        let mut frame = vec![0x28, 0xb5, 0x2f, 0xfd, 0xe0];
        frame.extend_from_slice(&(1u64 << 40).to_le_bytes());
        frame.extend(noise(32));
        assert!(matches!(
            zstd.decode(Bytes::from(frame.clone()), 1 << 30),
            Err(ChunkError::TooLarge(_))
        ));
        assert!(matches!(
            zstd.decode(Bytes::from(frame), usize::MAX),
            Err(ChunkError::Codec { codec: "zstd", .. })
        ));

        // gzip: a trailer claiming 4 GiB only affects the first allocation guess.
        let gzip = BytesToBytes::Gzip { level: 1 };
        let mut encoded = gzip.encode(b"hello").unwrap();
        let n = encoded.len();
        encoded[n - 4..].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(gzip.decode(Bytes::from(encoded), usize::MAX).is_err());

        // Streams that decode to more than the limit stop at the limit.
        let zeros = vec![0u8; 1 << 20];
        for codec in [
            BytesToBytes::Gzip { level: 9 },
            BytesToBytes::Zlib { level: 9 },
            BytesToBytes::Bz2 { level: 9 },
        ] {
            let encoded = codec.encode(&zeros).unwrap();
            assert!(matches!(
                codec.decode(Bytes::from(encoded), 1000),
                Err(ChunkError::TooLarge(_))
            ));
        }
    }

    #[test]
    fn bad_encoder_settings_are_errors() {
        assert!(BytesToBytes::Gzip { level: 10 }.encode(b"x").is_err());
        assert!(BytesToBytes::Zlib { level: 42 }.encode(b"x").is_err());
        assert!(BytesToBytes::Bz2 { level: 0 }.encode(b"x").is_err());
        assert!(BytesToBytes::Bz2 { level: 10 }.encode(b"x").is_err());
        let blosc = BytesToBytes::Blosc {
            cname: BloscCompressor::Zstd,
            clevel: 10,
            shuffle: BloscShuffle::Shuffle,
            typesize: 4,
            blocksize: 0,
        };
        assert!(blosc.encode(b"x").is_err());
    }

    #[test]
    fn parse_v3_core_codecs() {
        let parse = |name: &str, config: Value| BytesToBytes::from_v3(name, Some(&config));
        assert_eq!(
            parse("gzip", json!({"level": 7})).unwrap(),
            Some(BytesToBytes::Gzip { level: 7 })
        );
        assert_eq!(
            BytesToBytes::from_v3("gzip", None).unwrap(),
            Some(BytesToBytes::Gzip { level: 5 })
        );
        assert_eq!(
            parse("zstd", json!({"level": -3, "checksum": true})).unwrap(),
            Some(BytesToBytes::Zstd {
                level: -3,
                checksum: true
            })
        );
        assert_eq!(
            parse(
                "blosc",
                json!({"typesize": 4, "cname": "lz4", "clevel": 9, "shuffle": "bitshuffle", "blocksize": 0})
            )
            .unwrap(),
            Some(BytesToBytes::Blosc {
                cname: BloscCompressor::Lz4,
                clevel: 9,
                shuffle: BloscShuffle::BitShuffle,
                typesize: 4,
                blocksize: 0,
            })
        );
        assert_eq!(
            parse(
                "blosc",
                json!({"cname": "zstd", "clevel": 5, "shuffle": "noshuffle"})
            )
            .unwrap(),
            Some(BytesToBytes::Blosc {
                cname: BloscCompressor::Zstd,
                clevel: 5,
                shuffle: BloscShuffle::NoShuffle,
                typesize: 1,
                blocksize: 0,
            })
        );
        assert_eq!(
            BytesToBytes::from_v3("crc32c", None).unwrap(),
            Some(BytesToBytes::Crc32c)
        );
        assert_eq!(
            parse("crc32c", json!({})).unwrap(),
            Some(BytesToBytes::Crc32c)
        );
        // Not ours.
        assert_eq!(BytesToBytes::from_v3("bytes", None).unwrap(), None);
        assert_eq!(BytesToBytes::from_v3("transpose", None).unwrap(), None);
        assert_eq!(
            BytesToBytes::from_v3("numcodecs.delta", None).unwrap(),
            None
        );
        assert_eq!(
            BytesToBytes::from_v3("numcodecs.crc32", None).unwrap(),
            None
        );
    }

    #[test]
    fn parse_v3_numcodecs_names() {
        let parse = |name: &str, config: Value| BytesToBytes::from_v3(name, Some(&config));
        assert_eq!(
            parse("numcodecs.zlib", json!({"level": 3})).unwrap(),
            Some(BytesToBytes::Zlib { level: 3 })
        );
        assert_eq!(
            BytesToBytes::from_v3("numcodecs.zlib", None).unwrap(),
            Some(BytesToBytes::Zlib { level: 1 })
        );
        assert_eq!(
            parse("zlib", json!({"level": 2})).unwrap(),
            Some(BytesToBytes::Zlib { level: 2 })
        );
        assert_eq!(
            parse("numcodecs.gzip", json!({})).unwrap(),
            Some(BytesToBytes::Gzip { level: 1 })
        );
        assert_eq!(
            parse("numcodecs.zstd", json!({"level": 5})).unwrap(),
            Some(BytesToBytes::Zstd {
                level: 5,
                checksum: false
            })
        );
        assert_eq!(
            parse("numcodecs.lz4", json!({"acceleration": 3})).unwrap(),
            Some(BytesToBytes::Lz4 { acceleration: 3 })
        );
        assert_eq!(
            parse("lz4", json!({})).unwrap(),
            Some(BytesToBytes::Lz4 { acceleration: 1 })
        );
        assert_eq!(
            parse("numcodecs.bz2", json!({"level": 9})).unwrap(),
            Some(BytesToBytes::Bz2 { level: 9 })
        );
        assert_eq!(
            BytesToBytes::from_v3("bz2", None).unwrap(),
            Some(BytesToBytes::Bz2 { level: 1 })
        );
        assert_eq!(
            parse("numcodecs.crc32c", json!({"location": "end"})).unwrap(),
            Some(BytesToBytes::Crc32c)
        );
        assert_eq!(
            parse(
                "numcodecs.blosc",
                json!({"cname": "zstd", "clevel": 3, "shuffle": 2, "blocksize": 0})
            )
            .unwrap(),
            Some(BytesToBytes::Blosc {
                cname: BloscCompressor::Zstd,
                clevel: 3,
                shuffle: BloscShuffle::BitShuffle,
                typesize: 0,
                blocksize: 0,
            })
        );
        // numcodecs defaults: lz4, clevel 5, byte shuffle.
        assert_eq!(
            BytesToBytes::from_v3("numcodecs.blosc", None).unwrap(),
            Some(BytesToBytes::Blosc {
                cname: BloscCompressor::Lz4,
                clevel: 5,
                shuffle: BloscShuffle::Shuffle,
                typesize: 0,
                blocksize: 0,
            })
        );
        // An "id" inside the configuration must agree.
        assert!(parse("numcodecs.zstd", json!({"id": "zstd"}))
            .unwrap()
            .is_some());
        assert!(parse("numcodecs.zstd", json!({"id": "gzip"})).is_err());
    }

    #[test]
    fn parse_v2_numcodecs() {
        let parse = |v: Value| BytesToBytes::from_v2(v.as_object().expect("object"));
        assert_eq!(
            parse(json!({"id": "zstd", "level": 1, "checksum": false})).unwrap(),
            Some(BytesToBytes::Zstd {
                level: 1,
                checksum: false
            })
        );
        assert_eq!(
            parse(json!({"id": "zstd", "level": 22})).unwrap(),
            Some(BytesToBytes::Zstd {
                level: 22,
                checksum: false
            })
        );
        assert_eq!(
            parse(json!({"id": "zlib", "level": -1})).unwrap(),
            Some(BytesToBytes::Zlib { level: 6 })
        );
        assert_eq!(
            parse(json!({"id": "gzip", "level": 9})).unwrap(),
            Some(BytesToBytes::Gzip { level: 9 })
        );
        assert_eq!(
            parse(json!({"id": "lz4", "acceleration": 1})).unwrap(),
            Some(BytesToBytes::Lz4 { acceleration: 1 })
        );
        assert_eq!(
            parse(json!({"id": "bz2", "level": 1})).unwrap(),
            Some(BytesToBytes::Bz2 { level: 1 })
        );
        assert_eq!(
            parse(json!({"id": "crc32c"})).unwrap(),
            Some(BytesToBytes::Crc32c)
        );
        assert_eq!(
            parse(
                json!({"id": "blosc", "cname": "lz4", "clevel": 5, "shuffle": 1, "blocksize": 0})
            )
            .unwrap(),
            Some(BytesToBytes::Blosc {
                cname: BloscCompressor::Lz4,
                clevel: 5,
                shuffle: BloscShuffle::Shuffle,
                typesize: 0,
                blocksize: 0,
            })
        );
        // AUTOSHUFFLE: bit shuffle for one-byte elements, byte shuffle otherwise / unknown.
        let auto = |typesize: Option<u64>| {
            let mut v = json!({"id": "blosc", "cname": "zstd", "clevel": 1, "shuffle": -1});
            if let Some(t) = typesize {
                v["typesize"] = json!(t);
            }
            match parse(v).unwrap() {
                Some(BytesToBytes::Blosc { shuffle, .. }) => shuffle,
                other => panic!("{other:?}"),
            }
        };
        assert_eq!(auto(Some(1)), BloscShuffle::BitShuffle);
        assert_eq!(auto(Some(8)), BloscShuffle::Shuffle);
        assert_eq!(auto(None), BloscShuffle::Shuffle);
        // Old blosc metadata without blocksize.
        assert!(
            parse(json!({"id": "blosc", "cname": "lz4", "clevel": 5, "shuffle": 1}))
                .unwrap()
                .is_some()
        );
        // Unknown ids are not ours.
        assert_eq!(parse(json!({"id": "lzma", "preset": 1})).unwrap(), None);
        assert_eq!(parse(json!({"id": "vlen-utf8"})).unwrap(), None);
    }

    #[test]
    fn bad_configs_are_errors() {
        let v2 = |v: Value| BytesToBytes::from_v2(v.as_object().expect("object"));
        let v3 = |name: &str, v: Value| BytesToBytes::from_v3(name, Some(&v));
        let bad_v2 = [
            json!({"level": 1}),
            json!({"id": 5}),
            json!({"id": "zstd", "level": "high"}),
            json!({"id": "zstd", "level": 1.5}),
            json!({"id": "zstd", "level": 1_u64 << 40}),
            json!({"id": "zstd", "checksum": 1}),
            json!({"id": "zlib", "level": 10}),
            json!({"id": "gzip", "level": -2}),
            json!({"id": "bz2", "level": 0}),
            json!({"id": "bz2", "level": 10}),
            json!({"id": "lz4", "acceleration": "fast"}),
            json!({"id": "crc32c", "location": "start"}),
            json!({"id": "crc32c", "location": "middle"}),
            json!({"id": "blosc", "cname": "snappy"}),
            json!({"id": "blosc", "cname": "brotli"}),
            json!({"id": "blosc", "clevel": 10}),
            json!({"id": "blosc", "shuffle": 3}),
            json!({"id": "blosc", "shuffle": "shuffle"}),
            json!({"id": "blosc", "blocksize": -1}),
            json!({"id": "blosc", "typesize": 0}),
            json!({"id": "zstd", "level": 1, "frobnicate": true}),
        ];
        for config in bad_v2 {
            assert!(v2(config.clone()).is_err(), "{config}");
        }
        let bad_v3 = [
            ("gzip", json!({"level": 12})),
            ("gzip", json!({"level": 5, "extra": 1})),
            ("gzip", json!([5])),
            ("gzip", json!("level")),
            ("zstd", json!({"level": 3, "checksum": "yes"})),
            (
                "blosc",
                json!({"cname": "lz4", "clevel": 5, "shuffle": 1, "typesize": 4}),
            ),
            (
                "blosc",
                json!({"cname": "lz4", "clevel": 5, "shuffle": "byteshuffle"}),
            ),
            (
                "blosc",
                json!({"cname": "snappy", "clevel": 5, "shuffle": "shuffle"}),
            ),
            (
                "blosc",
                json!({"cname": "lz4", "clevel": 5, "shuffle": "shuffle", "typesize": -4}),
            ),
            ("crc32c", json!({"location": "end"})),
            ("numcodecs.crc32c", json!({"location": "start"})),
            ("numcodecs.blosc", json!({"shuffle": "bitshuffle"})),
            ("numcodecs.zlib", json!({"id": "gzip"})),
            ("lz4", json!({"acceleration": 1, "mode": "fast"})),
        ];
        for (name, config) in bad_v3 {
            assert!(v3(name, config.clone()).is_err(), "{name} {config}");
        }
    }

    #[test]
    fn json_round_trips() {
        for codec in all_codecs() {
            let v3 = codec.to_v3_json();
            let name = v3["name"].as_str().unwrap();
            let parsed = BytesToBytes::from_v3(name, v3.get("configuration"))
                .unwrap()
                .unwrap();
            let v2 = codec.to_v2_json();
            let from_v2 = BytesToBytes::from_v2(v2.as_object().unwrap())
                .unwrap()
                .unwrap();
            match (&codec, &parsed, &from_v2) {
                (
                    BytesToBytes::Blosc { typesize, .. },
                    BytesToBytes::Blosc { typesize: t3, .. },
                    BytesToBytes::Blosc { typesize: t2, .. },
                ) => {
                    assert_eq!(*t3, (*typesize).max(1));
                    assert_eq!(*t2, 0);
                    let strip = |c: &BytesToBytes| match c {
                        BytesToBytes::Blosc {
                            cname,
                            clevel,
                            shuffle,
                            blocksize,
                            ..
                        } => (*cname, *clevel, *shuffle, *blocksize),
                        _ => unreachable!(),
                    };
                    assert_eq!(strip(&parsed), strip(&codec));
                    assert_eq!(strip(&from_v2), strip(&codec));
                }
                _ => {
                    assert_eq!(parsed, codec, "{v3}");
                    assert_eq!(from_v2, codec, "{v2}");
                }
            }
            assert_eq!(codec.name(), parsed.name());
        }
        assert_eq!(
            BytesToBytes::Zstd {
                level: 0,
                checksum: false
            }
            .to_v3_json(),
            json!({"name": "zstd", "configuration": {"level": 0, "checksum": false}})
        );
        assert_eq!(
            BytesToBytes::Blosc {
                cname: BloscCompressor::Zstd,
                clevel: 5,
                shuffle: BloscShuffle::Shuffle,
                typesize: 4,
                blocksize: 0
            }
            .to_v3_json(),
            json!({"name": "blosc", "configuration": {
                "typesize": 4, "cname": "zstd", "clevel": 5, "shuffle": "shuffle", "blocksize": 0
            }})
        );
        assert_eq!(BytesToBytes::Crc32c.to_v3_json(), json!({"name": "crc32c"}));
        assert_eq!(
            BytesToBytes::Zlib { level: 1 }.to_v3_json(),
            json!({"name": "numcodecs.zlib", "configuration": {"level": 1}})
        );
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
    fn decoding_is_thread_safe() {
        let input = sample().repeat(16);
        let codecs: Vec<(BytesToBytes, Vec<u8>)> = BloscCompressor::ALL
            .into_iter()
            .map(|cname| {
                let codec = BytesToBytes::Blosc {
                    cname,
                    clevel: 5,
                    shuffle: BloscShuffle::BitShuffle,
                    typesize: 4,
                    blocksize: 0,
                };
                let encoded = codec.encode(&input).unwrap();
                (codec, encoded)
            })
            .collect();
        std::thread::scope(|scope| {
            for _ in 0..8 {
                scope.spawn(|| {
                    for _ in 0..50 {
                        for (codec, encoded) in &codecs {
                            let out = codec
                                .decode(Bytes::from(encoded.clone()), input.len())
                                .unwrap();
                            assert_eq!(out, input);
                            assert_eq!(&codec.encode(&input).unwrap(), encoded);
                        }
                    }
                });
            }
        });
    }
}

//! The factory of bytes-to-bytes codecs (compression, checksums): [`BytesToBytes`] is a codec
//! with its configuration, as the chain holds it; each codec's parsing, encoding, decoding and
//! metadata JSON live in its own module, and this one only dispatches. Adding a codec: its
//! module, a variant, a row in the [`super::registry`], and one arm in each of the dispatches
//! below.
//!
//! | codec  | module      | stored bytes                                                    |
//! |--------|-------------|-----------------------------------------------------------------|
//! | gzip   | `gzip.rs`   | gzip stream (several members are concatenated)                  |
//! | zlib   | `zlib.rs`   | zlib stream (bytes after its end are ignored, as Python's zlib) |
//! | zstd   | `zstd.rs`   | zstd frame(s), with or without the content size                 |
//! | blosc  | `blosc/`    | c-blosc 1 buffer (16-byte header)                               |
//! | lz4    | `lz4.rs`    | 4-byte little-endian decoded size, then one LZ4 block           |
//! | bz2    | `bz2.rs`    | bzip2 stream(s)                                                 |
//! | crc32c | `crc32c.rs` | the data, then its CRC-32C as 4 little-endian bytes             |
//! | crc32, adler32, fletcher32 | `checksum32.rs` | numcodecs' 32-bit sums, before or after the data |
//! | shuffle | `shuffle.rs` | numcodecs' byte shuffle of `elementsize`-byte elements          |
//! | lzma   | `lzma.rs`   | an xz (or legacy lzma) stream                                   |
//! | delta, fixedscaleoffset, quantize, bitround, astype, packbits, categorize, json2 | `filters.rs` | numcodecs filters: elements of one type → another (see there) |
//!
//! Names: zarr v3 `gzip`, `zstd`, `blosc`, `crc32c` (core configurations), the numcodecs names
//! zarr-python writes (`numcodecs.zlib`, `numcodecs.gzip`, …, also plain `zlib`, `lz4`, `bz2`:
//! numcodecs' configurations and defaults), and the zarr v2 numcodecs objects (`{"id": …}`).
//! Decoding is bounded: no codec allocates by a size read from the chunk before checking it
//! against the caller's limit, and streams that decode to more stop with
//! [`ChunkError::TooLarge`].

use std::io::Read;

use bytes::Bytes;
use serde_json::{Map, Value};

use super::blosc::{self, BloscCompressor, BloscShuffle};
use super::checksum32::{self, Checksum32};
use super::config::{Config, ConfigError};
use super::filters::Filter;
use super::registry::{self, Codec, Kind};
use super::{bz2, crc32c, gzip, lz4, lzma, shuffle, zlib, zstd, ChainError, IndexLocation};
use crate::data_type::DataType;
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
    /// numcodecs' `crc32`, `adler32`, `fletcher32`: 4 little-endian bytes before or after the
    /// data.
    Checksum32 {
        /// Which sum.
        kind: Checksum32,
        /// Where it is.
        location: IndexLocation,
    },
    /// numcodecs `shuffle`.
    Shuffle {
        /// Bytes per element.
        elementsize: usize,
    },
    /// numcodecs `lzma` (xz).
    Lzma {
        /// The preset used when writing.
        preset: u32,
    },
    /// A numcodecs filter (`delta`, `fixedscaleoffset`, …; see `filters.rs`).
    Filter(Box<Filter>),
}

impl BytesToBytes {
    /// Parse a zarr v3 codec entry (through the codec registry). `Ok(None)` if `name` is
    /// not a bytes-to-bytes codec zarrow knows; `Err` for a known codec with a bad
    /// configuration.
    pub fn from_v3(name: &str, configuration: Option<&Value>) -> Result<Option<Self>, ConfigError> {
        if registry::v3_kind(name) != Some(Kind::BytesToBytes) {
            return Ok(None);
        }
        let cx = registry::Context {
            data_type: &DataType::UInt8,
            ndim: 1,
        };
        match registry::v3(name, configuration, &cx) {
            Some(Ok(Codec::BytesToBytes(b))) => Ok(Some(b)),
            Some(Err(ChainError::Config { source, .. })) => Err(source),
            _ => Ok(None),
        }
    }

    /// Parse a zarr v2 compressor or filter object (numcodecs form, `{"id": "zstd", "level": 1,
    /// ...}`). `Ok(None)` if the id is not one of zarrow's bytes-to-bytes codecs.
    pub fn from_v2(config: &Map<String, Value>) -> Result<Option<Self>, ConfigError> {
        let id = match config.get("id") {
            Some(Value::String(id)) => id.as_str(),
            Some(other) => return Err(ConfigError::bad_value("id", other, "a string")),
            None => return Err(ConfigError::missing("id")),
        };
        if registry::numcodecs_kind(id) != Some(Kind::BytesToBytes) {
            return Ok(None);
        }
        match registry::numcodecs(id, &Config { map: Some(config) }, &DataType::UInt8) {
            Some(Ok(Codec::BytesToBytes(b))) => Ok(Some(b)),
            Some(Err(e)) => Err(e),
            _ => Ok(None),
        }
    }

    /// The v3 metadata JSON (`{"name": ..., "configuration": {...}}`) — what zarr-python 3
    /// writes for this codec: core names for gzip, zstd, blosc and crc32c, `numcodecs.*` names
    /// for zlib, lz4 and bz2.
    pub fn to_v3_json(&self) -> Value {
        match *self {
            BytesToBytes::Gzip { level } => gzip::v3_json(level),
            BytesToBytes::Zlib { level } => zlib::v3_json(level),
            BytesToBytes::Zstd { level, checksum } => zstd::v3_json(level, checksum),
            BytesToBytes::Blosc {
                cname,
                clevel,
                shuffle,
                typesize,
                blocksize,
            } => blosc::v3_json(cname, clevel, shuffle, typesize, blocksize),
            BytesToBytes::Lz4 { acceleration } => lz4::v3_json(acceleration),
            BytesToBytes::Bz2 { level } => bz2::v3_json(level),
            BytesToBytes::Crc32c => crc32c::v3_json(),
            BytesToBytes::Checksum32 { kind, location } => checksum32::v3_json(kind, location),
            BytesToBytes::Shuffle { elementsize } => shuffle::v3_json(elementsize),
            BytesToBytes::Lzma { preset } => lzma::v3_json(preset),
            BytesToBytes::Filter(ref f) => f.v3_json(),
        }
    }

    /// The v2 (numcodecs) compressor/filter JSON — what numcodecs' `get_config()` returns.
    pub fn to_v2_json(&self) -> Value {
        match *self {
            BytesToBytes::Gzip { level } => gzip::v2_json(level),
            BytesToBytes::Zlib { level } => zlib::v2_json(level),
            BytesToBytes::Zstd { level, checksum } => zstd::v2_json(level, checksum),
            BytesToBytes::Blosc {
                cname,
                clevel,
                shuffle,
                blocksize,
                ..
            } => blosc::v2_json(cname, clevel, shuffle, blocksize),
            BytesToBytes::Lz4 { acceleration } => lz4::v2_json(acceleration),
            BytesToBytes::Bz2 { level } => bz2::v2_json(level),
            BytesToBytes::Crc32c => crc32c::v2_json(),
            BytesToBytes::Checksum32 { kind, location } => checksum32::v2_json(kind, location),
            BytesToBytes::Shuffle { elementsize } => shuffle::v2_json(elementsize),
            BytesToBytes::Lzma { preset } => lzma::v2_json(preset),
            BytesToBytes::Filter(ref f) => f.v2_json(),
        }
    }

    /// The codec's short name (`gzip`, `zlib`, `zstd`, `blosc`, `lz4`, `bz2`, `crc32c`, and
    /// numcodecs' ids), used in errors and descriptions.
    pub fn name(&self) -> &'static str {
        match self {
            BytesToBytes::Gzip { .. } => "gzip",
            BytesToBytes::Zlib { .. } => "zlib",
            BytesToBytes::Zstd { .. } => "zstd",
            BytesToBytes::Blosc { .. } => "blosc",
            BytesToBytes::Lz4 { .. } => "lz4",
            BytesToBytes::Bz2 { .. } => "bz2",
            BytesToBytes::Crc32c => "crc32c",
            BytesToBytes::Checksum32 { kind, .. } => kind.id(),
            BytesToBytes::Shuffle { .. } => "shuffle",
            BytesToBytes::Lzma { .. } => "lzma",
            BytesToBytes::Filter(f) => f.id(),
        }
    }

    /// Decode. `max_size` bounds the decoded size (the caller passes the exact size when it
    /// knows it, else a limit): a header announcing more, or a stream producing more, fails
    /// with [`ChunkError::TooLarge`]; no buffer is sized by an unchecked header value. The
    /// caller checks an exact size itself.
    pub fn decode(&self, input: Bytes, max_size: usize) -> Result<Bytes, ChunkError> {
        self.decode_elements(input, max_size, None)
    }

    /// [`Self::decode`] of a chunk of `elements` elements, when known: the object codecs
    /// (`json2`) refuse a list of more items as soon as they reach it.
    pub(crate) fn decode_elements(
        &self,
        input: Bytes,
        max_size: usize,
        elements: Option<usize>,
    ) -> Result<Bytes, ChunkError> {
        match self {
            BytesToBytes::Gzip { .. } => gzip::decode(&input, max_size),
            BytesToBytes::Zlib { .. } => zlib::decode(&input, max_size),
            BytesToBytes::Zstd { .. } => zstd::decode(&input, max_size),
            BytesToBytes::Blosc { .. } => blosc::decode(&input, max_size),
            BytesToBytes::Lz4 { .. } => lz4::decode(&input, max_size),
            BytesToBytes::Bz2 { .. } => bz2::decode(&input, max_size),
            BytesToBytes::Crc32c => crc32c::decode(&input, max_size),
            BytesToBytes::Checksum32 { kind, location } => {
                checksum32::decode(*kind, *location, &input, max_size)
            }
            BytesToBytes::Shuffle { elementsize } => {
                shuffle::decode(*elementsize, &input, max_size)
            }
            BytesToBytes::Lzma { .. } => lzma::decode(&input, max_size),
            BytesToBytes::Filter(f) => f.decode_elements(&input, max_size, elements),
        }
    }

    /// The most bytes this codec's input may have when its output may have `out_max`: the
    /// limit for the codec decoded before it. Compressors pass the limit on (what they decode
    /// from is the stored object, bounded where it is read); a checksum adds its 4 bytes; a
    /// filter that changes the element type scales it.
    pub(crate) fn input_bound(&self, out_max: usize) -> usize {
        match self {
            BytesToBytes::Filter(f) => f.input_bound(out_max),
            BytesToBytes::Crc32c | BytesToBytes::Checksum32 { .. } => out_max.saturating_add(4),
            _ => out_max,
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
            BytesToBytes::Zstd { .. } => zstd::announced_size(input),
            BytesToBytes::Gzip { .. } => Some(gzip::size_hint(input)),
            _ => None,
        }
    }

    /// A reader that decodes `input` as it is read, for the codecs that decode as a stream
    /// (gzip, zlib, zstd); `None` for the others. Errors surface from `read`. The caller
    /// bounds how much it reads.
    pub(crate) fn stream_decoder(&self, input: &Bytes) -> Option<Box<dyn Read + Send>> {
        match self {
            BytesToBytes::Gzip { .. } => Some(gzip::stream_decoder(input)),
            BytesToBytes::Zlib { .. } => Some(zlib::stream_decoder(input)),
            BytesToBytes::Zstd { .. } => zstd::stream_decoder(input),
            _ => None,
        }
    }

    /// Encode `head` followed by `pad` (one element) `count` times, without making the
    /// padded input in memory: what the table writer does with the last, partial chunk of an
    /// array (zarr chunks are full size). `None` for the codecs that cannot encode a stream
    /// (the caller pads in memory); gzip and zstd can (zstd writes the content size, as the
    /// one-shot encoder does, so every reader can size its buffer).
    pub(crate) fn encode_padded(
        &self,
        head: &[u8],
        pad: &[u8],
        count: usize,
    ) -> Option<Result<Vec<u8>, ChunkError>> {
        match *self {
            BytesToBytes::Gzip { level } => Some(gzip::encode_padded(level, head, pad, count)),
            BytesToBytes::Zstd { level, checksum } => {
                Some(zstd::encode_padded(level, checksum, head, pad, count))
            }
            _ => None,
        }
    }

    /// Encode (used by the writer and tests).
    pub fn encode(&self, input: &[u8]) -> Result<Vec<u8>, ChunkError> {
        match *self {
            BytesToBytes::Gzip { level } => gzip::encode(level, input),
            BytesToBytes::Zlib { level } => zlib::encode(level, input),
            BytesToBytes::Zstd { level, checksum } => zstd::encode(level, checksum, input),
            BytesToBytes::Blosc {
                cname,
                clevel,
                shuffle,
                typesize,
                blocksize,
            } => blosc::encode(cname, clevel, shuffle, typesize, blocksize, input),
            BytesToBytes::Lz4 { .. } => lz4::encode(input),
            BytesToBytes::Bz2 { level } => bz2::encode(level, input),
            BytesToBytes::Crc32c => Ok(crc32c::encode(input)),
            BytesToBytes::Checksum32 { kind, location } => {
                Ok(checksum32::encode(kind, location, input))
            }
            BytesToBytes::Shuffle { elementsize } => shuffle::encode(elementsize, input),
            BytesToBytes::Lzma { preset } => lzma::encode(preset, input),
            BytesToBytes::Filter(ref f) => Err(ChunkError::codec(
                "numcodecs filter",
                format!("zarrow reads {} but does not write it", f.id()),
            )),
        }
    }
}

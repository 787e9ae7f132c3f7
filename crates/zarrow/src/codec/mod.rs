//! Codecs: the chain that turns stored chunk bytes back into chunk elements.
//!
//! ```text
//!  stored bytes ──bytes→bytes (reverse order)──▶ bytes ──array→bytes──▶ elements ──array→array──▶ chunk
//!               (compression.rs, the factory; one     (bytes / vlen-* /            (transpose,
//!                module a codec: gzip.rs, zstd.rs, …)
//!                                                        zarrs.vlen / arrow_vlen /    undone by the
//!                                                        sharding_indexed)            reader's take)
//! ```
//!
//! This module only describes a chain ([`CodecChain`], parsed from v3 `codecs` or v2
//! `filters`/`compressor`/`order`); decoding to Arrow lives in [`crate::decode`], shard index
//! reads in [`crate::array`].

mod arrow_vlen;
pub mod blosc;
mod bytes;
mod bz2;
pub mod cast_value;
pub mod checksum32;
pub mod compression;
mod config;
#[cfg(test)]
pub(crate) mod conformance;
mod crc32c;
pub mod filters;
mod gzip;
mod lz4;
mod lzma;
mod numcodecs_vlen;
pub mod optional;
pub mod packbits;
mod registry;
mod scalar;
pub mod scale_offset;
mod sharding;
mod shuffle;
mod support;
mod transpose;
mod zarrs_vlen;
mod zlib;
mod zstd;

use serde_json::Value;

pub use compression::BytesToBytes;
pub use config::ConfigError;

use crate::data_type::{DataType, Endian};
use registry::Codec;

/// An array-to-array codec.
#[derive(Debug, Clone, PartialEq)]
pub enum ArrayToArray {
    /// `transpose`: encoded dimension `i` is decoded dimension `order[i]`.
    Transpose {
        /// The permutation.
        order: Vec<usize>,
    },
}

/// Where an index lies in a chunk or shard.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IndexLocation {
    /// Before the data.
    Start,
    /// After the data.
    End,
}

/// The `zarrs.vlen` codec: offsets and data through separate chains.
#[derive(Debug, Clone, PartialEq)]
pub struct ZarrsVlen {
    /// The chain the offsets go through (its array→bytes must be `bytes`).
    pub index_codecs: CodecChain,
    /// The chain the data bytes go through.
    pub data_codecs: CodecChain,
    /// Offsets are uint64 (else uint32).
    pub index_u64: bool,
    /// Where the encoded index lies.
    pub index_location: IndexLocation,
}

/// The `sharding_indexed` codec.
#[derive(Debug, Clone, PartialEq)]
pub struct Sharding {
    /// The inner chunk shape.
    pub chunk_shape: Vec<u64>,
    /// The chain of each inner chunk.
    pub codecs: CodecChain,
    /// The chain of the shard index.
    pub index_codecs: CodecChain,
    /// Where the index lies in the shard.
    pub index_location: IndexLocation,
}

impl Sharding {
    /// Inner chunks per shard along each dimension, for shards of `shard_shape`.
    pub fn chunks_per_shard(&self, shard_shape: &[u64]) -> Vec<u64> {
        shard_shape
            .iter()
            .zip(&self.chunk_shape)
            .map(|(o, i)| o / i)
            .collect()
    }
}

/// The array-to-bytes codec of a chain.
#[derive(Debug, Clone, PartialEq)]
pub enum ArrayToBytes {
    /// `bytes`: fixed-size elements in the given byte order (`None` for one-byte types).
    Bytes {
        /// Byte order.
        endian: Option<Endian>,
    },
    /// numcodecs `vlen-utf8`: u32 count, then u32 length + bytes per item.
    VlenUtf8,
    /// numcodecs `vlen-bytes`: the same layout.
    VlenBytes,
    /// `zarrs.vlen`.
    ZarrsVlen(Box<ZarrsVlen>),
    /// `zarrow.arrow_vlen`: Arrow offsets, zero padding to 64 bytes, then the data.
    ArrowVlen {
        /// int64 offsets (else int32).
        large: bool,
    },
    /// `sharding_indexed`.
    Sharding(Box<Sharding>),
    /// `packbits` (zarr-extensions): a few bits of each element, packed.
    PackBits(packbits::PackBits),
    /// zarrs' `optional`: a validity mask and the valid elements, each through a chain.
    Optional(Box<optional::Optional>),
}

impl ArrayToBytes {
    /// The codec name as written in v3 metadata.
    pub fn name(&self) -> &'static str {
        match self {
            ArrayToBytes::Bytes { .. } => "bytes",
            ArrayToBytes::VlenUtf8 => "vlen-utf8",
            ArrayToBytes::VlenBytes => "vlen-bytes",
            ArrayToBytes::ZarrsVlen(_) => "zarrs.vlen",
            ArrayToBytes::ArrowVlen { .. } => "zarrow.arrow_vlen",
            ArrayToBytes::Sharding(_) => "sharding_indexed",
            ArrayToBytes::PackBits(_) => "packbits",
            ArrayToBytes::Optional(_) => "zarrs.optional",
        }
    }
}

/// A full codec chain.
#[derive(Debug, Clone, PartialEq)]
pub struct CodecChain {
    /// Array-to-array codecs, in encode order.
    pub array_to_array: Vec<ArrayToArray>,
    /// The array-to-bytes codec.
    pub array_to_bytes: ArrayToBytes,
    /// Bytes-to-bytes codecs, in encode order (decoding runs them last to first).
    pub bytes_to_bytes: Vec<BytesToBytes>,
}

impl CodecChain {
    /// `bytes` (little-endian) and nothing else.
    pub fn plain() -> Self {
        CodecChain {
            array_to_array: Vec::new(),
            array_to_bytes: ArrayToBytes::Bytes {
                endian: Some(Endian::Little),
            },
            bytes_to_bytes: Vec::new(),
        }
    }

    /// The permutation all transposes together apply: encoded dimension `i` is chunk dimension
    /// `order[i]`. `None` when there is no transpose (or it is the identity).
    pub fn transpose_order(&self, ndim: usize) -> Option<Vec<usize>> {
        let mut order: Vec<usize> = (0..ndim).collect();
        for ArrayToArray::Transpose { order: t } in &self.array_to_array {
            order = t.iter().map(|&i| order[i]).collect();
        }
        (order.iter().enumerate().any(|(i, &o)| i != o)).then_some(order)
    }

    /// A short description, e.g. `transpose → vlen-utf8 → zstd`.
    pub fn describe(&self) -> String {
        let mut parts: Vec<String> = self
            .array_to_array
            .iter()
            .map(|_| "transpose".to_string())
            .collect();
        match &self.array_to_bytes {
            ArrayToBytes::Sharding(s) => {
                parts.push(format!("sharding_indexed[{}]", s.codecs.describe()))
            }
            ArrayToBytes::Optional(o) => parts.push(format!(
                "zarrs.optional[mask {}; data {}]",
                o.mask_codecs.describe(),
                o.data_codecs.describe()
            )),
            other => parts.push(other.name().to_string()),
        }
        parts.extend(self.bytes_to_bytes.iter().map(|c| c.name().to_string()));
        parts.join(" → ")
    }
}

/// Why a chain could not be parsed. The metadata parser turns it into an [`crate::Error`]
/// naming the array and its document: [`crate::Error::UnsupportedCodec`],
/// [`crate::Error::CodecConfig`], or a malformed list as [`crate::Error::Metadata`] with this
/// error as its source.
#[non_exhaustive]
#[derive(Debug, thiserror::Error)]
pub enum ChainError {
    /// A codec that is not known or not supported here.
    #[error("unsupported codec {codec}: {reason}")]
    Unsupported {
        /// The codec name.
        codec: String,
        /// Why.
        reason: String,
    },
    /// An entry of a codec list that is no codec (v3: neither a name nor an object with a
    /// `name`; v2: a filter or compressor that is not an object), or a list that is none.
    #[error("{member}: malformed entry {entry}")]
    MalformedEntry {
        /// The metadata member holding it: `codecs`, `filters` or `compressor`.
        member: &'static str,
        /// The entry as written (JSON).
        entry: String,
    },
    /// A bytes-to-bytes codec listed before the array-to-bytes codec.
    #[error("bytes-to-bytes codec {codec} before the array-to-bytes codec")]
    OutOfOrder {
        /// The bytes-to-bytes codec's name.
        codec: String,
    },
    /// An array-to-array codec after the array-to-bytes codec, or a second array-to-bytes
    /// codec.
    #[error("{kind} codec {codec} after the array-to-bytes codec")]
    Misplaced {
        /// The codec's name.
        codec: String,
        /// What kind of codec it is (`an array-to-array`, `a second array-to-bytes`).
        kind: &'static str,
    },
    /// A codec list without an array-to-bytes codec (`bytes`, `sharding_indexed`, …).
    #[error("no array-to-bytes codec")]
    NoArrayToBytes,
    /// A known codec whose configuration is malformed or not one zarrow reads.
    #[error("codec {codec}: {source}")]
    Config {
        /// The codec name as written (v3 `name`, v2 `id`).
        codec: String,
        /// What is wrong with its configuration.
        #[source]
        source: ConfigError,
    },
}

impl ChainError {
    /// This error about the array at `array`, whose metadata document `document` holds the
    /// chain.
    pub(crate) fn into_error(self, array: &str, document: &str) -> crate::Error {
        match self {
            ChainError::Unsupported { codec, reason } => crate::Error::UnsupportedCodec {
                array: array.to_string(),
                codec,
                reason,
            },
            ChainError::Config { codec, source } => crate::Error::CodecConfig {
                array: array.to_string(),
                document: document.to_string(),
                codec,
                source: Box::new(source),
            },
            malformed => {
                crate::Error::metadata_caused_by(array, document, malformed.to_string(), malformed)
            }
        }
    }
}

fn config_error(codec: &str, source: ConfigError) -> ChainError {
    ChainError::Config {
        codec: if codec.is_empty() { "?" } else { codec }.to_string(),
        source,
    }
}

/// The `ndim` integers under `key` of codec `name`'s configuration (one per array dimension),
/// each passing `each` and all of them `whole`; anything else is a configuration error saying
/// it expects `expected`.
fn dimension_list(
    name: &str,
    config: Option<&Value>,
    key: &str,
    ndim: usize,
    expected: &str,
    each: impl Fn(u64) -> bool,
    whole: impl Fn(&[u64]) -> bool,
) -> Result<Vec<u64>, ChainError> {
    let json = config
        .and_then(|c| c.get(key))
        .ok_or_else(|| config_error(name, ConfigError::missing(key)))?;
    let list = json.as_array().and_then(|items| {
        items
            .iter()
            .map(|v| v.as_u64().filter(|&n| each(n)))
            .collect::<Option<Vec<u64>>>()
    });
    match list {
        Some(list) if list.len() == ndim && whole(&list) => Ok(list),
        _ => Err(config_error(
            name,
            ConfigError::bad_value(key, json, expected),
        )),
    }
}

fn unsupported(codec: &str, reason: impl Into<String>) -> ChainError {
    ChainError::Unsupported {
        codec: codec.to_string(),
        reason: reason.into(),
    }
}

fn parse_index_location(
    config: Option<&Value>,
    codec: &str,
    default: IndexLocation,
) -> Result<IndexLocation, ChainError> {
    match config.and_then(|c| c.get("index_location")) {
        None => Ok(default),
        Some(Value::String(s)) if s == "end" => Ok(IndexLocation::End),
        Some(Value::String(s)) if s == "start" => Ok(IndexLocation::Start),
        Some(other) => Err(config_error(
            codec,
            ConfigError::bad_value("index_location", other, "\"start\" or \"end\""),
        )),
    }
}

fn codec_list<'a>(
    config: Option<&'a Value>,
    key: &str,
    codec: &str,
) -> Result<&'a [Value], ChainError> {
    config
        .and_then(|c| c.get(key))
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .ok_or_else(|| config_error(codec, ConfigError::missing(key)))
}

/// The name, configuration and `must_understand` flag of a v3 `codecs` entry.
fn v3_entry(entry: &Value) -> Result<(&str, Option<&Value>, bool), ChainError> {
    let malformed = || ChainError::MalformedEntry {
        member: "codecs",
        entry: entry.to_string(),
    };
    match entry {
        Value::String(s) => Ok((s.as_str(), None, true)),
        Value::Object(o) => Ok((
            o.get("name")
                .and_then(Value::as_str)
                .ok_or_else(malformed)?,
            o.get("configuration"),
            o.get("must_understand")
                .and_then(Value::as_bool)
                .unwrap_or(true),
        )),
        _ => Err(malformed()),
    }
}

/// Parse a v3 `codecs` list for arrays of `data_type` with `ndim` dimensions: each entry is
/// looked up in the [`registry`] and placed by its kind. An unknown codec is an error naming
/// it, unless it is marked `must_understand: false`: the writer then says a reader may ignore
/// it, and it is skipped.
pub fn parse_v3_chain(
    codecs: &[Value],
    data_type: &DataType,
    ndim: usize,
) -> Result<CodecChain, ChainError> {
    // The type the next codec sees: `cast_value` changes it.
    let mut current = data_type.clone();
    let mut array_to_array = Vec::new();
    let mut array_to_bytes = None;
    let mut bytes_to_bytes = Vec::new();
    // zarr-python's `numcodecs.*` array-to-array codecs, in encode order.
    let mut numcodecs_filters: Vec<filters::Filter> = Vec::new();
    for entry in codecs {
        let (name, config, must_understand) = v3_entry(entry)?;
        let cx = registry::Context {
            data_type: &current,
            ndim,
        };
        let codec = match registry::v3(name, config, &cx) {
            Some(parsed) => parsed?,
            None if !must_understand => continue,
            None => return Err(unsupported(name, "unknown codec")),
        };
        let misplaced = |kind| ChainError::Misplaced {
            codec: name.to_string(),
            kind,
        };
        match (codec, &array_to_bytes) {
            (Codec::ArrayToArray(a), None) => array_to_array.push(a),
            (Codec::Filter(f), None) => {
                if let filters::Filter::CastValue(c) = &f {
                    current = c.stored.clone();
                }
                numcodecs_filters.push(f)
            }
            (Codec::ArrayToBytes(a), None) => array_to_bytes = Some(a),
            (Codec::BytesToBytes(c), Some(_)) => bytes_to_bytes.push(c),
            (Codec::BytesToBytes(_), None) => {
                return Err(ChainError::OutOfOrder {
                    codec: name.to_string(),
                })
            }
            (Codec::ArrayToBytes(_), Some(_)) => return Err(misplaced("a second array-to-bytes")),
            (Codec::ArrayToArray(_) | Codec::Filter(_), Some(_)) => {
                return Err(misplaced("an array-to-array"))
            }
        }
    }
    let array_to_bytes = array_to_bytes.ok_or(ChainError::NoArrayToBytes)?;
    let mut array_to_bytes = array_to_bytes;
    if !numcodecs_filters.is_empty() {
        place_filters(numcodecs_filters, &mut array_to_bytes, &mut bytes_to_bytes)?;
    }
    check_fits(&array_to_bytes, &current)?;
    Ok(CodecChain {
        array_to_array,
        array_to_bytes,
        bytes_to_bytes,
    })
}

/// Element-wise array-to-array codecs (numcodecs filters, `scale_offset`, `cast_value`) run on
/// the bytes the `bytes` codec gives, in its byte order, before the compressors in encode order
/// (so after them when decoding). Before a `sharding_indexed` whose chunks use `bytes` they run
/// on each inner chunk (an element-wise codec commutes with cutting the shard into chunks).
fn place_filters(
    filters: Vec<filters::Filter>,
    array_to_bytes: &mut ArrayToBytes,
    bytes_to_bytes: &mut Vec<BytesToBytes>,
) -> Result<(), ChainError> {
    let (endian, target) = match array_to_bytes {
        ArrayToBytes::Bytes { endian } => (endian.unwrap_or(Endian::Little), bytes_to_bytes),
        ArrayToBytes::Sharding(s) => match s.codecs.array_to_bytes {
            ArrayToBytes::Bytes { endian } => (
                endian.unwrap_or(Endian::Little),
                &mut s.codecs.bytes_to_bytes,
            ),
            _ => return Err(unsupported("sharding_indexed", ELEMENTWISE)),
        },
        other => return Err(unsupported(other.name(), ELEMENTWISE)),
    };
    let filters = filters
        .into_iter()
        .map(|f| BytesToBytes::Filter(Box::new(f.with_endian(endian))));
    target.splice(0..0, filters);
    Ok(())
}

const ELEMENTWISE: &str = "element-wise array-to-array codecs (numcodecs filters, scale_offset, \
    cast_value) need the bytes codec after them";

/// Whether an array-to-bytes codec can carry elements of `data_type`.
fn check_fits(codec: &ArrayToBytes, data_type: &DataType) -> Result<(), ChainError> {
    let ok = match codec {
        ArrayToBytes::Bytes { .. } | ArrayToBytes::PackBits(_) => data_type.fixed_size().is_some(),
        ArrayToBytes::VlenUtf8
        | ArrayToBytes::VlenBytes
        | ArrayToBytes::ZarrsVlen(_)
        | ArrayToBytes::ArrowVlen { .. } => data_type.is_variable(),
        ArrayToBytes::Sharding(_) => true,
        ArrayToBytes::Optional(_) => matches!(data_type, DataType::Optional(_)),
    };
    if ok {
        Ok(())
    } else {
        Err(unsupported(
            codec.name(),
            format!("cannot encode data type {}", data_type.name()),
        ))
    }
}

/// A v2 filter or compressor object (`{"id": …}`) through the [`registry`]: its id and the
/// codec, `None` for an id zarrow does not know.
/// `member` names the codec in an error about its id.
fn v2_codec<'a>(
    obj: &'a serde_json::Map<String, Value>,
    data_type: &DataType,
    member: &str,
) -> Result<(&'a str, Option<Codec>), ChainError> {
    let id = match obj.get("id") {
        Some(Value::String(id)) => id.as_str(),
        Some(other) => {
            return Err(config_error(
                member,
                ConfigError::bad_value("id", other, "a string"),
            ))
        }
        None => return Err(config_error(member, ConfigError::missing("id"))),
    };
    let config = config::Config { map: Some(obj) };
    match registry::numcodecs(id, &config, data_type) {
        None => Ok((id, None)),
        Some(Ok(codec)) => Ok((id, Some(codec))),
        Some(Err(e)) => Err(config_error(id, e)),
    }
}

/// Build a chain from v2 metadata: `order`, `filters`, `compressor`, and the dtype's byte order.
///
/// Returns the chain and, for `|O` arrays, whether the object codec is `vlen-bytes`.
pub fn parse_v2_chain(
    data_type: &DataType,
    endian: Endian,
    order_f: bool,
    ndim: usize,
    filters: Option<&Value>,
    compressor: Option<&Value>,
) -> Result<CodecChain, ChainError> {
    let mut array_to_array = Vec::new();
    if order_f && ndim > 1 {
        array_to_array.push(ArrayToArray::Transpose {
            order: (0..ndim).rev().collect(),
        });
    }
    let mut array_to_bytes = None;
    let mut bytes_to_bytes = Vec::new();
    let filter_list: &[Value] = match filters {
        None | Some(Value::Null) => &[],
        Some(Value::Array(a)) => a,
        Some(other) => {
            return Err(ChainError::MalformedEntry {
                member: "filters",
                entry: other.to_string(),
            })
        }
    };
    for f in filter_list {
        let obj = f.as_object().ok_or_else(|| ChainError::MalformedEntry {
            member: "filters",
            entry: f.to_string(),
        })?;
        let (id, codec) = v2_codec(obj, data_type, "")?;
        match codec {
            Some(Codec::ArrayToBytes(a)) => array_to_bytes = Some(a),
            Some(Codec::Filter(f)) => {
                // an object codec: the vlen-utf8 frames it writes are decoded as strings
                if f.writes_vlen() && array_to_bytes.is_none() {
                    array_to_bytes = Some(ArrayToBytes::VlenUtf8);
                }
                bytes_to_bytes.push(BytesToBytes::Filter(Box::new(f)));
            }
            Some(Codec::BytesToBytes(c)) => bytes_to_bytes.push(c),
            Some(Codec::ArrayToArray(_)) | None => {
                return Err(unsupported(id, "unknown v2 filter"))
            }
        }
    }
    let array_to_bytes = match array_to_bytes {
        Some(a) => a,
        None if data_type.is_variable() => {
            return Err(unsupported(
                "object codec",
                "an object (|O) array needs a vlen-utf8 or vlen-bytes filter",
            ))
        }
        None => ArrayToBytes::Bytes {
            endian: Some(endian),
        },
    };
    match compressor {
        None | Some(Value::Null) => {}
        Some(Value::Object(obj)) => match v2_codec(obj, data_type, "compressor")? {
            (_, Some(Codec::BytesToBytes(c))) => bytes_to_bytes.push(c),
            (id, _) => return Err(unsupported(id, "unknown compressor")),
        },
        Some(other) => {
            return Err(ChainError::MalformedEntry {
                member: "compressor",
                entry: other.to_string(),
            })
        }
    }
    check_fits(&array_to_bytes, data_type)?;
    Ok(CodecChain {
        array_to_array,
        array_to_bytes,
        bytes_to_bytes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn v3_chain_with_transpose_and_zstd() {
        let codecs = json!([
            {"name": "transpose", "configuration": {"order": [1, 0]}},
            {"name": "vlen-utf8", "configuration": {}},
            {"name": "zstd", "configuration": {"level": 0, "checksum": false}}
        ]);
        let chain = parse_v3_chain(codecs.as_array().unwrap(), &DataType::String, 2).unwrap();
        assert_eq!(chain.array_to_bytes, ArrayToBytes::VlenUtf8);
        assert_eq!(chain.transpose_order(2), Some(vec![1, 0]));
        assert_eq!(chain.describe(), "transpose → vlen-utf8 → zstd");
    }

    #[test]
    fn malformed_lists_are_typed_and_become_metadata_errors_of_the_array() {
        let parse = |codecs: Value| parse_v3_chain(codecs.as_array().unwrap(), &DataType::Int32, 1);
        let e = parse(json!([{"configuration": {}}])).unwrap_err();
        assert!(
            matches!(&e, ChainError::MalformedEntry { member: "codecs", entry } if entry.contains("configuration")),
            "{e:?}"
        );
        let e = parse(json!([{"name": "gzip"}, {"name": "bytes"}])).unwrap_err();
        assert!(
            matches!(&e, ChainError::OutOfOrder { codec } if codec == "gzip"),
            "{e:?}"
        );
        let e = parse(json!([])).unwrap_err();
        assert!(matches!(e, ChainError::NoArrayToBytes), "{e:?}");
        let e = parse(json!([7]))
            .unwrap_err()
            .into_error("a/x", "zarr.json");
        assert_eq!((e.array(), e.location()), (Some("a/x"), Some("zarr.json")));
        let source = std::error::Error::source(&e).and_then(|s| s.downcast_ref::<ChainError>());
        assert!(
            matches!(source, Some(ChainError::MalformedEntry { member: "codecs", entry }) if entry == "7"),
            "{e}"
        );
        let e = parse_v2_chain(
            &DataType::Int32,
            Endian::Little,
            false,
            1,
            Some(&json!(3)),
            None,
        )
        .unwrap_err();
        assert!(
            matches!(
                &e,
                ChainError::MalformedEntry {
                    member: "filters",
                    ..
                }
            ),
            "{e:?}"
        );
    }

    #[test]
    fn v3_chain_errors() {
        let bad = json!([{"name": "bytes", "configuration": {"endian": "little"}}]);
        assert!(matches!(
            parse_v3_chain(bad.as_array().unwrap(), &DataType::String, 1),
            Err(ChainError::Unsupported { .. })
        ));
        let unknown = json!([{"name": "vlen-utf8"}, {"name": "frobnicate"}]);
        assert!(matches!(
            parse_v3_chain(unknown.as_array().unwrap(), &DataType::String, 1),
            Err(ChainError::Unsupported { .. })
        ));
        // An unknown codec the writer marks must_understand: false is skipped, in any
        // position; a known one is read as usual.
        let optional = json!([{"name": "frobnicate", "must_understand": false}, {"name": "vlen-utf8"},
            {"name": "frobnicate", "must_understand": false},
            {"name": "zstd", "must_understand": false}]);
        let chain = parse_v3_chain(optional.as_array().unwrap(), &DataType::String, 1).unwrap();
        assert_eq!(chain.describe(), "vlen-utf8 → zstd");
        let e = parse_v3_chain(unknown.as_array().unwrap(), &DataType::String, 1).unwrap_err();
        assert_eq!(e.to_string(), "unsupported codec frobnicate: unknown codec");
        // Kinds out of place.
        for (codecs, message) in [
            (
                json!([{"name": "vlen-utf8"}, {"name": "vlen-bytes"}]),
                "a second array-to-bytes codec vlen-bytes after the array-to-bytes codec",
            ),
            (
                json!([{"name": "bytes"}, {"name": "transpose", "configuration": {"order": [0]}}]),
                "an array-to-array codec transpose after the array-to-bytes codec",
            ),
            (
                json!([{"name": "zstd"}, {"name": "bytes"}]),
                "bytes-to-bytes codec zstd before the array-to-bytes codec",
            ),
        ] {
            let e = parse_v3_chain(codecs.as_array().unwrap(), &DataType::UInt8, 1).unwrap_err();
            assert_eq!(e.to_string(), message);
        }
        let perm = json!([{"name": "transpose", "configuration": {"order": [0, 0]}}, {"name": "bytes", "configuration": {"endian": "little"}}]);
        assert!(parse_v3_chain(perm.as_array().unwrap(), &DataType::Int32, 2).is_err());
    }

    #[test]
    fn a_bad_codec_configuration_names_the_array_codec_and_key() {
        let codecs =
            json!([{"name": "bytes"}, {"name": "zstd", "configuration": {"level": 1_u64 << 40}}]);
        let e = parse_v3_chain(codecs.as_array().unwrap(), &DataType::UInt8, 1).unwrap_err();
        let e = e.into_error("a/x", "zarr.json");
        match &e {
            crate::Error::CodecConfig {
                array,
                document,
                codec,
                source,
            } => {
                assert_eq!(
                    (&**array, &**document, &**codec),
                    ("a/x", "zarr.json", "zstd")
                );
                assert_eq!(source.key(), Some("level"));
                assert!(!source.is_unsupported());
            }
            other => panic!("{other:?}"),
        }
        assert_eq!((e.array(), e.location()), (Some("a/x"), Some("zarr.json")));
        assert_eq!(
            e.to_string(),
            "invalid metadata for 'a/x' (zarr.json): codec zstd: level must be a 32-bit \
             integer, got 1099511627776"
        );

        // v2: a compressor that zarrow is built without, and a filter with a bad dtype.
        let snappy = json!({"id": "blosc", "cname": "snappy"});
        let e = parse_v2_chain(
            &DataType::UInt8,
            Endian::Little,
            false,
            1,
            None,
            Some(&snappy),
        )
        .unwrap_err();
        assert!(
            matches!(&e, ChainError::Config { codec, source }
                if codec == "blosc" && source.key() == Some("cname") && source.is_unsupported()),
            "{e:?}"
        );
        let delta = json!([{"id": "delta", "dtype": "<i4", "astype": "<U4"}]);
        let e = parse_v2_chain(
            &DataType::Int32,
            Endian::Little,
            false,
            1,
            Some(&delta),
            None,
        )
        .unwrap_err();
        let e = e.into_error("t", ".zarray");
        assert!(
            matches!(&e, crate::Error::CodecConfig { codec, source, .. }
                if codec == "delta" && source.key() == Some("astype")),
            "{e:?}"
        );
        assert!(e.to_string().contains("astype '<U4': not a number"), "{e}");
    }

    #[test]
    fn chain_codec_configurations_are_typed() {
        let perm = json!([{"name": "transpose", "configuration": {"order": [0, 0]}}, {"name": "bytes", "configuration": {"endian": "little"}}]);
        let e = parse_v3_chain(perm.as_array().unwrap(), &DataType::Int32, 2).unwrap_err();
        assert!(
            matches!(&e, ChainError::Config { codec, source: ConfigError::BadValue { key, value, .. } }
                if codec == "transpose" && key == "order" && value == "[0,0]"),
            "{e:?}"
        );
        let shard = json!([{"name": "sharding_indexed", "configuration": {"chunk_shape": [2, 2],
            "codecs": [{"name": "bytes"}], "index_codecs": [{"name": "bytes"}]}}]);
        let e = parse_v3_chain(shard.as_array().unwrap(), &DataType::UInt8, 1).unwrap_err();
        assert!(
            matches!(&e, ChainError::Config { codec, source }
                if codec == "sharding_indexed" && source.key() == Some("chunk_shape")),
            "{e:?}"
        );
        let e = e.into_error("s", "zarr.json");
        assert!(
            e.to_string().ends_with(
                "chunk_shape must be positive integers, one per array dimension (1), got [2,2]"
            ),
            "{e}"
        );
        let no_index = json!([{"name": "sharding_indexed", "configuration": {"chunk_shape": [2],
            "codecs": [{"name": "bytes"}]}}]);
        let e = parse_v3_chain(no_index.as_array().unwrap(), &DataType::UInt8, 1).unwrap_err();
        assert!(
            matches!(&e, ChainError::Config { source: ConfigError::MissingKey { key }, .. }
                if key == "index_codecs"),
            "{e:?}"
        );
    }

    #[test]
    fn composed_transposes() {
        let chain = CodecChain {
            array_to_array: vec![
                ArrayToArray::Transpose {
                    order: vec![1, 2, 0],
                },
                ArrayToArray::Transpose {
                    order: vec![2, 0, 1],
                },
            ],
            array_to_bytes: ArrayToBytes::Bytes { endian: None },
            bytes_to_bytes: vec![],
        };
        // Two inverse rotations cancel.
        assert_eq!(chain.transpose_order(3), None);
    }

    #[test]
    fn v2_object_chain() {
        let filters = json!([{"id": "vlen-utf8"}]);
        let comp = json!({"id": "zstd", "level": 1});
        let chain = parse_v2_chain(
            &DataType::String,
            Endian::Little,
            true,
            2,
            Some(&filters),
            Some(&comp),
        )
        .unwrap();
        assert_eq!(chain.array_to_bytes, ArrayToBytes::VlenUtf8);
        assert_eq!(chain.transpose_order(2), Some(vec![1, 0]));
        assert!(parse_v2_chain(&DataType::String, Endian::Little, false, 1, None, None).is_err());
    }
}

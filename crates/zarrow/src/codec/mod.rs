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

pub mod blosc;
mod bz2;
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
mod shuffle;
mod support;
mod zlib;
mod zstd;

use serde_json::Value;

pub use compression::BytesToBytes;
pub use config::ConfigError;

use crate::data_type::{DataType, Endian};

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

/// Parse a v3 `codecs` list for arrays of `data_type` with `ndim` dimensions.
pub fn parse_v3_chain(
    codecs: &[Value],
    data_type: &DataType,
    ndim: usize,
) -> Result<CodecChain, ChainError> {
    let mut array_to_array = Vec::new();
    let mut array_to_bytes = None;
    let mut bytes_to_bytes = Vec::new();
    // zarr-python's `numcodecs.*` array-to-array codecs, in encode order.
    let mut numcodecs_filters: Vec<filters::Filter> = Vec::new();
    for entry in codecs {
        let (name, config, must_understand) = match entry {
            Value::String(s) => (s.as_str(), None, true),
            Value::Object(o) => (
                o.get("name").and_then(Value::as_str).ok_or_else(|| {
                    ChainError::MalformedEntry {
                        member: "codecs",
                        entry: entry.to_string(),
                    }
                })?,
                o.get("configuration"),
                o.get("must_understand")
                    .and_then(Value::as_bool)
                    .unwrap_or(true),
            ),
            other => {
                return Err(ChainError::MalformedEntry {
                    member: "codecs",
                    entry: other.to_string(),
                })
            }
        };
        if array_to_bytes.is_none() {
            if let Some(id) = name.strip_prefix("numcodecs.") {
                let c = config::Config::from_value(config).map_err(|e| config_error(name, e))?;
                match filters::numcodecs(id, &c, data_type) {
                    Ok(Some(f)) => {
                        numcodecs_filters.push(f);
                        continue;
                    }
                    Ok(None) => {}
                    Err(e) => return Err(config_error(name, e)),
                }
            }
            match name {
                "transpose" => {
                    let order_json = config
                        .and_then(|c| c.get("order"))
                        .ok_or_else(|| config_error(name, ConfigError::missing("order")))?;
                    let bad_order = || {
                        config_error(
                            name,
                            ConfigError::bad_value(
                                "order",
                                order_json,
                                format!("a permutation of the {ndim} dimensions"),
                            ),
                        )
                    };
                    let order = order_json
                        .as_array()
                        .ok_or_else(bad_order)?
                        .iter()
                        .map(|v| v.as_u64().and_then(|u| usize::try_from(u).ok()))
                        .collect::<Option<Vec<usize>>>()
                        .ok_or_else(bad_order)?;
                    let mut seen = vec![false; ndim];
                    if order.len() != ndim
                        || order
                            .iter()
                            .any(|&i| i >= ndim || std::mem::replace(&mut seen[i], true))
                    {
                        return Err(bad_order());
                    }
                    array_to_array.push(ArrayToArray::Transpose { order });
                    continue;
                }
                "bytes" | "endian" => {
                    let endian = match config.and_then(|c| c.get("endian")).and_then(Value::as_str)
                    {
                        None => None,
                        Some("little") => Some(Endian::Little),
                        Some("big") => Some(Endian::Big),
                        Some(other) => {
                            return Err(config_error(
                                name,
                                ConfigError::bad_value(
                                    "endian",
                                    format!("'{other}'"),
                                    "\"little\" or \"big\"",
                                ),
                            ))
                        }
                    };
                    if endian.is_none() && data_type.swap_unit() > 1 {
                        return Err(config_error(
                            name,
                            ConfigError::bad_value(
                                "endian",
                                "null",
                                format!(
                                    "\"little\" or \"big\" (it is required for {})",
                                    data_type.name()
                                ),
                            ),
                        ));
                    }
                    array_to_bytes = Some(ArrayToBytes::Bytes { endian });
                    continue;
                }
                "vlen-utf8" | "numcodecs.vlen-utf8" => {
                    array_to_bytes = Some(ArrayToBytes::VlenUtf8);
                    continue;
                }
                "vlen-bytes" | "numcodecs.vlen-bytes" => {
                    array_to_bytes = Some(ArrayToBytes::VlenBytes);
                    continue;
                }
                "zarrs.vlen" | "https://codec.zarrs.dev/array_to_bytes/vlen" => {
                    let index_u64 = match config
                        .and_then(|c| c.get("index_data_type"))
                        .and_then(Value::as_str)
                    {
                        None | Some("uint64") => true,
                        Some("uint32") => false,
                        Some(other) => {
                            return Err(unsupported(name, format!("index_data_type '{other}'")))
                        }
                    };
                    let index_type = if index_u64 {
                        DataType::UInt64
                    } else {
                        DataType::UInt32
                    };
                    let index_codecs =
                        parse_v3_chain(codec_list(config, "index_codecs", name)?, &index_type, 1)?;
                    let data_codecs = parse_v3_chain(
                        codec_list(config, "data_codecs", name)?,
                        &DataType::UInt8,
                        1,
                    )?;
                    if !matches!(index_codecs.array_to_bytes, ArrayToBytes::Bytes { .. })
                        || !matches!(data_codecs.array_to_bytes, ArrayToBytes::Bytes { .. })
                    {
                        return Err(unsupported(
                            name,
                            "index and data chains must use the bytes codec",
                        ));
                    }
                    array_to_bytes = Some(ArrayToBytes::ZarrsVlen(Box::new(ZarrsVlen {
                        index_codecs,
                        data_codecs,
                        index_u64,
                        // zarrs' first drafts had no index_location and put the index first.
                        index_location: parse_index_location(config, name, IndexLocation::Start)?,
                    })));
                    continue;
                }
                "zarrow.arrow_vlen" => {
                    let large = match config
                        .and_then(|c| c.get("offset_type"))
                        .and_then(Value::as_str)
                    {
                        None | Some("int32") => false,
                        Some("int64") => true,
                        Some(other) => {
                            return Err(unsupported(name, format!("offset_type '{other}'")))
                        }
                    };
                    array_to_bytes = Some(ArrayToBytes::ArrowVlen { large });
                    continue;
                }
                "sharding_indexed" => {
                    let shape_json = config
                        .and_then(|c| c.get("chunk_shape"))
                        .ok_or_else(|| config_error(name, ConfigError::missing("chunk_shape")))?;
                    let bad_shape = || {
                        config_error(
                            name,
                            ConfigError::bad_value(
                                "chunk_shape",
                                shape_json,
                                format!("positive integers, one per array dimension ({ndim})"),
                            ),
                        )
                    };
                    let chunk_shape = shape_json
                        .as_array()
                        .ok_or_else(bad_shape)?
                        .iter()
                        .map(|v| v.as_u64().filter(|n| *n > 0))
                        .collect::<Option<Vec<u64>>>()
                        .ok_or_else(bad_shape)?;
                    if chunk_shape.len() != ndim {
                        return Err(bad_shape());
                    }
                    let codecs =
                        parse_v3_chain(codec_list(config, "codecs", name)?, data_type, ndim)?;
                    // Nested sharding (tensorstore writes it) is read by ranges at every
                    // level: the inner shard's bytes must be its shard as stored.
                    if matches!(codecs.array_to_bytes, ArrayToBytes::Sharding(_))
                        && (!codecs.array_to_array.is_empty() || !codecs.bytes_to_bytes.is_empty())
                    {
                        return Err(unsupported(
                            name,
                            "codecs around a nested sharding_indexed (inner shards are read by ranges)",
                        ));
                    }
                    let index_codecs = parse_v3_chain(
                        codec_list(config, "index_codecs", name)?,
                        &DataType::UInt64,
                        ndim + 1,
                    )?;
                    if !index_codecs.array_to_array.is_empty()
                        || !matches!(index_codecs.array_to_bytes, ArrayToBytes::Bytes { .. })
                        || index_codecs
                            .bytes_to_bytes
                            .iter()
                            .any(|c| !matches!(c, BytesToBytes::Crc32c))
                    {
                        return Err(unsupported(
                            name,
                            "index codecs other than bytes and crc32c (the index size must be known)",
                        ));
                    }
                    array_to_bytes = Some(ArrayToBytes::Sharding(Box::new(Sharding {
                        chunk_shape,
                        codecs,
                        index_codecs,
                        index_location: parse_index_location(config, name, IndexLocation::End)?,
                    })));
                    continue;
                }
                _ => {}
            }
        }
        match BytesToBytes::from_v3(name, config) {
            Ok(Some(c)) if array_to_bytes.is_some() => bytes_to_bytes.push(c),
            Ok(Some(_)) => {
                return Err(ChainError::OutOfOrder {
                    codec: name.to_string(),
                })
            }
            // A codec is a transformation of the bytes: reading past one zarrow does not know
            // would return its output as values. `must_understand: false` does not change
            // that (zarr-python refuses such an array too).
            Ok(None) if !must_understand => {
                return Err(unsupported(
                    name,
                    "unknown codec (must_understand: false does not make a codec that transforms \
                     the bytes safe to skip)",
                ))
            }
            Ok(None) => return Err(unsupported(name, "unknown codec")),
            Err(e) => return Err(config_error(name, e)),
        }
    }
    let array_to_bytes = match array_to_bytes {
        Some(a) => a,
        None => return Err(ChainError::NoArrayToBytes),
    };
    if !numcodecs_filters.is_empty() {
        // They run on the bytes the `bytes` codec gives, in its byte order, before the
        // compressors in encode order (so after them when decoding).
        let endian = match &array_to_bytes {
            ArrayToBytes::Bytes { endian } => endian.unwrap_or(Endian::Little),
            other => {
                return Err(unsupported(
                    other.name(),
                    "numcodecs filters need the bytes codec after them",
                ))
            }
        };
        let filters = numcodecs_filters
            .into_iter()
            .map(|f| BytesToBytes::Filter(Box::new(f.with_endian(endian))));
        bytes_to_bytes.splice(0..0, filters);
    }
    check_fits(&array_to_bytes, data_type)?;
    Ok(CodecChain {
        array_to_array,
        array_to_bytes,
        bytes_to_bytes,
    })
}

/// Whether an array-to-bytes codec can carry elements of `data_type`.
fn check_fits(codec: &ArrayToBytes, data_type: &DataType) -> Result<(), ChainError> {
    let ok = match codec {
        ArrayToBytes::Bytes { .. } => !data_type.is_variable(),
        ArrayToBytes::VlenUtf8
        | ArrayToBytes::VlenBytes
        | ArrayToBytes::ZarrsVlen(_)
        | ArrayToBytes::ArrowVlen { .. } => data_type.is_variable(),
        ArrayToBytes::Sharding(_) => true,
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
        let id = obj.get("id").and_then(Value::as_str).unwrap_or("");
        match id {
            "vlen-utf8" => array_to_bytes = Some(ArrayToBytes::VlenUtf8),
            "vlen-bytes" => array_to_bytes = Some(ArrayToBytes::VlenBytes),
            _ => match filters::numcodecs(id, &config::Config { map: Some(obj) }, data_type) {
                Ok(Some(f)) => {
                    // an object codec: the vlen-utf8 frames it writes are decoded as strings
                    if f.writes_vlen() && array_to_bytes.is_none() {
                        array_to_bytes = Some(ArrayToBytes::VlenUtf8);
                    }
                    bytes_to_bytes.push(BytesToBytes::Filter(Box::new(f)));
                }
                Err(e) => return Err(config_error(id, e)),
                Ok(None) => match BytesToBytes::from_v2(obj) {
                    Ok(Some(c)) => bytes_to_bytes.push(c),
                    Ok(None) => return Err(unsupported(id, "unknown v2 filter")),
                    Err(e) => return Err(config_error(id, e)),
                },
            },
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
        Some(Value::Object(obj)) => match BytesToBytes::from_v2(obj) {
            Ok(Some(c)) => bytes_to_bytes.push(c),
            Ok(None) => {
                let id = obj.get("id").and_then(Value::as_str).unwrap_or("?");
                return Err(unsupported(id, "unknown compressor"));
            }
            Err(e) => {
                let id = obj
                    .get("id")
                    .and_then(Value::as_str)
                    .unwrap_or("compressor");
                return Err(config_error(id, e));
            }
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
        let optional =
            json!([{"name": "vlen-utf8"}, {"name": "frobnicate", "must_understand": false}]);
        let e = parse_v3_chain(optional.as_array().unwrap(), &DataType::String, 1).unwrap_err();
        assert!(
            matches!(&e, ChainError::Unsupported { codec, .. } if codec == "frobnicate"),
            "{e:?}"
        );
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

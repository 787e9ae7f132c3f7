//! The codec registry: every codec zarrow reads, looked up by the name a writer gives it, with
//! the constructor that parses its configuration. Adding a codec is its module and one row
//! here; the chain parsers ([`super::parse_v3_chain`], [`super::parse_v2_chain`]) only look
//! names up and place what the constructors return.
//!
//! Two tables:
//!
//! - [`V3`]: zarr v3 `codecs` names (core names, extension names and their aliases);
//! - [`NUMCODECS`]: numcodecs ids, as zarr v2 `filters`/`compressor` objects write them
//!   (`{"id": "zstd", …}`) and as zarr-python 3 writes them in v3 with the `numcodecs.`
//!   prefix. The three numcodecs compressors zarr-python 3 once wrote without the prefix
//!   (`zlib`, `lz4`, `bz2`) are aliases in [`V3`].

use serde_json::Value;

use super::checksum32::{self, Checksum32};
use super::config::{Config, ConfigError};
use super::filters::{self, Filter};
use super::{
    arrow_vlen, blosc, bytes, bz2, cast_value, config_error, crc32c, gzip, lz4, lzma,
    numcodecs_vlen, optional, packbits, scale_offset, sharding, shuffle, transpose, zarrs_vlen,
    zlib, zstd, ArrayToArray, ArrayToBytes, BytesToBytes, ChainError,
};
use crate::data_type::DataType;

/// A codec with its configuration, as a constructor returns it: the chain parser places it by
/// its kind.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Codec {
    /// An array-to-array codec (`transpose`).
    ArrayToArray(ArrayToArray),
    /// A numcodecs filter (`delta`, `fixedscaleoffset`, …): array-to-array in zarr-python 3's
    /// `numcodecs.*` wrappers, run on the bytes of the `bytes` codec.
    Filter(Filter),
    /// The array-to-bytes codec.
    ArrayToBytes(ArrayToBytes),
    /// A bytes-to-bytes codec (compression, checksums).
    BytesToBytes(BytesToBytes),
}

/// The kind of a codec: where it sits in a chain.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// Array to array, before the array-to-bytes codec.
    ArrayToArray,
    /// A numcodecs filter: array to array in a v3 chain, run on the `bytes` codec's output.
    Filter,
    /// Array to bytes: one per chain.
    ArrayToBytes,
    /// Bytes to bytes, after the array-to-bytes codec.
    BytesToBytes,
}

/// What a constructor knows of the array the chain belongs to.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Context<'a> {
    /// The data type of the elements the codec sees.
    pub(crate) data_type: &'a DataType,
    /// The number of dimensions of the chunks.
    pub(crate) ndim: usize,
}

/// A v3 constructor: the name as written, the `configuration` member, the array.
type V3Constructor = fn(&str, Option<&Value>, &Context<'_>) -> Result<Codec, ChainError>;

/// A numcodecs constructor: the id, the configuration object (numcodecs' keys, with or
/// without `id`), the array's data type.
type NumcodecsConstructor = fn(&str, &Config<'_>, &DataType) -> Result<Codec, ConfigError>;

/// zarr v3 names.
const V3: &[(&str, Kind, V3Constructor)] = &[
    ("transpose", Kind::ArrayToArray, transpose::v3),
    ("bytes", Kind::ArrayToBytes, bytes::v3),
    ("endian", Kind::ArrayToBytes, bytes::v3),
    ("vlen-utf8", Kind::ArrayToBytes, |n, c, cx| {
        numcodecs_v3(n, "vlen-utf8", c, cx)
    }),
    ("vlen-bytes", Kind::ArrayToBytes, |n, c, cx| {
        numcodecs_v3(n, "vlen-bytes", c, cx)
    }),
    ("zarrs.vlen", Kind::ArrayToBytes, zarrs_vlen::v3),
    (
        "https://codec.zarrs.dev/array_to_bytes/vlen",
        Kind::ArrayToBytes,
        zarrs_vlen::v3,
    ),
    ("zarrow.arrow_vlen", Kind::ArrayToBytes, arrow_vlen::v3),
    ("sharding_indexed", Kind::ArrayToBytes, sharding::v3),
    ("packbits", Kind::ArrayToBytes, packbits::v3),
    ("zarrs.optional", Kind::ArrayToBytes, optional::v3),
    ("optional", Kind::ArrayToBytes, optional::v3),
    (
        "https://codec.zarrs.dev/array_to_bytes/optional",
        Kind::ArrayToBytes,
        optional::v3,
    ),
    ("scale_offset", Kind::Filter, scale_offset::v3),
    ("cast_value", Kind::Filter, cast_value::v3),
    ("gzip", Kind::BytesToBytes, |n, c, _| {
        v3_bytes(n, c, gzip::v3)
    }),
    ("zstd", Kind::BytesToBytes, |n, c, _| {
        v3_bytes(n, c, zstd::v3)
    }),
    ("blosc", Kind::BytesToBytes, |n, c, _| {
        v3_bytes(n, c, blosc::v3)
    }),
    ("crc32c", Kind::BytesToBytes, |n, c, _| {
        v3_bytes(n, c, crc32c::v3)
    }),
    ("zlib", Kind::BytesToBytes, |n, c, cx| {
        numcodecs_v3(n, "zlib", c, cx)
    }),
    ("lz4", Kind::BytesToBytes, |n, c, cx| {
        numcodecs_v3(n, "lz4", c, cx)
    }),
    ("bz2", Kind::BytesToBytes, |n, c, cx| {
        numcodecs_v3(n, "bz2", c, cx)
    }),
];

/// numcodecs ids.
const NUMCODECS: &[(&str, Kind, NumcodecsConstructor)] = &[
    ("zlib", Kind::BytesToBytes, |_, c, _| {
        b2b(zlib::numcodecs(c))
    }),
    ("gzip", Kind::BytesToBytes, |_, c, _| {
        b2b(gzip::numcodecs(c))
    }),
    ("zstd", Kind::BytesToBytes, |_, c, _| {
        b2b(zstd::numcodecs(c))
    }),
    ("blosc", Kind::BytesToBytes, |_, c, _| {
        b2b(blosc::numcodecs(c))
    }),
    ("lz4", Kind::BytesToBytes, |_, c, _| b2b(lz4::numcodecs(c))),
    ("bz2", Kind::BytesToBytes, |_, c, _| b2b(bz2::numcodecs(c))),
    ("lzma", Kind::BytesToBytes, |_, c, _| {
        b2b(lzma::numcodecs(c))
    }),
    ("crc32c", Kind::BytesToBytes, |_, c, _| {
        b2b(crc32c::numcodecs(c))
    }),
    ("crc32", Kind::BytesToBytes, |_, c, _| {
        b2b(checksum32::numcodecs(Checksum32::Crc32, c))
    }),
    ("adler32", Kind::BytesToBytes, |_, c, _| {
        b2b(checksum32::numcodecs(Checksum32::Adler32, c))
    }),
    ("fletcher32", Kind::BytesToBytes, |_, c, _| {
        b2b(checksum32::numcodecs(Checksum32::Fletcher32, c))
    }),
    ("shuffle", Kind::BytesToBytes, |_, c, _| {
        b2b(shuffle::numcodecs(c))
    }),
    ("vlen-utf8", Kind::ArrayToBytes, |_, c, dt| {
        numcodecs_vlen::utf8(c, dt)
    }),
    ("vlen-bytes", Kind::ArrayToBytes, |_, c, dt| {
        numcodecs_vlen::bytes(c, dt)
    }),
    ("delta", Kind::Filter, filter),
    ("fixedscaleoffset", Kind::Filter, filter),
    ("quantize", Kind::Filter, filter),
    ("astype", Kind::Filter, filter),
    ("bitround", Kind::Filter, filter),
    ("packbits", Kind::Filter, filter),
    ("categorize", Kind::Filter, filter),
    ("json2", Kind::Filter, filter),
];

fn b2b(codec: Result<BytesToBytes, ConfigError>) -> Result<Codec, ConfigError> {
    codec.map(Codec::BytesToBytes)
}

fn v3_bytes(
    name: &str,
    config: Option<&Value>,
    parse: fn(&Config<'_>) -> Result<BytesToBytes, ConfigError>,
) -> Result<Codec, ChainError> {
    Config::from_value(config)
        .and_then(|c| parse(&c))
        .map(Codec::BytesToBytes)
        .map_err(|e| config_error(name, e))
}

fn filter(id: &str, c: &Config<'_>, data_type: &DataType) -> Result<Codec, ConfigError> {
    match filters::numcodecs(id, c, data_type)? {
        Some(f) => Ok(Codec::Filter(f)),
        None => Err(ConfigError::unsupported(
            None,
            format!("{id} is no numcodecs filter"),
        )),
    }
}

/// The numcodecs codec `id` in a v3 chain (named `name` there), its configuration numcodecs'.
fn numcodecs_v3(
    name: &str,
    id: &str,
    config: Option<&Value>,
    cx: &Context<'_>,
) -> Result<Codec, ChainError> {
    let parsed = Config::from_value(config)
        .and_then(|c| numcodecs(id, &c, cx.data_type).unwrap_or_else(|| unknown_id(id)));
    parsed.map_err(|e| config_error(name, e))
}

fn unknown_id(id: &str) -> Result<Codec, ConfigError> {
    Err(ConfigError::unsupported(
        None,
        format!("unknown numcodecs id '{id}'"),
    ))
}

/// Parse the v3 codec `name`; `None` when no codec has that name (a `numcodecs.` prefix
/// names the numcodecs codec of that id).
pub(crate) fn v3(
    name: &str,
    config: Option<&Value>,
    cx: &Context<'_>,
) -> Option<Result<Codec, ChainError>> {
    if let Some((_, _, build)) = V3.iter().find(|(n, ..)| *n == name) {
        return Some(build(name, config, cx));
    }
    let id = name.strip_prefix("numcodecs.")?;
    NUMCODECS
        .iter()
        .any(|(n, ..)| *n == id)
        .then(|| numcodecs_v3(name, id, config, cx))
}

/// Parse the numcodecs codec `id` from its configuration object; `None` when zarrow knows no
/// codec of that id. An `id` key in the configuration, if present, must be `id`.
pub(crate) fn numcodecs(
    id: &str,
    c: &Config<'_>,
    data_type: &DataType,
) -> Option<Result<Codec, ConfigError>> {
    let (_, _, build) = NUMCODECS.iter().find(|(n, ..)| *n == id)?;
    Some(check_id(id, c).and_then(|()| build(id, c, data_type)))
}

fn check_id(id: &str, c: &Config<'_>) -> Result<(), ConfigError> {
    match c.str("id")? {
        Some(found) if found != id => Err(ConfigError::bad_value(
            "id",
            format!("'{found}'"),
            format!("'{id}' (the codec's id)"),
        )),
        _ => Ok(()),
    }
}

/// The kind of the v3 codec `name` (`numcodecs.` names included); `None` when unknown.
pub(crate) fn v3_kind(name: &str) -> Option<Kind> {
    let found = |table: &[(&str, Kind, _)], key: &str| {
        table.iter().find(|(n, ..)| *n == key).map(|(_, k, _)| *k)
    };
    found(V3, name).or_else(|| found_numcodecs(name.strip_prefix("numcodecs.")?))
}

/// The kind of the numcodecs codec `id`; `None` when unknown.
pub(crate) fn numcodecs_kind(id: &str) -> Option<Kind> {
    found_numcodecs(id)
}

fn found_numcodecs(id: &str) -> Option<Kind> {
    NUMCODECS
        .iter()
        .find(|(n, ..)| *n == id)
        .map(|(_, k, _)| *k)
}

/// Every v3 name zarrow reads without the `numcodecs.` prefix, then every numcodecs id.
#[cfg(test)]
fn names() -> (Vec<&'static str>, Vec<&'static str>) {
    (
        V3.iter().map(|(n, ..)| *n).collect(),
        NUMCODECS.iter().map(|(n, ..)| *n).collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn names_are_unique_and_every_one_has_a_constructor() {
        let (v3_names, ids) = names();
        for list in [&v3_names, &ids] {
            let mut sorted = list.clone();
            sorted.sort_unstable();
            sorted.dedup();
            assert_eq!(sorted.len(), list.len(), "{list:?}");
        }
        let cx = Context {
            data_type: &DataType::UInt8,
            ndim: 1,
        };
        // Each name reaches its constructor: what comes back is a codec or a complaint about
        // its configuration, never "unknown".
        let prefixed = ids.iter().map(|id| format!("numcodecs.{id}"));
        for name in v3_names.iter().map(|n| n.to_string()).chain(prefixed) {
            match v3(&name, Some(&json!({})), &cx) {
                Some(Ok(_))
                | Some(Err(ChainError::Config { .. } | ChainError::Unsupported { .. })) => {}
                other => panic!("{name}: {other:?}"),
            }
        }
        assert!(v3("frobnicate", None, &cx).is_none());
        assert!(v3("numcodecs.pickle", None, &cx).is_none());
    }

    #[test]
    fn aliases_build_the_same_codec() {
        let cx = Context {
            data_type: &DataType::String,
            ndim: 1,
        };
        let c = |name: &str| v3(name, None, &cx).unwrap().unwrap();
        assert_eq!(c("vlen-utf8"), c("numcodecs.vlen-utf8"));
        assert_eq!(c("zlib"), c("numcodecs.zlib"));
        assert_eq!(c("bytes"), c("endian"));
    }
}

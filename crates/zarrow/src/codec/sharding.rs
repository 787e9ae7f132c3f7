//! `sharding_indexed` (zarr v3 core): inner chunks of `chunk_shape`, each through `codecs`, and
//! an index of their offsets and sizes through `index_codecs` at the start or end of the shard.
//! Shards are read by ranges (the index first), so the index's size must be known: its codecs
//! are `bytes` and `crc32c` only.

use serde_json::Value;

use super::registry::{Codec, Context};
use super::{
    codec_list, dimension_list, parse_index_location, parse_v3_chain, unsupported, ArrayToBytes,
    BytesToBytes, ChainError, IndexLocation, Sharding,
};
use crate::data_type::DataType;

/// `sharding_indexed`.
pub(super) fn v3(
    name: &str,
    config: Option<&Value>,
    cx: &Context<'_>,
) -> Result<Codec, ChainError> {
    let ndim = cx.ndim;
    let chunk_shape = dimension_list(
        name,
        config,
        "chunk_shape",
        ndim,
        &format!("positive integers, one per array dimension ({ndim})"),
        |n| n > 0,
        |_| true,
    )?;
    let codecs = parse_v3_chain(codec_list(config, "codecs", name)?, cx.data_type, ndim)?;
    // Nested sharding (tensorstore writes it) is read by ranges at every level: the inner
    // shard's bytes must be its shard as stored.
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
    Ok(Codec::ArrayToBytes(ArrayToBytes::Sharding(Box::new(
        Sharding {
            chunk_shape,
            codecs,
            index_codecs,
            index_location: parse_index_location(config, name, IndexLocation::End)?,
        },
    ))))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn index_codecs_must_keep_the_index_size_known() {
        let cx = Context {
            data_type: &DataType::UInt8,
            ndim: 1,
        };
        let config = |index: Value| {
            json!({"chunk_shape": [2], "codecs": [{"name": "bytes"}], "index_codecs": index,
                "index_location": "start"})
        };
        let ok = config(
            json!([{"name": "bytes", "configuration": {"endian": "little"}},
            {"name": "crc32c"}]),
        );
        match v3("sharding_indexed", Some(&ok), &cx) {
            Ok(Codec::ArrayToBytes(ArrayToBytes::Sharding(s))) => {
                assert_eq!(s.chunk_shape, [2]);
                assert_eq!(s.index_location, IndexLocation::Start);
            }
            other => panic!("{other:?}"),
        }
        let zstd = config(
            json!([{"name": "bytes", "configuration": {"endian": "little"}},
            {"name": "zstd"}]),
        );
        assert!(matches!(
            v3("sharding_indexed", Some(&zstd), &cx),
            Err(ChainError::Unsupported { codec, .. }) if codec == "sharding_indexed"
        ));
    }
}

//! `zarrs.vlen` (also its URL name): variable-length items as an index (offsets, through the
//! `index_codecs` chain) and the data bytes (through `data_codecs`), with the index before or
//! after the data.

use serde_json::Value;

use super::registry::{Codec, Context};
use super::{
    codec_list, parse_index_location, parse_v3_chain, unsupported, ArrayToBytes, ChainError,
    IndexLocation, ZarrsVlen,
};
use crate::data_type::DataType;

/// `zarrs.vlen`.
pub(super) fn v3(
    name: &str,
    config: Option<&Value>,
    _cx: &Context<'_>,
) -> Result<Codec, ChainError> {
    let index_u64 = match config
        .and_then(|c| c.get("index_data_type"))
        .and_then(Value::as_str)
    {
        None | Some("uint64") => true,
        Some("uint32") => false,
        Some(other) => return Err(unsupported(name, format!("index_data_type '{other}'"))),
    };
    let index_type = if index_u64 {
        DataType::UInt64
    } else {
        DataType::UInt32
    };
    let index_codecs = parse_v3_chain(codec_list(config, "index_codecs", name)?, &index_type, 1)?;
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
    Ok(Codec::ArrayToBytes(ArrayToBytes::ZarrsVlen(Box::new(
        ZarrsVlen {
            index_codecs,
            data_codecs,
            index_u64,
            // zarrs' first drafts had no index_location and put the index first.
            index_location: parse_index_location(config, name, IndexLocation::Start)?,
        },
    ))))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn chains_and_index_types() {
        let cx = Context {
            data_type: &DataType::String,
            ndim: 1,
        };
        let config = json!({"index_codecs": [{"name": "bytes", "configuration": {"endian": "little"}}],
            "data_codecs": [{"name": "bytes"}], "index_data_type": "uint32"});
        match v3("zarrs.vlen", Some(&config), &cx) {
            Ok(Codec::ArrayToBytes(ArrayToBytes::ZarrsVlen(z))) => {
                assert!(!z.index_u64);
                assert_eq!(z.index_location, IndexLocation::Start);
            }
            other => panic!("{other:?}"),
        }
        let no_data =
            json!({"index_codecs": [{"name": "bytes", "configuration": {"endian": "little"}}]});
        assert!(matches!(
            v3("zarrs.vlen", Some(&no_data), &cx),
            Err(ChainError::Config { source, .. }) if source.key() == Some("data_codecs")
        ));
        let bad = json!({"index_codecs": [], "data_codecs": [], "index_data_type": "int8"});
        assert!(matches!(
            v3("zarrs.vlen", Some(&bad), &cx),
            Err(ChainError::Unsupported { .. })
        ));
    }
}

//! zarrs' `optional` array-to-bytes codec (`zarrs.optional`, `optional`, and its URL name), the
//! codec of the `optional` data type: a chunk is
//!
//! ```text
//!  u64 LE mask length │ u64 LE data length │ mask (mask_codecs) │ valid elements (data_codecs)
//! ```
//!
//! The mask is the chunk's validity, one bool per element (through `packbits` it is a bitmap,
//! least significant bit first: Arrow's validity layout); the data holds only the valid
//! elements, as a 1-D array of the inner type. Decoding lives in `decode::optional`.

use serde_json::Value;

use super::registry::{Codec, Context};
use super::{codec_list, parse_v3_chain, unsupported, ArrayToBytes, ChainError, CodecChain};
use crate::data_type::DataType;

/// The `optional` codec.
#[derive(Debug, Clone, PartialEq)]
pub struct Optional {
    /// The chain of the mask (a bool per element of the chunk; its array-to-bytes codec is
    /// `packbits` or `bytes`).
    pub mask_codecs: CodecChain,
    /// The chain of the valid elements (a 1-D array of the inner type).
    pub data_codecs: CodecChain,
}

/// `zarrs.optional`.
pub(super) fn v3(
    name: &str,
    config: Option<&Value>,
    cx: &Context<'_>,
) -> Result<Codec, ChainError> {
    let DataType::Optional(inner) = cx.data_type else {
        return Err(unsupported(
            name,
            format!(
                "cannot encode data type {} (only optional types)",
                cx.data_type.name()
            ),
        ));
    };
    let mask_codecs = parse_v3_chain(
        codec_list(config, "mask_codecs", name)?,
        &DataType::Bool,
        cx.ndim,
    )?;
    if !mask_codecs.array_to_array.is_empty()
        || !matches!(
            mask_codecs.array_to_bytes,
            ArrayToBytes::PackBits(_) | ArrayToBytes::Bytes { .. }
        )
    {
        return Err(unsupported(
            name,
            "mask_codecs other than packbits or bytes (and bytes-to-bytes codecs)",
        ));
    }
    let data_codecs = parse_v3_chain(codec_list(config, "data_codecs", name)?, inner, 1)?;
    if matches!(
        data_codecs.array_to_bytes,
        ArrayToBytes::Sharding(_) | ArrayToBytes::Optional(_)
    ) {
        return Err(unsupported(
            name,
            format!("data_codecs with {}", data_codecs.array_to_bytes.name()),
        ));
    }
    Ok(Codec::ArrayToBytes(ArrayToBytes::Optional(Box::new(
        Optional {
            mask_codecs,
            data_codecs,
        },
    ))))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn optional(inner: DataType) -> DataType {
        DataType::Optional(Box::new(inner))
    }

    #[test]
    fn chains_of_mask_and_data() {
        let dt = optional(DataType::Int32);
        let cx = Context {
            data_type: &dt,
            ndim: 2,
        };
        let config = json!({"mask_codecs": [{"name": "packbits"}, {"name": "zstd"}],
            "data_codecs": [{"name": "bytes", "configuration": {"endian": "big"}}]});
        match v3("zarrs.optional", Some(&config), &cx) {
            Ok(Codec::ArrayToBytes(ArrayToBytes::Optional(o))) => {
                assert!(matches!(
                    o.mask_codecs.array_to_bytes,
                    ArrayToBytes::PackBits(_)
                ));
                assert_eq!(o.mask_codecs.bytes_to_bytes.len(), 1);
                assert!(matches!(
                    o.data_codecs.array_to_bytes,
                    ArrayToBytes::Bytes { .. }
                ));
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn misfits_are_errors_naming_the_codec() {
        let config = json!({"mask_codecs": [{"name": "packbits"}],
            "data_codecs": [{"name": "bytes"}]});
        // not an optional data type
        let cx = Context {
            data_type: &DataType::Int8,
            ndim: 1,
        };
        let e = v3("optional", Some(&config), &cx).unwrap_err();
        assert!(e.to_string().contains("optional"), "{e}");
        let dt = optional(DataType::Int8);
        let cx = Context {
            data_type: &dt,
            ndim: 1,
        };
        // no data chain
        let no_data = json!({"mask_codecs": [{"name": "packbits"}]});
        assert!(matches!(
            v3("optional", Some(&no_data), &cx),
            Err(ChainError::Config { source, .. }) if source.key() == Some("data_codecs")
        ));
        // a mask through a vlen codec
        let bad_mask = json!({"mask_codecs": [{"name": "vlen-utf8"}],
            "data_codecs": [{"name": "bytes"}]});
        assert!(v3("optional", Some(&bad_mask), &cx).is_err());
    }
}

//! `bytes` (zarr v3 core; `endian` is its early name): fixed-size elements in a byte order.
//! One-byte types need no `endian`; wider ones must say it.

use serde_json::Value;

use super::config::ConfigError;
use super::registry::{Codec, Context};
use super::{config_error, ArrayToBytes, ChainError};
use crate::data_type::Endian;

/// zarr v3 `bytes`.
pub(super) fn v3(
    name: &str,
    config: Option<&Value>,
    cx: &Context<'_>,
) -> Result<Codec, ChainError> {
    let endian = match config.and_then(|c| c.get("endian")).and_then(Value::as_str) {
        None => None,
        Some("little") => Some(Endian::Little),
        Some("big") => Some(Endian::Big),
        Some(other) => {
            return Err(config_error(
                name,
                ConfigError::bad_value("endian", format!("'{other}'"), "\"little\" or \"big\""),
            ))
        }
    };
    if endian.is_none() && cx.data_type.swap_unit() > 1 {
        return Err(config_error(
            name,
            ConfigError::bad_value(
                "endian",
                "null",
                format!(
                    "\"little\" or \"big\" (it is required for {})",
                    cx.data_type.name()
                ),
            ),
        ));
    }
    Ok(Codec::ArrayToBytes(ArrayToBytes::Bytes { endian }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data_type::DataType;
    use serde_json::json;

    #[test]
    fn endian_is_required_for_multi_byte_types_only() {
        let parse = |dt: &DataType, config: Value| {
            v3(
                "bytes",
                Some(&config),
                &Context {
                    data_type: dt,
                    ndim: 1,
                },
            )
        };
        assert!(matches!(
            parse(&DataType::UInt8, json!({})),
            Ok(Codec::ArrayToBytes(ArrayToBytes::Bytes { endian: None }))
        ));
        assert!(matches!(
            parse(&DataType::Int32, json!({"endian": "big"})),
            Ok(Codec::ArrayToBytes(ArrayToBytes::Bytes {
                endian: Some(Endian::Big)
            }))
        ));
        for (dt, config) in [
            (DataType::Int32, json!({})),
            (DataType::UInt8, json!({"endian": "middle"})),
        ] {
            let e = parse(&dt, config).unwrap_err();
            assert!(
                matches!(&e, ChainError::Config { source, .. } if source.key() == Some("endian")),
                "{e:?}"
            );
        }
    }
}

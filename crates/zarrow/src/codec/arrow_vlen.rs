//! `zarrow.arrow_vlen`: Arrow's layout of variable-length items — the offsets (int32, or int64
//! with `offset_type: "int64"`), zero padding to 64 bytes, then the data.

use serde_json::Value;

use super::registry::{Codec, Context};
use super::{unsupported, ArrayToBytes, ChainError};

/// `zarrow.arrow_vlen`.
pub(super) fn v3(
    name: &str,
    config: Option<&Value>,
    _cx: &Context<'_>,
) -> Result<Codec, ChainError> {
    let large = match config
        .and_then(|c| c.get("offset_type"))
        .and_then(Value::as_str)
    {
        None | Some("int32") => false,
        Some("int64") => true,
        Some(other) => return Err(unsupported(name, format!("offset_type '{other}'"))),
    };
    Ok(Codec::ArrayToBytes(ArrayToBytes::ArrowVlen { large }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data_type::DataType;
    use serde_json::json;

    #[test]
    fn offset_types() {
        let cx = Context {
            data_type: &DataType::String,
            ndim: 1,
        };
        let parse = |c: Value| v3("zarrow.arrow_vlen", Some(&c), &cx);
        assert!(matches!(
            parse(json!({"offset_type": "int64"})),
            Ok(Codec::ArrayToBytes(ArrayToBytes::ArrowVlen { large: true }))
        ));
        assert!(matches!(
            parse(json!({})),
            Ok(Codec::ArrayToBytes(ArrayToBytes::ArrowVlen {
                large: false
            }))
        ));
        assert!(matches!(
            parse(json!({"offset_type": "int16"})),
            Err(ChainError::Unsupported { codec, .. }) if codec == "zarrow.arrow_vlen"
        ));
    }
}

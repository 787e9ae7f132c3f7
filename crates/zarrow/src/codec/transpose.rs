//! `transpose` (zarr v3 core): an array-to-array codec that permutes the chunk's dimensions.
//! Encoded dimension `i` is decoded dimension `order[i]`; the reader undoes it with one `take`
//! per chunk (see [`crate::decode::ChunkSelection`]).

use serde_json::Value;

use super::config::ConfigError;
use super::registry::{Codec, Context};
use super::{config_error, ArrayToArray, ChainError};

/// zarr v3 `transpose`: `order`, a permutation of the array's dimensions.
pub(super) fn v3(
    name: &str,
    config: Option<&Value>,
    cx: &Context<'_>,
) -> Result<Codec, ChainError> {
    let ndim = cx.ndim;
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
    Ok(Codec::ArrayToArray(ArrayToArray::Transpose { order }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data_type::DataType;
    use serde_json::json;

    fn parse(config: Value, ndim: usize) -> Result<Codec, ChainError> {
        let cx = Context {
            data_type: &DataType::Int32,
            ndim,
        };
        v3("transpose", Some(&config), &cx)
    }

    #[test]
    fn an_order_must_be_a_permutation_of_the_dimensions() {
        assert!(matches!(
            parse(json!({"order": [2, 0, 1]}), 3),
            Ok(Codec::ArrayToArray(ArrayToArray::Transpose { order })) if order == [2, 0, 1]
        ));
        for bad in [
            json!({"order": [0, 0]}),
            json!({"order": [0]}),
            json!({"order": [0, 2]}),
            json!({"order": "C"}),
            json!({}),
        ] {
            let e = parse(bad.clone(), 2).unwrap_err();
            assert!(
                matches!(&e, ChainError::Config { codec, source } if codec == "transpose"
                    && source.key() == Some("order")),
                "{bad}: {e:?}"
            );
        }
    }
}

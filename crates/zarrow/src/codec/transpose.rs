//! `transpose` (zarr v3 core): an array-to-array codec that permutes the chunk's dimensions.
//! Encoded dimension `i` is decoded dimension `order[i]`; the reader undoes it with one `take`
//! per chunk (see [`crate::decode::ChunkSelection`]).

use serde_json::Value;

use super::registry::{Codec, Context};
use super::{dimension_list, ArrayToArray, ChainError};

/// zarr v3 `transpose`: `order`, a permutation of the array's dimensions.
pub(super) fn v3(
    name: &str,
    config: Option<&Value>,
    cx: &Context<'_>,
) -> Result<Codec, ChainError> {
    let ndim = cx.ndim;
    let is_permutation = |order: &[u64]| {
        let mut seen = vec![false; ndim];
        order
            .iter()
            .all(|&i| !std::mem::replace(&mut seen[i as usize], true))
    };
    let order = dimension_list(
        name,
        config,
        "order",
        ndim,
        &format!("a permutation of the {ndim} dimensions"),
        |i| i < ndim as u64,
        is_permutation,
    )?;
    let order = order.into_iter().map(|i| i as usize).collect();
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

//! The AnnData conventions on top of zarr groups, as anndata writes and reads them.
//!
//! - An encoded child group reads as one column: `categorical` (`codes` + `categories`) as a
//!   Dictionary, code −1 → NULL, pandas' `ordered` as the dictionary's `dict_is_ordered`; `nullable-integer` / `nullable-boolean` /
//!   `nullable-string-array` (`values` + `mask`) with NULLs where the mask is set.
//! - A dataframe group names its index column in the attribute `_index` and orders its
//!   columns by `column-order` (any group with that attribute: zarrow's writer records the
//!   written order there in every layout).

use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::types::{Int16Type, Int32Type, Int64Type, Int8Type};
use arrow_array::{ArrayRef, DictionaryArray, PrimitiveArray};
use arrow_schema::DataType as ArrowType;
use serde_json::{Map, Value};

use super::column::{dim_names, Member, MemberKind};
use super::group::Opened;
use crate::data_type::DataType;
use crate::node::{Node, ZarrGroup};
use crate::{Error, Result};

/// Refuses, by name, the AnnData encoded groups that are no table: an `awkward-array` is
/// ragged data whose buffers (`node0-offsets`, …) only its `form` attribute makes sense of.
pub(super) fn check_table_group(group: &ZarrGroup) -> Result<()> {
    let encoding = group.metadata().attributes.get("encoding-type");
    if encoding.and_then(Value::as_str) == Some("awkward-array") {
        return Err(Error::table(
            group.path(),
            format!(
                "group '{}' is an AnnData awkward-array (ragged data laid out by its `form` \
             attribute), which zarrow does not read as a table; its buffers are arrays of \
             their own",
                group.path()
            ),
        ));
    }
    Ok(())
}

/// The column an AnnData encoded group reads as, or why it is left out (a plain subgroup is
/// left out too: it is a table of its own).
pub(super) async fn encoded_member(name: &str, group: &ZarrGroup) -> Result<Opened> {
    let encoding = group
        .metadata()
        .attributes
        .get("encoding-type")
        .and_then(Value::as_str)
        .unwrap_or("");
    let member = |dims_of: &crate::ZarrArray, kind| {
        Opened::Member(Box::new(Member {
            name: name.to_string(),
            path: group.path().to_string(),
            dims: dim_names(dims_of),
            shape: dims_of.shape().to_vec(),
            kind,
        }))
    };
    Ok(match encoding {
        "categorical" => match futures::try_join!(
            child_array(group, "codes"),
            child_array(group, "categories"),
        )? {
            (Some(codes), Some(categories))
                if codes
                    .metadata()
                    .data_type
                    .arrow_type(Default::default(), Default::default())
                    .is_signed_integer()
                    && categories.shape().len() == 1 =>
            {
                member(
                    &codes.clone(),
                    MemberKind::Categorical {
                        codes,
                        categories,
                        ordered: group
                            .metadata()
                            .attributes
                            .get("ordered")
                            .and_then(Value::as_bool)
                            .unwrap_or(false),
                    },
                )
            }
            _ => Opened::LeftOut(
                "categorical group without signed integer `codes` and 1-D `categories`".into(),
            ),
        },
        "nullable-integer" | "nullable-boolean" | "nullable-string-array" => {
            match futures::try_join!(child_array(group, "values"), child_array(group, "mask"))? {
                (Some(values), Some(mask))
                    if mask.shape() == values.shape()
                        && mask.metadata().data_type == crate::DataType::Bool =>
                {
                    member(&values.clone(), MemberKind::Masked { values, mask })
                }
                _ => Opened::LeftOut(format!(
                    "{encoding} group without `values` and a boolean `mask` of the same shape"
                )),
            }
        }
        "" => Opened::LeftOut(format!(
            "a group: read '{}' as a table of its own",
            group.path()
        )),
        "awkward-array" => {
            Opened::LeftOut("an AnnData awkward-array (ragged data), no table".into())
        }
        other => Opened::LeftOut(format!(
            "a group (encoding-type {other}): read '{}' as a table of its own",
            group.path()
        )),
    })
}

/// The array child `name` of `group`; `None` if there is none (or it is a group).
async fn child_array(group: &ZarrGroup, name: &str) -> Result<Option<crate::ZarrArray>> {
    match group.child(name).await {
        Ok(Node::Array(a)) => Ok(Some(a)),
        Ok(Node::Group(_)) | Err(Error::NodeNotFound { .. }) => Ok(None),
        Err(e) => Err(e),
    }
}

/// The dataframe's index column (attribute `_index`).
pub(super) fn index_column(attributes: &Map<String, Value>) -> Option<String> {
    attributes
        .get("_index")
        .and_then(Value::as_str)
        .map(str::to_string)
}

/// The dataframe's column order (attribute `column-order`), empty if it has none.
pub(super) fn column_order(attributes: &Map<String, Value>) -> Vec<String> {
    attributes
        .get("column-order")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|v| v.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// How many categories codes of `codes`' data type can refer to: reading more of a categories
/// array than that would be reading values no row can show (a hostile store's categories may
/// claim any length).
pub(super) fn addressable_categories(codes: &DataType, categories: u64) -> u64 {
    let max = match codes {
        DataType::Int8 => 1 << 7,
        DataType::Int16 => 1 << 15,
        DataType::Int32 => 1 << 31,
        _ => 1 << 32,
    };
    categories.min(max)
}

/// AnnData categorical codes → a dictionary array; negative codes are NULL.
pub(super) fn dictionary(path: &str, codes: ArrayRef, categories: ArrayRef) -> Result<ArrayRef> {
    let n = categories.len();
    macro_rules! dict {
        ($t:ty) => {{
            let keys: PrimitiveArray<$t> = codes
                .as_primitive::<$t>()
                .iter()
                .map(|k| k.filter(|k| *k >= 0))
                .collect();
            if let Some(bad) = keys.iter().flatten().find(|k| *k as i64 >= n as i64) {
                return Err(Error::table(
                    path,
                    format!("categorical '{path}': code {bad} but only {n} categories"),
                ));
            }
            Arc::new(DictionaryArray::<$t>::try_new(keys, categories)?) as ArrayRef
        }};
    }
    Ok(match codes.data_type() {
        ArrowType::Int8 => dict!(Int8Type),
        ArrowType::Int16 => dict!(Int16Type),
        ArrowType::Int32 => dict!(Int32Type),
        ArrowType::Int64 => dict!(Int64Type),
        other => {
            return Err(Error::table(
                path,
                format!("categorical '{path}': codes of type {other} are not supported"),
            ))
        }
    })
}

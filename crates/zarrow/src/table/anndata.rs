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
use arrow_array::types::{ArrowDictionaryKeyType, Int16Type, Int32Type, Int64Type, Int8Type};
use arrow_array::{Array, ArrayRef, DictionaryArray, PrimitiveArray};
use arrow_buffer::{ArrowNativeType, BooleanBuffer, NullBuffer};
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

/// AnnData categorical codes → a dictionary array; negative codes are NULL. The keys are the
/// codes' own buffer (no copy) unless a code is negative.
pub(super) fn dictionary(path: &str, codes: ArrayRef, categories: ArrayRef) -> Result<ArrayRef> {
    Ok(match codes.data_type() {
        ArrowType::Int8 => Arc::new(keyed::<Int8Type>(path, &codes, categories)?),
        ArrowType::Int16 => Arc::new(keyed::<Int16Type>(path, &codes, categories)?),
        ArrowType::Int32 => Arc::new(keyed::<Int32Type>(path, &codes, categories)?),
        ArrowType::Int64 => Arc::new(keyed::<Int64Type>(path, &codes, categories)?),
        other => {
            return Err(Error::table(
                path,
                format!("categorical '{path}': codes of type {other} are not supported"),
            ))
        }
    })
}

/// `codes` as the keys of a dictionary over `categories`, checked to be in range. One pass
/// finds the least and greatest code; when all are categories (the usual case: no NULL),
/// the codes are the keys as they are. Otherwise a negative code is NULL (its key 0) and a
/// code past the categories is an error.
fn keyed<K: ArrowDictionaryKeyType>(
    path: &str,
    codes: &ArrayRef,
    categories: ArrayRef,
) -> Result<DictionaryArray<K>>
where
    K::Native: Ord,
{
    let codes = codes.as_primitive::<K>();
    let n = categories.len() as i64;
    let zero = K::Native::default();
    let values = codes.values();
    let in_range = |c: K::Native| c >= zero && c.to_i64().is_some_and(|c| c < n);
    let all_in_range = values.first().is_none_or(|&first| {
        let (lo, hi) = (values.iter()).fold((first, first), |(lo, hi), &c| (lo.min(c), hi.max(c)));
        in_range(lo) && in_range(hi)
    });
    let keys = if all_in_range {
        codes.clone()
    } else {
        let valid = BooleanBuffer::collect_bool(values.len(), |i| values[i] >= zero);
        let nulls = NullBuffer::union(codes.nulls(), Some(&NullBuffer::new(valid)));
        let nulls = nulls.filter(|n| n.null_count() > 0);
        let is_valid = |i: usize| nulls.as_ref().is_none_or(|n| n.is_valid(i));
        if let Some(bad) = (0..values.len()).find(|&i| is_valid(i) && !in_range(values[i])) {
            return Err(Error::table(
                path,
                format!(
                    "categorical '{path}': code {:?} but only {n} categories",
                    values[bad]
                ),
            ));
        }
        let keys = (0..values.len()).map(|i| if is_valid(i) { values[i] } else { zero });
        PrimitiveArray::<K>::new(keys.collect(), nulls)
    };
    // SAFETY: every key of a valid row was checked to be in `0..categories.len()` above (the
    // fast path: every code is), and a NULL row's key is a code in range or 0.
    Ok(unsafe { DictionaryArray::new_unchecked(keys, categories) })
}

#[cfg(test)]
mod tests {
    use arrow_array::cast::AsArray;
    use arrow_array::types::{Int16Type, Int32Type, Int8Type};
    use arrow_array::{Array, ArrayRef, Float32Array, Int16Array, Int32Array, Int8Array};
    use arrow_array::{Int64Array, StringArray};
    use std::sync::Arc;

    use super::dictionary;

    fn categories() -> ArrayRef {
        Arc::new(StringArray::from(vec!["a", "b", "c"]))
    }

    /// The dictionary's rows as strings, NULL as `None`.
    fn rows(array: &ArrayRef) -> Vec<Option<String>> {
        let dictionary = array.as_any_dictionary();
        let values = dictionary.values().as_string::<i32>();
        let keys = dictionary.normalized_keys();
        let row = |i: usize| array.is_valid(i).then(|| values.value(keys[i]).to_string());
        (0..array.len()).map(row).collect()
    }

    fn some(values: &[&str]) -> Vec<Option<String>> {
        values.iter().map(|s| Some(s.to_string())).collect()
    }

    #[test]
    fn codes_in_range_are_the_keys_without_a_copy() {
        let codes = Int32Array::from(vec![2, 0, 1, 1, 0]);
        let pointer = codes.values().inner().as_ptr();
        let read = dictionary("obs/x/codes", Arc::new(codes), categories()).unwrap();
        let keys = read.as_dictionary::<Int32Type>().keys();
        assert_eq!(keys.values().inner().as_ptr(), pointer);
        assert_eq!(keys.null_count(), 0);
        assert_eq!(rows(&read), some(&["c", "a", "b", "b", "a"]));
    }

    #[test]
    fn negative_codes_are_null_with_key_zero() {
        for codes in [
            Arc::new(Int8Array::from(vec![-1, 2, -1, 0])) as ArrayRef,
            Arc::new(Int16Array::from(vec![-1, 2, -5, 0])),
            Arc::new(Int64Array::from(vec![-1, 2, i64::MIN, 0])),
        ] {
            let read = dictionary("obs/x/codes", codes, categories()).unwrap();
            assert_eq!(
                rows(&read),
                vec![None, Some("c".into()), None, Some("a".into())]
            );
            assert_eq!(read.as_any_dictionary().normalized_keys(), vec![0, 2, 0, 0]);
        }
    }

    #[test]
    fn a_code_past_the_categories_is_an_error_naming_it() {
        for codes in [vec![0, 3, 1], vec![-1, 1, 300]] {
            let codes = Arc::new(Int16Array::from(codes));
            let err = dictionary("obs/x/codes", codes, categories()).unwrap_err();
            let message = err.to_string();
            assert!(message.contains("obs/x/codes"), "{message}");
            assert!(message.contains("but only 3 categories"), "{message}");
        }
        let codes = Arc::new(Int8Array::from(vec![0, 1]));
        let none: ArrayRef = Arc::new(StringArray::from(Vec::<&str>::new()));
        assert!(dictionary("obs/x/codes", codes, none).is_err());
    }

    #[test]
    fn a_null_code_is_null_whatever_its_value() {
        // A code the codes array itself marks NULL may hold anything: it is not checked, and
        // its key is 0 when other codes need a copy.
        let codes = Int8Array::from(vec![Some(1), None, Some(-1)]);
        let (_, values, nulls) = codes.into_parts();
        let mut garbage = values.to_vec();
        garbage[1] = 100;
        let codes = Int8Array::new(garbage.into(), nulls);
        let read = dictionary("obs/x/codes", Arc::new(codes), categories()).unwrap();
        assert_eq!(rows(&read), vec![Some("b".into()), None, None]);
        let keys = read.as_dictionary::<Int8Type>().keys();
        assert_eq!(keys.values().to_vec(), vec![1, 0, 0]);
        let empty = dictionary(
            "obs/x/codes",
            Arc::new(Int16Array::from(Vec::<i16>::new())),
            categories(),
        );
        assert_eq!(empty.unwrap().as_dictionary::<Int16Type>().len(), 0);
    }

    #[test]
    fn codes_that_are_not_integers_are_refused() {
        let codes = Arc::new(Float32Array::from(vec![0.0]));
        let err = dictionary("obs/x/codes", codes, categories()).unwrap_err();
        assert!(err.to_string().contains("codes of type Float32"), "{err}");
    }
}

//! The `dictionary` option's encoding: a batch of a string or binary column as an Arrow
//! dictionary (`Int32` keys into the batch's distinct values, in order of first appearance).
//!
//! Each batch gets a dictionary of its own, so the work and the memory are linear in the
//! batch whatever the column's cardinality, and a batch carries nothing of the chunk it was
//! cut from. A low-cardinality column (labels, categories) becomes a few distinct values and
//! four bytes a row: what polars reads as `Categorical` and pandas as `category`.

use std::hash::BuildHasher;
use std::sync::Arc;

use arrow_array::builder::make_view;
use arrow_array::cast::AsArray;
use arrow_array::types::{
    BinaryType, ByteArrayType, Int32Type, LargeBinaryType, LargeUtf8Type, Utf8Type,
};
use arrow_array::{
    Array, ArrayRef, BinaryArray, BinaryViewArray, DictionaryArray, GenericByteArray, Int32Array,
    LargeBinaryArray, LargeStringArray, StringArray, StringViewArray,
};
use arrow_buffer::{Buffer, OffsetBuffer, ScalarBuffer};
use arrow_schema::{ArrowError, DataType as ArrowType};
use hashbrown::HashTable;

use crate::Result;

/// Whether a column of type `dt` can be read as a dictionary (strings and bytes, in any of
/// their Arrow layouts).
pub(crate) fn encodable(dt: &ArrowType) -> bool {
    matches!(
        dt,
        ArrowType::Utf8
            | ArrowType::LargeUtf8
            | ArrowType::Utf8View
            | ArrowType::Binary
            | ArrowType::LargeBinary
            | ArrowType::BinaryView
    )
}

/// The type a column of type `dt` has as a dictionary: `Int32` keys into values of `dt`.
pub(crate) fn dictionary_type(dt: ArrowType) -> ArrowType {
    ArrowType::Dictionary(Box::new(ArrowType::Int32), Box::new(dt))
}

/// `array` (strings or bytes) as a dictionary of its distinct values; NULLs stay NULL (their
/// keys are 0 under the validity mask). The values keep the array's type.
pub(crate) fn encode(array: &ArrayRef) -> Result<ArrayRef> {
    let (keys, distinct) = match array.data_type() {
        ArrowType::Utf8 => distinct_of(array.as_string::<i32>()),
        ArrowType::LargeUtf8 => distinct_of(array.as_string::<i64>()),
        ArrowType::Binary => distinct_of(array.as_binary::<i32>()),
        ArrowType::LargeBinary => distinct_of(array.as_binary::<i64>()),
        ArrowType::Utf8View => distinct_of(array.as_string_view()),
        ArrowType::BinaryView => distinct_of(array.as_binary_view()),
        other => {
            return Err(ArrowError::InvalidArgumentError(format!(
                "a dictionary is made of strings or bytes, not {other}"
            ))
            .into())
        }
    }?;
    let values = distinct.into_array(array.data_type())?;
    let keys = Int32Array::new(ScalarBuffer::from(keys), array.nulls().cloned());
    if values.is_empty() {
        // Nothing but NULLs (or nothing): their keys, 0, point at no value.
        return Ok(Arc::new(DictionaryArray::<Int32Type>::try_new(
            keys, values,
        )?));
    }
    // SAFETY: every key is the position of a value `distinct_of` added (a NULL's is 0, and
    // there is a value 0), so every key is in bounds of `values`.
    Ok(Arc::new(unsafe {
        DictionaryArray::<Int32Type>::new_unchecked(keys, values)
    }))
}

/// An array whose elements are byte strings: the layouts [`encode`] takes.
trait ByteElements: Array {
    /// Element `i` as an Arrow view (its length, then its bytes inline when at most 12, else
    /// its first four) and, when longer than 12 bytes, its bytes.
    fn element(&self, i: usize) -> (u128, &[u8]);
}

macro_rules! offset_elements {
    ($($array:ty),*) => {$(
        impl ByteElements for $array {
            fn element(&self, i: usize) -> (u128, &[u8]) {
                let bytes: &[u8] = self.value(i).as_ref();
                (make_view(bytes, 0, 0), bytes)
            }
        }
    )*};
}

offset_elements!(StringArray, LargeStringArray, BinaryArray, LargeBinaryArray);

macro_rules! view_elements {
    ($($array:ty),*) => {$(
        impl ByteElements for $array {
            fn element(&self, i: usize) -> (u128, &[u8]) {
                let view = self.views()[i];
                match view as u32 {
                    0..=12 => (view, &[]),
                    _ => (view, self.value(i).as_ref()),
                }
            }
        }
    )*};
}

view_elements!(StringViewArray, BinaryViewArray);

/// The distinct values of a batch, in order of first appearance: their bytes end to end.
#[derive(Default)]
struct Distinct {
    bytes: Vec<u8>,
    /// `ends[k]`: where value `k` ends in `bytes`.
    ends: Vec<usize>,
    /// `heads[k]`: value `k`'s view if it is at most 12 bytes long, else its length and
    /// prefix (the view's low half).
    heads: Vec<u128>,
}

impl Distinct {
    fn value(&self, k: usize) -> &[u8] {
        let start = if k == 0 { 0 } else { self.ends[k - 1] };
        &self.bytes[start..self.ends[k]]
    }

    /// Adds value `v` with its head; its key, or an error past `i32` keys.
    fn add(&mut self, v: &[u8], head: u128) -> Result<u32> {
        let k = u32::try_from(self.ends.len())
            .ok()
            .filter(|&k| k <= i32::MAX as u32)
            .ok_or_else(|| {
                ArrowError::InvalidArgumentError(
                    "a batch has more than 2^31 distinct values".to_string(),
                )
            })?;
        self.bytes.extend_from_slice(v);
        self.ends.push(self.bytes.len());
        self.heads.push(head);
        Ok(k)
    }

    /// The hash value `k` was found by (see [`distinct_of`]).
    fn hash(&self, hasher: &impl BuildHasher, k: u32) -> u64 {
        let head = self.heads[k as usize];
        match head as u32 {
            0..=12 => hasher.hash_one(head),
            _ => hasher.hash_one(self.value(k as usize)),
        }
    }

    /// The values as an array of type `dt` (the encoded array's). Strings were valid UTF-8
    /// where they came from, and are checked again: only the distinct ones, once.
    fn into_array(self, dt: &ArrowType) -> Result<ArrayRef> {
        Ok(match dt {
            ArrowType::Utf8 => self.offset_array::<Utf8Type>()?,
            ArrowType::LargeUtf8 => self.offset_array::<LargeUtf8Type>()?,
            ArrowType::Binary => self.offset_array::<BinaryType>()?,
            ArrowType::LargeBinary => self.offset_array::<LargeBinaryType>()?,
            ArrowType::Utf8View => Arc::new(self.views().to_string_view()?),
            _ => Arc::new(self.views()),
        })
    }

    /// The values in an offsets layout; their bytes become its data buffer as they are.
    fn offset_array<T: ByteArrayType>(self) -> Result<ArrayRef> {
        let offsets = self.offsets::<T::Offset>()?;
        let data = Buffer::from_vec(self.bytes);
        Ok(Arc::new(GenericByteArray::<T>::try_new(
            offsets, data, None,
        )?))
    }

    fn views(&self) -> BinaryViewArray {
        BinaryViewArray::from_iter_values((0..self.ends.len()).map(|k| self.value(k)))
    }

    /// The values' offsets, in the width of `O`; an error if their bytes do not fit it.
    fn offsets<O: arrow_array::OffsetSizeTrait>(&self) -> Result<OffsetBuffer<O>> {
        let too_long = || {
            ArrowError::InvalidArgumentError(format!(
                "a dictionary's {} bytes of values do not fit {}-bit offsets",
                self.bytes.len(),
                8 * O::get_byte_width()
            ))
        };
        let ends = std::iter::once(Some(O::zero()))
            .chain(self.ends.iter().map(|&e| O::from_usize(e)))
            .collect::<Option<Vec<O>>>()
            .ok_or_else(too_long)?;
        Ok(OffsetBuffer::new(ScalarBuffer::from(ends)))
    }
}

/// Each element's key into the distinct values, and those values. A key is the value's
/// position among them, found through a hash table of positions. A value of at most 12 bytes
/// is its view (length and bytes in one `u128`): hashed and compared as one number; a longer
/// one is compared by length and prefix first, then by its bytes.
fn distinct_of(array: &impl ByteElements) -> Result<(Vec<i32>, Distinct)> {
    let hasher = hashbrown::DefaultHashBuilder::default();
    let mut table: HashTable<u32> = HashTable::with_capacity(array.len().min(1024));
    let mut distinct = Distinct::default();
    let mut keys = Vec::with_capacity(array.len());
    let nulls = array.null_count() > 0;
    for i in 0..array.len() {
        if nulls && !array.is_valid(i) {
            keys.push(0);
            continue;
        }
        let (view, long) = array.element(i);
        let len = view as u32 as usize;
        let key = if len <= 12 {
            // A valid view pads an inline value with zeros: equal values, equal views.
            let hash = hasher.hash_one(view);
            match table.find(hash, |&k| distinct.heads[k as usize] == view) {
                Some(&k) => k,
                None => {
                    let k = distinct.add(&view.to_le_bytes()[4..4 + len], view)?;
                    table.insert_unique(hash, k, |&k| distinct.hash(&hasher, k));
                    k
                }
            }
        } else {
            let head = view as u64 as u128;
            let hash = hasher.hash_one(long);
            let same =
                |&k: &u32| distinct.heads[k as usize] == head && distinct.value(k as usize) == long;
            match table.find(hash, same) {
                Some(&k) => k,
                None => {
                    let k = distinct.add(long, head)?;
                    table.insert_unique(hash, k, |&k| distinct.hash(&hasher, k));
                    k
                }
            }
        };
        keys.push(key as i32);
    }
    Ok((keys, distinct))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decoded(array: &ArrayRef) -> ArrayRef {
        let dict = array.as_any_dictionary();
        arrow_select::take::take(dict.values().as_ref(), dict.keys(), None).unwrap()
    }

    /// `strings` as offsets, views and bytes each encode to `distinct` values and back.
    fn assert_layouts_round_trip(strings: &[&str], distinct: usize) {
        for array in [
            Arc::new(StringArray::from(strings.to_vec())) as ArrayRef,
            Arc::new(StringViewArray::from(strings.to_vec())),
            Arc::new(LargeBinaryArray::from_iter_values(
                strings.iter().map(|s| s.as_bytes()),
            )),
        ] {
            assert_round_trips(&array, distinct);
        }
    }

    /// `array` encodes to `distinct` values, and decodes back to itself.
    fn assert_round_trips(array: &ArrayRef, distinct: usize) {
        let encoded = encode(array).unwrap();
        let what = array.data_type();
        assert_eq!(
            encoded.as_any_dictionary().values().len(),
            distinct,
            "{what}"
        );
        assert_eq!(decoded(&encoded).as_ref(), array.as_ref(), "{what}");
    }

    #[test]
    fn strings_become_their_distinct_values_and_keys() {
        let array: ArrayRef = Arc::new(StringArray::from(vec![
            Some("b"),
            None,
            Some("a"),
            Some("b"),
            Some(""),
            Some("a"),
        ]));
        let encoded = encode(&array).unwrap();
        let dict = encoded.as_dictionary::<Int32Type>();
        assert_eq!(
            dict.values().as_string::<i32>().iter().collect::<Vec<_>>(),
            [Some("b"), Some("a"), Some("")]
        );
        assert_eq!(
            dict.keys().iter().collect::<Vec<_>>(),
            [Some(0), None, Some(1), Some(0), Some(2), Some(1)]
        );
        assert_eq!(decoded(&encoded).as_ref(), array.as_ref());
    }

    #[test]
    fn every_layout_keeps_its_type_and_values() {
        let long = "a string longer than twelve bytes";
        let strings = vec![Some(long), Some("short"), None, Some(long), Some("short")];
        let bytes: Vec<Option<&[u8]>> = strings.iter().map(|s| s.map(str::as_bytes)).collect();
        let arrays: Vec<ArrayRef> = vec![
            Arc::new(StringArray::from(strings.clone())),
            Arc::new(LargeStringArray::from(strings.clone())),
            Arc::new(StringViewArray::from(strings.clone())),
            Arc::new(BinaryArray::from(bytes.clone())),
            Arc::new(LargeBinaryArray::from(bytes.clone())),
            Arc::new(BinaryViewArray::from(bytes.clone())),
        ];
        for array in arrays {
            let encoded = encode(&array).unwrap();
            assert_eq!(
                encoded.data_type(),
                &dictionary_type(array.data_type().clone())
            );
            assert_round_trips(&array, 2);
        }
    }

    #[test]
    fn values_at_the_inline_boundary_and_with_shared_prefixes_stay_apart() {
        let strings = [
            "twelve bytes",
            "twelve bytes!",
            "twelve byte",
            "twelve bytes",
            "twelve bytes!",
            "twelve bytes?",
            "",
        ];
        assert_layouts_round_trip(&strings, 5);
    }

    #[test]
    fn long_values_differing_in_their_last_byte_stay_apart() {
        // Values of 16 to 29 bytes, each pair differing only in its last byte (past a view's
        // prefix).
        let strings = [
            "twenty-eight bytes long, ok!",
            "twenty-eight bytes long, ok?",
            "twenty-nine bytes long, yes!!",
            "twenty-nine bytes long, yes!?",
            "twenty-eight bytes long, ok!",
            "twenty-nine bytes long, yes!!",
            "twenty-seven bytes long, ok",
            "sixteen bytes ab",
            "sixteen bytes ac",
        ];
        assert_layouts_round_trip(&strings, 7);
    }

    #[test]
    fn many_values_alike_but_in_their_last_bytes_stay_apart() {
        // Enough values that hash tags collide, so lookups compare values: these share their
        // length and first four bytes (a long value's head), and differ in their last four.
        for (head, width) in [
            ("same 12 byte", 16),
            ("same 24 bytes for all of", 28),
            ("long", 40),
        ] {
            let values: Vec<String> = (0..4000)
                .map(|i| format!("{head:-<w$}{i:04}", w = width - 4))
                .collect();
            let twice: Vec<&str> = values.iter().chain(&values).map(String::as_str).collect();
            let array: ArrayRef = Arc::new(StringArray::from(twice));
            assert_round_trips(&array, 4000);
        }
    }

    #[test]
    fn a_slice_is_encoded_from_its_own_elements() {
        let array: ArrayRef = Arc::new(StringArray::from(vec!["x", "y", "z", "y"]));
        let slice = array.slice(1, 3);
        let encoded = encode(&slice).unwrap();
        assert_eq!(encoded.len(), 3);
        let values = encoded.as_any_dictionary().values().clone();
        assert_eq!(
            values.as_string::<i32>().iter().collect::<Vec<_>>(),
            [Some("y"), Some("z")]
        );
        assert_eq!(decoded(&encoded).as_ref(), slice.as_ref());
    }

    #[test]
    fn all_distinct_and_empty_batches_encode() {
        let many: Vec<String> = (0..10_000).map(|i| format!("id-{i}")).collect();
        let array: ArrayRef = Arc::new(StringArray::from(many));
        let encoded = encode(&array).unwrap();
        assert_eq!(encoded.as_any_dictionary().values().len(), 10_000);
        assert_eq!(decoded(&encoded).as_ref(), array.as_ref());
        let empty: ArrayRef = Arc::new(StringArray::from(Vec::<&str>::new()));
        assert_eq!(encode(&empty).unwrap().len(), 0);
    }

    #[test]
    fn other_types_are_refused() {
        let ints: ArrayRef = Arc::new(Int32Array::from(vec![1, 2]));
        assert!(encode(&ints).is_err());
        assert!(!encodable(ints.data_type()));
    }
}

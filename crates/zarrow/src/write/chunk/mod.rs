//! The one chunk encoder of zarrow's writers ([`ChunkEncoder`]: a table's columns, and
//! `write_array`'s n-d arrays, chunk by chunk), and what both write about an array: its zarr v3
//! data type ([`zarr_type`]), its array-to-bytes codec and its `zarr.json`.
//!
//! Strings and bytes are written as `vlen-utf8`/`vlen-bytes` (what zarr-python and zarrs read)
//! or as `zarrow.arrow_vlen` (the Arrow layout: zero-copy for zarrow readers), fixed-size types
//! through `bytes` (little-endian), then the optional compression. NULLs and the padding of a
//! partial chunk are one element's bytes given by the writer.

pub mod encode;

use arrow_array::Array;
use arrow_schema::{DataType as ArrowType, TimeUnit};
use base64::Engine;
use serde_json::{json, Map, Value};

use crate::codec::compression::BytesToBytes;
use crate::{Error, Result};

/// The chunk encoding of string and binary arrays.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum VlenEncoding {
    /// numcodecs `vlen-utf8` / `vlen-bytes` (readable by zarr-python and zarrs).
    #[default]
    Numcodecs,
    /// `zarrow.arrow_vlen` with int32 (`large: false`) or int64 offsets.
    ArrowVlen {
        /// int64 offsets.
        large: bool,
    },
}

/// How one chunk is encoded: the array-to-bytes step (fixed-size elements or a vlen layout),
/// the NULL and padding element, and the compression. Both writers encode every chunk here.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ChunkEncoder<'a> {
    /// Element size of fixed-size types (`None`: strings and bytes).
    pub fixed: Option<usize>,
    /// One element's bytes, written for a NULL and for the padding of a partial chunk (empty
    /// for strings and bytes written as the empty value).
    pub null_bytes: &'a [u8],
    /// The layout of string and binary chunks.
    pub string_encoding: VlenEncoding,
    /// The compression after the array-to-bytes step.
    pub compression: Option<&'a BytesToBytes>,
}

impl ChunkEncoder<'_> {
    /// The stored chunk of `values` (their elements in order, at most `len`), padded to `len`
    /// elements and compressed; errors name chunk `key` of array `path`. A partial chunk of
    /// a fixed-size type is padded as it is compressed (gzip, zstd): the padding is never
    /// whole in memory.
    pub fn stored(&self, values: &dyn Array, len: usize, path: &str, key: &str) -> Result<Vec<u8>> {
        let missing = len.saturating_sub(values.len());
        if let (Some(_), Some(c), true) = (self.fixed, self.compression, missing > 0) {
            let head = self.raw(values, values.len())?;
            if let Some(stored) = c.encode_padded(&head, self.null_bytes, missing) {
                return stored.map_err(|e| Error::chunk(path, key, e));
            }
        }
        let raw = self.raw(values, len)?;
        match self.compression {
            Some(c) => c.encode(&raw).map_err(|e| Error::chunk(path, key, e)),
            None => Ok(raw),
        }
    }

    /// The uncompressed chunk of `values` (at most `len`), padded to `len` elements.
    fn raw(&self, values: &dyn Array, len: usize) -> Result<Vec<u8>> {
        match self.fixed {
            Some(_) => {
                let mut out = encode::fixed_values(values, self.null_bytes)?;
                for _ in values.len()..len {
                    out.extend_from_slice(self.null_bytes);
                }
                Ok(out)
            }
            None => {
                let mut items = encode::byte_items(values)?;
                items.resize(len.max(items.len()), None);
                match self.string_encoding {
                    VlenEncoding::Numcodecs => {
                        encode::vlen_numcodecs_items(&items, self.null_bytes)
                    }
                    VlenEncoding::ArrowVlen { large } => {
                        encode::arrow_vlen_items(&items, self.null_bytes, large)
                    }
                }
            }
        }
    }

    /// Whether every element of `values` is a NULL or equal to the NULL element (a chunk
    /// that need not be stored: readers fill it).
    pub fn only_null(&self, values: &dyn Array) -> Result<bool> {
        if values.logical_null_count() == values.len() {
            return Ok(true);
        }
        Ok(match self.fixed {
            Some(size) => encode::fixed_values(values, self.null_bytes)?
                .chunks_exact(size.max(1))
                .all(|e| e == self.null_bytes),
            None => encode::byte_items(values)?
                .iter()
                .all(|i| i.is_none_or(|b| b == self.null_bytes)),
        })
    }
}

/// The zarr v3 data type, default fill value JSON and fixed element size for an Arrow type.
pub(crate) fn zarr_type(dt: &ArrowType) -> Result<(Value, Value, Option<usize>)> {
    let np_unit = |u: &TimeUnit| match u {
        TimeUnit::Second => "s",
        TimeUnit::Millisecond => "ms",
        TimeUnit::Microsecond => "us",
        TimeUnit::Nanosecond => "ns",
    };
    Ok(match dt {
        ArrowType::Boolean => (json!("bool"), json!(false), Some(1)),
        ArrowType::Int8 => (json!("int8"), json!(0), Some(1)),
        ArrowType::Int16 => (json!("int16"), json!(0), Some(2)),
        ArrowType::Int32 => (json!("int32"), json!(0), Some(4)),
        ArrowType::Int64 => (json!("int64"), json!(0), Some(8)),
        ArrowType::UInt8 => (json!("uint8"), json!(0), Some(1)),
        ArrowType::UInt16 => (json!("uint16"), json!(0), Some(2)),
        ArrowType::UInt32 => (json!("uint32"), json!(0), Some(4)),
        ArrowType::UInt64 => (json!("uint64"), json!(0), Some(8)),
        ArrowType::Float16 => (json!("float16"), json!(0.0), Some(2)),
        ArrowType::Float32 => (json!("float32"), json!(0.0), Some(4)),
        ArrowType::Float64 => (json!("float64"), json!(0.0), Some(8)),
        ArrowType::Timestamp(u, _) => (
            json!({"name": "numpy.datetime64", "configuration": {"unit": np_unit(u), "scale_factor": 1}}),
            json!("NaT"),
            Some(8),
        ),
        ArrowType::Duration(u) => (
            json!({"name": "numpy.timedelta64", "configuration": {"unit": np_unit(u), "scale_factor": 1}}),
            json!("NaT"),
            Some(8),
        ),
        ArrowType::FixedSizeBinary(n) => (
            json!({"name": "raw_bytes", "configuration": {"length_bytes": n}}),
            json!(base64::engine::general_purpose::STANDARD.encode(vec![0u8; *n as usize])),
            Some(*n as usize),
        ),
        ArrowType::Utf8 | ArrowType::LargeUtf8 | ArrowType::Utf8View => {
            (json!("string"), json!(""), None)
        }
        ArrowType::Binary | ArrowType::LargeBinary | ArrowType::BinaryView => {
            (json!("variable_length_bytes"), json!(""), None)
        }
        ArrowType::Struct(fields) => {
            let mut items = Vec::with_capacity(fields.len());
            let mut size = 0;
            for f in fields {
                match zarr_type(f.data_type())? {
                    (t, _, Some(n)) => {
                        items.push(json!([f.name(), t]));
                        size += n;
                    }
                    _ => {
                        return Err(Error::UnwritableType {
                            data_type: f.data_type().clone(),
                            zarr_format: 3,
                            field: Some(f.name().clone()),
                        })
                    }
                }
            }
            (
                json!({"name": "structured", "configuration": {"fields": items}}),
                json!(base64::engine::general_purpose::STANDARD.encode(vec![0u8; size])),
                Some(size),
            )
        }
        other => {
            return Err(Error::UnwritableType {
                data_type: other.clone(),
                zarr_format: 3,
                field: None,
            })
        }
    })
}

/// The array-to-bytes codec of a v3 array: `bytes` (little-endian) for fixed-size elements,
/// else the variable-length `encoding`: `vlen-utf8` for strings and `vlen-bytes` for bytes, or
/// `zarrow.arrow_vlen`.
pub(crate) fn array_to_bytes_json(
    fixed_size: bool,
    encoding: VlenEncoding,
    strings: bool,
) -> Value {
    match (fixed_size, encoding) {
        (true, _) => json!({"name": "bytes", "configuration": {"endian": "little"}}),
        (false, VlenEncoding::Numcodecs) if strings => {
            json!({"name": "vlen-utf8", "configuration": {}})
        }
        (false, VlenEncoding::Numcodecs) => json!({"name": "vlen-bytes", "configuration": {}}),
        (false, VlenEncoding::ArrowVlen { large }) => json!({
            "name": "zarrow.arrow_vlen",
            "configuration": {"offset_type": if large { "int64" } else { "int32" }}
        }),
    }
}

/// What a v3 array's `zarr.json` says, for [`v3_array_json`].
pub(crate) struct V3Array<'a> {
    pub shape: &'a [u64],
    pub data_type: &'a Value,
    pub chunk_shape: &'a [u64],
    pub fill_value: Value,
    pub codecs: Vec<Value>,
    pub attributes: Map<String, Value>,
    pub dimension_names: Option<&'a [String]>,
}

/// A v3 array's `zarr.json` on a regular chunk grid with `/`-separated chunk keys, as both
/// writers (arrays and tables) write it.
pub(crate) fn v3_array_json(a: V3Array<'_>) -> Value {
    let mut meta = json!({
        "zarr_format": 3,
        "node_type": "array",
        "shape": a.shape,
        "data_type": a.data_type,
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": a.chunk_shape}},
        "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
        "fill_value": a.fill_value,
        "codecs": a.codecs,
        "attributes": a.attributes,
    });
    if let Some(names) = a.dimension_names {
        meta["dimension_names"] = json!(names);
    }
    meta
}

/// The limits a writer checks its own metadata documents with: as a reader would parse them,
/// whatever the size of their elements.
pub(crate) fn self_check_limits() -> crate::ReadLimits {
    crate::ReadLimits {
        max_item_bytes: crate::options::MAX_ITEM_BYTES,
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow_schema::{Field, Fields};

    use super::*;

    #[test]
    fn types_zarr_has_none_for_are_typed_errors() {
        let list = ArrowType::List(Arc::new(Field::new("item", ArrowType::Int32, true)));
        assert!(matches!(
            zarr_type(&list),
            Err(Error::UnwritableType { data_type, zarr_format: 3, field: None }) if data_type == list
        ));
        let with_string = ArrowType::Struct(Fields::from(vec![
            Field::new("n", ArrowType::Int32, false),
            Field::new("s", ArrowType::Utf8, false),
        ]));
        let e = zarr_type(&with_string).unwrap_err();
        assert!(
            matches!(&e, Error::UnwritableType { data_type: ArrowType::Utf8, field: Some(f), .. } if f == "s"),
            "{e:?}"
        );
        assert!(e.to_string().contains("struct field 's'"), "{e}");
    }
}

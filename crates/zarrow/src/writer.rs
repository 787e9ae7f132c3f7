//! Arrow arrays → zarr v3 arrays.
//!
//! One Arrow array (the elements in C order) plus a shape becomes a zarr v3 array on a regular
//! chunk grid: strings and bytes as `vlen-utf8`/`vlen-bytes` (what zarr-python and zarrs read) or
//! as `zarrow.arrow_vlen` (the Arrow layout: zero-copy for zarrow readers), fixed-size types
//! through `bytes` (little-endian), then optional zstd or gzip. Nulls are written as the fill
//! value (NaT for datetimes); edge chunks are padded with it; chunks holding only the fill value
//! are not written unless asked (as zarr-python's `write_empty_chunks=False`).

use arrow_array::cast::AsArray;
use arrow_array::{Array, ArrayRef, UInt32Array};
use arrow_schema::{DataType as ArrowType, TimeUnit};
use base64::Engine;
use bytes::Bytes;
use serde_json::{json, Map, Value};

use crate::codec::BytesToBytes;
use crate::grid::c_order;
use crate::store::ZarrStore;
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

/// Compression after the array-to-bytes codec.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Compression {
    /// None.
    #[default]
    None,
    /// zstd at a level.
    Zstd(i32),
    /// gzip at a level.
    Gzip(u32),
}

/// How to write an array.
///
/// ```
/// use arrow_array::{Array, StringArray};
/// use zarrow::{
///     write_array, Compression, VlenEncoding, ZarrArray, ZarrReadOptions, ZarrStore,
///     ZarrWriteOptions,
/// };
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> zarrow::Result<()> {
/// let store = ZarrStore::open("memory:///labels.zarr")?;
/// let values = StringArray::from(vec!["a", "bb", "", "dddd", "e"]);
/// let options = ZarrWriteOptions {
///     chunk_shape: Some(vec![2]),
///     vlen_encoding: VlenEncoding::ArrowVlen { large: false },
///     compression: Compression::Zstd(3),
///     dimension_names: Some(vec!["cell".into()]),
///     ..Default::default()
/// };
/// write_array(&store, "label", &values, &[5], &options).await?;
///
/// let array = ZarrArray::open("memory:///labels.zarr/label").await?;
/// assert_eq!(array.chunk_grid_shape(), [3]);
/// assert_eq!(array.metadata().dimension_name(0), Some("cell"));
/// let read = array.read_region(&[0], &[5], &ZarrReadOptions::default()).await?;
/// assert_eq!(read.as_ref(), &values as &dyn Array);
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, Default)]
pub struct ZarrWriteOptions {
    /// Chunk shape; default: the whole array in one chunk (at least one element per dimension).
    pub chunk_shape: Option<Vec<u64>>,
    /// String/binary encoding.
    pub vlen_encoding: VlenEncoding,
    /// Compression.
    pub compression: Compression,
    /// Fill value as zarr v3 JSON (default: `""` for strings and bytes, 0, false, NaT).
    pub fill_value: Option<Value>,
    /// Dimension names.
    pub dimension_names: Option<Vec<String>>,
    /// User attributes.
    pub attributes: Map<String, Value>,
    /// Write chunks that hold only the fill value (default: skip them).
    pub write_empty_chunks: bool,
}

/// Chunk encoders, also used by benchmarks and tests to build chunks.
pub mod encode {
    use super::*;

    /// The items of a string or binary array as byte slices (`None` for nulls).
    pub fn byte_items(values: &dyn Array) -> Result<Vec<Option<&[u8]>>> {
        Ok(match values.data_type() {
            ArrowType::Utf8 => values
                .as_string::<i32>()
                .iter()
                .map(|o| o.map(str::as_bytes))
                .collect(),
            ArrowType::LargeUtf8 => values
                .as_string::<i64>()
                .iter()
                .map(|o| o.map(str::as_bytes))
                .collect(),
            ArrowType::Utf8View => values
                .as_string_view()
                .iter()
                .map(|o| o.map(str::as_bytes))
                .collect(),
            ArrowType::Binary => values.as_binary::<i32>().iter().collect(),
            ArrowType::LargeBinary => values.as_binary::<i64>().iter().collect(),
            ArrowType::BinaryView => values.as_binary_view().iter().collect(),
            other => {
                return Err(Error::InvalidArgument(format!(
                    "{other} is not a string or binary type"
                )))
            }
        })
    }

    fn len_u32(len: usize) -> Result<u32> {
        u32::try_from(len).map_err(|_| {
            Error::InvalidArgument(format!(
                "item of {len} bytes exceeds vlen-utf8's 4 GiB limit"
            ))
        })
    }

    /// A numcodecs `vlen-utf8`/`vlen-bytes` chunk of `values` (nulls as `fill`).
    pub fn vlen_numcodecs_items(items: &[Option<&[u8]>], fill: &[u8]) -> Result<Vec<u8>> {
        let total: usize = items.iter().map(|i| 4 + i.unwrap_or(fill).len()).sum();
        let mut out = Vec::with_capacity(4 + total);
        out.extend_from_slice(&len_u32(items.len())?.to_le_bytes());
        for item in items {
            let b = item.unwrap_or(fill);
            out.extend_from_slice(&len_u32(b.len())?.to_le_bytes());
            out.extend_from_slice(b);
        }
        Ok(out)
    }

    /// A `zarrow.arrow_vlen` chunk: offsets, zero padding to 64 bytes, data.
    pub fn arrow_vlen_items(items: &[Option<&[u8]>], fill: &[u8], large: bool) -> Result<Vec<u8>> {
        let width = if large { 8 } else { 4 };
        let offsets_len = (items.len() + 1) * width;
        let data_start = offsets_len.div_ceil(64) * 64;
        let total: usize = items.iter().map(|i| i.unwrap_or(fill).len()).sum();
        if !large && total > i32::MAX as usize {
            return Err(Error::InvalidArgument(
                "chunk exceeds int32 offsets: use large offsets".into(),
            ));
        }
        let mut out = vec![0u8; data_start];
        out.reserve(total);
        let mut offset = 0usize;
        let put = |out: &mut Vec<u8>, i: usize, o: usize| {
            if large {
                out[i * 8..i * 8 + 8].copy_from_slice(&(o as i64).to_le_bytes());
            } else {
                out[i * 4..i * 4 + 4].copy_from_slice(&(o as i32).to_le_bytes());
            }
        };
        put(&mut out, 0, 0);
        for (i, item) in items.iter().enumerate() {
            let b = item.unwrap_or(fill);
            out.extend_from_slice(b);
            offset += b.len();
            put(&mut out, i + 1, offset);
        }
        Ok(out)
    }

    /// The little-endian elements of a fixed-size array (numbers, booleans, timestamps,
    /// durations, FixedSizeBinary, structs of those), nulls as `fill` (one element).
    pub fn fixed_values(values: &dyn Array, fill: &[u8]) -> Result<Vec<u8>> {
        let size = fill.len();
        let len = values.len();
        let mut out = match values.data_type() {
            ArrowType::Boolean => values.as_boolean().values().iter().map(u8::from).collect(),
            ArrowType::Struct(fields) => {
                let sa = values.as_struct();
                let mut parts = Vec::with_capacity(fields.len());
                let mut at = 0;
                for column in sa.columns() {
                    let field_size = zarr_type(column.data_type())?.2.unwrap_or(0);
                    let part = fixed_values(column.as_ref(), &fill[at..at + field_size])?;
                    parts.push((part, field_size));
                    at += field_size;
                }
                let mut out = Vec::with_capacity(len * size);
                for i in 0..len {
                    for (part, n) in &parts {
                        out.extend_from_slice(&part[i * n..(i + 1) * n]);
                    }
                }
                out
            }
            ArrowType::Utf8
            | ArrowType::LargeUtf8
            | ArrowType::Utf8View
            | ArrowType::Binary
            | ArrowType::LargeBinary
            | ArrowType::BinaryView => {
                return Err(Error::InvalidArgument(format!(
                    "{} is not a fixed-size type",
                    values.data_type()
                )))
            }
            _ => {
                // Primitive and FixedSizeBinary arrays: one buffer of `size`-byte elements,
                // native-endian, which is little-endian on every target zarrow builds for.
                let data = values.to_data();
                let buffer = data.buffers().first().ok_or_else(|| {
                    Error::InvalidArgument(format!("{} has no values buffer", values.data_type()))
                })?;
                let start = data.offset() * size;
                buffer
                    .as_slice()
                    .get(start..start + len * size)
                    .ok_or_else(|| {
                        Error::InvalidArgument(format!(
                            "{} values buffer shorter than {len} elements of {size} bytes",
                            values.data_type()
                        ))
                    })?
                    .to_vec()
            }
        };
        if let Some(nulls) = values.logical_nulls() {
            for i in nulls.iter().enumerate().filter(|(_, v)| !v).map(|(i, _)| i) {
                out[i * size..(i + 1) * size].copy_from_slice(fill);
            }
        }
        Ok(out)
    }

    /// A numcodecs `vlen-utf8`/`vlen-bytes` chunk of a whole Arrow array (nulls as empty).
    pub fn vlen_numcodecs(values: &dyn Array) -> Result<Vec<u8>> {
        vlen_numcodecs_items(&byte_items(values)?, b"")
    }

    /// A `zarrow.arrow_vlen` chunk of a whole Arrow array (nulls as empty).
    pub fn arrow_vlen(values: &dyn Array, large: bool) -> Result<Vec<u8>> {
        arrow_vlen_items(&byte_items(values)?, b"", large)
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

/// Write `values` (C order) as a zarr v3 array of `shape` at `path` below `store`.
///
/// ```
/// use arrow_array::{Array, Float64Array};
/// use zarrow::{write_array, ZarrArray, ZarrReadOptions, ZarrStore, ZarrWriteOptions};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> zarrow::Result<()> {
/// let dir = tempfile::tempdir().unwrap();
/// let location = dir.path().to_string_lossy().into_owned();
/// let store = ZarrStore::open(&location)?;
/// let values = Float64Array::from(vec![0.5, 1.5, 2.5, 3.5, 4.5, 5.5]);
/// let options = ZarrWriteOptions {
///     chunk_shape: Some(vec![1, 3]),
///     ..Default::default()
/// };
/// write_array(&store, "grid", &values, &[2, 3], &options).await?;
///
/// let array = ZarrArray::open(&format!("{location}/grid")).await?;
/// assert_eq!(array.shape(), &[2, 3]);
/// let row = array.read_region(&[1, 0], &[1, 3], &ZarrReadOptions::default()).await?;
/// assert_eq!(row.as_ref(), &Float64Array::from(vec![3.5, 4.5, 5.5]) as &dyn Array);
/// # Ok(())
/// # }
/// ```
pub async fn write_array(
    store: &ZarrStore,
    path: &str,
    values: &dyn Array,
    shape: &[u64],
    opts: &ZarrWriteOptions,
) -> Result<()> {
    let werr = |message: String| Error::Write {
        path: path.to_string(),
        message,
    };
    let n: u64 = shape.iter().product();
    if n != values.len() as u64 {
        return Err(werr(format!(
            "{} values do not fill shape {shape:?}",
            values.len()
        )));
    }
    let chunk_shape = opts
        .chunk_shape
        .clone()
        .unwrap_or_else(|| shape.iter().map(|s| (*s).max(1)).collect());
    if chunk_shape.len() != shape.len() || chunk_shape.contains(&0) {
        return Err(werr(format!(
            "bad chunk shape {chunk_shape:?} for shape {shape:?}"
        )));
    }
    if let Some(names) = &opts.dimension_names {
        if names.len() != shape.len() {
            return Err(werr("dimension_names length differs from shape".into()));
        }
    }
    let (data_type, default_fill, fixed_size) = zarr_type(values.data_type())?;
    let fill_json = opts.fill_value.clone().unwrap_or(default_fill);
    let parsed_type =
        crate::data_type::parse_v3_data_type(&data_type).map_err(|e| werr(e.to_string()))?;
    let fill = crate::data_type::parse_fill_value(&parsed_type, &fill_json, false)
        .map_err(|e| werr(e.to_string()))?;
    let compression = match opts.compression {
        Compression::None => None,
        Compression::Zstd(level) => Some(BytesToBytes::Zstd {
            level,
            checksum: false,
        }),
        Compression::Gzip(level) => Some(BytesToBytes::Gzip { level }),
    };
    let mut codecs = vec![array_to_bytes_json(
        fixed_size.is_some(),
        opts.vlen_encoding,
        parsed_type == crate::DataType::String,
    )];
    if let Some(c) = &compression {
        codecs.push(c.to_v3_json());
    }
    let meta = v3_array_json(V3Array {
        shape,
        data_type: &data_type,
        chunk_shape: &chunk_shape,
        fill_value: fill_json,
        codecs,
        attributes: opts.attributes.clone(),
        dimension_names: opts.dimension_names.as_deref(),
    });
    let array_store = store.child(path);
    let meta_bytes = serde_json::to_vec_pretty(&meta).map_err(|e| werr(e.to_string()))?;
    // The metadata must parse as what we meant: the reader's own parser checks it.
    crate::metadata::parse_v3(path, &meta_bytes, &self_check_limits())?;
    array_store
        .put("zarr.json", Bytes::from(meta_bytes))
        .await?;

    let grid: Vec<u64> = shape
        .iter()
        .zip(&chunk_shape)
        .map(|(s, c)| s.div_ceil(*c))
        .collect();
    let chunk_len: u64 = chunk_shape.iter().product();
    let key_encoding = crate::metadata::ChunkKeyEncoding::Default { separator: '/' };
    for coords in c_order(&grid) {
        // Source index of every chunk position, None outside the array (padding).
        let mut take: Vec<Option<u32>> = Vec::with_capacity(chunk_len as usize);
        let mut pos = vec![0u64; shape.len()];
        for _ in 0..chunk_len {
            let mut flat = 0u64;
            let mut inside = true;
            for d in 0..shape.len() {
                let g = coords[d] * chunk_shape[d] + pos[d];
                inside &= g < shape[d];
                flat = flat * shape[d] + g;
            }
            take.push(inside.then_some(flat as u32));
            for d in (0..shape.len()).rev() {
                pos[d] += 1;
                if pos[d] < chunk_shape[d] {
                    break;
                }
                pos[d] = 0;
            }
        }
        let idx = UInt32Array::from(take);
        let chunk: ArrayRef = arrow_select::take::take(values, &idx, None)?;
        let raw = match fixed_size {
            Some(size) => {
                let out = encode::fixed_values(chunk.as_ref(), &fill.bytes)?;
                if !opts.write_empty_chunks
                    && out.chunks_exact(size.max(1)).all(|c| c == &fill.bytes[..])
                {
                    continue;
                }
                out
            }
            None => {
                let items = encode::byte_items(chunk.as_ref())?;
                if !opts.write_empty_chunks
                    && items.iter().all(|i| i.is_none_or(|b| b == &fill.bytes[..]))
                {
                    continue;
                }
                match opts.vlen_encoding {
                    VlenEncoding::Numcodecs => encode::vlen_numcodecs_items(&items, &fill.bytes)?,
                    VlenEncoding::ArrowVlen { large } => {
                        encode::arrow_vlen_items(&items, &fill.bytes, large)?
                    }
                }
            }
        };
        let stored = match &compression {
            Some(c) => c
                .encode(&raw)
                .map_err(|e| Error::chunk(path, key_encoding.key(&coords), e))?,
            None => raw,
        };
        array_store
            .put(&key_encoding.key(&coords), Bytes::from(stored))
            .await?;
    }
    Ok(())
}

/// Write a v3 group `zarr.json` at `path` below `store`.
///
/// ```
/// use serde_json::{json, Map};
/// use zarrow::{write_group, Node, ZarrStore};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> zarrow::Result<()> {
/// let store = ZarrStore::open("memory:///experiment.zarr")?;
/// let mut attributes = Map::new();
/// attributes.insert("title".into(), json!("run 7"));
/// write_group(&store, "", &attributes).await?;
/// write_group(&store, "raw", &Map::new()).await?;
///
/// let Node::Group(root) = Node::open("memory:///experiment.zarr").await? else {
///     panic!("a group was written");
/// };
/// assert_eq!(root.metadata().attributes["title"], "run 7");
/// assert!(matches!(root.child("raw").await?, Node::Group(_)));
/// # Ok(())
/// # }
/// ```
pub async fn write_group(
    store: &ZarrStore,
    path: &str,
    attributes: &Map<String, Value>,
) -> Result<()> {
    let meta = json!({"zarr_format": 3, "node_type": "group", "attributes": attributes});
    let bytes = serde_json::to_vec_pretty(&meta).map_err(|e| Error::Write {
        path: path.to_string(),
        message: e.to_string(),
    })?;
    store.child(path).put("zarr.json", Bytes::from(bytes)).await
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

//! One column of a table write: its zarr data type (v3 JSON or v2 dtype), what a NULL is
//! written as, the encoding of one unit of rows (a chunk, or a shard of chunks with its index)
//! and the array metadata written once all its chunks are stored.
//!
//! NULLs: floats → NaN, integers → the type's minimum (unsigned: maximum) declared as
//! `_FillValue`; when NULLs occurred, both are declared for zarrow's reader too
//! (`zarrow.nulls`), and the marker value itself is refused. Timestamps and durations → NaT
//! (a NaT value is refused), strings and bytes → the empty value, booleans → false (the
//! xarray layout has no mask for those; see docs/writing.md).
//! An array of the AnnData layout (`encoding` set) has AnnData's `encoding-type` attributes and
//! no dimension names, and its integer NULLs are 0 (a `mask` array next to it says which).

use std::sync::atomic::{AtomicBool, Ordering};

use arrow_array::cast::AsArray;
use arrow_array::{Array, ArrayRef};
use arrow_schema::{DataType as ArrowType, Field, TimeUnit};
use base64::Engine;
use serde_json::{json, Map, Value};

use super::chunk::{array_to_bytes_json, v3_array_json, zarr_type, ChunkEncoder, V3Array};
use super::options::TableWriteOptions;
use crate::codec::compression::BytesToBytes;
use crate::{Error, Result};

/// A column being written.
#[derive(Debug)]
pub(crate) struct ColumnWriter {
    /// The column (and array) name.
    pub name: String,
    /// The array's path below the table root.
    pub path: String,
    /// The type written (a dictionary's value type).
    write_type: ArrowType,
    /// The v3 data type JSON.
    v3_type: Value,
    /// Element size of fixed-size types.
    fixed: Option<usize>,
    /// The bytes a NULL is written as (one element; empty for strings and bytes).
    null_bytes: Vec<u8>,
    /// Whether `null_bytes` marks a NULL only when declared (`zarrow.nulls`, with integers'
    /// `_FillValue`): integers and floats (NaN) of the xarray layout.
    sentinel: bool,
    /// A timestamp or duration column: its NULLs are NaT (i64::MIN), always a missing value
    /// to numpy, xarray and zarrow, so no value may be NaT.
    nat: bool,
    /// The AnnData `encoding-type` (`array`, `string-array`) of the AnnData layout.
    encoding: Option<&'static str>,
    /// NULLs were written.
    saw_null: AtomicBool,
    /// A value equal to the integer sentinel was written.
    saw_sentinel: AtomicBool,
}

fn is_int(dt: &ArrowType) -> bool {
    dt.is_integer()
}

/// The bytes of an integer sentinel: the minimum of signed types, the maximum of unsigned.
fn int_sentinel(dt: &ArrowType, size: usize) -> Vec<u8> {
    if dt.is_unsigned_integer() {
        vec![0xff; size]
    } else {
        let mut b = vec![0u8; size];
        b[size - 1] = 0x80;
        b
    }
}

/// The sentinel as a JSON number.
fn int_sentinel_json(dt: &ArrowType) -> Value {
    match dt {
        ArrowType::Int8 => json!(i8::MIN),
        ArrowType::Int16 => json!(i16::MIN),
        ArrowType::Int32 => json!(i32::MIN),
        ArrowType::Int64 => json!(i64::MIN),
        ArrowType::UInt8 => json!(u8::MAX),
        ArrowType::UInt16 => json!(u16::MAX),
        ArrowType::UInt32 => json!(u32::MAX),
        _ => json!(u64::MAX),
    }
}

fn nan_bytes(dt: &ArrowType) -> Vec<u8> {
    match dt {
        ArrowType::Float16 => half::f16::NAN.to_le_bytes().to_vec(),
        ArrowType::Float32 => f32::NAN.to_le_bytes().to_vec(),
        _ => f64::NAN.to_le_bytes().to_vec(),
    }
}

/// A field name that a struct (at any depth) of `dt` has twice.
fn repeated_field(dt: &ArrowType) -> Option<String> {
    let ArrowType::Struct(fields) = dt else {
        return None;
    };
    let mut seen = std::collections::HashSet::new();
    for f in fields {
        if !seen.insert(f.name().as_str()) {
            return Some(f.name().clone());
        }
        if let Some(inner) = repeated_field(f.data_type()) {
            return Some(inner);
        }
    }
    None
}

/// The attribute that keeps a timestamp column's time zone (the values are UTC instants, as
/// Arrow has them; numpy and xarray see them as naive UTC): zarrow reads the column back as
/// `Timestamp(unit, zone)`.
pub(crate) const TIMEZONE_ATTRIBUTE: &str = crate::table::TIMEZONE_ATTRIBUTE;

/// The attribute declaring that the array's NULLs are its fill value (integers and floats
/// with NULLs): zarrow reads them back as NULL by default.
const NULLS_ATTRIBUTE: &str = crate::table::NULLS_ATTRIBUTE;

fn is_float(dt: &ArrowType) -> bool {
    matches!(
        dt,
        ArrowType::Float16 | ArrowType::Float32 | ArrowType::Float64
    )
}

/// The numpy dtype string of a zarr v2 array of `dt`.
fn v2_dtype(dt: &ArrowType) -> Result<Value> {
    let unit = |u: &TimeUnit| match u {
        TimeUnit::Second => "s",
        TimeUnit::Millisecond => "ms",
        TimeUnit::Microsecond => "us",
        TimeUnit::Nanosecond => "ns",
    };
    Ok(json!(match dt {
        ArrowType::Boolean => "|b1".to_string(),
        ArrowType::Int8 => "|i1".into(),
        ArrowType::Int16 => "<i2".into(),
        ArrowType::Int32 => "<i4".into(),
        ArrowType::Int64 => "<i8".into(),
        ArrowType::UInt8 => "|u1".into(),
        ArrowType::UInt16 => "<u2".into(),
        ArrowType::UInt32 => "<u4".into(),
        ArrowType::UInt64 => "<u8".into(),
        ArrowType::Float16 => "<f2".into(),
        ArrowType::Float32 => "<f4".into(),
        ArrowType::Float64 => "<f8".into(),
        ArrowType::Timestamp(u, _) => format!("<M8[{}]", unit(u)),
        ArrowType::Duration(u) => format!("<m8[{}]", unit(u)),
        ArrowType::FixedSizeBinary(n) => format!("|V{n}"),
        ArrowType::Utf8
        | ArrowType::LargeUtf8
        | ArrowType::Utf8View
        | ArrowType::Binary
        | ArrowType::LargeBinary
        | ArrowType::BinaryView => "|O".into(),
        ArrowType::Struct(fields) => {
            let items = fields
                .iter()
                .map(|f| Ok(json!([f.name(), v2_dtype(f.data_type())?])))
                .collect::<Result<Vec<_>>>()?;
            return Ok(Value::Array(items));
        }
        other => {
            return Err(Error::UnwritableType {
                data_type: other.clone(),
                zarr_format: 2,
                field: None,
            });
        }
    }))
}

pub(crate) fn is_string(dt: &ArrowType) -> bool {
    matches!(
        dt,
        ArrowType::Utf8 | ArrowType::LargeUtf8 | ArrowType::Utf8View
    )
}

/// A dictionary array as its values (other arrays unchanged).
pub(crate) fn unpack(values: &ArrayRef) -> Result<ArrayRef> {
    match values.data_type() {
        ArrowType::Dictionary(..) => {
            let dict = values.as_any_dictionary();
            Ok(arrow_select::take::take(
                dict.values().as_ref(),
                dict.keys(),
                None,
            )?)
        }
        _ => Ok(values.clone()),
    }
}

impl ColumnWriter {
    /// The writer of `field` (stored at `path`, in the AnnData layout with `encoding`), or the
    /// error naming the column and its type when it has no zarr mapping.
    pub fn new(field: &Field, path: String, encoding: Option<&'static str>) -> Result<Self> {
        let name = field.name().clone();
        let write_type = match field.data_type() {
            ArrowType::Dictionary(_, v) => v.as_ref().clone(),
            other => other.clone(),
        };
        let unmappable = |why: String| Error::Write {
            path: path.clone(),
            message: format!(
                "column '{name}' of type {} has no zarr mapping{why}",
                field.data_type()
            ),
        };
        let (v3_type, _, fixed) = zarr_type(&write_type).map_err(|e| match e {
            e @ Error::UnwritableType { field: Some(_), .. } => unmappable(format!(": {e}")),
            _ => unmappable(String::new()),
        })?;
        v2_dtype(&write_type).map_err(|_| unmappable(String::new()))?;
        if let Some(twice) = repeated_field(&write_type) {
            return Err(unmappable(format!(
                ": its struct has two fields named '{twice}'"
            )));
        }
        let (null_bytes, sentinel) = match (&write_type, fixed) {
            (t, Some(n)) if is_int(t) && encoding.is_none() => (int_sentinel(t, n), true),
            (ArrowType::Float16 | ArrowType::Float32 | ArrowType::Float64, _) => {
                (nan_bytes(&write_type), encoding.is_none())
            }
            (ArrowType::Timestamp(..) | ArrowType::Duration(_), _) => {
                (i64::MIN.to_le_bytes().to_vec(), false)
            }
            (_, Some(n)) => (vec![0; n], false),
            (_, None) => (Vec::new(), false),
        };
        let nat = matches!(
            write_type,
            ArrowType::Timestamp(..) | ArrowType::Duration(_)
        );
        Ok(Self {
            name,
            path,
            write_type,
            v3_type,
            fixed,
            null_bytes,
            sentinel,
            nat,
            encoding,
            saw_null: AtomicBool::new(false),
            saw_sentinel: AtomicBool::new(false),
        })
    }

    /// The stored chunk of `values` (at most `chunk_rows` of them), padded to `chunk_rows`
    /// elements with the NULL value and compressed, by the writers' one chunk encoder. Notes
    /// the NULLs and sentinel values it holds.
    fn stored_chunk(
        &self,
        values: &ArrayRef,
        chunk_rows: usize,
        key: &str,
        opts: &TableWriteOptions,
    ) -> Result<Vec<u8>> {
        let values = unpack(values)?;
        if values.null_count() > 0 {
            self.saw_null.store(true, Ordering::Relaxed);
        }
        if !self.saw_sentinel.load(Ordering::Relaxed) && self.holds_sentinel(&values)? {
            self.saw_sentinel.store(true, Ordering::Relaxed);
        }
        let encoder = ChunkEncoder {
            fixed: self.fixed,
            null_bytes: &self.null_bytes,
            string_encoding: opts.string_encoding,
            compression: opts.compression.as_ref(),
        };
        encoder.stored(values.as_ref(), chunk_rows, &self.path, key)
    }

    /// The stored object of one unit (`values`: its rows, at most `opts.unit_rows()`): one
    /// compressed chunk, or a shard (its chunks, then the index of (offset, size) pairs and
    /// its CRC-32C).
    pub fn encode_unit(
        &self,
        values: &ArrayRef,
        key: &str,
        opts: &TableWriteOptions,
    ) -> Result<Vec<u8>> {
        let chunk_rows = opts.chunk_rows as usize;
        let Some(shard_rows) = opts.shard_rows else {
            return self.stored_chunk(values, chunk_rows, key, opts);
        };
        let inner = (shard_rows / opts.chunk_rows) as usize;
        let mut data = Vec::new();
        let mut index = Vec::with_capacity(inner * 16);
        for i in 0..inner {
            let start = i * chunk_rows;
            if start >= values.len() {
                index.extend_from_slice(&u64::MAX.to_le_bytes());
                index.extend_from_slice(&u64::MAX.to_le_bytes());
                continue;
            }
            let part = values.slice(start, chunk_rows.min(values.len() - start));
            let stored = self.stored_chunk(&part, chunk_rows, key, opts)?;
            index.extend_from_slice(&(data.len() as u64).to_le_bytes());
            index.extend_from_slice(&(stored.len() as u64).to_le_bytes());
            data.extend_from_slice(&stored);
        }
        let index = BytesToBytes::Crc32c
            .encode(&index)
            .map_err(|e| Error::chunk(self.path.clone(), key.to_string(), e))?;
        data.extend_from_slice(&index);
        Ok(data)
    }

    /// The bytes one element takes while a unit is encoded (fixed-size types: their size;
    /// strings and bytes: the slice per element, whatever their values).
    pub fn element_bytes(&self) -> u64 {
        self.fixed.map_or(16, |n| n as u64)
    }

    /// The time zone of a timestamp column, kept in [`TIMEZONE_ATTRIBUTE`].
    fn timezone(&self) -> Option<&str> {
        match &self.write_type {
            ArrowType::Timestamp(_, Some(tz)) => Some(tz),
            _ => None,
        }
    }

    /// NULLs were written as the sentinel (integers' minimum or maximum, floats' NaN), which
    /// the array then declares. A float column that holds NaN values too declares nothing:
    /// its NULLs read back as NaN, as its NaNs do (refusing it would refuse a common
    /// dataframe; an integer column holding its sentinel is refused, see [`Self::check`]).
    fn masked(&self) -> bool {
        let nan_too = is_float(&self.write_type) && self.saw_sentinel.load(Ordering::Relaxed);
        self.sentinel && self.saw_null.load(Ordering::Relaxed) && !nan_too
    }

    /// NULLs were written as the integer sentinel.
    fn masked_int(&self) -> bool {
        self.masked() && is_int(&self.write_type)
    }

    /// Whether integer NULLs were written (as the sentinel, which only a declared
    /// `_FillValue` makes NULL again).
    pub fn wrote_int_nulls(&self) -> bool {
        self.masked_int()
    }

    /// The bytes of the integer sentinel of an integer column (what marks its NULLs).
    pub fn int_sentinel(&self) -> Option<(&[u8], Value)> {
        (self.sentinel && is_int(&self.write_type))
            .then(|| (&self.null_bytes[..], int_sentinel_json(&self.write_type)))
    }

    /// The value that marks the column's NULLs, as messages say it.
    fn marker(&self) -> String {
        match is_int(&self.write_type) {
            true => int_sentinel_json(&self.write_type).to_string(),
            false => "NaN".into(),
        }
    }

    /// Whether `values` (of this column) hold a valid value equal to the sentinel (the integer
    /// minimum or maximum, a float NaN).
    pub fn holds_sentinel(&self, values: &ArrayRef) -> Result<bool> {
        use arrow_array::types::*;
        if !self.sentinel {
            return Ok(false);
        }
        let values = unpack(values)?;
        macro_rules! any_equal {
            ($t:ty, $v:expr) => {
                values.as_primitive::<$t>().iter().any(|x| x == Some($v))
            };
        }
        macro_rules! any_nan {
            ($t:ty) => {
                values
                    .as_primitive::<$t>()
                    .iter()
                    .flatten()
                    .any(|x| x.is_nan())
            };
        }
        Ok(match values.data_type() {
            ArrowType::Float16 => any_nan!(Float16Type),
            ArrowType::Float32 => any_nan!(Float32Type),
            ArrowType::Float64 => any_nan!(Float64Type),
            ArrowType::Int8 => any_equal!(Int8Type, i8::MIN),
            ArrowType::Int16 => any_equal!(Int16Type, i16::MIN),
            ArrowType::Int32 => any_equal!(Int32Type, i32::MIN),
            ArrowType::Int64 => any_equal!(Int64Type, i64::MIN),
            ArrowType::UInt8 => any_equal!(UInt8Type, u8::MAX),
            ArrowType::UInt16 => any_equal!(UInt16Type, u16::MAX),
            ArrowType::UInt32 => any_equal!(UInt32Type, u32::MAX),
            ArrowType::UInt64 => any_equal!(UInt64Type, u64::MAX),
            _ => false,
        })
    }

    /// Whether `values` (of a timestamp or duration column) hold a valid value equal to NaT
    /// (i64::MIN), which every reader takes for a missing value.
    fn holds_nat(&self, values: &ArrayRef) -> Result<bool> {
        if !self.nat {
            return Ok(false);
        }
        let values = unpack(values)?;
        // Timestamps and durations are i64 values: read them as such, without a copy.
        let data = values.to_data().into_builder().data_type(ArrowType::Int64);
        let ints = arrow_array::Int64Array::from(data.build()?);
        Ok(ints.iter().any(|x| x == Some(i64::MIN)))
    }

    /// Note the NULLs and sentinel values of a batch's `values` as they come, so that a column
    /// holding both is refused at the batch that makes it so, before its unit is written; a
    /// timestamp or duration equal to NaT is refused at its batch.
    pub fn note(&self, values: &ArrayRef) -> Result<()> {
        if self.holds_nat(values)? {
            return Err(Error::Write {
                path: self.path.clone(),
                message: format!(
                    "column '{}' holds the value {} (i64::MIN), which is NaT, the marker of \
                     missing {} values: it would read back as NULL",
                    self.name,
                    i64::MIN,
                    match self.write_type {
                        ArrowType::Duration(_) => "duration",
                        _ => "timestamp",
                    }
                ),
            });
        }
        if !self.sentinel {
            return Ok(());
        }
        if values.logical_null_count() > 0 {
            self.saw_null.store(true, Ordering::Relaxed);
        }
        if !self.saw_sentinel.load(Ordering::Relaxed) && self.holds_sentinel(values)? {
            self.saw_sentinel.store(true, Ordering::Relaxed);
        }
        self.check()
    }

    /// The error of a value equal to the NULL marker appended to a column that has one.
    pub fn sentinel_refused(&self, location: &str) -> Error {
        Error::Write {
            path: location.to_string(),
            message: format!(
                "column '{}' gets the value {}, which marks its NULLs (_FillValue): it would \
                 read back as NULL; nothing was appended",
                self.name,
                self.marker()
            ),
        }
    }

    /// The error when a column holds NULLs and also the value that stands for them.
    pub fn check(&self) -> Result<()> {
        if self.masked() && self.saw_sentinel.load(Ordering::Relaxed) {
            return Err(Error::Write {
                path: self.path.clone(),
                message: format!(
                    "column '{}' holds NULLs and the value {} which marks them (_FillValue)",
                    self.name,
                    self.marker()
                ),
            });
        }
        Ok(())
    }

    /// The attributes xarray reads: `_FillValue` for floats and for integers with NULLs
    /// (zarr v3 only: on v2 the array's fill value is xarray's `_FillValue`).
    fn v3_attributes(&self) -> Map<String, Value> {
        let mut attrs = Map::new();
        if let Some(tz) = self.timezone() {
            attrs.insert(TIMEZONE_ATTRIBUTE.into(), json!(tz));
        }
        if let Some(encoding) = self.encoding {
            attrs.extend(encoding_attributes(encoding, "0.2.0"));
            return attrs;
        }
        match &self.write_type {
            ArrowType::Float16 | ArrowType::Float32 | ArrowType::Float64 => {
                // xarray's encoding of a float _FillValue on zarr v3: base64 of the f64.
                let b64 = base64::engine::general_purpose::STANDARD.encode(f64::NAN.to_le_bytes());
                attrs.insert("_FillValue".into(), json!(b64));
            }
            t if self.masked_int() => {
                attrs.insert("_FillValue".into(), int_sentinel_json(t));
            }
            _ => {}
        }
        if self.masked() {
            attrs.insert(NULLS_ATTRIBUTE.into(), json!("fill_value"));
        }
        attrs
    }

    /// The v3 `zarr.json` of the array after `rows` rows.
    pub fn v3_metadata(&self, rows: u64, opts: &TableWriteOptions) -> Value {
        let mut codecs = vec![array_to_bytes_json(
            self.fixed.is_some(),
            opts.string_encoding,
            is_string(&self.write_type),
        )];
        codecs.extend(opts.compression.as_ref().map(BytesToBytes::to_v3_json));
        let codecs = match opts.shard_rows {
            None => codecs,
            Some(_) => vec![json!({
                "name": "sharding_indexed",
                "configuration": {
                    "chunk_shape": [opts.chunk_rows],
                    "codecs": codecs,
                    "index_codecs": [
                        {"name": "bytes", "configuration": {"endian": "little"}},
                        {"name": "crc32c"}
                    ],
                    "index_location": "end"
                }
            })],
        };
        let fill = match &self.write_type {
            ArrowType::Float16 | ArrowType::Float32 | ArrowType::Float64 => json!("NaN"),
            // With NULLs, the sentinel that marks them (`_FillValue`): zarr-python, xarray
            // and `fill_as_null` then agree on which elements are missing.
            t if self.masked_int() => int_sentinel_json(t),
            t if self.fixed.is_some() && is_int(t) => json!(0),
            _ => zarr_type(&self.write_type)
                .map(|t| t.1)
                .unwrap_or(Value::Null),
        };
        v3_array_json(V3Array {
            shape: &[rows],
            data_type: &self.v3_type,
            chunk_shape: &[opts.unit_rows()],
            fill_value: fill,
            codecs,
            attributes: self.v3_attributes(),
            dimension_names: self
                .encoding
                .is_none()
                .then_some(std::slice::from_ref(&opts.dimension)),
        })
    }

    /// The v2 `.zarray` and `.zattrs` of the array after `rows` rows.
    pub fn v2_metadata(&self, rows: u64, opts: &TableWriteOptions) -> Result<(Value, Value)> {
        let filters = match self.fixed {
            Some(_) => Value::Null,
            None if is_string(&self.write_type) => json!([{"id": "vlen-utf8"}]),
            None => json!([{"id": "vlen-bytes"}]),
        };
        // xarray takes a v2 array's fill value as its _FillValue: only declare one that means
        // NULL.
        let fill = match &self.write_type {
            ArrowType::Float16 | ArrowType::Float32 | ArrowType::Float64 => json!("NaN"),
            t if self.masked_int() => int_sentinel_json(t),
            _ => Value::Null,
        };
        let zarray = json!({
            "zarr_format": 2,
            "shape": [rows],
            "chunks": [opts.chunk_rows],
            "dtype": v2_dtype(&self.write_type)?,
            "compressor": opts.compression.as_ref().map(BytesToBytes::to_v2_json),
            "fill_value": fill,
            "order": "C",
            "filters": filters,
            "dimension_separator": ".",
        });
        let mut zattrs = match self.encoding {
            Some(encoding) => Value::Object(encoding_attributes(encoding, "0.2.0")),
            None => json!({"_ARRAY_DIMENSIONS": [opts.dimension]}),
        };
        if let Some(tz) = self.timezone() {
            zattrs[TIMEZONE_ATTRIBUTE] = json!(tz);
        }
        if self.masked() {
            zattrs[NULLS_ATTRIBUTE] = json!("fill_value");
        }
        Ok((zarray, zattrs))
    }

    /// The key of unit `index` below the array.
    pub fn key(&self, index: u64, opts: &TableWriteOptions) -> String {
        if opts.zarr_format == 2 {
            index.to_string()
        } else {
            format!("c/{index}")
        }
    }
}

/// AnnData's `encoding-type` and `encoding-version` attributes.
pub(crate) fn encoding_attributes(encoding: &str, version: &str) -> Map<String, Value> {
    let mut attrs = Map::new();
    attrs.insert("encoding-type".into(), json!(encoding));
    attrs.insert("encoding-version".into(), json!(version));
    attrs
}

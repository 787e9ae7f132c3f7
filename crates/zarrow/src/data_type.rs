//! Zarr data types (v3 names and v2 numpy dtype strings), their fill values, and their Arrow types.
//!
//! Both metadata versions are parsed into one [`DataType`]; endianness is not part of it (v3 keeps
//! it in the `bytes` codec, v2 in the dtype string, which the v2 parser turns into a `bytes` codec).
//! Fill values are normalised to [`FillValue`]: the element's decoded little-endian bytes for
//! fixed-size kinds, the value's bytes for variable-length kinds.

use std::sync::Arc;

use arrow_schema::{DataType as ArrowType, Field, Fields, TimeUnit};
use base64::Engine;
use serde_json::Value;

use crate::options::{BinaryType, StringType, MAX_ITEM_BYTES};

mod low_precision;
pub use low_precision::{LowFloat, SubByteInt};

/// Time units of numpy `datetime64` / `timedelta64`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NpTimeUnit {
    /// Weeks.
    Week,
    /// Days.
    Day,
    /// Hours.
    Hour,
    /// Minutes.
    Minute,
    /// Seconds.
    Second,
    /// Milliseconds.
    Millisecond,
    /// Microseconds.
    Microsecond,
    /// Nanoseconds.
    Nanosecond,
}

/// The time units [`NpTimeUnit::parse`] reads, for errors.
const TIME_UNITS: &str = "a time unit zarrow reads (W, D, h, m, s, ms, us, ns)";

impl NpTimeUnit {
    /// Parse a numpy unit code (`"ns"`, `"D"`, …). Years and months have no fixed length.
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "W" => Self::Week,
            "D" => Self::Day,
            "h" => Self::Hour,
            "m" => Self::Minute,
            "s" => Self::Second,
            "ms" => Self::Millisecond,
            "us" | "μs" => Self::Microsecond,
            "ns" => Self::Nanosecond,
            _ => return None,
        })
    }

    /// The numpy unit code.
    pub fn code(self) -> &'static str {
        match self {
            Self::Week => "W",
            Self::Day => "D",
            Self::Hour => "h",
            Self::Minute => "m",
            Self::Second => "s",
            Self::Millisecond => "ms",
            Self::Microsecond => "us",
            Self::Nanosecond => "ns",
        }
    }

    /// The Arrow unit and the factor that converts a count of `self` into it.
    pub fn arrow_unit(self) -> (TimeUnit, i64) {
        match self {
            Self::Week => (TimeUnit::Second, 7 * 86_400),
            Self::Day => (TimeUnit::Second, 86_400),
            Self::Hour => (TimeUnit::Second, 3_600),
            Self::Minute => (TimeUnit::Second, 60),
            Self::Second => (TimeUnit::Second, 1),
            Self::Millisecond => (TimeUnit::Millisecond, 1),
            Self::Microsecond => (TimeUnit::Microsecond, 1),
            Self::Nanosecond => (TimeUnit::Nanosecond, 1),
        }
    }
}

/// A zarr data type.
///
/// ```
/// use zarrow::DataType;
///
/// assert_eq!(DataType::Float32.fixed_size(), Some(4));
/// assert_eq!(DataType::Complex128.fixed_size(), Some(16));
/// // Strings and bytes are variable-length: Arrow offsets and values, no fixed size.
/// assert!(DataType::String.is_variable());
/// assert_eq!(DataType::Bytes.fixed_size(), None);
/// assert!(!DataType::FixedUtf32 { length_bytes: 8 }.is_variable());
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DataType {
    /// `bool`, `|b1`.
    Bool,
    /// `int8`.
    Int8,
    /// `int16`.
    Int16,
    /// `int32`.
    Int32,
    /// `int64`.
    Int64,
    /// `uint8`.
    UInt8,
    /// `uint16`.
    UInt16,
    /// `uint32`.
    UInt32,
    /// `uint64`.
    UInt64,
    /// `float16`.
    Float16,
    /// `float32`.
    Float32,
    /// `float64`.
    Float64,
    /// `complex64` (two float32).
    Complex64,
    /// `complex128` (two float64).
    Complex128,
    /// `numpy.datetime64`: int64 counts of `scale_factor` units since the epoch; NaT is `i64::MIN`.
    DateTime64 {
        /// The unit.
        unit: NpTimeUnit,
        /// Units per count.
        scale_factor: i64,
    },
    /// `numpy.timedelta64`.
    TimeDelta64 {
        /// The unit.
        unit: NpTimeUnit,
        /// Units per count.
        scale_factor: i64,
    },
    /// Variable-length UTF-8 (`string`, v2 `|O` + `vlen-utf8`).
    String,
    /// Variable-length bytes (`variable_length_bytes`, `bytes`, `binary`, v2 `|O` + `vlen-bytes`).
    Bytes,
    /// Fixed-length UTF-32 (`fixed_length_utf32`, numpy `<Un`), `length_bytes` = 4·n.
    FixedUtf32 {
        /// Bytes per element.
        length_bytes: usize,
    },
    /// NUL-padded bytes (`null_terminated_bytes`, numpy `|Sn`).
    NullTerminatedBytes {
        /// Bytes per element.
        length_bytes: usize,
    },
    /// Opaque fixed-size bytes (`raw_bytes`, numpy `|Vn`).
    RawBytes {
        /// Bytes per element.
        length_bytes: usize,
    },
    /// A structured element (numpy structured dtype: v2 `[["a", "<i4"], …]`, v3 `structured`
    /// or `struct`): fixed-size fields packed one after another, in order.
    Struct(Vec<StructField>),
    /// A low-precision float (`bfloat16`, `float8_*`, `float6_*`, `float4_e2m1fn`), read as
    /// Float16 or Float32 (see [`LowFloat`]).
    LowFloat(LowFloat),
    /// `int2`, `int4`, `uint2`, `uint4`, read as Int8 or UInt8.
    SubByteInt(SubByteInt),
    /// zarrs' `optional` (`zarrs.optional`): an element of the inner type or missing, stored by
    /// the `optional` codec (a validity mask and the valid elements). Read as the inner type's
    /// Arrow type, missing elements NULL. Not fixed-size: a chunk's bytes depend on its mask.
    Optional(Box<DataType>),
}

/// One field of a [`DataType::Struct`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StructField {
    /// The field's name.
    pub name: String,
    /// Its type (fixed-size; a struct of its own for nested fields).
    pub data_type: DataType,
    /// The field's byte order when the data type says (v2 dtypes name one per field); `None`:
    /// the order of the array's `bytes` codec.
    pub endian: Option<Endian>,
}

impl DataType {
    /// Whether a stored value of this type can stand for a missing one in Arrow: NaT
    /// (`i64::MIN`) of a datetime64 or timedelta64 reads as NULL. A struct field of such a type
    /// is a nullable Arrow field.
    pub fn has_missing_marker(&self) -> bool {
        matches!(
            self,
            DataType::DateTime64 { .. } | DataType::TimeDelta64 { .. }
        )
    }

    /// Bytes per element for fixed-size types; `None` for variable-length ones.
    pub fn fixed_size(&self) -> Option<usize> {
        Some(match self {
            DataType::Bool | DataType::Int8 | DataType::UInt8 => 1,
            DataType::Int16 | DataType::UInt16 | DataType::Float16 => 2,
            DataType::Int32 | DataType::UInt32 | DataType::Float32 => 4,
            DataType::Int64
            | DataType::UInt64
            | DataType::Float64
            | DataType::Complex64
            | DataType::DateTime64 { .. }
            | DataType::TimeDelta64 { .. } => 8,
            DataType::Complex128 => 16,
            DataType::FixedUtf32 { length_bytes }
            | DataType::NullTerminatedBytes { length_bytes }
            | DataType::RawBytes { length_bytes } => *length_bytes,
            DataType::Struct(fields) => fields
                .iter()
                .try_fold(0usize, |sum, f| sum.checked_add(f.data_type.fixed_size()?))?,
            DataType::LowFloat(f) => f.stored_size(),
            DataType::SubByteInt(_) => 1,
            DataType::String | DataType::Bytes | DataType::Optional(_) => return None,
        })
    }

    /// Whether elements are variable-length.
    pub fn is_variable(&self) -> bool {
        matches!(self, DataType::String | DataType::Bytes)
    }

    /// The size of the unit that is byte-swapped for non-native endianness (1 = never swapped).
    pub fn swap_unit(&self) -> usize {
        match self {
            DataType::Complex64 => 4,
            DataType::Complex128 => 8,
            DataType::FixedUtf32 { .. } => 4,
            // Fields are swapped one by one as they are decoded.
            DataType::NullTerminatedBytes { .. }
            | DataType::RawBytes { .. }
            | DataType::Struct(_) => 1,
            other => other.fixed_size().unwrap_or(1),
        }
    }

    /// A short name for messages (the v3 name).
    pub fn name(&self) -> String {
        match self {
            DataType::Bool => "bool".into(),
            DataType::Int8 => "int8".into(),
            DataType::Int16 => "int16".into(),
            DataType::Int32 => "int32".into(),
            DataType::Int64 => "int64".into(),
            DataType::UInt8 => "uint8".into(),
            DataType::UInt16 => "uint16".into(),
            DataType::UInt32 => "uint32".into(),
            DataType::UInt64 => "uint64".into(),
            DataType::Float16 => "float16".into(),
            DataType::Float32 => "float32".into(),
            DataType::Float64 => "float64".into(),
            DataType::Complex64 => "complex64".into(),
            DataType::Complex128 => "complex128".into(),
            DataType::DateTime64 { unit, .. } => format!("numpy.datetime64[{}]", unit.code()),
            DataType::TimeDelta64 { unit, .. } => format!("numpy.timedelta64[{}]", unit.code()),
            DataType::String => "string".into(),
            DataType::Bytes => "variable_length_bytes".into(),
            DataType::FixedUtf32 { length_bytes } => format!("fixed_length_utf32[{length_bytes}]"),
            DataType::NullTerminatedBytes { length_bytes } => {
                format!("null_terminated_bytes[{length_bytes}]")
            }
            DataType::RawBytes { length_bytes } => format!("raw_bytes[{length_bytes}]"),
            DataType::Struct(fields) => {
                let parts: Vec<String> = fields
                    .iter()
                    .map(|f| format!("{}: {}", f.name, f.data_type.name()))
                    .collect();
                format!("struct{{{}}}", parts.join(", "))
            }
            DataType::LowFloat(f) => f.name().into(),
            DataType::SubByteInt(i) => i.name().into(),
            DataType::Optional(inner) => format!("optional({})", inner.name()),
        }
    }

    /// The Arrow type of this zarr type, given the string and binary representation wanted.
    pub fn arrow_type(&self, strings: StringType, binary: BinaryType) -> ArrowType {
        match self {
            DataType::Bool => ArrowType::Boolean,
            DataType::Int8 => ArrowType::Int8,
            DataType::Int16 => ArrowType::Int16,
            DataType::Int32 => ArrowType::Int32,
            DataType::Int64 => ArrowType::Int64,
            DataType::UInt8 => ArrowType::UInt8,
            DataType::UInt16 => ArrowType::UInt16,
            DataType::UInt32 => ArrowType::UInt32,
            DataType::UInt64 => ArrowType::UInt64,
            DataType::Float16 => ArrowType::Float16,
            DataType::Float32 => ArrowType::Float32,
            DataType::Float64 => ArrowType::Float64,
            DataType::Complex64 => complex_type(ArrowType::Float32),
            DataType::Complex128 => complex_type(ArrowType::Float64),
            DataType::DateTime64 { unit, .. } => ArrowType::Timestamp(unit.arrow_unit().0, None),
            DataType::TimeDelta64 { unit, .. } => ArrowType::Duration(unit.arrow_unit().0),
            DataType::String | DataType::FixedUtf32 { .. } => strings.arrow_type(),
            DataType::Bytes | DataType::NullTerminatedBytes { .. } => binary.arrow_type(),
            DataType::RawBytes { length_bytes } => {
                ArrowType::FixedSizeBinary(i32::try_from(*length_bytes).unwrap_or(i32::MAX))
            }
            DataType::Struct(fields) => ArrowType::Struct(
                fields
                    .iter()
                    .map(|f| {
                        let arrow = f.data_type.arrow_type(strings, binary);
                        Field::new(&f.name, arrow, f.data_type.has_missing_marker())
                    })
                    .collect(),
            ),
            DataType::LowFloat(f) if f.widens_to_f32() => ArrowType::Float32,
            DataType::LowFloat(_) => ArrowType::Float16,
            DataType::SubByteInt(SubByteInt { signed: true, .. }) => ArrowType::Int8,
            DataType::SubByteInt(_) => ArrowType::UInt8,
            DataType::Optional(inner) => inner.arrow_type(strings, binary),
        }
    }
}

/// Build a struct data type from its fields, checked: at least one field, distinct names,
/// fixed-size field types, an element no larger than zarrow reads.
fn struct_type(fields: Vec<StructField>) -> Result<DataType, DataTypeError> {
    if fields.is_empty() {
        return Err(DataTypeError::BadStruct {
            field: None,
            problem: "no fields",
        });
    }
    let mut names = std::collections::HashSet::with_capacity(fields.len());
    for f in &fields {
        if !names.insert(f.name.as_str()) {
            return Err(bad_field(format!("'{}'", f.name), "a field named twice"));
        }
        // variable-length and optional fields have no fixed size
        if f.data_type.fixed_size().is_none() {
            return Err(DataTypeError::Unsupported);
        }
    }
    let dt = DataType::Struct(fields);
    let size = dt.fixed_size().ok_or_else(|| DataTypeError::SizeOverflow {
        data_type: "structured data type".to_string(),
    })?;
    check_item_bytes("structured data type", size)?;
    Ok(dt)
}

/// Parse a v2 structured dtype: a list of `[name, dtype]` (or `[name, dtype, shape]`, which
/// zarrow does not read) pairs, nested lists for nested structs. Fields keep their byte order.
pub fn parse_v2_structured(value: &Value) -> Result<DataType, DataTypeError> {
    let items = value.as_array().ok_or(DataTypeError::Unsupported)?;
    let mut fields = Vec::with_capacity(items.len().min(1024));
    for item in items {
        let pair = item
            .as_array()
            .filter(|p| p.len() >= 2)
            .ok_or_else(|| bad_field(item, "a field that is not [name, dtype]"))?;
        if pair.len() > 2 {
            // a sub-array field (`[name, dtype, shape]`)
            return Err(DataTypeError::Unsupported);
        }
        let name = pair[0]
            .as_str()
            .ok_or_else(|| bad_field(item, "a field name that is not a string"))?;
        let (data_type, endian) = match &pair[1] {
            Value::String(s) => {
                let (dt, endian) = parse_v2_dtype(s)?;
                let endian = (dt.swap_unit() > 1).then_some(endian);
                (dt, endian)
            }
            nested @ Value::Array(_) => (parse_v2_structured(nested)?, None),
            _ => {
                return Err(bad_field(
                    item,
                    "a field dtype that is neither a string nor a list",
                ))
            }
        };
        fields.push(StructField {
            name: name.to_string(),
            data_type,
            endian,
        });
    }
    struct_type(fields)
}

/// Parse the fields of a v3 `structured` (zarr-python: `[[name, data_type], …]`) or `struct`
/// (`[{"name", "data_type"}, …]`) data type.
fn parse_v3_struct(config: Option<&Value>) -> Result<DataType, DataTypeError> {
    let items = config
        .and_then(|c| c.get("fields"))
        .and_then(Value::as_array)
        .ok_or(DataTypeError::BadStruct {
            field: None,
            problem: "configuration.fields missing",
        })?;
    let mut fields = Vec::with_capacity(items.len().min(1024));
    for item in items {
        let (name, data_type) = match item {
            Value::Array(pair) if pair.len() == 2 => (pair[0].as_str(), &pair[1]),
            Value::Object(o) => match o.get("data_type") {
                Some(dt) => (o.get("name").and_then(Value::as_str), dt),
                None => return Err(bad_field(item, "a field without a data_type")),
            },
            _ => {
                return Err(bad_field(
                    item,
                    "a field that is neither [name, data_type] nor an object",
                ))
            }
        };
        let name = name.ok_or_else(|| bad_field(item, "a field without a name"))?;
        fields.push(StructField {
            name: name.to_string(),
            data_type: parse_v3_data_type(data_type)?,
            endian: None,
        });
    }
    struct_type(fields)
}

/// Parse zarrs' `optional` data type: its configuration is the inner data type
/// (`{"name", "configuration"}`). An optional of an optional is not read (Arrow has one NULL).
fn parse_v3_optional(config: Option<&Value>) -> Result<DataType, DataTypeError> {
    let inner = config.ok_or_else(|| DataTypeError::BadParameter {
        data_type: "optional".to_string(),
        parameter: "configuration",
        found: None,
        expected: "the inner data type ({\"name\", \"configuration\"})",
    })?;
    match parse_v3_data_type(inner)? {
        DataType::Optional(_) => Err(DataTypeError::Unsupported),
        inner => Ok(DataType::Optional(Box::new(inner))),
    }
}

/// Reverse the byte order of each unit of one element of `data_type` in place (per field for
/// structs).
fn swap_element(data_type: &DataType, bytes: &mut [u8]) {
    match data_type {
        DataType::Struct(fields) => {
            let mut at = 0;
            for f in fields {
                let size = f.data_type.fixed_size().unwrap_or(0);
                swap_element(&f.data_type, &mut bytes[at..at + size]);
                at += size;
            }
        }
        other => {
            let unit = other.swap_unit();
            if unit > 1 {
                for c in bytes.chunks_exact_mut(unit) {
                    c.reverse();
                }
            }
        }
    }
}

/// The fill value of a struct: base64 (or a list of bytes) of the element as stored, or one
/// value per field (a list in field order, or an object by field name; missing fields zero).
fn struct_fill(
    fields: &[StructField],
    size: usize,
    json: &Value,
) -> Result<Vec<u8>, FillValueError> {
    let raw = |bytes: Vec<u8>| {
        if bytes.len() == size {
            Ok(bytes)
        } else {
            Err(FillValueError::StructSize {
                bytes: bytes.len(),
                element_bytes: size,
            })
        }
    };
    let per_field = |get: &dyn Fn(usize, &StructField) -> Option<Value>| {
        let mut out = Vec::with_capacity(size);
        for (i, f) in fields.iter().enumerate() {
            let v = get(i, f).unwrap_or(Value::Null);
            let mut bytes = parse_fill_value(&f.data_type, &v, false)
                .map_err(|e| FillValueError::Field {
                    field: f.name.clone(),
                    source: Box::new(e),
                })?
                .bytes
                .to_vec();
            if f.endian == Some(Endian::Big) {
                swap_element(&f.data_type, &mut bytes);
            }
            out.extend_from_slice(&bytes);
        }
        Ok(out)
    };
    match json {
        Value::String(s) => raw(b64(s)?),
        Value::Array(items) if items.iter().all(Value::is_u64) && items.len() == size => {
            raw(byte_list(items)?)
        }
        Value::Array(items) if items.len() == fields.len() => {
            per_field(&|i, _| items.get(i).cloned())
        }
        Value::Object(o) => per_field(&|_, f| o.get(&f.name).cloned()),
        Value::Number(n) if n.as_u64() == Some(0) => Ok(vec![0; size]),
        other => Err(not_a(
            other,
            "a struct fill value (base64, bytes, or a value per field)",
        )),
    }
}

fn complex_type(part: ArrowType) -> ArrowType {
    ArrowType::Struct(Fields::from(vec![
        Field::new("real", part.clone(), false),
        Field::new("imag", part, false),
    ]))
}

/// Parse a v3 `data_type` entry (a string or `{name, configuration}`).
pub fn parse_v3_data_type(value: &Value) -> Result<DataType, DataTypeError> {
    let (name, config) = match value {
        Value::String(s) => (s.as_str(), None),
        Value::Object(o) => (
            o.get("name")
                .and_then(Value::as_str)
                .ok_or_else(|| DataTypeError::NotADataType {
                    entry: value.to_string(),
                })?,
            o.get("configuration"),
        ),
        other => {
            return Err(DataTypeError::NotADataType {
                entry: other.to_string(),
            })
        }
    };
    let bad = |parameter, found: Option<&Value>, expected| DataTypeError::BadParameter {
        data_type: name.to_string(),
        parameter,
        // A string as it is, other JSON as written.
        found: found.map(|v| v.as_str().map_or_else(|| v.to_string(), str::to_string)),
        expected,
    };
    let length_bytes = || -> Result<usize, DataTypeError> {
        let given = config.and_then(|c| c.get("length_bytes"));
        let n = given
            .and_then(Value::as_u64)
            .and_then(|n| usize::try_from(n).ok())
            .filter(|n| *n > 0)
            .ok_or_else(|| bad("configuration.length_bytes", given, "a positive integer"))?;
        check_item_bytes(name, n)
    };
    let time = |is_datetime: bool| -> Result<DataType, DataTypeError> {
        let given = config.and_then(|c| c.get("unit"));
        let unit = given
            .and_then(Value::as_str)
            .and_then(NpTimeUnit::parse)
            .ok_or_else(|| bad("configuration.unit", given, TIME_UNITS))?;
        let scale_factor = config
            .and_then(|c| c.get("scale_factor"))
            .map(|v| {
                v.as_i64()
                    .filter(|n| *n > 0)
                    .ok_or_else(|| bad("configuration.scale_factor", Some(v), "a positive integer"))
            })
            .transpose()?
            .unwrap_or(1);
        Ok(if is_datetime {
            DataType::DateTime64 { unit, scale_factor }
        } else {
            DataType::TimeDelta64 { unit, scale_factor }
        })
    };
    Ok(match name {
        "bool" => DataType::Bool,
        "int8" => DataType::Int8,
        "int16" => DataType::Int16,
        "int32" => DataType::Int32,
        "int64" => DataType::Int64,
        "uint8" => DataType::UInt8,
        "uint16" => DataType::UInt16,
        "uint32" => DataType::UInt32,
        "uint64" => DataType::UInt64,
        "float16" => DataType::Float16,
        "float32" => DataType::Float32,
        "float64" => DataType::Float64,
        "complex64" => DataType::Complex64,
        "complex128" => DataType::Complex128,
        "numpy.datetime64" => time(true)?,
        "numpy.timedelta64" => time(false)?,
        "string" => DataType::String,
        "variable_length_bytes" | "bytes" | "binary" => DataType::Bytes,
        "fixed_length_utf32" => {
            let n = length_bytes()?;
            if n % 4 != 0 {
                return Err(bad(
                    "configuration.length_bytes",
                    Some(&Value::from(n)),
                    "a multiple of 4",
                ));
            }
            DataType::FixedUtf32 { length_bytes: n }
        }
        "null_terminated_bytes" => DataType::NullTerminatedBytes {
            length_bytes: length_bytes()?,
        },
        "raw_bytes" => DataType::RawBytes {
            length_bytes: length_bytes()?,
        },
        "structured" | "struct" => parse_v3_struct(config)?,
        "optional" | "zarrs.optional" => parse_v3_optional(config)?,
        other => {
            if let Some(f) = LowFloat::from_name(other) {
                DataType::LowFloat(f)
            } else if let Some(i) = SubByteInt::from_name(other) {
                DataType::SubByteInt(i)
            } else {
                return Err(DataTypeError::Unsupported);
            }
        }
    })
}

/// An element size no numpy dtype has is malformed metadata. The item limit of the read
/// options is held to by the metadata parser ([`check_item_limit`]), before the fill value
/// is built.
fn check_item_bytes(name: &str, bytes: usize) -> Result<usize, DataTypeError> {
    if bytes > MAX_ITEM_BYTES {
        return Err(DataTypeError::LargerThanNumpy {
            data_type: name.to_string(),
            bytes,
        });
    }
    Ok(bytes)
}

/// A fixed-size `data_type` whose element is larger than the item limit of `limits` is an
/// error (what it says: the sizes and the setting that raises the limit).
pub fn check_item_limit(
    data_type: &DataType,
    limits: &crate::ReadLimits,
) -> Result<(), DataTypeError> {
    let max = limits.item_bytes();
    match data_type.fixed_size() {
        Some(bytes) if bytes > max => Err(DataTypeError::OverItemLimit {
            data_type: data_type.name(),
            bytes,
            limit: max,
        }),
        _ => Ok(()),
    }
}

/// Why a data type could not be parsed. Carries no array path: the metadata parser turns
/// [`DataTypeError::Unsupported`] into [`crate::Error::UnsupportedDataType`] and the others
/// into [`crate::Error::Metadata`], naming the array.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DataTypeError {
    /// A well-formed data type zarrow does not read.
    #[error("unsupported data type")]
    Unsupported,
    /// An element larger than numpy allows ([`MAX_ITEM_BYTES`]): malformed metadata.
    #[error(
        "{data_type}: an element of {bytes} bytes is larger than numpy allows ({MAX_ITEM_BYTES})"
    )]
    LargerThanNumpy {
        /// The data type (its name, or the dtype string).
        data_type: String,
        /// The size of one element.
        bytes: usize,
    },
    /// An element larger than the item limit of the read options
    /// ([`crate::ReadLimits::max_item_bytes`]).
    #[error("{data_type}: an element of {bytes} bytes is larger than the {limit} bytes zarrow reads (raise max_item_bytes, ZARROW_MAX_ITEM_BYTES, to read it)")]
    OverItemLimit {
        /// The data type's name.
        data_type: String,
        /// The size of one element.
        bytes: usize,
        /// The item limit in force.
        limit: usize,
    },
    /// Not a data type: a v3 `data_type` that is neither a name nor an object with a
    /// `name`, an empty v2 dtype.
    #[error("not a data type: {entry}")]
    NotADataType {
        /// The entry as written (JSON, or the dtype string).
        entry: String,
    },
    /// A parameter of a data type that is missing or not valid: a v3 configuration member
    /// (`length_bytes`, `unit`, `scale_factor`), a v2 dtype's item size or time unit.
    #[error("{data_type}: {parameter} {}, expected {expected}", found_text(.found))]
    BadParameter {
        /// The data type (its v3 name, or the v2 dtype string).
        data_type: String,
        /// The parameter.
        parameter: &'static str,
        /// Its value as written; `None` when it is missing.
        found: Option<String>,
        /// What it should be.
        expected: &'static str,
    },
    /// A data type whose element size overflows.
    #[error("{data_type}: the element size overflows")]
    SizeOverflow {
        /// The data type (its name, or the dtype string).
        data_type: String,
    },
    /// A malformed structured data type: no fields, a field named twice, a field that is not
    /// a name and a data type.
    #[error("structured data type: {problem}{}", field_text(.field))]
    BadStruct {
        /// The field to blame (its name, or the entry as written), when there is one.
        field: Option<String>,
        /// What is wrong.
        problem: &'static str,
    },
}

/// `missing`, or the value quoted.
fn found_text(found: &Option<String>) -> String {
    found
        .as_deref()
        .map_or_else(|| "missing".to_string(), |f| format!("'{f}'"))
}

/// ` (field …)`, or nothing.
fn field_text(field: &Option<String>) -> String {
    field
        .as_deref()
        .map_or_else(String::new, |f| format!(" (field {f})"))
}

/// A [`DataTypeError::BadStruct`] about `field`.
fn bad_field(field: impl ToString, problem: &'static str) -> DataTypeError {
    DataTypeError::BadStruct {
        field: Some(field.to_string()),
        problem,
    }
}

/// Why a fill value does not fit its data type. Carries no array path: the metadata parser
/// adds it ([`crate::Error::Metadata`]).
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FillValueError {
    /// A value that is not of the kind the data type takes.
    #[error("fill value {value} is not {expected}")]
    NotA {
        /// The value as written (JSON).
        value: String,
        /// What it must be.
        expected: &'static str,
    },
    /// An integer outside the range of the data type.
    #[error("fill value {value} out of range for {data_type}")]
    OutOfRange {
        /// The value.
        value: i128,
        /// The data type's name.
        data_type: String,
    },
    /// A string that should be base64 and is not.
    #[error("fill value '{value}' is not base64: {reason}")]
    NotBase64 {
        /// The string.
        value: String,
        /// The decoder's complaint.
        reason: String,
    },
    /// A value longer than the fixed size of the data type.
    #[error("fill value {value} longer than {length_bytes} bytes")]
    TooLong {
        /// The value as written (JSON).
        value: String,
        /// The size of an element.
        length_bytes: usize,
    },
    /// The raw bytes of a struct fill value that are not one element.
    #[error("struct fill value of {bytes} bytes for an element of {element_bytes}")]
    StructSize {
        /// The bytes given.
        bytes: usize,
        /// The size of an element.
        element_bytes: usize,
    },
    /// A bad fill value of one field of a struct.
    #[error("field '{field}': {source}")]
    Field {
        /// The field's name.
        field: String,
        /// What is wrong with its value.
        #[source]
        source: Box<FillValueError>,
    },
    /// A value of a kind the data type has no fill value of.
    #[error("fill value {value} does not fit data type {data_type}")]
    DoesNotFit {
        /// The value as written (JSON).
        value: String,
        /// The data type's name.
        data_type: String,
    },
}

fn not_a(value: impl std::fmt::Display, expected: &'static str) -> FillValueError {
    FillValueError::NotA {
        value: value.to_string(),
        expected,
    }
}

/// A JSON list of bytes (integers 0–255).
fn byte_list(items: &[Value]) -> Result<Vec<u8>, FillValueError> {
    items
        .iter()
        .map(|x| {
            x.as_u64()
                .and_then(|b| u8::try_from(b).ok())
                .ok_or_else(|| not_a(x, "a byte (0..=255)"))
        })
        .collect()
}

/// Byte order of stored elements.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Endian {
    /// Little-endian.
    Little,
    /// Big-endian.
    Big,
}

/// Parse a v2 numpy dtype string (`"<i8"`, `"|O"`, `">U10"`, `"<M8[ns]"`): the type and its byte order.
///
/// `|O` is returned as [`DataType::String`]; the v2 parser picks `Bytes` from the filters.
pub fn parse_v2_dtype(dtype: &str) -> Result<(DataType, Endian), DataTypeError> {
    let (order, rest) = match dtype.chars().next() {
        Some(c @ ('<' | '>' | '|' | '=')) => (c, &dtype[1..]),
        _ => ('|', dtype),
    };
    let endian = if order == '>' {
        Endian::Big
    } else {
        Endian::Little
    };
    let kind = rest
        .chars()
        .next()
        .ok_or_else(|| DataTypeError::NotADataType {
            entry: format!("'{dtype}'"),
        })?;
    let tail = &rest[kind.len_utf8()..];
    let bad = |parameter, found: &str, expected| DataTypeError::BadParameter {
        data_type: dtype.to_string(),
        parameter,
        found: Some(found.to_string()),
        expected,
    };
    let size = |t: &str| -> Result<usize, DataTypeError> {
        t.parse::<usize>()
            .map_err(|_| bad("item size", t, "a number of code units"))
    };
    // The bytes of one element of `tail` code units of `unit` bytes: not zero, checked and
    // bounded.
    let item_bytes = |tail: &str, unit: usize| -> Result<usize, DataTypeError> {
        let n = size(tail)?;
        if n == 0 {
            return Err(bad("item size", tail, "at least 1"));
        }
        let bytes = n
            .checked_mul(unit)
            .ok_or_else(|| DataTypeError::SizeOverflow {
                data_type: dtype.to_string(),
            })?;
        check_item_bytes(dtype, bytes)
    };
    let dt = match kind {
        'b' if tail == "1" => DataType::Bool,
        'i' => match tail {
            "1" => DataType::Int8,
            "2" => DataType::Int16,
            "4" => DataType::Int32,
            "8" => DataType::Int64,
            _ => return Err(DataTypeError::Unsupported),
        },
        'u' => match tail {
            "1" => DataType::UInt8,
            "2" => DataType::UInt16,
            "4" => DataType::UInt32,
            "8" => DataType::UInt64,
            _ => return Err(DataTypeError::Unsupported),
        },
        'f' => match tail {
            "2" => DataType::Float16,
            "4" => DataType::Float32,
            "8" => DataType::Float64,
            _ => return Err(DataTypeError::Unsupported),
        },
        'c' => match tail {
            "8" => DataType::Complex64,
            "16" => DataType::Complex128,
            _ => return Err(DataTypeError::Unsupported),
        },
        'M' | 'm' => {
            let inner = tail
                .strip_prefix("8[")
                .and_then(|t| t.strip_suffix(']'))
                .ok_or_else(|| bad("time unit", tail, "8[unit]"))?;
            let digits: String = inner.chars().take_while(|c| c.is_ascii_digit()).collect();
            let unit_str = &inner[digits.len()..];
            let scale_factor = if digits.is_empty() {
                1
            } else {
                digits
                    .parse::<i64>()
                    .map_err(|_| bad("unit multiple", &digits, "a number"))?
            };
            let unit = NpTimeUnit::parse(unit_str)
                .ok_or_else(|| bad("time unit", unit_str, TIME_UNITS))?;
            if kind == 'M' {
                DataType::DateTime64 { unit, scale_factor }
            } else {
                DataType::TimeDelta64 { unit, scale_factor }
            }
        }
        'O' => DataType::String,
        'U' => DataType::FixedUtf32 {
            length_bytes: item_bytes(tail, 4)?,
        },
        'S' => DataType::NullTerminatedBytes {
            length_bytes: item_bytes(tail, 1)?,
        },
        'V' => DataType::RawBytes {
            length_bytes: item_bytes(tail, 1)?,
        },
        _ => return Err(DataTypeError::Unsupported),
    };
    Ok((dt, endian))
}

/// A fill value, normalised: for fixed-size types the element's little-endian bytes
/// (`fixed_size()` of them; for a struct, each field in its stored byte order, as decoding
/// reads it); for variable-length types the value's bytes; for an optional type those of the
/// inner value, none for a missing one.
#[derive(Debug, Clone, PartialEq)]
pub struct FillValue {
    /// The bytes described above.
    pub bytes: Arc<[u8]>,
    /// The fill value as written in the metadata (for display and writing back).
    pub json: Value,
}

impl FillValue {
    /// A fill value from its normalised bytes.
    pub fn new(bytes: Vec<u8>, json: Value) -> Self {
        FillValue {
            bytes: bytes.into(),
            json,
        }
    }

    /// Whether this fill value of an array of `data_type` is a missing element: `null` of an
    /// [`DataType::Optional`] (its bytes are then empty).
    pub fn is_missing(&self, data_type: &DataType) -> bool {
        matches!(data_type, DataType::Optional(_)) && self.json.is_null()
    }
}

fn float_from_json(v: &Value) -> Result<f64, FillValueError> {
    const FLOAT: &str = "a float (a number, \"NaN\", \"Infinity\", \"-Infinity\" or hex bits)";
    match v {
        Value::Number(n) => n.as_f64().ok_or_else(|| not_a(n, FLOAT)),
        Value::String(s) => match s.as_str() {
            "NaN" => Ok(f64::NAN),
            "Infinity" => Ok(f64::INFINITY),
            "-Infinity" => Ok(f64::NEG_INFINITY),
            hex if hex.starts_with("0x") => {
                let bits = u64::from_str_radix(&hex[2..], 16).map_err(|_| not_a(v, FLOAT))?;
                match hex.len() - 2 {
                    4 => Ok(half::f16::from_bits(bits as u16).to_f64()),
                    8 => Ok(f32::from_bits(bits as u32) as f64),
                    16 => Ok(f64::from_bits(bits)),
                    _ => Err(not_a(v, "a float's hex bits (4, 8 or 16 hex digits)")),
                }
            }
            other => other.parse::<f64>().map_err(|_| not_a(v, FLOAT)),
        },
        other => Err(not_a(other, FLOAT)),
    }
}

/// A low-precision float's fill value: hex bits as stored (`"0x7c"`, `"0x7fc0"`), or a number
/// or `"NaN"`/`"Infinity"`/`"-Infinity"` the type holds exactly.
fn low_float_fill(f: LowFloat, v: &Value) -> Result<Vec<u8>, FillValueError> {
    let bits = match v.as_str().and_then(|s| s.strip_prefix("0x")) {
        Some(hex) if hex.len() == 2 * f.stored_size() => {
            u16::from_str_radix(hex, 16).map_err(|_| not_a(v, "hex bits"))?
        }
        _ => f
            .encode(float_from_json(v)?)
            .ok_or_else(|| FillValueError::DoesNotFit {
                value: v.to_string(),
                data_type: f.name().to_string(),
            })?,
    };
    Ok(bits.to_le_bytes()[..f.stored_size()].to_vec())
}

fn int_from_json(v: &Value) -> Result<i128, FillValueError> {
    match v {
        Value::Number(n) => {
            if let Some(i) = n.as_i64() {
                Ok(i as i128)
            } else if let Some(u) = n.as_u64() {
                Ok(u as i128)
            } else {
                let f = n.as_f64().unwrap_or(f64::NAN);
                if f.fract() == 0.0 && f.is_finite() {
                    Ok(f as i128)
                } else {
                    Err(not_a(n, "an integer"))
                }
            }
        }
        Value::Bool(b) => Ok(*b as i128),
        Value::String(s) => s.parse::<i128>().map_err(|_| not_a(v, "an integer")),
        other => Err(not_a(other, "an integer")),
    }
}

fn b64(s: &str) -> Result<Vec<u8>, FillValueError> {
    base64::engine::general_purpose::STANDARD
        .decode(s)
        .map_err(|e| FillValueError::NotBase64 {
            value: s.to_string(),
            reason: e.to_string(),
        })
}

fn int_bytes(
    data_type: &DataType,
    v: &Value,
    min: i128,
    max: i128,
    size: usize,
) -> Result<Vec<u8>, FillValueError> {
    let i = int_from_json(v)?;
    if i < min || i > max {
        return Err(FillValueError::OutOfRange {
            value: i,
            data_type: data_type.name(),
        });
    }
    Ok(i.to_le_bytes()[..size].to_vec())
}

/// Normalise a fill value (`json`) for `data_type`. `v2` selects the v2 conventions (base64
/// for `|S`/`|V`, `0`/`"0"`/`null` for `|O`). A `null` fill becomes the type's zero.
pub fn parse_fill_value(
    data_type: &DataType,
    json: &Value,
    v2: bool,
) -> Result<FillValue, FillValueError> {
    let int_bytes = |v, min, max, size| int_bytes(data_type, v, min, max, size);
    let zero = || vec![0u8; data_type.fixed_size().unwrap_or(0)];
    let bytes: Vec<u8> = match (data_type, json) {
        (DataType::String, Value::Null) | (DataType::Bytes, Value::Null) => Vec::new(),
        (DataType::Struct(fields), v) if !v.is_null() => struct_fill(fields, zero().len(), v)?,
        // `null`: missing (no bytes); `[value]`: a value of the inner type.
        (DataType::Optional(_), Value::Null) => Vec::new(),
        (DataType::Optional(inner), Value::Array(items)) if items.len() == 1 => {
            return Ok(FillValue::new(
                parse_fill_value(inner, &items[0], v2)?.bytes.to_vec(),
                json.clone(),
            ))
        }
        (DataType::Optional(_), v) => return Err(not_a(v, "null or [value]")),
        (_, Value::Null) => zero(),
        (DataType::Bool, Value::Bool(b)) => vec![*b as u8],
        (DataType::Bool, v) => vec![(int_from_json(v)? != 0) as u8],
        (DataType::Int8, v) => int_bytes(v, i8::MIN as i128, i8::MAX as i128, 1)?,
        (DataType::Int16, v) => int_bytes(v, i16::MIN as i128, i16::MAX as i128, 2)?,
        (DataType::Int32, v) => int_bytes(v, i32::MIN as i128, i32::MAX as i128, 4)?,
        (DataType::Int64, v) => int_bytes(v, i64::MIN as i128, i64::MAX as i128, 8)?,
        (DataType::UInt8, v) => int_bytes(v, 0, u8::MAX as i128, 1)?,
        (DataType::UInt16, v) => int_bytes(v, 0, u16::MAX as i128, 2)?,
        (DataType::UInt32, v) => int_bytes(v, 0, u32::MAX as i128, 4)?,
        (DataType::UInt64, v) => int_bytes(v, 0, u64::MAX as i128, 8)?,
        (DataType::Float16, v) => half::f16::from_f64(float_from_json(v)?)
            .to_le_bytes()
            .to_vec(),
        (DataType::Float32, v) => (float_from_json(v)? as f32).to_le_bytes().to_vec(),
        (DataType::LowFloat(f), v) => low_float_fill(*f, v)?,
        (DataType::SubByteInt(i), v) => {
            let (min, max) = i.range();
            int_bytes(v, min, max, 1)?
        }
        (DataType::Float64, v) => float_from_json(v)?.to_le_bytes().to_vec(),
        (DataType::Complex64 | DataType::Complex128, v) => {
            let (re, im) = match v {
                Value::Array(parts) if parts.len() == 2 => {
                    (float_from_json(&parts[0])?, float_from_json(&parts[1])?)
                }
                other => (float_from_json(other)?, 0.0),
            };
            if *data_type == DataType::Complex64 {
                [(re as f32).to_le_bytes(), (im as f32).to_le_bytes()].concat()
            } else {
                [re.to_le_bytes(), im.to_le_bytes()].concat()
            }
        }
        (DataType::DateTime64 { .. } | DataType::TimeDelta64 { .. }, Value::String(s))
            if s == "NaT" =>
        {
            i64::MIN.to_le_bytes().to_vec()
        }
        (DataType::DateTime64 { .. } | DataType::TimeDelta64 { .. }, v) => {
            int_bytes(v, i64::MIN as i128, i64::MAX as i128, 8)?
        }
        (DataType::String, Value::String(s)) => s.as_bytes().to_vec(),
        // zarr-python 2 writes 0 for object arrays; zarr-python 3 reads it as "0".
        (DataType::String, Value::Number(n)) => n.to_string().into_bytes(),
        (DataType::Bytes, Value::String(s)) => {
            if v2 {
                // v2 |O vlen-bytes: zarr-python writes base64; "0" is the legacy default.
                b64(s).unwrap_or_else(|_| s.as_bytes().to_vec())
            } else {
                b64(s)?
            }
        }
        (DataType::Bytes, Value::Number(n)) => n.to_string().into_bytes(),
        (DataType::Bytes | DataType::String, Value::Array(items)) => byte_list(items)?,
        (DataType::FixedUtf32 { length_bytes }, Value::String(s)) => {
            let mut out = Vec::with_capacity(*length_bytes);
            for c in s.chars() {
                out.extend_from_slice(&(c as u32).to_le_bytes());
            }
            if out.len() > *length_bytes {
                return Err(FillValueError::TooLong {
                    value: json.to_string(),
                    length_bytes: *length_bytes,
                });
            }
            out.resize(*length_bytes, 0);
            out
        }
        (DataType::FixedUtf32 { length_bytes }, Value::Number(n)) if n.as_u64() == Some(0) => {
            vec![0; *length_bytes]
        }
        (
            DataType::NullTerminatedBytes { length_bytes } | DataType::RawBytes { length_bytes },
            v,
        ) => {
            let mut raw = match v {
                Value::String(s) => b64(s)?,
                Value::Array(items) => byte_list(items)?,
                Value::Number(n) if n.as_u64() == Some(0) => Vec::new(),
                other => return Err(not_a(other, "base64 or a list of bytes")),
            };
            if raw.len() > *length_bytes {
                return Err(FillValueError::TooLong {
                    value: v.to_string(),
                    length_bytes: *length_bytes,
                });
            }
            raw.resize(*length_bytes, 0);
            raw
        }
        (dt, v) => {
            return Err(FillValueError::DoesNotFit {
                value: v.to_string(),
                data_type: dt.name(),
            })
        }
    };
    Ok(FillValue::new(bytes, json.clone()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn v2_dtypes_of_any_text_are_errors_not_panics() {
        // Found by fuzz/fuzz_targets/metadata.rs: the kind was sliced off at byte 1.
        for dtype in ["Ĳǩns]", "<Ĳ8", "é", "|ü1", "<M8[ñs]", ""] {
            assert!(parse_v2_dtype(dtype).is_err(), "{dtype}");
        }
    }

    #[test]
    fn v2_dtypes() {
        assert_eq!(
            parse_v2_dtype("<i8").unwrap(),
            (DataType::Int64, Endian::Little)
        );
        assert_eq!(
            parse_v2_dtype(">i4").unwrap(),
            (DataType::Int32, Endian::Big)
        );
        assert_eq!(parse_v2_dtype("|b1").unwrap().0, DataType::Bool);
        assert_eq!(
            parse_v2_dtype(">U10").unwrap(),
            (DataType::FixedUtf32 { length_bytes: 40 }, Endian::Big)
        );
        assert_eq!(
            parse_v2_dtype("|S8").unwrap().0,
            DataType::NullTerminatedBytes { length_bytes: 8 }
        );
        assert_eq!(
            parse_v2_dtype("<M8[ns]").unwrap().0,
            DataType::DateTime64 {
                unit: NpTimeUnit::Nanosecond,
                scale_factor: 1
            }
        );
        assert_eq!(
            parse_v2_dtype("<m8[10s]").unwrap().0,
            DataType::TimeDelta64 {
                unit: NpTimeUnit::Second,
                scale_factor: 10
            }
        );
        assert!(parse_v2_dtype("<M8[Y]").is_err());
        assert_eq!(
            parse_v2_dtype("<q8").unwrap_err(),
            DataTypeError::Unsupported
        );
    }

    #[test]
    fn v3_data_types() {
        assert_eq!(
            parse_v3_data_type(&json!("string")).unwrap(),
            DataType::String
        );
        assert_eq!(
            parse_v3_data_type(&json!("bytes")).unwrap(),
            DataType::Bytes
        );
        assert_eq!(
            parse_v3_data_type(
                &json!({"name": "fixed_length_utf32", "configuration": {"length_bytes": 48}})
            )
            .unwrap(),
            DataType::FixedUtf32 { length_bytes: 48 }
        );
        assert!(parse_v3_data_type(
            &json!({"name": "fixed_length_utf32", "configuration": {"length_bytes": 5}})
        )
        .is_err());
        assert_eq!(
            parse_v3_data_type(&json!("float8")).unwrap_err(),
            DataTypeError::Unsupported
        );
    }

    #[test]
    fn optional_types_and_their_fill_values() {
        let uint8 = json!({"name": "uint8", "configuration": {}});
        for name in ["optional", "zarrs.optional"] {
            let dt = parse_v3_data_type(&json!({"name": name, "configuration": uint8})).unwrap();
            assert_eq!(dt, DataType::Optional(Box::new(DataType::UInt8)));
            assert_eq!((dt.fixed_size(), dt.is_variable()), (None, false));
            assert_eq!(dt.name(), "optional(uint8)");
        }
        let dt = DataType::Optional(Box::new(DataType::Int16));
        let missing = parse_fill_value(&dt, &Value::Null, false).unwrap();
        assert!(missing.is_missing(&dt) && missing.bytes.is_empty());
        let some = parse_fill_value(&dt, &json!([-2]), false).unwrap();
        assert!(!some.is_missing(&dt));
        assert_eq!(&*some.bytes, &(-2i16).to_le_bytes());
        assert!(parse_fill_value(&dt, &json!(-2), false).is_err());
        // an optional of an optional (Arrow has one NULL), an optional field of a struct
        let nested = json!({"name": "optional", "configuration":
            {"name": "zarrs.optional", "configuration": uint8}});
        assert_eq!(
            parse_v3_data_type(&nested).unwrap_err(),
            DataTypeError::Unsupported
        );
        let field = json!({"name": "struct", "configuration": {"fields": [
            {"name": "a", "data_type": {"name": "optional", "configuration": uint8}}]}});
        assert_eq!(
            parse_v3_data_type(&field).unwrap_err(),
            DataTypeError::Unsupported
        );
        assert!(parse_v3_data_type(&json!({"name": "optional"})).is_err());
    }

    #[test]
    fn malformed_data_types_say_which_part_is_wrong() {
        let e = parse_v3_data_type(&json!({"name": "numpy.datetime64", "configuration": {}}))
            .unwrap_err();
        assert!(
            matches!(&e, DataTypeError::BadParameter { data_type, parameter: "configuration.unit", found: None, .. }
                if data_type == "numpy.datetime64"),
            "{e:?}"
        );
        assert!(e.to_string().contains("configuration.unit missing"), "{e}");
        let e = parse_v3_data_type(
            &json!({"name": "fixed_length_utf32", "configuration": {"length_bytes": 6}}),
        )
        .unwrap_err();
        assert!(
            matches!(&e, DataTypeError::BadParameter { found: Some(f), expected: "a multiple of 4", .. } if f == "6"),
            "{e:?}"
        );
        assert!(matches!(
            parse_v3_data_type(&json!(3)).unwrap_err(),
            DataTypeError::NotADataType { entry } if entry == "3"
        ));
        let e = parse_v2_dtype("<M8[parsec]").unwrap_err();
        assert!(
            matches!(&e, DataTypeError::BadParameter { parameter: "time unit", found: Some(f), .. } if f == "parsec"),
            "{e:?}"
        );
        let e = parse_v2_structured(&json!([["a", "<i4"], ["a", "<i2"]])).unwrap_err();
        assert_eq!(
            e,
            DataTypeError::BadStruct {
                field: Some("'a'".into()),
                problem: "a field named twice"
            }
        );
        let e = parse_v2_structured(&json!([["a", 7]])).unwrap_err();
        assert!(
            matches!(&e, DataTypeError::BadStruct { field: Some(f), .. } if f == r#"["a",7]"#),
            "{e:?}"
        );
    }

    #[test]
    fn item_sizes_are_checked() {
        // 2^62 UTF-32 code units: 2^64 bytes wrap to 0 without the check.
        for dtype in [
            "<U4611686018427387904",
            "<U1073741824",
            "|S3000000000",
            "|V99999999999999",
        ] {
            let e = parse_v2_dtype(dtype).unwrap_err();
            assert!(
                matches!(&e, DataTypeError::SizeOverflow { data_type } if data_type == dtype)
                    || matches!(&e, DataTypeError::LargerThanNumpy { data_type, .. }
                        if data_type == dtype),
                "{dtype}: {e:?}"
            );
        }
        // Over the item limit of the read options: refused, naming the setting that raises
        // it; within a raised one, read.
        let (big, _) = parse_v2_dtype("<U536870911").unwrap();
        let e = check_item_limit(&big, &crate::ReadLimits::default()).unwrap_err();
        assert_eq!(
            e,
            DataTypeError::OverItemLimit {
                data_type: "fixed_length_utf32[2147483644]".into(),
                bytes: 2147483644,
                limit: crate::options::DEFAULT_MAX_ITEM_BYTES,
            }
        );
        assert!(e.to_string().contains("max_item_bytes"), "{e}");
        let raised = crate::ReadLimits {
            max_item_bytes: 1 << 31,
            ..Default::default()
        };
        assert!(check_item_limit(&big, &raised).is_ok());
        assert_eq!(
            parse_v2_dtype("<U4194304").unwrap().0,
            DataType::FixedUtf32 {
                length_bytes: 16 << 20
            }
        );
        let huge = serde_json::json!({"name": "raw_bytes", "configuration": {"length_bytes": 100_000_000_000_000u64}});
        let e = parse_v3_data_type(&huge).unwrap_err();
        assert!(
            matches!(&e, DataTypeError::LargerThanNumpy { data_type, bytes: 100_000_000_000_000 }
                if data_type == "raw_bytes"),
            "{e:?}"
        );
        assert!(e.to_string().contains("larger than numpy allows"), "{e}");
    }

    #[test]
    fn fill_values() {
        let f = parse_fill_value(&DataType::Int16, &json!(-2), false).unwrap();
        assert_eq!(&*f.bytes, &(-2i16).to_le_bytes());
        assert!(parse_fill_value(&DataType::UInt8, &json!(300), false).is_err());
        let f = parse_fill_value(&DataType::Float32, &json!("NaN"), false).unwrap();
        assert!(f32::from_le_bytes(f.bytes[..].try_into().unwrap()).is_nan());
        let f = parse_fill_value(&DataType::String, &json!(0), true).unwrap();
        assert_eq!(&*f.bytes, b"0");
        let f = parse_fill_value(&DataType::Bytes, &json!([1, 2]), false).unwrap();
        assert_eq!(&*f.bytes, &[1, 2]);
        let f = parse_fill_value(
            &DataType::NullTerminatedBytes { length_bytes: 4 },
            &json!("YWI="),
            true,
        )
        .unwrap();
        assert_eq!(&*f.bytes, b"ab\0\0");
        let f = parse_fill_value(
            &DataType::FixedUtf32 { length_bytes: 8 },
            &json!("é"),
            false,
        )
        .unwrap();
        assert_eq!(&*f.bytes, &[0xe9, 0, 0, 0, 0, 0, 0, 0]);
    }

    #[test]
    fn fill_value_errors_are_typed() {
        let e = parse_fill_value(&DataType::UInt8, &json!(300), false).unwrap_err();
        assert_eq!(
            e,
            FillValueError::OutOfRange {
                value: 300,
                data_type: "uint8".into()
            }
        );
        assert_eq!(e.to_string(), "fill value 300 out of range for uint8");
        let e = parse_fill_value(&DataType::Float64, &json!("fast"), false).unwrap_err();
        assert!(
            matches!(&e, FillValueError::NotA { value, .. } if value == "\"fast\""),
            "{e:?}"
        );
        let e = parse_fill_value(
            &DataType::RawBytes { length_bytes: 2 },
            &json!([1, 2, 3]),
            false,
        )
        .unwrap_err();
        assert!(
            matches!(
                e,
                FillValueError::TooLong {
                    length_bytes: 2,
                    ..
                }
            ),
            "{e:?}"
        );
        let e = parse_fill_value(&DataType::Bytes, &json!("!!"), false).unwrap_err();
        assert!(
            matches!(&e, FillValueError::NotBase64 { value, .. } if value == "!!"),
            "{e:?}"
        );
        let e = parse_fill_value(&DataType::Bool, &json!({}), false).unwrap_err();
        assert!(matches!(e, FillValueError::NotA { .. }), "{e:?}");
        // A struct names the field whose value is bad.
        let point = DataType::Struct(vec![
            StructField {
                name: "x".into(),
                data_type: DataType::Int8,
                endian: None,
            },
            StructField {
                name: "y".into(),
                data_type: DataType::Int8,
                endian: None,
            },
        ]);
        let e = parse_fill_value(&point, &json!({"x": 1, "y": 200}), false).unwrap_err();
        match &e {
            FillValueError::Field { field, source } => {
                assert_eq!(field, "y");
                assert!(matches!(
                    **source,
                    FillValueError::OutOfRange { value: 200, .. }
                ));
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(
            e.to_string(),
            "field 'y': fill value 200 out of range for int8"
        );
        let e = parse_fill_value(&point, &json!("AAAA"), false).unwrap_err();
        assert_eq!(
            e,
            FillValueError::StructSize {
                bytes: 3,
                element_bytes: 2
            }
        );
    }
}

//! numcodecs filters: codecs that change the elements, not only their bytes — `delta`,
//! `fixedscaleoffset`, `quantize`, `bitround`, `astype`, `packbits`, and the object codecs
//! `categorize` and `json2`.
//!
//! zarrow runs them where they sit in a v2 chain, as bytes-to-bytes steps between the
//! compressor and the array-to-bytes decode (in v3, zarr-python's `numcodecs.*` array-to-array
//! wrappers, which come before `bytes`, are moved there too): each reads the elements of its
//! encoded type and writes those of its decoded type, in the byte order of the array. The
//! object codecs write numcodecs `vlen-utf8` frames (u32 count, then u32 length + bytes per
//! item) for the `vlen-utf8` decoder after them — or UTF-32 for a `<U` array.
//!
//! Decoding follows numpy: `astype` wraps integers and truncates floats toward zero;
//! `fixedscaleoffset` computes `x / scale + offset` in float64 before the cast; `delta` sums
//! in the decoded type (integers wrap). `quantize` and `bitround` only round when encoding.

use bytes::Bytes;
use serde_json::{json, Value};

use super::cast_value::CastValue;
use super::config::{Config, ConfigError};
use super::scale_offset::ScaleOffset;
use super::support::{buffer, too_large};
use crate::data_type::{parse_v2_dtype, DataType, Endian};
use crate::error::ChunkError;

/// A numeric element type as numcodecs names it (`"<i4"`, `"|u1"`, `">f8"`, `"|b1"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Numeric {
    kind: NumKind,
    size: usize,
    endian: Endian,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum NumKind {
    Bool,
    Int,
    UInt,
    Float,
}

/// A value on its way between two numeric types.
#[derive(Debug, Clone, Copy)]
enum Num {
    Int(i128),
    Float(f64),
}

impl Numeric {
    /// Parse a numpy dtype string; only booleans, integers and floats.
    pub fn parse(s: &str) -> Result<Self, ConfigError> {
        Self::parse_key("dtype", s)
    }

    /// [`Self::parse`] for the value of configuration key `key`.
    fn parse_key(key: &str, s: &str) -> Result<Self, ConfigError> {
        let bad = |reason: String| ConfigError::BadDtype {
            key: key.to_string(),
            dtype: s.to_string(),
            reason,
        };
        let (dt, endian) = parse_v2_dtype(s).map_err(|e| bad(e.to_string()))?;
        let kind = match dt {
            DataType::Bool => NumKind::Bool,
            DataType::Int8 | DataType::Int16 | DataType::Int32 | DataType::Int64 => NumKind::Int,
            DataType::UInt8 | DataType::UInt16 | DataType::UInt32 | DataType::UInt64 => {
                NumKind::UInt
            }
            DataType::Float16 | DataType::Float32 | DataType::Float64 => NumKind::Float,
            _ => return Err(bad("not a number (booleans, integers and floats)".into())),
        };
        let size = dt.fixed_size().unwrap_or(1);
        Ok(Numeric { kind, size, endian })
    }

    /// The numpy dtype string.
    pub fn to_dtype(self) -> String {
        let order = if self.size == 1 {
            '|'
        } else if self.endian == Endian::Big {
            '>'
        } else {
            '<'
        };
        let kind = match self.kind {
            NumKind::Bool => 'b',
            NumKind::Int => 'i',
            NumKind::UInt => 'u',
            NumKind::Float => 'f',
        };
        format!("{order}{kind}{}", self.size)
    }

    fn with_endian(self, endian: Endian) -> Self {
        Numeric { endian, ..self }
    }

    fn read(self, b: &[u8]) -> Num {
        let mut le = [0u8; 8];
        le[..self.size].copy_from_slice(b);
        if self.endian == Endian::Big {
            le[..self.size].reverse();
        }
        let raw = u64::from_le_bytes(le);
        match (self.kind, self.size) {
            (NumKind::Bool, _) => Num::Int(i128::from(raw != 0)),
            (NumKind::UInt, _) => Num::Int(i128::from(raw)),
            (NumKind::Int, n) => {
                let shift = 64 - 8 * n as u32;
                Num::Int(i128::from(((raw << shift) as i64) >> shift))
            }
            (NumKind::Float, 2) => Num::Float(half::f16::from_bits(raw as u16).to_f64()),
            (NumKind::Float, 4) => Num::Float(f64::from(f32::from_bits(raw as u32))),
            (NumKind::Float, _) => Num::Float(f64::from_bits(raw)),
        }
    }

    fn write(self, v: Num, out: &mut Vec<u8>) {
        let bits: u64 = match (self.kind, v) {
            (NumKind::Bool, Num::Int(i)) => u64::from(i != 0),
            (NumKind::Bool, Num::Float(f)) => u64::from(f != 0.0),
            (NumKind::Int | NumKind::UInt, Num::Int(i)) => i as u64,
            // numpy: truncation toward zero (out-of-range values are undefined there).
            (NumKind::Int | NumKind::UInt, Num::Float(f)) => (f as i128) as u64,
            (NumKind::Float, v) => {
                let f = match v {
                    Num::Int(i) => i as f64,
                    Num::Float(f) => f,
                };
                match self.size {
                    2 => u64::from(half::f16::from_f64(f).to_bits()),
                    4 => u64::from((f as f32).to_bits()),
                    _ => f.to_bits(),
                }
            }
        };
        let le = bits.to_le_bytes();
        let start = out.len();
        out.extend_from_slice(&le[..self.size]);
        if self.endian == Endian::Big {
            out[start..].reverse();
        }
    }
}

/// What an object codec decodes to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TextOut {
    /// numcodecs `vlen-utf8` frames (an `|O` array).
    Vlen,
    /// UTF-32 of this many bytes per element (a `<U` array).
    Utf32(usize),
}

/// A numcodecs filter with its configuration.
#[derive(Debug, Clone, PartialEq)]
pub enum Filter {
    /// `delta`: stored differences of `astype`, decoded by a running sum in `dtype`.
    Delta {
        /// The decoded type.
        dtype: Numeric,
        /// The stored type.
        astype: Numeric,
    },
    /// `fixedscaleoffset`: stored `round((x - offset) * scale)` as `astype`.
    FixedScaleOffset {
        /// Subtracted before scaling.
        offset: f64,
        /// The scale.
        scale: f64,
        /// The decoded type.
        dtype: Numeric,
        /// The stored type.
        astype: Numeric,
    },
    /// `quantize` (`digits` kept for the metadata) and `astype`: a cast from `from` to `to`.
    Cast {
        /// numcodecs' codec id (`quantize` or `astype`).
        id: &'static str,
        /// The stored type.
        from: Numeric,
        /// The decoded type.
        to: Numeric,
        /// `quantize`'s digits.
        digits: i64,
    },
    /// `bitround`: mantissa bits dropped when encoding; decoding reads the values as stored.
    BitRound {
        /// The mantissa bits kept.
        keepbits: i64,
    },
    /// `packbits`: booleans as bits (most significant first), after a byte counting the
    /// padding bits of the last byte.
    PackBits,
    /// `categorize`: `labels[k - 1]` stored as the integer `k` (0 for anything else, decoded
    /// as `""`).
    Categorize {
        /// The labels.
        labels: Vec<String>,
        /// The stored integer type.
        astype: Numeric,
        /// What the labels decode to.
        out: TextOut,
        /// The `dtype` as in the metadata.
        dtype: String,
    },
    /// `json2`: the chunk as one JSON list: the items, then the dtype, then the shape.
    Json2 {
        /// The configuration as written (for the metadata).
        config: Value,
    },
    /// The zarr-extensions `scale_offset` (see `scale_offset.rs`), an element-wise step too.
    ScaleOffset(ScaleOffset),
    /// The zarr-extensions `cast_value` (see `cast_value.rs`).
    CastValue(Box<CastValue>),
}

fn dtype_of(c: &Config<'_>, key: &str) -> Result<Numeric, ConfigError> {
    Numeric::parse_key(key, c.str(key)?.ok_or_else(|| ConfigError::missing(key))?)
}

fn float_of(c: &Config<'_>, key: &str, default: f64) -> Result<f64, ConfigError> {
    match c.get(key) {
        None => Ok(default),
        Some(v) => v
            .as_f64()
            .ok_or_else(|| ConfigError::bad_value(key, v, "a number")),
    }
}

/// The filter numcodecs calls `id`, from its configuration; `Ok(None)` if `id` is not one.
/// `data_type` is the array's (for `categorize`, which decodes to it).
pub(super) fn numcodecs(
    id: &str,
    c: &Config<'_>,
    data_type: &DataType,
) -> Result<Option<Filter>, ConfigError> {
    Ok(Some(match id {
        "delta" => {
            c.only(&["id", "dtype", "astype"])?;
            let dtype = dtype_of(c, "dtype")?;
            let astype = astype_or(c, dtype)?;
            Filter::Delta { dtype, astype }
        }
        "fixedscaleoffset" => {
            c.only(&["id", "offset", "scale", "dtype", "astype"])?;
            let dtype = dtype_of(c, "dtype")?;
            let astype = astype_or(c, dtype)?;
            let scale = float_of(c, "scale", 1.0)?;
            if scale == 0.0 || !scale.is_finite() {
                return Err(ConfigError::bad_value(
                    "scale",
                    scale,
                    "a finite number other than 0 (decoding divides by it)",
                ));
            }
            Filter::FixedScaleOffset {
                offset: float_of(c, "offset", 0.0)?,
                scale,
                dtype,
                astype,
            }
        }
        "quantize" => {
            c.only(&["id", "digits", "dtype", "astype"])?;
            let to = dtype_of(c, "dtype")?;
            let from = astype_or(c, to)?;
            let digits = c
                .int("digits")?
                .ok_or_else(|| ConfigError::missing("digits"))?;
            Filter::Cast {
                id: "quantize",
                from,
                to,
                digits,
            }
        }
        "astype" => {
            c.only(&["id", "encode_dtype", "decode_dtype"])?;
            Filter::Cast {
                id: "astype",
                from: dtype_of(c, "encode_dtype")?,
                to: dtype_of(c, "decode_dtype")?,
                digits: 0,
            }
        }
        "bitround" => {
            c.only(&["id", "keepbits"])?;
            Filter::BitRound {
                keepbits: c
                    .int("keepbits")?
                    .ok_or_else(|| ConfigError::missing("keepbits"))?,
            }
        }
        "packbits" => {
            c.only(&["id"])?;
            Filter::PackBits
        }
        "categorize" => categorize(c, data_type)?,
        "json2" => {
            if !matches!(data_type, DataType::String) {
                return Err(ConfigError::unsupported(
                    None,
                    format!("json2 is read for strings, not {}", data_type.name()),
                ));
            }
            let config = Value::Object(c.map.cloned().unwrap_or_default());
            Filter::Json2 { config }
        }
        _ => return Ok(None),
    }))
}

/// The `astype` of a filter's configuration: the type it encodes to, `dtype` where unset.
fn astype_or(c: &Config<'_>, dtype: Numeric) -> Result<Numeric, ConfigError> {
    match c.str("astype")? {
        Some(s) => Numeric::parse_key("astype", s),
        None => Ok(dtype),
    }
}

/// numcodecs' `categorize`: stored integers indexing `labels`, decoded to the array's strings.
fn categorize(c: &Config<'_>, data_type: &DataType) -> Result<Filter, ConfigError> {
    c.only(&["id", "labels", "dtype", "astype"])?;
    let labels = c
        .get("labels")
        .and_then(Value::as_array)
        .ok_or_else(|| ConfigError::missing("labels"))?
        .iter()
        .map(|l| l.as_str().map(str::to_string))
        .collect::<Option<Vec<String>>>()
        .ok_or_else(|| {
            ConfigError::bad_value(
                "labels",
                c.get("labels").unwrap_or(&Value::Null),
                "a list of strings",
            )
        })?;
    let out = match data_type {
        DataType::FixedUtf32 { length_bytes } => TextOut::Utf32(*length_bytes),
        DataType::String => TextOut::Vlen,
        other => {
            return Err(ConfigError::unsupported(
                None,
                format!("categorize decodes to strings, not {}", other.name()),
            ))
        }
    };
    Ok(Filter::Categorize {
        labels,
        astype: dtype_of(c, "astype")?,
        out,
        dtype: c.str("dtype")?.unwrap_or("|O").to_string(),
    })
}

impl Filter {
    /// numcodecs' id.
    pub fn id(&self) -> &'static str {
        match self {
            Filter::Delta { .. } => "delta",
            Filter::FixedScaleOffset { .. } => "fixedscaleoffset",
            Filter::Cast { id, .. } => id,
            Filter::BitRound { .. } => "bitround",
            Filter::PackBits => "packbits",
            Filter::Categorize { .. } => "categorize",
            Filter::Json2 { .. } => "json2",
            Filter::ScaleOffset(_) => "scale_offset",
            Filter::CastValue(_) => "cast_value",
        }
    }

    /// Whether the filter writes `vlen-utf8` frames (then the chain decodes them).
    pub fn writes_vlen(&self) -> bool {
        matches!(
            self,
            Filter::Json2 { .. }
                | Filter::Categorize {
                    out: TextOut::Vlen,
                    ..
                }
        )
    }

    /// The same filter reading and writing numbers in `endian` (a v3 chain's `bytes` codec
    /// decides the byte order of what the filter sees).
    pub(super) fn with_endian(self, endian: Endian) -> Self {
        match self {
            Filter::Delta { dtype, astype } => Filter::Delta {
                dtype: dtype.with_endian(endian),
                astype: astype.with_endian(endian),
            },
            Filter::FixedScaleOffset {
                offset,
                scale,
                dtype,
                astype,
            } => Filter::FixedScaleOffset {
                offset,
                scale,
                dtype: dtype.with_endian(endian),
                astype: astype.with_endian(endian),
            },
            Filter::Cast {
                id,
                from,
                to,
                digits,
            } => Filter::Cast {
                id,
                from: from.with_endian(endian),
                to: to.with_endian(endian),
                digits,
            },
            Filter::ScaleOffset(c) => Filter::ScaleOffset(ScaleOffset { endian, ..c }),
            Filter::CastValue(c) => Filter::CastValue(Box::new(CastValue { endian, ..*c })),
            other => other,
        }
    }

    /// numcodecs' configuration (`get_config()`).
    pub fn v2_json(&self) -> Value {
        match self {
            Filter::Delta { dtype, astype } => {
                json!({"id": "delta", "dtype": dtype.to_dtype(), "astype": astype.to_dtype()})
            }
            Filter::FixedScaleOffset {
                offset,
                scale,
                dtype,
                astype,
            } => json!({"id": "fixedscaleoffset", "offset": offset, "scale": scale,
                         "dtype": dtype.to_dtype(), "astype": astype.to_dtype()}),
            Filter::Cast {
                id: "quantize",
                from,
                to,
                digits,
            } => json!({"id": "quantize", "digits": digits, "dtype": to.to_dtype(),
                         "astype": from.to_dtype()}),
            Filter::Cast { from, to, .. } => json!({"id": "astype",
                "encode_dtype": from.to_dtype(), "decode_dtype": to.to_dtype()}),
            Filter::BitRound { keepbits } => json!({"id": "bitround", "keepbits": keepbits}),
            Filter::PackBits => json!({"id": "packbits"}),
            Filter::Categorize {
                labels,
                astype,
                dtype,
                ..
            } => json!({"id": "categorize", "labels": labels, "dtype": dtype,
                         "astype": astype.to_dtype()}),
            Filter::Json2 { config } => config.clone(),
            // zarr v3 codecs: their v3 configuration, under their name.
            Filter::ScaleOffset(ScaleOffset { config, .. }) => {
                json!({"id": "scale_offset", "configuration": config})
            }
            Filter::CastValue(c) => json!({"id": "cast_value", "configuration": c.config}),
        }
    }

    /// zarr-python 3's `numcodecs.*` entry (the zarr-extensions codecs under their own name).
    pub fn v3_json(&self) -> Value {
        match self {
            Filter::ScaleOffset(ScaleOffset { config, .. }) => {
                return json!({"name": "scale_offset", "configuration": config})
            }
            Filter::CastValue(c) => return json!({"name": "cast_value", "configuration": c.config}),
            _ => {}
        }
        let mut config = self.v2_json();
        if let Some(o) = config.as_object_mut() {
            o.remove("id");
        }
        json!({"name": format!("numcodecs.{}", self.id()), "configuration": config})
    }

    /// The most bytes the input of this filter may have when its output may have `out_max`
    /// (the limit of the step decoded before it).
    pub(super) fn input_bound(&self, out_max: usize) -> usize {
        let ratio = |from: &Numeric, to: &Numeric| {
            (out_max / to.size)
                .saturating_mul(from.size)
                .saturating_add(from.size)
        };
        match self {
            Filter::Delta { dtype, astype } | Filter::FixedScaleOffset { dtype, astype, .. } => {
                ratio(astype, dtype)
            }
            Filter::Cast { from, to, .. } => ratio(from, to),
            Filter::BitRound { .. } => out_max,
            Filter::PackBits => out_max / 8 + 2,
            // at most one 8-byte code per decoded item of at least 4 bytes
            Filter::Categorize { .. } => out_max.saturating_mul(2),
            // an item's JSON takes at most 6 bytes per byte (`\u0000`) plus quotes and a comma
            Filter::Json2 { .. } => out_max.saturating_mul(6).saturating_add(1 << 16),
            Filter::ScaleOffset(_) => out_max,
            Filter::CastValue(c) => {
                let (from, to) = c.sizes();
                (out_max / to).saturating_mul(from).saturating_add(from)
            }
        }
    }

    /// Decode `input` into at most `max_size` bytes.
    #[cfg(test)]
    fn decode(&self, input: &Bytes, max_size: usize) -> Result<Bytes, ChunkError> {
        self.decode_elements(input, max_size, None)
    }

    /// Decode `input`, a chunk of `chunk_elements` elements when known, into at most
    /// `max_size` bytes.
    pub(super) fn decode_elements(
        &self,
        input: &Bytes,
        max_size: usize,
        chunk_elements: Option<usize>,
    ) -> Result<Bytes, ChunkError> {
        let id = self.id();
        let elements = |from: &Numeric| -> Result<std::slice::ChunksExact<'_, u8>, ChunkError> {
            if !input.len().is_multiple_of(from.size) {
                return Err(ChunkError::Invalid(format!(
                    "{id}: {} bytes are not whole {}-byte elements",
                    input.len(),
                    from.size
                )));
            }
            Ok(input.chunks_exact(from.size))
        };
        let out_buffer = |n: usize, to: &Numeric| -> Result<Vec<u8>, ChunkError> {
            let size = n.saturating_mul(to.size);
            if size > max_size {
                return Err(too_large(id, size, max_size));
            }
            buffer(size, id)
        };
        let out = match self {
            Filter::BitRound { .. } => return Ok(input.clone()),
            Filter::ScaleOffset(c) => c.decode(input, max_size)?,
            Filter::CastValue(c) => c.decode(input, max_size)?,
            Filter::Delta { dtype, astype } => {
                let items = elements(astype)?;
                let mut out = out_buffer(items.len(), dtype)?;
                undelta(items, dtype, astype, &mut out);
                out
            }
            Filter::FixedScaleOffset {
                offset,
                scale,
                dtype,
                astype,
            } => {
                let items = elements(astype)?;
                let mut out = out_buffer(items.len(), dtype)?;
                for x in items {
                    let v = as_f64(astype.read(x)) / scale + offset;
                    dtype.write(Num::Float(v), &mut out);
                }
                out
            }
            Filter::Cast { from, to, .. } => {
                let items = elements(from)?;
                let mut out = out_buffer(items.len(), to)?;
                for x in items {
                    to.write(from.read(x), &mut out);
                }
                out
            }
            Filter::PackBits => unpack_bits(input, max_size)?,
            Filter::Categorize {
                labels,
                astype,
                out,
                ..
            } => {
                let items = elements(astype)?;
                let mut text = TextWriter::new(out, max_size, id);
                for x in items {
                    let label = match astype.read(x) {
                        Num::Int(k) if k >= 1 && (k as u128) <= labels.len() as u128 => {
                            labels[(k - 1) as usize].as_str()
                        }
                        _ => "",
                    };
                    text.push(label)?;
                }
                text.finish()?
            }
            Filter::Json2 { .. } => {
                let mut text = TextWriter::new(&TextOut::Vlen, max_size, id);
                json2::items(input, &mut text, chunk_elements)?;
                text.finish()?
            }
        };
        Ok(Bytes::from(out))
    }
}

/// Undo numcodecs' `delta`: the running sums of `items` (of `astype`) as `dtype`, into `out`.
fn undelta(
    items: std::slice::ChunksExact<'_, u8>,
    dtype: &Numeric,
    astype: &Numeric,
    out: &mut Vec<u8>,
) {
    match dtype.kind {
        NumKind::Float if dtype.size == 4 => {
            let mut acc = 0f32;
            for x in items {
                acc += as_f64(astype.read(x)) as f32;
                dtype.write(Num::Float(f64::from(acc)), out);
            }
        }
        NumKind::Float => {
            let mut acc = 0f64;
            for x in items {
                acc += as_f64(astype.read(x));
                dtype.write(Num::Float(acc), out);
            }
        }
        _ => {
            let mut acc = 0i128;
            for x in items {
                let v = match astype.read(x) {
                    Num::Int(i) => i,
                    Num::Float(f) => f as i128,
                };
                acc = wrap(acc.wrapping_add(v), dtype);
                dtype.write(Num::Int(acc), out);
            }
        }
    }
}

/// Undo numcodecs' `packbits`: a byte of padding bits, then the bits, 8 to a byte, first
/// bit highest; one byte per bit out, at most `max_size`.
fn unpack_bits(input: &Bytes, max_size: usize) -> Result<Vec<u8>, ChunkError> {
    let id = "packbits";
    let (&pad, bits) = input
        .split_first()
        .ok_or_else(|| ChunkError::Truncated("packbits: empty chunk".into()))?;
    let total = (bits.len() * 8)
        .checked_sub(usize::from(pad))
        .filter(|_| pad < 8);
    let total =
        total.ok_or_else(|| ChunkError::Invalid(format!("packbits: {pad} padding bits")))?;
    if total > max_size {
        return Err(too_large(id, total, max_size));
    }
    let mut out = buffer(total, id)?;
    for i in 0..total {
        out.push((bits[i / 8] >> (7 - i % 8)) & 1);
    }
    Ok(out)
}

fn as_f64(v: Num) -> f64 {
    match v {
        Num::Int(i) => i as f64,
        Num::Float(f) => f,
    }
}

/// `v` wrapped to the range of the integer type `t`, as its machine arithmetic would.
fn wrap(v: i128, t: &Numeric) -> i128 {
    let bits = 8 * t.size as u32;
    let m = v & ((1i128 << bits) - 1);
    if t.kind == NumKind::Int && m >= 1i128 << (bits - 1) {
        m - (1i128 << bits)
    } else {
        m
    }
}

/// Strings written as `vlen-utf8` frames or as fixed UTF-32, bounded by the chunk's limit.
struct TextWriter<'a> {
    out: Vec<u8>,
    kind: &'a TextOut,
    max: usize,
    id: &'static str,
    /// Items pushed.
    count: usize,
}

impl<'a> TextWriter<'a> {
    fn new(kind: &'a TextOut, max: usize, id: &'static str) -> Self {
        let mut out = Vec::new();
        if let TextOut::Vlen = kind {
            // The item count, written by `finish`.
            out.extend_from_slice(&[0; 4]);
        }
        TextWriter {
            out,
            kind,
            max,
            id,
            count: 0,
        }
    }

    fn push(&mut self, s: &str) -> Result<(), ChunkError> {
        self.count += 1;
        match self.kind {
            TextOut::Vlen => {
                let len = u32::try_from(s.len())
                    .map_err(|_| ChunkError::TooLarge(format!("{}: item too long", self.id)))?;
                self.out.extend_from_slice(&len.to_le_bytes());
                self.out.extend_from_slice(s.as_bytes());
            }
            TextOut::Utf32(width) => {
                let start = self.out.len();
                for c in s.chars() {
                    self.out.extend_from_slice(&(c as u32).to_le_bytes());
                }
                if self.out.len() - start > *width {
                    return Err(ChunkError::Invalid(format!(
                        "{}: label '{s}' is longer than {width} bytes of UTF-32",
                        self.id
                    )));
                }
                self.out.resize(start + width, 0);
            }
        }
        if self.out.len() > self.max {
            return Err(too_large(self.id, self.out.len(), self.max));
        }
        Ok(())
    }

    fn finish(mut self) -> Result<Vec<u8>, ChunkError> {
        if let TextOut::Vlen = self.kind {
            let n = self.count;
            let count = u32::try_from(n)
                .map_err(|_| ChunkError::TooLarge(format!("{}: {n} items", self.id)))?;
            self.out[..4].copy_from_slice(&count.to_le_bytes());
        }
        Ok(self.out)
    }
}

/// numcodecs `json2`: the chunk is one JSON list, its items (strings; `null`, numbers and
/// booleans read as their text) then the dtype and the shape. It is parsed as a stream, one
/// element at a time, each item written out as it comes (no `Value` of the document is
/// built), and a chunk of known element count stops at the first item past it.
mod json2 {
    use std::borrow::Cow;
    use std::collections::VecDeque;
    use std::fmt;

    use serde::de::{self, DeserializeSeed, IgnoredAny, SeqAccess, Visitor};

    use super::TextWriter;
    use crate::error::ChunkError;

    /// Write the items of the json2 list `input` to `text`, refusing more than `elements`.
    pub(super) fn items(
        input: &[u8],
        text: &mut TextWriter<'_>,
        elements: Option<usize>,
    ) -> Result<(), ChunkError> {
        let mut failure = None;
        let mut de = serde_json::Deserializer::from_slice(input);
        let list = List {
            text,
            elements,
            failure: &mut failure,
        };
        let parsed = list.deserialize(&mut de).and_then(|()| de.end());
        match (failure, parsed) {
            (Some(e), _) => Err(e),
            (None, Err(e)) => Err(ChunkError::Invalid(format!("json2: {e}"))),
            (None, Ok(())) => Ok(()),
        }
    }

    /// The list; a typed error found while visiting is left in `failure` (serde's errors
    /// carry only text).
    struct List<'a, 'w> {
        text: &'a mut TextWriter<'w>,
        elements: Option<usize>,
        failure: &'a mut Option<ChunkError>,
    }

    impl<'de> DeserializeSeed<'de> for List<'_, '_> {
        type Value = ();

        fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
            d.deserialize_seq(self)
        }
    }

    impl<'de> Visitor<'de> for List<'_, '_> {
        type Value = ();

        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a list of items, then a dtype and a shape")
        }

        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
            let mut fail = |e: ChunkError| {
                let message = e.to_string();
                *self.failure = Some(e);
                de::Error::custom(message)
            };
            // The last two elements are the dtype and the shape: an element is an item once
            // two more have followed it.
            let mut pending: VecDeque<Element<'de>> = VecDeque::with_capacity(3);
            let mut items = 0usize;
            while let Some(element) = seq.next_element::<Element<'de>>()? {
                pending.push_back(element);
                if pending.len() < 3 {
                    continue;
                }
                if self.elements.is_some_and(|n| items >= n) {
                    let n = items;
                    return Err(fail(ChunkError::TooLarge(format!(
                        "json2: the list holds more items than the chunk's {n} elements"
                    ))));
                }
                let pushed = match pending.pop_front() {
                    Some(Element::Text(s)) => self.text.push(&s),
                    Some(Element::Other(what)) => Err(ChunkError::Invalid(format!(
                        "json2: item {items} is {what}, not a string"
                    ))),
                    None => Ok(()),
                };
                pushed.map_err(&mut fail)?;
                items += 1;
            }
            if pending.len() < 2 {
                return Err(fail(ChunkError::Invalid(
                    "json2: not a list with a dtype and shape".into(),
                )));
            }
            Ok(())
        }
    }

    /// One element of the list: the text of a scalar, or what else it is (its contents
    /// skipped, never held).
    enum Element<'de> {
        Text(Cow<'de, str>),
        Other(&'static str),
    }

    impl<'de> de::Deserialize<'de> for Element<'de> {
        fn deserialize<D: de::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            d.deserialize_any(ElementVisitor)
        }
    }

    struct ElementVisitor;

    impl<'de> Visitor<'de> for ElementVisitor {
        type Value = Element<'de>;

        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a JSON value")
        }

        fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Self::Value, E> {
            Ok(Element::Text(Cow::Borrowed(v)))
        }

        fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
            Ok(Element::Text(Cow::Owned(v.to_owned())))
        }

        fn visit_string<E>(self, v: String) -> Result<Self::Value, E> {
            Ok(Element::Text(Cow::Owned(v)))
        }

        // null is the empty string; zarr-python 2 pads edge chunks of object arrays with the
        // fill value, 0 by default: numbers and booleans read as their JSON text, as
        // zarr-python 3 reads that fill.
        fn visit_unit<E>(self) -> Result<Self::Value, E> {
            Ok(Element::Text(Cow::Borrowed("")))
        }

        fn visit_bool<E>(self, v: bool) -> Result<Self::Value, E> {
            Ok(Element::Text(Cow::Borrowed(if v {
                "true"
            } else {
                "false"
            })))
        }

        fn visit_u64<E>(self, v: u64) -> Result<Self::Value, E> {
            Ok(Element::Text(Cow::Owned(v.to_string())))
        }

        fn visit_i64<E>(self, v: i64) -> Result<Self::Value, E> {
            Ok(Element::Text(Cow::Owned(v.to_string())))
        }

        fn visit_f64<E>(self, v: f64) -> Result<Self::Value, E> {
            let text =
                serde_json::Number::from_f64(v).map_or_else(|| v.to_string(), |n| n.to_string());
            Ok(Element::Text(Cow::Owned(text)))
        }

        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
            while seq.next_element::<IgnoredAny>()?.is_some() {}
            Ok(Element::Other("a list"))
        }

        fn visit_map<A: de::MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
            while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
            Ok(Element::Other("an object"))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn filter(id: &str, config: Value, data_type: &DataType) -> Filter {
        let map = config.as_object().unwrap();
        numcodecs(id, &Config { map: Some(map) }, data_type)
            .unwrap()
            .unwrap()
    }

    fn le<T: Copy>(values: &[T], to_bytes: impl Fn(T) -> Vec<u8>) -> Bytes {
        Bytes::from(
            values
                .iter()
                .flat_map(|v| to_bytes(*v))
                .collect::<Vec<u8>>(),
        )
    }

    #[test]
    fn delta_sums_and_wraps_in_the_decoded_type() {
        let f = filter(
            "delta",
            json!({"dtype": "<i2", "astype": "|i1"}),
            &DataType::Int16,
        );
        let input = le(&[100i8, 100, 100, -128], |v| v.to_le_bytes().to_vec());
        let out = f.decode(&input, 8).unwrap();
        let got: Vec<i16> = out
            .chunks(2)
            .map(|c| i16::from_le_bytes([c[0], c[1]]))
            .collect();
        assert_eq!(got, [100, 200, 300, 172]);
        let wraps = filter("delta", json!({"dtype": "|u1"}), &DataType::UInt8);
        assert_eq!(
            &wraps.decode(&Bytes::from_static(&[200, 100]), 2).unwrap()[..],
            &[200, 44]
        );
        assert!(matches!(f.decode(&input, 7), Err(ChunkError::TooLarge(_))));
        assert!(matches!(
            filter("delta", json!({"dtype": "<i4"}), &DataType::Int32)
                .decode(&Bytes::from_static(&[1, 2, 3]), 100),
            Err(ChunkError::Invalid(_))
        ));
    }

    #[test]
    fn fixedscaleoffset_and_casts() {
        // numcodecs.FixedScaleOffset(offset=10, scale=100, dtype='<f8', astype='<i4')
        let f = filter(
            "fixedscaleoffset",
            json!({"offset": 10, "scale": 100, "dtype": "<f8", "astype": "<i4"}),
            &DataType::Float64,
        );
        let out = f
            .decode(&le(&[-1000i32, 25], |v| v.to_le_bytes().to_vec()), 16)
            .unwrap();
        let got: Vec<f64> = out
            .chunks(8)
            .map(|c| f64::from_le_bytes(c.try_into().unwrap()))
            .collect();
        assert_eq!(got, [0.0, 10.25]);
        let cast = filter(
            "astype",
            json!({"encode_dtype": "<f4", "decode_dtype": "<i8"}),
            &DataType::Int64,
        );
        let out = cast
            .decode(&le(&[-2.7f32, 3.9], |v| v.to_le_bytes().to_vec()), 16)
            .unwrap();
        let got: Vec<i64> = out
            .chunks(8)
            .map(|c| i64::from_le_bytes(c.try_into().unwrap()))
            .collect();
        assert_eq!(got, [-2, 3]);
        let big = filter(
            "astype",
            json!({"encode_dtype": ">i2", "decode_dtype": ">i4"}),
            &DataType::Int32,
        );
        assert_eq!(
            &big.decode(&Bytes::from_static(&[0xff, 0xfe]), 4).unwrap()[..],
            &[0xff, 0xff, 0xff, 0xfe]
        );
    }

    #[test]
    fn packbits_categorize_json2() {
        let f = filter("packbits", json!({}), &DataType::Bool);
        // 10 booleans 1,0,0,1,0,0,1,0,0,1 → pad 6, 0b10010010, 0b01000000
        let out = f
            .decode(&Bytes::from_static(&[6, 0b1001_0010, 0b0100_0000]), 10)
            .unwrap();
        assert_eq!(&out[..], &[1, 0, 0, 1, 0, 0, 1, 0, 0, 1]);
        assert!(f.decode(&Bytes::from_static(&[8, 0]), 10).is_err());
        assert!(f.decode(&Bytes::new(), 10).is_err());

        let c = filter(
            "categorize",
            json!({"labels": ["a", "bé"], "dtype": "|O", "astype": "|u1"}),
            &DataType::String,
        );
        let out = c
            .decode(&Bytes::from_static(&[2, 0, 1, 9]), 1 << 20)
            .unwrap();
        assert_eq!(
            &out[..],
            b"\x04\0\0\0\x03\0\0\0b\xc3\xa9\0\0\0\0\x01\0\0\0a\0\0\0\0"
        );
        let j = filter("json2", json!({"encoding": "utf-8"}), &DataType::String);
        let out = j
            .decode(&Bytes::from_static(br#"["x", null, "|O", [2]]"#), 1 << 20)
            .unwrap();
        assert_eq!(&out[..], b"\x02\0\0\0\x01\0\0\0x\0\0\0\0");
        let out = j
            .decode(&Bytes::from_static(br#"[0, "|O", [1]]"#), 100)
            .unwrap();
        assert_eq!(&out[..], b"\x01\0\0\0\x01\0\0\x000");
        assert!(j
            .decode(&Bytes::from_static(br#"[[1], "|O", [1]]"#), 100)
            .is_err());
        assert!(j.decode(&Bytes::from_static(b"{"), 100).is_err());
    }

    /// json2 is parsed as a stream that stops at the chunk's element count: a list of a
    /// thousand items in a chunk of two is refused at the third, where it used to be parsed
    /// whole into a `Value` and counted after.
    #[test]
    fn json2_stops_at_the_chunk_elements() {
        let j = filter("json2", json!({"encoding": "utf-8"}), &DataType::String);
        let doc = Bytes::from(format!(r#"[{} "|O", [2]]"#, r#""x","#.repeat(1000)));
        let e = j.decode_elements(&doc, 1 << 20, Some(2)).unwrap_err();
        assert!(
            matches!(&e, ChunkError::TooLarge(m) if m.contains("json2") && m.contains("2 elements")),
            "{e}"
        );
        // Read whole (and counted by the vlen decoder after it) when no count is given.
        assert_eq!(
            &j.decode(&doc, 1 << 20).unwrap()[..4],
            &1000u32.to_le_bytes()
        );
        // Exactly the count: escapes, numbers and booleans as their text, a list and an
        // object where the dtype and shape are.
        let out = j
            .decode_elements(
                &Bytes::from_static(br#"["a\"b", 1.5, -2, true, {"d": 1}, [4]]"#),
                100,
                Some(4),
            )
            .unwrap();
        assert_eq!(
            &out[..],
            b"\x04\0\0\0\x03\0\0\0a\"b\x03\0\0\x001.5\x02\0\0\0-2\x04\0\0\0true"
        );
        // An item that is a list is named; bytes after the list are an error.
        let e = j
            .decode_elements(
                &Bytes::from_static(br#"["a", [[1]], "|O", [2]]"#),
                100,
                Some(2),
            )
            .unwrap_err();
        assert!(e.to_string().contains("item 1 is a list"), "{e}");
        assert!(j
            .decode_elements(&Bytes::from_static(br#"["a", "|O", [1]] x"#), 100, Some(1))
            .is_err());
        // The output limit still holds.
        assert!(matches!(
            j.decode_elements(&Bytes::from_static(br#"["abcdef", "|O", [1]]"#), 8, Some(1)),
            Err(ChunkError::TooLarge(_))
        ));
    }
}

//! The bytes of a chunk's elements: numcodecs `vlen-utf8`/`vlen-bytes`, `zarrow.arrow_vlen`,
//! and little-endian fixed-size elements. Also used by benchmarks and tests to build chunks.

use arrow_array::cast::AsArray;
use arrow_array::Array;
use arrow_schema::DataType as ArrowType;

use super::zarr_type;
use crate::{Error, Result};

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

//! Fixed-size elements (`bytes` codec) → Arrow arrays.
//!
//! Little-endian numeric data whose buffer is suitably aligned becomes an Arrow buffer without a
//! copy; big-endian data is byte-swapped into a new buffer; misaligned data is copied once.
//! Fixed-width strings are transcoded (UTF-32 → UTF-8) or trimmed (trailing NULs, as numpy).

use std::sync::Arc;

use arrow_array::types::{
    DurationMicrosecondType, DurationMillisecondType, DurationNanosecondType, DurationSecondType,
    Float16Type, Float32Type, Float64Type, Int16Type, Int32Type, Int64Type, Int8Type,
    TimestampMicrosecondType, TimestampMillisecondType, TimestampNanosecondType,
    TimestampSecondType, UInt16Type, UInt32Type, UInt64Type, UInt8Type,
};
use arrow_array::Array;
use arrow_array::{
    ArrayRef, ArrowPrimitiveType, BooleanArray, FixedSizeBinaryArray, OffsetSizeTrait,
    PrimitiveArray, StructArray,
};
use arrow_buffer::{ArrowNativeType, BooleanBuffer, Buffer, NullBuffer, ScalarBuffer};
use arrow_schema::{DataType as ArrowType, Field, Fields, TimeUnit};
use bytes::Bytes;

use super::vlen::{self, VlenTarget};
use crate::data_type::{DataType, Endian, LowFloat, StructField};
use crate::error::ChunkError;
use crate::options::StringType;

/// Bring `buf` to little-endian: a no-op for little-endian or one-byte units, else a swapped copy.
fn to_little_endian(buf: Bytes, endian: Option<Endian>, unit: usize) -> Bytes {
    if endian != Some(Endian::Big) || unit <= 1 {
        return buf;
    }
    let mut out = buf.to_vec();
    for c in out.chunks_exact_mut(unit) {
        c.reverse();
    }
    Bytes::from(out)
}

fn primitive<T: ArrowPrimitiveType>(buf: &Bytes, n: usize) -> PrimitiveArray<T> {
    let values = vlen::scalar_buffer::<T::Native>(buf);
    debug_assert_eq!(values.len(), n);
    PrimitiveArray::<T>::new(values, None)
}

/// Decode `n` fixed-size elements of `data_type` stored in `endian` byte order.
pub(crate) fn decode_fixed(
    buf: Bytes,
    data_type: &DataType,
    endian: Option<Endian>,
    n: usize,
    strings: StringType,
) -> Result<ArrayRef, ChunkError> {
    let size = data_type
        .fixed_size()
        .ok_or_else(|| ChunkError::Invalid(format!("{} is not fixed-size", data_type.name())))?;
    let expected = size
        .checked_mul(n)
        .ok_or_else(|| ChunkError::TooLarge("chunk size overflows".into()))?;
    if buf.len() != expected {
        return Err(ChunkError::Size {
            expected: expected as u64,
            found: buf.len() as u64,
        });
    }
    let buf = to_little_endian(buf, endian, data_type.swap_unit());
    let array: ArrayRef = match data_type {
        DataType::Bool => {
            let bits = BooleanBuffer::from_iter(buf.iter().map(|b| *b != 0));
            Arc::new(BooleanArray::new(bits, None))
        }
        DataType::Int8 => Arc::new(primitive::<Int8Type>(&buf, n)),
        DataType::Int16 => Arc::new(primitive::<Int16Type>(&buf, n)),
        DataType::Int32 => Arc::new(primitive::<Int32Type>(&buf, n)),
        DataType::Int64 => Arc::new(primitive::<Int64Type>(&buf, n)),
        DataType::UInt8 => Arc::new(primitive::<UInt8Type>(&buf, n)),
        DataType::UInt16 => Arc::new(primitive::<UInt16Type>(&buf, n)),
        DataType::UInt32 => Arc::new(primitive::<UInt32Type>(&buf, n)),
        DataType::UInt64 => Arc::new(primitive::<UInt64Type>(&buf, n)),
        DataType::Float16 => Arc::new(primitive::<Float16Type>(&buf, n)),
        DataType::Float32 => Arc::new(primitive::<Float32Type>(&buf, n)),
        DataType::Float64 => Arc::new(primitive::<Float64Type>(&buf, n)),
        DataType::Complex64 => complex::<Float32Type>(&buf, n),
        DataType::Complex128 => complex::<Float64Type>(&buf, n),
        DataType::DateTime64 { unit, scale_factor }
        | DataType::TimeDelta64 { unit, scale_factor } => {
            let is_ts = matches!(data_type, DataType::DateTime64 { .. });
            let (arrow_unit, factor) = unit.arrow_unit();
            let factor = factor
                .checked_mul(*scale_factor)
                .ok_or_else(|| ChunkError::Invalid("time scale overflows".into()))?;
            time(&buf, n, factor, arrow_unit, is_ts)?
        }
        DataType::FixedUtf32 { length_bytes } => utf32(&buf, *length_bytes, n, strings)?,
        DataType::NullTerminatedBytes { length_bytes } => {
            let items: Vec<(usize, usize)> = buf
                .chunks_exact(*length_bytes)
                .enumerate()
                .map(|(i, c)| {
                    let len = c.iter().rposition(|b| *b != 0).map_or(0, |p| p + 1);
                    (i * length_bytes, len)
                })
                .collect();
            vlen::from_items(
                Buffer::from(buf),
                &items,
                VlenTarget {
                    utf8: false,
                    repr: strings,
                    // Items of a fixed-size type: their size was checked with the data type.
                    max_item: usize::MAX,
                },
            )?
        }
        DataType::RawBytes { length_bytes } => {
            let width = i32::try_from(*length_bytes)
                .map_err(|_| ChunkError::TooLarge("raw_bytes element too large".into()))?;
            Arc::new(
                FixedSizeBinaryArray::try_new(width, Buffer::from(buf), None)
                    .map_err(|e| ChunkError::Invalid(e.to_string()))?,
            )
        }
        DataType::Struct(fields) => structured(&buf, fields, endian, n, strings)?,
        DataType::LowFloat(f) => low_float(&buf, *f),
        DataType::SubByteInt(i) => {
            let values: Vec<u8> = buf.iter().map(|b| i.widen(*b)).collect();
            if i.signed {
                let values: Vec<i8> = values.into_iter().map(|b| b as i8).collect();
                Arc::new(PrimitiveArray::<Int8Type>::from(values))
            } else {
                Arc::new(PrimitiveArray::<UInt8Type>::from(values))
            }
        }
        DataType::String | DataType::Bytes | DataType::Optional(_) => {
            return Err(ChunkError::Invalid(format!(
                "{} data with the bytes codec",
                data_type.name()
            )))
        }
    };
    Ok(array)
}

/// Low-precision floats (little-endian by now), widened exactly: one-byte codes through a
/// table of their 256 values, bfloat16 as the upper half of a float32.
fn low_float(buf: &Bytes, f: LowFloat) -> ArrayRef {
    if f == LowFloat::BFloat16 {
        let values: Vec<f32> = buf
            .chunks_exact(2)
            .map(|c| f32::from_bits(u32::from(u16::from_le_bytes([c[0], c[1]])) << 16))
            .collect();
        return Arc::new(PrimitiveArray::<Float32Type>::from(values));
    }
    if f.widens_to_f32() {
        let table = f.f32_table();
        let values: Vec<f32> = buf.iter().map(|b| table[usize::from(*b)]).collect();
        Arc::new(PrimitiveArray::<Float32Type>::from(values))
    } else {
        let table = f.f16_table();
        let values: Vec<half::f16> = buf.iter().map(|b| table[usize::from(*b)]).collect();
        Arc::new(PrimitiveArray::<Float16Type>::from(values))
    }
}

/// A struct element's fields are interleaved (`a b a b …`): each field is gathered into a
/// buffer of its own (one copy; Arrow keeps fields apart) and decoded as an array of its type,
/// in its own byte order.
fn structured(
    buf: &Bytes,
    fields: &[StructField],
    endian: Option<Endian>,
    n: usize,
    strings: StringType,
) -> Result<ArrayRef, ChunkError> {
    let size: usize = fields
        .iter()
        .map(|f| f.data_type.fixed_size().unwrap_or(0))
        .sum();
    let mut offset = 0;
    let mut arrays = Vec::with_capacity(fields.len());
    let mut arrow_fields = Vec::with_capacity(fields.len());
    for f in fields {
        let width = f.data_type.fixed_size().unwrap_or(0);
        let mut gathered = Vec::with_capacity(width * n);
        if width > 0 && size > 0 {
            for element in buf.chunks_exact(size) {
                gathered.extend_from_slice(&element[offset..offset + width]);
            }
        }
        offset += width;
        let array = decode_fixed(
            Bytes::from(gathered),
            &f.data_type,
            f.endian.or(endian),
            n,
            strings,
        )?;
        let nullable = f.data_type.has_missing_marker();
        arrow_fields.push(Field::new(&f.name, array.data_type().clone(), nullable));
        arrays.push(array);
    }
    let array = StructArray::try_new(Fields::from(arrow_fields), arrays, None)
        .map_err(|e| ChunkError::Invalid(e.to_string()))?;
    Ok(Arc::new(array))
}

fn complex<T: ArrowPrimitiveType>(buf: &Bytes, n: usize) -> ArrayRef {
    let values = vlen::scalar_buffer::<T::Native>(buf);
    let mut re = Vec::with_capacity(n);
    let mut im = Vec::with_capacity(n);
    for pair in values.chunks_exact(2) {
        re.push(pair[0]);
        im.push(pair[1]);
    }
    let part = T::DATA_TYPE;
    let fields = vec![
        Arc::new(arrow_schema::Field::new("real", part.clone(), false)),
        Arc::new(arrow_schema::Field::new("imag", part, false)),
    ];
    Arc::new(StructArray::new(
        fields.into(),
        vec![
            Arc::new(PrimitiveArray::<T>::new(ScalarBuffer::from(re), None)) as ArrayRef,
            Arc::new(PrimitiveArray::<T>::new(ScalarBuffer::from(im), None)) as ArrayRef,
        ],
        None,
    ))
}

/// int64 counts → Timestamp/Duration, NaT (`i64::MIN`) → null, counts scaled by `factor`.
fn time(
    buf: &Bytes,
    n: usize,
    factor: i64,
    unit: TimeUnit,
    is_ts: bool,
) -> Result<ArrayRef, ChunkError> {
    let raw = vlen::scalar_buffer::<i64>(buf);
    debug_assert_eq!(raw.len(), n);
    let has_nat = raw.contains(&i64::MIN);
    let nulls = has_nat.then(|| NullBuffer::from_iter(raw.iter().map(|v| *v != i64::MIN)));
    let values = if factor == 1 {
        raw
    } else {
        raw.iter()
            .map(|v| {
                if *v == i64::MIN {
                    Ok(0)
                } else {
                    v.checked_mul(factor).ok_or_else(|| {
                        ChunkError::Invalid(format!(
                            "time value {v} overflows when scaled to {unit:?}"
                        ))
                    })
                }
            })
            .collect::<Result<Vec<i64>, ChunkError>>()?
            .into()
    };
    Ok(match (is_ts, unit) {
        (true, TimeUnit::Second) => {
            Arc::new(PrimitiveArray::<TimestampSecondType>::new(values, nulls))
        }
        (true, TimeUnit::Millisecond) => Arc::new(PrimitiveArray::<TimestampMillisecondType>::new(
            values, nulls,
        )),
        (true, TimeUnit::Microsecond) => Arc::new(PrimitiveArray::<TimestampMicrosecondType>::new(
            values, nulls,
        )),
        (true, TimeUnit::Nanosecond) => Arc::new(PrimitiveArray::<TimestampNanosecondType>::new(
            values, nulls,
        )),
        (false, TimeUnit::Second) => {
            Arc::new(PrimitiveArray::<DurationSecondType>::new(values, nulls))
        }
        (false, TimeUnit::Millisecond) => Arc::new(PrimitiveArray::<DurationMillisecondType>::new(
            values, nulls,
        )),
        (false, TimeUnit::Microsecond) => Arc::new(PrimitiveArray::<DurationMicrosecondType>::new(
            values, nulls,
        )),
        (false, TimeUnit::Nanosecond) => {
            Arc::new(PrimitiveArray::<DurationNanosecondType>::new(values, nulls))
        }
    })
}

/// UTF-32LE elements → UTF-8, trailing NULs stripped (numpy semantics).
fn utf32(
    buf: &Bytes,
    length_bytes: usize,
    n: usize,
    strings: StringType,
) -> Result<ArrayRef, ChunkError> {
    let target = VlenTarget {
        utf8: true,
        repr: strings,
        // Items of a fixed-size type: their size was checked with the data type.
        max_item: usize::MAX,
    };
    match strings {
        StringType::Utf8 => {
            let (offsets, data) = utf32_to_utf8::<i32>(buf, length_bytes, n)?;
            // SAFETY: `utf32_to_utf8` starts the offsets at 0 and pushes the output's length
            // after each element it writes, and checked that length fits i32.
            let valid =
                unsafe { vlen::ValidOffsets::built(offsets.into(), Buffer::from_vec(data)) };
            vlen::from_offsets(valid, target)
        }
        StringType::LargeUtf8 => {
            let (offsets, data) = utf32_to_utf8::<i64>(buf, length_bytes, n)?;
            // SAFETY: as above, in i64.
            let valid =
                unsafe { vlen::ValidOffsets::built(offsets.into(), Buffer::from_vec(data)) };
            vlen::from_offsets(valid, target)
        }
        StringType::View => {
            let (offsets, data) = utf32_to_utf8::<i64>(buf, length_bytes, n)?;
            let items: Vec<(usize, usize)> = offsets
                .windows(2)
                .map(|w| (w[0].as_usize(), w[1].as_usize() - w[0].as_usize()))
                .collect();
            vlen::from_items(Buffer::from_vec(data), &items, target)
        }
    }
}

/// The UTF-8 offsets and data of `n` UTF-32LE elements of `length_bytes` each, in one pass:
/// trailing NUL code units dropped, ASCII code units copied as bytes, others encoded through
/// `char` (which rejects surrogates and values past U+10FFFF: an error naming the element).
fn utf32_to_utf8<O: OffsetSizeTrait>(
    buf: &[u8],
    length_bytes: usize,
    n: usize,
) -> Result<(Vec<O>, Vec<u8>), ChunkError> {
    let mut offsets = Vec::with_capacity(n + 1);
    offsets.push(O::usize_as(0));
    let mut data: Vec<u8> = Vec::with_capacity(buf.len() / 4);
    if length_bytes == 0 {
        offsets.resize(n + 1, O::usize_as(0));
        return Ok((offsets, data));
    }
    for (i, elem) in buf.chunks_exact(length_bytes).enumerate() {
        let units = elem
            .chunks_exact(4)
            .rposition(|u| u != [0, 0, 0, 0])
            .map_or(0, |last| last + 1);
        for unit in elem[..4 * units].chunks_exact(4) {
            let u = u32::from_le_bytes([unit[0], unit[1], unit[2], unit[3]]);
            if u < 0x80 {
                data.push(u as u8);
            } else {
                let c = char::from_u32(u).ok_or(ChunkError::Utf32 {
                    element: i as u64,
                    code_point: u,
                })?;
                data.extend_from_slice(c.encode_utf8(&mut [0; 4]).as_bytes());
            }
        }
        offsets.push(O::usize_as(data.len()));
    }
    // Once, at the end: offsets past the type's range are never handed out.
    vlen::check_data_size::<O>(data.len())?;
    Ok((offsets, data))
}

/// The Arrow type `decode_fixed` produces (for checks in tests).
#[allow(dead_code)]
pub(crate) fn output_type(data_type: &DataType, strings: StringType) -> ArrowType {
    data_type.arrow_type(strings, strings.binary())
}

//! Chunks of the `optional` codec → Arrow arrays whose validity is the chunk's mask.
//!
//! ```text
//!  header ─▶ mask bytes ──mask_codecs──▶ validity (packbits: the decoded bytes are the bitmap,
//!        │                                         used as Arrow's validity without a copy)
//!        └▶ data bytes ──data_codecs──▶ the valid elements only ─▶ spread to their positions
//! ```
//!
//! Spreading the valid elements: a chunk whose elements are all valid is the data chunk as it
//! decodes (no copy); none valid is a NULL array; fixed-size elements are copied run by run of
//! valid positions (one `memcpy` a run, no branch an element) before the `bytes` decode;
//! variable-length ones are gathered by one `take`.

use arrow_array::{make_array, new_null_array, Array, ArrayRef, UInt32Array};
use arrow_buffer::{BooleanBuffer, Buffer, NullBuffer};
use bytes::Bytes;

use super::fixed::decode_fixed;
use crate::codec::optional::Optional;
use crate::codec::packbits::Padding;
use crate::codec::{ArrayToBytes, CodecChain};
use crate::data_type::{DataType, Endian};
use crate::error::ChunkError;
use crate::metrics::ScanMetrics;
use crate::options::ZarrReadOptions;

/// Decode one `optional` chunk of `n` elements of `data_type` (an optional type).
pub(super) fn decode_optional(
    o: &Optional,
    buf: Bytes,
    n: usize,
    data_type: &DataType,
    opts: &ZarrReadOptions,
    metrics: &ScanMetrics,
) -> Result<ArrayRef, ChunkError> {
    let DataType::Optional(inner) = data_type else {
        return Err(ChunkError::Invalid(format!(
            "the optional codec on data type {}",
            data_type.name()
        )));
    };
    let (mask, data) = split(buf)?;
    let validity = decode_mask(&o.mask_codecs, mask, n, metrics)?;
    let valid = validity.count_set_bits();
    if valid == 0 {
        let arrow = inner.arrow_type(opts.string_type, opts.binary_type());
        return Ok(new_null_array(&arrow, n));
    }
    match (&o.data_codecs.array_to_bytes, inner.fixed_size()) {
        (ArrayToBytes::Bytes { endian }, Some(size)) => {
            let max = size.saturating_mul(valid);
            let sparse = super::decode_chunk_bytes(
                &o.data_codecs,
                data,
                max,
                usize::MAX,
                Some(valid),
                metrics,
            )?;
            let dense = spread(sparse, &validity, size)?;
            let array = decode_fixed(dense, inner, *endian, n, opts.string_type)?;
            with_validity(array, validity)
        }
        _ => {
            let sparse =
                super::decode_chunk_counted(&o.data_codecs, inner, valid, data, opts, metrics)?;
            if valid == n {
                return Ok(sparse);
            }
            gather(&sparse, validity)
        }
    }
}

/// The header's two lengths, checked against the chunk: the mask's bytes and the data's.
fn split(buf: Bytes) -> Result<(Bytes, Bytes), ChunkError> {
    let length = |at: usize| -> Result<usize, ChunkError> {
        let bytes: [u8; 8] = buf
            .get(at..at + 8)
            .and_then(|b| b.try_into().ok())
            .ok_or_else(|| ChunkError::Truncated("the optional codec's 16-byte header".into()))?;
        usize::try_from(u64::from_le_bytes(bytes))
            .map_err(|_| ChunkError::Invalid("an optional chunk length past memory".into()))
    };
    let (mask_len, data_len) = (length(0)?, length(8)?);
    let total = mask_len
        .checked_add(data_len)
        .and_then(|l| l.checked_add(16));
    if total != Some(buf.len()) {
        return Err(ChunkError::Invalid(format!(
            "optional chunk of {} bytes, its header says 16 + {mask_len} (mask) + {data_len} (data)",
            buf.len()
        )));
    }
    Ok((buf.slice(16..16 + mask_len), buf.slice(16 + mask_len..)))
}

/// The validity of `n` elements from the mask's chain. One bit an element stored from bit 0
/// by `packbits` is Arrow's bitmap already: the decoded bytes become the buffer.
fn decode_mask(
    chain: &CodecChain,
    mask: Bytes,
    n: usize,
    metrics: &ScanMetrics,
) -> Result<BooleanBuffer, ChunkError> {
    let max = match &chain.array_to_bytes {
        ArrayToBytes::PackBits(p) => p.stored_bound(n),
        _ => n,
    };
    let buf = super::decode_chunk_bytes(chain, mask, max, usize::MAX, Some(n), metrics)?;
    let bools = match &chain.array_to_bytes {
        ArrayToBytes::PackBits(p) if p.first_bit == 0 && p.last_bit == 0 => {
            return bitmap(p.padding, buf, n)
        }
        ArrayToBytes::PackBits(p) => Bytes::from(p.decode(&buf, n)?),
        _ => buf,
    };
    let array = decode_fixed(
        bools,
        &DataType::Bool,
        Some(Endian::Little),
        n,
        Default::default(),
    )?;
    Ok(array
        .as_any()
        .downcast_ref::<arrow_array::BooleanArray>()
        .map(|b| b.values().clone())
        .unwrap_or_else(|| BooleanBuffer::new_unset(n)))
}

/// A mask `packbits` stored one bit an element: the bitmap of `n` bits as it lies in `buf`
/// (after the padding byte, if first), its padding count checked as `packbits` does.
fn bitmap(padding: Padding, buf: Bytes, n: usize) -> Result<BooleanBuffer, ChunkError> {
    let len = n.div_ceil(8);
    let pad = (len * 8 - n) as u8;
    let (at, count) = match padding {
        Padding::None => (0, None),
        Padding::FirstByte => (1, buf.first()),
        Padding::LastByte => (0, buf.last()),
    };
    let extra = usize::from(padding != Padding::None);
    if buf.len() != len + extra || count.is_some_and(|c| *c != pad) {
        return Err(ChunkError::codec(
            "packbits",
            format!(
                "{} bytes do not hold a mask of {n} bits (padding {padding:?}, {pad} bits)",
                buf.len()
            ),
        ));
    }
    Ok(BooleanBuffer::new(
        Buffer::from(buf.slice(at..at + len)),
        0,
        n,
    ))
}

/// The valid elements (`size` bytes each, in order) copied to their positions in a chunk of
/// `validity.len()` elements, one copy a run of valid positions; missing positions zero.
fn spread(sparse: Bytes, validity: &BooleanBuffer, size: usize) -> Result<Bytes, ChunkError> {
    let expected = validity.count_set_bits().saturating_mul(size);
    if sparse.len() != expected {
        return Err(ChunkError::Size {
            expected: expected as u64,
            found: sparse.len() as u64,
        });
    }
    if sparse.len() == validity.len().saturating_mul(size) {
        return Ok(sparse);
    }
    let mut dense = vec![0u8; validity.len() * size];
    let mut at = 0;
    for (start, end) in validity.set_slices() {
        let len = (end - start) * size;
        dense[start * size..end * size].copy_from_slice(&sparse[at..at + len]);
        at += len;
    }
    Ok(Bytes::from(dense))
}

/// `array` with `validity` as its nulls (and the nulls it had: NaT stays NULL).
fn with_validity(array: ArrayRef, validity: BooleanBuffer) -> Result<ArrayRef, ChunkError> {
    let mask = NullBuffer::new(validity);
    let data = array.to_data();
    let nulls = NullBuffer::union(Some(&mask), data.nulls());
    let data = data
        .into_builder()
        .nulls(nulls)
        .build()
        .map_err(|e| ChunkError::Invalid(e.to_string()))?;
    Ok(make_array(data))
}

/// Variable-length valid elements gathered to their positions by one `take`: position `i`
/// takes the element counted by the valid positions before it, NULL where it is missing.
fn gather(sparse: &ArrayRef, validity: BooleanBuffer) -> Result<ArrayRef, ChunkError> {
    let last = (sparse.len() as u32).saturating_sub(1);
    let mut count = 0u32;
    let positions: Vec<u32> = validity
        .iter()
        .map(|valid| {
            let at = count.min(last);
            count += u32::from(valid);
            at
        })
        .collect();
    let indices = UInt32Array::new(positions.into(), Some(NullBuffer::new(validity)));
    arrow_select::take::take(sparse.as_ref(), &indices, None)
        .map_err(|e| ChunkError::Invalid(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::cast::AsArray;
    use arrow_array::types::Int16Type;

    fn bits(valid: &[bool]) -> BooleanBuffer {
        BooleanBuffer::from(valid.to_vec())
    }

    #[test]
    fn runs_of_valid_elements_are_spread_to_their_positions() {
        let validity = bits(&[false, true, true, false, false, true]);
        let sparse = Bytes::from(vec![1, 0, 2, 0, 3, 0]);
        let dense = spread(sparse, &validity, 2).unwrap();
        assert_eq!(&dense[..], &[0, 0, 1, 0, 2, 0, 0, 0, 0, 0, 3, 0]);
        let array = decode_fixed(dense, &DataType::Int16, None, 6, Default::default()).unwrap();
        let array = with_validity(array, validity).unwrap();
        let got: Vec<Option<i16>> = array.as_primitive::<Int16Type>().iter().collect();
        assert_eq!(got, [None, Some(1), Some(2), None, None, Some(3)]);
        // fewer valid bytes than the mask says: an error, not a panic
        let short = spread(Bytes::from(vec![1, 0]), &bits(&[true, true]), 2);
        assert!(matches!(short, Err(ChunkError::Size { .. })));
    }

    /// An optional chunk of `n` elements: the header, `mask`, then `data`.
    fn chunk(mask: &[u8], data: &[u8]) -> Bytes {
        let mut out = (mask.len() as u64).to_le_bytes().to_vec();
        out.extend_from_slice(&(data.len() as u64).to_le_bytes());
        out.extend_from_slice(mask);
        out.extend_from_slice(data);
        Bytes::from(out)
    }

    fn codec(mask: serde_json::Value, data: serde_json::Value, inner: DataType) -> Optional {
        let dt = DataType::Optional(Box::new(inner));
        let codecs = [serde_json::json!({"name": "zarrs.optional",
            "configuration": {"mask_codecs": mask, "data_codecs": data}})];
        match crate::codec::parse_v3_chain(&codecs, &dt, 1)
            .unwrap()
            .array_to_bytes
        {
            ArrayToBytes::Optional(o) => *o,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_packbits_mask_is_the_validity_buffer_itself() {
        let o = codec(
            serde_json::json!([{"name": "packbits", "configuration": {"padding_encoding": "first_byte"}}]),
            serde_json::json!([{"name": "bytes"}]),
            DataType::UInt8,
        );
        let dt = DataType::Optional(Box::new(DataType::UInt8));
        // 10 elements: valid 0, 2, 3, 9 (bits 0b0000_1101, 0b10); 6 padding bits
        let stored = chunk(&[6, 0b0000_1101, 0b10], &[10, 12, 13, 19]);
        let opts = ZarrReadOptions::default();
        let array =
            decode_optional(&o, stored.clone(), 10, &dt, &opts, &ScanMetrics::default()).unwrap();
        let got: Vec<Option<u8>> = array
            .as_primitive::<arrow_array::types::UInt8Type>()
            .iter()
            .collect();
        let want = [0, 2, 3, 9].map(|i| (i, i as u8 + 10));
        for (i, v) in got.iter().enumerate() {
            let expected = want.iter().find(|(at, _)| *at == i).map(|(_, v)| *v);
            assert_eq!(*v, expected, "element {i}");
        }
        let nulls = array.nulls().unwrap().buffer();
        let start = stored.as_ptr() as usize;
        assert_eq!(
            nulls.as_ptr() as usize,
            start + 17,
            "the mask bytes, not a copy"
        );
        // a wrong padding count is an error
        let bad = chunk(&[5, 0b0000_1101, 0b10], &[10, 12, 13, 19]);
        assert!(decode_optional(&o, bad, 10, &dt, &opts, &ScanMetrics::default()).is_err());
        // all valid: the data chunk as it decodes, no NULLs
        let all = chunk(&[0, 0xff], &[1, 2, 3, 4, 5, 6, 7, 8]);
        let array = decode_optional(&o, all, 8, &dt, &opts, &ScanMetrics::default()).unwrap();
        assert_eq!((array.len(), array.null_count()), (8, 0));
        // none valid: NULLs, whatever the data chain would say of no bytes
        let none = chunk(&[0, 0], &[]);
        let array = decode_optional(&o, none, 8, &dt, &opts, &ScanMetrics::default()).unwrap();
        assert_eq!(array.null_count(), 8);
    }

    #[test]
    fn strings_are_gathered_to_their_positions() {
        let o = codec(
            serde_json::json!([{"name": "bytes"}]),
            serde_json::json!([{"name": "vlen-utf8"}]),
            DataType::String,
        );
        let dt = DataType::Optional(Box::new(DataType::String));
        // a byte-per-element mask: missing, "ab", missing, ""
        let mut data = 2u32.to_le_bytes().to_vec();
        data.extend_from_slice(&2u32.to_le_bytes());
        data.extend_from_slice(b"ab");
        data.extend_from_slice(&0u32.to_le_bytes());
        let stored = chunk(&[0, 1, 0, 1], &data);
        let opts = ZarrReadOptions::default();
        let array = decode_optional(&o, stored, 4, &dt, &opts, &ScanMetrics::default()).unwrap();
        let got: Vec<Option<&str>> = array.as_string::<i32>().iter().collect();
        assert_eq!(got, [None, Some("ab"), None, Some("")]);
    }

    #[test]
    fn headers_that_do_not_add_up_are_errors() {
        assert!(split(Bytes::from_static(&[1, 2, 3])).is_err());
        let mut buf = vec![0u8; 16];
        buf[0] = 4; // a mask of 4 bytes that is not there
        assert!(split(Bytes::from(buf)).is_err());
        let mut huge = vec![0xff; 16];
        huge.extend_from_slice(&[0; 4]);
        assert!(split(Bytes::from(huge)).is_err());
    }
}

//! Chunk bytes → Arrow arrays.
//!
//! ```text
//! stored chunk ─▶ bytes→bytes codecs, last first ─▶ array→bytes decode ─▶ ArrayRef of the whole
//! (Bytes)         (codec::compression)              fixed.rs / vlen.rs    chunk, encoded order
//!                                                                           │
//!                  ChunkSelection: in-bounds elements in C order ◀──────────┘
//!                  (a zero-copy slice for C-order prefixes, else one `take`)
//! ```
//!
//! Missing chunks never reach the decoder: [`fill_array`] builds the fill value directly.

pub(crate) mod fixed;
mod optional;
pub(crate) mod rows;
pub(crate) mod vlen;

pub use rows::ChunkRows;

use arrow_array::{Array, ArrayRef, UInt32Array};
use bytes::Bytes;

use crate::codec::{ArrayToBytes, CodecChain, IndexLocation, ZarrsVlen};
use crate::data_type::{DataType, Endian, FillValue};
use crate::error::ChunkError;
use crate::metrics::ScanMetrics;
use crate::options::ZarrReadOptions;
use vlen::VlenTarget;

/// The limit of each bytes-to-bytes step's output, in the chain's (encode) order: `max` for
/// the last to decode (the first listed), then carried back through each step's input bound
/// (checksums add their bytes, filters that change the element type scale it — `json2`'s
/// text up to six times its strings), none past `cap`.
pub(crate) fn step_bounds(chain: &CodecChain, max: usize, cap: usize) -> Vec<usize> {
    let mut bounds = Vec::with_capacity(chain.bytes_to_bytes.len());
    let mut bound = max.min(cap);
    for codec in &chain.bytes_to_bytes {
        bounds.push(bound);
        bound = codec.input_bound(bound).min(cap);
    }
    bounds
}

/// Run the bytes-to-bytes codecs of `chain` in decode order, each bounded by its step of
/// `max` (see [`step_bounds`]), their time counted into `metrics`.
pub(crate) fn decode_bytes(
    chain: &CodecChain,
    buf: Bytes,
    max: usize,
    metrics: &ScanMetrics,
) -> Result<Bytes, ChunkError> {
    decode_chunk_bytes(chain, buf, max, usize::MAX, None, metrics)
}

/// [`decode_bytes`] for a chunk of `elements` elements, when known (the object codecs,
/// `json2`, stop at a list holding more), no step producing more than `cap` bytes.
pub(crate) fn decode_chunk_bytes(
    chain: &CodecChain,
    mut buf: Bytes,
    max: usize,
    cap: usize,
    elements: Option<usize>,
    metrics: &ScanMetrics,
) -> Result<Bytes, ChunkError> {
    for (codec, bound) in chain
        .bytes_to_bytes
        .iter()
        .zip(step_bounds(chain, max, cap))
        .rev()
    {
        buf = metrics.time_decompress(|| codec.decode_elements(buf, bound, elements))?;
    }
    Ok(buf)
}

/// The most bytes a stored chunk of `n` elements decodes to before its array→bytes decode,
/// the limit every bytes-to-bytes decoder of the chunk stops at (a decompression bomb is an
/// error there, not an allocation): the elements' size for a fixed-size type; for a
/// variable-length one what `n` items of at most the item limit
/// ([`crate::ReadLimits::max_item_bytes`]) take in the chunk's layout, and never more than
/// [`crate::ReadLimits::max_chunk_bytes`].
///
/// ```text
/// vlen-utf8/-bytes   4 + n × (4 + item limit)
/// zarrow.arrow_vlen  (n + 1) × offset width, padded to 64, + n × item limit
/// zarrs.vlen         its data: the last offset, at most n × item limit (see decode_zarrs_vlen)
/// ```
pub(crate) fn decoded_bound(
    chain: &CodecChain,
    data_type: &DataType,
    n: usize,
    opts: &ZarrReadOptions,
) -> usize {
    if let Some(size) = data_type.fixed_size() {
        return match &chain.array_to_bytes {
            // Its padding byte may make a chunk of few elements longer than they are.
            ArrayToBytes::PackBits(p) => p.stored_bound(n),
            _ => size.saturating_mul(n),
        };
    }
    let item = opts.limits.item_bytes();
    let bound = match &chain.array_to_bytes {
        ArrayToBytes::VlenUtf8 | ArrayToBytes::VlenBytes => {
            n.saturating_mul(item.saturating_add(4)).saturating_add(4)
        }
        ArrayToBytes::ArrowVlen { large } => {
            let width = if *large { 8 } else { 4 };
            n.saturating_add(1)
                .saturating_mul(width)
                .saturating_add(63)
                .saturating_add(n.saturating_mul(item))
        }
        _ => usize::MAX,
    };
    bound.min(opts.limits.max_chunk_bytes)
}

/// The most bytes any bytes-to-bytes step of a chunk of `data_type` produces: for a
/// variable-length type [`crate::ReadLimits::max_chunk_bytes`] (the decoded chunk's own bound
/// is at most that, and the steps before it — `json2`'s text — are held to it as well); a
/// fixed-size chunk's steps are bounded by its elements' size alone.
pub(crate) fn step_cap(data_type: &DataType, opts: &ZarrReadOptions) -> usize {
    match data_type.fixed_size() {
        Some(_) => usize::MAX,
        None => opts.limits.max_chunk_bytes,
    }
}

fn vlen_target(data_type: &DataType, opts: &ZarrReadOptions) -> VlenTarget {
    VlenTarget {
        utf8: matches!(data_type, DataType::String),
        repr: opts.string_type,
        max_item: opts.limits.item_bytes(),
    }
}

/// Decode one stored chunk of `n` elements into an Arrow array in encoded element order (the
/// order after the chain's array-to-array codecs; [`ChunkSelection`] undoes them).
pub fn decode_chunk(
    chain: &CodecChain,
    data_type: &DataType,
    n: usize,
    stored: Bytes,
    opts: &ZarrReadOptions,
) -> Result<ArrayRef, ChunkError> {
    decode_chunk_counted(chain, data_type, n, stored, opts, &ScanMetrics::default())
}

/// [`decode_chunk`], the time spent in bytes-to-bytes codecs counted into `metrics`.
pub(crate) fn decode_chunk_counted(
    chain: &CodecChain,
    data_type: &DataType,
    n: usize,
    stored: Bytes,
    opts: &ZarrReadOptions,
    metrics: &ScanMetrics,
) -> Result<ArrayRef, ChunkError> {
    // numcodecs items through a codec that streams: compacted or viewed as they are
    // decompressed (see `rows`), never held decompressed whole.
    let numcodecs = matches!(
        chain.array_to_bytes,
        ArrayToBytes::VlenUtf8 | ArrayToBytes::VlenBytes
    );
    let streams = chain.bytes_to_bytes.first().is_some_and(|c| c.streams());
    if numcodecs && streams {
        if let Ok(mut rows) =
            rows::ChunkRows::by_runs(chain, data_type, n, n, stored.clone(), opts, metrics)?
        {
            return rows.next_rows(n);
        }
    }
    let max = decoded_bound(chain, data_type, n, opts);
    let cap = step_cap(data_type, opts);
    let buf = decode_chunk_bytes(chain, stored, max, cap, Some(n), metrics)?;
    match &chain.array_to_bytes {
        ArrayToBytes::Bytes { endian } => {
            fixed::decode_fixed(buf, data_type, *endian, n, opts.string_type)
        }
        ArrayToBytes::PackBits(p) => {
            let unpacked = Bytes::from(p.decode(&buf, n)?);
            fixed::decode_fixed(
                unpacked,
                data_type,
                Some(Endian::Little),
                n,
                opts.string_type,
            )
        }
        ArrayToBytes::VlenUtf8 | ArrayToBytes::VlenBytes => {
            vlen::decode_numcodecs(buf, n, vlen_target(data_type, opts))
        }
        ArrayToBytes::ArrowVlen { large } => {
            vlen::decode_arrow_layout(buf, n, *large, vlen_target(data_type, opts))
        }
        ArrayToBytes::ZarrsVlen(z) => decode_zarrs_vlen(z, buf, n, data_type, opts, metrics),
        ArrayToBytes::Optional(o) => optional::decode_optional(o, buf, n, data_type, opts, metrics),
        ArrayToBytes::Sharding(_) => Err(ChunkError::Invalid(
            "a shard reached the chunk decoder (shards are read by inner chunk)".into(),
        )),
    }
}

fn decode_zarrs_vlen(
    z: &ZarrsVlen,
    buf: Bytes,
    n: usize,
    data_type: &DataType,
    opts: &ZarrReadOptions,
    metrics: &ScanMetrics,
) -> Result<ArrayRef, ChunkError> {
    if buf.len() < 8 {
        return Err(ChunkError::Truncated("no index length".into()));
    }
    let (len_bytes, rest) = match z.index_location {
        IndexLocation::Start => (buf.slice(..8), buf.slice(8..)),
        IndexLocation::End => (buf.slice(buf.len() - 8..), buf.slice(..buf.len() - 8)),
    };
    let index_len = u64::from_le_bytes(
        len_bytes[..]
            .try_into()
            .map_err(|_| ChunkError::Truncated("index length".into()))?,
    );
    let index_len = usize::try_from(index_len)
        .ok()
        .filter(|l| *l <= rest.len())
        .ok_or_else(|| {
            ChunkError::Truncated(format!(
                "index length {index_len} exceeds the {}-byte chunk",
                rest.len()
            ))
        })?;
    let (index, data) = match z.index_location {
        IndexLocation::Start => (rest.slice(..index_len), rest.slice(index_len..)),
        IndexLocation::End => (
            rest.slice(rest.len() - index_len..),
            rest.slice(..rest.len() - index_len),
        ),
    };
    let width = if z.index_u64 { 8 } else { 4 };
    let index = decode_bytes(
        &z.index_codecs,
        index,
        (n + 1).saturating_mul(width),
        metrics,
    )?;
    let index = match z.index_codecs.array_to_bytes {
        ArrayToBytes::Bytes {
            endian: Some(Endian::Big),
        } => {
            let mut v = index.to_vec();
            v.chunks_exact_mut(width).for_each(<[u8]>::reverse);
            Bytes::from(v)
        }
        _ => index,
    };
    // The data decodes to what the last offset says, no more: a bomb behind a small index
    // stops there, not at the per-chunk cap; nor past what `n` items of the item limit take.
    let declared = index
        .len()
        .checked_sub(width)
        .map(|at| {
            let last = &index[at..];
            if z.index_u64 {
                u64::from_le_bytes(last.try_into().unwrap_or([0; 8]))
            } else {
                u32::from_le_bytes(last.try_into().unwrap_or([0; 4])) as u64
            }
        })
        .unwrap_or(0);
    let max = usize::try_from(declared)
        .unwrap_or(usize::MAX)
        .min(n.saturating_mul(opts.limits.item_bytes()))
        .min(opts.limits.max_chunk_bytes);
    let data = decode_bytes(&z.data_codecs, data, max, metrics)?;
    vlen::decode_index_and_data(index, data, n, z.index_u64, vlen_target(data_type, opts))
}

/// An array of `n` fill values.
pub fn fill_array(
    data_type: &DataType,
    fill: &FillValue,
    n: usize,
    opts: &ZarrReadOptions,
) -> Result<ArrayRef, ChunkError> {
    if let DataType::Optional(inner) = data_type {
        if fill.is_missing(data_type) {
            let arrow = inner.arrow_type(opts.string_type, opts.binary_type());
            return Ok(arrow_array::new_null_array(&arrow, n));
        }
        return fill_array(inner, fill, n, opts);
    }
    match data_type.fixed_size() {
        Some(size) => {
            let mut buf = Vec::with_capacity(size.saturating_mul(n));
            for _ in 0..n {
                buf.extend_from_slice(&fill.bytes);
            }
            fixed::decode_fixed(
                Bytes::from(buf),
                data_type,
                Some(Endian::Little),
                n,
                opts.string_type,
            )
        }
        None => vlen::repeat_value(&fill.bytes, n, vlen_target(data_type, opts)),
    }
}

/// Which elements of a decoded chunk make up its in-bounds part, in C order.
#[derive(Debug, Clone, PartialEq)]
pub enum ChunkSelection {
    /// The first `n` elements, as they are (zero-copy slice).
    Prefix(usize),
    /// Gather these element positions.
    Indices(Vec<u32>),
}

impl ChunkSelection {
    /// The selection for a chunk of `chunk_shape` whose in-bounds extent is `valid_shape`, stored
    /// with the transpose `order` (encoded dimension `i` = chunk dimension `order[i]`).
    pub fn new(chunk_shape: &[u64], valid_shape: &[u64], order: Option<&[usize]>) -> Self {
        let ndim = chunk_shape.len();
        // Strides of each chunk dimension in the encoded (stored) element order.
        let mut strides = vec![0u64; ndim];
        match order {
            None => {
                let mut s = 1u64;
                for d in (0..ndim).rev() {
                    strides[d] = s;
                    s *= chunk_shape[d];
                }
            }
            Some(order) => {
                let mut s = 1u64;
                for i in (0..ndim).rev() {
                    strides[order[i]] = s;
                    s *= chunk_shape[order[i]];
                }
            }
        }
        let n: u64 = valid_shape.iter().product();
        let c_order = order.is_none();
        if c_order
            && valid_shape
                .iter()
                .zip(chunk_shape)
                .skip(1)
                .all(|(v, c)| v == c)
        {
            return ChunkSelection::Prefix(n as usize);
        }
        if n == 0 {
            return ChunkSelection::Prefix(0);
        }
        let mut indices = Vec::with_capacity(n as usize);
        let mut idx = vec![0u64; ndim];
        loop {
            let pos: u64 = idx.iter().zip(&strides).map(|(i, s)| i * s).sum();
            indices.push(pos as u32);
            // Advance the multi-index in C order over `valid_shape`.
            let mut d = ndim;
            loop {
                if d == 0 {
                    return ChunkSelection::Indices(indices);
                }
                d -= 1;
                idx[d] += 1;
                if idx[d] < valid_shape[d] {
                    break;
                }
                idx[d] = 0;
            }
        }
    }

    /// Number of selected elements.
    pub fn len(&self) -> usize {
        match self {
            ChunkSelection::Prefix(n) => *n,
            ChunkSelection::Indices(v) => v.len(),
        }
    }

    /// Whether nothing is selected.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Apply to a decoded chunk.
    pub fn apply(&self, array: ArrayRef) -> Result<ArrayRef, ChunkError> {
        match self {
            ChunkSelection::Prefix(n) if *n == array.len() => Ok(array),
            ChunkSelection::Prefix(n) => Ok(array.slice(0, *n)),
            ChunkSelection::Indices(idx) => {
                let idx = UInt32Array::from(idx.clone());
                arrow_select::take::take(&array, &idx, None)
                    .map_err(|e| ChunkError::Invalid(e.to_string()))
            }
        }
    }
}

#[cfg(test)]
mod tests;

//! A chunk handed out a run of rows at a time.
//!
//! ```text
//!  stored chunk ─▶ Source: the decoded bytes whole   (no compression: the stored bytes as
//!                          they are, strings' views point into them; blosc, lz4, bz2:
//!                          decoded at once)
//!                  or a decoder read as a stream     (zstd, gzip, zlib; strings compacted
//!                          or viewed as they come out)
//!  next_rows(k) ─▶ the bytes of the next k elements  (k × size, or k vlen-utf8/-bytes items)
//!               ─▶ the chunk decoders of fixed.rs / vlen.rs, on just those bytes
//! ```
//!
//! A chunk decoded whole is an array of the chunk's size — tens of MB for a million strings,
//! plus as much again of decompressed bytes — that has left the CPU caches by the time a query
//! reads it. Run by run, each array is a batch's size and is read while still in cache, and a
//! compressed chunk is never held decompressed whole: only the bytes of the run being decoded.
//! What the element bytes of the whole-bytes source become is what [`super::decode_chunk`]
//! makes of them (zero-copy slices, views into the chunk), so the zero-copy contract holds run
//! by run.
//!
//! Runs cover the chunk's elements in stored order, from the first on, so this applies where
//! the rows wanted are a prefix of the stored elements (no `transpose`; edge chunks whose
//! padding comes last) and the array→bytes codec is `bytes`, `vlen-utf8` or `vlen-bytes`.
//! Other chunks are decoded whole and handed out as zero-copy slices. The checks are those of
//! the whole-chunk decoders, made run by run; the end of the stored bytes is checked once the
//! last stored element has been handed out (the padding of an edge chunk is never decoded).

use std::io::Read;

use arrow_array::{Array, ArrayRef};
use bytes::Bytes;

use super::fixed::decode_fixed;
use super::vlen::{self, ItemSink, VlenTarget};
use super::ChunkSelection;
use crate::codec::{ArrayToBytes, CodecChain};
use crate::data_type::{DataType, Endian, FillValue};
use crate::error::ChunkError;
use crate::metrics::ScanMetrics;
use crate::options::{StringType, ZarrReadOptions};

/// The rows of one chunk, handed out in runs by [`ChunkRows::next_rows`].
pub struct ChunkRows {
    kind: Kind,
    /// Rows handed out so far.
    done: usize,
    /// Rows to hand out: the chunk's in-bounds elements.
    rows: usize,
    /// Elements the stored chunk holds (its full shape).
    stored: usize,
}

enum Kind {
    /// Decoded whole: runs are slices.
    Decoded(ArrayRef),
    /// A chunk that is not stored: each run is made of the fill value when it is asked for
    /// (never the whole chunk at once — its shape may be large, its rows few at a time).
    Fill {
        data_type: DataType,
        fill: FillValue,
        opts: ZarrReadOptions,
    },
    /// `bytes`: `size` bytes an element.
    Fixed {
        source: Source,
        data_type: DataType,
        endian: Option<Endian>,
        strings: StringType,
        size: usize,
    },
    /// numcodecs `vlen-utf8` / `vlen-bytes` items, after the count header; `item_bytes`: bytes
    /// an item took in the last run, to size the next.
    Vlen {
        source: Source,
        target: VlenTarget,
        item_bytes: usize,
    },
}

impl std::fmt::Debug for ChunkRows {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = match &self.kind {
            Kind::Decoded(_) => "decoded",
            Kind::Fill { .. } => "fill",
            Kind::Fixed { .. } => "fixed",
            Kind::Vlen { .. } => "vlen",
        };
        f.debug_struct("ChunkRows")
            .field("kind", &kind)
            .field("done", &self.done)
            .field("rows", &self.rows)
            .finish()
    }
}

impl ChunkRows {
    /// Rows handed out as slices of `array` (a decoded chunk's in-bounds elements).
    pub fn decoded(array: ArrayRef) -> Self {
        let rows = array.len();
        ChunkRows {
            kind: Kind::Decoded(array),
            done: 0,
            rows,
            stored: rows,
        }
    }

    /// `rows` fill values of `data_type`, made run by run.
    pub fn fill(
        data_type: &DataType,
        fill: &FillValue,
        rows: usize,
        opts: &ZarrReadOptions,
    ) -> Self {
        ChunkRows {
            kind: Kind::Fill {
                data_type: data_type.clone(),
                fill: fill.clone(),
                opts: opts.clone(),
            },
            done: 0,
            rows,
            stored: rows,
        }
    }

    /// The in-bounds elements of a stored chunk of `n` elements (the chain's read unit),
    /// `selection` picking them. Cheap where the chunk can be handed out run by run (only
    /// the codecs that cannot stream are run here); otherwise the chunk is decoded whole.
    /// The time spent in bytes-to-bytes codecs, here and in [`Self::next_rows`], is counted
    /// into `metrics`.
    pub fn new(
        chain: &CodecChain,
        data_type: &DataType,
        n: usize,
        selection: &ChunkSelection,
        stored: Bytes,
        opts: &ZarrReadOptions,
        metrics: &ScanMetrics,
    ) -> Result<Self, ChunkError> {
        let stored = match selection {
            ChunkSelection::Prefix(rows) if chain.array_to_array.is_empty() => {
                match Self::by_runs(chain, data_type, n, *rows, stored, opts, metrics)? {
                    Ok(rows) => return Ok(rows),
                    Err(stored) => stored,
                }
            }
            _ => stored,
        };
        let full = super::decode_chunk_counted(chain, data_type, n, stored, opts, metrics)?;
        Ok(Self::decoded(selection.apply(full)?))
    }

    /// The first `rows` of the `n` elements of a stored chunk, in stored order, to be decoded
    /// run by run; `stored` back if its array→bytes codec is not one that decodes by runs.
    pub(crate) fn by_runs(
        chain: &CodecChain,
        data_type: &DataType,
        n: usize,
        rows: usize,
        stored: Bytes,
        opts: &ZarrReadOptions,
        metrics: &ScanMetrics,
    ) -> Result<Result<Self, Bytes>, ChunkError> {
        let kind = match (&chain.array_to_bytes, data_type.fixed_size()) {
            (ArrayToBytes::Bytes { endian }, Some(size)) => Kind::Fixed {
                source: Source::new(
                    chain,
                    stored,
                    (size.saturating_mul(n), usize::MAX),
                    n,
                    metrics,
                )?,
                data_type: data_type.clone(),
                endian: *endian,
                strings: opts.string_type,
                size,
            },
            (ArrayToBytes::VlenUtf8 | ArrayToBytes::VlenBytes, _) => {
                let max = super::decoded_bound(chain, data_type, n, opts);
                let cap = super::step_cap(data_type, opts);
                let mut source = Source::new(chain, stored, (max, cap), n, metrics)?;
                let count = source.take_bytes(4, "the item count header")?;
                let count = u32::from_le_bytes([count[0], count[1], count[2], count[3]]);
                if count as usize != n {
                    return Err(ChunkError::ItemCount {
                        expected: n as u64,
                        found: count as u64,
                    });
                }
                Kind::Vlen {
                    source,
                    target: super::vlen_target(data_type, opts),
                    item_bytes: 16,
                }
            }
            _ => return Ok(Err(stored)),
        };
        Ok(Ok(ChunkRows {
            kind,
            done: 0,
            rows,
            stored: n,
        }))
    }

    /// Whether [`Self::new`] returns without decoding anything: the chunk is handed out run by
    /// run and its bytes need no codec run whole (none, or one that streams).
    pub(crate) fn starts_cheaply(
        chain: &CodecChain,
        data_type: &DataType,
        selection: &ChunkSelection,
    ) -> bool {
        let by_runs = matches!(selection, ChunkSelection::Prefix(_))
            && chain.array_to_array.is_empty()
            && match chain.array_to_bytes {
                ArrayToBytes::Bytes { .. } => data_type.fixed_size().is_some(),
                ArrayToBytes::VlenUtf8 | ArrayToBytes::VlenBytes => true,
                _ => false,
            };
        by_runs
            && match chain.bytes_to_bytes.as_slice() {
                [] => true,
                [only] => only.streams(),
                _ => false,
            }
    }

    /// Whether the rows are decoded run by run (else the chunk was decoded whole).
    pub fn is_incremental(&self) -> bool {
        !matches!(self.kind, Kind::Decoded(_))
    }

    /// Rows not handed out yet.
    pub fn remaining(&self) -> usize {
        self.rows - self.done
    }

    /// The next `k` rows (fewer at the end of the chunk).
    pub fn next_rows(&mut self, k: usize) -> Result<ArrayRef, ChunkError> {
        let k = k.min(self.remaining());
        let first = self.done;
        let array = match &mut self.kind {
            Kind::Decoded(array) => array.slice(first, k),
            Kind::Fill {
                data_type,
                fill,
                opts,
            } => super::fill_array(data_type, fill, k, opts)?,
            Kind::Fixed {
                source,
                data_type,
                endian,
                strings,
                size,
            } => {
                let bytes = source.take_bytes(k.saturating_mul(*size), "the elements")?;
                decode_fixed(bytes, data_type, *endian, k, *strings)
                    .map_err(|e| e.in_run_from(first))?
            }
            Kind::Vlen {
                source,
                target,
                item_bytes,
            } => match target.repr {
                StringType::Utf8 | StringType::LargeUtf8 => {
                    // A run to the end of the chunk: its data is what the decoded chunk has
                    // left less the length headers, when the codec says how much that is.
                    let data_bytes = match source.bytes_left() {
                        Some(left) if first + k == self.stored => left.saturating_sub(4 * k),
                        _ => k.saturating_mul(*item_bytes),
                    };
                    if target.repr == StringType::Utf8 {
                        source.compact_items::<i32>(k, first, *target, data_bytes, item_bytes)?
                    } else {
                        source.compact_items::<i64>(k, first, *target, data_bytes, item_bytes)?
                    }
                }
                StringType::View => source.view_items(k, first, *target, item_bytes)?,
            },
        };
        self.done += k;
        if self.done == self.stored {
            if let Kind::Fixed { source, .. } | Kind::Vlen { source, .. } = &mut self.kind {
                source.finish(self.stored)?;
            }
        }
        Ok(array)
    }
}

/// Where a chunk's decoded bytes come from.
enum Source {
    /// All of them, decoded; `pos`: the first not handed out.
    Whole { buf: Bytes, pos: usize },
    /// A decoder read as far as the runs need.
    Stream(Stream),
}

struct Stream {
    reader: Box<dyn Read + Send>,
    codec: &'static str,
    /// Decoded bytes read and not yet handed out: `buf[taken..filled]`. `buf` is zeroed up
    /// to its length once and reused where the bytes are copied out, handed out where they
    /// become an Arrow buffer as they are.
    buf: Vec<u8>,
    taken: usize,
    filled: usize,
    /// Bytes read from the decoder so far, and the most it may give.
    read: usize,
    max: usize,
    /// What the decoder's time counts into.
    metrics: ScanMetrics,
    /// The decoded size the compressed data announces, if it does.
    announced: Option<usize>,
}

/// Bytes asked of a streaming decoder at least per read, and at most where the bytes are
/// copied out (compacted) right away: they are read again while in the CPU's cache.
const MIN_READ: usize = 16 * 1024;
const MAX_READ: usize = 256 * 1024;

impl Source {
    /// The source of `stored`, a chunk of `n` elements decoding to at most `max` bytes (no
    /// step to more than `cap`), through `chain`'s bytes-to-bytes codecs: the last one to
    /// decode (the first listed) is read as a stream where it can be, every other is decoded
    /// whole. The codecs' time counts into `metrics`.
    fn new(
        chain: &CodecChain,
        stored: Bytes,
        (max, cap): (usize, usize),
        n: usize,
        metrics: &ScanMetrics,
    ) -> Result<Self, ChunkError> {
        let Some((last, inner)) = chain.bytes_to_bytes.split_first() else {
            return Ok(Source::Whole {
                buf: stored,
                pos: 0,
            });
        };
        let mut buf = stored;
        let bounds = super::step_bounds(chain, max, cap);
        for (codec, bound) in inner.iter().zip(&bounds[1..]).rev() {
            buf = metrics.time_decompress(|| codec.decode_elements(buf, *bound, Some(n)))?;
        }
        Ok(match last.stream_decoder(&buf) {
            Some(reader) => Source::Stream(Stream {
                reader,
                codec: last.name(),
                buf: Vec::new(),
                taken: 0,
                filled: 0,
                read: 0,
                max,
                metrics: metrics.clone(),
                announced: last.announced_size(&buf),
            }),
            None => Source::Whole {
                buf: metrics.time_decompress(|| last.decode_elements(buf, max, Some(n)))?,
                pos: 0,
            },
        })
    }

    /// How many decoded bytes are left, where known: all of them for a chunk decoded whole;
    /// for a stream, what its frame header announces (an estimate, never trusted as a size).
    fn bytes_left(&self) -> Option<usize> {
        match self {
            Source::Whole { buf, pos } => Some(buf.len() - pos),
            Source::Stream(s) => s
                .announced
                .map(|total| total.min(s.max).saturating_sub(s.read) + s.filled - s.taken),
        }
    }

    /// The next `len` bytes.
    fn take_bytes(&mut self, len: usize, what: &str) -> Result<Bytes, ChunkError> {
        match self {
            Source::Whole { buf, pos } => {
                let end = pos.checked_add(len).filter(|&e| e <= buf.len());
                let Some(end) = end else {
                    return Err(ChunkError::Size {
                        expected: (*pos as u64).saturating_add(len as u64),
                        found: buf.len() as u64,
                    });
                };
                let out = buf.slice(*pos..end);
                *pos = end;
                Ok(out)
            }
            Source::Stream(s) => {
                s.discard_taken();
                while s.filled < len {
                    let want = len - s.filled;
                    if s.fill(want)? == 0 {
                        return Err(ChunkError::Truncated(format!(
                            "{}: the chunk ends after {} bytes, inside {what}",
                            s.codec, s.read
                        )));
                    }
                }
                Ok(s.hand_out(len))
            }
        }
    }

    /// The next `k` numcodecs items as views, the first being item `first` of the chunk:
    /// views into the chunk, its one buffer, where it is decoded whole (see
    /// [`vlen::numcodecs_views_at`]); built as the items are decompressed where it streams
    /// (see [`vlen::NumcodecsViewer`]).
    #[cfg(feature = "utf8view")]
    fn view_items(
        &mut self,
        k: usize,
        first: usize,
        target: VlenTarget,
        item_bytes: &mut usize,
    ) -> Result<ArrayRef, ChunkError> {
        if let Source::Whole { buf, pos } = self {
            let data = arrow_buffer::Buffer::from(buf.clone());
            let (array, end) = vlen::numcodecs_views_at(&data, *pos, k, first, target)?;
            *pos = end;
            return Ok(array);
        }
        // `item_bytes` here: the bytes of long items' data per item in the last run.
        let mut out = vlen::NumcodecsViewer::new(k, k.saturating_mul(*item_bytes), target);
        self.take_items(&mut out, (k, first), *item_bytes)?;
        *item_bytes = out.data_len() / k.max(1) + 1;
        Ok(out.finish())
    }

    #[cfg(not(feature = "utf8view"))]
    fn view_items(
        &mut self,
        _: usize,
        _: usize,
        _: VlenTarget,
        _: &mut usize,
    ) -> Result<ArrayRef, ChunkError> {
        Err(vlen::view_unavailable())
    }

    /// The next `k` numcodecs items as Utf8 / LargeUtf8, the first being item `first` of the
    /// chunk: compacted straight from the decoded bytes, as they are read.
    fn compact_items<O: arrow_array::OffsetSizeTrait>(
        &mut self,
        k: usize,
        first: usize,
        target: VlenTarget,
        data_bytes: usize,
        item_bytes: &mut usize,
    ) -> Result<ArrayRef, ChunkError> {
        let mut out = vlen::NumcodecsCompactor::<O>::new(k, data_bytes, target.max_item)?;
        self.take_items(&mut out, (k, first), *item_bytes)?;
        *item_bytes = out.data_len() / k.max(1) + 1;
        out.finish(first, target)
    }

    /// Give `out` the next `k` numcodecs items (item `first` of the chunk the first of them),
    /// reading a stream as far as they need, in pieces that stay in cache; the first read
    /// sized by `item_bytes`, an estimate of the bytes an item takes after its header.
    fn take_items<S: ItemSink>(
        &mut self,
        out: &mut S,
        (k, first): (usize, usize),
        item_bytes: usize,
    ) -> Result<(), ChunkError> {
        let in_run = |e: ChunkError| e.in_run_from(first);
        // Stored bytes of the items taken, headers included.
        let mut stored = 0;
        match self {
            Source::Whole { buf, pos } => *pos = out.push_items(buf, *pos, k).map_err(in_run)?,
            Source::Stream(s) => loop {
                let end = out
                    .push_items(&s.buf[..s.filled], s.taken, k - out.len())
                    .map_err(in_run)?;
                stored += end - s.taken;
                s.taken = end;
                if out.len() == k {
                    break;
                }
                s.discard_taken();
                // Enough for the rest of the run, in pieces that stay in cache.
                let per_item = match out.len() {
                    0 => item_bytes + 4,
                    taken => stored / taken + 1,
                };
                let want = per_item
                    .saturating_mul(k - out.len())
                    .clamp(MIN_READ, MAX_READ);
                if s.fill(want)? == 0 {
                    break;
                }
            },
        }
        if out.len() < k {
            return Err(vlen::item_past_end(first + out.len()));
        }
        Ok(())
    }

    /// After the last element: the decoded bytes must end here.
    fn finish(&mut self, elements: usize) -> Result<(), ChunkError> {
        let trailing = match self {
            Source::Whole { buf, pos } => buf.len() - *pos,
            Source::Stream(s) => {
                s.discard_taken();
                s.filled + s.fill(1)?
            }
        };
        if trailing > 0 {
            return Err(ChunkError::Invalid(format!(
                "trailing bytes after the {elements} elements of the chunk"
            )));
        }
        Ok(())
    }
}

impl Stream {
    /// Read about `want` more decoded bytes after the pending ones; the number read, 0 at the
    /// end. `want` is an estimate (an announced size, a length header): the buffer grows only
    /// as the bytes arrive, at most doubling what it holds per read.
    fn fill(&mut self, want: usize) -> Result<usize, ChunkError> {
        let room = self.max.saturating_sub(self.read).saturating_add(1);
        let want = want.min(room);
        let start = self.filled;
        let mut got = 0;
        while got < want {
            let held = start + got;
            let end = held + (want - got).min(held.max(MIN_READ));
            if self.buf.len() < end {
                self.buf.resize(end, 0);
            }
            let target = &mut self.buf[held..end];
            match self.metrics.time_decompress(|| self.reader.read(target)) {
                Ok(0) => break,
                Ok(r) => got += r,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(ChunkError::codec(self.codec, e)),
            }
        }
        self.filled += got;
        self.read += got;
        if self.read > self.max {
            return Err(ChunkError::TooLarge(format!(
                "{}: chunk decodes to more than the limit of {} bytes",
                self.codec, self.max
            )));
        }
        Ok(got)
    }

    /// Move the pending bytes not yet taken to the front.
    fn discard_taken(&mut self) {
        if self.taken > 0 {
            self.buf.copy_within(self.taken..self.filled, 0);
            self.filled -= self.taken;
            self.taken = 0;
        }
    }

    /// The first `len` pending bytes (nothing taken before them), as a buffer of their own:
    /// the buffer they were decoded into; what follows them moves to a new one.
    fn hand_out(&mut self, len: usize) -> Bytes {
        let rest = self.buf[len..self.filled].to_vec();
        let mut out = std::mem::replace(&mut self.buf, rest);
        out.truncate(len);
        self.filled -= len;
        Bytes::from(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::BytesToBytes;
    use arrow_array::cast::AsArray;

    fn chain(array_to_bytes: ArrayToBytes, bytes_to_bytes: Vec<BytesToBytes>) -> CodecChain {
        CodecChain {
            array_to_array: Vec::new(),
            array_to_bytes,
            bytes_to_bytes,
        }
    }

    fn numcodecs(items: &[&str]) -> Vec<u8> {
        let mut out = (items.len() as u32).to_le_bytes().to_vec();
        for s in items {
            out.extend_from_slice(&(s.len() as u32).to_le_bytes());
            out.extend_from_slice(s.as_bytes());
        }
        out
    }

    fn zstd() -> BytesToBytes {
        BytesToBytes::Zstd {
            level: 3,
            checksum: false,
        }
    }

    fn all_rows(mut rows: ChunkRows, k: usize) -> Result<Vec<String>, ChunkError> {
        let mut out = Vec::new();
        while rows.remaining() > 0 {
            let a = rows.next_rows(k)?;
            assert!(a.len() <= k);
            match a.data_type() {
                arrow_schema::DataType::Utf8 => {
                    out.extend(a.as_string::<i32>().iter().map(|s| s.unwrap().to_string()))
                }
                arrow_schema::DataType::LargeUtf8 => {
                    out.extend(a.as_string::<i64>().iter().map(|s| s.unwrap().to_string()))
                }
                _ => out.extend(a.as_string_view().iter().map(|s| s.unwrap().to_string())),
            }
        }
        Ok(out)
    }

    fn types() -> Vec<StringType> {
        let mut t = vec![StringType::Utf8, StringType::LargeUtf8];
        if cfg!(feature = "utf8view") {
            t.push(StringType::View);
        }
        t
    }

    /// Items of 3 to 94 bytes, around the compactor's block size, so that the first runs'
    /// estimate of their data is short and the buffers grow.
    #[test]
    #[cfg_attr(miri, ignore = "zstd is C code, which Miri cannot run")]
    fn vlen_runs_equal_the_whole_chunk() {
        let strings: Vec<String> = (0..5000)
            .map(|i| format!("s{i}-{}", "é".repeat(i % 13 + (i / 1000) * 8)))
            .collect();
        let refs: Vec<&str> = strings.iter().map(String::as_str).collect();
        let raw = numcodecs(&refs);
        for codecs in [vec![], vec![zstd()], vec![BytesToBytes::Gzip { level: 5 }]] {
            let mut stored = raw.clone();
            for c in codecs.iter().rev() {
                stored = c.encode(&stored).unwrap();
            }
            let chain = chain(ArrayToBytes::VlenUtf8, codecs.clone());
            for t in types() {
                let opts = ZarrReadOptions::default().with_string_type(t);
                for k in [1, 7, 1000, 4999, 5000, 10_000] {
                    let rows = ChunkRows::new(
                        &chain,
                        &DataType::String,
                        5000,
                        &ChunkSelection::Prefix(5000),
                        Bytes::from(stored.clone()),
                        &opts,
                        &ScanMetrics::default(),
                    )
                    .unwrap();
                    assert!(rows.is_incremental());
                    assert_eq!(all_rows(rows, k).unwrap(), strings, "{codecs:?} {t:?} {k}");
                }
            }
        }
    }

    /// The decoder's time goes to the metrics the caller passed, run after run, and to no
    /// other: nothing is kept per thread.
    #[test]
    #[cfg_attr(miri, ignore = "zstd is C code, which Miri cannot run")]
    fn decompression_time_counts_into_the_metrics_passed() {
        let items: Vec<String> = (0..20_000).map(|i| format!("item {i}")).collect();
        let refs: Vec<&str> = items.iter().map(String::as_str).collect();
        let stored = zstd().encode(&numcodecs(&refs)).unwrap();
        let (mine, other) = (ScanMetrics::new(), ScanMetrics::new());
        let mut rows = ChunkRows::new(
            &chain(ArrayToBytes::VlenUtf8, vec![zstd()]),
            &DataType::String,
            items.len(),
            &ChunkSelection::Prefix(items.len()),
            Bytes::from(stored),
            &ZarrReadOptions::default(),
            &mine,
        )
        .unwrap();
        assert!(rows.is_incremental());
        let before = mine.counts().decompress_time;
        rows.next_rows(items.len()).unwrap();
        assert!(mine.counts().decompress_time > before);
        assert_eq!(other.counts().decompress_time, std::time::Duration::ZERO);
    }

    #[test]
    #[cfg_attr(miri, ignore = "zstd is C code, which Miri cannot run")]
    fn vlen_edge_chunk_stops_at_its_rows() {
        let raw = numcodecs(&["a", "b", "c", "", ""]);
        let stored = zstd().encode(&raw).unwrap();
        let rows = ChunkRows::new(
            &chain(ArrayToBytes::VlenUtf8, vec![zstd()]),
            &DataType::String,
            5,
            &ChunkSelection::Prefix(3),
            Bytes::from(stored),
            &ZarrReadOptions::default(),
            &ScanMetrics::default(),
        )
        .unwrap();
        assert_eq!(all_rows(rows, 2).unwrap(), ["a", "b", "c"]);
    }

    #[test]
    #[cfg_attr(miri, ignore = "zstd is C code, which Miri cannot run")]
    fn bad_streams_are_errors() {
        let items: Vec<String> = (0..3000).map(|i| format!("item {i}")).collect();
        let refs: Vec<&str> = items.iter().map(String::as_str).collect();
        let raw = numcodecs(&refs);
        let chain = chain(ArrayToBytes::VlenUtf8, vec![zstd()]);
        for t in types() {
            let run = |raw: &[u8], compressed: Option<Vec<u8>>| {
                let stored = compressed.unwrap_or_else(|| zstd().encode(raw).unwrap());
                let rows = ChunkRows::new(
                    &chain,
                    &DataType::String,
                    3000,
                    &ChunkSelection::Prefix(3000),
                    Bytes::from(stored),
                    &ZarrReadOptions::default().with_string_type(t),
                    &ScanMetrics::default(),
                )?;
                all_rows(rows, 1024)
            };
            bad_stream_errors(&raw, &items, run);
        }
    }

    /// The errors of [`bad_streams_are_errors`], for one string type's `run`.
    fn bad_stream_errors(
        raw: &[u8],
        items: &[String],
        run: impl Fn(&[u8], Option<Vec<u8>>) -> Result<Vec<String>, ChunkError>,
    ) {
        // Trailing bytes after the last item.
        let mut extra = raw.to_vec();
        extra.extend_from_slice(b"xyz");
        assert!(matches!(run(&extra, None), Err(ChunkError::Invalid(_))));
        // The decoded chunk ends inside an item.
        assert!(matches!(
            run(&raw[..raw.len() - 2], None),
            Err(ChunkError::Truncated(m)) if m.contains("item 2999")
        ));
        // The compressed frame is cut short.
        let whole = zstd().encode(raw).unwrap();
        assert!(run(raw, Some(whole[..whole.len() / 2].to_vec())).is_err());
        // Invalid UTF-8, named by its element in the chunk.
        let mut bad = items.to_vec();
        bad[2500] = "x\u{e9}".into();
        let mut raw_bad = numcodecs(&bad.iter().map(String::as_str).collect::<Vec<_>>());
        let pos = raw_bad.windows(2).position(|w| w == [0xC3, 0xA9]).unwrap();
        raw_bad[pos + 1] = b'z';
        assert!(matches!(
            run(&raw_bad, None),
            Err(ChunkError::Utf8 { element: 2500 })
        ));
        // A count header that disagrees with the chunk shape.
        let mut count = raw.to_vec();
        count[..4].copy_from_slice(&3001u32.to_le_bytes());
        assert!(matches!(
            run(&count, None),
            Err(ChunkError::ItemCount { found: 3001, .. })
        ));
    }

    /// Read as views, a compressed chunk streams: a run's short items are inline views, its
    /// long ones are copied once into a data buffer of the run's own, holding just their
    /// bytes (no length headers, no short items, nothing of other runs). Uncompressed, the
    /// views point into the stored chunk, every run's into the same buffer.
    #[cfg(feature = "utf8view")]
    #[test]
    #[cfg_attr(miri, ignore = "zstd is C code, which Miri cannot run")]
    fn view_runs_inline_short_items_and_copy_long_ones_once() {
        // Runs of 1000: the first all short, the second all long, the third mixed.
        let items: Vec<String> = (0..3000)
            .map(|i| match (i / 1000, i % 3) {
                (0, _) | (2, 0) => format!("s{i}"),
                _ => format!("a longer item {i}"),
            })
            .collect();
        let refs: Vec<&str> = items.iter().map(String::as_str).collect();
        let raw = numcodecs(&refs);
        let opts = ZarrReadOptions::default().with_string_type(StringType::View);
        let selection = ChunkSelection::Prefix(3000);
        for codecs in [vec![zstd()], vec![]] {
            let chain = chain(ArrayToBytes::VlenUtf8, codecs.clone());
            let stored = match codecs.first() {
                Some(codec) => Bytes::from(codec.encode(&raw).unwrap()),
                None => Bytes::from(raw.clone()),
            };
            assert!(ChunkRows::starts_cheaply(
                &chain,
                &DataType::String,
                &selection
            ));
            let metrics = ScanMetrics::default();
            let mut rows = ChunkRows::new(
                &chain,
                &DataType::String,
                3000,
                &selection,
                stored.clone(),
                &opts,
                &metrics,
            )
            .unwrap();
            let mut got = Vec::new();
            for run in items.chunks(1000) {
                let a = rows.next_rows(1000).unwrap();
                let v = a.as_string_view();
                let buffers = v.data_buffers();
                if codecs.is_empty() {
                    assert_eq!(buffers.len(), 1);
                    let inside = stored.as_ptr_range().contains(&buffers[0].as_ptr());
                    assert!(inside, "the views point into the stored chunk");
                } else {
                    let long: usize = run.iter().map(|s| s.len()).filter(|&n| n > 12).sum();
                    let held: usize = buffers.iter().map(|b| b.len()).sum();
                    assert_eq!(held, long, "a run holds its long items' bytes, once");
                    assert!(buffers.len() <= 1);
                }
                got.extend(v.iter().map(|s| s.unwrap().to_string()));
            }
            assert_eq!(got, items);
        }
    }

    /// Streamed views check UTF-8 item by item where a length header has a byte of 0x80 or
    /// more (items of 128 bytes and longer), and name the bad item in the chunk.
    #[cfg(feature = "utf8view")]
    #[test]
    #[cfg_attr(miri, ignore = "zstd is C code, which Miri cannot run")]
    fn streamed_views_name_a_long_bad_item() {
        let items: Vec<String> = (0..2000)
            .map(|i| format!("{i}-{}", "é".repeat(80)))
            .collect();
        let refs: Vec<&str> = items.iter().map(String::as_str).collect();
        let mut raw = numcodecs(&refs);
        let at = raw.len() - 19; // inside the last item, on the second byte of an 'é'
        assert_eq!(&raw[at - 1..at + 1], &[0xC3, 0xA9]);
        raw[at] = b'z';
        let rows = ChunkRows::new(
            &chain(ArrayToBytes::VlenUtf8, vec![zstd()]),
            &DataType::String,
            2000,
            &ChunkSelection::Prefix(2000),
            Bytes::from(zstd().encode(&raw).unwrap()),
            &ZarrReadOptions::default().with_string_type(StringType::View),
            &ScanMetrics::default(),
        )
        .unwrap();
        assert!(matches!(
            all_rows(rows, 700),
            Err(ChunkError::Utf8 { element: 1999 })
        ));
    }

    /// Asked for far more than the decoder holds (an estimate: a frame header's announced
    /// size, a length header), a stream's buffer grows only as the bytes arrive: it used to be
    /// sized (and zeroed) for the whole estimate at once.
    #[test]
    fn a_fill_on_an_estimate_allocates_what_arrives() {
        let mut s = Stream {
            reader: Box::new(std::io::Cursor::new(vec![7u8; 100])),
            codec: "test",
            buf: Vec::new(),
            taken: 0,
            filled: 0,
            read: 0,
            max: 1 << 30,
            metrics: ScanMetrics::default(),
            announced: Some(1 << 30),
        };
        assert_eq!(s.fill(256 << 20).unwrap(), 100);
        assert!(s.buf.len() <= 2 * MIN_READ, "{}", s.buf.len());
        assert_eq!(s.fill(1 << 30).unwrap(), 0);
        assert_eq!(&s.buf[..s.filled], &[7u8; 100][..]);
    }

    /// The rows of a stored int64 chunk of `n` elements (little-endian `bytes`, then `codecs`).
    fn int64_rows(codecs: Vec<BytesToBytes>, stored: Vec<u8>, n: usize) -> ChunkRows {
        let bytes = ArrayToBytes::Bytes {
            endian: Some(Endian::Little),
        };
        ChunkRows::new(
            &chain(bytes, codecs),
            &DataType::Int64,
            n,
            &ChunkSelection::Prefix(n),
            Bytes::from(stored),
            &ZarrReadOptions::default(),
            &ScanMetrics::default(),
        )
        .unwrap()
    }

    #[test]
    #[cfg_attr(miri, ignore = "zstd is C code, which Miri cannot run")]
    fn fixed_runs_equal_the_whole_chunk() {
        let values: Vec<i64> = (0..10_000).map(|i| i * 7 - 3).collect();
        let raw: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        for codecs in [vec![], vec![zstd()], vec![BytesToBytes::Zlib { level: 1 }]] {
            let mut stored = raw.clone();
            for c in codecs.iter().rev() {
                stored = c.encode(&stored).unwrap();
            }
            let mut rows = int64_rows(codecs.clone(), stored, 10_000);
            let mut got: Vec<i64> = Vec::new();
            while rows.remaining() > 0 {
                let a = rows.next_rows(3333).unwrap();
                got.extend(
                    a.as_primitive::<arrow_array::types::Int64Type>()
                        .values()
                        .iter(),
                );
            }
            assert_eq!(got, values, "{codecs:?}");
        }
        // One element's bytes short.
        let stored = zstd().encode(&raw[..raw.len() - 8]).unwrap();
        let mut rows = int64_rows(vec![zstd()], stored, 10_000);
        let err = (0..2).try_for_each(|_| rows.next_rows(5000).map(drop));
        assert!(matches!(err, Err(ChunkError::Truncated(_))), "{err:?}");
    }
}

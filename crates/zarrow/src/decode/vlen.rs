//! Variable-length chunks → Arrow string/binary arrays.
//!
//! Three stored layouts arrive here after decompression:
//!
//! ```text
//! vlen-utf8/-bytes  [n:u32][len:u32][bytes][len:u32][bytes]…   → offsets rebuilt, data compacted once
//!                                                               → or views: into the chunk when it is
//!                                                                 stored uncompressed, else short items
//!                                                                 inline, long ones compacted once
//! zarrow.arrow_vlen [off0..offn: i32|i64][pad to 64][data]      → offsets + data are chunk slices
//! zarrs.vlen        [index][data] (+ u64 index length)          → offsets + data are chunk slices
//! ```
//!
//! Every path checks what it is about to trust — offsets start at zero, never decrease, end
//! inside the data; the element count equals the chunk's; UTF-8 is valid and every offset falls
//! on a character boundary — and only then calls an unchecked Arrow constructor.

use std::sync::Arc;

use arrow_array::{ArrayRef, GenericBinaryArray, GenericStringArray, OffsetSizeTrait};
use arrow_buffer::{ArrowNativeType, Buffer, OffsetBuffer, ScalarBuffer};
use bytes::Bytes;

use crate::error::ChunkError;
use crate::options::StringType;

/// Which Arrow family and width the caller wants.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct VlenTarget {
    /// Strings (UTF-8 validated) or bytes.
    pub utf8: bool,
    /// i32 offsets, i64 offsets or views.
    pub repr: StringType,
    /// The longest item read, in bytes (the item limit, [`crate::ReadLimits::max_item_bytes`]):
    /// a longer one is [`ChunkError::ItemTooLarge`], whatever the path decoding it.
    pub max_item: usize,
}

/// An item of `bytes` bytes, the `element`-th of its run, when longer than `max_item`.
#[inline]
fn item_limit(element: usize, bytes: usize, max_item: usize) -> Result<(), ChunkError> {
    if bytes > max_item {
        return Err(ChunkError::ItemTooLarge {
            element: element as u64,
            bytes: bytes as u64,
            limit: max_item as u64,
        });
    }
    Ok(())
}

fn truncated(what: impl Into<String>) -> ChunkError {
    ChunkError::Truncated(what.into())
}

fn read_u32(buf: &[u8], pos: usize) -> Option<u32> {
    buf.get(pos..pos.checked_add(4)?)
        .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
}

/// Validate that `data[offsets]` are UTF-8 strings: one pass over the covered bytes, then a
/// character-boundary check at every offset.
fn validate_utf8<O: ArrowNativeType>(offsets: &[O], data: &[u8]) -> Result<(), ChunkError> {
    let (Some(first), Some(last)) = (offsets.first(), offsets.last()) else {
        return Ok(());
    };
    let (first, last) = (first.as_usize(), last.as_usize());
    // Arrow's contract covers the whole values buffer, not only the strings' bytes: bytes
    // before the first offset are checked too, those after the last are cut off by
    // `from_offsets`.
    let covered = &data[..last];
    // All ASCII (a fast pass that stops at the first other byte): valid, and every offset is
    // on a character boundary.
    if covered.is_ascii() {
        return Ok(());
    }
    if simdutf8::basic::from_utf8(covered).is_err() {
        let valid_up_to = match simdutf8::compat::from_utf8(covered) {
            Err(e) => first + e.valid_up_to(),
            Ok(_) => first,
        };
        let element = offsets
            .partition_point(|o| o.as_usize() <= valid_up_to)
            .saturating_sub(1);
        return Err(ChunkError::Utf8 {
            element: element as u64,
        });
    }
    // A byte 0b10xx_xxxx continues a character: no string may start (or end) there.
    for (i, o) in offsets.iter().enumerate() {
        if data.get(o.as_usize()).is_some_and(|b| (*b as i8) < -0x40) {
            return Err(ChunkError::Utf8 {
                element: i.saturating_sub(1) as u64,
            });
        }
    }
    Ok(())
}

/// Check offsets: `n + 1` of them, non-negative, non-decreasing, last within `data_len`, no
/// item longer than `max_item`.
fn validate_offsets<O: ArrowNativeType + PartialOrd>(
    offsets: &[O],
    n: usize,
    data_len: usize,
    max_item: usize,
) -> Result<(), ChunkError> {
    if offsets.len() != n + 1 {
        return Err(ChunkError::ItemCount {
            expected: n as u64,
            found: offsets.len().saturating_sub(1) as u64,
        });
    }
    let zero = O::usize_as(0);
    if offsets[0] < zero {
        return Err(ChunkError::Offsets("first offset is negative".into()));
    }
    for (i, w) in offsets.windows(2).enumerate() {
        if w[1] < w[0] {
            return Err(ChunkError::Offsets(format!(
                "offset {} ({:?}) is smaller than offset {i} ({:?})",
                i + 1,
                w[1],
                w[0]
            )));
        }
        // Both non-negative: the first is, and none is smaller than the one before.
        item_limit(i, w[1].as_usize() - w[0].as_usize(), max_item)?;
    }
    let last = offsets[n].as_usize();
    if last > data_len {
        return Err(ChunkError::Offsets(format!(
            "last offset {last} is past the end of the {data_len}-byte data"
        )));
    }
    Ok(())
}

/// Offsets known to fit their data: `n + 1` of them, the first non-negative, none smaller than
/// the one before, the last within the data. Only [`ValidOffsets::validate`] (a check) and the
/// `unsafe` [`ValidOffsets::built`] (offsets the caller built itself, its contract written
/// down) make one, and the unchecked Arrow constructors take nothing else.
pub(crate) struct ValidOffsets<O: OffsetSizeTrait> {
    offsets: ScalarBuffer<O>,
    data: Buffer,
}

impl<O: OffsetSizeTrait> ValidOffsets<O> {
    /// Offsets of `n` items over `data`, checked, none longer than `max_item`.
    pub(crate) fn validate(
        offsets: ScalarBuffer<O>,
        data: Buffer,
        n: usize,
        max_item: usize,
    ) -> Result<Self, ChunkError> {
        validate_offsets(&offsets, n, data.len(), max_item)?;
        Ok(ValidOffsets { offsets, data })
    }

    /// Offsets the caller built over `data` as it filled it.
    ///
    /// # Safety
    ///
    /// `offsets` holds at least one value, the first is non-negative, none is smaller than the
    /// one before it, and the last is at most `data.len()`. (Checked anyway in debug builds and
    /// with the `force_validate` feature, as arrow's `force_validate` does.)
    pub(crate) unsafe fn built(offsets: ScalarBuffer<O>, data: Buffer) -> Self {
        if cfg!(any(debug_assertions, feature = "force_validate")) {
            let n = offsets.len().saturating_sub(1);
            if let Err(e) = validate_offsets(&offsets, n, data.len(), usize::MAX) {
                panic!("zarrow bug: built offsets are invalid: {e}");
            }
        }
        ValidOffsets { offsets, data }
    }
}

/// A buffer of `T` over `bytes` without copying when aligned, else an aligned copy (this only
/// ever copies offsets, never string data).
pub(crate) fn scalar_buffer<T: ArrowNativeType>(bytes: &Bytes) -> ScalarBuffer<T> {
    let size = std::mem::size_of::<T>();
    let len = bytes.len() / size;
    let buffer = if bytes.as_ptr().align_offset(std::mem::align_of::<T>()) == 0 {
        Buffer::from(bytes.slice(..len * size))
    } else {
        Buffer::from_slice_ref(&bytes[..len * size])
    };
    ScalarBuffer::new(buffer, 0, len)
}

/// Build the requested array from valid offsets and their data; strings are validated as
/// UTF-8 here.
pub(crate) fn from_offsets<O: OffsetSizeTrait>(
    valid: ValidOffsets<O>,
    target: VlenTarget,
) -> Result<ArrayRef, ChunkError> {
    let ValidOffsets { offsets, data } = valid;
    let data = if target.utf8 {
        validate_utf8(&offsets, &data)?;
        // Arrow requires the whole values buffer to be UTF-8: keep it to the last offset
        // (bytes past it belong to no string and were not checked).
        let last = offsets.last().map_or(0, |o| o.as_usize());
        data.slice_with_length(0, last)
    } else {
        data
    };
    match target.repr {
        StringType::Utf8 => {
            let offsets = convert_offsets::<O, i32>(offsets)?;
            Ok(build_offset_array::<i32>(offsets, data, target.utf8))
        }
        StringType::LargeUtf8 => {
            let offsets = convert_offsets::<O, i64>(offsets)?;
            Ok(build_offset_array::<i64>(offsets, data, target.utf8))
        }
        StringType::View => views_from_offsets(&offsets, data, target.utf8),
    }
}

/// `data_bytes` of strings fit offsets of type `O`; else the error that says to read the
/// array as large_utf8.
pub(crate) fn check_data_size<O: OffsetSizeTrait>(data_bytes: usize) -> Result<(), ChunkError> {
    if data_bytes > O::MAX_OFFSET {
        return Err(ChunkError::TooLarge(format!(
            "chunk holds {data_bytes} bytes of strings, more than 32-bit offsets address: read it as large_utf8"
        )));
    }
    Ok(())
}

/// Re-type offsets (a copy of the offsets only) when the widths differ.
fn convert_offsets<I: OffsetSizeTrait, O: OffsetSizeTrait>(
    offsets: ScalarBuffer<I>,
) -> Result<ScalarBuffer<O>, ChunkError> {
    if std::mem::size_of::<I>() == std::mem::size_of::<O>() {
        // Same width: both are i32 or both i64, so the bytes (and their alignment) carry over.
        let len = offsets.len();
        return Ok(ScalarBuffer::new(offsets.into_inner(), 0, len));
    }
    check_data_size::<O>(offsets.last().map(|o| o.as_usize()).unwrap_or(0))?;
    Ok(offsets
        .iter()
        .map(|o| O::usize_as(o.as_usize()))
        .collect::<Vec<O>>()
        .into())
}

/// The array over `offsets` (from a [`ValidOffsets`] of this `data`, re-typed) and `data`,
/// validated as UTF-8 by the caller when `utf8`. Debug builds and `force_validate` take
/// arrow's checked constructors instead.
fn build_offset_array<O: OffsetSizeTrait>(
    offsets: ScalarBuffer<O>,
    data: Buffer,
    utf8: bool,
) -> ArrayRef {
    if cfg!(any(debug_assertions, feature = "force_validate")) {
        let offsets = OffsetBuffer::new(offsets);
        return if utf8 {
            Arc::new(GenericStringArray::<O>::new(offsets, data, None))
        } else {
            Arc::new(GenericBinaryArray::<O>::new(offsets, data, None))
        };
    }
    // SAFETY: `offsets` are those of a `ValidOffsets` over `data` (only `from_offsets` calls
    // this), re-typed by `convert_offsets`, which keeps their values (checked to fit): n+1
    // values, non-negative, non-decreasing, last <= data.len().
    let offsets = unsafe { OffsetBuffer::new_unchecked(offsets) };
    if utf8 {
        // SAFETY: offsets are valid (above) and `validate_utf8` checked that the bytes they cover
        // are UTF-8 and that every offset lies on a character boundary.
        Arc::new(unsafe { GenericStringArray::<O>::new_unchecked(offsets, data, None) })
    } else {
        // SAFETY: offsets are valid (above); binary data needs no further checks.
        Arc::new(unsafe { GenericBinaryArray::<O>::new_unchecked(offsets, data, None) })
    }
}

#[cfg(feature = "utf8view")]
fn views_from_offsets<O: OffsetSizeTrait>(
    offsets: &[O],
    data: Buffer,
    utf8: bool,
) -> Result<ArrayRef, ChunkError> {
    let mut views = Vec::with_capacity(offsets.len().saturating_sub(1));
    check_view_buffer(&data)?;
    for w in offsets.windows(2) {
        let (start, end) = (w[0].as_usize(), w[1].as_usize());
        // Offsets fit u32: the buffer is at most u32::MAX bytes (checked above).
        views.push(arrow_array::builder::make_view(
            &data[start..end],
            0,
            start as u32,
        ));
    }
    // SAFETY: each view was made by `make_view` from `data[start..end]` at offset `start`
    // (offsets valid for `data`, so the slice is in bounds), and `from_offsets` validated the
    // strings' UTF-8 when `utf8`.
    Ok(unsafe { build_view_array(views, vec![data], utf8) })
}

#[cfg(not(feature = "utf8view"))]
fn views_from_offsets<O: OffsetSizeTrait>(
    _: &[O],
    _: Buffer,
    _: bool,
) -> Result<ArrayRef, ChunkError> {
    Err(view_unavailable())
}

#[cfg(not(feature = "utf8view"))]
pub(crate) fn view_unavailable() -> ChunkError {
    ChunkError::Invalid("Utf8View output needs zarrow built with the `utf8view` feature".into())
}

#[cfg(feature = "utf8view")]
fn check_view_buffer(data: &Buffer) -> Result<(), ChunkError> {
    if data.len() > u32::MAX as usize {
        return Err(ChunkError::TooLarge(
            "chunk larger than 4 GiB cannot be read as Utf8View/BinaryView".into(),
        ));
    }
    Ok(())
}

/// A view array over `buffers` (none where every item is inline).
///
/// # Safety
///
/// Every view describes an item: one of at most 12 bytes holds them inline (and zeros after
/// them); a longer one names a buffer of `buffers`, an offset and length within it, and the
/// item's first 4 bytes as its prefix. With `utf8`, every item is valid UTF-8. (Checked
/// anyway in debug builds and with the `force_validate` feature.)
#[cfg(feature = "utf8view")]
unsafe fn build_view_array(views: Vec<u128>, buffers: Vec<Buffer>, utf8: bool) -> ArrayRef {
    use arrow_array::{BinaryViewArray, StringViewArray};
    let views = ScalarBuffer::from(views);
    if cfg!(any(debug_assertions, feature = "force_validate")) {
        return if utf8 {
            Arc::new(StringViewArray::new(views, buffers, None))
        } else {
            Arc::new(BinaryViewArray::new(views, buffers, None))
        };
    }
    if utf8 {
        // SAFETY: the function's contract: views describe bytes of `buffers`, valid UTF-8.
        Arc::new(unsafe { StringViewArray::new_unchecked(views, buffers, None) })
    } else {
        // SAFETY: the function's contract: views describe bytes of `buffers`.
        Arc::new(unsafe { BinaryViewArray::new_unchecked(views, buffers, None) })
    }
}

/// Decode a numcodecs `vlen-utf8` / `vlen-bytes` chunk holding `n` items.
pub(crate) fn decode_numcodecs(
    buf: Bytes,
    n: usize,
    target: VlenTarget,
) -> Result<ArrayRef, ChunkError> {
    let count = read_u32(&buf, 0).ok_or_else(|| truncated("no item count header"))?;
    if count as usize != n {
        return Err(ChunkError::ItemCount {
            expected: n as u64,
            found: count as u64,
        });
    }
    decode_numcodecs_items(buf.slice(4..), n, 0, target)
}

/// Decode `n` numcodecs items (`[len: u32 LE][bytes]` each, no count header) that make up all
/// of `items`; `first` is the chunk position of the first one (for error messages).
fn decode_numcodecs_items(
    items: Bytes,
    n: usize,
    first: usize,
    target: VlenTarget,
) -> Result<ArrayRef, ChunkError> {
    // Every item needs at least its 4-byte length: a count the buffer cannot hold is rejected
    // before anything is allocated for it.
    if n.checked_mul(4).is_none_or(|need| need > items.len()) {
        return Err(truncated(format!(
            "{n} items need at least {} bytes, {} left",
            n.saturating_mul(4),
            items.len()
        )));
    }
    match target.repr {
        StringType::View => numcodecs_views(items, n, first, target),
        StringType::Utf8 => numcodecs_compact::<i32>(&items, n, first, target),
        StringType::LargeUtf8 => numcodecs_compact::<i64>(&items, n, first, target),
    }
}

/// Bytes copied at once for a short item (see [`NumcodecsCompactor`]). 32, not 16: labels,
/// ids and names run to 20-odd bytes, and with a 16-byte block the items just over it took
/// the `memcpy` path on a branch the CPU could not predict (1M labels of 6–18 bytes: 4.5 ms
/// with 16, 3.7 ms with 32, compacted a batch at a time).
pub(crate) const SHORT: usize = 32;

/// The Utf8 / LargeUtf8 path of numcodecs items, and its one copy: item bytes appended to a
/// new data buffer, offsets rebuilt.
///
/// Items are taken as they come: [`Self::push_items`] stops at the first item that does not
/// lie entirely in the bytes it is given, so that the caller can give it a chunk decoded whole
/// or a decompressor's output piece by piece. An item of at most [`SHORT`] bytes is appended
/// as a fixed `SHORT`-byte block (one unaligned load and store instead of a `memcpy` call per
/// item) and the buffer cut back to the item's end, so the bytes past it are overwritten by
/// the next item or cut off. The data buffer is reserved with `SHORT` bytes of slack and
/// never zeroed: it only ever holds bytes copied from items. All of it is bounds-checked safe
/// code.
pub(crate) struct NumcodecsCompactor<O: OffsetSizeTrait> {
    /// Offsets of the items taken: one more than there are items.
    offsets: Vec<O>,
    /// The items' bytes so far.
    data: Vec<u8>,
    /// The longest item taken (see [`VlenTarget::max_item`]).
    max_item: usize,
}

impl<O: OffsetSizeTrait> NumcodecsCompactor<O> {
    /// Room for `items` items of `data_bytes` bytes in all (it grows if that is too little),
    /// none longer than `max_item`. Callers bound both by the chunk's size or the
    /// decoded-size limit.
    pub(crate) fn new(
        items: usize,
        data_bytes: usize,
        max_item: usize,
    ) -> Result<Self, ChunkError> {
        check_data_size::<O>(data_bytes)?;
        let mut offsets = Vec::with_capacity(items + 1);
        offsets.push(O::usize_as(0));
        Ok(NumcodecsCompactor {
            offsets,
            data: Vec::with_capacity(data_bytes + SHORT),
            max_item,
        })
    }

    /// Bytes of item data taken so far.
    pub(crate) fn data_len(&self) -> usize {
        self.data.len()
    }

    /// The array of the items taken (UTF-8 validated for strings), the first of them being
    /// item `first` of the chunk. The data's size is checked against the offsets' type here,
    /// once: offsets past it are never handed out.
    pub(crate) fn finish(self, first: usize, target: VlenTarget) -> Result<ArrayRef, ChunkError> {
        check_data_size::<O>(self.data.len())?;
        // SAFETY: `push_items` starts the offsets at 0 and pushes the data's length after
        // each item it appends, so they never decrease and the last is the data's length;
        // `check_data_size` just checked that length fits `O`, so no offset wrapped.
        let valid = unsafe {
            ValidOffsets::built(
                ScalarBuffer::from(self.offsets),
                Buffer::from_vec(self.data),
            )
        };
        from_offsets::<O>(valid, target).map_err(|e| e.in_run_from(first))
    }
}

/// What numcodecs items are given to a piece at a time: [`NumcodecsCompactor`] (Utf8,
/// LargeUtf8) or [`NumcodecsViewer`] (views), so that one loop feeds either from a chunk
/// decoded whole or from a decompressor's output (`Source::take_items` in `rows.rs`).
pub(crate) trait ItemSink {
    /// Items taken so far.
    fn len(&self) -> usize;

    /// Take up to `max` items from `buf`, the first starting at `pos`; stops early at an item
    /// that does not lie entirely inside `buf`. Returns where the items taken end.
    fn push_items(&mut self, buf: &[u8], pos: usize, max: usize) -> Result<usize, ChunkError>;
}

impl<O: OffsetSizeTrait> ItemSink for NumcodecsCompactor<O> {
    fn len(&self) -> usize {
        self.offsets.len() - 1
    }

    /// An item longer than the item limit is an error (numbered from the compactor's first
    /// item) as soon as its length header is in `buf`.
    fn push_items(&mut self, buf: &[u8], mut pos: usize, max: usize) -> Result<usize, ChunkError> {
        for _ in 0..max {
            let Some(len) = read_u32(buf, pos) else { break };
            let (start, len) = (pos + 4, len as usize);
            item_limit(self.len(), len, self.max_item)?;
            if len > buf.len() - start {
                break;
            }
            let end = self.data.len() + len;
            match buf[start..].first_chunk::<SHORT>() {
                Some(block) if len <= SHORT => {
                    self.data.extend_from_slice(block);
                    self.data.truncate(end);
                }
                _ => self.data.extend_from_slice(&buf[start..start + len]),
            }
            self.offsets.push(O::usize_as(end));
            pos = start + len;
        }
        Ok(pos)
    }
}

/// A numcodecs item, the `item`-th of its chunk, that runs past the end of the bytes.
pub(crate) fn item_past_end(item: usize) -> ChunkError {
    truncated(format!("item {item}: the chunk ends inside it"))
}

/// `n` numcodecs items that make up all of `buf` as Utf8 / LargeUtf8 (see
/// [`NumcodecsCompactor`]); item numbers in errors count from `first`.
fn numcodecs_compact<O: OffsetSizeTrait>(
    buf: &[u8],
    n: usize,
    first: usize,
    target: VlenTarget,
) -> Result<ArrayRef, ChunkError> {
    // The caller checked `4 * n <= buf.len()`: the data is what the length headers leave.
    let mut compactor = NumcodecsCompactor::<O>::new(n, buf.len() - 4 * n, target.max_item)?;
    let pos = compactor
        .push_items(buf, 0, n)
        .map_err(|e| e.in_run_from(first))?;
    if compactor.len() < n {
        return Err(item_past_end(first + compactor.len()));
    }
    if pos != buf.len() {
        return Err(ChunkError::Invalid(format!(
            "{} trailing bytes after {n} items",
            buf.len() - pos
        )));
    }
    compactor.finish(first, target)
}

#[cfg(feature = "utf8view")]
/// Is `item` UTF-8? `std`'s scalar check for short items (simdutf8's setup costs more than it
/// saves under 64 bytes), simdutf8 for longer ones.
fn item_is_utf8(item: &[u8]) -> bool {
    if item.len() < 64 {
        std::str::from_utf8(item).is_ok()
    } else {
        simdutf8::basic::from_utf8(item).is_ok()
    }
}

/// Bytes of a numcodecs chunk checked for UTF-8 at once by [`numcodecs_views`]: small enough
/// that the window is still in cache from building its views, large enough that the check
/// runs at full speed.
#[cfg(feature = "utf8view")]
const UTF8_WINDOW: usize = 64 * 1024;

/// Views into a numcodecs chunk whose items make up all of `buf` (no count header).
#[cfg(feature = "utf8view")]
fn numcodecs_views(
    buf: Bytes,
    n: usize,
    first: usize,
    target: VlenTarget,
) -> Result<ArrayRef, ChunkError> {
    let data = Buffer::from(buf);
    let (array, end) = numcodecs_views_at(&data, 0, n, first, target)?;
    if end != data.len() {
        return Err(ChunkError::Invalid(format!(
            "{} trailing bytes after {n} items",
            data.len() - end
        )));
    }
    Ok(array)
}

/// Views of the `k` numcodecs items of `data` from `pos` on (the first being item `first` of
/// its chunk), pointing into `data` itself as their one buffer — zero-copy — with where the
/// items end. A chunk decoded whole is handed out this way a run at a time, each run's
/// views built in one pass over its length headers.
///
/// An item is stored as `[len: u32 LE][bytes]`, and an Arrow view starts with the same `u32 LE`
/// length: for an item of at most 12 bytes the view is the 16 stored bytes from its header on,
/// with everything past the item masked off; for a longer one, the view's low 8 bytes (length,
/// 4-byte prefix) are the header and the first 4 item bytes as stored, and buffer index 0 plus
/// the item's offset fill the high 8. Near the end of the data, where 16 bytes are not left,
/// `make_view` builds the view.
///
/// The items are taken in windows of about [`UTF8_WINDOW`] bytes, each starting at a length
/// header and ending where the next one starts; a window's UTF-8 is checked right after its
/// views are built, while it is in cache (see [`numcodecs_window_utf8`]).
#[cfg(feature = "utf8view")]
pub(crate) fn numcodecs_views_at(
    data: &Buffer,
    mut pos: usize,
    k: usize,
    first: usize,
    target: VlenTarget,
) -> Result<(ArrayRef, usize), ChunkError> {
    check_view_buffer(data)?;
    let bytes: &[u8] = data;
    let left = bytes.len().saturating_sub(pos);
    // Every item needs its 4-byte length: a count the bytes cannot hold is rejected before
    // anything is allocated for it.
    if k.checked_mul(4).is_none_or(|need| need > left) {
        return Err(truncated(format!(
            "{k} items need at least {} bytes, {left} left",
            k.saturating_mul(4)
        )));
    }
    let mut views: Vec<u128> = Vec::with_capacity(k);
    while views.len() < k {
        let (window_start, window_first) = (pos, first + views.len());
        let window_end = pos.saturating_add(UTF8_WINDOW);
        let mut header_bits = 0u32;
        for element in window_first..first + k {
            let (view, len32, end) = numcodecs_view(bytes, pos, element, target)?;
            header_bits |= len32;
            views.push(view);
            pos = end;
            if pos >= window_end {
                break;
            }
        }
        if target.utf8 {
            numcodecs_window_utf8(&bytes[window_start..pos], window_first, header_bits)?;
        }
    }
    // SAFETY: every view describes the item it was built from by `numcodecs_view`, a slice
    // of `data`; each window's items were checked as UTF-8 when `utf8`.
    Ok((
        unsafe { build_view_array(views, vec![data.clone()], target.utf8) },
        pos,
    ))
}

/// For an item of `len` <= 12 bytes, the bits of its 16 stored bytes (header on) that its view
/// keeps: the low 32 + 8 * `len`.
#[cfg(feature = "utf8view")]
const SHORT_VIEW_MASKS: [u128; 13] = {
    let mut masks = [0u128; 13];
    let mut len = 0;
    while len < 13 {
        masks[len] = u128::MAX >> (96 - 8 * len);
        len += 1;
    }
    masks
};

/// The view of an item longer than 12 bytes from `stored`, the 16 bytes from its length
/// header on: length and prefix as stored, buffer 0, and `offset`, where its bytes are in it.
#[cfg(feature = "utf8view")]
#[inline(always)]
fn long_view(stored: u128, offset: u32) -> u128 {
    (stored & u128::from(u64::MAX)) | (u128::from(offset) << 96)
}

/// The view of the numcodecs item whose length header is at `header` in `bytes` (item
/// `element` of its chunk), its length and where it ends. The view describes the item's
/// bytes in `bytes` as buffer 0 (`bytes` is at most `u32::MAX` long: checked by the caller).
#[cfg(feature = "utf8view")]
#[inline(always)]
fn numcodecs_view(
    bytes: &[u8],
    header: usize,
    element: usize,
    target: VlenTarget,
) -> Result<(u128, u32, usize), ChunkError> {
    let start = header + 4;
    let Some(block) = bytes.get(header..header + 16) else {
        // Fewer than 16 bytes left: the item's bytes are within them, if at all.
        let len32 = read_u32(bytes, header)
            .ok_or_else(|| truncated(format!("item {element}: length header past the end")))?;
        let len = len32 as usize;
        item_limit(element, len, target.max_item)?;
        let item = bytes.get(start..start + len).ok_or_else(|| {
            truncated(format!(
                "item {element}: {len} bytes announced, {} left",
                bytes.len() - start
            ))
        })?;
        let view = arrow_array::builder::make_view(item, 0, start as u32);
        return Ok((view, len32, start + len));
    };
    let mut word = [0u8; 16];
    word.copy_from_slice(block);
    let stored = u128::from_le_bytes(word);
    let len32 = stored as u32;
    let len = len32 as usize;
    item_limit(element, len, target.max_item)?;
    if len > bytes.len() - start {
        return Err(truncated(format!(
            "item {element}: {len} bytes announced, {} left",
            bytes.len() - start
        )));
    }
    let view = if let Some(mask) = SHORT_VIEW_MASKS.get(len) {
        // At most 12 bytes: keep the header and the item's bytes, zero the rest.
        stored & mask
    } else {
        // `start` < buffer length <= u32::MAX (checked by the caller).
        long_view(stored, start as u32)
    };
    Ok((view, len32, start + len))
}

/// Check that every item of `window` — whole items of a well-formed numcodecs chunk, from a
/// length header on, the first being item `first` — is UTF-8.
///
/// When every header byte is ASCII (`header_bits`, the OR of the lengths, has no bit 0x80 in
/// any byte), the window is checked as one string, headers included: if that passes, every
/// item is valid, because an ASCII byte is a whole character in valid UTF-8, so each item
/// starts and ends on a character boundary. A header byte of 0x80 or more (an item of 128
/// bytes or longer) could sit inside a character split across two items; then, and to name
/// the item when the check fails, the items are checked one by one.
#[cfg(feature = "utf8view")]
fn numcodecs_window_utf8(window: &[u8], first: usize, header_bits: u32) -> Result<(), ChunkError> {
    if header_bits & 0x8080_8080 == 0 && simdutf8::basic::from_utf8(window).is_ok() {
        return Ok(());
    }
    let mut pos = 0usize;
    let mut i = first;
    while pos < window.len() {
        let len = read_u32(window, pos)
            .ok_or_else(|| truncated(format!("item {i}: length header past the end")))?
            as usize;
        pos += 4;
        let item = window
            .get(pos..pos + len)
            .ok_or_else(|| truncated(format!("item {i}: past the end")))?;
        if !item_is_utf8(item) {
            return Err(ChunkError::Utf8 { element: i as u64 });
        }
        pos += len;
        i += 1;
    }
    Ok(())
}

/// The view path of numcodecs items decompressed as a stream: views built as the items come
/// out of the decompressor, while they are in cache, and nothing of the chunk kept.
///
/// An item of at most 12 bytes is its view (the 16 stored bytes from its length header on,
/// masked, as in [`numcodecs_views_at`]); a longer one is copied once into the run's data
/// buffer, which its view names. A run of short strings — labels, categories, codes — is its
/// views alone: no data buffer. Views into the chunk decompressed whole, as an uncompressed
/// chunk is read, made every batch hold (and report, to DataFusion's memory accounting) the
/// whole decompressed chunk: 1M-row chunks in 8,192-row batches reported 14 MB a batch, 80
/// times the batch, and a sort that fits its memory limit read as `Utf8` failed as views.
///
/// Like [`NumcodecsCompactor`], [`Self::push_items`] takes whole items only, so the caller can
/// hand it a decompressor's output piece by piece; each piece's items are checked as UTF-8
/// right after their views are built (see [`numcodecs_window_utf8`]).
#[cfg(feature = "utf8view")]
pub(crate) struct NumcodecsViewer {
    views: Vec<u128>,
    /// The bytes of the items longer than 12 bytes, in order.
    data: Vec<u8>,
    target: VlenTarget,
}

#[cfg(feature = "utf8view")]
impl NumcodecsViewer {
    /// Room for `items` views (grows if that is too little) and `long_bytes` bytes of long
    /// items (an estimate: grows as they come). Callers bound both by the chunk's size or the
    /// decoded-size limit.
    pub(crate) fn new(items: usize, long_bytes: usize, target: VlenTarget) -> Self {
        NumcodecsViewer {
            views: Vec::with_capacity(items),
            // `SHORT` more: the last item may be appended as a `SHORT`-byte block.
            data: Vec::with_capacity(long_bytes.saturating_add(SHORT)),
            target,
        }
    }

    /// Bytes of long items copied so far.
    pub(crate) fn data_len(&self) -> usize {
        self.data.len()
    }

    /// The view of the item whose header is at `pos`, and its length, where that takes no
    /// more than fixed-size loads: an item of at most 12 bytes, inside the 16 bytes from its
    /// header on, is its view (masked); one of at most [`SHORT`] bytes with `SHORT` bytes
    /// after its header is appended as a `SHORT`-byte block cut back to its end (as
    /// [`NumcodecsCompactor`] does), its view the header, the first 4 bytes and where it
    /// went. `None`: the general path decides (a longer item, the end of `buf`, a limit).
    #[inline(always)]
    fn fast_view(&mut self, buf: &[u8], pos: usize) -> Option<(u128, u32)> {
        let stored = u128::from_le_bytes(*buf.get(pos..)?.first_chunk::<16>()?);
        let len32 = stored as u32;
        let len = len32 as usize;
        if len > self.target.max_item {
            return None;
        }
        if let Some(mask) = SHORT_VIEW_MASKS.get(len) {
            return Some((stored & mask, len32));
        }
        let offset = self.data.len();
        let item = buf[pos + 4..]
            .first_chunk::<SHORT>()
            .filter(|_| len <= SHORT)?;
        if offset + len > u32::MAX as usize {
            return None;
        }
        self.data.extend_from_slice(item);
        self.data.truncate(offset + len);
        Some((long_view(stored, offset as u32), len32))
    }

    /// The view of `item`: inline if short, else its bytes appended to the data buffer.
    fn view_of(&mut self, item: &[u8]) -> Result<u128, ChunkError> {
        let offset = self.data.len();
        if item.len() > 12 {
            if offset + item.len() > u32::MAX as usize {
                return Err(ChunkError::TooLarge(
                    "a batch with more than 4 GiB of strings cannot be read as Utf8View/BinaryView: \
                     read it in smaller batches"
                        .into(),
                ));
            }
            self.data.extend_from_slice(item);
        }
        Ok(arrow_array::builder::make_view(item, 0, offset as u32))
    }

    /// The array of the items taken: views, and the data buffer if any item is long.
    pub(crate) fn finish(self) -> ArrayRef {
        let buffers = match self.data.is_empty() {
            true => Vec::new(),
            false => vec![Buffer::from_vec(self.data)],
        };
        // SAFETY: each view is an item's 16 stored bytes from its header on, masked to a
        // short item's length (inline, zeros after it), or `make_view` of the item: inline
        // when short, else naming buffer 0 at the offset its bytes were appended at; every
        // item was checked as UTF-8 by `push_items` when `utf8`.
        unsafe { build_view_array(self.views, buffers, self.target.utf8) }
    }
}

#[cfg(feature = "utf8view")]
impl ItemSink for NumcodecsViewer {
    fn len(&self) -> usize {
        self.views.len()
    }

    /// Errors name items from the viewer's first.
    fn push_items(&mut self, buf: &[u8], pos: usize, max: usize) -> Result<usize, ChunkError> {
        let (start, first) = (pos, self.len());
        let mut pos = pos;
        let mut header_bits = 0u32;
        self.views
            .reserve(max.min(buf.len().saturating_sub(pos) / 4));
        for _ in 0..max {
            if let Some((view, len32)) = self.fast_view(buf, pos) {
                header_bits |= len32;
                self.views.push(view);
                pos += 4 + len32 as usize;
                continue;
            }
            let Some(len32) = read_u32(buf, pos) else {
                break;
            };
            let (item_start, len) = (pos + 4, len32 as usize);
            item_limit(self.len(), len, self.target.max_item)?;
            if len > buf.len() - item_start {
                break;
            }
            let view = self.view_of(&buf[item_start..item_start + len])?;
            header_bits |= len32;
            self.views.push(view);
            pos = item_start + len;
        }
        if self.target.utf8 {
            numcodecs_window_utf8(&buf[start..pos], first, header_bits)?;
        }
        Ok(pos)
    }
}

#[cfg(not(feature = "utf8view"))]
fn numcodecs_views(_: Bytes, _: usize, _: usize, _: VlenTarget) -> Result<ArrayRef, ChunkError> {
    Err(view_unavailable())
}

/// Decode a `zarrow.arrow_vlen` chunk: `n + 1` offsets, zero padding to 64 bytes, data.
pub(crate) fn decode_arrow_layout(
    buf: Bytes,
    n: usize,
    large: bool,
    target: VlenTarget,
) -> Result<ArrayRef, ChunkError> {
    let width = if large { 8 } else { 4 };
    let offsets_len = (n + 1)
        .checked_mul(width)
        .ok_or_else(|| ChunkError::TooLarge("offset count overflows".into()))?;
    let data_start = offsets_len.div_ceil(64) * 64;
    if buf.len() < offsets_len {
        return Err(truncated(format!(
            "{} bytes of offsets expected, chunk has {}",
            offsets_len,
            buf.len()
        )));
    }
    // An empty data section may be left out entirely.
    let data = if buf.len() >= data_start {
        buf.slice(data_start..)
    } else if buf.len() == offsets_len {
        Bytes::new()
    } else {
        return Err(truncated("chunk ends inside the padding"));
    };
    let offset_bytes = buf.slice(..offsets_len);
    if large {
        let offsets = scalar_buffer::<i64>(&offset_bytes);
        from_offsets(
            ValidOffsets::validate(offsets, Buffer::from(data), n, target.max_item)?,
            target,
        )
    } else {
        let offsets = scalar_buffer::<i32>(&offset_bytes);
        from_offsets(
            ValidOffsets::validate(offsets, Buffer::from(data), n, target.max_item)?,
            target,
        )
    }
}

/// Decode `zarrs.vlen` offsets (already through their codec chain, little-endian) and data.
pub(crate) fn decode_index_and_data(
    index: Bytes,
    data: Bytes,
    n: usize,
    index_u64: bool,
    target: VlenTarget,
) -> Result<ArrayRef, ChunkError> {
    if index_u64 {
        if index.len() != (n + 1) * 8 {
            return Err(ChunkError::Offsets(format!(
                "index is {} bytes, {} expected for {n} items",
                index.len(),
                (n + 1) * 8
            )));
        }
        // uint64 offsets are read as int64: any value above i64::MAX is negative and rejected.
        let offsets = scalar_buffer::<i64>(&index);
        from_offsets(
            ValidOffsets::validate(offsets, Buffer::from(data), n, target.max_item)?,
            target,
        )
    } else {
        if index.len() != (n + 1) * 4 {
            return Err(ChunkError::Offsets(format!(
                "index is {} bytes, {} expected for {n} items",
                index.len(),
                (n + 1) * 4
            )));
        }
        // uint32 offsets are read as int32: values above i32::MAX are negative and rejected.
        let offsets = scalar_buffer::<i32>(&index);
        from_offsets(
            ValidOffsets::validate(offsets, Buffer::from(data), n, target.max_item)?,
            target,
        )
    }
}

/// An array of `n` copies of `value` (fill values of missing chunks).
pub(crate) fn repeat_value(
    value: &[u8],
    n: usize,
    target: VlenTarget,
) -> Result<ArrayRef, ChunkError> {
    let total = value
        .len()
        .checked_mul(n)
        .ok_or_else(|| ChunkError::TooLarge("fill value repeated overflows".into()))?;
    let mut data = Vec::with_capacity(total);
    let mut offsets: Vec<i64> = Vec::with_capacity(n + 1);
    offsets.push(0);
    for _ in 0..n {
        data.extend_from_slice(value);
        offsets.push(data.len() as i64);
    }
    if target.repr == StringType::Utf8 {
        if total > i32::MAX as usize {
            return Err(ChunkError::TooLarge(
                "fill values exceed 32-bit offsets".into(),
            ));
        }
        let o32: Vec<i32> = offsets.iter().map(|&o| o as i32).collect();
        // SAFETY: `n` copies of `value` appended, the data's length pushed after each: from
        // 0, non-decreasing, the last the data's length (checked to fit i32 above).
        let valid = unsafe { ValidOffsets::built(ScalarBuffer::from(o32), Buffer::from_vec(data)) };
        return from_offsets::<i32>(valid, target);
    }
    // SAFETY: as above, in i64 (the total was computed with checked arithmetic).
    let valid = unsafe { ValidOffsets::built(ScalarBuffer::from(offsets), Buffer::from_vec(data)) };
    from_offsets::<i64>(valid, target)
}

/// Build the requested array from `(start, len)` items of `data` — for the fixed-width string
/// kinds, whose items are trimmed slices.
pub(crate) fn from_items(
    data: Buffer,
    items: &[(usize, usize)],
    target: VlenTarget,
) -> Result<ArrayRef, ChunkError> {
    if target.repr == StringType::View {
        #[cfg(feature = "utf8view")]
        {
            check_view_buffer(&data)?;
            let mut views = Vec::with_capacity(items.len());
            for (i, &(start, len)) in items.iter().enumerate() {
                let item = &data[start..start + len];
                if target.utf8 && !item_is_utf8(item) {
                    return Err(ChunkError::Utf8 { element: i as u64 });
                }
                views.push(arrow_array::builder::make_view(item, 0, start as u32));
            }
            // SAFETY: each view was made by `make_view` from `data[start..start + len]` (a
            // slice, so in bounds) at offset `start`, and each item was checked as UTF-8
            // when `target.utf8`.
            return Ok(unsafe { build_view_array(views, vec![data], target.utf8) });
        }
        #[cfg(not(feature = "utf8view"))]
        return Err(view_unavailable());
    }
    let total: usize = items.iter().map(|i| i.1).sum();
    let mut out = Vec::with_capacity(total);
    let mut offsets: Vec<i64> = Vec::with_capacity(items.len() + 1);
    offsets.push(0);
    for &(start, len) in items {
        out.extend_from_slice(&data[start..start + len]);
        offsets.push(out.len() as i64);
    }
    if target.repr == StringType::Utf8 {
        check_data_size::<i32>(total)?;
        let o32: Vec<i32> = offsets.iter().map(|&o| o as i32).collect();
        // SAFETY: each item appended, the output's length pushed after it: from 0,
        // non-decreasing, the last the output's length (checked to fit i32 above).
        let valid = unsafe { ValidOffsets::built(ScalarBuffer::from(o32), Buffer::from_vec(out)) };
        return from_offsets::<i32>(valid, target);
    }
    // SAFETY: as above, in i64.
    let valid = unsafe { ValidOffsets::built(ScalarBuffer::from(offsets), Buffer::from_vec(out)) };
    from_offsets::<i64>(valid, target)
}

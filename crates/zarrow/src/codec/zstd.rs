//! Zstandard: one or several frames, with or without the content size in the header;
//! zarr v3 `zstd` and numcodecs `zstd` (default level 0, no checksum).

use std::io::Read;
use std::sync::Mutex;

use bytes::Bytes;
use serde_json::{json, Value};
use zstd::zstd_safe::{DCtx, InBuffer, OutBuffer, ResetDirective};

use super::config::{Config, ConfigError};
use super::support::{buffer, read_bounded};
use super::BytesToBytes;
use crate::error::ChunkError;

/// zarr v3 `zstd`.
pub(super) fn v3(c: &Config<'_>) -> Result<BytesToBytes, ConfigError> {
    c.only(&["level", "checksum"])?;
    parse(c)
}

/// numcodecs `zstd`.
pub(super) fn numcodecs(c: &Config<'_>) -> Result<BytesToBytes, ConfigError> {
    c.only(&["id", "level", "checksum"])?;
    parse(c)
}

fn parse(c: &Config<'_>) -> Result<BytesToBytes, ConfigError> {
    Ok(BytesToBytes::Zstd {
        level: c.i32("level", 0)?,
        checksum: c.bool("checksum")?.unwrap_or(false),
    })
}

pub(super) fn v3_json(level: i32, checksum: bool) -> Value {
    json!({"name": "zstd", "configuration": {"level": level, "checksum": checksum}})
}

pub(super) fn v2_json(level: i32, checksum: bool) -> Value {
    json!({"id": "zstd", "level": level, "checksum": checksum})
}

pub(super) fn decode(input: &Bytes, max_size: usize) -> Result<Bytes, ChunkError> {
    zstd_decode(input, max_size).map(Bytes::from)
}

pub(super) fn stream_decoder(input: &Bytes) -> Option<Box<dyn Read + Send>> {
    ZstdReader::new(input.clone(), &CONTEXTS).map(|r| Box::new(r) as Box<dyn Read + Send>)
}

/// The decompression contexts of finished streams, for the next chunk's.
static CONTEXTS: ContextPool = ContextPool::new();

/// Decompression contexts kept between chunks. A streaming context holds a window as large
/// as the frame's (2 MiB for a frame zstd level 3 wrote), allocated by zstd on its first
/// frame: a new context per chunk had the kernel hand out and zero fresh pages for every
/// chunk of every column (35,000 page faults, 140 MB, for three columns of 20 chunks).
/// Reused, a context keeps its window. At most [`Self::MAX_KEPT`] are kept, none holding
/// more than [`Self::MAX_KEPT_BYTES`] (a frame may ask for a window of up to 128 MiB).
pub(super) struct ContextPool(Mutex<Vec<DCtx<'static>>>);

impl ContextPool {
    const MAX_KEPT: usize = 16;
    const MAX_KEPT_BYTES: usize = 8 << 20;

    pub(super) const fn new() -> Self {
        ContextPool(Mutex::new(Vec::new()))
    }

    /// A kept context, or a new one (`None` if zstd cannot allocate one).
    fn take(&self) -> Option<DCtx<'static>> {
        let kept = self.0.lock().ok().and_then(|mut kept| kept.pop());
        kept.or_else(DCtx::try_create)
    }

    /// Keep `context` for the next stream, its frame (finished or not) forgotten.
    fn give_back(&self, mut context: DCtx<'static>) {
        if context.reset(ResetDirective::SessionOnly).is_err()
            || context.sizeof() > Self::MAX_KEPT_BYTES
        {
            return;
        }
        if let Ok(mut kept) = self.0.lock() {
            if kept.len() < Self::MAX_KEPT {
                kept.push(context);
            }
        }
    }

    #[cfg(test)]
    fn kept(&self) -> usize {
        self.0.lock().map_or(0, |kept| kept.len())
    }
}

/// The frames of `input` decompressed as they are read, through a context of a
/// [`ContextPool`], which gets it back when the reader is dropped. A frame cut short is an
/// `UnexpectedEof` error; several frames decode one after the other.
pub(super) struct ZstdReader {
    context: Option<DCtx<'static>>,
    pool: &'static ContextPool,
    input: Bytes,
    pos: usize,
    /// The last frame begun has ended (nothing begun: false, so empty input is an error).
    frame_done: bool,
}

impl ZstdReader {
    pub(super) fn new(input: Bytes, pool: &'static ContextPool) -> Option<Self> {
        Some(ZstdReader {
            context: Some(pool.take()?),
            pool,
            input,
            pos: 0,
            frame_done: false,
        })
    }
}

impl Read for ZstdReader {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let zstd_error = |code| std::io::Error::other(zstd::zstd_safe::get_error_name(code));
        let Some(context) = self.context.as_mut() else {
            return Ok(0);
        };
        if buf.is_empty() {
            return Ok(0);
        }
        loop {
            let rest = &self.input[self.pos..];
            if self.frame_done && !rest.is_empty() {
                context
                    .reset(ResetDirective::SessionOnly)
                    .map_err(zstd_error)?;
                self.frame_done = false;
            }
            // With no input left, the call hands out what the context still holds.
            let mut src = InBuffer::around(rest);
            let mut dst = OutBuffer::around(&mut *buf);
            let hint = context
                .decompress_stream(&mut dst, &mut src)
                .map_err(zstd_error)?;
            let (read, written) = (src.pos(), dst.pos());
            self.pos += read;
            self.frame_done |= hint == 0;
            if written > 0 {
                return Ok(written);
            }
            if self.pos == self.input.len() {
                return match self.frame_done {
                    true => Ok(0),
                    false => Err(std::io::Error::new(
                        std::io::ErrorKind::UnexpectedEof,
                        "incomplete frame",
                    )),
                };
            }
            if read == 0 && hint != 0 {
                return Err(std::io::Error::other("zstd made no progress"));
            }
        }
    }
}

impl Drop for ZstdReader {
    fn drop(&mut self) {
        if let Some(context) = self.context.take() {
            self.pool.give_back(context);
        }
    }
}

/// The content size the frame header announces, if no more than a frame can expand to (see
/// `zstd_decode`): an estimate for sizing buffers, never trusted.
pub(super) fn announced_size(input: &[u8]) -> Option<usize> {
    zstd::zstd_safe::get_frame_content_size(input)
        .ok()
        .flatten()
        .and_then(|s| usize::try_from(s).ok())
        .filter(|&s| {
            s <= input
                .len()
                .saturating_mul(32 * 1024)
                .saturating_add(128 * 1024)
        })
}

pub(super) fn encode(level: i32, checksum: bool, input: &[u8]) -> Result<Vec<u8>, ChunkError> {
    let io_err = |e: std::io::Error| ChunkError::codec("zstd", e);
    let mut compressor = zstd::bulk::Compressor::new(level).map_err(io_err)?;
    compressor
        .set_parameter(zstd::zstd_safe::CParameter::ChecksumFlag(checksum))
        .map_err(io_err)?;
    // The one-shot API writes the content size into the frame header.
    compressor.compress(input).map_err(io_err)
}

/// [`encode`] of `head` then `pad` `count` times, padded as it is compressed; the frame
/// announces its content size, as the one-shot encoder's does.
pub(super) fn encode_padded(
    level: i32,
    checksum: bool,
    head: &[u8],
    pad: &[u8],
    count: usize,
) -> Result<Vec<u8>, ChunkError> {
    use std::io::Write;
    let io_err = |e: std::io::Error| ChunkError::codec("zstd", e);
    let total = (head.len() as u64).saturating_add((pad.len() as u64).saturating_mul(count as u64));
    let mut encoder = zstd::stream::write::Encoder::new(Vec::new(), level).map_err(io_err)?;
    encoder.include_checksum(checksum).map_err(io_err)?;
    encoder.include_contentsize(true).map_err(io_err)?;
    encoder.set_pledged_src_size(Some(total)).map_err(io_err)?;
    encoder.write_all(head).map_err(io_err)?;
    super::support::write_padding(&mut encoder, pad, count).map_err(io_err)?;
    encoder.finish().map_err(io_err)
}

fn zstd_decode(input: &Bytes, max_size: usize) -> Result<Vec<u8>, ChunkError> {
    const NAME: &str = "zstd";
    let content_size = zstd::zstd_safe::get_frame_content_size(input)
        .map_err(|_| ChunkError::codec(NAME, "not a zstd frame (bad magic or header)"))?;
    let Some(size) = content_size else {
        // No content size in the frame header: stream, bounded.
        return zstd_stream(input, max_size, input.len().saturating_mul(4));
    };
    let size = usize::try_from(size)
        .ok()
        .filter(|&s| s <= max_size)
        .ok_or_else(|| {
            ChunkError::TooLarge(format!(
                "zstd: frame header announces {size} bytes, more than the limit of {max_size}"
            ))
        })?;
    // A zstd block expands at most to 128 KiB (an RLE block: 3-byte header and 1 byte), so a
    // frame header announcing more than that ratio is corrupt; do not allocate for it.
    if size
        > input
            .len()
            .saturating_mul(32 * 1024)
            .saturating_add(128 * 1024)
    {
        return Err(ChunkError::codec(
            NAME,
            format!(
                "frame header announces {size} bytes, more than {} compressed bytes can hold",
                input.len()
            ),
        ));
    }
    let single_frame = zstd::zstd_safe::find_frame_compressed_size(input).ok() == Some(input.len());
    if !single_frame {
        // Several frames (or trailing bytes): the first frame's size is only a lower bound.
        return zstd_stream(input, max_size, size);
    }
    let mut out = buffer(size, NAME)?;
    let mut decompressor =
        zstd::bulk::Decompressor::new().map_err(|e| ChunkError::codec(NAME, e))?;
    let written = decompressor
        .decompress_to_buffer(input, &mut out)
        .map_err(|e| ChunkError::codec(NAME, e))?;
    if written != size {
        return Err(ChunkError::codec(
            NAME,
            format!("frame decoded to {written} bytes, its header announces {size}"),
        ));
    }
    Ok(out)
}

fn zstd_stream(input: &Bytes, max_size: usize, hint: usize) -> Result<Vec<u8>, ChunkError> {
    let decoder = ZstdReader::new(input.clone(), &CONTEXTS)
        .ok_or_else(|| ChunkError::codec("zstd", "cannot allocate a decompression context"))?;
    read_bounded(decoder, max_size, hint, "zstd")
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::*;
    use crate::codec::conformance::{noise, sample};

    #[test]
    fn without_content_size_and_several_frames() {
        let input = sample();
        let mut encoder = zstd::stream::write::Encoder::new(Vec::new(), 3).unwrap();
        encoder.include_contentsize(false).unwrap();
        encoder.write_all(&input).unwrap();
        let frame = encoder.finish().unwrap();
        assert_eq!(
            zstd::zstd_safe::get_frame_content_size(&frame).unwrap(),
            None
        );
        let frame = Bytes::from(frame);
        assert_eq!(decode(&frame, input.len()).unwrap(), input);
        assert_eq!(decode(&frame, usize::MAX).unwrap(), input);
        assert!(matches!(decode(&frame, 100), Err(ChunkError::TooLarge(_))));
        // Truncated streaming frame.
        assert!(decode(&frame.slice(..frame.len() - 3), usize::MAX).is_err());

        // Two frames with content sizes, concatenated (numcodecs decodes them as one buffer).
        let mut two = encode(3, false, b"hello ").unwrap();
        two.extend(encode(3, false, b"world").unwrap());
        let two = Bytes::from(two);
        assert_eq!(&decode(&two, 11).unwrap()[..], b"hello world");
        assert!(matches!(decode(&two, 10), Err(ChunkError::TooLarge(_))));

        // A corrupted checksum is detected.
        let mut sum = encode(1, true, &input).unwrap();
        let last = sum.len() - 1;
        sum[last] ^= 0xff;
        assert!(decode(&Bytes::from(sum), input.len()).is_err());
    }

    fn read_all(mut reader: impl Read) -> std::io::Result<Vec<u8>> {
        let mut out = Vec::new();
        let mut piece = [0u8; 1000];
        loop {
            match reader.read(&mut piece)? {
                0 => return Ok(out),
                n => out.extend_from_slice(&piece[..n]),
            }
        }
    }

    /// A context goes back to its pool when its reader is dropped, even in the middle of a
    /// frame, and the next reader that takes it decodes its own frame from the start.
    #[test]
    #[cfg_attr(miri, ignore = "zstd is C code, which Miri cannot run")]
    fn a_kept_context_forgets_the_frame_it_was_in() {
        static POOL: ContextPool = ContextPool::new();
        let (one, two) = (noise(300_000), sample());
        let frame = |data: &[u8]| Bytes::from(encode(3, false, data).unwrap());
        let mut first = ZstdReader::new(frame(&one), &POOL).unwrap();
        let mut piece = [0u8; 1000];
        assert_eq!(first.read(&mut piece).unwrap(), 1000);
        assert_eq!(piece[..], one[..1000]);
        assert_eq!(POOL.kept(), 0);
        drop(first);
        assert_eq!(POOL.kept(), 1);
        let second = ZstdReader::new(frame(&two), &POOL).unwrap();
        assert_eq!(POOL.kept(), 0, "the kept context was taken");
        assert_eq!(read_all(second).unwrap(), two);
        assert_eq!(POOL.kept(), 1);
    }

    #[test]
    #[cfg_attr(miri, ignore = "zstd is C code, which Miri cannot run")]
    fn the_pool_keeps_a_bounded_number_of_contexts() {
        static POOL: ContextPool = ContextPool::new();
        let input = Bytes::from(encode(3, false, b"abc").unwrap());
        let readers: Vec<_> = (0..ContextPool::MAX_KEPT + 3)
            .map(|_| ZstdReader::new(input.clone(), &POOL).unwrap())
            .collect();
        drop(readers);
        assert_eq!(POOL.kept(), ContextPool::MAX_KEPT);
    }

    /// The streaming reader: several frames one after the other; empty, cut short or
    /// followed by bytes that are no frame, an error.
    #[test]
    #[cfg_attr(miri, ignore = "zstd is C code, which Miri cannot run")]
    fn the_streaming_reader_reads_frames_and_rejects_the_rest() {
        static POOL: ContextPool = ContextPool::new();
        let read = |input: Vec<u8>| read_all(ZstdReader::new(Bytes::from(input), &POOL).unwrap());
        let (one, two) = (sample(), noise(70_000));
        let mut both = encode(3, false, &one).unwrap();
        both.extend(encode(19, true, &two).unwrap());
        assert_eq!(
            read(both.clone()).unwrap(),
            [one.clone(), two.clone()].concat()
        );
        let cut = read(both[..both.len() - 5].to_vec()).unwrap_err();
        assert_eq!(cut.kind(), std::io::ErrorKind::UnexpectedEof, "{cut}");
        assert!(read(Vec::new()).is_err());
        let mut trailing = encode(3, false, &one).unwrap();
        trailing.extend_from_slice(b"not a frame");
        assert!(read(trailing).is_err());
        // Each error left its context usable for the next frame.
        assert_eq!(read(encode(3, false, &two).unwrap()).unwrap(), two);
    }

    #[test]
    fn a_header_claiming_2_pow_40_bytes() {
        let mut frame = vec![0x28, 0xb5, 0x2f, 0xfd, 0xe0];
        frame.extend_from_slice(&(1u64 << 40).to_le_bytes());
        frame.extend(noise(32));
        let frame = Bytes::from(frame);
        assert!(matches!(
            decode(&frame, 1 << 30),
            Err(ChunkError::TooLarge(_))
        ));
        assert!(matches!(
            decode(&frame, usize::MAX),
            Err(ChunkError::Codec { codec: "zstd", .. })
        ));
    }
}

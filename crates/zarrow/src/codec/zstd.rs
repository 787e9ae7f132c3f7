//! Zstandard: one or several frames, with or without the content size in the header;
//! zarr v3 `zstd` and numcodecs `zstd` (default level 0, no checksum).

use std::io::Read;

use bytes::Bytes;
use serde_json::{json, Value};

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
    zstd::stream::read::Decoder::with_buffer(std::io::Cursor::new(input.clone()))
        .ok()
        .map(|d| Box::new(d) as Box<dyn Read + Send>)
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

fn zstd_decode(input: &[u8], max_size: usize) -> Result<Vec<u8>, ChunkError> {
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

fn zstd_stream(input: &[u8], max_size: usize, hint: usize) -> Result<Vec<u8>, ChunkError> {
    let decoder = zstd::stream::read::Decoder::with_buffer(input)
        .map_err(|e| ChunkError::codec("zstd", e))?;
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

//! gzip (RFC 1952): several members are concatenated, as numcodecs writes and reads them.
//! zarr v3 `gzip` (default level 5), numcodecs `gzip` (default level 1).

use std::io::{Read, Write};

use bytes::Bytes;
use serde_json::{json, Value};

use super::config::{Config, ConfigError};
use super::support::{deflate_compression, read_bounded};
use super::BytesToBytes;
use crate::error::ChunkError;

const NAME: &str = "gzip";

/// zarr v3 `gzip`.
pub(super) fn v3(c: &Config<'_>) -> Result<BytesToBytes, ConfigError> {
    c.only(&["level"])?;
    Ok(BytesToBytes::Gzip {
        level: c.deflate_level("level", 5)?,
    })
}

/// numcodecs `gzip`.
pub(super) fn numcodecs(c: &Config<'_>) -> Result<BytesToBytes, ConfigError> {
    c.only(&["id", "level"])?;
    Ok(BytesToBytes::Gzip {
        level: c.deflate_level("level", 1)?,
    })
}

pub(super) fn v3_json(level: u32) -> Value {
    json!({"name": "gzip", "configuration": {"level": level}})
}

pub(super) fn v2_json(level: u32) -> Value {
    json!({"id": "gzip", "level": level})
}

pub(super) fn decode(input: &Bytes, max_size: usize) -> Result<Bytes, ChunkError> {
    let hint = size_hint(input);
    let decoder = flate2::bufread::MultiGzDecoder::new(&input[..]);
    read_bounded(decoder, max_size, hint, NAME).map(Bytes::from)
}

pub(super) fn stream_decoder(input: &Bytes) -> Box<dyn Read + Send> {
    Box::new(flate2::bufread::MultiGzDecoder::new(std::io::Cursor::new(
        input.clone(),
    )))
}

pub(super) fn encode(level: u32, input: &[u8]) -> Result<Vec<u8>, ChunkError> {
    let io_err = |e: std::io::Error| ChunkError::codec(NAME, e);
    let level = deflate_compression(level, NAME)?;
    let out = Vec::with_capacity(input.len() / 2 + 64);
    let mut encoder = flate2::write::GzEncoder::new(out, level);
    encoder.write_all(input).map_err(io_err)?;
    encoder.finish().map_err(io_err)
}

/// [`encode`] of `head` then `pad` `count` times, padded as it is compressed.
pub(super) fn encode_padded(
    level: u32,
    head: &[u8],
    pad: &[u8],
    count: usize,
) -> Result<Vec<u8>, ChunkError> {
    let io_err = |e: std::io::Error| ChunkError::codec(NAME, e);
    let level = deflate_compression(level, NAME)?;
    let mut encoder = flate2::write::GzEncoder::new(Vec::with_capacity(head.len() / 2 + 64), level);
    encoder.write_all(head).map_err(io_err)?;
    super::support::write_padding(&mut encoder, pad, count).map_err(io_err)?;
    encoder.finish().map_err(io_err)
}

/// The decoded size a single-member gzip stream announces in its trailer (ISIZE, the size
/// modulo 2^32) — only a first-allocation guess, never trusted: ignored when more than deflate's
/// maximum ratio (1032:1) allows, and bounded by the caller's limit in `read_bounded`.
pub(super) fn size_hint(input: &[u8]) -> usize {
    let fallback = input.len().saturating_mul(4);
    match input.len().checked_sub(4).and_then(|at| input.get(at..)) {
        Some(tail) if input.len() >= 18 => {
            let mut word = [0u8; 4];
            word.copy_from_slice(tail);
            let isize = u32::from_le_bytes(word) as usize;
            if isize <= input.len().saturating_mul(1032) {
                isize
            } else {
                fallback
            }
        }
        _ => fallback,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn concatenated_members_decode_as_one() {
        let mut two = encode(5, b"hello ").unwrap();
        two.extend(encode(5, b"world").unwrap());
        assert_eq!(&decode(&Bytes::from(two), 11).unwrap()[..], b"hello world");
    }

    #[test]
    fn a_trailer_claiming_4_gib_only_guesses_the_first_allocation() {
        let mut encoded = encode(1, b"hello").unwrap();
        let n = encoded.len();
        encoded[n - 4..].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(decode(&Bytes::from(encoded), usize::MAX).is_err());
        assert_eq!(size_hint(b"short"), 20);
    }
}

//! zlib (RFC 1950), numcodecs `zlib` (default level 1): bytes after the end of the stream are
//! ignored, as Python's `zlib` does.

use std::io::{Read, Write};

use bytes::Bytes;
use serde_json::{json, Value};

use super::config::{Config, ConfigError};
use super::support::{deflate_compression, read_bounded};
use super::BytesToBytes;
use crate::error::ChunkError;

const NAME: &str = "zlib";

/// numcodecs `zlib` (also the plain v3 name `zlib`).
pub(super) fn numcodecs(c: &Config<'_>) -> Result<BytesToBytes, ConfigError> {
    c.only(&["id", "level"])?;
    Ok(BytesToBytes::Zlib {
        level: c.deflate_level("level", 1)?,
    })
}

pub(super) fn v3_json(level: u32) -> Value {
    json!({"name": "numcodecs.zlib", "configuration": {"level": level}})
}

pub(super) fn v2_json(level: u32) -> Value {
    json!({"id": "zlib", "level": level})
}

pub(super) fn decode(input: &Bytes, max_size: usize) -> Result<Bytes, ChunkError> {
    let hint = input.len().saturating_mul(4);
    let decoder = flate2::bufread::ZlibDecoder::new(&input[..]);
    read_bounded(decoder, max_size, hint, NAME).map(Bytes::from)
}

pub(super) fn stream_decoder(input: &Bytes) -> Box<dyn Read + Send> {
    Box::new(flate2::bufread::ZlibDecoder::new(std::io::Cursor::new(
        input.clone(),
    )))
}

pub(super) fn encode(level: u32, input: &[u8]) -> Result<Vec<u8>, ChunkError> {
    let io_err = |e: std::io::Error| ChunkError::codec(NAME, e);
    let level = deflate_compression(level, NAME)?;
    let out = Vec::with_capacity(input.len() / 2 + 64);
    let mut encoder = flate2::write::ZlibEncoder::new(out, level);
    encoder.write_all(input).map_err(io_err)?;
    encoder.finish().map_err(io_err)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_after_the_stream_are_ignored() {
        let mut trailing = encode(1, b"hello").unwrap();
        trailing.extend_from_slice(b"garbage");
        assert_eq!(&decode(&Bytes::from(trailing), 5).unwrap()[..], b"hello");
    }
}

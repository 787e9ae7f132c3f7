//! numcodecs `bz2`: bzip2 streams, several concatenated (default level 1).

use std::io::Write;

use bytes::Bytes;
use serde_json::{json, Value};

use super::config::{Config, ConfigError};
use super::support::read_bounded;
use super::BytesToBytes;
use crate::error::ChunkError;

const NAME: &str = "bz2";

/// numcodecs `bz2` (also the plain v3 name `bz2`).
pub(super) fn numcodecs(c: &Config<'_>) -> Result<BytesToBytes, ConfigError> {
    c.only(&["id", "level"])?;
    Ok(BytesToBytes::Bz2 {
        level: match c.int("level")? {
            None => 1,
            Some(l @ 1..=9) => l as u32,
            Some(l) => return Err(ConfigError::bad_value("level", l, "in 1..=9")),
        },
    })
}

pub(super) fn v3_json(level: u32) -> Value {
    json!({"name": "numcodecs.bz2", "configuration": {"level": level}})
}

pub(super) fn v2_json(level: u32) -> Value {
    json!({"id": "bz2", "level": level})
}

pub(super) fn decode(input: &Bytes, max_size: usize) -> Result<Bytes, ChunkError> {
    let hint = input.len().saturating_mul(4);
    let decoder = bzip2::bufread::MultiBzDecoder::new(&input[..]);
    read_bounded(decoder, max_size, hint, NAME).map(Bytes::from)
}

pub(super) fn encode(level: u32, input: &[u8]) -> Result<Vec<u8>, ChunkError> {
    let io_err = |e: std::io::Error| ChunkError::codec(NAME, e);
    let level = bzip2::Compression::try_new(level)
        .ok_or_else(|| ChunkError::codec(NAME, format!("level {level} is not in 1..=9")))?;
    let out = Vec::with_capacity(input.len() / 2 + 64);
    let mut encoder = bzip2::write::BzEncoder::new(out, level);
    encoder.write_all(input).map_err(io_err)?;
    encoder.finish().map_err(io_err)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn concatenated_streams_decode_as_one() {
        let mut two = encode(9, b"hello ").unwrap();
        two.extend(encode(9, b"world").unwrap());
        assert_eq!(&decode(&Bytes::from(two), 11).unwrap()[..], b"hello world");
    }
}

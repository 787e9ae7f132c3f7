//! numcodecs `lzma`: an `.xz` stream (numcodecs' default format) or a legacy `.lzma` stream,
//! told apart by their headers. Raw streams (`format` 3, filters in the metadata) are not read.
//! The decoder's memory is limited, and so is what it may produce.

use std::io::Read;

use bytes::Bytes;
use liblzma::stream::{Check, Stream};
use serde_json::{json, Value};

use super::config::{Config, ConfigError};
use super::support::read_bounded;
use super::BytesToBytes;
use crate::error::ChunkError;

/// The decoder's memory limit: enough for any preset (`-9e` needs 65 MiB), not for a header
/// announcing a dictionary of gigabytes.
const MEMLIMIT: u64 = 256 << 20;

/// numcodecs `lzma` (`format` 1 = xz, 2 = alone; `check`, `preset` kept for writing).
pub(super) fn numcodecs(c: &Config<'_>) -> Result<BytesToBytes, ConfigError> {
    c.only(&["id", "format", "check", "preset", "filters"])?;
    match c.int("format")? {
        None | Some(1) | Some(2) => {}
        Some(0) => {}
        Some(f) => {
            return Err(ConfigError::unsupported(
                Some("format"),
                format!("format {f} (raw lzma streams) is not supported"),
            ))
        }
    }
    if c.get("filters").is_some() {
        return Err(ConfigError::unsupported(
            Some("filters"),
            "custom filter chains are not supported",
        ));
    }
    let preset = match c.int("preset")? {
        None => 6,
        Some(p) if (0..=9).contains(&p) => p as u32,
        Some(p) => return Err(ConfigError::bad_value("preset", p, "in 0..=9")),
    };
    Ok(BytesToBytes::Lzma { preset })
}

pub(super) fn v3_json(preset: u32) -> Value {
    json!({"name": "numcodecs.lzma", "configuration": {"format": 1, "check": -1, "preset": preset}})
}

pub(super) fn v2_json(preset: u32) -> Value {
    json!({"id": "lzma", "format": 1, "check": -1, "preset": preset, "filters": null})
}

fn error(e: impl std::fmt::Display) -> ChunkError {
    ChunkError::codec("lzma", e.to_string())
}

pub(super) fn decode(input: &Bytes, max_size: usize) -> Result<Bytes, ChunkError> {
    // xz streams may be concatenated (numcodecs writes one; xz(1) may write several).
    let stream =
        Stream::new_auto_decoder(MEMLIMIT, liblzma::stream::CONCATENATED).map_err(error)?;
    let reader = liblzma::bufread::XzDecoder::new_stream(&input[..], stream);
    read_bounded(reader, max_size, input.len().saturating_mul(4), "lzma").map(Bytes::from)
}

pub(super) fn encode(preset: u32, input: &[u8]) -> Result<Vec<u8>, ChunkError> {
    let stream = Stream::new_easy_encoder(preset, Check::Crc64).map_err(error)?;
    let mut out = Vec::new();
    liblzma::read::XzEncoder::new_stream(input, stream)
        .read_to_end(&mut out)
        .map_err(error)?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_bounded() {
        let data: Vec<u8> = (0..10_000u32)
            .flat_map(|i| (i % 251).to_le_bytes())
            .collect();
        let enc = Bytes::from(encode(6, &data).unwrap());
        assert_eq!(&decode(&enc, data.len()).unwrap()[..], &data[..]);
        assert!(matches!(
            decode(&enc, data.len() - 1),
            Err(ChunkError::TooLarge(_))
        ));
        assert!(decode(&Bytes::from_static(b"\xfd7zXZ\0garbage"), 100).is_err());
    }
}

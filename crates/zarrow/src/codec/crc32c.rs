//! `crc32c`: the data, then its CRC-32C as 4 little-endian bytes. Decoding checks the sum and
//! returns a zero-copy slice of the input.

use bytes::Bytes;
use serde_json::{json, Value};

use super::config::{Config, ConfigError};
use super::support::too_large;
use super::BytesToBytes;
use crate::error::ChunkError;

/// zarr v3 `crc32c` (no configuration).
pub(super) fn v3(c: &Config<'_>) -> Result<BytesToBytes, ConfigError> {
    c.only(&[])?;
    Ok(BytesToBytes::Crc32c)
}

/// numcodecs `crc32c` (the checksum at the end only).
pub(super) fn numcodecs(c: &Config<'_>) -> Result<BytesToBytes, ConfigError> {
    c.only(&["id", "location"])?;
    match c.str("location")? {
        None | Some("end") => Ok(BytesToBytes::Crc32c),
        Some("start") => Err(ConfigError::unsupported(
            Some("location"),
            "crc32c with location 'start' is not supported",
        )),
        Some(other) => Err(ConfigError::bad_value(
            "location",
            format!("'{other}'"),
            "'start' or 'end'",
        )),
    }
}

pub(super) fn v3_json() -> Value {
    json!({"name": "crc32c"})
}

pub(super) fn v2_json() -> Value {
    json!({"id": "crc32c"})
}

pub(super) fn decode(input: &Bytes, max_size: usize) -> Result<Bytes, ChunkError> {
    let Some(data_len) = input.len().checked_sub(4) else {
        return Err(ChunkError::Truncated(format!(
            "crc32c: {} bytes is shorter than the 4-byte checksum",
            input.len()
        )));
    };
    if data_len > max_size {
        return Err(too_large("crc32c", data_len, max_size));
    }
    let mut word = [0u8; 4];
    word.copy_from_slice(&input[data_len..]);
    let stored = u32::from_le_bytes(word);
    let computed = crc32c::crc32c(&input[..data_len]);
    if stored != computed {
        return Err(ChunkError::Checksum { stored, computed });
    }
    Ok(input.slice(..data_len))
}

pub(super) fn encode(input: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(input.len() + 4);
    out.extend_from_slice(input);
    out.extend_from_slice(&crc32c::crc32c(input).to_le_bytes());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zero_copy_and_checked() {
        let encoded = Bytes::from(encode(b"hello"));
        let decoded = decode(&encoded, 5).unwrap();
        assert_eq!(decoded.as_ptr(), encoded.as_ptr());
        assert_eq!(&decoded[..], b"hello");

        let mut bad = encoded.to_vec();
        bad[1] ^= 0x40;
        match decode(&Bytes::from(bad), 5) {
            Err(ChunkError::Checksum { stored, computed }) => {
                assert_eq!(stored, crc32c::crc32c(b"hello"));
                assert_ne!(stored, computed);
            }
            other => panic!("{other:?}"),
        }
        let mut bad_sum = encoded.to_vec();
        bad_sum[6] ^= 1;
        assert!(matches!(
            decode(&Bytes::from(bad_sum), 5),
            Err(ChunkError::Checksum { .. })
        ));
        assert!(matches!(
            decode(&Bytes::from_static(b"abc"), 5),
            Err(ChunkError::Truncated(_))
        ));
        // Only the checksum: empty data.
        assert!(decode(&Bytes::from(encode(b"")), 0).unwrap().is_empty());
    }
}

//! numcodecs `lz4`: the decoded size as 4 little-endian bytes, then one LZ4 block (default
//! acceleration 1).

use bytes::Bytes;
use serde_json::{json, Value};

use super::config::{Config, ConfigError};
use super::support::buffer;
use super::BytesToBytes;
use crate::error::ChunkError;

/// numcodecs `lz4` (also the plain v3 name `lz4`).
pub(super) fn numcodecs(c: &Config<'_>) -> Result<BytesToBytes, ConfigError> {
    c.only(&["id", "acceleration"])?;
    Ok(BytesToBytes::Lz4 {
        acceleration: c.i32("acceleration", 1)?,
    })
}

pub(super) fn v3_json(acceleration: i32) -> Value {
    json!({"name": "numcodecs.lz4", "configuration": {"acceleration": acceleration}})
}

pub(super) fn v2_json(acceleration: i32) -> Value {
    json!({"id": "lz4", "acceleration": acceleration})
}

pub(super) fn decode(input: &Bytes, max_size: usize) -> Result<Bytes, ChunkError> {
    lz4_decode(input, max_size).map(Bytes::from)
}

pub(super) fn encode(input: &[u8]) -> Result<Vec<u8>, ChunkError> {
    // numcodecs reads the size as a signed 32-bit integer.
    let size = i32::try_from(input.len()).map_err(|_| {
        ChunkError::TooLarge(format!(
            "lz4: cannot encode {} bytes, the format's limit is {}",
            input.len(),
            i32::MAX
        ))
    })?;
    let bound = lz4_flex::block::get_maximum_output_size(input.len());
    let mut out = vec![0u8; 4 + bound];
    out[..4].copy_from_slice(&size.to_le_bytes());
    let n = lz4_flex::block::compress_into(input, &mut out[4..])
        .map_err(|e| ChunkError::codec("lz4", e))?;
    out.truncate(4 + n);
    Ok(out)
}

fn lz4_decode(input: &[u8], max_size: usize) -> Result<Vec<u8>, ChunkError> {
    const NAME: &str = "lz4";
    let Some((head, block)) = input.split_first_chunk::<4>() else {
        return Err(ChunkError::Truncated(format!(
            "lz4: {} bytes is shorter than the 4-byte size header",
            input.len()
        )));
    };
    let size = u32::from_le_bytes(*head) as usize;
    if size > max_size {
        return Err(ChunkError::TooLarge(format!(
            "lz4: header announces {size} bytes, more than the limit of {max_size}"
        )));
    }
    if size == 0 && block.is_empty() {
        return Ok(Vec::new());
    }
    // One LZ4 sequence expands at most 255-fold (a match length byte of 255), so a header
    // announcing more than that is corrupt; do not allocate for it.
    if size > block.len().saturating_mul(255).saturating_add(64) {
        return Err(ChunkError::codec(
            NAME,
            format!(
                "header announces {size} bytes, more than an LZ4 block of {} bytes can hold",
                block.len()
            ),
        ));
    }
    let mut out = buffer(size, NAME)?;
    out.resize(size, 0);
    let written = lz4_flex::block::decompress_into(block, &mut out)
        .map_err(|e| ChunkError::codec(NAME, e))?;
    if written != size {
        return Err(ChunkError::codec(
            NAME,
            format!("block decoded to {written} bytes, the header announces {size}"),
        ));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::conformance::noise;

    #[test]
    fn a_header_claiming_4_gib() {
        let mut claim = vec![0xff, 0xff, 0xff, 0xff];
        claim.extend(noise(64));
        let claim = Bytes::from(claim);
        assert!(matches!(
            decode(&claim, 1 << 20),
            Err(ChunkError::TooLarge(_))
        ));
        // With no limit the ratio check stops it before any allocation.
        assert!(matches!(
            decode(&claim, usize::MAX),
            Err(ChunkError::Codec { codec: "lz4", .. })
        ));
    }
}

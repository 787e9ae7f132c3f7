//! numcodecs `shuffle`: the bytes of `elementsize`-byte elements regrouped by position (every
//! element's first byte, then every second byte, …). Bytes past the last whole element are kept
//! as they are (numcodecs leaves them undefined).

use bytes::Bytes;
use serde_json::{json, Value};

use super::config::{Config, ConfigError};
use super::support::{buffer, too_large};
use super::BytesToBytes;
use crate::error::ChunkError;

/// numcodecs `shuffle` (`elementsize`, default 4).
pub(super) fn numcodecs(c: &Config<'_>) -> Result<BytesToBytes, ConfigError> {
    c.only(&["id", "elementsize"])?;
    let elementsize = match c.int("elementsize")? {
        None => 4,
        Some(n) if (1..=1 << 20).contains(&n) => n as usize,
        Some(n) => return Err(ConfigError::bad_value("elementsize", n, "in 1..=1048576")),
    };
    Ok(BytesToBytes::Shuffle { elementsize })
}

pub(super) fn v3_json(elementsize: usize) -> Value {
    json!({"name": "numcodecs.shuffle", "configuration": {"elementsize": elementsize}})
}

pub(super) fn v2_json(elementsize: usize) -> Value {
    json!({"id": "shuffle", "elementsize": elementsize})
}

/// Move byte `b` of element `i` between position `i * size + b` (`interleaved`) and
/// `b * count + i` (`grouped`).
fn permute(input: &[u8], size: usize, to_grouped: bool) -> Result<Vec<u8>, ChunkError> {
    let mut out = buffer(input.len(), "shuffle")?;
    out.resize(input.len(), 0);
    let count = input.len() / size;
    for i in 0..count {
        for b in 0..size {
            let (interleaved, grouped) = (i * size + b, b * count + i);
            if to_grouped {
                out[grouped] = input[interleaved];
            } else {
                out[interleaved] = input[grouped];
            }
        }
    }
    out[count * size..].copy_from_slice(&input[count * size..]);
    Ok(out)
}

pub(super) fn decode(
    elementsize: usize,
    input: &Bytes,
    max_size: usize,
) -> Result<Bytes, ChunkError> {
    if input.len() > max_size {
        return Err(too_large("shuffle", input.len(), max_size));
    }
    if elementsize <= 1 {
        return Ok(input.clone());
    }
    Ok(Bytes::from(permute(input, elementsize, false)?))
}

pub(super) fn encode(elementsize: usize, input: &[u8]) -> Result<Vec<u8>, ChunkError> {
    if elementsize <= 1 {
        return Ok(input.to_vec());
    }
    permute(input, elementsize, true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn as_numcodecs_shuffles() {
        // numcodecs.Shuffle(elementsize=4).encode(np.array([1, 2, 3], '<i4')) and a tail byte
        let data = [1u8, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0, 9];
        let enc = encode(4, &data).unwrap();
        assert_eq!(enc, [1, 2, 3, 0, 0, 0, 0, 0, 0, 0, 0, 0, 9]);
        assert_eq!(&decode(4, &Bytes::from(enc), 13).unwrap()[..], &data);
        assert!(matches!(
            decode(4, &Bytes::from_static(&[0; 8]), 7),
            Err(ChunkError::TooLarge(_))
        ));
    }
}

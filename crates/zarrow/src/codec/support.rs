//! What the decoders share: buffers whose allocation failure is an error, reads bounded by
//! the caller's limit, deflate levels.

use std::io::Read;

use crate::error::ChunkError;

/// An empty buffer with room for `capacity` bytes; an allocation failure is an error (the size
/// comes from, or is bounded by, the chunk), not an abort.
pub(crate) fn buffer(capacity: usize, codec: &str) -> Result<Vec<u8>, ChunkError> {
    let mut out = Vec::new();
    out.try_reserve_exact(capacity)
        .map_err(|_| ChunkError::TooLarge(format!("{codec}: cannot allocate {capacity} bytes")))?;
    Ok(out)
}

pub(crate) fn too_large(codec: &str, size: usize, max_size: usize) -> ChunkError {
    ChunkError::TooLarge(format!(
        "{codec}: chunk decodes to {size} bytes, more than the limit of {max_size}"
    ))
}

pub(crate) fn deflate_compression(
    level: u32,
    codec: &'static str,
) -> Result<flate2::Compression, ChunkError> {
    if level > 9 {
        return Err(ChunkError::codec(
            codec,
            format!("level {level} is not in 0..=9"),
        ));
    }
    Ok(flate2::Compression::new(level))
}

/// Read a decoder to its end, failing with [`ChunkError::TooLarge`] once it produces more than
/// `max_size` bytes. `hint` is a guess of the decoded size for the first allocation.
pub(crate) fn read_bounded<R: Read>(
    reader: R,
    max_size: usize,
    hint: usize,
    codec: &'static str,
) -> Result<Vec<u8>, ChunkError> {
    let mut out = buffer(hint.min(max_size), codec)?;
    let limit = u64::try_from(max_size)
        .unwrap_or(u64::MAX)
        .saturating_add(1);
    reader
        .take(limit)
        .read_to_end(&mut out)
        .map_err(|e| ChunkError::codec(codec, e))?;
    if out.len() > max_size {
        return Err(ChunkError::TooLarge(format!(
            "{codec}: chunk decodes to more than the limit of {max_size} bytes"
        )));
    }
    Ok(out)
}

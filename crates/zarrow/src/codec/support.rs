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
/// `max_size` bytes. `hint` is a guess of the decoded size for the first allocation (bounded
/// by `max_size`). The buffer then grows as the bytes arrive, at most doubling and never past
/// `max_size + 1` (the byte that tells a stream ending at the limit from one going past it):
/// `read_to_end`'s own doubling would reserve up to twice the limit.
pub(crate) fn read_bounded<R: Read>(
    mut reader: R,
    max_size: usize,
    hint: usize,
    codec: &'static str,
) -> Result<Vec<u8>, ChunkError> {
    let limit = max_size.saturating_add(1);
    let mut out = buffer(hint.min(max_size), codec)?;
    loop {
        // At least one byte of room: `out` holds at most `max_size` bytes here.
        let room = limit - out.len();
        let spare = out.capacity() - out.len();
        let step = if spare == 0 {
            let step = out.len().max(MIN_GROWTH).min(room);
            out.try_reserve_exact(step).map_err(|_| {
                ChunkError::TooLarge(format!(
                    "{codec}: cannot allocate {} bytes",
                    out.len().saturating_add(step)
                ))
            })?;
            step
        } else {
            spare.min(room)
        };
        // No more than the spare capacity is read, so `read_to_end` never grows `out` itself.
        let got = (&mut reader)
            .take(step as u64)
            .read_to_end(&mut out)
            .map_err(|e| ChunkError::codec(codec, e))?;
        if out.len() > max_size {
            return Err(ChunkError::TooLarge(format!(
                "{codec}: chunk decodes to more than the limit of {max_size} bytes"
            )));
        }
        if got < step {
            return Ok(out);
        }
    }
}

/// The least a bounded read's buffer grows by.
const MIN_GROWTH: usize = 64 * 1024;

/// Write `pad` (one element) `count` times to `out`, a block of at most about 64 KiB at a
/// time: padding that is never whole in memory.
pub(super) fn write_padding(
    out: &mut impl std::io::Write,
    pad: &[u8],
    count: usize,
) -> std::io::Result<()> {
    if pad.is_empty() || count == 0 {
        return Ok(());
    }
    let per_block = (64 * 1024 / pad.len()).clamp(1, count);
    let block = pad.repeat(per_block);
    let mut left = count;
    while left > 0 {
        let n = left.min(per_block);
        out.write_all(&block[..n * pad.len()])?;
        left -= n;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bounded_read_never_reserves_past_its_limit() {
        // Exactly at the limit: read whole, in a buffer of at most the limit and one byte
        // (`read_to_end` doubling would have reserved 4 MiB for these 3 MiB).
        let max = (3 << 20) + 7;
        let out = read_bounded(std::io::repeat(1).take(max as u64), max, 0, "t").unwrap();
        assert_eq!(out.len(), max);
        assert!(out.capacity() <= max + 1, "{}", out.capacity());
        // One byte more: an error naming the limit.
        let e = read_bounded(std::io::repeat(1), max, 1 << 40, "t").unwrap_err();
        assert!(
            matches!(&e, ChunkError::TooLarge(m) if m.contains(&max.to_string())),
            "{e}"
        );
        // Short streams keep a small buffer whatever the hint.
        let out = read_bounded(&b"abc"[..], 10, 0, "t").unwrap();
        assert_eq!(out, b"abc");
        assert!(read_bounded(&b""[..], 0, 0, "t").unwrap().is_empty());
        assert!(read_bounded(&b"a"[..], 0, 0, "t").is_err());
    }
}

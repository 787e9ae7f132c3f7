//! Blosc (c-blosc 1, built by blosc-src) through its context API.
//!
//! Only the thread-safe `*_ctx` entry points and the pure header readers are used: no
//! `blosc_init`, no global compressor or thread settings, no environment variables (those are
//! read by the non-context `blosc_compress`/`blosc_decompress` only). Every buffer handed to C is
//! checked first: the 16-byte header is parsed and validated in Rust (format version, the
//! compressed size against the buffer length, the decompressed size against the caller's limit)
//! and again by `blosc_cbuffer_validate`, so c-blosc never reads past the input or writes past
//! the output.

use std::ffi::{c_int, c_void, CStr};

use blosc_src::{
    blosc_cbuffer_validate, blosc_compress_ctx, blosc_decompress_ctx, BLOSC_MAX_BUFFERSIZE,
    BLOSC_MAX_OVERHEAD, BLOSC_MIN_HEADER_LENGTH, BLOSC_VERSION_FORMAT,
};

use crate::error::ChunkError;

/// The codec name used in errors.
const NAME: &str = "blosc";

/// Length of the c-blosc 1 header.
const HEADER_LEN: usize = BLOSC_MIN_HEADER_LENGTH as usize;

/// The largest buffer c-blosc 1 compresses or decompresses.
pub(crate) const MAX_BUFFER_SIZE: usize = BLOSC_MAX_BUFFERSIZE as usize;

/// Flag bit: the block was stored uncompressed (memcpy).
const FLAG_MEMCPYED: u8 = 0x02;

/// The fields of a c-blosc 1 header (format version 2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Header {
    /// Format version of the internal compressor.
    pub compressor_version: u8,
    /// Flags: bit 0 shuffle, bit 1 memcpyed, bit 2 bitshuffle, bits 5–7 the compressor format.
    pub flags: u8,
    /// Element size the shuffle used.
    pub typesize: u8,
    /// Decompressed size.
    pub nbytes: usize,
    /// Block size.
    pub blocksize: usize,
    /// Compressed size, header included.
    pub cbytes: usize,
}

fn le32(b: &[u8], at: usize) -> usize {
    let mut word = [0u8; 4];
    if let Some(src) = b.get(at..at + 4) {
        word.copy_from_slice(src);
    }
    u32::from_le_bytes(word) as usize
}

/// Parse and check the header of a blosc buffer: its version, and that it describes exactly
/// `input` (compressed size equal to the buffer length).
pub(crate) fn read_header(input: &[u8]) -> Result<Header, ChunkError> {
    if input.len() < HEADER_LEN {
        return Err(ChunkError::Truncated(format!(
            "blosc: {} bytes is shorter than the {HEADER_LEN}-byte blosc header",
            input.len()
        )));
    }
    let version = input[0];
    if u32::from(version) != BLOSC_VERSION_FORMAT {
        return Err(ChunkError::codec(
            NAME,
            format!(
                "unsupported blosc format version {version} (c-blosc 1 writes version \
                 {BLOSC_VERSION_FORMAT}; versions 3 and up are blosc2, not supported)"
            ),
        ));
    }
    let header = Header {
        compressor_version: input[1],
        flags: input[2],
        typesize: input[3],
        nbytes: le32(input, 4),
        blocksize: le32(input, 8),
        cbytes: le32(input, 12),
    };
    if header.cbytes > input.len() {
        return Err(ChunkError::Truncated(format!(
            "blosc: header announces {} compressed bytes, chunk has {}",
            header.cbytes,
            input.len()
        )));
    }
    if header.cbytes < input.len() {
        return Err(ChunkError::codec(
            NAME,
            format!(
                "header announces {} compressed bytes, chunk has {} (trailing bytes)",
                header.cbytes,
                input.len()
            ),
        ));
    }
    if header.nbytes > MAX_BUFFER_SIZE {
        return Err(ChunkError::codec(
            NAME,
            format!(
                "header announces {} decompressed bytes, more than blosc's maximum {MAX_BUFFER_SIZE}",
                header.nbytes
            ),
        ));
    }
    if header.flags & FLAG_MEMCPYED != 0 && header.nbytes + HEADER_LEN != header.cbytes {
        return Err(ChunkError::codec(
            NAME,
            format!(
                "uncompressed (memcpy) chunk of {} bytes announces {} data bytes",
                header.cbytes, header.nbytes
            ),
        ));
    }
    Ok(header)
}

/// The compressor library the header's flags name (for error messages).
fn compressor_of(flags: u8) -> &'static str {
    match flags >> 5 {
        0 => "blosclz",
        1 => "lz4",
        2 => "snappy",
        3 => "zlib",
        4 => "zstd",
        _ => "unknown",
    }
}

/// Decompress a blosc buffer. `max_size` bounds the decompressed size announced by the header.
pub(crate) fn decompress(input: &[u8], max_size: usize) -> Result<Vec<u8>, ChunkError> {
    let header = read_header(input)?;
    if header.nbytes > max_size {
        return Err(ChunkError::TooLarge(format!(
            "blosc: header announces {} decompressed bytes, more than the limit of {max_size}",
            header.nbytes
        )));
    }
    // What the chunk's compressed bytes can decode to at most: its compressor's largest
    // expansion (LZ4 255-fold, deflate 1032-fold, zstd 32768-fold; blosclz and snappy
    // taken as zstd, conservatively) — so a small chunk announcing gigabytes is refused before
    // anything is allocated for it.
    let ratio: usize = match header.flags >> 5 {
        1 => 256,
        3 => 1032,
        _ => 32 * 1024,
    };
    let can_hold = header
        .cbytes
        .saturating_mul(ratio)
        .saturating_add(64 * 1024);
    if header.flags & FLAG_MEMCPYED == 0 && header.nbytes > can_hold {
        return Err(ChunkError::codec(
            NAME,
            format!(
                "header announces {} decompressed bytes, more than {} bytes of {} data can hold",
                header.nbytes,
                header.cbytes,
                compressor_of(header.flags)
            ),
        ));
    }
    let mut validated_nbytes: usize = 0;
    // SAFETY: `input` is a live slice of `input.len()` readable bytes, at least
    // BLOSC_MIN_HEADER_LENGTH long (checked by `read_header`); `blosc_cbuffer_validate` reads
    // only the first 16 bytes and writes one `size_t` through the pointer to our local.
    let rc = unsafe {
        blosc_cbuffer_validate(
            input.as_ptr().cast::<c_void>(),
            input.len(),
            &mut validated_nbytes,
        )
    };
    if rc != 0 || validated_nbytes != header.nbytes {
        return Err(ChunkError::codec(NAME, "invalid blosc header"));
    }
    let nbytes = header.nbytes;
    if nbytes == 0 {
        return Ok(Vec::new());
    }
    let mut out: Vec<u8> = Vec::new();
    out.try_reserve_exact(nbytes)
        .map_err(|_| ChunkError::TooLarge(format!("blosc: cannot allocate {nbytes} bytes")))?;
    // SAFETY: the header was validated above: c-blosc's decompression checks every block
    // offset and block length against the header's compressed size, which equals
    // `input.len()`, so it reads only within `input`. It writes at most `destsize` = `nbytes`
    // bytes to `out`, whose capacity is at least `nbytes`. Source and destination do not
    // overlap (`out` is a fresh allocation). One internal thread: no thread pool, no global
    // state.
    let written = unsafe {
        blosc_decompress_ctx(
            input.as_ptr().cast::<c_void>(),
            out.as_mut_ptr().cast::<c_void>(),
            nbytes,
            1,
        )
    };
    if written < 0 {
        let why = match written {
            -5 => format!(
                "compressor '{}' is not available in this build",
                compressor_of(header.flags)
            ),
            -9 => format!(
                "unsupported {} format version {}",
                compressor_of(header.flags),
                header.compressor_version
            ),
            code => format!("corrupt blosc data (c-blosc error {code})"),
        };
        return Err(ChunkError::codec(NAME, why));
    }
    if usize::try_from(written).ok() != Some(nbytes) {
        return Err(ChunkError::codec(
            NAME,
            format!("decompressed {written} bytes, the header announces {nbytes}"),
        ));
    }
    // SAFETY: c-blosc returned `nbytes` = the number of bytes it wrote: on success every block
    // (full blocks and the leftover block, or the whole buffer for memcpy'ed chunks) is written
    // to its place in `dest`, and each block's decompressor must produce exactly the block size
    // or c-blosc fails with a negative code (handled above). So `out[..nbytes]` is initialized,
    // and `nbytes` is within the capacity.
    unsafe { out.set_len(nbytes) };
    Ok(out)
}

/// Compress with c-blosc. `compressor` is a c-blosc compressor name, `shuffle` 0, 1 or 2.
/// `typesize` outside 1..=255 is treated as 1 (as c-blosc does); `clevel` must be 0..=9.
pub(crate) fn compress(
    input: &[u8],
    compressor: &CStr,
    clevel: u8,
    shuffle: u8,
    typesize: usize,
    blocksize: usize,
) -> Result<Vec<u8>, ChunkError> {
    if clevel > 9 {
        return Err(ChunkError::codec(
            NAME,
            format!("clevel {clevel} is not in 0..=9"),
        ));
    }
    if shuffle > 2 {
        return Err(ChunkError::codec(
            NAME,
            format!("shuffle {shuffle} is not 0, 1 or 2"),
        ));
    }
    if input.len() > MAX_BUFFER_SIZE {
        return Err(ChunkError::TooLarge(format!(
            "blosc: cannot compress {} bytes, blosc's maximum is {MAX_BUFFER_SIZE}",
            input.len()
        )));
    }
    let typesize = if (1..=255).contains(&typesize) {
        typesize
    } else {
        1
    };
    // c-blosc takes the block size as an int32; 0 means automatic. Out-of-range requests fall
    // back to automatic rather than wrapping.
    let blocksize = if blocksize > i32::MAX as usize {
        0
    } else {
        blocksize
    };
    let destsize = input.len() + BLOSC_MAX_OVERHEAD as usize;
    let mut out = vec![0u8; destsize];
    // SAFETY: `input` is readable for `input.len()` bytes (≤ BLOSC_MAX_BUFFERSIZE, checked);
    // `out` is writable for `destsize` bytes, and c-blosc never writes past `destsize`;
    // the two do not overlap. `compressor` is a NUL-terminated C string that outlives the
    // call. clevel, shuffle and typesize are in the ranges c-blosc accepts (checked above).
    // The context API uses no global state.
    let written = unsafe {
        blosc_compress_ctx(
            c_int::from(clevel),
            c_int::from(shuffle),
            typesize,
            input.len(),
            input.as_ptr().cast::<c_void>(),
            out.as_mut_ptr().cast::<c_void>(),
            destsize,
            compressor.as_ptr(),
            blocksize,
            1,
        )
    };
    match usize::try_from(written) {
        Ok(n) if n > 0 && n <= destsize => {
            out.truncate(n);
            Ok(out)
        }
        _ => Err(ChunkError::codec(
            NAME,
            format!(
                "c-blosc compression with {} failed (code {written})",
                compressor.to_string_lossy()
            ),
        )),
    }
}

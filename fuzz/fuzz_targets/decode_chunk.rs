//! Fuzz the chunk decoders: any bytes, any encoding, any string type, any element count —
//! decoding must return a value or an error, never panic or misbehave.
//!
//! Input: byte 0 picks the array→bytes codec, data type and string type, byte 1 the element
//! count, byte 2 the compressor in front (or a v2 numcodecs filter chain, or a structured
//! dtype); the rest is the stored chunk.
//!
//! v3 mode (byte 0 = 0xFF): byte 1 is the element count, bytes 2–3 (u16 LE) the length of a
//! v3 array's `zarr.json` that follows, and the rest the chunk, decoded through the codec chain
//! and data type that document declares — any chain the codec registry builds (the newest
//! codecs and data types among them), as hostile as the chunk.
//!
//! Run with `fuzz/run.sh` (or `cargo +nightly fuzz run decode_chunk` from `fuzz/`).
#![no_main]

use bytes::Bytes;
use libfuzzer_sys::fuzz_target;
use zarrow::internals::{ArrayToBytes, CodecChain, IndexLocation, ZarrsVlen};
use zarrow::internals::{BloscCompressor, BloscShuffle};
use zarrow::BytesToBytes;
use zarrow::{DataType, Endian, NodeMetadata};
use zarrow::{StringType, ZarrReadOptions};

/// (dtype, filters, compressor) of v2 arrays with numcodecs filters and checksums.
const V2_FILTERS: &[(&str, &str, &str)] = &[
    (
        r#""<i8""#,
        r#"[{"id": "delta", "dtype": "<i8", "astype": "<i2"}]"#,
        "null",
    ),
    (
        r#"">i4""#,
        r#"[{"id": "delta", "dtype": ">i4"}]"#,
        r#"{"id": "lzma"}"#,
    ),
    (r#""<f4""#, r#"[{"id": "delta", "dtype": "<f4"}]"#, "null"),
    (
        r#""<f8""#,
        r#"[{"id": "fixedscaleoffset", "offset": 2, "scale": 10, "dtype": "<f8", "astype": "<i4"}]"#,
        "null",
    ),
    (
        r#""<f8""#,
        r#"[{"id": "quantize", "digits": 2, "dtype": "<f8", "astype": "<f4"}]"#,
        "null",
    ),
    (
        r#""<f8""#,
        r#"[{"id": "astype", "encode_dtype": "<f2", "decode_dtype": "<f8"}]"#,
        "null",
    ),
    (r#""|b1""#, r#"[{"id": "packbits"}]"#, "null"),
    (
        r#""|O""#,
        r#"[{"id": "categorize", "labels": ["a", "bb", "ü"], "dtype": "|O", "astype": "|u1"}]"#,
        "null",
    ),
    (
        r#""<U2""#,
        r#"[{"id": "categorize", "labels": ["a", "bb", "üü"], "dtype": "<U2", "astype": "<u2"}]"#,
        "null",
    ),
    (
        r#""|O""#,
        r#"[{"id": "json2", "encoding": "utf-8"}]"#,
        "null",
    ),
    // json2 behind compressors: the JSON list decoded within the chunk's bound, parsed as a
    // stream that stops at the element count (byte 1).
    (
        r#""|O""#,
        r#"[{"id": "json2", "encoding": "utf-8"}]"#,
        r#"{"id": "zlib", "level": 1}"#,
    ),
    (
        r#""|O""#,
        r#"[{"id": "json2", "encoding": "utf-8"}]"#,
        r#"{"id": "bz2", "level": 1}"#,
    ),
    (
        r#""<f8""#,
        r#"[{"id": "shuffle", "elementsize": 8}, {"id": "crc32"}]"#,
        r#"{"id": "zlib", "level": 1}"#,
    ),
    (
        r#""<i4""#,
        r#"[{"id": "adler32", "location": "end"}]"#,
        r#"{"id": "lzma"}"#,
    ),
    (
        r#""<i4""#,
        r#"[{"id": "fletcher32"}, {"id": "bitround", "keepbits": 3}]"#,
        "null",
    ),
    (
        r#"[["a", "<i4"], ["s", "<U3"], ["p", [["x", ">f8"], ["ok", "|b1"]]], ["b", "|S2"]]"#,
        "[]",
        "null",
    ),
    (
        r#"[["t", "<M8[s]"], ["v", ">f4"]]"#,
        r#"[{"id": "shuffle", "elementsize": 12}]"#,
        r#"{"id": "zstd", "level": 1}"#,
    ),
];

/// The options every mode decodes with: chunks bounded at 1 MiB.
fn options(string_type: StringType) -> ZarrReadOptions {
    let mut opts = ZarrReadOptions::default().with_string_type(string_type);
    opts.limits.max_chunk_bytes = 1 << 20;
    opts
}

/// Decode `data` as `n` elements of `data_type` through `chain`; whatever decodes must be a
/// valid Arrow array, checked in full.
fn decode(chain: &CodecChain, data_type: &DataType, n: usize, data: &[u8], opts: &ZarrReadOptions) {
    if let Ok(array) =
        zarrow::internals::decode_chunk(chain, data_type, n, Bytes::copy_from_slice(data), opts)
    {
        if let Err(e) = arrow_array::Array::to_data(&array).validate_full() {
            panic!("decoded an invalid array: {e}");
        }
    }
}

/// v3 mode: the chain and data type of the `zarr.json` in the input.
fn decode_v3(n: usize, rest: &[u8]) {
    let len = usize::from(u16::from_le_bytes([rest[0], rest[1]]));
    let rest = &rest[2..];
    let (doc, data) = rest.split_at(len.min(rest.len()));
    let opts = options(StringType::Utf8);
    let Ok(NodeMetadata::Array(meta)) = zarrow::internals::parse_v3("fuzz", doc, &opts.limits)
    else {
        return;
    };
    for string_type in [StringType::Utf8, StringType::View] {
        decode(&meta.codecs, &meta.data_type, n, data, &options(string_type));
    }
}

fuzz_target!(|input: &[u8]| {
    if input.len() < 4 {
        return;
    }
    if input[0] == 0xFF {
        return decode_v3(usize::from(input[1]), &input[2..]);
    }
    let (selector, n, data) = (input[0], input[1] as usize, &input[3..]);
    let array_to_bytes = match selector % 8 {
        0 => ArrayToBytes::VlenUtf8,
        1 => ArrayToBytes::VlenBytes,
        2 => ArrayToBytes::ArrowVlen { large: false },
        3 => ArrayToBytes::ArrowVlen { large: true },
        4 | 5 => ArrayToBytes::ZarrsVlen(Box::new(ZarrsVlen {
            index_codecs: CodecChain::plain(),
            data_codecs: CodecChain::plain(),
            index_u64: selector % 8 == 4,
            index_location: if selector & 0x10 == 0 {
                IndexLocation::Start
            } else {
                IndexLocation::End
            },
        })),
        _ => ArrayToBytes::Bytes {
            endian: Some(if selector & 0x10 == 0 {
                Endian::Little
            } else {
                Endian::Big
            }),
        },
    };
    let data_type = match (selector % 8, selector >> 6) {
        (1, _) => DataType::Bytes,
        (6 | 7, 0) => DataType::FixedUtf32 { length_bytes: 8 },
        (6 | 7, 1) => DataType::NullTerminatedBytes { length_bytes: 3 },
        (6 | 7, 2) => DataType::Int32,
        (6 | 7, _) => DataType::DateTime64 {
            unit: zarrow::NpTimeUnit::Day,
            scale_factor: 1,
        },
        _ => DataType::String,
    };
    // Byte 2 picks the compression in front of the decoder: each of zarrow's codecs, blosc
    // with each of its compressors and shuffles, a checksum over a compressor.
    let codec = input[2];
    let blosc = |cname| BytesToBytes::Blosc {
        cname,
        clevel: 5,
        shuffle: match codec >> 6 {
            0 => BloscShuffle::NoShuffle,
            1 => BloscShuffle::Shuffle,
            _ => BloscShuffle::BitShuffle,
        },
        typesize: 0,
        blocksize: 0,
    };
    let bytes_to_bytes = match codec % 16 {
        1 => vec![BytesToBytes::Gzip { level: 1 }],
        2 => vec![BytesToBytes::Zlib { level: 1 }],
        3 => vec![BytesToBytes::Zstd {
            level: 0,
            checksum: false,
        }],
        4 => vec![blosc(BloscCompressor::BloscLz)],
        5 => vec![blosc(BloscCompressor::Lz4)],
        6 => vec![blosc(BloscCompressor::Zlib)],
        7 => vec![blosc(BloscCompressor::Zstd)],
        8 => vec![BytesToBytes::Lz4 { acceleration: 1 }],
        9 => vec![BytesToBytes::Bz2 { level: 1 }],
        10 => vec![BytesToBytes::Crc32c],
        11 => vec![
            BytesToBytes::Zstd {
                level: 0,
                checksum: false,
            },
            BytesToBytes::Crc32c,
        ],
        12 => vec![
            BytesToBytes::Gzip { level: 1 },
            BytesToBytes::Zstd {
                level: 0,
                checksum: false,
            },
        ],
        _ => vec![],
    };
    let mut chain = CodecChain {
        array_to_array: vec![],
        array_to_bytes,
        bytes_to_bytes,
    };
    let mut data_type = data_type;
    // 13-15: a v2 numcodecs filter chain (or a structured dtype) picked by the high bits,
    // parsed as zarr-python 2 writes it.
    if codec % 16 >= 13 {
        let (dtype, filters, compressor) = V2_FILTERS[usize::from(codec >> 4) % V2_FILTERS.len()];
        let dtype: serde_json::Value = serde_json::from_str(dtype).unwrap();
        let (dt, endian) = match &dtype {
            serde_json::Value::String(s) => zarrow::internals::parse_v2_dtype(s).unwrap(),
            other => (
                zarrow::internals::parse_v2_structured(other).unwrap(),
                Endian::Little,
            ),
        };
        let filters: serde_json::Value = serde_json::from_str(filters).unwrap();
        let compressor: serde_json::Value = serde_json::from_str(compressor).unwrap();
        chain = zarrow::internals::parse_v2_chain(
            &dt,
            endian,
            false,
            1,
            Some(&filters),
            Some(&compressor),
        )
        .unwrap();
        data_type = dt;
    }
    let string_type = match selector >> 6 {
        0 => StringType::Utf8,
        1 => StringType::LargeUtf8,
        _ => StringType::View,
    };
    decode(&chain, &data_type, n, data, &options(string_type));
});

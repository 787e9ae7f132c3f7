//! Decoder tests: values, zero-copy, and every kind of malformed chunk.

use arrow_array::cast::AsArray;
use arrow_array::Array;
use bytes::Bytes;

use super::*;
use crate::codec::{ArrayToBytes, BytesToBytes, CodecChain, IndexLocation, ZarrsVlen};
use crate::options::StringType;
use crate::write::chunk::encode;

fn chain(a2b: ArrayToBytes) -> CodecChain {
    CodecChain {
        array_to_array: vec![],
        array_to_bytes: a2b,
        bytes_to_bytes: vec![],
    }
}

fn opts(t: StringType) -> ZarrReadOptions {
    ZarrReadOptions::default().with_string_type(t)
}

const WORDS: [&str; 6] = [
    "alpha",
    "",
    "ünïcödé",
    "🦀",
    "a much longer string than twelve",
    "z",
];

fn items() -> Vec<Option<&'static [u8]>> {
    WORDS.iter().map(|w| Some(w.as_bytes())).collect()
}

fn strings(a: &dyn Array) -> Vec<String> {
    match a.data_type() {
        arrow_schema::DataType::Utf8 => a
            .as_string::<i32>()
            .iter()
            .map(|s| s.unwrap().to_string())
            .collect(),
        arrow_schema::DataType::LargeUtf8 => a
            .as_string::<i64>()
            .iter()
            .map(|s| s.unwrap().to_string())
            .collect(),
        #[cfg(feature = "utf8view")]
        arrow_schema::DataType::Utf8View => a
            .as_string_view()
            .iter()
            .map(|s| s.unwrap().to_string())
            .collect(),
        other => panic!("not a string array: {other}"),
    }
}

fn string_types() -> Vec<StringType> {
    let mut v = vec![StringType::Utf8, StringType::LargeUtf8];
    if cfg!(feature = "utf8view") {
        v.push(StringType::View);
    }
    v
}

/// Does `[ptr, ptr+len)` lie inside `outer`?
fn inside(ptr: *const u8, len: usize, outer: &Bytes) -> bool {
    let start = outer.as_ptr() as usize;
    let p = ptr as usize;
    p >= start && p + len <= start + outer.len()
}

#[test]
fn numcodecs_strings_every_type() {
    let chunk = Bytes::from(encode::vlen_numcodecs_items(&items(), b"").unwrap());
    for t in string_types() {
        let a = decode_chunk(
            &chain(ArrayToBytes::VlenUtf8),
            &DataType::String,
            6,
            chunk.clone(),
            &opts(t),
        )
        .unwrap();
        assert_eq!(strings(a.as_ref()), WORDS, "{t:?}");
    }
}

#[test]
#[cfg_attr(
    miri,
    ignore = "Miri gives a Vec<u8> no more alignment than 1, so the aligned (zero-copy) path is not taken"
)]
fn arrow_layout_is_zero_copy() {
    for large in [false, true] {
        let chunk = Bytes::from(encode::arrow_vlen_items(&items(), b"", large).unwrap());
        let t = if large {
            StringType::LargeUtf8
        } else {
            StringType::Utf8
        };
        let a = decode_chunk(
            &chain(ArrayToBytes::ArrowVlen { large }),
            &DataType::String,
            6,
            chunk.clone(),
            &opts(t),
        )
        .unwrap();
        assert_eq!(strings(a.as_ref()), WORDS);
        let data = a.to_data();
        // Offsets and data are slices of the chunk itself.
        assert!(
            inside(data.buffers()[0].as_ptr(), data.buffers()[0].len(), &chunk),
            "offsets copied"
        );
        assert!(
            inside(data.buffers()[1].as_ptr(), data.buffers()[1].len(), &chunk),
            "data copied"
        );
    }
}

#[test]
fn misaligned_arrow_layout_copies_offsets_only() {
    let raw = encode::arrow_vlen_items(&items(), b"", false).unwrap();
    let mut padded = vec![0u8];
    padded.extend_from_slice(&raw);
    let chunk = Bytes::from(padded).slice(1..);
    assert_ne!(chunk.as_ptr().align_offset(4), 0);
    let a = decode_chunk(
        &chain(ArrayToBytes::ArrowVlen { large: false }),
        &DataType::String,
        6,
        chunk.clone(),
        &opts(StringType::Utf8),
    )
    .unwrap();
    assert_eq!(strings(a.as_ref()), WORDS);
    let data = a.to_data();
    assert!(
        !inside(data.buffers()[0].as_ptr(), 4, &chunk),
        "offsets must be an aligned copy"
    );
    assert!(
        inside(data.buffers()[1].as_ptr(), data.buffers()[1].len(), &chunk),
        "data must not be copied"
    );
}

#[cfg(feature = "utf8view")]
#[test]
fn numcodecs_views_point_into_the_chunk() {
    let chunk = Bytes::from(encode::vlen_numcodecs_items(&items(), b"").unwrap());
    let a = decode_chunk(
        &chain(ArrayToBytes::VlenUtf8),
        &DataType::String,
        6,
        chunk.clone(),
        &opts(StringType::View),
    )
    .unwrap();
    let v = a.as_string_view();
    assert_eq!(v.data_buffers().len(), 1);
    let buf = &v.data_buffers()[0];
    assert_eq!(
        buf.as_ptr(),
        chunk[4..].as_ptr(),
        "the view buffer is the chunk itself, past the item count"
    );
    assert_eq!(buf.len(), chunk.len() - 4);
}

fn zarrs_chunk(index_u64: bool, at_start: bool) -> (ZarrsVlen, Bytes) {
    let mut offsets = vec![0u64];
    let mut data = Vec::new();
    for w in WORDS {
        data.extend_from_slice(w.as_bytes());
        offsets.push(data.len() as u64);
    }
    let index: Vec<u8> = if index_u64 {
        offsets.iter().flat_map(|o| o.to_le_bytes()).collect()
    } else {
        offsets
            .iter()
            .flat_map(|o| (*o as u32).to_le_bytes())
            .collect()
    };
    let len = (index.len() as u64).to_le_bytes();
    let chunk = if at_start {
        [&len[..], &index, &data].concat()
    } else {
        [&data[..], &index, &len].concat()
    };
    let z = ZarrsVlen {
        index_codecs: CodecChain::plain(),
        data_codecs: CodecChain::plain(),
        index_u64,
        index_location: if at_start {
            IndexLocation::Start
        } else {
            IndexLocation::End
        },
    };
    (z, Bytes::from(chunk))
}

#[test]
fn zarrs_vlen_is_zero_copy() {
    for (u64_index, at_start) in [(true, true), (false, false), (true, false), (false, true)] {
        let (z, chunk) = zarrs_chunk(u64_index, at_start);
        let t = if u64_index {
            StringType::LargeUtf8
        } else {
            StringType::Utf8
        };
        let a = decode_chunk(
            &chain(ArrayToBytes::ZarrsVlen(Box::new(z))),
            &DataType::String,
            6,
            chunk.clone(),
            &opts(t),
        )
        .unwrap();
        assert_eq!(strings(a.as_ref()), WORDS);
        let data = a.to_data();
        assert!(
            inside(data.buffers()[1].as_ptr(), data.buffers()[1].len(), &chunk),
            "data copied"
        );
    }
}

fn numcodecs_err(chunk: Vec<u8>, n: usize, t: StringType) -> crate::ChunkError {
    decode_chunk(
        &chain(ArrayToBytes::VlenUtf8),
        &DataType::String,
        n,
        Bytes::from(chunk),
        &opts(t),
    )
    .unwrap_err()
}

#[test]
fn numcodecs_malformed() {
    let good = encode::vlen_numcodecs_items(&items(), b"").unwrap();
    for t in string_types() {
        // Truncated anywhere.
        for cut in [0, 3, 5, 9, good.len() - 1] {
            let e = numcodecs_err(good[..cut].to_vec(), 6, t);
            assert!(
                matches!(e, ChunkError::Truncated(_) | ChunkError::ItemCount { .. }),
                "cut {cut}: {e}"
            );
        }
        // Wrong item count.
        assert!(matches!(
            numcodecs_err(good.clone(), 7, t),
            ChunkError::ItemCount {
                expected: 7,
                found: 6
            }
        ));
        // A huge count must not allocate: it is rejected against the buffer size.
        let mut huge = good.clone();
        huge[..4].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(matches!(
            numcodecs_err(huge, u32::MAX as usize, t),
            ChunkError::Truncated(_)
        ));
        // A huge item length: past the item limit, refused before its bytes are looked for.
        let mut long = good.clone();
        long[4..8].copy_from_slice(&(u32::MAX - 1).to_le_bytes());
        assert!(matches!(
            numcodecs_err(long, 6, t),
            ChunkError::ItemTooLarge { element: 0, .. }
        ));
        // An item announcing the bytes that should hold the later items' length headers (the
        // count fits the chunk, the data size does not).
        let mut eats_headers = 6u32.to_le_bytes().to_vec();
        eats_headers.extend_from_slice(&20u32.to_le_bytes());
        eats_headers.extend_from_slice(&[b'a'; 20]);
        assert!(matches!(
            numcodecs_err(eats_headers, 6, t),
            ChunkError::Truncated(_)
        ));
        // Trailing garbage.
        let mut trailing = good.clone();
        trailing.push(0);
        assert!(matches!(
            numcodecs_err(trailing, 6, t),
            ChunkError::Invalid(_)
        ));
        // Invalid UTF-8 (a lone continuation byte) in element 2.
        let bad = vec![
            Some(&b"ok"[..]),
            Some(b"fine"),
            Some(b"\x80bad"),
            Some(b"x"),
        ];
        let chunk = encode::vlen_numcodecs_items(&bad, b"").unwrap();
        assert!(
            matches!(numcodecs_err(chunk, 4, t), ChunkError::Utf8 { element: 2 }),
            "{t:?}"
        );
        // A multi-byte character split across two elements: each string alone is invalid even
        // though the concatenation is valid UTF-8.
        let split = vec![Some(&"é".as_bytes()[..1]), Some(&"é".as_bytes()[1..])];
        let chunk = encode::vlen_numcodecs_items(&split, b"").unwrap();
        assert!(
            matches!(numcodecs_err(chunk, 2, t), ChunkError::Utf8 { .. }),
            "{t:?}"
        );
    }
}

#[test]
fn binary_accepts_any_bytes() {
    let bad = vec![Some(&b"\xff\x00"[..]), Some(b"")];
    let chunk = Bytes::from(encode::vlen_numcodecs_items(&bad, b"").unwrap());
    let a = decode_chunk(
        &chain(ArrayToBytes::VlenBytes),
        &DataType::Bytes,
        2,
        chunk,
        &opts(StringType::Utf8),
    )
    .unwrap();
    assert_eq!(a.as_binary::<i32>().value(0), b"\xff\x00");
}

fn arrow_err(chunk: Vec<u8>, n: usize) -> ChunkError {
    decode_chunk(
        &chain(ArrayToBytes::ArrowVlen { large: false }),
        &DataType::String,
        n,
        Bytes::from(chunk),
        &opts(StringType::Utf8),
    )
    .unwrap_err()
}

fn set_offset(chunk: &mut [u8], i: usize, v: i32) {
    chunk[i * 4..i * 4 + 4].copy_from_slice(&v.to_le_bytes());
}

#[test]
fn arrow_layout_malformed() {
    let good = encode::arrow_vlen_items(&items(), b"", false).unwrap();
    let mut decreasing = good.clone();
    set_offset(&mut decreasing, 2, 1);
    assert!(matches!(arrow_err(decreasing, 6), ChunkError::Offsets(_)));
    let mut past_end = good.clone();
    set_offset(&mut past_end, 6, 100_000);
    assert!(matches!(arrow_err(past_end, 6), ChunkError::Offsets(_)));
    let mut negative = good.clone();
    set_offset(&mut negative, 0, -4);
    assert!(matches!(arrow_err(negative, 6), ChunkError::Offsets(_)));
    // An offset inside a multi-byte character.
    let mut split = good.clone();
    set_offset(&mut split, 3, 12); // "ünïcödé" starts at 5: ü n ï c take 5..11, ö is 11..13
    let e = arrow_err(split, 6);
    assert!(matches!(e, ChunkError::Utf8 { element: 2 }), "{e}");
    assert!(matches!(
        arrow_err(good[..10].to_vec(), 6),
        ChunkError::Truncated(_)
    ));
    // Bytes after the last offset belong to no string: invalid UTF-8 there is cut off (Arrow
    // requires all of a string array's values buffer to be UTF-8; found by fuzzing), invalid
    // UTF-8 before the first offset is an error.
    let mut tail = good.clone();
    tail.extend_from_slice(&[0xff, 0xfe]);
    let decoded = decode_chunk(
        &chain(ArrayToBytes::ArrowVlen { large: false }),
        &DataType::String,
        6,
        Bytes::from(tail),
        &opts(StringType::Utf8),
    )
    .unwrap();
    assert_eq!(strings(&decoded), WORDS);
    arrow_array::Array::to_data(&decoded)
        .validate_full()
        .unwrap();
    let mut head = good.clone();
    let data_start = 64; // (6 + 1) offsets of 4 bytes, padded to 64
    head[data_start] = 0xff;
    set_offset(&mut head, 0, 1);
    let e = arrow_err(head, 6);
    assert!(matches!(e, ChunkError::Utf8 { .. }), "{e}");
    // Too many elements for the chunk: the offsets cannot be there.
    assert!(matches!(
        arrow_err(good.clone(), 1_000_000),
        ChunkError::Truncated(_)
    ));
}

#[test]
fn zarrs_vlen_malformed() {
    let (z, chunk) = zarrs_chunk(true, true);
    let c = chain(ArrayToBytes::ZarrsVlen(Box::new(z)));
    // Index length larger than the chunk.
    let mut bad = chunk.to_vec();
    bad[..8].copy_from_slice(&u64::MAX.to_le_bytes());
    let e = decode_chunk(
        &c,
        &DataType::String,
        6,
        Bytes::from(bad),
        &opts(StringType::Utf8),
    )
    .unwrap_err();
    assert!(matches!(e, ChunkError::Truncated(_)), "{e}");
    // Offset above i64::MAX (as uint64) is rejected, not wrapped.
    let mut bad = chunk.to_vec();
    bad[8 + 8..8 + 16].copy_from_slice(&u64::MAX.to_le_bytes());
    let e = decode_chunk(
        &c,
        &DataType::String,
        6,
        Bytes::from(bad),
        &opts(StringType::Utf8),
    )
    .unwrap_err();
    assert!(matches!(e, ChunkError::Offsets(_)), "{e}");
    // Wrong element count.
    let e = decode_chunk(&c, &DataType::String, 5, chunk, &opts(StringType::Utf8)).unwrap_err();
    assert!(matches!(e, ChunkError::Offsets(_)), "{e}");
}

#[test]
#[cfg_attr(miri, ignore = "zstd is C code, which Miri cannot run")]
fn zarrs_vlen_data_stops_at_the_last_offset() {
    // Data that decompresses past the last offset (here 64 MiB behind a 6-string index) stops
    // at what the index declares, not at the 2 GiB per-chunk cap.
    let zstd = BytesToBytes::Zstd {
        level: 3,
        checksum: false,
    };
    let (mut z, chunk) = zarrs_chunk(true, true);
    let index_end = 8 + 7 * 8;
    z.data_codecs.bytes_to_bytes = vec![zstd.clone()];
    let bomb = zstd.encode(&vec![b'a'; 64 << 20]).unwrap();
    let bombed = [&chunk[..index_end], &bomb[..]].concat();
    let e = decode_chunk(
        &chain(ArrayToBytes::ZarrsVlen(Box::new(z.clone()))),
        &DataType::String,
        6,
        Bytes::from(bombed),
        &opts(StringType::Utf8),
    )
    .unwrap_err();
    assert!(matches!(e, ChunkError::TooLarge(_)), "{e}");
    // The same chain with the right data decodes.
    let data = zstd.encode(&chunk[index_end..]).unwrap();
    let good = [&chunk[..index_end], &data[..]].concat();
    let decoded = decode_chunk(
        &chain(ArrayToBytes::ZarrsVlen(Box::new(z))),
        &DataType::String,
        6,
        Bytes::from(good),
        &opts(StringType::Utf8),
    )
    .unwrap();
    assert_eq!(strings(&decoded), WORDS);
}

#[test]
#[cfg_attr(miri, ignore = "zstd is C code, which Miri cannot run")]
fn compressed_chunks_and_corrupt_streams() {
    let raw = encode::vlen_numcodecs_items(&items(), b"").unwrap();
    let zstd = BytesToBytes::Zstd {
        level: 3,
        checksum: false,
    };
    let c = CodecChain {
        array_to_array: vec![],
        array_to_bytes: ArrayToBytes::VlenUtf8,
        bytes_to_bytes: vec![zstd.clone(), BytesToBytes::Crc32c],
    };
    let stored = BytesToBytes::Crc32c
        .encode(&zstd.encode(&raw).unwrap())
        .unwrap();
    let a = decode_chunk(
        &c,
        &DataType::String,
        6,
        Bytes::from(stored.clone()),
        &opts(StringType::Utf8),
    )
    .unwrap();
    assert_eq!(strings(a.as_ref()), WORDS);
    let mut flipped = stored.clone();
    flipped[5] ^= 0x40;
    let e = decode_chunk(
        &c,
        &DataType::String,
        6,
        Bytes::from(flipped),
        &opts(StringType::Utf8),
    )
    .unwrap_err();
    assert!(matches!(e, ChunkError::Checksum { .. }), "{e}");
    let c_no_crc = CodecChain {
        bytes_to_bytes: vec![zstd.clone()],
        ..c.clone()
    };
    let compressed = zstd.encode(&raw).unwrap();
    let e = decode_chunk(
        &c_no_crc,
        &DataType::String,
        6,
        Bytes::from(compressed[..compressed.len() / 2].to_vec()),
        &opts(StringType::Utf8),
    )
    .unwrap_err();
    assert!(
        matches!(e, ChunkError::Codec { .. } | ChunkError::Truncated(_)),
        "{e}"
    );
}

#[test]
fn fixed_sizes_are_checked() {
    let c = chain(ArrayToBytes::Bytes {
        endian: Some(crate::metadata::Endian::Little),
    });
    let e = decode_chunk(
        &c,
        &DataType::Int32,
        4,
        Bytes::from(vec![0u8; 15]),
        &opts(StringType::Utf8),
    )
    .unwrap_err();
    assert!(matches!(
        e,
        ChunkError::Size {
            expected: 16,
            found: 15
        }
    ));
    // Big-endian is swapped.
    let be = chain(ArrayToBytes::Bytes {
        endian: Some(crate::metadata::Endian::Big),
    });
    let a = decode_chunk(
        &be,
        &DataType::Int32,
        2,
        Bytes::from(vec![0, 0, 1, 2, 0xff, 0xff, 0xff, 0xfe]),
        &opts(StringType::Utf8),
    )
    .unwrap();
    let v = a.as_primitive::<arrow_array::types::Int32Type>();
    assert_eq!(v.values().to_vec(), vec![258, -2]);
}

#[test]
#[cfg_attr(
    miri,
    ignore = "Miri gives a Vec<u8> no more alignment than 1, so the aligned (zero-copy) path is not taken"
)]
fn aligned_numbers_are_zero_copy() {
    let values: Vec<u8> = (0..64u64).flat_map(|v| v.to_le_bytes()).collect();
    let chunk = Bytes::from(values);
    let c = chain(ArrayToBytes::Bytes {
        endian: Some(crate::metadata::Endian::Little),
    });
    let a = decode_chunk(
        &c,
        &DataType::UInt64,
        64,
        chunk.clone(),
        &opts(StringType::Utf8),
    )
    .unwrap();
    assert_eq!(a.to_data().buffers()[0].as_ptr(), chunk.as_ptr());
}

/// UTF-32 elements of 1- to 4-byte characters become the strings numpy reads: trailing NULs
/// stripped, an embedded NUL kept, an all-NUL element empty; in every string type.
#[test]
fn utf32_transcodes_as_numpy_reads() {
    let c = chain(ArrayToBytes::Bytes {
        endian: Some(crate::metadata::Endian::Little),
    });
    let units = 6;
    let want = ["", "a", "ünï", "🌊x€", "a\0b", "123456", "ascii!"];
    let mut buf = Vec::new();
    for s in want {
        let mut chars: Vec<u32> = s.chars().map(u32::from).collect();
        chars.resize(units, 0);
        buf.extend(chars.iter().flat_map(|u| u.to_le_bytes()));
    }
    for t in string_types() {
        let a = decode_chunk(
            &c,
            &DataType::FixedUtf32 {
                length_bytes: 4 * units,
            },
            want.len(),
            Bytes::from(buf.clone()),
            &opts(t),
        )
        .unwrap();
        assert_eq!(strings(a.as_ref()), want, "{t:?}");
    }
}

#[test]
fn utf32_invalid_code_point() {
    let c = chain(ArrayToBytes::Bytes {
        endian: Some(crate::metadata::Endian::Little),
    });
    let mut buf = Vec::new();
    buf.extend_from_slice(&('a' as u32).to_le_bytes());
    buf.extend_from_slice(&0u32.to_le_bytes());
    buf.extend_from_slice(&0xD800u32.to_le_bytes()); // a surrogate
    buf.extend_from_slice(&0u32.to_le_bytes());
    buf.extend_from_slice(&('b' as u32).to_le_bytes());
    buf.extend_from_slice(&0x11_0000u32.to_le_bytes()); // past U+10FFFF
    for t in string_types() {
        for (n, element) in [(2, 1), (3, 1)] {
            let e = decode_chunk(
                &c,
                &DataType::FixedUtf32 { length_bytes: 8 },
                n,
                Bytes::from(buf[..8 * n].to_vec()),
                &opts(t),
            )
            .unwrap_err();
            assert!(
                matches!(e, ChunkError::Utf32 { element: e2, .. } if e2 == element),
                "{e}"
            );
            assert!(e.to_string().contains("UTF-32"), "{e}");
        }
        let e = decode_chunk(
            &c,
            &DataType::FixedUtf32 { length_bytes: 8 },
            1,
            Bytes::from(buf[16..24].to_vec()),
            &opts(t),
        )
        .unwrap_err();
        assert!(
            matches!(
                e,
                ChunkError::Utf32 {
                    element: 0,
                    code_point: 0x11_0000
                }
            ),
            "{e}"
        );
    }
}

#[test]
fn selection_prefix_and_indices() {
    // 1-D edge: a prefix.
    assert_eq!(
        ChunkSelection::new(&[10], &[3], None),
        ChunkSelection::Prefix(3)
    );
    // 2-D edge in the first dimension only: still a prefix.
    assert_eq!(
        ChunkSelection::new(&[4, 3], &[2, 3], None),
        ChunkSelection::Prefix(6)
    );
    // Edge in the last dimension: gather.
    assert_eq!(
        ChunkSelection::new(&[2, 3], &[2, 2], None),
        ChunkSelection::Indices(vec![0, 1, 3, 4])
    );
    // Transposed (F order) 2x3 chunk, full: element (r, c) is stored at c*2 + r.
    assert_eq!(
        ChunkSelection::new(&[2, 3], &[2, 3], Some(&[1, 0])),
        ChunkSelection::Indices(vec![0, 2, 4, 1, 3, 5])
    );
}

/// `strings` written as a numcodecs `vlen-utf8` chunk and decoded as `t`.
fn numcodecs_round_trip(strings: &[String], t: StringType) -> ArrayRef {
    let items: Vec<Option<&[u8]>> = strings.iter().map(|s| Some(s.as_bytes())).collect();
    let chunk = encode::vlen_numcodecs_items(&items, b"").unwrap();
    decode_chunk(
        &chain(ArrayToBytes::VlenUtf8),
        &DataType::String,
        strings.len(),
        Bytes::from(chunk),
        &opts(t),
    )
    .unwrap()
}

/// Items of every length around the short-copy block size, the last ones short and long, so
/// that each copy path (fixed block, near the end of the chunk, long item) is taken.
#[test]
fn numcodecs_lengths_around_the_short_copy() {
    use super::vlen::SHORT;
    let strings_of = strings;
    let strings: Vec<String> = (0..2 * SHORT + 8)
        .chain((0..2 * SHORT + 8).rev())
        .chain([SHORT + 1, 1, SHORT, 0, SHORT - 1])
        .enumerate()
        .map(|(i, len)| {
            (0..len)
                .map(|j| (b'a' + ((i + j) % 26) as u8) as char)
                .collect()
        })
        .collect();
    for t in string_types() {
        let array = numcodecs_round_trip(&strings, t);
        assert_eq!(strings_of(array.as_ref()), strings, "{t:?}");
        // Views are exactly Arrow's own (inline bytes zero-padded: engines compare short
        // strings by their 16 view bytes).
        #[cfg(feature = "utf8view")]
        if t == StringType::View {
            let views = array.as_string_view();
            let data = views.data_buffers()[0].as_slice();
            for (i, v) in views.views().iter().enumerate() {
                let len = *v as u32 as usize;
                let offset = if len > 12 { (*v >> 96) as usize } else { 0 };
                let bytes = if len > 12 {
                    &data[offset..offset + len]
                } else {
                    strings[i].as_bytes()
                };
                let want = arrow_array::builder::make_view(bytes, 0, offset as u32);
                assert_eq!(*v, want, "view of item {i}");
            }
        }
    }
}

/// A character split across two items whose length header reads as its continuation bytes: the
/// chunk past its count is valid UTF-8 as a whole, yet the first item alone is not.
#[test]
fn numcodecs_character_split_by_a_length_header() {
    // Item 0 ends with 0xE2, the lead byte of '€' (E2 82 AC); item 1 is 0xAC82 bytes long, so
    // its header is 82 AC 00 00 and completes the character.
    let long = vec![b'x'; 0xAC82];
    let items = vec![Some(&b"ab\xE2"[..]), Some(&long[..])];
    let chunk = encode::vlen_numcodecs_items(&items, b"").unwrap();
    assert!(std::str::from_utf8(&chunk[4..]).is_ok(), "the premise");
    for t in string_types() {
        assert!(
            matches!(
                numcodecs_err(chunk.clone(), 2, t),
                ChunkError::Utf8 { element: 0 }
            ),
            "{t:?}"
        );
    }
}

#[test]
#[cfg_attr(
    miri,
    ignore = "300 KB of items is hours in Miri; the smaller numcodecs tests cover the same code"
)]
fn numcodecs_utf8_checked_in_every_window() {
    // ~300 KB of items: several of the view path's UTF-8 windows. Multi-byte characters
    // throughout; one bad byte far into the chunk must be found and named.
    let strings: Vec<String> = (0..20_000usize)
        .map(|i| format!("é{i}€{}", "x".repeat(i % 7)))
        .collect();
    let bytes: usize = strings.iter().map(|s| 4 + s.len()).sum();
    assert!(bytes > 4 * 64 * 1024, "the premise: several windows");
    for t in string_types() {
        let array = numcodecs_round_trip(&strings, t);
        assert_eq!(self::strings(array.as_ref()), strings, "{t:?}");
    }
    for bad_item in [0usize, 6_000, 19_999] {
        let mut items: Vec<Vec<u8>> = strings.iter().map(|s| s.as_bytes().to_vec()).collect();
        // The 'é' (C3 A9) loses its continuation byte.
        items[bad_item][1] = b'z';
        let refs: Vec<Option<&[u8]>> = items.iter().map(|s| Some(s.as_slice())).collect();
        let chunk = encode::vlen_numcodecs_items(&refs, b"").unwrap();
        for t in string_types() {
            match numcodecs_err(chunk.clone(), strings.len(), t) {
                crate::ChunkError::Utf8 { element } => {
                    assert_eq!(element, bad_item as u64, "{t:?}")
                }
                other => panic!("{t:?}: {other}"),
            }
        }
    }
}

#[test]
fn low_precision_types_widen_through_bytes_and_packbits() {
    use crate::data_type::{parse_fill_value, parse_v3_data_type};
    use arrow_array::types::{Float16Type, Float32Type, Int8Type, UInt8Type};
    use serde_json::json;
    let parse = |dt: &str, codecs: serde_json::Value| {
        let dt = parse_v3_data_type(&json!(dt)).unwrap();
        let chain = crate::codec::parse_v3_chain(codecs.as_array().unwrap(), &dt, 1).unwrap();
        (dt, chain)
    };
    let o = ZarrReadOptions::default();
    let bytes_le = json!([{"name": "bytes", "configuration": {"endian": "little"}}]);
    let bytes_be = json!([{"name": "bytes", "configuration": {"endian": "big"}}]);

    // float8_e5m2: 1, -2, +inf, NaN → Float16.
    let (dt, c) = parse("float8_e5m2", bytes_le.clone());
    let a = decode_chunk(
        &c,
        &dt,
        4,
        Bytes::from_static(&[0x3c, 0xc0, 0x7c, 0x7e]),
        &o,
    )
    .unwrap();
    let v: Vec<f32> = a
        .as_primitive::<Float16Type>()
        .values()
        .iter()
        .map(|h| h.to_f32())
        .collect();
    assert_eq!(&v[..3], &[1.0, -2.0, f32::INFINITY]);
    assert!(v[3].is_nan());

    // bfloat16, big-endian → Float32; e8m0fnu → Float32 (2^-127 stays exact).
    let (dt, c) = parse("bfloat16", bytes_be);
    let a = decode_chunk(
        &c,
        &dt,
        2,
        Bytes::from_static(&[0x3f, 0x80, 0xc0, 0x49]),
        &o,
    )
    .unwrap();
    assert_eq!(a.as_primitive::<Float32Type>().values(), &[1.0, -3.140625]);
    let (dt, c) = parse("float8_e8m0fnu", bytes_le.clone());
    let a = decode_chunk(&c, &dt, 2, Bytes::from_static(&[0x00, 0x80]), &o).unwrap();
    assert_eq!(
        a.as_primitive::<Float32Type>().values(),
        &[2f32.powi(-127), 2.0]
    );

    // int4 under bytes (high bits ignored) and under packbits; uint2 packed.
    let (dt, c) = parse("int4", json!([{"name": "bytes"}]));
    let a = decode_chunk(&c, &dt, 3, Bytes::from_static(&[0xaf, 0x07, 0x08]), &o).unwrap();
    assert_eq!(a.as_primitive::<Int8Type>().values(), &[-1, 7, -8]);
    let (dt, c) = parse(
        "int4",
        json!([{"name": "packbits", "configuration": {"padding_encoding": "first_byte"}}]),
    );
    let a = decode_chunk(&c, &dt, 3, Bytes::from_static(&[4, 0x7f, 0x08]), &o).unwrap();
    assert_eq!(a.as_primitive::<Int8Type>().values(), &[-1, 7, -8]);
    let (dt, c) = parse("uint2", json!([{"name": "packbits"}, {"name": "gzip"}]));
    let packed = BytesToBytes::Gzip { level: 1 }
        .encode(&[0b1110_0100, 0b01])
        .unwrap();
    let a = decode_chunk(&c, &dt, 5, Bytes::from(packed), &o).unwrap();
    assert_eq!(a.as_primitive::<UInt8Type>().values(), &[0, 1, 2, 3, 1]);
    // A packed chunk of the wrong size is an error, not a panic.
    assert!(decode_chunk(
        &c,
        &dt,
        9,
        Bytes::from(BytesToBytes::Gzip { level: 1 }.encode(&[1]).unwrap()),
        &o
    )
    .is_err());

    // Fill values: NaN of e4m3fnuz is 0x80; hex bits as stored; values the type cannot hold
    // are errors.
    let fnuz = parse_v3_data_type(&json!("float8_e4m3fnuz")).unwrap();
    assert_eq!(
        &*parse_fill_value(&fnuz, &json!("NaN"), false).unwrap().bytes,
        &[0x80]
    );
    let fill = parse_fill_value(&fnuz, &json!("0x40"), false).unwrap();
    let a = fill_array(&fnuz, &fill, 2, &o).unwrap();
    assert_eq!(a.as_primitive::<Float16Type>().value(1).to_f32(), 1.0);
    let f4 = parse_v3_data_type(&json!("float4_e2m1fn")).unwrap();
    assert!(parse_fill_value(&f4, &json!("NaN"), false).is_err());
    assert!(parse_fill_value(&f4, &json!(0.3), false).is_err());
    let int2 = parse_v3_data_type(&json!("int2")).unwrap();
    assert_eq!(
        &*parse_fill_value(&int2, &json!(-2), false).unwrap().bytes,
        &[0xfe]
    );
    assert!(parse_fill_value(&int2, &json!(2), false).is_err());
}

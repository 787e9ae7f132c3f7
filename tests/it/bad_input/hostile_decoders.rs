//! Hostile decoders inputs (issue 21): each test fails without its fix.
//!
//! Decompression bombs small on disk that decode to a gigabyte, an element past the item
//! limit, a json2 list longer than its chunk, a categories array claiming 2^31 values: each
//! is a typed error naming the array and the chunk (or, for categories, reads only what the
//! codes reach), decided at the bound a chunk's element count allows — never after
//! decompressing or allocating what the stored bytes claim.

use bytes::Bytes;
use serde_json::json;
use zarrow::internals::{ArrayToBytes, CodecChain};
use zarrow::BytesToBytes;
use zarrow::{ChunkError, DataType, Error, ReadLimits, StringType, ZarrReadOptions};

use super::{array_meta, Fixture};

/// What a bomb decodes to: a `vlen-utf8` count header of 4, a first item announcing 1 GiB,
/// then zeros to 1 GiB in all.
const BOMB: usize = 1 << 30;
/// The bombs are built from pieces of this many decoded bytes.
const PIECE: usize = 1 << 20;

fn bomb_head() -> Vec<u8> {
    let mut head = 4u32.to_le_bytes().to_vec();
    head.extend_from_slice(&(BOMB as u32).to_le_bytes());
    head.resize(PIECE, 0);
    head
}

/// A stored chunk that decodes to [`BOMB`] bytes, built with the codec's real encoder: for
/// the codecs whose streams concatenate (gzip members, zstd frames, bzip2 and xz streams),
/// the first piece then the encoding of a zero piece repeated; for zlib, one stream whose
/// zero pieces are full-flushed deflate blocks (the same bytes each time), with the
/// stream's true Adler-32.
fn bomb(codec: &BytesToBytes) -> Vec<u8> {
    let pieces = BOMB / PIECE;
    if let BytesToBytes::Zlib { .. } = codec {
        return zlib_bomb(pieces);
    }
    let mut out = codec.encode(&bomb_head()).unwrap();
    let zeros = codec.encode(&vec![0u8; PIECE]).unwrap();
    for _ in 1..pieces {
        out.extend_from_slice(&zeros);
    }
    out
}

fn zlib_bomb(pieces: usize) -> Vec<u8> {
    use flate2::{Compress, Compression, FlushCompress};
    let mut z = Compress::new(Compression::best(), true);
    let mut flushed = |input: &[u8]| {
        let mut out = Vec::with_capacity(PIECE);
        let before = z.total_in();
        z.compress_vec(input, &mut out, FlushCompress::Full)
            .unwrap();
        assert_eq!(z.total_in() - before, input.len() as u64);
        out
    };
    let mut out = flushed(&bomb_head());
    let zeros = flushed(&vec![0u8; PIECE]);
    assert_eq!(
        flushed(&vec![0u8; PIECE]),
        zeros,
        "a full flush repeats its block"
    );
    for _ in 1..pieces {
        out.extend_from_slice(&zeros);
    }
    out.extend_from_slice(&[0x03, 0x00]); // an empty final fixed-Huffman block
                                          // Adler-32 of the decoded bytes: the head's, then zeros only add to the second sum.
    let (mut a, mut b) = (1u64, 0u64);
    for &byte in &bomb_head() {
        a = (a + u64::from(byte)) % 65521;
        b = (b + a) % 65521;
    }
    b = (b + a * (BOMB - PIECE) as u64) % 65521;
    out.extend_from_slice(&(((b << 16) | a) as u32).to_be_bytes());
    out
}

/// The bound a `vlen-utf8` chunk of `n` elements decodes to at most (see
/// `zarrow::internals::decoded_bound`): its count header and, per item, a length header and the
/// item limit.
fn vlen_bound(n: usize) -> usize {
    4 + n * (4 + ReadLimits::default().item_bytes())
}

/// Read chunk 0 of `path` with `opts`: the chunk error, checked to name the array and chunk
/// (key `c/0`, or `0` in a v2 array).
async fn chunk_error_with(f: &Fixture, path: &str, opts: &ZarrReadOptions) -> ChunkError {
    let array = f.open(path).await.unwrap();
    let err = array.read_chunk(&[0], opts).await.unwrap_err();
    let msg = err.to_string();
    match err {
        Error::Chunk {
            array,
            chunk,
            source,
        } => {
            assert_eq!(array, path, "{msg}");
            assert!(chunk == "c/0" || chunk == "0", "{msg}");
            source
        }
        other => panic!("expected a chunk error, got {other:?}"),
    }
}

fn string_types() -> [StringType; 3] {
    [StringType::Utf8, StringType::LargeUtf8, StringType::View]
}

/// Bombs of 2 KB to 1 MB stored, decoding to 1 GiB, in a chunk of four strings: decoding
/// stops at the chunk's bound (4 items of at most the item limit, 64 MiB by default) — the
/// first item's 1 GiB length header is refused where the chunk is read as a stream (gzip,
/// zlib, zstd, whatever the string type), the decompressed bytes where it is decoded whole
/// (bz2, lzma). They used to decompress until the 2 GiB per-chunk cap, in a buffer
/// `read_to_end` doubled on the way.
#[tokio::test]
async fn decompression_bombs_stop_at_the_chunk_bound() {
    let f = Fixture::new();
    let bound = vlen_bound(4);
    let codecs = [
        (BytesToBytes::Zlib { level: 9 }, true),
        (BytesToBytes::Gzip { level: 9 }, true),
        (
            BytesToBytes::Zstd {
                level: 3,
                checksum: false,
            },
            true,
        ),
        (BytesToBytes::Bz2 { level: 9 }, false),
        (BytesToBytes::Lzma { preset: 1 }, false),
    ];
    for (codec, streams) in codecs {
        let name = codec.name();
        let stored = bomb(&codec);
        assert!(stored.len() < 2 << 20, "{name}: {} bytes", stored.len());
        f.put_json(
            &format!("{name}/zarr.json"),
            array_meta(json!([{"name": "vlen-utf8"}, codec.to_v3_json()]), "string"),
        )
        .await;
        f.put(&format!("{name}/c/0"), stored.clone()).await;
        // Decoded whole, the string type makes no difference to the decompression (and each
        // read decompresses to the bound: one is enough).
        let types = if streams {
            &string_types()[..]
        } else {
            &[StringType::View]
        };
        for &t in types {
            let opts = ZarrReadOptions::default().with_string_type(t);
            let e = chunk_error_with(&f, name, &opts).await;
            // Through a codec that streams, every string type is read item by item and stops
            // at the first item's bound; the others decompress whole, to the chunk's bound.
            if streams {
                assert!(
                    matches!(
                        e,
                        ChunkError::ItemTooLarge { element: 0, bytes, limit }
                            if bytes == BOMB as u64 && limit == ReadLimits::default().item_bytes() as u64
                    ),
                    "{name} {t:?}: {e}"
                );
            } else {
                assert!(
                    matches!(&e, ChunkError::TooLarge(m) if m.contains(&bound.to_string())),
                    "{name} {t:?}: {e}"
                );
            }
            // The whole-chunk decoder stops at the same bound.
            let chain = CodecChain {
                array_to_array: vec![],
                array_to_bytes: ArrayToBytes::VlenUtf8,
                bytes_to_bytes: vec![codec.clone()],
            };
            let e = zarrow::internals::decode_chunk(
                &chain,
                &DataType::String,
                4,
                Bytes::from(stored.clone()),
                &opts,
            )
            .unwrap_err();
            let whole = matches!(&e, ChunkError::TooLarge(m) if m.contains(&bound.to_string()));
            let by_runs = streams && matches!(e, ChunkError::ItemTooLarge { element: 0, .. });
            assert!(whole || by_runs, "{name} {t:?} decode_chunk: {e}");
        }
    }
}

/// One element a byte past the item limit (16 MiB by default) in a chunk of four, whose
/// bound has room for it: refused on every path — numcodecs items stored plain (decoded
/// whole) or zstd-compressed (read as a stream), `zarrow.arrow_vlen` offsets — for every
/// string representation, strings and bytes. It used to read (`length(value)` = 16 MiB + 1).
#[tokio::test]
async fn an_element_past_the_item_limit_is_refused() {
    let f = Fixture::new();
    let limit = ReadLimits::default().item_bytes();
    let long = vec![b'a'; limit + 1];
    let items: [&[u8]; 4] = [b"a", &long, b"", b"ccc"];
    let mut numcodecs = 4u32.to_le_bytes().to_vec();
    for item in items {
        numcodecs.extend_from_slice(&(item.len() as u32).to_le_bytes());
        numcodecs.extend_from_slice(item);
    }
    let mut arrow = Vec::new();
    let mut offset = 0i64;
    arrow.extend_from_slice(&offset.to_le_bytes());
    for item in items {
        offset += item.len() as i64;
        arrow.extend_from_slice(&offset.to_le_bytes());
    }
    arrow.resize(64, 0);
    for item in items {
        arrow.extend_from_slice(item);
    }
    let zstd = BytesToBytes::Zstd {
        level: 1,
        checksum: false,
    };
    let layouts = [
        ("plain", json!([{"name": "vlen-utf8"}]), numcodecs.clone()),
        (
            "zstd",
            json!([{"name": "vlen-utf8"}, zstd.to_v3_json()]),
            zstd.encode(&numcodecs).unwrap(),
        ),
        (
            "arrow",
            json!([{"name": "zarrow.arrow_vlen", "configuration": {"offset_type": "int64"}}]),
            arrow,
        ),
    ];
    for (name, codecs, stored) in layouts {
        for data_type in ["string", "bytes"] {
            let path = format!("{name}-{data_type}");
            let mut meta = array_meta(codecs.clone(), data_type);
            if data_type == "bytes" {
                meta["codecs"][0]["name"] = match name {
                    "arrow" => json!("zarrow.arrow_vlen"),
                    _ => json!("vlen-bytes"),
                };
                meta["fill_value"] = json!([]);
            }
            f.put_json(&format!("{path}/zarr.json"), meta).await;
            f.put(&format!("{path}/c/0"), stored.clone()).await;
            for t in string_types() {
                let opts = ZarrReadOptions::default().with_string_type(t);
                let e = chunk_error_with(&f, &path, &opts).await;
                assert!(
                    matches!(
                        e,
                        ChunkError::ItemTooLarge { element: 1, bytes, limit: l }
                            if bytes == (limit + 1) as u64 && l == limit as u64
                    ),
                    "{path} {t:?}: {e}"
                );
                assert!(e.to_string().contains("ZARROW_MAX_ITEM_BYTES"), "{e}");
            }
        }
    }
}

fn json2_meta() -> serde_json::Value {
    json!({
        "zarr_format": 2, "shape": [4], "chunks": [4], "dtype": "|O", "fill_value": 0,
        "order": "C", "compressor": {"id": "zlib", "level": 1},
        "filters": [{"id": "json2", "encoding": "utf-8"}]
    })
}

/// A json2 chunk of four elements whose list holds 200 000 (0.8 MB of JSON): parsed as a
/// stream and refused at the fifth item, with the typed error naming the array and chunk.
/// It used to be parsed whole into a `serde_json::Value` and counted after.
#[tokio::test]
async fn json2_stops_at_the_element_count() {
    let f = Fixture::new();
    f.put_json("j/.zarray", json2_meta()).await;
    let zlib = BytesToBytes::Zlib { level: 1 };
    let good = br#"["a", "bb", null, 0, "|O", [4]]"#;
    f.put("j/0", zlib.encode(good).unwrap()).await;
    let array = f.open("j").await.unwrap();
    let values = array
        .read_chunk(&[0], &ZarrReadOptions::default())
        .await
        .unwrap();
    let text = arrow::util::display::ArrayFormatter::try_new(values.as_ref(), &Default::default())
        .unwrap();
    let got: Vec<String> = (0..4).map(|i| text.value(i).to_string()).collect();
    assert_eq!(got, ["a", "bb", "", "0"]);

    let long = format!(r#"[{} "|O", [4]]"#, r#""a","#.repeat(200_000));
    f.put("j/0", zlib.encode(long.as_bytes()).unwrap()).await;
    match f.chunk_error("j", "0").await {
        ChunkError::TooLarge(m) => {
            assert!(m.contains("json2") && m.contains("4 elements"), "{m}")
        }
        other => panic!("expected json2's refusal, got {other}"),
    }

    // The JSON text is held to the per-chunk cap too (it may be up to six times the strings
    // it holds, which are): 3 MiB of it, mostly blanks, under a 1 MiB cap used to decode.
    let padded = format!(r#"["a", {}"b", "c", "d", "|O", [4]]"#, " ".repeat(3 << 20));
    f.put("j/0", zlib.encode(padded.as_bytes()).unwrap()).await;
    let mut opts = ZarrReadOptions::default();
    assert!(array.read_chunk(&[0], &opts).await.is_ok());
    opts.limits.max_chunk_bytes = 1 << 20;
    let e = chunk_error_with(&f, "j", &opts).await;
    assert!(
        matches!(&e, ChunkError::TooLarge(m) if m.contains(&(1 << 20).to_string())),
        "{e}"
    );
}

/// An AnnData categorical whose `categories` array claims 2^31 values in one chunk, with int8
/// codes: only the 128 categories the codes can reach are read — of the fill value when the
/// chunk is not stored, of the stored chunk's first items (zstd, read as a stream) when it is.
/// The chunk used to be decoded whole (17 GB for the fill value's offsets and bytes).
#[tokio::test]
async fn categories_stop_where_int8_codes_reach() {
    let f = Fixture::new();
    let claimed = 1u64 << 31;
    let group = |attrs: serde_json::Value| json!({"zarr_format": 3, "node_type": "group", "attributes": attrs});
    let array =
        |shape: u64, data_type: &str, codecs: serde_json::Value, fill: serde_json::Value| {
            let mut m = array_meta(codecs, data_type);
            m["shape"] = json!([shape]);
            m["chunk_grid"]["configuration"]["chunk_shape"] = json!([shape]);
            m["fill_value"] = fill;
            m
        };
    let zstd = BytesToBytes::Zstd {
        level: 3,
        checksum: false,
    };
    f.put_json(
        "obs/zarr.json",
        group(
            json!({"encoding-type": "dataframe", "encoding-version": "0.2.0",
                     "_index": "_index", "column-order": ["cell_type"]}),
        ),
    )
    .await;
    f.put_json(
        "obs/_index/zarr.json",
        array(4, "string", json!([{"name": "vlen-utf8"}]), json!("cell")),
    )
    .await;
    f.put_json(
        "obs/cell_type/zarr.json",
        group(
            json!({"encoding-type": "categorical", "encoding-version": "0.2.0",
                     "ordered": false}),
        ),
    )
    .await;
    f.put_json(
        "obs/cell_type/codes/zarr.json",
        array(
            4,
            "int8",
            json!([{"name": "bytes", "configuration": {"endian": "little"}}]),
            json!(3),
        ),
    )
    .await;
    f.put_json(
        "obs/cell_type/categories/zarr.json",
        array(
            claimed,
            "string",
            json!([{"name": "vlen-utf8"}, zstd.to_v3_json()]),
            json!("B"),
        ),
    )
    .await;
    // Not stored: the fill value, 128 times.
    assert_eq!(f.column_text("obs", "cell_type", 4).await, ["B"; 4]);
    // Stored: the count header says 2^31 items, 200 follow, then the stream is cut.
    let mut items = (claimed as u32).to_le_bytes().to_vec();
    for i in 0..200 {
        let label = format!("type-{i}");
        items.extend_from_slice(&(label.len() as u32).to_le_bytes());
        items.extend_from_slice(label.as_bytes());
    }
    f.put("obs/cell_type/categories/c/0", zstd.encode(&items).unwrap())
        .await;
    assert_eq!(f.column_text("obs", "cell_type", 4).await, ["type-3"; 4]);
}

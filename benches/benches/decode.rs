//! Decode throughput of one chunk of 1M strings, per chunk encoding and Arrow output type.
//!
//! ```text
//! corpus (1M strings) ─▶ chunk bytes per encoding ─▶ [zstd level 3] ─▶ decode_chunk ─▶ ArrayRef
//!                         vlen-utf8 / zarrs.vlen /                       (timed)
//!                         arrow_vlen / fixed_length_utf32
//! ```
//!
//! Benchmark ids are `<corpus>/<case>/<compression>`: corpus `ascii12` (ASCII, 12 bytes on
//! average), `ascii100` (ASCII, 100 bytes) or `utf8-12` (mixed 1–4 byte characters, 12 bytes);
//! compression `none` or `zstd3`. Throughput is in bytes of decoded string data (the UTF-8 bytes
//! of all strings), the same for every case of a corpus, so the GB/s figures compare directly.
//! Baselines: `baseline_memcpy` (copy the uncompressed vlen-utf8 chunk into a new buffer),
//! `baseline_zstd-decompress` (decompress the vlen-utf8 chunk only), and zarrs 0.23.14's own
//! decoders (`baseline_zarrs_*`, through its `ArrayToBytesCodecTraits::decode`; they return raw
//! bytes and offsets and do not validate UTF-8).
//!
//! Cases `<case>_runs8192` decode the same chunk as the readers and SQL scans do, a run of 8192
//! rows at a time (`ChunkRows`), each run dropped before the next.
//!
//! Run: `cargo bench -p zarrow-benches --bench decode` (see `benches/README.md`).

use std::borrow::Cow;
use std::hint::black_box;
use std::num::NonZeroU64;
use std::sync::Arc;
use std::time::Duration;

use arrow_array::{Array, ArrayRef, LargeStringArray, StringArray, StringViewArray};
use bytes::Bytes;
use criterion::measurement::WallTime;
use criterion::{BenchmarkGroup, Criterion, Throughput};

use zarrow::internals::encode;
use zarrow::internals::{ArrayToBytes, CodecChain, IndexLocation, ZarrsVlen};
use zarrow::BytesToBytes;
use zarrow::Endian;
use zarrow::{DataType, StringType, ZarrReadOptions};

use zarrs::array::codec::{VlenCodec, VlenUtf8Codec, ZstdCodec};
use zarrs::array::{ArrayToBytesCodecTraits, BytesToBytesCodecTraits, CodecOptions, FillValue};

/// Strings per chunk.
const N: usize = 1_000_000;
/// zstd level of the compressed variants.
const ZSTD_LEVEL: i32 = 3;

// ---------------------------------------------------------------------------------------------
// Corpora

/// xorshift64*: deterministic, dependency-free pseudo-random numbers.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform in `0..n` (n small; the modulo bias is irrelevant here).
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// `N` ASCII strings of printable characters, lengths uniform in `0..=2*avg`.
fn ascii_corpus(avg: u64, seed: u64) -> Vec<String> {
    let mut rng = Rng(seed);
    (0..N)
        .map(|_| {
            let len = rng.below(2 * avg + 1);
            (0..len)
                .map(|_| (b' ' + rng.below(95) as u8) as char)
                .collect()
        })
        .collect()
}

/// `N` strings mixing 1-, 2-, 3- and 4-byte characters (about 70/15/10/5 %), byte lengths close
/// to uniform in `0..=2*avg`.
fn non_ascii_corpus(avg: u64, seed: u64) -> Vec<String> {
    const TWO: &[char] = &['é', 'ü', 'ß', 'ñ', 'ж', 'λ', 'ø', 'ç'];
    const THREE: &[char] = &['中', '文', '字', '€', '☃', 'あ', '한', '₂'];
    const FOUR: &[char] = &['😀', '🦀', '𝄞', '🌍'];
    let mut rng = Rng(seed);
    (0..N)
        .map(|_| {
            let target = rng.below(2 * avg + 1) as usize;
            let mut s = String::with_capacity(target);
            loop {
                let r = rng.below(100);
                let c = if r < 70 {
                    (b' ' + rng.below(95) as u8) as char
                } else if r < 85 {
                    TWO[rng.below(TWO.len() as u64) as usize]
                } else if r < 95 {
                    THREE[rng.below(THREE.len() as u64) as usize]
                } else {
                    FOUR[rng.below(FOUR.len() as u64) as usize]
                };
                if s.len() + c.len_utf8() > target {
                    break;
                }
                s.push(c);
            }
            s
        })
        .collect()
}

// ---------------------------------------------------------------------------------------------
// Chunk builders (the ones the writer does not provide)

/// A `zarrs.vlen` chunk: u64 index length, uint64 LE offsets (plain `bytes`), then the data.
fn zarrs_vlen_chunk(strings: &StringArray) -> Vec<u8> {
    let index_len = (strings.len() + 1) * 8;
    let data = strings.value_data();
    let mut out = Vec::with_capacity(8 + index_len + data.len());
    out.extend_from_slice(&(index_len as u64).to_le_bytes());
    for o in strings.value_offsets() {
        out.extend_from_slice(&(*o as u64).to_le_bytes());
    }
    out.extend_from_slice(data);
    out
}

/// A `fixed_length_utf32` chunk (UTF-32LE, NUL-padded) and its `length_bytes` (4 × the number of
/// characters of the longest string).
fn utf32_chunk(strings: &[String]) -> (Vec<u8>, usize) {
    let chars = strings
        .iter()
        .map(|s| s.chars().count())
        .max()
        .unwrap_or(0)
        .max(1);
    let length_bytes = 4 * chars;
    let mut out = vec![0u8; length_bytes * strings.len()];
    for (elem, s) in out.chunks_exact_mut(length_bytes).zip(strings) {
        for (unit, c) in elem.chunks_exact_mut(4).zip(s.chars()) {
            unit.copy_from_slice(&(c as u32).to_le_bytes());
        }
    }
    (out, length_bytes)
}

fn zstd_codec() -> BytesToBytes {
    BytesToBytes::Zstd {
        level: ZSTD_LEVEL,
        checksum: false,
    }
}

/// A chain with `array_to_bytes` and, when `zstd`, zstd level 3 after it.
fn chain(array_to_bytes: ArrayToBytes, zstd: bool) -> CodecChain {
    CodecChain {
        array_to_array: Vec::new(),
        array_to_bytes,
        bytes_to_bytes: if zstd { vec![zstd_codec()] } else { Vec::new() },
    }
}

fn zarrs_vlen_codec() -> ArrayToBytes {
    let plain = |endian| CodecChain {
        array_to_array: Vec::new(),
        array_to_bytes: ArrayToBytes::Bytes { endian },
        bytes_to_bytes: Vec::new(),
    };
    ArrayToBytes::ZarrsVlen(Box::new(ZarrsVlen {
        index_codecs: plain(Some(Endian::Little)),
        data_codecs: plain(None),
        index_u64: true,
        index_location: IndexLocation::Start,
    }))
}

// ---------------------------------------------------------------------------------------------
// Cases

/// One stored chunk in both compressions.
struct Chunk {
    none: Bytes,
    zstd3: Bytes,
}

impl Chunk {
    fn new(raw: Vec<u8>) -> Self {
        let zstd3 = Bytes::from(zstd_codec().encode(&raw).expect("zstd encode"));
        Chunk {
            none: Bytes::from(raw),
            zstd3,
        }
    }

    fn get(&self, zstd: bool) -> &Bytes {
        if zstd {
            &self.zstd3
        } else {
            &self.none
        }
    }
}

fn opts(string_type: StringType) -> ZarrReadOptions {
    ZarrReadOptions::default().with_string_type(string_type)
}

/// Check once, outside the timing, that a decoded chunk holds the corpus.
fn check(array: &ArrayRef, expected: &StringArray, what: &str) {
    assert_eq!(array.len(), expected.len(), "{what}: length");
    let any = array.as_any();
    let ok = if let Some(a) = any.downcast_ref::<StringArray>() {
        a.iter().eq(expected.iter())
    } else if let Some(a) = any.downcast_ref::<LargeStringArray>() {
        a.iter().eq(expected.iter())
    } else if let Some(a) = any.downcast_ref::<StringViewArray>() {
        a.iter().eq(expected.iter())
    } else if let Some(a) = any.downcast_ref::<arrow_array::BinaryArray>() {
        a.iter().eq(expected.iter().map(|s| s.map(str::as_bytes)))
    } else {
        panic!("{what}: unexpected type {}", array.data_type())
    };
    assert!(ok, "{what}: values differ from the corpus");
}

/// Register `case` (decode `chunk` through `chain` as `data_type`) for both compressions.
fn bench_zarrow(
    group: &mut BenchmarkGroup<'_, WallTime>,
    case: &str,
    codec: &ArrayToBytes,
    data_type: &DataType,
    chunk: &Chunk,
    string_type: StringType,
    expected: &StringArray,
) {
    let o = opts(string_type);
    for zstd in [false, true] {
        let ch = chain(codec.clone(), zstd);
        let bytes = chunk.get(zstd);
        let decoded = zarrow::internals::decode_chunk(&ch, data_type, N, bytes.clone(), &o)
            .unwrap_or_else(|e| panic!("{case}: {e}"));
        check(&decoded, expected, case);
        drop(decoded);
        let compression = if zstd { "zstd3" } else { "none" };
        group.bench_function(format!("{case}/{compression}"), |b| {
            b.iter(|| {
                zarrow::internals::decode_chunk(&ch, data_type, N, black_box(bytes.clone()), &o)
                    .expect("decode")
            })
        });
    }
}

/// Decode `chunk` a run of [`RUN`] rows at a time, as the record-batch readers and SQL scans
/// do ([`zarrow::internals::ChunkRows`]), keeping each run only until the next: case
/// `<case>_runs8192`.
fn bench_zarrow_runs(
    group: &mut BenchmarkGroup<'_, WallTime>,
    case: &str,
    codec: &ArrayToBytes,
    chunk: &Chunk,
    string_type: StringType,
    expected: &StringArray,
) {
    let o = opts(string_type);
    let all = zarrow::internals::ChunkSelection::Prefix(N);
    let metrics = zarrow::ScanMetrics::new();
    for zstd in [false, true] {
        let ch = chain(codec.clone(), zstd);
        let bytes = chunk.get(zstd);
        let runs = |bytes: Bytes| {
            zarrow::internals::ChunkRows::new(&ch, &DataType::String, N, &all, bytes, &o, &metrics)
                .expect("decode")
        };
        let mut rows = runs(bytes.clone());
        let mut got: Vec<ArrayRef> = Vec::new();
        while rows.remaining() > 0 {
            got.push(rows.next_rows(RUN).expect("run"));
        }
        let got = arrow_select::concat::concat(&got.iter().map(|a| a.as_ref()).collect::<Vec<_>>())
            .expect("concat");
        check(&got, expected, case);
        let compression = if zstd { "zstd3" } else { "none" };
        group.bench_function(format!("{case}_runs{RUN}/{compression}"), |b| {
            b.iter(|| {
                let mut rows = runs(black_box(bytes.clone()));
                let mut n = 0;
                while rows.remaining() > 0 {
                    n += black_box(rows.next_rows(RUN).expect("run")).len();
                }
                n
            })
        });
    }
}

/// Rows per run in the `_runs` cases: DataFusion's default batch size.
const RUN: usize = 8192;

/// zarrs's own decode of `chunk` with `codec` (wrapped in a zstd chain for `zstd3`).
fn bench_zarrs(
    group: &mut BenchmarkGroup<'_, WallTime>,
    case: &str,
    codec: Arc<dyn ArrayToBytesCodecTraits>,
    chunk: &Chunk,
    expected_data_len: usize,
) {
    let shape = [NonZeroU64::new(N as u64).expect("N > 0")];
    let data_type = zarrs::array::data_type::string();
    let fill = FillValue::from("");
    let options = CodecOptions::default();
    for zstd in [false, true] {
        let codec: Arc<dyn ArrayToBytesCodecTraits> = if zstd {
            let z: Arc<dyn BytesToBytesCodecTraits> = Arc::new(ZstdCodec::new(ZSTD_LEVEL, false));
            Arc::new(zarrs::array::CodecChain::new(
                vec![],
                codec.clone(),
                vec![z],
            ))
        } else {
            codec.clone()
        };
        let bytes = chunk.get(zstd);
        let decoded = codec
            .decode(
                Cow::Borrowed(&bytes[..]),
                &shape,
                &data_type,
                &fill,
                &options,
            )
            .unwrap_or_else(|e| panic!("{case}: {e}"));
        let (data, offsets) = decoded
            .into_variable()
            .expect("variable-length output")
            .into_parts();
        assert_eq!(data.len(), expected_data_len, "{case}: data length");
        assert_eq!(offsets.len(), N + 1, "{case}: offsets");
        let compression = if zstd { "zstd3" } else { "none" };
        group.bench_function(format!("{case}/{compression}"), |b| {
            b.iter(|| {
                codec
                    .decode(
                        Cow::Borrowed(black_box(&bytes[..])),
                        &shape,
                        &data_type,
                        &fill,
                        &options,
                    )
                    .expect("decode")
            })
        });
    }
}

/// The baselines every corpus gets: memcpy of the uncompressed vlen-utf8 chunk, zstd
/// decompression of the compressed one, and zarrs's vlen-utf8 decode.
fn bench_baselines(group: &mut BenchmarkGroup<'_, WallTime>, vlen: &Chunk, data_len: usize) {
    let raw = vlen.none.clone();
    group.bench_function("baseline_memcpy/none", |b| {
        b.iter(|| black_box(&raw[..]).to_vec())
    });
    let compressed = vlen.zstd3.clone();
    group.bench_function("baseline_zstd-decompress/zstd3", |b| {
        b.iter(|| {
            zstd_codec()
                .decode(black_box(compressed.clone()), usize::MAX)
                .expect("zstd")
        })
    });
    bench_zarrs(
        group,
        "baseline_zarrs_vlen-utf8",
        Arc::new(VlenUtf8Codec::new()),
        vlen,
        data_len,
    );
}

fn bench_corpus(c: &mut Criterion, name: &str, strings: Vec<String>, full: bool) {
    let expected = StringArray::from_iter_values(&strings);
    let data_len = expected.value_data().len();
    eprintln!(
        "corpus {name}: {N} strings, {data_len} bytes of string data ({:.1} B/string), all ASCII: {}",
        data_len as f64 / N as f64,
        expected.value_data().is_ascii()
    );
    let mut group = c.benchmark_group(name);
    // Chunks of 12–800 MB: a few long iterations per sample.
    group.sample_size(10);
    group.throughput(Throughput::Bytes(data_len as u64));

    let vlen = Chunk::new(encode::vlen_numcodecs(&expected).expect("vlen-utf8 chunk"));
    bench_baselines(&mut group, &vlen, data_len);
    bench_zarrow(
        &mut group,
        "vlen-utf8_to_Utf8",
        &ArrayToBytes::VlenUtf8,
        &DataType::String,
        &vlen,
        StringType::Utf8,
        &expected,
    );
    bench_zarrow(
        &mut group,
        "vlen-utf8_to_Utf8View",
        &ArrayToBytes::VlenUtf8,
        &DataType::String,
        &vlen,
        StringType::View,
        &expected,
    );
    bench_zarrow_runs(
        &mut group,
        "vlen-utf8_to_Utf8",
        &ArrayToBytes::VlenUtf8,
        &vlen,
        StringType::Utf8,
        &expected,
    );
    bench_zarrow_runs(
        &mut group,
        "vlen-utf8_to_Utf8View",
        &ArrayToBytes::VlenUtf8,
        &vlen,
        StringType::View,
        &expected,
    );
    if full {
        // The same bytes: vlen-bytes shares vlen-utf8's layout.
        bench_zarrow(
            &mut group,
            "vlen-bytes_to_Binary",
            &ArrayToBytes::VlenBytes,
            &DataType::Bytes,
            &vlen,
            StringType::Utf8,
            &expected,
        );
        drop(vlen);

        let zv = Chunk::new(zarrs_vlen_chunk(&expected));
        bench_zarrow(
            &mut group,
            "zarrs.vlen_to_Utf8",
            &zarrs_vlen_codec(),
            &DataType::String,
            &zv,
            StringType::Utf8,
            &expected,
        );
        bench_zarrs(
            &mut group,
            "baseline_zarrs_zarrs.vlen",
            Arc::new(VlenCodec::default()),
            &zv,
            data_len,
        );
        drop(zv);

        let av = Chunk::new(encode::arrow_vlen(&expected, false).expect("arrow_vlen chunk"));
        bench_zarrow(
            &mut group,
            "arrow_vlen-i32_to_Utf8",
            &ArrayToBytes::ArrowVlen { large: false },
            &DataType::String,
            &av,
            StringType::Utf8,
            &expected,
        );
        drop(av);
        let av = Chunk::new(encode::arrow_vlen(&expected, true).expect("arrow_vlen chunk"));
        bench_zarrow(
            &mut group,
            "arrow_vlen-i64_to_LargeUtf8",
            &ArrayToBytes::ArrowVlen { large: true },
            &DataType::String,
            &av,
            StringType::LargeUtf8,
            &expected,
        );
        drop(av);

        let (raw, length_bytes) = utf32_chunk(&strings);
        drop(strings);
        let u32c = Chunk::new(raw);
        bench_zarrow(
            &mut group,
            "fixed_utf32_to_Utf8",
            &ArrayToBytes::Bytes {
                endian: Some(Endian::Little),
            },
            &DataType::FixedUtf32 { length_bytes },
            &u32c,
            StringType::Utf8,
            &expected,
        );
    }
    group.finish();
}

fn main() {
    let mut c = Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .configure_from_args();
    bench_corpus(
        &mut c,
        "ascii12",
        ascii_corpus(12, 0x9E37_79B9_7F4A_7C15),
        true,
    );
    bench_corpus(
        &mut c,
        "ascii100",
        ascii_corpus(100, 0xD1B5_4A32_D192_ED03),
        true,
    );
    bench_corpus(
        &mut c,
        "utf8-12",
        non_ascii_corpus(12, 0xA076_1D64_78BD_642F),
        false,
    );
    c.final_summary();
}

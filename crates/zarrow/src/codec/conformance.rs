//! The bytes-to-bytes codecs against each other and against numcodecs: every codec and
//! configuration round-trips, decodes what Python's numcodecs wrote, parses and writes the
//! metadata zarr-python and numcodecs use, and fails cleanly on damaged input. Each codec's
//! own cases are in its module.

use bytes::Bytes;
use serde_json::{json, Map, Value};

use super::blosc::{BloscCompressor, BloscShuffle};
use super::{BytesToBytes, IndexLocation};
use crate::error::ChunkError;

// Produced by Python numcodecs 0.16.6 from `sample()`: see `python_vectors_decode`.
const PY_BLOSC_LZ4_SHUFFLE: &str = "02012101001000000010000075000000140000005d0000001f000100081f010400081f020400081f030400081f040400081f050400081f060400081f070400081f080400081f090400081f0a0400081f0b0400081f0c0400080f0200090f6c01ffffffffffffffffffffffffffff6e500003000000";
const PY_BLOSC_ZSTD_BITSHUFFLE: &str = "0201940100100000001000007c000000140000006400000028b52ffd60000fd5020088000000101111111111110111110000111126a0a05dd6e0821ada0da6fb2de9b0113deae4f06c594b29f30c8850cf70e7559f8f03747c7a360bdab4cb3fee836bf1e9ad3a06f7a4f2eef86a0dc4913751af555ddf07a09e9302";
const PY_BLOSC_BLOSCLZ_NOSHUFFLE: &str = "0201000100100000001000008000000014000000680000002300000000e00e03010001e01103010002e01103010003e01103010004e01103010005e01103010006e01103010007e01103010008e01103010009e0110301000ae0110301000be0110301000ce01103e01301e1ffffffffffffffffffffffffffff7b6b02000000";
const PY_BLOSC_ZLIB_SHUFFLE: &str = "020161010010000000100000600000001400000048000000785eedd0b911c02010c0c0e33160e3feeb25264009a934a30636e25c82335ce00a3f70833b3ce017fee009ff30a5b5d65a6badb5d65aef69adb5d65a6badb5d67bb7d60b371e1792";
const PY_BLOSC_LZ4HC_AUTOSHUFFLE: &str = "0201240100100000001000009000000014000000780000007f000000101111110700130001004f111111010700130f5b00ff93060f000001000f0e00100347000a78000f0e00050f5b00ff90060f000740000301000d1c00076a00069b00032d000e1c000f5b00ff950e01000f4700030f39000c0aa2000e78000f5b00ff7b0f0100fffffffffffffff9500000000000";
const PY_ZSTD_L3: &str = "28b52ffd60000f05040082c8118b1222111111116ee259d148dc4d3c2b1a89bb896745237137f1ac6824ee269e158dc4ddc4b3a291b89b785634127713cf8a46e26ee259d148dc4d3c2b1a89bb89674523711720809da850fcf085dd11508415c26f1110fe0a5264a8db7e920687baf5272931d45d3f498343ddfa939418eaaee7d39a5076fba1069b02";
const PY_ZSTD_CHECKSUM: &str = "28b52ffd64000f05040082c8118b1222111111116ee259d148dc4d3c2b1a89bb896745237137f1ac6824ee269e158dc4ddc4b3a291b89b785634127713cf8a46e26ee259d148dc4d3c2b1a89bb89674523711720809da850fcf085dd11508415c26f1110fe0a5264a8db7e920687baf5272931d45d3f498343ddfa939418eaaee7d39a5076fba1069b025b162f7b";
const PY_LZ4: &str = "001000001f000100081f010400081f020400081f030400081f040400081f050400081f060400081f070400081f080400081f090400081f0a0400081f0b0400081f0c0400080f0200090f6c01ffffffffffffffffffffffffffff6e500003000000";
const PY_ZLIB_L6: &str = "789cedd0c70d00200080407bdf7f5e27909f3f4858e0427817e10467b8c0156e7087073ce1056ff8c094d65a6badb5d65a6badb5d65a6badb5d65affb4be371e1792";
const PY_GZIP_L5: &str = "1f8b0800e955036b00ffedd0b911c02010c0c0e33160e3feeb25264009a934a30636e25c82335ce00a3f70833b3ce017fee009ff30a5b5d65a6badb5d65aef69adb5d65a6badb5d67bb7d60b7d86f2fe00100000";
const PY_BZ2_L9: &str = "425a6839314159265359652dae64000001e0007ffc004820007053000014a909a64f226f8b54dc93811c60b128f928e651f651d4a3b947e946651a419418a688a57b4f76292bf8bb9229c28483296d7320";
const PY_CRC32C: &str = "7a6172726f7720637263333263207465737460de404c";

/// `((np.arange(1024) // 7) % 13).astype('<u4').tobytes()`.
pub(crate) fn sample() -> Vec<u8> {
    (0..1024u32)
        .flat_map(|i| ((i / 7) % 13).to_le_bytes())
        .collect()
}

/// Pseudo-random, incompressible bytes.
pub(crate) fn noise(len: usize) -> Vec<u8> {
    let mut state: u64 = 0x9E37_79B9_7F4A_7C15;
    (0..len)
        .map(|_| {
            state = state
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            (state >> 56) as u8
        })
        .collect()
}

pub(crate) fn hex(s: &str) -> Vec<u8> {
    assert!(s.len().is_multiple_of(2));
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex"))
        .collect()
}

fn all_codecs() -> Vec<BytesToBytes> {
    let mut codecs = vec![BytesToBytes::Crc32c];
    for level in [0, 1, 5, 9] {
        codecs.push(BytesToBytes::Gzip { level });
        codecs.push(BytesToBytes::Zlib { level });
    }
    for level in [-5, 0, 1, 3, 19] {
        for checksum in [false, true] {
            codecs.push(BytesToBytes::Zstd { level, checksum });
        }
    }
    for acceleration in [1, 10] {
        codecs.push(BytesToBytes::Lz4 { acceleration });
    }
    for level in [1, 9] {
        codecs.push(BytesToBytes::Bz2 { level });
    }
    for cname in BloscCompressor::ALL {
        for shuffle in [
            BloscShuffle::NoShuffle,
            BloscShuffle::Shuffle,
            BloscShuffle::BitShuffle,
        ] {
            for (typesize, blocksize, clevel) in
                [(4, 0, 5), (1, 0, 9), (0, 0, 1), (8, 1024, 5), (300, 0, 0)]
            {
                codecs.push(BytesToBytes::Blosc {
                    cname,
                    clevel,
                    shuffle,
                    typesize,
                    blocksize,
                });
            }
        }
    }
    codecs
}

fn inputs() -> Vec<Vec<u8>> {
    let mut big = sample();
    big.extend(noise(70_000));
    big.extend(vec![0u8; 200_000]);
    vec![Vec::new(), vec![42], sample(), noise(5000), big]
}

#[test]
fn round_trip_every_codec_and_config() {
    for codec in all_codecs() {
        for input in inputs() {
            let encoded = codec
                .encode(&input)
                .unwrap_or_else(|e| panic!("{codec:?} encode: {e}"));
            let exact = codec
                .decode(Bytes::from(encoded.clone()), input.len())
                .unwrap_or_else(|e| panic!("{codec:?} decode {}: {e}", input.len()));
            assert_eq!(exact, input, "{codec:?}");
            let loose = codec
                .decode(Bytes::from(encoded.clone()), usize::MAX)
                .unwrap_or_else(|e| panic!("{codec:?} decode loose: {e}"));
            assert_eq!(loose, input, "{codec:?}");
            if !input.is_empty() {
                let err = codec.decode(Bytes::from(encoded), input.len() - 1);
                assert!(
                    matches!(err, Err(ChunkError::TooLarge(_))),
                    "{codec:?}: {err:?}"
                );
            }
        }
    }
}

#[test]
fn python_vectors_decode() {
    let expected = sample();
    let cases: [(&str, &str); 11] = [
        ("blosc", PY_BLOSC_LZ4_SHUFFLE),
        ("blosc", PY_BLOSC_ZSTD_BITSHUFFLE),
        ("blosc", PY_BLOSC_BLOSCLZ_NOSHUFFLE),
        ("blosc", PY_BLOSC_ZLIB_SHUFFLE),
        ("blosc", PY_BLOSC_LZ4HC_AUTOSHUFFLE),
        ("zstd", PY_ZSTD_L3),
        ("zstd", PY_ZSTD_CHECKSUM),
        ("lz4", PY_LZ4),
        ("zlib", PY_ZLIB_L6),
        ("gzip", PY_GZIP_L5),
        ("bz2", PY_BZ2_L9),
    ];
    for (id, data) in cases {
        let mut config = Map::new();
        config.insert("id".into(), Value::from(id));
        let codec = BytesToBytes::from_v2(&config).unwrap().unwrap();
        let decoded = codec.decode(Bytes::from(hex(data)), expected.len());
        assert_eq!(decoded.unwrap(), expected, "{id} {data}");
    }
    let crc = BytesToBytes::Crc32c
        .decode(Bytes::from(hex(PY_CRC32C)), 100)
        .unwrap();
    assert_eq!(&crc[..], b"zarrow crc32c test");
    // Our crc32c encoder agrees with numcodecs byte for byte.
    assert_eq!(
        BytesToBytes::Crc32c.encode(b"zarrow crc32c test").unwrap(),
        hex(PY_CRC32C)
    );
    // numcodecs' empty buffers.
    let blosc = BytesToBytes::Blosc {
        cname: BloscCompressor::Lz4,
        clevel: 5,
        shuffle: BloscShuffle::Shuffle,
        typesize: 1,
        blocksize: 0,
    };
    let empty = blosc.decode(Bytes::from(hex("02013301000000000100000010000000")), 0);
    assert!(empty.unwrap().is_empty());
    let lz4 = BytesToBytes::Lz4 { acceleration: 1 };
    assert!(lz4
        .decode(Bytes::from(hex("0000000000")), 0)
        .unwrap()
        .is_empty());
}

/// Truncated, garbage, empty and bit-flipped inputs never panic; the first three fail.
#[test]
fn corrupt_input_fails_without_panicking() {
    let input = sample();
    let codecs = [
        BytesToBytes::Gzip { level: 5 },
        BytesToBytes::Zlib { level: 5 },
        BytesToBytes::Zstd {
            level: 3,
            checksum: false,
        },
        BytesToBytes::Zstd {
            level: 3,
            checksum: true,
        },
        BytesToBytes::Blosc {
            cname: BloscCompressor::Lz4,
            clevel: 5,
            shuffle: BloscShuffle::Shuffle,
            typesize: 4,
            blocksize: 0,
        },
        BytesToBytes::Blosc {
            cname: BloscCompressor::Zstd,
            clevel: 5,
            shuffle: BloscShuffle::BitShuffle,
            typesize: 4,
            blocksize: 0,
        },
        BytesToBytes::Blosc {
            cname: BloscCompressor::BloscLz,
            clevel: 5,
            shuffle: BloscShuffle::NoShuffle,
            typesize: 4,
            blocksize: 0,
        },
        BytesToBytes::Blosc {
            cname: BloscCompressor::Zlib,
            clevel: 5,
            shuffle: BloscShuffle::Shuffle,
            typesize: 4,
            blocksize: 0,
        },
        BytesToBytes::Lz4 { acceleration: 1 },
        BytesToBytes::Bz2 { level: 9 },
        BytesToBytes::Crc32c,
    ];
    let garbage: Vec<u8> = noise(300);
    for codec in &codecs {
        let encoded = codec.encode(&input).unwrap();
        for cut in [1, 2, 3, 5, 17, encoded.len() / 2, encoded.len() - 1] {
            let truncated = Bytes::from(encoded[..cut].to_vec());
            let result = codec.decode(truncated, usize::MAX);
            assert!(result.is_err(), "{codec:?} truncated to {cut}: {result:?}");
        }
        let result = codec.decode(Bytes::from(garbage.clone()), 1 << 20);
        assert!(result.is_err(), "{codec:?} garbage: {result:?}");
        if !matches!(codec, BytesToBytes::Bz2 { .. }) {
            let result = codec.decode(Bytes::new(), 1 << 20);
            assert!(result.is_err(), "{codec:?} empty: {result:?}");
        }
        // Flip every byte in turn: any outcome but a panic, and never more than the limit.
        for i in 0..encoded.len() {
            for mask in [0x01u8, 0x80, 0xff] {
                let mut bad = encoded.clone();
                bad[i] ^= mask;
                if let Ok(out) = codec.decode(Bytes::from(bad), input.len() * 2) {
                    assert!(out.len() <= input.len() * 2);
                }
            }
        }
    }
}

#[test]
fn bad_encoder_settings_are_errors() {
    assert!(BytesToBytes::Gzip { level: 10 }.encode(b"x").is_err());
    assert!(BytesToBytes::Zlib { level: 42 }.encode(b"x").is_err());
    assert!(BytesToBytes::Bz2 { level: 0 }.encode(b"x").is_err());
    assert!(BytesToBytes::Bz2 { level: 10 }.encode(b"x").is_err());
    let blosc = BytesToBytes::Blosc {
        cname: BloscCompressor::Zstd,
        clevel: 10,
        shuffle: BloscShuffle::Shuffle,
        typesize: 4,
        blocksize: 0,
    };
    assert!(blosc.encode(b"x").is_err());
}

#[test]
fn parse_v3_core_codecs() {
    let parse = |name: &str, config: Value| BytesToBytes::from_v3(name, Some(&config));
    assert_eq!(
        parse("gzip", json!({"level": 7})).unwrap(),
        Some(BytesToBytes::Gzip { level: 7 })
    );
    assert_eq!(
        BytesToBytes::from_v3("gzip", None).unwrap(),
        Some(BytesToBytes::Gzip { level: 5 })
    );
    assert_eq!(
        parse("zstd", json!({"level": -3, "checksum": true})).unwrap(),
        Some(BytesToBytes::Zstd {
            level: -3,
            checksum: true
        })
    );
    assert_eq!(
        parse(
            "blosc",
            json!({"typesize": 4, "cname": "lz4", "clevel": 9, "shuffle": "bitshuffle", "blocksize": 0})
        )
        .unwrap(),
        Some(BytesToBytes::Blosc {
            cname: BloscCompressor::Lz4,
            clevel: 9,
            shuffle: BloscShuffle::BitShuffle,
            typesize: 4,
            blocksize: 0,
        })
    );
    assert_eq!(
        parse(
            "blosc",
            json!({"cname": "zstd", "clevel": 5, "shuffle": "noshuffle"})
        )
        .unwrap(),
        Some(BytesToBytes::Blosc {
            cname: BloscCompressor::Zstd,
            clevel: 5,
            shuffle: BloscShuffle::NoShuffle,
            typesize: 1,
            blocksize: 0,
        })
    );
    assert_eq!(
        BytesToBytes::from_v3("crc32c", None).unwrap(),
        Some(BytesToBytes::Crc32c)
    );
    assert_eq!(
        parse("crc32c", json!({})).unwrap(),
        Some(BytesToBytes::Crc32c)
    );
    // Not ours.
    assert_eq!(BytesToBytes::from_v3("bytes", None).unwrap(), None);
    assert_eq!(BytesToBytes::from_v3("transpose", None).unwrap(), None);
    assert_eq!(
        BytesToBytes::from_v3("numcodecs.delta", None).unwrap(),
        None
    );
    assert_eq!(
        BytesToBytes::from_v3("numcodecs.crc32", None).unwrap(),
        Some(BytesToBytes::Checksum32 {
            kind: super::checksum32::Checksum32::Crc32,
            location: IndexLocation::Start
        })
    );
    // numcodecs filters are parsed with the array's data type (filters.rs), not here.
    assert_eq!(
        BytesToBytes::from_v3("numcodecs.pickle", None).unwrap(),
        None
    );
}

#[test]
fn parse_v3_numcodecs_names() {
    let parse = |name: &str, config: Value| BytesToBytes::from_v3(name, Some(&config));
    assert_eq!(
        parse("numcodecs.zlib", json!({"level": 3})).unwrap(),
        Some(BytesToBytes::Zlib { level: 3 })
    );
    assert_eq!(
        BytesToBytes::from_v3("numcodecs.zlib", None).unwrap(),
        Some(BytesToBytes::Zlib { level: 1 })
    );
    assert_eq!(
        parse("zlib", json!({"level": 2})).unwrap(),
        Some(BytesToBytes::Zlib { level: 2 })
    );
    assert_eq!(
        parse("numcodecs.gzip", json!({})).unwrap(),
        Some(BytesToBytes::Gzip { level: 1 })
    );
    assert_eq!(
        parse("numcodecs.zstd", json!({"level": 5})).unwrap(),
        Some(BytesToBytes::Zstd {
            level: 5,
            checksum: false
        })
    );
    assert_eq!(
        parse("numcodecs.lz4", json!({"acceleration": 3})).unwrap(),
        Some(BytesToBytes::Lz4 { acceleration: 3 })
    );
    assert_eq!(
        parse("lz4", json!({})).unwrap(),
        Some(BytesToBytes::Lz4 { acceleration: 1 })
    );
    assert_eq!(
        parse("numcodecs.bz2", json!({"level": 9})).unwrap(),
        Some(BytesToBytes::Bz2 { level: 9 })
    );
    assert_eq!(
        BytesToBytes::from_v3("bz2", None).unwrap(),
        Some(BytesToBytes::Bz2 { level: 1 })
    );
    assert_eq!(
        parse("numcodecs.crc32c", json!({"location": "end"})).unwrap(),
        Some(BytesToBytes::Crc32c)
    );
    assert_eq!(
        parse(
            "numcodecs.blosc",
            json!({"cname": "zstd", "clevel": 3, "shuffle": 2, "blocksize": 0})
        )
        .unwrap(),
        Some(BytesToBytes::Blosc {
            cname: BloscCompressor::Zstd,
            clevel: 3,
            shuffle: BloscShuffle::BitShuffle,
            typesize: 0,
            blocksize: 0,
        })
    );
    // numcodecs defaults: lz4, clevel 5, byte shuffle.
    assert_eq!(
        BytesToBytes::from_v3("numcodecs.blosc", None).unwrap(),
        Some(BytesToBytes::Blosc {
            cname: BloscCompressor::Lz4,
            clevel: 5,
            shuffle: BloscShuffle::Shuffle,
            typesize: 0,
            blocksize: 0,
        })
    );
    // An "id" inside the configuration must agree.
    assert!(parse("numcodecs.zstd", json!({"id": "zstd"}))
        .unwrap()
        .is_some());
    assert!(parse("numcodecs.zstd", json!({"id": "gzip"})).is_err());
}

#[test]
fn parse_v2_numcodecs() {
    let parse = |v: Value| BytesToBytes::from_v2(v.as_object().expect("object"));
    assert_eq!(
        parse(json!({"id": "zstd", "level": 1, "checksum": false})).unwrap(),
        Some(BytesToBytes::Zstd {
            level: 1,
            checksum: false
        })
    );
    assert_eq!(
        parse(json!({"id": "zstd", "level": 22})).unwrap(),
        Some(BytesToBytes::Zstd {
            level: 22,
            checksum: false
        })
    );
    assert_eq!(
        parse(json!({"id": "zlib", "level": -1})).unwrap(),
        Some(BytesToBytes::Zlib { level: 6 })
    );
    assert_eq!(
        parse(json!({"id": "gzip", "level": 9})).unwrap(),
        Some(BytesToBytes::Gzip { level: 9 })
    );
    assert_eq!(
        parse(json!({"id": "lz4", "acceleration": 1})).unwrap(),
        Some(BytesToBytes::Lz4 { acceleration: 1 })
    );
    assert_eq!(
        parse(json!({"id": "bz2", "level": 1})).unwrap(),
        Some(BytesToBytes::Bz2 { level: 1 })
    );
    assert_eq!(
        parse(json!({"id": "crc32c"})).unwrap(),
        Some(BytesToBytes::Crc32c)
    );
    assert_eq!(
        parse(json!({"id": "blosc", "cname": "lz4", "clevel": 5, "shuffle": 1, "blocksize": 0}))
            .unwrap(),
        Some(BytesToBytes::Blosc {
            cname: BloscCompressor::Lz4,
            clevel: 5,
            shuffle: BloscShuffle::Shuffle,
            typesize: 0,
            blocksize: 0,
        })
    );
    // AUTOSHUFFLE: bit shuffle for one-byte elements, byte shuffle otherwise / unknown.
    let auto = |typesize: Option<u64>| {
        let mut v = json!({"id": "blosc", "cname": "zstd", "clevel": 1, "shuffle": -1});
        if let Some(t) = typesize {
            v["typesize"] = json!(t);
        }
        match parse(v).unwrap() {
            Some(BytesToBytes::Blosc { shuffle, .. }) => shuffle,
            other => panic!("{other:?}"),
        }
    };
    assert_eq!(auto(Some(1)), BloscShuffle::BitShuffle);
    assert_eq!(auto(Some(8)), BloscShuffle::Shuffle);
    assert_eq!(auto(None), BloscShuffle::Shuffle);
    // Old blosc metadata without blocksize.
    assert!(
        parse(json!({"id": "blosc", "cname": "lz4", "clevel": 5, "shuffle": 1}))
            .unwrap()
            .is_some()
    );
    // Unknown ids are not ours.
    assert_eq!(
        parse(json!({"id": "lzma", "preset": 1})).unwrap(),
        Some(BytesToBytes::Lzma { preset: 1 })
    );
    assert_eq!(parse(json!({"id": "pickle"})).unwrap(), None);
    assert_eq!(parse(json!({"id": "vlen-utf8"})).unwrap(), None);
}

#[test]
fn bad_configs_are_errors() {
    let v2 = |v: Value| BytesToBytes::from_v2(v.as_object().expect("object"));
    let v3 = |name: &str, v: Value| BytesToBytes::from_v3(name, Some(&v));
    let bad_v2 = [
        json!({"level": 1}),
        json!({"id": 5}),
        json!({"id": "zstd", "level": "high"}),
        json!({"id": "zstd", "level": 1.5}),
        json!({"id": "zstd", "level": 1_u64 << 40}),
        json!({"id": "zstd", "checksum": 1}),
        json!({"id": "zlib", "level": 10}),
        json!({"id": "gzip", "level": -2}),
        json!({"id": "bz2", "level": 0}),
        json!({"id": "bz2", "level": 10}),
        json!({"id": "lz4", "acceleration": "fast"}),
        json!({"id": "crc32c", "location": "start"}),
        json!({"id": "crc32c", "location": "middle"}),
        json!({"id": "blosc", "cname": "snappy"}),
        json!({"id": "blosc", "cname": "brotli"}),
        json!({"id": "blosc", "clevel": 10}),
        json!({"id": "blosc", "shuffle": 3}),
        json!({"id": "blosc", "shuffle": "shuffle"}),
        json!({"id": "blosc", "blocksize": -1}),
        json!({"id": "blosc", "typesize": 0}),
        json!({"id": "zstd", "level": 1, "frobnicate": true}),
    ];
    for config in bad_v2 {
        assert!(v2(config.clone()).is_err(), "{config}");
    }
    let bad_v3 = [
        ("gzip", json!({"level": 12})),
        ("gzip", json!({"level": 5, "extra": 1})),
        ("gzip", json!([5])),
        ("gzip", json!("level")),
        ("zstd", json!({"level": 3, "checksum": "yes"})),
        (
            "blosc",
            json!({"cname": "lz4", "clevel": 5, "shuffle": 1, "typesize": 4}),
        ),
        (
            "blosc",
            json!({"cname": "lz4", "clevel": 5, "shuffle": "byteshuffle"}),
        ),
        (
            "blosc",
            json!({"cname": "snappy", "clevel": 5, "shuffle": "shuffle"}),
        ),
        (
            "blosc",
            json!({"cname": "lz4", "clevel": 5, "shuffle": "shuffle", "typesize": -4}),
        ),
        ("crc32c", json!({"location": "end"})),
        ("numcodecs.crc32c", json!({"location": "start"})),
        ("numcodecs.blosc", json!({"shuffle": "bitshuffle"})),
        ("numcodecs.zlib", json!({"id": "gzip"})),
        ("lz4", json!({"acceleration": 1, "mode": "fast"})),
    ];
    for (name, config) in bad_v3 {
        assert!(v3(name, config.clone()).is_err(), "{name} {config}");
    }
}

#[test]
fn json_round_trips() {
    for codec in all_codecs() {
        let v3 = codec.to_v3_json();
        let name = v3["name"].as_str().unwrap();
        let parsed = BytesToBytes::from_v3(name, v3.get("configuration"))
            .unwrap()
            .unwrap();
        let v2 = codec.to_v2_json();
        let from_v2 = BytesToBytes::from_v2(v2.as_object().unwrap())
            .unwrap()
            .unwrap();
        match (&codec, &parsed, &from_v2) {
            (
                BytesToBytes::Blosc { typesize, .. },
                BytesToBytes::Blosc { typesize: t3, .. },
                BytesToBytes::Blosc { typesize: t2, .. },
            ) => {
                assert_eq!(*t3, (*typesize).max(1));
                assert_eq!(*t2, 0);
                let strip = |c: &BytesToBytes| match c {
                    BytesToBytes::Blosc {
                        cname,
                        clevel,
                        shuffle,
                        blocksize,
                        ..
                    } => (*cname, *clevel, *shuffle, *blocksize),
                    _ => unreachable!(),
                };
                assert_eq!(strip(&parsed), strip(&codec));
                assert_eq!(strip(&from_v2), strip(&codec));
            }
            _ => {
                assert_eq!(parsed, codec, "{v3}");
                assert_eq!(from_v2, codec, "{v2}");
            }
        }
        assert_eq!(codec.name(), parsed.name());
    }
    assert_eq!(
        BytesToBytes::Zstd {
            level: 0,
            checksum: false
        }
        .to_v3_json(),
        json!({"name": "zstd", "configuration": {"level": 0, "checksum": false}})
    );
    assert_eq!(
        BytesToBytes::Blosc {
            cname: BloscCompressor::Zstd,
            clevel: 5,
            shuffle: BloscShuffle::Shuffle,
            typesize: 4,
            blocksize: 0
        }
        .to_v3_json(),
        json!({"name": "blosc", "configuration": {
            "typesize": 4, "cname": "zstd", "clevel": 5, "shuffle": "shuffle", "blocksize": 0
        }})
    );
    assert_eq!(BytesToBytes::Crc32c.to_v3_json(), json!({"name": "crc32c"}));
    assert_eq!(
        BytesToBytes::Zlib { level: 1 }.to_v3_json(),
        json!({"name": "numcodecs.zlib", "configuration": {"level": 1}})
    );
}

#[test]
fn decoding_is_thread_safe() {
    let input = sample().repeat(16);
    let codecs: Vec<(BytesToBytes, Vec<u8>)> = BloscCompressor::ALL
        .into_iter()
        .map(|cname| {
            let codec = BytesToBytes::Blosc {
                cname,
                clevel: 5,
                shuffle: BloscShuffle::BitShuffle,
                typesize: 4,
                blocksize: 0,
            };
            let encoded = codec.encode(&input).unwrap();
            (codec, encoded)
        })
        .collect();
    std::thread::scope(|scope| {
        for _ in 0..8 {
            scope.spawn(|| {
                for _ in 0..50 {
                    for (codec, encoded) in &codecs {
                        let out = codec
                            .decode(Bytes::from(encoded.clone()), input.len())
                            .unwrap();
                        assert_eq!(out, input);
                        assert_eq!(&codec.encode(&input).unwrap(), encoded);
                    }
                }
            });
        }
    });
}

#[test]
fn streams_stop_at_the_limit() {
    // Streams that decode to more than the limit stop at the limit.
    let zeros = vec![0u8; 1 << 20];
    for codec in [
        BytesToBytes::Gzip { level: 9 },
        BytesToBytes::Zlib { level: 9 },
        BytesToBytes::Bz2 { level: 9 },
    ] {
        let encoded = codec.encode(&zeros).unwrap();
        assert!(matches!(
            codec.decode(Bytes::from(encoded), 1000),
            Err(ChunkError::TooLarge(_))
        ));
    }
}

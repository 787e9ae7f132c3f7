//! Bad input: every corruption is a typed error naming the array and the chunk key — never a
//! panic, never a wrong value.

mod hostile_decoders;
mod hostile_icechunk;
mod hostile_metadata;
mod hostile_remote;

use std::sync::Arc;

use arrow::array::StringArray;
use bytes::Bytes;
use object_store::memory::InMemory;
use object_store::{ObjectStore, ObjectStoreExt};
use serde_json::json;
use zarrow::internals::encode;
use zarrow::BytesToBytes;
use zarrow::{ChunkError, Error, Node, ZarrArray, ZarrReadOptions, ZarrStore};
use zarrow::{VlenEncoding, ZarrWriteOptions};

struct Fixture {
    mem: Arc<InMemory>,
    store: ZarrStore,
}

impl Fixture {
    fn new() -> Self {
        let mem = Arc::new(InMemory::new());
        let store = ZarrStore::new(mem.clone() as Arc<dyn ObjectStore>, "bad");
        Fixture { mem, store }
    }

    async fn put(&self, key: &str, bytes: Vec<u8>) {
        self.mem
            .put(&format!("bad/{key}").into(), Bytes::from(bytes).into())
            .await
            .unwrap();
    }

    async fn put_json(&self, key: &str, v: serde_json::Value) {
        self.put(key, serde_json::to_vec(&v).unwrap()).await;
    }

    /// The table at `node`, with the default options.
    async fn model(&self, node: &str) -> Arc<zarrow::TableModel> {
        let node = Node::open_store(self.store.child(node), node)
            .await
            .unwrap();
        Arc::new(
            zarrow::TableModel::from_node(node, zarrow::TableOptions::default())
                .await
                .unwrap(),
        )
    }

    /// The first `rows` values of column `column` of the table at `node`, as text.
    async fn column_text(&self, node: &str, column: &str, rows: usize) -> Vec<String> {
        let model = self.model(node).await;
        use futures::TryStreamExt;
        let batches: Vec<_> = zarrow::ZarrScan::new(&model)
            .stream(model.clone(), zarrow::ScanContext::default())
            .unwrap()
            .try_collect()
            .await
            .unwrap();
        let column = batches[0].column_by_name(column).unwrap();
        let text =
            arrow::util::display::ArrayFormatter::try_new(column.as_ref(), &Default::default())
                .unwrap();
        (0..rows).map(|i| text.value(i).to_string()).collect()
    }

    async fn open(&self, path: &str) -> zarrow::Result<ZarrArray> {
        match Node::open_store(self.store.child(path), path).await? {
            Node::Array(a) => Ok(a),
            Node::Group(_) => panic!("group"),
        }
    }

    /// Read chunk 0 and return the error, checking it names the array and chunk.
    async fn chunk_error(&self, path: &str, chunk_key: &str) -> ChunkError {
        let array = self.open(path).await.unwrap();
        let err = array
            .read_chunk(&[0], &ZarrReadOptions::default())
            .await
            .unwrap_err();
        let msg = err.to_string();
        match err {
            Error::Chunk {
                array,
                chunk,
                source,
            } => {
                assert_eq!(array, path, "{msg}");
                assert!(chunk.starts_with(chunk_key), "{msg}");
                assert!(msg.contains(path) && msg.contains(chunk_key), "{msg}");
                source
            }
            other => panic!("expected a chunk error, got {other:?}"),
        }
    }
}

fn words() -> StringArray {
    StringArray::from(vec!["a", "bb", "ccc", "dddd"])
}

async fn write(f: &Fixture, path: &str, enc: VlenEncoding, compression: Option<BytesToBytes>) {
    let opts = ZarrWriteOptions {
        chunk_shape: Some(vec![4]),
        string_encoding: enc,
        compression,
        write_empty_chunks: true,
        ..Default::default()
    };
    zarrow::write_array(&f.store, path, &words(), &[4], &opts)
        .await
        .unwrap();
}

#[tokio::test]
async fn corrupt_vlen_utf8_chunks() {
    let f = Fixture::new();
    write(&f, "s", VlenEncoding::Numcodecs, None).await;
    let good = encode::vlen_numcodecs(&words()).unwrap();

    f.put("s/c/0", good[..good.len() - 2].to_vec()).await;
    assert!(matches!(
        f.chunk_error("s", "c/0").await,
        ChunkError::Truncated(_)
    ));

    let mut count = good.clone();
    count[0] = 3;
    f.put("s/c/0", count).await;
    assert!(matches!(
        f.chunk_error("s", "c/0").await,
        ChunkError::ItemCount {
            expected: 4,
            found: 3
        }
    ));

    let mut huge = good.clone();
    huge[4..8].copy_from_slice(&0x7fff_ffffu32.to_le_bytes());
    f.put("s/c/0", huge).await;
    // Past the item limit: refused before its bytes are looked for.
    assert!(matches!(
        f.chunk_error("s", "c/0").await,
        ChunkError::ItemTooLarge { element: 0, .. }
    ));

    let mut utf8 = good.clone();
    let last = utf8.len() - 1;
    utf8[last] = 0xff;
    f.put("s/c/0", utf8).await;
    assert!(matches!(
        f.chunk_error("s", "c/0").await,
        ChunkError::Utf8 { element: 3 }
    ));
}

#[tokio::test]
async fn corrupt_arrow_vlen_offsets() {
    let f = Fixture::new();
    write(&f, "a", VlenEncoding::ArrowVlen { large: false }, None).await;
    let good = encode::arrow_vlen(&words(), false).unwrap();

    let mut decreasing = good.clone();
    decreasing[8..12].copy_from_slice(&0i32.to_le_bytes());
    f.put("a/c/0", decreasing).await;
    assert!(matches!(
        f.chunk_error("a", "c/0").await,
        ChunkError::Offsets(_)
    ));

    let mut past_end = good.clone();
    past_end[16..20].copy_from_slice(&1_000_000i32.to_le_bytes());
    f.put("a/c/0", past_end).await;
    assert!(matches!(
        f.chunk_error("a", "c/0").await,
        ChunkError::Offsets(_)
    ));
}

#[tokio::test]
async fn broken_compression_stream() {
    let f = Fixture::new();
    write(
        &f,
        "z",
        VlenEncoding::Numcodecs,
        Some(BytesToBytes::Zstd {
            level: 3,
            checksum: false,
        }),
    )
    .await;
    let stored = f
        .mem
        .get(&"bad/z/c/0".into())
        .await
        .unwrap()
        .bytes()
        .await
        .unwrap();
    let mut broken = stored.to_vec();
    let n = broken.len();
    broken.truncate(n - 3);
    f.put("z/c/0", broken).await;
    let e = f.chunk_error("z", "c/0").await;
    assert!(
        matches!(
            e,
            ChunkError::Codec { codec: "zstd", .. } | ChunkError::Truncated(_)
        ),
        "{e}"
    );
    f.put("z/c/0", b"not zstd at all".to_vec()).await;
    assert!(matches!(
        f.chunk_error("z", "c/0").await,
        ChunkError::Codec { .. }
    ));
}

fn array_meta(codecs: serde_json::Value, data_type: &str) -> serde_json::Value {
    json!({
        "zarr_format": 3, "node_type": "array", "shape": [4], "data_type": data_type,
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [4]}},
        "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
        "fill_value": "", "codecs": codecs, "attributes": {}
    })
}

#[tokio::test]
async fn checksum_mismatch() {
    let f = Fixture::new();
    f.put_json(
        "k/zarr.json",
        array_meta(json!([{"name": "vlen-utf8"}, {"name": "crc32c"}]), "string"),
    )
    .await;
    let mut stored = BytesToBytes::Crc32c
        .encode(&encode::vlen_numcodecs(&words()).unwrap())
        .unwrap();
    let array = f.open("k").await.unwrap();
    f.put("k/c/0", stored.clone()).await;
    assert_eq!(
        array
            .read_chunk(&[0], &ZarrReadOptions::default())
            .await
            .unwrap()
            .len(),
        4
    );
    stored[6] ^= 1;
    f.put("k/c/0", stored).await;
    assert!(matches!(
        f.chunk_error("k", "c/0").await,
        ChunkError::Checksum { .. }
    ));
}

fn sharded_meta() -> serde_json::Value {
    array_meta(
        json!([{"name": "sharding_indexed", "configuration": {
            "chunk_shape": [2],
            "codecs": [{"name": "vlen-utf8"}],
            "index_codecs": [{"name": "bytes", "configuration": {"endian": "little"}}, {"name": "crc32c"}],
            "index_location": "end"
        }}]),
        "string",
    )
}

#[tokio::test]
async fn bad_shard_index() {
    let f = Fixture::new();
    f.put_json("sh/zarr.json", sharded_meta()).await;
    let inner0 = encode::vlen_numcodecs(&StringArray::from(vec!["a", "bb"])).unwrap();
    let mut index = Vec::new();
    index.extend_from_slice(&0u64.to_le_bytes());
    index.extend_from_slice(&(inner0.len() as u64).to_le_bytes());
    index.extend_from_slice(&u64::MAX.to_le_bytes()); // inner chunk 1 absent → fill
    index.extend_from_slice(&u64::MAX.to_le_bytes());
    let good_index = BytesToBytes::Crc32c.encode(&index).unwrap();
    f.put("sh/c/0", [&inner0[..], &good_index].concat()).await;
    let array = f.open("sh").await.unwrap();
    let values = array
        .read_chunk(&[1], &ZarrReadOptions::default())
        .await
        .unwrap();
    assert_eq!(values.len(), 2, "absent inner chunk reads as fill");

    // An entry pointing past the shard.
    let mut bad = index.clone();
    bad[8..16].copy_from_slice(&1_000u64.to_le_bytes());
    f.put(
        "sh/c/0",
        [&inner0[..], &BytesToBytes::Crc32c.encode(&bad).unwrap()].concat(),
    )
    .await;
    assert!(matches!(
        f.chunk_error("sh", "c/0").await,
        ChunkError::ShardIndex(_)
    ));

    // A corrupted index checksum.
    let mut flipped = good_index.clone();
    flipped[0] ^= 1;
    f.put("sh/c/0", [&inner0[..], &flipped].concat()).await;
    assert!(matches!(
        f.chunk_error("sh", "c/0").await,
        ChunkError::Checksum { .. }
    ));

    // A shard shorter than its index.
    f.put("sh/c/0", vec![1, 2, 3]).await;
    let e = f.chunk_error("sh", "c/0").await;
    assert!(matches!(e, ChunkError::ShardIndex(_)), "{e}");
}

#[tokio::test]
async fn bad_metadata() {
    let f = Fixture::new();
    f.put("j/zarr.json", b"{\"zarr_format\": 3, ".to_vec())
        .await;
    let e = f.open("j").await.unwrap_err();
    assert!(
        matches!(e, Error::Metadata { .. }) && e.to_string().contains('j'),
        "{e}"
    );

    f.put_json(
        "t/zarr.json",
        array_meta(json!([{"name": "bytes"}]), "complex_float8_e4m3"),
    )
    .await;
    let e = f.open("t").await.unwrap_err();
    assert!(
        matches!(e, Error::UnsupportedDataType { ref array, .. } if array == "t"),
        "{e}"
    );
    assert!(e.to_string().contains("supported"), "{e}");

    f.put_json(
        "c/zarr.json",
        array_meta(
            json!([{"name": "vlen-utf8"}, {"name": "snappy_v9"}]),
            "string",
        ),
    )
    .await;
    let e = f.open("c").await.unwrap_err();
    assert!(
        matches!(e, Error::UnsupportedCodec { ref codec, .. } if codec == "snappy_v9"),
        "{e}"
    );

    // A known codec with a bad configuration names the array, the codec and the key.
    f.put_json(
        "z/zarr.json",
        array_meta(
            json!([{"name": "vlen-utf8"}, {"name": "zstd", "configuration": {"level": "high"}}]),
            "string",
        ),
    )
    .await;
    let e = f.open("z").await.unwrap_err();
    assert!(
        matches!(&e, Error::CodecConfig { array, codec, source, .. }
            if array == "z" && codec == "zstd" && source.key() == Some("level")),
        "{e}"
    );
    assert_eq!(e.location(), Some("zarr.json"));
    assert!(
        e.to_string()
            .contains("level must be an integer, got \"high\""),
        "{e}"
    );

    let mut ext = array_meta(json!([{"name": "vlen-utf8"}]), "string");
    ext["spatial_index"] = json!({"must_understand": true, "configuration": {}});
    f.put_json("m/zarr.json", ext).await;
    let e = f.open("m").await.unwrap_err();
    assert!(matches!(e, Error::MustUnderstand { .. }), "{e}");

    let e = f.open("nothing-here").await.unwrap_err();
    assert!(matches!(e, Error::NodeNotFound { .. }), "{e}");
}

/// A store that fails: the error is a typed store error naming the key.
#[tokio::test]
async fn failing_store() {
    let missing_dir = std::env::temp_dir().join("zarrow-no-such-dir-for-tests");
    let e = ZarrArray::open(missing_dir.to_str().unwrap())
        .await
        .unwrap_err();
    assert!(matches!(e, Error::NodeNotFound { .. }), "{e}");
    let e = zarrow::ZarrStore::open("ftp://example.invalid/x").unwrap_err();
    assert!(matches!(e, Error::Location { .. }), "{e}");
}

/// A zstd-compressed `vlen-utf8` chunk read through the record-batch stream, which decodes it
/// a batch at a time while decompressing: invalid UTF-8 deep in the chunk, a cut-off frame and
/// trailing bytes are typed errors naming the array, the chunk and the element, after the
/// batches before the damage came out right.
#[tokio::test]
async fn corrupt_chunks_read_batch_by_batch() {
    use futures::TryStreamExt;
    let f = Fixture::new();
    let strings: Vec<String> = (0..5000).map(|i| format!("item-{i}-é")).collect();
    let opts = ZarrWriteOptions {
        chunk_shape: Some(vec![5000]),
        compression: Some(BytesToBytes::Zstd {
            level: 3,
            checksum: false,
        }),
        ..Default::default()
    };
    let values = StringArray::from(strings.clone());
    zarrow::write_array(&f.store, "s", &values, &[5000], &opts)
        .await
        .unwrap();
    let raw = encode::vlen_numcodecs(&values).unwrap();
    let zstd = BytesToBytes::Zstd {
        level: 3,
        checksum: false,
    };
    let read = |f: &Fixture| {
        let store = f.store.clone();
        async move {
            let array = match Node::open_store(store.child("s"), "s").await.unwrap() {
                Node::Array(a) => a,
                Node::Group(_) => panic!("group"),
            };
            let stream = zarrow::ZarrRecordBatchStreamBuilder::for_array(array)
                .await
                .unwrap()
                .with_batch_size(1000)
                .build()
                .unwrap();
            let mut good = 0usize;
            let mut stream = std::pin::pin!(stream);
            loop {
                match stream.try_next().await {
                    Ok(Some(b)) => good += b.num_rows(),
                    Ok(None) => return (good, None),
                    Err(e) => return (good, Some(e)),
                }
            }
        }
    };
    let (good, err) = read(&f).await;
    assert_eq!(good, 5000);
    assert!(err.is_none(), "{err:?}");

    let chunk_error = |e: Option<Error>| match e {
        Some(Error::Chunk {
            array,
            chunk,
            source,
        }) => {
            assert_eq!((array.as_str(), chunk.as_str()), ("s", "c/0"));
            source
        }
        other => panic!("expected a chunk error, got {other:?}"),
    };

    // Invalid UTF-8 in element 3210: the first three batches are fine.
    let mut bad = raw.clone();
    let needle = b"item-3210-\xc3\xa9";
    let at = bad.windows(needle.len()).position(|w| w == needle).unwrap();
    bad[at + needle.len() - 1] = b'z';
    f.put("s/c/0", zstd.encode(&bad).unwrap()).await;
    let (good, err) = read(&f).await;
    assert_eq!(good, 3000);
    assert!(matches!(
        chunk_error(err),
        ChunkError::Utf8 { element: 3210 }
    ));

    // The frame cut short.
    let whole = zstd.encode(&raw).unwrap();
    f.put("s/c/0", whole[..whole.len() * 2 / 3].to_vec()).await;
    let (_, err) = read(&f).await;
    assert!(matches!(
        chunk_error(err),
        ChunkError::Codec { codec: "zstd", .. } | ChunkError::Truncated(_)
    ));

    // Bytes after the last item.
    let mut trailing = raw.clone();
    trailing.extend_from_slice(b"tail");
    f.put("s/c/0", zstd.encode(&trailing).unwrap()).await;
    let (good, err) = read(&f).await;
    assert_eq!(good, 4000);
    assert!(matches!(chunk_error(err), ChunkError::Invalid(_)));
}

#[tokio::test]
async fn keys_from_metadata_stay_inside_the_store() {
    // Consolidated metadata naming children outside the group, and an AnnData dataframe whose
    // attributes name columns that way: each is refused with an error naming the key.
    let f = Fixture::new();
    let array = json!({
        "zarr_format": 3, "node_type": "array", "shape": [2], "data_type": "int8",
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [2]}},
        "chunk_key_encoding": {"name": "default"}, "fill_value": 0,
        "codecs": [{"name": "bytes"}]
    });
    for (i, key) in ["..", "../secret", "/etc", "a\\b", "./x", "a/../../b"]
        .into_iter()
        .enumerate()
    {
        let name = format!("g{i}");
        f.put_json(
            &format!("{name}/zarr.json"),
            json!({
                "zarr_format": 3, "node_type": "group", "attributes": {},
                "consolidated_metadata": {"kind": "inline", "must_understand": false,
                    "metadata": {key: array.clone()}}
            }),
        )
        .await;
        let e = Node::open_store(f.store.child(&name), &name)
            .await
            .unwrap_err();
        assert!(
            matches!(e, Error::Metadata { .. }) && e.to_string().contains(key),
            "{key}: {e}"
        );
    }
    // The same in a v2 store's .zmetadata.
    f.put_json("v2/.zgroup", json!({"zarr_format": 2})).await;
    f.put_json(
        "v2/.zmetadata",
        json!({"zarr_consolidated_format": 1, "metadata": {
            ".zgroup": {"zarr_format": 2},
            "../up/.zarray": {"zarr_format": 2, "shape": [2], "chunks": [2], "dtype": "|i1",
                              "compressor": null, "fill_value": 0, "order": "C", "filters": null}
        }}),
    )
    .await;
    let e = Node::open_store(f.store.child("v2"), "v2")
        .await
        .unwrap_err();
    assert!(e.to_string().contains("../up"), "{e}");
    // A child asked for by path.
    f.put_json(
        "plain/zarr.json",
        json!({"zarr_format": 3, "node_type": "group"}),
    )
    .await;
    let plain = match Node::open_store(f.store.child("plain"), "plain")
        .await
        .unwrap()
    {
        Node::Group(g) => g,
        Node::Array(_) => panic!("array"),
    };
    for key in ["../bad", "/abs", "a\\b"] {
        let e = plain.child(key).await.unwrap_err();
        assert!(e.to_string().contains(key), "{key}: {e}");
    }
    f.put_json(
        "df/zarr.json",
        json!({
            "zarr_format": 3, "node_type": "group",
            "attributes": {"encoding-type": "dataframe", "encoding-version": "0.2.0",
                           "_index": "_index", "column-order": ["../outside"]}
        }),
    )
    .await;
    let node = Node::open_store(f.store.child("df"), "df").await.unwrap();
    let e = zarrow::TableModel::from_node(node, Default::default())
        .await
        .unwrap_err();
    assert!(e.to_string().contains("../outside"), "{e}");
}

#[tokio::test]
async fn unstored_chunks_are_filled_a_batch_at_a_time() {
    use futures::StreamExt;
    // One chunk of 2^32 float64s (32 GiB decoded), none stored: its fill value used to be
    // materialised for the whole chunk before the first row was handed out.
    let f = Fixture::new();
    let mut meta = array_meta(
        json!([{"name": "bytes", "configuration": {"endian": "little"}}]),
        "float64",
    );
    meta["shape"] = json!([(1u64 << 32) - 1]);
    meta["chunk_grid"]["configuration"]["chunk_shape"] = json!([(1u64 << 32) - 1]);
    meta["fill_value"] = json!(1.5);
    f.put_json("huge/zarr.json", meta).await;
    let model = f.model("huge").await;
    let mut scan = zarrow::ZarrScan::new(&model);
    scan.batch_size = 1000;
    let mut stream = scan.stream(model, zarrow::ScanContext::default()).unwrap();
    for _ in 0..3 {
        let batch = stream.next().await.unwrap().unwrap();
        assert_eq!(batch.num_rows(), 1000);
        let values = batch
            .column(1)
            .as_any()
            .downcast_ref::<arrow::array::Float64Array>()
            .unwrap();
        assert!(values.iter().all(|v| v == Some(1.5)));
    }
}

#[tokio::test]
async fn categories_are_read_as_far_as_codes_reach() {
    // An AnnData dataframe whose categorical column claims 2^40 categories (none stored):
    // int8 codes reach 128 of them, and only those are read.
    let f = Fixture::new();
    let group = |attrs: serde_json::Value| json!({"zarr_format": 3, "node_type": "group", "attributes": attrs});
    let array = |shape: u64, data_type: &str, fill: serde_json::Value| {
        let codecs = if data_type == "string" {
            json!([{"name": "vlen-utf8"}])
        } else {
            json!([{"name": "bytes", "configuration": {"endian": "little"}}])
        };
        let mut m = array_meta(codecs, data_type);
        m["shape"] = json!([shape]);
        m["chunk_grid"]["configuration"]["chunk_shape"] = json!([shape.min(1 << 20)]);
        m["fill_value"] = fill;
        m
    };
    f.put_json(
        "obs/zarr.json",
        group(
            json!({"encoding-type": "dataframe", "encoding-version": "0.2.0",
                     "_index": "_index", "column-order": ["cell_type"]}),
        ),
    )
    .await;
    f.put_json("obs/_index/zarr.json", array(4, "string", json!("cell")))
        .await;
    f.put_json(
        "obs/cell_type/zarr.json",
        group(
            json!({"encoding-type": "categorical", "encoding-version": "0.2.0", "ordered": false}),
        ),
    )
    .await;
    f.put_json("obs/cell_type/codes/zarr.json", array(4, "int8", json!(3)))
        .await;
    f.put_json(
        "obs/cell_type/categories/zarr.json",
        array(1 << 40, "string", json!("B")),
    )
    .await;
    assert_eq!(f.column_text("obs", "cell_type", 4).await, ["B"; 4]);
}

#[tokio::test]
async fn metadata_faults_are_named_as_such() {
    let f = Fixture::new();
    // A fill value that is no string: the metadata's error, not the first missing chunk's.
    let mut meta = array_meta(json!([{"name": "vlen-utf8"}]), "string");
    meta["fill_value"] = json!([255, 254]);
    f.put_json("badfill/zarr.json", meta).await;
    let e = f.open("badfill").await.unwrap_err();
    let msg = e.to_string();
    assert!(matches!(e, Error::Metadata { .. }), "{msg}");
    assert!(
        msg.contains("badfill") && msg.contains("fill_value"),
        "{msg}"
    );
    assert!(!msg.contains("chunk"), "{msg}");
    // A fill value out of its type's range: the typed cause is kept under the error.
    let mut meta = array_meta(json!([{"name": "bytes"}]), "uint8");
    meta["fill_value"] = json!(300);
    f.put_json("wide/zarr.json", meta).await;
    let e = f.open("wide").await.unwrap_err();
    assert!(matches!(e, Error::Metadata { .. }), "{e}");
    let cause =
        std::error::Error::source(&e).and_then(|s| s.downcast_ref::<zarrow::FillValueError>());
    assert!(
        matches!(
            cause,
            Some(zarrow::FillValueError::OutOfRange { value: 300, .. })
        ),
        "{e}: {cause:?}"
    );
    // A chunk grid zarrow does not read is called a chunk grid, not a codec.
    let mut meta = array_meta(json!([{"name": "vlen-utf8"}]), "string");
    meta["chunk_grid"] = json!({"name": "hexagonal", "configuration": {"edge": 2}});
    f.put_json("hex/zarr.json", meta).await;
    let e = f.open("hex").await.unwrap_err();
    let msg = e.to_string();
    assert!(matches!(e, Error::UnsupportedChunkGrid { .. }), "{msg}");
    assert!(
        msg.contains("chunk grid 'hexagonal'") && !msg.contains("codec"),
        "{msg}"
    );
    // A rectilinear grid whose edges fall short of the shape is bad metadata, array named.
    let mut meta = array_meta(json!([{"name": "vlen-utf8"}]), "string");
    meta["chunk_grid"] = json!({"name": "rectilinear",
        "configuration": {"kind": "inline", "chunk_shapes": [[2, 1]]}});
    f.put_json("rect/zarr.json", meta).await;
    let e = f.open("rect").await.unwrap_err();
    let msg = e.to_string();
    assert!(matches!(e, Error::Metadata { .. }), "{msg}");
    assert!(msg.contains("'rect'") && msg.contains("short of"), "{msg}");
}

#![allow(clippy::single_range_in_vec_init)]

use arrow_array::RecordBatch;
use futures::TryStreamExt;

use super::*;
use crate::test_util::fixture;
use crate::ZarrRecordBatchStreamBuilder;

async fn collect(stream: ZarrRecordBatchStream) -> Vec<RecordBatch> {
    stream.try_collect().await.unwrap()
}

#[tokio::test]
async fn a_written_down_scan_reads_the_same() {
    let model = Arc::new(
        TableModel::open(&fixture("xarray_v3.zarr"), TableOptions::default())
            .await
            .unwrap(),
    );
    let grid = model.chunk_grid_shape();
    let builder = ZarrRecordBatchStreamBuilder::new(model.clone())
        .with_projection(vec![4, 0, 3])
        .with_chunks(ChunkRanges::from_dims(&grid, vec![vec![1..3], vec![1..2]]).unwrap())
        .with_batch_size(3);
    let scan = builder.scan().unwrap();
    let json = scan.to_json().unwrap();
    let back = ZarrScan::from_json(&json).unwrap();
    assert_eq!(back, scan);
    let here = collect(builder.build().unwrap()).await;
    let there = collect(back.open().await.unwrap()).await;
    assert_eq!(here, there);
    let rows: usize = here.iter().map(RecordBatch::num_rows).sum();
    // chunks (1, 1) and (2, 1) of (4, 3) over (10, 5): 4×2 + 2×2 rows.
    assert_eq!(rows, 12);
    assert!(here.iter().all(|b| b.num_rows() <= 3));
    assert_eq!(
        here[0]
            .schema()
            .fields()
            .iter()
            .map(|f| f.name().as_str())
            .collect::<Vec<_>>(),
        ["temperature", "time", "station_name"]
    );
}

#[tokio::test]
async fn limits_keep_only_the_chunks_they_need() {
    let model = Arc::new(
        TableModel::open(
            &fixture("v3_strings.zarr/string_2d"),
            TableOptions::default(),
        )
        .await
        .unwrap(),
    );
    // (7, 5) in chunks of (3, 2): the first chunk holds 6 rows, the second 6.
    let builder = ZarrRecordBatchStreamBuilder::new(model.clone()).with_limit(7);
    let scan = builder.scan().unwrap();
    assert_eq!(scan.chunks.len(), 2);
    let batches = collect(builder.build().unwrap()).await;
    assert_eq!(batches.iter().map(RecordBatch::num_rows).sum::<usize>(), 7);
    let metrics = ScanMetrics::new();
    let ctx = ScanContext {
        metrics: metrics.clone(),
        ..Default::default()
    };
    let stream = scan.stream(model, ctx).unwrap();
    let again = collect(stream).await;
    assert_eq!(again, batches);
    let counts = metrics.counts();
    assert_eq!((counts.chunks_read, counts.rows_out), (2, 7));
    assert!(counts.requests >= 1 && counts.bytes_fetched > 0, "{counts}");
}

#[tokio::test]
async fn a_scan_of_a_changed_table_is_refused() {
    let model = TableModel::open(&fixture("xarray_v3.zarr"), TableOptions::default())
        .await
        .unwrap();
    let mut scan = ZarrScan::new(&model);
    scan.columns.push("no_such_column".into());
    let e = scan.open().await.unwrap_err().to_string();
    assert!(e.contains("no_such_column"), "{e}");
    let mut scan = ZarrScan::new(&model);
    scan.chunks = ChunkRanges::all(&[30, 2]);
    let e = scan.open().await.unwrap_err().to_string();
    assert!(e.contains("do not fit the chunk grid"), "{e}");
}

/// The sample's `X`: 2000 × 200 float32 in 8 chunks of 250 × 200, a table of 8 chunks of 50 000
/// rows (cell, gene, X).
fn sample_x() -> String {
    concat!(env!("CARGO_MANIFEST_DIR"), "/../../data/pbmc_sample.zarr/X").to_string()
}

/// Reads `scan` with `decode_ahead`, a consumer that takes its time over each batch: the batches,
/// and the most rows the stream had decoded beyond those handed out at any point.
async fn read_slowly(
    scan: &ZarrScan,
    model: Arc<TableModel>,
    decode_ahead: usize,
    memory: Option<Arc<dyn ScanMemory>>,
) -> (Vec<Result<RecordBatch>>, u64) {
    use futures::StreamExt;

    let metrics = ScanMetrics::new();
    let ctx = ScanContext {
        metrics: metrics.clone(),
        memory,
        decode_ahead,
        ..Default::default()
    };
    let mut stream = scan.stream(model, ctx).unwrap();
    let (mut batches, mut handed, mut most_ahead) = (Vec::new(), 0u64, 0u64);
    while let Some(batch) = stream.next().await {
        handed += batch.as_ref().map_or(0, |b| b.num_rows() as u64);
        batches.push(batch);
        // the consumer at work: time for whatever was started ahead to finish
        tokio::time::sleep(std::time::Duration::from_millis(30)).await;
        most_ahead = most_ahead.max(metrics.counts().rows_out - handed);
    }
    (batches, most_ahead)
}

/// The chunk requests a scan of `location` (batches of 1,000 rows, no decoding ahead) has made
/// once its first batch was taken and the stream had time to fetch ahead, and in all.
async fn requests_after_one_batch(location: &str) -> (u64, u64) {
    use futures::StreamExt;

    let model = Arc::new(
        TableModel::open(location, TableOptions::default())
            .await
            .unwrap(),
    );
    let mut scan = ZarrScan::new(&model);
    scan.batch_size = 1_000;
    let metrics = ScanMetrics::new();
    let ctx = ScanContext {
        metrics: metrics.clone(),
        ..Default::default()
    };
    let mut stream = scan.stream(model, ctx).unwrap();
    stream.next().await.unwrap().unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    let early = metrics.counts().requests;
    while let Some(batch) = stream.next().await {
        batch.unwrap();
    }
    (early, metrics.counts().requests)
}

/// A copy of the local directory `from` at `to` in the process's `memory://` store.
async fn copy_to_memory(from: &std::path::Path, to: &str) {
    let store = crate::ZarrStore::open(to).unwrap();
    let mut dirs = vec![from.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
                continue;
            }
            let key = path
                .strip_prefix(from)
                .unwrap()
                .to_str()
                .unwrap()
                .to_string();
            let bytes = std::fs::read(&path).unwrap();
            store.put(&key, bytes.into()).await.unwrap();
        }
    }
}

/// From a local file a stream fetches one chunk ahead of the one it decodes (the decoder
/// never waits here: the window stays as it is); from a store with round trips (`memory://`
/// stands for one) it fetches `concurrency` array chunks ahead from the start.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_local_table_is_fetched_one_chunk_ahead_and_a_remote_one_all_ahead() {
    let (early, total) = requests_after_one_batch(&sample_x()).await;
    // 8 chunks of rows, each as many requests
    assert_eq!(total % 8, 0, "{total} requests");
    let per_chunk = total / 8;
    assert_eq!(
        early,
        2 * per_chunk,
        "{early} of {total} requests after one batch"
    );

    copy_to_memory(
        std::path::Path::new(&sample_x()),
        "memory:///scan_tests/far_x",
    )
    .await;
    let (early, far_total) = requests_after_one_batch("memory:///scan_tests/far_x").await;
    assert_eq!(far_total, total);
    assert_eq!(early, total, "{early} of {total} requests after one batch");
}

/// With `decode_ahead`, chunks are decoded on other threads before the consumer asks for them
/// and handed out in order, as the same batches; without it, or under a bounded budget, a
/// batch is decoded only when it is asked for.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn decoding_ahead_hands_out_the_same_batches_in_order() {
    let model = Arc::new(
        TableModel::open(&sample_x(), TableOptions::default())
            .await
            .unwrap(),
    );
    let mut scan = ZarrScan::new(&model);
    scan.batch_size = 25_000; // 2 batches a chunk
    let (lazy, lazy_ahead) = read_slowly(&scan, model.clone(), 0, None).await;
    let lazy: Vec<_> = lazy.into_iter().map(Result::unwrap).collect();
    assert_eq!(lazy.len(), 8 * 2);
    assert_eq!(
        lazy_ahead, 0,
        "decoded ahead of the consumer without decode_ahead"
    );

    let (ahead, most_ahead) = read_slowly(&scan, model.clone(), 2, None).await;
    let ahead: Vec<_> = ahead.into_iter().map(Result::unwrap).collect();
    assert_eq!(ahead, lazy);
    // decoded whole: the rest of the chunk being handed out and up to 3 after it
    assert!(most_ahead >= 2 * 50_000, "{most_ahead} rows decoded ahead");
    assert!(
        most_ahead <= 25_000 + 3 * 50_000,
        "{most_ahead} rows decoded ahead"
    );

    // A bounded budget cannot reserve a decoded chunk beforehand: no decoding ahead.
    #[derive(Debug)]
    struct Roomy;
    impl ScanMemory for Roomy {
        fn try_grow(&self, _: usize) -> std::result::Result<(), crate::MemoryError> {
            Ok(())
        }
        fn shrink(&self, _: usize) {}
    }
    let (bounded, bounded_ahead) = read_slowly(&scan, model, 2, Some(Arc::new(Roomy))).await;
    let bounded: Vec<_> = bounded.into_iter().map(Result::unwrap).collect();
    assert_eq!(bounded, lazy);
    assert_eq!(bounded_ahead, 0);
}

/// A corrupt chunk decoded ahead is an error naming it, in its place: the chunks before it are
/// handed out first, as they are when decoding is not ahead.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_corrupt_chunk_decoded_ahead_is_an_error_in_its_place() {
    let dir = tempfile::tempdir().unwrap();
    let x = dir.path().join("X");
    std::fs::create_dir_all(x.join("c")).unwrap();
    std::fs::copy(format!("{}/zarr.json", sample_x()), x.join("zarr.json")).unwrap();
    for i in 0..8 {
        let (from, to) = (format!("{}/c/{i}", sample_x()), x.join(format!("c/{i}")));
        std::fs::create_dir_all(&to).unwrap();
        for entry in std::fs::read_dir(&from).unwrap() {
            let entry = entry.unwrap();
            let mut bytes = std::fs::read(entry.path()).unwrap();
            if i == 5 {
                bytes.truncate(bytes.len() / 2);
            }
            std::fs::write(to.join(entry.file_name()), bytes).unwrap();
        }
    }
    let model = Arc::new(
        TableModel::open(x.to_str().unwrap(), TableOptions::default())
            .await
            .unwrap(),
    );
    let mut scan = ZarrScan::new(&model);
    scan.batch_size = 50_000; // a batch a chunk
    let (lazy, _) = read_slowly(&scan, model.clone(), 0, None).await;
    let (ahead, _) = read_slowly(&scan, model, 3, None).await;
    let oks =
        |batches: &[Result<RecordBatch>]| batches.iter().map(Result::is_ok).collect::<Vec<_>>();
    assert_eq!(oks(&ahead), oks(&lazy));
    assert_eq!(oks(&ahead)[..6], [true, true, true, true, true, false]);
    for batches in [&lazy, &ahead] {
        let e = batches[5].as_ref().unwrap_err().to_string();
        assert!(
            e.contains("chunk 'c/5/0'") && e.contains("incomplete frame"),
            "{e}"
        );
    }
}

/// A chunk of 2^32 − 1 fill values (the most a chunk holds) decoded ahead streams: its first batches arrive at once and
/// what is decoded ahead stays within `DECODE_AHEAD_BYTES` a chunk (decoding it whole took
/// 32 GiB and no batch came).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_huge_fill_chunk_decoded_ahead_streams_within_its_bytes() {
    use futures::StreamExt;

    let store = crate::ZarrStore::open("memory:///scan_tests/huge_fill").unwrap();
    let meta = r#"{"zarr_format":3,"node_type":"array","shape":[4294967295],
        "data_type":"int64","chunk_grid":{"name":"regular","configuration":
        {"chunk_shape":[4294967295]}},"chunk_key_encoding":{"name":"default"},
        "fill_value":7,"codecs":[{"name":"bytes","configuration":{"endian":"little"}}]}"#;
    store.put("zarr.json", meta.into()).await.unwrap();
    let model = Arc::new(
        TableModel::open("memory:///scan_tests/huge_fill", TableOptions::default())
            .await
            .unwrap(),
    );
    let metrics = ScanMetrics::new();
    let ctx = ScanContext {
        metrics: metrics.clone(),
        decode_ahead: 2,
        ..Default::default()
    };
    let mut stream = ZarrScan::new(&model).stream(model.clone(), ctx).unwrap();
    let first = async {
        let mut handed = 0;
        for _ in 0..3 {
            let batch = stream.next().await.unwrap().unwrap();
            assert!(batch.num_rows() > 0);
            handed += batch.num_rows() as u64;
        }
        handed
    };
    let handed = tokio::time::timeout(std::time::Duration::from_secs(60), first)
        .await
        .expect("no batch of a fill chunk decoded ahead within 60 s");
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    let ahead = metrics.counts().rows_out - handed;
    // two columns (dim_0, the values) of 8 bytes a row
    let per_row = 16;
    assert!(
        ahead * per_row <= 2 * stream::DECODE_AHEAD_BYTES as u64,
        "{ahead} rows decoded ahead"
    );
}

/// Rules out the chunks of rows whose first coordinate is in `out`.
#[derive(Debug)]
struct RuleOut {
    out: Vec<u64>,
}

impl crate::ChunkFilter for RuleOut {
    fn may_match(&self, coords: &[u64]) -> bool {
        !self.out.contains(&coords[0])
    }
}

#[tokio::test]
async fn chunk_filters_skip_chunks_and_reverse_reads_the_last_first() {
    let model = Arc::new(
        TableModel::open(&fixture("xarray_v3.zarr"), TableOptions::default())
            .await
            .unwrap(),
    );
    let scan = ZarrScan::new(&model);
    let first_row = |batches: &[RecordBatch]| batches[0].slice(0, 1);
    let all = collect(scan.stream(model.clone(), ScanContext::default()).unwrap()).await;
    let ctx = ScanContext {
        reverse: true,
        chunk_filter: Some(Arc::new(RuleOut { out: vec![0] })),
        ..Default::default()
    };
    let pruned = collect(scan.stream(model.clone(), ctx.clone()).unwrap()).await;
    let counts = ctx.metrics.counts();
    let grid = model.chunk_grid_shape();
    // Every chunk of the first row of chunks ruled out, the rest read last first.
    let per_row: u64 = grid[1..].iter().product();
    assert_eq!(counts.chunks_pruned_at_run_time, per_row);
    assert_eq!(counts.chunks_read, scan.chunks.len() - per_row);
    let last = collect(
        ZarrScan {
            chunks: scan
                .chunks
                .sub_window(scan.chunks.len() - 1..scan.chunks.len()),
            ..scan.clone()
        }
        .stream(model.clone(), ScanContext::default())
        .unwrap(),
    )
    .await;
    assert_eq!(first_row(&pruned), first_row(&last));
    let rows = |b: &[RecordBatch]| b.iter().map(RecordBatch::num_rows).sum::<usize>();
    assert!(rows(&pruned) < rows(&all));
    // A limit reads the first rows whatever the filter and the order.
    let mut limited = scan.clone();
    limited.limit = Some(3);
    let batches = collect(limited.stream(model.clone(), ctx.clone()).unwrap()).await;
    assert_eq!(first_row(&batches), first_row(&all));
}

/// A table of 8 one-row chunks of strings in memory: chunk 6 stores 1,000 bytes of text, the
/// others one byte each.
async fn one_heavy_chunk() -> Arc<TableModel> {
    use object_store::{memory::InMemory, path::Path, ObjectStore, ObjectStoreExt};
    let memory = Arc::new(InMemory::new());
    let meta = serde_json::json!({
        "zarr_format": 3, "node_type": "array", "shape": [8], "data_type": "string",
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [1]}},
        "chunk_key_encoding": {"name": "default"}, "fill_value": "",
        "codecs": [{"name": "vlen-utf8", "configuration": {}}],
        "dimension_names": ["row"]
    });
    let put = |key: String, bytes: Vec<u8>| {
        let memory = memory.clone();
        async move { memory.put(&Path::from(key), bytes.into()).await.unwrap() }
    };
    put("t/zarr.json".into(), meta.to_string().into_bytes()).await;
    for k in 0..8 {
        let text = if k == 6 { "x".repeat(1000) } else { "a".into() };
        let chunk =
            crate::write::chunk::encode::vlen_numcodecs_items(&[Some(text.as_bytes())], b"");
        put(format!("t/c/{k}"), chunk.unwrap()).await;
    }
    let store = ZarrStore::new(memory as Arc<dyn ObjectStore>, Path::from("t"));
    Arc::new(
        TableModel::open_store(store, "t", TableOptions::default())
            .await
            .unwrap(),
    )
}

#[tokio::test]
async fn partitions_are_balanced_by_stored_bytes() {
    let model = one_heavy_chunk().await;
    let scan = ZarrScan::new(&model);
    let lens = |parts: &[ZarrScan]| parts.iter().map(|p| p.chunks.len()).collect::<Vec<_>>();
    // The heavy chunk is a run of its own; the light ones before it share the other.
    let parts = scan.split_by_stored_bytes(&model, 2).await;
    assert_eq!(lens(&parts), [6, 2]);
    assert_eq!(parts[1].chunks.iter().next(), Some(vec![6]));
    assert_eq!(
        lens(&scan.split_by_stored_bytes(&model, 3).await),
        [6, 1, 1]
    );
    // By count, the heavy chunk would share a run with three others.
    assert_eq!(lens(&scan.split(2)), [4, 4]);
    // Nothing stored to weigh (only the index column), or a limit: as `split`.
    let index_only = ZarrScan {
        columns: vec![model.columns()[0].name.clone()],
        ..scan.clone()
    };
    assert_eq!(model.columns()[0].name, "row");
    assert_eq!(
        lens(&index_only.split_by_stored_bytes(&model, 2).await),
        [4, 4]
    );
    let limited = ZarrScan {
        limit: Some(3),
        ..scan.clone()
    };
    assert_eq!(lens(&limited.split_by_stored_bytes(&model, 2).await), [8]);
    // Read in runs, the rows come back whole and in order.
    let whole = collect(scan.stream(model.clone(), ScanContext::default()).unwrap()).await;
    let runs = scan.read_all(model.clone(), 3).await.unwrap();
    let concat = |b: &[RecordBatch]| arrow_select::concat::concat_batches(&b[0].schema(), b);
    assert_eq!(concat(&runs).unwrap(), concat(&whole).unwrap());
}

/// The batches of the fixture `location` read with `options`, three rows at a time.
async fn batches_of(location: &str, options: TableOptions) -> Vec<RecordBatch> {
    let model = Arc::new(TableModel::open(&fixture(location), options).await.unwrap());
    let builder = ZarrRecordBatchStreamBuilder::new(model).with_batch_size(3);
    collect(builder.build().unwrap()).await
}

#[tokio::test]
async fn named_columns_read_as_dictionaries_of_the_same_values() {
    use arrow_array::cast::AsArray;
    use arrow_schema::DataType as ArrowType;
    // A nullable-string-array (masked), a string-array, a categorical (already a dictionary);
    // a compressed vlen array decoded a batch at a time, its fill values as NULL; bytes as
    // views.
    let views = if cfg!(feature = "utf8view") {
        "view"
    } else {
        "utf8"
    };
    let cases = [
        ("anndata_v3.zarr/obs", "note,barcode,cell_type", "utf8"),
        (
            "v3_strings.zarr/string_fill_missing",
            "string_fill_missing",
            "utf8",
        ),
        ("v3_strings.zarr/string_zstd", "string_zstd", "large_utf8"),
        (
            "v3_bytes.zarr/variable_length_bytes",
            "variable_length_bytes",
            views,
        ),
    ];
    for (location, names, strings) in cases {
        let mut plain = TableOptions::default();
        plain.set("string_type", strings).unwrap();
        plain.set("fill_as_null", "true").unwrap();
        let mut options = plain.clone();
        options.set("dictionary", names).unwrap();
        let (want, got) = (
            batches_of(location, plain).await,
            batches_of(location, options).await,
        );
        assert_eq!(want.len(), got.len(), "{location}");
        assert!(got.len() > 1, "{location}: one batch");
        for (want, got) in want.iter().zip(&got) {
            for (i, field) in want.schema().fields().iter().enumerate() {
                let (w, g) = (want.column(i), got.column(i));
                let named = names.split(',').any(|n| n == field.name());
                if !named || matches!(field.data_type(), ArrowType::Dictionary(..)) {
                    assert_eq!(w, g, "{location} {}", field.name());
                    continue;
                }
                let expected = ArrowType::Dictionary(
                    Box::new(ArrowType::Int32),
                    Box::new(field.data_type().clone()),
                );
                assert_eq!(g.data_type(), &expected, "{location} {}", field.name());
                assert_eq!(got.schema().field(i).data_type(), &expected);
                let dict = g.as_any_dictionary();
                assert!(dict.values().len() <= g.len(), "a batch's own values");
                let values = arrow_select::take::take(dict.values(), dict.keys(), None).unwrap();
                assert_eq!(&values, w, "{location} {}", field.name());
            }
        }
    }
}

#[tokio::test]
async fn a_dictionary_option_naming_no_string_column_is_refused_on_open() {
    for (names, says) in [
        ("n_genes", "only string and binary columns"),
        ("nope", "has no column 'nope'"),
    ] {
        let mut options = TableOptions::default();
        options.set("dictionary", names).unwrap();
        let err = TableModel::open(&fixture("anndata_v3.zarr/obs"), options)
            .await
            .unwrap_err()
            .to_string();
        assert!(err.contains(says) && err.contains("dictionary"), "{err}");
    }
}

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

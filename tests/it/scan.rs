//! The one scan, everywhere: every table of every fixture store (arrays, groups, xarray,
//! AnnData, sharded), scanned whole, pruned to a part of its chunk grid, projected, limited
//! and split, is written down as JSON, read back, and run again — in this process and in a
//! process of its own (`run_scan`) — giving the same batches. Plus: the sync reader inside a
//! runtime, reader and SQL naming columns alike, and grids too large to list.

use std::process::Command;
use std::sync::Arc;

use arrow::array::RecordBatch;
use arrow::ipc::reader::StreamReader;
use futures::TryStreamExt;
use zarrow::{
    ChunkRanges, ReadLimits, TableModel, TableOptions, ZarrReadOptions,
    ZarrRecordBatchReaderBuilder, ZarrRecordBatchStreamBuilder, ZarrScan, ZarrStore,
};

use crate::common::{data_dir, run_scan_with};

/// Every node of every fixture store that opens as a table; the walk fails listing any that
/// should and does not.
async fn fixture_tables() -> Vec<(String, Arc<TableModel>)> {
    zarrow_testkit::fixture_tables(&TableOptions::default(), NOT_TABLES)
        .await
        .into_iter()
        .map(|(location, model)| (location, Arc::new(model)))
        .collect()
}

/// The fixture nodes that are no table, and why (`x*`: in every store whose name starts so).
const NOT_TABLES: &[(&str, &str)] = &[
    ("pbmc68k_reduced_*", "an AnnData root: a group of groups"),
    (
        "sparse_h5sparse_v2.zarr",
        "a group holding one sparse matrix (X is its table)",
    ),
    (
        "v2_from_zarr3.zarr",
        "a collection of unrelated arrays, one table each",
    ),
    (
        "v2_legacy.zarr",
        "a collection of unrelated arrays, one table each",
    ),
    (
        "v3_bytes.zarr",
        "a collection of unrelated arrays, one table each",
    ),
    (
        "newest_lowprec.zarr",
        "a collection of unrelated arrays, one table each",
    ),
    (
        "v3_fixed.zarr",
        "a collection of unrelated arrays, one table each",
    ),
    ("v3_hierarchy*/group_b/empty_group", "an empty group"),
    (
        "anndata_v*/layers",
        "AnnData layers of sparse matrices, one table each",
    ),
    ("anndata_uns_*/layers", "empty AnnData layers"),
    ("pbmc68k_reduced_*/layers", "empty AnnData layers"),
    (
        "*/obsm",
        "AnnData obsm: arrays of different widths, or none",
    ),
    ("*/obsp", "AnnData obsp: sparse matrices, one table each"),
    ("anndata_*/varm", "empty AnnData varm"),
    ("*/varp", "empty AnnData varp"),
    ("*/uns", "AnnData uns: unstructured, one table each"),
    ("*/uns/louvain", "a group of parameters only"),
    ("*/uns/neighbors", "a group of parameters only"),
    (
        "pbmc68k_reduced_*/raw",
        "AnnData raw: X, var and varm, one table each",
    ),
    ("*/raw/varm", "empty AnnData varm"),
    ("*/obsm/neighbors", "an AnnData awkward array"),
    ("*/obs/bulk_labels", "a categorical: a column of obs"),
    ("*/obs/cell_type", "a categorical: a column of obs"),
    ("*/obs/louvain", "a categorical: a column of obs"),
    ("*/obs/phase", "a categorical: a column of obs"),
    ("*/obs/stage", "a categorical: a column of obs"),
    ("*/obs/tissue", "a categorical: a column of obs"),
];

async fn collect(builder: ZarrRecordBatchStreamBuilder) -> Vec<RecordBatch> {
    builder.build().unwrap().try_collect().await.unwrap()
}

/// The batches of a serialized scan, run by the `run_scan` binary.
fn in_another_process(json: &str) -> Vec<RecordBatch> {
    let out = run_scan_with(Command::new(env!("CARGO_BIN_EXE_run_scan")), json);
    assert!(
        out.status.success(),
        "run_scan failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    StreamReader::try_new(std::io::Cursor::new(out.stdout), None)
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap()
}

/// The read limits travel in the written-down scan: the process that runs it (a Ballista
/// executor, a Python worker) holds to the client's, whatever its own environment says — the
/// library reads no `ZARROW_MAX_*`, only the CLI and Python do, at their edge.
#[tokio::test]
async fn a_written_down_scan_keeps_the_clients_limits() {
    let location = data_dir()
        .join("v3_strings.zarr/string_zstd")
        .to_string_lossy()
        .into_owned();
    let tight = ReadLimits {
        max_chunk_bytes: 8,
        ..Default::default()
    };
    let options = TableOptions {
        read: ZarrReadOptions::default().with_limits(tight),
        ..Default::default()
    };
    let model = TableModel::open(&location, options).await.unwrap();
    let json = ZarrScan::new(&model).to_json().unwrap();
    assert_eq!(
        ZarrScan::from_json(&json).unwrap().options.read.limits,
        tight
    );
    // An executor whose environment would allow the chunks still refuses them.
    let mut command = Command::new(env!("CARGO_BIN_EXE_run_scan"));
    command.env("ZARROW_MAX_CHUNK_BYTES", "4294967296");
    let out = run_scan_with(command, &json);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success(),
        "the executor read past the client's limit"
    );
    assert!(
        stderr.contains("string_zstd") && stderr.contains("chunk '"),
        "{stderr}"
    );
    // And one whose environment sets tiny limits reads a scan planned with the defaults.
    let model = TableModel::open(&location, TableOptions::default())
        .await
        .unwrap();
    let json = ZarrScan::new(&model).to_json().unwrap();
    let mut command = Command::new(env!("CARGO_BIN_EXE_run_scan"));
    for var in [
        "ZARROW_MAX_CHUNK_BYTES",
        "ZARROW_MAX_ITEM_BYTES",
        "ZARROW_MAX_METADATA_BYTES",
    ] {
        command.env(var, "8");
    }
    let out = run_scan_with(command, &json);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rows: usize = StreamReader::try_new(std::io::Cursor::new(out.stdout), None)
        .unwrap()
        .map(|b| b.unwrap().num_rows())
        .sum();
    assert_eq!(rows as u64, model.num_rows());
}

#[tokio::test]
async fn every_fixture_table_reads_the_same_from_its_written_down_scan() {
    let tables = fixture_tables().await;
    assert!(tables.len() >= 40, "only {} fixture tables", tables.len());
    let mut scans = 0;
    for (location, model) in &tables {
        let grid = model.chunk_grid_shape();
        let ncols = model.columns().len();
        let rows = model.num_rows() as usize;
        let all = || ZarrRecordBatchStreamBuilder::new(model.clone()).with_batch_size(5);
        // Pruned: the last chunk along each dimension (a box of the grid).
        let last = ChunkRanges::from_dims(
            &grid,
            grid.iter()
                .map(|&g| std::iter::once(g.saturating_sub(1)..g).collect())
                .collect(),
        )
        .unwrap();
        let builders = [
            all(),
            all().with_chunks(last),
            all().with_projection((0..ncols).rev().collect()),
            all().with_limit(rows / 2 + 1),
        ];
        for (k, builder) in builders.into_iter().enumerate() {
            let scan = builder.scan().unwrap();
            let json = scan.to_json().unwrap();
            let back = ZarrScan::from_json(&json).unwrap();
            assert_eq!(back, scan, "{location}");
            let here = collect(builder).await;
            let reopened: Vec<RecordBatch> =
                back.open().await.unwrap().try_collect().await.unwrap();
            assert_eq!(here, reopened, "{location}: scan {k} reopened");
            // Split into partitions, the parts read the whole, in order.
            let parts = back.split(3);
            let mut joined = Vec::new();
            for part in parts {
                let batches: Vec<RecordBatch> =
                    part.open().await.unwrap().try_collect().await.unwrap();
                joined.extend(batches);
            }
            let concat = |b: &[RecordBatch]| {
                arrow::compute::concat_batches(
                    &here.first().map_or_else(
                        || Arc::new(arrow::datatypes::Schema::empty()),
                        |f| f.schema(),
                    ),
                    b,
                )
                .unwrap()
            };
            if !here.is_empty() {
                assert_eq!(concat(&joined), concat(&here), "{location}: scan {k} split");
            }
            if k == 0 || k == 3 {
                let there = in_another_process(&json);
                assert_eq!(there, here, "{location}: scan {k} in another process");
            }
            scans += 1;
        }
    }
    assert!(scans >= 160);
}

#[test]
fn reader_and_sql_name_columns_alike() {
    // A root array is `value` in both; an array in a hierarchy is named after itself.
    for (store, path) in [("v3_root_array.zarr", ""), ("v3_strings.zarr", "string_2d")] {
        let location = crate::common::location(store, path);
        let reader = ZarrRecordBatchReaderBuilder::try_new(&location).unwrap();
        let names: Vec<String> = reader
            .schema()
            .fields()
            .iter()
            .map(|f| f.name().clone())
            .collect();
        let runtime = tokio::runtime::Runtime::new().unwrap();
        let sql: Vec<String> = runtime.block_on(async {
            let table = zarrow_datafusion::ZarrTable::try_new(&location, Default::default())
                .await
                .unwrap();
            datafusion::catalog::TableProvider::schema(&table)
                .fields()
                .iter()
                .map(|f| f.name().clone())
                .collect()
        });
        assert_eq!(names, sql, "{location}");
    }
    let root = crate::common::location("v3_root_array.zarr", "");
    let reader = ZarrRecordBatchReaderBuilder::try_new(&root).unwrap();
    assert_eq!(reader.schema().fields().last().unwrap().name(), "value");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sync_reader_works_inside_a_runtime() {
    let location = crate::common::location("v3_strings.zarr", "string_2d");
    let reader = ZarrRecordBatchReaderBuilder::try_new(&location)
        .unwrap()
        .with_batch_size(4)
        .build()
        .unwrap();
    let rows: usize = reader.map(|b| b.unwrap().num_rows()).sum();
    assert_eq!(rows, 35);
}

#[tokio::test]
async fn a_grid_of_2_pow_40_chunks_is_planned_by_its_ranges() {
    // An array of 2^40 one-element chunks, none of them stored (all fill): planning,
    // pruning, limits and SQL must not list the chunks.
    let store = ZarrStore::open("memory:///").unwrap();
    let meta = serde_json::json!({
        "zarr_format": 3, "node_type": "array", "shape": [1u64 << 40],
        "data_type": "int8", "chunk_grid": {"name": "regular",
        "configuration": {"chunk_shape": [1]}}, "chunk_key_encoding": {"name": "default"},
        "fill_value": 7, "codecs": [{"name": "bytes"}]
    });
    store
        .put(
            "huge.zarr/zarr.json",
            serde_json::to_vec(&meta).unwrap().into(),
        )
        .await
        .unwrap();
    let ctx = zarrow_datafusion::zarr_session_context(Default::default());
    let count = ctx
        .sql("SELECT count(*) AS n FROM 'memory:///huge.zarr'")
        .await
        .unwrap()
        .collect()
        .await
        .unwrap();
    let n = arrow::util::pretty::pretty_format_batches(&count)
        .unwrap()
        .to_string();
    assert!(n.contains("1099511627776"), "{n}");
    let some = ctx
        .sql("SELECT dim_0, value FROM 'memory:///huge.zarr' WHERE dim_0 BETWEEN 5 AND 9 OR dim_0 > 1099511627774")
        .await
        .unwrap();
    let plan = some
        .clone()
        .explain(false, false)
        .unwrap()
        .collect()
        .await
        .unwrap();
    let plan = arrow::util::pretty::pretty_format_batches(&plan)
        .unwrap()
        .to_string();
    assert!(plan.contains("chunks=6/1099511627776"), "{plan}");
    let rows: usize = some
        .collect()
        .await
        .unwrap()
        .iter()
        .map(RecordBatch::num_rows)
        .sum();
    assert_eq!(rows, 6);
    let limited = ctx
        .sql("SELECT * FROM 'memory:///huge.zarr' LIMIT 3")
        .await
        .unwrap()
        .collect()
        .await
        .unwrap();
    assert_eq!(limited.iter().map(RecordBatch::num_rows).sum::<usize>(), 3);
}

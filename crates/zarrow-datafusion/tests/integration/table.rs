//! ZarrTable through DataFusion: schemas, store GETs per query, and the fixture tables
//! against what xarray and anndata read.

use crate::common;

use std::sync::atomic::Ordering;
use std::sync::Arc;

use common::CountingStore;
use datafusion::arrow::array::{Array, RecordBatch};
use datafusion::arrow::util::display::{ArrayFormatter, FormatOptions};
use datafusion::physical_plan::{collect, execute_stream};
use datafusion::prelude::{SessionConfig, SessionContext};
use futures::StreamExt;
use object_store::local::LocalFileSystem;
use object_store::memory::InMemory;
use object_store::path::Path;
use object_store::{ObjectStore, PutPayload};
use serde_json::Value;
use zarrow::ZarrStore;
use zarrow_datafusion::{zarr_session_context, SessionContextZarrExt, ZarrTable, ZarrTableOptions};

use zarrow_testkit::fixture;

fn ctx() -> SessionContext {
    zarr_session_context(SessionConfig::new().with_target_partitions(4))
}

/// A context with table `t` over `name` read through a counting store.
async fn counted(name: &str, options: ZarrTableOptions) -> (SessionContext, Arc<CountingStore>) {
    let counting = Arc::new(CountingStore::new(Arc::new(LocalFileSystem::new())));
    let root = Path::from_absolute_path(fixture(name)).unwrap();
    let store = ZarrStore::new(counting.clone(), root);
    let table = ZarrTable::try_new_with_store(store, options).await.unwrap();
    let ctx = ctx();
    ctx.register_table("t", Arc::new(table)).unwrap();
    (ctx, counting)
}

async fn gets_for(ctx: &SessionContext, store: &CountingStore, sql: &str) -> (usize, usize) {
    let before = store.gets.load(Ordering::SeqCst);
    let batches = ctx.sql(sql).await.unwrap().collect().await.unwrap();
    let rows = batches.iter().map(RecordBatch::num_rows).sum();
    (store.gets.load(Ordering::SeqCst) - before, rows)
}

#[tokio::test]
async fn index_columns_fetch_no_chunk() {
    // string_2d: (7, 5) in chunks of (3, 2): 9 chunks, c/1/1 not stored.
    let (ctx, store) = counted("v3_strings.zarr/string_2d", ZarrTableOptions::default()).await;
    assert_eq!(
        gets_for(&ctx, &store, "SELECT dim_0, dim_1 FROM t").await,
        (0, 35)
    );
    assert_eq!(
        gets_for(&ctx, &store, "SELECT count(*) FROM t").await,
        (0, 1)
    );
    assert_eq!(
        gets_for(&ctx, &store, "SELECT max(dim_1) FROM t WHERE dim_0 > 2").await,
        (0, 1)
    );
    // The values: one GET per chunk.
    assert_eq!(
        gets_for(&ctx, &store, "SELECT string_2d FROM t").await,
        (9, 35)
    );
}

#[tokio::test]
async fn group_projection_reads_only_projected_arrays() {
    let (ctx, store) = counted("xarray_v3.zarr", ZarrTableOptions::default()).await;
    // time (3 chunks) and station (1 chunk) are coordinates: no data array is read.
    // Each chunk once, although 6 chunks of rows (in 4 partitions) use them.
    assert_eq!(
        gets_for(&ctx, &store, "SELECT time, station FROM t").await,
        (4, 50)
    );
    // flag(time) alone: its 3 chunks.
    assert_eq!(gets_for(&ctx, &store, "SELECT flag FROM t").await, (3, 50));
    // temperature: its 6 chunks.
    assert_eq!(
        gets_for(&ctx, &store, "SELECT temperature FROM t").await,
        (6, 50)
    );
}

#[tokio::test]
async fn limit_and_pruning_stop_fetching() {
    let (ctx, store) = counted("v3_strings.zarr/string_2d", ZarrTableOptions::default()).await;
    // The first chunk holds 6 rows.
    assert_eq!(
        gets_for(&ctx, &store, "SELECT * FROM t LIMIT 2").await,
        (1, 2)
    );
    // dim_0 >= 6: only the last row of chunks (3 chunks).
    assert_eq!(
        gets_for(&ctx, &store, "SELECT * FROM t WHERE dim_0 >= 6").await,
        (3, 5)
    );
    // Pruning on a coordinate (time) of a group table: 2 of 3 time chunks go.
    let (ctx, store) = counted("xarray_v3.zarr", ZarrTableOptions::default()).await;
    // time is read whole once for the statistics (3 GETs), then temperature's last row of
    // chunks (2 GETs); time's last chunk for the filter comes from the scan's cache.
    assert_eq!(
        gets_for(&ctx, &store, "SELECT temperature FROM t WHERE time >= 48").await,
        (5, 10)
    );
}

#[tokio::test]
async fn plan_schema_is_stream_schema() {
    let ctx = ctx();
    let options = ZarrTableOptions::default()
        .with_decode_cf(true)
        .with_fill_as_null(true);
    ctx.register_zarr("x", &fixture("xarray_v2.zarr"), options)
        .await
        .unwrap();
    ctx.register_zarr(
        "obs",
        &fixture("anndata_v3.zarr/obs"),
        ZarrTableOptions::default(),
    )
    .await
    .unwrap();
    ctx.register_zarr(
        "s",
        &fixture("v3_strings.zarr/string_sharded_2d"),
        ZarrTableOptions::default(),
    )
    .await
    .unwrap();
    for sql in [
        "SELECT * FROM x",
        "SELECT temperature, time FROM x WHERE time > TIMESTAMP '2024-01-02T00:00:00'",
        "SELECT * FROM obs",
        "SELECT cell_type, note FROM obs",
        "SELECT * FROM s LIMIT 3",
        "SELECT dim_1 FROM s",
    ] {
        let plan = ctx
            .sql(sql)
            .await
            .unwrap()
            .create_physical_plan()
            .await
            .unwrap();
        let mut stream = execute_stream(plan.clone(), ctx.task_ctx()).unwrap();
        assert_eq!(plan.schema(), stream.schema(), "{sql}");
        while let Some(batch) = stream.next().await {
            assert_eq!(batch.unwrap().schema(), plan.schema(), "{sql}");
        }
        // and every partition on its own
        let batches = collect(plan.clone(), ctx.task_ctx()).await.unwrap();
        assert!(batches.iter().all(|b| b.schema() == plan.schema()), "{sql}");
    }
}

fn column_strings(batches: &[RecordBatch], name: &str) -> Vec<Option<String>> {
    let options = FormatOptions::default();
    let mut out = Vec::new();
    for b in batches {
        let col = b
            .column_by_name(name)
            .unwrap_or_else(|| panic!("no column {name}"));
        let f = ArrayFormatter::try_new(col.as_ref(), &options).unwrap();
        for i in 0..col.len() {
            out.push((!col.is_null(i)).then(|| f.value(i).to_string()));
        }
    }
    out
}

fn json_strings(values: &[Value]) -> Vec<Option<String>> {
    values
        .iter()
        .map(|v| match v {
            Value::Null => None,
            Value::String(s) => Some(s.clone()),
            Value::Number(n) => Some(match n.as_f64() {
                Some(f) if n.is_f64() => {
                    let mut s = format!("{f:?}");
                    if s.ends_with(".0") {
                        s.truncate(s.len() - 2);
                        s.push_str(".0");
                    }
                    s
                }
                _ => n.to_string(),
            }),
            Value::Bool(b) => Some(b.to_string()),
            other => Some(other.to_string()),
        })
        .collect()
}

#[tokio::test]
async fn anndata_tables_match_anndata() {
    let expected: Value =
        serde_json::from_str(&std::fs::read_to_string(fixture("expected_anndata.json")).unwrap())
            .unwrap();
    let ctx = ctx();
    for store in [
        "anndata_v3.zarr",
        "anndata_v3_sharded.zarr",
        "anndata_v2.zarr",
    ] {
        for frame in ["obs", "var"] {
            let exp = &expected[store][frame];
            let df = ctx
                .read_zarr(
                    &fixture(&format!("{store}/{frame}")),
                    ZarrTableOptions::default(),
                )
                .await
                .unwrap();
            let names: Vec<String> = df
                .schema()
                .fields()
                .iter()
                .map(|f| f.name().clone())
                .collect();
            // the index, the row position, then anndata's column order
            let mut want_names = vec!["_index".to_string(), "dim_0".to_string()];
            want_names.extend(
                exp["column_order"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|v| v.as_str().unwrap().to_string()),
            );
            assert_eq!(names, want_names, "{store}/{frame} columns");
            let batches = df
                .sort_by(vec![datafusion::prelude::col("_index")])
                .unwrap()
                .collect()
                .await
                .unwrap();
            let positions = column_strings(&batches, "dim_0");
            let rows = positions.len();
            let want_positions: Vec<Option<String>> =
                (0..rows).map(|i| Some(i.to_string())).collect();
            assert_eq!(positions, want_positions, "{store}/{frame}.dim_0");
            for name in names.iter().filter(|n| *n != "dim_0") {
                let got = column_strings(&batches, name);
                let want = json_strings(exp["columns"][name].as_array().unwrap());
                assert_eq!(got, want, "{store}/{frame}.{name}");
            }
        }
    }
}

#[tokio::test]
async fn xarray_decoded_matches_xarray() {
    let expected: Value = serde_json::from_str(
        &std::fs::read_to_string(fixture("expected_xarray_decoded.json")).unwrap(),
    )
    .unwrap();
    let ctx = ctx();
    for store in ["xarray_v2.zarr", "xarray_v3.zarr"] {
        let exp = &expected[store];
        let df = ctx
            .read_zarr(
                &fixture(store),
                ZarrTableOptions::default().with_decode_cf(true),
            )
            .await
            .unwrap();
        let df = df
            .select_columns(&["time", "station", "temperature", "flag", "station_name"])
            .unwrap()
            .sort_by(vec![
                datafusion::prelude::col("time"),
                datafusion::prelude::col("station"),
            ])
            .unwrap();
        let batches = df.collect().await.unwrap();
        // time: hours since 2024-01-01 → Timestamp; xarray gives ns since the epoch.
        let times = column_strings(&batches, "time");
        let want_ns: Vec<i64> = exp["time"]["values"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_i64().unwrap())
            .collect();
        let stations = exp["station"]["values"].as_array().unwrap();
        for (row, t) in times.iter().enumerate() {
            let ns = want_ns[row / stations.len()];
            let secs = ns / 1_000_000_000;
            let days = secs.div_euclid(86_400);
            assert!(t.as_deref().unwrap().starts_with("2024-01-0"), "{t:?}");
            assert_eq!(
                secs % 86_400 / 3600,
                t.as_deref().unwrap()[11..13].parse::<i64>().unwrap(),
                "{store} row {row}"
            );
            assert_eq!(
                days - 19_723 + 1,
                t.as_deref().unwrap()[8..10].parse::<i64>().unwrap(),
                "{store} row {row}"
            );
        }
        // temperature: NaN (the decoded _FillValue) in xarray is NULL here; rows are
        // (time, station) in station order, which is xarray's C order once stations sort the
        // same way — compare by (time, station) position instead.
        let temps = column_strings(&batches, "temperature");
        let station_col = column_strings(&batches, "station");
        let want_t = exp["temperature"]["values"].as_array().unwrap();
        for (row, got) in temps.iter().enumerate() {
            let station = station_col[row].as_deref().unwrap();
            let s = stations
                .iter()
                .position(|v| v.as_str() == Some(station))
                .unwrap();
            let want = &want_t[(row / stations.len()) * stations.len() + s];
            match want {
                Value::String(nan) if nan == "NaN" => assert_eq!(got, &None, "{store} row {row}"),
                Value::Number(n) => {
                    let g: f32 = got.as_deref().unwrap().parse().unwrap();
                    assert_eq!(g as f64, n.as_f64().unwrap(), "{store} row {row}");
                }
                other => panic!("unexpected {other}"),
            }
        }
    }
}

/// A group of two 1-D arrays over different dimensions, hand-written into memory.
async fn tie_group() -> ZarrStore {
    let mem: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    let store = ZarrStore::new(mem, "g");
    let group = br#"{"zarr_format":3,"node_type":"group","attributes":{}}"#;
    store
        .put("zarr.json", bytes::Bytes::from_static(group))
        .await
        .unwrap();
    for (name, dim, n) in [("a", "x", 3), ("b", "y", 2), ("x", "x", 3)] {
        let meta = format!(
            r#"{{"zarr_format":3,"node_type":"array","shape":[{n}],"data_type":"int32",
            "chunk_grid":{{"name":"regular","configuration":{{"chunk_shape":[2]}}}},
            "chunk_key_encoding":{{"name":"default"}},"fill_value":7,
            "codecs":[{{"name":"bytes","configuration":{{"endian":"little"}}}}],
            "dimension_names":["{dim}"]}}"#
        );
        store
            .child(name)
            .put("zarr.json", bytes::Bytes::from(meta))
            .await
            .unwrap();
    }
    store
}

#[tokio::test]
async fn tied_dimension_sets_need_the_arrays_option() {
    let err = ZarrTable::try_new_with_store(tie_group().await, ZarrTableOptions::default())
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("a (x)") && err.contains("b (y)") && err.contains("`arrays` option"),
        "{err}"
    );
    let t = ZarrTable::try_new_with_store(
        tie_group().await,
        ZarrTableOptions::default().with_arrays(["b"]),
    )
    .await
    .unwrap();
    let names: Vec<String> = t
        .model()
        .schema()
        .fields()
        .iter()
        .map(|f| f.name().clone())
        .collect();
    assert_eq!(names, ["y", "b"]);
    let why = "not in the `arrays` option".to_string();
    assert_eq!(
        t.left_out(),
        [("a".to_string(), why.clone()), ("x".to_string(), why)]
    );
    // x is the coordinate of dimension x: it comes back although `arrays` names only a.
    let t = ZarrTable::try_new_with_store(
        tie_group().await,
        ZarrTableOptions::default().with_arrays(["a"]),
    )
    .await
    .unwrap();
    let names: Vec<String> = t
        .model()
        .schema()
        .fields()
        .iter()
        .map(|f| f.name().clone())
        .collect();
    assert_eq!(names, ["x", "a"]);
    let ctx = ctx();
    ctx.register_table("t", Arc::new(t)).unwrap();
    let batches = ctx
        .sql("SELECT * FROM t")
        .await
        .unwrap()
        .collect()
        .await
        .unwrap();
    assert_eq!(
        column_strings(&batches, "a"),
        vec![Some("7".to_string()); 3]
    );
}

#[tokio::test]
async fn left_out_arrays_have_reasons() {
    let t = ZarrTable::try_new(&fixture("anndata_v3.zarr"), ZarrTableOptions::default())
        .await
        .unwrap();
    let left: Vec<&str> = t.left_out().iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        left,
        ["layers", "obs", "obsm", "obsp", "raw", "uns", "var", "varm", "varp"]
    );
    let (_, why) = t.left_out().iter().find(|(n, _)| n == "raw").unwrap();
    assert!(why.contains("shape [] is not the table's [20, 5]"), "{why}");
    let (_, why) = t.left_out().iter().find(|(n, _)| n == "obs").unwrap();
    assert!(why.contains("encoding-type dataframe"), "{why}");
}

#[tokio::test]
async fn a_store_the_application_registered_is_used_as_is() {
    // The application keeps its data in a store of its own, registered under `s3://appdata`
    // (this crate is built without zarrow's cloud stores, so only the registered store can
    // answer): tables over that URL read through it.
    let store = Arc::new(InMemory::new());
    let src = std::path::PathBuf::from(fixture("v3_strings.zarr"));
    let mut dirs = vec![src.clone()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
                continue;
            }
            let rel = path
                .strip_prefix(&src)
                .unwrap()
                .to_string_lossy()
                .into_owned();
            let key = Path::from(format!("lab/strings.zarr/{rel}"));
            let bytes = std::fs::read(&path).unwrap();
            object_store::ObjectStoreExt::put(store.as_ref(), &key, PutPayload::from(bytes))
                .await
                .unwrap();
        }
    }
    let ctx = ctx();
    let url = url::Url::parse("s3://appdata").unwrap();
    ctx.register_object_store(&url, store);
    let sql = "SELECT count(*) AS n, count(DISTINCT string_2d) AS d \
               FROM 's3://appdata/lab/strings.zarr/string_2d'";
    let batches = ctx.sql(sql).await.unwrap().collect().await.unwrap();
    let local = format!(
        "SELECT count(*) AS n, count(DISTINCT string_2d) AS d FROM '{}'",
        fixture("v3_strings.zarr/string_2d")
    );
    let want = ctx.sql(&local).await.unwrap().collect().await.unwrap();
    assert_eq!(batches, want);
    ctx.register_zarr(
        "s",
        "s3://appdata/lab/strings.zarr/string_2d",
        ZarrTableOptions::default(),
    )
    .await
    .unwrap();
    let n = ctx
        .sql("SELECT * FROM s WHERE dim_0 >= 6")
        .await
        .unwrap()
        .collect()
        .await
        .unwrap();
    assert_eq!(n.iter().map(RecordBatch::num_rows).sum::<usize>(), 5);
    // Unregistered, the same URL fails to open (no cloud stores in this build).
    let other = SessionContext::new();
    assert!(ZarrTable::try_new_with_session(
        &other.state(),
        "s3://appdata/lab/strings.zarr",
        ZarrTableOptions::default()
    )
    .await
    .is_err());
}

/// A corrupt chunk fails the query with zarrow's typed error inside DataFusion's: it comes
/// back out naming the array and the chunk key.
#[tokio::test]
async fn a_corrupt_chunk_names_its_array_and_chunk_through_sql() {
    let store = Arc::new(InMemory::new());
    let meta = std::fs::read(fixture("v3_strings.zarr/string_zstd/zarr.json")).unwrap();
    for (key, bytes) in [
        ("s.zarr/zarr.json", meta),
        ("s.zarr/c/1", b"not zstd at all".to_vec()),
    ] {
        object_store::ObjectStoreExt::put(store.as_ref(), &Path::from(key), bytes.into())
            .await
            .unwrap();
    }
    let ctx = ctx();
    let table =
        ZarrTable::try_new_with_store(ZarrStore::new(store, "s.zarr"), ZarrTableOptions::default())
            .await
            .unwrap();
    ctx.register_table("t", Arc::new(table)).unwrap();
    let err = ctx
        .sql("SELECT * FROM t")
        .await
        .unwrap()
        .collect()
        .await
        .unwrap_err();
    let e = zarrow_datafusion::from_datafusion_error(err);
    assert!(
        matches!(e, zarrow::Error::Chunk { .. }),
        "not the chunk error: {e:?}"
    );
    assert_eq!(e.chunk_key(), Some("c/1"), "{e}");
    assert!(e.array().is_some_and(|a| a.contains("s.zarr")), "{e}");
}

/// The scan is a `DataSourceExec` over runs of chunks: exact row statistics, the limit cut
/// to the chunks it needs, and its counters in DataFusion's metrics, per partition, with the
/// chunks pruned and the time pruning took.
#[tokio::test]
async fn the_scan_is_a_file_scan_with_metrics_per_partition() {
    use datafusion::common::stats::Precision;
    use datafusion::physical_plan::metrics::MetricValue;
    use datafusion::physical_plan::statistics::{StatisticsArgs, StatisticsContext};
    use zarrow_datafusion::zarr_scans;

    // string_2d: (7, 5) in chunks of (3, 2): 9 chunks; dim_0 >= 6 keeps the last row of 3.
    let ctx = ctx();
    ctx.register_zarr(
        "t",
        &fixture("v3_strings.zarr/string_2d"),
        ZarrTableOptions::default(),
    )
    .await
    .unwrap();
    let df = ctx
        .sql("SELECT dim_1, string_2d FROM t WHERE dim_0 >= 6")
        .await
        .unwrap();
    let plan = df.create_physical_plan().await.unwrap();
    let scans = zarr_scans(plan.as_ref());
    assert_eq!(scans.len(), 1);
    let scan = scans[0];
    assert_eq!(scan.config.file_groups.len(), 3);
    assert_eq!((scan.chunks_planned(), scan.chunks_pruned()), (3, 6));
    let groups = scan.groups().unwrap();
    assert_eq!(groups.iter().flatten().map(|r| r.rows).sum::<u64>(), 5);
    let scan_plan = plan.children()[0].clone();
    assert!(scan_plan.name() == "DataSourceExec", "{}", scan_plan.name());
    let stats = StatisticsContext::new()
        .compute(scan_plan.as_ref(), &StatisticsArgs::new())
        .unwrap();
    assert_eq!(stats.num_rows, Precision::Exact(5));
    let rows: usize = collect(plan.clone(), ctx.task_ctx())
        .await
        .unwrap()
        .iter()
        .map(RecordBatch::num_rows)
        .sum();
    assert_eq!(rows, 5);
    let counts = zarr_scans(plan.as_ref())[0].counts();
    assert_eq!((counts.chunks_read, counts.rows_out), (3, 5));
    let metrics = scan_plan.metrics().unwrap();
    // Three partitions, one chunk each, each labelled with its partition.
    let mut per_partition: Vec<(Option<usize>, usize)> = metrics
        .iter()
        .filter(|m| m.value().name() == "chunks_read")
        .map(|m| (m.partition(), m.value().as_usize()))
        .collect();
    per_partition.sort();
    assert_eq!(per_partition, [(Some(0), 1), (Some(1), 1), (Some(2), 1)]);
    assert_eq!(
        metrics.sum_by_name("chunks_pruned").map(|v| v.as_usize()),
        Some(6)
    );
    let pruning = metrics.sum_by_name("pruning_time").unwrap();
    assert!(matches!(pruning, MetricValue::Time { .. }) && pruning.as_usize() > 0);

    // The metadata phase: the requests that opened the table, then the chunks'.
    let plan = ctx
        .sql(&format!(
            "SELECT max(string_2d) FROM '{}'",
            fixture("v3_strings.zarr/string_2d")
        ))
        .await
        .unwrap()
        .create_physical_plan()
        .await
        .unwrap();
    collect(plan.clone(), ctx.task_ctx()).await.unwrap();
    let counts = zarr_scans(plan.as_ref())[0].counts();
    assert!(counts.metadata_requests > 0, "{counts:?}");
    assert!(
        counts.metadata_bytes > 0 && counts.requests > 0,
        "{counts:?}"
    );

    // A limit: one partition holding only the chunks the limit needs (rows 0..3 lie in
    // chunk row 0, dim_1's 3 chunks), its statistics the limit's rows.
    let plan = ctx
        .sql("SELECT * FROM t LIMIT 3")
        .await
        .unwrap()
        .create_physical_plan()
        .await
        .unwrap();
    let scan = zarr_scans(plan.as_ref())[0];
    assert_eq!(scan.config.file_groups.len(), 1);
    assert_eq!(scan.config.limit, Some(3));
    let planned = scan.chunks_planned();
    assert!(planned < 9, "{planned}");
    collect(plan.clone(), ctx.task_ctx()).await.unwrap();
    assert!(zarr_scans(plan.as_ref())[0].counts().chunks_read <= planned);
}

/// `ZarrFormat` reads: its file source over files carrying runs of chunks is a zarr scan, and
/// a file without a run is a plan error, not a panic.
#[tokio::test]
async fn the_format_reads_runs_of_chunks() {
    use datafusion::datasource::file_format::FileFormat;
    use datafusion::datasource::listing::PartitionedFile;
    use datafusion::datasource::physical_plan::{FileGroup, FileScanConfigBuilder};
    use datafusion::datasource::table_schema::TableSchema;
    use datafusion::execution::object_store::ObjectStoreUrl;
    use zarrow::{TableModel, ZarrScan};
    use zarrow_datafusion::{ZarrFormat, ZarrRun};

    let location = fixture("v3_strings.zarr/string_2d");
    let model = TableModel::open(&location, Default::default())
        .await
        .unwrap();
    let ctx = ctx();
    let format = ZarrFormat::default();
    let source = format.file_source(TableSchema::from(model.schema()));
    let scan = ZarrScan::new(&model);
    let runs: Vec<FileGroup> = scan
        .split(2)
        .into_iter()
        .map(|scan| {
            let rows = scan.chunks.rows(model.grid()).unwrap();
            let file =
                PartitionedFile::new(location.clone(), 0).with_extension(ZarrRun { scan, rows });
            FileGroup::new(vec![file])
        })
        .collect();
    let config = FileScanConfigBuilder::new(ObjectStoreUrl::local_filesystem(), source.clone())
        .with_file_groups(runs)
        .build();
    let plan = format
        .create_physical_plan(&ctx.state(), config)
        .await
        .unwrap();
    let batches = collect(plan, ctx.task_ctx()).await.unwrap();
    assert_eq!(batches.iter().map(RecordBatch::num_rows).sum::<usize>(), 35);

    let bare = FileScanConfigBuilder::new(ObjectStoreUrl::local_filesystem(), source)
        .with_file(PartitionedFile::new(location, 0))
        .build();
    let plan = format
        .create_physical_plan(&ctx.state(), bare)
        .await
        .unwrap();
    let err = collect(plan, ctx.task_ctx()).await.unwrap_err();
    assert!(
        err.to_string().contains("carries no run of chunks"),
        "{err}"
    );
}

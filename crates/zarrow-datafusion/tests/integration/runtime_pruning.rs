//! Pruning at run time: the filters a query learns as it runs (a hash join's build side, a
//! top-k's threshold) skip the chunks of a zarr scan that cannot hold its rows, and never
//! change an answer. The store is AnnData-shaped, written here by zarrow's writer into memory:
//! `X` (cells × genes, chunked along both), `obs` (cell types) and `var` (gene symbols).

use std::sync::Arc;

use datafusion::arrow::array::{Float32Array, RecordBatch, StringArray};
use datafusion::arrow::util::pretty::pretty_format_batches;
use datafusion::physical_plan::{collect, ExecutionPlan};
use datafusion::prelude::{SessionConfig, SessionContext};
use zarrow::{write_array, write_group, ZarrStore, ZarrWriteOptions};
use zarrow_datafusion::{zarr_scans, zarr_session_context};

const CELLS: u64 = 48;
const GENES: u64 = 40;
/// The gene the queries look for, and the chunk of genes that holds it.
const NKG7: u64 = 13;

/// Writes the store at `memory:///runtime_pruning/<name>.zarr` with `X` in chunks of
/// `chunk` (cells, genes) and `obs`/`var` in chunks of `chunk.0`/`chunk.1`; its location.
async fn anndata(name: &str, chunk: (u64, u64)) -> String {
    let location = format!("memory:///runtime_pruning/{name}.zarr");
    let store = ZarrStore::open(&location).unwrap();
    write_group(&store, "", &Default::default()).await.unwrap();
    // No dimension names: the tables' index columns are dim_0, dim_1, as in the README.
    let options = |chunks: Vec<u64>| ZarrWriteOptions {
        chunk_shape: Some(chunks),
        ..Default::default()
    };
    let x = Float32Array::from_iter_values((0..CELLS * GENES).map(|i| (i % 97) as f32));
    let x_options = options(vec![chunk.0, chunk.1]);
    write_array(&store, "X", &x, &[CELLS, GENES], &x_options)
        .await
        .unwrap();
    for (group, len, chunk, values) in [
        (
            "obs/cell_type",
            CELLS,
            chunk.0,
            (0..CELLS)
                .map(|c| ["B", "T", "NK"][(c % 3) as usize].to_string())
                .collect::<Vec<_>>(),
        ),
        (
            "var/gene_symbol",
            GENES,
            chunk.1,
            (0..GENES)
                .map(|g| match g {
                    NKG7 => "NKG7".to_string(),
                    g => format!("G{g}"),
                })
                .collect(),
        ),
    ] {
        let (parent, _) = group.split_once('/').unwrap();
        write_group(&store, parent, &Default::default())
            .await
            .unwrap();
        let values = StringArray::from(values);
        write_array(&store, group, &values, &[len], &options(vec![chunk]))
            .await
            .unwrap();
    }
    location
}

/// A session of `partitions` where `x`, `obs` and `var` are the store's tables (pruning at
/// run time on or off), or, for `Tables::Memory`, copies of them in memory (the answers the
/// zarr tables must give).
async fn session(loc: &str, partitions: usize, tables: Tables) -> SessionContext {
    let config = SessionConfig::new().with_target_partitions(partitions);
    let ctx = zarr_session_context(config);
    let on = matches!(
        tables,
        Tables::Zarr {
            runtime_pruning: true
        }
    );
    ctx.sql(&format!("SET zarrow.runtime_pruning = {on}"))
        .await
        .unwrap();
    for (name, node) in [("x", "X"), ("obs", "obs"), ("var", "var")] {
        let sql = match tables {
            Tables::Zarr { .. } => {
                format!("CREATE EXTERNAL TABLE {name} STORED AS ZARR LOCATION '{loc}/{node}'")
            }
            Tables::Memory => format!("CREATE TABLE {name} AS SELECT * FROM '{loc}/{node}'"),
        };
        ctx.sql(&sql).await.unwrap().collect().await.unwrap();
    }
    ctx
}

#[derive(Debug, Clone, Copy)]
enum Tables {
    Zarr { runtime_pruning: bool },
    Memory,
}

const ON: Tables = Tables::Zarr {
    runtime_pruning: true,
};
const OFF: Tables = Tables::Zarr {
    runtime_pruning: false,
};

/// The query's rows (pretty-printed, sorted by the query) and its plan after running.
async fn run(ctx: &SessionContext, sql: &str) -> (String, Arc<dyn ExecutionPlan>) {
    let plan = ctx
        .sql(sql)
        .await
        .unwrap()
        .create_physical_plan()
        .await
        .unwrap();
    let batches: Vec<RecordBatch> = collect(plan.clone(), ctx.task_ctx()).await.unwrap();
    let text = pretty_format_batches(&batches).unwrap().to_string();
    (text, plan)
}

/// (chunks read, chunks pruned at run time) of the scan of `X` in `plan`.
fn x_chunks(plan: &Arc<dyn ExecutionPlan>) -> (u64, u64) {
    let scans = zarr_scans(plan.as_ref());
    let x = scans
        .iter()
        .find(|s| s.location().ends_with("/X"))
        .expect("a scan of X");
    let c = x.counts();
    (c.chunks_read, c.chunks_pruned_at_run_time)
}

/// The README's query: mean NKG7 expression per cell type.
const NKG7_QUERY: &str = "SELECT o.cell_type, avg(x.\"X\") AS mean_nkg7, count(*) AS n
    FROM x JOIN obs o ON x.dim_0 = o.dim_0 JOIN var v ON x.dim_1 = v.dim_0
    WHERE v.gene_symbol = 'NKG7' GROUP BY o.cell_type ORDER BY o.cell_type";

const SEMI_JOIN: &str = "SELECT count(*) AS n, sum(\"X\") AS total FROM x
    WHERE dim_1 IN (SELECT dim_0 FROM var WHERE gene_symbol = 'NKG7')";

const TOP_K: &str = "SELECT dim_0, dim_1, \"X\" FROM x ORDER BY dim_0 DESC, dim_1 LIMIT 3";

#[tokio::test]
async fn a_join_on_the_gene_reads_only_the_chunks_holding_it() {
    // 6 × 5 chunks of (8, 8): the gene is in one column of chunks, 6 of 30.
    let loc = anndata("nkg7", (8, 8)).await;
    let ctx = session(&loc, 2, ON).await;
    let (rows, plan) = run(&ctx, NKG7_QUERY).await;
    assert_eq!(x_chunks(&plan), (6, 24), "{rows}");
    let (off, plan) = run(&session(&loc, 2, OFF).await, NKG7_QUERY).await;
    assert_eq!(x_chunks(&plan), (30, 0));
    assert_eq!(rows, off);
    // EXPLAIN ANALYZE shows the filter pushed and the chunks pruned at run time.
    let (text, _) = run(&ctx, &format!("EXPLAIN ANALYZE {NKG7_QUERY}")).await;
    assert!(text.contains("chunks_pruned_at_run_time=24"), "{text}");
    assert!(text.contains("predicate=DynamicFilter"), "{text}");
}

#[tokio::test]
async fn a_semi_join_prunes() {
    let loc = anndata("semi", (8, 8)).await;
    let (rows, plan) = run(&session(&loc, 3, ON).await, SEMI_JOIN).await;
    assert_eq!(x_chunks(&plan), (6, 24), "{rows}");
    let (off, _) = run(&session(&loc, 3, OFF).await, SEMI_JOIN).await;
    assert_eq!(rows, off);
}

#[tokio::test]
async fn a_top_k_on_the_index_reads_at_most_one_chunk_per_partition() {
    // A column of 6 chunks of (8, 40): each partition reads its last chunk first, and the
    // threshold it sets rules out the rest.
    let loc = anndata("topk", (8, 40)).await;
    for partitions in [1, 2, 3] {
        let (rows, plan) = run(&session(&loc, partitions, ON).await, TOP_K).await;
        let (read, pruned) = x_chunks(&plan);
        assert!(
            read <= partitions as u64,
            "{partitions}: {read} read\n{rows}"
        );
        assert_eq!(read + pruned, 6);
        let (off, _) = run(&session(&loc, partitions, OFF).await, TOP_K).await;
        assert_eq!(rows, off);
    }
}

/// Joins, semi-joins and top-ks over a few chunkings and partition counts: the same answers
/// with pruning at run time as from the same tables copied into memory (the tests above
/// compare with pruning off).
#[tokio::test]
async fn run_time_pruning_never_changes_an_answer() {
    let queries = [
        NKG7_QUERY,
        SEMI_JOIN,
        TOP_K,
        "SELECT x.dim_0, x.dim_1, x.\"X\" FROM x JOIN var v ON x.dim_1 = v.dim_0
         WHERE v.gene_symbol IN ('G2', 'NKG7', 'G39') ORDER BY 1, 2",
        "SELECT dim_0, dim_1, \"X\" FROM x WHERE \"X\" > 50
         ORDER BY dim_0 DESC, dim_1 DESC LIMIT 5",
        "SELECT * FROM obs ORDER BY dim_0 LIMIT 4",
        "SELECT count(*), min(dim_0), max(dim_1) FROM x
         WHERE dim_0 IN (SELECT dim_0 FROM obs WHERE cell_type = 'NK')",
        "SELECT min(dim_0), max(dim_0), count(*) FROM x",
    ];
    // Chunkings of X (cells, genes) with partition counts: both axes, uneven edges, one cell
    // a chunk.
    let layouts = [((8, 8), 4), ((5, 7), 1), ((1, 40), 3)];
    for (i, (chunk, partitions)) in layouts.into_iter().enumerate() {
        let loc = anndata(&format!("property_{i}"), chunk).await;
        let on = session(&loc, partitions, ON).await;
        let memory = session(&loc, partitions, Tables::Memory).await;
        for sql in queries {
            let (want, _) = run(&memory, sql).await;
            assert_eq!(run(&on, sql).await.0, want, "{chunk:?} {partitions}: {sql}");
        }
    }
}

/// A monotonic coordinate read for pruning orders the scan (no sort for `ORDER BY time`):
/// the same answers as the table copied into memory, with pruning at run time on and off and
/// over several partition counts, and its min/max as the scan's statistics.
#[tokio::test]
async fn run_time_pruning_and_coordinate_ordering_never_change_an_answer() {
    let xarray = zarrow_testkit::fixture("xarray_v3.zarr");
    let queries = [
        "SELECT time, temperature FROM t WHERE time >= 6 AND station = 'ALPHA' ORDER BY time",
        "SELECT time, temperature FROM t WHERE time >= 30 AND station = 'ALPHA'
         ORDER BY time DESC LIMIT 3",
        "SELECT time, station FROM t WHERE time < 40 ORDER BY time, station",
        "SELECT min(time), max(time), count(*) FROM t WHERE time BETWEEN 12 AND 40",
    ];
    for partitions in [1, 2, 3] {
        let config = || SessionConfig::new().with_target_partitions(partitions);
        let memory = zarr_session_context(config());
        memory
            .sql(&format!("CREATE TABLE t AS SELECT * FROM '{xarray}'"))
            .await
            .unwrap()
            .collect()
            .await
            .unwrap();
        for on in [true, false] {
            let ctx = zarr_session_context(config());
            ctx.sql(&format!("SET zarrow.runtime_pruning = {on}"))
                .await
                .unwrap();
            ctx.sql(&format!(
                "CREATE EXTERNAL TABLE t STORED AS ZARR LOCATION '{xarray}'"
            ))
            .await
            .unwrap();
            for sql in queries {
                let (want, _) = run(&memory, sql).await;
                let (got, plan) = run(&ctx, sql).await;
                assert_eq!(got, want, "{partitions} {on}: {sql}");
                let text = datafusion::physical_plan::displayable(plan.as_ref())
                    .indent(true)
                    .to_string();
                if sql.ends_with("ORDER BY time") {
                    assert!(!text.contains("SortExec"), "{text}");
                    assert!(text.contains("output_ordering=[time@0 ASC"), "{text}");
                }
            }
        }
        // The scan's statistics: time's min/max over the chunks kept (times 24 to 54).
        let ctx = zarr_session_context(config());
        let df = ctx
            .sql(&format!(
                "SELECT time FROM '{xarray}' WHERE time >= 30 AND station = 'ALPHA'"
            ))
            .await
            .unwrap();
        let plan = df.create_physical_plan().await.unwrap();
        let text = datafusion::physical_plan::displayable(plan.as_ref())
            .set_show_statistics(true)
            .indent(true)
            .to_string();
        assert!(
            text.contains("Min=Exact(Int64(24)) Max=Exact(Int64(54))"),
            "{text}"
        );
    }
}

//! `ZarrPredicate`: a SQL predicate outside a query prunes the chunks a SQL query's `WHERE`
//! prunes, and its batch filter keeps the rows the query returns.

use std::sync::Arc;

use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::compute::concat_batches;
use datafusion::prelude::{SessionConfig, SessionContext};
use futures::TryStreamExt;
use zarrow::{ReadContext, ZarrScan};
use zarrow_datafusion::{
    missing_column, zarr_session_context, ZarrPredicate, ZarrTable, ZarrTableOptions,
};

fn fixture(name: &str) -> String {
    let data = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/data");
    format!("{}/{name}", std::fs::canonicalize(data).unwrap().display())
}

/// The rows of `SELECT * FROM t WHERE sql` (one partition: chunk order).
async fn sql_rows(location: &str, sql: &str) -> RecordBatch {
    let ctx: SessionContext = zarr_session_context(SessionConfig::new().with_target_partitions(1));
    let table = ZarrTable::try_new(location, ZarrTableOptions::default())
        .await
        .unwrap();
    ctx.register_table("t", Arc::new(table)).unwrap();
    let batches = ctx
        .sql(&format!("SELECT * FROM t WHERE {sql}"))
        .await
        .unwrap()
        .collect()
        .await
        .unwrap();
    concat_batches(&batches[0].schema(), &batches).unwrap()
}

#[tokio::test]
async fn prunes_as_sql_does_and_filters_exactly() {
    let location = fixture("xarray_v3.zarr"); // time: 10 (chunks of 4) x station: 5 (chunks of 3)
    let table = ZarrTable::try_new(&location, ZarrTableOptions::default())
        .await
        .unwrap();
    let model = table.model().clone();
    for (sql, kept) in [
        ("time < 12", 2),
        ("time BETWEEN 20 AND 30", 2),
        ("time IN (0, 54)", 4),
        ("station = 'ALPHA' AND time >= 48", 1),
        ("temperature > 10", 6),
    ] {
        let predicate = ZarrPredicate::parse(&model, sql).unwrap();
        let pruned = predicate
            .prune(&model, &ReadContext::new(Default::default()))
            .await
            .unwrap();
        assert_eq!(
            (pruned.info.total_chunks, pruned.info.kept_chunks),
            (6, kept),
            "{sql}"
        );
        let mut scan = ZarrScan::new(&model);
        scan.chunks = pruned.chunks;
        let batches: Vec<RecordBatch> = scan
            .stream(model.clone(), Default::default())
            .unwrap()
            .try_collect()
            .await
            .unwrap();
        let filter = predicate.batch_filter(&model.schema()).unwrap();
        let kept_rows: Vec<RecordBatch> =
            batches.iter().map(|b| filter.filter(b).unwrap()).collect();
        let ours = concat_batches(&model.schema(), &kept_rows).unwrap();
        assert_eq!(ours, sql_rows(&location, sql).await, "{sql}");
    }
}

#[tokio::test]
async fn refuses_unknown_columns_and_non_boolean_predicates() {
    let table = ZarrTable::try_new(&fixture("xarray_v3.zarr"), ZarrTableOptions::default())
        .await
        .unwrap();
    let err = ZarrPredicate::parse(table.model(), "tme < 3").unwrap_err();
    let (missing, valid) = missing_column(&err).expect("a missing column");
    assert_eq!(missing, "tme");
    assert!(valid.contains(&"time".to_string()));
    let err = ZarrPredicate::parse(table.model(), "time + 1").unwrap_err();
    assert!(err.to_string().contains("not a boolean"), "{err}");
    let predicate = ZarrPredicate::parse(table.model(), "flag > 0 AND station <> 'x'").unwrap();
    assert_eq!(predicate.columns(), ["station", "flag"]);
}

//! DataFusion bugs a zarrow session guards against (`src/guards.rs`, docs/reliability.md):
//! each test shows the guarded answer in a zarrow session, and the bug in a plain DataFusion
//! session, so that the guard is dropped when an upgrade fixes it.

use datafusion::prelude::{SessionConfig, SessionContext};
use zarrow_datafusion::zarr_session_context;

/// A sort-merge semi join (`prefer_hash_join = false`, 2 partitions, batches of 2) whose float
/// keys hold NaN.
const NAN_SEMI_JOIN: &str = "SELECT x FROM (VALUES (1.0), (CAST('NaN' AS DOUBLE)), (2.0), \
    (CAST('NaN' AS DOUBLE))) a(x) WHERE EXISTS (SELECT 1 FROM (VALUES \
    (CAST('NaN' AS DOUBLE)), (1.0), (CAST('NaN' AS DOUBLE))) b(y) WHERE a.x = b.y) ORDER BY x";

fn config() -> SessionConfig {
    let mut config = SessionConfig::new()
        .with_target_partitions(2)
        .with_batch_size(2);
    config.options_mut().optimizer.prefer_hash_join = false;
    config
}

async fn rows(ctx: &SessionContext, sql: &str) -> datafusion::error::Result<String> {
    let batches = ctx.sql(sql).await?.collect().await?;
    Ok(datafusion::arrow::util::pretty::pretty_format_batches(&batches)?.to_string())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sort_merge_join_on_float_keys_with_nan_is_planned_as_a_hash_join() {
    let ctx = zarr_session_context(config());
    let got = rows(&ctx, NAN_SEMI_JOIN).await.unwrap();
    // Arrow's comparison: a NaN equals a NaN (as in PostgreSQL).
    let want = "+-----+\n| x   |\n+-----+\n| 1.0 |\n| NaN |\n| NaN |\n+-----+";
    assert_eq!(got, want);
    let plan = rows(&ctx, &format!("EXPLAIN {NAN_SEMI_JOIN}"))
        .await
        .unwrap();
    assert!(!plan.contains("SortMergeJoin"), "{plan}");
    // Integer keys keep the sort-merge join the session asked for.
    let ints = "EXPLAIN SELECT x FROM (VALUES (1), (2)) a(x) \
                WHERE EXISTS (SELECT 1 FROM (VALUES (1)) b(y) WHERE a.x = b.y)";
    assert!(rows(&ctx, ints).await.unwrap().contains("SortMergeJoin"));
    // Plain DataFusion 55: the query panics inside the join (an error from its task).
    let plain = SessionContext::new_with_config(config());
    let upstream = tokio::spawn(async move { rows(&plain, NAN_SEMI_JOIN).await }).await;
    assert!(
        !matches!(upstream, Ok(Ok(_))),
        "DataFusion answers this itself now: drop FloatKeyJoins (src/guards.rs)"
    );
}

/// `f(c) = literal` with `f` order-preserving but not one-to-one (`x / 10`): DataFusion takes
/// `x` for a constant and drops the sort on it.
const SORT_UNDER_FUNCTION_FILTER: &str =
    "SELECT x FROM (VALUES (3), (1), (2), (13)) v(x) WHERE x / 10 = 0 ORDER BY x";

/// The same under a sort-merge join: the join's sorts go too, and matches are lost.
const JOIN_UNDER_FUNCTION_FILTER: &str =
    "SELECT count(*) AS n FROM (VALUES (3), (1), (2)) a(x) JOIN (VALUES (2), (1), (3)) b(y) \
     ON a.x = b.y WHERE a.x / 10 = 0 AND b.y / 10 = 0";

#[tokio::test]
async fn a_filter_on_a_function_of_a_column_keeps_the_sort_on_the_column() {
    let ctx = zarr_session_context(SessionConfig::new());
    let want = "+---+\n| x |\n+---+\n| 1 |\n| 2 |\n| 3 |\n+---+";
    assert_eq!(rows(&ctx, SORT_UNDER_FUNCTION_FILTER).await.unwrap(), want);
    let joined = zarr_session_context(config().with_batch_size(8192));
    let want = "+---+\n| n |\n+---+\n| 3 |\n+---+";
    assert_eq!(
        rows(&joined, JOIN_UNDER_FUNCTION_FILTER).await.unwrap(),
        want
    );
    // Plain DataFusion 55: the rows come unsorted.
    let plain = SessionContext::new();
    assert_ne!(
        rows(&plain, SORT_UNDER_FUNCTION_FILTER).await.unwrap(),
        "+---+\n| x |\n+---+\n| 1 |\n| 2 |\n| 3 |\n+---+",
        "DataFusion answers this itself now: drop ConstantFunctionFilters (src/guards.rs)"
    );
}

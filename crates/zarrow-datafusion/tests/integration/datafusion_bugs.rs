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

//! What the write tests (`copy_to.rs`, `insert_into.rs`) share: the rows they write, a zarr
//! session, and running SQL to batches, a table's text or a count.

use datafusion::arrow::array::{AsArray, RecordBatch};
use datafusion::arrow::datatypes::UInt64Type;
use datafusion::arrow::util::pretty::pretty_format_batches;
use datafusion::prelude::{SessionConfig, SessionContext};
use zarrow_datafusion::zarr_session_context;

/// Five rows of every kind the writer maps, with NULLs, an empty string and non-ASCII text.
pub const SOURCE: &str = "SELECT * FROM (VALUES \
    (1, 'one', 1.5, true, CAST(NULL AS BIGINT)), \
    (2, 'two', NULL, false, 20), \
    (3, 'три 🦀', 3.5, true, 30), \
    (4, '', 4.5, false, 40), \
    (5, 'five', 5.5, true, 50)) AS t(id, name, score, flag, n)";

pub fn ctx() -> SessionContext {
    zarr_session_context(SessionConfig::new())
}

pub async fn run(ctx: &SessionContext, sql: &str) -> datafusion::error::Result<Vec<RecordBatch>> {
    ctx.sql(sql).await?.collect().await
}

pub async fn text(ctx: &SessionContext, sql: &str) -> String {
    pretty_format_batches(&run(ctx, sql).await.unwrap())
        .unwrap()
        .to_string()
}

/// The `UInt64` in the first row of the first column (a COPY's or an INSERT's row count).
pub fn count(batches: &[RecordBatch]) -> u64 {
    batches[0].column(0).as_primitive::<UInt64Type>().value(0)
}

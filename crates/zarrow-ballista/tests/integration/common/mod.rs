//! What the standalone and the loopback cluster tests share: fixture paths and results as
//! comparable text.

use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::util::pretty::pretty_format_batches;
use datafusion::prelude::SessionContext;

pub use zarrow_testkit::fixture as data;

/// The rows of a result as text lines, header first, then sorted (partitions may come back in
/// any order).
pub fn lines(batches: &[RecordBatch]) -> Vec<String> {
    let text = pretty_format_batches(batches).unwrap().to_string();
    let mut lines: Vec<String> = text
        .lines()
        .filter(|l| l.starts_with('|'))
        .map(str::to_string)
        .collect();
    if lines.len() > 1 {
        lines[1..].sort();
    }
    lines
}

/// `sql`'s result as [`lines`].
pub async fn try_run(ctx: &SessionContext, sql: &str) -> datafusion::error::Result<Vec<String>> {
    Ok(lines(&ctx.sql(sql).await?.collect().await?))
}

/// `sql`'s result as [`lines`]; a failure names the query.
#[allow(dead_code)] // not every test module uses every helper
pub async fn run(ctx: &SessionContext, sql: &str) -> Vec<String> {
    try_run(ctx, sql)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"))
}

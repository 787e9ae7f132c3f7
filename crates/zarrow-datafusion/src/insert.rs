//! `INSERT INTO t SELECT …` without a column list into a zarr table: the table's index
//! columns (the row position, `dim_0`) are not stored, so a query that gives one value per
//! stored column is planned as if it named them ([`plan_statement`]).
//!
//! DataFusion's SQL planner compares the query's columns with all of the table's, index
//! columns included, before the table sees the statement ("Column count doesn't match insert
//! query!"); this runs before it, on the parsed statement.

use datafusion::common::plan_err;
use datafusion::error::Result;
use datafusion::execution::context::SessionState;
use datafusion::logical_expr::LogicalPlan;
use datafusion::sql::parser::Statement;
use datafusion::sql::planner::object_name_to_table_reference;
use datafusion::sql::sqlparser::ast::{
    Ident, ObjectName, ObjectNamePart, Query, Statement as SqlStatement, TableObject,
};
use zarrow::table::ColumnRole;

use crate::table::ZarrTable;

/// DataFusion's error when an `INSERT` gives another number of columns than the table has
/// (the start of zarrow's, which says more).
const COLUMN_COUNT: &str = "Column count doesn't match insert query";

/// Plan `statement` as [`SessionState::statement_to_plan`] does, except that an `INSERT
/// INTO t <query>` without a column list into a zarr table ([`ZarrTable`]) whose query gives
/// a value for each stored column, and none for the index columns (the row position,
/// `dim_0`, which the table makes itself), is planned as `INSERT INTO t (<stored columns>)
/// <query>`. When the query's columns match neither, the error names the table's columns and
/// says to name them. Front ends that parse statements themselves (the `zarrow sql` CLI)
/// call this; `SessionContext::sql` plans with DataFusion's rule alone (every column).
///
/// ```
/// use datafusion::sql::parser::DFParser;
/// use zarrow_datafusion::{plan_statement, zarr_session_context};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> datafusion::error::Result<()> {
/// let dir = tempfile::tempdir()?;
/// let loc = dir.path().join("t.zarr");
/// let ctx = zarr_session_context(Default::default());
/// let copy = format!("COPY (SELECT 1 AS a, 'x' AS s) TO '{}' STORED AS ZARR", loc.display());
/// ctx.sql(&copy).await?.collect().await?;
/// let create = format!("CREATE EXTERNAL TABLE t STORED AS ZARR LOCATION '{}'", loc.display());
/// ctx.sql(&create).await?.collect().await?;
/// // `t` has columns dim_0, a, s; the INSERT gives a and s.
/// let sql = "INSERT INTO t SELECT 2, 'y'";
/// let statement = DFParser::parse_sql(sql)?.pop_front().unwrap();
/// let plan = plan_statement(&ctx.state(), statement).await?;
/// ctx.execute_logical_plan(plan).await?.collect().await?;
/// assert_eq!(ctx.sql("SELECT * FROM t").await?.count().await?, 2);
/// # Ok(())
/// # }
/// ```
pub async fn plan_statement(state: &SessionState, statement: Statement) -> Result<LogicalPlan> {
    if let Some((table, query)) = unnamed_insert(&statement) {
        if let Some(columns) = zarr_columns(state, &table).await? {
            if let Some(named) = fill_in_columns(state, &table, &columns, query).await? {
                let named = with_columns(statement, &named);
                return state.statement_to_plan(named).await;
            }
        }
    }
    state.statement_to_plan(statement).await
}

/// The stored columns to name when `query` (inserted into the zarr table `table` of
/// `columns`) gives one value for each of them; `None` when it gives one for every column (or
/// cannot be planned alone: DataFusion's planner says why); an error naming the columns when
/// it gives neither.
async fn fill_in_columns(
    state: &SessionState,
    table: &ObjectName,
    columns: &[(String, bool)],
    query: Query,
) -> Result<Option<Vec<String>>> {
    let alone = Statement::Statement(Box::new(SqlStatement::Query(Box::new(query))));
    let Ok(plan) = state.statement_to_plan(alone).await else {
        return Ok(None);
    };
    let width = plan.schema().fields().len();
    let stored: Vec<String> = (columns.iter().filter(|(_, index)| !index))
        .map(|(name, _)| name.clone())
        .collect();
    if width == columns.len() {
        return Ok(None);
    }
    if width == stored.len() {
        return Ok(Some(stored));
    }
    let all: Vec<&str> = columns.iter().map(|(name, _)| name.as_str()).collect();
    let index: Vec<&str> = (columns.iter().filter(|(_, index)| *index))
        .map(|(name, _)| name.as_str())
        .collect();
    plan_err!(
        "{COLUMN_COUNT}: the query gives {width} columns, and the zarr table {table} has {} \
         ({}), of which {} (the row position) is made by the table and may be left out: give \
         a value for each of {}, or name the columns: INSERT INTO {table} ({}) SELECT …",
        all.len(),
        all.join(", "),
        index.join(", "),
        stored.join(", "),
        stored.join(", ")
    )
}

/// The target and query of an `INSERT INTO <table> <query>` that names no columns.
fn unnamed_insert(statement: &Statement) -> Option<(ObjectName, Query)> {
    let Statement::Statement(inner) = statement else {
        return None;
    };
    let SqlStatement::Insert(insert) = inner.as_ref() else {
        return None;
    };
    match (&insert.table, insert.columns.is_empty(), &insert.source) {
        (TableObject::TableName(name), true, Some(query)) => {
            Some((name.clone(), query.as_ref().clone()))
        }
        _ => None,
    }
}

/// The columns of the zarr table `name` (each with whether it is an index column, not
/// stored); `None` when `name` is not a zarr table.
async fn zarr_columns(
    state: &SessionState,
    name: &ObjectName,
) -> Result<Option<Vec<(String, bool)>>> {
    let normalize = state
        .config()
        .options()
        .sql_parser
        .enable_ident_normalization;
    let reference = object_name_to_table_reference(name.clone(), normalize)?;
    let table = reference.table().to_string();
    let provider = match state.schema_for_ref(reference) {
        Ok(schema) => schema.table(&table).await?,
        Err(_) => None,
    };
    let Some(zarr) = provider
        .as_ref()
        .and_then(|p| p.downcast_ref::<ZarrTable>())
    else {
        return Ok(None);
    };
    let model = zarr.current_model();
    let columns = model
        .columns()
        .iter()
        .map(|c| (c.name.clone(), matches!(c.role, ColumnRole::Index(_))))
        .collect::<Vec<_>>();
    if !columns.iter().any(|(_, index)| *index) {
        return Ok(None);
    }
    Ok(Some(columns))
}

/// `statement` (an `INSERT`) naming `columns`, quoted (names as the table has them).
fn with_columns(statement: Statement, columns: &[String]) -> Statement {
    let Statement::Statement(mut inner) = statement else {
        return statement;
    };
    if let SqlStatement::Insert(insert) = inner.as_mut() {
        insert.columns = columns
            .iter()
            .map(|c| ObjectName(vec![ObjectNamePart::Identifier(Ident::with_quote('"', c))]))
            .collect();
    }
    Statement::Statement(inner)
}

//! Zarr as a DataFusion file format. Reading: its file source is [`ZarrSource`], and a zarr
//! scan is a `DataSourceExec` over runs of chunks (see [`crate::source`]); which runs to read
//! is the table's choice ([`crate::ZarrTable`] prunes and splits), so a zarr location is
//! opened as a table (`CREATE EXTERNAL TABLE … STORED AS ZARR` goes through
//! [`crate::ZarrTableFactory`]), never listed as files. Writing: `COPY (SELECT …) TO
//! 'out.zarr' STORED AS ZARR OPTIONS (…)` writes a zarr table through [`ZarrSink`] (see
//! [`crate::sink`]).

use std::any::Any;
use std::collections::HashMap;
use std::sync::Arc;

use async_trait::async_trait;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::catalog::Session;
use datafusion::common::{not_impl_err, plan_err, GetExt, Statistics};
use datafusion::datasource::file_format::file_compression_type::FileCompressionType;
use datafusion::datasource::file_format::{FileFormat, FileFormatFactory};
use datafusion::datasource::physical_plan::{FileScanConfig, FileSinkConfig, FileSource};
use datafusion::datasource::source::DataSourceExec;
use datafusion::datasource::table_schema::TableSchema;
use datafusion::error::{DataFusionError, Result};
use datafusion::physical_expr::LexRequirement;
use datafusion::physical_plan::ExecutionPlan;
use object_store::{ObjectMeta, ObjectStore};
use zarrow::TableWriteOptions;

use crate::sink::ZarrSink;
use crate::source::ZarrSource;

/// The extension and `STORED AS` name.
const EXTENSION: &str = "zarr";

/// Creates [`ZarrFormat`]s from `COPY … OPTIONS (…)`; registered by the zarrow session
/// helpers (`SessionStateBuilder::with_file_formats` / `SessionState::register_file_format`
/// for a session of your own).
#[derive(Debug, Default)]
pub struct ZarrFormatFactory;

impl GetExt for ZarrFormatFactory {
    fn get_ext(&self) -> String {
        EXTENSION.into()
    }
}

impl FileFormatFactory for ZarrFormatFactory {
    fn create(
        &self,
        _state: &dyn Session,
        format_options: &HashMap<String, String>,
    ) -> Result<Arc<dyn FileFormat>> {
        let mut options = TableWriteOptions::default();
        let mut keys: Vec<_> = format_options.iter().collect();
        keys.sort();
        let mut seen = std::collections::HashSet::new();
        for (key, value) in keys {
            // DataFusion's own sink options (`execution.keep_partition_by_columns`).
            if key.starts_with("execution.") {
                continue;
            }
            // `chunk_rows` and `format.chunk_rows` are one option given twice.
            if !seen.insert(zarrow::write::options::option_key(key)) {
                return Err(DataFusionError::Plan(
                    zarrow::write::options::duplicate_key(key).to_string(),
                ));
            }
            options
                .set(key, value)
                .map_err(|e| DataFusionError::Plan(e.to_string()))?;
        }
        options
            .validate()
            .map_err(|e| DataFusionError::Plan(e.to_string()))?;
        Ok(Arc::new(ZarrFormat { options }))
    }

    fn default(&self) -> Arc<dyn FileFormat> {
        Arc::new(ZarrFormat::default())
    }
}

/// Refuse a `COPY … STORED AS ZARR` statement that gives an option twice. DataFusion's
/// planner keeps the last of two equal keys (and folds `chunk_rows` into `format.chunk_rows`),
/// so [`ZarrFormatFactory`] cannot see the duplicate: front ends that parse statements
/// themselves (the `zarrow sql` CLI) call this before planning. Other statements pass.
///
/// ```
/// use datafusion::sql::parser::DFParser;
/// use zarrow_datafusion::check_statement;
///
/// let sql = "COPY (SELECT 1 AS x) TO 'x.zarr' STORED AS ZARR \
///            OPTIONS (chunk_rows 10, 'format.chunk_rows' 20)";
/// let statement = DFParser::parse_sql(sql).unwrap().pop_front().unwrap();
/// assert!(check_statement(&statement).unwrap_err().to_string().contains("twice"));
/// ```
pub fn check_statement(statement: &datafusion::sql::parser::Statement) -> Result<()> {
    let datafusion::sql::parser::Statement::CopyTo(copy) = statement else {
        return Ok(());
    };
    if !copy
        .stored_as
        .as_deref()
        .is_some_and(|s| s.eq_ignore_ascii_case(EXTENSION))
    {
        return Ok(());
    }
    let mut seen = std::collections::HashSet::new();
    for (key, _) in &copy.options {
        if !seen.insert(zarrow::write::options::option_key(key)) {
            return plan_err!("{}", zarrow::write::options::duplicate_key(key));
        }
    }
    Ok(())
}

/// The zarr file format: `CREATE EXTERNAL TABLE … STORED AS ZARR` reads a node, and
/// `COPY … TO '…' STORED AS ZARR` writes a table (its `OPTIONS` are
/// [`zarrow::write::WRITE_OPTION_KEYS`]). [`crate::zarr_session_context`] registers it.
///
/// ```
/// use zarrow_datafusion::zarr_session_context;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> datafusion::error::Result<()> {
/// let ctx = zarr_session_context(Default::default());
/// let obs = concat!(env!("CARGO_MANIFEST_DIR"), "/../../data/pbmc_sample.zarr/obs");
/// ctx.sql(&format!("CREATE EXTERNAL TABLE obs STORED AS ZARR LOCATION '{obs}'"))
///     .await?;
///
/// let dir = tempfile::tempdir()?;
/// let out = dir.path().join("cells.zarr");
/// let copy = format!(
///     "COPY (SELECT barcode, n_genes FROM obs LIMIT 100) TO '{}' STORED AS ZARR \
///      OPTIONS (chunk_rows 32)",
///     out.display()
/// );
/// ctx.sql(&copy).await?.collect().await?;
/// let back = ctx.sql(&format!("SELECT * FROM '{}'", out.display())).await?;
/// assert_eq!(back.count().await?, 100);
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Default, Clone)]
pub struct ZarrFormat {
    options: TableWriteOptions,
}

impl ZarrFormat {
    /// The format writing with `options`.
    pub fn new(options: TableWriteOptions) -> Self {
        Self { options }
    }

    /// The write options.
    pub fn options(&self) -> &TableWriteOptions {
        &self.options
    }
}

/// A zarr store is a directory of chunks, not a file: it is opened as a table.
fn not_a_file<T>() -> Result<T> {
    not_impl_err!(
        "listing zarr stores as files: open zarr locations as tables \
         (CREATE EXTERNAL TABLE … STORED AS ZARR, or FROM 'x.zarr')"
    )
}

#[async_trait]
impl FileFormat for ZarrFormat {
    fn get_ext(&self) -> String {
        EXTENSION.into()
    }

    fn get_ext_with_compression(&self, _compression: &FileCompressionType) -> Result<String> {
        Ok(EXTENSION.into())
    }

    fn compression_type(&self) -> Option<FileCompressionType> {
        None
    }

    async fn infer_schema(
        &self,
        _state: &dyn Session,
        _store: &Arc<dyn ObjectStore>,
        _objects: &[ObjectMeta],
    ) -> Result<SchemaRef> {
        not_a_file()
    }

    async fn infer_stats(
        &self,
        _state: &dyn Session,
        _store: &Arc<dyn ObjectStore>,
        _table_schema: SchemaRef,
        _object: &ObjectMeta,
    ) -> Result<Statistics> {
        not_a_file()
    }

    /// The scan of `conf`'s runs of chunks (files carrying a [`crate::ZarrRun`]), in the
    /// session's runtime.
    async fn create_physical_plan(
        &self,
        state: &dyn Session,
        mut conf: FileScanConfig,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let Some(source) = (conf.file_source().as_ref() as &dyn Any).downcast_ref::<ZarrSource>()
        else {
            return plan_err!("a zarr scan needs the zarr file source");
        };
        conf.file_source = Arc::new(source.clone().with_runtime(state.runtime_env().clone()));
        Ok(DataSourceExec::from_data_source(conf))
    }

    async fn create_writer_physical_plan(
        &self,
        input: Arc<dyn ExecutionPlan>,
        _state: &dyn Session,
        conf: FileSinkConfig,
        order_requirements: Option<LexRequirement>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        if !conf.table_partition_cols.is_empty() {
            return not_impl_err!("PARTITIONED BY when writing zarr");
        }
        let sink = ZarrSink::new(conf, self.options.clone());
        Ok(sink.plan(input, order_requirements))
    }

    fn file_source(&self, table_schema: TableSchema) -> Arc<dyn FileSource> {
        Arc::new(ZarrSource::new(table_schema))
    }
}

//! zarrow-datafusion: zarr arrays and groups as Apache DataFusion tables.
//!
//! A thin adapter: the table model (which arrays become which columns, AnnData and CF
//! conventions) and the scan (what to read, and reading it) live in the core crate; this crate
//! translates DataFusion's projection, filters and limit into a [`zarrow::ZarrScan`].
//!
//! ```text
//!  SQL ─▶ ZarrTable (TableProvider) ──scan──▶ DataSourceExec over a FileScanConfig
//!          │ schema from zarrow::TableModel          │ file source: ZarrSource (source.rs)
//!          │ filters → pruning.rs: per dimension,    │ file groups = partitions, each a run of
//!          │   PruningPredicate over runs of chunks  │ chunks (a ZarrRun: a ZarrScan + its rows)
//!          ▼                                         ▼ opener.rs: ZarrScan::stream per run
//!  ZarrTableFactory (STORED AS ZARR)         format.rs: ZarrFormat (its file source is
//!  ZarrUrlTableFactory (FROM 'x.zarr/node')    ZarrSource); sink.rs: ZarrSink for COPY …
//!                                              STORED AS ZARR and INSERT INTO
//!  ZarrPredicate: a SQL predicate outside a query (pruning.rs + an exact batch filter)
//!  ZarrConfig (SET zarrow.*)                  stores: the session's registered object store
//!  remote_files: other formats' remote         for a URL if there is one, else zarrow's own
//!    locations get zarrow's store on first use
//! ```
//!
//! Start with [`zarr_session_context`], or [`SessionContextZarrExt::register_zarr`] on a
//! context of your own.
//!
//! ```
//! use datafusion::arrow::array::AsArray;
//! use datafusion::arrow::datatypes::Int64Type;
//! use zarrow_datafusion::zarr_session_context;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> datafusion::error::Result<()> {
//! let ctx = zarr_session_context(Default::default());
//! let obs = concat!(env!("CARGO_MANIFEST_DIR"), "/../../data/pbmc_sample.zarr/obs");
//! let batches = ctx
//!     .sql(&format!("SELECT count(*) AS cells FROM '{obs}' WHERE n_genes > 0"))
//!     .await?
//!     .collect()
//!     .await?;
//! let cells = batches[0].column(0).as_primitive::<Int64Type>().value(0);
//! assert!(cells > 0 && cells <= 2000);
//! # Ok(())
//! # }
//! ```

mod commit;
mod coordinates;
mod error;
mod factory;
mod format;
mod guards;
mod index_columns;
mod insert;
pub mod metrics;
mod opener;
mod options;
mod predicate;
mod pruning;
mod remote_files;
mod session;
mod sink;
mod source;
mod store;
mod table;

pub use commit::{committed_snapshots, IcechunkCommitExec, SNAPSHOT_ID_COLUMN};
pub use error::{from_datafusion_error, to_datafusion_error};
pub use factory::{StoreOpener, ZarrTableFactory, ZarrUrlTableFactory};
pub use format::{check_statement, ZarrFormat, ZarrFormatFactory};
pub use insert::plan_statement;
pub use options::{ZarrConfig, ZarrTableOptions};
pub use predicate::{missing_column, BatchFilter, PrunedChunks, ZarrPredicate};
pub use session::{
    enable_zarr_url_table, zarr_session_context, zarr_session_context_with_runtime,
    zarr_session_state, zarr_session_state_with_runtime, SessionContextZarrExt,
};
pub use sink::ZarrSink;
pub use source::{zarr_scans, ScanPlan, ScanPlanInfo, ZarrRun, ZarrScanRef, ZarrSource};
pub use table::ZarrTable;

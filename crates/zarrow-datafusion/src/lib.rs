//! zarrow-datafusion: zarr arrays and groups as Apache DataFusion tables.
//!
//! A thin adapter: the table model (which arrays become which columns, AnnData and CF
//! conventions) and the scan (what to read, and reading it) live in the core crate; this crate
//! translates DataFusion's projection, filters and limit into a [`zarrow::ZarrScan`].
//!
//! ```text
//!  SQL ─▶ ZarrTable (TableProvider) ──scan──▶ ZarrScanExec (ExecutionPlan)
//!          │ schema from zarrow::TableModel          │ a ZarrScan: columns, chunk ranges
//!          │ filters → pruning.rs: per dimension,    │ kept by pruning, limit; partitions =
//!          │   PruningPredicate over runs of chunks  │ runs of chunks, each ZarrScan::stream;
//!          ▼                                         ▼ metrics in EXPLAIN ANALYZE
//!  ZarrTableFactory (STORED AS ZARR)         format.rs: ZarrFormat, COPY … STORED AS ZARR
//!  ZarrUrlTableFactory (FROM 'x.zarr/node')   stores: the session's registered object store
//!  ZarrPredicate: a SQL predicate outside a query (pruning.rs + an exact batch filter)
//!  ZarrConfig (SET zarrow.*)                  for a URL if there is one, else zarrow's own
//!  remote_files: other formats' remote locations get zarrow's store on first use
//! ```
//!
//! Start with [`zarr_session_context`], or [`SessionContextZarrExt::register_zarr`] on a
//! context of your own.

mod error;
mod exec;
mod factory;
mod format;
mod insert;
mod options;
mod predicate;
mod pruning;
mod remote_files;
mod session;
mod table;

pub use error::{from_datafusion_error, to_datafusion_error};
pub use exec::{ScanPlanInfo, ZarrScanExec};
pub use factory::{is_zarr_location, StoreOpener, ZarrTableFactory, ZarrUrlTableFactory};
pub use format::{ZarrFormat, ZarrFormatFactory, ZarrSink, ZarrSource};
pub use insert::ZarrAppendSink;
pub use options::{ZarrConfig, ZarrTableOptions};
pub use predicate::{missing_column, BatchFilter, PrunedChunks, ZarrPredicate};
pub use session::{
    enable_zarr_url_table, zarr_session_context, zarr_session_context_with_runtime,
    zarr_session_state, zarr_session_state_with_runtime, SessionContextZarrExt,
};
pub use table::ZarrTable;

//! zarrow-datafusion: zarr arrays and groups as Apache DataFusion tables.
//!
//! A thin adapter: the table model (which arrays become which columns, AnnData and CF
//! conventions, reading a chunk of rows) lives in [`zarrow::table`]; this crate translates
//! DataFusion's projection, filters and limit into the chunks to read.
//!
//! ```text
//!  SQL ─▶ ZarrTable (TableProvider) ──scan──▶ ZarrScanExec (ExecutionPlan)
//!          │ schema from zarrow::table::TableModel      │ filters → PruningPredicate over per-chunk
//!          │                                            │   min/max of dimension / coordinate columns
//!          ▼                                            ▼
//!  ZarrTableFactory (STORED AS ZARR)           partitions over the kept chunks, each a stream of
//!  ZarrUrlTableFactory (FROM 'x.zarr/node')    RecordBatches read `zarrow.concurrency` chunks at a time
//!  ZarrConfig (SET zarrow.*)
//! ```
//!
//! Start with [`zarr_session_context`], or [`SessionContextZarrExt::register_zarr`] on a
//! context of your own.

mod error;
mod exec;
mod factory;
mod options;
mod pruning;
mod session;
mod table;

pub use error::{from_datafusion_error, to_datafusion_error};
pub use exec::ZarrScanExec;
pub use factory::{is_zarr_location, ZarrTableFactory, ZarrUrlTableFactory};
pub use options::{ZarrConfig, ZarrTableOptions};
pub use session::{
    enable_zarr_url_table, zarr_session_context, zarr_session_state, SessionContextZarrExt,
};
pub use table::ZarrTable;

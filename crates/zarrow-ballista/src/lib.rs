//! zarrow-ballista: zarr tables queried by an Apache Ballista cluster.
//!
//! ```text
//!  client (cluster_session_context, `zarrow sql --cluster df://HOST:PORT`)
//!    │ plans the query; a ZarrTable travels as its location and options (ZarrLogicalCodec)
//!    ▼
//!  zarrow-scheduler: reopens each table's metadata, prunes chunks; the scan is a
//!    │ DataSourceExec whose file groups are runs of chunks, sliced into tasks as any file
//!    │ scan's; a task's groups travel as their serialized runs (ZarrPhysicalCodec)
//!    ▼
//!  zarrow-executor × N: each task opens the table and reads its own chunks from the store
//! ```
//!
//! Both codecs wrap Ballista's own, so Parquet and CSV tables and Ballista's shuffles work in
//! the same cluster. [`codec`] is the wire format, [`session`] the clients, [`process`] the
//! two binaries' main functions, [`blocking`] how a synchronous decoder reads metadata.

pub mod blocking;
pub mod codec;
pub mod process;
pub mod session;

pub use codec::{ZarrLogicalCodec, ZarrPhysicalCodec};
pub use session::{
    cluster_session_context, cluster_session_context_with_runtime, standalone_session_context,
    zarr_ballista_config,
};

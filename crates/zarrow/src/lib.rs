//! zarrow — Zarr v2/v3 arrays as Apache Arrow, zero-copy for string and binary data.
//!
//! ```text
//!  location ──store.rs──▶ ZarrStore ──node.rs──▶ Node::{Array, Group}
//!                                                   │ metadata/ (v2 + v3 → one model),
//!                                                   │ data_type.rs, codec/ (one module a codec)
//!                                                   ▼
//!  table/: TableModel — which arrays become which columns (AnnData in table/anndata.rs)
//!        │ reader.rs: ZarrRecordBatch{Stream,Reader}Builder (with_projection, with_chunks, …)
//!        ▼
//!  scan/: ZarrScan — serializable: location, options, columns, chunk ranges (grid.rs), limit
//!        │ scan/stream.rs: the one pipeline (fetch ahead as tasks, decode a batch at a time)
//!        ▼
//!  array/: ZarrArray — fetch (GET │ shard index + ranged GET), region reads, chunk cache
//!        │ decode/: codec chain, then fixed.rs (numbers, fixed strings) or vlen.rs (strings,
//!        ▼          bytes: Arrow buffers are slices of the chunk where the layout allows)
//!  RecordBatch                                   writer.rs: Arrow arrays → zarr v3
//! ```
//!
//! Start with [`ZarrRecordBatchReaderBuilder`] (sync) or [`ZarrRecordBatchStreamBuilder`]
//! (async), or [`Node::open`] to walk a hierarchy.

pub mod array;
pub mod codec;
pub mod data_type;
pub mod decode;
pub mod error;
pub mod grid;
#[cfg(feature = "icechunk")]
pub mod icechunk;
pub mod metadata;
pub mod metrics;
pub mod node;
#[cfg(test)]
mod open_tests;
pub mod options;
pub mod reader;
pub mod remote;
pub mod scan;
pub mod store;
pub mod table;
mod task;
pub mod tree;
pub mod write;
pub mod writer;

pub use array::{ChunkCache, ChunkReader, ReadContext, ZarrArray};
pub use error::{ChunkError, Error, MemoryError, MemoryExhausted, Result};
pub use grid::{ChunkGrid, ChunkRanges, GridError};
pub use metadata::{ArrayMetadata, DataType, GroupMetadata, NodeMetadata, StructField};
pub use metrics::{ScanCounts, ScanMetrics};
pub use node::{Node, ZarrGroup};
pub use options::{BinaryType, FetchOptions, ReadLimits, StringType, ZarrReadOptions};
pub use reader::{
    ZarrRecordBatchReader, ZarrRecordBatchReaderBuilder, ZarrRecordBatchStreamBuilder,
};
pub use remote::RemoteOptions;
pub use scan::{ScanContext, ZarrRecordBatchStream, ZarrScan};
pub use store::ZarrStore;
pub use table::{TableModel, TableOptions};
pub use write::{write_table, TableWriteOptions, TableWriter};
pub use writer::{write_array, write_group, ZarrWriteOptions};

/// The scheme prefix of Icechunk repository locations (`icechunk+file://…`), known with or
/// without the `icechunk` feature so that a build without it names what is missing.
pub const ICECHUNK_PREFIX: &str = "icechunk+";

#[cfg(test)]
pub(crate) mod test_util {
    pub use zarrow_testkit::fixture;

    /// The values of a Utf8 array, NULL as "NULL".
    pub fn strings(a: &arrow_array::ArrayRef) -> Vec<&str> {
        use arrow_array::cast::AsArray;
        a.as_string::<i32>()
            .iter()
            .map(|v| v.unwrap_or("NULL"))
            .collect()
    }
}

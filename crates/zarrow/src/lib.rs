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
//!  RecordBatch
//!
//!  write/: RecordBatches (write_table, COPY, INSERT) and n-d arrays (write_array) → zarr;
//!        write/chunk/: the one chunk encoder; write/publish.rs: staging, lock, publish
//! ```
//!
//! Start with [`ZarrRecordBatchReaderBuilder`] (sync) or [`ZarrRecordBatchStreamBuilder`]
//! (async), or [`Node::open`] to walk a hierarchy. Write with [`write_table`] (a table) or
//! [`write_array`] (one array). Every failure is one [`Error`] naming the array, chunk and
//! location it is about.
//!
//! # Reading a table
//!
//! A group of 1-D arrays sharing a dimension (or an AnnData dataframe, as here) is a table:
//!
//! ```
//! use zarrow::ZarrRecordBatchReaderBuilder;
//!
//! let obs = concat!(env!("CARGO_MANIFEST_DIR"), "/../../data/pbmc_sample.zarr/obs");
//! let builder = ZarrRecordBatchReaderBuilder::try_new(obs)?;
//! let cell_type = builder.schema().index_of("cell_type")?;
//! let reader = builder
//!     .with_projection(vec![cell_type])
//!     .with_batch_size(500)
//!     .build()?;
//! let mut rows = 0;
//! for batch in reader {
//!     let batch = batch?;
//!     assert_eq!(batch.schema().field(0).name(), "cell_type");
//!     rows += batch.num_rows();
//! }
//! assert_eq!(rows, 2000);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Which arrays become which columns
//!
//! [`TableModel`] is that decision, made once from the metadata; the builders, the scan and
//! zarrow-datafusion all read through one:
//!
//! ```
//! use zarrow::{TableModel, TableOptions};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> zarrow::Result<()> {
//! let var = concat!(env!("CARGO_MANIFEST_DIR"), "/../../data/pbmc_sample.zarr/var");
//! let model = TableModel::open(var, TableOptions::default()).await?;
//! let schema = model.schema();
//! let names: Vec<&str> = schema.fields().iter().map(|f| f.name().as_str()).collect();
//! assert!(names.contains(&"gene_symbol") && names.contains(&"n_cells"), "{names:?}");
//! assert_eq!(model.column_index("gene_ids")?, schema.index_of("gene_ids")?);
//! # Ok(())
//! # }
//! ```

#![cfg_attr(docsrs, feature(doc_cfg))]

mod array;
mod codec;
mod data_type;
mod decode;
mod error;
mod grid;
#[cfg(feature = "icechunk")]
mod icechunk;
pub mod key;
mod metadata;
mod metrics;
mod node;
#[cfg(test)]
mod open_tests;
pub mod options;
mod reader;
mod remote;
mod scan;
mod store;
pub mod table;
mod task;
mod text;
pub mod tree;
pub mod write;

pub use array::{ChunkCache, ChunkLocation, ChunkReader, ReadContext, ZarrArray};
pub use codec::{BytesToBytes, ChainError, ConfigError};
pub use data_type::{DataTypeError, FillValueError, LowFloat, SubByteInt};
pub use error::{ChunkError, Error, MemoryError, MemoryExhausted, Result};
pub use grid::{ChunkGrid, ChunkRanges, ChunkRangesIter, GridError, GridKind, MAX_GRID_RUNS};
#[cfg(feature = "icechunk")]
#[cfg_attr(docsrs, doc(cfg(feature = "icechunk")))]
pub use icechunk::{panic_is_guarded, RepositoryError, RepositoryErrorKind, RepositoryPanic};
pub use metadata::{
    ArrayMetadata, ChunkKeyEncoding, DataType, Endian, FillValue, GroupMetadata, NodeMetadata,
    NpTimeUnit, StructField,
};
pub use metrics::{ScanCounts, ScanMetrics};
pub use node::{Node, ZarrGroup};
pub use options::{BinaryType, FetchOptions, ReadLimits, StringType, ZarrReadOptions};
pub use reader::{
    ZarrRecordBatchReader, ZarrRecordBatchReaderBuilder, ZarrRecordBatchStreamBuilder,
};
pub use remote::RemoteOptions;
pub use scan::{ChunkFilter, ScanContext, ScanMemory, ZarrRecordBatchStream, ZarrScan};
pub use store::ZarrStore;
pub use table::{TableModel, TableOptions};
pub use write::{
    write_array, write_group, write_table, TableWriteOptions, TableWriter, VlenEncoding,
    ZarrWriteOptions,
};

/// Not a public API: the decoder's parts, for zarrow's own benches, fuzz targets and tests,
/// which drive one codec chain or one chunk without a store. Anything here may change in any
/// release.
#[doc(hidden)]
pub mod internals {
    pub use crate::codec::blosc::{BloscCompressor, BloscShuffle};
    pub use crate::codec::{parse_v2_chain, ArrayToBytes, CodecChain, IndexLocation, ZarrsVlen};
    pub use crate::data_type::{parse_v2_dtype, parse_v2_structured};
    pub use crate::decode::{decode_chunk, fill_array, ChunkRows, ChunkSelection};
    pub use crate::metadata::{parse_v2_array, parse_v2_consolidated, parse_v2_group, parse_v3};
    pub use crate::write::chunk::encode;
}

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

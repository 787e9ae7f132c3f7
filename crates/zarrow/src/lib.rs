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

mod array;
mod codec;
mod data_type;
mod decode;
mod error;
mod grid;
#[cfg(feature = "icechunk")]
mod icechunk;
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
pub mod tree;
pub mod write;
mod writer;

pub use array::{ChunkCache, ChunkLocation, ChunkReader, ReadContext, ZarrArray};
pub use codec::{ChainError, ConfigError};
pub use data_type::{DataTypeError, FillValueError};
pub use error::{ChunkError, Error, Result};
pub use grid::{ChunkGrid, ChunkRanges, ChunkRangesIter, GridError};
#[cfg(feature = "icechunk")]
pub use icechunk::RepositoryPanic;
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
pub use scan::{ScanContext, ScanMemory, ZarrRecordBatchStream, ZarrScan};
pub use store::ZarrStore;
pub use table::{TableModel, TableOptions};
pub use write::{write_table, TableWriteOptions, TableWriter};
pub use writer::{write_array, write_group, Compression, VlenEncoding, ZarrWriteOptions};

/// Not a public API: the decoder's parts, for zarrow's own benches, fuzz targets and tests,
/// which drive one codec chain or one chunk without a store. Anything here may change in any
/// release.
#[doc(hidden)]
pub mod internals {
    pub use crate::codec::blosc::{BloscCompressor, BloscShuffle};
    pub use crate::codec::{
        parse_v2_chain, ArrayToBytes, BytesToBytes, CodecChain, IndexLocation, ZarrsVlen,
    };
    pub use crate::data_type::{parse_v2_dtype, parse_v2_structured};
    pub use crate::decode::{decode_chunk, fill_array, ChunkRows, ChunkSelection};
    pub use crate::metadata::{parse_v2_array, parse_v2_consolidated, parse_v2_group, parse_v3};
    pub use crate::writer::encode;
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

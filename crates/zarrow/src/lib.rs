//! zarrow — Zarr v2/v3 arrays as Apache Arrow, zero-copy for string and binary data.
//!
//! ```text
//!  location ──store.rs──▶ ZarrStore ──node.rs──▶ Node::{Array, Group}
//!                                                   │ metadata/ (v2 + v3 → one model)
//!                                                   ▼
//!  ZarrArray::read_chunk ──array.rs: GET / shard index + ranged GET──▶ stored bytes
//!        │                                                                 │
//!        │           decode/: codec::compression (gzip, zstd, blosc, …) ◀──┘
//!        │                    then fixed.rs (numbers, fixed strings) or vlen.rs (strings,
//!        │                    bytes: Arrow buffers are slices of the chunk where the layout allows)
//!        ▼
//!  reader.rs: ZarrRecordBatchStream / ZarrRecordBatchReader (index columns + values)
//!  writer.rs: Arrow arrays → zarr v3 (vlen-utf8, vlen-bytes, zarrow.arrow_vlen, bytes)
//! ```
//!
//! Start with [`ZarrRecordBatchReaderBuilder`] (sync) or [`ZarrRecordBatchStreamBuilder`]
//! (async), or [`Node::open`] to walk a hierarchy.

pub mod array;
pub mod codec;
pub mod data_type;
pub mod decode;
pub mod error;
pub mod metadata;
pub mod node;
pub mod options;
pub mod reader;
pub mod region;
pub mod store;
pub mod table;
pub mod writer;

pub use array::{ChunkReader, ZarrArray};
pub use error::{ChunkError, Error, Result};
pub use metadata::{ArrayMetadata, DataType, GroupMetadata, NodeMetadata};
pub use node::{Node, ZarrGroup};
pub use options::{BinaryType, StringType, ZarrReadOptions};
pub use reader::{
    ZarrRecordBatchReader, ZarrRecordBatchReaderBuilder, ZarrRecordBatchStream,
    ZarrRecordBatchStreamBuilder,
};
pub use store::ZarrStore;
pub use writer::{write_array, write_group, ZarrWriteOptions};

#[cfg(test)]
pub(crate) mod test_util {
    /// The absolute location of a committed fixture store in `tests/fixtures/data`.
    pub fn fixture(name: &str) -> String {
        let data =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/data");
        format!("{}/{name}", std::fs::canonicalize(data).unwrap().display())
    }
}

//! The one error type of zarrow.
//!
//! Every failure names where it happened: the array (its path in the hierarchy), and for chunk
//! data the chunk key, with a [`ChunkError`] saying what was wrong inside that chunk. Decoders
//! return [`ChunkError`] (they know nothing of paths); the reader adds the context.

use std::fmt;

mod codec_config;

pub use codec_config::ConfigError;

/// `Result` with [`Error`] as the default error type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong reading or writing zarr data.
///
/// Match on the variant for what went wrong; [`Error::array`], [`Error::chunk_key`] and
/// [`Error::location`] say where, whatever the variant:
///
/// ```
/// use zarrow::{Error, ZarrRecordBatchReaderBuilder};
///
/// let sample = concat!(env!("CARGO_MANIFEST_DIR"), "/../../data/pbmc_sample.zarr");
/// match ZarrRecordBatchReaderBuilder::try_new(&format!("{sample}/no_such_table")) {
///     Err(Error::NodeNotFound { path }) => assert!(path.is_empty() || path.contains("no_such")),
///     other => panic!("expected NodeNotFound, got {other:?}"),
/// }
/// let obs = ZarrRecordBatchReaderBuilder::try_new(&format!("{sample}/obs"))?;
/// let e = obs.model().column_index("no_such_column").unwrap_err();
/// assert!(matches!(&e, Error::ColumnNotFound { column, .. } if column == "no_such_column"));
/// assert_eq!(e.location(), Some(obs.model().location()));
/// # Ok::<(), Error>(())
/// ```
#[non_exhaustive]
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A location string that could not be turned into a store and a path.
    #[error("invalid location '{location}': {message}")]
    Location {
        /// The location as given.
        location: String,
        /// What is wrong with it.
        message: String,
    },
    /// No zarr node (array or group) at a path.
    #[error("no zarr array or group at '{path}'")]
    NodeNotFound {
        /// The node path.
        path: String,
    },
    /// Metadata that is not valid JSON or not valid zarr metadata.
    #[error("invalid metadata for '{path}' ({key}): {message}")]
    Metadata {
        /// The node path.
        path: String,
        /// The metadata document (`zarr.json`, `.zarray`, …).
        key: String,
        /// What is wrong.
        message: String,
        /// The typed cause, when there is one: a [`crate::data_type::DataTypeError`], a
        /// [`crate::data_type::FillValueError`], a [`crate::grid::GridError`].
        #[source]
        source: Option<Box<dyn std::error::Error + Send + Sync>>,
    },
    /// A data type zarrow does not read.
    #[error("array '{array}': unsupported data type {data_type}; supported: bool, int8-64, uint8-64, float16/32/64, complex64/128, numpy.datetime64, numpy.timedelta64, string, variable_length_bytes, fixed_length_utf32, null_terminated_bytes, raw_bytes, structured/struct of those")]
    UnsupportedDataType {
        /// The array path.
        array: String,
        /// The data type as written in the metadata.
        data_type: String,
    },
    /// A codec zarrow does not know, or a configuration of it that zarrow does not support.
    #[error("array '{array}': unsupported codec {codec}: {reason}")]
    UnsupportedCodec {
        /// The array path.
        array: String,
        /// The codec name or id.
        codec: String,
        /// Why it cannot be used.
        reason: String,
    },
    /// A known codec whose configuration in the metadata is malformed, or valid but not one
    /// zarrow reads ([`ConfigError::is_unsupported`]).
    #[error("invalid metadata for '{array}' ({document}): codec {codec}: {source}")]
    CodecConfig {
        /// The array path.
        array: String,
        /// The metadata document holding the codec (`zarr.json`, `.zarray`).
        document: String,
        /// The codec name as written (v3 `name`, v2 `id`).
        codec: String,
        /// What is wrong with its configuration (it names the key).
        #[source]
        source: Box<ConfigError>,
    },
    /// A chunk grid other than the regular one.
    #[error("array '{array}': unsupported chunk grid '{grid}' (zarrow reads the regular grid)")]
    UnsupportedChunkGrid {
        /// The array path.
        array: String,
        /// The grid's name.
        grid: String,
    },
    /// An extension (codec, grid, …) marked `must_understand: true` that zarrow does not know.
    #[error("array '{array}': unknown extension '{name}' is marked must_understand")]
    MustUnderstand {
        /// The array path.
        array: String,
        /// The extension name.
        name: String,
    },
    /// A chunk whose bytes could not be decoded.
    #[error("array '{array}', chunk '{chunk}': {source}")]
    Chunk {
        /// The array path.
        array: String,
        /// The store key of the chunk (the shard key and inner chunk for sharded arrays).
        chunk: String,
        /// What was wrong.
        #[source]
        source: ChunkError,
    },
    /// A region of an array (start and shape per dimension) that does not lie inside it.
    #[error("array '{array}': region {start:?} + {shape:?} does not fit in the array's shape {array_shape:?}")]
    RegionOutOfBounds {
        /// The array path.
        array: String,
        /// The region's first element.
        start: Box<[u64]>,
        /// The region's shape.
        shape: Box<[u64]>,
        /// The array's shape.
        array_shape: Box<[u64]>,
    },
    /// Chunk coordinates outside an array's (or table's) chunk grid, or a chunk selection that
    /// does not fit it (a scan planned before the store changed).
    #[error("array '{array}': {source}")]
    Grid {
        /// The array path (or the table's location).
        array: String,
        /// What does not fit.
        #[source]
        source: Box<crate::grid::GridError>,
    },
    /// The object store failed.
    #[error("store error reading '{path}': {source}")]
    Store {
        /// The store path that was read.
        path: String,
        /// The store's error.
        #[source]
        source: object_store::Error,
    },
    /// The object store failed to write an object (`detail`: what is known of why, e.g. a
    /// full disk and the bytes that did not fit, or empty).
    #[error("store error writing '{path}'{detail}: {source}")]
    StoreWrite {
        /// The store path that was written.
        path: String,
        /// `: the disk is full (N bytes to write)` and the like, or empty.
        detail: String,
        /// The store's error.
        #[source]
        source: object_store::Error,
    },
    /// An option or setting (a table option, a session setting, an environment variable the
    /// CLI or Python reads) whose value is not valid.
    #[error("option '{key}': {message}")]
    InvalidOption {
        /// The option's key, or the environment variable.
        key: String,
        /// What is wrong with the value.
        message: String,
    },
    /// A column the table does not have (a projection, a filter, a name asked for).
    #[error("'{table}' has no column '{column}' (columns: {})", columns.join(", "))]
    ColumnNotFound {
        /// The table's location.
        table: String,
        /// The name asked for.
        column: String,
        /// The table's columns, in order.
        columns: Vec<String>,
    },
    /// An argument that does not fit the array (selection out of range, …).
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// An Arrow type zarr has no data type for (lists, maps, a struct with a variable-size
    /// field), or none in the zarr format being written.
    #[error("cannot write Arrow type {data_type} to zarr v{zarr_format}{}", struct_field_text(.field))]
    UnwritableType {
        /// The Arrow type (a struct field's, when `field` names one).
        data_type: arrow_schema::DataType,
        /// The zarr format being written (2 or 3).
        zarr_format: u8,
        /// The struct field of that type, when it is a field that cannot be written (zarr's
        /// structured data types hold fixed-size fields only).
        field: Option<String>,
    },
    /// A node that cannot be read as a table (its arrays tie for the table's dimensions, it
    /// holds none, two columns would share a name, a malformed sparse matrix or AnnData
    /// group), or values that contradict the table's description (a categorical code past its
    /// categories, a CF time out of range, a sparse matrix's offsets past its elements).
    #[error("{message}")]
    Table {
        /// The path of the node (or of its array) the error is about.
        path: String,
        /// What is wrong; it names the node.
        message: String,
    },
    /// An Arrow error from building arrays or batches.
    #[error("arrow error: {0}")]
    Arrow(#[from] arrow_schema::ArrowError),
    /// A task zarrow ran (a chunk's fetch, a decode on the blocking pool) panicked or was
    /// cancelled; `source` says which (`is_panic`, `is_cancelled`).
    #[error("{task} task failed: {source}")]
    Task {
        /// Which task: `fetch` or `decode`.
        task: &'static str,
        /// tokio's reason.
        #[source]
        source: tokio::task::JoinError,
    },
    /// A local table was replaced by another writer (`COPY … overwrite`) while this read ran:
    /// what it read may mix both tables, so the read fails instead.
    #[error(
        "'{location}' was replaced by another writer while this read ran; nothing read after \
         that is used (run the query again to read the new table)"
    )]
    Replaced {
        /// The location opened.
        location: String,
    },
    /// The async runtime could not be started or used.
    #[error("runtime: {0}")]
    Runtime(String),
    /// A memory budget (DataFusion's memory pool, see [`crate::ScanMemory`]) cannot
    /// hold what a scan needs: DataFusion's own error coming back through a zarrow stream.
    #[error("resources exhausted: {0}")]
    ResourcesExhausted(String),
    /// A scan's memory budget cannot hold what the scan is reading.
    #[error("resources exhausted: {0}")]
    MemoryExhausted(Box<MemoryExhausted>),
    /// Writing failed.
    #[error("writing '{path}': {message}")]
    Write {
        /// The node path being written.
        path: String,
        /// What went wrong.
        message: String,
    },
    /// A commit to an Icechunk branch lost to a commit another writer made to the same branch
    /// since this write's session began, touching the same arrays (icechunk's conflict
    /// detector could not rebase over it): nothing of this write was committed.
    #[error(
        "writing '{location}': another commit reached branch '{branch}' after snapshot {base}, \
         where this write began, and changed the same arrays ({conflicts}); nothing was \
         committed: run the write again"
    )]
    CommitConflict {
        /// The location written.
        location: String,
        /// The branch.
        branch: String,
        /// The snapshot the write began from.
        base: String,
        /// What conflicted, as icechunk says.
        conflicts: String,
    },
    /// An error of another library zarrow runs inside (a DataFusion error coming back through
    /// zarrow's streams), kept whole so the layer that knows its type gets it back.
    #[error(transparent)]
    External(Box<dyn std::error::Error + Send + Sync>),
}

/// ` as struct field '…' (structured fields are fixed-size)`, or nothing.
fn struct_field_text(field: &Option<String>) -> String {
    field.as_deref().map_or_else(String::new, |f| {
        format!(" as struct field '{f}' (structured fields are fixed-size)")
    })
}

/// A scan could not hold what it was reading in its memory budget
/// ([`crate::ScanMemory`]).
#[derive(Debug, thiserror::Error)]
#[error(
    "{reading}: {source} (a scan holds the stored bytes of the chunk it hands out and of the \
     chunks it reads ahead, and the columns it reads whole; raise the memory limit)"
)]
pub struct MemoryExhausted {
    /// What the scan was reading: a chunk of rows of a table, the columns it reads whole.
    pub reading: String,
    /// Why the budget did not grow.
    #[source]
    pub source: MemoryError,
}

/// Why a scan's memory budget ([`crate::ScanMemory`]) did not grow.
#[non_exhaustive]
#[derive(Debug, thiserror::Error)]
pub enum MemoryError {
    /// The budget has no room for `bytes` more; `source` is its own reason (DataFusion's
    /// "Failed to allocate additional …").
    #[error("{source}")]
    Refused {
        /// The bytes asked for.
        bytes: usize,
        /// The budget's reason.
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// The stream's count of what it holds is unusable: a thread panicked while updating it.
    #[error("the scan's count of the memory it holds was poisoned by a panic")]
    Poisoned,
}

impl Error {
    /// Wrap a chunk decoding error with the array path and chunk key.
    pub fn chunk(array: impl Into<String>, chunk: impl Into<String>, source: ChunkError) -> Self {
        Error::Chunk {
            array: array.into(),
            chunk: chunk.into(),
            source,
        }
    }

    /// The path of the array (or node) the error is about, when it names one.
    pub fn array(&self) -> Option<&str> {
        match self {
            Error::Chunk { array, .. }
            | Error::RegionOutOfBounds { array, .. }
            | Error::Grid { array, .. }
            | Error::UnsupportedDataType { array, .. }
            | Error::UnsupportedCodec { array, .. }
            | Error::CodecConfig { array, .. }
            | Error::UnsupportedChunkGrid { array, .. }
            | Error::MustUnderstand { array, .. } => Some(array),
            Error::Metadata { path, .. }
            | Error::NodeNotFound { path }
            | Error::Table { path, .. }
            | Error::Write { path, .. } => Some(path),
            _ => None,
        }
    }

    /// The store key of the chunk the error is about (with the inner chunk for sharded
    /// arrays), when it is about one.
    pub fn chunk_key(&self) -> Option<&str> {
        match self {
            Error::Chunk { chunk, .. } => Some(chunk),
            _ => None,
        }
    }

    /// Where in the store the error happened: the object read (a store error), the metadata
    /// document, or the location given; `None` when the error names no place.
    pub fn location(&self) -> Option<&str> {
        match self {
            Error::Store { path, .. } | Error::StoreWrite { path, .. } => Some(path),
            Error::Metadata { key, .. } => Some(key),
            Error::CodecConfig { document, .. } => Some(document),
            Error::Location { location, .. } => Some(location),
            Error::ColumnNotFound { table, .. } => Some(table),
            Error::CommitConflict { location, .. } => Some(location),
            _ => None,
        }
    }

    /// An [`Error::Location`]: `location` cannot be opened, for `message`.
    pub(crate) fn bad_location(location: &str, message: impl fmt::Display) -> Self {
        Error::Location {
            location: location.to_string(),
            message: message.to_string(),
        }
    }

    /// An [`Error::InvalidOption`]: the option (or setting) `key` cannot be taken, for
    /// `message`.
    pub fn invalid_option(key: impl Into<String>, message: impl Into<String>) -> Self {
        Error::InvalidOption {
            key: key.into(),
            message: message.into(),
        }
    }

    /// A table error about the node (or array) at `path`; `message` names it.
    pub fn table(path: impl Into<String>, message: impl Into<String>) -> Self {
        Error::Table {
            path: path.into(),
            message: message.into(),
        }
    }

    /// A metadata error.
    pub fn metadata(
        path: impl Into<String>,
        key: impl Into<String>,
        message: impl fmt::Display,
    ) -> Self {
        Error::Metadata {
            path: path.into(),
            key: key.into(),
            message: message.to_string(),
            source: None,
        }
    }

    /// A metadata error with its typed cause (`message` says what it is about, and usually
    /// includes the cause's text).
    pub fn metadata_caused_by(
        path: impl Into<String>,
        key: impl Into<String>,
        message: impl fmt::Display,
        source: impl std::error::Error + Send + Sync + 'static,
    ) -> Self {
        Error::Metadata {
            path: path.into(),
            key: key.into(),
            message: message.to_string(),
            source: Some(Box::new(source)),
        }
    }
}

impl From<Error> for arrow_schema::ArrowError {
    fn from(e: Error) -> Self {
        match e {
            Error::Arrow(a) => a,
            other => arrow_schema::ArrowError::ExternalError(Box::new(other)),
        }
    }
}

/// What was wrong inside one chunk. Carries no path: [`Error::Chunk`] adds it.
#[non_exhaustive]
#[derive(Debug, thiserror::Error)]
pub enum ChunkError {
    /// A bytes-to-bytes codec (decompression, checksum) failed.
    #[error("{codec}: {message}")]
    Codec {
        /// The codec name.
        codec: &'static str,
        /// What failed.
        message: String,
    },
    /// The checksum stored with the chunk does not match its bytes.
    #[error("crc32c checksum mismatch: stored {stored:#010x}, computed {computed:#010x}")]
    Checksum {
        /// The stored checksum.
        stored: u32,
        /// The checksum of the data.
        computed: u32,
    },
    /// The chunk ends before the data its header announces.
    #[error("truncated chunk: {0}")]
    Truncated(String),
    /// The chunk holds a different number of elements than the chunk shape.
    #[error("chunk holds {found} elements, expected {expected}")]
    ItemCount {
        /// Elements the chunk shape calls for.
        expected: u64,
        /// Elements the chunk says it holds.
        found: u64,
    },
    /// The decoded chunk has the wrong size for its fixed-size data type.
    #[error("decoded chunk is {found} bytes, expected {expected}")]
    Size {
        /// Bytes expected.
        expected: u64,
        /// Bytes found.
        found: u64,
    },
    /// Offsets that decrease, do not start at zero, or point past the data.
    #[error("invalid offsets: {0}")]
    Offsets(String),
    /// Bytes that are not valid UTF-8 in a string array.
    #[error("invalid UTF-8 in element {element}")]
    Utf8 {
        /// The element (in chunk order) holding the invalid bytes, when known.
        element: u64,
    },
    /// A UTF-32 code unit that is no character (a surrogate, or past U+10FFFF) in a
    /// fixed-length UTF-32 (`<U`) array.
    #[error("invalid UTF-32 in element {element}: {code_point:#x} is not a Unicode scalar value (a surrogate or past U+10FFFF)")]
    Utf32 {
        /// The element (in chunk order) holding the code unit.
        element: u64,
        /// The code unit.
        code_point: u32,
    },
    /// A bad shard index.
    #[error("shard index: {0}")]
    ShardIndex(String),
    /// The chunk would need more memory than the limit allows.
    #[error("{0}")]
    TooLarge(String),
    /// A variable-length element longer than the item limit
    /// ([`crate::ReadLimits::max_item_bytes`]).
    #[error("element {element} is {bytes} bytes, more than the {limit} bytes zarrow reads (raise max_item_bytes, ZARROW_MAX_ITEM_BYTES, to read it)")]
    ItemTooLarge {
        /// The element (in chunk order).
        element: u64,
        /// Its length, as stored.
        bytes: u64,
        /// The item limit in force.
        limit: u64,
    },
    /// Any other malformed content.
    #[error("{0}")]
    Invalid(String),
}

impl ChunkError {
    /// A codec failure.
    pub fn codec(codec: &'static str, message: impl fmt::Display) -> Self {
        ChunkError::Codec {
            codec,
            message: message.to_string(),
        }
    }

    /// This error, about an element of a run of elements, made about the chunk: a run starting
    /// at element `first` names its element `e` as `first + e`.
    pub(crate) fn in_run_from(self, first: usize) -> Self {
        match self {
            ChunkError::Utf8 { element } => ChunkError::Utf8 {
                element: element + first as u64,
            },
            ChunkError::Utf32 {
                element,
                code_point,
            } => ChunkError::Utf32 {
                element: element + first as u64,
                code_point,
            },
            ChunkError::ItemTooLarge {
                element,
                bytes,
                limit,
            } => ChunkError::ItemTooLarge {
                element: element + first as u64,
                bytes,
                limit,
            },
            other => other,
        }
    }
}

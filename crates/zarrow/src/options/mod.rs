//! Reader options: which Arrow representation strings and bytes take, and I/O limits; with
//! the option keys the CLI, SQL and Python pass them by ([`keys`]), and their defaults.
//! Plain data: the lowest layer, which every other module may read.

use std::time::Duration;

use arrow_schema::DataType as ArrowType;
use serde::{Deserialize, Serialize};

use crate::{Error, Result};

pub mod keys;

pub use keys::{env_options, option_key, parse_bool, OptionKey, OPTION_KEYS};

/// How long a connection may take by default.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// How long one read (every request it makes, retries and bodies included) may take by default:
/// a silent server fails a read this long after it started.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);
/// How many times a failing request is retried by default.
pub const DEFAULT_MAX_RETRIES: usize = 3;
/// For how long after its first attempt a request is retried by default (within the read's
/// `timeout`).
pub const DEFAULT_RETRY_TIMEOUT: Duration = Duration::from_secs(20);
/// How many connections a remote store opens by default while its first metadata document is
/// on the way (see [`crate::RemoteOptions::warm_connections`]): the chunk reads one partition
/// keeps in flight at the default `concurrency`.
pub const DEFAULT_WARM_CONNECTIONS: usize = 32;
/// The most connections `warm_connections` may ask for.
pub const MAX_WARM_CONNECTIONS: usize = 256;

/// The largest element zarrow can read, in bytes: numpy's own limit on an item size (a C
/// `int`).
pub const MAX_ITEM_BYTES: usize = i32::MAX as usize;

/// The largest element zarrow reads unless told otherwise: 16 MiB (`<U4194304`). A fixed-size
/// element is allocated whole for the fill value and per chunk element, so this bounds what a
/// data type in hostile metadata can make zarrow allocate; a variable-length item (string,
/// bytes) longer than this is a chunk error on every decode path, and a chunk of `n` of them
/// decodes to at most `n` × (4 + this) bytes (the bound every decompressor of the chunk stops
/// at). [`crate::ReadLimits::max_item_bytes`] raises it up to [`MAX_ITEM_BYTES`].
pub const DEFAULT_MAX_ITEM_BYTES: usize = 16 << 20;

/// The largest metadata document read by default (256 MiB: consolidated metadata of hierarchies
/// with hundreds of thousands of arrays fits).
pub const DEFAULT_MAX_METADATA_BYTES: u64 = 256 << 20;

/// The Arrow type string arrays are read as.
///
/// ```
/// use arrow_schema::DataType;
/// use zarrow::{BinaryType, StringType};
///
/// let large = StringType::parse("large_utf8")?;
/// assert_eq!(large, StringType::LargeUtf8);
/// assert_eq!(large.arrow_type(), DataType::LargeUtf8);
/// assert_eq!(large.binary(), BinaryType::LargeBinary);
/// assert_eq!(StringType::parse("UTF8")?, StringType::default());
/// assert!(StringType::parse("latin1").is_err());
/// # Ok::<(), zarrow::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StringType {
    /// `Utf8`: i32 offsets (the default).
    #[default]
    Utf8,
    /// `LargeUtf8`: i64 offsets.
    LargeUtf8,
    /// `Utf8View` (needs the `utf8view` cargo feature to be read).
    View,
}

impl StringType {
    /// The Arrow type for strings.
    pub fn arrow_type(self) -> ArrowType {
        match self {
            StringType::Utf8 => ArrowType::Utf8,
            StringType::LargeUtf8 => ArrowType::LargeUtf8,
            StringType::View => ArrowType::Utf8View,
        }
    }

    /// The matching binary representation.
    pub fn binary(self) -> BinaryType {
        match self {
            StringType::Utf8 => BinaryType::Binary,
            StringType::LargeUtf8 => BinaryType::LargeBinary,
            StringType::View => BinaryType::View,
        }
    }

    /// Parse `utf8`, `large_utf8` (or `large`), `view` (or `utf8view`), case-insensitively.
    pub fn parse(s: &str) -> Result<Self> {
        let t = match s.to_ascii_lowercase().as_str() {
            "utf8" | "string" => StringType::Utf8,
            "large_utf8" | "largeutf8" | "large" | "large_string" => StringType::LargeUtf8,
            "view" | "utf8view" | "utf8_view" | "string_view" => StringType::View,
            other => {
                return Err(Error::invalid_option(
                    "string_type",
                    format!("string type '{other}': expected utf8, large_utf8 or view"),
                ))
            }
        };
        t.check_available()?;
        Ok(t)
    }

    /// Fails for `View` when zarrow was built without the `utf8view` feature.
    pub fn check_available(self) -> Result<()> {
        if self == StringType::View && !cfg!(feature = "utf8view") {
            return Err(Error::invalid_option(
                "string_type",
                "Utf8View output needs zarrow built with the `utf8view` cargo feature",
            ));
        }
        Ok(())
    }
}

/// The Arrow type variable-length bytes are read as: the one matching the options' string type.
///
/// ```
/// use arrow_schema::DataType;
/// use zarrow::{BinaryType, StringType, ZarrReadOptions};
///
/// assert_eq!(ZarrReadOptions::default().binary_type(), BinaryType::Binary);
/// let large = ZarrReadOptions::default().with_string_type(StringType::LargeUtf8);
/// assert_eq!(large.binary_type(), BinaryType::LargeBinary);
/// assert_eq!(large.binary_type().arrow_type(), DataType::LargeBinary);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum BinaryType {
    /// `Binary`: i32 offsets (the default).
    #[default]
    Binary,
    /// `LargeBinary`: i64 offsets.
    LargeBinary,
    /// `BinaryView` (needs the `utf8view` cargo feature).
    View,
}

impl BinaryType {
    /// The Arrow type for bytes.
    pub fn arrow_type(self) -> ArrowType {
        match self {
            BinaryType::Binary => ArrowType::Binary,
            BinaryType::LargeBinary => ArrowType::LargeBinary,
            BinaryType::View => ArrowType::BinaryView,
        }
    }
}

/// Options for reading arrays: the Arrow type strings come as, how many chunks are fetched at
/// once, and the limits on what a store may make zarrow allocate.
///
/// ```
/// use zarrow::{ReadLimits, StringType, ZarrReadOptions};
///
/// let mut limits = ReadLimits::default();
/// limits.set("max_chunk_bytes", "1000000")?;
/// let options = ZarrReadOptions::default()
///     .with_string_type(StringType::parse("large_utf8")?)
///     .with_concurrency(4)
///     .with_limits(limits);
/// assert_eq!(options.limits.max_chunk_bytes, 1_000_000);
/// // A bad value is an error naming its option.
/// let e = ReadLimits::default().set("max_chunk_bytes", "lots").unwrap_err();
/// assert!(matches!(e, zarrow::Error::InvalidOption { ref key, .. } if key == "max_chunk_bytes"));
/// # Ok::<(), zarrow::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct ZarrReadOptions {
    /// How strings are represented (default `Utf8`). Bytes follow: Binary, LargeBinary, BinaryView.
    pub string_type: StringType,
    /// How many chunk reads are in flight at once (default 32).
    pub concurrency: usize,
    /// How large reads are split and small ones merged (see [`FetchOptions`]).
    pub fetch: FetchOptions,
    /// What zarrow allocates at most for sizes the data claims (see [`ReadLimits`]); part of
    /// a serialized scan, so every process that runs it holds to the same limits.
    pub limits: ReadLimits,
}

/// The default of [`ReadLimits::max_chunk_bytes`].
pub const DEFAULT_MAX_CHUNK_BYTES: usize = 2 << 30;

impl Default for ZarrReadOptions {
    fn default() -> Self {
        ZarrReadOptions {
            string_type: StringType::Utf8,
            concurrency: 32,
            fetch: FetchOptions::default(),
            limits: ReadLimits::default(),
        }
    }
}

/// The default of [`FetchOptions::range_split_bytes`]: 8 MiB.
pub const DEFAULT_RANGE_SPLIT_BYTES: u64 = 8 << 20;

/// The default of [`FetchOptions::coalesce_bytes`]: 1 MiB (as `object_store`'s and
/// DataFusion's Parquet reader's range coalescing).
pub const DEFAULT_COALESCE_BYTES: u64 = 1 << 20;

/// How a read asks the store for bytes: a large object (a chunk, an inner chunk of a shard)
/// as several ranged GETs in flight at once, nearby small ranges of one object (inner chunks
/// of a shard) as one GET. Plain data, serialized with the read options.
///
/// ```
/// use zarrow::{FetchOptions, ZarrReadOptions};
///
/// let mut fetch = FetchOptions::default();
/// fetch.set("range_split_bytes", "4194304")?;
/// fetch.set("coalesce_bytes", "0")?; // merge only touching ranges
/// assert_eq!(fetch.range_split_bytes, 4 << 20);
/// assert!(fetch.set("coalesce_bytes", "-1").is_err());
/// assert!(fetch.set("prefetch", "1").is_err());
/// let options = ZarrReadOptions::default().with_fetch(fetch);
/// assert_eq!(options.fetch.coalesce_bytes, 0);
/// # Ok::<(), zarrow::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct FetchOptions {
    /// A read of more than this many bytes is split into ranged GETs of at most this size,
    /// up to `concurrency` of them in flight (default [`DEFAULT_RANGE_SPLIT_BYTES`]; 0: never
    /// split). The object's size comes from the first response (or the shard index), is held
    /// to the chunk's limit, and the parts are assembled into one buffer of that size.
    pub range_split_bytes: u64,
    /// Ranges of one object at most this many bytes apart are read by one GET and sliced
    /// (default [`DEFAULT_COALESCE_BYTES`]; 0: only touching ranges are merged).
    pub coalesce_bytes: u64,
}

impl Default for FetchOptions {
    fn default() -> Self {
        FetchOptions {
            range_split_bytes: DEFAULT_RANGE_SPLIT_BYTES,
            coalesce_bytes: DEFAULT_COALESCE_BYTES,
        }
    }
}

impl FetchOptions {
    /// Set the option named `key` (`range_split_bytes` or `coalesce_bytes`) to `value`, a number of bytes; an
    /// error names the key and the value.
    pub fn set(&mut self, key: &str, value: &str) -> Result<()> {
        let invalid = |message: String| Error::invalid_option(key, message);
        let bytes = value
            .trim()
            .parse::<u64>()
            .map_err(|_| invalid(format!("expected a number of bytes, found '{value}'")))?;
        match key {
            "range_split_bytes" => self.range_split_bytes = bytes,
            "coalesce_bytes" => self.coalesce_bytes = bytes,
            _ => return Err(invalid("not a fetch option".into())),
        }
        Ok(())
    }
}

/// The most zarrow allocates for a size it reads from a store (a metadata document, a data
/// type's element, a chunk's headers): anything claiming more is a typed error, never an
/// allocation. Plain data, serialized with the read options: a scan run by a Ballista
/// executor or a Python worker holds to the limits of the client that planned it.
///
/// The library never reads these from the environment on its own; [`ReadLimits::from_env`]
/// is what the CLI and the Python package call at their edge (`ZARROW_MAX_ITEM_BYTES`,
/// `ZARROW_MAX_CHUNK_BYTES`, `ZARROW_MAX_METADATA_BYTES`).
///
/// ```
/// use zarrow::{ReadLimits, ZarrReadOptions};
///
/// let mut limits = ReadLimits::default();
/// limits.set("max_chunk_bytes", "1048576").unwrap();
/// let options = ZarrReadOptions::default().with_limits(limits);
/// assert_eq!(options.limits.max_chunk_bytes, 1 << 20);
/// assert!(limits.set("max_chunk_bytes", "a lot").is_err());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct ReadLimits {
    /// The largest element (string, bytes, fixed-size item) read, in bytes (default
    /// [`DEFAULT_MAX_ITEM_BYTES`], 16 MiB; at most
    /// [`MAX_ITEM_BYTES`], numpy's own limit).
    pub max_item_bytes: usize,
    /// The largest decoded variable-length chunk, in bytes (default 2 GiB): a chunk whose
    /// headers claim more is an error, not an allocation.
    pub max_chunk_bytes: usize,
    /// The largest metadata document (`zarr.json`, `.zmetadata`, …) read, in bytes (default
    /// [`DEFAULT_MAX_METADATA_BYTES`], 256 MiB).
    pub max_metadata_bytes: u64,
}

impl Default for ReadLimits {
    fn default() -> Self {
        ReadLimits {
            max_item_bytes: DEFAULT_MAX_ITEM_BYTES,
            max_chunk_bytes: DEFAULT_MAX_CHUNK_BYTES,
            max_metadata_bytes: DEFAULT_MAX_METADATA_BYTES,
        }
    }
}

impl ReadLimits {
    /// The item limit in force: [`Self::max_item_bytes`], never past numpy's
    /// [`MAX_ITEM_BYTES`].
    pub fn item_bytes(&self) -> usize {
        self.max_item_bytes.min(MAX_ITEM_BYTES)
    }

    /// Set the limit named `key` (`max_item_bytes`, `max_chunk_bytes` or
    /// `max_metadata_bytes`) to `value`, a number of bytes; an
    /// error names the key and the value.
    pub fn set(&mut self, key: &str, value: &str) -> Result<()> {
        self.set_named(key, key, value)
    }

    /// [`Self::set`], errors naming the setting `name` (an environment variable).
    fn set_named(&mut self, key: &str, name: &str, value: &str) -> Result<()> {
        let invalid = |message: String| Error::invalid_option(name, message);
        let bytes = value
            .trim()
            .parse::<u64>()
            .map_err(|_| invalid(format!("expected a number of bytes, found '{value}'")))?;
        let size = || {
            usize::try_from(bytes)
                .map_err(|_| invalid(format!("{bytes} bytes do not fit this platform's memory")))
        };
        match key {
            "max_item_bytes" => self.max_item_bytes = size()?,
            "max_chunk_bytes" => self.max_chunk_bytes = size()?,
            "max_metadata_bytes" => self.max_metadata_bytes = bytes,
            _ => return Err(invalid("not a read limit".into())),
        }
        Ok(())
    }

    /// The defaults with the limits the environment sets (`ZARROW_MAX_ITEM_BYTES`, …; see
    /// [`keys::OPTION_KEYS`]) applied; a variable that is not a number of bytes is an error
    /// naming it. Only the edges (the CLI, Python) call this.
    pub fn from_env() -> Result<Self> {
        let mut limits = ReadLimits::default();
        for (key, value) in keys::env_values(|o| o.group == keys::Group::Limit) {
            let var = option_key(&key).and_then(|o| o.env).unwrap_or_default();
            limits.set_named(&key, var, &value)?;
        }
        Ok(limits)
    }
}

impl ZarrReadOptions {
    /// Set the string representation.
    pub fn with_string_type(mut self, t: StringType) -> Self {
        self.string_type = t;
        self
    }

    /// Set the number of concurrent chunk reads.
    pub fn with_concurrency(mut self, n: usize) -> Self {
        self.concurrency = n.max(1);
        self
    }

    /// Set the limits (see [`ReadLimits`]).
    pub fn with_limits(mut self, limits: ReadLimits) -> Self {
        self.limits = limits;
        self
    }

    /// Set how reads are split and merged (see [`FetchOptions`]).
    pub fn with_fetch(mut self, fetch: FetchOptions) -> Self {
        self.fetch = fetch;
        self
    }

    /// The binary representation that goes with the string type.
    pub fn binary_type(&self) -> BinaryType {
        self.string_type.binary()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bad_string_type_is_an_option_error() {
        assert_eq!(StringType::parse("Large").unwrap(), StringType::LargeUtf8);
        let e = StringType::parse("utf9").unwrap_err();
        assert!(
            matches!(&e, Error::InvalidOption { key, message }
                if key == "string_type" && message.contains("'utf9'")),
            "{e:?}"
        );
        assert_eq!(
            e.to_string(),
            "option 'string_type': string type 'utf9': expected utf8, large_utf8 or view"
        );
    }
}

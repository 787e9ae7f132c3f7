//! Reader options: which Arrow representation strings and bytes take, and I/O limits.

use arrow_schema::DataType as ArrowType;
use serde::{Deserialize, Serialize};

use crate::{Error, Result};

/// The Arrow type string arrays are read as.
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
                return Err(Error::InvalidArgument(format!(
                    "string type '{other}': expected utf8, large_utf8 or view"
                )))
            }
        };
        t.check_available()?;
        Ok(t)
    }

    /// Fails for `View` when zarrow was built without the `utf8view` feature.
    pub fn check_available(self) -> Result<()> {
        if self == StringType::View && !cfg!(feature = "utf8view") {
            return Err(Error::InvalidArgument(
                "Utf8View output needs zarrow built with the `utf8view` cargo feature".into(),
            ));
        }
        Ok(())
    }
}

/// The Arrow type variable-length bytes are read as.
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

/// Options for reading arrays.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ZarrReadOptions {
    /// How strings are represented (default `Utf8`). Bytes follow: Binary, LargeBinary, BinaryView.
    pub string_type: StringType,
    /// How many chunk reads are in flight at once (default 8).
    pub concurrency: usize,
    /// The largest decoded variable-length chunk accepted, in bytes (default 2 GiB, or
    /// `ZARROW_MAX_CHUNK_BYTES`): a chunk whose headers claim more is an error, not an
    /// allocation.
    pub max_chunk_bytes: usize,
}

/// The default of [`ZarrReadOptions::max_chunk_bytes`].
pub const DEFAULT_MAX_CHUNK_BYTES: usize = 2 << 30;

impl Default for ZarrReadOptions {
    fn default() -> Self {
        ZarrReadOptions {
            string_type: StringType::Utf8,
            concurrency: 8,
            max_chunk_bytes: std::env::var("ZARROW_MAX_CHUNK_BYTES")
                .ok()
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or(DEFAULT_MAX_CHUNK_BYTES),
        }
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

    /// The binary representation that goes with the string type.
    pub fn binary_type(&self) -> BinaryType {
        self.string_type.binary()
    }
}

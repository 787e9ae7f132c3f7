//! The options of a table write ([`TableWriteOptions`]), and their parsing from the
//! `key = value` strings that SQL (`COPY … OPTIONS (…)`), the CLI (`--option k=v`) and Python
//! (`**options`) pass: unknown keys and bad values are errors that list what is valid.

use super::chunk::VlenEncoding;
use crate::codec::compression::BytesToBytes;
use crate::{Error, Result};

/// How a table is laid out in the store.
///
/// ```
/// use std::sync::Arc;
///
/// use arrow_array::{RecordBatch, StringArray, UInt32Array};
/// use arrow_schema::{DataType, Field, Schema};
/// use zarrow::write::Layout;
/// use zarrow::{write_table, Node, TableWriteOptions, ZarrStore};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let schema = Arc::new(Schema::new(vec![
///     Field::new("barcode", DataType::Utf8, false),
///     Field::new("n_genes", DataType::UInt32, false),
/// ]));
/// let batch = RecordBatch::try_new(
///     schema.clone(),
///     vec![
///         Arc::new(StringArray::from(vec!["AAAC", "AAAG"])),
///         Arc::new(UInt32Array::from(vec![812, 1033])),
///     ],
/// )?;
/// // An AnnData `obs` dataframe, indexed by the barcodes.
/// let options = TableWriteOptions {
///     layout: Layout::AnnData,
///     index: Some("barcode".into()),
///     ..Default::default()
/// };
/// let store = ZarrStore::open("memory:///adata.zarr/obs")?;
/// write_table(store, schema, futures::stream::iter([Ok(batch)]), options).await?;
///
/// let Node::Group(obs) = Node::open("memory:///adata.zarr/obs").await? else {
///     panic!("a dataframe is a group");
/// };
/// let attributes = &obs.metadata().attributes;
/// assert_eq!(attributes["encoding-type"], "dataframe");
/// assert_eq!(attributes["_index"], "barcode");
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Layout {
    /// A group of 1-D arrays, one per column, sharing one dimension (what xarray writes for a
    /// Dataset with one dimension).
    #[default]
    Xarray,
    /// An AnnData dataframe (`encoding-type: dataframe`, `_index`, `column-order`).
    AnnData,
}

/// The options of a table write. Build with [`Default`] and the setters, or from strings with
/// [`TableWriteOptions::from_pairs`].
///
/// ```
/// use zarrow::{BytesToBytes, TableWriteOptions};
///
/// // As SQL's `COPY … OPTIONS (…)` gives them.
/// let pairs = [
///     ("chunk_rows", "1000"),
///     ("format.shard_rows", "10000"),
///     ("compression", "gzip(9)"),
/// ];
/// let options = TableWriteOptions::from_pairs(pairs)?;
/// assert_eq!((options.chunk_rows, options.shard_rows), (1000, Some(10_000)));
/// assert_eq!(options.compression, Some(BytesToBytes::Gzip { level: 9 }));
/// assert_eq!(options.unit_rows(), 10_000);
/// // Checked: a shard holds whole chunks; unknown keys are errors.
/// let ragged = [("chunk_rows", "300"), ("shard_rows", "1000")];
/// assert!(TableWriteOptions::from_pairs(ragged).is_err());
/// assert!(TableWriteOptions::from_pairs([("chunk_size", "1")]).is_err());
/// # Ok::<(), zarrow::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct TableWriteOptions {
    /// Rows per chunk (default 262144).
    pub chunk_rows: u64,
    /// Rows per shard (`sharding_indexed`, zarr v3 only): a multiple of `chunk_rows`.
    pub shard_rows: Option<u64>,
    /// Compression of every chunk (default zstd level 3); `None` for none.
    pub compression: Option<BytesToBytes>,
    /// The chunk encoding of string and binary columns (default `vlen-utf8`/`vlen-bytes`).
    pub string_encoding: VlenEncoding,
    /// 2 or 3 (default 3).
    pub zarr_format: u8,
    /// The layout (default [`Layout::Xarray`]).
    pub layout: Layout,
    /// The name of the shared dimension (default `dim_0`; the AnnData layout has none).
    pub dimension: String,
    /// The AnnData layout's index column (a string column; default: a generated `_index` of
    /// row numbers).
    pub index: Option<String>,
    /// Replace the zarr store at the location (default: an existing location is an error;
    /// anything but a zarr store is refused even with it).
    pub overwrite: bool,
    /// When another writer's stale lock may be broken (`break_stale_lock`,
    /// `stale_lock_seconds`; see docs/writing.md).
    pub lock: crate::write::LockPolicy,
    /// The memory one unit of rows (a chunk, or a shard, of every column) may take, in bytes
    /// (`COPY` sets it to its session's memory limit): a larger unit is refused before
    /// anything is written. `None`: only [`MAX_UNIT_ELEMENTS`] bounds it. Not a string option.
    pub memory_budget: Option<u64>,
    /// Icechunk locations: create the repository when there is none (`create_repository`;
    /// default: a missing repository is an error). Refused on other locations.
    pub create_repository: bool,
    /// Icechunk locations: the commit's message (`commit_message`; default: zarrow says
    /// what it wrote, `zarrow COPY: 10 rows to /obs`). Refused on other locations.
    pub commit_message: Option<String>,
}

impl Default for TableWriteOptions {
    fn default() -> Self {
        Self {
            chunk_rows: DEFAULT_CHUNK_ROWS,
            shard_rows: None,
            compression: Some(BytesToBytes::Zstd {
                level: 3,
                checksum: false,
            }),
            string_encoding: VlenEncoding::Numcodecs,
            zarr_format: 3,
            layout: Layout::Xarray,
            dimension: DEFAULT_DIMENSION.into(),
            index: None,
            overwrite: false,
            lock: crate::write::LockPolicy::default(),
            memory_budget: None,
            create_repository: false,
            commit_message: None,
        }
    }
}

/// The default name of the xarray layout's dimension.
pub const DEFAULT_DIMENSION: &str = "dim_0";

/// The default rows per chunk.
pub const DEFAULT_CHUNK_ROWS: u64 = 1 << 18;

/// The most rows of a chunk or a shard (2^31): a unit is buffered, encoded and padded in
/// memory whole.
pub const MAX_UNIT_ELEMENTS: u64 = 1 << 31;

/// An option key as compared: trimmed, lower case, without a `format.` prefix.
pub fn option_key(key: &str) -> String {
    let lower = key.trim().to_ascii_lowercase();
    match lower.strip_prefix("format.") {
        Some(bare) => bare.to_string(),
        None => lower,
    }
}

/// The error of an option given twice.
pub fn duplicate_key(key: &str) -> Error {
    Error::invalid_option(
        key,
        format!(
            "'{}' is given twice; give each option once",
            option_key(key)
        ),
    )
}

/// The option keys [`TableWriteOptions::from_pairs`] accepts.
pub const WRITE_OPTION_KEYS: &[&str] = &[
    "chunk_rows",
    "shard_rows",
    "compression",
    "string_encoding",
    "zarr_format",
    "layout",
    "dimension",
    "index",
    "overwrite",
    "break_stale_lock",
    "stale_lock_seconds",
    "create_repository",
    "commit_message",
];

fn bad(key: &str, value: &str, expected: &str) -> Error {
    Error::invalid_option(key, format!("expected {expected}, found '{value}'"))
}

/// A true/false option's value.
fn flag(key: &str, value: &str) -> Result<bool> {
    match value.trim().to_ascii_lowercase().as_str() {
        "true" | "1" | "yes" | "on" => Ok(true),
        "false" | "0" | "no" | "off" => Ok(false),
        _ => Err(bad(key, value, "true or false")),
    }
}

fn positive(key: &str, value: &str) -> Result<u64> {
    value
        .trim()
        .replace('_', "")
        .parse::<u64>()
        .ok()
        .filter(|n| *n > 0)
        .ok_or_else(|| bad(key, value, "a positive integer"))
}

/// `zstd`, `zstd(5)`, `gzip`, `gzip(9)`, `none` (also `uncompressed`).
fn compression(value: &str) -> Result<Option<BytesToBytes>> {
    let v = value.trim().to_ascii_lowercase();
    let (name, level) = match v.split_once('(') {
        Some((name, rest)) => (
            name.trim(),
            Some(
                rest.strip_suffix(')')
                    .ok_or_else(|| bad("compression", value, "zstd(LEVEL) or gzip(LEVEL)"))?
                    .trim(),
            ),
        ),
        None => (v.as_str(), None),
    };
    let expected = "none, zstd, zstd(-7..22), gzip or gzip(0..9)";
    Ok(match (name, level) {
        ("none" | "uncompressed", None) => None,
        ("zstd", level) => Some(BytesToBytes::Zstd {
            level: match level {
                None => 3,
                Some(l) => l
                    .parse::<i32>()
                    .ok()
                    .filter(|l| (-7..=22).contains(l))
                    .ok_or_else(|| bad("compression", value, expected))?,
            },
            checksum: false,
        }),
        ("gzip", level) => Some(BytesToBytes::Gzip {
            level: match level {
                None => 6,
                Some(l) => l
                    .parse::<u32>()
                    .ok()
                    .filter(|l| *l <= 9)
                    .ok_or_else(|| bad("compression", value, expected))?,
            },
        }),
        _ => return Err(bad("compression", value, expected)),
    })
}

impl TableWriteOptions {
    /// Options from `key = value` pairs (keys are case-insensitive; a `format.` prefix, as
    /// DataFusion's `COPY` may pass, is ignored). Unknown keys and bad values are errors.
    ///
    /// A key given twice (`chunk_rows` and `format.chunk_rows` included) is an error: which
    /// one was meant is not known.
    pub fn from_pairs<'a>(pairs: impl IntoIterator<Item = (&'a str, &'a str)>) -> Result<Self> {
        let mut o = Self::default();
        let mut seen = std::collections::HashSet::new();
        for (key, value) in pairs {
            if !seen.insert(option_key(key)) {
                return Err(duplicate_key(key));
            }
            o.set(key, value)?;
        }
        o.validate()?;
        Ok(o)
    }

    /// Set one option from its string form.
    pub fn set(&mut self, key: &str, value: &str) -> Result<()> {
        let lower = option_key(key);
        let bare = lower.as_str();
        let v = value.trim();
        match bare {
            "chunk_rows" => self.chunk_rows = positive(bare, v)?,
            "shard_rows" => self.shard_rows = Some(positive(bare, v)?),
            "compression" => self.compression = compression(v)?,
            "string_encoding" => {
                self.string_encoding = match v.to_ascii_lowercase().replace('_', "-").as_str() {
                    "vlen-utf8" | "vlen-bytes" | "vlen" | "numcodecs" => VlenEncoding::Numcodecs,
                    "arrow-vlen" | "zarrow.arrow-vlen" => VlenEncoding::ArrowVlen { large: false },
                    "arrow-vlen-large" => VlenEncoding::ArrowVlen { large: true },
                    _ => {
                        return Err(bad(
                            bare,
                            value,
                            "vlen-utf8, arrow_vlen or arrow_vlen_large",
                        ))
                    }
                }
            }
            "zarr_format" => {
                self.zarr_format = match v {
                    "2" => 2,
                    "3" => 3,
                    _ => return Err(bad(bare, value, "2 or 3")),
                }
            }
            "layout" => {
                self.layout = match v.to_ascii_lowercase().as_str() {
                    "xarray" | "default" | "group" => Layout::Xarray,
                    "anndata" => Layout::AnnData,
                    _ => return Err(bad(bare, value, "xarray or anndata")),
                }
            }
            "dimension" => {
                crate::write::check_name("dimension", v)?;
                self.dimension = v.to_string();
            }
            "index" => {
                crate::write::check_name("index column", v)?;
                self.index = Some(v.to_string());
            }
            "overwrite" => self.overwrite = flag(bare, value)?,
            "break_stale_lock" => self.lock.break_stale = flag(bare, value)?,
            "create_repository" => self.create_repository = flag(bare, value)?,
            "commit_message" => self.commit_message = Some(value.to_string()),
            "stale_lock_seconds" => {
                self.lock.stale_after = std::time::Duration::from_secs(positive(bare, v)?)
            }
            _ => {
                return Err(Error::invalid_option(
                    key,
                    format!(
                        "unknown zarr write option '{key}'; valid options: {}",
                        WRITE_OPTION_KEYS.join(", ")
                    ),
                ))
            }
        }
        Ok(())
    }

    /// Check the options together (shards are a multiple of chunks and need zarr v3; the
    /// Arrow layout of strings needs zarr v3).
    ///
    /// A chunk or a shard of more than [`MAX_UNIT_ELEMENTS`] rows is refused: a unit is
    /// buffered and encoded whole, so its size is memory (whether it fits a given memory
    /// budget is checked when the writer is made, against its `memory_budget`).
    pub fn validate(&self) -> Result<()> {
        for (key, rows) in [
            ("chunk_rows", Some(self.chunk_rows)),
            ("shard_rows", self.shard_rows),
        ] {
            if let Some(rows) = rows.filter(|r| *r > MAX_UNIT_ELEMENTS) {
                return Err(Error::invalid_option(
                    key,
                    format!(
                        "{rows} rows: a chunk or shard is held in memory whole; at most \
                         {MAX_UNIT_ELEMENTS} (2^31) rows"
                    ),
                ));
            }
        }
        if let Some(shard) = self.shard_rows {
            if shard % self.chunk_rows != 0 {
                return Err(Error::invalid_option(
                    "shard_rows",
                    format!(
                        "{shard} is not a multiple of chunk_rows = {}",
                        self.chunk_rows
                    ),
                ));
            }
            if self.zarr_format == 2 {
                return Err(Error::invalid_option(
                    "shard_rows",
                    "needs zarr_format 3 (zarr v2 has no sharding)",
                ));
            }
        }
        if self.index.is_some() && self.layout != Layout::AnnData {
            return Err(Error::invalid_option(
                "index",
                "needs layout anndata (the xarray layout has no index)",
            ));
        }
        if self.zarr_format == 2 && matches!(self.string_encoding, VlenEncoding::ArrowVlen { .. }) {
            return Err(Error::invalid_option(
                "string_encoding",
                "arrow_vlen needs zarr_format 3",
            ));
        }
        Ok(())
    }

    /// Rows written as one unit (a shard, or a chunk without sharding).
    pub fn unit_rows(&self) -> u64 {
        self.shard_rows.unwrap_or(self.chunk_rows)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_rejects() {
        let o = TableWriteOptions::from_pairs([
            ("format.chunk_rows", "1000"),
            ("SHARD_ROWS", "4000"),
            ("compression", "zstd(7)"),
            ("string_encoding", "arrow_vlen"),
            ("overwrite", "true"),
            ("dimension", "obs"),
        ])
        .unwrap();
        assert_eq!(o.chunk_rows, 1000);
        assert_eq!(o.unit_rows(), 4000);
        assert_eq!(
            o.compression,
            Some(BytesToBytes::Zstd {
                level: 7,
                checksum: false
            })
        );
        assert!(o.overwrite);
        let e = TableWriteOptions::from_pairs([("chunk_size", "1")]).unwrap_err();
        assert!(e.to_string().contains("chunk_size") && e.to_string().contains("chunk_rows"));
        assert!(
            matches!(&e, Error::InvalidOption { key, .. } if key == "chunk_size"),
            "{e:?}"
        );
        for (k, v) in [
            ("chunk_rows", "0"),
            ("compression", "lz5"),
            ("compression", "zstd(99)"),
            ("zarr_format", "4"),
            ("dimension", "a/b"),
        ] {
            assert!(TableWriteOptions::from_pairs([(k, v)]).is_err(), "{k}={v}");
        }
        // Options that do not fit together: the error names the one to change.
        let refused =
            |pairs: &[(&str, &str)]| match TableWriteOptions::from_pairs(pairs.iter().copied()) {
                Err(Error::InvalidOption { key, .. }) => key,
                other => panic!("{pairs:?}: {other:?}"),
            };
        assert_eq!(
            refused(&[("chunk_rows", "3"), ("shard_rows", "10")]),
            "shard_rows"
        );
        assert_eq!(
            refused(&[("zarr_format", "2"), ("shard_rows", "10")]),
            "shard_rows"
        );
        assert_eq!(refused(&[("index", "id")]), "index");
        let o = TableWriteOptions::from_pairs([("layout", "anndata"), ("index", "id")]).unwrap();
        assert_eq!(o.index.as_deref(), Some("id"));
    }
}

//! Zarr nodes as tables: which arrays become which columns, and how they are read. Knows
//! nothing of DataFusion (zarrow-datafusion translates) and nothing of how rows are streamed
//! (see [`crate::ZarrScan`]).
//!
//! ```text
//!  Node ─▶ TableModel::from_node (model.rs) picks the table kind:
//!    Node::Array ─▶ array.rs: index columns (dim names / dim_i) + the value column
//!    sparse matrix group (AnnData csr/csc) ─▶ sparse.rs: the same columns over the stored
//!                                             elements
//!    Node::Group ─▶ group.rs: members (child arrays, AnnData encoded groups: anndata.rs)
//!                   over the dims of the members with the most dims: per dim a coordinate
//!                   or an Int64 index, then every member whose dims ⊆ the table's, broadcast
//!  TableModel: pure description (dims, TableColumn + ColumnSource: column.rs, chunk grid)
//!    ─▶ TableReader (read/): one ColumnReader per column, what the scan reads chunks with
//! ```
//!
//! Rows are the cells of the table's dimensions; they come out chunk by chunk, over the chunk
//! grid of a "driver" array (the first column that spans every table dimension), so that the
//! driver's chunks are read exactly once and whole. The kernels that lay values out (index
//! values, broadcast) are `layout.rs`; the CF conventions `cf.rs`.

mod anndata;
mod array;
mod cf;
mod column;
mod group;
mod layout;
mod model;
pub(crate) mod read;
mod sparse;

pub use column::TableColumn;
pub use model::TableModel;
pub use read::{MajorOffsets, TableReader};

pub(crate) use column::ColumnSource;

use serde::{Deserialize, Serialize};

use crate::options::{StringType, ZarrReadOptions};
use crate::remote::RemoteOptions;
use crate::{Error, Result};

/// How a node becomes a table.
///
/// ```
/// use zarrow::{TableModel, TableOptions};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let sample = concat!(env!("CARGO_MANIFEST_DIR"), "/../../data/pbmc_sample.zarr");
/// // Only some members of a group (the index of its dimension comes anyway).
/// let options = TableOptions {
///     arrays: Some(vec!["n_genes".into()]),
///     ..Default::default()
/// };
/// let obs = TableModel::open(&format!("{sample}/obs"), options.clone()).await?;
/// assert!(obs.column_index("n_genes").is_ok());
/// assert!(obs.column_index("pct_mito").is_err());
/// // The option chooses a group's members: for an array it is an error.
/// assert!(TableModel::open(&format!("{sample}/X"), options.clone()).await.is_err());
///
/// // Plain data: a scan carries its options as JSON.
/// let json = serde_json::to_string(&options)?;
/// assert_eq!(serde_json::from_str::<TableOptions>(&json)?, options);
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct TableOptions {
    /// Reader options (string type, concurrency).
    pub read: ZarrReadOptions,
    /// Elements equal to the array's fill value become NULL. An array without one (a v2
    /// `"fill_value": null`, as zarr-python 2 writes object arrays) has no NULLs by this.
    pub fill_as_null: bool,
    /// Apply the CF conventions (time units → Timestamp, scale_factor/add_offset,
    /// `_FillValue`/`missing_value` → NULL).
    pub decode_cf: bool,
    /// For a group: build the table from these child arrays only (coordinates of the table's
    /// dimensions are added anyway).
    pub arrays: Option<Vec<String>>,
    /// String and binary columns read as Arrow dictionaries (`Int32` keys into each batch's
    /// distinct values): what a low-cardinality column groups and joins fastest as.
    pub dictionary: Option<Vec<String>>,
    /// Timeouts and retries of a remote store (see [`crate::RemoteOptions`]).
    pub remote: RemoteOptions,
}

impl TableOptions {
    /// Set the read option `key` (a key of [`crate::options::OPTION_KEYS`] that a table or a
    /// session takes, but not the DataFusion session's or a written table's own) from its
    /// text: the one parser of table options, which SQL's `OPTIONS (…)`, `SET zarrow.<key>`,
    /// the CLI's `--option` and Python go through. An error names the key; an unknown key's
    /// lists the valid ones.
    ///
    /// ```
    /// use zarrow::table::TableOptions;
    ///
    /// let mut options = TableOptions::default();
    /// options.set("fill_as_null", "yes")?;
    /// options.set("arrays", "temperature, flag")?;
    /// options.set("max_chunk_bytes", "1048576")?;
    /// options.set("timeout", "5s")?;
    /// assert!(options.fill_as_null);
    /// assert_eq!(options.arrays.as_deref(), Some(&["temperature".into(), "flag".into()][..]));
    /// assert_eq!(options.read.limits.max_chunk_bytes, 1 << 20);
    /// let unknown = options.set("bogus", "1").unwrap_err().to_string();
    /// assert!(unknown.contains("string_type, fill_as_null"), "{unknown}");
    /// # Ok::<(), zarrow::Error>(())
    /// ```
    pub fn set(&mut self, key: &str, value: &str) -> Result<()> {
        use crate::options::keys::{option_key, parse_bool, table_keys, Group};
        match (key, option_key(key).map(|o| o.group)) {
            ("string_type", _) => self.read.string_type = StringType::parse(value.trim())?,
            ("fill_as_null", _) => self.fill_as_null = parse_bool(key, value)?,
            ("decode_cf", _) => self.decode_cf = parse_bool(key, value)?,
            ("arrays", _) => self.arrays = names(value),
            ("dictionary", _) => self.dictionary = names(value),
            ("concurrency", _) => match value.trim().parse::<usize>() {
                Ok(n) if n > 0 => self.read.concurrency = n,
                _ => {
                    return Err(Error::invalid_option(
                        key,
                        format!("expected a number of reads, at least 1, found '{value}'"),
                    ))
                }
            },
            (_, Some(Group::Remote)) => self.remote.set(key, value)?,
            (_, Some(Group::Limit)) => self.read.limits.set(key, value)?,
            (_, Some(Group::Fetch)) => self.read.fetch.set(key, value)?,
            _ => {
                return Err(Error::invalid_option(
                    key,
                    format!(
                        "unknown zarr table option; expected one of {}",
                        table_keys()
                    ),
                ))
            }
        }
        Ok(())
    }

    /// Whether the `dictionary` option names column `name`.
    pub(crate) fn names_dictionary(&self, name: &str) -> bool {
        (self.dictionary.iter().flatten()).any(|n| n == name)
    }

    /// Refuses the `arrays` option for the node at `path`, which is `what` (an array, a sparse
    /// matrix): the option chooses a group's members.
    fn refuse_arrays(&self, path: &str, what: &str) -> Result<()> {
        if self.arrays.is_none() {
            return Ok(());
        }
        Err(Error::invalid_option(
            "arrays",
            format!("'{path}' is {what}: the `arrays` option only applies to groups"),
        ))
    }
}

/// The names of a comma-separated list (blanks dropped); none if it names none.
fn names(value: &str) -> Option<Vec<String>> {
    let names: Vec<String> = value
        .split(',')
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .collect();
    (!names.is_empty()).then_some(names)
}

/// The Arrow field metadata key that says what a column is to the table it was read from, so
/// that writing the rows back (`COPY`, `write_table`) gives the same table: `position` (the
/// row position along a one-dimensional table's dimension, which is not stored: the writer
/// leaves it out) or `index` (an AnnData dataframe's index, which `layout 'anndata'` makes the
/// index again).
pub const ROLE_KEY: &str = "zarrow.role";
/// The field metadata key naming a `position` column's dimension (the xarray layout writes
/// over it unless the `dimension` option says otherwise).
pub const DIMENSION_KEY: &str = "zarrow.dimension";
/// The field metadata key with the AnnData `encoding-type` of a column read from a plain
/// array that has one (`array`, `string-array`): `layout 'anndata'` writes it as such an array
/// again, not as a nullable (masked) one.
pub const ENCODING_KEY: &str = "zarrow.encoding-type";
/// The array attribute with a timestamp column's time zone (the elements are UTC instants):
/// the column reads as `Timestamp(unit, zone)`.
pub const TIMEZONE_ATTRIBUTE: &str = "zarrow.timezone";

/// The array attribute by which zarrow's writer declares that the array's NULLs are stored as
/// its fill value (`"zarrow.nulls": "fill_value"`; integer columns with NULLs, whose fill value
/// is also their `_FillValue`): zarrow reads those elements as NULL whatever `fill_as_null`
/// says, so what it wrote reads back the same.
pub const NULLS_ATTRIBUTE: &str = "zarrow.nulls";

/// Whether `attributes` (an array's) declare its NULLs stored as its fill value
/// ([`NULLS_ATTRIBUTE`]).
pub(crate) fn declares_nulls(attributes: &serde_json::Map<String, serde_json::Value>) -> bool {
    attributes.get(NULLS_ATTRIBUTE).and_then(|v| v.as_str()) == Some("fill_value")
}

/// Whether `field` is a row position column zarrow's reader made ([`ROLE_KEY`] `position`).
pub fn is_position(field: &arrow_schema::Field) -> bool {
    field.metadata().get(ROLE_KEY).map(String::as_str) == Some("position")
}

/// Whether `field` is an AnnData dataframe's index as zarrow's reader gives it.
pub fn is_anndata_index(field: &arrow_schema::Field) -> bool {
    field.metadata().get(ROLE_KEY).map(String::as_str) == Some("index")
}

/// The value column's name for a node named `name`: the name, or `value` for a store's root
/// (`x.zarr`, or no name at all).
fn value_column_name(name: &str) -> String {
    if name.is_empty() || name.to_ascii_lowercase().ends_with(".zarr") {
        "value".to_string()
    } else {
        name.to_string()
    }
}

/// A dimension's column name: `dim`, or `<dim>_index` where it would take the value column's.
fn dim_column_name(dim: String, value: &str) -> String {
    if dim == value {
        format!("{dim}_index")
    } else {
        dim
    }
}

/// One dimension of a table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableDimension {
    /// Its name (`dim_i` when unnamed).
    pub name: String,
    /// Its length.
    pub size: u64,
}

/// What a column holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ColumnRole {
    /// The Int64 position along table dimension `.0`.
    Index(usize),
    /// A 1-D array along table dimension `.0` (its coordinate values).
    Coordinate(usize),
    /// An array over the table dimensions listed (array dimension `i` is table dimension
    /// `dims[i]`), broadcast along the others.
    Data(Vec<usize>),
}

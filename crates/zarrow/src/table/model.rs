//! [`TableModel`]: a node as a table, described — its dimensions, columns, chunk grid and
//! options, pure data. Opening picks the table kind (`array.rs`, `group.rs`, `sparse.rs`);
//! reading is `read/`'s.

use std::collections::BTreeSet;
use std::sync::Arc;

use arrow_schema::{Field, Schema, SchemaRef};

use super::{anndata, array, group, sparse};
use super::{TableColumn, TableDimension, TableOptions};
use crate::grid::{ChunkGrid, ChunkRanges};
use crate::metrics::ScanMetrics;
use crate::node::Node;
use crate::options::ZarrReadOptions;
use crate::store::ZarrStore;
use crate::{Error, Result};

/// A zarr array or group as a table (see the module docs).
///
/// ```
/// use zarrow::{TableModel, TableOptions};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let sample = concat!(env!("CARGO_MANIFEST_DIR"), "/../../data/pbmc_sample.zarr");
/// let obs = TableModel::open(&format!("{sample}/obs"), TableOptions::default()).await?;
/// assert_eq!(obs.num_rows(), 2000);
/// assert_eq!(obs.dimensions().len(), 1);
/// assert!(obs.column_index("no_such_column").is_err());
/// // The table's chunks of rows, every one of them once.
/// let chunks = obs.all_chunks();
/// assert_eq!(chunks.len(), obs.grid().num_chunks());
/// assert_eq!(chunks.rows(obs.grid())?, 2000);
///
/// // An n-D array is a table too: a row per element, a column per dimension.
/// let x = TableModel::open(&format!("{sample}/X"), TableOptions::default()).await?;
/// assert_eq!(x.shape(), [2000, 200]);
/// assert_eq!(x.num_rows(), 2000 * 200);
/// assert_eq!(x.chunk_shape(), [250, 200]);
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct TableModel {
    location: String,
    schema: SchemaRef,
    dims: Vec<TableDimension>,
    grid: ChunkGrid,
    columns: Vec<TableColumn>,
    left_out: Vec<(String, String)>,
    options: TableOptions,
    /// What the metadata requests of its store (opening its nodes) counted into.
    metadata: ScanMetrics,
    /// The Icechunk snapshot the table was read at (`None`: not an Icechunk location).
    snapshot: Option<String>,
    /// Its store is the local file system: a read costs a copy, not a round trip.
    local: bool,
}

/// What a table kind makes of a node: the table's parts, before they are checked.
pub(super) struct TableParts {
    pub(super) location: String,
    pub(super) dims: Vec<TableDimension>,
    /// The driver's chunk grid (of read units), in table dimension order.
    pub(super) grid: ChunkGrid,
    pub(super) columns: Vec<TableColumn>,
    pub(super) left_out: Vec<(String, String)>,
}

impl TableModel {
    /// Open the node at `location` as a table.
    ///
    /// ```
    /// use zarrow::{TableModel, TableOptions};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> zarrow::Result<()> {
    /// let obs = concat!(env!("CARGO_MANIFEST_DIR"), "/../../data/pbmc_sample.zarr/obs");
    /// let mut options = TableOptions::default();
    /// options.set("string_type", "large_utf8")?;
    /// let model = TableModel::open(obs, options).await?;
    /// let batch = model.schema().field_with_name("batch")?.clone();
    /// assert_eq!(batch.data_type(), &arrow_schema::DataType::LargeUtf8);
    /// # Ok(())
    /// # }
    /// ```
    pub async fn open(location: &str, options: TableOptions) -> Result<Self> {
        let store = ZarrStore::open_configured(location, &[], &options.remote)?;
        Self::open_store(store, "", options).await
    }

    /// Open the node at the root of `store` as a table (`path` names it in messages), its
    /// metadata read under the limits of `options` ([`crate::ReadLimits`]).
    pub async fn open_store(store: ZarrStore, path: &str, options: TableOptions) -> Result<Self> {
        let node = Node::open_store(store.with_limits(options.read.limits), path).await?;
        Self::from_node(node, options).await
    }

    /// A table over an open node (its metadata was read under the limits of the store it
    /// was opened from: see [`Self::open_store`]).
    pub async fn from_node(node: Node, options: TableOptions) -> Result<Self> {
        options.read.string_type.check_available()?;
        let store = match &node {
            Node::Array(a) => a.store(),
            Node::Group(g) => g.store(),
        };
        let (metadata, snapshot) = (store.metrics().clone(), store.snapshot_id());
        let local = store.local_path().is_some();
        let parts = match node {
            Node::Array(a) => array::array_table(a, &options)?,
            Node::Group(g) => {
                anndata::check_table_group(&g)?;
                match sparse::open(&g).await? {
                    Some(matrix) => sparse::sparse_table(&g, matrix, &options)?,
                    None => group::group_table(g, &options).await?,
                }
            }
        };
        let mut model = Self::from_parts(parts, options)?;
        model.metadata = metadata;
        model.snapshot = snapshot;
        model.local = local;
        Ok(model)
    }

    /// The table of `parts`, checked: distinct column names, a number of rows that fits in
    /// 64 bits, a valid chunk grid.
    fn from_parts(parts: TableParts, options: TableOptions) -> Result<Self> {
        let TableParts {
            location,
            dims,
            grid,
            columns,
            mut left_out,
        } = parts;
        let mut seen = BTreeSet::new();
        for c in &columns {
            if !seen.insert(c.name.as_str()) {
                return Err(Error::table(
                    &location,
                    format!("'{location}': two columns would be named '{}'", c.name),
                ));
            }
        }
        left_out.sort();
        check_dictionary(&location, &columns, &options)?;
        if dims
            .iter()
            .try_fold(1u64, |acc, d| acc.checked_mul(d.size))
            .is_none()
        {
            let sizes: Vec<String> = dims.iter().map(|d| d.size.to_string()).collect();
            return Err(Error::table(
                &location,
                format!(
                    "'{location}': a table of {} rows has more than 2^64 rows",
                    sizes.join(" × ")
                ),
            ));
        }
        let shape: Vec<u64> = dims.iter().map(|d| d.size).collect();
        if grid.shape() != shape {
            return Err(Error::table(
                &location,
                format!(
                    "'{location}': the chunk grid covers {:?}, the table is {shape:?}",
                    grid.shape()
                ),
            ));
        }
        Ok(TableModel {
            location,
            schema: Self::schema_of(&columns, &dims, &options),
            dims,
            grid,
            columns,
            left_out,
            options,
            metadata: ScanMetrics::default(),
            snapshot: None,
            local: false,
        })
    }

    /// The schema of `columns`, each field marked with what the column is (see
    /// [`super::ROLE_KEY`]) where writing it back must know.
    fn schema_of(
        columns: &[TableColumn],
        dims: &[TableDimension],
        options: &TableOptions,
    ) -> SchemaRef {
        use super::{ColumnRole, DIMENSION_KEY, ENCODING_KEY, ROLE_KEY};
        let one_dim = dims.len() == 1;
        // A one-dimensional group table with both a coordinate and the row position is an
        // AnnData dataframe: the coordinate is its index.
        let frame = one_dim
            && columns
                .iter()
                .any(|c| matches!(c.role, ColumnRole::Index(_)))
            && columns
                .iter()
                .any(|c| matches!(c.role, ColumnRole::Coordinate(_)));
        let fields: Vec<Field> = columns
            .iter()
            .map(|c| {
                let field = c.field(options);
                let mut marks = std::collections::HashMap::new();
                match c.role {
                    ColumnRole::Index(d) if one_dim => {
                        marks.insert(ROLE_KEY.to_string(), "position".to_string());
                        marks.insert(DIMENSION_KEY.to_string(), dims[d].name.clone());
                    }
                    ColumnRole::Coordinate(_) if frame => {
                        marks.insert(ROLE_KEY.to_string(), "index".to_string());
                    }
                    _ => {}
                }
                if let Some(encoding) = c.plain_encoding() {
                    marks.insert(ENCODING_KEY.to_string(), encoding);
                }
                match marks.is_empty() {
                    true => field,
                    false => field.with_metadata(marks),
                }
            })
            .collect();
        Arc::new(Schema::new(fields))
    }

    /// The metadata phase of the table: the requests its store made to open its nodes
    /// (documents read or found missing, listings), their bytes and time — counted into the
    /// metrics of the store it was opened from (see [`ZarrStore::with_metrics`]).
    pub fn metadata_counts(&self) -> crate::ScanCounts {
        self.metadata.counts()
    }

    /// Whether the table's store is the local file system (a read costs a copy, not a round
    /// trip: a scan fetches less ahead, see `scan/ahead.rs`).
    pub(crate) fn is_local(&self) -> bool {
        self.local
    }

    /// Whether the local table this model was read from was replaced since it was opened
    /// (another writer published a table at its location; see [`ZarrStore::replaced`]).
    ///
    /// [`ZarrStore::replaced`]: crate::ZarrStore::replaced
    pub fn replaced(&self) -> bool {
        let arrays = (self.columns.iter()).filter_map(|c| c.source_kind().main_array());
        arrays.take(1).any(|a| a.store().replaced())
    }

    /// The location the table was opened from.
    pub fn location(&self) -> &str {
        &self.location
    }

    /// The id of the Icechunk snapshot the table was read at (its branch or tag as it stood
    /// when the table was opened); `None` for a table that is not in an Icechunk repository.
    pub fn snapshot_id(&self) -> Option<&str> {
        self.snapshot.as_deref()
    }

    /// The Arrow schema of the rows.
    pub fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }

    /// The schema of a projection (indices into [`Self::schema`]).
    pub fn projected_schema(&self, projection: &[usize]) -> Result<SchemaRef> {
        Ok(Arc::new(self.schema.project(projection)?))
    }

    /// The table's dimensions.
    pub fn dimensions(&self) -> &[TableDimension] {
        &self.dims
    }

    /// The columns, in schema order.
    pub fn columns(&self) -> &[TableColumn] {
        &self.columns
    }

    /// Child arrays and groups that are not columns, with the reason.
    pub fn left_out(&self) -> &[(String, String)] {
        &self.left_out
    }

    /// The options the table was opened with.
    pub fn options(&self) -> &TableOptions {
        &self.options
    }

    /// The table's shape (one length per dimension).
    pub fn shape(&self) -> Vec<u64> {
        self.dims.iter().map(|d| d.size).collect()
    }

    /// The index of the column `name` in the schema; an error listing the columns if there is
    /// none.
    pub fn column_index(&self, name: &str) -> Result<usize> {
        self.schema
            .index_of(name)
            .map_err(|_| Error::ColumnNotFound {
                table: self.location.clone(),
                column: name.to_string(),
                columns: self
                    .schema
                    .fields()
                    .iter()
                    .map(|f| f.name().clone())
                    .collect(),
            })
    }

    /// The number of rows (checked to fit when the table was opened).
    pub fn num_rows(&self) -> u64 {
        self.dims.iter().map(|d| d.size).product()
    }

    /// The shape of one chunk of rows (the driver array's read unit, in table dimension order;
    /// for a rectilinear grid, the largest along each dimension).
    pub fn chunk_shape(&self) -> &[u64] {
        self.grid.chunk_shape()
    }

    /// The grid of chunks of rows.
    pub fn grid(&self) -> &ChunkGrid {
        &self.grid
    }

    /// The number of chunks per dimension.
    pub fn chunk_grid_shape(&self) -> Vec<u64> {
        self.grid.grid_shape()
    }

    /// Every chunk, as ranges over the grid.
    pub fn all_chunks(&self) -> ChunkRanges {
        ChunkRanges::all(&self.grid.grid_shape())
    }

    /// The box of rows of the chunk at `coords`: (start, shape) per dimension.
    pub fn chunk_region(&self, coords: &[u64]) -> Result<(Vec<u64>, Vec<u64>)> {
        self.grid
            .chunk_box(coords)
            .map_err(|e| e.in_array(&self.location))
    }

    /// The number of rows of the chunk at `coords`.
    pub fn chunk_rows(&self, coords: &[u64]) -> Result<u64> {
        self.grid
            .chunk_len(coords)
            .map_err(|e| e.in_array(&self.location))
    }

    /// The same table with other reader options (the string type changes the schema).
    pub fn with_read_options(&self, read: ZarrReadOptions) -> Result<Self> {
        read.string_type.check_available()?;
        let options = TableOptions {
            read,
            ..self.options.clone()
        };
        Ok(TableModel {
            schema: Self::schema_of(&self.columns, &self.dims, &options),
            options,
            ..self.clone()
        })
    }
}

/// Checks the `dictionary` option against the table's columns before anything is read: each
/// name is a column, and one of strings or bytes (or already a dictionary).
fn check_dictionary(location: &str, columns: &[TableColumn], options: &TableOptions) -> Result<()> {
    for name in options.dictionary.iter().flatten() {
        let Some(c) = columns.iter().find(|c| &c.name == name) else {
            let names: Vec<&str> = columns.iter().map(|c| c.name.as_str()).collect();
            return Err(Error::invalid_option(
                "dictionary",
                format!(
                    "'{location}' has no column '{name}'; its columns: {}",
                    names.join(", ")
                ),
            ));
        };
        let dt = c.field(options).data_type().clone();
        if !matches!(dt, arrow_schema::DataType::Dictionary(..)) {
            return Err(Error::invalid_option(
                "dictionary",
                format!(
                    "column '{name}' of '{location}' is {dt}: only string and binary columns \
                     are read as dictionaries"
                ),
            ));
        }
    }
    Ok(())
}

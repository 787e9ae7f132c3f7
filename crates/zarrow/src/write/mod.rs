//! Tables → zarr stores, streaming: [`TableWriter`] takes RecordBatches one at a time and
//! writes a group of 1-D arrays, one per column, sharing one dimension (zarr v3 with
//! `dimension_names`, or v2 with `_ARRAY_DIMENSIONS` and consolidated `.zmetadata`: what
//! `xarray.open_zarr` opens as a Dataset), or an AnnData dataframe (`anndata.rs`: each batch
//! becomes the values of the stored arrays, which are then written the same way).
//!
//! Rows are buffered until a unit (a chunk, or a shard) of every column is full; each column's
//! unit is then encoded on the blocking pool and stored through `object_store`, with a bounded
//! number of units in flight, so memory is a few units per column whatever the input size.
//! Metadata is written last (arrays, then the group). The table is written where
//! `publish.rs` says (a staging directory beside a local target, renamed onto it at the end;
//! on object stores in place with a create-only root document, or staged and copied over when
//! replacing), under a writer lock: see docs/writing.md, "Write safety".

mod anndata;
pub mod append;
mod array;
pub(crate) mod chunk;
mod column;
mod commit;
#[cfg(all(test, feature = "icechunk"))]
mod commit_tests;
mod durable;
mod fs;
mod lock;
#[cfg(test)]
mod lock_tests;
pub mod options;
mod publish;
#[cfg(test)]
mod safety_tests;
mod steps;
#[cfg(test)]
mod tests;

use std::sync::Arc;

use arrow_array::{ArrayRef, RecordBatch};
use arrow_schema::{Schema, SchemaRef};
use bytes::Bytes;
use futures::{Stream, StreamExt};
use serde_json::{json, Map, Value};
use tokio::task::JoinSet;

use crate::store::ZarrStore;
use crate::{Error, Result};
use anndata::AnnDataFrame;
pub use array::{write_array, write_group, ZarrWriteOptions};
pub use chunk::VlenEncoding;
use column::ColumnWriter;
pub use lock::{LockPolicy, WriterLock, LOCK_SUFFIX};
pub use options::{Layout, TableWriteOptions, WRITE_OPTION_KEYS};
pub(crate) use publish::refuse_group_member;
use publish::Publication;
pub(crate) use steps::Steps;

/// What a write did: the rows written and, for an Icechunk repository, the snapshot its
/// commit made.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Written {
    /// Rows written (appended, for an append).
    pub rows: u64,
    /// The id of the snapshot committed (`None`: not an Icechunk location, or nothing was
    /// committed).
    pub snapshot: Option<String>,
}

/// The metadata documents at a store's root: one of them makes a location a zarr store (what
/// `overwrite` replaces); an object store's old table loses them first when replaced.
const ROOT_DOCUMENTS: &[&str] = &["zarr.json", ".zmetadata", ".zgroup", ".zattrs", ".zarray"];

/// The longest node name, in bytes (what most file systems allow of a file name).
pub(crate) const MAX_NAME_BYTES: usize = 255;

/// The columns written of `schema`: all but the row position columns zarrow's reader adds
/// (field metadata [`crate::table::ROLE_KEY`] = `position`, regenerated when the table is
/// read), and at least one. The xarray layout's dimension is the position column's when the
/// `dimension` option is left at its default.
fn written_schema(
    schema: &SchemaRef,
    options: &mut TableWriteOptions,
) -> Result<(SchemaRef, Option<Vec<usize>>)> {
    let kept: Vec<usize> = (0..schema.fields().len())
        .filter(|&i| !crate::table::is_position(schema.field(i)))
        .collect();
    if kept.is_empty() {
        let message = match schema.fields().len() {
            0 => "the input has no columns: a table needs at least one".to_string(),
            _ => format!(
                "the input has only row position columns ({}), which zarrow's reader makes \
                 and does not store: a table needs at least one other column",
                schema
                    .fields()
                    .iter()
                    .map(|f| f.name().as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        };
        return Err(Error::InvalidArgument(message));
    }
    if options.layout == Layout::Xarray && options.dimension == options::DEFAULT_DIMENSION {
        let mut dims = schema
            .fields()
            .iter()
            .filter_map(|f| f.metadata().get(crate::table::DIMENSION_KEY));
        if let (Some(dim), None) = (dims.next(), dims.next()) {
            if check_name("dimension", dim).is_ok() {
                options.dimension = dim.clone();
            }
        }
    }
    Ok(match kept.len() == schema.fields().len() {
        true => (schema.clone(), None),
        false => (Arc::new(schema.project(&kept)?), Some(kept)),
    })
}

/// Refuse a unit of rows (a chunk, or a shard, of every stored array: what is buffered and
/// encoded at once, the last one padded to full size) larger than `options.memory_budget`.
fn check_unit_memory(columns: &[ColumnWriter], options: &TableWriteOptions) -> Result<()> {
    let Some(budget) = options.memory_budget else {
        return Ok(());
    };
    let rows = options.unit_rows();
    let bytes = columns
        .iter()
        .map(|c| c.element_bytes().saturating_mul(rows))
        .fold(0u64, u64::saturating_add);
    if bytes > budget {
        let key = if options.shard_rows.is_some() {
            "shard_rows"
        } else {
            "chunk_rows"
        };
        return Err(Error::invalid_option(
            key,
            format!(
                "a unit of {rows} rows of these {} arrays takes about {bytes} bytes in memory, \
                 more than the memory limit of {budget} bytes: use fewer rows per chunk",
                columns.len()
            ),
        ));
    }
    Ok(())
}

/// Check that `name` can be a node name (of an array, or of the dimension).
pub(crate) fn check_name(what: &str, name: &str) -> Result<()> {
    let bad = name.is_empty()
        || name.contains('/')
        || name.contains('\\')
        || name.starts_with("__")
        || name.starts_with('.')
        || name.chars().any(char::is_control)
        || name == "zarr.json";
    if name.len() > MAX_NAME_BYTES {
        return Err(Error::InvalidArgument(format!(
            "{what} name '{name}' is {} bytes long: a zarr node name (a file name on a local \
             store) has at most {MAX_NAME_BYTES}",
            name.len()
        )));
    }
    if bad {
        return Err(Error::InvalidArgument(format!(
            "{what} name '{}' cannot be a zarr node name (empty, has '/', '\\' or a \
             control character, or starts with '.' or '__')",
            name.escape_debug()
        )));
    }
    Ok(())
}

/// Writes a stream of RecordBatches as a zarr table; see the module documentation.
///
/// ```
/// use std::sync::Arc;
///
/// use arrow_array::{Float64Array, RecordBatch};
/// use arrow_schema::{DataType, Field, Schema};
/// use zarrow::{TableModel, TableOptions, TableWriteOptions, TableWriter, ZarrStore};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let location = "memory:///readings.zarr";
/// let schema = Arc::new(Schema::new(vec![Field::new("t", DataType::Float64, false)]));
/// let options = TableWriteOptions {
///     chunk_rows: 4,
///     ..Default::default()
/// };
/// let store = ZarrStore::open(location)?;
/// let mut writer = TableWriter::try_new(store, schema.clone(), options).await?;
/// for start in [0.0, 10.0] {
///     let values = Float64Array::from_iter_values((0..5).map(|i| start + f64::from(i)));
///     writer.write(&RecordBatch::try_new(schema.clone(), vec![Arc::new(values)])?).await?;
/// }
/// assert_eq!(writer.rows(), 10);
/// assert_eq!(writer.finish().await?, 10);
///
/// let table = TableModel::open(location, TableOptions::default()).await?;
/// assert_eq!((table.num_rows(), table.chunk_shape()), (10, &[4][..]));
/// // Without `overwrite`, a location that holds something is refused.
/// let again = TableWriter::try_new(ZarrStore::open(location)?, schema, Default::default()).await;
/// assert!(again.is_err());
/// # Ok(())
/// # }
/// ```
pub struct TableWriter {
    store: ZarrStore,
    options: Arc<TableWriteOptions>,
    /// The schema of the batches given to [`Self::write`].
    input_schema: SchemaRef,
    /// The input columns written (`None`: all): not the reader's row position columns.
    projection: Option<Vec<usize>>,
    /// The schema of the columns written.
    schema: SchemaRef,
    /// The schema of the stored arrays' values (the input's, but for the AnnData layout).
    stored_schema: SchemaRef,
    anndata: Option<AnnDataFrame>,
    /// The stored arrays.
    columns: Arc<Vec<ColumnWriter>>,
    pending: Vec<RecordBatch>,
    pending_rows: usize,
    units: u64,
    rows: u64,
    tasks: JoinSet<Result<usize>>,
    in_flight_bytes: usize,
    max_in_flight: usize,
    /// Where the table is written and how it becomes visible (none when appending).
    publication: Option<Publication>,
    /// The writes, counted (failpoints in tests).
    steps: Steps,
}

impl std::fmt::Debug for TableWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TableWriter")
            .field("location", &self.store.location())
            .field("rows", &self.rows)
            .finish_non_exhaustive()
    }
}

impl TableWriter {
    /// Start writing a table of `schema` at `store`'s root. Checks every column's type and
    /// name, takes the writer lock and checks the location: without `overwrite` anything
    /// already there is an error; with it, only a zarr store is replaced, and only once the
    /// new table is complete ([`Self::finish`]). Nothing is written but the lock before these
    /// checks pass.
    pub async fn try_new(
        store: ZarrStore,
        schema: SchemaRef,
        options: TableWriteOptions,
    ) -> Result<Self> {
        Self::try_new_counted(store, schema, options, Steps::default()).await
    }

    pub(crate) async fn try_new_counted(
        store: ZarrStore,
        schema: SchemaRef,
        mut options: TableWriteOptions,
        steps: Steps,
    ) -> Result<Self> {
        options.validate()?;
        let input_schema = schema;
        let (schema, projection) = written_schema(&input_schema, &mut options)?;
        for (i, field) in schema.fields().iter().enumerate() {
            check_name("column", field.name())?;
            if schema.fields()[..i]
                .iter()
                .any(|f| f.name() == field.name())
            {
                return Err(Error::InvalidArgument(format!(
                    "column name '{}' appears twice",
                    field.name()
                )));
            }
        }
        let (anndata, columns, stored_schema) = match options.layout {
            Layout::Xarray => {
                let columns = schema
                    .fields()
                    .iter()
                    .map(|f| ColumnWriter::new(f, f.name().clone(), None))
                    .collect::<Result<Vec<_>>>()?;
                (None, columns, schema.clone())
            }
            Layout::AnnData => {
                let (frame, columns, fields) = AnnDataFrame::new(&schema, &options)?;
                (Some(frame), columns, Arc::new(Schema::new(fields)))
            }
        };
        check_unit_memory(&columns, &options)?;
        commit::check_format(&store, options.zarr_format)?;
        let commit = commit::CommitOptions {
            create_repository: options.create_repository,
            message: options.commit_message.clone(),
        };
        let publication = Publication::prepare(
            &store,
            "COPY (writing a table)",
            options.overwrite,
            options.lock,
            steps.clone(),
            &commit,
        )
        .await?;
        if let Some(transaction) = publication.transaction() {
            for c in &columns {
                transaction
                    .declare_array(&c.path, c.v3_metadata(0, &options))
                    .await?;
            }
        }
        let parallel = std::thread::available_parallelism().map_or(2, |n| n.get());
        let max_in_flight = (2 * columns.len()).max(2 * parallel);
        Ok(Self {
            store: publication.store().clone(),
            publication: Some(publication),
            steps,
            options: Arc::new(options),
            input_schema,
            projection,
            schema,
            stored_schema,
            anndata,
            columns: Arc::new(columns),
            pending: Vec::new(),
            pending_rows: 0,
            units: 0,
            rows: 0,
            tasks: JoinSet::new(),
            in_flight_bytes: 0,
            max_in_flight,
        })
    }

    /// A writer continuing a table whose arrays are `columns` (appending, see `append.rs`):
    /// `units` units are complete, and `tail`, the rows of the partial unit after them, is
    /// written again with the first new rows. Nothing is checked or deleted at the location.
    pub(crate) fn resume(
        store: ZarrStore,
        schema: SchemaRef,
        columns: Vec<ColumnWriter>,
        options: TableWriteOptions,
        units: u64,
        tail: Option<RecordBatch>,
        steps: Steps,
    ) -> Self {
        let parallel = std::thread::available_parallelism().map_or(2, |n| n.get());
        let max_in_flight = (2 * columns.len()).max(2 * parallel);
        let pending_rows = tail.as_ref().map_or(0, RecordBatch::num_rows);
        let rows = units * options.unit_rows();
        Self {
            store,
            options: Arc::new(options),
            input_schema: schema.clone(),
            projection: None,
            schema: schema.clone(),
            stored_schema: schema,
            anndata: None,
            columns: Arc::new(columns),
            pending: tail.into_iter().collect(),
            pending_rows,
            units,
            rows,
            tasks: JoinSet::new(),
            in_flight_bytes: 0,
            max_in_flight,
            publication: None,
            steps,
        }
    }

    /// The schema of the batches [`Self::write`] takes (row position columns in it are not
    /// stored).
    // The input's schema on purpose: `self.schema` is what is stored, without those columns.
    #[allow(clippy::misnamed_getters)]
    pub fn schema(&self) -> &SchemaRef {
        &self.input_schema
    }

    /// Bytes held by the writer now: buffered rows and units being encoded or stored (an
    /// estimate for memory accounting).
    pub fn buffered_bytes(&self) -> usize {
        self.pending
            .iter()
            .map(RecordBatch::get_array_memory_size)
            .sum::<usize>()
            + self.in_flight_bytes
    }

    /// Rows accepted so far.
    pub fn rows(&self) -> u64 {
        self.rows + self.pending_rows as u64
    }

    /// Add a batch (of the writer's schema). Full units are handed to the encoders; this waits
    /// while too many are in flight.
    pub async fn write(&mut self, batch: &RecordBatch) -> Result<()> {
        // Names and types: field metadata (the reader's marks) may differ between a plan's
        // schema and its batches' (a union of tables with and without them).
        let (have, want) = (batch.schema(), &self.input_schema);
        let same = have.fields().len() == want.fields().len()
            && have
                .fields()
                .iter()
                .zip(want.fields())
                .all(|(h, w)| h.name() == w.name() && h.data_type() == w.data_type());
        if !same {
            return Err(Error::InvalidArgument(format!(
                "batch schema {:?} differs from the table's {:?}",
                batch.schema(),
                self.input_schema
            )));
        }
        if batch.num_rows() == 0 {
            return Ok(());
        }
        let projected;
        let batch = match &self.projection {
            Some(columns) => {
                projected = batch.project(columns)?;
                &projected
            }
            None => batch,
        };
        let batch = &compact_views(batch)?;
        let stored = match &mut self.anndata {
            Some(frame) => {
                let first_row = self.rows + self.pending_rows as u64;
                RecordBatch::try_new(self.stored_schema.clone(), frame.arrays(batch, first_row)?)?
            }
            None => batch.clone(),
        };
        for (c, values) in self.columns.iter().zip(stored.columns()) {
            c.note(values)?;
        }
        self.pending_rows += stored.num_rows();
        self.pending.push(stored);
        let unit = self.options.unit_rows() as usize;
        while self.pending_rows >= unit {
            let all = self.take_pending()?;
            let (head, rest) = (all.slice(0, unit), all.slice(unit, all.num_rows() - unit));
            if rest.num_rows() > 0 {
                self.pending_rows = rest.num_rows();
                self.pending.push(rest);
            }
            self.spawn_unit(head).await?;
        }
        Ok(())
    }

    fn take_pending(&mut self) -> Result<RecordBatch> {
        let batches = std::mem::take(&mut self.pending);
        self.pending_rows = 0;
        Ok(match batches.len() {
            1 => batches.into_iter().next().expect("one batch"),
            // Compacted again: concatenated view arrays keep every buffer of their inputs, and
            // the rows left over after a unit would carry them into the next concatenation,
            // and so on (memory growing with the input).
            _ => compact_views(&arrow_select::concat::concat_batches(
                &self.stored_schema,
                &batches,
            )?)?,
        })
    }

    async fn spawn_unit(&mut self, unit: RecordBatch) -> Result<()> {
        let index = self.units;
        self.units += 1;
        self.rows += unit.num_rows() as u64;
        for (c, values) in unit.columns().iter().enumerate() {
            while self.tasks.len() >= self.max_in_flight {
                self.join_one().await?;
            }
            let size = values.get_array_memory_size();
            self.in_flight_bytes += size;
            let columns = self.columns.clone();
            let options = self.options.clone();
            let store = self.store.child(&columns[c].path);
            let values = values.clone();
            let steps = self.steps.clone();
            self.tasks.spawn(async move {
                let key = columns[c].key(index, &options);
                let encode_key = key.clone();
                let bytes = tokio::task::spawn_blocking(move || {
                    columns[c].encode_unit(&values, &encode_key, &options)
                })
                .await
                .map_err(|e| Error::Write {
                    path: store.location().to_string(),
                    message: format!("encoding task failed: {e}"),
                })??;
                steps.hit("a chunk")?;
                store.put(&key, Bytes::from(bytes)).await?;
                Ok(size)
            });
        }
        Ok(())
    }

    /// Wait until every unit handed to the encoders is stored (what is buffered for the next
    /// unit stays): [`Self::buffered_bytes`] is then only the buffered rows.
    pub async fn drain(&mut self) -> Result<()> {
        while !self.tasks.is_empty() {
            self.join_one().await?;
        }
        Ok(())
    }

    /// Wait for every unit in flight, whatever its outcome (a failed write, before its
    /// writes are undone).
    pub(crate) async fn settle(&mut self) {
        while self.tasks.join_next().await.is_some() {}
    }

    /// Wait for one unit in flight; when it failed, for all the others too (nothing is
    /// written after the writer gives up and cleans up).
    async fn join_one(&mut self) -> Result<()> {
        let Some(done) = self.tasks.join_next().await else {
            return Ok(());
        };
        let stored = done
            .map_err(|e| Error::Write {
                path: self.store.location().to_string(),
                message: format!("write task failed: {e}"),
            })
            .and_then(|stored| stored);
        match stored {
            Ok(size) => {
                self.in_flight_bytes = self.in_flight_bytes.saturating_sub(size);
                Ok(())
            }
            Err(e) => {
                self.settle().await;
                Err(e)
            }
        }
    }

    /// Write the last (partial) unit, wait for every chunk, then write the metadata: each
    /// array's (and the AnnData layout's categories and encoded groups), then the root group's;
    /// then publish the table (see `publish.rs`) and release the lock. Returns the number of
    /// rows written.
    pub async fn finish(self) -> Result<u64> {
        Ok(self.finish_written().await?.rows)
    }

    /// [`Self::finish`], saying also which snapshot a write to an Icechunk repository
    /// committed.
    pub async fn finish_written(mut self) -> Result<Written> {
        self.finish_chunks().await?;
        let opts = self.options.clone();
        let mut consolidated = Map::new();
        let (root_attributes, groups) = match &self.anndata {
            Some(frame) => {
                // The categories, each one chunk, known only now.
                for (writer, values) in frame.categories()? {
                    let mut one = (*opts).clone();
                    one.chunk_rows = (values.len() as u64).max(1);
                    one.shard_rows = None;
                    // The array first: an Icechunk session takes chunks of arrays it has.
                    self.put_array_metadata(&writer, values.len() as u64, &one, &mut consolidated)
                        .await?;
                    if !values.is_empty() {
                        let key = writer.key(0, &one);
                        let bytes = writer.encode_unit(&values, &key, &one)?;
                        self.put_doc(&writer.path, &key, bytes, false).await?;
                    }
                }
                (Value::Object(frame.attributes()), frame.groups())
            }
            None => {
                // The written column order: the group-table reader honours `column-order`
                // (AnnData's attribute for the same thing), so the table reads back as written.
                let column_order: Vec<&str> = self
                    .schema
                    .fields()
                    .iter()
                    .map(|f| f.name().as_str())
                    .collect();
                (json!({ "column-order": column_order }), Vec::new())
            }
        };
        for c in self.columns.iter() {
            self.put_array_metadata(c, self.rows, &opts, &mut consolidated)
                .await?;
        }
        for (path, attributes) in groups {
            self.put_group_metadata(&path, Value::Object(attributes), &mut consolidated)
                .await?;
        }
        let limits = chunk::self_check_limits();
        if opts.zarr_format == 2 {
            self.put_group_metadata("", root_attributes, &mut consolidated)
                .await?;
            let zmetadata =
                json!({"zarr_consolidated_format": 1, "metadata": in_path_order(consolidated)});
            self.put_doc("", ".zmetadata", to_bytes("", &zmetadata)?, true)
                .await?;
        } else {
            let group = json!({
                "zarr_format": 3,
                "node_type": "group",
                "attributes": root_attributes,
                "consolidated_metadata": {
                    "kind": "inline",
                    "must_understand": false,
                    "metadata": in_path_order(consolidated),
                },
            });
            let bytes = to_bytes("", &group)?;
            crate::metadata::parse_v3("", &bytes, &limits)?;
            self.put_doc("", "zarr.json", bytes, true).await?;
        }
        let snapshot = match self.publication.take() {
            Some(p) => p.publish(&format!("COPY: {} rows", self.rows)).await?,
            None => None,
        };
        Ok(Written {
            rows: self.rows,
            snapshot,
        })
    }

    /// Put `name` below the node at `path`; the root's documents (`root`) create-only where
    /// they publish the table (a new table on an object store).
    async fn put_doc(&self, path: &str, name: &str, bytes: Vec<u8>, root: bool) -> Result<()> {
        self.steps.hit(name)?;
        let create = root
            && self
                .publication
                .as_ref()
                .is_some_and(|p| p.root_create_only());
        publish::put_doc(&self.store, path, name, bytes, create).await
    }

    /// Write the last (partial) unit and wait for every chunk; check each column (NULLs and
    /// their marker). Returns the number of rows written.
    async fn finish_chunks(&mut self) -> Result<u64> {
        if self.pending_rows > 0 {
            let last = self.take_pending()?;
            self.spawn_unit(last).await?;
        }
        self.drain().await?;
        for c in self.columns.iter() {
            c.check()?;
        }
        Ok(self.rows)
    }

    /// Write the metadata of array `c` after `rows` rows (checked by the reader's own parser
    /// first), and add it to `consolidated`.
    async fn put_array_metadata(
        &self,
        c: &ColumnWriter,
        rows: u64,
        opts: &TableWriteOptions,
        consolidated: &mut Map<String, Value>,
    ) -> Result<()> {
        let limits = chunk::self_check_limits();
        if opts.zarr_format == 2 {
            let (zarray, zattrs) = c.v2_metadata(rows, opts)?;
            let zarray_bytes = to_bytes(&c.path, &zarray)?;
            let zattrs_bytes = to_bytes(&c.path, &zattrs)?;
            crate::metadata::parse_v2_array(&c.path, &zarray_bytes, Some(&zattrs_bytes), &limits)?;
            self.put_doc(&c.path, ".zarray", zarray_bytes, false)
                .await?;
            self.put_doc(&c.path, ".zattrs", zattrs_bytes, false)
                .await?;
            consolidated.insert(format!("{}/.zarray", c.path), zarray);
            consolidated.insert(format!("{}/.zattrs", c.path), zattrs);
        } else {
            let meta = c.v3_metadata(rows, opts);
            let bytes = to_bytes(&c.path, &meta)?;
            crate::metadata::parse_v3(&c.path, &bytes, &limits)?;
            self.put_doc(&c.path, "zarr.json", bytes, false).await?;
            consolidated.insert(c.path.clone(), meta);
        }
        Ok(())
    }

    /// Write the metadata of the group at `path` (`""`: the root; v3: not the root, whose
    /// document also carries the consolidated metadata), and add it to `consolidated`.
    async fn put_group_metadata(
        &self,
        path: &str,
        attributes: Value,
        consolidated: &mut Map<String, Value>,
    ) -> Result<()> {
        let root = path.is_empty();
        let prefix = |doc: &str| match path {
            "" => doc.to_string(),
            p => format!("{p}/{doc}"),
        };
        if self.options.zarr_format == 2 {
            let zgroup = json!({"zarr_format": 2});
            self.put_doc(path, ".zgroup", to_bytes(path, &zgroup)?, root)
                .await?;
            self.put_doc(path, ".zattrs", to_bytes(path, &attributes)?, root)
                .await?;
            consolidated.insert(prefix(".zgroup"), zgroup);
            consolidated.insert(prefix(".zattrs"), attributes);
        } else {
            let doc = json!({"zarr_format": 3, "node_type": "group", "attributes": attributes});
            self.put_doc(path, "zarr.json", to_bytes(path, &doc)?, root)
                .await?;
            consolidated.insert(path.to_string(), doc);
        }
        Ok(())
    }
}

/// `batch` with its string and binary view columns compacted (`gc`): a view array from a
/// Parquet scan refers to buffers shared with many other batches (whole pages), which
/// buffering it would keep alive and which its memory size counts again for every batch; a
/// concatenation of view arrays refers to all its inputs' buffers. Compacted, a buffered batch
/// holds (and is accounted for) its own values only.
fn compact_views(batch: &RecordBatch) -> Result<RecordBatch> {
    use arrow_array::cast::AsArray;
    use arrow_schema::DataType;
    if !batch
        .columns()
        .iter()
        .any(|c| matches!(c.data_type(), DataType::Utf8View | DataType::BinaryView))
    {
        return Ok(batch.clone());
    }
    let columns = batch
        .columns()
        .iter()
        .map(|c| match c.data_type() {
            DataType::Utf8View => Arc::new(c.as_string_view().gc()) as ArrayRef,
            DataType::BinaryView => Arc::new(c.as_binary_view().gc()) as ArrayRef,
            _ => c.clone(),
        })
        .collect();
    Ok(RecordBatch::try_new(batch.schema(), columns)?)
}

fn to_bytes(path: &str, value: &Value) -> Result<Vec<u8>> {
    serde_json::to_vec_pretty(value).map_err(|e| Error::Write {
        path: path.to_string(),
        message: e.to_string(),
    })
}

/// Write a whole stream of batches as a table at `store` (see [`TableWriter`]). Returns the
/// number of rows written; on an error nothing more is written and no metadata is.
///
/// ```
/// use std::sync::Arc;
///
/// use arrow_array::{Int32Array, RecordBatch, StringArray};
/// use arrow_schema::{DataType, Field, Schema};
/// use zarrow::{write_table, TableWriteOptions, ZarrRecordBatchReaderBuilder, ZarrStore};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let dir = tempfile::tempdir()?;
/// let location = dir.path().join("cells.zarr").to_string_lossy().into_owned();
/// let schema = Arc::new(Schema::new(vec![
///     Field::new("id", DataType::Int32, false),
///     Field::new("name", DataType::Utf8, true),
/// ]));
/// let batch = RecordBatch::try_new(
///     schema.clone(),
///     vec![
///         Arc::new(Int32Array::from(vec![1, 2, 3])),
///         Arc::new(StringArray::from(vec![Some("a"), None, Some("c")])),
///     ],
/// )?;
/// let options = TableWriteOptions {
///     chunk_rows: 2,
///     ..Default::default()
/// };
/// let batches = futures::stream::iter(vec![Ok(batch)]);
/// let rows = write_table(ZarrStore::open(&location)?, schema, batches, options).await?;
/// assert_eq!(rows, 3);
///
/// // Read back (the sync reader runs on a runtime of its own: not inside this one).
/// let read = tokio::task::spawn_blocking(move || -> zarrow::Result<Vec<RecordBatch>> {
///     let reader = ZarrRecordBatchReaderBuilder::try_new(&location)?.build()?;
///     Ok(reader.collect::<Result<_, _>>()?)
/// })
/// .await??;
/// // The dimension is a column too (its coordinates: here the row numbers).
/// let schema = read[0].schema();
/// let names: Vec<&str> = schema.fields().iter().map(|f| f.name().as_str()).collect();
/// assert_eq!(names, ["dim_0", "id", "name"]);
/// assert_eq!(read.iter().map(|b| b.num_rows()).sum::<usize>(), 3);
/// # Ok(())
/// # }
/// ```
pub async fn write_table<S>(
    store: ZarrStore,
    schema: SchemaRef,
    mut batches: S,
    options: TableWriteOptions,
) -> Result<u64>
where
    S: Stream<Item = Result<RecordBatch>> + Unpin,
{
    let mut writer = TableWriter::try_new(store, schema, options).await?;
    while let Some(batch) = batches.next().await {
        writer.write(&batch?).await?;
    }
    writer.finish().await
}

/// Consolidated metadata with its entries in path order, a group before its members.
/// zarr-python builds a group's view of the consolidated metadata in the order the entries
/// come, and does not find a member listed before its group (an AnnData categorical's
/// `categories`, written first). A `serde_json::Map` keeps insertion order when a crate in the
/// build turns on serde_json's `preserve_order` (DataFusion's does), so the order is made here.
fn in_path_order(entries: Map<String, Value>) -> Map<String, Value> {
    let mut entries: Vec<(String, Value)> = entries.into_iter().collect();
    entries.sort_by(|a, b| a.0.cmp(&b.0));
    entries.into_iter().collect()
}

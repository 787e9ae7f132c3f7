//! Appending rows to a table along its dimension (`INSERT INTO`): [`TableAppender`].
//!
//! The table must be a group (or a single array) of 1-D arrays over one dimension whose
//! chunks zarrow writes exactly as they are stored: each array's metadata is compared with
//! what the table writer would write for its column (data type, chunk grid, chunk keys,
//! codecs), so n-d arrays, AnnData encoded groups, sparse matrices and codecs zarrow cannot
//! encode are refused by name before anything is written. The rows of a partial last chunk
//! (or shard) are read and written again merged with the first new rows; new chunks follow;
//! the metadata documents, with the grown shape, are written last (each array's, then the
//! root's consolidated metadata), so an interrupted append leaves the old table readable to
//! readers of the consolidated metadata (docs/writing.md says what readers that skip it may
//! see). The append holds the table's writer lock throughout, and the root document is
//! replaced only if it is still the version read at the start, where the store can say.

use std::sync::Arc;

use arrow_array::{make_array, Array, ArrayRef, RecordBatch};
use arrow_buffer::{BooleanBuffer, NullBuffer};
use arrow_schema::{DataType, Field, Schema, SchemaRef};
use bytes::Bytes;
use object_store::{ObjectStore, ObjectStoreExt, PutMode, UpdateVersion};
use serde_json::{json, Value};

use super::chunk::VlenEncoding;
use super::column::ColumnWriter;
use super::commit::{CommitOptions, Transaction};
use super::durable::LocalWrites;
use super::options::TableWriteOptions;
use super::{refuse_group_member, LockPolicy, Steps, TableWriter, WriterLock, Written};
use crate::codec::{ArrayToBytes, CodecChain};
use crate::grid::GridKind;
use crate::metadata::ArrayMetadata;
use crate::node::Node;
use crate::options::ZarrReadOptions;
use crate::store::ZarrStore;
use crate::table::{ColumnRole, TableColumn, TableModel, TableOptions, TableReader};
use crate::{Error, Result};

/// One stored array being appended to.
#[derive(Debug)]
struct Target {
    name: String,
    path: String,
    /// Its metadata document as stored (v3 `zarr.json`, v2 `.zarray`).
    doc: Value,
    /// Its v2 `.zattrs` as stored (v3: the attributes are in `doc`).
    zattrs: Option<Value>,
    /// NULLs of an integer column have a declared marker (`_FillValue`).
    null_marker: bool,
}

/// Appends batches to an existing table; see the module documentation.
///
/// ```
/// use std::sync::Arc;
///
/// use arrow_array::{ArrayRef, Float64Array, Int64Array, RecordBatch};
/// use arrow_schema::{DataType, Field, Schema};
/// use zarrow::write::append::TableAppender;
/// use zarrow::{write_table, TableModel, TableOptions, TableWriteOptions, ZarrStore};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let location = "memory:///log.zarr";
/// let schema = Arc::new(Schema::new(vec![Field::new("t", DataType::Float64, false)]));
/// let t = Float64Array::from(vec![0.0, 1.0, 2.0]);
/// let first = RecordBatch::try_new(schema.clone(), vec![Arc::new(t)])?;
/// let options = TableWriteOptions {
///     chunk_rows: 2,
///     ..Default::default()
/// };
/// let batches = futures::stream::iter([Ok(first)]);
/// write_table(ZarrStore::open(location)?, schema, batches, options).await?;
///
/// // Batches of the table's schema as it opens: its dimension's column too (ignored).
/// let schema = TableModel::open(location, TableOptions::default()).await?.schema();
/// let store = ZarrStore::open(location)?;
/// let mut appender = TableAppender::try_new(store, schema.clone(), Default::default()).await?;
/// assert_eq!(appender.old_rows(), 3);
/// let columns: Vec<ArrayRef> = vec![
///     Arc::new(Int64Array::from(vec![3, 4])),
///     Arc::new(Float64Array::from(vec![3.0, 4.0])),
/// ];
/// appender.write(&RecordBatch::try_new(schema, columns)?).await?;
/// assert_eq!(appender.finish().await?, 2);
///
/// let table = TableModel::open(location, TableOptions::default()).await?;
/// assert_eq!(table.num_rows(), 5);
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
pub struct TableAppender {
    writer: TableWriter,
    store: ZarrStore,
    /// The schema batches come in (the table's, as it was opened).
    schema: SchemaRef,
    /// The position in the incoming batches of each stored array's column.
    inputs: Vec<usize>,
    targets: Vec<Target>,
    zarr_format: u8,
    old_rows: u64,
    /// The root's consolidated document as read at the start, and its version.
    root_doc: Option<(Value, UpdateVersion)>,
    lock: Option<WriterLock>,
    /// The Icechunk session appended in (committed by [`Self::finish`]).
    transaction: Option<Transaction>,
    /// A local table's writes, undone if the append fails (see `durable.rs`).
    writes: Option<Arc<LocalWrites>>,
    steps: Steps,
}

fn refuse(location: &str, message: String) -> Error {
    Error::Write {
        path: location.to_string(),
        message: format!("cannot append: {message}"),
    }
}

/// The write options that encode chunks as `meta` says; where there are none, the error
/// `refused` makes of why.
fn options_of(meta: &ArrayMetadata, refused: impl Fn(&str) -> Error) -> Result<TableWriteOptions> {
    let mut o = TableWriteOptions {
        zarr_format: meta.zarr_format,
        ..Default::default()
    };
    if meta.chunk_grid.kind() != GridKind::Regular {
        return Err(refused(
            "a rectilinear chunk grid (only regular grids are written)",
        ));
    }
    let unit = *meta
        .chunk_shape
        .first()
        .ok_or_else(|| refused("a 0-d array"))?;
    let chain: &CodecChain = match &meta.codecs.array_to_bytes {
        ArrayToBytes::Sharding(s) => {
            o.shard_rows = Some(unit);
            o.chunk_rows = *s
                .chunk_shape
                .first()
                .ok_or_else(|| refused("a 0-d shard"))?;
            &s.codecs
        }
        _ => {
            o.chunk_rows = unit;
            &meta.codecs
        }
    };
    if !chain.array_to_array.is_empty() {
        return Err(refused(
            "array-to-array codecs (e.g. transpose) are not written by zarrow",
        ));
    }
    o.string_encoding = match &chain.array_to_bytes {
        ArrayToBytes::ArrowVlen { large } => VlenEncoding::ArrowVlen { large: *large },
        ArrayToBytes::PackBits(_) => return Err(refused("packbits is not written by zarrow")),
        _ => VlenEncoding::Numcodecs,
    };
    o.compression = match chain.bytes_to_bytes.as_slice() {
        [] => None,
        [one] => Some(one.clone()),
        _ => return Err(refused("more than one bytes-to-bytes codec")),
    };
    Ok(o)
}

/// The members of a document that say how chunks are encoded and named.
fn layout_of(doc: &Value, zarr_format: u8) -> Vec<Value> {
    let keys: &[&str] = if zarr_format == 2 {
        &["dtype", "chunks", "compressor", "filters", "order"]
    } else {
        &["data_type", "chunk_grid", "chunk_key_encoding", "codecs"]
    };
    let mut out: Vec<Value> = keys.iter().map(|k| doc[*k].clone()).collect();
    if zarr_format == 2 {
        out.push(
            doc.get("dimension_separator")
                .cloned()
                .unwrap_or(json!(".")),
        );
    }
    out
}

/// Whether the array documents `own` (as stored) and `expected` (what zarrow writes) encode and
/// name chunks alike: their layout members are equal, or, parsed, their data type, chunk
/// shape, codecs and chunk keys are (another writer may spell a codec's defaults differently:
/// zarr-python's v2 `.zarray` leaves zstd's `"checksum": false` out).
fn same_encoding(path: &str, own: &Value, expected: &Value, zarr_format: u8) -> bool {
    if layout_of(own, zarr_format) == layout_of(expected, zarr_format) {
        return true;
    }
    let limits = super::chunk::self_check_limits();
    let parse = |doc: &Value| -> Option<ArrayMetadata> {
        let bytes = serde_json::to_vec(doc).ok()?;
        match zarr_format {
            2 => crate::metadata::parse_v2_array(path, &bytes, None, &limits).ok(),
            _ => match crate::metadata::parse_v3(path, &bytes, &limits).ok()? {
                crate::metadata::NodeMetadata::Array(m) => Some(*m),
                _ => None,
            },
        }
    };
    match (parse(own), parse(expected)) {
        (Some(a), Some(b)) => {
            a.data_type == b.data_type
                && a.chunk_shape == b.chunk_shape
                && a.codecs == b.codecs
                && a.chunk_key_encoding == b.chunk_key_encoding
        }
        _ => false,
    }
}

/// `values` with the elements equal to `sentinel` (bytes of one element) as NULLs.
fn sentinel_as_null(values: &ArrayRef, sentinel: &[u8]) -> Result<ArrayRef> {
    let bytes = super::chunk::encode::fixed_values(values.as_ref(), sentinel)?;
    let valid: BooleanBuffer = bytes
        .chunks_exact(sentinel.len())
        .map(|e| e != sentinel)
        .collect();
    let nulls = NullBuffer::new(valid);
    let data = values.to_data().into_builder().nulls(Some(nulls)).build()?;
    Ok(make_array(data))
}

/// What an append writes through: the store, what keeps other writers out (on an Icechunk
/// branch a session, committed at the end, with no lock until then; elsewhere the table's
/// writer lock), and a local table's writes (through a temporary directory beside it).
struct Began {
    store: ZarrStore,
    lock: Option<WriterLock>,
    transaction: Option<Transaction>,
    writes: Option<Arc<LocalWrites>>,
}

async fn begin_append(store: ZarrStore, policy: LockPolicy, steps: &Steps) -> Result<Began> {
    let transaction =
        Transaction::begin(&store, &CommitOptions::default(), policy, steps.clone()).await?;
    if let Some(t) = transaction {
        return Ok(Began {
            store: t.store().clone(),
            lock: None,
            transaction: Some(t),
            writes: None,
        });
    }
    let operation = "INSERT (appending rows)";
    let lock = WriterLock::acquire_counted(&store, operation, policy, steps.clone()).await?;
    let (store, writes) = match LocalWrites::wrap(&store) {
        Some((store, writes)) => (store, Some(writes)),
        None => (store, None),
    };
    Ok(Began {
        store,
        lock: Some(lock),
        transaction: None,
        writes,
    })
}

/// Refuse a table of more than one dimension, or whose columns are not `schema`'s (the table
/// as it was opened, read as stored).
fn check_table(location: &str, model: &TableModel, schema: &SchemaRef) -> Result<()> {
    if model.dimensions().len() != 1 {
        let dims: Vec<&str> = model.dimensions().iter().map(|d| d.name.as_str()).collect();
        return Err(refuse(
            location,
            format!(
                "the table has {} dimensions ({}); appending extends tables of one",
                dims.len(),
                dims.join(", ")
            ),
        ));
    }
    let stored = model.schema();
    if stored.fields().len() != schema.fields().len() {
        return Err(refuse(
            location,
            format!(
                "the table's columns changed since it was opened ({} now, {} then)",
                stored.fields().len(),
                schema.fields().len()
            ),
        ));
    }
    for (s, t) in stored.fields().iter().zip(schema.fields()) {
        if s.name() != t.name() || s.data_type() != t.data_type() {
            return Err(refuse(
                location,
                format!(
                    "column '{}' is read as {} but stored as {} ('{}'): appending writes \
                     stored values (open the table without decode_cf / fill_as_null)",
                    t.name(),
                    t.data_type(),
                    s.data_type(),
                    s.name()
                ),
            ));
        }
    }
    Ok(())
}

/// The stored arrays an append writes, in the table's column order.
struct StoredColumns {
    /// The position in the incoming batches of each array's column.
    inputs: Vec<usize>,
    targets: Vec<Target>,
    writers: Vec<ColumnWriter>,
    /// The arrays' columns as written.
    schema: SchemaRef,
    /// The options they are all written with.
    options: TableWriteOptions,
}

/// One stored array of the table, as [`column_of`] finds it.
struct StoredColumn {
    target: Target,
    writer: ColumnWriter,
    field: Field,
    options: TableWriteOptions,
    /// Its values are strings or bytes (a vlen encoding).
    vlen: bool,
}

/// The table's stored arrays (its index columns left out), each written as zarrow writes it,
/// all alike in chunking, compression and string encoding.
async fn stored_columns(
    location: &str,
    store: &ZarrStore,
    root: &Node,
    model: &TableModel,
    schema: &SchemaRef,
) -> Result<StoredColumns> {
    let (mut inputs, mut targets, mut writers, mut fields) = (vec![], vec![], vec![], vec![]);
    let mut unified: Option<TableWriteOptions> = None;
    let mut strings: Option<VlenEncoding> = None;
    for (i, c) in model.columns().iter().enumerate() {
        let data_type = schema.field(i).data_type();
        let Some(column) = column_of(location, store, root, c, data_type).await? else {
            continue;
        };
        let name = &column.target.name;
        if column.vlen {
            match strings {
                Some(s) if s != column.options.string_encoding => {
                    let why = format!("column '{name}': string encodings differ between columns");
                    return Err(refuse(location, why));
                }
                _ => strings = Some(column.options.string_encoding),
            }
        }
        match &unified {
            None => unified = Some(column.options.clone()),
            Some(u) if !same_layout(u, &column.options) => {
                let first = targets.first().map_or("", |t: &Target| t.name.as_str());
                let why = format!("column '{name}' is chunked or compressed unlike '{first}'");
                return Err(refuse(location, why));
            }
            Some(_) => {}
        }
        inputs.push(i);
        fields.push(column.field);
        writers.push(column.writer);
        targets.push(column.target);
    }
    let Some(mut options) = unified else {
        return Err(refuse(location, "the table has no stored columns".into()));
    };
    if let Some(s) = strings {
        options.string_encoding = s;
    }
    Ok(StoredColumns {
        inputs,
        targets,
        writers,
        schema: Arc::new(Schema::new(fields)),
        options,
    })
}

/// Whether two columns' chunks are alike (format, rows per chunk and shard, compression).
fn same_layout(a: &TableWriteOptions, b: &TableWriteOptions) -> bool {
    a.zarr_format == b.zarr_format
        && a.chunk_rows == b.chunk_rows
        && a.shard_rows == b.shard_rows
        && a.compression == b.compression
}

/// Column `c` (read as `data_type`) as a stored 1-D array along the table's dimension, with
/// the options that write it as it is stored; `None` for an index column (not stored).
async fn column_of(
    location: &str,
    store: &ZarrStore,
    root: &Node,
    c: &TableColumn,
    data_type: &DataType,
) -> Result<Option<StoredColumn>> {
    let refused = |why: String| refuse(location, format!("column '{}' {why}", c.name));
    match &c.role {
        ColumnRole::Index(_) => return Ok(None),
        ColumnRole::Coordinate(0) => {}
        ColumnRole::Data(map) if map.as_slice() == [0] => {}
        _ => {
            return Err(refused(
                "is not an array along the table's dimension".into(),
            ))
        }
    }
    // A group's columns are its children by name; an array's one column is itself.
    let (node, path) = match root {
        Node::Group(g) => (g.child(&c.name).await?, c.name.clone()),
        Node::Array(_) => (root.clone(), String::new()),
    };
    let array = match node {
        Node::Array(a) if a.shape().len() == 1 => a,
        Node::Array(a) => {
            let why = format!("is an array of {} dimensions", a.shape().len());
            return Err(refused(why));
        }
        Node::Group(_) => {
            return Err(refused(
                "is an encoded group (AnnData categorical or nullable column); appending \
                 writes plain 1-D arrays"
                    .into(),
            ))
        }
    };
    let meta = array.metadata();
    let field = Field::new(&c.name, data_type.clone(), true);
    let options = options_of(meta, |why| {
        refuse(location, format!("column '{}': {why}", c.name))
    })?;
    let writer = ColumnWriter::new(&field, path.clone(), None)?;
    let doc = stored_doc(location, store, &field, &path, &writer, meta, &options).await?;
    let zattrs = match meta.zarr_format {
        2 => Some(own_zattrs(location, store, &c.name, &path).await?),
        _ => None,
    };
    check_own_shape(location, &c.name, &doc, zattrs.as_ref(), meta)?;
    // Integers: their `_FillValue` (v2: the fill value); floats: `zarrow.nulls`.
    let null_marker = match writer.int_sentinel() {
        Some((_, json)) if meta.zarr_format == 2 => doc["fill_value"] == json,
        Some(_) => meta.attributes.contains_key("_FillValue"),
        None => data_type.is_floating() && crate::table::declares_nulls(&meta.attributes),
    };
    Ok(Some(StoredColumn {
        target: Target {
            name: c.name.clone(),
            path,
            doc,
            zattrs,
            null_marker,
        },
        writer,
        field,
        options,
        vlen: meta.codecs.array_to_bytes.name() != "bytes",
    }))
}

/// The metadata document of the column of `field` (at `path`), refused unless its data type,
/// chunking and codecs are what `writer` writes with `options`.
async fn stored_doc(
    location: &str,
    store: &ZarrStore,
    field: &Field,
    path: &str,
    writer: &ColumnWriter,
    meta: &ArrayMetadata,
    options: &TableWriteOptions,
) -> Result<Value> {
    let name = field.name();
    let doc_name = if meta.zarr_format == 2 {
        ".zarray"
    } else {
        "zarr.json"
    };
    let doc: Value = match store.child(path).get_opt(doc_name).await? {
        Some(bytes) => serde_json::from_slice(&bytes)
            .map_err(|e| refuse(location, format!("column '{name}': {doc_name}: {e}")))?,
        None => {
            let why = format!("column '{name}' has no {doc_name}");
            return Err(refuse(location, why));
        }
    };
    let expected = if meta.zarr_format == 2 {
        writer.v2_metadata(meta.shape[0], options)?.0
    } else {
        writer.v3_metadata(meta.shape[0], options)
    };
    if !same_encoding(path, &doc, &expected, meta.zarr_format) {
        return Err(refuse(
            location,
            format!(
                "column '{name}': its array's data type, chunking or codecs are not what \
                 zarrow writes for a {} column",
                field.data_type()
            ),
        ));
    }
    Ok(doc)
}

/// The array attribute an append sets while it grows an array (`{"from": rows, "to": rows}`):
/// an array whose own metadata says `to` rows while the group's consolidated metadata still
/// says `from` was grown by an append that did not finish (its rows were never published).
const APPEND_ATTRIBUTE: &str = "zarrow.append";

/// The v2 `.zattrs` of the array at `path`, as stored (an empty object without one).
async fn own_zattrs(location: &str, store: &ZarrStore, name: &str, path: &str) -> Result<Value> {
    match store.child(path).get_opt(".zattrs").await? {
        Some(bytes) => serde_json::from_slice(&bytes)
            .map_err(|e| refuse(location, format!("column '{name}': .zattrs: {e}"))),
        None => Ok(json!({})),
    }
}

/// Refuse an array whose own metadata document (`doc`, with `zattrs` on v2) gives another
/// shape than the group's consolidated metadata (`meta`, what the table was read from),
/// unless an append of zarrow's that did not finish grew it ([`APPEND_ATTRIBUTE`]: its rows
/// were never published, and are written over). Otherwise another tool grew (or shrank) the
/// array without updating the consolidated metadata (zarr-python's `Array.append` does so):
/// appending after the consolidated shape would overwrite its rows, appending after the
/// array's own would publish rows nobody has seen. The user decides: consolidating keeps them.
fn check_own_shape(
    location: &str,
    name: &str,
    doc: &Value,
    zattrs: Option<&Value>,
    meta: &ArrayMetadata,
) -> Result<()> {
    let own = doc.get("shape").cloned().unwrap_or(Value::Null);
    if own == json!(meta.shape) {
        return Ok(());
    }
    let attributes = zattrs.unwrap_or(&doc["attributes"]);
    let unfinished = json!({"from": meta.shape.first(), "to": own.get(0)});
    if attributes.get(APPEND_ATTRIBUTE) == Some(&unfinished) {
        return Ok(());
    }
    let doc_name = if zattrs.is_some() {
        ".zarray"
    } else {
        "zarr.json"
    };
    Err(refuse(
        location,
        format!(
            "column '{name}': the group's consolidated metadata gives its array the shape \
             {}, but the array's own {doc_name} gives {own}: it was changed without \
             updating the consolidated metadata (zarr-python's Array.append does so). \
             Appending would lose those rows or publish them unseen; consolidate the group's \
             metadata (zarr.consolidate_metadata) to keep them, then INSERT again",
            json!(meta.shape)
        ),
    ))
}

/// The whole units of rows the table has, and the rows of its partial last unit (rewritten
/// merged with the first appended rows), NULL where a column's marker stands.
async fn read_tail(
    model: &TableModel,
    columns: &StoredColumns,
    old_rows: u64,
    read: &ZarrReadOptions,
) -> Result<(u64, Option<RecordBatch>)> {
    let unit = columns.options.unit_rows();
    let (units, partial) = (old_rows / unit, old_rows % unit);
    if partial == 0 {
        return Ok((units, None));
    }
    let mut values = Vec::with_capacity(columns.inputs.len());
    let reader = TableReader::new(model);
    let stored = columns.writers.iter().zip(&columns.targets);
    for ((w, target), &i) in stored.zip(&columns.inputs) {
        let column = reader
            .read_column_region(i, &[units * unit], &[partial], read)
            .await?;
        values.push(match (w.int_sentinel(), target.null_marker) {
            (Some((sentinel, _)), true) => sentinel_as_null(&column, sentinel)?,
            _ => column,
        });
    }
    let tail = RecordBatch::try_new(columns.schema.clone(), values)?;
    Ok((units, Some(tail)))
}

impl TableAppender {
    /// Prepare appending batches of `schema` (the table's schema as it was opened) to the
    /// table at `store`'s root, read with `read` (the table's string types). Reads the
    /// metadata (and the rows of a partial last chunk); writes nothing.
    /// Takes the table's writer lock (see [`WriterLock`]) first: another writer at work is an
    /// error naming it.
    pub async fn try_new(
        store: ZarrStore,
        schema: SchemaRef,
        read: ZarrReadOptions,
    ) -> Result<Self> {
        Self::try_new_with(store, schema, read, LockPolicy::default()).await
    }

    /// [`Self::try_new`], breaking a stale lock as `policy` says.
    pub async fn try_new_with(
        store: ZarrStore,
        schema: SchemaRef,
        read: ZarrReadOptions,
        policy: LockPolicy,
    ) -> Result<Self> {
        Self::try_new_counted(store, schema, read, policy, Steps::default()).await
    }

    pub(crate) async fn try_new_counted(
        store: ZarrStore,
        schema: SchemaRef,
        read: ZarrReadOptions,
        policy: LockPolicy,
        steps: Steps,
    ) -> Result<Self> {
        let location = store.location().to_string();
        let Began {
            store,
            lock,
            transaction,
            writes,
        } = begin_append(store, policy, &steps).await?;
        let options = TableOptions {
            read: read.clone(),
            ..Default::default()
        };
        // The stored values, undecoded: what is appended is written as it comes.
        let model = TableModel::open_store(store.clone(), "", options).await?;
        check_table(&location, &model, &schema)?;
        let root = Node::open_store(store.clone(), &location).await?;
        if let Node::Array(_) = root {
            refuse_group_member(&store, "cannot append").await?;
        }
        let columns = stored_columns(&location, &store, &root, &model, &schema).await?;
        let old_rows = model.num_rows();
        let (units, tail) = read_tail(&model, &columns, old_rows, &read).await?;
        let StoredColumns {
            inputs,
            targets,
            writers,
            schema: stored_schema,
            options,
        } = columns;
        let zarr_format = options.zarr_format;
        let root_doc = read_root_doc(&store, zarr_format).await?;
        let writer = TableWriter::resume(
            store.clone(),
            stored_schema,
            writers,
            options,
            units,
            tail,
            steps.clone(),
        );
        if let Some(t) = &transaction {
            for target in &targets {
                t.declare_array(&target.path, target.doc.clone()).await?;
            }
        }
        Ok(Self {
            writer,
            store,
            schema,
            inputs,
            targets,
            zarr_format,
            old_rows,
            root_doc,
            lock,
            transaction,
            writes,
            steps,
        })
    }

    /// Refuse appending when one unit of the table's rows (a chunk, or a shard, of every
    /// array: what is buffered and encoded at once) takes more than `budget` bytes, or has
    /// more than 2^31 rows. Nothing has been written yet.
    pub fn check_memory_budget(&self, budget: Option<u64>) -> Result<()> {
        let mut options = (*self.writer.options).clone();
        options.memory_budget = budget;
        let unit = options.unit_rows();
        if unit > super::options::MAX_UNIT_ELEMENTS {
            return Err(refuse(
                self.store.location(),
                format!("its chunks (or shards) hold {unit} rows, more than 2^31"),
            ));
        }
        super::check_unit_memory(&self.writer.columns, &options)
    }

    /// Rows the table had.
    pub fn old_rows(&self) -> u64 {
        self.old_rows
    }

    /// Bytes held now (see [`TableWriter::buffered_bytes`]).
    pub fn buffered_bytes(&self) -> usize {
        self.writer.buffered_bytes()
    }

    /// Wait for the chunks in flight (see [`TableWriter::drain`]).
    pub async fn drain(&mut self) -> Result<()> {
        let drained = self.writer.drain().await;
        if drained.is_err() {
            self.fail().await;
        }
        drained
    }

    /// Append a batch (of the table's schema; index columns are ignored).
    pub async fn write(&mut self, batch: &RecordBatch) -> Result<()> {
        for (want, have) in self.schema.fields().iter().zip(batch.schema().fields()) {
            if want.name() != have.name() || want.data_type() != have.data_type() {
                return Err(Error::InvalidArgument(format!(
                    "column '{}' of type {}: the table's column is '{}' of type {}",
                    have.name(),
                    have.data_type(),
                    want.name(),
                    want.data_type()
                )));
            }
        }
        if batch.num_columns() != self.schema.fields().len() {
            return Err(Error::InvalidArgument(format!(
                "{} columns appended to a table of {}",
                batch.num_columns(),
                self.schema.fields().len()
            )));
        }
        let columns: Vec<ArrayRef> = self
            .inputs
            .iter()
            .map(|&i| batch.column(i).clone())
            .collect();
        // A value equal to a column's NULL marker would read back as NULL: refused, as the
        // table writer refuses it next to NULLs.
        for ((c, t), values) in self.writer.columns.iter().zip(&self.targets).zip(&columns) {
            if t.null_marker && c.holds_sentinel(values)? {
                return Err(c.sentinel_refused(self.store.location()));
            }
        }
        let stored = RecordBatch::try_new(self.writer.stored_schema.clone(), columns)?;
        let written = self.writer.write(&stored).await;
        if written.is_err() {
            self.fail().await;
        }
        written
    }

    /// Write the last chunks, then the metadata with the new shape. Returns the number of rows
    /// appended.
    pub async fn finish(self) -> Result<u64> {
        Ok(self.finish_written().await?.rows)
    }

    /// [`Self::finish`], saying also which snapshot an append to an Icechunk branch committed
    /// (nothing is committed when no rows came).
    pub async fn finish_written(mut self) -> Result<Written> {
        let result = self.publish_rows().await;
        if result.is_err() {
            self.fail().await;
        }
        result
    }

    /// A failed append: its units in flight waited for, then its writes undone.
    async fn fail(&mut self) {
        self.writer.settle().await;
        self.undo();
    }

    /// A failed append's writes undone: a local table gets back the files it had (a failpoint
    /// leaves everything, as a kill would).
    fn undo(&mut self) {
        let Some(writes) = self.writes.take() else {
            return;
        };
        if self.steps.crashed() {
            return;
        }
        if !writes.roll_back() {
            log::warn!(
                "{}: the failed INSERT's writes could not all be undone",
                self.store.location()
            );
        }
        writes.finish();
    }

    /// Write the last chunks, sync them, then the metadata with the new shape.
    async fn publish_rows(&mut self) -> Result<Written> {
        let total = self.writer.rows();
        if total <= self.old_rows {
            if let Some(lock) = self.lock.take() {
                lock.release().await?;
            }
            return Ok(Written::default());
        }
        let total = self.writer.finish_chunks().await?;
        for (c, t) in self.writer.columns.iter().zip(&self.targets) {
            if c.wrote_int_nulls() && !t.null_marker {
                return Err(Error::Write {
                    path: t.path.clone(),
                    message: format!(
                        "column '{}' gets NULLs, but its array declares no _FillValue to mark \
                         them; nothing was appended",
                        t.name
                    ),
                });
            }
        }
        self.check_root_unchanged().await?;
        if let Some(lock) = &self.lock {
            lock.check_held().await?;
        }
        if let Some(writes) = &self.writes {
            writes.sync()?;
        }
        let limits = super::chunk::self_check_limits();
        self.write_array_docs(total, &limits).await?;
        // The root's consolidated metadata last: readers that use it see the new rows only now.
        let key_of: fn(&str) -> String = if self.zarr_format == 2 {
            |p| format!("{p}/.zarray")
        } else {
            |p| p.to_string()
        };
        if let Some((mut root, version)) = self.root_doc.take() {
            let entries = if self.zarr_format == 2 {
                root.get_mut("metadata")
            } else {
                root.get_mut("consolidated_metadata")
                    .and_then(|c| c.get_mut("metadata"))
            };
            if let Some(Value::Object(entries)) = entries {
                let mut changed = false;
                for t in self.targets.iter().filter(|t| !t.path.is_empty()) {
                    // The array's own document, as written above (an Icechunk table's
                    // consolidated entries are not read, and may be stale: re-made here).
                    if let Some(entry) = entries.get_mut(&key_of(&t.path)) {
                        *entry = t.doc.clone();
                        changed = true;
                    }
                    let zattrs_key = format!("{}/.zattrs", t.path);
                    if let (Some(entry), Some(zattrs)) = (entries.get_mut(&zattrs_key), &t.zattrs) {
                        *entry = zattrs.clone();
                    }
                }
                if changed {
                    let bytes = super::to_bytes("", &root)?;
                    if self.zarr_format == 3 {
                        crate::metadata::parse_v3("", &bytes, &limits)?;
                    }
                    self.steps.hit(root_doc_name(self.zarr_format))?;
                    self.put_root(bytes, version).await?;
                }
            }
        }
        let rows = total - self.old_rows;
        let snapshot = match self.transaction.take() {
            Some(t) => Some(t.commit(&format!("INSERT: {rows} rows")).await?),
            None => None,
        };
        // Published: nothing is undone from here on.
        if let Some(writes) = self.writes.take() {
            writes.finish();
        }
        if let Some(lock) = self.lock.take() {
            match lock.release().await {
                Err(e) if !self.steps.crashed() => log::warn!(
                    "the rows are appended to {}, but its writer lock could not be released: \
                     {e}",
                    self.store.location()
                ),
                other => other?,
            }
        }
        Ok(Written { rows, snapshot })
    }

    /// Write each array's metadata with the grown shape (`total` rows), marked as grown by this
    /// append ([`APPEND_ATTRIBUTE`]); on v2 the marked `.zattrs` before the `.zarray`.
    async fn write_array_docs(&mut self, total: u64, limits: &crate::ReadLimits) -> Result<()> {
        let marker = json!({"from": self.old_rows, "to": total});
        for t in &mut self.targets {
            t.doc["shape"] = json!([total]);
            let store = self.store.child(&t.path);
            let bytes = match &mut t.zattrs {
                Some(zattrs) => {
                    if let Value::Object(attrs) = zattrs {
                        attrs.insert(APPEND_ATTRIBUTE.into(), marker.clone());
                    }
                    let zattrs = super::to_bytes(&t.path, zattrs)?;
                    let bytes = super::to_bytes(&t.path, &t.doc)?;
                    crate::metadata::parse_v2_array(&t.path, &bytes, Some(&zattrs), limits)?;
                    self.steps.hit(".zattrs")?;
                    store.put(".zattrs", Bytes::from(zattrs)).await?;
                    bytes
                }
                None => {
                    if !t.doc["attributes"].is_object() {
                        t.doc["attributes"] = json!({});
                    }
                    t.doc["attributes"][APPEND_ATTRIBUTE] = marker.clone();
                    let bytes = super::to_bytes(&t.path, &t.doc)?;
                    crate::metadata::parse_v3(&t.path, &bytes, limits)?;
                    bytes
                }
            };
            let doc_name = if t.zattrs.is_some() {
                ".zarray"
            } else {
                "zarr.json"
            };
            self.steps.hit(doc_name)?;
            store.put(doc_name, Bytes::from(bytes)).await?;
        }
        Ok(())
    }

    /// Before any metadata is written: the root's document is still the version read at the
    /// start (where the store reports versions).
    async fn check_root_unchanged(&self) -> Result<()> {
        let Some((_, version)) = &self.root_doc else {
            return Ok(());
        };
        if version.e_tag.is_none() && version.version.is_none() {
            return Ok(());
        }
        let key = self.store.key(root_doc_name(self.zarr_format));
        let now = self
            .store
            .object_store()
            .head(&key)
            .await
            .map_err(|source| Error::Store {
                path: key.to_string(),
                source,
            })?;
        if now.e_tag != version.e_tag || now.version != version.version {
            return Err(changed(self.store.location(), &key));
        }
        Ok(())
    }

    /// Replace the root's document if it is still the version read at the start (where the
    /// store supports conditional writes; the writer lock covers the others).
    async fn put_root(&self, bytes: Vec<u8>, version: UpdateVersion) -> Result<()> {
        let os = self.store.object_store();
        let key = self.store.key(root_doc_name(self.zarr_format));
        let conditional = version.e_tag.is_some() || version.version.is_some();
        let put = |mode: PutMode| os.put_opts(&key, bytes.clone().into(), mode.into());
        let result = match conditional {
            true => match put(PutMode::Update(version)).await {
                Err(object_store::Error::NotImplemented { .. })
                | Err(object_store::Error::NotSupported { .. }) => put(PutMode::Overwrite).await,
                other => other,
            },
            false => put(PutMode::Overwrite).await,
        };
        match result {
            Ok(_) => Ok(()),
            Err(object_store::Error::Precondition { .. }) => {
                Err(changed(self.store.location(), &key))
            }
            Err(source) => Err(crate::store::write_err(&key, bytes.len(), source)),
        }
    }
}

impl Drop for TableAppender {
    /// An append given up before it finished (an error in a batch, a cancelled query) undoes
    /// its writes.
    fn drop(&mut self) {
        self.undo();
    }
}

fn changed(location: &str, key: &object_store::path::Path) -> Error {
    Error::Write {
        path: location.to_string(),
        message: format!(
            "{key} changed while rows were appended (another writer?); this INSERT's rows \
             were not added to the table"
        ),
    }
}

/// The root's document that carries the consolidated metadata.
fn root_doc_name(zarr_format: u8) -> &'static str {
    if zarr_format == 2 {
        ".zmetadata"
    } else {
        "zarr.json"
    }
}

/// The root's consolidated document and its version (`None` without one).
async fn read_root_doc(
    store: &ZarrStore,
    zarr_format: u8,
) -> Result<Option<(Value, UpdateVersion)>> {
    let key = store.key(root_doc_name(zarr_format));
    let os = store.object_store();
    let store_err = |source| Error::Store {
        path: key.to_string(),
        source,
    };
    let got = match os.get(&key).await {
        Ok(got) => got,
        Err(object_store::Error::NotFound { .. }) => return Ok(None),
        Err(e) => return Err(store_err(e)),
    };
    let version = UpdateVersion {
        e_tag: got.meta.e_tag.clone(),
        version: got.meta.version.clone(),
    };
    let bytes = got.bytes().await.map_err(store_err)?;
    let doc = serde_json::from_slice(&bytes).map_err(|e| Error::Write {
        path: key.to_string(),
        message: e.to_string(),
    })?;
    Ok(Some((doc, version)))
}

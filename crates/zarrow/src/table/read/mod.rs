//! The read side of a table: one [`ColumnReader`] per column, made from the table's
//! description (a [`TableModel`]) by [`ReaderBuilder`]; what each holds loaded (a sparse
//! matrix's `indptr`, a categorical's categories) lives here, for the reader's life.
//!
//! ```text
//!  TableModel (pure description) ─▶ TableReader::new ─▶ per column, by its source:
//!      Index ─ IndexReader        Plain ─ PlainReader (fill → NULL, CF)   (plain.rs)
//!      Masked ─ MaskedReader      Categorical ─ CategoricalReader         (categorical.rs)
//!      SparseMajor / SparseMinor ─ positions from `indptr` / `indices`   (sparse.rs)
//!  per chunk of rows: fetch_ahead (stored bytes of the aligned plain columns)
//!      ─▶ column_runs ─▶ ColumnRuns: decoded a batch at a time, or read whole and sliced
//! ```
//!
//! Columns whose array follows the driver's chunking ("aligned") are fetched ahead by the scan
//! and decoded a batch at a time ([`ColumnRuns::Runs`]); the others are read whole for the
//! chunk's box, through the scan's cache, and sliced ([`ColumnRuns::Whole`]). Columns the
//! `dictionary` option names are encoded a batch at a time as they are cut
//! ([`ColumnRuns::Dictionary`], `dictionary.rs`).

mod categorical;
pub(crate) mod dictionary;
mod plain;
mod sparse;

pub use sparse::MajorOffsets;

use std::borrow::Cow;
use std::sync::Arc;

use arrow_array::{ArrayRef, Int64Array};
use bytes::Bytes;
use futures::future::BoxFuture;

use super::layout::{broadcast, index_run, index_values};
use super::{ColumnRole, ColumnSource, TableColumn, TableModel};
use crate::array::{ChunkReader, ReadContext, ZarrArray};
use crate::grid::{ChunkGrid, ChunkRanges};
use crate::options::ZarrReadOptions;
use crate::{Error, Result};

/// A box of a table's rows: `start .. start + shape` along each table dimension (C order).
#[derive(Debug, Clone)]
pub(crate) struct RowBox {
    pub(crate) start: Vec<u64>,
    pub(crate) shape: Vec<u64>,
}

/// A column's values being read.
pub(crate) type Values<'a> = BoxFuture<'a, Result<ArrayRef>>;
/// What a chunk's batches of a column are cut from, being read.
pub(crate) type Runs<'a> = BoxFuture<'a, Result<ColumnRuns>>;
/// A column's check being made.
pub(crate) type Checked<'a> = BoxFuture<'a, Result<()>>;

/// Reads one column of a table over boxes of rows. One per column, made by [`ReaderBuilder`];
/// called per column per chunk of rows (never per value).
pub(crate) trait ColumnReader: Send + Sync {
    /// The column's values over `rows`, decoded whole, in C order of the box.
    fn read<'a>(&'a self, rows: &'a RowBox, ctx: &'a ReadContext) -> Values<'a>;

    /// What the batches of chunk `coords` (its box `rows`) are cut from; `ahead` is what the
    /// scan fetched of it. By default the column is read whole for the box and sliced.
    fn runs<'a>(
        &'a self,
        coords: &'a [u64],
        rows: &'a RowBox,
        ahead: AheadChunk,
        ctx: &'a ReadContext,
    ) -> Runs<'a> {
        let _ = (coords, ahead);
        Box::pin(async move { self.read(rows, ctx).await.map(ColumnRuns::Whole) })
    }

    /// The array whose chunks a scan fetches ahead for this column (a plain array following
    /// the driver's chunking), if any.
    fn fetched_ahead(&self) -> Option<&ZarrArray> {
        None
    }

    /// Checks what must be valid over `rows` even when the column is not projected (a sparse
    /// matrix's `indptr` and `indices`); nothing by default.
    fn check<'a>(&'a self, rows: &'a RowBox, ctx: &'a ReadContext) -> Checked<'a> {
        let _ = (rows, ctx);
        Box::pin(async { Ok(()) })
    }
}

/// What a scan fetched ahead for one projected column of a chunk of rows.
#[derive(Debug, Clone)]
pub(crate) enum AheadChunk {
    /// Nothing: the column is read when the chunk's turn comes.
    NotFetched,
    /// The stored bytes of the column's chunk.
    Stored(Bytes),
    /// The column's chunk is not stored: it is the fill value.
    Missing,
}

impl AheadChunk {
    /// The bytes fetched.
    pub(crate) fn stored_len(&self) -> usize {
        match self {
            AheadChunk::Stored(bytes) => bytes.len(),
            AheadChunk::NotFetched | AheadChunk::Missing => 0,
        }
    }
}

/// What one column of a chunk's batches is cut from.
pub(crate) enum ColumnRuns {
    /// Decoded a run of rows at a time; `map` (if any) applied to each run.
    Runs(Box<ChunkReader>, Option<RunMap>),
    /// The column's rows for the whole chunk, sliced.
    Whole(ArrayRef),
    /// Int64 positions along table dimension `dim` of the chunk's box, made a run at a time
    /// (see [`index_run`]).
    Index { rows: RowBox, dim: usize },
    /// Each batch cut from the inner runs, as a dictionary of its distinct values (the
    /// `dictionary` option).
    Dictionary(Box<ColumnRuns>),
}

impl ColumnRuns {
    /// Rows `offset .. offset + k` of the chunk's column.
    pub(crate) fn next_rows(&mut self, offset: usize, k: usize) -> Result<ArrayRef> {
        match self {
            ColumnRuns::Runs(reader, map) => {
                let run = reader.next_rows(k)?;
                match map {
                    Some(map) => map(run),
                    None => Ok(run),
                }
            }
            ColumnRuns::Whole(array) => Ok(array.slice(offset, k)),
            ColumnRuns::Index { rows, dim } => {
                Ok(index_run(&rows.start, &rows.shape, *dim, offset, k))
            }
            ColumnRuns::Dictionary(runs) => dictionary::encode(&runs.next_rows(offset, k)?),
        }
    }

    /// The bytes held decoded for the whole chunk (what [`ColumnRuns::Whole`] holds).
    pub(crate) fn held_bytes(&self) -> usize {
        match self {
            ColumnRuns::Whole(array) => array.get_array_memory_size(),
            ColumnRuns::Dictionary(runs) => runs.held_bytes(),
            ColumnRuns::Runs(..) | ColumnRuns::Index { .. } => 0,
        }
    }
}

/// What is applied to each run of a column decoded run by run (e.g. fill values → NULL).
pub(crate) type RunMap = Arc<dyn Fn(ArrayRef) -> Result<ArrayRef> + Send + Sync>;

/// Where a column's array lies in the table: array dimension `i` is table dimension `map[i]`;
/// `aligned` when the array follows the driver's chunking (its chunk `k` is the table's).
#[derive(Debug, Clone)]
pub(crate) struct Placement {
    map: Vec<usize>,
    aligned: bool,
}

impl Placement {
    /// The box of the column's array under the table's box `rows`.
    pub(crate) fn array_box(&self, rows: &RowBox) -> (Vec<u64>, Vec<u64>) {
        let start = self.map.iter().map(|&t| rows.start[t]).collect();
        let shape = self.map.iter().map(|&t| rows.shape[t]).collect();
        (start, shape)
    }

    /// The array's values over its box, laid out over the table's box `rows`.
    pub(crate) fn lay_out(&self, values: ArrayRef, rows: &RowBox) -> Result<ArrayRef> {
        broadcast(values, &rows.shape, &self.map)
    }

    /// The context the array is read in: an aligned array's chunks are read once per chunk of
    /// rows, so they skip the cache; the others go through it.
    pub(crate) fn context<'c>(&self, ctx: &'c ReadContext) -> Cow<'c, ReadContext> {
        if self.aligned && ctx.cache.is_some() {
            Cow::Owned(ReadContext {
                cache: None,
                ..ctx.clone()
            })
        } else {
            Cow::Borrowed(ctx)
        }
    }

    /// Reads the array's box under `rows`, laid out over the table's box.
    pub(crate) async fn read(
        &self,
        array: &ZarrArray,
        rows: &RowBox,
        ctx: &ReadContext,
    ) -> Result<ArrayRef> {
        let (start, shape) = self.array_box(rows);
        array
            .read_region_in(&start, &shape, &self.context(ctx))
            .await
    }
}

/// The Int64 position along table dimension `dim`.
struct IndexReader {
    dim: usize,
}

impl ColumnReader for IndexReader {
    fn read<'a>(&'a self, rows: &'a RowBox, _: &'a ReadContext) -> Values<'a> {
        Box::pin(async move { Ok(index_values(&rows.start, &rows.shape, self.dim)) })
    }

    fn runs<'a>(
        &'a self,
        _: &'a [u64],
        rows: &'a RowBox,
        _: AheadChunk,
        _: &'a ReadContext,
    ) -> Runs<'a> {
        let runs = ColumnRuns::Index {
            rows: rows.clone(),
            dim: self.dim,
        };
        Box::pin(async move { Ok(runs) })
    }
}

/// Makes each column's reader from its description (in the spirit of arrow-rs's
/// `ArrayReaderBuilder`).
pub(crate) struct ReaderBuilder<'m> {
    model: &'m TableModel,
}

impl<'m> ReaderBuilder<'m> {
    pub(crate) fn new(model: &'m TableModel) -> Self {
        ReaderBuilder { model }
    }

    /// Where column `c`'s array lies in the table.
    fn placement(&self, c: &TableColumn) -> Placement {
        let ndim = self.model.dimensions().len();
        let map: Vec<usize> = match &c.role {
            ColumnRole::Index(d) | ColumnRole::Coordinate(d) => vec![*d],
            ColumnRole::Data(m) => m.clone(),
        };
        let aligned = matches!(&c.role, ColumnRole::Data(m)
            if m.len() == ndim && m.iter().enumerate().all(|(i, &t)| i == t))
            && (c.source_kind().main_array()).is_some_and(|a| a.grid() == self.model.grid());
        Placement { map, aligned }
    }

    /// The reader of column `c`; a sparse matrix's `indptr`, if the column is read from one,
    /// shared with the table's reader.
    pub(crate) fn build(
        &self,
        c: &TableColumn,
    ) -> (Box<dyn ColumnReader>, Option<Arc<sparse::Indptr>>) {
        let at = self.placement(c);
        let reader: Box<dyn ColumnReader> = match c.source_kind() {
            ColumnSource::Index => Box::new(IndexReader {
                dim: match c.role {
                    ColumnRole::Index(d) => d,
                    _ => 0,
                },
            }),
            ColumnSource::Plain { array, fill, cf } => Box::new(plain::PlainReader::new(
                array.clone(),
                fill.clone(),
                cf.clone(),
                at,
            )),
            ColumnSource::Masked { values, mask } => {
                Box::new(plain::MaskedReader::new(values.clone(), mask.clone(), at))
            }
            ColumnSource::Categorical {
                codes, categories, ..
            } => Box::new(categorical::CategoricalReader::new(
                codes.clone(),
                categories.clone(),
                at,
            )),
            ColumnSource::SparseMajor { indptr, nnz } => {
                let indptr = Arc::new(sparse::Indptr::new(indptr.clone(), *nnz));
                return (
                    Box::new(sparse::MajorReader::new(indptr.clone(), at)),
                    Some(indptr),
                );
            }
            ColumnSource::SparseMinor { indices, size } => {
                Box::new(sparse::MinorReader::new(indices.clone(), *size, at))
            }
        };
        (reader, None)
    }
}

/// Reads a table: its columns' readers, and what they hold loaded. A scan's stream makes one;
/// so do pruning (dimension values) and appending (the last partial unit).
///
/// ```
/// use arrow_array::Array;
/// use zarrow::table::TableReader;
/// use zarrow::{ReadContext, TableModel, TableOptions, ZarrReadOptions};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> zarrow::Result<()> {
/// let x = concat!(env!("CARGO_MANIFEST_DIR"), "/../../data/pbmc_sample.zarr/X");
/// let model = TableModel::open(x, TableOptions::default()).await?;
/// let reader = TableReader::new(&model);
/// // Any box of the table's dimensions: here 3 rows × 2 columns of the matrix.
/// let value = model.column_index("X")?;
/// let options = ZarrReadOptions::default();
/// let values = reader.read_column_region(value, &[10, 5], &[3, 2], &options).await?;
/// assert_eq!(values.len(), 6);
/// // A dimension's whole coordinate: what filters on it are pruned with.
/// let cells = reader.read_dimension_values(0, &ReadContext::new(options)).await?;
/// assert_eq!(cells.len(), 2000);
/// # Ok(())
/// # }
/// ```
pub struct TableReader {
    location: String,
    grid: ChunkGrid,
    dims: Vec<u64>,
    roles: Vec<ColumnRole>,
    /// Whether each column's batches are encoded as dictionaries (the `dictionary` option).
    dictionary: Vec<bool>,
    readers: Vec<Box<dyn ColumnReader>>,
    /// A sparse matrix's `indptr`: the column of the compressed dimension's.
    indptr: Option<Arc<sparse::Indptr>>,
}

impl std::fmt::Debug for TableReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TableReader")
            .field("location", &self.location)
            .field("columns", &self.readers.len())
            .finish()
    }
}

impl TableReader {
    /// The reader of `model`'s columns.
    pub fn new(model: &TableModel) -> Self {
        let builder = ReaderBuilder::new(model);
        let mut indptr = None;
        let readers = (model.columns().iter())
            .map(|c| {
                let (reader, held) = builder.build(c);
                indptr = indptr.take().or(held);
                reader
            })
            .collect();
        TableReader {
            location: model.location().to_string(),
            grid: model.grid().clone(),
            dims: model.shape(),
            roles: model.columns().iter().map(|c| c.role.clone()).collect(),
            dictionary: (model.columns().iter())
                .map(|c| c.encoded_as_dictionary(model.options()))
                .collect(),
            readers,
            indptr,
        }
    }

    fn reader(&self, column: usize) -> Result<&dyn ColumnReader> {
        self.readers
            .get(column)
            .map(|r| r.as_ref())
            .ok_or_else(|| Error::InvalidArgument(format!("column {column} out of range")))
    }

    /// The values of column `column` over the box `start .. start + shape` of the table's
    /// dimensions, in C order (broadcast where the column has fewer dimensions).
    pub async fn read_column_region(
        &self,
        column: usize,
        start: &[u64],
        shape: &[u64],
        opts: &ZarrReadOptions,
    ) -> Result<ArrayRef> {
        let rows = RowBox {
            start: start.to_vec(),
            shape: shape.to_vec(),
        };
        (self.reader(column)?)
            .read(&rows, &ReadContext::new(opts.clone()))
            .await
    }

    /// If dimension `dim`'s coordinate is a sparse matrix's compressed dimension, its
    /// `indptr` (read once, checked): the positions' bounds over any run of rows, without
    /// reading the positions themselves.
    pub async fn sparse_offsets(
        &self,
        dim: usize,
        ctx: &ReadContext,
    ) -> Result<Option<MajorOffsets>> {
        if !self.roles.contains(&ColumnRole::Coordinate(dim)) {
            return Ok(None);
        }
        match &self.indptr {
            Some(indptr) => Ok(Some(indptr.load(ctx).await?)),
            None => Ok(None),
        }
    }

    /// The whole coordinate (or index) column of dimension `dim`, decoded: what filters on
    /// that dimension are pruned with.
    pub async fn read_dimension_values(&self, dim: usize, ctx: &ReadContext) -> Result<ArrayRef> {
        // The coordinate if there is one (an AnnData dataframe has both), else the index.
        let size = *self
            .dims
            .get(dim)
            .ok_or_else(|| Error::InvalidArgument(format!("no dimension {dim}")))?;
        let column = (self.roles.iter())
            .position(|r| *r == ColumnRole::Coordinate(dim))
            .or_else(|| self.roles.iter().position(|r| *r == ColumnRole::Index(dim)))
            .ok_or_else(|| Error::InvalidArgument(format!("no dimension {dim}")))?;
        if let ColumnRole::Index(_) = self.roles[column] {
            return Ok(Arc::new(Int64Array::from_iter_values(0..size as i64)));
        }
        let mut rows = RowBox {
            start: vec![0; self.dims.len()],
            shape: vec![1; self.dims.len()],
        };
        rows.shape[dim] = size;
        self.reader(column)?.read(&rows, ctx).await
    }

    /// The array of column `i` if it is a plain array following the driver's chunking: one
    /// whose chunks a scan fetches ahead and decodes a batch at a time.
    pub(crate) fn fetched_ahead(&self, i: usize) -> Option<&ZarrArray> {
        self.readers.get(i)?.fetched_ahead()
    }

    /// What each chunk of rows of `chunks` stores, summed over the projected columns a scan
    /// fetches ahead (see [`Self::fetched_ahead`]; each array listed once, at most
    /// `max_objects` objects): what a scan's partitions are balanced by. `None` when no
    /// projected column is fetched ahead or a listing does not tell.
    pub(crate) async fn stored_bytes(
        &self,
        chunks: &ChunkRanges,
        projection: &[usize],
        max_objects: usize,
    ) -> Option<Vec<u64>> {
        let arrays: Vec<&ZarrArray> = projection
            .iter()
            .filter_map(|&i| self.fetched_ahead(i))
            .collect();
        if arrays.is_empty() {
            return None;
        }
        let listings = arrays.iter().map(|a| a.stored_sizes(chunks, max_objects));
        let listings = futures::future::join_all(listings).await;
        let mut total = vec![0u64; usize::try_from(chunks.len()).ok()?];
        for sizes in listings {
            for (t, s) in total.iter_mut().zip(sizes?) {
                *t = t.saturating_add(s);
            }
        }
        Some(total)
    }

    /// The stored bytes of chunk `coords` of each projected column a scan fetches ahead
    /// (see [`Self::fetched_ahead`]); [`AheadChunk::NotFetched`] for the others, which
    /// [`Self::column_runs`] reads whole.
    pub(crate) async fn fetch_ahead(
        &self,
        coords: &[u64],
        projection: &[usize],
        ctx: &ReadContext,
    ) -> Result<Vec<AheadChunk>> {
        let reads = projection.iter().map(|&i| async move {
            let Some(array) = self.fetched_ahead(i) else {
                return Ok(AheadChunk::NotFetched);
            };
            Ok(match array.fetch_chunk_in(coords, ctx).await? {
                Some(bytes) => AheadChunk::Stored(bytes),
                None => AheadChunk::Missing,
            })
        });
        futures::future::try_join_all(reads).await
    }

    /// The bytes a scan of this table holds whole for its life, whatever it projects: a
    /// sparse matrix's `indptr` (its offsets as i64, and as read while they are converted).
    pub(crate) fn held_whole_bytes(&self) -> u64 {
        self.indptr.as_ref().map_or(0, |i| i.held_bytes())
    }

    /// What each projected column of chunk `coords` is cut from. Columns fetched ahead come
    /// from `ahead` (from [`Self::fetch_ahead`]) and are decoded a batch at a time; the
    /// others are read whole for the chunk's box, through the context's cache. Columns not
    /// projected are checked where they must be (a sparse matrix's).
    pub(crate) async fn column_runs(
        &self,
        coords: &[u64],
        projection: &[usize],
        ahead: Vec<AheadChunk>,
        ctx: &ReadContext,
    ) -> Result<Vec<ColumnRuns>> {
        let (start, shape) = self
            .grid
            .chunk_box(coords)
            .map_err(|e| e.in_array(&self.location))?;
        let rows = RowBox { start, shape };
        for (i, reader) in self.readers.iter().enumerate() {
            if !projection.contains(&i) {
                reader.check(&rows, ctx).await?;
            }
        }
        let reads = projection.iter().zip(ahead).map(|(&i, ahead)| {
            let rows = &rows;
            async move {
                let runs = self.reader(i)?.runs(coords, rows, ahead, ctx).await?;
                Ok(match self.dictionary.get(i) {
                    Some(true) => ColumnRuns::Dictionary(Box::new(runs)),
                    _ => runs,
                })
            }
        });
        futures::future::try_join_all(reads).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::array::ChunkCache;
    use crate::table::TableOptions;
    use crate::test_util::fixture;

    /// The readers of one scan (its partitions, its pruning) share what they hold whole: a
    /// sparse matrix's `indptr` is fetched once, whichever reader asks first.
    #[tokio::test]
    async fn readers_sharing_a_cache_read_indptr_once() {
        let location = fixture("anndata_sparse_v3.zarr/X");
        let model = TableModel::open(&location, TableOptions::default())
            .await
            .unwrap();
        // No room for decoded chunks: what is held whole is held all the same.
        let ctx = ReadContext {
            cache: Some(Arc::new(ChunkCache::new(0))),
            ..ReadContext::default()
        };
        let first = TableReader::new(&model);
        let offsets = first.sparse_offsets(0, &ctx).await.unwrap().unwrap();
        let requests = ctx.metrics.counts().requests;
        assert!(requests > 0);
        let second = TableReader::new(&model);
        let again = second.sparse_offsets(0, &ctx).await.unwrap().unwrap();
        assert_eq!(ctx.metrics.counts().requests, requests);
        assert_eq!(offsets.position_bounds(0..1), again.position_bounds(0..1));
        // Without a shared cache, each reader reads its own.
        let alone = ReadContext {
            metrics: ctx.metrics.clone(),
            ..ReadContext::default()
        };
        TableReader::new(&model)
            .sparse_offsets(0, &alone)
            .await
            .unwrap();
        assert!(ctx.metrics.counts().requests > requests);
    }
}

//! Reading a table's columns over a chunk's box of rows: each column by its source (a plain
//! array with its fill/CF handling, an AnnData masked or categorical group, an index), laid out
//! over the box (`layout.rs`).
//!
//! Columns whose array follows the driver's chunking ("aligned") are fetched ahead by the scan
//! and decoded a batch at a time ([`ColumnRuns::Runs`]); the others are read whole for the
//! chunk's box, through the scan's cache, and sliced ([`ColumnRuns::Whole`]).

use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::{ArrayRef, Int64Array};
use bytes::Bytes;

use super::cf::{equals_scalar, null_where, CfDecode};
use super::layout::{broadcast, index_values};
use super::{anndata, sparse, ColumnRole, SourceKind, TableColumn, TableModel};
use crate::array::{ChunkReader, ReadContext, ZarrArray};
use crate::options::ZarrReadOptions;
use crate::{Error, Result};

/// What one column of a chunk's batches is cut from.
pub(crate) enum ColumnRuns {
    /// Decoded a run of rows at a time; `map` (if any) applied to each run.
    Runs(Box<ChunkReader>, Option<RunMap>),
    /// The column's rows for the whole chunk, sliced.
    Whole(ArrayRef),
    /// Int64 positions along table dimension `dim` of the chunk's box `start .. start +
    /// shape`, made a run at a time (see [`super::layout::index_run`]).
    Index {
        start: Vec<u64>,
        shape: Vec<u64>,
        dim: usize,
    },
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
            ColumnRuns::Index { start, shape, dim } => {
                Ok(super::layout::index_run(start, shape, *dim, offset, k))
            }
        }
    }
}

/// What is applied to each run of a column decoded run by run (e.g. fill values → NULL).
pub(crate) type RunMap = Arc<dyn Fn(ArrayRef) -> Result<ArrayRef> + Send + Sync>;

/// What [`TableModel::fetch_aligned`] fetched for each projected column.
pub(crate) type Fetched = Vec<Option<Option<Bytes>>>;

impl TableModel {
    /// The values of column `column` over the box `start .. start + shape` of the table's
    /// dimensions, in C order (broadcast where the column has fewer dimensions).
    pub async fn read_column_region(
        &self,
        column: usize,
        start: &[u64],
        shape: &[u64],
        opts: &ZarrReadOptions,
    ) -> Result<ArrayRef> {
        self.read_column(column, start, shape, &ReadContext::new(opts.clone()))
            .await
    }

    /// If dimension `dim`'s coordinate is a sparse matrix's compressed dimension, its
    /// `indptr` (read once, checked): the positions' bounds over any run of rows, without
    /// reading the positions themselves.
    pub async fn sparse_offsets(
        &self,
        dim: usize,
        ctx: &ReadContext,
    ) -> Result<Option<super::MajorOffsets>> {
        let Some(column) = (self.columns.iter()).find(|c| c.role == ColumnRole::Coordinate(dim))
        else {
            return Ok(None);
        };
        let SourceKind::SparseMajor {
            indptr,
            nnz,
            loaded,
        } = &column.kind
        else {
            return Ok(None);
        };
        Ok(Some(
            sparse::loaded_indptr(loaded, indptr, *nnz, ctx)
                .await?
                .into(),
        ))
    }

    /// The whole coordinate (or index) column of dimension `dim`, decoded: what filters on
    /// that dimension are pruned with.
    pub async fn read_dimension_values(&self, dim: usize, ctx: &ReadContext) -> Result<ArrayRef> {
        // The coordinate if there is one (an AnnData dataframe has both), else the index.
        let column = (self.columns.iter())
            .position(|c| c.role == ColumnRole::Coordinate(dim))
            .or_else(|| (self.columns.iter()).position(|c| c.role == ColumnRole::Index(dim)))
            .ok_or_else(|| Error::InvalidArgument(format!("no dimension {dim}")))?;
        match &self.columns[column].kind {
            SourceKind::Index => {
                let size = self.dims[dim].size as i64;
                Ok(Arc::new(Int64Array::from_iter_values(0..size)))
            }
            _ => {
                let mut start = vec![0u64; self.dims.len()];
                let mut shape = vec![1u64; self.dims.len()];
                start[dim] = 0;
                shape[dim] = self.dims[dim].size;
                self.read_column(column, &start, &shape, ctx).await
            }
        }
    }

    /// Does column `c` follow the driver's chunking (its array spans the table dimensions in
    /// order, in chunks of the driver's shape)? Then the table's chunk `k` is exactly its
    /// array's chunk `k`.
    fn is_aligned(&self, c: &TableColumn) -> bool {
        let ColumnRole::Data(map) = &c.role else {
            return false;
        };
        map.len() == self.dims.len()
            && map.iter().enumerate().all(|(i, &t)| i == t)
            && c.kind
                .main_array()
                .is_some_and(|a| a.chunk_shape() == self.grid.chunk_shape())
    }

    /// The stored bytes of chunk `coords` of each projected column that is a plain array
    /// following the driver's chunking (`Some`; the inner `None`: not stored, the fill
    /// value); `None` for the other columns, which [`Self::column_runs`] reads whole.
    pub(crate) async fn fetch_aligned(
        &self,
        coords: &[u64],
        projection: &[usize],
        ctx: &ReadContext,
    ) -> Result<Fetched> {
        let reads = projection.iter().map(|&i| async move {
            match self.fetched_ahead(i) {
                Some(array) => array.fetch_chunk_in(coords, ctx).await.map(Some),
                None => Ok(None),
            }
        });
        futures::future::try_join_all(reads).await
    }

    /// The array of column `i` if it is a plain array following the driver's chunking: one
    /// whose chunks a scan fetches ahead and decodes a batch at a time.
    pub(crate) fn fetched_ahead(&self, i: usize) -> Option<&ZarrArray> {
        match self.columns.get(i) {
            Some(
                c @ TableColumn {
                    kind: SourceKind::Plain { array, .. },
                    ..
                },
            ) if self.is_aligned(c) => Some(array),
            _ => None,
        }
    }

    /// Column `column` over the box `start .. start + shape`, decoded whole.
    async fn read_column(
        &self,
        column: usize,
        start: &[u64],
        shape: &[u64],
        ctx: &ReadContext,
    ) -> Result<ArrayRef> {
        let c = self
            .columns
            .get(column)
            .ok_or_else(|| Error::InvalidArgument(format!("column {column} out of range")))?;
        let map: Vec<usize> = match &c.role {
            ColumnRole::Index(d) => return Ok(index_values(start, shape, *d)),
            ColumnRole::Coordinate(d) => vec![*d],
            ColumnRole::Data(m) => m.clone(),
        };
        let a_start: Vec<u64> = map.iter().map(|&t| start[t]).collect();
        let a_shape: Vec<u64> = map.iter().map(|&t| shape[t]).collect();
        // Arrays that follow the driver's chunking are read once per chunk; others go
        // through the cache.
        let uncached;
        let ctx = if self.is_aligned(c) && ctx.cache.is_some() {
            uncached = ReadContext {
                cache: None,
                ..ctx.clone()
            };
            &uncached
        } else {
            ctx
        };
        let values = match &c.kind {
            SourceKind::Index => return Ok(index_values(start, shape, 0)),
            SourceKind::Plain { array, fill, cf } => {
                let v = array.read_region_in(&a_start, &a_shape, ctx).await?;
                plain_values(array, fill.as_ref(), cf.as_ref(), v)?
            }
            SourceKind::Masked { values, mask } => {
                let (v, m) = futures::try_join!(
                    values.read_region_in(&a_start, &a_shape, ctx),
                    mask.read_region_in(&a_start, &a_shape, ctx)
                )?;
                null_where(v, m.as_boolean())?
            }
            SourceKind::SparseMajor {
                indptr,
                nnz,
                loaded,
            } => {
                let offsets = sparse::loaded_indptr(loaded, indptr, *nnz, ctx).await?;
                sparse::major_positions(&offsets, a_start[0], a_shape[0], indptr.path())?
            }
            SourceKind::SparseMinor { indices, size } => {
                let v = indices.read_region_in(&a_start, &a_shape, ctx).await?;
                sparse::minor_positions(v, *size, indices, a_start[0])?
            }
            SourceKind::Categorical {
                codes,
                categories,
                loaded,
                ..
            } => {
                let cats = loaded
                    .get_or_try_init(|| async {
                        let n = categories.shape().first().copied().unwrap_or(0);
                        let n = anndata::addressable_categories(&codes.metadata().data_type, n);
                        categories.read_prefix_in(n, ctx).await
                    })
                    .await?
                    .clone();
                let k = codes.read_region_in(&a_start, &a_shape, ctx).await?;
                anndata::dictionary(codes.path(), k, cats)?
            }
        };
        broadcast(values, shape, &map)
    }

    /// A sparse matrix's `indptr` and its `indices` over the box `start .. start + shape`
    /// checked where their columns are not projected (projected, reading them checks them):
    /// stored elements are handed out only from a valid matrix, whichever columns are asked
    /// for. `indptr` is read once per table; `indices` are as many as the values read.
    async fn check_sparse(
        &self,
        start: &[u64],
        shape: &[u64],
        projection: &[usize],
        ctx: &ReadContext,
    ) -> Result<()> {
        for (i, c) in self.columns.iter().enumerate() {
            if projection.contains(&i) {
                continue;
            }
            match &c.kind {
                SourceKind::SparseMajor {
                    indptr,
                    nnz,
                    loaded,
                } => {
                    sparse::loaded_indptr(loaded, indptr, *nnz, ctx).await?;
                }
                SourceKind::SparseMinor { .. } => {
                    self.read_column(i, start, shape, ctx).await?;
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// The bytes a scan of this table holds whole for its life, whatever it projects: a
    /// sparse matrix's `indptr` (its offsets as i64, and as read while they are converted).
    pub(crate) fn held_whole_bytes(&self) -> u64 {
        self.columns
            .iter()
            .map(|c| match &c.kind {
                SourceKind::SparseMajor { indptr, .. } => {
                    let n = indptr.shape()[0];
                    let item = indptr.metadata().data_type.fixed_size().unwrap_or(8) as u64;
                    n.saturating_mul(8 + item)
                }
                _ => 0,
            })
            .fold(0, u64::saturating_add)
    }

    /// What each projected column of chunk `coords` is cut from. Columns that follow the
    /// driver's chunking come from `fetched` (their stored bytes, from
    /// [`Self::fetch_aligned`]) and are decoded a batch at a time; the others are read whole
    /// for the chunk's box, through the context's cache.
    pub(crate) async fn column_runs(
        &self,
        coords: &[u64],
        projection: &[usize],
        fetched: Fetched,
        ctx: &ReadContext,
    ) -> Result<Vec<ColumnRuns>> {
        let (start, shape) = self.chunk_region(coords)?;
        self.check_sparse(&start, &shape, projection, ctx).await?;
        let reads = projection.iter().zip(fetched).map(|(&i, stored)| {
            let (start, shape) = (&start, &shape);
            async move {
                let column = self.columns.get(i);
                let index_dim = match column.map(|c| (&c.role, &c.kind)) {
                    Some((ColumnRole::Index(d), _)) => Some(*d),
                    Some((_, SourceKind::Index)) => Some(0),
                    _ => None,
                };
                if let Some(dim) = index_dim {
                    return Ok(ColumnRuns::Index {
                        start: start.clone(),
                        shape: shape.clone(),
                        dim,
                    });
                }
                match (column.map(|c| &c.kind), stored) {
                    (Some(SourceKind::Plain { array, fill, cf }), Some(stored)) => {
                        let started = std::time::Instant::now();
                        let reader = array.chunk_reader_in(coords, stored, ctx).await?;
                        ctx.metrics.add_decode(started.elapsed());
                        let map = (fill.is_some() || cf.is_some()).then(|| {
                            let (array, fill, cf) = (array.clone(), fill.clone(), cf.clone());
                            Arc::new(move |v| plain_values(&array, fill.as_ref(), cf.as_ref(), v))
                                as RunMap
                        });
                        Ok(ColumnRuns::Runs(Box::new(reader), map))
                    }
                    _ => self
                        .read_column(i, start, shape, ctx)
                        .await
                        .map(ColumnRuns::Whole),
                }
            }
        });
        futures::future::try_join_all(reads).await
    }
}

/// Elements of a plain array's column as the table shows them: equal to the fill value → NULL
/// (`fill`, the `fill_as_null` option), then the CF conventions (`cf`, `decode_cf`).
fn plain_values(
    array: &ZarrArray,
    fill: Option<&ArrayRef>,
    cf: Option<&CfDecode>,
    mut v: ArrayRef,
) -> Result<ArrayRef> {
    if let Some(fill) = fill {
        if let Some(mask) = equals_scalar(v.as_ref(), fill.as_ref()) {
            v = null_where(v, &mask)?;
        }
    }
    if let Some(cf) = cf {
        v = cf.apply(array.path(), v)?;
    }
    Ok(v)
}

//! The pipeline every scan runs: fetch chunks ahead, decode the one being handed out a batch
//! at a time.
//!
//! ```text
//!  chunks (ChunkRanges, C order) ─▶ limit: rows to take of each chunk
//!     ─▶ stage 1: stored bytes of the aligned columns of the chunks ahead, `concurrency`
//!                 array chunks in flight (from a local file, fewer while that keeps the
//!                 decoder fed, see ahead.rs; under a memory limit, as many as the budget
//!                 grants, see memory.rs), each fetch a task of its own (task.rs)
//!     ─▶ stage 2: the chunk being handed out: aligned columns decoded a batch at a time
//!                 (decode/rows.rs), the others read whole for the chunk's box (through the
//!                 scan's cache) and sliced ─▶ RecordBatch of ≤ batch_size rows
//!                 (with `decode_ahead` = n: the n chunks after it decoded at once, each a
//!                 task on the runtime's workers, up to DECODE_AHEAD_BYTES of each, the rest
//!                 a batch at a time as it is handed out; in order)
//! ```
//!
//! What is buffered ahead is compressed bytes; a batch is decoded when it is asked for, so the
//! consumer reads it while it is in the CPU cache. A stream that runs alone on several cores
//! (`ScanContext::for_partitions`) trades that for the idle cores: it decodes chunks ahead of
//! its consumer (up to `DECODE_AHEAD_BYTES` of each), as many at once as its share of the
//! cores, when its memory is not bounded.

use std::sync::Arc;

use arrow_array::{RecordBatch, RecordBatchOptions};
use arrow_schema::SchemaRef;
use futures::stream::BoxStream;
use futures::{StreamExt, TryStreamExt};

use super::ahead::ReadAhead;
use super::memory::{Budget, Held};
use super::{ChunkFilter, ScanContext, ZarrScan};
use crate::array::ReadContext;
use crate::metrics::ScanMetrics;
use crate::table::read::{AheadChunk, ColumnRuns};
use crate::table::{TableModel, TableReader};
use crate::task::in_background;
use crate::{Error, Result};

/// A stream of record batches: a scan being read.
///
/// ```
/// use futures::TryStreamExt;
/// use zarrow::{TableModel, TableOptions, ZarrScan};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> zarrow::Result<()> {
/// let var = concat!(env!("CARGO_MANIFEST_DIR"), "/../../data/pbmc_sample.zarr/var");
/// let mut scan = ZarrScan::new(&TableModel::open(var, TableOptions::default()).await?);
/// scan.batch_size = 64;
/// let mut stream = scan.open().await?;
/// let schema = stream.schema();
/// let mut rows = 0;
/// while let Some(batch) = stream.try_next().await? {
///     assert_eq!(batch.schema(), schema);
///     assert!(batch.num_rows() <= 64);
///     rows += batch.num_rows() as u64;
/// }
/// // What the scan did: opening the table (metadata), then the chunks.
/// let counts = stream.metrics().counts();
/// assert_eq!((rows, counts.rows_out), (200, 200));
/// assert!(counts.metadata_requests > 0 && counts.requests > 0);
/// # Ok(())
/// # }
/// ```
pub struct ZarrRecordBatchStream {
    schema: SchemaRef,
    metrics: ScanMetrics,
    inner: BoxStream<'static, Result<RecordBatch>>,
    /// The memory reserved for what the table holds whole, given back with the stream.
    _whole: Held,
}

impl std::fmt::Debug for ZarrRecordBatchStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ZarrRecordBatchStream")
            .field("schema", &self.schema)
            .finish()
    }
}

impl ZarrRecordBatchStream {
    /// The schema of every batch.
    pub fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }

    /// What the scan has done so far.
    pub fn metrics(&self) -> &ScanMetrics {
        &self.metrics
    }
}

impl futures::Stream for ZarrRecordBatchStream {
    type Item = Result<RecordBatch>;

    fn poll_next(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Self::Item>> {
        self.inner.poll_next_unpin(cx)
    }
}

/// The stream of `scan` over `model`, `projection` being its columns' indices.
pub(super) fn open(
    scan: &ZarrScan,
    model: Arc<TableModel>,
    projection: Vec<usize>,
    ctx: ScanContext,
) -> Result<ZarrRecordBatchStream> {
    let schema = model.projected_schema(&projection)?;
    let metrics = ctx.metrics.clone();
    // A chunk filter applies to a scan without a limit (a limit's rows are the first ones).
    let filter = ctx.chunk_filter.clone().filter(|_| scan.limit.is_none());
    // A decoded chunk cannot be reserved before it is decoded: no decoding ahead in a budget,
    // nor while the chunk filter may still change (each chunk is judged at its turn).
    let decode_ahead = match (&ctx.memory, &filter) {
        (Some(memory), _) if memory.is_bounded() => 0,
        (_, Some(filter)) if !filter.is_settled() => 0,
        _ => ctx.decode_ahead,
    };
    let chunk = Arc::new(ChunkStep {
        reader: Arc::new(TableReader::new(&model)),
        read: ctx.read_context(model.options().read.clone()),
        memory: ctx.memory.clone().map(Budget::new),
        location: model.location().into(),
        schema: schema.clone(),
        filter,
        batch_size: scan.batch_size.max(1),
        projection,
    });
    // What the table holds whole (a sparse matrix's `indptr`), reserved before it is read.
    let mut whole = Held::new(chunk.memory.clone());
    let held_whole = usize::try_from(chunk.reader.held_whole_bytes()).unwrap_or(usize::MAX);
    whole.grow(held_whole, &|| {
        format!("the {held_whole} bytes of '{}' read whole", chunk.location)
    })?;
    let most = chunk.ahead();
    let ahead = ReadAhead::new(if model.is_local() { 1 } else { most }, most);
    let plan = planned_chunks(scan, ctx.reverse, &chunk, model);
    let (fetch, window) = (chunk.clone(), ahead.clone());
    let fetched = futures::stream::iter(plan)
        .enumerate()
        .map(move |(index, planned)| {
            let (fetch, window) = (fetch.clone(), window.clone());
            in_background("fetch", async move {
                window.admit(index).await;
                fetch.fetch(index, planned).await
            })
        })
        .buffered(most);
    let chunks = ahead
        .watch(fetched)
        .and_then(move |fetched| chunk.clone().decode(fetched));
    let inner = if decode_ahead == 0 {
        chunks.map_ok(futures::stream::iter).try_flatten().boxed()
    } else {
        chunks
            .map_ok(|chunk| {
                in_background("decode", async move {
                    Ok(chunk.decode_ahead(DECODE_AHEAD_BYTES))
                })
            })
            .try_buffered(decode_ahead + 1)
            .map_ok(futures::stream::iter)
            .try_flatten()
            .boxed()
    };
    Ok(ZarrRecordBatchStream {
        schema,
        metrics,
        inner,
        _whole: whole,
    })
}

/// The chunks of `scan` in the order they are read, each with the rows to take of it: all,
/// until the scan's limit.
fn planned_chunks(
    scan: &ZarrScan,
    reverse: bool,
    chunk: &ChunkStep,
    model: Arc<TableModel>,
) -> impl Iterator<Item = Result<(Vec<u64>, u64)>> + Send + 'static {
    let mut remaining = scan.limit.unwrap_or(u64::MAX);
    let order = chunk_order(scan, reverse, chunk.filter.clone(), &chunk.read.metrics);
    order.map_while(move |coords| {
        if remaining == 0 {
            return None;
        }
        Some(model.chunk_rows(&coords).map(|rows| {
            let take = rows.min(remaining);
            remaining -= take;
            (coords, take)
        }))
    })
}

/// What every chunk of a scan is fetched and decoded with: one value the stream's steps share.
struct ChunkStep {
    /// The readers of the table's columns (and what they hold loaded).
    reader: Arc<TableReader>,
    read: ReadContext,
    memory: Option<Arc<Budget>>,
    location: Arc<str>,
    /// The batches' schema.
    schema: SchemaRef,
    filter: Option<Arc<dyn ChunkFilter>>,
    batch_size: usize,
    /// The columns read.
    projection: Vec<usize>,
}

/// A chunk fetched: its coordinates, the rows to take of it, its columns' stored bytes, the
/// memory held for it and what is still to reserve once it is decoded.
type Fetched = (Vec<u64>, u64, Vec<AheadChunk>, Held, usize);

impl ChunkStep {
    /// The most chunks fetched ahead. `concurrency` counts array chunk reads in flight: a
    /// chunk of rows fetches one array chunk per column that follows the driver's chunking.
    /// From a local file the window starts at one chunk and widens to this only while the
    /// decoder waits (ahead.rs); under a memory limit each chunk ahead also waits for its
    /// reservation (memory.rs), so what is in flight is what the budget grants, up to this.
    fn ahead(&self) -> usize {
        let per_chunk = self
            .projection
            .iter()
            .filter(|&&i| self.reader.fetched_ahead(i).is_some())
            .count();
        (self.read.options.concurrency / per_chunk.max(1)).max(1)
    }

    /// Fetch the `index`th chunk of the plan.
    async fn fetch(&self, index: usize, planned: Result<(Vec<u64>, u64)>) -> Result<Fetched> {
        // Hold what the chunk will likely take before asking the store for it; what it takes
        // beyond that, now if the budget has room, else when the chunk's turn comes (see
        // memory.rs).
        let mut held = Held::for_chunk(self.memory.clone(), index);
        // (a chunk that fails here lets the ones behind it reserve when it is dropped)
        let (coords, take) = planned?;
        let location = &self.location;
        let what = || format!("reading chunk {coords:?} of '{location}'");
        let reserved = held.reserve_ahead(&what).await?;
        let fetched = self
            .reader
            .fetch_ahead(&coords, &self.projection, &self.read)
            .await?;
        let stored: usize = fetched.iter().map(|f| f.stored_len()).sum();
        let unreserved = held.settle(reserved, stored);
        Ok((coords, take, fetched, held, unreserved))
    }

    /// The batches of a fetched chunk (none if the chunk filter rules it out by now).
    async fn decode(self: Arc<Self>, fetched: Fetched) -> Result<ChunkBatches> {
        let (coords, take, fetched, mut held, unreserved) = fetched;
        let mut batches = ChunkBatches {
            schema: self.schema.clone(),
            columns: Vec::new(),
            done: 0,
            rows: 0,
            batch_size: self.batch_size,
            metrics: self.read.metrics.clone(),
            held: Held::new(None),
        };
        if !may_match(self.filter.as_deref(), &coords, &self.read.metrics) {
            // Ruled out since it was fetched: nothing of it is decoded.
            batches.held = held;
            return Ok(batches);
        }
        let location = &self.location;
        let what = || format!("reading chunk {coords:?} of '{location}'");
        held.grow(unreserved, &what)?;
        let columns = self
            .reader
            .column_runs(&coords, &self.projection, fetched, &self.read)
            .await?;
        let whole: usize = columns.iter().map(ColumnRuns::held_bytes).sum();
        held.grow(whole, &what)?;
        self.read.metrics.add_chunk();
        batches.rows = usize::try_from(take).map_err(|_| {
            Error::table(
                location.to_string(),
                format!("chunk {coords:?} of '{location}' has more rows than usize holds"),
            )
        })?;
        batches.columns = columns;
        batches.held = held;
        Ok(batches)
    }
}

/// The chunks of `scan` in the order they are read (the reverse of the scan's with `reverse`
/// and no limit), less those `filter` rules out when their turn to be fetched comes.
fn chunk_order(
    scan: &ZarrScan,
    reverse: bool,
    filter: Option<Arc<dyn ChunkFilter>>,
    metrics: &ScanMetrics,
) -> Box<dyn Iterator<Item = Vec<u64>> + Send> {
    let order: Box<dyn Iterator<Item = Vec<u64>> + Send> = if reverse && scan.limit.is_none() {
        Box::new(scan.chunks.iter_rev())
    } else {
        Box::new(scan.chunks.iter())
    };
    match filter {
        None => order,
        Some(filter) => {
            let metrics = metrics.clone();
            Box::new(order.filter(move |coords| may_match(Some(&*filter), coords, &metrics)))
        }
    }
}

/// Whether the chunk at `coords` is to be read: no filter, or one that may match it (else it
/// is counted as pruned at run time).
fn may_match(filter: Option<&dyn ChunkFilter>, coords: &[u64], metrics: &ScanMetrics) -> bool {
    let keep = filter.is_none_or(|f| f.may_match(coords));
    if !keep {
        metrics.add_pruned_at_run_time();
    }
    keep
}

/// The first `rows` rows of one chunk, as record batches of at most `batch_size` rows: each
/// batch is decoded when it is asked for (see [`crate::decode::rows`]), so a consumer reads it
/// while it is in cache, and nothing of the chunk is held decoded whole.
struct ChunkBatches {
    schema: SchemaRef,
    columns: Vec<ColumnRuns>,
    /// Rows handed out, and to hand out in all.
    done: usize,
    rows: usize,
    batch_size: usize,
    metrics: ScanMetrics,
    /// The memory reserved for the chunk, given back when it has been handed out.
    held: Held,
}

/// The most bytes of one chunk decoded ahead of its consumer: the rest of a larger chunk (a
/// chunk of 2^32 fill values, a wide one) is decoded a batch at a time as it is handed out, so
/// what a stream holds decoded ahead is at most `decode_ahead` times this.
pub(super) const DECODE_AHEAD_BYTES: usize = 32 << 20;

/// A chunk decoded ahead of its consumer: its first batches (the last one an error, if
/// decoding failed), then the rest of the chunk, decoded as it is asked for; the chunk's
/// reservation is held until all has been handed out.
struct DecodedChunk {
    batches: std::vec::IntoIter<Result<RecordBatch>>,
    rest: ChunkBatches,
}

impl Iterator for DecodedChunk {
    type Item = Result<RecordBatch>;

    fn next(&mut self) -> Option<Self::Item> {
        self.batches.next().or_else(|| self.rest.next())
    }
}

impl ChunkBatches {
    /// The chunk's batches decoded now (a task of its own, ahead of the consumer) until they
    /// hold `bytes` or the chunk ends; what they hold is counted into the chunk's reservation.
    fn decode_ahead(mut self, bytes: usize) -> DecodedChunk {
        let mut batches: Vec<Result<RecordBatch>> = Vec::new();
        let mut decoded = 0;
        while decoded < bytes {
            match self.next() {
                Some(Ok(batch)) => {
                    decoded += batch.get_array_memory_size();
                    batches.push(Ok(batch));
                }
                Some(Err(e)) => {
                    batches.push(Err(e));
                    break;
                }
                None => break,
            }
        }
        if let Err(e) = self
            .held
            .grow(decoded, &|| "a chunk decoded ahead".to_string())
        {
            batches.push(Err(e));
            self.done = self.rows;
        }
        DecodedChunk {
            batches: batches.into_iter(),
            rest: self,
        }
    }

    fn batch(&mut self, k: usize) -> Result<RecordBatch> {
        let offset = self.done;
        let columns = self
            .columns
            .iter_mut()
            .map(|c| c.next_rows(offset, k))
            .collect::<Result<Vec<_>>>()?;
        Ok(RecordBatch::try_new_with_options(
            self.schema.clone(),
            columns,
            &RecordBatchOptions::new().with_row_count(Some(k)),
        )?)
    }
}

impl Iterator for ChunkBatches {
    type Item = Result<RecordBatch>;

    fn next(&mut self) -> Option<Self::Item> {
        let k = self.batch_size.min(self.rows - self.done);
        if k == 0 {
            return None;
        }
        let metrics = self.metrics.clone();
        let batch = metrics.time_decode(|| self.batch(k));
        // After an error nothing more of this chunk is handed out.
        if batch.is_ok() {
            self.done += k;
            metrics.add_rows(k);
        } else {
            self.done = self.rows;
        }
        Some(batch)
    }
}

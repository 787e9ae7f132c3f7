//! What `scan(...)` reads, planned before anything is: the columns, the chunks left after
//! pruning by `filter=` / `prune=` (zarrow-datafusion's [`ZarrPredicate`], the SQL path's
//! pruner), the limit; then how the batches read become the batches handed out (the exact
//! filter, the projection back to the asked columns, a limit counted after the filter), and
//! the counters a caller sees pushdown in (`ZarrStream.metrics`).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;
use futures::stream::BoxStream;
use futures::{StreamExt, TryStreamExt};
use zarrow::{ScanContext, TableModel, ZarrRecordBatchStreamBuilder, ZarrScan};
use zarrow_datafusion::{
    from_datafusion_error, metrics, missing_column, BatchFilter, ScanPlanInfo, ZarrPredicate,
};

/// Batches as a scan hands them out.
pub(crate) type Batches = BoxStream<'static, zarrow::Result<RecordBatch>>;

/// What a caller asked `scan` for, past the table options.
#[derive(Debug, Default)]
pub(crate) struct ScanRequest {
    /// Column indices, in output order (`None`: every column).
    pub projection: Option<Vec<usize>>,
    /// A SQL predicate the rows handed out satisfy (pruning chunks on the way).
    pub filter: Option<String>,
    /// A SQL predicate that only prunes chunks (the caller filters the rows itself).
    pub prune: Option<String>,
    pub batch_size: Option<usize>,
    pub limit: Option<usize>,
}

/// A planned scan (see the module docs).
pub(crate) struct ScanPlan {
    pub model: Arc<TableModel>,
    /// What is read: the asked columns, then those only the filter needs.
    pub scan: ZarrScan,
    /// The schema handed out.
    pub schema: SchemaRef,
    /// The columns handed out, as indices of the columns read (`None`: all of them).
    output: Option<Vec<usize>>,
    filter: Option<BatchFilter>,
    /// The limit when it counts filtered rows (else it is the scan's own).
    limit_after_filter: Option<usize>,
    pub metrics: ScanCounters,
}

/// The counters of one scan: zarrow's, what pruning kept, rows handed out.
#[derive(Debug, Clone)]
pub(crate) struct ScanCounters {
    pub ctx: ScanContext,
    pub info: ScanPlanInfo,
    pub rows_out: Arc<AtomicU64>,
}

impl ScanCounters {
    /// The counts so far, by name (`ZarrStream.metrics`).
    pub fn snapshot(&self) -> Vec<(&'static str, f64)> {
        let c = self.ctx.metrics.counts();
        let info = &self.info;
        vec![
            ("chunks_total", info.total_chunks as f64),
            ("chunks_kept", info.kept_chunks as f64),
            (
                metrics::CHUNKS_PRUNED,
                info.total_chunks.saturating_sub(info.kept_chunks) as f64,
            ),
            (metrics::CHUNKS_READ, c.chunks_read as f64),
            ("rows_read", c.rows_out as f64),
            ("rows_out", self.rows_out.load(Ordering::Relaxed) as f64),
            (metrics::REQUESTS, c.requests as f64),
            (metrics::BYTES_FETCHED, c.bytes_fetched as f64),
            ("fetch_seconds", c.fetch_time.as_secs_f64()),
            ("decode_seconds", c.decode_time.as_secs_f64()),
        ]
    }
}

/// The predicate `sql` (`what`: `filter` or `prune`) over `model`. A column it names that the
/// table lacks is [`zarrow::Error::ColumnNotFound`] (Python's `ColumnNotFoundError`, the close
/// names suggested); any other mistake an [`zarrow::Error::InvalidArgument`] quoting it.
fn parse_predicate(model: &TableModel, what: &str, sql: &str) -> zarrow::Result<ZarrPredicate> {
    ZarrPredicate::parse(model, sql).map_err(|e| {
        let missing = missing_column(&e).and_then(|(name, _)| model.column_index(&name).err());
        missing.unwrap_or_else(|| {
            zarrow::Error::InvalidArgument(format!(
                "{what} `{sql}` on '{}': {}",
                model.location(),
                e.find_root()
            ))
        })
    })
}

impl ScanPlan {
    /// Plan the read of `request` over `model`: parse the predicates, prune.
    pub async fn new(model: Arc<TableModel>, request: ScanRequest) -> zarrow::Result<Self> {
        let df = from_datafusion_error;
        let parse = |what: &str, sql: &str| parse_predicate(&model, what, sql);
        let filter = match &request.filter {
            Some(sql) => Some(parse("filter", sql)?),
            None => None,
        };
        let pruning = match (&request.filter, &request.prune) {
            (Some(f), Some(p)) => {
                parse("prune", p)?;
                Some(parse("filter", &format!("({f}) AND ({p})"))?)
            }
            (Some(_), None) => filter.clone(),
            (None, Some(p)) => Some(parse("prune", p)?),
            (None, None) => None,
        };

        let ctx = ScanContext::default();
        let read = ctx.read_context(model.options().read.clone());
        let (chunks, info) = match &pruning {
            Some(p) => {
                let pruned = p.prune(&model, &read).await.map_err(df)?;
                (pruned.chunks, pruned.info)
            }
            None => (
                model.all_chunks(),
                ScanPlanInfo {
                    total_chunks: model.grid().num_chunks(),
                    kept_chunks: model.grid().num_chunks(),
                    predicate: None,
                },
            ),
        };

        // Read the asked columns, then the ones only the filter needs.
        let every = (0..model.columns().len()).collect::<Vec<_>>();
        let asked = request.projection.clone().unwrap_or_else(|| every.clone());
        let mut read_columns = asked.clone();
        if let Some(f) = &filter {
            for name in f.columns() {
                let i = model.column_index(name)?;
                if !read_columns.contains(&i) {
                    read_columns.push(i);
                }
            }
        }
        let output: Option<Vec<usize>> =
            (read_columns.len() != asked.len()).then(|| (0..asked.len()).collect());

        let mut builder = ZarrRecordBatchStreamBuilder::new(model.clone())
            .with_projection(read_columns)
            .with_chunks(chunks);
        if let Some(n) = request.batch_size {
            builder = builder.with_batch_size(n);
        }
        let limit_after_filter = match (request.limit, &filter) {
            (Some(n), None) => {
                builder = builder.with_limit(n);
                None
            }
            (limit, _) => limit,
        };
        let read_schema = builder.schema();
        let schema = match &output {
            Some(p) => Arc::new(read_schema.project(p)?),
            None => read_schema.clone(),
        };
        let filter = filter
            .map(|f| f.batch_filter(&read_schema))
            .transpose()
            .map_err(df)?;
        Ok(ScanPlan {
            scan: builder.scan()?,
            model,
            schema,
            output,
            filter,
            limit_after_filter,
            metrics: ScanCounters {
                ctx,
                info,
                rows_out: Arc::new(AtomicU64::new(0)),
            },
        })
    }

    /// Whether the rows handed out are counted against a limit after filtering (then the scan
    /// is read in one run, in order).
    pub fn limit_after_filter(&self) -> bool {
        self.limit_after_filter.is_some()
    }

    /// The batches of `scan` (this plan's scan or a part of it, one of `parts` read at once) as
    /// they are handed out. A stream that stops at a limit after filtering does not decode
    /// ahead: the chunks after the one that completes the limit are never read.
    pub fn batches(&self, scan: &ZarrScan, parts: usize) -> zarrow::Result<Batches> {
        let mut ctx = self.metrics.ctx.clone().for_partitions(parts);
        if self.limit_after_filter() {
            ctx.decode_ahead = 0;
        }
        let stream = scan.stream(self.model.clone(), ctx)?;
        let (filter, output) = (self.filter.clone(), self.output.clone());
        let rows_out = self.metrics.rows_out.clone();
        let shaped = stream
            .map(move |batch| {
                let mut batch = batch?;
                if let Some(f) = &filter {
                    batch = f.filter(&batch).map_err(from_datafusion_error)?;
                }
                if let Some(p) = &output {
                    batch = batch.project(p)?;
                }
                Ok(batch)
            })
            .try_filter(|b| futures::future::ready(b.num_rows() > 0));
        let limited: Batches = match self.limit_after_filter {
            // Stops at the limit without asking for another batch (another chunk).
            Some(limit) => {
                futures::stream::unfold((shaped.boxed(), limit), |(mut s, left)| async move {
                    if left == 0 {
                        return None;
                    }
                    match s.next().await? {
                        Ok(b) => {
                            let n = b.num_rows().min(left);
                            Some((Ok(b.slice(0, n)), (s, left - n)))
                        }
                        Err(e) => Some((Err(e), (s, 0))),
                    }
                })
                .boxed()
            }
            None => shaped.boxed(),
        };
        Ok(limited
            .inspect_ok(move |b| {
                rows_out.fetch_add(b.num_rows() as u64, Ordering::Relaxed);
            })
            .boxed())
    }
}

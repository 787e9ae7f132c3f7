//! The extension codecs that carry zarr tables and scans between a Ballista client, its
//! scheduler and its executors. Each wraps Ballista's own codec and hands it everything that is
//! not zarr's, so Parquet, CSV and Ballista's shuffle plans work in the same cluster.
//!
//! Every payload starts with one tag byte: [`TAG_INNER`] (the rest is the wrapped codec's),
//! or [`TAG_ZARR`] (the rest is ours):
//!
//! - logical, a [`ZarrTable`]: JSON `{location, options}`. The scheduler's decoder reopens the
//!   table's metadata there (through the task's registered object stores, else zarrow's own)
//!   and refuses it if its schema is no longer the one the client planned with.
//! - physical, a zarr scan (a `DataSourceExec` whose file source is a [`ZarrSource`], perhaps
//!   sliced to one task's file groups by the scheduler): `u32` length (little-endian) of the
//!   JSON of its file groups (each a list of runs of chunks with their rows), its limit and
//!   how its chunks were chosen, then the schema as DataFusion's protobuf. No metadata is read
//!   to decode it: the table is opened on the executor when the first partition starts, and
//!   each reads its own chunks from the store. On an executor ([`ZarrPhysicalCodec::for_executor`])
//!   the decoded source names the executor in its errors and logs each task.

use std::sync::Arc;

use ballista_core::serde::{BallistaLogicalExtensionCodec, BallistaPhysicalExtensionCodec};
use datafusion::arrow::datatypes::{Schema, SchemaRef};
use datafusion::catalog::TableProvider;
use datafusion::common::{DataFusionError, Result, TableReference};
use datafusion::datasource::file_format::FileFormatFactory;
use datafusion::datasource::physical_plan::FileSource;
use datafusion::execution::TaskContext;
use datafusion::logical_expr::{
    AggregateUDF, Extension, HigherOrderUDF, LogicalPlan, ScalarUDF, WindowUDF,
};
use datafusion::physical_expr_common::physical_expr::proto_decode::PhysicalExprDecodeCtx;
use datafusion::physical_expr_common::physical_expr::proto_encode::PhysicalExprEncodeCtx;
use datafusion::physical_plan::{ExecutionPlan, PhysicalExpr};
use datafusion_proto::logical_plan::LogicalExtensionCodec;
use datafusion_proto::physical_plan::{PhysicalExtensionCodec, PhysicalProtoConverterExtension};
use datafusion_proto::protobuf;
use prost::Message;
use serde::{Deserialize, Serialize};
use zarrow_datafusion::{ScanPlan, ZarrRun, ZarrScanRef, ZarrSource, ZarrTable, ZarrTableOptions};

use crate::blocking::block_on;

/// The payload is the wrapped (Ballista's) codec's.
pub const TAG_INNER: u8 = 0;
/// The payload is a zarr table or scan.
pub const TAG_ZARR: u8 = 1;

fn codec_error(what: &str, detail: impl std::fmt::Display) -> DataFusionError {
    DataFusionError::Internal(format!("zarrow-ballista: cannot decode {what}: {detail}"))
}

/// Split a payload into its tag and the rest.
fn split_tag<'a>(buf: &'a [u8], what: &str) -> Result<(u8, &'a [u8])> {
    match buf.split_first() {
        Some((&tag, rest)) if tag == TAG_INNER || tag == TAG_ZARR => Ok((tag, rest)),
        Some((tag, _)) => Err(codec_error(what, format!("unknown tag {tag}"))),
        None => Err(codec_error(what, "empty payload")),
    }
}

/// Encode with `encode` after the tag byte.
fn tagged(
    buf: &mut Vec<u8>,
    tag: u8,
    encode: impl FnOnce(&mut Vec<u8>) -> Result<()>,
) -> Result<()> {
    buf.push(tag);
    encode(buf)
}

/// The function (UDF, UDAF, UDWF, higher-order) methods of both codecs: all the wrapped
/// codec's (zarr adds no functions).
macro_rules! delegate_functions {
    () => {
        fn try_decode_udf(&self, name: &str, buf: &[u8]) -> Result<Arc<ScalarUDF>> {
            self.inner.try_decode_udf(name, buf)
        }

        fn try_encode_udf(&self, node: &ScalarUDF, buf: &mut Vec<u8>) -> Result<()> {
            self.inner.try_encode_udf(node, buf)
        }

        fn try_decode_udaf(&self, name: &str, buf: &[u8]) -> Result<Arc<AggregateUDF>> {
            self.inner.try_decode_udaf(name, buf)
        }

        fn try_encode_udaf(&self, node: &AggregateUDF, buf: &mut Vec<u8>) -> Result<()> {
            self.inner.try_encode_udaf(node, buf)
        }

        fn try_decode_udwf(&self, name: &str, buf: &[u8]) -> Result<Arc<WindowUDF>> {
            self.inner.try_decode_udwf(name, buf)
        }

        fn try_encode_udwf(&self, node: &WindowUDF, buf: &mut Vec<u8>) -> Result<()> {
            self.inner.try_encode_udwf(node, buf)
        }

        fn try_decode_higher_order_function(
            &self,
            name: &str,
            buf: &[u8],
        ) -> Result<Arc<HigherOrderUDF>> {
            self.inner.try_decode_higher_order_function(name, buf)
        }

        fn try_encode_higher_order_function(
            &self,
            node: &HigherOrderUDF,
            buf: &mut Vec<u8>,
        ) -> Result<()> {
            self.inner.try_encode_higher_order_function(node, buf)
        }
    };
}

/// A zarr table as it travels: where it is and how it was opened.
#[derive(Debug, Serialize, Deserialize)]
struct TableNode {
    location: String,
    options: ZarrTableOptions,
}

/// Carries [`ZarrTable`]s in logical plans; everything else goes to `inner` (Ballista's
/// logical codec by default).
#[derive(Debug)]
pub struct ZarrLogicalCodec {
    inner: Arc<dyn LogicalExtensionCodec>,
}

impl Default for ZarrLogicalCodec {
    fn default() -> Self {
        Self::new(Arc::new(BallistaLogicalExtensionCodec::default()))
    }
}

impl ZarrLogicalCodec {
    /// Zarr tables, and `inner` for the rest.
    pub fn new(inner: Arc<dyn LogicalExtensionCodec>) -> Self {
        ZarrLogicalCodec { inner }
    }
}

impl LogicalExtensionCodec for ZarrLogicalCodec {
    fn try_decode(
        &self,
        buf: &[u8],
        inputs: &[LogicalPlan],
        ctx: &TaskContext,
    ) -> Result<Extension> {
        self.inner.try_decode(buf, inputs, ctx)
    }

    fn try_encode(&self, node: &Extension, buf: &mut Vec<u8>) -> Result<()> {
        self.inner.try_encode(node, buf)
    }

    fn try_decode_table_provider(
        &self,
        buf: &[u8],
        table_ref: &TableReference,
        schema: SchemaRef,
        ctx: &TaskContext,
    ) -> Result<Arc<dyn TableProvider>> {
        let (tag, rest) = split_tag(buf, "a table")?;
        if tag == TAG_INNER {
            return self
                .inner
                .try_decode_table_provider(rest, table_ref, schema, ctx);
        }
        let node: TableNode =
            serde_json::from_slice(rest).map_err(|e| codec_error("a zarr table", e))?;
        let runtime = ctx.runtime_env();
        let location = node.location.clone();
        let table = block_on(async move {
            ZarrTable::try_new_with_runtime(&runtime, &node.location, node.options).await
        })??;
        let reopened = table.schema();
        if !same_fields(&reopened, &schema) {
            return Err(DataFusionError::Plan(format!(
                "zarr table '{table_ref}' at {location} changed since it was planned: its columns \
                 are now {}, the plan's are {}",
                describe(&reopened),
                describe(&schema)
            )));
        }
        // Its scans are file scans: the scheduler slices their file groups into tasks.
        Ok(Arc::new(table))
    }

    fn try_encode_table_provider(
        &self,
        table_ref: &TableReference,
        node: Arc<dyn TableProvider>,
        buf: &mut Vec<u8>,
    ) -> Result<()> {
        match node.downcast_ref::<ZarrTable>() {
            Some(table) => tagged(buf, TAG_ZARR, |buf| {
                let node = TableNode {
                    location: absolute_location(table.location()),
                    options: table.options().clone(),
                };
                serde_json::to_writer(buf, &node)
                    .map_err(|e| DataFusionError::Internal(format!("encoding a zarr table: {e}")))
            }),
            None => tagged(buf, TAG_INNER, |buf| {
                self.inner.try_encode_table_provider(table_ref, node, buf)
            }),
        }
    }

    fn try_decode_file_format(
        &self,
        buf: &[u8],
        ctx: &TaskContext,
    ) -> Result<Arc<dyn FileFormatFactory>> {
        self.inner.try_decode_file_format(buf, ctx)
    }

    fn try_encode_file_format(
        &self,
        buf: &mut Vec<u8>,
        node: Arc<dyn FileFormatFactory>,
    ) -> Result<()> {
        self.inner.try_encode_file_format(buf, node)
    }

    delegate_functions!();
}

/// `location` as another process (the scheduler, an executor) must see it: a relative local
/// path (also inside `icechunk+file:`) made absolute against this process's directory, which
/// is what it meant here. URLs travel as they are.
pub fn absolute_location(location: &str) -> String {
    let absolute = |path: &str| {
        std::path::absolute(path)
            .map(|p| p.to_string_lossy().into_owned())
            .unwrap_or_else(|_| path.to_string())
    };
    if let Some(rest) = location.strip_prefix("icechunk+file:") {
        if !rest.starts_with("//") {
            return format!("icechunk+file://{}", absolute(rest));
        }
        return location.to_string();
    }
    match location.split_once("://") {
        // A scheme (not a Windows drive letter): a URL.
        Some((scheme, _)) if scheme.len() > 1 => location.to_string(),
        _ => absolute(location),
    }
}

/// Same column names and types, in order (metadata aside).
fn same_fields(a: &Schema, b: &Schema) -> bool {
    a.fields().len() == b.fields().len()
        && a.fields()
            .iter()
            .zip(b.fields())
            .all(|(x, y)| x.name() == y.name() && x.data_type() == y.data_type())
}

fn describe(schema: &Schema) -> String {
    schema
        .fields()
        .iter()
        .map(|f| format!("{} {}", f.name(), f.data_type()))
        .collect::<Vec<_>>()
        .join(", ")
}

/// A zarr scan as it travels (the schema follows it as protobuf).
#[derive(Debug, Serialize, Deserialize)]
struct ScanNode {
    groups: Vec<Vec<ZarrRun>>,
    limit: Option<usize>,
    plan: Option<ScanPlan>,
}

/// Carries zarr scans in physical plans; everything else goes to `inner` (Ballista's
/// physical codec by default). On an executor, [`Self::for_executor`] names it in the errors
/// and the log of the scans it decodes.
#[derive(Debug)]
pub struct ZarrPhysicalCodec {
    inner: Arc<dyn PhysicalExtensionCodec>,
    executor: Option<String>,
}

impl Default for ZarrPhysicalCodec {
    fn default() -> Self {
        Self::new(Arc::new(BallistaPhysicalExtensionCodec::default()))
    }
}

impl ZarrPhysicalCodec {
    /// Zarr scans, and `inner` for the rest.
    pub fn new(inner: Arc<dyn PhysicalExtensionCodec>) -> Self {
        ZarrPhysicalCodec {
            inner,
            executor: None,
        }
    }

    /// The codec of the executor `name`: the scans it decodes name it in their errors and
    /// log what each task read.
    pub fn for_executor(mut self, name: impl Into<String>) -> Self {
        self.executor = Some(name.into());
        self
    }

    fn encode_scan(scan: ZarrScanRef<'_>, buf: &mut Vec<u8>) -> Result<()> {
        let node = ScanNode {
            groups: scan.groups()?,
            limit: scan.config.limit,
            plan: scan.source.plan().cloned(),
        };
        let json = serde_json::to_vec(&node)
            .map_err(|e| DataFusionError::Internal(format!("encoding a zarr scan: {e}")))?;
        let len = u32::try_from(json.len())
            .map_err(|_| DataFusionError::Internal("a zarr scan over 4 GiB of JSON".into()))?;
        buf.extend_from_slice(&len.to_le_bytes());
        buf.extend_from_slice(&json);
        let schema = scan.source.table_schema().table_schema();
        let schema = protobuf::Schema::try_from(schema.as_ref())?;
        schema
            .encode(buf)
            .map_err(|e| DataFusionError::Internal(format!("encoding a zarr scan's schema: {e}")))
    }

    fn decode_scan(&self, buf: &[u8], ctx: &TaskContext) -> Result<Arc<dyn ExecutionPlan>> {
        let what = "a zarr scan";
        let (len, rest) = buf
            .split_first_chunk::<4>()
            .ok_or_else(|| codec_error(what, "truncated"))?;
        let len = u32::from_le_bytes(*len) as usize;
        if len > rest.len() {
            return Err(codec_error(
                what,
                format!("{len} bytes of scan in a payload of {}", rest.len()),
            ));
        }
        let (json, schema) = rest.split_at(len);
        let node: ScanNode = serde_json::from_slice(json).map_err(|e| codec_error(what, e))?;
        let schema = protobuf::Schema::decode(schema).map_err(|e| codec_error(what, e))?;
        let schema = Schema::try_from(&schema).map_err(|e| codec_error(what, e))?;
        // The schema is every run's columns, in order (a cut protobuf may still parse).
        let names: Vec<&String> = schema.fields().iter().map(|f| f.name()).collect();
        for run in node.groups.iter().flatten() {
            if names.len() != run.scan.columns.len()
                || names.iter().zip(&run.scan.columns).any(|(a, b)| *a != b)
            {
                return Err(codec_error(
                    what,
                    format!(
                        "its schema ({}) is not its columns ({})",
                        describe(&schema),
                        run.scan.columns.join(", ")
                    ),
                ));
            }
        }
        let mut source = ZarrSource::new(Arc::new(schema)).with_runtime(ctx.runtime_env());
        if let Some(plan) = node.plan {
            source = source.with_plan(plan);
        }
        if let Some(name) = &self.executor {
            source = source.with_executor(name);
        }
        Ok(source.into_exec(node.groups, node.limit))
    }
}

impl PhysicalExtensionCodec for ZarrPhysicalCodec {
    fn try_decode(
        &self,
        buf: &[u8],
        inputs: &[Arc<dyn ExecutionPlan>],
        ctx: &TaskContext,
        proto_converter: &dyn PhysicalProtoConverterExtension,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let (tag, rest) = split_tag(buf, "a plan")?;
        if tag == TAG_INNER {
            return self.inner.try_decode(rest, inputs, ctx, proto_converter);
        }
        if !inputs.is_empty() {
            return Err(codec_error("a zarr scan", "it has inputs"));
        }
        self.decode_scan(rest, ctx)
    }

    fn try_encode(
        &self,
        node: Arc<dyn ExecutionPlan>,
        buf: &mut Vec<u8>,
        proto_converter: &dyn PhysicalProtoConverterExtension,
    ) -> Result<()> {
        // A zarr scan, whole or restricted by the scheduler to one task's file groups.
        if let Some(scan) = ZarrScanRef::of(node.as_ref()) {
            return tagged(buf, TAG_ZARR, |buf| Self::encode_scan(scan, buf));
        }
        tagged(buf, TAG_INNER, |buf| {
            self.inner.try_encode(node, buf, proto_converter)
        })
    }

    delegate_functions!();

    fn try_decode_expr(
        &self,
        buf: &[u8],
        inputs: &[Arc<dyn PhysicalExpr>],
        ctx: &PhysicalExprDecodeCtx<'_>,
    ) -> Result<Arc<dyn PhysicalExpr>> {
        self.inner.try_decode_expr(buf, inputs, ctx)
    }

    fn try_encode_expr(
        &self,
        node: &Arc<dyn PhysicalExpr>,
        buf: &mut Vec<u8>,
        ctx: &PhysicalExprEncodeCtx<'_>,
    ) -> Result<()> {
        self.inner.try_encode_expr(node, buf, ctx)
    }
}

#[cfg(test)]
mod tests {
    use datafusion::execution::TaskContext;
    use datafusion::prelude::SessionContext;
    use datafusion_proto::physical_plan::DefaultPhysicalProtoConverter;
    use zarrow_datafusion::SessionContextZarrExt;

    use super::*;
    use datafusion::datasource::physical_plan::{FileScanConfig, FileScanConfigBuilder};
    use datafusion::datasource::source::DataSourceExec;
    use datafusion::physical_plan::statistics::{StatisticsArgs, StatisticsContext};
    use zarrow_datafusion::zarr_scans;

    use zarrow_testkit::fixture;

    async fn planned_scan(sql: &str) -> Arc<dyn ExecutionPlan> {
        let ctx = SessionContext::new_with_config(
            datafusion::prelude::SessionConfig::new().with_target_partitions(3),
        );
        ctx.register_zarr(
            "t",
            &fixture("v3_strings.zarr/string_2d"),
            ZarrTableOptions::default(),
        )
        .await
        .unwrap();
        let plan = ctx
            .sql(sql)
            .await
            .unwrap()
            .create_physical_plan()
            .await
            .unwrap();
        let mut stack = vec![plan];
        while let Some(p) = stack.pop() {
            if ZarrScanRef::of(p.as_ref()).is_some() {
                return p;
            }
            stack.extend(p.children().into_iter().cloned());
        }
        panic!("no zarr scan in the plan")
    }

    fn encode(codec: &ZarrPhysicalCodec, plan: Arc<dyn ExecutionPlan>) -> Vec<u8> {
        let mut buf = Vec::new();
        codec
            .try_encode(plan, &mut buf, &DefaultPhysicalProtoConverter {})
            .unwrap();
        buf
    }

    fn decode(codec: &ZarrPhysicalCodec, buf: &[u8]) -> Result<Arc<dyn ExecutionPlan>> {
        codec.try_decode(
            buf,
            &[],
            &TaskContext::default(),
            &DefaultPhysicalProtoConverter {},
        )
    }

    #[tokio::test]
    async fn a_scan_travels_whole() {
        let plan = planned_scan("SELECT dim_1, string_2d FROM t WHERE dim_0 >= 3").await;
        let scan = ZarrScanRef::of(plan.as_ref()).unwrap();
        assert!(scan.config.file_groups.len() > 1);
        let codec = ZarrPhysicalCodec::default().for_executor("e1 at host:1");
        let back = decode(&codec, &encode(&codec, plan.clone())).unwrap();
        let got = ZarrScanRef::of(back.as_ref()).unwrap();
        assert_eq!(got.groups().unwrap(), scan.groups().unwrap());
        assert_eq!(got.source.plan(), scan.source.plan());
        assert_eq!(back.schema(), plan.schema());
        assert_eq!(got.source.executor(), Some("e1 at host:1"));
        // The exact rows travel with the runs.
        let rows = |p: &Arc<dyn ExecutionPlan>| {
            StatisticsContext::new()
                .compute(p.as_ref(), &StatisticsArgs::new())
                .unwrap()
                .num_rows
        };
        assert_eq!(rows(&back), rows(&plan));
        assert_eq!(zarr_scans(back.as_ref()).len(), 1);
    }

    #[tokio::test]
    async fn a_sliced_scan_travels_as_its_partitions() {
        let plan = planned_scan("SELECT * FROM t").await;
        let scan = ZarrScanRef::of(plan.as_ref()).unwrap();
        assert_eq!(scan.config.file_groups.len(), 3);
        // What Ballista's scheduler does for a task of partitions [2, 0]: keep those groups.
        let config: &FileScanConfig = scan.config;
        let groups = vec![config.file_groups[2].clone(), config.file_groups[0].clone()];
        let sliced = DataSourceExec::from_data_source(
            FileScanConfigBuilder::from(config.clone())
                .with_file_groups(groups)
                .with_limit(Some(4))
                .build(),
        );
        let codec = ZarrPhysicalCodec::default();
        let back = decode(&codec, &encode(&codec, sliced)).unwrap();
        let got = ZarrScanRef::of(back.as_ref()).unwrap();
        let all = scan.groups().unwrap();
        assert_eq!(got.groups().unwrap(), vec![all[2].clone(), all[0].clone()]);
        assert_eq!(got.config.limit, Some(4));
        // Each partition gives at most the limit's rows: so say its statistics.
        let rows = StatisticsContext::new()
            .compute(
                back.as_ref(),
                &StatisticsArgs::new().with_partition(Some(0)),
            )
            .unwrap()
            .num_rows;
        let want = all[2][0].rows.min(4) as usize;
        assert!(all[2][0].rows > 4);
        assert_eq!(rows, datafusion::common::stats::Precision::Exact(want));
    }

    #[tokio::test]
    async fn other_plans_go_to_ballistas_codec() {
        let codec = ZarrPhysicalCodec::default();
        let plan: Arc<dyn ExecutionPlan> = Arc::new(
            datafusion::physical_plan::empty::EmptyExec::new(Arc::new(Schema::empty())),
        );
        // Ballista's own codec refuses a plain DataFusion node; ours hands it over (tagged).
        let mut buf = Vec::new();
        let err = codec
            .try_encode(plan, &mut buf, &DefaultPhysicalProtoConverter {})
            .unwrap_err();
        assert_eq!(buf.first(), Some(&TAG_INNER));
        assert!(!err.to_string().contains("zarr"), "{err}");
    }

    #[tokio::test]
    async fn damaged_payloads_are_errors() {
        let plan = planned_scan("SELECT * FROM t").await;
        let codec = ZarrPhysicalCodec::default();
        let good = encode(&codec, plan);
        let mut cases: Vec<Vec<u8>> = vec![vec![], vec![7], vec![TAG_ZARR], vec![TAG_ZARR, 1, 2]];
        // Every truncation of a good payload.
        cases.extend((1..good.len()).map(|n| good[..n].to_vec()));
        // A length that claims more than there is.
        let mut long = good.clone();
        long[1..5].copy_from_slice(&u32::MAX.to_le_bytes());
        cases.push(long);
        for case in cases {
            assert!(decode(&codec, &case).is_err(), "{case:?}");
        }
        assert!(decode(&codec, &good).is_ok());
    }

    #[test]
    fn relative_paths_travel_absolute() {
        let here = std::env::current_dir().unwrap();
        let abs = |p: &str| here.join(p).to_string_lossy().into_owned();
        assert_eq!(absolute_location("data/x.zarr/obs"), abs("data/x.zarr/obs"));
        assert_eq!(absolute_location("/abs/x.zarr"), "/abs/x.zarr");
        assert_eq!(absolute_location("s3://b/x.zarr"), "s3://b/x.zarr");
        assert_eq!(
            absolute_location("file:///abs/x.zarr"),
            "file:///abs/x.zarr"
        );
        assert_eq!(
            absolute_location("icechunk+file:repo@v1/obs"),
            format!("icechunk+file://{}", abs("repo@v1/obs"))
        );
        assert_eq!(
            absolute_location("icechunk+s3://b/repo@v1/obs"),
            "icechunk+s3://b/repo@v1/obs"
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_table_travels_as_its_location_and_reopens() {
        let table = ZarrTable::try_new(
            &fixture("xarray_v3.zarr"),
            ZarrTableOptions::default().with_decode_cf(true),
        )
        .await
        .unwrap();
        let schema = table.schema();
        let codec = ZarrLogicalCodec::default();
        let name = TableReference::bare("cf");
        let mut buf = Vec::new();
        codec
            .try_encode_table_provider(&name, Arc::new(table), &mut buf)
            .unwrap();
        let ctx = TaskContext::default();
        let back = codec
            .try_decode_table_provider(&buf, &name, schema.clone(), &ctx)
            .unwrap();
        let back = back.downcast_ref::<ZarrTable>().unwrap();
        assert!(back.options().decode_cf);
        assert_eq!(back.schema(), schema);
        // A plan made against other columns (the store changed since): refused, naming it.
        let other = Arc::new(Schema::new(vec![datafusion::arrow::datatypes::Field::new(
            "x",
            datafusion::arrow::datatypes::DataType::Int8,
            true,
        )]));
        let err = codec
            .try_decode_table_provider(&buf, &name, other, &ctx)
            .unwrap_err();
        assert!(
            err.to_string().contains("changed since it was planned"),
            "{err}"
        );
    }
}

//! Wiring: a session with the `ZARR` table factory, zarr URL tables and the `zarrow.*`
//! settings, and [`SessionContextZarrExt::register_zarr`] for contexts of your own.

use std::sync::Arc;

use async_trait::async_trait;
use datafusion::catalog::{DynamicFileCatalog, UrlTableFactory};
use datafusion::dataframe::DataFrame;
use datafusion::error::Result;
use datafusion::execution::runtime_env::RuntimeEnv;
use datafusion::execution::{SessionState, SessionStateBuilder};
use datafusion::physical_optimizer::optimizer::PhysicalOptimizer;
use datafusion::physical_optimizer::PhysicalOptimizerRule;
use datafusion::prelude::{SessionConfig, SessionContext};

use crate::factory::{ZarrTableFactory, ZarrUrlTableFactory};
use crate::format::ZarrFormatFactory;
use crate::guards::{ConstantFunctionFilters, FloatKeyJoins};
use crate::options::{ZarrConfig, ZarrTableOptions};
use crate::remote_files::RemoteFiles;
use crate::table::ZarrTable;

/// Zarr on a [`SessionContext`], as `register_parquet` / `read_parquet` are for Parquet.
///
/// ```
/// use datafusion::prelude::SessionContext;
/// use zarrow_datafusion::{SessionContextZarrExt, ZarrTableOptions};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> datafusion::error::Result<()> {
/// let ctx = SessionContext::new();
/// let var = concat!(env!("CARGO_MANIFEST_DIR"), "/../../data/pbmc_sample.zarr/var");
/// ctx.register_zarr("genes", var, ZarrTableOptions::default()).await?;
/// let mito = ctx
///     .sql("SELECT gene_symbol FROM genes WHERE mito ORDER BY gene_symbol")
///     .await?
///     .collect()
///     .await?;
/// assert!(mito.iter().map(|b| b.num_rows()).sum::<usize>() > 0);
///
/// let df = ctx.read_zarr(var, ZarrTableOptions::default()).await?;
/// assert_eq!(df.count().await?, ctx.table("genes").await?.count().await?);
/// # Ok(())
/// # }
/// ```
#[async_trait]
pub trait SessionContextZarrExt {
    /// Register the zarr node at `location` as table `name`.
    async fn register_zarr(
        &self,
        name: &str,
        location: &str,
        options: ZarrTableOptions,
    ) -> Result<()>;

    /// A DataFrame over the zarr node at `location`.
    async fn read_zarr(&self, location: &str, options: ZarrTableOptions) -> Result<DataFrame>;
}

#[async_trait]
impl SessionContextZarrExt for SessionContext {
    async fn register_zarr(
        &self,
        name: &str,
        location: &str,
        options: ZarrTableOptions,
    ) -> Result<()> {
        let table = ZarrTable::try_new_with_session(&self.state(), location, options).await?;
        self.register_table(name, Arc::new(table))?;
        Ok(())
    }

    async fn read_zarr(&self, location: &str, options: ZarrTableOptions) -> Result<DataFrame> {
        let table = ZarrTable::try_new_with_session(&self.state(), location, options).await?;
        self.read_table(Arc::new(table))
    }
}

/// A session state with DataFusion's defaults, the `ZARR` table factory and the `zarrow.*`
/// settings (URL tables need a context: see [`zarr_session_context`]).
pub fn zarr_session_state(config: SessionConfig) -> SessionState {
    zarr_session_state_with_runtime(config, Arc::new(RuntimeEnv::default()))
}

/// [`zarr_session_state`] on `runtime` — e.g. one with a memory limit
/// (`RuntimeEnvBuilder::new().with_memory_limit(…)`), which zarr scans reserve from.
pub fn zarr_session_state_with_runtime(
    config: SessionConfig,
    runtime: Arc<RuntimeEnv>,
) -> SessionState {
    let config = if config.options().extensions.get::<ZarrConfig>().is_some() {
        config
    } else {
        config.with_option_extension(ZarrConfig::default())
    };
    // zarrow's guards against DataFusion's own bugs (`guards.rs`) among DataFusion's rules:
    // float-key joins first (before the join selection), the filters after their pushdown
    // into scans (which keeps the filters as written, for pruning) and before the sorts and
    // partitions a plan needs are decided.
    let mut rules: Vec<Arc<dyn PhysicalOptimizerRule + Send + Sync>> =
        vec![Arc::new(FloatKeyJoins)];
    let defaults = PhysicalOptimizer::new().rules;
    let at = (defaults
        .iter()
        .position(|r| r.name() == "EnsureRequirements"))
    .unwrap_or(0);
    rules.extend(defaults[..at].iter().cloned());
    rules.push(Arc::new(ConstantFunctionFilters));
    rules.extend(defaults[at..].iter().cloned());
    let mut state = SessionStateBuilder::new()
        .with_config(config)
        .with_runtime_env(runtime)
        .with_default_features()
        .with_physical_optimizer_rules(rules)
        .build();
    // DataFusion's file formats (PARQUET, CSV, …) open remote locations as datafusion-cli does.
    for factory in state.table_factories_mut().values_mut() {
        *factory = Arc::new(RemoteFiles(factory.clone()));
    }
    state
        .table_factories_mut()
        .insert("ZARR".to_string(), Arc::new(ZarrTableFactory));
    // COPY … STORED AS ZARR.
    state
        .register_file_format(Arc::new(ZarrFormatFactory), true)
        .expect("registering the zarr file format");
    state
}

/// A context with everything zarrow adds: `STORED AS ZARR`, `FROM 'x.zarr/node'` (other
/// files as datafusion-cli reads them) and `SET zarrow.…`.
pub fn zarr_session_context(config: SessionConfig) -> SessionContext {
    enable_zarr_url_table(SessionContext::new_with_state(zarr_session_state(config)))
}

/// [`zarr_session_context`] on `runtime` (a memory limit, a disk manager for spilling, object
/// stores of your own).
pub fn zarr_session_context_with_runtime(
    config: SessionConfig,
    runtime: Arc<RuntimeEnv>,
) -> SessionContext {
    enable_zarr_url_table(SessionContext::new_with_state(
        zarr_session_state_with_runtime(config, runtime),
    ))
}

/// `ctx` with URL tables: zarr locations through [`ZarrUrlTableFactory`], other files as
/// `SessionContext::enable_url_table` reads them.
pub fn enable_zarr_url_table(ctx: SessionContext) -> SessionContext {
    let current = ctx.state().catalog_list().clone();
    let factory = Arc::new(ZarrUrlTableFactory::default());
    let catalog_list = Arc::new(DynamicFileCatalog::new(
        current,
        factory.clone() as Arc<dyn UrlTableFactory>,
    ));
    let session_id = ctx.session_id();
    let ctx: SessionContext = ctx
        .into_state_builder()
        .with_session_id(session_id)
        .with_catalog_list(catalog_list)
        .build()
        .into();
    factory.bind(&ctx);
    ctx
}

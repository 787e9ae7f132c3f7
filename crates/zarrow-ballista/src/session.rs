//! Clients: a DataFusion `SessionContext` whose queries run on a Ballista cluster, with zarr
//! tables, `STORED AS ZARR`, `FROM 'x.zarr/node'` and `SET zarrow.*` as in a local
//! [`zarrow_datafusion::zarr_session_context`].
//!
//! The client plans (opening metadata to know schemas) and sends the logical plan; the scheduler
//! reopens each zarr table, prunes its chunks and splits the scan into tasks; executors read the
//! chunks. Only the plan, and the query's result, pass through the client.

use std::sync::Arc;

use ballista::prelude::SessionContextExt;
use ballista_core::extension::SessionConfigExt;
use datafusion::error::Result;
use datafusion::execution::runtime_env::RuntimeEnv;
use datafusion::prelude::{SessionConfig, SessionContext};
use zarrow_datafusion::{enable_zarr_url_table, zarr_session_state_with_runtime, ZarrConfig};

use crate::codec::{ZarrLogicalCodec, ZarrPhysicalCodec};

/// `config` made ready for Ballista and zarr: Ballista's settings, the `zarrow.*` settings
/// and zarrow's codecs (wrapping Ballista's). Schedulers, executors and clients all use it.
pub fn zarr_ballista_config(config: SessionConfig) -> SessionConfig {
    let config = config.upgrade_for_ballista();
    let config = if config.options().extensions.get::<ZarrConfig>().is_some() {
        config
    } else {
        config.with_option_extension(ZarrConfig::default())
    };
    config
        .with_ballista_logical_extension_codec(Arc::new(ZarrLogicalCodec::default()))
        .with_ballista_physical_extension_codec(Arc::new(ZarrPhysicalCodec::default()))
}

/// A context whose queries run on the Ballista scheduler at `url` (`df://HOST:PORT`), with
/// zarr tables in place.
pub async fn cluster_session_context(url: &str, config: SessionConfig) -> Result<SessionContext> {
    cluster_session_context_with_runtime(url, config, Arc::new(RuntimeEnv::default())).await
}

/// [`cluster_session_context`] with a runtime of your own (object stores registered there are
/// used to plan; the executors open stores from their own environment).
pub async fn cluster_session_context_with_runtime(
    url: &str,
    config: SessionConfig,
    runtime: Arc<RuntimeEnv>,
) -> Result<SessionContext> {
    let state = zarr_session_state_with_runtime(zarr_ballista_config(config), runtime);
    let ctx = SessionContext::remote_with_state(url, state).await?;
    Ok(enable_zarr_url_table(ctx))
}

/// A context on an in-process Ballista cluster (a scheduler and one executor in this process,
/// talking over loopback gRPC): the distributed plan, serialization and all, on one machine.
pub async fn standalone_session_context(config: SessionConfig) -> Result<SessionContext> {
    let state = zarr_session_state_with_runtime(
        zarr_ballista_config(config),
        Arc::new(RuntimeEnv::default()),
    );
    let ctx = SessionContext::standalone_with_state(state).await?;
    Ok(enable_zarr_url_table(ctx))
}

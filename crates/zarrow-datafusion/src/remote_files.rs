//! Remote object stores for the other formats DataFusion reads by location
//! (`FROM 'https://host/x.parquet'`, `CREATE EXTERNAL TABLE … STORED AS CSV LOCATION 's3://…'`),
//! opened on first use as datafusion-cli does: zarrow's own store for the URL (credentials from
//! the environment, the session's `zarrow.*` timeouts and retries), registered in the session's
//! runtime under the URL's scheme and authority, unless a store is registered there already.

use std::sync::Arc;

use async_trait::async_trait;
use datafusion::catalog::{Session, TableProvider, TableProviderFactory};
use datafusion::error::Result;
use datafusion::execution::object_store::ObjectStoreUrl;
use datafusion::logical_expr::CreateExternalTable;
use zarrow::ZarrStore;

use crate::error::to_datafusion_error;
use crate::options::{ZarrConfig, ZarrTableOptions};

/// The URL schemes of remote stores (`object_store`'s).
const REMOTE_SCHEMES: &[&str] = &[
    "http", "https", "s3", "s3a", "gs", "az", "azure", "abfs", "abfss", "adl",
];

/// Register a store for `location`'s scheme and authority in the session's runtime if it is a
/// remote URL and none is registered yet.
pub(crate) fn ensure_store(state: &dyn Session, location: &str) -> Result<()> {
    let Ok(url) = url::Url::parse(location) else {
        return Ok(());
    };
    if !REMOTE_SCHEMES.contains(&url.scheme()) {
        return Ok(());
    }
    let base = ObjectStoreUrl::parse(format!("{}://{}", url.scheme(), url.authority()))?;
    let runtime = state.runtime_env();
    if runtime.object_store(&base).is_ok() {
        return Ok(());
    }
    let config = ZarrConfig::from_config_options(state.config_options());
    let options = ZarrTableOptions::from_config(&config)?;
    let store =
        ZarrStore::open_configured(location, &[], &options.remote).map_err(to_datafusion_error)?;
    runtime.register_object_store(base.as_ref(), store.object_store().clone());
    Ok(())
}

/// A table factory (DataFusion's `PARQUET`, `CSV`, … listing factory) whose remote locations
/// get their object store first.
#[derive(Debug)]
pub(crate) struct RemoteFiles(pub(crate) Arc<dyn TableProviderFactory>);

#[async_trait]
impl TableProviderFactory for RemoteFiles {
    async fn create(
        &self,
        state: &dyn Session,
        cmd: &CreateExternalTable,
    ) -> Result<Arc<dyn TableProvider>> {
        for location in &cmd.locations {
            ensure_store(state, location)?;
        }
        self.0.create(state, cmd).await
    }
}

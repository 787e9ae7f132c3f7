//! `CREATE EXTERNAL TABLE … STORED AS ZARR` ([`ZarrTableFactory`]) and
//! `SELECT … FROM 'store.zarr/node'` ([`ZarrUrlTableFactory`], which hands every other
//! location to DataFusion's own URL tables: Parquet, CSV, JSON, Arrow files).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use async_trait::async_trait;
use datafusion::arrow::datatypes::DataType;
use datafusion::catalog::{Session, TableProvider, TableProviderFactory, UrlTableFactory};
use datafusion::common::plan_err;
use datafusion::datasource::dynamic_file::DynamicListTableFactory;
use datafusion::error::Result;
use datafusion::execution::SessionState;
use datafusion::logical_expr::CreateExternalTable;
use datafusion::prelude::SessionContext;

use zarrow::ZarrStore;

use crate::error::to_datafusion_error;
use crate::options::{ZarrConfig, ZarrTableOptions};
use crate::table::ZarrTable;

/// Creates [`ZarrTable`]s for `CREATE EXTERNAL TABLE t STORED AS ZARR LOCATION '…'
/// [OPTIONS (…)]`; options default to the session's `zarrow.*` settings.
#[derive(Debug, Default)]
pub struct ZarrTableFactory;

/// Opens the store of a location (e.g. with storage options an application holds).
pub type StoreOpener = dyn Fn(&str) -> zarrow::Result<ZarrStore> + Send + Sync;

impl ZarrTableFactory {
    /// The table `cmd` describes. `open_store`, if given, opens the location's store; else the
    /// store the session registered for it is used, or zarrow opens it itself.
    pub async fn create_table(
        state: &dyn Session,
        cmd: &CreateExternalTable,
        open_store: Option<&StoreOpener>,
    ) -> Result<ZarrTable> {
        let location = match cmd.locations.as_slice() {
            [one] => one.as_str(),
            _ => {
                return plan_err!(
                    "STORED AS ZARR takes exactly one LOCATION, got {}",
                    cmd.locations.len()
                )
            }
        };
        if !cmd.table_partition_cols.is_empty() {
            return plan_err!("STORED AS ZARR tables have no partition columns");
        }
        let defaults = ZarrTableOptions::from_config(&ZarrConfig::from_config_options(
            state.config_options(),
        ))?;
        let options = defaults.with_options(&cmd.options)?;
        let table = match open_store {
            Some(open) => {
                let store = open(location).map_err(to_datafusion_error)?;
                ZarrTable::try_new_with_store(store, options).await?
            }
            None => ZarrTable::try_new_with_session(state, location, options).await?,
        };
        let declared = cmd.schema.as_arrow();
        if !declared.fields().is_empty() {
            let actual = table.model().schema();
            let same =
                declared.fields().len() == actual.fields().len()
                    && declared.fields().iter().zip(actual.fields()).all(|(a, b)| {
                        a.name() == b.name() && same_type(a.data_type(), b.data_type())
                    });
            if !same {
                return plan_err!(
                    "the declared columns of '{}' differ from the zarr table's: {}",
                    cmd.name,
                    actual
                        .fields()
                        .iter()
                        .map(|f| format!("{} {}", f.name(), f.data_type()))
                        .collect::<Vec<_>>()
                        .join(", ")
                );
            }
        }
        Ok(table)
    }
}

#[async_trait]
impl TableProviderFactory for ZarrTableFactory {
    async fn create(
        &self,
        state: &dyn Session,
        cmd: &CreateExternalTable,
    ) -> Result<Arc<dyn TableProvider>> {
        Ok(Arc::new(Self::create_table(state, cmd, None).await?))
    }
}

/// Declared and actual column types agree: equal, or both strings (or both binary) in any
/// representation (SQL `VARCHAR` is `Utf8View` in DataFusion; `string_type` picks ours).
fn same_type(declared: &DataType, actual: &DataType) -> bool {
    use DataType::*;
    let family = |t: &DataType| match t {
        Utf8 | LargeUtf8 | Utf8View => Some(0),
        Binary | LargeBinary | BinaryView => Some(1),
        _ => None,
    };
    declared == actual || family(declared).is_some_and(|f| family(actual) == Some(f))
}

/// Whether a location names a zarr node: an Icechunk repository's (`icechunk+…`), a path
/// with a component ending in `.zarr`, or a local directory holding `zarr.json`, `.zgroup`
/// or `.zarray`.
pub(crate) fn is_zarr_location(location: &str) -> bool {
    if location.starts_with(zarrow::ICECHUNK_PREFIX) {
        return true;
    }
    let path = match location.split_once("://") {
        Some((_, rest)) => rest,
        None => location,
    };
    let path = path.split(['?', '#']).next().unwrap_or(path);
    if path
        .split(['/', '\\'])
        .any(|c| c.len() > 5 && c.to_ascii_lowercase().ends_with(".zarr"))
    {
        return true;
    }
    let local = match location.split_once("://") {
        None => Some(std::path::PathBuf::from(location)),
        Some(("file", _)) => url::Url::parse(location)
            .ok()
            .and_then(|u| u.to_file_path().ok()),
        Some(_) => None,
    };
    local.is_some_and(|p| {
        p.is_dir()
            && ["zarr.json", ".zgroup", ".zarray"]
                .iter()
                .any(|m| p.join(m).is_file())
    })
}

/// URL tables (`SELECT … FROM '<location>'`): zarr locations become [`ZarrTable`]s with the
/// session's `zarrow.*` settings; anything else goes to DataFusion's
/// `DynamicListTableFactory` (Parquet, CSV, JSON, Arrow, …). Installed by
/// [`crate::enable_zarr_url_table`].
#[derive(Debug, Default)]
pub struct ZarrUrlTableFactory {
    inner: DynamicListTableFactory,
    bound: AtomicBool,
}

impl ZarrUrlTableFactory {
    /// Bind the factory to the session whose settings (and object stores) it uses.
    pub fn bind(&self, ctx: &SessionContext) {
        self.inner.session_store().with_state(ctx.state_weak_ref());
        self.bound.store(true, Ordering::Release);
    }

    fn session_state(&self) -> Option<SessionState> {
        if !self.bound.load(Ordering::Acquire) {
            return None;
        }
        let session = self.inner.session_store().get_session().upgrade()?;
        let guard = session.read();
        guard.as_any().downcast_ref::<SessionState>().cloned()
    }
}

#[async_trait]
impl UrlTableFactory for ZarrUrlTableFactory {
    async fn try_new(&self, url: &str) -> Result<Option<Arc<dyn TableProvider>>> {
        if !is_zarr_location(url) {
            let Some(state) = self.session_state() else {
                return Ok(None);
            };
            crate::remote_files::ensure_store(&state, url)?;
            return self.inner.try_new(url).await;
        }
        let table = match self.session_state() {
            Some(state) => {
                let options = ZarrTableOptions::from_config(&ZarrConfig::from_config_options(
                    state.config_options(),
                ))?;
                ZarrTable::try_new_with_session(&state, url, options).await?
            }
            None => ZarrTable::try_new(url, ZarrTableOptions::default()).await?,
        };
        Ok(Some(Arc::new(table)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zarr_locations() {
        assert!(is_zarr_location("data/pbmc.zarr/obs"));
        assert!(is_zarr_location("s3://bucket/x.ZARR"));
        assert!(is_zarr_location("file:///tmp/a.zarr/b"));
        assert!(!is_zarr_location("data/x.parquet"));
        assert!(!is_zarr_location("s3://bucket/data.csv"));
        assert!(!is_zarr_location(".zarr"));
        assert!(is_zarr_location("icechunk+s3://bucket/atlas@v1/obs"));
    }
}

//! Locations to stores for DataFusion: the object store an application registered in the
//! runtime for a location's scheme and authority, as a [`ZarrStore`]. The one place
//! zarrow-datafusion resolves a location to a store; everything else is the core's
//! (`ZarrStore::open`).

use std::sync::Arc;

use datafusion::execution::object_store::ObjectStoreUrl;
use datafusion::execution::runtime_env::RuntimeEnv;
use object_store::ObjectStore;
use zarrow::ZarrStore;

/// A `ZarrStore` over the object store the runtime has registered for `location`'s scheme and
/// authority, used as the application set it up. `None` for local paths and `file://` (zarrow
/// resolves `..` in them itself) and for locations nothing is registered for (zarrow then
/// opens the store itself: `memory://` as its process-wide store, clouds from the environment).
pub(crate) fn registered_store(runtime: &RuntimeEnv, location: &str) -> Option<ZarrStore> {
    let url = url::Url::parse(location).ok()?;
    if url.scheme().len() <= 1 || url.scheme() == "file" {
        return None;
    }
    let base = ObjectStoreUrl::parse(format!("{}://{}", url.scheme(), url.authority())).ok()?;
    let store: Arc<dyn ObjectStore> = runtime.object_store(&base).ok()?;
    let root = zarrow::key::from_url_path(url.path()).ok()?;
    Some(ZarrStore::new(store, root))
}

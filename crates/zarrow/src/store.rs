//! Locations → object stores.
//!
//! A location names a zarr node: a local path (`data/pbmc.zarr/obs`), `file://`, `memory://`
//! (a process-wide in-memory store, for tests), `s3://`, `gs://`, `az://`/`abfs://`, or
//! `http(s)://`. Cloud credentials and endpoints come from the environment, as datafusion-cli
//! takes them (`AWS_*`, `GOOGLE_*`, `AZURE_*`). The result is a [`ZarrStore`]: an
//! `object_store` plus the path of the node inside it.

use std::sync::{Arc, OnceLock};

use bytes::Bytes;
use object_store::memory::InMemory;
use object_store::path::Path;
use object_store::{GetOptions, GetRange, ObjectStore, ObjectStoreExt};
use url::Url;

use crate::{Error, Result};

/// An object store and the path of a zarr node within it.
#[derive(Debug, Clone)]
pub struct ZarrStore {
    store: Arc<dyn ObjectStore>,
    root: Path,
    location: String,
}

/// The process-wide store behind `memory://` locations.
pub fn memory_store() -> Arc<InMemory> {
    static STORE: OnceLock<Arc<InMemory>> = OnceLock::new();
    STORE.get_or_init(|| Arc::new(InMemory::new())).clone()
}

impl ZarrStore {
    /// A store at `root` inside an existing object store.
    pub fn new(store: Arc<dyn ObjectStore>, root: impl Into<Path>) -> Self {
        let root = root.into();
        ZarrStore {
            location: root.to_string(),
            store,
            root,
        }
    }

    /// Open a location (see the module docs), cloud credentials from the environment.
    pub fn open(location: &str) -> Result<Self> {
        Self::open_with_options(location, &[])
    }

    /// Open a location with storage options for its store, as `object_store` names them
    /// (`aws_access_key_id`, `aws_endpoint`, `aws_region`, `allow_http`,
    /// `google_service_account`, `azure_storage_account_name`, …). Options given here win over
    /// those from the environment (`AWS_*`, `GOOGLE_*`, `AZURE_*`, as datafusion-cli reads them).
    pub fn open_with_options(location: &str, options: &[(String, String)]) -> Result<Self> {
        let err = |message: String| Error::Location {
            location: location.to_string(),
            message,
        };
        let trimmed = location.trim_end_matches('/');
        let (store, root): (Arc<dyn ObjectStore>, Path) = match Url::parse(trimmed) {
            Ok(url) if url.scheme().len() > 1 => match url.scheme() {
                "file" => {
                    let path = url
                        .to_file_path()
                        .map_err(|_| err("not a local file path".into()))?;
                    local(&path.to_string_lossy()).map_err(err)?
                }
                "memory" => {
                    let path = format!("{}{}", url.host_str().unwrap_or(""), url.path());
                    (
                        memory_store() as Arc<dyn ObjectStore>,
                        Path::from(path.trim_matches('/')),
                    )
                }
                _ => remote(&url, options).map_err(err)?,
            },
            // No scheme (or a Windows drive letter): a local path.
            _ => local(trimmed).map_err(err)?,
        };
        Ok(ZarrStore {
            store,
            root,
            location: trimmed.to_string(),
        })
    }

    /// The object store.
    pub fn object_store(&self) -> &Arc<dyn ObjectStore> {
        &self.store
    }

    /// The node's path in the object store.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The location as given.
    pub fn location(&self) -> &str {
        &self.location
    }

    /// The same store rooted at a child node.
    pub fn child(&self, relative: &str) -> ZarrStore {
        let root = self.key(relative);
        ZarrStore {
            store: self.store.clone(),
            location: format!("{}/{}", self.location, relative.trim_matches('/')),
            root,
        }
    }

    /// The object path of `relative` below the root.
    pub fn key(&self, relative: &str) -> Path {
        let mut path = self.root.clone();
        for part in relative.split('/').filter(|p| !p.is_empty()) {
            path = path.join(part);
        }
        path
    }

    /// Get an object; `Ok(None)` if it does not exist.
    pub async fn get_opt(&self, relative: &str) -> Result<Option<Bytes>> {
        let path = self.key(relative);
        match self.store.get(&path).await {
            Ok(r) => r
                .bytes()
                .await
                .map(Some)
                .map_err(|source| store_err(&path, source)),
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(source) => Err(store_err(&path, source)),
        }
    }

    /// Get a byte range of an object: `(bytes, object size)`; `Ok(None)` if it does not exist.
    pub async fn get_range_opt(
        &self,
        relative: &str,
        range: GetRange,
    ) -> Result<Option<(Bytes, u64)>> {
        let path = self.key(relative);
        let opts = GetOptions {
            range: Some(range),
            ..Default::default()
        };
        match self.store.get_opts(&path, opts).await {
            Ok(r) => {
                let size = r.meta.size;
                let bytes = r.bytes().await.map_err(|source| store_err(&path, source))?;
                Ok(Some((bytes, size)))
            }
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(source) => Err(store_err(&path, source)),
        }
    }

    /// The size of an object; `Ok(None)` if it does not exist.
    pub async fn size_opt(&self, relative: &str) -> Result<Option<u64>> {
        let path = self.key(relative);
        match self.store.head(&path).await {
            Ok(meta) => Ok(Some(meta.size)),
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(source) => Err(store_err(&path, source)),
        }
    }

    /// Get one byte range of an object.
    pub async fn get_range(&self, relative: &str, range: std::ops::Range<u64>) -> Result<Bytes> {
        let path = self.key(relative);
        self.store
            .get_range(&path, range)
            .await
            .map_err(|source| store_err(&path, source))
    }

    /// Get several ranges of one object (coalesced by the store).
    pub async fn get_ranges(
        &self,
        relative: &str,
        ranges: &[std::ops::Range<u64>],
    ) -> Result<Vec<Bytes>> {
        let path = self.key(relative);
        self.store
            .get_ranges(&path, ranges)
            .await
            .map_err(|source| store_err(&path, source))
    }

    /// Put an object (used by the writer).
    pub async fn put(&self, relative: &str, bytes: Bytes) -> Result<()> {
        let path = self.key(relative);
        self.store
            .put(&path, bytes.into())
            .await
            .map(|_| ())
            .map_err(|source| store_err(&path, source))
    }

    /// Immediate child names (common prefixes) below `relative`.
    pub async fn list_children(&self, relative: &str) -> Result<Vec<String>> {
        let path = self.key(relative);
        let listing = self
            .store
            .list_with_delimiter(Some(&path))
            .await
            .map_err(|source| store_err(&path, source))?;
        let mut names: Vec<String> = listing
            .common_prefixes
            .iter()
            .filter_map(|p| p.filename().map(str::to_string))
            .collect();
        names.sort();
        Ok(names)
    }
}

fn store_err(path: &Path, source: object_store::Error) -> Error {
    Error::Store {
        path: path.to_string(),
        source,
    }
}

/// A local path as an absolute, normalized object-store path: `.` and `..` are resolved
/// lexically (the path need not exist yet, e.g. for writing), so `../data/x.zarr` works.
fn local(path: &str) -> std::result::Result<(Arc<dyn ObjectStore>, Path), String> {
    let abs =
        normalize(&std::path::absolute(path).map_err(|e| format!("cannot resolve path: {e}"))?);
    let fs = object_store::local::LocalFileSystem::new();
    let root = Path::from_absolute_path(&abs).map_err(|e| e.to_string())?;
    Ok((Arc::new(fs), root))
}

fn normalize(path: &std::path::Path) -> std::path::PathBuf {
    use std::path::Component;
    let mut out = std::path::PathBuf::new();
    for component in path.components() {
        match component {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}

/// A cloud or HTTP store for `url` (`object_store`'s URL parsing: `s3://`, `gs://`, `az://`,
/// `abfs://`, `http(s)://`, and the providers' https URLs), configured from the environment
/// and then `options`; the URL's path is the node's path inside it.
#[cfg(feature = "cloud")]
fn remote(
    url: &Url,
    options: &[(String, String)],
) -> std::result::Result<(Arc<dyn ObjectStore>, Path), String> {
    let (scheme, _) = object_store::ObjectStoreScheme::parse(url).map_err(|e| e.to_string())?;
    if matches!(
        scheme,
        object_store::ObjectStoreScheme::Local | object_store::ObjectStoreScheme::Memory
    ) {
        return Err(format!("unsupported scheme '{}'", url.scheme()));
    }
    let mut all: Vec<(String, String)> = std::env::vars()
        .filter(|(k, _)| {
            ["AWS_", "GOOGLE_", "AZURE_"]
                .iter()
                .any(|p| k.starts_with(p))
        })
        .map(|(k, v)| (k.to_ascii_lowercase(), v))
        .collect();
    // An http:// endpoint (a local S3 server) needs plain HTTP allowed; HTTP stores always.
    let endpoint_keys = [
        "aws_endpoint",
        "aws_endpoint_url",
        "endpoint",
        "endpoint_url",
    ];
    let http_endpoint = std::env::var("AWS_ENDPOINT_URL").is_ok_and(|e| e.starts_with("http://"))
        || options
            .iter()
            .any(|(k, v)| endpoint_keys.contains(&k.as_str()) && v.starts_with("http://"));
    if http_endpoint || scheme == object_store::ObjectStoreScheme::Http {
        all.push(("allow_http".into(), "true".into()));
    }
    all.extend(options.iter().cloned());
    let (store, path) = object_store::parse_url_opts(url, all).map_err(|e| e.to_string())?;
    Ok((Arc::from(store), path))
}

#[cfg(not(feature = "cloud"))]
fn remote(
    url: &Url,
    _options: &[(String, String)],
) -> std::result::Result<(Arc<dyn ObjectStore>, Path), String> {
    Err(format!(
        "'{}://' needs zarrow built with the `cloud` feature",
        url.scheme()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn local_paths_resolve_dot_segments() {
        let dir = std::env::current_dir().unwrap();
        let name = dir.file_name().unwrap().to_string_lossy().into_owned();
        let store = ZarrStore::open(&format!("./../{name}/x/../data.zarr/")).unwrap();
        let expected = Path::from_absolute_path(dir.join("data.zarr")).unwrap();
        assert_eq!(store.root(), &expected);
        let store = ZarrStore::open(&format!("file://{}/a/./b/../c", dir.display())).unwrap();
        assert_eq!(
            store.root(),
            &Path::from_absolute_path(dir.join("a/c")).unwrap()
        );
    }
}

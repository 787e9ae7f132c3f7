//! Locations → object stores.
//!
//! A location names a zarr node: a local path (`data/pbmc.zarr/obs`), `file://`, `memory://`
//! (a process-wide in-memory store, for tests), `s3://`, `gs://`, `az://`/`abfs://`, or
//! `http(s)://`. Cloud credentials and endpoints come from the environment, as datafusion-cli
//! takes them (`AWS_*`, `GOOGLE_*`, `AZURE_*`), and from store options; remote clients are built
//! (with their timeouts and retries) by [`crate::remote`]. The result is a [`ZarrStore`]: an
//! `object_store` plus the path of the node inside it.

use std::sync::{Arc, OnceLock};

use bytes::Bytes;
use object_store::memory::InMemory;
use object_store::path::Path;
use object_store::{GetOptions, GetRange, ObjectStore, ObjectStoreExt};
use url::Url;

use crate::remote::RemoteOptions;
use crate::{Error, Result};

/// An object store and the path of a zarr node within it.
#[derive(Debug, Clone)]
pub struct ZarrStore {
    store: Arc<dyn ObjectStore>,
    root: Path,
    location: String,
    /// How often a read cut short is tried again (see `retrying`).
    body_retries: usize,
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
            body_retries: crate::remote::DEFAULT_MAX_RETRIES,
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
        Self::open_configured(location, options, &RemoteOptions::default())
    }

    /// Open a location with store options and the timeouts and retries of remote stores
    /// (see [`crate::remote`]; keys among `options` win over `remote`).
    pub fn open_configured(
        location: &str,
        options: &[(String, String)],
        remote: &RemoteOptions,
    ) -> Result<Self> {
        let err = |message: String| Error::Location {
            location: location.to_string(),
            message,
        };
        let trimmed = location.trim_end_matches('/');
        if trimmed.starts_with(crate::ICECHUNK_PREFIX) {
            return Self::open_repository(trimmed, options, remote).map_err(err);
        }
        if let Some(reference) = &remote.reference {
            return Err(err(format!(
                "the option ref = '{reference}' asks for a version, but only Icechunk \
                 repositories (icechunk+file://, icechunk+s3://) have versions"
            )));
        }
        let mut body_retries = 0;
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
                _ => {
                    let (store, root, retries) =
                        crate::remote::open(&url, options, remote).map_err(err)?;
                    body_retries = retries;
                    (store, root)
                }
            },
            // No scheme (or a Windows drive letter): a local path.
            _ => local(trimmed).map_err(err)?,
        };
        Ok(ZarrStore {
            store,
            root,
            location: trimmed.to_string(),
            body_retries,
        })
    }

    /// An Icechunk repository's node at a version (see [`crate::icechunk`]).
    #[cfg(feature = "icechunk")]
    fn open_repository(
        location: &str,
        options: &[(String, String)],
        remote: &RemoteOptions,
    ) -> std::result::Result<Self, String> {
        use crate::icechunk::{RepositoryLocation, RepositoryObjectStore, RepositoryOptions};
        let parsed = RepositoryLocation::parse(location).unwrap_or_else(|| {
            Err(format!(
                "not an Icechunk location (expected {}…)",
                crate::ICECHUNK_PREFIX
            ))
        })?;
        let (remote, rest) = remote.clone().with_store_options(options)?;
        let store = RepositoryObjectStore::new(
            parsed,
            RepositoryOptions {
                reference: remote
                    .reference
                    .clone()
                    .or_else(|| remote.default_reference.clone()),
                virtual_chunks: remote.virtual_chunks.clone(),
                store: rest,
            },
            location,
        );
        Ok(ZarrStore {
            store: Arc::new(store),
            root: Path::from(""),
            location: location.to_string(),
            body_retries: 0,
        })
    }

    #[cfg(not(feature = "icechunk"))]
    fn open_repository(
        _location: &str,
        _options: &[(String, String)],
        _remote: &RemoteOptions,
    ) -> std::result::Result<Self, String> {
        Err("Icechunk repositories need zarrow built with the cargo feature `icechunk`".into())
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
            body_retries: self.body_retries,
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

    /// `attempt`, again (with backoff) while it fails with a response cut short — a transport
    /// error after the request succeeded, which `object_store` does not retry for objects
    /// without an ETag — up to the store's retry count. Each attempt is a fresh request, so
    /// nothing of a failed response is kept; status errors and timeouts are not retried here
    /// (`object_store`'s own retries handled them).
    async fn retrying<T, F, Fut>(
        &self,
        mut attempt: F,
    ) -> std::result::Result<T, object_store::Error>
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = std::result::Result<T, object_store::Error>>,
    {
        let mut tries = 0;
        loop {
            match attempt().await {
                Err(e) if tries < self.body_retries && cut_short(&e) => {
                    tries += 1;
                    log::info!(
                        "retrying a read cut short ({tries}/{}): {e}",
                        self.body_retries
                    );
                    tokio::time::sleep(std::time::Duration::from_millis(50 << tries.min(6))).await;
                }
                other => return other,
            }
        }
    }

    /// Get an object; `Ok(None)` if it does not exist.
    pub async fn get_opt(&self, relative: &str) -> Result<Option<Bytes>> {
        let path = self.key(relative);
        self.retrying(|| async {
            match self.store.get(&path).await {
                Ok(r) => r.bytes().await.map(Some),
                Err(object_store::Error::NotFound { .. }) => Ok(None),
                Err(e) => Err(e),
            }
        })
        .await
        .map_err(|source| store_err(&path, source))
    }

    /// Get a metadata document (`zarr.json`, `.zarray`, `.zmetadata`, …) of the node named
    /// `node` in messages; `Ok(None)` if it does not exist. A document whose size (as the store
    /// reports it: a file's length, a response's `Content-Length`) is over
    /// [`max_metadata_bytes`] is an error before anything is allocated for it.
    pub async fn get_document(&self, relative: &str, node: &str) -> Result<Option<Bytes>> {
        let limit = max_metadata_bytes();
        self.get_bounded(relative, limit, |size| {
            Error::metadata(
                node,
                relative,
                format!(
                    "the document is {size} bytes, over the limit of {limit} \
                     (ZARROW_MAX_METADATA_BYTES raises it)"
                ),
            )
        })
        .await
    }

    /// Get an object of at most `limit` bytes; `Ok(None)` if it does not exist. One the
    /// store says is larger (a file's length, a response's `Content-Length`) is the error
    /// `too_large(size)` before its body is read; one whose body turns out larger, too.
    pub async fn get_bounded(
        &self,
        relative: &str,
        limit: u64,
        too_large: impl Fn(u64) -> Error,
    ) -> Result<Option<Bytes>> {
        let path = self.key(relative);
        // Ok(Err(size)): the store says the object is `size` bytes, too many to read.
        let fetched = self
            .retrying(|| async {
                match self.store.get(&path).await {
                    Ok(r) if r.meta.size > limit => Ok(Some(Err(r.meta.size))),
                    Ok(r) => r.bytes().await.map(|b| Some(Ok(b))),
                    Err(object_store::Error::NotFound { .. }) => Ok(None),
                    Err(e) => Err(e),
                }
            })
            .await
            .map_err(|source| store_err(&path, source))?;
        match fetched {
            None => Ok(None),
            Some(Err(size)) => Err(too_large(size)),
            Some(Ok(bytes)) if bytes.len() as u64 > limit => Err(too_large(bytes.len() as u64)),
            Some(Ok(bytes)) => Ok(Some(bytes)),
        }
    }

    /// Get a byte range of an object: `(bytes, object size)`; `Ok(None)` if it does not exist.
    pub async fn get_range_opt(
        &self,
        relative: &str,
        range: GetRange,
    ) -> Result<Option<(Bytes, u64)>> {
        let path = self.key(relative);
        self.retrying(|| async {
            let opts = GetOptions {
                range: Some(range.clone()),
                ..Default::default()
            };
            match self.store.get_opts(&path, opts).await {
                Ok(r) => {
                    let size = r.meta.size;
                    r.bytes().await.map(|bytes| Some((bytes, size)))
                }
                Err(object_store::Error::NotFound { .. }) => Ok(None),
                Err(e) => Err(e),
            }
        })
        .await
        .map_err(|source| store_err(&path, source))
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
        self.retrying(|| self.store.get_range(&path, range.clone()))
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
        self.retrying(|| self.store.get_ranges(&path, ranges))
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

/// The largest metadata document read by default (256 MiB: consolidated metadata of hierarchies
/// with hundreds of thousands of arrays fits).
pub const DEFAULT_MAX_METADATA_BYTES: u64 = 256 << 20;

/// The largest metadata document read: `ZARROW_MAX_METADATA_BYTES` (bytes) if set, else
/// [`DEFAULT_MAX_METADATA_BYTES`].
pub fn max_metadata_bytes() -> u64 {
    std::env::var("ZARROW_MAX_METADATA_BYTES")
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(DEFAULT_MAX_METADATA_BYTES)
}

/// Whether `e` is a transport failure of a request that had been sent (a body cut short, a
/// connection reset mid-response), as opposed to a status, a timeout or a refused connection.
#[cfg(feature = "cloud")]
fn cut_short(e: &object_store::Error) -> bool {
    use object_store::client::{HttpError, HttpErrorKind};
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(err) = source {
        if let Some(http) = err.downcast_ref::<HttpError>() {
            return !matches!(http.kind(), HttpErrorKind::Timeout | HttpErrorKind::Connect);
        }
        source = err.source();
    }
    false
}

/// Without remote stores there are no responses to be cut short.
#[cfg(not(feature = "cloud"))]
fn cut_short(_: &object_store::Error) -> bool {
    false
}

fn store_err(path: &Path, source: object_store::Error) -> Error {
    Error::Store {
        path: path.to_string(),
        source,
    }
}

/// A local path as an absolute, normalized object-store path: `.` and `..` are resolved
/// lexically (the path need not exist yet, e.g. for writing), so `../data/x.zarr` works.
pub(crate) fn local(path: &str) -> std::result::Result<(Arc<dyn ObjectStore>, Path), String> {
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

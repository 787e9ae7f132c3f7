//! Locations → object stores.
//!
//! A location names a zarr node: a local path (`data/pbmc.zarr/obs`), `file://`, `memory://`
//! (a process-wide in-memory store, for tests), `s3://`, `gs://`, `az://`/`abfs://`, or
//! `http(s)://`. Cloud credentials and endpoints come from the environment, as datafusion-cli
//! takes them (`AWS_*`, `GOOGLE_*`, `AZURE_*`), and from store options; remote clients are built
//! (with their timeouts and retries) by [`crate::remote`]. The result is a [`ZarrStore`]: an
//! `object_store` plus the path of the node inside it.

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures::{Stream, StreamExt, TryStreamExt};
use object_store::memory::InMemory;
use object_store::path::Path;
use object_store::{
    GetOptions, GetRange, GetResult, GetResultPayload, ObjectStore, ObjectStoreExt,
};
use url::Url;

use crate::metrics::ScanMetrics;
use crate::options::ReadLimits;
use crate::remote::{RemoteOptions, WarmUp};
use crate::{Error, Result};

/// An object store and the path of a zarr node within it.
///
/// ```
/// use bytes::Bytes;
/// use zarrow::ZarrStore;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> zarrow::Result<()> {
/// let sample = concat!(env!("CARGO_MANIFEST_DIR"), "/../../data/pbmc_sample.zarr");
/// let store = ZarrStore::open(sample)?;
/// assert!(store.get_opt("zarr.json").await?.is_some());
/// let obs = store.child("obs");
/// assert!(obs.list_children("").await?.contains(&"cell_type".to_string()));
///
/// // `memory://` is one in-memory store for the whole process.
/// let scratch = ZarrStore::open("memory:///scratch")?;
/// scratch.put("a/b", Bytes::from_static(b"hi")).await?;
/// assert_eq!(scratch.get_opt("a/b").await?.as_deref(), Some(&b"hi"[..]));
/// assert_eq!(scratch.get_opt("a/missing").await?, None);
/// assert_eq!(scratch.list_children("").await?, ["a"]);
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct ZarrStore {
    store: Arc<dyn ObjectStore>,
    root: Path,
    location: String,
    /// How often a read cut short is tried again (see `retrying`).
    body_retries: usize,
    /// How long one read may take, all its requests included (a remote store's `timeout`;
    /// `None`: unbounded, as local files and memory are).
    timeout: Option<Duration>,
    /// What nodes opened from this store hold to: the metadata document and item limits.
    limits: ReadLimits,
    /// What metadata requests (documents, listings) count into.
    metrics: ScanMetrics,
    /// A remote client's warm-up, started by the first metadata document read.
    warm_up: Option<Arc<WarmUp>>,
    /// The root's path on the local file system, when the store is one (the writer stages
    /// and renames there; see `write/publish.rs`).
    local: Option<std::path::PathBuf>,
    /// The Icechunk repository's node this store reads (writers open a session on it).
    #[cfg(feature = "icechunk")]
    repository: Option<Arc<crate::icechunk::RepositoryObjectStore>>,
    /// A local root directory as it was when the store was opened (see [`Self::check_root`]).
    identity: Option<Arc<RootIdentity>>,
}

/// Which directory a local store's root was when the store was opened: a table replaced by a
/// writer (published by a rename) is another directory at the same path.
#[derive(Debug, PartialEq, Eq)]
struct RootIdentity {
    path: std::path::PathBuf,
    /// Device, inode and birth time (where the file system keeps one: an inode number freed
    /// by a deleted table can be reused by a later one).
    id: (u64, u64, Option<std::time::SystemTime>),
}

impl RootIdentity {
    fn of(path: &std::path::Path) -> Option<(u64, u64, Option<std::time::SystemTime>)> {
        #[cfg(unix)]
        {
            use std::os::unix::fs::MetadataExt;
            let meta = std::fs::metadata(path).ok()?;
            Some((meta.dev(), meta.ino(), meta.created().ok()))
        }
        #[cfg(not(unix))]
        {
            let _ = path;
            None
        }
    }

    fn at(path: &std::path::Path) -> Option<Arc<Self>> {
        let id = Self::of(path)?;
        Some(Arc::new(Self {
            path: path.to_path_buf(),
            id,
        }))
    }
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
            body_retries: crate::options::DEFAULT_MAX_RETRIES,
            timeout: None,
            limits: ReadLimits::default(),
            metrics: ScanMetrics::default(),
            warm_up: None,
            local: None,
            #[cfg(feature = "icechunk")]
            repository: None,
            identity: None,
        }
    }

    /// Open a location (see the module docs), cloud credentials from the environment.
    ///
    /// Opening reads nothing: the nodes are read from the store when opened on it.
    ///
    /// ```
    /// use zarrow::{Node, ZarrStore};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> zarrow::Result<()> {
    /// let sample = concat!(env!("CARGO_MANIFEST_DIR"), "/../../data/pbmc_sample.zarr");
    /// let store = ZarrStore::open(sample)?;
    /// let root = Node::open_store(store, "pbmc_sample.zarr").await?;
    /// assert!(matches!(root, Node::Group(_)));
    /// # Ok(())
    /// # }
    /// ```
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
    /// (see [`RemoteOptions`]; keys among `options` win over `remote`).
    pub fn open_configured(
        location: &str,
        options: &[(String, String)],
        remote: &RemoteOptions,
    ) -> Result<Self> {
        let err = |message: String| Error::bad_location(location, message);
        let trimmed = location.trim_end_matches('/');
        if trimmed.starts_with(crate::ICECHUNK_PREFIX) {
            return Self::open_repository(trimmed, options, remote);
        }
        if let Some(reference) = &remote.reference {
            return Err(err(format!(
                "the option ref = '{reference}' asks for a version, but only Icechunk \
                 repositories (icechunk+file://, +s3://, +gs://, +az://) have versions"
            )));
        }
        let mut body_retries = 0;
        let mut timeout = None;
        let mut warm_up = None;
        let mut local_path = None;
        let (store, root): (Arc<dyn ObjectStore>, Path) = match Url::parse(trimmed) {
            Ok(url) if url.scheme().len() > 1 => match url.scheme() {
                "file" => {
                    let path = url
                        .to_file_path()
                        .map_err(|_| err("not a local file path".into()))?;
                    let path = path.to_string_lossy();
                    local_path = Some(local_fs_path(&path)?);
                    local(&path)?
                }
                "memory" => {
                    let path = format!("{}{}", url.host_str().unwrap_or(""), url.path());
                    let root = crate::key::from_url_path(&path).map_err(err)?;
                    (memory_store() as Arc<dyn ObjectStore>, root)
                }
                _ => {
                    let remote = crate::remote::open(location, &url, options, remote)?;
                    body_retries = remote.max_retries;
                    timeout = Some(remote.timeout);
                    warm_up = remote.warm_up;
                    (remote.store, remote.root)
                }
            },
            // No scheme (or a Windows drive letter): a local path.
            _ => {
                local_path = Some(local_fs_path(trimmed)?);
                local(trimmed)?
            }
        };
        Ok(ZarrStore {
            store,
            root,
            location: trimmed.to_string(),
            body_retries,
            timeout,
            limits: ReadLimits::default(),
            metrics: ScanMetrics::default(),
            identity: local_path.as_deref().and_then(RootIdentity::at),
            warm_up,
            local: local_path,
            #[cfg(feature = "icechunk")]
            repository: None,
        })
    }

    /// An Icechunk repository's node at a version (see [`crate::icechunk`]).
    #[cfg(feature = "icechunk")]
    fn open_repository(
        location: &str,
        options: &[(String, String)],
        remote: &RemoteOptions,
    ) -> Result<Self> {
        use crate::icechunk::{RepositoryLocation, RepositoryObjectStore, RepositoryOptions};
        let parsed = RepositoryLocation::parse(location)?;
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
        let store = Arc::new(store);
        Ok(ZarrStore {
            store: store.clone(),
            root: Path::from(""),
            location: location.to_string(),
            body_retries: 0,
            timeout: None,
            limits: ReadLimits::default(),
            metrics: ScanMetrics::default(),
            warm_up: None,
            local: None,
            repository: Some(store),
            identity: None,
        })
    }

    #[cfg(not(feature = "icechunk"))]
    fn open_repository(
        location: &str,
        _options: &[(String, String)],
        _remote: &RemoteOptions,
    ) -> Result<Self> {
        Err(Error::bad_location(
            location,
            "Icechunk repositories need zarrow built with the cargo feature `icechunk`",
        ))
    }

    /// This store with other limits (see [`ReadLimits`]): nodes opened from it read metadata
    /// documents and data types under them. Openers given read options set theirs here.
    pub fn with_limits(mut self, limits: ReadLimits) -> Self {
        self.limits = limits;
        self
    }

    /// The limits nodes opened from this store hold to (the defaults unless
    /// [`Self::with_limits`] set others).
    pub fn limits(&self) -> &ReadLimits {
        &self.limits
    }

    /// This store counting its metadata requests (documents read or found missing, listings)
    /// into `metrics`, as do the stores of the nodes opened from it.
    pub fn with_metrics(mut self, metrics: ScanMetrics) -> Self {
        self.metrics = metrics;
        self
    }

    /// What the store's metadata requests count into.
    pub fn metrics(&self) -> &ScanMetrics {
        &self.metrics
    }

    /// The same store (root, limits, local path) with its objects read and written through
    /// `store` (a writer's wrapper of the same objects).
    pub(crate) fn with_object_store(mut self, store: Arc<dyn ObjectStore>) -> Self {
        self.store = store;
        self
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
            timeout: self.timeout,
            limits: self.limits,
            metrics: self.metrics.clone(),
            warm_up: self.warm_up.clone(),
            local: self.local.as_ref().map(|p| {
                (relative.split('/').filter(|p| !p.is_empty())).fold(p.clone(), |p, s| p.join(s))
            }),
            #[cfg(feature = "icechunk")]
            repository: None,
            identity: self.identity.clone(),
        }
    }

    /// The Icechunk repository node this store reads, for a store opened from an
    /// `icechunk+` location (a writer opens a writable session there).
    #[cfg(feature = "icechunk")]
    pub(crate) fn repository(&self) -> Option<&Arc<crate::icechunk::RepositoryObjectStore>> {
        self.repository.as_ref()
    }

    /// Whether this store reads (or writes) an Icechunk repository: a store opened from an
    /// `icechunk+` location, a node below it, or a session's store named by one.
    pub(crate) fn is_repository(&self) -> bool {
        self.location.starts_with(crate::ICECHUNK_PREFIX)
    }

    /// The id of the Icechunk snapshot this store reads: for a store opened from an
    /// `icechunk+` location, once a read resolved its branch or tag (opening a table does);
    /// `None` for other stores.
    pub fn snapshot_id(&self) -> Option<String> {
        #[cfg(feature = "icechunk")]
        if let Some(repository) = &self.repository {
            return repository.snapshot_id();
        }
        None
    }

    /// This store named `location` (a store over an Icechunk session keeps the location the
    /// user gave).
    #[cfg(feature = "icechunk")]
    pub(crate) fn with_location(mut self, location: &str) -> Self {
        self.location = location.to_string();
        self
    }

    /// Whether the local directory this store was opened on was replaced since (another
    /// writer published a table there); `false` for other stores.
    pub fn replaced(&self) -> bool {
        self.identity
            .as_ref()
            .is_some_and(|r| RootIdentity::of(&r.path) != Some(r.id))
    }

    /// An error if the local directory this store was opened on was replaced since: what was
    /// just read may be the new table's, and a read must see one table or fail. Checked after
    /// each chunk read (a `stat`).
    pub fn check_root(&self) -> Result<()> {
        if !self.replaced() {
            return Ok(());
        }
        Err(Error::Replaced {
            location: self.location.clone(),
        })
    }

    /// The root's path on the local file system, for a local store (`None` for object stores,
    /// `memory://` included).
    pub fn local_path(&self) -> Option<&std::path::Path> {
        self.local.as_deref()
    }

    /// The object path of `relative` below the root, its names as they are (see
    /// [`crate::key`]).
    pub fn key(&self, relative: &str) -> Path {
        crate::key::join(&self.root, relative)
    }

    /// `read` — one read, with every request it makes — given up once the store's `timeout`
    /// has passed since it started. Then, or when a request of it timed out first (the
    /// client's own timeout is the same), the error says the read timed out and names the
    /// option. Local and memory stores wait as long as it takes.
    async fn within<T>(
        &self,
        read: impl std::future::Future<Output = std::result::Result<T, object_store::Error>>,
    ) -> std::result::Result<T, object_store::Error> {
        let Some(limit) = self.timeout else {
            return read.await;
        };
        match tokio::time::timeout(limit, read).await {
            Ok(Err(e)) if timed_out(&e) => Err(read_timed_out(limit, Some(&e))),
            Ok(done) => done,
            Err(_) => Err(read_timed_out(limit, None)),
        }
    }

    /// [`Self::within`] for a read of `relative` that fails with zarrow's errors.
    async fn within_read<T>(
        &self,
        relative: &str,
        read: impl std::future::Future<Output = Result<T>>,
    ) -> Result<T> {
        let Some(limit) = self.timeout else {
            return read.await;
        };
        match tokio::time::timeout(limit, read).await {
            Ok(Err(Error::Store { path, source })) if timed_out(&source) => Err(Error::Store {
                path,
                source: read_timed_out(limit, Some(&source)),
            }),
            Ok(done) => done,
            Err(_) => Err(store_err(&self.key(relative), read_timed_out(limit, None))),
        }
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
                Err(e) if self.retry_cut_short(&mut tries, &e).await => {}
                other => return other,
            }
        }
    }

    /// Whether a read that failed with `e` is tried again: it was cut short and fewer than
    /// `body_retries` tries were made (`tries` counts them). Then it has logged and waited
    /// (backoff from 100 ms), and the caller reads again.
    async fn retry_cut_short(&self, tries: &mut usize, e: &object_store::Error) -> bool {
        if *tries >= self.body_retries || !cut_short(e) {
            return false;
        }
        *tries += 1;
        log::info!(
            "retrying a read cut short ({tries}/{}): {e}",
            self.body_retries
        );
        tokio::time::sleep(std::time::Duration::from_millis(50 << (*tries).min(6))).await;
        true
    }

    /// GET `path` (`range` of it), its body read by [`collect_bounded`] under `cap`: nothing
    /// is allocated for a length only announced, and a response announcing more than `cap`
    /// bytes is [`Bounded::Over`] before its body is read. The cap travels with the request
    /// ([`BodyCap`]) for the connector of remote stores, which reads a response without a
    /// `Content-Length` (a chunked one) up to it. `Ok(None)`: the object does not exist; else
    /// the body and the object's size.
    async fn get_capped(
        &self,
        path: &Path,
        range: Option<GetRange>,
        cap: u64,
    ) -> std::result::Result<Option<(Bounded, u64)>, object_store::Error> {
        let mut options = GetOptions {
            range,
            ..Default::default()
        };
        options.extensions.insert(BodyCap(cap));
        let result = match self.store.get_opts(path, options).await {
            Ok(r) => r,
            Err(object_store::Error::NotFound { .. }) => return Ok(None),
            Err(e) => return Err(e),
        };
        let size = result.meta.size;
        Ok(Some((read_body(result, cap).await?, size)))
    }

    /// Get an object; `Ok(None)` if it does not exist. Its body is read as it arrives (see
    /// [`Self::get_bounded`] to bound it).
    pub async fn get_opt(&self, relative: &str) -> Result<Option<Bytes>> {
        self.get_bounded(relative, u64::MAX, |size| {
            Error::InvalidArgument(format!("'{relative}' is over {size} bytes"))
        })
        .await
    }

    /// Get a metadata document (`zarr.json`, `.zarray`, `.zmetadata`, …) of the node named
    /// `node` in messages; `Ok(None)` if it does not exist. A document whose size (as the store
    /// reports it: a file's length, a response's `Content-Length`) is over the store's
    /// [`ReadLimits::max_metadata_bytes`] is an error before anything is allocated for it.
    pub async fn get_document(&self, relative: &str, node: &str) -> Result<Option<Bytes>> {
        let limit = self.limits.max_metadata_bytes;
        if let Some(warm_up) = &self.warm_up {
            warm_up.start(&self.store, &self.key(relative), &self.metrics);
        }
        let started = Instant::now();
        let got = self
            .get_bounded(relative, limit, |size| {
                Error::metadata(
                    node,
                    relative,
                    format!(
                        "the document is {size} bytes, over the limit of {limit} \
                     (max_metadata_bytes, ZARROW_MAX_METADATA_BYTES, raises it)"
                    ),
                )
            })
            .await;
        let bytes = got
            .as_ref()
            .ok()
            .and_then(Option::as_ref)
            .map_or(0, Bytes::len);
        self.metrics.add_metadata(bytes, started.elapsed());
        got
    }

    /// Get an object of at most `limit` bytes; `Ok(None)` if it does not exist. One the
    /// store says is larger (a file's length, a response's `Content-Length`) is the error
    /// `too_large(size)` before its body is read; one whose body turns out larger (a chunked
    /// response) is `too_large(bytes arrived)` once they pass the limit. The body is read
    /// into a buffer that grows as bytes arrive; one longer or shorter than its response
    /// announced is a store error.
    pub async fn get_bounded(
        &self,
        relative: &str,
        limit: u64,
        too_large: impl Fn(u64) -> Error,
    ) -> Result<Option<Bytes>> {
        let path = self.key(relative);
        let fetched = self
            .within(self.retrying(|| self.get_capped(&path, None, limit)))
            .await
            .map_err(|source| store_err(&path, source))?;
        match fetched {
            None => Ok(None),
            Some((Bounded::Over(size), _)) => Err(too_large(size)),
            Some((Bounded::Whole(bytes), _)) => Ok(Some(bytes)),
        }
    }

    /// Get a byte range of an object: `(bytes, object size)`; `Ok(None)` if it does not exist.
    /// The body is read as it arrives, and no longer than the range.
    pub async fn get_range_opt(
        &self,
        relative: &str,
        range: GetRange,
    ) -> Result<Option<(Bytes, u64)>> {
        let path = self.key(relative);
        let cap = match &range {
            GetRange::Bounded(r) => r.end.saturating_sub(r.start),
            GetRange::Suffix(n) => *n,
            GetRange::Offset(_) => u64::MAX,
        };
        let fetched = self
            .within(self.retrying(|| self.get_capped(&path, Some(range.clone()), cap)))
            .await
            .map_err(|source| store_err(&path, source))?;
        match fetched {
            None => Ok(None),
            Some((Bounded::Whole(bytes), size)) => Ok(Some((bytes, size))),
            Some((Bounded::Over(n), _)) => Err(store_err(
                &path,
                object_store::Error::Generic {
                    store: "zarrow",
                    source: format!("the response is {n} bytes, more than the range {range}")
                        .into(),
                },
            )),
        }
    }

    /// The size of an object; `Ok(None)` if it does not exist.
    pub async fn size_opt(&self, relative: &str) -> Result<Option<u64>> {
        let path = self.key(relative);
        match self.within(self.store.head(&path)).await {
            Ok(meta) => Ok(Some(meta.size)),
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(source) => Err(store_err(&path, source)),
        }
    }

    /// Get one byte range of an object (read as [`Self::get_range_opt`] reads it).
    pub async fn get_range(&self, relative: &str, range: std::ops::Range<u64>) -> Result<Bytes> {
        match self
            .get_range_opt(relative, GetRange::Bounded(range))
            .await?
        {
            Some((bytes, _)) => Ok(bytes),
            None => {
                let path = self.key(relative);
                Err(store_err(
                    &path,
                    object_store::Error::NotFound {
                        path: path.to_string(),
                        source: "no such object".into(),
                    },
                ))
            }
        }
    }

    /// Get several ranges of one object, each read as [`Self::get_range`] reads it.
    pub async fn get_ranges(
        &self,
        relative: &str,
        ranges: &[std::ops::Range<u64>],
    ) -> Result<Vec<Bytes>> {
        futures::future::try_join_all(ranges.iter().map(|r| self.get_range(relative, r.clone())))
            .await
    }

    /// Get an object of at most `limit` bytes as [`Self::get_bounded`] does, in ranged GETs
    /// of at most `part` bytes, up to `parallel` in flight: the first asks for bytes
    /// `0..part`; its response gives the object's size (held to `limit`: `too_large(size)`
    /// before anything is allocated), and the rest is asked for while its body arrives, each
    /// response read straight into its place in one buffer of that size. An object of at most
    /// `part` bytes takes one request, as does any read with `part` 0. A store that cannot
    /// answer the first ranged GET (an empty object, a server without ranges) is asked once
    /// more for the whole object (not after a timeout). `Ok(None)`: the object does not exist;
    /// else the bytes and the number of requests made. All of it is one read, held to the
    /// store's `timeout`.
    pub async fn get_split(
        &self,
        relative: &str,
        limit: u64,
        part: u64,
        parallel: usize,
        too_large: impl Fn(u64) -> Error,
    ) -> Result<Option<(Bytes, usize)>> {
        let read = self.get_split_unbounded(relative, limit, part, parallel, too_large);
        self.within_read(relative, read).await
    }

    /// [`Self::get_split`] without its timeout.
    async fn get_split_unbounded(
        &self,
        relative: &str,
        limit: u64,
        part: u64,
        parallel: usize,
        too_large: impl Fn(u64) -> Error,
    ) -> Result<Option<(Bytes, usize)>> {
        if part == 0 {
            let bytes = self.get_bounded(relative, limit, &too_large).await?;
            return Ok(bytes.map(|b| (b, 1)));
        }
        let path = self.key(relative);
        let mut options = GetOptions {
            range: Some(GetRange::Bounded(0..part)),
            ..Default::default()
        };
        options.extensions.insert(BodyCap(part));
        let first = match self.store.get_opts(&path, options).await {
            Ok(first) => first,
            Err(object_store::Error::NotFound { .. }) => return Ok(None),
            // A server that does not answer in time would not answer the whole GET either.
            Err(e) if timed_out(&e) => return Err(store_err(&path, e)),
            Err(e) => {
                log::debug!("a ranged GET of '{path}' failed ({e}); reading it whole");
                let bytes = self.get_bounded(relative, limit, &too_large).await?;
                return Ok(bytes.map(|b| (b, 2)));
            }
        };
        let size = first.meta.size;
        if size > limit {
            return Err(too_large(size));
        }
        if first.range != (0..part.min(size)) {
            return Err(store_err(&path, unexpected_range(&first.range, &(0..part))));
        }
        if size <= part {
            // The whole object: its body as it arrives (one frame is kept as it is).
            return match read_body(first, part)
                .await
                .map_err(|e| store_err(&path, e))?
            {
                Bounded::Whole(bytes) => Ok(Some((bytes, 1))),
                Bounded::Over(n) => Err(too_large(n)),
            };
        }
        let total = usize::try_from(size)
            .map_err(|_| store_err(&path, generic(format!("{size} bytes do not fit memory"))))?;
        let mut buffer: Vec<u8> = Vec::new();
        buffer
            .try_reserve_exact(total)
            .map_err(|e| store_err(&path, generic(format!("a buffer of {size} bytes: {e}"))))?;
        buffer.resize(total, 0);
        let first_len = part.min(size) as usize;
        let (head, rest) = buffer.split_at_mut(first_len);
        let read_first = async {
            match fill(first, head).await {
                Err(e) if cut_short(&e) => self.fill_range(&path, 0..first_len as u64, head).await,
                other => other,
            }
        };
        let parts = split_ranges(first_len as u64..size, part);
        let requests = 1 + parts.len();
        let reads: Vec<_> = parts
            .iter()
            .cloned()
            .zip(slices_of(rest, &parts, first_len as u64))
            .map(|(range, out)| self.fill_range(&path, range, out))
            .collect();
        // The futures are made before they are streamed: a stream's closure would borrow
        // for any lifetime, which the scan's tasks (`Send` for all of them) cannot have.
        let read_rest = futures::stream::iter(reads)
            .buffer_unordered(parallel.saturating_sub(1).max(1))
            .try_collect::<Vec<()>>();
        futures::try_join!(read_first, read_rest).map_err(|e| store_err(&path, e))?;
        Ok(Some((buffer.into(), requests)))
    }

    /// Get bytes `range` of an object in ranged GETs of at most `part` bytes (0: one GET), up
    /// to `parallel` in flight, each read straight into its place in one buffer of the
    /// range's length (which the caller has held to its limits). The bytes and the number of
    /// requests made. All of it is one read, held to the store's `timeout`.
    pub async fn get_range_split(
        &self,
        relative: &str,
        range: std::ops::Range<u64>,
        part: u64,
        parallel: usize,
    ) -> Result<(Bytes, usize)> {
        let read = self.get_range_split_unbounded(relative, range, part, parallel);
        self.within_read(relative, read).await
    }

    /// [`Self::get_range_split`] without its timeout.
    async fn get_range_split_unbounded(
        &self,
        relative: &str,
        range: std::ops::Range<u64>,
        part: u64,
        parallel: usize,
    ) -> Result<(Bytes, usize)> {
        let length = range.end.saturating_sub(range.start);
        if part == 0 || length <= part {
            return Ok((self.get_range(relative, range).await?, 1));
        }
        let path = self.key(relative);
        let total = usize::try_from(length)
            .map_err(|_| store_err(&path, generic(format!("{length} bytes do not fit memory"))))?;
        let mut buffer: Vec<u8> = Vec::new();
        buffer
            .try_reserve_exact(total)
            .map_err(|e| store_err(&path, generic(format!("a buffer of {length} bytes: {e}"))))?;
        buffer.resize(total, 0);
        let parts = split_ranges(range, part);
        let requests = parts.len();
        let base = parts.first().map_or(0, |r| r.start);
        let reads: Vec<_> = parts
            .iter()
            .cloned()
            .zip(slices_of(&mut buffer, &parts, base))
            .map(|(range, out)| self.fill_range(&path, range, out))
            .collect();
        futures::stream::iter(reads)
            .buffer_unordered(parallel.max(1))
            .try_collect::<Vec<()>>()
            .await
            .map_err(|e| store_err(&path, e))?;
        Ok((buffer.into(), requests))
    }

    /// Get several ranges of one object: ranges at most `gap` bytes apart (sorted by start)
    /// are merged into one GET — each merged range read as [`Self::get_range_split`] reads it
    /// — and each range is a slice of its GET's bytes (no copy). The bytes of each range, in
    /// the order given, and the number of requests made.
    pub async fn get_ranges_coalesced(
        &self,
        relative: &str,
        ranges: &[std::ops::Range<u64>],
        gap: u64,
        part: u64,
        parallel: usize,
    ) -> Result<(Vec<Bytes>, usize)> {
        let merged = merge_ranges(ranges, gap);
        let reads: Vec<_> = merged
            .iter()
            .map(|r| self.get_range_split(relative, r.clone(), part, parallel))
            .collect();
        let fetched: Vec<(Bytes, usize)> = futures::stream::iter(reads)
            .buffered(parallel.max(1))
            .try_collect()
            .await?;
        let requests = fetched.iter().map(|(_, n)| n).sum();
        let out = ranges
            .iter()
            .map(|r| {
                // The merged range holding `r` (the last starting at or before it).
                let i = merged
                    .partition_point(|m| m.start <= r.start)
                    .saturating_sub(1);
                let (m, (bytes, _)) = (&merged[i], &fetched[i]);
                let start = (r.start - m.start) as usize;
                let end = (r.end - m.start) as usize;
                bytes.slice(start..end.min(bytes.len()))
            })
            .collect();
        Ok((out, requests))
    }

    /// Read bytes `range` of the object at `path` into `out` (its length), again (with
    /// backoff) while the response is cut short, as [`Self::retrying`] does (its own loop:
    /// each attempt borrows `out` mutably, which a closure handing out futures cannot).
    async fn fill_range(
        &self,
        path: &Path,
        range: std::ops::Range<u64>,
        out: &mut [u8],
    ) -> std::result::Result<(), object_store::Error> {
        let mut tries = 0;
        loop {
            let mut options = GetOptions {
                range: Some(GetRange::Bounded(range.clone())),
                ..Default::default()
            };
            options.extensions.insert(BodyCap(range.end - range.start));
            let attempt = async {
                let result = self.store.get_opts(path, options).await?;
                if result.range != range {
                    return Err(unexpected_range(&result.range, &range));
                }
                fill(result, out).await
            };
            match attempt.await {
                Err(e) if self.retry_cut_short(&mut tries, &e).await => {}
                other => return other,
            }
        }
    }

    /// Put an object (used by the writer).
    pub async fn put(&self, relative: &str, bytes: Bytes) -> Result<()> {
        let path = self.key(relative);
        let len = bytes.len();
        self.within(self.store.put(&path, bytes.into()))
            .await
            .map(|_| ())
            .map_err(|source| write_err(&path, len, source))
    }

    /// Immediate child names (common prefixes) below `relative`.
    pub async fn list_children(&self, relative: &str) -> Result<Vec<String>> {
        let path = self.key(relative);
        let started = Instant::now();
        let listing = self
            .within(self.store.list_with_delimiter(Some(&path)))
            .await;
        self.metrics.add_metadata(0, started.elapsed());
        let listing = listing.map_err(|source| store_err(&path, source))?;
        let mut names: Vec<String> = listing
            .common_prefixes
            .iter()
            .filter_map(|p| p.filename().map(str::to_string))
            .collect();
        names.sort();
        Ok(names)
    }

    /// The sizes of the objects below `relative`, by path, where one listing tells them:
    /// `None` when there are more than `max`, or the store cannot list (plain HTTP servers,
    /// Icechunk repositories). A hint, never an error: what a scan weighs its partitions by
    /// ([`crate::ZarrScan::split_by_stored_bytes`]).
    pub async fn object_sizes(&self, relative: &str, max: usize) -> Option<HashMap<Path, u64>> {
        if self.location.starts_with("http://") || self.location.starts_with("https://") {
            return None;
        }
        let path = self.key(relative);
        let started = Instant::now();
        let listing = self
            .within(async {
                let mut objects = self.store.list(Some(&path)).take(max.saturating_add(1));
                let mut sizes = HashMap::new();
                while let Some(meta) = objects.try_next().await? {
                    sizes.insert(meta.location, meta.size);
                }
                Ok(sizes)
            })
            .await;
        self.metrics.add_metadata(0, started.elapsed());
        match listing {
            Ok(sizes) if sizes.len() <= max => Some(sizes),
            Ok(_) => None,
            Err(e) => {
                log::debug!("no object sizes below '{path}': {e}");
                None
            }
        }
    }
}

/// The most bytes zarrow reads of one response, carried by its request (`GetOptions`'
/// extensions) to the connector of remote stores (see [`crate::remote`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct BodyCap(pub(crate) u64);

/// A body read under a cap by [`collect_bounded`].
#[derive(Debug)]
pub(crate) enum Bounded {
    /// All of it.
    Whole(Bytes),
    /// More than the cap: at least this many bytes (announced, or arrived).
    Over(u64),
}

/// Collect a body into one buffer that grows as its bytes arrive — nothing is allocated for a
/// length only announced: more than `cap` bytes are [`Bounded::Over`] (announced: before any
/// is read); with the announced length `declared`, a body longer or shorter than it is the
/// error `fail(message)`, as is a buffer that cannot be allocated.
pub(crate) async fn collect_bounded<E>(
    mut stream: impl Stream<Item = std::result::Result<Bytes, E>> + Unpin,
    declared: Option<u64>,
    cap: u64,
    fail: impl Fn(String) -> E,
) -> std::result::Result<Bounded, E> {
    if let Some(d) = declared.filter(|&d| d > cap) {
        return Ok(Bounded::Over(d));
    }
    // What the buffer may grow to: the announced length, else the cap.
    let most = declared.unwrap_or(cap);
    // A body of one frame is kept as it is; a second one starts the buffer.
    let mut first: Option<Bytes> = None;
    let mut buffer: Vec<u8> = Vec::new();
    let mut total = 0u64;
    while let Some(frame) = stream.next().await {
        let frame = frame?;
        total = total.saturating_add(frame.len() as u64);
        if let Some(d) = declared.filter(|&d| total > d) {
            return Err(fail(format!(
                "the body is longer than the {d} bytes its response announced"
            )));
        }
        if total > cap {
            return Ok(Bounded::Over(total));
        }
        if buffer.is_empty() && first.is_none() {
            first = Some(frame);
            continue;
        }
        let wanted = usize::try_from(total).map_err(|_| fail(format!("{total} bytes")))?;
        if wanted > buffer.capacity() {
            // Double as bytes arrive, never past what the body may be.
            let grown = (buffer.capacity().saturating_mul(2) as u64).min(most) as usize;
            let target = grown.max(wanted);
            buffer
                .try_reserve_exact(target - buffer.len())
                .map_err(|e| fail(format!("a buffer of {target} bytes for the body: {e}")))?;
        }
        if let Some(first) = first.take() {
            buffer.extend_from_slice(&first);
        }
        buffer.extend_from_slice(&frame);
    }
    if let Some(d) = declared.filter(|&d| total < d) {
        return Err(fail(format!(
            "the body ended after {total} of the {d} bytes its response announced"
        )));
    }
    Ok(Bounded::Whole(match first {
        Some(only) => only,
        None => buffer.into(),
    }))
}

/// A response's body, at most `cap` bytes (else [`Bounded::Over`], before any is read). A
/// local file's range is read in one blocking read, as `GetResult::bytes` reads it: its
/// stream would read it in 8 KiB pieces, each a trip to the blocking pool, which cost a scan
/// of local chunks about 40 % of its time. Any other body is collected as it arrives.
async fn read_body(
    result: GetResult,
    cap: u64,
) -> std::result::Result<Bounded, object_store::Error> {
    let declared = result.range.end.saturating_sub(result.range.start);
    if declared > cap {
        return Ok(Bounded::Over(declared));
    }
    match result.payload {
        GetResultPayload::File(..) => Ok(Bounded::Whole(result.bytes().await?)),
        GetResultPayload::Stream(_) => {
            collect_bounded(result.into_stream(), Some(declared), cap, generic).await
        }
    }
}

/// Copy a response's body into `out`, which it must fill exactly: a local file's range in
/// one read (see [`read_body`]), any other body as it arrives.
async fn fill(result: GetResult, out: &mut [u8]) -> std::result::Result<(), object_store::Error> {
    match result.payload {
        GetResultPayload::File(..) => {
            let bytes = result.bytes().await?;
            if bytes.len() != out.len() {
                return Err(generic(format!(
                    "the file gave {} of the {} bytes asked for",
                    bytes.len(),
                    out.len()
                )));
            }
            out.copy_from_slice(&bytes);
            Ok(())
        }
        GetResultPayload::Stream(_) => fill_from_stream(result.into_stream(), out).await,
    }
}

/// Copy a body into `out`, which it must fill exactly.
async fn fill_from_stream(
    mut stream: impl Stream<Item = std::result::Result<Bytes, object_store::Error>> + Unpin,
    out: &mut [u8],
) -> std::result::Result<(), object_store::Error> {
    let mut at = 0usize;
    while let Some(frame) = stream.next().await {
        let frame = frame?;
        let end = at
            .checked_add(frame.len())
            .filter(|&end| end <= out.len())
            .ok_or_else(|| {
                generic(format!(
                    "the body is longer than the {} bytes asked for",
                    out.len()
                ))
            })?;
        out[at..end].copy_from_slice(&frame);
        at = end;
    }
    if at != out.len() {
        return Err(generic(format!(
            "the body ended after {at} of the {} bytes asked for",
            out.len()
        )));
    }
    Ok(())
}

/// The most parts one read is split into: a smaller `range_split_bytes` than the range's
/// length over this makes larger parts (the number of requests stays bounded).
const MAX_PARTS: u64 = 256;

/// `range` cut into consecutive ranges of at most `part` (> 0) bytes — larger ones if that
/// would make more than [`MAX_PARTS`].
fn split_ranges(range: std::ops::Range<u64>, part: u64) -> Vec<std::ops::Range<u64>> {
    let length = range.end.saturating_sub(range.start);
    let part = part.max(length.div_ceil(MAX_PARTS)).max(1);
    let mut out = Vec::new();
    let mut start = range.start;
    while start < range.end {
        let end = start.saturating_add(part).min(range.end);
        out.push(start..end);
        start = end;
    }
    out
}

/// `buffer` (holding the bytes from `base` on) cut into one slice per range of `parts`
/// (consecutive, covering it).
fn slices_of<'a>(
    mut buffer: &'a mut [u8],
    parts: &[std::ops::Range<u64>],
    base: u64,
) -> Vec<&'a mut [u8]> {
    let mut out = Vec::with_capacity(parts.len());
    let mut at = base;
    for r in parts {
        let length = usize::try_from(r.end - at)
            .unwrap_or(usize::MAX)
            .min(buffer.len());
        let (here, rest) = std::mem::take(&mut buffer).split_at_mut(length);
        out.push(here);
        buffer = rest;
        at = r.end;
    }
    out
}

/// The ranges covering `ranges`, sorted, those at most `gap` bytes apart (or overlapping)
/// merged.
fn merge_ranges(ranges: &[std::ops::Range<u64>], gap: u64) -> Vec<std::ops::Range<u64>> {
    let mut sorted: Vec<_> = ranges.to_vec();
    sorted.sort_unstable_by_key(|r| (r.start, r.end));
    let mut out: Vec<std::ops::Range<u64>> = Vec::with_capacity(sorted.len());
    for r in sorted {
        match out.last_mut() {
            Some(last) if r.start <= last.end.saturating_add(gap) => {
                last.end = last.end.max(r.end);
            }
            _ => out.push(r),
        }
    }
    out
}

/// The error of a read given up after `limit` (see `ZarrStore::within`); `request`: the
/// error of its request that timed out first, if one did.
fn read_timed_out(limit: Duration, request: Option<&object_store::Error>) -> object_store::Error {
    let request = request.map(|e| format!(": {e}")).unwrap_or_default();
    generic(format!(
        "timed out: the read took longer than its timeout of {limit:?} (every request and \
         retry of one read included; the option `timeout`, ZARROW_TIMEOUT, sets it){request}"
    ))
}

fn generic(message: String) -> object_store::Error {
    object_store::Error::Generic {
        store: "zarrow",
        source: message.into(),
    }
}

fn unexpected_range(
    got: &std::ops::Range<u64>,
    asked: &std::ops::Range<u64>,
) -> object_store::Error {
    generic(format!(
        "the store answered bytes {}..{} to a request for {}..{}",
        got.start, got.end, asked.start, asked.end
    ))
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

/// Whether `e` is a request's timeout.
#[cfg(feature = "cloud")]
fn timed_out(e: &object_store::Error) -> bool {
    use object_store::client::{HttpError, HttpErrorKind};
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(err) = source {
        if let Some(http) = err.downcast_ref::<HttpError>() {
            return matches!(http.kind(), HttpErrorKind::Timeout);
        }
        source = err.source();
    }
    false
}

/// Without remote stores no request times out.
#[cfg(not(feature = "cloud"))]
fn timed_out(_: &object_store::Error) -> bool {
    false
}

/// Without remote stores there are no responses to be cut short.
#[cfg(not(feature = "cloud"))]
fn cut_short(_: &object_store::Error) -> bool {
    false
}

/// The error of writing `bytes` bytes to `path`: says "writing", and for a full disk (or
/// quota) the bytes that did not fit.
pub(crate) fn write_err(path: &Path, bytes: usize, source: object_store::Error) -> Error {
    let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(&source);
    let mut detail = String::new();
    while let Some(e) = cause {
        if let Some(io) = e.downcast_ref::<std::io::Error>() {
            use std::io::ErrorKind;
            detail = match io.kind() {
                ErrorKind::StorageFull | ErrorKind::QuotaExceeded => {
                    format!(" ({bytes} bytes): no space left (the disk is full)")
                }
                ErrorKind::NotADirectory => {
                    " (a file is in the way: a parent of the path is not a directory)".into()
                }
                _ if io.raw_os_error() == Some(28) => {
                    format!(" ({bytes} bytes): no space left (the disk is full)")
                }
                _ => String::new(),
            };
            if !detail.is_empty() {
                break;
            }
        }
        cause = e.source();
    }
    Error::StoreWrite {
        path: path.to_string(),
        detail,
        source,
    }
}

fn store_err(path: &Path, source: object_store::Error) -> Error {
    Error::Store {
        path: path.to_string(),
        source,
    }
}

/// A local path as an absolute, normalized object-store path: `.` and `..` are resolved
/// lexically (the path need not exist yet, e.g. for writing), so `../data/x.zarr` works. A
/// path that cannot be is an [`Error::Location`] naming it.
pub(crate) fn local(path: &str) -> Result<(Arc<dyn ObjectStore>, Path)> {
    let err = |message: String| Error::bad_location(path, message);
    let abs = normalize(
        &std::path::absolute(path).map_err(|e| err(format!("cannot resolve path: {e}")))?,
    );
    let fs = object_store::local::LocalFileSystem::new();
    let root = Path::from_absolute_path(&abs).map_err(|e| err(e.to_string()))?;
    Ok((Arc::new(fs), root))
}

/// A local path, absolute and normalized as [`local`] makes it.
fn local_fs_path(path: &str) -> Result<std::path::PathBuf> {
    std::path::absolute(path)
        .map(|p| normalize(&p))
        .map_err(|e| Error::bad_location(path, format!("cannot resolve path: {e}")))
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

    /// `collect_bounded` over these frames.
    fn collect(frames: &[&[u8]], declared: Option<u64>, cap: u64) -> std::io::Result<Bounded> {
        let frames: Vec<std::io::Result<Bytes>> = frames
            .iter()
            .map(|f| Ok(Bytes::copy_from_slice(f)))
            .collect();
        futures::executor::block_on(collect_bounded(
            futures::stream::iter(frames),
            declared,
            cap,
            std::io::Error::other,
        ))
    }

    #[test]
    fn bodies_grow_as_they_arrive_and_stop_at_their_cap() {
        let whole = |b: std::io::Result<Bounded>| match b {
            Ok(Bounded::Whole(bytes)) => bytes,
            other => panic!("{other:?}"),
        };
        assert_eq!(whole(collect(&[b"abc", b"de", b"f"], Some(6), 6)), "abcdef");
        assert_eq!(whole(collect(&[b"abc", b"", b"def"], None, 10)), "abcdef");
        assert_eq!(whole(collect(&[b"abc"], None, 3)), "abc");
        assert_eq!(whole(collect(&[], Some(0), 0)), "");
        // Announced over the cap: refused before a frame is read (none would do).
        assert!(matches!(
            collect(&[], Some((2 << 30) - 1000), 1 << 20),
            Ok(Bounded::Over(n)) if n == (2 << 30) - 1000
        ));
        // Not announced (chunked): refused once more than the cap arrived.
        assert!(matches!(
            collect(&[b"abc", b"def"], None, 5),
            Ok(Bounded::Over(6))
        ));
        // Longer or shorter than announced.
        let e = collect(&[b"abc", b"def"], Some(4), 10).unwrap_err();
        assert!(e.to_string().contains("longer than the 4 bytes"), "{e}");
        let e = collect(&[b"abc"], Some((2 << 30) - 1000), 3 << 30).unwrap_err();
        assert!(
            e.to_string()
                .contains("ended after 3 of the 2147482648 bytes"),
            "{e}"
        );
    }

    /// A store of one object `o` of `n` bytes (`i % 251`), recording requests held `delay`.
    async fn recorded(
        n: usize,
        delay: std::time::Duration,
    ) -> (ZarrStore, Arc<zarrow_testkit::RecordingStore>, Vec<u8>) {
        let memory = Arc::new(InMemory::new());
        let body: Vec<u8> = (0..n).map(|i| (i % 251) as u8).collect();
        memory
            .put(&Path::from("a/o"), body.clone().into())
            .await
            .unwrap();
        let recording = zarrow_testkit::RecordingStore::new(memory, delay);
        let store = ZarrStore::new(recording.clone(), Path::from("a"));
        (store, recording, body)
    }

    /// A local file is read whole or in ranged parts through one read of each range (not its
    /// 8 KiB stream): every way of reading it gives its bytes, and the limit still holds.
    #[tokio::test]
    async fn a_local_file_is_read_whole_or_in_parts() {
        let dir = tempfile::tempdir().unwrap();
        let body: Vec<u8> = (0..100_000).map(|i| (i % 251) as u8).collect();
        std::fs::write(dir.path().join("o"), &body).unwrap();
        let (fs, root) = local(dir.path().to_str().unwrap()).unwrap();
        let store = ZarrStore::new(fs, root);
        let too_large = |n| Error::InvalidArgument(format!("{n} bytes"));
        for (part, requests) in [(30_000, 4), (100_000, 1), (0, 1)] {
            let (bytes, n) = store
                .get_split("o", 1 << 20, part, 8, too_large)
                .await
                .unwrap()
                .unwrap();
            assert_eq!(
                (bytes.as_ref(), n),
                (body.as_slice(), requests),
                "part {part}"
            );
        }
        let (bytes, n) = store
            .get_range_split("o", 10..90_010, 30_000, 8)
            .await
            .unwrap();
        assert_eq!((bytes.as_ref(), n), (&body[10..90_010], 3));
        for part in [30_000, 0] {
            let e = store
                .get_split("o", 99_999, part, 8, too_large)
                .await
                .unwrap_err();
            assert!(e.to_string().contains("100000 bytes"), "{e}");
        }
    }

    #[tokio::test]
    async fn a_large_object_is_read_in_ranged_parts_into_one_buffer() {
        let (store, recording, body) = recorded(100, Default::default()).await;
        let too_large = |n| Error::InvalidArgument(format!("{n} bytes"));
        let (bytes, requests) = store
            .get_split("o", 1000, 30, 8, too_large)
            .await
            .unwrap()
            .unwrap();
        assert_eq!((bytes.as_ref(), requests), (body.as_slice(), 4));
        assert_eq!(
            recording.ranges(),
            ["bytes=0-29", "bytes=30-59", "bytes=60-89", "bytes=90-99"]
        );
        // At most one part: one request; 0 turns splitting off.
        for part in [100, 0] {
            recording.clear();
            let (bytes, requests) = store
                .get_split("o", 1000, part, 8, too_large)
                .await
                .unwrap()
                .unwrap();
            assert_eq!((bytes.as_ref(), requests), (body.as_slice(), 1));
            assert_eq!(recording.requests().len(), 1);
        }
        // Over the limit: refused on the first response, nothing more asked for.
        recording.clear();
        let e = store
            .get_split("o", 99, 30, 8, too_large)
            .await
            .unwrap_err();
        assert!(e.to_string().contains("100 bytes"), "{e}");
        assert_eq!(recording.requests().len(), 1);
        // Missing: None.
        assert!(store
            .get_split("missing", 99, 30, 8, too_large)
            .await
            .unwrap()
            .is_none());
    }

    #[tokio::test]
    async fn an_empty_object_is_read_whole_after_its_ranged_get_fails() {
        let (store, recording, _) = recorded(0, Default::default()).await;
        let too_large = |n| Error::InvalidArgument(format!("{n} bytes"));
        let (bytes, requests) = store
            .get_split("o", 10, 4, 8, too_large)
            .await
            .unwrap()
            .unwrap();
        assert_eq!((bytes.len(), requests), (0, 2));
        assert_eq!(recording.requests().len(), 2);
    }

    #[tokio::test]
    async fn nearby_ranges_are_one_get_and_slices_of_it() {
        let (store, recording, body) = recorded(200, Default::default()).await;
        let asked = [12..20, 0..10, 150..160, 30..40];
        let (parts, requests) = store
            .get_ranges_coalesced("o", &asked, 10, 0, 8)
            .await
            .unwrap();
        for (r, bytes) in asked.iter().zip(&parts) {
            assert_eq!(bytes.as_ref(), &body[r.start as usize..r.end as usize]);
        }
        assert_eq!(requests, 2);
        assert_eq!(recording.ranges(), ["bytes=0-39", "bytes=150-159"]);
        // A gap of 0 merges touching ranges only.
        recording.clear();
        let (_, requests) = store
            .get_ranges_coalesced("o", &[0..10, 10..20, 21..30], 0, 0, 8)
            .await
            .unwrap();
        assert_eq!(requests, 2);
    }

    #[tokio::test]
    async fn the_parts_of_a_range_are_in_flight_at_once() {
        let delay = std::time::Duration::from_millis(200);
        let (store, recording, body) = recorded(64, delay).await;
        let (bytes, requests) = store.get_range_split("o", 8..64, 28, 8).await.unwrap();
        assert_eq!((bytes.as_ref(), requests), (&body[8..64], 2));
        assert_eq!(recording.max_in_flight(), 2);
        assert_eq!(recording.round_trips(), 1);
        // Parts are never more than MAX_PARTS, whatever the part size.
        assert_eq!(split_ranges(0..10_000, 1).len(), 250);
        assert_eq!(split_ranges(0..(1 << 40), 1).len(), MAX_PARTS as usize);
        assert_eq!(split_ranges(0..10, 3), [0..3, 3..6, 6..9, 9..10]);
    }

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

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
use futures::{Stream, StreamExt};
use object_store::memory::InMemory;
use object_store::path::Path;
use object_store::{GetOptions, GetRange, GetResultPayload, ObjectStore, ObjectStoreExt};
use url::Url;

use crate::options::ReadLimits;
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
    /// What nodes opened from this store hold to: the metadata document and item limits.
    limits: ReadLimits,
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
            limits: ReadLimits::default(),
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
            limits: ReadLimits::default(),
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
            limits: ReadLimits::default(),
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
            limits: self.limits,
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
        let declared = result.range.end.saturating_sub(result.range.start);
        if declared > cap {
            return Ok(Some((Bounded::Over(declared), size)));
        }
        let body = match result.payload {
            // A local file's length is its size: read exactly, as the store does.
            GetResultPayload::File(..) => Bounded::Whole(result.bytes().await?),
            GetResultPayload::Stream(_) => {
                collect_bounded(result.into_stream(), Some(declared), cap, |message| {
                    object_store::Error::Generic {
                        store: "zarrow",
                        source: message.into(),
                    }
                })
                .await?
            }
        };
        Ok(Some((body, size)))
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
        self.get_bounded(relative, limit, |size| {
            Error::metadata(
                node,
                relative,
                format!(
                    "the document is {size} bytes, over the limit of {limit} \
                     (max_metadata_bytes, ZARROW_MAX_METADATA_BYTES, raises it)"
                ),
            )
        })
        .await
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
            .retrying(|| self.get_capped(&path, None, limit))
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
            .retrying(|| self.get_capped(&path, Some(range.clone()), cap))
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
        match self.store.head(&path).await {
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

    /// `collect_bounded` over these frames.
    fn collect(
        frames: &[&[u8]],
        declared: Option<u64>,
        cap: u64,
    ) -> std::result::Result<Bounded, String> {
        let frames: Vec<std::result::Result<Bytes, String>> = frames
            .iter()
            .map(|f| Ok(Bytes::copy_from_slice(f)))
            .collect();
        futures::executor::block_on(collect_bounded(
            futures::stream::iter(frames),
            declared,
            cap,
            |m| m,
        ))
    }

    #[test]
    fn bodies_grow_as_they_arrive_and_stop_at_their_cap() {
        let whole = |b: std::result::Result<Bounded, String>| match b {
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
        assert!(e.contains("longer than the 4 bytes"), "{e}");
        let e = collect(&[b"abc"], Some((2 << 30) - 1000), 3 << 30).unwrap_err();
        assert!(e.contains("ended after 3 of the 2147482648 bytes"), "{e}");
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

//! An object store that records every request made to it (GET with its range, HEAD, LIST),
//! counts those in flight and may hold each for a while: what tests of how many requests and
//! round trips a read takes are written against.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use futures::stream::BoxStream;
use object_store::path::Path;
use object_store::{
    CopyOptions, GetOptions, GetRange, GetResult, ListResult, MultipartUpload, ObjectMeta,
    ObjectStore, PutMultipartOptions, PutOptions, PutPayload, PutResult,
};

/// One request seen by a [`RecordingStore`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    /// `GET`, `HEAD` or `LIST`.
    pub method: &'static str,
    /// The object path (the prefix for `LIST`).
    pub path: String,
    /// The range asked for (`GET` only), as `object_store` prints it (`0-9`, `-16`).
    pub range: Option<String>,
    /// Whether the object existed (a `GET`/`HEAD` that found nothing is `false`).
    pub found: bool,
}

impl std::fmt::Display for Request {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.method, self.path)?;
        if let Some(r) = &self.range {
            write!(f, " [{r}]")?;
        }
        if !self.found {
            f.write_str(" (404)")?;
        }
        Ok(())
    }
}

/// An object store over `inner` recording every request (see the module docs).
#[derive(Debug)]
pub struct RecordingStore {
    inner: Arc<dyn ObjectStore>,
    delay: Duration,
    log: Mutex<Vec<Request>>,
    in_flight: AtomicUsize,
    max_in_flight: AtomicUsize,
    /// The deepest request answered so far (see [`RecordingStore::round_trips`]).
    answered_depth: AtomicUsize,
}

impl std::fmt::Display for RecordingStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "RecordingStore({})", self.inner)
    }
}

impl RecordingStore {
    /// A store recording the requests made to `inner`, each answered after `delay`.
    pub fn new(inner: Arc<dyn ObjectStore>, delay: Duration) -> Arc<Self> {
        Arc::new(RecordingStore {
            inner,
            delay,
            log: Mutex::default(),
            in_flight: AtomicUsize::new(0),
            max_in_flight: AtomicUsize::new(0),
            answered_depth: AtomicUsize::new(0),
        })
    }

    /// The requests so far, in the order they were made.
    pub fn requests(&self) -> Vec<Request> {
        self.log.lock().map(|l| l.clone()).unwrap_or_default()
    }

    /// The byte ranges of the requests so far (`""` for a whole object), sorted: what a test
    /// of concurrent ranged reads compares, whatever order they went out in.
    pub fn ranges(&self) -> Vec<String> {
        let mut out: Vec<String> = self
            .requests()
            .iter()
            .map(|r| r.range.clone().unwrap_or_default())
            .collect();
        out.sort();
        out
    }

    /// The requests so far, one line each (for assertion messages).
    pub fn describe(&self) -> String {
        let lines: Vec<String> = self.requests().iter().map(|r| r.to_string()).collect();
        lines.join("\n")
    }

    /// Forget the requests so far (and the most in flight).
    pub fn clear(&self) {
        if let Ok(mut l) = self.log.lock() {
            l.clear();
        }
        self.max_in_flight.store(0, Ordering::SeqCst);
        self.answered_depth.store(0, Ordering::SeqCst);
    }

    /// The round trips so far, one after another: each request is one deeper than the deepest
    /// answered before it was made, and this is the deepest. Requests made together count
    /// once however long the machine takes between them, unless one is made only after
    /// another was answered — what a count of elapsed time over the delay cannot tell apart
    /// from a slow machine.
    pub fn round_trips(&self) -> usize {
        self.answered_depth.load(Ordering::SeqCst)
    }

    /// The most requests in flight at once so far.
    pub fn max_in_flight(&self) -> usize {
        self.max_in_flight.load(Ordering::SeqCst)
    }

    /// Requests in flight now.
    pub fn in_flight(&self) -> usize {
        self.in_flight.load(Ordering::SeqCst)
    }

    async fn hold(&self) -> InFlight<'_> {
        let depth = self.answered_depth.load(Ordering::SeqCst) + 1;
        let now = self.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        self.max_in_flight.fetch_max(now, Ordering::SeqCst);
        let guard = InFlight {
            in_flight: &self.in_flight,
            answered_depth: &self.answered_depth,
            depth,
        };
        if !self.delay.is_zero() {
            tokio::time::sleep(self.delay).await;
        }
        guard
    }

    fn record(&self, method: &'static str, path: &Path, range: Option<&GetRange>, found: bool) {
        if let Ok(mut l) = self.log.lock() {
            l.push(Request {
                method,
                path: path.to_string(),
                range: range.map(|r| r.to_string()),
                found,
            });
        }
    }
}

/// A request in flight, counted down when dropped (answered or abandoned), its depth then
/// counted as answered.
struct InFlight<'a> {
    in_flight: &'a AtomicUsize,
    answered_depth: &'a AtomicUsize,
    depth: usize,
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.answered_depth.fetch_max(self.depth, Ordering::SeqCst);
        self.in_flight.fetch_sub(1, Ordering::SeqCst);
    }
}

#[async_trait]
impl ObjectStore for RecordingStore {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> object_store::Result<PutResult> {
        self.inner.put_opts(location, payload, opts).await
    }

    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> object_store::Result<Box<dyn MultipartUpload>> {
        self.inner.put_multipart_opts(location, opts).await
    }

    async fn get_opts(
        &self,
        location: &Path,
        options: GetOptions,
    ) -> object_store::Result<GetResult> {
        let method = if options.head { "HEAD" } else { "GET" };
        let range = options.range.clone();
        let _held = self.hold().await;
        let result = self.inner.get_opts(location, options).await;
        let found = !matches!(result, Err(object_store::Error::NotFound { .. }));
        self.record(method, location, range.as_ref(), found);
        result
    }

    fn delete_stream(
        &self,
        locations: BoxStream<'static, object_store::Result<Path>>,
    ) -> BoxStream<'static, object_store::Result<Path>> {
        self.inner.delete_stream(locations)
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        self.record("LIST", &prefix.cloned().unwrap_or_default(), None, true);
        self.inner.list(prefix)
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> object_store::Result<ListResult> {
        let _held = self.hold().await;
        self.record("LIST", &prefix.cloned().unwrap_or_default(), None, true);
        self.inner.list_with_delimiter(prefix).await
    }

    async fn copy_opts(
        &self,
        from: &Path,
        to: &Path,
        options: CopyOptions,
    ) -> object_store::Result<()> {
        self.inner.copy_opts(from, to, options).await
    }
}

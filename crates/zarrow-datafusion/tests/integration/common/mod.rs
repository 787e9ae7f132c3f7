//! What the integration tests share: an object store that counts (and logs) GETs and can hang; the write
//! tests' rows and SQL helpers (`written`).
#![allow(dead_code)]

pub mod written;

use std::fmt;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use datafusion::execution::SendableRecordBatchStream;
use datafusion::physical_plan::execute_stream;
use datafusion::prelude::SessionContext;
use futures::stream::BoxStream;
use futures::StreamExt;
use object_store::path::Path;
use object_store::{
    CopyOptions, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore,
    PutMultipartOptions, PutOptions, PutPayload, PutResult,
};

/// Counts GET requests (whole objects and ranges) to the store it wraps; GETs of the paths
/// `hang` picks never answer (counted in `in_flight` until dropped).
#[derive(Debug)]
pub struct CountingStore {
    inner: Arc<dyn ObjectStore>,
    pub gets: AtomicUsize,
    pub hang: Option<fn(&Path) -> bool>,
    pub in_flight: Arc<AtomicUsize>,
    /// PUTs of the paths this picks fail (as a store refusing the write).
    pub fail_put: Option<fn(&Path) -> bool>,
    /// PUTs fail as a local file system's do when the disk is full (an `io::Error` of kind
    /// `StorageFull` inside the store's error).
    pub disk_full: bool,
    /// A value the test sets as it goes (e.g. rows received so far)...
    pub mark: AtomicUsize,
    /// ...and each GET's path with the mark when it was sent.
    pub log: Mutex<Vec<(String, usize)>>,
}

impl CountingStore {
    pub fn new(inner: Arc<dyn ObjectStore>) -> Self {
        CountingStore {
            inner,
            gets: AtomicUsize::new(0),
            hang: None,
            in_flight: Arc::new(AtomicUsize::new(0)),
            fail_put: None,
            disk_full: false,
            mark: AtomicUsize::new(0),
            log: Mutex::new(Vec::new()),
        }
    }

    /// Count a GET of `location`, logged with the mark.
    fn count(&self, location: &Path) {
        self.gets.fetch_add(1, Ordering::SeqCst);
        let mark = self.mark.load(Ordering::SeqCst);
        if let Ok(mut log) = self.log.lock() {
            log.push((location.to_string(), mark));
        }
    }

    /// If `location` hangs: wait forever, counted in `in_flight` until the future is dropped.
    async fn maybe_hang(&self, location: &Path) {
        if self.hang.is_some_and(|hang| hang(location)) {
            struct InFlight(Arc<AtomicUsize>);
            impl Drop for InFlight {
                fn drop(&mut self) {
                    self.0.fetch_sub(1, Ordering::SeqCst);
                }
            }
            self.in_flight.fetch_add(1, Ordering::SeqCst);
            let _guard = InFlight(self.in_flight.clone());
            futures::future::pending::<()>().await;
        }
    }
}

impl fmt::Display for CountingStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "CountingStore({})", self.inner)
    }
}

#[async_trait]
impl ObjectStore for CountingStore {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> object_store::Result<PutResult> {
        if self.fail_put.is_some_and(|fail| fail(location)) {
            return Err(object_store::Error::Generic {
                store: "CountingStore",
                source: "injected PUT failure".into(),
            });
        }
        if self.disk_full {
            return Err(object_store::Error::Generic {
                store: "CountingStore",
                source: Box::new(std::io::Error::new(
                    std::io::ErrorKind::StorageFull,
                    "No space left on device (os error 28)",
                )),
            });
        }
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
        self.count(location);
        self.maybe_hang(location).await;
        self.inner.get_opts(location, options).await
    }

    async fn get_ranges(
        &self,
        location: &Path,
        ranges: &[std::ops::Range<u64>],
    ) -> object_store::Result<Vec<bytes::Bytes>> {
        self.count(location);
        self.maybe_hang(location).await;
        self.inner.get_ranges(location, ranges).await
    }

    fn delete_stream(
        &self,
        locations: BoxStream<'static, object_store::Result<Path>>,
    ) -> BoxStream<'static, object_store::Result<Path>> {
        self.inner.delete_stream(locations)
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        self.inner.list(prefix)
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> object_store::Result<ListResult> {
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

/// Start `sql` over a store whose chunk GETs hang: its stream, after checking that no batch
/// comes within `wait` (so its fetches are in flight).
pub async fn hung_query(
    ctx: &SessionContext,
    sql: &str,
    wait: std::time::Duration,
) -> SendableRecordBatchStream {
    let plan = ctx
        .sql(sql)
        .await
        .unwrap()
        .create_physical_plan()
        .await
        .unwrap();
    let mut stream = execute_stream(plan, ctx.task_ctx()).unwrap();
    let first = tokio::time::timeout(wait, stream.next()).await;
    assert!(first.is_err(), "a hung chunk produced a batch");
    stream
}

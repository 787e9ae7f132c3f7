//! Remote stores (S3, GCS, Azure, HTTP): how their clients are built, and how long they wait.
//!
//! `object_store`'s defaults retry a failing request ten times for up to three minutes, so a
//! server that accepts and never answers holds a query for 180 s. zarrow's defaults fail a
//! refused connection in seconds, a silent server within 30 s, and still ride out the transient faults real object stores produce (500,
//! 503, 429, resets): a connection gets [`DEFAULT_CONNECT_TIMEOUT`](crate::options::DEFAULT_CONNECT_TIMEOUT), a failing request is
//! retried (with backoff) at most [`DEFAULT_MAX_RETRIES`](crate::options::DEFAULT_MAX_RETRIES) times within
//! [`DEFAULT_RETRY_TIMEOUT`](crate::options::DEFAULT_RETRY_TIMEOUT), and one read gets [`DEFAULT_TIMEOUT`](crate::options::DEFAULT_TIMEOUT) in all.
//!
//! `timeout` bounds a whole read — one metadata document, one chunk, one byte range of a
//! shard, one listing — with every request it makes: the ranged first `GET` and its parts,
//! the whole `GET` it falls back to, every retry and its backoff, the body. A server that stops
//! answering fails the read with a timeout error `timeout` after it started, whatever
//! `max_retries` and `retry_timeout` say (retries only fit inside it), and the query with it:
//! with the defaults a silent server ends a query at most [`DEFAULT_TIMEOUT`](crate::options::DEFAULT_TIMEOUT) (30 s) after the
//! read it stopped answering started. The `HEAD`s of the warm-up (see
//! [`RemoteOptions::warm_connections`]) are held to it as well, so nothing of a failed query
//! waits on a silent server longer.
//!
//! Each setting comes from, first to last: the store options given with the location
//! (`connect_timeout`, `timeout`, `max_retries`, `retry_timeout`, next to the credentials),
//! [`RemoteOptions`] (table options and session settings, serialized with a scan), the
//! defaults. The CLI and Python fill unset ones from the environment
//! ([`RemoteOptions::from_env`]: `ZARROW_CONNECT_TIMEOUT`, `ZARROW_TIMEOUT`,
//! `ZARROW_MAX_RETRIES`, `ZARROW_RETRY_TIMEOUT`); the library itself does not read them. Durations are written `500ms`, `5s`, `2m` or as
//! seconds (`1.5`).
//!
//! Every client goes through `StreamedBodies`: a response without a `Content-Length` (sent
//! in chunks, as servers that stream do) is read up to the cap its request carries
//! (`store::BodyCap`: what the chunk may hold) and handed on with its length, which
//! `object_store` needs; one longer than the cap is handed on announcing the bytes that
//! arrived, so the reader refuses it as it refuses a `Content-Length` over the cap.

use std::sync::Arc;
use std::time::Duration;

use object_store::ObjectStore;
use serde::{Deserialize, Serialize};

use crate::{Error, Result};

use crate::options::keys::{self, Group};
use crate::options::MAX_WARM_CONNECTIONS;
#[cfg(feature = "cloud")]
use crate::options::{
    DEFAULT_CONNECT_TIMEOUT, DEFAULT_MAX_RETRIES, DEFAULT_RETRY_TIMEOUT, DEFAULT_TIMEOUT,
    DEFAULT_WARM_CONNECTIONS,
};

/// Timeouts and retries of remote stores; `None` takes the default (see the module docs).
///
/// ```
/// use std::time::Duration;
///
/// use zarrow::RemoteOptions;
///
/// let mut remote = RemoteOptions::default();
/// remote.set("timeout", "500ms")?;
/// remote.set("max_retries", "5")?;
/// assert_eq!(remote.timeout, Some(Duration::from_millis(500)));
/// assert_eq!(remote.max_retries, Some(5));
/// assert!(remote.set("timeout", "soon").is_err());
///
/// // Among a location's store options, the remote keys are taken; the rest go to the store.
/// let options = [("connect_timeout", "2s"), ("aws_region", "eu-west-1")]
///     .map(|(k, v)| (k.to_string(), v.to_string()));
/// let (remote, rest) = remote.with_store_options(&options)?;
/// assert_eq!(remote.connect_timeout, Some(Duration::from_secs(2)));
/// assert_eq!(rest, [("aws_region".to_string(), "eu-west-1".to_string())]);
/// # Ok::<(), zarrow::Error>(())
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct RemoteOptions {
    /// How long a connection may take.
    pub connect_timeout: Option<Duration>,
    /// How long one read may take: one metadata document, chunk, shard range or listing, with
    /// every request it makes (ranged parts, the whole `GET` a failed ranged one falls back
    /// to, retries and their backoff) and its body. A read still unanswered then fails with a
    /// timeout error naming this option; the warm-up's `HEAD`s are held to it too.
    pub timeout: Option<Duration>,
    /// How many times a failing request is retried (0: never).
    pub max_retries: Option<usize>,
    /// For how long after its first attempt a request is retried; a retry is never started
    /// past the read's `timeout`, which bounds the read whatever this says.
    pub retry_timeout: Option<Duration>,
    /// How many connections a fresh remote store opens while its first metadata document is
    /// on the way (0: none), so that the first wave of chunk reads finds them open instead of
    /// paying a handshake after the metadata: one `HEAD` of that document each, counted as
    /// metadata requests. At most 256.
    pub warm_connections: Option<usize>,
    /// `ref`: the version of an Icechunk repository (branch, tag or snapshot id; `@REF` in the
    /// location wins). Only repositories have versions: a plain store refuses it.
    #[serde(rename = "ref")]
    pub reference: Option<String>,
    /// The session's `ref` (`SET zarrow.ref`): the version of repositories whose location and
    /// options name none; plain stores ignore it.
    pub default_reference: Option<String>,
    /// `virtual_chunks`: the URL prefixes (comma-separated; `*`: every container the
    /// repository declares) an Icechunk repository may read virtual chunks from. None by
    /// default: a repository's metadata alone never makes zarrow read outside it.
    pub virtual_chunks: Option<String>,
}

impl RemoteOptions {
    /// Set `key` (one of the remote keys of [`crate::options::OPTION_KEYS`]) from its text; an error is an
    /// [`Error::InvalidOption`] naming the key and quoting the value.
    pub fn set(&mut self, key: &str, value: &str) -> Result<()> {
        let invalid = |message: String| Error::invalid_option(key, message);
        match key {
            "connect_timeout" => self.connect_timeout = Some(parse_duration(key, value)?),
            "timeout" => self.timeout = Some(parse_duration(key, value)?),
            "retry_timeout" => self.retry_timeout = Some(parse_duration(key, value)?),
            "virtual_chunks" => self.virtual_chunks = Some(value.trim().to_string()),
            "ref" => {
                let value = value.trim();
                if value.is_empty() {
                    return Err(invalid("expected a branch, tag or snapshot id".into()));
                }
                self.reference = Some(value.to_string());
            }
            "max_retries" => {
                self.max_retries = Some(value.trim().parse().map_err(|_| {
                    invalid(format!("expected a number of retries, found '{value}'"))
                })?)
            }
            "warm_connections" => {
                let n = value
                    .trim()
                    .parse()
                    .ok()
                    .filter(|n| *n <= MAX_WARM_CONNECTIONS);
                self.warm_connections = Some(n.ok_or_else(|| {
                    invalid(format!(
                        "expected a number of connections up to {MAX_WARM_CONNECTIONS}, \
                         found '{value}'"
                    ))
                })?)
            }
            _ => return Err(invalid("not a remote store option".into())),
        }
        Ok(())
    }

    /// These options with the remote keys among `options` applied on top; the other keys are
    /// returned for the store's builder.
    pub fn with_store_options(
        mut self,
        options: &[(String, String)],
    ) -> Result<(Self, Vec<(String, String)>)> {
        let mut rest = Vec::with_capacity(options.len());
        for (key, value) in options {
            let bare = key.to_ascii_lowercase();
            if keys::keys_of(Group::Remote).any(|k| k == bare) {
                self.set(&bare, value)?;
            } else {
                rest.push((key.clone(), value.clone()));
            }
        }
        Ok((self, rest))
    }

    /// Every setting resolved: the ones set here, else the defaults.
    #[cfg(feature = "cloud")]
    pub(crate) fn resolve(&self) -> ResolvedRemote {
        let timeout = self.timeout.unwrap_or(DEFAULT_TIMEOUT);
        ResolvedRemote {
            connect_timeout: self.connect_timeout.unwrap_or(DEFAULT_CONNECT_TIMEOUT),
            timeout,
            max_retries: self.max_retries.unwrap_or(DEFAULT_MAX_RETRIES),
            // Retries past the read's timeout could never finish: object_store would start
            // them only for the read to be cut off.
            retry_timeout: self
                .retry_timeout
                .unwrap_or(DEFAULT_RETRY_TIMEOUT)
                .min(timeout),
            warm_connections: self.warm_connections.unwrap_or(DEFAULT_WARM_CONNECTIONS),
        }
    }

    /// The defaults with the settings the environment gives (`ZARROW_TIMEOUT`, …; see
    /// [`crate::options::OPTION_KEYS`]) applied; a value that does not parse is an error
    /// naming its variable. Only the edges (the CLI, Python) call this: the library reads no
    /// `ZARROW_*` variable on its own.
    pub fn from_env() -> Result<Self> {
        let mut options = RemoteOptions::default();
        for (key, value) in keys::env_values(|o| o.group == Group::Remote) {
            let var = keys::option_key(&key)
                .and_then(|o| o.env)
                .unwrap_or_default();
            options.set(&key, &value).map_err(|e| match e {
                Error::InvalidOption { message, .. } => Error::InvalidOption {
                    key: var.to_string(),
                    message,
                },
                other => other,
            })?;
        }
        Ok(options)
    }
}

/// [`RemoteOptions`] with every setting decided.
#[cfg(feature = "cloud")]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ResolvedRemote {
    /// How long a connection may take.
    pub connect_timeout: Duration,
    /// How long one read (all its requests) may take.
    pub timeout: Duration,
    /// How many times a failing request is retried.
    pub max_retries: usize,
    /// For how long after its first attempt a request is retried (at most `timeout`).
    pub retry_timeout: Duration,
    /// How many connections are opened during the first metadata read.
    pub warm_connections: usize,
}

/// A remote store as [`open`] builds it.
pub(crate) struct RemoteStore {
    /// The client.
    pub store: Arc<dyn ObjectStore>,
    /// The node's path inside it.
    pub root: object_store::path::Path,
    /// How often a read cut short is tried again.
    pub max_retries: usize,
    /// How long one read may take, all its requests included (`timeout`).
    pub timeout: Duration,
    /// What opens its connections during the first metadata read (`None`: nothing).
    pub warm_up: Option<Arc<WarmUp>>,
}

/// Opens a fresh client's connections while its first metadata document is on the way.
///
/// A new process (or a new table) pays a handshake per connection. Without this, the first
/// wave of chunk reads opens its connections only once the metadata has arrived: one round
/// trip more before the first chunk (two or three with TLS). `HEAD`s of the document, sent
/// beside its `GET`, open them meanwhile; their answers are not awaited (only their
/// connections matter, left open in the client's pool). Once per client: the clones of a
/// store share it. A `HEAD` is given up after the store's `timeout`, as a read would be: a
/// silent server holds no task of it longer.
#[derive(Debug)]
pub(crate) struct WarmUp {
    connections: usize,
    timeout: Duration,
    started: std::sync::atomic::AtomicBool,
}

impl WarmUp {
    /// Warm-up of `connections` connections, each `HEAD` given up after `timeout`; `None` for
    /// 0.
    #[cfg(feature = "cloud")]
    pub(crate) fn new(connections: usize, timeout: Duration) -> Option<Arc<Self>> {
        (connections > 0).then(|| {
            Arc::new(WarmUp {
                connections: connections.min(MAX_WARM_CONNECTIONS),
                timeout,
                started: Default::default(),
            })
        })
    }

    /// Send the `HEAD`s of `path` if this is the first call (and a tokio runtime runs them),
    /// counted into `metrics` as metadata requests; how many were sent.
    pub(crate) fn start(
        &self,
        store: &Arc<dyn ObjectStore>,
        path: &object_store::path::Path,
        metrics: &crate::ScanMetrics,
    ) -> usize {
        use std::sync::atomic::Ordering;
        if self.started.swap(true, Ordering::Relaxed) {
            return 0;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return 0;
        };
        for _ in 0..self.connections {
            let (store, path) = (store.clone(), path.clone());
            let head = async move { object_store::ObjectStoreExt::head(&store, &path).await };
            runtime.spawn(tokio::time::timeout(self.timeout, head));
        }
        metrics.add_metadata_counts(&crate::ScanCounts {
            metadata_requests: u64::try_from(self.connections).unwrap_or(u64::MAX),
            ..Default::default()
        });
        self.connections
    }
}

/// A duration written `500ms`, `5s`, `2m`, `1h` or as seconds (`1.5`); an error is an
/// [`Error::InvalidOption`] about `key`.
pub(crate) fn parse_duration(key: &str, value: &str) -> Result<Duration> {
    let text = value.trim();
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let scale = match unit.trim() {
        "" | "s" | "sec" | "secs" => 1.0,
        "ms" => 1e-3,
        "m" | "min" | "mins" => 60.0,
        "h" => 3600.0,
        _ => f64::NAN,
    };
    let seconds = number.parse::<f64>().map(|n| n * scale);
    match seconds {
        Ok(s) if s.is_finite() && (0.0..=86_400.0 * 365.0).contains(&s) => {
            Ok(Duration::from_secs_f64(s))
        }
        _ => Err(Error::InvalidOption {
            key: key.to_string(),
            message: format!("expected a duration such as 500ms, 5s or 2m, found '{value}'"),
        }),
    }
}

/// Whether the environment variable `name` configures a store: a provider's (`AWS_*`,
/// `GOOGLE_*`, `AZURE_*`), as `object_store`'s builders read them. A bare name such as
/// `REGION` never does: another program may have set it.
#[cfg(any(feature = "cloud", feature = "icechunk"))]
pub(crate) fn is_provider_variable(name: &str) -> bool {
    ["AWS_", "GOOGLE_", "AZURE_"]
        .iter()
        .any(|p| name.starts_with(p))
}

/// A cloud or HTTP store for `url` (`object_store`'s URL schemes: `s3://`, `gs://`, `az://`,
/// `abfs://`, `http(s)://`, and the providers' https URLs), configured from the environment
/// (`AWS_*`, `GOOGLE_*`, `AZURE_*`), then `options`, with `remote`'s timeouts and retries; the
/// URL's path is the node's path inside it. A store that cannot be built is an
/// [`Error::Location`] about `location` (the URL as given).
#[cfg(feature = "cloud")]
pub(crate) fn open(
    location: &str,
    url: &url::Url,
    options: &[(String, String)],
    remote: &RemoteOptions,
) -> Result<RemoteStore> {
    use object_store::{BackoffConfig, ClientConfigKey, ObjectStoreScheme, RetryConfig};

    let err = |message: String| Error::bad_location(location, message);
    let (scheme, path) = ObjectStoreScheme::parse(url).map_err(|e| err(e.to_string()))?;
    if matches!(scheme, ObjectStoreScheme::Local | ObjectStoreScheme::Memory) {
        return Err(err(format!("unsupported scheme '{}'", url.scheme())));
    }
    let (remote, options) = remote.clone().with_store_options(options)?;
    let settings = remote.resolve();
    let mut all: Vec<(String, String)> = std::env::vars()
        .filter(|(k, _)| is_provider_variable(k))
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
    if http_endpoint || scheme == ObjectStoreScheme::Http {
        all.push(("allow_http".into(), "true".into()));
    }
    let millis = |d: Duration| format!("{}ms", d.as_millis());
    all.push((
        ClientConfigKey::ConnectTimeout.as_ref().into(),
        millis(settings.connect_timeout),
    ));
    all.push((
        ClientConfigKey::Timeout.as_ref().into(),
        millis(settings.timeout),
    ));
    all.extend(options);
    let retry = RetryConfig {
        backoff: BackoffConfig::default(),
        max_retries: settings.max_retries,
        retry_timeout: settings.retry_timeout,
    };

    // Each builder takes the keys it knows (unknown ones are skipped, as `parse_url_opts` does:
    // the environment holds keys of every provider).
    macro_rules! build {
        ($builder:ty, $url:expr) => {{
            let mut builder = <$builder>::new()
                .with_url($url)
                .with_http_connector(StreamedBodies);
            for (key, value) in &all {
                if let Ok(key) = key.parse() {
                    builder = builder.with_config(key, value.clone());
                }
            }
            Arc::new(
                builder
                    .with_retry(retry)
                    .build()
                    .map_err(|e| err(e.to_string()))?,
            ) as Arc<dyn ObjectStore>
        }};
    }
    let store = match scheme {
        ObjectStoreScheme::AmazonS3 => build!(object_store::aws::AmazonS3Builder, url.as_str()),
        ObjectStoreScheme::GoogleCloudStorage => {
            build!(object_store::gcp::GoogleCloudStorageBuilder, url.as_str())
        }
        ObjectStoreScheme::MicrosoftAzure => {
            build!(object_store::azure::MicrosoftAzureBuilder, url.as_str())
        }
        ObjectStoreScheme::Http => {
            build!(
                object_store::http::HttpBuilder,
                &url[..url::Position::BeforePath]
            )
        }
        other => return Err(err(format!("unsupported store {other:?}"))),
    };
    Ok(RemoteStore {
        store,
        root: path,
        max_retries: settings.max_retries,
        timeout: settings.timeout,
        warm_up: WarmUp::new(settings.warm_connections, settings.timeout),
    })
}

/// The HTTP connector of zarrow's remote stores: `object_store`'s, with responses without a
/// `Content-Length` read up to their request's cap (see the module docs).
#[cfg(feature = "cloud")]
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct StreamedBodies;

#[cfg(feature = "cloud")]
impl object_store::client::HttpConnector for StreamedBodies {
    fn connect(
        &self,
        options: &object_store::ClientOptions,
    ) -> object_store::Result<object_store::client::HttpClient> {
        use object_store::client::{HttpClient, ReqwestConnector};
        let inner = ReqwestConnector::default().connect(options)?;
        Ok(HttpClient::new(StreamedService(inner)))
    }
}

#[cfg(feature = "cloud")]
#[derive(Debug)]
struct StreamedService(object_store::client::HttpClient);

#[cfg(feature = "cloud")]
#[async_trait::async_trait]
impl object_store::client::HttpService for StreamedService {
    async fn call(
        &self,
        request: object_store::client::HttpRequest,
    ) -> std::result::Result<object_store::client::HttpResponse, object_store::client::HttpError>
    {
        use crate::store::{collect_bounded, BodyCap, Bounded};
        use object_store::client::{HttpError, HttpErrorKind, HttpResponse, HttpResponseBody};
        use object_store::HeaderValue;

        let cap = (request.method().as_str() == "GET")
            .then(|| request.extensions().get::<BodyCap>().copied())
            .flatten();
        let response = self.0.execute(request).await?;
        let Some(BodyCap(cap)) = cap else {
            return Ok(response);
        };
        if !response.status().is_success() || response.headers().contains_key("content-length") {
            return Ok(response);
        }
        let (mut parts, body) = response.into_parts();
        let fail =
            |message: String| HttpError::new(HttpErrorKind::Decode, std::io::Error::other(message));
        let (length, body) = match collect_bounded(body.bytes_stream(), None, cap, fail).await? {
            Bounded::Whole(bytes) => (bytes.len() as u64, bytes),
            // What arrived, announced with no body: refused as over the cap before it is read.
            Bounded::Over(arrived) => (arrived, bytes::Bytes::new()),
        };
        parts
            .headers
            .insert("content-length", HeaderValue::from(length));
        Ok(HttpResponse::from_parts(
            parts,
            HttpResponseBody::from(body),
        ))
    }
}

#[cfg(not(feature = "cloud"))]
pub(crate) fn open(
    location: &str,
    url: &url::Url,
    _options: &[(String, String)],
    _remote: &RemoteOptions,
) -> Result<RemoteStore> {
    Err(Error::bad_location(
        location,
        format!(
            "'{}://' needs zarrow built with the `cloud` feature",
            url.scheme()
        ),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        let d = |s| parse_duration("timeout", s);
        assert_eq!(d("5s").unwrap(), Duration::from_secs(5));
        assert_eq!(d("250ms").unwrap(), Duration::from_millis(250));
        assert_eq!(d(" 2m ").unwrap(), Duration::from_secs(120));
        assert_eq!(d("1.5").unwrap(), Duration::from_millis(1500));
        for bad in ["", "s", "-1s", "5 parsecs", "1e400", "NaN", "99999999999h"] {
            match d(bad).unwrap_err() {
                Error::InvalidOption { key, message } => {
                    assert_eq!(key, "timeout");
                    assert!(
                        message.starts_with("expected a duration"),
                        "{bad}: {message}"
                    );
                }
                other => panic!("{bad}: {other}"),
            }
        }
    }

    #[test]
    fn store_options_take_the_remote_keys() {
        let options = vec![
            ("aws_region".to_string(), "eu-west-1".to_string()),
            ("TIMEOUT".to_string(), "2s".to_string()),
            ("max_retries".to_string(), "0".to_string()),
        ];
        let base = RemoteOptions {
            timeout: Some(Duration::from_secs(9)),
            retry_timeout: Some(Duration::from_secs(7)),
            ..Default::default()
        };
        let (remote, rest) = base.with_store_options(&options).unwrap();
        assert_eq!(rest, vec![("aws_region".into(), "eu-west-1".into())]);
        assert_eq!(remote.timeout, Some(Duration::from_secs(2)));
        assert_eq!(remote.max_retries, Some(0));
        assert_eq!(remote.retry_timeout, Some(Duration::from_secs(7)));
        #[cfg(feature = "cloud")]
        {
            let resolved = remote.resolve();
            assert_eq!(resolved.max_retries, 0);
            assert_eq!(resolved.timeout, Duration::from_secs(2));
        }
        let bad = vec![("max_retries".to_string(), "many".to_string())];
        let e = RemoteOptions::default()
            .with_store_options(&bad)
            .unwrap_err();
        assert!(
            matches!(&e, Error::InvalidOption { key, message }
                if key == "max_retries" && message.contains("many")),
            "{e}"
        );
    }

    #[test]
    fn warm_connections_are_a_bounded_count() {
        let mut remote = RemoteOptions::default();
        remote.set("warm_connections", " 8 ").unwrap();
        assert_eq!(remote.warm_connections, Some(8));
        remote.set("warm_connections", "0").unwrap();
        assert_eq!(remote.warm_connections, Some(0));
        for bad in ["257", "-1", "lots", "1e9"] {
            let e = remote.set("warm_connections", bad).unwrap_err();
            assert!(
                matches!(&e, Error::InvalidOption { key, message }
                    if key == "warm_connections" && message.contains("up to 256")),
                "{bad}: {e}"
            );
        }
    }

    #[cfg(feature = "cloud")]
    #[tokio::test]
    async fn a_warm_up_starts_once() {
        let second = Duration::from_secs(1);
        assert!(WarmUp::new(0, second).is_none());
        let store: Arc<dyn ObjectStore> = Arc::new(object_store::memory::InMemory::new());
        let warm = WarmUp::new(4, second).unwrap();
        let path = object_store::path::Path::from("zarr.json");
        let metrics = crate::ScanMetrics::new();
        assert_eq!(warm.start(&store, &path, &metrics), 4);
        assert_eq!(
            warm.start(&store, &path, &metrics),
            0,
            "a second document sends none"
        );
        assert_eq!(metrics.counts().metadata_requests, 4);
    }

    #[cfg(feature = "cloud")]
    #[test]
    fn defaults_fail_a_dead_server_in_seconds() {
        let r = RemoteOptions::default().resolve();
        assert!(r.connect_timeout <= Duration::from_secs(10));
        // A read, retries included, ends within `timeout`: the documented bound.
        assert_eq!(r.timeout, Duration::from_secs(30));
        assert!(r.retry_timeout <= r.timeout);
        // A retry_timeout past the timeout is cut to it.
        let long = RemoteOptions {
            timeout: Some(Duration::from_secs(1)),
            ..Default::default()
        };
        assert_eq!(long.resolve().retry_timeout, Duration::from_secs(1));
    }
}

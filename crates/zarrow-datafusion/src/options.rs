//! Table options (`CREATE EXTERNAL TABLE … OPTIONS`, `register_zarr`) and the session
//! settings under `zarrow.` (`SET zarrow.string_type = 'view'`) that give their defaults.

use std::collections::HashMap;

use datafusion::common::config::{ConfigEntry, ConfigOptions, ExtensionOptions};
use datafusion::common::extensions_options;
use datafusion::config::ConfigExtension;
use datafusion::error::{DataFusionError, Result};
use zarrow::options::REMOTE_KEYS;
use zarrow::options::{FETCH_KEYS, LIMIT_KEYS};
use zarrow::table::TableOptions;
use zarrow::{FetchOptions, ReadLimits, RemoteOptions, StringType, ZarrReadOptions};

use crate::error::to_datafusion_error;

extensions_options! {
    /// The session settings DataFusion's macro can name (all but `ref`, a Rust keyword);
    /// [`ZarrConfig`] derefs to them.
    pub struct ZarrSettings {
        /// How strings are read: utf8, large_utf8 or view
        pub string_type: String, default = "utf8".to_string()
        /// Elements equal to the array's fill value become NULL
        pub fill_as_null: bool, default = false
        /// Apply the CF conventions (time units, scale_factor/add_offset, _FillValue → NULL)
        pub decode_cf: bool, default = false
        /// Chunk reads in flight at once per partition
        pub concurrency: usize, default = 32
        /// Remote stores: how long a connection may take (e.g. 5s; empty: 5s)
        pub connect_timeout: String, default = String::new()
        /// Remote stores: how long one request may take (e.g. 30s; empty: 30s)
        pub timeout: String, default = String::new()
        /// Remote stores: how many times a failing request is retried (empty: 3)
        pub max_retries: String, default = String::new()
        /// Remote stores: for how long a request is retried (e.g. 20s; empty: 20s)
        pub retry_timeout: String, default = String::new()
        /// Remote stores: connections a fresh store opens while its first metadata document is on the way (empty: 32; 0: none)
        pub warm_connections: String, default = String::new()
        /// Icechunk repositories: URL prefixes (comma-separated, * for all) of the containers virtual chunks may be read from
        pub virtual_chunks: String, default = String::new()
        /// The largest element (string, bytes, fixed-size item) read, in bytes (default 16 MiB)
        pub max_item_bytes: usize, default = zarrow::options::DEFAULT_MAX_ITEM_BYTES
        /// The largest decoded variable-length chunk read, in bytes (default 2 GiB)
        pub max_chunk_bytes: usize, default = zarrow::options::DEFAULT_MAX_CHUNK_BYTES
        /// The largest metadata document read, in bytes (default 256 MiB)
        pub max_metadata_bytes: u64, default = zarrow::options::DEFAULT_MAX_METADATA_BYTES
        /// A chunk read of more bytes than this is split into concurrent ranged GETs (default 8 MiB; 0: never)
        pub range_split_bytes: u64, default = zarrow::options::DEFAULT_RANGE_SPLIT_BYTES
        /// Inner chunks of a shard at most this many bytes apart are read by one GET (default 1 MiB)
        pub coalesce_bytes: u64, default = zarrow::options::DEFAULT_COALESCE_BYTES
        /// Skip chunks by the filters a query learns as it runs (a join's build side, a top-k's threshold)
        pub runtime_pruning: bool, default = true
    }
}

/// Session settings of zarrow (`SET zarrow.<key> = …`), the defaults of every zarr table
/// created afterwards; `concurrency` applies to every scan. `zarrow.ref` is the version
/// Icechunk repositories are read at (plain stores, which have none, ignore it).
#[derive(Debug, Clone, Default)]
pub struct ZarrConfig {
    settings: ZarrSettings,
    /// `ref`: an Icechunk branch, tag or snapshot id (empty: each location's own or `main`).
    pub reference: String,
}

impl std::ops::Deref for ZarrConfig {
    type Target = ZarrSettings;
    fn deref(&self) -> &ZarrSettings {
        &self.settings
    }
}

impl std::ops::DerefMut for ZarrConfig {
    fn deref_mut(&mut self) -> &mut ZarrSettings {
        &mut self.settings
    }
}

impl ExtensionOptions for ZarrConfig {
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }

    fn as_any_mut(&mut self) -> &mut dyn std::any::Any {
        self
    }

    fn cloned(&self) -> Box<dyn ExtensionOptions> {
        Box::new(self.clone())
    }

    fn set(&mut self, key: &str, value: &str) -> Result<()> {
        match key {
            "ref" => {
                self.reference = value.trim().to_string();
                Ok(())
            }
            other => self.settings.set(other, value),
        }
    }

    fn entries(&self) -> Vec<ConfigEntry> {
        let mut entries = self.settings.entries();
        entries.push(ConfigEntry {
            key: "ref".into(),
            value: Some(self.reference.clone()),
            description: "Icechunk repositories: the branch, tag or snapshot id read (empty: main)",
        });
        entries
    }
}

impl ConfigExtension for ZarrConfig {
    const PREFIX: &'static str = "zarrow";
}

impl ZarrConfig {
    /// The settings of a session (the defaults when the extension is not registered).
    pub fn from_config_options(options: &ConfigOptions) -> ZarrConfig {
        options
            .extensions
            .get::<ZarrConfig>()
            .cloned()
            .unwrap_or_default()
    }
}

/// How a zarr node becomes a table (serializable: a table travels to a Ballista scheduler as
/// its location and these).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(default)]
pub struct ZarrTableOptions {
    /// The Arrow type of strings (and, following it, of bytes).
    pub string_type: StringType,
    /// Elements equal to the array's fill value become NULL.
    pub fill_as_null: bool,
    /// Apply the CF conventions xarray writes: time `units: "<unit> since <date>"` →
    /// Timestamp, `scale_factor`/`add_offset`, `_FillValue`/`missing_value` → NULL.
    pub decode_cf: bool,
    /// For a group: build the table from these child arrays only (resolves ties between
    /// different dimension sets). Coordinates of the table's dimensions are always added.
    pub arrays: Option<Vec<String>>,
    /// Timeouts, retries and warm connections of a remote store (`connect_timeout`,
    /// `timeout`, `max_retries`, `retry_timeout`, `warm_connections`; see
    /// [`zarrow::RemoteOptions`]).
    pub remote: RemoteOptions,
    /// What zarrow allocates at most for sizes the data claims (`max_item_bytes`,
    /// `max_chunk_bytes`, `max_metadata_bytes`): they travel with the table and its scans,
    /// so executors hold to the client's limits.
    pub limits: ReadLimits,
    /// How chunk reads are split and merged (`range_split_bytes`, `coalesce_bytes`).
    pub fetch: FetchOptions,
    /// `INSERT INTO` the table breaks another writer's stale lock (its process gone on this
    /// host, or older than an hour; docs/writing.md, "Write safety").
    pub break_stale_lock: bool,
}

/// The option keys, as written in `OPTIONS (…)` (also accepted with a `format.` or
/// `zarrow.` prefix), besides the remote store's [`REMOTE_KEYS`].
const KEYS: &[&str] = &[
    "string_type",
    "fill_as_null",
    "decode_cf",
    "arrays",
    "break_stale_lock",
];

fn set_remote(remote: &mut RemoteOptions, key: &str, value: &str) -> Result<()> {
    remote
        .set(key, value)
        .map_err(|e| DataFusionError::Configuration(format!("zarr {e}")))
}

fn parse_bool(key: &str, value: &str) -> Result<bool> {
    match value.trim().to_ascii_lowercase().as_str() {
        "true" | "1" | "yes" | "on" => Ok(true),
        "false" | "0" | "no" | "off" => Ok(false),
        other => Err(DataFusionError::Configuration(format!(
            "zarr option '{key}': expected true or false, found '{other}'"
        ))),
    }
}

impl ZarrTableOptions {
    /// Parse table options: `string_type` (utf8, large_utf8, view), `fill_as_null`,
    /// `decode_cf` (true/false), `arrays` (comma-separated child array names), the read
    /// limits `max_item_bytes`, `max_chunk_bytes`, `max_metadata_bytes` (bytes), how chunk
    /// reads are split and merged, `range_split_bytes` and `coalesce_bytes` (bytes), and for remote
    /// stores `connect_timeout`, `timeout`, `retry_timeout` (`500ms`, `5s`, `2m`),
    /// `max_retries` and `warm_connections`. Keys may carry a
    /// `format.` or `zarrow.` prefix (DataFusion adds `format.` to unqualified keys); any
    /// other key is an error.
    pub fn from_options(options: &HashMap<String, String>) -> Result<Self> {
        ZarrTableOptions::default().with_options(options)
    }

    /// The defaults a session's `zarrow.*` settings give.
    pub fn from_config(config: &ZarrConfig) -> Result<Self> {
        let mut remote = RemoteOptions::default();
        for (key, value) in [
            ("connect_timeout", &config.connect_timeout),
            ("timeout", &config.timeout),
            ("max_retries", &config.max_retries),
            ("retry_timeout", &config.retry_timeout),
            ("warm_connections", &config.warm_connections),
            ("virtual_chunks", &config.virtual_chunks),
        ] {
            if !value.trim().is_empty() {
                set_remote(&mut remote, key, value)?;
            }
        }
        if !config.reference.trim().is_empty() {
            remote.default_reference = Some(config.reference.trim().to_string());
        }
        Ok(ZarrTableOptions {
            string_type: StringType::parse(&config.string_type).map_err(to_datafusion_error)?,
            fill_as_null: config.fill_as_null,
            decode_cf: config.decode_cf,
            arrays: None,
            remote,
            limits: ReadLimits {
                max_item_bytes: config.max_item_bytes,
                max_chunk_bytes: config.max_chunk_bytes,
                max_metadata_bytes: config.max_metadata_bytes,
            },
            fetch: FetchOptions {
                range_split_bytes: config.range_split_bytes,
                coalesce_bytes: config.coalesce_bytes,
            },
            break_stale_lock: false,
        })
    }

    /// These options with `options` (see [`Self::from_options`]) applied on top.
    pub fn with_options(mut self, options: &HashMap<String, String>) -> Result<Self> {
        let mut sorted: Vec<_> = options.iter().collect();
        sorted.sort();
        for (key, value) in sorted {
            let lower = key.to_ascii_lowercase();
            let bare = lower
                .strip_prefix("format.")
                .or_else(|| lower.strip_prefix("zarrow."))
                .unwrap_or(&lower);
            match bare {
                "string_type" => {
                    self.string_type =
                        StringType::parse(value.trim()).map_err(to_datafusion_error)?
                }
                "fill_as_null" => self.fill_as_null = parse_bool(bare, value)?,
                "decode_cf" => self.decode_cf = parse_bool(bare, value)?,
                "break_stale_lock" => self.break_stale_lock = parse_bool(bare, value)?,
                "arrays" => {
                    let names: Vec<String> = value
                        .split(',')
                        .map(|s| s.trim().to_string())
                        .filter(|s| !s.is_empty())
                        .collect();
                    self.arrays = (!names.is_empty()).then_some(names);
                }
                key if REMOTE_KEYS.contains(&key) => set_remote(&mut self.remote, key, value)?,
                key if LIMIT_KEYS.iter().any(|(k, _)| *k == key) => {
                    self.limits.set(key, value).map_err(to_datafusion_error)?
                }
                key if FETCH_KEYS.contains(&key) => {
                    self.fetch.set(key, value).map_err(to_datafusion_error)?
                }
                _ => {
                    return Err(DataFusionError::Configuration(format!(
                        "unknown zarr table option '{key}'; expected one of {}",
                        KEYS.iter()
                            .chain(REMOTE_KEYS)
                            .copied()
                            .chain(LIMIT_KEYS.iter().map(|(k, _)| *k))
                            .chain(FETCH_KEYS.iter().copied())
                            .collect::<Vec<_>>()
                            .join(", ")
                    )))
                }
            }
        }
        Ok(self)
    }

    /// Set the string type.
    pub fn with_string_type(mut self, string_type: StringType) -> Self {
        self.string_type = string_type;
        self
    }

    /// Set `fill_as_null`.
    pub fn with_fill_as_null(mut self, on: bool) -> Self {
        self.fill_as_null = on;
        self
    }

    /// Set `decode_cf`.
    pub fn with_decode_cf(mut self, on: bool) -> Self {
        self.decode_cf = on;
        self
    }

    /// Set the read limits (see [`ReadLimits`]).
    pub fn with_limits(mut self, limits: ReadLimits) -> Self {
        self.limits = limits;
        self
    }

    /// Set the arrays a group table is built from.
    pub fn with_arrays(mut self, arrays: impl IntoIterator<Item = impl Into<String>>) -> Self {
        self.arrays = Some(arrays.into_iter().map(Into::into).collect());
        self
    }

    /// The core crate's table options (reads with default concurrency; scans set their own).
    pub fn to_table_options(&self) -> TableOptions {
        TableOptions {
            read: ZarrReadOptions::default()
                .with_string_type(self.string_type)
                .with_limits(self.limits)
                .with_fetch(self.fetch),
            fill_as_null: self.fill_as_null,
            decode_cf: self.decode_cf,
            arrays: self.arrays.clone(),
            remote: self.remote.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_options() {
        let map: HashMap<String, String> = [
            ("format.fill_as_null", "true"),
            ("string_type", "large_utf8"),
            ("arrays", "temperature, flag"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        let o = ZarrTableOptions::from_options(&map).unwrap();
        assert!(o.fill_as_null);
        assert!(!o.decode_cf);
        assert_eq!(o.string_type, StringType::LargeUtf8);
        assert_eq!(
            o.arrays,
            Some(vec!["temperature".to_string(), "flag".to_string()])
        );
        assert_eq!(o.fetch, FetchOptions::default());
        let fetch: HashMap<String, String> = [
            (
                "format.range_split_bytes".to_string(),
                "1048576".to_string(),
            ),
            ("coalesce_bytes".to_string(), "0".to_string()),
        ]
        .into();
        let o = ZarrTableOptions::from_options(&fetch).unwrap();
        let read = o.to_table_options().read;
        assert_eq!(
            (read.fetch.range_split_bytes, read.fetch.coalesce_bytes),
            (1 << 20, 0)
        );
        let bad: HashMap<String, String> =
            [("range_split_bytes".to_string(), "8M".to_string())].into();
        let err = ZarrTableOptions::from_options(&bad)
            .unwrap_err()
            .to_string();
        assert!(err.contains("range_split_bytes"), "{err}");
        let bad: HashMap<String, String> = [("format.bogus".to_string(), "1".to_string())].into();
        let err = ZarrTableOptions::from_options(&bad)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("unknown zarr table option 'format.bogus'"),
            "{err}"
        );
    }
}

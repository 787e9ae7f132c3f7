//! Table options (`CREATE EXTERNAL TABLE … OPTIONS`, `register_zarr`) and the session
//! settings under `zarrow.` (`SET zarrow.string_type = 'view'`) that give their defaults.

use std::collections::{BTreeMap, HashMap};

use datafusion::common::config::{ConfigEntry, ConfigOptions, ExtensionOptions};
use datafusion::config::ConfigExtension;
use datafusion::error::{DataFusionError, Result};
use zarrow::options::keys::{option_key, parse_bool, table_keys, OPTION_KEYS};
use zarrow::table::TableOptions;
use zarrow::{FetchOptions, ReadLimits, RemoteOptions, StringType, ZarrReadOptions};

use crate::error::to_datafusion_error;

/// Session settings of zarrow (`SET zarrow.<key> = …`): the defaults of every zarr table
/// created afterwards, `FROM 'location'` tables included, and the settings only a session
/// has (`concurrency`, which applies to every scan, and `runtime_pruning`). The keys are those
/// of [`zarrow::options::OPTION_KEYS`] a session takes; `ref` is the version Icechunk
/// repositories are read at (plain stores, which have none, ignore it). A blank value puts a
/// setting back to its default.
#[derive(Debug, Clone, Default)]
pub struct ZarrConfig {
    /// The settings made, each checked when it was made.
    values: BTreeMap<&'static str, String>,
}

impl ZarrConfig {
    /// The setting `key` as made, else its declared default.
    pub fn get(&self, key: &str) -> Option<&str> {
        let declared = option_key(key).filter(|o| o.scope.session)?;
        Some(
            self.values
                .get(declared.key)
                .map_or(declared.default, String::as_str),
        )
    }

    /// Chunk reads in flight at once per partition of every scan.
    pub fn concurrency(&self) -> usize {
        self.table_defaults().read.concurrency
    }

    /// Whether scans skip chunks by the filters a query learns as it runs.
    pub fn runtime_pruning(&self) -> bool {
        self.values
            .get("runtime_pruning")
            .is_none_or(|v| parse_bool("runtime_pruning", v).unwrap_or(true))
    }

    /// The core table options these settings give (the session's `ref` as the default
    /// version of repositories).
    fn try_table_defaults(values: &BTreeMap<&'static str, String>) -> Result<TableOptions> {
        let mut table = TableOptions::default();
        for (&key, value) in values {
            match key {
                "runtime_pruning" => {
                    parse_bool(key, value).map_err(to_datafusion_error)?;
                }
                "ref" => table.remote.default_reference = Some(value.trim().to_string()),
                _ => table.set(key, value).map_err(to_datafusion_error)?,
            }
        }
        Ok(table)
    }

    fn table_defaults(&self) -> TableOptions {
        // Every value was checked when it was set.
        Self::try_table_defaults(&self.values).unwrap_or_default()
    }

    /// The settings of a session (the defaults when the extension is not registered).
    pub fn from_config_options(options: &ConfigOptions) -> ZarrConfig {
        options
            .extensions
            .get::<ZarrConfig>()
            .cloned()
            .unwrap_or_default()
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
        let Some(declared) = option_key(key).filter(|o| o.scope.session) else {
            let keys: Vec<&str> = OPTION_KEYS
                .iter()
                .filter(|o| o.scope.session)
                .map(|o| o.key)
                .collect();
            return Err(DataFusionError::Configuration(format!(
                "unknown zarrow setting '{key}'; expected one of {}",
                keys.join(", ")
            )));
        };
        let mut values = self.values.clone();
        if value.trim().is_empty() {
            values.remove(declared.key);
        } else {
            values.insert(declared.key, value.to_string());
        }
        Self::try_table_defaults(&values)?;
        self.values = values;
        Ok(())
    }

    fn entries(&self) -> Vec<ConfigEntry> {
        OPTION_KEYS
            .iter()
            .filter(|o| o.scope.session)
            .map(|o| ConfigEntry {
                key: format!("{}.{}", Self::PREFIX, o.key),
                value: self.get(o.key).map(str::to_string),
                description: o.doc,
            })
            .collect()
    }
}

impl ConfigExtension for ZarrConfig {
    const PREFIX: &'static str = "zarrow";
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

impl ZarrTableOptions {
    /// Parse table options: the keys of [`zarrow::options::OPTION_KEYS`] a table takes
    /// (`string_type`, `fill_as_null`, `decode_cf`, `arrays`, the read limits, how chunk reads
    /// are split and merged, the remote store's timeouts, `break_stale_lock`; docs/options.md
    /// lists them). Keys may carry a `format.` or `zarrow.` prefix (DataFusion adds `format.`
    /// to unqualified keys); any other key is an error that lists the valid ones.
    pub fn from_options(options: &HashMap<String, String>) -> Result<Self> {
        ZarrTableOptions::default().with_options(options)
    }

    /// The defaults a session's `zarrow.*` settings give.
    pub fn from_config(config: &ZarrConfig) -> Result<Self> {
        Ok(Self::from_table_options(ZarrConfig::try_table_defaults(
            &config.values,
        )?))
    }

    /// These options with `options` (see [`Self::from_options`]) applied on top.
    pub fn with_options(self, options: &HashMap<String, String>) -> Result<Self> {
        let mut sorted: Vec<_> = options.iter().collect();
        sorted.sort();
        let mut table = self.to_table_options();
        let mut break_stale_lock = self.break_stale_lock;
        for (key, value) in sorted {
            let lower = key.to_ascii_lowercase();
            let bare = lower
                .strip_prefix("format.")
                .or_else(|| lower.strip_prefix("zarrow."))
                .unwrap_or(&lower);
            match option_key(bare).filter(|o| o.scope.table) {
                Some(o) if o.key == "break_stale_lock" => {
                    break_stale_lock = parse_bool(bare, value).map_err(to_datafusion_error)?
                }
                Some(_) => table.set(bare, value).map_err(to_datafusion_error)?,
                None => {
                    return Err(DataFusionError::Configuration(format!(
                        "unknown zarr table option '{key}'; expected one of {}",
                        table_keys()
                    )))
                }
            }
        }
        Ok(ZarrTableOptions {
            break_stale_lock,
            ..Self::from_table_options(table)
        })
    }

    /// The table options of the core crate's `table` (its read concurrency aside: scans set
    /// their own).
    fn from_table_options(table: TableOptions) -> Self {
        ZarrTableOptions {
            string_type: table.read.string_type,
            fill_as_null: table.fill_as_null,
            decode_cf: table.decode_cf,
            arrays: table.arrays,
            remote: table.remote,
            limits: table.read.limits,
            fetch: table.read.fetch,
            break_stale_lock: false,
        }
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

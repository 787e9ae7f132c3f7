//! Table options (`CREATE EXTERNAL TABLE … OPTIONS`, `register_zarr`) and the session
//! settings under `zarrow.` (`SET zarrow.string_type = 'view'`) that give their defaults.

use std::collections::{BTreeMap, HashMap};

use datafusion::common::config::{ConfigEntry, ConfigOptions, ExtensionOptions};
use datafusion::config::ConfigExtension;
use datafusion::error::{DataFusionError, Result};
use zarrow::options::keys::{option_key, parse_bool, table_keys, OPTION_KEYS};
use zarrow::table::TableOptions;
use zarrow::{FetchOptions, ReadLimits, StringType, ZarrReadOptions};

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

/// How a zarr node becomes a table: the core's [`TableOptions`] (every read option of
/// [`zarrow::options::OPTION_KEYS`], parsed by [`TableOptions::set`]), which this dereferences
/// to, and what only a DataFusion table has (`break_stale_lock`, for `INSERT INTO`).
/// Serializable: a table travels to a Ballista scheduler as its location and these.
///
/// ```
/// use zarrow::StringType;
/// use zarrow_datafusion::ZarrTableOptions;
///
/// let mut options = ZarrTableOptions::default().with_decode_cf(true);
/// options.set("format.string_type", "large_utf8")?;
/// options.set("max_chunk_bytes", "1048576")?;
/// // The core's options, as the core reads them.
/// assert_eq!(options.read.string_type, StringType::LargeUtf8);
/// assert_eq!(options.read.limits.max_chunk_bytes, 1 << 20);
/// assert!(options.decode_cf);
/// assert!(options.set("concurrency", "4").is_err()); // a session setting only
/// # Ok::<(), datafusion::error::DataFusionError>(())
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(default)]
pub struct ZarrTableOptions {
    /// The read options (string type, `fill_as_null`, `decode_cf`, `arrays`, the read limits,
    /// how chunk reads are split and merged, the remote store's timeouts). Their read
    /// concurrency is the default: scans take the session's `zarrow.concurrency`.
    pub table: TableOptions,
    /// `INSERT INTO` the table breaks another writer's stale lock (its process gone on this
    /// host, or older than an hour; docs/writing.md, "Write safety").
    pub break_stale_lock: bool,
}

impl std::ops::Deref for ZarrTableOptions {
    type Target = TableOptions;

    fn deref(&self) -> &TableOptions {
        &self.table
    }
}

impl std::ops::DerefMut for ZarrTableOptions {
    fn deref_mut(&mut self) -> &mut TableOptions {
        &mut self.table
    }
}

impl From<TableOptions> for ZarrTableOptions {
    fn from(table: TableOptions) -> Self {
        ZarrTableOptions {
            table,
            break_stale_lock: false,
        }
    }
}

impl ZarrTableOptions {
    /// Parse table options: the keys of [`zarrow::options::OPTION_KEYS`] a table takes
    /// (docs/options.md lists them). Keys may carry a `format.` or `zarrow.` prefix
    /// (DataFusion adds `format.` to unqualified keys); any other key is an error that lists
    /// the valid ones.
    pub fn from_options(options: &HashMap<String, String>) -> Result<Self> {
        ZarrTableOptions::default().with_options(options)
    }

    /// The defaults a session's `zarrow.*` settings give.
    pub fn from_config(config: &ZarrConfig) -> Result<Self> {
        let mut table = ZarrConfig::try_table_defaults(&config.values)?;
        // Scans take the session's concurrency when they run.
        table.read.concurrency = ZarrReadOptions::default().concurrency;
        Ok(table.into())
    }

    /// These options with `options` (see [`Self::from_options`]) applied on top, in the
    /// order of their keys.
    pub fn with_options(mut self, options: &HashMap<String, String>) -> Result<Self> {
        let mut sorted: Vec<_> = options.iter().collect();
        sorted.sort();
        for (key, value) in sorted {
            self.set(key, value)?;
        }
        Ok(self)
    }

    /// Set the table option `key` (see [`Self::from_options`]) from its text: a read option
    /// through the core's one parser, [`TableOptions::set`]; an error names the key.
    pub fn set(&mut self, key: &str, value: &str) -> Result<()> {
        let lower = key.to_ascii_lowercase();
        let bare = lower
            .strip_prefix("format.")
            .or_else(|| lower.strip_prefix("zarrow."))
            .unwrap_or(&lower);
        match option_key(bare).filter(|o| o.scope.table) {
            Some(o) if o.key == "break_stale_lock" => {
                self.break_stale_lock = parse_bool(bare, value).map_err(to_datafusion_error)?
            }
            Some(_) => self.table.set(bare, value).map_err(to_datafusion_error)?,
            None => {
                return Err(DataFusionError::Configuration(format!(
                    "unknown zarr table option '{key}'; expected one of {}",
                    table_keys()
                )))
            }
        }
        Ok(())
    }

    /// Set the string type.
    pub fn with_string_type(mut self, string_type: StringType) -> Self {
        self.table.read.string_type = string_type;
        self
    }

    /// Set `fill_as_null`.
    pub fn with_fill_as_null(mut self, on: bool) -> Self {
        self.table.fill_as_null = on;
        self
    }

    /// Set `decode_cf`.
    pub fn with_decode_cf(mut self, on: bool) -> Self {
        self.table.decode_cf = on;
        self
    }

    /// Set the read limits (see [`zarrow::ReadLimits`]).
    pub fn with_limits(mut self, limits: ReadLimits) -> Self {
        self.table.read.limits = limits;
        self
    }

    /// Set the arrays a group table is built from.
    pub fn with_arrays(mut self, arrays: impl IntoIterator<Item = impl Into<String>>) -> Self {
        self.table.arrays = Some(arrays.into_iter().map(Into::into).collect());
        self
    }

    /// The core crate's table options (a copy of [`Self::table`]).
    pub fn to_table_options(&self) -> TableOptions {
        self.table.clone()
    }

    /// The Arrow type of strings: `self.read.string_type`.
    #[deprecated(
        since = "0.1.0",
        note = "the field moved: use `options.read.string_type`"
    )]
    pub fn string_type(&self) -> StringType {
        self.table.read.string_type
    }

    /// The read limits: `self.read.limits`.
    #[deprecated(since = "0.1.0", note = "the field moved: use `options.read.limits`")]
    pub fn limits(&self) -> ReadLimits {
        self.table.read.limits
    }

    /// How chunk reads are split and merged: `self.read.fetch`.
    #[deprecated(since = "0.1.0", note = "the field moved: use `options.read.fetch`")]
    pub fn fetch(&self) -> FetchOptions {
        self.table.read.fetch
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
        assert_eq!(o.read.string_type, StringType::LargeUtf8);
        assert_eq!(
            o.arrays,
            Some(vec!["temperature".to_string(), "flag".to_string()])
        );
        assert_eq!(o.read.fetch, FetchOptions::default());
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

    /// The table options are the core's `TableOptions`, set by its parser: a table holds
    /// exactly what `TableOptions::set` makes of the same keys, and a session's settings
    /// give the same defaults (less the concurrency, which scans take from the session).
    #[test]
    fn table_options_are_the_core_options() {
        let pairs = [
            ("string_type", "large_utf8"),
            ("decode_cf", "on"),
            ("arrays", "a, b"),
            ("dictionary", "a"),
            ("max_item_bytes", "1024"),
            ("coalesce_bytes", "0"),
            ("timeout", "2s"),
            ("ref", "v1"),
        ];
        let mut core = TableOptions::default();
        let mut table = ZarrTableOptions::default();
        let mut config = ZarrConfig::default();
        for (key, value) in pairs {
            core.set(key, value).unwrap();
            table.set(&format!("zarrow.{key}"), value).unwrap();
            if !matches!(key, "arrays" | "dictionary" | "ref") {
                ExtensionOptions::set(&mut config, key, value).unwrap();
            }
        }
        assert_eq!(table.table, core);
        assert_eq!(table.to_table_options(), core);
        assert_eq!(table.read.limits.max_item_bytes, 1024);
        assert!(!table.break_stale_lock);
        table.set("format.break_stale_lock", "true").unwrap();
        assert!(table.break_stale_lock);
        // What a Ballista scheduler gets back is the same.
        let json = serde_json::to_string(&table).unwrap();
        assert_eq!(
            serde_json::from_str::<ZarrTableOptions>(&json).unwrap(),
            table
        );

        ExtensionOptions::set(&mut config, "concurrency", "4").unwrap();
        let defaults = ZarrTableOptions::from_config(&config).unwrap();
        assert_eq!(config.concurrency(), 4);
        assert_eq!(defaults.read, core.read);
        assert_eq!(defaults.remote.timeout, core.remote.timeout);
        // A session-only setting is not a table option; the error lists the table's keys.
        let err = table.set("concurrency", "4").unwrap_err().to_string();
        assert!(
            err.contains("unknown zarr table option 'concurrency'"),
            "{err}"
        );
    }
}

//! Keyword options of the Python API → zarrow's table options and store options.
//!
//! This is one of zarrow's two edges (the CLI is the other) where the environment is read:
//! the read limits (`ZARROW_MAX_ITEM_BYTES`, `ZARROW_MAX_CHUNK_BYTES`,
//! `ZARROW_MAX_METADATA_BYTES`) and remote timeouts (`ZARROW_TIMEOUT`, …) become fields of the
//! options, which travel with every scan.

use std::collections::HashMap;

use pyo3::prelude::*;
use zarrow::options::keys::{PythonArg, OPTION_KEYS};
use zarrow::table::TableOptions;
use zarrow::{ReadLimits, RemoteOptions, ZarrReadOptions, ZarrStore};

use crate::errors::{to_py, ZarrowError};

/// The names of the table options every reading function takes: the keys of
/// [`zarrow::options::OPTION_KEYS`] Python takes as keywords, and `storage_options`.
pub(crate) fn table_options() -> Vec<&'static str> {
    OPTION_KEYS
        .iter()
        .filter(|o| o.scope.python == PythonArg::Keyword)
        .map(|o| o.key)
        .chain(["storage_options"])
        .collect()
}

/// The table options every reading function takes: the read options given as keywords, as
/// text by key (the core's one parser, [`TableOptions::set`], reads them), and
/// `storage_options`.
#[derive(Debug, Clone, Default)]
pub(crate) struct TableKwargs {
    /// The read options given, in the order given: `(key, value)`.
    options: Vec<(&'static str, String)>,
    storage_options: Option<HashMap<String, String>>,
}

/// A keyword's value as the text [`TableOptions::set`] parses.
pub(crate) trait KeywordValue {
    /// The text; an error says what the keyword `key` cannot take.
    fn text(self, key: &str) -> PyResult<String>;
}

impl KeywordValue for String {
    fn text(self, _key: &str) -> PyResult<String> {
        Ok(self)
    }
}

impl KeywordValue for bool {
    fn text(self, _key: &str) -> PyResult<String> {
        Ok(self.to_string())
    }
}

impl KeywordValue for u64 {
    fn text(self, _key: &str) -> PyResult<String> {
        Ok(self.to_string())
    }
}

/// What the names of list option `key` name (`arrays`: arrays; `dictionary`: columns), with
/// and without its article.
fn what(key: &str) -> (&'static str, &'static str) {
    match key {
        "arrays" => ("array", "an array"),
        _ => ("column", "a column"),
    }
}

/// Names, as the comma-separated list the parser splits.
impl KeywordValue for Vec<String> {
    fn text(self, key: &str) -> PyResult<String> {
        if self.is_empty() {
            return Err(ZarrowError::new_err(format!(
                "`{key}` names no {}",
                what(key).0
            )));
        }
        if let Some(name) = self.iter().find(|n| n.contains(',') || n.trim().is_empty()) {
            return Err(ZarrowError::new_err(format!(
                "`{key}`: '{name}' is not {} name (blank, or with a comma)",
                what(key).1
            )));
        }
        Ok(self.join(","))
    }
}

impl TableKwargs {
    /// No read option given yet; `storage_options` for the store.
    pub(crate) fn new(storage_options: Option<HashMap<String, String>>) -> Self {
        TableKwargs {
            options: Vec::new(),
            storage_options,
        }
    }

    /// The keywords of every reading function (`scan`, `ZarrTable`), in one place.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn reading(
        storage_options: Option<HashMap<String, String>>,
        string_type: Option<String>,
        fill_as_null: Option<bool>,
        decode_cf: Option<bool>,
        arrays: Option<Vec<String>>,
        dictionary: Option<Vec<String>>,
        reference: Option<String>,
        range_split_bytes: Option<u64>,
        coalesce_bytes: Option<u64>,
    ) -> PyResult<Self> {
        TableKwargs::new(storage_options)
            .with("string_type", string_type)?
            .with("fill_as_null", fill_as_null)?
            .with("decode_cf", decode_cf)?
            .with("arrays", arrays)?
            .with("dictionary", dictionary)?
            .with("ref", reference)?
            .with("range_split_bytes", range_split_bytes)?
            .with("coalesce_bytes", coalesce_bytes)
    }

    /// With the read option `key` (a key of [`OPTION_KEYS`]) when its keyword was given.
    fn with(mut self, key: &'static str, value: Option<impl KeywordValue>) -> PyResult<Self> {
        if let Some(value) = value {
            self.options.push((key, value.text(key)?));
        }
        Ok(self)
    }

    /// The core's table options: the read limits and remote settings of the environment, the
    /// keywords given over them.
    pub(crate) fn table_options(&self) -> PyResult<TableOptions> {
        let mut options = TableOptions {
            read: ZarrReadOptions::default().with_limits(env_limits()?),
            remote: env_remote()?,
            ..Default::default()
        };
        for (key, value) in &self.options {
            options.set(key, value).map_err(to_py)?;
        }
        Ok(options)
    }

    /// The store at `location`, with the storage options (credentials, endpoints) given,
    /// over those of the environment, and the table options' read limits and remote settings
    /// (`ref` among them).
    pub(crate) fn store(&self, location: &str) -> PyResult<ZarrStore> {
        if let Some(given) = &self.storage_options {
            crate::usage::check_storage_options(location, given)?;
        }
        let options = self.table_options()?;
        let pairs = self
            .storage_options
            .as_ref()
            .map(storage_pairs)
            .unwrap_or_default();
        Ok(
            ZarrStore::open_configured(location, &pairs, &options.remote)
                .map_err(to_py)?
                .with_limits(options.read.limits),
        )
    }
}

/// The read limits the environment sets (`ZARROW_MAX_*`), else the defaults.
pub(crate) fn env_limits() -> PyResult<ReadLimits> {
    ReadLimits::from_env().map_err(to_py)
}

/// The remote timeouts and retries the environment sets (`ZARROW_TIMEOUT`, …), else none.
fn env_remote() -> PyResult<RemoteOptions> {
    RemoteOptions::from_env().map_err(to_py)
}

/// Storage options as `object_store` keys and values, sorted.
pub(crate) fn storage_pairs(options: &HashMap<String, String>) -> Vec<(String, String)> {
    let mut pairs: Vec<(String, String)> = options
        .iter()
        .map(|(k, v)| (storage_key(k), v.clone()))
        .collect();
    pairs.sort();
    pairs
}

/// fsspec / s3fs spellings of the common keys as `object_store` names them; other keys pass
/// through as they are (`aws_access_key_id`, `endpoint_url`, `region`, …).
fn storage_key(key: &str) -> String {
    match key {
        "key" => "aws_access_key_id",
        "secret" => "aws_secret_access_key",
        "token" => "aws_session_token",
        "anon" => "aws_skip_signature",
        "client_kwargs.endpoint_url" | "endpoint" => "aws_endpoint",
        other => other,
    }
    .to_string()
}

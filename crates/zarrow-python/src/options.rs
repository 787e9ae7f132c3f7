//! Keyword options of the Python API → zarrow's table options and store options.
//!
//! This is one of zarrow's two edges (the CLI is the other) where the environment is read:
//! the read limits (`ZARROW_MAX_ITEM_BYTES`, `ZARROW_MAX_CHUNK_BYTES`,
//! `ZARROW_MAX_METADATA_BYTES`) and remote timeouts (`ZARROW_TIMEOUT`, …) become fields of the
//! options, which travel with every scan.

use std::collections::HashMap;

use pyo3::prelude::*;
use zarrow::options::keys::{PythonArg, OPTION_KEYS};
use zarrow::{ReadLimits, RemoteOptions, StringType, ZarrStore};
use zarrow_datafusion::ZarrTableOptions;

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

/// The table options every reading function takes.
#[derive(Debug, Clone, Default)]
pub(crate) struct TableKwargs {
    pub string_type: Option<String>,
    pub fill_as_null: Option<bool>,
    pub decode_cf: Option<bool>,
    pub arrays: Option<Vec<String>>,
    pub storage_options: Option<HashMap<String, String>>,
    /// An Icechunk repository's version (branch, tag or snapshot id).
    pub reference: Option<String>,
    /// Reads of more bytes are split into ranged GETs of at most this many (0: never).
    pub range_split_bytes: Option<u64>,
    /// Ranges of one object at most this many bytes apart are read by one GET.
    pub coalesce_bytes: Option<u64>,
}

impl TableKwargs {
    /// As zarrow-datafusion's table options, with the read limits of the environment.
    pub(crate) fn table_options(&self) -> PyResult<ZarrTableOptions> {
        let mut options = ZarrTableOptions::default().with_limits(env_limits()?);
        options.remote = env_remote()?;
        if let Some(t) = &self.string_type {
            options = options.with_string_type(StringType::parse(t).map_err(to_py)?);
        }
        if let Some(on) = self.fill_as_null {
            options = options.with_fill_as_null(on);
        }
        if let Some(on) = self.decode_cf {
            options = options.with_decode_cf(on);
        }
        if let Some(arrays) = &self.arrays {
            if arrays.is_empty() {
                return Err(ZarrowError::new_err("`arrays` names no array"));
            }
            options = options.with_arrays(arrays.iter().cloned());
        }
        if let Some(bytes) = self.range_split_bytes {
            options.fetch.range_split_bytes = bytes;
        }
        if let Some(bytes) = self.coalesce_bytes {
            options.fetch.coalesce_bytes = bytes;
        }
        Ok(options)
    }

    /// The store at `location`, with the storage options (credentials, endpoints) given,
    /// over those of the environment, and the read limits of the environment.
    pub(crate) fn store(&self, location: &str) -> PyResult<ZarrStore> {
        if let Some(given) = &self.storage_options {
            crate::usage::check_storage_options(location, given)?;
        }
        let mut options = self
            .storage_options
            .as_ref()
            .map(storage_pairs)
            .unwrap_or_default();
        if let Some(reference) = &self.reference {
            options.push(("ref".into(), reference.clone()));
        }
        Ok(
            ZarrStore::open_configured(location, &options, &env_remote()?)
                .map_err(to_py)?
                .with_limits(env_limits()?),
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

//! Mistakes in how the API is called, each one clear message raised as a zarrow exception:
//! a column the table does not have (`ColumnNotFoundError`, also a `KeyError`, the close
//! names suggested), an option or `storage_options` key zarrow does not know (`OptionError`,
//! also a `ValueError`, the valid ones listed), a group that is no table (`NotATableError`,
//! its children listed), a directory without zarr metadata (`NotFoundError`, what it holds).

use std::collections::HashMap;

use pyo3::prelude::*;
use pyo3::types::PyDict;
use zarrow::options::keys::{PythonArg, OPTION_KEYS};
use zarrow::{Node, ZarrStore};

use crate::errors::{
    close_names, did_you_mean, raise, NotFoundError, ZarrowError, NOT_A_TABLE, OPTION_ERROR,
};

/// `OptionError` for keyword arguments `function` does not take.
pub(crate) fn check_no_unknown(
    function: &str,
    unknown: Option<&Bound<'_, PyDict>>,
    valid: &[&str],
) -> PyResult<()> {
    let Some(unknown) = unknown else {
        return Ok(());
    };
    let Some((key, _)) = unknown.iter().next() else {
        return Ok(());
    };
    let key = key.str()?.to_string();
    Err(raise(
        &OPTION_ERROR,
        format!(
            "{function}() has no option '{key}'.{} Its options: {}",
            did_you_mean(&close_names(&key, valid.iter().copied())),
            valid.join(", ")
        ),
    ))
}

/// zarrow's own storage options (timeouts, retries, …: those of
/// [`zarrow::options::OPTION_KEYS`] Python takes in `storage_options`) and fsspec's
/// spellings (see `options::storage_key`).
fn zarrow_keys() -> Vec<&'static str> {
    OPTION_KEYS
        .iter()
        .filter(|o| o.scope.python == PythonArg::StorageOption)
        .map(|o| o.key)
        .chain(FSSPEC_KEYS.iter().copied())
        .collect()
}

/// fsspec's spellings of the common keys, then the keys of every store `object_store` builds,
/// by provider (their canonical names; `object_store` also takes the aliases its parsers
/// know).
const FSSPEC_KEYS: &[&str] = &[
    "key",
    "secret",
    "token",
    "anon",
    "endpoint",
    "endpoint_url",
    "client_kwargs.endpoint_url",
    "region",
];
const CLIENT_KEYS: &[&str] = &[
    "allow_http",
    "allow_invalid_certificates",
    "default_content_type",
    "pool_idle_timeout",
    "pool_max_idle_per_host",
    "proxy_url",
    "proxy_ca_certificate",
    "proxy_excludes",
    "randomize_addresses",
    "user_agent",
];
const S3_KEYS: &[&str] = &[
    "aws_access_key_id",
    "aws_secret_access_key",
    "aws_session_token",
    "aws_region",
    "aws_default_region",
    "aws_bucket",
    "aws_endpoint",
    "aws_endpoint_url",
    "aws_virtual_hosted_style_request",
    "aws_skip_signature",
    "aws_unsigned_payload",
    "aws_checksum_algorithm",
    "aws_metadata_endpoint",
    "aws_role_arn",
    "aws_role_session_name",
    "aws_web_identity_token_file",
    "aws_request_payer",
];
const GCS_KEYS: &[&str] = &[
    "google_service_account",
    "google_service_account_key",
    "google_application_credentials",
    "google_bucket",
    "google_base_url",
    "google_skip_signature",
];
const AZURE_KEYS: &[&str] = &[
    "azure_storage_account_name",
    "azure_storage_account_key",
    "azure_storage_client_id",
    "azure_storage_client_secret",
    "azure_storage_tenant_id",
    "azure_storage_sas_key",
    "azure_storage_token",
    "azure_storage_endpoint",
    "azure_storage_use_emulator",
    "azure_use_azure_cli",
    "azure_skip_signature",
    "azure_container_name",
];

/// Whether `object_store` (or zarrow) takes `key` for some store.
fn known_storage_key(key: &str) -> bool {
    use object_store::aws::AmazonS3ConfigKey;
    use object_store::azure::AzureConfigKey;
    use object_store::gcp::GoogleConfigKey;
    use object_store::ClientConfigKey;
    let lower = key.to_ascii_lowercase();
    zarrow_keys().contains(&lower.as_str())
        || lower.parse::<AmazonS3ConfigKey>().is_ok()
        || lower.parse::<GoogleConfigKey>().is_ok()
        || lower.parse::<AzureConfigKey>().is_ok()
        || lower.parse::<ClientConfigKey>().is_ok()
}

/// `OptionError` for a `storage_options` key no store takes, listing the keys of the
/// location's store.
pub(crate) fn check_storage_options(
    location: &str,
    options: &HashMap<String, String>,
) -> PyResult<()> {
    let mut keys: Vec<&String> = options.keys().collect();
    keys.sort();
    let Some(bad) = keys.into_iter().find(|k| !known_storage_key(k)) else {
        return Ok(());
    };
    let scheme = location.split_once("://").map(|(s, _)| s).unwrap_or("");
    let scheme = scheme
        .strip_prefix(zarrow::ICECHUNK_PREFIX)
        .unwrap_or(scheme);
    let provider: &[&str] = match scheme {
        "s3" | "s3a" => S3_KEYS,
        "gs" | "gcs" => GCS_KEYS,
        "az" | "abfs" | "abfss" | "azure" => AZURE_KEYS,
        _ => &[],
    };
    let mut valid: Vec<&str> = provider.to_vec();
    if provider.is_empty() {
        for list in [S3_KEYS, GCS_KEYS, AZURE_KEYS] {
            valid.extend_from_slice(list);
        }
    }
    valid.extend_from_slice(CLIENT_KEYS);
    valid.extend(zarrow_keys());
    Err(raise(
        &OPTION_ERROR,
        format!(
            "storage_options key '{bad}' is not one any store takes.{} Valid keys{}: {}",
            did_you_mean(&close_names(bad, valid.iter().copied())),
            if provider.is_empty() {
                String::new()
            } else {
                format!(" for {scheme}://")
            },
            valid.join(", ")
        ),
    ))
}

/// `err` (from opening the table at `location`) with what a user needs to act on it: a group
/// that is no table lists its children; a local directory without zarr metadata lists what
/// it holds.
pub(crate) fn explain_open_error(
    py: Python<'_>,
    location: &str,
    store: &ZarrStore,
    err: PyErr,
) -> PyErr {
    // Only a plain ZarrowError (what the table model raises for a group it cannot lay out).
    if err.get_type(py).is(py.get_type::<ZarrowError>()) {
        let children = crate::runtime::block_on(py, async {
            match Node::open_store(store.clone(), "").await? {
                Node::Group(group) => group.children().await,
                Node::Array(_) => Ok(Vec::new()),
            }
        });
        if let Ok(Ok(children)) = children {
            let names: Vec<String> = children
                .iter()
                .map(|(name, child)| match child {
                    Ok(Node::Group(_)) => format!("{name}/"),
                    _ => name.clone(),
                })
                .collect();
            if !names.is_empty() && names.iter().all(|n| n.ends_with('/')) {
                let base = location.trim_end_matches('/');
                return raise(
                    &NOT_A_TABLE,
                    format!(
                        "'{location}' is a group of groups, not a table: read one of its \
                         children ({}), e.g. '{base}/{}'",
                        names.join(", "),
                        names[0].trim_end_matches('/')
                    ),
                );
            }
        }
    }
    if err.is_instance_of::<NotFoundError>(py) {
        let path = std::path::Path::new(location);
        if !location.contains("://") && path.is_dir() {
            let mut held: Vec<String> = std::fs::read_dir(path)
                .map(|entries| {
                    entries
                        .flatten()
                        .take(20)
                        .map(|e| {
                            let name = e.file_name().to_string_lossy().into_owned();
                            match e.file_type().is_ok_and(|t| t.is_dir()) {
                                true => format!("{name}/"),
                                false => name,
                            }
                        })
                        .collect()
                })
                .unwrap_or_default();
            held.sort();
            return NotFoundError::new_err(format!(
                "'{location}' is a directory but not a zarr array or group: it has no \
                 zarr.json (zarr v3) nor .zarray/.zgroup (zarr v2). It holds: {}",
                if held.is_empty() {
                    "nothing".to_string()
                } else {
                    held.join(", ")
                }
            ));
        }
    }
    err
}

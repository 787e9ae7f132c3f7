//! Where a repository lives, and its icechunk storage there: a local directory, or a bucket
//! (S3, Google Cloud Storage) or container (Azure Blob Storage) and a key prefix in it, each
//! opened with the store options `object_store` takes for that provider (the keys a plain
//! `s3://`, `gs://` or `az://` store takes), the environment filling in the rest.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

use icechunk::Storage;

use super::{icechunk_failed, RepositoryErrorKind};
use crate::remote::is_provider_variable;

/// A cloud object store a repository can live in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Cloud {
    /// Amazon S3 or an S3-compatible store (`icechunk+s3://bucket/prefix`).
    S3,
    /// Google Cloud Storage (`icechunk+gs://bucket/prefix`).
    Gcs,
    /// Azure Blob Storage (`icechunk+az://container/prefix`, the account from the options).
    Azure,
}

impl Cloud {
    /// The cloud of a location's scheme (after `icechunk+`): those of `object_store`'s URLs
    /// whose bucket or container is the URL's host.
    pub(super) fn from_scheme(scheme: &str) -> Option<Self> {
        match scheme {
            "s3" => Some(Cloud::S3),
            "gs" => Some(Cloud::Gcs),
            "az" | "azure" => Some(Cloud::Azure),
            _ => None,
        }
    }

    /// The scheme of the plain store over the same bucket (`s3`, `gs`, `az`).
    pub(super) fn scheme(self) -> &'static str {
        match self {
            Cloud::S3 => "s3",
            Cloud::Gcs => "gs",
            Cloud::Azure => "az",
        }
    }
}

/// The schemes a repository location may have, for messages.
pub(super) const SCHEMES: &str =
    "icechunk+file://, icechunk+s3://, icechunk+gs:// and icechunk+az://";

/// Where a repository lives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Backend {
    /// A local directory (the path up to the node, when the root is still to be found).
    File(PathBuf),
    /// A bucket or container in a cloud store, and the key prefix in it.
    Cloud {
        /// Which store.
        cloud: Cloud,
        /// The bucket (S3, GCS) or container (Azure).
        bucket: String,
        /// The key prefix (no leading or trailing `/`).
        prefix: String,
    },
}

impl Backend {
    /// The repository's storage, opened with the store options `o`.
    pub(super) async fn storage(
        &self,
        o: &[(String, String)],
    ) -> Result<Arc<dyn Storage + Send + Sync>, RepositoryErrorKind> {
        let storage = match self {
            Backend::File(path) => icechunk::new_local_filesystem_storage(path).await,
            Backend::Cloud {
                cloud,
                bucket,
                prefix,
            } => {
                let bucket = bucket.clone();
                let prefix = (!prefix.is_empty()).then(|| prefix.clone());
                match cloud {
                    Cloud::S3 => s3_storage(o, bucket, prefix).await,
                    Cloud::Gcs => gcs_storage(o, bucket, prefix),
                    Cloud::Azure => azure_storage(o, bucket, prefix).await?,
                }
            }
        };
        storage.map_err(|e| icechunk_failed("opening the storage", e.kind()))
    }

    /// The URL of the plain store at the repository's root (`s3://bucket/prefix`, …);
    /// `None` for a local directory.
    pub(super) fn cloud_url(&self) -> Option<String> {
        match self {
            Backend::File(_) => None,
            Backend::Cloud {
                cloud,
                bucket,
                prefix,
            } => Some(format!("{}://{bucket}/{prefix}", cloud.scheme())),
        }
    }
}

type StorageResult = icechunk::storage::StorageResult<Arc<dyn Storage + Send + Sync>>;

/// The process's environment, as [`option_in`] reads it.
fn process_env(name: &str) -> Option<String> {
    std::env::var(name).ok()
}

/// The first of `keys` among the options (any case), else in the process's environment.
fn option(options: &[(String, String)], keys: &[&str]) -> Option<String> {
    option_in(options, keys, process_env)
}

/// The first of `keys` among the options (any case), else, for a provider's key (see
/// [`is_provider_variable`]), the variable of its upper-case name in `env`.
fn option_in(
    options: &[(String, String)],
    keys: &[&str],
    env: impl Fn(&str) -> Option<String>,
) -> Option<String> {
    keys.iter().find_map(|k| {
        options
            .iter()
            .find(|(key, _)| key.eq_ignore_ascii_case(k))
            .map(|(_, v)| v.clone())
            .or_else(|| {
                let name = k.to_ascii_uppercase();
                is_provider_variable(&name).then(|| env(&name)).flatten()
            })
    })
}

/// Whether one of `keys` is set to true (options, then the environment): `true`, `1`, `yes`
/// or `on` in any case, as `object_store` reads its own boolean options.
fn enabled(options: &[(String, String)], keys: &[&str]) -> bool {
    enabled_in(options, keys, process_env)
}

/// [`enabled`] with the environment `env`.
fn enabled_in(
    options: &[(String, String)],
    keys: &[&str],
    env: impl Fn(&str) -> Option<String>,
) -> bool {
    option_in(options, keys, env)
        .is_some_and(|v| crate::options::parse_bool("", &v).is_ok_and(|yes| yes))
}

/// The options as icechunk passes them on to `object_store`'s builder of the provider (it
/// keeps the keys that builder knows, client options such as `allow_http` among them).
fn config(options: &[(String, String)]) -> HashMap<String, String> {
    options
        .iter()
        .map(|(k, v)| (k.to_ascii_lowercase(), v.clone()))
        .collect()
}

async fn s3_storage(
    o: &[(String, String)],
    bucket: String,
    prefix: Option<String>,
) -> StorageResult {
    use icechunk::config::{S3Credentials, S3Options, S3StaticCredentials};
    let mut s3 = S3Options::default();
    if let Some(region) = option(o, &["aws_region", "aws_default_region", "region"]) {
        s3 = s3.with_region(region);
    }
    if let Some(endpoint) = option(o, &["aws_endpoint", "aws_endpoint_url", "endpoint_url"]) {
        s3 = s3.with_endpoint_url(endpoint).with_force_path_style(true);
    }
    if enabled(o, &["aws_allow_http", "allow_http"]) {
        s3 = s3.with_allow_http(true);
    }
    let credentials = match (
        option(o, &["aws_access_key_id"]),
        option(o, &["aws_secret_access_key"]),
    ) {
        (Some(access_key_id), Some(secret_access_key)) => {
            S3Credentials::Static(S3StaticCredentials {
                access_key_id,
                secret_access_key,
                session_token: option(o, &["aws_session_token"]),
                expires_after: None,
            })
        }
        _ if enabled(o, &["aws_skip_signature"]) => S3Credentials::Anonymous,
        _ => S3Credentials::FromEnv,
    };
    icechunk::new_s3_object_store_storage(
        s3,
        bucket,
        prefix,
        Some(credentials),
        Vec::new(),
        Vec::new(),
    )
    .await
}

/// Google Cloud Storage: the environment (`GOOGLE_*`), then the options over it
/// (`google_service_account`, `google_service_account_key`, `google_application_credentials`,
/// `google_skip_signature`, `google_base_url`, `allow_http`, …), as a plain `gs://` store.
fn gcs_storage(o: &[(String, String)], bucket: String, prefix: Option<String>) -> StorageResult {
    // `FromEnv` starts from the environment; icechunk's other credentials start from nothing
    // (its `Anonymous` would drop `GOOGLE_BASE_URL`), and the options carry them all anyway.
    icechunk::storage::new_gcs_storage(
        bucket,
        prefix,
        Some(icechunk::storage::GcsCredentials::FromEnv),
        Some(config(o)),
        Vec::new(),
        Vec::new(),
    )
}

/// Azure Blob Storage: the account from `azure_storage_account_name` (or
/// `AZURE_STORAGE_ACCOUNT_NAME`; the emulator's own account under
/// `azure_storage_use_emulator`), the environment (`AZURE_*`), then the options over it
/// (`azure_storage_account_key`, `azure_storage_sas_key`, `azure_storage_endpoint`,
/// `azure_skip_signature`, …), as a plain `az://` store.
async fn azure_storage(
    o: &[(String, String)],
    container: String,
    prefix: Option<String>,
) -> Result<StorageResult, RepositoryErrorKind> {
    use icechunk::storage::AzureCredentials;
    let account = azure_account(o, process_env)?;
    Ok(icechunk::storage::new_azure_blob_storage(
        account,
        container,
        prefix,
        Some(AzureCredentials::FromEnv),
        Some(config(o)),
    )
    .await)
}

/// The storage account of an Azure repository: the option (or `AZURE_STORAGE_ACCOUNT_NAME`
/// in `env`), else the emulator's own under `azure_storage_use_emulator`; else an error naming
/// the option.
fn azure_account(
    o: &[(String, String)],
    env: impl Fn(&str) -> Option<String> + Copy,
) -> Result<String, RepositoryErrorKind> {
    let emulator = enabled_in(
        o,
        &[
            "azure_storage_use_emulator",
            "use_emulator",
            "object_store_use_emulator",
        ],
        env,
    );
    option_in(o, &["azure_storage_account_name", "account_name"], env)
        .or_else(|| emulator.then(|| "devstoreaccount1".to_string()))
        .ok_or_else(|| {
            icechunk_failed(
                "opening the storage",
                "an Azure repository needs its storage account: the option \
                 azure_storage_account_name (or AZURE_STORAGE_ACCOUNT_NAME)",
            )
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clouds_by_scheme() {
        for (scheme, cloud) in [
            ("s3", Cloud::S3),
            ("gs", Cloud::Gcs),
            ("az", Cloud::Azure),
            ("azure", Cloud::Azure),
        ] {
            assert_eq!(Cloud::from_scheme(scheme), Some(cloud));
        }
        // not object_store's URL schemes, or ones whose host is not the container
        for scheme in ["gcs", "abfs", "http", "file", "S3"] {
            assert_eq!(Cloud::from_scheme(scheme), None, "{scheme}");
        }
        let b = Backend::Cloud {
            cloud: Cloud::Azure,
            bucket: "c".into(),
            prefix: "p/r.icechunk".into(),
        };
        assert_eq!(b.cloud_url().as_deref(), Some("az://c/p/r.icechunk"));
    }

    /// Without an account an Azure repository is an error naming the option; the emulator
    /// has its own account; the environment gives one only under a provider's name.
    #[test]
    fn an_azure_repository_needs_an_account() {
        let none = |_: &str| None;
        let opt = |k: &str, v: &str| vec![(k.to_string(), v.to_string())];
        let err = azure_account(&[], none).expect_err("no account is an error");
        assert!(
            err.to_string().contains("azure_storage_account_name"),
            "{err}"
        );
        for yes in ["true", "TRUE", "True", "1", "yes", "on"] {
            let emulator = opt("azure_storage_use_emulator", yes);
            assert_eq!(azure_account(&emulator, none).unwrap(), "devstoreaccount1");
        }
        let not = opt("azure_storage_use_emulator", "false");
        assert!(azure_account(&not, none).is_err());
        let named = opt("azure_storage_account_name", "acct");
        assert_eq!(azure_account(&named, none).unwrap(), "acct");
        let env = |k: &str| (k == "AZURE_STORAGE_ACCOUNT_NAME").then(|| "from-env".to_string());
        assert_eq!(azure_account(&[], env).unwrap(), "from-env");
        // A bare name is never read from the environment.
        let bare = |k: &str| (k == "ACCOUNT_NAME" || k == "REGION").then(|| "x".to_string());
        assert!(azure_account(&[], bare).is_err());
        assert_eq!(option_in(&[], &["region"], bare), None);
        assert_eq!(
            option_in(&opt("REGION", "r"), &["region"], none).as_deref(),
            Some("r")
        );
    }
}

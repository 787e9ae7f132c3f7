//! What is wrong with a codec's configuration ([`ConfigError`]): one key, knowing nothing of
//! the codec or the array. It sits with the errors, below the codecs that raise it
//! (`codec/config.rs` reads configurations) and the [`super::Error`] that carries it.

/// What is wrong with a codec's configuration.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// The configuration is not a JSON object.
    #[error("configuration must be a JSON object, got {found}")]
    NotAnObject {
        /// The configuration as written.
        found: String,
    },
    /// A key the codec does not take (an unknown key may change the meaning).
    #[error("unexpected configuration key '{key}' ({})", known_keys(known))]
    UnknownKey {
        /// The key.
        key: String,
        /// The keys the codec takes.
        known: Vec<String>,
    },
    /// A key the codec needs is absent.
    #[error("configuration '{key}' missing")]
    MissingKey {
        /// The key.
        key: String,
    },
    /// A value of the wrong type, or out of range.
    #[error("{key} must be {expected}, got {value}")]
    BadValue {
        /// The key.
        key: String,
        /// The value as written (JSON).
        value: String,
        /// What it must be.
        expected: String,
    },
    /// A numpy dtype (of a numcodecs filter) that is malformed or not one the filter reads.
    #[error("{key} '{dtype}': {reason}")]
    BadDtype {
        /// The key.
        key: String,
        /// The dtype as written.
        dtype: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A valid configuration zarrow does not read (a compressor it is built without, a raw
    /// stream format, a filter for another data type).
    #[error("{reason}")]
    Unsupported {
        /// The key whose value is not supported, when one is to blame.
        key: Option<String>,
        /// Why it is not read.
        reason: String,
    },
}

fn known_keys(known: &[String]) -> String {
    if known.is_empty() {
        "takes none".to_string()
    } else {
        format!("known: {}", known.join(", "))
    }
}

impl ConfigError {
    /// The configuration key the error is about, when there is one.
    pub fn key(&self) -> Option<&str> {
        match self {
            ConfigError::NotAnObject { .. } => None,
            ConfigError::UnknownKey { key, .. }
            | ConfigError::MissingKey { key }
            | ConfigError::BadValue { key, .. }
            | ConfigError::BadDtype { key, .. } => Some(key),
            ConfigError::Unsupported { key, .. } => key.as_deref(),
        }
    }

    /// Whether the configuration is valid but not one zarrow reads (rather than malformed).
    pub fn is_unsupported(&self) -> bool {
        matches!(self, ConfigError::Unsupported { .. })
    }

    /// A value that is not what `key` takes.
    pub(crate) fn bad_value(
        key: &str,
        value: impl std::fmt::Display,
        expected: impl Into<String>,
    ) -> Self {
        ConfigError::BadValue {
            key: key.to_string(),
            value: value.to_string(),
            expected: expected.into(),
        }
    }

    /// A required key that is absent.
    pub(crate) fn missing(key: &str) -> Self {
        ConfigError::MissingKey {
            key: key.to_string(),
        }
    }

    /// A value of `key` (or a configuration, without one) zarrow does not read.
    pub(crate) fn unsupported(key: Option<&str>, reason: impl Into<String>) -> Self {
        ConfigError::Unsupported {
            key: key.map(str::to_string),
            reason: reason.into(),
        }
    }
}

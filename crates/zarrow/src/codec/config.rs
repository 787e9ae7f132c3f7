//! The configuration object of a codec, read key by key with typed errors: unknown keys are
//! refused (they may change the meaning), `null` counts as absent.
//!
//! A [`ConfigError`] says what is wrong with one key and knows nothing of the codec or the
//! array: the chain parser adds the codec ([`super::ChainError::Config`]), the metadata parser
//! the array ([`crate::Error::CodecConfig`]).

use serde_json::{Map, Value};

pub use crate::error::ConfigError;

/// zlib's `Z_DEFAULT_COMPRESSION` (-1) means level 6.
pub(crate) const DEFLATE_DEFAULT_LEVEL: u32 = 6;

/// A configuration object, looked at key by key.
pub(crate) struct Config<'a> {
    pub(crate) map: Option<&'a Map<String, Value>>,
}

impl<'a> Config<'a> {
    pub(crate) fn from_value(configuration: Option<&'a Value>) -> Result<Self, ConfigError> {
        match configuration {
            None | Some(Value::Null) => Ok(Config { map: None }),
            Some(Value::Object(map)) => Ok(Config { map: Some(map) }),
            Some(other) => Err(ConfigError::NotAnObject {
                found: other.to_string(),
            }),
        }
    }

    /// Reject keys outside `allowed` (an unknown key may change the meaning).
    pub(crate) fn only(&self, allowed: &[&str]) -> Result<(), ConfigError> {
        if let Some(map) = self.map {
            if let Some(key) = map.keys().find(|k| !allowed.contains(&k.as_str())) {
                return Err(ConfigError::UnknownKey {
                    key: key.clone(),
                    known: allowed.iter().map(|k| k.to_string()).collect(),
                });
            }
        }
        Ok(())
    }

    /// A value; `null` counts as absent.
    pub(crate) fn get(&self, key: &str) -> Option<&'a Value> {
        self.map.and_then(|m| m.get(key)).filter(|v| !v.is_null())
    }

    pub(crate) fn int(&self, key: &str) -> Result<Option<i64>, ConfigError> {
        match self.get(key) {
            None => Ok(None),
            Some(v) => v
                .as_i64()
                .map(Some)
                .ok_or_else(|| ConfigError::bad_value(key, v, "an integer")),
        }
    }

    pub(crate) fn bool(&self, key: &str) -> Result<Option<bool>, ConfigError> {
        match self.get(key) {
            None => Ok(None),
            Some(v) => v
                .as_bool()
                .map(Some)
                .ok_or_else(|| ConfigError::bad_value(key, v, "true or false")),
        }
    }

    pub(crate) fn str(&self, key: &str) -> Result<Option<&'a str>, ConfigError> {
        match self.get(key) {
            None => Ok(None),
            Some(v) => v
                .as_str()
                .map(Some)
                .ok_or_else(|| ConfigError::bad_value(key, v, "a string")),
        }
    }

    /// A gzip/zlib level: 0–9, or -1 for zlib's default (6).
    pub(crate) fn deflate_level(&self, key: &str, default: u32) -> Result<u32, ConfigError> {
        match self.int(key)? {
            None => Ok(default),
            Some(-1) => Ok(DEFLATE_DEFAULT_LEVEL),
            Some(l @ 0..=9) => Ok(l as u32),
            Some(l) => Err(ConfigError::bad_value(key, l, "in 0..=9 (or -1)")),
        }
    }

    pub(crate) fn i32(&self, key: &str, default: i32) -> Result<i32, ConfigError> {
        match self.int(key)? {
            None => Ok(default),
            Some(l) => {
                i32::try_from(l).map_err(|_| ConfigError::bad_value(key, l, "a 32-bit integer"))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn errors_name_the_key_and_value() {
        let v = json!({"level": "high", "extra": 1});
        let c = Config::from_value(Some(&v)).unwrap();
        let e = c.only(&["level"]).unwrap_err();
        assert_eq!(e.key(), Some("extra"));
        assert_eq!(
            e.to_string(),
            "unexpected configuration key 'extra' (known: level)"
        );
        let e = c.int("level").unwrap_err();
        assert_eq!(
            e,
            ConfigError::BadValue {
                key: "level".into(),
                value: "\"high\"".into(),
                expected: "an integer".into()
            }
        );
        assert_eq!(e.to_string(), "level must be an integer, got \"high\"");
        let e = c.only(&[]).unwrap_err();
        assert!(e.to_string().ends_with("(takes none)"), "{e}");
        let e = Config::from_value(Some(&json!([5]))).err().unwrap();
        assert_eq!((e.key(), e.is_unsupported()), (None, false));
        let big = json!({"level": 1_u64 << 40});
        let e = Config::from_value(Some(&big)).unwrap().i32("level", 0);
        assert!(matches!(e, Err(ConfigError::BadValue { ref key, .. }) if key == "level"));
    }
}

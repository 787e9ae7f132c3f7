//! The configuration object of a codec, read key by key with typed errors: unknown keys are
//! refused (they may change the meaning), `null` counts as absent.

use serde_json::{Map, Value};

/// zlib's `Z_DEFAULT_COMPRESSION` (-1) means level 6.
pub(crate) const DEFLATE_DEFAULT_LEVEL: u32 = 6;

/// A configuration object, looked at key by key.
pub(crate) struct Config<'a> {
    pub(crate) map: Option<&'a Map<String, Value>>,
}

impl<'a> Config<'a> {
    pub(crate) fn from_value(configuration: Option<&'a Value>) -> Result<Self, String> {
        match configuration {
            None | Some(Value::Null) => Ok(Config { map: None }),
            Some(Value::Object(map)) => Ok(Config { map: Some(map) }),
            Some(other) => Err(format!("configuration must be a JSON object, got {other}")),
        }
    }

    /// Reject keys outside `allowed` (an unknown key may change the meaning).
    pub(crate) fn only(&self, allowed: &[&str]) -> Result<(), String> {
        if let Some(map) = self.map {
            if let Some(key) = map.keys().find(|k| !allowed.contains(&k.as_str())) {
                return Err(if allowed.is_empty() {
                    format!("unexpected configuration key '{key}' (takes none)")
                } else {
                    format!(
                        "unexpected configuration key '{key}' (known: {})",
                        allowed.join(", ")
                    )
                });
            }
        }
        Ok(())
    }

    /// A value; `null` counts as absent.
    pub(crate) fn get(&self, key: &str) -> Option<&'a Value> {
        self.map.and_then(|m| m.get(key)).filter(|v| !v.is_null())
    }

    pub(crate) fn int(&self, key: &str) -> Result<Option<i64>, String> {
        match self.get(key) {
            None => Ok(None),
            Some(v) => v
                .as_i64()
                .map(Some)
                .ok_or_else(|| format!("{key} must be an integer, got {v}")),
        }
    }

    pub(crate) fn bool(&self, key: &str) -> Result<Option<bool>, String> {
        match self.get(key) {
            None => Ok(None),
            Some(v) => v
                .as_bool()
                .map(Some)
                .ok_or_else(|| format!("{key} must be true or false, got {v}")),
        }
    }

    pub(crate) fn str(&self, key: &str) -> Result<Option<&'a str>, String> {
        match self.get(key) {
            None => Ok(None),
            Some(v) => v
                .as_str()
                .map(Some)
                .ok_or_else(|| format!("{key} must be a string, got {v}")),
        }
    }

    /// A gzip/zlib level: 0–9, or -1 for zlib's default (6).
    pub(crate) fn deflate_level(&self, key: &str, default: u32) -> Result<u32, String> {
        match self.int(key)? {
            None => Ok(default),
            Some(-1) => Ok(DEFLATE_DEFAULT_LEVEL),
            Some(l @ 0..=9) => Ok(l as u32),
            Some(l) => Err(format!("{key} must be in 0..=9, got {l}")),
        }
    }

    pub(crate) fn i32(&self, key: &str, default: i32) -> Result<i32, String> {
        match self.int(key)? {
            None => Ok(default),
            Some(l) => i32::try_from(l).map_err(|_| format!("{key} {l} is out of range")),
        }
    }
}

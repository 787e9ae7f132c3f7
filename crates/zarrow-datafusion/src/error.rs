//! Error glue between zarrow and DataFusion: two functions, nothing else.

use datafusion::error::DataFusionError;

/// A zarrow error as a DataFusion error (`DataFusionError::External`, so the original error
/// can be downcast back).
pub fn to_datafusion_error(e: zarrow::Error) -> DataFusionError {
    match e {
        // DataFusion's own kind, so callers (and datafusion-cli's users) see the usual
        // "Resources exhausted: …".
        zarrow::Error::ResourcesExhausted(m) => DataFusionError::ResourcesExhausted(m),
        e @ zarrow::Error::InvalidOption { .. } => DataFusionError::Configuration(e.to_string()),
        e => DataFusionError::External(Box::new(e)),
    }
}

/// A DataFusion error as a zarrow error: the zarrow error inside an `External`, else the
/// message as an invalid argument.
pub fn from_datafusion_error(e: DataFusionError) -> zarrow::Error {
    match e {
        DataFusionError::External(inner) => match inner.downcast::<zarrow::Error>() {
            Ok(z) => *z,
            Err(other) => zarrow::Error::InvalidArgument(other.to_string()),
        },
        DataFusionError::ArrowError(a, _) => zarrow::Error::Arrow(*a),
        DataFusionError::ResourcesExhausted(m) => zarrow::Error::ResourcesExhausted(m),
        other => zarrow::Error::InvalidArgument(other.to_string()),
    }
}

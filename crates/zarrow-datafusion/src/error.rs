//! Error glue between zarrow and DataFusion: two functions, nothing else. Each keeps the
//! other's kind: a zarrow error travels inside `DataFusionError::External` (and comes back
//! out of it), a DataFusion error inside `zarrow::Error::External` (and comes back as itself).

use datafusion::error::DataFusionError;

/// A zarrow error as a DataFusion error (`DataFusionError::External`, so the original error
/// can be downcast back).
pub fn to_datafusion_error(e: zarrow::Error) -> DataFusionError {
    match e {
        // DataFusion's own kind, so callers (and datafusion-cli's users) see the usual
        // "Resources exhausted: …".
        zarrow::Error::ResourcesExhausted(m) => DataFusionError::ResourcesExhausted(m),
        zarrow::Error::MemoryExhausted(e) => DataFusionError::ResourcesExhausted(e.to_string()),
        zarrow::Error::External(inner) => match inner.downcast::<DataFusionError>() {
            Ok(df) => *df,
            Err(other) => DataFusionError::External(other),
        },
        e @ zarrow::Error::InvalidOption { .. } => DataFusionError::Configuration(e.to_string()),
        e => DataFusionError::External(Box::new(e)),
    }
}

/// A DataFusion error as a zarrow error: the zarrow error inside an `External`, else the
/// DataFusion error kept whole in `zarrow::Error::External`,
/// which [`to_datafusion_error`] gives back as it was (its kind: `ResourcesExhausted`,
/// `Plan`, `Execution`, …).
pub fn from_datafusion_error(e: DataFusionError) -> zarrow::Error {
    match e {
        DataFusionError::External(inner) => match inner.downcast::<zarrow::Error>() {
            Ok(z) => *z,
            Err(other) => zarrow::Error::External(other),
        },
        DataFusionError::ArrowError(a, _) => zarrow::Error::Arrow(*a),
        DataFusionError::ResourcesExhausted(m) => zarrow::Error::ResourcesExhausted(m),
        other => zarrow::Error::External(Box::new(other)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Kinds survive the round trip through the other crate's error, both ways.
    #[test]
    fn errors_keep_their_kind_both_ways() {
        for df in [
            DataFusionError::Plan("no such column".into()),
            DataFusionError::Execution("boom".into()),
            DataFusionError::Configuration("bad option".into()),
            DataFusionError::NotImplemented("later".into()),
        ] {
            let want = format!("{df:?}");
            let back = to_datafusion_error(from_datafusion_error(df));
            assert_eq!(format!("{back:?}"), want);
        }
        let back = to_datafusion_error(from_datafusion_error(DataFusionError::ResourcesExhausted(
            "pool".into(),
        )));
        assert!(matches!(back, DataFusionError::ResourcesExhausted(m) if m == "pool"));
        let chunk =
            zarrow::Error::chunk("a/x", "c/1", zarrow::ChunkError::Truncated("short".into()));
        let back = from_datafusion_error(to_datafusion_error(chunk));
        assert_eq!((back.array(), back.chunk_key()), (Some("a/x"), Some("c/1")));
        let option = zarrow::Error::InvalidOption {
            key: "max_chunk_bytes".into(),
            message: "expected a number of bytes".into(),
        };
        assert!(matches!(
            to_datafusion_error(option),
            DataFusionError::Configuration(m) if m.contains("max_chunk_bytes")
        ));
    }
}

//! zarrow's errors as Python exceptions: `ZarrowError`, and under it `NotFoundError`,
//! `UnsupportedError` (data types, codecs), `MetadataError`, `CorruptChunkError` (the message
//! names the array and chunk) and `StoreError`. Every one has the attributes `array` (the
//! array or node path), `chunk` (the chunk's store key) and `location` (the object or
//! metadata document read, or the location given), `None` where the error names none.

use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;

create_exception!(
    zarrow,
    ZarrowError,
    PyException,
    "Every error zarrow raises."
);
create_exception!(
    zarrow,
    NotFoundError,
    ZarrowError,
    "No zarr array or group at a location."
);
create_exception!(
    zarrow,
    UnsupportedError,
    ZarrowError,
    "A data type, codec or extension zarrow does not read."
);
create_exception!(
    zarrow,
    MetadataError,
    ZarrowError,
    "Metadata that is not valid zarr metadata."
);
create_exception!(
    zarrow,
    CorruptChunkError,
    ZarrowError,
    "A chunk whose bytes could not be decoded (the message names the array and chunk)."
);
create_exception!(
    zarrow,
    StoreError,
    ZarrowError,
    "The object store failed (the message names the path)."
);

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("ZarrowError", py.get_type::<ZarrowError>())?;
    m.add("NotFoundError", py.get_type::<NotFoundError>())?;
    m.add("UnsupportedError", py.get_type::<UnsupportedError>())?;
    m.add("MetadataError", py.get_type::<MetadataError>())?;
    m.add("CorruptChunkError", py.get_type::<CorruptChunkError>())?;
    m.add("StoreError", py.get_type::<StoreError>())?;
    // Class-level defaults: an exception that names no array, chunk or location says None.
    let base = py.get_type::<ZarrowError>();
    for name in CONTEXT {
        base.setattr(name, py.None())?;
    }
    Ok(())
}

/// The attributes of every zarrow exception that say where the error happened.
const CONTEXT: [&str; 3] = ["array", "chunk", "location"];

/// The exception for a zarrow error.
pub(crate) fn to_py(e: zarrow::Error) -> PyErr {
    let context = [e.array(), e.chunk_key(), e.location()].map(|v| v.map(str::to_string));
    let err = exception(e);
    Python::attach(|py| {
        let value = err.value(py);
        for (name, v) in CONTEXT.into_iter().zip(context) {
            if let Err(e) = value.setattr(name, v) {
                return e;
            }
        }
        err.clone_ref(py)
    })
}

/// The exception class of a zarrow error, with its message.
fn exception(e: zarrow::Error) -> PyErr {
    use zarrow::Error as E;
    let message = e.to_string();
    match e {
        E::ColumnNotFound {
            ref table,
            ref column,
            ref columns,
        } => crate::usage::column_not_found(table, column, columns),
        E::NodeNotFound { .. } => NotFoundError::new_err(message),
        E::Store { ref source, .. } if matches!(source, object_store::Error::NotFound { .. }) => {
            NotFoundError::new_err(message)
        }
        E::UnsupportedDataType { .. }
        | E::UnsupportedCodec { .. }
        | E::UnsupportedChunkGrid { .. }
        | E::MustUnderstand { .. } => UnsupportedError::new_err(message),
        E::CodecConfig { ref source, .. } if source.is_unsupported() => {
            UnsupportedError::new_err(message)
        }
        E::Metadata { .. } | E::CodecConfig { .. } => MetadataError::new_err(message),
        E::Chunk { .. } => CorruptChunkError::new_err(message),
        E::Store { .. } | E::StoreWrite { .. } => StoreError::new_err(message),
        _ => ZarrowError::new_err(message),
    }
}

/// The exception for a DataFusion error: the zarrow error inside it if there is one.
pub(crate) fn from_datafusion(e: datafusion::error::DataFusionError) -> PyErr {
    to_py(zarrow_datafusion::from_datafusion_error(e))
}

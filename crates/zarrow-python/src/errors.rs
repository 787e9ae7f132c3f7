//! zarrow's errors as Python exceptions: `ZarrowError`, and under it `NotFoundError`,
//! `UnsupportedError` (data types, codecs), `MetadataError`, `CorruptChunkError` (the message
//! names the array and chunk) and `StoreError`. Every one has the attributes `array` (the
//! array or node path), `chunk` (the chunk's store key) and `location` (the object or
//! metadata document read, or the location given), `None` where the error names none.
//!
//! The exceptions of API misuse live here too (`ColumnNotFoundError`, `OptionError`,
//! `NotATableError`, made at import by [`register_usage`]); `usage.rs` decides when to raise them.

use datafusion::common::utils::datafusion_strsim::levenshtein;
use pyo3::create_exception;
use pyo3::exceptions::{PyException, PyKeyError, PyValueError};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyTuple, PyType};

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
        } => column_not_found(table, column, columns),
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

pub(crate) static COLUMN_NOT_FOUND: PyOnceLock<Py<PyType>> = PyOnceLock::new();
pub(crate) static OPTION_ERROR: PyOnceLock<Py<PyType>> = PyOnceLock::new();
pub(crate) static NOT_A_TABLE: PyOnceLock<Py<PyType>> = PyOnceLock::new();

/// An exception class `zarrow.<name>` deriving from `ZarrowError` and `also` (a built-in
/// exception, so `except KeyError` keeps working), its message shown as given.
fn exception_type<'py>(
    py: Python<'py>,
    name: &str,
    doc: &str,
    also: Option<Bound<'py, PyType>>,
) -> PyResult<Bound<'py, PyType>> {
    let zarrow_error = py.get_type::<ZarrowError>().into_any();
    let bases = match also {
        Some(other) => PyTuple::new(py, [zarrow_error, other.into_any()])?,
        None => PyTuple::new(py, [zarrow_error])?,
    };
    let namespace = PyDict::new(py);
    namespace.set_item("__module__", "zarrow")?;
    namespace.set_item("__doc__", doc)?;
    // KeyError quotes its message; these show it as written.
    let base_str = py
        .import("builtins")?
        .getattr("BaseException")?
        .getattr("__str__")?;
    namespace.set_item("__str__", base_str)?;
    let made = py
        .import("builtins")?
        .getattr("type")?
        .call1((name, bases, namespace))?;
    Ok(made.cast_into::<PyType>()?)
}

/// Adds the exceptions of API misuse (`usage.rs` raises them) to `m`.
pub(crate) fn register_usage(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    type Kind<'a, 'py> = (
        &'a PyOnceLock<Py<PyType>>,
        &'a str,
        &'a str,
        Option<Bound<'py, PyType>>,
    );
    let kinds: [Kind<'_, '_>; 3] = [
        (
            &COLUMN_NOT_FOUND,
            "ColumnNotFoundError",
            "A column the table does not have (the message suggests the close names).",
            Some(py.get_type::<PyKeyError>()),
        ),
        (
            &OPTION_ERROR,
            "OptionError",
            "An option or storage_options key zarrow does not know (the message lists the valid ones).",
            Some(py.get_type::<PyValueError>()),
        ),
        (
            &NOT_A_TABLE,
            "NotATableError",
            "A group that cannot be read as one table (the message lists its children).",
            None,
        ),
    ];
    for (cell, name, doc, also) in kinds {
        let made = exception_type(py, name, doc, also)?;
        m.add(name, &made)?;
        let _ = cell.set(py, made.unbind());
    }
    Ok(())
}

pub(crate) fn raise(cell: &PyOnceLock<Py<PyType>>, message: String) -> PyErr {
    Python::attach(|py| match cell.get(py) {
        Some(t) => PyErr::from_type(t.bind(py).clone(), message),
        None => ZarrowError::new_err(message),
    })
}

/// The names among `valid` closest to `name` (a typo or a case slip away), best first.
pub(crate) fn close_names<'a>(name: &str, valid: impl IntoIterator<Item = &'a str>) -> Vec<String> {
    let lower = name.to_lowercase();
    let mut scored: Vec<(usize, &str)> = valid
        .into_iter()
        .map(|v| (levenshtein(&lower, &v.to_lowercase()), v))
        .filter(|(d, v)| *d <= (v.chars().count().max(name.chars().count()) / 3).max(1))
        .collect();
    scored.sort();
    scored
        .into_iter()
        .take(3)
        .map(|(_, v)| v.to_string())
        .collect()
}

pub(crate) fn did_you_mean(close: &[String]) -> String {
    match close {
        [] => String::new(),
        [one] => format!(" Did you mean '{one}'?"),
        many => format!(
            " Did you mean one of {}?",
            many.iter()
                .map(|c| format!("'{c}'"))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

/// `ColumnNotFoundError` for `column`, which the table at `table` with `columns` lacks: the
/// close names suggested, the columns listed.
pub(crate) fn column_not_found(table: &str, column: &str, columns: &[String]) -> PyErr {
    raise(
        &COLUMN_NOT_FOUND,
        format!(
            "'{table}' has no column '{column}'.{} Its columns: {}",
            did_you_mean(&close_names(column, columns.iter().map(String::as_str))),
            columns.join(", ")
        ),
    )
}

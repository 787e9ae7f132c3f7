//! `ZarrTable` and `ZarrTableFactory`: zarrow-datafusion's table provider and table factory
//! handed to datafusion-python through datafusion-ffi, with projection, filter and limit
//! pushdown across the boundary.

use std::collections::HashMap;
use std::sync::Arc;

use async_trait::async_trait;
use datafusion::catalog::{Session, TableProvider, TableProviderFactory};
use datafusion::error::Result as DfResult;
use datafusion::logical_expr::CreateExternalTable;
use datafusion_ffi::proto::logical_extension_codec::FFI_LogicalExtensionCodec;
use datafusion_ffi::table_provider::FFI_TableProvider;
use datafusion_ffi::table_provider_factory::FFI_TableProviderFactory;
use pyo3::prelude::*;
use pyo3::types::{PyCapsule, PyDict};
use zarrow::ZarrStore;
use zarrow_datafusion::{ZarrTable, ZarrTableFactory};

use crate::errors::{from_datafusion, ZarrowError};
use crate::options::TableKwargs;
use crate::runtime::{block_on, runtime};

/// The logical extension codec of a datafusion-python session (or of the capsule it gave),
/// after checking that the datafusion-python that made it speaks zarrow's datafusion-ffi ABI
/// (the codec's layout differs between DataFusion major versions and carries no version of its
/// own, so a mismatch read blindly is a crash, not an error).
fn session_codec(session: &Bound<'_, PyAny>) -> PyResult<FFI_LogicalExtensionCodec> {
    check_datafusion_python(session)?;
    let attr = "__datafusion_logical_extension_codec__";
    let capsule = if session.hasattr(attr)? {
        session.getattr(attr)?.call0()?
    } else {
        session.clone()
    };
    let capsule = capsule.cast::<PyCapsule>().map_err(|_| {
        ZarrowError::new_err(format!(
            "expected a datafusion SessionContext ({}) or its logical extension codec capsule",
            supported_datafusion()
        ))
    })?;
    let data = capsule
        .pointer_checked(Some(c"datafusion_logical_extension_codec"))
        .map_err(|_| {
            ZarrowError::new_err(
                "expected a capsule named 'datafusion_logical_extension_codec' from datafusion-python",
            )
        })?;
    // SAFETY: `check_datafusion_python` verified that the datafusion-python which made the
    // capsule has zarrow's DataFusion major version (so the same `FFI_LogicalExtensionCodec`
    // layout), `pointer_checked` verified the capsule's name, and datafusion-python names a
    // capsule so only when it holds an `FFI_LogicalExtensionCodec`, which lives as long as the
    // capsule (borrowed here for the clone only).
    let codec = unsafe { data.cast::<FFI_LogicalExtensionCodec>().as_ref() };
    Ok(codec.clone())
}

/// The datafusion(-python) versions this build works with, as `pyproject.toml` pins them.
fn supported_datafusion() -> String {
    let major = datafusion_ffi::version();
    format!(
        "datafusion-python {major}.x, i.e. 'datafusion>={major},<{}'",
        major + 1
    )
}

/// Refuse, before any pointer is read, a session (or capsule) of a datafusion-python whose
/// major version is not the one zarrow's datafusion-ffi was built with: `FFI_*` structs change
/// layout between major versions.
///
/// The version is the `__version__` of the package that defines the session's type
/// (`datafusion` for datafusion-python's `SessionContext`), else of the installed `datafusion`
/// package (for a bare capsule).
fn check_datafusion_python(session: &Bound<'_, PyAny>) -> PyResult<()> {
    let py = session.py();
    let module: String = session
        .get_type()
        .module()
        .and_then(|m| m.extract())
        .unwrap_or_default();
    let package = match module.split('.').next() {
        Some(p) if !p.is_empty() && p != "builtins" && p != "zarrow" => p.to_string(),
        _ => "datafusion".to_string(),
    };
    let installed: Option<String> = py
        .import("sys")
        .and_then(|sys| sys.getattr("modules"))
        .and_then(|modules| modules.get_item(&package))
        .and_then(|m| m.getattr("__version__"))
        .and_then(|v| v.extract())
        .ok()
        .or_else(|| {
            py.import("importlib.metadata")
                .and_then(|m| m.call_method1("version", (&package,)))
                .and_then(|v| v.extract())
                .ok()
        });
    let built = datafusion_ffi::version();
    match installed {
        Some(v) if v.split('.').next() == Some(built.to_string().as_str()) => Ok(()),
        Some(v) => Err(ZarrowError::new_err(format!(
            "this zarrow was built for datafusion {built}.x; {package} {v} is installed. \
             Install {}, or a zarrow built for datafusion {}.x",
            supported_datafusion(),
            v.split('.').next().unwrap_or(&v),
        ))),
        None => Err(ZarrowError::new_err(format!(
            "cannot tell which datafusion version made this session ({package} has no \
             __version__ and is not installed as a package); zarrow works with {}",
            supported_datafusion(),
        ))),
    }
}

/// A zarr array or group as a table for datafusion-python, with projection, filter and
/// limit pushdown across the FFI boundary.
///
/// Example::
///
///     >>> import datafusion, zarrow
///     >>> ctx = datafusion.SessionContext()
///     >>> ctx.register_table("obs", zarrow.ZarrTable("data/pbmc_sample.zarr/obs"))
///     >>> ctx.sql("SELECT cell_type, count(*) FROM obs GROUP BY cell_type").show()
#[pyclass(name = "ZarrTable", module = "zarrow", frozen)]
pub(crate) struct PyZarrTable {
    table: Arc<ZarrTable>,
}

#[pymethods]
impl PyZarrTable {
    #[new]
    #[pyo3(signature = (location, *, string_type=None, fill_as_null=None, decode_cf=None, arrays=None, dictionary=None, storage_options=None, r#ref=None, range_split_bytes=None, coalesce_bytes=None, **unknown))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        location: String,
        string_type: Option<String>,
        fill_as_null: Option<bool>,
        decode_cf: Option<bool>,
        arrays: Option<Vec<String>>,
        dictionary: Option<Vec<String>>,
        storage_options: Option<HashMap<String, String>>,
        r#ref: Option<String>,
        range_split_bytes: Option<u64>,
        coalesce_bytes: Option<u64>,
        unknown: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Self> {
        crate::usage::check_no_unknown("ZarrTable", unknown, &crate::options::table_options())?;
        let kwargs = TableKwargs::reading(
            storage_options,
            string_type,
            fill_as_null,
            decode_cf,
            arrays,
            dictionary,
            r#ref,
            range_split_bytes,
            coalesce_bytes,
        )?;
        let options = kwargs.table_options()?.into();
        let store = kwargs.store(&location)?;
        let table =
            block_on(py, ZarrTable::try_new_with_store(store.clone(), options))?.map_err(|e| {
                crate::usage::explain_open_error(py, &location, &store, from_datafusion(e))
            })?;
        Ok(PyZarrTable {
            table: Arc::new(table),
        })
    }

    /// The location the table was opened from.
    #[getter]
    fn location(&self) -> String {
        self.table.location().to_string()
    }

    /// The column names.
    #[getter]
    fn columns(&self) -> Vec<String> {
        self.table
            .schema()
            .fields()
            .iter()
            .map(|f| f.name().clone())
            .collect()
    }

    /// Child arrays and groups that are not columns, with the reason: `[(name, reason)]`.
    #[getter]
    fn left_out(&self) -> Vec<(String, String)> {
        self.table.left_out().to_vec()
    }

    /// The number of rows.
    #[getter]
    fn num_rows(&self) -> u64 {
        self.table.current_model().num_rows()
    }

    /// The Arrow schema as a PyCapsule (`pyarrow.schema(table)` reads it).
    fn __arrow_c_schema__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyCapsule>> {
        crate::stream::schema_capsule(py, self.table.schema().as_ref())
    }

    /// The table as a datafusion-ffi provider, for `SessionContext.register_table`.
    fn __datafusion_table_provider__<'py>(
        &self,
        py: Python<'py>,
        session: Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyCapsule>> {
        let codec = session_codec(&session)?;
        let provider = FFI_TableProvider::new_with_ffi_codec(
            self.table.clone() as Arc<dyn TableProvider>,
            true,
            Some(runtime()?.handle().clone()),
            codec,
        );
        PyCapsule::new_with_value(py, provider, c"datafusion_table_provider")
    }

    fn __repr__(&self) -> String {
        format!(
            "ZarrTable('{}', columns={:?}, rows={})",
            self.table.location(),
            self.columns(),
            self.table.current_model().num_rows()
        )
    }
}

/// `CREATE EXTERNAL TABLE … STORED AS ZARR LOCATION …` for datafusion-python.
///
/// Example::
///
///     >>> ctx.register_table_factory("ZARR", zarrow.ZarrTableFactory())
///     >>> ctx.sql("CREATE EXTERNAL TABLE obs STORED AS ZARR LOCATION 'data/pbmc_sample.zarr/obs'")
#[pyclass(name = "ZarrTableFactory", module = "zarrow", frozen)]
pub(crate) struct PyZarrTableFactory {
    storage_options: Option<HashMap<String, String>>,
}

/// zarrow-datafusion's factory, with storage options for the stores it opens.
#[derive(Debug)]
struct FactoryWithOptions {
    storage_options: Option<HashMap<String, String>>,
}

#[async_trait]
impl TableProviderFactory for FactoryWithOptions {
    async fn create(
        &self,
        state: &dyn Session,
        cmd: &CreateExternalTable,
    ) -> DfResult<Arc<dyn TableProvider>> {
        let Some(storage) = &self.storage_options else {
            return ZarrTableFactory.create(state, cmd).await;
        };
        let options = crate::options::storage_pairs(storage);
        let open = move |location: &str| ZarrStore::open_with_options(location, &options);
        let table = ZarrTableFactory::create_table(state, cmd, Some(&open)).await?;
        Ok(Arc::new(table))
    }
}

#[pymethods]
impl PyZarrTableFactory {
    #[new]
    #[pyo3(signature = (*, storage_options=None))]
    fn new(storage_options: Option<HashMap<String, String>>) -> Self {
        PyZarrTableFactory { storage_options }
    }

    /// The factory as a datafusion-ffi table provider factory, for
    /// `SessionContext.register_table_factory`.
    fn __datafusion_table_provider_factory__<'py>(
        &self,
        py: Python<'py>,
        codec: Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyCapsule>> {
        let codec = session_codec(&codec)?;
        let factory = FFI_TableProviderFactory::new_with_ffi_codec(
            Arc::new(FactoryWithOptions {
                storage_options: self.storage_options.clone(),
            }),
            Some(runtime()?.handle().clone()),
            codec,
        );
        PyCapsule::new_with_value(py, factory, c"datafusion_table_provider_factory")
    }
}

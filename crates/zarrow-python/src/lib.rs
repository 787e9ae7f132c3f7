//! The Python package `zarrow` (its native part, `zarrow._zarrow`): zarr arrays and groups as
//! DataFusion tables in datafusion-python, and as Arrow streams for pyarrow, polars, DuckDB
//! and pandas.
//!
//! ```text
//!  ZarrTable ──__datafusion_table_provider__(session)──▶ FFI_TableProvider (datafusion-ffi)
//!  ZarrTableFactory ──__datafusion_table_provider_factory__──▶ STORED AS ZARR
//!  scan(...) ─▶ ZarrStream ──__arrow_c_stream__──▶ FFI_ArrowArrayStream (batches, no copy)
//!  tree / write_array; errors.rs: ZarrowError and its subclasses
//! ```
//!
//! Every call that reads releases the GIL and runs on one runtime of the module's own
//! (runtime.rs), so it works from threads and from inside a running asyncio loop.

mod errors;
mod options;
mod plan;
mod runtime;
mod stream;
mod table;
mod usage;
mod write;

use pyo3::prelude::*;

/// mimalloc for the extension's own allocations, as the CLI: decoded chunks are large,
/// short-lived buffers, and it hands their memory to the next chunk instead of faulting in
/// fresh pages each time. Buffers handed to pyarrow come back here to be freed (the Arrow C
/// interfaces' release callbacks run this library's code), so no other allocator frees them.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// The native module.
#[pymodule]
fn _zarrow(m: &Bound<'_, PyModule>) -> PyResult<()> {
    // A panic inside icechunk while it reads a repository is caught and raised as that read's
    // error (naming the repository): the default hook would also print it, with a path into
    // icechunk's sources, as if nothing had caught it.
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        if !zarrow::panic_is_guarded() {
            previous(info)
        }
    }));
    errors::register(m)?;
    errors::register_usage(m)?;
    m.add_class::<table::PyZarrTable>()?;
    m.add_class::<table::PyZarrTableFactory>()?;
    m.add_class::<stream::PyZarrStream>()?;
    m.add_class::<stream::PyZarrBatch>()?;
    m.add_function(wrap_pyfunction!(stream::scan, m)?)?;
    m.add_function(wrap_pyfunction!(stream::tree, m)?)?;
    m.add_function(wrap_pyfunction!(stream::write_array, m)?)?;
    m.add_function(wrap_pyfunction!(write::write_table, m)?)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}

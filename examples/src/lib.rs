//! Helpers shared by the examples in `examples/examples/`.

use std::path::Path;

use anyhow::{Context, Result};

/// The location of a node of the sample store `data/pbmc_sample.zarr` (see `data/README.md`),
/// e.g. `sample("obs")`, as an absolute path that works from any working directory.
pub fn sample(node: &str) -> Result<String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .context("the examples crate has no parent directory")?
        .join("data")
        .join("pbmc_sample.zarr");
    let root = root.canonicalize().with_context(|| {
        format!(
            "the sample store is missing: {} (run data/make_sample.py)",
            root.display()
        )
    })?;
    Ok(root.join(node).to_string_lossy().into_owned())
}

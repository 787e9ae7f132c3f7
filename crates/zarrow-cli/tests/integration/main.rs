//! The integration tests of the `zarrow` binary, linked into one test binary (each links all of
//! DataFusion): `cli` runs every command over the fixtures and the sample store, `export_zarr`
//! writes query results as zarr, `hostile` runs them over hostile Icechunk repositories and
//! invalid AnnData dataframes, `write_safety` kills and races writers.
//! Run one subject with `cargo test -p zarrow-cli --test integration export_zarr::`.

mod cli;
mod export_zarr;
mod hostile;
mod write_safety;

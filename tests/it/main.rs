//! Integration tests over fixtures written by zarr-python, xarray, anndata and zarrs.
//!
//! `tests/fixtures/data/expected_*.json` hold, per array, the values the writer's own reader
//! returns; [`fixtures`] compares zarrow's output with every one of them.

mod bad_input;
mod common;
mod faults;
mod fixtures;
mod hierarchy;
mod holdouts;
mod icechunk;
mod icechunk_clouds;
mod low_precision;
mod nested_sharding;
mod optional_type;
mod python_roundtrip;
mod rectilinear;
mod remote;
mod scan;
mod sparse;
mod struct_type;
mod write_table;
mod xarray_nat;
mod zarrista_writer;
mod zero_copy;

//! The integration tests of `zarrow-datafusion`, one module per subject, linked into one test
//! binary: each test binary links all of DataFusion (about 300 MB in a debug build), so one
//! instead of seven saves six links and their disk (the SQL logic tests, `harness = false`,
//! stay their own binary in `tests/sqllogictests.rs`).
//! Run one subject with `cargo test -p zarrow-datafusion --test integration readahead::`.

mod common;

mod cancel;
mod copy_to;
mod datafusion_bugs;
mod insert_into;
mod predicate;
mod readahead;
mod remote_readahead;
mod runtime_pruning;
mod table;

//! The integration tests of `zarrow-ballista`, linked into one test binary (each links DataFusion
//! and Ballista): `standalone` runs Ballista's in-process cluster, `cluster` real scheduler and
//! executor processes on loopback.
//! Run one subject with `cargo test -p zarrow-ballista --test integration cluster::`.

mod common;

mod cluster;
mod standalone;

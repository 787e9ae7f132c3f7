//! `zarrow-executor`: Ballista's executor, reading zarr chunks itself (same flags as Ballista's
//! `ballista-executor`: `--bind-host`, `--bind-port`, `--bind-grpc-port`, `--scheduler-host`,
//! `--scheduler-port`, `--work-dir`, `--concurrent-tasks`, …).

use clap::Parser;

fn main() -> ballista_core::error::Result<()> {
    let opt = ballista_executor::config::Config::parse();
    zarrow_ballista::process::run_process(zarrow_ballista::process::run_executor(opt))
}

//! `zarrow-scheduler`: Ballista's scheduler, with zarr tables (same flags as Ballista's
//! `ballista-scheduler`: `--bind-host`, `--bind-port`, …).

use clap::Parser;

fn main() -> ballista_core::error::Result<()> {
    let opt = ballista_scheduler::config::Config::parse();
    zarrow_ballista::process::run_process(zarrow_ballista::process::run_scheduler(opt))
}

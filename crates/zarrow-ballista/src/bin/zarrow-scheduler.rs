//! `zarrow-scheduler`: Ballista's scheduler, with zarr tables (same flags as Ballista's
//! `ballista-scheduler`: `--bind-host`, `--bind-port`, …).

use clap::Parser;

fn main() -> ballista_core::error::Result<()> {
    let opt = ballista_scheduler::config::Config::parse();
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_stack_size(32 * 1024 * 1024)
        .build()?
        .block_on(zarrow_ballista::process::run_scheduler(opt))
}

//! The `zarrow-scheduler` and `zarrow-executor` processes: Ballista's own scheduler and
//! executor, parsed from Ballista's own flags (its clap `Config`s), with zarrow's codecs and the
//! `zarrow.*` settings installed. Executors open stores from their own environment (shared
//! filesystem paths, `AWS_*`/`GOOGLE_*`/`AZURE_*` credentials, HTTP), so chunk bytes go from the
//! store to the executor that reads them and nowhere else.

use std::net::SocketAddr;
use std::sync::Arc;

use ballista_core::error::{BallistaError, Result};
use ballista_executor::executor_process::{start_executor_process, ExecutorProcessConfig};
use ballista_executor::health::spawn_health_server;
use ballista_scheduler::cluster::BallistaCluster;
use ballista_scheduler::config::SchedulerConfig;
use ballista_scheduler::scheduler_process::start_server;
use datafusion::prelude::SessionConfig;
use tracing_subscriber::EnvFilter;

use crate::codec::{ZarrLogicalCodec, ZarrPhysicalCodec};
use crate::session::zarr_ballista_config;

/// Run `main` (a process's main function) on the multi-threaded runtime Ballista's binaries
/// use: 32 MiB thread stacks, as theirs have for deep plans.
pub fn run_process(main: impl std::future::Future<Output = Result<()>>) -> Result<()> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_stack_size(32 * 1024 * 1024)
        .build()?
        .block_on(main)
}

/// The session configuration a scheduler or executor starts each session from.
fn config_producer() -> SessionConfig {
    zarr_ballista_config(SessionConfig::new())
}

/// Log to stdout, or to `<log_dir>/<prefix>` (never rotated here), at `RUST_LOG` or `level`.
fn init_logging(level: &str, log_dir: Option<&str>, prefix: &str) {
    let filter = EnvFilter::new(std::env::var(EnvFilter::DEFAULT_ENV).unwrap_or(level.into()));
    let builder = tracing_subscriber::fmt()
        .with_ansi(false)
        .with_env_filter(filter);
    match log_dir {
        Some(dir) => builder
            .with_writer(tracing_appender::rolling::never(dir, prefix))
            .init(),
        None => builder.with_writer(std::io::stdout).init(),
    }
}

/// Run a scheduler with Ballista's scheduler flags until it stops.
pub async fn run_scheduler(opt: ballista_scheduler::config::Config) -> Result<()> {
    init_logging(
        &opt.log_level_setting,
        opt.log_dir.as_deref(),
        &format!("zarrow_scheduler_{}", opt.bind_port),
    );
    let addr: SocketAddr = format!("{}:{}", opt.bind_host, opt.bind_port)
        .parse()
        .map_err(|e: std::net::AddrParseError| BallistaError::Configuration(e.to_string()))?;
    let mut config: SchedulerConfig = opt.try_into()?;
    config = config.with_override_config_producer(Arc::new(config_producer));
    config.override_logical_codec = Some(Arc::new(ZarrLogicalCodec::default()));
    config.override_physical_codec = Some(Arc::new(ZarrPhysicalCodec::default()));
    let cluster = BallistaCluster::new_from_config(&config).await?;
    start_server(cluster, addr, Arc::new(config)).await
}

/// Run an executor with Ballista's executor flags until it stops. The scans it decodes name
/// it (`<id> at <host>:<port>`) in their errors.
pub async fn run_executor(opt: ballista_executor::config::Config) -> Result<()> {
    let health_addr: SocketAddr = format!("{}:{}", opt.bind_host, opt.bind_health_port)
        .parse()
        .map_err(|e| BallistaError::General(format!("invalid --bind-health-port address: {e}")))?;
    let mut config: ExecutorProcessConfig = opt.try_into()?;
    init_logging(
        &config.special_mod_log_level,
        config.log_dir.as_deref(),
        &config.log_file_name_prefix(),
    );
    let host = config
        .external_host
        .clone()
        .unwrap_or_else(|| config.bind_host.clone());
    let name = format!("{} at {host}:{}", config.executor_id, config.port);
    config.override_config_producer = Some(Arc::new(config_producer));
    config.override_logical_codec = Some(Arc::new(ZarrLogicalCodec::default()));
    config.override_physical_codec =
        Some(Arc::new(ZarrPhysicalCodec::default().for_executor(name)));

    let (stop_health, health_stopped) = tokio::sync::oneshot::channel();
    let health = spawn_health_server(health_addr, config.health.clone(), health_stopped);
    let result = start_executor_process(Arc::new(config)).await;
    let _ = stop_health.send(());
    if let Err(e) = health.await {
        log::warn!("health server: {e}");
    }
    result
}

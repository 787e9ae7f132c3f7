//! zarrow's warnings (`log::warn!` of its crates: a stale lock broken, a leftover that could not be
//! deleted after a write was published) on stderr as `warning: …` lines, and what stops a
//! non-interactive run: SIGINT or SIGTERM cancel the running statement, whose writer then
//! cleans up (its lock and staged files) before the process exits.

use std::fmt;

/// Prints zarrow's warnings and errors on stderr (other crates' stay silent, as before).
struct Stderr;

impl log::Log for Stderr {
    fn enabled(&self, metadata: &log::Metadata) -> bool {
        metadata.level() <= log::Level::Warn && metadata.target().starts_with("zarrow")
    }

    fn log(&self, record: &log::Record) {
        if self.enabled(record.metadata()) {
            let level = match record.level() {
                log::Level::Error => "error",
                _ => "warning",
            };
            eprintln!("{level}: {}", record.args());
        }
    }

    fn flush(&self) {}
}

/// Show the library's warnings on stderr (once, at start).
pub fn init() {
    static LOGGER: Stderr = Stderr;
    if log::set_logger(&LOGGER).is_ok() {
        log::set_max_level(log::LevelFilter::Warn);
    }
}

/// A run stopped by a signal: the statement was cancelled (its writes undone).
#[derive(Debug)]
pub struct Interrupted {
    signal: &'static str,
    /// The exit status a shell gives a process the signal ended (128 + its number).
    pub status: u8,
}

impl fmt::Display for Interrupted {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "interrupted ({}): the statement was cancelled; a write in progress left the \
             table as it was",
            self.signal
        )
    }
}

impl std::error::Error for Interrupted {}

/// The next SIGINT or SIGTERM (Unix; elsewhere Ctrl-C).
pub async fn stop_signal() -> Interrupted {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        let mut term = signal(SignalKind::terminate()).ok();
        let term = async {
            match &mut term {
                Some(s) => s.recv().await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            _ = tokio::signal::ctrl_c() => Interrupted { signal: "SIGINT", status: 130 },
            _ = term => Interrupted { signal: "SIGTERM", status: 143 },
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
        Interrupted {
            signal: "Ctrl-C",
            status: 130,
        }
    }
}

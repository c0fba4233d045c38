//! `-v` and `RUST_LOG`: the libraries' spans and events on stderr.
//!
//! Without either, only warnings show (a Redis server that may lose writes, a lease lost). Each
//! `-v` lowers the level: info (every saver and store operation, every run, with its duration
//! when it closes), debug (super-steps, nodes, leases, saves), trace. `RUST_LOG`, in
//! `tracing_subscriber::EnvFilter` syntax, replaces that level entirely. Either way the
//! dependencies that log every statement or index insertion stay at warnings unless the filter
//! names them (`RUST_LOG=info,sqlx=debug`). Every line passes through [`secrets::scrub`].

use std::io::Write;

use tracing_subscriber::EnvFilter;
use tracing_subscriber::fmt::format::FmtSpan;

use crate::secrets;

/// Dependencies whose own logging would drown Waypoint's (sqlx logs each statement, PostgreSQL
/// notices at info; the HNSW crates log while building), kept at warnings.
const CHATTY: &[&str] = &[
    "sqlx", "hnsw_rs", "anndists", "rustls", "hyper", "reqwest", "h2",
];

/// The filter for `verbose` `-v`s, or `rust_log` when set.
fn directives(verbose: u8, rust_log: Option<&str>) -> String {
    let base = match rust_log.map(str::trim).filter(|r| !r.is_empty()) {
        Some(rust_log) => rust_log.to_owned(),
        None => match verbose {
            0 => "warn",
            1 => "info",
            2 => "debug",
            _ => "trace",
        }
        .to_owned(),
    };
    // The targets the filter names itself (`sqlx=debug`, `sqlx::query[...]=info`).
    let named: Vec<&str> = base
        .split(',')
        .filter_map(|d| d.split(['=', '[']).next())
        .map(str::trim)
        .collect();
    let mut all = base.clone();
    for crate_name in CHATTY {
        let mentioned = named
            .iter()
            .any(|n| n == crate_name || n.starts_with(&format!("{crate_name}::")));
        if !mentioned {
            all.push_str(&format!(",{crate_name}=warn"));
        }
    }
    all
}

/// Installs the stderr subscriber for `verbose` `-v`s and `RUST_LOG`; a `RUST_LOG` that does
/// not parse is reported and the `-v` level used instead.
pub(crate) fn init(verbose: u8) {
    let rust_log = std::env::var("RUST_LOG").ok();
    let filter = match EnvFilter::try_new(directives(verbose, rust_log.as_deref())) {
        Ok(filter) => filter,
        Err(e) => {
            eprintln!(
                "waypoint: ignoring RUST_LOG: {}",
                secrets::scrub(&e.to_string())
            );
            EnvFilter::new(directives(verbose, None))
        }
    };
    // A second subscriber cannot be installed (there is none before this); nothing to do then.
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_span_events(FmtSpan::CLOSE)
        .with_writer(|| Scrubbed)
        .try_init();
}

/// Stderr, with every remembered secret taken out of each line.
struct Scrubbed;

impl Write for Scrubbed {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        // The formatter hands over whole lines: one event or span per call.
        let text = String::from_utf8_lossy(buf);
        std::io::stderr().write_all(secrets::scrub(&text).as_bytes())?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        std::io::stderr().flush()
    }
}

#[cfg(test)]
mod tests {
    use super::directives;

    #[test]
    fn each_v_lowers_the_level_and_chatty_crates_stay_at_warnings() {
        assert!(directives(0, None).starts_with("warn,sqlx=warn,"));
        assert!(directives(1, None).starts_with("info,sqlx=warn,"));
        assert!(directives(2, None).starts_with("debug,"));
        assert!(directives(5, None).starts_with("trace,"));
    }

    #[test]
    fn rust_log_wins_and_may_name_a_chatty_crate() {
        let d = directives(3, Some("waypoint_runtime=debug"));
        assert!(d.starts_with("waypoint_runtime=debug,sqlx=warn,"), "{d}");
        let d = directives(0, Some("info,sqlx=debug"));
        assert!(d.starts_with("info,sqlx=debug,hnsw_rs=warn"), "{d}");
        assert!(!d.contains("sqlx=warn"), "{d}");
        let d = directives(0, Some("sqlx::query[q]=info"));
        assert!(!d.contains("sqlx=warn"), "{d}");
        assert!(directives(1, Some("  ")).starts_with("info,"));
    }
}

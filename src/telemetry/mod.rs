//! Structured logs. `RUST_LOG` filters (default `info`); lines go to stderr, as text or as one
//! JSON object per line ([`LogFormat`]), without ANSI colours unless stderr is a terminal. Every
//! request adds one access line, target `airq::access` ([`crate::http::edge::access_log`]). Lines
//! below `WARN` are written in batches, at most [`FLUSH_EVERY`] after they were logged
//! ([`buffered`]: a `write` per request cost the workers more than the access line itself).
//!
//! Nothing logs a device key or a bearer token: keys exist in clear only inside the response that
//! issues them, tokens only inside the authenticator, and request logs carry the path, never the
//! query string or headers.

mod buffered;

use std::io::IsTerminal as _;

pub use buffered::LogFlusher;
use buffered::{Buffered, FLUSH_EVERY};

use tracing_subscriber::EnvFilter;

/// How log lines are written.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines.
    #[default]
    Text,
    /// One JSON object per line, event fields at the top level.
    Json,
}

/// Installs the global subscriber (once; later calls do nothing). Lines below `WARN` are
/// buffered ([`buffered`]): keep the answered [`LogFlusher`] until the process ends.
pub fn init(format: LogFormat) -> LogFlusher {
    // A filter that does not parse falls back to `info`, and says so once the logs are up: a
    // typo (`airq::access=wanr`) must not go unnoticed while it changes what is logged.
    let (filter, refused) = match std::env::var(EnvFilter::DEFAULT_ENV) {
        Ok(text) => match EnvFilter::try_new(&text) {
            Ok(filter) => (filter, None),
            Err(error) => (EnvFilter::new("info"), Some((text, error))),
        },
        Err(_) => (EnvFilter::new("info"), None),
    };
    let (writer, flusher) = Buffered::start(std::io::stderr(), FLUSH_EVERY);
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(writer)
        .with_ansi(std::io::stderr().is_terminal());
    let _ = match format {
        LogFormat::Text => builder.try_init(),
        LogFormat::Json => builder.json().flatten_event(true).try_init(),
    };
    if let Some((text, error)) = refused {
        tracing::warn!(rust_log = %text, %error, "RUST_LOG is not a valid filter; logging at info");
    }
    flusher
}

/// An error and all its causes, `outer: inner: innermost`: what a log line (or a CLI failure)
/// needs, since `Display` of an error shows only its outermost layer.
pub fn chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

//! Structured logs. `RUST_LOG` filters (default `info`); lines go to stderr.
//!
//! Nothing logs a device key or a bearer token: keys exist in clear only inside the response that
//! issues them, tokens only inside the authenticator, and request logs carry the path, never the
//! query string or headers.

use tracing_subscriber::EnvFilter;

/// Installs the global subscriber (once; later calls do nothing).
pub fn init() {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .try_init();
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

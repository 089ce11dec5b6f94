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

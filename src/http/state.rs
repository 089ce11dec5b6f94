//! What every handler can reach: stores, the owner authenticator, the clock.

use std::sync::Arc;

use crate::auth::Authenticator;
use crate::clock::Clock;
use crate::store::DeviceStore;

/// Shared, immutable per-process state.
#[derive(Debug)]
pub struct AppState {
    /// Owner token verification.
    pub auth: Authenticator,
    /// Device metadata.
    pub devices: Arc<dyn DeviceStore>,
    /// Where "now" comes from.
    pub clock: Arc<dyn Clock>,
}

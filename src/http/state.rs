//! What every handler can reach: stores, authenticators, the batch writer, caches, the clock.

use std::sync::Arc;
use std::time::Duration;

use crate::alerts::Alerts;
use crate::auth::{Authenticator, KeyCache};
use crate::clock::Clock;
use crate::domain::RawRetention;
use crate::http::encodings::cacheable::MapCache;
use crate::http::guards::client_address::TrustedProxies;
use crate::http::guards::cors_origins::CorsOrigins;
use crate::http::guards::export_slots::ExportSlots;
use crate::http::guards::rate_limit::RateLimits;
use crate::metrics::ServerMetrics;
use crate::store::batch_writer::BatchWriter;
use crate::store::{DeviceStore, ReadingStore};
use crate::web::settings::MapSettings;

/// Shared per-process state.
#[derive(Debug)]
pub struct AppState {
    /// Owner token verification.
    pub auth: Authenticator,
    /// Device key verification (cached; shared with the cross-process invalidation listener).
    pub device_keys: Arc<KeyCache>,
    /// Device metadata.
    pub devices: Arc<dyn DeviceStore>,
    /// Reading queries.
    pub readings: Arc<dyn ReadingStore>,
    /// Alert rules, states and the outbox, and the deliverer's wake-up.
    pub alerts: Alerts,
    /// The way into reading storage.
    pub writer: BatchWriter,
    /// The rendered public map, shared by all pollers for its time to live.
    pub map: Arc<MapCache>,
    /// How long the map is cached (also its `Cache-Control: max-age`).
    pub map_ttl: Duration,
    /// Upload and public rate limits.
    pub limits: Arc<RateLimits>,
    /// The raw exports streaming now, within their bounds.
    pub exports: Arc<ExportSlots>,
    /// Everything `/metrics` shows.
    pub metrics: Arc<ServerMetrics>,
    /// How long raw readings are kept (rollups are kept for good).
    pub raw_retention: RawRetention,
    /// Where "now" comes from.
    pub clock: Arc<dyn Clock>,
    /// How long a request body may take to arrive in full.
    pub body_timeout: Duration,
    /// The proxies whose `X-Forwarded-For` names the client.
    pub trusted_proxies: TrustedProxies,
    /// The origins that may read owner routes from a browser.
    pub cors_origins: CorsOrigins,
    /// Where the pages' map library and tiles come from.
    pub map_settings: MapSettings,
}

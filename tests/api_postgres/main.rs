//! The black-box suite on the PostgreSQL pair: devices in PostgreSQL (a schema of its own per
//! test), readings in the embedded store. The modules are the embedded suite's own files, so both
//! pairs are held to one contract; `cross_process` adds what only a shared database can show.
//!
//! Runs when `AIRQ_TEST_POSTGRES_URL` names a server that is reachable when the binary runs;
//! otherwise every test is ignored and the reason printed (`tests/support/trials.rs`).

mod backend {
    pub const PAIR: crate::common::Pair = crate::common::Pair::Postgres;
}

#[path = "../common/mod.rs"]
mod common;
#[path = "../support/trials.rs"]
mod trials;

#[path = "../api/alerts.rs"]
mod alerts;
#[path = "../api/auth.rs"]
mod auth;
#[path = "../api/batch.rs"]
mod batch;
#[path = "../api/current.rs"]
mod current;
#[path = "../api/custom.rs"]
mod custom;
#[path = "../api/devices.rs"]
mod devices;
#[path = "../api/errors.rs"]
mod errors;
#[path = "../api/export.rs"]
mod export;
#[path = "../api/fleet_reads.rs"]
mod fleet_reads;
#[path = "../api/historical.rs"]
mod historical;
#[path = "../api/map_clusters.rs"]
mod map_clusters;
#[path = "../api/map_formats.rs"]
mod map_formats;
#[path = "../api/map_refresh.rs"]
mod map_refresh;
#[path = "../api/metrics.rs"]
mod metrics;
#[path = "../api/openapi.rs"]
mod openapi;
#[path = "../api/paging.rs"]
mod paging;
#[path = "../api/pooled_rollups.rs"]
mod pooled_rollups;
#[path = "../api/privacy.rs"]
mod privacy;
#[path = "../api/properties.rs"]
mod properties;
#[path = "../api/public.rs"]
mod public;
#[path = "../api/retention.rs"]
mod retention;
#[path = "../api/sqlite_readings.rs"]
mod sqlite_readings;
#[path = "../api/upload.rs"]
mod upload;

#[path = "../api/web_badge.rs"]
mod web_badge;

#[path = "../api/web_pages.rs"]
mod web_pages;

mod alert_replicas;
mod cross_process;
mod migrate;
mod stalled_database;
mod start;

fn main() -> std::process::ExitCode {
    trials::run()
}

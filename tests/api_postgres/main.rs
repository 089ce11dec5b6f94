//! The black-box suite on the PostgreSQL pair: devices in PostgreSQL (a schema of its own per
//! test), readings in the embedded store. The modules are the embedded suite's own files, so both
//! pairs are held to one contract; `cross_process` adds what only a shared database can show.
//!
//! Runs when `AIRQ_TEST_POSTGRES_URL` names a reachable server at build time (see `build.rs`);
//! otherwise the pair is one ignored test that says why.

#![cfg_attr(not(airq_test_postgres), allow(dead_code, unused_imports))]

mod backend {
    pub const PAIR: crate::common::Pair = crate::common::Pair::Postgres;
}

#[path = "../common/mod.rs"]
mod common;

#[cfg(airq_test_postgres)]
#[path = "../api/auth.rs"]
mod auth;
#[cfg(airq_test_postgres)]
#[path = "../api/batch.rs"]
mod batch;
#[cfg(airq_test_postgres)]
#[path = "../api/current.rs"]
mod current;
#[cfg(airq_test_postgres)]
#[path = "../api/custom.rs"]
mod custom;
#[cfg(airq_test_postgres)]
#[path = "../api/devices.rs"]
mod devices;
#[cfg(airq_test_postgres)]
#[path = "../api/errors.rs"]
mod errors;
#[cfg(airq_test_postgres)]
#[path = "../api/export.rs"]
mod export;
#[cfg(airq_test_postgres)]
#[path = "../api/historical.rs"]
mod historical;
#[cfg(airq_test_postgres)]
#[path = "../api/map_clusters.rs"]
mod map_clusters;
#[cfg(airq_test_postgres)]
#[path = "../api/map_formats.rs"]
mod map_formats;
#[cfg(airq_test_postgres)]
#[path = "../api/map_refresh.rs"]
mod map_refresh;
#[cfg(airq_test_postgres)]
#[path = "../api/metrics.rs"]
mod metrics;
#[cfg(airq_test_postgres)]
#[path = "../api/openapi.rs"]
mod openapi;
#[cfg(airq_test_postgres)]
#[path = "../api/paging.rs"]
mod paging;
#[cfg(airq_test_postgres)]
#[path = "../api/privacy.rs"]
mod privacy;
#[cfg(airq_test_postgres)]
#[path = "../api/properties.rs"]
mod properties;
#[cfg(airq_test_postgres)]
#[path = "../api/public.rs"]
mod public;
#[cfg(airq_test_postgres)]
#[path = "../api/retention.rs"]
mod retention;
#[cfg(airq_test_postgres)]
#[path = "../api/sqlite_readings.rs"]
mod sqlite_readings;
#[cfg(airq_test_postgres)]
#[path = "../api/upload.rs"]
mod upload;

#[cfg(airq_test_postgres)]
#[path = "../api/web_badge.rs"]
mod web_badge;

#[cfg(airq_test_postgres)]
#[path = "../api/web_pages.rs"]
mod web_pages;

#[cfg(airq_test_postgres)]
mod cross_process;
#[cfg(airq_test_postgres)]
mod stalled_database;
#[cfg(airq_test_postgres)]
mod start;

#[cfg(not(airq_test_postgres))]
#[test]
#[ignore = "AIRQ_TEST_POSTGRES_URL is not set or unreachable: the PostgreSQL pair is skipped"]
fn postgres_pair() {}

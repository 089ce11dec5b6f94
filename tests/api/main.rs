//! The black-box suite: the real server over real HTTP, on the embedded pair (SQLite for
//! devices and readings), on libtest. `tests/api_postgres` and `tests/api_questdb*` run the
//! same modules on the other pairs. Every test is `#[airq_test::test]` (`tests/airq-test`).

mod backend {
    pub const PAIR: crate::common::Pair = crate::common::Pair::Embedded;
}

#[path = "../common/mod.rs"]
mod common;
#[path = "../support/idp_server.rs"]
mod idp_server;
#[path = "../support/test_ca.rs"]
mod test_ca;
// The standard harness runs this binary's tests; `#[airq_test::test]` registers each in the pairs'
// harness too, which is compiled here for that and left unused.
#[allow(dead_code)]
#[path = "../support/trials.rs"]
mod trials;

mod alerts;
mod auth;
mod backup;
mod batch;
mod cli;
mod contract;
mod cors;
mod current;
mod custom;
mod devices;
mod errors;
mod examples;
mod export;
mod export_limits;
mod fleet_reads;
mod formats;
mod full_disk;
mod hardening;
mod historical;
mod identity_provider;
mod logs;
mod map_clusters;
mod map_formats;
mod map_refresh;
mod metrics;
mod openapi;
mod paging;
mod pooled_rollups;
mod privacy;
mod properties;
mod public;
mod rate_limits;
mod retention;
mod routes;
mod sqlite_readings;
mod stop;
mod unfolded;
mod upload;
mod web_badge;
mod web_browser;
mod web_pages;

// The embedded suite's modules that both QuestDB pairs run (`api_questdb` and
// `api_questdb_spool` include this list), so a module added to the contract is added to both.
// The paths are relative to the including `main.rs`, which sits one level below `tests/`.

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
#[path = "../api/map_formats.rs"]
mod map_formats;
#[path = "../api/metrics.rs"]
mod metrics;
#[path = "../api/openapi.rs"]
mod openapi;
#[path = "../api/paging.rs"]
mod paging;
#[path = "../api/privacy.rs"]
mod privacy;
#[path = "../api/public.rs"]
mod public;

#[path = "../api/upload.rs"]
mod upload;

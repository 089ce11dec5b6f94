// The embedded suite's modules that both QuestDB pairs run (`api_questdb` and
// `api_questdb_spool` include this list), so a module added to the contract is added to both.
// The paths are relative to the including `main.rs`, which sits one level below `tests/`.

#[cfg(airq_test_questdb)]
#[path = "../api/auth.rs"]
mod auth;
#[cfg(airq_test_questdb)]
#[path = "../api/batch.rs"]
mod batch;
#[cfg(airq_test_questdb)]
#[path = "../api/current.rs"]
mod current;
#[cfg(airq_test_questdb)]
#[path = "../api/custom.rs"]
mod custom;
#[cfg(airq_test_questdb)]
#[path = "../api/devices.rs"]
mod devices;
#[cfg(airq_test_questdb)]
#[path = "../api/errors.rs"]
mod errors;
#[cfg(airq_test_questdb)]
#[path = "../api/export.rs"]
mod export;
#[cfg(airq_test_questdb)]
#[path = "../api/historical.rs"]
mod historical;
#[cfg(airq_test_questdb)]
#[path = "../api/map_formats.rs"]
mod map_formats;
#[cfg(airq_test_questdb)]
#[path = "../api/metrics.rs"]
mod metrics;
#[cfg(airq_test_questdb)]
#[path = "../api/openapi.rs"]
mod openapi;
#[cfg(airq_test_questdb)]
#[path = "../api/paging.rs"]
mod paging;
#[cfg(airq_test_questdb)]
#[path = "../api/privacy.rs"]
mod privacy;
#[cfg(airq_test_questdb)]
#[path = "../api/public.rs"]
mod public;

#[cfg(airq_test_questdb)]
#[path = "../api/upload.rs"]
mod upload;

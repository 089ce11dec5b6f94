//! airq: the backend for fleets of air-quality sensors.
//!
//! Owners register devices and receive per-device credentials; devices upload readings; owners
//! read current and historical air quality; public devices feed a community map. The interface is
//! fixed by `docs/api.md`, the open semantics by its section "Semantics the spec leaves open".
//!
//! A request travels `http` (routing, problems, body and credential extraction) → `domain`
//! (parsing into types whose invalid states cannot be represented) → `store` (the only place that
//! speaks SQL); reads are composed from the store traits once, in `read`. `auth` verifies owner
//! tokens and device keys; `app` wires the pieces for the configured deployment (SQLite alone, or
//! PostgreSQL for devices and QuestDB for readings) and owns their lifetimes.
//!
//! What the crate guarantees:
//! - **No acknowledged reading is lost.** Uploads go through one batch writer per process
//!   ([`store::batch_writer`]); a 201 is sent only after the batch holding the reading is
//!   committed and durable, a failed batch is retried with the same ids (deduplicated) and then answered
//!   with 500 as a whole, and shutdown drains the writer before the process exits.
//! - Every non-2xx response is an RFC 9457 problem, rendered in exactly one place
//!   ([`http::error::ApiError`]); a 500 shows no internals, the log has the cause chain. The one
//!   exception is for people: the device page answers a browser's 404 with a page
//!   ([`web::not_found`]).
//! - A device key is never stored, logged or returned after the response that issued it; only its
//!   blake3 hash is kept and compared in constant time; a rotated or deleted key is refused at
//!   once (in every process, through PostgreSQL `NOTIFY`).
//! - Time comes from an injectable [`clock::Clock`], so time-dependent rules are testable.

#![forbid(unsafe_code)]
#![warn(missing_debug_implementations, rust_2018_idioms, unreachable_pub)]
#![deny(clippy::unwrap_used)]

pub mod alerts;
pub mod app;
pub mod auth;
pub mod backup;
pub mod clock;
pub mod config;
pub mod data_dir;
pub mod domain;
pub mod healthcheck;
pub mod http;
pub mod metrics;
pub mod migrate;
pub mod read;
pub mod store;
pub mod telemetry;
pub mod tls;
pub mod web;

pub use app::Application;
pub use config::Config;

//! The HTTP edge: a hyper 1.x server without a framework.
//!
//! [`server`] accepts connections and wraps every request (request id, logging, panic capture);
//! [`router`] maps (method, path segments) to a handler in [`routes`]; handlers are thin: they
//! authenticate the caller ([`authenticate`]), parse path, query and body ([`body`]) into domain types,
//! call a store trait, and render a view ([`views`]). Every failure is an [`error::ApiError`],
//! which becomes an RFC 9457 problem in exactly one `match`.
//!
//! Checks run in `docs/api.md`'s "Order of checks", after the request target's length (414, in
//! [`server`]) and the message's framing (400 for its `Host` or a transfer coding,
//! [`framing`]): credentials (401) → path and query (422) → content type (415) → body size (413) →
//! JSON syntax and nesting (400, [`json_value`]) → validation (422) → existence (404). Rate
//! limits ([`rate_limit`]) come first on public routes and right after the credentials on
//! uploads (401, then 429), always before the body is read.

pub mod access;
pub mod authenticate;
pub mod body;
pub mod cacheable;
pub mod client_address;
pub mod connections;
pub mod cors;
pub mod error;
pub mod export_formats;
pub mod export_slots;
pub mod framing;
pub mod json_numbers;
pub mod json_value;
pub mod negotiate;
pub mod rate_limit;
pub mod request_id;
pub mod respond;
pub mod router;
pub mod routes;
pub mod server;
pub mod state;
pub mod views;
pub mod write_deadline;

pub use state::AppState;

/// The response type of every handler.
pub type Response = hyper::Response<Body>;

/// A response body: the whole body at once ([`respond::full`]), or a stream (the raw export).
pub type Body = http_body_util::combinators::BoxBody<bytes::Bytes, BodyError>;

/// Why a streamed body stopped before its end: hyper then aborts the response, so the client
/// sees a broken transfer instead of a complete-looking, truncated one.
pub type BodyError = Box<dyn std::error::Error + Send + Sync>;

/// The request type every handler receives.
pub type Request = hyper::Request<hyper::body::Incoming>;

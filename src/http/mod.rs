//! The HTTP edge: a hyper 1.x server without a framework.
//!
//! The folder is grouped by what a file does for a request, so a reader finds a rule by its kind:
//! - [`edge`]: the connection and the message, before any route is chosen: the accept loop
//!   ([`edge::server`], which wraps every request: request id, logging, panic capture), the
//!   connection cap, the write deadline, framing, request ids, reading bodies, the access log;
//! - [`guards`]: who may do what, before a handler does anything: credentials, rate limits and
//!   the client address they count, raw export slots, the access each route declares and the
//!   origins listed for the owner routes;
//! - [`encodings`]: how answers are written: content negotiation, JSON values and numbers, views,
//!   export formats, cacheable (tagged) answers, response bodies;
//! - [`routes`]: the handlers, one file per resource, the pages' handlers among them.
//!
//! Four files span them and stay at the top: [`router`] (the route table, which maps (method,
//! path) to a handler), [`cors`] (which answers browsers on other sites may read, read from the
//! table), [`state`] (what every handler can reach) and [`error`] (every failure is an
//! [`error::ApiError`], which becomes an RFC 9457 problem in exactly one `match`). Handlers are
//! thin: they authenticate the caller ([`guards::authenticate`]), parse path, query and body
//! ([`edge::body`]) into domain types, call a store trait, and render a view
//! ([`encodings::views`]).
//!
//! Checks run in `docs/api.md`'s "Order of checks", after the request target's length (414, in
//! [`edge::server`]) and the message's framing (400 for its `Host` or a transfer coding,
//! [`edge::framing`]): credentials (401) → path and query (422) → content type (415) → body size
//! (413) → JSON syntax and nesting (400, [`encodings::json_value`]) → validation (422) →
//! existence (404). Rate limits ([`guards::rate_limit`]) come first on public routes and right
//! after the credentials on uploads (401, then 429), always before the body is read.

pub mod cors;
pub mod edge;
pub mod encodings;
pub mod error;
pub mod guards;
pub mod router;
pub mod routes;
pub mod state;

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

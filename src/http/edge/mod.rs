//! The connection and the message, before a route is chosen and after its answer is made.
//!
//! What is here would be the same for any API served over HTTP/1.1: accepting connections under
//! a cap ([`connections`]) and the per-request wrapper ([`server`]: request id, span, panic
//! capture, problem rendering, the access line), the write deadline that frees a connection
//! whose client stopped reading ([`write_deadline`]), the message's framing ([`framing`]), the
//! request id ([`request_id`]), the request body within its size, coding and time ([`body`]),
//! and the access log ([`access_log`]). Kept apart from the guards and the routes so that the
//! rules of the API never hide among the rules of the protocol.

pub mod access_log;
pub mod body;
pub mod connections;
pub mod framing;
pub mod request_id;
pub mod server;
pub mod write_deadline;

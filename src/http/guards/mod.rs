//! Who may do what: the checks a request passes before a handler does any work.
//!
//! Credentials ([`authenticate`]), rate limits ([`rate_limit`]) and the client address they and
//! the raw exports count against ([`client_address`]), the slots of streaming exports
//! ([`export_slots`]), the access each route declares ([`access`]: who may call it, and whether any
//! web origin may read it) and the origins listed for the owner routes ([`cors_origins`]). Each
//! refuses with its own error, which [`super::error`] turns into the problem (401, 429, 503) in its
//! one `match`; none of them imports a handler, so the routes can use every guard and no guard can
//! reach back into a route.

pub mod access;
pub mod authenticate;
pub mod client_address;
pub mod cors_origins;
pub mod export_slots;
pub mod rate_limit;

//! The access log: one `info` line per request, target `airq::access`.
//!
//! Fields: `method`, `route` (the route table's template, `-` when no route matches), `path` (never
//! the query string, which may carry secrets), `status`, `duration_us`, `bytes` (the response
//! body's size when known up front; absent for a stream), `request_id`, and `owner` or `device`
//! once the request's credentials were accepted (never a key or token).
//!
//! The authenticated identity reaches the line through an [`IdentitySlot`] the server puts in the
//! request's extensions and [`crate::http::guards::authenticate`] fills in.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use hyper::Method;

use crate::domain::{DeviceUuid, OwnerId};
use crate::http::edge::request_id::RequestId;

/// Who a request was authenticated as.
#[derive(Debug, Clone)]
pub enum Identity {
    /// An owner, by bearer token.
    Owner(OwnerId),
    /// A device, by its id and key.
    Device(DeviceUuid),
}

/// A per-request place for the authenticated identity, shared between the request's extensions
/// and the server's wrapper.
#[derive(Debug, Clone, Default)]
pub struct IdentitySlot(Arc<Mutex<Option<Identity>>>);

impl IdentitySlot {
    /// Records who the request was authenticated as.
    pub fn set(&self, identity: Identity) {
        if let Ok(mut slot) = self.0.lock() {
            *slot = Some(identity);
        }
    }

    /// Who the request was authenticated as, if anyone.
    pub fn get(&self) -> Option<Identity> {
        self.0.lock().ok().and_then(|slot| slot.clone())
    }
}

/// What one access line says.
#[derive(Debug)]
pub struct Entry<'a> {
    /// The request method.
    pub method: &'a Method,
    /// The route template, `None` when no route matches.
    pub route: Option<&'static str>,
    /// The request path, without the query string.
    pub path: &'a str,
    /// The response status.
    pub status: u16,
    /// From the request's arrival to its response head.
    pub duration: Duration,
    /// The response body's size, when known.
    pub bytes: Option<u64>,
    /// The request id.
    pub request_id: &'a RequestId,
    /// The authenticated caller.
    pub identity: Option<Identity>,
}

/// Writes the access line of one request.
pub fn log(entry: &Entry<'_>) {
    let (owner, device) = match &entry.identity {
        Some(Identity::Owner(owner)) => (Some(owner.as_str().to_owned()), None),
        Some(Identity::Device(device)) => (None, Some(device.to_string())),
        None => (None, None),
    };
    tracing::info!(
        target: "airq::access",
        method = %entry.method,
        route = entry.route.unwrap_or("-"),
        path = entry.path,
        status = entry.status,
        duration_us = u64::try_from(entry.duration.as_micros()).unwrap_or(u64::MAX),
        bytes = entry.bytes,
        request_id = %entry.request_id,
        owner = owner.as_deref(),
        device = device.as_deref(),
        "access"
    );
}

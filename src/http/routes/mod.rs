//! Handlers, one file per resource. Each is thin: extract, parse, call a store, render.

pub mod air_quality;
pub mod alerts;
pub mod data;
pub mod devices;
pub mod meta;
pub mod pages;
pub mod public;

use std::net::{IpAddr, Ipv4Addr};

use crate::domain::Snapshot;
use crate::http::edge::connections::Peer;
use crate::http::error::ApiError;
use crate::http::guards::client_address::client_address;
use crate::http::guards::export_slots::ExportSlot;
use crate::http::state::AppState;
use crate::http::Request;
use crate::read::current::{self, Current};
use crate::store::Fleet;

/// A slot for one more raw export of the request's client address, within both bounds.
fn export_slot(request: &Request, state: &AppState) -> Result<ExportSlot, ApiError> {
    // The server puts the peer in every request; without one, all such requests share a client.
    let peer = request
        .extensions()
        .get::<Peer>()
        .map_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED), |peer| peer.0);
    let client = client_address(peer, request.headers(), &state.trusted_proxies);
    Ok(state.exports.take(client)?)
}

/// The current snapshot of the fleet's devices, or the problem that says why there is none
/// (`never` when they never reported).
async fn known(
    state: &AppState,
    fleet: Fleet<'_>,
    never: &'static str,
) -> Result<Snapshot, ApiError> {
    match current::snapshot(
        state.readings.as_ref(),
        fleet,
        state.clock.now(),
        state.raw_retention,
    )
    .await?
    {
        Current::Known(snapshot) => Ok(snapshot),
        Current::NeverReported => Err(ApiError::NotFound(never)),
        Current::PastRetention { last_seen } => Err(ApiError::PastRetention {
            last_seen,
            days: state.raw_retention.days_kept().unwrap_or_default(),
        }),
    }
}

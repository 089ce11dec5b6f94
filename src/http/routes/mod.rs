//! Handlers, one file per resource. Each is thin: extract, parse, call a store, render.

pub mod air_quality;
pub mod data;
pub mod devices;
pub mod meta;
pub mod public;

use std::net::{IpAddr, Ipv4Addr};

use crate::http::connections::Peer;
use crate::http::error::ApiError;
use crate::http::export_slots::ExportSlot;
use crate::http::state::AppState;
use crate::http::Request;

/// A slot for one more raw export of the request's client address, within both bounds.
fn export_slot(request: &Request, state: &AppState) -> Result<ExportSlot, ApiError> {
    // The server puts the peer in every request; without one, all such requests share a client.
    let peer = request
        .extensions()
        .get::<Peer>()
        .map_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED), |peer| peer.0);
    let client = state.limits.client_address(peer, request.headers());
    Ok(state.exports.take(client)?)
}

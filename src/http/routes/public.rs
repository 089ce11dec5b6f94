//! The public routes: a public device, its current and historical readings, and the map.
//!
//! An unknown device and a private one answer the very same 404, so the routes do not reveal
//! which ids exist. Visibility is read from the device store on every request: making a device
//! private hides it at once (only the map may lag, by its cache's time to live).

use std::sync::Arc;

use crate::domain::field_errors::both;
use crate::domain::{Device, DeviceUuid, HistoricalQuery, QueryParams};
use crate::http::cacheable::{max_age, revalidate, Rendered};
use crate::http::error::ApiError;
use crate::http::respond::Data;
use crate::http::state::AppState;
use crate::http::views::{HistoricalView, MapEntryView, PublicDeviceView, SnapshotView};
use crate::http::{Request, Response};
use crate::read::{current, map, series};

const NOT_PUBLIC: &str = "no public device with this id";

async fn public_device(state: &AppState, id: DeviceUuid) -> Result<Device, ApiError> {
    let device = state.devices.find(id).await?;
    device
        .filter(|device| device.flags.is_public)
        .ok_or(ApiError::NotFound(NOT_PUBLIC))
}

/// `GET /public/devices/{id}`.
pub async fn device(request: Request, state: &AppState, id: &str) -> Result<Response, ApiError> {
    let device = public_device(state, DeviceUuid::parse_path(id)?).await?;
    let rendered = Rendered::json(&Data {
        data: PublicDeviceView::new(&device),
    })?;
    Ok(rendered.respond(request.headers(), revalidate()))
}

/// `GET /public/devices/{id}/current`: the location only if it is public too.
pub async fn current(request: Request, state: &AppState, id: &str) -> Result<Response, ApiError> {
    let device = public_device(state, DeviceUuid::parse_path(id)?).await?;
    let snapshot = current::snapshot(state.readings.as_ref(), &[device.id], state.clock.now())
        .await?
        .ok_or(ApiError::NotFound(
            "this device has not reported any reading yet",
        ))?;
    let rendered = Rendered::json(&Data {
        data: SnapshotView::new(&snapshot, device.flags.is_location_public),
    })?;
    Ok(rendered.respond(request.headers(), revalidate()))
}

/// `GET /public/devices/{id}/historical?timeline=…&tz=…`.
pub async fn historical(
    request: Request,
    state: &AppState,
    id: &str,
) -> Result<Response, ApiError> {
    let (id, query) = both(
        DeviceUuid::parse_path(id),
        HistoricalQuery::parse(&QueryParams::parse(request.uri().query())),
    )?;
    let device = public_device(state, id).await?;
    let series = series::timeline(
        state.readings.as_ref(),
        &[device.id],
        query,
        state.clock.now(),
    )
    .await?;
    let rendered = Rendered::json(&HistoricalView::new(&series, query.timeline))?;
    Ok(rendered.respond(request.headers(), revalidate()))
}

/// `GET /public/map/devices`: served from the cache; the store is asked at most once per TTL.
pub async fn map(request: Request, state: &AppState) -> Result<Response, ApiError> {
    let rendered = state
        .map
        .try_get_with((), render_map(state))
        .await
        .map_err(ApiError::Shared)?;
    Ok(rendered.respond(request.headers(), max_age(state.map_ttl)))
}

async fn render_map(state: &AppState) -> Result<Arc<Rendered>, ApiError> {
    let entries = map::entries(
        state.devices.as_ref(),
        state.readings.as_ref(),
        state.clock.now(),
    )
    .await?;
    let views: Vec<MapEntryView<'_>> = entries.iter().map(MapEntryView::new).collect();
    Ok(Arc::new(Rendered::json_with_gzip(&Data { data: views })?))
}

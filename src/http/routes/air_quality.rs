//! The owner's reads: current snapshots, timelines and custom ranges, owner-wide or per device,
//! and the raw export of a device's readings.

use hyper::StatusCode;

use crate::domain::field_errors::both;
use crate::domain::{CustomQuery, DeviceUuid, ExportQuery, HistoricalQuery, OwnerId, QueryParams};
use crate::http::encodings::export_formats::{self, Format};
use crate::http::encodings::respond;
use crate::http::encodings::views::{points, HistoricalView, SnapshotView};
use crate::http::error::ApiError;
use crate::http::guards::authenticate;
use crate::http::state::AppState;
use crate::http::{Request, Response};
use crate::read::series;
use crate::store::Fleet;

const DEVICE_NOT_FOUND: &str = "no device with this id";
const NEVER_REPORTED: &str = "this device has not reported any reading yet";
const NONE_REPORTED: &str = "none of your devices has reported any reading yet";

async fn owned_devices(state: &AppState, owner: &OwnerId) -> Result<Vec<DeviceUuid>, ApiError> {
    Ok(state.devices.owned_ids(owner).await?)
}

async fn owned_device(
    state: &AppState,
    owner: &OwnerId,
    id: DeviceUuid,
) -> Result<DeviceUuid, ApiError> {
    let device = state.devices.get(owner, id).await?;
    device
        .map(|device| device.id)
        .ok_or(ApiError::NotFound(DEVICE_NOT_FOUND))
}

/// `GET /air-quality/current`: every device of the owner pooled.
pub async fn owner_current(request: Request, state: &AppState) -> Result<Response, ApiError> {
    let owner = authenticate::owner(&request, state).await?;
    let devices = owned_devices(state, &owner).await?;
    let snapshot = super::known(state, Fleet::owned(&owner, &devices), NONE_REPORTED).await?;
    respond::data(SnapshotView::new(&snapshot, true))
}

/// `GET /devices/{id}/current`.
pub async fn device_current(
    request: Request,
    state: &AppState,
    id: &str,
) -> Result<Response, ApiError> {
    let owner = authenticate::owner(&request, state).await?;
    let id = DeviceUuid::parse_path(id)?;
    let device = owned_device(state, &owner, id).await?;
    let snapshot = super::known(state, Fleet::of(&[device]), NEVER_REPORTED).await?;
    respond::data(SnapshotView::new(&snapshot, true))
}

/// `GET /air-quality/historical?timeline=…&tz=…`.
pub async fn owner_historical(request: Request, state: &AppState) -> Result<Response, ApiError> {
    let owner = authenticate::owner(&request, state).await?;
    let query = HistoricalQuery::parse(&QueryParams::parse(request.uri().query()))?;
    let devices = owned_devices(state, &owner).await?;
    historical(state, Fleet::owned(&owner, &devices), query).await
}

/// `GET /devices/{id}/historical?timeline=…&tz=…`.
pub async fn device_historical(
    request: Request,
    state: &AppState,
    id: &str,
) -> Result<Response, ApiError> {
    let owner = authenticate::owner(&request, state).await?;
    let (id, query) = both(
        DeviceUuid::parse_path(id),
        HistoricalQuery::parse(&QueryParams::parse(request.uri().query())),
    )?;
    let device = owned_device(state, &owner, id).await?;
    historical(state, Fleet::of(&[device]), query).await
}

/// `GET …/historical` of the fleet's devices pooled, for the owner.
async fn historical(
    state: &AppState,
    fleet: Fleet<'_>,
    query: HistoricalQuery,
) -> Result<Response, ApiError> {
    let series = series::timeline(state.readings.as_ref(), fleet, query, state.clock.now()).await?;
    respond::json(
        StatusCode::OK,
        &HistoricalView::new(&series, query.timeline),
    )
}

/// `GET /air-quality/custom?start_date=…&end_date=…&interval=…&tz=…`.
pub async fn custom(request: Request, state: &AppState) -> Result<Response, ApiError> {
    let owner = authenticate::owner(&request, state).await?;
    let query = CustomQuery::parse(&QueryParams::parse(request.uri().query()))?;
    let devices = owned_devices(state, &owner).await?;
    let series = series::custom(
        state.readings.as_ref(),
        Fleet::owned(&owner, &devices),
        query,
    )
    .await?;
    respond::data(points(&series))
}

/// `GET /devices/{id}/readings?start=…&end=…`: the device's raw readings, streamed as JSON, CSV
/// or NDJSON (by `Accept`).
pub async fn device_readings(
    request: Request,
    state: &AppState,
    id: &str,
) -> Result<Response, ApiError> {
    let owner = authenticate::owner(&request, state).await?;
    let params = QueryParams::parse(request.uri().query());
    let (id, (query, format)) = both(
        DeviceUuid::parse_path(id),
        both(
            ExportQuery::parse(&params),
            Format::choose(request.headers(), &params),
        ),
    )?;
    state
        .raw_retention
        .check_export(query.start, state.clock.now())?;
    let device = owned_device(state, &owner, id).await?;
    let slot = super::export_slot(&request, state)?;
    let readings =
        crate::read::export::readings(state.readings.as_ref(), device, query, true).await?;
    Ok(export_formats::respond(
        readings, format, device, query, false, slot,
    ))
}

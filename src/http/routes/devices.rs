//! The device registry: register, list, show, change, rotate the key, delete.
//!
//! Rotation and deletion evict the device's cached credentials before answering, so the old key
//! is refused from the very next upload. The list is paged when asked (`limit`, `cursor`; see
//! [`crate::domain::paging`]), whole otherwise.

use hyper::header::{HeaderValue, LINK};
use hyper::StatusCode;

use crate::domain::paging::{CURSOR, LIMIT};
use crate::domain::{
    Device, DeviceCursor, DeviceId, DeviceKey, DevicePage, DevicePatch, DeviceUuid, QueryParams,
    Registration,
};
use crate::http::edge::body;
use crate::http::encodings::respond;
use crate::http::encodings::views::DeviceView;
use crate::http::error::ApiError;
use crate::http::guards::authenticate;
use crate::http::state::AppState;
use crate::http::{Request, Response};

const NOT_FOUND: &str = "no device with this id";

/// `POST /devices`: registers a device and hands out its first key.
pub async fn register(request: Request, state: &AppState) -> Result<Response, ApiError> {
    let owner = authenticate::owner(&request, state).await?;
    let registration =
        Registration::parse(&body::json(request, body::MAX_BODY, state.body_timeout).await?)?;
    let now = state.clock.now();
    let key = DeviceKey::generate();
    let device = Device {
        id: DeviceUuid::generate(),
        device_id: DeviceId::generate(),
        owner,
        name: registration.name,
        flags: registration.flags,
        created_at: now,
        updated_at: now,
    };
    state.devices.create(&device, key.hash()).await?;
    tracing::info!(device = %device.id, owner = %device.owner, "device registered");
    respond::json(
        StatusCode::CREATED,
        &respond::Data {
            data: DeviceView::with_key(&device, &key),
        },
    )
}

/// `GET /devices[?limit=N[&cursor=C]]`: the owner's devices, oldest first; with `limit`, one
/// page of them and, while more remain, a `Link` to the next.
pub async fn list(request: Request, state: &AppState) -> Result<Response, ApiError> {
    let owner = authenticate::owner(&request, state).await?;
    let Some(page) = DevicePage::parse(&QueryParams::parse(request.uri().query()))? else {
        let devices = state.devices.list(&owner).await?;
        return respond::data(devices.iter().map(DeviceView::new).collect::<Vec<_>>());
    };
    let paged = state.devices.list_page(&owner, &page).await?;
    let views: Vec<_> = paged.devices.iter().map(DeviceView::new).collect();
    let mut response = respond::data(views)?;
    if let Some(next) = paged.next {
        response
            .headers_mut()
            .insert(LINK, next_link(page.limit(), next)?);
    }
    Ok(response)
}

/// `Link: </api/v1/devices?limit=N&cursor=C>; rel="next"`, a reference relative to the host
/// like the pages' own links (a cursor is URL-safe as it is).
fn next_link(limit: u16, next: DeviceCursor) -> Result<HeaderValue, ApiError> {
    let target = format!(
        "</api/v1/devices?{LIMIT}={limit}&{CURSOR}={}>; rel=\"next\"",
        next.encode()
    );
    Ok(HeaderValue::try_from(target)?)
}

/// `GET /devices/{id}`.
pub async fn show(request: Request, state: &AppState, id: &str) -> Result<Response, ApiError> {
    let owner = authenticate::owner(&request, state).await?;
    let id = DeviceUuid::parse_path(id)?;
    let device = state
        .devices
        .get(&owner, id)
        .await?
        .ok_or(ApiError::NotFound(NOT_FOUND))?;
    respond::data(DeviceView::new(&device))
}

/// `PATCH /devices/{id}`: changes the name and flags present in the body.
pub async fn update(request: Request, state: &AppState, id: &str) -> Result<Response, ApiError> {
    let owner = authenticate::owner(&request, state).await?;
    let id = DeviceUuid::parse_path(id)?;
    let patch =
        DevicePatch::parse(&body::json(request, body::MAX_BODY, state.body_timeout).await?)?;
    let device = state
        .devices
        .update(&owner, id, &patch, state.clock.now())
        .await?
        .ok_or(ApiError::NotFound(NOT_FOUND))?;
    // Visibility, location and name show on the public map: it must not lag behind.
    state.map.invalidate();
    respond::data(DeviceView::new(&device))
}

/// `POST /devices/{id}/rotate-key`: a new key; the old one stops working at once.
pub async fn rotate_key(
    request: Request,
    state: &AppState,
    id: &str,
) -> Result<Response, ApiError> {
    let owner = authenticate::owner(&request, state).await?;
    let id = DeviceUuid::parse_path(id)?;
    let key = DeviceKey::generate();
    let device = state
        .devices
        .rotate_key(&owner, id, key.hash(), state.clock.now())
        .await?
        .ok_or(ApiError::NotFound(NOT_FOUND))?;
    state.device_keys.evict(&device.device_id);
    tracing::info!(device = %device.id, "device key rotated");
    respond::data(DeviceView::with_key(&device, &key))
}

/// `DELETE /devices/{id}`: the device and its credentials are gone at once.
pub async fn delete(request: Request, state: &AppState, id: &str) -> Result<Response, ApiError> {
    let owner = authenticate::owner(&request, state).await?;
    let id = DeviceUuid::parse_path(id)?;
    if state.devices.get(&owner, id).await?.is_none() {
        return Err(ApiError::NotFound(NOT_FOUND));
    }
    // The readings first: a store that cannot delete them leaves them out of the owner's reads
    // once the device is gone, and a failure here leaves the device (and its readings) whole.
    state.readings.forget_device(&owner, id).await?;
    let device = state
        .devices
        .delete(&owner, id)
        .await?
        .ok_or(ApiError::NotFound(NOT_FOUND))?;
    state.device_keys.evict(&device.device_id);
    state.map.invalidate();
    tracing::info!(device = %device.id, "device deleted");
    Ok(respond::empty(StatusCode::NO_CONTENT))
}

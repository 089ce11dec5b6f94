//! (method, path segments) → handler. Fifteen-odd routes need no framework: a path resolves to a
//! [`Route`] or to 404, a route lists its methods (405 with `Allow` otherwise), then one `match`
//! picks the handler.

use hyper::Method;

use super::error::ApiError;
use super::routes::{air_quality, data, devices, meta, public};
use super::state::AppState;
use super::{Request, Response};

/// Every resource the server knows, with its path parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route<'a> {
    /// `/healthz`
    Health,
    /// `/readyz`
    Ready,
    /// `/metrics`
    Metrics,
    /// `/api/v1/openapi.json`
    OpenApi,
    /// `/api/v1/devices`
    Devices,
    /// `/api/v1/devices/{id}`
    Device(&'a str),
    /// `/api/v1/devices/{id}/rotate-key`
    RotateKey(&'a str),
    /// `/api/v1/devices/{id}/current`
    DeviceCurrent(&'a str),
    /// `/api/v1/devices/{id}/historical`
    DeviceHistorical(&'a str),
    /// `/api/v1/data`
    Data,
    /// `/api/v1/air-quality/current`
    Current,
    /// `/api/v1/air-quality/historical`
    Historical,
    /// `/api/v1/air-quality/custom`
    Custom,
    /// `/api/v1/public/devices/{id}`
    PublicDevice(&'a str),
    /// `/api/v1/public/devices/{id}/current`
    PublicCurrent(&'a str),
    /// `/api/v1/public/devices/{id}/historical`
    PublicHistorical(&'a str),
    /// `/api/v1/public/map/devices`
    PublicMap,
}

impl<'a> Route<'a> {
    /// The route of a path, if any.
    pub fn resolve(path: &'a str) -> Option<Self> {
        if path == "/healthz" {
            return Some(Self::Health);
        }
        if path == "/readyz" {
            return Some(Self::Ready);
        }
        if path == "/metrics" {
            return Some(Self::Metrics);
        }
        let rest = path.strip_prefix("/api/v1/")?;
        let segments: Vec<&str> = rest.split('/').collect();
        Some(match segments.as_slice() {
            ["openapi.json"] => Self::OpenApi,
            ["devices"] => Self::Devices,
            ["devices", id] if !id.is_empty() => Self::Device(id),
            ["devices", id, "rotate-key"] if !id.is_empty() => Self::RotateKey(id),
            ["devices", id, "current"] if !id.is_empty() => Self::DeviceCurrent(id),
            ["devices", id, "historical"] if !id.is_empty() => Self::DeviceHistorical(id),
            ["data"] => Self::Data,
            ["air-quality", "current"] => Self::Current,
            ["air-quality", "historical"] => Self::Historical,
            ["air-quality", "custom"] => Self::Custom,
            ["public", "devices", id] if !id.is_empty() => Self::PublicDevice(id),
            ["public", "devices", id, "current"] if !id.is_empty() => Self::PublicCurrent(id),
            ["public", "devices", id, "historical"] if !id.is_empty() => Self::PublicHistorical(id),
            ["public", "map", "devices"] => Self::PublicMap,
            _ => return None,
        })
    }

    /// The methods the route accepts, as an `Allow` header value.
    pub fn allow(&self) -> &'static str {
        match self {
            Self::Devices => "GET, POST",
            Self::Device(_) => "GET, PATCH, DELETE",
            Self::RotateKey(_) | Self::Data => "POST",
            Self::Health
            | Self::Ready
            | Self::Metrics
            | Self::OpenApi
            | Self::DeviceCurrent(_)
            | Self::DeviceHistorical(_)
            | Self::Current
            | Self::Historical
            | Self::Custom => "GET",
            Self::PublicDevice(_)
            | Self::PublicCurrent(_)
            | Self::PublicHistorical(_)
            | Self::PublicMap => "GET, OPTIONS",
        }
    }

    /// Whether browsers on any origin may read the route (and so may send a CORS preflight).
    pub fn is_public(&self) -> bool {
        matches!(
            self,
            Self::PublicDevice(_)
                | Self::PublicCurrent(_)
                | Self::PublicHistorical(_)
                | Self::PublicMap
        )
    }
}

/// Routes a request to its handler; `path` is the request's path (the caller keeps a copy for
/// its log line and problem `instance`, and the route borrows its ids from it).
pub async fn dispatch(
    request: Request,
    path: &str,
    state: &AppState,
) -> Result<Response, ApiError> {
    let route = Route::resolve(path).ok_or(ApiError::RouteNotFound)?;
    let method = request.method().clone();
    match (route, method) {
        (Route::Health, Method::GET) => meta::health(),
        (Route::Ready, Method::GET) => meta::ready(state).await,
        (Route::Metrics, Method::GET) => Ok(meta::metrics(state)),
        (Route::OpenApi, Method::GET) => Ok(meta::openapi()),
        (Route::Devices, Method::POST) => devices::register(request, state).await,
        (Route::Devices, Method::GET) => devices::list(request, state).await,
        (Route::Device(id), Method::GET) => devices::show(request, state, id).await,
        (Route::Device(id), Method::PATCH) => devices::update(request, state, id).await,
        (Route::Device(id), Method::DELETE) => devices::delete(request, state, id).await,
        (Route::RotateKey(id), Method::POST) => devices::rotate_key(request, state, id).await,
        (Route::DeviceCurrent(id), Method::GET) => {
            air_quality::device_current(request, state, id).await
        }
        (Route::DeviceHistorical(id), Method::GET) => {
            air_quality::device_historical(request, state, id).await
        }
        (Route::Data, Method::POST) => data::upload(request, state).await,
        (Route::Current, Method::GET) => air_quality::owner_current(request, state).await,
        (Route::Historical, Method::GET) => air_quality::owner_historical(request, state).await,
        (Route::Custom, Method::GET) => air_quality::custom(request, state).await,
        (Route::PublicDevice(id), Method::GET) => public::device(request, state, id).await,
        (Route::PublicCurrent(id), Method::GET) => public::current(request, state, id).await,
        (Route::PublicHistorical(id), Method::GET) => public::historical(request, state, id).await,
        (Route::PublicMap, Method::GET) => public::map(request, state).await,
        (route, Method::OPTIONS) if route.is_public() => Ok(crate::http::public::preflight()),
        (route, _) => Err(ApiError::MethodNotAllowed {
            allow: route.allow(),
        }),
    }
}

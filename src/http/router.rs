//! (method, path segments) → handler. Fifteen-odd routes need no framework: a path resolves to a
//! [`Route`] or to 404, a route lists its methods (405 with `Allow` otherwise), then one `match`
//! picks the handler.

use hyper::Method;

use super::error::ApiError;
use super::routes::{devices, meta};
use super::state::AppState;
use super::{Request, Response};

/// Every resource the server knows, with its path parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route<'a> {
    /// `/healthz`
    Health,
    /// `/readyz`
    Ready,
    /// `/api/v1/openapi.json`
    OpenApi,
    /// `/api/v1/devices`
    Devices,
    /// `/api/v1/devices/{id}`
    Device(&'a str),
    /// `/api/v1/devices/{id}/rotate-key`
    RotateKey(&'a str),
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
        let rest = path.strip_prefix("/api/v1/")?;
        let segments: Vec<&str> = rest.split('/').collect();
        Some(match segments.as_slice() {
            ["openapi.json"] => Self::OpenApi,
            ["devices"] => Self::Devices,
            ["devices", id] if !id.is_empty() => Self::Device(id),
            ["devices", id, "rotate-key"] if !id.is_empty() => Self::RotateKey(id),
            _ => return None,
        })
    }

    /// The methods the route accepts, as an `Allow` header value.
    pub fn allow(&self) -> &'static str {
        match self {
            Self::Devices => "GET, POST",
            Self::Device(_) => "GET, PATCH, DELETE",
            Self::RotateKey(_) => "POST",
            Self::Health | Self::Ready | Self::OpenApi => "GET",
        }
    }
}

/// Routes a request to its handler.
pub async fn dispatch(request: Request, state: &AppState) -> Result<Response, ApiError> {
    let path = request.uri().path().to_owned();
    let route = Route::resolve(&path).ok_or(ApiError::RouteNotFound)?;
    let method = request.method().clone();
    match (route, method) {
        (Route::Health, Method::GET) => meta::health(),
        (Route::Ready, Method::GET) => meta::ready(state).await,
        (Route::OpenApi, Method::GET) => Ok(meta::openapi()),
        (Route::Devices, Method::POST) => devices::register(request, state).await,
        (Route::Devices, Method::GET) => devices::list(request, state).await,
        (Route::Device(id), Method::GET) => devices::show(request, state, id).await,
        (Route::Device(id), Method::PATCH) => devices::update(request, state, id).await,
        (Route::Device(id), Method::DELETE) => devices::delete(request, state, id).await,
        (Route::RotateKey(id), Method::POST) => devices::rotate_key(request, state, id).await,
        (route, _) => Err(ApiError::MethodNotAllowed {
            allow: route.allow(),
        }),
    }
}

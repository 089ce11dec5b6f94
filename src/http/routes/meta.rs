//! Service endpoints: liveness, readiness, metrics, the OpenAPI document.

use bytes::Bytes;
use hyper::StatusCode;
use serde_json::json;

use crate::http::encodings::{negotiate, respond};
use crate::http::error::ApiError;
use crate::http::state::AppState;
use crate::http::{Request, Response};

/// The OpenAPI 3.1 document of every route, body, response and problem.
pub const OPENAPI: &str = include_str!("../openapi.json");

/// `GET /healthz`: the process serves requests.
pub fn health() -> Result<Response, ApiError> {
    respond::json(StatusCode::OK, &json!({ "status": "ok" }))
}

/// `GET /readyz`: the stores answer, and the last batch of uploads was stored.
pub async fn ready(state: &AppState) -> Result<Response, ApiError> {
    if state.metrics.writes_failing() {
        return Err(ApiError::WritesFailing);
    }
    state.devices.ping().await.map_err(ApiError::NotReady)?;
    state.readings.ping().await.map_err(ApiError::NotReady)?;
    respond::json(StatusCode::OK, &json!({ "status": "ready" }))
}

/// `GET /metrics`: the OpenMetrics text exposition, or the classic Prometheus text when
/// `Accept` prefers `text/plain` (older scrapers, `promtool check metrics`).
pub fn metrics(request: &Request, state: &AppState) -> Response {
    let text = state.metrics.render();
    if negotiate::preferred(request.headers(), METRICS_FORMATS) == 1 {
        return respond::with_body(
            StatusCode::OK,
            crate::metrics::classic::CONTENT_TYPE,
            Bytes::from(crate::metrics::classic::convert(&text)),
        );
    }
    respond::with_body(
        StatusCode::OK,
        crate::metrics::CONTENT_TYPE,
        Bytes::from(text),
    )
}

/// The representations of `/metrics`, the default first.
const METRICS_FORMATS: &[&str] = &["application/openmetrics-text", "text/plain"];

/// `GET /api/v1/openapi.json`.
pub fn openapi() -> Response {
    respond::with_body(
        StatusCode::OK,
        "application/json",
        Bytes::from_static(OPENAPI.as_bytes()),
    )
}

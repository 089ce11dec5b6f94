//! Building successful responses.

use bytes::Bytes;
use http_body_util::{BodyExt as _, Full};
use hyper::header::{HeaderValue, CONTENT_TYPE};
use hyper::StatusCode;
use serde::Serialize;

use crate::http::error::ApiError;
use crate::http::{Body, Response};

/// `{"data": ...}`, the envelope of every resource response.
#[derive(Debug, Serialize)]
pub struct Data<T> {
    /// The resource.
    pub data: T,
}

/// A JSON response.
pub fn json(status: StatusCode, body: &impl Serialize) -> Result<Response, ApiError> {
    let bytes = serde_json::to_vec(body)?;
    Ok(with_body(status, "application/json", Bytes::from(bytes)))
}

/// `{"data": body}` with status 200.
pub fn data(body: impl Serialize) -> Result<Response, ApiError> {
    json(StatusCode::OK, &Data { data: body })
}

/// A response with a fixed content type.
pub fn with_body(status: StatusCode, content_type: &'static str, body: Bytes) -> Response {
    let mut response = hyper::Response::new(full(body));
    *response.status_mut() = status;
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    response
}

/// An empty response.
pub fn empty(status: StatusCode) -> Response {
    let mut response = hyper::Response::new(full(Bytes::new()));
    *response.status_mut() = status;
    response
}

/// A body sent all at once.
pub fn full(bytes: Bytes) -> Body {
    Full::new(bytes).map_err(|never| match never {}).boxed()
}

//! JSON request bodies: media type, size limit, syntax.
//!
//! The limit is decided from `Content-Length` before anything is read and, for a body without
//! one (chunked), while it streams, so an oversized body is never buffered whole.

use bytes::BytesMut;
use http_body_util::BodyExt;
use hyper::header::{CONTENT_LENGTH, CONTENT_TYPE};
use simd_json::OwnedValue;

use super::error::ApiError;
use super::Request;

/// Largest accepted body: 64 KiB.
pub const MAX_BODY: usize = 65_536;

/// The body of `request` as a JSON value.
pub async fn json(request: Request) -> Result<OwnedValue, ApiError> {
    if !declares_json(&request) {
        return Err(ApiError::UnsupportedMediaType);
    }
    let declared = request
        .headers()
        .get(CONTENT_LENGTH)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.parse::<u64>().ok());
    if declared.is_some_and(|length| length > MAX_BODY as u64) {
        return Err(ApiError::PayloadTooLarge);
    }
    let mut body = request.into_body();
    let mut bytes = BytesMut::with_capacity(declared.map_or(1024, |length| length as usize));
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(ApiError::BodyRead)?;
        if let Ok(data) = frame.into_data() {
            if bytes.len() + data.len() > MAX_BODY {
                return Err(ApiError::PayloadTooLarge);
            }
            bytes.extend_from_slice(&data);
        }
    }
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Err(ApiError::MalformedBody(
            "the body is empty; a JSON object is expected".into(),
        ));
    }
    simd_json::to_owned_value(&mut bytes)
        .map_err(|error| ApiError::MalformedBody(format!("the body is not valid JSON: {error}")))
}

/// Whether the media type is `application/json` (parameters such as `charset` allowed).
fn declares_json(request: &Request) -> bool {
    request
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.split(';').next())
        .is_some_and(|media_type| media_type.trim().eq_ignore_ascii_case("application/json"))
}

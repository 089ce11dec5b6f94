//! JSON request bodies: media type, content coding, size limit, deadline, syntax (nesting
//! bounded, numbers of any size: [`crate::http::encodings::json_value`]).
//!
//! The limit is decided from `Content-Length` before anything is read and, for a body without
//! one (chunked), while it streams, so an oversized body is never buffered whole. A
//! `Content-Encoding: gzip` body (cellular sensors pay for every byte) is held to the same limit
//! twice: as sent, and decompressed, where decompression stops one byte past the limit, so a
//! decompression bomb costs at most the limit in memory before it is refused with 413.
//!
//! The whole body must arrive within one deadline (`--body-timeout-ms`), counted from the first
//! read: a client that trickles its body a byte at a time, or stops halfway, would otherwise hold
//! its connection, its buffer and its place in the drain at shutdown for as long as it likes. It
//! is answered 408 and the connection is closed.

use std::io::Read as _;
use std::time::Duration;

use bytes::BytesMut;
use http_body_util::BodyExt;

use hyper::header::{CONTENT_ENCODING, CONTENT_LENGTH, CONTENT_TYPE};

use crate::domain::JsonDocument;
use crate::http::encodings::json_value;
use crate::http::error::ApiError;
use crate::http::Request;

/// Largest accepted body: 64 KiB.
pub const MAX_BODY: usize = 65_536;
/// Largest accepted body of a batch upload: 1 MiB.
pub const MAX_BATCH_BODY: usize = 1_048_576;

/// How the body was encoded for transfer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Coding {
    Identity,
    Gzip,
}

/// The body of `request` as a JSON value, at most `limit` bytes (also once decompressed), read
/// in full within `deadline`.
pub async fn json(
    request: Request,
    limit: usize,
    deadline: Duration,
) -> Result<JsonDocument, ApiError> {
    if !declares_json(&request) {
        return Err(ApiError::UnsupportedMediaType);
    }
    let coding = coding(&request)?;
    let declared = request
        .headers()
        .get(CONTENT_LENGTH)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.parse::<u64>().ok());
    if declared.is_some_and(|length| length > limit as u64) {
        return Err(ApiError::PayloadTooLarge { limit });
    }
    let capacity = declared.map_or(1024, |length| length as usize);
    let mut bytes = tokio::time::timeout(deadline, collect(request, limit, capacity))
        .await
        .map_err(|_| ApiError::BodyTimeout { deadline })??;
    if coding == Coding::Gzip {
        bytes = gunzip(&bytes, limit)?;
    }
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Err(ApiError::MalformedBody(
            "the body is empty; a JSON object is expected".into(),
        ));
    }
    json_value::parse(&bytes).map_err(|error| ApiError::MalformedBody(error.to_string()))
}

/// The body's bytes as sent, refused once they pass `limit`.
async fn collect(request: Request, limit: usize, capacity: usize) -> Result<BytesMut, ApiError> {
    let mut body = request.into_body();
    let mut bytes = BytesMut::with_capacity(capacity);
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(ApiError::BodyRead)?;
        if let Ok(data) = frame.into_data() {
            if bytes.len() + data.len() > limit {
                return Err(ApiError::PayloadTooLarge { limit });
            }
            bytes.extend_from_slice(&data);
        }
    }
    Ok(bytes)
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

/// The body's content coding: none (or `identity`) or `gzip`; anything else is 415.
fn coding(request: &Request) -> Result<Coding, ApiError> {
    let mut coding = Coding::Identity;
    for value in request.headers().get_all(CONTENT_ENCODING) {
        let text = value.to_str().map_err(|_| ApiError::UnsupportedEncoding)?;
        for name in text
            .split(',')
            .map(str::trim)
            .filter(|name| !name.is_empty())
        {
            if name.eq_ignore_ascii_case("gzip") || name.eq_ignore_ascii_case("x-gzip") {
                if coding == Coding::Gzip {
                    // Gzip twice is legal HTTP and never what a sensor means.
                    return Err(ApiError::UnsupportedEncoding);
                }
                coding = Coding::Gzip;
            } else if !name.eq_ignore_ascii_case("identity") {
                return Err(ApiError::UnsupportedEncoding);
            }
        }
    }
    Ok(coding)
}

/// The decompressed body, refused past `limit` bytes.
fn gunzip(compressed: &[u8], limit: usize) -> Result<BytesMut, ApiError> {
    let mut decoder = flate2::read::MultiGzDecoder::new(compressed).take(limit as u64 + 1);
    let mut plain = Vec::with_capacity(compressed.len().saturating_mul(4).min(limit + 1));
    decoder.read_to_end(&mut plain).map_err(|_| {
        ApiError::MalformedBody("the body is declared gzip but is not valid gzip data".into())
    })?;
    if plain.len() > limit {
        return Err(ApiError::PayloadTooLarge { limit });
    }
    Ok(BytesMut::from(plain.as_slice()))
}

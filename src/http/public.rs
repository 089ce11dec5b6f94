//! What public responses share: `Access-Control-Allow-Origin: *`, `Cache-Control`, an `ETag`
//! derived from the body, `If-None-Match` → 304, and the server-side cache of the map.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use hyper::header::{
    HeaderValue, ACCESS_CONTROL_ALLOW_HEADERS, ACCESS_CONTROL_ALLOW_METHODS,
    ACCESS_CONTROL_MAX_AGE, CACHE_CONTROL, ETAG, IF_NONE_MATCH,
};
use hyper::{HeaderMap, StatusCode};
use serde::Serialize;

use super::error::ApiError;
use super::{respond, Response};

/// A rendered JSON body and its entity tag.
#[derive(Debug)]
pub struct Rendered {
    body: Bytes,
    etag: HeaderValue,
}

impl Rendered {
    /// Renders `body` and tags it with a hash of the bytes.
    pub fn json(body: &impl Serialize) -> Result<Self, ApiError> {
        let body = Bytes::from(serde_json::to_vec(body)?);
        let hash = blake3::hash(&body).to_hex();
        let etag = HeaderValue::try_from(format!("\"{}\"", &hash[..32]))
            .map_err(|_| ApiError::Panic("a hex entity tag is always a valid header".into()))?;
        Ok(Self { body, etag })
    }

    /// 200 with the body, without caching headers (owner routes).
    pub fn plain(&self) -> Response {
        respond::with_body(StatusCode::OK, "application/json", self.body.clone())
    }

    /// 200 with the body, or 304 when `If-None-Match` names this entity tag (or `*`).
    pub fn respond(&self, request_headers: &HeaderMap, cache_control: HeaderValue) -> Response {
        let unchanged = request_headers
            .get_all(IF_NONE_MATCH)
            .iter()
            .filter_map(|value| value.to_str().ok())
            .flat_map(|value| value.split(','))
            .map(|tag| tag.trim().trim_start_matches("W/"))
            .any(|tag| tag == "*" || tag.as_bytes() == self.etag.as_bytes());
        let mut response = if unchanged {
            respond::empty(StatusCode::NOT_MODIFIED)
        } else {
            self.plain()
        };
        let headers = response.headers_mut();
        headers.insert(ETAG, self.etag.clone());
        headers.insert(CACHE_CONTROL, cache_control);
        response
    }
}

/// The answer to a CORS preflight: widgets may `GET` with `If-None-Match` from any origin (the
/// origin header itself is added by the server to every public answer).
pub fn preflight() -> Response {
    let mut response = respond::empty(StatusCode::NO_CONTENT);
    let headers = response.headers_mut();
    headers.insert(
        ACCESS_CONTROL_ALLOW_METHODS,
        HeaderValue::from_static("GET, OPTIONS"),
    );
    headers.insert(
        ACCESS_CONTROL_ALLOW_HEADERS,
        HeaderValue::from_static("If-None-Match"),
    );
    headers.insert(ACCESS_CONTROL_MAX_AGE, HeaderValue::from_static("86400"));
    response
}

/// Public device routes: caches must revalidate (a device made private disappears at once), which
/// the entity tag makes cheap.
pub fn revalidate() -> HeaderValue {
    HeaderValue::from_static("no-cache")
}

/// The map may be cached as long as the server caches it.
pub fn max_age(ttl: Duration) -> HeaderValue {
    HeaderValue::try_from(format!("public, max-age={}", ttl.as_secs()))
        .unwrap_or(HeaderValue::from_static("no-cache"))
}

/// The rendered map, shared by every poller until its time to live runs out. Concurrent misses
/// wait for one rendering, so the store is asked at most once per time to live.
pub type MapCache = moka::future::Cache<(), Arc<Rendered>>;

/// A map cache whose entry lives `ttl`.
pub fn map_cache(ttl: Duration) -> MapCache {
    moka::future::Cache::builder()
        .max_capacity(1)
        .time_to_live(ttl)
        .build()
}

//! Every failure of a request, and the one place where it becomes an RFC 9457 problem.
//!
//! Client faults get a precise `title`, `detail` and, for 422, the per-field `errors`. Server
//! faults get an opaque 500 whose detail names only the request id; the log keeps the whole cause
//! chain under that id.

use bytes::Bytes;
use hyper::header::{
    HeaderValue, ALLOW, CACHE_CONTROL, CONNECTION, CONTENT_TYPE, RETRY_AFTER, VARY,
    WWW_AUTHENTICATE,
};
use hyper::StatusCode;
use serde::Serialize;

use super::edge::request_id::RequestId;
use super::guards::export_slots::ExportsBusy;
use super::guards::rate_limit::Refusal;
use super::Response;
use crate::auth::{AuthError, JwksError};
use crate::domain::Limit;
use crate::domain::{FieldError, FieldErrors};
use crate::store::batch_writer::WriteError;
use crate::store::StoreError;
use crate::telemetry::chain;

/// `type` of 422 problems.
pub const VALIDATION_TYPE: &str = "urn:airq:problem:validation";
/// `type` of 400 problems.
pub const MALFORMED_TYPE: &str = "urn:airq:problem:malformed-body";
/// `type` of every other problem.
pub const BLANK_TYPE: &str = "about:blank";
/// `Retry-After` of an owner request whose token cannot be checked for want of the identity
/// provider's keys (a refetch is tried on the next request).
const IDENTITY_PROVIDER_RETRY_SECS: u64 = 5;
/// `Retry-After` of an export refused for want of a slot: about as long as a small export takes.
const EXPORT_RETRY_SECS: u64 = 5;

/// Which credential a 401 is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Credential {
    /// The owner's bearer token.
    Owner,
    /// The device's `X-Device-ID` / `X-Device-Key` headers.
    Device,
}

/// A failed request.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// The request target (path and query) is longer than the server reads.
    #[error("request target too long")]
    UriTooLong {
        /// The limit in bytes.
        limit: usize,
    },
    /// The request's `Host` breaks RFC 9112 (missing in HTTP/1.1, repeated, or not a host).
    #[error("bad Host: {0}")]
    BadHost(&'static str),
    /// The body is framed with a transfer coding other than `chunked` alone.
    #[error("unsupported transfer coding")]
    UnsupportedTransferCoding,
    /// No route has this path.
    #[error("no route for this path")]
    RouteNotFound,
    /// The path exists, the method does not.
    #[error("method not allowed")]
    MethodNotAllowed {
        /// The methods the path accepts, for the `Allow` header.
        allow: &'static str,
    },
    /// Credentials are missing or wrong; the detail says which, never why in cryptographic terms.
    #[error("unauthorized: {detail}")]
    Unauthorized {
        /// Owner token or device key.
        credential: Credential,
        /// For the client.
        detail: &'static str,
        /// For the log.
        #[source]
        cause: Option<AuthError>,
    },
    /// A rate limit refused the request.
    #[error("rate limited ({})", .0.limit.as_str())]
    RateLimited(Refusal),
    /// Path, query or body values failed validation.
    #[error("validation failed")]
    Validation(FieldErrors),
    /// The body is not declared as JSON.
    #[error("unsupported media type")]
    UnsupportedMediaType,
    /// The body is larger than the limit of its route (as sent, or decompressed).
    #[error("body too large")]
    PayloadTooLarge {
        /// The limit in bytes.
        limit: usize,
    },
    /// The body is encoded with something other than gzip.
    #[error("unsupported content encoding")]
    UnsupportedEncoding,
    /// The body is empty or not JSON.
    #[error("malformed body: {0}")]
    MalformedBody(String),
    /// The client stopped sending the body halfway.
    #[error("reading the body")]
    BodyRead(#[source] hyper::Error),
    /// The body did not arrive in full within the deadline (a slow or stalled client).
    #[error("the body did not arrive within {deadline:?}")]
    BodyTimeout {
        /// The deadline for the whole body.
        deadline: std::time::Duration,
    },
    /// No such resource for this caller.
    #[error("not found: {0}")]
    NotFound(&'static str),
    /// The owner has as many alert rules as allowed.
    #[error("alert rule limit reached")]
    AlertRuleLimit {
        /// The most rules an owner may have.
        limit: usize,
    },
    /// No current snapshot: the latest readings are older than the raw retention keeps.
    #[error("the latest readings are past the raw retention")]
    PastRetention {
        /// The latest reading's time.
        last_seen: chrono::DateTime<chrono::Utc>,
        /// The days raw readings are kept.
        days: u32,
    },
    /// No such resource behind a page's URL, for a client that did not ask for HTML (a browser
    /// gets the page's own 404): the problem of [`Self::NotFound`], plus `Vary: Accept` (the
    /// same URL answers HTML to a browser, so a shared cache must keep the two apart) and
    /// `Cache-Control: no-cache` (the device may be made public at any time).
    #[error("not found: {0}")]
    PageNotFound(&'static str),
    /// A store failed.
    #[error("store failure")]
    Store(#[from] StoreError),
    /// A failure shared by several waiting requests (a coalesced cache fill).
    #[error("shared failure")]
    Shared(#[source] std::sync::Arc<ApiError>),
    /// The batch writer could not commit the reading.
    #[error("storing the reading")]
    Write(#[from] WriteError),
    /// The identity provider's keys are unavailable: 503, not the client's fault nor a 500 of
    /// ours, and counted (`airq_identity_provider_failures_total`).
    #[error("identity provider unavailable")]
    IdentityProvider(#[source] JwksError),
    /// A dependency is not ready (for `/readyz`).
    #[error("not ready")]
    NotReady(#[source] StoreError),
    /// The last batch of uploads could not be stored, and none has been since (for `/readyz`).
    #[error("uploads are failing")]
    WritesFailing,
    /// No export slot is free, for the client or on the server.
    #[error("too many exports at once")]
    ExportsBusy(#[from] ExportsBusy),
    /// A response body could not be compressed.
    #[error("compressing the response")]
    Compress(#[source] std::io::Error),
    /// A response could not be rendered.
    #[error("rendering the response")]
    Render(#[from] serde_json::Error),
    /// A response header could not be built.
    #[error("building a response header")]
    Header(#[from] hyper::header::InvalidHeaderValue),
    /// The handler panicked.
    #[error("the handler panicked: {0}")]
    Panic(String),
}

impl From<Refusal> for ApiError {
    fn from(refusal: Refusal) -> Self {
        Self::RateLimited(refusal)
    }
}

impl From<FieldErrors> for ApiError {
    fn from(errors: FieldErrors) -> Self {
        Self::Validation(errors)
    }
}

/// The RFC 9457 body.
#[derive(Debug, Serialize)]
struct Problem<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    title: &'static str,
    status: u16,
    detail: String,
    instance: &'a str,
    errors: &'a [FieldError],
}

impl ApiError {
    /// The problem response for this error on request `instance` (the path, without query).
    pub fn into_response(self, instance: &str, request_id: &RequestId) -> Response {
        let mut headers: Vec<(hyper::header::HeaderName, HeaderValue)> = Vec::new();
        let no_fields = FieldErrors::new();
        let mut fields = &no_fields;
        let (status, kind, title, detail) = match &self {
            Self::UriTooLong { limit } => (
                StatusCode::URI_TOO_LONG,
                BLANK_TYPE,
                "URI Too Long",
                format!("the path and query must not exceed {limit} bytes together"),
            ),
            Self::BadHost(detail) => (
                StatusCode::BAD_REQUEST,
                BLANK_TYPE,
                "Bad Request",
                (*detail).to_owned(),
            ),
            Self::UnsupportedTransferCoding => {
                // The body's end cannot be found, so nothing after it on this connection can be
                // read as a request.
                headers.push((CONNECTION, HeaderValue::from_static("close")));
                (
                    StatusCode::BAD_REQUEST,
                    BLANK_TYPE,
                    "Bad Request",
                    "the only transfer coding understood is `chunked` alone; send the body \
                     with Content-Length, or chunked (Content-Encoding: gzip compresses it)"
                        .to_owned(),
                )
            }
            Self::RouteNotFound => (
                StatusCode::NOT_FOUND,
                BLANK_TYPE,
                "Not Found",
                format!("no resource at {instance}; the API lives under /api/v1, see /api/v1/openapi.json"),
            ),
            Self::MethodNotAllowed { allow } => {
                headers.push((ALLOW, HeaderValue::from_static(allow)));
                (
                    StatusCode::METHOD_NOT_ALLOWED,
                    BLANK_TYPE,
                    "Method Not Allowed",
                    format!("{instance} accepts {allow}"),
                )
            }
            Self::Unauthorized {
                credential, detail, ..
            } => {
                let challenge = match credential {
                    Credential::Owner => "Bearer realm=\"airq\"",
                    Credential::Device => "DeviceKey realm=\"airq\"",
                };
                headers.push((WWW_AUTHENTICATE, HeaderValue::from_static(challenge)));
                (StatusCode::UNAUTHORIZED, BLANK_TYPE, "Unauthorized", (*detail).to_owned())
            }
            Self::RateLimited(refusal) => {
                headers.push((RETRY_AFTER, HeaderValue::from(refusal.retry_after_secs)));
                let allowance = match refusal.limit {
                    Limit::Device => "the upload limit allows each device",
                    Limit::Public => "the public limit allows each client address",
                };
                let (what, note) = match refusal.limit {
                    Limit::Device => ("uploads", " (a batch counts once)"),
                    Limit::Public => ("requests", ""),
                };
                (
                    StatusCode::TOO_MANY_REQUESTS,
                    BLANK_TYPE,
                    "Too Many Requests",
                    format!(
                        "{allowance} {} {what} a minute, in bursts of {}{note}; retry after {} s",
                        refusal.rate.per_minute, refusal.rate.burst, refusal.retry_after_secs
                    ),
                )
            }
            Self::Validation(errors) => {
                fields = errors;
                let count = errors.as_slice().len();
                (
                    StatusCode::UNPROCESSABLE_ENTITY,
                    VALIDATION_TYPE,
                    "Validation Failed",
                    match count {
                        1 => "1 value is invalid; see errors".to_owned(),
                        n => format!("{n} values are invalid; see errors"),
                    },
                )
            }
            Self::UnsupportedMediaType => (
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                BLANK_TYPE,
                "Unsupported Media Type",
                "the body must be sent with Content-Type: application/json".to_owned(),
            ),
            Self::PayloadTooLarge { limit } => (
                StatusCode::PAYLOAD_TOO_LARGE,
                BLANK_TYPE,
                "Content Too Large",
                format!("the body must not exceed {limit} bytes (decompressed, when it is sent gzip-encoded)"),
            ),
            Self::UnsupportedEncoding => (
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                BLANK_TYPE,
                "Unsupported Media Type",
                "the body may be sent as is or with Content-Encoding: gzip, no other coding".to_owned(),
            ),
            Self::MalformedBody(why) => (StatusCode::BAD_REQUEST, MALFORMED_TYPE, "Malformed Body", why.clone()),
            Self::BodyRead(_) => (
                StatusCode::BAD_REQUEST,
                MALFORMED_TYPE,
                "Malformed Body",
                "the body could not be read to its end".to_owned(),
            ),
            Self::BodyTimeout { deadline } => {
                // The rest of the body may still arrive: the connection cannot be reused.
                headers.push((CONNECTION, HeaderValue::from_static("close")));
                (
                    StatusCode::REQUEST_TIMEOUT,
                    BLANK_TYPE,
                    "Request Timeout",
                    format!(
                        "the body did not arrive in full within {} ms; send the whole body without pauses",
                        deadline.as_millis()
                    ),
                )
            }
            Self::NotFound(what) => (StatusCode::NOT_FOUND, BLANK_TYPE, "Not Found", (*what).to_owned()),
            Self::AlertRuleLimit { limit } => (
                StatusCode::CONFLICT,
                BLANK_TYPE,
                "Conflict",
                format!("you have {limit} alert rules, the most an owner may have; delete one first"),
            ),
            Self::PastRetention { last_seen, days } => (
                StatusCode::NOT_FOUND,
                BLANK_TYPE,
                "Not Found",
                format!(
                    "no current snapshot: the latest reading, at {}, is older than the raw readings \
                     kept ({days} days, AIRQ_RAW_RETENTION_DAYS); its timelines and custom ranges \
                     still answer from the rollups",
                    last_seen.to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
                ),
            ),
            Self::PageNotFound(what) => {
                headers.push((VARY, HeaderValue::from_static("Accept")));
                headers.push((CACHE_CONTROL, HeaderValue::from_static("no-cache")));
                (StatusCode::NOT_FOUND, BLANK_TYPE, "Not Found", (*what).to_owned())
            }
            Self::WritesFailing => (
                StatusCode::SERVICE_UNAVAILABLE,
                BLANK_TYPE,
                "Service Unavailable",
                format!(
                    "the last batch of uploads could not be stored (the log says why); \
                     request id {request_id}"
                ),
            ),
            Self::ExportsBusy(busy) => {
                headers.push((RETRY_AFTER, HeaderValue::from(EXPORT_RETRY_SECS)));
                let (status, title, whose, setting) = match busy {
                    ExportsBusy::Client(_) => (
                        StatusCode::TOO_MANY_REQUESTS,
                        "Too Many Requests",
                        "this client address",
                        "AIRQ_EXPORTS_PER_CLIENT",
                    ),
                    ExportsBusy::Server(_) => (
                        StatusCode::SERVICE_UNAVAILABLE,
                        "Service Unavailable",
                        "the server",
                        "AIRQ_EXPORTS_MAX",
                    ),
                };
                let (ExportsBusy::Client(limit) | ExportsBusy::Server(limit)) = busy;
                (
                    status,
                    BLANK_TYPE,
                    title,
                    format!(
                        "{whose} streams {limit} raw exports already, as many as it may at once \
                         (`{setting}`); retry once one has ended, or after {EXPORT_RETRY_SECS} s"
                    ),
                )
            }
            Self::NotReady(_) => (
                StatusCode::SERVICE_UNAVAILABLE,
                BLANK_TYPE,
                "Service Unavailable",
                format!("a store does not answer; request id {request_id}"),
            ),
            Self::IdentityProvider(_) => {
                headers.push((RETRY_AFTER, HeaderValue::from(IDENTITY_PROVIDER_RETRY_SECS)));
                (
                    StatusCode::SERVICE_UNAVAILABLE,
                    BLANK_TYPE,
                    "Service Unavailable",
                    format!(
                        "the identity provider's signing keys cannot be fetched, so no owner token \
                         can be checked (the log says why); retry after \
                         {IDENTITY_PROVIDER_RETRY_SECS} s; request id {request_id}"
                    ),
                )
            }
            Self::Store(_)
            | Self::Shared(_)
            | Self::Write(_)
            | Self::Render(_)
            | Self::Header(_)
            | Self::Compress(_)
            | Self::Panic(_) => (
                StatusCode::INTERNAL_SERVER_ERROR,
                BLANK_TYPE,
                "Internal Server Error",
                format!("the request failed on our side; quote request id {request_id} when reporting it"),
            ),
        };
        if status.is_server_error() {
            tracing::error!(request_id = %request_id, error = %chain(&self), "request failed");
        } else {
            tracing::debug!(request_id = %request_id, error = %chain(&self), status = status.as_u16(), "request refused");
        }
        let problem = Problem {
            kind,
            title,
            status: status.as_u16(),
            detail,
            instance,
            errors: fields.as_slice(),
        };
        let body = serde_json::to_vec(&problem).unwrap_or_else(|_| b"{}".to_vec());
        let mut response = hyper::Response::new(super::encodings::respond::full(Bytes::from(body)));
        *response.status_mut() = status;
        let response_headers = response.headers_mut();
        response_headers.insert(
            CONTENT_TYPE,
            HeaderValue::from_static("application/problem+json"),
        );
        for (name, value) in headers {
            response_headers.insert(name, value);
        }
        response
    }
}

//! Cross-origin access (CORS): which answers a browser on another site may read, decided in one
//! place ([`Policy::for_request`], [`Policy::apply`]).
//!
//! Why three policies: public data is read by widgets on any site, so the public area answers
//! every origin with `*`; the OpenAPI document is read by hosted Swagger UI or Redoc, so it does
//! too; owner routes carry bearer tokens, so they answer only the exact origins an operator lists
//! in `AIRQ_CORS_ORIGINS` (a browser dashboard of one's own), echoing that origin with
//! `Vary: Origin`. Everything else (uploads, health, metrics) and every unlisted origin gets no
//! CORS header at all, and with no list configured owner routes behave as if CORS did not exist.
//!
//! The policy reads the route table ([`router::access_of`], [`router::allow_of`]), so the table
//! does not read the policy: the rule it needs (which paths any origin may read) lives with the
//! routes' access ([`any_origin`]), the origins an operator lists in [`CorsOrigins`], and the
//! server asks for a granted preflight ([`preflight`]) before it routes.

use hyper::header::{
    HeaderValue, ACCESS_CONTROL_ALLOW_HEADERS, ACCESS_CONTROL_ALLOW_METHODS,
    ACCESS_CONTROL_ALLOW_ORIGIN, ACCESS_CONTROL_EXPOSE_HEADERS, ACCESS_CONTROL_MAX_AGE, ORIGIN,
    VARY,
};
use hyper::{HeaderMap, StatusCode};

use super::encodings::{cacheable, respond};
use super::guards::access::{any_origin, Access};
use super::guards::cors_origins::CorsOrigins;
use super::router;
use super::Response;

/// Whether every origin may read `path` (and preflight it): the public area and the paths of
/// [`ANY_ORIGIN_PATHS`](crate::http::guards::access::ANY_ORIGIN_PATHS).
pub fn answers_any_origin(path: &str) -> bool {
    any_origin(router::access_of(path), path)
}

/// What the answer to one request says about cross-origin reading.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Policy {
    /// No CORS header.
    None,
    /// Any origin: `*`, the entity tag and the request id exposed.
    Any,
    /// This listed origin (an owner route): echoed, `Vary: Origin`.
    Listed(HeaderValue),
}

/// What a listed origin may read of an owner answer.
const OWNER_EXPOSE: &str = "ETag, X-Request-Id, Retry-After, Content-Disposition, Link";
/// What any origin may read of a public answer.
const PUBLIC_EXPOSE: &str = "ETag, X-Request-Id";
/// The request headers an owner preflight grants.
const OWNER_ALLOW_HEADERS: &str = "Authorization, Content-Type, If-None-Match, X-Request-Id";
/// How long a browser may cache an owner preflight, in seconds.
const OWNER_MAX_AGE: &str = "600";

impl Policy {
    /// The policy of a request for `path` with `headers`, given the configured `origins`.
    pub fn for_request(path: &str, headers: &HeaderMap, origins: &CorsOrigins) -> Self {
        if answers_any_origin(path) {
            return Self::Any;
        }
        if origins.is_empty() || router::access_of(path) != Some(Access::Owner) {
            return Self::None;
        }
        match headers.get(ORIGIN) {
            Some(origin) if origins.allows(origin) => Self::Listed(origin.clone()),
            _ => Self::None,
        }
    }

    /// Adds the policy's headers to an answer (errors included).
    pub fn apply(&self, headers: &mut HeaderMap) {
        match self {
            Self::None => {}
            Self::Any => {
                headers.insert(ACCESS_CONTROL_ALLOW_ORIGIN, HeaderValue::from_static("*"));
                headers.insert(
                    ACCESS_CONTROL_EXPOSE_HEADERS,
                    HeaderValue::from_static(PUBLIC_EXPOSE),
                );
            }
            Self::Listed(origin) => {
                headers.insert(ACCESS_CONTROL_ALLOW_ORIGIN, origin.clone());
                headers.insert(
                    ACCESS_CONTROL_EXPOSE_HEADERS,
                    HeaderValue::from_static(OWNER_EXPOSE),
                );
                let vary = match headers.get(VARY).and_then(|vary| vary.to_str().ok()) {
                    Some(vary) if !vary.is_empty() => {
                        HeaderValue::try_from(format!("{vary}, Origin"))
                            .unwrap_or(HeaderValue::from_static("Origin"))
                    }
                    _ => HeaderValue::from_static("Origin"),
                };
                headers.insert(VARY, vary);
            }
        }
    }
}

/// The answer to `OPTIONS` on `path`, when it is a preflight this server grants: the public one
/// ([`cacheable::preflight`]) on any-origin paths; on an owner route from a listed origin, 204
/// granting the route's methods (its `Allow`) and the owner request headers. `None`: not a
/// granted preflight (the router then answers 405, or 404 for a path no route matches).
pub fn preflight(path: &str, headers: &HeaderMap, origins: &CorsOrigins) -> Option<Response> {
    let allow = router::allow_of(path)?;
    match Policy::for_request(path, headers, origins) {
        Policy::None => None,
        Policy::Any => Some(cacheable::preflight()),
        Policy::Listed(_) => {
            let mut response = respond::empty(StatusCode::NO_CONTENT);
            let headers = response.headers_mut();
            headers.insert(
                ACCESS_CONTROL_ALLOW_METHODS,
                HeaderValue::try_from(allow).ok()?,
            );
            headers.insert(
                ACCESS_CONTROL_ALLOW_HEADERS,
                HeaderValue::from_static(OWNER_ALLOW_HEADERS),
            );
            headers.insert(
                ACCESS_CONTROL_MAX_AGE,
                HeaderValue::from_static(OWNER_MAX_AGE),
            );
            Some(response)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vary_is_extended_not_replaced() {
        let mut headers = HeaderMap::new();
        headers.insert(VARY, HeaderValue::from_static("Accept"));
        Policy::Listed(HeaderValue::from_static("https://a.example")).apply(&mut headers);
        assert_eq!(headers[VARY], "Accept, Origin");
        assert_eq!(headers[ACCESS_CONTROL_ALLOW_ORIGIN], "https://a.example");
    }
}

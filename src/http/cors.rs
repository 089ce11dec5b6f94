//! Cross-origin access (CORS): which answers a browser on another site may read, decided in one
//! place ([`Policy::for_request`], [`Policy::apply`]).
//!
//! Why three policies: public data is read by widgets on any site, so the public area answers
//! every origin with `*`; the OpenAPI document is read by hosted Swagger UI or Redoc, so it does
//! too; owner routes carry bearer tokens, so they answer only the exact origins an operator lists
//! in `AIRQ_CORS_ORIGINS` (a browser dashboard of one's own), echoing that origin with
//! `Vary: Origin`. Everything else (uploads, health, metrics) and every unlisted origin gets no
//! CORS header at all, and with no list configured owner routes behave as if CORS did not exist.

use std::fmt;

use hyper::header::{
    HeaderValue, ACCESS_CONTROL_ALLOW_HEADERS, ACCESS_CONTROL_ALLOW_METHODS,
    ACCESS_CONTROL_ALLOW_ORIGIN, ACCESS_CONTROL_EXPOSE_HEADERS, ACCESS_CONTROL_MAX_AGE, ORIGIN,
    VARY,
};
use hyper::{HeaderMap, StatusCode};

use super::encodings::respond;
use super::router::{self, Access};
use super::Response;

/// Paths outside the public area that any origin may read (and preflight): the OpenAPI document.
pub const ANY_ORIGIN_PATHS: &[&str] = &["/api/v1/openapi.json"];

/// Whether every origin may read `path` (and preflight it): the public area and
/// [`ANY_ORIGIN_PATHS`].
pub fn answers_any_origin(path: &str) -> bool {
    any_origin(router::access_of(path), path)
}

/// [`answers_any_origin`] for a path whose access is known (the router compiling its table
/// asks this, before [`router::access_of`] can answer).
pub fn any_origin(access: Option<Access>, path: &str) -> bool {
    access == Some(Access::Public) || ANY_ORIGIN_PATHS.contains(&path)
}

/// One web origin, `scheme://host[:port]`, as a browser sends it in `Origin` (scheme and host in
/// lower case, no path, no default-port normalisation: `https://a.example:443` is not
/// `https://a.example`, as for browsers).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Origin(String);

impl Origin {
    /// Parses `https://app.example` or `http://localhost:5173`.
    pub fn parse(text: &str) -> Result<Self, String> {
        let bad = |why: &str| {
            format!("`{text}` is not a web origin such as https://app.example:8443 ({why})")
        };
        let (scheme, rest) = text.split_once("://").ok_or_else(|| bad("no scheme"))?;
        let scheme = scheme.to_ascii_lowercase();
        if scheme != "http" && scheme != "https" {
            return Err(bad("the scheme is http or https"));
        }
        if rest.contains(['/', '?', '#', '@']) {
            return Err(bad("no path, query, fragment or user"));
        }
        let (host, port) = if rest.starts_with('[') {
            match rest.find(']') {
                Some(end) => match &rest[end + 1..] {
                    "" => (&rest[..=end], None),
                    after => (
                        &rest[..=end],
                        Some(after.strip_prefix(':').unwrap_or(after)),
                    ),
                },
                None => (rest, None),
            }
        } else {
            match rest.split_once(':') {
                Some((host, port)) => (host, Some(port)),
                None => (rest, None),
            }
        };
        let host_ok = if let Some(inner) = host.strip_prefix('[') {
            inner
                .strip_suffix(']')
                .is_some_and(|ip| ip.parse::<std::net::Ipv6Addr>().is_ok())
        } else {
            !host.is_empty()
                && host
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.')
        };
        if !host_ok {
            return Err(bad("the host is a name or an address"));
        }
        if let Some(port) = port {
            if port.is_empty()
                || !port.bytes().all(|b| b.is_ascii_digit())
                || port.parse::<u16>().map_or(true, |port| port == 0)
            {
                return Err(bad("the port is 1 to 65535"));
            }
        }
        Ok(Self(format!("{scheme}://{}", rest.to_ascii_lowercase())))
    }

    /// The origin as `Origin` spells it.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// The origins allowed on owner routes (`AIRQ_CORS_ORIGINS`); empty means none.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CorsOrigins(Vec<Origin>);

impl CorsOrigins {
    /// Parses a comma-separated list of origins; empty means none.
    pub fn parse(text: &str) -> Result<Self, String> {
        text.split(',')
            .map(str::trim)
            .filter(|item| !item.is_empty())
            .map(Origin::parse)
            .collect::<Result<Vec<_>, _>>()
            .map(Self)
    }

    /// Whether no origin is allowed.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The listed origin that `value` (a request's `Origin`) names exactly.
    fn allows(&self, value: &HeaderValue) -> bool {
        self.0
            .iter()
            .any(|origin| origin.as_str().as_bytes() == value.as_bytes())
    }
}

impl fmt::Display for CorsOrigins {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (index, origin) in self.0.iter().enumerate() {
            if index > 0 {
                f.write_str(",")?;
            }
            f.write_str(origin.as_str())?;
        }
        Ok(())
    }
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
/// ([`crate::http::encodings::cacheable::preflight`]) on any-origin paths; on an owner route from a listed
/// origin, 204 granting `allow` (the route's methods) and the owner request headers. `None`:
/// not a granted preflight (the caller answers 405).
pub fn preflight(
    path: &str,
    headers: &HeaderMap,
    origins: &CorsOrigins,
    allow: &str,
) -> Option<Response> {
    match Policy::for_request(path, headers, origins) {
        Policy::None => None,
        Policy::Any => Some(super::encodings::cacheable::preflight()),
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
    fn origins_parse_exactly() {
        for good in [
            "https://app.example",
            "http://localhost:5173",
            "HTTPS://App.Example:8443",
            "http://[::1]:3000",
            "http://127.0.0.1",
        ] {
            assert!(Origin::parse(good).is_ok(), "{good}");
        }
        assert_eq!(
            Origin::parse("HTTPS://App.Example:8443").map(|o| o.0),
            Ok("https://app.example:8443".to_owned())
        );
        for bad in [
            "app.example",
            "ftp://app.example",
            "https://app.example/",
            "https://app.example/path",
            "https://",
            "https://app.example:",
            "https://app.example:0",
            "https://app.example:99999",
            "https://user@app.example",
            "https://app example",
            "*",
            "null",
        ] {
            assert!(Origin::parse(bad).is_err(), "{bad}");
        }
        let list =
            CorsOrigins::parse(" https://a.example , http://localhost:5173,").expect("test value");
        assert_eq!(list.to_string(), "https://a.example,http://localhost:5173");
        assert!(CorsOrigins::parse("").expect("test value").is_empty());
        assert!(CorsOrigins::parse("https://a.example,nope").is_err());
    }

    #[test]
    fn vary_is_extended_not_replaced() {
        let mut headers = HeaderMap::new();
        headers.insert(VARY, HeaderValue::from_static("Accept"));
        Policy::Listed(HeaderValue::from_static("https://a.example")).apply(&mut headers);
        assert_eq!(headers[VARY], "Accept, Origin");
        assert_eq!(headers[ACCESS_CONTROL_ALLOW_ORIGIN], "https://a.example");
    }
}

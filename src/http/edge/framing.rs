//! The message rules of HTTP/1.1 (RFC 9112) that hyper leaves to the application: a request
//! names its host exactly once, and its body is framed in a way the server understands.
//!
//! Why here: hyper parses `Host` and `Transfer-Encoding` as ordinary fields. It reads a body sent
//! `Transfer-Encoding: gzip, chunked` as if only `chunked` were named, so the server would take
//! still-compressed bytes for the body; behind a proxy that reads the framing differently, such a
//! mismatch is how requests are smuggled. Both are refused before anything else looks at the
//! request, right after the target's length.

use hyper::header::{HOST, TRANSFER_ENCODING};
use hyper::http::uri::Authority;
use hyper::Version;

use crate::http::error::ApiError;

/// Refuses a request whose `Host` or `Transfer-Encoding` breaks RFC 9112: an HTTP/1.1 request
/// without exactly one valid `Host` (§3.2: 400), and a transfer coding other than `chunked` alone
/// (400, and the connection is closed, since the body's end cannot be found). §6.3 requires 400
/// where `chunked` is not the last coding; where it is (`gzip, chunked`), §6.1 suggests 501, but
/// a 5xx says the server failed, and here only the client did: it counted in the 5xx metrics and
/// the error log, which any client could fill. So every such framing is the client's 400.
pub fn check<B>(request: &hyper::Request<B>) -> Result<(), ApiError> {
    let headers = request.headers();
    let mut hosts = headers.get_all(HOST).iter();
    match (hosts.next(), hosts.next()) {
        (None, _) if request.version() == Version::HTTP_11 => {
            return Err(ApiError::BadHost("an HTTP/1.1 request must name its Host"));
        }
        (Some(_), Some(_)) => return Err(ApiError::BadHost("the request names Host twice")),
        (Some(host), None)
            if host
                .to_str()
                .ok()
                .and_then(|text| text.parse::<Authority>().ok())
                .is_none_or(|authority| authority.as_str().contains('@')) =>
        {
            return Err(ApiError::BadHost("the Host field is not a host[:port]"));
        }
        _ => {}
    }
    let mut codings = headers.get_all(TRANSFER_ENCODING).iter();
    match (codings.next(), codings.next()) {
        (None, _) => Ok(()),
        (Some(coding), None)
            if coding
                .to_str()
                .is_ok_and(|text| text.trim().eq_ignore_ascii_case("chunked")) =>
        {
            Ok(())
        }
        _ => Err(ApiError::UnsupportedTransferCoding),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(version: Version, headers: &[(&str, &str)]) -> hyper::Request<()> {
        let mut builder = hyper::Request::builder().uri("/healthz").version(version);
        for (name, value) in headers {
            builder = builder.header(*name, *value);
        }
        builder.body(()).unwrap_or_default()
    }

    /// Which rule refused the request, if one did.
    fn refused(version: Version, headers: &[(&str, &str)]) -> Option<&'static str> {
        check(&request(version, headers))
            .err()
            .map(|error| match error {
                ApiError::BadHost(_) => "host",
                ApiError::UnsupportedTransferCoding => "coding",
                _ => "other",
            })
    }

    #[test]
    fn an_http_11_request_names_one_valid_host() {
        let v11 = Version::HTTP_11;
        assert_eq!(refused(v11, &[("host", "airq.example:8080")]), None);
        assert_eq!(refused(v11, &[("host", "[::1]:8080")]), None);
        assert_eq!(refused(v11, &[]), Some("host"));
        assert_eq!(refused(v11, &[("host", "a"), ("host", "b")]), Some("host"));
        assert_eq!(refused(v11, &[("host", "a b")]), Some("host"));
        assert_eq!(refused(v11, &[("host", "user@airq")]), Some("host"));
    }

    #[test]
    fn an_http_10_request_may_leave_the_host_out() {
        assert_eq!(refused(Version::HTTP_10, &[]), None);
        assert_eq!(refused(Version::HTTP_10, &[("host", "a b")]), Some("host"));
    }

    #[test]
    fn chunked_alone_is_the_one_transfer_coding_understood() {
        let with = |coding| {
            refused(
                Version::HTTP_11,
                &[("host", "airq"), ("transfer-encoding", coding)],
            )
        };
        assert_eq!(with("chunked"), None);
        assert_eq!(with(" Chunked "), None);
        assert_eq!(with("gzip, chunked"), Some("coding"));
        assert_eq!(with("foo, chunked"), Some("coding"));
        assert_eq!(with("chunked, chunked"), Some("coding"));
    }
}

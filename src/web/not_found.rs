//! The pages' "not found": a page for a person, a problem for a program.
//!
//! A browser (its `Accept` prefers `text/html`) that follows a link to a device that is not
//! public, or not there, gets a readable 404 page with a way back to the map; any other client
//! gets the usual RFC 9457 problem ([`ApiError::PageNotFound`], rendered where every problem is).
//! Unknown and private devices get the very same answer, as on the public API routes.

use bytes::Bytes;
use hyper::header::{HeaderValue, CACHE_CONTROL, VARY, X_CONTENT_TYPE_OPTIONS};
use hyper::{HeaderMap, StatusCode};
use maud::html;

use super::layout::{self, Chrome, HTML};
use crate::http::error::ApiError;
use crate::http::{negotiate, respond, Response};

/// What a page's 404 can be, the server's preference first.
const FORMATS: &[&str] = &["application/problem+json", "text/html"];

/// The 404 of a page: the HTML page when the request prefers HTML, else
/// [`ApiError::PageNotFound`] with `detail`.
///
/// Both carry `Vary: Accept` (which of the two a client gets depends on its `Accept`, so a
/// shared cache must not hand a browser's page to a program or the other way round) and
/// `Cache-Control: no-cache` (a 404 is heuristically cacheable, but the device may be made
/// public at any time; the page's 200 says the same).
pub fn answer(request_headers: &HeaderMap, detail: &'static str) -> Result<Response, ApiError> {
    if FORMATS[negotiate::preferred(request_headers, FORMATS)] != "text/html" {
        return Err(ApiError::PageNotFound(detail));
    }
    let page = layout::document(
        "Not found · airq",
        Chrome::Full,
        html! {},
        html! {
            div class="not-found" {
                h1 { "Not found" }
                p { (detail) "." }
                p { "A device shows here only while its owner publishes it. See the " a href="/map" { "live map" } " for the public ones." }
            }
        },
    );
    let mut response =
        respond::with_body(StatusCode::NOT_FOUND, HTML, Bytes::from(page.into_string()));
    let headers = response.headers_mut();
    headers.insert(X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    headers.insert(VARY, HeaderValue::from_static("Accept"));
    headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    Ok(response)
}

#[cfg(test)]
mod tests {
    use hyper::header::ACCEPT;

    use super::*;

    fn with_accept(accept: &'static str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(ACCEPT, HeaderValue::from_static(accept));
        headers
    }

    #[test]
    fn browsers_get_a_page() {
        let browser =
            with_accept("text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8");
        let response = answer(&browser, "no public device with this id").expect("a page");
        assert_eq!(response.status(), StatusCode::NOT_FOUND);
        assert_eq!(response.headers()["content-type"], HTML);
        assert_eq!(response.headers()["vary"], "Accept");
        assert_eq!(response.headers()["cache-control"], "no-cache");
    }

    #[test]
    fn programs_get_the_problem() {
        for headers in [
            HeaderMap::new(),
            with_accept("application/json"),
            with_accept("*/*"),
        ] {
            assert!(matches!(
                answer(&headers, "x"),
                Err(ApiError::PageNotFound("x"))
            ));
        }
    }
}

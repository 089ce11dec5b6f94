//! The pages for people (`/`, `/map`, `/devices/{id}`) and the map library they load
//! (`/assets/leaflet-1.9.4/…`): what each page needs is read here, beside the other routes, and
//! drawn by [`crate::web`], which only renders; the answer that carries a page is made here too.
//!
//! Every page is tagged with a hash of its bytes (`If-None-Match` → 304) and revalidated on every
//! use, as the public device routes are. A page's 404 is a page for a person and a problem for a
//! program ([`not_found`]).

use bytes::Bytes;
use chrono_tz::Tz;
use hyper::header::{HeaderValue, CACHE_CONTROL, VARY, X_CONTENT_TYPE_OPTIONS};
use hyper::{HeaderMap, StatusCode};
use maud::Markup;

use super::public::public_device;
use crate::domain::{BucketPlan, DeviceUuid, HistoricalQuery, Timeline};
use crate::http::encodings::cacheable::{revalidate, Rendered};
use crate::http::encodings::{negotiate, respond};
use crate::http::error::ApiError;
use crate::http::state::AppState;
use crate::http::{Request, Response};
use crate::read::{current, series};
use crate::store::Fleet;
use crate::web::device_page::{self, DeviceData};
use crate::web::layout::{Chrome, HTML};
use crate::web::{assets, home, map_page};

/// What the device page says of a device it does not show.
const NOT_PUBLIC: &str = "no public device with this id";

/// What a page's 404 can be, the server's preference first.
const FORMATS: &[&str] = &["application/problem+json", "text/html"];

/// `GET /`.
pub fn home(request: &Request) -> Result<Response, ApiError> {
    Ok(page(home::render(), request.headers()))
}

/// `GET /map[?embed=1]`.
pub fn map(request: &Request, state: &AppState) -> Result<Response, ApiError> {
    let chrome = Chrome::from_query(request.uri().query());
    let poll = map_page::poll_interval(state.map_ttl);
    Ok(page(
        map_page::render(&state.map_settings, chrome, poll),
        request.headers(),
    ))
}

/// `GET /devices/{id}`: an id that is no UUID, a private device and a missing one get the same
/// 404.
pub async fn device(request: Request, state: &AppState, id: &str) -> Result<Response, ApiError> {
    let Ok(id) = DeviceUuid::parse_path(id) else {
        return not_found(request.headers(), NOT_PUBLIC);
    };
    let device = match public_device(state, id).await {
        Err(ApiError::NotFound(_)) => return not_found(request.headers(), NOT_PUBLIC),
        found => found?,
    };
    let now = state.clock.now();
    let readings = state.readings.as_ref();
    let ids = [device.id];
    let query = |timeline| HistoricalQuery {
        timeline,
        tz: Tz::UTC,
    };
    let (snapshot, day, month) = tokio::try_join!(
        current::snapshot(readings, Fleet::of(&ids), now, state.raw_retention),
        series::timeline(readings, Fleet::of(&ids), query(Timeline::Daily), now),
        series::timeline(readings, Fleet::of(&ids), query(Timeline::Monthly), now),
    )?;
    let data = DeviceData {
        device,
        snapshot: snapshot.known(),
        day: (BucketPlan::timeline(Timeline::Daily, Tz::UTC, now), day),
        month: (BucketPlan::timeline(Timeline::Monthly, Tz::UTC, now), month),
        now,
    };
    let chrome = Chrome::from_query(request.uri().query());
    Ok(page(
        device_page::render(&data, &state.map_settings, chrome),
        request.headers(),
    ))
}

/// `GET /assets/leaflet-1.9.4/{file}` and `…/images/{file}`: `name` is the path below
/// [`assets::LEAFLET_PATH`]. The path names the version, so the file never changes under it: a
/// year's `Cache-Control`, `immutable`.
pub fn library_file(request: &Request, name: &str) -> Result<Response, ApiError> {
    let Some((media_type, bytes)) = assets::file(name) else {
        return Err(ApiError::NotFound("no such file of the map library"));
    };
    let rendered = Rendered::tagged_as(Bytes::from_static(bytes), media_type);
    let mut response = rendered.respond(
        request.headers(),
        HeaderValue::from_static("public, max-age=31536000, immutable"),
    );
    response
        .headers_mut()
        .insert(X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    Ok(response)
}

/// A page as a 200 answer: tagged with a hash of its bytes and revalidated on every use.
fn page(page: Markup, request_headers: &HeaderMap) -> Response {
    let rendered = Rendered::tagged_as(Bytes::from(page.into_string()), HTML);
    let mut response = rendered.respond(request_headers, revalidate());
    response
        .headers_mut()
        .insert(X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    response
}

/// The 404 of a page: the not-found page ([`crate::web::not_found`]) when the request prefers
/// HTML, else [`ApiError::PageNotFound`] with `detail`.
///
/// Both carry `Vary: Accept` (which of the two a client gets depends on its `Accept`, so a
/// shared cache must not hand a browser's page to a program or the other way round) and
/// `Cache-Control: no-cache` (a 404 is heuristically cacheable, but the device may be made
/// public at any time; the page's 200 says the same).
fn not_found(request_headers: &HeaderMap, detail: &'static str) -> Result<Response, ApiError> {
    if FORMATS[negotiate::preferred(request_headers, FORMATS)] != "text/html" {
        return Err(ApiError::PageNotFound(detail));
    }
    let page = crate::web::not_found::render(detail);
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
        let response = not_found(&browser, "no public device with this id").expect("a page");
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
                not_found(&headers, "x"),
                Err(ApiError::PageNotFound("x"))
            ));
        }
    }
}

//! The map library, served by the binary itself: Leaflet 1.9.4's `dist/` files (BSD 2-Clause,
//! its licence beside them in `vendor/leaflet-1.9.4/LICENSE`, served too), so `/map` and the
//! device page's map work offline and on networks that block CDNs. `AIRQ_MAP_LIBRARY_URL` still
//! points the pages elsewhere (a CDN) for those who prefer that.
//!
//! The files are compiled in, unchanged from the `leaflet@1.9.4` npm package (the pages load them
//! with the same subresource integrity as from a CDN, and a test checks it). Their path names the
//! version, so they never change under it: a year's `Cache-Control`, `immutable`, and a strong
//! `ETag` for the revalidations that happen anyway.

use bytes::Bytes;
use hyper::header::{HeaderValue, X_CONTENT_TYPE_OPTIONS};

use crate::http::cacheable::Rendered;
use crate::http::error::ApiError;
use crate::http::{Request, Response};

/// Where the files are served from: the default of `AIRQ_MAP_LIBRARY_URL`.
pub const LEAFLET_PATH: &str = "/assets/leaflet-1.9.4/";

/// The files: name (below [`LEAFLET_PATH`]), media type, bytes.
const FILES: &[(&str, &str, &[u8])] = &[
    (
        "leaflet.js",
        "text/javascript; charset=utf-8",
        include_bytes!("vendor/leaflet-1.9.4/leaflet.js"),
    ),
    (
        "leaflet.css",
        "text/css; charset=utf-8",
        include_bytes!("vendor/leaflet-1.9.4/leaflet.css"),
    ),
    (
        "LICENSE",
        "text/plain; charset=utf-8",
        include_bytes!("vendor/leaflet-1.9.4/LICENSE"),
    ),
    (
        "images/layers.png",
        "image/png",
        include_bytes!("vendor/leaflet-1.9.4/images/layers.png"),
    ),
    (
        "images/layers-2x.png",
        "image/png",
        include_bytes!("vendor/leaflet-1.9.4/images/layers-2x.png"),
    ),
    (
        "images/marker-icon.png",
        "image/png",
        include_bytes!("vendor/leaflet-1.9.4/images/marker-icon.png"),
    ),
    (
        "images/marker-icon-2x.png",
        "image/png",
        include_bytes!("vendor/leaflet-1.9.4/images/marker-icon-2x.png"),
    ),
    (
        "images/marker-shadow.png",
        "image/png",
        include_bytes!("vendor/leaflet-1.9.4/images/marker-shadow.png"),
    ),
];

/// `GET /assets/leaflet-1.9.4/{file}` and `…/images/{file}`: `name` is the path below
/// [`LEAFLET_PATH`].
pub fn show(request: &Request, name: &str) -> Result<Response, ApiError> {
    let Some((_, media_type, bytes)) = FILES.iter().find(|(file, _, _)| *file == name) else {
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

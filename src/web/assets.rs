//! The map library, served by the binary itself: Leaflet 1.9.4's `dist/` files (BSD 2-Clause,
//! its licence beside them in `vendor/leaflet-1.9.4/LICENSE`, served too), so `/map` and the
//! device page's map work offline and on networks that block CDNs. `AIRQ_MAP_LIBRARY_URL` still
//! points the pages elsewhere (a CDN) for those who prefer that.
//!
//! The files are compiled in, unchanged from the `leaflet@1.9.4` npm package (the pages load them
//! with the same subresource integrity as from a CDN, and a test checks it). Their path names the
//! version, so they never change under it: a year's `Cache-Control`, `immutable`, and a strong
//! `ETag` for the revalidations that happen anyway (set by their route,
//! `crate::http::routes::pages`).

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

/// The file at `name` (the path below [`LEAFLET_PATH`]): its media type and bytes.
pub fn file(name: &str) -> Option<(&'static str, &'static [u8])> {
    FILES
        .iter()
        .find(|(file, _, _)| *file == name)
        .map(|&(_, media_type, bytes)| (media_type, bytes))
}

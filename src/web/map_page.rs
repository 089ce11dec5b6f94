//! `GET /map`: the live map of public devices, for people; `/map?embed=1` is the same map without
//! the site's header and footer, for an `<iframe>` on another site.
//!
//! The page is static for the life of the process (its settings are the only inputs), so it
//! costs nothing to serve; the browser does the rest: it loads the map library from
//! [`super::settings`], then polls the clusters feed (`/api/v1/public/map/clusters`) for the
//! visible bounding box at the current zoom only, with `If-None-Match`, so an unchanged view costs
//! a 304 and a view of the world stays a few hundred features however large the fleet. Clusters
//! and devices are drawn on one canvas (one SVG element per marker would not scale), coloured by
//! the AQI category from the page's legend ([`super::layout::legend`]). The initial view can be
//! set with `lat`, `lon` and `zoom` in the query (read by the script).

use std::time::Duration;

use maud::{html, Markup, PreEscaped};

use super::layout::{self, Chrome};
use super::settings::MapSettings;

/// The script of the map and of the device page's location map.
pub const SCRIPT: &str = include_str!("map.js");

/// The map feed (every device), linked for readers without JavaScript.
pub const FEED: &str = "/api/v1/public/map/devices";

/// The clusters feed the page polls.
pub const CLUSTERS: &str = "/api/v1/public/map/clusters";

/// How often the page polls: the map's cache lifetime (asking more often would only get the
/// same answer), within bounds a person notices neither as lag nor as load.
pub fn poll_interval(map_ttl: Duration) -> Duration {
    map_ttl.clamp(Duration::from_secs(1), Duration::from_secs(60))
}

/// The `<head>` additions that load the map library's style sheet.
pub fn library_style(settings: &MapSettings) -> Markup {
    html! {
        link rel="stylesheet" href=(settings.style_url())
            integrity=[settings.style_integrity.as_deref()] crossorigin="anonymous";
    }
}

/// The map library and the page script, at the end of `<body>`.
pub fn library_script(settings: &MapSettings) -> Markup {
    html! {
        script src=(settings.script_url())
            integrity=[settings.script_integrity.as_deref()] crossorigin="anonymous" {}
        script { (PreEscaped(SCRIPT)) }
    }
}

/// The page.
pub fn render(settings: &MapSettings, chrome: Chrome, poll: Duration) -> Markup {
    let body = html! {
        div class="map-wrap" {
            div id="map" data-feed=(CLUSTERS) data-tiles=(settings.tile_url)
                data-attribution=(settings.tile_attribution)
                data-poll-ms=(poll.as_millis())
                data-embedded[chrome == Chrome::Embedded] {}
            (layout::legend())
            p id="map-status" role="status" { "Loading the map…" }
            // What the link returns to a browser: the feed's plain JSON (GeoJSON needs an
            // `Accept` a link cannot send, and the feed has no query parameter for it), and only
            // the devices the map shows.
            noscript {
                p class="page" {
                    "The live map needs JavaScript. The devices it shows (public devices whose location is public, at their latest located reading) are also listed as JSON at "
                    a href=(FEED) { (FEED) }
                    " (as GeoJSON for clients that send "
                    code { "Accept: application/geo+json" }
                    ")."
                }
            }
        }
        (library_script(settings))
    };
    layout::document(
        "Live air quality map · airq",
        chrome,
        library_style(settings),
        body,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::web::settings::{parse_library_url, parse_tile_url, Integrity};

    fn settings() -> MapSettings {
        MapSettings {
            library_url: parse_library_url("https://cdn.example/leaflet/").expect("url"),
            script_integrity: Integrity::parse("sha384-abc").expect("integrity"),
            style_integrity: Integrity::parse("").expect("integrity"),
            tile_url: parse_tile_url("https://tiles.example/{z}/{x}/{y}.png").expect("url"),
            tile_attribution: "&copy; Tiles".to_owned(),
        }
    }

    #[test]
    fn the_library_is_loaded_with_its_integrity_when_there_is_one() {
        let page = render(&settings(), Chrome::Full, Duration::from_secs(5)).into_string();
        assert!(page.contains(
            r#"<script src="https://cdn.example/leaflet/leaflet.js" integrity="sha384-abc" crossorigin="anonymous">"#
        ));
        assert!(page.contains(
            r#"<link rel="stylesheet" href="https://cdn.example/leaflet/leaflet.css" crossorigin="anonymous">"#
        ));
    }

    #[test]
    fn settings_reach_the_script_as_escaped_attributes() {
        let page = render(&settings(), Chrome::Embedded, Duration::from_secs(5)).into_string();
        assert!(page.contains(r#"data-tiles="https://tiles.example/{z}/{x}/{y}.png""#));
        assert!(page.contains(r#"data-attribution="&amp;copy; Tiles""#));
        assert!(page.contains(r#"data-poll-ms="5000""#));
        assert!(page.contains("data-embedded"));
    }

    #[test]
    fn polling_follows_the_cache_lifetime_within_bounds() {
        assert_eq!(
            poll_interval(Duration::from_millis(5000)),
            Duration::from_secs(5)
        );
        assert_eq!(poll_interval(Duration::ZERO), Duration::from_secs(1));
        assert_eq!(
            poll_interval(Duration::from_secs(600)),
            Duration::from_secs(60)
        );
    }
}

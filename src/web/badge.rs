//! `GET /api/v1/public/devices/{id}/badge.svg`: a small SVG badge with a public device's current
//! AQI in its category's colour, in the style of shields.io badges, for READMEs and web pages.
//!
//! The value is the current snapshot's AQI (the mean of the last hour). An offline device's badge
//! says so in grey instead of showing an old value as if it were current; a device without
//! readings says "no data". Its route (`crate::http::routes::public`) is a public one: CORS, rate
//! limit, an `ETag` from its bytes (`If-None-Match` → 304) and `Cache-Control: no-cache`, like
//! the device's JSON.

use maud::{html, Markup};

use crate::domain::{AqiCategory, Snapshot, Status};

/// The badge's media type.
pub const SVG: &str = "image/svg+xml";
/// The left half's text.
const LABEL: &str = "AQI";
/// Background of the label, and of a message without a category.
const GREY: &str = "#555";
/// Background of a message that is not current air quality (the pages' grey, one shade).
const MUTED: &str = super::layout::NOT_CURRENT;

/// The message and its colours for a snapshot.
fn message(snapshot: Option<&Snapshot>) -> (String, &'static str, &'static str) {
    match snapshot {
        None => ("no data".to_owned(), MUTED, "#fff"),
        Some(snapshot) if snapshot.status == Status::Offline => {
            (format!("{} offline", snapshot.means.aqi()), MUTED, "#fff")
        }
        Some(snapshot) => {
            let aqi = snapshot.means.aqi();
            let category = AqiCategory::of(aqi);
            (
                format!("{aqi} {}", category.name()),
                category.colour(),
                category.text_colour(),
            )
        }
    }
}

/// The badge.
pub fn render(snapshot: Option<&Snapshot>) -> Markup {
    let (text, fill, ink) = message(snapshot);
    let label_width = text_width(LABEL) + 10.0;
    let message_width = text_width(&text) + 10.0;
    let width = label_width + message_width;
    let summary = format!("{LABEL}: {text}");
    html! {
        svg xmlns="http://www.w3.org/2000/svg" width=(width) height="20" role="img"
            aria-label=(summary) data-aqi=[snapshot.map(|s| s.means.aqi())] {
            title { (summary) }
            linearGradient id="s" x2="0" y2="100%" {
                stop offset="0" stop-color="#bbb" stop-opacity=".1" {}
                stop offset="1" stop-opacity=".1" {}
            }
            clipPath id="r" { rect width=(width) height="20" rx="3" fill="#fff" {} }
            g clip-path="url(#r)" {
                rect width=(label_width) height="20" fill=(GREY) {}
                rect x=(label_width) width=(message_width) height="20" fill=(fill) {}
                rect width=(width) height="20" fill="url(#s)" {}
            }
            g text-anchor="middle" font-family="Verdana,Geneva,DejaVu Sans,sans-serif" font-size="11" {
                text x=(label_width / 2.0) y="14" fill="#fff" textLength=(label_width - 10.0) { (LABEL) }
                text x=(label_width + message_width / 2.0) y="14" fill=(ink)
                    textLength=(message_width - 10.0) { (text) }
            }
        }
    }
}

/// The width of `text` in 11 px Verdana, near enough (the text is stretched to it exactly).
fn text_width(text: &str) -> f64 {
    text.chars()
        .map(|c| match c {
            ' ' => 3.9,
            'i' | 'l' | 'j' | 't' | 'f' | 'r' => 4.3,
            'm' | 'w' => 9.7,
            'M' | 'W' => 10.5,
            '0'..='9' => 7.0,
            'A'..='Z' => 7.6,
            _ => 6.3,
        })
        .sum::<f64>()
        .round()
}

#[cfg(test)]
mod tests {
    use chrono::{DateTime, Utc};

    use super::*;
    use crate::domain::{Measure, Measurements};

    fn snapshot(aqi: i64, status: Status) -> Snapshot {
        let mut means = Measurements::default();
        means[Measure::Aqi] = aqi as f64;
        Snapshot {
            means,
            sample_count: 1,
            status,
            last_seen: DateTime::<Utc>::UNIX_EPOCH,
            location: None,
        }
    }

    #[test]
    fn an_online_device_shows_its_aqi_in_its_category_colour() {
        let svg = render(Some(&snapshot(42, Status::Online))).into_string();
        assert!(svg.contains("42 Good"));
        assert!(svg.contains(r##"fill="#00e400""##));
        assert!(svg.contains(r#"aria-label="AQI: 42 Good""#));
    }

    #[test]
    fn offline_and_silent_devices_are_grey() {
        let offline = render(Some(&snapshot(180, Status::Offline))).into_string();
        assert!(offline.contains("180 offline"));
        assert!(!offline.contains(AqiCategory::Unhealthy.colour()));
        assert!(render(None).into_string().contains("no data"));
    }

    #[test]
    fn the_badge_grows_with_its_message() {
        assert!(text_width("120 Unhealthy for Sensitive Groups") > text_width("42 Good"));
    }
}

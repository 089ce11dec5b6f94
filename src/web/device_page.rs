//! `GET /devices/{id}`: the page of one public device, for people.
//!
//! It shows the current AQI (the mean of the last hour, as the public current route) in its
//! category's colour with the other current values (an offline device's in grey, said to be the
//! means up to its last reading), the last 24 hours by hour and the last 30 days by day as
//! server-drawn SVG charts ([`super::chart`], no script needed), the location on a small map
//! only when the owner publishes it, and links to the raw CSV export over the charts' spans.
//! Numbers and the name are written by [`super::text`]. Times are UTC.
//! A device that is not public, or not there, or an id that is no UUID, gets the not-found
//! page ([`super::not_found`]), the same for all three; its route
//! (`crate::http::routes::pages`) reads the [`DeviceData`] this file renders.

use chrono::{DateTime, Days, NaiveTime, SecondsFormat, Utc};
use maud::{html, Markup};

use super::chart::AqiChart;
use super::layout::{self, aqi_chip, offline_aqi_chip, Chrome, NOT_CURRENT};
use super::map_page::{library_script, library_style};
use super::settings::MapSettings;
use super::text::{decimal, display_name, isolated};
use crate::domain::snapshot::is_fallback;
use crate::domain::{AqiCategory, BucketPlan, Device, DeviceUuid, Measure, Snapshot, Status};
use crate::read::series::Series;

/// Everything the page shows, read at one moment.
#[derive(Debug)]
pub struct DeviceData {
    /// The device (public).
    pub device: Device,
    /// Its current snapshot, `None` before its first reading.
    pub snapshot: Option<Snapshot>,
    /// The hours of the last day.
    pub day: (BucketPlan, Series),
    /// The days of the last 30.
    pub month: (BucketPlan, Series),
    /// When it was read.
    pub now: DateTime<Utc>,
}

/// The page.
pub fn render(data: &DeviceData, settings: &MapSettings, chrome: Chrome) -> Markup {
    let device = &data.device;
    // The name is user text: isolated from the page's own text around it (see super::text).
    let name = display_name(device.name.as_str());
    let plain_name = isolated(device.name.as_str());
    let location = data
        .snapshot
        .as_ref()
        .and_then(|snapshot| snapshot.location.as_ref())
        .filter(|_| device.flags.is_location_public);
    let body = html! {
        div class="page" {
            h1 {
                bdi { (name) } " "
                span class="tag" { @if device.flags.is_outdoor { "outdoor" } @else { "indoor" } }
            }
            (current_section(data.snapshot.as_ref(), data.now))
            section class="chart-card" {
                h2 { "Last 24 hours (AQI by hour, UTC)" }
                (chart("chart-24h", &format!("AQI of {plain_name} by hour over the last 24 hours"), &data.day, 6))
            }
            section class="chart-card" {
                h2 { "Last 30 days (AQI by day, UTC)" }
                (chart("chart-30d", &format!("AQI of {plain_name} by day over the last 30 days"), &data.month, 7))
            }
            @if let Some(location) = location {
                section class="chart-card" {
                    h2 { "Location" }
                    div id="device-map" data-lat=(location.lat) data-lon=(location.lon)
                        data-colour=(marker_colour(data.snapshot.as_ref()))
                        data-tiles=(settings.tile_url) data-attribution=(settings.tile_attribution) {}
                    p { (decimal(location.lat, 5)) ", " (decimal(location.lon, 5)) }
                }
            }
            section class="chart-card downloads" {
                h2 { "Raw readings" }
                p {
                    "Every reading as CSV (UTC, oldest first): "
                    // Each link covers exactly the span of the chart of the same name: the
                    // 24 whole hours up to the end of this hour, the 30 UTC days up to the end
                    // of today.
                    @if let Some((start, end)) = data.day.0.span() {
                        a href=(export_link(device.id, start, end)) title=(range_title(start, end)) download { "last 24 hours" }
                    }
                    @if let Some((start, end)) = data.month.0.span() {
                        a href=(export_link(device.id, start, end)) title=(range_title(start, end)) download { "last 30 days" }
                    }
                    @let (start, end) = last_days(data.now, 366);
                    a href=(export_link(device.id, start, end)) title=(range_title(start, end)) download { "last 366 days" }
                }
            }
        }
        @if location.is_some() {
            (library_script(settings))
        }
    };
    let head = if location.is_some() {
        library_style(settings)
    } else {
        html! {}
    };
    layout::document(&format!("{plain_name} · airq"), chrome, head, body)
}

fn current_section(snapshot: Option<&Snapshot>, now: DateTime<Utc>) -> Markup {
    let Some(snapshot) = snapshot else {
        // No snapshot: never reported, or (with a raw retention) its last hour is no longer kept.
        return html! { p class="empty" id="current" { "No current reading: this device has not reported any reading yet, or its latest one is older than the raw readings this server keeps." } };
    };
    let means = &snapshot.means;
    let status = snapshot.status.as_str();
    let offline = snapshot.status == Status::Offline;
    let last_seen = html! {
        time datetime=(snapshot.last_seen.to_rfc3339_opts(SecondsFormat::Secs, true)) {
            (snapshot.last_seen.format("%Y-%m-%d %H:%M UTC"))
        }
    };
    let readings = html! {
        (snapshot.sample_count)
        @if snapshot.sample_count == 1 { " reading" } @else { " readings" }
    };
    html! {
        div class="current" id="current" {
            // An offline device's means are old (the hour up to its last reading when the last
            // hour is empty): grey and marked offline, never on a category's colour as if they
            // were the air now (as its badge).
            @if offline { (offline_aqi_chip(means.aqi())) } @else { (aqi_chip(means.aqi())) }
            dl class="facts" {
                dt { "PM2.5" } dd data-field="pm2_5" { (decimal(means[Measure::Pm2_5], 1)) " µg/m³" }
                dt { "PM10" } dd data-field="pm10_0" { (decimal(means[Measure::Pm10_0], 1)) " µg/m³" }
                dt { "Temperature" } dd data-field="temperature" { (decimal(means[Measure::Temperature], 1)) " °C" }
                dt { "Humidity" } dd data-field="humidity" { (decimal(means[Measure::Humidity], 0)) " %" }
                dt { "Status" } dd data-field="status" class={ "status-" (status) } { (status) }
                dt { "Last reading" } dd data-field="last_seen" { (last_seen) }
            }
            @if offline {
                p class="offline-note" id="offline-note" {
                    strong { "This device is offline." }
                    " These values are not current air quality: they are the means of "
                    // The snapshot's window ends at the last reading; it is the last hour only
                    // while that reading is less than an hour old.
                    @if is_fallback(now, snapshot.last_seen) {
                        "the hour up to its last reading"
                    } @else {
                        "the last hour, up to its last reading"
                    }
                    " (at " (last_seen) "; " (readings) ")."
                }
            } @else {
                p class="empty" { "Means of the last hour (" (readings) ")." }
            }
        }
    }
}

/// The location marker's colour: the current AQI's category, grey when the device is offline
/// (its means are not the air now).
fn marker_colour(snapshot: Option<&Snapshot>) -> &'static str {
    match snapshot {
        Some(snapshot) if snapshot.status == Status::Offline => NOT_CURRENT,
        snapshot => AqiCategory::of(snapshot.map_or(0, |s| s.means.aqi())).colour(),
    }
}

fn chart(
    id: &str,
    title: &str,
    (plan, series): &(BucketPlan, Series),
    label_every: usize,
) -> Markup {
    AqiChart {
        id,
        title,
        buckets: &plan.buckets,
        points: &series.points,
        label_every,
    }
    .render()
}

/// The `days` UTC days up to the end of today, as the 30-day chart counts days.
fn last_days(now: DateTime<Utc>, days: u64) -> (DateTime<Utc>, DateTime<Utc>) {
    let tomorrow = (now.date_naive() + Days::new(1))
        .and_time(NaiveTime::MIN)
        .and_utc();
    (tomorrow - Days::new(days), tomorrow)
}

/// The public CSV export of `[start, end)`, by `format` (a link cannot set `Accept`).
fn export_link(id: DeviceUuid, start: DateTime<Utc>, end: DateTime<Utc>) -> String {
    format!(
        "/api/v1/public/devices/{}/readings?start={}&end={}&format=csv",
        id.as_uuid(),
        start.to_rfc3339_opts(SecondsFormat::Secs, true),
        end.to_rfc3339_opts(SecondsFormat::Secs, true)
    )
}

/// A link's range in words, for its tooltip.
fn range_title(start: DateTime<Utc>, end: DateTime<Utc>) -> String {
    format!(
        "{} to {} UTC (end excluded)",
        start.format("%Y-%m-%d %H:%M"),
        end.format("%Y-%m-%d %H:%M")
    )
}

#[cfg(test)]
mod tests {
    use chrono_tz::Tz;

    use super::*;
    use crate::domain::{DeviceFlags, DeviceId, DeviceName, OwnerId, Timeline};

    fn data(name: &str, flags: DeviceFlags) -> DeviceData {
        let now = DateTime::parse_from_rfc3339("2026-11-21T14:05:00Z")
            .expect("instant")
            .with_timezone(&Utc);
        let empty = |timeline| {
            (
                BucketPlan::timeline(timeline, Tz::UTC, now),
                Series {
                    tz: Tz::UTC,
                    points: Vec::new(),
                },
            )
        };
        DeviceData {
            device: Device {
                id: DeviceUuid::generate(),
                device_id: DeviceId::generate(),
                owner: OwnerId::parse("alice").expect("owner"),
                name: DeviceName::from_stored(name.to_owned()),
                flags,
                created_at: now,
                updated_at: now,
            },
            snapshot: None,
            day: empty(Timeline::Daily),
            month: empty(Timeline::Monthly),
            now,
        }
    }

    fn map_settings() -> crate::web::settings::MapSettings {
        crate::config::Config::new(
            "127.0.0.1:0".parse().expect("address"),
            std::path::PathBuf::from("unused"),
        )
        .map
    }

    #[test]
    fn a_device_name_is_text_never_markup() {
        let page = render(
            &data("<script>alert(1)</script>", DeviceFlags::default()),
            &map_settings(),
            Chrome::Full,
        )
        .into_string();
        assert!(!page.contains("<script>alert(1)</script>"));
        assert!(page.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
    }

    #[test]
    fn a_stored_names_bidi_controls_cannot_reach_the_page() {
        // Names stored before the API refused these controls: an override that would reverse
        // the page's text after the name, and a stray PDI that would close its isolation early.
        let page = render(
            &data("\u{202e}evil \u{2069}device", DeviceFlags::default()),
            &map_settings(),
            Chrome::Full,
        )
        .into_string();
        assert!(page.contains("<h1><bdi>evil device</bdi>"));
        assert!(page.contains("<title>\u{2068}evil device\u{2069} · airq</title>"));
        assert!(!page.contains('\u{202e}'));
        assert_eq!(
            page.matches('\u{2069}').count(),
            page.matches('\u{2068}').count()
        );
    }

    #[test]
    fn an_offline_device_seen_within_the_hour_says_which_hour_its_means_cover() {
        let now = DateTime::parse_from_rfc3339("2026-11-21T14:05:00Z")
            .expect("instant")
            .with_timezone(&Utc);
        let mut means = crate::domain::Measurements::default();
        means[Measure::Aqi] = 160.0;
        let snapshot = |minutes_ago| Snapshot {
            means,
            sample_count: 2,
            status: Status::Offline,
            last_seen: now - chrono::TimeDelta::minutes(minutes_ago),
            location: None,
        };
        // 30 minutes ago: the window is the last hour, which ends at that reading's time.
        let recent = current_section(Some(&snapshot(30)), now).into_string();
        assert!(recent.contains("the last hour, up to its last reading (at"));
        assert!(recent.contains("2 readings"));
        assert!(!recent.contains(AqiCategory::Unhealthy.colour()));
        // Three hours ago: the hour before that reading.
        let old = current_section(Some(&snapshot(180)), now).into_string();
        assert!(old.contains("the hour up to its last reading (at"));
    }

    #[test]
    fn export_links_cover_the_spans_of_their_charts() {
        let page = data("Garden", DeviceFlags::default());
        let id = page.device.id.as_uuid();
        let link = |plan: &BucketPlan| {
            let (start, end) = plan.span().expect("buckets");
            export_link(page.device.id, start, end)
        };
        // At 14:05: the 24 hours 15:00 yesterday to 15:00 today, the 30 days up to tomorrow.
        assert_eq!(
            link(&page.day.0),
            format!(
                "/api/v1/public/devices/{id}/readings?start=2026-11-20T15:00:00Z&end=2026-11-21T15:00:00Z&format=csv"
            )
        );
        assert_eq!(
            link(&page.month.0),
            format!(
                "/api/v1/public/devices/{id}/readings?start=2026-10-23T00:00:00Z&end=2026-11-22T00:00:00Z&format=csv"
            )
        );
        let (start, end) = last_days(page.now, 366);
        assert_eq!(
            (start.to_rfc3339(), end.to_rfc3339()),
            (
                "2025-11-21T00:00:00+00:00".to_owned(),
                "2026-11-22T00:00:00+00:00".to_owned()
            )
        );
    }
}

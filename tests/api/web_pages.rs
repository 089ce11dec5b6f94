//! The pages for people, over plain HTTP: `/map` and `/devices/{id}` (what a browser does with
//! them is tests/api/web_browser.rs).

use base64::Engine as _;
use chrono::{DateTime, TimeDelta, Utc};
use reqwest::Response;
use serde_json::{json, Value};

use crate::common::{at, fe, field_errors, located, measured, problem, sample_with, TestApp};

/// What Chromium sends when a person follows a link.
const BROWSER_ACCEPT: &str =
    "text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,*/*;q=0.8";

/// The instant the tests' clock stands at: mid-day, so the last hours lie in the same UTC day.
fn noon() -> DateTime<Utc> {
    at("2026-11-21T12:30:00Z")
}

async fn page(app: &TestApp, path: &str, accept: Option<&str>) -> Response {
    let mut request = app.client.get(format!("{}{path}", app.base));
    if let Some(accept) = accept {
        request = request.header("accept", accept);
    }
    request.send().await.expect("request sent")
}

async fn html(response: Response) -> String {
    assert_eq!(response.status(), 200);
    assert_eq!(
        response.headers()["content-type"],
        "text/html; charset=utf-8"
    );
    response.text().await.expect("a text body")
}

/// The `<svg id="…">` element of a page.
fn svg<'p>(page: &'p str, id: &str) -> &'p str {
    let start = page
        .find(&format!("<svg id=\"{id}\""))
        .unwrap_or_else(|| panic!("the page has the chart {id}"));
    let end = page[start..].find("</svg>").expect("the chart ends") + start;
    &page[start..end]
}

/// A public device of alice's with `flags` and readings at each of `times` (AQI 40, then 60, …).
async fn device_with_readings(
    app: &TestApp,
    name: &str,
    flags: Value,
    times: &[DateTime<Utc>],
) -> Value {
    let mut body = json!({ "name": name });
    if let (Some(body), Some(flags)) = (body.as_object_mut(), flags.as_object()) {
        body.extend(flags.clone());
    }
    let device = app.register("alice", body).await;
    for (index, time) in times.iter().enumerate() {
        let reading = located(
            sample_with(40 + 20 * index as i64, 12.5, 21.0),
            52.52,
            13.405,
        );
        app.upload_ok(&device, &measured(reading, *time)).await;
    }
    device
}

#[airq_test::test]
async fn the_front_page_says_what_airq_is_and_links_the_map_the_api_and_the_health_checks() {
    let app = TestApp::spawn().await;
    let page = html(page(&app, "/", None).await).await;
    assert!(page.contains("fleets of air-quality sensors"));
    for link in [
        "href=\"/map\"",
        "href=\"/api/v1/openapi.json\"",
        "href=\"/healthz\"",
        "href=\"/readyz\"",
        "href=\"/metrics\"",
    ] {
        assert!(page.contains(link), "{link}");
    }
    assert!(page.contains("airq token alice"), "the first steps");
    assert!(page.contains(&format!("airq {}", env!("CARGO_PKG_VERSION"))));
    // Every link the page shows answers.
    for path in [
        "/map",
        "/api/v1/openapi.json",
        "/healthz",
        "/readyz",
        "/metrics",
    ] {
        let response = app
            .client
            .get(format!("{}{path}", app.base))
            .send()
            .await
            .expect("request sent");
        assert_eq!(response.status(), 200, "{path}");
    }
}

#[airq_test::test]
async fn the_server_serves_the_map_library_it_pins_byte_for_byte() {
    let app = TestApp::spawn().await;
    for (file, media_type, pinned) in [
        (
            "leaflet.js",
            "text/javascript; charset=utf-8",
            airq::web::settings::DEFAULT_SCRIPT_INTEGRITY,
        ),
        (
            "leaflet.css",
            "text/css; charset=utf-8",
            airq::web::settings::DEFAULT_STYLE_INTEGRITY,
        ),
    ] {
        let response = page(&app, &format!("/assets/leaflet-1.9.4/{file}"), None).await;
        assert_eq!(response.status(), 200, "{file}");
        assert_eq!(response.headers()["content-type"], media_type);
        assert_eq!(
            response.headers()["cache-control"],
            "public, max-age=31536000, immutable"
        );
        let bytes = response.bytes().await.expect("the file");
        let digest = ring::digest::digest(&ring::digest::SHA384, &bytes);
        let served = format!(
            "sha384-{}",
            base64::engine::general_purpose::STANDARD.encode(digest.as_ref())
        );
        assert_eq!(served, pinned, "{file} is the pinned file");
    }
    for image in ["marker-icon.png", "layers-2x.png"] {
        let response = page(&app, &format!("/assets/leaflet-1.9.4/images/{image}"), None).await;
        assert_eq!(response.status(), 200, "{image}");
        assert_eq!(response.headers()["content-type"], "image/png");
    }
    let licence = page(&app, "/assets/leaflet-1.9.4/LICENSE", None).await;
    assert!(licence.text().await.expect("text").contains("BSD 2-Clause"));
    let missing = page(&app, "/assets/leaflet-1.9.4/leaflet-src.js", None).await;
    problem(missing, 404).await;
}

#[airq_test::test]
async fn the_map_page_loads_the_pinned_library_with_integrity_and_shows_the_legend() {
    let app = TestApp::spawn().await;
    let page = html(page(&app, "/map", Some(BROWSER_ACCEPT)).await).await;
    assert!(page.starts_with("<!DOCTYPE html>"));
    assert!(page.contains(r#"<script src="/assets/leaflet-1.9.4/leaflet.js" integrity="sha384-"#));
    assert!(page.contains(
        r#"<link rel="stylesheet" href="/assets/leaflet-1.9.4/leaflet.css" integrity="sha384-"#
    ));
    assert!(page.contains(r#"data-feed="/api/v1/public/map/clusters""#));
    assert!(page.contains(r#"data-tiles="https://tile.openstreetmap.org/{z}/{x}/{y}.png""#));
    for band in [
        "Good",
        "Moderate",
        "Unhealthy for Sensitive Groups",
        "Hazardous",
    ] {
        assert!(page.contains(&format!("data-name=\"{band}\"")), "{band}");
    }
    assert!(
        page.contains("<header"),
        "the whole page has the site's header"
    );
}

#[airq_test::test]
async fn the_map_pages_noscript_text_says_what_its_link_returns() {
    let app = TestApp::spawn().await;
    let page = html(page(&app, "/map", Some(BROWSER_ACCEPT)).await).await;
    let noscript = page
        .split("<noscript>")
        .nth(1)
        .and_then(|rest| rest.split("</noscript>").next())
        .expect("a noscript text");
    assert!(
        noscript.contains(r#"listed as JSON at <a href="/api/v1/public/map/devices">"#),
        "{noscript}"
    );
    assert!(noscript.contains("whose location is public"));
    // Followed by a browser, the link answers that JSON, not GeoJSON.
    let feed = page_at(&app, "/api/v1/public/map/devices").await;
    assert_eq!(feed.status(), 200);
    assert_eq!(feed.headers()["content-type"], "application/json");
    let body: Value = feed.json().await.expect("JSON");
    assert!(body["data"].is_array());
}

#[airq_test::test]
async fn the_map_library_and_tiles_are_settings() {
    let app = TestApp::spawn_with(|config| {
        config.map.library_url =
            airq::web::settings::parse_library_url("/static/leaflet/").expect("url");
        config.map.script_integrity = airq::web::settings::Integrity::parse("").expect("integrity");
        config.map.tile_url =
            airq::web::settings::parse_tile_url("https://tiles.example/{z}/{x}/{y}.png")
                .expect("url");
    })
    .await;
    let page = html(page(&app, "/map", None).await).await;
    assert!(page.contains(r#"<script src="/static/leaflet/leaflet.js" crossorigin="anonymous">"#));
    assert!(page.contains(r#"data-tiles="https://tiles.example/{z}/{x}/{y}.png""#));
}

#[airq_test::test]
async fn the_embedded_map_has_no_header_or_footer() {
    let app = TestApp::spawn().await;
    let page = html(page(&app, "/map?embed=1", None).await).await;
    assert!(!page.contains("<header") && !page.contains("<footer"));
    assert!(page.contains("data-embedded"));
    assert!(
        page.contains(r#"id="legend""#),
        "the legend is part of the map"
    );
}

#[airq_test::test]
async fn the_front_page_and_the_map_page_answer_304_to_their_entity_tags() {
    let app = TestApp::spawn().await;
    for path in ["/", "/map"] {
        let first = page(&app, path, None).await;
        let etag = first.headers()["etag"].clone();
        assert_eq!(first.headers()["cache-control"], "no-cache", "{path}");
        let again = app
            .client
            .get(format!("{}{path}", app.base))
            .header("if-none-match", etag)
            .send()
            .await
            .expect("request sent");
        assert_eq!(again.status(), 304, "{path}");
    }
}

#[airq_test::test]
async fn the_device_page_charts_one_point_per_hour_and_per_day_with_data() {
    let app = TestApp::spawn().await;
    app.clock.set(noon());
    let hours = |h: i64| noon() - TimeDelta::hours(h);
    let times = [
        hours(1),
        hours(3),
        hours(3) + TimeDelta::minutes(10),
        hours(30),
        hours(24 * 10),
        hours(24 * 40),
    ];
    let device = device_with_readings(&app, "Balcony", json!({ "is_public": true }), &times).await;
    let path = format!("/devices/{}", device["id"].as_str().expect("id"));
    let page = html(page(&app, &path, Some(BROWSER_ACCEPT)).await).await;
    // The last 24 hours: 11:00 and 09:00 (two readings in it). The last 30 days: today,
    // yesterday, 10 days ago; 40 days ago is out of both.
    assert_eq!(svg(&page, "chart-24h").matches("<circle").count(), 2);
    assert_eq!(svg(&page, "chart-30d").matches("<circle").count(), 3);
    assert!(page.contains("<h1><bdi>Balcony</bdi>"));
}

#[airq_test::test]
async fn the_device_page_shows_the_current_aqi_in_its_category_colour() {
    let app = TestApp::spawn().await;
    app.clock.set(noon());
    let device = device_with_readings(
        &app,
        "Kitchen",
        json!({ "is_public": true }),
        &[noon() - TimeDelta::minutes(5)],
    )
    .await;
    let path = format!("/devices/{}", device["id"].as_str().expect("id"));
    let page = html(page(&app, &path, None).await).await;
    assert!(page.contains(r#"data-aqi="40" data-category="Good" style="background:#00e400"#));
    assert!(page.contains(r#"data-field="pm2_5">12.5 µg/m³"#));
    assert!(page.contains(r#"data-field="status" class="status-online">online"#));
}

#[airq_test::test]
async fn an_offline_devices_page_says_so_in_grey_instead_of_showing_old_values_as_current() {
    let app = TestApp::spawn().await;
    app.clock.set(noon());
    let device = device_with_readings(
        &app,
        "Gone quiet",
        json!({ "is_public": true, "is_location_public": true }),
        &[noon() - TimeDelta::hours(3)],
    )
    .await;
    let path = format!("/devices/{}", device["id"].as_str().expect("id"));
    let page = html(page(&app, &path, None).await).await;
    let current = page
        .split(r#"id="current""#)
        .nth(1)
        .and_then(|rest| rest.split("<section").next())
        .expect("the current section");
    // AQI 40 is "Good", but not now: grey, marked offline, no category colour.
    assert!(
        current.contains(r#"data-aqi="40" data-status="offline" style="background:#9f9f9f"#),
        "{current}"
    );
    assert!(!current.contains("Good") && !current.contains("#00e400"));
    assert!(!current.contains("Means of the last hour"));
    assert!(current.contains("This device is offline."));
    assert!(current.contains(
        r#"the means of the hour up to its last reading (at <time datetime="2026-11-21T09:30:00Z">2026-11-21 09:30 UTC</time>; 1 reading)"#
    ));
    // Its location marker is grey too.
    assert!(page.contains(r##"data-colour="#9f9f9f""##));
}

#[airq_test::test]
async fn the_device_page_rounds_half_away_from_zero_and_never_shows_a_negative_zero() {
    let app = TestApp::spawn().await;
    app.clock.set(noon());
    let device = app
        .register("alice", json!({ "name": "Rounding", "is_public": true }))
        .await;
    let mut reading = sample_with(50, 12.25, -0.04);
    reading["temperature_data"]["humidity"] = json!(50.5);
    app.upload_ok(&device, &measured(reading, noon() - TimeDelta::minutes(2)))
        .await;
    let path = format!("/devices/{}", device["id"].as_str().expect("id"));
    let page = html(page(&app, &path, None).await).await;
    // Ties-to-even would write 12.2 and 50; the map's popup (map.js) writes 12.3 like this page.
    assert!(page.contains(r#"data-field="pm2_5">12.3 µg/m³<"#), "{page}");
    assert!(page.contains(r#"data-field="humidity">51 %<"#));
    assert!(page.contains(r#"data-field="temperature">0.0 °C<"#));
    assert!(!page.contains("-0.0"));
}

#[airq_test::test]
async fn a_device_name_is_shown_as_text_never_as_markup() {
    let app = TestApp::spawn().await;
    let device = device_with_readings(
        &app,
        "<img src=x onerror=alert(1)>",
        json!({ "is_public": true }),
        &[],
    )
    .await;
    let path = format!("/devices/{}", device["id"].as_str().expect("id"));
    let page = html(page(&app, &path, None).await).await;
    assert!(!page.contains("<img src=x"));
    assert!(page.contains("&lt;img src=x onerror=alert(1)&gt;"));
    assert!(page.contains("has not reported any reading yet"));
}

#[airq_test::test]
async fn a_device_name_sits_in_an_isolating_element() {
    let app = TestApp::spawn().await;
    // A right-to-left name: without isolation its direction would run on into " indoor" and
    // " · airq" after it.
    let device = device_with_readings(&app, "شرفة ٢", json!({ "is_public": true }), &[]).await;
    let path = format!("/devices/{}", device["id"].as_str().expect("id"));
    let page = html(page(&app, &path, None).await).await;
    assert!(
        page.contains(r#"<h1><bdi>شرفة ٢</bdi> <span class="tag">indoor</span></h1>"#),
        "{page}"
    );
    // Plain text (the title, the charts' labels), where no element can isolate, between FSI
    // and PDI.
    assert!(page.contains("<title>\u{2068}شرفة ٢\u{2069} · airq</title>"));
    assert!(page.contains("aria-label=\"AQI of \u{2068}شرفة ٢\u{2069} by hour"));
}

#[airq_test::test]
async fn the_location_map_is_shown_only_when_the_location_is_public() {
    let app = TestApp::spawn().await;
    let recent = [Utc::now() - TimeDelta::minutes(1)];
    let hidden = device_with_readings(&app, "Hidden", json!({ "is_public": true }), &recent).await;
    let shown = device_with_readings(
        &app,
        "Shown",
        json!({ "is_public": true, "is_location_public": true }),
        &recent,
    )
    .await;
    let page_of = |device: &Value| format!("/devices/{}", device["id"].as_str().expect("id"));
    let hidden = html(page(&app, &page_of(&hidden), None).await).await;
    let shown = html(page(&app, &page_of(&shown), None).await).await;
    assert!(!hidden.contains("id=\"device-map\"") && !hidden.contains("leaflet.js"));
    assert!(!hidden.contains("52.52"));
    assert!(shown
        .contains(r##"id="device-map" data-lat="52.52" data-lon="13.405" data-colour="#00e400""##));
    assert!(shown.contains("leaflet.js"));
}

#[airq_test::test]
async fn the_csv_link_of_the_device_page_downloads_its_readings() {
    let app = TestApp::spawn().await;
    app.clock.set(noon());
    let times = [noon() - TimeDelta::hours(2), noon() - TimeDelta::hours(1)];
    let device = device_with_readings(&app, "Garden", json!({ "is_public": true }), &times).await;
    let path = format!("/devices/{}", device["id"].as_str().expect("id"));
    let page = html(page(&app, &path, None).await).await;
    let link = link_labelled(&page, "last 24 hours");
    let response = page_at(&app, &link).await;
    assert_eq!(response.status(), 200);
    assert!(response.headers()["content-type"]
        .to_str()
        .expect("ascii")
        .starts_with("text/csv"));
    let csv = response.text().await.expect("text");
    let lines: Vec<&str> = csv.lines().collect();
    assert_eq!(lines.len(), 3, "a header and two readings: {csv}");
    assert!(lines[1].starts_with("2026-11-21T10:30:00.000Z,40,"));
    // The location is not public: the columns stay empty.
    assert!(lines[1].ends_with(",,"));
}

/// The `href` of the page's link whose text is `label`, unescaped.
fn link_labelled(page: &str, label: &str) -> String {
    page.split("<a ")
        .skip(1)
        .find(|rest| {
            rest.split("</a>")
                .next()
                .is_some_and(|a| a.ends_with(&format!(">{label}")))
        })
        .and_then(|rest| rest.split("href=\"").nth(1))
        .and_then(|rest| rest.split('"').next())
        .unwrap_or_else(|| panic!("a link labelled {label}"))
        .replace("&amp;", "&")
}

/// The `measured_at` of each row of a CSV answer.
async fn csv_times(response: Response) -> Vec<String> {
    assert_eq!(response.status(), 200);
    let csv = response.text().await.expect("text");
    csv.lines()
        .skip(1)
        .map(|line| line.split(',').next().unwrap_or_default().to_owned())
        .collect()
}

#[airq_test::test]
async fn each_csv_link_covers_the_span_of_the_chart_of_the_same_name() {
    let app = TestApp::spawn().await;
    app.clock.set(noon());
    let hours = |h: i64| noon() - TimeDelta::hours(h);
    // 23 hours ago lies in the 24-hour chart though not in today (UTC); 25 hours ago in neither;
    // 29 days ago in the 30-day chart, 31 days ago not.
    let times = [
        hours(24 * 31),
        hours(24 * 29),
        hours(25),
        hours(23),
        hours(2),
        hours(1),
    ];
    let device = device_with_readings(&app, "Garden", json!({ "is_public": true }), &times).await;
    let path = format!("/devices/{}", device["id"].as_str().expect("id"));
    let page = html(page(&app, &path, None).await).await;
    let day = csv_times(page_at(&app, &link_labelled(&page, "last 24 hours")).await).await;
    assert_eq!(
        day,
        [
            "2026-11-20T13:30:00.000Z",
            "2026-11-21T10:30:00.000Z",
            "2026-11-21T11:30:00.000Z"
        ]
    );
    assert_eq!(
        svg(&page, "chart-24h").matches("<circle").count(),
        day.len()
    );
    let month = csv_times(page_at(&app, &link_labelled(&page, "last 30 days")).await).await;
    assert_eq!(month.len(), 5, "all but the reading 31 days old: {month:?}");
    assert_eq!(month[0], "2026-10-23T12:30:00.000Z");
    // The 30-day chart: one point per day with readings (Oct 23, Nov 20, Nov 21).
    assert_eq!(svg(&page, "chart-30d").matches("<circle").count(), 3);
}

async fn page_at(app: &TestApp, path_and_query: &str) -> Response {
    app.client
        .get(format!("{}{path_and_query}", app.base))
        .header("accept", BROWSER_ACCEPT)
        .send()
        .await
        .expect("request sent")
}

#[airq_test::test]
async fn an_export_format_the_server_does_not_know_is_422() {
    let app = TestApp::spawn().await;
    let device = device_with_readings(&app, "Garden", json!({ "is_public": true }), &[]).await;
    let path = format!(
        "/public/devices/{}/readings?start=2026-11-01T00:00:00Z&end=2026-11-02T00:00:00Z&format=xml",
        device["id"].as_str().expect("id")
    );
    let body = problem(app.get_public(&path).await, 422).await;
    assert_eq!(field_errors(&body), vec![fe("format", "enum", "query")]);
}

#[airq_test::test]
async fn a_device_pages_404_varies_on_accept_and_is_revalidated() {
    let app = TestApp::spawn().await;
    let path = format!("/devices/{}", uuid::Uuid::new_v4());
    // The page for a browser, the problem for a program: the same URL, chosen by Accept.
    for accept in [Some(BROWSER_ACCEPT), None, Some("application/json")] {
        let response = page(&app, &path, accept).await;
        assert_eq!(response.status(), 404, "{accept:?}");
        assert_eq!(response.headers()["vary"], "Accept", "{accept:?}");
        assert_eq!(
            response.headers()["cache-control"],
            "no-cache",
            "{accept:?}"
        );
    }
    let malformed = page(&app, "/devices/not-a-uuid", None).await;
    assert_eq!(malformed.headers()["vary"], "Accept");
    assert_eq!(malformed.headers()["cache-control"], "no-cache");
}

#[airq_test::test]
async fn private_unknown_and_malformed_device_pages_are_the_same_404() {
    let app = TestApp::spawn().await;
    let private = app.register_named("alice", "Private").await;
    let paths = [
        format!("/devices/{}", private["id"].as_str().expect("id")),
        format!("/devices/{}", uuid::Uuid::new_v4()),
        "/devices/not-a-uuid".to_owned(),
    ];
    let mut pages = Vec::new();
    for path in &paths {
        // A browser gets a page…
        let response = page(&app, path, Some(BROWSER_ACCEPT)).await;
        assert_eq!(response.status(), 404, "{path}");
        assert_eq!(
            response.headers()["content-type"],
            "text/html; charset=utf-8"
        );
        pages.push(response.text().await.expect("text"));
        // …a program the problem.
        let body = problem(page(&app, path, None).await, 404).await;
        assert_eq!(body["detail"], "no public device with this id");
    }
    assert!(pages.windows(2).all(|pair| pair[0] == pair[1]));
    assert!(pages[0].contains("live map"));
}

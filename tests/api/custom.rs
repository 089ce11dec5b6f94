//! Custom ranges: GET /air-quality/custom?start_date=…&end_date=…[&interval=…][&tz=…].
//!
//! Dates are inclusive and read in `tz`; samples are placed at fixed instants with `measured_at`.

use chrono::{DateTime, Utc};
use serde_json::{json, Value};

use crate::common::{
    aqis, assert_bearer_challenge, at, fe, field_errors, labels, measured, problem, sample_with,
    timestamps, TestApp,
};

const EPSILON: f64 = 1e-9;

/// The server's "now" in these tests; every sample lies within the 366 days before it.
fn now() -> DateTime<Utc> {
    at("2026-11-25T12:00:00Z")
}

async fn report_aqi(app: &TestApp, device: &Value, aqi: i64, when: &str) {
    app.upload_ok(
        device,
        &measured(sample_with(aqi, aqi as f64 / 2.0, 20.0), at(when)),
    )
    .await;
}

/// The points of a 200 answer, after checking the body has `data` and nothing else.
async fn points_as(app: &TestApp, owner: &str, query: &str) -> Vec<Value> {
    let path = format!("/air-quality/custom?{query}");
    let response = app.get_as(owner, &path).await;
    assert_eq!(response.status(), 200, "GET {path}");
    assert_eq!(response.headers()["content-type"], "application/json");
    let body: Value = response.json().await.expect("json");
    let keys: Vec<_> = body.as_object().expect("object").keys().cloned().collect();
    assert_eq!(keys, ["data"], "no timeline field: {body}");
    body["data"].as_array().expect("data array").clone()
}

async fn points(app: &TestApp, query: &str) -> Vec<Value> {
    points_as(app, "alice", query).await
}

/// The field errors of a 422 answer to `query`.
async fn rejected(app: &TestApp, query: &str) -> Vec<(String, String, String)> {
    let body = problem(
        app.get_as("alice", &format!("/air-quality/custom?{query}"))
            .await,
        422,
    )
    .await;
    assert_eq!(body["type"], "urn:airq:problem:validation", "{query}");
    assert_eq!(body["instance"], "/api/v1/air-quality/custom", "{query}");
    field_errors(&body)
}

async fn accepted(app: &TestApp, query: &str) {
    points(app, query).await;
}

#[airq_test::test]
async fn days_are_the_default_and_both_dates_are_inclusive() {
    let app = TestApp::spawn().await;
    app.clock.set(now());
    let device = app.register_named("alice", "Kitchen").await;
    report_aqi(&app, &device, 900, "2026-11-19T23:59:59Z").await;
    report_aqi(&app, &device, 10, "2026-11-20T00:00:00Z").await;
    report_aqi(&app, &device, 11, "2026-11-20T18:00:00Z").await;
    report_aqi(&app, &device, 30, "2026-11-22T23:59:59Z").await;
    report_aqi(&app, &device, 900, "2026-11-23T00:00:00Z").await;

    let query = "start_date=2026-11-20&end_date=2026-11-22";
    let points = points(&app, query).await;
    // The 21st has no sample and is omitted.
    assert_eq!(labels(&points), ["2026-11-20", "2026-11-22"]);
    assert_eq!(
        timestamps(&points),
        ["2026-11-20T00:00:00.000Z", "2026-11-22T00:00:00.000Z"]
    );
    // 10.5 rounds to 11; the other metrics are exact means.
    assert_eq!(aqis(&points), [11, 30]);
    let pm2_5 = points[0]["metrics"]["pm2_5"].as_f64().expect("pm2_5");
    assert!((pm2_5 - 5.25).abs() < EPSILON, "{pm2_5}");
    let mut keys: Vec<_> = points[0]["metrics"]
        .as_object()
        .expect("metrics")
        .keys()
        .cloned()
        .collect();
    keys.sort();
    assert_eq!(
        keys,
        [
            "aqi",
            "heat_index",
            "humidity",
            "pm10_0",
            "pm1_0",
            "pm2_5",
            "temperature"
        ]
    );

    let explicit = self::points(&app, &format!("{query}&interval=day&tz=UTC")).await;
    assert_eq!(json!(explicit), json!(points));

    // A one-day range.
    let points = self::points(&app, "start_date=2026-11-22&end_date=2026-11-22").await;
    assert_eq!(labels(&points), ["2026-11-22"]);
    assert_eq!(aqis(&points), [30]);
}

#[airq_test::test]
async fn hours_are_labelled_with_date_and_hour() {
    let app = TestApp::spawn().await;
    app.clock.set(now());
    let device = app.register_named("alice", "Kitchen").await;
    report_aqi(&app, &device, 900, "2026-11-20T23:59:59Z").await;
    report_aqi(&app, &device, 1, "2026-11-21T00:00:00Z").await;
    report_aqi(&app, &device, 10, "2026-11-21T14:00:00Z").await;
    report_aqi(&app, &device, 20, "2026-11-21T14:59:59Z").await;
    report_aqi(&app, &device, 3, "2026-11-21T23:59:59Z").await;
    report_aqi(&app, &device, 900, "2026-11-22T00:00:00Z").await;

    let points = points(
        &app,
        "start_date=2026-11-21&end_date=2026-11-21&interval=hour",
    )
    .await;
    assert_eq!(
        labels(&points),
        ["2026-11-21 00:00", "2026-11-21 14:00", "2026-11-21 23:00"]
    );
    assert_eq!(
        timestamps(&points),
        [
            "2026-11-21T00:00:00.000Z",
            "2026-11-21T14:00:00.000Z",
            "2026-11-21T23:00:00.000Z"
        ]
    );
    assert_eq!(aqis(&points), [1, 15, 3]);
}

#[airq_test::test]
async fn months_are_clipped_to_the_range() {
    let app = TestApp::spawn().await;
    app.clock.set(now());
    let device = app.register_named("alice", "Kitchen").await;
    report_aqi(&app, &device, 900, "2025-12-09T23:59:59Z").await;
    report_aqi(&app, &device, 1, "2025-12-10T00:00:00Z").await;
    report_aqi(&app, &device, 2, "2026-02-14T12:00:00Z").await;
    report_aqi(&app, &device, 3, "2026-11-20T23:59:59Z").await;
    report_aqi(&app, &device, 900, "2026-11-21T00:00:00Z").await;

    let points = points(
        &app,
        "start_date=2025-12-10&end_date=2026-11-20&interval=month",
    )
    .await;
    assert_eq!(labels(&points), ["2025-12", "2026-02", "2026-11"]);
    assert_eq!(
        timestamps(&points),
        [
            "2025-12-10T00:00:00.000Z",
            "2026-02-01T00:00:00.000Z",
            "2026-11-01T00:00:00.000Z"
        ]
    );
    assert_eq!(aqis(&points), [1, 2, 3]);
}

#[airq_test::test]
async fn the_time_zone_moves_the_day_boundaries() {
    let app = TestApp::spawn().await;
    app.clock.set(now());
    let device = app.register_named("alice", "Kitchen").await;
    // 00:30 on the 21st in Berlin, but still the 20th in UTC.
    report_aqi(&app, &device, 10, "2026-11-20T23:30:00Z").await;
    // 00:30 on the 22nd in Berlin, the 21st in UTC.
    report_aqi(&app, &device, 20, "2026-11-21T23:30:00Z").await;

    let points = points(
        &app,
        "start_date=2026-11-21&end_date=2026-11-21&tz=Europe/Berlin",
    )
    .await;
    assert_eq!(labels(&points), ["2026-11-21"]);
    assert_eq!(timestamps(&points), ["2026-11-21T00:00:00.000+01:00"]);
    assert_eq!(aqis(&points), [10]);

    let points = self::points(&app, "start_date=2026-11-21&end_date=2026-11-21").await;
    assert_eq!(labels(&points), ["2026-11-21"]);
    assert_eq!(timestamps(&points), ["2026-11-21T00:00:00.000Z"]);
    assert_eq!(aqis(&points), [20]);

    let points = self::points(
        &app,
        "start_date=2026-11-21&end_date=2026-11-21&interval=hour&tz=Europe/Berlin",
    )
    .await;
    assert_eq!(labels(&points), ["2026-11-21 00:00"]);
    assert_eq!(timestamps(&points), ["2026-11-21T00:00:00.000+01:00"]);

    let points = self::points(
        &app,
        "start_date=2026-11-21&end_date=2026-11-21&interval=month&tz=Europe/Berlin",
    )
    .await;
    assert_eq!(labels(&points), ["2026-11"]);
    assert_eq!(timestamps(&points), ["2026-11-21T00:00:00.000+01:00"]);
    assert_eq!(aqis(&points), [10]);
}

#[airq_test::test]
async fn hours_of_a_25_hour_day_in_berlin() {
    let app = TestApp::spawn().await;
    app.clock.set(now());
    let device = app.register_named("alice", "Kitchen").await;
    report_aqi(&app, &device, 1, "2026-10-24T22:00:00Z").await; // 00:00 CEST
    report_aqi(&app, &device, 2, "2026-10-25T00:30:00Z").await; // 02:30 CEST
    report_aqi(&app, &device, 3, "2026-10-25T01:30:00Z").await; // 02:30 CET
    report_aqi(&app, &device, 4, "2026-10-25T22:59:59Z").await; // 23:59:59 CET
    report_aqi(&app, &device, 900, "2026-10-25T23:00:00Z").await; // the 26th

    let points = points(
        &app,
        "start_date=2026-10-25&end_date=2026-10-25&interval=hour&tz=Europe/Berlin",
    )
    .await;
    assert_eq!(
        labels(&points),
        [
            "2026-10-25 00:00",
            "2026-10-25 02:00",
            "2026-10-25 02:00",
            "2026-10-25 23:00"
        ]
    );
    assert_eq!(
        timestamps(&points),
        [
            "2026-10-25T00:00:00.000+02:00",
            "2026-10-25T02:00:00.000+02:00",
            "2026-10-25T02:00:00.000+01:00",
            "2026-10-25T23:00:00.000+01:00"
        ]
    );
    assert_eq!(aqis(&points), [1, 2, 3, 4]);

    let points = self::points(
        &app,
        "start_date=2026-10-25&end_date=2026-10-25&tz=Europe/Berlin",
    )
    .await;
    assert_eq!(labels(&points), ["2026-10-25"]);
    // (1 + 2 + 3 + 4) / 4 = 2.5 → 3.
    assert_eq!(aqis(&points), [3]);
}

#[airq_test::test]
async fn hours_on_lord_howe_island_the_day_its_clocks_move_half_an_hour() {
    let app = TestApp::spawn().await;
    app.clock.set(now());
    let device = app.register_named("alice", "Kitchen").await;
    report_aqi(&app, &device, 1, "2026-10-03T15:15:00Z").await; // 01:45 LHST (+10:30)
    report_aqi(&app, &device, 2, "2026-10-03T15:45:00Z").await; // 02:45 LHDT (+11:00)
    report_aqi(&app, &device, 3, "2026-10-03T16:15:00Z").await; // 03:15 LHDT

    let points = points(
        &app,
        "start_date=2026-10-04&end_date=2026-10-04&interval=hour&tz=Australia/Lord_Howe",
    )
    .await;
    assert_eq!(
        labels(&points),
        ["2026-10-04 01:00", "2026-10-04 02:30", "2026-10-04 03:00"]
    );
    assert_eq!(
        timestamps(&points),
        [
            "2026-10-04T01:00:00.000+10:30",
            "2026-10-04T02:30:00.000+11:00",
            "2026-10-04T03:00:00.000+11:00"
        ]
    );
    assert_eq!(aqis(&points), [1, 2, 3]);
}

#[airq_test::test]
async fn only_the_owners_devices_are_pooled() {
    let app = TestApp::spawn().await;
    app.clock.set(now());
    let first = app.register_named("alice", "Kitchen").await;
    let second = app.register_named("alice", "Bedroom").await;
    let bobs = app.register_named("bob", "Bob's").await;
    report_aqi(&app, &first, 10, "2026-11-21T10:00:00Z").await;
    report_aqi(&app, &second, 20, "2026-11-21T11:00:00Z").await;
    report_aqi(&app, &bobs, 1000, "2026-11-21T12:00:00Z").await;
    report_aqi(&app, &bobs, 1000, "2026-11-22T12:00:00Z").await;

    let query = "start_date=2026-11-21&end_date=2026-11-22";
    let points = points(&app, query).await;
    assert_eq!(labels(&points), ["2026-11-21"]);
    assert_eq!(aqis(&points), [15]);
    let points = points_as(&app, "bob", query).await;
    assert_eq!(aqis(&points), [1000, 1000]);
    // An owner without data: 200 with an empty list.
    let points = points_as(&app, "carol", query).await;
    assert!(points.is_empty());
}

#[airq_test::test]
async fn a_year_of_days_pools_every_device_once() {
    // Enough rows that the store reads the devices in two halves at once.
    let app = TestApp::spawn().await;
    app.clock.set(now());
    for index in 0..4 {
        let device = app.register_named("alice", &format!("Room {index}")).await;
        report_aqi(&app, &device, 10 * (index + 1), "2026-11-21T10:00:00Z").await;
        report_aqi(&app, &device, 100 + 2 * index, "2025-12-01T10:00:00Z").await;
    }

    let points = points(&app, "start_date=2025-11-25&end_date=2026-11-25").await;
    assert_eq!(labels(&points), ["2025-12-01", "2026-11-21"]);
    assert_eq!(aqis(&points), [103, 25]);
}

#[airq_test::test]
async fn each_interval_has_its_longest_range() {
    let app = TestApp::spawn().await;
    let too_long = [fe("end_date", "maximum", "query")];
    // hour: 31 days.
    accepted(
        &app,
        "start_date=2026-11-01&end_date=2026-12-01&interval=hour",
    )
    .await;
    assert_eq!(
        rejected(
            &app,
            "start_date=2026-11-01&end_date=2026-12-02&interval=hour"
        )
        .await,
        too_long
    );
    // day: 366 days, with or without a 29 February.
    accepted(&app, "start_date=2025-01-01&end_date=2026-01-01").await;
    accepted(
        &app,
        "start_date=2024-01-01&end_date=2024-12-31&interval=day",
    )
    .await;
    assert_eq!(
        rejected(&app, "start_date=2025-01-01&end_date=2026-01-02").await,
        too_long
    );
    assert_eq!(
        rejected(
            &app,
            "start_date=2024-01-01&end_date=2025-01-01&interval=day"
        )
        .await,
        too_long
    );
    // month: 10 years.
    accepted(
        &app,
        "start_date=2016-01-01&end_date=2025-12-31&interval=month",
    )
    .await;
    assert_eq!(
        rejected(
            &app,
            "start_date=2016-01-01&end_date=2026-01-01&interval=month"
        )
        .await,
        too_long
    );
}

#[airq_test::test]
async fn the_start_must_not_be_after_the_end() {
    let app = TestApp::spawn().await;
    assert_eq!(
        rejected(&app, "start_date=2026-11-22&end_date=2026-11-21").await,
        [fe("start_date", "range", "query")]
    );
    assert_eq!(
        rejected(
            &app,
            "start_date=2026-11-22&end_date=2026-11-21&interval=month"
        )
        .await,
        [fe("start_date", "range", "query")]
    );
}

#[airq_test::test]
async fn missing_dates_are_listed_together() {
    let app = TestApp::spawn().await;
    let path = "/air-quality/custom";
    let body = problem(app.get_as("alice", path).await, 422).await;
    assert_eq!(
        field_errors(&body),
        [
            fe("end_date", "required", "query"),
            fe("start_date", "required", "query")
        ]
    );
    assert_eq!(
        rejected(&app, "start_date=2026-11-21").await,
        [fe("end_date", "required", "query")]
    );
    assert_eq!(
        rejected(&app, "end_date=2026-11-21&start_date=").await,
        [fe("start_date", "required", "query")]
    );
    assert_eq!(
        rejected(&app, "interval=week&tz=Mars/Olympus").await,
        [
            fe("end_date", "required", "query"),
            fe("interval", "enum", "query"),
            fe("start_date", "required", "query"),
            fe("tz", "format", "query")
        ]
    );
}

#[airq_test::test]
async fn dates_must_be_calendar_dates_written_yyyy_mm_dd() {
    let app = TestApp::spawn().await;
    for bad in [
        "2026-13-01",
        "2026-02-30",
        "2026-1-5",
        "2026-01-5",
        "tomorrow",
        "21.11.2026",
        "2026/11/21",
        "2026-11-21T00:00:00Z",
    ] {
        let encoded: String = form_urlencoded::byte_serialize(bad.as_bytes()).collect();
        assert_eq!(
            rejected(&app, &format!("start_date={encoded}&end_date=2026-11-21")).await,
            [fe("start_date", "format", "query")],
            "{bad}"
        );
        assert_eq!(
            rejected(&app, &format!("start_date=2026-11-21&end_date={encoded}")).await,
            [fe("end_date", "format", "query")],
            "{bad}"
        );
    }
    assert_eq!(
        rejected(&app, "start_date=2026-1-5&end_date=tomorrow").await,
        [
            fe("end_date", "format", "query"),
            fe("start_date", "format", "query")
        ]
    );
}

#[airq_test::test]
async fn ten_characters_are_not_enough_to_be_a_date() {
    let app = TestApp::spawn().await;
    // Each of these has the length of YYYY-MM-DD but not its shape.
    let mut accepted = Vec::new();
    for bad in [
        "02026-1-05",
        "2026-1-05 ",
        " 2026-1-05",
        "+2026-1-05",
        "2026-01-5 ",
    ] {
        assert_eq!(bad.len(), 10);
        let encoded: String = form_urlencoded::byte_serialize(bad.as_bytes()).collect();
        let path = format!("/air-quality/custom?start_date={encoded}&end_date=2026-11-21");
        let response = app.get_as("alice", &path).await;
        if response.status() == 200 {
            accepted.push(bad);
            continue;
        }
        let body = problem(response, 422).await;
        assert_eq!(
            field_errors(&body),
            [fe("start_date", "format", "query")],
            "{bad:?}"
        );
    }
    assert!(accepted.is_empty(), "accepted as dates: {accepted:?}");
}

#[airq_test::test]
async fn a_bad_interval_or_zone_is_422() {
    let app = TestApp::spawn().await;
    let dates = "start_date=2026-11-20&end_date=2026-11-22";
    for interval in ["week", "Hour", "minute", "days"] {
        assert_eq!(
            rejected(&app, &format!("{dates}&interval={interval}")).await,
            [fe("interval", "enum", "query")],
            "{interval}"
        );
    }
    for tz in ["Mars/Olympus", "CEST%2B2", "Europe"] {
        assert_eq!(
            rejected(&app, &format!("{dates}&tz={tz}")).await,
            [fe("tz", "format", "query")],
            "{tz}"
        );
    }
}

#[airq_test::test]
async fn the_custom_route_needs_an_owner_token() {
    let app = TestApp::spawn().await;
    for query in [
        "start_date=2026-11-20&end_date=2026-11-22",
        "start_date=tomorrow",
        "",
    ] {
        let response = app
            .get_public(&format!("/air-quality/custom?{query}"))
            .await;
        assert_bearer_challenge(&response);
        let body = problem(response, 401).await;
        assert_eq!(body["instance"], "/api/v1/air-quality/custom");
    }
}

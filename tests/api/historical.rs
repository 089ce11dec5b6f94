//! Timelines: GET /air-quality/historical and GET /devices/{id}/historical.
//!
//! Samples are placed at fixed instants with `measured_at` after the server's manual clock has
//! been set, so every bucket boundary (hours, 23- and 25-hour days, :30/:45 zones, months) is
//! checked exactly.

use chrono::{DateTime, TimeDelta};
use serde_json::{json, Value};

use crate::common::{
    aqis, assert_bearer_challenge, assert_close, at, fe, field_errors, labels, measured, problem,
    sample_with, timestamps, TestApp,
};

/// Uploads `body` stamped at `when` (an RFC 3339 instant).
async fn report(app: &TestApp, device: &Value, body: Value, when: &str) {
    app.upload_ok(device, &measured(body, at(when))).await;
}

/// Uploads a default sample with the given aqi at `when`.
async fn report_aqi(app: &TestApp, device: &Value, aqi: i64, when: &str) {
    report(app, device, sample_with(aqi, 10.0, 20.0), when).await;
}

/// The whole body of a 200 answer.
async fn body_as(app: &TestApp, owner: &str, path: &str) -> Value {
    let response = app.get_as(owner, path).await;
    assert_eq!(response.status(), 200, "GET {path}");
    assert_eq!(response.headers()["content-type"], "application/json");
    response.json().await.expect("json")
}

/// The points of a 200 answer, after checking its `timeline`.
async fn fetch_points(app: &TestApp, owner: &str, path: &str, timeline: &str) -> Vec<Value> {
    let body = body_as(app, owner, path).await;
    assert_eq!(body["timeline"], timeline, "{body}");
    let mut keys: Vec<_> = body.as_object().expect("object").keys().cloned().collect();
    keys.sort();
    assert_eq!(keys, ["data", "timeline"]);
    body["data"].as_array().expect("data array").clone()
}

fn device_path(device: &Value, query: &str) -> String {
    format!(
        "/devices/{}/historical?{query}",
        device["id"].as_str().expect("id")
    )
}

#[airq_test::test]
async fn daily_in_utc_is_the_last_24_hours_by_hour() {
    let app = TestApp::spawn().await;
    app.clock.set(at("2026-11-21T14:25:00Z"));
    let device = app.register_named("alice", "Kitchen").await;
    // Outside: the hour that starts 24 hours before the current hour.
    report_aqi(&app, &device, 900, "2026-11-20T14:00:00Z").await;
    report_aqi(&app, &device, 900, "2026-11-20T14:59:59Z").await;
    // The first bucket.
    report_aqi(&app, &device, 5, "2026-11-20T15:00:00Z").await;
    report_aqi(&app, &device, 10, "2026-11-21T13:59:59Z").await;
    report_aqi(&app, &device, 20, "2026-11-21T14:00:00Z").await;
    report_aqi(&app, &device, 40, "2026-11-21T14:24:00Z").await;

    let points = fetch_points(
        &app,
        "alice",
        "/air-quality/historical?timeline=daily",
        "daily",
    )
    .await;
    assert_eq!(labels(&points), ["15:00", "13:00", "14:00"], "{points:?}");
    assert_eq!(
        timestamps(&points),
        [
            "2026-11-20T15:00:00.000Z",
            "2026-11-21T13:00:00.000Z",
            "2026-11-21T14:00:00.000Z"
        ]
    );
    assert_eq!(aqis(&points), [5, 10, 30]);
    for point in &points {
        let mut keys: Vec<_> = point.as_object().expect("point").keys().cloned().collect();
        keys.sort();
        assert_eq!(keys, ["label", "metrics", "timestamp"]);
        let mut metrics: Vec<_> = point["metrics"]
            .as_object()
            .expect("metrics")
            .keys()
            .cloned()
            .collect();
        metrics.sort();
        assert_eq!(
            metrics,
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
    }
    // tz=UTC is the default.
    let explicit = body_as(
        &app,
        "alice",
        "/air-quality/historical?timeline=daily&tz=UTC",
    )
    .await;
    assert_eq!(explicit["data"], json!(points));
}

#[airq_test::test]
async fn bucket_metrics_are_sample_weighted_means() {
    let app = TestApp::spawn().await;
    app.clock.set(at("2026-11-21T14:25:00Z"));
    let device = app.register_named("alice", "Kitchen").await;
    // Three samples in the 10:00 hour, two of them in the same quarter hour: the mean of
    // samples is 20, a mean of quarter-hour means would be 25.
    let mut body = sample_with(10, 1.0, 10.0);
    body["pms_data"]["pm1_0"] = json!(0.5);
    body["pms_data"]["pm10_0"] = json!(2.0);
    body["temperature_data"]["heat_index"] = json!(11.0);
    body["temperature_data"]["humidity"] = json!(30.0);
    report(&app, &device, body.clone(), "2026-11-21T10:05:00Z").await;
    report(&app, &device, body, "2026-11-21T10:06:00Z").await;
    let mut body = sample_with(40, 4.0, 40.0);
    body["pms_data"]["pm1_0"] = json!(2.0);
    body["pms_data"]["pm10_0"] = json!(8.0);
    body["temperature_data"]["heat_index"] = json!(44.0);
    body["temperature_data"]["humidity"] = json!(60.0);
    report(&app, &device, body, "2026-11-21T10:50:00Z").await;
    // 10 and 11 in one bucket: 10.5 rounds to 11.
    report_aqi(&app, &device, 10, "2026-11-21T12:10:00Z").await;
    report_aqi(&app, &device, 11, "2026-11-21T12:50:00Z").await;

    let points = fetch_points(
        &app,
        "alice",
        "/air-quality/historical?timeline=daily",
        "daily",
    )
    .await;
    assert_eq!(labels(&points), ["10:00", "12:00"]);
    let metrics = &points[0]["metrics"];
    assert_eq!(metrics["aqi"].as_i64(), Some(20), "{metrics}");
    assert_close(&metrics["pm1_0"], 1.0, "pm1_0");
    assert_close(&metrics["pm2_5"], 2.0, "pm2_5");
    assert_close(&metrics["pm10_0"], 4.0, "pm10_0");
    assert_close(&metrics["temperature"], 20.0, "temperature");
    assert_close(&metrics["heat_index"], 22.0, "heat_index");
    assert_close(&metrics["humidity"], 40.0, "humidity");
    assert_eq!(points[1]["metrics"]["aqi"].as_i64(), Some(11));

    // Across a day bucket too: 10, 10, 40, 10, 11 → 16.2 → 16.
    let points = alice_points(&app, "/air-quality/historical?timeline=weekly", "weekly").await;
    assert_eq!(labels(&points), ["Sat"]);
    assert_eq!(aqis(&points), [16]);
    assert_close(&points[0]["metrics"]["pm2_5"], 26.0 / 5.0, "pm2_5");
}

async fn alice_points(app: &TestApp, path: &str, timeline: &str) -> Vec<Value> {
    fetch_points(app, "alice", path, timeline).await
}

#[airq_test::test]
async fn weekly_is_seven_days_named_by_weekday() {
    let app = TestApp::spawn().await;
    // Saturday.
    app.clock.set(at("2026-11-21T14:25:00Z"));
    let device = app.register_named("alice", "Kitchen").await;
    report_aqi(&app, &device, 900, "2026-11-14T23:59:59Z").await;
    report_aqi(&app, &device, 1, "2026-11-15T00:00:00Z").await;
    report_aqi(&app, &device, 2, "2026-11-18T12:00:00Z").await;
    report_aqi(&app, &device, 3, "2026-11-19T23:59:59Z").await;
    report_aqi(&app, &device, 4, "2026-11-21T14:00:00Z").await;

    let points = alice_points(&app, "/air-quality/historical?timeline=weekly", "weekly").await;
    assert_eq!(labels(&points), ["Sun", "Wed", "Thu", "Sat"]);
    assert_eq!(
        timestamps(&points),
        [
            "2026-11-15T00:00:00.000Z",
            "2026-11-18T00:00:00.000Z",
            "2026-11-19T00:00:00.000Z",
            "2026-11-21T00:00:00.000Z"
        ]
    );
    assert_eq!(aqis(&points), [1, 2, 3, 4]);
}

#[airq_test::test]
async fn monthly_is_thirty_days_labelled_month_and_day() {
    let app = TestApp::spawn().await;
    app.clock.set(at("2026-11-21T14:25:00Z"));
    let device = app.register_named("alice", "Kitchen").await;
    report_aqi(&app, &device, 900, "2026-10-22T23:59:59Z").await;
    report_aqi(&app, &device, 1, "2026-10-23T00:00:00Z").await;
    report_aqi(&app, &device, 2, "2026-11-01T08:00:00Z").await;
    report_aqi(&app, &device, 3, "2026-11-09T08:00:00Z").await;
    report_aqi(&app, &device, 4, "2026-11-21T14:20:00Z").await;

    let points = alice_points(&app, "/air-quality/historical?timeline=monthly", "monthly").await;
    assert_eq!(labels(&points), ["Oct 23", "Nov 1", "Nov 9", "Nov 21"]);
    assert_eq!(
        timestamps(&points),
        [
            "2026-10-23T00:00:00.000Z",
            "2026-11-01T00:00:00.000Z",
            "2026-11-09T00:00:00.000Z",
            "2026-11-21T00:00:00.000Z"
        ]
    );
    assert_eq!(aqis(&points), [1, 2, 3, 4]);
}

#[airq_test::test]
async fn yearly_is_twelve_months_ending_with_the_current_one() {
    let app = TestApp::spawn().await;
    app.clock.set(at("2026-11-21T14:25:00Z"));
    let device = app.register_named("alice", "Kitchen").await;
    report_aqi(&app, &device, 900, "2025-11-30T23:59:59Z").await;
    report_aqi(&app, &device, 1, "2025-12-01T00:00:00Z").await;
    report_aqi(&app, &device, 3, "2025-12-31T23:59:59Z").await;
    report_aqi(&app, &device, 5, "2026-06-15T12:00:00Z").await;
    report_aqi(&app, &device, 7, "2026-11-01T00:00:00Z").await;
    report_aqi(&app, &device, 8, "2026-11-21T14:00:00Z").await;

    let points = alice_points(&app, "/air-quality/historical?timeline=yearly", "yearly").await;
    assert_eq!(labels(&points), ["Dec", "Jun", "Nov"]);
    assert_eq!(
        timestamps(&points),
        [
            "2025-12-01T00:00:00.000Z",
            "2026-06-01T00:00:00.000Z",
            "2026-11-01T00:00:00.000Z"
        ]
    );
    // (1 + 3) / 2 = 2; (7 + 8) / 2 = 7.5 → 8.
    assert_eq!(aqis(&points), [2, 5, 8]);
}

#[airq_test::test]
async fn berlin_daily_over_the_fall_back_night_shows_two_two_oclock_hours() {
    let app = TestApp::spawn().await;
    // 2026-10-25: 03:00 CEST becomes 02:00 CET at 01:00 UTC. Now is 06:30 CET.
    app.clock.set(at("2026-10-25T05:30:00Z"));
    let device = app.register_named("alice", "Kitchen").await;
    // One sample in the middle of every real hour of the last 24.
    let first = at("2026-10-24T06:30:00Z");
    for hour in 0..24 {
        let when = first + TimeDelta::hours(hour);
        app.upload_ok(&device, &measured(sample_with(hour, 1.0, 20.0), when))
            .await;
    }
    // Before the first bucket (07:59 CEST the day before).
    report_aqi(&app, &device, 900, "2026-10-24T05:59:59Z").await;

    let path = "/air-quality/historical?timeline=daily&tz=Europe/Berlin";
    let points = alice_points(&app, path, "daily").await;
    assert_eq!(
        labels(&points),
        [
            "08:00", "09:00", "10:00", "11:00", "12:00", "13:00", "14:00", "15:00", "16:00",
            "17:00", "18:00", "19:00", "20:00", "21:00", "22:00", "23:00", "00:00", "01:00",
            "02:00", "02:00", "03:00", "04:00", "05:00", "06:00"
        ]
    );
    assert_eq!(aqis(&points), (0..24).collect::<Vec<_>>());
    let stamps = timestamps(&points);
    assert_eq!(stamps[0], "2026-10-24T08:00:00.000+02:00");
    assert_eq!(stamps[17], "2026-10-25T01:00:00.000+02:00");
    assert_eq!(stamps[18], "2026-10-25T02:00:00.000+02:00");
    assert_eq!(stamps[19], "2026-10-25T02:00:00.000+01:00");
    assert_eq!(stamps[20], "2026-10-25T03:00:00.000+01:00");
    assert_eq!(stamps[23], "2026-10-25T06:00:00.000+01:00");
    for (hour, stamp) in (0..).zip(stamps) {
        let start = DateTime::parse_from_rfc3339(stamp).expect("RFC 3339");
        assert_eq!(
            start,
            first - TimeDelta::minutes(30) + TimeDelta::hours(hour),
            "bucket {hour} starts at a real hour"
        );
    }
}

#[airq_test::test]
async fn berlin_daily_over_the_spring_forward_night_skips_two_oclock() {
    let app = TestApp::spawn().await;
    // 2026-03-29: 02:00 CET becomes 03:00 CEST at 01:00 UTC. Now is 08:30 CEST.
    app.clock.set(at("2026-03-29T06:30:00Z"));
    let device = app.register_named("alice", "Kitchen").await;
    let first = at("2026-03-28T07:30:00Z");
    for hour in 0..24 {
        let when = first + TimeDelta::hours(hour);
        app.upload_ok(&device, &measured(sample_with(hour, 1.0, 20.0), when))
            .await;
    }

    let path = "/air-quality/historical?timeline=daily&tz=Europe/Berlin";
    let points = alice_points(&app, path, "daily").await;
    assert_eq!(
        labels(&points),
        [
            "08:00", "09:00", "10:00", "11:00", "12:00", "13:00", "14:00", "15:00", "16:00",
            "17:00", "18:00", "19:00", "20:00", "21:00", "22:00", "23:00", "00:00", "01:00",
            "03:00", "04:00", "05:00", "06:00", "07:00", "08:00"
        ]
    );
    assert_eq!(aqis(&points), (0..24).collect::<Vec<_>>());
    let stamps = timestamps(&points);
    assert_eq!(stamps[0], "2026-03-28T08:00:00.000+01:00");
    assert_eq!(stamps[17], "2026-03-29T01:00:00.000+01:00");
    assert_eq!(stamps[18], "2026-03-29T03:00:00.000+02:00");
    assert_eq!(stamps[23], "2026-03-29T08:00:00.000+02:00");
    for (hour, stamp) in (0..).zip(stamps) {
        let start = DateTime::parse_from_rfc3339(stamp).expect("RFC 3339");
        assert_eq!(
            start,
            first - TimeDelta::minutes(30) + TimeDelta::hours(hour),
            "bucket {hour} starts at a real hour"
        );
    }
}

#[airq_test::test]
async fn berlin_days_of_25_hours_keep_their_late_evening() {
    let app = TestApp::spawn().await;
    // Tuesday 2026-10-27; Sunday the 25th lasts 25 hours in Berlin.
    app.clock.set(at("2026-10-27T12:00:00Z"));
    let device = app.register_named("alice", "Kitchen").await;
    report_aqi(&app, &device, 1, "2026-10-24T21:59:59Z").await; // Sat 23:59:59 CEST
    report_aqi(&app, &device, 10, "2026-10-24T22:00:00Z").await; // Sun 00:00 CEST
    report_aqi(&app, &device, 20, "2026-10-25T22:30:00Z").await; // Sun 23:30 CET
    report_aqi(&app, &device, 3, "2026-10-25T23:00:00Z").await; // Mon 00:00 CET

    for (timeline, sunday) in [("weekly", "Sun"), ("monthly", "Oct 25")] {
        let path = format!("/air-quality/historical?timeline={timeline}&tz=Europe/Berlin");
        let points = alice_points(&app, &path, timeline).await;
        assert_eq!(labels(&points)[1], sunday, "{timeline}");
        assert_eq!(aqis(&points), [1, 15, 3], "{timeline}");
        assert_eq!(
            timestamps(&points),
            [
                "2026-10-24T00:00:00.000+02:00",
                "2026-10-25T00:00:00.000+02:00",
                "2026-10-26T00:00:00.000+01:00"
            ],
            "{timeline}"
        );
    }
    let path = "/air-quality/historical?timeline=weekly&tz=Europe/Berlin";
    assert_eq!(
        labels(&alice_points(&app, path, "weekly").await),
        ["Sat", "Sun", "Mon"]
    );
    let path = "/air-quality/historical?timeline=monthly&tz=Europe/Berlin";
    assert_eq!(
        labels(&alice_points(&app, path, "monthly").await),
        ["Oct 24", "Oct 25", "Oct 26"]
    );
}

#[airq_test::test]
async fn berlin_days_of_23_hours_end_at_local_midnight() {
    let app = TestApp::spawn().await;
    // Tuesday 2026-03-31; Sunday the 29th lasts 23 hours in Berlin.
    app.clock.set(at("2026-03-31T12:00:00Z"));
    let device = app.register_named("alice", "Kitchen").await;
    report_aqi(&app, &device, 1, "2026-03-28T22:59:59Z").await; // Sat 23:59:59 CET
    report_aqi(&app, &device, 10, "2026-03-28T23:00:00Z").await; // Sun 00:00 CET
    report_aqi(&app, &device, 20, "2026-03-29T21:30:00Z").await; // Sun 23:30 CEST
    report_aqi(&app, &device, 3, "2026-03-29T22:00:00Z").await; // Mon 00:00 CEST

    for (timeline, names) in [
        ("weekly", ["Sat", "Sun", "Mon"]),
        ("monthly", ["Mar 28", "Mar 29", "Mar 30"]),
    ] {
        let path = format!("/air-quality/historical?timeline={timeline}&tz=Europe/Berlin");
        let points = alice_points(&app, &path, timeline).await;
        assert_eq!(labels(&points), names, "{timeline}");
        assert_eq!(aqis(&points), [1, 15, 3], "{timeline}");
        assert_eq!(
            timestamps(&points),
            [
                "2026-03-28T00:00:00.000+01:00",
                "2026-03-29T00:00:00.000+01:00",
                "2026-03-30T00:00:00.000+02:00"
            ],
            "{timeline}"
        );
    }
}

#[airq_test::test]
async fn kolkata_hours_start_at_half_past_utc() {
    let app = TestApp::spawn().await;
    // 15:50 IST.
    app.clock.set(at("2026-11-21T10:20:00Z"));
    let device = app.register_named("alice", "Kitchen").await;
    report_aqi(&app, &device, 1, "2026-11-21T09:29:59Z").await;
    report_aqi(&app, &device, 2, "2026-11-21T09:30:00Z").await;
    report_aqi(&app, &device, 3, "2026-11-21T10:20:00Z").await;

    let path = "/air-quality/historical?timeline=daily&tz=Asia/Kolkata";
    let points = alice_points(&app, path, "daily").await;
    assert_eq!(labels(&points), ["14:00", "15:00"]);
    assert_eq!(
        timestamps(&points),
        [
            "2026-11-21T14:00:00.000+05:30",
            "2026-11-21T15:00:00.000+05:30"
        ]
    );
    assert_eq!(aqis(&points), [1, 3]);
}

#[airq_test::test]
async fn kathmandu_hours_start_at_a_quarter_past_utc() {
    let app = TestApp::spawn().await;
    // 16:05 NPT.
    app.clock.set(at("2026-11-21T10:20:00Z"));
    let device = app.register_named("alice", "Kitchen").await;
    report_aqi(&app, &device, 1, "2026-11-21T10:14:00Z").await;
    report_aqi(&app, &device, 2, "2026-11-21T10:15:00Z").await;

    let path = "/air-quality/historical?timeline=daily&tz=Asia/Kathmandu";
    let points = alice_points(&app, path, "daily").await;
    assert_eq!(labels(&points), ["15:00", "16:00"]);
    assert_eq!(
        timestamps(&points),
        [
            "2026-11-21T15:00:00.000+05:45",
            "2026-11-21T16:00:00.000+05:45"
        ]
    );
    assert_eq!(aqis(&points), [1, 2]);
}

#[airq_test::test]
async fn days_in_kolkata_and_kathmandu_start_at_local_midnight() {
    let app = TestApp::spawn().await;
    app.clock.set(at("2026-11-21T10:20:00Z"));
    let device = app.register_named("alice", "Kitchen").await;
    report_aqi(&app, &device, 1, "2026-11-20T18:14:59Z").await;
    report_aqi(&app, &device, 2, "2026-11-20T18:15:00Z").await;
    report_aqi(&app, &device, 3, "2026-11-20T18:29:59Z").await;
    report_aqi(&app, &device, 4, "2026-11-20T18:30:00Z").await;

    // Kolkata: Friday ends at 18:30 UTC.
    let path = "/air-quality/historical?timeline=weekly&tz=Asia/Kolkata";
    let points = alice_points(&app, path, "weekly").await;
    assert_eq!(labels(&points), ["Fri", "Sat"]);
    assert_eq!(
        timestamps(&points),
        [
            "2026-11-20T00:00:00.000+05:30",
            "2026-11-21T00:00:00.000+05:30"
        ]
    );
    assert_eq!(aqis(&points), [2, 4]);

    // Kathmandu: Friday ends at 18:15 UTC.
    let path = "/air-quality/historical?timeline=monthly&tz=Asia/Kathmandu";
    let points = alice_points(&app, path, "monthly").await;
    assert_eq!(labels(&points), ["Nov 20", "Nov 21"]);
    assert_eq!(
        timestamps(&points),
        [
            "2026-11-20T00:00:00.000+05:45",
            "2026-11-21T00:00:00.000+05:45"
        ]
    );
    // (2 + 3 + 4) / 3 = 3.
    assert_eq!(aqis(&points), [1, 3]);
}

#[airq_test::test]
async fn the_owner_timeline_pools_devices_and_never_shows_another_owner() {
    let app = TestApp::spawn().await;
    app.clock.set(at("2026-11-21T14:25:00Z"));
    let first = app.register_named("alice", "Kitchen").await;
    let second = app.register_named("alice", "Bedroom").await;
    let bobs = app.register_named("bob", "Bob's").await;
    report_aqi(&app, &first, 10, "2026-11-21T13:10:00Z").await;
    report_aqi(&app, &second, 20, "2026-11-21T13:20:00Z").await;
    report_aqi(&app, &second, 30, "2026-11-21T12:20:00Z").await;
    report_aqi(&app, &bobs, 1000, "2026-11-21T13:30:00Z").await;
    report_aqi(&app, &bobs, 1000, "2026-11-21T11:30:00Z").await;

    let query = "timeline=daily";
    let points = alice_points(&app, &format!("/air-quality/historical?{query}"), "daily").await;
    assert_eq!(labels(&points), ["12:00", "13:00"]);
    assert_eq!(aqis(&points), [30, 15]);

    let points = alice_points(&app, &device_path(&first, query), "daily").await;
    assert_eq!(labels(&points), ["13:00"]);
    assert_eq!(aqis(&points), [10]);
    let points = alice_points(&app, &device_path(&second, query), "daily").await;
    assert_eq!(aqis(&points), [30, 20]);

    let points = fetch_points(
        &app,
        "bob",
        &format!("/air-quality/historical?{query}"),
        "daily",
    )
    .await;
    assert_eq!(labels(&points), ["11:00", "13:00"]);
    assert_eq!(aqis(&points), [1000, 1000]);
}

#[airq_test::test]
async fn an_owner_without_data_gets_an_empty_timeline() {
    let app = TestApp::spawn().await;
    app.clock.set(at("2026-11-21T14:25:00Z"));
    let bobs = app.register_named("bob", "Bob's").await;
    report_aqi(&app, &bobs, 10, "2026-11-21T13:10:00Z").await;

    // No device at all.
    let body = body_as(&app, "alice", "/air-quality/historical?timeline=weekly").await;
    assert_eq!(body, json!({ "data": [], "timeline": "weekly" }));

    // A device that never reported, owner-wide and on its own.
    let silent = app.register_named("alice", "Silent").await;
    for timeline in ["daily", "weekly", "monthly", "yearly"] {
        let query = format!("timeline={timeline}");
        let body = body_as(&app, "alice", &format!("/air-quality/historical?{query}")).await;
        assert_eq!(body, json!({ "data": [], "timeline": timeline }));
        let body = body_as(&app, "alice", &device_path(&silent, &query)).await;
        assert_eq!(body, json!({ "data": [], "timeline": timeline }));
    }
}

#[airq_test::test]
async fn a_missing_or_unknown_timeline_is_422() {
    let app = TestApp::spawn().await;
    for (path, errors) in [
        (
            "/air-quality/historical",
            vec![fe("timeline", "required", "query")],
        ),
        (
            "/air-quality/historical?timeline=",
            vec![fe("timeline", "required", "query")],
        ),
        (
            "/air-quality/historical?tz=UTC",
            vec![fe("timeline", "required", "query")],
        ),
        (
            "/air-quality/historical?timeline=hourly",
            vec![fe("timeline", "enum", "query")],
        ),
        (
            "/air-quality/historical?timeline=Daily",
            vec![fe("timeline", "enum", "query")],
        ),
        (
            "/air-quality/historical?timeline=daily&tz=Mars/Olympus",
            vec![fe("tz", "format", "query")],
        ),
        (
            "/air-quality/historical?timeline=hourly&tz=Mars/Olympus",
            vec![fe("timeline", "enum", "query"), fe("tz", "format", "query")],
        ),
    ] {
        let body = problem(app.get_as("alice", path).await, 422).await;
        assert_eq!(body["type"], "urn:airq:problem:validation", "{path}");
        assert_eq!(body["instance"], "/api/v1/air-quality/historical", "{path}");
        assert_eq!(field_errors(&body), errors, "{path}");
    }
}

#[airq_test::test]
async fn the_device_timeline_lists_path_and_query_errors_together() {
    let app = TestApp::spawn().await;
    let body = problem(
        app.get_as("alice", "/devices/not-a-uuid/historical?timeline=hourly")
            .await,
        422,
    )
    .await;
    assert_eq!(
        field_errors(&body),
        [fe("id", "format", "path"), fe("timeline", "enum", "query")]
    );
    assert_eq!(body["instance"], "/api/v1/devices/not-a-uuid/historical");

    let body = problem(
        app.get_as("alice", "/devices/not-a-uuid/historical").await,
        422,
    )
    .await;
    assert_eq!(
        field_errors(&body),
        [
            fe("id", "format", "path"),
            fe("timeline", "required", "query")
        ]
    );

    // A well-formed id with a bad query: the query is checked before existence.
    let path = format!(
        "/devices/{}/historical?timeline=daily&tz=Mars/Olympus",
        uuid::Uuid::new_v4()
    );
    let body = problem(app.get_as("alice", &path).await, 422).await;
    assert_eq!(field_errors(&body), [fe("tz", "format", "query")]);
}

#[airq_test::test]
async fn another_owners_device_is_404_like_an_unknown_one() {
    let app = TestApp::spawn().await;
    app.clock.set(at("2026-11-21T14:25:00Z"));
    let bobs = app.register_named("bob", "Bob's").await;
    report_aqi(&app, &bobs, 10, "2026-11-21T13:10:00Z").await;
    let query = "timeline=daily";
    assert_eq!(
        fetch_points(&app, "bob", &device_path(&bobs, query), "daily")
            .await
            .len(),
        1
    );

    let foreign = problem(app.get_as("alice", &device_path(&bobs, query)).await, 404).await;
    let unknown_path = format!("/devices/{}/historical?{query}", uuid::Uuid::new_v4());
    let unknown = problem(app.get_as("alice", &unknown_path).await, 404).await;
    assert_eq!(foreign["detail"], unknown["detail"]);
    assert_eq!(foreign["type"], "about:blank");
    assert_eq!(
        foreign["instance"],
        format!(
            "/api/v1/devices/{}/historical",
            bobs["id"].as_str().expect("id")
        )
    );
}

#[airq_test::test]
async fn the_timeline_routes_need_an_owner_token() {
    let app = TestApp::spawn().await;
    let device = app.register_named("alice", "Kitchen").await;
    for path in [
        "/air-quality/historical?timeline=daily".to_owned(),
        "/air-quality/historical?timeline=hourly".to_owned(),
        device_path(&device, "timeline=daily"),
        "/devices/not-a-uuid/historical".to_owned(),
    ] {
        let response = app.get_public(&path).await;
        assert_bearer_challenge(&response);
        problem(response, 401).await;
    }
}

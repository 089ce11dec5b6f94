//! Current snapshots: GET /air-quality/current (owner-wide) and GET /devices/{id}/current.
//!
//! Every instant is fixed; the server's manual clock is set before samples are placed with
//! `measured_at`, so windows and the 20-minute status rule are tested without sleeping.

use crate::upload::delete;
use chrono::{DateTime, TimeDelta, Utc};
use serde_json::{json, Value};

use crate::common::{
    assert_bearer_challenge, assert_close, at, fe, field_errors, located, measured, problem,
    sample, sample_with, TestApp,
};

/// The reference "now" of most tests.
fn t0() -> DateTime<Utc> {
    at("2026-10-25T12:00:00Z")
}

fn minutes(n: i64) -> TimeDelta {
    TimeDelta::minutes(n)
}

/// How the API renders an instant: RFC 3339, milliseconds, `Z`.
fn rendered(instant: DateTime<Utc>) -> String {
    instant.to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

/// An upload body with every metric chosen.
fn reading(
    aqi: i64,
    pm1_0: f64,
    pm2_5: f64,
    pm10_0: f64,
    temperature: f64,
    heat_index: f64,
    humidity: f64,
) -> Value {
    let mut body = sample();
    body["aqi"] = json!(aqi);
    body["pms_data"]["pm1_0"] = json!(pm1_0);
    body["pms_data"]["pm2_5"] = json!(pm2_5);
    body["pms_data"]["pm10_0"] = json!(pm10_0);
    body["temperature_data"]["temperature"] = json!(temperature);
    body["temperature_data"]["heat_index"] = json!(heat_index);
    body["temperature_data"]["humidity"] = json!(humidity);
    body
}

fn device_path(device: &Value) -> String {
    format!("/devices/{}/current", device["id"].as_str().expect("id"))
}

/// Uploads `body` stamped at `when`.
async fn report(app: &TestApp, device: &Value, body: Value, when: DateTime<Utc>) {
    app.upload_ok(device, &measured(body, when)).await;
}

#[airq_test::test]
async fn the_device_snapshot_is_the_exact_mean_of_the_last_hour() {
    let app = TestApp::spawn().await;
    app.clock.set(t0());
    let device = app.register_named("alice", "Kitchen").await;
    report(
        &app,
        &device,
        reading(10, 1.0, 2.0, 3.0, 20.0, 21.0, 30.0),
        t0() - minutes(50),
    )
    .await;
    report(
        &app,
        &device,
        reading(20, 2.5, 4.5, 6.5, 21.5, 22.5, 45.0),
        t0() - minutes(30),
    )
    .await;
    report(
        &app,
        &device,
        reading(31, 4.0, 7.0, 10.0, 23.0, 24.0, 60.5),
        t0() - minutes(10),
    )
    .await;

    let response = app.get_as("alice", &device_path(&device)).await;
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["content-type"], "application/json");
    let body: Value = response.json().await.expect("json");
    let data = &body["data"];
    let mut fields: Vec<_> = data.as_object().expect("object").keys().cloned().collect();
    fields.sort();
    assert_eq!(
        fields,
        [
            "aqi",
            "heat_index",
            "humidity",
            "last_seen",
            "location",
            "pm10_0",
            "pm1_0",
            "pm2_5",
            "sample_count",
            "status",
            "temperature"
        ]
    );
    // (10 + 20 + 31) / 3 = 20.33… → 20, an integer.
    assert_eq!(data["aqi"].as_i64(), Some(20), "{data}");
    assert_close(&data["pm1_0"], 7.5 / 3.0, "pm1_0");
    assert_close(&data["pm2_5"], 13.5 / 3.0, "pm2_5");
    assert_close(&data["pm10_0"], 19.5 / 3.0, "pm10_0");
    assert_close(&data["temperature"], 64.5 / 3.0, "temperature");
    assert_close(&data["heat_index"], 67.5 / 3.0, "heat_index");
    assert_close(&data["humidity"], 135.5 / 3.0, "humidity");
    assert_eq!(data["sample_count"].as_u64(), Some(3));
    assert_eq!(data["status"], "online");
    assert_eq!(data["last_seen"], "2026-10-25T11:50:00.000Z");
    assert_eq!(data["location"], Value::Null);
}

#[airq_test::test]
async fn the_aqi_mean_is_rounded_half_away_from_zero() {
    let app = TestApp::spawn().await;
    app.clock.set(t0());
    let device = app.register_named("alice", "Kitchen").await;
    report(
        &app,
        &device,
        sample_with(10, 1.0, 20.0),
        t0() - minutes(20),
    )
    .await;
    report(
        &app,
        &device,
        sample_with(11, 2.0, 20.0),
        t0() - minutes(15),
    )
    .await;
    let data = app.data_as("alice", &device_path(&device)).await;
    assert_eq!(data["aqi"].as_i64(), Some(11), "10.5 rounds up: {data}");

    report(
        &app,
        &device,
        sample_with(10, 3.0, 20.0),
        t0() - minutes(10),
    )
    .await;
    let data = app.data_as("alice", &device_path(&device)).await;
    assert_eq!(data["aqi"].as_i64(), Some(10), "10.33 rounds down: {data}");
    assert_close(&data["pm2_5"], 2.0, "pm2_5");
    assert_eq!(data["sample_count"].as_u64(), Some(3));
}

#[airq_test::test]
async fn samples_an_hour_old_or_older_are_left_out_while_the_hour_has_samples() {
    let app = TestApp::spawn().await;
    app.clock.set(t0());
    let device = app.register_named("alice", "Kitchen").await;
    report(
        &app,
        &device,
        sample_with(500, 500.0, 50.0),
        t0() - minutes(61),
    )
    .await;
    report(
        &app,
        &device,
        sample_with(400, 400.0, 40.0),
        t0() - minutes(60),
    )
    .await;
    report(
        &app,
        &device,
        sample_with(20, 2.0, 20.0),
        t0() - minutes(60) + TimeDelta::seconds(1),
    )
    .await;
    report(&app, &device, sample_with(30, 4.0, 22.0), t0() - minutes(1)).await;

    let data = app.data_as("alice", &device_path(&device)).await;
    assert_eq!(data["sample_count"].as_u64(), Some(2), "{data}");
    assert_eq!(data["aqi"].as_i64(), Some(25));
    assert_close(&data["pm2_5"], 3.0, "pm2_5");
    assert_close(&data["temperature"], 21.0, "temperature");
    assert_eq!(data["last_seen"], "2026-10-25T11:59:00.000Z");
}

#[airq_test::test]
async fn a_sample_stamped_a_few_minutes_ahead_is_current_and_is_last_seen() {
    let app = TestApp::spawn().await;
    app.clock.set(t0());
    let device = app.register_named("alice", "Kitchen").await;
    report(
        &app,
        &device,
        sample_with(10, 1.0, 20.0),
        t0() - minutes(30),
    )
    .await;
    report(&app, &device, sample_with(30, 3.0, 22.0), t0() + minutes(4)).await;

    let data = app.data_as("alice", &device_path(&device)).await;
    assert_eq!(data["sample_count"].as_u64(), Some(2), "{data}");
    assert_eq!(data["aqi"].as_i64(), Some(20));
    assert_eq!(data["status"], "online");
    assert_eq!(data["last_seen"], "2026-10-25T12:04:00.000Z");
}

#[airq_test::test]
async fn an_idle_device_shows_the_hour_before_its_last_sample() {
    let app = TestApp::spawn().await;
    app.clock.set(t0());
    let device = app.register_named("alice", "Cellar").await;
    let last = t0() - TimeDelta::hours(2) - minutes(5);
    // The fallback window is (T−3h05, T−2h05]: the first sample is outside it.
    report(
        &app,
        &device,
        sample_with(300, 300.0, 30.0),
        last - minutes(61),
    )
    .await;
    report(
        &app,
        &device,
        sample_with(10, 1.0, 20.0),
        last - minutes(55),
    )
    .await;
    report(
        &app,
        &device,
        sample_with(20, 2.0, 21.0),
        last - minutes(25),
    )
    .await;
    report(&app, &device, sample_with(30, 3.0, 22.0), last).await;

    let data = app.data_as("alice", &device_path(&device)).await;
    assert_eq!(data["sample_count"].as_u64(), Some(3), "{data}");
    assert_eq!(data["aqi"].as_i64(), Some(20));
    assert_close(&data["pm2_5"], 2.0, "pm2_5");
    assert_close(&data["temperature"], 21.0, "temperature");
    assert_eq!(data["status"], "offline");
    assert_eq!(data["last_seen"], rendered(last));
    assert_eq!(data["last_seen"], "2026-10-25T09:55:00.000Z");
}

#[airq_test::test]
async fn the_status_turns_offline_only_after_twenty_minutes_of_silence() {
    let app = TestApp::spawn().await;
    app.clock.set(t0());
    let device = app.register_named("alice", "Kitchen").await;
    // No measured_at: the sample is stamped with the server's clock.
    app.upload_ok(&device, &sample_with(42, 10.0, 21.5)).await;
    let path = device_path(&device);

    let data = app.data_as("alice", &path).await;
    assert_eq!(data["status"], "online");
    assert_eq!(data["last_seen"], "2026-10-25T12:00:00.000Z");

    app.clock.advance(TimeDelta::seconds(19 * 60 + 59));
    assert_eq!(app.data_as("alice", &path).await["status"], "online");
    app.clock.advance(TimeDelta::seconds(1));
    assert_eq!(
        app.data_as("alice", &path).await["status"],
        "online",
        "exactly 20 minutes"
    );
    app.clock.advance(TimeDelta::seconds(1));
    let data = app.data_as("alice", &path).await;
    assert_eq!(data["status"], "offline", "20 minutes and 1 second");
    assert_eq!(data["last_seen"], "2026-10-25T12:00:00.000Z");

    // Long after: still the last sample, still its last_seen, still offline.
    app.clock.advance(TimeDelta::days(3));
    let data = app.data_as("alice", &path).await;
    assert_eq!(data["status"], "offline");
    assert_eq!(data["sample_count"].as_u64(), Some(1));
    assert_eq!(data["aqi"].as_i64(), Some(42));
    assert_eq!(data["last_seen"], "2026-10-25T12:00:00.000Z");

    // A new sample brings it back online.
    app.upload_ok(&device, &sample()).await;
    assert_eq!(app.data_as("alice", &path).await["status"], "online");
}

/// A device "Bike" of alice's that reported a location 40 and another 30 minutes before
/// [`t0`], the app's clock.
async fn bike_located_twice(app: &TestApp) -> Value {
    app.clock.set(t0());
    let device = app.register_named("alice", "Bike").await;
    report(
        app,
        &device,
        located(sample(), 1.0, 2.0),
        t0() - minutes(40),
    )
    .await;
    report(
        app,
        &device,
        located(sample(), 48.137, 11.575),
        t0() - minutes(30),
    )
    .await;
    device
}

#[airq_test::test]
async fn the_location_is_the_latest_sample_that_carried_one() {
    let app = TestApp::spawn().await;
    let device = bike_located_twice(&app).await;
    report(&app, &device, sample(), t0() - minutes(20)).await;
    report(&app, &device, sample(), t0() - minutes(10)).await;
    // Uploaded last, but measured earlier: it does not become the latest location.
    report(
        &app,
        &device,
        located(sample(), -33.9, 151.2),
        t0() - minutes(50),
    )
    .await;

    let data = app.data_as("alice", &device_path(&device)).await;
    assert_eq!(
        data["location"],
        json!({
            "lat": 48.137,
            "lon": 11.575,
            "provider": "phone-gps",
            "timestamp": "2026-10-25T11:30:00.000Z"
        })
    );
    assert_eq!(data["last_seen"], "2026-10-25T11:50:00.000Z");
    assert_eq!(data["sample_count"].as_u64(), Some(5));

    // Offline for days: the last known location is still shown.
    app.clock.advance(TimeDelta::days(2));
    let data = app.data_as("alice", &device_path(&device)).await;
    assert_eq!(data["status"], "offline");
    assert_eq!(data["location"]["timestamp"], "2026-10-25T11:30:00.000Z");
}

#[airq_test::test]
async fn a_location_replaced_by_a_reading_without_one_no_longer_counts() {
    let app = TestApp::spawn().await;
    let device = bike_located_twice(&app).await;
    // The same key again, without a location: the reading it replaces took its location along.
    report(&app, &device, sample(), t0() - minutes(30)).await;

    let data = app.data_as("alice", &device_path(&device)).await;
    assert_eq!(data["location"]["lat"], 1.0, "{data}");
    assert_eq!(data["location"]["timestamp"], "2026-10-25T11:20:00.000Z");
    assert_eq!(data["sample_count"].as_u64(), Some(2));
}

#[airq_test::test]
async fn the_location_is_null_when_no_sample_ever_carried_one() {
    let app = TestApp::spawn().await;
    app.clock.set(t0());
    let device = app.register_named("alice", "Kitchen").await;
    report(&app, &device, sample(), t0() - minutes(5)).await;
    let data = app.data_as("alice", &device_path(&device)).await;
    assert!(data.as_object().expect("object").contains_key("location"));
    assert_eq!(data["location"], Value::Null);
    let data = app.data_as("alice", "/air-quality/current").await;
    assert_eq!(data["location"], Value::Null);
}

#[airq_test::test]
async fn a_device_that_never_reported_is_404() {
    let app = TestApp::spawn().await;
    app.clock.set(t0());
    let device = app.register_named("alice", "Silent").await;
    let path = device_path(&device);
    let body = problem(app.get_as("alice", &path).await, 404).await;
    assert_eq!(body["type"], "about:blank");
    assert_eq!(body["instance"], format!("/api/v1{path}"));

    report(&app, &device, sample(), t0()).await;
    app.data_as("alice", &path).await;
}

#[airq_test::test]
async fn unknown_and_foreign_devices_are_the_same_404() {
    let app = TestApp::spawn().await;
    app.clock.set(t0());
    let bobs = app.register_named("bob", "Bob's").await;
    report(&app, &bobs, sample(), t0() - minutes(1)).await;
    app.data_as("bob", &device_path(&bobs)).await;

    let foreign = problem(app.get_as("alice", &device_path(&bobs)).await, 404).await;
    let unknown_path = format!("/devices/{}/current", uuid::Uuid::new_v4());
    let unknown = problem(app.get_as("alice", &unknown_path).await, 404).await;
    assert_eq!(foreign["detail"], unknown["detail"]);
    assert_eq!(foreign["title"], unknown["title"]);
    assert_eq!(foreign["type"], unknown["type"]);
}

#[airq_test::test]
async fn a_malformed_device_id_is_422() {
    let app = TestApp::spawn().await;
    for id in ["not-a-uuid", "123", "g0000000-0000-0000-0000-000000000000"] {
        let path = format!("/devices/{id}/current");
        let body = problem(app.get_as("alice", &path).await, 422).await;
        assert_eq!(body["type"], "urn:airq:problem:validation");
        assert_eq!(field_errors(&body), [fe("id", "format", "path")], "{id}");
    }
}

#[airq_test::test]
async fn the_snapshot_routes_need_an_owner_token() {
    let app = TestApp::spawn().await;
    app.clock.set(t0());
    let device = app.register_named("alice", "Kitchen").await;
    report(&app, &device, sample(), t0()).await;
    for path in [
        "/air-quality/current".to_owned(),
        device_path(&device),
        "/devices/not-a-uuid/current".to_owned(),
    ] {
        let response = app.get_public(&path).await;
        assert_bearer_challenge(&response);
        problem(response, 401).await;
        let response = app
            .client
            .get(app.url(&path))
            .bearer_auth("not-a-token")
            .send()
            .await
            .expect("sent");
        problem(response, 401).await;
    }
}

#[airq_test::test]
async fn the_owner_snapshot_pools_every_device_of_the_owner() {
    let app = TestApp::spawn().await;
    app.clock.set(t0());
    let first = app.register_named("alice", "Kitchen").await;
    let second = app.register_named("alice", "Bedroom").await;
    let bobs = app.register_named("bob", "Bob's").await;
    report(
        &app,
        &first,
        reading(10, 1.0, 2.0, 3.0, 20.0, 21.0, 30.0),
        t0() - minutes(30),
    )
    .await;
    report(
        &app,
        &second,
        reading(20, 2.0, 4.0, 6.0, 22.0, 23.0, 40.0),
        t0() - minutes(20),
    )
    .await;
    report(
        &app,
        &second,
        reading(31, 3.0, 6.0, 9.0, 24.0, 25.0, 50.0),
        t0() - minutes(5),
    )
    .await;
    report(
        &app,
        &bobs,
        reading(500, 100.0, 200.0, 300.0, 40.0, 41.0, 90.0),
        t0() - minutes(1),
    )
    .await;

    let data = app.data_as("alice", "/air-quality/current").await;
    assert_eq!(data["sample_count"].as_u64(), Some(3), "{data}");
    assert_eq!(data["aqi"].as_i64(), Some(20));
    assert_close(&data["pm1_0"], 2.0, "pm1_0");
    assert_close(&data["pm2_5"], 4.0, "pm2_5");
    assert_close(&data["pm10_0"], 6.0, "pm10_0");
    assert_close(&data["temperature"], 22.0, "temperature");
    assert_close(&data["heat_index"], 23.0, "heat_index");
    assert_close(&data["humidity"], 40.0, "humidity");
    assert_eq!(data["status"], "online");
    assert_eq!(data["last_seen"], "2026-10-25T11:55:00.000Z");

    let data = app.data_as("bob", "/air-quality/current").await;
    assert_eq!(data["sample_count"].as_u64(), Some(1), "{data}");
    assert_eq!(data["aqi"].as_i64(), Some(500));
    assert_eq!(data["last_seen"], "2026-10-25T11:59:00.000Z");

    // The per-device snapshot is restricted to the device.
    let data = app.data_as("alice", &device_path(&first)).await;
    assert_eq!(data["sample_count"].as_u64(), Some(1));
    assert_eq!(data["aqi"].as_i64(), Some(10));
    assert_eq!(data["last_seen"], "2026-10-25T11:30:00.000Z");
}

#[airq_test::test]
async fn the_owner_is_online_while_any_device_is() {
    let app = TestApp::spawn().await;
    app.clock.set(t0());
    let stale = app.register_named("alice", "Stale").await;
    let fresh = app.register_named("alice", "Fresh").await;
    report(&app, &stale, sample_with(10, 1.0, 20.0), t0() - minutes(50)).await;
    report(&app, &fresh, sample_with(30, 3.0, 22.0), t0() - minutes(10)).await;

    assert_eq!(
        app.data_as("alice", &device_path(&stale)).await["status"],
        "offline"
    );
    let data = app.data_as("alice", "/air-quality/current").await;
    assert_eq!(data["status"], "online", "{data}");
    assert_eq!(data["last_seen"], "2026-10-25T11:50:00.000Z");
    assert_eq!(data["sample_count"].as_u64(), Some(2));
    assert_eq!(data["aqi"].as_i64(), Some(20));

    // 11 minutes on: the fresh device is silent for 21 minutes, and the stale sample has left
    // the pooled hour (T−49m, T+11m].
    app.clock.advance(minutes(11));
    let data = app.data_as("alice", "/air-quality/current").await;
    assert_eq!(data["status"], "offline", "{data}");
    assert_eq!(data["sample_count"].as_u64(), Some(1));
    assert_eq!(data["aqi"].as_i64(), Some(30));
    assert_eq!(data["last_seen"], "2026-10-25T11:50:00.000Z");
}

#[airq_test::test]
async fn the_owner_location_is_the_latest_of_any_device() {
    let app = TestApp::spawn().await;
    app.clock.set(t0());
    let first = app.register_named("alice", "Car").await;
    let second = app.register_named("alice", "Bike").await;
    let bobs = app.register_named("bob", "Bob's").await;
    report(
        &app,
        &first,
        located(sample(), 52.52, 13.405),
        t0() - minutes(30),
    )
    .await;
    report(
        &app,
        &second,
        located(sample(), 40.4, -3.7),
        t0() - minutes(40),
    )
    .await;
    // The latest sample of all carries no location.
    report(&app, &second, sample(), t0() - minutes(5)).await;
    report(
        &app,
        &bobs,
        located(sample(), -33.9, 151.2),
        t0() - minutes(1),
    )
    .await;

    let data = app.data_as("alice", "/air-quality/current").await;
    assert_eq!(
        data["location"],
        json!({
            "lat": 52.52,
            "lon": 13.405,
            "provider": "phone-gps",
            "timestamp": "2026-10-25T11:30:00.000Z"
        })
    );
    assert_eq!(data["last_seen"], "2026-10-25T11:55:00.000Z");
    let data = app.data_as("alice", &device_path(&second)).await;
    assert_eq!(data["location"]["lat"], 40.4);
    assert_eq!(data["location"]["timestamp"], "2026-10-25T11:20:00.000Z");
}

#[airq_test::test]
async fn the_owner_snapshot_is_404_until_some_device_reports() {
    let app = TestApp::spawn().await;
    app.clock.set(t0());
    // No device at all.
    let body = problem(app.get_as("alice", "/air-quality/current").await, 404).await;
    assert_eq!(body["instance"], "/api/v1/air-quality/current");

    // Devices that never reported; another owner's reports do not count.
    let device = app.register_named("alice", "Silent").await;
    app.register_named("alice", "Also silent").await;
    let bobs = app.register_named("bob", "Bob's").await;
    report(&app, &bobs, sample(), t0()).await;
    problem(app.get_as("alice", "/air-quality/current").await, 404).await;

    report(&app, &device, sample(), t0()).await;
    let data = app.data_as("alice", "/air-quality/current").await;
    assert_eq!(data["sample_count"].as_u64(), Some(1));
}

#[airq_test::test]
async fn a_deleted_device_no_longer_counts_owner_wide() {
    let app = TestApp::spawn().await;
    app.clock.set(t0());
    let kept = app.register_named("alice", "Kept").await;
    let deleted = app.register_named("alice", "Deleted").await;
    report(&app, &kept, sample_with(10, 1.0, 20.0), t0() - minutes(30)).await;
    report(
        &app,
        &deleted,
        located(sample_with(50, 5.0, 30.0), 1.0, 2.0),
        t0() - minutes(2),
    )
    .await;
    let data = app.data_as("alice", "/air-quality/current").await;
    assert_eq!(data["sample_count"].as_u64(), Some(2));

    delete(&app, &deleted).await;

    let data = app.data_as("alice", "/air-quality/current").await;
    assert_eq!(data["sample_count"].as_u64(), Some(1), "{data}");
    assert_eq!(data["aqi"].as_i64(), Some(10));
    assert_close(&data["temperature"], 20.0, "temperature");
    assert_eq!(data["last_seen"], "2026-10-25T11:30:00.000Z");
    assert_eq!(data["status"], "offline");
    assert_eq!(data["location"], Value::Null);
    problem(app.get_as("alice", &device_path(&deleted)).await, 404).await;

    delete(&app, &kept).await;
    problem(app.get_as("alice", "/air-quality/current").await, 404).await;
}

#[airq_test::test]
async fn a_deleted_device_cannot_report_again() {
    let app = TestApp::spawn().await;
    app.clock.set(t0());
    let device = app.register_named("alice", "Deleted").await;
    // The upload puts the device's credentials into the server's cache.
    report(&app, &device, sample(), t0() - minutes(2)).await;
    delete(&app, &device).await;

    let response = app.upload(&device, &sample()).await;
    problem(response, 401).await;
    problem(app.get_as("alice", "/air-quality/current").await, 404).await;
}

#[airq_test::test]
async fn the_hour_is_counted_in_whole_seconds() {
    let app = TestApp::spawn().await;
    let now = t0() + TimeDelta::milliseconds(400);
    app.clock.set(now);
    let device = app.register_named("alice", "Hall").await;
    // Less than an hour before now, but in the second an hour before now's: left out.
    report(
        &app,
        &device,
        sample_with(100, 10.0, 30.0),
        t0() - minutes(60) + TimeDelta::milliseconds(300),
    )
    .await;
    report(
        &app,
        &device,
        sample_with(20, 2.0, 20.0),
        t0() - minutes(60) + TimeDelta::seconds(1),
    )
    .await;
    // Later than now, in now's second: counted, and the last contact.
    report(
        &app,
        &device,
        sample_with(40, 4.0, 22.0),
        t0() + TimeDelta::milliseconds(900),
    )
    .await;

    for path in [device_path(&device), "/air-quality/current".to_owned()] {
        let data = app.data_as("alice", &path).await;
        assert_eq!(data["sample_count"].as_u64(), Some(2), "{path}: {data}");
        assert_eq!(data["aqi"].as_i64(), Some(30), "{path}");
        assert_close(&data["temperature"], 21.0, "temperature");
        assert_eq!(data["last_seen"], "2026-10-25T12:00:00.900Z", "{path}");
    }
}

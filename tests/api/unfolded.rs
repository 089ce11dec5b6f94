//! The embedded store answers 201 after an append and folds behind (`src/store/sqlite/ingest`):
//! reads must be exact whether or not the fold has reached a reading. These tests hold the fold
//! back (a long interval, a high row threshold) so every read goes through the unfolded tail.

use std::path::Path;
use std::time::Duration;

use chrono::{TimeDelta, Utc};
use serde_json::{json, Value};

use crate::common::{assert_close, located, measured, sample_with, TestApp};

/// A server whose fold runs only once `rows` readings wait (or at shutdown).
async fn app_folding_every(rows: i64) -> TestApp {
    TestApp::spawn_with(|c| {
        c.fold.interval = Duration::from_secs(3600);
        c.fold.rows = rows;
    })
    .await
}

fn count(data_dir: &Path, sql: &str) -> i64 {
    let db = rusqlite::Connection::open(data_dir.join("airq.db")).expect("airq.db");
    db.query_row(sql, [], |row| row.get(0)).expect("count")
}

fn folded(app: &TestApp) -> i64 {
    count(
        app.data_dir.path(),
        "SELECT count(*) FROM readings_by_device",
    )
}

async fn until_folded(app: &TestApp, rows: i64) {
    for _ in 0..500 {
        if folded(app) >= rows {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("the fold did not reach {rows} rows");
}

async fn public_device(app: &TestApp) -> Value {
    app.register(
        "alice",
        json!({ "name": "Roof", "is_public": true, "is_location_public": true }),
    )
    .await
}

#[tokio::test]
async fn every_read_includes_readings_the_fold_has_not_reached() {
    let app = app_folding_every(1_000_000).await;
    let device = public_device(&app).await;
    let id = device["id"].as_str().expect("id").to_owned();
    let now = Utc::now();
    for (minutes, aqi) in [(50, 10), (30, 20), (10, 30)] {
        let body = located(
            measured(
                sample_with(aqi, aqi as f64, 20.0),
                now - TimeDelta::minutes(minutes),
            ),
            52.5,
            13.4,
        );
        app.upload_ok(&device, &body).await;
    }
    assert_eq!(folded(&app), 0, "nothing is folded yet");

    let current = app
        .data_as("alice", &format!("/devices/{id}/current"))
        .await;
    assert_eq!(current["sample_count"], 3);
    assert_eq!(current["aqi"], 20);
    assert_close(&current["location"]["lat"], 52.5, "lat");
    let pooled = app.data_as("alice", "/air-quality/current").await;
    assert_eq!(pooled["sample_count"], 3);

    let daily = app
        .data_as("alice", &format!("/devices/{id}/historical?timeline=daily"))
        .await;
    let samples: f64 = daily
        .as_array()
        .expect("points")
        .iter()
        .map(|point| point["metrics"]["pm2_5"].as_f64().expect("pm2_5"))
        .sum();
    assert!(
        samples > 0.0,
        "the timeline has the unfolded readings: {daily}"
    );

    let map = app.get_public("/public/map/devices").await;
    let map: Value = map.json().await.expect("json");
    assert_eq!(
        map["data"][0]["aqi"], 30,
        "the map shows the latest located sample"
    );
    let public = app
        .get_public(&format!("/public/devices/{id}/current"))
        .await;
    let public: Value = public.json().await.expect("json");
    assert_eq!(public["data"]["sample_count"], 3);
}

#[tokio::test]
async fn a_reading_that_replaces_a_folded_one_counts_once_before_it_is_folded() {
    let app = app_folding_every(3).await;
    let device = app.register_named("alice", "balcony").await;
    let id = device["id"].as_str().expect("id").to_owned();
    let now = Utc::now();
    let times: Vec<_> = [40, 20, 5].map(|m| now - TimeDelta::minutes(m)).to_vec();
    for at in &times {
        app.upload_ok(&device, &measured(sample_with(10, 1.0, 20.0), *at))
            .await;
    }
    until_folded(&app, 3).await;
    // The same key again, with other values: one row below the fold's threshold.
    app.upload_ok(&device, &measured(sample_with(40, 4.0, 20.0), times[1]))
        .await;
    let current = app
        .data_as("alice", &format!("/devices/{id}/current"))
        .await;
    assert_eq!(current["sample_count"], 3, "replaced, not added: {current}");
    assert_eq!(current["aqi"], 20, "(10 + 40 + 10) / 3");
    assert_close(&current["pm2_5"], 2.0, "pm2_5");
    let custom = app
        .data_as(
            "alice",
            &format!(
                "/air-quality/custom?start_date={}&end_date={}",
                (now - TimeDelta::days(1)).format("%F"),
                (now + TimeDelta::days(1)).format("%F")
            ),
        )
        .await;
    let aqi_sum: i64 = custom
        .as_array()
        .expect("points")
        .iter()
        .map(|point| point["metrics"]["aqi"].as_i64().expect("aqi"))
        .sum();
    assert!(aqi_sum > 0);
    assert_eq!(app.stored_ids().await.len(), 3);
}

#[tokio::test]
async fn a_restart_folds_whatever_was_left_unfolded() {
    let mut app = app_folding_every(1_000_000).await;
    let device = app.register_named("alice", "balcony").await;
    let id = device["id"].as_str().expect("id").to_owned();
    let now = Utc::now();
    for minutes in [30, 20, 10] {
        app.upload_ok(
            &device,
            &measured(
                sample_with(20, 2.0, 20.0),
                now - TimeDelta::minutes(minutes),
            ),
        )
        .await;
    }
    let data_dir = std::mem::replace(&mut app.data_dir, tempfile::tempdir().expect("temp dir"));
    app.stop().await;
    // What a crash leaves: appended rows, nothing derived from them.
    let db = rusqlite::Connection::open(data_dir.path().join("airq.db")).expect("airq.db");
    db.execute_batch(
        "DELETE FROM readings_by_device; DELETE FROM rollups_15m; DELETE FROM rollups_1d; \
         DELETE FROM device_latest; UPDATE counters SET value = 0 WHERE name = 'folded_id';",
    )
    .expect("derived state removed");
    drop(db);

    let app = TestApp::spawn_in(data_dir, |_| {}).await;
    let current = app
        .data_as("alice", &format!("/devices/{id}/current"))
        .await;
    assert_eq!(current["sample_count"], 3);
    until_folded(&app, 3).await;
    assert_eq!(
        count(
            app.data_dir.path(),
            "SELECT coalesce(sum(samples), 0) FROM rollups_15m"
        ),
        3,
        "the restarted fold derived the rollups once"
    );
    let current = app
        .data_as("alice", &format!("/devices/{id}/current"))
        .await;
    assert_eq!(current["sample_count"], 3);
}

//! The map after its first cache period: each period reads again only what changed since the
//! one before (`src/read/map.rs`), so a map polled period after period must show every change
//! as a freshly started server would — new positions, replaced readings, whether the fold has
//! reached them or not, and statuses that move with the clock alone.

use std::time::{Duration, Instant};

use chrono::{DateTime, TimeDelta, Utc};
use serde_json::{json, Value};

use crate::common::{located, measured, sample, sample_with, TestApp};

/// A server whose map lives 200 ms; `fold_each_row` folds every reading at once, else the fold
/// is held back so every reading stays unfolded.
async fn app(fold_each_row: bool) -> TestApp {
    TestApp::spawn_with(|c| {
        c.map_cache_ttl = Duration::from_millis(200);
        if fold_each_row {
            c.fold.rows = 1;
            c.fold.interval = Duration::from_millis(10);
        } else {
            c.fold.rows = i64::MAX;
            c.fold.interval = Duration::from_secs(3600);
        }
    })
    .await
}

fn start() -> DateTime<Utc> {
    DateTime::parse_from_rfc3339("2026-03-10T12:30:00Z")
        .expect("an instant")
        .with_timezone(&Utc)
}

async fn public_device(app: &TestApp, name: &str) -> Value {
    app.register(
        "alice",
        json!({ "name": name, "is_public": true, "is_location_public": true }),
    )
    .await
}

/// The device's map entry, polled until `wanted` holds for it (for 5 s at most).
async fn entry_once(app: &TestApp, device: &Value, wanted: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let response = app.get_public("/public/map/devices").await;
        assert_eq!(response.status(), 200);
        let body: Value = response.json().await.expect("a JSON body");
        let entry = body["data"]
            .as_array()
            .expect("a data array")
            .iter()
            .find(|entry| entry["id"] == device["id"])
            .cloned()
            .unwrap_or(Value::Null);
        if wanted(&entry) || Instant::now() > deadline {
            return entry;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn at(lat: f64, lon: f64) -> impl Fn(&Value) -> bool {
    move |entry| entry["lat"] == lat && entry["lon"] == lon
}

/// How many readings the fold has written into `airq.db`.
fn folded(app: &TestApp) -> i64 {
    let db = rusqlite::Connection::open(app.data_dir.path().join("airq.db")).expect("airq.db");
    db.query_row("SELECT count(*) FROM readings_by_device", [], |row| {
        row.get(0)
    })
    .expect("a count")
}

async fn until_folded(app: &TestApp, rows: i64) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while folded(app) < rows {
        assert!(
            Instant::now() < deadline,
            "the fold did not reach {rows} rows"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[airq_test::test]
async fn a_device_that_moves_is_shown_where_it_is_now_after_the_next_period() {
    let app = app(false).await;
    let mover = public_device(&app, "mover").await;
    let still = public_device(&app, "still").await;
    app.upload_ok(&mover, &located(sample(), 48.85, 2.35)).await;
    app.upload_ok(&still, &located(sample(), 40.0, 3.0)).await;
    entry_once(&app, &mover, at(48.85, 2.35)).await;

    app.upload_ok(&mover, &located(sample(), 52.52, 13.40))
        .await;
    let moved = entry_once(&app, &mover, at(52.52, 13.40)).await;
    assert_eq!(
        (&moved["lat"], &moved["lon"]),
        (&json!(52.52), &json!(13.40))
    );
    let unmoved = entry_once(&app, &still, at(40.0, 3.0)).await;
    assert_eq!(
        (&unmoved["lat"], &unmoved["lon"]),
        (&json!(40.0), &json!(3.0))
    );
}

#[airq_test::test]
async fn a_move_the_fold_has_reached_is_shown_after_the_next_period() {
    let app = app(true).await;
    let mover = public_device(&app, "mover").await;
    app.upload_ok(&mover, &located(sample(), 48.85, 2.35)).await;
    until_folded(&app, 1).await;
    entry_once(&app, &mover, at(48.85, 2.35)).await;

    app.upload_ok(&mover, &located(sample(), 52.52, 13.40))
        .await;
    until_folded(&app, 2).await;
    let moved = entry_once(&app, &mover, at(52.52, 13.40)).await;
    assert_eq!(
        (&moved["lat"], &moved["lon"]),
        (&json!(52.52), &json!(13.40))
    );
}

#[airq_test::test]
async fn a_replaced_located_reading_is_shown_after_the_next_period() {
    let app = app(false).await;
    app.clock.set(start());
    let device = public_device(&app, "replaced").await;
    let when = start() - TimeDelta::minutes(5);
    app.upload_ok(
        &device,
        &measured(located(sample_with(40, 9.0, 20.0), 48.85, 2.35), when),
    )
    .await;
    entry_once(&app, &device, at(48.85, 2.35)).await;

    app.upload_ok(
        &device,
        &measured(located(sample_with(80, 30.0, 21.0), 45.0, 7.0), when),
    )
    .await;
    let replaced = entry_once(&app, &device, at(45.0, 7.0)).await;
    assert_eq!(
        (&replaced["lat"], &replaced["lon"]),
        (&json!(45.0), &json!(7.0))
    );
    assert_eq!(replaced["aqi"], 80);
}

#[airq_test::test]
async fn a_device_that_falls_silent_turns_offline_after_the_next_period_without_a_reading() {
    let app = app(false).await;
    app.clock.set(start());
    let device = public_device(&app, "quiet").await;
    app.upload_ok(&device, &located(sample(), 48.85, 2.35))
        .await;
    let online = entry_once(&app, &device, |entry| entry["status"] == "online").await;
    assert_eq!(online["status"], "online");

    app.clock.set(start() + TimeDelta::minutes(30));
    let offline = entry_once(&app, &device, |entry| entry["status"] == "offline").await;
    assert_eq!(offline["status"], "offline", "nothing since for 30 minutes");
}

#[airq_test::test]
async fn a_device_registered_after_the_first_period_joins_the_map() {
    let app = app(false).await;
    let first = public_device(&app, "first").await;
    app.upload_ok(&first, &located(sample(), 48.85, 2.35)).await;
    entry_once(&app, &first, at(48.85, 2.35)).await;

    let newcomer = public_device(&app, "newcomer").await;
    app.upload_ok(&newcomer, &located(sample(), 50.0, 8.0))
        .await;
    let joined = entry_once(&app, &newcomer, at(50.0, 8.0)).await;
    assert_eq!(
        (&joined["lat"], &joined["lon"]),
        (&json!(50.0), &json!(8.0))
    );
}

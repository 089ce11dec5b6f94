//! The embedded reading store's pooled rollups (`src/store/sqlite/pooled.rs`): an owner-wide
//! read of a large fleet is summed from one set's rows, which the fold keeps with every reading
//! it folds after the set was made, and which a deletion drops; and a fleet's current snapshot,
//! whose latest contact and position are kept between requests (`set_latest.rs`). Here the fold runs as soon as a
//! reading waits, and each read waits until it has, so the reads see folded rows only, not the
//! unfolded tail (whose merging `unfolded.rs` tests).

use std::time::Duration;

use serde_json::Value;

use crate::common::{aqis, at, located, measured, sample_with, TestApp};
use crate::upload::delete;

/// Devices in the fleet: well above the pooling threshold (10).
const FLEET: usize = 120;

fn count(app: &TestApp, sql: &str) -> i64 {
    let db = rusqlite::Connection::open(app.data_dir.path().join("airq.db")).expect("airq.db");
    db.query_row(sql, [], |row| row.get(0)).expect("count")
}

/// Waits until the fold's watermark reaches receipt id `id`.
async fn until_folded(app: &TestApp, id: i64) {
    for _ in 0..1_000 {
        let folded = count(
            app,
            "SELECT coalesce(max(value), 0) FROM counters WHERE name = 'folded_id'",
        );
        if folded >= id {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("the fold did not reach receipt id {id}");
}

/// Uploads a reading of `device` measured `when`; its receipt id.
async fn report(app: &TestApp, device: &Value, aqi: i64, when: &str) -> i64 {
    let receipt = app
        .upload_ok(device, &measured(sample_with(aqi, 10.0, 20.0), at(when)))
        .await;
    receipt["id"].as_i64().expect("receipt id")
}

async fn daily_aqis(app: &TestApp) -> Vec<i64> {
    daily_aqis_in(app, "UTC").await
}

/// The same from the 1st of September (a range long enough that its day edges are read from
/// the hours of passed days), with days in the zone `tz`.
async fn daily_aqis_in(app: &TestApp, tz: &str) -> Vec<i64> {
    let body = app
        .data_as(
            "alice",
            &format!("/air-quality/custom?start_date=2026-09-01&end_date=2026-11-22&tz={tz}"),
        )
        .await;
    aqis(body.as_array().expect("points"))
}

fn sets(app: &TestApp) -> i64 {
    count(app, "SELECT count(*) FROM pooled_sets")
}

/// A server folding at once, alice's fleet registered, each device's reading of the 20th folded.
async fn fleet_with_a_folded_day() -> (TestApp, Vec<Value>) {
    fleet_of_with_a_folded_day(FLEET).await
}

/// The same with a fleet of `size` devices.
async fn fleet_of_with_a_folded_day(size: usize) -> (TestApp, Vec<Value>) {
    let app = TestApp::spawn_with(|c| {
        c.fold.interval = Duration::from_millis(5);
        c.fold.rows = 1;
    })
    .await;
    app.clock.set(at("2026-11-25T12:00:00Z"));
    let mut devices = Vec::with_capacity(size);
    let mut last = 0;
    for index in 0..size {
        let device = app
            .register_named("alice", &format!("sensor {index}"))
            .await;
        last = report(&app, &device, 10, "2026-11-20T08:00:00Z").await;
        devices.push(device);
    }
    until_folded(&app, last).await;
    (app, devices)
}

#[airq_test::test]
async fn readings_folded_after_a_fleets_set_was_made_count_in_its_reads() {
    let (app, devices) = fleet_with_a_folded_day().await;
    assert_eq!(sets(&app), 0, "no set before the first read");
    assert_eq!(daily_aqis(&app).await, [10]);
    assert_eq!(sets(&app), 1, "the first read made the fleet's set");

    // Late on the 20th in UTC, early on the 21st in Kolkata; folded while the 20th has no
    // hours yet, so they come from the day's quarter hours once the 21st's readings come.
    let late = report(&app, &devices[1], 130, "2026-11-20T20:00:00Z").await;
    until_folded(&app, late).await;
    for device in &devices[..FLEET / 2] {
        report(&app, device, 70, "2026-11-21T12:00:00Z").await;
    }
    // Replaces device 0's reading of the 20th: the set loses its 10 and gains 1,210.
    let last = report(&app, &devices[0], 1_210, "2026-11-20T08:00:00Z").await;
    until_folded(&app, last).await;
    // 20th: (1,210 + 119 × 10 + 130) / 121; 21st: 60 × 70.
    assert_eq!(daily_aqis(&app).await, [21, 70]);
    // Kolkata's days start at 18:30 UTC: its 21st reads the 20th's last hours from the hours
    // of passed days, which the fold derived for the set once readings of the 21st came.
    // 20th: (1,210 + 119 × 10) / 120; 21st: (130 + 60 × 70) / 61.
    assert_eq!(daily_aqis_in(&app, "Asia/Kolkata").await, [20, 71]);
    assert_eq!(sets(&app), 1, "the same set answered");
}

#[airq_test::test]
async fn ten_devices_read_from_a_set_and_nine_from_their_own_rollups() {
    let (app, devices) = fleet_of_with_a_folded_day(10).await;
    assert_eq!(daily_aqis(&app).await, [10]);
    assert_eq!(sets(&app), 1, "ten devices make a set");

    let last = report(&app, &devices[1], 910, "2026-11-20T08:00:00Z").await;
    until_folded(&app, last).await;
    assert_eq!(daily_aqis(&app).await, [100], "(910 + 9 × 10) / 10");
    delete(&app, &devices[0]).await;
    assert_eq!(daily_aqis(&app).await, [110], "(910 + 8 × 10) / 9");
    assert_eq!(sets(&app), 0, "nine devices are read device by device");
}

#[airq_test::test]
async fn a_deleted_device_takes_its_fleets_set_with_it() {
    let (app, devices) = fleet_with_a_folded_day().await;
    let last = report(&app, &devices[0], 1_210, "2026-11-20T08:00:00Z").await;
    until_folded(&app, last).await;
    assert_eq!(daily_aqis(&app).await, [20]);

    delete(&app, &devices[0]).await;
    assert_eq!(sets(&app), 0, "the deletion dropped the set");
    assert_eq!(daily_aqis(&app).await, [10]);
    assert_eq!(sets(&app), 1, "the next read made the smaller fleet's set");
}

/// Uploads `body` for `device` measured `when`; its receipt id.
async fn report_body(app: &TestApp, device: &Value, body: Value, when: &str) -> i64 {
    let receipt = app.upload_ok(device, &measured(body, at(when))).await;
    receipt["id"].as_i64().expect("receipt id")
}

#[airq_test::test]
async fn a_fleets_current_follows_readings_folded_between_its_reads() {
    let (app, devices) = fleet_with_a_folded_day().await;
    app.clock.set(at("2026-11-20T08:30:00Z"));
    let located_at = |lat: f64| located(sample_with(10, 10.0, 20.0), lat, 13.4);
    let last = report_body(&app, &devices[5], located_at(52.5), "2026-11-20T08:10:00Z").await;
    until_folded(&app, last).await;
    let current = app.data_as("alice", "/air-quality/current").await;
    assert_eq!(current["sample_count"], 121, "{current}");
    assert_eq!(current["last_seen"], "2026-11-20T08:10:00.000Z");
    assert_eq!(current["location"]["lat"], 52.5);

    // Folded between two reads: a later contact, a later position, an earlier position.
    report_body(&app, &devices[7], located_at(48.1), "2026-11-20T08:20:00Z").await;
    report_body(&app, &devices[9], located_at(40.4), "2026-11-20T08:05:00Z").await;
    let last = report(&app, &devices[11], 10, "2026-11-20T08:25:00Z").await;
    until_folded(&app, last).await;
    let current = app.data_as("alice", "/air-quality/current").await;
    assert_eq!(current["sample_count"], 124, "{current}");
    assert_eq!(current["last_seen"], "2026-11-20T08:25:00.000Z");
    assert_eq!(current["location"]["lat"], 48.1);
    assert_eq!(current["location"]["timestamp"], "2026-11-20T08:20:00.000Z");
}

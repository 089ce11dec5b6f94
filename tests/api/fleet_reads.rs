//! Owner-wide reads of a fleet: an owner of many devices (more than the embedded store reads
//! device by device, see `pooled.rs`) gets exactly the timelines and custom ranges an owner of a
//! few gets — every device's readings, late ones included, and none of a deleted device.

use serde_json::Value;

use crate::common::{aqis, at, measured, sample_with, TestApp};
use crate::upload::delete;

/// Devices in the fleet: well above the embedded store's pooling threshold (10).
const FLEET: usize = 120;

/// Registers `count` devices for alice.
async fn fleet(app: &TestApp, count: usize) -> Vec<Value> {
    let mut devices = Vec::with_capacity(count);
    for index in 0..count {
        devices.push(
            app.register_named("alice", &format!("sensor {index}"))
                .await,
        );
    }
    devices
}

async fn report(app: &TestApp, device: &Value, aqi: i64, when: &str) {
    app.upload_ok(device, &measured(sample_with(aqi, 10.0, 20.0), at(when)))
        .await;
}

/// The AQI of each day of alice's custom range from the 20th to the 22nd of November 2026.
async fn daily_aqis(app: &TestApp) -> Vec<i64> {
    let body = app
        .data_as(
            "alice",
            "/air-quality/custom?start_date=2026-11-20&end_date=2026-11-22",
        )
        .await;
    aqis(body.as_array().expect("points"))
}

#[airq_test::test]
async fn a_fleets_custom_range_pools_every_devices_readings_late_ones_included() {
    let app = TestApp::spawn().await;
    app.clock.set(at("2026-11-25T12:00:00Z"));
    let devices = fleet(&app, FLEET).await;
    for device in &devices {
        report(&app, device, 10, "2026-11-20T08:00:00Z").await;
    }
    report(&app, &devices[0], 1_210, "2026-11-22T09:00:00Z").await;
    report(&app, &devices[1], 30, "2026-11-22T10:00:00Z").await;
    // 20th: 120 × 10; 22nd: (1,210 + 30) / 2.
    assert_eq!(daily_aqis(&app).await, [10, 620]);

    // Readings of past days arriving after the first read, one replacing a reading by key.
    for device in &devices[..FLEET / 2] {
        report(&app, device, 70, "2026-11-21T12:00:00Z").await;
    }
    report(&app, &devices[0], 30, "2026-11-22T09:00:00Z").await;
    assert_eq!(daily_aqis(&app).await, [10, 70, 30]);
}

#[airq_test::test]
async fn a_fleet_that_loses_and_gains_devices_reads_as_it_now_is() {
    let app = TestApp::spawn().await;
    app.clock.set(at("2026-11-25T12:00:00Z"));
    let devices = fleet(&app, FLEET).await;
    for device in &devices[1..] {
        report(&app, device, 10, "2026-11-20T08:00:00Z").await;
    }
    report(&app, &devices[0], 1_200 + 10, "2026-11-20T08:00:00Z").await;
    // (119 × 10 + 1,210) / 120.
    assert_eq!(daily_aqis(&app).await, [20]);

    delete(&app, &devices[0]).await;
    assert_eq!(daily_aqis(&app).await, [10]);

    let newcomer = app.register_named("alice", "newcomer").await;
    report(&app, &newcomer, 129, "2026-11-20T09:00:00Z").await;
    // (119 × 10 + 129) / 120 = 10.99.
    assert_eq!(daily_aqis(&app).await, [11]);
}

#[airq_test::test]
async fn a_fleets_daily_timeline_counts_every_device() {
    let app = TestApp::spawn().await;
    app.clock.set(at("2026-11-25T12:00:00Z"));
    let devices = fleet(&app, FLEET).await;
    for (index, device) in devices.iter().enumerate() {
        let aqi = if index % 2 == 0 { 10 } else { 30 };
        report(&app, device, aqi, "2026-11-25T09:30:00Z").await;
    }
    let points = app
        .data_as("alice", "/air-quality/historical?timeline=daily&tz=UTC")
        .await;
    assert_eq!(aqis(points.as_array().expect("points")), [20], "{points}");
}

#[airq_test::test]
async fn an_owner_whose_id_holds_a_quote_reads_its_own_fleet_and_no_other() {
    let app = TestApp::spawn().await;
    app.clock.set(at("2026-11-25T12:00:00Z"));
    let quoted = "o'brien";
    let mine = app.register_named(quoted, "balcony").await;
    let theirs = app.register_named("o", "attic").await;
    report(&app, &mine, 40, "2026-11-25T11:50:00Z").await;
    report(&app, &theirs, 90, "2026-11-25T11:55:00Z").await;

    let current = app.data_as(quoted, "/air-quality/current").await;
    assert_eq!(current["aqi"].as_i64(), Some(40), "{current}");
    assert_eq!(current["sample_count"].as_u64(), Some(1), "{current}");
    let daily = app
        .data_as(quoted, "/air-quality/historical?timeline=daily")
        .await;
    assert_eq!(aqis(daily.as_array().expect("points")), [40], "{daily}");
}

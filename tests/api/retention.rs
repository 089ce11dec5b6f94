//! Raw retention (`AIRQ_RAW_RETENTION_DAYS`): raw readings older than the retention leave in the
//! background while the rollups stay, so timelines still answer for their period; what needs raw
//! readings past it (an export, a long-silent device's current snapshot, an upload measured
//! before it) is answered with a problem that says so, never with a silent gap.

use std::time::Duration;

use airq::clock::Clock as _;
use airq::domain::RawRetention;
use chrono::{DateTime, SecondsFormat, TimeDelta, Utc};
use serde_json::{json, Value};

use crate::common::{aqis, fe, field_errors, measured, problem, sample_with, TestApp};

/// Days raw readings are kept in these tests.
const DAYS: u32 = 7;

/// A server keeping raw readings for [`DAYS`], sweeping often, with a public device of alice's.
async fn app_with_retention() -> (TestApp, Value) {
    let app = TestApp::spawn_with(|c| {
        c.raw_retention = RawRetention::days(DAYS);
        c.retention_sweep = Duration::from_millis(50);
        c.fold.interval = Duration::from_millis(50);
    })
    .await;
    let device = app
        .register(
            "alice",
            json!({"name": "balcony", "is_public": true, "is_location_public": true}),
        )
        .await;
    (app, device)
}

fn id(device: &Value) -> &str {
    device["id"].as_str().expect("id")
}

/// Raw readings folded into the embedded store (where both pairs with this retention keep them).
fn raw_rows(app: &TestApp) -> i64 {
    let db = rusqlite::Connection::open(app.data_dir.path().join("airq.db")).expect("airq.db");
    db.query_row("SELECT count(*) FROM readings", [], |row| row.get(0))
        .expect("count")
}

/// Waits until exactly `rows` raw readings are folded and left.
async fn until_raw_rows(app: &TestApp, rows: i64) {
    for _ in 0..600 {
        if raw_rows(app) == rows {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("{} raw readings, not {rows}", raw_rows(app));
}

fn export_query(start: DateTime<Utc>, end: DateTime<Utc>) -> String {
    let at = |t: DateTime<Utc>| {
        form_urlencoded::byte_serialize(t.to_rfc3339_opts(SecondsFormat::Millis, true).as_bytes())
            .collect::<String>()
    };
    format!("start={}&end={}", at(start), at(end))
}

#[airq_test::test]
async fn raw_readings_past_the_retention_leave_and_the_timelines_still_answer_for_their_days() {
    let (app, device) = app_with_retention().await;
    let start = app.clock.now();
    let old = start - TimeDelta::days(3);
    app.upload_ok(&device, &measured(sample_with(40, 10.0, 20.0), old))
        .await;
    app.upload_ok(&device, &measured(sample_with(60, 10.0, 20.0), start))
        .await;
    until_raw_rows(&app, 2).await;

    // Five days on, the first reading is eight days old: past the seven kept.
    app.clock.set(start + TimeDelta::days(5));
    until_raw_rows(&app, 1).await;

    let monthly = app
        .data_as(
            "alice",
            &format!("/devices/{}/historical?timeline=monthly", id(&device)),
        )
        .await;
    let monthly = aqis(monthly.as_array().expect("points"));
    assert!(
        monthly.contains(&40),
        "the pruned reading's day still answers: {monthly:?}"
    );
    assert!(monthly.contains(&60), "{monthly:?}");
    let day = old.format("%Y-%m-%d");
    let custom = app
        .data_as(
            "alice",
            &format!("/air-quality/custom?start_date={day}&end_date={day}"),
        )
        .await;
    assert_eq!(aqis(custom.as_array().expect("points")), [40], "{custom}");
}

#[airq_test::test]
async fn an_export_beginning_before_the_retention_is_422_naming_start_with_the_earliest_instant() {
    let (app, device) = app_with_retention().await;
    let now = app.clock.now();
    for path in [
        format!("/devices/{}/readings", id(&device)),
        format!("/public/devices/{}/readings", id(&device)),
    ] {
        let too_early = export_query(now - TimeDelta::days(8), now);
        let response = if path.starts_with("/public") {
            app.get_public(&format!("{path}?{too_early}")).await
        } else {
            app.get_as("alice", &format!("{path}?{too_early}")).await
        };
        let body = problem(response, 422).await;
        assert_eq!(field_errors(&body), vec![fe("start", "minimum", "query")]);
        let earliest =
            (now - TimeDelta::days(i64::from(DAYS))).to_rfc3339_opts(SecondsFormat::Millis, true);
        assert!(
            body["errors"][0]["detail"]
                .as_str()
                .is_some_and(|detail| detail.contains(&earliest)),
            "{body}"
        );
        let kept = export_query(now - TimeDelta::days(6), now);
        let response = if path.starts_with("/public") {
            app.get_public(&format!("{path}?{kept}")).await
        } else {
            app.get_as("alice", &format!("{path}?{kept}")).await
        };
        assert_eq!(response.status(), 200, "{path}");
    }
}

#[airq_test::test]
async fn the_current_snapshot_of_a_device_silent_past_the_retention_is_a_404_that_says_so() {
    let (app, device) = app_with_retention().await;
    app.upload_ok(&device, &sample_with(50, 10.0, 20.0)).await;
    app.clock.set(app.clock.now() + TimeDelta::days(8));
    for response in [
        app.get_as("alice", &format!("/devices/{}/current", id(&device)))
            .await,
        app.get_as("alice", "/air-quality/current").await,
        app.get_public(&format!("/public/devices/{}/current", id(&device)))
            .await,
    ] {
        let body = problem(response, 404).await;
        assert!(
            body["detail"]
                .as_str()
                .is_some_and(|detail| detail.contains("AIRQ_RAW_RETENTION_DAYS")),
            "{body}"
        );
    }
    // Within the retention it answers as always.
    app.upload_ok(&device, &sample_with(70, 10.0, 20.0)).await;
    let current = app
        .data_as("alice", &format!("/devices/{}/current", id(&device)))
        .await;
    assert_eq!(current["aqi"], 70);
}

#[airq_test::test]
async fn an_upload_measured_before_the_retention_is_422_and_one_within_it_is_stored() {
    let (app, device) = app_with_retention().await;
    let now = app.clock.now();
    let response = app
        .upload(
            &device,
            &measured(sample_with(50, 10.0, 20.0), now - TimeDelta::days(8)),
        )
        .await;
    let body = problem(response, 422).await;
    assert_eq!(
        field_errors(&body),
        vec![fe("measured_at", "minimum", "body")]
    );
    assert!(body["errors"][0]["detail"]
        .as_str()
        .is_some_and(|detail| detail.contains("AIRQ_RAW_RETENTION_DAYS")));
    app.upload_ok(
        &device,
        &measured(sample_with(50, 10.0, 20.0), now - TimeDelta::days(6)),
    )
    .await;
}

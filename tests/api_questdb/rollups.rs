//! The hour and day views on QuestDB (schema 004): once QuestDB derived the passed hours and days
//! of a device, a zone's days are read as UTC days from the day view with the hours between
//! each edge and its nearest midnight added or taken away — and a reading that arrives late,
//! into a day the views derived, is in the next read all the same. An owner's days come from
//! the owner views (schema 006), less the devices the owner deleted. The snapshot's hour, which
//! starts and ends at a second, takes the quarter hour at an edge from the view less the raw
//! readings outside the hour when that reads less raw.

use std::time::Duration;

use chrono::{DateTime, NaiveDate, TimeDelta, TimeZone, Utc};
use chrono_tz::Europe::Berlin;
use reqwest::Method;
use serde_json::{json, Value};

use crate::common::{aqis, at, measured, sample_with, TestApp};

/// The instant of `hour:minute` on `date` in Berlin.
fn berlin(date: NaiveDate, hour: u32, minute: u32) -> DateTime<Utc> {
    Berlin
        .from_local_datetime(&date.and_hms_opt(hour, minute, 0).expect("a time"))
        .single()
        .expect("an unambiguous Berlin time")
        .with_timezone(&Utc)
}

/// Rows of the test table's view with `suffix` (`1h`, `1d`), as far as QuestDB derived them.
async fn view_rows(app: &TestApp, suffix: &str) -> i64 {
    of_view(app, "count()", suffix).await
}

/// `value` (an aggregate) over the test table's view with `suffix`.
async fn of_view(app: &TestApp, value: &str, suffix: &str) -> i64 {
    let table = app.table.as_ref().expect("a QuestDB table");
    table
        .client()
        .await
        .query_one(
            format!("SELECT {value} FROM {}_{suffix}", table.name).as_str(),
            &[],
        )
        .await
        .expect("an aggregate")
        .get(0)
}

/// The readings the test table's view with `suffix` holds once they reach `expected`, or what
/// it holds after 10 s of waiting.
async fn readings_held(app: &TestApp, suffix: &str, expected: i64) -> i64 {
    let mut held = 0;
    for _ in 0..200 {
        held = of_view(app, "coalesce(sum(readings), 0)", suffix).await;
        if held == expected {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    held
}

/// Uploads, for each of three Berlin days a week ago, a reading at 00:30 and one at 23:30 local
/// time — the first in the UTC day before, the second in the UTC day whose last hour belongs to
/// the next Berlin day — and waits until the hour and day views derived them. Returns the days.
async fn three_derived_days(app: &TestApp, device: &Value) -> [NaiveDate; 3] {
    let first = (Utc::now() - TimeDelta::days(7))
        .with_timezone(&Berlin)
        .date_naive();
    let days = [0, 1, 2].map(|offset| first + TimeDelta::days(offset));
    for (index, day) in (0i64..).zip(days) {
        for (hour, aqi) in [(0, 10 * index + 10), (23, 10 * index + 30)] {
            let reading = measured(sample_with(aqi, 10.0, 20.0), berlin(day, hour, 30));
            app.upload_ok(device, &reading).await;
        }
    }
    // Six readings: six UTC hours, four UTC days.
    let mut derived = (0, 0);
    for _ in 0..200 {
        derived = (view_rows(app, "1h").await, view_rows(app, "1d").await);
        if derived == (6, 4) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(derived, (6, 4), "QuestDB derived the hours and days");
    days
}

fn custom_days(days: &[NaiveDate; 3]) -> String {
    format!(
        "/air-quality/custom?start_date={}&end_date={}&interval=day&tz=Europe/Berlin",
        days[0], days[2]
    )
}

#[airq_test::test]
async fn berlin_days_from_the_day_and_hour_views_hold_exactly_their_readings() {
    let app = TestApp::spawn().await;
    let device = app.register("alice", json!({"name": "balcony"})).await;
    let days = three_derived_days(&app, &device).await;

    let points = app.data_as("alice", &custom_days(&days)).await;
    // Each Berlin day: the mean of its 00:30 and 23:30 readings, none of the next day's 00:30.
    assert_eq!(aqis(points.as_array().expect("points")), [20, 30, 40]);
}

#[airq_test::test]
async fn a_late_reading_into_a_derived_day_is_in_the_next_read() {
    let app = TestApp::spawn().await;
    let device = app.register("alice", json!({"name": "balcony"})).await;
    let days = three_derived_days(&app, &device).await;

    let late = measured(sample_with(110, 10.0, 20.0), berlin(days[1], 12, 0));
    app.upload_ok(&device, &late).await;
    let points = app.data_as("alice", &custom_days(&days)).await;
    // The middle day: (20 + 40 + 110) / 3.
    assert_eq!(
        aqis(points.as_array().expect("points")),
        [20, 57, 40],
        "{points}"
    );
}

#[airq_test::test]
async fn a_deleted_device_leaves_its_owners_days_read_from_the_owner_views() {
    let app = TestApp::spawn().await;
    let kept = app.register("alice", json!({"name": "balcony"})).await;
    let deleted = app.register("alice", json!({"name": "garage"})).await;
    let days = three_derived_days(&app, &kept).await;
    for day in days {
        let noon = measured(sample_with(200, 10.0, 20.0), berlin(day, 12, 0));
        app.upload_ok(&deleted, &noon).await;
    }
    assert_eq!(
        readings_held(&app, "o1d", 9).await,
        9,
        "the owner day view holds both devices' readings"
    );
    let both = app.data_as("alice", &custom_days(&days)).await;
    assert_eq!(aqis(both.as_array().expect("points")), [80, 87, 93]);

    let id = deleted["id"].as_str().expect("an id");
    let answer = app
        .owner_request(Method::DELETE, &format!("/devices/{id}"), "alice")
        .send()
        .await
        .expect("sent");
    assert_eq!(answer.status(), 204);
    let points = app.data_as("alice", &custom_days(&days)).await;
    assert_eq!(
        aqis(points.as_array().expect("points")),
        [20, 30, 40],
        "{points}"
    );
}

#[airq_test::test]
async fn the_snapshots_edge_quarter_hours_from_the_view_hold_exactly_the_hours_readings() {
    let app = TestApp::spawn().await;
    let t0 = at("2026-10-25T12:00:00Z");
    app.clock.set(t0 + TimeDelta::minutes(5));
    let device = app.register("alice", json!({"name": "balcony"})).await;
    for (aqi, when) in [(500, "11:02"), (20, "11:10"), (40, "12:01")] {
        let reading = measured(
            sample_with(aqi, 10.0, 20.0),
            at(&format!("2026-10-25T{when}:00Z")),
        );
        app.upload_ok(&device, &reading).await;
    }
    assert_eq!(
        readings_held(&app, "15m", 3).await,
        3,
        "the quarter-hour view holds the readings"
    );
    // A process of its own has written nothing: every quarter hour the view holds is read from it.
    let peer = app.spawn_peer_on_my_clock(|_| {}).await;
    let paths = [
        format!("/devices/{}/current", device["id"].as_str().expect("an id")),
        "/air-quality/current".to_owned(),
    ];

    // 12:05: the hour from 11:05:01 — the quarter hour of 11:00 less its first 5 minutes.
    for path in &paths {
        let data = peer.data_as("alice", path).await;
        assert_eq!(data["sample_count"].as_u64(), Some(2), "{path}: {data}");
        assert_eq!(data["aqi"].as_i64(), Some(30), "{path}: {data}");
    }
    // 12:12: the hour to 12:12:00.999 — the quarter hour of 12:00 less what follows it.
    app.clock.set(t0 + TimeDelta::minutes(12));
    for path in &paths {
        let data = peer.data_as("alice", path).await;
        assert_eq!(data["sample_count"].as_u64(), Some(1), "{path}: {data}");
        assert_eq!(data["aqi"].as_i64(), Some(40), "{path}: {data}");
    }
}

//! Raw retention on QuestDB: `AIRQ_RAW_RETENTION_DAYS` becomes the readings table's TTL, so
//! QuestDB drops whole daily partitions past it, while the quarter-hour view keeps its rows and
//! timelines still answer for those days. What needs raw readings before the retention is refused
//! by airq's own clock, as on the embedded store (`tests/api/retention.rs`).

use std::time::Duration;

use airq::clock::Clock as _;
use airq::domain::RawRetention;
use chrono::{DateTime, SecondsFormat, TimeDelta, Utc};
use serde_json::{json, Value};

use crate::common::{aqis, fe, field_errors, measured, problem, sample_with, TestApp, TestTable};

/// Days raw readings are kept in these tests.
const DAYS: u32 = 3;

fn id(device: &Value) -> &str {
    device["id"].as_str().expect("id")
}

/// Readings in the test's QuestDB table stored before `before`, as far as QuestDB applied them.
async fn raw_rows_before(app: &TestApp, before: DateTime<Utc>) -> i64 {
    let table = app.table.as_ref().expect("a QuestDB table");
    count_before(table, &table.name, before).await
}

/// Rows of the test table's quarter-hour view before `before`, as far as QuestDB refreshed it.
async fn view_rows_before(app: &TestApp, before: DateTime<Utc>) -> i64 {
    let table = app.table.as_ref().expect("a QuestDB table");
    count_before(table, &format!("{}_15m", table.name), before).await
}

async fn count_before(questdb: &TestTable, table: &str, before: DateTime<Utc>) -> i64 {
    let client = questdb.client().await;
    let sql = format!(
        "SELECT count() FROM {table} WHERE at < '{}'",
        before.to_rfc3339_opts(SecondsFormat::Micros, true)
    );
    client
        .query_one(sql.as_str(), &[])
        .await
        .expect("count")
        .get(0)
}

#[airq_test::test]
async fn a_retention_drops_raw_partitions_and_the_timelines_still_answer_for_their_days() {
    let app = TestApp::spawn().await;
    let device = app
        .register("alice", json!({"name": "balcony", "is_public": true}))
        .await;
    let silent = app.register("alice", json!({"name": "attic"})).await;
    let now = app.clock.now();
    let old = now - TimeDelta::days(10);
    app.upload_ok(&device, &measured(sample_with(40, 10.0, 20.0), old))
        .await;
    app.upload_ok(&silent, &measured(sample_with(30, 10.0, 20.0), old))
        .await;
    app.upload_ok(&device, &measured(sample_with(60, 10.0, 20.0), now))
        .await;
    let cutoff = now - TimeDelta::days(i64::from(DAYS));
    // Both old readings are applied to the table and refreshed into the view before the
    // retention starts (a partition the TTL drops first never reaches the view).
    let mut stored = 0;
    for _ in 0..200 {
        stored = raw_rows_before(&app, cutoff)
            .await
            .min(view_rows_before(&app, cutoff).await);
        if stored == 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(
        stored, 2,
        "the old readings are applied before the retention starts"
    );

    // A process with the retention sets the TTL; QuestDB enforces it at its next commit.
    let kept = app
        .spawn_peer_on_my_clock(|c| c.raw_retention = RawRetention::days(DAYS))
        .await;
    kept.upload_ok(&device, &measured(sample_with(50, 10.0, 20.0), now))
        .await;
    let mut left = raw_rows_before(&app, cutoff).await;
    for _ in 0..200 {
        if left == 0 {
            break;
        }
        kept.upload_ok(&device, &sample_with(50, 10.0, 20.0)).await;
        tokio::time::sleep(Duration::from_millis(50)).await;
        left = raw_rows_before(&app, cutoff).await;
    }
    assert_eq!(left, 0, "QuestDB dropped the partition past the retention");

    let day = old.format("%Y-%m-%d");
    let custom = kept
        .data_as(
            "alice",
            &format!("/air-quality/custom?start_date={day}&end_date={day}"),
        )
        .await;
    assert_eq!(aqis(custom.as_array().expect("points")), [35], "{custom}");
    let monthly = kept
        .data_as(
            "alice",
            &format!("/devices/{}/historical?timeline=monthly", id(&device)),
        )
        .await;
    let monthly = aqis(monthly.as_array().expect("points"));
    assert!(
        monthly.contains(&40),
        "the dropped day still answers: {monthly:?}"
    );
}

#[airq_test::test]
async fn an_export_beginning_before_the_retention_is_422_naming_start_on_questdb_too() {
    let app = TestApp::spawn_with(|c| c.raw_retention = RawRetention::days(DAYS)).await;
    let device = app.register("alice", json!({"name": "balcony"})).await;
    let now = app.clock.now();
    let at = |t: DateTime<Utc>| {
        form_urlencoded::byte_serialize(t.to_rfc3339_opts(SecondsFormat::Millis, true).as_bytes())
            .collect::<String>()
    };
    let export = |start: DateTime<Utc>| {
        format!(
            "/devices/{}/readings?start={}&end={}",
            id(&device),
            at(start),
            at(now)
        )
    };
    let too_early = app
        .get_as("alice", &export(now - TimeDelta::days(i64::from(DAYS) + 1)))
        .await;
    let body = problem(too_early, 422).await;
    assert_eq!(field_errors(&body), vec![fe("start", "minimum", "query")]);
    let kept = app
        .get_as("alice", &export(now - TimeDelta::days(i64::from(DAYS) - 1)))
        .await;
    assert_eq!(kept.status(), 200);
}

#[airq_test::test]
async fn a_partition_dropped_by_hand_invalidates_the_view_and_reads_fall_back_to_raw_readings() {
    let app = TestApp::spawn().await;
    let device = app.register("alice", json!({"name": "balcony"})).await;
    let now = app.clock.now();
    let old = now - TimeDelta::days(10);
    app.upload_ok(&device, &measured(sample_with(40, 10.0, 20.0), old))
        .await;
    app.upload_ok(&device, &measured(sample_with(60, 10.0, 20.0), now))
        .await;
    let day = old.format("%Y-%m-%d");
    let custom = format!("/air-quality/custom?start_date={day}&end_date={day}");
    assert_eq!(
        aqis(
            app.data_as("alice", &custom)
                .await
                .as_array()
                .expect("points")
        ),
        [40]
    );

    // An operator's DROP PARTITION leaves the view's rows behind and marks it invalid: airq reads
    // the raw readings instead, so the dropped day is empty rather than answered from stale rows.
    let table = app.table.as_ref().expect("a QuestDB table");
    let client = table.client().await;
    client
        .simple_query(&format!(
            "ALTER TABLE {} DROP PARTITION LIST '{day}'",
            table.name
        ))
        .await
        .expect("partition dropped");
    let mut answered = Vec::new();
    for _ in 0..100 {
        answered = aqis(
            app.data_as("alice", &custom)
                .await
                .as_array()
                .expect("points"),
        );
        if answered.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(answered.is_empty(), "{answered:?}");
    let today = now.format("%Y-%m-%d");
    let recent = app
        .data_as(
            "alice",
            &format!("/air-quality/custom?start_date={today}&end_date={today}"),
        )
        .await;
    assert_eq!(aqis(recent.as_array().expect("points")), [60], "{recent}");
}

//! Owner-wide reads on QuestDB go by the owner every row carries (schema 003); a table that held
//! readings before rows carried their owner still answers for them, device by device.

use std::time::Duration;

use airq::clock::Clock;
use chrono::{NaiveDateTime, TimeDelta};
use serde_json::json;

use crate::common::{aqis, measured, sample_with, TestApp};

/// Whether the test table has an `owner` column, as far as QuestDB applied its changes.
async fn has_owner(client: &tokio_postgres::Client, table: &str) -> bool {
    client
        .query(
            format!("SELECT \"column\" FROM table_columns('{table}')").as_str(),
            &[],
        )
        .await
        .expect("columns")
        .iter()
        .any(|row| row.get::<_, String>(0) == "owner")
}

#[airq_test::test]
async fn readings_stored_before_rows_carried_their_owner_still_count_owner_wide() {
    let app = TestApp::spawn().await;
    let device = app.register("alice", json!({"name": "balcony"})).await;
    let table = app.table.as_ref().expect("a QuestDB table");
    let name = &table.name;
    let client = table.client().await;
    // The table as an airq from before owners leaves it: no owner column, no record, no views.
    for view in ["o1d", "o1h", "o15m", "1d", "1h", "15m"] {
        client
            .simple_query(&format!("DROP MATERIALIZED VIEW {name}_{view}"))
            .await
            .expect("view dropped");
    }
    client
        .simple_query(&format!("DROP TABLE {name}_since"))
        .await
        .expect("record dropped");
    client
        .simple_query(&format!("ALTER TABLE {name} DROP COLUMN owner"))
        .await
        .expect("column dropped");
    for _ in 0..200 {
        if !has_owner(&client, name).await {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(!has_owner(&client, name).await, "the owner column is gone");
    // A reading such an airq stored two days ago.
    let old = app.clock.now() - TimeDelta::days(2);
    let id = device["id"].as_str().expect("an id");
    client
        .simple_query(&format!(
            "INSERT INTO {name} (device, id, dedup, aqi, pm1_0, pm2_5, pm10_0, temperature, \
             heat_index, humidity, pms_provider, temperature_provider, at) VALUES ('{id}', 1, 1, \
             40, 1.0, 10.0, 12.0, 20.0, 20.0, 50.0, 'PMS5003', 'DHT22', '{}')",
            old.format("%Y-%m-%dT%H:%M:%S%.6fZ")
        ))
        .await
        .expect("an old reading stored");
    let mut stored = 0;
    for _ in 0..200 {
        stored = client
            .query_one(format!("SELECT count() FROM {name}").as_str(), &[])
            .await
            .expect("count")
            .get::<_, i64>(0);
        if stored == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(stored, 1, "the old reading is applied");

    // The upgraded airq starts on that table: it adds the column and records when it came.
    let upgraded = app.spawn_peer_on_my_clock(|_| {}).await;
    upgraded
        .upload_ok(
            &device,
            &measured(sample_with(60, 10.0, 20.0), app.clock.now()),
        )
        .await;

    let day = old.format("%Y-%m-%d");
    let custom = upgraded
        .data_as(
            "alice",
            &format!("/air-quality/custom?start_date={day}&end_date={day}"),
        )
        .await;
    assert_eq!(aqis(custom.as_array().expect("points")), [40], "{custom}");
    let since: NaiveDateTime = client
        .query_one(format!("SELECT max(since) FROM {name}_since").as_str(), &[])
        .await
        .expect("the record")
        .get(0);
    assert!(
        since.and_utc() > old,
        "rows carry their owner from after the old reading: {since}"
    );
    let current = upgraded.data_as("alice", "/air-quality/current").await;
    assert_eq!(current["aqi"].as_i64(), Some(60), "{current}");
}

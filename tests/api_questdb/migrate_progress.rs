//! `airq migrate`'s progress row on the QuestDB pair: a run resumes past what an earlier one
//! recorded, and the count check catches a table emptied behind its back until `--from-start`
//! copies everything again.

use std::path::Path;
use std::time::Duration;

use airq::clock::Clock as _;
use serde_json::json;

use crate::common::process::airq;
use crate::common::{measured, sample, TestApp, TestSchema, TestTable};

fn migrate(
    data_dir: &Path,
    schema: &TestSchema,
    table: &TestTable,
    extra: &[&str],
) -> std::process::Output {
    let mut args = vec![
        "migrate",
        "--data-dir",
        data_dir.to_str().expect("a UTF-8 path"),
        "--postgres-url",
        &schema.url,
        "--questdb-ilp",
        &table.ilp,
        "--questdb-pg",
        &table.pg,
        "--questdb-table",
        &table.name,
    ];
    args.extend_from_slice(extra);
    airq(Path::new("."), &args)
        .output()
        .expect("airq migrate runs")
}

#[airq_test::test]
async fn a_table_emptied_after_a_run_fails_the_check_until_copied_from_the_start() {
    let source = TestApp::spawn_in(tempfile::tempdir().expect("data dir"), |_| {}).await;
    let device = source.register_named("alice", "Balcony").await;
    let now = source.clock.now();
    let readings: Vec<_> = (0..40)
        .map(|minute| measured(sample(), now - chrono::Duration::minutes(minute)))
        .collect();
    let response = source
        .client
        .post(source.url("/data/batch"))
        .header("x-device-id", device["device_id"].as_str().expect("id"))
        .header("x-device-key", device["device_key"].as_str().expect("key"))
        .json(&json!({ "readings": readings }))
        .send()
        .await
        .expect("batch sent");
    assert_eq!(response.status(), 201);
    let data_dir = source.stop_keeping_data().await;
    let schema = TestSchema::create().await;
    let table = TestTable::new();

    let first = migrate(data_dir.path(), &schema, &table, &[]);
    assert!(
        first.status.success(),
        "{}",
        String::from_utf8_lossy(&first.stderr)
    );

    let client = table.client().await;
    client
        .simple_query(&format!("TRUNCATE TABLE {}", table.name))
        .await
        .expect("table emptied");
    tokio::time::sleep(Duration::from_millis(500)).await;

    // The progress row says everything was copied: nothing is, and the check says what is missing.
    let resumed = migrate(data_dir.path(), &schema, &table, &[]);
    assert!(!resumed.status.success());
    let stderr = String::from_utf8_lossy(&resumed.stderr);
    assert!(
        stderr.contains("40 readings in the data directory, 0 in QuestDB")
            && stderr.contains("--from-start"),
        "{stderr}"
    );

    let again = migrate(data_dir.path(), &schema, &table, &["--from-start"]);
    let stdout = String::from_utf8_lossy(&again.stdout);
    assert!(
        again.status.success(),
        "{}",
        String::from_utf8_lossy(&again.stderr)
    );
    assert!(
        stdout.contains("readings: 40 in the data directory, 40 in QuestDB"),
        "{stdout}"
    );
}

//! `airq migrate`, end to end: an embedded server is seeded over HTTP and stopped, the real binary
//! migrates its data directory, and a server on the target answers every read as the embedded
//! one did, and takes uploads with the migrated keys. On the PostgreSQL pair readings stay in the
//! data directory; on the QuestDB pair (`tests/api_questdb`, which runs this file too) they are
//! copied into a QuestDB table of the test's own.

use std::path::Path;
use std::process::Output;

use airq::clock::Clock as _;
use chrono::Duration;
use reqwest::Method;
use serde_json::{json, Value};
use tempfile::TempDir;

use crate::common::process::{address_of, airq, token, Server};
use crate::common::{
    located, measured, sample, sample_with, stored_sqlite_ids, TestApp, TestSchema, TestTable,
};

/// `airq migrate ARGS`, run to its end off the runtime.
async fn migrate(args: Vec<String>) -> Output {
    tokio::task::spawn_blocking(move || {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        airq(Path::new("."), &args)
            .output()
            .expect("airq migrate runs")
    })
    .await
    .expect("the run is joined")
}

/// The arguments of a migration of `data_dir` into the schema (and the table, on the QuestDB pair).
fn arguments(data_dir: &Path, schema: &TestSchema, table: Option<&TestTable>) -> Vec<String> {
    let mut args = vec![
        "migrate".to_owned(),
        "--data-dir".to_owned(),
        data_dir.to_str().expect("a UTF-8 path").to_owned(),
        "--postgres-url".to_owned(),
        schema.url.clone(),
    ];
    if let Some(table) = table {
        args.extend([
            "--questdb-ilp".to_owned(),
            table.ilp.clone(),
            "--questdb-pg".to_owned(),
            table.pg.clone(),
            "--questdb-table".to_owned(),
            table.name.clone(),
        ]);
    }
    args
}

fn succeeded(output: &Output) -> String {
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "airq migrate failed: {stderr}");
    String::from_utf8(output.stdout.clone()).expect("utf-8 stdout")
}

/// What a server answers about the seeded devices, to compare before and after.
async fn answers(app: &TestApp, devices: &[(&str, &Value)]) -> Vec<(String, u16, String)> {
    let now = app.clock.now();
    let range = format!(
        "start={}&end={}",
        form_urlencoded::byte_serialize((now - Duration::days(2)).to_rfc3339().as_bytes())
            .collect::<String>(),
        form_urlencoded::byte_serialize((now + Duration::hours(1)).to_rfc3339().as_bytes())
            .collect::<String>(),
    );
    let mut paths: Vec<(Option<&str>, String)> = vec![
        (Some("alice"), "/devices".to_owned()),
        (Some("bob"), "/devices".to_owned()),
        (Some("alice"), "/air-quality/current".to_owned()),
        (
            Some("alice"),
            "/air-quality/historical?timeline=daily".to_owned(),
        ),
        (None, "/public/map/devices".to_owned()),
    ];
    for (owner, device) in devices {
        let id = device["id"].as_str().expect("id");
        paths.extend([
            (Some(*owner), format!("/devices/{id}")),
            (Some(*owner), format!("/devices/{id}/current")),
            (
                Some(*owner),
                format!("/devices/{id}/historical?timeline=weekly"),
            ),
            (Some(*owner), format!("/devices/{id}/readings?{range}")),
            (None, format!("/public/devices/{id}/current")),
            (None, format!("/public/devices/{id}/readings?{range}")),
        ]);
    }
    let mut answered = Vec::new();
    for (owner, path) in paths {
        let request = match owner {
            Some(owner) => app.owner_request(Method::GET, &path, owner),
            None => app.client.get(app.url(&path)),
        };
        let response = request.send().await.expect("request sent");
        let status = response.status().as_u16();
        let body = response.text().await.expect("body");
        answered.push((format!("{owner:?} {path}"), status, body));
    }
    answered
}

#[airq_test::test]
async fn a_migrated_data_dir_answers_as_before_and_a_second_run_doubles_nothing() {
    // The embedded server, seeded over HTTP.
    let source = TestApp::spawn_in(tempfile::tempdir().expect("data dir"), |_| {}).await;
    let balcony = source
        .register(
            "alice",
            json!({ "name": "Balcony", "is_public": true, "is_location_public": true, "is_outdoor": true }),
        )
        .await;
    let kitchen = source.register_named("alice", "Kitchen").await;
    let garden = source
        .register("bob", json!({ "name": "Garden", "is_public": true }))
        .await;
    let now = source.clock.now();
    let hour_ago = now - Duration::hours(1);
    for (minutes, aqi) in [(50, 30), (40, 40), (30, 50)] {
        let body = located(sample_with(aqi, 10.0, 20.0), 52.52, 13.40);
        source
            .upload_ok(
                &balcony,
                &measured(body, hour_ago + Duration::minutes(minutes)),
            )
            .await;
    }
    // The same `measured_at` again replaces the reading stored under it.
    source
        .upload_ok(
            &balcony,
            &measured(
                sample_with(99, 11.0, 21.0),
                hour_ago + Duration::minutes(30),
            ),
        )
        .await;
    source.upload_ok(&balcony, &sample()).await;
    let batch = json!({ "readings": (0..50).map(|n| measured(sample_with(n, 5.0, 19.0), now - Duration::hours(30) + Duration::minutes(n))).collect::<Vec<_>>() });
    let response = source
        .client
        .post(source.url("/data/batch"))
        .header("x-device-id", kitchen["device_id"].as_str().expect("id"))
        .header("x-device-key", kitchen["device_key"].as_str().expect("key"))
        .json(&batch)
        .send()
        .await
        .expect("batch sent");
    assert_eq!(response.status(), 201);
    source.upload_ok(&garden, &sample()).await;
    // The kitchen's key rotated and its name changed: the migration copies them as they are now.
    let rotated = source
        .owner_request(
            Method::POST,
            &format!(
                "/devices/{}/rotate-key",
                kitchen["id"].as_str().expect("id")
            ),
            "alice",
        )
        .send()
        .await
        .expect("rotation sent");
    assert_eq!(rotated.status(), 200);
    let rotated = rotated.json::<Value>().await.expect("json")["data"].clone();
    let renamed = source
        .send_json_as(
            "alice",
            Method::PATCH,
            &format!("/devices/{}", kitchen["id"].as_str().expect("id")),
            &json!({ "name": "Kitchen (north)" }),
        )
        .await;
    assert_eq!(renamed.status(), 200);
    let seeded = [("alice", &balcony), ("alice", &kitchen), ("bob", &garden)];
    let before = answers(&source, &seeded).await;
    for (request, status, _) in &before {
        // Owners read all of their own; the public reads the public devices only.
        let expected = if request.contains(kitchen["id"].as_str().expect("id"))
            && request.starts_with("None")
        {
            404
        } else {
            200
        };
        assert_eq!(*status, expected, "{request}");
    }
    let stored_before = source.stored_ids().await;
    assert_eq!(
        stored_before.len(),
        3 + 1 + 50 + 1,
        "the replaced reading is gone"
    );
    let data_dir = source.stop_keeping_data().await;

    // The migration, twice: the second finds everything there and writes nothing.
    let schema = TestSchema::create().await;
    let table = crate::backend::PAIR.questdb().then(TestTable::new);
    let args = arguments(data_dir.path(), &schema, table.as_ref());
    let run = migrate(args.clone()).await;
    let first = succeeded(&run);
    // Off a terminal, the progress is a line per step and tenth, on stderr.
    let progress = String::from_utf8_lossy(&run.stderr);
    assert!(progress.contains("devices: done (3 of 3)"), "{progress}");
    assert!(
        first.contains("devices: 3 in the data directory, 3 equal in PostgreSQL with their key hashes (3 written by this run)"),
        "{first}"
    );
    let second = succeeded(&migrate(args).await);
    assert!(
        second.contains("3 equal in PostgreSQL with their key hashes (0 written by this run)"),
        "{second}"
    );
    if table.is_some() {
        assert!(
            first.contains("readings: 55 in the data directory, 55 in QuestDB table"),
            "{first}"
        );
        assert!(second.contains("(0 copied by this run"), "{second}");
    } else {
        assert!(
            first.contains("readings: 55 stay in the data directory"),
            "{first}"
        );
    }
    let (client, connection) = tokio_postgres::connect(&schema.url, tokio_postgres::NoTls)
        .await
        .expect("the test schema");
    tokio::spawn(connection);
    let rows: i64 = client
        .query_one("SELECT count(*) FROM devices", &[])
        .await
        .expect("devices counted")
        .get(0);
    assert_eq!(rows, 3, "the second run doubled no device");

    // A server on the target answers as the embedded one did.
    let target = start_target(data_dir, &schema, table).await;
    target.clock.set(now);
    let after = answers(&target, &seeded).await;
    for (before, after) in before.iter().zip(&after) {
        assert_eq!(before, after, "the same answer after the migration");
    }
    assert_eq!(before.len(), after.len());
    assert_eq!(
        target.stored_ids().await,
        stored_before,
        "every reading, once, with its id"
    );

    // The migrated keys upload; the kitchen's key from before its rotation does not.
    target.upload_ok(&balcony, &sample()).await;
    target.upload_ok(&rotated, &sample()).await;
    assert_eq!(target.upload(&kitchen, &sample()).await.status(), 401);
    // A new upload's receipt id is past every migrated one.
    let receipt = target.upload_ok(&garden, &sample()).await;
    let id = receipt["id"].as_u64().expect("receipt id");
    assert!(id > *stored_before.last().expect("ids"), "{id}");
    target.stop().await;
}

/// A server on the migrated target: devices in the schema; readings in the data directory, or in
/// the table (which the server then owns) with a data directory of its own that keeps the token
/// secret, so owner tokens of the embedded server stay valid.
async fn start_target(data_dir: TempDir, schema: &TestSchema, table: Option<TestTable>) -> TestApp {
    let Some(table) = table else {
        return TestApp::spawn_on(data_dir, Some(schema.url.clone()), None, |_| {}).await;
    };
    let fresh = tempfile::tempdir().expect("data dir");
    std::fs::copy(
        data_dir.path().join(airq::auth::LocalIssuer::FILE),
        fresh.path().join(airq::auth::LocalIssuer::FILE),
    )
    .expect("token secret copied");
    let mut app = TestApp::spawn_on(
        fresh,
        Some(schema.url.clone()),
        Some(table.config()),
        |_| {},
    )
    .await;
    app.table = Some(table);
    app
}

#[airq_test::test]
async fn an_unreachable_postgres_is_named_by_its_setting() {
    let schema = TestSchema::create().await;
    let source = TestApp::spawn_in(tempfile::tempdir().expect("data dir"), |_| {}).await;
    let data_dir = source.stop_keeping_data().await;
    let mut unreachable = arguments(data_dir.path(), &schema, None);
    unreachable[4] = "postgres://postgres@127.0.0.1:9/test".to_owned();
    let output = migrate(unreachable).await;
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("AIRQ_POSTGRES_URL") && stderr.contains("Connection refused"),
        "{stderr}"
    );
    assert!(output.stdout.is_empty());
}

#[airq_test::test]
async fn a_target_that_does_not_hold_the_copy_fails_the_count_check() {
    let source = TestApp::spawn_in(tempfile::tempdir().expect("data dir"), |_| {}).await;
    let device = source.register_named("alice", "Balcony").await;
    let data_dir = source.stop_keeping_data().await;
    // A target whose devices table changes what is written into it (a trigger of the test's).
    let schema = TestSchema::create().await;
    let (client, connection) = tokio_postgres::connect(&schema.url, tokio_postgres::NoTls)
        .await
        .expect("the test schema");
    tokio::spawn(connection);
    client
        .batch_execute(include_str!("../../schema/postgres/001_devices.sql"))
        .await
        .expect("devices table");
    client
        .batch_execute(
            "CREATE FUNCTION mangle() RETURNS trigger LANGUAGE plpgsql AS \
             $$ BEGIN NEW.name := NEW.name || ' (mangled)'; RETURN NEW; END $$; \
             CREATE TRIGGER mangle BEFORE INSERT OR UPDATE ON devices \
             FOR EACH ROW EXECUTE FUNCTION mangle();",
        )
        .await
        .expect("trigger");
    let output = migrate(arguments(data_dir.path(), &schema, None)).await;
    assert!(!output.status.success(), "a failed check exits non-zero");
    let stderr = String::from_utf8_lossy(&output.stderr);
    let id = device["id"].as_str().expect("id");
    assert!(
        stderr.contains("the count check failed")
            && stderr.contains(&format!("device {id} differs in PostgreSQL")),
        "{stderr}"
    );
}

#[airq_test::test]
async fn readings_a_killed_server_left_unfolded_are_migrated() {
    let data_dir = tempfile::tempdir().expect("data dir");
    let cwd = tempfile::tempdir().expect("working dir");
    let path = data_dir.path().to_str().expect("a UTF-8 path");
    let mut command = airq(
        cwd.path(),
        &["serve", "--listen", "127.0.0.1:0", "--data-dir", path],
    );
    // No fold before the kill: every reading is in the ingestion log only.
    command
        .env("AIRQ_FOLD_INTERVAL_MS", "86400000")
        .env("AIRQ_FOLD_BATCH_ROWS", "1000000")
        .env("AIRQ_RATE_DEVICE_PER_MIN", "0");
    let mut server = Server::start(command);
    let address = address_of(&server.wait_for(|line| line.contains("airq listening")));
    let token = token(cwd.path(), path, "alice");
    let client = reqwest::Client::new();
    let device: Value = client
        .post(format!("http://{address}/api/v1/devices"))
        .bearer_auth(&token)
        .json(&json!({ "name": "Balcony" }))
        .send()
        .await
        .expect("registration sent")
        .json()
        .await
        .expect("json");
    let device = device["data"].clone();
    for _ in 0..3 {
        let response = client
            .post(format!("http://{address}/api/v1/data/batch"))
            .header("x-device-id", device["device_id"].as_str().expect("id"))
            .header("x-device-key", device["device_key"].as_str().expect("key"))
            .json(&json!({ "readings": vec![sample(); 200] }))
            .send()
            .await
            .expect("batch sent");
        assert_eq!(response.status(), 201);
    }
    drop(server.finish());
    let acknowledged = stored_sqlite_ids(data_dir.path());
    assert_eq!(acknowledged.len(), 600);
    let folded: i64 = rusqlite::Connection::open(data_dir.path().join("airq.db"))
        .expect("airq.db")
        .query_row("SELECT count(*) FROM readings", [], |row| row.get(0))
        .expect("counted");
    assert_eq!(folded, 0, "the kill left every reading in the log");

    let schema = TestSchema::create().await;
    let table = crate::backend::PAIR.questdb().then(TestTable::new);
    let output = succeeded(&migrate(arguments(data_dir.path(), &schema, table.as_ref())).await);
    assert!(output.contains("readings: 600 "), "{output}");
    let target = start_target(data_dir, &schema, table).await;
    assert_eq!(target.stored_ids().await, acknowledged);
    let registered = target
        .get_as(
            "alice",
            &format!("/devices/{}", device["id"].as_str().expect("id")),
        )
        .await;
    assert_eq!(registered.status(), 200);
    target.stop().await;
}

#[airq_test::test]
async fn reading_ids_move_past_the_copied_ones_and_the_progress_row_is_kept() {
    let schema = TestSchema::create().await;
    let (pool, _) = airq::store::postgres::connect(&schema.url)
        .await
        .expect("the test schema");
    let target = airq::store::postgres::MigrationTarget::new(pool);
    let (client, connection) = tokio_postgres::connect(&schema.url, tokio_postgres::NoTls)
        .await
        .expect("the test schema");
    tokio::spawn(connection);
    let next = || async {
        client
            .query_one("SELECT nextval('reading_ids')", &[])
            .await
            .expect("an id block")
            .get::<_, i64>(0)
    };
    target.reserve_reading_ids(10_000).await.expect("reserved");
    let first = next().await;
    assert!(first > 10_000, "{first}");
    // Never back: a block a writer took stays its own.
    target.reserve_reading_ids(5).await.expect("reserved");
    assert!(next().await > first);

    let source = "/srv/airq-data -> readings at 0123456789abcdef";
    assert_eq!(target.progress(source).await.ok(), Some(0));
    target.record_progress(source, 42).await.expect("recorded");
    target
        .record_progress(source, 4_242)
        .await
        .expect("recorded");
    assert_eq!(target.progress(source).await.ok(), Some(4_242));
    assert_eq!(target.progress("another source").await.ok(), Some(0));
}

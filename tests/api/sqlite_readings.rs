//! What only the embedded reading store can show (SQLite holds the readings in the embedded and
//! PostgreSQL pairs): a real commit failure under a held SQLite write lock, shutdown draining
//! into the file, and deletion removing rows. The QuestDB pair has its own outage test.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use futures_util::future::join_all;

use chrono::{DateTime, TimeDelta, Utc};

use crate::common::{at, measured, problem, sample, sample_with, stored_sqlite_ids, TestApp};
use crate::upload::{
    accepted, app_with_device, delete, device_id, device_key, receipt, sample_count, upload_with,
};

/// A server whose ingestion log starts a new segment file for every append, and retries a
/// failed write briefly.
async fn app_with_a_segment_per_append() -> TestApp {
    TestApp::spawn_with(|c| {
        c.log_segment_bytes = 1;
        c.batch.retries = 2;
        c.batch.retry_backoff = Duration::from_millis(5);
    })
    .await
}

/// Occupies the path of the ingestion log's next segment file with a directory, so that no
/// append can start it (a real fault of the file system, as a full or failing disk would be),
/// until the returned path is removed.
fn block_next_segment(data_dir: &Path) -> std::path::PathBuf {
    let log = data_dir.join("ingest");
    let last = std::fs::read_dir(&log)
        .expect("the log's directory")
        .filter_map(|entry| {
            let name = entry.expect("entry").file_name();
            let name = name.to_str()?;
            name.strip_suffix(".log")?.parse::<u64>().ok()
        })
        .max()
        .expect("a segment");
    let next = log.join(format!("{:020}.log", last + 1));
    std::fs::create_dir(&next).expect("the next segment's path taken");
    next
}

/// Checks an opaque 500: problem shape, request id in header and detail, nothing internal.
async fn opaque_500(response: reqwest::Response) -> String {
    let request_id = response
        .headers()
        .get("x-request-id")
        .expect("x-request-id")
        .to_str()
        .expect("ascii request id")
        .to_owned();
    assert!(!request_id.is_empty());
    let body = problem(response, 500).await;
    assert_eq!(body["type"], "about:blank");
    assert_eq!(body["instance"], "/api/v1/data");
    let detail = body["detail"].as_str().expect("detail");
    assert!(
        detail.contains(&request_id),
        "detail {detail:?} quotes {request_id}"
    );
    let text = body.to_string().to_lowercase();
    for internal in [
        "sql",
        "database",
        "locked",
        "busy",
        "insert",
        "readings",
        "batch",
        "segment",
        "ingest",
        "directory",
    ] {
        assert!(!text.contains(internal), "{internal:?} leaks in {body}");
    }
    assert_eq!(
        body["errors"].as_array().map_or(0, Vec::len),
        0,
        "no field errors"
    );
    request_id
}

#[airq_test::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_append_is_500_and_stores_nothing_of_the_batch() {
    let app = app_with_a_segment_per_append().await;
    let device = app.register_named("alice", "locked out").await;
    let url = app.url("/data");
    // Before the fault: stored, and the device's credentials are cached.
    let (before, _) = accepted(&app, &device, &sample()).await;

    let blocked = block_next_segment(app.data_dir.path());
    let during = join_all((0..6).map(|n| {
        let body = sample_with(n, 1.0, 20.0);
        let client = app.client.clone();
        let url = url.clone();
        let device = device.clone();
        async move { upload_with(&client, &url, &device, &body).await }
    }))
    .await;
    for response in during {
        opaque_500(response).await;
    }
    std::fs::remove_dir(&blocked).expect("the fault cleared");

    let (after, _) = accepted(&app, &device, &sample()).await;
    assert_eq!(
        stored_sqlite_ids(app.data_dir.path()),
        [before, after],
        "exactly the acknowledged readings are stored"
    );
    assert_eq!(sample_count(&app, &device).await, 2);
}

#[airq_test::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_500_quotes_the_request_id_of_its_header() {
    let app = app_with_a_segment_per_append().await;
    let device = app.register_named("alice", "locked out").await;
    let (before, _) = accepted(&app, &device, &sample()).await;
    let blocked = block_next_segment(app.data_dir.path());
    // A generated id.
    let generated = opaque_500(app.upload(&device, &sample()).await).await;
    // The caller's own id, echoed and quoted.
    let response = app
        .client
        .post(app.url("/data"))
        .header("x-device-id", device_id(&device))
        .header("x-device-key", device_key(&device))
        .header("x-request-id", "upload-fault-42")
        .json(&sample())
        .send()
        .await
        .expect("request sent");
    assert_eq!(opaque_500(response).await, "upload-fault-42");
    assert_ne!(generated, "upload-fault-42");
    std::fs::remove_dir(&blocked).expect("the fault cleared");
    assert_eq!(stored_sqlite_ids(app.data_dir.path()), [before]);
}

// ---------------------------------------------------------------------------------------------
// 9. Graceful shutdown

#[airq_test::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_answers_the_uploads_in_flight_and_keeps_them() {
    const UPLOADS: usize = 8;
    // A batch that waits long enough for the shutdown to arrive while its uploads are in it.
    let mut app = TestApp::spawn_with(|c| {
        c.batch.max_delay = Duration::from_millis(1_500);
        c.batch.max_rows = 10_000;
    })
    .await;
    let device = app.register_named("alice", "drain").await;
    // `stop` drops the app and with it its data directory: keep the directory.
    let data_dir = std::mem::replace(&mut app.data_dir, tempfile::tempdir().expect("temp dir"));

    let stopping = Arc::new(AtomicBool::new(false));
    let uploads: Vec<_> = (0..UPLOADS)
        .map(|n| {
            let client = app.client.clone();
            let url = app.url("/data");
            let device = device.clone();
            let stopping = Arc::clone(&stopping);
            tokio::spawn(async move {
                let response =
                    upload_with(&client, &url, &device, &sample_with(n as i64, 1.0, 20.0)).await;
                let answered_after_stop = stopping.load(Ordering::SeqCst);
                (answered_after_stop, receipt(response).await)
            })
        })
        .collect();
    // Holding the fault: let the uploads reach the server and wait in the batch, then shut down.
    tokio::time::sleep(Duration::from_millis(300)).await;
    stopping.store(true, Ordering::SeqCst);
    app.stop().await;

    let mut ids = Vec::new();
    for upload in join_all(uploads).await {
        let (answered_after_stop, (id, _)) = upload.expect("upload task");
        assert!(
            answered_after_stop,
            "the upload was still in flight when the shutdown began"
        );
        ids.push(id);
    }
    ids.sort_unstable();
    assert_eq!(ids.len(), UPLOADS);
    assert_eq!(
        stored_sqlite_ids(data_dir.path()),
        ids,
        "every acknowledged upload is stored after the shutdown"
    );
}

// ---------------------------------------------------------------------------------------------
// Robustness of what is accepted

#[airq_test::test]
async fn deleting_a_device_removes_its_stored_readings() {
    let (app, device) = app_with_device().await;
    let other = app.register_named("alice", "kept").await;
    accepted(&app, &device, &sample()).await;
    accepted(&app, &device, &sample()).await;
    let (kept, _) = accepted(&app, &other, &sample()).await;
    delete(&app, &device).await;
    assert_eq!(
        stored_sqlite_ids(app.data_dir.path()),
        [kept],
        "a deleted device's readings are gone at once"
    );
}

/// A counter of `airq.db` (`folded_id`, `removed`), 0 while missing.
fn stored_counter(data_dir: &Path, name: &str) -> i64 {
    let db = rusqlite::Connection::open(data_dir.join("airq.db")).expect("airq.db");
    db.query_row(
        "SELECT coalesce(max(value), 0) FROM counters WHERE name = ?1",
        [name],
        |row| row.get(0),
    )
    .expect("counter")
}

/// Waits until the fold has moved `name` to at least `value`.
async fn until_counter(app: &TestApp, name: &str, value: i64) {
    for _ in 0..500 {
        if stored_counter(app.data_dir.path(), name) >= value {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("{name} did not reach {value}");
}

/// Uploads a reading of `aqi` measured at `when` and waits until the fold has taken it.
async fn folded_upload(app: &TestApp, device: &serde_json::Value, aqi: i64, when: DateTime<Utc>) {
    let (id, _) = accepted(app, device, &measured(sample_with(aqi, 1.0, 20.0), when)).await;
    until_counter(app, "folded_id", i64::try_from(id).expect("an id")).await;
}

/// Alice's owner-wide sample count and AQI.
async fn owner(app: &TestApp) -> (Option<u64>, Option<i64>) {
    let data = app.data_as("alice", "/air-quality/current").await;
    (data["sample_count"].as_u64(), data["aqi"].as_i64())
}

/// The embedded store keeps an owner's snapshot as per-second sums between requests, brought up
/// to date from the rows folded since (`src/store/sqlite/recent_seconds.rs`). Each answer here
/// must be what a pass over the raw rows gives: after new folded readings, a folded reading
/// replaced, the hour moving past a reading, a device deleted, and the window falling back to
/// the hour before the last contact.
#[airq_test::test]
async fn the_owner_snapshot_follows_folded_readings_replacements_deletions_and_time() {
    let app = TestApp::spawn_with(|c| c.fold.rows = 1).await;
    let t0 = at("2026-10-25T12:00:00Z");
    let minutes = TimeDelta::minutes;
    app.clock.set(t0);
    let first = app.register_named("alice", "First").await;
    let second = app.register_named("alice", "Second").await;
    let third = app.register_named("alice", "Third").await;

    folded_upload(&app, &first, 10, t0 - minutes(10)).await;
    assert_eq!(owner(&app).await, (Some(1), Some(10)));
    folded_upload(&app, &second, 30, t0 - minutes(5)).await;
    assert_eq!(
        owner(&app).await,
        (Some(2), Some(20)),
        "a reading folded since"
    );

    folded_upload(&app, &first, 50, t0 - minutes(10)).await;
    until_counter(&app, "removed", 1).await;
    assert_eq!(
        owner(&app).await,
        (Some(2), Some(40)),
        "a folded reading replaced"
    );

    folded_upload(&app, &third, 70, t0 - minutes(59)).await;
    assert_eq!(owner(&app).await, (Some(3), Some(50)));
    app.clock.set(t0 + TimeDelta::seconds(61));
    assert_eq!(
        owner(&app).await,
        (Some(2), Some(40)),
        "a reading out of the hour"
    );

    delete(&app, &second).await;
    assert_eq!(owner(&app).await, (Some(1), Some(50)), "a device deleted");

    app.clock.set(t0 + TimeDelta::hours(2));
    assert_eq!(
        owner(&app).await,
        (Some(2), Some(60)),
        "the hour up to the last contact"
    );
}

/// Connections this process holds open on `data_dir`'s `airq.db` (Linux: `/proc/self/fd`).
#[cfg(target_os = "linux")]
fn open_database_files(data_dir: &Path) -> usize {
    let database = data_dir.join("airq.db");
    std::fs::read_dir("/proc/self/fd")
        .expect("/proc/self/fd")
        .filter_map(|entry| std::fs::read_link(entry.ok()?.path()).ok())
        .filter(|target| *target == database)
        .count()
}

/// The writer, the checkpointer and the eight readers of `src/store/sqlite/mod.rs`, at most.
#[cfg(target_os = "linux")]
const MOST_DATABASE_CONNECTIONS: usize = 10;

#[cfg(target_os = "linux")]
#[airq_test::test]
async fn a_burst_of_reads_waits_for_the_bounded_readers_instead_of_opening_more() {
    let app = TestApp::spawn().await;
    let names: Vec<String> = (0..48).map(|n| format!("sensor {n}")).collect();
    let devices = join_all(names.iter().map(|name| app.register_named("alice", name))).await;
    let reading = sample();
    join_all(devices.iter().map(|device| app.upload_ok(device, &reading))).await;

    let paths: Vec<String> = devices
        .iter()
        .map(|device| format!("/devices/{}/current", device["id"].as_str().expect("id")))
        .chain(std::iter::repeat_n(
            "/air-quality/current".to_owned(),
            devices.len(),
        ))
        .collect();
    let answers = join_all(paths.iter().map(|path| app.get_as("alice", path))).await;

    assert!(answers.iter().all(|answer| answer.status() == 200));
    let open = open_database_files(app.data_dir.path());
    assert!(
        (1..=MOST_DATABASE_CONNECTIONS).contains(&open),
        "{open} connections on airq.db after 96 reads at once"
    );
}

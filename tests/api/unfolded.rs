//! The embedded store answers 201 after an append and folds behind (`src/store/sqlite/ingest`):
//! reads must be exact whether or not the fold has reached a reading. These tests hold the fold
//! back (a long interval, a high row threshold) so every read goes through the unfolded tail.

use std::path::Path;
use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};
use serde_json::{json, Value};

use crate::batch::{batch_receipts, post_batch};
use crate::common::{assert_close, located, measured, sample, sample_with, TestApp};
use crate::upload::delete;

/// A server whose fold runs only once `rows` readings wait (or at shutdown).
pub(crate) async fn app_folding_every(rows: i64) -> TestApp {
    TestApp::spawn_with(|c| {
        c.fold.interval = Duration::from_secs(3600);
        c.fold.rows = rows;
    })
    .await
}

pub(crate) fn count(data_dir: &Path, sql: &str) -> i64 {
    let db = rusqlite::Connection::open(data_dir.join("airq.db")).expect("airq.db");
    db.query_row(sql, [], |row| row.get(0)).expect("count")
}

fn folded(app: &TestApp) -> i64 {
    count(
        app.data_dir.path(),
        "SELECT count(*) FROM readings_by_device",
    )
}

pub(crate) async fn until_folded(app: &TestApp, rows: i64) {
    for _ in 0..500 {
        if folded(app) >= rows {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("the fold did not reach {rows} rows");
}

async fn public_device(app: &TestApp) -> Value {
    app.register(
        "alice",
        json!({ "name": "Roof", "is_public": true, "is_location_public": true }),
    )
    .await
}

/// Uploads one keyed reading per `(minutes, aqi)`, measured that many minutes before `now`.
async fn upload_keyed(app: &TestApp, device: &Value, now: DateTime<Utc>, readings: &[(i64, i64)]) {
    for &(minutes, aqi) in readings {
        app.upload_ok(
            device,
            &measured(
                sample_with(aqi, 1.0, 20.0),
                now - TimeDelta::minutes(minutes),
            ),
        )
        .await;
    }
}

#[airq_test::test]
async fn every_read_includes_readings_the_fold_has_not_reached() {
    let app = app_folding_every(1_000_000).await;
    let device = public_device(&app).await;
    let id = device["id"].as_str().expect("id").to_owned();
    let now = Utc::now();
    for (minutes, aqi) in [(50, 10), (30, 20), (10, 30)] {
        let body = located(
            measured(
                sample_with(aqi, aqi as f64, 20.0),
                now - TimeDelta::minutes(minutes),
            ),
            52.5,
            13.4,
        );
        app.upload_ok(&device, &body).await;
    }
    assert_eq!(folded(&app), 0, "nothing is folded yet");

    let current = app
        .data_as("alice", &format!("/devices/{id}/current"))
        .await;
    assert_eq!(current["sample_count"], 3);
    assert_eq!(current["aqi"], 20);
    assert_close(&current["location"]["lat"], 52.5, "lat");
    let pooled = app.data_as("alice", "/air-quality/current").await;
    assert_eq!(pooled["sample_count"], 3);

    let daily = app
        .data_as("alice", &format!("/devices/{id}/historical?timeline=daily"))
        .await;
    let samples: f64 = daily
        .as_array()
        .expect("points")
        .iter()
        .map(|point| point["metrics"]["pm2_5"].as_f64().expect("pm2_5"))
        .sum();
    assert!(
        samples > 0.0,
        "the timeline has the unfolded readings: {daily}"
    );

    let map = app.get_public("/public/map/devices").await;
    let map: Value = map.json().await.expect("json");
    assert_eq!(
        map["data"][0]["aqi"], 30,
        "the map shows the latest located sample"
    );
    let public = app
        .get_public(&format!("/public/devices/{id}/current"))
        .await;
    let public: Value = public.json().await.expect("json");
    assert_eq!(public["data"]["sample_count"], 3);
}

#[airq_test::test]
async fn a_reading_that_replaces_a_folded_one_counts_once_before_it_is_folded() {
    let app = app_folding_every(3).await;
    let device = app.register_named("alice", "balcony").await;
    let id = device["id"].as_str().expect("id").to_owned();
    let now = Utc::now();
    let times: Vec<_> = [40, 20, 5].map(|m| now - TimeDelta::minutes(m)).to_vec();
    for at in &times {
        app.upload_ok(&device, &measured(sample_with(10, 1.0, 20.0), *at))
            .await;
    }
    until_folded(&app, 3).await;
    // The same key again, with other values: one row below the fold's threshold.
    app.upload_ok(&device, &measured(sample_with(40, 4.0, 20.0), times[1]))
        .await;
    let current = app
        .data_as("alice", &format!("/devices/{id}/current"))
        .await;
    assert_eq!(current["sample_count"], 3, "replaced, not added: {current}");
    assert_eq!(current["aqi"], 20, "(10 + 40 + 10) / 3");
    assert_close(&current["pm2_5"], 2.0, "pm2_5");
    let custom = app
        .data_as(
            "alice",
            &format!(
                "/air-quality/custom?start_date={}&end_date={}",
                (now - TimeDelta::days(1)).format("%F"),
                (now + TimeDelta::days(1)).format("%F")
            ),
        )
        .await;
    let aqi_sum: i64 = custom
        .as_array()
        .expect("points")
        .iter()
        .map(|point| point["metrics"]["aqi"].as_i64().expect("aqi"))
        .sum();
    assert!(aqi_sum > 0);
    assert_eq!(app.stored_ids().await.len(), 3);
}

#[airq_test::test]
async fn a_location_whose_reading_is_replaced_without_one_is_gone_before_the_fold() {
    let app = app_folding_every(2).await;
    let device = public_device(&app).await;
    let id = device["id"].as_str().expect("id").to_owned();
    let now = Utc::now();
    let (earlier, later) = (now - TimeDelta::minutes(20), now - TimeDelta::minutes(5));
    let located_at = |at, lat| located(measured(sample_with(10, 1.0, 20.0), at), lat, 13.4);
    app.upload_ok(&device, &located_at(earlier, 48.1)).await;
    app.upload_ok(&device, &located_at(later, 52.5)).await;
    until_folded(&app, 2).await;
    // The later key again, without a location: one row below the fold's threshold.
    app.upload_ok(&device, &measured(sample_with(30, 3.0, 20.0), later))
        .await;

    let current = app
        .data_as("alice", &format!("/devices/{id}/current"))
        .await;
    assert_close(&current["location"]["lat"], 48.1, "the earlier location");
    let pooled = app.data_as("alice", "/air-quality/current").await;
    assert_close(&pooled["location"]["lat"], 48.1, "owner-wide too");
    let map: Value = app
        .get_public("/public/map/devices")
        .await
        .json()
        .await
        .expect("json");
    assert_eq!(
        map["data"][0]["aqi"], 10,
        "the map shows the earlier sample: {map}"
    );
    assert_close(&map["data"][0]["lat"], 48.1, "the map's lat");
}

#[airq_test::test]
async fn a_device_whose_only_location_is_replaced_without_one_has_none_before_the_fold() {
    let app = app_folding_every(2).await;
    let device = public_device(&app).await;
    let id = device["id"].as_str().expect("id").to_owned();
    let now = Utc::now();
    let at = now - TimeDelta::minutes(5);
    app.upload_ok(
        &device,
        &measured(sample_with(20, 2.0, 20.0), now - TimeDelta::minutes(30)),
    )
    .await;
    app.upload_ok(
        &device,
        &located(measured(sample_with(10, 1.0, 20.0), at), 52.5, 13.4),
    )
    .await;
    until_folded(&app, 2).await;
    app.upload_ok(&device, &measured(sample_with(30, 3.0, 20.0), at))
        .await;

    let current = app
        .data_as("alice", &format!("/devices/{id}/current"))
        .await;
    assert_eq!(current["location"], Value::Null, "{current}");
    assert_eq!(current["aqi"], 25, "(20 + 30) / 2: {current}");
}

/// The fold's watermark (the highest folded receipt id).
fn folded_through(app: &TestApp) -> i64 {
    count(
        app.data_dir.path(),
        "SELECT value FROM counters WHERE name = 'folded_id'",
    )
}

#[airq_test::test]
async fn readings_that_arrive_while_the_fold_runs_wait_for_its_next_turn() {
    // Eight streams of single uploads, and ten batches that take the backlog past the fold's
    // threshold. The fold that the last batch starts takes in what was appended by then; the
    // singles appended while it runs are fewer than the threshold, so they must wait for the next
    // turn (another 10,000 rows, or the hour), not be folded right behind it — under a steady
    // load that became a trickle of small folds, each dirtying nearly as many pages as a large
    // one.
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    let app = app_folding_every(10_000).await;
    let device = app.register_named("alice", "balcony").await;
    let sent = AtomicUsize::new(0);
    let stop = AtomicBool::new(false);
    // At most 900 singles: with nine batches they stay below the threshold, so it is the tenth
    // batch that starts the fold.
    let streams = futures_util::future::join_all((0..8).map(|_| async {
        while !stop.load(Ordering::Relaxed) && sent.load(Ordering::Relaxed) < 900 {
            app.upload_ok(&device, &sample()).await;
            sent.fetch_add(1, Ordering::Relaxed);
        }
    }));
    let batches = async {
        while sent.load(Ordering::Relaxed) < 20 {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        let mut last_id = 0;
        for _ in 0..10 {
            let batch = json!({ "readings": vec![sample(); 1_000] });
            let receipts = batch_receipts(post_batch(&app, &device, &batch).await).await;
            last_id = receipts
                .iter()
                .map(|(id, _)| *id as i64)
                .max()
                .expect("ids");
        }
        for _ in 0..1_000 {
            if folded_through(&app) >= last_id {
                break;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        stop.store(true, Ordering::Relaxed);
        last_id
    };
    let (_, last_batch_id) = tokio::join!(streams, batches);
    tokio::time::sleep(Duration::from_millis(300)).await;
    // Between the last batch's commit and the fold's start, at most a group commit or two of
    // the eight streams can be appended.
    let beyond = folded_through(&app) - last_batch_id;
    assert!(
        (0..=16).contains(&beyond),
        "the fold went {beyond} receipts past the batch that started it ({} singles sent)",
        sent.load(Ordering::Relaxed)
    );
}

/// Uploads `first` (three keyed readings, `(minutes ago, aqi)`), waits for their fold, then
/// `second` (three more, which a second fold takes in one chunk), and checks that `expected`
/// readings are stored, counted and summed once each.
async fn fold_twice(first: &[(i64, i64)], second: &[(i64, i64)], expected: i64) -> Value {
    let app = app_folding_every(3).await;
    let device = app.register_named("alice", "balcony").await;
    let id = device["id"].as_str().expect("id").to_owned();
    let now = Utc::now();
    upload_keyed(&app, &device, now, first).await;
    until_folded(&app, 3).await;
    upload_keyed(&app, &device, now, second).await;
    counted_once(&app, &id, expected).await
}

/// Waits until `expected` readings are folded, and checks that each is stored and counted once:
/// raw rows, rollups, and the device's current snapshot (returned).
async fn counted_once(app: &TestApp, id: &str, expected: i64) -> Value {
    until_folded(app, expected).await;
    for _ in 0..500 {
        if app.stored_ids().await.len() as i64 == expected {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(app.stored_ids().await.len() as i64, expected, "raw rows");
    assert_eq!(
        count(
            app.data_dir.path(),
            "SELECT coalesce(sum(samples), 0) FROM rollups_15m"
        ),
        expected,
        "the rollups count each reading once"
    );
    let current = app
        .data_as("alice", &format!("/devices/{id}/current"))
        .await;
    assert_eq!(current["sample_count"], expected, "{current}");
    current
}

#[airq_test::test]
async fn a_folded_reading_is_replaced_when_its_replacement_is_folded() {
    // The replacement (20 minutes ago) is older than the device's latest folded reading.
    let current = fold_twice(
        &[(40, 10), (20, 10), (5, 10)],
        &[(20, 40), (3, 10), (2, 10)],
        5,
    )
    .await;
    assert_eq!(current["aqi"], 16, "(10 + 40 + 10 + 10 + 10) / 5");
}

#[airq_test::test]
async fn a_reading_replaced_within_one_fold_is_counted_once() {
    // Both uploads of the key are newer than every folded reading and folded in one chunk.
    let current = fold_twice(
        &[(30, 10), (29, 10), (28, 10)],
        &[(10, 10), (10, 70), (5, 10)],
        5,
    )
    .await;
    assert_eq!(current["aqi"], 22, "(10 + 10 + 10 + 70 + 10) / 5");
}

#[airq_test::test]
async fn a_new_devices_reading_replaced_within_its_first_fold_is_counted_once() {
    // Nothing of the device is folded yet (no `device_latest` row): the fold skips the lookups
    // of folded keys, and must still replace the key within the chunk.
    let app = app_folding_every(3).await;
    let device = app.register_named("alice", "balcony").await;
    let id = device["id"].as_str().expect("id").to_owned();
    upload_keyed(&app, &device, Utc::now(), &[(10, 10), (10, 70), (5, 10)]).await;
    let current = counted_once(&app, &id, 2).await;
    assert_eq!(current["aqi"], 40, "(70 + 10) / 2");
}

/// Three keyed readings of one device, stopped (so folded); then `crash` leaves the data dir as
/// a crash would have (given it and `airq.db`); a restart must count every reading once.
async fn restart_after(crash: impl FnOnce(&Path, &rusqlite::Connection)) {
    let mut app = app_folding_every(1_000_000).await;
    let device = app.register_named("alice", "balcony").await;
    let id = device["id"].as_str().expect("id").to_owned();
    let now = Utc::now();
    upload_keyed(&app, &device, now, &[(30, 20), (20, 20), (10, 20)]).await;
    let data_dir = std::mem::replace(&mut app.data_dir, tempfile::tempdir().expect("temp dir"));
    app.stop().await;
    let db = rusqlite::Connection::open(data_dir.path().join("airq.db")).expect("airq.db");
    crash(data_dir.path(), &db);
    drop(db);

    let app = TestApp::spawn_in(data_dir, |_| {}).await;
    let current = app
        .data_as("alice", &format!("/devices/{id}/current"))
        .await;
    assert_eq!(current["sample_count"], 3);
    until_folded(&app, 3).await;
    assert_eq!(
        count(
            app.data_dir.path(),
            "SELECT coalesce(sum(samples), 0) FROM rollups_15m"
        ),
        3,
        "the restarted fold derived the rollups once"
    );
    let current = app
        .data_as("alice", &format!("/devices/{id}/current"))
        .await;
    assert_eq!(current["sample_count"], 3);
    assert_eq!(app.stored_ids().await.len(), 3);
}

/// Nothing derived, and the watermark back at the start.
const UNFOLD: &str = "DELETE FROM readings_by_device; DELETE FROM rollups_15m; \
                      DELETE FROM rollups_1d; DELETE FROM rollups_hour_of_day; \
                      DELETE FROM device_latest; \
                      UPDATE main.counters SET value = 0 WHERE name = 'folded_id';";

#[airq_test::test]
async fn a_restart_folds_what_a_crash_left_in_the_ingestion_log() {
    // The log still holds the three readings (its last segment is never dropped): undo their
    // fold, as if the crash came before it.
    restart_after(|_, db| {
        db.execute_batch(&format!("DELETE FROM readings; {UNFOLD}"))
            .expect("unfolded");
    })
    .await;
}

#[airq_test::test]
async fn rows_folded_but_not_yet_pruned_from_the_log_count_once() {
    // As a stop leaves them: folded, and still in the log's last segment.
    restart_after(|_, _| {}).await;
}

/// Uploads once for a kept and twice for a doomed device, deletes the doomed one (whose readings
/// hold the highest receipt ids), restarts, and uploads again: the new id must be past them all.
async fn ids_after_deleting_the_newest_readings(fold_rows: i64) {
    let app = app_folding_every(fold_rows).await;
    let kept = app.register_named("alice", "kept").await;
    let doomed = app.register_named("alice", "doomed").await;
    app.upload_ok(&kept, &sample()).await;
    let mut highest = 0;
    for _ in 0..2 {
        highest = app.upload_ok(&doomed, &sample()).await["id"]
            .as_u64()
            .expect("receipt id");
    }
    if fold_rows == 1 {
        until_folded(&app, 3).await;
    }
    delete(&app, &doomed).await;

    let mut app = app;
    let data_dir = std::mem::replace(&mut app.data_dir, tempfile::tempdir().expect("temp dir"));
    app.stop().await;
    let mut app = TestApp::spawn_in(data_dir, |_| {}).await;
    let next = app.upload_ok(&kept, &sample()).await["id"]
        .as_u64()
        .expect("receipt id");
    assert!(
        next > highest,
        "receipt id {next} after a restart reuses one up to {highest}"
    );
    // Everything folded at the stop: the deleted device's readings did not come back with the
    // restart, wherever they were when it was deleted.
    let data_dir = std::mem::replace(&mut app.data_dir, tempfile::tempdir().expect("temp dir"));
    app.stop().await;
    assert_eq!(
        crate::common::stored_sqlite_ids(data_dir.path()).len(),
        2,
        "the kept device's two readings"
    );
}

#[airq_test::test]
async fn receipt_ids_are_not_reused_after_the_newest_folded_readings_are_deleted() {
    ids_after_deleting_the_newest_readings(1).await;
}

#[airq_test::test]
async fn receipt_ids_are_not_reused_after_the_newest_unfolded_readings_are_deleted() {
    ids_after_deleting_the_newest_readings(1_000_000).await;
}

#[airq_test::test]
async fn the_export_merges_unfolded_readings_and_their_replacements_once_each() {
    let app = app_folding_every(4).await;
    let device = app.register_named("alice", "balcony").await;
    let id = device["id"].as_str().expect("id").to_owned();
    let now = Utc::now();
    let times: Vec<_> = [50, 40, 30, 20, 10]
        .map(|m| now - TimeDelta::minutes(m))
        .to_vec();
    for at in [times[0], times[1], times[2], times[4]] {
        app.upload_ok(&device, &measured(sample_with(10, 1.0, 20.0), at))
            .await;
    }
    until_folded(&app, 4).await;
    // Below the fold's threshold: a replacement of a folded reading, a new reading, and a
    // replacement of that new (unfolded) one.
    app.upload_ok(&device, &measured(sample_with(20, 2.0, 20.0), times[1]))
        .await;
    app.upload_ok(&device, &measured(sample_with(30, 3.0, 20.0), times[3]))
        .await;
    app.upload_ok(&device, &measured(sample_with(40, 4.0, 20.0), times[3]))
        .await;
    assert_eq!(folded(&app), 4, "the last three are not folded");

    let query = format!(
        "start={}&end={}",
        form_urlencoded::byte_serialize((now - TimeDelta::hours(1)).to_rfc3339().as_bytes())
            .collect::<String>(),
        form_urlencoded::byte_serialize(now.to_rfc3339().as_bytes()).collect::<String>()
    );
    let response = app
        .get_as("alice", &format!("/devices/{id}/readings?{query}"))
        .await;
    assert_eq!(response.status(), 200);
    let body: Value = response.json().await.expect("json");
    let rows = body["data"].as_array().expect("rows");
    let seen: Vec<(String, i64)> = rows
        .iter()
        .map(|row| {
            (
                row["measured_at"].as_str().expect("time").to_owned(),
                row["aqi"].as_i64().expect("aqi"),
            )
        })
        .collect();
    let ms = |at: chrono::DateTime<Utc>| at.to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
    assert_eq!(
        seen,
        [
            (ms(times[0]), 10),
            (ms(times[1]), 20),
            (ms(times[2]), 10),
            (ms(times[3]), 40),
            (ms(times[4]), 10),
        ]
    );
}

#[airq_test::test]
async fn an_export_of_many_pages_interleaves_folded_and_unfolded_readings() {
    let app = app_folding_every(6_000).await;
    let device = app.register_named("alice", "balcony").await;
    let id = device["id"].as_str().expect("id").to_owned();
    let now = Utc::now();
    let first = now - TimeDelta::days(20);
    let batch = |minutes: Vec<i64>, aqi: i64| {
        json!({
            "readings": minutes
                .into_iter()
                .map(|minute| measured(sample_with(aqi, 1.0, 20.0), first + TimeDelta::minutes(minute)))
                .collect::<Vec<_>>()
        })
    };
    let post = |body: Value| {
        app.client
            .post(app.url("/data/batch"))
            .header("x-device-id", device["device_id"].as_str().expect("id"))
            .header("x-device-key", device["device_key"].as_str().expect("key"))
            .json(&body)
            .send()
    };
    // 6,000 readings on even minutes, folded (more than a page of folded rows)…
    for chunk in (0..6_000)
        .map(|n| n * 2)
        .collect::<Vec<i64>>()
        .chunks(1_000)
    {
        let response = post(batch(chunk.to_vec(), 10)).await.expect("sent");
        assert_eq!(response.status(), 201);
    }
    until_folded(&app, 6_000).await;
    // …then, unfolded, 998 on odd minutes around the first page's end and a replacement of the
    // reading right at that end (minute 9,998, the 5,000th folded one).
    let odd: Vec<i64> = (9_000..10_996).filter(|minute| minute % 2 == 1).collect();
    let response = post(batch(odd.clone(), 20)).await.expect("sent");
    assert_eq!(response.status(), 201);
    let response = post(batch(vec![9_998], 30)).await.expect("sent");
    assert_eq!(response.status(), 201);
    assert_eq!(folded(&app), 6_000, "the rest is unfolded");

    let rows = exported(&app, &id, first, now).await;
    let mut expected: Vec<(i64, i64)> = (0..6_000).map(|n| (n * 2, 10)).collect();
    expected.extend(odd.iter().map(|minute| (*minute, 20)));
    expected.sort_unstable();
    for entry in &mut expected {
        if entry.0 == 9_998 {
            entry.1 = 30;
        }
    }
    let ms = |at: chrono::DateTime<Utc>| at.to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
    assert_eq!(rows.len(), expected.len());
    for (row, (minute, aqi)) in rows.iter().zip(&expected) {
        assert_eq!(
            (row["measured_at"].as_str(), row["aqi"].as_i64()),
            (
                Some(ms(first + TimeDelta::minutes(*minute)).as_str()),
                Some(*aqi)
            ),
            "minute {minute}"
        );
    }
}

#[airq_test::test]
async fn an_export_of_more_unfolded_readings_than_a_page_holds_comes_whole_in_order() {
    let app = app_folding_every(1_000_000).await;
    let device = app.register_named("alice", "balcony").await;
    let id = device["id"].as_str().expect("id").to_owned();
    let first = Utc::now() - TimeDelta::days(2);
    // 12,000 unfolded readings, more than two export pages (5,000 rows each), out of order.
    for chunk in (0..12_000).rev().collect::<Vec<i64>>().chunks(1_000) {
        let readings: Vec<Value> = chunk
            .iter()
            .map(|&second| {
                measured(
                    sample_with(second % 500, 1.0, 20.0),
                    first + TimeDelta::seconds(second),
                )
            })
            .collect();
        let response = post_batch(&app, &device, &json!({ "readings": readings })).await;
        assert_eq!(response.status(), 201);
    }
    assert_eq!(folded(&app), 0, "nothing is folded");
    let aqis: Vec<i64> = exported(&app, &id, first, Utc::now())
        .await
        .iter()
        .map(|row| row["aqi"].as_i64().expect("aqi"))
        .collect();
    assert_eq!(
        aqis,
        (0..12_000).map(|second| second % 500).collect::<Vec<_>>()
    );
}

/// alice's NDJSON export of device `id` from `start` to `end`, row by row.
async fn exported(app: &TestApp, id: &str, start: DateTime<Utc>, end: DateTime<Utc>) -> Vec<Value> {
    let query = format!(
        "start={}&end={}",
        form_urlencoded::byte_serialize(start.to_rfc3339().as_bytes()).collect::<String>(),
        form_urlencoded::byte_serialize(end.to_rfc3339().as_bytes()).collect::<String>()
    );
    let response = app
        .owner_request(
            reqwest::Method::GET,
            &format!("/devices/{id}/readings?{query}"),
            "alice",
        )
        .header("accept", "application/x-ndjson")
        .send()
        .await
        .expect("sent");
    assert_eq!(response.status(), 200);
    let text = response.text().await.expect("text");
    text.lines()
        .map(|line| serde_json::from_str(line).expect("json"))
        .collect()
}

/// A custom range's points: each label with every metric (name, value).
pub(crate) type Points = Vec<(String, Vec<(String, f64)>)>;

/// Every point of a custom range: its label and every metric.
pub(crate) async fn metrics_by_label(app: &TestApp, query: &str) -> Points {
    let points = app
        .data_as("alice", &format!("/air-quality/custom?{query}"))
        .await;
    points
        .as_array()
        .expect("points")
        .iter()
        .map(|point| {
            let metrics = point["metrics"].as_object().expect("metrics");
            (
                point["label"].as_str().expect("label").to_owned(),
                metrics
                    .iter()
                    .map(|(name, value)| (name.clone(), value.as_f64().unwrap_or(f64::NAN)))
                    .collect(),
            )
        })
        .collect()
}

/// The pm2.5 mean of each point of a custom range, by label.
pub(crate) async fn pm2_5_by_label(app: &TestApp, query: &str) -> Vec<(String, f64)> {
    metrics_by_label(app, query)
        .await
        .into_iter()
        .map(|(label, metrics)| {
            let (_, pm2_5) = metrics
                .into_iter()
                .find(|(name, _)| name == "pm2_5")
                .expect("pm2_5");
            (label, pm2_5)
        })
        .collect()
}

/// Uploads one keyed reading of `device` measured at each of `times` (RFC 3339), the one at
/// index `i` with pm2.5 `1.1 + 2.37 × i` (see [`mean_of`]).
pub(crate) async fn upload_at(app: &TestApp, device: &Value, times: &[&str]) {
    for (index, at) in times.iter().enumerate() {
        let pm2_5 = 1.1 + 2.37 * index as f64;
        app.upload_ok(
            device,
            &measured(sample_with(10, pm2_5, 20.0), crate::common::at(at)),
        )
        .await;
    }
}

/// Uploads one keyed reading at each of `times` (pm2.5 `1.1 + 2.37 × index`) with the fold held
/// back, reads `queries` from the tail, lets the fold run and reads them again: every bucket's
/// mean must be the same. Answers the folded reads.
async fn rollups_read_like_the_tail(times: &[&str], queries: &[&str]) -> Vec<Vec<(String, f64)>> {
    // One more reading, of another owner, sets the fold off once the tail has been read.
    let rows = times.len() as i64 + 1;
    let app = app_folding_every(rows).await;
    app.clock.set(crate::common::at("2026-11-25T12:00:00Z"));
    let device = app.register_named("alice", "balcony").await;
    upload_at(&app, &device, times).await;
    let mut before = Vec::new();
    for query in queries {
        before.push(pm2_5_by_label(&app, query).await);
    }
    assert_eq!(folded(&app), 0, "the first reads went through the tail");
    let other = app.register_named("bob", "elsewhere").await;
    app.upload_ok(&other, &sample_with(10, 1.0, 20.0)).await;
    until_folded(&app, rows).await;
    assert_eq!(
        count(app.data_dir.path(), HOURS_HELD),
        times.len() as i64,
        "every reading lies in a past day, whose hours the fold derived"
    );
    let mut folded_reads = Vec::new();
    for (query, before) in queries.iter().zip(before) {
        let after = pm2_5_by_label(&app, query).await;
        assert_eq!(
            after.len(),
            before.len(),
            "{query}: {after:?} vs {before:?}"
        );
        for ((label, folded), (label_before, tail)) in after.iter().zip(&before) {
            assert_eq!(label, label_before, "{query}");
            assert!(
                (folded - tail).abs() < 1e-9,
                "{query} {label}: {folded} vs {tail}"
            );
        }
        folded_reads.push(after);
    }
    folded_reads
}

/// The samples the hour-of-day rollup holds.
pub(crate) const HOURS_HELD: &str = "SELECT coalesce(sum(samples), 0) FROM rollups_hour_of_day";

/// The mean pm2.5 of the readings with these indexes in [`rollups_read_like_the_tail`].
pub(crate) fn mean_of(indexes: &[i32]) -> f64 {
    indexes
        .iter()
        .map(|&i| 1.1 + 2.37 * f64::from(i))
        .sum::<f64>()
        / indexes.len() as f64
}

pub(crate) fn bucket<'a>(read: &'a [(String, f64)], label: &str) -> &'a (String, f64) {
    read.iter()
        .find(|(found, _)| found == label)
        .unwrap_or_else(|| panic!("no bucket {label} in {read:?}"))
}

#[airq_test::test]
async fn buckets_off_utc_midnight_read_the_same_from_the_rollups_as_from_the_tail() {
    // Folded, a Berlin or Kolkata day is a UTC day with the time between each edge and the
    // nearest midnight added or taken away: the means must not change when the fold runs.
    let times = [
        "2026-11-19T22:45:00Z", // Berlin 20th 23:45, Kolkata 20th 04:15
        "2026-11-19T23:10:00Z", // Berlin 20th 00:10
        "2026-11-20T00:05:00Z",
        "2026-11-20T12:00:00Z",
        "2026-11-20T18:40:00Z", // Kolkata 21st 00:10
        "2026-11-20T22:50:00Z", // Berlin 20th 23:50
        "2026-11-20T23:20:00Z", // Berlin 21st 00:20
        "2026-11-21T23:59:00Z",
    ];
    let queries = [
        "start_date=2026-11-19&end_date=2026-11-22&tz=Europe/Berlin",
        "start_date=2026-11-19&end_date=2026-11-22&tz=Asia/Kolkata",
        "start_date=2026-11-19&end_date=2026-11-22",
        "start_date=2026-11-01&end_date=2026-11-30&interval=month&tz=Europe/Berlin",
        "start_date=2026-11-20&end_date=2026-11-21&interval=hour&tz=Europe/Berlin",
    ];
    let reads = rollups_read_like_the_tail(&times, &queries).await;
    // Berlin's 20th: 00:10, 01:05, 13:00, 19:40 and 23:50 local.
    let day = bucket(&reads[0], "2026-11-20");
    assert!((day.1 - mean_of(&[1, 2, 3, 4, 5])).abs() < 1e-9, "{day:?}");
    // Kolkata's 21st: 00:10, 04:20 and 04:50 local.
    let day = bucket(&reads[1], "2026-11-21");
    assert!((day.1 - mean_of(&[4, 5, 6])).abs() < 1e-9, "{day:?}");
}

#[airq_test::test]
async fn late_readings_and_replacements_reach_the_hours_of_days_already_past() {
    let app = app_folding_every(1).await;
    app.clock.set(crate::common::at("2026-11-25T12:00:00Z"));
    let device = app.register_named("alice", "balcony").await;
    // Today's reading first: the days before it have passed and their hours are derived.
    app.upload_ok(&device, &sample_with(10, 1.0, 20.0)).await;
    until_folded(&app, 1).await;
    let times = [
        "2026-11-19T22:45:00Z", // Berlin 19th 23:45
        "2026-11-19T23:10:00Z", // Berlin 20th 00:10
        "2026-11-20T12:00:00Z",
        "2026-11-20T22:50:00Z", // Berlin 20th 23:50
        "2026-11-20T23:20:00Z", // Berlin 21st 00:20
    ];
    // The 20th 23:50 is sent twice; the second one replaces the first.
    let sent: Vec<&str> = times.iter().chain(&times[3..4]).copied().collect();
    upload_at(&app, &device, &sent).await;
    until_folded(&app, times.len() as i64 + 1).await;
    assert_eq!(count(app.data_dir.path(), HOURS_HELD), times.len() as i64);
    let berlin = pm2_5_by_label(
        &app,
        "start_date=2026-11-19&end_date=2026-11-21&tz=Europe/Berlin",
    )
    .await;
    let day = bucket(&berlin, "2026-11-20");
    assert!((day.1 - mean_of(&[1, 2, 5])).abs() < 1e-9, "{day:?}");
    let day = bucket(&berlin, "2026-11-21");
    assert!((day.1 - mean_of(&[4])).abs() < 1e-9, "{day:?}");
}

#[airq_test::test]
async fn summer_days_in_berlin_read_the_same_from_the_rollups_as_from_the_tail() {
    // In summer a Berlin day starts at 22:00 UTC: two whole hours at each edge.
    let times = [
        "2026-07-09T21:59:00Z", // Berlin 9th 23:59
        "2026-07-09T22:00:00Z", // Berlin 10th 00:00
        "2026-07-09T23:30:00Z", // Berlin 10th 01:30
        "2026-07-10T11:00:00Z",
        "2026-07-10T21:15:00Z", // Berlin 10th 23:15
        "2026-07-10T22:45:00Z", // Berlin 11th 00:45
        "2026-07-11T23:05:00Z", // Berlin 12th 01:05
    ];
    let queries = [
        "start_date=2026-07-09&end_date=2026-07-12&tz=Europe/Berlin",
        "start_date=2026-07-01&end_date=2026-07-31&interval=month&tz=Europe/Berlin",
        "start_date=2026-07-09&end_date=2026-07-11&tz=America/Sao_Paulo",
    ];
    let reads = rollups_read_like_the_tail(&times, &queries).await;
    let day = bucket(&reads[0], "2026-07-10");
    assert!((day.1 - mean_of(&[1, 2, 3, 4])).abs() < 1e-9, "{day:?}");
    let day = bucket(&reads[0], "2026-07-11");
    assert!((day.1 - mean_of(&[5])).abs() < 1e-9, "{day:?}");
}

/// Makes `dir` immutable (`chattr +i`: not even root may add a file) until dropped.
struct Immutable(std::path::PathBuf);

impl Immutable {
    fn set(dir: &Path) -> Option<Self> {
        let done = std::process::Command::new("chattr")
            .arg("+i")
            .arg(dir)
            .status()
            .is_ok_and(|status| status.success());
        done.then(|| Self(dir.to_owned()))
    }
}

impl Drop for Immutable {
    fn drop(&mut self) {
        let _ = std::process::Command::new("chattr")
            .arg("-i")
            .arg(&self.0)
            .status();
    }
}

#[airq_test::test]
async fn readiness_says_not_ready_while_uploads_cannot_be_stored() {
    // Every batch goes to a segment file of its own, which cannot be created below.
    let app = TestApp::spawn_with(|c| c.log_segment_bytes = 1).await;
    let device = app.register_named("alice", "balcony").await;
    app.upload_ok(&device, &sample()).await;
    let ingest = app.data_dir.path().join("ingest");
    let Some(immutable) = Immutable::set(&ingest) else {
        println!("skipped: chattr +i is not available here");
        return;
    };

    let failed = app.upload(&device, &sample()).await;
    assert_eq!(failed.status(), 500);
    let ready = app.client.get(format!("{}/readyz", app.base)).send().await;
    let ready = ready.expect("readyz answers");
    assert_eq!(ready.status(), 503);

    drop(immutable);
    app.upload_ok(&device, &sample()).await;
    let ready = app.client.get(format!("{}/readyz", app.base)).send().await;
    assert_eq!(ready.expect("readyz answers").status(), 200);
    assert_eq!(
        app.stored_ids().await.len(),
        2,
        "the failed upload left nothing"
    );
}

#[airq_test::test]
async fn a_server_stopped_cleanly_starts_again_where_no_file_can_be_created() {
    let app = TestApp::spawn().await;
    let device = app.register_named("alice", "balcony").await;
    app.upload_ok(&device, &sample()).await;
    // As on a full disk: nothing new may appear in the data directory (ingest/ may still grow).
    let mut immutable = None;
    let app = app
        .restart(|c| immutable = Immutable::set(&c.data_dir))
        .await;
    if immutable.is_none() {
        println!("skipped: chattr +i is not available here");
        return;
    }
    assert_eq!(app.stored_ids().await.len(), 1);
    app.upload_ok(&device, &sample()).await;
    let devices = app.get_as("alice", "/devices").await;
    assert_eq!(devices.status(), 200);
    drop(immutable);
    assert_eq!(app.stored_ids().await.len(), 2);
}

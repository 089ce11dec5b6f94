//! A database written by an earlier version of the embedded store is brought up to date at start
//! (`schema/sqlite/`, `src/store/sqlite/mod.rs`) and reads exactly what it read before.

use crate::common::{sample_with, TestApp};
use crate::unfolded::{
    app_folding_every, bucket, count, mean_of, metrics_by_label, pm2_5_by_label, until_folded,
    upload_at, Points, HOURS_HELD,
};

/// The measured values in the order the rollups pack their sums (the spec's response order).
const PACKED_ORDER: [&str; 7] = [
    "aqi",
    "heat_index",
    "humidity",
    "pm1_0",
    "pm2_5",
    "pm10_0",
    "temperature",
];

const ROLLUPS: [&str; 3] = ["rollups_15m", "rollups_1d", "rollups_hour_of_day"];

/// Rewrites the rollups of the database in `data_dir` as they were stored before their sums were
/// packed into one BLOB per row (`006_packed_rollup_sums.sql`): a column per value, with the same
/// rows, and `user_version` 5.
fn sums_back_in_columns(data_dir: &std::path::Path) {
    let db = rusqlite::Connection::open(data_dir.join("airq.db")).expect("airq.db");
    let columns = PACKED_ORDER.map(|name| format!("{name}_sum")).join(", ");
    let definitions = PACKED_ORDER
        .map(|name| match name {
            "aqi" => format!("{name}_sum INTEGER NOT NULL"),
            _ => format!("{name}_sum REAL NOT NULL"),
        })
        .join(", ");
    for table in ROLLUPS {
        type Row = (Vec<u8>, i64, i64, Vec<u8>);
        let rows: Vec<Row> = db
            .prepare(&format!("SELECT device, slot, samples, sums FROM {table}"))
            .expect("packed rollup")
            .query_map([], |row| {
                Ok((row.get(0)?, row.get(1)?, row.get(2)?, row.get(3)?))
            })
            .expect("rows")
            .collect::<Result<_, _>>()
            .expect("rows");
        db.execute_batch(&format!(
            "DROP TABLE {table}; CREATE TABLE {table} (device BLOB NOT NULL, \
             slot INTEGER NOT NULL, samples INTEGER NOT NULL, {definitions}, \
             PRIMARY KEY (device, slot)) STRICT, WITHOUT ROWID;"
        ))
        .expect("the table with a column per value");
        for (device, slot, samples, sums) in rows {
            let mut values: Vec<rusqlite::types::Value> =
                vec![device.into(), slot.into(), samples.into()];
            for (name, bytes) in PACKED_ORDER.iter().zip(sums.chunks_exact(8)) {
                let sum = f64::from_le_bytes(bytes.try_into().expect("8 bytes"));
                values.push(match *name {
                    "aqi" => (sum as i64).into(),
                    _ => sum.into(),
                });
            }
            db.execute(
                &format!(
                    "INSERT INTO {table} (device, slot, samples, {columns}) \
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)"
                ),
                rusqlite::params_from_iter(values),
            )
            .expect("the row in columns");
        }
    }
    db.pragma_update(None, "user_version", 5)
        .expect("user_version");
}

/// The servers' clock: every reading below lies in a day already past.
const NOW: &str = "2026-11-25T12:00:00Z";

/// Readings at both edges of Berlin days (23:00 UTC), in days already past on 2026-11-25.
const EDGES: [&str; 4] = [
    "2026-11-19T22:45:00Z",
    "2026-11-19T23:10:00Z",
    "2026-11-20T22:50:00Z",
    "2026-11-20T23:20:00Z",
];

/// Berlin days over the readings at [`EDGES`] (days, hours and quarter hours of the rollups).
const BERLIN_DAYS: &str = "start_date=2026-11-19&end_date=2026-11-22&tz=Europe/Berlin";
/// Quarter hours of the rollups only.
const UTC_HOURS: &str = "start_date=2026-11-20&end_date=2026-11-20&interval=hour&tz=UTC";

/// What a stopped server left: its data dir, the device (with its key), and what it read.
struct Stopped {
    data_dir: tempfile::TempDir,
    device: serde_json::Value,
    /// The reads of [`BERLIN_DAYS`] and [`UTC_HOURS`] before it stopped.
    reads: Vec<Points>,
}

/// A server with the readings at [`EDGES`] (and one of today) folded, stopped.
async fn folded_edges() -> Stopped {
    let mut app = app_folding_every(1).await;
    app.clock.set(crate::common::at(NOW));
    let device = app.register_named("alice", "balcony").await;
    // Today's reading: the days before it have passed, so their hours are derived.
    app.upload_ok(&device, &sample_with(10, 1.0, 20.0)).await;
    upload_at(&app, &device, &EDGES).await;
    until_folded(&app, EDGES.len() as i64 + 1).await;
    let mut reads = Vec::new();
    for query in [BERLIN_DAYS, UTC_HOURS] {
        reads.push(metrics_by_label(&app, query).await);
    }
    let data_dir = std::mem::replace(&mut app.data_dir, tempfile::tempdir().expect("temp dir"));
    app.stop().await;
    Stopped {
        data_dir,
        device,
        reads,
    }
}

/// Asserts that `app` reads every metric of every point in `before`.
async fn reads_as_before(app: &TestApp, before: &[Points]) {
    for (query, before) in [BERLIN_DAYS, UTC_HOURS].into_iter().zip(before) {
        let after = metrics_by_label(app, query).await;
        assert_eq!(
            after.len(),
            before.len(),
            "{query}: {after:?} vs {before:?}"
        );
        for ((label, now), (label_before, then)) in after.iter().zip(before) {
            assert_eq!(label, label_before, "{query}");
            assert_eq!(now.len(), then.len(), "{query} {label}");
            for ((name, now), (_, then)) in now.iter().zip(then) {
                assert!(
                    (now - then).abs() < 1e-9,
                    "{query} {label} {name}: {now} vs {then}"
                );
            }
        }
    }
}

#[tokio::test]
async fn rollup_sums_kept_in_columns_are_packed_at_start_and_read_the_same() {
    let stopped = folded_edges().await;
    sums_back_in_columns(stopped.data_dir.path());

    let app = TestApp::spawn_in(stopped.data_dir, |_| {}).await;
    app.clock.set(crate::common::at(NOW));
    for table in ROLLUPS {
        assert_eq!(
            count(
                app.data_dir.path(),
                &format!("SELECT count(*) FROM pragma_table_info('{table}') WHERE name = 'sums'"),
            ),
            1,
            "{table} packs its sums"
        );
    }
    reads_as_before(&app, &stopped.reads).await;
    // A late reading folds into the packed rows of a day already derived.
    upload_at(&app, &stopped.device, &["2026-11-20T12:00:00Z"]).await;
    until_folded(&app, EDGES.len() as i64 + 2).await;
    let day = pm2_5_by_label(&app, BERLIN_DAYS).await;
    let expected = (mean_of(&[1, 2]) * 2.0 + mean_of(&[0])) / 3.0;
    let (label, mean) = bucket(&day, "2026-11-20");
    assert!(
        (mean - expected).abs() < 1e-9,
        "{label}: {mean} vs {expected}"
    );
}

#[tokio::test]
async fn a_database_from_before_the_hour_of_day_rollups_derives_them_at_start() {
    let Stopped {
        data_dir, reads, ..
    } = folded_edges().await;
    sums_back_in_columns(data_dir.path());
    let db = rusqlite::Connection::open(data_dir.path().join("airq.db")).expect("airq.db");
    db.execute_batch(
        "DROP TABLE rollups_hour_of_day; \
         DELETE FROM counters WHERE name = 'hour_of_day_through'; PRAGMA user_version = 4;",
    )
    .expect("the schema before the hour-of-day rollups");
    drop(db);

    let app = TestApp::spawn_in(data_dir, |_| {}).await;
    app.clock.set(crate::common::at(NOW));
    assert_eq!(
        count(app.data_dir.path(), HOURS_HELD),
        EDGES.len() as i64,
        "derived from the quarter hours"
    );
    reads_as_before(&app, &reads).await;
    let day = bucket(&pm2_5_by_label(&app, BERLIN_DAYS).await, "2026-11-20").1;
    assert!((day - mean_of(&[1, 2])).abs() < 1e-9, "{day}");
}

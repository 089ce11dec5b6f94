//! The fold: derives everything device-keyed from the appended rows, behind the uploads.
//!
//! A thread of its own folds the appended rows past the watermark (taken from memory, the log's
//! unconsumed rows, which hold each committed row until it is folded) once [`FoldConfig::rows`]
//! of them wait or [`FoldConfig::interval`] has passed, in transactions of at most [`CHUNK`]
//! rows on the writer connection of `airq.db`, then reports them consumed, which forgets them
//! and prunes the log ([`Ingestion::consumed`](crate::store::ingest_log::Ingestion::consumed));
//! appends go to the log meanwhile and never wait for a chunk. Folding many rows at once is
//! what makes it cheap: a device's samples in one chunk share their rollup and `device_latest`
//! rows, and every page a chunk dirties is written to the WAL once per chunk, not once per
//! reading (measured with 10,000 devices: chunks of 16,384 rows fold for about a quarter of the
//! CPU per reading that chunks of 2,048 did; folding every 2 s instead of every 0.5 s took
//! single uploads from 20.8 k to 28.0 k a second). Reads do not pay for the larger backlog: they
//! take unconsumed rows from memory ([`UnconsumedView`](super::UnconsumedView)). Each
//! transaction moves the watermark together with what it derived, so a crash never folds a row
//! twice or loses one.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{Arc, LazyLock};
use std::thread::JoinHandle;
use std::time::Duration;

use rusqlite::{params, Connection, OptionalExtension};

use super::{count_removed, folded_id, LoggedRow, SqliteIngestion, FOLDED_ID};
use crate::domain::Measure;
use crate::store::sqlite::dictionary::Numbering;
use crate::store::sqlite::located::located_before;
use crate::store::sqlite::packed_reading::read_body;
use crate::store::sqlite::rollup::{self, Deltas};
use crate::store::sqlite::{from_micros, Sqlite};
use crate::store::StoreError;

/// Most rows folded in one transaction (the writer connection is held that long). A commit
/// writes every page the chunk dirtied, and with many devices most pages of the device-keyed
/// tables are dirtied by any chunk: 65,536 rows folded for 6 µs of CPU per single upload against
/// 9 µs in chunks of 16,384 (`bench/RESULTS.md`, thirteenth session). The chunk shares its rows
/// with the unconsumed rows (a pointer per row), so its size costs no second copy of them.
const CHUNK: i64 = 65_536;

/// When the fold runs.
#[derive(Debug, Clone, Copy)]
pub struct FoldConfig {
    /// Fold at the latest this long after the previous fold.
    pub interval: Duration,
    /// Fold as soon as this many rows wait.
    pub rows: i64,
}
/// Pause after a failed fold before trying again.
const RETRY: Duration = Duration::from_millis(200);

/// What the fold thread and its owner share.
#[derive(Debug)]
struct Progress {
    folded: AtomicI64,
    /// The highest receipt id the running (or last) fold takes in: rows up to it need no notice.
    taken: AtomicI64,
    /// The highest receipt id appended, synced and added to memory, as the sink last reported it.
    appended: AtomicI64,
    stop: AtomicBool,
}

/// The fold thread; stops after folding everything when dropped.
#[derive(Debug)]
pub(super) struct Folder {
    progress: Arc<Progress>,
    thread: Option<JoinHandle<()>>,
}

impl Folder {
    /// Starts folding `db` from its stored watermark (rows a crash left unconsumed included), with
    /// rows appended up to receipt id `appended`.
    pub(super) fn start(
        db: Arc<Sqlite>,
        config: FoldConfig,
        appended: i64,
    ) -> Result<Self, StoreError> {
        let folded = super::stored_folded_id(&db)?;
        let progress = Arc::new(Progress {
            folded: AtomicI64::new(folded),
            taken: AtomicI64::new(folded),
            appended: AtomicI64::new(appended),
            stop: AtomicBool::new(false),
        });
        let shared = Arc::clone(&progress);
        let thread = std::thread::Builder::new()
            .name("airq-fold".into())
            .spawn(move || run(&db, &shared, config))
            .map_err(StoreError::Thread)?;
        Ok(Self {
            progress,
            thread: Some(thread),
        })
    }

    /// The highest folded receipt id.
    pub(super) fn folded(&self) -> i64 {
        self.progress.folded.load(Ordering::Acquire)
    }

    /// What tells the fold, from any thread, of rows appended, waking it once `rows` wait.
    pub(super) fn notices(&self, rows: i64) -> FoldNotices {
        FoldNotices {
            progress: Arc::clone(&self.progress),
            thread: self.thread.as_ref().map(|thread| thread.thread().clone()),
            rows,
        }
    }

    /// Reads the rows waiting for the fold (ids of failed batches count too: an upper bound),
    /// from any thread, for as long as the reader is kept.
    pub(super) fn backlog_rows(&self) -> impl Fn() -> i64 + Send + Sync + 'static {
        let progress = Arc::clone(&self.progress);
        move || {
            let folded = progress.folded.load(Ordering::Acquire);
            (progress.appended.load(Ordering::Acquire) - folded).max(0)
        }
    }

    /// Asks the fold to look for new rows now.
    pub(super) fn wake(&self) {
        if let Some(thread) = &self.thread {
            thread.thread().unpark();
        }
    }
}

/// Tells the fold of appended rows ([`Folder::notices`]).
#[derive(Debug)]
pub(super) struct FoldNotices {
    progress: Arc<Progress>,
    thread: Option<std::thread::Thread>,
    rows: i64,
}

impl FoldNotices {
    /// Records that rows up to receipt id `id` are durable and in memory, and wakes the fold if
    /// enough of them wait beyond what it has taken in (not beyond what it has finished: rows
    /// appended while a large chunk folds would otherwise wake it again at once for a few).
    pub(super) fn appended(&self, id: i64) {
        self.progress.appended.fetch_max(id, Ordering::AcqRel);
        if id - self.progress.taken.load(Ordering::Acquire) >= self.rows {
            if let Some(thread) = &self.thread {
                thread.unpark();
            }
        }
    }
}

impl Drop for Folder {
    fn drop(&mut self) {
        self.progress.stop.store(true, Ordering::Release);
        if let Some(thread) = self.thread.take() {
            thread.thread().unpark();
            if thread.join().is_err() {
                tracing::error!("the fold thread panicked");
            }
        }
    }
}

fn run(db: &Sqlite, progress: &Progress, config: FoldConfig) {
    loop {
        let stopping = progress.stop.load(Ordering::Acquire);
        let appended = progress.appended.load(Ordering::Acquire);
        progress.taken.store(appended, Ordering::Release);
        match db.write_blocking(|connection| fold_chunk(connection, db.ingestion(), appended)) {
            Ok(Some(Folded { through, devices })) => {
                // Left in the log, folded rows are only skipped: the next prune takes them.
                if let Err(error) = db.ingestion().consumed(through, &devices) {
                    tracing::warn!(error = %crate::telemetry::chain(&error), "pruning the ingestion log failed");
                }
                progress.folded.store(through, Ordering::Release);
                // Caught up: what arrived meanwhile waits for the interval or for `rows` of it,
                // so under a steady load the fold still takes large chunks, not a trickle of
                // small ones each dirtying nearly as many pages as a large one.
                if through >= appended && !stopping {
                    std::thread::park_timeout(config.interval);
                }
                continue;
            }
            Ok(None) if stopping => break,
            // Woken early by the sink once `rows` wait, or by the stop.
            Ok(None) => std::thread::park_timeout(config.interval),
            Err(error) if stopping => {
                tracing::error!(error = %crate::telemetry::chain(&error), "final fold failed; the next start folds the rest");
                break;
            }
            Err(error) => {
                tracing::warn!(error = %crate::telemetry::chain(&error), "fold failed; retrying");
                std::thread::sleep(RETRY);
            }
        }
    }
    tracing::debug!("fold stopped");
}

/// A reading that a keyed row takes the place of.
struct Replaced {
    id: i64,
    values: crate::domain::Measurements,
    located: bool,
}

/// What one fold transaction committed.
struct Folded {
    /// The new watermark.
    through: i64,
    /// The devices whose rows it folded.
    devices: Vec<[u8; 16]>,
}

/// Folds the rows past the watermark, their ids spanning at most [`CHUNK`] and none past
/// `appended`, in one transaction, or answers `None` when there was nothing to fold. The rows
/// come from the unconsumed ones, which hold every committed row up to `appended` (the writer
/// lock, held here and by a device's deletion, keeps a deleted device's rows out).
fn fold_chunk(
    connection: &mut Connection,
    ingestion: &SqliteIngestion,
    appended: i64,
) -> Result<Option<Folded>, StoreError> {
    let transaction = connection.transaction()?;
    let watermark = folded_id(&transaction)?;
    let rows = ingestion.chunk(watermark, appended, CHUNK);
    let Some(last) = rows.iter().map(|row| row.id).max() else {
        return Ok(None);
    };
    // The raw rows as they are, in id order (appended to `readings`' B-tree); replaced ones are
    // deleted below like folded ones.
    let mut rows = rows;
    rows.sort_unstable_by_key(|row| row.id);
    let mut numbering = Numbering::default();
    let mut insert = transaction.prepare_cached(
        "INSERT INTO main.readings (id, device, at, keyed, body) VALUES (?1, ?2, ?3, ?4, ?5)",
    )?;
    let mut body = Vec::with_capacity(64);
    for row in &rows {
        body.clear();
        row.body(&transaction, &mut numbering)?
            .pack_into(row.at, &mut body);
        insert.execute(params![
            row.id,
            numbering.device(&transaction, row.device)?,
            row.at,
            row.keyed,
            body.as_slice()
        ])?;
    }
    drop(insert);
    // In key order, consecutive index writes land on the same or neighbouring pages. Rows of one
    // key keep their id order, so a later keyed row still replaces an earlier one.
    rows.sort_unstable_by_key(|row| (row.device, row.at, row.id));
    let mut find_key = transaction.prepare_cached(
        "SELECT b.id, r.body FROM readings_by_device b JOIN readings r ON r.id = b.id \
         WHERE b.device = ?1 AND b.at = ?2 AND b.dedup = 0",
    )?;
    let mut index = transaction.prepare_cached(
        "INSERT INTO readings_by_device (device, at, dedup, id) VALUES (?1, ?2, ?3, ?4) \
         ON CONFLICT (device, at, dedup) DO UPDATE SET id = excluded.id",
    )?;
    let mut delete = transaction.prepare_cached("DELETE FROM readings WHERE id = ?1")?;
    let mut folded_latest =
        transaction.prepare_cached("SELECT last_seen FROM device_latest WHERE device = ?1")?;
    let hours_through = rollup::hours_through(&transaction)?;
    let mut deltas = Deltas::new(hours_through);
    let mut last_seen: HashMap<[u8; 16], i64> = HashMap::new();
    let mut located: HashMap<[u8; 16], &LoggedRow> = HashMap::new();
    let mut relocate: HashSet<[u8; 16]> = HashSet::new();
    // The device whose folded readings the loop last asked about, and the latest time among them
    // (`device_latest.last_seen` only grows): a keyed row past it can only replace a keyed row of
    // this chunk, the last one before it in key order. Most keyed rows are past it (a sensor's
    // clock moves forward), and they skip the key lookup; so do all rows of a device without a
    // `device_latest` row, which has no folded readings (the fold writes that row with the
    // device's first, and only the device's deletion takes it away, with all its readings).
    let mut asked: Option<([u8; 16], i64)> = None;
    let mut last_key: Option<([u8; 16], i64)> = None;
    let mut removed = 0;
    for row in &rows {
        let at = from_micros(row.at)?;
        let replaces_in_chunk = row.keyed && last_key == Some((row.device, row.at));
        if row.keyed {
            last_key = Some((row.device, row.at));
        }
        let may_replace = row.keyed
            && (replaces_in_chunk
                || row.at <= latest_folded(&mut folded_latest, &mut asked, row.device)?);
        let number = numbering.device(&transaction, row.device)?;
        if may_replace {
            let replaced = find_key
                .query_row(params![number, row.at], |found| {
                    let body = read_body(found, 1, row.at)?;
                    Ok(Replaced {
                        id: found.get(0)?,
                        values: body.values,
                        located: body.location.is_some(),
                    })
                })
                .optional()?;
            if let Some(replaced) = replaced {
                deltas.record(row.device, at, &replaced.values, -1);
                delete.execute([replaced.id])?;
                // A row of this chunk was never folded before, so no read kept it.
                if replaced.id <= watermark {
                    removed += 1;
                }
                if replaced.located && row.location.is_none() {
                    relocate.insert(row.device);
                }
            }
        }
        let dedup = if row.keyed { 0 } else { row.id };
        index.execute(params![number, row.at, dedup, row.id])?;
        deltas.record(row.device, at, &row.values, 1);
        let seen = last_seen.entry(row.device).or_insert(row.at);
        *seen = (*seen).max(row.at);
        if row.location.is_some() {
            let latest = located.entry(row.device).or_insert(row);
            if row.at >= latest.at {
                *latest = row;
            }
        }
    }
    drop((find_key, index, delete, folded_latest));
    if removed > 0 {
        count_removed(&transaction, removed)?;
    }
    deltas.apply(&transaction)?;
    advance_latest(&transaction, &last_seen, &located)?;
    for device in relocate {
        relocate_latest(&transaction, device)?;
    }
    // After `device_latest` names this chunk's new devices too.
    if let Some(&newest) = last_seen.values().max() {
        rollup::derive_passed_days(&transaction, hours_through, newest)?;
    }
    transaction
        .prepare_cached("INSERT INTO counters (name, value) VALUES (?1, ?2) ON CONFLICT (name) DO UPDATE SET value = excluded.value")?
        .execute(params![FOLDED_ID, last])?;
    transaction.commit()?;
    Ok(Some(Folded {
        through: last,
        devices: last_seen.into_keys().collect(),
    }))
}

/// The latest time among `device`'s folded readings (`i64::MIN` when it has none, i.e. no
/// `device_latest` row), asked once while the loop stays on one device.
fn latest_folded(
    statement: &mut rusqlite::CachedStatement<'_>,
    asked: &mut Option<([u8; 16], i64)>,
    device: [u8; 16],
) -> Result<i64, StoreError> {
    if let Some((known, latest)) = *asked {
        if known == device {
            return Ok(latest);
        }
    }
    let latest = statement
        .query_row([device.as_slice()], |found| found.get(0))
        .optional()?
        .unwrap_or(i64::MIN);
    *asked = Some((device, latest));
    Ok(latest)
}

/// The columns of `device_latest` describing the latest located sample.
const LOCATED: [&str; 7] = [
    "located_at",
    "lat",
    "lon",
    "provider",
    "aqi",
    "pm2_5",
    "temperature",
];

/// Moves each device's last contact and latest located sample forward, one statement per device.
fn advance_latest(
    connection: &Connection,
    last_seen: &HashMap<[u8; 16], i64>,
    located: &HashMap<[u8; 16], &LoggedRow>,
) -> Result<(), StoreError> {
    static UPSERT: LazyLock<String> = LazyLock::new(|| {
        let newer = "excluded.located_at IS NOT NULL \
                     AND (located_at IS NULL OR excluded.located_at >= located_at)";
        format!(
            "INSERT INTO device_latest (device, last_seen, {columns}) VALUES (?1, ?2, {values}) \
             ON CONFLICT (device) DO UPDATE SET last_seen = max(last_seen, excluded.last_seen), {set}",
            columns = LOCATED.join(", "),
            values = crate::store::columns::placeholders(3, LOCATED.len()),
            set = LOCATED
                .iter()
                .map(|column| {
                    format!("{column} = CASE WHEN {newer} THEN excluded.{column} ELSE {column} END")
                })
                .collect::<Vec<_>>()
                .join(", "),
        )
    });
    let mut upsert = connection.prepare_cached(&UPSERT)?;
    let mut devices: Vec<(&[u8; 16], &i64)> = last_seen.iter().collect();
    devices.sort_unstable();
    for (device, seen) in devices {
        let location = located
            .get(device)
            .and_then(|row| row.location.as_ref().map(|location| (row, location)));
        let (at, lat, lon, provider, aqi, pm2_5, temperature) = match location {
            Some((row, (lat, lon, provider))) => (
                Some(row.at),
                Some(*lat),
                Some(*lon),
                Some(provider.as_str()),
                Some(row.values.aqi()),
                Some(row.values[Measure::Pm2_5]),
                Some(row.values[Measure::Temperature]),
            ),
            None => (None, None, None, None, None, None, None),
        };
        upsert.execute(params![
            device.as_slice(),
            seen,
            at,
            lat,
            lon,
            provider,
            aqi,
            pm2_5,
            temperature
        ])?;
    }
    Ok(())
}

/// Recomputes a device's latest located sample after a replacement took a location away.
fn relocate_latest(connection: &Connection, device: [u8; 16]) -> Result<(), StoreError> {
    let latest = located_before(connection, device, i64::MAX)?;
    let mut update = connection.prepare_cached(
        "UPDATE device_latest SET located_at = ?2, lat = ?3, lon = ?4, provider = ?5, aqi = ?6, \
         pm2_5 = ?7, temperature = ?8 WHERE device = ?1",
    )?;
    match latest {
        Some((at, lat, lon, provider, aqi, pm2_5, temperature)) => update.execute(params![
            device.as_slice(),
            at,
            lat,
            lon,
            provider,
            aqi,
            pm2_5,
            temperature
        ])?,
        None => update.execute(params![
            device.as_slice(),
            None::<i64>,
            None::<f64>,
            None::<f64>,
            None::<String>,
            None::<i64>,
            None::<f64>,
            None::<f64>
        ])?,
    };
    Ok(())
}

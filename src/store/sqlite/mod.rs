//! The embedded store: one SQLite file in the data directory, `airq.db`, holds devices and
//! readings; the ingestion log (`ingest/`, [`ingest_log`](crate::store::ingest_log)) takes
//! uploads in before the fold ([`ingest`]) moves them into it, and holds them in memory as the
//! log's unconsumed rows until it has.
//!
//! `airq.db` runs in WAL mode with `synchronous = FULL`, so a committed transaction survives a
//! crash or a power loss; the log's appends are synced behind them by a thread of their own, and
//! the batch writer acknowledges an upload only after that sync. `airq.db` has one writer
//! connection (SQLite allows one writer at a time anyway, and a single connection means our own
//! writers never meet `SQLITE_BUSY`) and a pool of readers, which WAL lets run beside it. The
//! readers are bounded: a read waits for a free one rather than opening another, so a burst of
//! reads (the first upload of every device of a fleet after a start looks up its key) neither
//! piles up blocking threads nor opens, warms and drops a connection per read beyond the pool.
//! Checkpoints (copying the WAL back into the database) mostly run on a thread of their own, so
//! the commit that crosses SQLite's auto-checkpoint threshold finds little left to copy. That
//! writer-side checkpoint stays on: only a checkpoint that completes between two write
//! transactions lets the WAL restart from its beginning, which a background checkpoint racing a
//! continuous stream of commits never does.
//! rusqlite is synchronous, so async callers run their closures on tokio's blocking pool.

mod alert_store;
mod device_store;
mod dictionary;
mod export_pages;
mod folded_rows;
mod ingest;
mod located;
mod packed_reading;
mod packed_sums;
mod pooled;
mod raw_pruner;
mod reading_store;
mod recent_seconds;
mod rollup;
mod set_latest;
mod source;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::sync::Semaphore;

use rusqlite::config::DbConfig;
use rusqlite::Connection;

use super::ingest_log::{Ingestion, Watermark};
use super::StoreError;

pub use alert_store::SqliteAlerts;
pub use device_store::SqliteDevices;
pub use ingest::{FoldConfig, SqliteReadingSink};
pub use raw_pruner::SqliteRawPruner;
pub use reading_store::SqliteReadings;
pub use source::{ReadingCounts, SqliteSource};

/// The schema, in order. `PRAGMA user_version` counts the scripts a database has had; each
/// start applies the ones after it, each in a transaction with its count. A database that had
/// more than this server knows was written by a newer airq, and is refused.
const SCHEMA: &[&str] = &[
    include_str!("../../../schema/sqlite/001_schema.sql"),
    include_str!("../../../schema/sqlite/002_alerts.sql"),
    include_str!("../../../schema/sqlite/003_compact_readings.sql"),
    include_str!("../../../schema/sqlite/004_pooled_rollups.sql"),
];

/// Reader connections, at most: reads beyond them wait for one to be free. Eight reads at once
/// keep two cores busy; each reader holds up to [`READER_CACHE_KIB`] of pages, and unbounded,
/// 10,000 devices' first uploads after a start opened dozens of them at once, each on a blocking
/// thread of its own (bench/RESULTS.md, thirtieth session).
const READERS: usize = 8;
/// How often the checkpointer copies the WAL back into the database.
const CHECKPOINT_EVERY: Duration = Duration::from_millis(100);
/// WAL pages after which the writer checkpoints itself: high, so the background thread has
/// usually copied nearly everything by then and the writer's share is the small remainder.
const WRITER_CHECKPOINT_PAGES: i64 = 10_000;
/// Page cache of each reader connection, KiB: a year of day buckets in a zone off UTC midnight
/// reads about 2 MiB of rollup pages for 20 devices, SQLite's default cache size, so with the
/// default every such read went back to the file for part of them. Twice that: 8 MiB each made
/// the eight readers a quarter of the server's memory under a fleet's uploads, for no read
/// measurably faster (bench/RESULTS.md, thirtieth session).
const READER_CACHE_KIB: i64 = 4 * 1024;
/// Page cache of the writer connection, KiB (its upserts touch pages all over the indexes). 32
/// MiB measured no faster for batches (10,000 devices: 359,000–368,000 readings/s either way) and
/// held 20–45 MiB more of the server's memory under a fleet's uploads (bench/RESULTS.md,
/// thirtieth session); the pages it drops are in the OS's cache.
const WRITER_CACHE_KIB: i64 = 16 * 1024;

/// The embedded database: a writer connection and a pool of reader connections.
#[derive(Debug)]
pub struct Sqlite {
    path: PathBuf,
    busy_timeout: Duration,
    writer: Mutex<Connection>,
    readers: Mutex<Vec<Connection>>,
    /// One permit per reader connection that may exist.
    reader_permits: Arc<Semaphore>,
    ingestion: Arc<ingest::SqliteIngestion>,
    _checkpointer: Checkpointer,
}

impl Sqlite {
    /// The database file's name inside the data directory.
    pub const FILE: &'static str = "airq.db";

    /// Opens (creating when missing) the database in `data_dir` and applies the schema; its
    /// ingestion log starts a new segment file every `segment_bytes`.
    pub fn open(
        data_dir: &Path,
        busy_timeout: Duration,
        segment_bytes: u64,
    ) -> Result<Arc<Self>, StoreError> {
        std::fs::create_dir_all(data_dir).map_err(|source| StoreError::DataDir {
            path: data_dir.to_owned(),
            source,
        })?;
        let path = data_dir.join(Self::FILE);
        let mut writer = connect(&path, busy_timeout)?;
        migrate(&mut writer, SCHEMA)?;
        writer.pragma_update(None, "cache_size", -WRITER_CACHE_KIB)?;
        writer.pragma_update(None, "wal_autocheckpoint", WRITER_CHECKPOINT_PAGES)?;
        let folded = ingest::folded_id(&writer)?;
        let (ingestion, _) = Ingestion::open(data_dir, segment_bytes, Watermark::Own(folded))?;
        rollup::derive_hours_at_start(&mut writer)?;
        let checkpointer = Checkpointer::start(connect(&path, busy_timeout)?)?;
        Ok(Arc::new(Self {
            path,
            busy_timeout,
            writer: Mutex::new(writer),
            readers: Mutex::new(Vec::new()),
            reader_permits: Arc::new(Semaphore::new(READERS)),
            ingestion,
            _checkpointer: checkpointer,
        }))
    }

    /// The ingestion log and its unconsumed rows: what the sink appends to, the fold consumes and
    /// the reads overlay on the folded tables.
    fn ingestion(&self) -> &Arc<ingest::SqliteIngestion> {
        &self.ingestion
    }

    /// Runs `work` on a reader connection, on the blocking pool.
    pub async fn read<T, F>(self: &Arc<Self>, work: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> Result<T, StoreError> + Send + 'static,
    {
        let this = Arc::clone(self);
        let permit = Arc::clone(&self.reader_permits).acquire_owned().await?;
        tokio::task::spawn_blocking(move || {
            let reused = lock(&this.readers).pop();
            let connection = match reused {
                Some(connection) => connection,
                None => {
                    let connection = connect(&this.path, this.busy_timeout)?;
                    connection.pragma_update(None, "cache_size", -READER_CACHE_KIB)?;
                    connection
                }
            };
            let result = work(&connection);
            // Back to the pool before the permit goes: the next read finds it there.
            lock(&this.readers).push(connection);
            drop(permit);
            result
        })
        .await?
    }

    /// Runs `work` in one read transaction (one consistent snapshot of the whole database) on a
    /// reader connection, on the blocking pool.
    pub async fn read_snapshot<T, F>(self: &Arc<Self>, work: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> Result<T, StoreError> + Send + 'static,
    {
        self.read(|connection| {
            let transaction = rusqlite::Transaction::new_unchecked(
                connection,
                rusqlite::TransactionBehavior::Deferred,
            )?;
            let result = work(&transaction)?;
            transaction.commit()?;
            Ok(result)
        })
        .await
    }

    /// Runs `work` on the writer connection, on the blocking pool.
    pub async fn write<T, F>(self: &Arc<Self>, work: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnOnce(&mut Connection) -> Result<T, StoreError> + Send + 'static,
    {
        let this = Arc::clone(self);
        tokio::task::spawn_blocking(move || this.write_blocking(work)).await?
    }

    /// Runs `work` on the writer connection in the calling thread (for the batch writer's thread).
    pub fn write_blocking<T>(
        &self,
        work: impl FnOnce(&mut Connection) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        work(&mut lock(&self.writer))
    }
}

/// The checkpointing thread; stops (after a last checkpoint) when dropped.
#[derive(Debug)]
struct Checkpointer {
    stop: Option<std::sync::mpsc::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Checkpointer {
    fn start(connection: Connection) -> Result<Self, StoreError> {
        let (stop, stopped) = std::sync::mpsc::channel::<()>();
        let thread = std::thread::Builder::new()
            .name("airq-checkpointer".into())
            .spawn(move || loop {
                let last = !matches!(
                    stopped.recv_timeout(CHECKPOINT_EVERY),
                    Err(std::sync::mpsc::RecvTimeoutError::Timeout)
                );
                // PASSIVE never blocks the writer; what it cannot copy now waits for the next round.
                let started = std::time::Instant::now();
                let outcome = connection.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |row| {
                    Ok((row.get::<_, i64>(1)?, row.get::<_, i64>(2)?))
                });
                match outcome {
                    Ok((wal_pages, copied)) => tracing::debug!(
                        wal_pages,
                        copied,
                        elapsed_ms = started.elapsed().as_millis() as u64,
                        "WAL checkpoint"
                    ),
                    Err(error) => tracing::warn!(%error, "WAL checkpoint failed"),
                }
                if last {
                    break;
                }
            })
            .map_err(StoreError::Thread)?;
        Ok(Self {
            stop: Some(stop),
            thread: Some(thread),
        })
    }
}

impl Drop for Checkpointer {
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Applies the scripts of `schema` the database has not had yet (see [`SCHEMA`]); refuses a
/// database that had more.
fn migrate(connection: &mut Connection, schema: &[&str]) -> Result<(), StoreError> {
    let applied: i64 = connection.pragma_query_value(None, "user_version", |row| row.get(0))?;
    let known = i64::try_from(schema.len()).unwrap_or(i64::MAX);
    if applied > known {
        return Err(StoreError::NewerSchema { applied, known });
    }
    for (index, script) in schema.iter().enumerate() {
        let version = i64::try_from(index + 1).unwrap_or(i64::MAX);
        if version <= applied {
            continue;
        }
        let transaction = connection.transaction()?;
        transaction.execute_batch(script)?;
        transaction.pragma_update(None, "user_version", version)?;
        transaction.commit()?;
    }
    Ok(())
}

fn connect(path: &Path, busy_timeout: Duration) -> Result<Connection, StoreError> {
    let connection = Connection::open(path)?;
    connection.busy_timeout(busy_timeout)?;
    connection.pragma_update(None, "journal_mode", "WAL")?;
    connection.pragma_update(None, "synchronous", "FULL")?;
    connection.pragma_update(None, "journal_size_limit", 64 * 1024 * 1024)?;
    connection.pragma_update(None, "foreign_keys", "ON")?;
    // A clean close would checkpoint the WAL and delete it and its `-shm` file; a start must then
    // create both again, which a full disk refuses (SQLite's `xShmMap` fails), so a server
    // stopped cleanly on a full disk could not start to serve what it holds. The checkpointer
    // copies the WAL back before the process ends; the files stay for the next start.
    connection.set_db_config(DbConfig::SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, true)?;
    rusqlite::vtab::array::load_module(&connection)?;
    packed_sums::register(&connection)?;
    packed_reading::register(&connection)?;
    Ok(connection)
}

/// A poisoned lock only means another query panicked; the connection itself is still sound.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Microseconds since the epoch, as stored.
pub(crate) fn to_micros(at: chrono::DateTime<chrono::Utc>) -> i64 {
    at.timestamp_micros()
}

/// An instant from stored microseconds.
pub(crate) fn from_micros(micros: i64) -> Result<chrono::DateTime<chrono::Utc>, StoreError> {
    chrono::DateTime::from_timestamp_micros(micros)
        .ok_or_else(|| StoreError::Corrupt(format!("timestamp {micros} is out of range")))
}

/// A device as stored: its UUID's 16 bytes.
pub(crate) fn device_bytes(device: crate::domain::DeviceUuid) -> [u8; 16] {
    device.as_uuid().into_bytes()
}

/// The `device` column at `index` as the 16 bytes it holds (`None` if it holds anything else),
/// borrowed from the row rather than copied into a `Vec` first.
pub(crate) fn read_device(
    row: &rusqlite::Row<'_>,
    index: usize,
) -> rusqlite::Result<Option<[u8; 16]>> {
    Ok(<[u8; 16]>::try_from(row.get_ref(index)?.as_blob()?).ok())
}

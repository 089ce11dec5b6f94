//! The ingestion log: `ingest.db`, the file an upload's commit appends its raw rows to.
//!
//! Why a file of its own: SQLite lets one writer at a time into a file, and the fold holds
//! `airq.db`'s write lock for a whole chunk (about a tenth of a second for 16,384 rows from
//! 10,000 devices). Appending to the same file, every upload in flight waited for that; measured,
//! single uploads stalled for the length of a chunk about every 0.7 s. Here the batch writer's
//! lane is the only writer except for short prunes, so a 201 waits for one sequential append and
//! its sync, never for the fold.
//!
//! The rules:
//! - **Durable before acknowledged.** WAL with `synchronous = NORMAL` on the appending
//!   connection: an append returns after its commit, unsynced; its uploads are answered only once
//!   a [`GroupSync`](super::sync::GroupSync) on [`IngestLog::wal`] has synced the WAL behind it,
//!   so the next batch is appended while this one syncs. (NORMAL still syncs around every
//!   checkpoint, so the file stays consistent across power loss.) Everything else this
//!   connection commits (prunes) needs no sync of its own, except a device's deletion, which is
//!   synced before it returns.
//! - **A row leaves only once it is folded.** The fold copies the rows from the log into
//!   `readings` through `airq.db`'s writer connection (which attaches this file as `log`), with
//!   everything it derives (from the same rows, kept in memory until folded) and the watermark in
//!   one transaction, commits, and only then prunes the log through the watermark. A crash in between leaves rows in both files; those at or below
//!   the watermark are never read again and go with the next prune.
//! - **Ids only grow.** An append does not write the next receipt id anywhere (one page fewer to
//!   sync per commit, measured: an append dirtied about five pages): at start it is past the
//!   highest id of both files and past the fold's watermark, which covers every pruned row. Only
//!   deleting a device can take the highest ids away, so that moves the counter past them first.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::{LazyLock, Mutex};
use std::time::Duration;

use chrono::Utc;
use rusqlite::{params, Connection, OptionalExtension};

use crate::domain::measure::COUNT;
use crate::domain::{DeviceUuid, Reading, ReadingId, StoredReading};
use crate::store::sqlite::{
    bind_values, connect, connect_with_pages, device_bytes, from_micros, lock, migrate,
    read_device, read_values, to_micros,
};
use crate::store::{columns, StoreError};

/// The log's schema, in order (see [`migrate`]).
const SCHEMA: &[&str] = &[include_str!("../../../../schema/sqlite/log/001_log.sql")];
/// The counter holding the next receipt id where the highest ids may have been deleted (here,
/// and in `airq.db` before the ingestion log).
const NEXT_ID: &str = "next_reading_id";
/// WAL pages after which the appending connection checkpoints itself; the checkpointer thread
/// normally gets there first.
const AUTOCHECKPOINT_PAGES: i64 = 10_000;
/// The page size of a new log. Its rows are appended at the end and deleted from the front, so
/// larger pages only mean fewer of them to write, read back and free: batch uploads from 10,000
/// devices 8 % faster than with SQLite's 4 KiB (`bench/RESULTS.md`, tenth session); single
/// uploads, which append a few rows per commit, no slower within the noise. (`airq.db`, whose
/// fold dirties pages all over its indexes, keeps 4 KiB: 16 KiB for both files cost single
/// uploads a fifth.)
const PAGE_BYTES: i64 = 16 * 1024;

/// The columns of `log` and `readings`, in the order [`IngestLog::append`] binds them.
pub(super) static RAW_COLUMNS: LazyLock<String> = LazyLock::new(|| {
    format!(
        "id, device, at, received_at, keyed, {}, pms_provider, temperature_provider, lat, lon, \
         location_provider",
        columns::each(str::to_owned)
    )
});

/// The append statement, built once (it runs for every batch).
static APPEND: LazyLock<String> = LazyLock::new(|| {
    format!(
        "INSERT INTO log ({}) VALUES ({})",
        *RAW_COLUMNS,
        columns::placeholders(1, 5 + COUNT + 5)
    )
});

/// The next receipt id as `schema` knows it: past its id counter and past the highest id in
/// `table` (the log, or `readings` of a database from before the log, which kept its counter).
pub(super) fn next_id(
    connection: &Connection,
    schema: &str,
    table: &str,
) -> Result<i64, StoreError> {
    let counter: Option<i64> = connection
        .query_row(
            &format!("SELECT value FROM {schema}.counters WHERE name = ?1"),
            [NEXT_ID],
            |row| row.get(0),
        )
        .optional()?;
    let highest: Option<i64> = connection.query_row(
        &format!("SELECT max(id) FROM {schema}.{table}"),
        [],
        |row| row.get(0),
    )?;
    Ok(counter.unwrap_or(1).max(highest.unwrap_or(0) + 1))
}

/// The ingestion log and its one appending connection.
#[derive(Debug)]
pub(crate) struct IngestLog {
    path: PathBuf,
    busy_timeout: Duration,
    writer: Mutex<Connection>,
    /// The writer's WAL file, for syncing what it commits, and its path.
    wal: (File, PathBuf),
}

impl IngestLog {
    /// The log's file name inside the data directory.
    pub(crate) const FILE: &'static str = "ingest.db";

    /// Opens (creating when missing) the log in `data_dir` and applies its schema.
    pub(crate) fn open(data_dir: &Path, busy_timeout: Duration) -> Result<Self, StoreError> {
        let path = data_dir.join(Self::FILE);
        let mut writer = connect_with_pages(&path, busy_timeout, Some(PAGE_BYTES))?;
        migrate(&mut writer, SCHEMA)?;
        writer.pragma_update(None, "wal_autocheckpoint", AUTOCHECKPOINT_PAGES)?;
        writer.pragma_update(None, "synchronous", "NORMAL")?;
        // The connection has read the file, so its WAL exists (SQLite opens it at the first read
        // and keeps it until the last connection closes).
        let wal_path = data_dir.join(format!("{}-wal", Self::FILE));
        let wal = File::options()
            .read(true)
            .write(true)
            .open(&wal_path)
            .map_err(|source| StoreError::File {
                path: wal_path.clone(),
                source,
            })?;
        Ok(Self {
            path,
            busy_timeout,
            writer: Mutex::new(writer),
            wal: (wal, wal_path),
        })
    }

    /// A handle of the log's WAL file, for a [`GroupSync`](super::sync::GroupSync) to sync.
    pub(crate) fn wal(&self) -> Result<File, StoreError> {
        self.wal
            .0
            .try_clone()
            .map_err(|source| self.wal_failed(source))
    }

    fn wal_failed(&self, source: std::io::Error) -> StoreError {
        StoreError::File {
            path: self.wal.1.clone(),
            source,
        }
    }

    /// Where the log is (for attaching it to other connections).
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// A connection of its own that reads the log back in id order (WAL lets it read beside the
    /// appends).
    pub(crate) fn reader(&self) -> Result<LogReader, StoreError> {
        Ok(LogReader {
            connection: connect(&self.path, self.busy_timeout)?,
        })
    }

    /// Appends `batch` in one transaction, committed but not synced: durable only once the WAL
    /// is synced after this returns.
    pub(crate) fn append(&self, batch: &[StoredReading]) -> Result<(), StoreError> {
        let mut writer = lock(&self.writer);
        let transaction = writer.transaction()?;
        {
            let mut insert = transaction.prepare_cached(&APPEND)?;
            let received_at = to_micros(Utc::now());
            for row in batch {
                let location = row.reading.location.as_ref();
                insert.raw_bind_parameter(1, i64::try_from(row.id.get()).unwrap_or(i64::MAX))?;
                insert.raw_bind_parameter(2, device_bytes(row.device).as_slice())?;
                insert.raw_bind_parameter(3, to_micros(row.at))?;
                insert.raw_bind_parameter(4, received_at)?;
                insert.raw_bind_parameter(5, i64::from(row.reading.measured_at.is_some()))?;
                bind_values(&mut insert, 6, &row.reading.values)?;
                let next = 6 + COUNT;
                insert.raw_bind_parameter(next, &row.reading.pms_provider)?;
                insert.raw_bind_parameter(next + 1, &row.reading.temperature_provider)?;
                insert.raw_bind_parameter(next + 2, location.map(|l| l.lat))?;
                insert.raw_bind_parameter(next + 3, location.map(|l| l.lon))?;
                insert.raw_bind_parameter(next + 4, location.map(|l| l.provider.as_str()))?;
                insert.raw_execute()?;
            }
        }
        transaction.commit()?;
        Ok(())
    }

    /// Deletes the rows through `folded`, which their consumer (the fold, or the QuestDB spool's
    /// forwarder) has committed where they go.
    pub(crate) fn prune(&self, folded: i64) -> Result<(), StoreError> {
        lock(&self.writer)
            .prepare_cached("DELETE FROM log WHERE id <= ?1")?
            .execute([folded])?;
        Ok(())
    }

    /// Deletes every row of a deleted device (before its folded readings go, so the fold
    /// cannot bring any back), first moving the id counter past the log's highest id, which may
    /// be among them; answers that highest id, the last one committed (rows not synced yet are
    /// still in the log: only folded rows are pruned).
    pub(crate) fn forget_device(&self, device: [u8; 16]) -> Result<i64, StoreError> {
        let mut writer = lock(&self.writer);
        let transaction = writer.transaction()?;
        let highest: i64 = transaction
            .prepare_cached("SELECT coalesce(max(id), 0) FROM log")?
            .query_row([], |row| row.get(0))?;
        transaction
            .prepare_cached(
                "INSERT INTO counters (name, value) VALUES (?1, ?2) \
                 ON CONFLICT (name) DO UPDATE SET value = max(value, excluded.value)",
            )?
            .execute(params![NEXT_ID, highest + 1])?;
        transaction
            .prepare_cached("DELETE FROM log WHERE device = ?1")?
            .execute([device.as_slice()])?;
        transaction.commit()?;
        // Durable before the device's folded readings go, or a power loss could bring these back.
        self.wal
            .0
            .sync_data()
            .map_err(|source| self.wal_failed(source))?;
        Ok(highest)
    }
}

/// The statement reading the log back, built once.
static READ_AFTER: LazyLock<String> = LazyLock::new(|| {
    format!(
        "SELECT id, device, at, keyed, {}, pms_provider, temperature_provider, lat, lon, \
         location_provider FROM log WHERE id > ?1 ORDER BY id LIMIT ?2",
        columns::each(str::to_owned)
    )
});

/// The log read back as stored readings, oldest first: what a consumer other than the fold (the
/// QuestDB spool's forwarder, `crate::store::questdb`) takes its rows from.
#[derive(Debug)]
pub(crate) struct LogReader {
    connection: Connection,
}

impl LogReader {
    /// Up to `limit` rows with ids past `after`, by id, as they were appended.
    pub(crate) fn after(&self, after: i64, limit: usize) -> Result<Vec<StoredReading>, StoreError> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let mut statement = self.connection.prepare_cached(&READ_AFTER)?;
        let mut rows = statement.query(params![after, limit])?;
        let mut read = Vec::new();
        while let Some(row) = rows.next()? {
            read.push(stored_reading(row)?);
        }
        Ok(read)
    }

    /// How many rows the log holds, and the highest id among them (0 when empty).
    pub(crate) fn extent(&self) -> Result<(i64, i64), StoreError> {
        Ok(self.connection.query_row(
            "SELECT count(*), coalesce(max(id), 0) FROM log",
            [],
            |row| Ok((row.get(0)?, row.get(1)?)),
        )?)
    }

    /// Copies the log's WAL back into its file as far as no reader holds it back, without
    /// waiting for the appender (which then finds little left to copy at its own threshold).
    pub(crate) fn checkpoint(&self) -> Result<(), StoreError> {
        self.connection
            .query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(()))?;
        Ok(())
    }
}

/// A row of [`READ_AFTER`] as the reading it was appended as.
fn stored_reading(row: &rusqlite::Row<'_>) -> Result<StoredReading, StoreError> {
    let id: i64 = row.get(0)?;
    let device = read_device(row, 1)?
        .ok_or_else(|| StoreError::Corrupt(format!("log row {id} names no device")))?;
    let at = from_micros(row.get(2)?)?;
    let keyed = row.get::<_, i64>(3)? != 0;
    let values = read_values(row, 4)?;
    let next = 4 + COUNT;
    let lat: Option<f64> = row.get(next + 2)?;
    let lon: Option<f64> = row.get(next + 3)?;
    let provider: Option<String> = row.get(next + 4)?;
    Ok(StoredReading {
        id: u64::try_from(id)
            .ok()
            .and_then(ReadingId::new)
            .ok_or_else(|| StoreError::Corrupt(format!("log row id {id} is out of range")))?,
        device: DeviceUuid::from_uuid(uuid::Uuid::from_bytes(device)),
        at,
        reading: Reading {
            values,
            pms_provider: row.get(next)?,
            temperature_provider: row.get(next + 1)?,
            location: match (lat, lon, provider) {
                (Some(lat), Some(lon), Some(provider)) => {
                    Some(crate::domain::Location { lat, lon, provider })
                }
                _ => None,
            },
            measured_at: keyed.then_some(at),
        },
    })
}

#[cfg(test)]
mod tests {
    use chrono::{TimeZone, Utc};

    use super::*;
    use crate::domain::{Location, Measurements};

    fn reading(id: u64, keyed: bool, location: Option<Location>) -> StoredReading {
        let at = Utc
            .timestamp_micros(1_790_000_000_000_000 + i64::try_from(id).unwrap_or(0))
            .single()
            .unwrap_or_default();
        StoredReading {
            id: ReadingId::new(id).unwrap_or_else(|| unreachable!("ids from 1")),
            device: DeviceUuid::generate(),
            at,
            reading: Reading {
                values: Measurements::from_fn(|measure| id as f64 + measure.index() as f64),
                pms_provider: "PMS5003".into(),
                temperature_provider: "DHT22".into(),
                location,
                measured_at: keyed.then_some(at),
            },
        }
    }

    fn opened() -> (tempfile::TempDir, IngestLog) {
        let dir = tempfile::tempdir().unwrap_or_else(|error| panic!("temporary dir: {error}"));
        let log = IngestLog::open(dir.path(), Duration::from_secs(1))
            .unwrap_or_else(|error| panic!("the log opens: {error}"));
        (dir, log)
    }

    #[test]
    fn the_log_reads_back_what_was_appended_in_id_order_past_a_given_id() {
        let (_dir, log) = opened();
        let place = Location {
            lat: 52.52,
            lon: 13.405,
            provider: "gps".into(),
        };
        let appended = vec![
            reading(7, false, None),
            reading(8, true, Some(place)),
            reading(9, true, None),
        ];
        log.append(&appended[..2])
            .unwrap_or_else(|error| panic!("{error}"));
        log.append(&appended[2..])
            .unwrap_or_else(|error| panic!("{error}"));
        let reader = log.reader().unwrap_or_else(|error| panic!("{error}"));

        assert_eq!(reader.after(0, 10).unwrap_or_default(), appended);
        assert_eq!(reader.after(7, 1).unwrap_or_default(), appended[1..2]);
        assert_eq!(reader.extent().unwrap_or_default(), (3, 9));
    }

    #[test]
    fn a_new_log_has_pages_of_16_kib() {
        let (_dir, log) = opened();
        let page_bytes: i64 = lock(&log.writer)
            .pragma_query_value(None, "page_size", |row| row.get(0))
            .unwrap_or_default();
        assert_eq!(page_bytes, PAGE_BYTES);
    }

    #[test]
    fn a_pruned_log_holds_only_the_rows_past_the_watermark() {
        let (_dir, log) = opened();
        let appended: Vec<_> = (1..=4).map(|id| reading(id, false, None)).collect();
        log.append(&appended)
            .unwrap_or_else(|error| panic!("{error}"));
        log.prune(2).unwrap_or_else(|error| panic!("{error}"));
        let reader = log.reader().unwrap_or_else(|error| panic!("{error}"));

        assert_eq!(reader.after(0, 10).unwrap_or_default(), appended[2..]);
        assert_eq!(reader.extent().unwrap_or_default(), (2, 4));
    }
}

//! The batch writer's sink: appends raw rows and nothing else.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use chrono::Utc;
use rusqlite::{params, Connection, OptionalExtension};

use super::fold::{FoldConfig, Folder};
use super::{folded_id, LoggedRow, MAX_BACKLOG};
use crate::domain::measure::COUNT;
use crate::domain::{ReadingId, StoredReading};
use crate::store::sqlite::{bind_values, device_bytes, to_micros, Sqlite};
use crate::store::{columns, ReadingSink, StoreError};

const NEXT_ID: &str = "next_reading_id";
/// How often a writer held back by a full backlog looks again.
const BACKLOG_POLL: Duration = Duration::from_millis(5);

/// The batch writer's side of the embedded store; owns the fold, which stops (after folding
/// everything) when the sink is dropped.
#[derive(Debug)]
pub struct SqliteReadingSink {
    db: Arc<Sqlite>,
    next_id: u64,
    folder: Folder,
    fold_rows: i64,
}

impl SqliteReadingSink {
    /// A sink continuing the stored id sequence, with its fold started.
    pub fn open(db: Arc<Sqlite>, fold: FoldConfig) -> Result<Self, StoreError> {
        let next_id = db.write_blocking(|connection| {
            let counter: Option<i64> = connection
                .query_row(
                    "SELECT value FROM counters WHERE name = ?1",
                    [NEXT_ID],
                    |row| row.get(0),
                )
                .optional()?;
            let highest: Option<i64> =
                connection.query_row("SELECT max(id) FROM readings", [], |row| row.get(0))?;
            Ok(counter.unwrap_or(1).max(highest.unwrap_or(0) + 1))
        })?;
        let folder = Folder::start(Arc::clone(&db), fold, next_id - 1)?;
        Ok(Self {
            db,
            next_id: u64::try_from(next_id).unwrap_or(1),
            folder,
            fold_rows: fold.rows.max(1),
        })
    }

    /// Reads the rows appended and not folded yet, from any thread (for `/metrics`).
    pub fn unfolded_rows(&self) -> impl Fn() -> i64 + Send + Sync + 'static {
        self.folder.unfolded()
    }

    /// Rows appended and not folded yet (ids of failed batches count too: an upper bound).
    fn backlog(&self) -> i64 {
        i64::try_from(self.next_id).unwrap_or(i64::MAX) - 1 - self.folder.folded()
    }

    /// Waits while the fold is more than [`MAX_BACKLOG`] rows behind.
    async fn wait_for_room(&self) {
        while self.backlog() > MAX_BACKLOG {
            self.folder.wake();
            tokio::time::sleep(BACKLOG_POLL).await;
        }
    }
}

#[async_trait]
impl ReadingSink for SqliteReadingSink {
    async fn allocate_ids(&mut self, count: usize) -> Result<Vec<ReadingId>, StoreError> {
        let first = self.next_id;
        self.next_id += count as u64;
        (first..self.next_id)
            .map(|id| {
                ReadingId::new(id)
                    .ok_or_else(|| StoreError::Corrupt(format!("receipt id {id} is out of range")))
            })
            .collect()
    }

    /// Blocks the writer thread for the append; nothing else runs there.
    async fn write(&mut self, batch: &[StoredReading]) -> Result<(), StoreError> {
        self.wait_for_room().await;
        let next_id = self.next_id;
        self.db.write_blocking(|connection| {
            let transaction = connection.transaction()?;
            append(&transaction, batch)?;
            transaction
                .prepare_cached(
                    "INSERT INTO counters (name, value) VALUES (?1, ?2) \
                     ON CONFLICT (name) DO UPDATE SET value = max(value, excluded.value)",
                )?
                .execute(params![NEXT_ID, i64::try_from(next_id).unwrap_or(i64::MAX)])?;
            transaction.commit()?;
            Ok(())
        })?;
        self.db.unfolded().add(batch.iter().map(LoggedRow::of));
        self.folder
            .appended(i64::try_from(next_id).unwrap_or(i64::MAX) - 1);
        if self.backlog() >= self.fold_rows {
            self.folder.wake();
        }
        Ok(())
    }
}

/// Appends the raw rows (the rollups and indexes are the fold's business).
fn append(connection: &Connection, batch: &[StoredReading]) -> Result<(), StoreError> {
    let mut insert = connection.prepare_cached(&format!(
        "INSERT INTO readings (id, device, at, received_at, keyed, {}, pms_provider, \
         temperature_provider, lat, lon, location_provider) VALUES ({})",
        columns::each(str::to_owned),
        columns::placeholders(1, 5 + COUNT + 5)
    ))?;
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
    Ok(())
}

/// The highest folded id as stored (for the fold's start).
pub(super) fn stored_folded_id(db: &Sqlite) -> Result<i64, StoreError> {
    db.write_blocking(|connection| Ok(folded_id(connection)?))
}

//! The batch writer's sink: appends raw rows to the ingestion log and nothing else; once the
//! group sync has made them durable they join the unconsumed rows and the fold hears of them
//! (the log's [`Appender`] keeps that order).

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;

use super::fold::{FoldConfig, Folder};
use super::{stored_folded_id, LoggedRow, MAX_BACKLOG};
use crate::domain::{ReadingId, StoredReading};
use crate::store::ingest_log::Appender;
use crate::store::sqlite::Sqlite;
use crate::store::{ReadingSink, StoreError};

/// How often a writer held back by a full backlog looks again.
const BACKLOG_POLL: Duration = Duration::from_millis(5);
/// How long a batch waits for the fold to make room before it fails. The fold folds
/// [`MAX_BACKLOG`] rows in well under a second; one that has not made room for this long cannot
/// write `airq.db` (a full disk), and a writer that waited on would answer nobody, ever: not the
/// uploads behind it, not a shutdown's drain.
const BACKLOG_WAIT: Duration = Duration::from_secs(10);

/// The batch writer's side of the embedded store; owns the fold, which stops (after folding
/// everything) when the sink is dropped.
#[derive(Debug)]
pub struct SqliteReadingSink {
    next_id: u64,
    /// The highest receipt id appended to the log. Ids of a batch whose append failed are taken
    /// (a retry reuses them, a later batch does not) but never written, so the backlog is
    /// counted up to this id, not up to `next_id`: the fold never passes ids nobody wrote.
    written_through: i64,
    /// Dropped before the fold, so that the fold's last round finds every synced batch.
    appender: Appender<LoggedRow>,
    folder: Folder,
}

impl SqliteReadingSink {
    /// A sink continuing the stored id sequence, with its fold started.
    pub fn open(db: Arc<Sqlite>, fold: FoldConfig) -> Result<Self, StoreError> {
        // Past every id logged and every id folded (the watermark never goes down, so ids of
        // deleted readings are not handed out again).
        let next_id = db.ingestion().highest().max(stored_folded_id(&db)?) + 1;
        let ingestion = Arc::clone(db.ingestion());
        let folder = Folder::start(db, fold, next_id - 1)?;
        // Tells the fold of synced rows, from the sync's thread.
        let notices = folder.notices(fold.rows.max(1));
        let appender = Appender::start(
            ingestion,
            Box::new(move |through, _| {
                if let Some(through) = through {
                    notices.appended(through);
                }
            }),
        )?;
        Ok(Self {
            next_id: u64::try_from(next_id).unwrap_or(1),
            written_through: next_id - 1,
            appender,
            folder,
        })
    }

    /// Reads the rows appended and not folded yet, from any thread (for `/metrics`).
    pub fn backlog_rows(&self) -> impl Fn() -> i64 + Send + Sync + 'static {
        self.folder.backlog_rows()
    }

    /// Rows appended and not folded yet: an upper bound, since ids of failed batches between
    /// two written ones count until the fold passes the later one.
    fn backlog(&self) -> i64 {
        self.written_through - self.folder.folded()
    }

    /// Waits while the fold is more than [`MAX_BACKLOG`] rows behind, at most [`BACKLOG_WAIT`].
    async fn wait_for_room(&self) -> Result<(), StoreError> {
        let started = std::time::Instant::now();
        while self.backlog() > MAX_BACKLOG {
            if started.elapsed() >= BACKLOG_WAIT {
                return Err(StoreError::FoldBehind(self.backlog()));
            }
            self.folder.wake();
            tokio::time::sleep(BACKLOG_POLL).await;
        }
        Ok(())
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

    /// Blocks the writer thread for the append (not its sync); nothing else runs there.
    async fn write(&mut self, batch: &[StoredReading]) -> Result<(), StoreError> {
        self.wait_for_room().await?;
        self.appender.append(batch)?;
        if let Some(last) = batch.iter().map(|stored| stored.id.get()).max() {
            self.written_through = self
                .written_through
                .max(i64::try_from(last).unwrap_or(i64::MAX));
        }
        Ok(())
    }

    /// Once synced, the rows join the unconsumed ones (reads and the fold see them from then
    /// on), before `then` answers their uploads.
    fn when_durable(&mut self, batch: &[StoredReading], then: Box<dyn FnOnce() + Send>) {
        self.appender.when_durable(batch, then);
    }
}

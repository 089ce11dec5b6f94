//! What the spool and its forwarder share: the spooled rows as the ingestion log's unconsumed
//! set keeps them, and how far QuestDB has taken them.
//!
//! Why a room of its own: the spool (the sink's side and the reads') and the forwarder (the
//! consumer) both need these, and neither may reach into the other; with them here the forwarder
//! knows nothing of the spool, and the spool only starts the forwarder.

use std::sync::atomic::{AtomicI64, Ordering};

use tokio::sync::watch;

use crate::domain::StoredReading;
use crate::store::ingest_log::{Ingestion, UnconsumedRow};

/// The spool's ingestion: the log, and per device its latest spooled row not yet forwarded.
pub(super) type SpoolIngestion = Ingestion<SpooledRow>;

/// A spooled row as kept in memory: only what a read waits for. The rows themselves stay on disk
/// (the forwarder reads them back from the log): the spool may hold a million of them.
#[derive(Debug)]
pub(super) struct SpooledRow {
    id: i64,
    device: [u8; 16],
}

impl UnconsumedRow for SpooledRow {
    type Maker = ();
    /// A read of a device waits for its latest spooled row, so that is all that is kept.
    const LATEST_ONLY: bool = true;
    /// The forwarder writes each row's owner into QuestDB.
    const KEEPS_OWNER: bool = true;

    fn of(stored: &StoredReading, _received_at: i64, (): &mut ()) -> Self {
        Self {
            id: i64::try_from(stored.id.get()).unwrap_or(i64::MAX),
            device: stored.device.as_uuid().into_bytes(),
        }
    }

    fn id(&self) -> i64 {
        self.id
    }

    fn device(&self) -> [u8; 16] {
        self.device
    }

    /// QuestDB replaces a reading itself (deduplication on its key); nothing to leave out here.
    fn key(&self) -> Option<i64> {
        None
    }
}

/// How far the spooled rows went: counted appends and acknowledgements, and the watermark.
#[derive(Debug)]
pub(super) struct Progress {
    /// Rows appended, and rows QuestDB acknowledged, since the start (the first counts what the
    /// previous run left).
    appended_rows: AtomicI64,
    forwarded_rows: AtomicI64,
    /// Every row with an id up to this one is acknowledged by QuestDB.
    forwarded: watch::Sender<i64>,
}

impl Progress {
    /// Progress with `rows_at_start` rows left by the previous run.
    pub(super) fn new(rows_at_start: i64) -> Self {
        Self {
            appended_rows: AtomicI64::new(rows_at_start),
            forwarded_rows: AtomicI64::new(0),
            forwarded: watch::Sender::new(0),
        }
    }

    /// Counts `rows` more spooled rows.
    pub(super) fn appended(&self, rows: usize) {
        self.appended_rows.fetch_add(rows as i64, Ordering::Relaxed);
    }

    /// Records that QuestDB acknowledged `rows` more rows and every row through id `through`.
    pub(super) fn forwarded(&self, through: i64, rows: usize) {
        self.forwarded_rows
            .fetch_add(rows as i64, Ordering::Relaxed);
        self.forwarded.send_replace(through);
    }

    /// Rows in the spool that QuestDB has not acknowledged.
    pub(super) fn backlog(&self) -> i64 {
        // The forwarder may take a batch's rows before the sink counted them; never below 0.
        (self.appended_rows.load(Ordering::Relaxed) - self.forwarded_rows.load(Ordering::Relaxed))
            .max(0)
    }

    /// The watermark: every row with an id up to it is acknowledged by QuestDB.
    pub(super) fn watermark(&self) -> &watch::Sender<i64> {
        &self.forwarded
    }
}

//! Append first, index behind: how the embedded store takes readings in.
//!
//! The batch writer's write only **appends** the raw rows to the ingestion log
//! ([`ingest_log`](crate::store::ingest_log), segment files in `ingest/` beside `airq.db`, so
//! appends never wait for the fold's lock on `airq.db`); a thread of its own then syncs the
//! log while the writer appends the next batch, and only once that sync is done do the rows
//! survive `kill -9` and power loss, become visible, and is the upload answered 201. Everything
//! else is **folded** in behind, by a thread of its own, from the rows past the `folded_id`
//! counter, kept in memory until folded (the log's **unconsumed** rows), in large transactions:
//! the raw rows into `readings`, the device index (`readings_by_device`), the quarter-hour, day
//! and hour-of-day rollups, `device_latest`, and the replacement of a reading by a later one
//! with the same (device, `measured_at`).
//!
//! The rules:
//! - **Nothing acknowledged is lost.** A row is appended and synced to the log before its 201
//!   (and before reads or the fold see it); the fold moves the watermark in the same
//!   transaction as the rows it wrote and what it derived, and the log drops a segment only once
//!   the watermark has passed all of it, so a crash anywhere leaves either the row unconsumed in
//!   the log (folded at the next start) or folded and counted once.
//! - **Reads are exact and fresh.** Every read runs in one SQLite read transaction and merges what
//!   the fold has not reached yet ([`UnconsumedView`]), kept in memory by device: rows past the
//!   watermark are added, earlier readings they replace are taken away. A read after a 201
//!   includes its reading.
//! - **The backlog is bounded.** When more than [`MAX_BACKLOG`] rows wait for the fold, the batch
//!   writer waits for it before appending (and so do the uploads behind it), for a bounded time
//!   after which the batch fails (a fold that cannot write, on a full disk, must not wedge the
//!   writer). The backlog counts up to the highest id *written*: a failed batch's ids are taken
//!   but never written, so ids are not dense, and nothing may wait for the fold to pass them.
//! - **Shutdown folds everything.** The fold stops with the sink that owns it, after folding the
//!   whole backlog.

mod append;
mod fold;
mod view;

use std::sync::Arc;

use rusqlite::params;

use super::dictionary::Numbering;
use super::packed_reading::Body;
use super::{device_bytes, to_micros};
use crate::domain::{Measurements, StoredReading};
use crate::store::ingest_log::{Ingestion, UnconsumedRow};

pub use append::SqliteReadingSink;
pub use fold::FoldConfig;
pub(super) use view::{Replaced, UnconsumedView};

/// The embedded store's ingestion: the log, and its unconsumed rows as the fold and the reads
/// use them.
pub(super) type SqliteIngestion = Ingestion<LoggedRow>;

/// Unconsumed rows after which appends wait for the fold. Each costs about 300 bytes of memory
/// while it waits (measured: 100,000 more rows, 30 MiB more peak RSS), and the server's RSS target is
/// 150 MB: with 100,000, batch uploads from 10,000 devices peaked at 147–151 MiB once the log's
/// larger pages let the fold keep up at a higher rate; with 85,000, at 139 MiB and no slower.
pub(crate) const MAX_BACKLOG: i64 = 85_000;
/// The counter holding the highest folded receipt id.
const FOLDED_ID: &str = "folded_id";
/// The counter of folded readings deleted since (replaced by a later keyed reading, or their
/// device deleted): sums kept of folded readings (`recent_seconds.rs`) are good while it stands.
/// Missing until the first such deletion, read as 0; older binaries ignore it.
const REMOVED: &str = "removed";

/// A raw row of `readings`, as the fold and the reads' view of unconsumed rows see it.
#[derive(Debug, Clone)]
pub(super) struct LoggedRow {
    pub(super) id: i64,
    pub(super) device: [u8; 16],
    /// Microseconds since the epoch.
    pub(super) at: i64,
    /// Whether (device, at) is the reading's key.
    pub(super) keyed: bool,
    pub(super) values: Measurements,
    /// Latitude, longitude and provider.
    pub(super) location: Option<(f64, f64, String)>,
    /// When it was appended, microseconds since the epoch.
    pub(super) received_at: i64,
    /// The sensor models, shared by the rows that name the same ([`Providers`]).
    pub(super) providers: Arc<(String, String)>,
}

/// The sensor models of the rows last made, shared by the next rows that name the same: a fleet
/// names few, and every unconsumed row keeps them in memory.
#[derive(Debug, Default)]
pub(super) struct Providers(Option<Arc<(String, String)>>);

impl Providers {
    fn of(&mut self, stored: &StoredReading) -> Arc<(String, String)> {
        let reading = &stored.reading;
        match &self.0 {
            Some(last)
                if last.0 == reading.pms_provider && last.1 == reading.temperature_provider =>
            {
                Arc::clone(last)
            }
            _ => Arc::clone(self.0.insert(Arc::new((
                reading.pms_provider.clone(),
                reading.temperature_provider.clone(),
            )))),
        }
    }
}

impl LoggedRow {
    /// The row's body, its sensor models and location provider numbered by `numbering`.
    fn body(
        &self,
        connection: &rusqlite::Connection,
        numbering: &mut Numbering,
    ) -> Result<Body, crate::store::StoreError> {
        let location = match &self.location {
            Some((lat, lon, provider)) => {
                Some((*lat, *lon, numbering.provider(connection, provider)?))
            }
            None => None,
        };
        Ok(Body {
            received_at: self.received_at,
            values: self.values,
            providers: (
                numbering.provider(connection, &self.providers.0)?,
                numbering.provider(connection, &self.providers.1)?,
            ),
            location,
        })
    }
}

impl UnconsumedRow for LoggedRow {
    type Maker = Providers;

    /// The row a stored reading was appended as.
    fn of(stored: &StoredReading, received_at: i64, providers: &mut Providers) -> Self {
        Self {
            id: i64::try_from(stored.id.get()).unwrap_or(i64::MAX),
            device: device_bytes(stored.device),
            at: to_micros(stored.at),
            keyed: stored.reading.measured_at.is_some(),
            values: stored.reading.values,
            location: stored
                .reading
                .location
                .as_ref()
                .map(|location| (location.lat, location.lon, location.provider.clone())),
            received_at,
            providers: providers.of(stored),
        }
    }

    fn id(&self) -> i64 {
        self.id
    }

    fn device(&self) -> [u8; 16] {
        self.device
    }

    fn key(&self) -> Option<i64> {
        self.keyed.then_some(self.at)
    }
}

/// The highest folded id as stored (for the sink's and the fold's start).
fn stored_folded_id(db: &super::Sqlite) -> Result<i64, crate::store::StoreError> {
    db.write_blocking(|connection| Ok(folded_id(connection)?))
}

/// How many folded readings were deleted so far ([`REMOVED`]).
pub(super) fn removed(connection: &rusqlite::Connection) -> rusqlite::Result<i64> {
    connection
        .prepare_cached("SELECT coalesce(max(value), 0) FROM counters WHERE name = ?1")?
        .query_row([REMOVED], |row| row.get(0))
}

/// Counts `deleted` more folded readings deleted, in `connection`'s transaction, the one that
/// deletes them.
pub(super) fn count_removed(
    connection: &rusqlite::Connection,
    deleted: i64,
) -> rusqlite::Result<()> {
    connection
        .prepare_cached(
            "INSERT INTO counters (name, value) VALUES (?1, ?2) \
             ON CONFLICT (name) DO UPDATE SET value = value + excluded.value",
        )?
        .execute(params![REMOVED, deleted])
        .map(drop)
}

/// The highest folded receipt id.
pub(super) fn folded_id(connection: &rusqlite::Connection) -> rusqlite::Result<i64> {
    connection
        .prepare_cached("SELECT coalesce(max(value), 0) FROM counters WHERE name = ?1")?
        .query_row([FOLDED_ID], |row| row.get(0))
}

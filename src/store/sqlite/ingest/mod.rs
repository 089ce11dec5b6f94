//! Append first, index behind: how the embedded store takes readings in.
//!
//! The batch writer's commit only **appends** the raw rows to the ingestion log ([`IngestLog`],
//! `ingest.db`, a file of its own so appends never wait for the fold's lock on `airq.db`); a
//! thread of its own then syncs the log ([`GroupSync`]) while the writer appends the next batch,
//! and only once that sync is done do the rows survive `kill -9` and power loss, become visible,
//! and is the upload answered 201. Everything else is
//! **folded** in behind, by a thread of its own, from the rows past the `folded_id` counter (the
//! raw rows copied from the log, everything else derived from the same rows kept in memory), in
//! large transactions: the raw rows into `readings`, the device index (`readings_by_device`),
//! the quarter-hour, day and hour-of-day rollups, `device_latest`, and the replacement of a
//! reading by a later one with the same (device, `measured_at`).
//!
//! The rules:
//! - **Nothing acknowledged is lost.** A row is committed and synced to the log before its 201
//!   (and before reads or the fold see it); the fold
//!   moves the watermark in the same transaction as the rows it copied and what it derived, and
//!   prunes the log only after that commit, so a crash anywhere leaves either the row unfolded in
//!   the log (folded at the next start) or folded and counted once.
//! - **Reads are exact and fresh.** Every read runs in one SQLite read transaction and merges what
//!   the fold has not reached yet ([`tail`]), kept in memory by device ([`Unfolded`]): rows past
//!   the watermark are added, earlier readings they replace are taken away. A read after a 201
//!   includes its reading.
//! - **The backlog is bounded.** When more than [`MAX_BACKLOG`] rows wait for the fold, the batch
//!   writer waits for it before appending (and so do the uploads behind it).
//! - **Shutdown folds everything.** The fold stops with the sink that owns it, after folding the
//!   whole backlog.

mod append;
mod fold;
mod log;
mod sync;
pub(super) mod tail;
mod unfolded;

use std::sync::LazyLock;

use rusqlite::Row;

use super::{device_bytes, read_device, read_values, to_micros};
use crate::domain::{Measurements, StoredReading};
use crate::store::{columns, StoreError};

pub use append::SqliteReadingSink;
pub use fold::FoldConfig;
pub(crate) use log::{IngestLog, LogReader};
pub(crate) use sync::GroupSync;
pub(crate) use unfolded::Unfolded;

/// Unfolded rows after which appends wait for the fold. Each costs about 300 bytes of memory while
/// it waits (measured: 100,000 more rows, 30 MiB more peak RSS), and the server's RSS target is
/// 150 MB: with 100,000, batch uploads from 10,000 devices peaked at 147–151 MiB once the log's
/// larger pages let the fold keep up at a higher rate; with 85,000, at 139 MiB and no slower.
pub(crate) const MAX_BACKLOG: i64 = 85_000;
/// The counter holding the highest folded receipt id.
const FOLDED_ID: &str = "folded_id";

/// The columns of `readings` that [`LoggedRow::read`] reads, in its order.
static LOGGED_COLUMNS: LazyLock<String> = LazyLock::new(|| {
    format!(
        "id, device, at, keyed, {}, lat, lon, location_provider",
        columns::each(str::to_owned)
    )
});

/// A raw row of `readings`, as the fold and the tail of reads see it.
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
}

impl LoggedRow {
    /// The row a stored reading was appended as.
    fn of(stored: &StoredReading) -> Self {
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
        }
    }

    fn read(row: &Row<'_>) -> rusqlite::Result<Self> {
        let device = read_device(row, 1)?.unwrap_or_default();
        let values = read_values(row, 4)?;
        let next = 4 + crate::domain::measure::COUNT;
        let lat: Option<f64> = row.get(next)?;
        let lon: Option<f64> = row.get(next + 1)?;
        let provider: Option<String> = row.get(next + 2)?;
        Ok(Self {
            id: row.get(0)?,
            device,
            at: row.get(2)?,
            keyed: row.get::<_, i64>(3)? != 0,
            values,
            location: match (lat, lon, provider) {
                (Some(lat), Some(lon), Some(provider)) => Some((lat, lon, provider)),
                _ => None,
            },
        })
    }
}

/// The highest folded receipt id.
pub(super) fn folded_id(connection: &rusqlite::Connection) -> rusqlite::Result<i64> {
    connection
        .prepare_cached("SELECT coalesce(max(value), 0) FROM counters WHERE name = ?1")?
        .query_row([FOLDED_ID], |row| row.get(0))
}

/// Moves rows past the watermark that a database from before the ingestion log holds in
/// `readings` (appended, never folded) into the log, where the fold looks for them: copied in one
/// transaction, deleted in the next, so a crash in between only repeats the copy.
pub(super) fn adopt_unlogged(writer: &rusqlite::Connection) -> Result<(), StoreError> {
    let folded = folded_id(writer)?;
    let columns = &*log::RAW_COLUMNS;
    let copied = writer.execute(
        &format!(
            "INSERT OR IGNORE INTO log.log ({columns}) SELECT {columns} FROM main.readings \
             WHERE id > ?1"
        ),
        [folded],
    )?;
    if copied > 0 {
        tracing::info!(rows = copied, "unfolded rows moved into the ingestion log");
    }
    writer.execute("DELETE FROM main.readings WHERE id > ?1", [folded])?;
    Ok(())
}

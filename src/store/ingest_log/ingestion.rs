//! The room's shared handle: the log and its unconsumed rows, as the consumer, the reads and the
//! sink's [`Appender`](super::Appender) all see them.
//!
//! Why one handle: the log and the set of rows past the watermark must change together — rows
//! join the set when their append is durable, leave it when the consumer reports them consumed,
//! and the log drops a segment only behind that same watermark. Everyone outside asks this
//! handle, never the log or the set directly, so the order of those steps is kept here once.

use std::path::Path;
use std::sync::Arc;

use super::log::{Entry, IngestLog, LogReader};
use super::unconsumed::{Unconsumed, UnconsumedRow};
use crate::store::StoreError;

/// Whose watermark decides which rows of the log are unconsumed at a start.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Watermark {
    /// The consumer keeps its own, committed with what it made of the rows (the fold's, in
    /// `airq.db`); what the log recorded is ignored.
    Own(i64),
    /// The consumer keeps none: the one last recorded in the log counts (the forwarder's, as
    /// QuestDB acknowledged it).
    Recorded,
}

/// What a start found in the log.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Opened {
    /// The watermark the unconsumed rows are past.
    pub(crate) watermark: i64,
    /// How many rows are past it.
    pub(crate) rows: i64,
    /// The highest id among them (0 when none).
    pub(crate) highest: i64,
}

/// The ingestion log of a data directory and its unconsumed rows, kept as `R`.
#[derive(Debug)]
pub(crate) struct Ingestion<R> {
    log: Arc<IngestLog>,
    unconsumed: Unconsumed<R>,
}

impl<R: UnconsumedRow> Ingestion<R> {
    /// Opens (creating when missing) the log in `data_dir`, with segment files of
    /// `segment_bytes`, and gathers the rows past `watermark` (without those of devices deleted
    /// after they were logged) as unconsumed.
    pub(crate) fn open(
        data_dir: &Path,
        segment_bytes: u64,
        watermark: Watermark,
    ) -> Result<(Arc<Self>, Opened), StoreError> {
        let (mut past, own) = match watermark {
            Watermark::Own(own) => (own, true),
            Watermark::Recorded => (0, false),
        };
        let mut maker = R::Maker::default();
        let mut rows: Vec<R> = Vec::new();
        let log = IngestLog::open(data_dir, segment_bytes, |entry| match entry {
            Entry::Reading {
                stored,
                received_at,
            } => {
                if i64::try_from(stored.id.get()).unwrap_or(i64::MAX) > past {
                    rows.push(R::of(&stored, received_at, &mut maker));
                }
            }
            Entry::Forget { device, through } => {
                rows.retain(|row| row.device() != device || row.id() > through);
            }
            // A consumer's own watermark, committed with its work, is the one that counts.
            Entry::Consumed { .. } if own => {}
            Entry::Consumed { through } => {
                past = past.max(through);
                rows.retain(|row| row.id() > past);
            }
        })?;
        rows.sort_unstable_by_key(UnconsumedRow::id);
        let opened = Opened {
            watermark: past,
            rows: i64::try_from(rows.len()).unwrap_or(i64::MAX),
            highest: rows.last().map_or(0, UnconsumedRow::id),
        };
        let ingestion = Self {
            log: Arc::new(log),
            unconsumed: Unconsumed::new(past, rows),
        };
        Ok((Arc::new(ingestion), opened))
    }

    /// The highest receipt id the log has held since it was opened (0 when none): new ids must
    /// be past it.
    pub(crate) fn highest(&self) -> i64 {
        self.log.highest()
    }

    /// The overlay for reads: the unconsumed rows of `devices` that count, oldest first, past the
    /// watermark `watermark` reads (under the set's read lock, so whatever it misses is still
    /// here; for a read transaction, its first read). Of keyed rows with one key, only the latest.
    pub(crate) fn view(
        &self,
        watermark: impl FnOnce() -> Result<i64, StoreError>,
        devices: &[[u8; 16]],
    ) -> Result<Vec<Arc<R>>, StoreError> {
        self.unconsumed.view(watermark, devices)
    }

    /// Every device with unconsumed rows (or with rows consumed but not yet forgotten).
    pub(crate) fn devices(&self) -> Vec<[u8; 16]> {
        self.unconsumed.devices()
    }

    /// The consumer's next chunk, from memory: the unconsumed rows with the lowest ids past
    /// `after`, none past `appended` (the highest id the consumer heard of), their ids spanning
    /// at most `ids`. The caller keeps deletions out meanwhile (the fold holds the writer lock,
    /// as a device's deletion does).
    pub(crate) fn chunk(&self, after: i64, appended: i64, ids: i64) -> Vec<Arc<R>> {
        self.unconsumed.chunk(after, appended, ids)
    }

    /// A reader of the log's readings in id order, from disk (for a consumer that keeps only a
    /// device's latest row in memory: the spool's forwarder).
    pub(crate) fn reader(&self) -> LogReader {
        self.log.reader()
    }

    /// Consumed up to: the consumer has committed every row through `through`, those of
    /// `devices` among them. Forgets them from memory, records the watermark in the log and
    /// drops the log's segments wholly behind it. The log's part may fail (reported); the rows
    /// are forgotten all the same, and the next call prunes what this one could not.
    pub(crate) fn consumed(&self, through: i64, devices: &[[u8; 16]]) -> Result<(), StoreError> {
        self.unconsumed.consumed(through, devices);
        self.log.prune(through)
    }

    /// Forgets `device`, deleted: records it in the log (a scan drops its rows logged before,
    /// and after it), runs the consumer's own deletion (`between`), then forgets its rows in
    /// memory, also those added later (synced after the deletion, or appended after it by an
    /// upload in flight). The consumer keeps itself from consuming meanwhile (the fold's writer
    /// lock), so it never brings back rows this takes away.
    pub(crate) fn forget_device<T>(
        &self,
        device: [u8; 16],
        between: impl FnOnce() -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        self.log.forget_device(device)?;
        let done = between()?;
        self.unconsumed.forget_device(device);
        Ok(done)
    }

    /// Appends, unsynced (for the [`Appender`](super::Appender)).
    pub(super) fn log(&self) -> &IngestLog {
        &self.log
    }

    /// Adds durable rows (for the [`Appender`](super::Appender)).
    pub(super) fn add(&self, rows: Vec<Arc<R>>) {
        self.unconsumed.add(rows);
    }
}

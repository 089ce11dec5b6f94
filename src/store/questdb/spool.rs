//! The spool: the QuestDB pair's ingestion log, so an upload is answered once it is durable on
//! this process's own disk, before QuestDB has it (`--questdb-spool`).
//!
//! Without it, every upload waits for an ILP/HTTP round trip, and QuestDB's commit costs about
//! ten milliseconds whatever the batch's size (`bench/RESULTS.md`), which bounds what a process
//! can take in. With it, the batch writer's one sink ([`SpoolSink`]) appends each batch to the
//! ingestion log in the data directory (`ingest/`, [`IngestLog`] — the embedded store's, the
//! same format, synced the same way) and answers; the [`Forwarder`](super::forward) sends what
//! was appended on to QuestDB in batches as large as the backlog, records in the log how far
//! QuestDB acknowledged it, and drops each segment QuestDB acknowledged all of.
//!
//! The rules:
//! - **Durable before acknowledged.** A 201 means the reading is appended to the spool and the
//!   spool synced behind it ([`GroupSync`]): it survives `kill -9` and a power loss of this host (on storage that
//!   honours fsync) and reaches QuestDB later, also when QuestDB was down when it was taken in.
//! - **A row leaves the spool only once QuestDB acknowledged it.** A crash before that sends it
//!   again at the next start; QuestDB's deduplication on `(at, device, dedup)` makes the second
//!   copy replace the first.
//! - **Reads after a 201 include it.** [`Spool::settle`] makes a read of a device wait until
//!   everything spooled for it before the read is acknowledged by QuestDB (then [`Visibility`]
//!   waits for QuestDB to apply it); a read right after a start waits for whatever the previous
//!   run left. Reads of devices without such rows never wait.
//! - **The backlog is bounded.** Past [`MAX_BACKLOG`] rows the sink holds the batch writer back
//!   (and the uploads behind it), at most [`ROOM_WAIT`], then fails the batch.
//!
//! [`Visibility`]: super::Visibility

use std::collections::HashMap;
use std::fs::File;
use std::path::Path;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{mpsc, Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use tokio::sync::watch;

use super::forward::{self, Event, Forwarder, Lanes};
use super::ids::IdBlocks;
use super::visibility::wait_for_mark;
use crate::domain::{DeviceUuid, ReadingId, StoredReading};
use crate::store::ingest_log::{Entry, GroupSync, IngestLog};
use crate::store::postgres::BoundedPool;
use crate::store::sqlite::to_micros;
use crate::store::{ReadingSink, StoreError};

/// Spooled rows QuestDB has not acknowledged after which the sink holds appends back. On disk,
/// not in memory (about 200 bytes a row): at 20,000 uploads a second, a minute of QuestDB being
/// away.
pub(super) const MAX_BACKLOG: i64 = 1_000_000;
/// Longest wait of an append for room in a full spool before its batch fails.
const ROOM_WAIT: Duration = Duration::from_secs(10);
/// How often an append held back by a full spool looks again.
const ROOM_POLL: Duration = Duration::from_millis(5);
/// How often the devices whose spooled rows are all forwarded are forgotten, at most.
const FORGET_EVERY: Duration = Duration::from_millis(50);

/// What the sink, the forwarder and the reads share. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Spool {
    shared: Arc<Shared>,
}

#[derive(Debug)]
struct Shared {
    /// Per device, the highest id spooled for it this run, while it may not be forwarded.
    pending: Mutex<Pending>,
    /// Rows appended, and rows QuestDB acknowledged, since the start (the first counts what the
    /// previous run left).
    appended_rows: AtomicI64,
    forwarded_rows: AtomicI64,
    /// Every row with an id up to this one is acknowledged by QuestDB.
    forwarded: watch::Sender<i64>,
    /// The highest id the spool held at the start: every read waits for it once.
    left_at_start: i64,
    /// The forwarder's inbox, to hurry it when a read waits.
    forwarder: mpsc::Sender<Event>,
}

#[derive(Debug, Default)]
struct Pending {
    by_device: HashMap<DeviceUuid, i64>,
    forgotten_at: Option<Instant>,
}

impl Spool {
    fn new(rows_at_start: i64, left_at_start: i64, forwarder: mpsc::Sender<Event>) -> Self {
        Self {
            shared: Arc::new(Shared {
                pending: Mutex::default(),
                appended_rows: AtomicI64::new(rows_at_start),
                forwarded_rows: AtomicI64::new(0),
                forwarded: watch::Sender::new(0),
                left_at_start,
                forwarder,
            }),
        }
    }

    /// Records a synced batch, by device and id (before its uploads are answered), and tells the
    /// forwarder.
    fn spooled(&self, batch: &[(DeviceUuid, i64)]) {
        let mut pending = self.lock();
        for &(device, id) in batch {
            pending.by_device.insert(device, id);
        }
        drop(pending);
        self.shared
            .appended_rows
            .fetch_add(batch.len() as i64, Ordering::Relaxed);
        // Fails only once the forwarder has stopped, when nothing is left to wake.
        let _ = self.shared.forwarder.send(Event::Appended(batch.len()));
    }

    /// Records that QuestDB acknowledged `rows` more rows and every row through id `through`.
    pub(super) fn forwarded(&self, through: i64, rows: usize) {
        self.shared
            .forwarded_rows
            .fetch_add(rows as i64, Ordering::Relaxed);
        self.shared.forwarded.send_replace(through);
        let mut pending = self.lock();
        let due = pending
            .forgotten_at
            .is_none_or(|at| at.elapsed() >= FORGET_EVERY);
        if due {
            pending.by_device.retain(|_, id| *id > through);
            pending.forgotten_at = Some(Instant::now());
        }
    }

    /// Rows in the spool that QuestDB has not acknowledged.
    pub fn backlog(&self) -> i64 {
        // The forwarder may take a batch's rows before the sink counted them; never below 0.
        (self.shared.appended_rows.load(Ordering::Relaxed)
            - self.shared.forwarded_rows.load(Ordering::Relaxed))
        .max(0)
    }

    /// Waits until every row spooled for any of `devices` before this call (and whatever the
    /// previous run left) is acknowledged by QuestDB, at most as long as a read waits for
    /// QuestDB's apply ([`wait_for_mark`]).
    pub async fn settle(&self, devices: &[DeviceUuid]) {
        let target = {
            let pending = self.lock();
            devices
                .iter()
                .filter_map(|device| pending.by_device.get(device))
                .copied()
                .fold(self.shared.left_at_start, i64::max)
        };
        wait_for_mark(
            &self.shared.forwarded,
            target,
            // The forwarder may be lingering for more rows; this read should not wait for them.
            // (A failed send means it has stopped, and the wait ends at its bound.)
            || drop(self.shared.forwarder.send(Event::Hurry)),
            "spooled readings have not reached QuestDB yet; reading without them",
        )
        .await;
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Pending> {
        // Each update is one step, so the map stays consistent whatever a panicking holder did.
        self.shared
            .pending
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }
}

/// The batch writer's one sink with a spool: appends, and owns the forwarder, which stops (after
/// forwarding what it can within its bound) when the sink is dropped.
#[derive(Debug)]
pub struct SpoolSink {
    log: Arc<IngestLog>,
    ids: IdBlocks,
    spool: Spool,
    /// Dropped before the forwarder, so that it forwards every synced batch before it stops.
    sync: GroupSync,
    /// Held for its drop, which forwards what is left and stops it.
    _forwarder: Forwarder,
    /// The segment the last batch was written to, for its `when_durable`.
    written: Option<Arc<File>>,
}

impl SpoolSink {
    /// Opens (creating when missing) the spool in `data_dir` (segment files of `segment_bytes`),
    /// taking ids from the PostgreSQL pool `ids` (used on the runtime this is called from), and
    /// starts forwarding through `lanes`.
    pub(super) fn open(
        (data_dir, segment_bytes): (&Path, u64),
        ids: BoundedPool,
        lanes: Lanes,
    ) -> Result<(Self, Spool), StoreError> {
        std::fs::create_dir_all(data_dir).map_err(|source| StoreError::DataDir {
            path: data_dir.to_owned(),
            source,
        })?;
        // What the previous run left: the readings past the last watermark it recorded.
        let mut spooled = Vec::new();
        let mut forwarded = 0;
        let mut take = |entry: Entry| match entry {
            Entry::Reading { .. } => spooled.push(entry.id()),
            Entry::Consumed { through } => forwarded = through.max(forwarded),
            Entry::Forget { .. } => {}
        };
        let log = IngestLog::open(data_dir, segment_bytes, &mut take)?;
        let log = Arc::new(log);
        spooled.retain(|&id| id > forwarded);
        let rows = i64::try_from(spooled.len()).unwrap_or(i64::MAX);
        let highest = spooled.last().copied().unwrap_or(0);
        let reader = log.reader();
        if rows > 0 {
            tracing::info!(
                rows,
                "spooled readings left by the previous run go to QuestDB first"
            );
        }
        let inbox = forward::inbox();
        let spool = Spool::new(rows, highest, inbox.0.clone());
        let forwarder = Forwarder::start(
            Arc::clone(&log),
            (reader, forwarded),
            spool.clone(),
            lanes,
            inbox,
        )?;
        let sync = GroupSync::start()?;
        Ok((
            Self {
                log,
                ids: IdBlocks::new(ids)?,
                spool: spool.clone(),
                sync,
                _forwarder: forwarder,
                written: None,
            },
            spool,
        ))
    }

    /// Waits while the spool is full, at most [`ROOM_WAIT`].
    async fn wait_for_room(&self) -> Result<(), StoreError> {
        let started = Instant::now();
        while self.spool.backlog() > MAX_BACKLOG {
            if started.elapsed() >= ROOM_WAIT {
                return Err(StoreError::SpoolFull(self.spool.backlog()));
            }
            tokio::time::sleep(ROOM_POLL).await;
        }
        Ok(())
    }
}

#[async_trait]
impl ReadingSink for SpoolSink {
    async fn allocate_ids(&mut self, count: usize) -> Result<Vec<ReadingId>, StoreError> {
        self.ids.allocate(count).await
    }

    /// Blocks the writer's thread for the append (not its sync); nothing else runs there.
    async fn write(&mut self, batch: &[StoredReading]) -> Result<(), StoreError> {
        self.wait_for_room().await?;
        self.written = Some(self.log.append(batch, to_micros(chrono::Utc::now()))?);
        Ok(())
    }

    /// Once synced, the batch counts as spooled (reads of its devices wait for it) and the
    /// forwarder hears of it, before `then` answers its uploads.
    fn when_durable(&mut self, batch: &[StoredReading], then: Box<dyn FnOnce() + Send>) {
        let Some(segment) = self.written.take() else {
            // Only a written batch is handed here; one that was not is not answered 201.
            tracing::error!("a batch reported durable was not spooled");
            return;
        };
        let spooled: Vec<(DeviceUuid, i64)> = batch
            .iter()
            .map(|row| (row.device, i64::try_from(row.id.get()).unwrap_or(i64::MAX)))
            .collect();
        let spool = self.spool.clone();
        self.sync.appended(
            segment,
            Box::new(move || {
                spool.spooled(&spooled);
                then();
            }),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Whether `settle` for `devices` finishes within a short while.
    async fn settles(spool: &Spool, devices: &[DeviceUuid]) -> bool {
        tokio::time::timeout(Duration::from_millis(50), spool.settle(devices))
            .await
            .is_ok()
    }

    #[tokio::test]
    async fn a_read_of_a_device_with_spooled_rows_waits_until_they_are_forwarded() {
        let (events, inbox) = forward::inbox();
        let spool = Spool::new(0, 0, events);
        let device = DeviceUuid::generate();
        spool.spooled(&[(device, 4), (device, 5)]);
        assert!(
            matches!(inbox.try_recv(), Ok(Event::Appended(2))),
            "the forwarder hears of the batch"
        );

        assert!(!settles(&spool, &[device]).await, "waits while spooled");
        assert!(
            matches!(inbox.try_recv(), Ok(Event::Hurry)),
            "and hurries the forwarder"
        );
        spool.forwarded(4, 1);
        assert!(
            !settles(&spool, &[device]).await,
            "waits for every spooled row"
        );
        spool.forwarded(5, 1);
        assert!(settles(&spool, &[device]).await);
        assert_eq!(spool.backlog(), 0);
    }

    #[tokio::test]
    async fn a_read_of_devices_without_spooled_rows_never_waits() {
        let (events, _inbox) = forward::inbox();
        let spool = Spool::new(0, 0, events);
        spool.spooled(&[(DeviceUuid::generate(), 7)]);

        assert!(settles(&spool, &[DeviceUuid::generate()]).await);
        assert_eq!(spool.backlog(), 1);
    }

    #[tokio::test]
    async fn every_read_waits_once_for_what_the_previous_run_left() {
        let (events, _inbox) = forward::inbox();
        let spool = Spool::new(3, 9, events);
        let device = DeviceUuid::generate();

        assert_eq!(spool.backlog(), 3);
        assert!(!settles(&spool, &[device]).await);
        spool.forwarded(9, 3);
        assert!(settles(&spool, &[device]).await);
        assert_eq!(spool.backlog(), 0);
    }
}

//! The spool: the QuestDB pair's ingestion log, so an upload is answered once it is durable on
//! this process's own disk, before QuestDB has it (`--questdb-spool`).
//!
//! Without it, every upload waits for an ILP/HTTP round trip, and QuestDB's commit costs about
//! ten milliseconds whatever the batch's size (`bench/RESULTS.md`), which bounds what a process
//! can take in. With it, the batch writer's one sink ([`SpoolSink`]) appends each batch to the
//! ingestion log in the data directory (`ingest/`, [`ingest_log`](crate::store::ingest_log) —
//! the embedded store's, the same format, synced the same way, through the same
//! [`Appender`]) and answers; the [`Forwarder`](super::forward) sends what was appended on to
//! QuestDB in batches as large as the backlog and reports it consumed up to what QuestDB
//! acknowledged, which records that in the log and drops each segment QuestDB acknowledged all
//! of.
//!
//! The rules:
//! - **Durable before acknowledged.** A 201 means the reading is appended to the spool and the
//!   spool synced behind it (the [`Appender`]): it survives `kill -9` and a power loss of this
//!   host (on storage that honours fsync) and reaches QuestDB later, also when QuestDB was down
//!   when it was taken in.
//! - **A row leaves the spool only once QuestDB acknowledged it.** A crash before that sends it
//!   again at the next start; QuestDB's deduplication on `(at, device, dedup)` makes the second
//!   copy replace the first.
//! - **Reads after a 201 include it.** [`Spool::settle`] makes a read of a device wait until
//!   everything spooled for it before the read (its unconsumed rows, of which the log keeps
//!   the latest per device) is acknowledged by QuestDB (then [`Visibility`]
//!   waits for QuestDB to apply it); a read right after a start waits for whatever the previous
//!   run left. Reads of devices without such rows never wait.
//! - **The backlog is bounded.** Past [`MAX_BACKLOG`] rows the sink holds the batch writer back
//!   (and the uploads behind it), at most [`ROOM_WAIT`], then fails the batch.
//!
//! [`Visibility`]: super::Visibility

use std::path::Path;
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use async_trait::async_trait;

use super::forward::{self, Event, Forwarder, Lanes};
use super::ids::IdBlocks;
use super::spooled::{Progress, SpoolIngestion, SpooledRow};
use super::visibility::wait_for_mark;
use crate::domain::{DeviceUuid, ReadingId, StoredReading};
use crate::store::ingest_log::{Appender, Ingestion, Opened, UnconsumedRow, Watermark};
use crate::store::postgres::BoundedPool;
use crate::store::{ReadingSink, StoreError};

/// Spooled rows QuestDB has not acknowledged after which the sink holds appends back. On disk,
/// not in memory (about 200 bytes a row): at 20,000 uploads a second, a minute of QuestDB being
/// away.
pub(super) const MAX_BACKLOG: i64 = 1_000_000;
/// Longest wait of an append for room in a full spool before its batch fails.
const ROOM_WAIT: Duration = Duration::from_secs(10);
/// How often an append held back by a full spool looks again.
const ROOM_POLL: Duration = Duration::from_millis(5);

/// What the sink and the reads share. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Spool {
    /// The log and, per device, its latest spooled row QuestDB has not acknowledged.
    ingestion: Arc<SpoolIngestion>,
    progress: Arc<Progress>,
    /// The highest id the spool held at the start: every read waits for it once.
    left_at_start: i64,
    /// The forwarder's inbox, to hurry it when a read waits.
    forwarder: mpsc::Sender<Event>,
}

impl Spool {
    fn new(
        ingestion: Arc<SpoolIngestion>,
        progress: Arc<Progress>,
        opened: Opened,
        forwarder: mpsc::Sender<Event>,
    ) -> Self {
        Self {
            ingestion,
            progress,
            left_at_start: opened.highest,
            forwarder,
        }
    }

    /// Counts a synced batch of `rows` (its rows are unconsumed already, before its uploads are
    /// answered), and tells the forwarder.
    fn spooled(&self, rows: usize) {
        self.progress.appended(rows);
        // Fails only once the forwarder has stopped, when nothing is left to wake.
        let _ = self.forwarder.send(Event::Appended(rows));
    }

    /// Rows in the spool that QuestDB has not acknowledged.
    pub fn backlog(&self) -> i64 {
        self.progress.backlog()
    }

    /// Waits until every row spooled for any of `devices` before this call (and whatever the
    /// previous run left) is acknowledged by QuestDB, at most as long as a read waits for
    /// QuestDB's apply ([`wait_for_mark`]).
    pub async fn settle(&self, devices: &[DeviceUuid]) {
        let watermark = self.progress.watermark();
        let devices: Vec<[u8; 16]> = devices
            .iter()
            .map(|device| device.as_uuid().into_bytes())
            .collect();
        // Reading the unconsumed rows cannot fail (the watermark is at hand); were it to, the
        // read waits for what the previous run left only.
        let unconsumed = self
            .ingestion
            .view(|| Ok(*watermark.borrow()), &devices)
            .unwrap_or_default();
        let target = unconsumed
            .iter()
            .map(|row| row.id())
            .fold(self.left_at_start, i64::max);
        wait_for_mark(
            watermark,
            target,
            // The forwarder may be lingering for more rows; this read should not wait for them.
            // (A failed send means it has stopped, and the wait ends at its bound.)
            || drop(self.forwarder.send(Event::Hurry)),
            "spooled readings have not reached QuestDB yet; reading without them",
        )
        .await;
    }
}

/// The batch writer's one sink with a spool: appends, and owns the forwarder, which stops (after
/// forwarding what it can within its bound) when the sink is dropped.
#[derive(Debug)]
pub struct SpoolSink {
    ids: IdBlocks,
    spool: Spool,
    /// Dropped before the forwarder, so that it forwards every synced batch before it stops.
    appender: Appender<SpooledRow>,
    /// Held for its drop, which forwards what is left and stops it.
    _forwarder: Forwarder,
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
        let (ingestion, opened) = Ingestion::open(data_dir, segment_bytes, Watermark::Recorded)?;
        if opened.rows > 0 {
            tracing::info!(
                rows = opened.rows,
                "spooled readings left by the previous run go to QuestDB first"
            );
        }
        let progress = Arc::new(Progress::new(opened.rows));
        let inbox = forward::inbox();
        let spool = Spool::new(
            Arc::clone(&ingestion),
            Arc::clone(&progress),
            opened,
            inbox.0.clone(),
        );
        let forwarder = Forwarder::start(
            Arc::clone(&ingestion),
            opened.watermark,
            progress,
            lanes,
            inbox,
        )?;
        let notified = spool.clone();
        let appender = Appender::start(ingestion, Box::new(move |_, rows| notified.spooled(rows)))?;
        Ok((
            Self {
                ids: IdBlocks::new(ids)?,
                spool: spool.clone(),
                appender,
                _forwarder: forwarder,
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
        self.appender.append(batch)
    }

    /// Once synced, the batch counts as spooled (reads of its devices wait for it) and the
    /// forwarder hears of it, before `then` answers its uploads.
    fn when_durable(&mut self, batch: &[StoredReading], then: Box<dyn FnOnce() + Send>) {
        self.appender.when_durable(batch, then);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::{Measurements, Reading};

    /// A spool in a new directory (what a previous run left in `left` there first), its
    /// appender, and the forwarder's inbox.
    struct Spooling {
        _dir: tempfile::TempDir,
        spool: Spool,
        appender: Appender<SpooledRow>,
        inbox: mpsc::Receiver<Event>,
    }

    fn stored(id: u64, device: DeviceUuid) -> StoredReading {
        StoredReading {
            id: ReadingId::new(id).unwrap_or_else(|| panic!("receipt id {id}")),
            device,
            owner: None,
            at: chrono::Utc::now(),
            reading: Reading {
                values: Measurements::from_fn(|_| 1.0),
                pms_provider: "p".into(),
                temperature_provider: "t".into(),
                location: None,
                measured_at: None,
            },
        }
    }

    /// Appends `batch` and waits until it is durable.
    fn spool_batch(appender: &mut Appender<SpooledRow>, batch: &[StoredReading]) {
        appender
            .append(batch)
            .unwrap_or_else(|error| panic!("appends: {error}"));
        let (durable, waits) = std::sync::mpsc::channel();
        appender.when_durable(
            batch,
            Box::new(move || {
                let _ = durable.send(());
            }),
        );
        waits
            .recv_timeout(Duration::from_secs(10))
            .unwrap_or_else(|error| panic!("durable: {error}"));
    }

    fn spooling(left: &[StoredReading]) -> Spooling {
        let dir = tempfile::tempdir().unwrap_or_else(|error| panic!("temporary dir: {error}"));
        let open = || {
            Ingestion::open(dir.path(), 1 << 20, Watermark::Recorded)
                .unwrap_or_else(|error| panic!("the spool opens: {error}"))
        };
        if !left.is_empty() {
            let (ingestion, _) = open();
            let mut appender = Appender::start(ingestion, Box::new(|_, _| {}))
                .unwrap_or_else(|error| panic!("{error}"));
            spool_batch(&mut appender, left);
        }
        let (ingestion, opened) = open();
        let (events, inbox) = forward::inbox();
        let progress = Arc::new(Progress::new(opened.rows));
        let spool = Spool::new(Arc::clone(&ingestion), progress, opened, events);
        let notified = spool.clone();
        let appender = Appender::start(ingestion, Box::new(move |_, rows| notified.spooled(rows)))
            .unwrap_or_else(|error| panic!("{error}"));
        Spooling {
            _dir: dir,
            spool,
            appender,
            inbox,
        }
    }

    /// What the forwarder does once QuestDB acknowledged `rows` rows through `through`.
    fn forwarded(spool: &Spool, through: i64, rows: usize, devices: &[DeviceUuid]) {
        spool.progress.forwarded(through, rows);
        let devices: Vec<[u8; 16]> = devices.iter().map(|d| d.as_uuid().into_bytes()).collect();
        spool
            .ingestion
            .consumed(through, &devices)
            .unwrap_or_else(|error| panic!("prunes: {error}"));
    }

    /// Whether `settle` for `devices` finishes within a short while.
    async fn settles(spool: &Spool, devices: &[DeviceUuid]) -> bool {
        tokio::time::timeout(Duration::from_millis(50), spool.settle(devices))
            .await
            .is_ok()
    }

    #[tokio::test]
    async fn a_read_of_a_device_with_spooled_rows_waits_until_they_are_forwarded() {
        let mut spooling = spooling(&[]);
        let device = DeviceUuid::generate();
        spool_batch(
            &mut spooling.appender,
            &[stored(4, device), stored(5, device)],
        );
        let spool = &spooling.spool;
        assert!(
            matches!(spooling.inbox.try_recv(), Ok(Event::Appended(2))),
            "the forwarder hears of the batch"
        );

        assert!(!settles(spool, &[device]).await, "waits while spooled");
        assert!(
            matches!(spooling.inbox.try_recv(), Ok(Event::Hurry)),
            "and hurries the forwarder"
        );
        forwarded(spool, 4, 1, &[device]);
        assert!(
            !settles(spool, &[device]).await,
            "waits for every spooled row"
        );
        forwarded(spool, 5, 1, &[device]);
        assert!(settles(spool, &[device]).await);
        assert_eq!(spool.backlog(), 0);
    }

    #[tokio::test]
    async fn a_read_of_devices_without_spooled_rows_never_waits() {
        let mut spooling = spooling(&[]);
        spool_batch(&mut spooling.appender, &[stored(7, DeviceUuid::generate())]);

        assert!(settles(&spooling.spool, &[DeviceUuid::generate()]).await);
        assert_eq!(spooling.spool.backlog(), 1);
    }

    #[tokio::test]
    async fn every_read_waits_once_for_what_the_previous_run_left() {
        let left = DeviceUuid::generate();
        let spooling = spooling(&[stored(7, left), stored(8, left), stored(9, left)]);
        let spool = &spooling.spool;
        let device = DeviceUuid::generate();

        assert_eq!(spool.backlog(), 3);
        assert!(!settles(spool, &[device]).await);
        forwarded(spool, 9, 3, &[left]);
        assert!(settles(spool, &[device]).await);
        assert_eq!(spool.backlog(), 0);
    }
}

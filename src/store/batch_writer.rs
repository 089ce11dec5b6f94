//! The batch writer: the one owner of the [`ReadingSink`]s in a process.
//!
//! Uploads hand it a reading and a oneshot, then wait. It gathers readings until
//! [`BatchConfig::max_rows`] are buffered or [`BatchConfig::max_delay`] has passed since the first
//! (by default no wait: it flushes once nothing more is queued), hands the batch to an idle
//! *lane* — one sink on a thread of its own — which writes it in one transaction and answers every
//! waiting upload with the outcome (group commit). While every lane is busy, uploads queue up
//! and join the batch (up to `max_rows`) once one is free. Its rules:
//!
//! - **No acknowledgement before commit.** An upload gets its receipt only after its lane's sink
//!   said the batch is durable; a 201 never stands for data that can still be lost. A sink may
//!   say so later than its write returns ([`ReadingSink::when_durable`]: the embedded store syncs
//!   its log on a thread of its own), and the writer goes on with the next batch meanwhile.
//! - **All or nothing.** A failed write is retried ([`BatchConfig::retries`], with doubling
//!   backoff) by the same lane with the same ids, so a retry never duplicates; if it keeps
//!   failing, every upload of the batch is answered with [`WriteError::Failed`] and nothing of it
//!   is visible.
//! - **No small commit behind a sync.** While a written batch waits for its sync, the writer
//!   keeps gathering until the next batch is full (`max_rows`) or the sync is done: a batch
//!   written meanwhile would be durable only with the sync after, so writing a small one early
//!   saves no more than its own write time, and costs a commit of its own (whole pages written
//!   and synced). Measured with single uploads: 6 rows per commit became 17–20, and the CPU it
//!   freed served 7 % more uploads (`bench/RESULTS.md`, eleventh session). Batch uploads fill a
//!   batch at once and keep writing while the last one syncs. Meanwhile an upload wakes the
//!   writer only when it fills the batch ([`Queued`]): a wake-up per upload cost the writer about
//!   four context switches per commit, and the worker that woke it as many cross-CPU wake-ups.
//! - **Several flushes in flight, acknowledged in commit order per upload.** With more than one
//!   lane, one batch's round trip does not stall the next: batches may commit in another order
//!   than they were gathered, so uploads in flight at the same time are not ordered; but an upload
//!   sent after another one's receipt was answered is in a later batch, gathered after that commit,
//!   so it commits after it (a re-sent reading replaces the one acknowledged before).
//! - **Backpressure.** The queue in front of the writer is bounded; when it is full, uploads wait
//!   for room instead of piling up in memory.
//! - **Drain on shutdown.** The writer stops when the last [`BatchWriter`] handle is dropped, after
//!   every lane has written everything already queued; [`WriterGuard::join`] waits for that, for
//!   a bounded time, past which the writer is left behind to end with the process.
//!
//! Lanes run on threads of their own, each with a single-threaded runtime, because sinks are
//! synchronous (the ingestion log's file writes; the QuestDB client) and must not block the
//! server's workers; the embedded store has one sink (it appends to the ingestion log; the fold
//! writes SQLite behind it), as has the QuestDB spool, written on the gathering thread itself;
//! QuestDB without the spool has one sink per ILP sender, each on a lane of its own when there
//! are several.
//!
//! On `/metrics` it reports the readings waiting for it, each committed batch's size and the time
//! until it was durable, failed batches and retried writes.

use std::sync::atomic::{AtomicIsize, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use chrono::{DateTime, Utc};
use tokio::sync::{mpsc, oneshot, Notify};
use tokio::time::Instant;

use super::{ReadingSink, StoreError};
use crate::domain::{DeviceUuid, Reading, ReadingId, StoredReading};
use crate::metrics::ServerMetrics;

/// The batch writer's tuning.
#[derive(Debug, Clone, Copy)]
pub struct BatchConfig {
    /// Flush when this many rows are buffered.
    pub max_rows: usize,
    /// Flush at the latest this long after the first buffered row.
    pub max_delay: Duration,
    /// Capacity of the queue in front of the writer.
    pub queue: usize,
    /// Retries of a failed flush before giving up.
    pub retries: u32,
    /// Pause before the first retry; doubles per retry.
    pub retry_backoff: Duration,
}

/// What an upload learns once its batch is committed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Receipt {
    /// The reading's id.
    pub id: ReadingId,
    /// The time the reading is stored under.
    pub at: DateTime<Utc>,
}

/// Why a reading was not stored.
#[derive(Debug, Clone, thiserror::Error)]
pub enum WriteError {
    /// The batch could not be committed, retries included; nothing of it is stored. Holds the
    /// whole cause chain, for the log lines of the requests it fails (never for the client).
    #[error("the batch could not be committed: {0}")]
    Failed(String),
    /// The writer has stopped (the process is shutting down).
    #[error("the batch writer has stopped")]
    Stopped,
}

/// A flush slower than this is logged: every upload of the batch waited that long.
const SLOW_FLUSH: Duration = Duration::from_millis(100);

/// One upload waiting for its batch: one reading, or the readings of a batch upload (committed
/// together, in one transaction, or not at all).
struct Pending {
    device: DeviceUuid,
    readings: Vec<(DateTime<Utc>, Reading)>,
    reply: oneshot::Sender<Result<Vec<Receipt>, WriteError>>,
}

/// A handle that submits readings; cheap to clone. The writer stops when all handles are gone.
#[derive(Debug, Clone)]
pub struct BatchWriter {
    queue: mpsc::Sender<Pending>,
    queued: Arc<Queued>,
    metrics: Arc<ServerMetrics>,
}

/// The readings sent to the writer and not taken into a batch yet, and a wake-up for the moment
/// they fill the batch being gathered: while a sync is pending the gathering loop waits for that
/// or for the sync, not for every upload (module docs).
#[derive(Debug)]
struct Queued {
    /// Counted after the send, uncounted when taken: briefly negative when an upload is taken
    /// before its sender counted it.
    readings: AtomicIsize,
    /// How many would fill the batch the gathering loop waits with; `isize::MAX` while it does
    /// not wait.
    wake_at: AtomicIsize,
    fills: Notify,
}

impl Queued {
    fn sent(&self, readings: usize) {
        let now = self.readings.fetch_add(signed(readings), Ordering::SeqCst) + signed(readings);
        if now >= self.wake_at.load(Ordering::SeqCst) {
            // A permit is kept when nobody waits yet, so this is not lost between the gathering
            // loop's check and its wait.
            self.fills.notify_one();
        }
    }

    fn taken(&self, readings: usize) {
        self.readings.fetch_sub(signed(readings), Ordering::SeqCst);
    }

    /// Waits until `missing` more readings are queued or `other` completes.
    async fn fill_or(&self, missing: usize, other: impl std::future::Future<Output = ()>) {
        self.wake_at.store(signed(missing), Ordering::SeqCst);
        // Either this load sees a sender's count or that sender sees `wake_at` (both SeqCst).
        if self.readings.load(Ordering::SeqCst) < signed(missing) {
            tokio::select! {
                () = other => {}
                () = self.fills.notified() => {}
            }
        }
        self.wake_at.store(isize::MAX, Ordering::SeqCst);
    }
}

fn signed(count: usize) -> isize {
    isize::try_from(count).unwrap_or(isize::MAX)
}

/// The writer's threads; [`WriterGuard::join`] waits until they have drained and stopped.
#[derive(Debug)]
pub struct WriterGuard {
    thread: Option<JoinHandle<()>>,
    /// Closed when the writer's thread ends, however it ends.
    stopped: oneshot::Receiver<()>,
}

/// Batches written and not yet durable, and a wake-up each time one becomes durable.
#[derive(Debug, Default)]
struct Syncing {
    batches: AtomicUsize,
    done: Notify,
}

impl Syncing {
    /// Whether a written batch still waits for its sync.
    fn pending(&self) -> bool {
        self.batches.load(Ordering::Acquire) > 0
    }

    /// Counts a written batch as not yet durable until the returned guard is dropped: by its
    /// `when_durable` callback once it ran, or with the callback if a sink ever dropped it
    /// unrun, so the gathering loop never waits for a sync that will not come.
    fn written(self: &Arc<Self>) -> Unsynced {
        self.batches.fetch_add(1, Ordering::AcqRel);
        Unsynced(Arc::clone(self))
    }
}

/// A written batch not yet durable (see [`Syncing::written`]).
struct Unsynced(Arc<Syncing>);

impl Drop for Unsynced {
    fn drop(&mut self) {
        self.0.batches.fetch_sub(1, Ordering::AcqRel);
        // A permit is kept when nobody waits, so a wake-up between the gathering loop's check
        // and its wait is not lost.
        self.0.done.notify_one();
    }
}

/// A lane as the gathering loop sees it: where to hand it a batch.
type LaneQueue = mpsc::Sender<Vec<Pending>>;

/// Where the gathering loop's batches are written.
enum Dispatch {
    /// One sink, written on the gathering thread itself: with a single writer there is nothing
    /// to overlap, so a hand-off to a lane thread would only be one more wake-up per batch.
    Inline(Box<dyn ReadingSink>),
    /// Several lanes, each on a thread of its own; `idle` names the free ones.
    Lanes {
        lanes: Vec<LaneQueue>,
        idle: mpsc::Receiver<usize>,
    },
}

impl BatchWriter {
    /// Starts the writer: the gathering loop on a thread of its own, writing a single sink there
    /// too, or with several sinks one lane per sink, each on a thread of its own.
    pub fn start(
        sinks: Vec<Box<dyn ReadingSink>>,
        config: BatchConfig,
        metrics: Arc<ServerMetrics>,
    ) -> std::io::Result<(Self, WriterGuard)> {
        if sinks.is_empty() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "the batch writer needs at least one sink",
            ));
        }
        let (queue, receiver) = mpsc::channel(config.queue.max(1));
        let queued = Arc::new(Queued {
            readings: AtomicIsize::new(0),
            wake_at: AtomicIsize::new(isize::MAX),
            fills: Notify::new(),
        });
        let syncing = Arc::new(Syncing::default());
        let mut threads = Vec::with_capacity(sinks.len());
        let dispatch = match <[_; 1]>::try_from(sinks) {
            Ok([sink]) => Dispatch::Inline(sink),
            Err(sinks) => {
                let (idle, idle_lanes) = mpsc::channel(sinks.len());
                let mut lanes = Vec::with_capacity(sinks.len());
                for (index, sink) in sinks.into_iter().enumerate() {
                    let (jobs, batches) = mpsc::channel(1);
                    let runtime = single_threaded()?;
                    let (idle, metrics) = (idle.clone(), Arc::clone(&metrics));
                    let syncing = Arc::clone(&syncing);
                    threads.push(
                        std::thread::Builder::new()
                            .name(format!("airq-flush-{index}"))
                            .spawn(move || {
                                runtime.block_on(lane(
                                    index, batches, idle, sink, config, metrics, syncing,
                                ));
                            })?,
                    );
                    lanes.push(jobs);
                }
                for index in 0..lanes.len() {
                    // Every lane starts idle; the channel holds one slot per lane, so this never fails.
                    let _ = idle.try_send(index);
                }
                Dispatch::Lanes {
                    lanes,
                    idle: idle_lanes,
                }
            }
        };
        let runtime = single_threaded()?;
        let gather_metrics = Arc::clone(&metrics);
        let gather_queued = Arc::clone(&queued);
        let (stopping, stopped) = oneshot::channel::<()>();
        let thread = std::thread::Builder::new()
            .name("airq-batch-writer".into())
            .spawn(move || {
                // Dropped when this thread ends, a panic included: what `join` waits for.
                let _stopping = stopping;
                runtime.block_on(gather(
                    Intake {
                        queue: receiver,
                        queued: &gather_queued,
                        metrics: &gather_metrics,
                    },
                    dispatch,
                    config,
                    &syncing,
                ));
                for thread in threads {
                    if thread.join().is_err() {
                        tracing::error!("a batch writer lane panicked");
                    }
                }
                tracing::info!("batch writer drained and stopped");
            })?;
        Ok((
            Self {
                queue,
                queued,
                metrics,
            },
            WriterGuard {
                thread: Some(thread),
                stopped,
            },
        ))
    }

    /// Stores a reading of `device` taken at `at`; answers once it is committed (or not).
    pub async fn submit(
        &self,
        device: DeviceUuid,
        at: DateTime<Utc>,
        reading: Reading,
    ) -> Result<Receipt, WriteError> {
        let receipts = self.submit_all(device, vec![(at, reading)]).await?;
        receipts.into_iter().next().ok_or(WriteError::Stopped)
    }

    /// Stores readings of `device`, each with the time it is stored under, all in one
    /// transaction; answers with their receipts in the same order once they are committed (or
    /// that none of them is).
    pub async fn submit_all(
        &self,
        device: DeviceUuid,
        readings: Vec<(DateTime<Utc>, Reading)>,
    ) -> Result<Vec<Receipt>, WriteError> {
        let (reply, answer) = oneshot::channel();
        let count = readings.len();
        let queued = self.metrics.queue_readings(count);
        let pending = Pending {
            device,
            readings,
            reply,
        };
        self.queue
            .send(pending)
            .await
            .map_err(|_| WriteError::Stopped)?;
        self.queued.sent(count);
        queued.taken();
        answer.await.map_err(|_| WriteError::Stopped)?
    }
}

impl WriterGuard {
    /// Waits for the writer to drain its queue and stop (after every handle was dropped), at
    /// most `bound`; `false` if it had not stopped by then. A writer whose store makes no progress
    /// (a disk that hangs) would otherwise hold the process forever: past the bound it is left
    /// behind, and ends with the process. Its uploads in flight get no answer, which is all they
    /// lose: none of them was acknowledged, and what was is durable already.
    pub async fn join(mut self, bound: Duration) -> bool {
        if tokio::time::timeout(bound, &mut self.stopped)
            .await
            .is_err()
        {
            tracing::error!(
                ?bound,
                "the batch writer did not drain in time; stopping without it (uploads still in flight are not answered, none of them was acknowledged)"
            );
            return false;
        }
        if let Some(thread) = self.thread.take() {
            // It has ended: joining only collects its outcome.
            let joined = tokio::task::spawn_blocking(move || thread.join()).await;
            if !matches!(joined, Ok(Ok(()))) {
                tracing::error!("the batch writer thread panicked");
            }
        }
        true
    }
}

fn single_threaded() -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
}

/// The gathering loop's end of the queue.
struct Intake<'a> {
    queue: mpsc::Receiver<Pending>,
    queued: &'a Queued,
    metrics: &'a Arc<ServerMetrics>,
}

impl Intake<'_> {
    /// Adds an upload to the batch being gathered; how many readings it brought.
    fn take(&self, batch: &mut Vec<Pending>, pending: Pending) -> usize {
        let rows = pending.readings.len();
        self.metrics.readings_taken(rows);
        self.queued.taken(rows);
        batch.push(pending);
        rows
    }

    /// Takes what is queued into `batch` until it holds `max_rows`, without waiting; `false`
    /// once the queue is closed and empty.
    fn top_up(&mut self, batch: &mut Vec<Pending>, rows: &mut usize, max_rows: usize) -> bool {
        while *rows < max_rows {
            match self.queue.try_recv() {
                Ok(pending) => *rows += self.take(batch, pending),
                Err(mpsc::error::TryRecvError::Empty) => break,
                Err(mpsc::error::TryRecvError::Disconnected) => return false,
            }
        }
        true
    }
}

/// Gathers uploads into batches and writes each inline or hands it to an idle lane, until the
/// queue is closed and empty; then closes the lanes' queues, so they stop after their last batch.
async fn gather(
    mut intake: Intake<'_>,
    mut dispatch: Dispatch,
    config: BatchConfig,
    syncing: &Arc<Syncing>,
) {
    let max_rows = config.max_rows.max(1);
    let mut open = true;
    while open {
        let Some(first) = intake.queue.recv().await else {
            break;
        };
        let mut batch = Vec::with_capacity(max_rows.min(1024));
        let mut rows = intake.take(&mut batch, first);
        let deadline = Instant::now() + config.max_delay;
        while rows < max_rows {
            let next = match intake.queue.try_recv() {
                Ok(pending) => pending,
                Err(mpsc::error::TryRecvError::Disconnected) => {
                    open = false;
                    break;
                }
                // Not through the timer once the deadline has passed (always, by default): tokio
                // rounds a deadline up to its next millisecond tick, so even an elapsed one would
                // hold every batch up to a millisecond (measured: 1.2 ms of a 1.5 ms upload).
                Err(mpsc::error::TryRecvError::Empty) if Instant::now() >= deadline => break,
                Err(mpsc::error::TryRecvError::Empty) => {
                    match tokio::time::timeout_at(deadline, intake.queue.recv()).await {
                        Ok(Some(pending)) => pending,
                        Ok(None) => {
                            open = false;
                            break;
                        }
                        Err(_) => break,
                    }
                }
            };
            rows += intake.take(&mut batch, next);
        }
        // No small commit behind a sync (module docs): uploads queue up meanwhile, waking the
        // writer only once they fill the batch.
        while open && rows < max_rows && syncing.pending() {
            intake
                .queued
                .fill_or(max_rows - rows, syncing.done.notified())
                .await;
            open = intake.top_up(&mut batch, &mut rows, max_rows);
        }
        open = open && intake.top_up(&mut batch, &mut rows, max_rows);
        let (lanes, idle) = match &mut dispatch {
            Dispatch::Inline(sink) => {
                flush(sink.as_mut(), &mut batch, &config, intake.metrics, syncing).await;
                continue;
            }
            Dispatch::Lanes { lanes, idle } => (lanes, idle),
        };
        // Every lane busy: uploads queue up meanwhile (waking nobody) and top the batch up once
        // one is free.
        let lane = idle.recv().await;
        open = open && intake.top_up(&mut batch, &mut rows, max_rows);
        // No lane left (they all panicked): dropping the batch answers its uploads `Stopped`.
        let Some(queue) = lane.and_then(|index| lanes.get(index)) else {
            return;
        };
        // An idle lane has room for exactly this batch.
        let _ = queue.send(batch).await;
    }
}

/// One lane: writes each batch it is handed with its own sink, then reports itself idle.
async fn lane(
    index: usize,
    mut batches: mpsc::Receiver<Vec<Pending>>,
    idle: mpsc::Sender<usize>,
    mut sink: Box<dyn ReadingSink>,
    config: BatchConfig,
    metrics: Arc<ServerMetrics>,
    syncing: Arc<Syncing>,
) {
    while let Some(mut batch) = batches.recv().await {
        flush(sink.as_mut(), &mut batch, &config, &metrics, &syncing).await;
        // The gathering loop has stopped once this fails; the lane still drains its queue.
        let _ = idle.send(index).await;
    }
}

/// Writes `batch` (retrying) and answers every upload in it.
async fn flush(
    sink: &mut dyn ReadingSink,
    batch: &mut Vec<Pending>,
    config: &BatchConfig,
    metrics: &Arc<ServerMetrics>,
    syncing: &Arc<Syncing>,
) {
    let started = std::time::Instant::now();
    let count = batch.iter().map(|pending| pending.readings.len()).sum();
    let mut replies = Vec::with_capacity(batch.len());
    let outcome = match allocate(sink, count).await {
        Ok(ids) => {
            let mut ids = ids.into_iter();
            let mut rows = Vec::with_capacity(count);
            for pending in batch.drain(..) {
                replies.push((pending.reply, pending.readings.len()));
                for ((at, reading), id) in pending.readings.into_iter().zip(&mut ids) {
                    rows.push(StoredReading {
                        id,
                        device: pending.device,
                        at,
                        reading,
                    });
                }
            }
            write_with_retries(sink, &rows, config, metrics)
                .await
                .map(|()| rows)
        }
        Err(error) => {
            replies.extend(batch.drain(..).map(|pending| (pending.reply, 0)));
            Err(error)
        }
    };
    match outcome {
        Ok(rows) => {
            let receipts: Vec<Receipt> = rows
                .iter()
                .map(|row| Receipt {
                    id: row.id,
                    at: row.at,
                })
                .collect();
            let metrics = Arc::clone(metrics);
            let unsynced = syncing.written();
            sink.when_durable(
                &rows,
                Box::new(move || {
                    // Up to durability: every upload of the batch waited that long.
                    let elapsed = started.elapsed();
                    metrics.batch_committed(receipts.len(), elapsed);
                    if elapsed > SLOW_FLUSH {
                        tracing::warn!(
                            elapsed_ms = elapsed.as_millis() as u64,
                            rows = receipts.len(),
                            "slow batch flush"
                        );
                    }
                    let mut receipts = receipts.into_iter();
                    for (reply, taken) in replies {
                        // An upload whose client went away no longer listens; its rows are stored all the same.
                        let _ = reply.send(Ok(receipts.by_ref().take(taken).collect()));
                    }
                    drop(unsynced);
                }),
            );
        }
        Err(error) => {
            metrics.batch_failed();
            tracing::error!(error = %crate::telemetry::chain(&error), uploads = replies.len(), "batch not stored; uploads answered with 500");
            let failure = WriteError::Failed(crate::telemetry::chain(&error));
            for (reply, _) in replies {
                let _ = reply.send(Err(failure.clone()));
            }
        }
    }
}

/// `count` fresh receipt ids from the sink.
async fn allocate(sink: &mut dyn ReadingSink, count: usize) -> Result<Vec<ReadingId>, StoreError> {
    let ids = sink.allocate_ids(count).await?;
    if ids.len() == count {
        Ok(ids)
    } else {
        Err(StoreError::Corrupt(format!(
            "asked for {count} receipt ids, got {}",
            ids.len()
        )))
    }
}

async fn write_with_retries(
    sink: &mut dyn ReadingSink,
    rows: &[StoredReading],
    config: &BatchConfig,
    metrics: &ServerMetrics,
) -> Result<(), StoreError> {
    let mut backoff = config.retry_backoff;
    let mut attempt = 0;
    loop {
        match sink.write(rows).await {
            Ok(()) => return Ok(()),
            Err(error) if attempt < config.retries => {
                attempt += 1;
                metrics.flush_retried();
                tracing::warn!(error = %crate::telemetry::chain(&error), attempt, "batch write failed; retrying");
                tokio::time::sleep(backoff).await;
                backoff = backoff.saturating_mul(2);
            }
            Err(error) => return Err(error),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use super::*;
    use crate::domain::Measurements;

    /// The test sinks' receipt ids: `count` of them from `next` on.
    fn next_ids(next: &mut u64, count: usize) -> Vec<ReadingId> {
        let first = *next;
        *next += count as u64;
        (first..*next).filter_map(ReadingId::new).collect()
    }

    /// A sink that fails its first `failures` writes, then records what it is given.
    #[derive(Debug)]
    struct Flaky {
        failures: usize,
        written: Arc<Mutex<Vec<u64>>>,
        next: u64,
    }

    #[async_trait::async_trait]
    impl ReadingSink for Flaky {
        async fn allocate_ids(&mut self, count: usize) -> Result<Vec<ReadingId>, StoreError> {
            Ok(next_ids(&mut self.next, count))
        }

        async fn write(&mut self, batch: &[StoredReading]) -> Result<(), StoreError> {
            if self.failures > 0 {
                self.failures -= 1;
                return Err(StoreError::Corrupt("injected".into()));
            }
            let mut written = self
                .written
                .lock()
                .map_err(|_| StoreError::Corrupt("poisoned".into()))?;
            written.extend(batch.iter().map(|row| row.id.get()));
            Ok(())
        }
    }

    fn reading() -> Reading {
        Reading {
            values: Measurements::from_fn(|_| 1.0),
            pms_provider: "p".into(),
            temperature_provider: "t".into(),
            location: None,
            measured_at: None,
        }
    }

    fn config(retries: u32) -> BatchConfig {
        BatchConfig {
            max_rows: 4,
            max_delay: Duration::from_millis(5),
            queue: 16,
            retries,
            retry_backoff: Duration::from_millis(1),
        }
    }

    async fn submit_many(writer: &BatchWriter, count: usize) -> Vec<Result<Receipt, WriteError>> {
        let uploads =
            (0..count).map(|_| writer.submit(DeviceUuid::generate(), Utc::now(), reading()));
        futures_util::future::join_all(uploads).await
    }

    #[tokio::test]
    async fn a_retried_failure_is_invisible_to_uploads() {
        let written = Arc::new(Mutex::new(Vec::new()));
        let sink = Flaky {
            failures: 2,
            written: Arc::clone(&written),
            next: 1,
        };
        let (writer, guard) =
            BatchWriter::start(vec![Box::new(sink)], config(2), Arc::default()).expect("writer");
        let receipts = submit_many(&writer, 3).await;
        drop(writer);
        assert!(guard.join(Duration::from_secs(30)).await);
        let mut ids: Vec<u64> = receipts
            .into_iter()
            .map(|r| r.expect("stored").id.get())
            .collect();
        ids.sort_unstable();
        let mut stored = written.lock().expect("lock").clone();
        stored.sort_unstable();
        assert_eq!(ids, stored);
    }

    #[tokio::test]
    async fn a_lasting_failure_answers_every_upload_with_an_error() {
        let written = Arc::new(Mutex::new(Vec::new()));
        let sink = Flaky {
            failures: usize::MAX,
            written: Arc::clone(&written),
            next: 1,
        };
        let (writer, guard) =
            BatchWriter::start(vec![Box::new(sink)], config(1), Arc::default()).expect("writer");
        let receipts = submit_many(&writer, 6).await;
        drop(writer);
        assert!(guard.join(Duration::from_secs(30)).await);
        assert!(receipts
            .iter()
            .all(|r| matches!(r, Err(WriteError::Failed(_)))));
        assert!(written.lock().expect("lock").is_empty());
    }

    #[tokio::test]
    async fn dropping_the_last_handle_drains_the_queue_first() {
        let written = Arc::new(Mutex::new(Vec::new()));
        let sink = Flaky {
            failures: 0,
            written: Arc::clone(&written),
            next: 1,
        };
        let (writer, guard) =
            BatchWriter::start(vec![Box::new(sink)], config(0), Arc::default()).expect("writer");
        let receipts = submit_many(&writer, 10).await;
        drop(writer);
        assert!(guard.join(Duration::from_secs(30)).await);
        assert_eq!(receipts.iter().filter(|r| r.is_ok()).count(), 10);
        assert_eq!(written.lock().expect("lock").len(), 10);
    }

    /// A sink whose writes each wait (up to a generous bound) until `lanes` writes are in
    /// progress at once, recording the most it saw.
    #[derive(Debug)]
    struct Rendezvous {
        lanes: usize,
        state: Arc<(Mutex<(usize, usize)>, std::sync::Condvar)>,
        next: u64,
    }

    #[async_trait::async_trait]
    impl ReadingSink for Rendezvous {
        async fn allocate_ids(&mut self, count: usize) -> Result<Vec<ReadingId>, StoreError> {
            Ok(next_ids(&mut self.next, count))
        }

        async fn write(&mut self, _batch: &[StoredReading]) -> Result<(), StoreError> {
            let (lock, turn) = &*self.state;
            let mut state = lock
                .lock()
                .map_err(|_| StoreError::Corrupt("poisoned".into()))?;
            state.0 += 1;
            state.1 = state.1.max(state.0);
            turn.notify_all();
            let (mut state, _) = turn
                .wait_timeout_while(state, Duration::from_secs(10), |state| state.1 < self.lanes)
                .map_err(|_| StoreError::Corrupt("poisoned".into()))?;
            state.0 -= 1;
            Ok(())
        }
    }

    #[tokio::test]
    async fn two_lanes_keep_two_flushes_in_flight() {
        let state = Arc::new((Mutex::new((0, 0)), std::sync::Condvar::new()));
        let sinks: Vec<Box<dyn ReadingSink>> = (0..2u64)
            .map(|lane| {
                Box::new(Rendezvous {
                    lanes: 2,
                    state: Arc::clone(&state),
                    next: 1 + lane * 1_000,
                }) as Box<dyn ReadingSink>
            })
            .collect();
        let (writer, guard) = BatchWriter::start(sinks, config(0), Arc::default()).expect("writer");
        let receipts = submit_many(&writer, 8).await;
        drop(writer);
        assert!(guard.join(Duration::from_secs(30)).await);
        assert!(receipts.iter().all(Result::is_ok));
        assert_eq!(
            state.0.lock().expect("lock").1,
            2,
            "writes in progress at once"
        );
    }

    /// Held back `when_durable` callbacks: the sync the test has not let finish yet.
    type Held = Arc<Mutex<Vec<Box<dyn FnOnce() + Send>>>>;

    /// A sink that records the size of every batch written and holds back the first batch's
    /// durability until the test runs [`Held`]; later batches are durable at once.
    struct SlowFirstSync {
        written: Arc<Mutex<Vec<usize>>>,
        held: Held,
        holding: bool,
        next: u64,
    }

    impl std::fmt::Debug for SlowFirstSync {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.debug_struct("SlowFirstSync").finish_non_exhaustive()
        }
    }

    #[async_trait::async_trait]
    impl ReadingSink for SlowFirstSync {
        async fn allocate_ids(&mut self, count: usize) -> Result<Vec<ReadingId>, StoreError> {
            Ok(next_ids(&mut self.next, count))
        }

        async fn write(&mut self, batch: &[StoredReading]) -> Result<(), StoreError> {
            self.written
                .lock()
                .map_err(|_| StoreError::Corrupt("poisoned".into()))?
                .push(batch.len());
            Ok(())
        }

        fn when_durable(&mut self, _batch: &[StoredReading], then: Box<dyn FnOnce() + Send>) {
            match self.held.lock() {
                Ok(mut held) if std::mem::take(&mut self.holding) => held.push(then),
                _ => then(),
            }
        }
    }

    /// A writer over a [`SlowFirstSync`] flushing at `max_rows`, with what it wrote and held.
    fn slow_first_sync(
        max_rows: usize,
    ) -> (BatchWriter, WriterGuard, Arc<Mutex<Vec<usize>>>, Held) {
        let written = Arc::new(Mutex::new(Vec::new()));
        let held: Held = Arc::default();
        let sink = SlowFirstSync {
            written: Arc::clone(&written),
            held: Arc::clone(&held),
            holding: true,
            next: 1,
        };
        let config = BatchConfig {
            max_rows,
            max_delay: Duration::ZERO,
            ..config(0)
        };
        let (writer, guard) =
            BatchWriter::start(vec![Box::new(sink)], config, Arc::default()).expect("writer");
        (writer, guard, written, held)
    }

    /// Waits (up to a generous bound) until `count` batches were written; the batch sizes.
    async fn batches_written(written: &Mutex<Vec<usize>>, count: usize) -> Vec<usize> {
        for _ in 0..1_000 {
            let sizes = written.lock().expect("lock").clone();
            if sizes.len() >= count {
                return sizes;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        written.lock().expect("lock").clone()
    }

    /// A writer of batches of `max_rows` whose first upload is written and held in its sync.
    async fn first_upload_syncing(
        max_rows: usize,
    ) -> (
        BatchWriter,
        WriterGuard,
        Arc<Mutex<Vec<usize>>>,
        Held,
        tokio::task::JoinHandle<Result<Receipt, WriteError>>,
    ) {
        let (writer, guard, written, held) = slow_first_sync(max_rows);
        let first = upload(&writer);
        assert_eq!(batches_written(&written, 1).await, [1]);
        (writer, guard, written, held, first)
    }

    fn upload(writer: &BatchWriter) -> tokio::task::JoinHandle<Result<Receipt, WriteError>> {
        let writer = writer.clone();
        tokio::spawn(async move {
            writer
                .submit(DeviceUuid::generate(), Utc::now(), reading())
                .await
        })
    }

    #[tokio::test]
    async fn a_small_batch_waits_for_the_last_one_to_be_durable() {
        let (writer, guard, written, held, first) = first_upload_syncing(4).await;
        let (second, third) = (upload(&writer), upload(&writer));
        // Time for the writer to write them, which it must not while the first batch syncs.
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert_eq!(*written.lock().expect("lock"), [1]);
        for then in std::mem::take(&mut *held.lock().expect("lock")) {
            then();
        }
        for upload in [first, second, third] {
            upload.await.expect("task").expect("stored");
        }
        assert_eq!(*written.lock().expect("lock"), [1, 2]);
        drop(writer);
        assert!(guard.join(Duration::from_secs(30)).await);
    }

    #[tokio::test]
    async fn a_full_batch_is_written_while_the_last_one_syncs() {
        let (writer, guard, written, held, first) = first_upload_syncing(2).await;
        let (second, third) = (upload(&writer), upload(&writer));
        assert_eq!(batches_written(&written, 2).await, [1, 2]);
        second.await.expect("task").expect("stored");
        third.await.expect("task").expect("stored");
        for then in std::mem::take(&mut *held.lock().expect("lock")) {
            then();
        }
        first.await.expect("task").expect("stored");
        drop(writer);
        assert!(guard.join(Duration::from_secs(30)).await);
    }

    #[tokio::test]
    async fn a_batch_filled_one_upload_at_a_time_during_a_sync_is_written_before_it_ends() {
        let (writer, guard, written, held, first) = first_upload_syncing(3).await;
        let second = upload(&writer);
        // The writer takes the second upload and waits, two readings short of a batch.
        tokio::time::sleep(Duration::from_millis(50)).await;
        let third = upload(&writer);
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert_eq!(*written.lock().expect("lock"), [1], "not full yet");
        let fourth = upload(&writer);
        assert_eq!(batches_written(&written, 2).await, [1, 3]);
        for upload in [second, third, fourth] {
            upload.await.expect("task").expect("stored");
        }
        for then in std::mem::take(&mut *held.lock().expect("lock")) {
            then();
        }
        first.await.expect("task").expect("stored");
        drop(writer);
        assert!(guard.join(Duration::from_secs(30)).await);
    }
}

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

mod config;
mod gather;
mod intake;
mod lane;
mod receipt;
mod syncing;

use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use chrono::{DateTime, Utc};
use tokio::sync::{mpsc, oneshot};

pub use config::BatchConfig;
use gather::{gather, Dispatch};
use intake::{Intake, Queued, Upload};
use lane::lane;
pub use receipt::{Receipt, WriteError};
use syncing::Syncing;

use super::ReadingSink;
use crate::domain::{DeviceUuid, OwnerId, Reading};
use crate::metrics::ServerMetrics;

/// A handle that submits readings; cheap to clone. The writer stops when all handles are gone.
#[derive(Debug, Clone)]
pub struct BatchWriter {
    queue: mpsc::Sender<Upload>,
    queued: Arc<Queued>,
    metrics: Arc<ServerMetrics>,
}

/// The writer's threads; [`WriterGuard::join`] waits until they have drained and stopped.
#[derive(Debug)]
pub struct WriterGuard {
    thread: Option<JoinHandle<()>>,
    /// Closed when the writer's thread ends, however it ends.
    stopped: oneshot::Receiver<()>,
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
        let queued = Arc::new(Queued::new());
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

    /// Stores a reading of `device` (of `owner`) taken at `at`; answers once it is committed (or
    /// not).
    pub async fn submit(
        &self,
        (device, owner): (DeviceUuid, Arc<OwnerId>),
        at: DateTime<Utc>,
        reading: Reading,
    ) -> Result<Receipt, WriteError> {
        let receipts = self
            .submit_all((device, owner), vec![(at, reading)])
            .await?;
        receipts.into_iter().next().ok_or(WriteError::Stopped)
    }

    /// Stores readings of `device` (of `owner`), each with the time it is stored under, all in
    /// one transaction; answers with their receipts in the same order once they are committed
    /// (or that none of them is).
    pub async fn submit_all(
        &self,
        (device, owner): (DeviceUuid, Arc<OwnerId>),
        readings: Vec<(DateTime<Utc>, Reading)>,
    ) -> Result<Vec<Receipt>, WriteError> {
        let (reply, answer) = oneshot::channel();
        let count = readings.len();
        let queued = self.metrics.queue_readings(count);
        let upload = Upload {
            device,
            owner,
            readings,
            reply,
        };
        self.queue
            .send(upload)
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

#[cfg(test)]
mod tests;

//! The writer's intake: uploads queued in front of it, and the gathering loop's end of that
//! queue.
//!
//! Why a count beside the channel: while a sync is pending the gathering loop waits until the
//! queued uploads would fill its batch, not for every upload; a wake-up per upload cost the
//! writer about four context switches per commit ([`Queued`]).

use std::sync::atomic::{AtomicIsize, Ordering};
use std::sync::Arc;

use chrono::{DateTime, Utc};
use tokio::sync::{mpsc, oneshot, Notify};

use super::receipt::{Receipt, WriteError};
use crate::domain::{DeviceUuid, OwnerId, Reading};
use crate::metrics::ServerMetrics;

/// One upload waiting for its batch: one reading, or the readings of a batch upload (committed
/// together, in one transaction, or not at all).
pub(super) struct Upload {
    pub(super) device: DeviceUuid,
    pub(super) owner: Arc<OwnerId>,
    pub(super) readings: Vec<(DateTime<Utc>, Reading)>,
    pub(super) reply: oneshot::Sender<Result<Vec<Receipt>, WriteError>>,
}

/// The readings sent to the writer and not taken into a batch yet, and a wake-up for the moment
/// they fill the batch being gathered: while a sync is pending the gathering loop waits for that
/// or for the sync, not for every upload (module docs).
#[derive(Debug)]
pub(super) struct Queued {
    /// Counted after the send, uncounted when taken: briefly negative when an upload is taken
    /// before its sender counted it.
    readings: AtomicIsize,
    /// How many would fill the batch the gathering loop waits with; `isize::MAX` while it does
    /// not wait.
    wake_at: AtomicIsize,
    fills: Notify,
}

impl Queued {
    /// Nothing queued, nobody waiting.
    pub(super) fn new() -> Self {
        Self {
            readings: AtomicIsize::new(0),
            wake_at: AtomicIsize::new(isize::MAX),
            fills: Notify::new(),
        }
    }

    pub(super) fn sent(&self, readings: usize) {
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
    pub(super) async fn fill_or(
        &self,
        missing: usize,
        other: impl std::future::Future<Output = ()>,
    ) {
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

/// The gathering loop's end of the queue.
pub(super) struct Intake<'a> {
    pub(super) queue: mpsc::Receiver<Upload>,
    pub(super) queued: &'a Queued,
    pub(super) metrics: &'a Arc<ServerMetrics>,
}

impl Intake<'_> {
    /// Adds an upload to the batch being gathered; how many readings it brought.
    pub(super) fn take(&self, batch: &mut Vec<Upload>, upload: Upload) -> usize {
        let rows = upload.readings.len();
        self.metrics.readings_taken(rows);
        self.queued.taken(rows);
        batch.push(upload);
        rows
    }

    /// Takes what is queued into `batch` until it holds `max_rows`, without waiting; `false`
    /// once the queue is closed and empty.
    pub(super) fn top_up(
        &mut self,
        batch: &mut Vec<Upload>,
        rows: &mut usize,
        max_rows: usize,
    ) -> bool {
        while *rows < max_rows {
            match self.queue.try_recv() {
                Ok(upload) => *rows += self.take(batch, upload),
                Err(mpsc::error::TryRecvError::Empty) => break,
                Err(mpsc::error::TryRecvError::Disconnected) => return false,
            }
        }
        true
    }
}

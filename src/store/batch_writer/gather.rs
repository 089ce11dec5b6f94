//! The gathering loop: takes queued uploads into batches and writes each one inline or hands it
//! to an idle lane.
//!
//! This is where the module's batching rules are kept: a batch closes at `max_rows` or
//! `max_delay`, and while the last batch syncs it keeps growing instead of being written small
//! behind it.

use std::sync::Arc;

use tokio::sync::mpsc;
use tokio::time::Instant;

use super::config::BatchConfig;
use super::intake::{Intake, Upload};
use super::lane::flush;
use super::syncing::Syncing;
use crate::store::ReadingSink;

/// A lane as the gathering loop sees it: where to hand it a batch.
pub(super) type LaneQueue = mpsc::Sender<Vec<Upload>>;

/// Where the gathering loop's batches are written.
pub(super) enum Dispatch {
    /// One sink, written on the gathering thread itself: with a single writer there is nothing
    /// to overlap, so a hand-off to a lane thread would only be one more wake-up per batch.
    Inline(Box<dyn ReadingSink>),
    /// Several lanes, each on a thread of its own; `idle` names the free ones.
    Lanes {
        lanes: Vec<LaneQueue>,
        idle: mpsc::Receiver<usize>,
    },
}

/// Gathers uploads into batches and writes each inline or hands it to an idle lane, until the
/// queue is closed and empty; then closes the lanes' queues, so they stop after their last batch.
pub(super) async fn gather(
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
                Ok(upload) => upload,
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
                        Ok(Some(upload)) => upload,
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

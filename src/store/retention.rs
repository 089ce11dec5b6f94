//! The raw retention's background task: every so often, drops the raw readings measured before
//! the retention's cutoff ([`RawRetention::earliest`]) through a [`RawPruner`], chunk by chunk,
//! and stops when its guard is dropped.
//!
//! What it guarantees: rollups are never touched, so timelines and custom ranges answer for
//! periods past the retention; a failed chunk is logged and tried again at the next sweep;
//! nothing newer than the cutoff is ever dropped. The cutoff comes from the server's clock, so
//! tests move it with the manual clock.

use std::sync::Arc;
use std::time::Duration;

use tokio::task::JoinHandle;

use super::RawPruner;
use crate::clock::Clock;
use crate::domain::RawRetention;

/// Raw readings dropped per transaction: a short hold of the writer connection.
const CHUNK_ROWS: usize = 5_000;

/// Stops the pruning task when dropped.
#[derive(Debug)]
pub struct PrunerGuard {
    task: JoinHandle<()>,
}

impl Drop for PrunerGuard {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Starts sweeping every `every` (the first sweep at once), or nothing when `retention` keeps
/// every raw reading.
pub fn start(
    pruner: Arc<dyn RawPruner>,
    retention: RawRetention,
    clock: Arc<dyn Clock>,
    every: Duration,
) -> Option<PrunerGuard> {
    retention.days_kept()?;
    let task = tokio::spawn(async move {
        let mut ticks = tokio::time::interval(every);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            ticks.tick().await;
            let Some(before) = retention.earliest(clock.now()) else {
                return;
            };
            let mut dropped = 0;
            loop {
                match pruner.prune_raw(before, CHUNK_ROWS).await {
                    Ok(rows) => {
                        dropped += rows;
                        if rows < CHUNK_ROWS {
                            break;
                        }
                    }
                    Err(error) => {
                        tracing::warn!(error = %crate::telemetry::chain(&error), "pruning raw readings failed; the next sweep tries again");
                        break;
                    }
                }
            }
            if dropped > 0 {
                tracing::info!(dropped, %before, "raw readings past the retention dropped");
            }
        }
    });
    Some(PrunerGuard { task })
}

//! Read-your-writes on QuestDB without a wait on the write path.
//!
//! An ILP/HTTP flush into a WAL table is acknowledged once its transaction is committed to the
//! WAL and numbered by the table's sequencer; QuestDB applies it to the table (makes it readable)
//! a little later, on its own. The sink answers uploads at the acknowledgement and records it here
//! ([`Visibility::acknowledged`]): a generation number, and for each device of the batch the
//! latest generation that touched it. A tracker task follows QuestDB's apply progress
//! (`wal_tables()`: the writer's transaction against the sequencer's) and publishes the highest
//! generation known to be applied — at once when a read waits, otherwise once every
//! [`FORGET_EVERY`] to forget applied batches — so a write-only load costs QuestDB one query a
//! second, not one per batch.
//!
//! A read first calls [`Visibility::settle`] with the devices it reads: it waits only when one of
//! them has an acknowledged batch that may not be applied yet, and only until it is (at most
//! [`VISIBILITY_WAIT`]). What this guarantees:
//!
//! - a read in this process that starts after a 201 of this process includes that reading;
//! - a read of devices without such a batch never waits, so reads of other devices are not slowed
//!   by the upload load;
//! - across processes (replicas), a reading is readable once QuestDB applied it (`bench/RESULTS.md`
//!   measures that lag); the wait is per process because the acknowledgements are.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::Duration;

use tokio::sync::{watch, Notify};

use super::view_lag::ViewLag;
use super::TableName;
use crate::domain::{DeviceUuid, StoredReading};
use crate::store::postgres::BoundedPool;
use crate::store::StoreError;

/// Longest wait of a read for QuestDB to apply what this process acknowledged; past it the read
/// goes ahead (the data is durable either way) and a warning is logged.
const VISIBILITY_WAIT: Duration = Duration::from_secs(2);
/// First and longest pause between two looks at QuestDB's apply progress.
const POLL_FIRST: Duration = Duration::from_millis(1);
const POLL_MAX: Duration = Duration::from_millis(5);
/// Pause after a failed look (QuestDB unreachable); the next look comes with the next waiting
/// read or the next [`FORGET_EVERY`].
const POLL_FAILED: Duration = Duration::from_millis(100);
/// How often the tracker looks without a waiting read, which bounds the devices remembered.
const FORGET_EVERY: Duration = Duration::from_secs(1);

/// Acknowledged generations and which devices they touched; shared by the sinks, the reads and
/// the tracker. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Visibility {
    shared: Arc<Shared>,
    view_lag: ViewLag,
}

#[derive(Debug)]
struct Shared {
    state: Mutex<Acknowledged>,
    /// The highest generation known to be applied.
    applied: watch::Sender<u64>,
    /// Wakes the tracker: a read waits, or the last handle is gone.
    wake: Arc<Notify>,
}

#[derive(Debug, Default)]
struct Acknowledged {
    /// Generations handed out so far (one per acknowledged batch).
    generation: u64,
    /// Per device, the latest generation that touched it, while it may not be applied.
    pending: HashMap<DeviceUuid, u64>,
}

impl Drop for Shared {
    fn drop(&mut self) {
        self.wake.notify_one();
    }
}

impl Visibility {
    /// Starts the tracker of `table` on the current runtime, looking through `reads`, with the
    /// tracker of its quarter-hour view ([`ViewLag::start`]); they stop once every handle is
    /// dropped.
    pub async fn start(reads: BoundedPool, table: &TableName) -> Result<Self, StoreError> {
        let wake = Arc::new(Notify::new());
        let shared = Arc::new(Shared {
            state: Mutex::default(),
            applied: watch::Sender::new(0),
            wake: Arc::clone(&wake),
        });
        let query =
            format!("SELECT writerTxn, sequencerTxn FROM wal_tables() WHERE name = '{table}'");
        let view_lag = ViewLag::start(reads.clone(), table.as_str()).await?;
        tokio::spawn(track(Arc::downgrade(&shared), wake, reads, query));
        Ok(Self { shared, view_lag })
    }

    /// Records a batch QuestDB acknowledged: the devices of its readings, and (for the
    /// quarter-hour view, [`ViewLag`]) their times. Called before the batch's uploads are
    /// answered.
    pub fn acknowledged(&self, batch: &[StoredReading]) {
        self.view_lag
            .written(batch.iter().map(|row| row.at.timestamp_micros()));
        let mut state = self.lock();
        state.generation += 1;
        let generation = state.generation;
        for row in batch {
            state.pending.insert(row.device, generation);
        }
    }

    /// What the quarter-hour view may lack of this process's acknowledged batches.
    pub fn view_lag(&self) -> &ViewLag {
        &self.view_lag
    }

    /// Waits until every batch this process acknowledged for any of `devices` is readable (at
    /// most [`VISIBILITY_WAIT`]).
    pub async fn settle(&self, devices: &[DeviceUuid]) {
        let target = {
            let state = self.lock();
            if state.pending.is_empty() {
                return;
            }
            devices
                .iter()
                .filter_map(|device| state.pending.get(device))
                .max()
                .copied()
        };
        let Some(target) = target else {
            return;
        };
        wait_for_mark(
            &self.shared.applied,
            target,
            || self.shared.wake.notify_one(),
            "QuestDB has not applied an acknowledged batch yet; reading without it",
        )
        .await;
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Acknowledged> {
        // The state stays consistent whatever a panicking holder did: each update is one step.
        self.shared
            .state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }
}

/// Waits until `mark` reaches `target`, at most [`VISIBILITY_WAIT`]; when it has not yet, first
/// calls `nudge` (to wake whoever moves the mark). Past the bound the read goes ahead — what it
/// waits for is durable either way — and `late` is logged. The one wait of a read, for QuestDB's
/// apply here and for the spool's forwarder ([`super::Spool::settle`]).
pub(super) async fn wait_for_mark<T: PartialOrd + Copy>(
    mark: &watch::Sender<T>,
    target: T,
    nudge: impl FnOnce(),
    late: &'static str,
) {
    let mut reached = mark.subscribe();
    if *reached.borrow() >= target {
        return;
    }
    nudge();
    let waited = tokio::time::timeout(VISIBILITY_WAIT, reached.wait_for(|at| *at >= target));
    if waited.await.is_err() {
        tracing::warn!(wait_ms = VISIBILITY_WAIT.as_millis() as u64, "{late}");
    }
}

/// The tracker: when a read waits (or [`FORGET_EVERY`] passed) and generations are acknowledged
/// but not known applied, waits until QuestDB applied every transaction its sequencer had
/// numbered when it looked, then publishes them. A read that starts waiting meanwhile leaves a
/// wake-up behind, so it gets a look of its own right after.
async fn track(shared: Weak<Shared>, wake: Arc<Notify>, reads: BoundedPool, query: String) {
    loop {
        // Timing out only means it is time to forget what was applied meanwhile.
        let _ = tokio::time::timeout(FORGET_EVERY, wake.notified()).await;
        let Some(handle) = shared.upgrade() else {
            return;
        };
        let target = handle
            .state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .generation;
        if target <= *handle.applied.borrow() {
            continue;
        }
        drop(handle);
        // Every batch up to `target` was acknowledged before this look, so its transaction is at
        // most the sequencer's number seen now.
        match applied_through_now(&reads, &query, &shared).await {
            Ok(true) => {
                let Some(handle) = shared.upgrade() else {
                    return;
                };
                handle
                    .state
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .pending
                    .retain(|_, generation| *generation > target);
                handle.applied.send_replace(target);
            }
            Ok(false) => return,
            Err(error) => {
                tracing::warn!(error = %crate::telemetry::chain(&error), "could not follow QuestDB's WAL apply");
                tokio::time::sleep(POLL_FAILED).await;
            }
        }
    }
}

/// Waits until QuestDB's table writer reached the sequencer transaction current at the first
/// look; `Ok(false)` when every handle is gone meanwhile. The apply may lag for long, so each
/// look, not the wait, is bounded.
async fn applied_through_now(
    reads: &BoundedPool,
    query: &str,
    shared: &Weak<Shared>,
) -> Result<bool, StoreError> {
    let mut goal: Option<i64> = None;
    let mut pause = POLL_FIRST;
    loop {
        let look = reads
            .run(async |client| Ok(client.query_opt(query, &[]).await?))
            .await?;
        let Some(row) = look else {
            // The table is gone (dropped): nothing is left to wait for.
            return Ok(true);
        };
        let writer: Option<i64> = row.try_get(0)?;
        let sequencer: Option<i64> = row.try_get(1)?;
        let goal = *goal.get_or_insert(sequencer.unwrap_or(0));
        if writer.unwrap_or(0) >= goal {
            return Ok(true);
        }
        if shared.strong_count() == 0 {
            return Ok(false);
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(POLL_MAX);
    }
}

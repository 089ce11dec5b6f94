//! Read-your-writes over the quarter-hour view.
//!
//! Timelines, custom ranges and the current snapshot's hour sum QuestDB's materialized view
//! `{table}_15m` (schema 003), which QuestDB refreshes on its own, a little after it applied a
//! commit of the readings table. A read of the view alone could miss a reading this process
//! acknowledged a moment ago. So each acknowledged batch also records the UTC quarter hours its
//! readings fall in ([`ViewLag::written`]) under a generation number, and a tracker task, while
//! any are recorded, reads the readings table's sequencer transaction, waits until the view's
//! `refresh_base_table_txn` reaches it, and then publishes the generation acknowledged before that
//! first look as refreshed and forgets the quarter hours no later batch wrote into.
//!
//! A read ([`ViewLag::sources`]) that spans a quarter hour written by a batch the view may lack
//! sums the raw readings of those quarter hours and the view for the others. A read of a fleet
//! ([`WAIT_FROM`] devices or more) first waits for the tracker to see the view refreshed past
//! them, at most [`VIEW_WAIT`] (about one refresh: milliseconds when quiet, 0.3–2 s under 10,000
//! uploads a second on the bench machine): a quarter hour of a fleet's raw readings under such a
//! load costs seconds, one device's a millisecond (`bench/RESULTS.md`).
//!
//! What this guarantees, with [`super::Visibility`] (which makes the raw readings readable first):
//! a read in this process that starts after a 201 of this process includes that reading. Another
//! process's readings reach timelines once QuestDB refreshed the view with them. While the view is
//! `invalid` (an operator's `DROP PARTITION` invalidates it, until `REFRESH MATERIALIZED VIEW …
//! FULL`), and until it has caught up with the table once (QuestDB builds it over an existing
//! table in the background, showing its rows so far), reads sum raw readings only.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::Duration;

use tokio::sync::{watch, Notify};

use crate::store::postgres::BoundedPool;
use crate::store::StoreError;

/// A quarter hour in microseconds, the view's bucket.
pub(super) const QUARTER_MICROS: i64 = 15 * 60 * 1_000_000;
/// How often the tracker looks while quarter hours are recorded or the view cannot be read, and
/// otherwise (to notice an invalidated view).
const LOOK_PENDING: Duration = Duration::from_millis(100);
const LOOK_IDLE: Duration = Duration::from_secs(1);
/// Pauses between two reads of the view's progress while waiting for it.
const POLL_FIRST: Duration = Duration::from_millis(2);
const POLL_MAX: Duration = Duration::from_millis(20);
/// Longest wait of one look for the view; it starts again at the next look.
const LOOK_BOUND: Duration = Duration::from_secs(10);
/// Longest wait of a read for the view to hold what this process acknowledged before it.
const VIEW_WAIT: Duration = Duration::from_secs(1);
/// Reads of this many devices or more wait for the view rather than sum raw quarter hours.
pub(super) const WAIT_FROM: usize = 100;

/// The name of the quarter-hour view of `table`.
pub(super) fn view_name(table: &str) -> String {
    format!("{table}_15m")
}

/// The quarter hour (its index since the epoch) that the instant `micros` falls in.
pub(super) fn quarter_of(micros: i64) -> i64 {
    micros.div_euclid(QUARTER_MICROS)
}

/// Quarter hours written by acknowledged batches the view may not hold yet; shared by the sinks,
/// the reads and the tracker. Cheap to clone.
#[derive(Debug, Clone)]
pub struct ViewLag {
    shared: Arc<Shared>,
}

#[derive(Debug)]
struct Shared {
    state: Mutex<Recorded>,
    /// The highest generation the view is known to hold.
    refreshed: watch::Sender<u64>,
    wake: Arc<Notify>,
}

#[derive(Debug, Default)]
struct Recorded {
    /// Batches recorded so far.
    generation: u64,
    /// Per quarter hour, the latest generation that wrote into it.
    quarters: BTreeMap<i64, u64>,
    /// Whether the view can be read: it had caught up with the table at a look (or at the start)
    /// and was not `invalid` at the last one.
    valid: bool,
}

impl Drop for Shared {
    fn drop(&mut self) {
        self.wake.notify_one();
    }
}

impl ViewLag {
    /// Looks at `table`'s view once, then starts its tracker on the current runtime, looking
    /// through `reads`; the tracker stops once every handle is dropped.
    pub async fn start(reads: BoundedPool, table: &str) -> Result<Self, StoreError> {
        let looks = Looks {
            sequencer: format!("SELECT sequencerTxn FROM wal_tables() WHERE name = '{table}'"),
            view: format!(
                "SELECT view_status, refresh_base_table_txn FROM materialized_views() \
                 WHERE view_name = '{}'",
                view_name(table)
            ),
        };
        // A view QuestDB is still building (at its creation over an existing table, or after a
        // full refresh) shows its rows so far and `refreshing`: it counts only once it caught up.
        let goal = sequencer_txn(&reads, &looks).await?;
        let valid = view_status(&reads, &looks)
            .await?
            .is_some_and(|refreshed| refreshed >= goal);
        let wake = Arc::new(Notify::new());
        let shared = Arc::new(Shared {
            state: Mutex::new(Recorded {
                valid,
                ..Recorded::default()
            }),
            refreshed: watch::Sender::new(0),
            wake: Arc::clone(&wake),
        });
        tokio::spawn(track(Arc::downgrade(&shared), wake, reads, looks));
        Ok(Self { shared })
    }

    /// Records the instants (microseconds) of a batch QuestDB acknowledged. Called before the
    /// batch's uploads are answered.
    pub fn written(&self, instants: impl IntoIterator<Item = i64>) {
        let mut state = self.lock();
        state.generation += 1;
        let generation = state.generation;
        // A batch's readings mostly share a quarter hour: one map insert per run of them.
        let mut last = None;
        for quarter in instants.into_iter().map(quarter_of) {
            if last != Some(quarter) {
                state.quarters.insert(quarter, generation);
                last = Some(quarter);
            }
        }
    }

    /// How to read `[start, end)` (microseconds) for `devices` devices: whole quarter hours the
    /// view holds every reading acknowledged before this call of from the view, the rest from the
    /// raw readings. For [`WAIT_FROM`] devices or more, waits for the view first when it may lack
    /// such a reading (at most [`VIEW_WAIT`]).
    pub async fn sources(&self, start: i64, end: i64, devices: usize) -> Sources {
        // The tracker forgets a quarter hour in the same step as it publishes the generation
        // that covers it, so every quarter hour still recorded is one the view may lack.
        let quarters = quarter_of(start)..=quarter_of(end - 1);
        let needed = {
            let state = self.lock();
            if !state.valid {
                return Sources::split(start, end, None);
            }
            state
                .quarters
                .range(quarters.clone())
                .map(|(_, g)| *g)
                .max()
        };
        let Some(needed) = needed else {
            return Sources::split(start, end, Some(&[]));
        };
        if devices >= WAIT_FROM {
            let mut refreshed = self.shared.refreshed.subscribe();
            self.shared.wake.notify_one();
            let waited = tokio::time::timeout(VIEW_WAIT, refreshed.wait_for(|at| *at >= needed));
            if waited.await.is_ok() {
                return Sources::split(start, end, Some(&[]));
            }
        }
        // A quarter hour's latest generation may hide an earlier one this read needs: every one
        // still recorded is read raw.
        let pending: Vec<i64> = self
            .lock()
            .quarters
            .range(quarters)
            .map(|(q, _)| *q)
            .collect();
        Sources::split(start, end, Some(&pending))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Recorded> {
        // Each update is one step, so the state stays consistent whatever a panicking holder did.
        self.shared
            .state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }
}

/// Where a read of one range finds its readings: half-open microsecond ranges, ascending.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Sources {
    /// Runs of whole quarter hours to sum from the view.
    pub view: Vec<(i64, i64)>,
    /// Ranges to sum from the raw readings: the ends that are not whole quarter hours, and the
    /// quarter hours the view may lack (`pending`; every one when it is `None`).
    pub raw: Vec<(i64, i64)>,
}

impl Sources {
    fn split(start: i64, end: i64, pending: Option<&[i64]>) -> Self {
        let mut sources = Self::default();
        if start >= end {
            return sources;
        }
        let first =
            start.div_euclid(QUARTER_MICROS) + i64::from(start.rem_euclid(QUARTER_MICROS) != 0);
        let last = end.div_euclid(QUARTER_MICROS);
        let Some(pending) = pending.filter(|_| first < last) else {
            sources.raw.push((start, end));
            return sources;
        };
        sources.push_raw(start, first * QUARTER_MICROS);
        let mut run = first;
        for quarter in pending
            .iter()
            .copied()
            .filter(|q| (first..last).contains(q))
        {
            sources.push_view(run * QUARTER_MICROS, quarter * QUARTER_MICROS);
            sources.push_raw(quarter * QUARTER_MICROS, (quarter + 1) * QUARTER_MICROS);
            run = quarter + 1;
        }
        sources.push_view(run * QUARTER_MICROS, last * QUARTER_MICROS);
        sources.push_raw(last * QUARTER_MICROS, end);
        sources
    }

    fn push_view(&mut self, from: i64, to: i64) {
        push_merged(&mut self.view, from, to);
    }

    fn push_raw(&mut self, from: i64, to: i64) {
        push_merged(&mut self.raw, from, to);
    }
}

/// Appends `[from, to)` to ascending ranges, joined with the last when they touch; empty ones
/// are left out.
fn push_merged(ranges: &mut Vec<(i64, i64)>, from: i64, to: i64) {
    if from >= to {
        return;
    }
    match ranges.last_mut() {
        Some(last) if last.1 == from => last.1 = to,
        _ => ranges.push((from, to)),
    }
}

/// The tracker's two queries.
struct Looks {
    sequencer: String,
    view: String,
}

/// The tracker: at each look, notes the generation recorded so far and the readings table's
/// sequencer transaction, waits until the view refreshed past that transaction (every batch up to
/// the generation was acknowledged before, so its transaction is at most that one), then forgets
/// the quarter hours no later generation wrote.
async fn track(shared: Weak<Shared>, wake: Arc<Notify>, reads: BoundedPool, looks: Looks) {
    // The first look comes at once: the view may not be readable until it has made one.
    let mut pause = Duration::ZERO;
    loop {
        // Timing out only means it is time for the next look.
        let _ = tokio::time::timeout(pause, wake.notified()).await;
        let Some(handle) = shared.upgrade() else {
            return;
        };
        let target = {
            let state = handle.state.lock().unwrap_or_else(PoisonError::into_inner);
            state.generation
        };
        drop(handle);
        let refreshed = tokio::time::timeout(LOOK_BOUND, refreshed_through_now(&reads, &looks));
        let outcome = match refreshed.await {
            Ok(outcome) => outcome,
            Err(_) => Ok(Some(false)),
        };
        let Some(handle) = shared.upgrade() else {
            return;
        };
        let mut state = handle.state.lock().unwrap_or_else(PoisonError::into_inner);
        match outcome {
            Ok(Some(true)) => {
                state.valid = true;
                state.quarters.retain(|_, generation| *generation > target);
                handle.refreshed.send_if_modified(|held| {
                    let moved = *held < target;
                    *held = (*held).max(target);
                    moved
                });
            }
            // The view is too far behind to tell; what it is used for stays as it was.
            Ok(Some(false)) => {}
            Ok(None) => {
                if state.valid {
                    tracing::warn!(
                        "QuestDB's quarter-hour view is invalid; timelines read raw readings \
                         until it is refreshed (REFRESH MATERIALIZED VIEW … FULL)"
                    );
                }
                state.valid = false;
            }
            Err(error) => {
                tracing::warn!(error = %crate::telemetry::chain(&error), "could not follow QuestDB's view refresh");
                state.valid = false;
            }
        }
        pause = if state.quarters.is_empty() && state.valid {
            LOOK_IDLE
        } else {
            LOOK_PENDING
        };
    }
}

/// `Some(true)` once the view refreshed through the sequencer transaction current at the first
/// look, `None` when the view is invalid (or missing).
async fn refreshed_through_now(
    reads: &BoundedPool,
    looks: &Looks,
) -> Result<Option<bool>, StoreError> {
    let goal = sequencer_txn(reads, looks).await?;
    let mut pause = POLL_FIRST;
    loop {
        let Some(refreshed) = view_status(reads, looks).await? else {
            return Ok(None);
        };
        if refreshed >= goal {
            return Ok(Some(true));
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(POLL_MAX);
    }
}

/// The readings table's latest transaction numbered by its sequencer.
async fn sequencer_txn(reads: &BoundedPool, looks: &Looks) -> Result<i64, StoreError> {
    Ok(reads
        .run(async |client| Ok(client.query_opt(looks.sequencer.as_str(), &[]).await?))
        .await?
        .map(|row| row.try_get::<_, Option<i64>>(0))
        .transpose()?
        .flatten()
        .unwrap_or(0))
}

/// The readings table's transaction the view is refreshed through (-1 before its first
/// refresh), `None` when the view is invalid (or missing).
async fn view_status(reads: &BoundedPool, looks: &Looks) -> Result<Option<i64>, StoreError> {
    let Some(row) = reads
        .run(async |client| Ok(client.query_opt(looks.view.as_str(), &[]).await?))
        .await?
    else {
        return Ok(None);
    };
    // `refreshing` is a valid view in the middle of a refresh (most of the time under a steady
    // load); only `invalid` means its rows cannot be trusted.
    let status: Option<String> = row.try_get(0)?;
    if status.is_none_or(|status| status == "invalid") {
        return Ok(None);
    }
    Ok(Some(row.try_get::<_, Option<i64>>(1)?.unwrap_or(-1)))
}

#[cfg(test)]
mod tests {
    use super::*;

    const Q: i64 = QUARTER_MICROS;

    #[test]
    fn whole_quarters_come_from_the_view_and_the_ends_from_raw_readings() {
        let sources = Sources::split(10 * Q + 5, 14 * Q + 7, Some(&[]));
        assert_eq!(sources.view, vec![(11 * Q, 14 * Q)]);
        assert_eq!(
            sources.raw,
            vec![(10 * Q + 5, 11 * Q), (14 * Q, 14 * Q + 7)]
        );
    }

    #[test]
    fn pending_quarters_are_read_raw_and_split_the_view_runs() {
        let sources = Sources::split(10 * Q, 16 * Q, Some(&[9, 12, 13, 15, 16]));
        assert_eq!(sources.view, vec![(10 * Q, 12 * Q), (14 * Q, 15 * Q)]);
        assert_eq!(sources.raw, vec![(12 * Q, 14 * Q), (15 * Q, 16 * Q)]);
    }

    #[test]
    fn without_a_valid_view_or_a_whole_quarter_everything_is_raw() {
        assert_eq!(
            Sources::split(10 * Q, 16 * Q, None).raw,
            vec![(10 * Q, 16 * Q)]
        );
        let short = Sources::split(10 * Q + 1, 11 * Q + 5, Some(&[]));
        assert!(short.view.is_empty());
        assert_eq!(short.raw, vec![(10 * Q + 1, 11 * Q + 5)]);
    }

    #[test]
    fn quarters_before_the_epoch_round_down() {
        assert_eq!(quarter_of(-1), -1);
        let sources = Sources::split(-2 * Q - 1, Q, Some(&[]));
        assert_eq!(sources.view, vec![(-2 * Q, Q)]);
        assert_eq!(sources.raw, vec![(-2 * Q - 1, -2 * Q)]);
    }
}

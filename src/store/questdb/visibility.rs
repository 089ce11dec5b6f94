//! Read-your-writes on QuestDB without a wait on the write path: what this process acknowledged,
//! and how much of it QuestDB has made readable, in the table and in its views.
//!
//! An ILP/HTTP flush into a WAL table is acknowledged once its transaction is committed to the
//! WAL and numbered by the table's sequencer; QuestDB applies it to the table (makes it readable)
//! a little later, refreshes the materialized view `{table}_15m` from it later still, and the
//! hour and day views `{table}_1h`, `{table}_1d` from that, all on its own. The sink answers
//! uploads at the acknowledgement and records it here ([`Visibility::acknowledged`]): a
//! generation number, for each device of the batch the latest generation that touched it, and
//! for each UTC quarter hour it wrote into the same.
//!
//! One tracker task follows all of it with one query (`wal_tables()` joined with
//! `materialized_views()`, a row per table and view): at a look it notes the generation
//! acknowledged so far and the sequencer's transaction — every batch up to that generation has
//! its transaction at most there — and publishes the generation as *applied* once the table's
//! writer reached the transaction, as *refreshed* once the quarter-hour view's
//! `refresh_base_table_txn` did; then, as *settled*, a refreshed generation once both coarse
//! views' `refresh_base_table_txn` reached the quarter-hour view's own transaction seen after it.
//! The owner views (`{table}_o15m`, `_o1h`, `_o1d`) are followed one step further: a settled
//! generation is *owned* once each owner view's `refresh_base_table_txn` reached its device
//! view's own transaction seen after it, with the periods the device views had derived then.
//! Devices are forgotten once applied, quarter hours once settled and owned, in the same locked
//! step. It
//! looks every few milliseconds while a read waits or an apply or refresh goal is open, every
//! [`LOOK_PENDING`] while quarter hours are recorded, and otherwise every [`LOOK_IDLE`] (to
//! notice an invalidated view), so a write-only load costs QuestDB a few queries a second, not
//! one per batch.
//!
//! A read first calls [`Visibility::settle`] with its devices: it waits only when one of them has
//! an acknowledged batch that may not be applied yet, and only until it is (at most
//! [`VISIBILITY_WAIT`]). A read of sums then asks [`Visibility::coverage`] what the views hold:
//! the quarter hours a batch the quarter-hour view may lack wrote into are summed from the raw
//! readings — or, for a fleet ([`WAIT_FROM`] devices or more), whose raw quarter hour under a
//! heavy load costs seconds, it first waits for the view (at most [`VIEW_WAIT`]) — and the hours
//! and days around quarter hours not settled yet, or past how far the coarse views derived
//! (`refresh_period_hi`), are read from finer sources. What this guarantees:
//!
//! - a read in this process that starts after a 201 of this process includes that reading;
//! - a read of devices without such a batch never waits for the apply, so reads of other devices
//!   are not slowed by the upload load;
//! - across processes (replicas), a reading is readable once QuestDB applied it, and reaches
//!   timelines once QuestDB refreshed the views with it (`bench/RESULTS.md` measures the lags);
//! - while the quarter-hour view is `invalid` (an operator's `DROP PARTITION` invalidates it,
//!   until `REFRESH MATERIALIZED VIEW … FULL`), and until it has caught up with the table once
//!   (QuestDB builds it over an existing table in the background, showing its rows so far), sums
//!   come from raw readings only, after a read waited for the view at most [`VIEW_WAIT`] (raw
//!   readings past the raw retention are gone: a process's first read must not find the view
//!   "not caught up yet" because of its own start's `SET TTL`); likewise the coarse views are read only once both caught up
//!   with the quarter-hour view, and not while either is `invalid`.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::time::Duration;

use chrono::NaiveDateTime;
use tokio::sync::{watch, Notify};

use super::view_ranges::{
    quarter_of, CoarseCoverage, Coverage, Derived, Grain, OwnerCoverage, QuarterCoverage,
};
use super::TableName;
use crate::domain::{DeviceUuid, StoredReading};
use crate::store::postgres::BoundedPool;
use crate::store::StoreError;

/// Longest wait of a read for QuestDB to apply what this process acknowledged; past it the read
/// goes ahead (the data is durable either way) and a warning is logged.
const VISIBILITY_WAIT: Duration = Duration::from_secs(2);
/// Longest wait of a fleet's read for the view to hold what this process acknowledged before it;
/// past it the quarter hours the view may lack are read raw.
const VIEW_WAIT: Duration = Duration::from_secs(1);
/// Reads of this many devices or more wait for the view rather than sum raw quarter hours.
const WAIT_FROM: usize = 100;
/// Pauses between looks while a goal is open: from the first to the longest, doubling; a read
/// that starts waiting brings the next look forward to the first pause. The apply takes
/// milliseconds, the view's refresh up to seconds under load.
const POLL_FIRST: Duration = Duration::from_millis(1);
const POLL_APPLY_MAX: Duration = Duration::from_millis(5);
const POLL_VIEW_MAX: Duration = Duration::from_millis(20);
/// Pause between looks while quarter hours are recorded (or the view cannot be read), without an
/// open goal, and otherwise.
const LOOK_PENDING: Duration = Duration::from_millis(100);
const LOOK_IDLE: Duration = Duration::from_secs(1);
/// Quarter hours in a UTC day.
const QUARTERS_A_DAY: i64 = 96;

/// Acknowledged batches, and what of them QuestDB made readable; shared by the sinks, the reads
/// and the tracker. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Visibility {
    shared: Arc<Shared>,
}

#[derive(Debug)]
struct Shared {
    state: Mutex<Acknowledged>,
    /// The highest generation known to be applied to the table.
    applied: watch::Sender<u64>,
    /// The highest generation the quarter-hour view is known to hold.
    refreshed: watch::Sender<u64>,
    /// Whether the quarter-hour view can be read: it had caught up with the table at a look (or
    /// at the start) and was not `invalid` at the last one. Changed only under `state`'s lock,
    /// in the same step as what goes with it; reads that wait for it watch it.
    valid: watch::Sender<bool>,
    /// Wakes the tracker: a read waits, or the last handle is gone.
    wake: Arc<Notify>,
}

#[derive(Debug, Default)]
struct Acknowledged {
    /// Generations handed out so far (one per acknowledged batch).
    generation: u64,
    /// Per device, the latest generation that touched it, while it may not be applied.
    devices: HashMap<DeviceUuid, u64>,
    /// Per quarter hour, the latest generation that wrote into it, while a view may lack it.
    quarters: BTreeMap<i64, u64>,
    /// The highest generation the hour and day views are known to hold (at most `refreshed`).
    settled: u64,
    /// How far the hour and day views derived passed periods, while they can be read: they had
    /// caught up with the quarter-hour view at a look (or at the start) and neither was
    /// `invalid` at the last one.
    coarse: Option<Derived>,
    /// The highest generation the owner views are known to hold (at most `settled`).
    owned: u64,
    /// How far the device hour and day views had derived when the owner views last caught up
    /// with them, while the owner views can be read.
    owner_derived: Option<Derived>,
    /// Whether the owner views were there and not `invalid` at the last look: only then do
    /// quarter hours stay until the owner views hold them.
    owner_views: bool,
}

impl Acknowledged {
    /// Forgets the quarter hours every view holds. While the coarse views cannot be read their
    /// quarter hours stay too (at most one entry per quarter hour written into): when the views
    /// catch up, only what they are known to hold is forgotten.
    fn forget_held(&mut self) {
        let held = if self.owner_views {
            self.settled.min(self.owned)
        } else {
            self.settled
        };
        self.quarters.retain(|_, generation| *generation > held);
    }
}

impl Drop for Shared {
    fn drop(&mut self) {
        self.wake.notify_one();
    }
}

impl Visibility {
    /// Looks at `table` and its view once, then starts the tracker on the current runtime,
    /// looking through `reads`; it stops once every handle is dropped.
    pub async fn start(reads: BoundedPool, table: &TableName) -> Result<Self, StoreError> {
        let look = Look::of(table);
        // A view QuestDB is still building (at its creation over an existing table, or after a
        // full refresh) shows its rows so far and `refreshing`: it counts only once it caught up.
        let marks = look.look(&reads).await?;
        let view_valid = marks
            .view
            .is_some_and(|view| view.refreshed >= marks.sequencer);
        let coarse = marks
            .view
            .zip(marks.coarse)
            .filter(|(view, coarse)| view_valid && coarse.refreshed >= view.sequencer)
            .map(|(_, coarse)| coarse.derived);
        let wake = Arc::new(Notify::new());
        let shared = Arc::new(Shared {
            state: Mutex::new(Acknowledged {
                coarse,
                ..Acknowledged::default()
            }),
            applied: watch::Sender::new(0),
            refreshed: watch::Sender::new(0),
            valid: watch::Sender::new(view_valid),
            wake: Arc::clone(&wake),
        });
        tokio::spawn(track(Arc::downgrade(&shared), wake, reads, look));
        Ok(Self { shared })
    }

    /// Records a batch QuestDB acknowledged: the devices of its readings and the quarter hours
    /// they fall in. Called before the batch's uploads are answered.
    pub fn acknowledged(&self, batch: &[StoredReading]) {
        let mut state = lock(&self.shared);
        state.generation += 1;
        let generation = state.generation;
        // A batch's readings mostly share a quarter hour: one map insert per run of them.
        let mut last_quarter = None;
        for row in batch {
            state.devices.insert(row.device, generation);
            let quarter = quarter_of(row.at.timestamp_micros());
            if last_quarter != Some(quarter) {
                state.quarters.insert(quarter, generation);
                last_quarter = Some(quarter);
            }
        }
    }

    /// Waits until every batch this process acknowledged for any of `devices` is readable (at
    /// most [`VISIBILITY_WAIT`]).
    pub async fn settle(&self, devices: &[DeviceUuid]) {
        let target = {
            let state = lock(&self.shared);
            if state.devices.is_empty() {
                return;
            }
            devices
                .iter()
                .filter_map(|device| state.devices.get(device))
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

    /// What the views hold of `[start, end)` (microseconds) for a read of `devices` devices:
    /// every reading acknowledged before this call, except in the quarter hours and periods
    /// [`Coverage`] lists. For [`WAIT_FROM`] devices or more, waits for the quarter-hour view
    /// first when it may lack such a reading (at most [`VIEW_WAIT`]).
    pub(super) async fn coverage(&self, start: i64, end: i64, devices: usize) -> Coverage {
        // Raw readings cannot stand in for the view past the raw retention: a read first waits
        // for a view not known to be caught up (a process's first moments, a view QuestDB is
        // still building), at most VIEW_WAIT.
        if !*self.shared.valid.borrow() {
            let mut valid = self.shared.valid.subscribe();
            self.shared.wake.notify_one();
            // Past the bound the read sums the raw readings that are kept.
            let _ = tokio::time::timeout(VIEW_WAIT, valid.wait_for(|valid| *valid)).await;
        }
        // A read may count a whole UTC day around its ends (less what lies outside): what the
        // coarse views may lack is asked of those days too.
        let quarters = quarter_of(start).div_euclid(QUARTERS_A_DAY) * QUARTERS_A_DAY
            ..(quarter_of(end - 1).div_euclid(QUARTERS_A_DAY) + 1) * QUARTERS_A_DAY;
        let needed = {
            let state = lock(&self.shared);
            if !*self.shared.valid.borrow() {
                return Coverage::default();
            }
            let refreshed = *self.shared.refreshed.borrow();
            state
                .quarters
                .range(quarters.clone())
                .map(|(_, generation)| *generation)
                .filter(|generation| *generation > refreshed)
                .max()
        };
        if let Some(needed) = needed.filter(|_| devices >= WAIT_FROM) {
            let mut refreshed = self.shared.refreshed.subscribe();
            self.shared.wake.notify_one();
            // Past the bound the quarter hours the view may lack are read raw.
            let _ = tokio::time::timeout(VIEW_WAIT, refreshed.wait_for(|at| *at >= needed)).await;
        }
        let state = lock(&self.shared);
        if !*self.shared.valid.borrow() {
            return Coverage::default();
        }
        // A quarter hour's latest generation may hide an earlier one this read needs: every one
        // recorded past a view's mark is one that view may lack.
        let later_than = |mark: u64| -> BTreeSet<i64> {
            state
                .quarters
                .range(quarters.clone())
                .filter(|(_, generation)| **generation > mark)
                .map(|(quarter, _)| *quarter)
                .collect()
        };
        let pending = later_than(*self.shared.refreshed.borrow());
        let coarse = state.coarse.map(|derived| CoarseCoverage {
            unsettled: later_than(state.settled),
            derived,
        });
        let owners = state
            .owner_derived
            .filter(|_| coarse.is_some())
            .map(|derived| OwnerCoverage {
                unheld: later_than(state.owned),
                derived,
            });
        Coverage {
            quarters: Some(QuarterCoverage { pending, coarse }),
            owners,
        }
    }
}

/// Publishes whether the quarter-hour view can be read, waking the reads that wait for it when
/// that changes.
fn set_valid(valid: &watch::Sender<bool>, to: bool) {
    valid.send_if_modified(|held| std::mem::replace(held, to) != to);
}

fn lock(shared: &Shared) -> MutexGuard<'_, Acknowledged> {
    // Each update is one step, so the state stays consistent whatever a panicking holder did.
    shared.state.lock().unwrap_or_else(PoisonError::into_inner)
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

/// The one query of a look: the table's and its views' WAL marks, one row each.
#[derive(Debug, Clone)]
struct Look {
    sql: String,
    table: String,
    view: String,
    coarse: [String; 2],
    /// The owner views, in the order of [`Grain::ALL`].
    owners: [String; 3],
}

impl Look {
    fn of(table: &TableName) -> Self {
        let table = table.as_str();
        let [view, hour, day] = Grain::ALL.map(|grain| grain.view_of(table));
        let coarse = [hour, day];
        let owners = Grain::ALL.map(|grain| grain.owner_view_of(table));
        let sql = format!(
            "SELECT w.name, w.sequencerTxn, w.writerTxn, v.view_status, \
             v.refresh_base_table_txn, v.refresh_period_hi \
             FROM wal_tables() w LEFT JOIN materialized_views() v ON v.view_name = w.name \
             WHERE w.name IN ('{table}', '{view}', '{}', '{}', '{}', '{}', '{}')",
            coarse[0], coarse[1], owners[0], owners[1], owners[2]
        );
        Self {
            sql,
            table: table.to_owned(),
            view,
            coarse,
            owners,
        }
    }

    /// One look; a missing table (dropped) counts as everything applied and no view.
    async fn look(&self, reads: &BoundedPool) -> Result<Marks, StoreError> {
        let rows = reads
            .run(async |client| Ok(client.query(self.sql.as_str(), &[]).await?))
            .await?;
        let mut marks = Marks {
            sequencer: 0,
            writer: i64::MAX,
            view: None,
            coarse: None,
            owners: None,
        };
        let mut coarse = [None, None];
        let mut owners = [None, None, None];
        for row in &rows {
            let name: String = row.try_get(0)?;
            let sequencer = row.try_get::<_, Option<i64>>(1)?.unwrap_or(0);
            // `refreshing` is a valid view in the middle of a refresh (most of the time under a
            // steady load); only `invalid` means its rows cannot be trusted.
            let status: Option<String> = row.try_get(3)?;
            let refreshed = match status {
                Some(status) if status != "invalid" => {
                    Some(row.try_get::<_, Option<i64>>(4)?.unwrap_or(-1))
                }
                _ => None,
            };
            if name == self.table {
                marks.sequencer = sequencer;
                marks.writer = row.try_get::<_, Option<i64>>(2)?.unwrap_or(0);
            } else if name == self.view {
                marks.view = refreshed.map(|refreshed| ViewMarks {
                    refreshed,
                    sequencer,
                });
            } else if let Some(slot) = self.coarse.iter().position(|coarse| *coarse == name) {
                let derived_to = row
                    .try_get::<_, Option<NaiveDateTime>>(5)?
                    .map_or(i64::MIN, |at| at.and_utc().timestamp_micros());
                coarse[slot] = refreshed.map(|refreshed| (refreshed, derived_to, sequencer));
            } else if let Some(slot) = self.owners.iter().position(|owner| *owner == name) {
                owners[slot] = refreshed;
            }
        }
        if let [Some((hour_base, hours_to, hour_txn)), Some((day_base, days_to, day_txn))] = coarse
        {
            marks.coarse = Some(CoarseMarks {
                refreshed: hour_base.min(day_base),
                derived: Derived { hours_to, days_to },
                sequencers: [hour_txn, day_txn],
            });
        }
        if let [Some(quarters), Some(hours), Some(days)] = owners {
            marks.owners = Some([quarters, hours, days]);
        }
        Ok(marks)
    }
}

/// Where QuestDB stands at one look.
#[derive(Debug, Clone, Copy)]
struct Marks {
    /// The latest transaction the table's sequencer numbered.
    sequencer: i64,
    /// The latest transaction applied to the table.
    writer: i64,
    /// The quarter-hour view's; `None` when it is invalid or missing.
    view: Option<ViewMarks>,
    /// The hour and day views'; `None` when either is invalid or missing.
    coarse: Option<CoarseMarks>,
    /// The transactions of their device views the owner views are refreshed through, in the
    /// order of [`Grain::ALL`]; `None` when any is invalid or missing.
    owners: Option<[i64; 3]>,
}

#[derive(Debug, Clone, Copy)]
struct ViewMarks {
    /// The table's transaction the view is refreshed through (-1 before its first refresh).
    refreshed: i64,
    /// The latest transaction of the view itself, which the coarse views refresh from.
    sequencer: i64,
}

#[derive(Debug, Clone, Copy)]
struct CoarseMarks {
    /// The quarter-hour view's transaction both are refreshed through.
    refreshed: i64,
    derived: Derived,
    /// The latest transactions of the hour and the day view, which the owner views refresh from.
    sequencers: [i64; 2],
}

/// A generation and a transaction seen after it reached a source (the table's sequencer for the
/// apply and the quarter-hour view, the quarter-hour view's for the coarse views): once a mark
/// reaches the transaction, it holds every batch up to the generation.
#[derive(Debug, Clone, Copy)]
struct Goal {
    generation: u64,
    txn: i64,
}

/// The same for the owner views: a generation the device views held at a look, their
/// transactions then (in the order of [`Grain::ALL`]) and how far they had derived. Once every
/// owner view is refreshed through its device view's transaction, it holds all of that.
#[derive(Debug, Clone, Copy)]
struct OwnerGoal {
    generation: u64,
    txns: [i64; 3],
    derived: Derived,
}

/// The tracker: at each look, opens a goal for the table's apply, one for the quarter-hour
/// view's refresh and one for the coarse views' when generations are not known to have reached
/// them, and publishes each goal its mark reached.
async fn track(shared: Weak<Shared>, wake: Arc<Notify>, reads: BoundedPool, look: Look) {
    let mut apply: Option<Goal> = None;
    let mut view: Option<Goal> = None;
    let mut coarse: Option<Goal> = None;
    let mut owner: Option<OwnerGoal> = None;
    // The first look comes at once: the view may not be readable until one saw it caught up.
    let mut pause = Duration::ZERO;
    // After a failed look the tracker waits out the pause whatever reads do, so a QuestDB that
    // does not answer is asked once per pause, not once per waiting read.
    let mut failed = false;
    loop {
        let woken = if failed {
            tokio::time::sleep(pause).await;
            false
        } else {
            // Timing out only means it is time for the next look.
            tokio::time::timeout(pause, wake.notified()).await.is_ok()
        };
        let Some(handle) = shared.upgrade() else {
            return;
        };
        // Read before the look: every batch up to it was acknowledged already.
        let generation = lock(&handle).generation;
        drop(handle);
        let marks = look.look(&reads).await;
        let Some(handle) = shared.upgrade() else {
            return;
        };
        let mut state = lock(&handle);
        let marks = match marks {
            Ok(marks) => marks,
            Err(error) => {
                tracing::warn!(error = %crate::telemetry::chain(&error), "could not follow QuestDB's WAL apply and view refresh");
                set_valid(&handle.valid, false);
                failed = true;
                pause = LOOK_PENDING;
                continue;
            }
        };
        failed = false;
        let goal = Goal {
            generation,
            txn: marks.sequencer,
        };
        if generation > *handle.applied.borrow() {
            apply.get_or_insert(goal);
        }
        if generation > *handle.refreshed.borrow() || !*handle.valid.borrow() {
            view.get_or_insert(goal);
        }
        if let Some(reached) = apply.filter(|goal| marks.writer >= goal.txn) {
            state
                .devices
                .retain(|_, generation| *generation > reached.generation);
            handle.applied.send_replace(reached.generation);
            apply = None;
        }
        match marks.view {
            None => {
                if *handle.valid.borrow() {
                    tracing::warn!(
                        "QuestDB's quarter-hour view is invalid; timelines read raw readings \
                         until it is refreshed (REFRESH MATERIALIZED VIEW … FULL)"
                    );
                }
                set_valid(&handle.valid, false);
                view = None;
            }
            Some(marks) => {
                if let Some(reached) = view.filter(|goal| marks.refreshed >= goal.txn) {
                    set_valid(&handle.valid, true);
                    handle.refreshed.send_if_modified(|held| {
                        let moved = *held < reached.generation;
                        *held = (*held).max(reached.generation);
                        moved
                    });
                    view = None;
                }
            }
        }
        let refreshed = *handle.refreshed.borrow();
        let view_valid = *handle.valid.borrow();
        match (marks.view.filter(|_| view_valid), marks.coarse) {
            (Some(view_marks), Some(coarse_marks)) => {
                // The quarter-hour view's transaction now covers every generation it holds.
                if refreshed > state.settled || state.coarse.is_none() {
                    coarse.get_or_insert(Goal {
                        generation: refreshed,
                        txn: view_marks.sequencer,
                    });
                }
                if let Some(reached) = coarse.filter(|goal| coarse_marks.refreshed >= goal.txn) {
                    state.settled = state.settled.max(reached.generation);
                    state.coarse = Some(coarse_marks.derived);
                    coarse = None;
                }
                if let Some(derived) = state.coarse.as_mut() {
                    *derived = coarse_marks.derived;
                }
            }
            _ => {
                state.coarse = None;
                coarse = None;
            }
        }
        state.owner_views = marks.owners.is_some();
        match (marks.view, marks.coarse, state.coarse, marks.owners) {
            (Some(view_marks), Some(coarse_marks), Some(derived), Some(owner_marks)) => {
                if state.settled > state.owned || state.owner_derived.is_none() {
                    owner.get_or_insert(OwnerGoal {
                        generation: state.settled,
                        txns: [
                            view_marks.sequencer,
                            coarse_marks.sequencers[0],
                            coarse_marks.sequencers[1],
                        ],
                        derived,
                    });
                }
                if let Some(reached) = owner.filter(|goal| {
                    owner_marks
                        .iter()
                        .zip(goal.txns)
                        .all(|(refreshed, txn)| *refreshed >= txn)
                }) {
                    state.owned = state.owned.max(reached.generation);
                    state.owner_derived = Some(reached.derived);
                    owner = None;
                }
            }
            _ => {
                state.owner_derived = None;
                owner = None;
            }
        }
        state.forget_held();
        let ceiling = if apply.is_some() {
            Some(POLL_APPLY_MAX)
        } else if view.is_some() {
            Some(POLL_VIEW_MAX)
        } else {
            None
        };
        pause = match ceiling {
            Some(_) if woken => POLL_FIRST,
            Some(ceiling) => (pause * 2).clamp(POLL_FIRST, ceiling),
            None if state.quarters.is_empty() && *handle.valid.borrow() => LOOK_IDLE,
            None => LOOK_PENDING,
        };
    }
}

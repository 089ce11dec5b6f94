//! The evaluator: a task that, every tick, reads what the reading store has committed and moves
//! each (rule, device) state through [`AlertStore::observe`].
//!
//! Behind the commit: it reads only through [`ReadingStore`], which answers what was durably
//! written (the embedded store: the folded readings and the synced, unconsumed ones), so an
//! upload's 201 never waits for it and it never sees a reading that could still be lost.
//! Threshold rules are evaluated for the devices [`ReadingStore::written_since`] names (all of
//! them when the store cannot tell, at the first pass and every [`FULL_PASS`], so sliding windows
//! move on and nothing is missed; and all of a rule's devices when the rule is new or changed);
//! silence rules for every device every [`SILENCE_SWEEP`] of the server's clock, and for a
//! device that reported at the next tick — a silence needs no upload to fire, and a recovery is
//! told at once.
//!
//! A pass costs a few reads, not one per pair: the latest readings of every device it evaluates
//! in one [`ReadingStore::latest_each`], and the means over windows in one
//! [`ReadingStore::aggregate_each`], moved on from the sums the last pass kept ([`Sliding`])
//! and read for a busy device once per [`window_period`] only. What it observes is written in one
//! transaction per [`OBSERVATIONS_PER_WRITE`], the moves first: the deliverer is woken before
//! the values refreshed once a minute are written. Measured with 10,000 rules while 20,000
//! readings a second arrive (`airq-bench alerts`, bench/RESULTS.md), one pair at a time made a
//! pass take 5 to 15 s.
//!
//! Nothing is missed across a restart without a persisted watermark: evaluation is by level,
//! not by edge. The state is persisted and the first pass of a process observes every (rule,
//! device) pair again, so a move that happened while no process ran is made (and told) then.
//! What is kept in memory ([`Evaluator::known`], the windows' sums) only spares reads and
//! writes that would change nothing; the store decides every move on its own stored state.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::{DateTime, TimeDelta, Utc};
use tokio::sync::Notify;

use crate::clock::Clock;
use crate::domain::alert::{AlertId, AlertRule, Condition, StateKind};
use crate::domain::{Aggregate, DeviceUuid, Measurements, OwnerId};
use crate::store::{AlertStore, DeviceStore, Observation, ReadingStore, StoreError, WriteMark};

/// How often every threshold rule is evaluated for every device, whatever was written: windows
/// slide with time, not only with uploads.
pub const FULL_PASS: Duration = Duration::from_secs(60);

/// How often, by the server's clock, silence rules are evaluated for every device: their value
/// moves in whole minutes, so a sweep every few seconds misses nothing worth a write. A device
/// that reported is evaluated at the next tick whatever this says (its recovery is prompt).
pub const SILENCE_SWEEP: TimeDelta = TimeDelta::seconds(10);

/// How often a pair's value is written when its state does not move: a transition is written at
/// once, but a value alone (shown by `…/states`) no more than once a minute per pair, so rules on
/// busy devices do not turn every upload into a write.
pub const VALUE_REFRESH: Duration = Duration::from_secs(60);

/// Observations written in one transaction at most: a pass over a fleet's new rules writes
/// every pair, and the embedded store's writer (which the fold of uploads shares) is held for
/// one chunk at a time.
const OBSERVATIONS_PER_WRITE: usize = 1_000;

/// What the evaluator reads and writes.
#[derive(Debug)]
pub struct Evaluator {
    alerts: Arc<dyn AlertStore>,
    devices: Arc<dyn DeviceStore>,
    readings: Arc<dyn ReadingStore>,
    clock: Arc<dyn Clock>,
    /// How often a pass runs.
    tick: Duration,
    /// Wakes the deliverer when an observation made an event.
    delivered: Arc<Notify>,
    mark: Option<WriteMark>,
    last_full: Option<Instant>,
    last_silence_sweep: Option<DateTime<Utc>>,
    /// The state and value last recorded per pair: an observation that would change neither is
    /// not written.
    known: HashMap<(AlertId, DeviceUuid), Known>,
    /// The rules as the last pass saw them: a rule new or changed since (its states started
    /// afresh in the store) is evaluated for all its devices at once, not at the next full pass.
    rules_seen: HashMap<AlertId, AlertRule>,
    /// Each device's sums over each window of its rules, as last read.
    windows: HashMap<(DeviceUuid, u16), Sliding>,
    /// Devices written since their windowed rules were last evaluated (not their turn then).
    deferred: HashSet<DeviceUuid>,
    /// Passes run: a device's windows are read at its turn among them ([`Self::window_turn`]).
    passes: u64,
}

/// Every how many passes a device's mean over a window of `minutes` is read while it uploads:
/// one pass per minute of the window (a second per minute at the default tick), and at least
/// once per [`FULL_PASS`]. Such a mean moves slowly, and reading it again for each upload of a
/// busy fleet cost most of a pass (10,000 rules, 20,000 uploads/s: the quarter of them over 10
/// minutes read 1,200 readings per device, every second).
fn window_period(minutes: u16, tick: Duration) -> u128 {
    let most = FULL_PASS.as_millis() / tick.as_millis().max(1);
    u128::from(minutes).min(most).max(1)
}

/// How long a window's sums are moved on before they are counted from scratch again: the
/// window's length, at least [`FULL_PASS`] and at most an hour. Counting a 10-minute window of a
/// device uploading twice a second reads 1,200 readings; counted every minute, the recounts
/// were half of what a fleet's windows cost.
fn recount(minutes: u16) -> Duration {
    Duration::from_secs(60 * u64::from(minutes)).clamp(FULL_PASS, Duration::from_secs(3_600))
}

/// How far behind the server's clock a window's sums are kept: the readings of the last
/// minute of a window are counted afresh at every read, so a reading that arrives with a time
/// up to this far behind (in flight while a pass read, or measured a little earlier by the
/// device) counts at once; one later than that counts from the window's next [`recount`].
const SETTLING: TimeDelta = TimeDelta::seconds(60);

/// A device's sums over the settled part of a window, `(after, settled]`, moved on at the next
/// read by what settled since and what left the window (two short ranges instead of the whole
/// window), and counted from scratch again after [`recount`].
#[derive(Debug, Clone, Copy)]
struct Sliding {
    after: DateTime<Utc>,
    settled: DateTime<Utc>,
    sums: Aggregate,
    /// When it was counted from scratch (staggered over devices, so that the recounts of a
    /// fleet whose rules were made at once spread out instead of landing in one pass).
    counted: Instant,
}

/// A device's share of a minute ([`FULL_PASS`], [`VALUE_REFRESH`]), by which its first window
/// count and its first write are backdated.
fn stagger(device: DeviceUuid) -> Duration {
    let spread = u128::from(FULL_PASS.as_millis() as u64).max(1);
    Duration::from_millis((device.as_uuid().as_u128() % spread) as u64)
}

/// How a window's settled sums are read this pass (its unsettled part is always counted).
#[derive(Debug, Clone, Copy)]
enum WindowRead {
    /// Counted from scratch: one range.
    Count,
    /// Moved on from the kept sums: what settled, then what left.
    Slide(Aggregate),
}

/// Why an observation is written.
#[derive(Debug, Clone, Copy)]
enum Write {
    /// It may move the pair's state (or nothing is known of the pair).
    Move,
    /// Only its value changed, and was last written [`VALUE_REFRESH`] ago or longer.
    Refresh,
}

/// Which read a (rule, device) pair's value comes from.
#[derive(Debug, Clone, Copy)]
enum Needs {
    /// The latest reading (its time, or its values).
    Latest,
    /// The mean over the window of these minutes.
    Window(u16),
}

/// What the evaluator last recorded for a pair.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Known {
    state: StateKind,
    value: f64,
    written: Instant,
}

impl Evaluator {
    /// An evaluator that has not run a pass yet, to run one every `tick`.
    pub fn new(
        alerts: Arc<dyn AlertStore>,
        devices: Arc<dyn DeviceStore>,
        readings: Arc<dyn ReadingStore>,
        clock: Arc<dyn Clock>,
        tick: Duration,
        delivered: Arc<Notify>,
    ) -> Self {
        Self {
            alerts,
            devices,
            readings,
            clock,
            tick,
            delivered,
            mark: None,
            last_full: None,
            last_silence_sweep: None,
            known: HashMap::new(),
            rules_seen: HashMap::new(),
            windows: HashMap::new(),
            deferred: HashSet::new(),
            passes: 0,
        }
    }

    /// One pass over every rule.
    pub async fn pass(&mut self) -> Result<(), StoreError> {
        self.passes += 1;
        let now = self.clock.now();
        // The mark first: whatever is written after it is named next time. It is kept only
        // once the pass succeeded, so a failed pass leaves its devices to the next.
        let written = self.readings.written_since(self.mark).await?;
        let full = self.mark.is_none()
            || written.is_none()
            || self
                .last_full
                .is_none_or(|last| last.elapsed() >= FULL_PASS);
        let (changed, mark): (HashSet<DeviceUuid>, _) = match written {
            Some((devices, mark)) => (devices.into_iter().collect(), Some(mark)),
            None => (HashSet::new(), None),
        };
        if full {
            self.last_full = Some(Instant::now());
        }
        // A clock set back (tests, a corrected host clock) sweeps at once too.
        let sweep = full
            || self
                .last_silence_sweep
                .is_none_or(|last| now - last >= SILENCE_SWEEP || now < last);
        if sweep {
            self.last_silence_sweep = Some(now);
        }
        let rules = self.alerts.rules().await?;
        let fresh: HashSet<AlertId> = rules
            .iter()
            .filter(|rule| self.rules_seen.get(&rule.id) != Some(rule))
            .map(|rule| rule.id)
            .collect();
        if !fresh.is_empty() {
            self.known.retain(|(rule, _), _| !fresh.contains(rule));
        }
        // Each owner's devices (and when they were registered), read once a pass.
        let mut fleets: HashMap<OwnerId, HashMap<DeviceUuid, DateTime<Utc>>> = HashMap::new();
        let mut seen = HashSet::new();
        // The pairs evaluated this pass, and what they read: one read per kind for all of them.
        let mut wanted: Vec<(usize, DeviceUuid, DateTime<Utc>, Needs)> = Vec::new();
        let mut latest_of: HashSet<DeviceUuid> = HashSet::new();
        let mut windows: HashMap<u16, HashSet<DeviceUuid>> = HashMap::new();
        let mut deferred = HashSet::new();
        let instant = Instant::now();
        for (index, rule) in rules.iter().enumerate() {
            if !fleets.contains_key(&rule.owner) {
                let devices = self.devices.list(&rule.owner).await?;
                fleets.insert(
                    rule.owner.clone(),
                    devices
                        .into_iter()
                        .map(|device| (device.id, device.created_at))
                        .collect(),
                );
            }
            let fleet = fleets.get(&rule.owner);
            let watched: Vec<(DeviceUuid, DateTime<Utc>)> = match rule.device {
                Some(id) => fleet
                    .and_then(|fleet| fleet.get(&id))
                    .map(|registered| (id, *registered))
                    .into_iter()
                    .collect(),
                None => fleet
                    .into_iter()
                    .flatten()
                    .map(|(id, registered)| (*id, *registered))
                    .collect(),
            };
            let every_device = full || fresh.contains(&rule.id);
            for (device, registered) in watched {
                seen.insert((rule.id, device));
                let written = changed.contains(&device);
                let needs = match rule.condition {
                    Condition::Threshold {
                        window_minutes: 0, ..
                    } => {
                        if !every_device && !written {
                            continue;
                        }
                        Needs::Latest
                    }
                    Condition::Threshold { window_minutes, .. } => {
                        // Not at every full pass either: those of a fleet would all fall in it.
                        if !fresh.contains(&rule.id) {
                            if !written && !full && !self.deferred.contains(&device) {
                                continue;
                            }
                            let due = !self.windows.contains_key(&(device, window_minutes))
                                || self.window_turn(device, window_minutes);
                            if !due {
                                deferred.insert(device);
                                continue;
                            }
                        }
                        Needs::Window(window_minutes)
                    }
                    Condition::Silence { .. } => {
                        if !sweep && !every_device && !written {
                            continue;
                        }
                        Needs::Latest
                    }
                };
                match needs {
                    Needs::Latest => latest_of.insert(device),
                    Needs::Window(minutes) => windows.entry(minutes).or_default().insert(device),
                };
                wanted.push((index, device, registered, needs));
            }
        }
        let latest = if latest_of.is_empty() {
            HashMap::new()
        } else {
            let devices: Vec<DeviceUuid> = latest_of.into_iter().collect();
            self.readings.latest_each(&devices).await?
        };
        let means = self.read_windows(windows, now, instant).await?;
        let pairs = wanted.len();
        let (mut moves, mut refreshes) = (Vec::new(), Vec::new());
        for (index, device, registered, needs) in wanted {
            let rule = &rules[index];
            let value = match (rule.condition, needs) {
                (Condition::Threshold { measure, .. }, Needs::Latest) => latest
                    .get(&device)
                    .and_then(|(_, sums)| sums.means())
                    .map(|means| means[measure]),
                (Condition::Threshold { measure, .. }, Needs::Window(minutes)) => {
                    means.get(&(device, minutes)).map(|means| means[measure])
                }
                (Condition::Silence { .. }, _) => {
                    // Before its first reading, a device counts from its registration or the
                    // rule's creation, whichever is later.
                    let since = latest
                        .get(&device)
                        .map_or(registered.max(rule.created_at), |(at, _)| *at);
                    // Whole minutes: the value changes once a minute, not at every tick, so a
                    // quiet device costs a write a minute, not one a tick.
                    Some((now - since).num_minutes().max(0) as f64)
                }
            };
            let Some(value) = value else { continue };
            let write = match self.known.get(&(rule.id, device)) {
                None => Write::Move,
                Some(known) if rule.condition.next(known.state, value) != known.state => {
                    Write::Move
                }
                Some(known) if known.value != value && known.written.elapsed() >= VALUE_REFRESH => {
                    Write::Refresh
                }
                Some(_) => continue,
            };
            let observation = Observation {
                rule: rule.clone(),
                device,
                value,
            };
            match write {
                Write::Move => moves.push(observation),
                Write::Refresh => refreshes.push(observation),
            }
        }
        // Moves first, and the deliverer woken for them before the refreshes are written: a
        // pass that refreshes a fleet's values does not hold up its events.
        let mut moved = false;
        for chunk in moves.chunks(OBSERVATIONS_PER_WRITE) {
            moved |= self.record(chunk, now).await?;
        }
        if moved {
            self.delivered.notify_one();
        }
        for chunk in refreshes.chunks(OBSERVATIONS_PER_WRITE) {
            moved |= self.record(chunk, now).await?;
        }
        // Rules and devices gone take their memory with them.
        self.known.retain(|pair, _| seen.contains(pair));
        let devices: HashSet<DeviceUuid> = seen.iter().map(|(_, device)| *device).collect();
        self.windows
            .retain(|(device, _), _| devices.contains(device));
        self.deferred = deferred;
        self.rules_seen = rules.into_iter().map(|rule| (rule.id, rule)).collect();
        if mark.is_some() {
            self.mark = mark;
        }
        if moved {
            self.delivered.notify_one();
        }
        tracing::debug!(
            full,
            pairs,
            elapsed_ms = instant.elapsed().as_millis() as u64,
            "alert rules evaluated"
        );
        Ok(())
    }

    /// The means over each window of the devices listed for it, from the kept sums where they
    /// can be moved on, else counted; the kept sums are updated.
    async fn read_windows(
        &mut self,
        windows: HashMap<u16, HashSet<DeviceUuid>>,
        now: DateTime<Utc>,
        instant: Instant,
    ) -> Result<HashMap<(DeviceUuid, u16), Measurements>, StoreError> {
        let mut reads = Vec::new();
        let mut ranges = Vec::new();
        for (minutes, devices) in windows {
            let length = TimeDelta::minutes(i64::from(minutes));
            let after = now - length;
            let settled = now - SETTLING.min(length);
            for device in devices {
                let read = match self.windows.get(&(device, minutes)) {
                    // A clock set back, a gap longer than the settled part, or sums counted
                    // too long ago: counted again.
                    Some(kept)
                        if kept.after <= after
                            && after <= kept.settled
                            && kept.settled <= settled
                            && instant.duration_since(kept.counted) < recount(minutes) =>
                    {
                        ranges.push((device, kept.settled, settled));
                        ranges.push((device, kept.after, after));
                        WindowRead::Slide(kept.sums)
                    }
                    _ => {
                        ranges.push((device, after, settled));
                        WindowRead::Count
                    }
                };
                ranges.push((device, settled, now));
                reads.push((device, minutes, after, settled, read));
            }
        }
        if ranges.is_empty() {
            return Ok(HashMap::new());
        }
        let mut sums = self.readings.aggregate_each(&ranges).await?.into_iter();
        let mut next = || sums.next().unwrap_or_default();
        let mut means = HashMap::with_capacity(reads.len());
        for (device, minutes, after, settled, read) in reads {
            let key = (device, minutes);
            let kept = self.windows.get(&key);
            let (mut total, counted) = match read {
                WindowRead::Count => {
                    let counted = match kept {
                        Some(_) => instant,
                        None => {
                            let share = stagger(device).as_secs_f64() / FULL_PASS.as_secs_f64();
                            instant
                                .checked_sub(recount(minutes).mul_f64(share))
                                .unwrap_or(instant)
                        }
                    };
                    (next(), counted)
                }
                WindowRead::Slide(mut total) => {
                    total += next();
                    total -= next();
                    (total, kept.map_or(instant, |kept| kept.counted))
                }
            };
            self.windows.insert(
                key,
                Sliding {
                    after,
                    settled,
                    sums: total,
                    counted,
                },
            );
            total += next();
            if let Some(mean) = total.means() {
                means.insert(key, mean);
            }
        }
        Ok(means)
    }

    /// Whether this pass is the device's turn to have its mean over `minutes` read: one pass in
    /// [`window_period`], the device's own by its id, so a fleet's windows spread evenly over the
    /// passes (rules made at once would otherwise all fall due together).
    fn window_turn(&self, device: DeviceUuid, minutes: u16) -> bool {
        let period = window_period(minutes, self.tick);
        (u128::from(self.passes) % period + device.as_uuid().as_u128() % period)
            .is_multiple_of(period)
    }

    /// Writes the observations in one transaction and remembers what was written; whether a
    /// state may have moved.
    async fn record(
        &mut self,
        observations: &[Observation],
        now: DateTime<Utc>,
    ) -> Result<bool, StoreError> {
        let states = self.alerts.observe(observations, now).await?;
        let written = Instant::now();
        let mut moved = false;
        for (observation, state) in observations.iter().zip(states) {
            let pair = (observation.rule.id, observation.device);
            match state {
                Some(state) => {
                    // A pair's first write is backdated by its device's share of the refresh
                    // interval, so a fleet's pairs written at once are not all refreshed at once.
                    let written = if self.known.contains_key(&pair) {
                        written
                    } else {
                        written
                            .checked_sub(stagger(observation.device))
                            .unwrap_or(written)
                    };
                    self.known.insert(
                        pair,
                        Known {
                            state: state.state,
                            value: observation.value,
                            written,
                        },
                    );
                    // A state moved now, or was first recorded now: either may have made an
                    // event.
                    moved |= state.since == now;
                }
                None => {
                    self.known.remove(&pair);
                }
            }
        }
        Ok(moved)
    }
}

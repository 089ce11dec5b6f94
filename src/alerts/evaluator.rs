//! The evaluator: a task that, every tick, reads what the reading store has committed and moves
//! each (rule, device) state through [`AlertStore::observe`].
//!
//! Behind the commit: it reads only through [`ReadingStore`], which answers what was durably
//! written (the embedded store: the folded readings and the synced, unconsumed ones), so an
//! upload's 201 never waits for it and it never sees a reading that could still be lost.
//! Threshold rules are evaluated for the devices [`ReadingStore::written_since`] names (all of
//! them when the store cannot tell, at the first pass and every [`FULL_PASS`], so sliding windows
//! move on and nothing is missed; and all of a rule's devices when the rule is new or changed); silence rules for every device every [`SILENCE_SWEEP`] of the
//! server's clock, and for a device that reported at the next tick — a silence needs no upload
//! to fire, and a recovery is told at once.
//!
//! Nothing is missed across a restart without a persisted watermark: evaluation is by level,
//! not by edge. The state is persisted and the first pass of a process observes every (rule,
//! device) pair again, so a move that happened while no process ran is made (and told) then.
//! What is kept in memory ([`Evaluator::known`]) only spares the store writes that would change
//! nothing; the store decides every move on its own stored state.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::{DateTime, TimeDelta, Utc};
use tokio::sync::Notify;

use crate::clock::Clock;
use crate::domain::alert::{AlertId, AlertRule, Condition, StateKind};
use crate::domain::{DeviceUuid, Measurements, OwnerId};
use crate::store::{AlertStore, DeviceStore, ReadingStore, StoreError, WriteMark};

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

/// What the evaluator reads and writes.
#[derive(Debug)]
pub struct Evaluator {
    alerts: Arc<dyn AlertStore>,
    devices: Arc<dyn DeviceStore>,
    readings: Arc<dyn ReadingStore>,
    clock: Arc<dyn Clock>,
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
}

/// What the evaluator last recorded for a pair.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Known {
    state: StateKind,
    value: f64,
    written: Instant,
}

/// What one pass read of the reading store, so that many rules on one device cost one read
/// each.
#[derive(Debug, Default)]
struct PassReads {
    /// Each device's latest reading's time.
    last_seen: HashMap<DeviceUuid, Option<DateTime<Utc>>>,
    /// Each device's means over a window (minutes; 0: the latest reading's instant).
    means: HashMap<(DeviceUuid, u16), Option<Measurements>>,
}

impl Evaluator {
    /// An evaluator that has not run a pass yet.
    pub fn new(
        alerts: Arc<dyn AlertStore>,
        devices: Arc<dyn DeviceStore>,
        readings: Arc<dyn ReadingStore>,
        clock: Arc<dyn Clock>,
        delivered: Arc<Notify>,
    ) -> Self {
        Self {
            alerts,
            devices,
            readings,
            clock,
            delivered,
            mark: None,
            last_full: None,
            last_silence_sweep: None,
            known: HashMap::new(),
            rules_seen: HashMap::new(),
        }
    }

    /// One pass over every rule.
    pub async fn pass(&mut self) -> Result<(), StoreError> {
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
        let mut moved = false;
        let mut seen = HashSet::new();
        let mut reads = PassReads::default();
        for rule in &rules {
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
                let value = match rule.condition {
                    Condition::Threshold {
                        measure,
                        window_minutes,
                        ..
                    } => {
                        if !every_device && !changed.contains(&device) {
                            continue;
                        }
                        self.means(&mut reads, device, window_minutes, now)
                            .await?
                            .map(|means| means[measure])
                    }
                    Condition::Silence { .. } => {
                        if !sweep && !every_device && !changed.contains(&device) {
                            continue;
                        }
                        let last = self.last_seen(&mut reads, device).await?;
                        // Before its first reading, a device counts from its registration or
                        // the rule's creation, whichever is later.
                        let since = last.unwrap_or(registered.max(rule.created_at));
                        // Whole minutes: the value changes once a minute, not at every tick, so
                        // a quiet device costs a write a minute, not one a tick.
                        Some((now - since).num_minutes().max(0) as f64)
                    }
                };
                if let Some(value) = value {
                    moved |= self.observe(rule, device, value, now).await?;
                }
            }
        }
        // Rules and devices gone take their memory with them.
        self.known.retain(|pair, _| seen.contains(pair));
        self.rules_seen = rules.into_iter().map(|rule| (rule.id, rule)).collect();
        if mark.is_some() {
            self.mark = mark;
        }
        if moved {
            self.delivered.notify_one();
        }
        Ok(())
    }

    /// Records `value` unless it moves no state and the pair's value was written less than
    /// [`VALUE_REFRESH`] ago; whether a state may have moved.
    async fn observe(
        &mut self,
        rule: &AlertRule,
        device: DeviceUuid,
        value: f64,
        now: DateTime<Utc>,
    ) -> Result<bool, StoreError> {
        let pair = (rule.id, device);
        if let Some(known) = self.known.get(&pair) {
            if rule.condition.next(known.state, value) == known.state
                && (known.value == value || known.written.elapsed() < VALUE_REFRESH)
            {
                return Ok(false);
            }
        }
        match self.alerts.observe(rule, device, value, now).await? {
            Some(state) => {
                self.known.insert(
                    pair,
                    Known {
                        state: state.state,
                        value,
                        written: Instant::now(),
                    },
                );
                // A state moved now, or was first recorded now: either may have made an event.
                Ok(state.since == now)
            }
            None => {
                self.known.remove(&pair);
                Ok(false)
            }
        }
    }

    /// The device's latest reading's time, read once a pass.
    async fn last_seen(
        &self,
        reads: &mut PassReads,
        device: DeviceUuid,
    ) -> Result<Option<DateTime<Utc>>, StoreError> {
        if let Some(last) = reads.last_seen.get(&device) {
            return Ok(*last);
        }
        let last = self.readings.last_seen(&[device]).await?;
        reads.last_seen.insert(device, last);
        Ok(last)
    }

    /// The means of the readings stored under a time in the last `window_minutes` (0: under the
    /// latest reading's time), read once a pass per device and window; `None` without a reading
    /// there.
    async fn means(
        &self,
        reads: &mut PassReads,
        device: DeviceUuid,
        window_minutes: u16,
        now: DateTime<Utc>,
    ) -> Result<Option<Measurements>, StoreError> {
        if let Some(means) = reads.means.get(&(device, window_minutes)) {
            return Ok(*means);
        }
        let bounds = if window_minutes == 0 {
            self.last_seen(reads, device)
                .await?
                .map(|last| (last - TimeDelta::microseconds(1), last))
        } else {
            Some((now - TimeDelta::minutes(i64::from(window_minutes)), now))
        };
        let means = match bounds {
            Some((after, until)) => self
                .readings
                .aggregate(&[device], after, until)
                .await?
                .means(),
            None => None,
        };
        reads.means.insert((device, window_minutes), means);
        Ok(means)
    }
}

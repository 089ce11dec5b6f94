//! The evaluator: a task that, every tick, reads what the reading store has committed and moves
//! each (rule, device) state through [`AlertStore::observe`].
//!
//! Behind the commit: it reads only through [`ReadingStore`], which answers what was durably
//! written (the embedded store: the folded readings and the synced, unconsumed ones), so an
//! upload's 201 never waits for it and it never sees a reading that could still be lost.
//! Threshold rules are evaluated for the devices [`ReadingStore::written_since`] names (all of
//! them when the store cannot tell, at the first pass and every [`FULL_PASS`], so sliding windows
//! move on and nothing is missed); silence rules for every device at every tick, by the clock —
//! a silence needs no upload to fire.
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
use crate::domain::{Device, DeviceUuid, Measure, OwnerId};
use crate::store::{AlertStore, DeviceStore, ReadingStore, StoreError, WriteMark};

/// How often every threshold rule is evaluated for every device, whatever was written: windows
/// slide with time, not only with uploads.
pub const FULL_PASS: Duration = Duration::from_secs(60);

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
    /// The state and value last recorded per pair: an observation that would change neither is
    /// not written.
    known: HashMap<(AlertId, DeviceUuid), (StateKind, f64)>,
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
            known: HashMap::new(),
        }
    }

    /// One pass over every rule.
    pub async fn pass(&mut self) -> Result<(), StoreError> {
        let now = self.clock.now();
        // The mark first: whatever is written after it is named next time.
        let written = self.readings.written_since(self.mark).await?;
        let full = self.mark.is_none()
            || written.is_none()
            || self
                .last_full
                .is_none_or(|last| last.elapsed() >= FULL_PASS);
        let changed: HashSet<DeviceUuid> = match &written {
            Some((devices, mark)) => {
                self.mark = Some(*mark);
                devices.iter().copied().collect()
            }
            None => HashSet::new(),
        };
        if full {
            self.last_full = Some(Instant::now());
        }
        let rules = self.alerts.rules().await?;
        let mut fleets: HashMap<OwnerId, Vec<Device>> = HashMap::new();
        let mut moved = false;
        let mut seen = HashSet::new();
        for rule in &rules {
            if !fleets.contains_key(&rule.owner) {
                let devices = self.devices.list(&rule.owner).await?;
                fleets.insert(rule.owner.clone(), devices);
            }
            let watched: Vec<(DeviceUuid, DateTime<Utc>)> = fleets
                .get(&rule.owner)
                .into_iter()
                .flatten()
                .filter(|device| rule.device.is_none_or(|id| id == device.id))
                .map(|device| (device.id, device.created_at))
                .collect();
            for (device, registered) in watched {
                seen.insert((rule.id, device));
                let value = match rule.condition {
                    Condition::Threshold {
                        measure,
                        window_minutes,
                        ..
                    } => {
                        if !full && !changed.contains(&device) {
                            continue;
                        }
                        self.threshold_value(device, measure, window_minutes, now)
                            .await?
                    }
                    Condition::Silence { .. } => {
                        Some(self.silent_minutes(rule, device, registered, now).await?)
                    }
                };
                if let Some(value) = value {
                    moved |= self.observe(rule, device, value, now).await?;
                }
            }
        }
        // Rules and devices gone take their memory with them.
        self.known.retain(|pair, _| seen.contains(pair));
        if moved {
            self.delivered.notify_one();
        }
        Ok(())
    }

    /// Records `value` unless it changes nothing known; whether the state moved.
    async fn observe(
        &mut self,
        rule: &AlertRule,
        device: DeviceUuid,
        value: f64,
        now: DateTime<Utc>,
    ) -> Result<bool, StoreError> {
        let pair = (rule.id, device);
        if let Some((state, last)) = self.known.get(&pair) {
            if rule.condition.next(*state, value) == *state && *last == value {
                return Ok(false);
            }
        }
        match self.alerts.observe(rule, device, value, now).await? {
            Some(state) => {
                self.known.insert(pair, (state.state, value));
                // A state moved now, or was first recorded now: either may have made an event.
                Ok(state.since == now)
            }
            None => {
                self.known.remove(&pair);
                Ok(false)
            }
        }
    }

    /// The measure's value: the latest reading's (window 0), or the mean of the readings stored
    /// under a time in the last `window_minutes`; `None` without a reading there.
    async fn threshold_value(
        &self,
        device: DeviceUuid,
        measure: Measure,
        window_minutes: u16,
        now: DateTime<Utc>,
    ) -> Result<Option<f64>, StoreError> {
        let devices = [device];
        let (after, until) = if window_minutes == 0 {
            let Some(last) = self.readings.last_seen(&devices).await? else {
                return Ok(None);
            };
            (last - TimeDelta::microseconds(1), last)
        } else {
            (now - TimeDelta::minutes(i64::from(window_minutes)), now)
        };
        let aggregate = self.readings.aggregate(&devices, after, until).await?;
        Ok(aggregate.means().map(|means| means[measure]))
    }

    /// Whole minutes since the device's last reading (or, before its first, since it or the
    /// rule was created, whichever is later).
    async fn silent_minutes(
        &self,
        rule: &AlertRule,
        device: DeviceUuid,
        registered: DateTime<Utc>,
        now: DateTime<Utc>,
    ) -> Result<f64, StoreError> {
        let last = self.readings.last_seen(&[device]).await?;
        let since = last.unwrap_or(registered.max(rule.created_at));
        // Whole minutes: the value changes once a minute, not at every tick, so a quiet device
        // costs a write a minute, not one a tick.
        Ok((now - since).num_minutes().max(0) as f64)
    }
}

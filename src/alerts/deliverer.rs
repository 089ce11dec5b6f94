//! The deliverer: a task that sends the outbox's due events, signed, and records each attempt.
//!
//! At least once: an event leaves the outbox only when a 2xx answer was recorded, so a process
//! killed mid-request sends it again after its restart (or another replica does, once the lease
//! has run out). In order per (rule, device): the store hands out only the oldest pending event
//! of a pair. A failed attempt is retried after a doubling delay ([`backoff`]) for a day after
//! the event; then it is marked failed, and the pair's next event may go.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use chrono::{DateTime, TimeDelta, Utc};
use tokio::sync::{Notify, Semaphore};

use super::client::WebhookClient;
use super::sign::signature;
use crate::clock::Clock;
use crate::metrics::ServerMetrics;
use crate::store::alerts::{Attempt, Outgoing};
use crate::store::{AlertStore, StoreError};

/// How long an event is retried after it happened.
pub const RETRY_FOR: TimeDelta = TimeDelta::hours(24);
/// The longest wait between two attempts.
pub const MAX_BACKOFF: TimeDelta = TimeDelta::hours(1);
/// Events sent at once by one process.
const IN_FLIGHT: usize = 32;

/// What the deliverer uses.
#[derive(Debug)]
pub struct Deliverer {
    /// The outbox.
    pub alerts: Arc<dyn AlertStore>,
    /// The client.
    pub client: WebhookClient,
    /// Where "now" comes from (due times, signatures, the day of retries).
    pub clock: Arc<dyn Clock>,
    /// Wakes it when an event is recorded.
    pub wake: Arc<Notify>,
    /// The wait after a failed attempt, doubled at each further one.
    pub retry_base: Duration,
    /// How long a claimed event is this process's: longer than an attempt takes.
    pub lease: Duration,
    /// How often it looks for due events when not woken.
    pub tick: Duration,
    /// Where deliveries and failed attempts are counted.
    pub metrics: Arc<ServerMetrics>,
}

/// The wait before the attempt after `attempts` failed ones: `base`, doubled each time, at most
/// [`MAX_BACKOFF`].
pub fn backoff(base: Duration, attempts: u32) -> TimeDelta {
    let base = TimeDelta::from_std(base).unwrap_or(MAX_BACKOFF);
    let factor = 1_i32
        .checked_shl(attempts.saturating_sub(1).min(30))
        .unwrap_or(i32::MAX);
    base.checked_mul(factor)
        .unwrap_or(MAX_BACKOFF)
        .min(MAX_BACKOFF)
}

impl Deliverer {
    /// Sends due events until the task is aborted. Each attempt runs as a task of its own, at
    /// most [`IN_FLIGHT`] at once, and the next events are claimed as soon as one ends: a slow
    /// receiver holds up only its own rule and device, never another rule's events (it would, for
    /// up to the attempt timeout, if attempts were waited for in rounds). An attempt in flight when
    /// the task is aborted runs to its end (bounded by the timeout) and records its outcome.
    pub async fn run(self) {
        let this = Arc::new(self);
        let slots = Arc::new(Semaphore::new(IN_FLIGHT));
        loop {
            let free = slots.available_permits();
            let mut claimed = 0;
            if free > 0 {
                match this.claim(free).await {
                    Ok(due) => {
                        claimed = due.len();
                        for event in due {
                            let Ok(slot) = Arc::clone(&slots).try_acquire_owned() else {
                                break;
                            };
                            let attempt = Arc::clone(&this);
                            tokio::spawn(async move {
                                if let Err(error) = attempt.attempt(event).await {
                                    tracing::warn!(error = %crate::telemetry::chain(&error), "recording an alert delivery failed; the event is sent again once its lease runs out");
                                }
                                drop(slot);
                                // A slot is free: claim again without waiting for the tick.
                                attempt.wake.notify_one();
                            });
                        }
                    }
                    Err(error) => {
                        tracing::warn!(error = %crate::telemetry::chain(&error), "claiming alert events failed; trying again");
                    }
                }
            }
            if claimed == 0 || claimed < free {
                let _ = tokio::time::timeout(this.tick, this.wake.notified()).await;
            }
        }
    }

    /// Leases up to `max` due events.
    async fn claim(&self, max: usize) -> Result<Vec<Outgoing>, StoreError> {
        let now = self.clock.now();
        let lease = TimeDelta::from_std(self.lease).unwrap_or(MAX_BACKOFF);
        self.alerts.claim(now, now + lease, max).await
    }

    /// One attempt at one event, recorded.
    async fn attempt(&self, event: Outgoing) -> Result<(), StoreError> {
        let sent_at = self.clock.now();
        let header = signature(&event.secret, sent_at.timestamp(), event.body.as_bytes());
        let answer = self
            .client
            .send(&event.url, &header, Bytes::from(event.body.clone()))
            .await;
        let now = self.clock.now();
        let attempt = match answer {
            Ok(status) if (200..300).contains(&status) => Attempt::Delivered(status),
            Ok(status) => self.failed(&event, Some(status), format!("answered {status}"), now),
            Err(error) => self.failed(&event, None, error.to_string(), now),
        };
        match &attempt {
            Attempt::Delivered(_) => self.metrics.alert_delivered(),
            Attempt::Failed { retry_at, .. } => {
                self.metrics.alert_attempt_failed(retry_at.is_none());
            }
        }
        match &attempt {
            Attempt::Delivered(status) => {
                tracing::info!(event = %event.event, rule = %event.rule, status, "alert event delivered");
            }
            Attempt::Failed {
                error, retry_at, ..
            } => {
                tracing::warn!(event = %event.event, rule = %event.rule, %error, retry_at = ?retry_at, "alert event not delivered");
            }
        }
        self.alerts.settle(event.event, &attempt, now).await
    }

    /// A failed attempt, with its next one unless the day of retries is over.
    fn failed(
        &self,
        event: &Outgoing,
        status: Option<u16>,
        error: String,
        now: DateTime<Utc>,
    ) -> Attempt {
        let until = event.created_at + RETRY_FOR;
        let retry_at =
            (now < until).then(|| (now + backoff(self.retry_base, event.attempts + 1)).min(until));
        Attempt::Failed {
            status,
            error,
            retry_at,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_backoff_doubles_up_to_an_hour() {
        let base = Duration::from_secs(10);
        assert_eq!(backoff(base, 1), TimeDelta::seconds(10));
        assert_eq!(backoff(base, 2), TimeDelta::seconds(20));
        assert_eq!(backoff(base, 4), TimeDelta::seconds(80));
        assert_eq!(backoff(base, 12), MAX_BACKOFF);
        assert_eq!(backoff(base, u32::MAX), MAX_BACKOFF);
    }
}

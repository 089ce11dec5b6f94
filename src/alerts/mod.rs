//! Alerts behind the commit: the evaluator and the deliverer, two background tasks tied to an
//! [`AlertsGuard`] whose drop stops them.
//!
//! - [`evaluator`]: every tick, reads what the reading store committed and moves each (rule,
//!   device) state; every move is recorded with its event in one transaction of the
//!   [`AlertStore`] (`src/store/alerts.rs`), never on an upload's path.
//! - [`deliverer`]: sends the outbox's due events, signed ([`sign`]), through a client that
//!   refuses internal addresses at connect time ([`client`]), retrying with backoff for a day.
//!
//! Both run in every process: on the embedded store there is one; on PostgreSQL the store's
//! locking makes replicas agree (one event per transition, one sender per event).

pub mod client;
pub mod deliverer;
pub mod evaluator;
pub mod sign;

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Notify;
use tokio::task::JoinHandle;

use self::client::WebhookClient;
use self::deliverer::Deliverer;
use self::evaluator::Evaluator;
use crate::clock::Clock;
use crate::domain::alert::TargetPolicy;
use crate::metrics::ServerMetrics;
use crate::store::{AlertStore, DeviceStore, ReadingStore};
use crate::tls::TlsError;

/// How alerts run (`AIRQ_ALERTS_*`).
#[derive(Debug, Clone, Copy)]
pub struct AlertsConfig {
    /// Which webhook targets are allowed.
    pub policy: TargetPolicy,
    /// How often the evaluator runs, and the deliverer looks for due events when not woken.
    pub tick: Duration,
    /// The wait after a first failed attempt (doubled at each further one, at most an hour).
    pub retry_base: Duration,
    /// How long one attempt may take, connection included.
    pub timeout: Duration,
    /// Events are recorded but not sent (no deliverer runs).
    pub paused: bool,
}

impl Default for AlertsConfig {
    fn default() -> Self {
        Self {
            policy: TargetPolicy::default(),
            tick: Duration::from_secs(1),
            retry_base: Duration::from_secs(10),
            timeout: Duration::from_secs(10),
            paused: false,
        }
    }
}

/// What the routes need of the running alerts.
#[derive(Debug, Clone)]
pub struct Alerts {
    /// Rules, states and the outbox.
    pub store: Arc<dyn AlertStore>,
    /// Which webhook targets are allowed.
    pub policy: TargetPolicy,
    /// Wakes the deliverer (a test event was recorded).
    pub wake: Arc<Notify>,
}

/// Stops the evaluator and the deliverer when dropped.
#[derive(Debug)]
pub struct AlertsGuard {
    tasks: Vec<JoinHandle<()>>,
}

impl Drop for AlertsGuard {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

/// Starts the evaluator and the deliverer.
pub fn start(
    store: Arc<dyn AlertStore>,
    devices: Arc<dyn DeviceStore>,
    readings: Arc<dyn ReadingStore>,
    clock: Arc<dyn Clock>,
    config: AlertsConfig,
    metrics: Arc<ServerMetrics>,
) -> Result<(Alerts, AlertsGuard), TlsError> {
    let wake = Arc::new(Notify::new());
    let client = WebhookClient::new(config.policy, config.timeout)?;
    let mut evaluator = Evaluator::new(
        Arc::clone(&store),
        devices,
        readings,
        Arc::clone(&clock),
        config.tick,
        Arc::clone(&wake),
    );
    let tick = config.tick;
    let evaluating = tokio::spawn(async move {
        let mut ticks = tokio::time::interval(tick);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            ticks.tick().await;
            if let Err(error) = evaluator.pass().await {
                tracing::warn!(error = %crate::telemetry::chain(&error), "evaluating alert rules failed; the next tick tries again");
            }
        }
    });
    let deliverer = Deliverer {
        alerts: Arc::clone(&store),
        client,
        clock,
        wake: Arc::clone(&wake),
        retry_base: config.retry_base,
        // An attempt takes at most the timeout (connecting included); the lease outlasts it, and
        // a process killed mid-attempt holds its events no longer than that after its death.
        lease: config.timeout * 2,
        tick,
        metrics,
    };
    let mut tasks = vec![evaluating];
    if config.paused {
        tracing::warn!(
            "alert deliveries are paused (AIRQ_ALERTS_PAUSED): events wait in the outbox"
        );
    } else {
        tasks.push(tokio::spawn(deliverer.run()));
    }
    Ok((
        Alerts {
            store,
            policy: config.policy,
            wake,
        },
        AlertsGuard { tasks },
    ))
}

//! Where "now" comes from.
//!
//! The status rule (online within 20 minutes) and the one-hour averaging window depend on the
//! current time. Everything asks a [`Clock`] instead of the system, so tests move time forward
//! instead of sleeping.

use std::fmt;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;

use chrono::{DateTime, TimeDelta, Utc};

/// A source of the current instant.
pub trait Clock: Send + Sync + fmt::Debug {
    /// The current instant, in UTC.
    fn now(&self) -> DateTime<Utc>;
}

/// The system's wall clock: what production uses.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> DateTime<Utc> {
        Utc::now()
    }
}

/// A clock that stands still until told to move; shared by cloning.
#[derive(Debug, Clone)]
pub struct ManualClock {
    micros: Arc<AtomicI64>,
}

impl ManualClock {
    /// A clock that reads `start` until it is moved.
    pub fn new(start: DateTime<Utc>) -> Self {
        Self {
            micros: Arc::new(AtomicI64::new(start.timestamp_micros())),
        }
    }

    /// Sets the current instant.
    pub fn set(&self, now: DateTime<Utc>) {
        self.micros.store(now.timestamp_micros(), Ordering::SeqCst);
    }

    /// Moves the current instant forward (or back, for a negative delta).
    pub fn advance(&self, by: TimeDelta) {
        let micros = by.num_microseconds().unwrap_or(i64::MAX);
        self.micros.fetch_add(micros, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now(&self) -> DateTime<Utc> {
        DateTime::from_timestamp_micros(self.micros.load(Ordering::SeqCst)).unwrap_or_default()
    }
}

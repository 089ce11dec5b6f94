//! The batch writer's tuning: how large a batch grows, how long its first upload waits for
//! company, how many uploads may queue in front of it, and how a failed write is retried.

use std::time::Duration;

/// The batch writer's tuning.
#[derive(Debug, Clone, Copy)]
pub struct BatchConfig {
    /// Flush when this many rows are buffered.
    pub max_rows: usize,
    /// Flush at the latest this long after the first buffered row.
    pub max_delay: Duration,
    /// Capacity of the queue in front of the writer.
    pub queue: usize,
    /// Retries of a failed flush before giving up.
    pub retries: u32,
    /// Pause before the first retry; doubles per retry.
    pub retry_backoff: Duration,
}

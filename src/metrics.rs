//! Process counters, served as Prometheus text at `GET /metrics`.
//!
//! Plain atomics rather than a metrics framework: a dozen counters do not need one, and an
//! upload costs one relaxed increment per counter it touches.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::http::rate_limit::Limit;

/// The counters of one process.
#[derive(Debug, Default)]
pub struct ServerMetrics {
    responses: [AtomicU64; 5],
    batches: AtomicU64,
    batch_rows: AtomicU64,
    batch_failures: AtomicU64,
    flush_retries: AtomicU64,
    flush_micros: AtomicU64,
    rate_limited: [AtomicU64; Limit::ALL.len()],
}

impl ServerMetrics {
    /// Counts a response by its status class (1xx … 5xx).
    pub fn response(&self, status: u16) {
        let class = usize::from(status / 100).clamp(1, 5) - 1;
        self.responses[class].fetch_add(1, Ordering::Relaxed);
    }

    /// Counts a committed batch of `rows` readings that took `micros` to write.
    pub fn batch_committed(&self, rows: usize, micros: u64) {
        self.batches.fetch_add(1, Ordering::Relaxed);
        self.batch_rows.fetch_add(rows as u64, Ordering::Relaxed);
        self.flush_micros.fetch_add(micros, Ordering::Relaxed);
    }

    /// Counts a batch that could not be committed.
    pub fn batch_failed(&self) {
        self.batch_failures.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts a retried flush.
    pub fn flush_retried(&self) {
        self.flush_retries.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts a request refused by `limit`.
    pub fn rate_limited(&self, limit: Limit) {
        self.rate_limited[limit as usize].fetch_add(1, Ordering::Relaxed);
    }

    /// The Prometheus text exposition of every counter.
    pub fn render(&self) -> String {
        let mut text = String::new();
        let _ = writeln!(
            text,
            "# HELP airq_http_responses_total HTTP responses by status class."
        );
        let _ = writeln!(text, "# TYPE airq_http_responses_total counter");
        for (index, count) in self.responses.iter().enumerate() {
            let _ = writeln!(
                text,
                "airq_http_responses_total{{class=\"{}xx\"}} {}",
                index + 1,
                count.load(Ordering::Relaxed)
            );
        }
        let _ = writeln!(
            text,
            "# HELP airq_rate_limited_total Requests refused with 429, by limit."
        );
        let _ = writeln!(text, "# TYPE airq_rate_limited_total counter");
        for limit in Limit::ALL {
            let _ = writeln!(
                text,
                "airq_rate_limited_total{{limit=\"{}\"}} {}",
                limit.as_str(),
                self.rate_limited[limit as usize].load(Ordering::Relaxed)
            );
        }
        let counters = [
            (
                "airq_batches_committed_total",
                "Batches of readings committed.",
                &self.batches,
            ),
            (
                "airq_readings_committed_total",
                "Readings committed.",
                &self.batch_rows,
            ),
            (
                "airq_batches_failed_total",
                "Batches answered with 500 after retries.",
                &self.batch_failures,
            ),
            (
                "airq_flush_retries_total",
                "Retried batch writes.",
                &self.flush_retries,
            ),
            (
                "airq_flush_seconds_total",
                "Time spent committing batches.",
                &self.flush_micros,
            ),
        ];
        for (name, help, counter) in counters {
            let value = counter.load(Ordering::Relaxed);
            let _ = writeln!(text, "# HELP {name} {help}");
            let _ = writeln!(text, "# TYPE {name} counter");
            if name.ends_with("_seconds_total") {
                let _ = writeln!(text, "{name} {}", value as f64 / 1e6);
            } else {
                let _ = writeln!(text, "{name} {value}");
            }
        }
        text
    }
}

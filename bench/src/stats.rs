//! Measurements: latency histograms (HDR, microseconds), answers by status, failures by kind, and
//! their rendering as a human summary and as JSON.
//!
//! Two latencies are kept per request:
//! - `latency` (the headline): until the end of the answer, from the request's *intended* start.
//!   Closed loop: the moment it was sent. Open loop: its slot in the schedule when the worker was
//!   already late for it (every earlier request of that worker was slow), so waiting caused by a
//!   slow server is counted and a stall is not hidden by sending less during it (no coordinated
//!   omission); when the worker was on time it sleeps until the slot, and the clock starts when it
//!   wakes (the timer's up-to-1 ms lateness is the generator's, not the server's).
//! - `service`: from the moment the request was actually sent to the end of its answer.

use std::collections::BTreeMap;
use std::time::Duration;

use hdrhistogram::Histogram;
use serde_json::{json, Value};

use crate::client::Failure;

/// Highest recordable latency: one hour, in microseconds.
const MAX_MICROS: u64 = 3_600_000_000;

fn histogram() -> Histogram<u64> {
    // Bounds are constants that hdrhistogram accepts; failing here would be a programming error.
    Histogram::new_with_bounds(1, MAX_MICROS, 3).expect("valid histogram bounds")
}

/// What one worker (or, merged, a whole run) measured.
#[derive(Debug, Clone)]
pub struct Recorder {
    latency: Histogram<u64>,
    service: Histogram<u64>,
    statuses: BTreeMap<u16, u64>,
    failures: BTreeMap<&'static str, u64>,
    ok: u64,
}

impl Default for Recorder {
    fn default() -> Self {
        Self {
            latency: histogram(),
            service: histogram(),
            statuses: BTreeMap::new(),
            failures: BTreeMap::new(),
            ok: 0,
        }
    }
}

fn micros(duration: Duration) -> u64 {
    u64::try_from(duration.as_micros())
        .unwrap_or(u64::MAX)
        .max(1)
}

impl Recorder {
    /// An answer with `status`; `ok` says whether it is the expected one.
    pub fn answer(&mut self, latency: Duration, service: Duration, status: u16, ok: bool) {
        self.latency.saturating_record(micros(latency));
        self.service.saturating_record(micros(service));
        *self.statuses.entry(status).or_default() += 1;
        if ok {
            self.ok += 1;
        }
    }

    /// A request that got no answer.
    pub fn failure(&mut self, failure: Failure) {
        *self.failures.entry(failure.name()).or_default() += 1;
    }

    /// Adds another recorder's measurements.
    pub fn merge(&mut self, other: &Recorder) {
        // Same bounds on both sides, so adding cannot fail.
        let _ = self.latency.add(&other.latency);
        let _ = self.service.add(&other.service);
        for (status, count) in &other.statuses {
            *self.statuses.entry(*status).or_default() += count;
        }
        for (kind, count) in &other.failures {
            *self.failures.entry(kind).or_default() += count;
        }
        self.ok += other.ok;
    }

    /// Answers received (any status).
    pub fn answers(&self) -> u64 {
        self.statuses.values().sum()
    }

    /// Answers with the expected status.
    pub fn ok(&self) -> u64 {
        self.ok
    }

    /// Requests that got no answer at all.
    pub fn unanswered(&self) -> u64 {
        self.failures.values().sum()
    }

    /// Requests sent: answered or not.
    pub fn requests(&self) -> u64 {
        self.answers() + self.unanswered()
    }

    /// Requests that failed: unexpected status or no answer.
    pub fn errors(&self) -> u64 {
        self.answers() - self.ok + self.unanswered()
    }

    /// The latency at `quantile` in milliseconds.
    pub fn latency_ms(&self, quantile: f64) -> f64 {
        ms(self.latency.value_at_quantile(quantile))
    }
}

fn ms(micros: u64) -> f64 {
    micros as f64 / 1000.0
}

fn percentiles(histogram: &Histogram<u64>) -> Value {
    if histogram.is_empty() {
        return Value::Null;
    }
    json!({
        "p50_ms": ms(histogram.value_at_quantile(0.50)),
        "p90_ms": ms(histogram.value_at_quantile(0.90)),
        "p99_ms": ms(histogram.value_at_quantile(0.99)),
        "p999_ms": ms(histogram.value_at_quantile(0.999)),
        "max_ms": ms(histogram.max()),
        "mean_ms": histogram.mean() / 1000.0,
    })
}

fn percentile_line(histogram: &Histogram<u64>) -> String {
    if histogram.is_empty() {
        return "-".into();
    }
    format!(
        "p50 {:.3}  p90 {:.3}  p99 {:.3}  p99.9 {:.3}  max {:.3}",
        ms(histogram.value_at_quantile(0.50)),
        ms(histogram.value_at_quantile(0.90)),
        ms(histogram.value_at_quantile(0.99)),
        ms(histogram.value_at_quantile(0.999)),
        ms(histogram.max()),
    )
}

/// A finished run of one workload.
#[derive(Debug, Clone)]
pub struct RunSummary {
    /// What ran (for the report).
    pub label: String,
    /// Closed or open loop, connections.
    pub mode: String,
    /// Wall time from the first request to the last answer.
    pub elapsed: Duration,
    /// The merged measurements.
    pub recorder: Recorder,
    /// Open loop: scheduled requests never sent because the run hit its hard stop first.
    pub behind: u64,
}

impl RunSummary {
    /// Expected answers per second of wall time.
    pub fn throughput(&self) -> f64 {
        let secs = self.elapsed.as_secs_f64();
        if secs > 0.0 {
            self.recorder.ok() as f64 / secs
        } else {
            0.0
        }
    }

    /// The result as JSON.
    pub fn to_json(&self) -> Value {
        let r = &self.recorder;
        json!({
            "label": self.label,
            "mode": self.mode,
            "elapsed_s": self.elapsed.as_secs_f64(),
            "requests": r.requests(),
            "ok": r.ok(),
            "errors": r.errors(),
            "statuses": r.statuses.iter().map(|(k, v)| (k.to_string(), json!(v))).collect::<serde_json::Map<_, _>>(),
            "failures": r.failures.iter().map(|(k, v)| ((*k).to_string(), json!(v))).collect::<serde_json::Map<_, _>>(),
            "not_sent_behind_schedule": self.behind,
            "throughput_rps": self.throughput(),
            "latency": percentiles(&r.latency),
            "service_time": percentiles(&r.service),
        })
    }

    /// The result for a person, several lines, indented.
    pub fn render(&self) -> String {
        let r = &self.recorder;
        let statuses = r
            .statuses
            .iter()
            .map(|(status, count)| format!("{status}={count}"))
            .chain(
                r.failures
                    .iter()
                    .map(|(kind, count)| format!("{kind}={count}")),
            )
            .collect::<Vec<_>>()
            .join(" ");
        let mut text = format!(
            "{} [{}]\n  requests {}  ok {}  errors {}  in {:.2} s  throughput {:.0} req/s\n  latency ms  {}\n  service ms  {}\n  answers     {}",
            self.label,
            self.mode,
            r.requests(),
            r.ok(),
            r.errors(),
            self.elapsed.as_secs_f64(),
            self.throughput(),
            percentile_line(&r.latency),
            percentile_line(&r.service),
            if statuses.is_empty() { "-".into() } else { statuses },
        );
        if self.behind > 0 {
            text.push_str(&format!(
                "\n  NOT SENT    {} scheduled requests (the generator fell behind the schedule)",
                self.behind
            ));
        }
        text
    }
}

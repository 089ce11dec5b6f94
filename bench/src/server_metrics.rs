//! The server's own counters around a run: `GET /metrics` (Prometheus text) before and after,
//! and what their difference says about the batch writer — commits per second, rows per group
//! commit and the time until a commit was durable, the figures that explain upload throughput.
//!
//! No "busy" share: a batch's time runs until it is durable, and the embedded store appends the
//! next batch while the last one syncs, so the times of consecutive batches overlap and their sum
//! says nothing about how busy the writer was.
//!
//! Optional: a server without `/metrics` (or with other names) yields no section.

use std::collections::BTreeMap;
use std::time::Duration;

use hyper::StatusCode;
use serde_json::{json, Value};

use crate::client::{Lane, Target};

/// Unlabelled samples by metric name.
pub type Sample = BTreeMap<String, f64>;

/// Reads `/metrics`; `None` when the server has none.
pub async fn scrape(target: &Target) -> Option<Sample> {
    let mut lane = Lane::new(target.addr);
    let answer = lane
        .send(target.get("/metrics", None), Duration::from_secs(10))
        .await
        .ok()?;
    if answer.status != StatusCode::OK {
        return None;
    }
    let text = String::from_utf8_lossy(&answer.body);
    let sample: Sample = text
        .lines()
        .filter(|line| !line.starts_with('#') && !line.contains('{'))
        .filter_map(|line| {
            let mut parts = line.split_whitespace();
            let name = parts.next()?;
            let value = parts.next()?.parse::<f64>().ok()?;
            Some((name.to_owned(), value))
        })
        .collect();
    (!sample.is_empty()).then_some(sample)
}

/// The batch writer's work between two samples, over `elapsed` of wall time.
pub fn batch_report(before: &Sample, after: &Sample, elapsed: Duration) -> Option<Value> {
    let delta = |name: &str| Some(after.get(name)? - before.get(name).copied().unwrap_or(0.0));
    let batches = delta("airq_batches_committed_total")?;
    let readings = delta("airq_readings_committed_total")?;
    let flush_seconds = delta("airq_flush_seconds_total")?;
    let per_batch = |value: f64| if batches > 0.0 { value / batches } else { 0.0 };
    Some(json!({
        "batches_committed": batches,
        "readings_committed": readings,
        "batches_failed": delta("airq_batches_failed_total"),
        "flush_retries": delta("airq_flush_retries_total"),
        "rows_per_batch": per_batch(readings),
        "flush_ms_mean": per_batch(flush_seconds * 1000.0),
        "commits_per_second": batches / elapsed.as_secs_f64().max(1e-9),
    }))
}

/// For a person.
pub fn render(report: &Value) -> String {
    format!(
        "batch writer: {} commits, {:.0} per second, {:.1} rows per commit, {:.3} ms from a commit's start until durable",
        report["batches_committed"],
        report["commits_per_second"].as_f64().unwrap_or(0.0),
        report["rows_per_batch"].as_f64().unwrap_or(0.0),
        report["flush_ms_mean"].as_f64().unwrap_or(0.0),
    )
}

/// What a write run measured besides the client's figures.
#[derive(Debug)]
pub struct Measured {
    /// The client's figures.
    pub summary: crate::stats::RunSummary,
    /// The batch writer's counters over the run, when the server has `/metrics`.
    pub batches: Option<Value>,
    /// The server's memory over the run, when sampled.
    pub memory: Option<crate::rss::RssReport>,
}

/// When some requests of a run went unanswered, waits a moment: a request the client gave up on
/// may still be committed, and should land before anything is counted.
pub async fn settle(summary: &crate::stats::RunSummary) {
    if summary.recorder.unanswered() > 0 {
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
}

/// Runs a write workload between two scrapes of the server's counters, stops the memory
/// sampler, and, when some requests went unanswered, gives what the server may still commit a
/// moment to land before anything is counted.
pub async fn measured_run<W: crate::load::Workload>(
    target: &Target,
    workload: std::sync::Arc<W>,
    plan: &crate::load::Plan,
    sampler: Option<crate::rss::Sampler>,
) -> Measured {
    let before = scrape(target).await;
    let summary = crate::load::run(target, workload, plan, None).await;
    let batches = match before {
        Some(before) => scrape(target)
            .await
            .and_then(|after| batch_report(&before, &after, summary.elapsed)),
        None => None,
    };
    let memory = match sampler {
        Some(sampler) => Some(sampler.finish().await),
        None => None,
    };
    settle(&summary).await;
    Measured {
        summary,
        batches,
        memory,
    }
}

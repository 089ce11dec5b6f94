//! The load driver: C workers, one keep-alive connection each, sending a [`Workload`]'s requests
//! in closed loop (each worker sends its next request as soon as the previous one is answered) or
//! in open loop (request `i` is due at `start + i / rate`, whatever happened to earlier ones).
//!
//! Every run is bounded: by its duration (no request is *started* after it), by an optional
//! request count, by a per-request timeout, and by a hard stop a grace period after the duration
//! (open loop: requests still waiting for their turn then are counted as "not sent"). An external
//! stop flag ends a background load early.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use hyper::{Request, StatusCode};
use tokio::time::Instant;

use crate::client::{Answer, Body, Failure, Lane, Target};
use crate::stats::{Recorder, RunSummary};

/// What to send.
pub trait Workload: Send + Sync + 'static {
    /// Request number `index` (0, 1, 2, … across all workers) and a tag handed back to
    /// [`Workload::observe`]; `None` when the workload has no request with that number.
    fn request(&self, index: u64) -> Option<(Request<Body>, u32)>;

    /// Whether `status` is the expected answer.
    fn success(&self, status: StatusCode) -> bool;

    /// Sees every answer (after it was recorded).
    fn observe(&self, _tag: u32, _answer: &Answer) {}

    /// Sees every request that got no answer (after it was recorded).
    fn failed(&self, _tag: u32, _failure: Failure) {}
}

/// How to send it.
#[derive(Debug, Clone)]
pub struct Plan {
    /// Name in reports.
    pub label: String,
    /// Workers, one connection each.
    pub connections: usize,
    /// No request starts after this (measured from the start of the run).
    pub duration: Duration,
    /// Open loop at this many requests per second; closed loop when `None`.
    pub rate: Option<f64>,
    /// At most this many requests.
    pub max_requests: Option<u64>,
    /// Per request, connecting included.
    pub request_timeout: Duration,
    /// Open loop: how long after `duration` late requests may still be sent.
    pub grace: Duration,
    /// Print a progress line on stderr this often.
    pub progress: Option<Duration>,
}

impl Plan {
    /// "closed loop, C connections" or "open loop R req/s, C connections".
    pub fn mode_label(&self) -> String {
        match self.rate {
            Some(rate) => format!(
                "open loop {rate:.0} req/s, {} connections",
                self.connections
            ),
            None => format!("closed loop, {} connections", self.connections),
        }
    }
}

struct Shared {
    next: AtomicU64,
    answered: AtomicU64,
    stop: Arc<AtomicBool>,
}

/// Runs `workload` against `target` as `plan` says; `stop` ends it early when set.
pub async fn run<W: Workload>(
    target: &Target,
    workload: Arc<W>,
    plan: &Plan,
    stop: Option<Arc<AtomicBool>>,
) -> RunSummary {
    let shared = Arc::new(Shared {
        next: AtomicU64::new(0),
        answered: AtomicU64::new(0),
        stop: stop.unwrap_or_default(),
    });
    let start = Instant::now();
    let end = start + plan.duration;
    let hard_end = end
        + if plan.rate.is_some() {
            plan.grace
        } else {
            Duration::ZERO
        };
    let workers: Vec<_> = (0..plan.connections.max(1))
        .map(|_| {
            let shared = Arc::clone(&shared);
            let workload = Arc::clone(&workload);
            let plan = plan.clone();
            let addr = target.addr;
            tokio::spawn(async move {
                worker(addr, workload, &plan, &shared, start, end, hard_end).await
            })
        })
        .collect();
    let finished = Arc::new(AtomicBool::new(false));
    let progress = plan.progress.map(|every| {
        let shared = Arc::clone(&shared);
        let finished = Arc::clone(&finished);
        let label = plan.label.clone();
        tokio::spawn(async move {
            let mut last = (Instant::now(), 0u64);
            while !finished.load(Ordering::Relaxed) && Instant::now() < hard_end {
                tokio::time::sleep(every).await;
                let now = Instant::now();
                let answered = shared.answered.load(Ordering::Relaxed);
                let rate = (answered - last.1) as f64 / (now - last.0).as_secs_f64().max(1e-9);
                eprintln!(
                    "  [{label}] {:>6.1} s  {answered} answered  {rate:.0} req/s",
                    (now - start).as_secs_f64()
                );
                last = (now, answered);
            }
        })
    });
    let mut recorder = Recorder::default();
    for worker in workers {
        if let Ok(part) = worker.await {
            recorder.merge(&part);
        }
    }
    let elapsed = start.elapsed();
    finished.store(true, Ordering::Relaxed);
    if let Some(progress) = progress {
        progress.abort();
    }
    let behind = match plan.rate {
        Some(rate) if !shared.stop.load(Ordering::Relaxed) => {
            let scheduled = (plan.duration.as_secs_f64() * rate).ceil() as u64;
            let scheduled = plan
                .max_requests
                .map_or(scheduled, |max| scheduled.min(max));
            let sent = recorder.requests();
            scheduled.saturating_sub(sent)
        }
        _ => 0,
    };
    RunSummary {
        label: plan.label.clone(),
        mode: plan.mode_label(),
        elapsed,
        recorder,
        behind,
    }
}

async fn worker<W: Workload>(
    addr: std::net::SocketAddr,
    workload: Arc<W>,
    plan: &Plan,
    shared: &Shared,
    start: Instant,
    end: Instant,
    hard_end: Instant,
) -> Recorder {
    let mut lane = Lane::new(addr);
    let mut recorder = Recorder::default();
    loop {
        if shared.stop.load(Ordering::Relaxed) || Instant::now() >= hard_end {
            break;
        }
        let index = shared.next.fetch_add(1, Ordering::Relaxed);
        if plan.max_requests.is_some_and(|max| index >= max) {
            break;
        }
        let intended = match plan.rate {
            Some(rate) => {
                let due = start + Duration::from_secs_f64(index as f64 / rate);
                if due >= end {
                    break;
                }
                if due > Instant::now() {
                    // On time: wait for the slot. The timer wakes up to a millisecond late; that
                    // is the generator's delay, not the server's, so the clock starts at wake-up.
                    tokio::time::sleep_until(due).await;
                    if shared.stop.load(Ordering::Relaxed) || Instant::now() >= hard_end {
                        break;
                    }
                    Instant::now()
                } else {
                    // Late because every earlier request of this worker was slow: the wait
                    // since the slot counts (no coordinated omission).
                    due
                }
            }
            None => {
                let now = Instant::now();
                if now >= end {
                    break;
                }
                now
            }
        };
        let Some((request, tag)) = workload.request(index) else {
            break;
        };
        let sent = Instant::now();
        match lane.send(request, plan.request_timeout).await {
            Ok(answer) => {
                let done = Instant::now();
                let ok = workload.success(answer.status);
                recorder.answer(done - intended, done - sent, answer.status.as_u16(), ok);
                shared.answered.fetch_add(1, Ordering::Relaxed);
                workload.observe(tag, &answer);
            }
            Err(failure) => {
                recorder.failure(failure);
                workload.failed(tag, failure);
                if failure == Failure::Connect {
                    // The server is not there (yet): do not spin.
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            }
        }
    }
    recorder
}

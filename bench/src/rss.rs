//! The server's memory: `VmRSS` (resident now) and `VmHWM` (the peak since the process started)
//! from `/proc/<pid>/status`, sampled on a timer during a run.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::BoxError;

/// One reading of `/proc/<pid>/status`, in KiB.
#[derive(Debug, Clone, Copy, Default)]
pub struct Memory {
    /// Resident set size now.
    pub rss_kib: u64,
    /// Peak resident set size since the process started.
    pub hwm_kib: u64,
}

/// Reads the memory of `pid`.
pub fn read(pid: u32) -> Result<Memory, BoxError> {
    let path = PathBuf::from(format!("/proc/{pid}/status"));
    let text = std::fs::read_to_string(&path)
        .map_err(|error| format!("reading {}: {error}", path.display()))?;
    let field = |name: &str| {
        text.lines()
            .find_map(|line| line.strip_prefix(name))
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|number| number.parse::<u64>().ok())
            .unwrap_or(0)
    };
    Ok(Memory {
        rss_kib: field("VmRSS:"),
        hwm_kib: field("VmHWM:"),
    })
}

/// What a sampler saw.
#[derive(Debug, Clone, Default)]
pub struct RssReport {
    /// The process sampled.
    pub pid: u32,
    /// Samples taken.
    pub samples: u64,
    /// Largest `VmRSS` sampled.
    pub max_rss_kib: u64,
    /// `VmRSS` at the first sample.
    pub first_rss_kib: u64,
    /// `VmRSS` at the last sample.
    pub last_rss_kib: u64,
    /// `VmHWM` at the last sample (peak over the process's whole life).
    pub hwm_kib: u64,
}

fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

impl RssReport {
    /// For reports.
    pub fn to_json(&self) -> Value {
        json!({
            "pid": self.pid,
            "samples": self.samples,
            "max_rss_mib": mib(self.max_rss_kib),
            "first_rss_mib": mib(self.first_rss_kib),
            "last_rss_mib": mib(self.last_rss_kib),
            "peak_since_start_mib": mib(self.hwm_kib),
        })
    }

    /// For a person.
    pub fn render(&self) -> String {
        format!(
            "server RSS (pid {}, {} samples): max {:.1} MiB, first {:.1} MiB, last {:.1} MiB, peak since start (VmHWM) {:.1} MiB",
            self.pid,
            self.samples,
            mib(self.max_rss_kib),
            mib(self.first_rss_kib),
            mib(self.last_rss_kib),
            mib(self.hwm_kib)
        )
    }
}

/// Samples a process in the background until [`Sampler::finish`].
#[derive(Debug)]
pub struct Sampler {
    stop: Arc<AtomicBool>,
    task: JoinHandle<RssReport>,
}

impl Sampler {
    /// Samples `pid` every `every`, for at most `limit`.
    pub fn start(pid: u32, every: Duration, limit: Duration) -> Result<Self, BoxError> {
        read(pid)?;
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        let task = tokio::spawn(async move {
            let deadline = Instant::now() + limit;
            let mut report = RssReport {
                pid,
                ..RssReport::default()
            };
            loop {
                let Ok(memory) = read(pid) else { break };
                if report.samples == 0 {
                    report.first_rss_kib = memory.rss_kib;
                }
                report.samples += 1;
                report.max_rss_kib = report.max_rss_kib.max(memory.rss_kib);
                report.last_rss_kib = memory.rss_kib;
                report.hwm_kib = memory.hwm_kib;
                if flag.load(Ordering::Relaxed) || Instant::now() >= deadline {
                    break;
                }
                tokio::time::sleep(every).await;
            }
            report
        });
        Ok(Self { stop, task })
    }

    /// Stops sampling (after one last sample) and reports.
    pub async fn finish(self) -> RssReport {
        self.stop.store(true, Ordering::Relaxed);
        self.task.await.unwrap_or_default()
    }
}

/// An optional sampler for `pid`, for the length of a scenario.
pub fn maybe_start(pid: Option<u32>, limit: Duration) -> Result<Option<Sampler>, BoxError> {
    pid.map(|pid| Sampler::start(pid, Duration::from_millis(100), limit))
        .transpose()
}

/// The `rss` subcommand: samples `pid` for `duration` (or until it exits) and reports the maximum.
pub async fn run(pid: u32, duration: Duration, every: Duration) -> Result<Value, BoxError> {
    let sampler = Sampler::start(pid, every, duration)?;
    // Wait out the duration, or the process's end, whichever is first.
    let deadline = Instant::now() + duration;
    while Instant::now() < deadline && read(pid).is_ok() {
        tokio::time::sleep(every.min(Duration::from_millis(500))).await;
    }
    let report = sampler.finish().await;
    println!("{}", report.render());
    Ok(json!({ "scenario": "rss", "rss": report.to_json() }))
}

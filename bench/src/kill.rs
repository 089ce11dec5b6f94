//! The `kill` scenario: what a crash costs. The bench starts the server itself (`--server-bin`,
//! `--listen` from `--target`, `--data-dir`), registers a fleet, and drives single uploads
//! (`POST /api/v1/data`). At each `--kill-after` second it sends the server SIGKILL — no
//! shutdown, no drain, exactly a power cut for the process — starts it again on the same data
//! dir, and waits for `/readyz`; the load keeps going throughout (requests to a dead server fail
//! with `connect` or `io` and are not retried). Afterwards every reading acknowledged with a 201,
//! before or after a kill, must be stored: exit code 2 otherwise.
//!
//! Requests open when the server died (sent, not answered) are counted per kill: they were never
//! acknowledged, so the store may or may not hold them (they show up as *extra* when it does).
//! The bench stops the server it started at the end (SIGTERM via `kill`, SIGKILL after 10 s).

use std::fs::OpenOptions;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use hyper::{Request, StatusCode};
use serde_json::{json, Value};
use tokio::time::Instant;

use crate::cli::{secs, KillArgs, TargetArgs};
use crate::client::{Answer, Body, Failure, Lane, Target};
use crate::generator::UploadWorkload;
use crate::load::Workload;
use crate::uploads::Setup;
use crate::verify::Verdict;
use crate::{load, server_metrics, BoxError};

/// How to start the server.
#[derive(Debug, Clone)]
struct ServerCommand {
    bin: PathBuf,
    args: Vec<String>,
    log: PathBuf,
}

impl ServerCommand {
    fn start(&self) -> Result<Child, BoxError> {
        let log = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .map_err(|error| format!("opening {}: {error}", self.log.display()))?;
        let mut command = Command::new(&self.bin);
        // Benchmarks measure the server, not its rate limits: off unless the environment (or a
        // --server-arg) sets them.
        for limit in ["AIRQ_RATE_DEVICE_PER_MIN", "AIRQ_RATE_PUBLIC_PER_MIN"] {
            if std::env::var_os(limit).is_none() {
                command.env(limit, "0");
            }
        }
        command
            .args(&self.args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .map_err(|error| format!("starting {}: {error}", self.bin.display()).into())
    }
}

/// The server process; killed (SIGKILL) if dropped while still running, so an error on the way
/// never leaves it behind.
#[derive(Debug)]
struct Server(Option<Child>);

impl Server {
    fn pid(&self) -> u32 {
        self.0.as_ref().map_or(0, Child::id)
    }

    /// Waits until `/readyz` answers 200; fails when the process exits first or `timeout` passes.
    async fn ready(
        &mut self,
        target: &Target,
        timeout: Duration,
        log: &Path,
    ) -> Result<Duration, BoxError> {
        let started = Instant::now();
        let mut lane = Lane::new(target.addr);
        loop {
            let child = self.0.as_mut().ok_or("no server process")?;
            if let Some(status) = child.try_wait()? {
                return Err(format!(
                    "the server exited ({status}) before it was ready; see {}",
                    log.display()
                )
                .into());
            }
            let probe = lane
                .send(target.get("/readyz", None), Duration::from_secs(2))
                .await;
            if probe.is_ok_and(|answer| answer.status == StatusCode::OK) {
                return Ok(started.elapsed());
            }
            if started.elapsed() > timeout {
                return Err(format!(
                    "the server was not ready within {:.0} s; see {}",
                    timeout.as_secs_f64(),
                    log.display()
                )
                .into());
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// SIGKILL, and reaps the process.
    async fn kill(&mut self) -> Result<(), BoxError> {
        if let Some(mut child) = self.0.take() {
            child.kill()?;
            reap(&mut child, Duration::from_secs(10)).await?;
        }
        Ok(())
    }

    /// SIGTERM (through `kill(1)`: no unsafe code, no extra crate), so the server drains as it
    /// does in production; SIGKILL when that is impossible or it takes over 10 s.
    async fn stop(&mut self) -> Result<String, BoxError> {
        let Some(mut child) = self.0.take() else {
            return Ok("not running".into());
        };
        let signalled = Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|status| status.success());
        if signalled {
            if let Some(status) = reap(&mut child, Duration::from_secs(10)).await? {
                return Ok(format!("SIGTERM: {status}"));
            }
        }
        child.kill()?;
        let status = reap(&mut child, Duration::from_secs(10)).await?;
        Ok(format!(
            "SIGKILL: {}",
            status.map_or_else(|| "still running".to_owned(), |status| status.to_string())
        ))
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(mut child) = self.0.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// The exit status of `child` once it has exited, or `None` after `timeout`.
async fn reap(child: &mut Child, timeout: Duration) -> Result<Option<ExitStatus>, BoxError> {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(status) = child.try_wait()? {
            return Ok(Some(status));
        }
        if Instant::now() >= deadline {
            return Ok(None);
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Single uploads, with a count of the requests sent and not yet finished (answered or failed).
#[derive(Debug)]
struct Tracked {
    uploads: UploadWorkload,
    issued: AtomicU64,
    finished: AtomicU64,
}

impl Tracked {
    fn open(&self) -> u64 {
        let finished = self.finished.load(Ordering::SeqCst);
        self.issued.load(Ordering::SeqCst).saturating_sub(finished)
    }
}

impl Workload for Tracked {
    fn request(&self, index: u64) -> Option<(Request<Body>, u32)> {
        let request = self.uploads.request(index)?;
        self.issued.fetch_add(1, Ordering::SeqCst);
        Some(request)
    }

    fn success(&self, status: StatusCode) -> bool {
        self.uploads.success(status)
    }

    fn observe(&self, tag: u32, answer: &Answer) {
        self.uploads.observe(tag, answer);
        self.finished.fetch_add(1, Ordering::SeqCst);
    }

    fn failed(&self, tag: u32, failure: Failure) {
        self.uploads.failed(tag, failure);
        self.finished.fetch_add(1, Ordering::SeqCst);
    }
}

/// One crash and restart.
#[derive(Debug, Clone)]
struct Crash {
    at: Duration,
    open: u64,
    killed_pid: u32,
    started_pid: u32,
    ready_after: Duration,
}

impl Crash {
    fn to_json(&self) -> Value {
        json!({
            "at_s": self.at.as_secs_f64(),
            "requests_open": self.open,
            "killed_pid": self.killed_pid,
            "restarted_pid": self.started_pid,
            "ready_after_s": self.ready_after.as_secs_f64(),
        })
    }

    fn render(&self, number: usize) -> String {
        format!(
            "kill {number} at {:.2} s: SIGKILL to pid {} with {} requests open (not acknowledged, so not required); pid {} ready {:.2} s later",
            self.at.as_secs_f64(),
            self.killed_pid,
            self.open,
            self.started_pid,
            self.ready_after.as_secs_f64(),
        )
    }
}

/// The kill times: ascending, each within the run.
fn kill_times(args: &KillArgs) -> Result<Vec<Duration>, BoxError> {
    let mut times = args.kill_after.clone();
    times.sort_by(f64::total_cmp);
    if times.is_empty()
        || times
            .iter()
            .any(|at| !(*at > 0.0 && *at < args.load.duration))
    {
        return Err(format!(
            "--kill-after must lie within the run: above 0 and below --duration ({} s)",
            args.load.duration
        )
        .into());
    }
    Ok(times.into_iter().map(secs).collect())
}

/// Runs the scenario and prints its summary.
pub async fn run(args: &KillArgs) -> Result<Value, BoxError> {
    let started_at = chrono::Utc::now().to_rfc3339();
    let times = kill_times(args)?;
    let target = Target::parse(&args.target).await?;
    let connected = tokio::time::timeout(
        Duration::from_secs(1),
        tokio::net::TcpStream::connect(target.addr),
    )
    .await;
    if matches!(connected, Ok(Ok(_))) {
        return Err(format!(
            "something already listens on {}: `kill` starts (and kills) a server of its own",
            target.addr
        )
        .into());
    }
    std::fs::create_dir_all(&args.data_dir)
        .map_err(|error| format!("creating {}: {error}", args.data_dir.display()))?;
    let log = args
        .server_log
        .clone()
        .unwrap_or_else(|| args.data_dir.join("bench-server.log"));
    let mut server_args = vec![
        "--listen".to_owned(),
        target.addr.to_string(),
        "--data-dir".to_owned(),
        args.data_dir.display().to_string(),
    ];
    server_args.extend(args.server_args.iter().cloned());
    let command = ServerCommand {
        bin: args.server_bin.clone(),
        args: server_args,
        log: log.clone(),
    };
    let ready_timeout = secs(args.ready_timeout);

    let mut server = Server(Some(command.start()?));
    let first_ready = server.ready(&target, ready_timeout, &log).await?;
    eprintln!(
        "kill: server pid {} ready in {:.2} s (log: {})",
        server.pid(),
        first_ready.as_secs_f64(),
        log.display()
    );
    let target_args = TargetArgs {
        target: args.target.clone(),
        data_dir: args.data_dir.clone(),
        token: None,
        server_pid: None,
    };
    let setup = Setup::new(&target_args, &args.fleet, &args.load, args.verify, "crash").await?;
    let obtained = &setup.obtained;

    let workload = Arc::new(Tracked {
        uploads: UploadWorkload::new(
            target.clone(),
            &obtained.fleet,
            args.load.location_share,
            None,
        )?,
        issued: AtomicU64::new(0),
        finished: AtomicU64::new(0),
    });
    let plan = args.load.plan(&format!(
        "kill: POST /api/v1/data, SIGKILL at {}",
        args.kill_after
            .iter()
            .map(|at| format!("{at} s"))
            .collect::<Vec<_>>()
            .join(", ")
    ));
    eprintln!("{} against {}", plan.label, target.url);
    let stop = Arc::new(AtomicBool::new(false));
    let start = Instant::now();
    let crashes = async {
        let mut crashes = Vec::new();
        for at in &times {
            tokio::time::sleep_until(start + *at).await;
            let open = workload.open();
            let killed_pid = server.pid();
            server.kill().await?;
            let killed = Instant::now();
            eprintln!("kill: SIGKILL to pid {killed_pid} with {open} requests open; restarting");
            server = Server(Some(command.start()?));
            server.ready(&target, ready_timeout, &log).await?;
            crashes.push(Crash {
                at: killed - start,
                open,
                killed_pid,
                started_pid: server.pid(),
                ready_after: killed.elapsed(),
            });
            eprintln!(
                "kill: pid {} ready {:.2} s after the kill",
                server.pid(),
                killed.elapsed().as_secs_f64()
            );
        }
        Ok::<_, BoxError>(crashes)
    };
    let crashes = async {
        let outcome = crashes.await;
        if outcome.is_err() {
            // No server to load: end the run now and report the error.
            stop.store(true, Ordering::Relaxed);
        }
        outcome
    };
    let (summary, crashes) = tokio::join!(
        load::run(
            &target,
            Arc::clone(&workload),
            &plan,
            Some(Arc::clone(&stop))
        ),
        crashes
    );
    let crashes = crashes?;
    server_metrics::settle(&summary).await;
    let verdict = setup.verdict(&workload.uploads.acks()).await?;
    let stopped = server.stop().await?;

    println!("{}", summary.render());
    for (number, crash) in crashes.iter().enumerate() {
        println!("{}", crash.render(number + 1));
    }
    if let Some(verdict) = &verdict {
        println!("{}", verdict.render());
    }
    println!("server stopped ({stopped})");
    Ok(json!({
        "scenario": "kill",
        "target": target.url,
        "started_at": started_at,
        "server_bin": args.server_bin.display().to_string(),
        "server_args": args.server_args,
        "fleet": obtained.to_json(),
        "load": summary.to_json(),
        "kills": crashes.iter().map(Crash::to_json).collect::<Vec<_>>(),
        "requests_open_at_kills": crashes.iter().map(|crash| crash.open).sum::<u64>(),
        "verify": verdict.as_ref().map(Verdict::to_json),
        "server_stopped": stopped,
    }))
}

#[cfg(test)]
mod tests {
    use clap::Parser as _;

    use super::*;
    use crate::cli::{Cli, Command};

    fn args(line: &[&str]) -> KillArgs {
        let cli = Cli::try_parse_from(line).expect("parses");
        match cli.command {
            Command::Kill(args) => args,
            other => panic!("not kill: {other:?}"),
        }
    }

    #[test]
    fn kill_times_lie_within_the_run_in_order() {
        let base = ["airq-bench", "kill", "--data-dir", "/tmp/x", "-d", "10"];
        let parsed = args(&[&base[..], &["--kill-after", "7,2.5"]].concat());
        assert_eq!(
            kill_times(&parsed).expect("valid"),
            [Duration::from_millis(2500), Duration::from_secs(7)]
        );
        for refused in ["0", "10", "12", "-1"] {
            let flag = format!("--kill-after={refused}");
            let parsed = args(&[&base[..], &[flag.as_str()]].concat());
            assert!(kill_times(&parsed).is_err(), "{refused}");
        }
    }

    #[test]
    fn open_requests_are_those_sent_and_not_finished() {
        let target = Target::local("127.0.0.1:9".parse().expect("address"));
        let tracked = Tracked {
            uploads: UploadWorkload::new(target, &crate::fleet::Fleet::synthetic(2), 0.0, None)
                .expect("workload"),
            issued: AtomicU64::new(0),
            finished: AtomicU64::new(0),
        };
        for index in 0..5 {
            assert!(tracked.request(index).is_some());
        }
        tracked.failed(0, Failure::Io);
        tracked.observe(
            1,
            &Answer {
                status: StatusCode::CREATED,
                headers: hyper::HeaderMap::new(),
                body: bytes::Bytes::new(),
            },
        );
        assert_eq!(tracked.open(), 3);
        assert_eq!(tracked.uploads.acks(), [0, 1]);
    }
}

//! The ceiling: what plain HTTP allows on this machine with this generator.
//!
//! A bare hyper HTTP/1.1 server, started in this process on `127.0.0.1:0` in a runtime of its own
//! (its own worker threads, as the real server has), reads each request's body and answers 201
//! with a small fixed JSON receipt — no routing, no authentication, no parsing, no storage. The
//! upload generator drives it exactly as it drives airq, so `uploads` throughput divided by this
//! throughput is the share of the HTTP ceiling the server reaches.
//!
//! With `--durable` a second bare server runs the same load and also appends each body to a file,
//! answering only after a group `fdatasync` ([`DurableAppend`]): the durable ceiling, what HTTP
//! plus the least a 201 that survives power loss costs allows on this machine's disk.
//!
//! A ceiling measured once can move before airq's run is over (on a shared VM the bare ceiling
//! was seen at 64 k and 94 k req/s minutes apart), so with `--bracket` each ceiling runs again
//! after airq: airq is rated against the mean of the two runs, and their ratio shows how far the
//! machine moved meanwhile.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::header::{HeaderValue, CONTENT_TYPE};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::sync::oneshot;

use crate::durable_append::DurableAppend;
use crate::stats::RunSummary;
use crate::BoxError;

/// The receipt the bare server answers with, shaped like airq's.
const RECEIPT: &[u8] = br#"{"data":{"created_at":"2026-01-01T00:00:00.000Z","id":1}}"#;

/// A bare HTTP server running on its own threads.
#[derive(Debug)]
pub struct BareServer {
    /// Where it listens.
    pub addr: SocketAddr,
    /// Requests answered so far.
    pub answered: Arc<AtomicU64>,
    shutdown: Option<oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl BareServer {
    /// Binds `127.0.0.1:0` and serves on `threads` worker threads until dropped or stopped; with
    /// `durable`, every body is appended to it and answered once synced.
    pub fn start(threads: usize, durable: Option<DurableAppend>) -> Result<Self, BoxError> {
        let durable = durable.map(Arc::new);
        let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(threads.max(1))
            .thread_name("bare-http")
            .enable_all()
            .build()?;
        let (shutdown, stop) = oneshot::channel::<()>();
        let answered = Arc::new(AtomicU64::new(0));
        let counter = Arc::clone(&answered);
        let thread = std::thread::Builder::new()
            .name("bare-http-accept".into())
            .spawn(move || {
                runtime.block_on(async move {
                    let Ok(listener) = tokio::net::TcpListener::from_std(listener) else {
                        return;
                    };
                    let mut stop = std::pin::pin!(stop);
                    loop {
                        let stream = tokio::select! {
                            accepted = listener.accept() => match accepted {
                                Ok((stream, _)) => stream,
                                Err(_) => {
                                    tokio::time::sleep(Duration::from_millis(10)).await;
                                    continue;
                                }
                            },
                            _ = &mut stop => break,
                        };
                        let _ = stream.set_nodelay(true);
                        let counter = Arc::clone(&counter);
                        let durable = durable.clone();
                        tokio::spawn(async move {
                            let service = service_fn(move |request: Request<Incoming>| {
                                answer(request, durable.clone(), Arc::clone(&counter))
                            });
                            let _ = http1::Builder::new()
                                .serve_connection(TokioIo::new(stream), service)
                                .await;
                        });
                    }
                });
                // Open connections are dropped with the runtime.
                runtime.shutdown_timeout(Duration::from_secs(1));
            })?;
        Ok(Self {
            addr,
            answered,
            shutdown: Some(shutdown),
            thread: Some(thread),
        })
    }

    /// Stops accepting, closes every connection and waits for the server's threads.
    pub fn stop(mut self) {
        self.halt();
    }

    fn halt(&mut self) {
        if let Some(shutdown) = self.shutdown.take() {
            let _ = shutdown.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// One request to the bare server: reads the whole body (as the real server must), appends it
/// when the server is durable, counts the answer and gives the fixed receipt.
async fn answer(
    request: Request<Incoming>,
    durable: Option<Arc<DurableAppend>>,
    answered: Arc<AtomicU64>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let body = request
        .into_body()
        .collect()
        .await
        .map(http_body_util::Collected::to_bytes)
        .unwrap_or_default();
    let stored = match &durable {
        Some(log) => log.append(body).await.is_ok(),
        None => true,
    };
    answered.fetch_add(1, Ordering::Relaxed);
    let mut response = Response::new(Full::new(Bytes::from_static(RECEIPT)));
    *response.status_mut() = if stored {
        StatusCode::CREATED
    } else {
        StatusCode::INTERNAL_SERVER_ERROR
    };
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    Ok(response)
}

impl Drop for BareServer {
    fn drop(&mut self) {
        self.halt();
    }
}

/// The `ceiling` scenario: the upload load against the bare server; with `--durable`, then
/// against the durable bare server; with `--compare`, then against airq (`uploads` with the same
/// load flags), and the ratio of airq's throughput to each ceiling; with `--bracket`, each ceiling
/// once more, and the ratios to the mean of each ceiling's two runs.
pub async fn run(args: &crate::cli::CeilingArgs) -> Result<serde_json::Value, BoxError> {
    let started_at = chrono::Utc::now().to_rfc3339();
    let cores = std::thread::available_parallelism().map_or(2, usize::from);
    let server_threads = args.server_threads.unwrap_or(cores);
    let ceiling = drive_bare(args, server_threads, "ceiling").await?;
    let mut report = serde_json::json!({
        "scenario": "ceiling",
        "started_at": started_at,
        "server_threads": server_threads,
        "ceiling": ceiling.to_json(),
    });
    let durable = if args.durable {
        let durable = drive_durable(args, server_threads, "durable ceiling").await?;
        println!(
            "durable / bare ceiling throughput: {:.0} / {:.0} req/s = {:.3}",
            durable.throughput(),
            ceiling.throughput(),
            share(durable.throughput(), ceiling.throughput()),
        );
        report["durable_ceiling"] = durable.to_json();
        Some(durable)
    } else {
        None
    };
    if args.compare {
        // Let the sockets of the ceiling runs close before the real one starts.
        tokio::time::sleep(Duration::from_secs(1)).await;
        let uploads = crate::uploads::run(&crate::cli::UploadArgs {
            target: args.target.clone(),
            fleet: args.fleet.clone(),
            load: args.load.clone(),
            verify: args.verify,
            homes: crate::cli::Homes::Even,
        })
        .await?;
        let ratio = print_ratio("ceiling", &uploads.summary, &ceiling);
        if let Some(durable) = &durable {
            report["durable_ratio"] =
                serde_json::json!(print_ratio("durable ceiling", &uploads.summary, durable));
        }
        report["ratio"] = serde_json::json!(ratio);
        if args.bracket {
            // airq folds what the run left behind within its fold interval (2 s by default);
            // the ceiling must not share the CPUs with that.
            tokio::time::sleep(Duration::from_secs(5)).await;
            let again = drive_bare(args, server_threads, "ceiling again").await?;
            let bracket = Bracket::of(&uploads.summary, &ceiling, &again);
            bracket.print("ceiling");
            report["ceiling_after"] = again.to_json();
            report["bracketed"] = bracket.to_json();
            if let Some(durable) = &durable {
                let again = drive_durable(args, server_threads, "durable ceiling again").await?;
                let bracket = Bracket::of(&uploads.summary, durable, &again);
                bracket.print("durable ceiling");
                report["durable_ceiling_after"] = again.to_json();
                report["durable_bracketed"] = bracket.to_json();
            }
        }
        report["uploads"] = uploads.report;
    }
    Ok(report)
}

/// `part` ÷ `whole`, for throughputs: a run that answered nothing gives a huge ratio, not NaN.
fn share(part: f64, whole: f64) -> f64 {
    part / whole.max(f64::MIN_POSITIVE)
}

/// Prints airq's throughput against a ceiling's, with both p99s, and answers the ratio.
fn print_ratio(ceiling_name: &str, airq: &RunSummary, ceiling: &RunSummary) -> f64 {
    let ratio = share(airq.throughput(), ceiling.throughput());
    println!(
        "airq / {ceiling_name} throughput: {:.0} / {:.0} req/s = {ratio:.3}   (p99 {:.3} ms vs {:.3} ms)",
        airq.throughput(),
        ceiling.throughput(),
        airq.recorder.latency_ms(0.99),
        ceiling.recorder.latency_ms(0.99),
    );
    ratio
}

/// airq's throughput against a ceiling measured before and after it, in req/s.
#[derive(Debug, Clone, Copy)]
struct Bracket {
    airq: f64,
    before: f64,
    after: f64,
}

impl Bracket {
    fn of(airq: &RunSummary, before: &RunSummary, after: &RunSummary) -> Self {
        Self {
            airq: airq.throughput(),
            before: before.throughput(),
            after: after.throughput(),
        }
    }

    /// The ceiling airq is rated against: the mean of its two runs.
    fn ceiling(self) -> f64 {
        (self.before + self.after) / 2.0
    }

    fn ratio(self) -> f64 {
        share(self.airq, self.ceiling())
    }

    /// How far the ceiling moved while airq ran: after ÷ before.
    fn drift(self) -> f64 {
        share(self.after, self.before)
    }

    fn print(self, ceiling_name: &str) {
        println!(
            "airq / {ceiling_name} before and after: {:.0} / {:.0} req/s (mean of {:.0} and {:.0}; after / before = {:.3}) = {:.3}",
            self.airq,
            self.ceiling(),
            self.before,
            self.after,
            self.drift(),
            self.ratio(),
        );
    }

    fn to_json(self) -> serde_json::Value {
        serde_json::json!({
            "ceiling_mean": self.ceiling(),
            "drift": self.drift(),
            "ratio": self.ratio(),
        })
    }
}

/// Drives a bare server of `threads` threads (see [`drive`]).
async fn drive_bare(
    args: &crate::cli::CeilingArgs,
    threads: usize,
    name: &str,
) -> Result<RunSummary, BoxError> {
    let label = format!("{name}: bare hyper, read body, answer 201");
    drive(args, BareServer::start(threads, None)?, &label).await
}

/// Drives a durable bare server of `threads` threads, its file in a temporary dir of its own
/// (see [`drive`]).
async fn drive_durable(
    args: &crate::cli::CeilingArgs,
    threads: usize,
    name: &str,
) -> Result<RunSummary, BoxError> {
    let dir = std::env::temp_dir().join(format!("airq-bench-durable-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let log = DurableAppend::create(&dir.join("bodies"))?;
    let label = format!("{name}: bare hyper, append body, answer 201 after a group fdatasync");
    let durable = drive(args, BareServer::start(threads, Some(log))?, &label).await;
    std::fs::remove_dir_all(&dir)?;
    durable
}

/// Drives `server` with the upload load of `args`, stops it and prints the run.
async fn drive(
    args: &crate::cli::CeilingArgs,
    server: BareServer,
    label: &str,
) -> Result<RunSummary, BoxError> {
    use crate::client::Target;
    use crate::fleet::Fleet;
    use crate::generator::UploadWorkload;

    let target = Target::local(server.addr);
    let fleet = Fleet::synthetic(args.fleet.devices.max(1));
    let workload = Arc::new(UploadWorkload::new(
        target.clone(),
        &fleet,
        args.load.location_share,
        None,
    )?);
    let plan = args.load.plan(label);
    eprintln!("{} against {}", plan.label, target.url);
    let summary = crate::load::run(&target, workload, &plan, None).await;
    let answered = server.answered.load(Ordering::Relaxed);
    tokio::task::spawn_blocking(move || server.stop()).await?;
    println!("{}", summary.render());
    println!("  (the server answered {answered} requests)");
    Ok(summary)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::{Lane, Target};

    #[test]
    fn a_bracketed_ratio_rates_airq_against_the_mean_of_both_ceiling_runs() {
        let bracket = Bracket {
            airq: 30_000.0,
            before: 90_000.0,
            after: 60_000.0,
        };
        assert_eq!(bracket.ceiling(), 75_000.0);
        assert_eq!(bracket.ratio(), 0.4);
        assert_eq!(bracket.drift(), 60_000.0 / 90_000.0);
    }

    #[tokio::test]
    async fn the_durable_bare_server_answers_201_once_the_body_is_in_its_file() {
        let dir = tempfile::tempdir().expect("temporary dir");
        let path = dir.path().join("bodies");
        let server = BareServer::start(1, Some(DurableAppend::create(&path).expect("created")))
            .expect("started");
        let target = Target::local(server.addr);
        let mut lane = Lane::new(server.addr);
        for body in ["{\"a\":1}", "{\"b\":2}"] {
            let answer = lane
                .send(
                    target.request(hyper::Method::POST, "/api/v1/data", Bytes::from(body)),
                    Duration::from_secs(10),
                )
                .await
                .expect("answered");
            assert_eq!(answer.status, StatusCode::CREATED);
        }
        assert_eq!(
            std::fs::read_to_string(&path).expect("read back"),
            "{\"a\":1}{\"b\":2}"
        );
        tokio::task::spawn_blocking(move || server.stop())
            .await
            .expect("stopped");
    }
}

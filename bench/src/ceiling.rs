//! The ceiling: what plain HTTP allows on this machine with this generator.
//!
//! A bare hyper HTTP/1.1 server, started in this process on `127.0.0.1:0` in a runtime of its own
//! (its own worker threads, as the real server has), reads each request's body and answers 201
//! with a small fixed JSON receipt — no routing, no authentication, no parsing, no storage. The
//! upload generator drives it exactly as it drives airq, so `uploads` throughput divided by this
//! throughput is the share of the HTTP ceiling the server reaches.

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
    /// Binds `127.0.0.1:0` and serves on `threads` worker threads until dropped or stopped.
    pub fn start(threads: usize) -> Result<Self, BoxError> {
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
                        tokio::spawn(async move {
                            let service = service_fn(move |request: Request<Incoming>| {
                                let counter = Arc::clone(&counter);
                                async move {
                                    // Read the whole body, as the real server must.
                                    let _ = request.into_body().collect().await;
                                    counter.fetch_add(1, Ordering::Relaxed);
                                    let mut response =
                                        Response::new(Full::new(Bytes::from_static(RECEIPT)));
                                    *response.status_mut() = StatusCode::CREATED;
                                    response.headers_mut().insert(
                                        CONTENT_TYPE,
                                        HeaderValue::from_static("application/json"),
                                    );
                                    Ok::<_, Infallible>(response)
                                }
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

impl Drop for BareServer {
    fn drop(&mut self) {
        self.halt();
    }
}

/// The `ceiling` scenario: the upload load against the bare server; with `--compare`, then
/// against airq (`uploads` with the same load flags), and the ratio of the two throughputs.
pub async fn run(args: &crate::cli::CeilingArgs) -> Result<serde_json::Value, BoxError> {
    use crate::client::Target;
    use crate::fleet::Fleet;
    use crate::generator::UploadWorkload;

    let started_at = chrono::Utc::now().to_rfc3339();
    let cores = std::thread::available_parallelism().map_or(2, usize::from);
    let server_threads = args.server_threads.unwrap_or(cores);
    let server = BareServer::start(server_threads)?;
    let target = Target::local(server.addr);
    let fleet = Fleet::synthetic(args.fleet.devices.max(1));
    let workload = Arc::new(UploadWorkload::new(
        target.clone(),
        &fleet,
        args.load.location_share,
        None,
    )?);
    let plan = args.load.plan("ceiling: bare hyper, read body, answer 201");
    eprintln!(
        "ceiling: {} against {} ({server_threads} server threads)",
        plan.label, target.url
    );
    let ceiling = crate::load::run(&target, workload, &plan, None).await;
    let answered = server.answered.load(Ordering::Relaxed);
    tokio::task::spawn_blocking(move || server.stop()).await?;
    println!("{}", ceiling.render());
    println!("  (bare server answered {answered} requests)");
    let mut report = serde_json::json!({
        "scenario": "ceiling",
        "started_at": started_at,
        "server_threads": server_threads,
        "ceiling": ceiling.to_json(),
    });
    if args.compare {
        // Let the sockets of the ceiling run close before the real one starts.
        tokio::time::sleep(Duration::from_secs(1)).await;
        let uploads = crate::uploads::run(&crate::cli::UploadArgs {
            target: args.target.clone(),
            fleet: args.fleet.clone(),
            load: args.load.clone(),
            verify: args.verify,
        })
        .await?;
        let ratio = uploads.summary.throughput() / ceiling.throughput().max(f64::MIN_POSITIVE);
        println!(
            "airq / ceiling throughput: {:.0} / {:.0} req/s = {:.3}   (p99 {:.3} ms vs {:.3} ms)",
            uploads.summary.throughput(),
            ceiling.throughput(),
            ratio,
            uploads.summary.recorder.latency_ms(0.99),
            ceiling.recorder.latency_ms(0.99),
        );
        report["uploads"] = uploads.report;
        report["ratio"] = serde_json::json!(ratio);
    }
    Ok(report)
}

//! The validating relay between the tests and the server.
//!
//! Why a relay: the tests speak to the server through `app.client` and `app.url(..)` /
//! `app.base` in hundreds of places, with every kind of request (raw bodies, streamed bodies,
//! wrong methods, conditional and gzip requests). Putting the check on the network path catches
//! them all, and every test written later, without touching any of them: `TestApp::base` is the
//! relay's address, not the server's.
//!
//! What it does: each accepted connection is served with hyper; each request is read whole and
//! forwarded as it came (method, path and query, headers, and the body chunk by chunk under its
//! own `Content-Length` or chunked framing: nothing is decompressed, added or removed) over a
//! keep-alive connection pool to the server. The request is read whole first because the server
//! may answer early (413 while a body streams in) and close: a relay still streaming the body
//! upstream would meet a reset instead of the answer, where a client that sends its body from
//! memory, as the tests do, reads the answer. The answer is read whole, checked by
//! [`Contract::check`], recorded when it drifts, and returned to the test unchanged (status,
//! headers, body bytes; `Content-Length` or chunked framing kept). When the server does not
//! answer (it stopped, or closed the connection), the relay closes the test's connection too,
//! as the server would have.
//!
//! How drift fails the test: the check is done before the answer is handed on, so by the time a
//! test holds a response, its violations are recorded (and printed to the test's output). The
//! `TestApp` panics with the list when it is dropped at the end of the test, or in `stop()`,
//! which first waits for the answers still being relayed (a shutdown drains requests in
//! flight). Answers are deliberately not replaced by a failure: a test that only asserts
//! "not 201" would pass on a made-up one, and a test that checks the real answer still sees it;
//! the panic at the end fails every test that received a drifting answer, whatever it asserted,
//! and names the exchange, the documented response and each schema error. A test that expects
//! drift (the check's own tests) takes the violations with `take_contract_violations`.

#![allow(dead_code, unreachable_pub)]

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt as _, Empty, Full, StreamBody};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

use super::contract::{Contract, Exchange};

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// A request body read whole, replayed frame by frame.
type Replay = BoxBody<Bytes, std::convert::Infallible>;

/// A running relay; it stops accepting when dropped (exchanges under way still finish).
pub struct Proxy {
    addr: SocketAddr,
    relay: Arc<Relay>,
    accept: JoinHandle<()>,
}

/// What the connections of one relay share.
struct Relay {
    upstream: SocketAddr,
    client: Client<HttpConnector, Replay>,
    contract: Mutex<Arc<Contract>>,
    violations: Mutex<Vec<String>>,
    in_flight: AtomicUsize,
}

impl Proxy {
    /// Listens on 127.0.0.1:0 and relays to `upstream`, checking against `contract`.
    pub async fn start(upstream: SocketAddr, contract: Arc<Contract>) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("the relay binds");
        let addr = listener.local_addr().expect("the relay's address");
        let mut connector = HttpConnector::new();
        connector.set_nodelay(true);
        let relay = Arc::new(Relay {
            upstream,
            client: Client::builder(TokioExecutor::new()).build(connector),
            contract: Mutex::new(contract),
            violations: Mutex::new(Vec::new()),
            in_flight: AtomicUsize::new(0),
        });
        let accept = tokio::spawn(accept(listener, Arc::clone(&relay)));
        Self {
            addr,
            relay,
            accept,
        }
    }

    /// The address tests send their requests to.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The contract exchanges are checked against.
    pub fn contract(&self) -> Arc<Contract> {
        Arc::clone(&lock(&self.relay.contract))
    }

    /// Checks the exchanges from now on against `contract`.
    pub fn set_contract(&self, contract: Arc<Contract>) {
        *lock(&self.relay.contract) = contract;
    }

    /// The violations recorded so far, removed from the record.
    pub fn take_violations(&self) -> Vec<String> {
        std::mem::take(&mut *lock(&self.relay.violations))
    }

    /// Waits (at most `limit`) until no exchange is being relayed.
    pub async fn settle(&self, limit: Duration) {
        let deadline = Instant::now() + limit;
        while self.relay.in_flight.load(Ordering::SeqCst) > 0 && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.accept.abort();
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

async fn accept(listener: TcpListener, relay: Arc<Relay>) {
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            tokio::time::sleep(Duration::from_millis(10)).await;
            continue;
        };
        let _ = stream.set_nodelay(true);
        let relay = Arc::clone(&relay);
        tokio::spawn(async move {
            let service = service_fn(move |request| Arc::clone(&relay).forward(request));
            // A connection the test or the server broke off ends here; the test sees the same.
            let _ = http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

/// Counts an exchange as under way while it lives.
struct InFlight<'a>(&'a AtomicUsize);

impl<'a> InFlight<'a> {
    fn enter(counter: &'a AtomicUsize) -> Self {
        counter.fetch_add(1, Ordering::SeqCst);
        Self(counter)
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Relay {
    /// One exchange: forward, read the answer, check it, hand it back unchanged.
    async fn forward(
        self: Arc<Self>,
        request: Request<Incoming>,
    ) -> Result<Response<Full<Bytes>>, BoxError> {
        let _in_flight = InFlight::enter(&self.in_flight);
        let method = request.method().clone();
        let target = request
            .uri()
            .path_and_query()
            .map_or("/", |target| target.as_str())
            .to_owned();
        let (mut parts, mut body) = request.into_parts();
        parts.uri = format!("http://{}{target}", self.upstream).parse()?;
        let mut frames = Vec::new();
        while let Some(frame) = body.frame().await {
            frames.push(frame?);
        }
        let body = if frames.is_empty() {
            Empty::new().boxed()
        } else {
            StreamBody::new(futures_util::stream::iter(frames.into_iter().map(Ok))).boxed()
        };
        let response = match self.client.request(Request::from_parts(parts, body)).await {
            Ok(response) => response,
            Err(error) => {
                eprintln!("contract relay: {method} {target}: the server did not answer: {error}");
                return Err(error.into());
            }
        };
        let (parts, body) = response.into_parts();
        let body = body.collect().await?.to_bytes();
        let contract = Arc::clone(&lock(&self.contract));
        let violations = contract.check(&Exchange {
            method: &method,
            target: &target,
            status: parts.status.as_u16(),
            headers: &parts.headers,
            body: &body,
        });
        if !violations.is_empty() {
            for violation in &violations {
                eprintln!("OpenAPI contract violation: {violation}");
            }
            lock(&self.violations).extend(violations);
        }
        Ok(Response::from_parts(parts, Full::new(body)))
    }
}

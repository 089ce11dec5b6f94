//! A webhook receiver in this process: the other end of airq's alert deliveries.
//!
//! It listens on `127.0.0.1:0`, answers every POST with 204 at once, and notes each event's
//! arrival instant the moment its body is read. Events of rules somebody [`watch`]es go to that
//! watcher; the rest are only counted (a bench whose quiet rules fire shows it in the report).
//!
//! [`watch`]: Receiver::watch

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use serde::Deserialize;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::BoxError;

/// One event as it arrived.
#[derive(Debug, Clone)]
pub struct Arrival {
    /// `alert.fired`, `alert.cleared` or `alert.test`.
    pub kind: String,
    /// When its body had been read.
    pub at: Instant,
}

#[derive(Deserialize)]
struct Event {
    #[serde(rename = "type")]
    kind: String,
    rule_id: String,
}

/// What the connections share.
#[derive(Debug, Default)]
struct Shared {
    watchers: Mutex<HashMap<String, mpsc::UnboundedSender<Arrival>>>,
    /// Events of rules nobody watches.
    unwatched: AtomicU64,
    /// Every event received.
    received: AtomicU64,
}

/// The running receiver; stops accepting when dropped.
#[derive(Debug)]
pub struct Receiver {
    /// Where it listens.
    pub addr: SocketAddr,
    shared: Arc<Shared>,
    accepting: JoinHandle<()>,
}

impl Drop for Receiver {
    fn drop(&mut self) {
        self.accepting.abort();
    }
}

impl Receiver {
    /// Binds `127.0.0.1:0` and serves on this runtime.
    pub async fn start() -> Result<Self, BoxError> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared::default());
        let serving = Arc::clone(&shared);
        let accepting = tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    tokio::time::sleep(std::time::Duration::from_millis(10)).await;
                    continue;
                };
                let _ = stream.set_nodelay(true);
                let shared = Arc::clone(&serving);
                tokio::spawn(async move {
                    let service = service_fn(move |request: Request<Incoming>| {
                        receive(request, Arc::clone(&shared))
                    });
                    let _ = http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        Ok(Self {
            addr,
            shared,
            accepting,
        })
    }

    /// The URL rules name as their `webhook_url`.
    pub fn url(&self) -> String {
        format!("http://{}/hook", self.addr)
    }

    /// The events of `rule_id` from now on.
    pub fn watch(&self, rule_id: &str) -> mpsc::UnboundedReceiver<Arrival> {
        let (sender, receiver) = mpsc::unbounded_channel();
        if let Ok(mut watchers) = self.shared.watchers.lock() {
            watchers.insert(rule_id.to_owned(), sender);
        }
        receiver
    }

    /// Events received in all, and of those the ones of rules nobody watched.
    pub fn counts(&self) -> (u64, u64) {
        (
            self.shared.received.load(Ordering::Relaxed),
            self.shared.unwatched.load(Ordering::Relaxed),
        )
    }
}

async fn receive(
    request: Request<Incoming>,
    shared: Arc<Shared>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let body = request
        .into_body()
        .collect()
        .await
        .map(http_body_util::Collected::to_bytes)
        .unwrap_or_default();
    let at = Instant::now();
    shared.received.fetch_add(1, Ordering::Relaxed);
    let watched = serde_json::from_slice::<Event>(&body)
        .ok()
        .and_then(|event| {
            let watchers = shared.watchers.lock().ok()?;
            let watcher = watchers.get(&event.rule_id)?;
            watcher
                .send(Arrival {
                    kind: event.kind,
                    at,
                })
                .ok()
        });
    if watched.is_none() {
        shared.unwatched.fetch_add(1, Ordering::Relaxed);
    }
    let mut response = Response::new(Full::new(Bytes::new()));
    *response.status_mut() = StatusCode::NO_CONTENT;
    Ok(response)
}

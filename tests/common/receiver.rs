//! A webhook receiver for the alert tests: a real HTTP server on 127.0.0.1:0 that records every
//! request it gets and answers with scripted statuses (200 once the script is used up), after a
//! scripted delay (to stand for a receiver that does not answer in time).

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{HeaderMap, Response, StatusCode};
use hyper_util::rt::TokioIo;
use serde_json::Value;
use tokio::net::TcpListener;

/// One request the receiver got.
#[derive(Debug, Clone)]
pub struct Received {
    /// Its headers.
    pub headers: HeaderMap,
    /// Its body, as sent.
    pub body: Bytes,
}

impl Received {
    /// The body as JSON.
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).expect("the event is JSON")
    }

    /// `X-Airq-Signature`.
    pub fn signature(&self) -> &str {
        self.headers
            .get("x-airq-signature")
            .and_then(|value| value.to_str().ok())
            .expect("a signature header")
    }
}

#[derive(Default)]
struct Script {
    received: Vec<Received>,
    answers: VecDeque<(u16, Duration)>,
}

/// The running receiver; stops with the test's runtime.
#[derive(Clone)]
pub struct Receiver {
    /// `http://127.0.0.1:PORT/hook`.
    pub url: String,
    script: Arc<Mutex<Script>>,
}

impl Receiver {
    /// Starts a receiver answering 200 to everything.
    pub async fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let address = listener.local_addr().expect("address");
        let script = Arc::new(Mutex::new(Script::default()));
        let shared = Arc::clone(&script);
        tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    return;
                };
                let script = Arc::clone(&shared);
                tokio::spawn(async move {
                    let service =
                        service_fn(move |request: hyper::Request<hyper::body::Incoming>| {
                            let script = Arc::clone(&script);
                            async move {
                                let headers = request.headers().clone();
                                let body = request
                                    .into_body()
                                    .collect()
                                    .await
                                    .map(|body| body.to_bytes())
                                    .unwrap_or_default();
                                let (status, delay) = {
                                    let mut script = script.lock().expect("script");
                                    script.received.push(Received { headers, body });
                                    script.answers.pop_front().unwrap_or((200, Duration::ZERO))
                                };
                                tokio::time::sleep(delay).await;
                                let mut response = Response::new(Full::new(Bytes::new()));
                                *response.status_mut() =
                                    StatusCode::from_u16(status).expect("a status");
                                Ok::<_, std::convert::Infallible>(response)
                            }
                        });
                    let _ = http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        Self {
            url: format!("http://{address}/hook"),
            script,
        }
    }

    /// The next requests are answered with these statuses, in order.
    pub fn answer(&self, statuses: &[u16]) {
        let mut script = self.script.lock().expect("script");
        script
            .answers
            .extend(statuses.iter().map(|status| (*status, Duration::ZERO)));
    }

    /// The next request is answered only after `delay`.
    pub fn answer_late(&self, delay: Duration) {
        self.script
            .lock()
            .expect("script")
            .answers
            .push_back((200, delay));
    }

    /// Everything received so far.
    pub fn received(&self) -> Vec<Received> {
        self.script.lock().expect("script").received.clone()
    }

    /// Waits (at most 15 s) until at least `count` requests came; returns them all.
    pub async fn wait_for(&self, count: usize) -> Vec<Received> {
        for _ in 0..1_500 {
            let received = self.received();
            if received.len() >= count {
                return received;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!(
            "the receiver got {} requests, not {count}: {:?}",
            self.received().len(),
            self.received()
                .iter()
                .map(Received::json)
                .collect::<Vec<_>>()
        );
    }
}

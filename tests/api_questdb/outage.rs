//! QuestDB going away under load: uploads are answered 500, no 201 stands for a row that was not
//! committed, and ingestion recovers when QuestDB is back. The outage is real: ILP traffic goes
//! through a TCP relay owned by the test, which the test cuts and restores.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

use crate::common::{sample, TestApp};

/// A TCP relay to QuestDB's HTTP port that can be cut (open connections are dropped and new ones
/// refused) and restored.
struct Relay {
    port: u16,
    up: Arc<AtomicBool>,
    connections: Arc<Mutex<Vec<JoinHandle<()>>>>,
    accept: JoinHandle<()>,
}

impl Relay {
    async fn start(target: String) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("relay port");
        let port = listener.local_addr().expect("address").port();
        let up = Arc::new(AtomicBool::new(true));
        let connections: Arc<Mutex<Vec<JoinHandle<()>>>> = Arc::default();
        let (flag, tasks) = (Arc::clone(&up), Arc::clone(&connections));
        let accept = tokio::spawn(async move {
            while let Ok((mut inbound, _)) = listener.accept().await {
                if !flag.load(Ordering::SeqCst) {
                    continue;
                }
                let target = target.clone();
                let relay = tokio::spawn(async move {
                    if let Ok(mut outbound) = TcpStream::connect(target).await {
                        let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                    }
                });
                tasks.lock().expect("lock").push(relay);
            }
        });
        Self {
            port,
            up,
            connections,
            accept,
        }
    }

    fn cut(&self) {
        self.up.store(false, Ordering::SeqCst);
        for connection in self.connections.lock().expect("lock").drain(..) {
            connection.abort();
        }
    }

    fn restore(&self) {
        self.up.store(true, Ordering::SeqCst);
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.accept.abort();
        self.cut();
    }
}

fn questdb_http_address() -> String {
    let ilp = std::env::var("AIRQ_TEST_QUESTDB_ILP").expect("AIRQ_TEST_QUESTDB_ILP");
    ilp.split(';')
        .find_map(|part| part.trim().strip_prefix("http::addr="))
        .expect("an http::addr= in AIRQ_TEST_QUESTDB_ILP")
        .to_owned()
}

async fn upload_all(app: &TestApp, device: &Value, count: usize) -> Vec<reqwest::Response> {
    let body = sample();
    let uploads = (0..count).map(|_| app.upload(device, &body));
    futures_util::future::join_all(uploads).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_questdb_outage_answers_500_and_ingestion_recovers() {
    let relay = Relay::start(questdb_http_address()).await;
    let port = relay.port;
    let app = TestApp::spawn_with(|config| {
        if let Some(questdb) = &mut config.questdb {
            questdb.ilp =
                format!("http::addr=127.0.0.1:{port};retry_timeout=200;request_timeout=2000;");
        }
        config.batch.retries = 1;
        config.batch.retry_backoff = Duration::from_millis(20);
    })
    .await;
    let device = app.register_named("alice", "Balcony").await;
    let mut acknowledged = Vec::new();

    for response in upload_all(&app, &device, 5).await {
        assert_eq!(response.status(), 201, "before the outage");
        acknowledged.push(
            response.json::<Value>().await.unwrap()["data"]["id"]
                .as_u64()
                .unwrap(),
        );
    }

    relay.cut();
    for response in upload_all(&app, &device, 5).await {
        assert_eq!(response.status(), 500, "during the outage");
        let problem: Value = response.json().await.unwrap();
        assert_eq!(problem["type"], "about:blank");
    }

    relay.restore();
    for response in upload_all(&app, &device, 5).await {
        assert_eq!(response.status(), 201, "after the outage");
        acknowledged.push(
            response.json::<Value>().await.unwrap()["data"]["id"]
                .as_u64()
                .unwrap(),
        );
    }

    acknowledged.sort_unstable();
    assert_eq!(
        app.stored_ids().await,
        acknowledged,
        "exactly the acknowledged readings are stored"
    );
    let current = app
        .data_as(
            "alice",
            &format!("/devices/{}/current", device["id"].as_str().unwrap()),
        )
        .await;
    assert_eq!(current["sample_count"], 10);
}

//! QuestDB going away under load: uploads are answered 500, no 201 stands for a row that was not
//! committed, and ingestion recovers when QuestDB is back. The outage is real: ILP traffic goes
//! through a TCP relay owned by the test, which the test cuts and restores.

use std::time::Duration;

use serde_json::Value;

use crate::common::relay::{questdb_http_address, Relay};
use crate::common::{sample, TestApp};

async fn upload_all(app: &TestApp, device: &Value, count: usize) -> Vec<reqwest::Response> {
    let body = sample();
    let uploads = (0..count).map(|_| app.upload(device, &body));
    futures_util::future::join_all(uploads).await
}

#[airq_test::test(flavor = "multi_thread", worker_threads = 2)]
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

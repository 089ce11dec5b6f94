//! What only the spool can show: an upload is answered once it is durable in the data
//! directory's spool, so QuestDB being away delays readings but refuses none, a restart forwards
//! what the previous process left, and `/metrics` shows what waits. The outage is real: ILP
//! traffic goes through a TCP relay owned by the test.

use std::time::Duration;

use serde_json::Value;

use crate::common::relay::{questdb_http_address, Relay};
use crate::common::{sample, TestApp};
use crate::metrics::Scrape;

/// A spooling app whose ILP traffic goes through `relay`.
async fn behind(relay: &Relay) -> TestApp {
    TestApp::spawn_with(through(relay)).await
}

/// Sends a configuration's ILP traffic through `relay`.
fn through(relay: &Relay) -> impl FnOnce(&mut airq::Config) {
    let port = relay.port;
    move |config| {
        if let Some(questdb) = &mut config.questdb {
            questdb.ilp =
                format!("http::addr=127.0.0.1:{port};retry_timeout=200;request_timeout=2000;");
        }
    }
}

/// Uploads `count` readings one after the other; answers their receipt ids.
async fn upload_ids(app: &TestApp, device: &Value, count: usize) -> Vec<u64> {
    let mut ids = Vec::new();
    for _ in 0..count {
        let receipt = app.upload_ok(device, &sample()).await;
        ids.push(receipt["id"].as_u64().expect("a receipt id"));
    }
    ids
}

async fn sample_count(app: &TestApp, device: &Value) -> Value {
    let path = format!("/devices/{}/current", device["id"].as_str().expect("id"));
    app.data_as("alice", &path).await["sample_count"].clone()
}

#[airq_test::test(flavor = "multi_thread", worker_threads = 2)]
async fn uploads_while_questdb_is_away_are_answered_201_and_reach_it_once_it_is_back() {
    let relay = Relay::start(questdb_http_address()).await;
    let app = behind(&relay).await;
    let device = app.register_named("alice", "Balcony").await;
    let mut acknowledged = upload_ids(&app, &device, 3).await;

    relay.cut();
    acknowledged.extend(upload_ids(&app, &device, 4).await);
    relay.restore();
    acknowledged.extend(upload_ids(&app, &device, 2).await);

    assert_eq!(
        sample_count(&app, &device).await,
        9,
        "a read after the 201s"
    );
    acknowledged.sort_unstable();
    assert_eq!(
        app.stored_ids().await,
        acknowledged,
        "exactly the acknowledged readings reach QuestDB, each once"
    );
}

#[airq_test::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_forwards_the_readings_the_spool_still_held() {
    let relay = Relay::start(questdb_http_address()).await;
    let app = behind(&relay).await;
    let device = app.register_named("alice", "Balcony").await;
    relay.cut();
    let mut acknowledged = upload_ids(&app, &device, 5).await;

    // QuestDB is still away when the process stops: the readings stay in the spool.
    let app = app.restart(|_| {}).await;

    assert_eq!(
        sample_count(&app, &device).await,
        5,
        "the first read of the new process"
    );
    acknowledged.sort_unstable();
    assert_eq!(app.stored_ids().await, acknowledged);
}

#[airq_test::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_holds_back_nothing_questdb_had_already_taken() {
    let relay = Relay::start(questdb_http_address()).await;
    let app = behind(&relay).await;
    let device = app.register_named("alice", "Balcony").await;
    upload_ids(&app, &device, 3).await;
    // Read by this process, the readings are applied in QuestDB (the next one reads without
    // waiting for any of its own).
    assert_eq!(sample_count(&app, &device).await, 3);
    crate::common::wait_for_empty_spool(app.data_dir.path()).await;

    // The readings may still be in the spool's files; the forwarder's watermark says they went.
    // With QuestDB away, anything the new process took for unsent would stay in its backlog.
    relay.cut();
    let app = app.restart(through(&relay)).await;

    assert_eq!(Scrape::of(&app).await.gauge("airq_spool_backlog_rows"), 0.0);
    assert_eq!(
        sample_count(&app, &device).await,
        3,
        "and reads do not wait"
    );
}

#[airq_test::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_count_the_spooled_readings_questdb_has_not_taken() {
    let relay = Relay::start(questdb_http_address()).await;
    let app = behind(&relay).await;
    let device = app.register_named("alice", "Balcony").await;
    assert_eq!(Scrape::of(&app).await.gauge("airq_spool_backlog_rows"), 0.0);

    relay.cut();
    upload_ids(&app, &device, 3).await;
    assert_eq!(Scrape::of(&app).await.gauge("airq_spool_backlog_rows"), 3.0);

    relay.restore();
    let mut backlog = f64::NAN;
    for _ in 0..200 {
        backlog = Scrape::of(&app).await.gauge("airq_spool_backlog_rows");
        if backlog == 0.0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(
        backlog, 0.0,
        "the forwarder caught up once QuestDB was back"
    );
}

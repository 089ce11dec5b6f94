//! Several ILP/HTTP flushes in flight (issue 12): uploads are answered once QuestDB acknowledged
//! their batch, before it is applied, over several senders at once — or, with the spool (the
//! `api_questdb_spool` suite runs this file too), once spooled, and forwarded over several senders
//! behind. What must still hold: a read after a 201 includes the reading, nothing acknowledged is
//! lost or stored twice, and a reading re-sent after its 201 replaces it whichever sender carries
//! it.

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use chrono::{TimeDelta, Utc};
use futures_util::future::join_all;
use serde_json::{json, Value};

use crate::common::{measured, sample_with, TestApp};
use crate::upload::{device_id, device_key, receipt, sample_count, upload_with};

/// Senders of these tests: more than one, so batches overlap.
const SENDERS: usize = 4;

async fn pipelined_app() -> TestApp {
    TestApp::spawn_with(|config| {
        if let Some(questdb) = &mut config.questdb {
            questdb.senders = SENDERS;
        }
        // Small batches, so concurrent uploads make many flushes.
        config.batch.max_rows = 8;
    })
    .await
}

fn device_uuid(device: &Value) -> &str {
    device["id"].as_str().expect("id")
}

/// Uploads from `devices`, round robin, until `stop` is set; answers how many got a 201.
fn background_uploads(
    app: &TestApp,
    devices: Vec<Value>,
    stop: Arc<AtomicBool>,
) -> tokio::task::JoinHandle<usize> {
    let client = app.client.clone();
    let url = app.url("/data");
    tokio::spawn(async move {
        let mut acknowledged = 0;
        let mut round = 0usize;
        while !stop.load(Ordering::SeqCst) {
            let uploads = devices.iter().map(|device| {
                let body = sample_with((round % 300) as i64, 12.0, 20.0);
                let (client, url, device) = (client.clone(), url.clone(), device.clone());
                async move { upload_with(&client, &url, &device, &body).await.status() }
            });
            acknowledged += join_all(uploads)
                .await
                .into_iter()
                .filter(|status| *status == 201)
                .count();
            round += 1;
        }
        acknowledged
    })
}

#[airq_test::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_right_after_each_201_includes_its_reading_under_concurrent_uploads() {
    let app = pipelined_app().await;
    let device = app.register_named("alice", "Balcony").await;
    let mut fleet = Vec::new();
    for n in 0..8 {
        fleet.push(app.register_named("bob", &format!("fleet-{n}")).await);
    }
    let stop = Arc::new(AtomicBool::new(false));
    let load = background_uploads(&app, fleet, Arc::clone(&stop));

    for count in 1..=25u64 {
        app.upload_ok(&device, &sample_with(count as i64, 10.0, 20.0))
            .await;
        let current = app
            .data_as(
                "alice",
                &format!("/devices/{}/current", device_uuid(&device)),
            )
            .await;
        assert_eq!(current["sample_count"], count, "read after upload {count}");
    }

    stop.store(true, Ordering::SeqCst);
    let acknowledged = load.await.expect("background uploads");
    assert!(acknowledged > 0, "the other uploads ran meanwhile");
}

#[airq_test::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_single_and_batch_uploads_over_several_senders_are_each_stored_once() {
    const DEVICES: usize = 6;
    const SINGLES: usize = 40;
    const BATCH: usize = 50;
    let app = pipelined_app().await;
    let mut devices = Vec::new();
    for n in 0..DEVICES {
        devices.push(app.register_named("alice", &format!("fleet-{n}")).await);
    }
    let singles = (0..DEVICES * SINGLES).map(|n| {
        let (client, url) = (app.client.clone(), app.url("/data"));
        let device = devices[n % DEVICES].clone();
        let body = sample_with((n % 300) as i64, 10.0, 20.0);
        tokio::spawn(async move {
            vec![
                receipt(upload_with(&client, &url, &device, &body).await)
                    .await
                    .0,
            ]
        })
    });
    let now = Utc::now();
    let batches = devices.iter().map(|device| {
        let readings: Vec<Value> = (0..BATCH)
            .map(|minute| {
                let at = now - TimeDelta::minutes(minute as i64 + 1);
                measured(sample_with(minute as i64, 10.0, 20.0), at)
            })
            .collect();
        let request = app
            .client
            .post(app.url("/data/batch"))
            .header("x-device-id", device_id(device))
            .header("x-device-key", device_key(device))
            .json(&json!({ "readings": readings }));
        tokio::spawn(async move {
            let response = request.send().await.expect("request sent");
            assert_eq!(response.status(), 201, "batch accepted");
            let body: Value = response.json().await.expect("json");
            body["data"]["receipts"]
                .as_array()
                .expect("receipts")
                .iter()
                .map(|receipt| receipt["id"].as_u64().expect("id"))
                .collect::<Vec<u64>>()
        })
    });
    let tasks: Vec<_> = singles.chain(batches).collect();
    let mut ids: Vec<u64> = join_all(tasks)
        .await
        .into_iter()
        .flat_map(|joined| joined.expect("upload task"))
        .collect();
    ids.sort_unstable();
    assert_eq!(ids.len(), DEVICES * (SINGLES + BATCH));
    let distinct: HashSet<u64> = ids.iter().copied().collect();
    assert_eq!(distinct.len(), ids.len(), "receipt ids are distinct");

    for device in &devices {
        // Every reading of the batch lies within the last hour.
        assert_eq!(sample_count(&app, device).await, (SINGLES + BATCH) as u64);
    }
    assert_eq!(
        app.stored_ids().await,
        ids,
        "exactly the acknowledged readings are stored"
    );
}

#[airq_test::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reading_resent_after_its_201_replaces_it_whichever_sender_carries_it() {
    let app = pipelined_app().await;
    let device = app.register_named("alice", "Balcony").await;
    let at = Utc::now() - TimeDelta::minutes(1);
    // Each upload is sent after the previous one's 201; the lanes take turns, so consecutive
    // uploads travel over different senders.
    for aqi in 1..=3 * SENDERS as i64 {
        app.upload_ok(&device, &measured(sample_with(aqi, 10.0, 20.0), at))
            .await;
        let current = app
            .data_as(
                "alice",
                &format!("/devices/{}/current", device_uuid(&device)),
            )
            .await;
        assert_eq!(current["sample_count"], 1, "one reading under its key");
        assert_eq!(current["aqi"].as_i64(), Some(aqi), "the latest upload wins");
    }
}

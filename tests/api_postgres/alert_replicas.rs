//! Alerts with several replicas on one PostgreSQL: every replica evaluates every rule and runs a
//! deliverer, and still each transition is one event, sent once (the state row's lock decides a
//! transition; a lease hands each event to one deliverer).

use std::time::Duration;

use chrono::TimeDelta;
use reqwest::Method;
use serde_json::{json, Value};

use crate::common::receiver::Receiver;
use crate::common::TestApp;

fn configure(c: &mut airq::Config) {
    c.alerts.policy.allow_private = true;
    c.alerts.tick = Duration::from_millis(10);
}

#[airq_test::test]
async fn three_replicas_make_one_event_per_transition_and_send_it_once() {
    let first = TestApp::spawn_with(configure).await;
    // One clock for the three, as hosts' clocks agree: a replica whose clock lagged behind the
    // others' by the silence's minutes would see the device recovered (and say so).
    let second = first.spawn_peer_on_my_clock(configure).await;
    let third = first.spawn_peer_on_my_clock(configure).await;
    let receiver = Receiver::start().await;
    first.register_named("alice", "balcony").await;
    let response = first
        .send_json_as(
            "alice",
            Method::POST,
            "/alerts",
            &json!({"kind": "silence", "silence_minutes": 30, "webhook_url": receiver.url}),
        )
        .await;
    assert_eq!(response.status(), 201);
    let rule = response.json::<Value>().await.expect("json")["data"].clone();

    // The device never reports: every replica sees it silent once its clock has moved on.
    first.clock.advance(TimeDelta::minutes(31));
    receiver.wait_for(1).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let received = receiver.received();
    assert_eq!(
        received.len(),
        1,
        "one event, sent once: {:?}",
        received.iter().map(|r| r.json()).collect::<Vec<_>>()
    );
    assert_eq!(received[0].json()["type"], "alert.fired");

    let path = format!("/alerts/{}/test", rule["id"].as_str().expect("id"));
    for app in [&first, &second, &third] {
        let response = app
            .owner_request(Method::POST, &path, "alice")
            .send()
            .await
            .expect("sent");
        assert_eq!(response.status(), 202);
    }
    receiver.wait_for(4).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(receiver.received().len(), 4, "each test event once");
    let deliveries = second
        .data_as(
            "alice",
            &format!("/alerts/{}/deliveries", rule["id"].as_str().expect("id")),
        )
        .await;
    assert_eq!(deliveries.as_array().map(Vec::len), Some(4));
    assert!(deliveries
        .as_array()
        .expect("deliveries")
        .iter()
        .all(|d| d["status"] == "delivered" && d["attempts"] == 1));
}

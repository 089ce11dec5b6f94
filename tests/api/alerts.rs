//! Alerts (issue 38): rules over the API, their evaluation behind the commit, and their events
//! delivered as signed webhooks to a real receiver started by each test — on every backend pair.

use std::time::Duration;

use airq::clock::Clock as _;
use chrono::TimeDelta;
use reqwest::Method;
use serde_json::{json, Value};

use crate::common::receiver::{Received, Receiver};
use crate::common::{fe, field_errors, measured, problem, sample_with, TestApp};

/// A server that evaluates often, retries after a second (of its clock) and may deliver to the
/// receiver on loopback.
async fn app() -> TestApp {
    TestApp::spawn_with(|c| {
        c.alerts.policy.allow_private = true;
        c.alerts.tick = Duration::from_millis(20);
        c.alerts.retry_base = Duration::from_secs(1);
        c.alerts.timeout = Duration::from_millis(500);
    })
    .await
}

fn id(value: &Value) -> &str {
    value["id"].as_str().expect("id")
}

/// Creates a rule as `owner`; the 201's `data`.
async fn create(app: &TestApp, owner: &str, rule: Value) -> Value {
    let response = app
        .send_json_as(owner, Method::POST, "/alerts", &rule)
        .await;
    assert_eq!(response.status(), 201, "rule created");
    response.json::<Value>().await.expect("json")["data"].clone()
}

/// A PM2.5 rule on `device`: fires above 35, clears below 25.
fn pm25_rule(device: &Value, receiver: &Receiver, window: u16) -> Value {
    json!({
        "device_id": id(device),
        "kind": "threshold",
        "measure": "pm2_5",
        "above": 35,
        "clear": 25,
        "window_minutes": window,
        "webhook_url": receiver.url,
    })
}

/// Checks the signature of `request` with `secret` the way a receiver would (HMAC-SHA256 over
/// `"<t>." + body`, hex), independently of the server's code.
fn assert_signed(request: &Received, secret: &str) {
    let header = request.signature();
    let (t, v1) = header
        .split_once(',')
        .and_then(|(t, v1)| Some((t.strip_prefix("t=")?, v1.strip_prefix("v1=")?)))
        .unwrap_or_else(|| panic!("malformed signature header {header}"));
    let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, secret.as_bytes());
    let mut signed = format!("{t}.").into_bytes();
    signed.extend_from_slice(&request.body);
    let expected: String = ring::hmac::sign(&key, &signed)
        .as_ref()
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect();
    assert_eq!(v1, expected, "the signature verifies");
    assert_eq!(
        request.headers["content-type"], "application/json",
        "events are JSON"
    );
}

/// Waits (at most 15 s) until `rule`'s state for `device` is `state`.
async fn until_state(app: &TestApp, owner: &str, rule: &Value, state: &str) -> Value {
    for _ in 0..1_500 {
        let states = app
            .data_as(owner, &format!("/alerts/{}/states", id(rule)))
            .await;
        if let Some(found) = states
            .as_array()
            .expect("states")
            .iter()
            .find(|s| s["state"] == state)
        {
            return found.clone();
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("the rule's state never became {state}");
}

#[airq_test::test]
async fn rules_are_created_listed_changed_and_deleted_and_the_secret_is_shown_once() {
    let app = app().await;
    let receiver = Receiver::start().await;
    let device = app.register_named("alice", "balcony").await;
    let created = create(&app, "alice", pm25_rule(&device, &receiver, 10)).await;
    let secret = created["secret"].as_str().expect("a secret at creation");
    assert!(secret.starts_with("whsec_"), "{secret}");
    assert_eq!(created["kind"], "threshold");
    assert_eq!(created["measure"], "pm2_5");
    assert_eq!(created["above"], 35.0);
    assert_eq!(created["clear"], 25.0);
    assert_eq!(created["window_minutes"], 10);
    assert_eq!(created["device_id"], device["id"]);

    let shown = app
        .data_as("alice", &format!("/alerts/{}", id(&created)))
        .await;
    assert!(shown.get("secret").is_none(), "the secret is shown once");
    let listed = app.data_as("alice", "/alerts").await;
    assert_eq!(listed.as_array().map(Vec::len), Some(1));

    let response = app
        .send_json_as(
            "alice",
            Method::PATCH,
            &format!("/alerts/{}", id(&created)),
            &json!({"below": 5, "clear": 8}),
        )
        .await;
    assert_eq!(response.status(), 200);
    let changed = response.json::<Value>().await.expect("json")["data"].clone();
    assert_eq!(changed["below"], 5.0);
    assert!(changed.get("above").is_none(), "below replaced above");
    assert_eq!(changed["window_minutes"], 10, "untouched fields stay");

    let rotated = app
        .owner_request(
            Method::POST,
            &format!("/alerts/{}/rotate-secret", id(&created)),
            "alice",
        )
        .send()
        .await
        .expect("sent");
    assert_eq!(rotated.status(), 200);
    let rotated = rotated.json::<Value>().await.expect("json")["data"].clone();
    assert_ne!(rotated["secret"].as_str(), Some(secret), "a new secret");

    let deleted = app
        .owner_request(
            Method::DELETE,
            &format!("/alerts/{}", id(&created)),
            "alice",
        )
        .send()
        .await
        .expect("sent");
    assert_eq!(deleted.status(), 204);
    problem(
        app.get_as("alice", &format!("/alerts/{}", id(&created)))
            .await,
        404,
    )
    .await;
}

#[airq_test::test]
async fn another_owners_rules_are_invisible() {
    let app = app().await;
    let receiver = Receiver::start().await;
    let device = app.register_named("alice", "balcony").await;
    let rule = create(&app, "alice", pm25_rule(&device, &receiver, 0)).await;
    assert_eq!(app.data_as("bob", "/alerts").await, json!([]));
    for path in ["", "/states", "/deliveries"] {
        problem(
            app.get_as("bob", &format!("/alerts/{}{path}", id(&rule)))
                .await,
            404,
        )
        .await;
    }
    for (method, path) in [
        (Method::DELETE, ""),
        (Method::POST, "/rotate-secret"),
        (Method::POST, "/test"),
    ] {
        let response = app
            .owner_request(method, &format!("/alerts/{}{path}", id(&rule)), "bob")
            .send()
            .await
            .expect("sent");
        problem(response, 404).await;
    }
    let patched = app
        .send_json_as(
            "bob",
            Method::PATCH,
            &format!("/alerts/{}", id(&rule)),
            &json!({"above": 1}),
        )
        .await;
    problem(patched, 404).await;
    // Nor may bob watch alice's device: to him it does not exist.
    let response = app
        .send_json_as(
            "bob",
            Method::POST,
            "/alerts",
            &pm25_rule(&device, &receiver, 0),
        )
        .await;
    let body = problem(response, 404).await;
    assert!(
        body["detail"]
            .as_str()
            .is_some_and(|d| d.contains("device_id")),
        "{body}"
    );
    assert_eq!(
        app.data_as("alice", "/alerts")
            .await
            .as_array()
            .map(Vec::len),
        Some(1)
    );
}

#[airq_test::test]
async fn every_bad_field_is_named() {
    let app = app().await;
    let response = app
        .send_json_as(
            "alice",
            Method::POST,
            "/alerts",
            &json!({
                "device_id": "nope",
                "kind": "threshold",
                "measure": "co2",
                "above": 35,
                "below": 5,
                "window_minutes": 1441,
                "webhook_url": "ftp://example.com/",
            }),
        )
        .await;
    let body = problem(response, 422).await;
    let mut errors = field_errors(&body);
    errors.sort();
    let mut expected = vec![
        fe("device_id", "format", "body"),
        fe("measure", "enum", "body"),
        fe("below", "range", "body"),
        fe("window_minutes", "maximum", "body"),
        fe("webhook_url", "format", "body"),
    ];
    expected.sort();
    assert_eq!(errors, expected);

    let cases = [
        (
            json!({"kind": "silence", "webhook_url": "https://example.com/"}),
            fe("silence_minutes", "required", "body"),
        ),
        (
            json!({"kind": "silence", "silence_minutes": 0, "webhook_url": "https://example.com/"}),
            fe("silence_minutes", "minimum", "body"),
        ),
        (
            json!({"kind": "silence", "silence_minutes": 10081, "webhook_url": "https://example.com/"}),
            fe("silence_minutes", "maximum", "body"),
        ),
        (
            json!({"kind": "threshold", "measure": "pm2_5", "above": 35, "clear": 40, "webhook_url": "https://example.com/"}),
            fe("clear", "range", "body"),
        ),
        (
            json!({"kind": "threshold", "measure": "pm2_5", "webhook_url": "https://example.com/"}),
            fe("above", "required", "body"),
        ),
        (
            json!({"kind": "loud", "webhook_url": "https://example.com/"}),
            fe("kind", "enum", "body"),
        ),
        (
            json!({"kind": "silence", "silence_minutes": 5, "window_minutes": 2000, "webhook_url": "https://example.com/"}),
            fe("window_minutes", "maximum", "body"),
        ),
        (
            json!({"kind": "silence", "silence_minutes": 5}),
            fe("webhook_url", "required", "body"),
        ),
    ];
    for (body, error) in cases {
        let response = app
            .send_json_as("alice", Method::POST, "/alerts", &body)
            .await;
        let problem = problem(response, 422).await;
        assert_eq!(field_errors(&problem), vec![error], "{body}");
    }
}

#[airq_test::test]
async fn private_targets_are_refused_unless_allowed() {
    let app = TestApp::spawn().await;
    for url in [
        "https://127.0.0.1/hook",
        "https://10.0.0.7/hook",
        "https://169.254.169.254/latest/meta-data",
        "https://[fd00:ec2::254]/",
        "https://[::1]:8443/",
        "https://100.64.1.1/",
        "https://localhost/hook",
        "http://hooks.example.com/",
    ] {
        let response = app
            .send_json_as(
                "alice",
                Method::POST,
                "/alerts",
                &json!({"kind": "silence", "silence_minutes": 5, "webhook_url": url}),
            )
            .await;
        let body = problem(response, 422).await;
        assert_eq!(
            field_errors(&body),
            vec![fe("webhook_url", "format", "body")],
            "{url}"
        );
    }
    assert_eq!(app.data_as("alice", "/alerts").await, json!([]));
}

#[airq_test::test]
async fn a_threshold_fires_and_clears_with_hysteresis_in_signed_events() {
    let app = app().await;
    let receiver = Receiver::start().await;
    let device = app.register_named("alice", "balcony").await;
    let rule = create(&app, "alice", pm25_rule(&device, &receiver, 0)).await;
    let secret = rule["secret"].as_str().expect("secret").to_owned();

    app.upload_ok(&device, &sample_with(40, 40.0, 20.0)).await;
    let fired = receiver.wait_for(1).await;
    assert_signed(&fired[0], &secret);
    let event = fired[0].json();
    assert_eq!(event["type"], "alert.fired");
    assert_eq!(event["rule_id"], rule["id"]);
    assert_eq!(event["device_id"], device["id"]);
    assert_eq!(event["measure"], "pm2_5");
    assert_eq!(event["value"], 40.0);
    assert_eq!(event["threshold"], 35.0);
    assert!(event["id"].as_str().is_some() && event["at"].as_str().is_some());
    let firing = until_state(&app, "alice", &rule, "firing").await;
    assert_eq!(firing["device_id"], device["id"]);

    // Between the clear value and the threshold: still firing, nothing sent. (Readings stored
    // under one instant count together: the clock moves on between them.)
    app.clock.advance(TimeDelta::seconds(1));
    app.upload_ok(&device, &sample_with(40, 30.0, 20.0)).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(receiver.received().len(), 1, "no flapping at 30");
    until_state(&app, "alice", &rule, "firing").await;

    app.clock.advance(TimeDelta::seconds(1));
    app.upload_ok(&device, &sample_with(40, 20.0, 20.0)).await;
    let cleared = receiver.wait_for(2).await;
    assert_signed(&cleared[1], &secret);
    let event = cleared[1].json();
    assert_eq!(event["type"], "alert.cleared");
    assert_eq!(event["value"], 20.0);
    assert_eq!(event["threshold"], 25.0);
    let ok = until_state(&app, "alice", &rule, "ok").await;
    assert_eq!(ok["value"], 20.0);

    let deliveries = app
        .data_as("alice", &format!("/alerts/{}/deliveries", id(&rule)))
        .await;
    let deliveries = deliveries.as_array().expect("deliveries");
    assert_eq!(deliveries.len(), 2);
    assert_eq!(deliveries[0]["type"], "alert.cleared", "newest first");
    assert!(deliveries
        .iter()
        .all(|d| d["status"] == "delivered" && d["attempts"] == 1));
}

#[airq_test::test]
async fn a_window_rule_fires_on_the_mean_of_its_window() {
    let app = app().await;
    let receiver = Receiver::start().await;
    let device = app.register_named("alice", "balcony").await;
    let rule = create(&app, "alice", pm25_rule(&device, &receiver, 10)).await;
    app.upload_ok(&device, &sample_with(40, 30.0, 20.0)).await;
    let ok = until_state(&app, "alice", &rule, "ok").await;
    assert_eq!(ok["value"], 30.0);
    app.upload_ok(&device, &sample_with(40, 50.0, 20.0)).await;
    let fired = receiver.wait_for(1).await;
    let event = fired[0].json();
    assert_eq!(event["type"], "alert.fired");
    assert_eq!(event["value"], 40.0, "the mean of 30 and 50");
}

#[airq_test::test]
async fn a_window_mean_lets_go_of_readings_that_left_the_window() {
    let app = app().await;
    let receiver = Receiver::start().await;
    let device = app.register_named("alice", "balcony").await;
    create(&app, "alice", pm25_rule(&device, &receiver, 10)).await;
    app.upload_ok(&device, &sample_with(40, 50.0, 20.0)).await;
    assert_eq!(receiver.wait_for(1).await[0].json()["type"], "alert.fired");
    app.clock.advance(TimeDelta::minutes(5));
    app.upload_ok(&device, &sample_with(40, 10.0, 20.0)).await;
    // 50 and 10 average 30: above the clear value, still firing.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(receiver.received().len(), 1);
    app.clock.advance(TimeDelta::minutes(6));
    app.upload_ok(&device, &sample_with(40, 10.0, 20.0)).await;
    let cleared = receiver.wait_for(2).await[1].json();
    assert_eq!(cleared["type"], "alert.cleared");
    assert_eq!(cleared["value"], 10.0, "the 50 left the window");
}

#[airq_test::test]
async fn a_reading_measured_a_little_earlier_counts_in_its_window_at_once() {
    let app = app().await;
    let receiver = Receiver::start().await;
    let device = app.register_named("alice", "balcony").await;
    let rule = create(&app, "alice", pm25_rule(&device, &receiver, 10)).await;
    app.upload_ok(&device, &sample_with(40, 30.0, 20.0)).await;
    until_state(&app, "alice", &rule, "ok").await;
    let earlier = app.clock.now() - TimeDelta::seconds(30);
    app.upload_ok(&device, &measured(sample_with(40, 50.0, 20.0), earlier))
        .await;
    let fired = receiver.wait_for(1).await[0].json();
    assert_eq!(fired["type"], "alert.fired");
    assert_eq!(fired["value"], 40.0, "the mean of 30 and the earlier 50");
}

#[airq_test::test]
async fn a_silent_device_fires_by_the_clock_and_recovers_at_its_next_reading() {
    let app = app().await;
    let receiver = Receiver::start().await;
    let device = app.register_named("alice", "balcony").await;
    let rule = create(
        &app,
        "alice",
        json!({"kind": "silence", "silence_minutes": 30, "webhook_url": receiver.url}),
    )
    .await;
    assert_eq!(rule["device_id"], Value::Null, "every device");
    app.upload_ok(&device, &sample_with(40, 10.0, 20.0)).await;
    until_state(&app, "alice", &rule, "ok").await;

    app.clock.advance(TimeDelta::minutes(31));
    let fired = receiver.wait_for(1).await;
    let event = fired[0].json();
    assert_eq!(event["type"], "alert.fired");
    assert_eq!(event["device_id"], device["id"]);
    assert_eq!(event["measure"], Value::Null);
    assert_eq!(event["value"], 31.0);
    assert_eq!(event["threshold"], 30.0);

    app.upload_ok(&device, &sample_with(40, 10.0, 20.0)).await;
    let cleared = receiver.wait_for(2).await;
    assert_eq!(cleared[1].json()["type"], "alert.cleared");
    until_state(&app, "alice", &rule, "ok").await;
}

#[airq_test::test]
async fn failed_attempts_are_retried_with_backoff_and_events_stay_in_order() {
    let app = app().await;
    let receiver = Receiver::start().await;
    receiver.answer(&[500, 503]);
    let device = app.register_named("alice", "balcony").await;
    let rule = create(&app, "alice", pm25_rule(&device, &receiver, 0)).await;
    app.upload_ok(&device, &sample_with(40, 40.0, 20.0)).await;
    receiver.wait_for(1).await;
    // The clear is recorded while the fired event still waits for its retry.
    app.clock.advance(TimeDelta::milliseconds(10));
    app.upload_ok(&device, &sample_with(40, 10.0, 20.0)).await;
    until_state(&app, "alice", &rule, "ok").await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(
        receiver.received().len(),
        1,
        "nothing before the backoff, nor out of order"
    );

    // The retries come as the server's clock passes their backoff.
    for _ in 0..200 {
        if receiver.received().len() >= 4 {
            break;
        }
        app.clock.advance(TimeDelta::seconds(5));
        tokio::time::sleep(Duration::from_millis(30)).await;
    }
    let received = receiver.wait_for(4).await;
    let types: Vec<_> = received.iter().map(|r| r.json()["type"].clone()).collect();
    assert_eq!(
        types,
        ["alert.fired", "alert.fired", "alert.fired", "alert.cleared"],
        "three attempts at the first event, then the second"
    );
    let ids: Vec<_> = received[..3]
        .iter()
        .map(|r| r.json()["id"].clone())
        .collect();
    assert!(
        ids.iter().all(|id| *id == ids[0]),
        "a retry keeps the event's id"
    );
    assert_eq!(received[0].body, received[2].body, "the same bytes");

    let deliveries = app
        .data_as("alice", &format!("/alerts/{}/deliveries", id(&rule)))
        .await;
    let fired = &deliveries[1];
    assert_eq!(fired["type"], "alert.fired");
    assert_eq!(fired["status"], "delivered");
    assert_eq!(fired["attempts"], 3);
    assert_eq!(fired["last_status"], 200);

    let metrics = app
        .client
        .get(format!("{}/metrics", app.base))
        .send()
        .await
        .expect("sent")
        .text()
        .await
        .expect("text");
    for line in [
        "airq_alert_attempts_failed_total 2",
        "airq_alert_deliveries_total 2",
        "airq_alert_events_failed_total 0",
    ] {
        assert!(metrics.lines().any(|l| l == line), "{line} in {metrics}");
    }
}

#[airq_test::test]
async fn a_receiver_that_does_not_answer_in_time_gets_the_event_again() {
    let app = app().await;
    let receiver = Receiver::start().await;
    receiver.answer_late(Duration::from_secs(2));
    let device = app.register_named("alice", "balcony").await;
    let rule = create(&app, "alice", pm25_rule(&device, &receiver, 0)).await;
    let test = app
        .owner_request(
            Method::POST,
            &format!("/alerts/{}/test", id(&rule)),
            "alice",
        )
        .send()
        .await
        .expect("sent");
    assert_eq!(test.status(), 202);
    receiver.wait_for(1).await;
    for _ in 0..200 {
        let deliveries = app
            .data_as("alice", &format!("/alerts/{}/deliveries", id(&rule)))
            .await;
        if deliveries[0]["attempts"] == 1 {
            assert_eq!(deliveries[0]["status"], "pending");
            assert!(deliveries[0]["last_error"]
                .as_str()
                .is_some_and(|e| e.contains("no answer")));
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    app.clock.advance(TimeDelta::minutes(1));
    let received = receiver.wait_for(2).await;
    assert_eq!(received[0].json()["id"], received[1].json()["id"]);
}

#[airq_test::test]
async fn a_test_event_is_signed_with_the_current_secret() {
    let app = app().await;
    let receiver = Receiver::start().await;
    let rule = create(
        &app,
        "alice",
        json!({"kind": "silence", "silence_minutes": 60, "webhook_url": receiver.url}),
    )
    .await;
    let rotated = app
        .owner_request(
            Method::POST,
            &format!("/alerts/{}/rotate-secret", id(&rule)),
            "alice",
        )
        .send()
        .await
        .expect("sent")
        .json::<Value>()
        .await
        .expect("json")["data"]
        .clone();
    let response = app
        .owner_request(
            Method::POST,
            &format!("/alerts/{}/test", id(&rule)),
            "alice",
        )
        .send()
        .await
        .expect("sent");
    assert_eq!(response.status(), 202);
    let accepted = response.json::<Value>().await.expect("json")["data"].clone();
    let received = receiver.wait_for(1).await;
    assert_signed(&received[0], rotated["secret"].as_str().expect("secret"));
    let event = received[0].json();
    assert_eq!(event["type"], "alert.test");
    assert_eq!(event["id"], accepted["event_id"]);
    assert_eq!(event["value"], Value::Null);
}

#[airq_test::test]
async fn a_deleted_devices_rules_are_gone() {
    let app = app().await;
    let receiver = Receiver::start().await;
    let device = app.register_named("alice", "balcony").await;
    let other = app.register_named("alice", "kitchen").await;
    let rule = create(&app, "alice", pm25_rule(&device, &receiver, 0)).await;
    let kept = create(&app, "alice", pm25_rule(&other, &receiver, 0)).await;
    let deleted = app
        .owner_request(
            Method::DELETE,
            &format!("/devices/{}", id(&device)),
            "alice",
        )
        .send()
        .await
        .expect("sent");
    assert_eq!(deleted.status(), 204);
    problem(
        app.get_as("alice", &format!("/alerts/{}", id(&rule))).await,
        404,
    )
    .await;
    let listed = app.data_as("alice", "/alerts").await;
    assert_eq!(listed.as_array().map(Vec::len), Some(1));
    assert_eq!(listed[0]["id"], kept["id"]);
}

#[airq_test::test]
async fn an_event_whose_delivery_was_killed_is_sent_after_the_restart() {
    use crate::common::process::{serve, token, DATA_DIR};
    let dir = tempfile::tempdir().expect("temporary dir");
    // The outbox lives in PostgreSQL on both production pairs: the QuestDB binaries kill a
    // server on PostgreSQL too (its readings stay in the data dir; none are needed here).
    let schema = match crate::backend::PAIR {
        crate::common::Pair::Embedded => None,
        _ => Some(crate::common::TestSchema::create().await),
    };
    let receiver = Receiver::start().await;
    // The first attempt hangs in the receiver until the server is killed.
    receiver.answer_late(Duration::from_secs(30));
    let start = || {
        serve(dir.path(), |command| {
            command.args([
                "--alerts-allow-private-targets",
                "--alerts-timeout-ms",
                "2000",
            ]);
            if let Some(schema) = &schema {
                command.args(["--postgres-url", &schema.url]);
            }
        })
    };
    let (mut server, address) = start();
    let owner = token(dir.path(), DATA_DIR, "alice");
    let client = reqwest::Client::new();
    let created: Value = client
        .post(format!("http://{address}/api/v1/alerts"))
        .bearer_auth(&owner)
        .json(&json!({"kind": "silence", "silence_minutes": 60, "webhook_url": receiver.url}))
        .send()
        .await
        .expect("sent")
        .json()
        .await
        .expect("json");
    let rule = id(&created["data"]).to_owned();
    let test = client
        .post(format!("http://{address}/api/v1/alerts/{rule}/test"))
        .bearer_auth(&owner)
        .send()
        .await
        .expect("sent");
    assert_eq!(test.status(), 202);
    let first = receiver.wait_for(1).await;

    server.signal("KILL");
    server.exit_within(Duration::from_secs(10));
    drop(server);
    let (_server, address) = start();
    // Sent again once the dead process's lease on it ran out (twice the attempt timeout).
    let received = receiver.wait_for(2).await;
    assert_eq!(
        received[1].json()["id"],
        first[0].json()["id"],
        "the same event"
    );
    assert_eq!(received[1].body, first[0].body);
    let mut delivered = Value::Null;
    for _ in 0..100 {
        delivered = client
            .get(format!("http://{address}/api/v1/alerts/{rule}/deliveries"))
            .bearer_auth(&owner)
            .send()
            .await
            .expect("sent")
            .json::<Value>()
            .await
            .expect("json")["data"][0]
            .clone();
        if delivered["status"] == "delivered" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(delivered["status"], "delivered", "{delivered}");
}

#[airq_test::test]
async fn a_changed_rule_starts_its_states_afresh() {
    let app = app().await;
    let receiver = Receiver::start().await;
    let device = app.register_named("alice", "balcony").await;
    let rule = create(&app, "alice", pm25_rule(&device, &receiver, 0)).await;
    app.upload_ok(&device, &sample_with(40, 40.0, 20.0)).await;
    receiver.wait_for(1).await;
    until_state(&app, "alice", &rule, "firing").await;

    let path = format!("/alerts/{}", id(&rule));
    let patched = app
        .send_json_as(
            "alice",
            Method::PATCH,
            &path,
            &json!({"above": 45, "clear": 30}),
        )
        .await;
    assert_eq!(patched.status(), 200);
    let ok = until_state(&app, "alice", &rule, "ok").await;
    assert_eq!(ok["value"], 40.0, "40 is below the new threshold");

    let patched = app
        .send_json_as("alice", Method::PATCH, &path, &json!({"above": 38}))
        .await;
    assert_eq!(patched.status(), 200);
    let fired = receiver.wait_for(2).await;
    let event = fired[1].json();
    assert_eq!(event["type"], "alert.fired");
    assert_eq!(event["threshold"], 38.0);
}

#[airq_test::test]
async fn an_owner_has_at_most_a_thousand_rules() {
    let app = app().await;
    let rule =
        json!({"kind": "silence", "silence_minutes": 60, "webhook_url": "https://127.0.0.1/hook"});
    let mut created = 0;
    for _ in 0..125 {
        let batch = (0..8).map(|_| app.send_json_as("alice", Method::POST, "/alerts", &rule));
        for response in futures_util::future::join_all(batch).await {
            assert_eq!(response.status(), 201);
            created += 1;
        }
    }
    assert_eq!(created, 1_000);
    let refused = app
        .send_json_as("alice", Method::POST, "/alerts", &rule)
        .await;
    let body = problem(refused, 409).await;
    assert!(
        body["detail"].as_str().is_some_and(|d| d.contains("1000")),
        "{body}"
    );
    // Another owner is not held to alice's count.
    let response = app
        .send_json_as("bob", Method::POST, "/alerts", &rule)
        .await;
    assert_eq!(response.status(), 201);
}

/// The README's receiver (section "Alerts"), run as written with its secret and port filled in,
/// accepts a signed event (204) and would refuse a forged one.
#[airq_test::test]
async fn the_readmes_python_receiver_checks_real_signatures() {
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).expect("README");
    let section = &readme[readme
        .find("A receiver that checks the signature")
        .expect("the example")..];
    let code = section
        .split("```python\n")
        .nth(1)
        .and_then(|rest| rest.split("```").next())
        .expect("a python block");
    let app = app().await;
    let port = {
        let socket = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port");
        socket.local_addr().expect("address").port()
    };
    let rule = create(
        &app,
        "alice",
        json!({"kind": "silence", "silence_minutes": 60,
               "webhook_url": format!("http://127.0.0.1:{port}/")}),
    )
    .await;
    let secret = rule["secret"].as_str().expect("secret");
    let code = code
        .replace("b\"whsec_...\"", &format!("b\"{secret}\""))
        .replace("((\"\", 8000)", &format!("((\"127.0.0.1\", {port})"));
    let dir = tempfile::tempdir().expect("temporary dir");
    let script = dir.path().join("receiver.py");
    std::fs::write(&script, code).expect("script written");
    let mut python = std::process::Command::new("python3")
        .arg("-u")
        .arg(&script)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("python3 runs");
    // Until the receiver listens.
    for _ in 0..200 {
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let response = app
        .owner_request(
            Method::POST,
            &format!("/alerts/{}/test", id(&rule)),
            "alice",
        )
        .send()
        .await
        .expect("sent");
    assert_eq!(response.status(), 202);
    let mut delivery = Value::Null;
    for _ in 0..500 {
        delivery = app
            .data_as("alice", &format!("/alerts/{}/deliveries", id(&rule)))
            .await[0]
            .clone();
        if delivery["status"] == "delivered" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let forged = reqwest::Client::new()
        .post(format!("http://127.0.0.1:{port}/"))
        .header(
            "x-airq-signature",
            format!("t={},v1=00", chrono::Utc::now().timestamp()),
        )
        .body("{}")
        .send()
        .await
        .map(|response| response.status().as_u16());
    let _ = python.kill();
    let output = python.wait_with_output().expect("python's output");
    assert_eq!(delivery["status"], "delivered", "{delivery}");
    assert_eq!(delivery["last_status"], 204);
    assert_eq!(forged.ok(), Some(401), "a forged signature is refused");
    assert!(
        String::from_utf8_lossy(&output.stdout).contains("alert.test"),
        "the receiver printed the event"
    );
}

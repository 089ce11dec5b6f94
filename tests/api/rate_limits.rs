//! Rate limits: uploads per device (a batch counts once, checked after the credentials and before
//! the body), public routes per client address (`X-Forwarded-For` only from a trusted proxy), 0
//! turns a limit off, owner and service routes are never limited. 429s are `about:blank`
//! problems with `Retry-After` in whole seconds.
//!
//! Every test sets its own small rates (the harness turns the limits off by default). GCRA: a
//! quiet key gets `burst` requests at once, then one every 60/rate seconds; with a rate of 1 a
//! minute nothing is replenished during a test, so no test sleeps.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use airq::config::{Rate, TrustedProxies};
use reqwest::{Method, Response};
use serde_json::{json, Value};

use crate::common::{problem, sample, TestApp};

/// A limit of one request a minute after a burst of `burst`: nothing comes back during a test.
fn burst_of(burst: u32) -> Rate {
    Rate {
        per_minute: 1,
        burst,
    }
}

/// `POST /data/batch` with `count` sample readings.
async fn upload_batch(app: &TestApp, device: &Value, count: usize) -> Response {
    app.client
        .post(app.url("/data/batch"))
        .header("x-device-id", device["device_id"].as_str().expect("id"))
        .header("x-device-key", device["device_key"].as_str().expect("key"))
        .json(&json!({ "readings": vec![sample(); count] }))
        .send()
        .await
        .expect("request sent")
}

/// `POST /data` with the device's id and `key`, and a body that is not JSON at all.
async fn upload_raw(app: &TestApp, device: &Value, key: &str) -> Response {
    app.client
        .post(app.url("/data"))
        .header("x-device-id", device["device_id"].as_str().expect("id"))
        .header("x-device-key", key)
        .header("content-type", "application/json")
        .body("this is not json")
        .send()
        .await
        .expect("request sent")
}

/// `GET` a public path, as the client `forwarded_for` names when given.
async fn get_public_as(app: &TestApp, path: &str, forwarded_for: Option<&str>) -> Response {
    let mut request = app.client.get(app.url(path));
    if let Some(client) = forwarded_for {
        request = request.header("x-forwarded-for", client);
    }
    request.send().await.expect("request sent")
}

/// The whole seconds of a 429's `Retry-After`.
fn retry_after(response: &Response) -> u64 {
    response.headers()["retry-after"]
        .to_str()
        .expect("ascii")
        .parse()
        .expect("Retry-After is whole seconds")
}

/// Checks a 429 problem and returns its `Retry-After` and detail.
async fn too_many(response: Response) -> (u64, String) {
    let seconds = retry_after(&response);
    let body = problem(response, 429).await;
    assert_eq!(body["type"], "about:blank");
    assert_eq!(body["title"], "Too Many Requests");
    (seconds, body["detail"].as_str().expect("detail").to_owned())
}

/// The value of one line of `/metrics`.
async fn metric(app: &TestApp, line_prefix: &str) -> u64 {
    let text = app
        .client
        .get(format!("{}/metrics", app.base))
        .send()
        .await
        .expect("request sent")
        .text()
        .await
        .expect("text");
    text.lines()
        .find_map(|line| line.strip_prefix(line_prefix))
        .unwrap_or_else(|| panic!("{line_prefix} in {text}"))
        .trim()
        .parse()
        .expect("a count")
}

const DEVICE_REFUSALS: &str = "airq_rate_limited_total{limit=\"device\"}";
const PUBLIC_REFUSALS: &str = "airq_rate_limited_total{limit=\"public\"}";

#[airq_test::test]
async fn a_device_gets_its_burst_then_429_with_retry_after() {
    let app = TestApp::spawn_with(|c| c.rate_limits.device = burst_of(3)).await;
    let device = app.register_named("alice", "Balcony").await;
    for n in 0..3 {
        assert_eq!(app.upload(&device, &sample()).await.status(), 201, "#{n}");
    }
    let (seconds, detail) = too_many(app.upload(&device, &sample()).await).await;
    // One request a minute: the next one passes a minute after the burst began, rounded up.
    assert!((50..=60).contains(&seconds), "Retry-After {seconds}");
    assert!(detail.contains("upload"), "{detail}");
    assert!(detail.contains("each device"), "{detail}");
    assert_eq!(metric(&app, DEVICE_REFUSALS).await, 1);
    assert_eq!(metric(&app, PUBLIC_REFUSALS).await, 0);

    // Refused before the body is read: a body that is not JSON is still a 429, not a 400.
    let key = device["device_key"].as_str().expect("key");
    too_many(upload_raw(&app, &device, key).await).await;
    assert_eq!(metric(&app, DEVICE_REFUSALS).await, 2);
}

#[airq_test::test]
async fn another_device_is_unaffected() {
    let app = TestApp::spawn_with(|c| c.rate_limits.device = burst_of(2)).await;
    let first = app.register_named("alice", "First").await;
    let second = app.register_named("alice", "Second").await;
    for _ in 0..2 {
        app.upload_ok(&first, &sample()).await;
    }
    too_many(app.upload(&first, &sample()).await).await;
    for _ in 0..2 {
        app.upload_ok(&second, &sample()).await;
    }
    too_many(app.upload(&second, &sample()).await).await;
}

#[airq_test::test]
async fn a_batch_counts_once_and_shares_the_limit_with_single_uploads() {
    let app = TestApp::spawn_with(|c| c.rate_limits.device = burst_of(3)).await;
    let device = app.register_named("alice", "Gateway").await;
    for n in 0..2 {
        let response = upload_batch(&app, &device, 50).await;
        assert_eq!(response.status(), 201, "batch #{n} of 50 readings");
    }
    app.upload_ok(&device, &sample()).await;
    too_many(upload_batch(&app, &device, 1).await).await;
    too_many(app.upload(&device, &sample()).await).await;
}

#[airq_test::test]
async fn a_wrong_key_is_401_not_429_and_costs_the_device_nothing() {
    let app = TestApp::spawn_with(|c| c.rate_limits.device = burst_of(2)).await;
    let device = app.register_named("alice", "Balcony").await;
    let wrong = format!("sk_{}", "x".repeat(40));
    for _ in 0..5 {
        problem(upload_raw(&app, &device, &wrong).await, 401).await;
    }
    // The device's allowance is whole.
    for _ in 0..2 {
        app.upload_ok(&device, &sample()).await;
    }
    too_many(app.upload(&device, &sample()).await).await;
    // Credentials are checked first: a wrong key is 401 even while the device is limited.
    problem(upload_raw(&app, &device, &wrong).await, 401).await;
    assert_eq!(metric(&app, DEVICE_REFUSALS).await, 1);
}

#[airq_test::test]
async fn public_routes_are_limited_per_address_and_keep_their_cors_headers() {
    let app = TestApp::spawn_with(|c| c.rate_limits.public = burst_of(3)).await;
    let device = app
        .register("alice", json!({ "name": "Roof", "is_public": true }))
        .await;
    let id = device["id"].as_str().expect("id");
    app.upload_ok(&device, &sample()).await;
    // The public routes share one allowance per address.
    for path in [
        format!("/public/devices/{id}"),
        format!("/public/devices/{id}/current"),
        "/public/map/devices".to_owned(),
    ] {
        assert_eq!(app.get_public(&path).await.status(), 200, "{path}");
    }
    let response = app.get_public(&format!("/public/devices/{id}")).await;
    assert_eq!(response.headers()["access-control-allow-origin"], "*");
    assert!(response
        .headers()
        .contains_key("access-control-expose-headers"));
    let (seconds, detail) = too_many(response).await;
    assert!((1..=60).contains(&seconds), "Retry-After {seconds}");
    assert!(detail.contains("public"), "{detail}");
    assert!(detail.contains("client address"), "{detail}");
    too_many(app.get_public("/public/map/devices").await).await;
    assert_eq!(metric(&app, PUBLIC_REFUSALS).await, 2);

    // A CORS preflight is not counted, nor refused.
    let preflight = app
        .client
        .request(Method::OPTIONS, app.url("/public/map/devices"))
        .header("origin", "https://widget.example")
        .header("access-control-request-method", "GET")
        .send()
        .await
        .expect("request sent");
    assert_eq!(preflight.status(), 204);

    // Uploads and owner reads of the same address are not public requests.
    app.upload_ok(&device, &sample()).await;
    assert_eq!(app.get_as("alice", "/devices").await.status(), 200);
}

#[airq_test::test]
async fn x_forwarded_for_names_the_client_behind_a_trusted_proxy() {
    // The test server's peer is 127.0.0.1: here it stands for a trusted proxy.
    let app = TestApp::spawn_with(|c| {
        c.rate_limits.public = burst_of(2);
        c.rate_limits.trusted_proxies =
            TrustedProxies::parse("127.0.0.0/8, ::1/128").expect("networks");
    })
    .await;
    let map = "/public/map/devices";
    for _ in 0..2 {
        let response = get_public_as(&app, map, Some("203.0.113.1")).await;
        assert_eq!(response.status(), 200);
    }
    too_many(get_public_as(&app, map, Some("203.0.113.1")).await).await;
    // Another client behind the same proxy has an allowance of its own.
    assert_eq!(
        get_public_as(&app, map, Some("203.0.113.2")).await.status(),
        200
    );
    // What the client wrote left of the proxy's entry changes nothing: the right-most untrusted
    // address counts.
    too_many(get_public_as(&app, map, Some("198.51.100.7, 203.0.113.1")).await).await;
    // A chain of trusted proxies is walked through.
    too_many(get_public_as(&app, map, Some("203.0.113.1, 127.0.0.9")).await).await;
    // Without the header the proxy itself is the client.
    assert_eq!(get_public_as(&app, map, None).await.status(), 200);
}

#[airq_test::test]
async fn x_forwarded_for_is_ignored_from_an_untrusted_peer() {
    let app = TestApp::spawn_with(|c| {
        c.rate_limits.public = burst_of(2);
        c.rate_limits.trusted_proxies = TrustedProxies::default();
    })
    .await;
    let map = "/public/map/devices";
    for client in ["203.0.113.1", "203.0.113.2"] {
        let response = get_public_as(&app, map, Some(client)).await;
        assert_eq!(response.status(), 200, "{client}");
    }
    // Every request counted for the peer, 127.0.0.1, whatever the header claimed.
    too_many(get_public_as(&app, map, Some("203.0.113.3")).await).await;
    too_many(get_public_as(&app, map, None).await).await;
}

#[airq_test::test]
async fn a_rate_of_zero_turns_a_limit_off() {
    let app = TestApp::spawn_with(|c| {
        c.rate_limits.device = Rate {
            per_minute: 0,
            burst: 1,
        };
        c.rate_limits.public = Rate {
            per_minute: 0,
            burst: 1,
        };
    })
    .await;
    let device = app
        .register("alice", json!({ "name": "Roof", "is_public": true }))
        .await;
    let id = device["id"].as_str().expect("id");
    for _ in 0..25 {
        app.upload_ok(&device, &sample()).await;
        let response = app.get_public(&format!("/public/devices/{id}")).await;
        assert_eq!(response.status(), 200);
    }
    assert_eq!(metric(&app, DEVICE_REFUSALS).await, 0);
    assert_eq!(metric(&app, PUBLIC_REFUSALS).await, 0);
}

#[airq_test::test]
async fn owner_and_service_routes_are_never_limited() {
    let app = TestApp::spawn_with(|c| {
        c.rate_limits.device = burst_of(1);
        c.rate_limits.public = burst_of(1);
    })
    .await;
    let device = app.register_named("alice", "Balcony").await;
    let id = device["id"].as_str().expect("id");
    app.upload_ok(&device, &sample()).await;
    too_many(app.upload(&device, &sample()).await).await;
    assert_eq!(app.get_public("/public/map/devices").await.status(), 200);
    too_many(app.get_public("/public/map/devices").await).await;
    for _ in 0..10 {
        for path in [
            "/devices".to_owned(),
            format!("/devices/{id}"),
            format!("/devices/{id}/current"),
            "/air-quality/current".to_owned(),
        ] {
            assert_eq!(app.get_as("alice", &path).await.status(), 200, "{path}");
        }
        for path in ["/healthz", "/metrics"] {
            let response = app
                .client
                .get(format!("{}{path}", app.base))
                .send()
                .await
                .expect("request sent");
            assert_eq!(response.status(), 200, "{path}");
        }
    }
}

#[airq_test::test]
fn a_bad_trusted_proxies_value_is_a_startup_error() {
    let dir = tempfile::tempdir().expect("temporary dir");
    for (flag, env) in [
        (Some("10.0.0.0/33"), None),
        (None, Some("10.0.0.0/8,not-a-network")),
    ] {
        let mut command = Command::new(env!("CARGO_BIN_EXE_airq"));
        for (name, _) in std::env::vars_os() {
            if name.to_string_lossy().starts_with("AIRQ_") {
                command.env_remove(name);
            }
        }
        command
            .current_dir(dir.path())
            .env("AIRQ_LISTEN", "127.0.0.1:0")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        if let Some(value) = flag {
            command.args(["serve", "--trusted-proxies", value]);
        }
        if let Some(value) = env {
            command.env("AIRQ_TRUSTED_PROXIES", value);
        }
        let mut child = command.spawn().expect("airq starts");
        // A refused value ends the process at once; one that got through would serve forever.
        let deadline = Instant::now() + Duration::from_secs(20);
        let status = loop {
            if let Some(status) = child.try_wait().expect("wait") {
                break status;
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                panic!("airq accepted {flag:?} {env:?} and served");
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let output = child.wait_with_output().expect("stderr");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(status.code(), Some(2), "{stderr}");
        assert!(stderr.contains("CIDR"), "{stderr}");
        assert!(stderr.contains("trusted-proxies"), "{stderr}");
    }
}

#[airq_test::test]
async fn the_openapi_document_describes_the_429s() {
    let app = TestApp::spawn().await;
    let doc: Value = app
        .client
        .get(app.url("/openapi.json"))
        .send()
        .await
        .expect("request sent")
        .json()
        .await
        .expect("json");
    let responses = &doc["components"]["responses"];
    for (name, paths) in [
        ("TooManyRequests", vec!["/data", "/data/batch"]),
        (
            "PublicTooManyRequests",
            vec![
                "/public/devices/{id}",
                "/public/devices/{id}/current",
                "/public/devices/{id}/historical",
                "/public/map/devices",
            ],
        ),
    ] {
        assert_eq!(
            responses[name]["headers"]["Retry-After"]["$ref"], "#/components/headers/Retry-After",
            "{name}"
        );
        let example =
            &responses[name]["content"]["application/problem+json"]["examples"]["limited"]["value"];
        assert_eq!(example["title"], "Too Many Requests", "{name}");
        assert_eq!(example["type"], "about:blank", "{name}");
        for path in paths {
            let method = if path.starts_with("/data") {
                "post"
            } else {
                "get"
            };
            assert_eq!(
                doc["paths"][format!("/api/v1{path}")][method]["responses"]["429"]["$ref"],
                format!("#/components/responses/{name}"),
                "{method} {path}"
            );
        }
    }
    assert_eq!(
        doc["components"]["headers"]["Retry-After"]["schema"]["type"],
        "integer"
    );
}

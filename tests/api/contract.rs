//! The contract check of the harness (`tests/common/contract.rs`, `tests/common/proxy.rs`): it
//! lets the server's real answers through, catches every kind of drift from the OpenAPI document
//! (status, content type, header, body), and fails the test that received the drifting answer.

use std::io::Write as _;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use futures_util::FutureExt as _;
use hyper::header::{HeaderMap, HeaderName, HeaderValue};
use hyper::Method;
use reqwest::Method as ClientMethod;
use serde_json::{json, Value};

use crate::common::contract::{Contract, Exchange};
use crate::common::TestApp;

/// The contract of the served document.
async fn served() -> Arc<Contract> {
    TestApp::spawn().await.contract()
}

/// Headers from `(name, value)` pairs; every answer of the server carries a request id.
fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
    let mut headers = HeaderMap::new();
    headers.insert("x-request-id", HeaderValue::from_static("test-1"));
    for (name, value) in pairs {
        headers.insert(
            HeaderName::from_bytes(name.as_bytes()).expect("header name"),
            HeaderValue::from_str(value).expect("header value"),
        );
    }
    headers
}

const JSON: (&str, &str) = ("content-type", "application/json");
const PROBLEM: (&str, &str) = ("content-type", "application/problem+json");

/// The violations of one made-up exchange.
fn check(
    contract: &Contract,
    method: Method,
    target: &str,
    status: u16,
    headers: &HeaderMap,
    body: &[u8],
) -> Vec<String> {
    contract.check(&Exchange {
        method: &method,
        target,
        status,
        headers,
        body,
    })
}

/// A device as the server writes it.
fn device() -> Value {
    json!({
        "id": "0f5f4e4c-6a8b-4d1e-9a77-2f1c3b5d7e90",
        "device_id": "dev_4fHq9LmZ2xRt7KpWc3NvB8Ys",
        "name": "Balcony",
        "is_public": false,
        "is_location_public": false,
        "is_outdoor": true,
        "created_at": "2026-11-21T14:03:27.512Z",
        "updated_at": "2026-11-21T14:03:27.512Z"
    })
}

/// A problem as the server writes it.
fn not_found(instance: &str) -> Vec<u8> {
    json!({
        "type": "about:blank",
        "title": "Not Found",
        "status": 404,
        "detail": "no resource here",
        "instance": instance,
        "errors": []
    })
    .to_string()
    .into_bytes()
}

fn bytes(value: &Value) -> Vec<u8> {
    value.to_string().into_bytes()
}

fn gzip(body: &[u8]) -> Vec<u8> {
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    encoder.write_all(body).expect("gzip");
    encoder.finish().expect("gzip")
}

/// Asserts one violation or more, one of them containing `needle`.
fn assert_caught(violations: &[String], needle: &str) {
    assert!(
        violations
            .iter()
            .any(|violation| violation.contains(needle)),
        "expected a violation containing {needle:?}, got {violations:#?}"
    );
}

#[airq_test::test]
async fn conforming_answers_pass() {
    let contract = served().await;
    let list = bytes(&json!({ "data": [device()] }));
    let ok = check(
        &contract,
        Method::GET,
        "/api/v1/devices?x=1",
        200,
        &headers(&[JSON]),
        &list,
    );
    assert!(ok.is_empty(), "{ok:#?}");
    let path = "/api/v1/devices/0f5f4e4c-6a8b-4d1e-9a77-2f1c3b5d7e90";
    let device = bytes(&json!({ "data": device() }));
    let charset = ("content-type", "application/json; charset=utf-8");
    let ok = check(
        &contract,
        Method::GET,
        path,
        200,
        &headers(&[charset]),
        &device,
    );
    assert!(ok.is_empty(), "{ok:#?}");
    let ok = check(&contract, Method::DELETE, path, 204, &headers(&[]), b"");
    assert!(ok.is_empty(), "{ok:#?}");
}

#[airq_test::test]
async fn a_body_that_drifts_from_its_schema_is_caught() {
    let contract = served().await;
    // `GET /api/v1/devices` answering 200 with `device` as its one entry.
    let listed = |device: &Value| {
        check(
            &contract,
            Method::GET,
            "/api/v1/devices",
            200,
            &headers(&[JSON]),
            &bytes(&json!({ "data": [device] })),
        )
    };
    let mut wrong = device();
    wrong["id"] = json!("42");
    let violations = listed(&wrong);
    assert_caught(&violations, "GET /api/v1/devices → 200");
    assert_caught(&violations, "at /data/0/id");

    let mut extra = device();
    extra["owner"] = json!("alice");
    let violations = listed(&extra);
    assert_caught(&violations, "owner");

    let mut missing = device();
    missing.as_object_mut().expect("object").remove("name");
    let violations = listed(&missing);
    assert_caught(&violations, "name");

    let mut seconds = device();
    seconds["created_at"] = json!("2026-11-21T14:03:27Z");
    let violations = listed(&seconds);
    assert_caught(&violations, "at /data/0/created_at");

    let violations = check(
        &contract,
        Method::GET,
        "/api/v1/devices",
        200,
        &headers(&[JSON]),
        b"{\"data\": [",
    );
    assert_caught(&violations, "not JSON");
}

#[airq_test::test]
async fn an_undocumented_status_content_type_or_header_is_caught() {
    let contract = served().await;
    let list = bytes(&json!({ "data": [] }));
    let violations = check(
        &contract,
        Method::GET,
        "/api/v1/devices",
        418,
        &headers(&[PROBLEM]),
        &not_found("/api/v1/devices"),
    );
    assert_caught(&violations, "status 418 is not documented");

    let violations = check(
        &contract,
        Method::GET,
        "/api/v1/devices",
        200,
        &headers(&[("content-type", "text/html")]),
        &list,
    );
    assert_caught(&violations, "\"text/html\" is not documented");

    let violations = check(
        &contract,
        Method::GET,
        "/api/v1/devices",
        200,
        &HeaderMap::new(),
        &list,
    );
    assert_caught(&violations, "no Content-Type");
    assert_caught(&violations, "X-Request-Id is missing");

    let problem = bytes(&json!({
        "type": "about:blank",
        "title": "Unauthorized",
        "status": 401,
        "detail": "no token",
        "instance": "/api/v1/devices",
        "errors": []
    }));
    let violations = check(
        &contract,
        Method::GET,
        "/api/v1/devices",
        401,
        &headers(&[PROBLEM, ("www-authenticate", "Basic")]),
        &problem,
    );
    assert_caught(&violations, "header WWW-Authenticate");
}

#[airq_test::test]
async fn unknown_paths_and_methods_are_held_to_their_documented_answers() {
    let contract = served().await;
    let problem = headers(&[PROBLEM]);
    let ok = check(
        &contract,
        Method::GET,
        "/api/v1/nowhere",
        404,
        &problem,
        &not_found("/api/v1/nowhere"),
    );
    assert!(ok.is_empty(), "{ok:#?}");
    let violations = check(
        &contract,
        Method::GET,
        "/api/v1/nowhere",
        200,
        &headers(&[JSON]),
        b"{}",
    );
    assert_caught(&violations, "no template matches");
    // `{id}` is one non-empty segment.
    let violations = check(
        &contract,
        Method::GET,
        "/api/v1/devices/",
        200,
        &headers(&[JSON]),
        b"{}",
    );
    assert_caught(&violations, "no template matches");

    let violations = check(
        &contract,
        Method::PUT,
        "/api/v1/devices",
        405,
        &problem,
        &not_found("/api/v1/devices"),
    );
    assert_caught(&violations, "header Allow is missing");
    let violations = check(
        &contract,
        Method::PUT,
        "/api/v1/devices",
        200,
        &headers(&[JSON]),
        b"{}",
    );
    assert_caught(&violations, "PUT is not an operation of /api/v1/devices");
}

#[airq_test::test]
async fn a_gzip_body_is_checked_decompressed_and_bodiless_answers_stay_bodiless() {
    let contract = served().await;
    let public = [
        JSON,
        ("content-encoding", "gzip"),
        ("access-control-allow-origin", "*"),
        ("access-control-expose-headers", "ETag, X-Request-Id"),
        ("cache-control", "public, max-age=5"),
        ("etag", "\"g1\""),
        ("vary", "Accept, Accept-Encoding"),
    ];
    let ok = check(
        &contract,
        Method::GET,
        "/api/v1/public/map/devices",
        200,
        &headers(&public),
        &gzip(&bytes(&json!({ "data": [] }))),
    );
    assert!(ok.is_empty(), "{ok:#?}");
    let violations = check(
        &contract,
        Method::GET,
        "/api/v1/public/map/devices",
        200,
        &headers(&public),
        &gzip(&bytes(&json!({ "data": [{ "id": 1 }] }))),
    );
    assert_caught(&violations, "at /data/0");

    let violations = check(
        &contract,
        Method::GET,
        "/api/v1/public/map/devices",
        304,
        &headers(&public[2..]),
        b"{}",
    );
    assert_caught(
        &violations,
        "a body of 2 bytes where the document describes none",
    );
}

#[airq_test::test]
async fn a_drifting_answer_fails_the_test_that_received_it() {
    let app = TestApp::spawn().await;
    let device = app.register_named("alice", "Balcony").await;
    // A document that no longer knows `name`: the real answer now drifts from it.
    app.check_against(|document| {
        let device = &mut document["components"]["schemas"]["Device"];
        device["properties"]
            .as_object_mut()
            .expect("properties")
            .remove("name");
        device["required"]
            .as_array_mut()
            .expect("required")
            .retain(|field| field != "name");
    });
    let path = format!("/devices/{}", device["id"].as_str().expect("id"));
    let response = app.get_as("alice", &path).await;
    assert_eq!(
        response.status(),
        200,
        "the answer itself is relayed unchanged"
    );
    let body: Value = response.json().await.expect("json");
    assert_eq!(body["data"]["name"], "Balcony");

    let failure = std::panic::catch_unwind(AssertUnwindSafe(move || drop(app)))
        .expect_err("dropping the app fails the test");
    let message = failure
        .downcast_ref::<String>()
        .expect("a formatted panic message");
    assert!(
        message.contains("drifted from the OpenAPI document"),
        "{message}"
    );
    assert!(
        message.contains(&format!("GET /api/v1{path} → 200")),
        "{message}"
    );
    assert!(message.contains("name"), "{message}");
}

#[airq_test::test]
async fn stopping_the_app_fails_the_test_on_drift_too() {
    let app = TestApp::spawn().await;
    app.check_against(|document| {
        document["components"]["schemas"]["Health"]["properties"]["status"]["const"] =
            json!("fine");
    });
    let response = app
        .client
        .request(ClientMethod::GET, format!("{}/healthz", app.base))
        .send()
        .await
        .expect("request sent");
    assert_eq!(response.status(), 200);
    let failure = AssertUnwindSafe(app.stop())
        .catch_unwind()
        .await
        .expect_err("stopping the app fails the test");
    let message = failure
        .downcast_ref::<String>()
        .expect("a formatted panic message");
    assert!(message.contains("GET /healthz → 200"), "{message}");
}

#[airq_test::test]
async fn recorded_violations_can_be_taken_and_then_no_longer_fail() {
    let app = TestApp::spawn().await;
    app.check_against(|document| {
        document["components"]["schemas"]["Readiness"]["properties"]["status"]["const"] =
            json!("steady");
    });
    let response = app
        .client
        .get(format!("{}/readyz", app.base))
        .send()
        .await
        .expect("request sent");
    assert_eq!(response.status(), 200);
    let violations = app.take_contract_violations();
    assert_eq!(violations.len(), 1, "{violations:#?}");
    assert_caught(&violations, "GET /readyz → 200");
}

#[airq_test::test]
async fn every_example_of_the_document_matches_its_schema() {
    let contract = served().await;
    let document = contract.document().clone();
    let mut faults = Vec::new();
    let mut checked = 0;
    examples(&document, "", &mut |pointer, schema_pointer, example| {
        checked += 1;
        for error in contract.schema_errors(schema_pointer, example) {
            faults.push(format!("{pointer}: {error}"));
        }
    });
    assert!(checked > 20, "only {checked} examples found");
    assert!(faults.is_empty(), "{faults:#?}");
}

/// Calls `found(example pointer, schema pointer, example)` for every example of a media type
/// (`example`, `examples.*.value`) of the document.
fn examples(node: &Value, at: &str, found: &mut dyn FnMut(&str, &str, &Value)) {
    let Some(map) = node.as_object() else {
        if let Some(items) = node.as_array() {
            for (index, item) in items.iter().enumerate() {
                examples(item, &format!("{at}/{index}"), found);
            }
        }
        return;
    };
    let is_media_type = map.contains_key("schema") && at.contains("/content/");
    if is_media_type {
        let schema = format!("{at}/schema");
        if let Some(example) = map.get("example") {
            found(&format!("{at}/example"), &schema, example);
        }
        if let Some(named) = map.get("examples").and_then(Value::as_object) {
            for (name, example) in named {
                if let Some(value) = example.get("value") {
                    found(&format!("{at}/examples/{name}"), &schema, value);
                }
            }
        }
        return;
    }
    for (key, value) in map {
        let escaped = key.replace('~', "~0").replace('/', "~1");
        examples(value, &format!("{at}/{escaped}"), found);
    }
}

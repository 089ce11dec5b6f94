//! POST /data: device credentials, body checks, validation, the receipt, and the batch writer's
//! promises seen from outside (no 201 before the commit, all or nothing, drain on shutdown).

use std::collections::HashSet;

use airq::clock::Clock;
use chrono::{DateTime, TimeDelta, Utc};
use futures_util::future::join_all;
use reqwest::Method;
use serde_json::{json, Value};

use crate::common::{fe, field_errors, located, measured, problem, sample, sample_with, TestApp};

/// The challenge of a refused upload.
const CHALLENGE: &str = "DeviceKey realm=\"airq\"";
/// 2^53 − 1: the largest integer JavaScript represents exactly.
const MAX_SAFE_INTEGER: u64 = (1 << 53) - 1;
/// The body limit.
const MAX_BODY: usize = 65_536;

type FieldError = (String, String, String);

// ---------------------------------------------------------------------------------------------
// Helpers

pub(crate) async fn app_with_device() -> (TestApp, Value) {
    let app = TestApp::spawn().await;
    let device = app.register_named("alice", "balcony").await;
    (app, device)
}

pub(crate) fn device_id(device: &Value) -> &str {
    device["device_id"].as_str().expect("device_id")
}

pub(crate) fn device_key(device: &Value) -> &str {
    device["device_key"].as_str().expect("device_key")
}

fn device_uuid(device: &Value) -> &str {
    device["id"].as_str().expect("id")
}

/// `POST /data` with exactly the given credential headers, content type and raw body.
async fn post_data(
    app: &TestApp,
    id: Option<&str>,
    key: Option<&str>,
    content_type: Option<&str>,
    body: impl Into<reqwest::Body>,
) -> reqwest::Response {
    let mut request = app.client.post(app.url("/data")).body(body);
    if let Some(id) = id {
        request = request.header("x-device-id", id);
    }
    if let Some(key) = key {
        request = request.header("x-device-key", key);
    }
    if let Some(content_type) = content_type {
        request = request.header("content-type", content_type);
    }
    request.send().await.expect("request sent")
}

/// `POST /data` as `device` with a raw body under `content_type`.
async fn post_as(
    app: &TestApp,
    device: &Value,
    content_type: Option<&str>,
    body: impl Into<reqwest::Body>,
) -> reqwest::Response {
    post_data(
        app,
        Some(device_id(device)),
        Some(device_key(device)),
        content_type,
        body,
    )
    .await
}

/// An upload through a cloned client, for spawned tasks.
pub(crate) async fn upload_with(
    client: &reqwest::Client,
    url: &str,
    device: &Value,
    body: &Value,
) -> reqwest::Response {
    client
        .post(url)
        .header("x-device-id", device_id(device))
        .header("x-device-key", device_key(device))
        .json(body)
        .send()
        .await
        .expect("request sent")
}

/// Checks a 401 of the upload route: challenge, problem shape.
async fn refused(response: reqwest::Response) -> Value {
    assert_eq!(response.status(), 401, "refused");
    assert_eq!(
        response
            .headers()
            .get("www-authenticate")
            .expect("a challenge"),
        CHALLENGE
    );
    let body = problem(response, 401).await;
    assert_eq!(body["type"], "about:blank");
    assert_eq!(body["instance"], "/api/v1/data");
    body
}

/// Checks a 201 receipt and returns its id and `created_at`.
pub(crate) async fn receipt(response: reqwest::Response) -> (u64, DateTime<Utc>) {
    let status = response.status();
    let content_type = response.headers().get("content-type").cloned();
    let body: Value = response.json().await.expect("json body");
    assert_eq!(status, 201, "upload accepted: {body}");
    assert_eq!(
        content_type.expect("content type"),
        "application/json",
        "receipt media type"
    );
    let data = body["data"].as_object().expect("data object");
    let mut keys: Vec<&str> = data.keys().map(String::as_str).collect();
    keys.sort_unstable();
    assert_eq!(keys, ["created_at", "id"], "receipt fields: {body}");
    let id = data["id"].as_u64().expect("integer id");
    assert!((1..=MAX_SAFE_INTEGER).contains(&id), "id in range: {id}");
    let created_at = data["created_at"].as_str().expect("created_at string");
    let created_at = DateTime::parse_from_rfc3339(created_at)
        .unwrap_or_else(|_| panic!("created_at is RFC 3339: {created_at}"))
        .with_timezone(&Utc);
    (id, created_at)
}

pub(crate) async fn accepted(app: &TestApp, device: &Value, body: &Value) -> (u64, DateTime<Utc>) {
    let response = app.upload(device, body).await;
    let status = response.status();
    if status != 201 {
        let text = response.text().await.unwrap_or_default();
        panic!("{body} should be accepted, got {status}: {text}");
    }
    receipt(response).await
}

/// The field errors of a 422 answer to uploading `body`.
async fn rejected(app: &TestApp, device: &Value, body: &Value) -> Vec<FieldError> {
    let response = app.upload(device, body).await;
    let status = response.status();
    assert_eq!(status, 422, "{body} should be rejected");
    let problem_body = problem(response, 422).await;
    assert_eq!(problem_body["type"], "urn:airq:problem:validation");
    assert_eq!(problem_body["instance"], "/api/v1/data");
    field_errors(&problem_body)
}

fn sorted(mut errors: Vec<FieldError>) -> Vec<FieldError> {
    errors.sort();
    errors
}

/// The value at a dotted path (which must exist up to its parent).
fn parent_of<'a>(body: &'a mut Value, path: &'a str) -> (&'a mut Value, &'a str) {
    let mut parts: Vec<&str> = path.split('.').collect();
    let last = parts.pop().expect("a path");
    let mut target = body;
    for part in parts {
        target = &mut target[part];
    }
    (target, last)
}

/// `body` without the field at `path`.
fn without(mut body: Value, path: &str) -> Value {
    let (parent, key) = parent_of(&mut body, path);
    parent
        .as_object_mut()
        .expect("an object")
        .remove(key)
        .unwrap_or_else(|| panic!("{path} was present"));
    body
}

/// `body` with the field at `path` set to `value`.
fn with(mut body: Value, path: &str, value: Value) -> Value {
    let (parent, key) = parent_of(&mut body, path);
    parent[key] = value;
    body
}

pub(crate) async fn sample_count(app: &TestApp, device: &Value) -> u64 {
    let current = app
        .data_as(
            "alice",
            &format!("/devices/{}/current", device_uuid(device)),
        )
        .await;
    current["sample_count"].as_u64().expect("sample_count")
}

async fn rotate(app: &TestApp, device: &Value) -> Value {
    let response = app
        .owner_request(
            Method::POST,
            &format!("/devices/{}/rotate-key", device_uuid(device)),
            "alice",
        )
        .send()
        .await
        .expect("request sent");
    assert_eq!(response.status(), 200, "rotation");
    let rotated = response.json::<Value>().await.expect("json")["data"].clone();
    assert_ne!(rotated["device_key"], device["device_key"], "a new key");
    assert_eq!(rotated["device_id"], device["device_id"]);
    rotated
}

pub(crate) async fn delete(app: &TestApp, device: &Value) {
    let response = app
        .owner_request(
            Method::DELETE,
            &format!("/devices/{}", device_uuid(device)),
            "alice",
        )
        .send()
        .await
        .expect("request sent");
    assert_eq!(response.status(), 204, "deletion");
}

// ---------------------------------------------------------------------------------------------
// 1. Success

#[airq_test::test]
async fn an_upload_is_201_with_a_receipt() {
    let (app, device) = app_with_device().await;
    let (first, _) = accepted(&app, &device, &sample()).await;
    let (second, _) = accepted(&app, &device, &sample()).await;
    assert_ne!(first, second, "every reading has its own id");
}

#[airq_test::test]
async fn without_measured_at_created_at_is_the_server_clock() {
    let (app, device) = app_with_device().await;
    let now: DateTime<Utc> = "2026-03-01T12:34:56.789123Z".parse().expect("instant");
    app.clock.set(now);
    let (_, created_at) = accepted(&app, &device, &sample()).await;
    assert_eq!(created_at.timestamp_millis(), now.timestamp_millis());
    app.clock.advance(TimeDelta::minutes(7));
    let (_, later) = accepted(&app, &device, &sample()).await;
    assert_eq!(
        later.timestamp_millis(),
        (now + TimeDelta::minutes(7)).timestamp_millis()
    );
}

#[airq_test::test]
async fn with_measured_at_created_at_is_measured_at() {
    let (app, device) = app_with_device().await;
    let now = app.clock.now();
    let at = DateTime::from_timestamp_millis(now.timestamp_millis()).expect("ms")
        - TimeDelta::minutes(10);
    let (_, created_at) = accepted(&app, &device, &measured(sample(), at)).await;
    assert_eq!(created_at, at);
    // The same instant written with an offset is the same instant.
    let offset = at
        .with_timezone(&chrono::FixedOffset::east_opt(2 * 3600).expect("offset"))
        .to_rfc3339();
    let mut body = sample();
    body["measured_at"] = json!(offset);
    let (_, created_at) = accepted(&app, &device, &body).await;
    assert_eq!(created_at, at, "{offset}");
}

#[airq_test::test]
async fn unknown_fields_are_ignored() {
    let (app, device) = app_with_device().await;
    let mut body = sample();
    body["firmware"] = json!("1.2.3");
    body["pms_data"]["pm4_0"] = json!(7.5);
    body["temperature_data"]["pressure"] = json!({ "hpa": 1013 });
    accepted(&app, &device, &body).await;
}

// ---------------------------------------------------------------------------------------------
// 2. Credentials

#[airq_test::test]
async fn a_missing_device_id_is_401() {
    let (app, device) = app_with_device().await;
    let body = sample().to_string();
    let response = post_data(
        &app,
        None,
        Some(device_key(&device)),
        Some("application/json"),
        body,
    )
    .await;
    refused(response).await;
}

#[airq_test::test]
async fn a_missing_device_key_is_401() {
    let (app, device) = app_with_device().await;
    let body = sample().to_string();
    let response = post_data(
        &app,
        Some(device_id(&device)),
        None,
        Some("application/json"),
        body,
    )
    .await;
    refused(response).await;
    let response = post_data(
        &app,
        None,
        None,
        Some("application/json"),
        sample().to_string(),
    )
    .await;
    refused(response).await;
}

#[airq_test::test]
async fn an_unknown_device_id_is_401() {
    let (app, device) = app_with_device().await;
    let unknown = "dev_0123456789abcdefghijKLMN";
    assert_eq!(unknown.len(), 28);
    let response = post_data(
        &app,
        Some(unknown),
        Some(device_key(&device)),
        Some("application/json"),
        sample().to_string(),
    )
    .await;
    refused(response).await;
}

#[airq_test::test]
async fn a_malformed_device_id_is_401() {
    let (app, device) = app_with_device().await;
    let real = device_id(&device);
    for id in [
        "nope".to_owned(),
        String::new(),
        "dev_short".to_owned(),
        format!("{real}x"),
        real.replacen("dev_", "DEV_", 1),
        format!("{}-", &real[..real.len() - 1]),
    ] {
        let response = post_data(
            &app,
            Some(&id),
            Some(device_key(&device)),
            Some("application/json"),
            sample().to_string(),
        )
        .await;
        refused(response).await;
    }
}

#[airq_test::test]
async fn a_wrong_key_is_401() {
    let (app, device) = app_with_device().await;
    let key = device_key(&device);
    let mut altered = key.to_owned();
    let last = altered.pop().expect("a character");
    altered.push(if last == 'A' { 'B' } else { 'A' });
    let wrong_keys = [
        altered,
        format!("sk_{}", "A".repeat(43)),
        String::new(),
        key[..key.len() - 1].to_owned(),
        format!("{key}A"),
    ];
    for wrong in &wrong_keys {
        let response = post_data(
            &app,
            Some(device_id(&device)),
            Some(wrong),
            Some("application/json"),
            sample().to_string(),
        )
        .await;
        refused(response).await;
    }
    // The right key still works afterwards (and a refused key never poisons the cache).
    accepted(&app, &device, &sample()).await;
}

#[airq_test::test]
async fn another_devices_key_is_401() {
    let (app, mine) = app_with_device().await;
    let other = app.register_named("alice", "kitchen").await;
    let strangers = app.register_named("bob", "garage").await;
    for key_owner in [&other, &strangers] {
        let response = post_data(
            &app,
            Some(device_id(&mine)),
            Some(device_key(key_owner)),
            Some("application/json"),
            sample().to_string(),
        )
        .await;
        refused(response).await;
    }
}

#[airq_test::test]
async fn credentials_are_checked_before_the_body() {
    let (app, device) = app_with_device().await;
    let wrong = format!("sk_{}", "A".repeat(43));
    // A wrong key with a body of the wrong type: 401, not 415.
    let response = post_data(
        &app,
        Some(device_id(&device)),
        Some(&wrong),
        Some("text/plain"),
        "hello",
    )
    .await;
    refused(response).await;
    // No credentials and an oversized body: 401, not 413.
    let response = post_data(
        &app,
        None,
        None,
        Some("application/json"),
        "x".repeat(MAX_BODY + 100),
    )
    .await;
    refused(response).await;
    // A wrong key with malformed JSON: 401, not 400.
    let response = post_data(
        &app,
        Some(device_id(&device)),
        Some(&wrong),
        Some("application/json"),
        "{",
    )
    .await;
    refused(response).await;
    // A wrong key with an invalid reading: 401, not 422.
    let response = post_data(
        &app,
        Some(device_id(&device)),
        Some(&wrong),
        Some("application/json"),
        "{}",
    )
    .await;
    refused(response).await;
}

// ---------------------------------------------------------------------------------------------
// 3. Rotation and deletion

#[airq_test::test]
async fn after_rotation_the_old_key_is_refused_and_the_new_one_works() {
    let (app, device) = app_with_device().await;
    let rotated = rotate(&app, &device).await;
    refused(app.upload(&device, &sample()).await).await;
    accepted(&app, &rotated, &sample()).await;
}

#[airq_test::test]
async fn after_rotation_a_just_used_old_key_is_refused_at_once() {
    let (app, device) = app_with_device().await;
    // Used (and so cached) right before the rotation.
    accepted(&app, &device, &sample()).await;
    accepted(&app, &device, &sample()).await;
    let rotated = rotate(&app, &device).await;
    refused(app.upload(&device, &sample()).await).await;
    accepted(&app, &rotated, &sample()).await;
    // The new key's use does not bring the old one back.
    refused(app.upload(&device, &sample()).await).await;
    // A second rotation retires the second key as well.
    let again = rotate(&app, &rotated).await;
    refused(app.upload(&rotated, &sample()).await).await;
    accepted(&app, &again, &sample()).await;
}

#[airq_test::test]
async fn after_deletion_the_key_is_refused() {
    let (app, device) = app_with_device().await;
    delete(&app, &device).await;
    refused(app.upload(&device, &sample()).await).await;
}

#[airq_test::test]
async fn after_deletion_a_just_used_key_is_refused_at_once() {
    let (app, device) = app_with_device().await;
    // Used (and so cached) right before the deletion.
    accepted(&app, &device, &sample()).await;
    delete(&app, &device).await;
    refused(app.upload(&device, &sample()).await).await;
}

// ---------------------------------------------------------------------------------------------
// 4. Body

#[airq_test::test]
async fn a_missing_or_other_content_type_is_415() {
    let (app, device) = app_with_device().await;
    let body = sample().to_string();
    for content_type in [
        None,
        Some("text/plain"),
        Some("application/x-www-form-urlencoded"),
        Some("application/jsonx"),
    ] {
        let response = post_as(&app, &device, content_type, body.clone()).await;
        let problem_body = problem(response, 415).await;
        assert_eq!(problem_body["type"], "about:blank", "{content_type:?}");
    }
    // A charset parameter and another casing are still JSON.
    for content_type in ["application/json; charset=utf-8", "Application/JSON"] {
        let response = post_as(&app, &device, Some(content_type), body.clone()).await;
        receipt(response).await;
    }
}

/// A valid reading padded with an unknown field to exactly `total` bytes.
fn padded(total: usize) -> String {
    let compact = sample().to_string();
    let prefix = format!("{},\"pad\":\"", &compact[..compact.len() - 1]);
    let suffix = "\"}";
    let body = format!(
        "{prefix}{}{suffix}",
        "x".repeat(total - prefix.len() - suffix.len())
    );
    assert_eq!(body.len(), total);
    body
}

#[airq_test::test]
async fn a_body_of_64_kib_is_read_and_one_byte_more_is_413() {
    let (app, device) = app_with_device().await;
    let response = post_as(&app, &device, Some("application/json"), padded(MAX_BODY)).await;
    receipt(response).await;
    let response = post_as(
        &app,
        &device,
        Some("application/json"),
        padded(MAX_BODY + 1),
    )
    .await;
    let body = problem(response, 413).await;
    assert_eq!(body["type"], "about:blank");
}

#[airq_test::test]
async fn an_oversized_streamed_body_is_413() {
    let (app, device) = app_with_device().await;
    let chunks: Vec<Result<bytes::Bytes, std::io::Error>> = (0..40)
        .map(|_| Ok(bytes::Bytes::from(vec![b' '; 4096])))
        .collect();
    let stream = futures_util::stream::iter(chunks);
    let response = post_as(
        &app,
        &device,
        Some("application/json"),
        reqwest::Body::wrap_stream(stream),
    )
    .await;
    problem(response, 413).await;
}

#[airq_test::test]
async fn malformed_json_is_400_malformed_body() {
    let (app, device) = app_with_device().await;
    let valid = sample().to_string();
    for body in [
        r#"{"aqi": 42"#.to_owned(),
        "{aqi: 42}".to_owned(),
        "nope".to_owned(),
        format!("{valid} trailing"),
        valid[..valid.len() - 1].to_owned(),
    ] {
        let response = post_as(&app, &device, Some("application/json"), body.clone()).await;
        let problem_body = problem(response, 400).await;
        assert_eq!(
            problem_body["type"], "urn:airq:problem:malformed-body",
            "{body}"
        );
    }
}

#[airq_test::test]
async fn an_empty_body_is_400() {
    let (app, device) = app_with_device().await;
    for body in ["", "  \n"] {
        let response = post_as(&app, &device, Some("application/json"), body).await;
        let problem_body = problem(response, 400).await;
        assert_eq!(problem_body["type"], "urn:airq:problem:malformed-body");
    }
}

// ---------------------------------------------------------------------------------------------
// 5. Validation

const REQUIRED: [&str; 11] = [
    "aqi",
    "pms_data",
    "pms_data.pm1_0",
    "pms_data.pm2_5",
    "pms_data.pm10_0",
    "pms_data.provider",
    "temperature_data",
    "temperature_data.temperature",
    "temperature_data.heat_index",
    "temperature_data.humidity",
    "temperature_data.provider",
];

#[airq_test::test]
async fn each_missing_required_field_is_422_required() {
    let (app, device) = app_with_device().await;
    for path in REQUIRED {
        let errors = rejected(&app, &device, &without(sample(), path)).await;
        assert_eq!(errors, [fe(path, "required", "body")], "without {path}");
    }
}

#[airq_test::test]
async fn a_null_required_field_is_422_required() {
    let (app, device) = app_with_device().await;
    for path in REQUIRED {
        let errors = rejected(&app, &device, &with(sample(), path, Value::Null)).await;
        assert_eq!(errors, [fe(path, "required", "body")], "{path}: null");
    }
}

#[airq_test::test]
async fn an_empty_object_lists_every_missing_top_level_field() {
    let (app, device) = app_with_device().await;
    let errors = rejected(&app, &device, &json!({})).await;
    assert_eq!(
        errors,
        [
            fe("aqi", "required", "body"),
            fe("pms_data", "required", "body"),
            fe("temperature_data", "required", "body"),
        ]
    );
    // Empty nested objects list every field they lack.
    let errors = rejected(
        &app,
        &device,
        &json!({ "aqi": 1, "pms_data": {}, "temperature_data": {} }),
    )
    .await;
    assert_eq!(
        errors,
        sorted(vec![
            fe("pms_data.pm1_0", "required", "body"),
            fe("pms_data.pm2_5", "required", "body"),
            fe("pms_data.pm10_0", "required", "body"),
            fe("pms_data.provider", "required", "body"),
            fe("temperature_data.temperature", "required", "body"),
            fe("temperature_data.heat_index", "required", "body"),
            fe("temperature_data.humidity", "required", "body"),
            fe("temperature_data.provider", "required", "body"),
        ])
    );
}

#[airq_test::test]
async fn a_value_of_the_wrong_type_is_422_type() {
    let (app, device) = app_with_device().await;
    let cases = [
        ("aqi", json!("42")),
        ("aqi", json!(4.5)),
        ("aqi", json!(true)),
        ("pms_data", json!([])),
        ("pms_data", json!("PMS5003")),
        ("pms_data.pm2_5", json!("x")),
        ("pms_data.pm1_0", json!([1.0])),
        ("pms_data.provider", json!(5003)),
        ("temperature_data", json!(21.5)),
        ("temperature_data.humidity", json!({ "value": 40 })),
        ("location", json!("here")),
        ("location", json!([1.0, 2.0])),
        ("measured_at", json!(1_700_000_000)),
    ];
    for (path, value) in cases {
        let body = with(sample(), path, value.clone());
        let errors = rejected(&app, &device, &body).await;
        assert_eq!(errors, [fe(path, "type", "body")], "{path}: {value}");
    }
}

#[airq_test::test]
async fn every_problem_is_listed_at_once() {
    let (app, device) = app_with_device().await;
    let mut body = sample();
    body["aqi"] = json!("42");
    body["pms_data"]["pm2_5"] = json!("x");
    body["pms_data"]["pm10_0"] = json!(-1);
    body["temperature_data"]["humidity"] = json!(101);
    body["temperature_data"]["provider"] = json!("");
    body["location"] = json!({ "lat": 91, "lon": "west" });
    body["measured_at"] = json!("yesterday");
    let errors = rejected(&app, &device, &body).await;
    assert_eq!(
        errors,
        sorted(vec![
            fe("aqi", "type", "body"),
            fe("pms_data.pm2_5", "type", "body"),
            fe("pms_data.pm10_0", "minimum", "body"),
            fe("temperature_data.humidity", "maximum", "body"),
            fe("temperature_data.provider", "min_length", "body"),
            fe("location.lat", "maximum", "body"),
            fe("location.lon", "type", "body"),
            fe("location.provider", "required", "body"),
            fe("measured_at", "format", "body"),
        ])
    );
}

#[airq_test::test]
async fn humidity_lies_between_0_and_100_inclusive() {
    let (app, device) = app_with_device().await;
    let path = "temperature_data.humidity";
    for ok in [
        json!(0),
        json!(0.0),
        json!(100),
        json!(100.0),
        json!(99.9999),
    ] {
        accepted(&app, &device, &with(sample(), path, ok)).await;
    }
    let errors = rejected(&app, &device, &with(sample(), path, json!(100.0001))).await;
    assert_eq!(errors, [fe(path, "maximum", "body")]);
    let errors = rejected(&app, &device, &with(sample(), path, json!(-0.1))).await;
    assert_eq!(errors, [fe(path, "minimum", "body")]);
}

#[airq_test::test]
async fn latitude_lies_between_minus_90_and_90_inclusive() {
    let (app, device) = app_with_device().await;
    for lat in [90.0, -90.0, 0.0] {
        accepted(&app, &device, &located(sample(), lat, 10.0)).await;
    }
    let errors = rejected(&app, &device, &located(sample(), 90.0001, 10.0)).await;
    assert_eq!(errors, [fe("location.lat", "maximum", "body")]);
    let errors = rejected(&app, &device, &located(sample(), -90.0001, 10.0)).await;
    assert_eq!(errors, [fe("location.lat", "minimum", "body")]);
}

#[airq_test::test]
async fn longitude_lies_between_minus_180_and_180_inclusive() {
    let (app, device) = app_with_device().await;
    for lon in [180.0, -180.0, 0.0] {
        accepted(&app, &device, &located(sample(), 10.0, lon)).await;
    }
    let errors = rejected(&app, &device, &located(sample(), 10.0, 180.0001)).await;
    assert_eq!(errors, [fe("location.lon", "maximum", "body")]);
    let errors = rejected(&app, &device, &located(sample(), 10.0, -180.0001)).await;
    assert_eq!(errors, [fe("location.lon", "minimum", "body")]);
}

#[airq_test::test]
async fn particulate_values_are_not_negative() {
    let (app, device) = app_with_device().await;
    for path in ["pms_data.pm1_0", "pms_data.pm2_5", "pms_data.pm10_0"] {
        accepted(&app, &device, &with(sample(), path, json!(0))).await;
        accepted(&app, &device, &with(sample(), path, json!(0.0))).await;
        let errors = rejected(&app, &device, &with(sample(), path, json!(-0.1))).await;
        assert_eq!(errors, [fe(path, "minimum", "body")], "{path}");
    }
}

#[airq_test::test]
async fn aqi_is_not_negative() {
    let (app, device) = app_with_device().await;
    accepted(&app, &device, &with(sample(), "aqi", json!(0))).await;
    let errors = rejected(&app, &device, &with(sample(), "aqi", json!(-1))).await;
    assert_eq!(errors, [fe("aqi", "minimum", "body")]);
}

/// The detail of the one field error of a 422 answer to uploading `body`.
async fn rejection_detail(app: &TestApp, device: &Value, body: &Value) -> String {
    let response = app.upload(device, body).await;
    let problem_body = problem(response, 422).await;
    let errors = problem_body["errors"].as_array().expect("errors array");
    assert_eq!(errors.len(), 1, "one field error: {problem_body}");
    errors[0]["detail"].as_str().expect("detail").to_owned()
}

#[airq_test::test]
async fn aqi_is_at_most_10000() {
    let (app, device) = app_with_device().await;
    accepted(&app, &device, &with(sample(), "aqi", json!(10_000))).await;
    accepted(&app, &device, &with(sample(), "aqi", json!(9_999))).await;
    let too_high = with(sample(), "aqi", json!(10_001));
    assert_eq!(
        rejected(&app, &device, &too_high).await,
        [fe("aqi", "maximum", "body")]
    );
    let detail = rejection_detail(&app, &device, &too_high).await;
    assert!(
        detail.contains("10000"),
        "the detail names the bound: {detail}"
    );
    assert_eq!(
        rejected(&app, &device, &with(sample(), "aqi", json!(i64::MAX))).await,
        [fe("aqi", "maximum", "body")]
    );
}

#[airq_test::test]
async fn particulate_values_are_at_most_100000() {
    let (app, device) = app_with_device().await;
    for path in ["pms_data.pm1_0", "pms_data.pm2_5", "pms_data.pm10_0"] {
        accepted(&app, &device, &with(sample(), path, json!(100_000))).await;
        accepted(&app, &device, &with(sample(), path, json!(100_000.0))).await;
        accepted(&app, &device, &with(sample(), path, json!(99_999.5))).await;
        let errors = rejected(&app, &device, &with(sample(), path, json!(100_000.5))).await;
        assert_eq!(errors, [fe(path, "maximum", "body")], "{path}");
        let errors = rejected(&app, &device, &with(sample(), path, json!(1e300))).await;
        assert_eq!(errors, [fe(path, "maximum", "body")], "{path}: 1e300");
    }
}

#[airq_test::test]
async fn temperature_and_heat_index_lie_between_minus_1000_and_1000_inclusive() {
    let (app, device) = app_with_device().await;
    for path in [
        "temperature_data.temperature",
        "temperature_data.heat_index",
    ] {
        for ok in [
            json!(1_000),
            json!(1_000.0),
            json!(-1_000),
            json!(-1_000.0),
            json!(999.5),
            json!(-999.5),
        ] {
            accepted(&app, &device, &with(sample(), path, ok)).await;
        }
        let errors = rejected(&app, &device, &with(sample(), path, json!(1_000.5))).await;
        assert_eq!(errors, [fe(path, "maximum", "body")], "{path}: 1000.5");
        let errors = rejected(&app, &device, &with(sample(), path, json!(-1_000.5))).await;
        assert_eq!(errors, [fe(path, "minimum", "body")], "{path}: -1000.5");
    }
}

#[airq_test::test]
async fn every_value_past_its_bound_is_listed_at_once() {
    let (app, device) = app_with_device().await;
    let mut body = sample();
    body["aqi"] = json!(10_001);
    body["pms_data"]["pm1_0"] = json!(100_000.5);
    body["pms_data"]["pm2_5"] = json!(-0.5);
    body["pms_data"]["pm10_0"] = json!(1_000_000);
    body["temperature_data"]["temperature"] = json!(1_000.5);
    body["temperature_data"]["heat_index"] = json!(-1_000.5);
    let errors = rejected(&app, &device, &body).await;
    assert_eq!(
        errors,
        sorted(vec![
            fe("aqi", "maximum", "body"),
            fe("pms_data.pm1_0", "maximum", "body"),
            fe("pms_data.pm2_5", "minimum", "body"),
            fe("pms_data.pm10_0", "maximum", "body"),
            fe("temperature_data.temperature", "maximum", "body"),
            fe("temperature_data.heat_index", "minimum", "body"),
        ])
    );
}

#[airq_test::test]
async fn an_aqi_written_without_a_fraction_is_stored_as_that_integer() {
    let (app, device) = app_with_device().await;
    // Written out by hand: `42.0` must reach the server as a JSON number with a fraction part.
    let text = sample()
        .to_string()
        .replacen("\"aqi\":42", "\"aqi\":42.0", 1);
    assert!(text.contains("\"aqi\":42.0"), "{text}");
    receipt(post_as(&app, &device, Some("application/json"), text).await).await;
    let current = app
        .data_as(
            "alice",
            &format!("/devices/{}/current", device_uuid(&device)),
        )
        .await;
    assert_eq!(current["sample_count"], 1, "{current}");
    assert_eq!(current["aqi"], json!(42), "{current}");
    assert!(current["aqi"].is_i64(), "an integer: {current}");
    // Other spellings of an integral number are integers too; a fraction is not.
    accepted(&app, &device, &with(sample(), "aqi", json!(0.0))).await;
    accepted(&app, &device, &with(sample(), "aqi", json!(10_000.0))).await;
    assert_eq!(
        rejected(&app, &device, &with(sample(), "aqi", json!(10_001.0))).await,
        [fe("aqi", "maximum", "body")]
    );
    assert_eq!(
        rejected(&app, &device, &with(sample(), "aqi", json!(-1.0))).await,
        [fe("aqi", "minimum", "body")]
    );
}

#[airq_test::test]
async fn an_aqi_with_a_fraction_is_422_type() {
    let (app, device) = app_with_device().await;
    for aqi in [json!(42.5), json!(0.5), json!(9_999.9)] {
        assert_eq!(
            rejected(&app, &device, &with(sample(), "aqi", aqi.clone())).await,
            [fe("aqi", "type", "body")],
            "aqi: {aqi}"
        );
    }
}

#[airq_test::test]
async fn providers_have_1_to_50_characters() {
    let (app, device) = app_with_device().await;
    let base = located(sample(), 1.0, 2.0);
    for path in [
        "pms_data.provider",
        "temperature_data.provider",
        "location.provider",
    ] {
        // Characters, not bytes: 50 two-byte characters are 100 bytes and still fit.
        accepted(
            &app,
            &device,
            &with(base.clone(), path, json!("ü".repeat(50))),
        )
        .await;
        accepted(&app, &device, &with(base.clone(), path, json!("x"))).await;
        let errors = rejected(
            &app,
            &device,
            &with(base.clone(), path, json!("ü".repeat(51))),
        )
        .await;
        assert_eq!(errors, [fe(path, "max_length", "body")], "{path}");
        let errors = rejected(&app, &device, &with(base.clone(), path, json!(""))).await;
        assert_eq!(errors, [fe(path, "min_length", "body")], "{path}");
    }
}

#[airq_test::test]
async fn a_location_needs_lat_lon_and_provider() {
    let (app, device) = app_with_device().await;
    let mut body = sample();
    body["location"] = json!({});
    let errors = rejected(&app, &device, &body).await;
    assert_eq!(
        errors,
        [
            fe("location.lat", "required", "body"),
            fe("location.lon", "required", "body"),
            fe("location.provider", "required", "body"),
        ]
    );
    for path in ["location.lat", "location.lon", "location.provider"] {
        let errors = rejected(&app, &device, &without(located(sample(), 1.0, 2.0), path)).await;
        assert_eq!(errors, [fe(path, "required", "body")], "without {path}");
    }
}

#[airq_test::test]
async fn a_null_location_counts_as_absent() {
    let (app, device) = app_with_device().await;
    let mut body = sample();
    body["location"] = Value::Null;
    accepted(&app, &device, &body).await;
}

#[airq_test::test]
async fn measured_at_must_be_rfc3339() {
    let (app, device) = app_with_device().await;
    for text in [
        "yesterday",
        "2026-11-21",
        "2026-11-21T14:05:00",
        "21/11/2026 14:05",
        "2026-11-21T25:05:00Z",
        "",
    ] {
        let mut body = sample();
        body["measured_at"] = json!(text);
        let errors = rejected(&app, &device, &body).await;
        assert_eq!(errors, [fe("measured_at", "format", "body")], "{text:?}");
    }
}

#[airq_test::test]
async fn measured_at_with_second_60_is_a_format_problem() {
    let (app, device) = app_with_device().await;
    let minute = app.clock.now() - TimeDelta::minutes(10);
    let mut body = sample();
    body["measured_at"] = json!(minute.format("%Y-%m-%dT%H:%M:60Z").to_string());
    let errors = rejected(&app, &device, &body).await;
    assert_eq!(errors, [fe("measured_at", "format", "body")]);
    assert!(app.stored_ids().await.is_empty());
}

#[airq_test::test]
async fn a_negative_zero_reads_back_as_zero_at_once() {
    let (app, device) = app_with_device().await;
    let now = app.clock.now();
    let mut body = located(sample(), -0.0, -0.0);
    body["pms_data"]["pm1_0"] = json!(-0.0);
    body["temperature_data"]["temperature"] = json!(-0.0);
    accepted(&app, &device, &measured(body, now - TimeDelta::minutes(1))).await;

    let id = device["id"].as_str().expect("id");
    let start = (now - TimeDelta::hours(1)).format("%Y-%m-%dT%H:%M:%SZ");
    let end = (now + TimeDelta::hours(1)).format("%Y-%m-%dT%H:%M:%SZ");
    let export = app
        .owner_request(
            Method::GET,
            &format!("/devices/{id}/readings?start={start}&end={end}&format=csv"),
            "alice",
        )
        .send()
        .await
        .expect("export")
        .text()
        .await
        .expect("text");
    let row = export.lines().nth(1).expect("one reading");
    let values: Vec<&str> = row.split(',').skip(1).collect();
    assert_eq!(values.len(), 9, "{row}");
    assert!(values.iter().all(|value| !value.starts_with('-')), "{row}");
    let current = app
        .data_as("alice", &format!("/devices/{id}/current"))
        .await;
    for value in [
        &current["pm1_0"],
        &current["temperature"],
        &current["location"]["lat"],
        &current["location"]["lon"],
    ] {
        let value = value.as_f64().expect("a number");
        assert!(value == 0.0 && value.is_sign_positive(), "{current}");
    }
}

#[airq_test::test]
async fn measured_at_may_be_up_to_366_days_old() {
    let (app, device) = app_with_device().await;
    let now = app.clock.now();
    let inside = now - TimeDelta::days(366) + TimeDelta::minutes(1);
    let (_, created_at) = accepted(&app, &device, &measured(sample(), inside)).await;
    assert_eq!(created_at.timestamp_millis(), inside.timestamp_millis());
    accepted(
        &app,
        &device,
        &measured(sample(), now - TimeDelta::days(366)),
    )
    .await;
    let errors = rejected(
        &app,
        &device,
        &measured(sample(), now - TimeDelta::days(367)),
    )
    .await;
    assert_eq!(errors, [fe("measured_at", "minimum", "body")]);
    let errors = rejected(
        &app,
        &device,
        &measured(
            sample(),
            now - TimeDelta::days(366) - TimeDelta::milliseconds(1),
        ),
    )
    .await;
    assert_eq!(errors, [fe("measured_at", "minimum", "body")]);
}

#[airq_test::test]
async fn measured_at_may_be_up_to_5_minutes_ahead() {
    let (app, device) = app_with_device().await;
    let now = app.clock.now();
    let ahead = now + TimeDelta::minutes(4);
    let (_, created_at) = accepted(&app, &device, &measured(sample(), ahead)).await;
    assert_eq!(created_at.timestamp_millis(), ahead.timestamp_millis());
    accepted(
        &app,
        &device,
        &measured(sample(), now + TimeDelta::minutes(5)),
    )
    .await;
    let errors = rejected(
        &app,
        &device,
        &measured(sample(), now + TimeDelta::minutes(6)),
    )
    .await;
    assert_eq!(errors, [fe("measured_at", "maximum", "body")]);
}

#[airq_test::test]
async fn the_measured_at_window_follows_the_server_clock() {
    let (app, device) = app_with_device().await;
    let then = app.clock.now();
    let body = measured(sample(), then + TimeDelta::minutes(30));
    assert_eq!(
        rejected(&app, &device, &body).await,
        [fe("measured_at", "maximum", "body")]
    );
    app.clock.advance(TimeDelta::minutes(26));
    accepted(&app, &device, &body).await;
    app.clock.advance(TimeDelta::days(367));
    assert_eq!(
        rejected(&app, &device, &body).await,
        [fe("measured_at", "minimum", "body")]
    );
}

// ---------------------------------------------------------------------------------------------
// 6. What was stored comes back

#[airq_test::test]
async fn uploaded_readings_make_up_the_current_snapshot() {
    let (app, device) = app_with_device().await;
    accepted(&app, &device, &sample_with(10, 1.0, 20.0)).await;
    app.clock.advance(TimeDelta::minutes(1));
    accepted(&app, &device, &sample_with(20, 2.0, 22.0)).await;
    app.clock.advance(TimeDelta::minutes(1));
    let (_, located_at) = accepted(
        &app,
        &device,
        &located(sample_with(31, 3.0, 24.0), 48.1, 11.5),
    )
    .await;
    let current = app
        .data_as(
            "alice",
            &format!("/devices/{}/current", device_uuid(&device)),
        )
        .await;
    assert_eq!(current["sample_count"], 3, "{current}");
    assert_eq!(current["aqi"], 20, "{current}");
    let close = |name: &str, expected: f64| {
        let value = current[name].as_f64().unwrap_or(f64::NAN);
        assert!(
            (value - expected).abs() < 1e-9,
            "{name}: {value} != {expected}"
        );
    };
    close("pm2_5", 2.0);
    close("temperature", 22.0);
    close("pm1_0", 5.0);
    close("humidity", 40.0);
    assert_eq!(current["location"]["lat"], 48.1);
    assert_eq!(current["location"]["lon"], 11.5);
    assert_eq!(current["location"]["provider"], "phone-gps");
    let timestamp = current["location"]["timestamp"]
        .as_str()
        .expect("timestamp");
    let timestamp = DateTime::parse_from_rfc3339(timestamp).expect("RFC 3339");
    assert_eq!(timestamp, located_at);
    assert_eq!(sample_count(&app, &device).await, 3);
}

// ---------------------------------------------------------------------------------------------
// 7. Concurrency

#[airq_test::test(flavor = "multi_thread", worker_threads = 2)]
async fn parallel_uploads_are_each_stored_once() {
    const DEVICES: usize = 4;
    const PER_DEVICE: usize = 110;
    let app = TestApp::spawn().await;
    let mut devices = Vec::new();
    for n in 0..DEVICES {
        devices.push(app.register_named("alice", &format!("fleet-{n}")).await);
    }
    let uploads = (0..DEVICES * PER_DEVICE).map(|n| {
        let client = app.client.clone();
        let url = app.url("/data");
        let device = devices[n % DEVICES].clone();
        let body = sample_with((n % 300) as i64, n as f64 / 10.0, 20.0);
        tokio::spawn(async move {
            let response = upload_with(&client, &url, &device, &body).await;
            receipt(response).await
        })
    });
    let receipts: Vec<(u64, DateTime<Utc>)> = join_all(uploads)
        .await
        .into_iter()
        .map(|joined| joined.expect("upload task"))
        .collect();
    assert_eq!(receipts.len(), DEVICES * PER_DEVICE);
    let mut ids: Vec<u64> = receipts.iter().map(|(id, _)| *id).collect();
    ids.sort_unstable();
    let distinct: HashSet<u64> = ids.iter().copied().collect();
    assert_eq!(distinct.len(), ids.len(), "receipt ids are distinct");

    for device in &devices {
        assert_eq!(
            sample_count(&app, device).await,
            PER_DEVICE as u64,
            "{}",
            device_uuid(device)
        );
    }
    assert_eq!(
        app.stored_ids().await,
        ids,
        "exactly the acknowledged readings are stored"
    );
}

// ---------------------------------------------------------------------------------------------
// 8. A failing sink (a real fault: another connection holds SQLite's write lock)

/// A reading at the upper bound of every value.
fn maximal() -> Value {
    let mut body = sample();
    body["aqi"] = json!(10_000);
    for field in ["pm1_0", "pm2_5", "pm10_0"] {
        body["pms_data"][field] = json!(100_000.0);
    }
    body["temperature_data"]["temperature"] = json!(1_000.0);
    body["temperature_data"]["heat_index"] = json!(1_000.0);
    body["temperature_data"]["humidity"] = json!(100.0);
    body
}

/// Asserts that every metric of `metrics` is a finite number and `aqi` an integer.
fn assert_finite_metrics(metrics: &Value, what: &str) {
    for field in [
        "aqi",
        "pm1_0",
        "pm2_5",
        "pm10_0",
        "temperature",
        "heat_index",
        "humidity",
    ] {
        let value = metrics[field].as_f64();
        assert!(
            value.is_some_and(f64::is_finite),
            "{what}: {field} is a finite number in {metrics}"
        );
    }
    assert!(
        metrics["aqi"].is_i64(),
        "{what}: aqi is an integer in {metrics}"
    );
}

fn assert_close(actual: &Value, expected: f64, what: &str) {
    let value = actual.as_f64().unwrap_or(f64::NAN);
    assert!(
        (value - expected).abs() <= expected.abs() * 1e-9,
        "{what}: {value} != {expected}"
    );
}

#[airq_test::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_extreme_aqi_never_breaks_later_uploads() {
    let app = TestApp::spawn().await;
    // Every upload below falls in one 15-minute slot.
    let now: DateTime<Utc> = "2026-03-10T12:01:00Z".parse().expect("instant");
    app.clock.set(now);
    let loud = app.register_named("alice", "loud").await;
    let quiet = app.register_named("alice", "quiet").await;

    // Past the bound: refused, one after the other and two in the same batch.
    let huge = with(sample(), "aqi", json!(i64::MAX));
    assert_eq!(
        rejected(&app, &loud, &huge).await,
        [fe("aqi", "maximum", "body")]
    );
    let (first, second) = tokio::join!(app.upload(&loud, &huge), app.upload(&loud, &huge));
    for response in [first, second] {
        let body = problem(response, 422).await;
        assert_eq!(field_errors(&body), [fe("aqi", "maximum", "body")]);
    }

    // At the bound: stored, twice in the same batch and slot.
    let maximal = maximal();
    let (first, second) = tokio::join!(app.upload(&loud, &maximal), app.upload(&loud, &maximal));
    receipt(first).await;
    receipt(second).await;
    // Ordinary readings, of this device and of another, are still stored.
    let ordinary = sample();
    let (quiet_upload, loud_upload) =
        tokio::join!(app.upload(&quiet, &ordinary), app.upload(&loud, &ordinary));
    receipt(quiet_upload).await;
    receipt(loud_upload).await;

    // Reads still answer, with exact means: (2 × 10000 + 42) / 3 and (2 × 100000 + 10) / 3.
    let loud_id = device_uuid(&loud);
    let current = app
        .data_as("alice", &format!("/devices/{loud_id}/current"))
        .await;
    assert_finite_metrics(&current, "device snapshot");
    assert_eq!(current["sample_count"], 3, "{current}");
    assert_eq!(current["aqi"], 6681, "{current}");
    assert_close(&current["pm2_5"], 200_010.0 / 3.0, "pm2_5");
    assert_close(&current["temperature"], 2_021.5 / 3.0, "temperature");

    let pooled = app.data_as("alice", "/air-quality/current").await;
    assert_finite_metrics(&pooled, "owner-wide snapshot");
    assert_eq!(pooled["sample_count"], 4, "{pooled}");
    assert_eq!(pooled["aqi"], 5021, "(20000 + 42 + 42) / 4: {pooled}");

    for path in [
        format!("/devices/{loud_id}/historical?timeline=daily"),
        "/air-quality/historical?timeline=daily".to_owned(),
        "/air-quality/historical?timeline=yearly".to_owned(),
    ] {
        let points = app.data_as("alice", &path).await;
        let points = points.as_array().expect("a data array");
        assert!(!points.is_empty(), "GET {path}: a bucket");
        for point in points {
            assert_finite_metrics(&point["metrics"], &path);
        }
    }
    let points = app
        .data_as(
            "alice",
            &format!("/devices/{loud_id}/historical?timeline=daily"),
        )
        .await;
    let last = points.as_array().and_then(|points| points.last()).cloned();
    let last = last.expect("the current bucket");
    assert_eq!(last["metrics"]["aqi"], 6681, "{last}");
    assert_close(&last["metrics"]["pm2_5"], 200_010.0 / 3.0, "bucket pm2_5");
}

#[airq_test::test]
async fn an_aqi_beyond_any_integer_range_is_422_maximum() {
    let app = TestApp::spawn().await;
    let device = app.register_named("alice", "Balcony").await;
    for aqi in [
        "18446744073709551615",
        "1e300",
        "9007199254740992.0",
        "-1e300",
    ] {
        let body = serde_json::to_string(&crate::common::sample())
            .unwrap()
            .replacen("\"aqi\":42", &format!("\"aqi\":{aqi}"), 1);
        let response = app
            .client
            .post(app.url("/data"))
            .header("x-device-id", device["device_id"].as_str().unwrap())
            .header("x-device-key", device["device_key"].as_str().unwrap())
            .header("content-type", "application/json")
            .body(body)
            .send()
            .await
            .unwrap();
        let problem = crate::common::problem(response, 422).await;
        let expected = if aqi.starts_with('-') {
            "minimum"
        } else {
            "maximum"
        };
        assert_eq!(
            crate::common::field_errors(&problem),
            [crate::common::fe("aqi", expected, "body")],
            "aqi {aqi}"
        );
    }
}

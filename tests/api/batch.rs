//! `POST /data/batch`, gzip request bodies and retries that never duplicate (`docs/api.md`,
//! "Extensions of the second round"), on every backend pair.

use std::io::Write as _;

use chrono::{TimeDelta, Utc};
use serde_json::{json, Value};

use crate::common::{
    assert_close, fe, field_errors, measured, problem, sample, sample_with, TestApp,
};
use crate::upload::{app_with_device, device_id, device_key, receipt, sample_count};

/// `POST path` as `device` with a raw body and extra headers.
async fn post_raw(
    app: &TestApp,
    path: &str,
    device: &Value,
    headers: &[(&str, &str)],
    body: Vec<u8>,
) -> reqwest::Response {
    let mut request = app
        .client
        .post(app.url(path))
        .header("x-device-id", device_id(device))
        .header("x-device-key", device_key(device))
        .header("content-type", "application/json")
        .body(body);
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    request.send().await.expect("request sent")
}

pub(crate) async fn post_batch(app: &TestApp, device: &Value, body: &Value) -> reqwest::Response {
    post_raw(
        app,
        "/data/batch",
        device,
        &[],
        body.to_string().into_bytes(),
    )
    .await
}

fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    encoder.write_all(bytes).expect("compressed");
    encoder.finish().expect("compressed")
}

/// `count` readings one minute apart, ending a minute before now, aqi 1, 2, 3, …
fn minutes(count: usize) -> Vec<Value> {
    let now = Utc::now();
    (0..count)
        .map(|index| {
            let at = now - TimeDelta::minutes((count - index) as i64);
            measured(sample_with(index as i64 + 1, 10.0, 20.0), at)
        })
        .collect()
}

/// The `data` of a 201 batch answer, after checking its shape.
pub(crate) async fn batch_receipts(response: reqwest::Response) -> Vec<(u64, String)> {
    let status = response.status();
    let body: Value = response.json().await.expect("json");
    assert_eq!(status, 201, "batch accepted: {body}");
    let data = &body["data"];
    let receipts: Vec<(u64, String)> = data["receipts"]
        .as_array()
        .expect("receipts")
        .iter()
        .map(|receipt| {
            (
                receipt["id"].as_u64().expect("id"),
                receipt["created_at"]
                    .as_str()
                    .expect("created_at")
                    .to_owned(),
            )
        })
        .collect();
    assert_eq!(data["count"], receipts.len(), "count: {body}");
    receipts
}

#[airq_test::test]
async fn a_batch_is_stored_whole_with_receipts_in_request_order() {
    let (app, device) = app_with_device().await;
    let readings = minutes(3);
    let receipts =
        batch_receipts(post_batch(&app, &device, &json!({ "readings": readings })).await).await;
    assert_eq!(receipts.len(), 3);
    for ((_, created_at), reading) in receipts.iter().zip(&readings) {
        let sent =
            chrono::DateTime::parse_from_rfc3339(reading["measured_at"].as_str().expect("at"))
                .expect("rfc 3339");
        let stored = chrono::DateTime::parse_from_rfc3339(created_at).expect("rfc 3339");
        assert_eq!(stored.timestamp_millis(), sent.timestamp_millis());
    }
    let mut ids: Vec<u64> = receipts.iter().map(|(id, _)| *id).collect();
    assert!(
        ids.windows(2).all(|pair| pair[0] < pair[1]),
        "ids in request order: {ids:?}"
    );
    ids.sort_unstable();
    assert_eq!(app.stored_ids().await, ids);
    assert_eq!(sample_count(&app, &device).await, 3);
}

#[airq_test::test]
async fn one_bad_reading_rejects_the_whole_batch_and_every_problem_is_named_by_position() {
    let (app, device) = app_with_device().await;
    let mut readings = minutes(4);
    readings[1]["pms_data"]["pm2_5"] = json!(-1);
    readings[3].as_object_mut().expect("object").remove("aqi");
    readings[3]["measured_at"] = json!("yesterday");
    let response = post_batch(&app, &device, &json!({ "readings": readings })).await;
    let body = problem(response, 422).await;
    assert_eq!(body["instance"], "/api/v1/data/batch");
    assert_eq!(
        field_errors(&body),
        vec![
            fe("readings[1].pms_data.pm2_5", "minimum", "body"),
            fe("readings[3].aqi", "required", "body"),
            fe("readings[3].measured_at", "format", "body"),
        ]
    );
    assert!(
        app.stored_ids().await.is_empty(),
        "nothing of the batch is stored"
    );
}

#[airq_test::test]
async fn readings_must_be_an_array_of_1_to_1000_objects() {
    let (app, device) = app_with_device().await;
    let cases = [
        (json!({}), fe("readings", "required", "body")),
        (
            json!({ "readings": null }),
            fe("readings", "required", "body"),
        ),
        (json!({ "readings": {} }), fe("readings", "type", "body")),
        (
            json!({ "readings": [] }),
            fe("readings", "min_length", "body"),
        ),
        (
            json!({ "readings": vec![sample(); 1001] }),
            fe("readings", "max_length", "body"),
        ),
        (
            json!({ "readings": [42] }),
            fe("readings[0]", "type", "body"),
        ),
        (json!([sample()]), fe("$", "type", "body")),
    ];
    for (body, expected) in cases {
        let response = post_batch(&app, &device, &body).await;
        let problem_body = problem(response, 422).await;
        assert_eq!(field_errors(&problem_body), vec![expected], "{body}");
    }
    assert!(app.stored_ids().await.is_empty());
}

#[airq_test::test]
async fn a_batch_of_1000_readings_is_accepted() {
    let (app, device) = app_with_device().await;
    let receipts =
        batch_receipts(post_batch(&app, &device, &json!({ "readings": minutes(1000) })).await)
            .await;
    assert_eq!(receipts.len(), 1000);
    assert_eq!(app.stored_ids().await.len(), 1000);
}

#[airq_test::test]
async fn the_batch_body_limit_is_1_mib() {
    let (app, device) = app_with_device().await;
    // The same readings in both bodies: a rendered timestamp's length varies with its fraction of
    // a second, so a second `minutes(2)` could miss the target length by a few bytes.
    let readings = minutes(2);
    // Past 64 KiB (the single upload's limit) but within 1 MiB: accepted.
    let mut body = json!({ "readings": readings, "padding": "x".repeat(100_000) }).to_string();
    assert!(body.len() > 65_536 && body.len() < 1_048_576);
    batch_receipts(post_raw(&app, "/data/batch", &device, &[], body.clone().into_bytes()).await)
        .await;
    // One byte more than 1 MiB: 413.
    let target = 1_048_577;
    let filler = target - body.len();
    body = json!({ "readings": readings, "padding": "x".repeat(100_000 + filler) }).to_string();
    assert_eq!(body.len(), target);
    let response = post_raw(&app, "/data/batch", &device, &[], body.into_bytes()).await;
    problem(response, 413).await;
}

#[airq_test::test]
async fn a_batch_needs_device_credentials_before_anything_else() {
    let (app, _device) = app_with_device().await;
    let response = app
        .client
        .post(app.url("/data/batch"))
        .header("content-type", "text/plain")
        .body("not json")
        .send()
        .await
        .expect("request sent");
    problem(response, 401).await;
}

#[airq_test::test]
async fn a_gzip_encoded_upload_is_stored_as_if_sent_plain() {
    let (app, device) = app_with_device().await;
    let body = gzip(sample_with(77, 12.5, 21.0).to_string().as_bytes());
    let response = post_raw(
        &app,
        "/data",
        &device,
        &[("content-encoding", "gzip")],
        body,
    )
    .await;
    receipt(response).await;
    let current = app
        .data_as(
            "alice",
            &format!("/devices/{}/current", device["id"].as_str().expect("id")),
        )
        .await;
    assert_eq!(current["aqi"], 77);
    assert_close(&current["pm2_5"], 12.5, "pm2_5");

    let batch = gzip(json!({ "readings": minutes(5) }).to_string().as_bytes());
    let response = post_raw(
        &app,
        "/data/batch",
        &device,
        &[("content-encoding", "gzip")],
        batch,
    )
    .await;
    assert_eq!(batch_receipts(response).await.len(), 5);
}

#[airq_test::test]
async fn a_gzip_body_that_decompresses_past_the_limit_is_413() {
    let (app, device) = app_with_device().await;
    // 64 KiB + 1 of JSON whitespace compresses to a few hundred bytes.
    let mut plain = sample().to_string();
    plain.push_str(&" ".repeat(65_537 - plain.len()));
    let bomb = gzip(plain.as_bytes());
    assert!(bomb.len() < 1_000);
    let response = post_raw(
        &app,
        "/data",
        &device,
        &[("content-encoding", "gzip")],
        bomb,
    )
    .await;
    problem(response, 413).await;
    // 10 MB of zeros for the batch route: refused without inflating it all.
    let bomb = gzip(&vec![b' '; 10_000_000]);
    let response = post_raw(
        &app,
        "/data/batch",
        &device,
        &[("content-encoding", "gzip")],
        bomb,
    )
    .await;
    problem(response, 413).await;
    assert!(app.stored_ids().await.is_empty());
}

#[airq_test::test]
async fn another_content_encoding_is_415_and_broken_gzip_is_400() {
    let (app, device) = app_with_device().await;
    for coding in ["br", "deflate", "compress", "gzip, gzip"] {
        let response = post_raw(
            &app,
            "/data",
            &device,
            &[("content-encoding", coding)],
            sample().to_string().into_bytes(),
        )
        .await;
        problem(response, 415).await;
    }
    let response = post_raw(
        &app,
        "/data",
        &device,
        &[("content-encoding", "gzip")],
        sample().to_string().into_bytes(),
    )
    .await;
    let body = problem(response, 400).await;
    assert_eq!(body["type"], "urn:airq:problem:malformed-body");
    let response = post_raw(
        &app,
        "/data",
        &device,
        &[("content-encoding", "identity")],
        sample().to_string().into_bytes(),
    )
    .await;
    receipt(response).await;
}

#[airq_test::test]
async fn uploading_the_same_measured_at_again_replaces_the_reading() {
    let (app, device) = app_with_device().await;
    let at = Utc::now() - TimeDelta::minutes(3);
    let first = app
        .upload(&device, &measured(sample_with(10, 1.0, 15.0), at))
        .await;
    receipt(first).await;
    let again = app
        .upload(&device, &measured(sample_with(30, 3.0, 25.0), at))
        .await;
    let (id, _) = receipt(again).await;
    assert_eq!(sample_count(&app, &device).await, 1, "counted once");
    let current = app
        .data_as(
            "alice",
            &format!("/devices/{}/current", device["id"].as_str().expect("id")),
        )
        .await;
    assert_eq!(current["aqi"], 30, "the later values win");
    assert_close(&current["temperature"], 25.0, "temperature");
    assert_eq!(app.stored_ids().await, vec![id], "one row, the later one");
    // Timelines count it once too.
    let daily = app
        .data_as(
            "alice",
            &format!(
                "/devices/{}/historical?timeline=daily",
                device["id"].as_str().expect("id")
            ),
        )
        .await;
    let aqis: Vec<i64> = daily
        .as_array()
        .expect("points")
        .iter()
        .map(|point| point["metrics"]["aqi"].as_i64().expect("aqi"))
        .collect();
    assert_eq!(aqis, vec![30]);
}

#[airq_test::test]
async fn a_retried_batch_stores_each_reading_once_and_a_repeated_key_keeps_the_later_element() {
    let (app, device) = app_with_device().await;
    let readings = minutes(4);
    batch_receipts(post_batch(&app, &device, &json!({ "readings": readings })).await).await;
    batch_receipts(post_batch(&app, &device, &json!({ "readings": readings })).await).await;
    assert_eq!(
        sample_count(&app, &device).await,
        4,
        "the retry replaced, not added"
    );
    assert_eq!(app.stored_ids().await.len(), 4);

    let at = Utc::now() - TimeDelta::seconds(30);
    let twice = json!({ "readings": [
        measured(sample_with(100, 1.0, 1.0), at),
        measured(sample_with(200, 2.0, 2.0), at),
    ]});
    batch_receipts(post_batch(&app, &device, &twice).await).await;
    assert_eq!(sample_count(&app, &device).await, 5);
    let (_, mean_of_all) = (
        0,
        app.data_as(
            "alice",
            &format!("/devices/{}/current", device["id"].as_str().expect("id")),
        )
        .await,
    );
    // aqi 1..=4 from the first batch, 200 from the second: the mean of five.
    assert_eq!(
        mean_of_all["aqi"],
        ((1 + 2 + 3 + 4 + 200) as f64 / 5.0).round() as i64
    );
}

#[airq_test::test]
async fn readings_without_measured_at_are_always_new() {
    let (app, device) = app_with_device().await;
    for _ in 0..3 {
        receipt(app.upload(&device, &sample()).await).await;
    }
    batch_receipts(post_batch(&app, &device, &json!({ "readings": [sample(), sample()] })).await)
        .await;
    assert_eq!(sample_count(&app, &device).await, 5);
}

//! Several airq processes on one PostgreSQL: credential changes reach every process, and device
//! changes reach every process's map.
//!
//! The eviction travels by `NOTIFY` after the rotating transaction commits, so the other process
//! learns of it asynchronously (within milliseconds on one machine); the tests wait for it with a
//! bounded poll instead of a fixed sleep.

use std::time::Duration;

use reqwest::Method;
use serde_json::{json, Value};

use crate::common::{located, sample, TestApp};

/// Uploads through `app` with `device`'s credentials until the answer is 401 (at most ~5 s).
async fn refused_soon(app: &TestApp, device: &Value) -> u16 {
    let mut status = 0;
    for _ in 0..250 {
        status = app.upload(device, &sample()).await.status().as_u16();
        if status == 401 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    status
}

#[airq_test::test]
async fn both_processes_see_the_same_devices() {
    let first = TestApp::spawn().await;
    let second = first.spawn_peer().await;
    let device = first.register_named("alice", "Shared").await;
    let listed = second.data_as("alice", "/devices").await;
    assert_eq!(listed[0]["id"], device["id"]);
    second.upload_ok(&device, &sample()).await;
}

#[airq_test::test]
async fn a_key_rotated_through_one_process_is_refused_by_the_other() {
    let first = TestApp::spawn().await;
    let second = first.spawn_peer().await;
    let device = first.register_named("alice", "Shared").await;
    second.upload_ok(&device, &sample()).await;

    let path = format!("/devices/{}/rotate-key", device["id"].as_str().unwrap());
    let response = first
        .owner_request(Method::POST, &path, "alice")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let rotated = response.json::<Value>().await.unwrap()["data"].clone();

    assert_eq!(
        refused_soon(&second, &device).await,
        401,
        "the old key is refused by the other process"
    );
    second.upload_ok(&rotated, &sample()).await;
}

#[airq_test::test]
async fn a_device_deleted_through_one_process_is_refused_by_the_other() {
    let first = TestApp::spawn().await;
    let second = first.spawn_peer().await;
    let device = first.register_named("alice", "Shared").await;
    second.upload_ok(&device, &sample()).await;

    let path = format!("/devices/{}", device["id"].as_str().unwrap());
    let response = first
        .owner_request(Method::DELETE, &path, "alice")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 204);

    assert_eq!(
        refused_soon(&second, &device).await,
        401,
        "the deleted device is refused by the other process"
    );
}

#[airq_test::test]
async fn a_device_made_private_through_one_process_leaves_the_others_cached_map() {
    let first = TestApp::spawn().await;
    let second = first.spawn_peer().await;
    let device = first
        .register(
            "alice",
            serde_json::json!({ "name": "Roof", "is_public": true, "is_location_public": true }),
        )
        .await;
    // Readings live in each process's own SQLite file in this pair: upload to the one that maps.
    second
        .upload_ok(&device, &crate::common::located(sample(), 52.5, 13.4))
        .await;
    let entries = |body: Value| body["data"].as_array().map_or(0, Vec::len);
    // The second process caches the map with the device on it (for its 5 s time to live).
    let cached: Value = second
        .get_public("/public/map/devices")
        .await
        .json()
        .await
        .expect("json");
    assert_eq!(entries(cached), 1);

    let id = device["id"].as_str().expect("id");
    let response = first
        .send_json_as(
            "alice",
            Method::PATCH,
            &format!("/devices/{id}"),
            &serde_json::json!({ "is_public": false }),
        )
        .await;
    assert_eq!(response.status(), 200);
    // Well within the time to live: only the announcement can have removed it.
    let mut remaining = usize::MAX;
    for _ in 0..100 {
        let body: Value = second
            .get_public("/public/map/devices")
            .await
            .json()
            .await
            .expect("json");
        remaining = entries(body);
        if remaining == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(
        remaining, 0,
        "the other process still shows the private device"
    );
}

/// The name `app`'s map shows for `device` (`None` while it is not on the map), polled until it
/// is `wanted` (for 5 s at most).
async fn map_name_once(app: &TestApp, device: &Value, wanted: Option<&str>) -> Option<String> {
    let mut name = None;
    for _ in 0..100 {
        let response = app.get_public("/public/map/devices").await;
        assert_eq!(response.status(), 200);
        let body: Value = response.json().await.unwrap();
        name = body["data"]
            .as_array()
            .unwrap()
            .iter()
            .find(|entry| entry["id"] == device["id"])
            .map(|entry| entry["name"].as_str().unwrap().to_owned());
        if name.as_deref() == wanted {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    name
}

#[airq_test::test]
async fn a_device_changed_through_one_process_changes_on_the_others_map() {
    let first = TestApp::spawn().await;
    let second = first
        .spawn_peer_with(|c| c.map_cache_ttl = Duration::from_millis(200))
        .await;
    let device = first
        .register(
            "alice",
            json!({ "name": "Roof", "is_public": true, "is_location_public": true }),
        )
        .await;
    second
        .upload_ok(&device, &located(sample(), 48.85, 2.35))
        .await;
    assert_eq!(
        map_name_once(&second, &device, Some("Roof"))
            .await
            .as_deref(),
        Some("Roof")
    );

    let path = format!("/devices/{}", device["id"].as_str().unwrap());
    let renamed = first
        .send_json_as("alice", Method::PATCH, &path, &json!({ "name": "Attic" }))
        .await;
    assert_eq!(renamed.status(), 200);
    assert_eq!(
        map_name_once(&second, &device, Some("Attic"))
            .await
            .as_deref(),
        Some("Attic"),
        "the other process's map shows the new name"
    );

    let hidden = first
        .send_json_as(
            "alice",
            Method::PATCH,
            &path,
            &json!({ "is_public": false }),
        )
        .await;
    assert_eq!(hidden.status(), 200);
    assert_eq!(
        map_name_once(&second, &device, None).await,
        None,
        "the device made private left the other process's map"
    );
}

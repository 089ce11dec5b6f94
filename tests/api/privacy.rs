//! Privacy takes effect at once: making a device private, hiding its location or deleting it
//! removes it from the cached public map immediately, however long the map is cached.

use std::time::Duration;

use reqwest::Method;
use serde_json::{json, Value};

use crate::common::{located, sample, TestApp};

/// A server whose map would otherwise be served from its cache for an hour.
async fn app_with_a_long_map_cache() -> TestApp {
    TestApp::spawn_with(|c| c.map_cache_ttl = Duration::from_secs(3600)).await
}

async fn on_the_map(app: &TestApp) -> Vec<String> {
    let response = app.get_public("/public/map/devices").await;
    assert_eq!(response.status(), 200);
    let body: Value = response.json().await.expect("json");
    body["data"]
        .as_array()
        .expect("entries")
        .iter()
        .map(|entry| entry["id"].as_str().expect("id").to_owned())
        .collect()
}

async fn mapped_device(app: &TestApp) -> (Value, String) {
    let device = app
        .register(
            "alice",
            json!({ "name": "Roof", "is_public": true, "is_location_public": true }),
        )
        .await;
    app.upload_ok(&device, &located(sample(), 52.5, 13.4)).await;
    let id = device["id"].as_str().expect("id").to_owned();
    assert_eq!(
        on_the_map(app).await,
        vec![id.clone()],
        "on the map, and cached"
    );
    (device, id)
}

async fn patch(app: &TestApp, id: &str, body: Value) {
    let response = app
        .send_json_as("alice", Method::PATCH, &format!("/devices/{id}"), &body)
        .await;
    assert_eq!(response.status(), 200);
}

#[airq_test::test]
async fn a_device_made_private_leaves_the_cached_map_at_once() {
    let app = app_with_a_long_map_cache().await;
    let (_, id) = mapped_device(&app).await;
    patch(&app, &id, json!({ "is_public": false })).await;
    assert!(on_the_map(&app).await.is_empty());
}

#[airq_test::test]
async fn a_hidden_location_leaves_the_cached_map_at_once() {
    let app = app_with_a_long_map_cache().await;
    let (_, id) = mapped_device(&app).await;
    patch(&app, &id, json!({ "is_location_public": false })).await;
    assert!(on_the_map(&app).await.is_empty());
}

#[airq_test::test]
async fn a_deleted_device_leaves_the_cached_map_at_once() {
    let app = app_with_a_long_map_cache().await;
    let (_, id) = mapped_device(&app).await;
    let response = app
        .owner_request(Method::DELETE, &format!("/devices/{id}"), "alice")
        .send()
        .await
        .expect("request sent");
    assert_eq!(response.status(), 204);
    assert!(on_the_map(&app).await.is_empty());
}

#[airq_test::test]
async fn a_rename_shows_on_the_cached_map_at_once() {
    let app = app_with_a_long_map_cache().await;
    let (_, id) = mapped_device(&app).await;
    patch(&app, &id, json!({ "name": "Garden" })).await;
    let response = app.get_public("/public/map/devices").await;
    let body: Value = response.json().await.expect("json");
    assert_eq!(body["data"][0]["name"], "Garden");
}

//! `GET /api/v1/public/devices/{id}/badge.svg`: the current AQI as an SVG badge, cacheable with
//! its entity tag, public like the device's other routes.

use chrono::{TimeDelta, Utc};
use serde_json::{json, Value};

use crate::common::{measured, problem, sample_with, TestApp};

async fn public_device(app: &TestApp) -> Value {
    app.register("alice", json!({ "name": "Roof", "is_public": true }))
        .await
}

fn badge_path(device: &Value) -> String {
    format!(
        "/public/devices/{}/badge.svg",
        device["id"].as_str().expect("id")
    )
}

/// The badge of `device`, as served.
async fn badge(app: &TestApp, device: &Value) -> String {
    app.get_public(&badge_path(device))
        .await
        .text()
        .await
        .expect("text")
}

#[airq_test::test]
async fn the_badge_shows_the_current_aqi_in_its_category_colour() {
    let app = TestApp::spawn().await;
    let device = public_device(&app).await;
    app.upload_ok(&device, &sample_with(120, 40.0, 20.0)).await;
    let response = app.get_public(&badge_path(&device)).await;
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["content-type"], "image/svg+xml");
    assert_eq!(response.headers()["access-control-allow-origin"], "*");
    assert_eq!(response.headers()["cache-control"], "no-cache");
    let svg = response.text().await.expect("text");
    assert!(svg.starts_with("<svg xmlns=\"http://www.w3.org/2000/svg\""));
    assert!(svg.contains("120 Unhealthy for Sensitive Groups"));
    assert!(svg.contains(r##"fill="#ff7e00""##));
}

#[airq_test::test]
async fn the_badge_answers_304_while_the_aqi_is_unchanged_and_200_once_it_changes() {
    let app = TestApp::spawn().await;
    let device = public_device(&app).await;
    let now = Utc::now();
    app.upload_ok(
        &device,
        &measured(sample_with(30, 5.0, 20.0), now - TimeDelta::minutes(2)),
    )
    .await;
    let first = app.get_public(&badge_path(&device)).await;
    let etag = first.headers()["etag"].clone();
    let conditional = || {
        app.client
            .get(app.url(&badge_path(&device)))
            .header("if-none-match", etag.clone())
            .send()
    };
    assert_eq!(conditional().await.expect("sent").status(), 304);
    app.upload_ok(
        &device,
        &measured(sample_with(170, 80.0, 20.0), now - TimeDelta::minutes(1)),
    )
    .await;
    let changed = conditional().await.expect("sent");
    assert_eq!(changed.status(), 200);
    assert!(changed.text().await.expect("text").contains("100 Moderate"));
}

#[airq_test::test]
async fn a_silent_device_has_a_grey_no_data_badge() {
    let app = TestApp::spawn().await;
    let device = public_device(&app).await;
    let svg = badge(&app, &device).await;
    assert!(svg.contains("no data"));
}

#[airq_test::test]
async fn an_offline_device_says_so_instead_of_showing_an_old_value_as_current() {
    let app = TestApp::spawn().await;
    let device = public_device(&app).await;
    app.upload_ok(
        &device,
        &measured(sample_with(42, 5.0, 20.0), Utc::now() - TimeDelta::hours(2)),
    )
    .await;
    let svg = badge(&app, &device).await;
    assert!(svg.contains("42 offline"));
}

#[airq_test::test]
async fn a_private_devices_badge_is_the_404_of_an_unknown_one() {
    let app = TestApp::spawn().await;
    let private = app.register_named("alice", "Private").await;
    let private = problem(app.get_public(&badge_path(&private)).await, 404).await;
    let unknown = json!({ "id": uuid::Uuid::new_v4().to_string() });
    let unknown = problem(app.get_public(&badge_path(&unknown)).await, 404).await;
    assert_eq!(private["detail"], unknown["detail"]);
}

//! Helpers of the map tests: devices placed on the public map, the map feed and its clusters.

use std::collections::BTreeSet;

use reqwest::Response;
use serde_json::{json, Value};

use super::{located, sample_with, TestApp};

/// The clusters feed, under the API's base.
pub const CLUSTERS: &str = "/public/map/clusters";
/// The map feed, under the API's base.
pub const MAP: &str = "/public/map/devices";
/// GeoJSON's media type.
pub const GEO_JSON: &str = "application/geo+json";

/// Registers a public device of alice's with a public location, named `name`, and uploads one
/// sample with `aqi` at (`lat`, `lon`); returns the registration's `data`.
pub async fn placed_with_aqi(app: &TestApp, name: &str, aqi: i64, lat: f64, lon: f64) -> Value {
    let device = app
        .register(
            "alice",
            json!({ "name": name, "is_public": true, "is_location_public": true }),
        )
        .await;
    let reading = located(sample_with(aqi, aqi as f64 / 4.0, 20.5), lat, lon);
    app.upload_ok(&device, &reading).await;
    device
}

/// `GET path` with the given request headers.
pub async fn get_with(app: &TestApp, path: &str, headers: &[(&str, &str)]) -> Response {
    let mut request = app.client.get(app.url(path));
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    request.send().await.expect("request sent")
}

/// A response header as text.
pub fn header<'r>(response: &'r Response, name: &str) -> Option<&'r str> {
    response
        .headers()
        .get(name)
        .map(|value| value.to_str().expect("an ASCII header value"))
}

/// The path of the clusters at `zoom`, inside `bbox` when given.
pub fn clusters_path(zoom: u8, bbox: Option<&str>) -> String {
    match bbox {
        Some(bbox) => format!("{CLUSTERS}?zoom={zoom}&bbox={bbox}"),
        None => format!("{CLUSTERS}?zoom={zoom}"),
    }
}

/// The features of the clusters at `zoom` (inside `bbox`), after checking the answer is a 200
/// GeoJSON `FeatureCollection`.
pub async fn clusters(app: &TestApp, zoom: u8, bbox: Option<&str>) -> Vec<Value> {
    let path = clusters_path(zoom, bbox);
    let response = get_with(app, &path, &[]).await;
    assert_eq!(response.status(), 200, "GET {path}");
    assert_eq!(header(&response, "content-type"), Some(GEO_JSON), "{path}");
    let body: Value = response.json().await.expect("json");
    assert_eq!(body["type"], "FeatureCollection", "{path}");
    body["features"].as_array().expect("features").clone()
}

/// The features of the map feed as GeoJSON (inside `bbox`).
pub async fn map_features(app: &TestApp, bbox: Option<&str>) -> Vec<Value> {
    let path = match bbox {
        Some(bbox) => format!("{MAP}?bbox={bbox}"),
        None => MAP.to_owned(),
    };
    let response = get_with(app, &path, &[("accept", GEO_JSON)]).await;
    assert_eq!(response.status(), 200, "GET {path}");
    let body: Value = response.json().await.expect("json");
    body["features"].as_array().expect("features").clone()
}

/// The sum of the features' `count`s.
pub fn total(features: &[Value]) -> u64 {
    features
        .iter()
        .map(|feature| feature["properties"]["count"].as_u64().expect("a count"))
        .sum()
}

/// The ids of the single-device features.
pub fn single_ids(features: &[Value]) -> BTreeSet<String> {
    features
        .iter()
        .filter_map(|feature| feature["properties"]["id"].as_str())
        .map(str::to_owned)
        .collect()
}

/// `[lon, lat]` of a feature.
pub fn point(feature: &Value) -> (f64, f64) {
    let coordinates = &feature["geometry"]["coordinates"];
    (
        coordinates[0].as_f64().expect("lon"),
        coordinates[1].as_f64().expect("lat"),
    )
}

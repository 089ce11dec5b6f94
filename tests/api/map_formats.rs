//! GET /public/map/devices: the bounding box (`bbox`) and the GeoJSON representation
//! (`Accept: application/geo+json`), each variant cached with an entity tag of its own.

use std::collections::BTreeSet;
use std::time::Duration;

use reqwest::Response;
use serde_json::{json, Value};

use crate::common::{
    fe, field_errors, gunzipped_json, located, problem, sample, sample_with, TestApp,
};

const MAP: &str = "/public/map/devices";
const GEO_JSON: &str = "application/geo+json";

/// Registers a public device with a public location named `name` and uploads one sample at
/// (`lat`, `lon`).
async fn placed(app: &TestApp, name: &str, lat: f64, lon: f64) -> Value {
    let device = app
        .register(
            "alice",
            json!({ "name": name, "is_public": true, "is_location_public": true }),
        )
        .await;
    app.upload_ok(&device, &located(sample(), lat, lon)).await;
    device
}

/// `GET path` with the given request headers.
async fn get(app: &TestApp, path: &str, headers: &[(&str, &str)]) -> Response {
    let mut request = app.client.get(app.url(path));
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    request.send().await.expect("request sent")
}

fn header<'r>(response: &'r Response, name: &str) -> Option<&'r str> {
    response
        .headers()
        .get(name)
        .map(|value| value.to_str().expect("an ASCII header value"))
}

/// The names of the devices on the JSON map at `path`.
async fn names(app: &TestApp, path: &str) -> BTreeSet<String> {
    let response = get(app, path, &[]).await;
    assert_eq!(response.status(), 200, "GET {path}");
    let body: Value = response.json().await.expect("json");
    body["data"]
        .as_array()
        .expect("a data array")
        .iter()
        .map(|entry| entry["name"].as_str().expect("a name").to_owned())
        .collect()
}

/// The names of the features of the GeoJSON map at `path`.
async fn feature_names(app: &TestApp, path: &str) -> BTreeSet<String> {
    let response = get(app, path, &[("accept", GEO_JSON)]).await;
    assert_eq!(response.status(), 200, "GET {path} as GeoJSON");
    let body: Value = response.json().await.expect("json");
    body["features"]
        .as_array()
        .expect("a features array")
        .iter()
        .map(|feature| {
            feature["properties"]["name"]
                .as_str()
                .expect("a name")
                .to_owned()
        })
        .collect()
}

fn set(names: &[&str]) -> BTreeSet<String> {
    names.iter().map(|name| (*name).to_owned()).collect()
}

#[airq_test::test]
async fn a_bbox_keeps_the_entries_inside_edges_included() {
    let app = TestApp::spawn().await;
    placed(&app, "inside", 5.0, 10.0).await;
    placed(&app, "south-west corner", 0.0, 0.0).await;
    placed(&app, "north-east corner", 10.0, 20.0).await;
    placed(&app, "west edge", 5.0, 0.0).await;
    placed(&app, "north of it", 10.5, 10.0).await;
    placed(&app, "south of it", -0.5, 10.0).await;
    placed(&app, "west of it", 5.0, -0.5).await;
    placed(&app, "east of it", 5.0, 20.5).await;

    let inside = set(&[
        "inside",
        "south-west corner",
        "north-east corner",
        "west edge",
    ]);
    let path = format!("{MAP}?bbox=0,0,20,10");
    assert_eq!(names(&app, &path).await, inside);
    assert_eq!(feature_names(&app, &path).await, inside, "GeoJSON too");
    assert_eq!(names(&app, MAP).await.len(), 8, "no bbox: the whole map");
    assert_eq!(
        names(&app, &format!("{MAP}?bbox=")).await.len(),
        8,
        "an empty bbox is no bbox"
    );
    assert!(
        names(&app, &format!("{MAP}?bbox=100,50,120,60"))
            .await
            .is_empty(),
        "a box with nothing inside"
    );
    assert_eq!(
        names(&app, &format!("{MAP}?bbox=10,5,10,5")).await,
        set(&["inside"]),
        "a box that is one point"
    );
    assert_eq!(
        names(&app, &format!("{MAP}?bbox=-180,-90,180,90"))
            .await
            .len(),
        8,
        "the whole world"
    );
}

#[airq_test::test]
async fn a_bbox_with_min_lon_above_max_lon_crosses_the_antimeridian() {
    let app = TestApp::spawn().await;
    placed(&app, "east of the line", 1.0, 175.0).await;
    placed(&app, "west of the line", -1.0, -175.0).await;
    placed(&app, "on the line", 0.0, 180.0).await;
    placed(&app, "on the line, seen from the west", 0.0, -180.0).await;
    placed(&app, "western edge", 0.0, 170.0).await;
    placed(&app, "eastern edge", 0.0, -170.0).await;
    placed(&app, "greenwich", 0.0, 0.0).await;
    placed(&app, "just outside", 0.0, 169.5).await;
    placed(&app, "too far north", 20.0, 175.0).await;

    let across = set(&[
        "east of the line",
        "west of the line",
        "on the line",
        "on the line, seen from the west",
        "western edge",
        "eastern edge",
    ]);
    let path = format!("{MAP}?bbox=170,-10,-170,10");
    assert_eq!(names(&app, &path).await, across);
    assert_eq!(feature_names(&app, &path).await, across);
}

#[airq_test::test]
async fn an_invalid_bbox_is_422_in_query_with_its_code() {
    let app = TestApp::spawn().await;
    placed(&app, "somewhere", 1.0, 1.0).await;
    for (bbox, code) in [
        ("1,2,3", "format"),
        ("1,2,3,4,5", "format"),
        ("a,b,c,d", "format"),
        ("1,2,,4", "format"),
        ("NaN,0,1,1", "format"),
        ("0,0,inf,1", "format"),
        ("1%202,3,4,5", "format"),
        ("-180.5,0,10,10", "minimum"),
        ("0,-91,10,10", "minimum"),
        ("0,0,181,10", "maximum"),
        ("0,0,10,90.5", "maximum"),
        ("0,20,10,10", "range"),
    ] {
        for accept in ["application/json", GEO_JSON] {
            let path = format!("{MAP}?bbox={bbox}");
            let response = get(&app, &path, &[("accept", accept)]).await;
            assert_eq!(
                header(&response, "access-control-allow-origin"),
                Some("*"),
                "CORS on the 422 of {path}"
            );
            let body = problem(response, 422).await;
            assert_eq!(body["type"], "urn:airq:problem:validation");
            assert_eq!(
                field_errors(&body),
                [fe("bbox", code, "query")],
                "GET {path} ({accept})"
            );
        }
    }
}

#[airq_test::test]
async fn accept_geo_json_gets_a_feature_collection_of_points() {
    let app = TestApp::spawn().await;
    let device = app
        .register(
            "alice",
            json!({ "name": "Garden", "is_public": true, "is_location_public": true, "is_outdoor": false }),
        )
        .await;
    app.upload_ok(&device, &located(sample_with(77, 12.5, 19.25), 48.85, 2.35))
        .await;
    placed(&app, "Roof", -33.9, 151.2).await;

    let plain = get(&app, MAP, &[]).await;
    assert_eq!(header(&plain, "content-type"), Some("application/json"));
    let entries: Vec<Value> = plain.json::<Value>().await.expect("json")["data"]
        .as_array()
        .expect("data")
        .clone();

    let response = get(&app, MAP, &[("accept", GEO_JSON)]).await;
    assert_eq!(response.status(), 200);
    assert_eq!(header(&response, "content-type"), Some(GEO_JSON));
    assert_eq!(header(&response, "access-control-allow-origin"), Some("*"));
    let body: Value = response.json().await.expect("GeoJSON is JSON");
    assert_eq!(
        body.as_object()
            .expect("an object")
            .keys()
            .collect::<Vec<_>>(),
        ["features", "type"]
    );
    assert_eq!(body["type"], "FeatureCollection");
    let features = body["features"].as_array().expect("features");
    assert_eq!(features.len(), entries.len());
    for (feature, entry) in features.iter().zip(&entries) {
        assert_eq!(
            feature
                .as_object()
                .expect("a feature object")
                .keys()
                .collect::<Vec<_>>(),
            ["geometry", "properties", "type"]
        );
        assert_eq!(feature["type"], "Feature");
        assert_eq!(
            feature["geometry"],
            json!({ "type": "Point", "coordinates": [entry["lon"], entry["lat"]] }),
            "a Point at [lon, lat]"
        );
        let mut properties = entry.clone();
        let properties_object = properties.as_object_mut().expect("entry object");
        properties_object.remove("lat");
        properties_object.remove("lon");
        assert_eq!(
            feature["properties"], properties,
            "the entry's other fields, as they are in the JSON map"
        );
    }
    let garden = features
        .iter()
        .find(|feature| feature["properties"]["id"] == device["id"])
        .expect("the garden is a feature");
    assert_eq!(garden["geometry"]["coordinates"], json!([2.35, 48.85]));
    assert_eq!(garden["properties"]["aqi"], 77);
    assert_eq!(garden["properties"]["is_outdoor"], false);

    // Explicit JSON, and a browser's Accept, get the JSON map; GeoJSON wins on weight.
    for accept in [
        "application/json",
        "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8",
        "application/geo+json;q=0",
    ] {
        let response = get(&app, MAP, &[("accept", accept)]).await;
        assert_eq!(
            header(&response, "content-type"),
            Some("application/json"),
            "{accept}"
        );
    }
    let response = get(
        &app,
        MAP,
        &[("accept", "application/json;q=0.5, application/geo+json")],
    )
    .await;
    assert_eq!(header(&response, "content-type"), Some(GEO_JSON));
}

/// The request headers of every variant: format × bbox × encoding.
fn variants() -> Vec<(String, Vec<(&'static str, &'static str)>)> {
    let mut variants = Vec::new();
    for path in [MAP.to_owned(), format!("{MAP}?bbox=0,40,20,60")] {
        for accept in ["application/json", GEO_JSON] {
            for encoding in ["identity", "gzip"] {
                variants.push((
                    path.clone(),
                    vec![("accept", accept), ("accept-encoding", encoding)],
                ));
            }
        }
    }
    variants
}

#[airq_test::test]
async fn every_variant_has_its_own_etag_and_answers_304_to_it() {
    let app = TestApp::spawn_with(|c| c.map_cache_ttl = Duration::from_secs(3600)).await;
    placed(&app, "Paris", 48.85, 2.35).await;
    placed(&app, "Sydney", -33.9, 151.2).await;

    let mut tags = Vec::new();
    for (path, headers) in variants() {
        let what = format!("{path} {headers:?}");
        let response = get(&app, &path, &headers).await;
        assert_eq!(response.status(), 200, "{what}");
        let etag = header(&response, "etag").expect("an ETag").to_owned();
        let vary: BTreeSet<String> = header(&response, "vary")
            .unwrap_or_default()
            .split(',')
            .map(|name| name.trim().to_ascii_lowercase())
            .collect();
        assert_eq!(vary, set(&["accept", "accept-encoding"]), "Vary on {what}");
        assert!(
            header(&response, "cache-control")
                .unwrap_or_default()
                .contains("max-age"),
            "{what}"
        );
        let gzip = headers.contains(&("accept-encoding", "gzip"));
        assert_eq!(
            header(&response, "content-encoding"),
            gzip.then_some("gzip"),
            "{what}"
        );

        let mut revalidation: Vec<(&str, &str)> = headers.clone();
        revalidation.push(("if-none-match", etag.as_str()));
        let again = get(&app, &path, &revalidation).await;
        assert_eq!(again.status(), 304, "If-None-Match on {what}");
        assert_eq!(header(&again, "etag"), Some(etag.as_str()), "{what}");
        assert_eq!(header(&again, "access-control-allow-origin"), Some("*"));
        assert!(
            header(&again, "vary").is_some(),
            "Vary on the 304 of {what}"
        );
        assert!(again.bytes().await.expect("body").is_empty(), "{what}");
        tags.push((what, etag));
    }
    let distinct: BTreeSet<&String> = tags.iter().map(|(_, etag)| etag).collect();
    assert_eq!(
        distinct.len(),
        tags.len(),
        "one ETag per variant: {tags:#?}"
    );

    // Another variant's tag is not this variant's: a full answer.
    let json_tag = &tags[0].1;
    let response = get(
        &app,
        MAP,
        &[("accept", GEO_JSON), ("if-none-match", json_tag.as_str())],
    )
    .await;
    assert_eq!(response.status(), 200);
    assert_eq!(header(&response, "content-type"), Some(GEO_JSON));
}

#[airq_test::test]
async fn the_gzip_copy_of_the_geo_json_map_is_the_same_document() {
    let app = TestApp::spawn_with(|c| c.map_cache_ttl = Duration::from_secs(3600)).await;
    placed(&app, "Paris", 48.85, 2.35).await;
    let plain: Value = get(&app, MAP, &[("accept", GEO_JSON)])
        .await
        .json()
        .await
        .expect("json");
    let gzipped = get(
        &app,
        MAP,
        &[("accept", GEO_JSON), ("accept-encoding", "gzip")],
    )
    .await;
    assert_eq!(header(&gzipped, "content-type"), Some(GEO_JSON));
    assert_eq!(gunzipped_json(gzipped).await, plain);
}

#[airq_test::test]
async fn every_variant_is_cut_from_the_same_cached_entries() {
    let app = TestApp::spawn_with(|c| c.map_cache_ttl = Duration::from_secs(3600)).await;
    placed(&app, "first", 48.85, 2.35).await;
    assert_eq!(names(&app, MAP).await, set(&["first"]));

    // A device that appears after the entries were read shows in no variant until they expire,
    // also not in one rendered for the first time now.
    placed(&app, "second", 48.86, 2.36).await;
    assert_eq!(feature_names(&app, MAP).await, set(&["first"]));
    let boxed = format!("{MAP}?bbox=0,40,20,60");
    assert_eq!(names(&app, &boxed).await, set(&["first"]));
    assert_eq!(feature_names(&app, &boxed).await, set(&["first"]));
}

#[airq_test::test]
async fn every_variant_shows_new_entries_once_the_ttl_has_run_out() {
    let app = TestApp::spawn_with(|c| c.map_cache_ttl = Duration::from_millis(200)).await;
    placed(&app, "first", 48.85, 2.35).await;
    let boxed = format!("{MAP}?bbox=0,40,20,60");
    assert_eq!(feature_names(&app, &boxed).await, set(&["first"]));
    placed(&app, "second", 48.86, 2.36).await;
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let found = feature_names(&app, &boxed).await;
        if found == set(&["first", "second"]) {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the new device never appeared: {found:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

//! The public routes: GET /public/devices/{id}, its /current and /historical, and
//! GET /public/map/devices (visibility, CORS, caching headers, ETag / 304, the map cache).

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use chrono::{DateTime, TimeDelta, Utc};
use reqwest::{Method, Response};
use serde_json::{json, Value};

use crate::common::{fe, field_errors, located, measured, problem, sample, sample_with, TestApp};

/// A fixed instant the tests put the server clock at.
fn fixed_now() -> DateTime<Utc> {
    instant("2026-03-10T12:30:00Z")
}

fn instant(text: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(text)
        .expect("an RFC 3339 instant")
        .with_timezone(&Utc)
}

/// The instant of a timestamp field of a response.
fn instant_of(value: &Value) -> DateTime<Utc> {
    instant(value.as_str().expect("a timestamp string"))
}

/// Registers a device with the given visibility flags.
async fn device(app: &TestApp, owner: &str, name: &str, public: bool, location: bool) -> Value {
    app.register(
        owner,
        json!({
            "name": name,
            "is_public": public,
            "is_location_public": location,
            "is_outdoor": true
        }),
    )
    .await
}

fn id_of(device: &Value) -> &str {
    device["id"].as_str().expect("device id")
}

/// The three public routes of one device.
fn device_routes(id: &str) -> [String; 3] {
    [
        format!("/public/devices/{id}"),
        format!("/public/devices/{id}/current"),
        format!("/public/devices/{id}/historical?timeline=daily"),
    ]
}

/// Sorted member names of a JSON object.
fn fields(object: &Value) -> Vec<String> {
    let mut names: Vec<String> = object
        .as_object()
        .expect("a JSON object")
        .keys()
        .cloned()
        .collect();
    names.sort();
    names
}

/// `GET path` without credentials, with `If-None-Match: etag`.
async fn get_if_none_match(app: &TestApp, path: &str, etag: &str) -> Response {
    app.client
        .get(app.url(path))
        .header("if-none-match", etag)
        .send()
        .await
        .expect("request sent")
}

fn header<'r>(response: &'r Response, name: &str) -> Option<&'r str> {
    response
        .headers()
        .get(name)
        .map(|value| value.to_str().expect("an ASCII header value"))
}

fn etag_of(response: &Response) -> String {
    header(response, "etag").expect("an ETag header").to_owned()
}

/// Asserts the CORS headers every public answer carries: any origin, and the entity tag and the
/// request id readable by its scripts.
fn assert_cors(response: &Response, what: &str) {
    assert_eq!(
        header(response, "access-control-allow-origin"),
        Some("*"),
        "Access-Control-Allow-Origin on {what}"
    );
    let exposed = header(response, "access-control-expose-headers").unwrap_or_default();
    for name in ["etag", "x-request-id"] {
        assert!(
            exposed
                .split(',')
                .any(|exposed| exposed.trim().eq_ignore_ascii_case(name)),
            "Access-Control-Expose-Headers lists {name} on {what}: {exposed:?}"
        );
    }
}

/// The raw text and parsed body of a 404 problem.
async fn not_found(response: Response) -> (String, Value) {
    assert_eq!(response.status(), 404, "status");
    assert_eq!(
        header(&response, "content-type"),
        Some("application/problem+json"),
        "problem media type"
    );
    let text = response.text().await.expect("body");
    let body: Value = serde_json::from_str(&text).expect("problem json");
    assert_eq!(body["status"], 404);
    assert!(!body["title"].as_str().unwrap_or_default().is_empty());
    assert!(!body["detail"].as_str().unwrap_or_default().is_empty());
    (text, body)
}

fn without_instance(mut problem: Value) -> Value {
    problem
        .as_object_mut()
        .expect("a problem object")
        .remove("instance");
    problem
}

/// Asserts that `path_of(private)` and `path_of(unknown)` answer the same 404 apart from the
/// instance (which names the path).
async fn assert_same_404(app: &TestApp, private: &str, path_of: impl Fn(&str) -> String) {
    let unknown = uuid::Uuid::new_v4().to_string();
    let (private_text, private_body) = not_found(app.get_public(&path_of(private)).await).await;
    let (unknown_text, unknown_body) = not_found(app.get_public(&path_of(&unknown)).await).await;
    let private_path = format!("/api/v1{}", path_of(private));
    let unknown_path = format!("/api/v1{}", path_of(&unknown));
    assert_eq!(
        private_body["instance"],
        private_path.split('?').next().unwrap()
    );
    assert_eq!(
        unknown_body["instance"],
        unknown_path.split('?').next().unwrap()
    );
    assert_eq!(private_body["title"], unknown_body["title"], "title");
    assert_eq!(private_body["detail"], unknown_body["detail"], "detail");
    assert_eq!(
        without_instance(private_body),
        without_instance(unknown_body),
        "the problems apart from `instance`"
    );
    assert_eq!(
        private_text.replace(private, &unknown),
        unknown_text,
        "byte-identical bodies apart from the id in `instance`"
    );
}

// ---------------------------------------------------------------- GET /public/devices/{id}

#[airq_test::test]
async fn a_public_device_shows_exactly_the_public_view() {
    let app = TestApp::spawn().await;
    let registered = device(&app, "alice", "Balcony", true, true).await;
    let response = app
        .get_public(&format!("/public/devices/{}", id_of(&registered)))
        .await;
    assert_eq!(response.status(), 200);
    assert_eq!(header(&response, "content-type"), Some("application/json"));
    let body: Value = response.json().await.unwrap();
    assert_eq!(fields(&body), ["data"]);
    let data = &body["data"];
    assert_eq!(
        fields(data),
        [
            "created_at",
            "id",
            "is_outdoor",
            "is_public",
            "name",
            "updated_at"
        ]
    );
    assert_eq!(data["id"], registered["id"]);
    assert_eq!(data["name"], "Balcony");
    assert_eq!(data["is_outdoor"], true);
    assert_eq!(data["is_public"], true);
    assert_eq!(data["created_at"], registered["created_at"]);
    assert_eq!(data["updated_at"], registered["updated_at"]);
}

#[airq_test::test]
async fn a_private_device_and_an_unknown_id_get_the_same_404_on_the_device_route() {
    let app = TestApp::spawn().await;
    let private = device(&app, "alice", "Bedroom", false, true).await;
    assert_same_404(&app, id_of(&private), |id| format!("/public/devices/{id}")).await;
}

#[airq_test::test]
async fn a_path_id_that_is_not_a_uuid_is_422_in_path_on_every_public_device_route() {
    let app = TestApp::spawn().await;
    for path in device_routes("not-a-uuid") {
        let response = app.get_public(&path).await;
        assert_cors(&response, &path);
        let body = problem(response, 422).await;
        assert_eq!(
            field_errors(&body),
            [fe("id", "format", "path")],
            "GET {path}"
        );
    }
}

#[airq_test::test]
async fn making_a_device_private_hides_it_from_every_public_device_route_at_once() {
    let app = TestApp::spawn().await;
    let registered = device(&app, "alice", "Balcony", true, true).await;
    app.upload_ok(&registered, &located(sample(), 48.85, 2.35))
        .await;
    let id = id_of(&registered);
    for path in device_routes(id) {
        assert_eq!(app.get_public(&path).await.status(), 200, "GET {path}");
    }

    let response = app
        .send_json_as(
            "alice",
            Method::PATCH,
            &format!("/devices/{id}"),
            &json!({ "is_public": false }),
        )
        .await;
    assert_eq!(response.status(), 200, "PATCH is_public=false");

    for path in device_routes(id) {
        let response = app.get_public(&path).await;
        assert_cors(&response, &path);
        problem(response, 404).await;
    }
}

// ------------------------------------------------------ GET /public/devices/{id}/current

#[airq_test::test]
async fn public_current_returns_the_snapshot_of_a_public_device() {
    let app = TestApp::spawn().await;
    let now = fixed_now();
    app.clock.set(now);
    let registered = device(&app, "alice", "Balcony", true, true).await;
    let first = now - TimeDelta::minutes(10);
    let last = now - TimeDelta::minutes(5);
    app.upload_ok(
        &registered,
        &measured(located(sample_with(40, 10.0, 20.0), 48.85, 2.35), first),
    )
    .await;
    app.upload_ok(
        &registered,
        &measured(located(sample_with(50, 20.0, 22.0), 48.86, 2.36), last),
    )
    .await;
    let path = format!("/public/devices/{}/current", id_of(&registered));

    let response = app.get_public(&path).await;
    assert_eq!(response.status(), 200);
    let body: Value = response.json().await.unwrap();
    assert_eq!(fields(&body), ["data"]);
    let data = &body["data"];
    assert_eq!(data["aqi"], 45);
    assert_eq!(data["pm2_5"], 15.0);
    assert_eq!(data["temperature"], 21.0);
    assert_eq!(data["pm1_0"], 5.0);
    assert_eq!(data["pm10_0"], 15.0);
    assert_eq!(data["humidity"], 40.0);
    assert_eq!(data["heat_index"], 22.0);
    assert_eq!(data["sample_count"], 2);
    assert_eq!(data["status"], "online");
    assert_eq!(instant_of(&data["last_seen"]), last);
    assert_eq!(data["location"]["lat"], 48.86);
    assert_eq!(data["location"]["lon"], 2.36);
    assert_eq!(data["location"]["provider"], "phone-gps");
    assert_eq!(instant_of(&data["location"]["timestamp"]), last);

    let owner = app
        .data_as("alice", &format!("/devices/{}/current", id_of(&registered)))
        .await;
    assert_eq!(data, &owner, "with a public location, the owner's snapshot");

    // 21 minutes after the last sample the device is offline; the snapshot stays.
    app.clock.set(last + TimeDelta::minutes(21));
    let data = app.get_public(&path).await.json::<Value>().await.unwrap()["data"].clone();
    assert_eq!(data["status"], "offline");
    assert_eq!(data["sample_count"], 2);
    assert_eq!(instant_of(&data["last_seen"]), last);
}

#[airq_test::test]
async fn public_current_shows_the_location_only_when_it_is_public() {
    let app = TestApp::spawn().await;
    let registered = device(&app, "alice", "Balcony", true, false).await;
    app.upload_ok(&registered, &located(sample(), 48.85, 2.35))
        .await;
    let id = id_of(&registered);
    let path = format!("/public/devices/{id}/current");

    let data = app.get_public(&path).await.json::<Value>().await.unwrap()["data"].clone();
    assert!(
        data.as_object().unwrap().contains_key("location"),
        "the location member is present"
    );
    assert_eq!(data["location"], Value::Null, "location is not public");
    assert_eq!(data["sample_count"], 1);
    let owner = app
        .data_as("alice", &format!("/devices/{id}/current"))
        .await;
    assert_eq!(owner["location"]["lat"], 48.85, "the sample has a location");

    let response = app
        .send_json_as(
            "alice",
            Method::PATCH,
            &format!("/devices/{id}"),
            &json!({ "is_location_public": true }),
        )
        .await;
    assert_eq!(response.status(), 200);
    let data = app.get_public(&path).await.json::<Value>().await.unwrap()["data"].clone();
    assert_eq!(data["location"]["lat"], 48.85);
    assert_eq!(data["location"]["lon"], 2.35);
    assert_eq!(data["location"]["provider"], "phone-gps");
}

#[airq_test::test]
async fn public_current_is_404_for_a_public_device_that_never_reported() {
    let app = TestApp::spawn().await;
    let registered = device(&app, "alice", "Balcony", true, true).await;
    let path = format!("/public/devices/{}/current", id_of(&registered));
    let response = app.get_public(&path).await;
    assert_cors(&response, &path);
    let body = problem(response, 404).await;
    assert_eq!(body["instance"], format!("/api/v1{path}"));
}

#[airq_test::test]
async fn a_private_device_and_an_unknown_id_get_the_same_404_on_current() {
    let app = TestApp::spawn().await;
    let reported = device(&app, "alice", "Bedroom", false, true).await;
    app.upload_ok(&reported, &located(sample(), 48.85, 2.35))
        .await;
    let silent = device(&app, "alice", "Cellar", false, true).await;
    for private in [&reported, &silent] {
        assert_same_404(&app, id_of(private), |id| {
            format!("/public/devices/{id}/current")
        })
        .await;
    }
}

// --------------------------------------------------- GET /public/devices/{id}/historical

#[airq_test::test]
async fn public_historical_has_the_shape_of_the_owner_route() {
    let app = TestApp::spawn().await;
    let now = fixed_now();
    app.clock.set(now);
    let registered = device(&app, "alice", "Balcony", true, true).await;
    app.upload_ok(
        &registered,
        &measured(sample_with(30, 8.0, 18.0), instant("2026-03-10T10:20:00Z")),
    )
    .await;
    app.upload_ok(
        &registered,
        &measured(sample_with(60, 16.0, 20.0), instant("2026-03-10T12:10:00Z")),
    )
    .await;
    let id = id_of(&registered);

    let response = app
        .get_public(&format!("/public/devices/{id}/historical?timeline=daily"))
        .await;
    assert_eq!(response.status(), 200);
    assert_eq!(header(&response, "content-type"), Some("application/json"));
    let body: Value = response.json().await.unwrap();
    assert_eq!(fields(&body), ["data", "timeline"]);
    assert_eq!(body["timeline"], "daily");
    let points = body["data"].as_array().unwrap();
    assert_eq!(points.len(), 2, "{points:?}");
    assert_eq!(points[0]["label"], "10:00");
    assert_eq!(points[0]["metrics"]["aqi"], 30);
    assert_eq!(points[1]["label"], "12:00");
    assert_eq!(points[1]["metrics"]["pm2_5"], 16.0);

    let owner: Value = app
        .get_as("alice", &format!("/devices/{id}/historical?timeline=daily"))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(body, owner, "the owner route's body");
}

#[airq_test::test]
async fn public_historical_needs_a_valid_timeline_in_query() {
    let app = TestApp::spawn().await;
    let registered = device(&app, "alice", "Balcony", true, true).await;
    let id = id_of(&registered);
    for (query, code) in [("", "required"), ("?timeline=hourly", "enum")] {
        let path = format!("/public/devices/{id}/historical{query}");
        let response = app.get_public(&path).await;
        assert_cors(&response, &path);
        let body = problem(response, 422).await;
        assert_eq!(
            field_errors(&body),
            [fe("timeline", code, "query")],
            "GET {path}"
        );
    }
}

#[airq_test::test]
async fn a_private_device_and_an_unknown_id_get_the_same_404_on_historical() {
    let app = TestApp::spawn().await;
    let private = device(&app, "alice", "Bedroom", false, true).await;
    app.upload_ok(&private, &sample()).await;
    assert_same_404(&app, id_of(&private), |id| {
        format!("/public/devices/{id}/historical?timeline=daily")
    })
    .await;
}

// ------------------------------------------------------------- headers, ETag, 304

#[airq_test::test]
async fn every_public_answer_allows_any_origin_and_exposes_the_etag() {
    let app = TestApp::spawn().await;
    let registered = device(&app, "alice", "Balcony", true, true).await;
    app.upload_ok(&registered, &located(sample(), 48.85, 2.35))
        .await;
    let unknown = uuid::Uuid::new_v4().to_string();

    let mut ok_paths = device_routes(id_of(&registered)).to_vec();
    ok_paths.push("/public/map/devices".to_owned());
    for path in &ok_paths {
        let response = app.get_public(path).await;
        assert_eq!(response.status(), 200, "GET {path}");
        assert_cors(&response, path);
        assert!(
            !header(&response, "cache-control")
                .unwrap_or_default()
                .is_empty(),
            "Cache-Control on {path}"
        );
        assert!(!etag_of(&response).is_empty(), "a non-empty ETag on {path}");
    }
    for path in device_routes(&unknown) {
        let response = app.get_public(&path).await;
        assert_cors(&response, &path);
        problem(response, 404).await;
    }
}

#[airq_test::test]
async fn every_public_problem_allows_any_origin_and_exposes_the_request_id() {
    let app = TestApp::spawn().await;
    let silent = device(&app, "alice", "Silent", true, true).await;
    let private = device(&app, "alice", "Bedroom", false, true).await;
    let unknown = uuid::Uuid::new_v4().to_string();

    // 404: unknown, private, never reported, and no route at all under /public/.
    let mut not_found_paths = device_routes(&unknown).to_vec();
    not_found_paths.extend(device_routes(id_of(&private)));
    not_found_paths.push(format!("/public/devices/{}/current", id_of(&silent)));
    not_found_paths.push("/public/nothing-here".to_owned());
    not_found_paths.push(format!("/public/devices/{unknown}/elsewhere"));
    for path in &not_found_paths {
        let response = app.get_public(path).await;
        assert_cors(&response, path);
        problem(response, 404).await;
    }

    // 422: a malformed id, a missing or unknown timeline.
    let mut invalid_paths = device_routes("not-a-uuid").to_vec();
    invalid_paths.push(format!("/public/devices/{}/historical", id_of(&silent)));
    invalid_paths.push(format!(
        "/public/devices/{}/historical?timeline=hourly",
        id_of(&silent)
    ));
    for path in &invalid_paths {
        let response = app.get_public(path).await;
        assert_cors(&response, path);
        let body = problem(response, 422).await;
        assert_eq!(body["type"], "urn:airq:problem:validation", "GET {path}");
    }

    // 405: another method on a public route.
    for method in [Method::POST, Method::DELETE, Method::PUT] {
        let response = app
            .client
            .request(method.clone(), app.url("/public/map/devices"))
            .send()
            .await
            .expect("request sent");
        assert_cors(&response, &format!("{method} /public/map/devices"));
        problem(response, 405).await;
    }

    // The request id a widget reads is the one it sent.
    let response = app
        .client
        .get(app.url(&format!("/public/devices/{unknown}")))
        .header("origin", "https://widget.example")
        .header("x-request-id", "widget-404")
        .send()
        .await
        .expect("request sent");
    assert_cors(&response, "404 with a request id");
    assert_eq!(header(&response, "x-request-id"), Some("widget-404"));
    problem(response, 404).await;
}

#[airq_test::test]
async fn the_map_cache_control_has_a_max_age() {
    let app = TestApp::spawn_with(|c| c.map_cache_ttl = Duration::from_secs(3600)).await;
    let response = app.get_public("/public/map/devices").await;
    assert_eq!(response.status(), 200);
    let cache_control = header(&response, "cache-control").unwrap_or_default();
    assert!(cache_control.contains("max-age"), "{cache_control:?}");
}

#[airq_test::test]
async fn owner_routes_do_not_allow_other_origins() {
    let app = TestApp::spawn().await;
    let registered = device(&app, "alice", "Balcony", true, true).await;
    app.upload_ok(&registered, &located(sample(), 48.85, 2.35))
        .await;
    let id = id_of(&registered);
    for path in [
        "/devices".to_owned(),
        format!("/devices/{id}"),
        format!("/devices/{id}/current"),
        format!("/devices/{id}/historical?timeline=daily"),
        "/air-quality/current".to_owned(),
    ] {
        let response = app.get_as("alice", &path).await;
        assert_eq!(response.status(), 200, "GET {path}");
        assert_eq!(
            header(&response, "access-control-allow-origin"),
            None,
            "no Access-Control-Allow-Origin on {path}"
        );
    }
}

#[airq_test::test]
async fn if_none_match_with_the_etag_answers_304_without_a_body() {
    let app = TestApp::spawn().await;
    let registered = device(&app, "alice", "Balcony", true, true).await;
    app.upload_ok(&registered, &located(sample(), 48.85, 2.35))
        .await;
    let mut paths = device_routes(id_of(&registered)).to_vec();
    paths.push("/public/map/devices".to_owned());
    for path in &paths {
        let first = app.get_public(path).await;
        assert_eq!(first.status(), 200, "GET {path}");
        let etag = etag_of(&first);

        let again = get_if_none_match(&app, path, &etag).await;
        assert_eq!(again.status(), 304, "GET {path} with If-None-Match");
        assert_eq!(etag_of(&again), etag, "the same ETag on {path}");
        assert_cors(&again, path);
        assert!(
            again.bytes().await.unwrap().is_empty(),
            "an empty 304 body on {path}"
        );
    }
}

#[airq_test::test]
async fn if_none_match_with_another_etag_answers_200() {
    let app = TestApp::spawn().await;
    let registered = device(&app, "alice", "Balcony", true, true).await;
    app.upload_ok(&registered, &located(sample(), 48.85, 2.35))
        .await;
    let mut paths = device_routes(id_of(&registered)).to_vec();
    paths.push("/public/map/devices".to_owned());
    for path in &paths {
        let first = app.get_public(path).await;
        let etag = etag_of(&first);
        let body = first.bytes().await.unwrap();

        let other = get_if_none_match(&app, path, "\"0123456789abcdef\"").await;
        assert_eq!(other.status(), 200, "GET {path} with another ETag");
        assert_eq!(etag_of(&other), etag);
        assert_eq!(
            other.bytes().await.unwrap(),
            body,
            "the full body of {path}"
        );
    }
}

#[airq_test::test]
async fn a_new_upload_changes_the_etag_of_the_current_snapshot() {
    let app = TestApp::spawn().await;
    let now = fixed_now();
    app.clock.set(now);
    let registered = device(&app, "alice", "Balcony", true, true).await;
    app.upload_ok(&registered, &sample_with(40, 10.0, 20.0))
        .await;
    let path = format!("/public/devices/{}/current", id_of(&registered));
    let before = etag_of(&app.get_public(&path).await);

    app.clock.set(now + TimeDelta::minutes(1));
    app.upload_ok(&registered, &sample_with(60, 30.0, 24.0))
        .await;
    let response = get_if_none_match(&app, &path, &before).await;
    assert_eq!(response.status(), 200, "the old ETag no longer matches");
    assert_ne!(etag_of(&response), before, "a new ETag");
    let data = response.json::<Value>().await.unwrap()["data"].clone();
    assert_eq!(data["sample_count"], 2);
    assert_eq!(data["aqi"], 50);
}

// ------------------------------------------------------------- GET /public/map/devices

/// The map's entries, from one request.
async fn map_entries(app: &TestApp) -> Vec<Value> {
    let response = app.get_public("/public/map/devices").await;
    assert_eq!(response.status(), 200, "GET /public/map/devices");
    let body: Value = response.json().await.unwrap();
    assert_eq!(fields(&body), ["data"]);
    body["data"].as_array().expect("a data array").clone()
}

fn ids(entries: &[Value]) -> BTreeSet<String> {
    entries
        .iter()
        .map(|entry| entry["id"].as_str().expect("entry id").to_owned())
        .collect()
}

fn entry<'e>(entries: &'e [Value], device: &Value) -> &'e Value {
    entries
        .iter()
        .find(|entry| entry["id"] == device["id"])
        .unwrap_or_else(|| panic!("{} is on the map: {entries:?}", device["name"]))
}

#[airq_test::test]
async fn the_map_lists_public_devices_with_a_public_location_and_a_located_sample() {
    let app = TestApp::spawn().await;
    let alices = device(&app, "alice", "alice: on the map", true, true).await;
    app.upload_ok(&alices, &located(sample(), 48.85, 2.35))
        .await;
    let bobs = device(&app, "bob", "bob: on the map", true, true).await;
    app.upload_ok(&bobs, &located(sample(), 52.52, 13.40)).await;
    let hidden_location = device(&app, "alice", "location not public", true, false).await;
    app.upload_ok(&hidden_location, &located(sample(), 40.0, 3.0))
        .await;
    let never_located = device(&app, "alice", "never located", true, true).await;
    app.upload_ok(&never_located, &sample()).await;
    let private = device(&app, "carol", "private", false, true).await;
    app.upload_ok(&private, &located(sample(), 41.0, 2.0)).await;
    device(&app, "alice", "never reported", true, true).await;

    let entries = map_entries(&app).await;
    assert_eq!(
        ids(&entries),
        BTreeSet::from([id_of(&alices).to_owned(), id_of(&bobs).to_owned()]),
        "{entries:?}"
    );
}

#[airq_test::test]
async fn a_map_entry_has_exactly_the_map_fields() {
    let app = TestApp::spawn().await;
    let now = fixed_now();
    app.clock.set(now);
    let registered = app
        .register(
            "alice",
            json!({
                "name": "Garden",
                "is_public": true,
                "is_location_public": true,
                "is_outdoor": false
            }),
        )
        .await;
    app.upload_ok(
        &registered,
        &located(sample_with(77, 12.5, 19.25), 48.85, 2.35),
    )
    .await;

    let entries = map_entries(&app).await;
    assert_eq!(entries.len(), 1);
    let entry = &entries[0];
    assert_eq!(
        fields(entry),
        [
            "aqi",
            "id",
            "is_outdoor",
            "lat",
            "lon",
            "measured_at",
            "name",
            "pm2_5",
            "status",
            "temperature"
        ]
    );
    assert_eq!(entry["id"], registered["id"]);
    assert_eq!(entry["name"], "Garden");
    assert_eq!(entry["is_outdoor"], false);
    assert_eq!(entry["lat"], 48.85);
    assert_eq!(entry["lon"], 2.35);
    assert_eq!(entry["aqi"], 77);
    assert_eq!(entry["pm2_5"], 12.5);
    assert_eq!(entry["temperature"], 19.25);
    assert_eq!(instant_of(&entry["measured_at"]), now);
    assert_eq!(entry["status"], "online");
}

#[airq_test::test]
async fn a_map_entry_comes_from_the_latest_located_sample() {
    let app = TestApp::spawn().await;
    let now = fixed_now();
    app.clock.set(now);
    let registered = device(&app, "alice", "Balcony", true, true).await;
    let located_at = now - TimeDelta::minutes(10);
    app.upload_ok(
        &registered,
        &measured(located(sample_with(30, 7.0, 18.0), 48.85, 2.35), located_at),
    )
    .await;
    app.upload_ok(
        &registered,
        &measured(sample_with(90, 40.0, 25.0), now - TimeDelta::minutes(5)),
    )
    .await;

    let entries = map_entries(&app).await;
    let entry = entry(&entries, &registered);
    assert_eq!(entry["aqi"], 30);
    assert_eq!(entry["pm2_5"], 7.0);
    assert_eq!(entry["temperature"], 18.0);
    assert_eq!(entry["lat"], 48.85);
    assert_eq!(entry["lon"], 2.35);
    assert_eq!(instant_of(&entry["measured_at"]), located_at);
}

#[airq_test::test]
async fn an_older_located_sample_uploaded_later_does_not_replace_a_newer_one() {
    let app = TestApp::spawn().await;
    let now = fixed_now();
    app.clock.set(now);
    let registered = device(&app, "alice", "Balcony", true, true).await;
    let newer = now - TimeDelta::minutes(5);
    app.upload_ok(
        &registered,
        &measured(located(sample_with(55, 11.0, 21.0), 10.0, 20.0), newer),
    )
    .await;
    app.upload_ok(
        &registered,
        &measured(
            located(sample_with(99, 50.0, 30.0), 30.0, 40.0),
            now - TimeDelta::minutes(30),
        ),
    )
    .await;

    let entries = map_entries(&app).await;
    let entry = entry(&entries, &registered);
    assert_eq!(entry["lat"], 10.0);
    assert_eq!(entry["lon"], 20.0);
    assert_eq!(entry["aqi"], 55);
    assert_eq!(entry["pm2_5"], 11.0);
    assert_eq!(entry["temperature"], 21.0);
    assert_eq!(instant_of(&entry["measured_at"]), newer);
}

#[airq_test::test]
async fn the_map_status_follows_the_last_sample_of_any_kind() {
    let app = TestApp::spawn().await;
    let start = fixed_now();
    app.clock.set(start);
    let still_reporting = device(&app, "alice", "still reporting", true, true).await;
    let gone_quiet = device(&app, "alice", "gone quiet", true, true).await;
    app.upload_ok(&still_reporting, &located(sample(), 48.85, 2.35))
        .await;
    app.upload_ok(&gone_quiet, &located(sample(), 48.86, 2.36))
        .await;

    // Half an hour later only one of them reports again, without a location.
    app.clock.set(start + TimeDelta::minutes(30));
    app.upload_ok(&still_reporting, &sample()).await;

    let entries = map_entries(&app).await;
    let reporting = entry(&entries, &still_reporting);
    assert_eq!(reporting["status"], "online", "last sample 0 minutes ago");
    assert_eq!(
        instant_of(&reporting["measured_at"]),
        start,
        "values still from the located sample"
    );
    let quiet = entry(&entries, &gone_quiet);
    assert_eq!(quiet["status"], "offline", "last sample 30 minutes ago");
    assert_eq!(instant_of(&quiet["measured_at"]), start);
}

#[airq_test::test]
async fn the_map_is_served_from_the_cache_within_its_ttl() {
    let app = TestApp::spawn_with(|c| c.map_cache_ttl = Duration::from_secs(3600)).await;
    let first = device(&app, "alice", "first", true, true).await;
    app.upload_ok(&first, &located(sample(), 48.85, 2.35)).await;
    let response = app.get_public("/public/map/devices").await;
    assert_eq!(response.status(), 200);
    let etag = etag_of(&response);
    let body: Value = response.json().await.unwrap();
    assert_eq!(ids(body["data"].as_array().unwrap()).len(), 1);

    let second = device(&app, "bob", "second", true, true).await;
    app.upload_ok(&second, &located(sample(), 52.52, 13.40))
        .await;
    let response = app.get_public("/public/map/devices").await;
    assert_eq!(response.status(), 200);
    assert_eq!(etag_of(&response), etag, "the cached rendering");
    let cached: Value = response.json().await.unwrap();
    assert_eq!(cached, body, "the map has not changed yet");
}

#[airq_test::test]
async fn the_map_shows_new_devices_once_its_ttl_has_run_out() {
    let app = TestApp::spawn_with(|c| c.map_cache_ttl = Duration::from_millis(200)).await;
    assert!(map_entries(&app).await.is_empty(), "an empty map at first");

    let registered = device(&app, "alice", "newcomer", true, true).await;
    app.upload_ok(&registered, &located(sample(), 48.85, 2.35))
        .await;
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut entries = map_entries(&app).await;
    while entries.is_empty() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
        entries = map_entries(&app).await;
    }
    assert_eq!(
        ids(&entries),
        BTreeSet::from([id_of(&registered).to_owned()]),
        "the new device appears once the cached map expires"
    );
}

#[airq_test::test]
async fn a_device_made_private_leaves_the_map_once_its_ttl_has_run_out() {
    let app = TestApp::spawn_with(|c| c.map_cache_ttl = Duration::from_millis(200)).await;
    let registered = device(&app, "alice", "leaving", true, true).await;
    app.upload_ok(&registered, &located(sample(), 48.85, 2.35))
        .await;
    assert_eq!(map_entries(&app).await.len(), 1, "on the map at first");

    let response = app
        .send_json_as(
            "alice",
            Method::PATCH,
            &format!("/devices/{}", id_of(&registered)),
            &json!({ "is_public": false }),
        )
        .await;
    assert_eq!(response.status(), 200);
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut entries = map_entries(&app).await;
    while !entries.is_empty() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
        entries = map_entries(&app).await;
    }
    assert!(
        entries.is_empty(),
        "the private device left the map: {entries:?}"
    );
}

#[airq_test::test]
async fn if_none_match_accepts_a_list_and_a_weak_tag() {
    let app = TestApp::spawn().await;
    let registered = device(&app, "alice", "Balcony", true, true).await;
    let path = format!("/public/devices/{}", id_of(&registered));
    let etag = etag_of(&app.get_public(&path).await);
    for condition in [
        format!("\"other\", {etag}"),
        format!("W/{etag}"),
        "*".to_owned(),
    ] {
        let response = get_if_none_match(&app, &path, &condition).await;
        assert_eq!(response.status(), 304, "If-None-Match: {condition}");
        assert_eq!(etag_of(&response), etag);
    }
}

#[airq_test::test]
async fn public_historical_checks_the_query_before_the_device_exists() {
    let app = TestApp::spawn().await;
    let private = device(&app, "alice", "Bedroom", false, true).await;
    for id in [id_of(&private).to_owned(), uuid::Uuid::new_v4().to_string()] {
        let path = format!("/public/devices/{id}/historical?timeline=hourly");
        let body = problem(app.get_public(&path).await, 422).await;
        assert_eq!(field_errors(&body), [fe("timeline", "enum", "query")]);
    }
    let body = problem(
        app.get_public("/public/devices/not-a-uuid/historical")
            .await,
        422,
    )
    .await;
    assert_eq!(
        field_errors(&body),
        [
            fe("id", "format", "path"),
            fe("timeline", "required", "query")
        ],
        "every problem at once"
    );
}

/// An `OPTIONS` request as a browser sends it before a cross-origin `GET` with `If-None-Match`.
async fn preflight(app: &TestApp, path: &str) -> Response {
    app.client
        .request(Method::OPTIONS, app.url(path))
        .header("origin", "https://widget.example")
        .header("access-control-request-method", "GET")
        .header("access-control-request-headers", "if-none-match")
        .send()
        .await
        .expect("request sent")
}

#[airq_test::test]
async fn a_cors_preflight_on_a_public_route_allows_get_with_if_none_match() {
    let app = TestApp::spawn().await;
    let registered = device(&app, "alice", "Balcony", true, true).await;
    app.upload_ok(&registered, &located(sample(), 48.85, 2.35))
        .await;
    let private = device(&app, "alice", "Bedroom", false, true).await;
    let unknown = uuid::Uuid::new_v4().to_string();

    // The four public routes, whatever the id: the preflight does not look the device up.
    let mut paths = vec!["/public/map/devices".to_owned()];
    for id in [id_of(&registered), id_of(&private), unknown.as_str()] {
        for route in [
            format!("/public/devices/{id}"),
            format!("/public/devices/{id}/current"),
            format!("/public/devices/{id}/historical"),
        ] {
            paths.push(route);
        }
    }
    for path in &paths {
        let response = preflight(&app, path).await;
        assert_eq!(response.status(), 204, "OPTIONS {path}");
        assert_cors(&response, &format!("OPTIONS {path}"));
        assert_eq!(
            header(&response, "access-control-allow-methods"),
            Some("GET, OPTIONS"),
            "OPTIONS {path}"
        );
        assert_eq!(
            header(&response, "access-control-allow-headers")
                .map(str::to_ascii_lowercase)
                .as_deref(),
            Some("if-none-match"),
            "OPTIONS {path}"
        );
        assert_eq!(
            header(&response, "access-control-max-age"),
            Some("86400"),
            "OPTIONS {path}"
        );
        assert!(
            header(&response, "x-request-id").is_some(),
            "a request id on OPTIONS {path}"
        );
        assert!(
            response.bytes().await.expect("body").is_empty(),
            "an empty body on OPTIONS {path}"
        );
    }

    // A bare OPTIONS (no preflight headers) gets the same answer.
    let response = app
        .client
        .request(Method::OPTIONS, app.url("/public/map/devices"))
        .send()
        .await
        .expect("request sent");
    assert_eq!(response.status(), 204, "a bare OPTIONS");
    assert_eq!(
        header(&response, "access-control-allow-methods"),
        Some("GET, OPTIONS")
    );

    // Owner routes do not answer preflights, and do not allow other origins either.
    let id = id_of(&registered);
    for path in [
        "/devices".to_owned(),
        format!("/devices/{id}"),
        format!("/devices/{id}/rotate-key"),
        format!("/devices/{id}/current"),
        format!("/devices/{id}/historical"),
        "/data".to_owned(),
        "/air-quality/current".to_owned(),
        "/air-quality/historical".to_owned(),
        "/air-quality/custom".to_owned(),
    ] {
        let response = preflight(&app, &path).await;
        assert_eq!(
            header(&response, "access-control-allow-origin"),
            None,
            "no Access-Control-Allow-Origin on OPTIONS {path}"
        );
        assert_eq!(
            header(&response, "access-control-allow-methods"),
            None,
            "no Access-Control-Allow-Methods on OPTIONS {path}"
        );
        assert!(
            header(&response, "allow").is_some_and(|allow| !allow.contains("OPTIONS")),
            "Allow on OPTIONS {path}"
        );
        problem(response, 405).await;
    }
}

#[airq_test::test]
async fn the_map_is_gzip_encoded_for_clients_that_accept_it() {
    use std::io::Read as _;
    let app = TestApp::spawn().await;
    let device = app
        .register(
            "alice",
            json!({ "name": "Roof", "is_public": true, "is_location_public": true }),
        )
        .await;
    app.upload_ok(
        &device,
        &crate::common::located(crate::common::sample(), 52.5, 13.4),
    )
    .await;
    let plain = app.get_public("/public/map/devices").await;
    assert!(plain.headers().get("content-encoding").is_none());
    let plain_tag = plain.headers()["etag"].clone();
    let plain_body: Value = plain.json().await.unwrap();

    let gzipped = app
        .client
        .get(app.url("/public/map/devices"))
        .header("accept-encoding", "gzip, deflate, br")
        .send()
        .await
        .unwrap();
    assert_eq!(gzipped.status(), 200);
    assert_eq!(gzipped.headers()["content-encoding"], "gzip");
    assert_eq!(
        gzipped.headers()["vary"],
        "Accept, Accept-Encoding",
        "the map also comes as GeoJSON, chosen by Accept"
    );
    let gzip_tag = gzipped.headers()["etag"].clone();
    assert_ne!(gzip_tag, plain_tag, "each encoding has its own entity tag");
    let compressed = gzipped.bytes().await.unwrap();
    let mut text = String::new();
    flate2::read::GzDecoder::new(compressed.as_ref())
        .read_to_string(&mut text)
        .unwrap();
    assert_eq!(serde_json::from_str::<Value>(&text).unwrap(), plain_body);

    let refused = app
        .client
        .get(app.url("/public/map/devices"))
        .header("accept-encoding", "gzip;q=0, identity")
        .send()
        .await
        .unwrap();
    assert!(refused.headers().get("content-encoding").is_none());

    let revalidated = app
        .client
        .get(app.url("/public/map/devices"))
        .header("accept-encoding", "gzip")
        .header("if-none-match", gzip_tag.to_str().unwrap())
        .send()
        .await
        .unwrap();
    assert_eq!(revalidated.status(), 304);
}

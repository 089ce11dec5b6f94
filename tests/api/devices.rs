//! The device registry: POST/GET /devices, GET/PATCH/DELETE /devices/{id}, rotate-key.

use reqwest::Method;
use serde_json::{json, Value};

use crate::common::{fe, field_errors, problem, TestApp};

fn is_rfc3339(value: &Value) -> bool {
    value
        .as_str()
        .is_some_and(|text| chrono::DateTime::parse_from_rfc3339(text).is_ok())
}

#[airq_test::test]
async fn registration_returns_the_device_with_its_credentials() {
    let app = TestApp::spawn().await;
    let response = app
        .send_json_as(
            "alice",
            Method::POST,
            "/devices",
            &json!({ "name": "Balcony", "is_public": true, "is_outdoor": true }),
        )
        .await;
    assert_eq!(response.status(), 201);
    assert_eq!(response.headers()["content-type"], "application/json");
    let device = response.json::<Value>().await.unwrap()["data"].clone();
    assert!(uuid::Uuid::parse_str(device["id"].as_str().unwrap()).is_ok());
    let device_id = device["device_id"].as_str().unwrap();
    assert!(
        device_id.starts_with("dev_") && device_id.len() == 28,
        "{device_id}"
    );
    let key = device["device_key"].as_str().unwrap();
    assert!(key.starts_with("sk_") && key.len() == 46, "{key}");
    assert_eq!(device["name"], "Balcony");
    assert_eq!(device["is_public"], true);
    assert_eq!(device["is_location_public"], false);
    assert_eq!(device["is_outdoor"], true);
    assert!(is_rfc3339(&device["created_at"]));
    assert_eq!(device["created_at"], device["updated_at"]);
}

#[airq_test::test]
async fn the_list_never_shows_keys_and_is_ordered_by_creation() {
    let app = TestApp::spawn().await;
    let first = app.register_named("alice", "first").await;
    app.clock.advance(chrono::TimeDelta::seconds(1));
    let second = app.register_named("alice", "second").await;
    app.register_named("bob", "not alice's").await;

    let response = app.get_as("alice", "/devices").await;
    assert_eq!(response.status(), 200);
    let list = response.json::<Value>().await.unwrap()["data"].clone();
    let list = list.as_array().unwrap();
    assert_eq!(list.len(), 2);
    assert_eq!(list[0]["id"], first["id"]);
    assert_eq!(list[1]["id"], second["id"]);
    for device in list {
        assert!(device.get("device_key").is_none(), "no key in the list");
        let mut fields: Vec<_> = device.as_object().unwrap().keys().cloned().collect();
        fields.sort();
        assert_eq!(
            fields,
            [
                "created_at",
                "device_id",
                "id",
                "is_location_public",
                "is_outdoor",
                "is_public",
                "name",
                "updated_at"
            ]
        );
    }
}

#[airq_test::test]
async fn an_owner_without_devices_gets_an_empty_list() {
    let app = TestApp::spawn().await;
    let response = app.get_as("carol", "/devices").await;
    assert_eq!(response.status(), 200);
    assert_eq!(
        response.json::<Value>().await.unwrap(),
        json!({ "data": [] })
    );
}

#[airq_test::test]
async fn show_returns_the_device_without_its_key() {
    let app = TestApp::spawn().await;
    let device = app.register_named("alice", "Kitchen").await;
    let response = app
        .get_as(
            "alice",
            &format!("/devices/{}", device["id"].as_str().unwrap()),
        )
        .await;
    assert_eq!(response.status(), 200);
    let shown = response.json::<Value>().await.unwrap()["data"].clone();
    let mut expected = device.clone();
    expected.as_object_mut().unwrap().remove("device_key");
    assert_eq!(shown, expected);
}

#[airq_test::test]
async fn patch_changes_only_the_fields_it_names() {
    let app = TestApp::spawn().await;
    let device = app.register_named("alice", "Kitchen").await;
    let path = format!("/devices/{}", device["id"].as_str().unwrap());
    app.clock.advance(chrono::TimeDelta::seconds(5));
    let response = app
        .send_json_as(
            "alice",
            Method::PATCH,
            &path,
            &json!({ "is_public": true, "name": "Hall" }),
        )
        .await;
    assert_eq!(response.status(), 200);
    let patched = response.json::<Value>().await.unwrap()["data"].clone();
    assert_eq!(patched["name"], "Hall");
    assert_eq!(patched["is_public"], true);
    assert_eq!(patched["is_location_public"], false);
    assert_eq!(patched["is_outdoor"], false);
    assert!(patched.get("device_key").is_none());
    assert_eq!(patched["created_at"], device["created_at"]);
    assert_ne!(patched["updated_at"], device["updated_at"]);

    let shown = app
        .get_as("alice", &path)
        .await
        .json::<Value>()
        .await
        .unwrap()["data"]
        .clone();
    assert_eq!(shown, patched);
}

#[airq_test::test]
async fn patch_validates_every_field_at_once() {
    let app = TestApp::spawn().await;
    let device = app.register_named("alice", "Kitchen").await;
    let path = format!("/devices/{}", device["id"].as_str().unwrap());
    let response = app
        .send_json_as(
            "alice",
            Method::PATCH,
            &path,
            &json!({ "name": "", "is_public": "yes", "is_outdoor": 1 }),
        )
        .await;
    let body = problem(response, 422).await;
    assert_eq!(
        field_errors(&body),
        [
            fe("is_outdoor", "type", "body"),
            fe("is_public", "type", "body"),
            fe("name", "min_length", "body"),
        ]
    );
}

#[airq_test::test]
async fn rotation_issues_a_new_key_and_keeps_the_identity() {
    let app = TestApp::spawn().await;
    let device = app.register_named("alice", "Kitchen").await;
    let response = app
        .owner_request(
            Method::POST,
            &format!("/devices/{}/rotate-key", device["id"].as_str().unwrap()),
            "alice",
        )
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let rotated = response.json::<Value>().await.unwrap()["data"].clone();
    assert_eq!(rotated["id"], device["id"]);
    assert_eq!(rotated["device_id"], device["device_id"]);
    let key = rotated["device_key"].as_str().unwrap();
    assert!(key.starts_with("sk_") && key.len() == 46);
    assert_ne!(rotated["device_key"], device["device_key"]);
}

#[airq_test::test]
async fn deletion_answers_204_and_the_device_is_gone() {
    let app = TestApp::spawn().await;
    let device = app.register_named("alice", "Kitchen").await;
    let path = format!("/devices/{}", device["id"].as_str().unwrap());
    let response = app
        .owner_request(Method::DELETE, &path, "alice")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 204);
    assert!(response.bytes().await.unwrap().is_empty());

    problem(app.get_as("alice", &path).await, 404).await;
    let again = app
        .owner_request(Method::DELETE, &path, "alice")
        .send()
        .await
        .unwrap();
    problem(again, 404).await;
    let list = app
        .get_as("alice", "/devices")
        .await
        .json::<Value>()
        .await
        .unwrap();
    assert_eq!(list, json!({ "data": [] }));
}

#[airq_test::test]
async fn another_owner_gets_404_on_every_device_route() {
    let app = TestApp::spawn().await;
    let device = app.register_named("alice", "Kitchen").await;
    let id = device["id"].as_str().unwrap();
    let unknown = app
        .get_as("bob", &format!("/devices/{}", uuid::Uuid::new_v4()))
        .await;
    let unknown = problem(unknown, 404).await;

    let path = format!("/devices/{id}");
    let attempts = [
        app.get_as("bob", &path).await,
        app.send_json_as("bob", Method::PATCH, &path, &json!({ "name": "mine" }))
            .await,
        app.owner_request(Method::POST, &format!("{path}/rotate-key"), "bob")
            .send()
            .await
            .unwrap(),
        app.owner_request(Method::DELETE, &path, "bob")
            .send()
            .await
            .unwrap(),
    ];
    for response in attempts {
        let body = problem(response, 404).await;
        assert_eq!(
            body["detail"], unknown["detail"],
            "same body as an unknown id"
        );
    }
    let list = app
        .get_as("bob", "/devices")
        .await
        .json::<Value>()
        .await
        .unwrap();
    assert_eq!(list, json!({ "data": [] }));

    let still_there = app
        .get_as("alice", &path)
        .await
        .json::<Value>()
        .await
        .unwrap();
    assert_eq!(
        still_there["data"]["name"], "Kitchen",
        "bob's attempts changed nothing"
    );
}

#[airq_test::test]
async fn a_name_of_100_multibyte_characters_is_accepted_and_101_is_not() {
    let app = TestApp::spawn().await;
    let hundred = "é😀".repeat(50);
    let device = app.register("alice", json!({ "name": hundred })).await;
    assert_eq!(device["name"], hundred);

    let response = app
        .send_json_as(
            "alice",
            Method::POST,
            "/devices",
            &json!({ "name": format!("{hundred}x") }),
        )
        .await;
    let body = problem(response, 422).await;
    assert_eq!(field_errors(&body), [fe("name", "max_length", "body")]);
}

#[airq_test::test]
async fn registration_lists_every_field_problem_at_once() {
    let app = TestApp::spawn().await;
    let response = app
        .send_json_as(
            "alice",
            Method::POST,
            "/devices",
            &json!({ "is_public": "true", "is_location_public": null, "is_outdoor": [] }),
        )
        .await;
    let body = problem(response, 422).await;
    assert_eq!(body["type"], "urn:airq:problem:validation");
    assert_eq!(body["instance"], "/api/v1/devices");
    assert_eq!(
        field_errors(&body),
        [
            fe("is_outdoor", "type", "body"),
            fe("is_public", "type", "body"),
            fe("name", "required", "body"),
        ]
    );
}

#[airq_test::test]
async fn a_blank_non_string_or_reordering_name_is_refused() {
    let app = TestApp::spawn().await;
    for (name, code) in [
        (json!("   "), "min_length"),
        (json!(42), "type"),
        (json!("a\u{7}b"), "format"),
        (json!("\u{202e}ecived live"), "format"),
        (json!("Roof \u{2066}x\u{2069}"), "format"),
    ] {
        let response = app
            .send_json_as("alice", Method::POST, "/devices", &json!({ "name": name }))
            .await;
        let body = problem(response, 422).await;
        assert_eq!(
            field_errors(&body),
            [fe("name", code, "body")],
            "name {name}"
        );
    }
}

#[airq_test::test]
async fn a_body_that_is_not_an_object_is_a_validation_problem() {
    let app = TestApp::spawn().await;
    let response = app
        .send_json_as("alice", Method::POST, "/devices", &json!(["name"]))
        .await;
    let body = problem(response, 422).await;
    assert_eq!(field_errors(&body), [fe("$", "type", "body")]);
}

#[airq_test::test]
async fn a_path_id_that_is_not_a_uuid_is_422_in_path() {
    let app = TestApp::spawn().await;
    for (method, path) in [
        (Method::GET, "/devices/not-a-uuid"),
        (Method::PATCH, "/devices/not-a-uuid"),
        (Method::DELETE, "/devices/not-a-uuid"),
        (Method::POST, "/devices/not-a-uuid/rotate-key"),
    ] {
        let response = app
            .owner_request(method.clone(), path, "alice")
            .json(&json!({}))
            .send()
            .await
            .unwrap();
        let body = problem(response, 422).await;
        assert_eq!(
            field_errors(&body),
            [fe("id", "format", "path")],
            "{method} {path}"
        );
        assert_eq!(body["instance"], format!("/api/v1{path}"));
    }
}

#[airq_test::test]
async fn registry_routes_need_an_owner_token() {
    let app = TestApp::spawn().await;
    let id = uuid::Uuid::new_v4();
    let routes = [
        (Method::POST, "/devices".to_owned()),
        (Method::GET, "/devices".to_owned()),
        (Method::GET, format!("/devices/{id}")),
        (Method::PATCH, format!("/devices/{id}")),
        (Method::DELETE, format!("/devices/{id}")),
        (Method::POST, format!("/devices/{id}/rotate-key")),
    ];
    for (method, path) in routes {
        let response = app
            .client
            .request(method, app.url(&path))
            .send()
            .await
            .unwrap();
        assert_eq!(
            response.headers()["www-authenticate"],
            "Bearer realm=\"airq\""
        );
        problem(response, 401).await;
    }
}

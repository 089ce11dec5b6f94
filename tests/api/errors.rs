//! The error contract: RFC 9457 problems everywhere, in `docs/api.md`'s "Order of checks".

use bytes::Bytes;
use reqwest::Method;
use serde_json::{json, Value};

use crate::common::{fe, field_errors, problem, TestApp};

#[airq_test::test]
async fn an_unknown_route_is_a_404_problem() {
    let app = TestApp::spawn().await;
    for path in [
        "/nowhere",
        "/api/v1/nowhere",
        "/api/v1/devices/",
        "/api/v2/devices",
    ] {
        let response = app
            .client
            .get(format!("{}{path}", app.base))
            .send()
            .await
            .unwrap();
        let body = problem(response, 404).await;
        assert_eq!(body["type"], "about:blank");
        assert_eq!(body["instance"], path);
    }
}

#[airq_test::test]
async fn a_wrong_method_is_405_with_allow() {
    let app = TestApp::spawn().await;
    let response = app.client.put(app.url("/devices")).send().await.unwrap();
    assert_eq!(response.headers()["allow"], "GET, HEAD, POST");
    problem(response, 405).await;
    let response = app
        .client
        .get(app.url(&format!("/devices/{}/rotate-key", uuid::Uuid::new_v4())))
        .send()
        .await
        .unwrap();
    assert_eq!(response.headers()["allow"], "POST");
    problem(response, 405).await;
}

#[airq_test::test]
async fn the_instance_never_carries_the_query() {
    let app = TestApp::spawn().await;
    let response = app
        .client
        .get(app.url("/devices?token=secret"))
        .send()
        .await
        .unwrap();
    let body = problem(response, 401).await;
    assert_eq!(body["instance"], "/api/v1/devices");
}

#[airq_test::test]
async fn a_token_in_the_query_string_is_not_read() {
    let app = TestApp::spawn().await;
    let token = app.token("alice");
    for query in [format!("access_token={token}"), format!("token={token}")] {
        let response = app
            .client
            .get(app.url(&format!("/devices?{query}")))
            .send()
            .await
            .unwrap();
        problem(response, 401).await;
    }
}

#[airq_test::test]
async fn every_response_carries_a_request_id_and_echoes_a_plain_one() {
    let app = TestApp::spawn().await;
    let response = app.get_as("alice", "/devices").await;
    let generated = response.headers()["x-request-id"]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(!generated.is_empty());
    let response = app
        .client
        .get(app.url("/devices"))
        .header("x-request-id", "trace-42")
        .send()
        .await
        .unwrap();
    assert_eq!(response.headers()["x-request-id"], "trace-42");
    let response = app
        .client
        .get(app.url("/devices"))
        .header("x-request-id", "has spaces and \"quotes\"")
        .send()
        .await
        .unwrap();
    assert_ne!(
        response.headers()["x-request-id"],
        "has spaces and \"quotes\""
    );
}

async fn post_raw(
    app: &TestApp,
    content_type: Option<&str>,
    body: impl Into<reqwest::Body>,
) -> reqwest::Response {
    let mut request = app
        .owner_request(Method::POST, "/devices", "alice")
        .body(body);
    if let Some(content_type) = content_type {
        request = request.header("content-type", content_type);
    }
    request.send().await.unwrap()
}

#[airq_test::test]
async fn a_missing_or_other_content_type_is_415() {
    let app = TestApp::spawn().await;
    let body = r#"{"name":"x"}"#;
    problem(post_raw(&app, None, body).await, 415).await;
    problem(post_raw(&app, Some("text/plain"), body).await, 415).await;
    problem(post_raw(&app, Some("application/jsonx"), body).await, 415).await;
}

#[airq_test::test]
async fn a_charset_parameter_is_allowed() {
    let app = TestApp::spawn().await;
    let response = post_raw(
        &app,
        Some("application/json; charset=utf-8"),
        r#"{"name":"x"}"#,
    )
    .await;
    assert_eq!(response.status(), 201);
    let response = post_raw(&app, Some("Application/JSON"), r#"{"name":"y"}"#).await;
    assert_eq!(response.status(), 201);
}

#[airq_test::test]
async fn a_body_of_exactly_64_kib_is_read_and_one_byte_more_is_413() {
    let app = TestApp::spawn().await;
    let padding = |total: usize| {
        let prefix = r#"{"name":"edge","pad":""#;
        let suffix = r#""}"#;
        format!(
            "{prefix}{}{suffix}",
            "x".repeat(total - prefix.len() - suffix.len())
        )
    };
    let at_limit = padding(65_536);
    assert_eq!(at_limit.len(), 65_536);
    let response = post_raw(&app, Some("application/json"), at_limit).await;
    assert_eq!(response.status(), 201, "64 KiB exactly is accepted");
    let over = padding(65_537);
    let body = problem(post_raw(&app, Some("application/json"), over).await, 413).await;
    assert_eq!(body["type"], "about:blank");
}

#[airq_test::test]
async fn a_huge_streamed_body_without_length_is_413() {
    let app = TestApp::spawn().await;
    let chunks: Vec<Result<Bytes, std::io::Error>> = (0..100)
        .map(|_| Ok(Bytes::from(vec![b' '; 4096])))
        .collect();
    let stream = futures_util::stream::iter(chunks);
    let response = post_raw(
        &app,
        Some("application/json"),
        reqwest::Body::wrap_stream(stream),
    )
    .await;
    problem(response, 413).await;
}

#[airq_test::test]
async fn malformed_json_is_400_malformed_body() {
    let app = TestApp::spawn().await;
    for body in [
        r#"{"name": "x""#,
        "{name: 1}",
        "nope",
        r#"{"name":"x"} trailing"#,
    ] {
        let problem_body = problem(post_raw(&app, Some("application/json"), body).await, 400).await;
        assert_eq!(
            problem_body["type"], "urn:airq:problem:malformed-body",
            "{body}"
        );
    }
}

#[airq_test::test]
async fn an_empty_body_is_400() {
    let app = TestApp::spawn().await;
    let body = problem(post_raw(&app, Some("application/json"), "").await, 400).await;
    assert_eq!(body["type"], "urn:airq:problem:malformed-body");
}

#[airq_test::test]
async fn checks_run_in_the_documented_order() {
    let app = TestApp::spawn().await;
    // Credentials come before everything else.
    let response = app
        .client
        .patch(app.url("/devices/not-a-uuid"))
        .header("content-type", "text/plain")
        .body("{")
        .send()
        .await
        .unwrap();
    problem(response, 401).await;
    // Then the path, before the content type.
    let response = app
        .owner_request(Method::PATCH, "/devices/not-a-uuid", "alice")
        .header("content-type", "text/plain")
        .body("{")
        .send()
        .await
        .unwrap();
    let body = problem(response, 422).await;
    assert_eq!(field_errors(&body), [fe("id", "format", "path")]);
    // Then the content type, before the size.
    let big = "x".repeat(70_000);
    let path = format!("/devices/{}", uuid::Uuid::new_v4());
    let response = app
        .owner_request(Method::PATCH, &path, "alice")
        .header("content-type", "text/plain")
        .body(big.clone())
        .send()
        .await
        .unwrap();
    problem(response, 415).await;
    // Then the size, before the syntax.
    let response = app
        .owner_request(Method::PATCH, &path, "alice")
        .header("content-type", "application/json")
        .body(big)
        .send()
        .await
        .unwrap();
    problem(response, 413).await;
    // Then the syntax, before validation.
    let response = app
        .owner_request(Method::PATCH, &path, "alice")
        .header("content-type", "application/json")
        .body("{\"name\": ")
        .send()
        .await
        .unwrap();
    problem(response, 400).await;
    // Then validation, before existence.
    let response = app
        .send_json_as("alice", Method::PATCH, &path, &json!({ "name": 7 }))
        .await;
    problem(response, 422).await;
    // Existence last.
    let response = app
        .send_json_as("alice", Method::PATCH, &path, &json!({ "name": "ok" }))
        .await;
    problem(response, 404).await;
}

#[airq_test::test]
async fn health_and_readiness_answer() {
    let app = TestApp::spawn().await;
    let health = app
        .client
        .get(format!("{}/healthz", app.base))
        .send()
        .await
        .unwrap();
    assert_eq!(health.status(), 200);
    let ready = app
        .client
        .get(format!("{}/readyz", app.base))
        .send()
        .await
        .unwrap();
    assert_eq!(ready.status(), 200);
    assert_eq!(ready.json::<Value>().await.unwrap()["status"], "ready");
}

#[airq_test::test]
async fn a_malformed_body_is_described_without_parser_internals() {
    let app = TestApp::spawn().await;
    for body in [
        "{\"name\": ",
        "[1, 2",
        "{\"name\": tru}",
        "{\"a\": 1e}",
        "\"\\u12\"",
    ] {
        let response = app
            .owner_request(Method::POST, "/devices", "alice")
            .header("content-type", "application/json")
            .body(body)
            .send()
            .await
            .expect("request sent");
        let problem_body = problem(response, 400).await;
        let detail = problem_body["detail"].as_str().unwrap_or_default();
        assert!(
            detail.starts_with("the body is not valid JSON"),
            "{body}: {detail}"
        );
        for internal in ["Error", "Tape", "Internal", "("] {
            assert!(!detail.contains(internal), "{body}: {detail}");
        }
    }
}

#[airq_test::test]
async fn an_escaped_surrogate_without_its_other_half_is_400_not_a_character_never_sent() {
    let app = TestApp::spawn().await;
    let body = r#"{"name":"a\ud800b"}"#;
    let problem_body = problem(post_raw(&app, Some("application/json"), body).await, 400).await;
    assert_eq!(problem_body["type"], "urn:airq:problem:malformed-body");
    assert_eq!(
        problem_body["detail"],
        "the body is not valid JSON: an unpaired UTF-16 surrogate escape at line 1 column 11"
    );
}

#[airq_test::test]
async fn a_body_that_is_not_utf8_is_400_naming_where_it_stops_being_utf8() {
    let app = TestApp::spawn().await;
    let body = b"{\"name\":\"caf\xe9 and more\"}".to_vec();
    let problem_body = problem(post_raw(&app, Some("application/json"), body).await, 400).await;
    assert_eq!(
        problem_body["detail"],
        "the body is not valid JSON: a byte that is not UTF-8 at line 1 column 13"
    );
}

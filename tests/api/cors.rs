//! CORS for browser clients: owner routes answer the origins of `AIRQ_CORS_ORIGINS` (and only
//! them), the OpenAPI document answers any origin.

use clap::Parser as _;
use reqwest::{Method, Response};

use crate::common::TestApp;

const ALLOWED: &str = "https://app.example";
const OTHER: &str = "https://evil.example";

async fn with_origins() -> TestApp {
    TestApp::spawn_with(|config| {
        config.cors_origins =
            airq::config::CorsOrigins::parse(&format!("{ALLOWED}, http://localhost:5173"))
                .expect("valid origins");
    })
    .await
}

fn header(response: &Response, name: &str) -> Option<String> {
    response
        .headers()
        .get(name)
        .map(|value| value.to_str().expect("ascii").to_owned())
}

fn assert_no_cors(response: &Response, what: &str) {
    for name in [
        "access-control-allow-origin",
        "access-control-expose-headers",
        "access-control-allow-methods",
        "access-control-allow-headers",
        "access-control-max-age",
    ] {
        assert_eq!(header(response, name), None, "no {name} on {what}");
    }
}

fn assert_owner_cors(response: &Response, what: &str) {
    assert_eq!(
        header(response, "access-control-allow-origin").as_deref(),
        Some(ALLOWED),
        "Access-Control-Allow-Origin on {what}"
    );
    assert_eq!(
        header(response, "access-control-expose-headers").as_deref(),
        Some("ETag, X-Request-Id, Retry-After, Content-Disposition, Link"),
        "Access-Control-Expose-Headers on {what}"
    );
    assert!(
        header(response, "vary").is_some_and(|vary| vary.split(", ").any(|v| v == "Origin")),
        "Vary: Origin on {what}"
    );
}

/// An `OPTIONS` as a browser sends it before a cross-origin owner request, straight to the
/// server: the owner preflight is a deployment option the document describes in prose, not as an
/// operation, so the relay would take its 204 for drift.
async fn owner_preflight(app: &TestApp, path: &str, origin: &str) -> Response {
    app.client
        .request(
            Method::OPTIONS,
            format!("http://{}/api/v1{path}", app.server_addr),
        )
        .header("origin", origin)
        .header("access-control-request-method", "POST")
        .header(
            "access-control-request-headers",
            "authorization, content-type",
        )
        .send()
        .await
        .expect("request sent")
}

#[airq_test::test]
async fn a_listed_origin_reads_owner_answers_and_errors() {
    let app = with_origins().await;
    let registered = app.register_named("alice", "Balcony").await;
    let id = registered["id"].as_str().expect("an id").to_owned();
    for path in ["/devices".to_owned(), format!("/devices/{id}")] {
        let response = app
            .owner_request(Method::GET, &path, "alice")
            .header("origin", ALLOWED)
            .send()
            .await
            .expect("request sent");
        assert_eq!(response.status(), 200, "GET {path}");
        assert_owner_cors(&response, &format!("GET {path}"));
    }
    // A 401 (no token) is readable too, so the page can tell the user to sign in.
    let response = app
        .client
        .get(app.url("/devices"))
        .header("origin", ALLOWED)
        .send()
        .await
        .expect("request sent");
    assert_eq!(response.status(), 401);
    assert_owner_cors(&response, "401");
    // A 404 as well.
    let response = app
        .owner_request(Method::GET, "/devices/dev_nothere", "alice")
        .header("origin", ALLOWED)
        .send()
        .await
        .expect("request sent");
    assert!(response.status().is_client_error());
    assert_owner_cors(&response, "an owner error");
}

#[airq_test::test]
async fn an_unlisted_origin_gets_no_cors_headers() {
    let app = with_origins().await;
    for origin in [OTHER, "https://app.example:8443", "http://app.example"] {
        let response = app
            .owner_request(Method::GET, "/devices", "alice")
            .header("origin", origin)
            .send()
            .await
            .expect("request sent");
        assert_eq!(response.status(), 200);
        assert_no_cors(&response, origin);
        let preflight = owner_preflight(&app, "/devices", origin).await;
        assert_eq!(preflight.status(), 405, "OPTIONS from {origin}");
        assert_no_cors(&preflight, &format!("OPTIONS from {origin}"));
    }
    // No Origin at all: a same-origin or non-browser client.
    let response = app.get_as("alice", "/devices").await;
    assert_no_cors(&response, "no Origin");
    // Uploads are for devices, never for browsers.
    let preflight = owner_preflight(&app, "/data", ALLOWED).await;
    assert_eq!(preflight.status(), 405, "OPTIONS /data");
    assert_no_cors(&preflight, "OPTIONS /data");
}

#[airq_test::test]
async fn a_preflight_from_a_listed_origin_grants_the_routes_methods() {
    let app = with_origins().await;
    for (path, methods) in [
        ("/devices", "GET, HEAD, POST"),
        ("/devices/dev_x", "GET, HEAD, PATCH, DELETE"),
        ("/devices/dev_x/rotate-key", "POST"),
        ("/air-quality/current", "GET, HEAD"),
    ] {
        let response = owner_preflight(&app, path, ALLOWED).await;
        assert_eq!(response.status(), 204, "OPTIONS {path}");
        assert_eq!(
            header(&response, "access-control-allow-methods").as_deref(),
            Some(methods),
            "OPTIONS {path}"
        );
        let allowed_headers = header(&response, "access-control-allow-headers").unwrap_or_default();
        assert_eq!(
            allowed_headers, "Authorization, Content-Type, If-None-Match, X-Request-Id",
            "OPTIONS {path}"
        );
        assert_eq!(
            header(&response, "access-control-max-age").as_deref(),
            Some("600"),
            "OPTIONS {path}"
        );
        assert_owner_cors(&response, &format!("OPTIONS {path}"));
        assert!(header(&response, "x-request-id").is_some());
        assert!(response.bytes().await.expect("body").is_empty());
    }
    // The second listed origin too.
    let response = owner_preflight(&app, "/devices", "http://localhost:5173").await;
    assert_eq!(response.status(), 204);
    assert_eq!(
        header(&response, "access-control-allow-origin").as_deref(),
        Some("http://localhost:5173")
    );
}

#[airq_test::test]
async fn without_a_list_owner_routes_answer_no_origin() {
    let app = TestApp::spawn().await;
    let response = app
        .owner_request(Method::GET, "/devices", "alice")
        .header("origin", ALLOWED)
        .send()
        .await
        .expect("request sent");
    assert_eq!(response.status(), 200);
    assert_no_cors(&response, "GET /devices");
    assert_eq!(header(&response, "vary"), None);
    let response = app
        .client
        .request(Method::OPTIONS, app.url("/devices"))
        .header("origin", ALLOWED)
        .header("access-control-request-method", "POST")
        .send()
        .await
        .expect("request sent");
    assert_eq!(response.status(), 405);
    assert_no_cors(&response, "OPTIONS /devices");
}

#[airq_test::test]
async fn the_openapi_document_is_readable_from_any_origin() {
    for app in [TestApp::spawn().await, with_origins().await] {
        for origin in [None, Some(OTHER), Some(ALLOWED)] {
            let mut request = app.client.get(app.url("/openapi.json"));
            if let Some(origin) = origin {
                request = request.header("origin", origin);
            }
            let response = request.send().await.expect("request sent");
            assert_eq!(response.status(), 200);
            assert_eq!(
                header(&response, "access-control-allow-origin").as_deref(),
                Some("*"),
                "from {origin:?}"
            );
        }
        let response = app
            .client
            .request(Method::OPTIONS, app.url("/openapi.json"))
            .header("origin", OTHER)
            .header("access-control-request-method", "GET")
            .send()
            .await
            .expect("request sent");
        assert_eq!(response.status(), 204);
        assert_eq!(
            header(&response, "access-control-allow-origin").as_deref(),
            Some("*")
        );
        assert!(header(&response, "access-control-allow-methods")
            .is_some_and(|methods| methods.contains("GET")));
    }
}

#[airq_test::test]
fn a_malformed_origin_is_a_cli_error() {
    for bad in ["app.example", "https://app.example/", "ftp://app.example"] {
        assert!(
            airq::config::Cli::try_parse_from(["airq", "--cors-origins", bad]).is_err(),
            "{bad}"
        );
    }
    let cli = airq::config::Cli::try_parse_from([
        "airq",
        "--cors-origins",
        "https://app.example,http://localhost:5173",
    ])
    .expect("valid origins");
    assert_eq!(
        cli.serve.cors_origins.to_string(),
        "https://app.example,http://localhost:5173"
    );
}

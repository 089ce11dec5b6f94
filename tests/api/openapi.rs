//! The OpenAPI document: served as OpenAPI 3.1, internally consistent, and in step with the
//! router (every route documented, every documented route served).

use std::collections::BTreeSet;

use reqwest::Method;
use serde_json::Value;

use crate::common::TestApp;

/// Every route of the server's route table, as `(method, full path template)`; public routes and
/// the OpenAPI document also answer CORS preflights (`OPTIONS`) from any origin. `HEAD`, answered
/// on every `GET` route, is not an operation of its own in the document.
fn routes() -> BTreeSet<(String, String)> {
    let mut routes = BTreeSet::new();
    for route in airq::http::router::ROUTES {
        routes.insert((route.method.as_str().to_owned(), route.path.to_owned()));
        if airq::http::cors::answers_any_origin(route.path) {
            routes.insert(("OPTIONS".to_owned(), route.path.to_owned()));
        }
    }
    routes
}

/// The full path template of a documented path: its path item's `servers` override (service
/// routes at `/`, pages at `/` or `/devices`), else the document's first server (`/api/v1`),
/// followed by the key.
fn full_path(doc: &Value, key: &str) -> String {
    let server = doc["paths"][key]["servers"][0]["url"]
        .as_str()
        .or_else(|| doc["servers"][0]["url"].as_str())
        .expect("a server url");
    format!("{}{key}", server.trim_end_matches('/'))
}

/// The keys of a path item that are operations.
const METHODS: &[&str] = &[
    "get", "put", "post", "delete", "options", "head", "patch", "trace",
];

/// Fetches and parses the served document.
async fn document(app: &TestApp) -> Value {
    let response = app
        .client
        .get(app.url("/openapi.json"))
        .send()
        .await
        .expect("request sent");
    assert_eq!(response.status(), 200, "the document is served");
    response.json().await.expect("the document is JSON")
}

/// Every `(METHOD, path template)` of the document.
fn operations(doc: &Value) -> Vec<(String, String)> {
    let paths = doc["paths"].as_object().expect("paths is an object");
    let mut operations = Vec::new();
    for (path, item) in paths {
        let item = item.as_object().expect("a path item is an object");
        for method in METHODS {
            if item.contains_key(*method) {
                operations.push((method.to_uppercase(), path.clone()));
            }
        }
    }
    operations
}

/// Follows a local `$ref` (`#/...`) to the node it names.
fn resolve<'a>(doc: &'a Value, reference: &str) -> Option<&'a Value> {
    doc.pointer(reference.strip_prefix('#')?)
}

/// The node itself, or the node its `$ref` names.
fn dereference<'a>(doc: &'a Value, node: &'a Value) -> &'a Value {
    match node.get("$ref").and_then(Value::as_str) {
        Some(reference) => {
            resolve(doc, reference).unwrap_or_else(|| panic!("`{reference}` does not resolve"))
        }
        None => node,
    }
}

/// Every `$ref` value in the tree, with the JSON pointer of the object holding it.
fn references(node: &Value, at: &str, found: &mut Vec<(String, String)>) {
    match node {
        Value::Object(map) => {
            for (key, value) in map {
                if key == "$ref" {
                    if let Some(reference) = value.as_str() {
                        found.push((at.to_owned(), reference.to_owned()));
                    }
                }
                let escaped = key.replace('~', "~0").replace('/', "~1");
                references(value, &format!("{at}/{escaped}"), found);
            }
        }
        Value::Array(items) => {
            for (index, item) in items.iter().enumerate() {
                references(item, &format!("{at}/{index}"), found);
            }
        }
        _ => {}
    }
}

/// The absolute URL of a documented path: the path item's `servers` override when it has one,
/// else the document's first server.
fn url_of(app: &TestApp, doc: &Value, path: &str) -> String {
    let server = doc["paths"][path]["servers"][0]["url"]
        .as_str()
        .or_else(|| doc["servers"][0]["url"].as_str())
        .expect("a server url");
    format!(
        "{}{}{}",
        app.base,
        server.trim_end_matches('/'),
        path.replace("{id}", &uuid::Uuid::new_v4().to_string())
    )
}

#[airq_test::test]
async fn the_openapi_document_is_served_as_openapi_3_1() {
    let app = TestApp::spawn().await;
    let response = app
        .client
        .get(app.url("/openapi.json"))
        .send()
        .await
        .expect("request sent");
    assert_eq!(response.status(), 200);
    let content_type = response.headers()["content-type"]
        .to_str()
        .expect("content type")
        .to_owned();
    assert!(
        content_type.starts_with("application/json"),
        "content type {content_type}"
    );
    assert!(
        response.headers().contains_key("x-request-id"),
        "request id header"
    );
    let doc: Value = response.json().await.expect("the document is JSON");
    assert_eq!(doc["openapi"], "3.1.0");
    assert_eq!(doc["info"]["title"], "airq");
    assert_eq!(doc["info"]["version"], "1.0.0");
    // One server, every path absolute from it: generators that ignore path-level `servers`
    // (openapi-python-client, openapi-typescript) then call the right URLs.
    assert_eq!(doc["servers"].as_array().map(Vec::len), Some(1));
    assert_eq!(doc["servers"][0]["url"], "/");
    let paths = doc["paths"].as_object().expect("paths");
    assert!(paths.values().all(|item| item.get("servers").is_none()));
    assert!(paths.contains_key("/api/v1/devices") && paths.contains_key("/healthz"));
    for scheme in ["ownerToken", "deviceId", "deviceKey"] {
        assert!(
            doc["components"]["securitySchemes"][scheme].is_object(),
            "security scheme {scheme}"
        );
    }
}

#[airq_test::test]
async fn every_reference_in_the_openapi_document_resolves() {
    let app = TestApp::spawn().await;
    let doc = document(&app).await;
    let mut found = Vec::new();
    references(&doc, "", &mut found);
    assert!(!found.is_empty(), "the document uses $ref");
    let broken: Vec<String> = found
        .iter()
        .filter(|(_, reference)| {
            !reference.starts_with("#/components/")
                || !resolve(&doc, reference).is_some_and(Value::is_object)
        })
        .map(|(at, reference)| format!("{at}: {reference}"))
        .collect();
    assert!(broken.is_empty(), "unresolved references: {broken:#?}");
}

#[airq_test::test]
async fn every_route_of_the_server_is_documented_and_every_documented_route_exists() {
    let app = TestApp::spawn().await;
    let doc = document(&app).await;
    let documented: BTreeSet<(String, String)> = operations(&doc)
        .into_iter()
        .map(|(method, key)| (method, full_path(&doc, &key)))
        .collect();
    let known = routes();
    let undocumented: Vec<_> = known.difference(&documented).collect();
    assert!(
        undocumented.is_empty(),
        "routes missing from the document: {undocumented:?}"
    );
    let unknown: Vec<_> = documented.difference(&known).collect();
    assert!(
        unknown.is_empty(),
        "documented operations not in the route table: {unknown:?}"
    );

    let mut unserved = Vec::new();
    let mut undocumented_statuses = Vec::new();
    for (method, path) in &operations(&doc) {
        let url = url_of(&app, &doc, path);
        let documented_statuses = doc["paths"][path][method.to_lowercase()]["responses"]
            .as_object()
            .map(|responses| responses.keys().cloned().collect::<Vec<_>>())
            .unwrap_or_default();
        let method = Method::from_bytes(method.as_bytes()).expect("method");
        let mut request = app.client.request(method.clone(), &url);
        if method == Method::OPTIONS {
            // What a browser sends before a cross-origin GET with a conditional header: a
            // route that only answered this with 405 (or 404) would not be served.
            request = request
                .header("origin", "https://widget.example")
                .header("access-control-request-method", "GET")
                .header("access-control-request-headers", "if-none-match");
        }
        let response = request.send().await.expect("request sent");
        let status = response.status().as_u16();
        let body: Value = response.json().await.unwrap_or(Value::Null);
        let no_route = status == 404
            && body["detail"]
                .as_str()
                .is_some_and(|detail| detail.starts_with("no resource at"));
        if no_route || status == 405 {
            unserved.push(format!("{method} {path} ({url}) → {status}"));
        } else if !documented_statuses.contains(&status.to_string()) {
            undocumented_statuses.push(format!(
                "{method} {path} ({url}) → {status}, documented: {documented_statuses:?}"
            ));
        }
    }
    assert!(
        unserved.is_empty(),
        "documented routes the server does not serve: {unserved:#?}"
    );
    assert!(
        undocumented_statuses.is_empty(),
        "answers with a status the operation does not document: {undocumented_statuses:#?}"
    );
}

#[airq_test::test]
async fn every_operation_documents_its_problem_responses() {
    let app = TestApp::spawn().await;
    let doc = document(&app).await;
    let problem_ref = "#/components/schemas/Problem";
    assert!(
        resolve(&doc, problem_ref).is_some(),
        "the Problem schema exists"
    );
    let mut faults = Vec::new();
    for (method, path) in operations(&doc) {
        let operation = &doc["paths"][&path][method.to_lowercase()];
        let at = format!("{method} {path}");
        let responses = operation["responses"]
            .as_object()
            .unwrap_or_else(|| panic!("{at} has responses"));
        assert!(
            responses.keys().any(|status| status.starts_with('2')),
            "{at} documents a success"
        );
        let secured = operation["security"]
            .as_array()
            .is_some_and(|requirements| !requirements.is_empty());
        if secured && !responses.contains_key("401") {
            faults.push(format!("{at}: a secured operation without 401"));
        }
        for (status, response) in responses {
            let response = dereference(&doc, response);
            if response["headers"]["X-Request-Id"].is_null() {
                faults.push(format!("{at} {status}: no X-Request-Id header"));
            }
            if status.starts_with('2') {
                continue;
            }
            if status.starts_with('3') {
                // 304 Not Modified: no body, so no problem either.
                if response.get("content").is_some() {
                    faults.push(format!("{at} {status}: a redirection with a body"));
                }
                continue;
            }
            let schema = &response["content"]["application/problem+json"]["schema"];
            if schema["$ref"] != problem_ref {
                faults.push(format!(
                    "{at} {status}: not an application/problem+json Problem"
                ));
            }
            if status == "401" && response["headers"]["WWW-Authenticate"].is_null() {
                faults.push(format!("{at} 401: no WWW-Authenticate header"));
            }
        }
    }
    assert!(faults.is_empty(), "{faults:#?}");
}

/// The CORS headers the server adds to every answer of a path under `/api/v1/public/` (and to the
/// OpenAPI document's).
const PUBLIC_CORS_HEADERS: &[&str] = &[
    "Access-Control-Allow-Origin",
    "Access-Control-Expose-Headers",
];

/// The headers of a CORS preflight answer, besides [`PUBLIC_CORS_HEADERS`].
const PREFLIGHT_HEADERS: &[&str] = &[
    "Access-Control-Allow-Methods",
    "Access-Control-Allow-Headers",
    "Access-Control-Max-Age",
];

#[airq_test::test]
async fn every_answer_of_a_public_route_documents_its_cors_headers() {
    let app = TestApp::spawn().await;
    let doc = document(&app).await;
    let mut faults = Vec::new();
    let mut preflights = 0;
    for (method, path) in operations(&doc) {
        // The OpenAPI document is readable from any origin too (hosted Swagger UI, Redoc).
        let public = path.starts_with("/api/v1/public/") || path == "/api/v1/openapi.json";
        let operation = &doc["paths"][&path][method.to_lowercase()];
        let responses = operation["responses"]
            .as_object()
            .unwrap_or_else(|| panic!("{method} {path} has responses"));
        if method == "OPTIONS" {
            preflights += 1;
            if !public {
                faults.push(format!("OPTIONS {path}: a preflight on a non-public route"));
            }
            let statuses: Vec<&String> = responses.keys().collect();
            if statuses != ["204", "414"] {
                faults.push(format!(
                    "OPTIONS {path}: a preflight answers 204, or 414 for an over-long target, \
                     documented {statuses:?}"
                ));
            }
        }
        for (status, response) in responses {
            let headers = &dereference(&doc, response)["headers"];
            for name in PUBLIC_CORS_HEADERS {
                let documented = !headers[*name].is_null();
                if public && !documented {
                    faults.push(format!("{method} {path} {status}: no {name} header"));
                }
                if !public && documented {
                    faults.push(format!(
                        "{method} {path} {status}: {name} on a route that is not public"
                    ));
                }
            }
            if method == "OPTIONS" && status == "204" {
                for name in PREFLIGHT_HEADERS {
                    if headers[*name].is_null() {
                        faults.push(format!("{method} {path} {status}: no {name} header"));
                    }
                }
            }
        }
    }
    assert_eq!(
        preflights, 8,
        "the seven public routes and the OpenAPI document document their preflight"
    );
    assert!(faults.is_empty(), "{faults:#?}");

    let headers = &doc["components"]["headers"];
    assert_eq!(
        headers["Access-Control-Allow-Origin"]["schema"]["const"],
        "*"
    );
    assert_eq!(
        headers["Access-Control-Expose-Headers"]["schema"]["const"],
        "ETag, X-Request-Id"
    );
    assert_eq!(
        headers["Access-Control-Allow-Methods"]["schema"]["const"],
        "GET, OPTIONS"
    );
    assert_eq!(
        headers["Access-Control-Allow-Headers"]["schema"]["const"],
        "If-None-Match"
    );
    assert_eq!(headers["Access-Control-Max-Age"]["schema"]["const"], 86400);
}

#[airq_test::test]
async fn the_documented_upload_bounds_are_the_servers() {
    use airq::domain::reading::{MAX_AQI, MAX_PM, MAX_TEMPERATURE};

    let app = TestApp::spawn().await;
    let doc = document(&app).await;
    let schemas = &doc["components"]["schemas"];
    let bounds = |schema: &str, field: &str| {
        let property = &schemas[schema]["properties"][field];
        (property["minimum"].as_f64(), property["maximum"].as_f64())
    };
    assert_eq!(
        schemas["SensorReading"]["properties"]["aqi"]["type"],
        "integer"
    );
    assert_eq!(
        bounds("SensorReading", "aqi"),
        (Some(0.0), Some(MAX_AQI as f64))
    );
    for field in ["pm1_0", "pm2_5", "pm10_0"] {
        assert_eq!(
            bounds("PmsData", field),
            (Some(0.0), Some(MAX_PM)),
            "{field}"
        );
    }
    for field in ["temperature", "heat_index"] {
        assert_eq!(
            bounds("TemperatureData", field),
            (Some(-MAX_TEMPERATURE), Some(MAX_TEMPERATURE)),
            "{field}"
        );
    }
    assert_eq!(
        bounds("TemperatureData", "humidity"),
        (Some(0.0), Some(100.0))
    );
    assert_eq!(bounds("ReadingLocation", "lat"), (Some(-90.0), Some(90.0)));
    assert_eq!(
        bounds("ReadingLocation", "lon"),
        (Some(-180.0), Some(180.0))
    );
}

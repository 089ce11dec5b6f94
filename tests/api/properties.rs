//! Properties of the whole server: whatever a client sends as an upload or batch body, a query
//! string or a credential header, the answer is a 2xx or a 4xx problem, never a 5xx and never a
//! dropped connection (a panic would be a 500, a crash a refused connection).
//!
//! Inputs come from `proptest` strategies; each property sends 200 of them over HTTP to one real
//! server, through the relay that checks every answer against the OpenAPI document. Proptest's
//! runner is synchronous, so it runs on a blocking thread that drives each request on the test's
//! runtime; a failing input is shrunk as usual and reported with the answer it got.

use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use reqwest::{Method, RequestBuilder};
use serde_json::{json, Value};

use crate::common::{sample, TestApp};

/// Cases per property.
const CASES: u32 = 200;

/// Checks `CASES` inputs of the strategy `inputs` makes, each turned into a request by `request`
/// (the strategy is made on the runner's thread: proptest's boxed strategies stay on theirs).
async fn holds<S>(
    inputs: impl FnOnce() -> S + Send + 'static,
    request: impl Fn(&S::Value) -> RequestBuilder + Send + 'static,
) where
    S: Strategy,
{
    let runtime = tokio::runtime::Handle::current();
    let outcome = tokio::task::spawn_blocking(move || {
        let strategy = inputs();
        let mut runner = TestRunner::new(Config {
            cases: CASES,
            failure_persistence: None,
            ..Config::default()
        });
        runner
            .run(&strategy, |input| {
                runtime.block_on(async {
                    let response = request(&input)
                        .send()
                        .await
                        .map_err(|error| TestCaseError::fail(format!("no answer: {error}")))?;
                    answered_properly(response).await
                })
            })
            .map_err(|failure| failure.to_string())
    })
    .await
    .expect("the property runner ends");
    if let Err(failure) = outcome {
        panic!("{failure}");
    }
}

/// A 2xx, or a 4xx problem document.
async fn answered_properly(response: reqwest::Response) -> Result<(), TestCaseError> {
    let status = response.status();
    if status.is_success() {
        return Ok(());
    }
    let media_type = response
        .headers()
        .get("content-type")
        .and_then(|value| value.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    let body = response.text().await.unwrap_or_default();
    prop_assert!(status.is_client_error(), "{status}: {body}");
    prop_assert_eq!(media_type.as_str(), "application/problem+json", "{}", body);
    let problem: Value = serde_json::from_str(&body)
        .map_err(|error| TestCaseError::fail(format!("not JSON ({error}): {body}")))?;
    prop_assert_eq!(&problem["status"], &json!(status.as_u16()));
    Ok(())
}

/// Any JSON value, nested a little.
fn any_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<f64>().prop_map(Value::from),
        ".{0,20}".prop_map(Value::from),
    ];
    leaf.prop_recursive(3, 24, 5, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..5).prop_map(Value::from),
            proptest::collection::btree_map("[a-z_0-9]{0,10}", inner, 0..5)
                .prop_map(|map| Value::Object(map.into_iter().collect())),
        ]
    })
}

/// A valid upload with some members replaced, removed or added.
fn edited_reading() -> impl Strategy<Value = Value> {
    let paths = vec![
        "/aqi",
        "/pms_data",
        "/pms_data/pm1_0",
        "/pms_data/provider",
        "/temperature_data/temperature",
        "/temperature_data/humidity",
        "/location",
        "/measured_at",
        "/unknown",
    ];
    let edit = (
        proptest::sample::select(paths),
        proptest::option::of(any_json()),
    );
    proptest::collection::vec(edit, 0..4).prop_map(|edits| {
        let mut reading = sample();
        for (path, replacement) in edits {
            let (parent, key) = path.rsplit_once('/').unwrap_or(("", path));
            if let Some(Value::Object(object)) = reading.pointer_mut(parent) {
                match replacement {
                    Some(value) => object.insert(key.to_owned(), value),
                    None => object.remove(key),
                };
            }
        }
        reading
    })
}

/// Body text: arbitrary bytes, nesting of any depth, arbitrary JSON, edited readings (valid ones
/// included), and readings whose text is cut or spliced.
fn body_text<S>(reading: impl Fn() -> S) -> impl Strategy<Value = Vec<u8>>
where
    S: Strategy<Value = Value> + 'static,
{
    prop_oneof![
        proptest::collection::vec(any::<u8>(), 0..200),
        (1usize..30_000)
            .prop_map(|depth| format!("{}{}", "[".repeat(depth), "]".repeat(depth)).into_bytes()),
        any_json().prop_map(|value| value.to_string().into_bytes()),
        reading().prop_map(|value| value.to_string().into_bytes()),
        (reading(), any::<prop::sample::Index>(), ".{0,8}").prop_map(|(value, at, splice)| {
            let text = value.to_string();
            let at = at.index(text.len() + 1);
            let cut = text.get(..at).unwrap_or(&text);
            format!("{cut}{splice}").into_bytes()
        }),
    ]
}

/// What an upload property needs, owned, to build its requests on the runner's thread.
struct Uploads {
    client: reqwest::Client,
    url: String,
    device: Value,
}

impl Uploads {
    async fn new(app: &TestApp, path: &str) -> Self {
        Self {
            client: app.client.clone(),
            url: app.url(path),
            device: app.register_named("alice", "fuzzed").await,
        }
    }

    fn post(&self, body: &[u8]) -> RequestBuilder {
        self.client
            .post(&self.url)
            .header(
                "x-device-id",
                self.device["device_id"].as_str().unwrap_or_default(),
            )
            .header(
                "x-device-key",
                self.device["device_key"].as_str().unwrap_or_default(),
            )
            .header("content-type", "application/json")
            .body(body.to_vec())
    }
}

#[airq_test::test]
async fn any_upload_body_is_stored_or_refused_with_a_4xx_problem() {
    let app = TestApp::spawn().await;
    let uploads = Uploads::new(&app, "/data").await;
    holds(|| body_text(edited_reading), move |body| uploads.post(body)).await;
}

#[airq_test::test]
async fn any_batch_body_is_stored_or_refused_with_a_4xx_problem() {
    let app = TestApp::spawn().await;
    let uploads = Uploads::new(&app, "/data/batch").await;
    let batch = || {
        proptest::collection::vec(edited_reading(), 0..4)
            .prop_map(|readings| json!({ "readings": readings }))
    };
    holds(move || body_text(batch), move |body| uploads.post(body)).await;
}

/// Query strings: arbitrary text, and the query parameters' own names with arbitrary, nearly
/// valid or valid values.
fn query() -> impl Strategy<Value = String> {
    let name = proptest::sample::select(vec![
        "start_date",
        "end_date",
        "interval",
        "tz",
        "timeline",
        "start",
        "end",
        "bbox",
        "limit",
        "cursor",
    ]);
    let value = prop_oneof![
        ".{0,16}",
        "[0-9:TZ+ .,/-]{0,26}",
        proptest::sample::select(vec![
            "2026-11-21",
            "2026-11-01",
            "2026-11-21T00:00:00Z",
            "2026-11-01T00:00:00+01:00",
            "Europe/Berlin",
            "Asia/Kathmandu",
            "daily",
            "yearly",
            "hour",
            "month",
            "-10.5,35,30,60",
            "170,-50,-170,-10",
            "1",
            "1000",
            "1001",
            "0",
        ])
        .prop_map(str::to_owned),
    ];
    prop_oneof![
        "[ -~]{0,40}",
        proptest::collection::vec((name, value), 0..6).prop_map(|pairs| {
            let mut query = form_urlencoded::Serializer::new(String::new());
            for (name, value) in pairs {
                query.append_pair(name, &value);
            }
            query.finish()
        }),
    ]
}

#[airq_test::test]
async fn any_query_of_a_route_that_reads_its_query_is_answered_or_refused_with_a_4xx_problem() {
    let app = TestApp::spawn().await;
    let device = app
        .register(
            "alice",
            json!({ "name": "queried", "is_public": true, "is_location_public": true }),
        )
        .await;
    app.upload_ok(&device, &crate::common::located(sample(), 52.5, 13.4))
        .await;
    let id = device["id"].as_str().expect("id").to_owned();
    let routes = vec![
        "/devices".to_owned(),
        format!("/devices/{id}/historical"),
        format!("/devices/{id}/readings"),
        "/air-quality/historical".to_owned(),
        "/air-quality/custom".to_owned(),
        format!("/public/devices/{id}/historical"),
        format!("/public/devices/{id}/readings"),
        "/public/map/devices".to_owned(),
    ];
    let (client, base, token) = (app.client.clone(), app.url(""), app.token("alice"));
    let cases = move || (proptest::sample::select(routes), query());
    holds(cases, move |(route, query)| {
        client
            .get(format!("{base}{route}?{query}"))
            .bearer_auth(&token)
    })
    .await;
}

/// Header values a client can send: visible ASCII, spaces and tabs, and bytes past ASCII.
fn header_value() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        proptest::collection::vec(prop_oneof![0x20u8..0x7f, Just(b'\t'), 0x80u8..=0xff], 0..80),
        "(Bearer|bearer|Basic|BEARER)( {0,2})[A-Za-z0-9._~+/=-]{0,60}".prop_map(String::into_bytes),
        "(dev|sk)_[A-Za-z0-9_-]{0,50}".prop_map(String::into_bytes),
    ]
}

#[airq_test::test]
async fn any_credential_headers_are_accepted_or_refused_with_a_4xx_problem() {
    let app = TestApp::spawn().await;
    let device = app.register_named("alice", "guarded").await;
    let key = device["device_key"]
        .as_str()
        .expect("key")
        .as_bytes()
        .to_vec();
    let id = device["device_id"]
        .as_str()
        .expect("device id")
        .as_bytes()
        .to_vec();
    let (client, devices, data) = (app.client.clone(), app.url("/devices"), app.url("/data"));
    let body = sample().to_string();
    let credentials = move || {
        (
            proptest::option::of(header_value()),
            prop_oneof![Just(id), header_value()],
            prop_oneof![Just(key), header_value()],
            any::<bool>(),
        )
    };
    holds(
        credentials,
        move |(authorization, device_id, device_key, owner_route)| {
            let header = |bytes: &[u8]| {
                reqwest::header::HeaderValue::from_bytes(bytes)
                    .unwrap_or_else(|_| reqwest::header::HeaderValue::from_static("invalid"))
            };
            let request = if *owner_route {
                client.request(Method::GET, &devices)
            } else {
                client
                    .post(&data)
                    .header("x-device-id", header(device_id))
                    .header("x-device-key", header(device_key))
                    .header("content-type", "application/json")
                    .body(body.clone())
            };
            match authorization {
                Some(value) => request.header("authorization", header(value)),
                None => request,
            }
        },
    )
    .await;
}

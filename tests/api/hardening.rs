//! Slow and hostile clients: a body that trickles in, a shutdown that clients try to hold open,
//! oversized header blocks, more connections than allowed, and tokens at the edges of their
//! validity. Clients here speak raw HTTP/1.1 over TCP where a polite client library would not
//! misbehave the way these tests need.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use airq::config::OwnerAuth;
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpStream;

use crate::common::{fe, field_errors, problem, sample, TestApp};

/// Guard against a hang: far longer than anything below should take.
const GUARD: Duration = Duration::from_secs(10);

// ---------------------------------------------------------------------------------------------
// Raw HTTP helpers
// ---------------------------------------------------------------------------------------------

/// A TCP connection to the server itself (not through the test relay, which would buffer what
/// these tests send slowly or oversized).
async fn connect(app: &TestApp) -> TcpStream {
    TcpStream::connect(app.server_addr)
        .await
        .expect("connected")
}

/// An answer read off the wire.
#[derive(Debug)]
struct RawResponse {
    status: u16,
    /// Header lines, names lowercased.
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl RawResponse {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(key, _)| key == name)
            .map(|(_, value)| value.as_str())
    }

    fn json(&self) -> Value {
        serde_json::from_slice(&self.body).expect("a JSON body")
    }
}

/// Reads one response (head, then a `Content-Length` body) from `stream`.
async fn read_response(stream: &mut TcpStream) -> RawResponse {
    let mut buffer = Vec::new();
    let head_end = loop {
        if let Some(at) = buffer.windows(4).position(|window| window == b"\r\n\r\n") {
            break at + 4;
        }
        let mut chunk = [0u8; 4096];
        let read = stream.read(&mut chunk).await.expect("read");
        assert!(read > 0, "the connection closed before a response head");
        buffer.extend_from_slice(&chunk[..read]);
    };
    let head = String::from_utf8(buffer[..head_end].to_vec()).expect("ASCII head");
    let mut lines = head.split("\r\n");
    let status = lines
        .next()
        .and_then(|line| line.split(' ').nth(1))
        .and_then(|code| code.parse().ok())
        .expect("a status line");
    let headers: Vec<(String, String)> = lines
        .filter_map(|line| line.split_once(':'))
        .map(|(name, value)| (name.trim().to_ascii_lowercase(), value.trim().to_owned()))
        .collect();
    let length: usize = headers
        .iter()
        .find(|(name, _)| name == "content-length")
        .map_or(0, |(_, value)| value.parse().expect("a length"));
    let mut body = buffer[head_end..].to_vec();
    while body.len() < length {
        let mut chunk = [0u8; 4096];
        let read = stream.read(&mut chunk).await.expect("read");
        assert!(read > 0, "the connection closed inside the body");
        body.extend_from_slice(&chunk[..read]);
    }
    body.truncate(length);
    RawResponse {
        status,
        headers,
        body,
    }
}

/// Sends `head` (without the blank line) and the first `body` bytes, nothing more.
async fn send_partial(stream: &mut TcpStream, head: &str, body: &[u8]) {
    stream
        .write_all(format!("{head}\r\n\r\n").as_bytes())
        .await
        .expect("head sent");
    stream.write_all(body).await.expect("body start sent");
}

/// The head of `POST /api/v1/devices` as `token`'s owner announcing a 100-byte JSON body.
fn registration_head(token: &str) -> String {
    format!(
        "POST /api/v1/devices HTTP/1.1\r\nHost: airq\r\nAuthorization: Bearer {token}\r\n\
         Content-Type: application/json\r\nContent-Length: 100"
    )
}

// ---------------------------------------------------------------------------------------------
// Slow bodies
// ---------------------------------------------------------------------------------------------

#[airq_test::test]
async fn a_body_that_stalls_is_cut_off_with_408() {
    let deadline = Duration::from_millis(300);
    let app = TestApp::spawn_with(|c| c.body_timeout = deadline).await;
    let mut stream = connect(&app).await;
    let started = Instant::now();
    send_partial(
        &mut stream,
        &registration_head(&app.token("alice")),
        b"{\"name\":",
    )
    .await;

    let response = tokio::time::timeout(GUARD, read_response(&mut stream))
        .await
        .expect("answered before the guard");
    assert!(started.elapsed() >= deadline, "not before the deadline");
    assert_eq!(response.status, 408);
    assert_eq!(
        response.header("content-type"),
        Some("application/problem+json")
    );
    assert_eq!(response.header("connection"), Some("close"));
    let problem = response.json();
    assert_eq!(problem["type"], "about:blank");
    assert_eq!(problem["title"], "Request Timeout");
    assert_eq!(problem["status"], 408);
    assert_eq!(problem["instance"], "/api/v1/devices");
    assert!(
        problem["detail"]
            .as_str()
            .is_some_and(|detail| detail.contains("300 ms")),
        "{problem}"
    );
    // The connection is closed after the answer: the rest of the body has nowhere to go.
    let mut rest = [0u8; 64];
    let read = tokio::time::timeout(GUARD, stream.read(&mut rest))
        .await
        .expect("closed before the guard");
    assert!(matches!(read, Ok(0) | Err(_)), "closed: {read:?}");
}

#[airq_test::test]
async fn a_body_sent_in_time_is_not_affected_by_the_deadline() {
    let app = TestApp::spawn_with(|c| c.body_timeout = Duration::from_millis(300)).await;
    let device = app.register_named("alice", "on time").await;
    assert!(device["device_key"].is_string());
}

// ---------------------------------------------------------------------------------------------
// Shutdown within its bound
// ---------------------------------------------------------------------------------------------

/// Starts `POST /data` as `device` with `Expect: 100-continue`, waits for the server's go-ahead
/// (so the handler is reading the body), sends a few bytes of the announced 100, and stalls.
async fn stalled_upload(app: &TestApp, device: &Value) -> TcpStream {
    let mut stream = connect(app).await;
    let head = format!(
        "POST /api/v1/data HTTP/1.1\r\nHost: airq\r\nX-Device-ID: {}\r\nX-Device-Key: {}\r\n\
         Content-Type: application/json\r\nContent-Length: 100\r\nExpect: 100-continue",
        device["device_id"].as_str().expect("device_id"),
        device["device_key"].as_str().expect("device_key"),
    );
    send_partial(&mut stream, &head, b"").await;
    let go_ahead = tokio::time::timeout(GUARD, read_response(&mut stream))
        .await
        .expect("a go-ahead before the guard");
    assert_eq!(go_ahead.status, 100, "the handler reads the body");
    stream.write_all(b"{\"aqi\":").await.expect("body start");
    stream
}

/// A keep-alive connection that served one request and now sits idle.
async fn idle_keep_alive(app: &TestApp) -> TcpStream {
    let mut stream = connect(app).await;
    send_partial(&mut stream, "GET /healthz HTTP/1.1\r\nHost: airq", b"").await;
    let response = tokio::time::timeout(GUARD, read_response(&mut stream))
        .await
        .expect("answered before the guard");
    assert_eq!(response.status, 200);
    stream
}

/// Whether the server closed `stream` (reading gives end of file or a reset).
async fn closed_by_server(stream: &mut TcpStream) -> bool {
    let mut byte = [0u8; 1];
    matches!(
        tokio::time::timeout(GUARD, stream.read(&mut byte)).await,
        Ok(Ok(0) | Err(_))
    )
}

#[airq_test::test]
async fn shutdown_ends_within_its_bound_while_clients_hold_connections_open() {
    let mut app = TestApp::spawn_with(|c| {
        c.connections.shutdown_timeout = Duration::from_millis(500);
    })
    .await;
    // `stop` drops the app and with it its data directory: keep the directory.
    let data_dir = std::mem::replace(&mut app.data_dir, tempfile::tempdir().expect("temp dir"));
    let device = app.register_named("alice", "balcony").await;
    let receipt = app.upload_ok(&device, &crate::common::sample()).await;
    let mut stalled = stalled_upload(&app, &device).await;
    let mut idle = idle_keep_alive(&app).await;

    tokio::time::timeout(GUARD, app.stop())
        .await
        .expect("the server stopped despite the stalled upload");
    assert!(
        closed_by_server(&mut stalled).await,
        "stalled upload closed"
    );
    assert!(closed_by_server(&mut idle).await, "idle connection closed");

    let app = TestApp::spawn_in(data_dir, |_| {}).await;
    assert_eq!(
        app.stored_ids().await,
        vec![receipt["id"].as_u64().expect("receipt id")],
        "the reading acknowledged before the shutdown is stored"
    );
}

// ---------------------------------------------------------------------------------------------
// Bounded request heads
// ---------------------------------------------------------------------------------------------

/// Sends a whole `GET /healthz` head with `extra` header lines, and reads the answer.
async fn healthz_with(app: &TestApp, extra: &str) -> RawResponse {
    let mut stream = connect(app).await;
    // The server may answer and close before it has read everything; the answer still arrives.
    let _ = stream
        .write_all(format!("GET /healthz HTTP/1.1\r\nHost: airq\r\n{extra}\r\n").as_bytes())
        .await;
    tokio::time::timeout(GUARD, read_response(&mut stream))
        .await
        .expect("answered before the guard")
}

#[airq_test::test]
async fn a_header_block_over_16_kib_is_431_with_an_empty_body() {
    let app = TestApp::spawn().await;
    let response = healthz_with(&app, &format!("X-Filler: {}\r\n", "a".repeat(17 * 1024))).await;
    assert_eq!(response.status, 431);
    assert!(response.body.is_empty(), "hyper's own answer has no body");
}

#[airq_test::test]
async fn more_than_100_header_fields_are_431() {
    let app = TestApp::spawn().await;
    let extra: String = (0..120).map(|n| format!("X-Field-{n}: {n}\r\n")).collect();
    let response = healthz_with(&app, &extra).await;
    assert_eq!(response.status, 431);
}

#[airq_test::test]
async fn a_large_header_block_under_the_cap_is_served() {
    let app = TestApp::spawn().await;
    let extra: String = (0..90)
        .map(|n| format!("X-Field-{n}: {}\r\n", "b".repeat(150)))
        .collect();
    assert!((14 * 1024..16 * 1024).contains(&extra.len()));
    let response = healthz_with(&app, &extra).await;
    assert_eq!(response.status, 200);
}

// ---------------------------------------------------------------------------------------------
// A cap on open connections
// ---------------------------------------------------------------------------------------------

#[airq_test::test]
async fn past_the_connection_cap_a_request_waits_until_a_connection_closes() {
    let app = TestApp::spawn_with(|c| c.connections.max_open = 2).await;
    let first = idle_keep_alive(&app).await;
    let _second = idle_keep_alive(&app).await;

    let mut third = connect(&app).await;
    send_partial(&mut third, "GET /healthz HTTP/1.1\r\nHost: airq", b"").await;
    let waiting = tokio::time::timeout(Duration::from_millis(300), read_response(&mut third)).await;
    assert!(
        waiting.is_err(),
        "not served while two connections are open"
    );

    drop(first);
    let response = tokio::time::timeout(GUARD, read_response(&mut third))
        .await
        .expect("served once a connection closed");
    assert_eq!(response.status, 200);
}

// ---------------------------------------------------------------------------------------------
// Token times: `exp` and `nbf` with an explicit leeway
// ---------------------------------------------------------------------------------------------

/// Seconds since the epoch, as the verifier sees them (system time, not the app's manual clock).
fn now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("after the epoch")
        .as_secs()
        .try_into()
        .expect("fits")
}

/// Local-issuer claims for alice, issued an hour ago, with `exp` (and `nbf`) relative to now.
fn local_claims(exp_in: i64, nbf_in: Option<i64>) -> Value {
    let mut claims = json!({
        "iss": "airq-local",
        "sub": "alice",
        "iat": now() - 3600,
        "exp": now() + exp_in,
    });
    if let Some(nbf_in) = nbf_in {
        claims["nbf"] = json!(now() + nbf_in);
    }
    claims
}

/// An HS256 token over `claims`, keyed with `secret`.
fn hs256(secret: &[u8], claims: &Value) -> String {
    jsonwebtoken::encode(
        &Header::new(Algorithm::HS256),
        claims,
        &EncodingKey::from_secret(secret),
    )
    .expect("token signed")
}

/// A token over `claims` signed by the app's local issuer (its secret in the data dir).
fn local_token(app: &TestApp, claims: &Value) -> String {
    let secret = std::fs::read(app.data_dir.path().join("owner-token.secret")).expect("secret");
    hs256(&secret, claims)
}

/// The status of `GET /devices` with `token`; a 401 must be a problem with the owner challenge.
async fn status_with(app: &TestApp, token: &str) -> u16 {
    let response = app
        .client
        .get(app.url("/devices"))
        .bearer_auth(token)
        .send()
        .await
        .expect("request sent");
    let status = response.status().as_u16();
    if status == 401 {
        assert_eq!(
            response.headers()["www-authenticate"],
            "Bearer realm=\"airq\""
        );
        problem(response, 401).await;
    }
    status
}

#[airq_test::test]
async fn a_token_expired_45_s_ago_is_401_with_the_default_leeway() {
    let app = TestApp::spawn().await;
    let token = local_token(&app, &local_claims(-45, None));
    assert_eq!(status_with(&app, &token).await, 401);
}

#[airq_test::test]
async fn a_token_expired_within_the_leeway_is_accepted() {
    let app = TestApp::spawn().await;
    let token = local_token(&app, &local_claims(-10, None));
    assert_eq!(status_with(&app, &token).await, 200);
}

#[airq_test::test]
async fn a_token_not_valid_for_another_2_minutes_is_401() {
    let app = TestApp::spawn().await;
    let token = local_token(&app, &local_claims(3600, Some(120)));
    assert_eq!(status_with(&app, &token).await, 401);
}

#[airq_test::test]
async fn a_token_valid_from_within_the_leeway_is_accepted() {
    let app = TestApp::spawn().await;
    for nbf_in in [-60, 0, 10] {
        let token = local_token(&app, &local_claims(3600, Some(nbf_in)));
        assert_eq!(status_with(&app, &token).await, 200, "nbf in {nbf_in} s");
    }
}

#[airq_test::test]
async fn the_leeway_is_configurable() {
    let strict = TestApp::spawn_with(|c| c.auth_leeway = Duration::ZERO).await;
    let token = local_token(&strict, &local_claims(-5, None));
    assert_eq!(status_with(&strict, &token).await, 401, "no leeway");
    let token = local_token(&strict, &local_claims(3600, Some(5)));
    assert_eq!(status_with(&strict, &token).await, 401, "no leeway for nbf");

    let lenient = TestApp::spawn_with(|c| c.auth_leeway = Duration::from_secs(180)).await;
    let token = local_token(&lenient, &local_claims(-120, Some(120)));
    assert_eq!(status_with(&lenient, &token).await, 200, "three minutes");
}

#[airq_test::test]
async fn tokens_of_a_shared_secret_identity_provider_get_the_same_time_checks() {
    const SECRET: &[u8] = b"a shared secret of the identity provider, 32+ bytes";
    let app = TestApp::spawn_with(|c| {
        c.owner_auth = OwnerAuth::SharedSecret(String::from_utf8_lossy(SECRET).into_owned());
    })
    .await;
    let claims = |exp_in: i64, nbf_in: i64| {
        json!({
            "sub": "alice",
            "iat": now() - 3600,
            "exp": now() + exp_in,
            "nbf": now() + nbf_in,
        })
    };
    assert_eq!(
        status_with(&app, &hs256(SECRET, &claims(3600, 0))).await,
        200
    );
    assert_eq!(
        status_with(&app, &hs256(SECRET, &claims(-45, -3600))).await,
        401
    );
    assert_eq!(
        status_with(&app, &hs256(SECRET, &claims(3600, 120))).await,
        401
    );
}

// ---------------------------------------------------------------------------------------------
// Over-long request targets and broken framing
// ---------------------------------------------------------------------------------------------

#[airq_test::test]
async fn a_path_and_query_over_8_kib_is_a_414_problem() {
    let app = TestApp::spawn().await;
    let target = format!("/public/map/devices?pad={}", "a".repeat(8 * 1024));
    let response = app
        .client
        .get(app.url(&target))
        .send()
        .await
        .expect("request sent");
    let problem = problem(response, 414).await;
    assert_eq!(problem["type"], "about:blank");
    assert_eq!(problem["title"], "URI Too Long");
    assert_eq!(problem["instance"], "/api/v1/public/map/devices");
    assert!(
        problem["detail"]
            .as_str()
            .is_some_and(|detail| detail.contains("8192 bytes")),
        "{problem}"
    );
}

#[airq_test::test]
async fn a_path_and_query_of_exactly_8_kib_is_served() {
    let app = TestApp::spawn().await;
    let prefix = "/api/v1/openapi.json?pad=";
    let target = format!("{prefix}{}", "a".repeat(8 * 1024 - prefix.len()));
    assert_eq!(target.len(), 8 * 1024);
    let response = app
        .client
        .get(format!("{}{target}", app.base))
        .send()
        .await
        .expect("request sent");
    assert_eq!(response.status(), 200);
}

#[airq_test::test]
async fn an_over_long_path_is_414_before_credentials_are_looked_at() {
    let app = TestApp::spawn().await;
    let response = app
        .client
        .get(app.url(&format!("/devices/{}", "x".repeat(9000))))
        .send()
        .await
        .expect("request sent");
    problem(response, 414).await;
}

#[airq_test::test]
async fn pages_badges_and_preflights_answer_an_over_long_target_with_a_414_problem() {
    let app = TestApp::spawn().await;
    let device = app
        .register("alice", json!({ "name": "Roof", "is_public": true }))
        .await;
    let id = device["id"].as_str().expect("an id");
    let pad = "a".repeat(8 * 1024);
    let public = |path: String| format!("{}/api/v1/public{path}?pad={pad}", app.base);
    let requests = [
        (reqwest::Method::GET, format!("{}/map?pad={pad}", app.base)),
        (
            reqwest::Method::GET,
            format!("{}/devices/{id}?pad={pad}", app.base),
        ),
        (
            reqwest::Method::GET,
            public(format!("/devices/{id}/badge.svg")),
        ),
        (
            reqwest::Method::OPTIONS,
            public(format!("/devices/{id}/badge.svg")),
        ),
        (reqwest::Method::OPTIONS, public(format!("/devices/{id}"))),
        (reqwest::Method::OPTIONS, public("/map/devices".to_owned())),
        (
            reqwest::Method::OPTIONS,
            format!("{}/api/v1/openapi.json?pad={pad}", app.base),
        ),
    ];
    for (method, url) in requests {
        let response = app
            .client
            .request(method, url)
            .header("Origin", "https://widget.example")
            .header("Access-Control-Request-Method", "GET")
            .send()
            .await
            .expect("request sent");
        let problem = problem(response, 414).await;
        assert_eq!(problem["title"], "URI Too Long");
    }
}

/// Sends `head` (a request head with its blank line) and reads the answer and what follows.
async fn raw_exchange(app: &TestApp, head: &str) -> (RawResponse, bool) {
    let mut stream = connect(app).await;
    stream.write_all(head.as_bytes()).await.expect("head sent");
    let response = tokio::time::timeout(GUARD, read_response(&mut stream))
        .await
        .expect("answered before the guard");
    let closed = closed_by_server(&mut stream).await;
    (response, closed)
}

#[airq_test::test]
async fn a_negative_content_length_is_400_and_the_connection_closed() {
    let app = TestApp::spawn().await;
    let (response, closed) = raw_exchange(
        &app,
        "POST /api/v1/devices HTTP/1.1\r\nHost: airq\r\nContent-Type: application/json\r\n\
         Content-Length: -1\r\n\r\n{}",
    )
    .await;
    assert_eq!(response.status, 400);
    assert!(closed, "the connection is closed after broken framing");
}

#[airq_test::test]
async fn conflicting_content_lengths_are_400_and_the_connection_closed() {
    let app = TestApp::spawn().await;
    let (response, closed) = raw_exchange(
        &app,
        "POST /api/v1/devices HTTP/1.1\r\nHost: airq\r\nContent-Type: application/json\r\n\
         Content-Length: 2\r\nContent-Length: 3\r\n\r\n{}",
    )
    .await;
    assert_eq!(response.status, 400);
    assert!(closed, "the connection is closed after broken framing");
}

#[airq_test::test]
async fn an_http_11_request_without_exactly_one_valid_host_is_a_400_problem() {
    let app = TestApp::spawn().await;
    for host in ["", "Host: a\r\nHost: b\r\n", "Host: a b\r\n"] {
        let (response, _) = raw_exchange(
            &app,
            &format!("GET /healthz HTTP/1.1\r\n{host}Connection: close\r\n\r\n"),
        )
        .await;
        assert_eq!(response.status, 400, "{host:?}");
        assert_eq!(
            response.header("content-type"),
            Some("application/problem+json"),
            "{host:?}"
        );
    }
    let (response, _) = raw_exchange(&app, "GET /healthz HTTP/1.0\r\n\r\n").await;
    assert_eq!(response.status, 200, "HTTP/1.0 may leave Host out");
}

#[airq_test::test]
async fn a_transfer_coding_other_than_chunked_is_a_client_400_and_the_connection_closed() {
    let app = TestApp::spawn().await;
    let device = app.register_named("alice", "balcony").await;
    let body = sample().to_string();
    for coding in ["gzip, chunked", "foo, chunked"] {
        let (response, closed) = raw_exchange(
            &app,
            &format!(
                "POST /api/v1/data HTTP/1.1\r\nHost: airq\r\nX-Device-ID: {}\r\n\
                 X-Device-Key: {}\r\nContent-Type: application/json\r\n\
                 Transfer-Encoding: {coding}\r\n\r\n{:x}\r\n{body}\r\n0\r\n\r\n",
                device["device_id"].as_str().expect("device_id"),
                device["device_key"].as_str().expect("device_key"),
                body.len(),
            ),
        )
        .await;
        assert_eq!(response.status, 400, "{coding}");
        assert_eq!(response.json()["status"], 400);
        assert!(closed, "{coding}: the connection is closed");
    }
    assert!(app.stored_ids().await.is_empty(), "nothing was stored");
    // The client's mistake, not a failure of the server: nothing on the 5xx dashboard panel.
    let scrape = crate::metrics::Scrape::of(&app).await;
    assert_eq!(
        scrape.counter("airq_http_responses", &[("class", "5xx")]),
        0.0
    );
    assert!(scrape.counter("airq_http_responses", &[("class", "4xx")]) >= 2.0);
}

// ---------------------------------------------------------------------------------------------
// JSON beyond what the parser holds: numbers of any size, nesting of any depth
// ---------------------------------------------------------------------------------------------

/// `POST path` as `device` with a raw JSON body.
async fn post_as_device(
    app: &TestApp,
    device: &Value,
    path: &str,
    body: String,
) -> reqwest::Response {
    app.client
        .post(app.url(path))
        .header("x-device-id", device["device_id"].as_str().expect("id"))
        .header("x-device-key", device["device_key"].as_str().expect("key"))
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .expect("request sent")
}

/// The sample upload's JSON text with `extra` members added to its top-level object.
fn sample_with_members(extra: &str) -> String {
    let text = crate::common::sample().to_string();
    format!("{{{extra},{}", text.strip_prefix('{').expect("an object"))
}

const HUGE_UNKNOWN: &str = r#""firmware": {"uptime_ns": 123456789012345678901234567890, "drift": -1e400, "gain": 2.5e999}, "big": -10000000000000000000"#;

#[airq_test::test]
async fn numbers_beyond_f64_and_u64_in_unknown_fields_are_ignored() {
    let app = TestApp::spawn().await;
    let device = app.register_named("alice", "odd firmware").await;
    let response = post_as_device(&app, &device, "/data", sample_with_members(HUGE_UNKNOWN)).await;
    assert_eq!(response.status(), 201, "{:?}", response.text().await);

    let reading = sample_with_members(HUGE_UNKNOWN);
    let batch = format!("{{{HUGE_UNKNOWN}, \"readings\": [{reading}, {reading}]}}");
    let response = post_as_device(&app, &device, "/data/batch", batch).await;
    assert_eq!(response.status(), 201, "{:?}", response.text().await);
    assert_eq!(app.stored_ids().await.len(), 3);
}

#[airq_test::test]
async fn numbers_beyond_f64_and_u64_in_known_fields_are_422_bound_errors_naming_the_field() {
    let app = TestApp::spawn().await;
    let device = app.register_named("alice", "odd firmware").await;
    let text = crate::common::sample()
        .to_string()
        .replace("\"aqi\":42", "\"aqi\":123456789012345678901234567890")
        .replace("\"pm2_5\":10.0", "\"pm2_5\":1e400")
        .replace("\"temperature\":21.5", "\"temperature\":-1e400")
        .replace("\"humidity\":40.0", "\"humidity\":-10000000000000000000");
    assert!(text.contains("1e400"), "{text}");
    let expected = vec![
        fe("aqi", "maximum", "body"),
        fe("pms_data.pm2_5", "maximum", "body"),
        fe("temperature_data.humidity", "minimum", "body"),
        fe("temperature_data.temperature", "minimum", "body"),
    ];
    let response = post_as_device(&app, &device, "/data", text.clone()).await;
    assert_eq!(field_errors(&problem(response, 422).await), expected);

    let batch = format!("{{\"readings\": [{}, {text}]}}", crate::common::sample());
    let response = post_as_device(&app, &device, "/data/batch", batch).await;
    let expected: Vec<_> = expected
        .into_iter()
        .map(|(name, code, location)| (format!("readings[1].{name}"), code, location))
        .collect();
    assert_eq!(field_errors(&problem(response, 422).await), expected);
    assert!(app.stored_ids().await.is_empty());
}

#[airq_test::test]
async fn a_body_nested_deeper_than_128_levels_is_400_and_the_server_keeps_serving() {
    let app = TestApp::spawn().await;
    let device = app.register_named("alice", "deep").await;
    for depth in [129, 20_000] {
        let body = format!("{}{}", "[".repeat(depth), "]".repeat(depth));
        let response = post_as_device(&app, &device, "/data", body).await;
        let problem = problem(response, 400).await;
        assert_eq!(problem["type"], "urn:airq:problem:malformed-body");
        assert!(
            problem["detail"]
                .as_str()
                .is_some_and(|detail| detail.contains("128 levels")),
            "{problem}"
        );
    }
    let deep_unknown = format!("\"deep\": {}1{}", "[".repeat(120), "]".repeat(120));
    let response = post_as_device(&app, &device, "/data", sample_with_members(&deep_unknown)).await;
    assert_eq!(response.status(), 201, "120 levels are fine");
}

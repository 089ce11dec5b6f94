//! The raw export's bounds: a client that stops reading loses its connection after the write
//! timeout (and the stall is counted), and exports stream at most so many at once per client
//! address and on the whole server.

use std::time::Duration;

use airq::config::{ExportLimits, TrustedProxies};
use chrono::{TimeDelta, Utc};
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpSocket, TcpStream};

use crate::common::{problem, TestApp};
use crate::metrics::{upload_batch, Scrape};

/// How long a test waits for what must happen before it fails instead of hanging.
const GUARD: Duration = Duration::from_secs(60);

/// A public device with enough readings (60,000) that its JSON export (about 10 MB) cannot fit
/// in the socket buffers between server and client: its export stays unfinished while the client
/// does not read.
async fn device_with_a_long_export(app: &TestApp) -> Value {
    let device = app
        .register(
            "alice",
            json!({"name": "long", "is_public": true, "is_location_public": true}),
        )
        .await;
    for _ in 0..60 {
        upload_batch(app, &device, 1_000).await;
    }
    device
}

/// The public export of every reading of `device` as JSON.
fn export_path(device: &Value) -> String {
    let start = (Utc::now() - TimeDelta::days(1)).format("%Y-%m-%dT%H:%M:%SZ");
    let end = (Utc::now() + TimeDelta::days(1)).format("%Y-%m-%dT%H:%M:%SZ");
    format!(
        "/api/v1/public/devices/{}/readings?start={start}&end={end}&format=json",
        device["id"].as_str().expect("id")
    )
}

/// A connection straight to the server (no relay, which would read for it) with a small receive
/// buffer, that asks for `path` as `client` (`X-Forwarded-For`) and then reads nothing.
async fn stalled_export(app: &TestApp, path: &str, client: &str) -> TcpStream {
    let socket = TcpSocket::new_v4().expect("socket");
    socket.set_recv_buffer_size(4096).expect("small buffer");
    let mut stream = socket.connect(app.server_addr).await.expect("connected");
    let head = format!("GET {path} HTTP/1.1\r\nHost: airq\r\nX-Forwarded-For: {client}\r\n\r\n");
    stream
        .write_all(head.as_bytes())
        .await
        .expect("request sent");
    // The answer has begun (its head is in the buffer) once the server holds the export.
    let mut first = [0; 12];
    tokio::time::timeout(GUARD, stream.read_exact(&mut first))
        .await
        .expect("the answer begins")
        .expect("read");
    assert_eq!(&first, b"HTTP/1.1 200");
    stream
}

/// The export of `path` as `client` through the relay (its answer checked against the document).
async fn export_as(app: &TestApp, path: &str, client: &str) -> reqwest::Response {
    app.client
        .get(format!("{}{path}", app.base))
        .header("x-forwarded-for", client)
        .send()
        .await
        .expect("request sent")
}

/// The rows of a whole JSON export.
async fn rows_of(response: reqwest::Response) -> usize {
    let body: Value = response.json().await.expect("a whole JSON export");
    body["data"].as_array().map_or(0, Vec::len)
}

/// Reads what the server still sends until it closes the connection; `true` if it did.
async fn closed_by_server(stream: &mut TcpStream) -> bool {
    let mut sink = Vec::new();
    let read = tokio::time::timeout(GUARD, stream.read_to_end(&mut sink)).await;
    // An orderly end or a reset: either way the server has let the connection go.
    matches!(read, Ok(Ok(_)) | Ok(Err(_)))
}

#[airq_test::test]
async fn an_export_whose_client_stops_reading_is_closed_after_the_write_timeout_and_counted() {
    let app = TestApp::spawn_with(|c| {
        c.connections.write_timeout = Duration::from_secs(1);
        c.exports = ExportLimits {
            per_client: 1,
            overall: 8,
        };
    })
    .await;
    let device = device_with_a_long_export(&app).await;
    let path = export_path(&device);
    let mut stalled = stalled_export(&app, &path, "203.0.113.1").await;

    let counted = tokio::time::timeout(GUARD, async {
        while Scrape::of(&app)
            .await
            .counter("airq_http_write_stalls", &[])
            < 1.0
        {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await;
    assert!(counted.is_ok(), "the stall is counted");
    assert!(
        closed_by_server(&mut stalled).await,
        "the connection is closed"
    );
    // Its slot was given back: the same client's only one is free again.
    let again = export_as(&app, &path, "203.0.113.1").await;
    assert_eq!(again.status(), 200);
    assert_eq!(rows_of(again).await, 60_000);
}

#[airq_test::test]
async fn exports_past_the_clients_share_are_429_and_past_the_servers_bound_503() {
    // The test server's peer is 127.0.0.1, standing for a trusted proxy; clients are told
    // apart by X-Forwarded-For.
    let app = TestApp::spawn_with(|c| {
        c.rate_limits.trusted_proxies = TrustedProxies::parse("127.0.0.0/8").expect("networks");
        c.exports = ExportLimits {
            per_client: 1,
            overall: 2,
        };
    })
    .await;
    let device = device_with_a_long_export(&app).await;
    let path = export_path(&device);

    let first = stalled_export(&app, &path, "198.51.100.1").await;
    let refused = export_as(&app, &path, "198.51.100.1").await;
    assert_eq!(refused.status(), 429);
    assert!(refused.headers().contains_key("retry-after"));
    let body = problem(refused, 429).await;
    assert!(
        body["detail"]
            .as_str()
            .is_some_and(|detail| detail.contains("AIRQ_EXPORTS_PER_CLIENT")),
        "{body}"
    );

    let _second = stalled_export(&app, &path, "198.51.100.2").await;
    let busy = export_as(&app, &path, "198.51.100.3").await;
    assert_eq!(busy.status(), 503);
    assert!(busy.headers().contains_key("retry-after"));
    problem(busy, 503).await;

    // A client that goes away gives its slot back: the third client is served once it has.
    drop(first);
    let served = tokio::time::timeout(GUARD, async {
        loop {
            let response = export_as(&app, &path, "198.51.100.3").await;
            if response.status() == 200 {
                return rows_of(response).await;
            }
            assert_eq!(response.status(), 503);
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await
    .expect("served once a slot is free");
    assert_eq!(served, 60_000);
}

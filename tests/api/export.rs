//! The raw export: GET /devices/{id}/readings (owner) and GET /public/devices/{id}/readings
//! (public devices), as JSON, NDJSON and CSV, oldest first, streamed.

use chrono::{DateTime, SecondsFormat, TimeDelta, Utc};
use reqwest::Response;
use serde_json::{json, Value};

use crate::common::{fe, field_errors, located, measured, problem, sample_with, TestApp};

const CSV_HEADER: &str =
    "measured_at,aqi,pm1_0,pm2_5,pm10_0,temperature,humidity,heat_index,lat,lon";
const COLUMNS: [&str; 10] = [
    "measured_at",
    "aqi",
    "pm1_0",
    "pm2_5",
    "pm10_0",
    "temperature",
    "humidity",
    "heat_index",
    "lat",
    "lon",
];

/// `(name, code, in)` of a field error.
type FieldFault = (String, String, String);

fn now() -> DateTime<Utc> {
    crate::common::at("2026-03-10T12:30:00Z")
}

fn rfc3339(at: DateTime<Utc>) -> String {
    at.to_rfc3339_opts(SecondsFormat::Micros, true)
}

/// `?start=…&end=…`, encoded.
fn range(start: DateTime<Utc>, end: DateTime<Utc>) -> String {
    format!(
        "start={}&end={}",
        form_urlencoded::byte_serialize(rfc3339(start).as_bytes()).collect::<String>(),
        form_urlencoded::byte_serialize(rfc3339(end).as_bytes()).collect::<String>()
    )
}

async fn register(app: &TestApp, owner: &str, public: bool, location_public: bool) -> Value {
    app.register(
        owner,
        json!({ "name": "Balcony", "is_public": public, "is_location_public": location_public }),
    )
    .await
}

fn id_of(device: &Value) -> &str {
    device["id"].as_str().expect("device id")
}

fn owner_path(device: &Value, query: &str) -> String {
    format!("/devices/{}/readings?{query}", id_of(device))
}

fn public_path(device: &Value, query: &str) -> String {
    format!("/public/devices/{}/readings?{query}", id_of(device))
}

/// `GET path` as `owner` (or without credentials) with `Accept: accept` (if any).
async fn get(app: &TestApp, owner: Option<&str>, path: &str, accept: Option<&str>) -> Response {
    let mut request = match owner {
        Some(owner) => app.owner_request(reqwest::Method::GET, path, owner),
        None => app.client.get(app.url(path)),
    };
    if let Some(accept) = accept {
        request = request.header("accept", accept);
    }
    request.send().await.expect("request sent")
}

fn header<'r>(response: &'r Response, name: &str) -> Option<&'r str> {
    response
        .headers()
        .get(name)
        .map(|value| value.to_str().expect("an ASCII header value"))
}

/// The rows of a 200 JSON export.
async fn json_rows(response: Response) -> Vec<Value> {
    assert_eq!(response.status(), 200);
    assert_eq!(header(&response, "content-type"), Some("application/json"));
    let body: Value = response.json().await.expect("JSON");
    assert_eq!(
        body.as_object()
            .expect("an object")
            .keys()
            .collect::<Vec<_>>(),
        ["data"]
    );
    body["data"].as_array().expect("a data array").clone()
}

/// The lines of a 200 CSV export (without the header, which is checked), split into fields.
async fn csv_rows(response: Response) -> Vec<Vec<String>> {
    assert_eq!(response.status(), 200);
    let content_type = header(&response, "content-type").unwrap_or_default();
    assert!(content_type.starts_with("text/csv"), "{content_type}");
    let text = response.text().await.expect("text");
    assert!(text.ends_with("\r\n"), "CRLF after the last line: {text:?}");
    let mut lines = text.strip_suffix("\r\n").unwrap_or(&text).split("\r\n");
    assert_eq!(lines.next(), Some(CSV_HEADER));
    lines
        .map(|line| line.split(',').map(str::to_owned).collect())
        .collect()
}

/// The objects of a 200 NDJSON export.
async fn ndjson_rows(response: Response) -> Vec<Value> {
    assert_eq!(response.status(), 200);
    assert_eq!(
        header(&response, "content-type"),
        Some("application/x-ndjson")
    );
    let text = response.text().await.expect("text");
    assert!(
        text.is_empty() || text.ends_with('\n'),
        "a newline after each object"
    );
    text.lines()
        .map(|line| serde_json::from_str(line).expect("one JSON object per line"))
        .collect()
}

/// Uploads three readings out of order, one of them located; answers their times oldest first.
async fn three_readings(app: &TestApp, device: &Value) -> [DateTime<Utc>; 3] {
    let times = [
        now() - TimeDelta::minutes(30),
        now() - TimeDelta::minutes(20),
        now() - TimeDelta::minutes(10),
    ];
    app.upload_ok(device, &measured(sample_with(30, 3.5, 23.0), times[2]))
        .await;
    app.upload_ok(
        device,
        &measured(located(sample_with(10, 1.25, 21.0), 48.85, 2.35), times[0]),
    )
    .await;
    app.upload_ok(device, &measured(sample_with(20, 2.0, 22.0), times[1]))
        .await;
    times
}

fn ms(at: DateTime<Utc>) -> String {
    at.to_rfc3339_opts(SecondsFormat::Millis, true)
}

#[airq_test::test]
async fn csv_has_the_header_and_one_line_per_reading_oldest_first() {
    let app = TestApp::spawn().await;
    app.clock.set(now());
    let device = register(&app, "alice", false, false).await;
    let times = three_readings(&app, &device).await;
    let query = range(now() - TimeDelta::hours(1), now());

    let rows = csv_rows(
        get(
            &app,
            Some("alice"),
            &owner_path(&device, &query),
            Some("text/csv"),
        )
        .await,
    )
    .await;
    assert_eq!(
        rows,
        [
            vec![
                ms(times[0]),
                "10".into(),
                "5.0".into(),
                "1.25".into(),
                "15.0".into(),
                "21.0".into(),
                "40.0".into(),
                "22.0".into(),
                "48.85".into(),
                "2.35".into()
            ],
            vec![
                ms(times[1]),
                "20".into(),
                "5.0".into(),
                "2.0".into(),
                "15.0".into(),
                "22.0".into(),
                "40.0".into(),
                "22.0".into(),
                String::new(),
                String::new()
            ],
            vec![
                ms(times[2]),
                "30".into(),
                "5.0".into(),
                "3.5".into(),
                "15.0".into(),
                "23.0".into(),
                "40.0".into(),
                "22.0".into(),
                String::new(),
                String::new()
            ],
        ]
    );
}

#[airq_test::test]
async fn json_and_ndjson_rows_are_flat_objects_with_the_csv_columns() {
    let app = TestApp::spawn().await;
    app.clock.set(now());
    let device = register(&app, "alice", false, false).await;
    let times = three_readings(&app, &device).await;
    let path = owner_path(&device, &range(now() - TimeDelta::hours(1), now()));

    let json = json_rows(get(&app, Some("alice"), &path, None).await).await;
    let explicit = json_rows(get(&app, Some("alice"), &path, Some("application/json")).await).await;
    let ndjson =
        ndjson_rows(get(&app, Some("alice"), &path, Some("application/x-ndjson")).await).await;
    assert_eq!(json, explicit, "JSON is the default");
    assert_eq!(json, ndjson, "the same rows");
    assert_eq!(json.len(), 3);
    for row in &json {
        let mut keys: Vec<&str> = row
            .as_object()
            .expect("a flat object")
            .keys()
            .map(String::as_str)
            .collect();
        let mut columns = COLUMNS.to_vec();
        keys.sort_unstable();
        columns.sort_unstable();
        assert_eq!(keys, columns);
    }
    assert_eq!(
        json[0],
        json!({
            "measured_at": ms(times[0]), "aqi": 10, "pm1_0": 5.0, "pm2_5": 1.25, "pm10_0": 15.0,
            "temperature": 21.0, "humidity": 40.0, "heat_index": 22.0, "lat": 48.85, "lon": 2.35
        })
    );
    assert_eq!(json[1]["lat"], Value::Null, "no location: null");
    assert_eq!(json[1]["lon"], Value::Null);
    assert!(json[0]["aqi"].is_i64(), "aqi is an integer");
    let order: Vec<&Value> = json.iter().map(|row| &row["measured_at"]).collect();
    assert_eq!(
        order,
        [
            &json!(ms(times[0])),
            &json!(ms(times[1])),
            &json!(ms(times[2]))
        ]
    );

    // Member order of the raw text follows the CSV's columns.
    let text = get(&app, Some("alice"), &path, Some("application/x-ndjson"))
        .await
        .text()
        .await
        .expect("text");
    let first = text.lines().next().expect("a line");
    let positions: Vec<usize> = COLUMNS
        .iter()
        .map(|column| {
            first
                .find(&format!("\"{column}\":"))
                .expect("column present")
        })
        .collect();
    assert!(
        positions.windows(2).all(|pair| pair[0] < pair[1]),
        "{first}"
    );
}

#[airq_test::test]
async fn start_is_included_and_end_is_not() {
    let app = TestApp::spawn().await;
    app.clock.set(now());
    let device = register(&app, "alice", false, false).await;
    let times = three_readings(&app, &device).await;
    let rows = json_rows(
        get(
            &app,
            Some("alice"),
            &owner_path(&device, &range(times[0], times[2])),
            None,
        )
        .await,
    )
    .await;
    let order: Vec<Value> = rows.iter().map(|row| row["measured_at"].clone()).collect();
    assert_eq!(order, [json!(ms(times[0])), json!(ms(times[1]))]);

    // A microsecond after a reading: it is out.
    let rows = json_rows(
        get(
            &app,
            Some("alice"),
            &owner_path(
                &device,
                &range(
                    times[0] + TimeDelta::microseconds(1),
                    times[2] + TimeDelta::microseconds(1),
                ),
            ),
            None,
        )
        .await,
    )
    .await;
    let order: Vec<Value> = rows.iter().map(|row| row["measured_at"].clone()).collect();
    assert_eq!(order, [json!(ms(times[1])), json!(ms(times[2]))]);

    // Offsets other than Z mean the same instants; a `+` sent unencoded is read as one.
    let start = times[0].with_timezone(&chrono::FixedOffset::east_opt(2 * 3600).expect("offset"));
    let query = format!(
        "start={}&end={}",
        start.to_rfc3339_opts(SecondsFormat::Millis, false),
        rfc3339(now())
    );
    assert!(query.contains('+'));
    let rows = json_rows(get(&app, Some("alice"), &owner_path(&device, &query), None).await).await;
    assert_eq!(rows.len(), 3, "{query}");
}

#[airq_test::test]
async fn an_empty_range_is_an_empty_export_in_every_format() {
    let app = TestApp::spawn().await;
    app.clock.set(now());
    let device = register(&app, "alice", true, true).await;
    three_readings(&app, &device).await;
    for path in [
        owner_path(
            &device,
            &range(now() - TimeDelta::days(3), now() - TimeDelta::days(2)),
        ),
        owner_path(&device, &range(now(), now() + TimeDelta::days(1))),
    ] {
        let response = get(&app, Some("alice"), &path, None).await;
        assert_eq!(response.status(), 200);
        assert_eq!(response.text().await.expect("text"), r#"{"data":[]}"#);
        assert!(
            csv_rows(get(&app, Some("alice"), &path, Some("text/csv")).await)
                .await
                .is_empty()
        );
        let response = get(&app, Some("alice"), &path, Some("application/x-ndjson")).await;
        assert_eq!(response.status(), 200);
        assert_eq!(response.text().await.expect("text"), "");
    }
    // A device that never reported.
    let silent = register(&app, "alice", true, true).await;
    let rows = json_rows(
        get(
            &app,
            None,
            &public_path(&silent, &range(now() - TimeDelta::days(1), now())),
            None,
        )
        .await,
    )
    .await;
    assert!(rows.is_empty());
}

#[airq_test::test]
async fn the_range_is_checked_and_each_fault_names_its_parameter() {
    let app = TestApp::spawn().await;
    app.clock.set(now());
    let owned = register(&app, "alice", true, true).await;
    let start = now() - TimeDelta::days(1);
    let cases: Vec<(String, Vec<FieldFault>)> = vec![
        (
            String::new(),
            vec![
                fe("end", "required", "query"),
                fe("start", "required", "query"),
            ],
        ),
        (
            format!("start={}", rfc3339(start)),
            vec![fe("end", "required", "query")],
        ),
        (
            "start=2026-03-01&end=yesterday".to_owned(),
            vec![fe("end", "format", "query"), fe("start", "format", "query")],
        ),
        (
            // No offset: not RFC 3339.
            format!("start=2026-03-01T00:00:00&end={}", rfc3339(now())),
            vec![fe("start", "format", "query")],
        ),
        (range(now(), now()), vec![fe("start", "range", "query")]),
        (range(now(), start), vec![fe("start", "range", "query")]),
        (
            range(
                now() - TimeDelta::days(366) - TimeDelta::microseconds(1),
                now(),
            ),
            vec![fe("end", "maximum", "query")],
        ),
    ];
    for (query, expected) in &cases {
        for (owner, path) in [
            (Some("alice"), owner_path(&owned, query)),
            (None, public_path(&owned, query)),
        ] {
            let response = get(&app, owner, &path, Some("text/csv")).await;
            if owner.is_none() {
                assert_eq!(header(&response, "access-control-allow-origin"), Some("*"));
            }
            let body = problem(response, 422).await;
            assert_eq!(body["type"], "urn:airq:problem:validation");
            assert_eq!(&field_errors(&body), expected, "GET {path}");
        }
    }
    // 366 days exactly is allowed.
    let path = owner_path(&owned, &range(now() - TimeDelta::days(366), now()));
    assert_eq!(get(&app, Some("alice"), &path, None).await.status(), 200);

    // A malformed id and a bad query are reported together.
    let response = get(&app, Some("alice"), "/devices/42/readings?start=x", None).await;
    let body = problem(response, 422).await;
    assert_eq!(
        field_errors(&body),
        [
            fe("end", "required", "query"),
            fe("id", "format", "path"),
            fe("start", "format", "query")
        ]
    );
}

#[airq_test::test]
async fn the_owner_route_needs_the_owner() {
    let app = TestApp::spawn().await;
    app.clock.set(now());
    let alices = register(&app, "alice", true, true).await;
    three_readings(&app, &alices).await;
    let query = range(now() - TimeDelta::hours(1), now());

    let response = get(&app, None, &owner_path(&alices, &query), None).await;
    problem(response, 401).await;
    let response = get(&app, Some("bob"), &owner_path(&alices, &query), None).await;
    let bobs_view = problem(response, 404).await;
    let unknown = json!({ "id": uuid::Uuid::new_v4().to_string() });
    let response = get(&app, Some("bob"), &owner_path(&unknown, &query), None).await;
    let unknown_view = problem(response, 404).await;
    assert_eq!(bobs_view["detail"], unknown_view["detail"]);
    assert_eq!(
        json_rows(get(&app, Some("alice"), &owner_path(&alices, &query), None).await)
            .await
            .len(),
        3
    );
}

#[airq_test::test]
async fn a_private_device_is_404_on_the_public_route_like_an_unknown_one() {
    let app = TestApp::spawn().await;
    app.clock.set(now());
    let private = register(&app, "alice", false, true).await;
    three_readings(&app, &private).await;
    let query = range(now() - TimeDelta::hours(1), now());
    let unknown = json!({ "id": uuid::Uuid::new_v4().to_string() });
    let mut details = Vec::new();
    for device in [&private, &unknown] {
        let response = get(&app, None, &public_path(device, &query), Some("text/csv")).await;
        assert_eq!(header(&response, "access-control-allow-origin"), Some("*"));
        let body = problem(response, 404).await;
        details.push((body["title"].clone(), body["detail"].clone()));
    }
    assert_eq!(details[0], details[1]);
}

#[airq_test::test]
async fn the_public_route_shows_the_location_only_when_it_is_public() {
    let app = TestApp::spawn().await;
    app.clock.set(now());
    let hidden = register(&app, "alice", true, false).await;
    let shown = register(&app, "alice", true, true).await;
    three_readings(&app, &hidden).await;
    three_readings(&app, &shown).await;
    let query = range(now() - TimeDelta::hours(1), now());

    let rows = json_rows(get(&app, None, &public_path(&hidden, &query), None).await).await;
    assert_eq!(rows.len(), 3);
    assert!(
        rows.iter()
            .all(|row| row["lat"].is_null() && row["lon"].is_null()),
        "{rows:?}"
    );
    let csv =
        csv_rows(get(&app, None, &public_path(&hidden, &query), Some("text/csv")).await).await;
    assert!(csv.iter().all(|row| row[8].is_empty() && row[9].is_empty()));
    let ndjson = ndjson_rows(
        get(
            &app,
            None,
            &public_path(&hidden, &query),
            Some("application/x-ndjson"),
        )
        .await,
    )
    .await;
    assert!(ndjson
        .iter()
        .all(|row| row["lat"].is_null() && row["lon"].is_null()));

    // Its owner sees the location.
    let owners =
        json_rows(get(&app, Some("alice"), &owner_path(&hidden, &query), None).await).await;
    assert_eq!(owners[0]["lat"], 48.85);

    let rows = json_rows(get(&app, None, &public_path(&shown, &query), None).await).await;
    assert_eq!(rows[0]["lat"], 48.85);
    assert_eq!(rows[0]["lon"], 2.35);
    assert!(rows[1]["lat"].is_null(), "a reading without a location");
}

#[airq_test::test]
async fn public_exports_keep_cors_and_say_vary_accept() {
    let app = TestApp::spawn().await;
    app.clock.set(now());
    let shown = register(&app, "alice", true, true).await;
    three_readings(&app, &shown).await;
    let query = range(now() - TimeDelta::hours(1), now());
    for accept in [None, Some("text/csv"), Some("application/x-ndjson")] {
        let response = get(&app, None, &public_path(&shown, &query), accept).await;
        assert_eq!(response.status(), 200);
        assert_eq!(header(&response, "access-control-allow-origin"), Some("*"));
        assert!(header(&response, "access-control-expose-headers").is_some());
        assert_eq!(header(&response, "vary"), Some("Accept"));
    }
    let response = get(&app, Some("alice"), &owner_path(&shown, &query), None).await;
    assert_eq!(header(&response, "access-control-allow-origin"), None);
    assert_eq!(header(&response, "vary"), Some("Accept"));

    let preflight = app
        .client
        .request(reqwest::Method::OPTIONS, app.url(&public_path(&shown, "")))
        .header("origin", "https://widget.example")
        .header("access-control-request-method", "GET")
        .send()
        .await
        .expect("preflight sent");
    assert_eq!(preflight.status(), 204);
    assert_eq!(header(&preflight, "access-control-allow-origin"), Some("*"));
}

#[airq_test::test]
async fn every_export_is_a_download_named_after_device_range_and_format() {
    let app = TestApp::spawn().await;
    app.clock.set(now());
    let device = register(&app, "alice", true, false).await;
    let id = id_of(&device);
    // An offset and a fraction of a second: the name says the instants in UTC, without `:`.
    let query = "start=2026-03-09T13%3A30%3A00%2B01%3A00&end=2026-03-10T12%3A30%3A00.25Z";
    let range = "20260309T123000Z-20260310T123000.25Z";
    for (format, extension) in [("csv", "csv"), ("ndjson", "ndjson"), ("json", "json")] {
        let query = format!("{query}&format={format}");
        for response in [
            get(&app, None, &public_path(&device, &query), None).await,
            get(&app, Some("alice"), &owner_path(&device, &query), None).await,
        ] {
            assert_eq!(response.status(), 200, "{format}");
            assert_eq!(
                header(&response, "content-disposition"),
                Some(format!("attachment; filename=\"airq-{id}-{range}.{extension}\"").as_str()),
                "{format}"
            );
        }
    }
    // Chosen by Accept rather than by `format`, the name follows the representation too.
    let response = get(
        &app,
        None,
        &public_path(&device, query),
        Some("application/x-ndjson"),
    )
    .await;
    assert_eq!(
        header(&response, "content-disposition"),
        Some(format!("attachment; filename=\"airq-{id}-{range}.ndjson\"").as_str())
    );
}

#[airq_test::test]
async fn a_replaced_reading_is_exported_once_with_its_later_values() {
    let app = TestApp::spawn().await;
    app.clock.set(now());
    let device = register(&app, "alice", true, true).await;
    let times = three_readings(&app, &device).await;
    app.upload_ok(&device, &measured(sample_with(99, 9.0, 29.0), times[1]))
        .await;
    let path = owner_path(&device, &range(now() - TimeDelta::hours(1), now()));
    let rows = json_rows(get(&app, Some("alice"), &path, None).await).await;
    assert_eq!(rows.len(), 3, "{rows:?}");
    assert_eq!(rows[1]["measured_at"], json!(ms(times[1])));
    assert_eq!(rows[1]["aqi"], 99);
    assert_eq!(rows[1]["pm2_5"], 9.0);
    let csv = csv_rows(get(&app, Some("alice"), &path, Some("text/csv")).await).await;
    assert_eq!(csv.len(), 3);
    assert_eq!(csv[1][1], "99");
}

/// `POST /data/batch` with `readings`, expecting 201.
async fn upload_batch(app: &TestApp, device: &Value, readings: &[Value]) {
    let response = app
        .client
        .post(app.url("/data/batch"))
        .header(
            "x-device-id",
            device["device_id"].as_str().expect("device_id"),
        )
        .header(
            "x-device-key",
            device["device_key"].as_str().expect("device_key"),
        )
        .json(&json!({ "readings": readings }))
        .send()
        .await
        .expect("request sent");
    assert_eq!(response.status(), 201, "batch stored");
}

#[airq_test::test]
async fn a_long_export_comes_whole_in_order_across_pages() {
    let app = TestApp::spawn().await;
    app.clock.set(now());
    let device = register(&app, "alice", true, true).await;
    // 6,000 readings a minute apart (more than a page), out of upload order, and 5,200 readings
    // without measured_at, all stored under the same receive time (more than a page at one
    // instant).
    let first = now() - TimeDelta::days(10);
    let mut keyed: Vec<Value> = (0..6_000)
        .map(|minute| {
            measured(
                sample_with(minute % 500, 1.0, 20.0),
                first + TimeDelta::minutes(minute),
            )
        })
        .collect();
    keyed.reverse();
    for chunk in keyed.chunks(1_000) {
        upload_batch(&app, &device, chunk).await;
    }
    let unkeyed = vec![sample_with(7, 2.0, 20.0); 1_000];
    for _ in 0..5 {
        upload_batch(&app, &device, &unkeyed).await;
    }
    upload_batch(&app, &device, &unkeyed[..200]).await;

    let path = owner_path(&device, &range(first, now() + TimeDelta::minutes(1)));
    let rows =
        ndjson_rows(get(&app, Some("alice"), &path, Some("application/x-ndjson")).await).await;
    assert_eq!(rows.len(), 11_200);
    for (minute, row) in rows[..6_000].iter().enumerate() {
        let minute = i64::try_from(minute).expect("small");
        assert_eq!(
            row["measured_at"],
            json!(ms(first + TimeDelta::minutes(minute))),
            "row {minute}"
        );
        assert_eq!(row["aqi"], minute % 500);
    }
    assert!(rows[6_000..]
        .iter()
        .all(|row| row["measured_at"] == json!(ms(now())) && row["aqi"] == 7));

    let csv = csv_rows(get(&app, Some("alice"), &path, Some("text/csv")).await).await;
    assert_eq!(csv.len(), 11_200);
    let json = json_rows(get(&app, Some("alice"), &path, None).await).await;
    assert_eq!(json, rows);
}

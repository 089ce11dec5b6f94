//! Logs operators use: `AIRQ_LOG_FORMAT=json` writes one JSON object per stderr line, every
//! request adds an access line that names the route and the caller but never a token or the
//! query string, and text logs carry no ANSI colours when stderr is not a terminal.

use std::io::{Read as _, Write as _};
use std::net::TcpStream;
use std::time::Duration;

use serde_json::Value;

use crate::common::process::{serve, token, DATA_DIR};

/// One HTTP/1.1 request over a fresh connection; the status code.
fn request(address: &str, target: &str, headers: &[(&str, &str)]) -> u16 {
    let mut stream = TcpStream::connect(address).expect("server reachable");
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .expect("timeout set");
    let mut head = format!("GET {target} HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n");
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes()).expect("request written");
    let mut answer = String::new();
    stream.read_to_string(&mut answer).expect("answer read");
    answer
        .split(' ')
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or_else(|| panic!("not an HTTP answer: {answer:?}"))
}

#[airq_test::test]
fn the_start_log_names_the_url_the_version_the_data_dir_and_how_to_mint_a_token() {
    let dir = tempfile::tempdir().unwrap();
    let (mut server, address) = serve(dir.path(), |command| {
        command.env("AIRQ_LOG_FORMAT", "json");
    });
    let hint = server.wait_for(|line| line.contains("owner tokens"));
    let lines = server.finish();
    let start: Value = lines
        .iter()
        .find(|line| line.contains("airq listening"))
        .and_then(|line| serde_json::from_str(line).ok())
        .expect("the start line");
    assert_eq!(start["url"], format!("http://{address}/"));
    assert_eq!(start["version"], env!("CARGO_PKG_VERSION"));
    assert_eq!(start["data_dir"], DATA_DIR);
    assert!(
        hint.contains(&format!("airq token OWNER --data-dir {DATA_DIR}")),
        "{hint}"
    );
}

#[airq_test::test]
fn json_logs_are_one_object_a_line_and_the_access_line_keeps_secrets_out() {
    let dir = tempfile::tempdir().unwrap();
    let token = token(dir.path(), DATA_DIR, "alice");
    let (mut server, address) = serve(dir.path(), |command| {
        command.env("AIRQ_LOG_FORMAT", "json");
    });

    let bearer = format!("Bearer {token}");
    let status = request(
        &address,
        "/api/v1/devices/3f2c9a1e-0000-4000-8000-000000000000?token=secret-in-query",
        &[("Authorization", &bearer), ("X-Request-Id", "logs-test-1")],
    );
    assert_eq!(status, 404, "alice has no such device");
    server.wait_for(|line| line.contains("logs-test-1") && line.contains("airq::access"));
    let lines = server.finish();

    let mut access = Vec::new();
    for line in &lines {
        let object: Value = serde_json::from_str(line)
            .unwrap_or_else(|error| panic!("not a JSON line ({error}): {line:?}"));
        assert!(object.is_object(), "an object: {line:?}");
        assert!(!line.contains("\u{1b}["), "no ANSI colours: {line:?}");
        assert!(
            !line.contains("secret-in-query"),
            "no query string: {line:?}"
        );
        assert!(!line.contains(&token), "no token: {line:?}");
        if object["target"] == "airq::access" && object["request_id"] == "logs-test-1" {
            access.push(object);
        }
    }
    assert_eq!(access.len(), 1, "one access line: {lines:#?}");
    let access = &access[0];
    assert_eq!(access["level"], "INFO");
    assert_eq!(access["method"], "GET");
    assert_eq!(access["route"], "/api/v1/devices/{id}");
    assert_eq!(
        access["path"],
        "/api/v1/devices/3f2c9a1e-0000-4000-8000-000000000000"
    );
    assert_eq!(access["status"], 404);
    assert!(access["duration_us"].is_u64(), "{access}");
    assert!(access["bytes"].as_u64().is_some_and(|n| n > 0), "{access}");
    assert_eq!(access["owner"], "alice");
    assert!(access.get("device").is_none(), "{access}");
}

#[airq_test::test]
fn text_logs_without_a_terminal_have_no_colour_codes() {
    let dir = tempfile::tempdir().unwrap();
    let (mut server, address) = serve(dir.path(), |_| ());
    assert_eq!(
        request(&address, "/nowhere?token=secret-in-query", &[]),
        404
    );
    server.wait_for(|line| line.contains("airq::access"));
    let lines = server.finish();
    let access = lines
        .iter()
        .find(|line| line.contains("airq::access"))
        .expect("an access line");
    assert!(
        access.contains("route=\"-\"") || access.contains("route=-"),
        "{access}"
    );
    for line in &lines {
        assert!(!line.contains("\u{1b}["), "no ANSI colours: {line:?}");
        assert!(
            !line.contains("secret-in-query"),
            "no query string: {line:?}"
        );
    }
}

#[airq_test::test]
fn access_lines_of_requests_answered_before_a_graceful_stop_reach_stderr() {
    let dir = tempfile::tempdir().unwrap();
    let (server, address) = serve(dir.path(), |_| ());
    for id in ["last-words-1", "last-words-2"] {
        assert_eq!(request(&address, "/nowhere", &[("X-Request-Id", id)]), 404);
    }
    let lines = server.stop();
    for id in ["last-words-1", "last-words-2"] {
        assert!(
            lines
                .iter()
                .any(|line| line.contains("airq::access") && line.contains(id)),
            "the access line of {id}: {lines:#?}"
        );
    }
}

#[airq_test::test]
fn a_rust_log_that_does_not_parse_is_reported_and_info_is_used() {
    let dir = tempfile::tempdir().unwrap();
    let (server, _) = serve(dir.path(), |command| {
        command.env("RUST_LOG", "info,airq::access=wanr");
    });
    let lines = server.finish();
    assert!(
        lines
            .iter()
            .any(|line| line.contains("RUST_LOG is not a valid filter")
                && line.contains("airq::access=wanr")),
        "{lines:#?}"
    );
}

//! Stopping the server by signal: the first Ctrl-C or SIGTERM drains, a second one during the
//! drain ends the process at once.

use std::io::{Read as _, Write as _};
use std::net::TcpStream;
use std::time::Duration;

use crate::common::process::{serve, token, DATA_DIR};

/// An owner's request whose body never finishes, which keeps the drain waiting. It returns once
/// the server is reading that body (its `100 Continue` says so): a request the server has not
/// read yet would only be an idle connection, closed at once by the drain.
fn stalled_registration(address: &str, token: &str) -> TcpStream {
    let mut stream = TcpStream::connect(address).expect("server reachable");
    stream
        .write_all(
            format!(
                "POST /api/v1/devices HTTP/1.1\r\nHost: {address}\r\nAuthorization: Bearer {token}\r\n\
                 Content-Type: application/json\r\nContent-Length: 100\r\nExpect: 100-continue\r\n\r\n"
            )
            .as_bytes(),
        )
        .expect("the head written");
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .expect("timeout set");
    let mut answer = [0; 25];
    stream.read_exact(&mut answer).expect("100 Continue");
    assert!(answer.starts_with(b"HTTP/1.1 100 Continue"), "{answer:?}");
    stream.write_all(b"{").expect("a byte of the body written");
    stream
}

#[airq_test::test]
fn a_second_stop_signal_during_the_drain_exits_at_once() {
    let dir = tempfile::tempdir().expect("temporary dir");
    let (mut server, address) = serve(dir.path(), |command| {
        command
            .env("AIRQ_SHUTDOWN_TIMEOUT_MS", "600000")
            .env("AIRQ_BODY_TIMEOUT_MS", "600000");
    });
    let _stalled = stalled_registration(&address, &token(dir.path(), DATA_DIR, "alice"));
    server.signal("TERM");
    server.wait_for(|line| line.contains("stopping: finishing the requests in flight"));
    server.signal("INT");
    let status = server.exit_within(Duration::from_secs(20));
    assert_eq!(status.code(), Some(1), "a forced stop exits 1");
    let lines = server.finish();
    assert!(
        lines
            .iter()
            .any(|line| line.contains("a second stop signal")),
        "{lines:#?}"
    );
}

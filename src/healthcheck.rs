//! `airq healthcheck`: asks a running `airq serve` whether it is ready, for container health checks
//! (the image's `HEALTHCHECK`, compose's `depends_on: condition: service_healthy`).
//!
//! It reads the same `--listen` / `AIRQ_LISTEN` as `serve`, so in a container it needs no flag;
//! an unspecified listen address (`0.0.0.0`, `[::]`) is reached over loopback. It sends one
//! `GET /readyz` over plain HTTP/1.1 and succeeds only on a 200 within `--timeout`; anything else
//! (refused, timed out, another status) is an error whose one-line message says what happened.
//! No TLS, no retries: the orchestrator repeats the check, and the server itself speaks plain HTTP.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::time::Duration;

use bytes::Bytes;
use clap::Args;
use http_body_util::{BodyExt as _, Empty, Limited};
use hyper::{Request, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

/// The path asked: 200 only when the process serves and its stores answer.
pub const PATH: &str = "/readyz";

/// At most this much of a failing answer is read, for its `detail`.
const BODY_LIMIT: usize = 16 * 1024;

/// Flags of `airq healthcheck`.
#[derive(Debug, Clone, Args)]
pub struct HealthcheckArgs {
    /// The address `airq serve` listens on (same flag and variable as `serve`); 0.0.0.0 and [::]
    /// are reached over loopback.
    #[arg(long, env = "AIRQ_LISTEN", default_value = "127.0.0.1:8080")]
    pub listen: SocketAddr,
    /// How long the whole check may take: seconds (`3`, `3s`) or milliseconds (`500ms`).
    #[arg(long, default_value = "3s", value_parser = parse_timeout)]
    pub timeout: Duration,
}

/// Why the server is not healthy, in one line.
#[derive(Debug, thiserror::Error)]
pub enum Unhealthy {
    /// `--listen` has port 0: a server's real port is only known to its log.
    #[error("--listen {0} has port 0; give the address the server is bound to")]
    NoPort(SocketAddr),
    /// Nothing accepted the connection.
    #[error("cannot connect to {address}")]
    Connect {
        /// The address tried.
        address: SocketAddr,
        /// The connection error.
        #[source]
        source: std::io::Error,
    },
    /// The server did not answer in time.
    #[error("no answer from http://{address}{PATH} within {timeout:?}")]
    Timeout {
        /// The address tried.
        address: SocketAddr,
        /// The time allowed.
        timeout: Duration,
    },
    /// The connection broke or the answer was not HTTP.
    #[error("GET http://{address}{PATH} failed")]
    Http {
        /// The address tried.
        address: SocketAddr,
        /// The HTTP error.
        #[source]
        source: hyper::Error,
    },
    /// The server answered, but not 200.
    #[error("GET http://{address}{PATH} answered {status}{}", detail.as_deref().map(|d| format!(": {d}")).unwrap_or_default())]
    Status {
        /// The address asked.
        address: SocketAddr,
        /// The status it answered.
        status: StatusCode,
        /// The problem's `detail`, if the body was one.
        detail: Option<String>,
    },
    /// The request could not be built (a header value the address made invalid).
    #[error("cannot build the request")]
    Request(#[source] hyper::http::Error),
    /// No runtime could be started for the check.
    #[error("cannot start the runtime")]
    Runtime(#[source] std::io::Error),
}

/// Runs the check on a runtime of its own: `Ok` only when `/readyz` answered 200 in time.
pub fn run(args: &HealthcheckArgs) -> Result<(), Unhealthy> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(Unhealthy::Runtime)?;
    runtime.block_on(check(args.listen, args.timeout))
}

/// Asks the server listening on `listen` for `/readyz`, giving up after `timeout`.
pub async fn check(listen: SocketAddr, timeout: Duration) -> Result<(), Unhealthy> {
    let address = target(listen)?;
    match tokio::time::timeout(timeout, ask(address)).await {
        Ok(outcome) => outcome,
        Err(_) => Err(Unhealthy::Timeout { address, timeout }),
    }
}

/// Where to connect for a listen address: loopback instead of an unspecified address.
pub fn target(listen: SocketAddr) -> Result<SocketAddr, Unhealthy> {
    if listen.port() == 0 {
        return Err(Unhealthy::NoPort(listen));
    }
    let ip = match listen.ip() {
        IpAddr::V4(ip) if ip.is_unspecified() => IpAddr::V4(Ipv4Addr::LOCALHOST),
        IpAddr::V6(ip) if ip.is_unspecified() => IpAddr::V6(Ipv6Addr::LOCALHOST),
        ip => ip,
    };
    Ok(SocketAddr::new(ip, listen.port()))
}

/// One `GET /readyz` on a fresh connection.
async fn ask(address: SocketAddr) -> Result<(), Unhealthy> {
    let http = |source| Unhealthy::Http { address, source };
    let stream = TcpStream::connect(address)
        .await
        .map_err(|source| Unhealthy::Connect { address, source })?;
    let (mut sender, connection) =
        hyper::client::conn::http1::handshake::<_, Empty<Bytes>>(TokioIo::new(stream))
            .await
            .map_err(http)?;
    // The connection is driven beside the request; it ends when the answer is read or dropped.
    let driver = tokio::spawn(connection);
    let request = Request::get(PATH)
        .header(hyper::header::HOST, address.to_string())
        .header(hyper::header::CONNECTION, "close")
        .header(hyper::header::USER_AGENT, "airq-healthcheck")
        .body(Empty::new())
        .map_err(Unhealthy::Request)?;
    let response = sender.send_request(request).await.map_err(http)?;
    let status = response.status();
    let outcome = if status == StatusCode::OK {
        Ok(())
    } else {
        let body = Limited::new(response.into_body(), BODY_LIMIT)
            .collect()
            .await;
        let detail = body.ok().and_then(|body| problem_detail(&body.to_bytes()));
        Err(Unhealthy::Status {
            address,
            status,
            detail,
        })
    };
    driver.abort();
    outcome
}

/// The `detail` of an RFC 9457 problem body, on one line.
fn problem_detail(body: &[u8]) -> Option<String> {
    let problem: serde_json::Value = serde_json::from_slice(body).ok()?;
    let detail = problem.get("detail")?.as_str()?;
    Some(detail.split_whitespace().collect::<Vec<_>>().join(" "))
}

/// Parses `3`, `3s` or `500ms` into a positive duration.
fn parse_timeout(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let (digits, to_duration): (&str, fn(u64) -> Duration) =
        if let Some(digits) = text.strip_suffix("ms") {
            (digits, Duration::from_millis)
        } else if let Some(digits) = text.strip_suffix('s') {
            (digits, Duration::from_secs)
        } else {
            (text, Duration::from_secs)
        };
    match digits.parse::<u64>() {
        Ok(amount) if amount > 0 => Ok(to_duration(amount)),
        _ => Err(format!(
            "`{text}` is not a positive timeout such as 3, 3s or 500ms"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unspecified_addresses_are_reached_over_loopback() {
        let at = |text: &str| target(text.parse().expect("an address")).expect("a target");
        assert_eq!(at("0.0.0.0:8080"), "127.0.0.1:8080".parse().expect("v4"));
        assert_eq!(at("[::]:8080"), "[::1]:8080".parse().expect("v6"));
        assert_eq!(at("10.1.2.3:9000"), "10.1.2.3:9000".parse().expect("kept"));
        assert!(target("0.0.0.0:0".parse().expect("port 0")).is_err());
    }

    #[test]
    fn timeouts_take_seconds_or_milliseconds() {
        assert_eq!(parse_timeout("3"), Ok(Duration::from_secs(3)));
        assert_eq!(parse_timeout("3s"), Ok(Duration::from_secs(3)));
        assert_eq!(parse_timeout("500ms"), Ok(Duration::from_millis(500)));
        for bad in ["0", "0ms", "", "3m", "-1s", "soon"] {
            assert!(parse_timeout(bad).is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn a_problem_detail_is_kept_on_one_line() {
        let body =
            br#"{"type":"about:blank","status":503,"detail":"the reading store\ndoes not answer"}"#;
        assert_eq!(
            problem_detail(body).as_deref(),
            Some("the reading store does not answer")
        );
        assert_eq!(problem_detail(b"not json"), None);
    }
}

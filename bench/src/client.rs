//! A minimal HTTP/1.1 client over hyper's connection API.
//!
//! Each [`Lane`] owns at most one TCP connection, kept alive, with one request in flight at a
//! time, so "C connections" means exactly C sockets (no pool that opens more behind our back).
//! A connection that failed or timed out is dropped and replaced on the next request.
//!
//! Targets must be loopback addresses: the benchmark never sends load anywhere else.

use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1::SendRequest;
use hyper::header::{HeaderName, HeaderValue, AUTHORIZATION, CONTENT_TYPE, HOST};
use hyper::{HeaderMap, Method, Request, StatusCode, Uri};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

use crate::BoxError;

/// The body type of every request the benchmark sends.
pub type Body = Full<Bytes>;

/// Where the load goes: a resolved loopback address and the `Host` header naming it.
#[derive(Debug, Clone)]
pub struct Target {
    /// The socket address connections are opened to.
    pub addr: SocketAddr,
    /// The `Host` header of every request.
    pub host: HeaderValue,
    /// The base URL as given, for reports.
    pub url: String,
}

impl Target {
    /// Parses `http://host:port`, resolves it and refuses anything that is not loopback.
    pub async fn parse(url: &str) -> Result<Self, BoxError> {
        let uri: Uri = url.parse()?;
        if uri.scheme_str() != Some("http") {
            return Err(format!("target {url}: only http:// is supported").into());
        }
        let host = uri
            .host()
            .ok_or_else(|| format!("target {url} has no host"))?;
        let port = uri.port_u16().unwrap_or(80);
        let bare = host.trim_start_matches('[').trim_end_matches(']');
        let addrs: Vec<SocketAddr> = tokio::net::lookup_host((bare, port)).await?.collect();
        let addr = *addrs
            .first()
            .ok_or_else(|| format!("target {url} resolves to nothing"))?;
        if !addrs.iter().all(|addr| addr.ip().is_loopback()) {
            return Err(format!(
                "target {url} is not a loopback address: airq-bench only sends load to this machine"
            )
            .into());
        }
        let authority = uri
            .authority()
            .map(|authority| authority.as_str().to_owned())
            .unwrap_or_else(|| format!("{host}:{port}"));
        Ok(Self {
            addr,
            host: HeaderValue::try_from(authority)?,
            url: url.trim_end_matches('/').to_owned(),
        })
    }

    /// A target for a server bound in this process.
    pub fn local(addr: SocketAddr) -> Self {
        let url = format!("http://{addr}");
        Self {
            addr,
            host: HeaderValue::try_from(addr.to_string())
                .unwrap_or(HeaderValue::from_static("127.0.0.1")),
            url,
        }
    }

    /// A request to `path` (origin form, e.g. `/api/v1/data`) with `Host` set.
    pub fn request(&self, method: Method, path: &str, body: Bytes) -> Request<Body> {
        let mut request = Request::new(Full::new(body));
        *request.method_mut() = method;
        *request.uri_mut() = Uri::try_from(path).unwrap_or_else(|_| Uri::from_static("/"));
        request.headers_mut().insert(HOST, self.host.clone());
        request
    }

    /// `GET path`, with a bearer token when given.
    pub fn get(&self, path: &str, bearer: Option<&HeaderValue>) -> Request<Body> {
        let mut request = self.request(Method::GET, path, Bytes::new());
        if let Some(bearer) = bearer {
            request.headers_mut().insert(AUTHORIZATION, bearer.clone());
        }
        request
    }

    /// `POST path` with a JSON body and extra headers.
    pub fn post_json(
        &self,
        path: &str,
        body: Bytes,
        headers: &[(HeaderName, HeaderValue)],
    ) -> Request<Body> {
        let mut request = self.request(Method::POST, path, body);
        let map = request.headers_mut();
        map.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        for (name, value) in headers {
            map.insert(name.clone(), value.clone());
        }
        request
    }
}

/// `Authorization: Bearer <token>`.
pub fn bearer(token: &str) -> Result<HeaderValue, BoxError> {
    let mut value = HeaderValue::try_from(format!("Bearer {token}"))?;
    value.set_sensitive(true);
    Ok(value)
}

/// A complete response.
#[derive(Debug)]
pub struct Answer {
    /// Status code.
    pub status: StatusCode,
    /// Headers.
    pub headers: HeaderMap,
    /// The whole body.
    pub body: Bytes,
}

/// Why a request got no answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failure {
    /// The TCP connection or the HTTP handshake failed.
    Connect,
    /// The connection broke while sending or receiving.
    Io,
    /// No complete answer within the request timeout.
    Timeout,
}

impl Failure {
    /// A stable name for reports.
    pub fn name(self) -> &'static str {
        match self {
            Self::Connect => "connect",
            Self::Io => "io",
            Self::Timeout => "timeout",
        }
    }
}

/// One keep-alive connection slot: connects lazily, reconnects after a failure.
#[derive(Debug)]
pub struct Lane {
    addr: SocketAddr,
    sender: Option<SendRequest<Body>>,
}

impl Lane {
    /// A lane to `addr`, not yet connected.
    pub fn new(addr: SocketAddr) -> Self {
        Self { addr, sender: None }
    }

    /// A new keep-alive connection to `addr` (for a caller that reads bodies as they stream).
    pub async fn connect(addr: SocketAddr) -> Result<SendRequest<Body>, BoxError> {
        let stream = TcpStream::connect(addr).await?;
        stream.set_nodelay(true)?;
        let (sender, connection) =
            hyper::client::conn::http1::handshake::<_, Body>(TokioIo::new(stream)).await?;
        tokio::spawn(async move {
            // Ends when the sender is dropped or the peer closes; errors surface on the sender.
            let _ = connection.await;
        });
        Ok(sender)
    }

    /// Sends `request` and reads the whole answer, within `timeout` (connecting included).
    pub async fn send(
        &mut self,
        request: Request<Body>,
        timeout: Duration,
    ) -> Result<Answer, Failure> {
        let addr = self.addr;
        let slot = &mut self.sender;
        let exchange = async move {
            if slot.as_ref().is_none_or(SendRequest::is_closed) {
                *slot = None;
                *slot = Some(Self::connect(addr).await.map_err(|_| Failure::Connect)?);
            }
            let sender = slot.as_mut().ok_or(Failure::Connect)?;
            sender.ready().await.map_err(|_| Failure::Io)?;
            let response = sender
                .send_request(request)
                .await
                .map_err(|_| Failure::Io)?;
            let (parts, body) = response.into_parts();
            let body = body.collect().await.map_err(|_| Failure::Io)?.to_bytes();
            Ok(Answer {
                status: parts.status,
                headers: parts.headers,
                body,
            })
        };
        let outcome = match tokio::time::timeout(timeout, exchange).await {
            Ok(outcome) => outcome,
            Err(_) => Err(Failure::Timeout),
        };
        if outcome.is_err() {
            // A connection with an unfinished exchange cannot be reused.
            self.sender = None;
        }
        outcome
    }
}

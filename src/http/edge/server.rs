//! The accept loop and the per-request wrapper.
//!
//! Every request gets a request id (echoed in `x-request-id`), runs inside a tracing span, and has
//! panics caught: a panicking handler answers a 500 problem instead of dropping the connection; its
//! answer adds one access line ([`crate::http::edge::access_log`]) and is counted on `/metrics` by
//! route template, method and status class. Shutdown stops accepting, lets in-flight requests
//! finish (idle keep-alive connections are closed) within the shutdown timeout, closes what is
//! still open after it, then returns ([`crate::http::edge::connections`]).

use std::convert::Infallible;
use std::future::Future;
use std::net::IpAddr;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::FutureExt as _;
use hyper::body::Body as _;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::Method;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpListener;
use tracing::Instrument as _;

use crate::http::cors;
use crate::http::edge::access_log::{self, IdentitySlot};
use crate::http::edge::connections::{ConnectionSettings, Connections, Peer};
use crate::http::edge::framing;
use crate::http::edge::request_id::{self, RequestId};
use crate::http::edge::write_deadline::WriteDeadline;
use crate::http::error::ApiError;
use crate::http::state::AppState;
use crate::http::{router, Request, Response};

/// A client must send its request head within this time (slow-loris protection).
const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(30);
/// Largest request head (request line and header fields), in bytes. Past it hyper answers 431
/// itself, with an empty body, and closes the connection: no route needs more, and a head is
/// buffered whole before anything else can look at it.
const MAX_HEAD_BYTES: usize = 16 * 1024;
/// Most header fields in a request head (hyper's default, stated); past it, 431 as above.
const MAX_HEADERS: usize = 100;
/// Longest request target (path and query) a route is looked up for; a longer one is a 414
/// problem (a CORS preflight excepted). No route needs more; past [`MAX_HEAD_BYTES`] it is
/// hyper's bare 431 instead.
pub const MAX_TARGET_BYTES: usize = 8 * 1024;
/// Largest read buffer of a connection (hyper also uses it to decide when to flush its write
/// buffer): a whole head, plus as much again for body bytes read along with it.
const MAX_BUFFER: usize = 2 * MAX_HEAD_BYTES;

/// Serves `listener` until `shutdown` completes, then drains within `settings.shutdown_timeout`.
/// Once it returns, no connection holds `state` any more.
pub async fn serve(
    listener: TcpListener,
    state: Arc<AppState>,
    settings: ConnectionSettings,
    shutdown: impl Future<Output = ()>,
) {
    let mut connections = Connections::new(settings);
    let mut http = http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(HEADER_READ_TIMEOUT)
        .max_header_size(MAX_HEAD_BYTES)
        .max_headers(MAX_HEADERS)
        .max_buf_size(MAX_BUFFER);
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        // Past the cap, new connections wait in the listen backlog until one closes.
        let permit = tokio::select! {
            permit = connections.room() => permit,
            () = &mut shutdown => break,
        };
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(error) => {
                    // Out of file descriptors and the like: pause instead of spinning.
                    tracing::warn!(%error, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        let _ = stream.set_nodelay(true);
        let stream = WriteDeadline::new(stream, settings.write_timeout, Arc::clone(&state.metrics));
        let state = Arc::clone(&state);
        let service = service_fn(move |request| {
            let state = Arc::clone(&state);
            async move { Ok::<_, Infallible>(handle(request, peer.ip(), &state).await) }
        });
        connections.serve(
            permit,
            peer,
            http.serve_connection(TokioIo::new(stream), service),
        );
    }
    drop(listener);
    tracing::info!("shutting down: draining in-flight requests");
    connections.close().await;
}

/// One request from `peer`: id, span, the checks of the message, a granted CORS preflight or the
/// routed handler, panic capture, problem rendering, access line.
async fn handle(mut request: Request, peer: IpAddr, state: &AppState) -> Response {
    let started = Instant::now();
    let identity = IdentitySlot::default();
    request.extensions_mut().insert(identity.clone());
    request.extensions_mut().insert(Peer(peer));
    let request_id = RequestId::for_request(request.headers());
    let method = request.method().clone();
    let path = request.uri().path().to_owned();
    let cors = cors::Policy::for_request(&path, request.headers(), &state.cors_origins);
    let span = tracing::info_span!("request", id = %request_id, %method, %path);
    let routed = async {
        let target = request
            .uri()
            .path_and_query()
            .map_or(0, |target| target.as_str().len());
        if target > MAX_TARGET_BYTES {
            return Err(ApiError::UriTooLong {
                limit: MAX_TARGET_BYTES,
            });
        }
        framing::check(&request)?;
        if request.method() == Method::OPTIONS {
            if let Some(granted) = cors::preflight(&path, request.headers(), &state.cors_origins) {
                return Ok(granted);
            }
        }
        router::dispatch(request, &path, peer, state).await
    };
    let outcome = AssertUnwindSafe(routed.instrument(span.clone()))
        .catch_unwind()
        .await;
    let mut response = match outcome {
        Ok(Ok(response)) => response,
        Ok(Err(error)) => span.in_scope(|| error.into_response(&path, &request_id)),
        Err(panic) => {
            let message = panic
                .downcast_ref::<&str>()
                .map(|s| (*s).to_owned())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_default();
            span.in_scope(|| ApiError::Panic(message).into_response(&path, &request_id))
        }
    };
    let route = router::template_of(&path);
    let status = response.status().as_u16();
    let duration = started.elapsed();
    state.metrics.request(route, &method, status, duration);
    let headers = response.headers_mut();
    headers.insert(request_id::HEADER, request_id.header_value());
    // Error answers included: a browser page reads the problem too.
    cors.apply(headers);
    access_log::log(&access_log::Entry {
        method: &method,
        route,
        path: &path,
        status,
        duration,
        bytes: response.body().size_hint().exact(),
        request_id: &request_id,
        identity: identity.get(),
    });
    response
}

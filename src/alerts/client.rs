//! The HTTP client that delivers webhooks: HTTPS verified against the system and Mozilla roots,
//! one bounded attempt at a time, and never to an address of this side of the network unless
//! private targets are allowed.
//!
//! The check sits in the connector's resolver ([`CheckedResolver`]): a host name is resolved
//! once per connection, every address it resolves to is judged, and the connection is made to
//! those judged addresses only — so a name that answers a public address to a check and a
//! private one to the connection (DNS rebinding) is refused either way. A literal address never
//! reaches the resolver and is judged before the request ([`WebhookClient::send`]).

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::header::{CONTENT_TYPE, USER_AGENT};
use hyper::{Method, Request, Uri};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::connect::dns::Name;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;

use crate::domain::alert::{Host, TargetPolicy, WebhookUrl};
use crate::tls::{Roots, TlsError};

/// Why an attempt failed before an answer came.
#[derive(Debug, thiserror::Error)]
pub enum SendError {
    /// The target is (or resolves to) an address webhooks may not reach.
    #[error("the target resolves to a loopback, private, link-local or metadata address")]
    Refused,
    /// The target's host name does not resolve.
    #[error("the target's host does not resolve")]
    Unresolved,
    /// The connection, TLS or the request failed.
    #[error("the request failed: {0}")]
    Request(String),
    /// No answer within the timeout.
    #[error("no answer within {0:?}")]
    Timeout(Duration),
}

/// Resolves host names and refuses any that resolves to an address the policy forbids.
#[derive(Debug, Clone, Copy)]
pub struct CheckedResolver {
    policy: TargetPolicy,
}

/// The resolver's refusal, carried through hyper's connector error as its source.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
struct ResolveRefusal(&'static str);

impl tower_service::Service<Name> for CheckedResolver {
    type Response = std::vec::IntoIter<SocketAddr>;
    type Error = std::io::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Self::Error>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, name: Name) -> Self::Future {
        let policy = self.policy;
        Box::pin(async move {
            let addresses = resolve(name.as_str(), policy).await.map_err(|error| {
                std::io::Error::new(
                    std::io::ErrorKind::PermissionDenied,
                    ResolveRefusal(match error {
                        SendError::Refused => "refused: resolves to an internal address",
                        _ => "does not resolve",
                    }),
                )
            })?;
            Ok(addresses.into_iter())
        })
    }
}

/// Every address `host` resolves to, all of them permitted by `policy`.
async fn resolve(host: &str, policy: TargetPolicy) -> Result<Vec<SocketAddr>, SendError> {
    let addresses: Vec<SocketAddr> = tokio::net::lookup_host((host, 0))
        .await
        .map_err(|_| SendError::Unresolved)?
        .collect();
    if addresses.is_empty() {
        return Err(SendError::Unresolved);
    }
    if addresses
        .iter()
        .any(|address| !policy.permits(address.ip()))
    {
        return Err(SendError::Refused);
    }
    Ok(addresses)
}

/// Whether `url` may be a target now: its literal address, or every address its name resolves
/// to, permitted. A name that does not resolve now is let through: it may later, and every
/// delivery checks again.
pub async fn check_target(url: &WebhookUrl, policy: TargetPolicy) -> Result<(), SendError> {
    match url.host() {
        Host::Address(address) if !policy.permits(*address) => Err(SendError::Refused),
        Host::Address(_) => Ok(()),
        Host::Name(name) => match resolve(name, policy).await {
            Err(SendError::Refused) => Err(SendError::Refused),
            _ => Ok(()),
        },
    }
}

/// Sends webhooks.
#[derive(Clone)]
pub struct WebhookClient {
    client: Client<HttpsConnector<HttpConnector<CheckedResolver>>, Full<Bytes>>,
    policy: TargetPolicy,
    timeout: Duration,
}

impl std::fmt::Debug for WebhookClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebhookClient")
            .field("policy", &self.policy)
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

impl WebhookClient {
    /// A client under `policy` whose attempts each get `timeout` for the whole answer.
    pub fn new(policy: TargetPolicy, timeout: Duration) -> Result<Self, TlsError> {
        let mut http = HttpConnector::new_with_resolver(CheckedResolver { policy });
        http.enforce_http(false);
        http.set_connect_timeout(Some(timeout));
        let builder = hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config(Roots::from_file(None).client_config()?);
        let connector = if policy.allow_private {
            builder.https_or_http().enable_http1().wrap_connector(http)
        } else {
            builder.https_only().enable_http1().wrap_connector(http)
        };
        Ok(Self {
            client: Client::builder(TokioExecutor::new()).build(connector),
            policy,
            timeout,
        })
    }

    /// POSTs `body` to `url` with its signature; the answer's status.
    pub async fn send(
        &self,
        url: &WebhookUrl,
        signature: &str,
        body: Bytes,
    ) -> Result<u16, SendError> {
        if let Host::Address(address) = url.host() {
            if !self.policy.permits(*address) {
                return Err(SendError::Refused);
            }
        }
        let uri: Uri = url
            .as_str()
            .parse()
            .map_err(|error: hyper::http::uri::InvalidUri| SendError::Request(error.to_string()))?;
        let request = Request::builder()
            .method(Method::POST)
            .uri(uri)
            .header(CONTENT_TYPE, "application/json")
            .header(USER_AGENT, concat!("airq/", env!("CARGO_PKG_VERSION")))
            .header(super::sign::SIGNATURE_HEADER, signature)
            .body(Full::new(body))
            .map_err(|error| SendError::Request(error.to_string()))?;
        let response = tokio::time::timeout(self.timeout, self.client.request(request))
            .await
            .map_err(|_| SendError::Timeout(self.timeout))?
            // A refusal of the resolver reads in the chain: "… refused: resolves to an
            // internal address".
            .map_err(|error| SendError::Request(crate::telemetry::chain(&error)))?;
        Ok(response.status().as_u16())
    }
}

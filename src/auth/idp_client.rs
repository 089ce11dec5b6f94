//! The HTTP client that reaches the identity provider (its discovery document and its JWKS).
//!
//! HTTPS is verified against [`Roots`]: the system store and the bundled Mozilla roots, or only
//! the CAs of `AIRQ_AUTH_CA_FILE` (a private identity provider). Plain `http` URLs are accepted
//! too, for providers on a trusted local network. Every request is bounded: an answer must come
//! within [`FETCH_TIMEOUT`] and its body may be at most [`MAX_DOCUMENT`] bytes, so a slow or
//! hostile provider cannot hold a start or a token check for long.

use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Empty, Limited};
use hyper::Uri;
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;

use crate::tls::{Roots, TlsError};

/// A request to the provider gets this long for its whole answer.
pub const FETCH_TIMEOUT: Duration = Duration::from_secs(5);
/// The largest document taken from the provider.
pub const MAX_DOCUMENT: usize = 1 << 20;

/// Why a document could not be fetched.
#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    /// The connection, TLS or the request failed.
    #[error("the request failed")]
    Request(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// The provider answered with an error status.
    #[error("the provider answered {0}")]
    Status(hyper::StatusCode),
    /// The answer took too long.
    #[error("no answer within {FETCH_TIMEOUT:?}")]
    Timeout,
}

/// An HTTP(S) client for the identity provider.
#[derive(Clone)]
pub struct IdpClient {
    client: Client<HttpsConnector<HttpConnector>, Empty<Bytes>>,
}

impl std::fmt::Debug for IdpClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IdpClient").finish_non_exhaustive()
    }
}

impl IdpClient {
    /// A client trusting `roots` for HTTPS.
    pub fn new(roots: &Roots) -> Result<Self, TlsError> {
        let connector = hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config(roots.client_config()?)
            .https_or_http()
            .enable_http1()
            .build();
        Ok(Self {
            client: Client::builder(TokioExecutor::new()).build(connector),
        })
    }

    /// The body of a successful `GET url`.
    pub async fn get(&self, url: &Uri) -> Result<Bytes, FetchError> {
        let request = async {
            let response = self
                .client
                .get(url.clone())
                .await
                .map_err(|error| FetchError::Request(error.into()))?;
            if !response.status().is_success() {
                return Err(FetchError::Status(response.status()));
            }
            let body = Limited::new(response.into_body(), MAX_DOCUMENT)
                .collect()
                .await
                .map_err(FetchError::Request)?;
            Ok(body.to_bytes())
        };
        tokio::time::timeout(FETCH_TIMEOUT, request)
            .await
            .map_err(|_| FetchError::Timeout)?
    }
}

/// `text` as an absolute `http` or `https` URL.
pub fn web_url(text: &str) -> Option<Uri> {
    let uri: Uri = text.parse().ok()?;
    (matches!(uri.scheme_str(), Some("http" | "https")) && uri.authority().is_some()).then_some(uri)
}

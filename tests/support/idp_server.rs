//! An identity provider served by the test: fixed JSON documents by path (a provider
//! configuration, a JWKS), over plain HTTP or over HTTPS with a certificate the test made.

#![allow(dead_code, unreachable_pub)]

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use serde_json::Value;
use tokio::net::TcpListener;

use crate::test_ca::ServerCert;

/// A running provider; stops when dropped.
pub struct IdpServer {
    /// `http://127.0.0.1:PORT` or `https://127.0.0.1:PORT`.
    pub base: String,
    task: tokio::task::JoinHandle<()>,
}

impl IdpServer {
    /// Serves the documents `documents(base)` names by path (404 for any other path), over
    /// HTTPS with `tls` when given.
    pub async fn start(
        tls: Option<&ServerCert>,
        documents: impl FnOnce(&str) -> Vec<(String, Value)>,
    ) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let scheme = if tls.is_some() { "https" } else { "http" };
        let base = format!(
            "{scheme}://{}",
            listener.local_addr().expect("bound address")
        );
        let documents: Arc<HashMap<String, Bytes>> = Arc::new(
            documents(&base)
                .into_iter()
                .map(|(path, document)| {
                    let body = serde_json::to_vec(&document).expect("json");
                    (path, Bytes::from(body))
                })
                .collect(),
        );
        let acceptor = tls.map(|cert| {
            let config = rustls::ServerConfig::builder_with_provider(Arc::new(
                rustls::crypto::ring::default_provider(),
            ))
            .with_safe_default_protocol_versions()
            .expect("protocol versions")
            .with_no_client_auth()
            .with_single_cert(vec![cert.cert_der.clone()], cert.key_der.clone_key())
            .expect("server certificate");
            tokio_rustls::TlsAcceptor::from(Arc::new(config))
        });
        let task = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let documents = Arc::clone(&documents);
                let acceptor = acceptor.clone();
                tokio::spawn(async move {
                    let service = service_fn(move |request: hyper::Request<Incoming>| {
                        let found = documents.get(request.uri().path()).cloned();
                        async move {
                            let response = match found {
                                Some(body) => hyper::Response::builder()
                                    .header("content-type", "application/json")
                                    .body(Full::new(body)),
                                None => hyper::Response::builder()
                                    .status(404)
                                    .body(Full::new(Bytes::new())),
                            };
                            Ok::<_, Infallible>(response.expect("response"))
                        }
                    });
                    match acceptor {
                        Some(acceptor) => {
                            // A client that does not trust the certificate ends the handshake.
                            if let Ok(stream) = acceptor.accept(stream).await {
                                let _ = http1::Builder::new()
                                    .serve_connection(TokioIo::new(stream), service)
                                    .await;
                            }
                        }
                        None => {
                            let _ = http1::Builder::new()
                                .serve_connection(TokioIo::new(stream), service)
                                .await;
                        }
                    }
                });
            }
        });
        Self { base, task }
    }
}

impl Drop for IdpServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

//! Test helpers shared by the black-box suites: spawn the real server on 127.0.0.1:0 with its own
//! data directory and a manual clock, and speak HTTP to it.

#![allow(dead_code, unreachable_pub)]

use std::sync::Arc;
use std::time::Duration;

use airq::auth::LocalIssuer;
use airq::clock::ManualClock;
use airq::{Application, Config};
use chrono::Utc;
use reqwest::{Method, RequestBuilder, Response};
use serde_json::{json, Value};
use tempfile::TempDir;
use tokio::sync::oneshot;

/// A running server with its own data directory.
pub struct TestApp {
    /// `http://127.0.0.1:PORT`
    pub base: String,
    /// A client without connection reuse surprises.
    pub client: reqwest::Client,
    /// The server's clock.
    pub clock: ManualClock,
    /// The data directory (deleted when the app is dropped).
    pub data_dir: TempDir,
    issuer: LocalIssuer,
    shutdown: Option<oneshot::Sender<()>>,
    server: Option<tokio::task::JoinHandle<()>>,
}

impl TestApp {
    /// The embedded deployment with default settings.
    pub async fn spawn() -> Self {
        Self::spawn_with(|_| {}).await
    }

    /// The embedded deployment, with the configuration adjusted first.
    pub async fn spawn_with(configure: impl FnOnce(&mut Config)) -> Self {
        let data_dir = tempfile::tempdir().expect("temporary data dir");
        let mut config = Config::new(
            "127.0.0.1:0".parse().expect("address"),
            data_dir.path().to_owned(),
        );
        configure(&mut config);
        let clock = ManualClock::new(Utc::now());
        let app = Application::build(config, Arc::new(clock.clone()))
            .await
            .expect("the server starts");
        let base = format!("http://{}", app.local_addr());
        let (shutdown, stopped) = oneshot::channel::<()>();
        let server = tokio::spawn(app.run_until(async {
            let _ = stopped.await;
        }));
        let issuer = LocalIssuer::open(data_dir.path()).expect("local issuer");
        Self {
            base,
            client: reqwest::Client::builder()
                .timeout(Duration::from_secs(30))
                .build()
                .expect("client"),
            clock,
            data_dir,
            issuer,
            shutdown: Some(shutdown),
            server: Some(server),
        }
    }

    /// Stops the server and waits until it has drained.
    pub async fn stop(mut self) {
        if let Some(shutdown) = self.shutdown.take() {
            let _ = shutdown.send(());
        }
        if let Some(server) = self.server.take() {
            server.await.expect("the server task ends cleanly");
        }
    }

    /// The absolute URL of an API path (`/devices` → `http://…/api/v1/devices`).
    pub fn url(&self, path: &str) -> String {
        format!("{}/api/v1{path}", self.base)
    }

    /// A valid owner token from the data dir's local issuer.
    pub fn token(&self, owner: &str) -> String {
        self.issuer
            .mint(owner, Duration::from_secs(3600))
            .expect("token")
    }

    /// A request to an API path with `owner`'s bearer token.
    pub fn owner_request(&self, method: Method, path: &str, owner: &str) -> RequestBuilder {
        self.client
            .request(method, self.url(path))
            .bearer_auth(self.token(owner))
    }

    /// `GET path` as `owner`.
    pub async fn get_as(&self, owner: &str, path: &str) -> Response {
        self.owner_request(Method::GET, path, owner)
            .send()
            .await
            .expect("request sent")
    }

    /// `method path` as `owner` with a JSON body.
    pub async fn send_json_as(
        &self,
        owner: &str,
        method: Method,
        path: &str,
        body: &Value,
    ) -> Response {
        self.owner_request(method, path, owner)
            .json(body)
            .send()
            .await
            .expect("request sent")
    }

    /// Registers a device for `owner` and returns the `data` object (with `device_key`).
    pub async fn register(&self, owner: &str, body: Value) -> Value {
        let response = self
            .send_json_as(owner, Method::POST, "/devices", &body)
            .await;
        assert_eq!(response.status(), 201, "registration succeeds");
        response.json::<Value>().await.expect("json")["data"].clone()
    }

    /// Registers a private device named `name`.
    pub async fn register_named(&self, owner: &str, name: &str) -> Value {
        self.register(owner, json!({ "name": name })).await
    }
}

impl Drop for TestApp {
    fn drop(&mut self) {
        if let Some(shutdown) = self.shutdown.take() {
            let _ = shutdown.send(());
        }
    }
}

/// The body of a problem response, after checking the media type and the common members.
pub async fn problem(response: Response, status: u16) -> Value {
    assert_eq!(response.status(), status, "status");
    assert_eq!(
        response.headers()["content-type"],
        "application/problem+json",
        "problem media type"
    );
    assert!(
        response.headers().contains_key("x-request-id"),
        "request id header"
    );
    let body: Value = response.json().await.expect("problem json");
    assert_eq!(body["status"], status);
    assert!(
        !body["title"].as_str().unwrap_or_default().is_empty(),
        "title"
    );
    assert!(
        !body["detail"].as_str().unwrap_or_default().is_empty(),
        "detail"
    );
    assert!(
        body["instance"]
            .as_str()
            .unwrap_or_default()
            .starts_with('/'),
        "instance"
    );
    body
}

/// The `(name, code, in)` triples of a 422 problem, sorted.
pub fn field_errors(problem: &Value) -> Vec<(String, String, String)> {
    let mut errors: Vec<_> = problem["errors"]
        .as_array()
        .expect("errors array")
        .iter()
        .map(|error| {
            (
                error["name"].as_str().unwrap_or_default().to_owned(),
                error["code"].as_str().unwrap_or_default().to_owned(),
                error["in"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect();
    errors.sort();
    errors
}

/// One expected field error.
pub fn fe(name: &str, code: &str, location: &str) -> (String, String, String) {
    (name.to_owned(), code.to_owned(), location.to_owned())
}

//! Reaching an external identity provider: the JWKS URL discovered from the issuer alone (OpenID
//! Connect Discovery), and whose HTTPS is trusted (the public roots, or `AIRQ_AUTH_CA_FILE`).
//! The provider is served by the test ([`IdpServer`]); its certificates come from a CA the test
//! makes ([`TestCa`]).

use std::sync::Arc;

use airq::clock::ManualClock;
use airq::config::OwnerAuth;
use airq::{Application, Config};
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde_json::{json, Value};

use crate::common::{problem, TestApp};
use crate::idp_server::IdpServer;
use crate::test_ca::TestCa;

const RSA_PRIVATE_PEM: &[u8] = include_bytes!("../fixtures/rsa-test-key.pem");
const RSA_PUBLIC_JWK: &str = include_str!("../fixtures/rsa-test-key.jwk.json");
const CONFIGURATION: &str = "/.well-known/openid-configuration";
const KEYS: &str = "/keys";

/// A JWKS holding the RSA fixture as `rsa-1`.
fn jwks() -> Value {
    let mut jwk: Value = serde_json::from_str(RSA_PUBLIC_JWK).expect("JWK fixture");
    jwk["kid"] = json!("rsa-1");
    jwk["alg"] = json!("RS256");
    json!({ "keys": [jwk] })
}

/// An RS256 token of `issuer` for `sub`, valid for an hour.
fn token(issuer: &str, sub: &str) -> String {
    let now = chrono::Utc::now().timestamp();
    let claims = json!({ "sub": sub, "iss": issuer, "iat": now, "exp": now + 3600 });
    let mut header = Header::new(Algorithm::RS256);
    header.kid = Some("rsa-1".to_owned());
    let key = EncodingKey::from_rsa_pem(RSA_PRIVATE_PEM).expect("RSA fixture key");
    jsonwebtoken::encode(&header, &claims, &key).expect("token signed")
}

/// The issuer's path on the provider (a path, as Keycloak's realms have).
const REALM: &str = "/realms/airq";

/// A provider for the issuer `{base}/realms/airq`, serving `configuration(issuer, base)` as
/// that issuer's provider configuration and the JWKS at `/keys`; and the issuer.
async fn provider(configuration: impl FnOnce(&str, &str) -> Value) -> (IdpServer, String) {
    let mut issuer = String::new();
    let server = IdpServer::start(None, |base| {
        issuer = format!("{base}{REALM}");
        vec![
            (
                format!("{REALM}{CONFIGURATION}"),
                configuration(&issuer, base),
            ),
            (KEYS.to_owned(), jwks()),
        ]
    })
    .await;
    (server, issuer)
}

/// Owner tokens from `issuer`, its keys discovered.
fn discover(issuer: &str) -> impl FnOnce(&mut Config) {
    let issuer = issuer.to_owned();
    move |config| {
        config.owner_auth = OwnerAuth::Discovery(issuer.clone());
        config.auth_issuer = Some(issuer);
    }
}

/// A configuration with the owner tokens as `configure` says.
fn config(configure: impl FnOnce(&mut Config)) -> (Config, tempfile::TempDir) {
    let data_dir = tempfile::tempdir().expect("data dir");
    let mut config = Config::new(
        "127.0.0.1:0".parse().expect("address"),
        data_dir.path().to_owned(),
    );
    configure(&mut config);
    (config, data_dir)
}

/// Why a server configured by `configure` does not start.
async fn start_failure(configure: impl FnOnce(&mut Config)) -> String {
    let (config, _data_dir) = config(configure);
    let clock = Arc::new(ManualClock::new(chrono::Utc::now()));
    match Application::build(config, clock).await {
        Ok(_) => panic!("the server started"),
        Err(error) => airq::telemetry::chain(&error),
    }
}

async fn list_devices(app: &TestApp, token: &str) -> reqwest::Response {
    app.client
        .get(app.url("/devices"))
        .bearer_auth(token)
        .send()
        .await
        .expect("request")
}

#[airq_test::test]
async fn an_issuer_alone_discovers_its_jwks_and_its_tokens_are_accepted() {
    let (_provider, issuer) = provider(|issuer, base| {
        json!({ "issuer": issuer, "jwks_uri": format!("{base}{KEYS}"), "response_types_supported": ["code"] })
    })
    .await;
    let app = TestApp::spawn_with(discover(&issuer)).await;
    assert_eq!(
        list_devices(&app, &token(&issuer, "alice")).await.status(),
        200
    );
    app.stop().await;
}

#[airq_test::test]
async fn a_configuration_naming_another_issuer_stops_the_start() {
    let (_provider, issuer) = provider(|_, base| {
        json!({ "issuer": "https://impostor.example", "jwks_uri": format!("{base}{KEYS}") })
    })
    .await;
    let failure = start_failure(discover(&issuer)).await;
    assert!(
        failure.contains("names the issuer \"https://impostor.example\"")
            && failure.contains(&format!("not the configured \"{issuer}\""))
            && failure.contains("Discovery 4.3"),
        "{failure}"
    );
}

#[airq_test::test]
async fn a_configuration_without_jwks_uri_stops_the_start() {
    let (_provider, issuer) = provider(|issuer, _| json!({ "issuer": issuer })).await;
    let failure = start_failure(discover(&issuer)).await;
    assert!(
        failure.contains("is not an OpenID provider configuration") && failure.contains("jwks_uri"),
        "{failure}"
    );
}

#[airq_test::test]
async fn an_issuer_unreachable_at_start_does_not_stop_it_and_owner_routes_answer_503() {
    let closed = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let issuer = format!("http://{}{REALM}", closed.local_addr().expect("address"));
    drop(closed);
    let app = TestApp::spawn_with(discover(&issuer)).await;
    let response = list_devices(&app, &token(&issuer, "alice")).await;
    assert!(response.headers().contains_key("retry-after"));
    let body = problem(response, 503).await;
    assert_eq!(body["type"], "about:blank");
    assert!(
        body["detail"]
            .as_str()
            .is_some_and(|detail| detail.contains("identity provider")),
        "{body}"
    );
    let scrape = crate::metrics::Scrape::of(&app).await;
    assert_eq!(
        scrape.counter("airq_identity_provider_failures", &[]),
        1.0,
        "counted"
    );
    app.stop().await;
}

/// Owner tokens of `issuer` verified against the JWKS at `url`, trusting `ca` when given.
fn jwks_at(url: String, ca: Option<std::path::PathBuf>) -> impl FnOnce(&mut Config) {
    move |config| {
        config.owner_auth = OwnerAuth::Jwks(url);
        config.auth_issuer = Some(HTTPS_ISSUER.to_owned());
        config.auth_ca_file = ca;
    }
}

const HTTPS_ISSUER: &str = "https://idp.test";

/// A JWKS served over HTTPS with a certificate for 127.0.0.1 from a CA made by the test.
async fn https_jwks(ca: &TestCa) -> (IdpServer, String) {
    let cert = ca.server_cert(&["127.0.0.1"]);
    let server = IdpServer::start(Some(&cert), |_| vec![(KEYS.to_owned(), jwks())]).await;
    let url = format!("{}{KEYS}", server.base);
    (server, url)
}

#[airq_test::test]
async fn a_jwks_over_https_from_the_configured_ca_is_trusted() {
    let ca = TestCa::new("private IdP CA");
    let (_server, url) = https_jwks(&ca).await;
    let app = TestApp::spawn_with(jwks_at(url, Some(ca.cert_file()))).await;
    assert_eq!(
        list_devices(&app, &token(HTTPS_ISSUER, "alice"))
            .await
            .status(),
        200
    );
    app.stop().await;
}

#[airq_test::test]
async fn a_jwks_over_https_from_a_ca_neither_public_nor_configured_is_not_trusted() {
    let ca = TestCa::new("private IdP CA");
    let (_server, url) = https_jwks(&ca).await;
    for trusted in [None, Some(TestCa::new("another CA"))] {
        let app = TestApp::spawn_with(jwks_at(
            url.clone(),
            trusted.as_ref().map(TestCa::cert_file),
        ))
        .await;
        let response = list_devices(&app, &token(HTTPS_ISSUER, "alice")).await;
        assert_eq!(problem(response, 503).await["type"], "about:blank");
        app.stop().await;
    }
}

#[airq_test::test]
async fn an_unreadable_ca_file_stops_the_start() {
    let failure = start_failure(jwks_at(
        "https://idp.test/keys".to_owned(),
        Some("/nonexistent/ca.pem".into()),
    ))
    .await;
    assert!(
        failure.contains("trusting the identity provider's certificate authorities")
            && failure.contains("/nonexistent/ca.pem"),
        "{failure}"
    );
}

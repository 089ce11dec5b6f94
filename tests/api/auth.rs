//! Owner authentication: bearer JWTs from the local issuer, a shared HS256 secret or a JWKS
//! document, with `exp`/`sub` required, `iss`/`aud` enforced when configured, and no way around
//! the one algorithm a key is for.

use std::convert::Infallible;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use airq::config::OwnerAuth;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use ring::rand::SystemRandom;
use ring::signature::{
    EcdsaKeyPair, Ed25519KeyPair, KeyPair as _, ECDSA_P256_SHA256_FIXED_SIGNING,
};
use serde_json::{json, Value};
use tokio::net::TcpListener;

use crate::common::{problem, TestApp};

// ---------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------

/// Seconds since the epoch, as the verifier sees them (system time, not the app's manual clock).
fn now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("after the epoch")
        .as_secs()
        .try_into()
        .expect("fits")
}

/// Claims valid for an hour, for `sub`, with `iss` and `aud` when given.
fn claims(sub: &str, iss: Option<&str>, aud: Option<&str>) -> Value {
    let mut claims = json!({ "sub": sub, "iat": now(), "exp": now() + 3600 });
    if let Some(iss) = iss {
        claims["iss"] = json!(iss);
    }
    if let Some(aud) = aud {
        claims["aud"] = json!(aud);
    }
    claims
}

/// A JWT over `claims`, signed with `key` for `algorithm`, naming `kid` when given.
fn sign(algorithm: Algorithm, kid: Option<&str>, key: &EncodingKey, claims: &Value) -> String {
    let mut header = Header::new(algorithm);
    header.kid = kid.map(str::to_owned);
    jsonwebtoken::encode(&header, claims, key).expect("token signed")
}

/// An HS256 token keyed with `secret`.
fn hs256(secret: &[u8], kid: Option<&str>, claims: &Value) -> String {
    sign(
        Algorithm::HS256,
        kid,
        &EncodingKey::from_secret(secret),
        claims,
    )
}

fn b64(bytes: &[u8]) -> String {
    URL_SAFE_NO_PAD.encode(bytes)
}

/// `GET /devices` with the given `Authorization` header (none when `None`).
async fn list_devices(app: &TestApp, authorization: Option<&str>) -> reqwest::Response {
    let mut request = app.client.get(app.url("/devices"));
    if let Some(value) = authorization {
        request = request.header("authorization", value);
    }
    request.send().await.expect("request sent")
}

/// `GET /devices` with `Authorization: Bearer <token>`.
async fn list_with(app: &TestApp, token: &str) -> reqwest::Response {
    list_devices(app, Some(&format!("Bearer {token}"))).await
}

/// A 401 problem with the owner challenge.
async fn assert_unauthorized(response: reqwest::Response) {
    assert_eq!(
        response
            .headers()
            .get("www-authenticate")
            .map(|value| value.to_str().expect("ascii")),
        Some("Bearer realm=\"airq\""),
        "owner challenge"
    );
    problem(response, 401).await;
}

/// `GET /devices` answers 200 with a `data` list.
async fn assert_accepted(response: reqwest::Response) {
    assert_eq!(response.status(), 200, "token accepted");
    let body: Value = response.json().await.expect("json");
    assert!(body["data"].is_array(), "{body}");
}

/// The local issuer's secret, as the server keeps it in its data dir.
fn local_secret(app: &TestApp) -> Vec<u8> {
    let secret = std::fs::read(app.data_dir.path().join("owner-token.secret")).expect("secret");
    assert_eq!(secret.len(), 32, "the secret is 32 raw bytes");
    secret
}

/// A token signed with the data dir's secret, over any claims.
fn local_token(app: &TestApp, claims: &Value) -> String {
    hs256(&local_secret(app), None, claims)
}

// ---------------------------------------------------------------------------------------------
// Local issuer (the embedded default)
// ---------------------------------------------------------------------------------------------

#[airq_test::test]
async fn a_local_token_is_accepted() {
    let app = TestApp::spawn().await;
    assert_accepted(list_with(&app, &app.token("alice")).await).await;
    let custom = local_token(&app, &claims("alice", Some("airq-local"), None));
    assert_accepted(list_with(&app, &custom).await).await;
}

#[airq_test::test]
async fn a_request_without_authorization_is_401_with_a_bearer_challenge() {
    let app = TestApp::spawn().await;
    assert_unauthorized(list_devices(&app, None).await).await;
}

#[airq_test::test]
async fn an_expired_token_is_401() {
    let app = TestApp::spawn().await;
    let mut expired = claims("alice", Some("airq-local"), None);
    expired["iat"] = json!(now() - 7200);
    expired["exp"] = json!(now() - 3600);
    assert_unauthorized(list_with(&app, &local_token(&app, &expired)).await).await;
}

#[airq_test::test]
async fn a_token_signed_with_another_secret_is_401() {
    let app = TestApp::spawn().await;
    let token = hs256(&[7u8; 32], None, &claims("alice", Some("airq-local"), None));
    assert_unauthorized(list_with(&app, &token).await).await;
}

#[airq_test::test]
async fn a_token_of_another_data_dir_is_401() {
    let app = TestApp::spawn().await;
    let other = TestApp::spawn().await;
    assert_unauthorized(list_with(&app, &other.token("alice")).await).await;
}

#[airq_test::test]
async fn a_token_without_exp_is_401() {
    let app = TestApp::spawn().await;
    let token = local_token(
        &app,
        &json!({ "iss": "airq-local", "sub": "alice", "iat": now() }),
    );
    assert_unauthorized(list_with(&app, &token).await).await;
}

#[airq_test::test]
async fn a_token_without_sub_is_401() {
    let app = TestApp::spawn().await;
    let token = local_token(
        &app,
        &json!({ "iss": "airq-local", "iat": now(), "exp": now() + 3600 }),
    );
    assert_unauthorized(list_with(&app, &token).await).await;
}

#[airq_test::test]
async fn a_token_with_an_empty_or_non_string_sub_is_401() {
    let app = TestApp::spawn().await;
    for sub in [json!(""), json!(42), json!(null), json!("x".repeat(256))] {
        let mut bad = claims("alice", Some("airq-local"), None);
        bad["sub"] = sub.clone();
        let response = list_with(&app, &local_token(&app, &bad)).await;
        assert_eq!(response.status(), 401, "sub {sub}");
        assert_unauthorized(response).await;
    }
}

#[airq_test::test]
async fn an_alg_none_token_is_401() {
    let app = TestApp::spawn().await;
    let header = b64(br#"{"alg":"none","typ":"JWT"}"#);
    let payload = b64(&serde_json::to_vec(&claims("alice", Some("airq-local"), None)).unwrap());
    for token in [
        format!("{header}.{payload}."),
        format!("{header}.{payload}"),
    ] {
        assert_unauthorized(list_with(&app, &token).await).await;
    }
}

#[airq_test::test]
async fn a_token_naming_critical_header_extensions_is_401() {
    let app = TestApp::spawn().await;
    let payload = b64(&serde_json::to_vec(&claims("alice", Some("airq-local"), None)).unwrap());
    let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, &local_secret(&app));
    let signed = |header: &str| {
        let header = b64(header.as_bytes());
        let tag = ring::hmac::sign(&key, format!("{header}.{payload}").as_bytes());
        format!("{header}.{payload}.{}", b64(tag.as_ref()))
    };
    // The same claims and key pass without `crit` (RFC 7515 §4.1.11: an extension the recipient
    // does not understand makes the token invalid).
    assert_accepted(list_with(&app, &signed(r#"{"alg":"HS256","typ":"JWT"}"#)).await).await;
    let critical = r#"{"alg":"HS256","typ":"JWT","crit":["x-airq-unknown"],"x-airq-unknown":true}"#;
    assert_unauthorized(list_with(&app, &signed(critical)).await).await;
}

#[airq_test::test]
async fn an_hs256_token_relabelled_as_another_algorithm_is_401() {
    let app = TestApp::spawn().await;
    let valid = app.token("alice");
    let (_, rest) = valid.split_once('.').unwrap();
    for alg in ["HS384", "HS512", "RS256", "none", "NONE"] {
        let header = b64(format!(r#"{{"alg":"{alg}","typ":"JWT"}}"#).as_bytes());
        let token = format!("{header}.{rest}");
        let response = list_with(&app, &token).await;
        assert_eq!(response.status(), 401, "alg {alg}");
        assert_unauthorized(response).await;
    }
}

#[airq_test::test]
async fn a_garbage_token_is_401() {
    let app = TestApp::spawn().await;
    let valid = app.token("alice");
    let signature_at = valid.rfind('.').unwrap() + 1;
    let flipped = if valid[signature_at..].starts_with('A') {
        "B"
    } else {
        "A"
    };
    let mut tampered = valid.clone();
    tampered.replace_range(signature_at..=signature_at, flipped);
    for token in [
        "garbage".to_owned(),
        "a.b.c".to_owned(),
        "...".to_owned(),
        tampered,
        format!("{valid}.extra"),
    ] {
        let response = list_with(&app, &token).await;
        assert_eq!(response.status(), 401, "token {token}");
        assert_unauthorized(response).await;
    }
}

#[airq_test::test]
async fn a_basic_authorization_is_401() {
    let app = TestApp::spawn().await;
    let token = app.token("alice");
    for value in [
        "Basic YWxpY2U6c2VjcmV0".to_owned(),
        format!("Basic {token}"),
        format!("Token {token}"),
        token,
    ] {
        let response = list_devices(&app, Some(&value)).await;
        assert_eq!(response.status(), 401, "{value}");
        assert_unauthorized(response).await;
    }
}

#[airq_test::test]
async fn an_empty_bearer_token_is_401() {
    let app = TestApp::spawn().await;
    for value in ["Bearer", "Bearer ", "Bearer     ", "bearer"] {
        let response = list_devices(&app, Some(value)).await;
        assert_eq!(response.status(), 401, "{value:?}");
        assert_unauthorized(response).await;
    }
}

#[airq_test::test]
async fn the_bearer_scheme_is_case_insensitive() {
    let app = TestApp::spawn().await;
    let token = app.token("alice");
    assert_accepted(list_devices(&app, Some(&format!("bearer {token}"))).await).await;
    assert_accepted(list_devices(&app, Some(&format!("BEARER {token}"))).await).await;
}

#[airq_test::test]
async fn a_local_token_from_another_issuer_is_401() {
    let app = TestApp::spawn().await;
    let token = local_token(&app, &claims("alice", Some("someone-else"), None));
    assert_unauthorized(list_with(&app, &token).await).await;
}

#[airq_test::test]
async fn a_local_token_without_iss_is_401() {
    let app = TestApp::spawn().await;
    let token = local_token(&app, &claims("alice", None, None));
    assert_unauthorized(list_with(&app, &token).await).await;
}

// ---------------------------------------------------------------------------------------------
// Owner scoping
// ---------------------------------------------------------------------------------------------

/// The names of the devices `GET /devices` lists for `token`.
async fn device_names(app: &TestApp, token: &str) -> Vec<String> {
    let response = list_with(app, token).await;
    assert_eq!(response.status(), 200);
    let body: Value = response.json().await.unwrap();
    let mut names: Vec<String> = body["data"]
        .as_array()
        .expect("data list")
        .iter()
        .map(|device| device["name"].as_str().expect("name").to_owned())
        .collect();
    names.sort();
    names
}

#[airq_test::test]
async fn each_owner_sees_only_their_own_devices() {
    let app = TestApp::spawn().await;
    app.register_named("alice", "alice-kitchen").await;
    app.register_named("alice", "alice-garden").await;
    app.register_named("bob", "bob-balcony").await;

    let alice = local_token(&app, &claims("alice", Some("airq-local"), None));
    let bob = local_token(&app, &claims("bob", Some("airq-local"), None));
    let carol = local_token(&app, &claims("carol", Some("airq-local"), None));
    assert_eq!(
        device_names(&app, &alice).await,
        ["alice-garden", "alice-kitchen"]
    );
    assert_eq!(device_names(&app, &bob).await, ["bob-balcony"]);
    assert!(device_names(&app, &carol).await.is_empty());
}

#[airq_test::test]
async fn the_owner_is_the_exact_sub() {
    let app = TestApp::spawn().await;
    app.register_named("alice", "alice-kitchen").await;
    for lookalike in ["Alice", "alice ", " alice", "alice\u{0}"] {
        let token = local_token(&app, &claims(lookalike, Some("airq-local"), None));
        let response = list_with(&app, &token).await;
        if response.status() == 200 {
            let body: Value = response.json().await.unwrap();
            assert_eq!(body["data"], json!([]), "sub {lookalike:?}");
        } else {
            assert_unauthorized(response).await;
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Shared HS256 secret with issuer and audience
// ---------------------------------------------------------------------------------------------

const SHARED_SECRET: &str = "a shared secret of the identity provider, 32+ bytes";
const ISSUER: &str = "https://idp.example.test/";
const AUDIENCE: &str = "airq-api";

async fn shared_secret_app() -> TestApp {
    TestApp::spawn_with(|config| {
        config.owner_auth = OwnerAuth::SharedSecret(SHARED_SECRET.into());
        config.auth_issuer = Some(ISSUER.into());
        config.auth_audience = Some(AUDIENCE.into());
    })
    .await
}

fn shared(claims: &Value) -> String {
    hs256(SHARED_SECRET.as_bytes(), None, claims)
}

#[airq_test::test]
async fn a_shared_secret_token_with_issuer_and_audience_is_accepted() {
    let app = shared_secret_app().await;
    let token = shared(&claims("alice", Some(ISSUER), Some(AUDIENCE)));
    assert_accepted(list_with(&app, &token).await).await;
    let mut listed = claims("alice", Some(ISSUER), None);
    listed["aud"] = json!(["another-api", AUDIENCE]);
    assert_accepted(list_with(&app, &shared(&listed)).await).await;
}

#[airq_test::test]
async fn a_shared_secret_token_from_another_issuer_is_401() {
    let app = shared_secret_app().await;
    let token = shared(&claims(
        "alice",
        Some("https://evil.example.test/"),
        Some(AUDIENCE),
    ));
    assert_unauthorized(list_with(&app, &token).await).await;
}

#[airq_test::test]
async fn a_shared_secret_token_without_issuer_is_401() {
    let app = shared_secret_app().await;
    let token = shared(&claims("alice", None, Some(AUDIENCE)));
    assert_unauthorized(list_with(&app, &token).await).await;
}

#[airq_test::test]
async fn a_shared_secret_token_for_another_audience_is_401() {
    let app = shared_secret_app().await;
    let token = shared(&claims("alice", Some(ISSUER), Some("another-api")));
    assert_unauthorized(list_with(&app, &token).await).await;
}

#[airq_test::test]
async fn a_shared_secret_token_without_audience_is_401() {
    let app = shared_secret_app().await;
    let token = shared(&claims("alice", Some(ISSUER), None));
    assert_unauthorized(list_with(&app, &token).await).await;
}

#[airq_test::test]
async fn a_shared_secret_token_signed_with_another_secret_is_401() {
    let app = shared_secret_app().await;
    let token = hs256(
        b"not the shared secret at all, but long",
        None,
        &claims("alice", Some(ISSUER), Some(AUDIENCE)),
    );
    assert_unauthorized(list_with(&app, &token).await).await;
}

#[airq_test::test]
async fn a_local_token_is_refused_when_a_shared_secret_is_configured() {
    let app = shared_secret_app().await;
    assert_unauthorized(list_with(&app, &app.token("alice")).await).await;
    let token = local_token(&app, &claims("alice", Some(ISSUER), Some(AUDIENCE)));
    assert_unauthorized(list_with(&app, &token).await).await;
}

// ---------------------------------------------------------------------------------------------
// JWKS
// ---------------------------------------------------------------------------------------------

/// A JWKS endpoint served by the test: one fixed document, and a count of the requests it got.
struct JwksServer {
    url: String,
    hits: Arc<AtomicUsize>,
    task: tokio::task::JoinHandle<()>,
}

impl JwksServer {
    async fn serve(document: &Value) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let url = format!(
            "http://{}/.well-known/jwks.json",
            listener.local_addr().expect("address")
        );
        let body = Bytes::from(serde_json::to_vec(document).expect("json"));
        let hits = Arc::new(AtomicUsize::new(0));
        let counted = Arc::clone(&hits);
        let task = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let body = body.clone();
                let hits = Arc::clone(&counted);
                tokio::spawn(async move {
                    let service = service_fn(move |_request: hyper::Request<Incoming>| {
                        hits.fetch_add(1, Ordering::SeqCst);
                        let response = hyper::Response::builder()
                            .header("content-type", "application/json")
                            .body(Full::new(body.clone()))
                            .expect("response");
                        async move { Ok::<_, Infallible>(response) }
                    });
                    let _ = http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        Self { url, hits, task }
    }

    /// Requests for the document so far.
    fn hits(&self) -> usize {
        self.hits.load(Ordering::SeqCst)
    }
}

impl Drop for JwksServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The committed RSA test key (2048 bits) and its public halves.
const RSA_PRIVATE_PEM: &[u8] = include_bytes!("../fixtures/rsa-test-key.pem");
const RSA_PUBLIC_PEM: &[u8] = include_bytes!("../fixtures/rsa-test-key.pub.pem");
const RSA_PUBLIC_JWK: &str = include_str!("../fixtures/rsa-test-key.jwk.json");

fn rsa_key() -> EncodingKey {
    EncodingKey::from_rsa_pem(RSA_PRIVATE_PEM).expect("RSA fixture key")
}

/// The RSA fixture's public JWK with `kid`, `alg` and `use`.
fn rsa_jwk(kid: &str) -> Value {
    let mut jwk: Value = serde_json::from_str(RSA_PUBLIC_JWK).expect("JWK fixture");
    jwk["kid"] = json!(kid);
    jwk["alg"] = json!("RS256");
    jwk["use"] = json!("sig");
    jwk
}

/// A fresh P-256 key: the signing key and its public JWK.
fn ec_key(kid: &str) -> (EncodingKey, Value) {
    let rng = SystemRandom::new();
    let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng).unwrap();
    let pair =
        EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, pkcs8.as_ref(), &rng).unwrap();
    let point = pair.public_key().as_ref();
    assert_eq!(point.len(), 65, "uncompressed point");
    let jwk = json!({
        "kty": "EC", "crv": "P-256", "kid": kid, "alg": "ES256", "use": "sig",
        "x": b64(&point[1..33]), "y": b64(&point[33..]),
    });
    (EncodingKey::from_ec_der(pkcs8.as_ref()), jwk)
}

/// A fresh Ed25519 key: the signing key and its public JWK.
fn ed_key(kid: &str) -> (EncodingKey, Value) {
    let pkcs8 = Ed25519KeyPair::generate_pkcs8(&SystemRandom::new()).unwrap();
    let pair = Ed25519KeyPair::from_pkcs8(pkcs8.as_ref()).unwrap();
    let jwk = json!({
        "kty": "OKP", "crv": "Ed25519", "kid": kid, "alg": "EdDSA", "use": "sig",
        "x": b64(pair.public_key().as_ref()),
    });
    (EncodingKey::from_ed_der(pkcs8.as_ref()), jwk)
}

const OCT_SECRET: &[u8] = b"a symmetric key published in the JWKS (never to be used)";

/// An identity provider with one key of each supported type plus a symmetric key, and a server
/// verifying against its JWKS with `ISSUER` and `AUDIENCE` required.
struct Idp {
    jwks: JwksServer,
    app: TestApp,
    ec: EncodingKey,
    ed: EncodingKey,
}

impl Idp {
    async fn start() -> Self {
        let (ec, ec_jwk) = ec_key("ec-1");
        let (ed, ed_jwk) = ed_key("ed-1");
        let document = json!({ "keys": [
            rsa_jwk("rsa-1"),
            ec_jwk,
            ed_jwk,
            { "kty": "oct", "kid": "oct-1", "alg": "HS256", "k": b64(OCT_SECRET) },
        ]});
        let jwks = JwksServer::serve(&document).await;
        let app = jwks_app(&jwks.url, Some(ISSUER), Some(AUDIENCE)).await;
        Self { jwks, app, ec, ed }
    }

    fn claims(sub: &str) -> Value {
        claims(sub, Some(ISSUER), Some(AUDIENCE))
    }

    fn rs256(&self, kid: Option<&str>, claims: &Value) -> String {
        sign(Algorithm::RS256, kid, &rsa_key(), claims)
    }

    fn es256(&self, kid: Option<&str>, claims: &Value) -> String {
        sign(Algorithm::ES256, kid, &self.ec, claims)
    }

    fn eddsa(&self, kid: Option<&str>, claims: &Value) -> String {
        sign(Algorithm::EdDSA, kid, &self.ed, claims)
    }
}

async fn jwks_app(url: &str, issuer: Option<&str>, audience: Option<&str>) -> TestApp {
    let url = url.to_owned();
    let issuer = issuer.map(str::to_owned);
    let audience = audience.map(str::to_owned);
    TestApp::spawn_with(move |config| {
        config.owner_auth = OwnerAuth::Jwks(url);
        config.auth_issuer = issuer;
        config.auth_audience = audience;
    })
    .await
}

#[airq_test::test]
async fn an_rs256_token_from_the_jwks_is_accepted() {
    let idp = Idp::start().await;
    let token = idp.rs256(Some("rsa-1"), &Idp::claims("alice"));
    assert_accepted(list_with(&idp.app, &token).await).await;
}

#[airq_test::test]
async fn an_es256_token_from_the_jwks_is_accepted() {
    let idp = Idp::start().await;
    let token = idp.es256(Some("ec-1"), &Idp::claims("alice"));
    assert_accepted(list_with(&idp.app, &token).await).await;
}

#[airq_test::test]
async fn an_eddsa_token_from_the_jwks_is_accepted() {
    let idp = Idp::start().await;
    let token = idp.eddsa(Some("ed-1"), &Idp::claims("alice"));
    assert_accepted(list_with(&idp.app, &token).await).await;
}

#[airq_test::test]
async fn the_jwks_is_fetched_once_at_start() {
    let idp = Idp::start().await;
    assert_eq!(idp.jwks.hits(), 1, "fetched while starting");
    for _ in 0..3 {
        let token = idp.es256(Some("ec-1"), &Idp::claims("alice"));
        assert_accepted(list_with(&idp.app, &token).await).await;
    }
    assert_eq!(idp.jwks.hits(), 1, "known keys are not fetched again");
}

#[airq_test::test]
async fn a_jwks_token_signed_by_a_key_outside_the_jwks_is_401() {
    let idp = Idp::start().await;
    let (foreign_ec, _) = ec_key("ec-1");
    let (foreign_ed, _) = ed_key("ed-1");
    let claims = Idp::claims("alice");
    for token in [
        sign(Algorithm::ES256, Some("ec-1"), &foreign_ec, &claims),
        sign(Algorithm::EdDSA, Some("ed-1"), &foreign_ed, &claims),
    ] {
        assert_unauthorized(list_with(&idp.app, &token).await).await;
    }
}

#[airq_test::test]
async fn a_jwks_token_whose_kid_names_a_key_of_another_algorithm_is_401() {
    let idp = Idp::start().await;
    let claims = Idp::claims("alice");
    for token in [
        idp.es256(Some("rsa-1"), &claims),
        idp.eddsa(Some("ec-1"), &claims),
        idp.rs256(Some("ed-1"), &claims),
        idp.rs256(Some("oct-1"), &claims),
    ] {
        assert_unauthorized(list_with(&idp.app, &token).await).await;
    }
}

#[airq_test::test]
async fn an_hs256_token_keyed_with_the_rsa_public_key_is_401() {
    let idp = Idp::start().await;
    let claims = Idp::claims("alice");
    let jwk = rsa_jwk("rsa-1");
    let n = URL_SAFE_NO_PAD
        .decode(jwk["n"].as_str().unwrap())
        .expect("modulus");
    let secrets: [Vec<u8>; 4] = [
        RSA_PUBLIC_PEM.to_vec(),
        serde_json::to_vec(&jwk).unwrap(),
        RSA_PUBLIC_JWK.as_bytes().to_vec(),
        n,
    ];
    for secret in secrets {
        for kid in [Some("rsa-1"), None] {
            let token = hs256(&secret, kid, &claims);
            assert_unauthorized(list_with(&idp.app, &token).await).await;
        }
    }
}

#[airq_test::test]
async fn an_hs256_token_signed_with_an_oct_key_of_the_jwks_is_401() {
    let idp = Idp::start().await;
    let claims = Idp::claims("alice");
    for kid in [Some("oct-1"), None] {
        let token = hs256(OCT_SECRET, kid, &claims);
        assert_unauthorized(list_with(&idp.app, &token).await).await;
    }
}

#[airq_test::test]
async fn an_alg_none_token_is_401_in_jwks_mode() {
    let idp = Idp::start().await;
    let payload = b64(&serde_json::to_vec(&Idp::claims("alice")).unwrap());
    for header in [
        json!({ "alg": "none", "typ": "JWT" }),
        json!({ "alg": "none", "typ": "JWT", "kid": "rsa-1" }),
    ] {
        let token = format!("{}.{payload}.", b64(&serde_json::to_vec(&header).unwrap()));
        assert_unauthorized(list_with(&idp.app, &token).await).await;
    }
}

#[airq_test::test]
async fn a_jwks_token_without_kid_is_401_when_the_jwks_has_several_keys() {
    let idp = Idp::start().await;
    let token = idp.es256(None, &Idp::claims("alice"));
    assert_unauthorized(list_with(&idp.app, &token).await).await;
}

#[airq_test::test]
async fn a_single_key_jwks_accepts_a_token_without_kid() {
    let (ed, ed_jwk) = ed_key("only");
    let jwks = JwksServer::serve(&json!({ "keys": [ed_jwk] })).await;
    let app = jwks_app(&jwks.url, Some(ISSUER), Some(AUDIENCE)).await;
    let claims = Idp::claims("alice");
    let without_kid = sign(Algorithm::EdDSA, None, &ed, &claims);
    assert_accepted(list_with(&app, &without_kid).await).await;
    let with_kid = sign(Algorithm::EdDSA, Some("only"), &ed, &claims);
    assert_accepted(list_with(&app, &with_kid).await).await;
    let (other, _) = ed_key("only");
    let forged = sign(Algorithm::EdDSA, None, &other, &claims);
    assert_unauthorized(list_with(&app, &forged).await).await;
}

#[airq_test::test]
async fn an_oct_key_does_not_count_as_the_single_key() {
    let jwks = JwksServer::serve(&json!({ "keys": [
        { "kty": "oct", "alg": "HS256", "k": b64(OCT_SECRET) },
    ]}))
    .await;
    let app = jwks_app(&jwks.url, Some(ISSUER), Some(AUDIENCE)).await;
    let token = hs256(OCT_SECRET, None, &Idp::claims("alice"));
    assert_unauthorized(list_with(&app, &token).await).await;
}

#[airq_test::test]
async fn an_unknown_kid_is_401_and_refetches_at_most_once_per_interval() {
    let idp = Idp::start().await;
    let before = idp.jwks.hits();
    assert_eq!(before, 1, "fetched at start");
    for kid in ["rotated-1", "rotated-2"] {
        let token = idp.es256(Some(kid), &Idp::claims("alice"));
        assert_unauthorized(list_with(&idp.app, &token).await).await;
    }
    let after = idp.jwks.hits();
    assert!(
        after - before <= 1,
        "two unknown kids within the refetch interval fetched the JWKS {} more times",
        after - before
    );
    let token = idp.es256(Some("ec-1"), &Idp::claims("alice"));
    assert_accepted(list_with(&idp.app, &token).await).await;
}

#[airq_test::test]
async fn a_flood_of_unknown_kids_does_not_flood_the_identity_provider() {
    let idp = Idp::start().await;
    let before = idp.jwks.hits();
    let requests = (0..20).map(|n| {
        let token = idp.es256(Some(&format!("made-up-{n}")), &Idp::claims("alice"));
        let app = &idp.app;
        async move { list_with(app, &token).await.status() }
    });
    for status in futures_util::future::join_all(requests).await {
        assert_eq!(status, 401);
    }
    assert!(idp.jwks.hits() - before <= 1, "hits {}", idp.jwks.hits());
}

#[airq_test::test]
async fn jwks_tokens_need_the_configured_issuer() {
    let idp = Idp::start().await;
    let mut other = Idp::claims("alice");
    other["iss"] = json!("https://evil.example.test/");
    let mut missing = Idp::claims("alice");
    missing.as_object_mut().unwrap().remove("iss");
    for claims in [other, missing] {
        let token = idp.rs256(Some("rsa-1"), &claims);
        assert_unauthorized(list_with(&idp.app, &token).await).await;
    }
}

#[airq_test::test]
async fn jwks_tokens_need_the_configured_audience() {
    let idp = Idp::start().await;
    let mut other = Idp::claims("alice");
    other["aud"] = json!("another-api");
    let mut missing = Idp::claims("alice");
    missing.as_object_mut().unwrap().remove("aud");
    for claims in [other, missing] {
        let token = idp.es256(Some("ec-1"), &claims);
        assert_unauthorized(list_with(&idp.app, &token).await).await;
    }
}

#[airq_test::test]
async fn jwks_tokens_need_exp_and_sub_and_must_not_be_expired() {
    let idp = Idp::start().await;
    let mut no_exp = Idp::claims("alice");
    no_exp.as_object_mut().unwrap().remove("exp");
    let mut no_sub = Idp::claims("alice");
    no_sub.as_object_mut().unwrap().remove("sub");
    let mut expired = Idp::claims("alice");
    expired["exp"] = json!(now() - 3600);
    for claims in [no_exp, no_sub, expired] {
        let token = idp.eddsa(Some("ed-1"), &claims);
        assert_unauthorized(list_with(&idp.app, &token).await).await;
    }
}

#[airq_test::test]
async fn without_configured_issuer_and_audience_jwks_tokens_need_neither() {
    let (ec, ec_jwk) = ec_key("ec-1");
    let jwks = JwksServer::serve(&json!({ "keys": [ec_jwk] })).await;
    let app = jwks_app(&jwks.url, None, None).await;
    let token = sign(
        Algorithm::ES256,
        Some("ec-1"),
        &ec,
        &claims("alice", None, None),
    );
    assert_accepted(list_with(&app, &token).await).await;
}

#[airq_test::test]
async fn jwks_owners_see_only_their_own_devices() {
    let idp = Idp::start().await;
    let register = |token: String, name: &'static str| {
        let app = &idp.app;
        async move {
            let response = app
                .client
                .post(app.url("/devices"))
                .bearer_auth(token)
                .json(&json!({ "name": name }))
                .send()
                .await
                .unwrap();
            assert_eq!(response.status(), 201);
        }
    };
    register(idp.rs256(Some("rsa-1"), &Idp::claims("alice")), "alice-1").await;
    register(idp.eddsa(Some("ed-1"), &Idp::claims("bob")), "bob-1").await;
    let alice = idp.es256(Some("ec-1"), &Idp::claims("alice"));
    let bob = idp.rs256(Some("rsa-1"), &Idp::claims("bob"));
    assert_eq!(device_names(&idp.app, &alice).await, ["alice-1"]);
    assert_eq!(device_names(&idp.app, &bob).await, ["bob-1"]);
}

#[airq_test::test]
async fn an_unreachable_jwks_endpoint_is_a_503_problem() {
    let closed = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let url = format!("http://{}/jwks.json", closed.local_addr().unwrap());
    drop(closed);
    let app = jwks_app(&url, Some(ISSUER), Some(AUDIENCE)).await;
    let claims = Idp::claims("alice");
    let token = sign(Algorithm::RS256, Some("rsa-1"), &rsa_key(), &claims);
    for token in [token, sign(Algorithm::RS256, None, &rsa_key(), &claims)] {
        let response = list_with(&app, &token).await;
        assert!(
            response.headers().get("www-authenticate").is_none(),
            "not a credential problem"
        );
        let body = problem(response, 503).await;
        assert_eq!(body["type"], "about:blank");
    }
    // A request without any token is still the client's problem.
    assert_unauthorized(list_devices(&app, None).await).await;
}

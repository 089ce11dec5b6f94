//! TLS to PostgreSQL, end to end: the real server against a throwaway PostgreSQL with `ssl=on`
//! and a certificate signed by a CA the test made ([`instance`]), each `sslmode` as libpq
//! defines it. The connections the server made are looked up in `pg_stat_ssl` by their
//! `application_name`, so "over TLS" is the database's word, not ours.
//!
//! Runs wherever a PostgreSQL server's binaries are installed (the machine's shared server is
//! never reconfigured); elsewhere each test prints "skipped: …" and returns.

mod backend {
    pub const PAIR: crate::common::Pair = crate::common::Pair::Embedded;
}

#[path = "../common/mod.rs"]
mod common;
mod instance;
#[path = "../support/test_ca.rs"]
mod test_ca;

use std::sync::Arc;

use airq::clock::ManualClock;
use airq::{Application, Config};

use crate::common::TestApp;
use crate::instance::TlsPostgres;
use crate::test_ca::TestCa;

/// A CA, and an instance serving a certificate it signed for `localhost` only.
struct Setup {
    ca: TestCa,
    postgres: TlsPostgres,
}

/// The setup, or `None` after printing why this machine cannot have it.
fn setup(test: &str) -> Option<Setup> {
    let ca = TestCa::new("airq test CA");
    let cert = ca.server_cert(&["localhost"]);
    match TlsPostgres::start(&cert) {
        Ok(postgres) => Some(Setup { ca, postgres }),
        Err(reason) => {
            println!("skipped: {test}: {reason}");
            None
        }
    }
}

/// Whether each of the server's connections (by `application_name`) is encrypted; at least
/// one must exist.
async fn server_connections_use_tls(postgres: &TlsPostgres) -> Vec<bool> {
    let url = format!("postgres://postgres@127.0.0.1:{}/postgres", postgres.port);
    let (client, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
        .await
        .expect("a plain-text look at the throwaway instance");
    tokio::spawn(connection);
    let rows = client
        .query(
            "SELECT s.ssl FROM pg_stat_ssl s JOIN pg_stat_activity a USING (pid) \
             WHERE a.application_name = 'airq-tls-test'",
            &[],
        )
        .await
        .expect("pg_stat_ssl");
    let flags: Vec<bool> = rows.iter().map(|row| row.get(0)).collect();
    assert!(
        !flags.is_empty(),
        "the server holds connections to the instance"
    );
    flags
}

/// Serves with its devices in the instance at `url` (registering a device and listing it, so the
/// device store's connections are in use) and checks that every connection it holds there is
/// encrypted, or that none is.
async fn assert_served(postgres: &TlsPostgres, url: String, tls: bool) {
    let app = TestApp::spawn_with(move |config| config.postgres_url = Some(url)).await;
    let device = app.register_named("alice", "Balcony").await;
    let listed = app.data_as("alice", "/devices").await;
    assert_eq!(listed[0]["id"], device["id"]);
    assert!(server_connections_use_tls(postgres)
        .await
        .iter()
        .all(|ssl| *ssl == tls));
    app.stop().await;
}

/// The query of `sslmode` with `sslrootcert` naming `ca`'s certificate.
fn with_root(mode: &str, ca: &TestCa) -> String {
    format!("sslmode={mode}&sslrootcert={}", ca.cert_file().display())
}

/// Why a server with its devices at `url` does not start.
async fn start_failure(url: String) -> String {
    let data_dir = tempfile::tempdir().expect("data dir");
    let mut config = Config::new(
        "127.0.0.1:0".parse().expect("address"),
        data_dir.path().to_owned(),
    );
    config.postgres_url = Some(url);
    let clock = Arc::new(ManualClock::new(chrono::Utc::now()));
    match Application::build(config, clock).await {
        Ok(_) => panic!("the server started"),
        Err(error) => airq::telemetry::chain(&error),
    }
}

#[tokio::test]
async fn sslmode_require_connects_over_tls() {
    let Some(setup) = setup("sslmode_require_connects_over_tls") else {
        return;
    };
    assert_served(
        &setup.postgres,
        setup.postgres.url("127.0.0.1", "sslmode=require"),
        true,
    )
    .await;
}

#[tokio::test]
async fn without_sslmode_tls_is_used_when_the_server_offers_it() {
    let Some(setup) = setup("without_sslmode_tls_is_used_when_the_server_offers_it") else {
        return;
    };
    let url = format!(
        "postgres://postgres@127.0.0.1:{}/postgres?application_name=airq-tls-test",
        setup.postgres.port
    );
    assert_served(&setup.postgres, url, true).await;
}

#[tokio::test]
async fn sslmode_disable_connects_in_plain_text() {
    let Some(setup) = setup("sslmode_disable_connects_in_plain_text") else {
        return;
    };
    assert_served(
        &setup.postgres,
        setup.postgres.url("127.0.0.1", "sslmode=disable"),
        false,
    )
    .await;
}

#[tokio::test]
async fn verify_full_with_the_servers_ca_connects_over_tls() {
    let Some(setup) = setup("verify_full_with_the_servers_ca_connects_over_tls") else {
        return;
    };
    let query = with_root("verify-full", &setup.ca);
    assert_served(
        &setup.postgres,
        setup.postgres.url("localhost", &query),
        true,
    )
    .await;
}

#[tokio::test]
async fn verify_full_with_another_ca_stops_the_start_naming_the_certificate() {
    let Some(setup) = setup("verify_full_with_another_ca_stops_the_start_naming_the_certificate")
    else {
        return;
    };
    let other = TestCa::new("another CA");
    let query = with_root("verify-full", &other);
    let failure = start_failure(setup.postgres.url("localhost", &query)).await;
    assert!(
        failure.contains("invalid peer certificate") && failure.contains("UnknownIssuer"),
        "{failure}"
    );
}

#[tokio::test]
async fn verify_full_refuses_a_certificate_for_another_host_name() {
    let Some(setup) = setup("verify_full_refuses_a_certificate_for_another_host_name") else {
        return;
    };
    let query = with_root("verify-full", &setup.ca);
    // The certificate names `localhost`, not the address connected to.
    let failure = start_failure(setup.postgres.url("127.0.0.1", &query)).await;
    assert!(failure.contains("not valid for name"), "{failure}");
}

#[tokio::test]
async fn verify_ca_accepts_the_servers_ca_whatever_the_host_name() {
    let Some(setup) = setup("verify_ca_accepts_the_servers_ca_whatever_the_host_name") else {
        return;
    };
    let query = with_root("verify-ca", &setup.ca);
    assert_served(
        &setup.postgres,
        setup.postgres.url("127.0.0.1", &query),
        true,
    )
    .await;
}

#[tokio::test]
async fn require_with_a_root_certificate_checks_the_chain_as_libpq_does() {
    let Some(setup) = setup("require_with_a_root_certificate_checks_the_chain_as_libpq_does")
    else {
        return;
    };
    let other = TestCa::new("another CA");
    let query = with_root("require", &other);
    let failure = start_failure(setup.postgres.url("127.0.0.1", &query)).await;
    assert!(failure.contains("UnknownIssuer"), "{failure}");
}

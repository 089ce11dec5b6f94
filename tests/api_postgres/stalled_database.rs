//! A database that stops answering: a request gets a 500 once its call's time bound has run out
//! (never a hang), and the pool is usable again as soon as the database answers.
//!
//! The stall is a real one: another session holds an exclusive lock on the test schema's
//! `devices` table, so every statement on it waits in PostgreSQL.

use std::time::Duration;

use reqwest::Method;
use serde_json::Value;
use tokio_postgres::NoTls;

use crate::common::{problem, TestApp};

#[airq_test::test]
async fn a_database_that_stops_answering_gets_a_500_and_reads_recover_once_it_answers() {
    let app = TestApp::spawn().await;
    app.register_named("stall-owner", "before the stall").await;
    let url = app.postgres_url.clone().expect("the PostgreSQL pair");
    let (locker, connection) = tokio_postgres::connect(&url, NoTls)
        .await
        .expect("a second session");
    let driver = tokio::spawn(connection);
    locker
        .batch_execute("BEGIN; LOCK TABLE devices IN ACCESS EXCLUSIVE MODE")
        .await
        .expect("devices locked");

    let stalled = tokio::time::timeout(
        Duration::from_secs(60),
        app.get_as("stall-owner", "/devices"),
    )
    .await
    .expect("an answer, not a hang");
    let body = problem(stalled, 500).await;
    assert_eq!(body["title"], "Internal Server Error");

    locker.batch_execute("COMMIT").await.expect("lock released");
    drop(locker);
    let _ = driver.await;
    // Every pooled connection answers again: the one whose call ran out of time was closed, not
    // handed to the next request with its reply still outstanding.
    for _ in 0..20 {
        let response = app
            .owner_request(Method::GET, "/devices", "stall-owner")
            .send()
            .await
            .expect("request sent");
        assert_eq!(response.status(), 200);
        let listed: Value = response.json().await.expect("json");
        assert_eq!(listed["data"][0]["name"], "before the stall");
    }
}

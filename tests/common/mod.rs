//! Test helpers shared by the black-box suites: spawn the real server on 127.0.0.1:0 with its own
//! data directory and a manual clock, and speak HTTP to it.
//!
//! Every answer a test receives is checked against the OpenAPI document the server serves: the
//! tests speak to a validating relay ([`proxy`]) in front of the server, and a drift from the
//! document ([`contract`]) fails the test that received it.

#![allow(dead_code, unreachable_pub)]

pub mod contract;
pub mod map;
pub mod process;
pub mod proxy;
pub mod receiver;
pub mod relay;

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use airq::auth::LocalIssuer;
use airq::clock::ManualClock;
use airq::{Application, Config};
use chrono::Utc;
use reqwest::{Method, RequestBuilder, Response};
use serde_json::{json, Value};
use tempfile::TempDir;
use tokio::sync::oneshot;

use self::contract::Contract;
use self::proxy::Proxy;

/// The storage pair a test binary runs the suite against (its `backend::PAIR`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pair {
    /// SQLite for devices and readings.
    Embedded,
    /// PostgreSQL for devices (a schema of its own per test), SQLite for readings.
    Postgres,
    /// PostgreSQL for devices, QuestDB for readings (a table of its own per test).
    QuestDb,
    /// The QuestDB pair with uploads answered from a local spool (`--questdb-spool`).
    QuestDbSpool,
}

impl Pair {
    /// Whether readings live in QuestDB.
    pub fn questdb(self) -> bool {
        matches!(self, Self::QuestDb | Self::QuestDbSpool)
    }
}

/// A QuestDB table of one test, dropped with it.
pub struct TestTable {
    /// PG-wire URL of the QuestDB.
    pub pg: String,
    /// ILP configuration of the QuestDB.
    pub ilp: String,
    /// The table.
    pub name: String,
}

impl TestTable {
    /// A table of its own in the QuestDB the test variables name.
    pub fn new() -> Self {
        Self {
            pg: std::env::var("AIRQ_TEST_QUESTDB_PG")
                .expect("AIRQ_TEST_QUESTDB_PG is set for the QuestDB pair"),
            ilp: std::env::var("AIRQ_TEST_QUESTDB_ILP")
                .expect("AIRQ_TEST_QUESTDB_ILP is set for the QuestDB pair"),
            name: format!("airq_test_{}", uuid::Uuid::new_v4().simple()),
        }
    }

    /// A connection to the QuestDB over PG wire, to look behind the server's back.
    pub async fn client(&self) -> tokio_postgres::Client {
        let (client, connection) = tokio_postgres::connect(&self.pg, tokio_postgres::NoTls)
            .await
            .expect("QuestDB PG wire");
        tokio::spawn(connection);
        client
    }

    /// The configuration that puts readings in this table.
    pub fn config(&self) -> airq::config::QuestDbConfig {
        airq::config::QuestDbConfig {
            ilp: self.ilp.clone(),
            pg: self.pg.clone(),
            table: airq::config::TableName::parse(&self.name).expect("a valid table name"),
            senders: airq::store::questdb::DEFAULT_SENDERS,
            spool: false,
        }
    }
}

impl Drop for TestTable {
    fn drop(&mut self) {
        // Views first: the owner views are built on the device views, the hour and day views on
        // the quarter-hour view.
        for view in ["o15m", "o1h", "o1d", "1h", "1d", "15m"] {
            clean_up(
                &self.pg,
                format!("DROP MATERIALIZED VIEW IF EXISTS {}_{view}", self.name),
            );
        }
        // The table, and the owner record and deletions that come with it.
        for suffix in ["", "_since", "_gone"] {
            clean_up(
                &self.pg,
                format!("DROP TABLE IF EXISTS {}{suffix}", self.name),
            );
        }
    }
}

/// A PostgreSQL schema of one test, dropped with it.
pub struct TestSchema {
    base_url: String,
    name: String,
    /// The test database's URL with this schema as its search path.
    pub url: String,
}

impl TestSchema {
    /// Creates a schema of its own in the database `AIRQ_TEST_POSTGRES_URL` names.
    pub async fn create() -> Self {
        let base_url = std::env::var("AIRQ_TEST_POSTGRES_URL")
            .expect("AIRQ_TEST_POSTGRES_URL is set for the postgres pair");
        let name = format!("airq_test_{}", uuid::Uuid::new_v4().simple());
        let (client, connection) = tokio_postgres::connect(&base_url, tokio_postgres::NoTls)
            .await
            .expect("the test database accepts connections");
        let driver = tokio::spawn(connection);
        client
            .batch_execute(&format!("CREATE SCHEMA {name}"))
            .await
            .expect("schema created");
        drop(client);
        let _ = driver.await;
        let separator = if base_url.contains('?') { '&' } else { '?' };
        let url = format!("{base_url}{separator}options=-csearch_path%3D{name}");
        Self {
            base_url,
            name,
            url,
        }
    }
}

impl Drop for TestSchema {
    fn drop(&mut self) {
        clean_up(
            &self.base_url,
            format!("DROP SCHEMA IF EXISTS {} CASCADE", self.name),
        );
    }
}

/// Runs one clean-up statement over PG wire. Called from `Drop`, inside the test's runtime, so
/// it runs on a thread and runtime of its own; a failed clean-up only leaves a leftover, and so
/// does one the database does not answer within 10 s (a stalled server must not hang the suite).
fn clean_up(url: &str, statement: String) {
    let url = url.to_owned();
    let _ = std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .ok()?;
        runtime.block_on(async {
            // A DROP can fail while the database is still busy with the table (QuestDB applies
            // a WAL table's last transactions behind its acknowledgements): try again for a while
            // rather than leave the table behind.
            for _ in 0..CLEAN_UP_ATTEMPTS {
                let dropped = tokio::time::timeout(Duration::from_secs(10), async {
                    let (client, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
                        .await
                        .ok()?;
                    tokio::spawn(connection);
                    client.simple_query(&statement).await.ok()
                })
                .await
                .ok()
                .flatten();
                if dropped.is_some() {
                    return Some(());
                }
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
            eprintln!("left behind after {CLEAN_UP_ATTEMPTS} attempts: {statement}");
            None
        })
    })
    .join();
}

/// How often a test's table or schema is dropped before it is given up (and named on stderr).
const CLEAN_UP_ATTEMPTS: usize = 20;

/// The contract of the document the server serves, fetched from the first server of the process
/// (the document is compiled into the server, so every server of a test binary serves the same).
async fn served_contract(client: &reqwest::Client, server: std::net::SocketAddr) -> Arc<Contract> {
    static SERVED: OnceLock<Arc<Contract>> = OnceLock::new();
    if let Some(contract) = SERVED.get() {
        return Arc::clone(contract);
    }
    let document: Value = client
        .get(format!("http://{server}/api/v1/openapi.json"))
        .send()
        .await
        .expect("the OpenAPI document is served")
        .json()
        .await
        .expect("the OpenAPI document is JSON");
    let contract = Contract::new(document).expect("the OpenAPI document has paths");
    Arc::clone(SERVED.get_or_init(|| Arc::new(contract)))
}

/// A clock of a process of its own, standing at the real time until a test moves it.
fn fresh_clock() -> ManualClock {
    ManualClock::new(Utc::now())
}

/// A running server with its own data directory, behind the relay that checks its answers.
pub struct TestApp {
    /// `http://127.0.0.1:PORT` of the relay in front of the server.
    pub base: String,
    /// The server's own address, for tests of the wire itself (slow or oversized request heads
    /// and bodies, connection limits), which the relay would buffer; its answers are not checked
    /// against the document.
    pub server_addr: std::net::SocketAddr,
    /// A client without connection reuse surprises.
    pub client: reqwest::Client,
    /// The server's clock.
    pub clock: ManualClock,
    /// The data directory (deleted when the app is dropped).
    pub data_dir: TempDir,
    /// The PostgreSQL URL of the device store (postgres pair), shared by peers.
    pub postgres_url: Option<String>,
    issuer: LocalIssuer,
    proxy: Proxy,
    shutdown: Option<oneshot::Sender<()>>,
    server: Option<tokio::task::JoinHandle<()>>,
    schema: Option<TestSchema>,
    /// The QuestDB table of the readings (QuestDB pair).
    pub table: Option<TestTable>,
}

impl TestApp {
    /// The binary's backend pair with default settings.
    pub async fn spawn() -> Self {
        Self::spawn_with(|_| {}).await
    }

    /// The binary's backend pair, with the configuration adjusted first.
    pub async fn spawn_with(configure: impl FnOnce(&mut Config)) -> Self {
        let schema = match crate::backend::PAIR {
            Pair::Embedded => None,
            Pair::Postgres | Pair::QuestDb | Pair::QuestDbSpool => Some(TestSchema::create().await),
        };
        let table = crate::backend::PAIR.questdb().then(TestTable::new);
        let url = schema.as_ref().map(|schema| schema.url.clone());
        let questdb = table.as_ref().map(TestTable::config);
        let data_dir = tempfile::tempdir().expect("temporary data dir");
        let mut app = Self::start(data_dir, url, questdb, fresh_clock(), configure).await;
        app.schema = schema;
        app.table = table;
        app
    }

    /// A process on an existing data directory (the embedded pair: a restart), with the
    /// configuration adjusted first.
    pub async fn spawn_in(data_dir: TempDir, configure: impl FnOnce(&mut Config)) -> Self {
        Self::start(data_dir, None, None, fresh_clock(), configure).await
    }

    /// A second process on the same device store (same PostgreSQL schema, same token secret),
    /// with a data directory of its own.
    pub async fn spawn_peer(&self) -> Self {
        self.spawn_peer_with(|_| {}).await
    }

    /// [`spawn_peer`](Self::spawn_peer) with `configure` applied to its configuration.
    pub async fn spawn_peer_with(&self, configure: impl FnOnce(&mut Config)) -> Self {
        self.peer(fresh_clock(), configure).await
    }

    /// [`spawn_peer_with`](Self::spawn_peer_with) on this process's clock: moving one moves both,
    /// as the hosts' clocks of replicas move together.
    pub async fn spawn_peer_on_my_clock(&self, configure: impl FnOnce(&mut Config)) -> Self {
        self.peer(self.clock.clone(), configure).await
    }

    async fn peer(&self, clock: ManualClock, configure: impl FnOnce(&mut Config)) -> Self {
        let data_dir = tempfile::tempdir().expect("temporary data dir");
        std::fs::copy(
            self.data_dir.path().join(LocalIssuer::FILE),
            data_dir.path().join(LocalIssuer::FILE),
        )
        .expect("token secret copied");
        let questdb = self.table.as_ref().map(TestTable::config);
        Self::start(
            data_dir,
            self.postgres_url.clone(),
            questdb,
            clock,
            configure,
        )
        .await
    }

    /// A process on an existing data directory with the given device store and QuestDB (the
    /// caller owns the schema and the table), the configuration adjusted first.
    pub async fn spawn_on(
        data_dir: TempDir,
        postgres_url: Option<String>,
        questdb: Option<airq::config::QuestDbConfig>,
        configure: impl FnOnce(&mut Config),
    ) -> Self {
        Self::start(data_dir, postgres_url, questdb, fresh_clock(), configure).await
    }

    async fn start(
        data_dir: TempDir,
        postgres_url: Option<String>,
        questdb: Option<airq::config::QuestDbConfig>,
        clock: ManualClock,
        configure: impl FnOnce(&mut Config),
    ) -> Self {
        let mut config = Config::new(
            "127.0.0.1:0".parse().expect("address"),
            data_dir.path().to_owned(),
        );
        config.postgres_url = postgres_url.clone();
        config.questdb = questdb;
        if let (Pair::QuestDbSpool, Some(questdb)) = (crate::backend::PAIR, &mut config.questdb) {
            questdb.senders = airq::store::questdb::DEFAULT_SPOOL_SENDERS;
            questdb.spool = true;
        }
        // Rate limits are off unless a test turns them on in `configure`: many tests upload more
        // readings to one device, or read public routes more often, than the default bursts allow
        // (tests/api/rate_limits.rs exercises the limits with small rates of its own).
        config.rate_limits.device = airq::config::Rate::OFF;
        config.rate_limits.public = airq::config::Rate::OFF;
        configure(&mut config);
        let app = Application::build(config, Arc::new(clock.clone()))
            .await
            .expect("the server starts");
        let server_addr = app.local_addr();
        let (shutdown, stopped) = oneshot::channel::<()>();
        let server = tokio::spawn(app.run_until(async {
            let _ = stopped.await;
        }));
        let issuer = LocalIssuer::open(data_dir.path()).expect("local issuer");
        let client = reqwest::Client::builder()
            .timeout(Duration::from_secs(30))
            .build()
            .expect("client");
        let proxy = Proxy::start(server_addr, served_contract(&client, server_addr).await).await;
        Self {
            base: format!("http://{}", proxy.addr()),
            server_addr,
            client,
            clock,
            data_dir,
            postgres_url,
            issuer,
            proxy,
            shutdown: Some(shutdown),
            server: Some(server),
            schema: None,
            table: None,
        }
    }

    /// The receipt ids of every stored reading, read straight from the reading store (SQLite
    /// file or QuestDB table, once QuestDB applied every transaction it acknowledged), sorted.
    pub async fn stored_ids(&self) -> Vec<u64> {
        let mut ids: Vec<u64> = match &self.table {
            Some(table) => {
                wait_for_empty_spool(self.data_dir.path()).await;
                let client = table.client().await;
                let progress = format!(
                    "SELECT writerTxn, sequencerTxn FROM wal_tables() WHERE name = '{}'",
                    table.name
                );
                // The server answers before QuestDB applies a batch; this reads behind its back.
                for _ in 0..1000 {
                    let applied = client
                        .query_opt(progress.as_str(), &[])
                        .await
                        .expect("WAL progress from QuestDB")
                        .is_none_or(|row| row.get::<_, i64>(0) >= row.get::<_, i64>(1));
                    if applied {
                        break;
                    }
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
                client
                    .query(format!("SELECT id FROM {}", table.name).as_str(), &[])
                    .await
                    .expect("ids from QuestDB")
                    .iter()
                    .map(|row| row.get::<_, i64>(0) as u64)
                    .collect()
            }
            None => stored_sqlite_ids(self.data_dir.path()),
        };
        ids.sort_unstable();
        ids
    }

    /// Stops the server, then starts another process on the same data directory, device store
    /// and QuestDB table, with the configuration adjusted first (the first one's answers are
    /// checked against the document as in [`TestApp::stop`]).
    pub async fn restart(mut self, configure: impl FnOnce(&mut Config)) -> Self {
        self.shut_down().await;
        let data_dir = std::mem::replace(
            &mut self.data_dir,
            tempfile::tempdir().expect("temporary data dir"),
        );
        let questdb = self.table.as_ref().map(TestTable::config);
        let mut app = Self::start(
            data_dir,
            self.postgres_url.clone(),
            questdb,
            fresh_clock(),
            configure,
        )
        .await;
        app.schema = self.schema.take();
        app.table = self.table.take();
        app
    }

    /// Stops the server and waits until it has drained and its last answers were relayed;
    /// panics if any answer drifted from the OpenAPI document.
    pub async fn stop(mut self) {
        self.shut_down().await;
    }

    /// [`stop`](Self::stop), handing the data directory over instead of deleting it.
    pub async fn stop_keeping_data(mut self) -> TempDir {
        self.shut_down().await;
        std::mem::replace(
            &mut self.data_dir,
            tempfile::tempdir().expect("temporary data dir"),
        )
    }

    async fn shut_down(&mut self) {
        if let Some(shutdown) = self.shutdown.take() {
            let _ = shutdown.send(());
        }
        if let Some(server) = self.server.take() {
            server.await.expect("the server task ends cleanly");
        }
        self.proxy.settle(Duration::from_secs(10)).await;
        self.check_contract();
    }

    /// The OpenAPI contract the answers are checked against.
    pub fn contract(&self) -> Arc<Contract> {
        self.proxy.contract()
    }

    /// Checks the answers from now on against the served document as `edit` changes it: for
    /// tests of the check itself.
    pub fn check_against(&self, edit: impl FnOnce(&mut Value)) {
        let mut document = self.proxy.contract().document().clone();
        edit(&mut document);
        let contract = Contract::new(document).expect("the edited document has paths");
        self.proxy.set_contract(Arc::new(contract));
    }

    /// The contract violations recorded so far, which then no longer fail the test.
    pub fn take_contract_violations(&self) -> Vec<String> {
        self.proxy.take_violations()
    }

    /// Panics with the recorded contract violations, if any (only prints them when the test is
    /// already failing).
    fn check_contract(&self) {
        let violations = self.proxy.take_violations();
        if violations.is_empty() {
            return;
        }
        let report = format!(
            "{} answer(s) drifted from the OpenAPI document (src/http/openapi.json):\n- {}",
            violations.len(),
            violations.join("\n- ")
        );
        if std::thread::panicking() {
            eprintln!("{report}");
        } else {
            panic!("{report}");
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

/// A valid upload body: every required field, no location, no `measured_at`.
pub fn sample() -> Value {
    json!({
        "aqi": 42,
        "pms_data": { "pm1_0": 5.0, "pm2_5": 10.0, "pm10_0": 15.0, "provider": "PMS5003" },
        "temperature_data": {
            "temperature": 21.5,
            "heat_index": 22.0,
            "humidity": 40.0,
            "provider": "BME280"
        }
    })
}

/// [`sample`] with the given aqi, pm2_5 and temperature.
pub fn sample_with(aqi: i64, pm2_5: f64, temperature: f64) -> Value {
    let mut body = sample();
    body["aqi"] = json!(aqi);
    body["pms_data"]["pm2_5"] = json!(pm2_5);
    body["temperature_data"]["temperature"] = json!(temperature);
    body
}

/// `body` with a location.
pub fn located(mut body: Value, lat: f64, lon: f64) -> Value {
    body["location"] = json!({ "lat": lat, "lon": lon, "provider": "phone-gps" });
    body
}

/// `body` stamped `measured_at` = `at`.
pub fn measured(mut body: Value, at: chrono::DateTime<Utc>) -> Value {
    body["measured_at"] = json!(at.to_rfc3339());
    body
}

impl TestApp {
    /// `POST /data` with the credentials of `device` (a registration's `data`).
    pub async fn upload(&self, device: &Value, body: &Value) -> Response {
        self.client
            .post(self.url("/data"))
            .header(
                "x-device-id",
                device["device_id"].as_str().expect("device_id"),
            )
            .header(
                "x-device-key",
                device["device_key"].as_str().expect("device_key"),
            )
            .json(body)
            .send()
            .await
            .expect("request sent")
    }

    /// Uploads and expects 201; returns the receipt's `data`.
    pub async fn upload_ok(&self, device: &Value, body: &Value) -> Value {
        let response = self.upload(device, body).await;
        assert_eq!(response.status(), 201, "upload accepted");
        response.json::<Value>().await.expect("json")["data"].clone()
    }

    /// `GET` an API path without credentials.
    pub async fn get_public(&self, path: &str) -> Response {
        self.client
            .get(self.url(path))
            .send()
            .await
            .expect("request sent")
    }

    /// The `data` of a 200 JSON answer to `GET path` as `owner`.
    pub async fn data_as(&self, owner: &str, path: &str) -> Value {
        let response = self.get_as(owner, path).await;
        assert_eq!(response.status(), 200, "GET {path}");
        response.json::<Value>().await.expect("json")["data"].clone()
    }
}

impl Drop for TestApp {
    fn drop(&mut self) {
        if let Some(shutdown) = self.shutdown.take() {
            let _ = shutdown.send(());
        }
        self.check_contract();
    }
}

/// The JSON of a gzip-encoded answer (which must say `Content-Encoding: gzip`), decompressed.
pub async fn gunzipped_json(response: Response) -> Value {
    use std::io::Read as _;
    assert_eq!(
        response
            .headers()
            .get("content-encoding")
            .and_then(|value| value.to_str().ok()),
        Some("gzip")
    );
    let compressed = response.bytes().await.expect("body");
    let mut text = String::new();
    flate2::read::GzDecoder::new(compressed.as_ref())
        .read_to_string(&mut text)
        .expect("gzip");
    serde_json::from_str(&text).expect("json")
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

/// An instant written in RFC 3339.
pub fn at(text: &str) -> chrono::DateTime<Utc> {
    chrono::DateTime::parse_from_rfc3339(text)
        .expect("test instant")
        .with_timezone(&Utc)
}

/// Asserts that a JSON number equals `expected` to within 1e-9.
pub fn assert_close(actual: &Value, expected: f64, what: &str) {
    let actual = actual
        .as_f64()
        .unwrap_or_else(|| panic!("{what} is a number: {actual}"));
    assert!(
        (actual - expected).abs() < 1e-9,
        "{what}: expected {expected}, got {actual}"
    );
}

/// Asserts that a 401 challenges for a bearer token.
pub fn assert_bearer_challenge(response: &Response) {
    let challenge = response.headers()["www-authenticate"]
        .to_str()
        .expect("ascii header");
    assert!(challenge.starts_with("Bearer"), "{challenge}");
}

/// The labels of historical points.
pub fn labels(points: &[Value]) -> Vec<&str> {
    points
        .iter()
        .map(|point| point["label"].as_str().expect("label"))
        .collect()
}

/// The timestamps of historical points.
pub fn timestamps(points: &[Value]) -> Vec<&str> {
    points
        .iter()
        .map(|point| point["timestamp"].as_str().expect("timestamp"))
        .collect()
}

/// The (integer) AQIs of historical points.
pub fn aqis(points: &[Value]) -> Vec<i64> {
    points
        .iter()
        .map(|point| point["metrics"]["aqi"].as_i64().expect("integer aqi"))
        .collect()
}

/// The receipt ids stored by the embedded store in `data_dir`: folded rows in `airq.db` and the
/// rows past the watermark in the ingestion log, without keyed readings a later one replaced
/// (the fold deletes those; no reader counts them).
pub fn stored_sqlite_ids(data_dir: &std::path::Path) -> Vec<u64> {
    // The log first: a row the fold moves after this is in the later snapshot of airq.db.
    let (logged, _) = airq::store::ingest_log::unconsumed(data_dir).expect("the log reads");
    let db = rusqlite::Connection::open(data_dir.join("airq.db")).expect("airq.db");
    db.execute_batch("BEGIN").expect("begin");
    let folded: i64 = db
        .query_row(
            "SELECT coalesce(max(value), 0) FROM counters WHERE name = 'folded_id'",
            [],
            |row| row.get(0),
        )
        .expect("watermark");
    // (id, device, at, keyed) of every stored row.
    let mut stored: Vec<(i64, Vec<u8>, i64, bool)> = db
        .prepare(
            "SELECT r.id, n.device, r.at, r.keyed FROM readings r \
             JOIN device_numbers n ON n.number = r.device",
        )
        .expect("query")
        .query_map([], |row| {
            Ok((
                row.get(0)?,
                row.get(1)?,
                row.get(2)?,
                row.get::<_, i64>(3)? == 1,
            ))
        })
        .expect("rows")
        .map(|row| row.expect("row"))
        .collect();
    stored.extend(logged.into_iter().filter_map(|reading| {
        let id = reading.id.get() as i64;
        (id > folded).then(|| {
            (
                id,
                reading.device.as_uuid().as_bytes().to_vec(),
                reading.at.timestamp_micros(),
                reading.reading.measured_at.is_some(),
            )
        })
    }));
    let latest_keyed: HashMap<(Vec<u8>, i64), i64> = stored.iter().filter(|row| row.3).fold(
        HashMap::new(),
        |mut latest, (id, device, at, _)| {
            let entry = latest.entry((device.clone(), *at)).or_insert(*id);
            *entry = (*entry).max(*id);
            latest
        },
    );
    let mut ids: Vec<u64> = stored
        .into_iter()
        .filter(|(id, device, at, keyed)| {
            !keyed || latest_keyed.get(&(device.clone(), *at)) == Some(id)
        })
        .map(|(id, ..)| id as u64)
        .collect();
    ids.sort_unstable();
    ids
}

/// Waits until the QuestDB spool in `data_dir` (when there is one) holds no readings the server
/// has not forwarded: it answers uploads once they are spooled, and forwards them behind.
pub async fn wait_for_empty_spool(data_dir: &std::path::Path) {
    if crate::backend::PAIR != Pair::QuestDbSpool {
        return;
    }
    for _ in 0..1000 {
        let (spooled, _) = airq::store::ingest_log::unconsumed(data_dir).expect("the spool reads");
        if spooled.is_empty() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("the spool was not forwarded to QuestDB within 10 s");
}

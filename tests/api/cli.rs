//! The CLI: `airq token OWNER` (a bearer token from the data dir's local issuer, alone on stdout),
//! flags `airq serve` refuses, and `airq healthcheck` (exit 0 only when `/readyz` answers 200).

use std::process::{Command, Output};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use serde_json::Value;

use crate::common::process::{airq, refused_serve};
use crate::common::TestApp;

fn run(mut command: Command) -> Output {
    command.output().expect("airq runs")
}

/// The token of a successful run: stdout must be exactly one line holding a JWT.
fn token_of(output: &Output) -> String {
    assert!(
        output.status.success(),
        "airq token failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let stdout = String::from_utf8(output.stdout.clone()).expect("utf-8 stdout");
    let token = stdout
        .strip_suffix('\n')
        .expect("stdout ends with a newline");
    assert!(!token.contains('\n'), "exactly one line: {stdout:?}");
    assert_eq!(token.trim(), token, "nothing but the token: {stdout:?}");
    assert_eq!(token.split('.').count(), 3, "a JWT: {token:?}");
    token.to_owned()
}

/// A token's claims, decoded without verifying.
fn payload(token: &str) -> Value {
    let part = token.split('.').nth(1).expect("payload part");
    serde_json::from_slice(&URL_SAFE_NO_PAD.decode(part).expect("base64url")).expect("json")
}

fn now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("after the epoch")
        .as_secs()
        .try_into()
        .expect("fits")
}

/// `GET /devices` with `token`.
async fn list_status(app: &TestApp, token: &str) -> u16 {
    app.client
        .get(app.url("/devices"))
        .bearer_auth(token)
        .send()
        .await
        .expect("request sent")
        .status()
        .as_u16()
}

#[airq_test::test]
fn token_prints_exactly_one_line_holding_the_token() {
    let dir = tempfile::tempdir().unwrap();
    let data_dir = dir.path().join("data");
    let output = run(airq(
        dir.path(),
        &["token", "alice", "--data-dir", data_dir.to_str().unwrap()],
    ));
    let token = token_of(&output);
    let claims = payload(&token);
    assert_eq!(claims["sub"], "alice");
    assert_eq!(claims["iss"], "airq-local");
    assert!(claims["exp"].as_i64().unwrap() > now());
}

#[airq_test::test]
fn token_defaults_to_a_30_day_lifetime() {
    let dir = tempfile::tempdir().unwrap();
    let output = run(airq(
        dir.path(),
        &["token", "alice", "--data-dir", dir.path().to_str().unwrap()],
    ));
    let claims = payload(&token_of(&output));
    let (iat, exp) = (
        claims["iat"].as_i64().unwrap(),
        claims["exp"].as_i64().unwrap(),
    );
    assert_eq!(exp - iat, 30 * 86_400);
}

#[cfg(unix)]
#[airq_test::test]
fn token_creates_the_secret_with_mode_0600() {
    use std::os::unix::fs::PermissionsExt as _;

    let dir = tempfile::tempdir().unwrap();
    let data_dir = dir.path().join("fresh");
    let output = run(airq(
        dir.path(),
        &["token", "alice", "--data-dir", data_dir.to_str().unwrap()],
    ));
    token_of(&output);
    let secret = data_dir.join("owner-token.secret");
    let metadata = std::fs::metadata(&secret).expect("secret file created");
    assert_eq!(metadata.permissions().mode() & 0o777, 0o600);
    assert_eq!(metadata.len(), 32);
}

#[airq_test::test]
fn token_reuses_the_secret_of_the_data_dir() {
    let dir = tempfile::tempdir().unwrap();
    let data_dir = dir.path().to_str().unwrap();
    token_of(&run(airq(
        dir.path(),
        &["token", "alice", "--data-dir", data_dir],
    )));
    let secret = std::fs::read(dir.path().join("owner-token.secret")).unwrap();
    token_of(&run(airq(
        dir.path(),
        &["token", "bob", "--data-dir", data_dir],
    )));
    assert_eq!(
        std::fs::read(dir.path().join("owner-token.secret")).unwrap(),
        secret,
        "a second run keeps the secret"
    );
}

/// A secret the servers of a deployment without an identity provider share.
const SHARED_SECRET: &str = "replicas share this secret of at least 32 bytes";

/// `airq token alice` in an empty directory with the shared secret's variables `env`.
fn shared_secret_token(env: &[(&str, &str)]) -> (tempfile::TempDir, Output) {
    let dir = tempfile::tempdir().expect("temporary dir");
    let mut command = airq(dir.path(), &["token", "alice"]);
    command.envs(env.iter().copied());
    let output = run(command);
    (dir, output)
}

#[airq_test::test]
async fn a_cli_token_signed_with_the_shared_secret_is_accepted_by_every_server_configured_with_it()
{
    let configure = |config: &mut airq::Config| {
        config.owner_auth = airq::config::OwnerAuth::SharedSecret(SHARED_SECRET.into());
        config.auth_issuer = Some("https://airq.example".into());
        config.auth_audience = Some("airq".into());
    };
    let app = TestApp::spawn_with(configure).await;
    let replica = TestApp::spawn_with(configure).await;
    let (dir, output) = shared_secret_token(&[
        ("AIRQ_AUTH_HS256_SECRET", SHARED_SECRET),
        ("AIRQ_AUTH_ISSUER", "https://airq.example"),
        ("AIRQ_AUTH_AUDIENCE", "airq"),
    ]);
    let token = token_of(&output);
    assert_eq!(payload(&token)["iss"], "https://airq.example");
    assert_eq!(payload(&token)["aud"], "airq");
    for server in [&app, &replica] {
        let response = server
            .client
            .get(server.url("/devices"))
            .bearer_auth(&token)
            .send()
            .await
            .expect("request sent");
        assert_eq!(
            response.status(),
            200,
            "a replica with the same secret accepts it"
        );
    }
    assert!(
        !dir.path().join("airq-data").exists(),
        "a shared secret needs no data dir"
    );
    // Without the audience the servers require, the token is refused.
    let (_dir, output) = shared_secret_token(&[
        ("AIRQ_AUTH_HS256_SECRET", SHARED_SECRET),
        ("AIRQ_AUTH_ISSUER", "https://airq.example"),
    ]);
    let response = app
        .client
        .get(app.url("/devices"))
        .bearer_auth(token_of(&output))
        .send()
        .await
        .expect("request sent");
    assert_eq!(response.status(), 401);
}

#[airq_test::test]
fn a_cli_token_refuses_a_short_shared_secret_or_an_issuer_without_one() {
    let (_dir, output) = shared_secret_token(&[("AIRQ_AUTH_HS256_SECRET", "short")]);
    assert!(!output.status.success());
    assert!(String::from_utf8_lossy(&output.stderr).contains("at least 32 bytes"));
    assert!(output.stdout.is_empty());
    let (_dir, output) = shared_secret_token(&[("AIRQ_AUTH_ISSUER", "https://airq.example")]);
    assert!(
        !output.status.success(),
        "an issuer alone would mint a local token that names it"
    );
    assert!(output.stdout.is_empty());
}

#[airq_test::test]
async fn a_cli_token_authenticates_against_a_server_on_the_same_data_dir() {
    let app = TestApp::spawn().await;
    app.register_named("alice", "Kitchen").await;
    let output = run(airq(
        app.data_dir.path(),
        &[
            "token",
            "alice",
            "--data-dir",
            app.data_dir.path().to_str().unwrap(),
        ],
    ));
    let token = token_of(&output);
    let response = app
        .client
        .get(app.url("/devices"))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let body: Value = response.json().await.unwrap();
    assert_eq!(
        body["data"][0]["name"], "Kitchen",
        "the token speaks for alice"
    );
}

#[airq_test::test]
async fn a_cli_token_of_another_data_dir_is_refused() {
    let app = TestApp::spawn().await;
    let elsewhere = tempfile::tempdir().unwrap();
    let output = run(airq(
        elsewhere.path(),
        &[
            "token",
            "alice",
            "--data-dir",
            elsewhere.path().to_str().unwrap(),
        ],
    ));
    assert_eq!(list_status(&app, &token_of(&output)).await, 401);
}

#[airq_test::test]
fn ttl_90m_sets_exp_90_minutes_ahead() {
    let dir = tempfile::tempdir().unwrap();
    let before = now();
    let output = run(airq(
        dir.path(),
        &[
            "token",
            "alice",
            "--ttl",
            "90m",
            "--data-dir",
            dir.path().to_str().unwrap(),
        ],
    ));
    let after = now();
    let claims = payload(&token_of(&output));
    let (iat, exp) = (
        claims["iat"].as_i64().unwrap(),
        claims["exp"].as_i64().unwrap(),
    );
    assert_eq!(exp - iat, 5_400);
    assert!(
        (before + 5_400..=after + 5_400).contains(&exp),
        "exp {exp} is not now + 5400 s (now in {before}..={after})"
    );
}

#[airq_test::test]
fn an_invalid_ttl_fails_with_a_message_on_stderr_and_nothing_on_stdout() {
    let dir = tempfile::tempdir().unwrap();
    let data_dir = dir.path().join("data");
    for ttl in ["3w", "0s", "soon", "-5m", ""] {
        let output = run(airq(
            dir.path(),
            &[
                "token",
                "alice",
                &format!("--ttl={ttl}"),
                "--data-dir",
                data_dir.to_str().unwrap(),
            ],
        ));
        assert!(!output.status.success(), "--ttl {ttl} accepted");
        assert!(
            output.stdout.is_empty(),
            "stdout for --ttl {ttl}: {output:?}"
        );
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains("ttl"), "stderr names the flag: {stderr}");
    }
    assert!(
        !data_dir.join("owner-token.secret").exists(),
        "nothing is created for a refused command"
    );
}

#[airq_test::test]
fn an_owner_is_required() {
    let dir = tempfile::tempdir().unwrap();
    let output = run(airq(
        dir.path(),
        &["token", "--data-dir", dir.path().to_str().unwrap()],
    ));
    assert!(!output.status.success());
    assert!(output.stdout.is_empty());
    assert!(!output.stderr.is_empty());
}

#[airq_test::test]
fn an_owner_the_server_would_refuse_gets_no_token() {
    let dir = tempfile::tempdir().unwrap();
    let data_dir = dir.path().join("data");
    let long = "a".repeat(256);
    for owner in ["", "ali\nce", long.as_str()] {
        let output = run(airq(
            dir.path(),
            &["token", owner, "--data-dir", data_dir.to_str().unwrap()],
        ));
        assert!(!output.status.success(), "owner {owner:?} accepted");
        assert!(output.stdout.is_empty(), "{output:?}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains("an owner has 1 to 255 bytes"), "{stderr}");
    }
    assert!(!data_dir.join("owner-token.secret").exists());
}

#[airq_test::test]
async fn airq_data_dir_selects_the_data_dir_without_the_flag() {
    let app = TestApp::spawn().await;
    let cwd = tempfile::tempdir().unwrap();
    let mut command = airq(cwd.path(), &["token", "alice"]);
    command.env("AIRQ_DATA_DIR", app.data_dir.path());
    let token = token_of(&run(command));
    assert_eq!(list_status(&app, &token).await, 200);
    assert!(
        !cwd.path().join("airq-data").exists(),
        "the default data dir is not used"
    );
}

#[airq_test::test]
fn without_flag_or_variable_the_data_dir_is_airq_data_in_the_working_directory() {
    let cwd = tempfile::tempdir().unwrap();
    token_of(&run(airq(cwd.path(), &["token", "alice"])));
    assert!(cwd
        .path()
        .join("airq-data")
        .join("owner-token.secret")
        .is_file());
}

#[airq_test::test]
fn a_questdb_table_name_that_is_not_an_identifier_is_refused() {
    for bad in [
        "",
        "1readings",
        "readings; DROP TABLE x",
        "read-ings",
        &"r".repeat(124),
    ] {
        refused_serve(&["--questdb-table", bad], "is not a table name");
    }
}

#[airq_test::test]
fn questdb_readings_need_the_pg_wire_url_and_postgres_devices() {
    refused_serve(
        &["--questdb-ilp", "http::addr=127.0.0.1:9;"],
        "--questdb-pg",
    );
    refused_serve(
        &[
            "--questdb-ilp",
            "http::addr=127.0.0.1:9;",
            "--questdb-pg",
            "postgres://admin:quest@127.0.0.1:9/qdb",
        ],
        "--postgres-url",
    );
}

#[airq_test::test]
fn a_jwks_url_that_is_not_http_is_refused() {
    refused_serve(
        &["--auth-jwks-url", "ftp://idp.example/jwks.json"],
        "is not an http or https URL",
    );
}

#[airq_test::test]
fn a_jwks_url_and_a_shared_secret_cannot_both_be_configured() {
    refused_serve(
        &[
            "--auth-jwks-url",
            "http://127.0.0.1:9/jwks.json",
            "--auth-hs256-secret",
            "a shared secret of thirty-two bytes or more",
        ],
        "cannot be used with",
    );
}

#[airq_test::test]
fn a_truncated_token_secret_is_refused_instead_of_replaced() {
    let dir = tempfile::tempdir().expect("temporary dir");
    std::fs::write(dir.path().join("owner-token.secret"), b"short").expect("write");
    let data_dir = dir.path().to_str().expect("utf-8 path");
    let output = run(airq(
        dir.path(),
        &["token", "alice", "--data-dir", data_dir],
    ));
    assert!(!output.status.success());
    assert!(output.stdout.is_empty());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("is not 32 bytes long"), "{stderr}");
    assert_eq!(
        std::fs::read(dir.path().join("owner-token.secret")).expect("read"),
        b"short",
        "the secret is left for the operator to inspect"
    );
}

/// `airq healthcheck ARGS` run beside the test's runtime, so an in-process server keeps answering.
async fn healthcheck(args: &[&str], listen_env: Option<&str>) -> Output {
    let cwd = tempfile::tempdir().expect("temporary dir");
    let mut command = airq(cwd.path(), &[&["healthcheck"], args].concat());
    if let Some(listen) = listen_env {
        command.env("AIRQ_LISTEN", listen);
    }
    tokio::task::spawn_blocking(move || run(command))
        .await
        .expect("the check ran")
}

/// The `host:port` a test server listens on.
fn address_of(app: &TestApp) -> &str {
    app.base.strip_prefix("http://").expect("an http base URL")
}

/// A failed check: exit 1, nothing on stdout, one line on stderr that contains `reason`.
fn assert_unhealthy(output: &Output, reason: &str) {
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    assert!(output.stdout.is_empty(), "{output:?}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(stderr.lines().count(), 1, "one line: {stderr:?}");
    assert!(stderr.contains(reason), "stderr says {reason:?}: {stderr}");
}

/// A port that nothing listens on (bound, then released).
fn closed_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    listener.local_addr().expect("local address").port()
}

/// A server on a free port that reads one request and answers `response` (or nothing at all when
/// it is `None`, holding the connection open for `hold`).
fn canned_server(response: Option<&'static str>, hold: Duration) -> String {
    use std::io::{Read as _, Write as _};

    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let address = listener.local_addr().expect("local address").to_string();
    std::thread::spawn(move || {
        if let Ok((mut stream, _)) = listener.accept() {
            let mut request = [0_u8; 1024];
            let _ = stream.read(&mut request);
            match response {
                Some(response) => {
                    let _ = stream.write_all(response.as_bytes());
                }
                None => std::thread::sleep(hold),
            }
        }
    });
    address
}

#[airq_test::test]
async fn healthcheck_exits_0_when_the_server_is_ready() {
    let app = TestApp::spawn().await;
    let output = healthcheck(&["--listen", address_of(&app)], None).await;
    assert!(output.status.success(), "{output:?}");
    assert!(output.stdout.is_empty() && output.stderr.is_empty());
}

#[airq_test::test]
async fn healthcheck_reads_airq_listen_and_reaches_an_unspecified_address_over_loopback() {
    let app = TestApp::spawn().await;
    let port = address_of(&app).rsplit_once(':').expect("a port").1;
    let output = healthcheck(&[], Some(&format!("0.0.0.0:{port}"))).await;
    assert!(output.status.success(), "{output:?}");
}

#[airq_test::test]
async fn healthcheck_fails_on_a_closed_port() {
    let address = format!("127.0.0.1:{}", closed_port());
    let output = healthcheck(&["--listen", &address], None).await;
    assert_unhealthy(&output, &format!("cannot connect to {address}"));
}

#[airq_test::test]
async fn healthcheck_fails_when_readyz_is_not_200_and_quotes_the_problem() {
    let address = canned_server(
        Some(concat!(
            "HTTP/1.1 503 Service Unavailable\r\n",
            "Content-Type: application/problem+json\r\n",
            "Content-Length: 70\r\n",
            "Connection: close\r\n\r\n",
            r#"{"type":"about:blank","status":503,"detail":"QuestDB does not answer"}"#,
        )),
        Duration::ZERO,
    );
    let output = healthcheck(&["--listen", &address], None).await;
    assert_unhealthy(&output, "503 Service Unavailable: QuestDB does not answer");
}

#[airq_test::test]
async fn healthcheck_gives_up_after_its_timeout() {
    let address = canned_server(None, Duration::from_secs(10));
    let started = std::time::Instant::now();
    let output = healthcheck(&["--listen", &address, "--timeout", "300ms"], None).await;
    assert_unhealthy(&output, "no answer");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "gave up after {:?}",
        started.elapsed()
    );
}

#[airq_test::test]
async fn healthcheck_refuses_port_0() {
    let output = healthcheck(&["--listen", "0.0.0.0:0"], None).await;
    assert_unhealthy(&output, "port 0");
}

/// A second server on `app`'s data dir must refuse to start; that data dir.
fn refused_beside(app: &TestApp) -> String {
    let data_dir = app
        .data_dir
        .path()
        .to_str()
        .expect("a UTF-8 path")
        .to_owned();
    refused_serve(
        &["--data-dir", &data_dir],
        "is in use by another airq process",
    );
    data_dir
}

#[airq_test::test]
async fn a_second_server_on_a_data_dir_in_use_refuses_to_start() {
    let app = TestApp::spawn().await;
    let data_dir = refused_beside(&app);
    let token = run(airq(
        app.data_dir.path(),
        &["token", "alice", "--data-dir", &data_dir],
    ));
    assert!(token.status.success(), "minting a token needs no lock");
    assert_eq!(app.get_as("alice", "/devices").await.status(), 200);
}

#[airq_test::test]
fn an_hs256_secret_shorter_than_32_bytes_is_refused() {
    refused_serve(&["--auth-hs256-secret", ""], "at least 32 bytes");
    refused_serve(
        &["--auth-hs256-secret", "thirty-one bytes, one too short"],
        "at least 32 bytes",
    );
}

#[airq_test::test]
fn an_audience_or_ca_file_without_an_external_identity_provider_is_refused() {
    refused_serve(&["--auth-audience", "airq"], "--auth-jwks-url");
    refused_serve(
        &["--auth-ca-file", "/etc/ssl/certs/ca.pem"],
        "--auth-jwks-url",
    );
}

#[airq_test::test]
fn durations_beyond_their_bounds_are_refused_instead_of_crashing_the_start() {
    for (flag, value) in [
        ("--sqlite-busy-timeout-ms", "2147483648"),
        ("--map-cache-ttl-ms", "31536000000000"),
        ("--batch-max-delay-ms", "18446744073709551615"),
        ("--fold-interval-ms", "0"),
        ("--auth-leeway-secs", "18446744073709551615"),
    ] {
        refused_serve(&[flag, value], flag);
    }
}

#[airq_test::test]
fn a_data_dir_that_is_a_file_is_refused_by_name() {
    let dir = tempfile::tempdir().expect("temporary dir");
    let file = dir.path().join("not-a-dir");
    std::fs::write(&file, b"x").expect("a file");
    refused_serve(
        &["--data-dir", file.to_str().expect("UTF-8")],
        "not-a-dir is not a directory",
    );
}

#[airq_test::test]
fn an_unreachable_postgresql_is_named_by_its_setting() {
    refused_serve(
        &["--postgres-url", "postgres://postgres@127.0.0.1:9/airq"],
        "AIRQ_POSTGRES_URL",
    );
}

#[airq_test::test]
fn a_bad_value_from_a_variable_names_the_variable() {
    let dir = tempfile::tempdir().expect("temporary dir");
    let mut command = airq(dir.path(), &["serve", "--listen", "127.0.0.1:0"]);
    command.env("AIRQ_FOLD_INTERVAL_MS", "0");
    let output = run(command);
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("--fold-interval-ms")
            && stderr
                .contains("the value came from the environment variable AIRQ_FOLD_INTERVAL_MS"),
        "{stderr}"
    );
}

#[airq_test::test]
fn a_bad_value_of_a_flag_does_not_blame_its_variable() {
    let dir = tempfile::tempdir().expect("temporary dir");
    let mut command = airq(
        dir.path(),
        &[
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--fold-interval-ms",
            "0",
        ],
    );
    command.env("AIRQ_FOLD_INTERVAL_MS", "2000");
    let output = run(command);
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("--fold-interval-ms") && !stderr.contains("environment variable"),
        "{stderr}"
    );
}

/// `airq migrate ARGS` in a fresh directory; its output, which must be a refusal naming `reason`.
fn refused_migrate(args: &[&str], reason: &str) {
    let cwd = tempfile::tempdir().unwrap();
    let mut full = vec!["migrate"];
    full.extend_from_slice(args);
    let output = run(airq(cwd.path(), &full));
    assert!(!output.status.success(), "{args:?} is refused");
    assert!(output.stdout.is_empty(), "{output:?}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains(reason), "{args:?}: {reason:?} in {stderr}");
    assert!(
        !cwd.path().join("airq-data").exists(),
        "a refused migration creates no data dir"
    );
}

#[airq_test::test]
fn a_migration_needs_postgres_and_both_questdb_urls_and_a_data_dir() {
    refused_migrate(&[], "--postgres-url");
    let postgres = ["--postgres-url", "postgres://airq@127.0.0.1:9/airq"];
    refused_migrate(
        &[&postgres[..], &["--questdb-ilp", "http::addr=127.0.0.1:9;"]].concat(),
        "--questdb-pg",
    );
    refused_migrate(
        &[
            &postgres[..],
            &["--questdb-pg", "postgres://admin:quest@127.0.0.1:9/qdb"],
        ]
        .concat(),
        "--questdb-ilp",
    );
    refused_migrate(
        &[&postgres[..], &["--questdb-table", "read-ings"]].concat(),
        "is not a table name",
    );
    // No data dir at the default path: nothing is created, nothing is connected to.
    refused_migrate(&postgres, "is not an airq data directory");
    // A data dir without the embedded database (a QuestDB replica's spool) is not touched.
    let replica = tempfile::tempdir().unwrap();
    std::fs::write(replica.path().join("airq-format"), "1\n").unwrap();
    refused_migrate(
        &[
            &postgres[..],
            &["--data-dir", replica.path().to_str().unwrap()],
        ]
        .concat(),
        "holds no embedded database (airq.db)",
    );
    assert!(!replica.path().join("airq.db").exists());
}

#[airq_test::test]
async fn a_migration_refuses_a_data_dir_its_server_holds() {
    let app = TestApp::spawn().await;
    let output = run(airq(
        app.data_dir.path(),
        &[
            "migrate",
            "--data-dir",
            app.data_dir.path().to_str().unwrap(),
            "--postgres-url",
            "postgres://airq@127.0.0.1:9/airq",
        ],
    ));
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("stop its server first") && stderr.contains("in use by another airq"),
        "{stderr}"
    );
    // The server goes on serving.
    assert_eq!(app.get_as("alice", "/devices").await.status(), 200);
}

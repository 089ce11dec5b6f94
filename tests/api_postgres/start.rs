//! Starting the production pair: a QuestDB that cannot be reached stops the start, and the
//! message names the setting to fix, as an unreachable PostgreSQL's does.

use std::process::{Command, Output};

use crate::common::TestSchema;

/// `airq serve` with devices in the test schema and readings in QuestDB at `questdb_pg`, with no
/// `AIRQ_*` variable inherited.
async fn serve_with_questdb(schema: &TestSchema, questdb_pg: &str) -> Output {
    let dir = tempfile::tempdir().expect("temporary dir");
    let mut command = Command::new(env!("CARGO_BIN_EXE_airq"));
    command
        .args(["serve", "--listen", "127.0.0.1:0", "--data-dir"])
        .arg(dir.path())
        .args(["--postgres-url", &schema.url])
        .args(["--questdb-ilp", "http::addr=127.0.0.1:9;"])
        .args(["--questdb-pg", questdb_pg]);
    for (name, _) in std::env::vars_os() {
        if name.to_string_lossy().starts_with("AIRQ_") {
            command.env_remove(name);
        }
    }
    tokio::task::spawn_blocking(move || command.output().expect("airq runs"))
        .await
        .expect("the run is joined")
}

#[airq_test::test]
async fn an_unreachable_questdb_is_named_by_its_setting() {
    let schema = TestSchema::create().await;
    let output = serve_with_questdb(&schema, "postgres://admin:quest@127.0.0.1:9/qdb").await;
    assert!(!output.status.success(), "the start is refused");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("AIRQ_QUESTDB_PG") && stderr.contains("Connection refused"),
        "{stderr}"
    );
    assert!(output.stdout.is_empty());
}

//! Format versions: the data directory (`airq-format`) and its ingestion log (`ingest/FORMAT`)
//! say which format they are in. A new directory is stamped with the current one; a directory
//! from a newer airq, or with data from a pre-release build, stops the start with a message that
//! says so, before anything in it is opened or changed.

use std::path::Path;

use crate::common::process::{airq, refused_serve};
use crate::common::TestApp;

/// A data dir a server has written (and stopped), with a device in it.
async fn written_data_dir() -> tempfile::TempDir {
    let mut app = TestApp::spawn().await;
    app.register_named("alice", "balcony").await;
    let data_dir = std::mem::replace(&mut app.data_dir, tempfile::tempdir().expect("temp dir"));
    app.stop().await;
    data_dir
}

/// `airq serve` on `data_dir` must refuse to start, saying `reason`.
fn refused_on(data_dir: &Path, reason: &str) {
    let path = data_dir.to_str().expect("a UTF-8 path");
    refused_serve(&["--data-dir", path], reason);
}

#[airq_test::test]
async fn a_new_data_dir_and_its_log_are_stamped_with_the_current_format() {
    let data_dir = written_data_dir().await;
    let stamped = |path: &str| std::fs::read_to_string(data_dir.path().join(path)).ok();
    assert_eq!(stamped("airq-format").as_deref(), Some("1\n"));
    assert_eq!(stamped("ingest/FORMAT").as_deref(), Some("1\n"));
    // And a restart on it reads it.
    let app = TestApp::spawn_in(data_dir, |_| {}).await;
    assert_eq!(app.get_as("alice", "/devices").await.status(), 200);
}

#[airq_test::test]
async fn a_data_dir_from_a_newer_airq_is_refused_and_left_as_it_was() {
    let data_dir = written_data_dir().await;
    let version = data_dir.path().join("airq-format");
    std::fs::write(&version, "2\n").expect("a newer format");
    let db = std::fs::read(data_dir.path().join("airq.db")).expect("airq.db");
    refused_on(data_dir.path(), "written by a newer airq");
    assert_eq!(std::fs::read_to_string(version).expect("version"), "2\n");
    assert_eq!(
        std::fs::read(data_dir.path().join("airq.db")).expect("airq.db"),
        db
    );
}

#[airq_test::test]
async fn an_ingestion_log_from_a_newer_airq_is_refused() {
    let data_dir = written_data_dir().await;
    std::fs::write(data_dir.path().join("ingest/FORMAT"), "2\n").expect("a newer format");
    refused_on(data_dir.path(), "written by a newer airq");
}

#[airq_test::test]
async fn a_version_that_names_no_format_is_refused() {
    let data_dir = written_data_dir().await;
    std::fs::write(data_dir.path().join("airq-format"), "one\n").expect("garbage");
    refused_on(data_dir.path(), "does not name a format this airq knows");
}

#[airq_test::test]
async fn a_data_dir_with_data_but_no_version_is_refused_as_pre_release() {
    let data_dir = written_data_dir().await;
    std::fs::remove_file(data_dir.path().join("airq-format")).expect("version removed");
    refused_on(data_dir.path(), "pre-release");
}

#[airq_test::test]
async fn a_database_with_a_newer_schema_is_refused() {
    let data_dir = written_data_dir().await;
    let db = rusqlite::Connection::open(data_dir.path().join("airq.db")).expect("airq.db");
    db.pragma_update(None, "user_version", 99)
        .expect("a newer schema");
    drop(db);
    refused_on(data_dir.path(), "written by a newer airq");
}

#[airq_test::test]
fn airq_version_names_the_version_of_the_package() {
    let output = airq(Path::new("."), &["--version"])
        .output()
        .expect("airq runs");
    assert!(output.status.success());
    assert_eq!(
        String::from_utf8_lossy(&output.stdout).trim(),
        format!("airq {}", env!("CARGO_PKG_VERSION"))
    );
}

#[airq_test::test]
fn the_changelog_has_a_section_for_the_packages_version() {
    let changelog =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("CHANGELOG.md"))
            .expect("CHANGELOG.md");
    let heading = format!("## [{}]", env!("CARGO_PKG_VERSION"));
    assert!(changelog.contains(&heading), "CHANGELOG.md has {heading}");
}

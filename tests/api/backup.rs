//! `airq backup DEST` while the server runs and takes uploads: the copy, started as a server,
//! holds every reading acknowledged before the backup began.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::json;

use crate::batch::{batch_receipts, post_batch};
use crate::common::process::airq;
use crate::common::{sample, TestApp};

/// `airq backup DEST --data-dir SOURCE`; its output.
fn backup(source: &Path, destination: &Path) -> std::process::Output {
    airq(
        Path::new("."),
        &[
            "backup",
            destination.to_str().expect("a UTF-8 path"),
            "--data-dir",
            source.to_str().expect("a UTF-8 path"),
        ],
    )
    .output()
    .expect("airq backup runs")
}

#[airq_test::test]
async fn a_backup_under_upload_load_restores_every_reading_acknowledged_before_it_began() {
    // Small log segments, folded often: segments are pruned while the backup copies, as they
    // are under a long-running load.
    let app = Arc::new(
        TestApp::spawn_with(|c| {
            c.fold.interval = Duration::from_millis(20);
            c.log_segment_bytes = 64 * 1024;
        })
        .await,
    );
    let device = app.register_named("alice", "balcony").await;
    let acknowledged = Arc::new(Mutex::new(Vec::new()));
    let stop = Arc::new(AtomicBool::new(false));
    let uploads = {
        let (app, device, acknowledged, stop) = (
            Arc::clone(&app),
            device.clone(),
            Arc::clone(&acknowledged),
            Arc::clone(&stop),
        );
        tokio::spawn(async move {
            let batch = json!({ "readings": vec![sample(); 200] });
            while !stop.load(Ordering::Relaxed) {
                let receipts = batch_receipts(post_batch(&app, &device, &batch).await).await;
                acknowledged
                    .lock()
                    .expect("ids")
                    .extend(receipts.into_iter().map(|(id, _)| id));
            }
        })
    };
    // Uploads are under way, some folded, some not.
    while acknowledged.lock().expect("ids").len() < 20_000 {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let before: Vec<u64> = acknowledged.lock().expect("ids").clone();
    let target = tempfile::tempdir().expect("backup dir");
    let source = app.data_dir.path().to_owned();
    let destination = target.path().to_owned();
    let output = tokio::task::spawn_blocking(move || backup(&source, &destination))
        .await
        .expect("backup ran");
    stop.store(true, Ordering::Relaxed);
    uploads.await.expect("uploads");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(String::from_utf8_lossy(&output.stdout).contains("restore with `airq serve"));

    let restored = TestApp::spawn_in(target, |_| {}).await;
    let stored = restored.stored_ids().await;
    let missing: Vec<&u64> = before
        .iter()
        .filter(|id| stored.binary_search(id).is_err())
        .collect();
    assert!(
        missing.is_empty(),
        "{} acknowledged readings missing, e.g. {:?}",
        missing.len(),
        &missing[..missing.len().min(5)]
    );
    // The restored server serves them, and its owner's token still works.
    let current = restored
        .data_as(
            "alice",
            &format!("/devices/{}/current", device["id"].as_str().expect("id")),
        )
        .await;
    assert!(current["sample_count"]
        .as_u64()
        .is_some_and(|count| count > 0));
}

#[airq_test::test]
async fn a_backup_never_overwrites_and_needs_a_data_dir() {
    let app = TestApp::spawn().await;
    let occupied = tempfile::tempdir().expect("dir");
    std::fs::write(occupied.path().join("keep.txt"), "mine").expect("a file");
    let output = backup(app.data_dir.path(), occupied.path());
    assert!(!output.status.success());
    assert!(String::from_utf8_lossy(&output.stderr).contains("is not an empty directory"));
    assert_eq!(
        std::fs::read_to_string(occupied.path().join("keep.txt")).expect("kept"),
        "mine"
    );
    let empty = tempfile::tempdir().expect("dir");
    let output = backup(empty.path(), &empty.path().join("copy"));
    assert!(!output.status.success());
    assert!(String::from_utf8_lossy(&output.stderr).contains("is not an airq data directory"));
    assert!(!empty.path().join("copy").exists());
}

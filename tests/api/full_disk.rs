//! A full disk under the embedded store: uploads are refused with 500 while nothing can be
//! written and `/readyz` says so; once space is free again uploads are stored again, a stop
//! signal stops the server meanwhile, and nothing acknowledged is lost.
//!
//! The data dir lives on a small tmpfs the test mounts, and a file fills it. Mounting needs root
//! (CI runs as root); elsewhere these tests say "skipped" and pass nothing off as checked.

use std::fs::File;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use serde_json::{json, Value};
use tempfile::TempDir;

use crate::common::process::{serve, token, DATA_DIR};
use crate::common::{sample, TestApp};

/// Failed batches of 1,000 readings sent while the disk is full: more ids than the fold's
/// backlog bound (85,000) holds, which is what wedged the writer for good.
const REFUSED_BATCHES: usize = 90;

/// A tmpfs of 64 MiB mounted on a temporary directory, unmounted when dropped.
struct SmallFilesystem {
    mount_point: TempDir,
}

impl SmallFilesystem {
    /// The filesystem, or `None` (with the reason printed) where this process may not mount.
    fn mount() -> Option<Self> {
        let mount_point = tempfile::tempdir().expect("mount point");
        let mounted = Command::new("mount")
            .args(["-t", "tmpfs", "-o", "size=64m", "airq-test"])
            .arg(mount_point.path())
            .output();
        match mounted {
            Ok(output) if output.status.success() => Some(Self { mount_point }),
            Ok(output) => {
                println!(
                    "skipped: a small tmpfs cannot be mounted here ({})",
                    String::from_utf8_lossy(&output.stderr).trim()
                );
                None
            }
            Err(error) => {
                println!("skipped: `mount` cannot run here ({error})");
                None
            }
        }
    }

    fn path(&self) -> &Path {
        self.mount_point.path()
    }

    /// Writes a file until the filesystem is full; the file, to free the space again.
    fn fill(&self) -> PathBuf {
        let path = self.path().join("filler");
        let mut file = File::create(&path).expect("filler created");
        for chunk in [vec![0; 1 << 20], vec![0; 4096], vec![0; 1]] {
            while file.write_all(&chunk).is_ok() {}
        }
        path
    }
}

impl Drop for SmallFilesystem {
    fn drop(&mut self) {
        let _ = Command::new("umount")
            .arg("-l")
            .arg(self.mount_point.path())
            .status();
    }
}

/// Sends batches of 1,000 readings until `count` of them were answered 500; the receipt ids of
/// any that were stored (the disk may take a few before it is full everywhere).
async fn refused_batches(
    client: &reqwest::Client,
    api: &str,
    device: &Value,
    count: usize,
) -> Vec<u64> {
    let readings = vec![sample(); 1_000];
    let mut refused = 0;
    let mut stored = Vec::new();
    for _ in 0..count * 2 {
        let response = client
            .post(format!("{api}/data/batch"))
            .header("x-device-id", device["device_id"].as_str().expect("id"))
            .header("x-device-key", device["device_key"].as_str().expect("key"))
            .json(&json!({ "readings": readings }))
            .send()
            .await
            .expect("every batch is answered");
        match response.status().as_u16() {
            500 => refused += 1,
            201 => {
                let body: Value = response.json().await.expect("receipt");
                stored.extend(
                    body["data"]["receipts"]
                        .as_array()
                        .expect("receipts")
                        .iter()
                        .map(|receipt| receipt["id"].as_u64().expect("id")),
                );
            }
            other => panic!("a batch on a full disk answered {other}"),
        }
        if refused == count {
            return stored;
        }
    }
    panic!(
        "only {refused} of {} batches were refused on a full disk",
        count * 2
    );
}

#[airq_test::test]
async fn a_full_disk_refuses_uploads_and_once_space_is_free_they_are_stored_again() {
    let Some(disk) = SmallFilesystem::mount() else {
        return;
    };
    let data_dir = TempDir::new_in(disk.path()).expect("data dir on the small disk");
    let app = TestApp::spawn_in(data_dir, |c| c.batch.retries = 0).await;
    let device = app.register_named("alice", "balcony").await;
    let mut acknowledged = vec![app.upload_ok(&device, &sample()).await["id"]
        .as_u64()
        .expect("receipt id")];

    let filler = disk.fill();
    acknowledged.extend(refused_batches(&app.client, &app.url(""), &device, REFUSED_BATCHES).await);
    let ready = app.client.get(format!("{}/readyz", app.base)).send().await;
    assert_eq!(
        ready.expect("readyz answers").status(),
        503,
        "not ready while writes fail"
    );

    std::fs::remove_file(filler).expect("space freed");
    // The client's own timeout (30 s) fails the test if the upload hangs, as it once did.
    let after = app.upload_ok(&device, &sample()).await;
    acknowledged.push(after["id"].as_u64().expect("receipt id"));
    let ready = app.client.get(format!("{}/readyz", app.base)).send().await;
    assert_eq!(ready.expect("readyz answers").status(), 200, "ready again");

    let stored = app.stored_ids().await;
    for id in &acknowledged {
        assert!(stored.contains(id), "acknowledged reading {id} is stored");
    }
    assert_eq!(
        stored.len(),
        acknowledged.len(),
        "nothing refused was stored"
    );
}

#[airq_test::test]
async fn a_stop_signal_stops_the_server_while_the_disk_is_full() {
    let Some(disk) = SmallFilesystem::mount() else {
        return;
    };
    let (mut server, address) = serve(disk.path(), |command| {
        command
            .env("AIRQ_FLUSH_RETRIES", "0")
            .env("AIRQ_RATE_DEVICE_PER_MIN", "0")
            .env("AIRQ_SHUTDOWN_TIMEOUT_MS", "2000");
    });
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(30))
        .build()
        .expect("client");
    let api = format!("http://{address}/api/v1");
    let owner = token(disk.path(), DATA_DIR, "alice");
    let device: Value = client
        .post(format!("{api}/devices"))
        .bearer_auth(owner)
        .json(&json!({"name": "balcony"}))
        .send()
        .await
        .expect("registered")
        .json()
        .await
        .expect("device");
    let device = device["data"].clone();

    let _filler = disk.fill();
    refused_batches(&client, &api, &device, REFUSED_BATCHES).await;
    server.signal("TERM");
    // Twice the shutdown timeout bounds the drain, the batch writer's included.
    let status = tokio::task::spawn_blocking(move || {
        let status = server.exit_within(Duration::from_secs(60));
        drop(server);
        status
    })
    .await
    .expect("waited");
    assert!(status.success(), "a stop on a full disk exits 0: {status}");
}

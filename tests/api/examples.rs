//! `examples/gateway`: the Python gateway (standard library only) against the real server. It
//! reads a CSV and forwards it through `POST /api/v1/data/batch`; running it again over the same
//! file stores nothing twice, because every reading it sends carries `measured_at`. Its own unit
//! tests (parsing, retries, splitting; no server needed) and its dry run are checked here too.
//!
//! Needs `python3` on the PATH (3.8 or later); without it these tests fail saying so.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use chrono::{DateTime, SecondsFormat, TimeDelta, Utc};
use serde_json::Value;

use crate::common::{assert_close, TestApp};

fn gateway_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/gateway")
}

/// `python3 ARGS` in the gateway's directory, with `env` and no inherited `AIRQ_*` variable.
fn python(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut command = Command::new("python3");
    command
        .args(args)
        .current_dir(gateway_dir())
        // No __pycache__ left in the source tree.
        .env("PYTHONDONTWRITEBYTECODE", "1");
    for (name, _) in std::env::vars_os() {
        if name.to_string_lossy().starts_with("AIRQ_") {
            command.env_remove(name);
        }
    }
    command.envs(env.iter().copied());
    command.output().unwrap_or_else(|error| {
        panic!("python3 is required to test examples/gateway (tests/api/examples.rs): {error}")
    })
}

/// The gateway against `app` as `device`, reading `csv`, with extra flags. Runs on a blocking
/// thread: the server answers on this test's runtime.
async fn gateway(app: &TestApp, device: &Value, csv: &Path, flags: &[&str]) -> Output {
    let url = app.base.clone();
    let id = device["device_id"].as_str().expect("device_id").to_owned();
    let key = device["device_key"]
        .as_str()
        .expect("device_key")
        .to_owned();
    let csv = csv.to_str().expect("utf-8 path").to_owned();
    let flags: Vec<String> = flags.iter().map(|flag| (*flag).to_owned()).collect();
    tokio::task::spawn_blocking(move || {
        let mut args = vec!["airq_gateway.py", "--url", &url, "--max-retries", "2"];
        args.extend(flags.iter().map(String::as_str));
        args.push(&csv);
        // The key goes in the environment, as the README advises.
        python(&args, &[("AIRQ_DEVICE_ID", &id), ("AIRQ_DEVICE_KEY", &key)])
    })
    .await
    .expect("the gateway ran")
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

fn rfc3339(at: DateTime<Utc>) -> String {
    at.to_rfc3339_opts(SecondsFormat::Millis, true)
}

/// A CSV with a header and five readings, 50 to 10 minutes before now (pm2_5 10, 20, … 50);
/// the last one is located.
fn five_readings(dir: &Path) -> PathBuf {
    let now = Utc::now();
    let mut text = String::from(
        "measured_at,aqi,pm1_0,pm2_5,pm10_0,temperature,humidity,heat_index,lat,lon\n",
    );
    for index in 0..5 {
        let at = now - TimeDelta::minutes(50 - 10 * index);
        let pm2_5 = 10 * (index + 1);
        let location = if index == 4 { "52.52,13.405" } else { "," };
        text.push_str(&format!(
            "{},{},{},{pm2_5},{},21.5,48,21.9,{location}\n",
            rfc3339(at),
            40 + index,
            pm2_5 / 2,
            pm2_5 * 2,
        ));
    }
    let path = dir.join("readings.csv");
    std::fs::write(&path, text).expect("CSV written");
    path
}

#[airq_test::test]
fn the_gateways_unit_tests_pass() {
    let output = python(&["-m", "unittest", "test_airq_gateway"], &[]);
    assert!(
        output.status.success(),
        "python3 -m unittest test_airq_gateway failed:\n{}",
        stderr(&output)
    );
}

#[airq_test::test]
fn a_dry_run_prints_the_batches_it_would_send() {
    let dir = tempfile::tempdir().expect("temporary dir");
    let csv = five_readings(dir.path());
    let output = python(
        &[
            "airq_gateway.py",
            "--dry-run",
            "--batch-size",
            "2",
            csv.to_str().expect("utf-8 path"),
        ],
        &[],
    );
    assert!(output.status.success(), "{}", stderr(&output));
    let batches: Vec<Value> = String::from_utf8(output.stdout)
        .expect("utf-8")
        .lines()
        .map(|line| serde_json::from_str(line).expect("one JSON body per line"))
        .collect();
    let sizes: Vec<usize> = batches
        .iter()
        .map(|batch| batch["readings"].as_array().expect("readings").len())
        .collect();
    assert_eq!(sizes, [2, 2, 1]);
    let last = &batches[2]["readings"][0];
    assert_eq!(last["aqi"], 44);
    assert_eq!(last["pms_data"]["pm2_5"], 50.0);
    assert_eq!(last["pms_data"]["provider"], "PMS5003");
    assert_eq!(last["temperature_data"]["provider"], "BME280");
    assert_eq!(last["location"]["lat"], 52.52);
    assert!(batches[0]["readings"][0].get("location").is_none());
    assert!(batches
        .iter()
        .flat_map(|batch| batch["readings"].as_array().expect("readings"))
        .all(|reading| reading["measured_at"].is_string()));
}

#[airq_test::test]
async fn the_gateway_stores_a_csv_once_however_often_it_runs() {
    let app = TestApp::spawn().await;
    let device = app.register_named("alice", "gateway").await;
    let dir = tempfile::tempdir().expect("temporary dir");
    let csv = five_readings(dir.path());
    let current = format!("/devices/{}/current", device["id"].as_str().expect("id"));

    let first = gateway(&app, &device, &csv, &["--batch-size", "2"]).await;
    assert_eq!(first.status.code(), Some(0), "{}", stderr(&first));
    assert!(
        stderr(&first).contains("done: 5 readings stored in 3 batches"),
        "{}",
        stderr(&first)
    );
    assert_eq!(app.stored_ids().await.len(), 5);
    let snapshot = app.data_as("alice", &current).await;
    assert_eq!(snapshot["sample_count"], 5, "{snapshot}");
    assert_close(&snapshot["pm2_5"], 30.0, "mean pm2_5");
    assert_eq!(snapshot["aqi"], 42, "{snapshot}");
    assert_close(&snapshot["location"]["lat"], 52.52, "latest location");
    assert_eq!(snapshot["location"]["provider"], "gateway", "{snapshot}");

    // The same file again, batched differently, as after a lost answer: replaced, not added.
    let second = gateway(&app, &device, &csv, &["--batch-size", "5", "--no-gzip"]).await;
    assert_eq!(second.status.code(), Some(0), "{}", stderr(&second));
    assert_eq!(app.stored_ids().await.len(), 5, "no duplicates");
    let snapshot = app.data_as("alice", &current).await;
    assert_eq!(snapshot["sample_count"], 5, "{snapshot}");
    assert_close(&snapshot["pm2_5"], 30.0, "mean pm2_5");
}

#[airq_test::test]
async fn a_refused_batch_stops_the_gateway_naming_the_line() {
    let app = TestApp::spawn().await;
    let device = app.register_named("alice", "gateway").await;
    let dir = tempfile::tempdir().expect("temporary dir");
    let at = |minutes: i64| rfc3339(Utc::now() - TimeDelta::minutes(minutes));
    let csv = dir.path().join("faulty.csv");
    std::fs::write(
        &csv,
        format!(
            "{},40,5,10,20,21.5,48,21.9\n{},41,5,10,20,21.5,150,21.9\n",
            at(20),
            at(10)
        ),
    )
    .expect("CSV written");

    let output = gateway(&app, &device, &csv, &[]).await;
    let text = stderr(&output);
    assert_eq!(output.status.code(), Some(3), "{text}");
    assert!(text.contains("422"), "{text}");
    assert!(
        text.contains("line 2: temperature_data.humidity: maximum"),
        "{text}"
    );
    assert!(app.stored_ids().await.is_empty(), "all or nothing");

    let mut stranger = device.clone();
    stranger["device_key"] = Value::from(format!("sk_{}", "x".repeat(43)));
    let output = gateway(&app, &stranger, &csv, &[]).await;
    let text = stderr(&output);
    assert_eq!(output.status.code(), Some(3), "{text}");
    assert!(text.contains("401"), "{text}");
}

//! The `seed` scenario: history for the read benchmarks, through the API.
//!
//! Registers M devices (public, located) under one owner and uploads, for each, one reading per
//! `--interval` seconds over the last `--days` days, each carrying `measured_at`. Readings go out
//! in time order across all devices at once (request `i` is device `i mod M`, minute `i / M`),
//! over many keep-alive connections in closed loop, so the server's batches hold consecutive
//! minutes of every device. Afterwards the stored counts are checked like an upload run's.
//!
//! Why the API and not a bulk write into the SQLite file: the API path stores exactly what the
//! server would (raw rows, 15-minute rollups, latest-sample records, id counter) with no second
//! implementation of those rules to keep in step, and it works on every backend.

use std::sync::Arc;
use std::time::Duration;

use chrono::{TimeDelta, Utc};
use serde_json::json;

use crate::cli::SeedArgs;
use crate::client::Target;
use crate::fleet::{load_or_register, owner_token, Registration};
use crate::generator::{Schedule, UploadWorkload};
use crate::load::Plan;
use crate::verify::{Counter, Verdict};
use crate::{cli, rss, server_metrics, BoxError};

/// Runs the scenario and prints its summary.
pub async fn run(args: &SeedArgs) -> Result<serde_json::Value, BoxError> {
    if !(args.days > 0.0 && args.days <= 365.0) {
        return Err(
            "--days must be in (0, 365]: the server refuses readings older than 366 days".into(),
        );
    }
    if args.interval == 0 {
        return Err("--interval must be at least 1 second".into());
    }
    let started_at = Utc::now();
    let target = Target::parse(&args.target.target).await?;
    let token = owner_token(
        args.target.token.as_deref(),
        &args.target.data_dir,
        &args.owner,
    )?;
    let per_device = (args.days * 86_400.0 / f64::from(args.interval)).floor() as u64;
    if per_device == 0 || per_device > i32::MAX as u64 {
        return Err("--days / --interval gives no readings (or too many)".into());
    }
    let devices = args.devices.max(1);
    let total = per_device * devices as u64;
    let step = TimeDelta::seconds(i64::from(args.interval));
    // The last reading of each device is one interval before now; the first lies within --days.
    let start = started_at - step * i32::try_from(per_device).unwrap_or(i32::MAX);

    let obtained = load_or_register(
        &target,
        &token,
        args.fleet.as_ref(),
        &Registration {
            owner: args.owner.clone(),
            count: devices,
            connections: devices.min(16),
            name_prefix: "seed".into(),
            request_timeout: cli::secs(args.request_timeout),
        },
    )
    .await?;
    let fleet = &obtained.fleet;
    let counter = Counter::resolve(args.verify, &args.target.data_dir, &token)?;
    let counter = match counter {
        // The API counts only the last hour: useless for a year of history.
        Counter::Api { .. } => Counter::None,
        other => other,
    };
    // A reused fleet already holds readings (an earlier seed of an older period): only what this
    // run adds is compared with what it acknowledged.
    let before = if obtained.registered {
        Vec::new()
    } else {
        counter
            .count(&target, &fleet.devices)
            .await?
            .unwrap_or_default()
    };

    let plan = Plan {
        label: format!("seed: {devices} devices x {per_device} readings"),
        connections: args.connections.max(1),
        duration: cli::secs(args.time_limit),
        rate: None,
        max_requests: Some(total),
        request_timeout: cli::secs(args.request_timeout),
        grace: Duration::ZERO,
        progress: (args.progress > 0.0).then(|| cli::secs(args.progress)),
    };
    let sampler = rss::maybe_start(
        args.target.server_pid,
        plan.duration + Duration::from_secs(60),
    )?;
    let workload = Arc::new(UploadWorkload::new(
        target.clone(),
        fleet,
        args.location_share,
        Some(Schedule { start, step }),
    )?);
    eprintln!(
        "seed: {total} readings from {} to {} over {} connections (time limit {:.0} s)",
        start.to_rfc3339(),
        (start + step * i32::try_from(per_device - 1).unwrap_or(0)).to_rfc3339(),
        plan.connections,
        plan.duration.as_secs_f64()
    );
    let server_metrics::Measured {
        summary,
        batches,
        memory,
    } = server_metrics::measured_run(&target, Arc::clone(&workload), &plan, sampler).await;
    let verdict = counter
        .count(&target, &fleet.devices)
        .await?
        .map(|after| Verdict::compare(counter.name(), &workload.acks(), &before, &after));
    let complete = summary.recorder.ok() == total;

    println!("{}", summary.render());
    println!(
        "seed: {} of {total} readings stored ({}), {:.0} readings/s; owner {} with {} devices",
        summary.recorder.ok(),
        if complete { "complete" } else { "INCOMPLETE" },
        summary.throughput(),
        args.owner,
        devices,
    );
    if let Some(verdict) = &verdict {
        println!("{}", verdict.render());
    }
    if let Some(batches) = &batches {
        println!("{}", server_metrics::render(batches));
    }
    if let Some(memory) = &memory {
        println!("{}", memory.render());
    }
    Ok(json!({
        "scenario": "seed",
        "target": target.url,
        "started_at": started_at.to_rfc3339(),
        "owner": args.owner,
        "devices": fleet.devices.iter().map(|device| device.id.clone()).collect::<Vec<_>>(),
        "readings_per_device": per_device,
        "interval_s": args.interval,
        "first_measured_at": start.to_rfc3339(),
        "complete": complete,
        "registration": obtained.to_json(),
        "load": summary.to_json(),
        "verify": verdict.as_ref().map(Verdict::to_json),
        "batch_writer": batches,
        "rss": memory.as_ref().map(rss::RssReport::to_json),
    }))
}

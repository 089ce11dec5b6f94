//! The `uploads` scenario: register (or reuse) a fleet, drive `POST /api/v1/data` in closed or
//! open loop, then check that every acknowledged reading is stored.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};

use crate::cli::{FleetArgs, LoadArgs, UploadArgs};
use crate::client::Target;
use crate::fleet::{load_or_register, owner_token, Registration};
use crate::generator::UploadWorkload;
use crate::stats::RunSummary;
use crate::verify::{Counter, Verdict};
use crate::{rss, server_metrics, BoxError};

/// Registration settings from the flags.
pub fn registration(fleet: &FleetArgs, load: &LoadArgs, prefix: &str) -> Registration {
    Registration {
        owner: fleet.owner.clone(),
        count: fleet.devices.max(1),
        connections: fleet.register_connections.max(1),
        name_prefix: prefix.to_owned(),
        request_timeout: crate::cli::secs(load.request_timeout.max(30.0)),
    }
}

/// The outcome of an upload run.
#[derive(Debug)]
pub struct UploadOutcome {
    /// The load's measurements.
    pub summary: RunSummary,
    /// The whole report.
    pub report: Value,
}

/// Runs the scenario and prints its summary.
pub async fn run(args: &UploadArgs) -> Result<UploadOutcome, BoxError> {
    let started_at = chrono::Utc::now().to_rfc3339();
    let target = Target::parse(&args.target.target).await?;
    let token = owner_token(
        args.target.token.as_deref(),
        &args.target.data_dir,
        &args.fleet.owner,
    )?;
    let obtained = load_or_register(
        &target,
        &token,
        args.fleet.fleet.as_ref(),
        &registration(&args.fleet, &args.load, "fleet"),
    )
    .await?;
    let fleet = &obtained.fleet;
    let counter = Counter::resolve(args.verify, &args.target.data_dir, &token);
    if !obtained.registered && matches!(counter, Counter::Api(_)) {
        eprintln!(
            "warning: the API loss check counts the last hour's samples; with a reused fleet it is exact only if the fleet uploaded nothing in the hour before this run"
        );
    }
    let before = if obtained.registered {
        None
    } else {
        counter.count(&target, &fleet.devices).await?
    };

    let plan = args.load.plan("uploads: POST /api/v1/data");
    let sampler = rss::maybe_start(
        args.target.server_pid,
        plan.duration + plan.grace + Duration::from_secs(60),
    )?;
    let workload = Arc::new(UploadWorkload::new(
        target.clone(),
        fleet,
        args.load.location_share,
        None,
    )?);
    eprintln!("uploads: {} against {}", plan.label, target.url);
    let server_metrics::Measured {
        summary,
        batches,
        memory,
    } = server_metrics::measured_run(&target, Arc::clone(&workload), &plan, sampler).await;
    let verdict = counter.count(&target, &fleet.devices).await?.map(|after| {
        Verdict::compare(
            counter.name(),
            &workload.acks(),
            before.as_deref().unwrap_or(&[]),
            &after,
        )
    });

    println!("{}", summary.render());
    if let Some(verdict) = &verdict {
        println!("{}", verdict.render());
    }
    if let Some(batches) = &batches {
        println!("{}", server_metrics::render(batches));
    }
    if let Some(memory) = &memory {
        println!("{}", memory.render());
    }
    let report = json!({
        "scenario": "uploads",
        "target": target.url,
        "started_at": started_at,
        "fleet": obtained.to_json(),
        "load": summary.to_json(),
        "verify": verdict.as_ref().map(Verdict::to_json),
        "batch_writer": batches,
        "rss": memory.as_ref().map(rss::RssReport::to_json),
    });
    Ok(UploadOutcome { summary, report })
}

/// Whether a report's loss check (if any) passed.
pub fn verified(report: &Value) -> bool {
    report["verify"]["passed"].as_bool() != Some(false)
}

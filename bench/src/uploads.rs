//! The `uploads` scenario: register (or reuse) a fleet, drive `POST /api/v1/data` in closed or
//! open loop, then check that every acknowledged reading is stored.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};

use crate::cli::{FleetArgs, LoadArgs, TargetArgs, UploadArgs, VerifyMode};
use crate::client::Target;
use crate::fleet::{load_or_register, owner_token, Obtained, Registration};
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

/// What every upload scenario has before its load: the target, the fleet (registered now or
/// loaded from its file), and the stored counts the loss check starts from.
#[derive(Debug)]
pub struct Setup {
    /// The server.
    pub target: Target,
    /// The fleet and how it came to be.
    pub obtained: Obtained,
    /// How stored readings are counted.
    pub counter: Counter,
    /// Stored readings per device before the run (a reused fleet only).
    pub before: Option<Vec<u64>>,
}

impl Setup {
    /// Takes (or mints) the owner token, obtains the fleet (new devices are named
    /// `{prefix}-{n}`), and counts what a reused fleet has stored already.
    pub async fn new(
        target_args: &TargetArgs,
        fleet_args: &FleetArgs,
        load: &LoadArgs,
        verify: VerifyMode,
        prefix: &str,
    ) -> Result<Self, BoxError> {
        let target = Target::parse(&target_args.target).await?;
        let token = owner_token(
            target_args.token.as_deref(),
            &target_args.data_dir,
            &fleet_args.owner,
        )?;
        let obtained = load_or_register(
            &target,
            &token,
            fleet_args.fleet.as_ref(),
            &registration(fleet_args, load, prefix),
        )
        .await?;
        let counter = Counter::resolve(verify, &target_args.data_dir, &token)?;
        if !obtained.registered && matches!(counter, Counter::Api { .. }) {
            eprintln!(
                "warning: the API loss check counts the last hour's samples; with a reused fleet it is exact only if the fleet uploaded nothing in the hour before this run"
            );
        }
        let before = if obtained.registered {
            None
        } else {
            counter.count(&target, &obtained.fleet.devices).await?
        };
        Ok(Self {
            target,
            obtained,
            counter,
            before,
        })
    }

    /// The loss check of a run whose 201s acknowledged `acks` readings per device (fleet
    /// order); `None` when not checking.
    pub async fn verdict(&self, acks: &[u64]) -> Result<Option<Verdict>, BoxError> {
        let after = self
            .counter
            .count(&self.target, &self.obtained.fleet.devices)
            .await?;
        Ok(after.map(|after| {
            Verdict::compare(
                self.counter.name(),
                acks,
                self.before.as_deref().unwrap_or(&[]),
                &after,
            )
        }))
    }
}

/// Runs the scenario and prints its summary.
pub async fn run(args: &UploadArgs) -> Result<UploadOutcome, BoxError> {
    let started_at = chrono::Utc::now().to_rfc3339();
    let setup = Setup::new(&args.target, &args.fleet, &args.load, args.verify, "fleet").await?;
    let target = &setup.target;
    let obtained = &setup.obtained;

    let plan = args.load.plan("uploads: POST /api/v1/data");
    let sampler = rss::maybe_start(
        args.target.server_pid,
        plan.duration + plan.grace + Duration::from_secs(60),
    )?;
    let mut workload = UploadWorkload::new(
        target.clone(),
        &obtained.fleet,
        args.load.location_share,
        None,
    )?;
    if args.homes == crate::cli::Homes::Towns {
        workload = workload.with_homes(&crate::map::positions(obtained.fleet.devices.len()));
    }
    let workload = Arc::new(workload);
    eprintln!("uploads: {} against {}", plan.label, target.url);
    let server_metrics::Measured {
        summary,
        batches,
        memory,
    } = server_metrics::measured_run(target, Arc::clone(&workload), &plan, sampler).await;
    let verdict = setup.verdict(&workload.acks()).await?;

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

//! The `reads` scenario: owner reads and map polling, one endpoint at a time, with per-endpoint
//! percentiles; optionally while an open-loop upload load runs in the background.
//!
//! The owner is the one `seed` loaded (default `bench-seed`); per-device endpoints rotate over
//! that owner's devices. Each endpoint gets one unmeasured warm-up request, then `--requests`
//! measured ones over `--connections` connections (closed loop). `map-304` sends the entity tag
//! of the latest map it saw in `If-None-Match`, as a polling widget does, and counts 304s; the
//! `map-bbox…` and `map-geojson…` endpoints measure the map's other cached variants.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{Days, Utc};
use hyper::header::{HeaderValue, ACCEPT, ACCEPT_ENCODING, ETAG, IF_NONE_MATCH};
use hyper::{Request, StatusCode};
use serde_json::{json, Value};

use crate::cli::{secs, ReadArgs};
use crate::client::{Answer, Body, Lane, Target};
use crate::fleet::{load_or_register, owner_token, seeded_owner};
use crate::generator::UploadWorkload;
use crate::load::{Plan, Workload};
use crate::stats::RunSummary;
use crate::{load, rss, uploads, BoxError};

/// Endpoint names, in the order they are measured.
pub const ENDPOINTS: &[&str] = &[
    "current",
    "device-current",
    "public-current",
    "device-daily",
    "device-weekly",
    "device-monthly",
    "device-yearly",
    "owner-daily",
    "owner-weekly",
    "owner-monthly",
    "owner-yearly",
    "custom-hour-7d",
    "custom-day-30d",
    "custom-day-366d",
    "custom-month-1y",
    "map",
    "map-gzip",
    "map-304",
    "map-bbox",
    "map-bbox-gzip",
    "map-geojson",
    "map-geojson-gzip",
    "map-geojson-bbox-gzip",
];

/// The box of the `map-bbox` endpoints: Europe, about 2 % of a generated fleet (homes are spread
/// evenly over latitudes -55 to 70 and every longitude), as a regional map view asks for.
const MAP_BBOX: &str = "-10,35,30,60";

/// GETs of one endpoint.
#[derive(Debug)]
struct ReadWorkload {
    target: Target,
    paths: Vec<String>,
    bearer: Option<HeaderValue>,
    /// `map-304`: the latest entity tag seen, sent in `If-None-Match`.
    etag: Option<Mutex<Option<HeaderValue>>>,
    /// `map-gzip`: send `Accept-Encoding: gzip`, as every browser does.
    gzip: bool,
    /// `map-geojson…`: ask for GeoJSON.
    accept: Option<HeaderValue>,
}

impl Workload for ReadWorkload {
    fn request(&self, index: u64) -> Option<(Request<Body>, u32)> {
        let path = &self.paths[(index % self.paths.len() as u64) as usize];
        let mut request = self.target.get(path, self.bearer.as_ref());
        if self.gzip {
            request
                .headers_mut()
                .insert(ACCEPT_ENCODING, HeaderValue::from_static("gzip"));
        }
        if let Some(accept) = &self.accept {
            request.headers_mut().insert(ACCEPT, accept.clone());
        }
        if let Some(etag) = &self.etag {
            if let Some(tag) = etag.lock().ok().and_then(|tag| tag.clone()) {
                request.headers_mut().insert(IF_NONE_MATCH, tag);
            }
        }
        Some((request, 0))
    }

    fn success(&self, status: StatusCode) -> bool {
        status == StatusCode::OK || (self.etag.is_some() && status == StatusCode::NOT_MODIFIED)
    }

    fn observe(&self, _tag: u32, answer: &Answer) {
        if let (Some(etag), Some(seen)) = (&self.etag, answer.headers.get(ETAG)) {
            if let Ok(mut latest) = etag.lock() {
                *latest = Some(seen.clone());
            }
        }
    }
}

/// The paths of endpoint `name`, and whether it needs the owner token.
fn paths(name: &str, devices: &[String], tz: Option<&str>) -> Option<(Vec<String>, bool)> {
    let zone = tz.map(|tz| format!("&tz={tz}")).unwrap_or_default();
    let today = Utc::now().date_naive();
    let back = |days: u64| today.checked_sub_days(Days::new(days)).unwrap_or(today);
    let per_device = |suffix: &str| -> Vec<String> {
        devices
            .iter()
            .map(|id| format!("/api/v1/devices/{id}/{suffix}"))
            .collect()
    };
    let custom = |days: u64, interval: &str| {
        vec![format!(
            "/api/v1/air-quality/custom?start_date={}&end_date={today}&interval={interval}{zone}",
            back(days)
        )]
    };
    Some(match name {
        "current" => (vec!["/api/v1/air-quality/current".into()], true),
        "device-current" => (per_device("current"), true),
        "public-current" => (
            devices
                .iter()
                .map(|id| format!("/api/v1/public/devices/{id}/current"))
                .collect(),
            false,
        ),
        "device-daily" | "device-weekly" | "device-monthly" | "device-yearly" => {
            let timeline = &name["device-".len()..];
            (
                per_device(&format!("historical?timeline={timeline}{zone}")),
                true,
            )
        }
        "owner-daily" | "owner-weekly" | "owner-monthly" | "owner-yearly" => {
            let timeline = &name["owner-".len()..];
            (
                vec![format!(
                    "/api/v1/air-quality/historical?timeline={timeline}{zone}"
                )],
                true,
            )
        }
        "custom-hour-7d" => (custom(6, "hour"), true),
        "custom-day-30d" => (custom(29, "day"), true),
        "custom-day-366d" => (custom(365, "day"), true),
        "custom-month-1y" => (custom(365, "month"), true),
        "map" | "map-gzip" | "map-304" | "map-geojson" | "map-geojson-gzip" => {
            (vec!["/api/v1/public/map/devices".into()], false)
        }
        "map-bbox" | "map-bbox-gzip" | "map-geojson-bbox-gzip" => (
            vec![format!("/api/v1/public/map/devices?bbox={MAP_BBOX}")],
            false,
        ),
        _ => return None,
    })
}

/// Runs the scenario and prints its summary.
pub async fn run(args: &ReadArgs) -> Result<Value, BoxError> {
    let started_at = Utc::now().to_rfc3339();
    let (target, token, devices) = seeded_owner(&args.target, &args.owner).await?;
    let names: Vec<String> = if args.endpoints.is_empty() {
        ENDPOINTS.iter().map(|name| (*name).to_owned()).collect()
    } else {
        args.endpoints.clone()
    };
    if let Some(unknown) = names
        .iter()
        .find(|name| !ENDPOINTS.contains(&name.as_str()))
    {
        return Err(format!(
            "unknown endpoint {unknown:?}; known: {}",
            ENDPOINTS.join(", ")
        )
        .into());
    }
    let per_endpoint = secs(args.endpoint_time_limit);
    let budget = per_endpoint * u32::try_from(names.len()).unwrap_or(u32::MAX);
    let sampler = rss::maybe_start(args.target.server_pid, budget + Duration::from_secs(120))?;

    // The background upload load, when asked for.
    let stop = Arc::new(AtomicBool::new(false));
    let background = match args.with_uploads {
        Some(rate) if rate > 0.0 => {
            let fleet_args = args.upload_fleet();
            let fleet_token = owner_token(
                args.target.token.as_deref(),
                &args.target.data_dir,
                &fleet_args.owner,
            )?;
            let load_args = crate::cli::LoadArgs {
                connections: args.upload_connections,
                duration: budget.as_secs_f64() + 60.0,
                rate: Some(rate),
                max_requests: None,
                request_timeout: args.request_timeout,
                location_share: 0.25,
                progress: 0.0,
            };
            let obtained = load_or_register(
                &target,
                &fleet_token,
                fleet_args.fleet.as_ref(),
                &uploads::registration(&fleet_args, &load_args, "fleet"),
            )
            .await?;
            let workload = Arc::new(UploadWorkload::new(
                target.clone(),
                &obtained.fleet,
                load_args.location_share,
                None,
            )?);
            let plan = load_args.plan("background uploads: POST /api/v1/data");
            let stop = Arc::clone(&stop);
            let upload_target = target.clone();
            eprintln!("reads: background {} started", plan.mode_label());
            let task = tokio::spawn(async move {
                load::run(&upload_target, workload, &plan, Some(stop)).await
            });
            // Let the load reach its pace before measuring.
            tokio::time::sleep(Duration::from_secs(2)).await;
            Some(task)
        }
        _ => None,
    };

    let mut results: Vec<RunSummary> = Vec::new();
    let outcome = async {
        for name in &names {
            let (paths, owner) =
                paths(name, &devices, args.tz.as_deref()).ok_or("unknown endpoint")?;
            let workload = Arc::new(ReadWorkload {
                target: target.clone(),
                paths,
                bearer: owner.then(|| token.clone()),
                etag: (name == "map-304").then(|| Mutex::new(None)),
                gzip: name.starts_with("map") && name.ends_with("-gzip"),
                accept: name
                    .starts_with("map-geojson")
                    .then(|| HeaderValue::from_static("application/geo+json")),
            });
            // One unmeasured request: warms caches, and gives map-304 its first entity tag.
            let mut lane = Lane::new(target.addr);
            if let Some((request, tag)) = workload.request(0) {
                if let Ok(answer) = lane.send(request, secs(args.request_timeout)).await {
                    if !workload.success(answer.status) {
                        eprintln!(
                            "warning: {name}: warm-up answered {} {}",
                            answer.status,
                            String::from_utf8_lossy(&answer.body)
                                .chars()
                                .take(300)
                                .collect::<String>()
                        );
                    }
                    workload.observe(tag, &answer);
                }
            }
            let plan = Plan {
                label: name.clone(),
                connections: args.connections.max(1),
                duration: per_endpoint,
                rate: None,
                max_requests: Some(args.requests.max(1)),
                request_timeout: secs(args.request_timeout),
                grace: Duration::ZERO,
                progress: None,
            };
            let summary = load::run(&target, workload, &plan, None).await;
            eprintln!(
                "  {name}: p50 {:.3} ms, {} ok, {} errors",
                summary.recorder.latency_ms(0.5),
                summary.recorder.ok(),
                summary.recorder.errors()
            );
            results.push(summary);
        }
        Ok::<(), BoxError>(())
    }
    .await;

    stop.store(true, Ordering::Relaxed);
    let background = match background {
        Some(task) => Some(task.await?),
        None => None,
    };
    let memory = match sampler {
        Some(sampler) => Some(sampler.finish().await),
        None => None,
    };
    outcome?;

    println!(
        "reads of owner {} ({} devices){}, {} requests per endpoint over {} connection(s); latency in ms",
        args.owner,
        devices.len(),
        background
            .as_ref()
            .map(|b| format!(", under {}", b.mode))
            .unwrap_or_default(),
        args.requests,
        args.connections
    );
    println!(
        "{:<22} {:>6} {:>6} {:>9} {:>9} {:>9} {:>9} {:>9}  answers",
        "endpoint", "ok", "errors", "p50", "p90", "p99", "p99.9", "max"
    );
    for summary in &results {
        let r = &summary.recorder;
        let statuses = summary.to_json()["statuses"].clone();
        println!(
            "{:<22} {:>6} {:>6} {:>9.3} {:>9.3} {:>9.3} {:>9.3} {:>9.3}  {}",
            summary.label,
            r.ok(),
            r.errors(),
            r.latency_ms(0.5),
            r.latency_ms(0.9),
            r.latency_ms(0.99),
            r.latency_ms(0.999),
            r.latency_ms(1.0),
            statuses
        );
    }
    if let Some(background) = &background {
        println!("{}", background.render());
    }
    if let Some(memory) = &memory {
        println!("{}", memory.render());
    }
    Ok(json!({
        "scenario": "reads",
        "target": target.url,
        "started_at": started_at,
        "owner": args.owner,
        "devices": devices.len(),
        "tz": args.tz,
        "requests_per_endpoint": args.requests,
        "connections": args.connections,
        "endpoints": results.iter().map(RunSummary::to_json).collect::<Vec<_>>(),
        "background_uploads": background.as_ref().map(RunSummary::to_json),
        "rss": memory.as_ref().map(rss::RssReport::to_json),
    }))
}

//! The `alerts` scenario (issue 38): how long a transition takes from the reading's 201 to its
//! webhook's arrival while thousands of rules are evaluated and a fleet uploads, and what those
//! rules cost single uploads.
//!
//! Setup: `--rules` devices over as many owners as the server's 1,000 rules per owner needs
//! (`bench-alerts-0`, `-1`, …; fleet files in `--fleet-dir` are reused), each device with one
//! rule of a mix a fleet operator would set — PM2.5 above 950 (clear 900) on each reading,
//! humidity below 5 (clear 10), temperature above 80 (clear 70) over 10 minutes, silence for 30
//! minutes — none of which the generated values ever cross, so they cost evaluation, not
//! deliveries. `--probes` devices of `bench-alerts-probe` carry a PM2.5 rule (above 35, clear
//! 25, each reading) that each probe crosses back and forth: those transitions are timed, from
//! the probe's 201 to the event's arrival at a receiver in this process ([`Receiver`]). Every
//! rule names that receiver, so the server must run with `AIRQ_ALERTS_ALLOW_PRIVATE_TARGETS=true`.
//!
//! Phases, in order: closed-loop single uploads without rules; the rules created (earlier runs'
//! rules of these owners are deleted first) and waited for until the evaluator recorded states
//! for a sample of them; closed-loop uploads with the rules; the timed phase, an open-loop upload
//! load at `--rate` while the probes cross their rules; the rules deleted; closed-loop uploads
//! without rules again. The comparison rates the run with rules against the mean of the two
//! without, so a machine that moved meanwhile shows in their spread instead of in the ratio.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use airq::domain::alert::MAX_RULES_PER_OWNER;
use bytes::Bytes;
use chrono::Utc;
use hyper::header::{HeaderName, HeaderValue, AUTHORIZATION};
use hyper::{Method, Request, StatusCode};
use serde::Deserialize;
use serde_json::{json, Value};
use tokio::sync::mpsc::UnboundedReceiver;
use tokio::time::Instant;

use crate::cli::{secs, AlertArgs};
use crate::client::{Answer, Body, Lane, Target};
use crate::fleet::{load_or_register, owner_token, Device, Fleet, Registration};
use crate::generator::{aqi_of, UploadWorkload};
use crate::load::{self, Plan};
use crate::rng::Rng;
use crate::stats::RunSummary;
use crate::webhook_receiver::{Arrival, Receiver};
use crate::{rss, BoxError};

/// Connections used to create, list and delete rules.
const SETUP_CONNECTIONS: usize = 32;

/// Rules whose states are waited for after creating them.
const SETTLE_SAMPLE: usize = 20;

/// One owner's part of the bench.
struct Owner {
    token: HeaderValue,
    fleet: Fleet,
}

/// What one probe measured.
#[derive(Debug, Default)]
struct ProbeOutcome {
    latencies: Vec<Duration>,
    missed: u64,
    upload_errors: u64,
}

/// Runs the scenario and prints its summary.
pub async fn run(args: &AlertArgs) -> Result<Value, BoxError> {
    let started_at = Utc::now().to_rfc3339();
    let target = Target::parse(&args.target.target).await?;
    let request_timeout = secs(args.request_timeout);
    let receiver = Receiver::start().await?;
    let webhook_url = receiver.url();

    let rules = args.rules.max(1);
    let owner_count = rules.div_ceil(MAX_RULES_PER_OWNER);
    let mut owners = Vec::with_capacity(owner_count);
    for index in 0..owner_count {
        let count = (rules - index * MAX_RULES_PER_OWNER).min(MAX_RULES_PER_OWNER);
        owners.push(obtain(args, &target, &format!("bench-alerts-{index}"), count).await?);
    }
    let probes = obtain(args, &target, "bench-alerts-probe", args.probes.max(1)).await?;
    for owner in owners.iter().chain([&probes]) {
        delete_rules(&target, &owner.token, request_timeout).await?;
    }

    let fleet = Fleet {
        owner: "bench-alerts".into(),
        devices: owners
            .iter()
            .flat_map(|owner| owner.fleet.devices.iter().cloned())
            .collect(),
    };
    let workload = Arc::new(UploadWorkload::new(target.clone(), &fleet, 0.25, None)?);
    let compare = args.compare_duration > 0.0;
    let closed = |label: &str| Plan {
        label: label.to_owned(),
        connections: args.connections.max(1),
        duration: secs(args.compare_duration),
        rate: None,
        max_requests: None,
        request_timeout,
        grace: Duration::ZERO,
        progress: None,
    };

    let budget = secs(args.duration + 3.0 * args.compare_duration + 600.0);
    let sampler = rss::maybe_start(args.target.server_pid, budget)?;

    let before = if compare {
        eprintln!("alerts: single uploads without rules");
        Some(
            load::run(
                &target,
                Arc::clone(&workload),
                &closed("without rules"),
                None,
            )
            .await,
        )
    } else {
        None
    };

    eprintln!("alerts: creating {rules} rules for {owner_count} owners");
    let creating = Instant::now();
    let mut silence_rules = Vec::new();
    for owner in &owners {
        let created = create_rules(&target, owner, &webhook_url, request_timeout).await?;
        silence_rules.extend(
            created
                .into_iter()
                .enumerate()
                .filter(|(index, _)| index % 4 == 3)
                .map(|(_, id)| (owner.token.clone(), id)),
        );
    }
    let probe_rules = create_probe_rules(&target, &probes, &webhook_url, request_timeout).await?;
    let created_in = creating.elapsed();
    let settling = Instant::now();
    settle(&target, &silence_rules, request_timeout).await?;
    let settled_in = settling.elapsed();
    eprintln!(
        "alerts: rules created in {:.1} s, states recorded {:.1} s later",
        created_in.as_secs_f64(),
        settled_in.as_secs_f64()
    );

    let with = if compare {
        eprintln!("alerts: single uploads with {rules} rules");
        Some(load::run(&target, Arc::clone(&workload), &closed("with rules"), None).await)
    } else {
        None
    };

    eprintln!(
        "alerts: timing {} probes for {:.0} s under uploads at {:.0}/s",
        args.probes.max(1),
        args.duration,
        args.rate
    );
    let stop = Arc::new(AtomicBool::new(false));
    let plan = Plan {
        label: "uploads while timing: POST /api/v1/data".into(),
        connections: args.connections.max(1),
        duration: secs(args.duration),
        rate: Some(args.rate.max(1.0)),
        max_requests: None,
        request_timeout,
        grace: request_timeout,
        progress: Some(Duration::from_secs(10)),
    };
    let background = {
        let target = target.clone();
        let workload = Arc::clone(&workload);
        let stop = Arc::clone(&stop);
        tokio::spawn(async move { load::run(&target, workload, &plan, Some(stop)).await })
    };
    let until = Instant::now() + secs(args.duration);
    let probing: Vec<_> = probes
        .fleet
        .devices
        .iter()
        .zip(&probe_rules)
        .enumerate()
        .map(|(index, (device, rule))| {
            let events = receiver.watch(rule);
            let target = target.clone();
            let device = device.clone();
            let event_timeout = secs(args.event_timeout);
            tokio::spawn(async move {
                probe(
                    &target,
                    &device,
                    events,
                    until,
                    event_timeout,
                    request_timeout,
                    index as u64,
                )
                .await
            })
        })
        .collect();
    let mut timed = ProbeOutcome::default();
    for probing in probing {
        let outcome = probing.await?;
        timed.latencies.extend(outcome.latencies);
        timed.missed += outcome.missed;
        timed.upload_errors += outcome.upload_errors;
    }
    stop.store(true, Ordering::Relaxed);
    let uploads = background.await?;

    eprintln!("alerts: deleting the rules");
    for owner in owners.iter().chain([&probes]) {
        delete_rules(&target, &owner.token, request_timeout).await?;
    }
    let after = if compare {
        eprintln!("alerts: single uploads without rules, again");
        Some(
            load::run(
                &target,
                Arc::clone(&workload),
                &closed("without rules, again"),
                None,
            )
            .await,
        )
    } else {
        None
    };
    let memory = match sampler {
        Some(sampler) => Some(sampler.finish().await),
        None => None,
    };

    let mut latencies = timed.latencies.clone();
    latencies.sort_unstable();
    let quantile = |q: f64| -> Option<f64> {
        let rank = ((q * latencies.len() as f64).ceil() as usize).clamp(1, latencies.len().max(1));
        latencies
            .get(rank - 1)
            .map(|latency| latency.as_secs_f64() * 1e3)
    };
    let (received, unwatched) = receiver.counts();
    let ratio = match (&before, &with, &after) {
        (Some(before), Some(with), Some(after)) => {
            let without = (before.throughput() + after.throughput()) / 2.0;
            (without > 0.0).then(|| with.throughput() / without)
        }
        _ => None,
    };

    println!(
        "alerts: {rules} rules over {owner_count} owners' {} devices, {} probes; rules created in {:.1} s, settled {:.1} s later",
        fleet.devices.len(),
        args.probes.max(1),
        created_in.as_secs_f64(),
        settled_in.as_secs_f64()
    );
    let ms = |value: Option<f64>| value.map_or_else(|| "-".into(), |value| format!("{value:.0}"));
    println!(
        "alert latency, 201 → webhook ({} transitions, {} missed after {:.0} s, {} probe uploads failed): p50 {} ms  p90 {} ms  p99 {} ms  max {} ms",
        latencies.len(),
        timed.missed,
        args.event_timeout,
        timed.upload_errors,
        ms(quantile(0.5)),
        ms(quantile(0.9)),
        ms(quantile(0.99)),
        ms(quantile(1.0)),
    );
    println!("{}", uploads.render());
    for summary in [&before, &with, &after].into_iter().flatten() {
        println!("{}", summary.render());
    }
    if let Some(ratio) = ratio {
        println!("single uploads with rules / without (mean of before and after): {ratio:.3}");
    }
    println!(
        "webhook events received: {received} ({unwatched} not awaited: a probe's last transition after its run ended, or a quiet rule that fired)"
    );
    if let Some(memory) = &memory {
        println!("{}", memory.render());
    }
    Ok(json!({
        "scenario": "alerts",
        "target": target.url,
        "started_at": started_at,
        "rules": rules,
        "owners": owner_count,
        "devices": fleet.devices.len(),
        "probes": args.probes.max(1),
        "rules_created_s": created_in.as_secs_f64(),
        "settled_s": settled_in.as_secs_f64(),
        "latency_ms": {
            "transitions": latencies.len(),
            "missed": timed.missed,
            "probe_upload_errors": timed.upload_errors,
            "p50": quantile(0.5),
            "p90": quantile(0.9),
            "p99": quantile(0.99),
            "max": quantile(1.0),
        },
        "uploads_while_timing": uploads.to_json(),
        "compare": {
            "without_rules": before.as_ref().map(RunSummary::to_json),
            "with_rules": with.as_ref().map(RunSummary::to_json),
            "without_rules_again": after.as_ref().map(RunSummary::to_json),
            "ratio": ratio,
        },
        "events_received": received,
        "events_not_awaited": unwatched,
        "rss": memory.as_ref().map(rss::RssReport::to_json),
    }))
}

/// The owner's token and `count` devices, registered now or loaded from the fleet directory.
async fn obtain(
    args: &AlertArgs,
    target: &Target,
    owner: &str,
    count: usize,
) -> Result<Owner, BoxError> {
    let token = owner_token(args.target.token.as_deref(), &args.target.data_dir, owner)?;
    let file = args
        .fleet_dir
        .as_ref()
        .map(|dir| dir.join(format!("{owner}.json")));
    let obtained = load_or_register(
        target,
        &token,
        file.as_ref(),
        &Registration {
            owner: owner.to_owned(),
            count,
            connections: SETUP_CONNECTIONS,
            name_prefix: owner.to_owned(),
            request_timeout: secs(args.request_timeout.max(30.0)),
        },
    )
    .await?;
    Ok(Owner {
        token,
        fleet: obtained.fleet,
    })
}

/// Sends `count` requests made by `make` over [`SETUP_CONNECTIONS`] connections; the answers in
/// request order, or the first request that got none.
async fn each<F>(
    target: &Target,
    count: usize,
    timeout: Duration,
    make: F,
) -> Result<Vec<Answer>, BoxError>
where
    F: Fn(usize) -> Request<Body> + Send + Sync + 'static,
{
    let make = Arc::new(make);
    let next = Arc::new(AtomicUsize::new(0));
    let answers: Arc<Mutex<Vec<Option<Answer>>>> =
        Arc::new(Mutex::new((0..count).map(|_| None).collect()));
    let workers: Vec<_> = (0..SETUP_CONNECTIONS.min(count.max(1)))
        .map(|_| {
            let (make, next, answers) =
                (Arc::clone(&make), Arc::clone(&next), Arc::clone(&answers));
            let addr = target.addr;
            tokio::spawn(async move {
                let mut lane = Lane::new(addr);
                loop {
                    let index = next.fetch_add(1, Ordering::Relaxed);
                    if index >= count {
                        return Ok::<(), String>(());
                    }
                    let answer = lane
                        .send(make(index), timeout)
                        .await
                        .map_err(|failure| format!("request {index}: {}", failure.name()))?;
                    if let Ok(mut answers) = answers.lock() {
                        answers[index] = Some(answer);
                    }
                }
            })
        })
        .collect();
    for worker in workers {
        worker.await??;
    }
    let answers = std::mem::take(&mut *answers.lock().map_err(|_| "answers lock poisoned")?);
    answers
        .into_iter()
        .collect::<Option<Vec<_>>>()
        .ok_or_else(|| "a request was not sent".into())
}

/// An owner request with a JSON body (or none).
fn owner_request(
    target: &Target,
    method: Method,
    path: &str,
    token: &HeaderValue,
    body: Option<&Value>,
) -> Request<Body> {
    let mut request = match body {
        Some(body) => {
            let mut request = target.post_json(path, Bytes::from(body.to_string()), &[]);
            *request.method_mut() = method;
            request
        }
        None => target.request(method, path, Bytes::new()),
    };
    request.headers_mut().insert(AUTHORIZATION, token.clone());
    request
}

/// The `data[].id` of an answer, when it is `expected`.
fn ids(answer: &Answer, expected: StatusCode, what: &str) -> Result<Vec<String>, BoxError> {
    #[derive(Deserialize)]
    struct Listed {
        data: Vec<Identified>,
    }
    #[derive(Deserialize)]
    struct Identified {
        id: String,
    }
    if answer.status != expected {
        return Err(format!(
            "{what}: {} {}",
            answer.status,
            String::from_utf8_lossy(&answer.body)
        )
        .into());
    }
    Ok(serde_json::from_slice::<Listed>(&answer.body)?
        .data
        .into_iter()
        .map(|item| item.id)
        .collect())
}

/// Deletes every rule of the owner.
async fn delete_rules(
    target: &Target,
    token: &HeaderValue,
    timeout: Duration,
) -> Result<(), BoxError> {
    let mut lane = Lane::new(target.addr);
    let listed = lane
        .send(target.get("/api/v1/alerts", Some(token)), timeout)
        .await
        .map_err(|failure| format!("listing rules: {}", failure.name()))?;
    let rules = ids(&listed, StatusCode::OK, "listing rules")?;
    let (target_, token) = (target.clone(), token.clone());
    let paths: Vec<String> = rules
        .iter()
        .map(|id| format!("/api/v1/alerts/{id}"))
        .collect();
    let answers = each(target, paths.len(), timeout, move |index| {
        owner_request(&target_, Method::DELETE, &paths[index], &token, None)
    })
    .await?;
    if let Some(answer) = answers
        .iter()
        .find(|answer| answer.status != StatusCode::NO_CONTENT)
    {
        return Err(format!("deleting a rule: {}", answer.status).into());
    }
    Ok(())
}

/// The rule of the `index`-th device of a fleet: a mix no generated reading crosses.
fn quiet_rule(index: usize, device: &str, webhook_url: &str) -> Value {
    let mut rule = match index % 4 {
        0 => {
            json!({"kind": "threshold", "measure": "pm2_5", "above": 950, "clear": 900, "window_minutes": 0})
        }
        1 => {
            json!({"kind": "threshold", "measure": "humidity", "below": 5, "clear": 10, "window_minutes": 0})
        }
        2 => {
            json!({"kind": "threshold", "measure": "temperature", "above": 80, "clear": 70, "window_minutes": 10})
        }
        _ => json!({"kind": "silence", "silence_minutes": 30}),
    };
    rule["device_id"] = json!(device);
    rule["webhook_url"] = json!(webhook_url);
    rule
}

/// One rule per device of the owner's fleet; their ids in fleet order.
async fn create_rules(
    target: &Target,
    owner: &Owner,
    webhook_url: &str,
    timeout: Duration,
) -> Result<Vec<String>, BoxError> {
    let bodies: Vec<Value> = owner
        .fleet
        .devices
        .iter()
        .enumerate()
        .map(|(index, device)| quiet_rule(index, &device.id, webhook_url))
        .collect();
    created(target, &owner.token, bodies, timeout).await
}

/// Each probe's rule: PM2.5 above 35, clear below 25, on each reading.
async fn create_probe_rules(
    target: &Target,
    probes: &Owner,
    webhook_url: &str,
    timeout: Duration,
) -> Result<Vec<String>, BoxError> {
    let bodies = probes
        .fleet
        .devices
        .iter()
        .map(|device| {
            json!({"device_id": device.id, "kind": "threshold", "measure": "pm2_5",
                   "above": 35, "clear": 25, "window_minutes": 0, "webhook_url": webhook_url})
        })
        .collect();
    created(target, &probes.token, bodies, timeout).await
}

/// POSTs each body to `/api/v1/alerts`; the new rules' ids in body order.
async fn created(
    target: &Target,
    token: &HeaderValue,
    bodies: Vec<Value>,
    timeout: Duration,
) -> Result<Vec<String>, BoxError> {
    #[derive(Deserialize)]
    struct Created {
        data: Identified,
    }
    #[derive(Deserialize)]
    struct Identified {
        id: String,
    }
    let (target_, token) = (target.clone(), token.clone());
    let count = bodies.len();
    let answers = each(target, count, timeout, move |index| {
        owner_request(
            &target_,
            Method::POST,
            "/api/v1/alerts",
            &token,
            Some(&bodies[index]),
        )
    })
    .await?;
    answers
        .iter()
        .map(|answer| {
            if answer.status != StatusCode::CREATED {
                let hint = if answer.status == StatusCode::UNPROCESSABLE_ENTITY {
                    " (the webhook receiver is on 127.0.0.1: start the server with AIRQ_ALERTS_ALLOW_PRIVATE_TARGETS=true)"
                } else {
                    ""
                };
                return Err(format!(
                    "creating a rule: {} {}{hint}",
                    answer.status,
                    String::from_utf8_lossy(&answer.body)
                )
                .into());
            }
            Ok(serde_json::from_slice::<Created>(&answer.body)?.data.id)
        })
        .collect()
}

/// Waits until the evaluator has recorded a state for an even sample of the silence rules (they
/// need no reading): the first pass over new rules is behind it.
async fn settle(
    target: &Target,
    rules: &[(HeaderValue, String)],
    timeout: Duration,
) -> Result<(), BoxError> {
    let step = (rules.len() / SETTLE_SAMPLE).max(1);
    let sample: Vec<&(HeaderValue, String)> = rules.iter().step_by(step).collect();
    let deadline = Instant::now() + Duration::from_secs(600);
    let mut lane = Lane::new(target.addr);
    for (token, rule) in sample {
        loop {
            let answer = lane
                .send(
                    target.get(&format!("/api/v1/alerts/{rule}/states"), Some(token)),
                    timeout,
                )
                .await
                .map_err(|failure| format!("reading a rule's states: {}", failure.name()))?;
            if !states_empty(&answer)? {
                break;
            }
            if Instant::now() >= deadline {
                return Err("the evaluator recorded no state for new rules within 600 s".into());
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }
    Ok(())
}

/// Whether a `…/states` answer lists no device yet.
fn states_empty(answer: &Answer) -> Result<bool, BoxError> {
    #[derive(Deserialize)]
    struct States {
        data: Vec<Value>,
    }
    if answer.status != StatusCode::OK {
        return Err(format!("reading a rule's states: {}", answer.status).into());
    }
    Ok(serde_json::from_slice::<States>(&answer.body)?
        .data
        .is_empty())
}

/// A probe's reading with PM2.5 at `pm2_5`, the rest ordinary.
fn probe_reading(pm2_5: f64) -> String {
    format!(
        "{{\"aqi\":{},\"pms_data\":{{\"pm1_0\":{:.1},\"pm2_5\":{pm2_5:.1},\"pm10_0\":{:.1},\"provider\":\"PMS5003\"}},\
         \"temperature_data\":{{\"temperature\":21.0,\"heat_index\":21.0,\"humidity\":50.0,\"provider\":\"BME280\"}}}}",
        aqi_of(pm2_5),
        pm2_5 * 0.7,
        pm2_5 * 1.3
    )
}

/// Crosses the probe's rule back and forth until `until`: each upload's 201 starts a clock that
/// the matching event's arrival stops.
async fn probe(
    target: &Target,
    device: &Device,
    mut events: UnboundedReceiver<Arrival>,
    until: Instant,
    event_timeout: Duration,
    request_timeout: Duration,
    seed: u64,
) -> ProbeOutcome {
    let mut outcome = ProbeOutcome::default();
    let mut rng = Rng::new(0xA1E7 ^ seed);
    let mut lane = Lane::new(target.addr);
    let credentials = match (
        HeaderValue::try_from(device.device_id.as_str()),
        HeaderValue::try_from(device.device_key.as_str()),
    ) {
        (Ok(id), Ok(key)) => [
            (HeaderName::from_static("x-device-id"), id),
            (HeaderName::from_static("x-device-key"), key),
        ],
        _ => return outcome,
    };
    // A first, clean reading: the rule's state starts at `ok`.
    send_reading(&mut lane, target, &credentials, 10.0, request_timeout).await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let mut high = false;
    while Instant::now() < until {
        high = !high;
        while events.try_recv().is_ok() {}
        let pm2_5 = if high { 60.0 } else { 10.0 };
        if !send_reading(&mut lane, target, &credentials, pm2_5, request_timeout).await {
            outcome.upload_errors += 1;
            high = !high;
            tokio::time::sleep(Duration::from_secs(1)).await;
            continue;
        }
        let acknowledged = Instant::now();
        let expected = if high { "alert.fired" } else { "alert.cleared" };
        let deadline = acknowledged + event_timeout;
        loop {
            match tokio::time::timeout_at(deadline, events.recv()).await {
                Ok(Some(arrival)) if arrival.kind == expected => {
                    outcome
                        .latencies
                        .push(arrival.at.saturating_duration_since(acknowledged));
                    break;
                }
                Ok(Some(_)) => {}
                Ok(None) | Err(_) => {
                    outcome.missed += 1;
                    break;
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(100 + rng.next_u64() % 500)).await;
    }
    outcome
}

/// Uploads a probe reading; whether it was acknowledged (201).
async fn send_reading(
    lane: &mut Lane,
    target: &Target,
    credentials: &[(HeaderName, HeaderValue); 2],
    pm2_5: f64,
    timeout: Duration,
) -> bool {
    let request = target.post_json(
        "/api/v1/data",
        Bytes::from(probe_reading(pm2_5)),
        credentials,
    );
    matches!(lane.send(request, timeout).await, Ok(answer) if answer.status == StatusCode::CREATED)
}

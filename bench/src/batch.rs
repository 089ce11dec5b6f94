//! The `batch` scenario: a fleet uploading through `POST /api/v1/data/batch`, `--batch-size`
//! readings per request, then the loss check on readings (receipts received vs rows stored).
//!
//! Request `i` goes to device `i mod N` (round `r = i / N`); its `k`-th reading is the device's
//! reading number `r × B + k`, measured at `start + (r × B + k) × 10 µs` with `start` five
//! minutes before the run. Every reading thus has a `measured_at` of its own (the server keys
//! readings by device and `measured_at`, so none replaces another), all within the last hour
//! (the API loss check counts the current snapshot's hour) and, up to 60 million readings per
//! device, no later than the server's "5 minutes ahead".

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use chrono::{DateTime, TimeDelta, Utc};
use hyper::{Request, StatusCode};
use serde::de::IgnoredAny;
use serde::Deserialize;
use serde_json::{json, Value};

use crate::cli::BatchArgs;
use crate::client::{Answer, Body, Target};
use crate::fleet::Fleet;
use crate::generator::UploadWorkload;
use crate::load::Workload;
use crate::uploads::Setup;
use crate::verify::Verdict;
use crate::{rss, server_metrics, BoxError};

/// The server's limit of readings per batch.
pub const MAX_BATCH: usize = 1000;

/// Between two readings of one device.
const STEP: TimeDelta = TimeDelta::microseconds(10);

/// Batches of a fleet's readings; counts each device's acknowledged readings.
#[derive(Debug)]
pub struct BatchWorkload {
    readings: UploadWorkload,
    batch_size: usize,
    start: DateTime<Utc>,
    /// Readings acknowledged per device (receipts in 201 answers).
    acks: Vec<AtomicU64>,
    /// 201 answers whose receipts did not number the readings sent.
    short_receipts: AtomicU64,
}

#[derive(Deserialize)]
struct Acknowledged {
    data: Receipts,
}

#[derive(Deserialize)]
struct Receipts {
    count: u64,
    receipts: Vec<IgnoredAny>,
}

impl BatchWorkload {
    /// Batches of `batch_size` readings for `fleet`, measured from `start` on.
    pub fn new(
        target: Target,
        fleet: &Fleet,
        location_share: f64,
        batch_size: usize,
        start: DateTime<Utc>,
    ) -> Result<Self, BoxError> {
        if !(1..=MAX_BATCH).contains(&batch_size) {
            return Err(format!("--batch-size must be 1 to {MAX_BATCH}").into());
        }
        let readings = UploadWorkload::new(target, fleet, location_share, None)?;
        let acks = (0..readings.devices()).map(|_| AtomicU64::new(0)).collect();
        Ok(Self {
            readings,
            batch_size,
            start,
            acks,
            short_receipts: AtomicU64::new(0),
        })
    }

    /// Acknowledged readings per device, in fleet order.
    pub fn acks(&self) -> Vec<u64> {
        self.acks
            .iter()
            .map(|count| count.load(Ordering::Relaxed))
            .collect()
    }

    /// 201 answers whose receipts did not match the batch.
    pub fn short_receipts(&self) -> u64 {
        self.short_receipts.load(Ordering::Relaxed)
    }

    /// The body of request `index`: `{"readings": [...]}` for device `index mod N`.
    fn body(&self, index: u64) -> (String, usize) {
        let devices = self.readings.devices() as u64;
        let device = (index % devices) as usize;
        let round = index / devices;
        let mut body = String::with_capacity(20 + self.batch_size * 340);
        body.push_str("{\"readings\":[");
        for k in 0..self.batch_size as u64 {
            if k > 0 {
                body.push(',');
            }
            let number = round * self.batch_size as u64 + k;
            let at = self.start + STEP * i32::try_from(number).unwrap_or(i32::MAX);
            self.readings.write_reading(
                &mut body,
                index.wrapping_mul(MAX_BATCH as u64) + k,
                device,
                number == 0,
                Some(at),
            );
        }
        body.push_str("]}");
        (body, device)
    }
}

impl Workload for BatchWorkload {
    fn request(&self, index: u64) -> Option<(Request<Body>, u32)> {
        let (body, device) = self.body(index);
        let target = self.readings.target();
        let request = target.post_json(
            "/api/v1/data/batch",
            Bytes::from(body),
            &self.readings.credentials(device),
        );
        Some((request, device as u32))
    }

    fn success(&self, status: StatusCode) -> bool {
        status == StatusCode::CREATED
    }

    fn observe(&self, tag: u32, answer: &Answer) {
        if answer.status != StatusCode::CREATED {
            return;
        }
        let receipts = serde_json::from_slice::<Acknowledged>(&answer.body)
            .ok()
            .filter(|ack| ack.data.count == ack.data.receipts.len() as u64)
            .map(|ack| ack.data.count);
        if receipts != Some(self.batch_size as u64) {
            self.short_receipts.fetch_add(1, Ordering::Relaxed);
        }
        if let (Some(count), Some(acks)) = (receipts, self.acks.get(tag as usize)) {
            acks.fetch_add(count, Ordering::Relaxed);
        }
    }
}

/// Runs the scenario and prints its summary.
pub async fn run(args: &BatchArgs) -> Result<Value, BoxError> {
    let started_at = Utc::now();
    let setup = Setup::new(
        &args.target,
        &args.fleet,
        &args.load,
        args.verify,
        "gateway",
    )
    .await?;
    let target = &setup.target;
    let obtained = &setup.obtained;

    let plan = args.load.plan(&format!(
        "batch: POST /api/v1/data/batch, {} readings each",
        args.batch_size
    ));
    let sampler = rss::maybe_start(
        args.target.server_pid,
        plan.duration + plan.grace + Duration::from_secs(60),
    )?;
    let workload = Arc::new(BatchWorkload::new(
        target.clone(),
        &obtained.fleet,
        args.load.location_share,
        args.batch_size,
        started_at - TimeDelta::minutes(5),
    )?);
    eprintln!("{} against {}", plan.label, target.url);
    let server_metrics::Measured {
        summary,
        batches,
        memory,
    } = server_metrics::measured_run(target, Arc::clone(&workload), &plan, sampler).await;
    let acks = workload.acks();
    let acknowledged: u64 = acks.iter().sum();
    let verdict = setup.verdict(&acks).await?;
    let readings_per_s = acknowledged as f64 / summary.elapsed.as_secs_f64().max(1e-9);

    println!("{}", summary.render());
    println!(
        "  readings    {acknowledged} acknowledged  {readings_per_s:.0} readings/s  ({} per request{})",
        args.batch_size,
        match workload.short_receipts() {
            0 => String::new(),
            short => format!(", {short} answers with a receipt count that does not match"),
        }
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
        "scenario": "batch",
        "target": target.url,
        "started_at": started_at.to_rfc3339(),
        "batch_size": args.batch_size,
        "fleet": obtained.to_json(),
        "load": summary.to_json(),
        "readings_acknowledged": acknowledged,
        "readings_per_s": readings_per_s,
        "short_receipts": workload.short_receipts(),
        "verify": verdict.as_ref().map(Verdict::to_json),
        "batch_writer": batches,
        "rss": memory.as_ref().map(rss::RssReport::to_json),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn workload(devices: usize, batch_size: usize) -> BatchWorkload {
        let target = Target::local("127.0.0.1:9".parse().expect("address"));
        BatchWorkload::new(
            target,
            &Fleet::synthetic(devices),
            0.5,
            batch_size,
            Utc::now() - TimeDelta::minutes(5),
        )
        .expect("workload")
    }

    #[test]
    fn every_reading_of_a_device_has_its_own_measured_at() {
        let workload = workload(3, 50);
        let mut seen = std::collections::HashSet::new();
        for index in 0..30 {
            let (body, device) = workload.body(index);
            assert_eq!(device, (index % 3) as usize);
            let value: Value = serde_json::from_str(&body).expect("json");
            let readings = value["readings"].as_array().expect("readings");
            assert_eq!(readings.len(), 50);
            for reading in readings {
                let at = reading["measured_at"].as_str().expect("measured_at");
                let at = DateTime::parse_from_rfc3339(at).expect("RFC 3339");
                assert!(at <= Utc::now() + TimeDelta::minutes(5));
                assert!(seen.insert((device, at)), "a repeated measured_at");
                assert!(reading["aqi"].as_i64().is_some());
            }
            if index < 3 {
                assert!(readings[0]["location"].is_object(), "first reading located");
            }
        }
        assert_eq!(seen.len(), 30 * 50);
    }

    #[test]
    fn receipts_are_counted_per_device() {
        let workload = workload(2, 3);
        let receipts = |count: usize| {
            Answer {
            status: StatusCode::CREATED,
            headers: hyper::HeaderMap::new(),
            body: Bytes::from(
                json!({"data": {"count": count, "receipts": vec![json!({"id": 1, "created_at": "x"}); count]}})
                    .to_string(),
            ),
        }
        };
        workload.observe(1, &receipts(3));
        workload.observe(1, &receipts(3));
        workload.observe(0, &receipts(2));
        workload.observe(
            0,
            &Answer {
                status: StatusCode::UNPROCESSABLE_ENTITY,
                headers: hyper::HeaderMap::new(),
                body: Bytes::new(),
            },
        );
        assert_eq!(workload.acks(), [2, 6]);
        assert_eq!(workload.short_receipts(), 1);
    }

    #[test]
    fn batch_sizes_outside_the_servers_limit_are_refused() {
        let target = Target::local("127.0.0.1:9".parse().expect("address"));
        for size in [0, MAX_BATCH + 1] {
            assert!(BatchWorkload::new(
                target.clone(),
                &Fleet::synthetic(1),
                0.0,
                size,
                Utc::now()
            )
            .is_err());
        }
    }
}

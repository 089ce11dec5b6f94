//! The `export` scenario: raw readings exports of seeded devices (`GET
//! /api/v1/devices/{id}/readings`), each body consumed as it streams in. Reports rows/s and
//! bytes/s per export, time to the first byte, and — with `--server-pid` — how much the server's
//! resident memory grew over its level before the first export (it should not grow with the
//! range: the server streams page by page).

use std::time::{Duration, Instant};

use chrono::{TimeDelta, Utc};
use http_body_util::BodyExt as _;
use hyper::header::{HeaderValue, ACCEPT};
use hyper::StatusCode;
use serde_json::{json, Value};

use crate::cli::{secs, ExportArgs, ExportFormat};
use crate::client::{Lane, Target};
use crate::fleet::seeded_owner;
use crate::{rss, BoxError};

impl ExportFormat {
    fn media_type(self) -> &'static str {
        match self {
            Self::Csv => "text/csv",
            Self::Ndjson => "application/x-ndjson",
            Self::Json => "application/json",
        }
    }
}

/// One export's figures.
#[derive(Debug, Default)]
struct Measured {
    device: String,
    status: u16,
    rows: u64,
    bytes: u64,
    first_byte: Duration,
    elapsed: Duration,
    /// Why the body did not arrive whole, if it did not.
    failure: Option<String>,
}

impl Measured {
    fn rows_per_second(&self) -> f64 {
        self.rows as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }

    fn to_json(&self) -> Value {
        json!({
            "device": self.device,
            "status": self.status,
            "rows": self.rows,
            "bytes": self.bytes,
            "first_byte_ms": self.first_byte.as_secs_f64() * 1e3,
            "seconds": self.elapsed.as_secs_f64(),
            "rows_per_s": self.rows_per_second(),
            "mib_per_s": self.bytes as f64 / 1_048_576.0 / self.elapsed.as_secs_f64().max(1e-9),
            "failure": self.failure,
        })
    }
}

/// Counts rows in a streamed body without holding it: lines for CSV (minus the header) and
/// NDJSON, `"measured_at"` members for JSON (carrying a partial match across chunks).
#[derive(Debug)]
struct RowCounter {
    format: ExportFormat,
    count: u64,
    carry: Vec<u8>,
}

const MEMBER: &[u8] = b"\"measured_at\"";

impl RowCounter {
    fn feed(&mut self, chunk: &[u8]) {
        match self.format {
            ExportFormat::Csv | ExportFormat::Ndjson => {
                self.count += chunk.iter().filter(|byte| **byte == b'\n').count() as u64;
            }
            ExportFormat::Json => {
                let mut window = std::mem::take(&mut self.carry);
                window.extend_from_slice(chunk);
                self.count += window
                    .windows(MEMBER.len())
                    .filter(|part| *part == MEMBER)
                    .count() as u64;
                let keep = window.len().min(MEMBER.len() - 1);
                self.carry = window[window.len() - keep..].to_vec();
            }
        }
    }

    fn rows(&self) -> u64 {
        match self.format {
            ExportFormat::Csv => self.count.saturating_sub(1),
            ExportFormat::Ndjson | ExportFormat::Json => self.count,
        }
    }
}

/// Exports one device's range over a fresh connection, consuming the body as it arrives.
async fn export_one(
    target: &Target,
    token: &HeaderValue,
    device: &str,
    query: &str,
    format: ExportFormat,
    timeout: Duration,
) -> Measured {
    let mut measured = Measured {
        device: device.to_owned(),
        ..Measured::default()
    };
    let started = Instant::now();
    let exchange = async {
        let mut sender = Lane::connect(target.addr).await?;
        let mut request = target.get(
            &format!("/api/v1/devices/{device}/readings?{query}"),
            Some(token),
        );
        request
            .headers_mut()
            .insert(ACCEPT, HeaderValue::from_static(format.media_type()));
        sender.ready().await?;
        let response = sender.send_request(request).await?;
        measured.first_byte = started.elapsed();
        measured.status = response.status().as_u16();
        let mut counter = RowCounter {
            format,
            count: 0,
            carry: Vec::new(),
        };
        let mut body = response.into_body();
        while let Some(frame) = body.frame().await {
            if let Ok(data) = frame?.into_data() {
                measured.bytes += data.len() as u64;
                counter.feed(&data);
            }
        }
        measured.rows = counter.rows();
        Ok::<(), BoxError>(())
    };
    match tokio::time::timeout(timeout, exchange).await {
        Ok(Ok(())) if measured.status == StatusCode::OK.as_u16() => {}
        Ok(Ok(())) => measured.failure = Some(format!("status {}", measured.status)),
        Ok(Err(error)) => measured.failure = Some(error.to_string()),
        Err(_) => measured.failure = Some("timeout".to_owned()),
    }
    measured.elapsed = started.elapsed();
    measured
}

/// Runs the scenario and prints its summary.
pub async fn run(args: &ExportArgs) -> Result<Value, BoxError> {
    let started_at = Utc::now().to_rfc3339();
    let (target, token, devices) = seeded_owner(&args.target, &args.owner).await?;
    let end = Utc::now() + TimeDelta::minutes(1);
    let span = TimeDelta::milliseconds((args.days.clamp(0.0, 366.0) * 86_400_000.0) as i64);
    let query = format!(
        "start={}&end={}",
        (end - span).format("%Y-%m-%dT%H:%M:%S%.6fZ"),
        end.format("%Y-%m-%dT%H:%M:%S%.6fZ")
    );
    let exports = args.exports.max(1);
    let concurrency = args.concurrency.clamp(1, exports);
    let before = args.target.server_pid.map(rss::read).transpose()?;
    let sampler = rss::maybe_start(
        args.target.server_pid,
        secs(args.request_timeout) * u32::try_from(exports).unwrap_or(u32::MAX),
    )?;

    let started = Instant::now();
    let mut results = Vec::with_capacity(exports);
    let mut next = 0;
    while next < exports {
        let round: Vec<_> = (next..(next + concurrency).min(exports))
            .map(|index| {
                let device = devices[index % devices.len()].clone();
                let (target, token, query) = (target.clone(), token.clone(), query.clone());
                let (format, timeout) = (args.format, secs(args.request_timeout));
                tokio::spawn(async move {
                    export_one(&target, &token, &device, &query, format, timeout).await
                })
            })
            .collect();
        next += round.len();
        for task in round {
            let measured = task.await?;
            eprintln!(
                "  {}: {} rows, {:.1} MiB in {:.2} s ({:.0} rows/s){}",
                measured.device,
                measured.rows,
                measured.bytes as f64 / 1_048_576.0,
                measured.elapsed.as_secs_f64(),
                measured.rows_per_second(),
                measured
                    .failure
                    .as_ref()
                    .map(|failure| format!(", FAILED: {failure}"))
                    .unwrap_or_default()
            );
            results.push(measured);
        }
    }
    let wall = started.elapsed();
    let memory = match sampler {
        Some(sampler) => Some(sampler.finish().await),
        None => None,
    };

    let rows: u64 = results.iter().map(|m| m.rows).sum();
    let bytes: u64 = results.iter().map(|m| m.bytes).sum();
    let failures = results.iter().filter(|m| m.failure.is_some()).count();
    let growth_mib = match (&before, &memory) {
        (Some(before), Some(memory)) => {
            Some((memory.max_rss_kib as f64 - before.rss_kib as f64) / 1024.0)
        }
        _ => None,
    };
    println!(
        "export of owner {} ({} devices): {} export(s) of {:.0} days as {}, {} at a time",
        args.owner,
        devices.len(),
        exports,
        args.days,
        args.format.media_type(),
        concurrency
    );
    println!(
        "{rows} rows, {:.1} MiB in {:.2} s: {:.0} rows/s, {:.1} MiB/s overall; {failures} failed",
        bytes as f64 / 1_048_576.0,
        wall.as_secs_f64(),
        rows as f64 / wall.as_secs_f64().max(1e-9),
        bytes as f64 / 1_048_576.0 / wall.as_secs_f64().max(1e-9)
    );
    if let (Some(before), Some(memory), Some(growth)) = (&before, &memory, growth_mib) {
        println!(
            "server RSS before {:.1} MiB, max during {:.1} MiB: growth {growth:.1} MiB",
            before.rss_kib as f64 / 1024.0,
            memory.max_rss_kib as f64 / 1024.0
        );
        println!("{}", memory.render());
    }
    Ok(json!({
        "scenario": "export",
        "target": target.url,
        "started_at": started_at,
        "owner": args.owner,
        "devices": devices.len(),
        "days": args.days,
        "format": args.format.media_type(),
        "concurrency": concurrency,
        "rows": rows,
        "bytes": bytes,
        "seconds": wall.as_secs_f64(),
        "rows_per_s": rows as f64 / wall.as_secs_f64().max(1e-9),
        "failed": failures,
        "exports": results.iter().map(Measured::to_json).collect::<Vec<_>>(),
        "rss_before_mib": before.map(|before| before.rss_kib as f64 / 1024.0),
        "rss_growth_mib": growth_mib,
        "rss": memory.as_ref().map(rss::RssReport::to_json),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_are_counted_across_chunk_boundaries() {
        let body = br#"{"data":[{"measured_at":"a","aqi":1},{"measured_at":"b","aqi":2}]}"#;
        for split in 0..body.len() {
            let mut counter = RowCounter {
                format: ExportFormat::Json,
                count: 0,
                carry: Vec::new(),
            };
            counter.feed(&body[..split]);
            counter.feed(&body[split..]);
            assert_eq!(counter.rows(), 2, "split at {split}");
        }
        let mut csv = RowCounter {
            format: ExportFormat::Csv,
            count: 0,
            carry: Vec::new(),
        };
        csv.feed(b"measured_at,aqi\r\na,1\r\n");
        csv.feed(b"b,2\r\n");
        assert_eq!(csv.rows(), 2);
    }
}

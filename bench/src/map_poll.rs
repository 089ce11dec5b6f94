//! The `map-poll` scenario: the clusters feed over HTTP against a running server (issue 37),
//! as the `/map` page asks for it.
//!
//! For each view (world: zoom 2, no box; region: zoom 5, Europe; city: zoom 12, Berlin at
//! 1280 × 800), one after the other on one keep-alive connection:
//! 1. **A polling viewer** for `--duration` seconds: every `--interval-ms` it asks for every view
//!    with `Accept-Encoding: gzip` and the view's last `ETag` in `If-None-Match`, as the page
//!    does. Reported per view: 200s and 304s, bytes downloaded per minute (bodies, and bodies
//!    with status line and headers), and the time of the 200s: while the fleet uploads, a 200 is
//!    the view's first request in a new cache period, so its time is the rebuild it paid (the
//!    world view, asked first, also loads the map's entries from the store; the others build
//!    their zoom's grid and cut their box).
//! 2. **From the cache**: `--requests` requests per view and kind back to back, 200 with gzip
//!    (no `If-None-Match`) and conditional (the latest `ETag`: a 304 until the period ends),
//!    timed end to end over loopback HTTP, p50 / p99 / max. Under uploads a few of these are
//!    the first of a new period and pay its rebuild: they are in the tail, not taken out.
//!
//! With `--server-pid`, the server's RSS before and after. Devices and uploads come from the
//! other scenarios (`uploads` seeds the fleet and, run alongside, keeps a share of it uploading).

use std::time::{Duration, Instant};

use hyper::header::{HeaderValue, ACCEPT, ACCEPT_ENCODING, ETAG, IF_NONE_MATCH};
use hyper::StatusCode;
use serde_json::{json, Value};

use crate::cli::{secs, MapPollArgs};
use crate::client::{Answer, Lane, Target};
use crate::{rss, BoxError};

/// The views: name, zoom, box (as the page writes them).
const VIEWS: [(&str, u8, Option<&str>); 3] = [
    ("world (zoom 2)", 2, None),
    ("region (zoom 5, Europe)", 5, Some("-10,35,30,60")),
    ("city (zoom 12, Berlin)", 12, Some("13.2,52.44,13.64,52.6")),
];

const TIMEOUT: Duration = Duration::from_secs(30);

fn path(zoom: u8, bbox: Option<&str>) -> String {
    match bbox {
        Some(bbox) => format!("/api/v1/public/map/clusters?zoom={zoom}&bbox={bbox}"),
        None => format!("/api/v1/public/map/clusters?zoom={zoom}"),
    }
}

/// One GET of the feed as the page sends it.
async fn ask(
    lane: &mut Lane,
    target: &Target,
    path: &str,
    etag: Option<&HeaderValue>,
) -> Result<(Answer, Duration), BoxError> {
    let mut request = target.get(path, None);
    let headers = request.headers_mut();
    headers.insert(ACCEPT, HeaderValue::from_static("application/geo+json"));
    headers.insert(ACCEPT_ENCODING, HeaderValue::from_static("gzip"));
    if let Some(etag) = etag {
        headers.insert(IF_NONE_MATCH, etag.clone());
    }
    let started = Instant::now();
    let answer = lane
        .send(request, TIMEOUT)
        .await
        .map_err(|failure| format!("{path}: {}", failure.name()))?;
    let elapsed = started.elapsed();
    if answer.status != StatusCode::OK && answer.status != StatusCode::NOT_MODIFIED {
        return Err(format!("{path}: answered {}", answer.status).into());
    }
    Ok((answer, elapsed))
}

/// The bytes of an answer on the wire, roughly: status line, headers, body (HTTP/1.1, not
/// chunked: the feed's answers have a length).
fn wire_bytes(answer: &Answer) -> usize {
    let headers: usize = answer
        .headers
        .iter()
        .map(|(name, value)| name.as_str().len() + value.len() + 4)
        .sum();
    "HTTP/1.1 200 OK\r\n".len() + headers + 2 + answer.body.len()
}

/// p50, p99 and max of `times`, in ms.
fn quantiles(times: &mut [Duration]) -> Value {
    if times.is_empty() {
        return json!(null);
    }
    times.sort();
    let at = |q: f64| {
        let index = ((times.len() as f64 * q).ceil() as usize).clamp(1, times.len()) - 1;
        times[index].as_secs_f64() * 1e3
    };
    json!({ "count": times.len(), "p50_ms": at(0.5), "p99_ms": at(0.99), "max_ms": at(1.0) })
}

fn show(value: &Value) -> String {
    if value.is_null() {
        return "none".to_owned();
    }
    format!(
        "p50 {:.3} ms, p99 {:.3} ms, max {:.3} ms (n = {})",
        value["p50_ms"].as_f64().unwrap_or(0.0),
        value["p99_ms"].as_f64().unwrap_or(0.0),
        value["max_ms"].as_f64().unwrap_or(0.0),
        value["count"]
    )
}

/// Per view, what the polling viewer saw.
#[derive(Debug, Default)]
struct Viewer {
    ok: u64,
    not_modified: u64,
    body_bytes: usize,
    wire_bytes: usize,
    gzip_bytes: usize,
    features: usize,
    devices: u64,
    etag: Option<HeaderValue>,
    fresh: Vec<Duration>,
    unchanged: Vec<Duration>,
}

impl Viewer {
    fn saw(&mut self, answer: &Answer, elapsed: Duration) {
        self.body_bytes += answer.body.len();
        self.wire_bytes += wire_bytes(answer);
        if answer.status == StatusCode::NOT_MODIFIED {
            self.not_modified += 1;
            self.unchanged.push(elapsed);
            return;
        }
        self.ok += 1;
        self.fresh.push(elapsed);
        self.gzip_bytes = answer.body.len();
        if let Some(etag) = answer.headers.get(ETAG) {
            self.etag = Some(etag.clone());
        }
        let plain = gunzip(&answer.body).unwrap_or_default();
        if let Ok(collection) = serde_json::from_slice::<Value>(&plain) {
            let features = collection["features"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            self.features = features.len();
            self.devices = features
                .iter()
                .map(|f| f["properties"]["count"].as_u64().unwrap_or(0))
                .sum();
        }
    }
}

fn gunzip(bytes: &[u8]) -> Option<Vec<u8>> {
    use std::io::Read as _;
    let mut plain = Vec::new();
    flate2::read::GzDecoder::new(bytes)
        .read_to_end(&mut plain)
        .ok()?;
    Some(plain)
}

/// Runs the scenario and prints its summary.
pub async fn run(args: &MapPollArgs) -> Result<Value, BoxError> {
    let target = Target::parse(&args.target.target).await?;
    let pid = args.target.server_pid;
    let rss_before = pid.map(rss::read).transpose()?;
    let mut lane = Lane::new(target.addr);
    let interval = Duration::from_millis(args.interval_ms.max(100));
    let duration = secs(args.duration);
    let paths: Vec<String> = VIEWS.iter().map(|(_, z, b)| path(*z, *b)).collect();

    // 1. The polling viewer.
    let mut viewers: Vec<Viewer> = VIEWS.iter().map(|_| Viewer::default()).collect();
    let started = Instant::now();
    let mut next = started;
    while started.elapsed() < duration {
        for (viewer, path) in viewers.iter_mut().zip(&paths) {
            let (answer, elapsed) = ask(&mut lane, &target, path, viewer.etag.as_ref()).await?;
            viewer.saw(&answer, elapsed);
        }
        next += interval;
        tokio::time::sleep_until(next.into()).await;
    }
    let minutes = started.elapsed().as_secs_f64() / 60.0;

    // 2. From the cache, per view: 200 gzip, then conditional.
    let mut cached = Vec::new();
    for ((name, _, _), path) in VIEWS.iter().zip(&paths) {
        let mut full = Vec::with_capacity(args.requests);
        let mut etag = None;
        for _ in 0..args.requests {
            let (answer, elapsed) = ask(&mut lane, &target, path, None).await?;
            etag = answer.headers.get(ETAG).cloned();
            full.push(elapsed);
        }
        let mut conditional = Vec::with_capacity(args.requests);
        let mut not_modified = 0u64;
        for _ in 0..args.requests {
            let (answer, elapsed) = ask(&mut lane, &target, path, etag.as_ref()).await?;
            if answer.status == StatusCode::NOT_MODIFIED {
                not_modified += 1;
            } else {
                etag = answer.headers.get(ETAG).cloned();
            }
            conditional.push(elapsed);
        }
        cached.push(json!({
            "view": name,
            "ok_gzip": quantiles(&mut full),
            "conditional": quantiles(&mut conditional),
            "conditional_304s": not_modified,
        }));
    }
    let rss_after = pid.map(rss::read).transpose()?;

    println!(
        "map-poll: {} against {}, polling every {} ms for {:.0} s",
        VIEWS.len(),
        target.url,
        interval.as_millis(),
        minutes * 60.0
    );
    let mut views = Vec::new();
    for (((name, _, _), viewer), cache) in VIEWS.iter().zip(&mut viewers).zip(&cached) {
        let fresh = quantiles(&mut viewer.fresh);
        let unchanged = quantiles(&mut viewer.unchanged);
        println!(
            "{name}: {} features for {} devices, {} B gzip; polls: {} × 200, {} × 304; \
             {:.0} B/min of bodies, {:.0} B/min with headers",
            viewer.features,
            viewer.devices,
            viewer.gzip_bytes,
            viewer.ok,
            viewer.not_modified,
            viewer.body_bytes as f64 / minutes,
            viewer.wire_bytes as f64 / minutes
        );
        println!(
            "  polled 200s (first of a period: rebuild): {}",
            show(&fresh)
        );
        println!("  polled 304s: {}", show(&unchanged));
        println!("  from cache, 200 gzip: {}", show(&cache["ok_gzip"]));
        println!(
            "  from cache, conditional ({} × 304): {}",
            cache["conditional_304s"],
            show(&cache["conditional"])
        );
        views.push(json!({
            "view": name,
            "features": viewer.features,
            "devices": viewer.devices,
            "gzip_bytes": viewer.gzip_bytes,
            "polls_200": viewer.ok,
            "polls_304": viewer.not_modified,
            "body_bytes_per_minute": viewer.body_bytes as f64 / minutes,
            "wire_bytes_per_minute": viewer.wire_bytes as f64 / minutes,
            "polled_200": fresh,
            "polled_304": unchanged,
            "from_cache": cache,
        }));
    }
    let memory =
        |m: Option<rss::Memory>| m.map(|m| json!({ "rss_kib": m.rss_kib, "hwm_kib": m.hwm_kib }));
    if let (Some(before), Some(after)) = (rss_before, rss_after) {
        println!(
            "server RSS: {} MiB before, {} MiB after (peak {} MiB)",
            before.rss_kib / 1024,
            after.rss_kib / 1024,
            after.hwm_kib / 1024
        );
    }
    Ok(json!({
        "scenario": "map-poll",
        "target": target.url,
        "interval_ms": interval.as_millis() as u64,
        "duration_s": minutes * 60.0,
        "requests_per_view": args.requests,
        "views": views,
        "rss_before": memory(rss_before),
        "rss_after": memory(rss_after),
    }))
}

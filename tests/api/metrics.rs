//! `/metrics` as operators scrape it: OpenMetrics text that a strict parser of the format
//! (`openmetrics-parser`, a grammar of the specification) accepts whole, with every family the
//! README's "Metrics" table names and values that agree with the traffic the test made; and the
//! Grafana dashboard in `deploy/` asks only for metrics the server exports.

use std::collections::BTreeSet;

use openmetrics_parser::{
    HistogramValue, MetricFamily, MetricsExposition, OpenMetricsType, OpenMetricsValue,
};
use serde_json::{json, Value};

use crate::common::{problem, sample, Pair, TestApp};

type Exposition = MetricsExposition<OpenMetricsType, OpenMetricsValue>;
type Family = MetricFamily<OpenMetricsType, OpenMetricsValue>;

/// One parsed scrape of `/metrics`.
pub(crate) struct Scrape(Exposition);

impl Scrape {
    /// Scrapes `app` and parses the answer strictly (a parse error fails the test).
    pub(crate) async fn of(app: &TestApp) -> Self {
        let response = app
            .client
            .get(format!("{}/metrics", app.base))
            .send()
            .await
            .expect("request sent");
        assert_eq!(response.status(), 200);
        let content_type = response.headers()["content-type"]
            .to_str()
            .expect("ascii")
            .to_owned();
        assert!(
            content_type.starts_with("application/openmetrics-text; version=1.0.0"),
            "{content_type}"
        );
        let text = response.text().await.expect("text");
        let parsed = openmetrics_parser::openmetrics::parse_openmetrics(&text)
            .unwrap_or_else(|error| panic!("not OpenMetrics text ({error:?}):\n{text}"));
        Self(parsed)
    }

    fn family(&self, name: &str) -> &Family {
        self.0.families.get(name).unwrap_or_else(|| {
            let names: BTreeSet<_> = self.0.families.keys().collect();
            panic!("no family {name}; families: {names:?}")
        })
    }

    /// The values of the family's series whose labels include every pair of `labels`.
    fn values<'a>(
        &'a self,
        name: &str,
        labels: &'a [(&'a str, &'a str)],
    ) -> impl Iterator<Item = &'a OpenMetricsValue> + 'a {
        self.family(name).iter_samples().filter_map(move |sample| {
            let set = sample.get_labelset().expect("labels");
            labels
                .iter()
                .all(|(name, value)| set.get_label_value(name) == Some(value))
                .then_some(&sample.value)
        })
    }

    /// The counter series of `name` with `labels`, summed.
    pub(crate) fn counter(&self, name: &str, labels: &[(&str, &str)]) -> f64 {
        assert_eq!(self.family(name).family_type, OpenMetricsType::Counter);
        self.values(name, labels)
            .map(|value| match value {
                OpenMetricsValue::Counter(counter) => counter.value.as_f64(),
                other => panic!("{name}: {other:?}"),
            })
            .sum()
    }

    /// The one gauge series of `name`.
    pub(crate) fn gauge(&self, name: &str) -> f64 {
        assert_eq!(self.family(name).family_type, OpenMetricsType::Gauge);
        let values: Vec<f64> = self
            .values(name, &[])
            .map(|value| match value {
                OpenMetricsValue::Gauge(gauge) => gauge.as_f64(),
                other => panic!("{name}: {other:?}"),
            })
            .collect();
        assert_eq!(values.len(), 1, "{name}: {values:?}");
        values[0]
    }

    /// The one histogram series of `name` with exactly `labels`, its buckets checked to be
    /// cumulative and to end with `+Inf` = count.
    fn histogram(&self, name: &str, labels: &[(&str, &str)]) -> HistogramValue {
        assert_eq!(self.family(name).family_type, OpenMetricsType::Histogram);
        let found: Vec<HistogramValue> = self
            .family(name)
            .iter_samples()
            .filter(|sample| {
                let set = sample.get_labelset().expect("labels");
                set.iter().count() == labels.len()
                    && labels
                        .iter()
                        .all(|(name, value)| set.get_label_value(name) == Some(value))
            })
            .map(|sample| match &sample.value {
                OpenMetricsValue::Histogram(histogram) => histogram.clone(),
                other => panic!("{name}: {other:?}"),
            })
            .collect();
        assert_eq!(found.len(), 1, "{name}{labels:?}: {found:?}");
        let histogram = found.into_iter().next().expect("one");
        let counts: Vec<f64> = histogram
            .buckets
            .iter()
            .map(|bucket| bucket.count.as_f64())
            .collect();
        assert!(counts.windows(2).all(|w| w[0] <= w[1]), "{histogram:?}");
        let last = histogram.buckets.last().expect("buckets");
        assert!(last.upper_bound.is_infinite(), "{histogram:?}");
        assert_eq!(
            Some(last.count.as_f64() as u64),
            histogram.count,
            "{histogram:?}"
        );
        assert!(
            histogram.sum.is_some_and(|sum| sum.as_f64() >= 0.0),
            "{histogram:?}"
        );
        histogram
    }

    /// Every sample name of the scrape (`…_total`, `…_bucket`, `…_info`, …).
    fn sample_names(&self) -> BTreeSet<String> {
        let mut names = BTreeSet::new();
        for (name, family) in &self.0.families {
            let suffixes: &[&str] = match family.family_type {
                OpenMetricsType::Counter => &["_total"],
                OpenMetricsType::Histogram => &["_bucket", "_sum", "_count"],
                OpenMetricsType::Info => &["_info"],
                _ => &[""],
            };
            names.extend(suffixes.iter().map(|suffix| format!("{name}{suffix}")));
        }
        names
    }
}

/// `POST /data/batch` of `count` readings for `device`; expects 201.
pub(crate) async fn upload_batch(app: &TestApp, device: &Value, count: usize) {
    let readings: Vec<Value> = (0..count).map(|_| sample()).collect();
    let response = app
        .client
        .post(app.url("/data/batch"))
        .header("x-device-id", device["device_id"].as_str().expect("id"))
        .header("x-device-key", device["device_key"].as_str().expect("key"))
        .json(&json!({ "readings": readings }))
        .send()
        .await
        .expect("request sent");
    assert_eq!(response.status(), 201);
}

fn count(histogram: &HistogramValue) -> u64 {
    histogram.count.expect("a count")
}

#[airq_test::test]
async fn the_scrape_is_openmetrics_with_every_documented_family() {
    let app = TestApp::spawn().await;
    // A family with labels has series once something was measured: one request.
    let health = app
        .client
        .get(format!("{}/healthz", app.base))
        .send()
        .await
        .expect("request sent");
    assert_eq!(health.status(), 200);
    let scrape = Scrape::of(&app).await;
    let families = [
        (
            "airq_http_request_duration_seconds",
            OpenMetricsType::Histogram,
        ),
        ("airq_http_responses", OpenMetricsType::Counter),
        ("airq_batch_rows", OpenMetricsType::Histogram),
        ("airq_flush_duration_seconds", OpenMetricsType::Histogram),
        ("airq_batches_committed", OpenMetricsType::Counter),
        ("airq_readings_committed", OpenMetricsType::Counter),
        ("airq_batches_failed", OpenMetricsType::Counter),
        ("airq_flush_retries", OpenMetricsType::Counter),
        ("airq_http_write_stalls", OpenMetricsType::Counter),
        ("airq_identity_provider_failures", OpenMetricsType::Counter),
        ("airq_flush_seconds", OpenMetricsType::Counter),
        ("airq_writer_queued_readings", OpenMetricsType::Gauge),
        ("airq_rate_limited", OpenMetricsType::Counter),
        ("airq_cache_requests", OpenMetricsType::Counter),
        ("airq_build", OpenMetricsType::Info),
    ];
    for (name, kind) in families {
        assert_eq!(scrape.family(name).family_type, kind, "{name}");
        assert!(!scrape.family(name).help.is_empty(), "{name} has help");
    }
    // Fixed label values are there at zero before anything happened.
    for limit in ["device", "public"] {
        assert_eq!(
            scrape.counter("airq_rate_limited", &[("limit", limit)]),
            0.0
        );
    }
    for cache in ["device_keys", "map", "map_variants"] {
        for result in ["hit", "miss"] {
            let labels = [("cache", cache), ("result", result)];
            assert_eq!(
                scrape.values("airq_cache_requests", &labels).count(),
                1,
                "{labels:?}"
            );
        }
    }
    assert_eq!(scrape.counter("airq_batches_failed", &[]), 0.0);
    assert_eq!(scrape.counter("airq_http_write_stalls", &[]), 0.0);
}

#[airq_test::test]
async fn a_scraper_that_asks_for_text_plain_gets_the_classic_prometheus_format() {
    let app = TestApp::spawn().await;
    let device = app.register_named("alice", "balcony").await;
    upload_batch(&app, &device, 3).await;
    let response = app
        .client
        .get(format!("{}/metrics", app.base))
        .header("accept", "text/plain;version=0.0.4;q=0.9,*/*;q=0.1")
        .send()
        .await
        .expect("request sent");
    assert_eq!(response.status(), 200);
    assert_eq!(
        response.headers()["content-type"],
        "text/plain; version=0.0.4; charset=utf-8"
    );
    let text = response.text().await.expect("text");
    assert!(!text.contains("# EOF") && !text.contains("# UNIT"));
    // Every family is named after its samples, as the classic format wants.
    let mut family = String::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').expect("name and type");
            assert!(["counter", "gauge", "histogram"].contains(&kind), "{line}");
            assert!(kind != "counter" || name.ends_with("_total"), "{line}");
            family = name.to_owned();
        } else if !line.starts_with('#') {
            assert!(line.starts_with(&family), "{line} follows # TYPE {family}");
        }
    }
    assert!(text.contains("# TYPE airq_build_info gauge"));
    assert!(text.contains("airq_readings_committed_total 3"));
    // promtool, where CI fetched it (`.ci/run` exports PROMTOOL), must accept it whole.
    if let Ok(promtool) = std::env::var("PROMTOOL") {
        use std::io::Write as _;
        let mut check = std::process::Command::new(promtool)
            .args(["check", "metrics"])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("promtool runs");
        check
            .stdin
            .take()
            .expect("stdin")
            .write_all(text.as_bytes())
            .expect("written");
        let checked = check.wait_with_output().expect("promtool ends");
        assert!(
            checked.status.success(),
            "{}{}",
            String::from_utf8_lossy(&checked.stdout),
            String::from_utf8_lossy(&checked.stderr)
        );
    }
}

#[airq_test::test]
async fn request_durations_are_counted_by_route_template_method_and_status_class() {
    let app = TestApp::spawn().await;
    let device = app.register_named("alice", "Balcony").await;
    for _ in 0..3 {
        app.upload_ok(&device, &sample()).await;
    }
    let id = uuid::Uuid::new_v4().to_string();
    problem(app.get_as("alice", &format!("/devices/{id}")).await, 404).await;
    problem(app.get_public("/nowhere").await, 404).await;
    let scrape = Scrape::of(&app).await;
    let duration = "airq_http_request_duration_seconds";
    let uploads = scrape.histogram(
        duration,
        &[
            ("route", "/api/v1/data"),
            ("method", "POST"),
            ("class", "2xx"),
        ],
    );
    assert!(count(&uploads) >= 3, "{uploads:?}");
    let registrations = scrape.histogram(
        duration,
        &[
            ("route", "/api/v1/devices"),
            ("method", "POST"),
            ("class", "2xx"),
        ],
    );
    assert_eq!(count(&registrations), 1);
    let missing = scrape.histogram(
        duration,
        &[
            ("route", "/api/v1/devices/{id}"),
            ("method", "GET"),
            ("class", "4xx"),
        ],
    );
    assert_eq!(count(&missing), 1);
    let unmatched = scrape.histogram(
        duration,
        &[("route", "-"), ("method", "GET"), ("class", "4xx")],
    );
    assert_eq!(count(&unmatched), 1);
    // Paths never become label values: the id is in no series.
    for sample in scrape.family(duration).iter_samples() {
        let labels = sample.get_labelset().expect("labels");
        assert!(labels.iter().all(|(_, value)| !value.contains(&id)));
    }
    assert!(scrape.counter("airq_http_responses", &[("class", "2xx")]) >= 4.0);
    assert!(scrape.counter("airq_http_responses", &[("class", "4xx")]) >= 2.0);
}

#[airq_test::test]
async fn committed_batches_are_counted_with_their_size_and_commit_time() {
    let app = TestApp::spawn().await;
    let device = app.register_named("alice", "Balcony").await;
    for _ in 0..3 {
        app.upload_ok(&device, &sample()).await;
    }
    upload_batch(&app, &device, 5).await;
    let scrape = Scrape::of(&app).await;
    assert_eq!(scrape.counter("airq_readings_committed", &[]), 8.0);
    let batches = scrape.counter("airq_batches_committed", &[]);
    // Each upload waits for its commit here, so each is a batch of its own.
    assert_eq!(batches, 4.0);
    let sizes = scrape.histogram("airq_batch_rows", &[]);
    assert_eq!(count(&sizes), 4);
    assert_eq!(sizes.sum.map(|sum| sum.as_f64()), Some(8.0));
    let at_most_one = sizes
        .buckets
        .iter()
        .find(|bucket| bucket.upper_bound == 1.0)
        .expect("a bucket at 1");
    assert_eq!(at_most_one.count.as_f64(), 3.0, "{sizes:?}");
    let commits = scrape.histogram("airq_flush_duration_seconds", &[]);
    assert_eq!(count(&commits), 4);
    assert!(commits.sum.is_some_and(|sum| sum.as_f64() > 0.0));
    assert_eq!(scrape.gauge("airq_writer_queued_readings"), 0.0);
}

#[airq_test::test]
async fn the_fold_backlog_counts_readings_not_folded_yet() {
    // Folding only after an hour or 1,000,000 rows: whatever is uploaded stays unfolded.
    let app = TestApp::spawn_with(|config| {
        config.fold.interval = std::time::Duration::from_secs(3600);
        config.fold.rows = 1_000_000;
    })
    .await;
    let device = app.register_named("alice", "Balcony").await;
    let before = Scrape::of(&app).await;
    if crate::backend::PAIR.questdb() {
        // QuestDB indexes on write: there is no fold, and no gauge claiming a backlog of 0.
        assert!(!before.0.families.contains_key("airq_fold_backlog_rows"));
        return;
    }
    assert_eq!(before.gauge("airq_fold_backlog_rows"), 0.0);
    for _ in 0..3 {
        app.upload_ok(&device, &sample()).await;
    }
    upload_batch(&app, &device, 4).await;
    let after = Scrape::of(&app).await;
    assert_eq!(after.gauge("airq_fold_backlog_rows"), 7.0);
}

#[airq_test::test]
async fn cache_lookups_count_hits_and_misses() {
    let app = TestApp::spawn_with(|config| {
        config.map_cache_ttl = std::time::Duration::from_secs(3600);
    })
    .await;
    let device = app.register_named("alice", "Balcony").await;
    for _ in 0..3 {
        app.upload_ok(&device, &sample()).await;
    }
    for _ in 0..2 {
        assert_eq!(app.get_public("/public/map/devices").await.status(), 200);
    }
    let scrape = Scrape::of(&app).await;
    let lookups = |cache, result| {
        scrape.counter(
            "airq_cache_requests",
            &[("cache", cache), ("result", result)],
        )
    };
    assert_eq!(
        lookups("device_keys", "hit") + lookups("device_keys", "miss"),
        3.0
    );
    if crate::backend::PAIR == Pair::Embedded {
        // One process: the cache is trusted from the start, so only the first upload loads.
        assert_eq!(lookups("device_keys", "miss"), 1.0);
    }
    assert_eq!(lookups("map", "miss"), 1.0);
    assert_eq!(lookups("map", "hit"), 1.0);
    assert_eq!(lookups("map_variants", "miss"), 1.0);
    assert_eq!(lookups("map_variants", "hit"), 1.0);
}

#[airq_test::test]
async fn process_metrics_describe_the_serving_process() {
    if !cfg!(target_os = "linux") {
        println!("skipped: process metrics are read from /proc/self, which only Linux has");
        return;
    }
    let app = TestApp::spawn().await;
    let scrape = Scrape::of(&app).await;
    assert!(scrape.counter("process_cpu_seconds", &[]) > 0.0);
    assert!(scrape.gauge("process_resident_memory_bytes") > 1e6);
    assert!(
        scrape.gauge("process_virtual_memory_bytes")
            >= scrape.gauge("process_resident_memory_bytes")
    );
    let open = scrape.gauge("process_open_fds");
    assert!(open >= 3.0, "{open}");
    assert!(scrape.gauge("process_max_fds") >= open);
    assert!(scrape.gauge("process_threads") >= 1.0);
    let started = scrape.gauge("process_start_time_seconds");
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("after 1970")
        .as_secs_f64();
    assert!(started > 1.6e9 && started <= now + 1.0, "{started}");
}

#[airq_test::test]
async fn build_info_names_the_version_and_commit() {
    let app = TestApp::spawn().await;
    let scrape = Scrape::of(&app).await;
    let builds: Vec<_> = scrape.family("airq_build").iter_samples().collect();
    assert_eq!(builds.len(), 1);
    let labels = builds[0].get_labelset().expect("labels");
    assert_eq!(
        labels.get_label_value("version"),
        Some(env!("CARGO_PKG_VERSION"))
    );
    let commit = labels.get_label_value("commit").expect("commit");
    assert!(
        commit == "unknown" || (commit.len() >= 7 && commit.chars().all(|c| c.is_ascii_hexdigit())),
        "{commit}"
    );
}

/// The metric names a PromQL expression reads (ours all start with `airq_` or `process_`).
fn metric_names(expr: &str) -> Vec<String> {
    let identifier = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == ':';
    let mut names = Vec::new();
    let mut rest = expr;
    while let Some(start) = rest.find(|c: char| identifier(c)) {
        let tail = &rest[start..];
        let end = tail.find(|c: char| !identifier(c)).unwrap_or(tail.len());
        let word = &tail[..end];
        if word.starts_with("airq_") || word.starts_with("process_") {
            names.push(word.to_owned());
        }
        rest = &tail[end..];
    }
    names
}

/// Every `expr` in a Grafana dashboard, at any depth (rows nest panels).
fn queries(value: &Value, found: &mut Vec<String>) {
    match value {
        Value::Object(members) => {
            for (key, member) in members {
                match (key.as_str(), member) {
                    ("expr", Value::String(expr)) => found.push(expr.clone()),
                    _ => queries(member, found),
                }
            }
        }
        Value::Array(items) => items.iter().for_each(|item| queries(item, found)),
        _ => {}
    }
}

#[airq_test::test]
async fn the_grafana_dashboard_queries_only_metrics_the_server_exports() {
    let app = TestApp::spawn().await;
    let device = app.register_named("alice", "Balcony").await;
    app.upload_ok(&device, &sample()).await;
    let exported = Scrape::of(&app).await.sample_names();
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/deploy/grafana/dashboards/airq.json"
    );
    let dashboard: Value =
        serde_json::from_str(&std::fs::read_to_string(path).expect("the dashboard"))
            .expect("the dashboard is JSON");
    let mut exprs = Vec::new();
    queries(&dashboard, &mut exprs);
    assert!(exprs.len() >= 10, "{exprs:?}");
    let mut unknown = BTreeSet::new();
    for expr in &exprs {
        let names = metric_names(expr);
        assert!(
            !names.is_empty(),
            "a query that reads no airq metric: {expr}"
        );
        for name in names {
            // QuestDB has no fold and only a spooling replica a spool: each leaves its query of
            // the backlog panel empty where it does not apply.
            let not_applicable = (crate::backend::PAIR.questdb()
                && name == "airq_fold_backlog_rows")
                || (crate::backend::PAIR != Pair::QuestDbSpool
                    && name == "airq_spool_backlog_rows");
            if !exported.contains(&name) && !not_applicable {
                unknown.insert(name);
            }
        }
    }
    assert!(
        unknown.is_empty(),
        "the dashboard reads {unknown:?}, which the server does not export; it exports {exported:?}"
    );
}

//! The process's metrics, served at `GET /metrics` as OpenMetrics text (the format Prometheus asks
//! for first on every scrape), through `prometheus-client`'s registry.
//!
//! One [`ServerMetrics`] per process holds the registry and a handle to every family; the parts
//! that measure something call a method here (or keep a handle it gave them) and never see the
//! registry. What it guarantees:
//! - **Bounded series.** Every label value is a `&'static str` from a list compiled into the
//!   binary ([`labels`]), so no client can create a series, whatever it sends.
//! - **Cheap on the hot path.** A request costs one lookup in the duration family (a shared read
//!   lock, then the histogram's own lock) and one atomic increment; the counters of the caches,
//!   limits and the batch writer are created at start and cost one atomic increment each.
//! - **Zero is shown, "not applicable" is absent.** Counters with a fixed set of label values are
//!   in the scrape at 0 from the start, so a query tells "none yet" from "no data"; the fold backlog
//!   is in the scrape only when the readings are in the embedded store (QuestDB has no fold).
//! - **Read at scrape time.** The fold backlog and the process figures are read when scraped.

pub mod classic;
mod labels;
mod process;
mod sampled;

use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::Duration;

use hyper::Method;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::metrics::info::Info;
use prometheus_client::registry::Registry;

use self::labels::{
    BuildLabels, CacheLabels, ClassLabels, LimitLabels, RequestLabels, CLASSES, NO_ROUTE,
};
use self::process::ProcessCollector;
use self::sampled::SampledGauge;
use crate::domain::Limit;

pub use self::labels::CacheName;

/// The media type of [`ServerMetrics::render`]'s text.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Buckets of the duration histograms, in seconds: an upload waits for a commit (about a
/// millisecond on the embedded store, more with QuestDB's visibility wait), a large export or a
/// retried flush takes seconds.
const SECONDS: [f64; 14] = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

/// Buckets of the batch-size histogram, in readings: from one lone upload to a few full batch
/// uploads (1,000 readings each) in one commit.
const ROWS: [f64; 12] = [
    1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0, 200.0, 500.0, 1000.0, 2000.0, 5000.0,
];

fn duration_histogram() -> Histogram {
    Histogram::new(SECONDS)
}

/// The hit and miss counters of one cache.
#[derive(Debug, Clone)]
pub struct CacheCounters {
    hits: Counter,
    misses: Counter,
}

impl CacheCounters {
    /// Counts one lookup: a hit was served from the cache, a miss loaded the value.
    pub fn record(&self, hit: bool) {
        if hit {
            self.hits.inc();
        } else {
            self.misses.inc();
        }
    }
}

/// Readings counted as waiting for the batch writer; dropped before [`QueuedReadings::taken`]
/// (the upload gave up, or its client went away while the queue was full), it counts them out.
#[derive(Debug)]
pub struct QueuedReadings {
    gauge: Gauge,
    count: i64,
}

impl QueuedReadings {
    /// The readings reached the writer's queue: the writer counts them out when it takes them
    /// ([`ServerMetrics::readings_taken`]).
    pub fn taken(mut self) {
        self.count = 0;
    }
}

impl Drop for QueuedReadings {
    fn drop(&mut self) {
        self.gauge.dec_by(self.count);
    }
}

/// How long a failed batch keeps `/readyz` at 503 unless a later one is committed.
pub const WRITES_FAILING_FOR: Duration = Duration::from_secs(30);

/// Every metric of one process.
#[derive(Debug)]
pub struct ServerMetrics {
    registry: Registry,
    requests: Family<RequestLabels, Histogram, fn() -> Histogram>,
    responses: [Counter; CLASSES.len()],
    batch_rows: Histogram,
    flush_duration: Histogram,
    batches: Counter,
    readings: Counter,
    batch_failures: Counter,
    /// When the last batch failed, if none has been committed since: what readiness reports.
    write_failed_at: std::sync::Mutex<Option<std::time::Instant>>,
    flush_retries: Counter,
    write_stalls: Counter,
    identity_provider_failures: Counter,
    alert_deliveries: Counter,
    alert_attempts_failed: Counter,
    alert_events_failed: Counter,
    flush_seconds: Counter<f64, AtomicU64>,
    queued: Gauge,
    rate_limited: [Counter; Limit::ALL.len()],
    caches: [CacheCounters; CacheName::ALL.len()],
    fold_backlog: Arc<SampledGauge>,
    spool_backlog: Arc<SampledGauge>,
}

impl Default for ServerMetrics {
    fn default() -> Self {
        let mut registry = Registry::default();
        let requests = Family::<RequestLabels, Histogram, fn() -> Histogram>::new_with_constructor(
            duration_histogram,
        );
        registry.register(
            "airq_http_request_duration_seconds",
            "Time from a request's arrival to its response head, by route template, method and status class",
            requests.clone(),
        );
        let responses = Family::<ClassLabels, Counter>::default();
        registry.register(
            "airq_http_responses",
            "HTTP responses by status class",
            responses.clone(),
        );
        let batch_rows = Histogram::new(ROWS);
        registry.register(
            "airq_batch_rows",
            "Readings per batch committed by the batch writer (one commit, one fsync)",
            batch_rows.clone(),
        );
        let flush_duration = duration_histogram();
        registry.register(
            "airq_flush_duration_seconds",
            "Time from taking a batch's receipt ids until the store called it durable, retries included",
            flush_duration.clone(),
        );
        let counter = |registry: &mut Registry, name: &str, help: &str| {
            let counter = Counter::default();
            registry.register(name, help, counter.clone());
            counter
        };
        let batches = counter(
            &mut registry,
            "airq_batches_committed",
            "Batches of readings committed",
        );
        let readings = counter(
            &mut registry,
            "airq_readings_committed",
            "Readings committed",
        );
        let batch_failures = counter(
            &mut registry,
            "airq_batches_failed",
            "Batches answered with 500 after every retry failed",
        );
        let flush_retries = counter(&mut registry, "airq_flush_retries", "Retried batch writes");
        let write_stalls = counter(
            &mut registry,
            "airq_http_write_stalls",
            "Connections closed because their client read nothing of the answer for the write timeout",
        );
        let identity_provider_failures = counter(
            &mut registry,
            "airq_identity_provider_failures",
            "Owner requests answered 503 because the identity provider's keys could not be fetched",
        );
        let alert_deliveries = counter(
            &mut registry,
            "airq_alert_deliveries",
            "Alert events delivered to their webhook (a 2xx answer)",
        );
        let alert_attempts_failed = counter(
            &mut registry,
            "airq_alert_attempts_failed",
            "Webhook attempts that failed: another status, no answer in time, or a refused target",
        );
        let alert_events_failed = counter(
            &mut registry,
            "airq_alert_events_failed",
            "Alert events given up on after 24 hours of failed attempts",
        );
        let flush_seconds = Counter::<f64, AtomicU64>::default();
        registry.register(
            "airq_flush_seconds",
            "airq_flush_duration_seconds summed (batches overlap while one is synced and the next written)",
            flush_seconds.clone(),
        );
        let queued = Gauge::default();
        registry.register(
            "airq_writer_queued_readings",
            "Readings handed to the batch writer and not yet taken into a batch, those waiting for room in a full queue included",
            queued.clone(),
        );
        let fold_backlog = Arc::new(SampledGauge::new(
            "airq_fold_backlog_rows",
            "Readings appended to the embedded store and not folded into its indexes and rollups yet.",
        ));
        registry.register_collector(Box::new(Arc::clone(&fold_backlog)));
        let spool_backlog = Arc::new(SampledGauge::new(
            "airq_spool_backlog_rows",
            "Readings in the QuestDB spool that QuestDB has not acknowledged yet.",
        ));
        registry.register_collector(Box::new(Arc::clone(&spool_backlog)));
        let limited = Family::<LimitLabels, Counter>::default();
        registry.register(
            "airq_rate_limited",
            "Requests refused with 429, by limit",
            limited.clone(),
        );
        let cache_requests = Family::<CacheLabels, Counter>::default();
        registry.register(
            "airq_cache_requests",
            "Cache lookups by cache and result (hit: served from the cache; miss: loaded)",
            cache_requests.clone(),
        );
        registry.register(
            "airq_build",
            "The version and commit this binary was built from",
            Info::new(BuildLabels {
                version: env!("CARGO_PKG_VERSION"),
                commit: env!("AIRQ_BUILD_COMMIT"),
            }),
        );
        registry.register_collector(Box::new(ProcessCollector));
        let cache_counter = |cache: CacheName, result| {
            cache_requests
                .get_or_create(&CacheLabels {
                    cache: cache.as_str(),
                    result,
                })
                .clone()
        };
        Self {
            registry,
            responses: CLASSES.map(|class| responses.get_or_create(&ClassLabels { class }).clone()),
            rate_limited: Limit::ALL.map(|limit| {
                limited
                    .get_or_create(&LimitLabels {
                        limit: limit.as_str(),
                    })
                    .clone()
            }),
            caches: CacheName::ALL.map(|cache| CacheCounters {
                hits: cache_counter(cache, "hit"),
                misses: cache_counter(cache, "miss"),
            }),
            requests,
            batch_rows,
            flush_duration,
            batches,
            readings,
            batch_failures,
            write_failed_at: std::sync::Mutex::new(None),
            flush_retries,
            write_stalls,
            identity_provider_failures,
            alert_deliveries,
            alert_attempts_failed,
            alert_events_failed,
            flush_seconds,
            queued,
            fold_backlog,
            spool_backlog,
        }
    }
}

impl ServerMetrics {
    /// Counts a request answered with `status` after `duration` (to its response head), by the
    /// route template it matched (`None`: no route did) and its method.
    pub fn request(
        &self,
        route: Option<&'static str>,
        method: &Method,
        status: u16,
        duration: Duration,
    ) {
        let class = labels::class_index(status);
        self.responses[class].inc();
        let series = RequestLabels {
            route: route.unwrap_or(NO_ROUTE),
            method: labels::method(method),
            class: CLASSES[class],
        };
        self.requests
            .get_or_create(&series)
            .observe(duration.as_secs_f64());
    }

    /// Counts a committed batch of `rows` readings that took `duration` to commit.
    pub fn batch_committed(&self, rows: usize, duration: Duration) {
        self.batches.inc();
        self.readings.inc_by(rows as u64);
        self.batch_rows.observe(rows as f64);
        self.flush_duration.observe(duration.as_secs_f64());
        self.flush_seconds.inc_by(duration.as_secs_f64());
        *self.failed_at() = None;
    }

    /// Counts a batch that could not be committed.
    pub fn batch_failed(&self) {
        self.batch_failures.inc();
        *self.failed_at() = Some(std::time::Instant::now());
    }

    /// Whether a batch failed within [`WRITES_FAILING_FOR`] and none has been committed since:
    /// uploads fail (a full disk, a store that refuses writes), so `/readyz` says not ready. The
    /// bound lets a replica that a load balancer took out for it come back and try again: with no
    /// uploads reaching it, nothing else would ever clear it.
    pub fn writes_failing(&self) -> bool {
        self.failed_at()
            .is_some_and(|at| at.elapsed() < WRITES_FAILING_FOR)
    }

    fn failed_at(&self) -> std::sync::MutexGuard<'_, Option<std::time::Instant>> {
        self.write_failed_at
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Counts a retried flush.
    pub fn flush_retried(&self) {
        self.flush_retries.inc();
    }

    /// Counts an owner request whose token could not be checked for want of the identity
    /// provider's keys.
    pub fn identity_provider_failed(&self) {
        self.identity_provider_failures.inc();
    }

    /// Counts an alert event delivered.
    pub fn alert_delivered(&self) {
        self.alert_deliveries.inc();
    }

    /// Counts a failed webhook attempt, and the event given up on when it was the last.
    pub fn alert_attempt_failed(&self, gave_up: bool) {
        self.alert_attempts_failed.inc();
        if gave_up {
            self.alert_events_failed.inc();
        }
    }

    /// Counts a connection closed because its client stopped reading.
    pub fn write_stalled(&self) {
        self.write_stalls.inc();
    }

    /// Counts a request refused by `limit`.
    pub fn rate_limited(&self, limit: Limit) {
        self.rate_limited[limit as usize].inc();
    }

    /// The hit and miss counters of `cache`.
    pub fn cache(&self, cache: CacheName) -> CacheCounters {
        self.caches[cache as usize].clone()
    }

    /// Counts `count` readings as waiting for the batch writer until the returned ticket says
    /// they reached its queue (or is dropped).
    pub fn queue_readings(&self, count: usize) -> QueuedReadings {
        let count = i64::try_from(count).unwrap_or(i64::MAX);
        self.queued.inc_by(count);
        QueuedReadings {
            gauge: self.queued.clone(),
            count,
        }
    }

    /// Counts `count` readings out of the queue: the batch writer took them.
    pub fn readings_taken(&self, count: usize) {
        self.queued.dec_by(i64::try_from(count).unwrap_or(i64::MAX));
    }

    /// Reads the fold backlog from `unfolded` at each scrape (the embedded store's readings).
    pub fn sample_fold_backlog(&self, unfolded: impl Fn() -> i64 + Send + Sync + 'static) {
        self.fold_backlog.attach(unfolded);
    }

    /// Reads the QuestDB spool's backlog from `backlog` at each scrape.
    pub fn sample_spool_backlog(&self, backlog: impl Fn() -> i64 + Send + Sync + 'static) {
        self.spool_backlog.attach(backlog);
    }

    /// The OpenMetrics text of every metric ([`CONTENT_TYPE`]).
    pub fn render(&self) -> String {
        let mut text = String::new();
        if let Err(error) = prometheus_client::encoding::text::encode(&mut text, &self.registry) {
            tracing::error!(%error, "encoding the metrics failed; the scrape is cut short");
        }
        text
    }
}

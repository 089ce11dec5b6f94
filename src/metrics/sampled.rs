//! A gauge whose value is read from its source at each scrape, for figures that some other part
//! owns and already keeps (the fold's backlog is two counters of the embedded store).
//!
//! The source is attached once, after the metrics exist (the store that owns it is opened later);
//! until then, or in a deployment without such a source, the gauge is not in the scrape at all, so
//! "not applicable" never reads as zero.

use std::fmt;
use std::sync::OnceLock;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::gauge::ConstGauge;

type Source = Box<dyn Fn() -> i64 + Send + Sync>;

/// A gauge read at scrape time.
pub(super) struct SampledGauge {
    name: &'static str,
    help: &'static str,
    source: OnceLock<Source>,
}

impl fmt::Debug for SampledGauge {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SampledGauge")
            .field("name", &self.name)
            .field("attached", &self.source.get().is_some())
            .finish()
    }
}

impl SampledGauge {
    /// A gauge named `name` with no source yet.
    pub(super) fn new(name: &'static str, help: &'static str) -> Self {
        Self {
            name,
            help,
            source: OnceLock::new(),
        }
    }

    /// Reads the gauge from `source` from now on; a second source is ignored (one process has one
    /// store of each kind).
    pub(super) fn attach(&self, source: impl Fn() -> i64 + Send + Sync + 'static) {
        if self.source.set(Box::new(source)).is_err() {
            tracing::warn!(
                metric = self.name,
                "a second source for a sampled gauge was ignored"
            );
        }
    }
}

impl Collector for SampledGauge {
    fn encode(&self, mut encoder: DescriptorEncoder<'_>) -> fmt::Result {
        if let Some(source) = self.source.get() {
            let gauge = ConstGauge::new(source());
            gauge.encode(encoder.encode_descriptor(
                self.name,
                self.help,
                None,
                gauge.metric_type(),
            )?)?;
        }
        Ok(())
    }
}

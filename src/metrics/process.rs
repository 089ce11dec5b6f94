//! Process metrics under the names every Prometheus client uses (`process_cpu_seconds_total`,
//! `process_resident_memory_bytes`, …), read from `/proc/self` at each scrape.
//!
//! `prometheus-client` has no process collector, so this reads the files Prometheus's own Go
//! client reads (through its `procfs` package), with its conventions: CPU times in `/proc/self/stat`
//! count ticks of `USER_HZ`, which the kernel's ABI fixes at 100 on the architectures this binary
//! is built for (x86-64, ARM64, RISC-V; `procfs` assumes the same), and memory comes from
//! `/proc/self/status` in kB, so no page size is needed. `process_threads` is an addition of ours.
//! A value whose file cannot be read or parsed (any OS but Linux, a locked-down `/proc`) is left
//! out of the scrape rather than reported as zero.

use std::fmt;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;

/// Clock ticks per second of the CPU times in `/proc/self/stat`.
const USER_HZ: f64 = 100.0;

/// Reads `/proc/self` at each scrape.
#[derive(Debug, Default)]
pub(super) struct ProcessCollector;

/// One reading of the process's figures; `None` where a file could not be read.
#[derive(Debug, Default)]
struct Snapshot {
    cpu_seconds: Option<f64>,
    start_time_seconds: Option<f64>,
    resident_bytes: Option<i64>,
    virtual_bytes: Option<i64>,
    open_fds: Option<i64>,
    max_fds: Option<i64>,
    threads: Option<i64>,
}

impl Snapshot {
    fn read() -> Self {
        let stat = std::fs::read_to_string("/proc/self/stat").ok();
        let stat = stat.as_deref().and_then(StatFields::parse);
        let status = std::fs::read_to_string("/proc/self/status").ok();
        let status_kb = |key| status.as_deref().and_then(|text| status_value(text, key));
        let boot_time = std::fs::read_to_string("/proc/stat")
            .ok()
            .and_then(|text| boot_time(&text));
        Self {
            cpu_seconds: stat.as_ref().map(|s| (s.utime + s.stime) as f64 / USER_HZ),
            start_time_seconds: stat
                .as_ref()
                .zip(boot_time)
                .map(|(s, boot)| boot as f64 + s.starttime as f64 / USER_HZ),
            resident_bytes: status_kb("VmRSS:").map(|kb| kb * 1024),
            virtual_bytes: status_kb("VmSize:").map(|kb| kb * 1024),
            threads: status_kb("Threads:"),
            open_fds: std::fs::read_dir("/proc/self/fd")
                .ok()
                .map(|entries| i64::try_from(entries.count()).unwrap_or(i64::MAX)),
            max_fds: std::fs::read_to_string("/proc/self/limits")
                .ok()
                .and_then(|text| max_open_files(&text)),
        }
    }
}

/// The fields of `/proc/self/stat` used here, in clock ticks.
#[derive(Debug)]
struct StatFields {
    utime: u64,
    stime: u64,
    starttime: u64,
}

impl StatFields {
    /// Fields count from 1 (`pid`); the command name (2) is in parentheses and may hold spaces or
    /// parentheses itself, so counting starts after its last `)`, at field 3.
    fn parse(text: &str) -> Option<Self> {
        let (_, rest) = text.rsplit_once(')')?;
        let fields: Vec<&str> = rest.split_whitespace().collect();
        let field = |number: usize| fields.get(number - 3)?.parse().ok();
        Some(Self {
            utime: field(14)?,
            stime: field(15)?,
            starttime: field(22)?,
        })
    }
}

/// The number after `key` on its line of `/proc/self/status` (`VmRSS:   1234 kB` → 1234).
fn status_value(text: &str, key: &str) -> Option<i64> {
    text.lines()
        .find_map(|line| line.strip_prefix(key))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// The boot time in seconds since the epoch (`btime` in `/proc/stat`).
fn boot_time(text: &str) -> Option<u64> {
    text.lines()
        .find_map(|line| line.strip_prefix("btime "))?
        .trim()
        .parse()
        .ok()
}

/// The soft limit of `Max open files` in `/proc/self/limits` (absent when `unlimited`).
fn max_open_files(text: &str) -> Option<i64> {
    text.lines()
        .find_map(|line| line.strip_prefix("Max open files"))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

fn gauge(
    encoder: &mut DescriptorEncoder<'_>,
    name: &str,
    help: &str,
    value: Option<impl prometheus_client::encoding::EncodeGaugeValue + fmt::Debug>,
) -> fmt::Result {
    if let Some(value) = value {
        let gauge = ConstGauge::new(value);
        gauge.encode(encoder.encode_descriptor(name, help, None, gauge.metric_type())?)?;
    }
    Ok(())
}

impl Collector for ProcessCollector {
    fn encode(&self, mut encoder: DescriptorEncoder<'_>) -> fmt::Result {
        let now = Snapshot::read();
        if let Some(seconds) = now.cpu_seconds {
            let counter = ConstCounter::new(seconds);
            counter.encode(encoder.encode_descriptor(
                "process_cpu_seconds",
                "Total user and system CPU time spent in seconds.",
                None,
                counter.metric_type(),
            )?)?;
        }
        gauge(
            &mut encoder,
            "process_start_time_seconds",
            "Start time of the process since unix epoch in seconds.",
            now.start_time_seconds,
        )?;
        gauge(
            &mut encoder,
            "process_resident_memory_bytes",
            "Resident memory size in bytes.",
            now.resident_bytes,
        )?;
        gauge(
            &mut encoder,
            "process_virtual_memory_bytes",
            "Virtual memory size in bytes.",
            now.virtual_bytes,
        )?;
        gauge(
            &mut encoder,
            "process_open_fds",
            "Number of open file descriptors.",
            now.open_fds,
        )?;
        gauge(
            &mut encoder,
            "process_max_fds",
            "Maximum number of open file descriptors.",
            now.max_fds,
        )?;
        gauge(
            &mut encoder,
            "process_threads",
            "Number of OS threads in the process.",
            now.threads,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_fields_are_counted_after_the_command_name() {
        let line = "4242 (airq (x) y) S 1 4242 4242 0 -1 4194560 1939 0 0 0 250 37 0 0 20 0 9 0 \
                    123456 1048576 2000 18446744073709551615";
        let fields = StatFields::parse(line).expect("parsed");
        assert_eq!(
            (fields.utime, fields.stime, fields.starttime),
            (250, 37, 123456)
        );
    }

    #[test]
    fn status_and_limits_values_are_read() {
        let status = "Name:\tairq\nVmSize:\t  102400 kB\nVmRSS:\t    2048 kB\nThreads:\t7\n";
        assert_eq!(status_value(status, "VmRSS:"), Some(2048));
        assert_eq!(status_value(status, "Threads:"), Some(7));
        let limits = "Limit                     Soft Limit           Hard Limit           Units\n\
                      Max open files            1024                 524288               files\n";
        assert_eq!(max_open_files(limits), Some(1024));
        assert_eq!(
            boot_time("cpu  1 2 3\nbtime 1700000000\n"),
            Some(1_700_000_000)
        );
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn this_process_is_read_on_linux() {
        let now = Snapshot::read();
        assert!(now.cpu_seconds.is_some_and(|s| s >= 0.0), "{now:?}");
        assert!(now.resident_bytes.is_some_and(|b| b > 0), "{now:?}");
        assert!(now.open_fds.is_some_and(|n| n >= 3), "{now:?}");
        assert!(now.start_time_seconds.is_some_and(|s| s > 1e9), "{now:?}");
    }
}

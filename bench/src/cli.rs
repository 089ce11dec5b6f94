//! Command-line interface: the subcommands and their flags.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};

use crate::load::Plan;

/// airq-bench: drives a running airq (loopback only) like a sensor fleet, owners and map widgets
/// do, and reports throughput, latency percentiles (HDR histogram), errors and lost readings.
#[derive(Debug, Parser)]
#[command(name = "airq-bench", version, about)]
pub struct Cli {
    /// Worker threads of the generator's runtime (default: one per core).
    #[arg(long, global = true)]
    pub threads: Option<usize>,
    /// Also write the results as JSON to this file.
    #[arg(long, global = true, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// The scenario.
    #[command(subcommand)]
    pub command: Command,
}

/// The scenarios.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Upload load against a bare in-process HTTP server (the ceiling); with --compare, then the
    /// same load against airq, and the ratio.
    Ceiling(CeilingArgs),
    /// Register a fleet, drive uploads (closed or open loop), check that nothing acknowledged was lost.
    Uploads(UploadArgs),
    /// Like `uploads`, through `POST /api/v1/data/batch`: --batch-size readings per request.
    Batch(BatchArgs),
    /// Start the server, upload, SIGKILL it mid-run, restart it on the same data dir, finish the
    /// run, then check that every acknowledged reading is stored.
    Kill(KillArgs),
    /// Owner reads (current, every timeline, custom ranges) and map polling, per endpoint;
    /// optionally under an upload load.
    Reads(ReadArgs),
    /// Load a year (by default) of one-minute history for a few devices through the API.
    Seed(SeedArgs),
    /// Raw readings exports of seeded devices: rows/s, and the server's memory growth.
    Export(ExportArgs),
    /// The map's clusters at fleet scale, in process: rebuild time per cache period, bytes of a
    /// world and a city view, time per request from the cache.
    Map(MapArgs),
    /// The clusters feed over HTTP against a running server: a polling viewer's bytes per
    /// minute and rebuilds, and time per request from the cache, for a world, a region and a
    /// city view.
    MapPoll(MapPollArgs),
    /// Alert latency, a reading's 201 to its webhook's arrival, with thousands of rules while
    /// a fleet uploads in open loop; and single uploads with and without those rules.
    Alerts(AlertArgs),
    /// Sample a process's resident memory and report the maximum.
    Rss(RssArgs),
}

/// Which server, and how to act as its owner.
#[derive(Debug, Clone, Args)]
pub struct TargetArgs {
    /// Base URL of the running airq; loopback addresses only.
    #[arg(long, default_value = "http://127.0.0.1:8080")]
    pub target: String,
    /// The server's data directory: its local issuer signs owner tokens, and the loss check reads
    /// its `airq.db`.
    #[arg(long, default_value = "./airq-data")]
    pub data_dir: PathBuf,
    /// Bearer token to use instead of minting one from the data dir (external identity provider).
    #[arg(long, env = "AIRQ_BENCH_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// The server's process id: its RSS is sampled every 100 ms and the maximum reported.
    #[arg(long)]
    pub server_pid: Option<u32>,
}

/// How hard and how long.
#[derive(Debug, Clone, Args)]
pub struct LoadArgs {
    /// Keep-alive connections, one request in flight on each.
    #[arg(long, short = 'c', default_value_t = 64)]
    pub connections: usize,
    /// Seconds of load (no request starts later).
    #[arg(long, short = 'd', default_value_t = 30.0)]
    pub duration: f64,
    /// Open loop at this many requests per second (latency counted from each request's slot in
    /// the schedule); closed loop at full speed when absent.
    #[arg(long)]
    pub rate: Option<f64>,
    /// Stop after this many requests even if time remains.
    #[arg(long)]
    pub max_requests: Option<u64>,
    /// Seconds without a complete answer before a request counts as a timeout.
    #[arg(long, default_value_t = 10.0)]
    pub request_timeout: f64,
    /// Share of uploads carrying a location (each device's first upload always does).
    #[arg(long, default_value_t = 0.25)]
    pub location_share: f64,
    /// Seconds between progress lines on stderr (0: none).
    #[arg(long, default_value_t = 5.0)]
    pub progress: f64,
}

impl LoadArgs {
    /// The driver's plan.
    pub fn plan(&self, label: &str) -> Plan {
        Plan {
            label: label.to_owned(),
            connections: self.connections.max(1),
            duration: secs(self.duration),
            rate: self.rate.filter(|rate| *rate > 0.0),
            max_requests: self.max_requests,
            request_timeout: secs(self.request_timeout),
            grace: secs(self.request_timeout.max(5.0)),
            progress: (self.progress > 0.0).then(|| secs(self.progress)),
        }
    }
}

/// A duration from seconds, clamped to [0, 1 day].
pub fn secs(value: f64) -> Duration {
    Duration::from_secs_f64(value.clamp(0.0, 86_400.0))
}

/// The fleet uploading.
#[derive(Debug, Clone, Args)]
pub struct FleetArgs {
    /// Devices in the fleet (registered through the API unless --fleet holds enough).
    #[arg(long, short = 'n', default_value_t = 10_000)]
    pub devices: usize,
    /// Owner of the fleet.
    #[arg(long, default_value = "bench-fleet")]
    pub owner: String,
    /// Fleet file: reused when it exists and holds enough devices, else written after registering.
    #[arg(long, value_name = "FILE")]
    pub fleet: Option<PathBuf>,
    /// Connections used to register devices.
    #[arg(long, default_value_t = 32)]
    pub register_connections: usize,
}

/// Where a generated fleet's devices are.
/// How stored readings are counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum VerifyMode {
    /// `sqlite` when `<data-dir>/airq.db` exists, else `api`.
    Auto,
    /// Count rows in the SQLite file (exact).
    Sqlite,
    /// Count rows per device in the QuestDB table named by `AIRQ_QUESTDB_TABLE` at `AIRQ_QUESTDB_PG` (exact).
    Questdb,
    /// Sum `sample_count` of each device's current snapshot (exact for fresh devices and short runs).
    Api,
    /// No check.
    None,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Homes {
    /// Evenly over the inhabited latitudes.
    Even,
    /// 70 % around 300 towns (`map`'s fleet), the rest evenly.
    Towns,
}

/// `uploads`.
#[derive(Debug, Clone, Args)]
pub struct UploadArgs {
    #[command(flatten)]
    pub target: TargetArgs,
    #[command(flatten)]
    pub fleet: FleetArgs,
    #[command(flatten)]
    pub load: LoadArgs,
    /// How stored readings are counted for the loss check.
    #[arg(long, value_enum, default_value_t = VerifyMode::Auto)]
    pub verify: VerifyMode,
    /// Where the devices live: spread evenly over latitudes 55° S to 70° N (`even`), or 70 % in
    /// 300 towns, Berlin the largest, as the `map` scenario's fleet (`towns`: a map with cities).
    #[arg(long, value_enum, default_value_t = Homes::Even)]
    pub homes: Homes,
}

/// `batch`.
#[derive(Debug, Clone, Args)]
pub struct BatchArgs {
    #[command(flatten)]
    pub target: TargetArgs,
    #[command(flatten)]
    pub fleet: FleetArgs,
    #[command(flatten)]
    pub load: LoadArgs,
    /// Readings per request (the server takes 1 to 1000).
    #[arg(long, default_value_t = 100)]
    pub batch_size: usize,
    /// How stored readings are counted for the loss check.
    #[arg(long, value_enum, default_value_t = VerifyMode::Auto)]
    pub verify: VerifyMode,
}

/// `kill`.
#[derive(Debug, Clone, Args)]
pub struct KillArgs {
    /// Where the server listens (it is started with `--listen` set to this host and port);
    /// loopback addresses only, and nothing may listen there yet.
    #[arg(long, default_value = "http://127.0.0.1:8080")]
    pub target: String,
    /// The server's data directory (created if missing), kept across the restart.
    #[arg(long)]
    pub data_dir: PathBuf,
    /// The server binary (a release build for meaningful timings).
    #[arg(long, default_value = "target/release/airq")]
    pub server_bin: PathBuf,
    /// One more argument for the server, after `--listen` and `--data-dir` (repeatable).
    /// `AIRQ_*` variables of this environment reach the server too.
    #[arg(long = "server-arg", value_name = "ARG", allow_hyphen_values = true)]
    pub server_args: Vec<String>,
    /// The server's stderr goes to this file (appended); default `<data-dir>/bench-server.log`.
    #[arg(long)]
    pub server_log: Option<PathBuf>,
    /// Seconds into the run at which the server gets SIGKILL; a comma-separated list kills it
    /// several times (each time it is restarted).
    #[arg(long, value_delimiter = ',', default_value = "5")]
    pub kill_after: Vec<f64>,
    /// Seconds the restarted server may take to answer `/readyz` with 200.
    #[arg(long, default_value_t = 30.0)]
    pub ready_timeout: f64,
    #[command(flatten)]
    pub fleet: FleetArgs,
    #[command(flatten)]
    pub load: LoadArgs,
    /// How stored readings are counted for the loss check.
    #[arg(long, value_enum, default_value_t = VerifyMode::Auto)]
    pub verify: VerifyMode,
}

/// `ceiling`.
#[derive(Debug, Clone, Args)]
pub struct CeilingArgs {
    #[command(flatten)]
    pub load: LoadArgs,
    /// Worker threads of the bare server (default: one per core, like airq).
    #[arg(long)]
    pub server_threads: Option<usize>,
    /// Then run the same load against a bare server that also appends each body to a file and
    /// answers after a group fdatasync (the durable ceiling), in a temporary dir.
    #[arg(long)]
    pub durable: bool,
    /// Then run the same load as `uploads` against --target and print airq / ceiling.
    #[arg(long)]
    pub compare: bool,
    /// After the compared run, measure each ceiling again and rate airq against the mean of its
    /// two runs, printing how far each ceiling moved meanwhile.
    #[arg(long, requires = "compare")]
    pub bracket: bool,
    #[command(flatten)]
    pub target: TargetArgs,
    /// The fleet: --devices synthetic credentials for the ceiling; registered devices for --compare.
    #[command(flatten)]
    pub fleet: FleetArgs,
    /// Loss check of the compared run.
    #[arg(long, value_enum, default_value_t = VerifyMode::Auto)]
    pub verify: VerifyMode,
}

/// `reads`.
#[derive(Debug, Clone, Args)]
pub struct ReadArgs {
    #[command(flatten)]
    pub target: TargetArgs,
    /// Owner whose devices are read (the one `seed` loaded).
    #[arg(long, default_value = "bench-seed")]
    pub owner: String,
    /// Endpoints to measure, comma-separated (default: all); see the README for the names.
    #[arg(long, value_delimiter = ',')]
    pub endpoints: Vec<String>,
    /// Requests per endpoint.
    #[arg(long, default_value_t = 200)]
    pub requests: u64,
    /// Connections per endpoint.
    #[arg(long, short = 'c', default_value_t = 1)]
    pub connections: usize,
    /// At most this many seconds per endpoint.
    #[arg(long, default_value_t = 60.0)]
    pub endpoint_time_limit: f64,
    /// IANA zone for timelines and custom ranges (`tz`); the server's default (UTC) when absent.
    #[arg(long)]
    pub tz: Option<String>,
    /// Run an open-loop upload load at this many requests per second while reading.
    #[arg(long, value_name = "RATE")]
    pub with_uploads: Option<f64>,
    /// Devices uploading (with --with-uploads; registered unless --upload-fleet holds enough).
    #[arg(long, default_value_t = 10_000)]
    pub upload_devices: usize,
    /// Owner of the uploading fleet.
    #[arg(long, default_value = "bench-fleet")]
    pub upload_owner: String,
    /// Fleet file of the uploading fleet (as `uploads --fleet`).
    #[arg(long, value_name = "FILE")]
    pub upload_fleet: Option<PathBuf>,
    /// Connections of the upload load.
    #[arg(long, default_value_t = 64)]
    pub upload_connections: usize,
    /// Seconds without an answer before a request counts as a timeout.
    #[arg(long, default_value_t = 10.0)]
    pub request_timeout: f64,
}

impl ReadArgs {
    /// The uploading fleet's settings.
    pub fn upload_fleet(&self) -> FleetArgs {
        FleetArgs {
            devices: self.upload_devices,
            owner: self.upload_owner.clone(),
            fleet: self.upload_fleet.clone(),
            register_connections: 32,
        }
    }
}

/// `seed`.
#[derive(Debug, Clone, Args)]
pub struct SeedArgs {
    #[command(flatten)]
    pub target: TargetArgs,
    /// Devices to load history for (registered now, under --owner).
    #[arg(long, short = 'm', default_value_t = 20)]
    pub devices: usize,
    /// Owner of the seeded devices.
    #[arg(long, default_value = "bench-seed")]
    pub owner: String,
    /// Days of history, ending now (at most 365: the server refuses `measured_at` older than 366 days).
    #[arg(long, default_value_t = 365.0)]
    pub days: f64,
    /// Seconds between two readings of a device.
    #[arg(long, default_value_t = 60)]
    pub interval: u32,
    /// Keep-alive connections (more connections, bigger group commits: faster seeding).
    #[arg(long, short = 'c', default_value_t = 256)]
    pub connections: usize,
    /// Give up after this many seconds.
    #[arg(long, default_value_t = 7_200.0)]
    pub time_limit: f64,
    /// Seconds without an answer before a request counts as a timeout.
    #[arg(long, default_value_t = 30.0)]
    pub request_timeout: f64,
    /// Share of readings carrying a location.
    #[arg(long, default_value_t = 0.05)]
    pub location_share: f64,
    /// Seconds between progress lines on stderr (0: none).
    #[arg(long, default_value_t = 10.0)]
    pub progress: f64,
    /// How stored readings are counted afterwards.
    #[arg(long, value_enum, default_value_t = VerifyMode::Auto)]
    pub verify: VerifyMode,
    /// Fleet file: when it exists and holds enough devices of --owner, seed those (a second,
    /// later period of the same devices); else register new ones and save them here, so that
    /// `reads --upload-owner <owner> --upload-fleet FILE` uploads from the very devices whose
    /// history it reads.
    #[arg(long, value_name = "FILE")]
    pub fleet: Option<PathBuf>,
}

/// The representation an export asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ExportFormat {
    /// `Accept: text/csv`.
    Csv,
    /// `Accept: application/x-ndjson`.
    Ndjson,
    /// `Accept: application/json`.
    Json,
}

/// `map`.
#[derive(Debug, Clone, Args)]
pub struct MapArgs {
    /// Public located devices on the map.
    #[arg(long, default_value_t = 100_000)]
    pub devices: usize,
    /// Rebuilds of every zoom's grid timed (the median is reported).
    #[arg(long, default_value_t = 7)]
    pub rebuilds: usize,
    /// Requests timed per view and answer (200 gzip, 304) from the cache.
    #[arg(long, short = 'n', default_value_t = 20_000)]
    pub requests: usize,
}

/// `alerts`.
#[derive(Debug, Clone, Args)]
pub struct AlertArgs {
    #[command(flatten)]
    pub target: TargetArgs,
    /// Rules on the uploading fleet, one per device, over as many owners as the server's limit
    /// of 1,000 rules per owner needs; none of them is ever crossed by the generated values.
    #[arg(long, default_value_t = 10_000)]
    pub rules: usize,
    /// Probe devices (another owner), each with a PM2.5 rule the probe crosses back and forth:
    /// their transitions are the ones timed.
    #[arg(long, default_value_t = 4)]
    pub probes: usize,
    /// Uploads per second from the fleet while the probes are timed (open loop).
    #[arg(long, default_value_t = 20_000.0)]
    pub rate: f64,
    /// Seconds of the timed phase.
    #[arg(long, short = 'd', default_value_t = 60.0)]
    pub duration: f64,
    /// Seconds of each closed-loop single-upload run (without rules, with them, without them
    /// again); 0 skips the comparison.
    #[arg(long, default_value_t = 20.0)]
    pub compare_duration: f64,
    /// Keep-alive connections of the uploads.
    #[arg(long, short = 'c', default_value_t = 64)]
    pub connections: usize,
    /// Directory of the fleet files (one per owner; reused when present).
    #[arg(long, value_name = "DIR")]
    pub fleet_dir: Option<PathBuf>,
    /// Seconds a probe waits for its webhook before counting the transition as missed.
    #[arg(long, default_value_t = 30.0)]
    pub event_timeout: f64,
    /// Seconds without an answer before a request counts as a timeout.
    #[arg(long, default_value_t = 10.0)]
    pub request_timeout: f64,
}

/// `map-poll`.
#[derive(Debug, Clone, Args)]
pub struct MapPollArgs {
    #[command(flatten)]
    pub target: TargetArgs,
    /// How often the viewer polls every view (the page polls every cache period).
    #[arg(long, default_value_t = 5_000)]
    pub interval_ms: u64,
    /// Seconds of polling.
    #[arg(long, short = 'd', default_value_t = 60.0)]
    pub duration: f64,
    /// Requests timed per view and kind (200 gzip, conditional) from the cache.
    #[arg(long, short = 'n', default_value_t = 2_000)]
    pub requests: usize,
}

/// `export`.
#[derive(Debug, Clone, Args)]
pub struct ExportArgs {
    #[command(flatten)]
    pub target: TargetArgs,
    /// Owner whose devices are exported (the one `seed` loaded).
    #[arg(long, default_value = "bench-seed")]
    pub owner: String,
    /// Days of each export, ending now (at most 366).
    #[arg(long, default_value_t = 366.0)]
    pub days: f64,
    /// Exports in all, one device after the other (cycling through the owner's devices).
    #[arg(long, short = 'n', default_value_t = 3)]
    pub exports: usize,
    /// Exports running at the same time.
    #[arg(long, short = 'c', default_value_t = 1)]
    pub concurrency: usize,
    /// The representation.
    #[arg(long, value_enum, default_value_t = ExportFormat::Csv)]
    pub format: ExportFormat,
    /// Seconds an export may take before it counts as failed.
    #[arg(long, default_value_t = 600.0)]
    pub request_timeout: f64,
}

/// `rss`.
#[derive(Debug, Clone, Args)]
pub struct RssArgs {
    /// Process to sample.
    #[arg(long)]
    pub pid: u32,
    /// Seconds to sample (stops earlier if the process exits).
    #[arg(long, short = 'd', default_value_t = 60.0)]
    pub duration: f64,
    /// Milliseconds between samples.
    #[arg(long, default_value_t = 100)]
    pub interval_ms: u64,
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory as _;

    use super::*;

    #[test]
    fn flags_do_not_collide() {
        // Catches duplicate flags from flattened groups, which release builds do not report.
        Cli::command().debug_assert();
    }

    #[test]
    fn every_subcommand_parses_with_defaults() {
        for args in [
            &["airq-bench", "ceiling"][..],
            &[
                "airq-bench",
                "ceiling",
                "--durable",
                "--compare",
                "--bracket",
            ],
            &["airq-bench", "uploads", "-n", "200", "-d", "5"],
            &["airq-bench", "batch", "--batch-size", "500"],
            &[
                "airq-bench",
                "kill",
                "--data-dir",
                "/tmp/x",
                "--kill-after",
                "2,4",
            ],
            &[
                "airq-bench",
                "kill",
                "--data-dir",
                "/tmp/x",
                "--server-arg=--batch-max-rows=64",
            ],
            &["airq-bench", "reads", "--with-uploads", "500"],
            &["airq-bench", "seed", "-m", "2", "--days", "1"],
            &["airq-bench", "rss", "--pid", "1"],
            &["airq-bench", "map-poll", "-d", "10", "--server-pid", "1"],
            &[
                "airq-bench",
                "export",
                "--format",
                "ndjson",
                "-n",
                "2",
                "-c",
                "2",
            ],
        ] {
            Cli::try_parse_from(args).expect("parses");
        }
    }

    #[test]
    fn a_bracket_needs_a_compared_run() {
        assert!(Cli::try_parse_from(["airq-bench", "ceiling", "--bracket"]).is_err());
    }
}

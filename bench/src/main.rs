//! `airq-bench`: the fleet benchmark of airq.
//!
//! It plays the three users of the design card against a running server on this machine: a sensor
//! fleet uploading (`uploads`, or in batches `batch`), owners reading timelines and widgets
//! polling the map (`reads`), with history loaded beforehand (`seed`), and raw exports of that
//! history (`export`). `ceiling` measures what
//! bare HTTP allows with the same generator, so upload throughput can be stated as a share of it;
//! `rss` watches the server's memory; `kill` crashes a server it started, mid-run, and checks
//! that no acknowledged reading was lost. Every scenario prints a summary and, with
//! `--json FILE`, writes its figures as JSON.
//!
//! Load only ever goes to loopback addresses, and every loop is bounded in count and time.

#![forbid(unsafe_code)]

mod alerts;
mod batch;
mod ceiling;
mod cli;
mod client;
mod durable_append;
mod export;
mod fleet;
mod generator;
mod kill;
mod load;
mod map;
mod map_poll;
mod reads;
mod rng;
mod rss;
mod seed;
mod server_metrics;
mod stats;
mod uploads;
mod verify;
mod webhook_receiver;

use std::process::ExitCode;

use clap::Parser as _;

use cli::{Cli, Command};

/// Errors of the benchmark: reported, never recovered from.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

fn main() -> ExitCode {
    let cli = Cli::parse();
    let threads = cli
        .threads
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(2, usize::from))
        .max(1);
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads)
        .thread_name("airq-bench")
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("airq-bench: starting the runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    let outcome = runtime.block_on(async {
        match &cli.command {
            Command::Ceiling(args) => ceiling::run(args).await,
            Command::Uploads(args) => uploads::run(args).await.map(|outcome| outcome.report),
            Command::Batch(args) => batch::run(args).await,
            Command::Kill(args) => kill::run(args).await,
            Command::Reads(args) => reads::run(args).await,
            Command::Seed(args) => seed::run(args).await,
            Command::Export(args) => export::run(args).await,
            Command::Map(args) => map::run(args).await,
            Command::MapPoll(args) => map_poll::run(args).await,
            Command::Alerts(args) => alerts::run(args).await,
            Command::Rss(args) => {
                rss::run(
                    args.pid,
                    cli::secs(args.duration),
                    std::time::Duration::from_millis(args.interval_ms.max(10)),
                )
                .await
            }
        }
    });
    // Connections of finished runs may still be closing: do not wait for them.
    runtime.shutdown_timeout(std::time::Duration::from_secs(1));
    let report = match outcome {
        Ok(report) => report,
        Err(error) => {
            eprintln!("airq-bench: {error}");
            return ExitCode::FAILURE;
        }
    };
    let _ = std::io::Write::flush(&mut std::io::stdout());
    if let Some(path) = &cli.json {
        let written = serde_json::to_vec_pretty(&report)
            .map_err(|error| error.to_string())
            .and_then(|bytes| std::fs::write(path, bytes).map_err(|error| error.to_string()));
        match written {
            Ok(()) => eprintln!("results written to {}", path.display()),
            Err(error) => {
                eprintln!("airq-bench: writing {}: {error}", path.display());
                return ExitCode::FAILURE;
            }
        }
    }
    let verified =
        uploads::verified(&report) && report.get("uploads").is_none_or(uploads::verified);
    if verified {
        ExitCode::SUCCESS
    } else {
        eprintln!("airq-bench: acknowledged readings are missing from the store");
        ExitCode::from(2)
    }
}

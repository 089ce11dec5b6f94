//! The `airq` binary: `airq serve` (the default), `airq token OWNER`, `airq healthcheck`,
//! `airq backup DEST` and `airq migrate`.

use std::process::ExitCode;
use std::sync::Arc;

use airq::auth::local::SharedSecretIssuer;
use airq::auth::LocalIssuer;
use airq::clock::SystemClock;
use airq::config::{BackupArgs, Cli, Command, Config, MigrateArgs, ServeArgs, TokenArgs};
use airq::Application;

/// jemalloc instead of the system allocator: the upload path's many small, short-lived buffers
/// cost the HTTP workers about 15 % less CPU with it, at no more RSS (`bench/RESULTS.md`).
#[cfg(not(target_env = "msvc"))]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn main() -> ExitCode {
    let cli = Cli::parse_or_exit();
    let outcome = match cli.command {
        Some(Command::Token(args)) => token(&args),
        Some(Command::Serve(args)) => serve(*args),
        Some(Command::Healthcheck(args)) => airq::healthcheck::run(&args).map_err(Into::into),
        Some(Command::Backup(args)) => backup(&args),
        Some(Command::Migrate(args)) => migrate(args),
        None => serve(cli.serve),
    };
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("airq: {}", airq::telemetry::chain(error.as_ref()));
            ExitCode::FAILURE
        }
    }
}

/// Prints a token, alone on stdout, so `TOKEN=$(airq token alice)` works: signed with the
/// shared secret when one is given, else with the data directory's.
fn token(args: &TokenArgs) -> Result<(), Box<dyn std::error::Error>> {
    let token = match &args.auth_hs256_secret {
        Some(secret) => {
            SharedSecretIssuer::new(secret, args.auth_issuer.clone(), args.auth_audience.clone())
                .mint(args.owner.as_str(), args.ttl)?
        }
        None => LocalIssuer::open(&args.data_dir)?.mint(args.owner.as_str(), args.ttl)?,
    };
    println!("{token}");
    Ok(())
}

/// Copies the data directory and says what the copy holds.
fn backup(args: &BackupArgs) -> Result<(), Box<dyn std::error::Error>> {
    let report = airq::backup::run(&args.data_dir, &args.dest)?;
    println!(
        "backed up {} to {}: readings through receipt id {} ({} of them past the database's \
         watermark {}, folded when a server starts on it); restore with `airq serve --data-dir {}`",
        args.data_dir.display(),
        args.dest.display(),
        report.through,
        report.unfolded,
        report.folded_through,
        args.dest.display()
    );
    Ok(())
}

/// Migrates the data directory and prints what the target holds; fails when the count check does.
fn migrate(args: MigrateArgs) -> Result<(), Box<dyn std::error::Error>> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let plan = airq::migrate::Plan::from(args);
    let report = runtime.block_on(airq::migrate::run(&plan))?;
    println!(
        "devices: {} in the data directory, {} equal in PostgreSQL with their key hashes ({} \
         written by this run)",
        report.devices, report.devices_matching, report.devices_written
    );
    match report.readings {
        airq::migrate::Readings::Copied {
            table,
            source,
            target,
            copied,
            through,
        } => println!(
            "readings: {source} in the data directory, {target} in QuestDB table {table} \
             ({copied} copied by this run, receipt ids through {through}); start the servers \
             with --postgres-url, --questdb-ilp and --questdb-pg"
        ),
        airq::migrate::Readings::Stay { count } => println!(
            "readings: {count} stay in the data directory; start the server with --data-dir {} \
             and --postgres-url (and no QuestDB) to serve them",
            plan.data_dir.display()
        ),
    }
    Ok(())
}

fn serve(args: ServeArgs) -> Result<(), Box<dyn std::error::Error>> {
    let _logs = airq::telemetry::init(args.log_format);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let app = Application::build(Config::from(args), Arc::new(SystemClock)).await?;
        app.run_until(shutdown_signal()).await;
        Ok(())
    })
}

/// Completes on the first Ctrl-C or SIGTERM, which starts the drain. A second one during the
/// drain ends the process at once (exit code 1): an operator who does not want to wait for slow
/// clients need not reach for `kill -9`, and loses nothing by it, since every acknowledged
/// reading is already durable and what is not folded yet is folded at the next start.
async fn shutdown_signal() {
    stop_signal().await;
    tracing::info!(
        "stopping: finishing the requests in flight (a second Ctrl-C or SIGTERM exits at once)"
    );
    tokio::spawn(async {
        stop_signal().await;
        tracing::warn!("a second stop signal: exiting without finishing the drain");
        std::process::exit(1);
    });
}

/// Completes on Ctrl-C or SIGTERM.
async fn stop_signal() {
    let interrupt = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut terminate =
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(signal) => signal,
                Err(_) => {
                    let _ = interrupt.await;
                    return;
                }
            };
        tokio::select! {
            _ = interrupt => {}
            _ = terminate.recv() => {}
        }
    }
    #[cfg(not(unix))]
    let _ = interrupt.await;
}

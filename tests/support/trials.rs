//! The harness of the backend pairs' binaries (`harness = false` in `Cargo.toml`): it decides
//! when the binary runs, not when it is built, whether the pair's databases are reachable. Every
//! test (`#[airq_test::test]`, registered in [`TRIALS`]) is a trial of `libtest-mimic`, which
//! speaks libtest's command line (filters, `--exact`, `--skip`, `--ignored`, `--include-ignored`,
//! `--list`, `--format terse`, `--test-threads`, `--nocapture`), so `cargo test` and nextest
//! drive it as they drive the standard harness. A test is named as there: its module path below
//! the crate, then its name (`upload::a_reading_is_stored`).
//!
//! When the pair is not configured or not reachable, the reason is printed once on stderr and
//! every test is reported as ignored, never as passed; asked to run anyway (`--ignored`,
//! `--include-ignored`), each says why it is ignored instead of failing on a refused connection.
//! A database started after the build is used by the next run, without a rebuild.
//!
//! Unlike libtest, `libtest-mimic` does not capture what a test prints: it shows up as it runs.

use std::net::{TcpStream, ToSocketAddrs};
use std::process::ExitCode;
use std::time::Duration;

use libtest_mimic::{Arguments, Completion, Trial};

use crate::common::Pair;

/// One test, as `#[airq_test::test]` registers it.
pub struct Test {
    /// `module_path!()` where the test is defined; its first segment is the binary's crate.
    pub module: &'static str,
    pub name: &'static str,
    /// Runs the test (on the runtime `#[tokio::test]` would give it); a panic fails it.
    pub run: fn(),
}

/// Every test of the binary.
#[linkme::distributed_slice]
pub static TRIALS: [Test];

/// Runs the binary's tests as libtest's command line asks; when the databases of its pair
/// (`backend::PAIR`) cannot be had, every test is ignored with the reason.
pub fn run() -> ExitCode {
    let mut arguments = Arguments::from_args();
    if arguments.test_threads.is_none() {
        arguments.test_threads = std::env::var("RUST_TEST_THREADS")
            .ok()
            .and_then(|threads| threads.parse().ok());
    }
    let gate = match crate::backend::PAIR {
        Pair::Embedded => Ok(()),
        Pair::Postgres => postgres(),
        Pair::QuestDb => questdb("QuestDB pair"),
        Pair::QuestDbSpool => questdb("QuestDB pair with a spool"),
    };
    if let Err(reason) = &gate {
        eprintln!("{reason}");
    }
    let skipped = gate.err();
    let mut trials: Vec<Trial> = TRIALS
        .iter()
        .map(|test| {
            let name = match test.module.split_once("::") {
                Some((_crate, module)) => format!("{module}::{}", test.name),
                None => test.name.to_owned(),
            };
            let reason = skipped.clone();
            Trial::ignorable_test(name, move || match reason {
                Some(reason) => Ok(Completion::ignored_with(reason)),
                None => {
                    (test.run)();
                    Ok(Completion::Completed)
                }
            })
            .with_ignored_flag(skipped.is_some())
        })
        .collect();
    trials.sort_by(|a, b| a.name().cmp(b.name()));
    libtest_mimic::run(&arguments, trials).exit_code()
}

/// The PostgreSQL pair's databases: `AIRQ_TEST_POSTGRES_URL`, reachable.
fn postgres() -> Result<(), String> {
    let skipped = "the PostgreSQL pair is skipped";
    let url = std::env::var("AIRQ_TEST_POSTGRES_URL")
        .map_err(|_| format!("{skipped}: AIRQ_TEST_POSTGRES_URL is not set"))?;
    reachable("AIRQ_TEST_POSTGRES_URL", &url, 5432).map_err(|why| format!("{skipped}: {why}"))
}

/// The QuestDB pairs' databases: PostgreSQL as [`postgres`] has it, and QuestDB's ILP over HTTP
/// (`AIRQ_TEST_QUESTDB_ILP`, `http::addr=host:port;`) and PG wire (`AIRQ_TEST_QUESTDB_PG`),
/// reachable.
fn questdb(pair: &str) -> Result<(), String> {
    let skipped = format!("the {pair} is skipped");
    let mut missing = Vec::new();
    let mut variable = |name: &str| {
        let value = std::env::var(name).ok();
        if value.is_none() {
            missing.push(name.to_owned());
        }
        value
    };
    let postgres_url = variable("AIRQ_TEST_POSTGRES_URL");
    let ilp = variable("AIRQ_TEST_QUESTDB_ILP");
    let pg_wire = variable("AIRQ_TEST_QUESTDB_PG");
    let (Some(postgres_url), Some(ilp), Some(pg_wire)) = (postgres_url, ilp, pg_wire) else {
        let verb = if missing.len() == 1 { "is" } else { "are" };
        return Err(format!("{skipped}: {} {verb} not set", missing.join(", ")));
    };
    let ilp_url = ilp
        .split(';')
        .find_map(|part| {
            part.trim()
                .strip_prefix("http::addr=")
                .or_else(|| part.trim().strip_prefix("addr="))
        })
        .map(|address| format!("http://{address}"))
        .ok_or_else(|| format!("{skipped}: AIRQ_TEST_QUESTDB_ILP names no `http::addr=`"))?;
    reachable("AIRQ_TEST_POSTGRES_URL", &postgres_url, 5432)
        .and_then(|()| reachable("AIRQ_TEST_QUESTDB_ILP", &ilp_url, 9000))
        .and_then(|()| reachable("AIRQ_TEST_QUESTDB_PG", &pg_wire, 8812))
        .map_err(|why| format!("{skipped}: {why}"))
}

/// Whether the `host:port` of the URL in `variable` accepts a TCP connection. A URL we cannot
/// parse counts as reachable, so a misconfiguration fails loudly instead of being skipped
/// quietly. The reason names the address only: a URL may hold a password.
fn reachable(variable: &str, url: &str, default_port: u16) -> Result<(), String> {
    let Some(rest) = url.split_once("://").map(|(_, rest)| rest) else {
        return Ok(());
    };
    let authority = rest.split(['/', '?']).next().unwrap_or_default();
    let host_port = authority
        .rsplit_once('@')
        .map_or(authority, |(_, host)| host);
    if host_port.is_empty() {
        return Ok(());
    }
    let address = if host_port.contains(':') {
        host_port.to_owned()
    } else {
        format!("{host_port}:{default_port}")
    };
    let unreachable = || format!("{variable} ({address}) is unreachable");
    let mut addresses = address.to_socket_addrs().map_err(|_| unreachable())?;
    if addresses.any(|address| TcpStream::connect_timeout(&address, Duration::from_secs(2)).is_ok())
    {
        Ok(())
    } else {
        Err(unreachable())
    }
}

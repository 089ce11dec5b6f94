//! Decides which backend pairs the black-box suite runs against.
//!
//! The embedded pair always runs. The PostgreSQL pair runs when `AIRQ_TEST_POSTGRES_URL` names a
//! server that accepts TCP connections at build time; the QuestDB pair also needs
//! `AIRQ_TEST_QUESTDB_ILP` and `AIRQ_TEST_QUESTDB_PG`. A pair that is not configured or not
//! reachable is compiled as one ignored test that says why, so `cargo test` reports it as
//! skipped, never as passed.
//!
//! It also names the commit the binary is built from, for `airq_build_info` on `/metrics`:
//! `AIRQ_BUILD_COMMIT` when set (an image build sees no `.git`), else git's `HEAD`, else `unknown`.

use std::net::{TcpStream, ToSocketAddrs};
use std::path::Path;
use std::process::Command;
use std::time::Duration;

fn main() {
    build_commit();
    for variable in [
        "AIRQ_TEST_POSTGRES_URL",
        "AIRQ_TEST_QUESTDB_ILP",
        "AIRQ_TEST_QUESTDB_PG",
    ] {
        println!("cargo::rerun-if-env-changed={variable}");
    }
    println!("cargo::rustc-check-cfg=cfg(airq_test_postgres)");
    println!("cargo::rustc-check-cfg=cfg(airq_test_questdb)");

    let postgres = std::env::var("AIRQ_TEST_POSTGRES_URL").ok();
    let postgres_up = postgres.as_deref().is_some_and(|url| reachable(url, 5432));
    if postgres_up {
        println!("cargo::rustc-cfg=airq_test_postgres");
    } else if let Some(url) = postgres {
        println!("cargo::warning=AIRQ_TEST_POSTGRES_URL={url} is unreachable: the postgres pair is skipped");
    }
    let ilp = std::env::var("AIRQ_TEST_QUESTDB_ILP").ok();
    let pg_wire = std::env::var("AIRQ_TEST_QUESTDB_PG").ok();
    if let (Some(ilp), Some(pg_wire)) = (ilp, pg_wire) {
        let ilp_address = ilp
            .split(';')
            .find_map(|part| {
                part.trim()
                    .strip_prefix("http::addr=")
                    .or_else(|| part.trim().strip_prefix("addr="))
            })
            .map(|address| format!("http://{address}"));
        let up = postgres_up
            && ilp_address.is_some_and(|address| reachable(&address, 9000))
            && reachable(&pg_wire, 8812);
        if up {
            println!("cargo::rustc-cfg=airq_test_questdb");
        } else {
            println!(
                "cargo::warning=the QuestDB pair is skipped: QuestDB or PostgreSQL is unreachable"
            );
        }
    }
}

/// Sets `AIRQ_BUILD_COMMIT` for the crate.
fn build_commit() {
    println!("cargo::rerun-if-env-changed=AIRQ_BUILD_COMMIT");
    let commit = std::env::var("AIRQ_BUILD_COMMIT")
        .ok()
        .filter(|commit| !commit.trim().is_empty())
        .or_else(git_head)
        .unwrap_or_else(|| "unknown".to_owned());
    println!("cargo::rustc-env=AIRQ_BUILD_COMMIT={}", commit.trim());
}

/// The abbreviated commit of `HEAD`, asking to run again when `HEAD` or its branch moves.
fn git_head() -> Option<String> {
    let git = |args: &[&str]| -> Option<String> {
        let output = Command::new("git").args(args).output().ok()?;
        output
            .status
            .success()
            .then(|| String::from_utf8_lossy(&output.stdout).trim().to_owned())
    };
    let commit = git(&["rev-parse", "--short=12", "HEAD"])?;
    // Only files that exist: cargo runs a build script whose watched file is missing every time.
    let branch = git(&["symbolic-ref", "-q", "HEAD"]);
    let watched = ["HEAD", "packed-refs"]
        .into_iter()
        .map(str::to_owned)
        .chain(branch);
    for name in watched {
        if let Some(path) = git(&["rev-parse", "--git-path", &name]) {
            if Path::new(&path).exists() {
                println!("cargo::rerun-if-changed={path}");
            }
        }
    }
    Some(commit)
}

/// Whether the `host:port` of a URL accepts a TCP connection; URLs we cannot parse count as
/// reachable, so a misconfiguration fails loudly instead of being skipped quietly.
fn reachable(url: &str, default_port: u16) -> bool {
    let Some(rest) = url.split_once("://").map(|(_, rest)| rest) else {
        return true;
    };
    let authority = rest.split(['/', '?']).next().unwrap_or_default();
    let host_port = authority
        .rsplit_once('@')
        .map_or(authority, |(_, host)| host);
    if host_port.is_empty() {
        return true;
    }
    let address = if host_port.contains(':') {
        host_port.to_owned()
    } else {
        format!("{host_port}:{default_port}")
    };
    let Ok(mut addresses) = address.to_socket_addrs() else {
        return false;
    };
    addresses.any(|address| TcpStream::connect_timeout(&address, Duration::from_secs(2)).is_ok())
}

//! A throwaway PostgreSQL with TLS on, for one test: `initdb` and `pg_ctl` from the machine's
//! PostgreSQL binaries into a temporary directory, on a free loopback port, `ssl=on` with a
//! certificate the test made. The machine's own server is never touched.
//!
//! `initdb` refuses to run as root: as root the instance runs as the `postgres` user (through
//! `runuser`). Where that cannot be done (no binaries, no such user), [`TlsPostgres::start`] says
//! why, and the test reports itself skipped; once it can be done, a failure to make or start the
//! instance fails the test.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::test_ca::ServerCert;

/// A running instance; stopped (immediately) and deleted when dropped.
pub struct TlsPostgres {
    /// Its port on 127.0.0.1.
    pub port: u16,
    bin: PathBuf,
    data: PathBuf,
    run_as: Option<&'static str>,
    _dir: tempfile::TempDir,
}

impl TlsPostgres {
    /// Starts an instance serving `cert`, or says why this machine cannot have one.
    pub fn start(cert: &ServerCert) -> Result<Self, String> {
        let bin =
            binaries().ok_or("no PostgreSQL server binaries (initdb) under /usr/lib/postgresql")?;
        let run_as = if output("id", &["-u"])?.trim() == "0" {
            output("id", &["-u", "postgres"])
                .map_err(|_| "running as root and there is no `postgres` user to run initdb as")?;
            output("runuser", &["--help"]).map_err(|_| {
                "running as root and `runuser` is not available to run initdb as postgres"
            })?;
            Some("postgres")
        } else {
            None
        };
        let dir = tempfile::tempdir().expect("temporary directory");
        let data = dir.path().join("data");
        if let Some(user) = run_as {
            must(output("chown", &[&format!("{user}:"), &path(dir.path())]));
        }
        let instance = Self {
            port: free_port(),
            bin,
            data,
            run_as,
            _dir: dir,
        };
        must(instance.run(
            "initdb",
            &[
                "-D",
                &path(&instance.data),
                "-A",
                "trust",
                "-U",
                "postgres",
                "-E",
                "UTF8",
                "--locale=C",
                "--no-sync",
            ],
        ));
        for (from, to) in [(&cert.cert, "server.crt"), (&cert.key, "server.key")] {
            let target = instance.data.join(to);
            std::fs::copy(from, &target).expect("certificate copied into the data directory");
            must(output("chmod", &["0600", &path(&target)]));
            if let Some(user) = run_as {
                must(output("chown", &[&format!("{user}:"), &path(&target)]));
            }
        }
        let options = format!(
            "-c port={} -c listen_addresses=127.0.0.1 -c unix_socket_directories={} -c ssl=on \
             -c ssl_cert_file=server.crt -c ssl_key_file=server.key -c fsync=off",
            instance.port,
            path(&instance.data),
        );
        let log = path(&instance.data.join("server.log"));
        if let Err(error) = instance.run(
            "pg_ctl",
            &[
                "-D",
                &path(&instance.data),
                "-l",
                &log,
                "-w",
                "-t",
                "60",
                "-o",
                &options,
                "start",
            ],
        ) {
            let log = std::fs::read_to_string(instance.data.join("server.log")).unwrap_or_default();
            panic!("the throwaway PostgreSQL did not start: {error}\n{log}");
        }
        Ok(instance)
    }

    /// A URL for `database` on this instance with extra query parameters.
    pub fn url(&self, host: &str, query: &str) -> String {
        format!(
            "postgres://postgres@{host}:{}/postgres?application_name=airq-tls-test&{query}",
            self.port
        )
    }

    fn run(&self, program: &str, args: &[&str]) -> Result<String, String> {
        let binary = path(&self.bin.join(program));
        match self.run_as {
            Some(user) => {
                let mut full = vec!["-u", user, "--", binary.as_str()];
                full.extend_from_slice(args);
                output("runuser", &full)
            }
            None => output(&binary, args),
        }
    }
}

impl Drop for TlsPostgres {
    fn drop(&mut self) {
        let _ = self.run(
            "pg_ctl",
            &["-D", &path(&self.data), "-m", "immediate", "stop"],
        );
    }
}

/// The bin directory of the newest PostgreSQL installed the Debian way.
fn binaries() -> Option<PathBuf> {
    let mut found: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .filter_map(Result::ok)
        .filter_map(|entry| {
            let version = entry.file_name().to_str()?.parse().ok()?;
            let bin = entry.path().join("bin");
            bin.join("initdb").exists().then_some((version, bin))
        })
        .collect();
    found.sort();
    found.pop().map(|(_, bin)| bin)
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|socket| socket.local_addr())
        .map(|address| address.port())
        .expect("a free port")
}

/// A step that the machine is known to allow: its failure fails the test.
fn must(step: Result<String, String>) -> String {
    step.unwrap_or_else(|error| panic!("making the throwaway PostgreSQL: {error}"))
}

fn path(path: &Path) -> String {
    path.to_string_lossy().into_owned()
}

/// Runs a program to completion; its stdout, or why it failed (with its stderr).
fn output(program: &str, args: &[&str]) -> Result<String, String> {
    // `/`, not the test's directory, which the `postgres` user may not be allowed to enter.
    let done = Command::new(program)
        .current_dir("/")
        .args(args)
        .output()
        .map_err(|error| format!("{program}: {error}"))?;
    if done.status.success() {
        Ok(String::from_utf8_lossy(&done.stdout).into_owned())
    } else {
        Err(format!(
            "{program} {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&done.stderr).trim()
        ))
    }
}

//! The real `airq` binary as a child process, for tests of what only a process shows: its
//! stderr, its exit, its answer to signals.

use std::io::{BufRead as _, BufReader};
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc;
use std::time::Duration;

/// `airq ARGS` with no `AIRQ_*` or `RUST_LOG` variable inherited, run in `cwd`.
pub fn airq(cwd: &Path, args: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_airq"));
    command.args(args).current_dir(cwd);
    for (name, _) in std::env::vars_os() {
        let name_text = name.to_string_lossy();
        if name_text.starts_with("AIRQ_") || name_text == "RUST_LOG" {
            command.env_remove(name);
        }
    }
    command
}

/// A token for `owner` from the data dir's local issuer.
pub fn token(cwd: &Path, data_dir: &str, owner: &str) -> String {
    let output = airq(cwd, &["token", owner, "--data-dir", data_dir])
        .output()
        .expect("airq token runs");
    assert!(output.status.success(), "airq token failed");
    String::from_utf8(output.stdout)
        .expect("utf-8")
        .trim()
        .to_owned()
}

/// A running server whose stderr lines arrive on `lines`; killed when dropped.
pub struct Server {
    child: Child,
    lines: mpsc::Receiver<String>,
    seen: Vec<String>,
}

impl Server {
    pub fn start(mut command: Command) -> Self {
        let mut child = command
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("airq serve starts");
        let stderr = child.stderr.take().expect("stderr piped");
        let (sender, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                if sender.send(line).is_err() {
                    break;
                }
            }
        });
        Self {
            child,
            lines,
            seen: Vec::new(),
        }
    }

    /// Reads stderr until a line satisfies `wanted`; returns that line.
    pub fn wait_for(&mut self, wanted: impl Fn(&str) -> bool) -> String {
        loop {
            let line = self
                .lines
                .recv_timeout(Duration::from_secs(30))
                .unwrap_or_else(|_| panic!("no such log line; stderr so far: {:#?}", self.seen));
            self.seen.push(line.clone());
            if wanted(&line) {
                return line;
            }
        }
    }

    /// Stops the server as `docker stop` does (SIGTERM), and returns every stderr line it wrote
    /// until it exited.
    pub fn stop(mut self) -> Vec<String> {
        let terminated = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .expect("kill runs");
        assert!(terminated.success(), "SIGTERM sent");
        let status = self.child.wait().expect("the server exits");
        assert!(status.success(), "a graceful stop exits 0: {status}");
        while let Ok(line) = self.lines.recv_timeout(Duration::from_secs(30)) {
            self.seen.push(line);
        }
        std::mem::take(&mut self.seen)
    }

    /// Sends the server `signal` (`TERM`, `INT`, …) without waiting for it to exit.
    pub fn signal(&self, signal: &str) {
        let sent = Command::new("kill")
            .args([format!("-{signal}"), self.child.id().to_string()])
            .status()
            .expect("kill runs");
        assert!(sent.success(), "SIG{signal} sent");
    }

    /// Waits at most `limit` for the server to exit; its exit status.
    pub fn exit_within(&mut self, limit: Duration) -> std::process::ExitStatus {
        let deadline = std::time::Instant::now() + limit;
        loop {
            if let Some(status) = self.child.try_wait().expect("the server is waited for") {
                return status;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "the server still runs after {limit:?}; stderr so far: {:#?}",
                self.seen
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Stops the server and returns every stderr line it wrote.
    pub fn finish(mut self) -> Vec<String> {
        let _ = self.child.kill();
        let _ = self.child.wait();
        while let Ok(line) = self.lines.recv_timeout(Duration::from_secs(5)) {
            self.seen.push(line);
        }
        std::mem::take(&mut self.seen)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The data dir of a test's server, inside its temporary directory.
pub const DATA_DIR: &str = "data";

/// `airq serve` on a free port with its data dir in `cwd`, as `configure` leaves the command;
/// the server, once it is listening, and its address.
pub fn serve(cwd: &Path, configure: impl FnOnce(&mut Command)) -> (Server, String) {
    let mut command = airq(
        cwd,
        &["serve", "--listen", "127.0.0.1:0", "--data-dir", DATA_DIR],
    );
    configure(&mut command);
    let mut server = Server::start(command);
    let listening = server.wait_for(|line| line.contains("airq listening"));
    let address = address_of(&listening);
    (server, address)
}

/// The address in the "airq listening" line.
pub fn address_of(line: &str) -> String {
    let at = line.find("127.0.0.1:").expect("the line names the address");
    line[at..]
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == '.' || *c == ':')
        .collect()
}

/// Runs `command`, which must end within `limit`: a server that should have refused to start but
/// serves instead is killed and fails the test rather than hanging it.
pub fn run_for_at_most(mut command: Command, limit: Duration) -> Output {
    let mut child = command
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("airq runs");
    let deadline = std::time::Instant::now() + limit;
    while child.try_wait().expect("airq is waited for").is_none() {
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            let output = child.wait_with_output().expect("airq's output");
            panic!(
                "airq still ran after {limit:?}: {}",
                String::from_utf8_lossy(&output.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().expect("airq's output")
}

/// `airq serve` with `args` must refuse to start, saying why on stderr (and binding nothing).
pub fn refused_serve(args: &[&str], reason: &str) {
    let dir = tempfile::tempdir().expect("temporary dir");
    let mut full = vec!["serve", "--listen", "127.0.0.1:0"];
    full.extend_from_slice(args);
    let output = run_for_at_most(airq(dir.path(), &full), Duration::from_secs(30));
    assert!(!output.status.success(), "{args:?} is refused");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains(reason),
        "{args:?}: stderr says {reason:?}: {stderr}"
    );
    assert!(output.stdout.is_empty());
}

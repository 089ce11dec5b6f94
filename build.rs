//! Names the commit the binary is built from, for `airq_build_info` on `/metrics`:
//! `AIRQ_BUILD_COMMIT` when set (an image build sees no `.git`), else git's `HEAD`, else `unknown`.

use std::path::Path;
use std::process::Command;

fn main() {
    build_commit();
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

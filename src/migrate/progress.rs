//! The progress of one step on stderr: a bar redrawn in place on a terminal, and a plain line at
//! every tenth of the way elsewhere (a log file, a container's output, CI), where a redrawn line
//! would be one endless line of carriage returns.

use std::io::{IsTerminal as _, Write as _};
use std::time::{Duration, Instant};

/// Width of the bar, in characters.
const BAR: u64 = 30;
/// The least time between two redraws of the bar.
const REDRAW: Duration = Duration::from_millis(100);

/// One step's progress: `done` of `total` things.
#[derive(Debug)]
pub(super) struct Progress {
    what: &'static str,
    total: u64,
    done: u64,
    terminal: bool,
    drawn: Option<Instant>,
    /// Tenths of the way already said as a line (off a terminal).
    said: u64,
}

impl Progress {
    /// Starts showing the progress of `what`, `total` of them.
    pub(super) fn start(what: &'static str, total: u64) -> Self {
        let mut progress = Self {
            what,
            total,
            done: 0,
            terminal: std::io::stderr().is_terminal(),
            drawn: None,
            said: 0,
        };
        if progress.terminal {
            progress.draw();
        } else {
            progress.say(&format!("{what}: {total} to copy"));
        }
        progress
    }

    /// `count` more are done.
    pub(super) fn advance(&mut self, count: u64) {
        self.done = self.done.saturating_add(count).min(self.total);
        if self.terminal {
            if self.drawn.is_none_or(|drawn| drawn.elapsed() >= REDRAW) {
                self.draw();
            }
        } else {
            let tenths = self.done * 10 / self.total.max(1);
            if tenths > self.said && self.done < self.total {
                self.said = tenths;
                self.say(&format!(
                    "{}: {}% ({} of {})",
                    self.what,
                    tenths * 10,
                    self.done,
                    self.total
                ));
            }
        }
    }

    /// Shows the step as finished.
    pub(super) fn finish(mut self) {
        if self.terminal {
            self.draw();
            self.say("");
        } else {
            self.say(&format!(
                "{}: done ({} of {})",
                self.what, self.done, self.total
            ));
        }
    }

    fn draw(&mut self) {
        let filled = self.done * BAR / self.total.max(1);
        let percent = self.done * 100 / self.total.max(1);
        let bar: String = (0..BAR)
            .map(|at| if at < filled { '#' } else { '-' })
            .collect();
        let mut stderr = std::io::stderr().lock();
        // A progress display that cannot be written is no reason to stop the copy.
        let _ = write!(
            stderr,
            "\r{} [{bar}] {percent:>3}% {} of {}",
            self.what, self.done, self.total
        );
        let _ = stderr.flush();
        self.drawn = Some(Instant::now());
    }

    fn say(&self, line: &str) {
        let _ = writeln!(std::io::stderr().lock(), "{line}");
    }
}

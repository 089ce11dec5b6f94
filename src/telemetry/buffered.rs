//! Log lines written in batches: an access line per request must not cost a `write` system call
//! per request on the HTTP workers, and neither a thread wake-up per line — which is what a
//! channel to a writer thread costs (measured under single uploads: `tracing-appender`'s
//! non-blocking writer thread took 4.3 µs of CPU per upload, more than the writes it saved;
//! this buffer took the workers' CPU per upload down by about 2 µs, `bench/RESULTS.md`,
//! thirteenth session).
//!
//! The rules:
//! - Lines below `WARN` go into one shared buffer, written when it fills and by a thread of its
//!   own every [`FLUSH_EVERY`], so such a line reaches stderr at most that late.
//! - A `WARN` or `ERROR` line writes the buffer and then itself before the call returns: what
//!   explains a failure is on stderr, in order, before anything that follows it (the abort after
//!   a failed sync of the ingestion log included).
//! - Dropping the [`LogFlusher`] (at the end of `main`) writes whatever is buffered. A process
//!   killed with SIGKILL loses at most the last [`FLUSH_EVERY`] of lines below `WARN`.

use std::io::{BufWriter, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;

use tracing::{Level, Metadata};
use tracing_subscriber::fmt::MakeWriter;

/// Longest a line below `WARN` waits in the buffer.
pub(super) const FLUSH_EVERY: Duration = Duration::from_millis(100);
/// The buffer's size; a line that does not fit writes the buffer first.
const CAPACITY: usize = 64 * 1024;

/// A writer of log lines to `W`, buffered by the rules above; cheap to clone.
#[derive(Debug)]
pub(super) struct Buffered<W: Write> {
    out: Arc<Mutex<BufWriter<W>>>,
    flag: Arc<Flag>,
}

impl<W: Write> Clone for Buffered<W> {
    fn clone(&self) -> Self {
        Self {
            out: Arc::clone(&self.out),
            flag: Arc::clone(&self.flag),
        }
    }
}

/// What the writers and the flusher share besides the buffer.
#[derive(Debug, Default)]
struct Flag {
    /// Set once the flusher stops (or could not start): from then on every line is written at
    /// once.
    stopped: AtomicBool,
    /// What the flusher waits on between flushes (never held together with the buffer's lock).
    pause: Mutex<()>,
    wake: Condvar,
}

/// Writes what is buffered every interval; writes the rest and stops when dropped.
#[derive(Debug)]
pub struct LogFlusher {
    flag: Arc<Flag>,
    thread: Option<JoinHandle<()>>,
}

impl<W: Write + Send + 'static> Buffered<W> {
    /// The writer to `out`, and what writes its buffer every `interval`. Should the flushing
    /// thread not start, every line is written at once instead.
    pub(super) fn start(out: W, interval: Duration) -> (Self, LogFlusher) {
        let writer = Self {
            out: Arc::new(Mutex::new(BufWriter::with_capacity(CAPACITY, out))),
            flag: Arc::default(),
        };
        let flushed = writer.clone();
        let thread = std::thread::Builder::new()
            .name("airq-log-flush".into())
            .spawn(move || flushed.run(interval))
            .ok();
        if thread.is_none() {
            writer.flag.stop();
        }
        let flusher = LogFlusher {
            flag: Arc::clone(&writer.flag),
            thread,
        };
        (writer, flusher)
    }

    fn run(&self, interval: Duration) {
        loop {
            let pause = self
                .flag
                .pause
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            let stopping = self.flag.stopped.load(Ordering::Acquire);
            if !stopping {
                drop(self.flag.wake.wait_timeout(pause, interval));
            }
            // Nothing useful can be done about a failed write of the log itself.
            let _ = self.out().flush();
            if stopping {
                break;
            }
        }
    }
}

impl<W: Write> Buffered<W> {
    fn out(&self) -> MutexGuard<'_, BufWriter<W>> {
        // A panic while a line was copied in leaves at worst a partial line.
        self.out.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Flag {
    fn stop(&self) {
        self.stopped.store(true, Ordering::Release);
        // Taken so that the flusher is either waiting (and woken) or has yet to see the flag.
        drop(self.pause.lock().unwrap_or_else(PoisonError::into_inner));
        self.wake.notify_one();
    }
}

impl Drop for LogFlusher {
    fn drop(&mut self) {
        self.flag.stop();
        if let Some(thread) = self.thread.take() {
            // The thread writes the rest once it sees the stop.
            let _ = thread.join();
        }
    }
}

/// One line being written into the buffer, and written out with it when `flush` is set.
#[derive(Debug)]
pub(super) struct Line<'a, W: Write> {
    out: MutexGuard<'a, BufWriter<W>>,
    flush: bool,
}

impl<W: Write> Write for Line<'_, W> {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.out.write(bytes)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.out.flush()
    }
}

impl<W: Write> Drop for Line<'_, W> {
    fn drop(&mut self) {
        if self.flush {
            let _ = self.out.flush();
        }
    }
}

impl<'a, W: Write + 'a> MakeWriter<'a> for Buffered<W> {
    type Writer = Line<'a, W>;

    fn make_writer(&'a self) -> Self::Writer {
        Line {
            out: self.out(),
            flush: true,
        }
    }

    fn make_writer_for(&'a self, meta: &Metadata<'_>) -> Self::Writer {
        // Levels order by verbosity: ERROR < WARN < INFO.
        let flush = *meta.level() <= Level::WARN || self.flag.stopped.load(Ordering::Acquire);
        Line {
            out: self.out(),
            flush,
        }
    }
}

#[cfg(test)]
mod tests {
    use tracing_subscriber::layer::SubscriberExt as _;

    use super::*;

    /// A sink that a test reads while the writer holds it.
    #[derive(Debug, Clone, Default)]
    struct Sink(Arc<Mutex<Vec<u8>>>);

    impl Write for Sink {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .extend_from_slice(bytes);
            Ok(bytes.len())
        }

        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl Sink {
        fn text(&self) -> String {
            let bytes = self
                .0
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .clone();
            String::from_utf8_lossy(&bytes).into_owned()
        }
    }

    /// Logs through a buffered writer to a sink whose flusher waits far longer than a test
    /// runs, so that only the rules write lines out.
    fn logging(test: impl FnOnce(&Sink)) -> (Sink, LogFlusher) {
        let sink = Sink::default();
        let (writer, flusher) = Buffered::start(sink.clone(), Duration::from_secs(3600));
        let subscriber = tracing_subscriber::registry().with(
            tracing_subscriber::fmt::layer()
                .with_writer(writer)
                .with_ansi(false)
                .without_time(),
        );
        tracing::subscriber::with_default(subscriber, || test(&sink));
        (sink, flusher)
    }

    #[test]
    fn a_warning_writes_the_lines_before_it_and_itself_at_once() {
        logging(|sink| {
            tracing::info!("first");
            tracing::warn!("second");
            let text = sink.text();
            let first = text.find("first").expect("the info line is written");
            let second = text.find("second").expect("the warning is written");
            assert!(first < second, "{text}");
        });
    }

    #[test]
    fn lines_below_warn_wait_in_the_buffer_until_the_flusher_writes_them() {
        let (sink, flusher) = logging(|sink| {
            tracing::info!("kept for the flusher");
            assert_eq!(sink.text(), "", "nothing written yet");
        });
        drop(flusher);
        assert!(
            sink.text().contains("kept for the flusher"),
            "{}",
            sink.text()
        );
    }

    #[test]
    fn once_the_flusher_stopped_every_line_is_written_at_once() {
        let sink = Sink::default();
        let (writer, flusher) = Buffered::start(sink.clone(), Duration::from_secs(3600));
        drop(flusher);
        let subscriber = tracing_subscriber::registry().with(
            tracing_subscriber::fmt::layer()
                .with_writer(writer)
                .with_ansi(false),
        );
        tracing::subscriber::with_default(subscriber, || tracing::info!("late"));
        assert!(sink.text().contains("late"), "{}", sink.text());
    }
}

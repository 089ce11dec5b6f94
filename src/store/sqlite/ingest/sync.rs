//! Group sync: the ingestion log's commits are made durable by a thread of their own, so the
//! batch writer appends batch *n + 1* while batch *n* syncs.
//!
//! Why: with `synchronous = FULL`, SQLite commits and syncs in one call, and the batch writer,
//! the one serial stage of ingestion, waited for every `fdatasync` before it could gather the
//! next batch (a flush of 18 single uploads: 0.52 ms, of which the sync was about a third). The
//! log's appending connection now runs with `synchronous = NORMAL`, which in WAL mode keeps the
//! file consistent across power loss (the WAL is synced before every checkpoint, the database
//! after it, the WAL's header when it restarts) but does not sync a commit; this thread syncs the
//! WAL file after commits instead, one `fdatasync` for every commit made since the last one began.
//!
//! The rules:
//! - **Durable before acknowledged.** A commit's `then` runs only after an `fdatasync` of the WAL
//!   that began after the commit had written its frames; that is where the uploads are answered
//!   and the rows become visible to reads and to the fold, so nothing not durable is ever shown or
//!   folded. Recovery after power loss keeps a prefix of the WAL's commits (its frames are
//!   checksummed in a chain), so an unsynced later commit cannot take an earlier one with it.
//! - **In commit order.** `then`s run on this thread in the order their commits were registered.
//! - **A failed sync stops the process.** After a failed `fdatasync` the kernel may have dropped
//!   the unwritten pages and a retry can report success for data never written, so nothing of the
//!   batches waiting could be answered truthfully either way (PostgreSQL panics for the same
//!   reason). The process aborts: uploads in flight get no answer, and the next start recovers
//!   whatever the disk holds.
//! - **Drop drains.** Dropping the handle syncs and runs every `then` registered before it.
//! - The WAL file is the same one for the process's lifetime: SQLite deletes it only when its last
//!   connection closes, and the log's own connection lives as long as the log.

use std::fs::File;
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::thread::JoinHandle;

use crate::store::StoreError;

/// What runs once a commit is durable.
pub(crate) type Then = Box<dyn FnOnce() + Send>;

/// The syncing thread; stops after syncing everything registered when dropped.
#[derive(Debug)]
pub(crate) struct GroupSync {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

#[derive(Debug, Default)]
struct Shared {
    state: Mutex<State>,
    wake: Condvar,
}

#[derive(Default)]
struct State {
    /// Commits made and not synced yet, oldest first.
    waiting: Vec<Then>,
    stop: bool,
}

impl std::fmt::Debug for State {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("State")
            .field("waiting", &self.waiting.len())
            .field("stop", &self.stop)
            .finish()
    }
}

impl GroupSync {
    /// Starts syncing `wal`, the write-ahead log of the ingestion log.
    pub(crate) fn start(wal: File) -> Result<Self, StoreError> {
        let shared = Arc::new(Shared::default());
        let thread_shared = Arc::clone(&shared);
        let thread = std::thread::Builder::new()
            .name("airq-log-sync".into())
            .spawn(move || run(&thread_shared, &wal))
            .map_err(StoreError::Thread)?;
        Ok(Self {
            shared,
            thread: Some(thread),
        })
    }

    /// Registers a commit that has just returned: `then` runs once it is durable.
    pub(crate) fn committed(&self, then: Then) {
        let mut state = self.shared.lock();
        state.waiting.push(then);
        drop(state);
        self.shared.wake.notify_one();
    }
}

impl Shared {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Drop for GroupSync {
    fn drop(&mut self) {
        self.shared.lock().stop = true;
        self.shared.wake.notify_one();
        if let Some(thread) = self.thread.take() {
            if thread.join().is_err() {
                tracing::error!("the ingestion log's sync thread panicked");
            }
        }
    }
}

fn run(shared: &Shared, wal: &File) {
    loop {
        let due = {
            let mut state = shared.lock();
            while state.waiting.is_empty() && !state.stop {
                state = shared
                    .wake
                    .wait(state)
                    .unwrap_or_else(PoisonError::into_inner);
            }
            if state.waiting.is_empty() {
                break;
            }
            std::mem::take(&mut state.waiting)
        };
        if let Err(error) = wal.sync_data() {
            tracing::error!(%error, "syncing the ingestion log failed; stopping the process so that no upload is acknowledged that the disk may not hold");
            std::process::abort();
        }
        for then in due {
            then();
        }
    }
    tracing::debug!("ingestion log sync stopped");
}

#[cfg(test)]
mod tests {
    use std::sync::mpsc;

    use super::*;

    fn wal() -> (tempfile::TempDir, File) {
        let dir = tempfile::tempdir().unwrap_or_else(|error| panic!("temporary dir: {error}"));
        let file = File::create(dir.path().join("wal"))
            .unwrap_or_else(|error| panic!("a file to sync: {error}"));
        (dir, file)
    }

    #[test]
    fn every_registered_commit_is_answered_in_commit_order() {
        let (_dir, file) = wal();
        let sync = GroupSync::start(file).unwrap_or_else(|error| panic!("{error}"));
        let (done, answers) = mpsc::channel();
        for commit in 0..100 {
            let done = done.clone();
            sync.committed(Box::new(move || {
                let _ = done.send(commit);
            }));
        }
        drop(done);
        drop(sync);

        assert_eq!(
            answers.iter().collect::<Vec<_>>(),
            (0..100).collect::<Vec<_>>()
        );
    }

    #[test]
    fn dropping_the_sync_answers_what_was_registered_before() {
        let (_dir, file) = wal();
        let sync = GroupSync::start(file).unwrap_or_else(|error| panic!("{error}"));
        let (done, answers) = mpsc::channel();
        sync.committed(Box::new(move || {
            let _ = done.send(());
        }));
        drop(sync);

        assert_eq!(answers.try_recv(), Ok(()));
    }
}

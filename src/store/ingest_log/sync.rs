//! Group sync: the log's appends are made durable by a thread of their own, so the batch writer
//! appends batch *n + 1* while batch *n* syncs.
//!
//! Why: the batch writer is the one serial stage of ingestion; waiting for every `fdatasync`
//! before gathering the next batch made the sync's time a share of every batch's. An append
//! returns once its bytes are written (to the page cache); this thread then syncs the segment
//! they went to, one `fdatasync` for every append registered since the last one began.
//!
//! The rules:
//! - **Durable before acknowledged.** An append's `then` runs only after an `fdatasync` of its
//!   segment that began after the append had written its bytes; that is where the uploads are
//!   answered and the rows become visible to reads and to the fold, so nothing not durable is
//!   ever shown or folded. A scan after a power loss keeps the entries up to the first one that
//!   did not reach the disk whole, and an append is answered only once everything before it is
//!   synced too, so no answered entry is ever behind a lost one.
//! - **In append order.** `then`s run on this thread in the order their appends were registered.
//! - **A failed sync stops the process.** After a failed `fdatasync` the kernel may have dropped
//!   the unwritten pages and a retry can report success for data never written, so nothing of the
//!   batches waiting could be answered truthfully either way (PostgreSQL panics for the same
//!   reason). The process aborts: uploads in flight get no answer, and the next start recovers
//!   whatever the disk holds.
//! - **Drop drains.** Dropping the handle syncs and runs every `then` registered before it.

use std::fs::File;
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::thread::JoinHandle;

use crate::store::StoreError;

/// What runs once an append is durable.
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
    /// Appends made and not synced yet, oldest first, with the segment each went to.
    waiting: Vec<(Arc<File>, Then)>,
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
    /// Starts the syncing thread.
    pub(crate) fn start() -> Result<Self, StoreError> {
        let shared = Arc::new(Shared::default());
        let thread_shared = Arc::clone(&shared);
        let thread = std::thread::Builder::new()
            .name("airq-log-sync".into())
            .spawn(move || run(&thread_shared))
            .map_err(StoreError::Thread)?;
        Ok(Self {
            shared,
            thread: Some(thread),
        })
    }

    /// Registers an append to `segment` that has just returned: `then` runs once it is durable.
    pub(crate) fn appended(&self, segment: Arc<File>, then: Then) {
        let mut state = self.shared.lock();
        state.waiting.push((segment, then));
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

fn run(shared: &Shared) {
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
        // Appends go to one segment until it is full: usually one sync, two across a switch.
        let mut synced: Option<&Arc<File>> = None;
        for (segment, _) in &due {
            if synced.is_some_and(|last| Arc::ptr_eq(last, segment)) {
                continue;
            }
            if let Err(error) = segment.sync_data() {
                tracing::error!(%error, "syncing the ingestion log failed; stopping the process so that no upload is acknowledged that the disk may not hold");
                std::process::abort();
            }
            synced = Some(segment);
        }
        for (_, then) in due {
            then();
        }
    }
    tracing::debug!("ingestion log sync stopped");
}

#[cfg(test)]
mod tests {
    use std::sync::mpsc;

    use super::*;

    fn segment() -> (tempfile::TempDir, Arc<File>) {
        let dir = tempfile::tempdir().unwrap_or_else(|error| panic!("temporary dir: {error}"));
        let file = File::create(dir.path().join("segment"))
            .unwrap_or_else(|error| panic!("a file to sync: {error}"));
        (dir, Arc::new(file))
    }

    #[test]
    fn every_registered_append_is_answered_in_append_order() {
        let (_dir, file) = segment();
        let sync = GroupSync::start().unwrap_or_else(|error| panic!("{error}"));
        let (done, answers) = mpsc::channel();
        for append in 0..100 {
            let done = done.clone();
            sync.appended(
                Arc::clone(&file),
                Box::new(move || {
                    let _ = done.send(append);
                }),
            );
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
        let (_dir, file) = segment();
        let sync = GroupSync::start().unwrap_or_else(|error| panic!("{error}"));
        let (done, answers) = mpsc::channel();
        sync.appended(
            file,
            Box::new(move || {
                let _ = done.send(());
            }),
        );
        drop(sync);

        assert_eq!(answers.try_recv(), Ok(()));
    }
}

//! Batches written and not yet durable: what lets the gathering loop keep gathering while the
//! last batch syncs instead of writing a small one behind it ("No small commit behind a sync").
//!
//! Counted by a guard rather than by hand, so that a sink that drops a `when_durable` callback
//! unrun never leaves the loop waiting for a sync that will not come.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use tokio::sync::Notify;

#[derive(Debug, Default)]
pub(super) struct Syncing {
    batches: AtomicUsize,
    pub(super) done: Notify,
}

impl Syncing {
    /// Whether a written batch still waits for its sync.
    pub(super) fn pending(&self) -> bool {
        self.batches.load(Ordering::Acquire) > 0
    }

    /// Counts a written batch as not yet durable until the returned guard is dropped: by its
    /// `when_durable` callback once it ran, or with the callback if a sink ever dropped it
    /// unrun, so the gathering loop never waits for a sync that will not come.
    pub(super) fn written(self: &Arc<Self>) -> Unsynced {
        self.batches.fetch_add(1, Ordering::AcqRel);
        Unsynced(Arc::clone(self))
    }
}

/// A written batch not yet durable (see [`Syncing::written`]).
pub(super) struct Unsynced(Arc<Syncing>);

impl Drop for Unsynced {
    fn drop(&mut self) {
        self.0.batches.fetch_sub(1, Ordering::AcqRel);
        // A permit is kept when nobody waits, so a wake-up between the gathering loop's check
        // and its wait is not lost.
        self.0.done.notify_one();
    }
}

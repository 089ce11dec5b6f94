//! The fold's manners: it gives up its CPU every few hundred statements.
//!
//! Why: the fold is the one long CPU-bound thread of the embedded store (a chunk takes up to a
//! second of a core on a slow machine), and with two cores every HTTP worker, the batch writer
//! and the log's sync thread that wakes while it runs may wait for the rest of its time slice
//! before they get a CPU; each upload passes through several such wake-ups before its 201.
//! Yielding between statements lets them run at once and the fold go on when they sleep again,
//! without lowering its priority (a lower one starved it and cost throughput, `bench/RESULTS.md`).
//! Measured on single uploads in three alternating pairs: p99 22.7, 20.2, 25.6 ms against 25.3,
//! 22.6, 30.0 ms, and 3–10 % more uploads a second.

/// Statements between two yields: a few hundred microseconds of the fold's work.
const EVERY: usize = 256;

/// `items`, yielding the thread's CPU after every [`EVERY`] of them.
pub(super) fn paced<I: IntoIterator>(items: I) -> impl Iterator<Item = I::Item> {
    items.into_iter().enumerate().map(|(index, item)| {
        if index % EVERY == EVERY - 1 {
            std::thread::yield_now();
        }
        item
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pacing_keeps_every_item_in_its_order() {
        let items = 0..3 * EVERY + 7;
        assert_eq!(
            paced(items.clone()).collect::<Vec<_>>(),
            items.collect::<Vec<_>>()
        );
    }
}

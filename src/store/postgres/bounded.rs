//! Every PG-wire call (PostgreSQL, QuestDB) within a time bound.
//!
//! A database that stops answering — a lock held elsewhere, a server that accepted a query and
//! never replied (seen with QuestDB 8.1.1's PG wire under load) — must not hold a request, or
//! the connection it runs on, forever. [`BoundedPool::run`] gives a call [`CALL_LIMIT`] in all:
//! waiting for a pooled connection and every statement it sends. Past it the call fails with
//! [`StoreError::Timeout`] (an opaque 500 to the client, the cause in the log), and the
//! connection it held is **closed, not returned to the pool**: its reply may still be on the
//! way, or never come, and the next call on it would wait behind it.

use std::time::Duration;

use deadpool_postgres::{Object, Pool};
use tokio::time::{timeout_at, Instant};

use crate::store::StoreError;

/// How long one store call may take on a PG-wire connection, from asking the pool to its last
/// reply. A read of a year of data answers in milliseconds; ten seconds is a stalled database.
pub(crate) const CALL_LIMIT: Duration = Duration::from_secs(10);

/// A connection pool whose calls are bounded by [`CALL_LIMIT`]: the only form in which the
/// constructors of PG-wire pools ([`super::connect`], QuestDB's) hand a pool out.
#[derive(Debug, Clone)]
pub struct BoundedPool {
    pool: Pool,
}

impl BoundedPool {
    /// Calls on `pool` bounded by [`CALL_LIMIT`].
    pub(crate) fn new(pool: Pool) -> Self {
        Self { pool }
    }

    /// Runs `work` on a pooled connection within the limit; a connection whose call ran out of
    /// time is closed.
    pub(crate) async fn run<T>(
        &self,
        work: impl AsyncFnOnce(&mut Object) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        let deadline = Instant::now() + CALL_LIMIT;
        let mut client = timeout_at(deadline, self.pool.get())
            .await
            .map_err(|_| StoreError::Timeout(CALL_LIMIT))??;
        // A statement of its own, so the timed-out call's borrow of `client` ends here.
        let outcome = timeout_at(deadline, work(&mut client)).await;
        outcome.unwrap_or_else(|_| {
            drop(Object::take(client));
            Err(StoreError::Timeout(CALL_LIMIT))
        })
    }
}

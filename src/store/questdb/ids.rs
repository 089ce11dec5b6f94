//! Receipt ids for the QuestDB pair: blocks taken from a PostgreSQL sequence shared by every
//! process, so ids are unique across replicas. Each sink has its own block (one per ILP sender;
//! the spool's one sink), so ids grow per sink, not across the senders of a process nor across
//! replicas.

use crate::domain::ReadingId;
use crate::store::postgres::BoundedPool;
use crate::store::StoreError;

/// Ids per block taken from the `reading_ids` sequence (its `INCREMENT BY`).
const ID_BLOCK: u64 = 4096;

/// The block a writer hands ids out of.
pub(super) struct IdBlocks {
    pool: BoundedPool,
    next: u64,
    end: u64,
    /// The server's runtime: PG-wire connections are driven there, never on a lane's own
    /// runtime, which blocks during writes (and has no IO driver).
    runtime: tokio::runtime::Handle,
}

impl std::fmt::Debug for IdBlocks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IdBlocks")
            .field("next", &self.next)
            .field("end", &self.end)
            .finish_non_exhaustive()
    }
}

impl IdBlocks {
    /// Ids from the sequence behind `pool`, which is used on the runtime this is called from.
    pub(super) fn new(pool: BoundedPool) -> Result<Self, StoreError> {
        let runtime = tokio::runtime::Handle::try_current()
            .map_err(|_| StoreError::Config("the QuestDB writer needs a runtime".into()))?;
        Ok(Self {
            pool,
            next: 0,
            end: 0,
            runtime,
        })
    }

    /// The next `count` ids, taking new blocks as needed.
    pub(super) async fn allocate(&mut self, count: usize) -> Result<Vec<ReadingId>, StoreError> {
        let mut ids = Vec::with_capacity(count);
        while ids.len() < count {
            if self.next >= self.end {
                let pool = self.pool.clone();
                let start: i64 = self
                    .runtime
                    .spawn(async move {
                        pool.run(async |client| {
                            let row = client
                                .query_one("SELECT nextval('reading_ids')", &[])
                                .await?;
                            Ok(row.get(0))
                        })
                        .await
                    })
                    .await??;
                self.next = u64::try_from(start).unwrap_or(0);
                self.end = self.next + ID_BLOCK;
            }
            let id = ReadingId::new(self.next).ok_or_else(|| {
                StoreError::Corrupt(format!("receipt id {} is out of range", self.next))
            })?;
            ids.push(id);
            self.next += 1;
        }
        Ok(ids)
    }
}

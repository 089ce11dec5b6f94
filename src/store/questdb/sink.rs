//! [`ReadingSink`] on QuestDB without a spool: each batch is one ILP/HTTP transaction, answered
//! once QuestDB acknowledged it.
//!
//! One sink is one ILP/HTTP sender, so one batch writer lane; a process runs several, so several
//! flushes are in flight. A batch is answered once QuestDB acknowledged its transaction (committed
//! to the WAL, fsynced in `cairo.commit.mode=sync`); it is recorded with [`Visibility`], which
//! makes the reads that could see it wait until QuestDB applied it.

use async_trait::async_trait;

use super::ids::IdBlocks;
use super::ilp::IlpWriter;
use super::visibility::Visibility;
use super::TableName;
use crate::domain::{ReadingId, StoredReading};
use crate::store::postgres::BoundedPool;
use crate::store::{ReadingSink, StoreError};

/// One batch writer lane's side of QuestDB.
#[derive(Debug)]
pub struct QuestDbSink {
    writer: IlpWriter,
    ids: IdBlocks,
    visibility: Visibility,
}

impl QuestDbSink {
    /// A sink writing to `table` through the ILP configuration `ilp`, taking ids from the
    /// PostgreSQL pool `ids` (used on the runtime this is called from) and recording what QuestDB
    /// acknowledged in `visibility`.
    pub fn new(
        ilp: String,
        table: TableName,
        ids: BoundedPool,
        visibility: Visibility,
    ) -> Result<Self, StoreError> {
        Ok(Self {
            writer: IlpWriter::new(ilp, table),
            ids: IdBlocks::new(ids)?,
            visibility,
        })
    }
}

#[async_trait]
impl ReadingSink for QuestDbSink {
    async fn allocate_ids(&mut self, count: usize) -> Result<Vec<ReadingId>, StoreError> {
        self.ids.allocate(count).await
    }

    /// Blocks the lane's thread for the HTTP round trip; nothing else runs there.
    async fn write(&mut self, batch: &[StoredReading]) -> Result<(), StoreError> {
        self.writer.write(batch)?;
        self.visibility.acknowledged(batch);
        Ok(())
    }
}

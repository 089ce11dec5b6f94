//! [`ReadingSink`] on QuestDB: transactional ILP/HTTP flushes, ids from a PostgreSQL sequence.
//!
//! One sink is one ILP/HTTP sender, so one batch writer lane; a process runs several, so several
//! flushes are in flight. A batch is answered once QuestDB acknowledged its transaction (committed
//! to the WAL, fsynced in `cairo.commit.mode=sync`); it is recorded with [`Visibility`], which
//! makes the reads that could see it wait until QuestDB applied it.

use ::questdb::ingress::{Buffer, Sender, TimestampMicros};
use async_trait::async_trait;
use deadpool_postgres::Pool;

use super::visibility::Visibility;
use super::TableName;
use crate::domain::{ReadingId, StoredReading};
use crate::store::{ReadingSink, StoreError};

/// Ids per block taken from the `reading_ids` sequence (its `INCREMENT BY`).
const ID_BLOCK: u64 = 4096;

/// One batch writer lane's side of QuestDB.
pub struct QuestDbSink {
    ilp: String,
    table: TableName,
    sender: Option<Sender>,
    buffer: Option<Buffer>,
    ids: Pool,
    next: u64,
    end: u64,
    visibility: Visibility,
    /// The server's runtime: PG-wire connections are driven there, never on the lane's own
    /// runtime, which blocks during ILP flushes (and has no IO driver).
    runtime: tokio::runtime::Handle,
}

impl std::fmt::Debug for QuestDbSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QuestDbSink")
            .field("table", &self.table)
            .finish_non_exhaustive()
    }
}

impl QuestDbSink {
    /// A sink writing to `table` through the ILP configuration `ilp`, taking ids from the
    /// PostgreSQL pool `ids` (used on the runtime this is called from) and recording what QuestDB
    /// acknowledged in `visibility`.
    pub fn new(
        ilp: String,
        table: TableName,
        ids: Pool,
        visibility: Visibility,
    ) -> Result<Self, StoreError> {
        let runtime = tokio::runtime::Handle::try_current()
            .map_err(|_| StoreError::Config("the QuestDB sink needs a runtime".into()))?;
        Ok(Self {
            ilp,
            table,
            sender: None,
            buffer: None,
            ids,
            next: 0,
            end: 0,
            visibility,
            runtime,
        })
    }

    fn fill(&mut self, batch: &[StoredReading]) -> Result<(), StoreError> {
        let sender = match &mut self.sender {
            Some(sender) => sender,
            None => self.sender.insert(Sender::from_conf(&self.ilp)?),
        };
        let buffer = self.buffer.get_or_insert_with(|| sender.new_buffer());
        buffer.clear();
        for row in batch {
            let reading = &row.reading;
            buffer
                .table(self.table.as_str())?
                .symbol("device", row.device.to_string())?
                .symbol("pms_provider", &reading.pms_provider)?
                .symbol("temperature_provider", &reading.temperature_provider)?;
            if let Some(location) = &reading.location {
                buffer.symbol("location_provider", &location.provider)?;
            }
            let id = i64::try_from(row.id.get()).unwrap_or(i64::MAX);
            // The upsert key with `at` and `device`: one row per `measured_at`, else per receipt.
            let dedup = if reading.measured_at.is_some() { 0 } else { id };
            buffer.column_i64("id", id)?.column_i64("dedup", dedup)?;
            for (measure, value) in reading.values.iter() {
                if measure.is_integer() {
                    buffer.column_i64(measure.name(), value as i64)?;
                } else {
                    buffer.column_f64(measure.name(), value)?;
                }
            }
            if let Some(location) = &reading.location {
                buffer
                    .column_f64("lat", location.lat)?
                    .column_f64("lon", location.lon)?;
            }
            buffer.at(TimestampMicros::new(row.at.timestamp_micros()))?;
        }
        Ok(())
    }

    fn flush(&mut self) -> Result<(), StoreError> {
        let (Some(sender), Some(buffer)) = (&mut self.sender, &self.buffer) else {
            return Err(StoreError::Config("the ILP sender was not set up".into()));
        };
        let flushed = sender.flush_and_keep_with_flags(buffer, true);
        if flushed.is_err() && sender.must_close() {
            self.sender = None;
            self.buffer = None;
        }
        Ok(flushed?)
    }
}

#[async_trait]
impl ReadingSink for QuestDbSink {
    async fn allocate_ids(&mut self, count: usize) -> Result<Vec<ReadingId>, StoreError> {
        let mut ids = Vec::with_capacity(count);
        while ids.len() < count {
            if self.next >= self.end {
                let pool = self.ids.clone();
                let start: i64 = self
                    .runtime
                    .spawn(async move {
                        let client = pool.get().await?;
                        let row = client
                            .query_one("SELECT nextval('reading_ids')", &[])
                            .await?;
                        Ok::<_, StoreError>(row.get(0))
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

    /// Blocks the lane's thread for the HTTP round trip; nothing else runs there.
    async fn write(&mut self, batch: &[StoredReading]) -> Result<(), StoreError> {
        self.fill(batch)?;
        self.flush()?;
        self.visibility
            .acknowledged(batch.iter().map(|row| row.device));
        Ok(())
    }
}

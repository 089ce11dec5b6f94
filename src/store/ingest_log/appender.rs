//! The sink's side of the room: append until durable, then hand the rows to the consumer.
//!
//! Why here and not in each sink: the embedded store's sink and the spool's did the same three
//! steps in the same order — write the batch to the log, register it with the group sync, and
//! once it is synced add its rows to the unconsumed set, tell the consumer, and only then answer
//! the uploads. That order is what makes a 201 mean durable and visible; kept once, a sink
//! cannot get it wrong.
//!
//! The rules:
//! - **Durable before acknowledged, and before seen.** `then` runs after the sync, and after the
//!   rows joined the unconsumed set and the consumer heard of them, so a read after a 201 finds
//!   the reading and neither a read nor the consumer ever finds one a power loss could take.
//! - **In append order.** The group sync runs its callbacks in the order batches were appended.
//! - **Drop drains.** Dropping the appender syncs and hands over everything appended before; a
//!   sink drops it before its consumer, so the consumer's last round finds every synced batch.

use std::fs::File;
use std::sync::Arc;

use super::ingestion::Ingestion;
use super::sync::GroupSync;
use super::unconsumed::UnconsumedRow;
use crate::domain::StoredReading;
use crate::store::StoreError;

/// Tells the consumer of a durable batch: the highest id among its rows (`None` for an empty
/// batch) and how many rows it had. Runs on the sync's thread.
pub(crate) type Notice = Box<dyn Fn(Option<i64>, usize) + Send + Sync>;

/// Appends batches to the log and hands them, once durable, to the unconsumed set and the
/// consumer.
#[derive(Debug)]
pub(crate) struct Appender<R: UnconsumedRow> {
    ingestion: Arc<Ingestion<R>>,
    sync: GroupSync,
    notice: Arc<NoticeBox>,
    maker: R::Maker,
    /// The receive time and segment of the last batch written, for its `when_durable`.
    written: Option<(i64, Arc<File>)>,
}

/// The consumer's notice, shared with the sync's callbacks.
struct NoticeBox(Notice);

impl std::fmt::Debug for NoticeBox {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str("Notice")
    }
}

impl<R: UnconsumedRow> Appender<R> {
    /// Starts the group sync for appends to `ingestion`; `notice` tells the consumer of each
    /// durable batch.
    pub(crate) fn start(ingestion: Arc<Ingestion<R>>, notice: Notice) -> Result<Self, StoreError> {
        Ok(Self {
            ingestion,
            sync: GroupSync::start()?,
            notice: Arc::new(NoticeBox(notice)),
            maker: R::Maker::default(),
            written: None,
        })
    }

    /// Appends `batch`, received now: written, not synced (blocks the calling thread for the
    /// write). A failure leaves nothing of it in the log.
    pub(crate) fn append(&mut self, batch: &[StoredReading]) -> Result<(), StoreError> {
        let received_at = chrono::Utc::now().timestamp_micros();
        let segment = self
            .ingestion
            .log()
            .append(batch, received_at, R::KEEPS_OWNER)?;
        self.written = Some((received_at, segment));
        Ok(())
    }

    /// Once the batch last appended is synced, its rows join the unconsumed set and the consumer
    /// hears of them, before `then` answers its uploads.
    pub(crate) fn when_durable(&mut self, batch: &[StoredReading], then: Box<dyn FnOnce() + Send>) {
        let Some((received_at, segment)) = self.written.take() else {
            // Only a written batch is handed here; one that was not is not answered 201.
            tracing::error!("a batch reported durable was not written");
            return;
        };
        // Made here, on the batch writer's thread, not under the set's lock on the sync's.
        let rows: Vec<Arc<R>> = batch
            .iter()
            .map(|stored| Arc::new(R::of(stored, received_at, &mut self.maker)))
            .collect();
        let ingestion = Arc::clone(&self.ingestion);
        let notice = Arc::clone(&self.notice);
        self.sync.appended(
            segment,
            Box::new(move || {
                // Ids grow with the batch, so its last row has the highest.
                let (through, count) = (rows.last().map(|row| row.id()), rows.len());
                ingestion.add(rows);
                (notice.0)(through, count);
                then();
            }),
        );
    }
}

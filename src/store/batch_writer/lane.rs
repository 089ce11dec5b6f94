//! A lane, and the writing of one batch: receipt ids, the write with its retries, and the
//! answers, sent only once the sink reports the batch durable.
//!
//! Why the answers wait for `when_durable` and not for the write: a sink may sync behind its
//! write (the ingestion log's group sync), and a 201 must never stand for data still to be lost.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;

use super::config::BatchConfig;
use super::intake::Upload;
use super::receipt::{Receipt, WriteError};
use super::syncing::Syncing;
use crate::domain::{ReadingId, StoredReading};
use crate::metrics::ServerMetrics;
use crate::store::{ReadingSink, StoreError};

/// A flush slower than this is logged: every upload of the batch waited that long.
const SLOW_FLUSH: Duration = Duration::from_millis(100);

/// One lane: writes each batch it is handed with its own sink, then reports itself idle.
pub(super) async fn lane(
    index: usize,
    mut batches: mpsc::Receiver<Vec<Upload>>,
    idle: mpsc::Sender<usize>,
    mut sink: Box<dyn ReadingSink>,
    config: BatchConfig,
    metrics: Arc<ServerMetrics>,
    syncing: Arc<Syncing>,
) {
    while let Some(mut batch) = batches.recv().await {
        flush(sink.as_mut(), &mut batch, &config, &metrics, &syncing).await;
        // The gathering loop has stopped once this fails; the lane still drains its queue.
        let _ = idle.send(index).await;
    }
}

/// Writes `batch` (retrying) and answers every upload in it.
pub(super) async fn flush(
    sink: &mut dyn ReadingSink,
    batch: &mut Vec<Upload>,
    config: &BatchConfig,
    metrics: &Arc<ServerMetrics>,
    syncing: &Arc<Syncing>,
) {
    let started = std::time::Instant::now();
    let count = batch.iter().map(|upload| upload.readings.len()).sum();
    let mut replies = Vec::with_capacity(batch.len());
    let outcome = match allocate(sink, count).await {
        Ok(ids) => {
            let mut ids = ids.into_iter();
            let mut rows = Vec::with_capacity(count);
            for upload in batch.drain(..) {
                replies.push((upload.reply, upload.readings.len()));
                for ((at, reading), id) in upload.readings.into_iter().zip(&mut ids) {
                    rows.push(StoredReading {
                        id,
                        device: upload.device,
                        owner: Some(Arc::clone(&upload.owner)),
                        at,
                        reading,
                    });
                }
            }
            write_with_retries(sink, &rows, config, metrics)
                .await
                .map(|()| rows)
        }
        Err(error) => {
            replies.extend(batch.drain(..).map(|upload| (upload.reply, 0)));
            Err(error)
        }
    };
    match outcome {
        Ok(rows) => {
            let receipts: Vec<Receipt> = rows
                .iter()
                .map(|row| Receipt {
                    id: row.id,
                    at: row.at,
                })
                .collect();
            let metrics = Arc::clone(metrics);
            let unsynced = syncing.written();
            sink.when_durable(
                &rows,
                Box::new(move || {
                    // Up to durability: every upload of the batch waited that long.
                    let elapsed = started.elapsed();
                    metrics.batch_committed(receipts.len(), elapsed);
                    if elapsed > SLOW_FLUSH {
                        tracing::warn!(
                            elapsed_ms = elapsed.as_millis() as u64,
                            rows = receipts.len(),
                            "slow batch flush"
                        );
                    }
                    let mut receipts = receipts.into_iter();
                    for (reply, taken) in replies {
                        // An upload whose client went away no longer listens; its rows are stored all the same.
                        let _ = reply.send(Ok(receipts.by_ref().take(taken).collect()));
                    }
                    drop(unsynced);
                }),
            );
        }
        Err(error) => {
            metrics.batch_failed();
            tracing::error!(error = %crate::telemetry::chain(&error), uploads = replies.len(), "batch not stored; uploads answered with 500");
            let failure = WriteError::Failed(crate::telemetry::chain(&error));
            for (reply, _) in replies {
                let _ = reply.send(Err(failure.clone()));
            }
        }
    }
}

/// `count` fresh receipt ids from the sink.
async fn allocate(sink: &mut dyn ReadingSink, count: usize) -> Result<Vec<ReadingId>, StoreError> {
    let ids = sink.allocate_ids(count).await?;
    if ids.len() == count {
        Ok(ids)
    } else {
        Err(StoreError::Corrupt(format!(
            "asked for {count} receipt ids, got {}",
            ids.len()
        )))
    }
}

async fn write_with_retries(
    sink: &mut dyn ReadingSink,
    rows: &[StoredReading],
    config: &BatchConfig,
    metrics: &ServerMetrics,
) -> Result<(), StoreError> {
    let mut backoff = config.retry_backoff;
    let mut attempt = 0;
    loop {
        match sink.write(rows).await {
            Ok(()) => return Ok(()),
            Err(error) if attempt < config.retries => {
                attempt += 1;
                metrics.flush_retried();
                tracing::warn!(error = %crate::telemetry::chain(&error), attempt, "batch write failed; retrying");
                tokio::time::sleep(backoff).await;
                backoff = backoff.saturating_mul(2);
            }
            Err(error) => return Err(error),
        }
    }
}

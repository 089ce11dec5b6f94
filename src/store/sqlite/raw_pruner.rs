//! Raw retention on the embedded store: drops folded raw readings measured before a cutoff, in
//! chunks, and keeps every rollup, so timelines and custom ranges answer for any period.
//!
//! Why chunks on the writer connection: uploads never touch it (they append to the ingestion
//! log), so a prune never holds one up; the fold does, and a chunk holds the connection for one
//! short transaction, so the fold waits at most that long. Rows are found per device through the
//! device index (`readings_by_device`, keyed by device then time), never by scanning `readings`.
//! Only folded rows are pruned; unconsumed ones before the cutoff (late uploads) are pruned once
//! folded, and the upload window refuses `measured_at` before the cutoff anyway.

use std::sync::Arc;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use rusqlite::params;

use super::{to_micros, Sqlite};
use crate::store::{RawPruner, StoreError};

/// The embedded store's pruner.
#[derive(Debug)]
pub struct SqliteRawPruner {
    db: Arc<Sqlite>,
}

impl SqliteRawPruner {
    /// Prunes `db`.
    pub fn new(db: Arc<Sqlite>) -> Self {
        Self { db }
    }
}

#[async_trait]
impl RawPruner for SqliteRawPruner {
    async fn prune_raw(&self, before: DateTime<Utc>, rows: usize) -> Result<usize, StoreError> {
        let db = Arc::clone(&self.db);
        let before = to_micros(before);
        tokio::task::spawn_blocking(move || {
            db.write_blocking(|connection| chunk(connection, before, rows))
        })
        .await?
    }
}

/// Drops at most `rows` folded readings measured before `before` (microseconds), in one
/// transaction; how many it dropped.
fn chunk(
    connection: &mut rusqlite::Connection,
    before: i64,
    rows: usize,
) -> Result<usize, StoreError> {
    let transaction = connection.transaction()?;
    let limit = i64::try_from(rows).unwrap_or(i64::MAX);
    let devices: Vec<i64> = transaction
        .prepare_cached("SELECT number FROM device_numbers")?
        .query_map([], |row| row.get(0))?
        .collect::<Result<_, _>>()?;
    let mut doomed: Vec<(i64, i64, i64, i64)> = Vec::new();
    {
        let mut old = transaction.prepare_cached(
            "SELECT at, dedup, id FROM readings_by_device WHERE device = ?1 AND at < ?2 \
             ORDER BY at LIMIT ?3",
        )?;
        for device in devices {
            let left = limit - i64::try_from(doomed.len()).unwrap_or(i64::MAX);
            if left <= 0 {
                break;
            }
            let found = old
                .query_map(params![device, before, left], |row| {
                    Ok((row.get(0)?, row.get(1)?, row.get(2)?))
                })?
                .collect::<Result<Vec<(i64, i64, i64)>, _>>()?;
            doomed.extend(
                found
                    .into_iter()
                    .map(|(at, dedup, id)| (device, at, dedup, id)),
            );
        }
    }
    {
        let mut raw = transaction.prepare_cached("DELETE FROM readings WHERE id = ?1")?;
        let mut index = transaction.prepare_cached(
            "DELETE FROM readings_by_device WHERE device = ?1 AND at = ?2 AND dedup = ?3",
        )?;
        for (device, at, dedup, id) in &doomed {
            raw.execute([id])?;
            index.execute(params![device, at, dedup])?;
        }
    }
    transaction.commit()?;
    Ok(doomed.len())
}

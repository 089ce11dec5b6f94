//! Readings copied into QuestDB by `airq migrate`: written as the batch writer's sink writes them
//! (same columns, same `dedup` key, so a batch written twice is stored once), then counted back.

use std::collections::BTreeMap;
use std::time::Duration;

use uuid::Uuid;

use super::ilp::IlpWriter;
use super::{QuestDbConfig, TableName};
use crate::domain::{DeviceUuid, StoredReading};
use crate::store::postgres::BoundedPool;
use crate::store::StoreError;

/// How long [`QuestDbImport::counts`] waits for QuestDB to apply what it acknowledged.
const APPLY_WAIT: Duration = Duration::from_secs(120);
/// How often it looks.
const APPLY_POLL: Duration = Duration::from_millis(50);

/// The readings table of a QuestDB, created if missing, written in batches.
pub struct QuestDbImport {
    writer: IlpWriter,
    reads: BoundedPool,
    table: TableName,
}

impl std::fmt::Debug for QuestDbImport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QuestDbImport")
            .field("table", &self.table)
            .finish_non_exhaustive()
    }
}

impl QuestDbImport {
    /// Connects to the QuestDB `config` names and creates its readings table when missing.
    pub async fn open(config: &QuestDbConfig) -> Result<Self, StoreError> {
        let (reads, _) = super::connect(config).await?;
        Ok(Self {
            writer: IlpWriter::new(config.ilp.clone(), config.table.clone()),
            reads,
            table: config.table.clone(),
        })
    }

    /// Writes `batch` as one ILP/HTTP transaction; returns once QuestDB acknowledged it
    /// (committed to the table's WAL). Blocks the calling thread for the round trip.
    pub fn write(&mut self, batch: &[StoredReading]) -> Result<(), StoreError> {
        self.writer.write(batch)
    }

    /// The readings per device with a receipt id up to `through`, once QuestDB applied every
    /// transaction it acknowledged (waiting at most [`APPLY_WAIT`]; past it, what is applied).
    pub async fn counts(&self, through: i64) -> Result<BTreeMap<DeviceUuid, u64>, StoreError> {
        let progress = format!(
            "SELECT writerTxn, sequencerTxn FROM wal_tables() WHERE name = '{}'",
            self.table
        );
        let started = tokio::time::Instant::now();
        loop {
            let applied = self
                .reads
                .run(async |client| {
                    let row = client.query_opt(progress.as_str(), &[]).await?;
                    Ok(match row {
                        Some(row) => row.try_get::<_, i64>(0)? >= row.try_get::<_, i64>(1)?,
                        None => true,
                    })
                })
                .await?;
            if applied || started.elapsed() >= APPLY_WAIT {
                break;
            }
            tokio::time::sleep(APPLY_POLL).await;
        }
        // `through` is an integer, spliced as one; the table name was parsed at the edge.
        let query = format!(
            "SELECT device, count() FROM {} WHERE id <= {through}",
            self.table
        );
        let rows = self
            .reads
            .run(async |client| Ok(client.query(query.as_str(), &[]).await?))
            .await?;
        let mut counts = BTreeMap::new();
        for row in rows {
            // A row written without a device (by something else than airq) is no device's.
            let Some(device) = row.try_get::<_, Option<String>>(0)? else {
                continue;
            };
            let device = Uuid::try_parse(&device)
                .map_err(|_| StoreError::Corrupt(format!("device {device:?} in QuestDB")))?;
            let count: i64 = row.try_get(1)?;
            counts.insert(
                DeviceUuid::from_uuid(device),
                u64::try_from(count).unwrap_or(0),
            );
        }
        Ok(counts)
    }
}

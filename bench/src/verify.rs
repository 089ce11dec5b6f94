//! The loss check: for every device, the number of 201s it received must equal the number of
//! readings the server stored for it.
//!
//! Two ways to count what is stored:
//! - `sqlite` (exact, the default when the file is there): the rows per device of `readings` in
//!   `<data-dir>/airq.db` plus those of the ingestion log (`<data-dir>/ingest/`) past the fold's
//!   watermark, read beside the running server: the log first, then `airq.db` in one read
//!   transaction (WAL lets a reader in while the server writes), so a row the fold moves in
//!   between is counted in `airq.db`, below its watermark. A 201 is sent only after its batch
//!   was synced to the log, so every acknowledged reading must already be there. A count taken
//!   before the run is subtracted, so a reused fleet is checked too.
//! - `questdb` (exact, the default when there is no SQLite file but `AIRQ_QUESTDB_PG` is set):
//!   the rows per device of the QuestDB table (`AIRQ_QUESTDB_TABLE`, default `readings`), over
//!   QuestDB's PG wire — the server's own variables, so one environment serves both. airq answers
//!   once QuestDB acknowledged a batch, before QuestDB applied it, so the count first waits until
//!   QuestDB applied every transaction its sequencer had numbered. With the spool
//!   (`AIRQ_QUESTDB_SPOOL`), airq answers once a reading is in its spool (`<data-dir>/ingest/`),
//!   so the count first waits until the running server has forwarded everything spooled.
//! - `api`: `GET /api/v1/devices/{id}/current` → `sample_count`. Exact only while every reading of
//!   the run lies in the last hour and the devices had no earlier readings (fresh fleet, run
//!   shorter than ~55 minutes, no `measured_at`); the way to check a deployment whose readings are
//!   not in the SQLite file.
//!
//! Stored > acknowledged is reported apart ("extra"): a request that timed out on the client may
//! still have been committed. Stored < acknowledged is loss.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use hyper::header::HeaderValue;
use hyper::StatusCode;
use rusqlite::{Connection, OpenFlags};
use serde_json::{json, Value};

use crate::cli::VerifyMode;
use crate::client::{Lane, Target};
use crate::fleet::Device;
use crate::BoxError;

/// The resolved way of counting.
#[derive(Debug, Clone)]
pub enum Counter {
    /// Rows in this database file.
    Sqlite(PathBuf),
    /// Rows in a QuestDB table.
    QuestDb {
        /// PG-wire URL.
        url: String,
        /// The table (checked to be a plain name).
        table: String,
        /// The server's spool, waited for until it is empty.
        spool: PathBuf,
    },
    /// Current snapshots through the API, with this owner token; after the server's spool, if it
    /// has one, is empty (a read waits only so long for spooled rows to reach QuestDB, and a
    /// backlog of batch uploads can take longer).
    Api {
        token: HeaderValue,
        spool: Option<PathBuf>,
    },
    /// No check.
    None,
}

impl Counter {
    /// The counter `mode` asks for.
    pub fn resolve(
        mode: VerifyMode,
        data_dir: &Path,
        token: &HeaderValue,
    ) -> Result<Self, BoxError> {
        let db = data_dir.join("airq.db");
        let questdb = std::env::var("AIRQ_QUESTDB_PG").ok();
        Ok(match (mode, questdb) {
            (VerifyMode::Sqlite, _) => Self::Sqlite(db),
            (VerifyMode::Auto, _) if db.exists() => Self::Sqlite(db),
            (VerifyMode::Auto | VerifyMode::Questdb, Some(url)) => {
                let table =
                    std::env::var("AIRQ_QUESTDB_TABLE").unwrap_or_else(|_| "readings".into());
                airq::config::TableName::parse(&table)?;
                Self::QuestDb {
                    url,
                    table,
                    spool: data_dir.to_owned(),
                }
            }
            (VerifyMode::Questdb, None) => return Err(
                "--verify questdb needs AIRQ_QUESTDB_PG (and AIRQ_QUESTDB_TABLE unless `readings`)"
                    .into(),
            ),
            (VerifyMode::Auto | VerifyMode::Api, _) => Self::Api {
                token: token.clone(),
                // Without `airq.db` the data dir's ingestion log is the QuestDB pair's spool.
                spool: (!db.exists()).then(|| data_dir.to_owned()),
            },
            (VerifyMode::None, _) => Self::None,
        })
    }

    /// The name in reports.
    pub fn name(&self) -> &'static str {
        match self {
            Self::Sqlite(_) => "sqlite",
            Self::QuestDb { .. } => "questdb",
            Self::Api { .. } => "api",
            Self::None => "none",
        }
    }

    /// Stored readings per device, in `devices` order; `None` when not checking.
    pub async fn count(
        &self,
        target: &Target,
        devices: &[Device],
    ) -> Result<Option<Vec<u64>>, BoxError> {
        match self {
            Self::Sqlite(db) => {
                let db = db.clone();
                let ids = devices
                    .iter()
                    .map(|device| uuid_bytes(&device.id))
                    .collect::<Result<Vec<_>, _>>()?;
                let counts = tokio::task::spawn_blocking(move || sqlite_counts(&db, &ids))
                    .await
                    .map_err(|error| error.to_string())??;
                Ok(Some(counts))
            }
            Self::QuestDb { url, table, spool } => {
                wait_for_empty_spool(spool).await?;
                Ok(Some(questdb_counts(url, table, devices).await?))
            }
            Self::Api { token, spool } => {
                if let Some(spool) = spool {
                    wait_for_empty_spool(spool).await?;
                }
                Ok(Some(api_counts(target, token, devices).await?))
            }
            Self::None => Ok(None),
        }
    }
}

/// The 16 bytes of a hyphenated UUID, as the readings table stores devices.
pub fn uuid_bytes(text: &str) -> Result<[u8; 16], BoxError> {
    let hex: Vec<u8> = text.bytes().filter(|byte| *byte != b'-').collect();
    if hex.len() != 32 {
        return Err(format!("{text:?} is not a UUID").into());
    }
    let mut bytes = [0u8; 16];
    for (slot, pair) in bytes.iter_mut().zip(hex.chunks(2)) {
        let pair = std::str::from_utf8(pair)?;
        *slot = u8::from_str_radix(pair, 16)?;
    }
    Ok(bytes)
}

fn sqlite_counts(db: &Path, ids: &[[u8; 16]]) -> Result<Vec<u64>, BoxError> {
    let connection = Connection::open_with_flags(
        db,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(|error| format!("opening {} read-only: {error}", db.display()))?;
    connection.busy_timeout(Duration::from_secs(10))?;
    // The log first: a row the fold moves into `readings` after this is in the later snapshot
    // of airq.db, below its watermark; one it moved before is there too.
    let data_dir = db.parent().unwrap_or(Path::new("."));
    let (logged, _) = airq::store::ingest_log::unconsumed(data_dir)?;
    connection.execute_batch("BEGIN")?;
    let folded: i64 = connection.query_row(
        "SELECT coalesce(max(value), 0) FROM counters WHERE name = 'folded_id'",
        [],
        |row| row.get(0),
    )?;
    let mut counts: HashMap<Vec<u8>, u64> = HashMap::new();
    let mut statement = connection.prepare(
        "SELECT n.device, count(*) FROM readings r \
             JOIN device_numbers n ON n.number = r.device GROUP BY r.device",
    )?;
    let mut rows = statement.query([])?;
    while let Some(row) = rows.next()? {
        let count: i64 = row.get(1)?;
        *counts.entry(row.get(0)?).or_default() += u64::try_from(count).unwrap_or(0);
    }
    for stored in logged {
        if i64::try_from(stored.id.get()).unwrap_or(i64::MAX) > folded {
            *counts
                .entry(stored.device.as_uuid().as_bytes().to_vec())
                .or_default() += 1;
        }
    }
    Ok(ids
        .iter()
        .map(|id| counts.get(id.as_slice()).copied().unwrap_or(0))
        .collect())
}

/// Longest wait for the server to forward its spool before counting.
const SPOOL_WAIT: Duration = Duration::from_secs(60);

/// Waits until the spool in the data directory `path` holds no readings its server has not
/// forwarded (at once when there is no spool).
async fn wait_for_empty_spool(path: &Path) -> Result<(), BoxError> {
    let started = std::time::Instant::now();
    loop {
        let path = path.to_owned();
        let rows = tokio::task::spawn_blocking(move || airq::store::ingest_log::unconsumed(&path))
            .await
            .map_err(|error| error.to_string())??
            .0
            .len();
        if rows == 0 {
            return Ok(());
        }
        if started.elapsed() > SPOOL_WAIT {
            return Err(format!(
                "the spool still holds {rows} readings after {} s",
                SPOOL_WAIT.as_secs()
            )
            .into());
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Longest wait for QuestDB to apply what it acknowledged before counting.
const QUESTDB_APPLY_WAIT: Duration = Duration::from_secs(60);

async fn questdb_counts(url: &str, table: &str, devices: &[Device]) -> Result<Vec<u64>, BoxError> {
    let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .map_err(|error| format!("QuestDB PG wire at {url}: {error}"))?;
    let driver = tokio::spawn(connection);
    let progress =
        format!("SELECT writerTxn, sequencerTxn FROM wal_tables() WHERE name = '{table}'");
    let started = std::time::Instant::now();
    let mut goal = None;
    while let Some(row) = client.query_opt(progress.as_str(), &[]).await? {
        let writer: Option<i64> = row.try_get(0)?;
        let sequencer: Option<i64> = row.try_get(1)?;
        let goal = *goal.get_or_insert(sequencer.unwrap_or(0));
        if writer.unwrap_or(0) >= goal {
            break;
        }
        if started.elapsed() > QUESTDB_APPLY_WAIT {
            return Err(format!(
                "QuestDB did not apply {table}'s WAL within {} s",
                QUESTDB_APPLY_WAIT.as_secs()
            )
            .into());
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let stored: std::collections::HashMap<String, i64> = client
        .query(format!("SELECT device, count() FROM {table}").as_str(), &[])
        .await?
        .iter()
        .map(|row| Ok((row.try_get(0)?, row.try_get(1)?)))
        .collect::<Result<_, tokio_postgres::Error>>()?;
    drop(client);
    let _ = driver.await;
    Ok(devices
        .iter()
        .map(|device| {
            stored
                .get(&device.id)
                .map_or(0, |count| u64::try_from(*count).unwrap_or(0))
        })
        .collect())
}

async fn api_counts(
    target: &Target,
    token: &HeaderValue,
    devices: &[Device],
) -> Result<Vec<u64>, BoxError> {
    let ids: Arc<Vec<String>> = Arc::new(devices.iter().map(|d| d.id.clone()).collect());
    let next = Arc::new(AtomicUsize::new(0));
    let workers: Vec<_> = (0..8)
        .map(|_| {
            let ids = Arc::clone(&ids);
            let next = Arc::clone(&next);
            let target = target.clone();
            let token = token.clone();
            tokio::spawn(async move {
                let mut lane = Lane::new(target.addr);
                let mut found = Vec::new();
                loop {
                    let index = next.fetch_add(1, Ordering::Relaxed);
                    let Some(id) = ids.get(index) else {
                        return Ok::<_, String>(found);
                    };
                    let path = format!("/api/v1/devices/{id}/current");
                    let answer = lane
                        .send(target.get(&path, Some(&token)), Duration::from_secs(30))
                        .await
                        .map_err(|failure| format!("{path}: {}", failure.name()))?;
                    let count = match answer.status {
                        StatusCode::OK => serde_json::from_slice::<Value>(&answer.body)
                            .ok()
                            .and_then(|value| value["data"]["sample_count"].as_u64())
                            .ok_or_else(|| format!("{path}: no sample_count"))?,
                        StatusCode::NOT_FOUND => 0,
                        status => return Err(format!("{path}: {status}")),
                    };
                    found.push((index, count));
                }
            })
        })
        .collect();
    let mut counts = vec![0u64; ids.len()];
    for worker in workers {
        for (index, count) in worker.await.map_err(|error| error.to_string())?? {
            counts[index] = count;
        }
    }
    Ok(counts)
}

/// The comparison of acknowledged and stored readings.
#[derive(Debug, Clone)]
pub struct Verdict {
    method: &'static str,
    devices: usize,
    acknowledged: u64,
    stored: u64,
    lost_devices: usize,
    lost_readings: u64,
    extra_devices: usize,
    extra_readings: u64,
}

impl Verdict {
    /// Compares per device: `stored[i] - before[i]` against `acked[i]`.
    pub fn compare(method: &'static str, acked: &[u64], before: &[u64], after: &[u64]) -> Self {
        let mut verdict = Self {
            method,
            devices: acked.len(),
            acknowledged: 0,
            stored: 0,
            lost_devices: 0,
            lost_readings: 0,
            extra_devices: 0,
            extra_readings: 0,
        };
        for (index, &acked) in acked.iter().enumerate() {
            let stored = after
                .get(index)
                .copied()
                .unwrap_or(0)
                .saturating_sub(before.get(index).copied().unwrap_or(0));
            verdict.acknowledged += acked;
            verdict.stored += stored;
            if stored < acked {
                verdict.lost_devices += 1;
                verdict.lost_readings += acked - stored;
            } else if stored > acked {
                verdict.extra_devices += 1;
                verdict.extra_readings += stored - acked;
            }
        }
        verdict
    }

    /// No acknowledged reading is missing.
    pub fn passed(&self) -> bool {
        self.lost_readings == 0
    }

    /// For reports.
    pub fn to_json(&self) -> Value {
        json!({
            "method": self.method,
            "devices": self.devices,
            "acknowledged": self.acknowledged,
            "stored": self.stored,
            "lost_devices": self.lost_devices,
            "lost_readings": self.lost_readings,
            "extra_devices": self.extra_devices,
            "extra_readings": self.extra_readings,
            "passed": self.passed(),
        })
    }

    /// For a person.
    pub fn render(&self) -> String {
        format!(
            "loss check ({}): {} devices, {} acknowledged, {} stored, {} lost on {} devices, {} extra on {} devices => {}",
            self.method,
            self.devices,
            self.acknowledged,
            self.stored,
            self.lost_readings,
            self.lost_devices,
            self.extra_readings,
            self.extra_devices,
            if self.passed() { "ZERO LOSS" } else { "LOSS" },
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uuid_text_becomes_its_bytes() {
        let bytes = uuid_bytes("00112233-4455-6677-8899-aabbccddeeff").expect("uuid");
        assert_eq!(bytes[0], 0x00);
        assert_eq!(bytes[15], 0xff);
        assert!(uuid_bytes("nope").is_err());
    }

    #[test]
    fn verdict_separates_loss_from_extra() {
        let verdict = Verdict::compare("test", &[3, 2, 1], &[0, 5, 0], &[3, 6, 2]);
        assert_eq!(verdict.lost_readings, 1);
        assert_eq!(verdict.extra_readings, 1);
        assert!(!verdict.passed());
    }
}

//! `airq migrate`: from the embedded store (a data directory) to the production pair.
//!
//! Two targets, as [`Plan::questdb`] says:
//! - **PostgreSQL + QuestDB**: devices and key hashes into PostgreSQL, every reading into QuestDB;
//!   the data directory is left as it was.
//! - **PostgreSQL alone**: devices and key hashes into PostgreSQL, readings stay in the data
//!   directory, which a server started with `--postgres-url` and no QuestDB reads them from.
//!
//! What it guarantees:
//! - **A consistent source.** It holds the data directory's lock for the whole run, so it refuses
//!   a directory a server runs on (stop the server first) and no server starts on it meanwhile.
//!   It first folds what the ingestion log still holds, as a server's start would: the copy
//!   starts from every acknowledged reading. An online snapshot was the alternative, rejected:
//!   readings uploaded after it would stay behind in a directory nobody serves any more.
//! - **Nothing but hashes.** A device's key is copied as the hash the store holds (rotated keys
//!   as they are now); no plaintext key exists to copy.
//! - **Idempotent and resumable.** Devices are upserted by id (one left equal is not written
//!   again). Readings are copied in receipt-id order, each keeping its receipt id and
//!   `measured_at`, in batches QuestDB deduplicates (on `at`, device and the receipt id, or
//!   `measured_at` alone for a keyed reading, as the batch writer writes them): a batch written
//!   twice is stored once. After each acknowledged batch its last id is recorded in PostgreSQL
//!   (`migration_progress`), so a run that was stopped resumes there; `--from-start` copies
//!   everything again. PostgreSQL's `reading_ids` sequence is moved past the copied ids before
//!   the first reading is copied, so the QuestDB pair never hands one of them out again.
//! - **Checked.** At the end every device of the data directory is read back from PostgreSQL and
//!   compared field by field and by key hash, and the readings of each device are counted in
//!   QuestDB (those with a receipt id up to the highest copied one: uploads made since to a
//!   server on the target do not count). Any difference fails the run with the list.

mod progress;

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use crate::data_dir::{DataDirError, DataDirLock, FORMAT_FILE};
use crate::domain::{Device, DeviceUuid, KeyHash, OwnerId};
use crate::store::ingest_log::SEGMENT_BYTES;
use crate::store::postgres::{self, MigrationTarget};
use crate::store::questdb::{QuestDbConfig, QuestDbImport};
use crate::store::sqlite::{ReadingCounts, Sqlite, SqliteSource};
use crate::store::StoreError;

use self::progress::Progress;

/// Readings per ILP/HTTP transaction: a few MB, one progress record each.
const READINGS_PER_BATCH: usize = 10_000;
/// Devices per upsert statement (one transaction each, within a call's time bound).
const DEVICES_PER_BATCH: usize = 1_000;
/// How long the embedded store waits for a lock (no other process holds it: the lock is ours).
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// What to migrate, and where to.
#[derive(Debug, Clone)]
pub struct Plan {
    /// The embedded data directory (no server may run on it).
    pub data_dir: PathBuf,
    /// The PostgreSQL database devices go to.
    pub postgres_url: String,
    /// The QuestDB readings go to; `None`: readings stay in the data directory.
    pub questdb: Option<QuestDbConfig>,
    /// Copy every reading again, whatever an earlier run recorded.
    pub from_start: bool,
}

/// Why a migration failed.
#[derive(Debug, thiserror::Error)]
pub enum MigrateError {
    /// The source is not a data directory this airq wrote.
    #[error("{0} is not an airq data directory (it has no {FORMAT_FILE}); --data-dir names the embedded server's data directory")]
    NotADataDir(PathBuf),
    /// The data directory holds no embedded database (a QuestDB replica's, say, with its spool).
    #[error("{0} holds no embedded database ({file}): only an embedded server's data directory is migrated", file = Sqlite::FILE)]
    NoEmbeddedStore(PathBuf),
    /// The data directory is in use, or in a format this airq does not read.
    #[error("the data directory cannot be migrated now (stop its server first: a migration holds the directory's lock)")]
    DataDir(#[source] DataDirError),
    /// The embedded store could not be opened or read.
    #[error("reading the embedded store")]
    Source(#[source] StoreError),
    /// PostgreSQL could not be reached, set up or written.
    #[error("PostgreSQL (--postgres-url, AIRQ_POSTGRES_URL)")]
    Postgres(#[source] StoreError),
    /// QuestDB could not be reached, set up or written.
    #[error("QuestDB (--questdb-pg, AIRQ_QUESTDB_PG; --questdb-ilp, AIRQ_QUESTDB_ILP)")]
    QuestDb(#[source] StoreError),
    /// The target does not hold what the source holds.
    #[error(
        "the count check failed; the target differs from the data directory:\n- {}\n(run again; \
         if a QuestDB table an earlier run filled lost readings since, with --from-start)",
        .0.join("\n- ")
    )]
    Mismatch(Vec<String>),
}

/// Where the readings are after a migration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Readings {
    /// Copied into a QuestDB table.
    Copied {
        /// The table.
        table: String,
        /// Readings in the data directory.
        source: u64,
        /// Readings of the data directory's devices in QuestDB, with a receipt id up to `through`.
        target: u64,
        /// Readings this run copied (fewer than `source` when it resumed an earlier one).
        copied: u64,
        /// The highest receipt id in the data directory.
        through: i64,
    },
    /// Left in the data directory, served from there by a server with `--postgres-url` alone.
    Stay {
        /// Readings in the data directory.
        count: u64,
    },
}

/// What a migration did and found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Report {
    /// Devices in the data directory.
    pub devices: u64,
    /// Devices this run inserted into PostgreSQL or brought up to date there.
    pub devices_written: u64,
    /// Devices found in PostgreSQL equal to the data directory's, key hash included.
    pub devices_matching: u64,
    /// Where the readings are.
    pub readings: Readings,
}

/// Migrates as `plan` says; the run's report, or why it failed (the count check's differences
/// included).
pub async fn run(plan: &Plan) -> Result<Report, MigrateError> {
    if !plan.data_dir.join(FORMAT_FILE).is_file() {
        return Err(MigrateError::NotADataDir(plan.data_dir.clone()));
    }
    // A QuestDB replica's spool is an ingestion log too: opened as the embedded store's, its
    // readings would be folded into a new database and dropped from the spool.
    if !plan.data_dir.join(Sqlite::FILE).is_file() {
        return Err(MigrateError::NoEmbeddedStore(plan.data_dir.clone()));
    }
    let lock = DataDirLock::acquire(&plan.data_dir).map_err(MigrateError::DataDir)?;
    lock.check_format(true).map_err(MigrateError::DataDir)?;
    let data_dir = plan.data_dir.clone();
    // Opening folds the log (threads of its own, joined): off the runtime's workers. Nothing is
    // appended, so the segment size is only the log's default.
    let source = tokio::task::spawn_blocking(move || {
        SqliteSource::open(&data_dir, BUSY_TIMEOUT, SEGMENT_BYTES)
    })
    .await
    .map_err(|error| MigrateError::Source(StoreError::Task(error)))?
    .map_err(MigrateError::Source)?;
    let (pool, _) = postgres::connect(&plan.postgres_url)
        .await
        .map_err(MigrateError::Postgres)?;
    let target = MigrationTarget::new(pool);

    let devices = source.devices().await.map_err(MigrateError::Source)?;
    let devices_written = copy_devices(&devices, &target).await?;
    let counts = source
        .reading_counts()
        .await
        .map_err(MigrateError::Source)?;
    let (readings, mut differences) = match &plan.questdb {
        Some(questdb) => {
            copy_readings(plan, questdb, (&source, &devices), &target, &counts).await?
        }
        None => (
            Readings::Stay {
                count: counts.total(),
            },
            Vec::new(),
        ),
    };
    let (devices_matching, device_differences) = check_devices(&devices, &target).await?;
    differences.splice(0..0, device_differences);
    // The store closes before the lock is let go, as at a server's stop.
    drop(source);
    drop(lock);
    if !differences.is_empty() {
        return Err(MigrateError::Mismatch(differences));
    }
    Ok(Report {
        devices: u64::try_from(devices.len()).unwrap_or(u64::MAX),
        devices_written,
        devices_matching,
        readings,
    })
}

/// Upserts the devices in batches; how many were inserted or changed.
async fn copy_devices(
    devices: &[(Device, KeyHash)],
    target: &MigrationTarget,
) -> Result<u64, MigrateError> {
    let mut progress = Progress::start("devices", u64::try_from(devices.len()).unwrap_or(0));
    let mut written = 0;
    for batch in devices.chunks(DEVICES_PER_BATCH) {
        written += target
            .upsert_devices(batch)
            .await
            .map_err(MigrateError::Postgres)?;
        progress.advance(u64::try_from(batch.len()).unwrap_or(0));
    }
    progress.finish();
    Ok(written)
}

/// Copies the readings past the recorded progress into QuestDB, each with its device's owner
/// (of `devices`), and counts them there; where the readings are, and the differences of the
/// count check.
async fn copy_readings(
    plan: &Plan,
    questdb: &QuestDbConfig,
    (source, devices): (&SqliteSource, &[(Device, KeyHash)]),
    target: &MigrationTarget,
    counts: &ReadingCounts,
) -> Result<(Readings, Vec<String>), MigrateError> {
    target
        .reserve_reading_ids(counts.through)
        .await
        .map_err(MigrateError::Postgres)?;
    let mut import = QuestDbImport::open(questdb)
        .await
        .map_err(MigrateError::QuestDb)?;
    let key = progress_key(&plan.data_dir, questdb);
    let mut after = if plan.from_start {
        0
    } else {
        target
            .progress(&key)
            .await
            .map_err(MigrateError::Postgres)?
    };
    let remaining = source
        .count_after(after)
        .await
        .map_err(MigrateError::Source)?;
    let owners: HashMap<DeviceUuid, Arc<OwnerId>> = devices
        .iter()
        .map(|(device, _)| (device.id, Arc::new(device.owner.clone())))
        .collect();
    let mut progress = Progress::start("readings", remaining);
    let mut copied = 0;
    loop {
        let mut batch = source
            .readings_after(after, READINGS_PER_BATCH)
            .await
            .map_err(MigrateError::Source)?;
        for reading in &mut batch {
            reading.owner = owners.get(&reading.device).cloned();
        }
        let Some(last) = batch.last().map(|reading| reading.id.get()) else {
            break;
        };
        // The ILP/HTTP round trip blocks; the runtime keeps its other workers meanwhile.
        tokio::task::block_in_place(|| import.write(&batch)).map_err(MigrateError::QuestDb)?;
        after = i64::try_from(last).unwrap_or(i64::MAX);
        target
            .record_progress(&key, after)
            .await
            .map_err(MigrateError::Postgres)?;
        let count = u64::try_from(batch.len()).unwrap_or(0);
        copied += count;
        progress.advance(count);
    }
    progress.finish();
    let stored = import
        .counts(counts.through)
        .await
        .map_err(MigrateError::QuestDb)?;
    let differences = reading_differences(&counts.per_device, &stored);
    Ok((
        Readings::Copied {
            table: questdb.table.to_string(),
            source: counts.total(),
            target: counts
                .per_device
                .keys()
                .map(|device| stored.get(device).copied().unwrap_or(0))
                .sum(),
            copied,
            through: counts.through,
        },
        differences,
    ))
}

/// The name of a copy's progress row: the data directory, the table, and a hash of the QuestDB
/// URLs (which may hold a password, so never stored as they are).
fn progress_key(data_dir: &Path, questdb: &QuestDbConfig) -> String {
    let directory = std::fs::canonicalize(data_dir).unwrap_or_else(|_| data_dir.to_owned());
    let urls = blake3::hash(format!("{}\n{}", questdb.pg, questdb.ilp).as_bytes());
    format!(
        "{} -> {} at {}",
        directory.display(),
        questdb.table,
        &urls.to_hex()[..16]
    )
}

/// The devices of the data directory as PostgreSQL holds them: how many are equal there, key
/// hash included, and a line for each that is not.
async fn check_devices(
    devices: &[(Device, KeyHash)],
    target: &MigrationTarget,
) -> Result<(u64, Vec<String>), MigrateError> {
    let mut stored: BTreeMap<DeviceUuid, (Device, KeyHash)> = BTreeMap::new();
    for batch in devices.chunks(DEVICES_PER_BATCH) {
        let ids: Vec<DeviceUuid> = batch.iter().map(|(device, _)| device.id).collect();
        for (device, hash) in target.devices(&ids).await.map_err(MigrateError::Postgres)? {
            stored.insert(device.id, (device, hash));
        }
    }
    let mut matching = 0;
    let mut differences = Vec::new();
    for (device, hash) in devices {
        match stored.get(&device.id) {
            None => differences.push(format!("device {} is not in PostgreSQL", device.id)),
            Some((found, _)) if found != device => {
                differences.push(format!("device {} differs in PostgreSQL", device.id));
            }
            Some((_, found)) if found != hash => {
                differences.push(format!(
                    "device {} has another key hash in PostgreSQL",
                    device.id
                ));
            }
            Some(_) => matching += 1,
        }
    }
    Ok((matching, differences))
}

/// A line for each device whose readings in the target are not as many as in the source.
fn reading_differences(
    source: &BTreeMap<DeviceUuid, u64>,
    target: &BTreeMap<DeviceUuid, u64>,
) -> Vec<String> {
    source
        .iter()
        .filter_map(|(device, &count)| {
            let found = target.get(device).copied().unwrap_or(0);
            (found != count).then(|| {
                format!(
                    "device {device}: {count} readings in the data directory, {found} in QuestDB"
                )
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn device(n: u128) -> DeviceUuid {
        DeviceUuid::from_uuid(uuid::Uuid::from_u128(n))
    }

    #[test]
    fn every_device_whose_count_differs_is_named_and_no_other() {
        let source = BTreeMap::from([(device(1), 3), (device(2), 5), (device(3), 1)]);
        // Device 4's readings are another deployment's: not the migration's to count.
        let target = BTreeMap::from([(device(1), 3), (device(2), 4), (device(4), 9)]);
        let differences = reading_differences(&source, &target);
        assert_eq!(differences.len(), 2, "{differences:?}");
        assert!(differences[0].contains(&device(2).to_string()));
        assert!(differences[0].contains("5 readings in the data directory, 4 in QuestDB"));
        assert!(differences[1].contains("1 readings in the data directory, 0 in QuestDB"));
    }

    #[test]
    fn a_progress_key_tells_targets_apart_and_holds_no_url() {
        let config = |pg: &str| QuestDbConfig {
            ilp: "http::addr=127.0.0.1:9000;".into(),
            pg: pg.into(),
            table: crate::store::questdb::TableName::parse("readings").expect("a table name"),
            senders: 1,
            spool: false,
        };
        let dir = Path::new("/nonexistent/airq-data");
        let one = progress_key(dir, &config("postgres://admin:secret@db-1:8812/qdb"));
        let other = progress_key(dir, &config("postgres://admin:secret@db-2:8812/qdb"));
        assert_ne!(one, other);
        assert!(one.starts_with("/nonexistent/airq-data -> readings at "));
        assert!(!one.contains("secret"));
    }
}

//! Rows that earlier versions left where the log did not look for them, adopted at start.
//!
//! - `ingest.db`: the ingestion log was a SQLite file in earlier versions (the embedded store's
//!   and the QuestDB spool's alike). Its rows are appended to the log, with its id
//!   counter, synced, and only then is the file deleted.
//! - `readings` past the watermark in `airq.db`: before any ingestion log, uploads were appended
//!   there and folded in place. They are appended to the log, synced, then deleted there.
//!
//! A crash between the append and the deletion adopts nothing twice: only rows with ids past the
//! log's highest are taken.

use std::path::Path;

use rusqlite::{params, Connection};

use super::{next_id_counter, Entry, IngestLog, RAW_COLUMNS};
use crate::domain::measure::COUNT;
use crate::domain::{DeviceUuid, Location, Reading, ReadingId, StoredReading};
use crate::store::sqlite::{from_micros, read_device, read_values};
use crate::store::StoreError;

/// The file of the SQLite ingestion log of earlier versions.
const LEGACY_FILE: &str = "ingest.db";
/// Rows adopted per append.
const ROWS_PER_APPEND: i64 = 4_096;

/// Adopts the rows of an `ingest.db` in `data_dir` into `log`, handing `each` every entry
/// appended, then deletes the file.
pub(crate) fn adopt_legacy_log(
    data_dir: &Path,
    log: &IngestLog,
    mut each: impl FnMut(Entry),
) -> Result<(), StoreError> {
    let path = data_dir.join(LEGACY_FILE);
    if !path.exists() {
        return Ok(());
    }
    let connection = Connection::open(&path)?;
    let adopted = adopt(&connection, "log", log.highest(), log, &mut each)?;
    if let Some(next) = next_id_counter(&connection)?.filter(|&next| next - 1 > log.highest()) {
        each(log.reserve_ids(next - 1)?);
    }
    log.sync()?;
    drop(connection);
    for suffix in ["", "-wal", "-shm"] {
        let file = data_dir.join(format!("{LEGACY_FILE}{suffix}"));
        match std::fs::remove_file(&file) {
            Err(source) if source.kind() != std::io::ErrorKind::NotFound => {
                return Err(StoreError::File { path: file, source })
            }
            _ => {}
        }
    }
    if adopted > 0 {
        tracing::info!(
            rows = adopted,
            "rows of the earlier ingestion log (ingest.db) moved into the new one"
        );
    }
    Ok(())
}

/// Adopts the rows of `readings` in `airq.db` past the watermark `folded` into `log`, handing
/// `each` every entry appended, then deletes them there.
pub(in crate::store::sqlite) fn adopt_unlogged(
    writer: &Connection,
    folded: i64,
    log: &IngestLog,
    mut each: impl FnMut(Entry),
) -> Result<(), StoreError> {
    let adopted = adopt(
        writer,
        "main.readings",
        folded.max(log.highest()),
        log,
        &mut each,
    )?;
    if adopted > 0 {
        log.sync()?;
    }
    // Also when a start adopted them and stopped before this.
    writer.execute("DELETE FROM main.readings WHERE id > ?1", [folded])?;
    if adopted > 0 {
        tracing::info!(rows = adopted, "unfolded rows moved into the ingestion log");
    }
    Ok(())
}

/// Appends the rows of `table` with ids past `after` to `log`, in id order; answers how many.
fn adopt(
    connection: &Connection,
    table: &str,
    after: i64,
    log: &IngestLog,
    each: &mut impl FnMut(Entry),
) -> Result<usize, StoreError> {
    let mut statement = connection.prepare(&format!(
        "SELECT {} FROM {table} WHERE id > ?1 ORDER BY id LIMIT ?2",
        *RAW_COLUMNS
    ))?;
    let mut after = after;
    let mut adopted = 0;
    loop {
        let rows: Vec<(StoredReading, i64)> = statement
            .query_map(params![after, ROWS_PER_APPEND], raw_row)?
            .collect::<Result<Result<_, _>, _>>()??;
        let Some((last, _)) = rows.last() else {
            return Ok(adopted);
        };
        after = i64::try_from(last.id.get()).unwrap_or(i64::MAX);
        log.append_each(
            rows.iter()
                .map(|(stored, received_at)| (stored, *received_at)),
        )?;
        adopted += rows.len();
        for (stored, received_at) in rows {
            each(Entry::Reading {
                stored,
                received_at,
            });
        }
    }
}

/// A row of [`RAW_COLUMNS`] as the reading it was stored as, and its receive time.
fn raw_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<Result<(StoredReading, i64), StoreError>> {
    let id: i64 = row.get(0)?;
    let Some(device) = read_device(row, 1)? else {
        return Ok(Err(StoreError::Corrupt(format!(
            "row {id} names no device"
        ))));
    };
    let at = match from_micros(row.get(2)?) {
        Ok(at) => at,
        Err(error) => return Ok(Err(error)),
    };
    let received_at: i64 = row.get(3)?;
    let keyed = row.get::<_, i64>(4)? != 0;
    let values = read_values(row, 5)?;
    let next = 5 + COUNT;
    let lat: Option<f64> = row.get(next + 2)?;
    let lon: Option<f64> = row.get(next + 3)?;
    let provider: Option<String> = row.get(next + 4)?;
    let Some(id) = u64::try_from(id).ok().and_then(ReadingId::new) else {
        return Ok(Err(StoreError::Corrupt(format!(
            "row id {id} is out of range"
        ))));
    };
    Ok(Ok((
        StoredReading {
            id,
            device: DeviceUuid::from_uuid(uuid::Uuid::from_bytes(device)),
            at,
            reading: Reading {
                values,
                pms_provider: row.get(next)?,
                temperature_provider: row.get(next + 1)?,
                location: match (lat, lon, provider) {
                    (Some(lat), Some(lon), Some(provider)) => Some(Location { lat, lon, provider }),
                    _ => None,
                },
                measured_at: keyed.then_some(at),
            },
        },
        received_at,
    )))
}

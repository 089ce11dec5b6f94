//! What reads add to the folded tables: a read's view of the unconsumed rows, the ones the fold
//! has not reached yet.
//!
//! Why a view and not the rows alone: a read must describe one moment, so the rows are taken as
//! of the same read transaction as the folded tables (past the watermark it reads); and a
//! replaced reading must never count twice, so of the unconsumed rows of the asked devices a
//! keyed row that a later one replaces is left out, and a folded reading that an unconsumed
//! keyed row replaces is listed, so a read takes it away from the folded sums.

use std::collections::HashSet;
use std::sync::Arc;

use rusqlite::{params, Connection, OptionalExtension};

use super::{folded_id, LoggedRow, SqliteIngestion};
use crate::domain::Measurements;
use crate::store::sqlite::dictionary::device_number;
use crate::store::sqlite::packed_reading::read_values;
use crate::store::StoreError;

/// A folded reading that an unconsumed one replaces.
#[derive(Debug, Clone)]
pub(crate) struct Replaced {
    /// Its device.
    pub(crate) device: [u8; 16],
    /// Its time, microseconds.
    pub(crate) at: i64,
    /// Its values.
    pub(crate) values: Measurements,
}

/// The unconsumed part of the asked devices' readings.
#[derive(Debug, Default)]
pub(crate) struct UnconsumedView {
    /// Unconsumed rows that count (oldest first).
    pub(crate) rows: Vec<Arc<LoggedRow>>,
    /// Folded readings that no longer count.
    pub(crate) replaced: Vec<Replaced>,
}

impl UnconsumedView {
    /// The view of `devices`, as of `connection`'s current transaction (whose first read this
    /// is).
    pub(crate) fn read(
        connection: &Connection,
        ingestion: &SqliteIngestion,
        devices: &[[u8; 16]],
    ) -> Result<Self, StoreError> {
        let rows = Self::rows(connection, ingestion, devices)?;
        if rows.is_empty() {
            return Ok(Self::default());
        }
        let keys: HashSet<([u8; 16], i64)> = rows
            .iter()
            .filter(|row| row.keyed)
            .map(|row| (row.device, row.at))
            .collect();
        let mut find = connection.prepare_cached(&format!(
            "SELECT r.body FROM readings_by_device b JOIN readings r ON r.id = b.id \
             WHERE b.device = {} AND b.at = ?2 AND b.dedup = 0",
            device_number("?1")
        ))?;
        let mut replaced = Vec::new();
        for (device, at) in keys {
            let values = find
                .query_row(params![device.as_slice(), at], |row| read_values(row, 0))
                .optional()?;
            if let Some(values) = values {
                replaced.push(Replaced { device, at, values });
            }
        }
        Ok(Self { rows, replaced })
    }

    /// Whether an unconsumed row replaces `device`'s folded reading at `at`.
    pub(crate) fn replaces(&self, device: [u8; 16], at: i64) -> bool {
        self.replaced
            .iter()
            .any(|replaced| replaced.device == device && replaced.at == at)
    }

    /// The unconsumed rows of `devices` that count, oldest first: of keyed rows with the same
    /// (device, time), only the latest. Must be the first read of `connection`'s transaction.
    pub(crate) fn rows(
        connection: &Connection,
        ingestion: &SqliteIngestion,
        devices: &[[u8; 16]],
    ) -> Result<Vec<Arc<LoggedRow>>, StoreError> {
        ingestion.view(|| Ok(folded_id(connection)?), devices)
    }
}

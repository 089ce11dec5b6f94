//! The raw export on the embedded store: pages of one device's readings, oldest first.
//!
//! Every reading has one key, the key of the device index: (time, `dedup`), `dedup` 0 for a
//! reading keyed by its `measured_at` and its receipt id otherwise — for folded readings in
//! `readings_by_device`, and computed the same way for unconsumed ones. Pages go by that key
//! (keyset pagination). Each page is one read transaction that reads the next folded rows in
//! key order and the device's unconsumed rows, and merges them: an unconsumed row takes the
//! place of the folded reading with its key (a replacement), so every reading is exported once,
//! as it is now. A reading folded between two pages keeps its key, so it is neither lost nor
//! repeated.

use std::collections::BTreeMap;
use std::sync::LazyLock;

use rusqlite::{params, Connection, Row};

use super::dictionary::device_number;
use super::ingest::{LoggedRow, SqliteIngestion, UnconsumedView};
use super::packed_reading::read_body;
use super::{from_micros, Sqlite};
use crate::domain::measure::COUNT;
use crate::domain::{Measure, RawReading};
use crate::store::StoreError;

/// Where a page starts: after this (time, `dedup`) key.
pub(super) type Cursor = (i64, i64);

/// The first cursor of an export starting at `start` (microseconds): before every key at
/// `start` (`dedup` is never negative).
pub(super) fn first_cursor(start: i64) -> Cursor {
    (start, -1)
}

/// `at, dedup, body` of folded readings (`b` the device index, `r` the row).
static FOLDED_PAGE: LazyLock<String> = LazyLock::new(|| {
    format!(
        "SELECT b.at, b.dedup, r.body \
         FROM readings_by_device b JOIN readings r ON r.id = b.id \
         WHERE b.device = {} AND b.at >= ?2 AND (b.at > ?2 OR b.dedup > ?3) AND b.at < ?4 \
         ORDER BY b.at, b.dedup LIMIT ?5",
        device_number("?1")
    )
});

/// The page of `device`'s readings after `after` and before `end` (microseconds): at most
/// `limit` readings, folded and unconsumed merged in key order, and the cursor of the next page
/// (`None` after the last). Runs in `db`'s one read transaction.
pub(super) async fn page(
    db: &std::sync::Arc<Sqlite>,
    device: [u8; 16],
    after: Cursor,
    end: i64,
    limit: usize,
) -> Result<(Vec<RawReading>, Option<Cursor>), StoreError> {
    let shared = std::sync::Arc::clone(db);
    db.read_snapshot(move |connection| {
        read_page(connection, shared.ingestion(), device, after, end, limit)
    })
    .await
}

/// Reads the unconsumed rows first: they must be the transaction's first read.
fn read_page(
    connection: &Connection,
    ingestion: &SqliteIngestion,
    device: [u8; 16],
    after: Cursor,
    end: i64,
    limit: usize,
) -> Result<(Vec<RawReading>, Option<Cursor>), StoreError> {
    let unconsumed = UnconsumedView::rows(connection, ingestion, &[device])?;
    let folded: Vec<(Cursor, RawReading)> = connection
        .prepare_cached(&FOLDED_PAGE)?
        .query_map(
            params![
                device.as_slice(),
                after.0,
                after.1,
                end,
                i64::try_from(limit).unwrap_or(i64::MAX)
            ],
            read_folded,
        )?
        .collect::<Result<Result<_, _>, _>>()??;
    // A full page ends at its last folded key; unconsumed rows after it belong to later pages.
    let bound = (folded.len() >= limit)
        .then(|| folded.last().map(|(key, _)| *key))
        .flatten();
    let mut candidates: Vec<(Cursor, &LoggedRow)> = unconsumed
        .iter()
        .map(|row| ((row.at, if row.keyed { 0 } else { row.id }), &**row))
        .filter(|(key, _)| *key > after && key.0 < end && bound.is_none_or(|bound| *key <= bound))
        .collect();
    // Only the `limit` first unconsumed keys can be among the page's `limit` first keys: the rest
    // are not turned into readings at all (a backlog may hold tens of thousands).
    let mut cut = false;
    if candidates.len() > limit && limit > 0 {
        candidates.select_nth_unstable_by_key(limit - 1, |(key, _)| *key);
        candidates.truncate(limit);
        cut = true;
    }
    let mut merged: BTreeMap<Cursor, RawReading> = BTreeMap::new();
    for (key, row) in candidates {
        let mut values = [None; COUNT];
        for measure in Measure::ALL {
            values[measure.index()] = Some(row.values[measure]);
        }
        let reading = RawReading {
            at: from_micros(row.at)?,
            values,
            position: row.location.as_ref().map(|(lat, lon, _)| (*lat, *lon)),
        };
        merged.insert(key, reading);
    }
    for (key, reading) in folded {
        // An unconsumed row with the same key replaces the folded reading.
        merged.entry(key).or_insert(reading);
    }
    // At most `limit` rows a page, unconsumed ones included: with a large backlog (up to the
    // fold's bound, 85,000 rows) a page of every unconsumed row held about 10 MB for each export
    // streaming; the next page starts after the last key kept, whichever kind it was.
    if cut || merged.len() > limit {
        let rows: Vec<(Cursor, RawReading)> = merged.into_iter().take(limit).collect();
        let next = rows.last().map(|(key, _)| *key);
        return Ok((rows.into_iter().map(|(_, reading)| reading).collect(), next));
    }
    Ok((merged.into_values().collect(), bound))
}

/// A folded row of [`FOLDED_PAGE`] with its key.
fn read_folded(row: &Row<'_>) -> rusqlite::Result<Result<(Cursor, RawReading), StoreError>> {
    let at: i64 = row.get(0)?;
    let dedup: i64 = row.get(1)?;
    let body = read_body(row, 2, at)?;
    Ok(from_micros(at).map(|time| {
        (
            (at, dedup),
            RawReading {
                at: time,
                values: Measure::ALL.map(|measure| Some(body.values[measure])),
                position: body.location.map(|(lat, lon, _)| (lat, lon)),
            },
        )
    }))
}

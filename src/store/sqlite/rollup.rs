//! Rollups: sums per device and time slot, so a bucket of any calendar reads a few rows instead
//! of every sample.
//!
//! Three resolutions: quarter hours answer any calendar bucket of any zone exactly (every offset
//! is a multiple of 15 minutes); UTC days answer the whole days inside a long bucket, so a month
//! costs about 30 rows per device instead of about 2,900; hours, ordered by hour of day before
//! day, answer the edges of days in zones whose midnight is not UTC's. A bucket whose edges are
//! not at UTC midnight takes the time between each edge and its nearest midnight, added or taken
//! away ([`cover`]), in whole hours where it can and quarter hours where it must: a Berlin day is
//! one day row and one hour row at each end, and since a year of 23:00 hours lies in one range
//! of the hour-of-day order, a year of Berlin days reads three ranges per device, not 367. The
//! hours cover past days only (through [`hours_through`], which trails the newest folded reading
//! by a day): the fold derives each day from its quarter hours once, when it has passed
//! ([`derive_passed_days`]), so live uploads do not pay for one more rollup row. A plan's buckets are contiguous, so all of them are
//! read with one range query per resolution and run ([`runs`], [`SlotSums`]), not one per bucket;
//! [`plan_reads`] picks hours or quarter hours by what a plan reads. The fold keeps every
//! resolution, adding what it folds and subtracting what a replacing reading took the place of.
//! A row holds its sample count and its sums, the latter packed into one BLOB ([`packed_sums`]).

use std::collections::{BTreeMap, HashMap};
use std::rc::Rc;
use std::sync::LazyLock;

use chrono::{DateTime, Utc};
use rusqlite::types::Value;
use rusqlite::{params, Connection};

use super::packed_sums;
use crate::domain::{Aggregate, Measurements};
use crate::store::StoreError;

/// A rollup resolution.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Rollup {
    Quarter,
    Day,
    /// Hours, slot `hour_of_day * 2^32 + day` (see `schema/sqlite/005_hour_of_day_rollups.sql`).
    HourOfDay,
}

/// Slots between one hour of day and the next in [`Rollup::HourOfDay`]: more than any day number.
const HOUR_OF_DAY_STRIDE: i64 = 1 << 32;
const HOUR: i64 = 3_600;
const DAY: i64 = 86_400;
const QUARTER: i64 = 900;

impl Rollup {
    pub(super) const ALL: [Rollup; 3] = [Rollup::Quarter, Rollup::Day, Rollup::HourOfDay];

    pub(super) fn table(self) -> &'static str {
        match self {
            Self::Quarter => "rollups_15m",
            Self::Day => "rollups_1d",
            Self::HourOfDay => "rollups_hour_of_day",
        }
    }

    /// The table of the same sums pooled over a set of devices (src/store/sqlite/pooled.rs).
    pub(super) fn pooled_table(self) -> &'static str {
        match self {
            Self::Quarter => "pooled_15m",
            Self::Day => "pooled_1d",
            Self::HourOfDay => "pooled_hour_of_day",
        }
    }

    /// The time one row covers.
    pub(super) fn seconds(self) -> i64 {
        match self {
            Self::Quarter => QUARTER,
            Self::Day => DAY,
            Self::HourOfDay => HOUR,
        }
    }

    pub(super) fn slot(self, at: DateTime<Utc>) -> i64 {
        let rows = at.timestamp().div_euclid(self.seconds());
        match self {
            Self::Quarter | Self::Day => rows,
            Self::HourOfDay => hour_of_day_slot(rows),
        }
    }
}

/// The [`Rollup::HourOfDay`] slot of the hour `hour` (hours since the epoch).
fn hour_of_day_slot(hour: i64) -> i64 {
    hour.rem_euclid(24) * HOUR_OF_DAY_STRIDE + hour.div_euclid(24)
}

/// A change to the sums of one slot: samples added (positive) or replaced (negative).
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Delta {
    pub(super) count: i64,
    pub(super) sums: Measurements,
}

impl Delta {
    /// Adds one sample (`sign` 1) or takes one away (`sign` −1).
    pub(super) fn add(&mut self, values: &Measurements, sign: i8) {
        self.count += i64::from(sign);
        for (measure, value) in values.iter() {
            self.sums[measure] += f64::from(sign) * value;
        }
    }
}

/// The counter naming the last UTC day whose hours are in [`Rollup::HourOfDay`].
const HOURS_THROUGH: &str = "hour_of_day_through";

/// The last UTC day (days since the epoch) whose hours [`Rollup::HourOfDay`] holds; before the
/// first (and in a database from before the rollup), −1.
pub(super) fn hours_through(connection: &Connection) -> rusqlite::Result<i64> {
    connection
        .prepare_cached("SELECT coalesce(max(value), -1) FROM counters WHERE name = ?1")?
        .query_row([HOURS_THROUGH], |row| row.get(0))
}

/// Derives the hours of every day before the one of `newest` (the newest folded reading, in
/// microseconds since the epoch) that [`Rollup::HourOfDay`] does not hold yet (it holds the days
/// through `hours_through`), from their quarter hours, and moves the counter there, in
/// `connection`'s transaction. Such a day has passed: the fold calls this after each chunk, once
/// `device_latest` names every device it folded, and the store at start, for databases written
/// before this rollup. Readings folded into a derived day later reach its hours through
/// [`Deltas`]. Device by device (`device_latest` has a row for every device with readings), so
/// each device is one index range of the quarter hours, not a scan of every device's year.
pub(super) fn derive_passed_days(
    connection: &Connection,
    hours_through: i64,
    newest: i64,
) -> Result<(), StoreError> {
    static HOUR_OF_DAY: LazyLock<String> =
        LazyLock::new(|| format!("((q.slot / 4) % 24) * {HOUR_OF_DAY_STRIDE} + q.slot / 96"));
    static DERIVE: LazyLock<String> = LazyLock::new(|| {
        format!(
            "INSERT INTO {hours} (device, slot, samples, sums) \
             SELECT q.device, {hour_of_day}, sum(q.samples), \
             {total}(q.sums) FROM device_latest d CROSS JOIN {quarters} q \
             ON q.device = d.device AND q.slot >= ?1 AND q.slot < ?2 \
             GROUP BY q.device, q.slot / 4",
            hours = Rollup::HourOfDay.table(),
            quarters = Rollup::Quarter.table(),
            hour_of_day = *HOUR_OF_DAY,
            total = packed_sums::TOTAL,
        )
    });
    // The same for every pooled set (src/store/sqlite/pooled.rs).
    static DERIVE_POOLED: LazyLock<String> = LazyLock::new(|| {
        format!(
            "INSERT INTO {hours} (pool, slot, samples, sums) \
             SELECT q.pool, {hour_of_day}, sum(q.samples), {total}(q.sums) \
             FROM pooled_sets s CROSS JOIN {quarters} q \
             ON q.pool = s.number AND q.slot >= ?1 AND q.slot < ?2 \
             GROUP BY q.pool, q.slot / 4",
            hours = Rollup::HourOfDay.pooled_table(),
            quarters = Rollup::Quarter.pooled_table(),
            hour_of_day = *HOUR_OF_DAY,
            total = packed_sums::TOTAL,
        )
    });
    let through = newest.div_euclid(DAY * 1_000_000) - 1;
    if through <= hours_through {
        return Ok(());
    }
    let quarters_per_day = DAY / QUARTER;
    let slots = (
        (hours_through + 1) * quarters_per_day,
        (through + 1) * quarters_per_day,
    );
    connection
        .prepare_cached(&DERIVE)?
        .execute(params![slots.0, slots.1])?;
    connection
        .prepare_cached(&DERIVE_POOLED)?
        .execute(params![slots.0, slots.1])?;
    connection
        .prepare_cached(
            "INSERT INTO counters (name, value) VALUES (?1, ?2) \
             ON CONFLICT (name) DO UPDATE SET value = excluded.value",
        )?
        .execute(params![HOURS_THROUGH, through])?;
    Ok(())
}

/// Derives the hours of the days before the newest folded reading that the hour-of-day rollup
/// does not hold: nothing, unless the database was written before it (the fold keeps it after).
pub(super) fn derive_hours_at_start(connection: &mut Connection) -> Result<(), StoreError> {
    let transaction = connection.transaction()?;
    let newest: Option<i64> =
        transaction.query_row("SELECT max(last_seen) FROM device_latest", [], |row| {
            row.get(0)
        })?;
    if let Some(newest) = newest {
        derive_passed_days(&transaction, hours_through(&transaction)?, newest)?;
    }
    transaction.commit()?;
    Ok(())
}

/// The changes of one fold, per device and slot, for every resolution (hours only for the days
/// they hold); applied in key order, so consecutive upserts land on the same or neighbouring
/// pages.
#[derive(Debug)]
pub(super) struct Deltas {
    changes: BTreeMap<(usize, [u8; 16], i64), Delta>,
    hours_through: i64,
}

impl Deltas {
    /// No changes yet; [`Rollup::HourOfDay`] holds the days through `hours_through`.
    pub(super) fn new(hours_through: i64) -> Self {
        Self {
            changes: BTreeMap::new(),
            hours_through,
        }
    }

    /// Records a sample of `device` at `at` coming (`sign` 1) or going (`sign` −1).
    pub(super) fn record(
        &mut self,
        device: [u8; 16],
        at: DateTime<Utc>,
        values: &Measurements,
        sign: i8,
    ) {
        let day = Rollup::Day.slot(at);
        for (index, rollup) in Rollup::ALL.into_iter().enumerate() {
            if rollup == Rollup::HourOfDay && day > self.hours_through {
                continue;
            }
            self.changes
                .entry((index, device, rollup.slot(at)))
                .or_default()
                .add(values, sign);
        }
    }

    /// Applies every change in `connection`'s transaction.
    pub(super) fn apply(self, connection: &Connection) -> Result<(), StoreError> {
        let mut statements = Vec::with_capacity(Rollup::ALL.len());
        for rollup in Rollup::ALL {
            statements.push(connection.prepare_cached(&format!(
                "INSERT INTO {table} (device, slot, samples, sums) VALUES (?1, ?2, ?3, ?4) \
                 ON CONFLICT (device, slot) DO UPDATE SET samples = samples + excluded.samples, \
                 sums = {add}(sums, excluded.sums)",
                table = rollup.table(),
                add = packed_sums::ADD,
            ))?);
        }
        for ((index, device, slot), delta) in &self.changes {
            let Some(upsert) = statements.get_mut(*index) else {
                continue;
            };
            upsert.raw_bind_parameter(1, device.as_slice())?;
            upsert.raw_bind_parameter(2, *slot)?;
            upsert.raw_bind_parameter(3, delta.count)?;
            upsert.raw_bind_parameter(4, packed_sums::pack(&delta.sums).as_slice())?;
            upsert.raw_execute()?;
        }
        drop(statements);
        self.apply_pooled(connection)
    }

    /// Adds the changes to every pooled set their devices are in (src/store/sqlite/pooled.rs):
    /// per set and slot, so a chunk of 10,000 devices of one set makes one upsert per slot.
    fn apply_pooled(&self, connection: &Connection) -> Result<(), StoreError> {
        let any: bool = connection
            .prepare_cached("SELECT EXISTS (SELECT 1 FROM pooled_sets)")?
            .query_row([], |row| row.get(0))?;
        if !any {
            return Ok(());
        }
        let mut sets: HashMap<[u8; 16], Vec<i64>> = HashMap::new();
        {
            let mut statement =
                connection.prepare_cached("SELECT device, pool FROM pooled_members")?;
            let mut rows = statement.query([])?;
            while let Some(row) = rows.next()? {
                if let Some(device) = super::read_device(row, 0)? {
                    sets.entry(device).or_default().push(row.get(1)?);
                }
            }
        }
        let mut pooled: BTreeMap<(usize, i64, i64), Delta> = BTreeMap::new();
        for ((index, device, slot), delta) in &self.changes {
            for &set in sets.get(device).map(Vec::as_slice).unwrap_or_default() {
                let total = pooled.entry((*index, set, *slot)).or_default();
                total.count += delta.count;
                total.sums += delta.sums;
            }
        }
        for ((index, set, slot), delta) in pooled {
            let Some(rollup) = Rollup::ALL.get(index) else {
                continue;
            };
            connection
                .prepare_cached(&format!(
                    "INSERT INTO {table} (pool, slot, samples, sums) VALUES (?1, ?2, ?3, ?4) \
                     ON CONFLICT (pool, slot) DO UPDATE SET samples = samples + excluded.samples, \
                     sums = {add}(sums, excluded.sums)",
                    table = rollup.pooled_table(),
                    add = packed_sums::ADD,
                ))?
                .execute(params![
                    set,
                    slot,
                    delta.count,
                    packed_sums::pack(&delta.sums).as_slice()
                ])?;
        }
        Ok(())
    }
}

/// A range of slots `[from, to)` of one rollup, added to a bucket's sums or taken away from them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Piece {
    pub(super) rollup: Rollup,
    pub(super) from: i64,
    pub(super) to: i64,
    /// Whether the range is taken away (it lies outside the bucket, inside a day it counts).
    pub(super) negative: bool,
}

impl Piece {
    fn new(rollup: Rollup, from: i64, to: i64, negative: bool) -> Self {
        Self {
            rollup,
            from,
            to,
            negative,
        }
    }

    fn rows(&self) -> i64 {
        self.to - self.from
    }
}

/// Slots `[from, to)` of one rollup, read with one query.
pub(super) type Range = (Rollup, i64, i64);

/// A range read costs about as much as this many rows more (an index seek per device and a
/// query; measured on a year of data for 20 devices: 24 hourly buckets of a day read 0.95 ms as
/// one range of 96 quarter hours, 1.6 ms as 24 ranges of one hour each).
const RANGE_ROWS: i64 = 8;

/// The ranges to read for a plan's buckets (`[start, end)` each, on quarter hours) and each
/// bucket's pieces: with whole hours from the hour-of-day rollup where they fit, or with quarter
/// hours only, whichever reads less. Hours read a quarter of the rows, but a plan of short
/// buckets then reads one range per hour of day instead of one run of quarter hours: a week of
/// hours is cheaper in hours (24 ranges of 7 rows, not 672 rows), a day of hours in quarters.
/// `hours_through` is the last day the hour-of-day rollup holds ([`hours_through`]).
pub(super) fn plan_reads(
    buckets: impl Iterator<Item = (DateTime<Utc>, DateTime<Utc>)> + Clone,
    hours_through: i64,
) -> (Vec<Vec<Piece>>, Vec<Range>) {
    let plan = |hours: Option<i64>| {
        let covers: Vec<Vec<Piece>> = buckets
            .clone()
            .map(|(start, end)| cover(start, end, hours))
            .collect();
        let read = runs(covers.iter().flatten());
        (covers, read)
    };
    let cost = |read: &[Range]| {
        read.iter()
            .map(|(_, from, to)| to - from + RANGE_ROWS)
            .sum::<i64>()
    };
    let (with_hours, quarters) = (plan(Some(hours_through)), plan(None));
    if cost(&quarters.1) < cost(&with_hours.1) {
        quarters
    } else {
        with_hours
    }
}

/// The pieces whose signed sum is exactly `[start, end)` (both on quarter hours), reading as few
/// rollup rows as possible: its own quarter hours (and hours, see [`span`]), or whole UTC days
/// from the day rollups with the time between each edge and its nearest midnight added or taken
/// away. A Berlin day (23:00 to 23:00 UTC) is one day row plus one hour row at each end instead
/// of 96 quarter rows; a UTC day or month has no edge rows at all.
fn cover(start: DateTime<Utc>, end: DateTime<Utc>, hours: Option<i64>) -> Vec<Piece> {
    let (start, end) = (start.timestamp(), end.timestamp());
    // Longer buckets are always cheaper with day rows: no need to list their hours.
    let mut best = span(start, end, false, hours.filter(|_| end - start <= DAY));
    let cost = |pieces: &[Piece]| pieces.iter().map(Piece::rows).sum::<i64>();
    let midnights = |at: i64| {
        let before = at.div_euclid(DAY);
        [before, before + i64::from(at.rem_euclid(DAY) != 0)]
    };
    for first in midnights(start) {
        for last in midnights(end) {
            if first >= last {
                continue;
            }
            // The time between a bucket edge and the day edge it was moved to: taken away where
            // the days reach outside the bucket, added where they fall short.
            let edge = |day_edge: i64, edge: i64, outside: bool| {
                span(day_edge.min(edge), day_edge.max(edge), outside, hours)
            };
            let (from, to) = (first * DAY, last * DAY);
            let mut pieces = vec![Piece::new(Rollup::Day, first, last, false)];
            pieces.extend(edge(from, start, from < start));
            pieces.extend(edge(to, end, to > end));
            // Ties go to the cover without negative pieces: its sums are added only.
            let negatives = |pieces: &[Piece]| pieces.iter().filter(|piece| piece.negative).count();
            if (cost(&pieces), negatives(&pieces)) < (cost(&best), negatives(&best)) {
                best = pieces;
            }
        }
    }
    best
}

/// `[from, to)` (both on quarter hours) as its quarter hours, or with `hours` (the last day the
/// hour-of-day rollup holds) as the whole hours of those days from it and quarter hours for the
/// rest.
fn span(from: i64, to: i64, negative: bool, hours: Option<i64>) -> Vec<Piece> {
    let quarters = |a: i64, b: i64| {
        (a < b).then(|| Piece::new(Rollup::Quarter, a / QUARTER, b / QUARTER, negative))
    };
    let Some(through) = hours else {
        return quarters(from, to).into_iter().collect();
    };
    let first_hour = from.div_euclid(HOUR) + i64::from(from.rem_euclid(HOUR) != 0);
    let last_hour = to.div_euclid(HOUR).min((through + 1) * (DAY / HOUR));
    if first_hour >= last_hour {
        return quarters(from, to).into_iter().collect();
    }
    let whole_hours = (first_hour..last_hour).map(|hour| {
        let slot = hour_of_day_slot(hour);
        Piece::new(Rollup::HourOfDay, slot, slot + 1, negative)
    });
    quarters(from, first_hour * HOUR)
        .into_iter()
        .chain(whole_hours)
        .chain(quarters(last_hour * HOUR, to))
        .collect()
}

/// The slot ranges to read for `pieces`, one per rollup and run of touching or overlapping
/// ranges, so a plan of contiguous buckets costs one query per rollup and run, not one per bucket.
fn runs<'a>(pieces: impl IntoIterator<Item = &'a Piece>) -> Vec<Range> {
    let mut ranges: Vec<Range> = pieces
        .into_iter()
        .map(|piece| (piece.rollup, piece.from, piece.to))
        .collect();
    ranges.sort_unstable();
    let mut runs: Vec<Range> = Vec::with_capacity(ranges.len());
    for (rollup, from, to) in ranges {
        match runs.last_mut() {
            Some(last) if last.0 == rollup && from <= last.2 => last.2 = last.2.max(to),
            _ => runs.push((rollup, from, to)),
        }
    }
    runs
}

/// Whose rollups a read sums: the asked devices' own (an `rarray` of their UUIDs), or a pooled
/// set's (src/store/sqlite/pooled.rs).
pub(super) enum Source<'a> {
    Devices(&'a Rc<Vec<Value>>),
    Pooled(i64),
}

/// The folded sums of every slot of some runs, pooled over the asked devices.
pub(super) struct SlotSums {
    runs: Vec<Run>,
}

/// One run as read: its rollup, its first slot, and per slot the pooled sample count and sums.
struct Run {
    rollup: Rollup,
    first: i64,
    slots: Vec<(i64, Measurements)>,
}

impl SlotSums {
    /// Reads `runs` from `source`: one range query per run.
    pub(super) fn read(
        connection: &Connection,
        source: &Source<'_>,
        runs: &[Range],
    ) -> Result<Self, StoreError> {
        let mut read = Vec::with_capacity(runs.len());
        for &(rollup, from, to) in runs {
            let (sql, key) = match source {
                Source::Devices(devices) => (
                    format!(
                        "SELECT slot, samples, sums FROM {} \
                         WHERE device IN rarray(?1) AND slot >= ?2 AND slot < ?3",
                        rollup.table()
                    ),
                    *devices as &dyn rusqlite::ToSql,
                ),
                Source::Pooled(set) => (
                    format!(
                        "SELECT slot, samples, sums FROM {} \
                         WHERE pool = ?1 AND slot >= ?2 AND slot < ?3",
                        rollup.pooled_table()
                    ),
                    set as &dyn rusqlite::ToSql,
                ),
            };
            let mut statement = connection.prepare_cached(&sql)?;
            let length = usize::try_from(to - from).unwrap_or(0);
            let mut slots = vec![(0, Measurements::default()); length];
            let mut rows = statement.query(params![key, from, to])?;
            while let Some(row) = rows.next()? {
                let index = usize::try_from(row.get::<_, i64>(0)? - from).unwrap_or(usize::MAX);
                if let Some(slot) = slots.get_mut(index) {
                    slot.0 += row.get::<_, i64>(1)?;
                    slot.1 += packed_sums::read(row, 2)?;
                }
            }
            read.push(Run {
                rollup,
                first: from,
                slots,
            });
        }
        Ok(Self { runs: read })
    }

    /// The signed sum of `pieces` (each lies inside one run read).
    pub(super) fn sum(&self, pieces: &[Piece]) -> Aggregate {
        let mut count = 0i64;
        let mut sums = Measurements::default();
        for piece in pieces {
            // Runs are sorted and disjoint: the one holding the piece starts last at or before it.
            let after = self
                .runs
                .partition_point(|run| (run.rollup, run.first) <= (piece.rollup, piece.from));
            let Some(Run { first, slots, .. }) = after
                .checked_sub(1)
                .and_then(|index| self.runs.get(index))
                .filter(|run| run.rollup == piece.rollup)
            else {
                continue;
            };
            let range = usize::try_from(piece.from - first).unwrap_or(0)
                ..usize::try_from(piece.to - first).unwrap_or(0);
            for (samples, values) in slots.get(range).unwrap_or_default() {
                if piece.negative {
                    count -= samples;
                    sums -= *values;
                } else {
                    count += samples;
                    sums += *values;
                }
            }
        }
        Aggregate {
            count: u64::try_from(count).unwrap_or(0),
            sums,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(text)
            .map(|at| at.with_timezone(&Utc))
            .unwrap_or_default()
    }

    fn covered(parts: &[Piece]) -> i64 {
        parts
            .iter()
            .map(|piece| {
                let seconds = piece.rows() * piece.rollup.seconds();
                if piece.negative {
                    -seconds
                } else {
                    seconds
                }
            })
            .sum()
    }

    /// Hours derived for every day of these tests.
    const EVERY_DAY: i64 = 1 << 40;

    fn rows(parts: &[Piece]) -> i64 {
        parts.iter().map(Piece::rows).sum()
    }

    #[test]
    fn a_berlin_month_is_whole_utc_days_and_an_hour_at_each_end() {
        let (start, end) = (at("2026-10-31T23:00:00Z"), at("2026-11-30T23:00:00Z"));
        let parts = cover(start, end, Some(EVERY_DAY));
        assert_eq!(covered(&parts), (end - start).num_seconds());
        assert_eq!(parts[0].rollup, Rollup::Day);
        assert_eq!(rows(&parts), 30 + 1 + 1);
    }

    #[test]
    fn a_berlin_day_is_one_day_row_plus_an_hour_at_each_end() {
        let (start, end) = (at("2026-11-20T23:00:00Z"), at("2026-11-21T23:00:00Z"));
        let parts = cover(start, end, Some(EVERY_DAY));
        assert_eq!(covered(&parts), 86_400);
        assert_eq!(rows(&parts), 1 + 1 + 1);
    }

    #[test]
    fn a_kolkata_day_takes_its_edges_to_the_nearer_midnight_in_hours_where_it_can() {
        let (start, end) = (at("2026-11-20T18:30:00Z"), at("2026-11-21T18:30:00Z"));
        let parts = cover(start, end, Some(EVERY_DAY));
        assert_eq!(covered(&parts), 86_400);
        // 18:30 to midnight: two quarter hours, then five whole hours.
        assert_eq!(rows(&parts), 1 + 7 + 7);
    }

    #[test]
    fn an_hour_is_its_quarter_hours_or_one_hour_row() {
        let (start, end) = (at("2026-11-21T05:00:00Z"), at("2026-11-21T06:00:00Z"));
        let from = start.timestamp() / 900;
        assert_eq!(
            cover(start, end, None),
            vec![Piece::new(Rollup::Quarter, from, from + 4, false)]
        );
        let hour = hour_of_day_slot(start.timestamp() / 3_600);
        assert_eq!(
            cover(start, end, Some(EVERY_DAY)),
            vec![Piece::new(Rollup::HourOfDay, hour, hour + 1, false)]
        );
    }

    #[test]
    fn a_utc_day_is_one_day_row() {
        let parts = cover(at("2026-11-21T00:00:00Z"), at("2026-11-22T00:00:00Z"), None);
        assert_eq!(parts.len(), 1);
        assert!(matches!(parts[0].rollup, Rollup::Day));
    }

    /// `count` hourly buckets from 2026-11-21 00:00 UTC.
    fn hours(count: i64) -> impl Iterator<Item = (DateTime<Utc>, DateTime<Utc>)> + Clone {
        (0..count).map(|hour| {
            let start = at("2026-11-21T00:00:00Z") + chrono::TimeDelta::hours(hour);
            (start, start + chrono::TimeDelta::hours(1))
        })
    }

    #[test]
    fn a_day_of_hours_is_read_in_one_run_of_quarter_hours() {
        let (covers, read) = plan_reads(hours(24), EVERY_DAY);
        assert_eq!(read, vec![(Rollup::Quarter, read[0].1, read[0].1 + 96)]);
        assert!(covers.iter().all(|parts| covered(parts) == 3_600));
    }

    #[test]
    fn a_week_of_hours_is_read_in_one_run_per_hour_of_day() {
        let (covers, read) = plan_reads(hours(7 * 24), EVERY_DAY);
        assert_eq!(read.len(), 24, "{read:?}");
        assert!(read
            .iter()
            .all(|&(rollup, from, to)| rollup == Rollup::HourOfDay && to - from == 7));
        assert!(covers.iter().all(|parts| covered(parts) == 3_600));
    }

    #[test]
    fn a_year_of_berlin_days_reads_one_range_of_days_and_one_per_edge_hour() {
        use chrono::TimeZone as _;
        let berlin = chrono_tz::Europe::Berlin;
        let midnights: Vec<DateTime<Utc>> = (0..=366)
            .filter_map(|day| {
                let date =
                    chrono::NaiveDate::from_ymd_opt(2025, 11, 23)? + chrono::TimeDelta::days(day);
                let midnight = berlin
                    .from_local_datetime(&date.and_hms_opt(0, 0, 0)?)
                    .single()?;
                Some(midnight.with_timezone(&Utc))
            })
            .collect();
        let (covers, read) =
            plan_reads(midnights.windows(2).map(|day| (day[0], day[1])), EVERY_DAY);
        for (day, parts) in midnights.windows(2).zip(&covers) {
            assert_eq!(
                covered(parts),
                (day[1] - day[0]).num_seconds(),
                "{}",
                day[0]
            );
        }
        // The days; 22:00 UTC of the summer days; 23:00 UTC of every day.
        assert_eq!(read.len(), 3, "{read:?}");
        assert_eq!(read[0], (Rollup::Day, read[0].1, read[0].1 + 366));
    }

    #[test]
    fn hours_of_days_not_derived_yet_are_read_as_quarter_hours() {
        // Berlin's 21st, with the hours derived through the 20th only.
        let (start, end) = (at("2026-11-20T23:00:00Z"), at("2026-11-21T23:00:00Z"));
        let through = at("2026-11-20T00:00:00Z").timestamp() / 86_400;
        let parts = cover(start, end, Some(through));
        assert_eq!(covered(&parts), 86_400);
        let rollups: Vec<Rollup> = parts.iter().map(|piece| piece.rollup).collect();
        assert_eq!(
            rollups,
            [Rollup::Day, Rollup::HourOfDay, Rollup::Quarter],
            "{parts:?}"
        );
    }
}

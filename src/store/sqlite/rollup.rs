//! Rollups: sums per device and time slot, so a bucket of any calendar reads a few rows instead
//! of every sample.
//!
//! Two resolutions: quarter hours answer any calendar bucket of any zone exactly (every offset is
//! a multiple of 15 minutes); UTC days answer the whole days inside a long bucket, so a month
//! costs about 30 rows per device instead of about 2,900. The fold keeps both, adding what it
//! folds and subtracting what a replacing reading took the place of.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use rusqlite::Connection;

use super::bind_values;
use crate::domain::measure::COUNT;
use crate::domain::Measurements;
use crate::store::{columns, StoreError};

/// A rollup resolution.
#[derive(Debug, Clone, Copy)]
pub(super) enum Rollup {
    Quarter,
    Day,
}

impl Rollup {
    pub(super) const ALL: [Rollup; 2] = [Rollup::Quarter, Rollup::Day];

    pub(super) fn table(self) -> &'static str {
        match self {
            Self::Quarter => "rollups_15m",
            Self::Day => "rollups_1d",
        }
    }

    pub(super) fn seconds(self) -> i64 {
        match self {
            Self::Quarter => 900,
            Self::Day => 86_400,
        }
    }

    pub(super) fn slot(self, at: DateTime<Utc>) -> i64 {
        at.timestamp().div_euclid(self.seconds())
    }
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

/// The changes of one fold, per device and slot, for both resolutions; applied in key order, so
/// consecutive upserts land on the same or neighbouring pages.
#[derive(Debug, Default)]
pub(super) struct Deltas(BTreeMap<(usize, [u8; 16], i64), Delta>);

impl Deltas {
    /// Records a sample of `device` at `at` coming (`sign` 1) or going (`sign` −1).
    pub(super) fn record(
        &mut self,
        device: [u8; 16],
        at: DateTime<Utc>,
        values: &Measurements,
        sign: i8,
    ) {
        for (index, rollup) in Rollup::ALL.into_iter().enumerate() {
            self.0
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
                "INSERT INTO {table} (device, slot, samples, {sums}) VALUES ({values}) \
                 ON CONFLICT (device, slot) DO UPDATE SET samples = samples + excluded.samples, {add}",
                table = rollup.table(),
                sums = columns::each(|name| format!("{name}_sum")),
                values = columns::placeholders(1, 3 + COUNT),
                add = columns::each(|name| format!("{name}_sum = {name}_sum + excluded.{name}_sum")),
            ))?);
        }
        for ((index, device, slot), delta) in self.0 {
            let Some(upsert) = statements.get_mut(index) else {
                continue;
            };
            upsert.raw_bind_parameter(1, device.as_slice())?;
            upsert.raw_bind_parameter(2, slot)?;
            upsert.raw_bind_parameter(3, delta.count)?;
            bind_values(upsert, 4, &delta.sums)?;
            upsert.raw_execute()?;
        }
        Ok(())
    }
}

/// The slot ranges `[from, to)` that together cover `[start, end)` exactly (both on quarter
/// hours): whole UTC days from the day rollups, the rest from the quarter-hour rollups.
pub(super) fn pieces(start: DateTime<Utc>, end: DateTime<Utc>) -> Vec<(Rollup, i64, i64)> {
    let quarter = |from: i64, to: i64| (Rollup::Quarter, from / 900, to / 900);
    let (start, end) = (start.timestamp(), end.timestamp());
    let first_day = start.div_euclid(86_400) + i64::from(start.rem_euclid(86_400) != 0);
    let last_day = end.div_euclid(86_400);
    if first_day >= last_day {
        return vec![quarter(start, end)];
    }
    let mut parts = vec![(Rollup::Day, first_day, last_day)];
    if start < first_day * 86_400 {
        parts.push(quarter(start, first_day * 86_400));
    }
    if last_day * 86_400 < end {
        parts.push(quarter(last_day * 86_400, end));
    }
    parts
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(text)
            .map(|at| at.with_timezone(&Utc))
            .unwrap_or_default()
    }

    fn covered(parts: &[(Rollup, i64, i64)]) -> i64 {
        parts
            .iter()
            .map(|(rollup, from, to)| (to - from) * rollup.seconds())
            .sum()
    }

    #[test]
    fn a_berlin_month_is_whole_utc_days_plus_quarter_hour_edges() {
        let (start, end) = (at("2026-10-31T23:00:00Z"), at("2026-11-30T23:00:00Z"));
        let parts = pieces(start, end);
        assert_eq!(covered(&parts), (end - start).num_seconds());
        assert!(matches!(parts[0], (Rollup::Day, _, _)));
        assert_eq!(parts[0].2 - parts[0].1, 29);
    }

    #[test]
    fn a_kolkata_day_has_no_whole_utc_day_inside() {
        let (start, end) = (at("2026-11-20T18:30:00Z"), at("2026-11-21T18:30:00Z"));
        let parts = pieces(start, end);
        assert_eq!(parts.len(), 1);
        assert_eq!(covered(&parts), 86_400);
    }

    #[test]
    fn a_utc_day_is_one_day_row() {
        let parts = pieces(at("2026-11-21T00:00:00Z"), at("2026-11-22T00:00:00Z"));
        assert_eq!(parts.len(), 1);
        assert!(matches!(parts[0], (Rollup::Day, _, _)));
    }
}

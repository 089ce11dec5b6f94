//! The quarter-hour view's geometry: its name, its buckets, and which parts of a read's range
//! come from it and which from the raw readings.
//!
//! Timelines, custom ranges and the current snapshot's hour sum QuestDB's materialized view
//! `{table}_15m` (schema 003: per device and UTC quarter hour, the count and each value's sum).
//! Every zone's hours, days and months are unions of UTC quarter hours, so a read takes the whole
//! quarter hours of its range from the view and only the ends that are not whole quarter hours,
//! and the quarter hours the view may not hold yet ([`super::Visibility::view_sources`]), from
//! the raw readings.

/// A quarter hour in microseconds, the view's bucket.
const QUARTER_MICROS: i64 = 15 * 60 * 1_000_000;

/// The name of the quarter-hour view of `table`.
pub(super) fn view_name(table: &str) -> String {
    format!("{table}_15m")
}

/// The quarter hour (its index since the epoch) that the instant `micros` falls in.
pub(super) fn quarter_of(micros: i64) -> i64 {
    micros.div_euclid(QUARTER_MICROS)
}

/// Where a read of one range finds its readings: half-open microsecond ranges, ascending.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Sources {
    /// Runs of whole quarter hours to sum from the view.
    pub view: Vec<(i64, i64)>,
    /// Ranges to sum from the raw readings: the ends that are not whole quarter hours, and the
    /// quarter hours the view may lack (`pending`; every one when it is `None`).
    pub raw: Vec<(i64, i64)>,
}

impl Sources {
    /// Splits `[start, end)`: quarter hours in `pending` (every one when it is `None`, the view
    /// cannot be read) and the ends that are not whole quarter hours are raw, the rest the view's.
    pub(super) fn split(start: i64, end: i64, pending: Option<&[i64]>) -> Self {
        let mut sources = Self::default();
        if start >= end {
            return sources;
        }
        let first =
            start.div_euclid(QUARTER_MICROS) + i64::from(start.rem_euclid(QUARTER_MICROS) != 0);
        let last = end.div_euclid(QUARTER_MICROS);
        let Some(pending) = pending.filter(|_| first < last) else {
            sources.raw.push((start, end));
            return sources;
        };
        sources.push_raw(start, first * QUARTER_MICROS);
        let mut run = first;
        for quarter in pending
            .iter()
            .copied()
            .filter(|q| (first..last).contains(q))
        {
            sources.push_view(run * QUARTER_MICROS, quarter * QUARTER_MICROS);
            sources.push_raw(quarter * QUARTER_MICROS, (quarter + 1) * QUARTER_MICROS);
            run = quarter + 1;
        }
        sources.push_view(run * QUARTER_MICROS, last * QUARTER_MICROS);
        sources.push_raw(last * QUARTER_MICROS, end);
        sources
    }

    fn push_view(&mut self, from: i64, to: i64) {
        push_merged(&mut self.view, from, to);
    }

    fn push_raw(&mut self, from: i64, to: i64) {
        push_merged(&mut self.raw, from, to);
    }
}

/// Appends `[from, to)` to ascending ranges, joined with the last when they touch; empty ones
/// are left out.
fn push_merged(ranges: &mut Vec<(i64, i64)>, from: i64, to: i64) {
    if from >= to {
        return;
    }
    match ranges.last_mut() {
        Some(last) if last.1 == from => last.1 = to,
        _ => ranges.push((from, to)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const Q: i64 = QUARTER_MICROS;

    #[test]
    fn whole_quarters_come_from_the_view_and_the_ends_from_raw_readings() {
        let sources = Sources::split(10 * Q + 5, 14 * Q + 7, Some(&[]));
        assert_eq!(sources.view, vec![(11 * Q, 14 * Q)]);
        assert_eq!(
            sources.raw,
            vec![(10 * Q + 5, 11 * Q), (14 * Q, 14 * Q + 7)]
        );
    }

    #[test]
    fn pending_quarters_are_read_raw_and_split_the_view_runs() {
        let sources = Sources::split(10 * Q, 16 * Q, Some(&[9, 12, 13, 15, 16]));
        assert_eq!(sources.view, vec![(10 * Q, 12 * Q), (14 * Q, 15 * Q)]);
        assert_eq!(sources.raw, vec![(12 * Q, 14 * Q), (15 * Q, 16 * Q)]);
    }

    #[test]
    fn without_a_valid_view_or_a_whole_quarter_everything_is_raw() {
        assert_eq!(
            Sources::split(10 * Q, 16 * Q, None).raw,
            vec![(10 * Q, 16 * Q)]
        );
        let short = Sources::split(10 * Q + 1, 11 * Q + 5, Some(&[]));
        assert!(short.view.is_empty());
        assert_eq!(short.raw, vec![(10 * Q + 1, 11 * Q + 5)]);
    }

    #[test]
    fn quarters_before_the_epoch_round_down() {
        assert_eq!(quarter_of(-1), -1);
        let sources = Sources::split(-2 * Q - 1, Q, Some(&[]));
        assert_eq!(sources.view, vec![(-2 * Q, Q)]);
        assert_eq!(sources.raw, vec![(-2 * Q - 1, -2 * Q)]);
    }
}

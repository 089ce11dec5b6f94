//! The views' geometry: their names, their buckets, and which piece of a read comes from which
//! view and which from the raw readings.
//!
//! QuestDB keeps three materialized views of the readings table (schemas 003 and 004), each per
//! device and UTC slot with the readings' count and the sum of each value: quarter hours
//! (`{table}_15m`, refreshed after every commit), and hours and days (`{table}_1h`, `{table}_1d`,
//! derived from the quarter hours once each hour or day has passed, and again when a late reading
//! lands in one). Every zone's hours, days and months are unions of UTC quarter hours, so a read
//! could sum quarter hours alone — a year of them for 20 devices is 700,800 rows. Instead each
//! bucket is [`cover`]ed like the embedded store's rollups: whole UTC days from the day view, the
//! time between a bucket edge and its nearest midnight in hours (added, or taken away from a day
//! that reaches past the edge), quarter hours where an offset is not whole hours, and raw
//! readings for the ends that are not whole quarter hours and the quarter hours the quarter-hour
//! view may lack. A Berlin month reads about 30 day rows and 2 hour rows per device.
//!
//! What a view may lack comes from [`super::Visibility::coverage`]: quarter hours this process
//! wrote into that the quarter-hour view may not have refreshed yet (read raw), those the hour and
//! day views may not have taken from it yet (their hours and days are read finer), and how far
//! the hour and day views have derived passed periods at all.
//!
//! An owner-wide read then takes each device-view piece from the owner view of its grain
//! (`{table}_o15m`, `_o1h`, `_o1d`, schema 006: one row per owner and period) where that view
//! holds the whole period ([`OwnerCoverage::lift`]): a day of hours is 24 rows for the owner
//! rather than 24 per device.

use std::collections::BTreeSet;

/// A quarter hour, an hour and a day in microseconds.
const QUARTER: i64 = 15 * 60 * 1_000_000;
const HOUR: i64 = 4 * QUARTER;
const DAY: i64 = 24 * HOUR;

/// A view's resolution: its row is one device's quarter hour, hour or day.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(super) enum Grain {
    Quarter,
    Hour,
    Day,
}

impl Grain {
    pub(super) const ALL: [Grain; 3] = [Grain::Quarter, Grain::Hour, Grain::Day];

    /// The time one row covers.
    pub(super) fn length(self) -> i64 {
        match self {
            Self::Quarter => QUARTER,
            Self::Hour => HOUR,
            Self::Day => DAY,
        }
    }

    /// The name of this view of `table` (schemas 004 and 005).
    pub(super) fn view_of(self, table: &str) -> String {
        format!("{table}_{}", self.suffix())
    }

    /// The name of this owner view of `table` (schema 006).
    pub(super) fn owner_view_of(self, table: &str) -> String {
        format!("{table}_o{}", self.suffix())
    }

    fn suffix(self) -> &'static str {
        match self {
            Self::Quarter => "15m",
            Self::Hour => "1h",
            Self::Day => "1d",
        }
    }
}

/// The quarter hour (its index since the epoch) that the instant `micros` falls in.
pub(super) fn quarter_of(micros: i64) -> i64 {
    micros.div_euclid(QUARTER)
}

/// What the views hold for one read, as [`super::Visibility::coverage`] saw it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct Coverage {
    /// `None` when the quarter-hour view cannot be read: every piece is raw.
    pub(super) quarters: Option<QuarterCoverage>,
    /// `None` when the owner views cannot be read: owner reads take the device views.
    pub(super) owners: Option<OwnerCoverage>,
}

/// What the quarter-hour view, and the hour and day views derived from it, hold.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct QuarterCoverage {
    /// Quarter hours (indexes) the quarter-hour view may lack: read raw.
    pub(super) pending: BTreeSet<i64>,
    /// `None` when the hour and day views cannot be read.
    pub(super) coarse: Option<CoarseCoverage>,
}

/// What the hour and day views hold.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct CoarseCoverage {
    /// Quarter hours (indexes) whose hour and day the views may not have taken yet; every
    /// pending one among them, so an hour or a day a view holds has no raw quarter hour.
    pub(super) unsettled: BTreeSet<i64>,
    pub(super) derived: Derived,
}

/// What the owner views (schema 006) hold: the device views' rows summed per owner, as of a
/// moment the tracker saw them catch up with the device views.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct OwnerCoverage {
    /// Quarter hours (indexes) whose periods the owner views may lack.
    pub(super) unheld: BTreeSet<i64>,
    /// How far the device hour and day views had derived when the owner views held all of it.
    pub(super) derived: Derived,
}

impl OwnerCoverage {
    /// `piece`, taken from the owner view of its grain instead of the device view where the
    /// owner view holds its whole period; raw pieces and the rest as they are.
    pub(super) fn lift(&self, piece: Piece) -> Piece {
        let Source::View(grain) = piece.source else {
            return piece;
        };
        let derived = self.derived.end_of(grain).is_none_or(|end| piece.to <= end);
        let held = self
            .unheld
            .range(quarter_of(piece.from)..quarter_of(piece.to))
            .next()
            .is_none();
        if derived && held {
            Piece {
                source: Source::Owners(grain),
                ..piece
            }
        } else {
            piece
        }
    }
}

/// How far the hour and the day view derived passed periods: the ends (microseconds, exclusive)
/// of their hours and days.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct Derived {
    pub(super) hours_to: i64,
    pub(super) days_to: i64,
}

impl Derived {
    /// How far the view of `grain` derived; the quarter-hour view derives no periods.
    fn end_of(self, grain: Grain) -> Option<i64> {
        match grain {
            Grain::Quarter => None,
            Grain::Hour => Some(self.hours_to),
            Grain::Day => Some(self.days_to),
        }
    }
}

/// Where a piece of a bucket is summed from: raw readings, a device view, or an owner view.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(super) enum Source {
    Raw,
    View(Grain),
    Owners(Grain),
}

/// A part of a bucket: `[from, to)` (microseconds) of one source — one row of a view, or any
/// range of raw readings — added to the bucket's sums or taken away from them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Piece {
    pub(super) source: Source,
    pub(super) from: i64,
    pub(super) to: i64,
    /// Whether it is taken away: it lies outside the bucket, inside a day the bucket counts.
    pub(super) negative: bool,
}

/// The pieces whose signed sum is exactly the bucket `[start, end)` (microseconds). Raw pieces
/// are taken away only from the quarter hour at an edge that is not whole (the snapshot's hour
/// ends at a second). Buckets shorter than a day are not covered with days.
pub(super) fn cover(start: i64, end: i64, coverage: &Coverage) -> Vec<Piece> {
    let mut pieces = Vec::new();
    if start >= end {
        return pieces;
    }
    let Some(quarters) = &coverage.quarters else {
        pieces.push(Piece::raw(start, end));
        return pieces;
    };
    let first = ceil(start, QUARTER);
    let last = floor(end, QUARTER);
    if first >= last {
        pieces.push(Piece::raw(start, end));
        return pieces;
    }
    if start < first {
        pieces.extend(quarters.partial(first - QUARTER, (start, first)));
    }
    if last - first >= DAY && quarters.coarse.is_some() {
        let (midnight, last_midnight) = (ceil(first, DAY), floor(last, DAY));
        pieces.extend(quarters.start_edge(first, midnight));
        for day in (midnight..last_midnight).step_by(DAY as usize) {
            pieces.extend(quarters.day(day));
        }
        pieces.extend(quarters.end_edge(last_midnight, last));
    } else {
        pieces.extend(quarters.span(first, last, false));
    }
    if last < end {
        pieces.extend(quarters.partial(last, (last, end)));
    }
    pieces
}

impl Piece {
    fn raw(from: i64, to: i64) -> Self {
        Self::of(Source::Raw, from, to, false)
    }

    fn of(source: Source, from: i64, to: i64, negative: bool) -> Self {
        Self {
            source,
            from,
            to,
            negative,
        }
    }
}

impl QuarterCoverage {
    /// The part `[from, to)` of the quarter hour starting at `quarter`: raw, or the quarter
    /// hour's view row less the raw rest of it, whichever reads the shorter time raw (the view
    /// row only where the view holds that quarter hour).
    fn partial(&self, quarter: i64, (from, to): (i64, i64)) -> Vec<Piece> {
        let part = to - from;
        if self.pending.contains(&quarter_of(quarter)) || QUARTER - part >= part {
            return vec![Piece::raw(from, to)];
        }
        let end = quarter + QUARTER;
        let mut pieces = vec![Piece::of(Source::View(Grain::Quarter), quarter, end, false)];
        if quarter < from {
            pieces.push(Piece::of(Source::Raw, quarter, from, true));
        }
        if to < end {
            pieces.push(Piece::of(Source::Raw, to, end, true));
        }
        pieces
    }

    /// Whether the whole hour or day of `grain` from `from` can be read from its view.
    fn holds(&self, grain: Grain, from: i64) -> bool {
        let to = from + grain.length();
        self.coarse.as_ref().is_some_and(|coarse| {
            coarse.derived.end_of(grain).is_some_and(|end| to <= end)
                && coarse
                    .unsettled
                    .range(quarter_of(from)..quarter_of(to))
                    .next()
                    .is_none()
        })
    }

    /// The day starting at `from`: one row, or its hours when the day view cannot give it.
    fn day(&self, from: i64) -> Vec<Piece> {
        if self.holds(Grain::Day, from) {
            vec![Piece::of(Source::View(Grain::Day), from, from + DAY, false)]
        } else {
            self.span(from, from + DAY, false)
        }
    }

    /// `[from, to)` (on quarter hours) as hour rows where the hour view holds them, quarter rows
    /// elsewhere, and raw quarter hours where the quarter-hour view may lack them.
    fn span(&self, from: i64, to: i64, negative: bool) -> Vec<Piece> {
        let mut pieces = Vec::new();
        let mut at = from;
        while at < to {
            if at.rem_euclid(HOUR) == 0 && at + HOUR <= to && self.holds(Grain::Hour, at) {
                pieces.push(Piece::of(
                    Source::View(Grain::Hour),
                    at,
                    at + HOUR,
                    negative,
                ));
                at += HOUR;
                continue;
            }
            let source = if self.pending.contains(&quarter_of(at)) {
                Source::Raw
            } else {
                Source::View(Grain::Quarter)
            };
            pieces.push(Piece::of(source, at, at + QUARTER, negative));
            at += QUARTER;
        }
        pieces
    }

    /// `[from, midnight)`, the start of a bucket before its first midnight: its own pieces, or
    /// the day before the midnight less `[day, from)`, whichever reads fewer rows.
    fn start_edge(&self, from: i64, midnight: i64) -> Vec<Piece> {
        let day = midnight - DAY;
        self.cheaper(self.span(from, midnight, false), day, (day, from))
    }

    /// `[midnight, to)`, the end of a bucket after its last midnight: likewise, with the day
    /// from the midnight less `[to, midnight + day)`.
    fn end_edge(&self, midnight: i64, to: i64) -> Vec<Piece> {
        self.cheaper(
            self.span(midnight, to, false),
            midnight,
            (to, midnight + DAY),
        )
    }

    /// `own`, or the day at `day` less the span `outside`, whichever has fewer pieces (a tie
    /// goes to `own`, which only adds). The day is an option only when its view holds it, so
    /// what is taken away from it, inside it, needs no raw readings.
    fn cheaper(&self, own: Vec<Piece>, day: i64, (from, to): (i64, i64)) -> Vec<Piece> {
        if own.is_empty() || !self.holds(Grain::Day, day) {
            return own;
        }
        let taken = self.span(from, to, true);
        if taken.len() + 1 >= own.len() {
            return own;
        }
        let mut pieces = vec![Piece::of(Source::View(Grain::Day), day, day + DAY, false)];
        pieces.extend(taken);
        pieces
    }
}

fn floor(at: i64, length: i64) -> i64 {
    at.div_euclid(length) * length
}

fn ceil(at: i64, length: i64) -> i64 {
    floor(at, length)
        + if at.rem_euclid(length) == 0 {
            0
        } else {
            length
        }
}

#[cfg(test)]
mod tests {
    use super::*;

    const Q: i64 = QUARTER;

    fn coverage(pending: &[i64], unsettled: &[i64], hours_to: i64, days_to: i64) -> Coverage {
        Coverage {
            quarters: Some(QuarterCoverage {
                pending: pending.iter().copied().collect(),
                coarse: Some(CoarseCoverage {
                    unsettled: unsettled.iter().copied().collect(),
                    derived: Derived { hours_to, days_to },
                }),
            }),
            owners: None,
        }
    }

    /// Everything derived: every view holds every passed period.
    fn settled() -> Coverage {
        coverage(&[], &[], i64::MAX, i64::MAX)
    }

    /// The bucket's exact signed coverage: every instant of `[start, end)` counted once, none
    /// outside it.
    fn assert_exact(pieces: &[Piece], start: i64, end: i64) {
        let mut edges: Vec<(i64, i64)> = Vec::new();
        for piece in pieces {
            let sign = if piece.negative { -1 } else { 1 };
            edges.push((piece.from, sign));
            edges.push((piece.to, -sign));
        }
        edges.sort_unstable();
        let mut depth = 0;
        let mut at = i64::MIN;
        for (edge, change) in edges {
            if edge > at {
                let inside = (start..end).contains(&at);
                assert_eq!(depth, i64::from(inside), "at {at}: {pieces:?}");
                at = edge;
            }
            depth += change;
        }
        assert_eq!(depth, 0);
    }

    /// How many pieces come from each source: raw, quarter hours, hours, days.
    fn counts(pieces: &[Piece]) -> [usize; 4] {
        let count = |source| pieces.iter().filter(|piece| piece.source == source).count();
        let [quarter, hour, day] = Grain::ALL.map(|grain| count(Source::View(grain)));
        [count(Source::Raw), quarter, hour, day]
    }

    #[test]
    fn a_berlin_day_is_a_day_row_and_an_hour_at_each_end() {
        let (start, end) = (100 * DAY - HOUR, 101 * DAY - HOUR);
        let pieces = cover(start, end, &settled());
        assert_exact(&pieces, start, end);
        assert_eq!(counts(&pieces), [0, 0, 2, 1]);
        assert!(pieces.iter().any(|piece| piece.negative));
    }

    #[test]
    fn a_berlin_month_is_whole_days_and_an_hour_at_each_end() {
        let (start, end) = (100 * DAY - HOUR, 131 * DAY - 2 * HOUR);
        let pieces = cover(start, end, &settled());
        assert_exact(&pieces, start, end);
        assert_eq!(counts(&pieces), [0, 0, 3, 31]);
    }

    #[test]
    fn a_kolkata_day_needs_quarter_hours_at_its_edges() {
        let (start, end) = (100 * DAY - 5 * HOUR - 2 * Q, 101 * DAY - 5 * HOUR - 2 * Q);
        let pieces = cover(start, end, &settled());
        assert_exact(&pieces, start, end);
        assert_eq!(counts(&pieces), [0, 4, 10, 1]);
    }

    #[test]
    fn hours_shorter_than_a_day_are_hour_rows_or_quarter_rows() {
        let pieces = cover(10 * HOUR, 14 * HOUR + Q, &settled());
        assert_exact(&pieces, 10 * HOUR, 14 * HOUR + Q);
        assert_eq!(counts(&pieces), [0, 1, 4, 0]);
    }

    #[test]
    fn an_end_that_is_not_a_whole_quarter_hour_reads_the_shorter_time_raw() {
        let (start, end) = (10 * Q + 5, 14 * Q + 7);
        let pieces = cover(start, end, &settled());
        assert_exact(&pieces, start, end);
        // Most of the first quarter hour: its row less its first 5 µs.
        assert!(pieces.contains(&Piece::of(
            Source::View(Grain::Quarter),
            10 * Q,
            11 * Q,
            false
        )));
        assert!(pieces.contains(&Piece::of(Source::Raw, 10 * Q, start, true)));
        // 7 µs of the last: raw.
        assert_eq!(pieces.last(), Some(&Piece::raw(14 * Q, end)));
        let late = cover(10 * Q + 5, 14 * Q + Q - 7, &settled());
        assert_exact(&late, 10 * Q + 5, 14 * Q + Q - 7);
        assert!(late.contains(&Piece::of(Source::Raw, 15 * Q - 7, 15 * Q, true)));
    }

    #[test]
    fn a_partial_quarter_hour_the_view_may_lack_is_raw() {
        let (start, end) = (10 * Q + 5, 14 * Q);
        let pieces = cover(start, end, &coverage(&[10], &[10], i64::MAX, i64::MAX));
        assert_exact(&pieces, start, end);
        assert_eq!(pieces.first(), Some(&Piece::raw(start, 11 * Q)));
    }

    #[test]
    fn quarter_hours_the_quarter_view_may_lack_are_raw() {
        let coverage = coverage(&[41], &[41], i64::MAX, i64::MAX);
        let pieces = cover(40 * Q, 44 * Q, &coverage);
        assert_exact(&pieces, 40 * Q, 44 * Q);
        assert_eq!(counts(&pieces), [1, 3, 0, 0]);
    }

    #[test]
    fn hours_and_days_the_coarse_views_may_lack_are_read_finer() {
        let day = 100 * DAY;
        let quarter = quarter_of(day) + 9;
        let pieces = cover(
            day,
            day + DAY,
            &coverage(&[], &[quarter], i64::MAX, i64::MAX),
        );
        assert_exact(&pieces, day, day + DAY);
        assert_eq!(counts(&pieces), [0, 4, 23, 0]);
    }

    #[test]
    fn periods_not_derived_yet_are_read_finer() {
        let day = 100 * DAY;
        let pieces = cover(day, day + DAY, &coverage(&[], &[], day + 2 * HOUR, day));
        assert_exact(&pieces, day, day + DAY);
        assert_eq!(counts(&pieces), [0, 88, 2, 0]);
    }

    #[test]
    fn a_day_the_views_may_lack_is_not_taken_away_from() {
        let (start, end) = (100 * DAY - HOUR, 101 * DAY - HOUR);
        let late = quarter_of(end);
        let pieces = cover(start, end, &coverage(&[late], &[late], i64::MAX, i64::MAX));
        assert_exact(&pieces, start, end);
        assert!(pieces.iter().all(|piece| !piece.negative));
        assert_eq!(counts(&pieces), [0, 0, 24, 0]);
    }

    #[test]
    fn without_a_readable_view_or_a_whole_quarter_everything_is_raw() {
        assert_eq!(
            cover(10 * Q, 16 * Q, &Coverage::default()),
            vec![Piece::raw(10 * Q, 16 * Q)]
        );
        assert_eq!(
            cover(10 * Q + 1, 11 * Q + 5, &settled()),
            vec![Piece::raw(10 * Q + 1, 11 * Q + 5)]
        );
    }

    #[test]
    fn without_coarse_views_quarter_rows_answer() {
        let coverage = Coverage {
            quarters: Some(QuarterCoverage::default()),
            owners: None,
        };
        let pieces = cover(100 * DAY, 102 * DAY, &coverage);
        assert_exact(&pieces, 100 * DAY, 102 * DAY);
        assert_eq!(counts(&pieces), [0, 192, 0, 0]);
    }

    #[test]
    fn instants_before_the_epoch_round_down() {
        assert_eq!(quarter_of(-1), -1);
        let pieces = cover(-2 * Q - 1, Q, &settled());
        assert_exact(&pieces, -2 * Q - 1, Q);
        assert_eq!(pieces.first(), Some(&Piece::raw(-2 * Q - 1, -2 * Q)));
    }

    #[test]
    fn owner_views_take_the_periods_they_hold_and_no_other() {
        let day = 100 * DAY;
        let owners = OwnerCoverage {
            unheld: [quarter_of(day + DAY + 5 * HOUR)].into_iter().collect(),
            derived: Derived {
                hours_to: day + DAY + 10 * HOUR,
                days_to: day + DAY,
            },
        };
        let lifted: Vec<Source> = [
            Piece::of(Source::View(Grain::Day), day, day + DAY, false),
            Piece::of(Source::View(Grain::Day), day + DAY, day + 2 * DAY, false),
            Piece::of(Source::View(Grain::Hour), day + DAY, day + DAY + HOUR, true),
            Piece::of(
                Source::View(Grain::Hour),
                day + DAY + 5 * HOUR,
                day + DAY + 6 * HOUR,
                false,
            ),
            Piece::of(
                Source::View(Grain::Hour),
                day + DAY + 10 * HOUR,
                day + DAY + 11 * HOUR,
                false,
            ),
            Piece::of(
                Source::View(Grain::Quarter),
                day + DAY + 20 * HOUR,
                day + DAY + 20 * HOUR + Q,
                false,
            ),
            Piece::raw(day, day + Q),
        ]
        .into_iter()
        .map(|piece| owners.lift(piece).source)
        .collect();
        assert_eq!(
            lifted,
            [
                Source::Owners(Grain::Day),
                Source::View(Grain::Day),
                Source::Owners(Grain::Hour),
                Source::View(Grain::Hour),
                Source::View(Grain::Hour),
                Source::Owners(Grain::Quarter),
                Source::Raw,
            ]
        );
    }
}

//! The calendar buckets of historical reads: timelines and custom ranges cut into hours, days or
//! months of a time zone (their queries are parsed in [`super::query`]).
//!
//! A [`BucketPlan`] is the list of half-open UTC intervals `[start, end)` that the calendar of a
//! time zone defines: hours, days or months as people in that zone live them, so a day can last
//! 23 or 25 hours and an hour can start at :30 or :45 UTC. Every real zone offset is a multiple of
//! 15 minutes, which is why 15-minute rollups answer every plan exactly.

use chrono::{
    DateTime, Datelike, Days, Months, NaiveDate, Offset, TimeDelta, TimeZone, Timelike, Utc,
};
use chrono_tz::Tz;

/// The four fixed timelines of the historical routes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Timeline {
    /// The last 24 hours, by hour.
    Daily,
    /// The last 7 days, by day.
    Weekly,
    /// The last 30 days, by day.
    Monthly,
    /// The last 12 months, by month.
    Yearly,
}

impl Timeline {
    pub(crate) const ALL: [(&'static str, Self); 4] = [
        ("daily", Self::Daily),
        ("weekly", Self::Weekly),
        ("monthly", Self::Monthly),
        ("yearly", Self::Yearly),
    ];

    /// The wire name.
    pub fn as_str(self) -> &'static str {
        Self::ALL
            .iter()
            .find(|(_, timeline)| *timeline == self)
            .map_or("daily", |(name, _)| name)
    }
}

/// Bucket size of a custom range.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Interval {
    /// Calendar hours.
    Hour,
    /// Calendar days.
    Day,
    /// Calendar months.
    Month,
}

/// One bucket: `[start, end)` in UTC, with its label in the plan's zone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bucket {
    /// First instant (inclusive).
    pub start: DateTime<Utc>,
    /// Last instant (exclusive).
    pub end: DateTime<Utc>,
    /// Label, in the zone.
    pub label: String,
}

/// The buckets of one historical request, oldest first, in one time zone.
#[derive(Debug, Clone, PartialEq)]
pub struct BucketPlan {
    /// The zone labels and timestamps are shown in.
    pub tz: Tz,
    /// The size of the buckets.
    pub interval: Interval,
    /// The buckets, oldest first, contiguous.
    pub buckets: Vec<Bucket>,
}

impl BucketPlan {
    /// The plan of a timeline at `now`: its buckets up to and including the current one.
    pub fn timeline(timeline: Timeline, tz: Tz, now: DateTime<Utc>) -> Self {
        let today = now.with_timezone(&tz).date_naive();
        let interval = match timeline {
            Timeline::Daily => Interval::Hour,
            Timeline::Weekly | Timeline::Monthly => Interval::Day,
            Timeline::Yearly => Interval::Month,
        };
        let buckets = match timeline {
            Timeline::Daily => {
                let current = floor_hour(now, tz);
                hours(
                    current - TimeDelta::hours(23),
                    next_hour(current, tz),
                    tz,
                    "%H:%M",
                )
            }
            Timeline::Weekly => days(today - Days::new(6), today, tz, "%a"),
            Timeline::Monthly => days(today - Days::new(29), today, tz, "%b %-d"),
            Timeline::Yearly => {
                let this_month = first_of_month(today);
                months(this_month - Months::new(11), this_month, tz, "%b", None)
            }
        };
        Self {
            tz,
            interval,
            buckets,
        }
    }

    /// The plan of a custom range.
    pub fn custom(range: DateRange, interval: Interval, tz: Tz) -> Self {
        let buckets = match interval {
            Interval::Hour => hours(
                local_midnight(range.start, tz),
                local_midnight(range.end + Days::new(1), tz),
                tz,
                "%Y-%m-%d %H:%M",
            ),
            Interval::Day => days(range.start, range.end, tz, "%Y-%m-%d"),
            Interval::Month => months(
                first_of_month(range.start),
                first_of_month(range.end),
                tz,
                "%Y-%m",
                Some(range),
            ),
        };
        Self {
            tz,
            interval,
            buckets,
        }
    }

    /// `[first start, last end)`, or `None` for an empty plan.
    pub fn span(&self) -> Option<(DateTime<Utc>, DateTime<Utc>)> {
        Some((self.buckets.first()?.start, self.buckets.last()?.end))
    }
}

/// The first instant of `date` in `tz` (midnight, or the first time after a gap at midnight).
pub fn local_midnight(date: NaiveDate, tz: Tz) -> DateTime<Utc> {
    let midnight = date.and_hms_opt(0, 0, 0).unwrap_or_default();
    (0..=16)
        .find_map(|quarter| {
            tz.from_local_datetime(&(midnight + TimeDelta::minutes(15 * quarter)))
                .earliest()
        })
        .map_or_else(|| midnight.and_utc(), |at| at.with_timezone(&Utc))
}

/// The start of the local hour containing `at`: its :00 as the zone's clocks show it, or the
/// zone's change of offset after that, when one falls inside the hour (on the day Lord Howe
/// Island moves its clocks from 02:00 to 02:30, the hour of 02:45 starts at 02:30).
fn floor_hour(at: DateTime<Utc>, tz: Tz) -> DateTime<Utc> {
    let floor = on_the_hour(at, tz);
    offset_change(floor, at, tz).unwrap_or(floor)
}

/// The start of the local hour after the one starting at `at` (itself such a start): the next
/// :00 on the zone's clocks, or the zone's next change of offset before it, so that no bucket
/// spans two offsets (Berlin's October night has two `02:00` hours; Lord Howe Island's April one
/// an hour `01:00` of 30 minutes, then `01:30` of 30 more, as its clocks go back by half an hour).
fn next_hour(at: DateTime<Utc>, tz: Tz) -> DateTime<Utc> {
    let next = on_the_hour(at, tz) + TimeDelta::hours(1);
    offset_change(at, next, tz).unwrap_or(next)
}

/// `at` less the minutes, seconds and fraction the zone's clocks show at it.
fn on_the_hour(at: DateTime<Utc>, tz: Tz) -> DateTime<Utc> {
    let local = at.with_timezone(&tz);
    at - TimeDelta::seconds(i64::from(local.minute() * 60 + local.second()))
        - TimeDelta::nanoseconds(i64::from(local.nanosecond()))
}

/// The first instant in `(from, to]` at which `tz`'s offset differs from its offset at `from`,
/// if any (found to the second: zones change offset on whole seconds).
fn offset_change(from: DateTime<Utc>, to: DateTime<Utc>, tz: Tz) -> Option<DateTime<Utc>> {
    let offset = |at: DateTime<Utc>| tz.offset_from_utc_datetime(&at.naive_utc()).fix();
    let before = offset(from);
    if offset(to) == before {
        return None;
    }
    let (mut same, mut changed) = (from, to);
    while changed - same > TimeDelta::seconds(1) {
        let middle = same + (changed - same) / 2;
        if offset(middle) == before {
            same = middle;
        } else {
            changed = middle;
        }
    }
    Some(changed.with_nanosecond(0).unwrap_or(changed))
}

fn first_of_month(date: NaiveDate) -> NaiveDate {
    date.with_day(1).unwrap_or(date)
}

fn label(at: DateTime<Utc>, tz: Tz, format: &str) -> String {
    at.with_timezone(&tz).format(format).to_string()
}

/// Hour buckets from `start` (a local hour start) up to `end`.
fn hours(start: DateTime<Utc>, end: DateTime<Utc>, tz: Tz, format: &str) -> Vec<Bucket> {
    let mut buckets = Vec::new();
    let mut at = start;
    while at < end {
        let next = next_hour(at, tz).min(end);
        buckets.push(Bucket {
            start: at,
            end: next,
            label: label(at, tz, format),
        });
        at = next;
    }
    buckets
}

/// Day buckets for every date from `first` to `last` inclusive.
fn days(first: NaiveDate, last: NaiveDate, tz: Tz, format: &str) -> Vec<Bucket> {
    first
        .iter_days()
        .take_while(|date| *date <= last)
        .map(|date| {
            let start = local_midnight(date, tz);
            Bucket {
                start,
                end: local_midnight(date + Days::new(1), tz),
                label: label(start, tz, format),
            }
        })
        .collect()
}

/// Month buckets from the month of `first` to the month of `last`, clipped to `clip` if given.
fn months(
    first: NaiveDate,
    last: NaiveDate,
    tz: Tz,
    format: &str,
    clip: Option<DateRange>,
) -> Vec<Bucket> {
    let mut buckets = Vec::new();
    let mut month = first;
    while month <= last {
        let next = month + Months::new(1);
        let (mut from, mut to) = (month, next);
        if let Some(range) = clip {
            from = from.max(range.start);
            to = to.min(range.end + Days::new(1));
        }
        let start = local_midnight(from, tz);
        buckets.push(Bucket {
            start,
            end: local_midnight(to, tz),
            label: label(local_midnight(month, tz), tz, format),
        });
        month = next;
    }
    buckets
}

/// An inclusive range of dates in the request's zone, start not after end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DateRange {
    /// First day.
    pub start: NaiveDate,
    /// Last day (inclusive).
    pub end: NaiveDate,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn utc(text: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(text)
            .map(|at| at.with_timezone(&Utc))
            .unwrap_or_default()
    }

    #[test]
    fn daily_in_kathmandu_starts_hours_at_a_quarter_past_utc() {
        let plan = BucketPlan::timeline(
            Timeline::Daily,
            chrono_tz::Asia::Kathmandu,
            utc("2026-11-21T10:20:00Z"),
        );
        assert_eq!(plan.buckets.len(), 24);
        let last = &plan.buckets[23];
        assert_eq!(last.start, utc("2026-11-21T10:15:00Z"));
        assert_eq!(last.label, "16:00");
    }

    #[test]
    fn a_berlin_day_in_october_lasts_25_hours() {
        let plan = BucketPlan::custom(
            DateRange {
                start: NaiveDate::from_ymd_opt(2026, 10, 25).unwrap_or_default(),
                end: NaiveDate::from_ymd_opt(2026, 10, 25).unwrap_or_default(),
            },
            Interval::Hour,
            chrono_tz::Europe::Berlin,
        );
        assert_eq!(plan.buckets.len(), 25);
        assert_eq!(plan.buckets[2].label, "2026-10-25 02:00");
        assert_eq!(plan.buckets[3].label, "2026-10-25 02:00");
    }

    fn lord_howe_day(month: u32, day: u32) -> BucketPlan {
        let date = NaiveDate::from_ymd_opt(2026, month, day).unwrap_or_default();
        BucketPlan::custom(
            DateRange {
                start: date,
                end: date,
            },
            Interval::Hour,
            chrono_tz::Australia::Lord_Howe,
        )
    }

    /// `(label, minutes)` of each bucket from the second to the fifth.
    fn early_hours(plan: &BucketPlan) -> Vec<(String, i64)> {
        plan.buckets[1..5]
            .iter()
            .map(|bucket| {
                (
                    bucket.label.clone(),
                    (bucket.end - bucket.start).num_minutes(),
                )
            })
            .collect()
    }

    #[test]
    fn on_lord_howe_island_the_hour_the_clocks_skip_half_of_lasts_30_minutes() {
        // 2026-10-04 02:00 LHST (+10:30) becomes 02:30 LHDT (+11:00).
        let plan = lord_howe_day(10, 4);
        assert_eq!(plan.buckets.len(), 24);
        assert_eq!(
            early_hours(&plan),
            [
                ("2026-10-04 01:00".into(), 60),
                ("2026-10-04 02:30".into(), 30),
                ("2026-10-04 03:00".into(), 60),
                ("2026-10-04 04:00".into(), 60),
            ]
        );
        assert_eq!(plan.buckets[2].start, utc("2026-10-03T15:30:00Z"));
    }

    #[test]
    fn on_lord_howe_island_the_half_hour_the_clocks_repeat_is_a_bucket_of_its_own() {
        // 2026-04-05 02:00 LHDT (+11:00) becomes 01:30 LHST (+10:30).
        let plan = lord_howe_day(4, 5);
        assert_eq!(plan.buckets.len(), 25);
        assert_eq!(
            early_hours(&plan),
            [
                ("2026-04-05 01:00".into(), 60),
                ("2026-04-05 01:30".into(), 30),
                ("2026-04-05 02:00".into(), 60),
                ("2026-04-05 03:00".into(), 60),
            ]
        );
    }

    #[test]
    fn the_current_hour_on_lord_howe_island_starts_where_its_clocks_jumped() {
        let plan = BucketPlan::timeline(
            Timeline::Daily,
            chrono_tz::Australia::Lord_Howe,
            utc("2026-10-03T15:45:00Z"),
        );
        let last = plan
            .buckets
            .last()
            .map(|bucket| (bucket.start, bucket.label.clone()));
        assert_eq!(last, Some((utc("2026-10-03T15:30:00Z"), "02:30".into())));
    }
}

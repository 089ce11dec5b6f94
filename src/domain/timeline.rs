//! Historical reads: timelines, custom ranges, and the calendar buckets they are cut into.
//!
//! A [`BucketPlan`] is the list of half-open UTC intervals `[start, end)` that the calendar of a
//! time zone defines: hours, days or months as people in that zone live them, so a day can last
//! 23 or 25 hours and an hour can start at :30 or :45 UTC. Every real zone offset is a multiple of
//! 15 minutes, which is why 15-minute rollups answer every plan exactly.

use std::borrow::Cow;

use chrono::{DateTime, Datelike, Days, Months, NaiveDate, TimeDelta, TimeZone, Timelike, Utc};
use chrono_tz::Tz;

use super::field_errors::{Code, FieldErrors, In};

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
    const ALL: [(&'static str, Self); 4] = [
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
                    current + TimeDelta::hours(1),
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

/// The start of the local hour containing `at`.
fn floor_hour(at: DateTime<Utc>, tz: Tz) -> DateTime<Utc> {
    let local = at.with_timezone(&tz);
    at - TimeDelta::seconds(i64::from(local.minute() * 60 + local.second()))
        - TimeDelta::nanoseconds(i64::from(local.nanosecond()))
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
        // 90 minutes on lands inside the local hour after the next boundary even when the offset
        // changes in between; flooring returns to that boundary, as the zone's clocks show it.
        let next = floor_hour(at + TimeDelta::minutes(90), tz).min(end);
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

/// The parsed query of the historical routes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HistoricalQuery {
    /// Which timeline.
    pub timeline: Timeline,
    /// Zone of buckets and labels.
    pub tz: Tz,
}

/// The parsed query of the custom route.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CustomQuery {
    /// Days asked for.
    pub range: DateRange,
    /// Bucket size.
    pub interval: Interval,
    /// Zone of dates, buckets and labels.
    pub tz: Tz,
}

/// The decoded pairs of a query string; the first occurrence of a name wins.
#[derive(Debug, Default)]
pub struct QueryParams<'q>(Vec<(Cow<'q, str>, Cow<'q, str>)>);

impl<'q> QueryParams<'q> {
    /// Decodes a raw query string (`None` when the URL had none).
    pub fn parse(query: Option<&'q str>) -> Self {
        Self(query.map_or_else(Vec::new, |query| {
            form_urlencoded::parse(query.as_bytes()).collect()
        }))
    }

    fn get(&self, name: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(key, _)| key == name)
            .map(|(_, value)| value.as_ref())
    }
}

impl HistoricalQuery {
    /// `timeline` (required) and `tz` (optional, IANA, default UTC).
    pub fn parse(params: &QueryParams<'_>) -> Result<Self, FieldErrors> {
        let mut errors = FieldErrors::new();
        let timeline = match params.get("timeline") {
            None | Some("") => {
                errors.push(
                    In::Query,
                    "timeline",
                    Code::Required,
                    "`timeline` is required: daily, weekly, monthly or yearly",
                );
                None
            }
            Some(text) => {
                let found = Timeline::ALL
                    .iter()
                    .find(|(name, _)| *name == text)
                    .map(|(_, t)| *t);
                if found.is_none() {
                    errors.push(
                        In::Query,
                        "timeline",
                        Code::Enum,
                        format!(
                            "`timeline` must be daily, weekly, monthly or yearly, not {text:?}"
                        ),
                    );
                }
                found
            }
        };
        let tz = parse_tz(params, &mut errors);
        match (timeline, tz) {
            (Some(timeline), Some(tz)) if errors.is_empty() => Ok(Self { timeline, tz }),
            _ => Err(errors),
        }
    }
}

/// Longest custom range with hourly buckets, in days.
pub const MAX_HOUR_DAYS: i64 = 31;
/// Longest custom range with daily buckets, in days.
pub const MAX_DAY_DAYS: i64 = 366;
/// Longest custom range with monthly buckets, in years.
pub const MAX_MONTH_YEARS: u32 = 10;

impl CustomQuery {
    /// `start_date`, `end_date` (required), `interval` (hour, day or month; default day), `tz`.
    pub fn parse(params: &QueryParams<'_>) -> Result<Self, FieldErrors> {
        let mut errors = FieldErrors::new();
        let start = parse_date(params, "start_date", &mut errors);
        let end = parse_date(params, "end_date", &mut errors);
        let interval = match params.get("interval") {
            None | Some("") | Some("day") => Some(Interval::Day),
            Some("hour") => Some(Interval::Hour),
            Some("month") => Some(Interval::Month),
            Some(other) => {
                errors.push(
                    In::Query,
                    "interval",
                    Code::Enum,
                    format!("`interval` must be hour, day or month, not {other:?}"),
                );
                None
            }
        };
        let tz = parse_tz(params, &mut errors);
        let (Some(start), Some(end), Some(interval), Some(tz)) = (start, end, interval, tz) else {
            return Err(errors);
        };
        if start > end {
            errors.push(
                In::Query,
                "start_date",
                Code::Range,
                "`start_date` must not be after `end_date`",
            );
            return Err(errors);
        }
        let days = (end - start).num_days() + 1;
        let too_long = match interval {
            Interval::Hour => (days > MAX_HOUR_DAYS)
                .then(|| format!("at most {MAX_HOUR_DAYS} days with interval=hour")),
            Interval::Day => (days > MAX_DAY_DAYS)
                .then(|| format!("at most {MAX_DAY_DAYS} days with interval=day")),
            Interval::Month => start
                .checked_add_months(Months::new(12 * MAX_MONTH_YEARS))
                .is_none_or(|limit| end >= limit)
                .then(|| format!("at most {MAX_MONTH_YEARS} years with interval=month")),
        };
        if let Some(limit) = too_long {
            errors.push(
                In::Query,
                "end_date",
                Code::Maximum,
                format!("the range spans {days} days; {limit}"),
            );
        }
        errors.into_result(|| Self {
            range: DateRange { start, end },
            interval,
            tz,
        })
    }
}

fn parse_date(params: &QueryParams<'_>, name: &str, errors: &mut FieldErrors) -> Option<NaiveDate> {
    match params.get(name) {
        None | Some("") => {
            errors.push(
                In::Query,
                name,
                Code::Required,
                format!("`{name}` is required (YYYY-MM-DD)"),
            );
            None
        }
        Some(text) => {
            let shaped = text.len() == 10
                && text.bytes().enumerate().all(|(at, byte)| match at {
                    4 | 7 => byte == b'-',
                    _ => byte.is_ascii_digit(),
                });
            let parsed = shaped
                .then(|| NaiveDate::parse_from_str(text, "%Y-%m-%d").ok())
                .flatten();
            if parsed.is_none() {
                errors.push(
                    In::Query,
                    name,
                    Code::Format,
                    format!("`{name}` must be a date as YYYY-MM-DD, not {text:?}"),
                );
            }
            parsed
        }
    }
}

fn parse_tz(params: &QueryParams<'_>, errors: &mut FieldErrors) -> Option<Tz> {
    match params.get("tz") {
        None | Some("") => Some(Tz::UTC),
        Some(text) => {
            let parsed = text.parse::<Tz>().ok();
            if parsed.is_none() {
                errors.push(
                    In::Query,
                    "tz",
                    Code::Format,
                    format!("`tz` must be an IANA time zone such as Europe/Berlin, not {text:?}"),
                );
            }
            parsed
        }
    }
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
}

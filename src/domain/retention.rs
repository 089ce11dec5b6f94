//! How long raw readings are kept (`AIRQ_RAW_RETENTION_DAYS`), and the span an upload's
//! `measured_at` may therefore lie in.
//!
//! Why a type: three places must agree on one cutoff — the pruner that drops raw readings past
//! it, the raw export that refuses a range beginning before it, the current snapshot that cannot
//! be computed from readings no longer kept — and uploads must not bring back what the pruner
//! dropped: a reading measured before the cutoff would be pruned at once, and if it replaced an
//! earlier one with the same `measured_at`, the replaced one's sums would stay in the rollups.

use std::num::NonZeroU32;

use chrono::{DateTime, SecondsFormat, TimeDelta, Utc};

use super::field_errors::{Code, FieldErrors, In};

/// How far in the past a `measured_at` may lie.
pub const MAX_AGE: TimeDelta = TimeDelta::days(366);
/// How far in the future a `measured_at` may lie (device clocks drift).
pub const MAX_AHEAD: TimeDelta = TimeDelta::minutes(5);

/// How long raw readings are kept; rollups are kept whatever it says.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RawRetention(Option<NonZeroU32>);

impl RawRetention {
    /// Keeps raw readings for `days` days; 0 keeps them for good.
    pub fn days(days: u32) -> Self {
        Self(NonZeroU32::new(days))
    }

    /// The days kept, `None` when everything is kept.
    pub fn days_kept(self) -> Option<u32> {
        self.0.map(NonZeroU32::get)
    }

    /// The earliest instant raw readings are kept from at `now`; `None` when everything is kept.
    pub fn earliest(self, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
        self.0
            .map(|days| now - TimeDelta::days(i64::from(days.get())))
    }

    /// Refuses a raw export whose `start` lies before the readings kept at `now` (422 naming
    /// `start`, with the earliest instant available), instead of a silently shorter export.
    pub fn check_export(self, start: DateTime<Utc>, now: DateTime<Utc>) -> Result<(), FieldErrors> {
        let (Some(earliest), Some(days)) = (self.earliest(now), self.days_kept()) else {
            return Ok(());
        };
        if start >= earliest {
            return Ok(());
        }
        let mut errors = FieldErrors::new();
        errors.push(
            In::Query,
            "start",
            Code::Minimum,
            format!(
                "raw readings are kept for {days} days (AIRQ_RAW_RETENTION_DAYS): the earliest \
                 available instant is {}; timelines and custom ranges answer for older periods",
                earliest.to_rfc3339_opts(SecondsFormat::Millis, true)
            ),
        );
        Err(errors)
    }
}

/// Where an upload's `measured_at` may lie: from `max_age` ago (366 days, or the raw retention
/// when shorter) to [`MAX_AHEAD`] ahead of `now`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MeasuredWindow {
    /// The server's time of the upload.
    pub now: DateTime<Utc>,
    max_age: TimeDelta,
    /// Whether the raw retention, not the 366 days, sets `max_age`.
    by_retention: bool,
}

impl MeasuredWindow {
    /// The window at `now` under `retention`.
    pub fn at(now: DateTime<Utc>, retention: RawRetention) -> Self {
        match retention
            .days_kept()
            .map(|days| TimeDelta::days(i64::from(days)))
        {
            Some(kept) if kept < MAX_AGE => Self {
                now,
                max_age: kept,
                by_retention: true,
            },
            _ => Self {
                now,
                max_age: MAX_AGE,
                by_retention: false,
            },
        }
    }

    /// The earliest `measured_at` accepted.
    pub fn earliest(self) -> DateTime<Utc> {
        self.now - self.max_age
    }

    /// The latest `measured_at` accepted.
    pub fn latest(self) -> DateTime<Utc> {
        self.now + MAX_AHEAD
    }

    /// Why an earlier `measured_at` is refused, for `name`.
    pub fn too_old(self, name: &str) -> String {
        let days = self.max_age.num_days();
        if self.by_retention {
            format!(
                "`{name}` must not be more than {days} days ago: raw readings are kept for {days} \
                 days (AIRQ_RAW_RETENTION_DAYS)"
            )
        } else {
            format!("`{name}` must not be more than {days} days ago")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn now() -> DateTime<Utc> {
        DateTime::from_timestamp(1_800_000_000, 0).unwrap_or_default()
    }

    #[test]
    fn zero_days_keep_everything() {
        assert_eq!(RawRetention::days(0).earliest(now()), None);
        assert_eq!(
            RawRetention::days(30).earliest(now()),
            Some(now() - TimeDelta::days(30))
        );
    }

    #[test]
    fn uploads_go_back_366_days_or_the_retention_when_shorter() {
        let keep_all = MeasuredWindow::at(now(), RawRetention::default());
        assert_eq!(keep_all.earliest(), now() - TimeDelta::days(366));
        assert_eq!(
            keep_all.too_old("measured_at"),
            "`measured_at` must not be more than 366 days ago"
        );
        let month = MeasuredWindow::at(now(), RawRetention::days(30));
        assert_eq!(month.earliest(), now() - TimeDelta::days(30));
        assert!(month
            .too_old("measured_at")
            .contains("AIRQ_RAW_RETENTION_DAYS"));
        let decade = MeasuredWindow::at(now(), RawRetention::days(3650));
        assert_eq!(decade.earliest(), now() - TimeDelta::days(366));
        assert_eq!(month.latest(), now() + TimeDelta::minutes(5));
    }
}

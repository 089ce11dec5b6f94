//! The current snapshot: means over the last hour, status, last contact, latest position.
//!
//! The window is the hour before now; if the device sent nothing in it, the hour ending at its
//! last sample, so an offline device still shows what it last measured. Samples stamped slightly
//! in the future (`measured_at` up to 5 minutes ahead) belong to the current window too.

use chrono::{DateTime, TimeDelta, Utc};

use super::measure::Measurements;

/// How long a snapshot averages.
pub const WINDOW: TimeDelta = TimeDelta::hours(1);
/// A device is online when its last sample is at most this old.
pub const ONLINE_FOR: TimeDelta = TimeDelta::minutes(20);

/// Sums and count of samples; what every backend aggregates, so means are computed in one place.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Aggregate {
    /// Number of samples.
    pub count: u64,
    /// The sum of each value.
    pub sums: Measurements,
}

/// Pooling: the aggregate of two disjoint sets of samples.
impl std::ops::AddAssign for Aggregate {
    fn add_assign(&mut self, other: Self) {
        self.count += other.count;
        self.sums += other.sums;
    }
}

/// Taking away a subset: what remains of a sliding window's samples when its oldest leave. An
/// aggregate left empty is exactly empty (no rounding residue in its sums).
impl std::ops::SubAssign for Aggregate {
    fn sub_assign(&mut self, other: Self) {
        self.count = self.count.saturating_sub(other.count);
        if self.count == 0 {
            self.sums = Measurements::default();
        } else {
            self.sums -= other.sums;
        }
    }
}

impl Aggregate {
    /// The aggregate of one sample.
    pub fn of(values: &Measurements) -> Self {
        Self {
            count: 1,
            sums: *values,
        }
    }

    /// The sample-weighted means (integer values rounded half away from zero), or `None` for an
    /// empty aggregate.
    pub fn means(&self) -> Option<Measurements> {
        if self.count == 0 {
            return None;
        }
        let n = self.count as f64;
        Some(Measurements::from_fn(|measure| {
            let mean = self.sums[measure] / n;
            if measure.is_integer() {
                mean.round()
            } else {
                mean
            }
        }))
    }
}

/// Online or offline, derived from the last sample.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// A sample within the last 20 minutes.
    Online,
    /// Nothing for more than 20 minutes.
    Offline,
}

impl Status {
    /// The status at `now` of a device last seen at `last_seen`.
    pub fn at(now: DateTime<Utc>, last_seen: DateTime<Utc>) -> Self {
        if now - last_seen <= ONLINE_FOR {
            Self::Online
        } else {
            Self::Offline
        }
    }

    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Online => "online",
            Self::Offline => "offline",
        }
    }
}

/// The averaging window `(start, end]` at `now` for samples whose latest is `last_seen`, in
/// microseconds' terms but on whole seconds: a sample counts when the second it was taken in is
/// one of the 3,600 seconds ending with the one `now` is in (or, when nothing is in those, with
/// the one `last_seen` is in). Whole seconds let the embedded store answer from per-second sums
/// (`src/store/sqlite/recent_seconds.rs`) exactly what a pass over the raw rows would, for an
/// owner of 10,000 devices as for one; a sample's sub-second position never moves it in or out.
pub fn window(now: DateTime<Utc>, last_seen: DateTime<Utc>) -> (DateTime<Utc>, DateTime<Utc>) {
    let start = if is_fallback(now, last_seen) {
        last_seen - WINDOW
    } else {
        now - WINDOW
    };
    (last_micro_of_second(start), last_micro_of_second(last_seen))
}

/// Whether the window at `now` is the hour before `last_seen`, the last hour having no samples.
pub fn is_fallback(now: DateTime<Utc>, last_seen: DateTime<Utc>) -> bool {
    second_of(last_seen) <= second_of(now - WINDOW)
}

/// The whole second `instant` is in.
fn second_of(instant: DateTime<Utc>) -> i64 {
    instant.timestamp()
}

/// The last microsecond of the second `instant` is in.
fn last_micro_of_second(instant: DateTime<Utc>) -> DateTime<Utc> {
    DateTime::from_timestamp(second_of(instant), 999_999_000).unwrap_or(instant)
}

/// A position with the time of the sample that carried it.
#[derive(Debug, Clone, PartialEq)]
pub struct LocatedAt {
    /// Latitude.
    pub lat: f64,
    /// Longitude.
    pub lon: f64,
    /// Position source.
    pub provider: String,
    /// When the sample was taken.
    pub at: DateTime<Utc>,
}

/// The latest located sample of a device, as the map shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct LatestLocated {
    /// Position and time.
    pub position: LocatedAt,
    /// Its AQI.
    pub aqi: i64,
    /// Its PM2.5.
    pub pm2_5: f64,
    /// Its temperature.
    pub temperature: f64,
}

/// A current snapshot.
#[derive(Debug, Clone, PartialEq)]
pub struct Snapshot {
    /// Means over the window.
    pub means: Measurements,
    /// Samples averaged.
    pub sample_count: u64,
    /// Online or offline.
    pub status: Status,
    /// Time of the latest sample.
    pub last_seen: DateTime<Utc>,
    /// Latest known position.
    pub location: Option<LocatedAt>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::Measure;

    fn at(minute: i64) -> DateTime<Utc> {
        DateTime::<Utc>::UNIX_EPOCH + TimeDelta::minutes(minute)
    }

    #[test]
    fn status_flips_after_twenty_minutes() {
        let now = at(100);
        assert_eq!(
            Status::at(now, now - TimeDelta::seconds(19 * 60 + 59)),
            Status::Online
        );
        assert_eq!(
            Status::at(now, now - TimeDelta::minutes(20)),
            Status::Online
        );
        assert_eq!(
            Status::at(now, now - TimeDelta::seconds(20 * 60 + 1)),
            Status::Offline
        );
    }

    #[test]
    fn the_window_falls_back_to_the_hour_before_the_last_sample() {
        let edge = |minutes| at(minutes) + TimeDelta::microseconds(999_999);
        assert_eq!(window(at(100), at(90)), (edge(40), edge(90)));
        assert_eq!(window(at(500), at(90)), (edge(30), edge(90)));
        assert_eq!(window(at(100), at(103)), (edge(40), edge(103)));
        assert!(is_fallback(at(100), at(40)));
        assert!(!is_fallback(at(100), at(40) + TimeDelta::seconds(1)));
    }

    #[test]
    fn the_window_counts_whole_seconds() {
        let now = at(100) + TimeDelta::milliseconds(700);
        let (start, end) = window(now, now - TimeDelta::milliseconds(500));
        assert_eq!(start, at(40) + TimeDelta::microseconds(999_999));
        assert_eq!(end, at(100) + TimeDelta::microseconds(999_999));
    }

    #[test]
    fn aqi_mean_rounds_half_away_from_zero() {
        let mut aggregate = Aggregate {
            count: 2,
            ..Aggregate::default()
        };
        aggregate.sums[Measure::Aqi] = 3.0;
        assert_eq!(aggregate.means().map(|m| m.aqi()), Some(2));
        assert_eq!(Aggregate::default().means(), None);
    }
}

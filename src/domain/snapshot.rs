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

/// The averaging window `(start, end]` at `now` for samples whose latest is `last_seen`.
pub fn window(now: DateTime<Utc>, last_seen: DateTime<Utc>) -> (DateTime<Utc>, DateTime<Utc>) {
    if last_seen > now - WINDOW {
        (now - WINDOW, last_seen)
    } else {
        (last_seen - WINDOW, last_seen)
    }
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
        assert_eq!(window(at(100), at(90)), (at(40), at(90)));
        assert_eq!(window(at(500), at(90)), (at(30), at(90)));
        assert_eq!(window(at(100), at(103)), (at(40), at(103)));
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

//! The current snapshot of one device or of all an owner's devices pooled.

use chrono::{DateTime, Utc};

use crate::domain::snapshot::window;
use crate::domain::{RawRetention, Snapshot, Status};
use crate::store::{Fleet, ReadingStore, StoreError};

/// What can be said of the current air quality of some devices.
#[derive(Debug, Clone, PartialEq)]
pub enum Current {
    /// The snapshot.
    Known(Snapshot),
    /// None of them ever reported.
    NeverReported,
    /// Their latest readings are older than the raw retention keeps: the snapshot's hour is
    /// (or may be, while the pruner catches up) gone, so no snapshot is made up from part of it.
    PastRetention {
        /// The latest reading's time.
        last_seen: DateTime<Utc>,
    },
}

impl Current {
    /// The snapshot, when there is one.
    pub fn known(self) -> Option<Snapshot> {
        match self {
            Self::Known(snapshot) => Some(snapshot),
            Self::NeverReported | Self::PastRetention { .. } => None,
        }
    }
}

/// The current snapshot of the fleet's devices pooled, with raw readings kept as `retention`
/// says.
pub async fn snapshot(
    store: &dyn ReadingStore,
    fleet: Fleet<'_>,
    now: DateTime<Utc>,
    retention: RawRetention,
) -> Result<Current, StoreError> {
    if fleet.devices.is_empty() {
        return Ok(Current::NeverReported);
    }
    let Some(parts) = store.current(fleet, now).await? else {
        return Ok(Current::NeverReported);
    };
    let (after, _) = window(now, parts.last_seen);
    if retention
        .earliest(now)
        .is_some_and(|earliest| after < earliest)
    {
        return Ok(Current::PastRetention {
            last_seen: parts.last_seen,
        });
    }
    Ok(parts.sums.means().map_or(Current::NeverReported, |means| {
        Current::Known(Snapshot {
            means,
            sample_count: parts.sums.count,
            status: Status::at(now, parts.last_seen),
            last_seen: parts.last_seen,
            location: parts.location,
        })
    }))
}

//! The current snapshot of one device or of all an owner's devices pooled.

use chrono::{DateTime, Utc};

use crate::domain::snapshot::window;
use crate::domain::{DeviceUuid, LocatedAt, RawRetention, Snapshot, Status};
use crate::store::{ReadingStore, StoreError};

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

/// The current snapshot of `devices` pooled, with raw readings kept as `retention` says.
pub async fn snapshot(
    store: &dyn ReadingStore,
    devices: &[DeviceUuid],
    now: DateTime<Utc>,
    retention: RawRetention,
) -> Result<Current, StoreError> {
    if devices.is_empty() {
        return Ok(Current::NeverReported);
    }
    let Some(last_seen) = store.last_seen(devices).await? else {
        return Ok(Current::NeverReported);
    };
    let (after, until) = window(now, last_seen);
    if retention
        .earliest(now)
        .is_some_and(|earliest| after < earliest)
    {
        return Ok(Current::PastRetention { last_seen });
    }
    let (aggregate, location) = tokio::try_join!(
        store.aggregate(devices, after, until),
        latest_location(store, devices)
    )?;
    Ok(aggregate.means().map_or(Current::NeverReported, |means| {
        Current::Known(Snapshot {
            means,
            sample_count: aggregate.count,
            status: Status::at(now, last_seen),
            last_seen,
            location,
        })
    }))
}

/// The position of the latest located sample of any of `devices`.
async fn latest_location(
    store: &dyn ReadingStore,
    devices: &[DeviceUuid],
) -> Result<Option<LocatedAt>, StoreError> {
    let located = store.latest_located(devices).await?;
    Ok(located
        .into_iter()
        .map(|(_, latest, _)| latest.position)
        .max_by_key(|position| position.at))
}

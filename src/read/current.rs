//! The current snapshot of one device or of all an owner's devices pooled.

use chrono::{DateTime, Utc};

use crate::domain::snapshot::window;
use crate::domain::{DeviceUuid, LocatedAt, Snapshot, Status};
use crate::store::{ReadingStore, StoreError};

/// The current snapshot of `devices` pooled, or `None` when none of them ever reported.
pub async fn snapshot(
    store: &dyn ReadingStore,
    devices: &[DeviceUuid],
    now: DateTime<Utc>,
) -> Result<Option<Snapshot>, StoreError> {
    if devices.is_empty() {
        return Ok(None);
    }
    let Some(last_seen) = store.last_seen(devices).await? else {
        return Ok(None);
    };
    let (after, until) = window(now, last_seen);
    let (aggregate, location) = tokio::try_join!(
        store.aggregate(devices, after, until),
        latest_location(store, devices)
    )?;
    Ok(aggregate.means().map(|means| Snapshot {
        means,
        sample_count: aggregate.count,
        status: Status::at(now, last_seen),
        last_seen,
        location,
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

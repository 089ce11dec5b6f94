//! Reads composed from [`ReadingStore`] calls: the current snapshot and bucketed series.
//!
//! Composing here, once, instead of in each backend, is what makes every backend answer the same
//! question the same way: backends only sum and count, the rules (window, fallback, status,
//! rounding, empty buckets) live in [`crate::domain`] and are applied here.

use chrono::{DateTime, Utc};

use super::{ReadingStore, StoreError};
use crate::domain::snapshot::window;
use crate::domain::timeline::Bucket;
use crate::domain::{BucketPlan, DeviceUuid, Measurements, Snapshot, Status};

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
        store.latest_location(devices)
    )?;
    Ok(aggregate.means().map(|means| Snapshot {
        means,
        sample_count: aggregate.count,
        status: Status::at(now, last_seen),
        last_seen,
        location,
    }))
}

/// The non-empty buckets of `plan` for `devices` pooled, oldest first, with their means.
pub async fn series<'p>(
    store: &dyn ReadingStore,
    devices: &[DeviceUuid],
    plan: &'p BucketPlan,
) -> Result<Vec<(&'p Bucket, Measurements)>, StoreError> {
    if devices.is_empty() {
        return Ok(Vec::new());
    }
    let aggregates = store.buckets(devices, plan).await?;
    Ok(plan
        .buckets
        .iter()
        .zip(aggregates)
        .filter_map(|(bucket, aggregate)| aggregate.means().map(|means| (bucket, means)))
        .collect())
}

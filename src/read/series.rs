//! Bucketed series: timelines and custom ranges, of one device or pooled.

use chrono::{DateTime, Utc};
use chrono_tz::Tz;

use crate::domain::timeline::Bucket;
use crate::domain::{BucketPlan, CustomQuery, HistoricalQuery, Measurements};
use crate::store::{Fleet, ReadingStore, StoreError};

/// The non-empty buckets of a plan with their means, oldest first.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    /// The zone the buckets were cut in (timestamps are shown with its offset).
    pub tz: Tz,
    /// Each non-empty bucket with the means of its samples.
    pub points: Vec<(Bucket, Measurements)>,
}

/// The timeline `query` asks for, at `now`, of the fleet's devices pooled.
pub async fn timeline(
    store: &dyn ReadingStore,
    fleet: Fleet<'_>,
    query: HistoricalQuery,
    now: DateTime<Utc>,
) -> Result<Series, StoreError> {
    series(
        store,
        fleet,
        BucketPlan::timeline(query.timeline, query.tz, now),
    )
    .await
}

/// The custom range `query` asks for, of the fleet's devices pooled.
pub async fn custom(
    store: &dyn ReadingStore,
    fleet: Fleet<'_>,
    query: CustomQuery,
) -> Result<Series, StoreError> {
    series(
        store,
        fleet,
        BucketPlan::custom(query.range, query.interval, query.tz),
    )
    .await
}

async fn series(
    store: &dyn ReadingStore,
    fleet: Fleet<'_>,
    plan: BucketPlan,
) -> Result<Series, StoreError> {
    let aggregates = if fleet.devices.is_empty() {
        Vec::new()
    } else {
        store.buckets(fleet, &plan).await?
    };
    let points = plan
        .buckets
        .into_iter()
        .zip(aggregates)
        .filter_map(|(bucket, aggregate)| aggregate.means().map(|means| (bucket, means)))
        .collect();
    Ok(Series {
        tz: plan.tz,
        points,
    })
}

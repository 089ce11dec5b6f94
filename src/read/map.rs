//! The community map: every public device with a public location that has a located sample,
//! with that sample's values and the device's online status.

use std::collections::HashMap;

use chrono::{DateTime, Utc};

use crate::domain::{BoundingBox, Device, LatestLocated, Status};
use crate::store::{DeviceStore, ReadingStore, StoreError};

/// One device on the map.
#[derive(Debug, Clone, PartialEq)]
pub struct MapEntry {
    /// The device.
    pub device: Device,
    /// Its latest located sample.
    pub latest: LatestLocated,
    /// Online or offline, from its last sample of any kind.
    pub status: Status,
}

/// The map at `now`, in the device store's order.
pub async fn entries(
    devices: &dyn DeviceStore,
    readings: &dyn ReadingStore,
    now: DateTime<Utc>,
) -> Result<Vec<MapEntry>, StoreError> {
    let members = devices.map_members().await?;
    let ids: Vec<_> = members.iter().map(|device| device.id).collect();
    let mut latest: HashMap<_, _> = readings
        .latest_located(&ids)
        .await?
        .into_iter()
        .map(|(id, sample, last_seen)| (id, (sample, last_seen)))
        .collect();
    Ok(members
        .into_iter()
        .filter_map(|device| {
            let (latest, last_seen) = latest.remove(&device.id)?;
            Some(MapEntry {
                device,
                latest,
                status: Status::at(now, last_seen),
            })
        })
        .collect())
}

/// The entries whose position lies inside `bbox` (all of them without one), in their order.
pub fn within(
    entries: &[MapEntry],
    bbox: Option<BoundingBox>,
) -> impl Iterator<Item = &MapEntry> + '_ {
    entries.iter().filter(move |entry| {
        bbox.is_none_or(|bbox| bbox.contains(entry.latest.position.lat, entry.latest.position.lon))
    })
}

//! The community map: every public device with a public location that has a located sample,
//! with that sample's values and the device's online status.
//!
//! The map is read once per cache period, at 100,000 devices, so what did not change since the
//! period before is not read again ([`MapState`]): the members (the devices, parsed, in the
//! device store's order) are kept while the device store's [`DevicesVersion`] stays the same,
//! and of the latest located samples only those of the devices the reading store says were
//! written since ([`ReadingStore::written_since`]) are read anew; the statuses, which move with
//! the clock, are worked out again from each device's last contact. Reading 100,000 devices
//! and their samples every period was a half-second rebuild (`bench/RESULTS.md`, twenty-third
//! session). A backend that cannot tell what was written has every sample read each period.

use std::collections::HashMap;
use std::sync::Arc;

use chrono::{DateTime, Utc};

use crate::domain::{BoundingBox, Device, DeviceName, DeviceUuid, LatestLocated, Status};
use crate::store::{DeviceStore, DevicesVersion, ReadingStore, StoreError, WriteMark};

/// One device on the map.
#[derive(Debug, Clone, PartialEq)]
pub struct MapEntry {
    /// The device, shared with the [`MapState`] it was read with.
    pub device: Arc<MapMember>,
    /// Its latest located sample.
    pub latest: Arc<LatestLocated>,
    /// Online or offline, from its last sample of any kind.
    pub status: Status,
}

/// What the map keeps of a member device: what its feed shows, not the owner or the upload
/// identifier (kept for 100,000 devices from one period to the next, the whole [`Device`]
/// took twice the memory).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MapMember {
    /// Path id.
    pub id: DeviceUuid,
    /// Display name.
    pub name: DeviceName,
    /// Outdoors or indoors.
    pub is_outdoor: bool,
}

impl From<Device> for MapMember {
    fn from(device: Device) -> Self {
        Self {
            id: device.id,
            name: device.name,
            is_outdoor: device.flags.is_outdoor,
        }
    }
}

/// What one read of the map leaves for the next: the members as read at one version of the
/// device store, each one's latest located sample and last contact, and where the reading store
/// left off.
#[derive(Debug, Default)]
pub struct MapState {
    version: Option<DevicesVersion>,
    members: Vec<Arc<MapMember>>,
    /// A member's position in `members`.
    index: HashMap<DeviceUuid, usize>,
    /// Per member (same positions): its latest located sample and last contact, if it has one.
    latest: Vec<Option<(Arc<LatestLocated>, DateTime<Utc>)>>,
    mark: Option<WriteMark>,
}

/// The map at `now`, in the device store's order, and the state to hand the next read.
/// `previous` is what the read before left, if any.
pub async fn entries(
    devices: &dyn DeviceStore,
    readings: &dyn ReadingStore,
    now: DateTime<Utc>,
    previous: Option<MapState>,
) -> Result<(Vec<MapEntry>, MapState), StoreError> {
    // The version and the mark before what they guard: a change racing the reads below is
    // read again next time rather than missed.
    let version = devices.version().await?;
    let previous = previous.filter(|state| state.version == Some(version));
    let written = readings
        .written_since(previous.as_ref().and_then(|state| state.mark))
        .await?;
    let mark = written.as_ref().map(|(_, mark)| *mark);
    let mut state = match (previous, written) {
        (Some(mut state), Some((written, _))) => {
            let asked: Vec<DeviceUuid> = written
                .into_iter()
                .filter(|device| state.index.contains_key(device))
                .collect();
            if !asked.is_empty() {
                let read = readings.latest_located(&asked).await?;
                state.update(&asked, read);
            }
            state
        }
        (previous, _) => {
            let members: Vec<Arc<MapMember>> = match previous {
                Some(state) => state.members,
                None => devices
                    .map_members()
                    .await?
                    .into_iter()
                    .map(|device| Arc::new(MapMember::from(device)))
                    .collect(),
            };
            let mut state = MapState {
                index: members
                    .iter()
                    .enumerate()
                    .map(|(position, device)| (device.id, position))
                    .collect(),
                latest: vec![None; members.len()],
                members,
                version: None,
                mark: None,
            };
            let ids: Vec<DeviceUuid> = state.members.iter().map(|device| device.id).collect();
            let read = readings.latest_located(&ids).await?;
            state.update(&ids, read);
            state
        }
    };
    state.version = Some(version);
    state.mark = mark;
    let entries = state
        .members
        .iter()
        .zip(&state.latest)
        .filter_map(|(device, latest)| {
            let (latest, last_seen) = latest.as_ref()?;
            Some(MapEntry {
                device: Arc::clone(device),
                latest: Arc::clone(latest),
                status: Status::at(now, *last_seen),
            })
        })
        .collect();
    Ok((entries, state))
}

impl MapState {
    /// Takes in the latest located samples read for the `asked` members: one without a located
    /// sample (any more: a replaced reading can take it away) leaves the map.
    fn update(
        &mut self,
        asked: &[DeviceUuid],
        read: Vec<(DeviceUuid, LatestLocated, DateTime<Utc>)>,
    ) {
        for device in asked {
            if let Some(&position) = self.index.get(device) {
                self.latest[position] = None;
            }
        }
        for (device, latest, last_seen) in read {
            if let Some(&position) = self.index.get(&device) {
                self.latest[position] = Some((Arc::new(latest), last_seen));
            }
        }
    }
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

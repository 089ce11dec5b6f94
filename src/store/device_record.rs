//! A device row as both device stores keep it, and its one conversion into a [`Device`].
//!
//! SQLite and PostgreSQL store the same columns with their own types; each backend reads a row
//! into a [`DeviceRecord`] (its ids and times already decoded), and [`DeviceRecord::into_device`]
//! decides, once, what counts as corrupt.

use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::StoreError;
use crate::domain::{Device, DeviceFlags, DeviceId, DeviceName, DeviceUuid, OwnerId};

/// The columns of a device, in the order every backend reads them.
pub(crate) const COLUMNS: &str =
    "id, device_id, owner, name, is_public, is_location_public, is_outdoor, created_at, updated_at";

/// The columns of a stored device.
#[derive(Debug)]
pub(crate) struct DeviceRecord {
    pub(crate) id: Uuid,
    pub(crate) device_id: String,
    pub(crate) owner: String,
    pub(crate) name: String,
    pub(crate) flags: DeviceFlags,
    pub(crate) created_at: DateTime<Utc>,
    pub(crate) updated_at: DateTime<Utc>,
}

impl DeviceRecord {
    /// The device, or [`StoreError::Corrupt`] when a stored value no longer parses.
    pub(crate) fn into_device(self) -> Result<Device, StoreError> {
        Ok(Device {
            device_id: DeviceId::parse(&self.device_id)
                .ok_or_else(|| StoreError::Corrupt(format!("device_id {:?}", self.device_id)))?,
            owner: OwnerId::parse(&self.owner)
                .ok_or_else(|| StoreError::Corrupt(format!("owner of device {}", self.id)))?,
            id: DeviceUuid::from_uuid(self.id),
            name: DeviceName::from_stored(self.name),
            flags: self.flags,
            created_at: self.created_at,
            updated_at: self.updated_at,
        })
    }
}

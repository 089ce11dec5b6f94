//! [`DeviceStore`] on the embedded database.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use rusqlite::{params, OptionalExtension, Row};
use uuid::Uuid;

use super::{from_micros, to_micros, Sqlite};
use crate::domain::{
    Device, DeviceFlags, DeviceId, DevicePage, DevicePatch, DeviceUuid, KeyHash, OwnerId,
    PagedDevices,
};
use crate::store::device_record::{DeviceRecord, COLUMNS};
use crate::store::{DeviceStore, DevicesVersion, KeyRecord, StoreError};

/// Devices in the embedded database.
#[derive(Debug, Clone)]
pub struct SqliteDevices {
    db: Arc<Sqlite>,
    /// Registrations, changes and deletions so far: the data directory is locked to one
    /// process, so every change of the table is one of this store's, and this count is its
    /// [`DevicesVersion`] (a scan of 100,000 rows per map period, otherwise).
    changes: Arc<AtomicU64>,
}

impl SqliteDevices {
    /// Devices stored in `db`.
    pub fn new(db: Arc<Sqlite>) -> Self {
        Self {
            db,
            changes: Arc::new(AtomicU64::new(0)),
        }
    }

    /// Counts a change, after it was written (or failed): a map read that took the version
    /// before it reads the table again next time.
    fn changed<T>(&self, outcome: T) -> T {
        self.changes.fetch_add(1, Ordering::AcqRel);
        outcome
    }
}

/// The raw columns of a device row, converted outside rusqlite's error type.
pub(super) struct DeviceRow {
    id: String,
    device_id: String,
    owner: String,
    name: String,
    flags: DeviceFlags,
    created_at: i64,
    updated_at: i64,
}

impl DeviceRow {
    /// Reads [`COLUMNS`] from the row's first columns.
    pub(super) fn read(row: &Row<'_>) -> rusqlite::Result<Self> {
        Ok(Self {
            id: row.get(0)?,
            device_id: row.get(1)?,
            owner: row.get(2)?,
            name: row.get(3)?,
            flags: DeviceFlags {
                is_public: row.get(4)?,
                is_location_public: row.get(5)?,
                is_outdoor: row.get(6)?,
            },
            created_at: row.get(7)?,
            updated_at: row.get(8)?,
        })
    }

    /// The device, or [`StoreError::Corrupt`].
    pub(super) fn into_device(self) -> Result<Device, StoreError> {
        DeviceRecord {
            id: parse_uuid(&self.id)?.as_uuid(),
            device_id: self.device_id,
            owner: self.owner,
            name: self.name,
            flags: self.flags,
            created_at: from_micros(self.created_at)?,
            updated_at: from_micros(self.updated_at)?,
        }
        .into_device()
    }
}

/// The devices of a query's rows.
fn collect(
    rows: impl Iterator<Item = rusqlite::Result<DeviceRow>>,
) -> Result<Vec<Device>, StoreError> {
    rows.map(|row| {
        row.map_err(StoreError::from)
            .and_then(DeviceRow::into_device)
    })
    .collect()
}

fn parse_uuid(text: &str) -> Result<DeviceUuid, StoreError> {
    Uuid::try_parse(text)
        .map(DeviceUuid::from_uuid)
        .map_err(|_| StoreError::Corrupt(format!("device id {text:?}")))
}

fn select_one(
    connection: &rusqlite::Connection,
    owner: &str,
    id: &str,
) -> Result<Option<Device>, StoreError> {
    connection
        .prepare_cached(&format!(
            "SELECT {COLUMNS} FROM devices WHERE id = ?1 AND owner = ?2"
        ))?
        .query_row(params![id, owner], DeviceRow::read)
        .optional()?
        .map(DeviceRow::into_device)
        .transpose()
}

#[async_trait]
impl DeviceStore for SqliteDevices {
    async fn create(&self, device: &Device, key_hash: KeyHash) -> Result<(), StoreError> {
        let device = device.clone();
        let created = self
            .db
            .write(move |connection| {
                connection
                    .prepare_cached(&format!(
                        "INSERT INTO devices ({COLUMNS}, key_hash) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)"
                    ))?
                    .execute(params![
                        device.id.to_string(),
                        device.device_id.as_str(),
                        device.owner.as_str(),
                        device.name.as_str(),
                        device.flags.is_public,
                        device.flags.is_location_public,
                        device.flags.is_outdoor,
                        to_micros(device.created_at),
                        to_micros(device.updated_at),
                        key_hash.as_bytes().as_slice(),
                    ])?;
                Ok(())
            })
            .await;
        self.changed(created)
    }

    async fn list(&self, owner: &OwnerId) -> Result<Vec<Device>, StoreError> {
        let owner = owner.as_str().to_owned();
        self.db
            .read(move |connection| {
                let mut statement = connection.prepare_cached(&format!(
                    "SELECT {COLUMNS} FROM devices WHERE owner = ?1 ORDER BY created_at, id"
                ))?;
                let devices = collect(statement.query_map([owner], DeviceRow::read)?);
                devices
            })
            .await
    }

    async fn owned_ids(&self, owner: &OwnerId) -> Result<Vec<DeviceUuid>, StoreError> {
        let owner = owner.as_str().to_owned();
        self.db
            .read(move |connection| {
                // From the index on (owner, created_at, id) alone.
                let mut statement = connection.prepare_cached(
                    "SELECT id FROM devices WHERE owner = ?1 ORDER BY created_at, id",
                )?;
                let ids = statement
                    .query_map([owner], |row| row.get::<_, String>(0))?
                    .map(|id| parse_uuid(&id?))
                    .collect();
                ids
            })
            .await
    }

    async fn list_page(
        &self,
        owner: &OwnerId,
        page: &DevicePage,
    ) -> Result<PagedDevices, StoreError> {
        let owner = owner.as_str().to_owned();
        let page = *page;
        let devices = self
            .db
            .read(move |connection| {
                // A row-value seek on devices_by_owner (owner, created_at, id).
                let devices = match page.after() {
                    None => collect(
                        connection
                            .prepare_cached(&format!(
                                "SELECT {COLUMNS} FROM devices WHERE owner = ?1 \
                                 ORDER BY created_at, id LIMIT ?2"
                            ))?
                            .query_map(params![owner, page.fetch()], DeviceRow::read)?,
                    ),
                    Some(after) => collect(
                        connection
                            .prepare_cached(&format!(
                                "SELECT {COLUMNS} FROM devices WHERE owner = ?1 \
                                 AND (created_at, id) > (?2, ?3) ORDER BY created_at, id LIMIT ?4"
                            ))?
                            .query_map(
                                params![
                                    owner,
                                    to_micros(after.created_at()),
                                    after.id().to_string(),
                                    page.fetch()
                                ],
                                DeviceRow::read,
                            )?,
                    ),
                };
                devices
            })
            .await?;
        Ok(page.finish(devices))
    }

    async fn get(&self, owner: &OwnerId, id: DeviceUuid) -> Result<Option<Device>, StoreError> {
        let owner = owner.as_str().to_owned();
        self.db
            .read(move |connection| select_one(connection, &owner, &id.to_string()))
            .await
    }

    async fn find(&self, id: DeviceUuid) -> Result<Option<Device>, StoreError> {
        self.db
            .read(move |connection| {
                connection
                    .prepare_cached(&format!("SELECT {COLUMNS} FROM devices WHERE id = ?1"))?
                    .query_row([id.to_string()], DeviceRow::read)
                    .optional()?
                    .map(DeviceRow::into_device)
                    .transpose()
            })
            .await
    }

    async fn update(
        &self,
        owner: &OwnerId,
        id: DeviceUuid,
        patch: &DevicePatch,
        now: DateTime<Utc>,
    ) -> Result<Option<Device>, StoreError> {
        let owner = owner.as_str().to_owned();
        let patch = patch.clone();
        let updated = self
            .db
            .write(move |connection| {
                let transaction = connection.transaction()?;
                let id = id.to_string();
                let Some(current) = select_one(&transaction, &owner, &id)? else {
                    return Ok(None);
                };
                let Some(patched) = patch.apply(&current, now) else {
                    return Ok(Some(current));
                };
                transaction
                    .prepare_cached(
                        "UPDATE devices SET name = ?1, is_public = ?2, is_location_public = ?3, \
                         is_outdoor = ?4, updated_at = ?5 WHERE id = ?6",
                    )?
                    .execute(params![
                        patched.name.as_str(),
                        patched.flags.is_public,
                        patched.flags.is_location_public,
                        patched.flags.is_outdoor,
                        to_micros(patched.updated_at),
                        id,
                    ])?;
                let updated = select_one(&transaction, &owner, &id)?;
                transaction.commit()?;
                Ok(updated)
            })
            .await;
        self.changed(updated)
    }

    async fn rotate_key(
        &self,
        owner: &OwnerId,
        id: DeviceUuid,
        key_hash: KeyHash,
        now: DateTime<Utc>,
    ) -> Result<Option<Device>, StoreError> {
        let owner = owner.as_str().to_owned();
        self.db
            .write(move |connection| {
                let transaction = connection.transaction()?;
                let id = id.to_string();
                let changed = transaction
                    .prepare_cached(
                        "UPDATE devices SET key_hash = ?1, updated_at = ?2 WHERE id = ?3 AND owner = ?4",
                    )?
                    .execute(params![key_hash.as_bytes().as_slice(), to_micros(now), id, owner])?;
                if changed == 0 {
                    return Ok(None);
                }
                let rotated = select_one(&transaction, &owner, &id)?;
                transaction.commit()?;
                Ok(rotated)
            })
            .await
    }

    async fn map_members(&self) -> Result<Vec<Device>, StoreError> {
        self.db
            .read(move |connection| {
                let mut statement = connection.prepare_cached(&format!(
                    "SELECT {COLUMNS} FROM devices WHERE is_public AND is_location_public ORDER BY created_at, id"
                ))?;
                let devices = collect(statement.query_map([], DeviceRow::read)?);
                devices
            })
            .await
    }

    async fn version(&self) -> Result<DevicesVersion, StoreError> {
        Ok(DevicesVersion::Changes(
            self.changes.load(Ordering::Acquire),
        ))
    }

    async fn delete(&self, owner: &OwnerId, id: DeviceUuid) -> Result<Option<Device>, StoreError> {
        let owner = owner.as_str().to_owned();
        let deleted = self
            .db
            .write(move |connection| {
                let transaction = connection.transaction()?;
                let id = id.to_string();
                let Some(device) = select_one(&transaction, &owner, &id)? else {
                    return Ok(None);
                };
                transaction
                    .prepare_cached("DELETE FROM devices WHERE id = ?1")?
                    .execute([&id])?;
                transaction.commit()?;
                Ok(Some(device))
            })
            .await;
        self.changed(deleted)
    }

    async fn credentials(&self, device_id: &DeviceId) -> Result<Option<KeyRecord>, StoreError> {
        let device_id = device_id.as_str().to_owned();
        self.db
            .read(move |connection| {
                let row = connection
                    .prepare_cached("SELECT id, owner, key_hash FROM devices WHERE device_id = ?1")?
                    .query_row([device_id], |row| {
                        Ok((
                            row.get::<_, String>(0)?,
                            row.get::<_, String>(1)?,
                            row.get::<_, Vec<u8>>(2)?,
                        ))
                    })
                    .optional()?;
                let Some((id, owner, hash)) = row else {
                    return Ok(None);
                };
                let hash: [u8; 32] = hash
                    .try_into()
                    .map_err(|_| StoreError::Corrupt(format!("key hash of device {id}")))?;
                Ok(Some(KeyRecord {
                    id: parse_uuid(&id)?,
                    owner: OwnerId::parse(&owner)
                        .map(Arc::new)
                        .ok_or_else(|| StoreError::Corrupt(format!("owner of device {id}")))?,
                    key_hash: KeyHash::from_bytes(hash),
                }))
            })
            .await
    }

    async fn ping(&self) -> Result<(), StoreError> {
        self.db
            .read(
                |connection| Ok(connection.query_row("SELECT 1", [], |row| row.get::<_, i64>(0))?),
            )
            .await
            .map(drop)
    }
}

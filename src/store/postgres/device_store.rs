//! [`DeviceStore`] on PostgreSQL.

use std::sync::Arc;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use deadpool_postgres::{GenericClient, Transaction};
use tokio_postgres::Row;

use super::bounded::BoundedPool;
use super::CREDENTIALS_CHANNEL;
use crate::domain::{
    Device, DeviceFlags, DeviceId, DevicePage, DevicePatch, DeviceUuid, KeyHash, OwnerId,
    PagedDevices,
};
use crate::store::device_record::{DeviceRecord, COLUMNS};
use crate::store::{DeviceStore, DevicesVersion, KeyRecord, StoreError};

/// Devices in PostgreSQL.
#[derive(Debug, Clone)]
pub struct PostgresDevices {
    bounded: BoundedPool,
}

impl PostgresDevices {
    /// Devices in the database behind `pool` (schema already applied by [`super::connect`]).
    pub fn new(bounded: BoundedPool) -> Self {
        Self { bounded }
    }
}

/// The device in a row over [`COLUMNS`].
pub(super) fn device(row: &Row) -> Result<Device, StoreError> {
    DeviceRecord {
        id: row.try_get(0)?,
        device_id: row.try_get(1)?,
        owner: row.try_get(2)?,
        name: row.try_get(3)?,
        flags: DeviceFlags {
            is_public: row.try_get(4)?,
            is_location_public: row.try_get(5)?,
            is_outdoor: row.try_get(6)?,
        },
        created_at: row.try_get(7)?,
        updated_at: row.try_get(8)?,
    }
    .into_device()
}

fn devices(rows: &[Row]) -> Result<Vec<Device>, StoreError> {
    rows.iter().map(device).collect()
}

async fn select_one(
    client: &impl GenericClient,
    owner: &OwnerId,
    id: DeviceUuid,
) -> Result<Option<Device>, StoreError> {
    let statement = client
        .prepare_cached(&format!(
            "SELECT {COLUMNS} FROM devices WHERE id = $1 AND owner = $2"
        ))
        .await?;
    let row = client
        .query_opt(&statement, &[&id.as_uuid(), &owner.as_str()])
        .await?;
    row.as_ref().map(device).transpose()
}

/// Announces a credential change to every process; delivered when the transaction commits.
async fn announce(client: &impl GenericClient, device_id: &DeviceId) -> Result<(), StoreError> {
    client
        .execute(
            "SELECT pg_notify($1, $2)",
            &[&CREDENTIALS_CHANNEL, &device_id.as_str()],
        )
        .await?;
    Ok(())
}

/// Commits a change to the device in `row` (none: nothing changed, the transaction is dropped)
/// and announces it to every process.
async fn commit_announced(
    transaction: Transaction<'_>,
    row: Option<Row>,
) -> Result<Option<Device>, StoreError> {
    let Some(row) = row else {
        return Ok(None);
    };
    let changed = device(&row)?;
    announce(&transaction, &changed.device_id).await?;
    transaction.commit().await?;
    Ok(Some(changed))
}

#[async_trait]
impl DeviceStore for PostgresDevices {
    async fn create(&self, device: &Device, key_hash: KeyHash) -> Result<(), StoreError> {
        self.bounded
            .run(async |client| {
                let statement = client
                    .prepare_cached(&format!(
                        "INSERT INTO devices ({COLUMNS}, key_hash) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)"
                    ))
                    .await?;
                client
                    .execute(
                        &statement,
                        &[
                            &device.id.as_uuid(),
                            &device.device_id.as_str(),
                            &device.owner.as_str(),
                            &device.name.as_str(),
                            &device.flags.is_public,
                            &device.flags.is_location_public,
                            &device.flags.is_outdoor,
                            &device.created_at,
                            &device.updated_at,
                            &key_hash.as_bytes().as_slice(),
                        ],
                    )
                    .await?;
                Ok(())
            })
            .await
    }

    async fn list(&self, owner: &OwnerId) -> Result<Vec<Device>, StoreError> {
        self.bounded
            .run(async |client| {
                let statement = client
                    .prepare_cached(&format!(
                        "SELECT {COLUMNS} FROM devices WHERE owner = $1 ORDER BY created_at, id"
                    ))
                    .await?;
                devices(&client.query(&statement, &[&owner.as_str()]).await?)
            })
            .await
    }

    async fn owned_ids(&self, owner: &OwnerId) -> Result<Vec<DeviceUuid>, StoreError> {
        self.bounded
            .run(async |client| {
                let statement = client
                    .prepare_cached(
                        "SELECT id FROM devices WHERE owner = $1 ORDER BY created_at, id",
                    )
                    .await?;
                Ok(client
                    .query(&statement, &[&owner.as_str()])
                    .await?
                    .iter()
                    .map(|row| DeviceUuid::from_uuid(row.get(0)))
                    .collect())
            })
            .await
    }

    async fn list_page(
        &self,
        owner: &OwnerId,
        page: &DevicePage,
    ) -> Result<PagedDevices, StoreError> {
        let fetch = i64::from(page.fetch());
        let rows = self
            .bounded
            .run(async |client| {
                // A row-value seek on devices_by_owner (owner, created_at, id).
                Ok(match page.after() {
                    None => {
                        let statement = client
                            .prepare_cached(&format!(
                                "SELECT {COLUMNS} FROM devices WHERE owner = $1 \
                                 ORDER BY created_at, id LIMIT $2"
                            ))
                            .await?;
                        client.query(&statement, &[&owner.as_str(), &fetch]).await?
                    }
                    Some(after) => {
                        let statement = client
                            .prepare_cached(&format!(
                                "SELECT {COLUMNS} FROM devices WHERE owner = $1 \
                                 AND (created_at, id) > ($2, $3) ORDER BY created_at, id LIMIT $4"
                            ))
                            .await?;
                        client
                            .query(
                                &statement,
                                &[
                                    &owner.as_str(),
                                    &after.created_at(),
                                    &after.id().as_uuid(),
                                    &fetch,
                                ],
                            )
                            .await?
                    }
                })
            })
            .await?;
        Ok(page.finish(devices(&rows)?))
    }

    async fn get(&self, owner: &OwnerId, id: DeviceUuid) -> Result<Option<Device>, StoreError> {
        self.bounded
            .run(async |client| select_one(&*client, owner, id).await)
            .await
    }

    async fn find(&self, id: DeviceUuid) -> Result<Option<Device>, StoreError> {
        self.bounded
            .run(async |client| {
                let statement = client
                    .prepare_cached(&format!("SELECT {COLUMNS} FROM devices WHERE id = $1"))
                    .await?;
                let row = client.query_opt(&statement, &[&id.as_uuid()]).await?;
                row.as_ref().map(device).transpose()
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
        self.bounded
            .run(async |client| {
                let transaction = client.transaction().await?;
                let Some(current) = select_one(&transaction, owner, id).await? else {
                    return Ok(None);
                };
                let Some(patched) = patch.apply(&current, now) else {
                    return Ok(Some(current));
                };
                let statement = transaction
                    .prepare_cached(&format!(
                        "UPDATE devices SET name = $1, is_public = $2, is_location_public = $3, is_outdoor = $4, \
                         updated_at = $5 WHERE id = $6 RETURNING {COLUMNS}"
                    ))
                    .await?;
                let row = transaction
                    .query_one(
                        &statement,
                        &[
                            &patched.name.as_str(),
                            &patched.flags.is_public,
                            &patched.flags.is_location_public,
                            &patched.flags.is_outdoor,
                            &patched.updated_at,
                            &id.as_uuid(),
                        ],
                    )
                    .await?;
                // Other processes cache the public map: a device made private must leave it at once.
                commit_announced(transaction, Some(row)).await
            })
            .await
    }

    async fn rotate_key(
        &self,
        owner: &OwnerId,
        id: DeviceUuid,
        key_hash: KeyHash,
        now: DateTime<Utc>,
    ) -> Result<Option<Device>, StoreError> {
        self.bounded
            .run(async |client| {
                let transaction = client.transaction().await?;
                let statement = transaction
                    .prepare_cached(&format!(
                        "UPDATE devices SET key_hash = $1, updated_at = $2 WHERE id = $3 AND owner = $4 RETURNING {COLUMNS}"
                    ))
                    .await?;
                let row = transaction
                    .query_opt(
                        &statement,
                        &[
                            &key_hash.as_bytes().as_slice(),
                            &now,
                            &id.as_uuid(),
                            &owner.as_str(),
                        ],
                    )
                    .await?;
                commit_announced(transaction, row).await
            })
            .await
    }

    async fn map_members(&self) -> Result<Vec<Device>, StoreError> {
        self.bounded
            .run(async |client| {
                let statement = client
                    .prepare_cached(&format!(
                        "SELECT {COLUMNS} FROM devices WHERE is_public AND is_location_public ORDER BY created_at, id"
                    ))
                    .await?;
                devices(&client.query(&statement, &[]).await?)
            })
            .await
    }

    async fn version(&self) -> Result<DevicesVersion, StoreError> {
        self.bounded
            .run(async |client| {
                let statement = client
                    .prepare_cached("SELECT count(*), max(updated_at) FROM devices")
                    .await?;
                let row = client.query_one(&statement, &[]).await?;
                Ok(DevicesVersion::Shared {
                    count: u64::try_from(row.try_get::<_, i64>(0)?).unwrap_or(0),
                    last_change: row.try_get(1)?,
                })
            })
            .await
    }

    async fn delete(&self, owner: &OwnerId, id: DeviceUuid) -> Result<Option<Device>, StoreError> {
        self.bounded
            .run(async |client| {
                let transaction = client.transaction().await?;
                let statement = transaction
                    .prepare_cached(&format!(
                        "DELETE FROM devices WHERE id = $1 AND owner = $2 RETURNING {COLUMNS}"
                    ))
                    .await?;
                let row = transaction
                    .query_opt(&statement, &[&id.as_uuid(), &owner.as_str()])
                    .await?;
                commit_announced(transaction, row).await
            })
            .await
    }

    async fn credentials(&self, device_id: &DeviceId) -> Result<Option<KeyRecord>, StoreError> {
        self.bounded
            .run(async |client| {
                let statement = client
                    .prepare_cached("SELECT id, owner, key_hash FROM devices WHERE device_id = $1")
                    .await?;
                let Some(row) = client.query_opt(&statement, &[&device_id.as_str()]).await? else {
                    return Ok(None);
                };
                let owner: String = row.try_get(1)?;
                let hash: Vec<u8> = row.try_get(2)?;
                let hash: [u8; 32] = hash
                    .try_into()
                    .map_err(|_| StoreError::Corrupt(format!("key hash of {device_id}")))?;
                Ok(Some(KeyRecord {
                    id: DeviceUuid::from_uuid(row.try_get(0)?),
                    owner: OwnerId::parse(&owner)
                        .map(Arc::new)
                        .ok_or_else(|| StoreError::Corrupt("device owner".into()))?,
                    key_hash: KeyHash::from_bytes(hash),
                }))
            })
            .await
    }

    async fn ping(&self) -> Result<(), StoreError> {
        self.bounded
            .run(async |client| {
                client.simple_query("SELECT 1").await?;
                Ok(())
            })
            .await
    }
}

//! What `airq migrate` writes into PostgreSQL, and reads back to check: devices upserted by id
//! with their key hashes, the receipt-id sequence moved past the copied readings, and the copy's
//! progress row (`schema/postgres/003_migration_progress.sql`).

use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::bounded::BoundedPool;
use super::device_store::device;
use super::CREDENTIALS_CHANNEL;
use crate::domain::{Device, DeviceUuid, KeyHash};
use crate::store::device_record::COLUMNS;
use crate::store::StoreError;

/// The device table and the reading ids of a PostgreSQL database, for a migration into it.
#[derive(Debug, Clone)]
pub struct MigrationTarget {
    bounded: BoundedPool,
}

impl MigrationTarget {
    /// The database behind `bounded` (schema already applied by [`super::connect`]).
    pub fn new(bounded: BoundedPool) -> Self {
        Self { bounded }
    }

    /// Inserts the devices, or brings a device stored under the same id to exactly these
    /// columns and key hash, in one transaction; how many rows it inserted or changed (a device
    /// already equal is not written again). Every change is announced on the credentials
    /// channel, so a server already running on the database drops what it cached.
    pub async fn upsert_devices(&self, devices: &[(Device, KeyHash)]) -> Result<u64, StoreError> {
        let ids: Vec<Uuid> = devices.iter().map(|(d, _)| d.id.as_uuid()).collect();
        let device_ids: Vec<&str> = devices.iter().map(|(d, _)| d.device_id.as_str()).collect();
        let owners: Vec<&str> = devices.iter().map(|(d, _)| d.owner.as_str()).collect();
        let names: Vec<&str> = devices.iter().map(|(d, _)| d.name.as_str()).collect();
        let public: Vec<bool> = devices.iter().map(|(d, _)| d.flags.is_public).collect();
        let location_public: Vec<bool> = devices
            .iter()
            .map(|(d, _)| d.flags.is_location_public)
            .collect();
        let outdoor: Vec<bool> = devices.iter().map(|(d, _)| d.flags.is_outdoor).collect();
        let created: Vec<DateTime<Utc>> = devices.iter().map(|(d, _)| d.created_at).collect();
        let updated: Vec<DateTime<Utc>> = devices.iter().map(|(d, _)| d.updated_at).collect();
        let hashes: Vec<&[u8]> = devices
            .iter()
            .map(|(_, hash)| hash.as_bytes().as_slice())
            .collect();
        self.bounded
            .run(async |client| {
                let transaction = client.transaction().await?;
                let changed = transaction
                    .query(
                        &format!(
                            "INSERT INTO devices ({COLUMNS}, key_hash) \
                             SELECT * FROM unnest($1::uuid[], $2::text[], $3::text[], $4::text[], \
                             $5::bool[], $6::bool[], $7::bool[], $8::timestamptz[], \
                             $9::timestamptz[], $10::bytea[]) \
                             ON CONFLICT (id) DO UPDATE SET ({COLUMNS}, key_hash) = ({excluded}) \
                             WHERE ({stored}) IS DISTINCT FROM ({excluded}) \
                             RETURNING device_id",
                            stored = qualified("devices"),
                            excluded = qualified("excluded"),
                        ),
                        &[
                            &ids,
                            &device_ids,
                            &owners,
                            &names,
                            &public,
                            &location_public,
                            &outdoor,
                            &created,
                            &updated,
                            &hashes,
                        ],
                    )
                    .await?;
                let announced: Vec<String> = changed
                    .iter()
                    .map(|row| row.try_get(0))
                    .collect::<Result<_, _>>()?;
                if !announced.is_empty() {
                    transaction
                        .execute(
                            "SELECT pg_notify($1, changed) FROM unnest($2::text[]) AS changed",
                            &[&CREDENTIALS_CHANNEL, &announced],
                        )
                        .await?;
                }
                transaction.commit().await?;
                Ok(u64::try_from(announced.len()).unwrap_or(u64::MAX))
            })
            .await
    }

    /// The stored devices among `ids`, with their key hashes.
    pub async fn devices(&self, ids: &[DeviceUuid]) -> Result<Vec<(Device, KeyHash)>, StoreError> {
        let ids: Vec<Uuid> = ids.iter().map(|id| id.as_uuid()).collect();
        self.bounded
            .run(async |client| {
                let rows = client
                    .query(
                        &format!("SELECT {COLUMNS}, key_hash FROM devices WHERE id = ANY($1)"),
                        &[&ids],
                    )
                    .await?;
                rows.iter()
                    .map(|row| {
                        let stored = device(row)?;
                        let hash: Vec<u8> = row.try_get(9)?;
                        let hash: [u8; 32] = hash.try_into().map_err(|_| {
                            StoreError::Corrupt(format!("key hash of {}", stored.device_id))
                        })?;
                        Ok((stored, KeyHash::from_bytes(hash)))
                    })
                    .collect()
            })
            .await
    }

    /// Moves the `reading_ids` sequence past `through` (never back), so the QuestDB pair's
    /// writers never hand out the receipt id of a copied reading again.
    pub async fn reserve_reading_ids(&self, through: i64) -> Result<(), StoreError> {
        if through < 1 {
            return Ok(());
        }
        self.bounded
            .run(async |client| {
                // The next `nextval` answers the set value plus the increment, the first id of a
                // block wholly past `through`; a block a running writer already took ends below
                // that too, since `last_value` is where it began.
                client
                    .execute(
                        "SELECT setval('reading_ids', greatest($1, last_value)) FROM reading_ids",
                        &[&through],
                    )
                    .await?;
                Ok(())
            })
            .await
    }

    /// The receipt id through which the readings of `source` were copied (0: none yet).
    pub async fn progress(&self, source: &str) -> Result<i64, StoreError> {
        self.bounded
            .run(async |client| {
                let row = client
                    .query_opt(
                        "SELECT readings_through FROM migration_progress WHERE source = $1",
                        &[&source],
                    )
                    .await?;
                Ok(match row {
                    Some(row) => row.try_get(0)?,
                    None => 0,
                })
            })
            .await
    }

    /// Records that the readings of `source` are copied through receipt id `through`.
    pub async fn record_progress(&self, source: &str, through: i64) -> Result<(), StoreError> {
        self.bounded
            .run(async |client| {
                client
                    .execute(
                        "INSERT INTO migration_progress (source, readings_through, updated_at) \
                         VALUES ($1, $2, now()) ON CONFLICT (source) DO UPDATE \
                         SET readings_through = excluded.readings_through, updated_at = now()",
                        &[&source, &through],
                    )
                    .await?;
                Ok(())
            })
            .await
    }
}

/// Every column of a device row with its key hash, qualified by `table`.
fn qualified(table: &str) -> String {
    COLUMNS
        .split(", ")
        .chain(["key_hash"])
        .map(|column| format!("{table}.{column}"))
        .collect::<Vec<_>>()
        .join(", ")
}

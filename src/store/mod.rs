//! Storage, behind small traits: the only module that speaks SQL.
//!
//! - [`DeviceStore`]: device metadata and credentials (embedded SQLite, or PostgreSQL).
//! - reading storage (embedded SQLite, or QuestDB) sits behind its own traits.
//!
//! Every method is async and takes domain types, so a backend is swapped by configuration without
//! touching a handler. A backend reports its own faults as [`StoreError`]; the HTTP layer turns
//! every one of them into an opaque 500 and logs the cause chain.

pub mod sqlite;

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use crate::domain::{Device, DeviceId, DevicePatch, DeviceUuid, KeyHash, OwnerId};

/// A fault of a storage backend.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The embedded database failed.
    #[error("embedded database")]
    Sqlite(#[from] rusqlite::Error),
    /// The data directory could not be prepared.
    #[error("data directory {path}")]
    DataDir {
        /// The directory.
        path: std::path::PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A blocking database task panicked or was cancelled.
    #[error("blocking store task")]
    Task(#[from] tokio::task::JoinError),
    /// A stored value does not parse back into its domain type.
    #[error("stored data is corrupt: {0}")]
    Corrupt(String),
}

/// What upload authentication needs to know about a `device_id`.
#[derive(Debug, Clone)]
pub struct DeviceCredentials {
    /// The device's path id.
    pub id: DeviceUuid,
    /// Its owner.
    pub owner: OwnerId,
    /// The hash of its current key.
    pub key_hash: KeyHash,
}

/// Device metadata. Every owner-scoped method answers `None` for a device of another owner, so a
/// handler cannot leak existence by accident.
#[async_trait]
pub trait DeviceStore: Send + Sync + std::fmt::Debug {
    /// Stores a new device with the hash of its first key.
    async fn create(&self, device: &Device, key_hash: KeyHash) -> Result<(), StoreError>;

    /// The owner's devices, by `created_at`, then `id`.
    async fn list(&self, owner: &OwnerId) -> Result<Vec<Device>, StoreError>;

    /// One of the owner's devices.
    async fn get(&self, owner: &OwnerId, id: DeviceUuid) -> Result<Option<Device>, StoreError>;

    /// A device of any owner, for the public routes (which check visibility themselves).
    async fn find(&self, id: DeviceUuid) -> Result<Option<Device>, StoreError>;

    /// Applies a patch to one of the owner's devices.
    async fn update(
        &self,
        owner: &OwnerId,
        id: DeviceUuid,
        patch: &DevicePatch,
        now: DateTime<Utc>,
    ) -> Result<Option<Device>, StoreError>;

    /// Replaces the key hash of one of the owner's devices.
    async fn rotate_key(
        &self,
        owner: &OwnerId,
        id: DeviceUuid,
        key_hash: KeyHash,
        now: DateTime<Utc>,
    ) -> Result<Option<Device>, StoreError>;

    /// Deletes one of the owner's devices; answers what was deleted.
    async fn delete(&self, owner: &OwnerId, id: DeviceUuid) -> Result<Option<Device>, StoreError>;

    /// The credentials behind a `device_id`, for upload authentication.
    async fn credentials(
        &self,
        device_id: &DeviceId,
    ) -> Result<Option<DeviceCredentials>, StoreError>;

    /// Whether the store answers (for `/readyz`).
    async fn ping(&self) -> Result<(), StoreError>;
}

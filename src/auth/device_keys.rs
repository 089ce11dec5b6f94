//! Device authentication for uploads: `X-Device-ID` + `X-Device-Key` → the device.
//!
//! Credentials are cached (moka) so the upload path does not query the device store per request.
//! The cache never outlives a credential: rotating a key or deleting a device evicts the entry at
//! once, and a lookup that raced with such an eviction does not put its (possibly stale) result
//! into the cache, because every eviction bumps a generation that the lookup checks before
//! inserting.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use moka::sync::Cache;

use crate::domain::{DeviceId, DeviceUuid, OwnerId};
use crate::store::{DeviceCredentials, DeviceStore, StoreError};

const CAPACITY: u64 = 200_000;
const IDLE: Duration = Duration::from_secs(600);

/// Why an upload's credentials were refused.
#[derive(Debug, thiserror::Error)]
pub enum DeviceAuthError {
    /// No device has this `device_id`, or the key does not match.
    #[error("unknown device or wrong key")]
    Refused,
    /// The store failed.
    #[error("looking up device credentials")]
    Store(#[from] StoreError),
}

/// The device an upload speaks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AuthenticatedDevice {
    /// Its path id.
    pub id: DeviceUuid,
}

/// Verifies device keys through a cache in front of the device store.
#[derive(Debug)]
pub struct DeviceKeys {
    store: Arc<dyn DeviceStore>,
    cache: Cache<DeviceId, Arc<DeviceCredentials>>,
    generation: AtomicU64,
}

impl DeviceKeys {
    /// A verifier over `store`.
    pub fn new(store: Arc<dyn DeviceStore>) -> Self {
        Self {
            store,
            cache: Cache::builder()
                .max_capacity(CAPACITY)
                .time_to_idle(IDLE)
                .build(),
            generation: AtomicU64::new(0),
        }
    }

    /// The device whose `device_id` and key these are.
    pub async fn authenticate(
        &self,
        device_id: &str,
        key: &str,
    ) -> Result<AuthenticatedDevice, DeviceAuthError> {
        let device_id = DeviceId::parse(device_id).ok_or(DeviceAuthError::Refused)?;
        let credentials = match self.cache.get(&device_id) {
            Some(credentials) => credentials,
            None => {
                let generation = self.generation.load(Ordering::Acquire);
                let credentials = Arc::new(
                    self.store
                        .credentials(&device_id)
                        .await?
                        .ok_or(DeviceAuthError::Refused)?,
                );
                if self.generation.load(Ordering::Acquire) == generation {
                    self.cache.insert(device_id, Arc::clone(&credentials));
                }
                credentials
            }
        };
        if credentials.key_hash.verifies(key) {
            Ok(AuthenticatedDevice { id: credentials.id })
        } else {
            Err(DeviceAuthError::Refused)
        }
    }

    /// Forgets a device's cached credentials (after a rotation or deletion).
    pub fn evict(&self, device_id: &DeviceId) {
        self.generation.fetch_add(1, Ordering::AcqRel);
        self.cache.invalidate(device_id);
    }

    /// The owner of a cached device, if cached (for diagnostics and tests of the cache).
    pub fn cached_owner(&self, device_id: &DeviceId) -> Option<OwnerId> {
        self.cache
            .get(device_id)
            .map(|credentials| credentials.owner.clone())
    }
}

//! Device authentication for uploads: `X-Device-ID` + `X-Device-Key` → the device.
//!
//! Credentials are cached (moka) so the upload path does not query the device store per request.
//! The cache never outlives a credential: rotating a key or deleting a device evicts the entry at
//! once. A lookup that raced with an eviction may still put its (possibly stale) result into the
//! cache, so every entry carries the generation it was loaded in, every eviction bumps the
//! generation, and an entry of an older generation counts as a miss. Evictions are rare (key
//! rotation, deletion), so the refetches they cause cost little. With several processes (PostgreSQL), evictions also arrive from the others through
//! the store's listener; while that listener is down the cache is distrusted and bypassed.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use moka::sync::Cache;

use crate::domain::{DeviceId, DeviceUuid, OwnerId};
use crate::metrics::CacheCounters;
use crate::store::{DeviceStore, KeyRecord, StoreError};

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
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuthenticatedDevice {
    /// Its path id.
    pub id: DeviceUuid,
    /// Its owner, whom its readings are stored for.
    pub owner: Arc<OwnerId>,
}

/// Verifies device keys through a cache in front of the device store.
#[derive(Debug)]
pub struct KeyCache {
    store: Arc<dyn DeviceStore>,
    cache: Cache<DeviceId, (Arc<KeyRecord>, u64)>,
    generation: AtomicU64,
    trusted: AtomicBool,
    lookups: CacheCounters,
}

impl KeyCache {
    /// A verifier over `store`; `trusted` says whether the cache may be used from the start
    /// (true for a single process; false until a cross-process listener is up). Each lookup
    /// counts in `lookups`: a hit when the cache answered, a miss when the store was asked.
    pub fn new(store: Arc<dyn DeviceStore>, trusted: bool, lookups: CacheCounters) -> Self {
        Self {
            store,
            cache: Cache::builder()
                .max_capacity(CAPACITY)
                .time_to_idle(IDLE)
                .build(),
            generation: AtomicU64::new(0),
            trusted: AtomicBool::new(trusted),
            lookups,
        }
    }

    /// The device whose `device_id` and key these are.
    pub async fn authenticate(
        &self,
        device_id: &str,
        key: &str,
    ) -> Result<AuthenticatedDevice, DeviceAuthError> {
        let device_id = DeviceId::parse(device_id).ok_or(DeviceAuthError::Refused)?;
        let generation = self.generation.load(Ordering::Acquire);
        let trusted = self.trusted.load(Ordering::Acquire);
        let cached = self
            .cache
            .get(&device_id)
            .filter(|(_, loaded_in)| trusted && *loaded_in == generation);
        self.lookups.record(cached.is_some());
        let credentials = match cached {
            Some((credentials, _)) => credentials,
            None => {
                let credentials = Arc::new(
                    self.store
                        .credentials(&device_id)
                        .await?
                        .ok_or(DeviceAuthError::Refused)?,
                );
                if trusted {
                    self.cache
                        .insert(device_id, (Arc::clone(&credentials), generation));
                }
                credentials
            }
        };
        if credentials.key_hash.verifies(key) {
            Ok(AuthenticatedDevice {
                id: credentials.id,
                owner: Arc::clone(&credentials.owner),
            })
        } else {
            Err(DeviceAuthError::Refused)
        }
    }

    /// Forgets a device's cached credentials (after a rotation or deletion).
    pub fn evict(&self, device_id: &DeviceId) {
        self.generation.fetch_add(1, Ordering::AcqRel);
        self.cache.invalidate(device_id);
    }

    /// Clears the cache and says whether it may be used from now on (it may not while
    /// invalidations from other processes could be missed).
    pub fn reset(&self, trusted: bool) {
        self.generation.fetch_add(1, Ordering::AcqRel);
        self.trusted.store(trusted, Ordering::Release);
        self.cache.invalidate_all();
    }
}

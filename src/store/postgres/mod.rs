//! The production device store: PostgreSQL through tokio-postgres and a deadpool pool.
//!
//! Several airq processes share one database. The schema is applied at start under an advisory
//! lock, so processes starting together do not race. Rotating a key or deleting a device sends a
//! `NOTIFY` in the same transaction; every process `LISTEN`s ([`listener`]) and evicts its cached
//! credentials when the notification arrives.

mod alert_store;
mod bounded;
mod device_store;
pub mod listener;
mod migration;

use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod};

use super::pg_tls::PgTarget;
use super::StoreError;

pub use alert_store::PostgresAlerts;
pub use bounded::BoundedPool;
pub use device_store::PostgresDevices;
pub use migration::MigrationTarget;

/// The schema, applied in order at every start.
const SCHEMA: &[&str] = &[
    include_str!("../../../schema/postgres/001_devices.sql"),
    include_str!("../../../schema/postgres/002_reading_ids.sql"),
    include_str!("../../../schema/postgres/003_migration_progress.sql"),
    include_str!("../../../schema/postgres/004_alerts.sql"),
];

/// Serialises schema changes of concurrent starts (an arbitrary, fixed advisory lock key).
const SCHEMA_LOCK: i64 = 0x6169_7271_0001;

/// Connections kept by one process.
const POOL_SIZE: usize = 16;

/// The channel on which changes of a device's credentials or public visibility are announced;
/// the payload is the `device_id`.
pub const CREDENTIALS_CHANNEL: &str = "airq_device_credentials";

/// A pool of connections to the device database, schema applied, and where it connects (for the
/// listener's own connection). The schema is applied without the calls' time bound: a start
/// waits for another process's start to finish applying it.
pub async fn connect(url: &str) -> Result<(BoundedPool, PgTarget), StoreError> {
    let (pool, target) = pool(url, POOL_SIZE)?;
    let mut client = pool.get().await?;
    let transaction = client.transaction().await?;
    transaction
        .execute("SELECT pg_advisory_xact_lock($1)", &[&SCHEMA_LOCK])
        .await?;
    for script in SCHEMA {
        transaction.batch_execute(script).await?;
    }
    transaction.commit().await?;
    Ok((BoundedPool::new(pool), target))
}

/// A pool of up to `size` connections to a PG-wire server (PostgreSQL, or QuestDB), TLS as the
/// URL's `sslmode` and `sslrootcert` say, and the parsed target.
pub(crate) fn pool(url: &str, size: usize) -> Result<(Pool, PgTarget), StoreError> {
    let target = PgTarget::parse(url)?;
    let manager = Manager::from_config(
        target.config.clone(),
        target.tls.clone(),
        ManagerConfig {
            recycling_method: RecyclingMethod::Fast,
        },
    );
    let pool = Pool::builder(manager)
        .max_size(size)
        .build()
        .map_err(|error| StoreError::Config(error.to_string()))?;
    Ok((pool, target))
}

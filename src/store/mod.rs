//! Storage, behind small traits: the only module that speaks SQL.
//!
//! - [`DeviceStore`]: device metadata and credentials (embedded SQLite, or PostgreSQL).
//!   Implementations: [`sqlite::SqliteDevices`], [`postgres::PostgresDevices`].
//! - [`ReadingSink`]: writes batches of readings, all or nothing (embedded: appends them to the
//!   ingestion log, folded into SQLite behind it; QuestDB over ILP, or the spool: the same log,
//!   forwarded to QuestDB behind it); owned by the [`batch_writer`], the only writer of readings
//!   in a process.
//! - [`ReadingStore`]: reads readings back (current window, calendar buckets, latest samples).
//! - [`AlertStore`]: alert rules, their per-device states and the outbox of their events, beside
//!   the devices. Implementations: [`sqlite::SqliteAlerts`], [`postgres::PostgresAlerts`].
//!
//! Every method is async and takes domain types, so a backend is swapped by configuration without
//! touching a handler. A backend reports its own faults as [`StoreError`]; the HTTP layer turns
//! every one of them into an opaque 500 and logs the cause chain.

pub mod alerts;
pub mod batch_writer;
mod columns;
mod device_record;
pub mod ingest_log;
pub mod pg_tls;
pub mod postgres;
pub mod questdb;
pub mod retention;
pub mod sqlite;

use std::collections::HashMap;
use std::future::Future;
use std::task::{Context, Poll};

use async_trait::async_trait;
use chrono::{DateTime, TimeDelta, Utc};
use tokio::sync::mpsc;

pub use alerts::{AlertStore, Observation};

use crate::domain::snapshot::window;
use crate::domain::{
    Aggregate, BucketPlan, Device, DeviceId, DevicePage, DevicePatch, DeviceUuid, KeyHash,
    LatestLocated, LocatedAt, OwnerId, PagedDevices, RawReading, ReadingId, StoredReading,
};

/// A fault of a storage backend.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The embedded database failed.
    #[error("embedded database")]
    Sqlite(#[from] rusqlite::Error),
    /// PostgreSQL failed.
    #[error("postgres")]
    Postgres(#[from] tokio_postgres::Error),
    /// A PG-wire connection string (PostgreSQL or QuestDB) is unusable, TLS settings included.
    #[error("PG-wire connection string")]
    ConnectionString(#[from] pg_tls::PgTlsError),
    /// No pooled PostgreSQL connection could be had.
    #[error("postgres pool")]
    Pool(#[from] deadpool_postgres::PoolError),
    /// A PG-wire call (PostgreSQL or QuestDB) did not finish within its time limit.
    #[error("the database did not answer within {0:?}")]
    Timeout(std::time::Duration),
    /// QuestDB refused or failed an ILP write.
    #[error("questdb ingestion")]
    QuestDb(#[from] ::questdb::Error),
    /// The QuestDB spool holds as many readings as it may; QuestDB is not taking them.
    #[error("the spool holds {0} readings QuestDB has not taken")]
    SpoolFull(i64),
    /// A directory of the store is in a format this airq does not read.
    #[error(transparent)]
    Format(#[from] crate::data_dir::format::FormatError),
    /// The embedded database was written by a newer airq (more schema scripts than this one knows).
    #[error("the embedded database has schema version {applied}, newer than this airq's {known}: it was written by a newer airq (see the README's \"Upgrades\")")]
    NewerSchema {
        /// The scripts the database had.
        applied: i64,
        /// The scripts this airq knows.
        known: i64,
    },
    /// The embedded store's fold is too far behind the log and has not caught up in time.
    #[error(
        "{0} readings wait to be folded into the database, which has not taken any for a while"
    )]
    FoldBehind(i64),
    /// A backend's configuration is unusable.
    #[error("configuration: {0}")]
    Config(String),
    /// The data directory could not be prepared.
    #[error("data directory {path}")]
    DataDir {
        /// The directory.
        path: std::path::PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A store's file could not be opened or synced.
    #[error("file {path}")]
    File {
        /// The file.
        path: std::path::PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A thread of a store could not be started.
    #[error("starting a store thread")]
    Thread(#[source] std::io::Error),
    /// A blocking database task panicked or was cancelled.
    #[error("blocking store task")]
    Task(#[from] tokio::task::JoinError),
    /// The embedded database's reader connections were closed to new reads.
    #[error("the embedded database's readers are closed")]
    ReadersClosed(#[from] tokio::sync::AcquireError),
    /// The task reading an export's pages ended before its last page.
    #[error("the export's reading task ended before its last page")]
    Interrupted,
    /// A stored value does not parse back into its domain type.
    #[error("stored data is corrupt: {0}")]
    Corrupt(String),
}

/// What upload authentication needs to know about a `device_id`.
#[derive(Debug, Clone)]
pub struct KeyRecord {
    /// The device's path id.
    pub id: DeviceUuid,
    /// Its owner (shared by every upload the cached record authenticates).
    pub owner: std::sync::Arc<OwnerId>,
    /// The hash of its current key.
    pub key_hash: KeyHash,
}

/// Where a [`ReadingStore::written_since`] left off: opaque to callers, meaningful only to the
/// store that answered it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WriteMark(pub(crate) i64);

/// How the device table stands, cheaply read: the same at two moments only if no device was
/// added, changed or deleted in between.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DevicesVersion {
    /// The changes one process has made, where no other can write (the embedded store's data
    /// directory is locked to one process).
    Changes(u64),
    /// A table other processes write too: how many devices there are and the latest change stamp
    /// (`updated_at`, set by every registration, change and key rotation). A deletion lowers the
    /// count, everything else moves the stamp on — unless a writer's clock ran backwards past
    /// the stamp, which the map, its one reader, tolerates (every replica empties its map on a
    /// change's `NOTIFY` anyway).
    Shared {
        /// How many devices there are.
        count: u64,
        /// The latest `updated_at`, `None` without devices.
        last_change: Option<DateTime<Utc>>,
    },
}

/// Device metadata. Every owner-scoped method answers `None` for a device of another owner, so a
/// handler cannot leak existence by accident.
#[async_trait]
pub trait DeviceStore: Send + Sync + std::fmt::Debug {
    /// Stores a new device with the hash of its first key.
    async fn create(&self, device: &Device, key_hash: KeyHash) -> Result<(), StoreError>;

    /// The owner's devices, by `created_at`, then `id`.
    async fn list(&self, owner: &OwnerId) -> Result<Vec<Device>, StoreError>;

    /// The ids of the owner's devices, in [`list`](Self::list)'s order: what an owner-wide read
    /// needs, without reading each device's row (an owner of 10,000 devices asks it per request).
    async fn owned_ids(&self, owner: &OwnerId) -> Result<Vec<DeviceUuid>, StoreError>;

    /// One page of [`list`](Self::list): the owner's devices after the page's cursor, in the
    /// same order, found by seeking the index on (owner, `created_at`, `id`), never by an offset.
    async fn list_page(
        &self,
        owner: &OwnerId,
        page: &DevicePage,
    ) -> Result<PagedDevices, StoreError>;

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

    /// Every device that is public with a public location, of any owner (the map's members).
    async fn map_members(&self) -> Result<Vec<Device>, StoreError>;

    /// The store's [`DevicesVersion`]: the same at two moments only if no device was added,
    /// changed or deleted in between (by any process sharing the store).
    async fn version(&self) -> Result<DevicesVersion, StoreError>;

    /// Deletes one of the owner's devices; answers what was deleted.
    async fn delete(&self, owner: &OwnerId, id: DeviceUuid) -> Result<Option<Device>, StoreError>;

    /// The credentials behind a `device_id`, for upload authentication.
    async fn credentials(&self, device_id: &DeviceId) -> Result<Option<KeyRecord>, StoreError>;

    /// Whether the store answers (for `/readyz`).
    async fn ping(&self) -> Result<(), StoreError>;
}

/// The write side of reading storage, driven by the batch writer on a thread of its own: the
/// QuestDB client and the ingestion log's file writes block, which is fine there and nowhere else.
#[async_trait]
pub trait ReadingSink: Send + std::fmt::Debug + 'static {
    /// Reserves `count` receipt ids, unique across every process of the deployment. Within a
    /// process an id is never handed out twice, not even after a failed write (a retry of the
    /// batch reuses its ids, a later batch does not), so ids are not dense. The embedded store
    /// records a failed batch's ids nowhere, so after a restart it may hand them out again
    /// (QuestDB's sequence never does); no two stored readings ever share an id.
    async fn allocate_ids(&mut self, count: usize) -> Result<Vec<ReadingId>, StoreError>;

    /// Writes the batch as one transaction: after `Ok` every row is committed, durable once
    /// [`when_durable`](Self::when_durable) says so; after `Err` none is visible. Writing the
    /// same rows again (a retry) must not duplicate them.
    async fn write(&mut self, batch: &[StoredReading]) -> Result<(), StoreError>;

    /// Runs `then` once `batch`, just written, and every batch before it are durable: at once
    /// (the default) for a sink whose commits are durable when they return; later, on a thread
    /// of the sink's, for one that syncs behind its commits so that the next batch is written
    /// meanwhile (and may make `batch` visible there first).
    fn when_durable(&mut self, batch: &[StoredReading], then: Box<dyn FnOnce() + Send>) {
        let _ = batch;
        then();
    }
}

/// Drops raw readings measured before an instant and keeps every rollup (raw retention,
/// `AIRQ_RAW_RETENTION_DAYS`; the embedded store: QuestDB drops its raw partitions itself, by the table's TTL).
#[async_trait]
pub trait RawPruner: Send + Sync + std::fmt::Debug {
    /// Drops at most `rows` raw readings measured before `before`, in one step that never holds
    /// up an upload; how many it dropped (fewer than `rows`: none are left).
    async fn prune_raw(&self, before: DateTime<Utc>, rows: usize) -> Result<usize, StoreError>;
}

/// Devices read together: the ones named, or every device of an owner.
#[derive(Debug, Clone, Copy)]
pub struct Fleet<'a> {
    /// The devices, already checked for ownership or visibility by the caller.
    pub devices: &'a [DeviceUuid],
    /// Their owner when `devices` are all of that owner's devices: a backend that keeps the
    /// owner on its rows reads them by it instead of naming every device.
    pub owner: Option<&'a OwnerId>,
}

impl<'a> Fleet<'a> {
    /// `devices`, named one by one.
    pub fn of(devices: &'a [DeviceUuid]) -> Self {
        Self {
            devices,
            owner: None,
        }
    }

    /// Every device of `owner`: `devices`.
    pub fn owned(owner: &'a OwnerId, devices: &'a [DeviceUuid]) -> Self {
        Self {
            devices,
            owner: Some(owner),
        }
    }
}

/// What [`ReadingStore::current`] reads.
#[derive(Debug, Clone, PartialEq)]
pub struct CurrentParts {
    /// The latest sample's time.
    pub last_seen: DateTime<Utc>,
    /// The sums over the snapshot's window ([`window`] of `last_seen`).
    pub sums: Aggregate,
    /// The latest located sample's position.
    pub location: Option<LocatedAt>,
}

/// The read side of reading storage. Every method takes the devices to look at, already checked
/// for ownership or visibility by the caller: readings of a device that is not asked for are
/// never returned.
#[async_trait]
pub trait ReadingStore: Send + Sync + std::fmt::Debug {
    /// The time of the latest sample of any of `devices`.
    async fn last_seen(&self, devices: &[DeviceUuid]) -> Result<Option<DateTime<Utc>>, StoreError>;

    /// Sums and count of the raw samples of `devices` in `(after, until]`.
    async fn aggregate(
        &self,
        devices: &[DeviceUuid],
        after: DateTime<Utc>,
        until: DateTime<Utc>,
    ) -> Result<Aggregate, StoreError>;

    /// What the current snapshot of the fleet's devices pooled is made of, at `now`: the latest sample's
    /// time, the sums over the snapshot's window of it ([`window`]) and the latest located
    /// sample's position; `None` when none of them has a sample. A backend that can answers in
    /// one read (an owner of 10,000 devices made three, each going through all of them); the
    /// default makes the three reads.
    async fn current(
        &self,
        fleet: Fleet<'_>,
        now: DateTime<Utc>,
    ) -> Result<Option<CurrentParts>, StoreError> {
        let devices = fleet.devices;
        let Some(last_seen) = self.last_seen(devices).await? else {
            return Ok(None);
        };
        let (after, until) = window(now, last_seen);
        let (sums, located) = tokio::try_join!(
            self.aggregate(devices, after, until),
            self.latest_located(devices)
        )?;
        Ok(Some(CurrentParts {
            last_seen,
            sums,
            location: located
                .into_iter()
                .map(|(_, latest, _)| latest.position)
                .max_by_key(|position| position.at),
        }))
    }

    /// For each of `devices` with a sample: the latest sample's time and the sums of the samples
    /// stored under that time. The alert evaluator reads a whole fleet's at once; a backend that
    /// can, answers in one read (the default asks device by device).
    async fn latest_each(
        &self,
        devices: &[DeviceUuid],
    ) -> Result<HashMap<DeviceUuid, (DateTime<Utc>, Aggregate)>, StoreError> {
        let mut latest = HashMap::with_capacity(devices.len());
        for device in devices {
            if let Some(at) = self.last_seen(&[*device]).await? {
                let sums = self
                    .aggregate(&[*device], at - TimeDelta::microseconds(1), at)
                    .await?;
                if sums.count > 0 {
                    latest.insert(*device, (at, sums));
                }
            }
        }
        Ok(latest)
    }

    /// The sums of each device's samples in its range `(after, until]`, in the order asked (as
    /// [`ReadingStore::latest_each`], for windowed alert rules).
    async fn aggregate_each(
        &self,
        ranges: &[(DeviceUuid, DateTime<Utc>, DateTime<Utc>)],
    ) -> Result<Vec<Aggregate>, StoreError> {
        let mut sums = Vec::with_capacity(ranges.len());
        for (device, after, until) in ranges {
            sums.push(self.aggregate(&[*device], *after, *until).await?);
        }
        Ok(sums)
    }

    /// One aggregate per bucket of the plan for the fleet's devices pooled, in the plan's order
    /// (empty buckets included).
    async fn buckets(
        &self,
        fleet: Fleet<'_>,
        plan: &BucketPlan,
    ) -> Result<Vec<Aggregate>, StoreError>;

    /// For each of `devices` that has a located sample: that latest located sample and the
    /// device's last contact.
    async fn latest_located(
        &self,
        devices: &[DeviceUuid],
    ) -> Result<Vec<(DeviceUuid, LatestLocated, DateTime<Utc>)>, StoreError>;

    /// Every reading of `device` stored under a time in `[start, end)`, oldest first, each
    /// reading once (a replaced one only as it is now), in pages of at most about
    /// [`EXPORT_PAGE_ROWS`] read one after the other: memory does not grow with the range.
    fn export(&self, device: DeviceUuid, start: DateTime<Utc>, end: DateTime<Utc>) -> ReadingPages;

    /// The devices that may have a newer latest sample than at `since` (a mark this method
    /// answered before; `None` the first time, with no devices), and the mark to ask from next
    /// time: a caller that read devices' latest samples after taking a mark misses nothing when
    /// it reads again those answered for it. `None` where the backend cannot tell cheaply; the
    /// caller then reads every device again.
    async fn written_since(
        &self,
        since: Option<WriteMark>,
    ) -> Result<Option<(Vec<DeviceUuid>, WriteMark)>, StoreError> {
        let _ = since;
        Ok(None)
    }

    /// Deletes every reading of `device` of `owner`, which is about to be deleted (where the
    /// backend can delete; where it cannot, its readings are left out of the owner's reads from
    /// now on, once the device is no longer among them).
    async fn forget_device(&self, owner: &OwnerId, device: DeviceUuid) -> Result<(), StoreError>;

    /// Whether the store answers (for `/readyz`).
    async fn ping(&self) -> Result<(), StoreError>;
}

/// Readings per page of an export.
pub const EXPORT_PAGE_ROWS: usize = 5_000;
/// Pages an export reads ahead of its reader (the one being read aside).
const PAGES_AHEAD: usize = 1;

/// One page of an export, or the fault that ended it.
pub type PageResult = Result<Vec<RawReading>, StoreError>;

/// A page as the reading task sends it.
struct Page {
    readings: Vec<RawReading>,
    last: bool,
}

/// The pages of an export, read by a task of their own at most [`PAGES_AHEAD`] ahead of the
/// reader. Dropping the reader (a client that went away) stops the task at its next page.
#[derive(Debug)]
pub struct ReadingPages {
    receiver: mpsc::Receiver<Result<Page, StoreError>>,
    finished: bool,
}

impl std::fmt::Debug for Page {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} readings (last: {})", self.readings.len(), self.last)
    }
}

impl ReadingPages {
    /// Pages from `fetch`, cursor after cursor from `first`: each call answers a page and the
    /// cursor of the next one, `None` after the last. The reader gets at least one page (maybe
    /// empty), and nothing after a fault.
    pub fn spawn<C, F, Fut>(first: C, mut fetch: F) -> Self
    where
        C: Send + 'static,
        F: FnMut(C) -> Fut + Send + 'static,
        Fut: Future<Output = Result<(Vec<RawReading>, Option<C>), StoreError>> + Send,
    {
        let (sender, receiver) = mpsc::channel(PAGES_AHEAD);
        tokio::spawn(async move {
            let mut cursor = Some(first);
            while let Some(at) = cursor.take() {
                let page = fetch(at).await.map(|(readings, next)| {
                    cursor = next;
                    Page {
                        last: cursor.is_none(),
                        readings,
                    }
                });
                if page
                    .as_ref()
                    .is_ok_and(|page| page.readings.is_empty() && !page.last)
                {
                    continue;
                }
                if sender.send(page).await.is_err() {
                    return;
                }
            }
        });
        Self {
            receiver,
            finished: false,
        }
    }

    /// The next page; `None` after the last. A task that ended without its last page (it
    /// panicked) is a fault, never a silent end.
    pub async fn next(&mut self) -> Option<PageResult> {
        std::future::poll_fn(|cx| self.poll_next(cx)).await
    }

    /// [`ReadingPages::next`], for a body polled by hyper.
    pub fn poll_next(&mut self, cx: &mut Context<'_>) -> Poll<Option<PageResult>> {
        if self.finished {
            return Poll::Ready(None);
        }
        let received = match self.receiver.poll_recv(cx) {
            Poll::Pending => return Poll::Pending,
            Poll::Ready(received) => received,
        };
        Poll::Ready(Some(match received {
            Some(Ok(page)) => {
                self.finished = page.last;
                Ok(page.readings)
            }
            Some(Err(error)) => {
                self.finished = true;
                Err(error)
            }
            None => {
                self.finished = true;
                Err(StoreError::Interrupted)
            }
        }))
    }
}

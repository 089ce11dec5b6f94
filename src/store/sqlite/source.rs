//! The embedded store read whole, for `airq migrate`: every device with its key hash, every
//! reading in receipt-id order, and what there is to count.
//!
//! Opened only on a locked data directory (the caller holds [`crate::data_dir::DataDirLock`]),
//! and folded first: readings a server left in the ingestion log (a `kill -9`, a crash) are
//! moved into `airq.db` exactly as a server's start would move them, so `readings` then holds
//! every stored reading once (a keyed reading replaced by a later one is gone, as for every
//! read) and nothing changes it while the lock is held.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use rusqlite::Row;
use uuid::Uuid;

use super::device_store::DeviceRow;
use super::ingest::{FoldConfig, SqliteReadingSink, RAW_COLUMNS};
use super::{from_micros, read_device, read_values, Sqlite};
use crate::domain::{Device, DeviceUuid, KeyHash, Location, Reading, ReadingId, StoredReading};
use crate::store::device_record::COLUMNS;
use crate::store::StoreError;

/// The fold's settings while the source is opened: fold everything at once.
const FOLD_ALL: FoldConfig = FoldConfig {
    interval: Duration::from_millis(1),
    rows: 1,
};

/// How many readings the source holds, per device.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReadingCounts {
    /// Readings per device, by device.
    pub per_device: BTreeMap<DeviceUuid, u64>,
    /// The highest receipt id stored (0 without readings).
    pub through: i64,
}

impl ReadingCounts {
    /// Readings of every device together.
    pub fn total(&self) -> u64 {
        self.per_device.values().sum()
    }
}

/// An embedded data directory, folded and read whole.
#[derive(Debug)]
pub struct SqliteSource {
    db: Arc<Sqlite>,
}

impl SqliteSource {
    /// Opens the embedded store in `data_dir` (whose lock the caller holds) and folds whatever
    /// its ingestion log still holds into `airq.db`.
    pub fn open(
        data_dir: &Path,
        busy_timeout: Duration,
        segment_bytes: u64,
    ) -> Result<Self, StoreError> {
        let db = Sqlite::open(data_dir, busy_timeout, segment_bytes)?;
        // The sink's fold starts from the stored watermark with every logged row in hand, and
        // dropping the sink stops it only after it folded them all.
        drop(SqliteReadingSink::open(Arc::clone(&db), FOLD_ALL)?);
        let logged = db.ingestion().highest();
        let folded = db.write_blocking(|connection| Ok(super::ingest::folded_id(connection)?))?;
        if folded < logged {
            return Err(StoreError::FoldBehind(logged - folded));
        }
        Ok(Self { db })
    }

    /// Every device, of every owner, with the hash of its current key, by id.
    pub async fn devices(&self) -> Result<Vec<(Device, KeyHash)>, StoreError> {
        self.db
            .read_snapshot(|connection| {
                let mut statement = connection.prepare_cached(&format!(
                    "SELECT {COLUMNS}, key_hash FROM devices ORDER BY id"
                ))?;
                let mut rows = statement.query([])?;
                let mut devices = Vec::new();
                while let Some(row) = rows.next()? {
                    let device = DeviceRow::read(row)?.into_device()?;
                    let hash: [u8; 32] = row.get::<_, Vec<u8>>(9)?.try_into().map_err(|_| {
                        StoreError::Corrupt(format!("key hash of device {}", device.id))
                    })?;
                    devices.push((device, KeyHash::from_bytes(hash)));
                }
                Ok(devices)
            })
            .await
    }

    /// Up to `limit` readings with a receipt id above `after`, by id.
    pub async fn readings_after(
        &self,
        after: i64,
        limit: usize,
    ) -> Result<Vec<StoredReading>, StoreError> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        self.db
            .read(move |connection| {
                let mut statement = connection.prepare_cached(&format!(
                    "SELECT {} FROM readings WHERE id > ?1 ORDER BY id LIMIT ?2",
                    *RAW_COLUMNS
                ))?;
                let mut rows = statement.query([after, limit])?;
                let mut readings = Vec::new();
                while let Some(row) = rows.next()? {
                    readings.push(read_stored(row)?);
                }
                Ok(readings)
            })
            .await
    }

    /// How many readings have a receipt id above `after`.
    pub async fn count_after(&self, after: i64) -> Result<u64, StoreError> {
        self.db
            .read(move |connection| {
                let count: i64 = connection
                    .prepare_cached("SELECT count(*) FROM readings WHERE id > ?1")?
                    .query_row([after], |row| row.get(0))?;
                Ok(u64::try_from(count).unwrap_or(0))
            })
            .await
    }

    /// How many readings each device has, and the highest receipt id.
    pub async fn reading_counts(&self) -> Result<ReadingCounts, StoreError> {
        self.db
            .read_snapshot(|connection| {
                let mut counts = ReadingCounts::default();
                let mut statement = connection.prepare_cached(
                    "SELECT device, count(*), max(id) FROM readings GROUP BY device",
                )?;
                let mut rows = statement.query([])?;
                while let Some(row) = rows.next()? {
                    let device = read_device(row, 0)?
                        .ok_or_else(|| StoreError::Corrupt("a reading's device".into()))?;
                    let count = u64::try_from(row.get::<_, i64>(1)?).unwrap_or(0);
                    counts
                        .per_device
                        .insert(DeviceUuid::from_uuid(Uuid::from_bytes(device)), count);
                    counts.through = counts.through.max(row.get(2)?);
                }
                Ok(counts)
            })
            .await
    }
}

/// A row over [`RAW_COLUMNS`] as the reading it stores: a keyed row's time is its `measured_at`.
fn read_stored(row: &Row<'_>) -> Result<StoredReading, StoreError> {
    let id: i64 = row.get(0)?;
    let id = u64::try_from(id)
        .ok()
        .and_then(ReadingId::new)
        .ok_or_else(|| StoreError::Corrupt(format!("receipt id {id}")))?;
    let device = read_device(row, 1)?
        .ok_or_else(|| StoreError::Corrupt(format!("the device of reading {}", id.get())))?;
    let at = from_micros(row.get(2)?)?;
    let keyed = row.get::<_, i64>(4)? != 0;
    let next = 5 + crate::domain::measure::COUNT;
    let location = match (
        row.get::<_, Option<f64>>(next + 2)?,
        row.get::<_, Option<f64>>(next + 3)?,
        row.get::<_, Option<String>>(next + 4)?,
    ) {
        (Some(lat), Some(lon), Some(provider)) => Some(Location { lat, lon, provider }),
        _ => None,
    };
    Ok(StoredReading {
        id,
        device: DeviceUuid::from_uuid(Uuid::from_bytes(device)),
        at,
        reading: Reading {
            values: read_values(row, 5)?,
            pms_provider: row.get(next)?,
            temperature_provider: row.get(next + 1)?,
            location,
            measured_at: keyed.then_some(at),
        },
    })
}

#[cfg(test)]
mod tests {
    use chrono::{DateTime, TimeZone as _, Utc};

    use super::*;
    use crate::domain::{DeviceFlags, DeviceId, DeviceName, Measure, Measurements, OwnerId};
    use crate::store::sqlite::SqliteDevices;
    use crate::store::{DeviceStore as _, ReadingSink as _};

    fn at(minute: u32) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 11, 20, 12, minute, 0)
            .single()
            .unwrap_or_else(|| panic!("minute {minute}"))
    }

    fn stored(id: u64, device: DeviceUuid, minute: u32, measured: bool) -> StoredReading {
        StoredReading {
            id: ReadingId::new(id).unwrap_or_else(|| panic!("id {id}")),
            device,
            at: at(minute),
            reading: Reading {
                values: Measurements::from_fn(|measure| match measure {
                    Measure::Aqi => f64::from(minute),
                    _ => 0.5 + id as f64,
                }),
                pms_provider: "PMS5003".into(),
                temperature_provider: format!("BME280 #{id}"),
                location: id.is_multiple_of(2).then(|| Location {
                    lat: 52.5,
                    lon: -13.25,
                    provider: "phone-gps".into(),
                }),
                measured_at: measured.then(|| at(minute)),
            },
        }
    }

    #[tokio::test]
    async fn devices_and_readings_read_back_as_stored_by_id_without_replaced_ones() {
        let dir = tempfile::tempdir().unwrap_or_else(|error| panic!("{error}"));
        let device = DeviceUuid::generate();
        let other = DeviceUuid::generate();
        let registered = Device {
            id: device,
            device_id: DeviceId::generate(),
            owner: OwnerId::parse("alice").unwrap_or_else(|| panic!("owner")),
            name: DeviceName::from_stored("Balcony".into()),
            flags: DeviceFlags {
                is_public: true,
                is_location_public: false,
                is_outdoor: true,
            },
            created_at: at(1),
            updated_at: at(2),
        };
        let hash = KeyHash::of("sk_a key");
        // Keyed at minute 10 twice: the later (id 4) replaces the earlier (id 1).
        let batch = vec![
            stored(1, device, 10, true),
            stored(2, device, 11, false),
            stored(3, other, 11, false),
            stored(4, device, 10, true),
            stored(5, other, 12, true),
        ];
        {
            let db = Sqlite::open(dir.path(), BUSY, crate::store::ingest_log::SEGMENT_BYTES)
                .unwrap_or_else(|error| panic!("{error}"));
            SqliteDevices::new(Arc::clone(&db))
                .create(&registered, hash)
                .await
                .unwrap_or_else(|error| panic!("{error}"));
            let mut sink = SqliteReadingSink::open(Arc::clone(&db), FOLD_ALL)
                .unwrap_or_else(|error| panic!("{error}"));
            sink.write(&batch)
                .await
                .unwrap_or_else(|error| panic!("{error}"));
            let (durable, synced) = tokio::sync::oneshot::channel();
            sink.when_durable(
                &batch,
                Box::new(move || {
                    let _ = durable.send(());
                }),
            );
            synced.await.unwrap_or_else(|error| panic!("{error}"));
        }
        let source = SqliteSource::open(dir.path(), BUSY, crate::store::ingest_log::SEGMENT_BYTES)
            .unwrap_or_else(|error| panic!("{error}"));
        let devices = source
            .devices()
            .await
            .unwrap_or_else(|error| panic!("{error}"));
        assert_eq!(devices, vec![(registered, hash)]);
        let first = source
            .readings_after(0, 2)
            .await
            .unwrap_or_else(|error| panic!("{error}"));
        let rest = source
            .readings_after(3, 10)
            .await
            .unwrap_or_else(|error| panic!("{error}"));
        assert_eq!(first, vec![batch[1].clone(), batch[2].clone()]);
        assert_eq!(rest, vec![batch[3].clone(), batch[4].clone()]);
        let counts = source
            .reading_counts()
            .await
            .unwrap_or_else(|error| panic!("{error}"));
        assert_eq!(counts.through, 5);
        assert_eq!(counts.total(), 4);
        assert_eq!(counts.per_device.get(&device), Some(&2));
        assert_eq!(source.count_after(3).await.ok(), Some(2));
    }

    const BUSY: Duration = Duration::from_secs(5);
}

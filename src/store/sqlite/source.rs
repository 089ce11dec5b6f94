//! The embedded store read whole, for `airq migrate`: every device with its key hash, every
//! reading in receipt-id order, and what there is to count.
//!
//! Opened only on a locked data directory (the caller holds [`crate::data_dir::DataDirLock`]),
//! and folded first: readings a server left in the ingestion log (a `kill -9`, a crash) are
//! moved into `airq.db` exactly as a server's start would move them, so `readings` then holds
//! every stored reading once (a keyed reading replaced by a later one is gone, as for every
//! read) and nothing changes it while the lock is held.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use rusqlite::Row;
use uuid::Uuid;

use super::device_store::DeviceRow;
use super::dictionary::provider_names;
use super::ingest::{FoldConfig, SqliteReadingSink};
use super::packed_reading::read_body;
use super::{from_micros, read_device, Sqlite};
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
            .read_snapshot(move |connection| {
                let mut statement = connection.prepare_cached(&format!(
                    "SELECT {RAW_COLUMNS} WHERE r.id > ?1 ORDER BY r.id LIMIT ?2"
                ))?;
                let providers = provider_names(connection)?;
                let mut rows = statement.query([after, limit])?;
                let mut readings = Vec::new();
                while let Some(row) = rows.next()? {
                    readings.push(read_stored(row, &providers)?);
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
                    "SELECT n.device, count(*), max(r.id) FROM readings r \
                     JOIN device_numbers n ON n.number = r.device GROUP BY r.device",
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

/// `id, device, at, keyed, body` of raw rows, the device's 16 bytes included.
const RAW_COLUMNS: &str = "r.id, n.device, r.at, r.keyed, r.body \
                           FROM readings r JOIN device_numbers n ON n.number = r.device";

/// A row over [`RAW_COLUMNS`] as the reading it stores: a keyed row's time is its `measured_at`.
fn read_stored(
    row: &Row<'_>,
    providers: &HashMap<i64, String>,
) -> Result<StoredReading, StoreError> {
    let id: i64 = row.get(0)?;
    let id = u64::try_from(id)
        .ok()
        .and_then(ReadingId::new)
        .ok_or_else(|| StoreError::Corrupt(format!("receipt id {id}")))?;
    let device = read_device(row, 1)?
        .ok_or_else(|| StoreError::Corrupt(format!("the device of reading {}", id.get())))?;
    let micros: i64 = row.get(2)?;
    let at = from_micros(micros)?;
    let keyed = row.get::<_, i64>(3)? != 0;
    let body = read_body(row, 4, micros)?;
    let name = |number: i64| {
        providers
            .get(&number)
            .cloned()
            .ok_or_else(|| StoreError::Corrupt(format!("provider {number} has no name")))
    };
    let location = match body.location {
        Some((lat, lon, provider)) => Some(Location {
            lat,
            lon,
            provider: name(provider)?,
        }),
        None => None,
    };
    Ok(StoredReading {
        id,
        device: DeviceUuid::from_uuid(Uuid::from_bytes(device)),
        // The device's row says whose it is; `airq migrate` sets it where it needs it.
        owner: None,
        at,
        reading: Reading {
            values: body.values,
            pms_provider: name(body.providers.0)?,
            temperature_provider: name(body.providers.1)?,
            location,
            measured_at: keyed.then_some(at),
        },
    })
}

#[cfg(test)]
mod tests {
    use chrono::{DateTime, TimeZone as _, Utc};
    use rusqlite::Connection;

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
            owner: None,
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

    #[tokio::test]
    async fn readings_of_the_first_format_read_back_the_same_after_the_upgrade() {
        let dir = tempfile::tempdir().unwrap_or_else(|error| panic!("{error}"));
        let device = DeviceUuid::generate();
        let other = DeviceUuid::generate();
        let mut odd = stored(3, other, 12, false);
        odd.reading.values[Measure::Temperature] = 1.0 / 3.0;
        let readings = vec![
            stored(1, device, 10, true),
            stored(2, device, 11, false),
            odd,
        ];
        {
            let mut old = Connection::open(dir.path().join(Sqlite::FILE))
                .unwrap_or_else(|error| panic!("{error}"));
            super::super::migrate(&mut old, &super::super::SCHEMA[..2])
                .unwrap_or_else(|error| panic!("{error}"));
            for stored in &readings {
                let reading = &stored.reading;
                let location = reading.location.as_ref();
                let values = |measure: Measure| reading.values[measure];
                let (id, device, at) = (
                    stored.id.get() as i64,
                    stored.device.as_uuid().as_bytes().to_vec(),
                    stored.at.timestamp_micros(),
                );
                old.execute(
                    "INSERT INTO readings (id, device, at, received_at, aqi, pm1_0, pm2_5, \
                     pm10_0, temperature, heat_index, humidity, pms_provider, \
                     temperature_provider, lat, lon, location_provider, keyed) \
                     VALUES (?1, ?2, ?3, ?3 + 5, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, \
                     ?14, ?15, ?16)",
                    rusqlite::params![
                        id,
                        device,
                        at,
                        values(Measure::Aqi) as i64,
                        values(Measure::Pm1_0),
                        values(Measure::Pm2_5),
                        values(Measure::Pm10_0),
                        values(Measure::Temperature),
                        values(Measure::HeatIndex),
                        values(Measure::Humidity),
                        reading.pms_provider,
                        reading.temperature_provider,
                        location.map(|l| l.lat),
                        location.map(|l| l.lon),
                        location.map(|l| l.provider.clone()),
                        reading.measured_at.is_some(),
                    ],
                )
                .unwrap_or_else(|error| panic!("{error}"));
                let dedup = if reading.measured_at.is_some() { 0 } else { id };
                old.execute(
                    "INSERT INTO readings_by_device (device, at, dedup, id) VALUES (?1, ?2, ?3, ?4)",
                    rusqlite::params![device, at, dedup, id],
                )
                .unwrap_or_else(|error| panic!("{error}"));
            }
            old.execute("UPDATE counters SET value = 3 WHERE name = 'folded_id'", [])
                .unwrap_or_else(|error| panic!("{error}"));
        }
        let source = SqliteSource::open(dir.path(), BUSY, crate::store::ingest_log::SEGMENT_BYTES)
            .unwrap_or_else(|error| panic!("{error}"));
        let upgraded = source
            .readings_after(0, 10)
            .await
            .unwrap_or_else(|error| panic!("{error}"));
        assert_eq!(upgraded, readings);
        let counts = source
            .reading_counts()
            .await
            .unwrap_or_else(|error| panic!("{error}"));
        assert_eq!(counts.per_device.get(&device), Some(&2));
        assert_eq!(counts.per_device.get(&other), Some(&1));
    }

    const BUSY: Duration = Duration::from_secs(5);
}

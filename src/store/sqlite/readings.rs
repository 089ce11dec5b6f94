//! Readings in the embedded database: the [`ReadingSink`] the batch writer drives and the
//! [`ReadingStore`] the read routes query.
//!
//! A batch is one transaction that inserts the raw rows, adds them to their 15-minute rollups,
//! moves each device's latest-sample record forward and advances the id counter: after a commit
//! all four agree, after a failure none changed.

use std::collections::HashMap;
use std::rc::Rc;
use std::sync::Arc;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use rusqlite::types::Value;
use rusqlite::{params, Connection, OptionalExtension, Row};
use uuid::Uuid;

use super::{from_micros, to_micros, Sqlite};
use crate::domain::{
    Aggregate, BucketPlan, DeviceUuid, LatestLocated, LocatedAt, ReadingId, StoredReading,
};
use crate::store::{ReadingSink, ReadingStore, StoreError};

/// The two rollup resolutions: quarter hours answer any calendar bucket of any zone exactly (every
/// offset is a multiple of 15 minutes); UTC days answer the whole days inside a long bucket, so a
/// month costs about 30 rows per device instead of about 2,900.
#[derive(Debug, Clone, Copy)]
enum Rollup {
    Quarter,
    Day,
}

impl Rollup {
    const ALL: [Rollup; 2] = [Rollup::Quarter, Rollup::Day];

    fn table(self) -> &'static str {
        match self {
            Self::Quarter => "rollups_15m",
            Self::Day => "rollups_1d",
        }
    }

    fn seconds(self) -> i64 {
        match self {
            Self::Quarter => 900,
            Self::Day => 86_400,
        }
    }

    fn slot(self, at: DateTime<Utc>) -> i64 {
        at.timestamp().div_euclid(self.seconds())
    }
}
const NEXT_ID: &str = "next_reading_id";

fn device_bytes(device: DeviceUuid) -> [u8; 16] {
    device.as_uuid().into_bytes()
}

/// The slot ranges `[from, to)` that together cover `[start, end)` exactly (both on quarter
/// hours): whole UTC days from the day rollups, the rest from the quarter-hour rollups.
fn pieces(start: DateTime<Utc>, end: DateTime<Utc>) -> Vec<(Rollup, i64, i64)> {
    let quarter = |from: i64, to: i64| (Rollup::Quarter, from / 900, to / 900);
    let (start, end) = (start.timestamp(), end.timestamp());
    let first_day = start.div_euclid(86_400) + i64::from(start.rem_euclid(86_400) != 0);
    let last_day = end.div_euclid(86_400);
    if first_day >= last_day {
        return vec![quarter(start, end)];
    }
    let mut parts = vec![(Rollup::Day, first_day, last_day)];
    if start < first_day * 86_400 {
        parts.push(quarter(start, first_day * 86_400));
    }
    if last_day * 86_400 < end {
        parts.push(quarter(last_day * 86_400, end));
    }
    parts
}

/// The `rarray` parameter listing `devices` (built inside the blocking closure: `Rc` is not `Send`).
fn device_array(devices: &[[u8; 16]]) -> Rc<Vec<Value>> {
    Rc::new(
        devices
            .iter()
            .map(|bytes| Value::Blob(bytes.to_vec()))
            .collect(),
    )
}

fn owned_devices(devices: &[DeviceUuid]) -> Vec<[u8; 16]> {
    devices.iter().copied().map(device_bytes).collect()
}

/// The batch writer's side of the embedded store.
#[derive(Debug)]
pub struct SqliteReadingSink {
    db: Arc<Sqlite>,
    next_id: u64,
}

impl SqliteReadingSink {
    /// A sink continuing the stored id sequence.
    pub fn open(db: Arc<Sqlite>) -> Result<Self, StoreError> {
        let next_id = db.write_blocking(|connection| {
            let counter: Option<i64> = connection
                .query_row(
                    "SELECT value FROM counters WHERE name = ?1",
                    [NEXT_ID],
                    |row| row.get(0),
                )
                .optional()?;
            let highest: Option<i64> =
                connection.query_row("SELECT max(id) FROM readings", [], |row| row.get(0))?;
            Ok(counter.unwrap_or(1).max(highest.unwrap_or(0) + 1))
        })?;
        Ok(Self {
            db,
            next_id: u64::try_from(next_id).unwrap_or(1),
        })
    }
}

#[async_trait]
impl ReadingSink for SqliteReadingSink {
    async fn allocate_ids(&mut self, count: usize) -> Result<Vec<ReadingId>, StoreError> {
        let first = self.next_id;
        self.next_id += count as u64;
        (first..self.next_id)
            .map(|id| {
                ReadingId::new(id)
                    .ok_or_else(|| StoreError::Corrupt(format!("receipt id {id} is out of range")))
            })
            .collect()
    }

    /// Blocks the writer thread for the transaction; nothing else runs there.
    async fn write(&mut self, batch: &[StoredReading]) -> Result<(), StoreError> {
        let next_id = self.next_id;
        self.db.write_blocking(|connection| {
            let transaction = connection.transaction()?;
            insert_rows(&transaction, batch)?;
            for rollup in Rollup::ALL {
                add_to_rollups(&transaction, batch, rollup)?;
            }
            advance_latest(&transaction, batch)?;
            transaction
                .prepare_cached(
                    "INSERT INTO counters (name, value) VALUES (?1, ?2) \
                     ON CONFLICT (name) DO UPDATE SET value = max(value, excluded.value)",
                )?
                .execute(params![NEXT_ID, i64::try_from(next_id).unwrap_or(i64::MAX)])?;
            transaction.commit()?;
            Ok(())
        })
    }
}

fn insert_rows(connection: &Connection, batch: &[StoredReading]) -> Result<(), StoreError> {
    let mut insert = connection.prepare_cached(
        "INSERT INTO readings (id, device, at, received_at, aqi, pm1_0, pm2_5, pm10_0, temperature, \
         heat_index, humidity, pms_provider, temperature_provider, lat, lon, location_provider) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16)",
    )?;
    let received_at = to_micros(Utc::now());
    for row in batch {
        let metrics = &row.reading.metrics;
        let location = row.reading.location.as_ref();
        insert.execute(params![
            i64::try_from(row.id.get()).unwrap_or(i64::MAX),
            device_bytes(row.device).as_slice(),
            to_micros(row.at),
            received_at,
            metrics.aqi,
            metrics.pm1_0,
            metrics.pm2_5,
            metrics.pm10_0,
            metrics.temperature,
            metrics.heat_index,
            metrics.humidity,
            row.reading.pms_provider,
            row.reading.temperature_provider,
            location.map(|l| l.lat),
            location.map(|l| l.lon),
            location.map(|l| l.provider.as_str()),
        ])?;
    }
    Ok(())
}

fn add_to_rollups(
    connection: &Connection,
    batch: &[StoredReading],
    rollup: Rollup,
) -> Result<(), StoreError> {
    let mut sums: HashMap<([u8; 16], i64), Aggregate> = HashMap::new();
    for row in batch {
        *sums
            .entry((device_bytes(row.device), rollup.slot(row.at)))
            .or_default() += Aggregate::of(&row.reading.metrics);
    }
    let mut upsert = connection.prepare_cached(&format!(
        "INSERT INTO {} (device, slot, samples, aqi_sum, pm1_0_sum, pm2_5_sum, pm10_0_sum, \
         temperature_sum, heat_index_sum, humidity_sum) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10) \
         ON CONFLICT (device, slot) DO UPDATE SET samples = samples + excluded.samples, \
         aqi_sum = aqi_sum + excluded.aqi_sum, pm1_0_sum = pm1_0_sum + excluded.pm1_0_sum, \
         pm2_5_sum = pm2_5_sum + excluded.pm2_5_sum, pm10_0_sum = pm10_0_sum + excluded.pm10_0_sum, \
         temperature_sum = temperature_sum + excluded.temperature_sum, \
         heat_index_sum = heat_index_sum + excluded.heat_index_sum, \
         humidity_sum = humidity_sum + excluded.humidity_sum",
        rollup.table()
    ))?;
    for ((device, slot), sum) in sums {
        upsert.execute(params![
            device.as_slice(),
            slot,
            i64::try_from(sum.count).unwrap_or(i64::MAX),
            // Integral AQIs of at most 10,000: their sum is exact in an f64.
            sum.aqi as i64,
            sum.pm1_0,
            sum.pm2_5,
            sum.pm10_0,
            sum.temperature,
            sum.heat_index,
            sum.humidity,
        ])?;
    }
    Ok(())
}

fn advance_latest(connection: &Connection, batch: &[StoredReading]) -> Result<(), StoreError> {
    let mut last_seen: HashMap<[u8; 16], DateTime<Utc>> = HashMap::new();
    let mut located: HashMap<[u8; 16], &StoredReading> = HashMap::new();
    for row in batch {
        let device = device_bytes(row.device);
        let seen = last_seen.entry(device).or_insert(row.at);
        *seen = (*seen).max(row.at);
        if row.reading.location.is_some() {
            let latest = located.entry(device).or_insert(row);
            if row.at >= latest.at {
                *latest = row;
            }
        }
    }
    let mut upsert_located = connection.prepare_cached(
        "INSERT INTO device_latest (device, last_seen, located_at, lat, lon, provider, aqi, pm2_5, temperature) \
         VALUES (?1, ?2, ?2, ?3, ?4, ?5, ?6, ?7, ?8) \
         ON CONFLICT (device) DO UPDATE SET located_at = excluded.located_at, lat = excluded.lat, \
         lon = excluded.lon, provider = excluded.provider, aqi = excluded.aqi, pm2_5 = excluded.pm2_5, \
         temperature = excluded.temperature \
         WHERE located_at IS NULL OR excluded.located_at >= located_at",
    )?;
    for (device, row) in located {
        if let Some(location) = &row.reading.location {
            upsert_located.execute(params![
                device.as_slice(),
                to_micros(row.at),
                location.lat,
                location.lon,
                location.provider,
                row.reading.metrics.aqi,
                row.reading.metrics.pm2_5,
                row.reading.metrics.temperature,
            ])?;
        }
    }
    let mut upsert_seen = connection.prepare_cached(
        "INSERT INTO device_latest (device, last_seen) VALUES (?1, ?2) \
         ON CONFLICT (device) DO UPDATE SET last_seen = max(last_seen, excluded.last_seen)",
    )?;
    for (device, at) in last_seen {
        upsert_seen.execute(params![device.as_slice(), to_micros(at)])?;
    }
    Ok(())
}

/// The read routes' side of the embedded store.
#[derive(Debug, Clone)]
pub struct SqliteReadings {
    db: Arc<Sqlite>,
}

impl SqliteReadings {
    /// Readings stored in `db`.
    pub fn new(db: Arc<Sqlite>) -> Self {
        Self { db }
    }
}

const SUM_COLUMNS: &str = "count(*), coalesce(sum(aqi), 0), coalesce(sum(pm1_0), 0.0), \
    coalesce(sum(pm2_5), 0.0), coalesce(sum(pm10_0), 0.0), coalesce(sum(temperature), 0.0), \
    coalesce(sum(heat_index), 0.0), coalesce(sum(humidity), 0.0)";

const ROLLUP_COLUMNS: &str = "coalesce(sum(samples), 0), coalesce(sum(aqi_sum), 0), \
    coalesce(sum(pm1_0_sum), 0.0), coalesce(sum(pm2_5_sum), 0.0), coalesce(sum(pm10_0_sum), 0.0), \
    coalesce(sum(temperature_sum), 0.0), coalesce(sum(heat_index_sum), 0.0), coalesce(sum(humidity_sum), 0.0)";

/// An [`Aggregate`] from a row of `count, aqi sum, six sums`.
fn read_aggregate(row: &Row<'_>) -> rusqlite::Result<Aggregate> {
    Ok(Aggregate {
        count: u64::try_from(row.get::<_, i64>(0)?).unwrap_or(0),
        aqi: row.get::<_, i64>(1)? as f64,
        pm1_0: row.get(2)?,
        pm2_5: row.get(3)?,
        pm10_0: row.get(4)?,
        temperature: row.get(5)?,
        heat_index: row.get(6)?,
        humidity: row.get(7)?,
    })
}

#[async_trait]
impl ReadingStore for SqliteReadings {
    async fn last_seen(&self, devices: &[DeviceUuid]) -> Result<Option<DateTime<Utc>>, StoreError> {
        let devices = owned_devices(devices);
        self.db
            .read(move |connection| {
                let micros: Option<i64> = connection
                    .prepare_cached(
                        "SELECT max(last_seen) FROM device_latest WHERE device IN rarray(?1)",
                    )?
                    .query_row([device_array(&devices)], |row| row.get(0))?;
                micros.map(from_micros).transpose()
            })
            .await
    }

    async fn aggregate(
        &self,
        devices: &[DeviceUuid],
        after: DateTime<Utc>,
        until: DateTime<Utc>,
    ) -> Result<Aggregate, StoreError> {
        let devices = owned_devices(devices);
        self.db
            .read(move |connection| {
                Ok(connection
                    .prepare_cached(&format!(
                        "SELECT {SUM_COLUMNS} FROM readings WHERE device IN rarray(?1) AND at > ?2 AND at <= ?3"
                    ))?
                    .query_row(
                        params![device_array(&devices), to_micros(after), to_micros(until)],
                        read_aggregate,
                    )?)
            })
            .await
    }

    async fn latest_location(
        &self,
        devices: &[DeviceUuid],
    ) -> Result<Option<LocatedAt>, StoreError> {
        let devices = owned_devices(devices);
        self.db
            .read(move |connection| {
                let row = connection
                    .prepare_cached(
                        "SELECT located_at, lat, lon, provider FROM device_latest \
                         WHERE device IN rarray(?1) AND located_at IS NOT NULL ORDER BY located_at DESC LIMIT 1",
                    )?
                    .query_row([device_array(&devices)], |row| {
                        Ok((row.get::<_, i64>(0)?, row.get(1)?, row.get(2)?, row.get(3)?))
                    })
                    .optional()?;
                row.map(|(at, lat, lon, provider)| {
                    Ok(LocatedAt {
                        lat,
                        lon,
                        provider,
                        at: from_micros(at)?,
                    })
                })
                .transpose()
            })
            .await
    }

    async fn buckets(
        &self,
        devices: &[DeviceUuid],
        plan: &BucketPlan,
    ) -> Result<Vec<Aggregate>, StoreError> {
        let devices = owned_devices(devices);
        let pieces: Vec<Vec<(Rollup, i64, i64)>> = plan
            .buckets
            .iter()
            .map(|bucket| pieces(bucket.start, bucket.end))
            .collect();
        self.db
            .read(move |connection| {
                let devices = device_array(&devices);
                let sql = |rollup: Rollup| {
                    format!(
                        "SELECT {ROLLUP_COLUMNS} FROM {} WHERE device IN rarray(?1) AND slot >= ?2 AND slot < ?3",
                        rollup.table()
                    )
                };
                let mut quarters = connection.prepare_cached(&sql(Rollup::Quarter))?;
                let mut days = connection.prepare_cached(&sql(Rollup::Day))?;
                pieces
                    .into_iter()
                    .map(|parts| {
                        let mut sum = Aggregate::default();
                        for (rollup, from, to) in parts {
                            let statement = match rollup {
                                Rollup::Quarter => &mut quarters,
                                Rollup::Day => &mut days,
                            };
                            sum += statement.query_row(
                                params![Rc::clone(&devices), from, to],
                                read_aggregate,
                            )?;
                        }
                        Ok(sum)
                    })
                    .collect()
            })
            .await
    }

    async fn latest_located(
        &self,
        devices: &[DeviceUuid],
    ) -> Result<Vec<(DeviceUuid, LatestLocated, DateTime<Utc>)>, StoreError> {
        let devices = owned_devices(devices);
        self.db
            .read(move |connection| {
                let mut statement = connection.prepare_cached(
                    "SELECT device, located_at, lat, lon, provider, aqi, pm2_5, temperature, last_seen \
                     FROM device_latest WHERE device IN rarray(?1) AND located_at IS NOT NULL",
                )?;
                let rows = statement.query_map([device_array(&devices)], |row| {
                    Ok((
                        row.get::<_, Vec<u8>>(0)?,
                        row.get::<_, i64>(1)?,
                        row.get::<_, f64>(2)?,
                        row.get::<_, f64>(3)?,
                        row.get::<_, String>(4)?,
                        row.get::<_, i64>(5)?,
                        row.get::<_, f64>(6)?,
                        row.get::<_, f64>(7)?,
                        row.get::<_, i64>(8)?,
                    ))
                })?;
                rows.map(|row| {
                    let (device, at, lat, lon, provider, aqi, pm2_5, temperature, last_seen) = row?;
                    let device = Uuid::from_slice(&device)
                        .map_err(|_| StoreError::Corrupt("device id in device_latest".into()))?;
                    Ok((
                        DeviceUuid::from_uuid(device),
                        LatestLocated {
                            position: LocatedAt {
                                lat,
                                lon,
                                provider,
                                at: from_micros(at)?,
                            },
                            aqi,
                            pm2_5,
                            temperature,
                        },
                        from_micros(last_seen)?,
                    ))
                })
                .collect()
            })
            .await
    }

    async fn forget_device(&self, device: DeviceUuid) -> Result<(), StoreError> {
        let device = device_bytes(device);
        self.db
            .write(move |connection| {
                let transaction = connection.transaction()?;
                for table in ["readings", "rollups_15m", "rollups_1d", "device_latest"] {
                    transaction
                        .prepare_cached(&format!("DELETE FROM {table} WHERE device = ?1"))?
                        .execute([device.as_slice()])?;
                }
                transaction.commit()?;
                Ok(())
            })
            .await
    }

    async fn ping(&self) -> Result<(), StoreError> {
        self.db
            .read(|connection| {
                Ok(
                    connection.query_row("SELECT count(*) FROM counters", [], |row| {
                        row.get::<_, i64>(0)
                    })?,
                )
            })
            .await
            .map(drop)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(text)
            .map(|at| at.with_timezone(&Utc))
            .unwrap_or_default()
    }

    fn covered(parts: &[(Rollup, i64, i64)]) -> i64 {
        parts
            .iter()
            .map(|(rollup, from, to)| (to - from) * rollup.seconds())
            .sum()
    }

    #[test]
    fn a_berlin_month_is_whole_utc_days_plus_quarter_hour_edges() {
        let (start, end) = (at("2026-10-31T23:00:00Z"), at("2026-11-30T23:00:00Z"));
        let parts = pieces(start, end);
        assert_eq!(covered(&parts), (end - start).num_seconds());
        assert!(matches!(parts[0], (Rollup::Day, _, _)));
        assert_eq!(parts[0].2 - parts[0].1, 29);
    }

    #[test]
    fn a_kolkata_day_has_no_whole_utc_day_inside() {
        let (start, end) = (at("2026-11-20T18:30:00Z"), at("2026-11-21T18:30:00Z"));
        let parts = pieces(start, end);
        assert_eq!(parts.len(), 1);
        assert_eq!(covered(&parts), 86_400);
    }

    #[test]
    fn a_utc_day_is_one_day_row() {
        let parts = pieces(at("2026-11-21T00:00:00Z"), at("2026-11-22T00:00:00Z"));
        assert_eq!(parts.len(), 1);
        assert!(matches!(parts[0], (Rollup::Day, _, _)));
    }
}

//! Readings in the embedded database: the [`ReadingSink`] the batch writer drives and the
//! [`ReadingStore`] the read routes query.
//!
//! A batch is one transaction that inserts the raw rows, adds them to their 15-minute rollups,
//! moves each device's latest-sample record forward and advances the id counter: after a commit
//! all four agree, after a failure none changed.

use std::collections::HashMap;
use std::rc::Rc;
use std::sync::{Arc, LazyLock};

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use rusqlite::types::Value;
use rusqlite::{params, Connection, OptionalExtension, Row};
use uuid::Uuid;

use super::{from_micros, to_micros, Sqlite};
use crate::domain::measure::COUNT;
use crate::domain::{
    Aggregate, BucketPlan, DeviceUuid, LatestLocated, LocatedAt, Measure, Measurements, ReadingId,
    StoredReading,
};
use crate::store::{columns, ReadingSink, ReadingStore, StoreError};

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

/// Binds `values` to the placeholders from `first` on, integers as integers.
fn bind_values(
    statement: &mut rusqlite::CachedStatement<'_>,
    first: usize,
    values: &Measurements,
) -> rusqlite::Result<()> {
    for (offset, (measure, value)) in values.iter().enumerate() {
        if measure.is_integer() {
            // Integral values (and sums of them) are exact in an f64.
            statement.raw_bind_parameter(first + offset, value as i64)?;
        } else {
            statement.raw_bind_parameter(first + offset, value)?;
        }
    }
    Ok(())
}

static INSERT_READING: LazyLock<String> = LazyLock::new(|| {
    format!(
        "INSERT INTO readings (id, device, at, received_at, {}, pms_provider, temperature_provider, \
         lat, lon, location_provider) VALUES ({})",
        columns::each(str::to_owned),
        columns::placeholders(1, 4 + COUNT + 5)
    )
});

fn insert_rows(connection: &Connection, batch: &[StoredReading]) -> Result<(), StoreError> {
    let mut insert = connection.prepare_cached(&INSERT_READING)?;
    let received_at = to_micros(Utc::now());
    for row in batch {
        let location = row.reading.location.as_ref();
        insert.raw_bind_parameter(1, i64::try_from(row.id.get()).unwrap_or(i64::MAX))?;
        insert.raw_bind_parameter(2, device_bytes(row.device).as_slice())?;
        insert.raw_bind_parameter(3, to_micros(row.at))?;
        insert.raw_bind_parameter(4, received_at)?;
        bind_values(&mut insert, 5, &row.reading.values)?;
        let next = 5 + COUNT;
        insert.raw_bind_parameter(next, &row.reading.pms_provider)?;
        insert.raw_bind_parameter(next + 1, &row.reading.temperature_provider)?;
        insert.raw_bind_parameter(next + 2, location.map(|l| l.lat))?;
        insert.raw_bind_parameter(next + 3, location.map(|l| l.lon))?;
        insert.raw_bind_parameter(next + 4, location.map(|l| l.provider.as_str()))?;
        insert.raw_execute()?;
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
            .or_default() += Aggregate::of(&row.reading.values);
    }
    let mut upsert = connection.prepare_cached(&format!(
        "INSERT INTO {table} (device, slot, samples, {sums}) VALUES ({values}) \
         ON CONFLICT (device, slot) DO UPDATE SET samples = samples + excluded.samples, {add}",
        table = rollup.table(),
        sums = columns::each(|name| format!("{name}_sum")),
        values = columns::placeholders(1, 3 + COUNT),
        add = columns::each(|name| format!("{name}_sum = {name}_sum + excluded.{name}_sum")),
    ))?;
    for ((device, slot), sum) in sums {
        upsert.raw_bind_parameter(1, device.as_slice())?;
        upsert.raw_bind_parameter(2, slot)?;
        upsert.raw_bind_parameter(3, i64::try_from(sum.count).unwrap_or(i64::MAX))?;
        bind_values(&mut upsert, 4, &sum.sums)?;
        upsert.raw_execute()?;
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
                row.reading.values.aqi(),
                row.reading.values[Measure::Pm2_5],
                row.reading.values[Measure::Temperature],
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

/// `count, one sum per value` over raw readings.
static SUM_COLUMNS: LazyLock<String> = LazyLock::new(|| {
    format!(
        "count(*), {}",
        columns::each(|name| format!("coalesce(sum({name}), 0)"))
    )
});

/// `count, one sum per value` over rollups.
static ROLLUP_COLUMNS: LazyLock<String> = LazyLock::new(|| {
    format!(
        "coalesce(sum(samples), 0), {}",
        columns::each(|name| format!("coalesce(sum({name}_sum), 0)"))
    )
});

/// An [`Aggregate`] from a row of `count, one sum per value`.
fn read_aggregate(row: &Row<'_>) -> rusqlite::Result<Aggregate> {
    let mut sums = Measurements::default();
    for (offset, measure) in Measure::ALL.into_iter().enumerate() {
        sums[measure] = if measure.is_integer() {
            row.get::<_, i64>(1 + offset)? as f64
        } else {
            row.get(1 + offset)?
        };
    }
    Ok(Aggregate {
        count: u64::try_from(row.get::<_, i64>(0)?).unwrap_or(0),
        sums,
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
                        "SELECT {} FROM readings WHERE device IN rarray(?1) AND at > ?2 AND at <= ?3",
                        *SUM_COLUMNS
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
                        "SELECT {} FROM {} WHERE device IN rarray(?1) AND slot >= ?2 AND slot < ?3",
                        *ROLLUP_COLUMNS,
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

//! [`ReadingStore`] on the embedded database: folded tables plus the view of unconsumed rows.
//!
//! Every method runs in one read transaction, reads the folded tables (the device index, the
//! rollups, `device_latest`) and merges the rows the fold has not reached yet
//! ([`UnconsumedView`](super::ingest::UnconsumedView)), so a read right after a 201 includes its
//! reading and a replaced reading never counts twice. One exception, for speed: a bucket read of many rollup
//! rows reads two halves of the devices at once, each in a read transaction of its own, and adds
//! them up. Each device's sums then still come from one snapshot and include every reading
//! acknowledged before the request; only the two halves may be a fold apart.

use std::collections::{HashMap, HashSet};
use std::rc::Rc;
use std::sync::{Arc, LazyLock};

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use rusqlite::types::Value;
use rusqlite::{params, Connection, OptionalExtension, Row};
use uuid::Uuid;

use super::dictionary::device_number;
use super::export_pages;
use super::ingest::{count_removed, folded_id, removed, LoggedRow, Replaced, UnconsumedView};
use super::located::{located_before, Located};
use super::pooled::{self, LastReads, POOL_FROM};
use super::recent_seconds::{RecentSeconds, Seconds};
use super::rollup::{hours_through, plan_reads, SlotSums, Source};
use super::set_latest::{FoldedLatest, Position, SetLatest};
use super::{device_bytes, from_micros, packed_sums, read_device, to_micros, Sqlite};
use crate::domain::snapshot::window;
use crate::domain::{
    Aggregate, BucketPlan, DeviceUuid, LatestLocated, LocatedAt, Measure, OwnerId,
};
use crate::store::{
    CurrentParts, Fleet, ReadingPages, ReadingStore, StoreError, WriteMark, EXPORT_PAGE_ROWS,
};

/// The `rarray` parameter listing `devices` (built inside the blocking closure: `Rc` is not `Send`).
/// From this many devices on, [`ReadingStore::latest_located`] reads `device_latest` whole and
/// keeps the asked devices' rows: the map asks for every member at once (100,000 of them), and an
/// `IN` list is first built into a b-tree of SQLite's own, about 0.7 µs per device, while a pass
/// over the whole table skipping the rows not asked for costs about 0.15 µs per row (70 ms
/// against 15 ms at 100,000 devices). The map's later periods ask only for the devices written
/// since (10,000 when a tenth of 100,000 upload), which the `IN` list serves better.
const WHOLE_TABLE_FROM: usize = 16_384;

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

/// The located sample in the seven columns of `row` from `first` on.
fn read_located(row: &Row<'_>, first: usize) -> rusqlite::Result<Located> {
    Ok((
        row.get(first)?,
        row.get(first + 1)?,
        row.get(first + 2)?,
        row.get(first + 3)?,
        row.get(first + 4)?,
        row.get(first + 5)?,
        row.get(first + 6)?,
    ))
}

/// The read routes' side of the embedded store.
#[derive(Debug, Clone)]
pub struct SqliteReadings {
    db: Arc<Sqlite>,
    recent: RecentSeconds,
    latest: SetLatest,
    /// Which pooled sets were read lately: the ones a new set does not push out.
    reads: Arc<LastReads>,
}

impl SqliteReadings {
    /// Readings stored in `db`.
    pub fn new(db: Arc<Sqlite>) -> Self {
        Self {
            db,
            recent: RecentSeconds::default(),
            latest: SetLatest::default(),
            reads: Arc::default(),
        }
    }

    /// Runs `work` with the asked devices and their view of unconsumed rows, in one read
    /// transaction.
    async fn with_view<T, F>(&self, devices: &[DeviceUuid], work: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnOnce(&Connection, &Rc<Vec<Value>>, UnconsumedView) -> Result<T, StoreError>
            + Send
            + 'static,
    {
        let devices = owned_devices(devices);
        let db = Arc::clone(&self.db);
        self.db
            .read_snapshot(move |connection| {
                let view = UnconsumedView::read(connection, db.ingestion(), &devices)?;
                work(connection, &device_array(&devices), view)
            })
            .await
    }

    /// The sums of `plan`'s buckets over `devices`, in one read transaction: from the pooled set
    /// named `pooled` when it is made (else `None`), or from the devices' own rollups.
    async fn bucket_sums(
        &self,
        devices: &[DeviceUuid],
        plan: &BucketPlan,
        pooled: Option<[u8; 32]>,
    ) -> Result<Option<Vec<Aggregate>>, StoreError> {
        let buckets: Vec<_> = plan.buckets.iter().map(|b| (b.start, b.end)).collect();
        let starts: Vec<i64> = plan.buckets.iter().map(|b| to_micros(b.start)).collect();
        let end = plan.buckets.last().map_or(i64::MIN, |b| to_micros(b.end));
        let reads = Arc::clone(&self.reads);
        self.with_view(devices, move |connection, devices, view| {
            let source = match pooled {
                Some(key) => match pooled::find(connection, &key)? {
                    Some(set) => {
                        reads.touch(set);
                        Source::Pooled(set)
                    }
                    None => return Ok(None),
                },
                None => Source::Devices(devices),
            };
            let (covers, read) = plan_reads(buckets.iter().copied(), hours_through(connection)?);
            let slots = SlotSums::read(connection, &source, &read)?;
            let mut sums: Vec<Aggregate> = covers.iter().map(|pieces| slots.sum(pieces)).collect();
            let bucket_of = |at: i64| {
                (at < end)
                    .then(|| starts.partition_point(|start| *start <= at).checked_sub(1))
                    .flatten()
            };
            merge_view(&view, bucket_of, &mut sums);
            Ok(Some(sums))
        })
        .await
    }

    /// The sums of `plan`'s buckets over the pooled set of `devices`, made first if it is not.
    async fn pooled_bucket_sums(
        &self,
        devices: &[DeviceUuid],
        plan: &BucketPlan,
    ) -> Result<Vec<Aggregate>, StoreError> {
        let owned = owned_devices(devices);
        let key = pooled::key_of(&owned);
        // Made, or dropped meanwhile by a deletion or for a newer set: make it (again).
        for _ in 0..2 {
            if let Some(sums) = self.bucket_sums(devices, plan, Some(key)).await? {
                return Ok(sums);
            }
            let owned = owned.clone();
            let now = Utc::now().timestamp_micros();
            let reads = Arc::clone(&self.reads);
            self.db
                .write(move |connection| {
                    pooled::build(connection, &key, &device_array(&owned), now, &reads)
                })
                .await?;
        }
        // Dropped again at once (sets made faster than reads take them): the devices' rollups.
        self.bucket_sums(devices, plan, None)
            .await
            .map(Option::unwrap_or_default)
    }
}

/// Rollup rows a bucket read of `devices` devices takes, about: a day row per day of the plan's
/// span and a few edge rows per bucket, per device.
fn rows_about(devices: usize, plan: &BucketPlan) -> usize {
    let (Some(first), Some(last)) = (plan.buckets.first(), plan.buckets.last()) else {
        return 0;
    };
    let days = usize::try_from((last.end - first.start).num_days()).unwrap_or(0);
    devices.saturating_mul(days + plan.buckets.len())
}

/// From about this many rollup rows on, a bucket read reads two halves of the devices at once,
/// on two reader connections: a year of days for 20 devices (about 15,000 rows) spent most of its
/// time stepping through rows on one core. Below it, handing half to a second thread costs more
/// than it saves.
const SPLIT_ROWS: usize = 2_000;

/// `count, one sum per value` over folded raw readings (`r`).
static SUM_COLUMNS: LazyLock<String> =
    LazyLock::new(|| format!("count(*), {}(r.body)", super::packed_reading::SUMS));

/// An [`Aggregate`] from a row of `count, packed sums`.
fn read_aggregate(row: &Row<'_>) -> rusqlite::Result<Aggregate> {
    Ok(Aggregate {
        count: u64::try_from(row.get::<_, i64>(0)?).unwrap_or(0),
        sums: packed_sums::read(row, 1)?,
    })
}

/// Adds the view's rows whose time `keep` accepts and takes away the folded readings they
/// replace, to the aggregate `slot` picks for each time (or none).
fn merge_view(
    view: &UnconsumedView,
    mut slot: impl FnMut(i64) -> Option<usize>,
    sums: &mut [Aggregate],
) {
    for row in &view.rows {
        if let Some(sum) = slot(row.at).and_then(|index| sums.get_mut(index)) {
            *sum += Aggregate::of(&row.values);
        }
    }
    for replaced in &view.replaced {
        if let Some(sum) = slot(replaced.at).and_then(|index| sums.get_mut(index)) {
            sum.count = sum.count.saturating_sub(1);
            sum.sums -= replaced.values;
        }
    }
}

/// The sums of the asked devices (`asked`, and as the `rarray` parameter `devices`) over
/// `(after, until]`, the view's rows merged: from the recent seconds' sums when the range is in
/// whole seconds, else from the raw readings.
fn window_sums(
    connection: &Connection,
    recent: &RecentSeconds,
    asked: &[[u8; 16]],
    devices: &Rc<Vec<Value>>,
    view: &UnconsumedView,
    (after, until): (i64, i64),
) -> Result<Aggregate, StoreError> {
    let kept = match Seconds::of(after, until) {
        Some(seconds) => {
            let marks = (folded_id(connection)?, removed(connection)?);
            recent.sum(connection, asked, devices, seconds, marks)?
        }
        None => None,
    };
    let folded = match kept {
        Some(folded) => folded,
        None => connection
            .prepare_cached(&format!(
                "SELECT {} FROM readings_by_device b JOIN readings r ON r.id = b.id \
                 WHERE b.device IN (SELECT number FROM device_numbers WHERE device IN rarray(?1)) \
                 AND b.at > ?2 AND b.at <= ?3",
                *SUM_COLUMNS
            ))?
            .query_row(params![Rc::clone(devices), after, until], read_aggregate)?,
    };
    let mut sums = [folded];
    merge_view(
        view,
        |at| (at > after && at <= until).then_some(0),
        &mut sums,
    );
    Ok(sums[0])
}

/// The latest sample's time of any of `devices` and the latest located sample's position, the
/// view's rows included, in one pass over their `device_latest` rows; `None` without a sample.
fn latest_of_all(
    connection: &Connection,
    devices: &Rc<Vec<Value>>,
    view: &UnconsumedView,
) -> Result<Option<(i64, Option<Position>)>, StoreError> {
    let folded = folded_latest(connection, devices, view)?;
    Ok(with_view_rows(
        folded.last_seen,
        folded.position.map(|(_, position)| position),
        view,
    ))
}

/// The latest sample's time of any of `devices` and the latest located sample's position with
/// its device, of folded readings that `view` replaces none of: one pass over their
/// `device_latest` rows.
fn folded_latest(
    connection: &Connection,
    devices: &Rc<Vec<Value>>,
    view: &UnconsumedView,
) -> Result<FoldedLatest, StoreError> {
    let mut statement = connection.prepare_cached(
        "SELECT d.device, d.last_seen, d.located_at, d.lat, d.lon, d.provider \
         FROM rarray(?1) a CROSS JOIN device_latest d ON d.device = a.value",
    )?;
    let mut rows = statement.query([Rc::clone(devices)])?;
    let mut latest = FoldedLatest::default();
    while let Some(row) = rows.next()? {
        let seen: i64 = row.get(1)?;
        latest.last_seen = Some(latest.last_seen.map_or(seen, |last| last.max(seen)));
        let Some(at) = row.get::<_, Option<i64>>(2)? else {
            continue;
        };
        let newer = |at: i64, latest: &FoldedLatest| {
            latest.position.as_ref().is_none_or(|(_, best)| at > best.0)
        };
        if !newer(at, &latest) {
            continue;
        }
        let device = read_device(row, 0)?.unwrap_or_default();
        if view.replaces(device, at) {
            // Gone with the reading an unconsumed one replaces: its latest located one before.
            let mut earlier = located_before(connection, device, at)?;
            while let Some(located) = earlier.as_ref().filter(|l| view.replaces(device, l.0)) {
                earlier = located_before(connection, device, located.0)?;
            }
            if let Some((at, lat, lon, provider, ..)) = earlier {
                if newer(at, &latest) {
                    latest.position = Some((device, (at, lat, lon, provider)));
                }
            }
            continue;
        }
        latest.position = Some((device, (at, row.get(3)?, row.get(4)?, row.get(5)?)));
    }
    Ok(latest)
}

/// The latest sample's time and position of a fleet (a set of [`POOL_FROM`] devices or more),
/// the view's rows included: from the values kept for the set ([`SetLatest`]) when they are of
/// this snapshot and the view replaces no reading they come from, else [`latest_of_all`].
fn latest_of_fleet(
    connection: &Connection,
    kept: &SetLatest,
    asked: &[[u8; 16]],
    devices: &Rc<Vec<Value>>,
    view: &UnconsumedView,
) -> Result<Option<(i64, Option<Position>)>, StoreError> {
    let marks = (folded_id(connection)?, removed(connection)?);
    // Kept values are of folded readings alone: the view of this read is weighed below.
    let folded = kept.get(connection, asked, marks, || {
        folded_latest(connection, devices, &UnconsumedView::default())
    })?;
    let Some(folded) = folded.filter(|folded| {
        folded
            .position
            .as_ref()
            .is_none_or(|(device, position)| !view.replaces(*device, position.0))
    }) else {
        return latest_of_all(connection, devices, view);
    };
    Ok(with_view_rows(
        folded.last_seen,
        folded.position.map(|(_, position)| position),
        view,
    ))
}

/// `last_seen` and `best` (of folded readings) with the view's rows weighed in; `None` without a
/// sample.
fn with_view_rows(
    mut last_seen: Option<i64>,
    mut best: Option<Position>,
    view: &UnconsumedView,
) -> Option<(i64, Option<Position>)> {
    for row in &view.rows {
        last_seen = Some(last_seen.map_or(row.at, |last| last.max(row.at)));
        if let Some((lat, lon, provider)) = &row.location {
            if best.as_ref().is_none_or(|best| row.at >= best.0) {
                best = Some((row.at, *lat, *lon, provider.clone()));
            }
        }
    }
    last_seen.map(|last_seen| (last_seen, best))
}

/// The view's rows and replaced readings per device, for reads that answer device by device.
struct ViewByDevice<'a> {
    rows: HashMap<[u8; 16], Vec<&'a LoggedRow>>,
    replaced: HashMap<[u8; 16], Vec<&'a Replaced>>,
}

impl<'a> ViewByDevice<'a> {
    fn of(view: &'a UnconsumedView) -> Self {
        let mut rows: HashMap<[u8; 16], Vec<&LoggedRow>> = HashMap::new();
        for row in &view.rows {
            rows.entry(row.device).or_default().push(row);
        }
        let mut replaced: HashMap<[u8; 16], Vec<&Replaced>> = HashMap::new();
        for reading in &view.replaced {
            replaced.entry(reading.device).or_default().push(reading);
        }
        Self { rows, replaced }
    }

    /// The device's latest unconsumed time.
    fn latest(&self, device: &[u8; 16]) -> Option<i64> {
        self.rows.get(device)?.iter().map(|row| row.at).max()
    }

    /// Adds the device's rows at a time `keep` accepts to `sums`, and takes away the folded
    /// readings they replace.
    fn merge(&self, device: &[u8; 16], keep: impl Fn(i64) -> bool, sums: &mut Aggregate) {
        for row in self.rows.get(device).into_iter().flatten() {
            if keep(row.at) {
                *sums += Aggregate::of(&row.values);
            }
        }
        for replaced in self.replaced.get(device).into_iter().flatten() {
            if keep(replaced.at) {
                sums.count = sums.count.saturating_sub(1);
                sums.sums -= replaced.values;
            }
        }
    }
}

#[async_trait]
impl ReadingStore for SqliteReadings {
    async fn latest_each(
        &self,
        devices: &[DeviceUuid],
    ) -> Result<HashMap<DeviceUuid, (DateTime<Utc>, Aggregate)>, StoreError> {
        self.with_view(devices, |connection, array, view| {
            // Per device: the latest time, and the folded one (`None`: nothing folded yet).
            let mut latest: HashMap<[u8; 16], (i64, Option<i64>)> = HashMap::new();
            let mut folded = connection.prepare_cached(
                "SELECT d.device, d.last_seen FROM rarray(?1) a CROSS JOIN device_latest d \
                 ON d.device = a.value",
            )?;
            let rows = folded.query_map([Rc::clone(array)], |row| {
                Ok((read_device(row, 0)?, row.get::<_, i64>(1)?))
            })?;
            for row in rows {
                if let (Some(device), at) = row? {
                    latest.insert(device, (at, Some(at)));
                }
            }
            let by_device = ViewByDevice::of(&view);
            for device in by_device.rows.keys() {
                if let Some(at) = by_device.latest(device) {
                    let entry = latest.entry(*device).or_insert((at, None));
                    entry.0 = entry.0.max(at);
                }
            }
            let mut at_instant = connection.prepare_cached(&format!(
                "SELECT {} FROM readings_by_device b JOIN readings r ON r.id = b.id \
                 WHERE b.device = {} AND b.at = ?2",
                *SUM_COLUMNS,
                device_number("?1")
            ))?;
            let mut answer = HashMap::with_capacity(latest.len());
            for (device, (at, folded_at)) in latest {
                // A latest time newer than the folded one (or with none folded) is only in the
                // view: no query.
                let mut sums = if folded_at.is_none_or(|folded| folded < at) {
                    Aggregate::default()
                } else {
                    at_instant.query_row(params![device.as_slice(), at], read_aggregate)?
                };
                by_device.merge(&device, |time| time == at, &mut sums);
                if sums.count > 0 {
                    answer.insert(
                        DeviceUuid::from_uuid(Uuid::from_bytes(device)),
                        (from_micros(at)?, sums),
                    );
                }
            }
            Ok(answer)
        })
        .await
    }

    async fn aggregate_each(
        &self,
        ranges: &[(DeviceUuid, DateTime<Utc>, DateTime<Utc>)],
    ) -> Result<Vec<Aggregate>, StoreError> {
        let asked: Vec<([u8; 16], i64, i64)> = ranges
            .iter()
            .map(|(device, after, until)| {
                (device_bytes(*device), to_micros(*after), to_micros(*until))
            })
            .collect();
        let devices: Vec<DeviceUuid> = ranges
            .iter()
            .map(|(device, ..)| *device)
            .collect::<HashSet<_>>()
            .into_iter()
            .collect();
        self.with_view(&devices, move |connection, _, view| {
            let by_device = ViewByDevice::of(&view);
            let mut range = connection.prepare_cached(&format!(
                "SELECT {} FROM readings_by_device b JOIN readings r ON r.id = b.id \
                 WHERE b.device = {} AND b.at > ?2 AND b.at <= ?3",
                *SUM_COLUMNS,
                device_number("?1")
            ))?;
            asked
                .into_iter()
                .map(|(device, after, until)| {
                    let mut sums = range
                        .query_row(params![device.as_slice(), after, until], read_aggregate)?;
                    by_device.merge(&device, |at| at > after && at <= until, &mut sums);
                    Ok(sums)
                })
                .collect()
        })
        .await
    }

    async fn last_seen(&self, devices: &[DeviceUuid]) -> Result<Option<DateTime<Utc>>, StoreError> {
        self.with_view(devices, |connection, devices, view| {
            let folded: Option<i64> = connection
                .prepare_cached(
                    "SELECT max(d.last_seen) FROM rarray(?1) a CROSS JOIN device_latest d \
                     ON d.device = a.value",
                )?
                .query_row([Rc::clone(devices)], |row| row.get(0))?;
            let unconsumed = view.rows.iter().map(|row| row.at).max();
            folded.max(unconsumed).map(from_micros).transpose()
        })
        .await
    }

    async fn aggregate(
        &self,
        devices: &[DeviceUuid],
        after: DateTime<Utc>,
        until: DateTime<Utc>,
    ) -> Result<Aggregate, StoreError> {
        let (after, until) = (to_micros(after), to_micros(until));
        let recent = self.recent.clone();
        let asked = owned_devices(devices);
        self.with_view(devices, move |connection, devices, view| {
            window_sums(connection, &recent, &asked, devices, &view, (after, until))
        })
        .await
    }

    async fn current(
        &self,
        fleet: Fleet<'_>,
        now: DateTime<Utc>,
    ) -> Result<Option<CurrentParts>, StoreError> {
        let devices = fleet.devices;
        let recent = self.recent.clone();
        let kept = self.latest.clone();
        let asked = owned_devices(devices);
        self.with_view(devices, move |connection, devices, view| {
            let latest = if asked.len() >= POOL_FROM {
                latest_of_fleet(connection, &kept, &asked, devices, &view)?
            } else {
                latest_of_all(connection, devices, &view)?
            };
            let Some((last_seen, location)) = latest else {
                return Ok(None);
            };
            let last_seen = from_micros(last_seen)?;
            let (after, until) = window(now, last_seen);
            let range = (to_micros(after), to_micros(until));
            let sums = window_sums(connection, &recent, &asked, devices, &view, range)?;
            let location = match location {
                Some((at, lat, lon, provider)) => Some(LocatedAt {
                    lat,
                    lon,
                    provider,
                    at: from_micros(at)?,
                }),
                None => None,
            };
            Ok(Some(CurrentParts {
                last_seen,
                sums,
                location,
            }))
        })
        .await
    }

    async fn buckets(
        &self,
        fleet: Fleet<'_>,
        plan: &BucketPlan,
    ) -> Result<Vec<Aggregate>, StoreError> {
        let devices = fleet.devices;
        if devices.len() >= POOL_FROM {
            return self.pooled_bucket_sums(devices, plan).await;
        }
        if devices.len() < 2 || rows_about(devices.len(), plan) < SPLIT_ROWS {
            return self
                .bucket_sums(devices, plan, None)
                .await
                .map(Option::unwrap_or_default);
        }
        let (first, second) = devices.split_at(devices.len() / 2);
        let (sums, second) = tokio::try_join!(
            self.bucket_sums(first, plan, None),
            self.bucket_sums(second, plan, None)
        )?;
        let mut sums = sums.unwrap_or_default();
        let second = second.unwrap_or_default();
        for (sum, other) in sums.iter_mut().zip(second) {
            *sum += other;
        }
        Ok(sums)
    }

    async fn latest_located(
        &self,
        devices: &[DeviceUuid],
    ) -> Result<Vec<(DeviceUuid, LatestLocated, DateTime<Utc>)>, StoreError> {
        let whole_table = devices.len() >= WHOLE_TABLE_FROM;
        let asked: HashSet<[u8; 16]> = if whole_table {
            owned_devices(devices).into_iter().collect()
        } else {
            HashSet::new()
        };
        self.with_view(devices, move |connection, devices, view| {
            let read_row = |row: &Row<'_>| {
                let device = read_device(row, 0)?.unwrap_or_default();
                if whole_table && !asked.contains(&device) {
                    return Ok(None);
                }
                let located = match row.get::<_, Option<i64>>(1)? {
                    Some(_) => Some(read_located(row, 1)?),
                    None => None,
                };
                Ok(Some((device, located, row.get::<_, i64>(8)?)))
            };
            let rows = if whole_table {
                let mut statement = connection.prepare_cached(
                    "SELECT device, located_at, lat, lon, provider, aqi, pm2_5, temperature, \
                     last_seen FROM device_latest",
                )?;
                let rows = statement
                    .query_map([], read_row)?
                    .filter_map(Result::transpose)
                    .collect::<rusqlite::Result<Vec<_>>>()?;
                rows
            } else {
                let mut statement = connection.prepare_cached(
                    "SELECT device, located_at, lat, lon, provider, aqi, pm2_5, temperature, \
                     last_seen FROM rarray(?1) a CROSS JOIN device_latest d ON d.device = a.value",
                )?;
                let rows = statement
                    .query_map([Rc::clone(devices)], read_row)?
                    .filter_map(Result::transpose)
                    .collect::<rusqlite::Result<Vec<_>>>()?;
                rows
            };
            // Per device: the latest located sample (time, lat, lon, provider, aqi, pm2.5,
            // temperature) and the last contact.
            type Latest = (Option<Located>, i64);
            let mut latest: HashMap<[u8; 16], Latest> = HashMap::with_capacity(rows.len());
            for (device, mut located, last_seen) in rows {
                // A folded location whose reading an unconsumed one replaces is gone with it; the
                // one before it counts until the replacing row is weighed below.
                while let Some(at) = located.as_ref().map(|located| located.0) {
                    if !view.replaces(device, at) {
                        break;
                    }
                    located = located_before(connection, device, at)?;
                }
                latest.insert(device, (located, last_seen));
            }
            for row in &view.rows {
                let entry = latest.entry(row.device).or_insert((None, row.at));
                entry.1 = entry.1.max(row.at);
                if let Some((lat, lon, provider)) = &row.location {
                    if entry.0.as_ref().is_none_or(|current| row.at >= current.0) {
                        entry.0 = Some((
                            row.at,
                            *lat,
                            *lon,
                            provider.clone(),
                            row.values.aqi(),
                            row.values[Measure::Pm2_5],
                            row.values[Measure::Temperature],
                        ));
                    }
                }
            }
            latest
                .into_iter()
                .filter_map(|(device, (located, last_seen))| Some((device, located?, last_seen)))
                .map(|(device, located, last_seen)| {
                    let (at, lat, lon, provider, aqi, pm2_5, temperature) = located;
                    Ok((
                        DeviceUuid::from_uuid(Uuid::from_bytes(device)),
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

    fn export(&self, device: DeviceUuid, start: DateTime<Utc>, end: DateTime<Utc>) -> ReadingPages {
        let db = Arc::clone(&self.db);
        let device = device_bytes(device);
        let end = to_micros(end);
        ReadingPages::spawn(export_pages::first_cursor(to_micros(start)), move |after| {
            let db = Arc::clone(&db);
            async move { export_pages::page(&db, device, after, end, EXPORT_PAGE_ROWS).await }
        })
    }

    async fn written_since(
        &self,
        since: Option<WriteMark>,
    ) -> Result<Option<(Vec<DeviceUuid>, WriteMark)>, StoreError> {
        let db = Arc::clone(&self.db);
        self.db
            .read_snapshot(move |connection| {
                // The watermark first: rows folded after it are past it next time, and rows not
                // folded yet are unconsumed, listed after it.
                let watermark = folded_id(connection)?;
                let mut devices: HashSet<[u8; 16]> = HashSet::new();
                if let Some(WriteMark(since)) = since {
                    let mut statement = connection.prepare_cached(
                        "SELECT n.device FROM device_numbers n WHERE n.number IN \
                         (SELECT DISTINCT device FROM readings WHERE id > ?1)",
                    )?;
                    let folded = statement.query_map([since], |row| read_device(row, 0))?;
                    for device in folded {
                        devices.extend(device?);
                    }
                    devices.extend(db.ingestion().devices());
                }
                let devices = devices
                    .into_iter()
                    .map(|device| DeviceUuid::from_uuid(Uuid::from_bytes(device)))
                    .collect();
                Ok(Some((devices, WriteMark(watermark))))
            })
            .await
    }

    async fn forget_device(&self, _owner: &OwnerId, device: DeviceUuid) -> Result<(), StoreError> {
        let device = device_bytes(device);
        // The log first: a fold running meanwhile can then only bring rows into `airq.db` that
        // the deletes below take away.
        let db = Arc::clone(&self.db);
        self.db
            .write(move |connection| {
                // Under the writer lock, which the fold holds too: it takes its rows from memory,
                // and must find this device's gone from there as a scan of the log would (also
                // those still syncing or in flight, which join the memory later).
                db.ingestion().forget_device(device, || {
                    let transaction = connection.transaction()?;
                    transaction
                        .prepare_cached(
                            "DELETE FROM readings WHERE id IN \
                             (SELECT id FROM readings_by_device WHERE device = \
                              (SELECT number FROM device_numbers WHERE device = ?1))",
                        )?
                        .execute([device.as_slice()])?;
                    transaction
                        .prepare_cached(
                            "DELETE FROM readings_by_device WHERE device = \
                             (SELECT number FROM device_numbers WHERE device = ?1)",
                        )?
                        .execute([device.as_slice()])?;
                    count_removed(&transaction, 1)?;
                    pooled::forget(&transaction, &device)?;
                    for table in [
                        "device_numbers",
                        "rollups_15m",
                        "rollups_1d",
                        "rollups_hour_of_day",
                        "device_latest",
                    ] {
                        transaction
                            .prepare_cached(&format!("DELETE FROM {table} WHERE device = ?1"))?
                            .execute([device.as_slice()])?;
                    }
                    transaction.commit()?;
                    Ok(())
                })
            })
            .await?;
        Ok(())
    }

    async fn ping(&self) -> Result<(), StoreError> {
        self.db
            .read(|connection| {
                Ok(connection
                    .query_row("SELECT count(*) FROM counters", [], |row| {
                        row.get::<_, i64>(0)
                    })
                    .optional()?)
            })
            .await
            .map(drop)
    }
}

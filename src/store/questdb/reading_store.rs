//! [`ReadingStore`] on QuestDB's PG wire.
//!
//! Queries carry their values as literals: every one is a UUID or an instant that airq produced
//! itself, never client text, and the literal form sidesteps type inference of bind variables.
//! Every query of readings first settles the devices it reads ([`Spool::settle`] when uploads go
//! through a spool, then [`Visibility::settle`]), so it includes every reading this process
//! acknowledged for them. An owner-wide read selects its rows by owner where every row carries
//! one ([`Owners`]), and names every device otherwise; its sums come from the owner views (one
//! row per owner and period, schema 006) for the periods they hold, less the rows of the
//! devices the owner deleted, and from the device views and raw readings for the rest.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::LazyLock;

use async_trait::async_trait;
use chrono::{DateTime, NaiveDateTime, Utc};
use tokio_postgres::Row;
use uuid::Uuid;

use super::owners::{OwnerRows, Owners};
use super::spool::Spool;
use super::view_ranges::{cover, Grain, Piece, Source};
use super::visibility::Visibility;
use super::{device_list, literal, micros_literal, TableName};
use crate::domain::snapshot::window;
use crate::domain::{
    Aggregate, BucketPlan, DeviceUuid, LatestLocated, LocatedAt, Measure, Measurements, OwnerId,
    RawReading,
};
use crate::store::postgres::BoundedPool;
use crate::store::{
    columns, CurrentParts, Fleet, ReadingPages, ReadingStore, StoreError, EXPORT_PAGE_ROWS,
};

/// `count, one sum per value` of raw readings.
static SUMS: LazyLock<String> =
    LazyLock::new(|| format!("count(), {}", columns::each(|name| format!("sum({name})"))));

/// The same of rows of the quarter-hour view (schema 003), whose columns are sums already.
static VIEW_SUMS: LazyLock<String> = LazyLock::new(|| {
    format!(
        "sum(readings), {}",
        columns::each(|name| format!("sum({name})"))
    )
});

/// The read routes' side of QuestDB.
#[derive(Debug, Clone)]
pub struct QuestDbReadings {
    pool: BoundedPool,
    table: TableName,
    /// The views of `table`, in the order of [`Grain::ALL`].
    views: [String; 3],
    visibility: Visibility,
    owners: Owners,
    spool: Option<Spool>,
}

impl QuestDbReadings {
    /// Readings in `table`, read through `pool`, fresh as of what `visibility` (and `spool`, when
    /// uploads go through one) was told, owners' fleets read as `owners` says.
    pub(super) fn new(
        pool: BoundedPool,
        table: TableName,
        (visibility, owners): (Visibility, Owners),
        spool: Option<Spool>,
    ) -> Self {
        Self {
            views: Grain::ALL.map(|grain| grain.view_of(table.as_str())),
            pool,
            table,
            visibility,
            owners,
            spool,
        }
    }

    /// The rows of `fleet` for a read from `from` (microseconds): by owner where every row from
    /// there on carries one, else every device named.
    async fn selection(&self, fleet: Fleet<'_>, from: i64) -> Result<Selection, StoreError> {
        match fleet.owner {
            Some(owner) if self.owners.covers(from) => Ok(Selection::Owner(
                self.owners.rows(owner, fleet.devices).await?,
            )),
            _ => Ok(Selection::Devices(devices_filter(fleet.devices))),
        }
    }

    /// Runs `sql`, a query of readings of `devices`, once this process's acknowledged batches of
    /// them are readable.
    async fn query(&self, devices: &[DeviceUuid], sql: &str) -> Result<Vec<Row>, StoreError> {
        self.settle(devices).await;
        self.run(sql).await
    }

    /// Waits until this process's acknowledged batches of `devices` are readable.
    async fn settle(&self, devices: &[DeviceUuid]) {
        if let Some(spool) = &self.spool {
            spool.settle(devices).await;
        }
        self.visibility.settle(devices).await;
    }

    /// The sums of each of `buckets` (`[start, end)` in microseconds, ascending and contiguous)
    /// for `fleet` ([`QuestDbReadings::selection`]).
    async fn bucket_sums(
        &self,
        fleet: Fleet<'_>,
        buckets: &[(i64, i64)],
    ) -> Result<Vec<Aggregate>, StoreError> {
        let Some(first) = buckets.first() else {
            return Ok(Vec::new());
        };
        let selection = self.selection(fleet, first.0).await?;
        self.sums_where(fleet.devices, &selection, buckets).await
    }

    /// The sums of each of `buckets` (as above) of the rows of `devices` that `selection` takes:
    /// each bucket [`cover`]ed by rows of the views and raw readings as [`Visibility::coverage`]
    /// allows (an owner's from its owner views where they hold a period), one query per view and
    /// one per run of raw readings, run concurrently.
    async fn sums_where(
        &self,
        devices: &[DeviceUuid],
        selection: &Selection,
        buckets: &[(i64, i64)],
    ) -> Result<Vec<Aggregate>, StoreError> {
        let (Some(first), Some(last)) = (buckets.first(), buckets.last()) else {
            return Ok(Vec::new());
        };
        self.settle(devices).await;
        let coverage = self
            .visibility
            .coverage(first.0, last.1, devices.len())
            .await;
        let owner_views = match selection {
            Selection::Owner(_) => coverage.owners.as_ref(),
            Selection::Devices(_) => None,
        };
        let covers: Vec<Vec<Piece>> = buckets
            .iter()
            .map(|(start, end)| {
                let pieces = cover(*start, *end, &coverage);
                match owner_views {
                    Some(held) => pieces.into_iter().map(|piece| held.lift(piece)).collect(),
                    None => pieces,
                }
            })
            .collect();
        let mut rows: BTreeMap<Source, BTreeSet<i64>> = BTreeMap::new();
        // Runs of raw readings: (from, to, whether taken away).
        let mut raw: Vec<(i64, i64, bool)> = Vec::new();
        for piece in covers.iter().flatten() {
            match piece.source {
                Source::Raw => match raw.last_mut() {
                    Some(run) if run.1 == piece.from && run.2 == piece.negative => {
                        run.1 = piece.to;
                    }
                    _ => raw.push((piece.from, piece.to, piece.negative)),
                },
                source => {
                    rows.entry(source).or_default().insert(piece.from);
                }
            }
        }
        let filter = selection.condition();
        let view_sql = self.view_sql(&rows, selection, &filter);
        let view_queries = view_sql.iter().map(|(source, sql, negative)| async move {
            Ok::<_, StoreError>((*source, *negative, self.run(sql).await?))
        });
        let raw_queries = raw.iter().map(|(from, to, _)| {
            let sql = format!(
                "SELECT at, {} FROM {} WHERE {filter} AND at >= {} AND at < {} \
                 SAMPLE BY 15m ALIGN TO CALENDAR",
                *SUMS,
                self.table,
                micros_literal(*from),
                micros_literal(*to)
            );
            async move { self.run(&sql).await }
        });
        let (viewed, raw_rows) = futures_util::future::try_join(
            futures_util::future::try_join_all(view_queries),
            futures_util::future::try_join_all(raw_queries),
        )
        .await?;
        let mut held: HashMap<(Source, i64), Aggregate> = HashMap::new();
        // An owner view's rows before the deleted devices' rows taken away from them.
        for taking_away in [false, true] {
            for (source, _, rows) in viewed
                .iter()
                .filter(|(_, negative, _)| *negative == taking_away)
            {
                for row in rows {
                    let at = utc(row.try_get(0)?).timestamp_micros();
                    let sums = held.entry((*source, at)).or_default();
                    add(sums, aggregate(row, 1)?, taking_away);
                }
            }
        }
        let mut sums = vec![Aggregate::default(); buckets.len()];
        // Additions before what is taken away: a count never drops below zero on the way.
        for negative in [false, true] {
            for (bucket, pieces) in sums.iter_mut().zip(&covers) {
                for piece in pieces.iter().filter(|piece| piece.negative == negative) {
                    // Raw pieces are summed below, by the quarter hour they fall in.
                    if piece.source == Source::Raw {
                        continue;
                    }
                    if let Some(rows) = held.get(&(piece.source, piece.from)) {
                        add(bucket, *rows, negative);
                    }
                }
            }
            let runs = raw.iter().zip(&raw_rows);
            for (_, rows) in runs.filter(|((.., taken), _)| *taken == negative) {
                for row in rows {
                    // A raw quarter hour clipped by the first bucket's start belongs to it; one
                    // taken away belongs to the bucket whose edge its quarter hour holds.
                    let at = utc(row.try_get(0)?).timestamp_micros().max(first.0);
                    let index = buckets.partition_point(|(start, _)| *start <= at);
                    if let Some(slot) = index.checked_sub(1).and_then(|index| sums.get_mut(index)) {
                        add(slot, aggregate(row, 1)?, negative);
                    }
                }
            }
        }
        Ok(sums)
    }

    /// The queries of the view rows starting at `rows` (per source) of `selection`, whose
    /// condition on device-level rows is `filter`: each `(source, query, whether its sums are
    /// taken away)`. An owner view's rows come with the rows of the devices the owner deleted,
    /// taken away from them.
    fn view_sql(
        &self,
        rows: &BTreeMap<Source, BTreeSet<i64>>,
        selection: &Selection,
        filter: &str,
    ) -> Vec<(Source, String, bool)> {
        let mut queries = Vec::new();
        for (source, starts) in rows {
            let sums_of = |view: &str, condition: &str, grain: Grain| {
                format!(
                    "SELECT at, {} FROM {view} WHERE {condition} AND {} GROUP BY at",
                    *VIEW_SUMS,
                    rows_filter(starts, grain.length())
                )
            };
            match (*source, selection) {
                (Source::View(grain), _) => {
                    queries.push((*source, sums_of(self.view_of(grain), filter, grain), false));
                }
                (Source::Owners(grain), Selection::Owner(owner)) => {
                    let view = grain.owner_view_of(self.table.as_str());
                    queries.push((
                        *source,
                        sums_of(&view, &owner.owner_condition(), grain),
                        false,
                    ));
                    if let Some(gone) = owner.gone_condition() {
                        queries.push((*source, sums_of(self.view_of(grain), &gone, grain), true));
                    }
                }
                (Source::Raw, _) | (Source::Owners(_), Selection::Devices(_)) => {}
            }
        }
        queries
    }

    /// The latest reading's time of `owner`'s fleet `devices` read by owner, with the rows that
    /// holds for; `None` when it is not known that way (no reading since rows carry their owner:
    /// the caller reads device by device).
    async fn owner_latest(
        &self,
        owner: &OwnerId,
        devices: &[DeviceUuid],
    ) -> Result<Option<(DateTime<Utc>, OwnerRows)>, StoreError> {
        let rows = self.owners.rows(owner, devices).await?;
        let filter = rows.condition();
        let latest = self
            .query(
                devices,
                &format!(
                    "SELECT at FROM {} WHERE {filter} ORDER BY at DESC LIMIT 1",
                    self.table
                ),
            )
            .await?;
        let Some(row) = latest.first() else {
            return Ok(None);
        };
        let at = utc(row.try_get(0)?);
        Ok(self
            .owners
            .covers(at.timestamp_micros())
            .then_some((at, rows)))
    }

    /// The latest located reading's position of the rows `filter` selects, when one was stored
    /// after `after`: the snapshot's window bounds the search, as a fleet without positions would
    /// otherwise be read back to its first row.
    async fn position_after(
        &self,
        filter: &str,
        after: DateTime<Utc>,
    ) -> Result<Option<LocatedAt>, StoreError> {
        let rows = self
            .run(&format!(
                "SELECT at, lat, lon, location_provider FROM {} \
                 WHERE {filter} AND lat IS NOT NULL AND at > {} ORDER BY at DESC LIMIT 1",
                self.table,
                literal(after)
            ))
            .await?;
        rows.first()
            .map(|row| {
                Ok(LocatedAt {
                    at: utc(row.try_get(0)?),
                    lat: row.try_get(1)?,
                    lon: row.try_get(2)?,
                    provider: row.try_get::<_, Option<String>>(3)?.unwrap_or_default(),
                })
            })
            .transpose()
    }

    /// The latest located reading's position of `devices`, device by device.
    async fn position_of(&self, devices: &[DeviceUuid]) -> Result<Option<LocatedAt>, StoreError> {
        Ok(self
            .latest_located(devices)
            .await?
            .into_iter()
            .map(|(_, latest, _)| latest.position)
            .max_by_key(|position| position.at))
    }

    /// The view of `grain`.
    fn view_of(&self, grain: Grain) -> &str {
        let [quarter, hour, day] = &self.views;
        match grain {
            Grain::Quarter => quarter,
            Grain::Hour => hour,
            Grain::Day => day,
        }
    }

    async fn run(&self, sql: &str) -> Result<Vec<Row>, StoreError> {
        self.pool
            .run(async |client| Ok(client.query(sql, &[]).await?))
            .await
    }
}

/// `part` added to `sums`, or taken away from them when `negative`.
fn add(sums: &mut Aggregate, part: Aggregate, negative: bool) {
    if negative {
        *sums -= part;
    } else {
        *sums += part;
    }
}

/// The rows a read of sums takes.
enum Selection {
    /// Those this condition selects, naming every device.
    Devices(String),
    /// An owner's: from the owner views where they hold a period.
    Owner(OwnerRows),
}

impl Selection {
    /// The condition on the raw readings and the device views.
    fn condition(&self) -> String {
        match self {
            Self::Devices(condition) => condition.clone(),
            Self::Owner(rows) => rows.condition(),
        }
    }
}

/// The condition that selects the rows of `devices`, each named.
fn devices_filter(devices: &[DeviceUuid]) -> String {
    format!("device IN ({})", device_list(devices))
}

/// The `at` condition that selects view rows starting at `starts` (each `length` long): one
/// range when they are most of the rows between the first and the last, the list otherwise (a
/// year of Berlin days reads 367 edge hours, not 8,784).
fn rows_filter(starts: &BTreeSet<i64>, length: i64) -> String {
    let (Some(first), Some(last)) = (starts.first(), starts.last()) else {
        return "false".to_owned();
    };
    let spanned = (last - first) / length + 1;
    if i64::try_from(starts.len())
        .unwrap_or(i64::MAX)
        .saturating_mul(2)
        >= spanned
    {
        return format!(
            "at >= {} AND at < {}",
            micros_literal(*first),
            micros_literal(last + length)
        );
    }
    let list: Vec<String> = starts.iter().map(|at| micros_literal(*at)).collect();
    format!("at IN ({})", list.join(", "))
}

/// Where a page of an export starts.
#[derive(Debug, Clone, Copy)]
enum Cursor {
    /// At this instant (its readings were not exported yet).
    From(DateTime<Utc>),
    /// After this instant (all its readings were exported).
    After(DateTime<Utc>),
}

/// `at, the values, lat, lon`.
static EXPORT_COLUMNS: LazyLock<String> =
    LazyLock::new(|| format!("at, {}, lat, lon", columns::each(str::to_owned)));

impl QuestDbReadings {
    /// A page of the export of `device`: readings from `cursor` on and before `end`, by time,
    /// [`EXPORT_PAGE_ROWS`] or so. Pages go by time, and every reading at one instant is on the
    /// same page, so none is lost or repeated between pages whatever their order within it.
    async fn export_page(
        &self,
        device: DeviceUuid,
        cursor: Cursor,
        end: DateTime<Utc>,
    ) -> Result<(Vec<RawReading>, Option<Cursor>), StoreError> {
        let (from, operator) = match cursor {
            Cursor::From(at) => (at, ">="),
            Cursor::After(at) => (at, ">"),
        };
        let select = format!(
            "SELECT {} FROM {} WHERE device = '{device}' AND at < {}",
            *EXPORT_COLUMNS,
            self.table,
            literal(end)
        );
        let mut readings = self
            .query(
                &[device],
                &format!(
                    "{select} AND at {operator} {} ORDER BY at LIMIT {EXPORT_PAGE_ROWS}",
                    literal(from)
                ),
            )
            .await?
            .iter()
            .map(raw_reading)
            .collect::<Result<Vec<_>, _>>()?;
        let (Some(first), Some(last)) = (readings.first(), readings.last()) else {
            return Ok((readings, None));
        };
        if readings.len() < EXPORT_PAGE_ROWS {
            return Ok((readings, None));
        }
        let last = last.at;
        if first.at == last {
            // A whole page at one instant: every reading at it, then on after it.
            let at_last = self
                .query(&[device], &format!("{select} AND at = {}", literal(last)))
                .await?
                .iter()
                .map(raw_reading)
                .collect::<Result<Vec<_>, _>>()?;
            return Ok((at_last, Some(Cursor::After(last))));
        }
        // The readings at the last instant may go on past the page: they start the next one.
        readings.retain(|reading| reading.at < last);
        Ok((readings, Some(Cursor::From(last))))
    }
}

/// A row of `EXPORT_COLUMNS`.
fn raw_reading(row: &Row) -> Result<RawReading, StoreError> {
    let mut values = [None; crate::domain::measure::COUNT];
    for (offset, measure) in Measure::ALL.into_iter().enumerate() {
        values[measure.index()] = if measure.is_integer() {
            row.try_get::<_, Option<i64>>(1 + offset)?
                .map(|value| value as f64)
        } else {
            row.try_get::<_, Option<f64>>(1 + offset)?
        };
    }
    let next = 1 + Measure::ALL.len();
    let lat: Option<f64> = row.try_get(next)?;
    let lon: Option<f64> = row.try_get(next + 1)?;
    Ok(RawReading {
        at: utc(row.try_get(0)?),
        values,
        position: lat.zip(lon),
    })
}

fn utc(at: NaiveDateTime) -> DateTime<Utc> {
    at.and_utc()
}

/// An [`Aggregate`] from the columns `count, one sum per value` starting at `first` (a sum over
/// no rows is null).
fn aggregate(row: &Row, first: usize) -> Result<Aggregate, StoreError> {
    let mut sums = Measurements::default();
    for (offset, measure) in Measure::ALL.into_iter().enumerate() {
        let index = first + 1 + offset;
        sums[measure] = if measure.is_integer() {
            row.try_get::<_, Option<i64>>(index)?.unwrap_or(0) as f64
        } else {
            row.try_get::<_, Option<f64>>(index)?.unwrap_or(0.0)
        };
    }
    // The view's count is a sum too: null over no rows.
    let count = row.try_get::<_, Option<i64>>(first)?.unwrap_or(0);
    Ok(Aggregate {
        count: u64::try_from(count).unwrap_or(0),
        sums,
    })
}

fn device(row: &Row, index: usize) -> Result<DeviceUuid, StoreError> {
    let text: String = row.try_get(index)?;
    Uuid::try_parse(&text)
        .map(DeviceUuid::from_uuid)
        .map_err(|_| StoreError::Corrupt(format!("device {text:?} in QuestDB")))
}

#[async_trait]
impl ReadingStore for QuestDbReadings {
    /// From the raw readings; when the retention dropped every one of them (a set silent past
    /// it), from the quarter-hour view, which keeps them: the start of the last quarter hour
    /// with a reading, so the current snapshot says the set is silent past the retention
    /// rather than that it never reported.
    async fn last_seen(&self, devices: &[DeviceUuid]) -> Result<Option<DateTime<Utc>>, StoreError> {
        if devices.is_empty() {
            return Ok(None);
        }
        let list = device_list(devices);
        let rows = self
            .query(
                devices,
                &format!(
                    "SELECT at FROM {} WHERE device IN ({list}) LATEST ON at PARTITION BY device",
                    self.table,
                ),
            )
            .await?;
        let latest = rows.iter().map(|row| Ok(utc(row.try_get(0)?))).try_fold(
            None,
            |latest: Option<DateTime<Utc>>, at: Result<_, StoreError>| {
                let at = at?;
                Ok::<_, StoreError>(Some(latest.map_or(at, |latest| latest.max(at))))
            },
        )?;
        if latest.is_some() {
            return Ok(latest);
        }
        let kept = self
            .run(&format!(
                "SELECT max(at) FROM {} WHERE device IN ({list})",
                self.view_of(Grain::Quarter)
            ))
            .await?;
        Ok(kept
            .first()
            .map(|row| row.try_get::<_, Option<NaiveDateTime>>(0))
            .transpose()?
            .flatten()
            .map(utc))
    }

    async fn aggregate(
        &self,
        devices: &[DeviceUuid],
        after: DateTime<Utc>,
        until: DateTime<Utc>,
    ) -> Result<Aggregate, StoreError> {
        if devices.is_empty() || after >= until {
            return Ok(Aggregate::default());
        }
        // `(after, until]` is `[after + 1 µs, until + 1 µs)`: instants are whole microseconds.
        let range = (after.timestamp_micros() + 1, until.timestamp_micros() + 1);
        Ok(self
            .bucket_sums(Fleet::of(devices), &[range])
            .await?
            .pop()
            .unwrap_or_default())
    }

    /// By owner where it can ([`QuestDbReadings::owner_latest`]): the latest reading, the window's
    /// sums and the latest position in it; device by device for what it cannot.
    async fn current(
        &self,
        fleet: Fleet<'_>,
        now: DateTime<Utc>,
    ) -> Result<Option<CurrentParts>, StoreError> {
        let devices = fleet.devices;
        let by_owner = match fleet.owner {
            Some(owner) if !devices.is_empty() => self.owner_latest(owner, devices).await?,
            _ => None,
        };
        let (last_seen, owner_rows) = match by_owner {
            Some((at, rows)) => (at, Some(rows)),
            None => match self.last_seen(devices).await? {
                Some(at) => (at, None),
                None => return Ok(None),
            },
        };
        let (after, until) = window(now, last_seen);
        // `(after, until]` is `[after + 1 µs, until + 1 µs)`: instants are whole microseconds.
        let range = (after.timestamp_micros() + 1, until.timestamp_micros() + 1);
        let owner_rows = owner_rows.filter(|_| self.owners.covers(range.0));
        let (sums, location) = match owner_rows {
            Some(rows) => {
                let filter = rows.condition();
                let (sums, position) = futures_util::future::try_join(
                    self.sums_where(devices, &Selection::Owner(rows), &[range]),
                    self.position_after(&filter, after),
                )
                .await?;
                let location = match position {
                    Some(position) => Some(position),
                    None => self.position_of(devices).await?,
                };
                (sums, location)
            }
            None => {
                futures_util::future::try_join(
                    self.sums_where(
                        devices,
                        &Selection::Devices(devices_filter(devices)),
                        &[range],
                    ),
                    self.position_of(devices),
                )
                .await?
            }
        };
        Ok(Some(CurrentParts {
            last_seen,
            sums: sums.into_iter().next().unwrap_or_default(),
            location,
        }))
    }

    async fn buckets(
        &self,
        fleet: Fleet<'_>,
        plan: &BucketPlan,
    ) -> Result<Vec<Aggregate>, StoreError> {
        if fleet.devices.is_empty() {
            return Ok(vec![Aggregate::default(); plan.buckets.len()]);
        }
        let buckets: Vec<(i64, i64)> = plan
            .buckets
            .iter()
            .map(|bucket| {
                (
                    bucket.start.timestamp_micros(),
                    bucket.end.timestamp_micros(),
                )
            })
            .collect();
        self.bucket_sums(fleet, &buckets).await
    }

    async fn latest_located(
        &self,
        devices: &[DeviceUuid],
    ) -> Result<Vec<(DeviceUuid, LatestLocated, DateTime<Utc>)>, StoreError> {
        if devices.is_empty() {
            return Ok(Vec::new());
        }
        let list = device_list(devices);
        let located = self
            .query(
                devices,
                &format!(
                "SELECT device, at, lat, lon, location_provider, aqi, pm2_5, temperature FROM {} \
                 WHERE device IN ({list}) AND lat IS NOT NULL LATEST ON at PARTITION BY device",
                self.table
            ),
            )
            .await?;
        if located.is_empty() {
            return Ok(Vec::new());
        }
        let seen: HashMap<DeviceUuid, DateTime<Utc>> = self
            .query(devices, &format!(
                "SELECT device, at FROM {} WHERE device IN ({list}) LATEST ON at PARTITION BY device",
                self.table
            ))
            .await?
            .iter()
            .map(|row| Ok((device(row, 0)?, utc(row.try_get(1)?))))
            .collect::<Result<_, StoreError>>()?;
        located
            .iter()
            .map(|row| {
                let id = device(row, 0)?;
                let at = utc(row.try_get(1)?);
                Ok((
                    id,
                    LatestLocated {
                        position: LocatedAt {
                            lat: row.try_get(2)?,
                            lon: row.try_get(3)?,
                            provider: row.try_get::<_, Option<String>>(4)?.unwrap_or_default(),
                            at,
                        },
                        aqi: row.try_get(5)?,
                        pm2_5: row.try_get(6)?,
                        temperature: row.try_get(7)?,
                    },
                    seen.get(&id).copied().unwrap_or(at),
                ))
            })
            .collect()
    }

    fn export(&self, device: DeviceUuid, start: DateTime<Utc>, end: DateTime<Utc>) -> ReadingPages {
        let this = self.clone();
        ReadingPages::spawn(Cursor::From(start), move |cursor| {
            let this = this.clone();
            async move { this.export_page(device, cursor, end).await }
        })
    }

    /// QuestDB cannot delete rows: the deletion is recorded, and the rows are unreachable once
    /// the device is gone ([`Owners`]).
    async fn forget_device(&self, owner: &OwnerId, device: DeviceUuid) -> Result<(), StoreError> {
        self.owners.record_gone(owner, device).await
    }

    async fn ping(&self) -> Result<(), StoreError> {
        self.run("SELECT 1").await.map(drop)
    }
}

//! The production reading store: QuestDB, written over ILP/HTTP, read over PG wire.
//!
//! - [`QuestDbSink`] is a batch writer lane: each batch is one transactional ILP/HTTP flush into
//!   a WAL table with deduplication on `(at, device, dedup)` (`dedup` 0 for a reading keyed by its
//!   `measured_at`, its receipt id otherwise), so a re-sent reading replaces the stored one and a
//!   retry after an uncertain failure never duplicates. [`QuestDbConfig::senders`] sinks, each
//!   with its own ILP/HTTP sender, keep that many flushes in flight. Receipt ids come in blocks
//!   from a PostgreSQL sequence shared by every process.
//! - With [`QuestDbConfig::spool`], the batch writer's one sink is a [`SpoolSink`] instead: an
//!   upload is answered once it is durable in a local spool (the ingestion log, `ingest/` in the
//!   data directory), and a forwarder sends the spool on to QuestDB through that many senders, in
//!   batches as large as the backlog ([`spool`], [`forward`]).
//! - [`Visibility`] keeps read-your-writes without a wait on the write path: an upload is answered
//!   once QuestDB acknowledged its batch, and a read waits for QuestDB's WAL apply only when it
//!   reads a device with an acknowledged batch that may not be applied yet ([`Spool::settle`]
//!   first waits for the spooled rows of the devices it reads to be acknowledged).
//! - [`QuestDbReadings`] answers the read routes with `LATEST ON … PARTITION BY device` and
//!   `SAMPLE BY … ALIGN TO CALENDAR`, returning the sums the embedded store returns.
//! - Timelines, custom ranges and the current snapshot's hour sum QuestDB's materialized views:
//!   `{table}_15m` (schema 004: per device and quarter hour, count and sums), and `{table}_1h` and
//!   `{table}_1d` derived from it once each hour or day has passed (schema 005) — whole UTC days
//!   from the day view, a zone's day edges from the hours — with the raw readings of the quarter
//!   hours the views may not have refreshed yet ([`view_ranges`], [`Visibility`]).
//! - Every row carries its device's owner (schema 003), and an owner-wide read selects the rows
//!   by owner instead of naming every device ([`owners`]); its timelines sum the owner views
//!   `{table}_o15m`, `{table}_o1h` and `{table}_o1d` (schema 006: the device views summed per
//!   owner, one row per owner and period) where they hold a period.
//! - QuestDB cannot delete rows: a deleted device's readings become unreachable at once (a read
//!   names its devices, taken from the device store, or leaves out the owner's deleted ones) and
//!   stay in the table until the raw retention, the table's TTL, drops their partition (the view
//!   keeps its rows).

mod forward;
mod ids;
mod ilp;
mod import;
mod owners;
mod reading_store;
mod sink;
mod spool;
mod spooled;
mod view_ranges;
mod visibility;

use std::path::Path;

use super::postgres::BoundedPool;
use super::{ReadingSink, StoreError};
use crate::domain::RawRetention;

pub use import::QuestDbImport;
pub use reading_store::QuestDbReadings;
pub use sink::QuestDbSink;
pub use spool::{Spool, SpoolSink};
pub use visibility::Visibility;

/// The schema files, in order; a file's statements are separated by blank lines, and an
/// `ALTER TABLE … ADD COLUMN name …` runs only when the column is missing.
const SCHEMA: &[&str] = &[
    include_str!("../../../schema/questdb/001_readings.sql"),
    include_str!("../../../schema/questdb/002_dedup_by_measured_at.sql"),
    include_str!("../../../schema/questdb/003_owner.sql"),
    include_str!("../../../schema/questdb/004_quarter_hours.sql"),
    include_str!("../../../schema/questdb/005_hours_and_days.sql"),
    include_str!("../../../schema/questdb/006_owner_rollups.sql"),
];

/// Connections to QuestDB's PG wire kept by one process.
const POOL_SIZE: usize = 8;

/// ILP/HTTP senders of a process unless configured: enough to keep a flush in flight while the
/// previous ones wait for their acknowledgement, few enough not to split batches needlessly.
pub const DEFAULT_SENDERS: usize = 4;

/// ILP/HTTP senders of the spool's forwarder unless configured. Its uploads never wait for a
/// flush, so only QuestDB's work counts, and that is mostly per transaction: four senders made
/// four times the transactions, each a quarter as large, and cost QuestDB nearly twice the CPU
/// for fewer rows a second (`bench/RESULTS.md`).
pub const DEFAULT_SPOOL_SENDERS: usize = 1;

/// Where readings live in QuestDB.
#[derive(Debug, Clone)]
pub struct QuestDbConfig {
    /// questdb-rs configuration string for ILP, e.g. `http::addr=127.0.0.1:9000;`.
    pub ilp: String,
    /// PG-wire URL for reads, e.g. `postgres://admin:quest@127.0.0.1:8812/qdb`.
    pub pg: String,
    /// The readings table.
    pub table: TableName,
    /// ILP/HTTP senders, each a batch writer lane: flushes in flight at once (at least 1).
    pub senders: usize,
    /// Acknowledge uploads once they are in the local spool (the data directory's ingestion log,
    /// `ingest/`), not once QuestDB has them.
    pub spool: bool,
}

/// A QuestDB table name airq may splice into SQL: a letter or `_`, then letters, digits and `_`,
/// at most 121 characters (QuestDB's 127 less the `_since` of the table's owner record, the
/// longest suffix of the tables it comes with). Parsed once, at the edge (the `--questdb-table` flag).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableName(String);

impl TableName {
    /// The name, or why it is refused.
    pub fn parse(text: &str) -> Result<Self, String> {
        let mut chars = text.chars();
        let first_ok = chars
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_');
        if first_ok && text.len() <= 121 && chars.all(|c| c.is_ascii_alphanumeric() || c == '_') {
            Ok(Self(text.to_owned()))
        } else {
            Err(format!(
                "{text:?} is not a table name: a letter or _, then letters, digits and _ (at most 121)"
            ))
        }
    }

    /// The name.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for TableName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// A pool on QuestDB's PG wire, with the readings table created (at start, without the calls'
/// time bound, as PostgreSQL's schema), and the instant from which its rows carry their owner
/// ([`owners::prepare`]).
async fn connect(config: &QuestDbConfig) -> Result<(BoundedPool, i64), StoreError> {
    let (pool, _) = super::postgres::pool(&config.pg, POOL_SIZE)?;
    let client = pool.get().await?;
    let owned_since = owners::prepare(&client, &config.table).await?;
    let table = config.table.as_str();
    for file in SCHEMA {
        for statement in file.split("\n\n") {
            let sql: String = statement
                .lines()
                .filter(|line| !line.trim_start().starts_with("--"))
                .collect::<Vec<_>>()
                .join("\n")
                .replace("{table}", table);
            if sql.trim().is_empty() {
                continue;
            }
            let added = added_column(&sql);
            if let Some(column) = added {
                if has_column(&client, table, column).await? {
                    continue;
                }
            }
            client.simple_query(&sql).await?;
            // A WAL table takes a new column when it applies the change, a moment later: the
            // statements after it (a view that selects the column) wait for that.
            if let Some(column) = added {
                let started = std::time::Instant::now();
                while !has_column(&client, table, column).await? && started.elapsed() < COLUMN_WAIT
                {
                    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
                }
            }
        }
    }
    Ok((BoundedPool::new(pool), owned_since))
}

/// How long the start waits for a WAL table to show a column it was just given.
const COLUMN_WAIT: std::time::Duration = std::time::Duration::from_secs(30);

/// The columns of `table` (or view), as far as QuestDB applied its changes.
async fn table_columns(
    client: &deadpool_postgres::Client,
    table: &str,
) -> Result<Vec<String>, StoreError> {
    client
        .query(
            format!("SELECT \"column\" FROM table_columns('{table}')").as_str(),
            &[],
        )
        .await?
        .iter()
        .map(|row| Ok(row.try_get::<_, String>(0)?))
        .collect()
}

/// Whether `table` has `column`.
async fn has_column(
    client: &deadpool_postgres::Client,
    table: &str,
    column: &str,
) -> Result<bool, StoreError> {
    Ok(table_columns(client, table)
        .await?
        .iter()
        .any(|name| name == column))
}

/// The reading store on QuestDB: its batch writer sinks — one per configured sender, or the one
/// spool sink — (receipt ids from the PostgreSQL pool `ids`), the reads, sharing one
/// [`Visibility`], and the spool when there is one (for `/metrics`). The spool lives in
/// `data_dir`, in segment files of `segment_bytes`.
pub async fn open(
    config: &QuestDbConfig,
    ids: BoundedPool,
    (data_dir, segment_bytes): (&Path, u64),
    retention: RawRetention,
) -> Result<Opened, StoreError> {
    let (reads, owned_since) = connect(config).await?;
    keep_raw_for(&reads, &config.table, retention).await?;
    let visibility = Visibility::start(reads.clone(), &config.table).await?;
    let (sinks, spool): (Vec<Box<dyn ReadingSink>>, _) = match config.spool {
        true => {
            let lanes = forward::Lanes {
                ilp: config.ilp.clone(),
                table: config.table.clone(),
                count: config.senders.max(1),
                visibility: visibility.clone(),
            };
            let (sink, spool) = SpoolSink::open((data_dir, segment_bytes), ids, lanes)?;
            (vec![Box::new(sink)], Some(spool))
        }
        false => {
            let sinks = (0..config.senders.max(1))
                .map(|_| {
                    QuestDbSink::new(
                        config.ilp.clone(),
                        config.table.clone(),
                        ids.clone(),
                        visibility.clone(),
                    )
                    .map(|sink| Box::new(sink) as Box<dyn ReadingSink>)
                })
                .collect::<Result<_, _>>()?;
            (sinks, None)
        }
    };
    let owners = owners::Owners::new(reads.clone(), config.table.clone(), owned_since);
    let readings = QuestDbReadings::new(
        reads,
        config.table.clone(),
        (visibility, owners),
        spool.clone(),
    );
    Ok(Opened {
        sinks,
        readings,
        spool,
    })
}

/// Sets the readings table's TTL to the raw retention (none when it keeps everything): QuestDB
/// then drops each daily partition once all of it is older than the retention, by its own clock
/// (capped by the latest reading's time), after a commit. The quarter-hour view has no TTL and
/// keeps its rows, so timelines answer past the retention; airq refuses what needs raw readings
/// before it by its own clock, whether QuestDB dropped them yet or not.
async fn keep_raw_for(
    reads: &BoundedPool,
    table: &TableName,
    retention: RawRetention,
) -> Result<(), StoreError> {
    let days = retention.days_kept().unwrap_or(0);
    let sql = format!("ALTER TABLE {table} SET TTL {days} DAYS");
    reads
        .run(async |client| Ok(client.simple_query(&sql).await?))
        .await
        .map(drop)
}

/// What [`open`] hands the application.
#[derive(Debug)]
pub struct Opened {
    /// The batch writer's sinks.
    pub sinks: Vec<Box<dyn ReadingSink>>,
    /// The read side.
    pub readings: QuestDbReadings,
    /// The spool, when uploads go through one.
    pub spool: Option<Spool>,
}

/// The column an `ALTER TABLE … ADD COLUMN name type` statement adds.
fn added_column(sql: &str) -> Option<&str> {
    let words: Vec<&str> = sql.split_whitespace().collect();
    let at = words.windows(2).position(|pair| {
        pair[0].eq_ignore_ascii_case("ADD") && pair[1].eq_ignore_ascii_case("COLUMN")
    })?;
    words.get(at + 2).copied()
}

/// A QuestDB timestamp literal for an instant (microsecond precision, UTC).
fn literal(at: chrono::DateTime<chrono::Utc>) -> String {
    format!("'{}'", at.format("%Y-%m-%dT%H:%M:%S%.6fZ"))
}

/// The same for an instant in microseconds since the epoch.
fn micros_literal(micros: i64) -> String {
    chrono::DateTime::from_timestamp_micros(micros).map_or_else(|| format!("{micros}"), literal)
}

/// `'uuid', 'uuid', …` for an `IN (…)` list; UUIDs are generated by us, never client text.
fn device_list(devices: &[crate::domain::DeviceUuid]) -> String {
    devices
        .iter()
        .map(|device| format!("'{device}'"))
        .collect::<Vec<_>>()
        .join(", ")
}

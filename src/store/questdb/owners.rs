//! Reading an owner's fleet by its owner instead of by the list of its devices.
//!
//! Every row written carries its device's owner (schema 003, from the upload's credentials), and
//! the views keep it beside the device. An owner-wide read then filters on one symbol: QuestDB
//! no longer parses a list of every device nor resolves each of them at every execution, which
//! was most of what a fleet's read cost it (`bench/RESULTS.md`, the thirty-first session's
//! profile). Two things keep those reads equal to reading the devices one by one:
//!
//! - **Rows from before the column.** A table that had rows when the column came has rows with
//!   no owner. At that start airq records, in `{table}_since`, the instant from which every row
//!   has one: the start plus the five minutes a `measured_at` may lie ahead (rows received before
//!   cannot be stored later than that). An owner read of anything that begins before it names
//!   the devices instead. A table made with the column records the epoch: every row has one.
//!   (This holds once every airq writing the table has the column: an upgrade stops them all.)
//! - **Deleted devices.** QuestDB cannot delete rows, so a device's rows keep its owner after the
//!   device is gone. A deletion is recorded first in `{table}_gone` (not a WAL table: readable as
//!   soon as its insert returns), and an owner read leaves out the rows of the recorded devices
//!   that are not among the owner's devices now (a deletion that failed after the record leaves
//!   its device counted, as it still exists).

use std::collections::HashSet;

use chrono::Utc;

use super::{micros_literal, table_columns, TableName};
use crate::domain::retention::MAX_AHEAD;
use crate::domain::{DeviceUuid, OwnerId};
use crate::store::postgres::BoundedPool;
use crate::store::StoreError;

/// The views of the readings table made before the owner column, dropped at the start so the
/// schema makes them again with it; dependent views first.
const VIEWS_BY_DEPENDENCE: [&str; 3] = ["_1d", "_1h", "_15m"];

/// What an owner read needs to know beyond the owner: from when rows carry it, and where
/// deletions are recorded. Cheap to clone.
#[derive(Debug, Clone)]
pub(super) struct Owners {
    pool: BoundedPool,
    table: TableName,
    /// Every row stored under this instant or later has its owner (microseconds).
    since: i64,
}

/// The start's side, run before the schema: records from when rows carry their owner, and drops
/// the views made before the column (QuestDB builds them again over the table in the background;
/// reads sum raw readings until they caught up, as for any new view). Answers the instant.
pub(super) async fn prepare(
    client: &deadpool_postgres::Client,
    table: &TableName,
) -> Result<i64, StoreError> {
    let names: HashSet<String> = client
        .query("SELECT table_name FROM tables()", &[])
        .await?
        .iter()
        .map(|row| row.try_get::<_, String>(0))
        .collect::<Result<_, _>>()?;
    let since_table = format!("{table}_since");
    client
        .simple_query(&format!(
            "CREATE TABLE IF NOT EXISTS {since_table} (since TIMESTAMP)"
        ))
        .await?;
    let recorded: Option<chrono::NaiveDateTime> = client
        .query_one(
            format!("SELECT max(since) FROM {since_table}").as_str(),
            &[],
        )
        .await?
        .try_get(0)?;
    let existing = names.contains(table.as_str());
    let since = match recorded {
        Some(since) if existing && super::has_column(client, table.as_str(), "owner").await? => {
            since.and_utc().timestamp_micros()
        }
        _ => {
            let has_rows = existing
                && client
                    .query_one(format!("SELECT count() FROM {table}").as_str(), &[])
                    .await?
                    .try_get::<_, i64>(0)?
                    > 0;
            // A table with rows: every row from now on (and what may be stored ahead of now).
            let since = if has_rows {
                (Utc::now() + MAX_AHEAD).timestamp_micros()
            } else {
                0
            };
            // The larger of two records wins: a start that stopped between recording and adding
            // the column records again, later.
            let since = recorded
                .map(|at| at.and_utc().timestamp_micros())
                .unwrap_or(0)
                .max(since);
            client
                .simple_query(&format!(
                    "INSERT INTO {since_table} VALUES ({})",
                    micros_literal(since)
                ))
                .await?;
            since
        }
    };
    for suffix in VIEWS_BY_DEPENDENCE {
        let view = format!("{table}{suffix}");
        if names.contains(&view) && lacks_owner(client, &view).await? {
            client
                .simple_query(&format!("DROP MATERIALIZED VIEW IF EXISTS {view}"))
                .await?;
        }
    }
    Ok(since)
}

/// Whether `view` is known to lack the owner column: it lists columns, and not that one. (A
/// view that lists none at this moment is left alone: dropping a view rebuilds it from the raw
/// readings, which the retention may have thinned.)
async fn lacks_owner(client: &deadpool_postgres::Client, view: &str) -> Result<bool, StoreError> {
    let columns = table_columns(client, view).await?;
    Ok(
        columns.iter().any(|name| name == "readings")
            && !columns.iter().any(|name| name == "owner"),
    )
}

/// How a row names its owner: the first 128 bits of the BLAKE3 hash of the owner's id, in hex.
/// An owner's id is a token's `sub` — up to 255 characters of the identity provider's choosing,
/// quotes included — and the key is 32 characters that go into SQL as they are. (With the id
/// itself, a read by `owner = 'o''brien'` right after an upload missed the reading in one run of
/// three; the same test with an id without a quote, and with the key, never did. Not explained.)
pub(super) fn key(owner: &OwnerId) -> String {
    let hash = blake3::hash(owner.as_str().as_bytes());
    hash.to_hex()[..32].to_owned()
}

impl Owners {
    /// Owner reads of `table` through `pool`, whose rows carry their owner from `since` on.
    pub(super) fn new(pool: BoundedPool, table: TableName, since: i64) -> Self {
        Self { pool, table, since }
    }

    /// Whether a read from `from` (microseconds) may go by owner: every row from there on has one.
    pub(super) fn covers(&self, from: i64) -> bool {
        from >= self.since
    }

    /// Records that `owner` is deleting `device`.
    pub(super) async fn record_gone(
        &self,
        owner: &OwnerId,
        device: DeviceUuid,
    ) -> Result<(), StoreError> {
        let sql = format!(
            "INSERT INTO {}_gone VALUES ('{}', '{device}', now())",
            self.table,
            key(owner)
        );
        self.pool
            .run(async |client| Ok(client.simple_query(&sql).await.map(drop)?))
            .await
    }

    /// The rows of `owner`'s fleet `devices` (all the owner's devices now): the owner's, less
    /// those of the devices the owner deleted.
    pub(super) async fn rows(
        &self,
        owner: &OwnerId,
        devices: &[DeviceUuid],
    ) -> Result<OwnerRows, StoreError> {
        let owner = format!("'{}'", key(owner));
        let sql = format!(
            "SELECT DISTINCT device FROM {}_gone WHERE owner = {owner}",
            self.table
        );
        let recorded = self
            .pool
            .run(async |client| Ok(client.query(sql.as_str(), &[]).await?))
            .await?;
        let live: HashSet<String> = if recorded.is_empty() {
            HashSet::new()
        } else {
            devices.iter().map(ToString::to_string).collect()
        };
        let mut gone = Vec::new();
        for row in &recorded {
            let device: String = row.try_get(0)?;
            // Device ids are UUIDs airq made; anything else is left as no device of ours.
            if uuid::Uuid::try_parse(&device).is_ok() && !live.contains(&device) {
                gone.push(format!("'{device}'"));
            }
        }
        Ok(OwnerRows { owner, gone })
    }
}

/// An owner's rows: its key, and the devices it deleted, whose rows still carry it.
#[derive(Debug, Clone)]
pub(super) struct OwnerRows {
    /// The owner's key as a literal.
    owner: String,
    /// The deleted devices as literals.
    gone: Vec<String>,
}

impl OwnerRows {
    /// The condition on the raw readings and the device views.
    pub(super) fn condition(&self) -> String {
        match self.gone_list() {
            Some(gone) => format!("owner = {} AND device NOT IN ({gone})", self.owner),
            None => self.owner_condition(),
        }
    }

    /// The condition on the owner views, whose rows still hold the deleted devices' sums.
    pub(super) fn owner_condition(&self) -> String {
        format!("owner = {}", self.owner)
    }

    /// The condition on the device views that selects the deleted devices' rows, whose sums an
    /// owner view's row holds and a read takes away; `None` when the owner deleted none.
    pub(super) fn gone_condition(&self) -> Option<String> {
        self.gone_list()
            .map(|gone| format!("owner = {} AND device IN ({gone})", self.owner))
    }

    fn gone_list(&self) -> Option<String> {
        (!self.gone.is_empty()).then(|| self.gone.join(", "))
    }
}

//! Pooled rollups: the rollups of a whole set of devices summed per slot, so that an owner-wide
//! timeline or custom range costs what one device's does, whatever the fleet's size.
//!
//! Why sets and not owners: the store is told which devices a read covers, never whose they are
//! (devices may live in PostgreSQL while readings live here), and an owner's fleet is exactly
//! the set the read layer asks for. A set is named by blake3 over its devices' UUIDs in
//! ascending order, the key [`RecentSeconds`](super::recent_seconds) uses for its sums too.
//!
//! The rules:
//! - **Made once, at the first read of a large set** ([`POOL_FROM`] devices or more): on the
//!   writer connection, so between two fold chunks, from the devices' rollups as they stand
//!   ([`build`]). Thereafter the fold adds every change it makes to a member's rollups to the
//!   set's, in the same transaction ([`apply`]), and derives the set's passed days' hours as it
//!   does a device's ([`derive_passed_days`]). A read sees a set and the devices' rollups at the
//!   same watermark, so the set's sums are the sums of its members' rows.
//! - **A changed fleet is a new set.** A device registered or deleted changes the owner's set's
//!   key: its next read makes the new set. A device's deletion drops every set it was in
//!   ([`forget`]); at most [`MAX_SETS`] sets are kept, and the set read least recently by this
//!   process ([`LastReads`]) is dropped first when a new one needs room, so sets of fleets that
//!   changed do not pile up, and owners who keep reading keep theirs however many others read
//!   once.
//! - **Never a wrong answer:** a read looks its set up inside its own read transaction, so it
//!   reads a set and the rows folded into it at one watermark; a set not (or no longer) there is
//!   made, and the read starts again.

use std::collections::{HashMap, HashSet};
use std::rc::Rc;
use std::sync::Mutex;

use rusqlite::types::Value;
use rusqlite::{params, Connection, OptionalExtension};

use super::rollup::Rollup;
use super::{lock, packed_sums};
use crate::store::StoreError;

/// Sets of fewer devices read their members' rollups directly. From ten on a set pays: a year of
/// days in a zone off UTC midnight reads a day row and the edge hours per day of every device
/// (20 devices in Europe/Berlin: 7.2 ms at the median read device by device, 2.6 ms from their
/// set; bench/RESULTS.md), while a set costs its build (a few milliseconds for 20 devices' year)
/// and the fold one upsert per set and slot of each chunk.
pub(super) const POOL_FROM: usize = 10;
/// Sets kept at most: a set's rows are about one device's rollups, so many fit; what bounds them
/// is the fold, which looks up the sets of every device it folds.
const MAX_SETS: usize = 256;

/// When this process last read each set, in read order: whom [`build`] drops first. A set not
/// read since the start counts as read before every other (the older made first), so a restart
/// forgets nothing it needs: the sets owners keep reading are read again at once.
#[derive(Debug, Default)]
pub(super) struct LastReads {
    /// Read order: each set's last read's number, from a counter.
    order: Mutex<(u64, HashMap<i64, u64>)>,
}

impl LastReads {
    /// Notes a read of `set`.
    pub(super) fn touch(&self, set: i64) {
        let mut order = lock(&self.order);
        order.0 += 1;
        let tick = order.0;
        order.1.insert(set, tick);
    }

    /// `sets` ordered least recently read first; forgets every set not among them (dropped).
    fn coldest_first(&self, mut sets: Vec<i64>) -> Vec<i64> {
        let mut order = lock(&self.order);
        let kept: HashSet<i64> = sets.iter().copied().collect();
        order.1.retain(|set, _| kept.contains(set));
        sets.sort_by_key(|set| (order.1.get(set).copied().unwrap_or(0), *set));
        sets
    }
}

/// The number of the set with `key`, if it has been made.
pub(super) fn find(connection: &Connection, key: &[u8; 32]) -> Result<Option<i64>, StoreError> {
    Ok(connection
        .prepare_cached("SELECT number FROM pooled_sets WHERE key = ?1")?
        .query_row([key.as_slice()], |row| row.get(0))
        .optional()?)
}

/// Makes the set of `devices` (an `rarray` of `count` UUIDs) named `key` from their rollups, in
/// one transaction on the writer connection, dropping the sets least recently read beyond
/// [`MAX_SETS`]; its number (the existing one if another read made it meanwhile), noted as read.
pub(super) fn build(
    connection: &mut Connection,
    key: &[u8; 32],
    devices: &Rc<Vec<Value>>,
    now: i64,
    reads: &LastReads,
) -> Result<i64, StoreError> {
    build_within(connection, key, devices, now, reads, MAX_SETS)
}

/// [`build`], keeping at most `max_sets` sets.
fn build_within(
    connection: &mut Connection,
    key: &[u8; 32],
    devices: &Rc<Vec<Value>>,
    now: i64,
    reads: &LastReads,
    max_sets: usize,
) -> Result<i64, StoreError> {
    let transaction = connection.transaction()?;
    if let Some(number) = find(&transaction, key)? {
        reads.touch(number);
        return Ok(number);
    }
    let count = i64::try_from(devices.len()).unwrap_or(i64::MAX);
    let number: i64 = transaction
        .prepare_cached(
            "INSERT INTO pooled_sets (key, devices, created) VALUES (?1, ?2, ?3) RETURNING number",
        )?
        .query_row(params![key.as_slice(), count, now], |row| row.get(0))?;
    transaction
        .prepare_cached(
            "INSERT OR IGNORE INTO pooled_members (device, pool) SELECT value, ?2 FROM rarray(?1)",
        )?
        .execute(params![Rc::clone(devices), number])?;
    for rollup in Rollup::ALL {
        transaction
            .prepare_cached(&format!(
                "INSERT INTO {pooled} (pool, slot, samples, sums) \
                 SELECT ?2, slot, sum(samples), {total}(sums) FROM {table} \
                 WHERE device IN rarray(?1) GROUP BY slot",
                pooled = rollup.pooled_table(),
                table = rollup.table(),
                total = packed_sums::TOTAL,
            ))?
            .execute(params![Rc::clone(devices), number])?;
    }
    let others: Vec<i64> = transaction
        .prepare_cached("SELECT number FROM pooled_sets WHERE number != ?1")?
        .query_map([number], |row| row.get(0))?
        .collect::<Result<_, _>>()?;
    let excess = others.len().saturating_sub(max_sets.saturating_sub(1));
    for set in reads.coldest_first(others).into_iter().take(excess) {
        drop_set(&transaction, set)?;
    }
    transaction.commit()?;
    reads.touch(number);
    Ok(number)
}

/// The key of the set of `devices`: blake3 over their UUIDs in ascending order.
pub(super) fn key_of(devices: &[[u8; 16]]) -> [u8; 32] {
    let mut sorted = devices.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    let mut hasher = blake3::Hasher::new();
    for device in &sorted {
        hasher.update(device);
    }
    *hasher.finalize().as_bytes()
}

/// Drops every set `device` is in, in `connection`'s transaction (the device's deletion).
pub(super) fn forget(connection: &Connection, device: &[u8; 16]) -> Result<(), StoreError> {
    let sets: Vec<i64> = connection
        .prepare_cached("SELECT pool FROM pooled_members WHERE device = ?1")?
        .query_map([device.as_slice()], |row| row.get(0))?
        .collect::<Result<_, _>>()?;
    for set in sets {
        drop_set(connection, set)?;
    }
    Ok(())
}

fn drop_set(connection: &Connection, set: i64) -> Result<(), StoreError> {
    for rollup in Rollup::ALL {
        connection
            .prepare_cached(&format!(
                "DELETE FROM {} WHERE pool = ?1",
                rollup.pooled_table()
            ))?
            .execute([set])?;
    }
    connection
        .prepare_cached("DELETE FROM pooled_members WHERE pool = ?1")?
        .execute([set])?;
    connection
        .prepare_cached("DELETE FROM pooled_sets WHERE number = ?1")?
        .execute([set])?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sets_key_names_its_devices_whatever_their_order() {
        let (a, b) = ([1u8; 16], [2u8; 16]);
        assert_eq!(key_of(&[a, b]), key_of(&[b, a]));
        assert_ne!(key_of(&[a, b]), key_of(&[a]));
        assert_ne!(key_of(&[a]), key_of(&[b]));
    }

    /// A database with the embedded store's schema and functions.
    fn database() -> Connection {
        let mut connection = Connection::open_in_memory().expect("in-memory database");
        rusqlite::vtab::array::load_module(&connection).expect("rarray");
        packed_sums::register(&connection).expect("sums functions");
        super::super::packed_reading::register(&connection).expect("reading functions");
        super::super::migrate(&mut connection, super::super::SCHEMA).expect("schema");
        connection
    }

    /// Makes the set of the one device `[n; 16]`, keeping at most two sets.
    fn make(connection: &mut Connection, reads: &LastReads, n: u8) -> i64 {
        let devices = Rc::new(vec![Value::Blob(vec![n; 16])]);
        build_within(connection, &key_of(&[[n; 16]]), &devices, 0, reads, 2).expect("built")
    }

    fn kept(connection: &Connection, n: u8) -> Option<i64> {
        find(connection, &key_of(&[[n; 16]])).expect("looked up")
    }

    #[test]
    fn a_new_set_pushes_out_the_set_read_least_recently_not_the_oldest() {
        let mut connection = database();
        let reads = LastReads::default();
        let first = make(&mut connection, &reads, 1);
        let second = make(&mut connection, &reads, 2);
        reads.touch(first);
        let third = make(&mut connection, &reads, 3);
        assert_eq!(
            kept(&connection, 1),
            Some(first),
            "read after the second was made"
        );
        assert_eq!(
            kept(&connection, 2),
            None,
            "made after the first, read before it"
        );
        assert_eq!(kept(&connection, 3), Some(third));
        assert_ne!(second, third);
    }

    #[test]
    fn making_a_set_that_exists_drops_nothing() {
        let mut connection = database();
        let reads = LastReads::default();
        let first = make(&mut connection, &reads, 1);
        let second = make(&mut connection, &reads, 2);
        assert_eq!(make(&mut connection, &reads, 1), first);
        assert_eq!(kept(&connection, 2), Some(second));
    }
}

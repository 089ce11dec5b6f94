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
//!   ([`forget`]); at most [`MAX_SETS`] sets are kept, the oldest dropped first when a new one is
//!   made, so sets of fleets that changed do not pile up.
//! - **Never a wrong answer:** a read looks its set up inside its own read transaction, so it
//!   reads a set and the rows folded into it at one watermark; a set not (or no longer) there is
//!   made, and the read starts again.

use std::rc::Rc;

use rusqlite::types::Value;
use rusqlite::{params, Connection, OptionalExtension};

use super::packed_sums;
use super::rollup::Rollup;
use crate::store::StoreError;

/// Sets of fewer devices read their members' rollups directly: a read of 20 devices' year is a
/// few milliseconds already, and every set costs the fold a few upserts per chunk.
pub(super) const POOL_FROM: usize = 100;
/// Sets kept at most.
const MAX_SETS: i64 = 64;

/// The number of the set with `key`, if it has been made.
pub(super) fn find(connection: &Connection, key: &[u8; 32]) -> Result<Option<i64>, StoreError> {
    Ok(connection
        .prepare_cached("SELECT number FROM pooled_sets WHERE key = ?1")?
        .query_row([key.as_slice()], |row| row.get(0))
        .optional()?)
}

/// Makes the set of `devices` (an `rarray` of `count` UUIDs) named `key` from their rollups, in
/// one transaction on the writer connection, dropping the oldest sets beyond [`MAX_SETS`]; its
/// number (the existing one if another read made it meanwhile).
pub(super) fn build(
    connection: &mut Connection,
    key: &[u8; 32],
    devices: &Rc<Vec<Value>>,
    now: i64,
) -> Result<i64, StoreError> {
    let transaction = connection.transaction()?;
    if let Some(number) = find(&transaction, key)? {
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
    let oldest: Vec<i64> = transaction
        .prepare_cached("SELECT number FROM pooled_sets ORDER BY number DESC LIMIT -1 OFFSET ?1")?
        .query_map([MAX_SETS], |row| row.get(0))?
        .collect::<Result<_, _>>()?;
    for set in oldest {
        drop_set(&transaction, set)?;
    }
    transaction.commit()?;
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
}

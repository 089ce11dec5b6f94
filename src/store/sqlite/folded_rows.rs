//! The raw rows folded in a range of receipt ids, with their device's UUID: what the caches kept
//! per device set between requests ([`RecentSeconds`](super::recent_seconds),
//! [`SetLatest`](super::set_latest)) read to catch up with the fold — a range of `readings`' own
//! B-tree, the rows since anyone's last request, not a pass over the set's devices.

use rusqlite::{params, Connection};

use super::packed_reading::{read_body, Body};
use crate::store::StoreError;

/// Calls `each(device, at, body)` for every row folded with a receipt id in `(after, through]`.
pub(super) fn each_folded(
    connection: &Connection,
    (after, through): (i64, i64),
    mut each: impl FnMut([u8; 16], i64, Body),
) -> Result<(), StoreError> {
    let mut statement = connection.prepare_cached(
        "SELECT n.device, r.at, r.body FROM readings r \
         JOIN device_numbers n ON n.number = r.device WHERE r.id > ?1 AND r.id <= ?2",
    )?;
    let mut rows = statement.query(params![after, through])?;
    while let Some(row) = rows.next()? {
        let device: [u8; 16] = row.get(0)?;
        let at: i64 = row.get(1)?;
        each(device, at, read_body(row, 2, at)?);
    }
    Ok(())
}

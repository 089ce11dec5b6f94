//! The rows the fold has not reached yet, kept in memory by device.
//!
//! Reads merge these rows into what the fold derived ([`tail`](super::tail)), and the fold takes
//! its chunks from here instead of reading the log back. Scanning them in the database instead
//! would cost every read time in proportion to the whole backlog; here a read copies only its own
//! devices' rows, so the fold can run rarely and in large chunks (which is what makes it cheap)
//! without slowing reads down.
//!
//! The rules:
//! - **Only durable rows are here.** A batch is added once its commit is synced, before its
//!   uploads are answered, so a read after a 201 finds the reading and no read finds one that a
//!   power loss could still take away.
//! - **A row leaves only once it is folded.** The fold forgets rows after committing their fold,
//!   and never while a read is between taking its snapshot's watermark and copying rows: such a
//!   read holds the read lock, so it sees every row past its watermark, either folded in its
//!   snapshot or here.
//! - **A restart rebuilds it** from the rows past the stored watermark ([`Unfolded::new`]).
//! - **The fold never holds the lock long.** It takes its chunk, and forgets what it folded, a
//!   few hundred devices per hold of the lock ([`DEVICES_PER_HOLD`]): every synced batch is added
//!   here before its uploads are answered, and a read waits behind a waiting add, so one hold over
//!   a whole chunk (65,536 rows, 9–13 ms measured) stalled every upload and every read once per
//!   fold.
//! - **Rows are shared, not copied.** Each row is kept behind an `Arc`, so the fold's chunk and
//!   a read's rows are a pointer per row: a chunk copied out whole was a second copy of up to
//!   65,536 rows while it folded (measured: peak RSS under 60 s of batch uploads 128.0 → 113.4
//!   MiB, single uploads 103.5 → 96–98.5 MiB).

use std::collections::HashMap;
use std::sync::{Arc, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::{Duration, Instant};

use rusqlite::Connection;

use super::{folded_id, LoggedRow};
use crate::store::StoreError;

/// Devices whose rows the fold takes, or forgets, per hold of the lock (with 10,000 devices and
/// a full chunk about 1,700 rows; measured, at most 0.3–0.8 ms per hold).
const DEVICES_PER_HOLD: usize = 256;

/// How long rows of a deleted device are still turned away: rows committed to the log before the
/// deletion may still be syncing, and an upload authenticated before it may be appended after it
/// (its body still arriving, its turn in the queue, retries: seconds at most); its reading goes
/// with the device, which will never exist again (device ids are never reused). Entries older
/// than this are dropped at the next deletion, so deletions do not pile up.
const FORGET_WINDOW: Duration = Duration::from_secs(600);

/// The unfolded rows of every device.
#[derive(Debug, Default)]
pub(crate) struct Unfolded {
    inner: RwLock<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    /// Per device, its unfolded rows in id order.
    by_device: HashMap<[u8; 16], Vec<Arc<LoggedRow>>>,
    /// The highest id the fold has folded: rows up to it are never added again.
    folded: i64,
    /// The highest id added so far (rows come in id order).
    added: i64,
    /// Deleted devices whose rows may still be on their way here ([`FORGET_WINDOW`]), with when
    /// their deletion was logged.
    forgotten: HashMap<[u8; 16], Instant>,
}

impl Unfolded {
    /// The rows past the watermark `folded` (those a crash or a shutdown left unfolded), in id
    /// order, as the ingestion log held them at the start.
    pub(in crate::store::sqlite) fn new(folded: i64, rows: Vec<LoggedRow>) -> Self {
        let unfolded = Self::default();
        unfolded.write().folded = folded;
        unfolded.add(rows);
        unfolded
    }

    /// Adds durable rows (in id order), except those of a deleted device (appended before its
    /// deletion and synced after it, or appended after it by an upload in flight). Rows passed
    /// already shared are not allocated under the lock (the sink shares them on the batch
    /// writer's thread, before the sync).
    pub(super) fn add<R: Into<Arc<LoggedRow>>>(&self, rows: impl IntoIterator<Item = R>) {
        let mut inner = self.write();
        let inner = &mut *inner;
        for row in rows
            .into_iter()
            .map(Into::into)
            .filter(|row| row.id > inner.folded)
        {
            inner.added = inner.added.max(row.id);
            if inner.forgotten.contains_key(&row.device) {
                continue;
            }
            inner.by_device.entry(row.device).or_default().push(row);
        }
    }

    /// Forgets the rows of `devices` up to `folded`, which the fold has just committed. Between
    /// holds of the lock a read may still find some of them: reads skip rows up to the
    /// watermark they read, which is already `folded`.
    pub(super) fn forget_folded(&self, folded: i64, devices: &[[u8; 16]]) {
        {
            let mut inner = self.write();
            inner.folded = inner.folded.max(folded);
        }
        for group in devices.chunks(DEVICES_PER_HOLD) {
            let mut inner = self.write();
            for device in group {
                if let Some(rows) = inner.by_device.get_mut(device) {
                    rows.retain(|row| row.id > folded);
                    if rows.is_empty() {
                        inner.by_device.remove(device);
                    }
                }
            }
        }
    }

    /// The fold's next chunk: the rows with the lowest ids past `after`, none past `appended`,
    /// their ids spanning at most `ids` (the fold takes its rows from here rather than reading
    /// the log back: measured, reading and decoding them was an eighth of the fold's time under
    /// batch uploads). Complete up to `appended`, the highest id the sink reported: it adds a
    /// batch here before reporting it. The span starts at the lowest id present, so ids that are
    /// not here (a failed batch's, a deleted device's) never hold the fold back, however many.
    ///
    /// The caller holds `airq.db`'s writer lock, as a device's deletion does: between holds of
    /// this lock nothing takes rows away then, and rows added meanwhile are past `appended`.
    pub(super) fn chunk(&self, after: i64, appended: i64, ids: i64) -> Vec<Arc<LoggedRow>> {
        /// A device's rows past `after` (they are in id order).
        fn past(rows: &[Arc<LoggedRow>], after: i64) -> &[Arc<LoggedRow>] {
            &rows[rows.partition_point(|row| row.id <= after)..]
        }
        let mut devices = Vec::new();
        let mut lowest: Option<i64> = None;
        for (device, rows) in &self.read().by_device {
            if let Some(first) = past(rows, after).first() {
                lowest = Some(lowest.map_or(first.id, |lowest| lowest.min(first.id)));
                devices.push(*device);
            }
        }
        let Some(lowest) = lowest else {
            return Vec::new();
        };
        let through = appended.min(lowest.saturating_add(ids - 1));
        // Sized for every id of the span (ids are unique, and the span is at most `ids` long), so
        // the chunk never grows, and copies itself, inside a hold of the lock.
        let mut chunk = Vec::with_capacity(usize::try_from(through - lowest + 1).unwrap_or(0));
        for group in devices.chunks(DEVICES_PER_HOLD) {
            let inner = self.read();
            for rows in group
                .iter()
                .filter_map(|device| inner.by_device.get(device))
            {
                chunk.extend(
                    past(rows, after)
                        .iter()
                        .take_while(|row| row.id <= through)
                        .cloned(),
                );
            }
        }
        chunk
    }

    /// Forgets every row of a deleted device, also those that are added later: synced after
    /// its deletion, or appended after it by an upload in flight (for [`FORGET_WINDOW`]).
    pub(crate) fn forget_device(&self, device: [u8; 16]) {
        let mut inner = self.write();
        inner.by_device.remove(&device);
        inner
            .forgotten
            .retain(|_, deleted| deleted.elapsed() < FORGET_WINDOW);
        inner.forgotten.insert(device, Instant::now());
    }

    /// Every device with unfolded rows (or with rows folded but not yet forgotten).
    pub(crate) fn devices(&self) -> Vec<[u8; 16]> {
        self.read().by_device.keys().copied().collect()
    }

    /// The unfolded rows of `devices` as of `connection`'s read transaction (whose first read
    /// this must be, so its snapshot and the watermark it reads are one moment), oldest first.
    pub(super) fn rows_of(
        &self,
        connection: &Connection,
        devices: &[[u8; 16]],
    ) -> Result<Vec<Arc<LoggedRow>>, StoreError> {
        let inner = self.read();
        let watermark = folded_id(connection)?;
        let mut rows: Vec<Arc<LoggedRow>> = devices
            .iter()
            .filter_map(|device| inner.by_device.get(device))
            .flatten()
            .filter(|row| row.id > watermark)
            .cloned()
            .collect();
        drop(inner);
        rows.sort_unstable_by_key(|row| row.id);
        Ok(rows)
    }

    fn read(&self) -> RwLockReadGuard<'_, Inner> {
        self.inner.read().unwrap_or_else(PoisonError::into_inner)
    }

    fn write(&self) -> RwLockWriteGuard<'_, Inner> {
        self.inner.write().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::Measurements;

    fn row(id: i64, device: u8) -> LoggedRow {
        LoggedRow {
            id,
            device: [device; 16],
            at: id,
            keyed: false,
            values: Measurements::default(),
            location: None,
            received_at: id,
            providers: std::sync::Arc::default(),
        }
    }

    fn ids(rows: &[Arc<LoggedRow>]) -> Vec<i64> {
        let mut ids: Vec<i64> = rows.iter().map(|row| row.id).collect();
        ids.sort_unstable();
        ids
    }

    #[test]
    fn a_chunk_takes_the_lowest_ids_past_the_watermark_up_to_what_was_appended() {
        let unfolded = Unfolded::default();
        unfolded.add((1..=10).map(|id| row(id, (id % 3) as u8)));
        assert_eq!(ids(&unfolded.chunk(2, 10, 4)), vec![3, 4, 5, 6]);
        assert_eq!(ids(&unfolded.chunk(2, 4, 100)), vec![3, 4]);
        assert!(unfolded.chunk(10, 10, 4).is_empty());
    }

    #[test]
    fn a_chunk_shares_its_rows_with_the_unfolded_set_instead_of_copying_them() {
        let unfolded = Unfolded::default();
        unfolded.add((1..=4).map(|id| row(id, 1)));
        let chunk = unfolded.chunk(0, 4, 4);
        assert_eq!(ids(&chunk), vec![1, 2, 3, 4]);
        assert!(chunk.iter().all(|row| Arc::strong_count(row) == 2));
        unfolded.forget_folded(4, &[chunk[0].device]);
        assert!(chunk.iter().all(|row| Arc::strong_count(row) == 1));
    }

    #[test]
    fn a_chunk_and_its_forgetting_span_more_devices_than_one_hold_of_the_lock() {
        let unfolded = Unfolded::default();
        let device = |id: i64| {
            let mut device = [0; 16];
            device[..8].copy_from_slice(&id.to_le_bytes());
            device
        };
        let devices = 3 * DEVICES_PER_HOLD as i64;
        unfolded.add((1..=2 * devices).map(|id| LoggedRow {
            device: device(id % devices),
            ..row(id, 0)
        }));

        let chunk = unfolded.chunk(0, 2 * devices, devices + 10);
        assert_eq!(ids(&chunk), (1..=devices + 10).collect::<Vec<_>>());
        let folded: Vec<[u8; 16]> = chunk.iter().map(|row| row.device).collect();
        unfolded.forget_folded(devices + 10, &folded);
        assert_eq!(
            ids(&unfolded.chunk(0, 2 * devices, 2 * devices)),
            (devices + 11..=2 * devices).collect::<Vec<_>>()
        );
    }

    #[test]
    fn a_deleted_devices_run_of_ids_longer_than_a_chunk_does_not_hold_the_fold_back() {
        let unfolded = Unfolded::default();
        unfolded.add((1..=100).map(|id| row(id, 1)));
        unfolded.add([row(101, 2), row(102, 2)]);
        unfolded.forget_device([1; 16]);
        assert_eq!(ids(&unfolded.chunk(0, 102, 10)), vec![101, 102]);
    }

    #[test]
    fn rows_of_a_deleted_device_added_after_its_deletion_stay_out() {
        let unfolded = Unfolded::default();
        unfolded.add([row(1, 1), row(2, 2)]);
        unfolded.forget_device([1; 16]);
        // 3 was committed before the deletion and still syncing; 5 is an upload of the device
        // that was in flight when it was deleted.
        unfolded.add([row(3, 1), row(4, 2)]);
        unfolded.add([row(5, 1)]);
        assert_eq!(ids(&unfolded.chunk(0, 5, 10)), vec![2, 4]);
    }
}

//! The unconsumed rows: those past the consumer's watermark, kept in memory by device from the
//! moment they are durable until the consumer has consumed them.
//!
//! The one set of rows past the watermark, whoever consumes them. Reads merge these rows into
//! what the consumer has already made of the rows before ([`Unconsumed::view`]: the embedded
//! store's reads add them to the folded tables; the spool's reads wait for them to reach
//! QuestDB), and the fold takes its chunks from here instead of reading the log back
//! ([`Unconsumed::chunk`]). Scanning them in the database instead would cost every read time in
//! proportion to the whole backlog; here a read copies only its own devices' rows, so the fold
//! can run rarely and in large chunks (which is what makes it cheap) without slowing reads down.
//!
//! The rules:
//! - **Only durable rows are here.** A batch is added once its append is synced, before its
//!   uploads are answered, so a read after a 201 finds the reading and no read finds one that a
//!   power loss could still take away.
//! - **A row leaves only once it is consumed.** The consumer reports how far it got after
//!   committing it ([`Unconsumed::consumed`]), and rows never leave while a read is between
//!   taking its snapshot's watermark and copying rows: such a read holds the read lock, so it
//!   sees every row past its watermark, either consumed in its snapshot or here.
//! - **A restart rebuilds it** from the rows of the log past the watermark ([`Unconsumed::new`]).
//! - **The consumer never holds the lock long.** It takes its chunk, and forgets what it
//!   consumed, a few hundred devices per hold of the lock ([`DEVICES_PER_HOLD`]): every synced
//!   batch is added here before its uploads are answered, and a read waits behind a waiting add,
//!   so one hold over a whole chunk (65,536 rows, 9–13 ms measured) stalled every upload and
//!   every read once per fold.
//! - **Rows are shared, not copied.** Each row is kept behind an `Arc`, so the fold's chunk and
//!   a read's rows are a pointer per row: a chunk copied out whole was a second copy of up to
//!   65,536 rows while it folded (measured: peak RSS under 60 s of batch uploads 128.0 → 113.4
//!   MiB, single uploads 103.5 → 96–98.5 MiB).
//! - **A consumer that reads only how far a device's rows go keeps one row per device**
//!   ([`UnconsumedRow::LATEST_ONLY`]): the spool's backlog may hold a million rows, on disk, and
//!   its reads only wait for a device's latest.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::{Duration, Instant};

use crate::domain::StoredReading;
use crate::store::StoreError;

/// Devices whose rows the consumer takes, or forgets, per hold of the lock (with 10,000 devices and
/// a full chunk about 1,700 rows; measured, at most 0.3–0.8 ms per hold).
const DEVICES_PER_HOLD: usize = 256;

/// How long rows of a deleted device are still turned away: rows committed to the log before the
/// deletion may still be syncing, and an upload authenticated before it may be appended after it
/// (its body still arriving, its turn in the queue, retries: seconds at most); its reading goes
/// with the device, which will never exist again (device ids are never reused). Entries older
/// than this are dropped at the next deletion, so deletions do not pile up.
const FORGET_WINDOW: Duration = Duration::from_secs(600);

/// A row as the unconsumed set keeps it, in the consumer's own form.
pub(crate) trait UnconsumedRow: Send + Sync + Sized + 'static {
    /// What rows made one after another share while they are made (the embedded store's sensor
    /// model names, which a fleet repeats in every row).
    type Maker: Default + Send + std::fmt::Debug + 'static;
    /// Whether only a device's latest row is kept (for a consumer whose reads ask only how far a
    /// device's rows go, not what they hold); [`Unconsumed::chunk`] is then of no use.
    const LATEST_ONLY: bool = false;
    /// Whether the log keeps each reading's owner: only a consumer that passes it on needs it,
    /// and every byte of an upload's frame is written and synced before its answer.
    const KEEPS_OWNER: bool = false;

    /// The row a reading was logged as, received at `received_at` (microseconds since the epoch).
    fn of(stored: &StoredReading, received_at: i64, maker: &mut Self::Maker) -> Self;
    /// Its receipt id.
    fn id(&self) -> i64;
    /// Its device's 16 bytes.
    fn device(&self) -> [u8; 16];
    /// The time it is the reading of, when that is its key: a later row with the same device and
    /// key replaces it. `None` for a row every other row leaves standing.
    fn key(&self) -> Option<i64>;
}

/// The unconsumed rows of every device.
#[derive(Debug)]
pub(crate) struct Unconsumed<R> {
    inner: RwLock<Inner<R>>,
}

#[derive(Debug)]
struct Inner<R> {
    /// Per device, its unconsumed rows in id order.
    by_device: HashMap<[u8; 16], Vec<Arc<R>>>,
    /// The consumer's watermark: rows up to it are never added again.
    consumed: i64,
    /// Deleted devices whose rows may still be on their way here ([`FORGET_WINDOW`]), with when
    /// their deletion was logged.
    forgotten: HashMap<[u8; 16], Instant>,
}

impl<R> Default for Unconsumed<R> {
    fn default() -> Self {
        Self {
            inner: RwLock::new(Inner {
                by_device: HashMap::new(),
                consumed: 0,
                forgotten: HashMap::new(),
            }),
        }
    }
}

impl<R: UnconsumedRow> Unconsumed<R> {
    /// The rows past the watermark `consumed` (those a crash or a shutdown left unconsumed), in
    /// id order, as the ingestion log held them at the start.
    pub(super) fn new(consumed: i64, rows: Vec<R>) -> Self {
        let unconsumed = Self::default();
        unconsumed.write().consumed = consumed;
        unconsumed.add(rows);
        unconsumed
    }

    /// Adds durable rows (in id order), except those of a deleted device (appended before its
    /// deletion and synced after it, or appended after it by an upload in flight). Rows passed
    /// already shared are not allocated under the lock (the sink shares them on the batch
    /// writer's thread, before the sync).
    pub(super) fn add<A: Into<Arc<R>>>(&self, rows: impl IntoIterator<Item = A>) {
        let mut inner = self.write();
        let inner = &mut *inner;
        for row in rows
            .into_iter()
            .map(Into::into)
            .filter(|row| row.id() > inner.consumed)
        {
            if inner.forgotten.contains_key(&row.device()) {
                continue;
            }
            let kept = inner.by_device.entry(row.device()).or_default();
            if R::LATEST_ONLY {
                kept.clear();
            }
            kept.push(row);
        }
    }

    /// Forgets the rows of `devices` up to `consumed`, which the consumer has just committed.
    /// Between holds of the lock a read may still find some of them: reads skip rows up to the
    /// watermark they read, which is already `consumed`.
    pub(super) fn consumed(&self, consumed: i64, devices: &[[u8; 16]]) {
        {
            let mut inner = self.write();
            inner.consumed = inner.consumed.max(consumed);
        }
        for group in devices.chunks(DEVICES_PER_HOLD) {
            let mut inner = self.write();
            for device in group {
                if let Some(rows) = inner.by_device.get_mut(device) {
                    rows.retain(|row| row.id() > consumed);
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
    pub(super) fn chunk(&self, after: i64, appended: i64, ids: i64) -> Vec<Arc<R>> {
        /// A device's rows past `after` (they are in id order).
        fn past<R: UnconsumedRow>(rows: &[Arc<R>], after: i64) -> &[Arc<R>] {
            &rows[rows.partition_point(|row| row.id() <= after)..]
        }
        let mut devices = Vec::new();
        let mut lowest: Option<i64> = None;
        for (device, rows) in &self.read().by_device {
            if let Some(first) = past(rows, after).first() {
                lowest = Some(lowest.map_or(first.id(), |lowest| lowest.min(first.id())));
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
                        .take_while(|row| row.id() <= through)
                        .cloned(),
                );
            }
        }
        chunk
    }

    /// Forgets every row of a deleted device, also those that are added later: synced after
    /// its deletion, or appended after it by an upload in flight (for [`FORGET_WINDOW`]).
    pub(super) fn forget_device(&self, device: [u8; 16]) {
        let mut inner = self.write();
        inner.by_device.remove(&device);
        inner
            .forgotten
            .retain(|_, deleted| deleted.elapsed() < FORGET_WINDOW);
        inner.forgotten.insert(device, Instant::now());
    }

    /// Every device with unconsumed rows (or with rows consumed but not yet forgotten).
    pub(super) fn devices(&self) -> Vec<[u8; 16]> {
        self.read().by_device.keys().copied().collect()
    }

    /// The unconsumed rows of `devices` that count, oldest first, past the watermark
    /// `watermark` reads: of keyed rows with the same (device, key), only the latest. The
    /// watermark is read under the read lock, so that whatever it misses is still here (for a
    /// read transaction, its first read, so its snapshot and the watermark are one moment).
    pub(super) fn view(
        &self,
        watermark: impl FnOnce() -> Result<i64, StoreError>,
        devices: &[[u8; 16]],
    ) -> Result<Vec<Arc<R>>, StoreError> {
        let inner = self.read();
        let watermark = watermark()?;
        let mut rows: Vec<Arc<R>> = devices
            .iter()
            .filter_map(|device| inner.by_device.get(device))
            .flatten()
            .filter(|row| row.id() > watermark)
            .cloned()
            .collect();
        drop(inner);
        rows.sort_unstable_by_key(|row| row.id());
        // Newest first: a keyed row whose key was already seen is replaced by that later row.
        let mut keys = HashSet::new();
        let mut superseded = HashSet::new();
        for row in rows.iter().rev() {
            if let Some(key) = row.key() {
                if !keys.insert((row.device(), key)) {
                    superseded.insert(row.id());
                }
            }
        }
        rows.retain(|row| !superseded.contains(&row.id()));
        Ok(rows)
    }

    fn read(&self) -> RwLockReadGuard<'_, Inner<R>> {
        self.inner.read().unwrap_or_else(PoisonError::into_inner)
    }

    fn write(&self) -> RwLockWriteGuard<'_, Inner<R>> {
        self.inner.write().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug)]
    struct Row {
        id: i64,
        device: [u8; 16],
        key: Option<i64>,
    }

    impl UnconsumedRow for Row {
        type Maker = ();

        fn of(stored: &StoredReading, _: i64, (): &mut ()) -> Self {
            Self {
                id: i64::try_from(stored.id.get()).unwrap_or(i64::MAX),
                device: stored.device.as_uuid().into_bytes(),
                key: None,
            }
        }

        fn id(&self) -> i64 {
            self.id
        }

        fn device(&self) -> [u8; 16] {
            self.device
        }

        fn key(&self) -> Option<i64> {
            self.key
        }
    }

    fn row(id: i64, device: u8) -> Row {
        Row {
            id,
            device: [device; 16],
            key: None,
        }
    }

    fn ids(rows: &[Arc<Row>]) -> Vec<i64> {
        let mut ids: Vec<i64> = rows.iter().map(|row| row.id).collect();
        ids.sort_unstable();
        ids
    }

    #[test]
    fn a_chunk_takes_the_lowest_ids_past_the_watermark_up_to_what_was_appended() {
        let unconsumed = Unconsumed::default();
        unconsumed.add((1..=10).map(|id| row(id, (id % 3) as u8)));
        assert_eq!(ids(&unconsumed.chunk(2, 10, 4)), vec![3, 4, 5, 6]);
        assert_eq!(ids(&unconsumed.chunk(2, 4, 100)), vec![3, 4]);
        assert!(unconsumed.chunk(10, 10, 4).is_empty());
    }

    #[test]
    fn a_chunk_shares_its_rows_with_the_unconsumed_set_instead_of_copying_them() {
        let unconsumed = Unconsumed::default();
        unconsumed.add((1..=4).map(|id| row(id, 1)));
        let chunk = unconsumed.chunk(0, 4, 4);
        assert_eq!(ids(&chunk), vec![1, 2, 3, 4]);
        assert!(chunk.iter().all(|row| Arc::strong_count(row) == 2));
        unconsumed.consumed(4, &[chunk[0].device]);
        assert!(chunk.iter().all(|row| Arc::strong_count(row) == 1));
    }

    #[test]
    fn a_chunk_and_its_forgetting_span_more_devices_than_one_hold_of_the_lock() {
        let unconsumed = Unconsumed::default();
        let device = |id: i64| {
            let mut device = [0; 16];
            device[..8].copy_from_slice(&id.to_le_bytes());
            device
        };
        let devices = 3 * DEVICES_PER_HOLD as i64;
        unconsumed.add((1..=2 * devices).map(|id| Row {
            device: device(id % devices),
            ..row(id, 0)
        }));

        let chunk = unconsumed.chunk(0, 2 * devices, devices + 10);
        assert_eq!(ids(&chunk), (1..=devices + 10).collect::<Vec<_>>());
        let folded: Vec<[u8; 16]> = chunk.iter().map(|row| row.device).collect();
        unconsumed.consumed(devices + 10, &folded);
        assert_eq!(
            ids(&unconsumed.chunk(0, 2 * devices, 2 * devices)),
            (devices + 11..=2 * devices).collect::<Vec<_>>()
        );
    }

    #[test]
    fn a_deleted_devices_run_of_ids_longer_than_a_chunk_does_not_hold_the_fold_back() {
        let unconsumed = Unconsumed::default();
        unconsumed.add((1..=100).map(|id| row(id, 1)));
        unconsumed.add([row(101, 2), row(102, 2)]);
        unconsumed.forget_device([1; 16]);
        assert_eq!(ids(&unconsumed.chunk(0, 102, 10)), vec![101, 102]);
    }

    #[test]
    fn rows_of_a_deleted_device_added_after_its_deletion_stay_out() {
        let unconsumed = Unconsumed::default();
        unconsumed.add([row(1, 1), row(2, 2)]);
        unconsumed.forget_device([1; 16]);
        // 3 was committed before the deletion and still syncing; 5 is an upload of the device
        // that was in flight when it was deleted.
        unconsumed.add([row(3, 1), row(4, 2)]);
        unconsumed.add([row(5, 1)]);
        assert_eq!(ids(&unconsumed.chunk(0, 5, 10)), vec![2, 4]);
    }

    #[test]
    fn a_view_keeps_of_keyed_rows_with_one_key_only_the_latest() {
        let unconsumed = Unconsumed::default();
        let keyed = |id, key| Row {
            key: Some(key),
            ..row(id, 1)
        };
        unconsumed.add([
            keyed(1, 10),
            row(2, 1),
            keyed(3, 10),
            keyed(4, 11),
            row(5, 2),
        ]);
        let view = unconsumed.view(|| Ok(1), &[[1; 16]]);
        let view = view.unwrap_or_else(|error| panic!("{error}"));
        assert_eq!(ids(&view), vec![2, 3, 4]);
    }

    #[test]
    fn a_consumer_of_the_latest_only_keeps_one_row_per_device() {
        #[derive(Debug)]
        struct Latest(Row);
        impl UnconsumedRow for Latest {
            type Maker = ();
            const LATEST_ONLY: bool = true;
            fn of(stored: &StoredReading, at: i64, (): &mut ()) -> Self {
                Self(Row::of(stored, at, &mut ()))
            }
            fn id(&self) -> i64 {
                self.0.id
            }
            fn device(&self) -> [u8; 16] {
                self.0.device
            }
            fn key(&self) -> Option<i64> {
                None
            }
        }
        let unconsumed = Unconsumed::default();
        unconsumed.add((1..=5).map(|id| Latest(row(id, 1))));
        let view = unconsumed.view(|| Ok(0), &[[1; 16]]);
        let view = view.unwrap_or_else(|error| panic!("{error}"));
        assert_eq!(view.iter().map(|row| row.id()).collect::<Vec<_>>(), vec![5]);
    }
}

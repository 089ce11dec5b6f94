//! Per-second sums of a device set's recent folded readings: the current snapshot of an owner
//! of 10,000 devices without a pass over every raw row of the hour.
//!
//! Why: a snapshot averages an hour (`domain::snapshot::window`). Summed from the raw rows, its
//! cost grows with every reading in that hour — 0.5 to 3 s for an owner whose 10,000 devices
//! upload each minute (issue 36). The window counts whole seconds, so the sums of each second of
//! the hour answer it exactly; they are kept here per device set (an owner's devices, or one
//! device), and a later snapshot of the same set reads only the folded rows past the receipt id
//! the sums were brought up to — a range of `readings`' own B-tree, the rows since the last
//! request of anyone — instead of the hour of this set's rows through the device index.
//!
//! What keeps them right:
//! - **One snapshot.** The sums are brought up to the read transaction's own watermark
//!   (`folded_id`) and nothing past it, and a read whose snapshot is older than the sums' (two
//!   reads of the same set racing) does not use them. Rows past the watermark are the read's
//!   view of unconsumed rows, added by the caller as on every other read.
//! - **Deletions.** Folded rows leave `readings` when a keyed reading replaces them or their
//!   device is deleted; both count in the `removed` counter in the deleting transaction, and sums
//!   built at another count are built again. The raw pruner does not count: it deletes only past
//!   the raw retention, and a window reaching past it is never summed
//!   (`read::current` answers "past retention" first).
//! - **Bounds.** Seconds before the asked window are dropped; the cache weighs entries by their
//!   seconds and drops the least used past [`MAX_SECONDS`]. When more rows were folded since the
//!   sums than several times what they hold, reading the set's hour again costs less, and is done.

use std::collections::{BTreeMap, HashSet};
use std::rc::Rc;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use moka::sync::Cache;
use rusqlite::types::Value;
use rusqlite::{params, Connection};

use super::folded_rows::each_folded;
use super::packed_reading::read_values;
use super::pooled::key_of;
use crate::domain::Aggregate;
use crate::store::StoreError;

/// Seconds kept over all device sets, about 150 bytes each in the server's memory: an owner's
/// busy hour is 3,600, so this keeps some 27 owners' hours. Four times as many (60 MB) was the
/// largest part of the server's memory once single devices' snapshots had filled it (a widget
/// polling many devices' current; bench/RESULTS.md, thirtieth session), for little: one device's
/// hour is few rows to sum again.
const MAX_SECONDS: u64 = 100_000;

/// A set's sums are dropped after this long unasked.
const IDLE: Duration = Duration::from_secs(600);

/// Microseconds per second.
const MICROS: i64 = 1_000_000;

/// Whole seconds `first..=last`, the seconds a snapshot window `(after, until]` spans when both
/// edges are the last microsecond of a second.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Seconds {
    first: i64,
    last: i64,
}

impl Seconds {
    /// The whole seconds of `(after, until]` (microseconds), or `None` when an edge falls inside
    /// a second.
    pub(super) fn of(after: i64, until: i64) -> Option<Self> {
        let whole = |micros: i64| (micros + 1).rem_euclid(MICROS) == 0;
        (whole(after) && whole(until) && after < until).then(|| Self {
            first: (after + 1).div_euclid(MICROS),
            last: until.div_euclid(MICROS),
        })
    }
}

/// The sums of one device set.
#[derive(Debug)]
struct Sums {
    /// The set, to pick its rows out of the others'.
    members: HashSet<[u8; 16]>,
    /// Folded rows with ids up to this are in `seconds`.
    folded: i64,
    /// The `removed` counter when these were built.
    removed: i64,
    /// Seconds from this one on are complete.
    from: i64,
    /// Sums per second that had readings.
    seconds: BTreeMap<i64, Aggregate>,
    /// Readings in `seconds`.
    rows: u64,
}

/// Per-second sums by device set (the key: [`key_of`], the set's, whatever the order asked).
#[derive(Debug, Clone)]
pub(super) struct RecentSeconds {
    sets: Cache<[u8; 32], Arc<Mutex<Option<Sums>>>>,
}

impl Default for RecentSeconds {
    fn default() -> Self {
        Self {
            sets: Cache::builder()
                .max_capacity(MAX_SECONDS)
                .weigher(|_, sums: &Arc<Mutex<Option<Sums>>>| {
                    let held = sums
                        .try_lock()
                        .map_or(1, |sums| sums.as_ref().map_or(1, |s| s.seconds.len() + 1));
                    u32::try_from(held).unwrap_or(u32::MAX)
                })
                .time_to_idle(IDLE)
                .build(),
        }
    }
}

impl RecentSeconds {
    /// The sums of the folded readings of `devices` in `seconds`, as of `connection`'s read
    /// transaction (whose watermark is `folded` and `removed` counter `removed`), or `None` when
    /// kept sums are newer than that snapshot (the caller then reads the raw rows).
    pub(super) fn sum(
        &self,
        connection: &Connection,
        devices: &[[u8; 16]],
        array: &Rc<Vec<Value>>,
        seconds: Seconds,
        (folded, removed): (i64, i64),
    ) -> Result<Option<Aggregate>, StoreError> {
        let key = key_of(devices);
        let entry = self.sets.get_with(key, Arc::default);
        let total = {
            let mut kept = entry.lock().unwrap_or_else(PoisonError::into_inner);
            if let Some(sums) = kept.as_ref() {
                if sums.folded > folded || sums.removed > removed {
                    return Ok(None);
                }
            }
            let usable = kept.as_ref().is_some_and(|sums| {
                sums.removed == removed
                    && sums.from <= seconds.first
                    && u64::try_from(folded - sums.folded)
                        .is_ok_and(|behind| behind <= sums.rows.saturating_mul(4) + 4_096)
            });
            let sums = match kept.as_mut() {
                Some(sums) if usable => {
                    sums.catch_up(connection, folded)?;
                    sums
                }
                _ => kept.insert(Sums::build(
                    connection,
                    devices,
                    array,
                    seconds.first,
                    (folded, removed),
                )?),
            };
            sums.forget_before(seconds.first);
            sums.total(seconds)
        };
        // Again, so the cache weighs what the set holds now.
        self.sets.insert(key, entry);
        Ok(Some(total))
    }
}

impl Sums {
    /// The sums of `devices`' folded readings from second `from` on, reading them whole.
    fn build(
        connection: &Connection,
        devices: &[[u8; 16]],
        array: &Rc<Vec<Value>>,
        from: i64,
        (folded, removed): (i64, i64),
    ) -> Result<Self, StoreError> {
        let mut sums = Self {
            members: devices.iter().copied().collect(),
            folded,
            removed,
            from,
            seconds: BTreeMap::new(),
            rows: 0,
        };
        let mut statement = connection.prepare_cached(
            "SELECT b.at, r.body FROM readings_by_device b JOIN readings r ON r.id = b.id \
             WHERE b.device IN (SELECT number FROM device_numbers WHERE device IN rarray(?1)) \
             AND b.at >= ?2",
        )?;
        let mut rows = statement.query(params![Rc::clone(array), from.saturating_mul(MICROS)])?;
        while let Some(row) = rows.next()? {
            add(
                &mut sums.seconds,
                &mut sums.rows,
                row.get(0)?,
                Aggregate::of(&read_values(row, 1)?),
            );
        }
        Ok(sums)
    }

    /// Adds the set's rows folded since, up to `folded`.
    fn catch_up(&mut self, connection: &Connection, folded: i64) -> Result<(), StoreError> {
        if folded == self.folded {
            return Ok(());
        }
        let range = (self.folded, folded);
        let Self {
            members,
            from,
            seconds,
            rows,
            ..
        } = self;
        each_folded(connection, range, |device, at, body| {
            if members.contains(&device) && at.div_euclid(MICROS) >= *from {
                add(seconds, rows, at, Aggregate::of(&body.values));
            }
        })?;
        self.folded = folded;
        Ok(())
    }

    /// Drops the seconds before `first`: windows only move forward while a set is asked.
    fn forget_before(&mut self, first: i64) {
        if first <= self.from {
            return;
        }
        self.seconds = self.seconds.split_off(&first);
        self.rows = self.seconds.values().map(|sum| sum.count).sum();
        self.from = first;
    }

    fn total(&self, seconds: Seconds) -> Aggregate {
        self.seconds.range(seconds.first..=seconds.last).fold(
            Aggregate::default(),
            |mut total, (_, sum)| {
                total += *sum;
                total
            },
        )
    }
}

/// Adds a reading measured at `at` to its second.
fn add(seconds: &mut BTreeMap<i64, Aggregate>, rows: &mut u64, at: i64, reading: Aggregate) {
    *seconds.entry(at.div_euclid(MICROS)).or_default() += reading;
    *rows += reading.count;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_windows_on_whole_seconds_are_seconds() {
        assert_eq!(
            Seconds::of(9_999_999, 19_999_999),
            Some(Seconds {
                first: 10,
                last: 19
            })
        );
        assert_eq!(Seconds::of(10_000_000, 19_999_999), None);
        assert_eq!(Seconds::of(9_999_999, 20_000_000), None);
        assert_eq!(Seconds::of(19_999_999, 19_999_999), None);
        assert_eq!(
            Seconds::of(-1, 999_999),
            Some(Seconds { first: 0, last: 0 })
        );
    }
}

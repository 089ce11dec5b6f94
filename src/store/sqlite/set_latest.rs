//! The latest contact and the latest position among a device set's folded readings, kept per set
//! between requests: an owner's current snapshot without a pass over 10,000 `device_latest` rows.
//!
//! Why: that pass was an index seek per device, and with 10,000 devices it was most of the
//! snapshot's time (perf: about half the server's samples; the snapshot took 10–19 ms at the
//! median). Both values only move forward as the fold folds readings — `device_latest` keeps the
//! greatest time of each device and its latest located reading — so a set's are brought up to
//! a read's watermark from the rows folded since ([`each_folded`]), a range of `readings` by
//! receipt id, as the per-second sums of [`RecentSeconds`](super::recent_seconds) are.
//!
//! What keeps them right, as there: the values are of one watermark and used only by a read at
//! that watermark or a later one; a folded reading deleted (replaced, or its device deleted:
//! the `removed` counter) makes them be read again from `device_latest`, and so does a set that
//! fell far behind. The caller reads them again the whole way when an unconsumed reading
//! replaces the one the position is of.

use std::collections::HashSet;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use moka::sync::Cache;
use rusqlite::Connection;

use super::dictionary::provider_name;
use super::folded_rows::each_folded;
use super::packed_reading::Body;
use super::pooled::key_of;
use crate::store::StoreError;

/// Sets kept at most.
const MAX_SETS: u64 = 256;
/// A set's values are dropped after this long unasked.
const IDLE: Duration = Duration::from_secs(600);

/// A position: time, lat, lon, provider.
pub(super) type Position = (i64, f64, f64, String);

/// The latest contact of a set's folded readings and its latest position, with the device whose
/// it is.
#[derive(Debug, Clone, Default)]
pub(super) struct FoldedLatest {
    pub(super) last_seen: Option<i64>,
    pub(super) position: Option<([u8; 16], Position)>,
}

#[derive(Debug)]
struct Kept {
    members: HashSet<[u8; 16]>,
    /// Folded rows with ids up to this are in `latest`.
    folded: i64,
    /// The `removed` counter when `latest` was read whole.
    removed: i64,
    latest: FoldedLatest,
}

/// The latest contact and position by device set.
#[derive(Debug, Clone)]
pub(super) struct SetLatest {
    sets: Cache<[u8; 32], Arc<Mutex<Option<Kept>>>>,
}

impl Default for SetLatest {
    fn default() -> Self {
        Self {
            sets: Cache::builder()
                .max_capacity(MAX_SETS)
                .time_to_idle(IDLE)
                .build(),
        }
    }
}

impl SetLatest {
    /// The latest contact and position of `devices`' folded readings as of `connection`'s read
    /// transaction (watermark `folded`, `removed` counter `removed`): kept ones brought up to
    /// it, or `read` (the whole pass) when there are none usable; `None` when kept ones are newer
    /// than that snapshot (the caller then makes the whole pass itself).
    pub(super) fn get(
        &self,
        connection: &Connection,
        devices: &[[u8; 16]],
        (folded, removed): (i64, i64),
        read: impl FnOnce() -> Result<FoldedLatest, StoreError>,
    ) -> Result<Option<FoldedLatest>, StoreError> {
        let entry = self.sets.get_with(key_of(devices), Arc::default);
        let mut kept = entry.lock().unwrap_or_else(PoisonError::into_inner);
        if kept
            .as_ref()
            .is_some_and(|kept| kept.folded > folded || kept.removed > removed)
        {
            return Ok(None);
        }
        let usable = kept.as_ref().is_some_and(|kept| {
            kept.removed == removed
                && u64::try_from(folded - kept.folded).is_ok_and(|behind| {
                    behind <= u64::try_from(kept.members.len()).unwrap_or(u64::MAX) * 3 + 4_096
                })
        });
        let kept = match kept.as_mut() {
            Some(kept) if usable => {
                kept.catch_up(connection, folded)?;
                kept
            }
            _ => kept.insert(Kept {
                members: devices.iter().copied().collect(),
                folded,
                removed,
                latest: read()?,
            }),
        };
        Ok(Some(kept.latest.clone()))
    }
}

impl Kept {
    /// Moves the values over the set's rows folded since, up to `folded`.
    fn catch_up(&mut self, connection: &Connection, folded: i64) -> Result<(), StoreError> {
        if folded == self.folded {
            return Ok(());
        }
        let Self {
            members, latest, ..
        } = self;
        // The newest located row, its provider named once, after the pass.
        let mut located: Option<([u8; 16], i64, Body)> = None;
        each_folded(connection, (self.folded, folded), |device, at, body| {
            if !members.contains(&device) {
                return;
            }
            latest.last_seen = Some(latest.last_seen.map_or(at, |seen| seen.max(at)));
            if body.location.is_some()
                && latest.position.as_ref().is_none_or(|(_, kept)| at > kept.0)
                && located.as_ref().is_none_or(|(_, found, _)| at > *found)
            {
                located = Some((device, at, body));
            }
        })?;
        if let Some((device, at, body)) = located {
            if let Some((lat, lon, provider)) = body.location {
                let provider = provider_name(connection, provider)?;
                latest.position = Some((device, (at, lat, lon, provider)));
            }
        }
        self.folded = folded;
        Ok(())
    }
}

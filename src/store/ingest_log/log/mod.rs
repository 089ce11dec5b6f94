//! The log itself: the files an upload's rows are appended to before it is answered, read back
//! at a start (and by the spool's forwarder), and dropped from the front once consumed.
//!
//! A directory (`ingest/` in the data directory) of numbered segment files, each a sequence of
//! checksummed frames ([`record`]) written from the file's start. An append encodes its batch
//! and writes it with one `pwrite` at the end of the current segment; a thread of its own syncs
//! the segment behind it ([`GroupSync`](super::GroupSync)), and only then is the upload
//! answered. Why not SQLite, as before: a commit dirtied whole B-tree pages and WAL frames for a
//! few rows, its WAL had to be checkpointed back, and the rows had to be deleted again once
//! folded — together a third of a core at 28,000 single uploads a second (`bench/RESULTS.md`,
//! eleventh session), for a file that is only ever appended to, read back in order and dropped
//! from the front.
//!
//! The rules:
//! - **Durable before acknowledged.** [`IngestLog::append`] returns once the bytes are written,
//!   unsynced; the batch writer answers only after the group sync has synced the segment
//!   behind them. A scan stops at the first frame that is not whole (a crash's torn write), so
//!   a power loss takes at most unanswered appends, and never one before an answered one.
//! - **A row leaves only once its consumer is done with it.** [`IngestLog::prune`] drops whole
//!   segments whose every id is at or below the consumer's watermark (the fold's, committed in
//!   `airq.db`; the forwarder's, acknowledged by QuestDB); the segment appended to stays. It
//!   also records the watermark in the log, so that a consumer without a watermark of its own
//!   (the forwarder) can tell after a restart which of the rows still there it had done.
//! - **Ids only grow, also across restarts.** A scan reports every id it passes, deletions'
//!   included, so the next id can be past all of them ([`IngestLog::highest`]).
//! - **A failed write leaves nothing behind.** The segment is cut back to where the write began
//!   (and the cut synced) before the failure is reported, so no whole frame of a batch answered
//!   as failed is ever read back.
//! - **Each start appends to a new segment, and numbers are never reused.** Past a crash's torn
//!   frame, the last segment may still hold frames of unanswered appends; writing after them
//!   again could join such a frame to the entries. A new number leaves them unread for good.
//!   Segments without a single entry are dropped at the start.
//! - **Segment files are reused.** A pruned segment is kept (up to [`SPARES`]) and renamed to
//!   the next number when the appended one is full: overwriting a file's blocks needs no change
//!   of its size, so its syncs write no metadata. Its old frames fail the checksum under the new
//!   number. A segment's name is synced (the directory) before anything is appended to it.

mod record;
mod segment;

use std::collections::VecDeque;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

pub use record::Entry;
use segment::{Frames, Segment};

use crate::domain::StoredReading;
use crate::store::StoreError;

/// Bytes after which appends go to the next segment, by default (a segment is pruned only once
/// all of it is consumed, so this is also about how much a consumer's backlog can hold back).
pub const SEGMENT_BYTES: u64 = 32 * 1024 * 1024;
/// Pruned segments kept for reuse.
const SPARES: usize = 4;

/// The ingestion log of a data directory.
#[derive(Debug)]
pub struct IngestLog {
    dir: PathBuf,
    /// Bytes after which appends go to the next segment.
    segment_bytes: u64,
    state: Mutex<State>,
}

#[derive(Debug)]
struct State {
    /// Oldest first; appends go to the last.
    segments: VecDeque<Segment>,
    spares: Vec<PathBuf>,
    /// The number of the next segment: numbers are never reused, so no frame of an earlier
    /// life of a number can follow the frames of a new one.
    next_number: u64,
    /// Where the next append goes in the last segment.
    position: u64,
    /// The highest id appended or scanned, deletions' included.
    highest: i64,
    /// The consumer's watermark as last recorded.
    consumed: i64,
    /// Reused by every append for its frames.
    buffer: Vec<u8>,
}

impl IngestLog {
    /// The log's directory inside the data directory.
    pub const DIR: &'static str = "ingest";
    /// The file in [`Self::DIR`] naming the log's format.
    pub const FORMAT_FILE: &'static str = "FORMAT";
    /// The format of the log's frames ([`record`]). A scan takes a frame it cannot read for the
    /// torn end of a crash and writes over it, so a log in another format must never be scanned:
    /// a release that changes the frames raises this and converts older logs first.
    pub const FORMAT: u32 = 1;

    /// Opens (creating when missing) the log in `data_dir`, hands `each` every entry it holds,
    /// oldest first (but the readings of a device logged after its deletion), and starts a new segment for appends, the next once `segment_bytes` are
    /// written to it.
    pub(super) fn open(
        data_dir: &Path,
        segment_bytes: u64,
        each: impl FnMut(Entry),
    ) -> Result<Self, StoreError> {
        let dir = data_dir.join(Self::DIR);
        if !dir.exists() {
            std::fs::create_dir_all(&dir).map_err(|source| StoreError::DataDir {
                path: dir.clone(),
                source,
            })?;
            segment::sync_dir(data_dir)?;
        }
        let listing = segment::list(&dir)?;
        crate::data_dir::format::check_or_stamp(
            &dir,
            Self::FORMAT_FILE,
            Self::FORMAT,
            !listing.segments.is_empty() || !listing.spares.is_empty(),
        )?;
        let scanned = scan(listing.segments, each)?;
        let log = Self {
            dir,
            segment_bytes,
            state: Mutex::new(State {
                segments: scanned.segments,
                spares: listing.spares,
                // A spare's old frames must not be valid under its next number either.
                next_number: listing.last_number + 1,
                position: 0,
                highest: scanned.highest,
                consumed: 0,
                buffer: Vec::new(),
            }),
        };
        let mut state = log.lock();
        // Segments without an entry hold nothing (a start that appended nothing left them).
        for (number, path) in scanned.empty {
            log.retire(&mut state, path, number)?;
        }
        log.next_segment(&mut state)?;
        drop(state);
        Ok(log)
    }

    /// The highest receipt id the log has held since it was opened (0 when none): new ids must
    /// be past it.
    pub(super) fn highest(&self) -> i64 {
        self.lock().highest
    }

    /// Appends `batch`, received at `received_at` (microseconds since the epoch), each reading
    /// with its owner when `keep_owner`: written, not synced. Answers the segment it went to,
    /// which the uploads' answers must wait to be synced.
    pub(super) fn append(
        &self,
        batch: &[StoredReading],
        received_at: i64,
        keep_owner: bool,
    ) -> Result<Arc<File>, StoreError> {
        self.append_each(batch.iter().map(|stored| (stored, received_at)), keep_owner)
    }

    /// Appends readings each with its own receive time (as [`Self::append`]).
    pub(super) fn append_each<'a>(
        &self,
        rows: impl IntoIterator<Item = (&'a StoredReading, i64)>,
        keep_owner: bool,
    ) -> Result<Arc<File>, StoreError> {
        let mut state = self.lock();
        if state.position >= self.segment_bytes {
            self.next_segment(&mut state)?;
        }
        let number = state.current()?.number;
        let mut frames = std::mem::take(&mut state.buffer);
        frames.clear();
        let mut last = 0;
        for (stored, received_at) in rows {
            record::put_reading(&mut frames, number, (stored, keep_owner), received_at)?;
            last = last.max(record::id_of(stored));
        }
        let written = self.write(&mut state, &frames, last);
        state.buffer = frames;
        written
    }

    /// Records that `device` was deleted and syncs it: a scan drops its readings logged before,
    /// and those logged after it (uploads in flight at the deletion).
    pub(super) fn forget_device(&self, device: [u8; 16]) -> Result<(), StoreError> {
        let mut state = self.lock();
        let through = state.highest;
        let segment = self.write_one(&mut state, through, |frame, number| {
            record::put_forget(frame, number, device, through)
        })?;
        drop(state);
        segment.sync_data().map_err(|source| self.failed(source))
    }

    /// Syncs the segment appended to (what [`GroupSync`](super::GroupSync) does behind appends,
    /// for tests that append without it).
    #[cfg(test)]
    pub(super) fn sync(&self) -> Result<(), StoreError> {
        let segment = Arc::clone(&self.lock().current()?.file);
        segment.sync_data().map_err(|source| self.failed(source))
    }

    /// Records that the consumer is done with every reading with an id up to `consumed` (a scan
    /// reports it, unsynced), and drops the segments whose entries all have ids up to it (the
    /// segment appended to stays), keeping a few for reuse.
    pub(super) fn prune(&self, consumed: i64) -> Result<(), StoreError> {
        let mut state = self.lock();
        if consumed > state.consumed {
            self.write_one(&mut state, 0, |frame, number| {
                record::put_consumed(frame, number, consumed)
            })?;
            state.consumed = consumed;
        }
        while state.segments.len() > 1
            && state
                .segments
                .front()
                .is_some_and(|oldest| oldest.last_id <= consumed)
        {
            let Some(oldest) = state.segments.pop_front() else {
                break;
            };
            if let Err(error) = self.retire(&mut state, oldest.path.clone(), oldest.number) {
                state.segments.push_front(oldest);
                return Err(error);
            }
        }
        Ok(())
    }

    /// Keeps the file of a dropped segment for reuse (as the spare of `number`), or deletes it
    /// when enough are kept.
    fn retire(&self, state: &mut State, path: PathBuf, number: u64) -> Result<(), StoreError> {
        let dropped = if state.spares.len() < SPARES {
            let spare = self.dir.join(segment::spare_name(number));
            std::fs::rename(&path, &spare).map(|()| state.spares.push(spare))
        } else {
            std::fs::remove_file(&path)
        };
        dropped.map_err(|source| StoreError::File { path, source })
    }

    /// A reader of the log's readings in id order, from its oldest segment on.
    pub(super) fn reader(self: &Arc<Self>) -> LogReader {
        LogReader {
            log: Arc::clone(self),
            frames: None,
        }
    }

    /// Writes the one frame `put` makes for the segment appended to (given its number), of an
    /// entry accounting for ids up to `last`.
    fn write_one(
        &self,
        state: &mut State,
        last: i64,
        put: impl FnOnce(&mut Vec<u8>, u64) -> Result<(), StoreError>,
    ) -> Result<Arc<File>, StoreError> {
        let mut frame = Vec::new();
        put(&mut frame, state.current()?.number)?;
        self.write(state, &frame, last)
    }

    /// Writes `frames` (of entries up to id `last`) at the end of the segment appended to.
    fn write(&self, state: &mut State, frames: &[u8], last: i64) -> Result<Arc<File>, StoreError> {
        let position = state.position;
        let segment = state.current_mut()?;
        if let Err(source) = segment.file.write_all_at(frames, position) {
            discard_after(segment, position);
            return Err(StoreError::File {
                path: segment.path.clone(),
                source,
            });
        }
        segment.last_id = segment.last_id.max(last);
        let file = Arc::clone(&segment.file);
        state.position += frames.len() as u64;
        state.highest = state.highest.max(last);
        Ok(file)
    }

    /// Starts the next segment: a spare renamed, or a new file; its name synced.
    fn next_segment(&self, state: &mut State) -> Result<(), StoreError> {
        let number = state.next_number;
        let path = self.dir.join(segment::name(number));
        if let Some(spare) = state.spares.last() {
            std::fs::rename(spare, &path).map_err(|source| StoreError::File {
                path: path.clone(),
                source,
            })?;
            state.spares.pop();
        }
        let file = segment::open(&path)?;
        segment::sync_dir(&self.dir)?;
        state.next_number += 1;
        state.segments.push_back(Segment {
            number,
            path,
            file: Arc::new(file),
            last_id: 0,
        });
        state.position = 0;
        Ok(())
    }

    fn failed(&self, source: std::io::Error) -> StoreError {
        StoreError::File {
            path: self.dir.clone(),
            source,
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // Every change to the state is one step after its write succeeded.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl State {
    fn current(&self) -> Result<&Segment, StoreError> {
        self.segments
            .back()
            .ok_or_else(|| StoreError::Corrupt("the ingestion log has no segment".into()))
    }

    fn current_mut(&mut self) -> Result<&mut Segment, StoreError> {
        self.segments
            .back_mut()
            .ok_or_else(|| StoreError::Corrupt("the ingestion log has no segment".into()))
    }
}

/// Cuts `segment` back to `position` after a write that failed there, and syncs the cut.
///
/// Why: a write that fails halfway (the disk full) may have left whole frames of the batch behind
/// `position`. The batch is answered as failed, so those frames must never be read: not by the
/// next start's scan, and not behind a shorter batch written at `position` later. If the cut
/// cannot be made durable, nothing appended after it could be answered truthfully, so the process
/// aborts, as after a failed sync ([`GroupSync`](super::GroupSync)), and the next start scans
/// what the disk holds.
fn discard_after(segment: &Segment, position: u64) {
    if let Err(error) = segment
        .file
        .set_len(position)
        .and_then(|()| segment.file.sync_all())
    {
        tracing::error!(
            path = %segment.path.display(),
            position,
            %error,
            "cutting a failed write from the ingestion log failed; stopping"
        );
        std::process::abort();
    }
}

/// The readings in the log in `data_dir` past the last watermark its consumer recorded there,
/// in id order, without those of devices deleted after; and that watermark. Changes nothing, and
/// may run beside the server (for checks from outside it: the bench's loss count, tests).
pub fn unconsumed(data_dir: &Path) -> Result<(Vec<StoredReading>, i64), StoreError> {
    let dir = data_dir.join(IngestLog::DIR);
    let mut readings: Vec<StoredReading> = Vec::new();
    let mut consumed = 0;
    if dir.exists() {
        scan(segment::list(&dir)?.segments, |entry| match entry {
            Entry::Reading { stored, .. } => readings.push(stored),
            Entry::Forget { device, through } => readings.retain(|stored| {
                stored.device.as_uuid().as_bytes() != &device || record::id_of(stored) > through
            }),
            Entry::Consumed { through } => {
                consumed = consumed.max(through);
                readings.retain(|stored| record::id_of(stored) > through);
            }
        })?;
    }
    Ok((readings, consumed))
}

/// What a scan of a log's directory found.
struct Scanned {
    /// The segments with entries, oldest first.
    segments: VecDeque<Segment>,
    /// The segments without any, by number.
    empty: Vec<(u64, PathBuf)>,
    /// The highest id among the entries.
    highest: i64,
}

/// Reads every segment listed (by number, in order) to the end of its entries, and hands `each`
/// every entry but the readings of a device logged after its deletion (uploads that were in
/// flight when it was deleted): they go with the device, for every reader of the log alike.
fn scan(listed: Vec<(u64, PathBuf)>, mut each: impl FnMut(Entry)) -> Result<Scanned, StoreError> {
    let mut scanned = Scanned {
        segments: VecDeque::with_capacity(listed.len()),
        empty: Vec::new(),
        highest: 0,
    };
    let mut forgotten = std::collections::HashSet::new();
    for (number, path) in listed {
        // Read only (a check beside the server must not create a segment the server just
        // dropped); the server appends only to segments it starts itself.
        let file = match File::open(&path) {
            Ok(file) => file,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => continue,
            Err(source) => return Err(StoreError::File { path, source }),
        };
        let mut frames = Frames::new(number, 0);
        let (mut entries, mut last_id) = (0_usize, 0);
        while let Some(entry) = frames.next(&file, &path)? {
            entries += 1;
            last_id = last_id.max(entry.id());
            match &entry {
                Entry::Forget { device, .. } => {
                    forgotten.insert(*device);
                }
                Entry::Reading { stored, .. }
                    if forgotten.contains(stored.device.as_uuid().as_bytes()) =>
                {
                    continue;
                }
                _ => {}
            }
            each(entry);
        }
        if let Some((at, unread)) = frames.damage(&file, &path)? {
            tracing::error!(
                segment = %path.display(),
                at,
                unread,
                "a frame of the ingestion log fails its checksum and whole frames follow it: a \
                 crash cut an unanswered batch short, or the disk damaged the log; the entries \
                 after it in this segment are not read"
            );
        }
        if entries == 0 {
            scanned.empty.push((number, path));
            continue;
        }
        scanned.highest = scanned.highest.max(last_id);
        scanned.segments.push_back(Segment {
            number,
            path,
            file: Arc::new(file),
            last_id,
        });
    }
    Ok(scanned)
}

/// Reads the log's readings in the order they were appended, continuing where it left off (for
/// the QuestDB spool's forwarder).
#[derive(Debug)]
pub(crate) struct LogReader {
    log: Arc<IngestLog>,
    /// Where the last read ended.
    frames: Option<Frames>,
}

impl LogReader {
    /// Up to `limit` readings past where the last read ended, skipping those with ids up to
    /// `after`. May return readings not synced yet.
    pub(crate) fn after(
        &mut self,
        after: i64,
        limit: usize,
    ) -> Result<Vec<StoredReading>, StoreError> {
        let mut read = Vec::new();
        loop {
            let from = self.frames.as_ref().map_or(0, Frames::number);
            // Whether a later segment exists is taken before reading this one: then it was
            // complete when read (appends move on only after writing).
            let (number, path, file, later) = {
                let state = self.log.lock();
                let mut segments = state.segments.iter().skip_while(|s| s.number < from);
                let Some(segment) = segments.next() else {
                    return Ok(read);
                };
                (
                    segment.number,
                    segment.path.clone(),
                    Arc::clone(&segment.file),
                    segments.next().is_some(),
                )
            };
            let frames = match &mut self.frames {
                Some(frames) if frames.number() == number => frames,
                frames => frames.insert(Frames::new(number, 0)),
            };
            while read.len() < limit {
                match frames.next(&file, &path)? {
                    Some(Entry::Reading { stored, .. }) if record::id_of(&stored) > after => {
                        read.push(stored);
                    }
                    Some(_) => {}
                    None => break,
                }
            }
            if read.len() >= limit || !later {
                return Ok(read);
            }
            self.frames = Some(Frames::new(number + 1, 0));
        }
    }
}

#[cfg(test)]
mod tests;

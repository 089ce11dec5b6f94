//! The log's files: numbered segments, written from their start, read back frame by frame.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::record::{self, Entry, Frame};
use crate::store::StoreError;

/// How far from the size of the last whole frame the next frame is looked for past a damaged
/// one (a batch's frames differ by their providers' lengths).
const LENGTH_SLACK: usize = 64;

/// Bytes read from a segment at a time.
const READ_BYTES: usize = 1024 * 1024;

/// A segment file of the log.
#[derive(Debug)]
pub(super) struct Segment {
    /// Its number: its name, and the seed of its frames' checksums.
    pub(super) number: u64,
    pub(super) path: PathBuf,
    pub(super) file: Arc<File>,
    /// The highest receipt id among its entries (0 while it has none).
    pub(super) last_id: i64,
}

/// The file name of segment `number`.
pub(super) fn name(number: u64) -> String {
    format!("{number:020}.log")
}

/// The file name of a spare (a pruned segment kept for reuse), by the number it last had.
pub(super) fn spare_name(number: u64) -> String {
    format!("{number:020}.spare")
}

/// The files of a log's directory.
#[derive(Debug, Default)]
pub(super) struct Listing {
    /// The segments by number, in order.
    pub(super) segments: Vec<(u64, PathBuf)>,
    pub(super) spares: Vec<PathBuf>,
    /// The highest number a segment or a spare was named by (0 when none).
    pub(super) last_number: u64,
}

/// The segments and the spares in `dir`.
pub(super) fn list(dir: &Path) -> Result<Listing, StoreError> {
    let failed = |source| StoreError::File {
        path: dir.to_owned(),
        source,
    };
    let mut segments = Vec::new();
    let mut spares = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(failed)? {
        let path = entry.map_err(failed)?.path();
        let (Some(stem), Some(extension)) = (
            path.file_stem().and_then(|stem| stem.to_str()),
            path.extension().and_then(|extension| extension.to_str()),
        ) else {
            continue;
        };
        match (stem.parse::<u64>(), extension) {
            (Ok(number), "log") => segments.push((number, path)),
            (Ok(number), "spare") => spares.push((number, path)),
            _ => {}
        }
    }
    segments.sort_unstable();
    spares.sort_unstable();
    let last_number = segments
        .iter()
        .chain(&spares)
        .map(|(number, _)| *number)
        .max()
        .unwrap_or(0);
    Ok(Listing {
        segments,
        spares: spares.into_iter().map(|(_, path)| path).collect(),
        last_number,
    })
}

/// Opens a file for reading and writing.
pub(super) fn open(path: &Path) -> Result<File, StoreError> {
    File::options()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)
        .map_err(|source| StoreError::File {
            path: path.to_owned(),
            source,
        })
}

/// Makes the directory's entries (a segment's name) durable.
pub(super) fn sync_dir(dir: &Path) -> Result<(), StoreError> {
    File::open(dir)
        .and_then(|directory| directory.sync_all())
        .map_err(|source| StoreError::File {
            path: dir.to_owned(),
            source,
        })
}

/// Reads a segment's entries in order, from a position on, as far as they go.
#[derive(Debug)]
pub(super) struct Frames {
    number: u64,
    /// The file offset of the next frame.
    offset: u64,
    /// Bytes read from `buffer_at` on.
    buffer: Vec<u8>,
    buffer_at: u64,
    /// The size of the last whole frame read (0 before the first).
    last_size: usize,
}

impl Frames {
    pub(super) fn new(number: u64, offset: u64) -> Self {
        Self {
            number,
            offset,
            buffer: Vec::new(),
            buffer_at: offset,
            last_size: 0,
        }
    }

    pub(super) fn number(&self) -> u64 {
        self.number
    }

    /// The next entry of `file`, or `None` where its entries end (for now: the writer may
    /// add more; the next call looks again).
    pub(super) fn next(&mut self, file: &File, path: &Path) -> Result<Option<Entry>, StoreError> {
        // What was read before this call may be older than what the writer has added since.
        let mut fresh = false;
        loop {
            let start = usize::try_from(self.offset - self.buffer_at).unwrap_or(usize::MAX);
            let bytes = self.buffer.get(start..).unwrap_or_default();
            let needed = match record::frame(bytes, self.number) {
                Frame::Whole(length) => {
                    let entry = record::decode(record::body(&bytes[..length]))?;
                    self.offset += length as u64;
                    self.last_size = length;
                    return Ok(Some(entry));
                }
                Frame::End if fresh => return Ok(None),
                Frame::End => record::HEADER,
                Frame::Short(needed) => needed,
            };
            if !self.fill(file, path, needed)? {
                return Ok(None);
            }
            fresh = true;
        }
    }

    /// Where its entries ended (after [`Self::next`] said so), if what stands there is a
    /// damaged frame with whole frames of this segment after it: the offset and how many such
    /// frames follow, which a scan does not read. The next frame is looked for where the damaged
    /// one's length says, and, in case the length itself is what was damaged, where a frame
    /// within [`LENGTH_SLACK`] bytes of the size of the last whole one would end. Stale frames of
    /// a reused file's earlier number, zeros, or a frame cut off at the end of the file give
    /// `None`.
    pub(super) fn damage(
        &self,
        file: &File,
        path: &Path,
    ) -> Result<Option<(u64, usize)>, StoreError> {
        let mut head = Vec::new();
        read_up_to(
            file,
            path,
            self.offset,
            &mut head,
            record::HEADER + record::MAX_BODY + 2 * record::HEADER,
        )?;
        let Some(header) = head.get(..record::HEADER) else {
            return Ok(None);
        };
        let stated = u32::from_le_bytes([header[0], header[1], header[2], header[3]]) as usize;
        let guessed = self.last_size.saturating_sub(LENGTH_SLACK)..=self.last_size + LENGTH_SLACK;
        let candidates = std::iter::once(record::HEADER.saturating_add(stated))
            .chain(guessed.filter(|_| self.last_size > 0))
            .filter(|size| *size > record::HEADER && *size <= record::HEADER + record::MAX_BODY);
        for size in candidates {
            let whole = head
                .get(size..)
                .is_some_and(|rest| matches!(record::frame(rest, self.number), Frame::Whole(_)));
            if !whole {
                continue;
            }
            let mut after = Self::new(self.number, self.offset + size as u64);
            let mut count = 0;
            while after.next(file, path)?.is_some() {
                count += 1;
            }
            return Ok(Some((self.offset, count)));
        }
        Ok(None)
    }

    /// Reads at least `needed` bytes (more when there are) from the next frame on; `false` when
    /// the file holds fewer.
    fn fill(&mut self, file: &File, path: &Path, needed: usize) -> Result<bool, StoreError> {
        self.buffer_at = self.offset;
        read_up_to(
            file,
            path,
            self.offset,
            &mut self.buffer,
            needed.max(READ_BYTES),
        )?;
        Ok(self.buffer.len() >= needed)
    }
}

/// Fills `buffer` with up to `wanted` bytes of `file` from `at` on (fewer where the file ends).
fn read_up_to(
    file: &File,
    path: &Path,
    at: u64,
    buffer: &mut Vec<u8>,
    wanted: usize,
) -> Result<(), StoreError> {
    buffer.clear();
    buffer.resize(wanted, 0);
    let mut read = 0;
    while read < wanted {
        match file.read_at(&mut buffer[read..], at + read as u64) {
            Ok(0) => break,
            Ok(count) => read += count,
            Err(error) if error.kind() == std::io::ErrorKind::Interrupted => {}
            Err(source) => {
                return Err(StoreError::File {
                    path: path.to_owned(),
                    source,
                })
            }
        }
    }
    buffer.truncate(read);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::record::tests::reading;
    use super::*;

    #[test]
    fn frames_are_read_across_buffer_ends_and_stop_at_the_end_of_the_entries() {
        let dir = tempfile::tempdir().unwrap_or_else(|error| panic!("{error}"));
        let path = dir.path().join(name(3));
        let mut bytes = Vec::new();
        let count = 20_000;
        for id in 1..=count {
            record::put_reading(&mut bytes, 3, (&reading(id, id % 3 == 0), true), 0)
                .unwrap_or_else(|error| panic!("{error}"));
        }
        assert!(bytes.len() > 2 * READ_BYTES, "spans several reads");
        bytes.extend_from_slice(&[0; 100]);
        std::fs::write(&path, &bytes).unwrap_or_else(|error| panic!("{error}"));
        let file = File::open(&path).unwrap_or_else(|error| panic!("{error}"));

        let mut frames = Frames::new(3, 0);
        let mut ids = Vec::new();
        while let Some(entry) = frames.next(&file, &path).unwrap_or(None) {
            ids.push(entry.id());
        }

        assert_eq!(ids, (1..=count as i64).collect::<Vec<_>>());
        assert!(
            frames.next(&file, &path).unwrap_or(None).is_none(),
            "and stay there"
        );
        assert_eq!(frames.damage(&file, &path).unwrap_or(None), None, "zeros");
    }

    /// The ids a scan of `bytes` (a segment 3) reads, and the damage it reports.
    fn scanned(bytes: &[u8]) -> (Vec<i64>, Option<(u64, usize)>) {
        let dir = tempfile::tempdir().unwrap_or_else(|error| panic!("{error}"));
        let path = dir.path().join(name(3));
        std::fs::write(&path, bytes).unwrap_or_else(|error| panic!("{error}"));
        let file = File::open(&path).unwrap_or_else(|error| panic!("{error}"));
        let mut frames = Frames::new(3, 0);
        let mut ids = Vec::new();
        while let Some(entry) = frames.next(&file, &path).unwrap_or(None) {
            ids.push(entry.id());
        }
        (ids, frames.damage(&file, &path).unwrap_or(None))
    }

    #[test]
    fn a_damaged_frame_with_whole_frames_after_it_is_reported_with_how_many_are_unread() {
        let mut bytes = Vec::new();
        let mut starts = Vec::new();
        for id in 1..=10 {
            starts.push(bytes.len());
            record::put_reading(&mut bytes, 3, (&reading(id, false), true), 0)
                .unwrap_or_else(|error| panic!("{error}"));
        }
        let intact = bytes.clone();
        bytes[starts[4] + record::HEADER + 3] ^= 0x40;
        assert_eq!(
            scanned(&bytes),
            ((1..=4).collect(), Some((starts[4] as u64, 5)))
        );
        // Its length field damaged instead of its body.
        let mut bytes = intact.clone();
        bytes[starts[4]] ^= 0x01;
        assert_eq!(
            scanned(&bytes),
            ((1..=4).collect(), Some((starts[4] as u64, 5)))
        );

        // A write cut off at the end of the file, or a reused file's frames of its earlier
        // number, are where entries end, not damage.
        let torn = &intact[..starts[9] + 5];
        assert_eq!(scanned(torn), ((1..=9).collect(), None));
        let mut stale = intact[..starts[5]].to_vec();
        for id in 6..=10 {
            record::put_reading(&mut stale, 2, (&reading(id, false), true), 0)
                .unwrap_or_else(|error| panic!("{error}"));
        }
        assert_eq!(scanned(&stale), ((1..=5).collect(), None));
    }
}

//! One entry of the ingestion log as bytes: a frame of length, checksum and body.
//!
//! The checksum (CRC-32C) covers the body and is seeded with the number of the segment the frame
//! is written to. That is what lets segments be reused: a reused file still holds the frames of
//! its previous life past what has been written anew, and those fail the check under the new
//! number, so a scan stops where this life's frames end — as it stops at a frame torn by a crash,
//! or at the zeros past the end of a new file.

use std::sync::Arc;

use chrono::DateTime;

use crate::domain::measure::COUNT;
use crate::domain::{
    DeviceUuid, Location, Measurements, OwnerId, Reading, ReadingId, StoredReading,
};
use crate::store::StoreError;

/// Bytes before a frame's body: its length and its checksum.
pub(super) const HEADER: usize = 8;
/// The longest body a frame may have: a scan takes a longer length for the end of the frames.
/// (A reading is about 130 bytes; providers are short names.)
pub(super) const MAX_BODY: usize = 64 * 1024;

const READING: u8 = 1;
const FORGET: u8 = 2;
const CONSUMED: u8 = 3;
const KEYED: u8 = 1;
const LOCATED: u8 = 2;
/// The frame ends with the owner's id: an airq that does not know this flag reads the frame
/// and ignores the bytes after the reading (frames before it lack them).
const OWNED: u8 = 4;

/// An entry of the log.
#[derive(Debug, Clone, PartialEq)]
pub enum Entry {
    /// A reading, as the batch writer handed it over, and when it was appended (microseconds
    /// since the epoch).
    Reading {
        /// The reading.
        stored: StoredReading,
        /// When it was appended.
        received_at: i64,
    },
    /// A device was deleted: its readings are gone, wherever in the log they are — those with
    /// ids up to `through` (the highest id in the log then), and any logged after it by an
    /// upload that was in flight at the deletion.
    Forget {
        /// The deleted device.
        device: [u8; 16],
        /// The highest receipt id appended before the deletion.
        through: i64,
    },
    /// The log's consumer was done with every reading with an id up to `through` (those before
    /// this entry; the ones after it have higher ids).
    Consumed {
        /// The consumer's watermark.
        through: i64,
    },
}

impl Entry {
    /// The highest receipt id the entry accounts for: a reading's, or the highest a deletion
    /// covers; 0 for a consumer's watermark, which takes no id.
    pub fn id(&self) -> i64 {
        match self {
            Self::Reading { stored, .. } => id_of(stored),
            Self::Forget { through, .. } => *through,
            Self::Consumed { .. } => 0,
        }
    }
}

/// A receipt id as the stores keep it.
pub(super) fn id_of(stored: &StoredReading) -> i64 {
    i64::try_from(stored.id.get()).unwrap_or(i64::MAX)
}

/// Appends the frame of a reading to `out`, for segment `segment`, with its owner when
/// `keep_owner`.
pub(super) fn put_reading(
    out: &mut Vec<u8>,
    segment: u64,
    (stored, keep_owner): (&StoredReading, bool),
    received_at: i64,
) -> Result<(), StoreError> {
    let start = begin(out);
    let reading = &stored.reading;
    let owner = stored.owner.as_ref().filter(|_| keep_owner);
    out.push(READING);
    out.extend_from_slice(&stored.id.get().to_le_bytes());
    out.extend_from_slice(stored.device.as_uuid().as_bytes());
    out.extend_from_slice(&stored.at.timestamp_micros().to_le_bytes());
    out.extend_from_slice(&received_at.to_le_bytes());
    let mut flags = 0;
    if reading.measured_at.is_some() {
        flags |= KEYED;
    }
    if reading.location.is_some() {
        flags |= LOCATED;
    }
    if owner.is_some() {
        flags |= OWNED;
    }
    out.push(flags);
    for (_, value) in reading.values.iter() {
        out.extend_from_slice(&value.to_le_bytes());
    }
    put_text(out, &reading.pms_provider)?;
    put_text(out, &reading.temperature_provider)?;
    if let Some(location) = &reading.location {
        out.extend_from_slice(&location.lat.to_le_bytes());
        out.extend_from_slice(&location.lon.to_le_bytes());
        put_text(out, &location.provider)?;
    }
    if let Some(owner) = owner {
        put_text(out, owner.as_str())?;
    }
    seal(out, start, segment)
}

/// Appends the frame of a device's deletion to `out`, for segment `segment`.
pub(super) fn put_forget(
    out: &mut Vec<u8>,
    segment: u64,
    device: [u8; 16],
    through: i64,
) -> Result<(), StoreError> {
    let start = begin(out);
    out.push(FORGET);
    out.extend_from_slice(&device);
    out.extend_from_slice(&through.to_le_bytes());
    seal(out, start, segment)
}

/// Appends the frame of a consumer's watermark to `out`, for segment `segment`.
pub(super) fn put_consumed(
    out: &mut Vec<u8>,
    segment: u64,
    through: i64,
) -> Result<(), StoreError> {
    let start = begin(out);
    out.push(CONSUMED);
    out.extend_from_slice(&through.to_le_bytes());
    seal(out, start, segment)
}

/// Reserves the header of a frame starting at the end of `out`.
fn begin(out: &mut Vec<u8>) -> usize {
    let start = out.len();
    out.extend_from_slice(&[0; HEADER]);
    start
}

/// Fills in the header of the frame from `start` to the end of `out`.
fn seal(out: &mut [u8], start: usize, segment: u64) -> Result<(), StoreError> {
    let body = &out[start + HEADER..];
    if body.len() > MAX_BODY {
        return Err(StoreError::Corrupt(format!(
            "a log entry of {} bytes is longer than {MAX_BODY}",
            body.len()
        )));
    }
    let checksum = checksum(segment, body);
    let length = u32::try_from(body.len()).unwrap_or(u32::MAX);
    out[start..start + 4].copy_from_slice(&length.to_le_bytes());
    out[start + 4..start + HEADER].copy_from_slice(&checksum.to_le_bytes());
    Ok(())
}

fn put_text(out: &mut Vec<u8>, text: &str) -> Result<(), StoreError> {
    let length = u16::try_from(text.len())
        .map_err(|_| StoreError::Corrupt(format!("a text of {} bytes to log", text.len())))?;
    out.extend_from_slice(&length.to_le_bytes());
    out.extend_from_slice(text.as_bytes());
    Ok(())
}

fn checksum(segment: u64, body: &[u8]) -> u32 {
    crc32c::crc32c_append(crc32c::crc32c(&segment.to_le_bytes()), body)
}

/// What starts at the beginning of `bytes`, in segment `segment`.
pub(super) enum Frame {
    /// A whole frame of this segment's, this long: its body, [`body`] of it, reads with
    /// [`decode`].
    Whole(usize),
    /// `bytes` holds only this much of the frame: read at least that many bytes from here.
    Short(usize),
    /// No frame of this segment's: the end of its entries.
    End,
}

/// Reads the frame at the start of `bytes`.
pub(super) fn frame(bytes: &[u8], segment: u64) -> Frame {
    let Some(header) = bytes.get(..HEADER) else {
        return Frame::Short(HEADER);
    };
    let length = u32::from_le_bytes([header[0], header[1], header[2], header[3]]) as usize;
    let stored = u32::from_le_bytes([header[4], header[5], header[6], header[7]]);
    if length == 0 || length > MAX_BODY {
        return Frame::End;
    }
    let Some(body) = bytes.get(HEADER..HEADER + length) else {
        return Frame::Short(HEADER + length);
    };
    if checksum(segment, body) != stored {
        return Frame::End;
    }
    Frame::Whole(HEADER + length)
}

/// The body of a whole frame.
pub(super) fn body(frame: &[u8]) -> &[u8] {
    frame.get(HEADER..).unwrap_or_default()
}

/// The entry in the body of a whole frame (its checksum matched: anything unreadable in it is a
/// fault, not an end).
pub(super) fn decode(body: &[u8]) -> Result<Entry, StoreError> {
    let mut body = Body(body);
    match body.u8()? {
        READING => {
            let id = u64::from_le_bytes(body.array()?);
            let device = DeviceUuid::from_uuid(uuid::Uuid::from_bytes(body.array()?));
            let at = micros(i64::from_le_bytes(body.array()?))?;
            let received_at = i64::from_le_bytes(body.array()?);
            let flags = body.u8()?;
            let mut values = [0.0; COUNT];
            for value in &mut values {
                *value = f64::from_le_bytes(body.array()?);
            }
            let pms_provider = body.text()?;
            let temperature_provider = body.text()?;
            let location = if flags & LOCATED != 0 {
                Some(Location {
                    lat: f64::from_le_bytes(body.array()?),
                    lon: f64::from_le_bytes(body.array()?),
                    provider: body.text()?,
                })
            } else {
                None
            };
            let owner = if flags & OWNED != 0 {
                let owner = body.text()?;
                let owner = OwnerId::parse(&owner)
                    .ok_or_else(|| StoreError::Corrupt(format!("logged owner {owner:?}")))?;
                Some(Arc::new(owner))
            } else {
                None
            };
            let stored = StoredReading {
                id: ReadingId::new(id)
                    .ok_or_else(|| StoreError::Corrupt(format!("logged receipt id {id}")))?,
                device,
                owner,
                at,
                reading: Reading {
                    values: Measurements::from_fn(|measure| values[measure.index()]),
                    pms_provider,
                    temperature_provider,
                    location,
                    measured_at: (flags & KEYED != 0).then_some(at),
                },
            };
            Ok(Entry::Reading {
                stored,
                received_at,
            })
        }
        FORGET => Ok(Entry::Forget {
            device: body.array()?,
            through: i64::from_le_bytes(body.array()?),
        }),
        CONSUMED => Ok(Entry::Consumed {
            through: i64::from_le_bytes(body.array()?),
        }),
        kind => Err(StoreError::Corrupt(format!("log entry of kind {kind}"))),
    }
}

fn micros(micros: i64) -> Result<chrono::DateTime<chrono::Utc>, StoreError> {
    DateTime::from_timestamp_micros(micros)
        .ok_or_else(|| StoreError::Corrupt(format!("logged timestamp {micros}")))
}

/// The unread rest of a body.
struct Body<'a>(&'a [u8]);

impl Body<'_> {
    fn take(&mut self, count: usize) -> Result<&[u8], StoreError> {
        if self.0.len() < count {
            return Err(StoreError::Corrupt("a log entry ends early".into()));
        }
        let (taken, rest) = self.0.split_at(count);
        self.0 = rest;
        Ok(taken)
    }

    fn u8(&mut self) -> Result<u8, StoreError> {
        Ok(self.take(1)?[0])
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], StoreError> {
        let mut array = [0; N];
        array.copy_from_slice(self.take(N)?);
        Ok(array)
    }

    fn text(&mut self) -> Result<String, StoreError> {
        let length = u16::from_le_bytes(self.array()?) as usize;
        String::from_utf8(self.take(length)?.to_vec())
            .map_err(|_| StoreError::Corrupt("a logged text is not UTF-8".into()))
    }
}

#[cfg(test)]
pub(super) mod tests {
    use chrono::{TimeZone, Utc};

    use super::*;

    pub(in crate::store::ingest_log) fn reading(id: u64, located: bool) -> StoredReading {
        let at = Utc
            .timestamp_micros(1_790_000_000_000_000 + i64::try_from(id).unwrap_or(0))
            .single()
            .unwrap_or_default();
        StoredReading {
            id: ReadingId::new(id).unwrap_or_else(|| unreachable!("ids from 1")),
            device: DeviceUuid::generate(),
            // Odd ids carry their owner, even ones are logged as an airq before owners did.
            owner: (id % 2 == 1).then(|| {
                Arc::new(OwnerId::parse("owner|1").unwrap_or_else(|| unreachable!("a valid owner")))
            }),
            at,
            reading: Reading {
                values: Measurements::from_fn(|measure| id as f64 + measure.index() as f64 / 4.0),
                pms_provider: "PMS5003".into(),
                temperature_provider: "DHT22".into(),
                location: located.then(|| Location {
                    lat: 52.52,
                    lon: 13.405,
                    provider: "gps".into(),
                }),
                measured_at: id.is_multiple_of(2).then_some(at),
            },
        }
    }

    fn read_back(bytes: &[u8], segment: u64) -> Vec<Entry> {
        let mut entries = Vec::new();
        let mut rest = bytes;
        while let Frame::Whole(length) = frame(rest, segment) {
            entries.push(decode(body(&rest[..length])).unwrap_or_else(|error| panic!("{error}")));
            rest = &rest[length..];
        }
        entries
    }

    #[test]
    fn entries_read_back_as_they_were_put() {
        let mut bytes = Vec::new();
        let first = reading(1, false);
        let second = reading(2, true);
        for stored in [&first, &second] {
            put_reading(&mut bytes, 7, (stored, true), 42)
                .unwrap_or_else(|error| panic!("{error}"));
        }
        put_forget(&mut bytes, 7, [3; 16], 2).unwrap_or_else(|error| panic!("{error}"));
        put_consumed(&mut bytes, 7, 1).unwrap_or_else(|error| panic!("{error}"));

        assert_eq!(
            read_back(&bytes, 7),
            vec![
                Entry::Reading {
                    stored: first,
                    received_at: 42
                },
                Entry::Reading {
                    stored: second,
                    received_at: 42
                },
                Entry::Forget {
                    device: [3; 16],
                    through: 2
                },
                Entry::Consumed { through: 1 },
            ]
        );
    }

    #[test]
    fn a_log_that_keeps_no_owners_leaves_them_out_of_the_frame() {
        let owned = reading(1, false);
        let (mut kept, mut left) = (Vec::new(), Vec::new());
        put_reading(&mut kept, 7, (&owned, true), 0).unwrap_or_else(|error| panic!("{error}"));
        put_reading(&mut left, 7, (&owned, false), 0).unwrap_or_else(|error| panic!("{error}"));

        let stored_owner = |bytes: &[u8]| match read_back(bytes, 7).pop() {
            Some(Entry::Reading { stored, .. }) => stored.owner,
            other => panic!("one reading, not {other:?}"),
        };
        assert_eq!(stored_owner(&kept), owned.owner);
        assert_eq!(stored_owner(&left), None);
        assert!(left.len() < kept.len(), "the owner's bytes are not written");
    }

    #[test]
    fn frames_of_another_segment_end_the_entries() {
        let mut bytes = Vec::new();
        put_reading(&mut bytes, 7, (&reading(1, false), true), 0)
            .unwrap_or_else(|error| panic!("{error}"));

        assert!(read_back(&bytes, 8).is_empty());
    }

    #[test]
    fn a_torn_frame_ends_the_entries_and_a_cut_one_asks_for_more() {
        let mut bytes = Vec::new();
        put_reading(&mut bytes, 7, (&reading(1, true), true), 0)
            .unwrap_or_else(|error| panic!("{error}"));
        let whole = bytes.len();
        let mut torn = bytes.clone();
        torn[whole - 1] ^= 0xff;

        assert!(matches!(frame(&torn, 7), Frame::End));
        assert!(matches!(frame(&bytes[..whole - 1], 7), Frame::Short(length) if length == whole));
        assert!(
            matches!(frame(&[0; 16], 7), Frame::End),
            "zeros past the end"
        );
    }
}

use super::record::tests::reading;
use super::*;

/// A log with segments of `bytes` in a new directory, and what its scan found.
fn opened(bytes: u64) -> (tempfile::TempDir, IngestLog) {
    let dir = tempfile::tempdir().unwrap_or_else(|error| panic!("temporary dir: {error}"));
    let log = IngestLog::open(dir.path(), bytes, |_| {})
        .unwrap_or_else(|error| panic!("the log opens: {error}"));
    (dir, log)
}

/// What a new open of the log in `data_dir` finds, and its highest id.
fn reopened(data_dir: &Path, bytes: u64) -> (IngestLog, Vec<Entry>) {
    let mut entries = Vec::new();
    let log = IngestLog::open(data_dir, bytes, |entry| entries.push(entry))
        .unwrap_or_else(|error| panic!("the log opens again: {error}"));
    (log, entries)
}

/// The ids of the readings among `entries`.
fn ids(entries: &[Entry]) -> Vec<i64> {
    entries
        .iter()
        .filter(|entry| matches!(entry, Entry::Reading { .. }))
        .map(Entry::id)
        .collect()
}

fn batch(ids: std::ops::RangeInclusive<u64>) -> Vec<StoredReading> {
    ids.map(|id| reading(id, id % 4 == 0)).collect()
}

fn append(log: &IngestLog, batch: &[StoredReading]) {
    log.append(batch, 1_790_000_000_000_000, true)
        .unwrap_or_else(|error| panic!("append: {error}"));
}

fn segment_files(data_dir: &Path) -> (usize, usize) {
    let listing =
        segment::list(&data_dir.join(IngestLog::DIR)).unwrap_or_else(|error| panic!("{error}"));
    (listing.segments.len(), listing.spares.len())
}

#[test]
fn what_was_appended_is_found_again_in_order_after_a_restart() {
    let (dir, log) = opened(SEGMENT_BYTES);
    let first = batch(1..=3);
    let second = batch(4..=5);
    append(&log, &first);
    append(&log, &second);
    log.sync().unwrap_or_else(|error| panic!("{error}"));
    drop(log);

    let (log, entries) = reopened(dir.path(), SEGMENT_BYTES);
    let expected: Vec<Entry> = first
        .into_iter()
        .chain(second)
        .map(|stored| Entry::Reading {
            stored,
            received_at: 1_790_000_000_000_000,
        })
        .collect();
    assert_eq!(entries, expected);
    assert_eq!(log.highest(), 5);
}

#[test]
fn a_torn_append_is_left_unread_and_what_follows_a_restart_is_not_joined_to_it() {
    let (dir, log) = opened(SEGMENT_BYTES);
    append(&log, &batch(1..=2));
    append(&log, &batch(3..=4));
    drop(log);
    // The crash tore the second append: its last bytes never reached the disk.
    let listing =
        segment::list(&dir.path().join(IngestLog::DIR)).unwrap_or_else(|error| panic!("{error}"));
    let (_, first_segment) = &listing.segments[0];
    let length = std::fs::metadata(first_segment).map_or(0, |meta| meta.len());
    let file = segment::open(first_segment).unwrap_or_else(|error| panic!("{error}"));
    file.set_len(length - 10)
        .unwrap_or_else(|error| panic!("{error}"));

    let (log, entries) = reopened(dir.path(), SEGMENT_BYTES);
    assert_eq!(
        ids(&entries),
        vec![1, 2, 3],
        "the torn last reading is gone"
    );
    append(&log, &batch(5..=5));
    drop(log);

    let (_, entries) = reopened(dir.path(), SEGMENT_BYTES);
    assert_eq!(ids(&entries), vec![1, 2, 3, 5]);
}

#[test]
fn consumed_segments_are_pruned_and_reused_without_their_old_entries() {
    let (dir, log) = opened(500);
    for id in 1..=40 {
        append(&log, &batch(id..=id));
    }
    let (segments, _) = segment_files(dir.path());
    assert!(segments > 4, "{segments} segments of 500 bytes");

    log.prune(30).unwrap_or_else(|error| panic!("{error}"));
    let (after_prune, spares) = segment_files(dir.path());
    assert!(after_prune < segments && spares > 0);
    for id in 41..=60 {
        append(&log, &batch(id..=id));
    }
    drop(log);

    let (_, entries) = reopened(dir.path(), 500);
    let found = ids(&entries);
    assert!(
        found.windows(2).all(|pair| pair[0] < pair[1]),
        "in order, each once: {found:?}"
    );
    assert!(
        found.iter().all(|&id| id > 20),
        "pruned ones gone: {found:?}"
    );
    assert!(
        (31..=60).all(|id| found.contains(&id)),
        "unconsumed ones kept: {found:?}"
    );
}

#[test]
fn starts_that_append_nothing_leave_no_segments_behind() {
    let (dir, log) = opened(SEGMENT_BYTES);
    append(&log, &batch(1..=2));
    drop(log);
    for _ in 0..10 {
        drop(reopened(dir.path(), SEGMENT_BYTES));
    }
    let (segments, spares) = segment_files(dir.path());
    assert_eq!(segments, 2, "the one with entries and the one started last");
    assert!(spares <= SPARES);

    let (_, entries) = reopened(dir.path(), SEGMENT_BYTES);
    assert_eq!(ids(&entries), vec![1, 2]);
}

#[test]
fn the_segment_appended_to_is_never_pruned() {
    let (dir, log) = opened(SEGMENT_BYTES);
    append(&log, &batch(1..=3));
    log.prune(3).unwrap_or_else(|error| panic!("{error}"));
    drop(log);

    let (_, entries) = reopened(dir.path(), SEGMENT_BYTES);
    assert_eq!(ids(&entries), vec![1, 2, 3]);
}

#[test]
fn a_consumers_watermark_is_found_after_the_readings_it_covers() {
    let (dir, log) = opened(SEGMENT_BYTES);
    append(&log, &batch(1..=3));
    log.prune(2).unwrap_or_else(|error| panic!("{error}"));
    append(&log, &batch(4..=4));
    drop(log);

    let (_, entries) = reopened(dir.path(), SEGMENT_BYTES);
    let consumed: Vec<usize> = entries
        .iter()
        .enumerate()
        .filter(|(_, entry)| matches!(entry, Entry::Consumed { through: 2 }))
        .map(|(index, _)| index)
        .collect();
    assert_eq!(
        consumed,
        vec![3],
        "after the first three readings: {entries:?}"
    );
}

#[test]
fn a_deletion_is_found_with_the_highest_id_it_covers() {
    let (dir, log) = opened(SEGMENT_BYTES);
    let rows = batch(1..=2);
    append(&log, &rows);
    let device = rows[0].device.as_uuid().into_bytes();
    log.forget_device(device)
        .unwrap_or_else(|error| panic!("{error}"));
    drop(log);

    let (log, entries) = reopened(dir.path(), SEGMENT_BYTES);
    assert_eq!(entries.last(), Some(&Entry::Forget { device, through: 2 }));
    assert_eq!(log.highest(), 2);
}

#[test]
fn the_reader_goes_on_where_it_left_off_across_segments() {
    let (_dir, log) = opened(500);
    let log = Arc::new(log);
    for id in 1..=30 {
        append(&log, &batch(id..=id));
    }
    let mut reader = log.reader();
    let mut read = |after, limit| -> Vec<i64> {
        reader
            .after(after, limit)
            .unwrap_or_default()
            .iter()
            .map(record::id_of)
            .collect()
    };
    assert_eq!(read(0, 25), (1..=25).collect::<Vec<_>>());
    for id in 31..=40 {
        append(&log, &batch(id..=id));
    }
    assert_eq!(read(27, 100), (28..=40).collect::<Vec<_>>());
    assert!(read(40, 100).is_empty());
}

#[test]
fn a_reused_file_never_takes_a_number_it_had_before() {
    let (dir, log) = opened(500);
    for id in 1..=5 {
        append(&log, &batch(id..=id));
    }
    log.prune(5).unwrap_or_else(|error| panic!("{error}"));
    drop(log);
    // Segment 1 is a spare now; with no segment left beside it, a new number must still be
    // past it, or its old frames would count again under their own number.
    let listing =
        segment::list(&dir.path().join(IngestLog::DIR)).unwrap_or_else(|error| panic!("{error}"));
    assert_eq!(listing.spares.len(), 1);
    for (_, path) in listing.segments {
        std::fs::remove_file(path).unwrap_or_else(|error| panic!("{error}"));
    }

    let (log, entries) = reopened(dir.path(), 500);
    assert!(ids(&entries).is_empty());
    append(&log, &batch(41..=41));
    drop(log);
    let (_, entries) = reopened(dir.path(), 500);
    assert_eq!(ids(&entries), vec![41]);
}

#[test]
fn the_frames_of_a_failed_write_are_cut_and_never_read_back() {
    let (dir, log) = opened(SEGMENT_BYTES);
    append(&log, &batch(1..=3));
    {
        // A write that failed halfway, as on a full disk: whole frames of the batch are on the
        // file past where the log goes on.
        let state = log.lock();
        let segment = state.segments.back().unwrap_or_else(|| panic!("a segment"));
        let mut frames = Vec::new();
        for stored in batch(4..=9) {
            record::put_reading(&mut frames, segment.number, (&stored, true), 1)
                .unwrap_or_else(|error| panic!("{error}"));
        }
        segment
            .file
            .write_all_at(&frames, state.position)
            .unwrap_or_else(|error| panic!("{error}"));
        discard_after(segment, state.position);
    }
    append(&log, &batch(10..=10));
    log.sync().unwrap_or_else(|error| panic!("{error}"));
    drop(log);

    let (_, entries) = reopened(dir.path(), SEGMENT_BYTES);
    assert_eq!(ids(&entries), [1, 2, 3, 10]);
}

#[test]
fn readings_of_a_device_logged_after_its_deletion_are_not_handed_on() {
    let (dir, log) = opened(SEGMENT_BYTES);
    let rows = batch(1..=2);
    append(&log, &rows);
    let deleted = rows[0].device;
    log.forget_device(deleted.as_uuid().into_bytes())
        .unwrap_or_else(|error| panic!("{error}"));
    // An upload of the deleted device that was in flight at the deletion, beside another's.
    let mut late = batch(3..=4);
    late[0].device = deleted;
    append(&log, &late);
    log.sync().unwrap_or_else(|error| panic!("{error}"));
    drop(log);

    let (log, entries) = reopened(dir.path(), SEGMENT_BYTES);
    assert_eq!(ids(&entries), [1, 2, 4]);
    assert_eq!(
        log.highest(),
        4,
        "the id it took is still never given again"
    );
    let (unconsumed, _) = unconsumed(dir.path()).unwrap_or_else(|error| panic!("{error}"));
    let unconsumed: Vec<i64> = unconsumed.iter().map(record::id_of).collect();
    assert_eq!(unconsumed, [2, 4]);
}

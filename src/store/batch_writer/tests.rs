use std::sync::{Arc, Mutex};

use super::*;
use crate::domain::{Measurements, ReadingId, StoredReading};
use crate::store::StoreError;

/// The test sinks' receipt ids: `count` of them from `next` on.
fn next_ids(next: &mut u64, count: usize) -> Vec<ReadingId> {
    let first = *next;
    *next += count as u64;
    (first..*next).filter_map(ReadingId::new).collect()
}

/// A sink that fails its first `failures` writes, then records what it is given.
#[derive(Debug)]
struct Flaky {
    failures: usize,
    written: Arc<Mutex<Vec<u64>>>,
    next: u64,
}

#[async_trait::async_trait]
impl ReadingSink for Flaky {
    async fn allocate_ids(&mut self, count: usize) -> Result<Vec<ReadingId>, StoreError> {
        Ok(next_ids(&mut self.next, count))
    }

    async fn write(&mut self, batch: &[StoredReading]) -> Result<(), StoreError> {
        if self.failures > 0 {
            self.failures -= 1;
            return Err(StoreError::Corrupt("injected".into()));
        }
        let mut written = self
            .written
            .lock()
            .map_err(|_| StoreError::Corrupt("poisoned".into()))?;
        written.extend(batch.iter().map(|row| row.id.get()));
        Ok(())
    }
}

/// A new device of one owner.
fn sender() -> (DeviceUuid, Arc<OwnerId>) {
    let owner = OwnerId::parse("owner").unwrap_or_else(|| unreachable!("a valid owner"));
    (DeviceUuid::generate(), Arc::new(owner))
}

fn reading() -> Reading {
    Reading {
        values: Measurements::from_fn(|_| 1.0),
        pms_provider: "p".into(),
        temperature_provider: "t".into(),
        location: None,
        measured_at: None,
    }
}

fn config(retries: u32) -> BatchConfig {
    BatchConfig {
        max_rows: 4,
        max_delay: Duration::from_millis(5),
        queue: 16,
        retries,
        retry_backoff: Duration::from_millis(1),
    }
}

async fn submit_many(writer: &BatchWriter, count: usize) -> Vec<Result<Receipt, WriteError>> {
    let uploads = (0..count).map(|_| writer.submit(sender(), Utc::now(), reading()));
    futures_util::future::join_all(uploads).await
}

#[tokio::test]
async fn a_retried_failure_is_invisible_to_uploads() {
    let written = Arc::new(Mutex::new(Vec::new()));
    let sink = Flaky {
        failures: 2,
        written: Arc::clone(&written),
        next: 1,
    };
    let (writer, guard) =
        BatchWriter::start(vec![Box::new(sink)], config(2), Arc::default()).expect("writer");
    let receipts = submit_many(&writer, 3).await;
    drop(writer);
    assert!(guard.join(Duration::from_secs(30)).await);
    let mut ids: Vec<u64> = receipts
        .into_iter()
        .map(|r| r.expect("stored").id.get())
        .collect();
    ids.sort_unstable();
    let mut stored = written.lock().expect("lock").clone();
    stored.sort_unstable();
    assert_eq!(ids, stored);
}

#[tokio::test]
async fn a_lasting_failure_answers_every_upload_with_an_error() {
    let written = Arc::new(Mutex::new(Vec::new()));
    let sink = Flaky {
        failures: usize::MAX,
        written: Arc::clone(&written),
        next: 1,
    };
    let (writer, guard) =
        BatchWriter::start(vec![Box::new(sink)], config(1), Arc::default()).expect("writer");
    let receipts = submit_many(&writer, 6).await;
    drop(writer);
    assert!(guard.join(Duration::from_secs(30)).await);
    assert!(receipts
        .iter()
        .all(|r| matches!(r, Err(WriteError::Failed(_)))));
    assert!(written.lock().expect("lock").is_empty());
}

#[tokio::test]
async fn dropping_the_last_handle_drains_the_queue_first() {
    let written = Arc::new(Mutex::new(Vec::new()));
    let sink = Flaky {
        failures: 0,
        written: Arc::clone(&written),
        next: 1,
    };
    let (writer, guard) =
        BatchWriter::start(vec![Box::new(sink)], config(0), Arc::default()).expect("writer");
    let receipts = submit_many(&writer, 10).await;
    drop(writer);
    assert!(guard.join(Duration::from_secs(30)).await);
    assert_eq!(receipts.iter().filter(|r| r.is_ok()).count(), 10);
    assert_eq!(written.lock().expect("lock").len(), 10);
}

/// A sink whose writes each wait (up to a generous bound) until `lanes` writes are in
/// progress at once, recording the most it saw.
#[derive(Debug)]
struct Rendezvous {
    lanes: usize,
    state: Arc<(Mutex<(usize, usize)>, std::sync::Condvar)>,
    next: u64,
}

#[async_trait::async_trait]
impl ReadingSink for Rendezvous {
    async fn allocate_ids(&mut self, count: usize) -> Result<Vec<ReadingId>, StoreError> {
        Ok(next_ids(&mut self.next, count))
    }

    async fn write(&mut self, _batch: &[StoredReading]) -> Result<(), StoreError> {
        let (lock, turn) = &*self.state;
        let mut state = lock
            .lock()
            .map_err(|_| StoreError::Corrupt("poisoned".into()))?;
        state.0 += 1;
        state.1 = state.1.max(state.0);
        turn.notify_all();
        let (mut state, _) = turn
            .wait_timeout_while(state, Duration::from_secs(10), |state| state.1 < self.lanes)
            .map_err(|_| StoreError::Corrupt("poisoned".into()))?;
        state.0 -= 1;
        Ok(())
    }
}

#[tokio::test]
async fn two_lanes_keep_two_flushes_in_flight() {
    let state = Arc::new((Mutex::new((0, 0)), std::sync::Condvar::new()));
    let sinks: Vec<Box<dyn ReadingSink>> = (0..2u64)
        .map(|lane| {
            Box::new(Rendezvous {
                lanes: 2,
                state: Arc::clone(&state),
                next: 1 + lane * 1_000,
            }) as Box<dyn ReadingSink>
        })
        .collect();
    let (writer, guard) = BatchWriter::start(sinks, config(0), Arc::default()).expect("writer");
    let receipts = submit_many(&writer, 8).await;
    drop(writer);
    assert!(guard.join(Duration::from_secs(30)).await);
    assert!(receipts.iter().all(Result::is_ok));
    assert_eq!(
        state.0.lock().expect("lock").1,
        2,
        "writes in progress at once"
    );
}

/// Held back `when_durable` callbacks: the sync the test has not let finish yet.
type Held = Arc<Mutex<Vec<Box<dyn FnOnce() + Send>>>>;

/// A sink that records the size of every batch written and holds back the first batch's
/// durability until the test runs [`Held`]; later batches are durable at once.
struct SlowFirstSync {
    written: Arc<Mutex<Vec<usize>>>,
    held: Held,
    holding: bool,
    next: u64,
}

impl std::fmt::Debug for SlowFirstSync {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SlowFirstSync").finish_non_exhaustive()
    }
}

#[async_trait::async_trait]
impl ReadingSink for SlowFirstSync {
    async fn allocate_ids(&mut self, count: usize) -> Result<Vec<ReadingId>, StoreError> {
        Ok(next_ids(&mut self.next, count))
    }

    async fn write(&mut self, batch: &[StoredReading]) -> Result<(), StoreError> {
        self.written
            .lock()
            .map_err(|_| StoreError::Corrupt("poisoned".into()))?
            .push(batch.len());
        Ok(())
    }

    fn when_durable(&mut self, _batch: &[StoredReading], then: Box<dyn FnOnce() + Send>) {
        match self.held.lock() {
            Ok(mut held) if std::mem::take(&mut self.holding) => held.push(then),
            _ => then(),
        }
    }
}

/// A writer over a [`SlowFirstSync`] flushing at `max_rows`, with what it wrote and held.
fn slow_first_sync(max_rows: usize) -> (BatchWriter, WriterGuard, Arc<Mutex<Vec<usize>>>, Held) {
    let written = Arc::new(Mutex::new(Vec::new()));
    let held: Held = Arc::default();
    let sink = SlowFirstSync {
        written: Arc::clone(&written),
        held: Arc::clone(&held),
        holding: true,
        next: 1,
    };
    let config = BatchConfig {
        max_rows,
        max_delay: Duration::ZERO,
        ..config(0)
    };
    let (writer, guard) =
        BatchWriter::start(vec![Box::new(sink)], config, Arc::default()).expect("writer");
    (writer, guard, written, held)
}

/// Waits (up to a generous bound) until `count` batches were written; the batch sizes.
async fn batches_written(written: &Mutex<Vec<usize>>, count: usize) -> Vec<usize> {
    for _ in 0..1_000 {
        let sizes = written.lock().expect("lock").clone();
        if sizes.len() >= count {
            return sizes;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    written.lock().expect("lock").clone()
}

/// A writer of batches of `max_rows` whose first upload is written and held in its sync.
async fn first_upload_syncing(
    max_rows: usize,
) -> (
    BatchWriter,
    WriterGuard,
    Arc<Mutex<Vec<usize>>>,
    Held,
    tokio::task::JoinHandle<Result<Receipt, WriteError>>,
) {
    let (writer, guard, written, held) = slow_first_sync(max_rows);
    let first = upload(&writer);
    assert_eq!(batches_written(&written, 1).await, [1]);
    (writer, guard, written, held, first)
}

fn upload(writer: &BatchWriter) -> tokio::task::JoinHandle<Result<Receipt, WriteError>> {
    let writer = writer.clone();
    tokio::spawn(async move { writer.submit(sender(), Utc::now(), reading()).await })
}

#[tokio::test]
async fn a_small_batch_waits_for_the_last_one_to_be_durable() {
    let (writer, guard, written, held, first) = first_upload_syncing(4).await;
    let (second, third) = (upload(&writer), upload(&writer));
    // Time for the writer to write them, which it must not while the first batch syncs.
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(*written.lock().expect("lock"), [1]);
    for then in std::mem::take(&mut *held.lock().expect("lock")) {
        then();
    }
    for upload in [first, second, third] {
        upload.await.expect("task").expect("stored");
    }
    assert_eq!(*written.lock().expect("lock"), [1, 2]);
    drop(writer);
    assert!(guard.join(Duration::from_secs(30)).await);
}

#[tokio::test]
async fn a_full_batch_is_written_while_the_last_one_syncs() {
    let (writer, guard, written, held, first) = first_upload_syncing(2).await;
    let (second, third) = (upload(&writer), upload(&writer));
    assert_eq!(batches_written(&written, 2).await, [1, 2]);
    second.await.expect("task").expect("stored");
    third.await.expect("task").expect("stored");
    for then in std::mem::take(&mut *held.lock().expect("lock")) {
        then();
    }
    first.await.expect("task").expect("stored");
    drop(writer);
    assert!(guard.join(Duration::from_secs(30)).await);
}

#[tokio::test]
async fn a_batch_filled_one_upload_at_a_time_during_a_sync_is_written_before_it_ends() {
    let (writer, guard, written, held, first) = first_upload_syncing(3).await;
    let second = upload(&writer);
    // The writer takes the second upload and waits, two readings short of a batch.
    tokio::time::sleep(Duration::from_millis(50)).await;
    let third = upload(&writer);
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(*written.lock().expect("lock"), [1], "not full yet");
    let fourth = upload(&writer);
    assert_eq!(batches_written(&written, 2).await, [1, 3]);
    for upload in [second, third, fourth] {
        upload.await.expect("task").expect("stored");
    }
    for then in std::mem::take(&mut *held.lock().expect("lock")) {
        then();
    }
    first.await.expect("task").expect("stored");
    drop(writer);
    assert!(guard.join(Duration::from_secs(30)).await);
}

//! The forwarder: sends what the spool holds on to QuestDB, and deletes it from the spool once
//! QuestDB acknowledged it.
//!
//! A coordinator thread reads the spool in id order, in chunks as large as the backlog (at most
//! [`CHUNK_ROWS`]), splits each chunk by device over the lanes — one ILP/HTTP sender each, on a
//! thread of its own, so several flushes are in flight — and, once every part of a chunk is
//! acknowledged, moves the spool's forwarded watermark through it (chunks are retired in order) and
//! reports the spool consumed up to it, which forgets its rows and prunes the log behind it. While
//! QuestDB is slower than the uploads, fewer chunks finish and the next ones are larger: each ILP
//! transaction costs QuestDB about the same whatever its size, so the batches grow until QuestDB
//! keeps up. For the same reason a chunk that is not full waits up to [`LINGER`] for more — unless
//! a read is waiting for its rows ([`Event::Hurry`]), so reads in this process never pay for the
//! lingering. Under single uploads that means one ILP transaction per `LINGER`: when chunks were
//! sent at 2,000 rows, QuestDB (on the same two cores, committing in sync mode) took 14–17 µs of
//! CPU per upload, against 10–13 µs now, and the pair served 6.7 % more uploads
//! (`bench/RESULTS.md`, thirteenth session).
//!
//! Why by device: of two rows with the same key, QuestDB keeps the one committed last. A device's
//! rows always go through the same lane, in id order, so a re-sent reading replaces the earlier
//! one even when two chunks are in flight.
//!
//! A write QuestDB refuses or does not answer is retried by its lane, with doubling pauses, until
//! it succeeds; nothing behind it is pruned meanwhile. On shutdown the coordinator forwards what
//! the spool holds for at most [`DRAIN_LIMIT`], then leaves the rest to the next start.

use std::collections::{HashSet, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::ilp::IlpWriter;
use super::spooled::{Progress, SpoolIngestion};
use super::visibility::Visibility;
use super::TableName;
use crate::domain::StoredReading;
use crate::store::ingest_log::LogReader;
use crate::store::StoreError;
use crate::telemetry::chain;

/// Most rows read from the spool into one chunk; as many waiting are sent at once, fewer wait up
/// to [`LINGER`] for more.
const CHUNK_ROWS: usize = 10_000;
/// Longest wait of an appended row before it is sent. QuestDB's work per ILP transaction barely
/// depends on its size (a commit, fsyncs in sync mode), so sending each append as it comes cost
/// QuestDB more CPU than the whole rest of the server (measured: ~15 rows per transaction).
const LINGER: Duration = Duration::from_millis(250);
/// Chunks handed to the lanes and not acknowledged yet, at most.
const CHUNKS_IN_FLIGHT: usize = 2;
/// How long the coordinator sleeps when nothing happens (it wakes at once on an append or an
/// acknowledgement).
const IDLE: Duration = Duration::from_millis(100);
/// How often the spool is pruned, at most.
const PRUNE_EVERY: Duration = Duration::from_millis(50);
/// First and longest pause before a lane retries a failed write.
const RETRY_FIRST: Duration = Duration::from_millis(50);
const RETRY_MAX: Duration = Duration::from_secs(1);
/// Longest time shutdown spends forwarding; what is left stays in the spool for the next start.
const DRAIN_LIMIT: Duration = Duration::from_secs(5);

/// Where the forwarder writes: `count` ILP/HTTP senders into `table`, acknowledgements recorded
/// in `visibility`.
#[derive(Debug)]
pub(super) struct Lanes {
    pub(super) ilp: String,
    pub(super) table: TableName,
    pub(super) count: usize,
    pub(super) visibility: Visibility,
}

/// What wakes the coordinator.
pub(super) enum Event {
    /// The sink appended a batch of this many rows.
    Appended(usize),
    /// A lane's part of a chunk is acknowledged by QuestDB.
    Done { chunk: u64 },
    /// A read waits for spooled rows: send what is there now, without lingering.
    Hurry,
    /// The sink is gone: forward what is left (within the bound) and stop.
    Stop,
}

/// The coordinator's inbox, made before the forwarder so the spool can hold a sender.
pub(super) fn inbox() -> (mpsc::Sender<Event>, mpsc::Receiver<Event>) {
    mpsc::channel()
}

/// A lane's share of a chunk.
struct Part {
    chunk: u64,
    rows: Vec<StoredReading>,
}

/// A chunk handed to the lanes.
#[derive(Debug)]
struct Chunk {
    seq: u64,
    last_id: i64,
    rows: usize,
    /// Its rows' devices, whose unconsumed rows it takes once retired.
    devices: HashSet<[u8; 16]>,
    parts_left: usize,
}

/// The running forwarder; dropping it drains and stops it.
#[derive(Debug)]
pub(super) struct Forwarder {
    events: mpsc::Sender<Event>,
    coordinator: Option<JoinHandle<()>>,
}

impl Forwarder {
    /// Starts the lanes and the coordinator, which begins with what the spool holds past
    /// `forwarded`.
    pub(super) fn start(
        ingestion: Arc<SpoolIngestion>,
        forwarded: i64,
        progress: Arc<Progress>,
        lanes: Lanes,
        (events, inbox): (mpsc::Sender<Event>, mpsc::Receiver<Event>),
    ) -> Result<Self, StoreError> {
        let waiting = usize::try_from(progress.backlog()).unwrap_or(0);
        let abandon = Arc::new(AtomicBool::new(false));
        let mut parts = Vec::new();
        let mut threads = Vec::new();
        for lane in 0..lanes.count.max(1) {
            let (to_lane, from_coordinator) = mpsc::sync_channel(CHUNKS_IN_FLIGHT);
            let writer = IlpWriter::new(lanes.ilp.clone(), lanes.table.clone());
            let done = events.clone();
            let visibility = lanes.visibility.clone();
            let abandon = Arc::clone(&abandon);
            let thread = std::thread::Builder::new()
                .name(format!("airq-forward-{lane}"))
                .spawn(move || send(writer, &from_coordinator, &done, &visibility, &abandon))
                .map_err(StoreError::Thread)?;
            parts.push(to_lane);
            threads.push(thread);
        }
        let coordinator = Coordinator {
            reader: ingestion.reader(),
            ingestion,
            progress,
            parts,
            lanes: threads,
            inbox,
            abandon,
            in_flight: VecDeque::new(),
            dispatched: forwarded,
            next_chunk: 0,
            waiting,
            waiting_since: (waiting > 0).then(Instant::now),
            hurry: false,
            forwarded,
            pruned: forwarded,
            pruned_at: Instant::now(),
            retired_devices: HashSet::new(),
        };
        let coordinator = std::thread::Builder::new()
            .name("airq-forward".into())
            .spawn(move || coordinator.run())
            .map_err(StoreError::Thread)?;
        Ok(Self {
            events,
            coordinator: Some(coordinator),
        })
    }
}

impl Drop for Forwarder {
    fn drop(&mut self) {
        let _ = self.events.send(Event::Stop);
        if let Some(coordinator) = self.coordinator.take() {
            let _ = coordinator.join();
        }
    }
}

/// The coordinator's state, owned by its thread.
struct Coordinator {
    ingestion: Arc<SpoolIngestion>,
    reader: LogReader,
    progress: Arc<Progress>,
    parts: Vec<mpsc::SyncSender<Part>>,
    lanes: Vec<JoinHandle<()>>,
    inbox: mpsc::Receiver<Event>,
    abandon: Arc<AtomicBool>,
    in_flight: VecDeque<Chunk>,
    /// Every row with an id up to this one is handed to a lane.
    dispatched: i64,
    next_chunk: u64,
    /// Rows appended and not handed to a lane yet (as far as the appends told), and since when.
    waiting: usize,
    waiting_since: Option<Instant>,
    /// A read waits: the next chunk goes now.
    hurry: bool,
    /// Every row with an id up to this one is acknowledged by QuestDB.
    forwarded: i64,
    /// The spool is reported consumed (pruned) through this id.
    pruned: i64,
    pruned_at: Instant,
    /// The devices of the chunks retired since, whose rows that report forgets.
    retired_devices: HashSet<[u8; 16]>,
}

impl Coordinator {
    fn run(mut self) {
        let mut stopping: Option<Instant> = None;
        loop {
            while let Ok(event) = self.inbox.try_recv() {
                self.take(event, &mut stopping);
            }
            self.retire(stopping.is_some());
            let due = stopping.is_some()
                || self.hurry
                || self.waiting >= CHUNK_ROWS
                || self
                    .waiting_since
                    .is_some_and(|since| since.elapsed() >= LINGER);
            let dispatched = due && self.in_flight.len() < CHUNKS_IN_FLIGHT && self.dispatch();
            if let Some(since) = stopping {
                if !dispatched && self.in_flight.is_empty() {
                    break;
                }
                if since.elapsed() >= DRAIN_LIMIT {
                    tracing::warn!(
                        rows = self.progress.backlog(),
                        "stopping with spooled readings QuestDB has not taken; they go at the next start"
                    );
                    self.abandon.store(true, Ordering::Relaxed);
                    break;
                }
            }
            if dispatched {
                continue;
            }
            // With every chunk slot taken, only an acknowledgement (an event) can change anything.
            let pause = match self.waiting_since {
                Some(since) if self.in_flight.len() < CHUNKS_IN_FLIGHT => LINGER
                    .saturating_sub(since.elapsed())
                    .max(Duration::from_millis(1)),
                _ => IDLE,
            };
            match self.inbox.recv_timeout(pause) {
                Ok(event) => self.take(event, &mut stopping),
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => {
                    stopping.get_or_insert_with(Instant::now);
                }
            }
        }
        self.parts.clear();
        for lane in self.lanes.drain(..) {
            let _ = lane.join();
        }
    }

    fn take(&mut self, event: Event, stopping: &mut Option<Instant>) {
        match event {
            Event::Appended(rows) => {
                self.waiting += rows;
                self.waiting_since.get_or_insert_with(Instant::now);
            }
            Event::Done { chunk } => {
                if let Some(entry) = self.in_flight.iter_mut().find(|entry| entry.seq == chunk) {
                    entry.parts_left = entry.parts_left.saturating_sub(1);
                }
            }
            Event::Hurry => self.hurry = true,
            Event::Stop => {
                stopping.get_or_insert_with(Instant::now);
            }
        }
    }

    /// Retires the acknowledged chunks at the front, in order, and prunes behind them.
    fn retire(&mut self, now: bool) {
        let mut rows = 0;
        while self
            .in_flight
            .front()
            .is_some_and(|chunk| chunk.parts_left == 0)
        {
            if let Some(chunk) = self.in_flight.pop_front() {
                self.forwarded = chunk.last_id;
                rows += chunk.rows;
                self.retired_devices.extend(chunk.devices);
            }
        }
        if rows > 0 {
            self.progress.forwarded(self.forwarded, rows);
        }
        if self.forwarded > self.pruned && (now || self.pruned_at.elapsed() >= PRUNE_EVERY) {
            let devices: Vec<[u8; 16]> = self.retired_devices.drain().collect();
            match self.ingestion.consumed(self.forwarded, &devices) {
                Ok(()) => self.pruned = self.forwarded,
                Err(error) => {
                    tracing::warn!(error = %chain(&error), "could not prune the spool; trying again later");
                }
            }
            self.pruned_at = Instant::now();
        }
    }

    /// Hands the next chunk to the lanes; `false` when the spool has nothing past it.
    fn dispatch(&mut self) -> bool {
        let rows = match self.reader.after(self.dispatched, CHUNK_ROWS) {
            Ok(rows) => rows,
            Err(error) => {
                tracing::warn!(error = %chain(&error), "could not read the spool; trying again");
                std::thread::sleep(RETRY_FIRST);
                return false;
            }
        };
        self.hurry = false;
        let Some(last) = rows.last() else {
            self.waiting = 0;
            self.waiting_since = None;
            return false;
        };
        let last_id = i64::try_from(last.id.get()).unwrap_or(i64::MAX);
        let count = rows.len();
        let lanes = self.parts.len();
        let mut split: Vec<Vec<StoredReading>> = (0..lanes).map(|_| Vec::new()).collect();
        let mut devices = HashSet::new();
        for row in rows {
            devices.insert(row.device.as_uuid().into_bytes());
            let lane = (row.device.as_uuid().as_u128() % lanes as u128) as usize;
            split[lane].push(row);
        }
        let seq = self.next_chunk;
        self.next_chunk += 1;
        let mut parts_left = 0;
        for (lane, rows) in split.into_iter().enumerate() {
            if rows.is_empty() {
                continue;
            }
            // A lane's queue holds CHUNKS_IN_FLIGHT parts, so this never blocks. It fails only
            // if the lane's thread is gone; the part then never reports back, so this chunk and
            // everything after it stay in the spool for the next start.
            let _ = self.parts[lane].send(Part { chunk: seq, rows });
            parts_left += 1;
        }
        self.in_flight.push_back(Chunk {
            seq,
            last_id,
            rows: count,
            devices,
            parts_left,
        });
        self.dispatched = last_id;
        self.waiting = self.waiting.saturating_sub(count);
        // What still counts as waiting was appended after this read (or is the notice of a row it
        // already took): its linger starts now. Kept from the first append instead, the clock
        // stayed past `LINGER` under a steady load and every chunk went at once, a few hundred
        // rows each (measured: 30 transactions a second at 23,000 uploads a second).
        self.waiting_since = (self.waiting > 0).then(Instant::now);
        true
    }
}

/// A lane: writes each part it is handed until QuestDB acknowledges it, then reports it.
fn send(
    mut writer: IlpWriter,
    parts: &mpsc::Receiver<Part>,
    done: &mpsc::Sender<Event>,
    visibility: &Visibility,
    abandon: &AtomicBool,
) {
    for part in parts {
        let mut pause = RETRY_FIRST;
        while let Err(error) = writer.write(&part.rows) {
            if abandon.load(Ordering::Relaxed) {
                return;
            }
            tracing::warn!(
                error = %chain(&error),
                rows = part.rows.len(),
                retry_ms = pause.as_millis() as u64,
                "QuestDB did not take spooled readings; retrying"
            );
            std::thread::sleep(pause);
            pause = (pause * 2).min(RETRY_MAX);
        }
        visibility.acknowledged(&part.rows);
        if done.send(Event::Done { chunk: part.chunk }).is_err() {
            return;
        }
    }
}

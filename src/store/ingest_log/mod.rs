//! Ingestion: where an upload's readings wait between its answer and their consumer — the fold
//! into `airq.db` (the embedded store), or the forwarder to QuestDB (the QuestDB pair's spool).
//!
//! One room for what both consumers need alike: the log ([`IngestLog`]: segment files in
//! `ingest/` in the data directory), its group sync (`GroupSync`, `sync.rs`), the rows past the
//! consumer's watermark, kept in memory by device until consumed (the **unconsumed** rows,
//! `Unconsumed`, `unconsumed.rs`), and the appender that hands each durable batch to the consumer
//! ([`Appender`]). Everyone outside goes through three doors:
//! - **append until durable** ([`Appender::append`], [`Appender::when_durable`]): the batch
//!   writer's sink writes a batch to the log, and its uploads are answered once it is synced, has
//!   joined the unconsumed rows and its consumer has heard of it;
//! - **the overlay for reads** ([`Ingestion::view`]): a read's share of the unconsumed rows, past
//!   the watermark of what it reads, the later of keyed rows with one key only;
//! - **consumed up to** ([`Ingestion::consumed`]): the consumer reports its watermark, and the
//!   room forgets the rows behind it and drops the log's segments wholly behind it.
//!
//! A consumer takes its rows from memory ([`Ingestion::chunk`], the fold) or, when it keeps only
//! a device's latest row there, from disk ([`Ingestion::reader`], the forwarder).
//!
//! The rules (each kept in the file named):
//! - **Durable before acknowledged, and before seen** (`appender.rs`, `sync.rs`): no read and no
//!   consumer ever sees a row a power loss could still take away, and every answered row is.
//! - **A row leaves only once its consumer is done with it** (`unconsumed.rs`, `log/`): from
//!   memory once the consumer reported it consumed, from disk once its whole segment is.
//! - **Ids only grow, also across restarts**; **a failed write leaves nothing behind**; **each
//!   start appends to a new segment** (`log/`).
//! - **A restart finds what it left** ([`Ingestion::open`]): the unconsumed rows are gathered
//!   again from the log, past the consumer's own watermark ([`Watermark::Own`], the fold's in
//!   `airq.db`) or past the one the log recorded ([`Watermark::Recorded`], the forwarder's).

mod appender;
mod ingestion;
mod log;
mod sync;
mod unconsumed;

pub(crate) use appender::Appender;
pub(crate) use ingestion::{Ingestion, Opened, Watermark};
pub(crate) use log::LogReader;
pub use log::{unconsumed, Entry, IngestLog, SEGMENT_BYTES};
pub(crate) use unconsumed::UnconsumedRow;

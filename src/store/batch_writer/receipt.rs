//! What an upload learns from the batch writer: a receipt once its batch is durable, or why
//! none of its readings was stored (a batch is all or nothing, so there is no partial answer).

use chrono::{DateTime, Utc};

use crate::domain::ReadingId;

/// What an upload learns once its batch is committed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Receipt {
    /// The reading's id.
    pub id: ReadingId,
    /// The time the reading is stored under.
    pub at: DateTime<Utc>,
}

/// Why a reading was not stored.
#[derive(Debug, Clone, thiserror::Error)]
pub enum WriteError {
    /// The batch could not be committed, retries included; nothing of it is stored. Holds the
    /// whole cause chain, for the log lines of the requests it fails (never for the client).
    #[error("the batch could not be committed: {0}")]
    Failed(String),
    /// The writer has stopped (the process is shutting down).
    #[error("the batch writer has stopped")]
    Stopped,
}

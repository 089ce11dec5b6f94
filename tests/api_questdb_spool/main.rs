//! The black-box suite on the QuestDB pair with a spool (`--questdb-spool`): uploads are answered
//! once they are durable in the data directory's spool, and forwarded to QuestDB behind. The
//! modules are the embedded suite's own files, so every pair is held to one contract; `pipeline`
//! (the QuestDB pair's) adds what several flushes in flight must keep, `spool` what only the
//! spool can show: QuestDB away, a restart with readings still spooled.
//!
//! Runs when PostgreSQL and QuestDB (`AIRQ_TEST_QUESTDB_ILP`, `AIRQ_TEST_QUESTDB_PG`) are
//! reachable when the binary runs; otherwise every test is ignored and the reason printed
//! (`tests/support/trials.rs`).

mod backend {
    pub const PAIR: crate::common::Pair = crate::common::Pair::QuestDbSpool;
}

#[path = "../common/mod.rs"]
mod common;
#[path = "../support/trials.rs"]
mod trials;

include!("../api_questdb/contract_suite.rs");

#[path = "../api_questdb/pipeline.rs"]
mod pipeline;
mod spool;

fn main() -> std::process::ExitCode {
    trials::run()
}

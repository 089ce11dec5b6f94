//! The black-box suite on the QuestDB pair: devices in PostgreSQL (a schema of its own per
//! test), readings in QuestDB (a table of its own per test). The modules are the embedded
//! suite's own files, so every pair is held to one contract; `outage` adds what only a QuestDB
//! outage can show, `pipeline` what several flushes in flight must keep.
//!
//! Runs when PostgreSQL and QuestDB (`AIRQ_TEST_QUESTDB_ILP`, `AIRQ_TEST_QUESTDB_PG`) are
//! reachable when the binary runs; otherwise every test is ignored and the reason printed
//! (`tests/support/trials.rs`).

mod backend {
    pub const PAIR: crate::common::Pair = crate::common::Pair::QuestDb;
}

#[path = "../common/mod.rs"]
mod common;
#[path = "../support/trials.rs"]
mod trials;

include!("contract_suite.rs");

#[path = "../api_postgres/migrate.rs"]
mod migrate;
mod migrate_progress;
mod outage;
mod owners;
mod pipeline;
mod retention;
mod rollups;

fn main() -> std::process::ExitCode {
    trials::run()
}

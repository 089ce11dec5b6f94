//! The black-box suite on the QuestDB pair with a spool (`--questdb-spool`): uploads are answered
//! once they are durable in the data directory's spool, and forwarded to QuestDB behind. The
//! modules are the embedded suite's own files, so every pair is held to one contract; `pipeline`
//! (the QuestDB pair's) adds what several flushes in flight must keep, `spool` what only the
//! spool can show: QuestDB away, a restart with readings still spooled.
//!
//! Runs when PostgreSQL and QuestDB (`AIRQ_TEST_QUESTDB_ILP`, `AIRQ_TEST_QUESTDB_PG`) are
//! reachable at build time (see `build.rs`); otherwise the pair is one ignored test that says why.

#![cfg_attr(not(airq_test_questdb), allow(dead_code, unused_imports))]

mod backend {
    pub const PAIR: crate::common::Pair = crate::common::Pair::QuestDbSpool;
}

#[path = "../common/mod.rs"]
mod common;

include!("../api_questdb/contract_suite.rs");

#[cfg(airq_test_questdb)]
#[path = "../api_questdb/pipeline.rs"]
mod pipeline;
#[cfg(airq_test_questdb)]
mod spool;

#[cfg(not(airq_test_questdb))]
#[test]
#[ignore = "AIRQ_TEST_POSTGRES_URL, AIRQ_TEST_QUESTDB_ILP or AIRQ_TEST_QUESTDB_PG is not set or unreachable: the QuestDB pair with a spool is skipped"]
fn questdb_spool_pair() {}

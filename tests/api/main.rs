//! The black-box suite: the real server over real HTTP.

#[path = "../common/mod.rs"]
mod common;

mod devices;
mod errors;

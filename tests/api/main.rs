//! The black-box suite: the real server over real HTTP.

#[path = "../common/mod.rs"]
mod common;

mod auth;
mod cli;
mod devices;
mod errors;
mod openapi;

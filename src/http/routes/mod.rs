//! Handlers, one file per resource. Each is thin: extract, parse, call a store, render.

pub mod devices;
pub mod meta;

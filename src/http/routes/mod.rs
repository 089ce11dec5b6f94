//! Handlers, one file per resource. Each is thin: extract, parse, call a store, render.

pub mod air_quality;
pub mod data;
pub mod devices;
pub mod meta;
pub mod public;

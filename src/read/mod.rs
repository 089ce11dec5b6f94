//! Reads, composed once from the store traits: current snapshots, bucketed series, the
//! community map and its clusters, and the raw export.
//!
//! Backends only sum, count and find latest samples; the rules (the snapshot window and its
//! fallback, online status, rounding, empty buckets left out, who is on the map) live in
//! [`crate::domain`] and are applied here, so every backend answers the same question the same
//! way. Handlers parse, call one function of this module, and render what it returns.

pub mod clusters;
pub mod current;
pub mod export;
pub mod map;
pub mod series;

//! How answers are written, and how request JSON is read: the formats of the API.
//!
//! Content negotiation ([`negotiate`]); JSON documents and their numbers, parsed without losing
//! what `serde_json` would ([`json_value`], [`json_numbers`]); the shapes answers take
//! ([`views`]); the raw export's formats, streamed ([`export_formats`]); answers tagged with
//! their bytes' hash, and the map's rendered variants ([`cacheable`]); and response bodies
//! ([`respond`]). Handlers choose what to say; these files decide how it is spelled, once for
//! every route.

pub mod alert_views;
pub mod cacheable;
pub mod export_formats;
pub mod json_numbers;
pub mod json_value;
pub mod negotiate;
pub mod respond;
pub mod views;

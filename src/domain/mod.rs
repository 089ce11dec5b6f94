//! The domain: what airq's data means, independent of HTTP and of storage.
//!
//! Request bodies, queries and path segments are parsed here into types that cannot hold invalid
//! values (`DeviceName`, `DeviceUuid`, `Reading`, ...). Parsing collects every field problem at
//! once into [`FieldErrors`], so a client fixes a bad body in one round trip.

pub mod alert;
pub mod aqi;
pub mod batch;
pub mod bbox;
pub mod device;
pub mod device_key;
pub mod field_errors;
pub mod json_document;
pub mod json_fields;
pub mod limit;
pub mod measure;
pub mod owner;
pub mod paging;
pub mod query;
pub mod reading;
pub mod retention;
pub mod snapshot;
pub mod timeline;
pub mod zoom;

pub use aqi::AqiCategory;
pub use batch::ReadingBatch;
pub use bbox::{BoundingBox, Coverage};
pub use device::{
    is_bidi_control, Device, DeviceFlags, DeviceName, DevicePatch, DeviceUuid, Registration,
};
pub use device_key::{DeviceId, DeviceKey, KeyHash};
pub use field_errors::{Code, FieldError, FieldErrors, In};
pub use json_document::{Json, JsonArray, JsonDocument, JsonMap};
pub use limit::Limit;
pub use measure::{Measure, Measurements};
pub use owner::OwnerId;
pub use paging::{DeviceCursor, DevicePage, PagedDevices};
pub use query::{ClusterQuery, CustomQuery, ExportQuery, HistoricalQuery, MapQuery, QueryParams};
pub use reading::{Location, RawReading, Reading, ReadingId, StoredReading};
pub use retention::{MeasuredWindow, RawRetention};
pub use snapshot::{Aggregate, LatestLocated, LocatedAt, Snapshot, Status};
pub use timeline::{BucketPlan, Timeline};
pub use zoom::Zoom;

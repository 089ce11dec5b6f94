//! The JSON shapes of responses, built from domain values.

use chrono::{DateTime, SecondsFormat, TimeZone};
use serde::Serialize;

use crate::domain::{Device, DeviceKey};

/// RFC 3339 with milliseconds; `Z` for UTC, the offset otherwise.
pub fn timestamp<Tz: TimeZone>(at: &DateTime<Tz>) -> String
where
    Tz::Offset: std::fmt::Display,
{
    at.to_rfc3339_opts(SecondsFormat::Millis, true)
}

/// A device as its owner sees it; `device_key` only right after registration or rotation.
#[derive(Debug, Serialize)]
pub struct DeviceView<'a> {
    id: String,
    device_id: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    device_key: Option<&'a str>,
    name: &'a str,
    is_public: bool,
    is_location_public: bool,
    is_outdoor: bool,
    created_at: String,
    updated_at: String,
}

impl<'a> DeviceView<'a> {
    /// The view without credentials.
    pub fn new(device: &'a Device) -> Self {
        Self {
            id: device.id.to_string(),
            device_id: device.device_id.as_str(),
            device_key: None,
            name: device.name.as_str(),
            is_public: device.flags.is_public,
            is_location_public: device.flags.is_location_public,
            is_outdoor: device.flags.is_outdoor,
            created_at: timestamp(&device.created_at),
            updated_at: timestamp(&device.updated_at),
        }
    }

    /// The view with the freshly issued key.
    pub fn with_key(device: &'a Device, key: &'a DeviceKey) -> Self {
        Self {
            device_key: Some(key.expose()),
            ..Self::new(device)
        }
    }
}

/// A device as anyone sees it: no credentials, no location flag.
#[derive(Debug, Serialize)]
pub struct PublicDeviceView<'a> {
    id: String,
    name: &'a str,
    is_outdoor: bool,
    is_public: bool,
    created_at: String,
    updated_at: String,
}

impl<'a> PublicDeviceView<'a> {
    /// The public view.
    pub fn new(device: &'a Device) -> Self {
        Self {
            id: device.id.to_string(),
            name: device.name.as_str(),
            is_outdoor: device.flags.is_outdoor,
            is_public: device.flags.is_public,
            created_at: timestamp(&device.created_at),
            updated_at: timestamp(&device.updated_at),
        }
    }
}

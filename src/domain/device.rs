//! Devices: identity, name, visibility flags, and the bodies that create and change them.

use std::fmt;

use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::device_key::DeviceId;
use super::field_errors::{Code, FieldErrors, In};
use super::json_document::JsonDocument;
use super::json_fields::JsonObject;
use super::owner::OwnerId;

/// The `id` of a device: a UUID, used in paths.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct DeviceUuid(Uuid);

impl DeviceUuid {
    /// A fresh random id.
    pub fn generate() -> Self {
        Self(Uuid::new_v4())
    }

    /// The `{id}` path segment; a 422 problem (`in: path`) unless it is a UUID.
    pub fn parse_path(segment: &str) -> Result<Self, FieldErrors> {
        Uuid::try_parse(segment).map(Self).map_err(|_| {
            FieldErrors::single(
                In::Path,
                "id",
                Code::Format,
                format!("`{segment}` is not a UUID such as 0f5f4e4c-6a8b-4d1e-9a77-2f1c3b5d7e90"),
            )
        })
    }

    /// An id as stored.
    pub fn from_uuid(uuid: Uuid) -> Self {
        Self(uuid)
    }

    /// The UUID.
    pub fn as_uuid(&self) -> Uuid {
        self.0
    }
}

impl fmt::Display for DeviceUuid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.hyphenated().fmt(f)
    }
}

/// A device name: 1 to 100 Unicode characters as sent, at least one of them not whitespace, no
/// control characters and no bidirectional controls; stored without its surrounding whitespace. Every rule holds for the text
/// as sent, so that the OpenAPI document's `maxLength` and `pattern` describe exactly what is
/// accepted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceName(String);

impl DeviceName {
    /// Most characters (Unicode scalar values) a name may have.
    pub const MAX_CHARS: usize = 100;

    /// Parses a name; the error is the code and detail of the problem.
    pub fn parse(raw: &str) -> Result<Self, (Code, String)> {
        let name = raw.trim();
        let chars = raw.chars().count();
        if name.is_empty() {
            Err((
                Code::MinLength,
                "`name` must have at least one visible character".into(),
            ))
        } else if chars > Self::MAX_CHARS {
            Err((
                Code::MaxLength,
                format!(
                    "`name` has {chars} characters; at most {} are allowed",
                    Self::MAX_CHARS
                ),
            ))
        } else if raw.chars().any(char::is_control) {
            Err((
                Code::Format,
                "`name` must not contain control characters".into(),
            ))
        } else if raw.chars().any(is_bidi_control) {
            Err((
                Code::Format,
                "`name` must not contain bidirectional embedding, override or isolate controls \
                 (U+202A–U+202E, U+2066–U+2069)"
                    .into(),
            ))
        } else {
            Ok(Self(name.to_owned()))
        }
    }

    /// A name as stored (already valid).
    pub fn from_stored(name: String) -> Self {
        Self(name)
    }

    /// The name.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// Whether `c` opens or closes a bidirectional embedding, override or isolate. Such a character
/// in a name shown on a page or in a list reorders the text after it (a name could turn the
/// page's own words around); right-to-left letters and the marks U+200E/U+200F do not.
pub fn is_bidi_control(c: char) -> bool {
    matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// The three owner-controlled flags of a device.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DeviceFlags {
    /// Readings are readable without credentials.
    pub is_public: bool,
    /// The exact location is public too (public snapshots and the map).
    pub is_location_public: bool,
    /// The device stands outdoors.
    pub is_outdoor: bool,
}

/// A registered device, as the owner sees it (without credentials).
#[derive(Debug, Clone, PartialEq)]
pub struct Device {
    /// Path id.
    pub id: DeviceUuid,
    /// Public identifier used on upload.
    pub device_id: DeviceId,
    /// Who owns it.
    pub owner: OwnerId,
    /// Display name.
    pub name: DeviceName,
    /// Visibility and placement.
    pub flags: DeviceFlags,
    /// Registration time.
    pub created_at: DateTime<Utc>,
    /// Last change of name, flags or key.
    pub updated_at: DateTime<Utc>,
}

/// The parsed body of `POST /devices`.
#[derive(Debug, Clone, PartialEq)]
pub struct Registration {
    /// The name.
    pub name: DeviceName,
    /// The flags; absent ones are `false` (a new device is private).
    pub flags: DeviceFlags,
}

impl Registration {
    /// Parses a registration body, listing every problem.
    pub fn parse(body: &JsonDocument) -> Result<Self, FieldErrors> {
        let mut errors = FieldErrors::new();
        let Some(object) = JsonObject::root(body, &mut errors) else {
            return Err(errors);
        };
        let name = object
            .required_str("name", &mut errors)
            .and_then(|raw| parse_name(raw, &mut errors));
        let flags = DeviceFlags {
            is_public: object.optional("is_public", &mut errors).unwrap_or(false),
            is_location_public: object
                .optional("is_location_public", &mut errors)
                .unwrap_or(false),
            is_outdoor: object.optional("is_outdoor", &mut errors).unwrap_or(false),
        };
        match name {
            Some(name) if errors.is_empty() => Ok(Self { name, flags }),
            _ => Err(errors),
        }
    }
}

/// The parsed body of `PATCH /devices/{id}`: only the fields present change.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DevicePatch {
    /// New name.
    pub name: Option<DeviceName>,
    /// New `is_public`.
    pub is_public: Option<bool>,
    /// New `is_location_public`.
    pub is_location_public: Option<bool>,
    /// New `is_outdoor`.
    pub is_outdoor: Option<bool>,
}

impl DevicePatch {
    /// Parses a patch body, listing every problem.
    pub fn parse(body: &JsonDocument) -> Result<Self, FieldErrors> {
        let mut errors = FieldErrors::new();
        let Some(object) = JsonObject::root(body, &mut errors) else {
            return Err(errors);
        };
        let patch = Self {
            name: object
                .optional_str("name", &mut errors)
                .and_then(|raw| parse_name(raw, &mut errors)),
            is_public: object.optional("is_public", &mut errors),
            is_location_public: object.optional("is_location_public", &mut errors),
            is_outdoor: object.optional("is_outdoor", &mut errors),
        };
        errors.into_result(|| patch)
    }

    /// Whether the patch changes nothing.
    pub fn is_empty(&self) -> bool {
        *self == Self::default()
    }

    /// The device after the patch, changed at `now`; `None` when the patch changes nothing
    /// (then the device is left as it is, `updated_at` included).
    pub fn apply(&self, device: &Device, now: DateTime<Utc>) -> Option<Device> {
        if self.is_empty() {
            return None;
        }
        let flags = device.flags;
        Some(Device {
            name: self.name.clone().unwrap_or_else(|| device.name.clone()),
            flags: DeviceFlags {
                is_public: self.is_public.unwrap_or(flags.is_public),
                is_location_public: self.is_location_public.unwrap_or(flags.is_location_public),
                is_outdoor: self.is_outdoor.unwrap_or(flags.is_outdoor),
            },
            updated_at: now,
            ..device.clone()
        })
    }
}

fn parse_name(raw: &str, errors: &mut FieldErrors) -> Option<DeviceName> {
    DeviceName::parse(raw)
        .map_err(|(code, detail)| errors.push(In::Body, "name", code, detail))
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_counts_characters_not_bytes() {
        let hundred = "ö".repeat(100);
        assert!(DeviceName::parse(&hundred).is_ok());
        let (code, _) = DeviceName::parse(&"ö".repeat(101))
            .err()
            .unwrap_or((Code::Type, String::new()));
        assert_eq!(code, Code::MaxLength);
    }

    #[test]
    fn every_rule_holds_for_the_name_as_sent() {
        let code = |raw: &str| DeviceName::parse(raw).err().map(|(code, _)| code);
        assert_eq!(
            code(&format!(" {} ", "a".repeat(99))),
            Some(Code::MaxLength)
        );
        assert_eq!(code("\nBalcony"), Some(Code::Format));
        assert_eq!(code(" \u{a0} "), Some(Code::MinLength));
        assert_eq!(code("\u{202e}Balcony"), Some(Code::Format));
        assert_eq!(code("Balcony \u{2067}"), Some(Code::Format));
        assert_eq!(
            code("\u{200f}شرفة"),
            None,
            "right-to-left text and its marks"
        );
        assert_eq!(
            DeviceName::parse("  Balcony ").map(|name| name.as_str().to_owned()),
            Ok("Balcony".to_owned())
        );
    }
}

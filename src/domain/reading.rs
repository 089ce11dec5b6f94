//! A sensor reading: the upload body of `POST /data`, parsed and bounded.

use std::sync::Arc;

use chrono::{DateTime, Timelike, Utc};

use super::device::DeviceUuid;
use super::field_errors::{Code, FieldErrors, In};
use super::json_document::JsonDocument;
use super::json_fields::JsonObject;
use super::measure::{Group, Measure, Measurements};
use super::owner::OwnerId;
use super::retention::MeasuredWindow;

/// Longest provider name (sensor model, location source).
pub const MAX_PROVIDER_CHARS: usize = 50;
pub use super::measure::{MAX_AQI, MAX_PM, MAX_TEMPERATURE};

/// Where a sample was taken.
#[derive(Debug, Clone, PartialEq)]
pub struct Location {
    /// Latitude, −90 to 90.
    pub lat: f64,
    /// Longitude, −180 to 180.
    pub lon: f64,
    /// Who supplied the position (e.g. the paired phone's GPS).
    pub provider: String,
}

/// A valid reading as uploaded.
#[derive(Debug, Clone, PartialEq)]
pub struct Reading {
    /// The values.
    pub values: Measurements,
    /// Particulate sensor model.
    pub pms_provider: String,
    /// Temperature sensor model.
    pub temperature_provider: String,
    /// Position, when the device knew it.
    pub location: Option<Location>,
    /// When the sample was taken, if the device said so (else: when it arrived).
    pub measured_at: Option<DateTime<Utc>>,
}

impl Reading {
    /// Parses an upload body, listing every problem; `window` bounds `measured_at`.
    pub fn parse(body: &JsonDocument, window: MeasuredWindow) -> Result<Self, FieldErrors> {
        let mut errors = FieldErrors::new();
        let reading = JsonObject::root(body, &mut errors)
            .and_then(|root| Self::from_object(&root, window, &mut errors));
        match reading {
            Some(reading) if errors.is_empty() => Ok(reading),
            _ => Err(errors),
        }
    }

    /// Parses the reading held by `root` (a body, or an element of a batch), adding its problems
    /// to `errors`; `None` when it has any.
    pub fn from_object(
        root: &JsonObject<'_>,
        window: MeasuredWindow,
        errors: &mut FieldErrors,
    ) -> Option<Self> {
        let errors_before = errors.as_slice().len();
        let mut values = Measurements::default();
        let mut complete = true;
        let mut pms_provider = None;
        let mut temperature_provider = None;
        for group in Group::ALL {
            let object = match group.key() {
                None => Some(root.clone()),
                Some(key) => root.required_object(key, errors),
            };
            let Some(object) = object else {
                complete = false;
                continue;
            };
            for measure in Measure::ALL.into_iter().filter(|m| m.group() == group) {
                match value(&object, measure, errors) {
                    Some(value) => values[measure] = value,
                    None => complete = false,
                }
            }
            match group {
                Group::Body => {}
                Group::Pms => pms_provider = provider(&object, errors),
                Group::Climate => temperature_provider = provider(&object, errors),
            }
        }

        let location = root
            .optional_object("location", errors)
            .and_then(|location| parse_location(&location, errors));
        let measured_at = root
            .optional_str("measured_at", errors)
            .and_then(|text| parse_measured_at(root, text, window, errors));

        let clean = errors.as_slice().len() == errors_before;
        match (pms_provider, temperature_provider) {
            (Some(pms_provider), Some(temperature_provider)) if complete && clean => Some(Self {
                values,
                pms_provider,
                temperature_provider,
                location,
                measured_at,
            }),
            _ => None,
        }
    }
}

/// One value of `object`, typed and bounded as its measure says.
fn value(object: &JsonObject<'_>, measure: Measure, errors: &mut FieldErrors) -> Option<f64> {
    let key = measure.name();
    let value = if measure.is_integer() {
        object.required::<i64>(key, errors)? as f64
    } else {
        without_negative_zero(object.required::<f64>(key, errors)?)
    };
    let (minimum, maximum) = measure.bounds();
    (at_least(object, key, value, minimum, errors) & at_most(object, key, value, maximum, errors))
        .then_some(value)
}

/// `-0.0` as `0.0`, the one zero stored: a store may keep the sign (the unfolded rows, JSON) or
/// not (SQLite's REAL, sums), and a reading must read back the same before and after the fold.
fn without_negative_zero(value: f64) -> f64 {
    value + 0.0
}

fn parse_location(location: &JsonObject<'_>, errors: &mut FieldErrors) -> Option<Location> {
    let lat = location
        .required::<f64>("lat", errors)
        .map(without_negative_zero);
    if let Some(lat) = lat {
        at_least(location, "lat", lat, -90.0, errors);
        at_most(location, "lat", lat, 90.0, errors);
    }
    let lon = location
        .required::<f64>("lon", errors)
        .map(without_negative_zero);
    if let Some(lon) = lon {
        at_least(location, "lon", lon, -180.0, errors);
        at_most(location, "lon", lon, 180.0, errors);
    }
    let provider = provider(location, errors);
    Some(Location {
        lat: lat?,
        lon: lon?,
        provider: provider?,
    })
}

fn parse_measured_at(
    root: &JsonObject<'_>,
    text: &str,
    window: MeasuredWindow,
    errors: &mut FieldErrors,
) -> Option<DateTime<Utc>> {
    let name = || root.name("measured_at");
    let Ok(at) = DateTime::parse_from_rfc3339(text) else {
        let name = name();
        errors.push(
            In::Body,
            &name,
            Code::Format,
            format!(
                "`{name}` must be an RFC 3339 timestamp such as 2026-11-21T14:05:00Z, not {text:?}"
            ),
        );
        return None;
    };
    let at = at.with_timezone(&Utc);
    if at.nanosecond() >= 1_000_000_000 {
        // chrono reads second 60 as a leap second and stores it as the next minute's second 0,
        // so the receipt would name a time the reading is not stored under. No leap second has
        // been inserted since 2016, and none lies within the accepted 366 days.
        let name = name();
        errors.push(
            In::Body,
            &name,
            Code::Format,
            format!("`{name}` names second 60, and no leap second lies within the accepted range"),
        );
        None
    } else if at < window.earliest() {
        let name = name();
        errors.push(In::Body, &name, Code::Minimum, window.too_old(&name));
        None
    } else if at > window.latest() {
        let name = name();
        errors.push(
            In::Body,
            &name,
            Code::Maximum,
            format!("`{name}` must not be more than 5 minutes in the future"),
        );
        None
    } else {
        Some(at)
    }
}

fn provider(object: &JsonObject<'_>, errors: &mut FieldErrors) -> Option<String> {
    let text = object.required_str("provider", errors)?;
    let chars = text.chars().count();
    if text.trim().is_empty() {
        errors.push(
            In::Body,
            object.name("provider"),
            Code::MinLength,
            "a provider must not be empty",
        );
        None
    } else if chars > MAX_PROVIDER_CHARS {
        let name = object.name("provider");
        errors.push(
            In::Body,
            &name,
            Code::MaxLength,
            format!("`{name}` has {chars} characters; at most {MAX_PROVIDER_CHARS} are allowed"),
        );
        None
    } else {
        Some(text.to_owned())
    }
}

/// Whether `value` (of `key` in `object`) is at least `minimum`; a problem if not.
fn at_least(
    object: &JsonObject<'_>,
    key: &str,
    value: f64,
    minimum: f64,
    errors: &mut FieldErrors,
) -> bool {
    let ok = value >= minimum;
    if !ok {
        let name = object.name(key);
        errors.push(
            In::Body,
            &name,
            Code::Minimum,
            format!("`{name}` must be at least {minimum}"),
        );
    }
    ok
}

/// Whether `value` (of `key` in `object`) is at most `maximum`; a problem if not.
fn at_most(
    object: &JsonObject<'_>,
    key: &str,
    value: f64,
    maximum: f64,
    errors: &mut FieldErrors,
) -> bool {
    let ok = value <= maximum;
    if !ok {
        let name = object.name(key);
        errors.push(
            In::Body,
            &name,
            Code::Maximum,
            format!("`{name}` must be at most {maximum}"),
        );
    }
    ok
}

/// The receipt id of a stored reading: positive and at most 2^53 − 1, exact in JavaScript.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ReadingId(u64);

impl ReadingId {
    /// The largest id: 2^53 − 1.
    pub const MAX: u64 = (1 << 53) - 1;

    /// An id, if it is in range.
    pub fn new(value: u64) -> Option<Self> {
        (1..=Self::MAX).contains(&value).then_some(Self(value))
    }

    /// The number.
    pub fn get(self) -> u64 {
        self.0
    }
}

/// A reading on its way into storage: whose, when, and its receipt id.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredReading {
    /// Receipt id.
    pub id: ReadingId,
    /// The device that sent it.
    pub device: DeviceUuid,
    /// The device's owner at the upload: QuestDB keeps it on the row, so an owner's fleet is read
    /// by one symbol instead of a list of every device. `None` for a reading read back from a
    /// store or logged by an airq before it was kept (the embedded store has no use for it).
    pub owner: Option<Arc<OwnerId>>,
    /// When it was measured (`measured_at`, else the receive time).
    pub at: DateTime<Utc>,
    /// The values.
    pub reading: Reading,
}

/// A stored reading read back as it was stored, for the raw export.
#[derive(Debug, Clone, PartialEq)]
pub struct RawReading {
    /// The time it is stored under (`measured_at`, else the receive time).
    pub at: DateTime<Utc>,
    /// One value per measure, at [`Measure::index`]; `None` where the store holds none.
    pub values: [Option<f64>; super::measure::COUNT],
    /// Latitude and longitude, when the reading carried a location.
    pub position: Option<(f64, f64)>,
}

impl RawReading {
    /// The value of `measure`.
    pub fn value(&self, measure: Measure) -> Option<f64> {
        self.values[measure.index()]
    }
}

//! A batch upload: the body of `POST /data/batch`, 1 to 1,000 readings, all or nothing.
//!
//! Every element is parsed exactly as a single upload body, and every problem of every element is
//! listed at once, named after its position (`readings[3].pms_data.pm2_5`, 0-based), so a gateway
//! fixes a rejected batch in one round trip.

use chrono::{DateTime, Utc};
use simd_json::OwnedValue;

use super::field_errors::{Code, FieldErrors, In};
use super::json_fields::JsonObject;
use super::reading::Reading;

/// Most readings in one batch.
pub const MAX_READINGS: usize = 1_000;

/// The readings of a batch, in request order.
#[derive(Debug, Clone, PartialEq)]
pub struct ReadingBatch(Vec<Reading>);

impl ReadingBatch {
    /// Parses a batch body, listing every problem; `now` bounds each `measured_at`.
    pub fn parse(body: &OwnedValue, now: DateTime<Utc>) -> Result<Self, FieldErrors> {
        let mut errors = FieldErrors::new();
        let items = JsonObject::root(body, &mut errors)
            .and_then(|root| root.required_array("readings", &mut errors));
        let Some(items) = items else {
            return Err(errors);
        };
        if items.is_empty() {
            errors.push(
                In::Body,
                "readings",
                Code::MinLength,
                "`readings` must hold at least one reading",
            );
        } else if items.len() > MAX_READINGS {
            errors.push(
                In::Body,
                "readings",
                Code::MaxLength,
                format!(
                    "`readings` holds {} readings; at most {MAX_READINGS} are allowed per batch",
                    items.len()
                ),
            );
            return Err(errors);
        }
        let readings: Vec<Reading> = items
            .iter()
            .enumerate()
            .filter_map(|(index, item)| {
                JsonObject::element(item, format!("readings[{index}]"), &mut errors)
                    .and_then(|object| Reading::from_object(&object, now, &mut errors))
            })
            .collect();
        if errors.is_empty() {
            Ok(Self(readings))
        } else {
            Err(errors)
        }
    }

    /// The readings, in request order.
    pub fn into_readings(self) -> Vec<Reading> {
        self.0
    }
}

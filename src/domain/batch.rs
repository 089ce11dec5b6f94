//! A batch upload: the body of `POST /data/batch`, 1 to 1,000 readings, all or nothing.
//!
//! Every element is parsed exactly as a single upload body, and every problem of every element is
//! listed at once, named after its position (`readings[3].pms_data.pm2_5`, 0-based), so a gateway
//! fixes a rejected batch in one round trip.

use super::field_errors::{Code, FieldErrors, In};
use super::json_document::JsonDocument;
use super::json_fields::JsonObject;
use super::reading::Reading;
use super::retention::MeasuredWindow;

/// Most readings in one batch.
pub const MAX_READINGS: usize = 1_000;

/// The readings of a batch, in request order.
#[derive(Debug, Clone, PartialEq)]
pub struct ReadingBatch(Vec<Reading>);

impl ReadingBatch {
    /// Parses a batch body, listing every problem; `window` bounds each `measured_at`.
    pub fn parse(body: &JsonDocument, window: MeasuredWindow) -> Result<Self, FieldErrors> {
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
                    .and_then(|object| Reading::from_object(&object, window, &mut errors))
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

#[cfg(test)]
mod tests {
    use chrono::{DateTime, Utc};
    use proptest::prelude::*;
    use serde_json::{json, Value};

    use super::*;

    fn valid_reading() -> Value {
        json!({
            "aqi": 42,
            "pms_data": {"pm1_0": 5.0, "pm2_5": 9.8, "pm10_0": 14.2, "provider": "PMS5003"},
            "temperature_data": {"temperature": 21.5, "heat_index": 21.9, "humidity": 48, "provider": "BME280"},
            "location": {"lat": 52.52, "lon": 13.405, "provider": "gps"},
            "measured_at": "2026-11-21T14:00:00Z"
        })
    }

    /// Any JSON value that could stand for a field.
    fn anything() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::from),
            any::<i64>().prop_map(Value::from),
            any::<f64>().prop_map(Value::from),
            any::<String>().prop_map(Value::from),
            Just(json!(1e300)),
            Just(json!(-0.0)),
        ];
        leaf.prop_recursive(3, 16, 4, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::from),
                proptest::collection::btree_map("[a-z_0-9.]{0,12}", inner, 0..4)
                    .prop_map(|map| Value::Object(map.into_iter().collect())),
            ]
        })
    }

    /// A valid reading with some of its members (nested ones included) replaced or removed.
    fn reading() -> impl Strategy<Value = Value> {
        let paths = [
            "/aqi",
            "/pms_data",
            "/pms_data/pm2_5",
            "/pms_data/provider",
            "/temperature_data",
            "/temperature_data/humidity",
            "/location",
            "/location/lat",
            "/measured_at",
            "/extra",
        ];
        proptest::collection::vec(
            (
                proptest::sample::select(paths.to_vec()),
                prop::option::of(anything()),
            ),
            0..4,
        )
        .prop_map(|edits| {
            let mut reading = valid_reading();
            for (path, replacement) in edits {
                let (parent, key) = path.rsplit_once('/').unwrap_or(("", path));
                if let Some(Value::Object(object)) = reading.pointer_mut(parent) {
                    match replacement {
                        Some(value) => object.insert(key.to_owned(), value),
                        None => object.remove(key),
                    };
                }
            }
            reading
        })
    }

    fn owned(value: &Value) -> JsonDocument {
        crate::http::encodings::json_value::parse(value.to_string().as_bytes())
            .expect("serde_json writes JSON")
    }

    fn now() -> MeasuredWindow {
        let at = DateTime::parse_from_rfc3339("2026-11-21T15:00:00Z")
            .map_or_else(|_| Utc::now(), |at| at.to_utc());
        MeasuredWindow::at(at, crate::domain::RawRetention::default())
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(300))]

        #[test]
        fn a_reading_is_stored_as_sent_or_every_fault_is_named(reading in reading()) {
            match Reading::parse(&owned(&reading), now()) {
                Ok(parsed) => prop_assert!((0.0..=10_000.0).contains(&parsed.values[crate::domain::measure::Measure::Aqi])),
                Err(errors) => prop_assert!(!errors.is_empty()),
            }
        }

        #[test]
        fn a_batch_is_whole_or_names_each_fault_by_position(
            readings in proptest::collection::vec(reading(), 0..6),
            wrapper in prop_oneof![Just(true), Just(false)],
        ) {
            let body = if wrapper { json!({"readings": readings}) } else { Value::from(readings.clone()) };
            match ReadingBatch::parse(&owned(&body), now()) {
                Ok(batch) => prop_assert_eq!(batch.into_readings().len(), readings.len()),
                Err(errors) => {
                    prop_assert!(!errors.is_empty());
                    for error in errors.as_slice() {
                        prop_assert!(
                            error.name == "$" || error.name == "readings" || error.name.starts_with("readings["),
                            "{}", error.name
                        );
                    }
                }
            }
        }
    }
}

//! The measured values of a reading, listed once.
//!
//! [`Measure::ALL`] is the one list: the upload parser reads each value from its place in the
//! body and checks its bounds, [`Measurements`] and [`Aggregate`](super::Aggregate) hold one slot
//! per entry, views write them under their names, and every backend derives its column lists from
//! it (SQLite sums and inserts, QuestDB's ILP columns and sums). Adding a value is one entry here
//! plus the schema migration of each backend.

use std::ops::{Index, IndexMut};

/// Highest accepted AQI: every scale in use stays far below, and sums of many samples stay exact.
pub const MAX_AQI: i64 = 10_000;
/// Highest accepted particulate concentration, µg/m³ (sensors saturate far below).
pub const MAX_PM: f64 = 100_000.0;
/// Largest accepted magnitude of a temperature or heat index (any unit in use).
pub const MAX_TEMPERATURE: f64 = 1_000.0;

/// The object of an upload body that carries a value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Group {
    /// The body itself.
    Body,
    /// `pms_data`, the particulate sensor.
    Pms,
    /// `temperature_data`, the climate sensor.
    Climate,
}

impl Group {
    /// The objects that hold values, in the order a body is checked.
    pub const ALL: [Group; 3] = [Group::Body, Group::Pms, Group::Climate];

    /// The key of the object in an upload body (`None`: the body itself).
    pub fn key(self) -> Option<&'static str> {
        match self {
            Self::Body => None,
            Self::Pms => Some("pms_data"),
            Self::Climate => Some("temperature_data"),
        }
    }
}

/// One measured value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Measure {
    /// Air quality index (a non-negative integer).
    Aqi,
    /// Heat index.
    HeatIndex,
    /// Relative humidity, %.
    Humidity,
    /// PM1.0, µg/m³.
    Pm1_0,
    /// PM2.5, µg/m³.
    Pm2_5,
    /// PM10, µg/m³.
    Pm10_0,
    /// Temperature.
    Temperature,
}

/// How many values a reading carries.
pub const COUNT: usize = Measure::ALL.len();

impl Measure {
    /// Every value, in the order of the spec's responses (and of every column list).
    pub const ALL: [Measure; 7] = [
        Measure::Aqi,
        Measure::HeatIndex,
        Measure::Humidity,
        Measure::Pm1_0,
        Measure::Pm2_5,
        Measure::Pm10_0,
        Measure::Temperature,
    ];

    /// Every value in the order of the raw export's columns (`measured_at`, these, `lat`, `lon`):
    /// the order of an upload body, `aqi`, then `pms_data`, then `temperature_data`.
    pub const EXPORT_ORDER: [Measure; COUNT] = [
        Measure::Aqi,
        Measure::Pm1_0,
        Measure::Pm2_5,
        Measure::Pm10_0,
        Measure::Temperature,
        Measure::Humidity,
        Measure::HeatIndex,
    ];

    /// Its position in [`Measure::ALL`] (and in every per-measure array).
    pub fn index(self) -> usize {
        self as usize
    }

    /// The name of the value: its key in bodies and responses, its column in every store.
    pub fn name(self) -> &'static str {
        match self {
            Self::Aqi => "aqi",
            Self::HeatIndex => "heat_index",
            Self::Humidity => "humidity",
            Self::Pm1_0 => "pm1_0",
            Self::Pm2_5 => "pm2_5",
            Self::Pm10_0 => "pm10_0",
            Self::Temperature => "temperature",
        }
    }

    /// Where an upload carries it.
    pub fn group(self) -> Group {
        match self {
            Self::Aqi => Group::Body,
            Self::Pm1_0 | Self::Pm2_5 | Self::Pm10_0 => Group::Pms,
            Self::HeatIndex | Self::Humidity | Self::Temperature => Group::Climate,
        }
    }

    /// The accepted range, bounds included.
    pub fn bounds(self) -> (f64, f64) {
        match self {
            Self::Aqi => (0.0, MAX_AQI as f64),
            Self::Pm1_0 | Self::Pm2_5 | Self::Pm10_0 => (0.0, MAX_PM),
            Self::HeatIndex | Self::Temperature => (-MAX_TEMPERATURE, MAX_TEMPERATURE),
            Self::Humidity => (0.0, 100.0),
        }
    }

    /// Whether the value is a whole number (stored and shown as an integer; its mean is rounded).
    pub fn is_integer(self) -> bool {
        matches!(self, Self::Aqi)
    }
}

/// One number per [`Measure`]: a sample's values, their means, or their sums.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Measurements([f64; COUNT]);

impl Measurements {
    /// Values from a function of the measure.
    pub fn from_fn(mut value: impl FnMut(Measure) -> f64) -> Self {
        Self(Measure::ALL.map(&mut value))
    }

    /// The values with their measures, in list order.
    pub fn iter(&self) -> impl Iterator<Item = (Measure, f64)> + '_ {
        Measure::ALL
            .into_iter()
            .map(|measure| (measure, self[measure]))
    }

    /// The AQI as the integer it is.
    pub fn aqi(&self) -> i64 {
        self[Measure::Aqi] as i64
    }
}

impl Index<Measure> for Measurements {
    type Output = f64;

    fn index(&self, measure: Measure) -> &f64 {
        &self.0[measure.index()]
    }
}

impl IndexMut<Measure> for Measurements {
    fn index_mut(&mut self, measure: Measure) -> &mut f64 {
        &mut self.0[measure.index()]
    }
}

impl std::ops::AddAssign for Measurements {
    fn add_assign(&mut self, other: Self) {
        for measure in Measure::ALL {
            self[measure] += other[measure];
        }
    }
}

impl std::ops::SubAssign for Measurements {
    fn sub_assign(&mut self, other: Self) {
        for measure in Measure::ALL {
            self[measure] -= other[measure];
        }
    }
}

/// Writes the values as a JSON object's members, integers as integers.
impl serde::Serialize for Measurements {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap as _;
        let mut map = serializer.serialize_map(Some(COUNT))?;
        for (measure, value) in self.iter() {
            if measure.is_integer() {
                map.serialize_entry(measure.name(), &(value as i64))?;
            } else {
                map.serialize_entry(measure.name(), &value)?;
            }
        }
        map.end()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_measure_has_its_own_slot_in_list_order() {
        for (index, measure) in Measure::ALL.into_iter().enumerate() {
            assert_eq!(measure.index(), index);
        }
    }

    #[test]
    fn the_export_order_lists_every_measure_once() {
        let mut seen = [false; COUNT];
        for measure in Measure::EXPORT_ORDER {
            assert!(!seen[measure.index()], "{measure:?} twice");
            seen[measure.index()] = true;
        }
        assert!(seen.iter().all(|seen| *seen));
    }

    #[test]
    fn values_serialize_in_list_order_with_integers_as_integers() {
        let values = Measurements::from_fn(|measure| if measure.is_integer() { 42.0 } else { 1.5 });
        let json = serde_json::to_string(&values).unwrap_or_default();
        assert_eq!(
            json,
            r#"{"aqi":42,"heat_index":1.5,"humidity":1.5,"pm1_0":1.5,"pm2_5":1.5,"pm10_0":1.5,"temperature":1.5}"#
        );
    }
}

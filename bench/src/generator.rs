//! The upload generator: valid `POST /api/v1/data` requests with plausible random values.
//!
//! The very same [`UploadWorkload`] drives the real server (`uploads`, `seed`, `reads
//! --with-uploads`) and the bare HTTP endpoint (`ceiling`), so the ceiling is measured with
//! identical requests: same headers, same body sizes, same generator cost.
//!
//! Request `i` goes to device `i mod N`, so consecutive requests spread over the fleet. Values
//! come from a per-request random stream (no shared state between workers): each device has its
//! own pollution level, climate, sensor models and home position; particulate values follow a
//! daily cycle when a measurement time is given; the AQI follows PM2.5 (US EPA breakpoints).
//! Each device's first upload always carries a location (so every device reaches the public
//! map), later ones with probability `location_share`.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU32, Ordering};

use bytes::Bytes;
use chrono::{DateTime, SecondsFormat, TimeDelta, Utc};
use hyper::header::{HeaderName, HeaderValue};
use hyper::{Request, StatusCode};

use crate::client::{Answer, Body, Target};
use crate::fleet::Fleet;
use crate::load::Workload;
use crate::rng::Rng;
use crate::BoxError;

const PMS_PROVIDERS: [&str; 3] = ["PMS5003", "PMS7003", "SDS011"];
const CLIMATE_PROVIDERS: [&str; 3] = ["BME280", "SHT31", "DHT22"];

/// A device's credentials as headers, and its character.
#[derive(Debug)]
struct Profile {
    id_header: HeaderValue,
    key_header: HeaderValue,
    home: (f64, f64),
    base_pm: f64,
    base_temperature: f64,
    pms_provider: &'static str,
    climate_provider: &'static str,
}

impl Profile {
    fn new(index: usize, device_id: &str, device_key: &str) -> Result<Self, BoxError> {
        let mut rng = Rng::new(0xA1E0_0000 ^ index as u64);
        let mut key_header = HeaderValue::try_from(device_key)?;
        key_header.set_sensitive(true);
        Ok(Self {
            id_header: HeaderValue::try_from(device_id)?,
            key_header,
            home: (rng.range(-55.0, 70.0), rng.range(-180.0, 180.0)),
            base_pm: rng.range(3.0, 45.0),
            base_temperature: rng.range(-5.0, 30.0),
            pms_provider: PMS_PROVIDERS[index % PMS_PROVIDERS.len()],
            climate_provider: CLIMATE_PROVIDERS[(index / 3) % CLIMATE_PROVIDERS.len()],
        })
    }
}

/// US EPA PM2.5 → AQI breakpoints: (concentration low, high, index low, high).
const BREAKPOINTS: [(f64, f64, f64, f64); 6] = [
    (0.0, 12.0, 0.0, 50.0),
    (12.0, 35.4, 51.0, 100.0),
    (35.4, 55.4, 101.0, 150.0),
    (55.4, 150.4, 151.0, 200.0),
    (150.4, 250.4, 201.0, 300.0),
    (250.4, 500.4, 301.0, 500.0),
];

/// The AQI of a PM2.5 concentration.
pub fn aqi_of(pm2_5: f64) -> i64 {
    for (c_low, c_high, i_low, i_high) in BREAKPOINTS {
        if pm2_5 <= c_high {
            let index = i_low + (pm2_5 - c_low).max(0.0) / (c_high - c_low) * (i_high - i_low);
            return index.round() as i64;
        }
    }
    500
}

/// A measurement schedule: device `d`'s `k`-th reading is measured at `start + k × step`.
#[derive(Debug, Clone, Copy)]
pub struct Schedule {
    /// First measurement.
    pub start: DateTime<Utc>,
    /// Between two readings of one device.
    pub step: TimeDelta,
}

/// Uploads of a fleet; counts each device's 201s.
#[derive(Debug)]
pub struct UploadWorkload {
    target: Target,
    profiles: Vec<Profile>,
    location_share: f64,
    schedule: Option<Schedule>,
    acks: Vec<AtomicU32>,
}

const DEVICE_ID: HeaderName = HeaderName::from_static("x-device-id");
const DEVICE_KEY: HeaderName = HeaderName::from_static("x-device-key");

impl UploadWorkload {
    /// Uploads for `fleet` to `target`; with a schedule every body carries `measured_at`.
    pub fn new(
        target: Target,
        fleet: &Fleet,
        location_share: f64,
        schedule: Option<Schedule>,
    ) -> Result<Self, BoxError> {
        if fleet.devices.is_empty() {
            return Err("the fleet has no devices".into());
        }
        let profiles = fleet
            .devices
            .iter()
            .enumerate()
            .map(|(index, device)| Profile::new(index, &device.device_id, &device.device_key))
            .collect::<Result<Vec<_>, _>>()?;
        let acks = (0..profiles.len()).map(|_| AtomicU32::new(0)).collect();
        Ok(Self {
            target,
            profiles,
            location_share: location_share.clamp(0.0, 1.0),
            schedule,
            acks,
        })
    }

    /// The same workload with device `i` at `homes[i]` (devices beyond `homes` keep theirs).
    pub fn with_homes(mut self, homes: &[(f64, f64)]) -> Self {
        for (profile, home) in self.profiles.iter_mut().zip(homes) {
            profile.home = *home;
        }
        self
    }

    /// 201s per device, in fleet order.
    pub fn acks(&self) -> Vec<u64> {
        self.acks
            .iter()
            .map(|count| u64::from(count.load(Ordering::Relaxed)))
            .collect()
    }

    /// The body of request `index` for device `device`, in round `round`.
    fn body(&self, index: u64, device: usize, round: u64) -> String {
        let at = self
            .schedule
            .map(|schedule| schedule.start + schedule.step * i32::try_from(round).unwrap_or(0));
        let mut body = String::with_capacity(320);
        self.write_reading(&mut body, index, device, round == 0, at);
        body
    }

    /// Appends one reading of device `device` to `out`: values from the random stream `seed`,
    /// located when `first` (or by chance), stamped `at` when given (whole seconds print
    /// without a fraction, finer instants with as many digits as they need).
    pub fn write_reading(
        &self,
        out: &mut String,
        seed: u64,
        device: usize,
        first: bool,
        at: Option<DateTime<Utc>>,
    ) {
        let profile = &self.profiles[device];
        let mut rng = Rng::new(seed.wrapping_mul(0x2545_F491_4F6C_DD1D) ^ 0x5EED);
        // Hour of day (UTC) drives a daily cycle when the measurement time is known.
        let hour = at.map(|at| at.timestamp().rem_euclid(86_400) as f64 / 3600.0);
        let cycle = |peak: f64| {
            hour.map_or(0.0, |hour| {
                ((hour - peak) / 24.0 * std::f64::consts::TAU).cos()
            })
        };
        let pm2_5 = (profile.base_pm * (1.0 + 0.35 * cycle(8.0)) * rng.range(0.6, 1.6)).min(900.0);
        let pm1_0 = pm2_5 * rng.range(0.6, 0.75);
        let pm10_0 = pm2_5 * rng.range(1.2, 1.6);
        let temperature = profile.base_temperature + 4.0 * cycle(15.0) + rng.range(-1.0, 1.0);
        let humidity = rng.range(25.0, 90.0);
        let heat_index = if temperature > 20.0 {
            temperature + (humidity - 40.0).max(0.0) * 0.05
        } else {
            temperature
        };
        let _ = write!(
            out,
            "{{\"aqi\":{},\"pms_data\":{{\"pm1_0\":{pm1_0:.1},\"pm2_5\":{pm2_5:.1},\"pm10_0\":{pm10_0:.1},\"provider\":\"{}\"}},\
             \"temperature_data\":{{\"temperature\":{temperature:.1},\"heat_index\":{heat_index:.1},\"humidity\":{humidity:.1},\"provider\":\"{}\"}}",
            aqi_of(pm2_5),
            profile.pms_provider,
            profile.climate_provider,
        );
        if first || rng.unit() < self.location_share {
            let lat = (profile.home.0 + rng.range(-0.001, 0.001)).clamp(-90.0, 90.0);
            let lon = (profile.home.1 + rng.range(-0.001, 0.001)).clamp(-180.0, 180.0);
            let _ = write!(
                out,
                ",\"location\":{{\"lat\":{lat:.5},\"lon\":{lon:.5},\"provider\":\"phone-gps\"}}"
            );
        }
        if let Some(at) = at {
            let _ = write!(
                out,
                ",\"measured_at\":\"{}\"",
                at.to_rfc3339_opts(SecondsFormat::AutoSi, true)
            );
        }
        out.push('}');
    }

    /// The target the requests go to.
    pub fn target(&self) -> &Target {
        &self.target
    }

    /// Devices in the fleet.
    pub fn devices(&self) -> usize {
        self.profiles.len()
    }

    /// The credential headers of device `device`.
    pub fn credentials(&self, device: usize) -> [(HeaderName, HeaderValue); 2] {
        let profile = &self.profiles[device];
        [
            (DEVICE_ID, profile.id_header.clone()),
            (DEVICE_KEY, profile.key_header.clone()),
        ]
    }
}

impl Workload for UploadWorkload {
    fn request(&self, index: u64) -> Option<(Request<Body>, u32)> {
        let devices = self.profiles.len() as u64;
        let device = (index % devices) as usize;
        let round = index / devices;
        let body = self.body(index, device, round);
        let request =
            self.target
                .post_json("/api/v1/data", Bytes::from(body), &self.credentials(device));
        Some((request, device as u32))
    }

    fn success(&self, status: StatusCode) -> bool {
        status == StatusCode::CREATED
    }

    fn observe(&self, tag: u32, answer: &Answer) {
        if answer.status == StatusCode::CREATED {
            if let Some(count) = self.acks.get(tag as usize) {
                count.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fleet::Fleet;

    #[test]
    fn bodies_are_valid_json_within_the_server_bounds() {
        let fleet = Fleet::synthetic(3);
        let target = Target::local("127.0.0.1:9".parse().expect("address"));
        let schedule = Schedule {
            start: Utc::now() - TimeDelta::days(365),
            step: TimeDelta::minutes(1),
        };
        for schedule in [None, Some(schedule)] {
            let workload =
                UploadWorkload::new(target.clone(), &fleet, 0.5, schedule).expect("workload");
            for index in 0..3000 {
                let body = workload.body(index, (index % 3) as usize, index / 3);
                let value: serde_json::Value = serde_json::from_str(&body).expect("json");
                let aqi = value["aqi"].as_i64().expect("aqi");
                assert!((0..=500).contains(&aqi));
                let humidity = value["temperature_data"]["humidity"].as_f64().expect("h");
                assert!((0.0..=100.0).contains(&humidity));
                for key in ["pm1_0", "pm2_5", "pm10_0"] {
                    assert!(value["pms_data"][key].as_f64().expect("pm") >= 0.0);
                }
                if index < 3 {
                    assert!(value["location"].is_object(), "first upload is located");
                }
                assert_eq!(value["measured_at"].is_string(), schedule.is_some());
            }
        }
    }

    #[test]
    fn aqi_follows_the_breakpoints() {
        assert_eq!(aqi_of(0.0), 0);
        assert_eq!(aqi_of(12.0), 50);
        assert_eq!(aqi_of(35.4), 100);
        assert_eq!(aqi_of(1000.0), 500);
    }
}

//! A device's latest located folded reading before a time: what the fold falls back to when a
//! replacement takes a location away, and what reads fall back to when an unconsumed reading
//! replaces the one `device_latest` names.

use rusqlite::{params, Connection};

use super::dictionary::{device_number, provider_name};
use super::packed_reading::read_body;
use crate::domain::Measure;
use crate::store::StoreError;

/// A located sample: time, lat, lon, provider, aqi, pm2.5, temperature.
pub(super) type Located = (i64, f64, f64, String, i64, f64, f64);

/// `device`'s latest located folded reading measured before `at` (microseconds). The location is
/// inside each body, so this walks the device's readings back from `at` until one has it.
pub(super) fn located_before(
    connection: &Connection,
    device: [u8; 16],
    at: i64,
) -> Result<Option<Located>, StoreError> {
    let mut statement = connection.prepare_cached(&format!(
        "SELECT b.at, r.body FROM readings_by_device b JOIN readings r ON r.id = b.id \
         WHERE b.device = {} AND b.at < ?2 ORDER BY b.at DESC, b.dedup DESC",
        device_number("?1")
    ))?;
    let mut rows = statement.query(params![device.as_slice(), at])?;
    while let Some(row) = rows.next()? {
        let at: i64 = row.get(0)?;
        let body = read_body(row, 1, at)?;
        if let Some((lat, lon, provider)) = body.location {
            return Ok(Some((
                at,
                lat,
                lon,
                provider_name(connection, provider)?,
                body.values.aqi(),
                body.values[Measure::Pm2_5],
                body.values[Measure::Temperature],
            )));
        }
    }
    Ok(None)
}

//! Numbers for what raw rows repeat: a device's number (`device_numbers`) names it in
//! `readings` and `readings_by_device` in one to three bytes instead of its UUID's sixteen, and
//! a sensor model's or location provider's number (`providers`) replaces its name in every
//! reading's body ([`packed_reading`](super::packed_reading)).
//!
//! The fold numbers what a chunk names for the first time, in the chunk's transaction, and asks
//! each once per chunk ([`Numbering`]). Reads keep binding a device's 16 bytes: their statements
//! look its number up in the statement itself ([`device_number`]), one index probe per
//! statement.

use std::collections::HashMap;

use rusqlite::{Connection, OptionalExtension};

use crate::store::StoreError;

/// The SQL of the number of the device bound to placeholder `placeholder` (e.g. `?1`).
pub(super) fn device_number(placeholder: &str) -> String {
    format!("(SELECT number FROM device_numbers WHERE device = {placeholder})")
}

/// The numbers one fold transaction looked up or gave, by device and by provider name.
#[derive(Debug, Default)]
pub(super) struct Numbering {
    devices: HashMap<[u8; 16], i64>,
    providers: HashMap<String, i64>,
}

impl Numbering {
    /// `device`'s number, given now if it has none.
    pub(super) fn device(
        &mut self,
        connection: &Connection,
        device: [u8; 16],
    ) -> Result<i64, StoreError> {
        if let Some(&number) = self.devices.get(&device) {
            return Ok(number);
        }
        let found: Option<i64> = connection
            .prepare_cached("SELECT number FROM device_numbers WHERE device = ?1")?
            .query_row([device.as_slice()], |row| row.get(0))
            .optional()?;
        let number = match found {
            Some(number) => number,
            None => connection
                .prepare_cached("INSERT INTO device_numbers (device) VALUES (?1) RETURNING number")?
                .query_row([device.as_slice()], |row| row.get(0))?,
        };
        self.devices.insert(device, number);
        Ok(number)
    }

    /// The provider `name`'s number, given now if it has none.
    pub(super) fn provider(
        &mut self,
        connection: &Connection,
        name: &str,
    ) -> Result<i64, StoreError> {
        if let Some(&number) = self.providers.get(name) {
            return Ok(number);
        }
        connection
            .prepare_cached(
                "INSERT INTO providers (name) VALUES (?1) ON CONFLICT (name) DO NOTHING",
            )?
            .execute([name])?;
        let number: i64 = connection
            .prepare_cached("SELECT number FROM providers WHERE name = ?1")?
            .query_row([name], |row| row.get(0))?;
        self.providers.insert(name.to_owned(), number);
        Ok(number)
    }
}

/// Every provider's name by number.
pub(super) fn provider_names(connection: &Connection) -> Result<HashMap<i64, String>, StoreError> {
    let mut statement = connection.prepare_cached("SELECT number, name FROM providers")?;
    let names = statement
        .query_map([], |row| Ok((row.get(0)?, row.get(1)?)))?
        .collect::<Result<_, _>>()?;
    Ok(names)
}

/// The name of provider `number`.
pub(super) fn provider_name(connection: &Connection, number: i64) -> Result<String, StoreError> {
    connection
        .prepare_cached("SELECT name FROM providers WHERE number = ?1")?
        .query_row([number], |row| row.get(0))
        .optional()?
        .ok_or_else(|| StoreError::Corrupt(format!("provider {number} has no name")))
}

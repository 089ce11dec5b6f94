//! One ILP/HTTP sender writing batches of readings into the readings table, each batch one
//! transaction (QuestDB answers once it is committed to the table's WAL).

use ::questdb::ingress::{Buffer, Sender, TimestampMicros};

use super::TableName;
use crate::domain::StoredReading;
use crate::store::StoreError;

/// An ILP/HTTP sender and its buffer, made at the first write and again after a failure that
/// closed the connection.
pub(super) struct IlpWriter {
    ilp: String,
    table: TableName,
    sender: Option<Sender>,
    buffer: Option<Buffer>,
}

impl std::fmt::Debug for IlpWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IlpWriter")
            .field("table", &self.table)
            .finish_non_exhaustive()
    }
}

impl IlpWriter {
    /// A writer into `table` through the questdb-rs configuration `ilp`; connects lazily.
    pub(super) fn new(ilp: String, table: TableName) -> Self {
        Self {
            ilp,
            table,
            sender: None,
            buffer: None,
        }
    }

    /// Writes `rows` as one transaction; blocks for the HTTP round trip.
    pub(super) fn write(&mut self, rows: &[StoredReading]) -> Result<(), StoreError> {
        self.fill(rows)?;
        self.flush()
    }

    fn fill(&mut self, rows: &[StoredReading]) -> Result<(), StoreError> {
        let sender = match &mut self.sender {
            Some(sender) => sender,
            None => self.sender.insert(Sender::from_conf(&self.ilp)?),
        };
        let buffer = self.buffer.get_or_insert_with(|| sender.new_buffer());
        buffer.clear();
        for row in rows {
            let reading = &row.reading;
            buffer
                .table(self.table.as_str())?
                .symbol("device", row.device.to_string())?;
            if let Some(owner) = &row.owner {
                buffer.symbol("owner", super::owners::key(owner))?;
            }
            buffer
                .symbol("pms_provider", &reading.pms_provider)?
                .symbol("temperature_provider", &reading.temperature_provider)?;
            if let Some(location) = &reading.location {
                buffer.symbol("location_provider", &location.provider)?;
            }
            let id = i64::try_from(row.id.get()).unwrap_or(i64::MAX);
            // The upsert key with `at` and `device`: one row per `measured_at`, else per receipt.
            let dedup = if reading.measured_at.is_some() { 0 } else { id };
            buffer.column_i64("id", id)?.column_i64("dedup", dedup)?;
            for (measure, value) in reading.values.iter() {
                if measure.is_integer() {
                    buffer.column_i64(measure.name(), value as i64)?;
                } else {
                    buffer.column_f64(measure.name(), value)?;
                }
            }
            if let Some(location) = &reading.location {
                buffer
                    .column_f64("lat", location.lat)?
                    .column_f64("lon", location.lon)?;
            }
            buffer.at(TimestampMicros::new(row.at.timestamp_micros()))?;
        }
        Ok(())
    }

    fn flush(&mut self) -> Result<(), StoreError> {
        let (Some(sender), Some(buffer)) = (&mut self.sender, &self.buffer) else {
            return Err(StoreError::Config("the ILP sender was not set up".into()));
        };
        let flushed = sender.flush_and_keep_with_flags(buffer, true);
        if flushed.is_err() && sender.must_close() {
            self.sender = None;
            self.buffer = None;
        }
        Ok(flushed?)
    }
}

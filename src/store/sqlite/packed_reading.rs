//! A raw reading's body as one BLOB: everything of a row of `readings` but its keys (receipt id,
//! device, time, whether the time is its key), in a few bytes.
//!
//! Why: a reading stored as a column per value took 116 bytes in `readings` (each value an 8-byte
//! `REAL`, the sensor models as text in every row, a 16-byte device); the issue of fleet scale
//! asked for at most 80 in all, index and rollups included. Sensors report with one or two
//! decimals, so a value is kept as the smallest integer `n` with `n / 10^k` exactly the value
//! (`k` of 0, 1 or 2: 23.4 is 234 with `k` = 1, two bytes), and as its eight bytes only when no
//! such `n` exists; reading it back computes the same division, so every value returns bit for
//! bit. Sensor models and location providers are numbers of the `providers` table.
//!
//! The layout, in order:
//! - one byte of flags (bit 0: the reading carries a location);
//! - [`TAG_BYTES`] bytes of 2-bit tags, one per measured value in [`Measure::ALL`] order: `k`,
//!   or 3 for the value's eight little-endian bytes;
//! - the receive time, to the millisecond: its milliseconds since the epoch less those of `at`,
//!   a zigzag varint (nothing reads it back but diagnostics; to the microsecond it took a byte
//!   or two more per reading);
//! - each value: a zigzag varint of `n`, or its eight bytes;
//! - the numbers of the particulate and the climate sensor models, varints;
//! - with a location: latitude and longitude (eight bytes each), the provider's number (varint).
//!
//! SQL sums bodies through [`SUMS`] (a range's sums on a reader connection), and the upgrade of
//! a database of the first format packs its rows through [`PACK`] (`schema/sqlite/003`).

use integer_encoding::VarInt;
use rusqlite::functions::{Aggregate, Context, FunctionFlags};
use rusqlite::types::ValueRef;
use rusqlite::{Connection, Row};

use crate::domain::measure::COUNT;
use crate::domain::{Measure, Measurements};

/// `airq_reading_sums(body)`: the sums of a column of bodies, as a BLOB of
/// [`packed_sums`](super::packed_sums).
pub(super) const SUMS: &str = "airq_reading_sums";
/// `airq_reading_pack(at, received_at, values…, pms, climate, lat, lon, location provider)`:
/// a body from the columns of the first format (provider numbers already looked up).
pub(super) const PACK: &str = "airq_reading_pack";

/// Bytes of the values' tags.
const TAG_BYTES: usize = (COUNT * 2).div_ceil(8);
/// The tag of a value kept as its eight bytes.
const WHOLE: u8 = 3;
/// Flag: a location follows the providers.
const LOCATED: u8 = 1;
/// `10^k` for the tags below [`WHOLE`].
const SCALES: [f64; 3] = [1.0, 10.0, 100.0];
/// Microseconds in a millisecond, the receive time's precision.
const MILLI: i64 = 1_000;
/// Largest `|n|` kept as an integer: beyond it an `f64` no longer holds every integer.
const MAX_SCALED: f64 = 9_007_199_254_740_992.0;

/// A reading's body, unpacked.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Body {
    /// When it was appended, microseconds since the epoch (kept to the millisecond: a body
    /// unpacks its millisecond's first microsecond).
    pub(crate) received_at: i64,
    pub(crate) values: Measurements,
    /// The numbers of the particulate and the climate sensor models.
    pub(crate) providers: (i64, i64),
    /// Latitude, longitude and the provider's number.
    pub(crate) location: Option<(f64, f64, i64)>,
}

impl Body {
    /// Appends the body of a reading measured at `at` (microseconds) to `out`.
    pub(crate) fn pack_into(&self, at: i64, out: &mut Vec<u8>) {
        let start = out.len();
        out.push(if self.location.is_some() { LOCATED } else { 0 });
        out.extend_from_slice(&[0; TAG_BYTES]);
        put_signed(
            out,
            self.received_at
                .div_euclid(MILLI)
                .wrapping_sub(at.div_euclid(MILLI)),
        );
        for (measure, value) in self.values.iter() {
            let tag = match scaled(value) {
                Some((tag, n)) => {
                    put_signed(out, n);
                    tag
                }
                None => {
                    out.extend_from_slice(&value.to_le_bytes());
                    WHOLE
                }
            };
            let bit = measure.index() * 2;
            out[start + 1 + bit / 8] |= tag << (bit % 8);
        }
        put_signed(out, self.providers.0);
        put_signed(out, self.providers.1);
        if let Some((lat, lon, provider)) = self.location {
            out.extend_from_slice(&lat.to_le_bytes());
            out.extend_from_slice(&lon.to_le_bytes());
            put_signed(out, provider);
        }
    }

    /// The body in `bytes` of a reading measured at `at`; `None` if they hold no body.
    pub(crate) fn unpack(at: i64, bytes: &[u8]) -> Option<Self> {
        let mut reader = Reader::new(bytes)?;
        let received_at = at
            .div_euclid(MILLI)
            .wrapping_add(reader.signed()?)
            .wrapping_mul(MILLI);
        let values = reader.values()?;
        let providers = (reader.signed()?, reader.signed()?);
        let location = if reader.located {
            Some((reader.float()?, reader.float()?, reader.signed()?))
        } else {
            None
        };
        Some(Self {
            received_at,
            values,
            providers,
            location,
        })
    }
}

/// The measured values of a body (the rest is not decoded); `None` if `bytes` hold no body.
pub(crate) fn values(bytes: &[u8]) -> Option<Measurements> {
    let mut reader = Reader::new(bytes)?;
    reader.signed()?;
    reader.values()
}

/// The values of the body in column `index` of a row.
pub(crate) fn read_values(row: &Row<'_>, index: usize) -> rusqlite::Result<Measurements> {
    let bytes = row.get_ref(index)?.as_blob()?;
    values(bytes).ok_or_else(|| corrupt(index))
}

/// The body in column `index` of a row of a reading measured at `at`.
pub(crate) fn read_body(row: &Row<'_>, index: usize, at: i64) -> rusqlite::Result<Body> {
    let bytes = row.get_ref(index)?.as_blob()?;
    Body::unpack(at, bytes).ok_or_else(|| corrupt(index))
}

fn corrupt(index: usize) -> rusqlite::Error {
    rusqlite::Error::FromSqlConversionFailure(
        index,
        rusqlite::types::Type::Blob,
        "not a reading's body".into(),
    )
}

/// `value` as `n / 10^k`: the tag `k` and `n`, when some `n` gives exactly `value`.
fn scaled(value: f64) -> Option<(u8, i64)> {
    SCALES.iter().zip(0u8..).find_map(|(scale, tag)| {
        let n = (value * scale).round();
        if n.abs() > MAX_SCALED {
            return None;
        }
        let n = n as i64;
        // Decoded as it will be, compared by bits: -0.0 must not come back as 0.0.
        ((n as f64 / scale).to_bits() == value.to_bits()).then_some((tag, n))
    })
}

fn put_signed(out: &mut Vec<u8>, value: i64) {
    let mut buffer = [0u8; 10];
    let written = value.encode_var(&mut buffer);
    out.extend_from_slice(&buffer[..written]);
}

/// Reads a body front to back.
struct Reader<'a> {
    rest: &'a [u8],
    tags: [u8; TAG_BYTES],
    located: bool,
}

impl<'a> Reader<'a> {
    fn new(bytes: &'a [u8]) -> Option<Self> {
        let (&flags, rest) = bytes.split_first()?;
        let tags: [u8; TAG_BYTES] = rest.get(..TAG_BYTES)?.try_into().ok()?;
        Some(Self {
            rest: &rest[TAG_BYTES..],
            tags,
            located: flags & LOCATED != 0,
        })
    }

    fn signed(&mut self) -> Option<i64> {
        let (value, read) = i64::decode_var(self.rest)?;
        self.rest = &self.rest[read..];
        Some(value)
    }

    fn float(&mut self) -> Option<f64> {
        let bytes: [u8; 8] = self.rest.get(..8)?.try_into().ok()?;
        self.rest = &self.rest[8..];
        Some(f64::from_le_bytes(bytes))
    }

    fn values(&mut self) -> Option<Measurements> {
        let mut values = Measurements::default();
        for measure in Measure::ALL {
            let bit = measure.index() * 2;
            let tag = (self.tags[bit / 8] >> (bit % 8)) & 0b11;
            values[measure] = match SCALES.get(usize::from(tag)) {
                Some(scale) => self.signed()? as f64 / scale,
                None => self.float()?,
            };
        }
        Some(values)
    }
}

/// [`SUMS`]: the running sums, and whether a body failed to decode.
struct Sums;

impl Aggregate<Measurements, Vec<u8>> for Sums {
    fn init(&self, _: &mut Context<'_>) -> rusqlite::Result<Measurements> {
        Ok(Measurements::default())
    }

    fn step(&self, context: &mut Context<'_>, total: &mut Measurements) -> rusqlite::Result<()> {
        let bytes = match context.get_raw(0) {
            ValueRef::Blob(bytes) => bytes,
            other => {
                return Err(rusqlite::Error::InvalidFunctionParameterType(
                    0,
                    other.data_type(),
                ))
            }
        };
        *total += values(bytes).ok_or_else(|| corrupt(0))?;
        Ok(())
    }

    fn finalize(
        &self,
        _: &mut Context<'_>,
        total: Option<Measurements>,
    ) -> rusqlite::Result<Vec<u8>> {
        Ok(super::packed_sums::pack(&total.unwrap_or_default()).to_vec())
    }
}

/// Makes [`SUMS`] and [`PACK`] callable on `connection`.
pub(super) fn register(connection: &Connection) -> rusqlite::Result<()> {
    let flags = FunctionFlags::SQLITE_UTF8
        | FunctionFlags::SQLITE_DETERMINISTIC
        | FunctionFlags::SQLITE_INNOCUOUS;
    connection.create_aggregate_function(SUMS, 1, flags, Sums)?;
    // at, received_at, the values, pms, climate, lat, lon, location provider.
    let arguments = i32::try_from(2 + COUNT + 5).unwrap_or(i32::MAX);
    connection.create_scalar_function(PACK, arguments, flags, |context| {
        let at: i64 = context.get(0)?;
        let mut values = Measurements::default();
        for measure in Measure::ALL {
            values[measure] = context.get(2 + measure.index())?;
        }
        let next = 2 + COUNT;
        let location = match (
            context.get::<Option<f64>>(next + 2)?,
            context.get::<Option<f64>>(next + 3)?,
            context.get::<Option<i64>>(next + 4)?,
        ) {
            (Some(lat), Some(lon), Some(provider)) => Some((lat, lon, provider)),
            _ => None,
        };
        let body = Body {
            received_at: context.get(1)?,
            values,
            providers: (context.get(next)?, context.get(next + 1)?),
            location,
        };
        let mut out = Vec::with_capacity(32);
        body.pack_into(at, &mut out);
        Ok(out)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body(values: [f64; COUNT], location: Option<(f64, f64, i64)>) -> Body {
        Body {
            received_at: 1_790_000_000_123_000,
            values: Measurements::from_fn(|measure| values[measure.index()]),
            providers: (3, 140),
            location,
        }
    }

    fn round_trip(body: &Body) -> Vec<u8> {
        let at = 1_789_999_000_000_000;
        let mut packed = Vec::new();
        body.pack_into(at, &mut packed);
        assert_eq!(Body::unpack(at, &packed).as_ref(), Some(body));
        assert_eq!(values(&packed), Some(body.values));
        packed
    }

    #[test]
    fn values_with_up_to_two_decimals_take_a_few_bytes_each() {
        let packed = round_trip(&body([57.0, 23.4, 55.3, 12.0, 30.5, 41.25, 21.9], None));
        // Flags, tags, received_at (1,000 s late), seven values, two providers.
        assert!(
            packed.len() <= 1 + TAG_BYTES + 3 + 7 * 2 + 1 + 2,
            "{packed:?}"
        );
    }

    #[test]
    fn any_other_value_comes_back_bit_for_bit() {
        let odd = [
            -0.0,
            0.1 + 0.2,
            f64::MIN_POSITIVE,
            1e300,
            -123_456.789_012_345,
            9_007_199_254_740_993.0,
            1.0 / 3.0,
        ];
        let packed = round_trip(&body(odd, Some((52.520_008, -13.404_954, 7))));
        let unpacked = Body::unpack(1_789_999_000_000_000, &packed).expect("a body");
        for measure in Measure::ALL {
            assert_eq!(
                unpacked.values[measure].to_bits(),
                odd[measure.index()].to_bits()
            );
        }
    }

    #[test]
    fn the_receive_time_is_kept_to_the_millisecond() {
        let mut late = body([1.0; COUNT], None);
        late.received_at = 1_790_000_000_123_999;
        let mut packed = Vec::new();
        late.pack_into(1_789_999_000_000_001, &mut packed);
        let unpacked = Body::unpack(1_789_999_000_000_001, &packed).expect("a body");
        assert_eq!(unpacked.received_at, 1_790_000_000_123_000);
    }

    #[test]
    fn a_location_and_a_reading_received_before_its_time_come_back() {
        let mut early = body([1.0; COUNT], Some((-33.9, 151.2, 0)));
        early.received_at = 1_000;
        round_trip(&early);
    }

    #[test]
    fn bytes_that_end_early_are_no_body() {
        let mut packed = Vec::new();
        body(
            [57.0, 23.4, 55.3, 12.0, 30.5, 41.25, 21.9],
            Some((1.0, 2.0, 3)),
        )
        .pack_into(0, &mut packed);
        for end in 0..packed.len() {
            assert_eq!(Body::unpack(0, &packed[..end]), None, "cut at {end}");
        }
    }

    #[test]
    fn sql_sums_a_column_of_bodies() {
        let connection = Connection::open_in_memory().expect("in-memory database");
        register(&connection).expect("functions");
        super::super::packed_sums::register(&connection).expect("sums");
        let rows: Vec<Vec<u8>> = [[1.5; COUNT], [2.25; COUNT]]
            .into_iter()
            .map(|values| {
                let mut packed = Vec::new();
                body(values, None).pack_into(0, &mut packed);
                packed
            })
            .collect();
        connection
            .execute_batch("CREATE TABLE t (body BLOB)")
            .expect("table");
        for row in &rows {
            connection
                .execute("INSERT INTO t VALUES (?1)", [row])
                .expect("row");
        }
        let total = connection
            .query_row(&format!("SELECT {SUMS}(body) FROM t"), [], |row| {
                super::super::packed_sums::read(row, 0)
            })
            .expect("sums");
        assert_eq!(total, Measurements::from_fn(|_| 3.75));
        let empty = connection
            .query_row(
                &format!("SELECT {SUMS}(body) FROM t WHERE body IS NULL"),
                [],
                |row| super::super::packed_sums::read(row, 0),
            )
            .expect("no rows");
        assert_eq!(empty, Measurements::default());
    }
}

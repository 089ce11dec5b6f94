//! A rollup row's sums as one BLOB: one little-endian `f64` per measured value, in
//! [`Measure::ALL`] order (the rollup tables of `schema/sqlite/001_schema.sql`).
//!
//! Why one column and not one per value: a long read takes many rollup rows (a year of Berlin
//! days for 20 devices, about 15,000), and with a column per value most of its time went to
//! fetching them one by one — three calls into SQLite per column, nine columns per row. One BLOB
//! is one column, read as a slice of the page. The fold still adds in one statement: SQLite calls
//! [`ADD`] in its upsert and [`TOTAL`] in the `GROUP BY` that derives passed days, both
//! registered on every connection of the store ([`register`]).
//!
//! Sums of integral values (the AQI) stay exact as `f64` up to 2⁵³. A value added to
//! [`Measure::ALL`] later makes BLOBs longer: a shorter BLOB reads as zero for the values it
//! lacks, and adding one to a longer one keeps the longer length, so the rows already written
//! need no rewrite.

use rusqlite::functions::{Aggregate, Context, FunctionFlags};
use rusqlite::types::ValueRef;
use rusqlite::{Connection, Row};

use crate::domain::measure::COUNT;
use crate::domain::Measurements;

/// `airq_sums_add(a, b)`: the sums of two BLOBs.
pub(super) const ADD: &str = "airq_sums_add";
/// `airq_sums_total(sums)`: the aggregate sum of a column of BLOBs.
pub(super) const TOTAL: &str = "airq_sums_total";

/// Bytes of one sum.
const WIDTH: usize = std::mem::size_of::<f64>();

/// The BLOB of `sums`.
pub(super) fn pack(sums: &Measurements) -> [u8; COUNT * WIDTH] {
    let mut bytes = [0u8; COUNT * WIDTH];
    for ((_, sum), chunk) in sums.iter().zip(bytes.chunks_exact_mut(WIDTH)) {
        chunk.copy_from_slice(&sum.to_le_bytes());
    }
    bytes
}

/// The sums in a BLOB; values it is too short for are zero, bytes past them are ignored.
fn unpack(bytes: &[u8]) -> Measurements {
    let mut chunks = bytes.chunks_exact(WIDTH);
    Measurements::from_fn(|_| {
        chunks
            .next()
            .and_then(|chunk| chunk.try_into().ok())
            .map_or(0.0, f64::from_le_bytes)
    })
}

/// The sums in column `index` of a row.
pub(super) fn read(row: &Row<'_>, index: usize) -> rusqlite::Result<Measurements> {
    match row.get_ref(index)? {
        ValueRef::Blob(bytes) => Ok(unpack(bytes)),
        other => Err(rusqlite::Error::InvalidColumnType(
            index,
            "sums".to_owned(),
            other.data_type(),
        )),
    }
}

/// Adds the sums in `bytes` to `total`, which grows to their length when they are longer.
fn add_into(total: &mut Vec<u8>, bytes: &[u8]) {
    if total.len() < bytes.len() {
        total.resize(bytes.len() - bytes.len() % WIDTH, 0);
    }
    for (sum, addend) in total.chunks_exact_mut(WIDTH).zip(bytes.chunks_exact(WIDTH)) {
        let value = f64::from_le_bytes(sum.try_into().unwrap_or_default())
            + f64::from_le_bytes(addend.try_into().unwrap_or_default());
        sum.copy_from_slice(&value.to_le_bytes());
    }
}

/// Argument `index` of a call as a BLOB; anything else is a stored row the store did not write.
fn blob_argument<'a>(context: &'a Context<'_>, index: usize) -> rusqlite::Result<&'a [u8]> {
    match context.get_raw(index) {
        ValueRef::Blob(bytes) => Ok(bytes),
        other => Err(rusqlite::Error::InvalidFunctionParameterType(
            index,
            other.data_type(),
        )),
    }
}

/// [`TOTAL`]: the running sum is the BLOB being built.
struct Total;

impl Aggregate<Vec<u8>, Vec<u8>> for Total {
    fn init(&self, _: &mut Context<'_>) -> rusqlite::Result<Vec<u8>> {
        Ok(Vec::with_capacity(COUNT * WIDTH))
    }

    fn step(&self, context: &mut Context<'_>, total: &mut Vec<u8>) -> rusqlite::Result<()> {
        add_into(total, blob_argument(context, 0)?);
        Ok(())
    }

    fn finalize(&self, _: &mut Context<'_>, total: Option<Vec<u8>>) -> rusqlite::Result<Vec<u8>> {
        Ok(total.unwrap_or_else(|| pack(&Measurements::default()).to_vec()))
    }
}

/// Makes [`ADD`] and [`TOTAL`] callable on `connection`.
pub(super) fn register(connection: &Connection) -> rusqlite::Result<()> {
    let flags = FunctionFlags::SQLITE_UTF8
        | FunctionFlags::SQLITE_DETERMINISTIC
        | FunctionFlags::SQLITE_INNOCUOUS;
    connection.create_scalar_function(ADD, 2, flags, |context| {
        let mut total = blob_argument(context, 0)?.to_vec();
        add_into(&mut total, blob_argument(context, 1)?);
        Ok(total)
    })?;
    connection.create_aggregate_function(TOTAL, 1, flags, Total)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::Measure;

    fn sums(first: f64) -> Measurements {
        Measurements::from_fn(|measure| first + measure.index() as f64)
    }

    fn connection() -> Connection {
        let connection = Connection::open_in_memory().expect("in-memory database");
        register(&connection).expect("functions");
        connection
    }

    #[test]
    fn a_blob_reads_back_the_sums_it_was_packed_from() {
        let packed = pack(&sums(-2.5));
        assert_eq!(packed.len(), COUNT * 8);
        assert_eq!(unpack(&packed), sums(-2.5));
    }

    #[test]
    fn a_shorter_blob_reads_zero_for_the_values_it_lacks() {
        let packed = pack(&sums(1.0));
        let read = unpack(&packed[..2 * WIDTH]);
        assert_eq!(read[Measure::ALL[0]], 1.0);
        assert_eq!(read[Measure::ALL[1]], 2.0);
        assert_eq!(read[Measure::ALL[2]], 0.0);
    }

    #[test]
    fn sql_adds_two_blobs_value_by_value() {
        let added: Vec<u8> = connection()
            .query_row(
                &format!("SELECT {ADD}(?1, ?2)"),
                [pack(&sums(1.0)).to_vec(), pack(&sums(-0.5)).to_vec()],
                |row| row.get(0),
            )
            .expect("added");
        assert_eq!(
            unpack(&added),
            Measurements::from_fn(|m| 0.5 + 2.0 * m.index() as f64)
        );
    }

    #[test]
    fn adding_a_longer_blob_keeps_every_value_of_both() {
        let short = pack(&sums(1.0))[..WIDTH].to_vec();
        let added: Vec<u8> = connection()
            .query_row(
                &format!("SELECT {ADD}(?1, ?2)"),
                [short, pack(&sums(1.0)).to_vec()],
                |row| row.get(0),
            )
            .expect("added");
        let mut expected = sums(1.0);
        expected[Measure::ALL[0]] = 2.0;
        assert_eq!(unpack(&added), expected);
    }

    #[test]
    fn sql_totals_a_column_of_blobs_and_an_empty_one_is_zero() {
        let connection = connection();
        connection
            .execute_batch("CREATE TABLE t (sums BLOB NOT NULL)")
            .expect("table");
        let total = |connection: &Connection| -> Measurements {
            let bytes: Vec<u8> = connection
                .query_row(&format!("SELECT {TOTAL}(sums) FROM t"), [], |row| {
                    row.get(0)
                })
                .expect("total");
            unpack(&bytes)
        };
        assert_eq!(total(&connection), Measurements::default());
        for first in [1.0, 10.0, -3.0] {
            connection
                .execute("INSERT INTO t VALUES (?1)", [pack(&sums(first)).to_vec()])
                .expect("row");
        }
        assert_eq!(
            total(&connection),
            Measurements::from_fn(|m| 8.0 + 3.0 * m.index() as f64)
        );
    }

    #[test]
    fn a_sum_that_is_not_a_blob_is_refused() {
        let refused = connection().query_row(&format!("SELECT {ADD}(1, x'00')"), [], |row| {
            row.get::<_, Vec<u8>>(0)
        });
        assert!(refused.is_err());
    }
}

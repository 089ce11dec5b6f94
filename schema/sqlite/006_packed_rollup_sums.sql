-- Every rollup's sums as one BLOB per row instead of one column per value: one little-endian
-- f64 per measured value, in the order of the spec's responses (aqi, heat_index, humidity, pm1_0,
-- pm2_5, pm10_0, temperature). A long read takes thousands of rollup rows, and fetching nine
-- columns per row was most of its time; see src/store/sqlite/packed_sums.rs, which also defines
-- the functions used here and by the fold (airq_sums_pack, airq_sums_add, airq_sums_total).
--
-- Each table is rebuilt once, in key order, with its rows moved over; the script runs in one
-- transaction with its user_version, so a crash leaves either the old tables or the new ones.
CREATE TABLE rollups_15m_packed (
    device  BLOB    NOT NULL,
    slot    INTEGER NOT NULL,
    samples INTEGER NOT NULL,
    sums    BLOB    NOT NULL,
    PRIMARY KEY (device, slot)
) STRICT, WITHOUT ROWID;
INSERT INTO rollups_15m_packed
SELECT device, slot, samples, airq_sums_pack(aqi_sum, heat_index_sum, humidity_sum, pm1_0_sum,
                                             pm2_5_sum, pm10_0_sum, temperature_sum)
FROM rollups_15m ORDER BY device, slot;
DROP TABLE rollups_15m;
ALTER TABLE rollups_15m_packed RENAME TO rollups_15m;

CREATE TABLE rollups_1d_packed (
    device  BLOB    NOT NULL,
    slot    INTEGER NOT NULL,
    samples INTEGER NOT NULL,
    sums    BLOB    NOT NULL,
    PRIMARY KEY (device, slot)
) STRICT, WITHOUT ROWID;
INSERT INTO rollups_1d_packed
SELECT device, slot, samples, airq_sums_pack(aqi_sum, heat_index_sum, humidity_sum, pm1_0_sum,
                                             pm2_5_sum, pm10_0_sum, temperature_sum)
FROM rollups_1d ORDER BY device, slot;
DROP TABLE rollups_1d;
ALTER TABLE rollups_1d_packed RENAME TO rollups_1d;

CREATE TABLE rollups_hour_of_day_packed (
    device  BLOB    NOT NULL,
    slot    INTEGER NOT NULL,
    samples INTEGER NOT NULL,
    sums    BLOB    NOT NULL,
    PRIMARY KEY (device, slot)
) STRICT, WITHOUT ROWID;
INSERT INTO rollups_hour_of_day_packed
SELECT device, slot, samples, airq_sums_pack(aqi_sum, heat_index_sum, humidity_sum, pm1_0_sum,
                                             pm2_5_sum, pm10_0_sum, temperature_sum)
FROM rollups_hour_of_day ORDER BY device, slot;
DROP TABLE rollups_hour_of_day;
ALTER TABLE rollups_hour_of_day_packed RENAME TO rollups_hour_of_day;

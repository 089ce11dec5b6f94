-- Hourly sums ordered by hour of day, then day: `slot` is hour_of_day * 2^32 + UTC day. A zone
-- whose midnight is not UTC's needs the same hours of every day at the edges of its days (22:00
-- and 23:00 UTC for Berlin); in this order a year of them is one contiguous range per hour and
-- device instead of one range per day.
--
-- Only for past days: the table holds exactly the UTC days up to the counter
-- `hour_of_day_through` (none while it is missing), which trails the newest folded reading by a
-- day. The store derives a day from its quarter hours once it has passed — in the fold, and at
-- start for databases written before this table (`derive_passed_days` in
-- `src/store/sqlite/rollup.rs`) — and the fold keeps the days already derived like the other
-- rollups, so live uploads, which all land in the current day, never pay for one more rollup row
-- (measured: kept for every day, it cost 13-24 % of single-upload throughput).
CREATE TABLE IF NOT EXISTS rollups_hour_of_day (
    device          BLOB    NOT NULL,
    slot            INTEGER NOT NULL,
    samples         INTEGER NOT NULL,
    aqi_sum         INTEGER NOT NULL,
    pm1_0_sum       REAL    NOT NULL,
    pm2_5_sum       REAL    NOT NULL,
    pm10_0_sum      REAL    NOT NULL,
    temperature_sum REAL    NOT NULL,
    heat_index_sum  REAL    NOT NULL,
    humidity_sum    REAL    NOT NULL,
    PRIMARY KEY (device, slot)
) STRICT, WITHOUT ROWID;

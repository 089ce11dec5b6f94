-- Owner rollups (issue 36): the device views (004, 005) summed per owner, so an owner-wide
-- timeline reads one row per period however many devices the owner has (10,000 devices made
-- 120,000 hour rows for a day of hours). Each is a materialized view of the device view of its
-- grain, refreshed after each of that view's commits; the rows of devices an owner deleted are
-- taken away through the device views (src/store/questdb/reading_store.rs), and periods the
-- owner views may not hold yet are read from the device views
-- (src/store/questdb/visibility.rs). Names: the table's with `_o15m`, `_o1h` and `_o1d`.
CREATE MATERIALIZED VIEW IF NOT EXISTS {table}_o15m AS (
    SELECT at, owner, sum(readings) readings, sum(aqi) aqi, sum(pm1_0) pm1_0, sum(pm2_5) pm2_5,
        sum(pm10_0) pm10_0, sum(temperature) temperature, sum(heat_index) heat_index,
        sum(humidity) humidity
    FROM {table}_15m SAMPLE BY 15m
) PARTITION BY MONTH;

CREATE MATERIALIZED VIEW IF NOT EXISTS {table}_o1h AS (
    SELECT at, owner, sum(readings) readings, sum(aqi) aqi, sum(pm1_0) pm1_0, sum(pm2_5) pm2_5,
        sum(pm10_0) pm10_0, sum(temperature) temperature, sum(heat_index) heat_index,
        sum(humidity) humidity
    FROM {table}_1h SAMPLE BY 1h
) PARTITION BY YEAR;

CREATE MATERIALIZED VIEW IF NOT EXISTS {table}_o1d AS (
    SELECT at, owner, sum(readings) readings, sum(aqi) aqi, sum(pm1_0) pm1_0, sum(pm2_5) pm2_5,
        sum(pm10_0) pm10_0, sum(temperature) temperature, sum(heat_index) heat_index,
        sum(humidity) humidity
    FROM {table}_1d SAMPLE BY 1d
) PARTITION BY YEAR;

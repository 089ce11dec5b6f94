-- Hour and day rollups (issue 36): the quarter-hour view (004) summed per device and UTC hour,
-- and per device and UTC day, each a materialized view of it. A year of a device is 8,784 hour
-- rows or 366 day rows instead of 35,136 quarter hours: timelines and custom ranges take whole
-- UTC days from the day view and the edges of a zone's days from the hour view
-- (src/store/questdb/view_ranges.rs). Both derive a period once it has passed (PERIOD (SAMPLE BY
-- INTERVAL)), and again when a late reading changes a passed one, so live uploads do not pay for
-- them; `refresh_period_hi` says how far they derived. Names: the table's with `_1h` and `_1d`.
CREATE MATERIALIZED VIEW IF NOT EXISTS {table}_1h REFRESH IMMEDIATE PERIOD (SAMPLE BY INTERVAL) AS (
    SELECT at, device, owner, sum(readings) readings, sum(aqi) aqi, sum(pm1_0) pm1_0, sum(pm2_5) pm2_5,
        sum(pm10_0) pm10_0, sum(temperature) temperature, sum(heat_index) heat_index,
        sum(humidity) humidity
    FROM {table}_15m SAMPLE BY 1h
) PARTITION BY MONTH;

CREATE MATERIALIZED VIEW IF NOT EXISTS {table}_1d REFRESH IMMEDIATE PERIOD (SAMPLE BY INTERVAL) AS (
    SELECT at, device, owner, sum(readings) readings, sum(aqi) aqi, sum(pm1_0) pm1_0, sum(pm2_5) pm2_5,
        sum(pm10_0) pm10_0, sum(temperature) temperature, sum(heat_index) heat_index,
        sum(humidity) humidity
    FROM {table}_15m SAMPLE BY 1d
) PARTITION BY YEAR;

-- Hourly sums ordered by hour of day, then day: `slot` is hour_of_day * 2^32 + UTC day. A zone
-- whose midnight is not UTC's needs the same hours of every day at the edges of its days (22:00
-- and 23:00 UTC for Berlin); in this order a year of them is one contiguous range per hour and
-- device instead of one range per day. Kept by the fold like the other rollups; derived once
-- here from the quarter hours of databases written before it (a no-op once it holds anything).
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

INSERT INTO rollups_hour_of_day (device, slot, samples, aqi_sum, pm1_0_sum, pm2_5_sum,
                                 pm10_0_sum, temperature_sum, heat_index_sum, humidity_sum)
SELECT device, ((slot / 4) % 24) * 4294967296 + slot / 96, sum(samples), sum(aqi_sum),
       sum(pm1_0_sum), sum(pm2_5_sum), sum(pm10_0_sum), sum(temperature_sum),
       sum(heat_index_sum), sum(humidity_sum)
FROM rollups_15m
WHERE NOT EXISTS (SELECT 1 FROM rollups_hour_of_day)
GROUP BY device, slot / 4;

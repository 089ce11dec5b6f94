-- Hourly sums ordered by hour of day, then day: `slot` is hour_of_day * 2^32 + UTC day. A zone
-- whose midnight is not UTC's needs the same hours of every day at the edges of its days (22:00
-- and 23:00 UTC for Berlin); in this order a year of them is one contiguous range per hour and
-- device instead of one range per day.
--
-- Only for past days: the table holds exactly the UTC days up to the counter
-- `hour_of_day_through`, which trails the newest folded reading by a day. The fold derives a day
-- from its quarter hours once it passes (one statement a day) and keeps the days already derived
-- like the other rollups, so live uploads, which all land in the current day, never pay for one
-- more rollup row (measured: kept for every day, it cost 13-24 % of single-upload throughput).
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

-- Databases written before it: derive every day but the newest from the quarter hours. Both
-- statements do nothing once the counter or the table hold anything, so running this again
-- changes nothing.
INSERT INTO counters (name, value)
SELECT 'hour_of_day_through', (SELECT coalesce(max(slot) / 96 - 1, -1) FROM rollups_15m)
WHERE NOT EXISTS (SELECT 1 FROM counters WHERE name = 'hour_of_day_through');

INSERT INTO rollups_hour_of_day (device, slot, samples, aqi_sum, pm1_0_sum, pm2_5_sum,
                                 pm10_0_sum, temperature_sum, heat_index_sum, humidity_sum)
SELECT device, ((slot / 4) % 24) * 4294967296 + slot / 96, sum(samples), sum(aqi_sum),
       sum(pm1_0_sum), sum(pm2_5_sum), sum(pm10_0_sum), sum(temperature_sum),
       sum(heat_index_sum), sum(humidity_sum)
FROM rollups_15m
WHERE slot / 96 <= (SELECT value FROM counters WHERE name = 'hour_of_day_through')
  AND NOT EXISTS (SELECT 1 FROM rollups_hour_of_day)
GROUP BY device, slot / 4;

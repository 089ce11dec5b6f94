-- Databases written before the day rollups existed: derive them once from the quarter hours
-- (96 quarter hours per UTC day). A no-op as soon as rollups_1d holds anything, so every start
-- may run it.
INSERT INTO rollups_1d (device, slot, samples, aqi_sum, pm1_0_sum, pm2_5_sum, pm10_0_sum,
                        temperature_sum, heat_index_sum, humidity_sum)
SELECT device, slot / 96, sum(samples), sum(aqi_sum), sum(pm1_0_sum), sum(pm2_5_sum),
       sum(pm10_0_sum), sum(temperature_sum), sum(heat_index_sum), sum(humidity_sum)
FROM rollups_15m
WHERE NOT EXISTS (SELECT 1 FROM rollups_1d)
GROUP BY device, slot / 96;

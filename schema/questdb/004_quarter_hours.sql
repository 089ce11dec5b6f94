-- Quarter-hour rollups (issue 36): per device (with its owner, 003) and UTC quarter hour, the
-- readings' count and the sum of each value, kept by QuestDB itself as a materialized view (QuestDB 9.x), refreshed after
-- each commit to `{table}` (deduplicated replacements included). Timelines and custom ranges sum
-- these rows instead of raw readings: every zone's hours, days and months are unions of UTC
-- quarter hours. The view keeps its rows when the raw table's TTL drops a partition (raw
-- retention), so timelines answer past it. Its name is the table's with `_15m` appended.
CREATE MATERIALIZED VIEW IF NOT EXISTS {table}_15m AS (
    SELECT at, device, owner, count() readings, sum(aqi) aqi, sum(pm1_0) pm1_0, sum(pm2_5) pm2_5,
        sum(pm10_0) pm10_0, sum(temperature) temperature, sum(heat_index) heat_index,
        sum(humidity) humidity
    FROM {table} SAMPLE BY 15m
) PARTITION BY DAY;

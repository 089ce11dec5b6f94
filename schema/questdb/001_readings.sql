-- Readings of the production deployment, applied at start over PG wire; idempotent.
-- `{table}` is the configured table name (AIRQ_QUESTDB_TABLE, default `readings`).
-- Designated timestamp `at` (measured_at, else receive time); daily partitions; WAL, so ILP
-- over HTTP commits a flush as one transaction; deduplication on (at, id), so a retried flush
-- whose first attempt did land never duplicates a row.
CREATE TABLE IF NOT EXISTS {table} (
    device               SYMBOL CAPACITY 262144 CACHE INDEX,
    id                   LONG,
    aqi                  LONG,
    pm1_0                DOUBLE,
    pm2_5                DOUBLE,
    pm10_0               DOUBLE,
    temperature          DOUBLE,
    heat_index           DOUBLE,
    humidity             DOUBLE,
    pms_provider         SYMBOL,
    temperature_provider SYMBOL,
    lat                  DOUBLE,
    lon                  DOUBLE,
    location_provider    SYMBOL,
    at                   TIMESTAMP
) TIMESTAMP(at) PARTITION BY DAY WAL DEDUP UPSERT KEYS(at, id);

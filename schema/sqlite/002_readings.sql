-- Readings of the embedded store. Applied at every start; every statement is idempotent.
-- Devices are referenced by their UUID as 16 bytes; times are microseconds since the Unix epoch.

-- Raw samples: the source of current snapshots.
CREATE TABLE IF NOT EXISTS readings (
    id                   INTEGER PRIMARY KEY,          -- receipt id, < 2^53
    device               BLOB    NOT NULL,
    at                   INTEGER NOT NULL,             -- measured_at, else receive time
    received_at          INTEGER NOT NULL,
    aqi                  INTEGER NOT NULL,
    pm1_0                REAL    NOT NULL,
    pm2_5                REAL    NOT NULL,
    pm10_0               REAL    NOT NULL,
    temperature          REAL    NOT NULL,
    heat_index           REAL    NOT NULL,
    humidity             REAL    NOT NULL,
    pms_provider         TEXT    NOT NULL,
    temperature_provider TEXT    NOT NULL,
    lat                  REAL,
    lon                  REAL,
    location_provider    TEXT
) STRICT;

CREATE INDEX IF NOT EXISTS readings_by_device_time ON readings (device, at);

-- Sums per device and 15-minute slot (slot = floor(epoch seconds / 900)), kept in the same
-- transaction as the raw rows. Every zone offset is a multiple of 15 minutes, so calendar buckets
-- of any zone are exact unions of slots.
CREATE TABLE IF NOT EXISTS rollups_15m (
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

-- The same sums per device and UTC day (slot = floor(epoch seconds / 86400)): the whole days
-- inside a long bucket come from here, its edges from the quarter hours.
CREATE TABLE IF NOT EXISTS rollups_1d (
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

-- Per device: the latest sample's time, and the latest located sample (the map's source).
CREATE TABLE IF NOT EXISTS device_latest (
    device      BLOB    PRIMARY KEY,
    last_seen   INTEGER NOT NULL,
    located_at  INTEGER,
    lat         REAL,
    lon         REAL,
    provider    TEXT,
    aqi         INTEGER,
    pm2_5       REAL,
    temperature REAL
) STRICT, WITHOUT ROWID;

-- The next receipt id, so ids are never reused even after readings are deleted.
CREATE TABLE IF NOT EXISTS counters (
    name  TEXT    PRIMARY KEY,
    value INTEGER NOT NULL
) STRICT, WITHOUT ROWID;

-- The embedded store's database (`airq.db`), format 1. Applied once, in one transaction with
-- `PRAGMA user_version`; a later format adds a script of its own after this one (see
-- src/store/sqlite/mod.rs and the README's "Upgrades").
--
-- Devices are referenced by their UUID as 16 bytes; times are microseconds since the Unix epoch.

-- Device metadata.
CREATE TABLE devices (
    id                 TEXT    PRIMARY KEY,          -- UUID, hyphenated lower case
    device_id          TEXT    NOT NULL UNIQUE,      -- dev_ + 24 base62
    owner              TEXT    NOT NULL,             -- sub of the owner's token
    name               TEXT    NOT NULL,
    is_public          INTEGER NOT NULL,
    is_location_public INTEGER NOT NULL,
    is_outdoor         INTEGER NOT NULL,
    key_hash           BLOB    NOT NULL,             -- blake3 of the device key; never the key
    created_at         INTEGER NOT NULL,             -- microseconds since the Unix epoch, UTC
    updated_at         INTEGER NOT NULL
) STRICT;

CREATE INDEX devices_by_owner ON devices (owner, created_at, id);

-- Raw samples, folded in from the ingestion log (`ingest/`) behind the uploads: the source of
-- current snapshots and exports. The rowid is the receipt id, so a fold appends to the table's
-- last pages.
CREATE TABLE readings (
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
    location_provider    TEXT,
    -- 1 when the reading carried `measured_at`: then (device, at) is its key, and a later
    -- reading with the same key replaces it (the fold deletes the earlier row).
    keyed                INTEGER NOT NULL DEFAULT 0
) STRICT;

-- The device index of folded readings: `dedup` is 0 for a keyed reading (one row per key) and
-- the receipt id otherwise (always a row of its own).
CREATE TABLE readings_by_device (
    device BLOB    NOT NULL,
    at     INTEGER NOT NULL,
    dedup  INTEGER NOT NULL,
    id     INTEGER NOT NULL,
    PRIMARY KEY (device, at, dedup)
) STRICT, WITHOUT ROWID;

-- Rollups: sums per device and slot, kept by the fold in the same transaction as the raw rows.
-- `sums` is one little-endian f64 per measured value, in the order of the spec's responses (aqi,
-- heat_index, humidity, pm1_0, pm2_5, pm10_0, temperature): a long read takes thousands of
-- rollup rows, and fetching nine columns per row was most of its time (see
-- src/store/sqlite/packed_sums.rs, which defines airq_sums_add and airq_sums_total).
--
-- Per 15-minute slot (slot = floor(epoch seconds / 900)). Every zone offset is a multiple of 15
-- minutes, so calendar buckets of any zone are exact unions of slots.
CREATE TABLE rollups_15m (
    device  BLOB    NOT NULL,
    slot    INTEGER NOT NULL,
    samples INTEGER NOT NULL,
    sums    BLOB    NOT NULL,
    PRIMARY KEY (device, slot)
) STRICT, WITHOUT ROWID;

-- Per UTC day (slot = floor(epoch seconds / 86400)): the whole days inside a long bucket come
-- from here, its edges from the quarter hours.
CREATE TABLE rollups_1d (
    device  BLOB    NOT NULL,
    slot    INTEGER NOT NULL,
    samples INTEGER NOT NULL,
    sums    BLOB    NOT NULL,
    PRIMARY KEY (device, slot)
) STRICT, WITHOUT ROWID;

-- Hourly sums ordered by hour of day, then day: `slot` is hour_of_day * 2^32 + UTC day. A zone
-- whose midnight is not UTC's needs the same hours of every day at the edges of its days (22:00
-- and 23:00 UTC for Berlin); in this order a year of them is one contiguous range per hour and
-- device instead of one range per day.
--
-- Only for past days: the table holds exactly the UTC days up to the counter
-- `hour_of_day_through` (none while it is missing), which trails the newest folded reading by a
-- day. The store derives a day from its quarter hours once it has passed (`derive_passed_days`
-- in src/store/sqlite/rollup.rs: in the fold, and at start for days that passed while the server
-- was stopped) and the fold keeps the days already derived like the other rollups, so live
-- uploads, which all land in the current day, never pay for one more rollup row (measured: kept
-- for every day, it cost 13-24 % of single-upload throughput).
CREATE TABLE rollups_hour_of_day (
    device  BLOB    NOT NULL,
    slot    INTEGER NOT NULL,
    samples INTEGER NOT NULL,
    sums    BLOB    NOT NULL,
    PRIMARY KEY (device, slot)
) STRICT, WITHOUT ROWID;

-- Per device: the latest sample's time, and the latest located sample (the map's source).
CREATE TABLE device_latest (
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

-- Named counters: `folded_id`, the fold's watermark (the highest receipt id folded, moved in the
-- same transaction as what the fold derived; it never goes down, so receipt ids are not reused
-- after readings are deleted), and `hour_of_day_through`.
CREATE TABLE counters (
    name  TEXT    PRIMARY KEY,
    value INTEGER NOT NULL
) STRICT, WITHOUT ROWID;

-- Nothing is folded yet.
INSERT INTO counters (name, value) VALUES ('folded_id', 0);

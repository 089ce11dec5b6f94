-- Compact readings: a raw reading's values, sensor models, location and receive time become one
-- packed BLOB (src/store/sqlite/packed_reading.rs), devices in the raw table and its index a
-- small number instead of their 16 bytes, sensor models and location providers numbers of a
-- dictionary. Measured on 30 days of one-minute readings: 163.5 bytes per reading at rest
-- before (raw table 116, device index 39, rollups 8); see bench/RESULTS.md for after.
--
-- A database of the earlier format is converted here, in this script's one transaction: the
-- pages the old tables held are free afterwards and taken by later writes (the file does not
-- shrink by itself; `VACUUM` on a stopped server's `airq.db` gives them back).

-- A device's number in `readings` and `readings_by_device`; never reused (AUTOINCREMENT), so a
-- number cannot name a later device while rows of a deleted one remain. The fold numbers a
-- device at its first reading; the device's deletion deletes its number with its readings.
CREATE TABLE device_numbers (
    number INTEGER PRIMARY KEY AUTOINCREMENT,
    device BLOB    NOT NULL UNIQUE               -- UUID, 16 bytes
) STRICT;

-- Sensor models and location providers by number: a fleet names a handful.
CREATE TABLE providers (
    number INTEGER PRIMARY KEY,
    name   TEXT    NOT NULL UNIQUE
) STRICT;

INSERT INTO device_numbers (device) SELECT device FROM readings_by_device GROUP BY device;

INSERT OR IGNORE INTO providers (name)
    SELECT pms_provider FROM readings
    UNION SELECT temperature_provider FROM readings
    UNION SELECT location_provider FROM readings WHERE location_provider IS NOT NULL;

-- The raw rows: the rowid is the receipt id, so a fold still appends to the table's last pages.
CREATE TABLE readings_compact (
    id     INTEGER PRIMARY KEY,                 -- receipt id, < 2^53
    device INTEGER NOT NULL,                    -- device_numbers.number
    at     INTEGER NOT NULL,                    -- measured_at, else receive time
    -- 1 when the reading carried `measured_at`: then (device, at) is its key, and a later
    -- reading with the same key replaces it (the fold deletes the earlier row).
    keyed  INTEGER NOT NULL,
    body   BLOB    NOT NULL                     -- everything else, packed
) STRICT;

INSERT INTO readings_compact (id, device, at, keyed, body)
    SELECT r.id, n.number, r.at, r.keyed,
           airq_reading_pack(r.at, r.received_at, r.aqi, r.heat_index, r.humidity, r.pm1_0,
                             r.pm2_5, r.pm10_0, r.temperature, pms.number, climate.number,
                             r.lat, r.lon, location.number)
    FROM readings r
    JOIN device_numbers n ON n.device = r.device
    JOIN providers pms ON pms.name = r.pms_provider
    JOIN providers climate ON climate.name = r.temperature_provider
    LEFT JOIN providers location ON location.name = r.location_provider
    ORDER BY r.id;

-- The device index of folded readings: `dedup` is 0 for a keyed reading (one row per key) and
-- the receipt id otherwise (always a row of its own).
CREATE TABLE readings_by_device_compact (
    device INTEGER NOT NULL,                    -- device_numbers.number
    at     INTEGER NOT NULL,
    dedup  INTEGER NOT NULL,
    id     INTEGER NOT NULL,
    PRIMARY KEY (device, at, dedup)
) STRICT, WITHOUT ROWID;

INSERT INTO readings_by_device_compact (device, at, dedup, id)
    SELECT n.number, b.at, b.dedup, b.id
    FROM readings_by_device b JOIN device_numbers n ON n.device = b.device
    ORDER BY n.number, b.at, b.dedup;

DROP TABLE readings;
DROP TABLE readings_by_device;
ALTER TABLE readings_compact RENAME TO readings;
ALTER TABLE readings_by_device_compact RENAME TO readings_by_device;

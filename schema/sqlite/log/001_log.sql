-- The ingestion log (`ingest.db`, beside `airq.db`): where an upload's commit appends its raw
-- rows. A file of its own, so appends never wait for the fold, which holds `airq.db`'s write lock
-- while it folds a chunk. Applied once (PRAGMA user_version), in one transaction.

-- The same columns as `readings` in airq.db: the fold copies rows past the `folded_id` counter
-- there, with everything it derives, then deletes them here.
CREATE TABLE IF NOT EXISTS log (
    id                   INTEGER PRIMARY KEY,          -- receipt id
    device               BLOB    NOT NULL,
    at                   INTEGER NOT NULL,
    received_at          INTEGER NOT NULL,
    keyed                INTEGER NOT NULL,
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

-- The next receipt id where a deleted device took the highest ids away (ids are never reused,
-- even when the rows of a deleted device left the end of both tables empty). Appends do not
-- write it: at start the next id is past every id in both files and the fold's watermark.
CREATE TABLE IF NOT EXISTS counters (
    name  TEXT    PRIMARY KEY,
    value INTEGER NOT NULL
) STRICT;

-- Append first, index behind. Applied once (PRAGMA user_version), in one transaction.
--
-- An upload's commit only appends to `readings` (its rowid is the receipt id, so the append
-- touches the table's last pages only). Everything device-keyed is folded in behind, from the
-- rows past the `folded_id` counter: the device index below, the rollups and `device_latest`.

-- 1 when the reading carried `measured_at`: then (device, at) is its key, and a later reading
-- with the same key replaces it (the fold deletes the earlier row).
ALTER TABLE readings ADD COLUMN keyed INTEGER NOT NULL DEFAULT 0;

-- The device index of folded readings: `dedup` is 0 for a keyed reading (one row per key) and
-- the receipt id otherwise (always a row of its own).
CREATE TABLE IF NOT EXISTS readings_by_device (
    device BLOB    NOT NULL,
    at     INTEGER NOT NULL,
    dedup  INTEGER NOT NULL,
    id     INTEGER NOT NULL,
    PRIMARY KEY (device, at, dedup)
) STRICT, WITHOUT ROWID;

INSERT INTO readings_by_device (device, at, dedup, id) SELECT device, at, id, id FROM readings;

DROP INDEX IF EXISTS readings_by_device_time;

-- Everything stored so far is folded already.
INSERT INTO counters (name, value) SELECT 'folded_id', coalesce(max(id), 0) FROM readings WHERE true
ON CONFLICT (name) DO NOTHING;

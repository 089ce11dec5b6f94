-- Pooled rollups: the rollups of a whole set of devices (an owner's fleet) summed per slot, so an
-- owner-wide timeline or custom range of 10,000 devices reads as many rows as one device's
-- (src/store/sqlite/pooled.rs). A set is made at the first such read of a large set, from the
-- devices' rollups, and from then on kept by the fold beside them, in the same transactions.

-- A pooled set: `key` is blake3 over its devices' 16-byte UUIDs in ascending order.
CREATE TABLE pooled_sets (
    number  INTEGER PRIMARY KEY AUTOINCREMENT,
    key     BLOB    NOT NULL UNIQUE,
    devices INTEGER NOT NULL,                   -- how many
    created INTEGER NOT NULL                    -- microseconds since the Unix epoch
) STRICT;

-- Which sets a device's readings are pooled into.
CREATE TABLE pooled_members (
    device BLOB    NOT NULL,                    -- UUID, 16 bytes
    pool   INTEGER NOT NULL,                    -- pooled_sets.number
    PRIMARY KEY (device, pool)
) STRICT, WITHOUT ROWID;

-- The sums of the set's devices per slot, as in the rollups of the same name without `pooled_`
-- (slots and packed sums alike).
CREATE TABLE pooled_15m (
    pool    INTEGER NOT NULL,
    slot    INTEGER NOT NULL,
    samples INTEGER NOT NULL,
    sums    BLOB    NOT NULL,
    PRIMARY KEY (pool, slot)
) STRICT, WITHOUT ROWID;

CREATE TABLE pooled_1d (
    pool    INTEGER NOT NULL,
    slot    INTEGER NOT NULL,
    samples INTEGER NOT NULL,
    sums    BLOB    NOT NULL,
    PRIMARY KEY (pool, slot)
) STRICT, WITHOUT ROWID;

CREATE TABLE pooled_hour_of_day (
    pool    INTEGER NOT NULL,
    slot    INTEGER NOT NULL,
    samples INTEGER NOT NULL,
    sums    BLOB    NOT NULL,
    PRIMARY KEY (pool, slot)
) STRICT, WITHOUT ROWID;

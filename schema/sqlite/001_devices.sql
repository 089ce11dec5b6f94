-- Device metadata of the embedded store. Applied at every start; every statement is idempotent.
CREATE TABLE IF NOT EXISTS devices (
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

CREATE INDEX IF NOT EXISTS devices_by_owner ON devices (owner, created_at, id);

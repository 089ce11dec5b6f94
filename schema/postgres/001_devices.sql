-- Device metadata of the production deployment. Applied at every start by every process, under a
-- transaction-scoped advisory lock, so concurrent starts apply it one after the other; every
-- statement is idempotent.
CREATE TABLE IF NOT EXISTS devices (
    id                 uuid        PRIMARY KEY,
    device_id          text        NOT NULL UNIQUE,      -- dev_ + 24 base62
    owner              text        NOT NULL,             -- sub of the owner's token
    name               text        NOT NULL,
    is_public          boolean     NOT NULL,
    is_location_public boolean     NOT NULL,
    is_outdoor         boolean     NOT NULL,
    key_hash           bytea       NOT NULL,             -- blake3 of the device key; never the key
    created_at         timestamptz NOT NULL,
    updated_at         timestamptz NOT NULL
);

CREATE INDEX IF NOT EXISTS devices_by_owner ON devices (owner, created_at, id);
CREATE INDEX IF NOT EXISTS devices_on_map ON devices (created_at, id) WHERE is_public AND is_location_public;

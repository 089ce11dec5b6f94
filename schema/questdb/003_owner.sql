-- Whose each reading is (issue 36): the device's owner at the upload (a key hashed from the
-- owner's id, src/store/questdb/owners.rs), a symbol on every row
-- written from now on and carried into the views (004, 005), so an owner's fleet is read by
-- one symbol instead of an `IN` list naming every device (10,000 devices made a 380 KB query
-- whose list QuestDB parsed and resolved at every execution). Indexed, so an owner's latest
-- reading is found without going through other owners' rows. Rows written before this column
-- existed have none: airq records at its start when it came (`{table}_since`,
-- src/store/questdb/owners.rs) and reads periods before that device by device.
ALTER TABLE {table} ADD COLUMN owner SYMBOL CAPACITY 65536 CACHE INDEX;

-- Devices deleted while their rows stay (QuestDB cannot delete rows): an owner's reads leave
-- out the rows of the devices recorded here that are no longer the owner's. Not a WAL table, so
-- a deletion is readable as soon as its insert returns.
CREATE TABLE IF NOT EXISTS {table}_gone (
    owner  SYMBOL CAPACITY 65536 CACHE,
    device SYMBOL CAPACITY 65536 CACHE,
    at     TIMESTAMP
) TIMESTAMP(at) PARTITION BY NONE BYPASS WAL;

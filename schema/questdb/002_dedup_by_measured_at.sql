-- Retries never duplicate (issue 12): a reading that carries `measured_at` is keyed by
-- (device, measured_at); one without it by its receipt id. `dedup` is 0 for the former and the
-- receipt id for the latter, so upserting on (at, device, dedup) replaces a re-sent reading and
-- still collapses a retried flush of unkeyed rows. Statements are separated by blank lines. An
-- `ADD COLUMN` runs only when the column is missing (QuestDB 8.1 has no `IF NOT EXISTS` there);
-- the rest is idempotent. Rows written before this change keep a null `dedup`: they never collide.
ALTER TABLE {table} ADD COLUMN dedup LONG;

ALTER TABLE {table} DEDUP ENABLE UPSERT KEYS(at, device, dedup);

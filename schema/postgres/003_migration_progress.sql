-- Progress of `airq migrate` (src/migrate/): for each source data directory and QuestDB table it
-- copies readings into, the receipt id through which every reading is in QuestDB, moved after
-- each batch QuestDB acknowledged, so a run that was stopped resumes there. The copy is
-- idempotent without it (QuestDB deduplicates on (at, device, dedup)); it only saves the work.
CREATE TABLE IF NOT EXISTS migration_progress (
    source            text        PRIMARY KEY,  -- data dir, QuestDB table and a hash of its URL
    readings_through  bigint      NOT NULL,
    updated_at        timestamptz NOT NULL
);

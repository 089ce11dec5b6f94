-- Receipt ids of the QuestDB deployment: every process takes blocks of 4096 ids from this
-- sequence, so ids are unique across processes and stay below 2^53 (exact in JavaScript).
CREATE SEQUENCE IF NOT EXISTS reading_ids
    AS bigint INCREMENT BY 4096 MINVALUE 1 MAXVALUE 9007199254740991 START WITH 1 NO CYCLE;

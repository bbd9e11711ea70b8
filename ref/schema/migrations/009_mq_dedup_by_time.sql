-- 009_mq_dedup_by_time: the consumers' dedup rows by their write time.
-- Retention trims mq_dedup rows past the dedup age (ref/retention): with
-- this index the trim reads the range of expired entries, a batch at a
-- time, instead of walking the whole table on every pass, a cost that grew
-- with the table (RESULTS.md). One more index entry per dedup row on the
-- write path, appended at the index's end (rows are written in time order).
-- Not "IF NOT EXISTS" (MySQL 8 has none for ADD KEY): Migrate takes a
-- "Duplicate key name" from a concurrent process as already applied.
ALTER TABLE mq_dedup ADD KEY idx_created (created_at);

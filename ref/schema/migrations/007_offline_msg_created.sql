-- 007_offline_msg_created: the inbox by its write time. The reconciler's
-- reverse and push passes look at the rows written in their window (the
-- last hour); without this index they walked the whole of offline_msg by
-- its primary key every minute, a cost that grew with the table and not
-- with the window (RESULTS.md). One more index entry per inbox row on the
-- send path; InnoDB appends it, since rows are written in time order.
-- Not "IF NOT EXISTS" (MySQL 8 has none for ADD KEY): Migrate takes a
-- "Duplicate key name" from a concurrent process as already applied.
ALTER TABLE offline_msg ADD KEY idx_created (created_at);

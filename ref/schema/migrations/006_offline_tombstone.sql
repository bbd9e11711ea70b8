-- 006_offline_tombstone: what retention deleted while it may still be looked
-- for. A row retention deletes (ref/retention) while it is younger than the
-- tombstone age leaves its (uid, msg_id) here, in the deleting transaction,
-- so that the forward repair (ref/reconcile) tells a row that was delivered
-- and deleted apart from one that was never written, and does not deliver a
-- message a second time at a new seq. Tombstones past the age are trimmed by
-- retention's passes; beyond it the repair does not look (its horizon).
CREATE TABLE IF NOT EXISTS offline_tombstone (
  uid        BIGINT UNSIGNED NOT NULL COMMENT '收件人',
  msg_id     BIGINT UNSIGNED NOT NULL,
  seq        BIGINT UNSIGNED NOT NULL COMMENT 'the seq the deleted row had',
  created_at DATETIME(3)     NOT NULL COMMENT 'offline_msg.created_at of the deleted row',
  deleted_at DATETIME(3)     NOT NULL COMMENT 'the retention pass that deleted it',
  PRIMARY KEY (uid, msg_id),
  KEY idx_created (created_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COMMENT='retention 删除的收件箱行（墓碑）';

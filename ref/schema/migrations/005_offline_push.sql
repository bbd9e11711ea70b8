-- 005_offline_push: push reconciliation (seed 003 推送对账): an inbox row that
-- no device has pulled N minutes after it was written becomes one record here,
-- to be handed to a vendor push service. Keyed by (uid, msg_id), so a re-run
-- of reconciliation adds nothing twice.
CREATE TABLE IF NOT EXISTS offline_push (
  uid            BIGINT UNSIGNED  NOT NULL COMMENT '收件人',
  msg_id         BIGINT UNSIGNED  NOT NULL,
  seq            BIGINT UNSIGNED  NOT NULL COMMENT 'the inbox seq of the row',
  conv_id        BIGINT UNSIGNED  NOT NULL,
  msg_created_at DATETIME(3)      NOT NULL COMMENT 'offline_msg.created_at',
  created_at     DATETIME(3)      NOT NULL COMMENT 'when reconciliation recorded it',
  status         TINYINT UNSIGNED NOT NULL DEFAULT 0 COMMENT '0=pending 1=handed to the vendor',
  PRIMARY KEY (uid, msg_id),
  KEY idx_status_created (status, created_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COMMENT='离线推送记录（推送对账）';

-- 001_core: the inbox, cursors, message bodies, groups, allocator fences,
-- and the queue tables of seed 003. Every statement is idempotent.

-- 收件箱：每个接收人一份索引；正文只存一份（msg_content）
CREATE TABLE IF NOT EXISTS offline_msg (
  uid        BIGINT UNSIGNED NOT NULL COMMENT '收件人 uid，分片键',
  seq        BIGINT UNSIGNED NOT NULL COMMENT '收件箱内单调递增序号，由服务端分配',
  msg_id     BIGINT UNSIGNED NOT NULL COMMENT '全局消息 ID',
  conv_id    BIGINT UNSIGNED NOT NULL COMMENT '会话 ID',
  conv_type  TINYINT UNSIGNED NOT NULL COMMENT '1=单聊 2=群聊',
  sender_uid BIGINT UNSIGNED NOT NULL COMMENT '发送方，列表页展示用',
  created_at DATETIME(3)     NOT NULL COMMENT '消息落库时间，毫秒精度',
  PRIMARY KEY (uid, seq),
  UNIQUE KEY uk_uid_msg (uid, msg_id),
  KEY idx_uid_conv (uid, conv_id, seq)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COMMENT='离线消息收件箱';

CREATE TABLE IF NOT EXISTS sync_cursor (
  uid        BIGINT UNSIGNED NOT NULL,
  device_id  VARCHAR(64)     NOT NULL COMMENT '设备指纹',
  pull_seq   BIGINT UNSIGNED NOT NULL DEFAULT 0 COMMENT '已成功拉取到的最大 seq',
  updated_at DATETIME(3)     NOT NULL,
  PRIMARY KEY (uid, device_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COMMENT='设备拉取位点';

-- The highest inbox seq ever served to a device: an ack may not pass it.
CREATE TABLE IF NOT EXISTS sync_served (
  uid        BIGINT UNSIGNED NOT NULL,
  device_id  VARCHAR(64)     NOT NULL,
  served_seq BIGINT UNSIGNED NOT NULL DEFAULT 0 COMMENT 'highest seq returned to this device',
  updated_at DATETIME(3)     NOT NULL,
  PRIMARY KEY (uid, device_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COMMENT='per-device served high-water mark';

-- Message bodies, stored once per message.
CREATE TABLE IF NOT EXISTS msg_content (
  msg_id        BIGINT UNSIGNED  NOT NULL COMMENT 'time-ordered 64-bit id',
  conv_id       BIGINT UNSIGNED  NOT NULL,
  conv_type     TINYINT UNSIGNED NOT NULL COMMENT '1=单聊 2=群聊',
  conv_seq      BIGINT UNSIGNED  NOT NULL COMMENT 'dense per conversation',
  sender_uid    BIGINT UNSIGNED  NOT NULL,
  client_msg_id VARCHAR(64)      NOT NULL,
  content       VARBINARY(4096)  NOT NULL,
  created_at    DATETIME(3)      NOT NULL,
  PRIMARY KEY (msg_id),
  UNIQUE KEY uk_sender_client (sender_uid, client_msg_id),
  UNIQUE KEY uk_conv_seq (conv_id, conv_seq),
  KEY idx_created (created_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COMMENT='消息正文，只存一份';

-- Dense conv_seq: one counter row per conversation, advanced in the same
-- transaction that stores the message, so a rollback leaves no hole.
CREATE TABLE IF NOT EXISTS conv_counter (
  conv_id    BIGINT UNSIGNED NOT NULL,
  max_seq    BIGINT UNSIGNED NOT NULL DEFAULT 0,
  PRIMARY KEY (conv_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COMMENT='per-conversation conv_seq counter';

CREATE TABLE IF NOT EXISTS im_group (
  group_id     BIGINT UNSIGNED NOT NULL,
  member_count INT UNSIGNED    NOT NULL,
  member_hash  BINARY(32)      NOT NULL COMMENT 'sha256 of the sorted member list',
  created_at   DATETIME(3)     NOT NULL,
  PRIMARY KEY (group_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COMMENT='groups';

CREATE TABLE IF NOT EXISTS group_member (
  group_id   BIGINT UNSIGNED NOT NULL,
  uid        BIGINT UNSIGNED NOT NULL,
  joined_at  DATETIME(3)     NOT NULL,
  PRIMARY KEY (group_id, uid),
  KEY idx_uid (uid)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COMMENT='group membership';

-- The persisted high-water mark that fences every per-user seq allocator:
-- max_seq is the highest seq committed to the uid's inbox. A writer locks
-- the row, refuses any allocated seq <= max_seq, and raises it on commit.
CREATE TABLE IF NOT EXISTS seq_fence (
  uid        BIGINT UNSIGNED NOT NULL,
  max_seq    BIGINT UNSIGNED NOT NULL DEFAULT 0,
  updated_at DATETIME(3)     NOT NULL,
  PRIMARY KEY (uid)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COMMENT='per-user seq high-water mark (fence)';

-- Segment reservations of the segment allocator (1000 seqs at a time).
CREATE TABLE IF NOT EXISTS seq_segment (
  uid          BIGINT UNSIGNED NOT NULL,
  reserved_max BIGINT UNSIGNED NOT NULL DEFAULT 0,
  updated_at   DATETIME(3)     NOT NULL,
  PRIMARY KEY (uid)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COMMENT='segment allocator reservations';

CREATE TABLE IF NOT EXISTS mq_outbox (
  id         BIGINT UNSIGNED  NOT NULL AUTO_INCREMENT,
  topic      VARCHAR(64)      NOT NULL COMMENT '如 im.fanout.msg',
  shard_key  BIGINT UNSIGNED  NOT NULL COMMENT 'conv_id 或 uid，用于顺序分区',
  payload    VARBINARY(8192)  NOT NULL COMMENT '事件体：msg_id/conv_id/conv_seq',
  status     TINYINT UNSIGNED NOT NULL DEFAULT 0 COMMENT '0=待投递 1=已投递 2=已确认',
  retry      INT UNSIGNED     NOT NULL DEFAULT 0,
  created_at DATETIME(3)      NOT NULL,
  PRIMARY KEY (id),
  KEY idx_status_id (status, id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;

CREATE TABLE IF NOT EXISTS mq_dedup (
  msg_id     BIGINT UNSIGNED NOT NULL,
  uid        BIGINT UNSIGNED NOT NULL COMMENT '收件人；群聊里同一 msg_id 会有多行',
  created_at DATETIME(3)     NOT NULL,
  PRIMARY KEY (msg_id, uid)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COMMENT='消费去重表，按 created_at 定期清理';

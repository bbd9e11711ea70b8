package compose

import (
	"context"
	"database/sql"
	"encoding/binary"
	"testing"
	"time"

	"imlab/ref/fanout"
	"imlab/ref/model"
	"imlab/ref/schema"
)

// TestEmbeddedOutboxStatus: the embedded MySQL answers the lab's outbox
// lookup (fanout.OutboxStatus, behind the read-after-ACK probe) as MariaDB
// does, also for msg_ids with bytes >= 0x80, which a SUBSTRING of the raw
// VARBINARY never matched there (every outbox probe then read "no row").
func TestEmbeddedOutboxStatus(t *testing.T) {
	ctx, _, db := embeddedMigrated(t)
	ids := []uint64{386166409048100864, 0x0102030405060708, 0x05ff80c0a0b0e0f0}
	for i, id := range ids {
		ev := fanout.Event{MsgID: id, ConvID: 7, ConvSeq: uint64(i + 1), SenderUID: 3, SentAt: time.Now().UTC()}
		p, err := ev.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := db.ExecContext(ctx, "INSERT INTO mq_outbox (topic, shard_key, payload, status, created_at) VALUES ('t', 7, ?, ?, ?)",
			p, i%3, time.Now().UTC()); err != nil {
			t.Fatal(err)
		}
	}
	for i, id := range ids {
		if st, err := fanout.OutboxStatus(ctx, db, id); err != nil || st != i%3 {
			t.Errorf("msg_id %#x: status %d, %v; want %d", id, st, err, i%3)
		}
	}
	other := binary.BigEndian.Uint64([]byte{0x05, 0xff, 0x80, 0xc0, 0xa0, 0xb0, 0xe0, 0xf1})
	if st, err := fanout.OutboxStatus(ctx, db, other); err != nil || st != model.OutboxNone {
		t.Errorf("a msg_id without a row: %d, %v", st, err)
	}
}

// embeddedMigrated starts the embedded topology's MySQL and Redis (no
// Kafka, no MongoDB) for the test, applies the schema, and stops them when
// the test ends; ctx ends after a minute.
func embeddedMigrated(t *testing.T) (context.Context, *Backends, *sql.DB) {
	t.Helper()
	cfg := DefaultConfig()
	cfg.Mode = ModeEmbedded
	cfg.DataDir = t.TempDir()
	cfg.WithKafka, cfg.WithMongo = false, false
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	be, stop, err := Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = stop(context.Background()) })
	db, err := sql.Open("mysql", be.MySQLDSN)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if _, err := schema.Migrate(ctx, db); err != nil {
		t.Fatal(err)
	}
	return ctx, be, db
}

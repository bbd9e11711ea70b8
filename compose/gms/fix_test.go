package gms

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/go-sql-driver/mysql"
	"github.com/redis/go-redis/v9"

	"imlab/ref/inbox"
	"imlab/ref/model"
	"imlab/ref/rkeys"
	"imlab/ref/schema"
	"imlab/ref/seqalloc"
)

// checkIndexed reads every committed (id, v) of table c through its
// secondary index uk_v (WHERE v = ?) and its primary key, and fails unless
// each lookup finds exactly its own row.
func checkIndexed(t *testing.T, db *sql.DB, label string, want map[int64]int64) {
	t.Helper()
	for id, v := range want {
		var got []int64
		rows, err := db.Query("SELECT id FROM c WHERE v = ?", v)
		if err != nil {
			t.Fatalf("%s: %v", label, err)
		}
		for rows.Next() {
			var x int64
			if err := rows.Scan(&x); err != nil {
				t.Fatal(err)
			}
			got = append(got, x)
		}
		rows.Close()
		if len(got) != 1 || got[0] != id {
			t.Errorf("%s: WHERE v = %d found ids %v, want [%d]", label, v, got, id)
		}
	}
	var n int
	if err := db.QueryRow("SELECT COUNT(*) FROM c").Scan(&n); err != nil || n != len(want) {
		t.Errorf("%s: %d rows (%v), want %d", label, n, err, len(want))
	}
}

// A transaction that wrote and then ended without COMMIT (ROLLBACK, or its
// client gone) must leave every index as it found it. go-mysql-server's
// memory engine shares the index entries of the committed table with the
// transaction's copy and re-sorts that copy in place: before the embedded
// topology rebuilt the indexes of such tables, a rolled-back insert that
// sorted before existing rows left uk_v pointing one row off (WHERE v = 10
// found id 20, WHERE v = 30 found nothing), and so did a rolled-back
// UPDATE.
func TestEmbeddedAbortKeepsSecondaryIndexes(t *testing.T) {
	db, dsn := embeddedDB(t, 5*time.Second)
	ctx := context.Background()
	want := map[int64]int64{10: 10, 20: 20, 30: 30}
	if _, err := db.Exec("INSERT INTO c (id, v) VALUES (10, 10), (20, 20), (30, 30)"); err != nil {
		t.Fatal(err)
	}
	checkIndexed(t, db, "before", want)

	for _, stmts := range [][]string{
		{"INSERT INTO c (id, v) VALUES (5, 5)"},
		{"UPDATE c SET v = 25 WHERE id = 20"},
		{"DELETE FROM c WHERE id = 10", "INSERT INTO c (id, v) VALUES (1, 1), (15, 15)"},
	} {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, q := range stmts {
			if _, err := tx.Exec(q); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
		}
		if err := tx.Rollback(); err != nil {
			t.Fatal(err)
		}
		checkIndexed(t, db, fmt.Sprintf("after ROLLBACK of %q", stmts), want)
	}

	// A client that disappears inside its transaction (a killed consumer,
	// a reset connection): the same.
	other, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := other.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{"BEGIN", "INSERT INTO c (id, v) VALUES (7, 7)"} {
		if _, err := conn.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	conn.Close()
	other.Close()
	deadline := time.Now().Add(5 * time.Second)
	for {
		var one int
		if err := db.QueryRow("SELECT 1").Scan(&one); err == nil {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("engine lock not released after the client left: %v", err)
		}
	}
	checkIndexed(t, db, "after a client left inside its transaction", want)

	// The unique key still holds, and a committed transaction keeps its rows.
	if _, err := db.Exec("INSERT INTO c (id, v) VALUES (40, 30)"); err == nil {
		t.Error("uk_v accepted a duplicate after the aborts")
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec("INSERT INTO c (id, v) VALUES (2, 2)"); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	want[2] = 2
	checkIndexed(t, db, "after a commit", want)
}

// dupKeyOf runs q and returns the key inbox.DupKey reads from its error.
func dupKeyOf(t *testing.T, db *sql.DB, q string, args ...any) string {
	t.Helper()
	_, err := db.Exec(q, args...)
	key, dup := inbox.DupKey(err)
	if !dup {
		t.Fatalf("%s: got %v, want a duplicate-key error (1062)", q, err)
	}
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		t.Logf("%s: %s", q, me.Message)
	}
	return key
}

// The write path tells a (uid, seq) PRIMARY collision from a (uid, msg_id)
// duplicate, and a retried (sender, client_msg_id) from anything else, by
// the key MySQL names in error 1062 ("for key 'offline_msg.uk_uid_msg'").
// go-mysql-server's message names none ("duplicate unique key given:
// [3386...]"): the embedded topology names it the way MySQL 8 does.
func TestEmbeddedDuplicateKeyNamesTheKey(t *testing.T) {
	db, _ := embeddedSchemaDB(t)
	now := time.Now().UTC()
	ins := "INSERT INTO offline_msg (uid, seq, msg_id, conv_id, conv_type, sender_uid, created_at) VALUES "
	if _, err := db.Exec(ins+"(3, 1, 386770183450005504, 9, 1, 4, ?)", now); err != nil {
		t.Fatal(err)
	}
	content := "INSERT INTO msg_content (msg_id, conv_id, conv_type, conv_seq, sender_uid, client_msg_id, content, created_at) VALUES "
	if _, err := db.Exec(content+"(100, 9, 1, 1, 4, 'c-1', 'hi', ?)", now); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec("INSERT INTO im_group (group_id, member_count, member_hash, created_at) VALUES (7, 2, 'h', ?)", now); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		q    string
		args []any
		key  string
	}{
		{ins + "(3, 1, 386770183450009999, 9, 1, 4, ?)", []any{now}, "PRIMARY"},
		{ins + "(3, 2, 386770183450005504, 9, 1, 4, ?)", []any{now}, "uk_uid_msg"},
		{ins + "(5, 1, 11, 9, 1, 4, ?), (3, 7, 386770183450005504, 9, 1, 4, ?)", []any{now, now}, "uk_uid_msg"},
		{content + "(101, 9, 1, 2, 4, 'c-1', 'again', ?)", []any{now}, "uk_sender_client"},
		{content + "(102, 9, 1, 1, 5, 'c-2', 'same place', ?)", []any{now}, "uk_conv_seq"},
		{content + "(100, 9, 1, 3, 5, 'c-3', 'same id', ?)", []any{now}, "PRIMARY"},
		{"INSERT INTO im_group (group_id, member_count, member_hash, created_at) VALUES (7, 3, 'g', ?)", []any{now}, "PRIMARY"},
	} {
		if got := dupKeyOf(t, db, c.q, c.args...); got != c.key {
			t.Errorf("%s: key %q, want %q", c.q, got, c.key)
		}
	}
}

// embeddedSchemaDB is an embedded MySQL with the reference schema, and a
// Redis stand-in beside it for the seq allocator.
func embeddedSchemaDB(t *testing.T) (*sql.DB, string) {
	t.Helper()
	db, err := sql.Open("mysql", embeddedDSN(t, 20*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := schema.Migrate(ctx, db); err != nil {
		t.Fatal(err)
	}
	return db, miniredis.RunT(t).Addr()
}

// The inbox tier's redelivery after its consumer died mid-transaction, on
// the embedded MySQL: the dead transaction's inbox rows are gone, the
// redelivered batch is written once (rows that were committed before are
// idempotent hits on uk_uid_msg), and every uid's inbox reads back whole.
// Before the fix the aborted INSERT left uk_uid_msg pointing at the wrong
// rows, the redelivery's duplicate check missed the rows that exist
// ("no clean seq allocation after 8 rounds": the consumer-kill scenario's
// dead letter), and the 1062 named no key, so even a plain redelivery
// failed.
func TestEmbeddedInboxRedeliveryAfterAbort(t *testing.T) {
	db, redisAddr := embeddedSchemaDB(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	defer rdb.Close()
	w, err := inbox.NewWriter(seqalloc.NewRedis(rdb, rkeys.Keys{Prefix: "abort-test:"}), inbox.DefaultConfig(), nil)
	if err != nil {
		t.Fatal(err)
	}
	at := time.Now().UTC().Truncate(time.Millisecond)
	msg := func(id uint64, uids ...uint64) []inbox.Item {
		var out []inbox.Item
		for _, u := range uids {
			out = append(out, inbox.Item{UID: u, MsgID: id, ConvID: 900, ConvType: model.ConvGroup, ConvSeq: id, SenderUID: 1, CreatedAt: at})
		}
		return out
	}
	write := func(items []inbox.Item, commit bool) []model.InboxEntry {
		t.Helper()
		tx, err := db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
		if err != nil {
			t.Fatal(err)
		}
		es, err := w.WriteKeyCheckedTx(ctx, tx, items)
		if err != nil {
			_ = tx.Rollback()
			t.Fatalf("write: %v", err)
		}
		if !commit {
			if err := tx.Rollback(); err != nil {
				t.Fatal(err)
			}
			return es
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		return es
	}
	want := map[uint64][]uint64{} // uid -> msg_ids
	add := func(items []inbox.Item) {
		for _, it := range items {
			want[it.UID] = append(want[it.UID], it.MsgID)
		}
	}
	// Committed batches for uids 20..40.
	for id := uint64(1); id <= 6; id++ {
		items := msg(id, 20+id, 30+id, 40)
		write(items, true)
		add(items)
	}
	// A consumer writes the next batch, which also reaches lower uids,
	// and dies before COMMIT.
	next := append(msg(7, 2, 21, 40), msg(8, 3, 33, 40)...)
	write(next, false)
	// The redelivery: the records the dead consumer had committed before
	// (6) and the batch it had not (7, 8).
	redelivered := append(msg(6, 26, 36, 40), next...)
	es := write(redelivered, true)
	add(next)
	if len(es) != len(next) {
		t.Errorf("redelivery wrote %d rows, want %d (msg 6 was there already)", len(es), len(next))
	}
	for uid, ids := range want {
		rows, err := db.Query("SELECT msg_id FROM offline_msg WHERE uid = ? ORDER BY seq", uid)
		if err != nil {
			t.Fatal(err)
		}
		var got []uint64
		for rows.Next() {
			var id uint64
			if err := rows.Scan(&id); err != nil {
				t.Fatal(err)
			}
			got = append(got, id)
		}
		rows.Close()
		if fmt.Sprint(got) != fmt.Sprint(ids) {
			t.Errorf("uid %d: inbox %v, want %v", uid, got, ids)
		}
		found, err := inbox.Delivered(ctx, db, keysOf(uid, ids))
		if err != nil {
			t.Fatal(err)
		}
		if len(found) != len(ids) {
			t.Errorf("uid %d: the (uid, msg_id) lookup found %d of %d rows", uid, len(found), len(ids))
		}
	}
}

func keysOf(uid uint64, ids []uint64) []inbox.Key {
	out := make([]inbox.Key, len(ids))
	for i, id := range ids {
		out[i] = inbox.Key{UID: uid, MsgID: id}
	}
	return out
}

func TestWriteTarget(t *testing.T) {
	type want struct {
		table         string
		writes, known bool
	}
	cases := map[string]want{
		"INSERT INTO offline_msg (uid) VALUES (1)":                       {"offline_msg", true, true},
		"insert ignore into `mq_dedup`(msg_id) values (1)":               {"mq_dedup", true, true},
		"INSERT offline_msg VALUES (1)":                                  {"offline_msg", true, true},
		"/* x */ REPLACE INTO imlab_1.seq_fence VALUES (1)":              {"imlab_1.seq_fence", true, true},
		"INSERT INTO `db`.`t` SELECT * FROM u":                           {"db.t", true, true},
		"UPDATE mq_outbox SET status = 2 WHERE id IN (1)":                {"mq_outbox", true, true},
		"UPDATE LOW_PRIORITY seq_fence SET max_seq = 1":                  {"seq_fence", true, true},
		"UPDATE conv_counter FORCE INDEX (PRIMARY) SET max_seq = 2":      {"conv_counter", true, true},
		"UPDATE t AS x USE INDEX (a, b) SET v = 1":                       {"t", true, true},
		"UPDATE t SETTINGS_X SET v = 1":                                  {"t", true, true},
		"UPDATE a, b SET a.x = b.x":                                      {"", true, false},
		"UPDATE a JOIN b ON a.id = b.id SET a.x = 1":                     {"", true, false},
		"DELETE FROM offline_msg WHERE uid = 1":                          {"offline_msg", true, true},
		"DELETE QUICK FROM t":                                            {"t", true, true},
		"DELETE a FROM a JOIN b ON a.id = b.id":                          {"", true, false},
		"DELETE FROM a USING a JOIN b":                                   {"", true, false},
		"SELECT uid, max_seq FROM seq_fence WHERE uid IN (1) FOR UPDATE": {"", false, false},
		"SET TRANSACTION ISOLATION LEVEL READ COMMITTED":                 {"", false, false},
		"START TRANSACTION":                                              {"", false, false},
		"ROLLBACK":                                                       {"", false, false},
		"WITH x AS (SELECT 1) DELETE FROM t":                             {"", true, false},
		"TRUNCATE TABLE t":                                               {"", true, false},
		"":                                                               {"", false, false},
	}
	for q, w := range cases {
		table, writes, known := writeTarget(q)
		if table != w.table || writes != w.writes || known != w.known {
			t.Errorf("writeTarget(%q) = %q, %v, %v; want %q, %v, %v", q, table, writes, known, w.table, w.writes, w.known)
		}
	}
}

// The affected-row counts the write path reads (ref/send's conv_counter
// upsert: 1 per row inserted, 2 per row updated; ref/seqalloc's segment
// reservation: LAST_INSERT_ID(expr) in the OK packet; the guarded UPDATEs:
// rows changed) are MySQL's on the embedded engine too.
func TestEmbeddedAffectedRows(t *testing.T) {
	db, _ := embeddedDB(t, time.Second)
	exec := func(q string) (int64, int64) {
		t.Helper()
		res, err := db.Exec(q)
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		n, err := res.RowsAffected()
		if err != nil {
			t.Fatal(err)
		}
		id, _ := res.LastInsertId()
		return n, id
	}
	for _, c := range []struct {
		q    string
		n    int64
		id   int64 // -1: not checked
		note string
	}{
		{"INSERT INTO c (id, v) VALUES (1, 10) ON DUPLICATE KEY UPDATE v = v + VALUES(v)", 1, -1, "inserted"},
		{"INSERT INTO c (id, v) VALUES (1, 5) ON DUPLICATE KEY UPDATE v = v + VALUES(v)", 2, -1, "updated"},
		{"INSERT INTO c (id, v) VALUES (3, 30), (1, 1), (4, 40) ON DUPLICATE KEY UPDATE v = v + VALUES(v)", 4, -1, "1 + 2 + 1"},
		{"INSERT INTO c (id, v) VALUES (1, 0) ON DUPLICATE KEY UPDATE v = LAST_INSERT_ID(v + 100)", 2, 116, "LAST_INSERT_ID(expr)"},
		{"INSERT INTO c (id, v) VALUES (1, 0) ON DUPLICATE KEY UPDATE v = v", 0, -1, "unchanged"},
		{"UPDATE c SET v = v + 1 WHERE id IN (1, 3, 99)", 2, -1, "two rows changed"},
		{"UPDATE c SET v = v WHERE id IN (1, 3)", 0, -1, "matched, unchanged"},
	} {
		n, id := exec(c.q)
		if n != c.n || (c.id >= 0 && id != c.id) {
			t.Errorf("%s (%s): affected %d, last insert id %d; want %d, %d", c.q, c.note, n, id, c.n, c.id)
		}
	}
}

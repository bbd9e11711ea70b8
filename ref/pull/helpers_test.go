package pull_test

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"imlab/internal/testenv"
	"imlab/ref/hotcache"
	"imlab/ref/model"
	"imlab/ref/pull"
)

// hook is what the write path calls after COMMIT.
type hook interface {
	Committed(ctx context.Context, entries []model.InboxEntry)
}

// writer stores messages the way the write path does (seq_fence locked,
// seqs above max_seq with occasional holes, msg_content + offline_msg in one
// transaction) and calls the hooks after COMMIT with PrevSeq set.
type writer struct {
	db    *sql.DB
	hooks []hook
	msgID atomic.Uint64
	mu    sync.Mutex
	rng   *rand.Rand
}

func newWriter(db *sql.DB, hooks ...hook) *writer {
	w := &writer{db: db, hooks: hooks, rng: rand.New(rand.NewPCG(1, 2))}
	w.msgID.Store(uint64(time.Now().UnixNano()) & (1<<40 - 1) << 12)
	return w
}

func (w *writer) hole() uint64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.rng.IntN(5) == 0 {
		return uint64(w.rng.IntN(3)) + 1
	}
	return 0
}

// send commits n messages of conv to uid's inbox and runs the hooks unless
// skipHooks (a crash between COMMIT and the hook).
func (w *writer) send(t testing.TB, uid, conv uint64, n int, skipHooks bool) []model.InboxEntry {
	t.Helper()
	ents, err := w.commit(uid, conv, n)
	if err != nil {
		t.Fatal(err)
	}
	if !skipHooks {
		for _, h := range w.hooks {
			h.Committed(context.Background(), ents)
		}
	}
	return ents
}

func (w *writer) commit(uid, conv uint64, n int) ([]model.InboxEntry, error) {
	ctx := context.Background()
	tx, err := w.db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	if err != nil {
		return nil, err
	}
	defer func() { _ = tx.Rollback() }()
	now := time.Now().UTC().Truncate(time.Millisecond)
	if _, err := tx.ExecContext(ctx, `INSERT INTO seq_fence (uid, max_seq, updated_at) VALUES (?, 0, ?) ON DUPLICATE KEY UPDATE uid = uid`, uid, now); err != nil {
		return nil, err
	}
	var maxSeq uint64
	if err := tx.QueryRowContext(ctx, `SELECT max_seq FROM seq_fence WHERE uid = ? FOR UPDATE`, uid).Scan(&maxSeq); err != nil {
		return nil, err
	}
	ct := model.ConvGroup
	if conv&(1<<63) != 0 {
		ct = model.ConvSingle
	}
	ents := make([]model.InboxEntry, n)
	var cb, ob strings.Builder
	cb.WriteString(`INSERT INTO msg_content (msg_id, conv_id, conv_type, conv_seq, sender_uid, client_msg_id, content, created_at) VALUES `)
	ob.WriteString(`INSERT INTO offline_msg (uid, seq, msg_id, conv_id, conv_type, sender_uid, created_at) VALUES `)
	var cargs, oargs []any
	prev := maxSeq
	for i := range ents {
		id := w.msgID.Add(1)
		seq := prev + 1 + w.hole()
		e := model.InboxEntry{UID: uid, Seq: seq, PrevSeq: prev, MsgID: id, ConvID: conv, ConvType: ct, ConvSeq: id,
			SenderUID: 99, CreatedAt: now, Content: fmt.Sprintf("body %d \"%d\"", uid, seq)}
		ents[i] = e
		prev = seq
		if i > 0 {
			cb.WriteByte(',')
			ob.WriteByte(',')
		}
		cb.WriteString(`(?,?,?,?,?,?,?,?)`)
		ob.WriteString(`(?,?,?,?,?,?,?)`)
		cargs = append(cargs, id, conv, ct, id, e.SenderUID, fmt.Sprintf("c-%d", id), e.Content, now)
		oargs = append(oargs, uid, seq, id, conv, ct, e.SenderUID, now)
	}
	if _, err := tx.ExecContext(ctx, cb.String(), cargs...); err != nil {
		return nil, err
	}
	if _, err := tx.ExecContext(ctx, ob.String(), oargs...); err != nil {
		return nil, err
	}
	if _, err := tx.ExecContext(ctx, `UPDATE seq_fence SET max_seq = ?, updated_at = ? WHERE uid = ?`, prev, now, uid); err != nil {
		return nil, err
	}
	return ents, tx.Commit()
}

// allSeqs is the truth: uid's inbox seqs in order.
func allSeqs(t testing.TB, db *sql.DB, uid uint64) []uint64 {
	t.Helper()
	rows, err := db.Query(`SELECT seq FROM offline_msg WHERE uid = ? ORDER BY seq`, uid)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []uint64
	for rows.Next() {
		var s uint64
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		out = append(out, s)
	}
	return out
}

type env struct {
	db    *sql.DB
	redis *testenv.Redis
	cache *hotcache.Cache
	svc   *pull.Service
	reg   *prometheus.Registry
	w     *writer
}

func newEnv(t testing.TB, mut func(*pull.Config, *hotcache.Config)) *env {
	t.Helper()
	m := testenv.NewMySQL(t)
	r := testenv.NewRedis(t)
	pcfg := pull.DefaultConfig()
	pcfg.RateLimit = 1e5
	pcfg.RateBurst = 1e5
	hcfg := hotcache.DefaultConfig()
	if mut != nil {
		mut(&pcfg, &hcfg)
	}
	reg := prometheus.NewRegistry()
	c, err := hotcache.New(r.Client, r.Keys, hcfg, reg)
	if err != nil {
		t.Fatal(err)
	}
	s, err := pull.New(m.DB, c, pcfg, reg)
	if err != nil {
		t.Fatal(err)
	}
	return &env{db: m.DB, redis: r, cache: c, svc: s, reg: reg, w: newWriter(m.DB, c)}
}

func ptr(v uint64) *uint64 { return &v }

func seqs(es []model.InboxEntry) []uint64 {
	out := make([]uint64, len(es))
	for i, e := range es {
		out[i] = e.Seq
	}
	return out
}

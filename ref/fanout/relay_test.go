package fanout

import (
	"context"
	"database/sql"
	"fmt"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"imlab/chaos"
	"imlab/internal/testenv"
	"imlab/ref/model"
)

// storeToOutbox commits n messages per conversation to msg_content with
// their mq_outbox rows (status 0), as the outbox policy does.
func (f *fixture) storeToOutbox(t *testing.T, ctx context.Context, convs []uint64, n int, firstMsg uint64, fromSeq uint64) []model.Message {
	t.Helper()
	ms := f.messages(t, convs, fromSeq-1, n, firstMsg, "")
	tx, err := f.my.DB.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback() }()
	if err := StoreMessages(ctx, tx, ms); err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		b, err := EventOf(m, false).Marshal()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO mq_outbox (topic, shard_key, payload, status, retry, created_at)
			VALUES (?,?,?,0,0,?)`, f.tp.Fanout, m.ConvID, b, m.CreatedAt); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	return ms
}

// testRelayConfig is the default relay config under a lock of its own,
// maintaining every 50 ms and polling an idle outbox every 10 ms.
func testRelayConfig() RelayConfig {
	rc := DefaultRelayConfig()
	rc.LockName = testenv.RandomName("relay_")
	rc.MaintainEvery = 50 * time.Millisecond
	rc.IdleWait = 10 * time.Millisecond
	return rc
}

type runningRelay struct {
	r      *Relay
	cancel context.CancelFunc
	done   chan error
}

func startRelay(t *testing.T, cfg RelayConfig, db *sql.DB, p *Producer) *runningRelay {
	t.Helper()
	r, err := NewRelay(cfg, db, p, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	rr := &runningRelay{r: r, cancel: cancel, done: make(chan error, 1)}
	go func() { rr.done <- r.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-rr.done:
		case <-time.After(10 * time.Second):
			t.Error("relay did not stop")
		}
	})
	return rr
}

// TestRelayLockOneActive: two relays on one outbox and one lock name. Only
// the lock holder publishes (every row published exactly once in normal
// operation); when the holder's session dies (its lock connection killed,
// as when its process is killed) it stops by itself, the standby takes the
// lock and publishes the rest. Whatever the changeover published twice is
// absorbed downstream: every recipient has every message exactly once, and
// every outbox row is confirmed.
func TestRelayLockOneActive(t *testing.T) {
	f := newFixture(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	f.groups[9] = []uint64{1, 2, 3, 4}
	convs := append([]uint64{9}, convIDs(t, [][2]uint64{{1, 11}, {2, 12}, {3, 13}})...)
	stop := runConsumer(t, testConsumerConfig(f.brokers, f.tp), f.sink(t, DedupUK), f.prod)
	defer stop()

	rc := testRelayConfig()
	rc.ConfirmTimeout = 2 * time.Second
	a := startRelay(t, rc, f.my.DB, f.prod)
	b := startRelay(t, rc, f.my.DB, f.prod)

	perMsg := 4 + 3*2
	msgs := f.storeToOutbox(t, ctx, convs, 25, 1000, 1) // 100 messages, 250 inbox rows
	// The relay counts a batch once it is marked published, which may be
	// after the consumers wrote it: wait for both.
	waitFor(t, 20*time.Second, "first batch in the inboxes and counted", func() bool {
		return countRows(t, f.my.DB, "SELECT COUNT(*) FROM offline_msg") == 25*perMsg &&
			a.r.Stats().Published+b.r.Stats().Published >= int64(len(msgs))
	})
	sa, sb := a.r.Stats(), b.r.Stats()
	active := a
	if sb.Published > 0 {
		active = b
	}
	if (sa.Published > 0) == (sb.Published > 0) || active.r.Stats().Published != int64(len(msgs)) {
		t.Fatalf("normal operation: relay A published %d, relay B %d; want one of them exactly %d", sa.Published, sb.Published, len(msgs))
	}

	// Kill the holder's session: the lock goes with it.
	var holder sql.NullInt64
	if err := f.my.DB.QueryRowContext(ctx, "SELECT IS_USED_LOCK(?)", rc.LockName).Scan(&holder); err != nil || !holder.Valid {
		t.Fatalf("lock holder: %v %v", holder, err)
	}
	if _, err := f.my.DB.ExecContext(ctx, fmt.Sprintf("KILL CONNECTION %d", holder.Int64)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the old holder noticing its lost lock", func() bool { return active.r.Stats().LockLost == 1 })
	waitFor(t, 10*time.Second, "a new lock holder", func() bool {
		var h sql.NullInt64
		err := f.my.DB.QueryRowContext(ctx, "SELECT IS_USED_LOCK(?)", rc.LockName).Scan(&h)
		return err == nil && h.Valid && h.Int64 != holder.Int64
	})
	select {
	case err := <-active.done:
		t.Fatalf("the relay whose lock session died left Run (%v) instead of going back to standby", err)
	default:
	}
	pa, pb := a.r.Stats().Published, b.r.Stats().Published

	more := f.storeToOutbox(t, ctx, convs, 25, 2000, 26)
	waitFor(t, 20*time.Second, "second batch in the inboxes and counted", func() bool {
		return countRows(t, f.my.DB, "SELECT COUNT(*) FROM offline_msg") == 50*perMsg &&
			a.r.Stats().Published-pa+b.r.Stats().Published-pb >= int64(len(more))
	})
	da, db := a.r.Stats().Published-pa, b.r.Stats().Published-pb
	if da+db < int64(len(more)) || (da > 0 && db > 0) {
		t.Fatalf("after the takeover relay A published %d, relay B %d; want one of them all %d", da, db, len(more))
	}
	t.Logf("second batch: the former holder published %d, the former standby %d", map[bool]int64{true: da, false: db}[active == a], map[bool]int64{true: db, false: da}[active == a])
	if dup := countRows(t, f.my.DB, "SELECT COUNT(*) - COUNT(DISTINCT uid, msg_id) FROM offline_msg"); dup != 0 {
		t.Fatalf("%d duplicate inbox rows", dup)
	}
	checkConvOrder(t, f.my.DB)
	waitFor(t, 20*time.Second, "every outbox row confirmed", func() bool {
		return countRows(t, f.my.DB, "SELECT COUNT(*) FROM mq_outbox WHERE status < 2") == 0
	})
	t.Logf("relay A %+v, relay B %+v", a.r.Stats(), b.r.Stats())
}

// TestRelaySurvivesMySQLOutage: the relay's connections to MySQL go through
// a proxy that is taken down for a while. The relay loses its lock session,
// cannot open a new connection while MySQL is away, and must keep trying
// (as a standby) instead of leaving Run: once MySQL is back it takes the
// lock again and publishes what was stored meanwhile.
func TestRelaySurvivesMySQLOutage(t *testing.T) {
	f := newFixture(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cfg, err := mysql.ParseDSN(f.my.DSN)
	if err != nil {
		t.Fatal(err)
	}
	px, err := chaos.StartProxies(ctx, map[string]string{"mysql": cfg.Addr})
	if err != nil {
		t.Fatal(err)
	}
	defer px.Close()
	cfg.Addr, err = px.Addr("mysql")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Timeout = time.Second
	proxied, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		t.Fatal(err)
	}
	defer proxied.Close()

	convs := convIDs(t, [][2]uint64{{1, 11}, {2, 12}, {3, 13}})
	stop := runConsumer(t, testConsumerConfig(f.brokers, f.tp), f.sink(t, DedupUK), f.prod)
	defer stop()
	rr := startRelay(t, testRelayConfig(), proxied, f.prod)

	f.storeToOutbox(t, ctx, convs, 5, 1000, 1) // 15 messages, 30 inbox rows
	waitFor(t, 20*time.Second, "first batch in the inboxes", func() bool {
		return countRows(t, f.my.DB, "SELECT COUNT(*) FROM offline_msg") == 30
	})

	if err := px.SetDown(ctx, "mysql", true); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the relay noticing its lost lock", func() bool { return rr.r.Stats().LockLost >= 1 })
	time.Sleep(1500 * time.Millisecond) // MySQL stays away across several lock attempts
	select {
	case err := <-rr.done:
		t.Fatalf("the relay left Run while MySQL was away (%v); it must wait for MySQL as a standby", err)
	default:
	}
	// Stored (directly) while the relay cannot reach MySQL.
	f.storeToOutbox(t, ctx, convs, 5, 2000, 6)
	if err := px.SetDown(ctx, "mysql", false); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 20*time.Second, "second batch in the inboxes after MySQL came back", func() bool {
		return countRows(t, f.my.DB, "SELECT COUNT(*) FROM offline_msg") == 60
	})
	select {
	case err := <-rr.done:
		t.Fatalf("the relay left Run (%v)", err)
	default:
	}
	checkConvOrder(t, f.my.DB)
}

package send_test

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"imlab/ref/send"
)

// New conversations whose counter rows are all created by one batch take
// their conv_seqs without reading conv_counter back: they must still be
// dense from 1, and continue densely once the rows exist (read-back path),
// also when one batch mixes new and existing conversations.
func TestConvSeqNewConversationsInOneBatch(t *testing.T) {
	e := newEnv(t)
	s := e.service(t, 1, func(c *send.Config) { c.Shards = 1; c.MaxWait = 50 * time.Millisecond })
	ctx := context.Background()
	const convs, per = 20, 5
	got := map[uint64][]uint64{}
	var mu sync.Mutex
	round := func(r, firstConv int) {
		var wg sync.WaitGroup
		for c := firstConv; c < convs; c++ {
			for i := 0; i < per; i++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					res, err := s.Send(ctx, one(uint64(1000+c), uint64(2000+c), fmt.Sprintf("r%d-c%d-%d", r, c, i)))
					if err != nil {
						t.Errorf("send: %v", err)
						return
					}
					mu.Lock()
					got[res.ConvID] = append(got[res.ConvID], res.ConvSeq)
					mu.Unlock()
				}()
			}
		}
		wg.Wait()
	}
	round(0, 10) // conversations 10..19, all new
	round(1, 0)  // 0..9 new, 10..19 existing
	round(2, 0)  // all existing
	if len(got) != convs {
		t.Fatalf("%d conversations, want %d", len(got), convs)
	}
	for conv, seqs := range got {
		sort.Slice(seqs, func(i, j int) bool { return seqs[i] < seqs[j] })
		for i, v := range seqs {
			if v != uint64(i+1) {
				t.Fatalf("conv %d: conv_seqs %v not dense", conv, seqs)
			}
		}
		var max uint64
		if err := e.db.QueryRow(`SELECT max_seq FROM conv_counter WHERE conv_id = ?`, conv).Scan(&max); err != nil || max != uint64(len(seqs)) {
			t.Fatalf("conv %d counter %d, %v; want %d", conv, max, err, len(seqs))
		}
	}
}

// A committer keeps its connection between batches; when the server ends
// that session (idle timeout, restart, KILL) the next batch starts on a new
// connection instead of failing.
func TestCommitterConnectionKilled(t *testing.T) {
	e := newEnv(t)
	s := e.service(t, 1, func(c *send.Config) { c.Shards = 1 })
	ctx := context.Background()
	if _, err := s.Send(ctx, one(1, 2, "before")); err != nil {
		t.Fatal(err)
	}
	conn, err := e.db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	rows, err := conn.QueryContext(ctx, `SELECT id FROM information_schema.processlist WHERE db = DATABASE() AND id <> CONNECTION_ID()`)
	if err != nil {
		t.Fatal(err)
	}
	var ids []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	rows.Close()
	if len(ids) == 0 {
		t.Fatal("no other session of this database: the committer does not keep its connection")
	}
	for _, id := range ids {
		if _, err := conn.ExecContext(ctx, fmt.Sprintf("KILL CONNECTION %d", id)); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < 3; i++ {
		res, err := s.Send(ctx, one(1, 2, fmt.Sprintf("after-%d", i)))
		if err != nil {
			t.Fatalf("send after the session was killed: %v", err)
		}
		if res.ConvSeq != uint64(i+2) {
			t.Fatalf("conv_seq %d, want %d", res.ConvSeq, i+2)
		}
	}
	if n := len(inboxOf(t, e.db, 2)); n != 4 {
		t.Fatalf("%d inbox rows for uid 2, want 4", n)
	}
}

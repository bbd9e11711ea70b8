package send_test

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"testing"

	"imlab/ref/model"
	"imlab/ref/send"
)

// TestHotInboxKeepsOrder: many senders write into one hot inbox through
// four committers at once (every batch of every committer locks the hot
// fence row). The hot inbox, read by seq, has every ACKed message once, each
// conversation's messages in conv_seq order and each sender's in the order
// it sent them; the commit hook's PrevSeq chain of the hot uid has no gap
// (each entry's PrevSeq is the seq committed just before it); the fence is
// the top seq.
func TestHotInboxKeepsOrder(t *testing.T) {
	e := newEnv(t)
	const hot, senders, each = 7, 48, 25
	var mu sync.Mutex
	var hooked []model.InboxEntry
	hook := send.HookFunc(func(_ context.Context, es []model.InboxEntry) {
		mu.Lock()
		defer mu.Unlock()
		for _, x := range es {
			if x.UID == hot {
				hooked = append(hooked, x)
			}
		}
	})
	s := e.service(t, 1, func(c *send.Config) { c.Shards = 4; c.MaxBatch = 16 }, hook)
	ctx := context.Background()
	sent := map[uint64][]uint64{} // sender -> msg_ids in ACK order
	var wg sync.WaitGroup
	for k := uint64(0); k < senders; k++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			from := 1000 + k
			for i := 0; i < each; i++ {
				r, err := s.Send(ctx, one(from, hot, fmt.Sprintf("h%d-%d", from, i)))
				if err != nil {
					t.Errorf("send: %v", err)
					return
				}
				mu.Lock()
				sent[from] = append(sent[from], r.MsgID)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	rows, err := e.db.Query(`SELECT o.seq, o.msg_id, o.conv_id, c.conv_seq, o.sender_uid FROM offline_msg o
		JOIN msg_content c ON c.msg_id = o.msg_id WHERE o.uid = ? ORDER BY o.seq`, hot)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	lastConvSeq := map[uint64]uint64{}
	pos := map[uint64]int{} // sender -> next index in sent
	n := 0
	var top uint64
	for rows.Next() {
		var seq, id, conv, cs, from uint64
		if err := rows.Scan(&seq, &id, &conv, &cs, &from); err != nil {
			t.Fatal(err)
		}
		n++
		top = seq
		if cs <= lastConvSeq[conv] {
			t.Fatalf("conv %d: conv_seq %d at seq %d after %d", conv, cs, seq, lastConvSeq[conv])
		}
		lastConvSeq[conv] = cs
		if want := sent[from][pos[from]]; id != want {
			t.Fatalf("sender %d: msg %d at seq %d, want its next sent message %d", from, id, seq, want)
		}
		pos[from]++
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if n != senders*each {
		t.Fatalf("hot inbox has %d rows, want %d", n, senders*each)
	}
	sort.Slice(hooked, func(i, j int) bool { return hooked[i].Seq < hooked[j].Seq })
	for i, x := range hooked {
		want := uint64(0)
		if i > 0 {
			want = hooked[i-1].Seq
		}
		if x.PrevSeq != want {
			t.Fatalf("hook entry seq %d has PrevSeq %d, want %d", x.Seq, x.PrevSeq, want)
		}
	}
	var fence uint64
	if err := e.db.QueryRow(`SELECT max_seq FROM seq_fence WHERE uid = ?`, hot).Scan(&fence); err != nil || fence != top {
		t.Fatalf("fence %d, %v; top seq %d", fence, err, top)
	}
}

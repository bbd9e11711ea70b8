package send_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"imlab/internal/testenv"
	"imlab/ref/model"
	"imlab/ref/send"
)

// checkStored fails unless senders' messages number want, each with two
// inbox rows, and every conversation has conv_seq 1..n without a hole.
func checkStored(t *testing.T, e *env, senders []uint64, want int) {
	t.Helper()
	var n int
	args := make([]any, len(senders))
	q := "SELECT COUNT(*) FROM msg_content WHERE sender_uid IN ("
	for i, s := range senders {
		if i > 0 {
			q += ","
		}
		q += "?"
		args[i] = s
	}
	if err := e.db.QueryRow(q+")", args...).Scan(&n); err != nil || n != want {
		t.Fatalf("msg_content rows = %d, %v; want %d", n, err, want)
	}
	if err := e.db.QueryRow(`SELECT COUNT(*) FROM offline_msg o JOIN msg_content m ON m.msg_id = o.msg_id WHERE m.`+q[len("SELECT COUNT(*) FROM msg_content WHERE "):]+")", args...).Scan(&n); err != nil || n != 2*want {
		t.Fatalf("inbox rows = %d, %v; want %d", n, err, 2*want)
	}
	rows, err := e.db.Query(`SELECT conv_id, COUNT(*), MIN(conv_seq), MAX(conv_seq) FROM msg_content GROUP BY conv_id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var conv, cnt, lo, hi uint64
		if err := rows.Scan(&conv, &cnt, &lo, &hi); err != nil {
			t.Fatal(err)
		}
		var ctr uint64
		if err := e.db.QueryRow(`SELECT max_seq FROM conv_counter WHERE conv_id = ?`, conv).Scan(&ctr); err != nil {
			t.Fatal(err)
		}
		if lo != 1 || hi != cnt || ctr != cnt {
			t.Fatalf("conv %d: %d rows, conv_seq %d..%d, counter %d: not dense", conv, cnt, lo, hi, ctr)
		}
	}
}

// A retry storm: many concurrent copies of each send, into two processes,
// while the first copy is queued or committing, then again after it is
// answered. Every copy gets the first answer, exactly one is not marked
// duplicate, nothing is stored twice, conv_seq stays dense, and batches are
// not rolled back and redone for their duplicates.
func TestRetryStormTwoProcesses(t *testing.T) {
	e := newEnv(t)
	regA, regB := prometheus.NewRegistry(), prometheus.NewRegistry()
	procs := []*send.Service{e.serviceReg(t, 1, regA, nil), e.serviceReg(t, 2, regB, nil)}
	ctx := context.Background()
	const keys, copies = 300, 6
	req := func(k int) model.SendRequest { return one(uint64(100+k%10), uint64(200+k%7), fmt.Sprint("s", k)) }
	res := make([][]model.SendResult, keys)
	var wg sync.WaitGroup
	for round := 0; round < 2; round++ { // in flight, then completed
		for k := 0; k < keys; k++ {
			if round == 0 {
				res[k] = make([]model.SendResult, 2*copies)
			}
			for c := 0; c < copies; c++ {
				wg.Add(1)
				go func(k, c int) {
					defer wg.Done()
					r, err := procs[(k+c)%2].Send(ctx, req(k))
					if err != nil {
						t.Errorf("send k%d copy %d: %v", k, c, err)
					}
					res[k][round*copies+c] = r
				}(k, c)
			}
		}
		wg.Wait()
	}
	if t.Failed() {
		t.FailNow()
	}
	for k := 0; k < keys; k++ {
		fresh := 0
		for c, r := range res[k] {
			if r.MsgID != res[k][0].MsgID || r.ConvSeq != res[k][0].ConvSeq || !r.ServerTime.Equal(res[k][0].ServerTime) {
				t.Fatalf("k%d copy %d: answer %+v differs from %+v", k, c, r, res[k][0])
			}
			if !r.Duplicate {
				fresh++
			}
		}
		if fresh != 1 {
			t.Fatalf("k%d: %d answers not marked duplicate, want 1", k, fresh)
		}
	}
	senders := make([]uint64, 10)
	for i := range senders {
		senders[i] = uint64(100 + i)
	}
	checkStored(t, e, senders, keys)

	var batches, rolledBack, local, stored float64
	for _, reg := range []*prometheus.Registry{regA, regB} {
		batches += testenv.Metric(t, reg, "imlab_send_batch_size", nil)
		rolledBack += testenv.Metric(t, reg, "imlab_send_batch_rollbacks_total", map[string]string{"reason": "duplicate"})
		local += testenv.Metric(t, reg, "imlab_send_dedup_total", map[string]string{"source": "inflight"}) + testenv.Metric(t, reg, "imlab_send_dedup_total", map[string]string{"source": "recent"})
		stored += testenv.Metric(t, reg, "imlab_send_dedup_total", map[string]string{"source": "store"})
	}
	t.Logf("batches %.0f, rolled back for a duplicate %.0f, answered locally %.0f, from the store %.0f", batches, rolledBack, local, stored)
	if local < keys*(copies-2) {
		t.Fatalf("only %.0f duplicates answered in process, want >= %d", local, keys*(copies-2))
	}
	// Every batch of the storm holds duplicates; before, each of them was
	// rolled back and redone. Collisions are answered in place now.
	if rolledBack > batches/4 {
		t.Fatalf("%.0f of %.0f batches rolled back for a duplicate", rolledBack, batches)
	}
}

// Keys stored by another process (unknown to this one) inside a batch with
// fresh sends: the stored ones get their first answer from the store in the
// same transaction, the fresh ones commit with dense conv_seqs, and no
// attempt is rolled back.
func TestStoredDuplicatesAnsweredInPlace(t *testing.T) {
	e := newEnv(t)
	regB := prometheus.NewRegistry()
	a := e.service(t, 1, nil)
	b := e.serviceReg(t, 2, regB, func(c *send.Config) { c.MaxWait = 20 * time.Millisecond; c.Shards = 1 })
	ctx := context.Background()
	const n = 40
	first := make([]model.SendResult, n)
	for k := 0; k < n; k += 2 { // the even keys are stored by a
		r, err := a.Send(ctx, one(300, 301, fmt.Sprint("p", k)))
		if err != nil {
			t.Fatal(err)
		}
		first[k] = r
	}
	got := make([]model.SendResult, n)
	var wg sync.WaitGroup
	for k := 0; k < n; k++ {
		wg.Add(1)
		go func(k int) {
			defer wg.Done()
			r, err := b.Send(ctx, one(300, 301, fmt.Sprint("p", k)))
			if err != nil {
				t.Errorf("k%d: %v", k, err)
			}
			got[k] = r
		}(k)
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	for k := 0; k < n; k += 2 {
		if !got[k].Duplicate || got[k].MsgID != first[k].MsgID || got[k].ConvSeq != first[k].ConvSeq || !got[k].ServerTime.Equal(first[k].ServerTime) {
			t.Fatalf("k%d: %+v, first %+v", k, got[k], first[k])
		}
	}
	for k := 1; k < n; k += 2 {
		if got[k].Duplicate || got[k].ConvSeq <= n/2 {
			t.Fatalf("k%d: fresh send answered %+v", k, got[k])
		}
	}
	checkStored(t, e, []uint64{300}, n)
	if rb := testenv.Metric(t, regB, "imlab_send_batch_rollbacks_total", nil); rb != 0 {
		t.Fatalf("%.0f attempts rolled back", rb)
	}
	if st := testenv.Metric(t, regB, "imlab_send_dedup_total", map[string]string{"source": "store"}); st != n/2 {
		t.Fatalf("%.0f answered from the store, want %d", st, n/2)
	}
}

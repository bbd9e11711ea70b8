package reconcile_test

import (
	"context"
	"database/sql"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"imlab/internal/budget"
	"imlab/internal/testenv"
	"imlab/ref/fanout"
	"imlab/ref/model"
)

// ackSenders is the number of concurrent senders (each its own 1:1
// conversation). Sends in flight = rate x ACK latency: 50k/s at the ~20 ms
// a batch takes to commit on this machine needs ~1,000 in flight; with 256
// the benchmark measured its own concurrency (24-26k/s), not the server.
const ackSenders = 1024

// BenchmarkSendAck measures ACKed 1:1 sends per second under the store and
// outbox policies (send service with group commit, content committed, the
// store publish queued / the outbox row in the same transaction),
// ackSenders concurrent senders, no consumer running.
func BenchmarkSendAck(b *testing.B) {
	for _, policy := range []string{fanout.PolicyStore, fanout.PolicyOutbox} {
		b.Run(policy, func(b *testing.B) {
			m := testenv.NewMySQL(b)
			db, counted := countedDB(b, m.DSN)
			p := newPipelineOpts(b, policy, pipeOpts{db: db})
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
			defer cancel()
			const senders = ackSenders
			var next atomic.Int64
			var wg sync.WaitGroup
			var failed atomic.Int64
			pid := budget.ServerPID(ctx, m.DB)
			b.ResetTimer()
			run := budget.Start(counted, nil, pid)
			t0 := time.Now()
			for s := 1; s <= senders; s++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for {
						i := next.Add(1)
						if i > int64(b.N) {
							return
						}
						req := model.SendRequest{SenderUID: uint64(s), ConvType: model.ConvSingle, ToUID: uint64(s + 1000),
							ClientMsgID: fmt.Sprintf("b-%d", i), Content: "hello"}
						if _, err := p.svc.Send(ctx, req); err != nil {
							failed.Add(1)
						}
					}
				}()
			}
			wg.Wait()
			el := time.Since(t0)
			b.StopTimer()
			res := run.Result(b.N)
			if f := failed.Load(); f > 0 {
				b.Fatalf("%d sends failed", f)
			}
			b.ReportMetric(float64(b.N)/el.Seconds(), "acks/s")
			res.Report(b)
		})
	}
}

// BenchmarkRawContentInsert is BenchmarkSendAck's reference: the rows each
// policy must have committed before its ACK, written with plain multi-row
// INSERTs into the same MySQL, batches of rawBatch messages in one
// transaction each, rawWorkers connections, nothing else (no dedupe, no
// conv_seq counter, no publish): store writes one msg_content row per
// message, outbox one msg_content row and one mq_outbox row. The
// "+counter" runs add the row both policies' promise of a dense conv_seq
// needs: each conversation's conv_counter row advanced in the same
// transaction (one multi-row upsert per batch, ascending conv_id), the
// floor of what either policy must write. Run both with
//
//	go test -run '^$' -bench 'BenchmarkSendAck|BenchmarkRawContentInsert' -benchtime=100000x ./ref/reconcile/
func BenchmarkRawContentInsert(b *testing.B) {
	const rawBatch, rawWorkers = 256, 4
	for _, name := range []string{fanout.PolicyStore, fanout.PolicyOutbox, fanout.PolicyStore + "+counter", fanout.PolicyOutbox + "+counter"} {
		policy, counter := strings.CutSuffix(name, "+counter")
		b.Run(name, func(b *testing.B) {
			m := testenv.NewMySQL(b)
			db, counted := countedDB(b, m.DSN)
			pid := budget.ServerPID(context.Background(), m.DB)
			var next atomic.Int64
			errs := make(chan error, rawWorkers)
			var wg sync.WaitGroup
			b.ResetTimer()
			run := budget.Start(counted, nil, pid)
			t0 := time.Now()
			for range rawWorkers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for {
						lo := next.Add(rawBatch) - rawBatch
						if lo >= int64(b.N) {
							return
						}
						n := min(int64(rawBatch), int64(b.N)-lo)
						if err := rawContentBatch(db, policy == fanout.PolicyOutbox, counter, lo, n); err != nil {
							errs <- err
							return
						}
					}
				}()
			}
			wg.Wait()
			el := time.Since(t0)
			b.StopTimer()
			res := run.Result(b.N)
			close(errs)
			for err := range errs {
				b.Fatal(err)
			}
			b.ReportMetric(float64(b.N)/el.Seconds(), "msgs/s")
			res.Report(b)
		})
	}
}

// countedDB opens a pool on dsn whose round trips the budget counts.
func countedDB(b *testing.B, dsn string) (*sql.DB, *budget.SQL) {
	db, c, err := budget.OpenMySQL(dsn, budget.WithHandlerStats())
	if err != nil {
		b.Fatal(err)
	}
	// Few connections: the committers keep one each; the MySQL server is
	// shared.
	db.SetMaxOpenConns(16)
	db.SetMaxIdleConns(16)
	b.Cleanup(func() { db.Close() })
	return db, c
}

// rawContentBatch inserts messages lo+1..lo+n (msg_id = the index; the 1:1
// conversations of BenchmarkSendAck's senders), with counter their
// conversations' conv_counter rows advanced first.
func rawContentBatch(db *sql.DB, outbox, counter bool, lo, n int64) error {
	now := time.Now().UTC().Format("2006-01-02 15:04:05.000")
	var content, ob strings.Builder
	content.WriteString("INSERT INTO msg_content (msg_id, conv_id, conv_type, conv_seq, sender_uid, client_msg_id, content, created_at) VALUES ")
	ob.WriteString("INSERT INTO mq_outbox (topic, shard_key, payload, status, retry, created_at) VALUES ")
	convs := map[uint64]int{}
	for i := lo + 1; i <= lo+n; i++ {
		from := uint64(i%ackSenders + 1)
		conv, err := model.SingleConvID(from, from+1000)
		if err != nil {
			return err
		}
		convs[conv]++
		if i > lo+1 {
			content.WriteByte(',')
			ob.WriteByte(',')
		}
		fmt.Fprintf(&content, "(%d,%d,1,%d,%d,'b-%d','hello','%s')", i, conv, i, from, i, now)
		fmt.Fprintf(&ob, "('im.fanout.msg',%d,'{\"msg_id\":%d,\"conv_id\":%d,\"conv_seq\":%d,\"sender_uid\":%d,\"sent_at\":0}',0,0,'%s')", conv, i, conv, i, from, now)
	}
	tx, err := db.Begin()
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if counter {
		var sb strings.Builder
		sb.WriteString("INSERT INTO conv_counter (conv_id, max_seq) VALUES ")
		for i, c := range slices.Sorted(maps.Keys(convs)) {
			if i > 0 {
				sb.WriteByte(',')
			}
			fmt.Fprintf(&sb, "(%d,%d)", c, convs[c])
		}
		sb.WriteString(" ON DUPLICATE KEY UPDATE max_seq = max_seq + VALUES(max_seq)")
		if _, err := tx.Exec(sb.String()); err != nil {
			return err
		}
	}
	if _, err := tx.Exec(content.String()); err != nil {
		return err
	}
	if outbox {
		if _, err := tx.Exec(ob.String()); err != nil {
			return err
		}
	}
	return tx.Commit()
}

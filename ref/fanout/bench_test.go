package fanout

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"imlab/internal/testenv"
	"imlab/ref/model"
)

// BenchmarkFanout measures inbox rows/s through the inbox tier (consumer
// loops, body read back, fenced idempotent inbox writes, uk_uid_msg dedup)
// for 1:1 messages and for 500-member groups, draining a backlog published
// before the consumer starts, and beside it, in the same run, the raw
// baseline: a plain kfake consumer plus batched INSERTs of the same rows.
func BenchmarkFanout(b *testing.B) {
	for _, tc := range []struct {
		name    string
		members int
	}{{"1to1", 2}, {"group500", 500}} {
		b.Run(tc.name, func(b *testing.B) {
			b.StopTimer()
			f := newBenchFixture(b)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
			defer cancel()
			var convs []uint64
			if tc.members == 2 {
				for i := uint64(1); i <= 256; i++ {
					id, _ := model.SingleConvID(i, i+1000)
					convs = append(convs, id)
				}
			} else {
				for g := uint64(1); g <= 4; g++ {
					var ms []uint64
					for u := uint64(1); u <= 500; u++ {
						ms = append(ms, (g-1)*500+u)
					}
					f.groups[g] = ms
					convs = append(convs, g)
				}
			}
			n := max(b.N, 1)
			if tc.members == 500 {
				n = max(n/50, 4) // b.N counts rows; a group message is 500 rows
			}
			per := (n + len(convs) - 1) / len(convs)
			msgs := f.storeAndPublishB(b, ctx, convs, per)
			rows := len(msgs) * tc.members

			s := f.sink(b, DedupUK)
			cfg := testConsumerConfig(f.brokers, f.tp)
			t0 := time.Now()
			b.StartTimer()
			stop := runConsumer(b, cfg, s, f.prod)
			for countRows(b, f.my.DB, "SELECT COUNT(*) FROM offline_msg") < rows {
				time.Sleep(10 * time.Millisecond)
			}
			b.StopTimer()
			pipe := time.Since(t0)
			stop()

			raw := rawBaseline(b, ctx, f, rows, tc.members)
			b.ReportMetric(float64(rows)/pipe.Seconds(), "rows/s")
			b.ReportMetric(float64(rows)/raw.Seconds(), "raw_rows/s")
			b.ReportMetric(raw.Seconds()/pipe.Seconds(), "ratio")
		})
	}
}

func newBenchFixture(b *testing.B) *fixture {
	b.Helper()
	c := newCluster(b)
	f := &fixture{brokers: c.ListenAddrs(), tp: testTopics(), my: testenv.NewMySQL(b), rd: testenv.NewRedis(b),
		groups: map[uint64][]uint64{}}
	ensureTopics(b, f.brokers, f.tp)
	f.prod = testProducer(b, f.brokers)
	return f
}

func (f *fixture) storeAndPublishB(b *testing.B, ctx context.Context, convs []uint64, per int) []model.Message {
	b.Helper()
	var ms []model.Message
	msg := uint64(1 << 40)
	now := time.Now().UTC().Truncate(time.Millisecond)
	for s := 1; s <= per; s++ {
		for _, cv := range convs {
			msg++
			typ, a, _, _ := model.ParseConvID(cv)
			sender := a
			if typ == model.ConvGroup {
				sender = f.groups[a][s%len(f.groups[a])]
			}
			ms = append(ms, model.Message{MsgID: msg, ConvID: cv, ConvType: typ, ConvSeq: uint64(s), SenderUID: sender,
				ClientMsgID: fmt.Sprintf("c-%d", msg), Content: "bench message", CreatedAt: now})
		}
	}
	if err := StoreMessages(ctx, f.my.DB, ms); err != nil {
		b.Fatal(err)
	}
	recs := make([]*kgo.Record, 0, len(ms))
	for _, m := range ms {
		recs = append(recs, eventRecord(b, f.tp.Fanout, EventOf(m, false)))
	}
	if err := f.prod.PublishSync(ctx, recs); err != nil {
		b.Fatal(err)
	}
	return ms
}

// rawBaseline consumes the same topic with a bare group consumer and
// inserts the same number of rows into a copy of offline_msg in 2000-row
// INSERT IGNORE batches, 4 writers: no body read back, no fence, no dedup.
func rawBaseline(b *testing.B, ctx context.Context, f *fixture, rows, members int) time.Duration {
	b.Helper()
	if _, err := f.my.DB.ExecContext(ctx, "CREATE TABLE raw_msg LIKE offline_msg"); err != nil {
		b.Fatal(err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(f.brokers...), kgo.ConsumerGroup(testenv.RandomName("raw_")),
		kgo.ConsumeTopics(f.tp.Fanout), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	t0 := time.Now()
	work := make(chan []any, 8)
	done := make(chan error, 4)
	for w := 0; w < 4; w++ {
		go func() {
			for args := range work {
				q := "INSERT IGNORE INTO raw_msg (uid, seq, msg_id, conv_id, conv_type, sender_uid, created_at) VALUES " +
					strings.TrimSuffix(strings.Repeat("(?,?,?,?,?,?,?),", len(args)/7), ",")
				if _, err := f.my.DB.ExecContext(ctx, q, args...); err != nil {
					done <- err
					return
				}
			}
			done <- nil
		}()
	}
	written := 0
	var seq uint64
	args := make([]any, 0, 7*2000)
	for written < rows {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			b.Fatal(ctx.Err())
		}
		fs.EachRecord(func(r *kgo.Record) {
			ev, err := UnmarshalEvent(r.Value)
			if err != nil {
				return
			}
			for m := 0; m < members && written < rows; m++ {
				seq++
				args = append(args, uint64(m+1), seq, ev.MsgID, ev.ConvID, 1, ev.SenderUID, ev.SentAt)
				written++
				if len(args) == cap(args) {
					work <- args
					args = make([]any, 0, 7*2000)
				}
			}
		})
	}
	if len(args) > 0 {
		work <- args
	}
	close(work)
	for w := 0; w < 4; w++ {
		if err := <-done; err != nil {
			b.Fatal(err)
		}
	}
	return time.Since(t0)
}

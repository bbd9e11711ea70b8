package history

import (
	"context"
	"fmt"
	"strconv"
	"testing"

	"go.mongodb.org/mongo-driver/bson"
	"go.mongodb.org/mongo-driver/mongo"
	"go.mongodb.org/mongo-driver/mongo/options"

	"imlab/internal/testenv"
	"imlab/ref/model"
)

// Benchmarks compare the bucketed layout with one document per message in
// the same store, in the same run. By default they run against the
// embedded FerretDB (SQLite handler) that TestMain starts; those figures
// say nothing about real MongoDB, where both layouts use real indexes.
// With IMLAB_TEST_MONGO set they run against that server instead.
//
//	go test -run '^$' -bench . -benchtime 2s ./ref/history/
//	IMLAB_TEST_MONGO=mongodb://127.0.0.1:27017 go test -run '^$' -bench . ./ref/history/

// perMsgDoc is the one-document-per-message baseline: _id "{conv}:{seq}".
type perMsgDoc struct {
	ID     string  `bson:"_id"`
	ConvID string  `bson:"conv_id"`
	Seq    int64   `bson:"seq"`
	Msg    *msgDoc `bson:"msg"`
}

func perMsgColl(b *testing.B, db *mongo.Database) *mongo.Collection {
	c := db.Collection("permsg")
	if _, err := c.Indexes().CreateOne(context.Background(), mongo.IndexModel{
		Keys: bson.D{{Key: "conv_id", Value: 1}, {Key: "seq", Value: 1}},
	}); err != nil {
		b.Fatal(err)
	}
	return c
}

func writePerMsg(ctx context.Context, c *mongo.Collection, msgs []model.Message) error {
	docs := make([]any, len(msgs))
	for i, m := range msgs {
		docs[i] = perMsgDoc{
			ID:     strconv.FormatUint(m.ConvID, 10) + ":" + strconv.FormatUint(m.ConvSeq, 10),
			ConvID: strconv.FormatUint(m.ConvID, 10), Seq: int64(m.ConvSeq), Msg: toMsgDoc(m),
		}
	}
	_, err := c.InsertMany(ctx, docs, options.InsertMany().SetOrdered(false))
	if err != nil && !mongo.IsDuplicateKeyError(err) { // a replay: idempotent
		return err
	}
	return nil
}

func BenchmarkHistoryWrite(b *testing.B) {
	ctx := context.Background()
	b.Logf("store: %s", storeName())
	for _, batch := range []int{1, 20} {
		b.Run(fmt.Sprintf("bucketed/batch=%d", batch), func(b *testing.B) {
			s := newStore(b, newDB(b, nil), nil)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				from := uint64(i*batch + 1)
				if err := s.WriteBatch(ctx, msgsFor(testGroup, from, from+uint64(batch)-1, 1, 2)); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N*batch)/b.Elapsed().Seconds(), "msgs/s")
		})
		b.Run(fmt.Sprintf("per-message/batch=%d", batch), func(b *testing.B) {
			c := perMsgColl(b, newDB(b, nil))
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				from := uint64(i*batch + 1)
				if err := writePerMsg(ctx, c, msgsFor(testGroup, from, from+uint64(batch)-1, 1, 2)); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N*batch)/b.Elapsed().Seconds(), "msgs/s")
		})
	}
}

// benchPreload is the number of messages of the read benchmarks' conversation.
const benchPreload = 1000

func BenchmarkHistoryRead(b *testing.B) {
	ctx := context.Background()
	b.Logf("store: %s", storeName())
	db := newDB(b, nil)
	s := newStore(b, db, nil)
	c := perMsgColl(b, db)
	all := msgsFor(testGroup, 1, benchPreload, 1, 2)
	for i := 0; i < len(all); i += 100 {
		if err := s.WriteBatch(ctx, all[i:i+100]); err != nil {
			b.Fatal(err)
		}
		if err := writePerMsg(ctx, c, all[i:i+100]); err != nil {
			b.Fatal(err)
		}
	}
	r := testenv.NewRedis(b)
	svc, err := NewService(s, Deps{Redis: r.Client, Keys: r.Keys, Members: groupOf(testGroup, 1)})
	if err != nil {
		b.Fatal(err)
	}
	// Range starts step through the conversation; 37 keeps them unaligned
	// so that some ranges span two buckets.
	start := func(i, n int) uint64 { return uint64((i*37)%(benchPreload-n)) + 1 }
	for _, n := range []int{20, 100} {
		b.Run(fmt.Sprintf("bucketed/range=%d", n), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				from := start(i, n)
				seqs := make([]uint64, n)
				for j := range seqs {
					seqs[j] = from + uint64(j)
				}
				rr, err := s.ReadSlots(ctx, testGroup, seqs)
				if err != nil {
					b.Fatal(err)
				}
				if sl := rr.Slots[from]; sl.State != SlotFilled {
					b.Fatalf("seq %d not read", from)
				}
			}
			b.ReportMetric(float64(b.N*n)/b.Elapsed().Seconds(), "msgs/s")
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "reads/s")
		})
		b.Run(fmt.Sprintf("bucketed-service-cached/range=%d", n), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				from := start(i, n)
				items, err := svc.History(ctx, 1, testGroup, from, from+uint64(n)-1)
				if err != nil || len(items) != n {
					b.Fatalf("history: %d items, %v", len(items), err)
				}
			}
			b.ReportMetric(float64(b.N*n)/b.Elapsed().Seconds(), "msgs/s")
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "reads/s")
		})
		b.Run(fmt.Sprintf("per-message-range-query/range=%d", n), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				from := start(i, n)
				cur, err := c.Find(ctx, bson.D{
					{Key: "conv_id", Value: strconv.FormatUint(testGroup, 10)},
					{Key: "seq", Value: bson.D{{Key: "$gte", Value: int64(from)}, {Key: "$lte", Value: int64(from) + int64(n) - 1}}},
				}, options.Find().SetSort(bson.D{{Key: "seq", Value: 1}}))
				if err != nil {
					b.Fatal(err)
				}
				var docs []perMsgDoc
				if err := cur.All(ctx, &docs); err != nil || len(docs) != n {
					b.Fatalf("%d docs, %v", len(docs), err)
				}
			}
			b.ReportMetric(float64(b.N*n)/b.Elapsed().Seconds(), "msgs/s")
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "reads/s")
		})
		b.Run(fmt.Sprintf("per-message-by-id/range=%d", n), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				from := start(i, n)
				for j := 0; j < n; j++ {
					var d perMsgDoc
					id := strconv.FormatUint(testGroup, 10) + ":" + strconv.FormatUint(from+uint64(j), 10)
					if err := c.FindOne(ctx, bson.D{{Key: "_id", Value: id}}).Decode(&d); err != nil {
						b.Fatal(err)
					}
				}
			}
			b.ReportMetric(float64(b.N*n)/b.Elapsed().Seconds(), "msgs/s")
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "reads/s")
		})
	}
}

// BenchmarkHistoryWriteManyConvs writes batches of one message each of
// `batch` different 1:1 conversations, cycling through `convs` of them, so
// the collection grows to convs buckets: the history tier's shape under
// 1:1 traffic.
func BenchmarkHistoryWriteManyConvs(b *testing.B) {
	ctx := context.Background()
	b.Logf("store: %s", storeName())
	for _, tc := range []struct{ convs, batch int }{{2000, 1}, {2000, 20}} {
		b.Run(fmt.Sprintf("convs=%d/batch=%d", tc.convs, tc.batch), func(b *testing.B) {
			var cnt cmdCounter
			s := newStore(b, newDB(b, cnt.monitor()), nil)
			ids := make([]uint64, tc.convs)
			for i := range ids {
				id, err := model.SingleConvID(uint64(1000+2*i), uint64(1001+2*i))
				if err != nil {
					b.Fatal(err)
				}
				ids[i] = id
			}
			seq := make([]uint64, tc.convs)
			next := 0
			cnt.reset()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				msgs := make([]model.Message, 0, tc.batch)
				for j := 0; j < tc.batch; j++ {
					c := next % tc.convs
					next++
					seq[c]++
					m := msgsFor(ids[c], seq[c], seq[c], uint64(1000+2*c), uint64(1001+2*c))[0]
					m.MsgID = uint64(next)
					msgs = append(msgs, m)
				}
				if err := s.WriteBatch(ctx, msgs); err != nil {
					b.Fatal(err)
				}
			}
			n := float64(b.N * tc.batch)
			b.ReportMetric(n/b.Elapsed().Seconds(), "msgs/s")
			b.ReportMetric(float64(cnt.get("update"))/n, "updates/msg")
			b.ReportMetric(float64(cnt.get("insert"))/n, "inserts/msg")
		})
	}
}

func storeName() string {
	if onFerret {
		return "embedded FerretDB v1 (SQLite handler)"
	}
	return "IMLAB_TEST_MONGO=" + mongoURI
}

package fanout

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"imlab/internal/testenv"
	"imlab/ref/inbox"
	"imlab/ref/seqalloc"
)

// TestOutboxHealthSurvivesProducerRecreate: the outbox policy's health
// check must ping with the producer's current client. After the topic is
// deleted and re-created the producer replaces (and closes) its client; a
// check that kept the first client would fail every later ping and send
// every batch down the direct fan-out for good. Close must also wait for
// the health goroutine.
func TestOutboxHealthSurvivesProducerRecreate(t *testing.T) {
	f := newFixture(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cfg := DefaultConfig()
	cfg.Topics = f.tp
	cfg.Consumer.Group = testenv.RandomName("inbox_")
	cfg.HealthInterval = 100 * time.Millisecond
	rt, err := NewRuntime(ctx, cfg, f.runtimeDeps())
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	defer func() {
		if !closed {
			rt.Close(context.Background())
		}
	}()
	pol, err := rt.Policy(PolicyOutbox)
	if err != nil {
		t.Fatal(err)
	}
	o := pol.(*Outbox)
	time.Sleep(3 * cfg.HealthInterval)
	if o.health.Down() {
		t.Fatal("health down before anything happened")
	}

	rec := &kgo.Record{Topic: f.tp.Fanout, Key: ShardKey(1), Value: []byte("x")}
	if err := rt.Producer().PublishSync(ctx, []*kgo.Record{rec}); err != nil {
		t.Fatal(err) // the client now knows the topic's id
	}
	adm := kadm.NewClient(testenv.KafkaClient(t, f.brokers))
	if _, err := adm.DeleteTopics(ctx, f.tp.Fanout); err != nil {
		t.Fatal(err)
	}
	waitGone(t, ctx, adm, f.tp.Fanout)
	ensureTopics(t, f.brokers, f.tp)
	if err := rt.Producer().PublishSync(ctx, []*kgo.Record{rec}); err != nil {
		t.Fatalf("publish after re-creation: %v", err)
	}
	if rt.Producer().Recreates() == 0 {
		t.Fatal("the producer did not replace its client; the test proves nothing")
	}
	// Several pings later the brokers must still count as up.
	deadline := time.Now().Add(2 * time.Second)
	for time.Now().Before(deadline) {
		time.Sleep(cfg.HealthInterval)
		if time.Now().After(deadline.Add(-time.Second)) && o.health.Down() {
			t.Fatal("health reports the brokers down after the producer replaced its client")
		}
	}

	rt.Close(context.Background())
	closed = true
	select {
	case <-o.health.done:
	default:
		t.Fatal("Close returned while the health goroutine still runs")
	}
}

// runtimeDeps are a Runtime's dependencies on the fixture's servers: its
// database, Redis, brokers and groups, a fresh registry, and inbox writers
// on the Redis allocator.
func (f *fixture) runtimeDeps() Deps {
	return Deps{DB: f.my.DB, Redis: f.rd.Client, Keys: f.rd.Keys, Registry: prometheus.NewRegistry(),
		Brokers: f.brokers, Members: f.members,
		NewWriter: func(d inbox.Dedup) (*inbox.Writer, error) {
			c := inbox.DefaultConfig()
			c.Dedup = d
			return inbox.NewWriter(seqalloc.NewRedis(f.rd.Client, f.rd.Keys), c, nil)
		}}
}

package fanout

import (
	"context"
	"database/sql"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestLagIsAgeOfOldestUnprocessed: with the consumer down, lag per
// partition is the age of the first unprocessed record's sent_at (the
// oldest, not the newest) plus the record count; after the consumer caught
// up both are 0. Dead letters show as the DLQ size.
func TestLagIsAgeOfOldestUnprocessed(t *testing.T) {
	brokers, tp, p := newKafka(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cfg := testConsumerConfig(brokers, tp)

	now := time.Now()
	conv := uint64(42)
	part := int32(PartitionOf(conv, DefaultPartitions))
	var recs []*kgo.Record
	for i := 0; i < 5; i++ { // sent 60s, 50s, ... 20s ago
		recs = append(recs, eventRecord(t, tp.Fanout, Event{MsgID: uint64(100 + i), ConvID: conv, ConvSeq: uint64(i + 1),
			SenderUID: 1, SentAt: now.Add(-time.Duration(60-10*i) * time.Second)}))
	}
	if err := p.PublishSync(ctx, recs); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	m, err := NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	mc := DefaultMonitorConfig()
	mc.Brokers, mc.Topic, mc.DLQTopic, mc.Groups = brokers, tp.Fanout, tp.DLQ, []string{cfg.Group}
	mo, err := NewMonitor(mc, nil, m)
	if err != nil {
		t.Fatal(err)
	}
	defer mo.Close()
	s, err := mo.Poll(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, pl := range s.Partitions {
		if pl.Partition != part && pl.Records != 0 {
			t.Fatalf("partition %d has lag %+v", pl.Partition, pl)
		}
	}
	got := partitionLag(s, part)
	if got == nil || got.Records != 5 || got.AgeSeconds < 59 || got.AgeSeconds > 65 {
		t.Fatalf("lag of partition %d: %+v (errors %v)", part, got, s.Errors)
	}
	if s.MaxAgeSeconds[cfg.Group] != got.AgeSeconds || s.Records[cfg.Group] != 5 {
		t.Fatalf("summary %+v", s)
	}

	// Process the first two only (the third fails for good → DLQ, the
	// rest succeed): lag goes to 0, DLQ size 1.
	stop := runConsumer(t, cfg, HandlerFunc(func(ctx context.Context, ds []Delivery) error {
		for _, d := range ds {
			if d.Event.MsgID == 102 {
				return Permanent(context.DeadlineExceeded)
			}
		}
		return nil
	}), p)
	defer stop()
	waitFor(t, 30*time.Second, "caught up", func() bool {
		s, err = mo.Poll(ctx)
		return err == nil && s.Records[cfg.Group] == 0
	})
	if s.MaxAgeSeconds[cfg.Group] != 0 || s.DLQRecords != 1 {
		t.Fatalf("after catching up: %+v", s)
	}
}

// lagFixture is a private cluster with five records waiting on one
// partition for a group that never committed, and a monitor of that group.
func lagFixture(t *testing.T, probeTimeout time.Duration) (*kfake.Cluster, *Monitor, string, int32) {
	t.Helper()
	c := newCluster(t)
	brokers, tp := c.ListenAddrs(), testTopics()
	ensureTopics(t, brokers, tp)
	p := testProducer(t, brokers)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conv := uint64(7)
	var recs []*kgo.Record
	for i := 0; i < 5; i++ {
		recs = append(recs, eventRecord(t, tp.Fanout, Event{MsgID: uint64(200 + i), ConvID: conv, ConvSeq: uint64(i + 1),
			SenderUID: 1, SentAt: time.Now().Add(-30 * time.Second)}))
	}
	if err := p.PublishSync(ctx, recs); err != nil {
		t.Fatal(err)
	}
	mc := DefaultMonitorConfig()
	group := "lag-" + tp.Fanout
	mc.Brokers, mc.Topic, mc.DLQTopic, mc.Groups, mc.ProbeTimeout = brokers, tp.Fanout, tp.DLQ, []string{group}, probeTimeout
	mo, err := NewMonitor(mc, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(mo.Close)
	return c, mo, group, int32(PartitionOf(conv, DefaultPartitions))
}

// partitionLag is partition part's lag in s, nil when s has none.
func partitionLag(s LagSnapshot, part int32) *PartitionLag {
	for i := range s.Partitions {
		if s.Partitions[i].Partition == part {
			return &s.Partitions[i]
		}
	}
	return nil
}

// TestLagProbeTimeoutIsUnknown: when the first unprocessed record cannot
// be read in time (every Fetch is left unanswered), the partition's age is
// unknown, not 0, the group counts it in UnknownAge, the snapshot is not
// Complete and says why.
func TestLagProbeTimeoutIsUnknown(t *testing.T) {
	c, mo, group, part := lagFixture(t, 300*time.Millisecond)
	c.ControlKey(int16(kmsg.Fetch), func(kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		return nil, nil, true // never answered
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := mo.Poll(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := partitionLag(s, part)
	if got == nil || got.Records != 5 || !got.AgeUnknown || got.AgeSeconds != 0 {
		t.Fatalf("partition %d with 5 records waiting and the probe timed out: %+v, want age unknown", part, got)
	}
	if s.UnknownAge[group] != 1 || s.Complete() || len(s.Errors) == 0 {
		t.Fatalf("snapshot: unknown %v, complete %v, errors %v: want 1 unknown, incomplete, an error", s.UnknownAge, s.Complete(), s.Errors)
	}
	if last := mo.Snapshot(); last.Complete() || last.UnknownAge[group] != 1 {
		t.Fatalf("stored snapshot %+v", last)
	}
}

// TestLagMonitorKeepsItsClients: successive polls reuse the monitor's
// clients: after the first poll (almost) no new connection is made (an
// ApiVersions handshake per connection reaches the broker), and every poll
// still reads the age.
func TestLagMonitorKeepsItsClients(t *testing.T) {
	c, mo, group, _ := lagFixture(t, 2*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if s, err := mo.Poll(ctx); err != nil || !s.Complete() || s.MaxAgeSeconds[group] < 29 {
		t.Fatalf("first poll: %+v, %v", s, err)
	}
	var handshakes atomic.Int64
	c.ControlKey(int16(kmsg.ApiVersions), func(kmsg.Request) (kmsg.Response, error, bool) {
		handshakes.Add(1)
		c.KeepControl()
		return nil, nil, false // observed only
	})
	const polls = 5
	for i := 0; i < polls; i++ {
		s, err := mo.Poll(ctx)
		if err != nil || !s.Complete() || s.MaxAgeSeconds[group] < 29 {
			t.Fatalf("poll %d: %+v, %v", i+2, s, err)
		}
	}
	// A client per poll makes at least one connection per poll (three
	// here: metadata, offsets, fetch); kept clients may reopen one.
	if n := handshakes.Load(); n > 1 {
		t.Fatalf("%d new connections in %d polls: the monitor must keep its clients", n, polls)
	}
}

// TestLagFailedPollReplacesSnapshot: a poll that fails as a whole (the
// broker gone) stores a snapshot that says so, so that the previous
// measurement is not served as current.
func TestLagFailedPollReplacesSnapshot(t *testing.T) {
	c, mo, group, _ := lagFixture(t, 300*time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if s, err := mo.Poll(ctx); err != nil || !s.Complete() {
		t.Fatalf("first poll: %+v, %v", s, err)
	}
	c.Close()
	pctx, pcancel := context.WithTimeout(ctx, 2*time.Second)
	defer pcancel()
	if _, err := mo.Poll(pctx); err == nil {
		t.Fatal("poll with the broker gone: no error")
	}
	last := mo.Snapshot()
	if last.Complete() || len(last.Errors) == 0 {
		t.Fatalf("snapshot after a failed poll: %+v", last)
	}
	if _, ok := last.MaxAgeSeconds[group]; ok {
		t.Fatalf("a failed poll reports an age for %s: %v", group, last.MaxAgeSeconds)
	}
}

// TestLagFreshMeasuresOnceForConcurrentCallers: Fresh answers from the
// latest measurement while it is younger than freshEnough; callers that
// find it older at once share one new measurement instead of each taking
// their own.
func TestLagFreshMeasuresOnceForConcurrentCallers(t *testing.T) {
	_, mo, _, _ := lagFixture(t, 300*time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	first, err := mo.Poll(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if s := mo.Fresh(ctx); !s.At.Equal(first.At) {
		t.Fatalf("Fresh right after a poll measured again (%v, then %v)", first.At, s.At)
	}
	time.Sleep(freshEnough + 20*time.Millisecond)
	const callers = 8
	ats := make(chan time.Time, callers)
	for range callers {
		go func() { ats <- mo.Fresh(ctx).At }()
	}
	var seen []time.Time
	for range callers {
		at := <-ats
		if !at.After(first.At) {
			t.Fatalf("Fresh answered the stale measurement of %v", first.At)
		}
		if !slices.ContainsFunc(seen, at.Equal) {
			seen = append(seen, at)
		}
	}
	if len(seen) != 1 {
		t.Fatalf("%d concurrent callers of a stale monitor took %d measurements, want 1", callers, len(seen))
	}
}

// TestLagOutboxErrorApart: when the outbox query fails and Kafka answers,
// the snapshot names the outbox's error in OutboxError (and among Errors,
// so it is incomplete), measures the consumer lag all the same, and leaves
// the outbox's age unknown (-1), never 0.
func TestLagOutboxErrorApart(t *testing.T) {
	_, mo, group, _ := lagFixture(t, 5*time.Second)
	db, err := sql.Open("mysql", "root@tcp(127.0.0.1:1)/none?timeout=500ms")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	mo.db = db
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := mo.Poll(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if s.OutboxError == "" || !slices.Contains(s.Errors, s.OutboxError) || len(s.Errors) != 1 || s.Complete() {
		t.Fatalf("outbox error %q, errors %q, complete %v: want the outbox's error apart and among the errors", s.OutboxError, s.Errors, s.Complete())
	}
	if s.OutboxOldestAgeSeconds >= 0 {
		t.Fatalf("outbox oldest age %v with its query failed: want unknown (-1)", s.OutboxOldestAgeSeconds)
	}
	if s.MaxAgeSeconds[group] < 29 || len(s.UnknownAge) != 0 {
		t.Fatalf("consumer lag %v (unknown %v): want it measured (about 30s)", s.MaxAgeSeconds, s.UnknownAge)
	}
}

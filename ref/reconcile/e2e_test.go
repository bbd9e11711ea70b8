package reconcile_test

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"

	"imlab/internal/testenv"
	"imlab/ref/fanout"
	"imlab/ref/inbox"
	"imlab/ref/model"
	"imlab/ref/reconcile"
	"imlab/ref/send"
	"imlab/ref/seqalloc"
)

// pipeline is one policy's whole write side on the real MariaDB, Redis and
// a private kfake cluster: send service, inbox-tier consumer, relay,
// reconciler.
type pipeline struct {
	t       testing.TB
	policy  string
	brokers []string
	tp      fanout.Topics
	db      *sql.DB
	rd      *testenv.Redis
	prod    *fanout.Producer
	svc     *send.Service
	relay   *fanout.Relay
	rec     *reconcile.Reconciler
	group   string
	direct  *fanout.Direct
	health  *fanout.Health

	mu    sync.Mutex
	acked map[uint64][]uint64 // msg_id → recipients
}

func newPipeline(t *testing.T, policy string) *pipeline { return newPipelineTB(t, policy) }

func newPipelineB(b *testing.B, policy string) *pipeline { return newPipelineTB(b, policy) }

// pipeOpts varies a pipeline for the fault tests.
type pipeOpts struct {
	// brokers, when set, are used instead of a private kfake cluster.
	brokers []string
	// direct gives store and outbox a direct fan-out (and outbox a health
	// probe) for when the queue is down; directHook sees its inbox commits.
	direct     bool
	directHook send.CommitHook
	// deliveryTimeout overrides the producer's (a queue that is down fails
	// a publish after it).
	deliveryTimeout time.Duration
	// recGrace overrides the reconciler's grace period.
	recGrace time.Duration
	// db, when set, is the pipeline's MySQL pool (a counted one) instead of
	// a fresh test database's.
	db *sql.DB
}

func newPipelineTB(t testing.TB, policy string) *pipeline {
	return newPipelineOpts(t, policy, pipeOpts{})
}

func newPipelineOpts(t testing.TB, policy string, o pipeOpts) *pipeline {
	t.Helper()
	brokers := o.brokers
	if brokers == nil {
		c, err := kfake.NewCluster(kfake.NumBrokers(1))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Close)
		brokers = c.ListenAddrs()
	}
	var err error
	db := o.db
	if db == nil {
		db = testenv.NewMySQL(t).DB
	}
	p := &pipeline{t: t, policy: policy, brokers: brokers, tp: fanout.DefaultTopics(),
		db: db, rd: testenv.NewRedis(t), acked: map[uint64][]uint64{},
		group: testenv.RandomName("inbox_")}
	p.tp.Fanout = testenv.RandomName("fan_")
	p.tp.DLQ = p.tp.Fanout + "_dlq"
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := fanout.EnsureTopics(ctx, testenv.KafkaClient(t, p.brokers), p.tp); err != nil {
		t.Fatal(err)
	}
	pc := fanout.DefaultProducerConfig()
	pc.Brokers = p.brokers
	if o.deliveryTimeout > 0 {
		pc.DeliveryTimeout = o.deliveryTimeout
	}
	if p.prod, err = fanout.NewProducer(pc); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.prod.Close)

	if o.direct {
		dctx, dcancel := context.WithCancel(context.Background())
		var hooks []send.CommitHook
		if o.directHook != nil {
			hooks = append(hooks, o.directHook)
		}
		if p.direct, err = fanout.NewDirect(dctx, fanout.DefaultDirectConfig(), p.sink(hooks...), nil); err != nil {
			t.Fatal(err)
		}
		p.health = fanout.NewHealth(dctx, p.prod, 100*time.Millisecond)
		t.Cleanup(func() { dcancel(); p.direct.Wait(); p.health.Wait() })
	}

	w := p.writer(nil)
	var pol send.Policy
	switch policy {
	case fanout.PolicyStore:
		pol, err = fanout.NewStore(p.prod, p.tp.Fanout, p.direct, nil, nil)
	case fanout.PolicyOutbox:
		rc := fanout.DefaultRelayConfig()
		rc.ConfirmTimeout = time.Second
		rc.MaintainEvery = 100 * time.Millisecond
		rc.LockName = testenv.RandomName("relay_")
		if p.relay, err = fanout.NewRelay(rc, p.db, p.prod, nil); err != nil {
			t.Fatal(err)
		}
		if p.direct != nil {
			pol, err = fanout.NewOutbox(p.tp.Fanout, p.relay.Wake, p.health, p.direct)
		} else {
			pol, err = fanout.NewOutbox(p.tp.Fanout, p.relay.Wake, nil, nil)
		}
	case fanout.PolicyQueue:
		pol, err = fanout.NewQueue(p.prod, p.tp.Fanout, nil, nil)
	}
	if err != nil {
		t.Fatal(err)
	}
	cfg := send.DefaultConfig()
	cfg.Policy = policy
	cfg.Policies = []send.Policy{pol}
	if p.svc, err = send.New(context.Background(), cfg, p.db, w, prometheus.NewRegistry()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.svc.Close() })
	rcfg := reconcile.DefaultConfig()
	if o.recGrace > 0 {
		rcfg.Grace = o.recGrace
	}
	if p.rec, err = reconcile.New(rcfg, p.db, p.writer(nil), p.svc.Members, nil, nil); err != nil {
		t.Fatal(err)
	}
	return p
}

func (p *pipeline) writer(d inbox.Dedup) *inbox.Writer {
	cfg := inbox.DefaultConfig()
	cfg.Dedup = d
	w, err := inbox.NewWriter(seqalloc.NewRedis(p.rd.Client, p.rd.Keys), cfg, nil)
	if err != nil {
		p.t.Fatal(err)
	}
	return w
}

// sink builds an inbox-tier sink (uk_uid_msg dedup) with hooks.
func (p *pipeline) sink(hooks ...send.CommitHook) *fanout.InboxSink {
	st, err := fanout.NewStrategy(fanout.DedupUK, fanout.StrategyDeps{Keys: p.rd.Keys})
	if err != nil {
		p.t.Fatal(err)
	}
	// Members are read through the send service, built after the sink
	// for the direct fan-out: resolve it at call time.
	members := func(ctx context.Context, g uint64) ([]uint64, error) { return p.svc.Members(ctx, g) }
	sink, err := fanout.NewInboxSink(fanout.DefaultInboxSinkConfig(), p.db, p.writer(st), st, members, nil, hooks...)
	if err != nil {
		p.t.Fatal(err)
	}
	return sink
}

// startConsumer runs an inbox-tier member; the returned func stops it.
func (p *pipeline) startConsumer() func() {
	sink := p.sink()
	cc := fanout.DefaultConsumerConfig()
	cc.Brokers, cc.Topic, cc.DLQTopic, cc.Group = p.brokers, p.tp.Fanout, p.tp.DLQ, p.group
	cc.SessionTimeout = 6 * time.Second
	c, err := fanout.NewConsumer(cc, sink, p.prod, nil)
	if err != nil {
		p.t.Fatal(err)
	}
	return p.start(c.Run)
}

func (p *pipeline) start(run func(context.Context) error) func() {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					p.t.Errorf("stopped with %v", err)
				}
			case <-time.After(30 * time.Second):
				p.t.Errorf("did not stop")
			}
		})
	}
	p.t.Cleanup(stop)
	return stop
}

// send sends n messages from each of senders goroutines, mixing 1:1 among
// uids 1..12 and group 9 (members 1..12), and records the ACKs.
func (p *pipeline) send(ctx context.Context, tag string, senders, n int) {
	var wg sync.WaitGroup
	for s := 1; s <= senders; s++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(s), uint64(len(tag))))
			for i := 0; i < n; i++ {
				req := model.SendRequest{SenderUID: uint64(s), ClientMsgID: fmt.Sprintf("%s-%d-%d", tag, s, i), Content: "hi"}
				var rcpts []uint64
				if i%3 == 2 {
					req.ConvType, req.GroupID = model.ConvGroup, 9
					for u := uint64(1); u <= 12; u++ {
						rcpts = append(rcpts, u)
					}
				} else {
					to := uint64(1 + rng.IntN(12))
					if to == uint64(s) {
						to = uint64(s%12 + 1)
					}
					req.ConvType, req.ToUID = model.ConvSingle, to
					rcpts = []uint64{uint64(s), to}
				}
				res, err := p.svc.Send(ctx, req)
				if err != nil {
					p.t.Errorf("send: %v", err)
					return
				}
				p.mu.Lock()
				p.acked[res.MsgID] = rcpts
				p.mu.Unlock()
			}
		}()
	}
	wg.Wait()
}

func (p *pipeline) ackedCount() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.acked)
}

// lost counts ACKed (uid, msg_id) pairs missing from the inboxes.
func (p *pipeline) lost(ctx context.Context) (lost, total int) {
	have := map[[2]uint64]bool{}
	rows, err := p.db.QueryContext(ctx, "SELECT uid, msg_id FROM offline_msg")
	if err != nil {
		p.t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var u, m uint64
		if err := rows.Scan(&u, &m); err != nil {
			p.t.Fatal(err)
		}
		have[[2]uint64{u, m}] = true
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for m, rs := range p.acked {
		for _, u := range rs {
			total++
			if !have[[2]uint64{u, m}] {
				lost++
			}
		}
	}
	return lost, total
}

func (p *pipeline) waitDelivered(ctx context.Context, d time.Duration) (lost, total int) {
	deadline := time.Now().Add(d)
	for {
		lost, total = p.lost(ctx)
		if lost == 0 || time.Now().After(deadline) {
			return lost, total
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// begin creates the test group and starts the relay when the policy has
// one; the context it returns ends after d or with the test.
func (p *pipeline) begin(d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	p.t.Cleanup(cancel)
	p.createGroup(ctx)
	if p.relay != nil {
		p.start(p.relay.Run)
	}
	return ctx
}

func (p *pipeline) createGroup(ctx context.Context) {
	var members []uint64
	for u := uint64(1); u <= 12; u++ {
		members = append(members, u)
	}
	if err := p.svc.CreateGroup(ctx, 9, members); err != nil {
		p.t.Fatal(err)
	}
}

// TestPoliciesNormalLoad: under each policy, many senders in 1:1 and one
// group, the consumer restarted and joined by a second member (rebalance)
// mid-way: every ACKed message reaches every recipient's inbox once, in
// conversation order.
func TestPoliciesNormalLoad(t *testing.T) {
	for _, policy := range []string{fanout.PolicyStore, fanout.PolicyOutbox, fanout.PolicyQueue} {
		t.Run(policy, func(t *testing.T) {
			p := newPipeline(t, policy)
			ctx := p.begin(90 * time.Second)
			stop1 := p.startConsumer()
			p.send(ctx, "a", 8, 30)
			stop1() // restart
			stop2 := p.startConsumer()
			p.send(ctx, "b", 8, 30)
			p.startConsumer() // a second member: rebalance
			p.send(ctx, "c", 8, 30)
			stop2() // and one leaves: another rebalance
			p.send(ctx, "d", 8, 30)
			lost, total := p.waitDelivered(ctx, 40*time.Second)
			if lost != 0 {
				t.Fatalf("%s: %d of %d ACKed inbox rows missing under normal load", policy, lost, total)
			}
			if d := orderDeviations(t, p.db); d != 0 {
				t.Errorf("%s: %d inbox rows out of conversation order", policy, d)
			}
			var dup int
			if err := p.db.QueryRow(`SELECT COUNT(*) - COUNT(DISTINCT uid, msg_id) FROM offline_msg`).Scan(&dup); err != nil || dup != 0 {
				t.Fatalf("duplicate inbox rows: %d (%v)", dup, err)
			}
			t.Logf("%s: %d ACKed inbox rows delivered", policy, total)
		})
	}
}

// deleteAllRecords deletes every record currently in the topic (the queue
// loses what the consumers had not read yet).
func deleteAllRecords(t *testing.T, ctx context.Context, brokers []string, topic string) int64 {
	t.Helper()
	adm := kadm.NewClient(testenv.KafkaClient(t, brokers))
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	os := kadm.Offsets{}
	ends.Each(func(o kadm.ListedOffset) {
		n += o.Offset
		os.Add(kadm.Offset{Topic: topic, Partition: o.Partition, At: o.Offset})
	})
	resp, err := adm.DeleteRecords(ctx, os)
	if err != nil {
		t.Fatal(err)
	}
	if err := resp.Error(); err != nil {
		t.Fatal(err)
	}
	return n
}

func recreateTopic(t *testing.T, ctx context.Context, brokers []string, tp fanout.Topics) {
	t.Helper()
	cl := testenv.KafkaClient(t, brokers)
	adm := kadm.NewClient(cl)
	if _, err := adm.DeleteTopics(ctx, tp.Fanout); err != nil {
		t.Fatal(err)
	}
	for i := 0; ; i++ {
		md, err := adm.Metadata(ctx, tp.Fanout)
		if err == nil {
			if d, ok := md.Topics[tp.Fanout]; !ok || d.Err != nil {
				break
			}
		}
		if i > 200 {
			t.Fatal("topic not deleted")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := fanout.EnsureTopics(ctx, cl, tp); err != nil {
		t.Fatal(err)
	}
}

// TestQueueLoss: the queue loses records before they are consumed (records
// deleted, then the topic deleted and recreated). store and outbox end with
// every ACKed message in every inbox (store through forward
// reconciliation, outbox through the relay's republish); queue loses some.
func TestQueueLoss(t *testing.T) {
	lost := map[string]int{}
	for _, policy := range []string{fanout.PolicyStore, fanout.PolicyOutbox, fanout.PolicyQueue} {
		t.Run(policy, func(t *testing.T) {
			p := newPipeline(t, policy)
			since := time.Now().Add(-time.Minute)
			ctx := p.begin(90 * time.Second)
			// Consumers down; sends are ACKed; then the queue loses them.
			p.send(ctx, "a", 6, 20)
			if p.relay != nil {
				waitFor(t, 20*time.Second, func() bool { return p.relay.Stats().Published >= int64(len(p.acked)) })
			} else {
				p.prod.Flush(ctx)
			}
			dropped := deleteAllRecords(t, ctx, p.brokers, p.tp.Fanout)
			p.send(ctx, "b", 6, 10)
			if p.relay != nil {
				waitFor(t, 20*time.Second, func() bool { return p.relay.Stats().Published >= int64(len(p.acked)) })
			} else {
				p.prod.Flush(ctx)
			}
			recreateTopic(t, ctx, p.brokers, p.tp)
			p.send(ctx, "c", 6, 10) // the producer recovers from UNKNOWN_TOPIC_ID by itself
			p.startConsumer()
			n, total := p.waitDelivered(ctx, 10*time.Second)
			t.Logf("%s: %d records deleted; before reconciliation %d of %d ACKed inbox rows missing", policy, dropped, n, total)
			rep, err := p.rec.Run(ctx, since, time.Now().Add(time.Second))
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s: reconciliation: %+v", policy, rep.Forward)
			n, total = p.lost(ctx)
			lost[policy] = n
			if policy != fanout.PolicyQueue {
				if n != 0 {
					t.Fatalf("%s lost %d of %d ACKed inbox rows", policy, n, total)
				}
				// Safe to re-run: the second run finds nothing.
				rep2, err := p.rec.Run(ctx, since, time.Now().Add(time.Second))
				if err != nil {
					t.Fatal(err)
				}
				if rep2.Forward.MissingRows != 0 || rep2.Forward.Repaired != 0 {
					t.Fatalf("second reconciliation run repaired again: %+v", rep2.Forward)
				}
			}
		})
	}
	if lost[fanout.PolicyStore] != 0 || lost[fanout.PolicyOutbox] != 0 || lost[fanout.PolicyQueue] == 0 {
		t.Fatalf("queue loss: want store=0 outbox=0 queue>0 lost inbox rows, got %v", lost)
	}
	t.Logf("ACKed inbox rows lost after queue loss: %v", lost)
}

func waitFor(t *testing.T, d time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("timed out")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

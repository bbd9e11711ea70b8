package server

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"imlab/ref/fanout"
	"imlab/ref/inbox"
	"imlab/ref/model"
	"imlab/ref/reconcile"
	"imlab/ref/retention"
	"imlab/ref/send"
)

// LagPath is where every process serves the lag monitor's snapshot.
const LagPath = "/v1/lab/lag"

// LagNowPath serves the same answer measured at the request (the latest
// measurement when it is under 100 ms old): the lab polls it, so that a
// sample's time is the time of its figures, not up to a second later.
const LagNowPath = "/v1/lab/lag/now"

// TimePath is where the api role serves its wall clock, {"unix_nano": N},
// so that generators on other machines estimate their clock offset to the
// server (and so to each other) before a split run.
const TimePath = "/v1/lab/time"

func clockAnswer(context.Context) (any, error) {
	return map[string]int64{"unix_nano": time.Now().UnixNano()}, nil
}

// fanoutPart is the process's queue side: the runtime (producer, metrics,
// policies, role runners) and the lag monitor with its goroutine.
type fanoutPart struct {
	rt      *fanout.Runtime
	mon     *fanout.Monitor
	monStop context.CancelFunc
	monDone chan struct{}
}

// historyTierHere tells whether this process runs the history tier, and
// which role owns it: the history role when it runs here, else the
// consumer role (so a compose "consumer" process writes history too).
func (p *Process) historyTierOwner() string {
	switch {
	case p.hist == nil || p.fan == nil:
		return ""
	case p.roleSet[RoleHistory]:
		return RoleHistory
	case p.roleSet[RoleConsumer]:
		return RoleConsumer
	}
	return ""
}

// startFanout builds the runtime (topics created when missing) and starts
// the lag monitor. The runtime's member source and commit hooks resolve
// the core on first use: the ack policy it provides must exist before the
// core does.
func (p *Process) startFanout(ctx context.Context) error {
	cfg := p.Cfg.Fanout
	deps := fanout.Deps{
		DB: p.DB, Redis: p.Redis, Keys: p.Keys, Registry: p.Registry, Log: p.Log,
		Brokers: p.Backends.KafkaBrokers,
		Members: p.members,
		NewWriter: func(d inbox.Dedup) (*inbox.Writer, error) {
			ic := p.Cfg.Inbox
			ic.Dedup = d
			return inbox.NewWriter(p.alloc, ic, p.Registry)
		},
		Hooks: []send.CommitHook{coreHooks{p}},
	}
	if p.historyTierOwner() == RoleConsumer {
		deps.History = p.hist.store
	}
	rt, err := fanout.NewRuntime(ctx, cfg, deps)
	if err != nil {
		return fmt.Errorf("server: fan-out runtime: %w", err)
	}
	// The history group is measured only where a history tier runs: without
	// one it would show the whole topic as lag forever.
	mon, err := rt.NewMonitor(p.hist != nil)
	if err != nil {
		cctx, cancel := context.WithTimeout(p.baseCtx, p.Cfg.ShutdownTimeout)
		defer cancel()
		rt.Close(cctx)
		return fmt.Errorf("server: lag monitor: %w", err)
	}
	mctx, mstop := context.WithCancel(p.baseCtx)
	f := &fanoutPart{rt: rt, mon: mon, monStop: mstop, monDone: make(chan struct{})}
	go func() { // owned by the "fanout" stop below
		defer close(f.monDone)
		_ = mon.Run(mctx)
	}()
	p.fan = f
	p.onStop("fanout", func(ctx context.Context) error {
		f.monStop()
		<-f.monDone
		f.mon.Close()
		f.rt.Close(ctx)
		return nil
	})
	return nil
}

// FanoutRuntime is the process's fan-out runtime (nil without Kafka).
func (p *Process) FanoutRuntime() *fanout.Runtime {
	if p.fan == nil {
		return nil
	}
	return p.fan.rt
}

// Lag returns the lag monitor's latest snapshot; ok is false without
// Kafka.
func (p *Process) Lag() (s fanout.LagSnapshot, ok bool) {
	if p.fan == nil {
		return s, false
	}
	return p.fan.mon.Snapshot(), true
}

func (p *Process) lagAnswer(context.Context) (any, error) {
	s, ok := p.Lag()
	if !ok {
		return nil, errNoQueue
	}
	return lagJSON(s), nil
}

// lagNowAnswer is LagNowPath's answer.
func (p *Process) lagNowAnswer(ctx context.Context) (any, error) {
	if p.fan == nil {
		return nil, errNoQueue
	}
	return lagJSON(p.fan.mon.Fresh(ctx)), nil
}

var errNoQueue = fmt.Errorf("%w: this process has no queue (no Kafka brokers configured)", model.ErrNotFound)

// lagJSON is s as the lag routes answer it (partitions [] rather than null).
func lagJSON(s fanout.LagSnapshot) fanout.LagSnapshot {
	if s.Partitions == nil {
		s.Partitions = []fanout.PartitionLag{}
	}
	return s
}

// members is the fan-out's and the reconciler's member source: the send
// service's (cached) group members.
func (p *Process) members(ctx context.Context, groupID uint64) ([]uint64, error) {
	c, err := p.Core(p.baseCtx)
	if err != nil {
		return nil, err
	}
	return c.Send.Members(ctx, groupID)
}

// coreHooks runs the core's commit hooks (hot cache, then push hub, then
// the push bus when configured) for
// inbox rows written outside the send path (consumers, direct fan-out,
// reconciliation).
type coreHooks struct{ p *Process }

func (h coreHooks) Committed(ctx context.Context, entries []model.InboxEntry) {
	c, err := h.p.Core(h.p.baseCtx)
	if err != nil {
		h.p.Log.Error("server: commit hooks: core unavailable", "err", err)
		return
	}
	c.Cache.Committed(ctx, entries)
	c.Hub.Committed(ctx, entries)
	if h.p.bus != nil {
		h.p.bus.Committed(ctx, entries)
	}
}

// runner starts run in a goroutine and returns the role's stop: cancel and
// wait (bounded by the stop context). An early end is logged.
func (p *Process) runner(role string, run func(ctx context.Context) error) func(context.Context) error {
	ctx, cancel := context.WithCancel(p.baseCtx)
	done := make(chan error, 1)
	go func() { // owned by the returned stop
		err := run(ctx)
		if ctx.Err() == nil {
			p.Log.Error("server: role ended on its own", "role", role, "err", err)
		}
		done <- err
	}()
	return func(sctx context.Context) error {
		cancel()
		select {
		case err := <-done:
			if errors.Is(err, context.Canceled) {
				err = nil
			}
			return err
		case <-sctx.Done():
			return fmt.Errorf("%s did not stop in time: %w", role, sctx.Err())
		}
	}
}

// StartRelay is the relay role: the outbox relay (ordered scan, publish,
// mark, requeue, cleanup).
func StartRelay(_ context.Context, p *Process) (func(context.Context) error, error) {
	if p.fan == nil {
		return nil, fmt.Errorf("%w: relay needs Kafka brokers", model.ErrInvalid)
	}
	return p.runner(RoleRelay, p.fan.rt.RunRelay), nil
}

// StartConsumer is the consumer role: the inbox tier (and the history tier
// when this process owns it, see historyTierOwner). The core is built
// first so that the tier's hooks and member lookups find it.
func StartConsumer(ctx context.Context, p *Process) (func(context.Context) error, error) {
	if p.fan == nil {
		return nil, fmt.Errorf("%w: consumer needs Kafka brokers", model.ErrInvalid)
	}
	if _, err := p.Core(ctx); err != nil {
		return nil, err
	}
	return p.runner(RoleConsumer, p.fan.rt.RunConsumer), nil
}

// StartHistoryTier is the history role: the history tier alone (its own
// consumer group, writing MongoDB buckets).
func StartHistoryTier(_ context.Context, p *Process) (func(context.Context) error, error) {
	if p.fan == nil || p.hist == nil {
		return nil, fmt.Errorf("%w: the history role needs Kafka brokers and MongoDB", model.ErrInvalid)
	}
	cfg := p.Cfg.Fanout
	hs, err := fanout.NewHistorySink(p.DB, p.hist.store)
	if err != nil {
		return nil, err
	}
	cc := cfg.Consumer
	cc.Brokers, cc.Topic, cc.DLQTopic = p.Backends.KafkaBrokers, cfg.Topics.Fanout, cfg.Topics.DLQ
	cc.Group, cc.Tier = cfg.HistoryGroup, "history"
	if cc.Logger == nil {
		cc.Logger = p.Log
	}
	c, err := fanout.NewConsumer(cc, hs, p.fan.rt.Producer(), p.fan.rt.Metrics())
	if err != nil {
		return nil, fmt.Errorf("server: history tier: %w", err)
	}
	return p.runner(RoleHistory, c.Run), nil
}

// StartReconciler is the reconciler role: reconciliation (forward, reverse,
// push) and retention, each on its own timer.
func StartReconciler(ctx context.Context, p *Process) (func(context.Context) error, error) {
	r, err := p.Reconciler(ctx)
	if err != nil {
		return nil, err
	}
	tc := p.Cfg.Retention
	if tc.Logger == nil {
		tc.Logger = p.Log
	}
	ret, err := retention.New(tc, p.DB, &p.retention) // the log: RetentionPath
	if err != nil {
		return nil, err
	}
	stopR := p.runner("reconciler/reconcile", func(ctx context.Context) error { return r.RunTimer(ctx, nil) })
	stopT := p.runner("reconciler/retention", ret.RunTimer)
	return func(ctx context.Context) error { return errors.Join(stopT(ctx), stopR(ctx)) }, nil
}

// Reconciler builds reconciliation as the reconciler role runs it: the
// process's allocator and inbox config (with the repair's dedup: an inbox
// row or a retention tombstone is delivered), the horizon of its
// retention (unless Config.Reconcile sets one), its metrics, the core's group
// membership, and the core's commit hooks (hot cache, push hub, and the
// push bus when on), so that a repaired row reaches the hot cache and the
// devices as a sent one does. imlab reconcile runs one pass of it.
func (p *Process) Reconciler(ctx context.Context) (*reconcile.Reconciler, error) {
	core, err := p.Core(ctx)
	if err != nil {
		return nil, err
	}
	ic := p.Cfg.Inbox
	ic.Dedup = reconcile.RepairDedup{} // a row retention deleted is not written again
	w, err := inbox.NewWriter(p.alloc, ic, p.Registry)
	if err != nil {
		return nil, fmt.Errorf("server: reconciler writer: %w", err)
	}
	m, err := reconcile.NewMetrics(p.Registry)
	if err != nil {
		return nil, fmt.Errorf("server: reconciler metrics: %w", err)
	}
	rc := p.Cfg.Reconcile
	if rc.Horizon == 0 {
		rc.Horizon = p.Cfg.Retention.Horizon()
	}
	if rc.Logger == nil {
		rc.Logger = p.Log
	}
	hooks := []send.CommitHook{core.Cache, core.Hub, &p.repairs} // the repair log: RepairsPath
	if p.bus != nil {
		hooks = append(hooks, p.bus)
	}
	return reconcile.New(rc, p.DB, w, core.Send.Members, nil, m, hooks...)
}

// strictHistory feeds the history tier under the strict policy, which
// publishes nothing: after commit, one locator event per new message goes
// to the fan-out topic (in conv_seq order per conversation: a shard's
// batches commit, and call their hooks, one after another). The events are
// marked InboxDone, so the inbox tier skips them without touching storage;
// the history tier writes the buckets. A publish that fails is logged and counted: that
// message is missing from MongoDB history (its inbox rows are committed).
type strictHistory struct {
	p     *Process
	topic string
}

func (h strictHistory) Committed(ctx context.Context, entries []model.InboxEntry) {
	seen := make(map[uint64]bool, len(entries))
	var msgs []model.Message
	for _, e := range entries {
		if seen[e.MsgID] {
			continue
		}
		seen[e.MsgID] = true
		msgs = append(msgs, model.Message{MsgID: e.MsgID, ConvID: e.ConvID, ConvType: e.ConvType, ConvSeq: e.ConvSeq,
			SenderUID: e.SenderUID, CreatedAt: e.CreatedAt, Content: e.Content})
	}
	slices.SortFunc(msgs, func(a, b model.Message) int {
		if c := cmp.Compare(a.ConvID, b.ConvID); c != 0 {
			return c
		}
		return cmp.Compare(a.ConvSeq, b.ConvSeq)
	})
	ctx = context.WithoutCancel(ctx)
	prod := h.p.fan.rt.Producer()
	for _, m := range msgs {
		ev := fanout.EventOf(m, false)
		ev.InboxDone = true
		b, err := ev.Marshal()
		if err != nil {
			h.p.Log.Error("server: strict history event", "msg_id", m.MsgID, "err", err)
			continue
		}
		rec := &kgo.Record{Topic: h.topic, Key: fanout.ShardKey(m.ConvID), Value: b, Timestamp: time.Now()}
		id := m.MsgID
		prod.Publish(ctx, rec, func(err error) {
			if err != nil {
				h.p.Log.Warn("server: strict policy: history event not published; the message is missing from history", "msg_id", id, "err", err)
			}
		})
	}
}
